"""3-d pooling and transposed convolution against torch: F.max_pool3d / avg_pool3d /
adaptive_{avg,max}_pool3d / max_unpool3d / lp_pool3d / conv_transpose3d and their modules.

Values, indices and gradients against torch (float64, one thread), float64 gradcheck and
gradgradcheck, unbatched (4-d) and non-contiguous inputs, meta-device shapes and errors.
"""

from __future__ import annotations

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from ember.autograd import gradcheck, gradgradcheck
from nn_helpers import assert_close, to_ember, to_np, to_torch

torch = pytest.importorskip("torch")
TF = torch.nn.functional
torch.set_num_threads(1)

RNG = np.random.default_rng(3)


def _rand(*shape: int, positive: bool = False) -> np.ndarray:
    a = RNG.standard_normal(shape)
    return np.abs(a) + 0.1 if positive else a


def _distinct(*shape: int) -> np.ndarray:
    """Values without ties (a permutation), so every max pooling has one argmax."""
    n = int(np.prod(shape))
    return (RNG.permutation(n).astype(np.float64) / n - 0.5).reshape(shape)


def _compare(fe, ft, arrays, *, tol=1e-10, grad=True, noncontig=False):
    """fe on ember copies and ft on torch copies of arrays: outputs (all of a tuple) and
    gradients of the first output must agree."""
    tv = [to_torch(a, requires_grad=grad) for a in arrays]
    if noncontig:  # the same values through a transposed view of a transposed copy
        leaves = [to_ember(np.ascontiguousarray(np.swapaxes(a, -1, -2)), requires_grad=grad)
                  for a in arrays]
        ein = [t.transpose(-1, -2) for t in leaves]
        assert not ein[0].is_contiguous()
    else:
        leaves = [to_ember(a, requires_grad=grad) for a in arrays]
        ein = leaves
    eo, to = fe(*ein), ft(*tv)
    eos = eo if isinstance(eo, tuple) else (eo,)
    tos = to if isinstance(to, tuple) else (to,)
    for a, b in zip(eos, tos):
        assert tuple(a.shape) == tuple(b.shape)
        if b.dtype == torch.int64:
            assert a.dtype == ember.int64
            np.testing.assert_array_equal(to_np(a), b.numpy())
        else:
            assert_close(a, b, rtol=tol, atol=tol)
    if grad:
        g = RNG.standard_normal(tuple(tos[0].shape))
        eos[0].backward(to_ember(g))
        tos[0].backward(to_torch(g))
        for a, b in zip(leaves, tv):
            ga = a.grad.transpose(-1, -2) if noncontig else a.grad
            assert_close(ga, b.grad, rtol=tol, atol=tol)


# ---- max_pool3d -----------------------------------------------------------------------------

MAX_CASES = [
    ((2, 3, 6, 7, 8), dict(kernel_size=2)),
    ((2, 3, 6, 7, 8), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 7, 7), dict(kernel_size=(3, 2, 3), stride=(2, 1, 3), padding=(1, 0, 1))),
    ((1, 2, 7, 8, 9), dict(kernel_size=2, stride=2, ceil_mode=True)),
    ((1, 2, 7, 8, 9), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 9, 9, 9), dict(kernel_size=2, dilation=2, stride=1)),
    ((1, 2, 9, 8, 10), dict(kernel_size=(2, 3, 2), dilation=(3, 1, 2), padding=(1, 1, 0),
                            ceil_mode=True)),
    ((3, 5, 5, 6), dict(kernel_size=2, stride=1)),  # unbatched
    ((1, 1, 4, 4, 4), dict(kernel_size=4)),  # global
    ((2, 2, 3, 5, 4), dict(kernel_size=(1, 3, 2), stride=(1, 2, 1), padding=(0, 1, 1))),
]


@pytest.mark.parametrize("shape,kw", MAX_CASES, ids=[str(i) for i in range(len(MAX_CASES))])
def test_max_pool3d_values_indices_grad(shape, kw):
    x = _distinct(*shape)
    _compare(lambda a: F.max_pool3d(a, return_indices=True, **kw),
             lambda a: TF.max_pool3d(a, return_indices=True, **kw), [x])
    _compare(lambda a: F.max_pool3d(a, **kw), lambda a: TF.max_pool3d(a, **kw), [x],
             noncontig=True)


