"""The native CUDA depthwise convolution kernels (csrc/cuda/nn_conv_depthwise.cu) against the CPU:
forward, input and weight gradients (and the bias gradient, computed as for any convolution) of
depthwise conv2d / conv1d (groups == in_channels, depth multiplier 1 to 3), with the private switch
ember._C_cuda._set_depthwise_native on (native kernels) and off (cuDNN, or the GEMM kernels), which
must agree. Skipped without a CUDA device.

The reference is the CPU convolution in float64 of the same (rounded) inputs. Tolerances (relative,
and absolute relative to the largest reference magnitude): float64 1e-10, float32 1e-4 (TF32 off),
float16 2e-2, bfloat16 5e-2 (the kernels compute in float and round once; the GPU may fuse
multiply-adds).

Which path ran is checked through the native pass counter (_depthwise_native_passes: forward,
input and weight gradients count one each) and cuDNN's (_cudnn_stats).

EMBER_DW_SELF_CHECK=1 runs the comparisons with the CPU standing in for the GPU (the switch and
the counters are then not checked): a check of this file's own logic on a machine without a GPU."""

from __future__ import annotations

import contextlib
import os

import ember
import ember.backends.cudnn as cudnn
import ember.nn as nn
import ember.nn.functional as F
import numpy as np
import pytest
from core_helpers import make, to_np

SELF_CHECK = os.environ.get("EMBER_DW_SELF_CHECK") == "1"
DEV = "cpu" if SELF_CHECK else "cuda"
pytestmark = pytest.mark.skipif(
    DEV == "cuda" and not ember.cuda.is_available(), reason="needs a CUDA device"
)

TOL = {"float64": 1e-10, "float32": 1e-4, "float16": 2e-2, "bfloat16": 5e-2}
DTYPES = ["float32", "float64", "float16", "bfloat16"]
RNG = np.random.default_rng(20261127)


def _ext():
    from ember import _C_cuda

    return _C_cuda


@pytest.fixture(autouse=True)
def _defaults():
    """TF32 off (cuDNN's default allows it), the native kernels on; restored afterwards."""
    prev_mm = ember.backends.cuda.matmul.allow_tf32
    prev = {n: getattr(cudnn, n) for n in ("enabled", "deterministic", "allow_tf32")}
    ember.backends.cuda.matmul.allow_tf32 = False
    cudnn.allow_tf32 = False
    prev_native = None if SELF_CHECK else _ext()._depthwise_native()
    yield
    ember.backends.cuda.matmul.allow_tf32 = prev_mm
    for n, v in prev.items():
        setattr(cudnn, n, v)
    if prev_native is not None:
        _ext()._set_depthwise_native(prev_native)


@contextlib.contextmanager
def native(on):
    if SELF_CHECK:
        yield
        return
    ext = _ext()
    prev = ext._depthwise_native()
    ext._set_depthwise_native(on)
    try:
        yield
    finally:
        ext._set_depthwise_native(prev)


def counters():
    if SELF_CHECK:
        return None
    ext = _ext()
    s = dict(ext._cudnn_stats())
    return ext._depthwise_native_passes(), s["runs"] + s["fallbacks"]


def channels_last(t):
    return t.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)


def run_conv(dev, dtype, x0, w0, b0, go0, kw, layout=None):
    """conv (F.conv1d / conv2d by rank) forward and backward on dev in dtype, from float64 arrays:
    returns [out, grad x, grad w, grad b] (grad b None without a bias)."""
    fn = F.conv1d if x0.ndim == 3 else F.conv2d
    x = make(x0, dtype).to(dev).requires_grad_()
    w = make(w0, dtype).to(dev).requires_grad_()
    b = make(b0, dtype).to(dev).requires_grad_() if b0 is not None else None
    xin = layout(x) if layout else x
    out = fn(xin, w, b, **kw)
    go = make(go0, dtype).to(dev)
    (out * go).sum().backward()
    return [out, x.grad, w.grad, b.grad if b is not None else None]


def rounded(a, dtype):
    """a's values as dtype holds them, in float64."""
    return to_np(make(a, dtype)).astype(np.float64)


