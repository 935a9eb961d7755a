"""torch-namespace functions ported programs call: the table-generated in-place functions
(ember.abs_ ...) and *_copy views, as_strided_scatter, slice_inverse, frombuffer, from_file,
empty_permuted, segment_reduce, cond, while_loop, set_flush_denormal, the predicates as functions,
and Tensor.as_subclass / resize / resize_as / output_nr / name / const_data_ptr / chalf and the
device predicates. Checked against torch."""

from __future__ import annotations

import array
import os
import warnings

import ember
import numpy as np
import pytest
from ember._torch_variants import COPY_VIEWS, INPLACE_FUNCTIONS

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)


def _pair(*shape, dtype="float32", low=None):
    a = RNG.standard_normal(shape).astype(dtype)
    if low is not None:
        a = np.abs(a) + low
    return ember.tensor(a), torch.tensor(a)


# ---- in-place functions -------------------------------------------------------------------------
def test_every_listed_inplace_function_exists_in_torch_and_ember():
    for name in INPLACE_FUNCTIONS:
        assert hasattr(torch, name), name
        assert callable(getattr(ember, name)), name


UNARY_INPLACE = ["abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
                 "arctan_", "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "cos_",
                 "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_",
                 "floor_", "frac_", "i0_", "log10_", "log1p_", "log2_", "log_", "logit_", "neg_",
                 "negative_", "rad2deg_", "reciprocal_", "round_", "rsqrt_", "sigmoid_", "sin_",
                 "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "nan_to_num_"]


@pytest.mark.parametrize("name", UNARY_INPLACE)
def test_unary_inplace_functions_match_torch(name):
    domain = {"acosh_": 1.0, "arccosh_": 1.0}
    a = RNG.uniform(-0.9, 0.9, (3, 4)).astype("float64") if name not in domain else \
        RNG.uniform(1.1, 3.0, (3, 4))
    if name in ("log_", "log10_", "log2_", "sqrt_", "rsqrt_", "logit_"):
        a = np.abs(a) + 0.05
    e, t = ember.tensor(a), torch.tensor(a)
    r = getattr(ember, name)(e)
    getattr(torch, name)(t)
    assert r is e
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-7)


def test_inplace_functions_with_arguments_match_torch():
    e, t = _pair(3, 4, dtype="float64")
    for name, args in (("clamp_", (-0.5, 0.5)), ("clip_", (-0.2, None)), ("clamp_min_", (0.1,)),
                       ("clamp_max_", (0.3,)), ("ldexp_", None), ("xlogy_", None)):
        if args is None:
            o, to = _pair(3, 4, dtype="float64", low=0.5)
            assert getattr(ember, name)(e, o) is e
            getattr(torch, name)(t, to)
        else:
            assert getattr(ember, name)(e, *args) is e
            getattr(torch, name)(t, *args)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-10)
    ei, ti = ember.tensor([12, 18, 7]), torch.tensor([12, 18, 7])
    for name in ("gcd_", "lcm_"):
        getattr(ember, name)(ei, ember.tensor([8, 12, 3]))
        getattr(torch, name)(ti, torch.tensor([8, 12, 3]))
        assert ei.tolist() == ti.tolist()
    v, tv = _pair(3, dtype="float64")
    m, tm = _pair(3, 4, dtype="float64")
    x, tx = _pair(4, dtype="float64")
    ember.addmv_(v, m, x, beta=0.5, alpha=2.0)
    torch.addmv_(tv, tm, tx, beta=0.5, alpha=2.0)
    np.testing.assert_allclose(v.numpy(), tv.numpy(), rtol=1e-10)


def test_inplace_structural_functions():
    e = ember.arange(6.0)
    assert ember.as_strided_(e, (2, 2), (1, 2)) is e and e.tolist() == [[0.0, 2.0], [1.0, 3.0]]
    d = ember.ones(2, requires_grad=True) * 2
    assert ember.detach_(d) is d and d.grad_fn is None and not d.requires_grad
    r = ember.zeros(2, 3)
    assert ember.resize_as_(r, ember.zeros(6)) is r and tuple(r.shape) == (6,)
    c = ember.tensor([1 + 2j, 3 - 1j], dtype=ember.complex64)
    assert ember.conj_physical_(c) is c
    assert c.tolist() == [1 - 2j, 3 + 1j]


