"""Convolutions through cuDNN (ember.backends.cudnn) and their GEMM fallback.

CPU-runnable: the switches (PyTorch's defaults, scoping, reaching the CUDA extension) and the
loader (a library that is absent makes ``is_available()`` False with a message naming what was
tried; one found, e.g. through ``EMBER_CUDNN_LIBRARY``, is loaded and answers its version and
error strings even without a GPU).

On a GPU (skipped without): conv1d/2d/3d, groups, depthwise, stride / padding / dilation,
transposed, channels-last inputs, forward and gradients against the CPU, through cuDNN's legacy
API when cuDNN is available (the graph API, tried first by default, is test_cuda_cudnn_graph.py's) and through the GEMM kernels with cuDNN disabled; benchmark mode's algorithm cache.
Contiguous depthwise convolutions run on ember's native kernels (nn_conv_depthwise.cu), not on
cuDNN, as in PyTorch: their cuDNN passes are checked with the native switch
(_C_cuda._set_depthwise_native) off.
Tolerances (relative, and absolute relative to the largest reference magnitude): float32 with TF32
off 1e-4 (cuDNN's FFT / Winograd algorithms round differently from a direct sum), float64 1e-10,
float16 2e-2, bfloat16 5e-2, float32 with TF32 on 1e-2.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import ember
import ember.backends.cudnn as cudnn
import ember.nn.functional as F
import numpy as np
import pytest

needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")
TOL = {"float32": 1e-4, "float64": 1e-10, "float16": 2e-2, "bfloat16": 5e-2}
RNG = np.random.default_rng(20261126)


def _ext():
    try:
        from ember import _C_cuda
    except ImportError:
        return None
    return _C_cuda


@pytest.fixture(autouse=True)
def _restore_flags():
    """Every test starts from PyTorch's defaults with TF32 off and on cuDNN's legacy API (the
    graph path, ember's default, is test_cuda_cudnn_graph.py's), and leaves them as it found
    them."""
    saved = {n: getattr(cudnn, n) for n in ("enabled", "benchmark", "deterministic", "allow_tf32",
                                            "benchmark_limit")}
    prev_mm = ember.backends.cuda.matmul.allow_tf32
    ext = _ext()
    graph_was = ext._cudnn_graph_enabled() if ext is not None else False
    if ext is not None:
        ext._set_cudnn_graph(False)
    cudnn.allow_tf32 = False
    ember.backends.cuda.matmul.allow_tf32 = False
    yield
    for n, v in saved.items():
        setattr(cudnn, n, v)
    ember.backends.cuda.matmul.allow_tf32 = prev_mm
    if ext is not None:
        ext._set_cudnn_graph(graph_was)


# ---- the switches (CPU) -------------------------------------------------------------------------

def test_flags_have_torchs_defaults():
    pytest.importorskip("torch")
    code = ("import ember.backends.cudnn as c; "
            "print(c.enabled, c.benchmark, c.deterministic, c.allow_tf32, c.benchmark_limit)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         check=True).stdout.split()
    # torch's defaults from a fresh process too: tests before this one may have set its flags
    ref = ("import torch.backends.cudnn as c; "
           "print(c.enabled, c.benchmark, c.deterministic, c.allow_tf32)")
    want = subprocess.run([sys.executable, "-c", ref], capture_output=True, text=True,
                          timeout=300, check=True).stdout.split()
    assert out[:4] == want
    assert out[4] == "10"  # a CUDA build of PyTorch's default (a CPU build has None)


def test_flags_are_settable_scoped_and_reach_the_extension():
    cudnn.benchmark = True
    cudnn.deterministic = 1  # stored as a bool, as the extension reads it
    assert cudnn.benchmark is True and cudnn.deterministic is True
    ext = _ext()
    if ext is not None:
        assert ext._cudnn_get_flags() == (True, True, True, False)
    with cudnn.flags(enabled=False, benchmark=False, allow_tf32=True):
        assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == (
            False, False, False, True)
        if ext is not None:
            assert ext._cudnn_get_flags() == (False, False, False, True)
    assert cudnn.enabled and cudnn.benchmark and cudnn.deterministic and not cudnn.allow_tf32
    if ext is not None:
        assert ext._cudnn_get_flags() == (True, True, True, False)
    with pytest.raises(ValueError, match="benchmark_limit"):
        cudnn.benchmark_limit = -1
    with pytest.raises(AttributeError, match="no_such_flag"):
        cudnn.no_such_flag  # noqa: B018


def test_flags_set_before_the_extension_loads_reach_it():
    """The extension reads the switches when it is imported (here in a fresh process)."""
    if _ext() is None:
        pytest.skip("ember was built without its CUDA extension")
    code = ("import ember.backends.cudnn as c; c.benchmark = True; c.allow_tf32 = False; "
            "from ember import _C_cuda; print(_C_cuda._cudnn_get_flags())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         check=True).stdout.strip()
    assert out == "(True, True, False, False)"


def test_is_acceptable():
    assert cudnn.is_acceptable(ember.zeros(2, 3)) is False
    assert cudnn.is_acceptable("not a tensor") is False


def test_library_dirs_come_from_the_nvidia_namespace(tmp_path, monkeypatch):
    lib = tmp_path / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert str(lib) in cudnn._library_dirs()


# ---- the loader (CPU) ---------------------------------------------------------------------------

def _probe(env_value):
    code = ("import ember.backends.cudnn as c; "
            "print(c.is_available()); print(c.version()); print(repr(c._load_error()))")
    env = dict(os.environ, EMBER_CUDNN_LIBRARY=env_value)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         check=True, env=env).stdout.splitlines()
    return out[0] == "True", out[1], eval(out[2])  # noqa: S307 (our own repr of a str)


def test_installed_wheel_is_found():
    """Where NVIDIA's cuDNN wheel is installed (the GPU machines), ember finds and loads it."""
    wheel = [d for d in cudnn._library_dirs() if os.path.exists(os.path.join(d, "libcudnn.so.9"))]
    if not wheel or _ext() is None or os.environ.get("EMBER_CUDNN_LIBRARY"):
        pytest.skip("no cuDNN wheel here (or EMBER_CUDNN_LIBRARY chooses the library)")
    assert cudnn.is_available(), cudnn._load_error()
    assert os.path.dirname(_ext()._cudnn_library_path()) in wheel


