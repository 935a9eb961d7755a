"""The sample-parallel convolution kernels and convolution_backward (the direct backward taken
when no graph of the gradients is built), and the channel-wise batch-norm kernels: values and
gradients against torch for the special cases (1x1, stride 1, groups, dilation, strides that
leave input rows uncovered, non-contiguous inputs, one sample, one thread, reduced precision),
gradcheck, and the double-backward path that create_graph=True still takes."""

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch
from op_db import GradCase, run_case

F = torch.nn.functional if torch is not None else None

# (name, spatial dims, input shape, weight shape, kwargs, transposed)
CASES = [
    ("1x1", 2, (3, 8, 5, 6), (4, 8, 1, 1), dict(), False),
    ("1x1_groups", 2, (3, 8, 5, 6), (6, 4, 1, 1), dict(groups=2), False),
    ("1x1_stride2", 2, (2, 4, 7, 6), (5, 4, 1, 1), dict(stride=2), False),
    ("3x3_s1_p1", 2, (4, 5, 8, 7), (6, 5, 3, 3), dict(padding=1), False),
    ("3x3_s2_leftover", 2, (3, 3, 8, 9), (4, 3, 3, 3), dict(stride=2), False),
    ("groups", 2, (2, 6, 6, 5), (9, 2, 3, 2), dict(groups=3, padding=(1, 0)), False),
    ("depthwise", 2, (2, 4, 6, 6), (8, 1, 3, 3), dict(groups=4, padding=1), False),
    ("dilation", 2, (2, 3, 9, 8), (4, 3, 3, 2), dict(dilation=(2, 3), padding=(2, 1)), False),
    ("one_sample", 2, (1, 4, 9, 9), (5, 4, 3, 3), dict(padding=1), False),
    # 16+ input channels per group with "same" padding: the input gradient is the flipped
    # convolution (float32 on AVX-512); K = C * 9 > 256 splits the kernel's reduction.
    ("same_c32", 2, (3, 32, 6, 5), (20, 32, 3, 3), dict(padding=1), False),
    ("same_c16_groups", 2, (2, 32, 7, 6), (8, 16, 3, 3), dict(padding=1, groups=2), False),
    ("same_c16_dilation", 2, (2, 16, 9, 8), (5, 16, 3, 3), dict(padding=2, dilation=2), False),
    # output lines of 30+ positions: float32 on AVX-512 reads the windows in place (no columns)
    ("lines_tail", 2, (2, 20, 5, 31), (18, 20, 3, 3), dict(padding=1), False),
    ("lines_groups_dilation", 2, (2, 8, 4, 30), (6, 4, 3, 3),
     dict(groups=2, dilation=(1, 2), padding=(1, 2)), False),
    ("lines_no_padding", 2, (3, 3, 6, 33), (4, 3, 3, 3), dict(), False),
    ("lines_1x1", 2, (2, 5, 3, 32), (7, 5, 1, 1), dict(), False),
    ("lines_conv3d", 3, (2, 2, 3, 4, 32), (3, 2, 2, 3, 3), dict(padding=(0, 1, 1)), False),
    ("lines_stride_rows", 2, (2, 4, 9, 32), (5, 4, 3, 3), dict(stride=(2, 1), padding=1), False),
    # float32 on AVX-512: outputs of 256+ positions not read in place (stride 2 along the last
    # dim) take columns from a padded copy in blocks of lines (two blocks here); the first-layer
    # shapes (3 channels) take the weight gradient from per-position window rows.
    ("cols_blocks_stride2", 2, (2, 16, 128, 64), (8, 16, 3, 3), dict(stride=2, padding=1), False),
    ("stem_7x7_s2", 2, (2, 3, 40, 40), (8, 3, 7, 7), dict(stride=2, padding=3), False),
    ("stem_11x11_s4", 2, (2, 3, 31, 31), (8, 3, 11, 11), dict(stride=4, padding=2), False),
    ("1x1_stride2_large", 2, (2, 16, 40, 40), (24, 16, 1, 1), dict(stride=2), False),
    # (strides along the last dim up to the kernel's width: the padded copy stored by phases)
    ("phases_dilation", 2, (2, 4, 11, 13), (5, 4, 3, 3),
     dict(stride=(1, 2), dilation=(1, 2), padding=(1, 2)), False),
    ("phases_stride3", 2, (2, 5, 9, 20), (4, 5, 3, 4), dict(stride=(2, 3), padding=1), False),
    # small outputs: several samples per product (forward and weight gradient), in several
    # chunks of samples, the last one partial
    ("small_many_samples", 2, (41, 16, 3, 3), (24, 16, 3, 3), dict(padding=1), False),
    ("small_1x1_many_samples", 2, (37, 32, 2, 2), (20, 32, 1, 1), dict(), False),
    # a transposed convolution with 16+ output channels: channels-last weight gradient
    ("t_c16", 2, (2, 16, 5, 5), (16, 16, 3, 3), dict(stride=2, padding=1, output_padding=1),
     True),
    ("conv1d", 1, (5, 3, 11), (4, 3, 3), dict(stride=2, padding=1), False),
    ("conv3d", 3, (2, 2, 4, 5, 4), (3, 2, 2, 3, 2), dict(padding=(1, 0, 1)), False),
    ("t_1x1", 2, (3, 6, 4, 5), (6, 2, 1, 1), dict(), True),
    ("t_stride2", 2, (2, 4, 3, 4), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1),
     True),
    ("t_groups_dilation", 2, (3, 4, 4, 3), (4, 2, 2, 3), dict(groups=2, dilation=(2, 1)), True),
    ("t_conv1d", 1, (4, 3, 6), (3, 2, 3), dict(stride=3), True),
]
IDS = [c[0] for c in CASES]