def test_max_pool3d_ties_and_nan_follow_torch():
    x = np.zeros((1, 1, 4, 4, 4))
    x[0, 0, 1, 2, 3] = np.nan
    _compare(lambda a: F.max_pool3d(a, 2, return_indices=True),
             lambda a: TF.max_pool3d(a, 2, return_indices=True), [x], grad=False)


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=(2, 3, 3), stride=1, dilation=(1, 2, 1)),
                                dict(kernel_size=2, stride=(1, 2, 1), padding=1)])
def test_max_pool3d_ties_pick_torchs_index(kw):
    # Few distinct values: most windows hold several maxima; the first one (in window order)
    # wins, as torch, also where windows are clipped by padding.
    x = RNG.integers(0, 3, size=(2, 3, 5, 7, 6)).astype(np.float64)
    x[0, 1, 2, 3, 4] = np.nan
    _compare(lambda a: F.max_pool3d(a, return_indices=True, **kw),
             lambda a: TF.max_pool3d(a, return_indices=True, **kw), [x], grad=False)
    _compare(lambda a: F.max_pool3d(a, return_indices=True, **kw),
             lambda a: TF.max_pool3d(a, return_indices=True, **kw), [x.astype(np.float32)],
             grad=False)


def test_max_pool3d_float32_and_module():
    x = _distinct(2, 3, 6, 6, 6).astype(np.float32)
    m = ember.nn.MaxPool3d(3, stride=2, padding=1, return_indices=True)
    tm = torch.nn.MaxPool3d(3, stride=2, padding=1, return_indices=True)
    assert repr(m) == repr(tm)
    _compare(m, tm, [x], tol=1e-6)


# ---- avg_pool3d -----------------------------------------------------------------------------

AVG_CASES = [
    ((2, 3, 6, 7, 8), dict(kernel_size=2)),
    ((2, 3, 6, 7, 8), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 6, 7, 8), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ((1, 2, 7, 8, 9), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 7, 8, 9), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                           count_include_pad=False)),
    ((1, 2, 5, 6, 7), dict(kernel_size=(2, 3, 1), stride=(1, 2, 3), padding=(1, 1, 0))),
    ((1, 2, 5, 6, 7), dict(kernel_size=2, stride=1, divisor_override=3)),
    ((1, 2, 7, 7, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                           divisor_override=5)),
    ((3, 5, 5, 6), dict(kernel_size=2, stride=1, padding=1)),  # unbatched
]


@pytest.mark.parametrize("shape,kw", AVG_CASES, ids=[str(i) for i in range(len(AVG_CASES))])
def test_avg_pool3d_values_grad(shape, kw):
    x = _rand(*shape)
    _compare(lambda a: F.avg_pool3d(a, **kw), lambda a: TF.avg_pool3d(a, **kw), [x])
    _compare(lambda a: F.avg_pool3d(a, **kw), lambda a: TF.avg_pool3d(a, **kw), [x],
             noncontig=True)


def test_avg_pool3d_module():
    m = ember.nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
    tm = torch.nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
    assert repr(m) == repr(tm)
    _compare(m, tm, [_rand(2, 3, 5, 6, 7).astype(np.float32)], tol=1e-5)


# ---- adaptive pooling -----------------------------------------------------------------------

ADAPTIVE_CASES = [
    ((2, 3, 6, 7, 8), 1),
    ((2, 3, 6, 7, 8), (2, 3, 4)),
    ((2, 3, 5, 7, 9), (3, 4, 5)),  # overlapping windows
    ((1, 2, 4, 5, 6), (6, 7, 8)),  # output larger than the input
    ((1, 2, 4, 5, 6), (None, 2, None)),
    ((3, 5, 6, 7), (2, 2, 3)),  # unbatched
]


@pytest.mark.parametrize("shape,size", ADAPTIVE_CASES,
                         ids=[str(i) for i in range(len(ADAPTIVE_CASES))])
