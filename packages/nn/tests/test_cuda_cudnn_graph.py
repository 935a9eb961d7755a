"""Convolutions through cuDNN's graph (backend) API (ember._C_cuda._set_cudnn_graph: True for every
dtype, False for none, None, the default, for float16 / bfloat16).

CPU-runnable: the switch exists and defaults to by-dtype; the graph path's counters are in
``_cudnn_stats``; and, where cuDNN loads (``EMBER_CUDNN_LIBRARY`` or NVIDIA's wheel) with its
engine libraries, cuDNN accepts ember's tensor, convolution and operation descriptors of every
case's three passes, in every dtype and layout (no GPU needed).

On a GPU (skipped without): with the switch on, the forward, data-gradient and filter-gradient
passes of every case (test_cuda_cudnn_conv.py's table: conv1d/2d/3d, groups, depthwise, stride /
padding / dilation, transposed) in float32 / float64 / float16 / bfloat16, contiguous and
channels-last, match the CPU and the legacy API's results, and the counters show which path ran
(a pass the graph path declines runs on the legacy API: a failure for float32, a warning naming
the reason otherwise); benchmark mode times once per problem and reuses the plan; deterministic
mode repeats bit for bit; the switch off restores the legacy path.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import ember
import ember.backends.cudnn as cudnn
import numpy as np
import pytest
from test_cuda_cudnn_conv import (
    CASES,
    SMALL_SET,
    TOL,
    _ext,
    channels_last,
    close,
    is_channels_last,
    rand,
    to_np,
)

needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")
GRAPH_KEYS = ("graph_runs", "graph_declines", "graph_heuristic_queries",
              "graph_benchmark_queries", "graph_cache_hits", "graph_cached_plans",
              "graph_declined_problems", "graph_last_engine", "graph_last_decline")


@pytest.fixture(autouse=True)
def _restore_switches():
    """Every test starts from PyTorch's cuDNN defaults with TF32 off, the graph path off (each
    test turns it on where it runs it) and ember's native depthwise kernels off (so that
    depthwise cases reach cuDNN too), and leaves them as it found them."""
    ext = _ext()
    saved = {n: getattr(cudnn, n) for n in ("enabled", "benchmark", "deterministic", "allow_tf32")}
    prev_mm = ember.backends.cuda.matmul.allow_tf32
    graph_was = ext._cudnn_graph_enabled() if ext is not None else False
    native_was = ext._depthwise_native() if ext is not None else True
    cudnn.allow_tf32 = False
    ember.backends.cuda.matmul.allow_tf32 = False
    if ext is not None:
        ext._set_cudnn_graph(False)
        ext._set_depthwise_native(False)
    yield
    for n, v in saved.items():
        setattr(cudnn, n, v)
    ember.backends.cuda.matmul.allow_tf32 = prev_mm
    if ext is not None:
        ext._set_cudnn_graph(graph_was)
        ext._set_depthwise_native(native_was)


def _needs_ext():
    ext = _ext()
    if ext is None:
        pytest.skip("ember was built without its CUDA extension")
    return ext


def _stats():
    return dict(_ext()._cudnn_stats())


# ---- the switch (CPU) ---------------------------------------------------------------------------

def test_switch_exists_and_defaults_to_by_dtype():
    _needs_ext()
    code = ("import ember._C_cuda as c; print(c._cudnn_graph_enabled()); "
            "c._set_cudnn_graph(False); print(c._cudnn_graph_enabled()); "
            "c._set_cudnn_graph(True); print(c._cudnn_graph_enabled()); "
            "c._set_cudnn_graph(None); print(c._cudnn_graph_enabled())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out == ["None", "False", "True", "None"]


@needs_cuda
def test_default_takes_the_graph_path_for_16_bit_floats_only():
    if not cudnn.is_available():
        pytest.skip("cuDNN not available")
    ext = _needs_ext()
    ext._set_cudnn_graph(None)
    for dtype, graph in (("float32", False), ("float64", False), ("float16", True),
                         ("bfloat16", True)):
        x = rand((2, 4, 9, 9), dtype).cuda()
        w = rand((6, 4, 3, 3), dtype, scale=0.3).cuda()
        s0 = _stats()
        ember.nn.functional.conv2d(x, w, padding=1)
        s1 = _stats()
        assert s1["runs"] - s0["runs"] == 1, dtype
        ran = s1["graph_runs"] - s0["graph_runs"] + s1["graph_declines"] - s0["graph_declines"]
        assert ran == (1 if graph else 0), (dtype, s1["graph_last_decline"])


def test_graph_counters_are_in_the_stats():
    _needs_ext()
    s = _stats()
    for k in GRAPH_KEYS:
        assert k in s, k
    assert isinstance(s["graph_last_decline"], str)
    assert s["graph_runs"] >= 0 and s["graph_declines"] >= 0 and s["graph_cached_plans"] >= 0


def test_switch_without_a_gpu_leaves_convolutions_on_the_cpu_alone():
    ext = _needs_ext()
    ext._set_cudnn_graph(True)
    assert ext._cudnn_graph_enabled() is True
    x, w = rand((2, 3, 6, 6)), rand((4, 3, 3, 3))
    before = _stats()["graph_runs"]
    out = ember.nn.functional.conv2d(x, w, padding=1)
    assert tuple(out.shape) == (2, 4, 6, 6)
    assert _stats()["graph_runs"] == before  # a CPU convolution never reaches cuDNN


# ---- the descriptors, checked by cuDNN (CPU) ----------------------------------------------------

def _geometry(case):
    """(x sizes, w sizes, y sizes, padding, stride, dilation, groups) of the convolution cuDNN
    sees for a case (a transposed one: its output -> its input), from the CPU's output sizes."""
    name, fn, xs, ws, kw = case
    k = len(xs) - 2
    out = fn(ember.zeros(*xs), ember.zeros(*ws), **kw)

    def expand(v, default):
        v = kw.get(v, default)
        return list(v) if isinstance(v, tuple) else [v] * k

    src, dst = (tuple(out.shape), xs) if name.startswith("conv_transpose") else (
        xs, tuple(out.shape))
    return (list(src), list(ws), list(dst), expand("padding", 0), expand("stride", 1),
            expand("dilation", 1), kw.get("groups", 1))