def _fn(lib, k, kw, transposed):
    if transposed:
        name = {1: "conv_transpose1d", 2: "conv_transpose2d"}[k]
    else:
        name = {1: "conv1d", 2: "conv2d", 3: "conv3d"}[k]
    f = getattr(ember if lib is ember else F, name)
    return lambda x, w, b=None: f(x, w, b, **kw)


def _arrays(xs, ws, kw, transposed, seed=0):
    rng = np.random.default_rng(seed)
    nb = ws[1] * kw.get("groups", 1) if transposed else ws[0]
    return rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(nb)


def _run_both(case, dtype, noncontig=False):
    """(ember, torch) outputs and input/weight/bias gradients for a random upstream gradient."""
    _, k, xs, ws, kw, transposed = case
    x, w, b = _arrays(xs, ws, kw, transposed)
    out = []
    for lib in (ember, torch):
        xa = x
        if noncontig:  # the input as a transposed view of a contiguous buffer
            xa = np.ascontiguousarray(np.swapaxes(x, -1, -2))
        tx = lib.tensor(xa.astype(dtype))
        if noncontig:
            tx = tx.transpose(-1, -2)
            assert not tx.is_contiguous()
        tx.requires_grad_(True)
        tw = lib.tensor(w.astype(dtype), requires_grad=True)
        tb = lib.tensor(b.astype(dtype), requires_grad=True)
        y = _fn(lib, k, kw, transposed)(tx, tw, tb)
        g = np.random.default_rng(7).standard_normal(tuple(y.shape)).astype(dtype)
        grads = lib.autograd.grad(y, [tx, tw, tb], lib.tensor(g))
        out.append([y.detach().numpy()] + [t.numpy() for t in grads])
    return out


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-10, atol=1e-10)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv_values_and_grads_match_torch(case, dtype):
    ours, theirs = _run_both(case, dtype)
    for name, a, b in zip(("output", "grad_input", "grad_weight", "grad_bias"), ours, theirs):
        np.testing.assert_allclose(a, b, err_msg=f"{case[0]}: {name}", **_tol(dtype))


@needs_torch
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("1x1", "3x3_s1_p1", "groups",
                                                                 "t_stride2")],
                         ids=lambda c: c[0])
