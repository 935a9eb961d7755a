"""The CUDA nn kernels against the CPU's: softmax / log_softmax, layer / RMS / group / batch norm,
nll_loss and the fused cross entropy, embedding and dropout, forward and backward (the raw ops of
ops/nn.yaml through ember._C, and autograd through ember.nn.functional). Every op runs on CPU
tensors and on their CUDA copies (contiguous and strided, the shapes of real models) and the
results must agree: float32 / float64 tightly (sums in another order: rtol 2e-5 / 1e-10),
float16 / bfloat16 loosely (one or two roundings of the 16-bit result: 1e-2 / 4e-2). Dropout is
random, so only its statistics and its consistency with the mask are checked. Skipped without a
CUDA device. EMBER_TEST_NN_DEVICE=cpu runs the same comparisons CPU against CPU (a dry run of the
test logic on a machine without a GPU)."""

from __future__ import annotations

import os

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from core_helpers import to_np

DEV = os.environ.get("EMBER_TEST_NN_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(
    DEV == "cuda" and not ember.cuda.is_available(), reason="needs a CUDA device"
)

C = ember._C
FLOATS = ["float32", "float64", "float16", "bfloat16"]
TOL = {"float32": 2e-5, "float64": 1e-10, "float16": 1e-2, "bfloat16": 4e-2}
RNG = np.random.default_rng(2024)


def make(shape, dtype="float32", scale=1.0):
    """A CPU tensor of `dtype` with standard-normal values times scale."""
    a = (RNG.standard_normal(size=shape) * scale).astype(np.float64)
    if dtype == "float64":
        return ember.tensor(a)
    return ember.tensor(a.astype(np.float32)).to(getattr(ember, dtype))


def ints(values, dtype="int64"):
    return ember.tensor(np.asarray(values, dtype=dtype))


def cu(t):
    return t.to(DEV) if isinstance(t, ember.Tensor) else t


def strided(t):
    """A non-contiguous view holding t's values: t stored transposed, viewed back."""
    if t.dim() < 2:
        return t
    return t.transpose(0, -1).contiguous().transpose(0, -1)


def check(gpu, cpu, tol, what=""):
    """gpu (on DEV) matches cpu: device, shape, dtype and values (NaN where cpu has NaN)."""
    assert gpu.device.type == DEV, (what, gpu.device)
    assert tuple(gpu.shape) == tuple(cpu.shape), (what, tuple(gpu.shape), tuple(cpu.shape))
    assert gpu.dtype == cpu.dtype, (what, gpu.dtype, cpu.dtype)
    np.testing.assert_allclose(
        to_np(gpu.cpu()), to_np(cpu), rtol=tol, atol=tol, equal_nan=True, err_msg=what
    )


def check_all(gpus, cpus, tol, what=""):
    assert len(gpus) == len(cpus)
    for i, (g, c) in enumerate(zip(gpus, cpus)):
        if c is None:  # a gradient that was not asked for
            assert g is None, (what, i)
            continue
        check(g, c, tol, f"{what}[{i}]")


# ---- softmax ----------------------------------------------------------------------------------

SOFTMAX_CASES = [
    ((7, 33), -1),  # warp per row
    ((3, 1500), -1),  # block per row
    ((4, 1024), 1),  # the largest warp row
    ((3, 5, 6), 1),  # a middle dim: thread per column
    ((6, 2, 3), 0),
    ((2, 3000, 3), 1),  # few long strided rows: block per row, stride 3
    ((5,), 0),
    ((), 0),
    ((0, 4), 1),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_forward_backward(dtype, shape, dim, log):
    fwd = C.log_softmax if log else C.softmax
    bwd = C._log_softmax_backward_data if log else C._softmax_backward_data
    x = make(shape, dtype, scale=3.0)
    y = fwd(x, dim)
    yg = fwd(cu(x), dim)
    check(yg, y, TOL[dtype], "forward")
    check(fwd(cu(strided(x)), dim), y, TOL[dtype], "forward, strided input")
    g = make(shape, dtype)
    check(bwd(cu(g), yg, dim), bwd(g, y, dim), TOL[dtype] * 4, "backward")
    check(bwd(cu(strided(g)), cu(strided(y)), dim), bwd(g, y, dim), TOL[dtype] * 4, "strided")


@pytest.mark.parametrize("log", [False, True])
def test_softmax_dtype_argument_and_errors(log):
    fwd = C.log_softmax if log else C.softmax
    x = make((4, 9), "float16")
    check(fwd(cu(x), 1, ember.float32), fwd(x, 1, ember.float32), 1e-6, "dtype=float32")
    xi = ints(np.arange(12).reshape(3, 4))
    check(fwd(cu(xi), 1, ember.float64), fwd(xi, 1, ember.float64), 1e-12, "int input, dtype=")
    with pytest.raises(TypeError, match="floating"):
        fwd(cu(xi), 1)
    with pytest.raises(IndexError):
        fwd(cu(x), 2)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_inf_and_nan_rows(log):
    fwd = C.log_softmax if log else C.softmax
    ninf = float("-inf")
    rows = [
        [ninf, 1.0, 2.0, ninf],  # masked attention
        [ninf, ninf, ninf, ninf],  # fully masked: nan
        [1.0, float("nan"), 0.0, 2.0],  # nan poisons the row
        [0.0, 0.0, 0.0, 0.0],
        [float("inf"), 1.0, 2.0, ninf],  # a +inf maximum: exp(inf - inf) makes the row nan
        [1.0, 2.0, 3.0, float("inf")],  # (the online max + sum must not give 0 for the rest)
    ]
    x = ember.tensor(np.array(rows, dtype=np.float32))
    check(fwd(cu(x), 1), fwd(x, 1), 1e-6, "special rows")
    check(fwd(cu(x.t().contiguous()), 0), fwd(x.t().contiguous(), 0), 1e-6, "special columns")
    xl = ember.tensor(np.concatenate([np.full((2, 1500), -np.inf), RNG.standard_normal((2, 1500))],
                                     axis=1).astype(np.float32))
    check(fwd(cu(xl), 1), fwd(xl, 1), 1e-6, "long rows with -inf")
    xl[1, 700] = float("inf")
    check(fwd(cu(xl), 1), fwd(xl, 1), 1e-6, "long rows with +inf")


@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((4, 32768), "float32"),  # 128 KiB rows: softmax_rows_smem_kernel, 1024 threads
        ((3, 40000), "bfloat16"),  # 80 KiB: two 512-thread blocks per SM
        ((2, 50003), "float16"),  # a length that leaves heads and tails
        ((2, 20000), "float64"),  # 160 KiB
        ((3, 16380), "float32"),  # just under 64 KiB: softmax_rows_kernel
        ((2, 60000), "float32"),  # 240 KB: over the opt-in limit, softmax_rows_kernel
    ],
)
@pytest.mark.parametrize("offset", [0, 1])
def test_softmax_long_rows(shape, dtype, offset):
    # Rows read once into shared memory (64 KiB up to the opt-in limit) and the fallback; offset 1
    # starts the rows one element past a 16-byte boundary (a contiguous view of a longer buffer:
    # the shared copy is shifted so that its packs stay aligned).
    rows, n = shape
    flat = make((rows * n + offset,), dtype, scale=3.0)
    x = flat[offset:].view(rows, n)
    xg = cu(flat)[offset:].view(rows, n)
    for log in (False, True):
        fwd = C.log_softmax if log else C.softmax
        check(fwd(xg, 1), fwd(x, 1), TOL[dtype], f"log={log} offset={offset}")
    xs = x.contiguous().float()
    xs[0, :] = float("-inf")  # a fully masked row: NaN
    xs[1, 5] = float("inf")  # a +inf maximum: NaN
    if rows > 2:
        xs[2, n - 1] = float("nan")
    xs = xs.to(getattr(ember, dtype))
    for log in (False, True):
        fwd = C.log_softmax if log else C.softmax
        check(fwd(cu(xs), 1), fwd(xs, 1), TOL[dtype], f"special rows log={log}")