def test_absent_library_is_unavailable_with_a_clear_message(tmp_path):
    missing = str(tmp_path / "nowhere" / "libcudnn.so.9")
    available, version, why = _probe(missing)
    assert available is False and version == "None"
    if _ext() is None:
        assert "CUDA extension" in why
    else:
        assert "libcudnn.so.9" in why and missing in why and "EMBER_CUDNN_LIBRARY" in why


def test_a_file_that_is_not_cudnn_is_refused(tmp_path):
    if _ext() is None:
        pytest.skip("ember was built without its CUDA extension")
    bogus = tmp_path / "libcudnn.so.9"
    bogus.write_bytes(b"not a shared library")
    available, _, why = _probe(str(tmp_path))  # a folder: its libcudnn.so.9
    assert available is False and str(bogus) in why


def test_loaded_library_answers_version_and_error_strings():
    """Runs where cuDNN can be found: through EMBER_CUDNN_LIBRARY (e.g. a downloaded wheel's
    nvidia/cudnn/lib/libcudnn.so.9, no GPU needed) or NVIDIA's installed wheel."""
    ext = _ext()
    if ext is None or not cudnn.is_available():
        pytest.skip("cuDNN not found (set EMBER_CUDNN_LIBRARY to a libcudnn.so.9 to run this)")
    v = cudnn.version()
    assert isinstance(v, int) and 90000 <= v < 100000
    assert cudnn._load_error() == ""
    assert ext._cudnn_library_path().endswith("libcudnn.so.9")
    assert ext._cudnn_error_string(0).startswith("CUDNN_STATUS_SUCCESS")
    assert "NOT_SUPPORTED" in ext._cudnn_error_string(3000)
    assert "BAD_PARAM" in ext._cudnn_error_string(2000)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_descriptors_give_the_cpu_output_sizes(dtype):
    """ember's tensor, filter and convolution descriptors, read back by cuDNN
    (cudnnGetConvolutionNdForwardOutputDim, no GPU needed): the output sizes of every case equal
    the CPU convolution's (a transposed case: its input's sizes from its output's), padded to 4
    dims for 1-d problems, in both layouts."""
    ext = _ext()
    if ext is None or not cudnn.is_available():
        pytest.skip("cuDNN not found (set EMBER_CUDNN_LIBRARY to a libcudnn.so.9 to run this)")
    for name, fn, xs, ws, kw in CASES:
        k = len(xs) - 2
        out = fn(ember.zeros(*xs), ember.zeros(*ws), **kw)

        def expand(v, default):
            v = kw.get(v, default)
            return list(v) if isinstance(v, tuple) else [v] * k

        pad, st, dl = expand("padding", 0), expand("stride", 1), expand("dilation", 1)
        g = kw.get("groups", 1)
        # the convolution cuDNN sees: x -> y (transposed: the output -> the input)
        src, dst = (tuple(out.shape), xs) if name.startswith("conv_transpose") else (
            xs, tuple(out.shape))
        want = list(dst) if k > 1 else [dst[0], dst[1], 1, dst[2]]
        for nhwc in ([False, True] if k > 1 else [False]):
            got = ext._cudnn_forward_output_dims(list(src), list(ws), pad, st, dl, g, dtype, nhwc)
            assert got == want, (name, nhwc, got, want)