def _graph_library():
    ext = _ext()
    if ext is None or not cudnn.is_available():
        pytest.skip("cuDNN not found (set EMBER_CUDNN_LIBRARY to a libcudnn.so.9 to run this)")
    probe = ext._cudnn_graph_check_descriptors([1, 1, 3, 3], [1, 1, 1, 1], [1, 1, 3, 3], [0, 0],
                                               [1, 1], [1, 1], 1, "float32", False, "forward")
    if "SUBLIBRARY_LOADING_FAILED" in probe or "lacks the graph API" in probe:
        pytest.skip(f"cuDNN's graph engines do not load here (no CUDA driver?): {probe}")
    return ext


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_graph_descriptors_are_accepted_for_every_case(dtype):
    """ember's tensor (dims, strides, unique id, alignment), convolution (compute type, mode,
    spatial dims, dilations, strides, paddings) and operation (alpha, beta, x / w / y)
    descriptors of every pass of every case, finalized by cuDNN; groups through the weight's
    C / groups channels."""
    ext = _graph_library()
    for case in CASES:
        xs, ws, ys, pad, st, dl, g = _geometry(case)
        for nhwc in ([False, True] if len(xs) > 3 else [False]):
            for pass_ in ("forward", "backward_data", "backward_filter"):
                got = ext._cudnn_graph_check_descriptors(xs, ws, ys, pad, st, dl, g, dtype, nhwc,
                                                         pass_)
                assert got == "", (case[0], dtype, nhwc, pass_, got)


def test_graph_descriptors_refuse_an_inconsistent_convolution():
    ext = _graph_library()
    # y's height should be 10 for this padding: cuDNN refuses the operation, naming the step.
    got = ext._cudnn_graph_check_descriptors([2, 8, 10, 10], [12, 4, 3, 3], [2, 12, 9, 10],
                                             [1, 1], [1, 1], [1, 1], 2, "float32", False,
                                             "forward")
    assert "convolution operation" in got and "BAD_PARAM" in got, got
    with pytest.raises(RuntimeError, match="pass must be"):
        ext._cudnn_graph_check_descriptors([2, 8, 10, 10], [12, 4, 3, 3], [2, 12, 10, 10],
                                           [1, 1], [1, 1], [1, 1], 2, "float32", False, "sideways")


# ---- convolutions on the GPU --------------------------------------------------------------------

