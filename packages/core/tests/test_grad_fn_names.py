"""grad_fn names against PyTorch's: each op's node reports torch's name for the same call (the
YAML `node_name` of its entry, fixed or chosen per call: sum(dim) vs sum(), matmul by the operands'
dims, basic indexing by its kind), as `type(y.grad_fn).__name__` and `y.grad_fn.name()`.
Also the kernels added with them: int64 avg_pool, complex logcumsumexp (values and gradient) and
the legacy positional `unbiased` of std_mean / var_mean."""

from __future__ import annotations

import ember
import ember.nn.functional as EF
import numpy as np
import pytest

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

rng = np.random.default_rng(15)
A34 = rng.standard_normal((3, 4))
A4 = rng.standard_normal(4)
A3 = rng.standard_normal(3)
A45 = rng.standard_normal((4, 5))
A234 = rng.standard_normal((2, 3, 4))
A245 = rng.standard_normal((2, 4, 5))
A2234 = rng.standard_normal((2, 2, 3, 4))
IMG = rng.standard_normal((1, 2, 4, 4))


def _inputs(m):
    def leaf(a):
        return m.tensor(a, requires_grad=True)

    return dict(x=leaf(A34), v=leaf(A4), u=leaf(A3), m=leaf(A45), b=leaf(A234), b2=leaf(A245),
                q=leaf(A2234), img=leaf(IMG))


