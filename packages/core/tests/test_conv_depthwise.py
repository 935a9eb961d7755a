"""The direct depthwise convolution kernel (groups == in_channels > 1, csrc/kernels/cpu/
nn_conv_depthwise.cpp): output, input, weight and bias gradients against torch over strides,
padding, dilation, odd and tiny planes, channel multipliers, 1-3 spatial dims, batches that do
not fill a block of samples, non-contiguous inputs, float64 gradcheck, float16 / bfloat16, and
the AVX2 and portable copies of its inner loops (EMBER_CPU_ISA)."""

from __future__ import annotations

import os
import subprocess
import sys

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch

F = torch.nn.functional if torch is not None else None

# (name, input shape (N, C, *spatial), channel multiplier, kernel size, kwargs)
CASES = [
    ("k3_s1_p1", (2, 5, 7, 9), 1, 3, dict(padding=1)),
    ("k3_s2_p1", (3, 4, 9, 8), 1, 3, dict(stride=2, padding=1)),
    ("k3_s2_leftover", (2, 3, 10, 11), 1, 3, dict(stride=2)),
    ("k3_s3", (2, 3, 11, 10), 1, 3, dict(stride=3, padding=1)),
    ("k5_dilation2", (2, 4, 13, 12), 1, 5, dict(padding=4, dilation=2)),
    ("k3_dilation_stride", (2, 3, 12, 13), 1, 3, dict(stride=2, padding=2, dilation=3)),
    ("rect_kernel", (2, 4, 8, 9), 1, (3, 5), dict(stride=(1, 2), padding=(1, 2))),
    ("k1_s2", (2, 4, 7, 6), 1, 1, dict(stride=2)),
    ("k2_s3_bigpad", (2, 3, 5, 7), 1, 2, dict(stride=3, padding=1)),
    ("pad_beyond_kernel", (2, 3, 4, 5), 1, 3, dict(padding=4)),
    ("pad_beyond_kernel_s2", (2, 3, 5, 4), 1, 3, dict(stride=2, padding=(4, 3))),
    ("one_output", (3, 4, 7, 7), 1, 7, dict(stride=5)),
    ("tiny_2x2", (8, 6, 2, 2), 1, 3, dict(padding=1)),
    ("tiny_1x1", (3, 5, 1, 1), 1, 3, dict(padding=1)),
    ("plane_wider_than_vector", (2, 3, 5, 37), 1, 3, dict(padding=1)),
    ("multiplier2", (3, 5, 8, 8), 2, 3, dict(padding=1)),
    ("multiplier3_s2", (2, 4, 11, 5), 3, 3, dict(stride=2, padding=2)),
    ("no_padding", (2, 4, 6, 7), 1, 3, dict()),
    # more samples than one block holds (64 KiB per block): several blocks and a short last one
    ("blocks", (11, 2, 40, 41), 1, 3, dict(padding=1)),
    ("blocks_s2", (7, 2, 64, 63), 1, 3, dict(stride=2, padding=1)),
    ("conv1d", (3, 6, 17), 1, 3, dict(padding=1)),
    ("conv1d_s2_mult", (2, 4, 19), 2, 5, dict(stride=2, padding=2)),
    ("conv3d", (2, 3, 5, 6, 7), 1, 3, dict(padding=1)),
    ("conv3d_s2", (2, 2, 6, 7, 5), 1, (3, 3, 2), dict(stride=(2, 1, 2), padding=(1, 1, 0))),
]
IDS = [c[0] for c in CASES]


def _weight_shape(xs, mult, k):
    dims = len(xs) - 2
    ks = (k,) * dims if isinstance(k, int) else tuple(k)
    return (xs[1] * mult, 1) + ks


def _fn(lib, dims, groups, kw):
    name = {1: "conv1d", 2: "conv2d", 3: "conv3d"}[dims]
    f = getattr(ember if lib is ember else F, name)
    return lambda x, w, b=None: f(x, w, b, groups=groups, **kw)