def _passes(case, dtype, x, w, b, dev, layout_cl):
    """The case's output and gradients (input, weight, bias) on dev in dtype (the CPU computes
    16-bit dtypes in float32, ember's reference)."""
    name, fn, xs, ws, kw = case
    cast = dtype if dev == "cuda" or dtype not in ("float16", "bfloat16") else "float32"
    xx = x.to(dev).to(getattr(ember, cast)).detach().requires_grad_()
    ww = w.to(dev).to(getattr(ember, cast)).detach().requires_grad_()
    bb = b.to(dev).to(getattr(ember, cast)).detach().requires_grad_()
    xin, win = (channels_last(xx), channels_last(ww)) if layout_cl else (xx, ww)
    out = fn(xin, win, bb, **kw)
    go = ember.tensor(np.cos(np.arange(out.numel()).reshape(tuple(out.shape)) * 0.37),
                      dtype=out.dtype).to(dev)
    (out * go).sum().backward()
    return [out, xx.grad, ww.grad, bb.grad]


def _inputs(case, dtype):
    name, fn, xs, ws, kw = case
    groups = kw.get("groups", 1)
    co = ws[1] * groups if name.startswith("conv_transpose") else ws[0]
    return rand(xs, dtype), rand(ws, dtype, scale=0.3), rand((co,), dtype)


def _check_graph_passes(before, after, what, strict):
    """Over one forward and backward with the switch on (the counters before and after it): the
    three passes ran on cuDNN (runs + fallbacks == 3, as without the switch), and through the
    graph API unless it declined (then the legacy API ran them): a failure when strict, else a
    warning naming the reason."""
    runs, declined = after["runs"] - before["runs"], after["fallbacks"] - before["fallbacks"]
    graph_runs = after["graph_runs"] - before["graph_runs"]
    graph_declines = after["graph_declines"] - before["graph_declines"]
    assert runs + declined == 3, (what, after)
    assert graph_runs + graph_declines == 3, (what, after)
    assert graph_runs <= runs, (what, after)
    if strict:
        assert graph_runs == 3, (what, after["graph_last_decline"])
        assert after["graph_last_engine"] >= 0, (what, after)
    elif graph_declines:
        warnings.warn(f"{what}: the graph API declined {graph_declines} pass(es): "
                      f"{after['graph_last_decline']}", stacklevel=2)


def _params(dtypes):
    out = []
    for case in CASES:
        for dt in dtypes:
            if dt != "float32" and case[0] not in SMALL_SET:
                continue
            out.append(pytest.param(case, dt, id=f"{case[0]}-{dt}"))
    return out


def _graph_against_cpu_and_legacy(case, dtype, layout_cl):
    """The case on the CPU, on CUDA through the graph API and on CUDA with the switch off (the
    legacy API), from the same inputs: all agree within the dtype's tolerance. The counters
    before and after the graph run, and its results."""
    ext = _needs_ext()
    x, w, b = _inputs(case, dtype)
    ref_dtype = "float32" if dtype in ("float16", "bfloat16") else dtype
    ref = _passes(case, ref_dtype, x, w, b, "cpu", False)
    ext._set_cudnn_graph(True)
    before = _stats()
    got = _passes(case, dtype, x, w, b, "cuda", layout_cl)
    mid = _stats()
    ext._set_cudnn_graph(False)
    legacy = _passes(case, dtype, x, w, b, "cuda", layout_cl)
    after = _stats()
    assert after["graph_runs"] == mid["graph_runs"], "the switch off still ran the graph API"
    assert after["graph_declines"] == mid["graph_declines"]
    tol = TOL[dtype]
    names = ("output", "input grad", "weight grad", "bias grad")
    for i, (g, r, lg) in enumerate(zip(got, ref, legacy)):
        assert g.device.type == "cuda" and g.dtype == getattr(ember, dtype), (case[0], i)
        close(g, r, tol, f"{case[0]} {dtype} graph {names[i]} vs CPU")
        close(g, lg, tol, f"{case[0]} {dtype} graph {names[i]} vs legacy API")
    return before, mid, got


@needs_cuda
@pytest.mark.parametrize("case,dtype", _params(["float32", "float64", "float16", "bfloat16"]))
def test_graph_matches_cpu_and_legacy(case, dtype):
    if not cudnn.is_available():
        pytest.skip("cuDNN not available")
    before, after, _ = _graph_against_cpu_and_legacy(case, dtype, layout_cl=False)
    _check_graph_passes(before, after, f"{case[0]} {dtype}", strict=dtype == "float32")


