"""Findings of the differential fuzzer (fuzz_api.py --torch, seed 1127), each fixed and pinned
here: a Python ZeroDivisionError where a clear error belongs, a silently wrapped dim, a
non-tensor accepted, a 0-d tensor refused where PyTorch accepts it."""

from __future__ import annotations

import warnings

import ember
import ember.nn.functional as F
import pytest


def test_tensorsolve_checks_its_dims_like_torch():
    a, b = ember.tensor(0.5, dtype=ember.float64), ember.tensor(-0.595, dtype=ember.float64)
    # A 0-d A wraps dims as a 1-d one: -1 and 0 are fine, the rest out of range (not `% 0`).
    for dims in ([-1], [0]):
        assert ember.linalg.tensorsolve(a, b, dims=dims).item() == pytest.approx(-1.19)
    for dims in ([1], [-2]):
        with pytest.raises(IndexError, match=r"range of \[-1, 0\]"):
            ember.linalg.tensorsolve(a, b, dims=dims)
    # An out-of-range dim used to wrap silently (5 % 3 == 2).
    A = ember.eye(6).reshape(2, 3, 6)
    with pytest.raises(IndexError, match=r"range of \[-3, 2\], but got 5"):
        ember.linalg.tensorsolve(A, ember.ones(2, 3), dims=[5])
    x = ember.linalg.tensorsolve(ember.eye(6).reshape(6, 2, 3).permute(1, 2, 0), ember.ones(6),
                                 dims=[0, 1])
    assert tuple(x.shape) == (2, 3)


def test_multi_head_attention_forward_names_a_bad_num_heads():
    q = ember.ones(3, 1, 4)
    w, b = ember.ones(12, 4), ember.ones(12)
    for heads in (0, -2, 2.0, True):
        with pytest.raises(ValueError, match="num_heads must be a positive int"):
            F.multi_head_attention_forward(q, q, q, 4, heads, w, b, None, None, False, 0.0,
                                           ember.ones(4, 4), ember.ones(4), training=False)


def test_resolve_neg_and_conj_refuse_non_tensors():
    for fn in (ember.resolve_neg, ember.resolve_conj):
        with pytest.raises(TypeError, match="must be Tensor, not NoneType"):
            fn(None)
    assert ember.ones(2).resolve_neg().tolist() == [1.0, 1.0]


def test_adjoint_of_a_0d_tensor_warns_and_conjugates_like_torch():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ember.adjoint(ember.tensor(1 + 2j)).item() == 1 - 2j
        assert ember.adjoint(ember.tensor(3.0)).item() == 3.0
    assert sum("deprecated on 0-D" in str(c.message) for c in caught) == 2
    with pytest.raises(RuntimeError, match="Got 1-D tensor"):
        ember.adjoint(ember.ones(2))


def test_hardtanh_and_relu6_of_integer_tensors_like_torch():
    x = ember.tensor([-1, 3, 7], dtype=ember.int32)
    assert F.relu6(x).tolist() == [0, 3, 6] and F.relu6(x).dtype == ember.int32
    assert F.hardtanh(x, -2, 5).tolist() == [-1, 3, 5]
    y = x.clone()
    assert F.relu6(y, inplace=True) is y and y.tolist() == [0, 3, 6]
    assert ember.nn.ReLU6()(ember.tensor([9], dtype=ember.uint8)).tolist() == [6]
    with pytest.raises(RuntimeError, match="Bool inputs not supported"):
        F.hardtanh(ember.tensor([True]))
    torch = pytest.importorskip("torch")
    t = torch.tensor([-1, 3, 7], dtype=torch.int32)
    assert torch.nn.functional.hardtanh(t, -2, 5).tolist() == F.hardtanh(x, -2, 5).tolist()


def _constant(slices):
    return all(len(set(s.flatten().tolist())) == 1 for s in slices)


def test_dropout2d_shapes_follow_torchs_historical_rules():
    ember.manual_seed(0)
    with pytest.warns(UserWarning, match="3-D input is read as"):
        y = F.dropout2d(ember.ones(8, 3, 5), 0.5, training=True)
    assert _constant(y.reshape(-1, 5)) and not _constant(y)  # one entry per (n, c), as torch
    with pytest.warns(UserWarning, match="5-D input is deprecated"):
        y = F.dropout2d(ember.ones(4, 4, 2, 2, 2), 0.5, training=True)
    assert _constant(y.reshape(16, -1))
    with pytest.warns(UserWarning, match="2-D input is deprecated"):
        assert tuple(F.dropout2d(ember.ones(6, 8), 0.5, training=False).shape) == (6, 8)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.dropout2d(ember.ones(5), 0.5)
    x = ember.ones(2, 3, 4)
    with pytest.warns(UserWarning):
        assert F.dropout2d(x, 0.5, training=True, inplace=True) is x
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.nn.functional.dropout2d(torch.ones(8, 3, 5), 0.5, training=True)
    assert _constant(t.reshape(-1, 5)) and not _constant(t)


def test_addr_of_bool_tensors_stays_bool_like_torch():
    b = ember.arange(5) % 3 == 0
    c = ember.arange(5) % 2 == 0
    s = ember.arange(5) % 4 == 0
    outer = [[bool(x and y) for y in c.tolist()] for x in b.tolist()]
    for beta, alpha in [(1, 1), (2, -1), (0, 1), (1, 0), (0, 0)]:
        r = ember.addr(s, b, c, beta=beta, alpha=alpha)
        assert r.dtype == ember.bool, (beta, alpha)
        want = [[bool((beta and s.tolist()[j]) or (alpha and outer[i][j])) for j in range(5)]
                for i in range(5)]
        assert r.tolist() == want, (beta, alpha)