@pytest.mark.parametrize(
    "shape,dim,dtype",
    [
        ((32, 12, 128, 128), -1, "float32"),  # attention scores of a BERT-base layer
        ((32, 12, 128, 128), -1, "bfloat16"),
        ((8, 50257), -1, "float32"),  # a GPT-2 LM head
        ((64, 1000), 1, "float16"),  # ImageNet classes
    ],
)
def test_softmax_model_shapes(shape, dim, dtype):
    x = make(shape, dtype, scale=2.0)
    for log in (False, True):
        fwd = C.log_softmax if log else C.softmax
        bwd = C._log_softmax_backward_data if log else C._softmax_backward_data
        y = fwd(x, dim)
        yg = fwd(cu(x), dim)
        check(yg, y, TOL[dtype], f"forward log={log}")
        g = make(shape, dtype)
        check(bwd(cu(g), yg, dim), bwd(g, y, dim), TOL[dtype] * 4, f"backward log={log}")


# ---- layer norm / RMS norm --------------------------------------------------------------------

LN_CASES = [
    ((4, 16, 768), [768]),  # a transformer's hidden states
    ((5, 6, 7), [6, 7]),
    ((3, 3000), [3000]),  # block per row
    ((2, 1), [1]),
    ((1000, 64), [64]),  # many rows: several column chunks in the parameter gradients
]


def norm_tol(dtype):
    return {"float32": 1e-4, "float64": 1e-10, "float16": 2e-2, "bfloat16": 6e-2}[dtype]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,ns", LN_CASES)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_backward(dtype, shape, ns, affine):
    x = make(shape, dtype, scale=2.0) + 0.5
    w = make(ns, dtype) if affine else None
    b = make(ns, dtype) if affine else None
    tol = norm_tol(dtype)
    ref = C.native_layer_norm(x, ns, w, b, 1e-5)
    got = C.native_layer_norm(cu(x), ns, cu(w), cu(b), 1e-5)
    check_all(got, ref, tol, "layer_norm")
    got_s = C.native_layer_norm(cu(strided(x)), ns, cu(w), cu(b), 1e-5)
    check(got_s[0], ref[0], tol, "layer_norm, strided input")
    g = make(shape, dtype)
    _, mean, rstd = ref
    rb = C.native_layer_norm_backward(g, x, ns, mean, rstd, w, True, affine, affine)
    gb = C.native_layer_norm_backward(
        cu(g), cu(x), ns, cu(mean), cu(rstd), cu(w), True, affine, affine
    )
    # Parameter gradients sum over every row: their error grows with the row count.
    check_all(gb, rb, tol * 10, "layer_norm_backward")
    gb_s = C.native_layer_norm_backward(
        cu(strided(g)), cu(strided(x)), ns, cu(mean), cu(rstd), cu(w), True, False, False
    )
    check(gb_s[0], rb[0], tol * 10, "layer_norm_backward, strided")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,ns", LN_CASES[:3])
def test_rms_norm_forward_backward(dtype, shape, ns):
    x = make(shape, dtype, scale=2.0)
    w = make(ns, dtype)
    tol = norm_tol(dtype)
    for weight in (w, None):
        ref = C._fused_rms_norm(x, ns, weight, 1e-6)
        got = C._fused_rms_norm(cu(x), ns, cu(weight), 1e-6)
        check_all(got, ref, tol, "rms_norm")
        g = make(shape, dtype)
        wg = weight is not None
        rb = C._fused_rms_norm_backward(g, x, ns, ref[1], weight, True, wg)
        gb = C._fused_rms_norm_backward(cu(g), cu(x), ns, cu(ref[1]), cu(weight), True, wg)
        check_all(gb, rb, tol * 10, "rms_norm_backward")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape,ns", [((6, 40), [40]), ((3, 1500), [1500])])