@needs_cuda
@pytest.mark.parametrize("case", [c for c in CASES if len(c[2]) >= 4 and c[0] in (
    "conv2d", "conv2d_depthwise", "conv2d_stride_dilation", "conv2d_groups", "conv3d",
    "conv_transpose2d")], ids=lambda c: c[0])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_graph_channels_last_matches_cpu_and_legacy(case, dtype):
    if not cudnn.is_available():
        pytest.skip("cuDNN not available")
    before, after, got = _graph_against_cpu_and_legacy(case, dtype, layout_cl=True)
    strict = dtype == "float32" and case[0] in ("conv2d", "conv2d_stride_dilation")
    _check_graph_passes(before, after, f"{case[0]} channels_last {dtype}", strict)
    if strict:  # the output keeps the input's layout
        assert is_channels_last(got[0]), got[0].stride()


@needs_cuda
def test_graph_switch_off_restores_the_legacy_path():
    if not cudnn.is_available():
        pytest.skip("cuDNN not available")
    ext = _needs_ext()
    x, w = rand((2, 4, 9, 9)).cuda(), rand((6, 4, 3, 3), scale=0.3).cuda()
    ext._set_cudnn_graph(True)
    s0 = _stats()
    on = ember.nn.functional.conv2d(x, w, padding=1)
    s1 = _stats()
    assert s1["graph_runs"] - s0["graph_runs"] == 1, s1["graph_last_decline"]
    assert s1["runs"] - s0["runs"] == 1  # runs counts both paths
    ext._set_cudnn_graph(False)
    off = ember.nn.functional.conv2d(x, w, padding=1)
    s2 = _stats()
    assert s2["graph_runs"] == s1["graph_runs"] and s2["graph_declines"] == s1["graph_declines"]
    assert s2["runs"] - s1["runs"] == 1
    close(on, off, TOL["float32"], "graph vs legacy")
    close(on, ember.nn.functional.conv2d(x.cpu(), w.cpu(), padding=1), TOL["float32"], "vs CPU")


@needs_cuda
def test_graph_heuristics_and_benchmark_choose_once_per_problem():
    if not cudnn.is_available():
        pytest.skip("cuDNN not available")
    ext = _needs_ext()
    ext._cudnn_clear_cache()
    assert _stats()["graph_cached_plans"] == 0
    ext._set_cudnn_graph(True)
    x, w = rand((4, 8, 16, 16)).cuda(), rand((16, 8, 3, 3), scale=0.3).cuda()
    ref = ember.nn.functional.conv2d(x.cpu(), w.cpu(), padding=1)
    # heuristics (benchmark off): one query, then the cached plan
    s0 = _stats()
    first = ember.nn.functional.conv2d(x, w, padding=1)
    s1 = _stats()
    assert s1["graph_runs"] - s0["graph_runs"] == 1, s1["graph_last_decline"]
    assert s1["graph_heuristic_queries"] - s0["graph_heuristic_queries"] == 1
    assert s1["graph_cached_plans"] == s0["graph_cached_plans"] + 1
    second = ember.nn.functional.conv2d(x, w, padding=1)
    s2 = _stats()
    assert s2["graph_heuristic_queries"] == s1["graph_heuristic_queries"]
    assert s2["graph_cache_hits"] - s1["graph_cache_hits"] == 1
    np.testing.assert_array_equal(to_np(first), to_np(second))
    close(first, ref, TOL["float32"], "heuristic plan")
    # benchmark: every candidate timed once for the problem, the fastest cached and reused
    cudnn.benchmark = True
    b1 = ember.nn.functional.conv2d(x, w, padding=1)
    s3 = _stats()
    assert s3["graph_runs"] - s2["graph_runs"] == 1, s3["graph_last_decline"]
    assert s3["graph_benchmark_queries"] - s2["graph_benchmark_queries"] == 1
    assert s3["graph_cached_plans"] == s2["graph_cached_plans"] + 1
    b2 = ember.nn.functional.conv2d(x, w, padding=1)
    s4 = _stats()
    assert s4["graph_benchmark_queries"] == s3["graph_benchmark_queries"]
    assert s4["graph_cache_hits"] - s3["graph_cache_hits"] == 1
    np.testing.assert_array_equal(to_np(b1), to_np(b2))
    close(b1, ref, TOL["float32"], "benchmarked plan")
    # another shape is another problem
    ember.nn.functional.conv2d(x[:2], w, padding=1)
    assert _stats()["graph_benchmark_queries"] - s4["graph_benchmark_queries"] == 1
    # benchmarked training step: the three passes through the graph API, against the CPU
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
    s5 = _stats()
    ember.nn.functional.conv2d(xg, wg, padding=1).square().sum().backward()
    xc, wc = x.cpu().requires_grad_(), w.cpu().requires_grad_()
    ember.nn.functional.conv2d(xc, wc, padding=1).square().sum().backward()
    s6 = _stats()
    assert s6["graph_runs"] - s5["graph_runs"] == 3, s6["graph_last_decline"]
    close(xg.grad, xc.grad, TOL["float32"], "benchmarked data gradient")
    close(wg.grad, wc.grad, 1e-3, "benchmarked filter gradient")
    ext._cudnn_clear_cache()
    assert _stats()["graph_cached_plans"] == 0


