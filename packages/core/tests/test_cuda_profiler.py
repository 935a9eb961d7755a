"""ember.profiler's CUDA kernel timing: ProfilerActivity.CUDA through CUPTI (csrc/cuda/
cupti_activity.cpp). On a GPU with CUPTI: kernels, copies and fills appear as device events with
their device time, attributed to the host op that launched them, in key_averages, the table and
the Chrome trace. Without a GPU: the CUPTI loader's reports, and the Python side (attribution of
launches to host ops, device-time columns, trace) on hand-made records."""

from __future__ import annotations

import json
import warnings

import ember
import pytest
from ember.profiler import ProfilerActivity, _build_events, profile, record_function


def _extension():
    try:
        from ember import _C_cuda
    except ImportError:
        return None
    return _C_cuda if hasattr(_C_cuda, "_cupti_status") else None


EXT = _extension()


def _gpu_skip_reason() -> str:
    if not ember.cuda.is_available():
        return "needs a CUDA device"
    status = EXT._cupti_status()
    if not status["registered"]:
        return f"CUPTI kernel timing is not available: {status['error']}"
    return ""


GPU_REASON = _gpu_skip_reason()
gpu = pytest.mark.skipif(bool(GPU_REASON), reason=GPU_REASON or "-")
has_ext = pytest.mark.skipif(EXT is None, reason="ember._C_cuda is not built")
BOTH = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def device_events(prof):
    return [e for e in prof.events() if e.device_type == "cuda"]


def host_events(prof):
    return [e for e in prof.events() if e.device_type == "cpu"]


# ---- the loader (needs ember._C_cuda, not a GPU) ------------------------------------------------


@has_ext
def test_missing_library_named_in_the_reason(monkeypatch, tmp_path):
    missing = str(tmp_path / "nowhere" / "libcupti.so.13")
    monkeypatch.setenv("EMBER_CUPTI_LIBRARY", missing)
    got = EXT._cupti_probe()
    assert got["loaded"] is False and got["path"] == "" and got["version"] == 0
    assert "EMBER_CUPTI_LIBRARY" in got["error"] and missing in got["error"]
    # A folder without the library: the file looked for in it is named.
    monkeypatch.setenv("EMBER_CUPTI_LIBRARY", str(tmp_path))
    got = EXT._cupti_probe()
    assert got["loaded"] is False and str(tmp_path / "libcupti.so.13") in got["error"]


@has_ext
def test_library_that_is_not_cupti_is_refused(monkeypatch):
    # libc loads, but has no CUPTI entry points: the reason names the first one missing.
    monkeypatch.setenv("EMBER_CUPTI_LIBRARY", "libc.so.6")
    got = EXT._cupti_probe()
    assert got["loaded"] is False and "no symbol cuptiGetVersion" in got["error"]


@has_ext
def test_status_is_consistent():
    st = EXT._cupti_status()
    assert set(st) >= {"loaded", "path", "version", "error", "registered", "last_error",
                       "dropped"}
    if st["loaded"]:
        assert st["version"] // 10000 == 13 and st["path"] and st["error"] == ""
        # The same library found again, named directly.
        import os

        os.environ["EMBER_CUPTI_LIBRARY"] = st["path"]
        try:
            again = EXT._cupti_probe()
        finally:
            del os.environ["EMBER_CUPTI_LIBRARY"]
        assert again["loaded"] and again["version"] == st["version"]
    else:
        assert st["error"].startswith("CUPTI is not available") and not st["registered"]
    if not ember.cuda.is_available():
        assert st["registered"] is False  # nothing to time without a GPU


# ---- the Python side, on hand-made records (no GPU) ---------------------------------------------

BASE = 1_000_000


def _raw(events, device_events, threads=((7, "main"), (9, "worker"))):
    return {"start_ns": BASE, "stop_ns": BASE + 100_000, "start_wall_us": 1_700_000_000_000_000,
            "threads": list(threads), "events": events, "memory": [],
            "device_events": device_events}


def _ev(eid, name, tid, start_us, end_us, parent=-1, kind=0):
    return (eid, name, kind, tid, BASE + start_us * 1000, BASE + end_us * 1000, parent, -1, 0,
            None, None, 0, 0, None)


def _dev(name, start_us, end_us, stream=7):
    return (name, "cuda", 0, stream, BASE + start_us * 1000, BASE + end_us * 1000, -1)


def _launch(dev, corr, tid, at_us):
    return (dev[4], dev[5], corr, tid, BASE + at_us * 1000, BASE + (at_us + 2) * 1000)