# (label, expression over the module M, its functional F and the inputs)
CASES = [
    ("sum", lambda M, F, t: t["x"].sum()),
    ("sum_dim", lambda M, F, t: t["x"].sum(0)),
    ("sum_dims", lambda M, F, t: t["x"].sum((0, 1))),
    ("sum_keepdim", lambda M, F, t: t["x"].sum(1, keepdim=True)),
    ("sum_dtype", lambda M, F, t: t["x"].sum(dtype=M.float32)),
    ("mean", lambda M, F, t: t["x"].mean()),
    ("mean_dim", lambda M, F, t: t["x"].mean(1)),
    ("prod", lambda M, F, t: t["x"].prod()),
    ("prod_dim", lambda M, F, t: t["x"].prod(0)),
    ("mm", lambda M, F, t: t["x"] @ t["m"]),
    ("mv", lambda M, F, t: t["x"] @ t["v"]),
    ("dot", lambda M, F, t: t["v"] @ t["v"]),
    ("vec_mat", lambda M, F, t: t["u"] @ t["x"]),
    ("bmm_shaped", lambda M, F, t: t["b"] @ t["b2"]),
    ("batch_mat", lambda M, F, t: t["b"] @ t["m"]),
    ("batch_vec", lambda M, F, t: t["q"] @ t["v"]),
    ("mat_batch", lambda M, F, t: t["x"] @ t["b2"]),
    ("matmul_fn", lambda M, F, t: M.matmul(t["x"], t["m"])),
    ("linear", lambda M, F, t: F.linear(t["x"], t["m"].t())),
    ("bmm", lambda M, F, t: M.bmm(t["b"], t["b2"])),
    ("index_int", lambda M, F, t: t["x"][1]),
    ("index_neg", lambda M, F, t: t["x"][-1]),
    ("index_slice", lambda M, F, t: t["x"][1:3]),
    ("index_full_slice", lambda M, F, t: t["x"][:]),
    ("index_step", lambda M, F, t: t["x"][::2]),
    ("index_none", lambda M, F, t: t["x"][None]),
    ("index_ellipsis", lambda M, F, t: t["x"][...]),
    ("index_empty_tuple", lambda M, F, t: t["x"][()]),
    ("index_col", lambda M, F, t: t["x"][:, 1]),
    ("index_int_int", lambda M, F, t: t["x"][1, 2]),
    ("index_int_slice", lambda M, F, t: t["x"][1, 1:3]),
    ("index_slice_int", lambda M, F, t: t["x"][1:2, 1]),
    ("index_full_full", lambda M, F, t: t["x"][:, :]),
    ("index_full_explicit", lambda M, F, t: t["x"][0:3, :]),
    ("index_ellipsis_slice", lambda M, F, t: t["x"][..., 1:2]),
    ("index_int_none", lambda M, F, t: t["x"][1, None]),
    ("index_none_int", lambda M, F, t: t["x"][None, 1]),
    ("index_tuple_full", lambda M, F, t: t["x"][(slice(None),)]),
    ("max", lambda M, F, t: t["x"].max()),
    ("max_dim", lambda M, F, t: t["x"].max(0)[0]),
    ("min", lambda M, F, t: t["x"].min()),
    ("min_dim", lambda M, F, t: t["x"].min(1)[0]),
    ("std", lambda M, F, t: t["x"].std()),
    ("std_dim", lambda M, F, t: t["x"].std(0)),
    ("var", lambda M, F, t: t["x"].var()),
    ("var_dim", lambda M, F, t: t["x"].var(1)),
    ("var_bool", lambda M, F, t: t["x"].var(False)),
    ("std_mean", lambda M, F, t: M.std_mean(t["x"])[0]),
    ("var_mean_bool", lambda M, F, t: M.var_mean(t["x"], True)[0]),
    ("narrow", lambda M, F, t: t["x"].narrow(1, 1, 2)),
    ("chunk", lambda M, F, t: t["x"].chunk(3)[0]),
    ("reshape_view", lambda M, F, t: t["x"].reshape(12)),
    ("reshape_copy", lambda M, F, t: t["x"].t().reshape(12)),
    ("flatten", lambda M, F, t: t["x"].flatten()),
    ("view", lambda M, F, t: t["x"].view(12)),
    ("view_as", lambda M, F, t: t["x"].view_as(t["x"])),
    ("expand_as", lambda M, F, t: t["v"].expand_as(t["x"])),
    ("movedim", lambda M, F, t: t["x"].movedim(0, 1)),
    ("tile", lambda M, F, t: t["x"].tile(2)),
    ("contiguous", lambda M, F, t: t["x"].t().contiguous()),
    ("to_dtype", lambda M, F, t: t["x"].to(M.float32)),
    ("squeeze_all", lambda M, F, t: t["x"][None].squeeze()),
    ("squeeze_dim", lambda M, F, t: t["x"][None].squeeze(0)),
    ("square", lambda M, F, t: t["x"].square()),
    ("log1p", lambda M, F, t: (t["x"] * t["x"]).log1p()),
    ("rpow", lambda M, F, t: 2 ** t["x"]),
    ("rsub_scalar", lambda M, F, t: 1 - t["x"]),
    ("rsub_tensor", lambda M, F, t: M.rsub(t["x"], t["x"])),
    ("clamp_scalars", lambda M, F, t: t["x"].clamp(0, 1)),
    ("clamp_min", lambda M, F, t: t["x"].clamp(min=0)),
    ("clamp_tensors", lambda M, F, t: t["x"].clamp(t["x"] - 1, t["x"] + 1)),
    ("clip", lambda M, F, t: t["x"].clip(0, 1)),
    ("outer", lambda M, F, t: M.outer(t["v"], t["v"])),
    ("norm", lambda M, F, t: t["x"].norm()),
    ("norm_dim", lambda M, F, t: t["x"].norm(dim=0)),
    ("nanmean", lambda M, F, t: t["x"].nanmean()),
    ("logsigmoid", lambda M, F, t: F.logsigmoid(t["x"])),
    ("cross_entropy", lambda M, F, t: F.cross_entropy(t["x"], M.tensor([0, 1, 3]))),
    ("upsample_nearest", lambda M, F, t: F.interpolate(t["img"], scale_factor=2)),
    ("upsample_bilinear", lambda M, F, t: F.interpolate(t["img"], scale_factor=2,
                                                        mode="bilinear")),
    ("avg_pool1d", lambda M, F, t: F.avg_pool1d(t["b"], 2)),
    ("avg_pool2d", lambda M, F, t: F.avg_pool2d(t["img"], 2)),
    ("avg_pool2d_unbatched", lambda M, F, t: F.avg_pool2d(t["img"][0], 2)),
    ("avg_pool3d", lambda M, F, t: F.avg_pool3d(t["img"][None], 2)),
    ("max_pool1d", lambda M, F, t: F.max_pool1d(t["b"], 2)),
    ("max_pool2d", lambda M, F, t: F.max_pool2d(t["img"], 2)),
    ("max_pool3d", lambda M, F, t: F.max_pool3d(t["img"][None], 2)),
    ("adaptive_avg_pool1d", lambda M, F, t: F.adaptive_avg_pool1d(t["b"], 2)),
    ("adaptive_avg_pool2d", lambda M, F, t: F.adaptive_avg_pool2d(t["img"], 2)),
    ("adaptive_max_pool2d", lambda M, F, t: F.adaptive_max_pool2d(t["img"], 2)),
    ("adaptive_max_pool3d", lambda M, F, t: F.adaptive_max_pool3d(t["img"][None], 2)),
    ("pad_constant", lambda M, F, t: F.pad(t["img"], (1, 1))),
    ("pad_reflect1d", lambda M, F, t: F.pad(t["b"], (1, 1), mode="reflect")),
    ("pad_reflect2d", lambda M, F, t: F.pad(t["img"], (1, 1, 1, 1), mode="reflect")),
    ("pad_replicate2d", lambda M, F, t: F.pad(t["img"], (1, 1, 1, 1), mode="replicate")),
    ("pad_replicate3d", lambda M, F, t: F.pad(t["img"][None], (1, 1, 1, 1, 1, 1),
                                              mode="replicate")),
    ("pow_scalar", lambda M, F, t: t["x"] ** 3),
    ("pow_tensor", lambda M, F, t: t["x"] ** t["x"]),
    ("split_sizes", lambda M, F, t: t["x"].split([1, 2])[0]),
    ("split", lambda M, F, t: t["x"].split(2)[0]),
    ("squeeze_dims", lambda M, F, t: t["x"][None, None].squeeze((0, 1))),
    ("cosine_similarity", lambda M, F, t: F.cosine_similarity(t["x"], t["x"])),
    ("mul", lambda M, F, t: t["x"] * t["x"]),
    ("cumsum", lambda M, F, t: t["x"].cumsum(0)),
    ("permute", lambda M, F, t: t["x"].permute(1, 0)),
    ("select", lambda M, F, t: t["x"].select(0, 1)),
]