def test_conv_noncontiguous_input(case):
    ours, theirs = _run_both(case, "float64", noncontig=True)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **_tol("float64"))


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_weight_grad_reproducible_with_threads(stride):
    # The weight gradient sums per-worker partials: which samples a worker takes must not depend
    # on timing, or runs differ in the last bits (they did, with samples handed out on demand).
    prev = ember.get_num_threads()
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((8, 32, 16, 16)).astype(np.float32), requires_grad=True)
    w = ember.tensor(rng.standard_normal((64, 32, 3, 3)).astype(np.float32), requires_grad=True)
    g = ember.tensor(rng.standard_normal((8, 64, 16 // stride, 16 // stride)).astype(np.float32))
    try:
        ember.set_num_threads(2)
        grads = []
        for _ in range(12):
            w.grad = None
            ember.nn.functional.conv2d(x, w, padding=1, stride=stride).backward(g)
            grads.append(w.grad.numpy().copy())
    finally:
        ember.set_num_threads(prev)
    for other in grads[1:]:
        np.testing.assert_array_equal(other, grads[0])


@needs_torch
def test_conv_single_thread_matches():
    case = CASES[3]
    prev = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        ours, theirs = _run_both(case, "float32")
    finally:
        ember.set_num_threads(prev)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **_tol("float32"))


def test_conv_resnet_sized_float32_against_float64():
    # Big enough for several samples per thread and columns of a realistic size.
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((8, 16, 16, 16)), rng.standard_normal((16, 16, 3, 3)) * 0.1
    res = {}
    for dt in (ember.float32, ember.float64):
        ex = ember.tensor(x).to(dt).requires_grad_(True)
        ew = ember.tensor(w).to(dt).requires_grad_(True)
        y = ember.conv2d(ex, ew, None, 1, 1)
        (y * y).sum().backward()
        res[dt] = (y.detach().double().numpy(), ex.grad.double().numpy(), ew.grad.double().numpy())
    for a, b in zip(res[ember.float32], res[ember.float64]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3 * np.abs(b).max())


# Layers of the paper's CNNs (benchmarks/paper/models.py, scaled down): each float32 kernel
# (in-place lines, small outputs batched over samples, strided columns by phases, channels-last
# and window-row weight gradients, the transposed input gradient) against float64's BLAS kernels.
PAPER_LAYERS = [
    ("vgg_64ch_8x8", (8, 64, 8, 8), (64, 64, 3, 3), dict(padding=1)),
    ("vgg_32ch_32x32", (3, 32, 32, 32), (32, 32, 3, 3), dict(padding=1)),
    ("vgg_stem", (4, 3, 32, 32), (16, 3, 3, 3), dict(padding=1)),
    ("alexnet_stem", (4, 3, 40, 40), (16, 3, 11, 11), dict(stride=4, padding=2)),
    ("alexnet_5x5_widening", (8, 16, 7, 7), (48, 16, 5, 5), dict(padding=2)),
    ("resnet_stem", (4, 3, 32, 32), (16, 3, 7, 7), dict(stride=2, padding=3)),
    ("resnet_3x3_s2", (8, 32, 8, 8), (32, 32, 3, 3), dict(stride=2, padding=1)),
    ("resnet_1x1_s2", (8, 64, 4, 4), (128, 64, 1, 1), dict(stride=2)),
    ("resnet_1x1_2x2", (8, 128, 2, 2), (32, 128, 1, 1), dict()),
]


@pytest.mark.parametrize("case", PAPER_LAYERS, ids=[c[0] for c in PAPER_LAYERS])
def test_conv_paper_layers_float32_against_float64(case):
    _, xs, ws, kw = case
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws) * 0.1, rng.standard_normal(ws[0])
    res = {}
    for dt in (ember.float32, ember.float64):
        ex = ember.tensor(x).to(dt).requires_grad_(True)
        ew = ember.tensor(w).to(dt).requires_grad_(True)
        eb = ember.tensor(b).to(dt).requires_grad_(True)
        y = ember.conv2d(ex, ew, eb, **kw)
        g = ember.tensor(np.random.default_rng(6).standard_normal(tuple(y.shape))).to(dt)
        y.backward(g)
        res[dt] = [t.double().numpy() for t in (y.detach(), ex.grad, ew.grad, eb.grad)]
    for name, a, b64 in zip(("output", "grad_input", "grad_weight", "grad_bias"),
                            res[ember.float32], res[ember.float64]):
        np.testing.assert_allclose(a, b64, rtol=1e-4, atol=1e-4 * np.abs(b64).max(),
                                   err_msg=f"{case[0]}: {name}")


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_conv_reduced_precision_runs_in_float32(dt):
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    low = getattr(ember, dt)
    ex = ember.tensor(x).to(low).requires_grad_(True)
    ew = ember.tensor(w).to(low).requires_grad_(True)
    eb = ember.tensor(b).to(low).requires_grad_(True)
    y = ember.conv2d(ex, ew, eb, 1, 1)
    assert y.dtype == low
    y.sum().backward()
    assert ex.grad.dtype == low and ew.grad.dtype == low and eb.grad.dtype == low
    # reference: the same (rounded) values in float64
    rx, rw, rb = (t.detach().double().requires_grad_(True) for t in (ex, ew, eb))
    r = ember.conv2d(rx, rw, rb, 1, 1)
    r.sum().backward()
    tol = dict(rtol=2e-2, atol=5e-2) if dt == "bfloat16" else dict(rtol=5e-3, atol=1e-2)
    np.testing.assert_allclose(y.detach().double().numpy(), r.detach().numpy(), **tol)
    np.testing.assert_allclose(ew.grad.double().numpy(), rw.grad.numpy(), rtol=tol["rtol"],
                               atol=tol["atol"] * 10)
    np.testing.assert_allclose(ex.grad.double().numpy(), rx.grad.numpy(), **tol)


def _grad_case(case):
    name, k, xs, ws, kw, transposed = case

    def fn(x, w, b):
        lib = torch if torch is not None and isinstance(x, torch.Tensor) else ember
        return _fn(lib, k, kw, transposed)(x, w, b)

    def inputs(rng):
        nb = ws[1] * kw.get("groups", 1) if transposed else ws[0]
        return [rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(nb)]

    return GradCase("conv_fast_" + name, fn, inputs)


# gradcheck (first derivatives run convolution_backward) and double backward (create_graph:
# the composite formulas) on the smaller cases.
GRAD_CASES = [_grad_case(c) for c in CASES if c[0] in
              ("1x1", "1x1_stride2", "3x3_s2_leftover", "depthwise", "dilation", "conv1d",
               "t_1x1", "t_groups_dilation")]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.name for c in GRAD_CASES])