def problem(xs, C, mult, ks, kw, bias=True):
    """Random float64 operands of a depthwise problem (input xs; C * mult output channels; kernel
    ks), the output's shape from a CPU run."""
    x = RNG.standard_normal(size=xs)
    w = RNG.standard_normal(size=(C * mult, 1, *ks)) * 0.5
    b = RNG.standard_normal(size=(C * mult,)) if bias else None
    fn = F.conv1d if len(xs) == 3 else F.conv2d
    out_shape = tuple(fn(ember.zeros(*xs), ember.zeros(*w.shape), **kw).shape)
    go = np.cos(np.arange(int(np.prod(out_shape))).reshape(out_shape) * 0.37)
    return x, w, b, go


def reference(x, w, b, go, kw, dtype):
    """The CPU float64 results of the dtype-rounded operands."""
    r = [rounded(a, dtype) if a is not None else None for a in (x, w, b, go)]
    return run_conv("cpu", "float64", *r, kw)


def compare(got, ref, dtype, what):
    names = ("output", "grad input", "grad weight", "grad bias")
    for name, g, r in zip(names, got, ref):
        if r is None:
            assert g is None, (what, name)
            continue
        assert g.device.type == DEV, (what, name, g.device)
        assert g.dtype == getattr(ember, dtype), (what, name, g.dtype)
        assert tuple(g.shape) == tuple(r.shape), (what, name, tuple(g.shape), tuple(r.shape))
        gn, rn = to_np(g.cpu()).astype(np.float64), to_np(r)
        scale = max(1.0, float(np.abs(rn).max())) if rn.size else 1.0
        np.testing.assert_allclose(
            gn, rn, rtol=TOL[dtype], atol=TOL[dtype] * scale, err_msg=f"{what} {name}"
        )


def check_case(xs, C, mult, ks, kw, dtype, bias=True, both_ways=True, layout=None):
    """One depthwise problem on the device against the CPU, native; and, when both_ways, with the
    switch off too (cuDNN / GEMM), whose results must agree with the native ones. Checks which
    path ran."""
    kw = dict(kw, groups=C)
    x, w, b, go = problem(xs, C, mult, ks, kw, bias)
    ref = reference(x, w, b, go, kw, dtype)
    what = f"x{xs} C={C} mult={mult} k={ks} {kw} {dtype}"
    before = counters()
    with native(True):
        got = run_conv(DEV, dtype, x, w, b, go, kw, layout)
    after = counters()
    compare(got, ref, dtype, what + " native")
    if before is not None and layout is None:
        assert after[0] - before[0] == 3, (what, "native passes", before, after)
        assert after[1] == before[1], (what, "cuDNN ran for a native depthwise problem")
    if both_ways:
        before = counters()
        with native(False):
            off = run_conv(DEV, dtype, x, w, b, go, kw, layout)
        after = counters()
        compare(off, ref, dtype, what + " switch off")
        if before is not None:
            assert after[0] == before[0], (what, "native kernels ran with the switch off")
        tol = TOL[dtype]
        for i, (a, o) in enumerate(zip(got, off)):
            if a is not None:
                an, on = to_np(a.cpu()), to_np(o.cpu())
                scale = max(1.0, float(np.abs(on).max()))
                np.testing.assert_allclose(
                    an,
                    on,
                    rtol=2 * tol,
                    atol=2 * tol * scale,
                    err_msg=f"{what}: native vs switch off, result {i}",
                )
    return got


