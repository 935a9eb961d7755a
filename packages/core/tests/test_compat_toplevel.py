"""Top-level functions and tensor attributes found missing while running real programs
(issue 15): type predicates, ``in``, layouts, determinism switches, diff/logit/erfc/clamp_min/
clamp_max/detach. Checked against torch where it is installed."""

from __future__ import annotations

import pickle

import ember
import numpy as np
import pytest


def _torch():
    return pytest.importorskip("torch")


def test_predicates_match_torch():
    torch = _torch()
    for data, dt in (([1.5, -2.0], "float32"), ([1, 2], "int64"), ([True, False], "bool"),
                     ([3, 4], "uint8")):
        e = ember.tensor(np.array(data, dtype=dt))
        t = torch.tensor(np.array(data, dtype=dt))
        assert ember.is_tensor(e) and torch.is_tensor(t)
        assert ember.is_floating_point(e) == torch.is_floating_point(t)
        assert ember.is_complex(e) == torch.is_complex(t) == e.is_complex() is False
        assert e.is_signed() == t.is_signed(), dt
        assert e.dtype.is_complex == t.dtype.is_complex
        assert ember.numel(e) == torch.numel(t) == 2
        assert ember.typename(e).split(".")[1] == torch.typename(t).split(".")[1]
    assert not ember.is_tensor([1.0]) and not ember.is_tensor(np.ones(2))
    assert ember.is_tensor(ember.nn.Parameter(ember.ones(1)))
    assert ember.typename(1.5) == torch.typename(1.5) == "float"
    assert ember.typename(np.ones(1)) == torch.typename(np.ones(1)) == "numpy.ndarray"
    assert ember.is_same_size(ember.ones(2, 3), ember.zeros(2, 3))
    assert not ember.is_same_size(ember.ones(2, 3), ember.zeros(3, 2))
    with pytest.raises(TypeError, match=r"is_floating_point\(\): argument 'input' must be Tensor"):
        ember.is_floating_point([1.0])


def test_is_nonzero():
    assert ember.is_nonzero(ember.tensor([2])) and not ember.is_nonzero(ember.tensor(0.0))
    assert ember.is_nonzero(ember.tensor([[True]]))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        ember.is_nonzero(ember.ones(2))
    with pytest.raises(RuntimeError, match="no values is ambiguous"):
        ember.is_nonzero(ember.ones(0))


def test_contains_matches_torch():
    torch = _torch()
    a = np.arange(6.0).reshape(2, 3)
    e, t = ember.from_numpy(a), torch.from_numpy(a)
    for v in (4.0, 4, 7, -1.5):
        assert (v in e) == (v in t), v
    assert (ember.tensor(5.0) in e) and (ember.tensor([9.0, 9.0, 2.0]) in e)
    with pytest.raises(RuntimeError, match="only supports Tensor or scalar, but you passed in a str"):
        "x" in e  # noqa: B015


def test_layout_attributes():
    torch = _torch()
    e = ember.ones(2)
    assert e.layout is ember.strided and repr(ember.strided) == "ember.strided"
    assert repr(torch.ones(2).layout) == "torch.strided"
    assert not (e.is_sparse or e.is_quantized or e.is_mkldnn)
    assert pickle.loads(pickle.dumps(ember.strided)) is ember.strided


def test_deterministic_switches_match_torch():
    torch = _torch()
    try:
        for lib in (ember, torch):
            assert lib.are_deterministic_algorithms_enabled() is False
            lib.use_deterministic_algorithms(True, warn_only=True)
            assert lib.are_deterministic_algorithms_enabled() is True
            assert lib.is_deterministic_algorithms_warn_only_enabled() is True
            lib.use_deterministic_algorithms(False)
            assert lib.is_deterministic_algorithms_warn_only_enabled() is False
    finally:
        ember.use_deterministic_algorithms(False)
        torch.use_deterministic_algorithms(False)
    with pytest.raises(TypeError, match="mode must be a bool"):
        ember.use_deterministic_algorithms("yes")


def test_seed_and_interop_threads():
    s = ember.seed()
    assert isinstance(s, int) and ember.initial_seed() == s
    assert ember.get_num_interop_threads() >= 1
    with pytest.raises(RuntimeError, match="expected a positive int"):
        ember.set_num_interop_threads(0)