# ---- convolutions on the GPU --------------------------------------------------------------------

def rand(shape, dtype="float32", scale=1.0):
    return ember.tensor(RNG.standard_normal(size=shape) * scale, dtype=getattr(ember, dtype))


def channels_last(t):
    """t's values laid out NHWC / NDHWC (strides), sizes unchanged."""
    n = t.ndim
    perm = (0, *range(2, n), 1)
    inv = (0, n - 1, *range(1, n - 1))
    return t.permute(*perm).contiguous().permute(*inv)


def is_channels_last(t):
    sizes, strides = tuple(t.shape), t.stride()
    expect, s = [0] * len(sizes), 1
    for d in (1, *range(len(sizes) - 1, 1, -1), 0):
        expect[d] = s
        s *= sizes[d]
    return all(sizes[d] == 1 or strides[d] == expect[d] for d in range(len(sizes)))


def to_np(t):
    return t.detach().cpu().float().numpy() if t.dtype in (ember.float16, ember.bfloat16) \
        else t.detach().cpu().numpy()


def close(got, ref, tol, what):
    g, r = to_np(got), to_np(ref)
    assert g.shape == r.shape, (what, g.shape, r.shape)
    scale = max(1.0, float(np.abs(r).max())) if r.size else 1.0
    np.testing.assert_allclose(g, r, rtol=tol, atol=tol * scale, err_msg=what)