def test_layer_norm_of_a_16_bit_input_with_float32_parameters(dtype, shape, ns):
    """Mixed precision (autocast keeps parameters in float32): the float32 weight and bias are
    applied unrounded and the output rounded once, as on the CPU; the statistics and the parameter
    gradients come back in float32."""
    x = make(shape, dtype, scale=2.0) + 0.5
    # Weights with more bits than the 16-bit input keeps: rounding them first would show.
    w = make(ns, "float32") * 1.001 + 1.0 / 3.0
    b = make(ns, "float32") + 1.0 / 7.0
    ref = C.native_layer_norm(x, ns, w, b, 1e-5)
    got = C.native_layer_norm(cu(x), ns, cu(w), cu(b), 1e-5)
    assert got[1].dtype == ember.float32 and got[2].dtype == ember.float32
    # One rounding of a 16-bit output: within one unit in the last place of the CPU's.
    check_all(got, ref, {"float16": 2e-3, "bfloat16": 1.6e-2}[dtype], "mixed layer_norm")
    g = make(shape, dtype)
    rb = C.native_layer_norm_backward(g, x, ns, ref[1], ref[2], w, True, True, True)
    gb = C.native_layer_norm_backward(
        cu(g), cu(x), ns, cu(ref[1]), cu(ref[2]), cu(w), True, True, True
    )
    assert gb[1].dtype == ember.float32 and gb[2].dtype == ember.float32
    check_all(gb, rb, norm_tol(dtype) * 10, "mixed layer_norm_backward")


# ---- group norm -------------------------------------------------------------------------------

GN_CASES = [((4, 32, 8, 8), 8), ((2, 6, 10), 3), ((3, 4), 2), ((2, 64, 40, 40), 32)]


def test_group_norm_of_empty_groups_has_statistics():
    """Zero spatial elements / no normalized columns: the output is empty but mean / rstd are
    written (0 and NaN, as the CPU and torch), not left uninitialized."""
    x = ember.zeros(2, 4, 0)
    ref = C.native_group_norm(x, 2, None, None, 1e-5)
    got = C.native_group_norm(cu(x), 2, None, None, 1e-5)
    check_all(got, ref, 1e-6, "group_norm of empty groups")
    x = ember.zeros(3, 0)
    check_all(C.native_layer_norm(cu(x), [0], None, None, 1e-5),
              C.native_layer_norm(x, [0], None, None, 1e-5), 1e-6, "layer_norm of empty rows")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", GN_CASES)
def test_group_norm_forward_backward(dtype, shape, groups):
    x = make(shape, dtype, scale=2.0) - 0.3
    c = shape[1]
    w, b = make((c,), dtype), make((c,), dtype)
    tol = norm_tol(dtype)
    for affine in (True, False):
        ww, bb = (w, b) if affine else (None, None)
        ref = C.native_group_norm(x, groups, ww, bb, 1e-5)
        got = C.native_group_norm(cu(x), groups, cu(ww), cu(bb), 1e-5)
        check_all(got, ref, tol, "group_norm")
        check(C.native_group_norm(cu(strided(x)), groups, cu(ww), cu(bb), 1e-5)[0], ref[0], tol,
              "group_norm, strided")
        g = make(shape, dtype)
        rb = C.native_group_norm_backward(g, x, groups, ref[1], ref[2], ww, True, affine, affine)
        gb = C.native_group_norm_backward(
            cu(g), cu(x), groups, cu(ref[1]), cu(ref[2]), cu(ww), True, affine, affine
        )
        check_all(gb, rb, tol * 10, "group_norm_backward")


# ---- batch norm -------------------------------------------------------------------------------

BN_CASES = [(8, 16, 5, 5), (32, 10), (4, 3, 7, 6, 2), (64, 8, 28, 28)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", BN_CASES)
def test_batch_norm_training_updates_running_stats(dtype, shape):
    c = shape[1]
    x = make(shape, dtype, scale=2.0) + 1.5
    w, b = make((c,), dtype), make((c,), dtype)
    tol = norm_tol(dtype)
    # Running statistics in float32 also for 16-bit inputs (as mixed-precision models keep them).
    stat_dt = "float64" if dtype == "float64" else "float32"
    rm, rv = make((c,), stat_dt), make((c,), stat_dt).abs() + 0.5
    rm_g, rv_g = cu(rm.clone()), cu(rv.clone())
    ref = C.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
    got = C.native_batch_norm(cu(x), cu(w), cu(b), rm_g, rv_g, True, 0.1, 1e-5)
    check_all(got, ref, tol, "batch_norm train")
    check(rm_g, rm, 1e-5 if stat_dt == "float32" else 1e-10, "running_mean")
    check(rv_g, rv, 1e-5 if stat_dt == "float32" else 1e-10, "running_var")
    # without affine parameters or running statistics, strided input
    ref2 = C.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    got2 = C.native_batch_norm(cu(strided(x)), None, None, None, None, True, 0.1, 1e-5)
    check_all(got2, ref2, tol, "batch_norm train, no affine")
    g = make(shape, dtype)
    rb = C.native_batch_norm_backward(g, x, w, ref[1], ref[2], True, True, True, True)
    gb = C.native_batch_norm_backward(
        cu(g), cu(x), cu(w), cu(ref[1]), cu(ref[2]), True, True, True, True
    )
    check_all(gb, rb, tol * 10, "batch_norm_backward train")


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_eval(dtype):
    shape = (6, 5, 4, 3)
    x = make(shape, dtype)
    w, b = make((5,), dtype), make((5,), dtype)
    rm, rv = make((5,), dtype), make((5,), dtype).abs() + 0.5
    tol = norm_tol(dtype)
    rm_g, rv_g = cu(rm), cu(rv)
    ref = C.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)
    got = C.native_batch_norm(cu(x), cu(w), cu(b), rm_g, rv_g, False, 0.1, 1e-5)
    check_all(got, ref, tol, "batch_norm eval")
    check(rm_g, rm, 0.0, "eval leaves running_mean")
    g = make(shape, dtype)
    rb = C.native_batch_norm_backward(g, x, w, ref[1], ref[2], False, True, True, True)
    gb = C.native_batch_norm_backward(
        cu(g), cu(x), cu(w), cu(ref[1]), cu(ref[2]), False, True, True, True
    )
    check_all(gb, rb, tol * 10, "batch_norm_backward eval")
    with pytest.raises(RuntimeError, match="running_mean"):
        C.native_batch_norm(cu(x), None, None, None, None, False, 0.1, 1e-5)


