"""A smoke test of ember's CUDA backend outside pytest (run by tools/gpu_check.sh), built to find
out why engine errors raised after GPU work crashed while their message was being formatted.

It does one category of CUDA work per step (copies, pinned copies, pointwise, reductions, sorts,
indexing, cuBLAS, random, torch's own CUDA work) and after each step probes the host:
  - heap: libc malloc/free of every size class up to 4 KiB, then malloc_trim (which walks the
    heap): a crash here means the malloc heap itself is corrupted (a host buffer overrun, or a
    write into freed memory: a device or async copy writing host memory it must not);
  - canaries: ember CPU tensors and numpy arrays of many sizes filled with a pattern before any
    GPU work: a changed one means something wrote host memory it does not own;
  - errors: engine errors with a plain message, with an integer (std::ostream << unsigned long,
    where the crash was seen) and from a CUDA kernel file, each raised many times.
Every line is flushed before the probe it names, so with faulthandler the last line printed
before a crash names the step and the probe. A step whose ops fail (a kernel bug) prints the
error and the probes still run. `--torch` imports torch first and adds a step of torch CUDA
work, as the tests' comparisons do; `--only STEP` runs the setup steps and that one.

    python3 -X faulthandler tools/gpu_smoke.py [--torch] [--early] [--only STEP]
"""

from __future__ import annotations

import ctypes
import os
import sys
import traceback

# Options come from the command line or, under pytest (`pytest tools/gpu_smoke.py`, the run that
# reproduces the test processes), from GPU_SMOKE_TORCH=1 / GPU_SMOKE_ONLY=step.
if "--torch" in sys.argv or os.environ.get("GPU_SMOKE_TORCH") == "1":
    import torch

import ember
import numpy as np

TORCH = "--torch" in sys.argv or os.environ.get("GPU_SMOKE_TORCH") == "1"

ONLY = (sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv
        else os.environ.get("GPU_SMOKE_ONLY"))
# The tests crashed at the first error message holding a number after CUDA work; by default no
# number is formatted before the first copy, as there. `--early` formats them from the start: if
# only the default run crashes, state created lazily after CUDA init (the locale's number caches)
# is what breaks.
EARLY = "--early" in sys.argv or os.environ.get("GPU_SMOKE_EARLY") == "1"
numbers_allowed = EARLY
LOG = os.environ.get("GPU_SMOKE_LOG")  # also append every line here (survives pytest's capture)
failures: list[str] = []


def say(msg: str) -> None:
    print(msg, flush=True)
    if LOG:
        with open(LOG, "a") as f:
            f.write(msg + "\n")
            f.flush()
            os.fsync(f.fileno())


# ---- environment ------------------------------------------------------------------------------


def environment() -> None:
    import platform
    import subprocess

    say(f"python {platform.python_version()}, glibc {platform.libc_ver()[1]}, "
        f"kernel {platform.release()}, torch imported: {TORCH}")
    try:
        q = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=20).stdout
        for line in q.splitlines():
            if "Addressing Mode" in line or "Driver Version" in line or "CUDA Version" in line:
                say("nvidia-smi: " + line.strip())
    except Exception as e:  # noqa: BLE001 - informational only
        say(f"nvidia-smi: {e}")
    say(f"dlopen flags {sys.getdlopenflags()}; " + "; ".join(
        f"{k}={os.environ.get(k)!r}" for k in ("LD_PRELOAD", "LD_BIND_NOW", "LD_LIBRARY_PATH",
                                               "CUDA_MODULE_LOADING", "MALLOC_CHECK_")))
    for p in ("/sys/kernel/mm/transparent_hugepage/enabled",
              "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm",
              "/sys/module/nvidia_uvm/parameters/uvm_ats_mode"):
        if os.path.exists(p):
            say(f"{p} = {open(p).read().strip()}")