def test_inplace_function_errors_name_the_op():
    with pytest.raises(TypeError, match="sin_"):
        ember.sin_([1.0])


# ---- *_copy views -------------------------------------------------------------------------------
COPY_CASES = [
    ("view_copy", ((4, 3),)), ("view_copy", (ember.int32,)), ("permute_copy", ((1, 0),)),
    ("transpose_copy", (0, 1)), ("expand_copy", ((2, 3, 4),)), ("diagonal_copy", (1, 0, 1)),
    ("select_copy", (1, 2)), ("squeeze_copy", ()), ("unsqueeze_copy", (1,)), ("t_copy", ()),
    ("unbind_copy", (1,)), ("split_copy", (2,)), ("split_with_sizes_copy", ([1, 2],)),
    ("unfold_copy", (1, 2, 1)), ("alias_copy", ()), ("detach_copy", ()),
    ("as_strided_copy", ((2, 2), (1, 2), 1)),
]


@pytest.mark.parametrize("name,args", COPY_CASES)
def test_copy_views_match_torch(name, args):
    e, t = _pair(3, 4)
    targs = tuple(torch.int32 if a is ember.int32 else a for a in args)
    r = getattr(ember, name)(e, *args)
    tr = getattr(torch, name)(t, *targs)
    rs = r if isinstance(r, tuple) else (r,)
    trs = tr if isinstance(tr, (tuple, list)) else (tr,)
    assert len(rs) == len(trs)
    for a, b in zip(rs, trs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a.stride() == b.stride()
        assert a.data_ptr() != e.data_ptr()  # never an alias
    assert COPY_VIEWS[name]


def test_copy_views_are_differentiable_and_independent():
    x = ember.arange(6.0).reshape(2, 3).requires_grad_(True)
    y = ember.transpose_copy(x, 0, 1)
    y.mul_(1)
    (y * ember.arange(6.0).reshape(3, 2)).sum().backward()
    assert x.grad.tolist() == [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]
    z = ember.view_copy(x.detach(), (3, 2))
    z.zero_()
    assert x.detach().sum().item() == 15.0


def test_complex_copy_views_match_torch():
    c = np.array([1 + 2j, 3 - 4j], dtype=np.complex64)
    r = ember.view_as_real_copy(ember.tensor(c))
    np.testing.assert_array_equal(r.numpy(), torch.view_as_real_copy(torch.tensor(c)).numpy())
    back = ember.view_as_complex_copy(r)
    np.testing.assert_array_equal(back.numpy(), c)


def test_slice_copy_matches_torch():
    e, t = _pair(4, 6)
    for args in ((0, 1, None, 2), (1, -4, -1, 1), (1, 2, 100, 3), (-1, None, 3)):
        np.testing.assert_array_equal(ember.slice_copy(e, *args).numpy(),
                                      torch.slice_copy(t, *args).numpy())
    with pytest.raises(ValueError, match="step must be a positive int"):
        ember.slice_copy(e, 0, 0, 2, 0)
    with pytest.raises(IndexError, match="out of range"):
        ember.slice_copy(e, 2)


def test_as_strided_scatter_matches_torch_with_gradients():
    e, t = _pair(3, 4, dtype="float64")
    s, ts = _pair(2, 2, dtype="float64")
    e.requires_grad_(True)
    s.requires_grad_(True)
    ts.requires_grad_(True)
    w = RNG.standard_normal((3, 4))
    for args in (((2, 2), (1, 2)), ((2, 2), (4, 1), 5)):
        e.grad = s.grad = ts.grad = None
        r = ember.as_strided_scatter(e, s, *args)
        tr = torch.as_strided_scatter(t, ts, *args)
        np.testing.assert_array_equal(r.detach().numpy(), tr.detach().numpy())
        (r * ember.tensor(w)).sum().backward()
        (tr * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy())
        # input's gradient: w where the input shows through, 0 where src overwrote it (torch
        # 2.13's own backward for input is wrong here: its gradcheck fails)
        kept = torch.as_strided_scatter(torch.ones(3, 4, dtype=torch.float64),
                                        torch.zeros(2, 2, dtype=torch.float64), *args)
        np.testing.assert_allclose(e.grad.numpy(), w * kept.numpy())
    with pytest.raises(RuntimeError, match="as_strided_scatter"):
        ember.as_strided_scatter(e, s, (3, 3), (1, 1))


def test_slice_inverse_matches_torch():
    base, tbase = ember.arange(12.0), torch.arange(12.0)
    v, tv = base[2:8:2], tbase[2:8:2]
    r = ember.slice_inverse(v, base, 0, 2, 8, 2)
    tr = torch.slice_inverse(tv, tbase, 0, 2, 8, 2)
    assert r.tolist() == tr.tolist() and r.stride() == tr.stride()
    assert r.data_ptr() == base.data_ptr()


# ---- misc top-level functions -------------------------------------------------------------------
def test_predicates_as_functions():
    for dt, tdt in ((ember.float32, torch.float32), (ember.uint8, torch.uint8),
                    (ember.bool, torch.bool), (ember.int16, torch.int16)):
        e, t = ember.ones(2, dtype=dt), torch.ones(2, dtype=tdt)
        assert ember.is_signed(e) == torch.is_signed(t)
        assert ember.get_device(e) == torch.get_device(t) == -1
        assert ember.is_inference(e) == torch.is_inference(t) is False
        assert ember.is_distributed(e) is torch.is_distributed(t) is False
    with ember.inference_mode():
        assert ember.is_inference(ember.ones(1))
    with pytest.raises(TypeError, match="is_signed"):
        ember.is_signed(3)


def test_set_flush_denormal_flushes_on_this_thread():
    if not ember.set_flush_denormal(True):
        pytest.skip("no FTZ/DAZ on this CPU (not x86-64 Linux with SSE3)")
    try:
        tiny = 1e-310  # a float64 denormal
        assert tiny * 1.0 == 0.0  # the thread's SSE unit flushes it now
        assert (ember.tensor([tiny], dtype=ember.float64) * 2.0).item() == 0.0
    finally:
        assert ember.set_flush_denormal(False)
    assert 1e-310 * 1.0 != 0.0
    assert (ember.tensor([1e-310], dtype=ember.float64) * 2.0).item() == 2e-310
    with pytest.raises(TypeError, match="bool"):
        ember.set_flush_denormal(1)


def test_frombuffer_matches_torch_and_shares_memory():
    buf = bytearray(np.arange(8, dtype=np.int32).tobytes())
    for kw in ({}, {"count": 3}, {"offset": 8}, {"count": 2, "offset": 4}):
        e = ember.frombuffer(buf, dtype=ember.int32, **kw)
        t = torch.frombuffer(buf, dtype=torch.int32, **kw)
        assert e.tolist() == t.tolist()
    e = ember.frombuffer(buf, dtype=ember.int32)
    e[0] = 42
    assert np.frombuffer(bytes(buf), dtype=np.int32)[0] == 42
    a = array.array("d", [1.0, 2.0])
    assert ember.frombuffer(a, dtype=ember.float64, requires_grad=True).requires_grad
    bf = ember.frombuffer(bytearray(4), dtype=ember.bfloat16)
    assert bf.dtype == ember.bfloat16 and bf.tolist() == [0.0, 0.0]
    with pytest.warns(UserWarning, match="not writable"):
        ro = ember.frombuffer(b"\x01\x02", dtype=ember.uint8)
    assert ro.tolist() == [1, 2]
    for kw, match in (({"count": 100}, "requested buffer length"),
                      ({"offset": 32}, "offset"),
                      ({"offset": 3}, "multiple of element size")):
        with pytest.raises(ValueError, match=match):
            ember.frombuffer(buf, dtype=ember.int32, **kw)
    with pytest.raises(TypeError, match="buffer protocol"):
        ember.frombuffer([1, 2], dtype=ember.int32)
    with pytest.raises(ValueError, match="C-contiguous"):
        ember.frombuffer(memoryview(np.arange(6, dtype=np.int32))[::2], dtype=ember.int32)


def test_from_file_shared_and_private(tmp_path):
    path = os.fspath(tmp_path / "data.bin")
    np.arange(6, dtype=np.float32).tofile(path)
    e = ember.from_file(path, size=6, dtype=ember.float32)
    t = torch.from_file(path, size=6, dtype=torch.float32)
    assert e.tolist() == t.tolist()
    e[0] = 100.0  # private mapping: the file keeps its data
    assert np.fromfile(path, dtype=np.float32)[0] == 0.0
    s = ember.from_file(path, shared=True, size=4, dtype=ember.float32)
    s[1] = -5.0
    del s
    assert np.fromfile(path, dtype=np.float32)[1] == -5.0
    assert ember.from_file(path, size=0, dtype=ember.float32).shape == (0,)
    with pytest.raises(RuntimeError, match="smaller than the required mapping size"):
        ember.from_file(path, size=7, dtype=ember.float32)
    grown = ember.from_file(path, shared=True, size=8, dtype=ember.float32)  # grows the file
    assert grown.tolist()[6:] == [0.0, 0.0] and os.path.getsize(path) == 32
    new = os.fspath(tmp_path / "new.bin")
    assert ember.from_file(new, shared=True, size=3, dtype=ember.int16).tolist() == \
        torch.from_file(os.fspath(tmp_path / "new_t.bin"), shared=True, size=3,
                        dtype=torch.int16).tolist() == [0, 0, 0]
    assert os.path.getsize(new) == 6


def test_empty_permuted_matches_torch():
    for size, perm in (((2, 3, 4), (0, 2, 1)), ((2, 3, 4, 5), (0, 2, 3, 1)), ((3,), (0,))):
        e = ember.empty_permuted(size, perm, dtype=ember.float64)
        t = torch.empty_permuted(size, perm, dtype=torch.float64)
        assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride()
        assert e.dtype == ember.float64
    assert ember.empty_permuted((2, 2), (1, 0), requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="permutation"):
        ember.empty_permuted((2, 3), (0, 0))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_matches_torch(reduce):
    a = np.array([1.0, 3.0, 3.0, -2.0, 5.0, 0.5, 2.0], dtype="float64")
    lengths = [2, 0, 3, 2]
    for initial in (None, 1.5):
        e = ember.tensor(a).requires_grad_(True)
        t = torch.tensor(a).requires_grad_(True)
        r = ember.segment_reduce(e, reduce, lengths=ember.tensor(lengths), initial=initial)
        tr = torch.segment_reduce(t, reduce, lengths=torch.tensor(lengths), initial=initial)
        np.testing.assert_allclose(r.detach().numpy(), tr.detach().numpy(), equal_nan=True)
        finite = np.isfinite(tr.detach().numpy())
        w = np.where(finite, 1.0, 0.0)
        (ember.where(ember.tensor(finite), r, ember.zeros_like(r)) * ember.tensor(w)).sum().backward()
        (torch.where(torch.tensor(finite), tr, torch.zeros_like(tr)) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=1e-12)
    offsets = [0, 2, 2, 5, 7]
    np.testing.assert_allclose(
        ember.segment_reduce(ember.tensor(a), reduce, offsets=ember.tensor(offsets)).numpy(),
        torch.segment_reduce(torch.tensor(a), reduce, offsets=torch.tensor(offsets)).numpy(),
        equal_nan=True)


def test_segment_reduce_axes_and_errors():
    d = np.arange(12.0).reshape(2, 6)
    L = [[2, 4], [1, 5]]
    np.testing.assert_allclose(
        ember.segment_reduce(ember.tensor(d), "sum", lengths=ember.tensor(L), axis=1).numpy(),
        torch.segment_reduce(torch.tensor(d), "sum", lengths=torch.tensor(L), axis=1).numpy())
    d2 = np.arange(10.0).reshape(5, 2)
    np.testing.assert_allclose(
        ember.segment_reduce(ember.tensor(d2), "max", lengths=ember.tensor([3, 2])).numpy(),
        torch.segment_reduce(torch.tensor(d2), "max", lengths=torch.tensor([3, 2])).numpy())
    x = ember.ones(5)
    with pytest.raises(RuntimeError, match="sum to"):
        ember.segment_reduce(x, "sum", lengths=ember.tensor([2, 2]))
    with pytest.raises(RuntimeError, match="reduce must be one of"):
        ember.segment_reduce(x, "median", lengths=ember.tensor([5]))
    with pytest.raises(RuntimeError, match="last dimension of lengths"):
        ember.segment_reduce(x, "sum", lengths=ember.tensor([5]), axis=1)
    with pytest.raises(RuntimeError, match="exactly one"):
        ember.segment_reduce(x, "sum")
    with pytest.raises(RuntimeError, match="floating point"):
        ember.segment_reduce(ember.tensor([1, 2]), "sum", lengths=ember.tensor([2]))
    with pytest.raises(RuntimeError, match="run past"):
        ember.segment_reduce(x, "sum", lengths=ember.tensor([4, 3]), unsafe=True)
    part = ember.segment_reduce(x, "sum", lengths=ember.tensor([1, 2]), unsafe=True)
    assert part.tolist() == [1.0, 2.0]  # unsafe: the elements past the segments are left out
    d3 = np.arange(30.0).reshape(5, 2, 3)
    for reduce in ("sum", "mean", "max", "min", "prod"):
        np.testing.assert_allclose(
            ember.segment_reduce(ember.tensor(d3), reduce, lengths=ember.tensor([2, 0, 3])).numpy(),
            torch.segment_reduce(torch.tensor(d3), reduce, lengths=torch.tensor([2, 0, 3])).numpy(),
            equal_nan=True)


def test_cond_and_while_loop_match_torch():
    x = ember.arange(3.0)
    tx = torch.arange(3.0)
    for pred, tpred in ((ember.tensor(True), torch.tensor(True)), (False, False)):
        r = ember.cond(pred, lambda a: a * 2, lambda a: a - 1, (x,))
        tr = torch.cond(tpred, lambda a: a * 2, lambda a: a - 1, (tx,))
        assert r.tolist() == tr.tolist()
    r = ember.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s * 2), (ember.tensor(0), x))
    tr = torch.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s * 2), (torch.tensor(0), tx))
    assert isinstance(r, tuple) and r[0].item() == tr[0].item() and r[1].tolist() == tr[1].tolist()
    with pytest.raises(RuntimeError, match="single-element"):
        ember.cond(ember.ones(2), lambda: 1, lambda: 0)
    with pytest.raises(RuntimeError, match="one per input"):
        ember.while_loop(lambda i: i < 1, lambda i: (i + 1, i), (ember.tensor(0),))
    with pytest.raises(RuntimeError, match="tuple or list"):
        ember.cond(True, lambda a: a, lambda a: a, x)