# ---- batch norm: layouts, dtypes, accuracy (the rewritten kernels' paths) ---------------------


def cl_format(t):
    return ember.channels_last if t.dim() == 4 else ember.channels_last_3d


def to_cl(t):
    """t's values in channels_last (4-d) / channels_last_3d (5-d) memory order."""
    return t.contiguous(memory_format=cl_format(t))


def running_pair(c, dtype):
    """running_mean, running_var of `dtype` (variances positive)."""
    return make((c,), dtype), make((c,), dtype).abs() + 0.5


def bn_both(x_cpu, x_dev, w, b, rm, rv, training, momentum=0.1, eps=1e-5):
    """native_batch_norm on the CPU and on DEV (their own copies of the running statistics):
    (cpu results, dev results, cpu running stats, dev running stats)."""
    rm_c = rm.clone() if rm is not None else None
    rv_c = rv.clone() if rv is not None else None
    rm_g = cu(rm.clone()) if rm is not None else None
    rv_g = cu(rv.clone()) if rv is not None else None
    ref = C.native_batch_norm(x_cpu, w, b, rm_c, rv_c, training, momentum, eps)
    got = C.native_batch_norm(x_dev, cu(w), cu(b), rm_g, rv_g, training, momentum, eps)
    return ref, got, (rm_c, rv_c), (rm_g, rv_g)


def running_tol(dtype):
    return 1e-10 if dtype == "float64" else 1e-5


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "shape", [(4, 8, 5, 6), (3, 12, 7, 7), (2, 6, 3, 4, 5), (5, 3, 2, 9), (4, 16, 4, 4)]
)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_channels_last(dtype, shape, training):
    """A channels_last input is read in place and gives channels_last results (as torch); the
    values are the CPU's. grad_out in either layout."""
    c = shape[1]
    x = make(shape, dtype, scale=2.0) + 0.5
    w, b = make((c,), dtype), make((c,), dtype)
    rm, rv = running_pair(c, "float64" if dtype == "float64" else "float32")
    tol = norm_tol(dtype)
    xg = to_cl(cu(x))
    ref, got, (rm_c, rv_c), (rm_g, rv_g) = bn_both(x, xg, w, b, rm, rv, training)
    check_all(got, ref, tol, "batch_norm channels_last")
    check(rm_g, rm_c, running_tol(dtype), "running_mean")
    check(rv_g, rv_c, running_tol(dtype), "running_var")
    if DEV == "cuda":
        assert got[0].is_contiguous(memory_format=cl_format(xg)), got[0].stride()
    g = make(shape, dtype)
    rb = C.native_batch_norm_backward(g, x, w, ref[1], ref[2], training, True, True, True)
    for gg in (cu(g), to_cl(cu(g))):
        gb = C.native_batch_norm_backward(
            gg, xg, cu(w), cu(ref[1]), cu(ref[2]), training, True, True, True
        )
        check_all(gb, rb, tol * 10, "batch_norm_backward channels_last")
        if DEV == "cuda":
            assert gb[0].is_contiguous(memory_format=cl_format(xg)), gb[0].stride()


MIXED = [
    # input, weight / bias, running statistics
    ("float32", "float32", "float64"),
    ("float32", "float64", "float64"),
    ("float32", "float16", "float32"),
    ("float16", "float32", "float32"),
    ("bfloat16", "float32", "float32"),
    ("float16", "float16", "float32"),
    ("bfloat16", "bfloat16", "bfloat16"),
    ("float64", "float32", "float32"),
]