def _names(mod, func, label):
    fn = dict(CASES)[label]
    y = fn(mod, func, _inputs(mod))
    return type(y.grad_fn).__name__, y.grad_fn.name()


@needs_torch
@pytest.mark.parametrize("label", [c[0] for c in CASES])
def test_grad_fn_name_matches_torch(label):
    tname, tcall = _names(torch, TF, label)
    ename, ecall = _names(ember, EF, label)
    assert tname == tcall  # torch's type is named after the node
    assert (ename, ecall) == (tname, tcall)


def test_grad_fn_names_explicit():
    # the same without torch: the per-call choices of the YAML entries and of indexing
    x = ember.randn(3, 4, requires_grad=True)
    v = ember.randn(4, requires_grad=True)
    assert x.sum().grad_fn.name() == "SumBackward0"
    assert x.sum(0).grad_fn.name() == "SumBackward1"
    assert x.mean((0, 1)).grad_fn.name() == "MeanBackward1"
    assert (x @ x.t()).grad_fn.name() == "MmBackward0"
    assert (x @ v).grad_fn.name() == "MvBackward0"
    assert (v @ v).grad_fn.name() == "DotBackward0"
    assert x[1].grad_fn.name() == "SelectBackward0"
    assert x[1:3].grad_fn.name() == "SliceBackward0"
    assert x[None].grad_fn.name() == "UnsqueezeBackward0"
    assert x[:, :].grad_fn.name() == "AliasBackward0"
    assert x.max().grad_fn.name() == "MaxBackward1"
    assert x.max(0)[0].grad_fn.name() == "MaxBackward0"
    # the Python type follows the name, one type per name
    assert type(x[1].grad_fn).__name__ == "SelectBackward0"
    assert type(x[2].grad_fn) is type(x[0].grad_fn)
    assert type(x[1:2].grad_fn) is not type(x[1].grad_fn)
    assert repr(x[1].grad_fn) == "<SelectBackward0 object>"
    # the named views still back-propagate into their region
    (x[1].sum() + x[1:3].sum() * 2).backward()
    g = np.zeros((3, 4))
    g[1] += 1
    g[1:3] += 2
    np.testing.assert_array_equal(x.grad.numpy(), g)


def test_strided_views_without_indexing_keep_as_strided_name():
    x = ember.randn(3, 4, requires_grad=True)
    assert x.as_strided((2, 2), (1, 2)).grad_fn.name() == "AsStridedBackward0"


