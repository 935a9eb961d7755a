"""In-place activations as one kernel writing into their input, and the fused activation
backwards (one op per activation: hardtanh_backward, elu_backward, ...), against torch.

- every in-place form (F.xxx(inplace=True), F.xxx_, Tensor.xxx_, nn modules with inplace=True):
  the values, the result is the input itself, the version counter moves by one, gradients
  through the in-place op (gradcheck in float64, and against torch), and the errors torch
  raises (a leaf that requires grad; elu_ / leaky_relu_ backward with a negative slope);
- out= forms;
- each fused backward against the composition it replaced (grad * _activation_derivative) and
  against torch's aten op of the same name, over dtypes and layouts;
- the profile: F.relu6(x, inplace=True) runs hardtanh's kernel once and no copy_, and
  hardtanh's backward is one hardtanh_backward (no _activation_derivative, no mul);
- the CUDA kernels against the CPU (skipped without a GPU).
"""

from __future__ import annotations

import ember
import ember.nn as nn
import ember.nn.functional as F
import numpy as np
import pytest
from ember.autograd import gradcheck, gradgradcheck
from ember.profiler import profile

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(7)


def _data(*shape, scale=3.0, dtype="float64"):
    a = RNG.standard_normal(shape) * scale
    a[np.abs(a) < 1e-3] = 0.5  # keep away from the kinks
    return a.astype(dtype)


def _et(a, requires_grad=False):
    return ember.tensor(a).requires_grad_(requires_grad)


def _tt(a, requires_grad=False):
    return torch.tensor(a).requires_grad_(requires_grad)


# torch's hardsigmoid_backward scales by 1/6 rounded to float32 in every dtype (ember's float64
# kernel uses the float64 constant): gradients compared with torch allow that rounding.
TORCH_GRAD = dict(rtol=1e-7, atol=1e-12)


def _close(e, t, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(e.detach().numpy().astype(np.float64),
                               t.detach().numpy().astype(np.float64), rtol=rtol, atol=atol)


# (name, ember in-place call, torch in-place call); each takes and returns the tensor.
INPLACE = [
    ("relu6", lambda x: F.relu6(x, inplace=True), lambda x: TF.relu6(x, inplace=True)),
    ("hardtanh", lambda x: F.hardtanh(x, -2.0, 1.5, inplace=True),
     lambda x: TF.hardtanh(x, -2.0, 1.5, inplace=True)),
    ("hardtanh_", lambda x: F.hardtanh_(x, -0.5, 0.5), lambda x: TF.hardtanh_(x, -0.5, 0.5)),
    ("elu", lambda x: F.elu(x, 0.7, inplace=True), lambda x: TF.elu(x, 0.7, inplace=True)),
    ("elu_", lambda x: F.elu_(x, 1.3), lambda x: TF.elu_(x, 1.3)),
    ("selu", lambda x: F.selu(x, inplace=True), lambda x: TF.selu(x, inplace=True)),
    ("selu_", lambda x: ember.selu_(x), lambda x: torch.selu_(x)),
    ("celu", lambda x: F.celu(x, 2.0, inplace=True), lambda x: TF.celu(x, 2.0, inplace=True)),
    ("celu_", lambda x: ember.celu_(x, 0.5), lambda x: torch.celu_(x, 0.5)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2, inplace=True),
     lambda x: TF.leaky_relu(x, 0.2, inplace=True)),
    ("leaky_relu_", lambda x: F.leaky_relu_(x, 0.05), lambda x: TF.leaky_relu_(x, 0.05)),
    ("threshold", lambda x: F.threshold(x, 0.3, -2.0, inplace=True),
     lambda x: TF.threshold(x, 0.3, -2.0, inplace=True)),
    ("threshold_", lambda x: ember.threshold_(x, -0.3, 4.0),
     lambda x: torch.threshold_(x, -0.3, 4.0)),
    ("hardsigmoid", lambda x: F.hardsigmoid(x, inplace=True),
     lambda x: TF.hardsigmoid(x, inplace=True)),
    ("hardswish", lambda x: F.hardswish(x, inplace=True), lambda x: TF.hardswish(x, inplace=True)),
    ("silu", lambda x: F.silu(x, inplace=True), lambda x: TF.silu(x, inplace=True)),
    ("mish", lambda x: F.mish(x, inplace=True), lambda x: TF.mish(x, inplace=True)),
    ("rrelu eval", lambda x: F.rrelu(x, 0.1, 0.3, training=False, inplace=True),
     lambda x: TF.rrelu(x, 0.1, 0.3, training=False, inplace=True)),
    ("gelu_", lambda x: x.gelu_(), lambda x: torch._C._nn.gelu_(x)),
    ("gelu_ tanh", lambda x: x.gelu_(approximate="tanh"),
     lambda x: torch._C._nn.gelu_(x, approximate="tanh")),
]
IDS = [c[0] for c in INPLACE]