@pytest.mark.parametrize("xdt,pdt,rdt", MIXED)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "2d"])
def test_batch_norm_mixed_dtypes(xdt, pdt, rdt, training, layout):
    """Weight / bias and running statistics of other dtypes than the input (mixed precision,
    float64 statistics): read and updated in place in their own dtypes, results as the CPU's
    (saved statistics' dtype included)."""
    shape = (12, 5) if layout == "2d" else (6, 5, 4, 3)
    x = make(shape, xdt, scale=1.5) + 0.3
    w, b = make((5,), pdt), make((5,), pdt)
    rm, rv = running_pair(5, rdt)
    xg = to_cl(cu(x)) if layout == "channels_last" else cu(x)
    ref, got, (rm_c, rv_c), (rm_g, rv_g) = bn_both(x, xg, w, b, rm, rv, training)
    tol = max(norm_tol(xdt), norm_tol(rdt)) if training else norm_tol(xdt)
    check_all(got, ref, tol, f"batch_norm {xdt}/{pdt}/{rdt}")
    # the running statistics: exact to their own dtype's rounding of the input precision's
    # statistics
    rt = max(running_tol(xdt), running_tol(rdt) if rdt != "float16" and rdt != "bfloat16"
             else norm_tol(rdt))
    check(rm_g, rm_c, rt, "running_mean")
    check(rv_g, rv_c, rt, "running_var")
    g = make(shape, xdt)
    rb = C.native_batch_norm_backward(g, x, w, ref[1], ref[2], training, True, True, True)
    gb = C.native_batch_norm_backward(
        cu(g), xg, cu(w), cu(ref[1]), cu(ref[2]), training, True, True, True
    )
    check_all(gb, rb, tol * 10, f"batch_norm_backward {xdt}/{pdt}/{rdt}")


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_running_stats_in_place(training):
    """The running statistics are updated in place (same storage, version bumped) in training
    and left alone in eval; strided (every other element of a buffer) and float64 ones too."""
    shape = (4, 6, 5, 5)
    x = make(shape, "float32", scale=2.0) - 1.0
    w, b = make((6,), "float32"), make((6,), "float32")
    for rdt in ("float32", "float64"):
        base_m, base_v = make((12,), rdt), make((12,), rdt).abs() + 0.5
        cm, cv = base_m.clone(), base_v.clone()
        gm, gv = cu(base_m.clone()), cu(base_v.clone())
        rm_g, rv_g = gm[::2], gv[::2]
        ptr_m, ver_m, ver_v = rm_g.data_ptr(), rm_g._version, rv_g._version
        ref = C.native_batch_norm(x, w, b, cm[::2], cv[::2], training, 0.2, 1e-5)
        got = C.native_batch_norm(cu(x), cu(w), cu(b), rm_g, rv_g, training, 0.2, 1e-5)
        check_all(got, ref, norm_tol("float32"), f"batch_norm, strided {rdt} running stats")
        assert rm_g.data_ptr() == ptr_m
        check(gm, cm, 1e-5, "running_mean buffer (odd elements untouched)")
        check(gv, cv, 1e-5, "running_var buffer (odd elements untouched)")
        if training:
            assert rm_g._version > ver_m and rv_g._version > ver_v
        else:
            assert rm_g._version == ver_m and rv_g._version == ver_v
            check(gm, base_m, 0.0, "eval leaves running_mean")


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "2d"])
def test_batch_norm_backward_masks(train, layout):
    """Every subset of (input, weight, bias) gradients, training and eval backward."""
    shape = (10, 6) if layout == "2d" else (4, 6, 5, 5)
    x = make(shape, "float32", scale=2.0) + 0.7
    w, b = make((6,), "float32"), make((6,), "float32")
    rm, rv = running_pair(6, "float32")
    ref = C.native_batch_norm(x, w, b, rm.clone(), rv.clone(), train, 0.1, 1e-5)
    g = make(shape, "float32")
    xg = to_cl(cu(x)) if layout == "channels_last" else cu(x)
    for mask in range(8):
        wants = (bool(mask & 1), bool(mask & 2), bool(mask & 4))
        for weight in (w, None):
            rb = C.native_batch_norm_backward(g, x, weight, ref[1], ref[2], train, *wants)
            gb = C.native_batch_norm_backward(
                cu(g), xg, cu(weight), cu(ref[1]), cu(ref[2]), train, *wants
            )
            check_all(gb, rb, 1e-3,
                      f"batch_norm_backward wants={wants} weight={weight is not None}")


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_batch_norm_large_count_accuracy(layout):
    """float32 statistics over 4M values per channel of mean 1000 and std 1 (per-thread Welford
    and Chan's combination: a naive E[x^2] - E[x]^2 in float32 loses the variance entirely),
    against float64 references of the same values."""
    shape = (16, 2, 512, 512) if layout == "contiguous" else (16, 8, 256, 256)
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(size=shape) + 1000.0).astype(np.float32)
    x = ember.tensor(a)
    xg = to_cl(cu(x)) if layout == "channels_last" else cu(x)
    c = shape[1]
    w = ember.tensor(rng.standard_normal(c).astype(np.float32))
    b = ember.tensor(rng.standard_normal(c).astype(np.float32))
    rm, rv = ember.zeros(c).to(DEV), ember.ones(c).to(DEV)
    y, mean, invstd = C.native_batch_norm(xg, cu(w), cu(b), rm, rv, True, 0.1, 1e-5)
    a64 = a.astype(np.float64)
    axes = (0,) + tuple(range(2, a.ndim))
    m64 = a64.mean(axis=axes)
    v64 = a64.var(axis=axes)
    n = a64.size // c
    np.testing.assert_allclose(to_np(mean.cpu()), m64, rtol=1e-6, atol=0)
    np.testing.assert_allclose(to_np(invstd.cpu()), 1 / np.sqrt(v64 + 1e-5), rtol=2e-4, atol=0)
    np.testing.assert_allclose(to_np(rm.cpu()), 0.1 * m64, rtol=1e-6, atol=0)
    np.testing.assert_allclose(to_np(rv.cpu()), 0.9 + 0.1 * v64 * n / (n - 1), rtol=1e-5, atol=0)
    bshape = (1, c) + (1,) * (a.ndim - 2)
    want = (a64 - m64.reshape(bshape)) / np.sqrt(v64.reshape(bshape) + 1e-5)
    want = want * to_np(w).reshape(bshape) + to_np(b).reshape(bshape)
    # y = x * scale + shift: x * scale rounds at |x| ~ 1000 (float32: ~6e-5 absolute)
    np.testing.assert_allclose(to_np(y.cpu()), want, rtol=0, atol=2e-3)
    # the backward's sums over the same counts: sum g and sum g * xhat against float64
    g = ember.tensor(rng.standard_normal(size=shape).astype(np.float32))
    gi, gw, gb = C.native_batch_norm_backward(cu(g), xg, cu(w), mean, invstd, True, True, True,
                                              True)
    g64 = to_np(g).astype(np.float64)
    xhat = (a64 - to_np(mean.cpu()).reshape(bshape)) * to_np(invstd.cpu()).reshape(bshape)
    sg, sgx = g64.sum(axis=axes), (g64 * xhat).sum(axis=axes)
    scale = np.sqrt(n)  # the sums' magnitude
    np.testing.assert_allclose(to_np(gb.cpu()), sg, rtol=0, atol=1e-4 * scale)
    np.testing.assert_allclose(to_np(gw.cpu()), sgx, rtol=0, atol=1e-4 * scale)
    k = (to_np(w) * to_np(invstd.cpu())).reshape(bshape)
    want_gi = k * (g64 - (sg / n).reshape(bshape) - xhat * (sgx / n).reshape(bshape))
    np.testing.assert_allclose(to_np(gi.cpu()), want_gi, rtol=0, atol=1e-3)


