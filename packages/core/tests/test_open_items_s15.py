"""Items left open by session 13, each fixed and pinned here with explicit values (and against
PyTorch where it is installed): amax/amin with dim=None, out= tensors that choose the dtype a
reduction, scan or factory computes in, take_along_dim's flattened form refusing negative
indices, complex linspace, and autograd graph nodes whose Python type is named after them."""

from __future__ import annotations

import gc

import ember
import numpy as np
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

X = np.array([[0.5, -2.0, 3.0], [4.0, 1.0, -6.0]])


# ---- amax / amin with dim=None -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_amin_dim_none_reduce_everything(name):
    ref = getattr(np, name)(X)
    x = ember.tensor(X)
    for r in (getattr(ember, name)(x, dim=None), getattr(ember, name)(x), getattr(x, name)(None),
              getattr(ember, name)(x, ())):
        assert r.shape == () and r.item() == ref
    r = getattr(ember, name)(x, dim=None, keepdim=True)
    assert r.shape == (1, 1) and r.item() == ref
    # one dim and a list of dims still work as before
    np.testing.assert_array_equal(getattr(ember, name)(x, 1).numpy(), getattr(np, name)(X, 1))
    np.testing.assert_array_equal(getattr(ember, name)(x, [0, 1]).numpy(), ref)


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_amin_dim_none_gradient_shared_by_ties(name):
    x = ember.tensor([[1.0, 5.0], [5.0, -5.0]], requires_grad=True)
    getattr(ember, name)(x, dim=None).backward()
    want = [[0.0, 0.5], [0.5, 0.0]] if name == "amax" else [[0.0, 0.0], [0.0, 1.0]]
    np.testing.assert_array_equal(x.grad.numpy(), want)


# ---- out= chooses the computation dtype -----------------------------------------------------------


def test_half_cumsum_into_float_out_does_not_overflow():
    x = ember.tensor([60000.0, 60000.0, -60000.0], dtype=ember.float16)
    out = ember.empty(3, dtype=ember.float32)
    r = ember.cumsum(x, 0, out=out)
    assert r is out
    np.testing.assert_array_equal(out.numpy(), [60000.0, 120000.0, 60000.0])
    # with an explicit dtype= the out tensor must take it (as before)
    out64 = ember.empty(3, dtype=ember.float64)
    ember.cumsum(x, 0, dtype=ember.float64, out=out64)
    np.testing.assert_array_equal(out64.numpy(), [60000.0, 120000.0, 60000.0])


def test_reductions_compute_in_out_dtype():
    x = ember.tensor([60000.0, 60000.0, -60000.0], dtype=ember.float16)
    out = ember.empty((), dtype=ember.float32)
    assert ember.mean(x, 0, out=out).item() == 20000.0
    assert ember.nansum(x, 0, out=out).item() == 60000.0
    out3 = ember.empty(3, dtype=ember.float32)
    np.testing.assert_array_equal(ember.cumprod(x, 0, out=out3).numpy(),
                                  np.cumprod(np.float32([60000.0, 60000.0, -60000.0])))
    # an int8 scan into an int8 out= wraps as int8 arithmetic does
    i8 = ember.tensor([100, 100, 100], dtype=ember.int8)
    o8 = ember.empty(3, dtype=ember.int8)
    assert ember.cumsum(i8, 0, out=o8).tolist() == [100, -56, 44]


def test_factories_fill_out_in_its_dtype():
    out = ember.empty(4, dtype=ember.float64)
    ember.manual_seed(3)
    ember.randn(4, out=out)
    ember.manual_seed(3)
    direct = ember.randn(4, dtype=ember.float64)
    np.testing.assert_array_equal(out.numpy(), direct.numpy())
    o = ember.empty(5, dtype=ember.float32)
    assert ember.arange(5, out=o).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert o.dtype == ember.float32