@pytest.mark.parametrize("n,dim", [(1, -1), (2, 0), (3, 1), (0, 1), (5, 1)])
def test_diff_matches_torch(n, dim):
    torch = _torch()
    a = np.random.default_rng(0).standard_normal((3, 4))
    pre = np.ones((3, 1)) if dim in (1, -1) else np.ones((1, 4))
    kw_e = dict(n=n, dim=dim, prepend=ember.from_numpy(pre))
    kw_t = dict(n=n, dim=dim, prepend=torch.from_numpy(pre))
    np.testing.assert_allclose(ember.diff(ember.from_numpy(a), **kw_e).numpy(),
                               torch.diff(torch.from_numpy(a), **kw_t).numpy())
    np.testing.assert_allclose(ember.from_numpy(a).diff(n=n, dim=dim).numpy(),
                               torch.from_numpy(a).diff(n=n, dim=dim).numpy())
    b = np.array([True, True, False, True])
    assert ember.tensor(b).diff().tolist() == torch.tensor(b).diff().tolist()
    i = np.array([1, 4, 9, 16, 25])
    assert ember.tensor(i).diff(append=ember.tensor([36])).tolist() == \
        torch.tensor(i).diff(append=torch.tensor([36])).tolist()


def test_diff_grad_and_errors():
    x = ember.tensor([1.0, 3.0, 2.0, 5.0], dtype=ember.float64, requires_grad=True)
    (ember.diff(x, n=2) * ember.tensor([1.0, 2.0], dtype=ember.float64)).sum().backward()
    # d/dx of (x2 - 2x1 + x0) + 2 (x3 - 2x2 + x1)
    assert x.grad.tolist() == [1.0, 0.0, -3.0, 2.0]
    with pytest.raises(RuntimeError, match="at least one-dimensional"):
        ember.diff(ember.tensor(1.0))
    with pytest.raises(RuntimeError, match="n to be a non-negative int"):
        ember.diff(ember.ones(3), n=-1)
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        ember.diff(ember.ones(3), dim=2)
    with pytest.raises(RuntimeError, match="prepend to have as many dimensions"):
        ember.diff(ember.ones(2, 3), prepend=ember.ones(3))


def test_small_ops_match_torch():
    torch = _torch()
    a = np.array([0.02, 0.3, 0.5, 0.97], dtype=np.float64)
    e, t = ember.from_numpy(a), torch.from_numpy(a)
    for eps in (None, 0.05):
        np.testing.assert_allclose(ember.logit(e, eps).numpy(), torch.logit(t, eps).numpy())
        np.testing.assert_allclose(e.logit(eps).numpy(), t.logit(eps).numpy())
    np.testing.assert_allclose(ember.erfc(e).numpy(), torch.erfc(t).numpy(), rtol=1e-12)
    np.testing.assert_allclose(e.erfc().numpy(), torch.erfc(t).numpy(), rtol=1e-12)
    np.testing.assert_array_equal(ember.clamp_min(e, 0.4).numpy(), torch.clamp_min(t, 0.4).numpy())
    np.testing.assert_array_equal(e.clamp_max(0.4).numpy(), t.clamp_max(0.4).numpy())
    x = ember.ones(2, requires_grad=True)
    d = ember.detach(x * 2)
    assert not d.requires_grad and d.tolist() == [2.0, 2.0]
    # logit's gradient: 1 / (p (1 - p))
    p = ember.tensor([0.25], dtype=ember.float64, requires_grad=True)
    ember.logit(p).sum().backward()
    assert p.grad.item() == pytest.approx(1 / (0.25 * 0.75))


ALIASES = ["absolute", "arctan2", "divide", "multiply", "subtract", "greater", "greater_equal",
           "less", "less_equal", "negative", "not_equal", "arccos", "arcsin", "arctan", "fix",
           "true_divide"]
UNARY = {"absolute", "negative", "arccos", "arcsin", "arctan", "fix"}


@pytest.mark.parametrize("name", ALIASES)
def test_aliases_match_torch(name):
    torch = _torch()
    a = np.array([0.5, -0.25, 0.75, -0.9])
    b = np.array([0.25, -0.5, 0.75, 0.3])
    args_e = (ember.from_numpy(a),) if name in UNARY else (ember.from_numpy(a), ember.from_numpy(b))
    args_t = (torch.from_numpy(a),) if name in UNARY else (torch.from_numpy(a), torch.from_numpy(b))
    want = getattr(torch, name)(*args_t).numpy()
    np.testing.assert_allclose(getattr(ember, name)(*args_e).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(getattr(args_e[0], name)(*args_e[1:]).numpy(), want, rtol=1e-12)
    if want.dtype == np.float64:  # comparisons have no in-place form on a float tensor here
        x = args_e[0].clone()
        getattr(x, name + "_")(*args_e[1:])
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-12)


def test_divide_rounding_mode_and_device_queries():
    torch = _torch()
    a = np.array([7.0, -7.0])
    assert ember.divide(ember.from_numpy(a), 2, rounding_mode="floor").tolist() == \
        torch.divide(torch.from_numpy(a), 2, rounding_mode="floor").tolist()
    x = ember.tensor([-1.0, 0.5, 3.0])
    assert x.get_device() == torch.ones(1).get_device() == -1
    assert not x.is_inference()
    assert x.clone().clamp_min_(0.0).tolist() == [0.0, 0.5, 3.0]
    assert x.clone().clamp_max_(1.0).tolist() == [-1.0, 0.5, 1.0]