def test_adaptive_pool3d(shape, size):
    x = _distinct(*shape)
    _compare(lambda a: F.adaptive_avg_pool3d(a, size),
             lambda a: TF.adaptive_avg_pool3d(a, size), [x])
    _compare(lambda a: F.adaptive_max_pool3d(a, size, return_indices=True),
             lambda a: TF.adaptive_max_pool3d(a, size, return_indices=True), [x])
    _compare(lambda a: F.adaptive_max_pool3d(a, size),
             lambda a: TF.adaptive_max_pool3d(a, size), [x], noncontig=True)


def test_adaptive_pool3d_modules():
    x = _distinct(2, 3, 5, 6, 7)
    for m, tm in [(ember.nn.AdaptiveAvgPool3d((2, None, 3)),
                   torch.nn.AdaptiveAvgPool3d((2, None, 3))),
                  (ember.nn.AdaptiveMaxPool3d(2, return_indices=True),
                   torch.nn.AdaptiveMaxPool3d(2, return_indices=True))]:
        assert repr(m) == repr(tm)
        _compare(m, tm, [x])


# ---- max_unpool3d, lp_pool3d ----------------------------------------------------------------

@pytest.mark.parametrize("shape,kw,out_size", [
    ((2, 3, 6, 8, 4), dict(kernel_size=2), None),
    ((2, 3, 7, 9, 7), dict(kernel_size=3, stride=2, padding=1), None),
    ((2, 3, 7, 9, 8), dict(kernel_size=2, stride=2), (7, 9, 8)),
    ((1, 2, 7, 9, 8), dict(kernel_size=3, stride=2, padding=1), (1, 2, 7, 9, 8)),
])
def test_max_unpool3d(shape, kw, out_size):
    x = _distinct(*shape)
    tout, tidx = TF.max_pool3d(to_torch(x), return_indices=True, **kw)
    eout, eidx = F.max_pool3d(to_ember(x), return_indices=True, **kw)
    np.testing.assert_array_equal(to_np(eidx), tidx.numpy())
    a = to_np(tout)
    ea, ta = to_ember(a, requires_grad=True), to_torch(a, requires_grad=True)
    er = F.max_unpool3d(ea, eidx, output_size=out_size, **kw)
    tr = TF.max_unpool3d(ta, tidx, output_size=out_size, **kw)
    assert_close(er, tr)
    g = _rand(*tr.shape)
    er.backward(to_ember(g))
    tr.backward(to_torch(g))
    assert_close(ea.grad, ta.grad)
    m, tm = ember.nn.MaxUnpool3d(**kw), torch.nn.MaxUnpool3d(**kw)
    assert_close(m(eout, eidx, output_size=out_size), tm(tout, tidx, output_size=out_size))


def test_max_unpool3d_unbatched_and_module_repr():
    x = _distinct(3, 4, 4, 4)
    t, ti = TF.max_pool3d(to_torch(x), 2, return_indices=True)
    e, ei = F.max_pool3d(to_ember(x), 2, return_indices=True)
    assert_close(F.max_unpool3d(e, ei, 2), TF.max_unpool3d(t, ti, 2))
    assert repr(ember.nn.MaxUnpool3d(2)) == "MaxUnpool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), " \
                                           "padding=(0, 0, 0))"


@pytest.mark.parametrize("p,kw", [(2, dict(kernel_size=2)),
                                  (1, dict(kernel_size=(2, 3, 2), stride=(1, 2, 2))),
                                  (3, dict(kernel_size=3, stride=2, ceil_mode=True))])
def test_lp_pool3d(p, kw):
    x = _rand(2, 3, 5, 6, 7, positive=True)
    _compare(lambda a: F.lp_pool3d(a, p, **kw), lambda a: TF.lp_pool3d(a, p, **kw), [x])
    m, tm = ember.nn.LPPool3d(p, **kw), torch.nn.LPPool3d(p, **kw)
    assert repr(m) == repr(tm)
    _compare(m, tm, [x])


# ---- conv_transpose3d -----------------------------------------------------------------------