@needs_torch
def test_out_dtype_rules_match_torch():
    for mod in (ember, torch):
        x = mod.tensor([60000.0, 60000.0, -60000.0], dtype=mod.float16)
        o = mod.empty(3, dtype=mod.float32)
        mod.cumsum(x, 0, out=o)
        o2 = mod.empty((), dtype=mod.float32)
        mod.mean(x, 0, out=o2)
        if mod is ember:
            got = (o.tolist(), o2.item())
        else:
            ref = (o.tolist(), o2.item())
    assert got == ref


# ---- take_along_dim without dim ------------------------------------------------------------------


def test_take_along_dim_flattened_refuses_negative_indices():
    x = ember.arange(6.0)
    with pytest.raises((IndexError, RuntimeError), match="take_along_dim.*-1"):
        ember.take_along_dim(x, ember.tensor([-1, 2]))
    assert ember.take_along_dim(x, ember.tensor([5, 2])).tolist() == [5.0, 2.0]
    # with a dim, negative indices count from the end (as torch's)
    y = x.reshape(2, 3)
    assert ember.take_along_dim(y, ember.tensor([[-1]]), 1).tolist() == [[2.0], [5.0]]


@needs_torch
def test_take_along_dim_negative_matches_torch():
    for mod in (ember, torch):
        x = mod.arange(6.0)
        with pytest.raises((IndexError, RuntimeError)):  # ember: IndexError, as its indexing
            mod.take_along_dim(x, mod.tensor([-1]))
        assert mod.take_along_dim(x.reshape(2, 3), mod.tensor([[-1]]), 1).tolist() == [[2.0], [5.0]]


# ---- complex linspace ----------------------------------------------------------------------------


def test_linspace_complex_ends():
    r = ember.linspace(0, 1 + 2j, 5)
    assert r.dtype == ember.complex64
    np.testing.assert_allclose(r.numpy(), np.linspace(0, 1 + 2j, 5), rtol=1e-6)
    r = ember.linspace(-1j, 3 - 1j, 4, dtype=ember.complex128)
    assert r.dtype == ember.complex128
    np.testing.assert_allclose(r.numpy(), np.linspace(-1j, 3 - 1j, 4), rtol=1e-15)
    assert ember.linspace(0, 1j, 0).shape == (0,)
    assert ember.linspace(2j, 5j, 1).tolist() == [2j]
    # real ends with a complex dtype
    np.testing.assert_allclose(ember.linspace(0, 1, 3, dtype=ember.cfloat).numpy(),
                               [0, 0.5, 1])
    prev = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.linspace(0, 1j, 3).dtype == ember.complex128
    finally:
        ember.set_default_dtype(prev)


@needs_torch
def test_linspace_complex_matches_torch():
    e = ember.linspace(0.5, 1 + 2j, 7)
    t = torch.linspace(0.5, 1 + 2j, 7)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


# ---- graph node types ----------------------------------------------------------------------------


def test_graph_nodes_have_types_named_after_them():
    x = ember.randn(3, requires_grad=True)
    y = (x * 2).sum()
    fn = y.grad_fn
    assert type(fn).__name__ == "SumBackward0" and repr(type(fn)) == "<class 'SumBackward0'>"
    assert isinstance(fn, ember.autograd.graph.Node) and isinstance(fn, ember._C.Node)
    mul = fn.next_functions[0][0]
    acc = mul.next_functions[0][0]
    assert type(mul).__name__ == "MulBackward0"
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is not None
    # the same node gives the same object, and one type per name
    assert y.grad_fn is fn
    assert type((x + 1).sum().grad_fn) is type(fn)


def test_named_nodes_still_work_as_nodes():
    x = ember.randn(3, requires_grad=True, dtype=ember.float64)
    y = (x.exp() * 3).sum()
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append("post"))
    y.grad_fn.next_functions[0][0].register_prehook(lambda go: seen.append("pre"))
    y.backward()
    assert seen == ["post", "pre"]
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp(x.detach().numpy()))
    with pytest.raises(AttributeError):  # the named types add no instance __dict__
        y.grad_fn.note = 1
    # many graphs come and go: the nodes are freed with their tensors
    for _ in range(200):
        z = (x * x).sum()
        _ = z.grad_fn.next_functions
        del z, _
    gc.collect()
    assert type(x.grad_fn) is type(None)