# (input shape, multiplier, kernel, keyword arguments): odd sizes, stride 2, dilation 2, padding
# 0 / 1 / 2, multiplier 2 and 3, N = 1, H or W = 1, a kernel larger than the input (padded),
# 3x3 / 5x5 (the unrolled forms, strides 1 and 2) and other sizes (the generic forms), mixed
# strides, 1-d convolutions.
CASES = [
    ((2, 3, 7, 9), 1, (3, 3), dict(padding=1)),
    ((2, 3, 7, 9), 1, (3, 3), dict(stride=2, padding=1)),
    ((1, 2, 8, 7), 2, (3, 3), dict(stride=2)),
    ((2, 4, 9, 8), 1, (3, 3), dict(padding=2, dilation=2)),
    ((1, 3, 6, 11), 1, (5, 5), dict(padding=2)),
    ((2, 2, 9, 9), 1, (5, 5), dict(stride=2, padding=(2, 1))),
    ((1, 2, 5, 6), 3, (3, 3), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    ((2, 2, 1, 13), 1, (1, 3), dict(stride=(1, 2), padding=(0, 1))),
    ((1, 2, 7, 1), 1, (3, 1), dict(stride=(2, 1), padding=(1, 0))),
    ((1, 2, 2, 3), 1, (5, 5), dict(padding=2)),
    ((1, 2, 2, 2), 1, (7, 6), dict(stride=(1, 2), padding=3)),
    ((2, 2, 6, 5), 1, (2, 3), dict(stride=(3, 2), padding=(1, 2), dilation=(2, 1))),
    ((3, 5, 17, 19), 2, (7, 7), dict(padding=3, dilation=1)),
    ((2, 3, 13), 1, (3,), dict(padding=1)),
    ((2, 4, 20), 2, (5,), dict(stride=2, padding=2, dilation=2)),
    ((8, 4, 64, 64), 1, (3, 3), dict(padding=1)),  # the weight gradient in 32 slices
]
CASE_IDS = [
    f"{i}-{'x'.join(map(str, c[0]))}-k{'x'.join(map(str, c[2]))}" for i, c in enumerate(CASES)
]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_cpu_both_ways(case, dtype):
    xs, mult, ks, kw = case
    check_case(xs, xs[1], mult, ks, kw, dtype)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_matches_cpu_16bit(case, dtype):
    xs, mult, ks, kw = case
    # The switch-off path (cuDNN's 16-bit depthwise kernels) only on the small problems.
    check_case(xs, xs[1], mult, ks, kw, dtype, both_ways=xs[0] * xs[1] <= 8)


# MobileNetV2's depthwise convolutions (3x3, padding 1): (channels, input size, stride).
MOBILENET = [
    (32, 56, 1),
    (96, 56, 2),
    (144, 28, 1),
    (144, 28, 2),
    (192, 14, 1),
    (384, 14, 1),
    (576, 14, 2),
    (960, 7, 1),
]


@pytest.mark.parametrize(
    "C,size,stride", MOBILENET, ids=[f"C{c}-{s}-s{t}" for c, s, t in MOBILENET]
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_mobilenet_v2_depthwise(C, size, stride, dtype):
    check_case(
        (4, C, size, size),
        C,
        1,
        (3, 3),
        dict(stride=stride, padding=1),
        dtype,
        both_ways=dtype in ("float32", "float64"),
    )


def test_mobilenet_v2_inverted_residual_training_step():
    """An inverted residual block (1x1 expand, 3x3 depthwise stride 2, 1x1 project, BN, ReLU6):
    loss and every parameter gradient match the CPU."""
    ember.manual_seed(0)
    C, E = 24, 144

    def block():
        return nn.Sequential(
            nn.Conv2d(C, E, 1, bias=False),
            nn.BatchNorm2d(E),
            nn.ReLU6(),
            nn.Conv2d(E, E, 3, stride=2, padding=1, groups=E, bias=False),
            nn.BatchNorm2d(E),
            nn.ReLU6(),
            nn.Conv2d(E, 32, 1, bias=False),
            nn.BatchNorm2d(32),
        )

    net = block()
    x = make(RNG.standard_normal(size=(4, C, 28, 28)), "float32")
    ref = net(x).square().mean()
    ref.backward()
    ref_grads = [to_np(p.grad) for p in net.parameters()]
    net.zero_grad()
    net.to(DEV)
    before = counters()
    out = net(x.to(DEV)).square().mean()
    out.backward()
    after = counters()
    if before is not None:
        assert after[0] - before[0] == 3, (before, after)
    np.testing.assert_allclose(float(to_np(out.cpu())), float(to_np(ref)), rtol=1e-4)
    for i, (p, r) in enumerate(zip(net.parameters(), ref_grads)):
        g = to_np(p.grad.cpu())
        scale = max(1.0, float(np.abs(r).max()))
        np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-4 * scale, err_msg=f"parameter {i}")


def test_weight_gradient_is_deterministic():
    """The same problem twice: bit-identical gradients (no atomics in the native kernels)."""
    kw = dict(padding=1, groups=32)
    x, w, b, go = problem((16, 32, 28, 28), 32, 1, (3, 3), kw)
    runs = [run_conv(DEV, "float32", x, w, b, go, kw) for _ in range(2)]
    for i in range(4):
        np.testing.assert_array_equal(to_np(runs[0][i].cpu()), to_np(runs[1][i].cpu()))


def test_noncontiguous_input_and_only_some_gradients():
    """A sliced (non-contiguous) input runs on contiguous copies; convolution_backward with only
    one of the gradients asked for."""
    base = RNG.standard_normal(size=(2, 9, 10, 12))
    xc = make(base, "float32")[:, 1:7, :, ::2]  # (2, 6, 10, 6), not contiguous
    w = make(RNG.standard_normal(size=(6, 1, 3, 3)), "float32")
    ref = F.conv2d(xc, w, None, 2, 1, 1, 6)
    got = F.conv2d(xc.to(DEV), w.to(DEV), None, 2, 1, 1, 6)
    compare([got], [ref], "float32", "sliced input")
    go = make(RNG.standard_normal(size=tuple(ref.shape)), "float32")
    args = ([2, 2], [1, 1], [1, 1], False, [0, 0], 6)
    for mask in ((True, False, False), (False, True, False), (False, False, True)):
        r = ember.convolution_backward(go, xc, w, *args, *mask)
        g = ember.convolution_backward(go.to(DEV), xc.to(DEV), w.to(DEV), *args, *mask)
        for i in range(3):
            if mask[i]:
                compare([g[i]], [r[i]], "float32", f"convolution_backward mask {mask} result {i}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_channels_last_goes_to_cudnn_when_it_can(dtype):
    """A channels-last depthwise input runs on cuDNN when it is available (as in PyTorch), else on
    the native kernels; the results match the CPU either way."""
    xs, C = (2, 32, 14, 14), 32
    kw = dict(stride=2, padding=1, groups=C)
    x, w, b, go = problem(xs, C, 1, (3, 3), kw)
    ref = reference(x, w, b, go, kw, dtype)
    before = counters()
    got = run_conv(DEV, dtype, x, w, b, go, kw, layout=channels_last)
    after = counters()
    compare(got, ref, dtype, f"channels-last {dtype}")
    if before is not None:
        if cudnn.is_available():
            assert after[0] == before[0] and after[1] - before[1] == 3, (before, after)
        else:
            assert after[0] - before[0] == 3, (before, after)


def test_native_runs_with_cudnn_disabled():
    cudnn.enabled = False
    before = counters()
    check_case((2, 8, 9, 9), 8, 1, (3, 3), dict(stride=2, padding=1), "float32", both_ways=False)
    after = counters()
    if before is not None:
        assert after[1] == before[1]


def test_not_depthwise_is_not_native():
    """groups == 1 (even with one input channel), 1 < groups < C, a transposed depthwise
    convolution, and 3-d convolutions keep their paths."""
    cases = [
        (F.conv2d, (2, 1, 8, 8), (4, 1, 3, 3), dict(padding=1)),
        (F.conv2d, (2, 8, 8, 8), (8, 2, 3, 3), dict(padding=1, groups=4)),
        (F.conv_transpose2d, (2, 8, 5, 5), (8, 1, 3, 3), dict(stride=2, groups=8)),
        (F.conv3d, (1, 4, 5, 6, 7), (4, 1, 3, 3, 3), dict(padding=1, groups=4)),
    ]
    for fn, xs, ws, kw in cases:
        x = make(RNG.standard_normal(size=xs), "float32")
        w = make(RNG.standard_normal(size=ws), "float32")
        before = counters()
        got = fn(x.to(DEV).requires_grad_(), w.to(DEV).requires_grad_(), **kw)
        got.sum().backward()
        after = counters()
        compare([got], [fn(x, w, **kw)], "float32", f"{fn.__name__} {xs} {ws} {kw}")
        if before is not None:
            assert after[0] == before[0], (fn.__name__, xs, ws, kw)


def test_switch_is_private_and_defaults_on():
    if SELF_CHECK:
        pytest.skip("the switch lives in the CUDA extension")
    ext = _ext()
    assert ext._depthwise_native() is True
    ext._set_depthwise_native(False)
    assert ext._depthwise_native() is False
    ext._set_depthwise_native(True)
    assert ext._depthwise_native() is True