CT_CASES = [
    ((2, 4, 3, 4, 5), (4, 3, 2, 2, 2), dict()),
    ((2, 4, 3, 4, 5), (4, 3, 3, 2, 3), dict(stride=2, padding=1)),
    ((2, 4, 3, 4, 5), (4, 3, 3, 3, 3), dict(stride=(2, 1, 3), padding=(1, 0, 1),
                                             output_padding=(1, 0, 2))),
    ((1, 4, 3, 3, 4), (4, 2, 2, 3, 2), dict(stride=2, groups=2, dilation=(1, 2, 2),
                                             output_padding=1)),
    ((4, 3, 4, 5), (4, 3, 2, 2, 2), dict(stride=2)),  # unbatched
]


@pytest.mark.parametrize("xs,ws,kw", CT_CASES, ids=[str(i) for i in range(len(CT_CASES))])
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose3d(xs, ws, kw, bias):
    arrays = [_rand(*xs), _rand(*ws)]
    if bias:
        arrays.append(_rand(ws[1] * kw.get("groups", 1)))
    _compare(lambda *a: F.conv_transpose3d(*a, **kw), lambda *a: TF.conv_transpose3d(*a, **kw),
             arrays, tol=1e-9)


def test_conv_transpose3d_noncontig_input():
    x, w = _rand(2, 3, 4, 5, 6), _rand(3, 2, 2, 3, 3)
    _compare(lambda a, b: F.conv_transpose3d(a, b, stride=2, padding=1),
             lambda a, b: TF.conv_transpose3d(a, b, stride=2, padding=1), [x, w], tol=1e-9,
             noncontig=True)


def test_conv_transpose3d_module_output_size():
    ember.manual_seed(0)
    m = ember.nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, groups=2, dtype=ember.float64)
    tm = torch.nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, groups=2, dtype=torch.float64)
    assert repr(m) == repr(tm)
    assert tuple(m.weight.shape) == tuple(tm.weight.shape) == (4, 3, 3, 3, 3)
    with torch.no_grad():
        tm.weight.copy_(to_torch(m.weight))
        tm.bias.copy_(to_torch(m.bias))
    x = _rand(2, 4, 3, 4, 5)
    for size in [None, (6, 8, 10), (1, 6, 5, 7, 9), (6, 7, 9)]:
        eo, to = m(to_ember(x), output_size=size), tm(to_torch(x), output_size=size)
        assert tuple(eo.shape) == tuple(to.shape)
        assert_close(eo, to.detach(), rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="output size"):
        m(to_ember(x), output_size=(20, 20, 20))
    lazy = ember.nn.LazyConvTranspose3d(3, 2, stride=2, dtype=ember.float32)
    assert tuple(lazy(ember.ones(1, 2, 2, 2, 2)).shape) == (1, 3, 4, 4, 4)
    assert type(lazy) is ember.nn.ConvTranspose3d


# ---- gradcheck / gradgradcheck (float64) ----------------------------------------------------

def _e(*shape, distinct=False):
    a = _distinct(*shape) if distinct else _rand(*shape)
    return to_ember(a, requires_grad=True)


GRAD_FNS = [
    ("max_pool3d", lambda x: F.max_pool3d(x, 2, stride=1, padding=1, ceil_mode=True),
     (1, 2, 3, 4, 3)),
    ("max_pool3d dilated", lambda x: F.max_pool3d(x, 2, dilation=2), (3, 5, 4, 5)),
    ("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (2, 3, 2)), (1, 2, 3, 4, 5)),
    ("avg_pool3d", lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True,
                                          count_include_pad=False), (1, 2, 4, 5, 4)),
    ("avg_pool3d divisor", lambda x: F.avg_pool3d(x, 2, 1, divisor_override=3), (2, 3, 3, 4)),
    ("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (1, 2, 3, 4, 5)),
    ("lp_pool3d", lambda x: F.lp_pool3d(x * x + 0.5, 2, 2), (1, 2, 2, 4, 4)),
]


@pytest.mark.parametrize("name,fn,shape", GRAD_FNS, ids=[g[0] for g in GRAD_FNS])
def test_pool3d_gradcheck_gradgradcheck(name, fn, shape):
    x = _e(*shape, distinct=True)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_max_unpool3d_gradcheck():
    x = _e(1, 2, 4, 4, 4, distinct=True)
    _, idx = F.max_pool3d(x.detach(), 2, return_indices=True)
    y = _e(1, 2, 2, 2, 2)
    assert gradcheck(lambda a: F.max_unpool3d(a, idx, 2), (y,))


def test_conv_transpose3d_gradcheck_gradgradcheck():
    x, w, b = _e(1, 2, 2, 3, 2), _e(2, 2, 2, 2, 2), _e(4)

    def fn(x, w, b):
        return F.conv_transpose3d(x, w, b, stride=(2, 1, 2), padding=(0, 1, 0),
                                  output_padding=(1, 0, 0), groups=2)

    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))