# ---- lerp of half tensors by a large scalar weight -------------------------------------------------


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_lerp_keeps_a_scalar_weight_in_float(dt):
    d = getattr(ember, dt)
    s = ember.tensor([2.0, 1.0, -3.0], dtype=d)
    e = ember.tensor([2.0, 1.0078125, 5.0], dtype=d)
    for w in (7e4, 1e10, -2.5, 0.25, 0.75):
        got = ember.lerp(s, e, w).float().numpy()
        a, b = s.float().numpy().astype(np.float64), e.float().numpy().astype(np.float64)
        want = np.where(abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))
        want = ember.tensor(want.astype(np.float32)).to(d).float().numpy()  # rounded once
        np.testing.assert_array_equal(got, want)
        assert not np.isnan(got).any()
    out = ember.empty(3, dtype=d)
    assert ember.lerp(s, e, 7e4, out=out) is out and out[0].item() == 2.0


@needs_torch
def test_half_lerp_scalar_weight_matches_torch():
    for w in (7e4, 1e10, 3.0, -0.3):
        got = ember.lerp(ember.tensor([2.0, 1.0], dtype=ember.float16),
                         ember.tensor([2.0, 1.0009765625], dtype=ember.float16), w)
        ref = torch.lerp(torch.tensor([2.0, 1.0], dtype=torch.float16),
                         torch.tensor([2.0, 1.0009765625], dtype=torch.float16), w)
        np.testing.assert_array_equal(got.float().numpy(), ref.float().numpy())


# ---- ember.__version__ -------------------------------------------------------------------------


def test_version_reports_the_followed_torch_release():
    from ember.torch_version import TorchVersion

    v = ember.__version__
    assert isinstance(v, TorchVersion) and v == ember.version.__version__
    api, local = v.split("+", 1)
    assert api == ember.version.TORCH_API_VERSION and local.startswith("ember.")
    # what programs gate on
    assert v >= "2.0" and v >= (1, 13) and not v < "2.13"
    own = ember.version.ember_version
    assert isinstance(own, str) and own and own[0].isdigit()
    try:
        from packaging.version import Version
    except ImportError:
        return
    parsed = Version(v)  # a valid PEP 440 version: the local label is sanitised
    assert parsed.release[:2] == (2, 13) and parsed.local.startswith("ember")
    assert parsed >= Version("2.0")


# ---- small private APIs that libraries call ----------------------------------------------------


def test_config_and_private_helpers():
    text = ember.__config__.show()
    assert text.startswith("ember built with:") and ember.version.TORCH_API_VERSION in text
    assert f"get_num_threads() : {ember.get_num_threads()}" in ember.__config__.parallel_info()
    from ember._utils import _get_device_index

    assert _get_device_index("cuda:2") == 2 and _get_device_index(ember.device("cuda", 1)) == 1
    assert _get_device_index(4) == 4 and _get_device_index("cpu", allow_cpu=True) == -1
    with pytest.raises(ValueError, match="non cpu device"):
        _get_device_index("cpu")
    with pytest.raises(ValueError, match="specified index"):
        _get_device_index("cuda")
    assert ember._C._get_tracing_state() is None
    assert ember._C._log_api_usage_once("python.my_model") is None


@needs_torch
def test_get_device_index_matches_torch():
    from ember._utils import _get_device_index as got
    from torch._utils import _get_device_index as ref

    for args, kw in [(("cuda:3",), {}), ((7,), {}), (("cpu",), {"allow_cpu": True})]:
        assert got(*args, **kw) == ref(*args, **kw)


def _sym_calls(M):
    return [M.sym_int(2.7), M.sym_int(-2.7), M.sym_float(3), M.sym_max(2, 3.5), M.sym_max(2.0, 3),
            M.sym_min(2, 3.0), M.sym_min(4, 1), M.sym_not(0), M.sym_ite(False, 1, 2),
            M.sym_sqrt(9), M.sym_sum([1, 2, 3]), M.sym_fresh_size(7),
            M.sym_constrain_range(5, min=0, max=10), M.sym_constrain_range_for_size(5)]