def test_conv_gradcheck(case):
    run_case(case)


def test_convolution_backward_op_checks_grad_shape():
    x, w = ember.zeros(2, 3, 6, 6), ember.zeros(4, 3, 3, 3)
    with pytest.raises(RuntimeError, match=r"convolution_backward: expected grad_output of shape "
                       r"\(2, 4, 4, 4\)"):
        ember._C.convolution_backward(ember.zeros(2, 4, 5, 5), x, w, [1, 1], [0, 0], [1, 1], False,
                                      [0, 0], 1, True, True, True)
    gi, gw, gb = ember._C.convolution_backward(ember.ones(2, 4, 4, 4), x, w, [1, 1], [0, 0],
                                               [1, 1], False, [0, 0], 1, False, True, True)
    assert gi is None
    assert tuple(gw.shape) == (4, 3, 3, 3) and np.all(gw.numpy() == 0)
    np.testing.assert_allclose(gb.numpy(), np.full(4, 32.0))


# ---- batch norm ---------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 3, 5, 7), (6, 5), (3, 4, 37), (2, 3, 2, 3, 4), (2, 2, 1)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_torch(dtype, shape, training):
    rng = np.random.default_rng(5)
    c = shape[1]
    x = rng.standard_normal(shape) * 3 + 10  # an offset mean: the variance must not cancel
    w, b = rng.standard_normal(c), rng.standard_normal(c)
    rm, rv = rng.standard_normal(c), rng.uniform(0.5, 2, c)
    g = rng.standard_normal(shape)
    res = []
    for lib in (ember, torch):
        tx = lib.tensor(x.astype(dtype), requires_grad=True)
        tw = lib.tensor(w.astype(dtype), requires_grad=True)
        tb = lib.tensor(b.astype(dtype), requires_grad=True)
        trm, trv = lib.tensor(rm.astype(dtype)), lib.tensor(rv.astype(dtype))
        if lib is ember:
            y = ember.batch_norm(tx, tw, tb, trm, trv, training, 0.1, 1e-5)
        else:
            y = F.batch_norm(tx, trm, trv, tw, tb, training, 0.1, 1e-5)
        grads = lib.autograd.grad(y, [tx, tw, tb], lib.tensor(g.astype(dtype)))
        res.append([y.detach().numpy(), trm.numpy(), trv.numpy()] + [t.numpy() for t in grads])
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-9, atol=1e-9)
    for name, a, b_ in zip(("out", "running_mean", "running_var", "grad_input", "grad_weight",
                            "grad_bias"), *res):
        np.testing.assert_allclose(a, b_, err_msg=name, **tol)


BN_GRAD_CASES = [
    GradCase("batch_norm_train", lambda x, w, b: (
        ember.batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
        if not (torch is not None and isinstance(x, torch.Tensor))
        else F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5)),
        lambda rng: [rng.standard_normal((3, 2, 4, 5)), rng.standard_normal(2),
                     rng.standard_normal(2)], gradgrad=False),
]


@pytest.mark.parametrize("case", BN_GRAD_CASES, ids=[c.name for c in BN_GRAD_CASES])
def test_batch_norm_gradcheck(case):
    run_case(case)


# ---- average pooling over long rows (summed in independent lanes) -------------------------------

@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("how", ["global", "adaptive_2x3", "avg_2x20"])
def test_avg_pool_long_rows_match_torch(dtype, how):
    import ember.nn.functional as EF

    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 5, 41)) + 3.0
    res = []
    for lib, f in ((ember, EF), (torch, F)):
        t = lib.tensor(x.astype(dtype), requires_grad=True)
        if how == "global":
            y = f.adaptive_avg_pool2d(t, 1)
        elif how == "adaptive_2x3":
            y = f.adaptive_avg_pool2d(t, (2, 3))
        else:
            y = f.avg_pool2d(t, (2, 20), stride=(1, 7))
        g = np.random.default_rng(8).standard_normal(tuple(y.shape)).astype(dtype)
        (gx,) = lib.autograd.grad(y, [t], lib.tensor(g))
        res.append((y.detach().numpy(), gx.numpy()))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, **tol)