FW_FNS = [
    ("max_pool3d", lambda F_, x: F_.max_pool3d(x, 3, 2, 1, ceil_mode=True), (1, 2, 5, 6, 5)),
    ("adaptive_max_pool3d", lambda F_, x: F_.adaptive_max_pool3d(x, (2, 3, 2)), (2, 3, 4, 5, 3)),
    ("avg_pool3d", lambda F_, x: F_.avg_pool3d(x, 2, 1, 1, count_include_pad=False),
     (1, 2, 3, 4, 5)),
    ("adaptive_avg_pool3d", lambda F_, x: F_.adaptive_avg_pool3d(x, (2, 1, 3)), (2, 3, 4, 5)),
    ("conv_transpose3d", lambda F_, x: F_.conv_transpose3d(x, x.new_ones(2, 3, 2, 2, 2), stride=2),
     (1, 2, 2, 3, 2)),
]


@pytest.mark.parametrize("name,fn,shape", FW_FNS, ids=[f[0] for f in FW_FNS])
def test_forward_ad_matches_torch(name, fn, shape):
    import ember.autograd.forward_ad as fwAD

    x, v = _distinct(*shape), _rand(*shape)
    with fwAD.dual_level():
        out = fwAD.unpack_dual(fn(F, fwAD.make_dual(to_ember(x), to_ember(v))))
    tfw = torch.autograd.forward_ad
    with tfw.dual_level():
        ref = tfw.unpack_dual(fn(TF, tfw.make_dual(to_torch(x), to_torch(v))))
    assert_close(out.primal, ref.primal)
    assert_close(out.tangent, ref.tangent)


# ---- meta device ----------------------------------------------------------------------------

META_CASES = [
    (lambda x: F.max_pool3d(x, 3, 2, 1, ceil_mode=True), (2, 3, 7, 8, 9)),
    (lambda x: F.max_pool3d(x, 2, return_indices=True), (3, 6, 6, 6)),
    (lambda x: F.avg_pool3d(x, (2, 3, 1), (1, 2, 3), (1, 1, 0), ceil_mode=True), (2, 3, 7, 8, 9)),
    (lambda x: F.adaptive_avg_pool3d(x, (2, None, 5)), (2, 3, 7, 8, 9)),
    (lambda x: F.adaptive_max_pool3d(x, 3, return_indices=True), (2, 3, 7, 8, 9)),
    (lambda x: F.lp_pool3d(x, 2, 2), (2, 3, 4, 4, 4)),
]


@pytest.mark.parametrize("fn,shape", META_CASES, ids=[str(i) for i in range(len(META_CASES))])
def test_meta_shapes(fn, shape):
    x = _rand(*shape)
    ref = fn(to_ember(x))
    out = fn(ember.empty(*shape, dtype=ember.float64, device="meta"))
    refs = ref if isinstance(ref, tuple) else (ref,)
    outs = out if isinstance(out, tuple) else (out,)
    for r, o in zip(refs, outs):
        assert o.device.type == "meta"
        assert tuple(o.shape) == tuple(r.shape) and o.dtype == r.dtype