def loaded_libraries() -> None:
    """Shared libraries of interest mapped now: two libstdc++ or a dynamic cudart beside our
    static one would point at an ABI mix-up."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            name = os.path.basename(path)
            if any(k in name for k in ("libstdc++", "libcudart", "libgcc_s", "libcublas", "libc.so",
                                       "libember", "_C_cuda", "_C.", "libnvrtc", "libnvJitLink",
                                       "libcudnn", "libtorch_cuda.so")):
                libs.add(path)
    for p in sorted(libs):
        say(f"  mapped: {p}")


# The C++ runtime's own symbols, which a second copy of libstdc++ (linked statically into some
# library, exported) could interpose: which file each resolves to from each mapped library.
CXX_SYMBOLS = ("_ZNSt6locale7classicEv", "_ZNSt6locale2id5_M_idEv",
               "_ZNSo9_M_insertImEERSoT_")  # locale::classic, locale::id::_M_id, ostream<<ulong


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def mapped_libraries() -> set[str]:
    """The paths of the shared objects mapped into this process now."""
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and ".so" in parts[-1]:
                paths.add(parts[-1])
    return paths


def cxx_runtime_copies(step: str) -> None:
    """Reports any mapped library that resolves libstdc++'s locale symbols to a file other than
    libstdc++.so.6 (two copies of the C++ runtime's locale state in one process)."""
    dl = ctypes.CDLL(None)
    dl.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    paths = mapped_libraries()
    odd = set()

    def outside_libstdcxx(lib: ctypes.CDLL, where: str) -> None:
        # Each C++ runtime symbol `lib` resolves to a file other than libstdc++ is noted.
        for sym in CXX_SYMBOLS:
            try:
                addr = ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value
            except AttributeError:
                continue
            info = DlInfo()
            if dl.dladdr(addr, ctypes.byref(info)) and info.dli_fname:
                src = info.dli_fname.decode()
                if "libstdc++" not in os.path.basename(src):
                    odd.add(f"{sym} from {where} -> {src}")

    # The global scope (what a symbol bound after a library was loaded RTLD_GLOBAL resolves to).
    glob = ctypes.CDLL(None)
    outside_libstdcxx(glob, "the global scope")
    for path in sorted(paths):
        try:
            h = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
        outside_libstdcxx(h, os.path.basename(path))
    for o in sorted(odd):
        failures.append(f"{step}: second C++ runtime: {o}")
        say(f"[{step}] !!! libstdc++ symbol resolved outside libstdc++: {o}")


def locale_facets(step: str) -> None:
    """Where the global locale's number-formatting facets and their vtables live (read without
    formatting a number): a vtable outside libstdc++, or in no mapped file, is the crash."""
    import ember._C_cuda as m  # noqa: PLC0415

    fn = getattr(m, "_debug_cxx_locale", None)
    if fn is None:
        return
    say(f"[{step}] probe C++ locale facets")
    info = fn()
    brief = {k: (v["object_in"].rsplit("/", 1)[-1], v["vtable_in"].rsplit("/", 1)[-1])
             if isinstance(v, dict) else v for k, v in info.items()}
    say(f"[{step}] locale: {brief}")
    for k, v in info.items():
        if isinstance(v, dict) and "libstdc++" not in v["vtable_in"]:
            failures.append(f"{step}: locale facet {k} vtable in {v['vtable_in']}")
            say(f"[{step}] !!! the global locale's {k} facet has its vtable in {v['vtable_in']}")
    if not info["global_is_classic"]:
        say(f"[{step}] !!! the C++ global locale was changed (std::locale::global) to "
            f"{info['global_name']!r}")
        failures.append(f"{step}: global locale changed")


# ---- probes -----------------------------------------------------------------------------------

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.malloc_trim.argtypes = [ctypes.c_size_t]

CANARY_BYTE = 0x5A
canaries: list = []


def make_canaries() -> None:
    rng = np.random.default_rng(0)
    for n in rng.integers(1, 2000, 1500):
        canaries.append(ember.full((int(n),), CANARY_BYTE, dtype=ember.uint8))
        canaries.append(np.full(int(n), CANARY_BYTE, dtype=np.uint8))
    canaries.append(ember.full((), CANARY_BYTE, dtype=ember.uint8))


def probe_heap(step: str) -> None:
    say(f"[{step}] probe heap (malloc/free of every size up to 4 KiB, malloc_trim)")
    ptrs = []
    for size in range(8, 4097, 8):
        for _ in range(3):
            ptrs.append(libc.malloc(size))
    for p in ptrs:
        libc.free(p)
    libc.malloc_trim(0)


def probe_canaries(step: str) -> None:
    say(f"[{step}] probe canaries ({len(canaries)} host buffers)")
    bad = 0
    for c in canaries:
        a = c.numpy() if isinstance(c, ember.Tensor) else c
        if not (a == CANARY_BYTE).all():
            bad += 1
    if bad:
        failures.append(f"{step}: {bad} canaries changed")
        say(f"[{step}] !!! {bad} host canary buffers were overwritten")


def expect_error(fn, what: str) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - each is expected to raise
        return
    raise AssertionError(f"{what}: no error raised")


def probe_errors(step: str, with_cuda: bool) -> None:
    a = ember.ones(3, dtype=ember.int8)
    say(f"[{step}] probe errors: engine, plain message")
    for _ in range(50):
        expect_error(lambda: ember.add(a, a, alpha=1.5), "add alpha")
    if not numbers_allowed:
        say(f"[{step}] (no message with a number yet)")
        return
    say(f"[{step}] probe errors: engine, message with an integer (ostream << unsigned long)")
    for _ in range(50):
        expect_error(lambda: ember._C._TestCachingAllocator(1 << 40, round=100), "round")
    say(f"[{step}] probe errors: engine, shape message")
    for _ in range(50):
        expect_error(lambda: ember.ones(2, 3) + ember.ones(4), "broadcast")
    if with_cuda:
        say(f"[{step}] probe errors: raised in _C_cuda")
        g = ember.tensor([2, 3]).cuda()
        for _ in range(50):
            expect_error(lambda: ember.pow(g, -1), "pow")


_mapped_before: set = set()


def mapped_changes(step: str) -> None:
    """Shared objects loaded or unloaded since the last probe (a library the driver loads and
    unloads again, leaving state behind, would show here)."""
    global _mapped_before
    now = mapped_libraries()
    if _mapped_before:
        for p in sorted(now - _mapped_before):
            say(f"[{step}] loaded: {p}")
        for p in sorted(_mapped_before - now):
            say(f"[{step}] !!! unloaded: {p}")
    _mapped_before = now


def probe(step: str, with_cuda: bool = True, module: bool = True) -> None:
    """with_cuda: the device is in use (synchronize, and raise an error from a CUDA kernel file,
    which copies a tensor to the device); module: ember._C_cuda is loaded (locale facets)."""
    mapped_changes(step)
    if with_cuda:
        say(f"[{step}] synchronize")
        ember.cuda.synchronize()
    probe_heap(step)
    probe_canaries(step)
    say(f"[{step}] probe C++ runtime copies")
    cxx_runtime_copies(step)
    if module:
        locale_facets(step)
    probe_errors(step, with_cuda)
    say(f"[{step}] ok")


# ---- steps ------------------------------------------------------------------------------------


def step_copies() -> None:
    """Pageable host <-> device copies: many sizes and dtypes, offsets, views, 0-d, broadcast."""
    rng = np.random.default_rng(1)
    for dtype in (ember.uint8, ember.int16, ember.float32, ember.float64, ember.bool):
        for n in (0, 1, 3, 7, 64, 513, 4099, 1 << 16):
            h = ember.from_numpy(rng.integers(0, 2, n).astype(np.uint8)).to(dtype)
            d = h.cuda()
            assert d.cpu().tolist() == h.tolist()
            if n > 2:
                assert d[1:].cpu().tolist() == h[1:].tolist()
                assert d[::2].cpu().tolist() == h[::2].tolist()
                out = ember.empty(n - 1, dtype=dtype)
                out.copy_(d[1:])
                assert out.tolist() == h[1:].tolist()
    x = ember.arange(12.0).reshape(3, 4)
    assert x.cuda().t().cpu().tolist() == x.t().tolist()
    assert ember.tensor(5.0).cuda().item() == 5.0
    assert ember.tensor(5.0).cuda().cpu().item() == 5.0
    e = ember.empty(3, 4, device="cuda")
    e.copy_(ember.arange(4.0))  # broadcast from the host
    assert e.cpu().tolist() == [[0.0, 1.0, 2.0, 3.0]] * 3
    e.fill_(2.5)
    e[1] = ember.tensor(1.0)
    assert e.sum().item() == 2.5 * 8 + 4


def step_pinned() -> None:
    """Non-blocking copies through pinned memory, freeing the pinned tensors at once (the
    allocator must hold their blocks until the copies ran)."""
    for it in range(200):
        n = 1 + (it * 37) % 5000
        src = ember.full((n,), float(it)).pin_memory()
        d = ember.empty(n, device="cuda")
        d.copy_(src, non_blocking=True)
        del src
        back = ember.empty(n).pin_memory()
        back.copy_(d, non_blocking=True)
        ember.cuda.synchronize()
        assert back[0].item() == float(it) and back[-1].item() == float(it)
        del back
        r = d.to("cpu", non_blocking=True)  # pageable destination
        ember.cuda.synchronize()
        assert r[-1].item() == float(it)


def step_pointwise() -> None:
    a = ember.tensor([7, -7, 7, -7, 0, -128, 5, -1])
    b = ember.tensor([2, 2, -2, -2, 3, -1, -1, 3])
    for dtype in (ember.int8, ember.int16, ember.int32, ember.int64):
        ga, gb = a.to(dtype).cuda(), b.to(dtype).cuda()
        for fn in (ember.floor_divide, ember.remainder, ember.fmod):
            assert fn(ga, gb).cpu().tolist() == fn(a.to(dtype), b.to(dtype)).tolist()
        assert ember.pow(ga, gb.abs()).cpu().tolist() == ember.pow(a.to(dtype),
                                                                    b.abs().to(dtype)).tolist()
        assert (ga << 1).cpu().tolist() == (a.to(dtype) << 1).tolist()
    for dtype in (ember.float16, ember.bfloat16, ember.float32, ember.float64):
        x = ember.randn(1000, 33).to(dtype)
        g = x.cuda()
        want = (x.float() * 2 + 1).exp().sigmoid()
        got = (g.float() * 2 + 1).exp().sigmoid().cpu()
        assert ember.allclose(got, want, rtol=1e-3, atol=1e-3)
        assert ember.equal(g.t().contiguous().cpu(), x.t().contiguous())


def step_reductions() -> None:
    x = ember.randn(300, 257)
    g = x.cuda()
    assert ember.allclose(g.sum(1).cpu(), x.sum(1), rtol=1e-4, atol=1e-3)
    assert ember.allclose(g.mean(0).cpu(), x.mean(0), rtol=1e-4, atol=1e-4)
    assert g.max().item() == x.max().item()
    assert g.argmax(1).cpu().tolist() == x.argmax(1).tolist()
    assert ember.allclose(g.cumsum(1).cpu(), x.cumsum(1), rtol=1e-4, atol=1e-3)
    assert ember.allclose(g.std(1).cpu(), x.std(1), rtol=1e-4, atol=1e-4)
    assert (g > 0).any().item() is True and (g > 0).all().item() is False


def step_sort() -> None:
    x = ember.randn(50, 999)
    g = x.cuda()
    assert g.sort(1)[0].cpu().tolist() == x.sort(1)[0].tolist()
    assert g.topk(5, 1)[0].cpu().tolist() == x.topk(5, 1)[0].tolist()
    assert ember.unique(ember.tensor([3, 1, 3, 2]).cuda()).cpu().tolist() == [1, 2, 3]


def step_indexing() -> None:
    x = ember.randn(100, 64)
    g = x.cuda()
    idx = ember.tensor([3, 1, 99, 0])
    assert g[idx.cuda()].cpu().tolist() == x[idx].tolist()
    assert g[g > 0].cpu().tolist() == x[x > 0].tolist()
    assert ember.nonzero(g > 1).cpu().tolist() == ember.nonzero(x > 1).tolist()
    h = x.clone()
    h[idx] = 0.0
    g[idx.cuda()] = 0.0
    assert g.cpu().tolist() == h.tolist()
    assert g.index_select(1, idx.cuda() % 64).cpu().tolist() == h.index_select(1, idx % 64).tolist()


def step_cublas() -> None:
    x = ember.randn(513, 257)
    g = x.cuda()
    assert ember.allclose((g @ g.t()).cpu(), x @ x.t(), rtol=1e-3, atol=1e-2)
    assert ember.allclose(ember.bmm(g.reshape(3, 171, 257), g.reshape(3, 257, 171)).cpu(),
                          ember.bmm(x.reshape(3, 171, 257), x.reshape(3, 257, 171)),
                          rtol=1e-3, atol=1e-2)
    v = ember.randn(257)
    assert ember.allclose((g @ v.cuda()).cpu(), x @ v, rtol=1e-3, atol=1e-2)


def step_random() -> None:
    ember.manual_seed(0)
    r = ember.rand(100000, device="cuda")
    assert 0.4 < r.mean().item() < 0.6
    n = ember.randn(1000, 1000, device="cuda")
    assert abs(n.mean().item()) < 0.01
    p = ember.randperm(1000, device="cuda")
    assert sorted(p.cpu().tolist()) == list(range(1000))
    m = ember.multinomial(ember.ones(10, device="cuda"), 5)
    assert m.shape == (5,)
    d = ember.empty(1000, device="cuda").bernoulli_(0.5)
    assert 0.3 < d.mean().item() < 0.7


def step_torch() -> None:
    t = torch.randn(1000, 1000, device="cuda")
    (t @ t).sum().item()
    torch.ones(3, device="cuda").cpu()
    torch.cuda.synchronize()


STEPS = [("copies", step_copies), ("pinned", step_pinned), ("pointwise", step_pointwise),
         ("reductions", step_reductions), ("sort", step_sort), ("indexing", step_indexing),
         ("cublas", step_cublas), ("random", step_random)]
if TORCH:
    STEPS.append(("torch", step_torch))


def main() -> None:
    environment()
    say("libraries before CUDA:")
    loaded_libraries()
    make_canaries()
    say(f"ember._C_cuda loaded by `import ember`: {'ember._C_cuda' in sys.modules}")
    probe("no CUDA yet", with_cuda=False, module=False)
    # The first CUDA work in small stages, each probed: loading the module (its libraries,
    # cuBLAS among them, and cuInit), the context, one allocation, one copy each way.
    say("[load] import ember._C_cuda")
    import ember._C_cuda  # noqa: F401, PLC0415
    probe("load", with_cuda=False)
    if not ember.cuda.is_available():
        say("no CUDA device: done")
        return
    say("[context] ember.cuda.init()")
    ember.cuda.init()
    probe("context", with_cuda=False)
    say("[alloc] ember.empty(4, device='cuda')")
    x = ember.empty(4, device="cuda")
    probe("alloc", with_cuda=False)
    say("[copy] 4 floats to the device and back")
    x.copy_(ember.arange(4.0))
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    del x
    say("libraries after CUDA init:")
    loaded_libraries()
    global numbers_allowed
    numbers_allowed = True
    probe("copy")
    for name, fn in STEPS:
        if ONLY and name != ONLY:
            continue
        say(f"[{name}] run")
        try:
            fn()
        except Exception:  # noqa: BLE001 - a kernel bug: report it and still probe the host
            failures.append(f"{name}: " + traceback.format_exc().strip().splitlines()[-1])
            say(f"[{name}] step failed:\n{traceback.format_exc()}")
        probe(name)
    say("libraries at the end:")
    loaded_libraries()
    # The last line is what gpu_check.sh reports.
    say(f"smoke done, torch imported: {TORCH}, early numbers: {EARLY}; failures: "
        f"{'; '.join(failures) if failures else 'none'}")


def test_smoke() -> None:
    """The same run inside pytest, where the crash was seen."""
    main()
    assert not failures, failures


if __name__ == "__main__":
    main()