def test_names_reach_the_cpp_messages():
    # the C++ node knows torch's name itself: anomaly mode and errors name it
    x = ember.randn(3, requires_grad=True)
    y = x.max()
    assert y.grad_fn.name() == "MaxBackward1"
    assert "MaxBackward1" in repr(y.grad_fn)


# ---- int64 avg_pool ---------------------------------------------------------------------------

POOL_CASES = [
    ("avg_pool1d", (1, 2, 7), dict(kernel_size=2, stride=1)),
    ("avg_pool1d", (2, 7), dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool1d", (1, 2, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                   count_include_pad=False)),
    ("avg_pool2d", (1, 2, 5, 6), dict(kernel_size=2, stride=1)),
    ("avg_pool2d", (2, 5, 6), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1))),
    ("avg_pool2d", (1, 2, 5, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                      count_include_pad=False)),
    ("avg_pool2d", (1, 2, 5, 6), dict(kernel_size=2, stride=1, padding=1, divisor_override=3)),
    ("avg_pool2d", (1, 2, 5, 6), dict(kernel_size=2, padding=1, divisor_override=-3)),
    ("avg_pool2d", (1, 1, 4, 4), dict(kernel_size=4)),  # global window
    ("avg_pool3d", (1, 2, 3, 4, 5), dict(kernel_size=2, stride=1)),
    ("avg_pool3d", (1, 2, 3, 4, 5), dict(kernel_size=2, stride=2, padding=1, ceil_mode=True,
                                         divisor_override=5)),
    ("avg_pool3d", (2, 3, 4, 5), dict(kernel_size=(1, 2, 3), count_include_pad=False,
                                      padding=(0, 1, 1))),
]


@needs_torch
@pytest.mark.parametrize("name, shape, kw", POOL_CASES)
def test_int64_avg_pool_matches_torch(name, shape, kw):
    a = rng.integers(-50, 50, size=shape)
    t = getattr(TF, name)(torch.tensor(a), **kw)
    e = getattr(EF, name)(ember.tensor(a), **kw)
    assert e.dtype == ember.int64 and t.dtype == torch.int64
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_int64_avg_pool_truncates_and_wraps():
    # truncation toward zero, as C's integer division (and torch's): (-7 + 2) / 2 = -2
    x = ember.tensor([[[-7, 2, 3, -4, 5]]])
    assert EF.avg_pool1d(x, 2, 1).tolist() == [[[-2, 2, 0, 0]]]
    # the window's sum wraps around like int64 arithmetic: 4 * 2**62 = 2**64 -> 0
    big = ember.tensor([[[[2**62, 2**62], [2**62, 2**62]]]])
    assert EF.avg_pool2d(big, 2).tolist() == [[[[0]]]]


@pytest.mark.parametrize("dt", ["int32", "int16", "int8", "uint8"])
def test_other_integer_avg_pool_refused_as_torch(dt):
    x = ember.ones(1, 1, 4, 4, dtype=getattr(ember, dt))
    with pytest.raises(NotImplementedError):
        EF.avg_pool2d(x, 2)


def test_int64_adaptive_avg_pool_still_refused_as_torch():
    with pytest.raises(NotImplementedError):
        EF.adaptive_avg_pool2d(ember.ones(1, 1, 4, 4, dtype=ember.int64), 2)


# ---- complex logcumsumexp ----------------------------------------------------------------------


def _cplx(shape, scale):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * scale


@needs_torch
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
@pytest.mark.parametrize("scale", [1.0, 10.0, 100.0])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_complex_logcumsumexp_matches_torch(dtype, scale, dim):
    # scale 10 and 100: torch's imaginary parts leave (-pi, pi] (its recurrence keeps the
    # larger operand's), which the values must match exactly, not modulo 2 pi
    a = _cplx((5, 30), scale).astype(dtype)
    t = torch.logcumsumexp(torch.tensor(a), dim)
    e = ember.logcumsumexp(ember.tensor(a), dim)
    assert e.dtype == getattr(ember, dtype)
    tol = 1e-10 if dtype == "complex128" else 2e-4
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=tol, atol=tol * max(scale, 1.0))