def test_meta_conv_transpose3d_and_backward():
    x = ember.empty(2, 4, 3, 4, 5, device="meta", requires_grad=True)
    w = ember.empty(4, 3, 3, 3, 3, device="meta", requires_grad=True)
    y = F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1)
    ref = TF.conv_transpose3d(torch.empty(2, 4, 3, 4, 5), torch.empty(4, 3, 3, 3, 3), stride=2,
                              padding=1, output_padding=1)
    assert tuple(y.shape) == tuple(ref.shape)
    y.sum().backward()
    assert tuple(x.grad.shape) == tuple(x.shape) and tuple(w.grad.shape) == tuple(w.shape)
    p = ember.empty(2, 3, 5, 6, 7, device="meta", requires_grad=True)
    F.max_pool3d(p, 2).sum().backward()
    assert tuple(p.grad.shape) == (2, 3, 5, 6, 7)


def test_top_level_names():
    x = to_ember(_distinct(1, 2, 4, 4, 4))
    assert_close(ember.max_pool3d(x, [2, 2, 2]), TF.max_pool3d(to_torch(x), 2))
    assert_close(ember.avg_pool3d(x, [2, 2, 2]), TF.avg_pool3d(to_torch(x), 2))
    assert_close(ember.adaptive_avg_pool3d(x, [1, 2, 1]),
                 TF.adaptive_avg_pool3d(to_torch(x), (1, 2, 1)))


# ---- errors ---------------------------------------------------------------------------------

X5 = np.zeros((1, 2, 4, 4, 4))

ERRORS = [
    (lambda x: F.max_pool3d(x, 3, padding=2), RuntimeError, "at most half of the kernel size"),
    (lambda x: F.avg_pool3d(x, 3, padding=2), RuntimeError, "at most half of the kernel size"),
    (lambda x: F.max_pool3d(x, 5), RuntimeError, "output size is too small"),
    (lambda x: F.avg_pool3d(x, (2, 2, 5)), RuntimeError, "output size is too small"),
    (lambda x: F.max_pool3d(x, 0), RuntimeError, "must be positive"),
    (lambda x: F.max_pool3d(x, 2, stride=0), RuntimeError, "must be positive"),
    (lambda x: F.max_pool3d(x, (2, 2)), RuntimeError, "kernel_size must be an int or a tuple of 3"),
    (lambda x: F.avg_pool3d(x, 2, stride=(1, 2)), RuntimeError, "stride must be an int or a tuple"),
    (lambda x: F.max_pool3d(x[0, 0], 2), RuntimeError, r"expected 4-D or 5-D input"),
    (lambda x: F.avg_pool3d(x[0, 0], 2), RuntimeError, r"expected 4-D or 5-D input"),
    (lambda x: F.adaptive_avg_pool3d(x[0, 0], 2), RuntimeError, r"expected 4-D or 5-D input"),
    (lambda x: F.adaptive_max_pool3d(x[0, 0], 2), RuntimeError, r"expected 4-D or 5-D input"),
    (lambda x: F.adaptive_avg_pool3d(x, (2, 2)), RuntimeError, "output_size must be an int or 3"),
    (lambda x: F.avg_pool3d(x, 2, divisor_override=0), RuntimeError, "divisor_override"),
    (lambda x: F.lp_pool3d(x, 2, 5), RuntimeError, "output size is too small"),
    (lambda x: F.conv_transpose3d(x, ember.zeros(2, 3, 2, 2)), RuntimeError, "weight must be 5-D"),
    (lambda x: F.conv_transpose3d(x[0, 0], ember.zeros(2, 3, 2, 2, 2)), RuntimeError,
     r"expected 4-D or 5-D input"),
    (lambda x: F.conv_transpose3d(x, ember.zeros(3, 3, 2, 2, 2)), RuntimeError, "channels"),
    (lambda x: F.conv_transpose3d(x, ember.zeros(2, 3, 2, 2, 2), stride=2, output_padding=2),
     RuntimeError, "output_padding must be smaller than either stride or dilation"),
    (lambda x: F.max_unpool3d(x, ember.zeros(1, 2, 4, 4, 4, dtype=ember.int64), 2,
                              output_size=(3, 3, 3)), ValueError, "invalid output_size"),
    (lambda x: F.max_unpool3d(x, ember.full((1, 2, 4, 4, 4), 1000, dtype=ember.int64), 2),
     RuntimeError, "invalid max index"),
]


@pytest.mark.parametrize("fn,exc,msg", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn(to_ember(X5.astype(np.float32)))