def test_sym_helpers_and_build_flags():
    got = _sym_calls(ember)
    assert got == [2, -2, 3.0, 3.5, 3.0, 2.0, 1, True, 2, 3.0, 6, 7, None, None]
    assert [type(v) for v in got[3:7]] == [float, float, float, int]
    with pytest.raises(TypeError, match="sym_max"):
        ember.sym_max(ember.tensor(2), 3)
    assert ember.has_lapack and ember.has_spectral
    assert ember.wait(ember.fork(lambda x: x + 1, ember.ones(2))).tolist() == [2.0, 2.0]


@needs_torch
def test_sym_helpers_match_torch():
    got, ref = _sym_calls(ember), _sym_calls(torch)
    assert got == ref and [type(v) for v in got] == [type(v) for v in ref]
    assert (ember.has_lapack, ember.has_spectral) == (torch.has_lapack, torch.has_spectral)


def test_cuda_queries_libraries_make_without_a_gpu():
    assert ember.cuda.is_current_stream_capturing() is False
    assert ember.cuda.get_allocator_backend() == "native"
    assert ember.cuda.has_half is True and ember.cuda.has_magma is False


# ---- a view made a leaf keeps its base ------------------------------------------------------------


def _view_leaf_facts(M):
    a = M.zeros(10, dtype=M.float64)
    v = a[:5]
    v.requires_grad_()
    w = v[:2]
    facts = [v._is_view(), v._base is a, v.is_leaf, v.grad_fn is None,
             w._is_view(), w._base is a, w.is_leaf, w.grad_fn is None]
    errors = []
    for t in (v, w):
        try:
            t.mul_(2)
            errors.append(None)
        except RuntimeError as e:
            errors.append("a view of a leaf Variable that requires grad" in str(e))
    (w * 3).sum().backward()
    a.add_(1)  # the base needs no grad: writing it is allowed and leaves v a leaf
    return facts, errors, v.grad.tolist(), v.is_leaf, v.grad_fn is None, v.tolist()


def test_view_made_leaf_keeps_its_base():
    facts, errors, grad, still_leaf, no_fn, values = _view_leaf_facts(ember)
    assert facts == [True, True, True, True, True, True, False, False]
    assert errors == [True, True]
    assert grad == [3.0, 3.0, 0.0, 0.0, 0.0] and still_leaf and no_fn and values == [1.0] * 5
    # without requires_grad_() on the view, in-place writes through views stay allowed
    a = ember.zeros(4)
    a[:2].mul_(2)
    a[1:][:2].add_(1)
    assert a.tolist() == [0.0, 1.0, 1.0, 0.0]


@needs_torch
def test_view_made_leaf_matches_torch():
    assert _view_leaf_facts(ember) == _view_leaf_facts(torch)


# ---- out= for results that are never differentiable ---------------------------------------------


def _nondiff_out(M):
    x = M.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    o = M.empty(3, dtype=M.bool)
    rows = [M.gt(x, 0, out=o).tolist(), M.le(x, x, out=o).tolist(),
            M.logical_not(x, out=o).tolist(), M.logical_and(x, x, out=o).tolist(),
            M.eq(x, 0.5, out=o).tolist(), o.requires_grad]
    try:
        M.floor(x, out=M.empty(3))  # differentiable: still refused
        rows.append("ok")
    except RuntimeError as e:
        rows.append("out=" in str(e))
    return rows


def test_out_for_non_differentiable_results_with_grad_inputs():
    assert _nondiff_out(ember) == [[False, True, True], [True, True, True],
                                   [False, False, False], [True, True, True],
                                   [False, True, False], False, True]


@needs_torch
def test_out_for_non_differentiable_results_matches_torch():
    assert _nondiff_out(ember) == _nondiff_out(torch)