def conv_transpose3d(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """ember.convolution as a 3-d transposed convolution (F has no conv_transpose3d)."""
    def three(v):
        return list(v) if isinstance(v, (tuple, list)) else [v] * 3

    return ember.convolution(x, w, b, three(stride), three(padding), three(dilation), True,
                             three(output_padding), groups)


# (name, functional, input shape, weight shape, keyword arguments)
CASES = [
    ("conv1d", F.conv1d, (3, 6, 20), (8, 6, 3), dict(stride=2, padding=1)),
    ("conv1d_dilated_groups", F.conv1d, (2, 8, 17), (12, 2, 3), dict(dilation=2, groups=4)),
    ("conv2d", F.conv2d, (2, 5, 11, 9), (7, 5, 3, 3), dict(padding=1)),
    ("conv2d_stride_dilation", F.conv2d, (2, 4, 15, 13), (6, 4, 3, 2),
     dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1))),
    ("conv2d_groups", F.conv2d, (2, 8, 10, 10), (12, 4, 3, 3), dict(padding=1, groups=2)),
    ("conv2d_depthwise", F.conv2d, (2, 16, 12, 12), (16, 1, 3, 3),
     dict(stride=2, padding=1, groups=16)),
    ("conv2d_1x1", F.conv2d, (4, 16, 7, 7), (24, 16, 1, 1), {}),
    ("conv3d", F.conv3d, (2, 3, 6, 7, 8), (4, 3, 3, 3, 3), dict(stride=(1, 2, 2), padding=1)),
    ("conv_transpose1d", F.conv_transpose1d, (2, 6, 9), (6, 4, 4), dict(stride=2, padding=1)),
    ("conv_transpose2d", F.conv_transpose2d, (2, 8, 6, 5), (8, 3, 3, 3),
     dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose2d_groups_dilation", F.conv_transpose2d, (2, 8, 5, 5), (8, 2, 3, 3),
     dict(stride=1, padding=2, dilation=2, groups=4)),
    ("conv_transpose3d", conv_transpose3d, (2, 4, 3, 4, 4), (4, 2, 2, 3, 3),
     dict(stride=2, padding=(0, 1, 1))),
]
CASE_IDS = [c[0] for c in CASES]
SMALL_SET = {"conv1d", "conv2d_groups", "conv2d_depthwise", "conv3d", "conv_transpose2d"}


def _run_case(case, dtype, layout_cl=False, bias=True):
    """The case on the CPU (float32 for 16-bit dtypes: ember's CPU reference) and on CUDA; returns
    (cpu results, cuda results, cuda output) as lists of output and gradients."""
    name, fn, xs, ws, kw = case
    tr = name.startswith("conv_transpose")
    groups = kw.get("groups", 1)
    co = ws[1] * groups if tr else ws[0]
    x, w = rand(xs, dtype), rand(ws, dtype, scale=0.3)
    b = rand((co,), dtype) if bias else None
    ref_dtype = "float32" if dtype in ("float16", "bfloat16") else dtype

    def run(dev, cast):
        xx = x.to(dev).to(getattr(ember, cast)).detach().requires_grad_()
        ww = w.to(dev).to(getattr(ember, cast)).detach().requires_grad_()
        bb = b.to(dev).to(getattr(ember, cast)).detach().requires_grad_() if bias else None
        xin, win = (channels_last(xx), channels_last(ww)) if layout_cl else (xx, ww)
        out = fn(xin, win, bb, **kw)
        go = ember.tensor(np.cos(np.arange(out.numel()).reshape(tuple(out.shape)) * 0.37),
                          dtype=out.dtype).to(dev)
        (out * go).sum().backward()
        grads = [xx.grad, ww.grad] + ([bb.grad] if bias else [])
        return out, grads

    ref_out, ref_grads = run("cpu", ref_dtype)
    out, grads = run("cuda", dtype)
    return [ref_out, *ref_grads], [out, *grads], out


def _stats():
    s = dict(_ext()._cudnn_stats())
    s["native_passes"] = _ext()._depthwise_native_passes()
    return s


def _params(dtypes):
    out = []
    for case in CASES:
        for dt in dtypes:
            if dt != "float32" and case[0] not in SMALL_SET:
                continue
            out.append(pytest.param(case, dt, id=f"{case[0]}-{dt}"))
    return out


def _native_depthwise(case, layout_cl):
    """Whether the case runs on the native depthwise kernels: a contiguous, non-transposed
    convolution with groups == in_channels > 1 in 1 or 2 spatial dims, switch on."""
    name, _, xs, _, kw = case
    return (not name.startswith("conv_transpose") and len(xs) <= 4 and not layout_cl
            and kw.get("groups", 1) == xs[1] > 1 and _ext()._depthwise_native())