def _attributed_profile():
    events = [
        _ev(0, "step", 7, 0, 60, kind=1),
        _ev(1, "aten::matmul", 7, 5, 30, parent=0),
        _ev(2, "aten::mm", 7, 6, 28, parent=1),
        _ev(3, "aten::add", 7, 31, 40, parent=0),
        _ev(4, "aten::to", 9, 10, 20),
    ]
    gemm = _dev("void gemm_kernel<float>(float const*)", 20, 50)
    add = _dev("void add_kernel<float>(float*)", 51, 53)
    copy = _dev("Memcpy HtoD (Pageable -> Device)", 15, 18, stream=3)
    orphan = _dev("void stray_kernel()", 70, 71)
    devs = [copy, gemm, add, orphan]
    launches = [_launch(copy, 11, 9, 12), _launch(gemm, 12, 7, 10), _launch(add, 13, 7, 33),
                _launch(orphan, 14, 7, 65)]  # after every op closed: no op
    return _build_events(_raw(events, devs), profile_memory=False, with_device=True,
                         launches=launches)


def test_launches_attributed_to_the_innermost_open_op():
    ev = _attributed_profile()
    host = {e.name: e for e in ev if e.device_type == "cpu"}
    dev = {e.name.split("(")[0]: e for e in ev if e.device_type == "cuda"}
    assert [k.name for k in host["aten::mm"].kernels] == ["void gemm_kernel<float>(float const*)"]
    assert host["aten::matmul"].kernels == [] and host["step"].kernels == []
    assert [k.name for k in host["aten::to"].kernels] == ["Memcpy HtoD (Pageable -> Device)"]
    assert [k.name for k in host["aten::add"].kernels] == ["void add_kernel<float>(float*)"]
    # Device time: an op's total counts the ops inside it; its self only its own kernels.
    assert host["aten::mm"].self_cuda_time_total == pytest.approx(30.0)
    assert host["aten::matmul"].cuda_time_total == pytest.approx(30.0)
    assert host["aten::matmul"].self_cuda_time_total == 0.0
    assert host["step"].device_time_total == pytest.approx(32.0)
    assert host["step"].self_device_time_total == 0.0
    # Kernel rows: device time only, no host time; every kernel, attributed or not.
    assert set(dev) == {"void gemm_kernel<float>", "void add_kernel<float>",
                        "Memcpy HtoD ", "void stray_kernel"}
    assert dev["void gemm_kernel<float>"].self_cuda_time_total == pytest.approx(30.0)
    assert all(e.cpu_time_total == 0.0 and e.self_cpu_time_total == 0.0 for e in dev.values())
    stray = [k for k in ev._kernels if k.name == "void stray_kernel()"][0]
    assert stray.op_id == -1 and stray.launch_thread == 7 and stray.correlation_id == 14
    # Host time totals are those of the host events alone.
    assert ev.self_cpu_time_total == pytest.approx(sum(
        e.self_cpu_time_total for e in ev if e.device_type == "cpu"))


def test_key_averages_and_table_with_device_rows():
    ev = _attributed_profile()
    rows = {r.key: r for r in ev.key_averages()}
    assert rows["aten::matmul"].cuda_time_total == pytest.approx(30.0)
    assert rows["void gemm_kernel<float>(float const*)"].self_cuda_time_total == pytest.approx(30)
    assert rows["void gemm_kernel<float>(float const*)"].device_type == "cuda"
    for key in ("cuda_time_total", "self_cuda_time_total", "device_time_total",
                "self_device_time_total"):
        table = ev.key_averages().table(sort_by=key, row_limit=20)
        for col in ("Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"):
            assert col in table
        # Each device microsecond once: the kernel rows (30 + 2 + 3 + 1).
        assert "Self CUDA time total: 36.000us" in table
        first_row = table.splitlines()[3]
        if key in ("self_cuda_time_total", "self_device_time_total"):
            # aten::mm and its kernel tie (30 us of device time each); mm appeared first.
            assert first_row.startswith("aten::mm") and "30.000us" in first_row
        else:
            assert first_row.startswith("step") and "32.000us" in first_row