@needs_torch
def test_complex_logcumsumexp_special_values_match_torch():
    inf, nan = float("inf"), float("nan")
    a = np.array([[10j, 0, 1 + 1j, 3j],  # ties in the real part: the new element leads
                  [complex(-inf, 0), 1j, complex(-inf, 2), 2 - 1j],
                  [1 + 1j, complex(nan, 0), 2, 3],
                  [complex(inf, 0), 1, complex(inf, 1), 0]], dtype=np.complex128)
    t = torch.logcumsumexp(torch.tensor(a), 1).numpy()
    e = ember.logcumsumexp(ember.tensor(a), 1).numpy()
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            te, ee = t[i, j], e[i, j]
            if np.isnan(te.real) or np.isnan(te.imag):
                assert np.isnan(ee.real) or np.isnan(ee.imag), (i, j, ee, te)
            else:
                np.testing.assert_allclose(ee, te, rtol=1e-12, err_msg=f"{(i, j)}")


@needs_torch
def test_complex_logcumsumexp_gradient_matches_torch():
    a = _cplx((4, 6), 1.5)
    gr = _cplx((4, 6), 1.0)
    xt = torch.tensor(a, requires_grad=True)
    torch.logcumsumexp(xt, 1).backward(torch.tensor(gr))
    xe = ember.tensor(a, requires_grad=True)
    ye = ember.logcumsumexp(xe, 1)
    assert ye.grad_fn.name() == "LogcumsumexpBackward0"
    ye.backward(ember.tensor(gr))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.resolve_conj().numpy(), rtol=1e-9,
                               atol=1e-11)


def test_complex_logcumsumexp_gradcheck():
    # ember's gradcheck takes float64 inputs: the complex input is view_as_complex of a (..., 2)
    # real leaf and the result is read back through view_as_real
    a = _cplx((3, 5), 1.0)
    real = ember.tensor(np.stack([a.real, a.imag], -1), requires_grad=True)

    def f(r):
        return ember.view_as_real(ember.logcumsumexp(ember.view_as_complex(r), 1))

    assert ember.autograd.gradcheck(f, [real], atol=1e-6, rtol=1e-5)


def test_complex_logcumsumexp_small_cases():
    z = ember.tensor([1 + 2j], dtype=ember.complex128)
    assert ember.logcumsumexp(z, 0).tolist() == [1 + 2j]
    s = ember.tensor(3 + 4j, dtype=ember.complex128)
    assert ember.logcumsumexp(s, 0).item() == 3 + 4j
    assert ember.logcumsumexp(ember.zeros(0, 3, dtype=ember.complex64), 1).shape == (0, 3)
    # log(e^0 + e^0) = log 2
    r = ember.logcumsumexp(ember.zeros(2, dtype=ember.complex128), 0).tolist()
    assert r[0] == 0 and abs(r[1] - np.log(2)) < 1e-15


# ---- std / var / std_mean / var_mean with a positional unbiased -----------------------------


@needs_torch
@pytest.mark.parametrize("name", ["std", "var", "std_mean", "var_mean"])
@pytest.mark.parametrize("unbiased", [True, False])
def test_positional_unbiased_matches_torch(name, unbiased):
    a = rng.standard_normal((3, 5))
    t = getattr(torch, name)(torch.tensor(a), unbiased)
    e = getattr(ember, name)(ember.tensor(a), unbiased)
    ts = t if isinstance(t, tuple) else (t,)
    es = e if isinstance(e, tuple) else (e,)
    assert len(es) == len(ts)
    for ee, tt in zip(es, ts):
        assert ee.shape == tuple(tt.shape)
        np.testing.assert_allclose(ee.numpy(), tt.numpy(), rtol=1e-12)
    # dims still read as dims
    t0 = getattr(torch, name)(torch.tensor(a), 0, unbiased)
    e0 = getattr(ember, name)(ember.tensor(a), 0, unbiased)
    t0 = t0 if isinstance(t0, tuple) else (t0,)
    e0 = e0 if isinstance(e0, tuple) else (e0,)
    for ee, tt in zip(e0, t0):
        np.testing.assert_allclose(ee.numpy(), tt.numpy(), rtol=1e-12)


def test_positional_unbiased_values_and_gradient():
    a = np.arange(6.0)
    x = ember.tensor(a, requires_grad=True)
    s, m = ember.std_mean(x, False)
    assert abs(s.item() - a.std()) < 1e-12 and m.item() == 2.5
    v, _ = ember.var_mean(x, True)
    assert abs(v.item() - a.var(ddof=1)) < 1e-12
    v.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (a - a.mean()) / 5)
    assert ember.var_mean(x, True)[0].grad_fn.name() == "VarMeanBackward0"