def _check_cudnn_passes(before, what, strict, native=False):
    """After one forward and backward: the three passes (forward, data and filter gradients)
    ran on cuDNN when it is available. A pass cuDNN declined ran on the GEMM kernels (correct, but
    slower): a failure when strict (float32, contiguous: cuDNN covers every case here), else a
    warning naming cuDNN's reason. native: a depthwise case on the native kernels, which ran all
    three passes and cuDNN none."""
    after = _stats()
    if native:
        assert after["runs"] == before["runs"] and after["fallbacks"] == before["fallbacks"], what
        assert after["native_passes"] - before["native_passes"] == 3, (what, after)
        return
    if not cudnn.is_available():
        return
    runs, declined = after["runs"] - before["runs"], after["fallbacks"] - before["fallbacks"]
    assert runs + declined == 3, (what, after)
    if strict:
        assert runs == 3, (what, after["last_fallback"])
    elif declined:
        warnings.warn(f"{what}: cuDNN declined {declined} pass(es): {after['last_fallback']}",
                      stacklevel=2)


@needs_cuda
@pytest.mark.parametrize("case,dtype", _params(["float32", "float64", "float16", "bfloat16"]))
def test_conv_matches_cpu(case, dtype):
    before = _stats()
    ref, got, _ = _run_case(case, dtype)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.device.type == "cuda" and g.dtype == getattr(ember, dtype), (case[0], i)
        close(g, r, TOL[dtype], f"{case[0]} {dtype} result {i}")
    _check_cudnn_passes(before, f"{case[0]} {dtype}", strict=dtype == "float32",
                        native=_native_depthwise(case, False))


@needs_cuda
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_depthwise_through_cudnn_with_the_native_kernels_off(dtype):
    """The depthwise case through cuDNN (as before the native kernels), switch off."""
    case = next(c for c in CASES if c[0] == "conv2d_depthwise")
    ext = _ext()
    prev = ext._depthwise_native()
    ext._set_depthwise_native(False)
    try:
        before = _stats()
        ref, got, _ = _run_case(case, dtype)
        for i, (g, r) in enumerate(zip(got, ref)):
            close(g, r, TOL[dtype], f"depthwise via cuDNN {dtype} result {i}")
        _check_cudnn_passes(before, f"depthwise via cuDNN {dtype}", strict=dtype == "float32")
        assert _stats()["native_passes"] == before["native_passes"]
    finally:
        ext._set_depthwise_native(prev)


@needs_cuda
@pytest.mark.parametrize("case", [c for c in CASES if len(c[2]) >= 4 and c[0] in (
    "conv2d", "conv2d_depthwise", "conv2d_stride_dilation", "conv3d", "conv_transpose2d")],
    ids=lambda c: c[0])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_channels_last_matches_cpu(case, dtype):
    before = _stats()
    ref, got, out = _run_case(case, dtype, layout_cl=True)
    for i, (g, r) in enumerate(zip(got, ref)):
        close(g, r, TOL[dtype], f"{case[0]} channels_last result {i}")
    strict = dtype == "float32" and case[0] in ("conv2d", "conv2d_stride_dilation")
    # A channels-last depthwise input goes to cuDNN; without cuDNN, to the native kernels.
    _check_cudnn_passes(before, f"{case[0]} channels_last {dtype}", strict,
                        native=_native_depthwise(case, cudnn.is_available()))
    if strict and cudnn.is_available():  # cuDNN keeps the input's layout, as PyTorch does
        assert is_channels_last(out), out.stride()


@needs_cuda
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in SMALL_SET], ids=lambda c: c[0])
def test_fallback_with_cudnn_disabled(case):
    cudnn.enabled = False
    before = _stats()
    ref, got, _ = _run_case(case, "float32")
    for i, (g, r) in enumerate(zip(got, ref)):
        close(g, r, TOL["float32"], f"{case[0]} GEMM fallback result {i}")
    after = _stats()
    assert after["runs"] == before["runs"] and after["fallbacks"] == before["fallbacks"]