def test_batch_norm_misaligned_and_odd_sizes():
    """Views whose data start off the 16-byte vectors (the scalar path), sizes that are not
    multiples of the vector width, one channel, one sample, a single-row spatial extent."""
    for shape in [(2, 3, 4, 4), (3, 1, 6, 5), (1, 4, 7), (5, 7, 1, 3), (2, 5, 3, 3)]:
        n = int(np.prod(shape))
        flat = make((n + 1,), "float32", scale=2.0) + 0.5
        x = flat[1:].reshape(shape)
        xg = cu(flat)[1:].reshape(shape)
        c = shape[1]
        w, b = make((c,), "float32"), make((c,), "float32")
        rm, rv = running_pair(c, "float32")
        for training in (True, False):
            ref, got, (rm_c, rv_c), (rm_g, rv_g) = bn_both(x, xg, w, b, rm, rv, training)
            check_all(got, ref, 1e-4, f"batch_norm misaligned {shape}")
            check(rv_g, rv_c, 1e-5, "running_var")
            gflat = make((n + 1,), "float32")
            rb = C.native_batch_norm_backward(gflat[1:].reshape(shape), x, w, ref[1], ref[2],
                                              training, True, True, True)
            gb = C.native_batch_norm_backward(cu(gflat)[1:].reshape(shape), xg, cu(w),
                                              cu(ref[1]), cu(ref[2]), training, True, True, True)
            check_all(gb, rb, 1e-3, f"batch_norm_backward misaligned {shape}")
    # channels_last data starting one element into its buffer
    shape = (3, 8, 4, 5)
    nhwc = (3, 4, 5, 8)
    flat = make((int(np.prod(shape)) + 1,), "float32") + 0.5
    x = flat[1:].reshape(nhwc).permute(0, 3, 1, 2)
    xg = cu(flat)[1:].reshape(nhwc).permute(0, 3, 1, 2)
    ref, got, _, _ = bn_both(x, xg, None, None, None, None, True)
    check_all(got, ref, 1e-4, "batch_norm misaligned channels_last")


def test_batch_norm_zero_size_and_errors():
    # eval with no samples / no spatial elements: saved statistics from the running ones
    for shape in [(0, 3, 4), (2, 3, 0), (0, 3)]:
        x = make(shape, "float32")
        rm, rv = running_pair(3, "float32")
        ref, got, _, _ = bn_both(x, cu(x), None, None, rm, rv, False)
        check_all(got, ref, 1e-6, f"batch_norm eval {shape}")
        g = make(shape, "float32")
        rb = C.native_batch_norm_backward(g, x, None, ref[1], ref[2], False, True, True, True)
        gb = C.native_batch_norm_backward(
            cu(g), cu(x), None, cu(ref[1]), cu(ref[2]), False, True, True, True
        )
        check_all(gb, rb, 1e-6, f"batch_norm_backward {shape}")
    # no channels
    x = make((2, 0, 4), "float32")
    ref, got, _, _ = bn_both(x, cu(x), None, None, None, None, True)
    check_all(got, ref, 0.0, "batch_norm no channels")
    # one value per channel in training
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        C.native_batch_norm(cu(make((1, 3, 1, 1), "float32")), None, None, None, None, True,
                            0.1, 1e-5)
    with pytest.raises(RuntimeError, match="running_mean"):
        C.native_batch_norm(cu(make((2, 3), "float32")), None, None, None, None, False, 0.1, 1e-5)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_module_running_stats(momentum):
    """nn.BatchNorm2d (momentum=None: the cumulative average) over a few steps, channels_last
    batches included: the running statistics and outputs follow the CPU module's."""
    ember.manual_seed(0)
    m_c = ember.nn.BatchNorm2d(6, momentum=momentum)
    m_g = ember.nn.BatchNorm2d(6, momentum=momentum).to(DEV)
    m_g.load_state_dict(m_c.state_dict())
    for step in range(3):
        x = make((4, 6, 5, 5), "float32", scale=1.0 + step) + step
        xg = to_cl(cu(x)) if step == 1 else cu(x)
        check(m_g(xg), m_c(x), 1e-4, f"step {step}")
    check(m_g.running_mean, m_c.running_mean, 1e-5, "running_mean")
    check(m_g.running_var, m_c.running_var, 1e-5, "running_var")
    assert int(m_g.num_batches_tracked.item()) == int(m_c.num_batches_tracked.item()) == 3
    m_c.eval()
    m_g.eval()
    x = make((3, 6, 4, 4), "float32")
    check(m_g(cu(x)), m_c(x), 1e-4, "eval")


# ---- nll_loss / cross entropy -----------------------------------------------------------------


def targets(n_shape, c, ignore=None, frac=0.2):
    t = RNG.integers(0, c, size=n_shape)
    if ignore is not None:
        t = np.where(RNG.random(n_shape) < frac, ignore, t)
    return ints(t)