def test_chrome_trace_puts_kernels_on_stream_tracks_with_arrows(tmp_path):
    ev = _attributed_profile()
    path = tmp_path / "trace.json"
    ev.export_chrome_trace(str(path))
    evs = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in evs if e["ph"] == "X" and e.get("cat") == "kernel"]
    assert {e["name"] for e in kernels} == {"void gemm_kernel<float>(float const*)",
                                            "void add_kernel<float>(float*)",
                                            "void stray_kernel()"}
    gemm = [e for e in kernels if e["name"].startswith("void gemm")][0]
    assert gemm["pid"] == 0 and gemm["tid"] == 7 and gemm["dur"] == pytest.approx(30.0)
    assert gemm["args"]["correlation"] == 12
    (copy,) = [e for e in evs if e.get("cat") == "gpu_memcpy"]
    assert copy["tid"] == 3
    # No kernel on a host track; each attributed launch has an arrow to its kernel.
    host_pids = {e["pid"] for e in evs if e.get("cat") == "cpu_op"}
    assert all(e["pid"] not in host_pids for e in kernels)
    starts = {e["id"]: e for e in evs if e["ph"] == "s" and e["cat"] == "ac2g"}
    ends = {e["id"]: e for e in evs if e["ph"] == "f" and e["cat"] == "ac2g"}
    assert set(starts) == set(ends) == {11, 12, 13, 14}
    assert starts[12]["tid"] == 7 and starts[12]["ts"] == pytest.approx(10.0)
    assert ends[12]["pid"] == 0 and ends[12]["tid"] == 7 and ends[12]["ts"] == pytest.approx(20.0)
    assert any(e["name"] == "thread_name" and e["pid"] == 0 and e["tid"] == 3 for e in evs)


def test_launches_that_do_not_line_up_are_not_attributed():
    events = [_ev(0, "aten::mm", 7, 0, 10)]
    k = _dev("k", 3, 4)
    # A launch list of another length is ignored; one whose times differ skips its event.
    ev = _build_events(_raw(events, [k]), False, True, launches=[])
    assert ev._kernels[0].op_id == -1
    bad = (k[4] + 1, k[5], 5, 7, BASE + 1000, BASE + 2000)
    ev = _build_events(_raw(events, [k]), False, True, launches=[bad])
    assert ev._kernels[0].op_id == -1 and ev._kernels[0].launch_thread == -1
    ev = _build_events(_raw(events, [k]), False, True, launches=[_launch(k, 5, 7, 1)])
    assert ev._kernels[0].op_id == 0


# ---- on a GPU with CUPTI ------------------------------------------------------------------------


def _inputs():
    x = ember.randn(256, 256).to("cuda")
    y = ember.randn(256, 256).to("cuda")
    ember.cuda.synchronize()
    return x, y


@gpu
def test_kernels_timed_inside_the_profile():
    x, y = _inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profile(activities=BOTH) as prof:
            with record_function("work"):
                a = x + y
                b = x @ y
                c = b.sum()
            with record_function("sync"):
                ember.cuda.synchronize()
    # CUPTI works: no "no CUDA kernel timing" / "timing is incomplete" warning.
    assert not [w for w in caught if "kernel timing" in str(w.message)], \
        [str(w.message) for w in caught]
    assert float(c.cpu()) == pytest.approx(float((x.cpu() @ y.cpu()).sum()), rel=1e-3)
    assert float(a.cpu().sum()) == pytest.approx(float((x.cpu() + y.cpu()).sum()), rel=1e-4)
    dev = device_events(prof)
    assert len(dev) >= 3, [e.name for e in dev]
    host = {e.name: e for e in host_events(prof)}
    work, sync = host["work"], host["sync"]
    slack = 50.0  # µs: GPU timestamps are mapped onto the host clock
    for e in dev:
        assert e.device_time_total > 0 and e.end_us > e.start_us, e
        assert e.start_us >= work.start_us - slack, (e.name, e.start_us, work.start_us)
        assert e.end_us <= sync.end_us + slack, (e.name, e.end_us, sync.end_us)
    # Every kernel of the three ops was launched by one of them (or an op inside them).
    for k in prof.events()._kernels:
        assert k.op_id >= 0 and k.launch_thread == host["aten::add"].thread, k
    st = EXT._cupti_status()
    assert st["last_error"] == "" and st["dropped"] == 0


@gpu
def test_matmul_kernel_attributed_to_the_matmul():
    x, y = _inputs()
    with profile(activities=BOTH) as prof:
        x @ y
    rows = {r.key: r for r in prof.key_averages()}
    assert "aten::matmul" in rows or "aten::mm" in rows, sorted(rows)
    for name in ("aten::matmul", "aten::mm"):
        if name in rows:
            assert rows[name].cuda_time_total > 0, (name, rows[name])
    launched = [e for e in host_events(prof) if e.kernels]
    assert any(e.name in ("aten::mm", "aten::matmul") for e in launched), \
        [(e.name, [k.name for k in e.kernels]) for e in launched]
    # A kernel row for each kernel, with its device time.
    kernel_rows = [r for r in rows.values() if r.device_type == "cuda"]
    assert kernel_rows and all(r.self_cuda_time_total > 0 for r in kernel_rows)
    total = sum(r.self_cuda_time_total for r in kernel_rows)
    assert sum(e.self_cuda_time_total for e in host_events(prof)) == pytest.approx(total, rel=0.01)