def _run_both(case, dtype, noncontig=False, seed=0):
    """(ember, torch): [output, grad_input, grad_weight, grad_bias] for a random upstream grad."""
    _, xs, mult, k, kw = case
    rng = np.random.default_rng(seed)
    ws = _weight_shape(xs, mult, k)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    res = []
    for lib in (ember, torch):
        if noncontig:  # the input as a transposed view of a contiguous buffer
            tx = lib.tensor(np.ascontiguousarray(np.swapaxes(x, -1, -2)).astype(dtype))
            tx = tx.transpose(-1, -2)
            assert not tx.is_contiguous()
        else:
            tx = lib.tensor(x.astype(dtype))
        tx.requires_grad_(True)
        tw = lib.tensor(w.astype(dtype), requires_grad=True)
        tb = lib.tensor(b.astype(dtype), requires_grad=True)
        y = _fn(lib, len(xs) - 2, xs[1], kw)(tx, tw, tb)
        g = np.random.default_rng(seed + 1).standard_normal(tuple(y.shape)).astype(dtype)
        grads = lib.autograd.grad(y, [tx, tw, tb], lib.tensor(g))
        res.append([y.detach().numpy()] + [t.numpy() for t in grads])
    return res


def _check(case, dtype, **kw):
    ours, theirs = _run_both(case, dtype, **kw)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-10, atol=1e-10)
    for name, a, b in zip(("output", "grad_input", "grad_weight", "grad_bias"), ours, theirs):
        assert a.shape == b.shape, f"{case[0]}: {name} shape {a.shape} vs torch {b.shape}"
        np.testing.assert_allclose(a, b, err_msg=f"{case[0]}: {name}", **tol)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_depthwise_matches_torch(case, dtype):
    _check(case, dtype)


@needs_torch
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in
                                  ("k3_s1_p1", "k3_s2_p1", "multiplier2", "conv1d")],
                         ids=lambda c: c[0])
def test_depthwise_noncontiguous_input(case):
    _check(case, "float32", noncontig=True)


@needs_torch
def test_depthwise_mobilenet_layer_shapes():
    # The depthwise layers of MobileNetV2 at 64x64, widths x0.5 (batch 8).
    for c, h, s in ((16, 32, 1), (48, 32, 2), (72, 16, 1), (96, 8, 2), (480, 2, 1)):
        _check((f"mbv2_{c}_{h}_{s}", (8, c, h, h), 1, 3, dict(stride=s, padding=1)), "float32")



@needs_torch
@pytest.mark.parametrize("stride", [1, 2, (1, 2), (2, 1)])
def test_depthwise_3x3_float32_forward_edges(stride):
    # The float32 3x3 forward's own kernel (AVX-512 CPUs): widths on both sides of its 16-column
    # blocks, heights that do not fill its 8-row passes, padding from none to past the kernel,
    # a channel multiplier, and a bias.
    rng = np.random.default_rng(11)
    for h, w_, pad, mult in ((1, 1, 1, 1), (3, 3, 0, 1), (5, 15, 1, 2), (9, 16, 1, 1),
                             (8, 17, 2, 1), (17, 31, 1, 1), (7, 32, 3, 3), (10, 33, 1, 1),
                             (3, 40, (0, 2), 1), (13, 47, (2, 1), 2)):
        x = rng.standard_normal((2, 3, h, w_)).astype(np.float32)
        wt = rng.standard_normal((3 * mult, 1, 3, 3)).astype(np.float32)
        b = rng.standard_normal(3 * mult).astype(np.float32)
        got = ember.conv2d(ember.tensor(x), ember.tensor(wt), ember.tensor(b), stride, pad, 1, 3)
        want = F.conv2d(torch.tensor(x), torch.tensor(wt), torch.tensor(b), stride, pad, 1, 3)
        assert tuple(got.shape) == tuple(want.shape), (h, w_, pad, mult)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=f"{(h, w_, pad, mult)}")



@needs_torch
@pytest.mark.parametrize("stride", [1, 2, (2, 1)])
def test_depthwise_3x3_channels_last_input(stride):
    # A channels-last float32 input runs the kernel vectorized over channels (AVX-512): values,
    # a channels-last output as torch's (there), channel counts around its 16-lane blocks, rows with
    # border columns only or room for its 8- to 1-column blocks, and the gradients through it.
    rng = np.random.default_rng(12)
    for n, c, h, w_, pad, bias in ((2, 3, 5, 6, 1, True), (1, 16, 7, 28, 1, False),
                                   (2, 17, 4, 13, 0, True), (1, 40, 9, 3, (2, 1), True),
                                   (3, 32, 2, 37, (1, 3), False)):
        x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
        wt = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32) if bias else None
        ex = ember.tensor(x).to(memory_format=ember.channels_last).requires_grad_(True)
        tx = torch.tensor(x).to(memory_format=torch.channels_last).requires_grad_(True)
        ew, tw = ember.tensor(wt, requires_grad=True), torch.tensor(wt, requires_grad=True)
        ey = ember.conv2d(ex, ew, None if b is None else ember.tensor(b), stride, pad, 1, c)
        ty = F.conv2d(tx, tw, None if b is None else torch.tensor(b), stride, pad, 1, c)
        key = (n, c, h, w_, pad)
        assert tuple(ey.shape) == tuple(ty.shape), key
        if ember._C._cpu_isa() == "avx512":  # elsewhere the NCHW kernels (a contiguous output)
            assert ey.stride() == ty.stride(), key
        np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-5,
                                   atol=1e-5, err_msg=f"{key}")
        g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        ey.backward(ember.tensor(g))
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)