NLL_CASES = [((16, 10), (16,)), ((4, 7, 3, 5), (4, 3, 5)), ((9,), ())]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("xshape,tshape", NLL_CASES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(dtype, xshape, tshape, reduction, weighted):
    c = xshape[0] if len(xshape) == 1 else xshape[1]
    x = C.log_softmax(make(xshape, dtype), 0 if len(xshape) == 1 else 1)
    w = make((c,), dtype).abs() + 0.1 if weighted else None
    tol = TOL[dtype] * 4
    for ignore in (-100, 2):
        t = targets(tshape, c, ignore=ignore if ignore >= 0 else None)
        ref = C.nll_loss(x, t, w, reduction, ignore)
        check(C.nll_loss(cu(x), cu(t), cu(w), reduction, ignore), ref, tol, "nll_loss")
        check(C.nll_loss(cu(strided(x)), cu(t), cu(w), reduction, ignore), ref, tol, "strided")
        go = make(tuple(ref.shape), dtype)
        rb = C.nll_loss_backward(go, x, t, w, reduction, ignore)
        check(C.nll_loss_backward(cu(go), cu(x), cu(t), cu(w), reduction, ignore), rb, tol,
              "nll_loss_backward")
    t32 = ints(RNG.integers(0, c, size=tshape), "int32")
    check(C.nll_loss(cu(x), cu(t32), cu(w), reduction, -100), C.nll_loss(x, t32, w, reduction, -100),
          tol, "int32 targets")


def test_nll_loss_all_ignored_mean_is_nan_and_errors():
    x = make((3, 4))
    t = ints([1, 1, 1])
    check(C.nll_loss(cu(x), cu(t), None, "mean", 1), C.nll_loss(x, t, None, "mean", 1), 0, "nan")
    with pytest.raises(IndexError, match="out of bounds"):
        C.nll_loss(cu(x), cu(ints([0, 4, 1])), None, "mean", -100)
    with pytest.raises(IndexError, match="out of bounds"):
        C.nll_loss(cu(x), cu(ints([0, -3, 1])), None, "none", -100)
    with pytest.raises(IndexError, match="out of bounds"):
        C.nll_loss_backward(cu(ember.ones(())), cu(x), cu(ints([0, 9, 1])), None, "sum", -100)
    with pytest.raises(RuntimeError, match="target of shape"):
        C.nll_loss(cu(x), cu(ints([0, 1])), None, "mean", -100)
    with pytest.raises(ValueError, match="reduction"):
        C.nll_loss(cu(x), cu(t), None, "avg", -100)


CE_CASES = [((16, 10), (16,)), ((4, 7, 3, 5), (4, 3, 5)), ((9,), ()), ((6, 1500), (6,))]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("xshape,tshape", CE_CASES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.15])
def test_cross_entropy_loss(dtype, xshape, tshape, reduction, smoothing):
    c = xshape[0] if len(xshape) == 1 else xshape[1]
    x = make(xshape, dtype, scale=3.0)
    tol = TOL[dtype] * 4
    for weighted, ignore in ((False, -100), (True, 1), (True, -100)):
        w = make((c,), dtype).abs() + 0.1 if weighted else None
        t = targets(tshape, c, ignore=ignore if ignore >= 0 else None)
        args = (w, reduction, ignore, smoothing)
        ref, lse = C._cross_entropy_loss(x, t, *args)
        got, lse_g = C._cross_entropy_loss(cu(x), cu(t), *[cu(a) for a in args])
        check(got, ref, tol, f"cross_entropy weighted={weighted} ignore={ignore}")
        check(lse_g, lse, tol, "lse")
        check(C._cross_entropy_loss(cu(strided(x)), cu(t), *[cu(a) for a in args])[0], ref, tol,
              "strided")
        go = make(tuple(ref.shape), dtype)
        rb = C._cross_entropy_loss_backward(go, x, t, w, lse, reduction, ignore, smoothing)
        gb = C._cross_entropy_loss_backward(
            cu(go), cu(x), cu(t), cu(w), lse_g, reduction, ignore, smoothing
        )
        check(gb, rb, tol, "cross_entropy_backward")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cross_entropy_lm_head(dtype):
    """GPT-2's vocabulary: rows of 50257 logits, one block per sample."""
    x = make((12, 50257), dtype, scale=2.0)
    t = targets((12,), 50257, ignore=-100, frac=0.1)
    ref, lse = C._cross_entropy_loss(x, t, None, "mean", -100, 0.1)
    got, lse_g = C._cross_entropy_loss(cu(x), cu(t), None, "mean", -100, 0.1)
    check(got, ref, TOL[dtype] * 4, "loss")
    check(lse_g, lse, TOL[dtype] * 4, "lse")
    go = ember.tensor(1.0).to(getattr(ember, dtype))
    rb = C._cross_entropy_loss_backward(go, x, t, None, lse, "mean", -100, 0.1)
    gb = C._cross_entropy_loss_backward(cu(go), cu(x), cu(t), None, lse_g, "mean", -100, 0.1)
    check(gb, rb, TOL[dtype] * 4, "grad")


def test_cross_entropy_inf_logits():
    """A +inf logit makes its sample's lse and loss nan (as the CPU's two-pass log-sum-exp), a
    row of -inf too; the other samples are unaffected."""
    x = make((4, 7), scale=2.0)
    x[0, 3] = float("inf")
    x[1] = float("-inf")
    xl = make((3, 1500), scale=2.0)
    xl[2, 999] = float("inf")
    for xx in (x, xl):
        t = ints([1] * xx.shape[0])
        for red in ("none", "sum"):
            ref, lse = C._cross_entropy_loss(xx, t, None, red, -100, 0.1)
            got, lse_g = C._cross_entropy_loss(cu(xx), cu(t), None, red, -100, 0.1)
            check(got, ref, 1e-5, f"loss {red}")
            check(lse_g, lse, 1e-5, "lse")


def test_cross_entropy_errors():
    x = cu(make((3, 4)))
    with pytest.raises(IndexError, match="out of bounds"):
        C._cross_entropy_loss(x, cu(ints([0, 4, 1])), None, "mean", -100, 0.0)
    with pytest.raises(ValueError, match="label_smoothing"):
        C._cross_entropy_loss(x, cu(ints([0, 1, 1])), None, "mean", -100, 1.5)
    with pytest.raises(TypeError, match="class indices"):
        C._cross_entropy_loss(x, cu(make((3,))), None, "mean", -100, 0.0)


# ---- embedding --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_embedding_forward_backward(dtype):
    w = make((50, 24), dtype)
    idx = ints(RNG.integers(0, 50, size=(6, 9)))
    check(C.embedding(cu(w), cu(idx)), C.embedding(w, idx), 0.0, "embedding")
    check(C.embedding(cu(strided(w)), cu(idx.to(ember.int32))), C.embedding(w, idx), 0.0,
          "strided weight, int32 indices")
    g = make((6, 9, 24), dtype)
    tol = {"float32": 1e-5, "float64": 1e-12, "float16": 1e-2, "bfloat16": 4e-2}[dtype]
    for padding_idx in (-1, int(to_np(idx)[0, 0])):
        for freq in (False, True):
            ref = C.embedding_dense_backward(g, idx, 50, padding_idx, freq)
            got = C.embedding_dense_backward(cu(g), cu(idx), 50, padding_idx, freq)
            check(got, ref, tol, f"embedding_backward padding_idx={padding_idx} freq={freq}")
    # Many duplicates of a few rows (atomics under contention), an NCF-sized table. The CUDA
    # kernel sums 16-bit gradients in float32 and rounds once, where the CPU rounds every add:
    # compare with the float64 sum rounded to the dtype.
    idx2 = ints(RNG.integers(0, 4, size=(4096,)))
    g2 = make((4096, 64), dtype)
    # (The CPU kernel itself, rounding every add, misses that for the 16-bit dtypes: the dry run
    # on the CPU skips them.)
    if DEV == "cpu" and dtype in ("float16", "bfloat16"):
        return
    ref2 = C.embedding_dense_backward(g2.to(ember.float64), idx2, 100000, -1, False)
    check(C.embedding_dense_backward(cu(g2), cu(idx2), 100000, -1, False),
          ref2.to(g2.dtype), 5e-4 if dtype == "float32" else tol, "duplicates")