@gpu
def test_host_to_device_copy_recorded():
    x = ember.arange(1 << 16, dtype=ember.float32)
    with profile(activities=BOTH) as prof:
        g = x.to("cuda")
    assert bool((g.cpu() == x).all())
    copies = [k for k in prof.events()._kernels if k.name.startswith("Memcpy HtoD")]
    assert copies, [k.name for k in prof.events()._kernels]
    assert all(k.duration_us > 0 for k in copies)
    by_id = {e.id: e for e in host_events(prof)}
    assert any(k.op_id in by_id and by_id[k.op_id].name.startswith("aten::") for k in copies), \
        [(k.name, k.op_id) for k in copies]


@gpu
def test_table_sorted_by_cuda_time():
    x, y = _inputs()
    with profile(activities=BOTH) as prof:
        (x @ y + 1).relu().sum()
    avg = prof.key_averages()
    for key in ("cuda_time_total", "self_cuda_time_total"):
        table = avg.table(sort_by=key, row_limit=10)
        assert "Self CUDA" in table and "CUDA total" in table and "Self CUDA time total" in table
        top = max(avg, key=lambda r: getattr(r, key))
        assert table.splitlines()[3].startswith(top.key[:40]), (top.key, table)
        assert getattr(top, key) > 0


@gpu
def test_chrome_trace_has_the_kernels(tmp_path):
    x, y = _inputs()
    with profile(activities=BOTH) as prof:
        x @ y + x
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    evs = trace["traceEvents"]
    kernels = [e for e in evs if e["ph"] == "X" and e.get("cat") == "kernel"]
    names = {k.name for k in prof.events()._kernels if not k.name.startswith("Mem")}
    assert kernels and {e["name"] for e in kernels} == names
    dev = ember.cuda.current_device()
    assert all(e["dur"] > 0 and e["pid"] == dev for e in kernels)
    flows = [e for e in evs if e.get("cat") == "ac2g"]
    assert {e["ph"] for e in flows} == {"s", "f"}
    assert any(e["name"] == "process_name" and e["pid"] == dev for e in evs)


@gpu
def test_profiling_twice_in_a_row():
    x, y = _inputs()
    x + y  # the add kernel's first launch (its module loads) happens before both
    ember.cuda.synchronize()
    counts = []
    for i in range(2):
        with profile(activities=BOTH) as prof:
            x + y
        add = [e for e in host_events(prof) if e.name == "aten::add"]
        assert len(add) == 1
        launched = add[0].kernels
        assert launched and all(k.duration_us > 0 for k in launched), (
            i, EXT._cupti_status(), [(e.name, e.id, e.start_us, e.end_us) for e in host_events(prof)],
            [(k.name, k.op_id, k.launch_thread, k.launch_us, k.correlation_id, k.start_us)
             for k in prof.events()._kernels])
        counts.append(len(device_events(prof)))
    assert counts[0] == counts[1]  # nothing of the first profile leaks into the second


@gpu
def test_no_gpu_work_no_device_events():
    ember.cuda.synchronize()
    with profile(activities=BOTH) as prof:
        ember.ones(8) * 2  # host work only
    assert device_events(prof) == [] and prof.events()._kernels == []
    assert "aten::mul" in {e.name for e in prof.events()}
    assert EXT._cupti_status()["last_error"] == ""


@gpu
def test_backward_kernels_attributed_to_backward_ops():
    x = ember.randn(64, 64).to("cuda").requires_grad_()
    w = ember.randn(64, 64).to("cuda").requires_grad_()
    with profile(activities=BOTH) as prof:
        (x @ w).sum().backward()
    by_id = {e.id: e for e in host_events(prof)}

    def in_backward(e):
        while e is not None:
            if e.name.startswith("autograd::engine::evaluate_function"):
                return True
            e = e.cpu_parent
        return False

    kernels = prof.events()._kernels
    backward = [k for k in kernels if k.op_id in by_id and in_backward(by_id[k.op_id])]
    assert backward, [(k.name, k.op_id) for k in kernels]
    assert x.grad is not None and w.grad is not None