def test_depthwise_3x3_float32_forward_special_values():
    # Padding contributes exact zeros (never a masked-off NaN or inf from beyond the row), and
    # NaN / inf inside the image reach exactly the outputs whose windows cover them.
    x = np.ones((1, 2, 4, 20), np.float32)
    x[0, 0, 1, 0] = np.inf
    x[0, 1, 2, 19] = np.nan
    wt = np.ones((2, 1, 3, 3), np.float32)
    y = ember.conv2d(ember.tensor(x), ember.tensor(wt), None, 1, 1, 1, 2).numpy()
    assert np.isinf(y[0, 0, 0:3, 0:2]).all() and np.isfinite(y[0, 0, 3, :]).all()
    assert np.isfinite(y[0, 0, :, 2:]).all()
    assert np.isnan(y[0, 1, 1:4, 18:20]).all() and np.isfinite(y[0, 1, 0, :]).all()
    assert np.isfinite(y[0, 1, :, :18]).all()
    assert y[0, 0, 3, 5] == 6.0 and y[0, 1, 0, 0] == 4.0

@needs_torch
def test_depthwise_backward_parts_and_threads():
    # convolution_backward asked for some of the gradients only, on one thread and on several.
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((4, 6, 9, 9)), rng.standard_normal((6, 1, 3, 3))
    g = rng.standard_normal((4, 6, 5, 5))
    tgi, tgw, tgb = torch.ops.aten.convolution_backward(
        torch.tensor(g), torch.tensor(x), torch.tensor(w), [6], [2, 2], [1, 1], [1, 1], False,
        [0, 0], 6, [True, True, True])
    prev = ember.get_num_threads()
    try:
        for threads in (1, 2):
            ember.set_num_threads(threads)
            for mask in ((True, False, False), (False, True, False), (False, False, True),
                         (True, True, True)):
                gi, gw, gb = ember._C.convolution_backward(
                    ember.tensor(g), ember.tensor(x), ember.tensor(w), [2, 2], [1, 1], [1, 1],
                    False, [0, 0], 6, *mask)
                for got, want, asked in zip((gi, gw, gb), (tgi, tgw, tgb), mask):
                    if asked:
                        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10,
                                                   atol=1e-10)
                    else:
                        assert got is None
    finally:
        ember.set_num_threads(prev)


def test_depthwise_empty_batch():
    x = ember.zeros(0, 4, 5, 5, requires_grad=True)
    w = ember.randn(4, 1, 3, 3, requires_grad=True)
    y = ember.conv2d(x, w, None, 1, 1, 1, 4)
    assert tuple(y.shape) == (0, 4, 5, 5)
    gi, gw, _ = ember._C.convolution_backward(ember.zeros(0, 4, 5, 5), x.detach(), w.detach(),
                                              [1, 1], [1, 1], [1, 1], False, [0, 0], 4, True,
                                              True, False)
    assert tuple(gi.shape) == (0, 4, 5, 5)
    assert tuple(gw.shape) == (4, 1, 3, 3) and np.all(gw.numpy() == 0)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in
                                  ("k3_s2_p1", "k3_dilation_stride", "multiplier3_s2",
                                   "conv1d_s2_mult", "conv3d_s2")],
                         ids=lambda c: c[0])