def test_embedding_errors():
    w = cu(make((10, 4)))
    with pytest.raises(IndexError, match="out of range"):
        C.embedding(w, cu(ints([1, 10])))
    with pytest.raises(IndexError, match="out of range"):
        C.embedding(w, cu(ints([-1, 2])))
    with pytest.raises(IndexError, match="out of range"):
        C.embedding_dense_backward(cu(make((2, 4))), cu(ints([1, 12])), 10, -1, False)
    with pytest.raises(TypeError, match="integer"):
        C.embedding(w, cu(make((2,))))


# ---- dropout ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_statistics_and_mask(dtype):
    n = 1 << 20
    x = cu(make((n,), dtype).abs() + 1.0)
    p = 0.3
    out, mask = C.native_dropout(x, p, True)
    assert out.device.type == DEV and mask.dtype == ember.bool
    m = to_np(mask.cpu()).astype(bool)
    frac = 1.0 - m.mean()
    assert abs(frac - p) < 5e-3, frac  # ~10 standard deviations
    xo, oo = to_np(x.cpu()), to_np(out.cpu())
    assert np.all(oo[~m] == 0.0)
    expect = to_np((x * (1.0 / (1.0 - p))).cpu())
    np.testing.assert_allclose(oo[m], expect[m], rtol=TOL[dtype], atol=0)
    assert np.all(oo[m] != 0.0) and xo.size == n
    # A second call draws a fresh mask.
    _, mask2 = C.native_dropout(x, p, True)
    assert not np.array_equal(m, to_np(mask2.cpu()).astype(bool))
    # eval, p = 0, p = 1
    for pp, train in ((p, False), (0.0, True)):
        o, mk = C.native_dropout(x, pp, train)
        check(o, x.cpu(), 0.0, "identity")
        assert to_np(mk.cpu()).all()
    o, mk = C.native_dropout(x, 1.0, True)
    assert not to_np(mk.cpu()).any() and not to_np(o.cpu()).any()
    with pytest.raises(ValueError, match="probability"):
        C.native_dropout(x, 1.5, True)


def test_dropout_reproducible_with_seed():
    x = cu(ember.ones(4096))
    ember.manual_seed(11)
    a = to_np(C.native_dropout(x, 0.5, True)[1].cpu())
    ember.manual_seed(11)
    b = to_np(C.native_dropout(x, 0.5, True)[1].cpu())
    np.testing.assert_array_equal(a, b)


def test_dropout_autograd_uses_the_mask():
    x = cu(make((64, 33))).requires_grad_()
    y = F.dropout(x, p=0.4, training=True)
    y.sum().backward()
    kept = to_np(y.detach().cpu()) != 0
    gx = to_np(x.grad.cpu())
    np.testing.assert_allclose(gx[kept], 1.0 / 0.6, rtol=1e-6)
    assert np.all(gx[~kept] == 0)
    frac = 1 - kept.mean()
    assert 0.3 < frac < 0.5, frac


# ---- autograd through ember.nn.functional -----------------------------------------------------


def grads_match(fn, tensors, tol):
    """fn(*tensors) on the CPU and on DEV: the outputs and the gradients of their sum with
    weights (a fixed random cotangent) agree."""
    cpu_in = [t.detach().clone().requires_grad_(t.dtype.is_floating_point) for t in tensors]
    dev_in = [cu(t.detach()).requires_grad_(t.dtype.is_floating_point) for t in tensors]
    out_c, out_g = fn(*cpu_in), fn(*dev_in)
    check(out_g, out_c.detach(), tol, "output")
    cot = make(tuple(out_c.shape), "float64").to(out_c.dtype)
    (out_c * cot).sum().backward()
    (out_g * cu(cot)).sum().backward()
    for i, (a, b) in enumerate(zip(cpu_in, dev_in)):
        if a.dtype.is_floating_point:
            check(b.grad, a.grad, tol, f"grad of input {i}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_functional_autograd(dtype):
    tol = 1e-4 if dtype == "float32" else 1e-10
    x = make((4, 8, 96), dtype)
    grads_match(lambda a: F.softmax(a, dim=-1), [x], tol)
    grads_match(lambda a: F.log_softmax(a, dim=1), [x], tol)
    w, b = make((96,), dtype), make((96,), dtype)
    grads_match(lambda a, ww, bb: F.layer_norm(a, (96,), ww, bb), [x, w, b], tol)
    grads_match(lambda a, ww: F.rms_norm(a, (96,), ww), [x, w], tol)
    img = make((4, 6, 5, 5), dtype)
    gw, gb = make((6,), dtype), make((6,), dtype)
    grads_match(lambda a, ww, bb: F.group_norm(a, 3, ww, bb), [img, gw, gb], tol)
    grads_match(lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, training=True),
                [img, gw, gb], tol)
    logits = make((10, 7), dtype)
    t = targets((10,), 7, ignore=-100)
    grads_match(lambda a: F.cross_entropy(a, cu(t) if a.device.type == DEV else t,
                                          label_smoothing=0.1), [logits], tol)
    grads_match(lambda a: F.nll_loss(F.log_softmax(a, 1), cu(t) if a.device.type == DEV else t),
                [logits], tol)
    table = make((20, 16), dtype)
    ix = ints(RNG.integers(0, 20, size=(5, 7)))
    grads_match(lambda e: F.embedding(cu(ix) if e.device.type == DEV else ix, e, padding_idx=3),
                [table], tol)