@pytest.mark.parametrize("name,fe,ft", INPLACE, ids=IDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inplace_values_identity_version(name, fe, ft, dtype):
    a = _data(4, 7, dtype=dtype)
    x, tx = _et(a), _tt(a)
    before = x._version
    y = fe(x)
    ft(tx)
    assert y is x
    assert x._version == before + 1
    _close(x, tx, rtol=1e-5 if dtype == "float32" else 1e-12,
           atol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("name,fe,ft", INPLACE, ids=IDS)
def test_inplace_strided_and_view(name, fe, ft):
    # a transposed tensor and a view into a bigger one: only the view's elements change
    a = _data(6, 8)
    x, tx = _et(a), _tt(a)
    fe(x.t())
    ft(tx.t())
    _close(x, tx, rtol=1e-12, atol=1e-12)
    x, tx = _et(a), _tt(a)
    before = x._version
    v = fe(x[1:4, ::2])
    ft(tx[1:4, ::2])
    assert v._version == x._version == before + 1
    _close(x, tx, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,fe,ft", INPLACE, ids=IDS)
def test_inplace_gradients_match_torch(name, fe, ft):
    a, g = _data(3, 5), _data(3, 5, scale=1.0)
    x, tx = _et(a, True), _tt(a, True)
    y = fe(x * 1.0)
    ty = ft(tx * 1.0)
    (y * _et(g)).sum().backward()
    (ty * _tt(g)).sum().backward()
    _close(y, ty, rtol=1e-12, atol=1e-12)
    _close(x.grad, tx.grad, **TORCH_GRAD)
    # through a view of a non-leaf: the rest of the base keeps its gradient path
    x, tx = _et(a, True), _tt(a, True)
    b, tb = x * 2.0, tx * 2.0
    fe(b[:, 1:4])
    ft(tb[:, 1:4])
    (b * _et(g)).sum().backward()
    (tb * _tt(g)).sum().backward()
    _close(x.grad, tx.grad, **TORCH_GRAD)


@pytest.mark.parametrize("name,fe,ft", INPLACE, ids=IDS)
def test_inplace_gradcheck(name, fe, ft):
    x = _et(_data(2, 3), True)
    assert gradcheck(lambda t: fe(t * 1.0), (x,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("name,fe,ft", INPLACE, ids=IDS)
def test_inplace_on_leaf_that_requires_grad_is_refused(name, fe, ft):
    x = _et(_data(3), True)
    with pytest.raises(RuntimeError, match="leaf"):
        fe(x)
    with pytest.raises(RuntimeError, match="leaf"):
        ft(_tt(_data(3), True))


@pytest.mark.parametrize("fe,ft", [
    (lambda x: F.leaky_relu(x, -0.5, inplace=True), lambda x: TF.leaky_relu(x, -0.5, inplace=True)),
    (lambda x: F.elu_(x, -0.5), lambda x: TF.elu_(x, -0.5)),
    (lambda x: F.celu(x, -1.5, inplace=True), lambda x: TF.celu(x, -1.5, inplace=True)),
], ids=["leaky_relu_", "elu_", "celu_"])
def test_inplace_negative_slope_backward_is_refused_as_torch(fe, ft):
    a = _data(5)
    # the forward runs (and without autograd nothing is refused) ...
    x, tx = _et(a), _tt(a)
    fe(x)
    ft(tx)
    _close(x, tx, rtol=1e-12, atol=1e-12)
    # ... the backward from the result is refused
    y = fe(_et(a, True) * 1.0)
    with pytest.raises(RuntimeError, match="negative slope"):
        y.sum().backward()
    ty = ft(_tt(a, True) * 1.0)
    with pytest.raises(RuntimeError, match="negative slope"):
        ty.sum().backward()


def test_out_of_place_negative_slope_gradients_match_torch():
    # the out-of-place forms differentiate from the input: any slope / alpha works
    a = _data(6)
    for fe, ft in [(lambda x: F.leaky_relu(x, -0.5), lambda x: TF.leaky_relu(x, -0.5)),
                   (lambda x: F.elu(x, -0.5), lambda x: TF.elu(x, -0.5)),
                   (lambda x: F.celu(x, -1.5), lambda x: TF.celu(x, -1.5))]:
        x, tx = _et(a, True), _tt(a, True)
        fe(x).sum().backward()
        ft(tx).sum().backward()
        _close(x.grad, tx.grad, rtol=1e-10, atol=1e-12)


def test_inplace_integer_and_dtype_errors():
    # hardtanh clamps integers in their dtype, as torch (silu and the rest refuse them)
    x, tx = ember.arange(4), torch.arange(4)
    assert F.hardtanh(x, inplace=True) is x
    torch.nn.functional.hardtanh(tx, inplace=True)
    assert x.tolist() == tx.tolist() and x.dtype == ember.int64
    with pytest.raises(TypeError, match="silu"):
        F.silu(ember.arange(4), inplace=True)
    # threshold takes integers, as torch
    x, tx = ember.arange(-2, 4), torch.arange(-2, 4)
    ember.threshold_(x, 0, 5)
    torch.threshold_(tx, 0, 5)
    assert x.tolist() == tx.tolist()
    assert x.dtype == ember.int64


def test_half_precision_inplace_matches_out_of_place():
    for dtype in (ember.float16, ember.bfloat16):
        a = ember.tensor(_data(4, 33, dtype="float32")).to(dtype)
        for name in ("hardtanh", "elu", "leaky_relu", "hardsigmoid", "hardswish", "silu", "mish",
                     "gelu"):
            ref = getattr(F, name)(a)
            x = a.clone()
            getattr(x, name + "_")()
            assert x.dtype == dtype
            assert ember.equal(x, ref), (name, dtype)


def test_modules_with_inplace_true_write_into_their_input():
    mods = [nn.ReLU6(inplace=True), nn.Hardtanh(-1.0, 2.0, inplace=True),
            nn.ELU(0.5, inplace=True), nn.SELU(inplace=True), nn.CELU(1.5, inplace=True),
            nn.LeakyReLU(0.1, inplace=True), nn.Threshold(0.1, 20.0, inplace=True),
            nn.Hardsigmoid(inplace=True), nn.Hardswish(inplace=True), nn.SiLU(inplace=True),
            nn.Mish(inplace=True), nn.RReLU(inplace=True).eval()]
    for m in mods:
        a = _data(3, 4)
        x = _et(a)
        before = x._version
        with profile() as prof:
            y = m(x)
        assert y is x, m
        assert x._version == before + 1, m
        keys = [r.key for r in prof.key_averages()]
        assert "aten::copy_" not in keys, (m, keys)
        tm = getattr(torch.nn, type(m).__name__)
        args = {"ReLU6": (), "Hardtanh": (-1.0, 2.0), "ELU": (0.5,), "SELU": (), "CELU": (1.5,),
                "LeakyReLU": (0.1,), "Threshold": (0.1, 20.0)}.get(type(m).__name__, ())
        _close(x, tm(*args).eval()(_tt(a)), rtol=1e-12, atol=1e-12)


# ---- out= ---------------------------------------------------------------------------------------
OUT = [
    ("hardtanh", (-0.5, 2.0), lambda x, o: torch._C._nn.hardtanh(x, -0.5, 2.0, out=o)),
    ("elu", (0.5,), lambda x, o: torch._C._nn.elu(x, 0.5, out=o)),
    ("leaky_relu", (0.3,), lambda x, o: torch._C._nn.leaky_relu(x, 0.3, out=o)),
    ("hardsigmoid", (), lambda x, o: torch._C._nn.hardsigmoid(x, out=o)),
    ("hardswish", (), lambda x, o: torch._C._nn.hardswish(x, out=o)),
    ("silu", (), lambda x, o: torch._C._nn.silu(x, out=o)),
    ("mish", (), lambda x, o: torch._C._nn.mish(x, out=o)),
    ("softplus", (2.0, 3.0), lambda x, o: torch._C._nn.softplus(x, 2.0, 3.0, out=o)),
    ("gelu", (), lambda x, o: torch._C._nn.gelu(x, out=o)),
    ("threshold", (0.2, -1.0), lambda x, o: torch.threshold(x, 0.2, -1.0, out=o)),
]


@pytest.mark.parametrize("name,args,ft", OUT, ids=[c[0] for c in OUT])
def test_out_variants(name, args, ft):
    a = _data(3, 4)
    o, to = ember.empty(3, 4, dtype=ember.float64), torch.empty(3, 4, dtype=torch.float64)
    r = getattr(ember._C, name)(_et(a), *args, out=o)
    ft(_tt(a), to)
    assert r is o
    _close(o, to, rtol=1e-12, atol=1e-12)
    # a float32 result into a float64 out= (written with the float32 values), and out= while
    # autograd records refused, as in torch
    o = ember.empty(3, 4, dtype=ember.float64)
    x32 = _et(a.astype("float32"))
    getattr(ember._C, name)(x32, *args, out=o)
    _close(o, getattr(ember._C, name)(x32, *args).double(), rtol=0, atol=0)
    with pytest.raises(RuntimeError):
        getattr(ember._C, name)(_et(a, True), *args, out=ember.empty(3, 4, dtype=ember.float64))


# ---- fused backwards ----------------------------------------------------------------------------
# (backward op, its ember arguments after grad_output and x, the old composition's
# _activation_derivative kind and parameters, torch's call)
BACKWARDS = [
    ("hardtanh_backward", (-1.0, 1.5), ("hardtanh_result", -1.0, 1.5),
     lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -1.0, 1.5)),
    ("hardsigmoid_backward", (), ("hardsigmoid",),
     lambda g, x: torch.ops.aten.hardsigmoid_backward(g, x)),
    ("hardswish_backward", (), ("hardswish",), lambda g, x: torch.ops.aten.hardswish_backward(g, x)),
    ("silu_backward", (), ("silu",), lambda g, x: torch.ops.aten.silu_backward(g, x)),
    ("mish_backward", (), ("mish",), lambda g, x: torch.ops.aten.mish_backward(g, x)),
    ("softplus_backward", (2.0, 4.0), ("softplus", 2.0, 4.0),
     lambda g, x: torch.ops.aten.softplus_backward(g, x, 2.0, 4.0)),
    ("gelu_backward", (), ("gelu",), lambda g, x: torch.ops.aten.gelu_backward(g, x)),
    ("leaky_relu_backward", (0.1, False), ("leaky_relu", 0.1),
     lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.1, False)),
]


def _bw_call(name, args, g, x):
    if name == "gelu_tanh_backward":
        return ember._C.gelu_backward(g, x, approximate="tanh")
    return getattr(ember._C, name)(g, x, *args)


@pytest.mark.parametrize("name,args,old,ft", BACKWARDS, ids=[c[0] for c in BACKWARDS])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_backward_matches_old_composition_and_torch(name, args, old, ft, dtype):
    a, ga = _data(5, 37, dtype=dtype), _data(5, 37, scale=1.0, dtype=dtype)
    a[0, :6] = [-3.0, 3.0, -1.0, 1.5, 0.0, -1.5]  # the kinks
    x, g = _et(a), _et(ga)
    got = _bw_call(name, args, g, x)
    ref = g * ember._C._activation_derivative(x, old[0], 1, *old[1:])
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-13, atol=1e-13)
    _close(got, ref, **tol)
    _close(got, ft(_tt(ga), _tt(a)), **(tol if dtype == "float32" else TORCH_GRAD))
    # strided operands (a transposed gradient, a sliced input) and broadcasting
    got = _bw_call(name, args, g.t().contiguous().t(), x)
    _close(got, ref, **tol)
    got = _bw_call(name, args, g[:, ::2], x[:, ::2])
    _close(got, ref[:, ::2], **tol)
    got = _bw_call(name, args, g[:1], x)
    _close(got, g[:1] * ember._C._activation_derivative(x, old[0], 1, *old[1:]), **tol)


def test_elu_backward_forms_match_torch():
    a, ga = _data(4, 9), _data(4, 9, scale=1.0)
    x, g = _et(a), _et(ga)
    for alpha, scale, iscale in [(1.0, 1.0, 1.0), (0.5, 2.0, 1.5), (-0.5, 1.0, 1.0)]:
        got = ember._C.elu_backward(g, alpha, scale, iscale, False, x)
        want = torch.ops.aten.elu_backward(_tt(ga), alpha, scale, iscale, False, _tt(a))
        _close(got, want, rtol=1e-13, atol=1e-13)
        if alpha >= 0:
            y = ember._C.elu(x, alpha, scale, iscale)
            got = ember._C.elu_backward(g, alpha, scale, iscale, True, y)
            want = torch.ops.aten.elu_backward(_tt(ga), alpha, scale, iscale, True,
                                               torch.ops.aten.elu(_tt(a), alpha, scale, iscale))
            _close(got, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="negative slope"):
        ember._C.elu_backward(g, -0.5, 1.0, 1.0, True, x)
    with pytest.raises(RuntimeError, match="negative slope"):
        ember._C.leaky_relu_backward(g, x, -0.1, True)
    with pytest.raises(TypeError, match="elu_backward"):
        ember._C.elu_backward(g, 1.0, 1.0, 1.0, False, ember.arange(36).reshape(4, 9))


def test_fused_backward_masks_nan_gradients_as_torch():
    # hardtanh / hardsigmoid / hardswish select 0 where the derivative is 0 (not grad * 0)
    g = ember.tensor([float("nan"), float("inf"), 1.0])
    x = ember.tensor([-5.0, 5.0, 0.5])
    tg, tx = torch.tensor([float("nan"), float("inf"), 1.0]), torch.tensor([-5.0, 5.0, 0.5])
    for name in ("hardsigmoid_backward", "hardswish_backward"):
        _close(getattr(ember._C, name)(g, x), getattr(torch.ops.aten, name)(tg, tx))
    _close(ember._C.hardtanh_backward(g, x, -1.0, 1.0),
           torch.ops.aten.hardtanh_backward(tg, tx, -1.0, 1.0))


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_fused_backward_half_precision(dtype):
    a, ga = _data(3, 40, dtype="float32"), _data(3, 40, scale=1.0, dtype="float32")
    for name, args, old, _ in BACKWARDS:
        x, g = ember.tensor(a).to(dtype), ember.tensor(ga).to(dtype)
        got = _bw_call(name, args, g, x)
        assert got.dtype == dtype
        ref = _bw_call(name, args, g.float(), x.float())
        tol = 1e-2 if dtype == ember.float16 else 2e-2
        _close(got.float(), ref, rtol=tol, atol=tol)


# (ember forward, torch forward, the backward op its graph must run)
GRAPH = [
    (lambda x: F.hardtanh(x, -1.0, 1.0), lambda x: TF.hardtanh(x, -1.0, 1.0), "hardtanh_backward"),
    (lambda x: F.relu6(x), lambda x: TF.relu6(x), "hardtanh_backward"),
    (lambda x: F.hardsigmoid(x), lambda x: TF.hardsigmoid(x), "hardsigmoid_backward"),
    (lambda x: F.hardswish(x), lambda x: TF.hardswish(x), "hardswish_backward"),
    (lambda x: F.elu(x, 0.5), lambda x: TF.elu(x, 0.5), "elu_backward"),
    (lambda x: F.selu(x), lambda x: TF.selu(x), "elu_backward"),
    (lambda x: F.celu(x, 1.5), lambda x: TF.celu(x, 1.5), "elu_backward"),
    (lambda x: F.leaky_relu(x, 0.1), lambda x: TF.leaky_relu(x, 0.1), "leaky_relu_backward"),
    (lambda x: F.threshold(x, 0.2, 3.0), lambda x: TF.threshold(x, 0.2, 3.0),
     "threshold_backward"),
    (lambda x: F.silu(x), lambda x: TF.silu(x), "silu_backward"),
    (lambda x: F.mish(x), lambda x: TF.mish(x), "mish_backward"),
    (lambda x: F.softplus(x, 2.0), lambda x: TF.softplus(x, 2.0), "softplus_backward"),
    (lambda x: F.gelu(x), lambda x: TF.gelu(x), "gelu_backward"),
    (lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"),
     "gelu_backward"),
]
GRAPH_IDS = [f"{i}-{c[2]}" for i, c in enumerate(GRAPH)]


@pytest.mark.parametrize("fe,ft,bw", GRAPH, ids=GRAPH_IDS)
def test_backward_is_one_fused_op(fe, ft, bw):
    a, ga = _data(4, 6), _data(4, 6, scale=1.0)
    x, tx = _et(a, True), _tt(a, True)
    y = fe(x)
    with profile() as prof:
        y.backward(_et(ga))
    keys = {r.key: r.count for r in prof.key_averages()}
    assert keys.get("aten::" + bw) == 1, keys
    assert "aten::_activation_derivative" not in keys and "aten::mul" not in keys, keys
    ft(tx).backward(_tt(ga))
    _close(x.grad, tx.grad, **TORCH_GRAD)


@pytest.mark.parametrize("fe,ft,bw", GRAPH, ids=GRAPH_IDS)
def test_double_backward_through_fused_ops(fe, ft, bw):
    x = _et(_data(2, 3), True)
    assert gradgradcheck(fe, (x,), eps=1e-6, atol=1e-5)
    # and through the in-place forms of hardswish / silu / elu (saved input / saved result)
    for f in (lambda t: F.hardswish(t * 1.0, inplace=True), lambda t: F.silu(t * 1.0, inplace=True),
              lambda t: F.elu(t * 1.0, 0.7, inplace=True)):
        assert gradgradcheck(f, (x,), eps=1e-6, atol=1e-5)


def test_forward_ad_through_inplace_and_fused_backward():
    import ember.autograd.forward_ad as fwAD

    a, ta = _data(5), _data(5, scale=1.0)
    for fe, ft in [(lambda t: F.hardtanh(t * 1.0, -1.0, 1.0, inplace=True),
                    lambda t: TF.hardtanh(t * 1.0, -1.0, 1.0, inplace=True)),
                   (lambda t: F.elu(t * 1.0, 0.5, inplace=True),
                    lambda t: TF.elu(t * 1.0, 0.5, inplace=True)),
                   (lambda t: F.silu(t * 1.0, inplace=True),
                    lambda t: TF.silu(t * 1.0, inplace=True))]:
        with fwAD.dual_level():
            y = fe(fwAD.make_dual(_et(a), _et(ta)))
            tangent = fwAD.unpack_dual(y).tangent
        import torch.autograd.forward_ad as tfw

        with tfw.dual_level():
            ty = ft(tfw.make_dual(_tt(a), _tt(ta)))
            ttangent = tfw.unpack_dual(ty).tangent
        _close(tangent, ttangent, rtol=1e-10, atol=1e-12)


# ---- profile / dispatch -------------------------------------------------------------------------
def test_relu6_inplace_is_one_kernel_and_no_copy():
    x = ember.randn(1000)
    with profile() as prof:
        y = F.relu6(x, inplace=True)
    keys = {r.key: r.count for r in prof.key_averages()}
    assert y is x
    assert keys.get("aten::hardtanh") == 1, keys
    assert "aten::copy_" not in keys and "aten::clone" not in keys, keys
    # every other in-place activation: one kernel, no copy, no clone without autograd
    for f, op in [(lambda t: F.hardtanh(t, inplace=True), "hardtanh"),
                  (lambda t: F.elu(t, inplace=True), "elu_"),
                  (lambda t: F.selu(t, inplace=True), "elu_"),
                  (lambda t: F.celu(t, inplace=True), "elu_"),
                  (lambda t: F.leaky_relu(t, inplace=True), "leaky_relu_"),
                  (lambda t: F.threshold(t, 0.1, 2.0, inplace=True), "threshold"),
                  (lambda t: F.hardsigmoid(t, inplace=True), "hardsigmoid"),
                  (lambda t: F.hardswish(t, inplace=True), "hardswish"),
                  (lambda t: F.silu(t, inplace=True), "silu"),
                  (lambda t: F.mish(t, inplace=True), "mish")]:
        with profile() as prof:
            f(x)
        keys = {r.key: r.count for r in prof.key_averages()}
        assert keys.get("aten::" + op) == 1, (op, keys)
        assert "aten::copy_" not in keys and "aten::clone" not in keys, (op, keys)


def test_hardtanh_inplace_with_grad_saves_no_copy():
    # hardtanh_ / relu6_ / elu_ / leaky_relu_ differentiate from the result: no clone of the input
    for f in (lambda t: F.relu6(t, inplace=True), lambda t: F.hardtanh(t, inplace=True),
              lambda t: F.elu(t, inplace=True), lambda t: F.leaky_relu(t, inplace=True)):
        x = ember.randn(100, requires_grad=True)
        y = x * 2.0
        with profile() as prof:
            z = f(y)
        assert z is y
        keys = {r.key for r in prof.key_averages()}
        assert "aten::clone" not in keys and "aten::copy_" not in keys, keys
        z.sum().backward()
        assert x.grad is not None


def test_meta_inplace_and_out():
    x = ember.empty(3, 4, device="meta")
    assert F.relu6(x, inplace=True) is x
    assert F.leaky_relu(x, 0.1, inplace=True) is x
    assert F.silu(x, inplace=True) is x
    o = ember.empty(3, 4, device="meta")
    assert ember._C.hardtanh(x, out=o) is o
    assert ember._C.hardtanh_backward(x, x, -1.0, 1.0).shape == (3, 4)


# ---- CUDA ---------------------------------------------------------------------------------------
cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA device")


@cuda
@pytest.mark.parametrize("name,fe,ft", INPLACE, ids=IDS)
def test_cuda_inplace_matches_cpu(name, fe, ft):
    for dtype in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
        c = ember.tensor(_data(5, 67, dtype="float32")).to(dtype)
        d = c.to("cuda")
        yc, yd = fe(c), fe(d)
        assert yd is d and d.device.type == "cuda"
        tol = 1e-5 if dtype in (ember.float32, ember.float64) else 1e-2
        _close(d.cpu().float(), c.float(), rtol=tol, atol=tol)
        assert yc is c
    # strided view on the device
    c = ember.tensor(_data(6, 8))
    d = c.to("cuda")
    fe(c[1:4, ::2])
    fe(d[1:4, ::2])
    _close(d.cpu(), c, rtol=1e-12, atol=1e-12)
    # gradients through the in-place op on the device
    a, g = _data(3, 5), _data(3, 5, scale=1.0)
    xc, xd = _et(a, True), ember.tensor(a, device="cuda").requires_grad_(True)
    (fe(xc * 1.0) * _et(g)).sum().backward()
    (fe(xd * 1.0) * ember.tensor(g, device="cuda")).sum().backward()
    _close(xd.grad.cpu(), xc.grad, rtol=1e-10, atol=1e-12)


@cuda
@pytest.mark.parametrize("name,args,old,ft", BACKWARDS, ids=[c[0] for c in BACKWARDS])
def test_cuda_fused_backward_matches_cpu(name, args, old, ft):
    for dtype in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
        a, ga = _data(5, 37, dtype="float32"), _data(5, 37, scale=1.0, dtype="float32")
        x, g = ember.tensor(a).to(dtype), ember.tensor(ga).to(dtype)
        want = _bw_call(name, args, g, x)
        got = _bw_call(name, args, g.to("cuda"), x.to("cuda"))
        assert got.device.type == "cuda" and got.dtype == dtype
        tol = 1e-5 if dtype in (ember.float32, ember.float64) else 2e-2
        _close(got.cpu().float(), want.float(), rtol=tol, atol=tol)
        got = _bw_call(name, args, g.to("cuda")[:, ::2], x.to("cuda")[:, ::2])
        _close(got.cpu().float(), want[:, ::2].float(), rtol=tol, atol=tol)
    xd = ember.tensor(_data(4), device="cuda")
    with pytest.raises(RuntimeError, match="negative slope"):
        ember._C.elu_backward(xd, -1.0, 1.0, 1.0, True, xd)


@cuda
def test_cuda_out_threshold_and_elu_backward():
    a = _data(4, 9)
    c, d = _et(a), ember.tensor(a, device="cuda")
    for name, args, _ in OUT:
        o = ember.empty(4, 9, dtype=ember.float64, device="cuda")
        assert getattr(ember._C, name)(d, *args, out=o) is o
        _close(o.cpu(), getattr(ember._C, name)(c, *args), rtol=1e-12, atol=1e-12)
    ci, di = ember.arange(-4, 5), ember.arange(-4, 5, device="cuda")
    assert ember.threshold(di, 0, 7).cpu().tolist() == ember.threshold(ci, 0, 7).tolist()
    g = _data(4, 9, scale=1.0)
    for is_result in (False, True):
        want = ember._C.elu_backward(_et(g), 0.5, 2.0, 1.5, is_result, c)
        got = ember._C.elu_backward(ember.tensor(g, device="cuda"), 0.5, 2.0, 1.5, is_result, d)
        _close(got.cpu(), want, rtol=1e-12, atol=1e-12)