def test_depthwise_gradcheck(case):
    _, xs, mult, k, kw = case
    rng = np.random.default_rng(1)
    ws = _weight_shape(xs, mult, k)
    small = (2, xs[1]) + tuple(min(s, 7) for s in xs[2:])
    x = ember.tensor(rng.standard_normal(small), requires_grad=True)
    w = ember.tensor(rng.standard_normal(ws), requires_grad=True)
    b = ember.tensor(rng.standard_normal(ws[0]), requires_grad=True)
    f = _fn(ember, len(xs) - 2, xs[1], kw)
    assert ember.autograd.gradcheck(f, [x, w, b])


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_depthwise_reduced_precision_runs_in_float32(dt):
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(s) for s in ((2, 6, 9, 8), (6, 1, 3, 3), (6,)))
    low = getattr(ember, dt)
    ex, ew, eb = (ember.tensor(a).to(low).requires_grad_(True) for a in (x, w, b))
    y = ember.conv2d(ex, ew, eb, 2, 1, 1, 6)
    assert y.dtype == low
    y.sum().backward()
    assert ex.grad.dtype == low and ew.grad.dtype == low and eb.grad.dtype == low
    # reference: the same (rounded) values in float64
    rx, rw, rb = (t.detach().double().requires_grad_(True) for t in (ex, ew, eb))
    r = ember.conv2d(rx, rw, rb, 2, 1, 1, 6)
    r.sum().backward()
    tol = dict(rtol=2e-2, atol=5e-2) if dt == "bfloat16" else dict(rtol=5e-3, atol=1e-2)
    np.testing.assert_allclose(y.detach().double().numpy(), r.detach().numpy(), **tol)
    np.testing.assert_allclose(ex.grad.double().numpy(), rx.grad.numpy(), **tol)
    np.testing.assert_allclose(ew.grad.double().numpy(), rw.grad.numpy(), rtol=tol["rtol"],
                               atol=tol["atol"] * 10)


def test_depthwise_nn_module_trains():
    # Conv2d(groups=C) inside a module: forward, backward and an optimizer step run and the
    # loss goes down.
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Conv2d(4, 4, 3, padding=1, groups=4),
                                ember.nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4))
    opt = ember.optim.SGD(model.parameters(), lr=0.05)
    x, target = ember.randn(3, 4, 8, 8), ember.randn(3, 8, 4, 4)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


# Ember's own results for a few cases, computed in a subprocess with EMBER_CPU_ISA capped (the
# AVX2 and portable copies of the inner loops) and here with this machine's best copy; the
# script imports ember and numpy only, so that the subprocess starts quickly.
ISA_SCRIPT = """
import sys
import ember
import numpy as np
CASES = [((3, 5, 7, 9), 1, (1, 1), (1, 1), (1, 1)), ((2, 4, 9, 8), 1, (2, 2), (1, 1), (1, 1)),
         ((2, 3, 12, 13), 2, (2, 3), (2, 1), (3, 1)), ((8, 6, 2, 2), 1, (1, 1), (1, 1), (1, 1)),
         ((2, 3, 5, 37), 1, (1, 1), (1, 1), (1, 1)), ((9, 2, 40, 41), 1, (2, 1), (1, 1), (1, 1))]
out = {}
for i, (xs, mult, st, pd, dl) in enumerate(CASES):
    rng = np.random.default_rng(i)
    x = rng.standard_normal(xs)
    w = rng.standard_normal((xs[1] * mult, 1, 3, 3))
    b = rng.standard_normal(xs[1] * mult)
    for dt in ("float32", "float64"):
        tx, tw, tb = (ember.tensor(a.astype(dt), requires_grad=True) for a in (x, w, b))
        y = ember.conv2d(tx, tw, tb, st, pd, dl, xs[1])
        g = ember.tensor(np.random.default_rng(9).standard_normal(tuple(y.shape)).astype(dt))
        grads = ember.autograd.grad(y, [tx, tw, tb], g)
        for name, t in zip(("y", "gx", "gw", "gb"), [y.detach()] + list(grads)):
            out[f"{i}_{dt}_{name}"] = t.numpy()
np.savez(sys.argv[1], **out)
"""


@pytest.mark.skipif(ember._C._cpu_isa() == "baseline",
                    reason="this machine already runs the portable kernels in every test")
def test_depthwise_capped_instruction_sets(tmp_path):
    here = tmp_path / "native.npz"
    subprocess.run([sys.executable, "-c", ISA_SCRIPT, str(here)], check=True, timeout=600)
    want = np.load(here)
    for isa in ("avx2", "baseline"):
        if isa == ember._C._cpu_isa():
            continue
        path = tmp_path / f"{isa}.npz"
        r = subprocess.run([sys.executable, "-c", ISA_SCRIPT, str(path)], capture_output=True,
                           text=True, timeout=600, env=dict(os.environ, EMBER_CPU_ISA=isa))
        assert r.returncode == 0, r.stderr[-3000:]
        got = np.load(path)
        assert sorted(got.files) == sorted(want.files)
        for k in want.files:
            tol = dict(rtol=1e-4, atol=1e-4) if "float32" in k else dict(rtol=1e-11, atol=1e-11)
            np.testing.assert_allclose(got[k], want[k], err_msg=f"{isa}: {k}", **tol)