@needs_cuda
def test_output_padding_at_stride_runs_on_the_gemm_kernels():
    """output_padding >= stride (legal below the dilation) has no cuDNN form: the GEMM kernels."""
    x, w, b = rand((2, 4, 6)), rand((4, 3, 3)), rand((3,))
    ref = F.conv_transpose1d(x, w, b, stride=1, dilation=2, output_padding=1)
    got = F.conv_transpose1d(x.cuda(), w.cuda(), b.cuda(), stride=1, dilation=2, output_padding=1)
    close(got, ref, TOL["float32"], "output_padding 1, stride 1, dilation 2")


@needs_cuda
def test_tf32_is_loose_and_default_on():
    cudnn.allow_tf32 = True
    ref, got, _ = _run_case(CASES[2], "float32")
    for i, (g, r) in enumerate(zip(got, ref)):
        close(g, r, 1e-2, f"TF32 result {i}")


@needs_cuda
def test_benchmark_chooses_once_per_shape_and_reuses_it():
    if not cudnn.is_available():
        pytest.skip("cuDNN not available: nothing to benchmark")
    ext = _ext()
    ext._cudnn_clear_cache()
    cudnn.benchmark = True
    x, w = rand((4, 8, 16, 16)).cuda(), rand((16, 8, 3, 3), scale=0.3).cuda()
    s0 = _stats()
    first = F.conv2d(x, w, padding=1)
    s1 = _stats()
    assert s1["benchmark_queries"] - s0["benchmark_queries"] == 1
    assert s1["cached_problems"] == s0["cached_problems"] + 1
    second = F.conv2d(x, w, padding=1)
    s2 = _stats()
    assert s2["benchmark_queries"] == s1["benchmark_queries"]
    assert s2["cache_hits"] - s1["cache_hits"] == 1
    np.testing.assert_array_equal(to_np(first), to_np(second))
    close(first, F.conv2d(x.cpu(), w.cpu(), padding=1), TOL["float32"], "benchmarked conv")
    # Another shape is another problem; the heuristic choice is cached separately.
    F.conv2d(x[:2], w, padding=1)
    assert _stats()["benchmark_queries"] - s2["benchmark_queries"] == 1
    cudnn.benchmark = False
    s3 = _stats()
    F.conv2d(x, w, padding=1)
    F.conv2d(x, w, padding=1)
    s4 = _stats()
    assert s4["heuristic_queries"] - s3["heuristic_queries"] == 1
    assert s4["benchmark_queries"] == s3["benchmark_queries"]


@needs_cuda
def test_deterministic_gives_identical_gradients():
    cudnn.deterministic = True
    x0 = rand((8, 16, 12, 12))
    w0 = rand((16, 16, 3, 3), scale=0.3)
    runs = []
    for _ in range(2):
        x = x0.cuda().requires_grad_()
        w = w0.cuda().requires_grad_()
        F.conv2d(x, w, padding=1).square().sum().backward()
        runs.append((to_np(x.grad), to_np(w.grad)))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


@needs_cuda
def test_noncontiguous_and_misaligned_inputs():
    base = rand((2, 7, 10, 10))
    x = base[:, 1:6]  # a view at an offset of 100 elements (400 bytes): aligned, not contiguous
    w = rand((4, 5, 3, 3), scale=0.3)
    close(F.conv2d(x.cuda(), w.cuda(), padding=1), F.conv2d(x, w, padding=1), TOL["float32"],
          "sliced input")
    flat = rand((1 + 2 * 5 * 8 * 8,), "float16")
    xh = flat.cuda()[1:].view(2, 5, 8, 8)  # 2 bytes past an allocation: not 16-byte aligned
    wh = rand((3, 5, 3, 3), "float16", scale=0.3)
    got = F.conv2d(xh, wh.cuda())
    ref = F.conv2d(flat[1:].view(2, 5, 8, 8).float(), wh.float())
    close(got, ref, TOL["float16"], "misaligned float16 input")


@needs_cuda
def test_module_training_step_matches_cpu():
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
    out = net(x.cuda()).square().mean()
    out.backward()
    close(out, ref, 1e-4, "loss")
    for i, (p, r) in enumerate(zip(net.parameters(), ref_grads)):
        close(p.grad, r, 1e-4, f"parameter {i} gradient")