# ---- Tensor attributes --------------------------------------------------------------------------
def test_as_subclass_keeps_data_and_autograd():
    class Mine(ember.Tensor):
        pass

    w = ember.ones(3, requires_grad=True)
    y = (w * 2).as_subclass(Mine)
    assert type(y) is Mine and y.grad_fn is not None
    (y * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert w.grad.tolist() == [2.0, 4.0, 6.0]
    base = ember.arange(3.0)
    s = base.as_subclass(Mine)
    s[0] = 9.0
    assert base[0].item() == 9.0
    with pytest.raises(TypeError, match="subclass of ember.Tensor"):
        base.as_subclass(int)


def test_deprecated_resize_and_resize_as_match_torch():
    e, t = _pair(2, 3)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        r = e.resize(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert r.tolist() == t.resize(3, 2).tolist()
        assert e.resize((6,)).tolist() == t.resize(6).tolist()  # torch's rejects a tuple
        assert tuple(e.resize_as(ember.zeros(1, 6)).shape) == (1, 6)
        g = e.clone().requires_grad_(True)
        g.resize(6).sum().backward()
        assert g.grad.shape == (2, 3)
        with pytest.raises(RuntimeError, match="preserving the number of elements"):
            e.resize(4, 2)


def test_output_nr_name_const_data_ptr_and_predicates():
    x = ember.ones(5, requires_grad=True)
    parts = x.split(2)
    tparts = torch.ones(5, requires_grad=True).split(2)
    assert [p.output_nr for p in parts] == [p.output_nr for p in tparts] == [0, 1, 2]
    assert x.output_nr == 0 and ember.ones(1).output_nr == 0
    t = ember.ones(2)
    assert t.name is None and t.const_data_ptr() == t.data_ptr()
    for name in ("is_nested", "is_xpu", "is_mps", "is_ipu", "is_maia", "is_mtia", "is_xla",
                 "is_vulkan"):
        assert getattr(t, name) is False and getattr(torch.ones(2), name) is False, name
    assert t.is_distributed() is False
    with pytest.raises(TypeError, match="complex32"):
        t.chalf()


# ---- constants and small functions --------------------------------------------------------------
def test_constants_match_torch():
    assert ember.pi == torch.pi and ember.e == torch.e and ember.inf == torch.inf
    assert np.isnan(ember.nan) and ember.newaxis is torch.newaxis is None
    assert ember.arange(3)[:, ember.newaxis].shape == (3, 1)


def test_deprecated_range_matches_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args, kw in (((1, 4), {}), ((0, 1, 0.25), {}), ((5, 1, -2), {}),
                         ((1, 4), {"dtype": "int64"}), ((0, 0.3, 0.1), {"dtype": "float64"})):
            ekw = {k: getattr(ember, v) for k, v in kw.items()}
            tkw = {k: getattr(torch, v) for k, v in kw.items()}
            e, t = ember.range(*args, **ekw), torch.range(*args, **tkw)
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-7)
            assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    with pytest.warns(UserWarning, match="deprecated"):
        ember.range(0, 2)
    with pytest.raises(RuntimeError, match="step sign"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.range(0, 5, -1)


def test_fill_isreal_is_storage_and_switches():
    x = ember.zeros(2, 3)
    y = ember.fill(x, 2.5)
    assert y.tolist() == torch.fill(torch.zeros(2, 3), 2.5).tolist() and x.sum().item() == 0.0
    c = np.array([1 + 0j, 2 - 1j, 0j], dtype=np.complex64)
    assert ember.isreal(ember.tensor(c)).tolist() == torch.isreal(torch.tensor(c)).tolist()
    assert ember.ones(2).isreal().tolist() == [True, True]
    assert ember.is_storage(ember.ones(1).untyped_storage()) and not ember.is_storage([1])
    assert ember.get_device_module("cpu") is ember.cpu
    assert ember.cpu.device_count() == torch.cpu.device_count() == 1
    assert ember.cpu.current_device() == torch.cpu.current_device() == "cpu"
    assert ember.compiled_with_cxx11_abi() is True and ember.is_vulkan_available() is False
    ember.init_num_threads()
    try:
        for mode, expected in (("warn", 1), ("error", 2), (1, 1), ("default", 0)):
            ember.set_deterministic_debug_mode(mode)
            torch.set_deterministic_debug_mode(mode)
            assert ember.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode() \
                == expected
    finally:
        ember.set_deterministic_debug_mode(0)
        torch.set_deterministic_debug_mode(0)
    with pytest.raises(RuntimeError, match="debug_mode"):
        ember.set_deterministic_debug_mode("loud")
    with pytest.raises(RuntimeError, match="no xpu device"):
        ember.ones(1).xpu()
    assert ember.ones(1).volatile is False


def test_deprecated_autocast_switches_match_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert str(ember.get_autocast_cpu_dtype()).split(".")[1] == \
            str(torch.get_autocast_cpu_dtype()).split(".")[1]
        assert str(ember.get_autocast_gpu_dtype()).split(".")[1] == \
            str(torch.get_autocast_gpu_dtype()).split(".")[1]
        assert ember.is_autocast_cpu_enabled() is torch.is_autocast_cpu_enabled() is False
        try:
            ember.set_autocast_cpu_enabled(True)
            assert ember.is_autocast_enabled("cpu")
        finally:
            ember.set_autocast_cpu_enabled(False)
        prev = ember.get_autocast_dtype("cpu")
        try:
            ember.set_autocast_cpu_dtype(ember.float16)
            assert ember.get_autocast_dtype("cpu") == ember.float16
        finally:
            ember.set_autocast_cpu_dtype(prev)
        prev = ember.get_autocast_dtype("cuda")
        try:
            ember.set_autocast_gpu_dtype(ember.bfloat16)
            assert ember.get_autocast_dtype("cuda") == ember.bfloat16
        finally:
            ember.set_autocast_gpu_dtype(prev)
    with pytest.warns(DeprecationWarning, match=r"get_autocast_dtype\('cpu'\)"):
        ember.get_autocast_cpu_dtype()