@needs_cuda
@pytest.mark.parametrize("benchmark", [False, True])
def test_graph_deterministic_repeats_bit_for_bit(benchmark):
    if not cudnn.is_available():
        pytest.skip("cuDNN not available")
    ext = _needs_ext()
    ext._set_cudnn_graph(True)
    cudnn.deterministic = True
    cudnn.benchmark = benchmark
    x0, w0 = rand((8, 16, 12, 12)), rand((16, 16, 3, 3), scale=0.3)
    runs = []
    s0 = _stats()
    for _ in range(2):
        x = x0.cuda().requires_grad_()
        w = w0.cuda().requires_grad_()
        ember.nn.functional.conv2d(x, w, padding=1).square().sum().backward()
        runs.append((to_np(x.grad), to_np(w.grad)))
    s1 = _stats()
    assert s1["graph_runs"] - s0["graph_runs"] == 6, s1["graph_last_decline"]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    xc, wc = x0.requires_grad_(), w0.requires_grad_()
    ember.nn.functional.conv2d(xc, wc, padding=1).square().sum().backward()
    close(ember.tensor(runs[0][0]), xc.grad, TOL["float32"], "deterministic data gradient")
    close(ember.tensor(runs[0][1]), wc.grad, 1e-3, "deterministic filter gradient")


@needs_cuda
def test_graph_tf32_is_loose():
    if not cudnn.is_available():
        pytest.skip("cuDNN not available")
    ext = _needs_ext()
    cudnn.allow_tf32 = True
    case = next(c for c in CASES if c[0] == "conv2d")
    x, w, b = _inputs(case, "float32")
    ref = _passes(case, "float32", x, w, b, "cpu", False)
    ext._set_cudnn_graph(True)
    before = _stats()
    got = _passes(case, "float32", x, w, b, "cuda", False)
    _check_graph_passes(before, _stats(), "conv2d TF32", strict=True)
    for i, (g, r) in enumerate(zip(got, ref)):
        close(g, r, 1e-2, f"TF32 result {i}")


@needs_cuda
def test_graph_misaligned_and_noncontiguous_inputs():
    if not cudnn.is_available():
        pytest.skip("cuDNN not available")
    ext = _needs_ext()
    ext._set_cudnn_graph(True)
    base = rand((2, 7, 10, 10))
    x = base[:, 1:6]  # a view at an offset: not contiguous
    w = rand((4, 5, 3, 3), scale=0.3)
    close(ember.nn.functional.conv2d(x.cuda(), w.cuda(), padding=1),
          ember.nn.functional.conv2d(x, w, padding=1), TOL["float32"], "sliced input")
    flat = rand((1 + 2 * 5 * 8 * 8,), "float16")
    xh = flat.cuda()[1:].view(2, 5, 8, 8)  # 2 bytes past an allocation: not 16-byte aligned
    wh = rand((3, 5, 3, 3), "float16", scale=0.3)
    got = ember.nn.functional.conv2d(xh, wh.cuda())
    ref = ember.nn.functional.conv2d(flat[1:].view(2, 5, 8, 8).float(), wh.float())
    close(got, ref, TOL["float16"], "misaligned float16 input")


@needs_cuda
def test_graph_module_training_step_matches_cpu():
    if not cudnn.is_available():
        pytest.skip("cuDNN not available")
    ext = _needs_ext()
    ember.manual_seed(0)
    net = ember.nn.Sequential(ember.nn.Conv2d(3, 8, 3, padding=1), ember.nn.ReLU(),
                              ember.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2),
                              ember.nn.ConvTranspose2d(8, 4, 2, stride=2))
    x = rand((2, 3, 16, 16))
    ref = net(x).square().mean()
    ref.backward()
    ref_grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net.cuda()
    ext._set_cudnn_graph(True)
    s0 = _stats()
    out = net(x.cuda()).square().mean()
    out.backward()
    s1 = _stats()
    assert s1["graph_runs"] > s0["graph_runs"], s1["graph_last_decline"]
    close(out, ref, 1e-4, "loss")
    for i, (p, r) in enumerate(zip(net.parameters(), ref_grads)):
        close(p.grad, r, 1e-4, f"parameter {i} gradient")
