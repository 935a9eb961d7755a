"""ember.profiler: ops recorded from the dispatcher (nested, with shapes), autograd nodes linked
to their forward ops, record_function, schedules, tables, and the Chrome trace."""

import gzip
import json
import os
import threading

import ember
import pytest
from ember.profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)


def names(prof):
    return [e.name for e in prof.events()]


def test_ops_recorded_and_table():
    a, b = ember.ones(3, 4), ember.ones(3, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            c = ember.add(a, b)
        c.sum()
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::add"].count == 3
    assert rows["aten::sum"].count == 1
    assert rows["aten::add"].cpu_time_total >= rows["aten::add"].self_cpu_time_total > 0
    table = prof.key_averages().table(sort_by="count", row_limit=1)
    header = table.splitlines()[1]
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "# of Calls"):
        assert col in header
    body = [ln for ln in table.splitlines()[3:] if ln and not ln.startswith("-")]
    assert body[0].startswith("aten::add") and body[0].split()[-1] == "3"
    assert len(body) == 2  # one row (row_limit=1) and the total line
    assert body[1].startswith("Self CPU time total:")
    for key in ("cpu_time_total", "self_cpu_time_total", "cpu_time", "cpu_memory_usage"):
        prof.key_averages().table(sort_by=key)
    with pytest.raises(ValueError, match="sort_by must be one of"):
        prof.key_averages().table(sort_by="bogus")


def test_nothing_recorded_when_off():
    assert not ember.profiler.is_profiler_enabled()
    with record_function("outside"):  # no profile: a no-op
        ember.ones(2) + 1
    with profile() as prof:
        assert ember.profiler.is_profiler_enabled()
    assert not ember.profiler.is_profiler_enabled()
    assert len(prof.events()) == 0


def test_nesting_record_function_and_composites():
    x = ember.randn(4, 6)

    @record_function("decorated")
    def f(t):
        return ember.nn.functional.layer_norm(t, (6,)).relu()

    with profile() as prof:
        with record_function("outer"):
            f(x)
            f(x)
    ev = prof.events()
    outer = [e for e in ev if e.name == "outer"]
    assert len(outer) == 1
    decorated = [e for e in ev if e.name == "decorated"]
    assert len(decorated) == 2 and all(d.cpu_parent is outer[0] for d in decorated)
    ln = [e for e in ev if e.name == "aten::layer_norm"]
    assert len(ln) == 2 and all(e.cpu_parent.name == "decorated" for e in ln)
    # layer_norm is a composite: the op it runs is recorded inside it.
    assert all([c.name for c in e.cpu_children] == ["aten::native_layer_norm"] for e in ln)
    for e in ev:
        for c in e.cpu_children:
            assert c.cpu_parent is e and c.thread == e.thread
            assert e.start_us <= c.start_us and c.end_us <= e.end_us
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-6


def test_record_shapes_group_by_input_shape():
    with profile(record_shapes=True) as prof:
        ember.ones(2, 3).sum()
        ember.ones(4, 5, dtype=ember.float64).sum()
    rows = [r for r in prof.key_averages(group_by_input_shape=True) if r.key == "aten::sum"]
    assert sorted(map(str, (r.input_shapes for r in rows))) == ["[[2, 3]]", "[[4, 5]]"]
    sums = [e for e in prof.events() if e.name == "aten::sum"]
    assert sorted(t for e in sums for t in e.input_types) == ["float32", "float64"]
    table = prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total")
    assert "Input Shapes" in table and "[[4, 5]]" in table
    with profile() as prof:  # without record_shapes: none
        ember.ones(2, 3).sum()
    assert all(e.input_shapes == [] for e in prof.events())


def test_backward_nodes_linked_by_sequence_number():
    x = ember.randn(3, requires_grad=True)
    with profile() as prof:
        y = (x * 2).sin().sum()
        y.backward()
    ev = prof.events()
    bwd = {e.name.split(": ")[1]: e for e in ev
           if e.name.startswith("autograd::engine::evaluate_function: ")}
    assert {"MulBackward0", "SinBackward0", "SumBackward0", "AccumulateGrad"} <= set(bwd)
    fwd = {e.name: e for e in ev if e.name in ("aten::mul", "aten::sin", "aten::sum")
           and e.sequence_nr >= 0}
    assert bwd["MulBackward0"].sequence_nr == fwd["aten::mul"].sequence_nr
    assert bwd["SinBackward0"].sequence_nr == fwd["aten::sin"].sequence_nr
    assert bwd["SumBackward0"].sequence_nr == fwd["aten::sum"].sequence_nr
    # the backward's own ops run inside the node
    sin_bwd = bwd["SinBackward0"]
    inner = [c.name for c in sin_bwd.cpu_children[0].cpu_children]
    assert "aten::cos" in inner


def test_other_threads_recorded():
    def work():
        ember.ones(5).exp()

    with profile() as prof:
        t = threading.Thread(target=work)
        t.start()
        t.join()
        ember.ones(5).exp()
    exps = [e for e in prof.events() if e.name == "aten::exp"]
    assert len(exps) == 2 and len({e.thread for e in exps}) == 2


def test_schedule_and_on_trace_ready():
    s = schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)
    assert [s(i) for i in range(7)] == [
        ProfilerAction.NONE, ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
        ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE, ProfilerAction.NONE]
    saved = []

    def ready(p):
        saved.append(sorted({e.name for e in p.events() if e.name.startswith("ProfilerStep")}))

    with profile(schedule=s, on_trace_ready=ready) as prof:
        for _ in range(6):
            ember.ones(2) + 1
            prof.step()
    assert saved == [["ProfilerStep#3", "ProfilerStep#4"]]
    steps = [e for e in prof.events() if e.name.startswith("ProfilerStep")]
    assert all(any(c.name == "aten::add" for c in e.cpu_children) for e in steps)
    with pytest.raises(ValueError):
        schedule(wait=0, warmup=0, active=0)


def test_chrome_trace_valid(tmp_path):
    x = ember.randn(4, requires_grad=True)
    with profile(record_shapes=True, profile_memory=True) as prof:
        with record_function("block"):
            (x * x).sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    evs = trace["traceEvents"]
    xs = [e for e in evs if e["ph"] == "X"]
    ms = [e for e in evs if e["ph"] == "M"]
    assert xs and ms
    for e in xs:
        assert {"name", "cat", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] >= 0
    tids = {e["tid"] for e in xs}
    named = {e["tid"] for e in ms if e["name"] == "thread_name" and e["args"]["name"]}
    assert tids <= named
    assert any(e["name"] == "process_name" for e in ms)
    mul = [e for e in xs if e["name"] == "aten::mul" and "Input Dims" in e["args"]]
    assert mul and mul[0]["args"]["Input Dims"][0] == [4]
    # nesting: every event lies within the events that enclose it on its thread
    by_tid = {}
    for e in xs:
        by_tid.setdefault(e["tid"], []).append(e)
    for tid_events in by_tid.values():
        tid_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in tid_events:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + 1e-3 and \
                    not (e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + 1e-3):
                stack.pop()
            if stack:
                parent = stack[-1]
                assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + 1e-3, (e, parent)
            stack.append(e)
    flows = [e for e in evs if e["ph"] in ("s", "f")]
    assert {e["ph"] for e in flows} == {"s", "f"}
    assert any(e["ph"] == "i" and e["name"] == "[memory]" for e in evs)


def test_tensorboard_trace_handler(tmp_path):
    with profile(on_trace_ready=tensorboard_trace_handler(str(tmp_path), "worker0")):
        ember.ones(2) * 3
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].startswith("worker0.")
    assert files[0].endswith(".pt.trace.json")
    assert json.loads((tmp_path / files[0]).read_text())["traceEvents"]
    gz = tmp_path / "gz"
    with profile(on_trace_ready=tensorboard_trace_handler(str(gz), use_gzip=True)):
        ember.ones(2) * 3
    (f,) = os.listdir(gz)
    with gzip.open(gz / f) as fh:
        assert json.load(fh)["traceEvents"]


def test_profile_memory_columns():
    with profile(profile_memory=True) as prof:
        x = ember.ones(1000)
        del x
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::ones"].self_cpu_memory_usage >= 4000
    assert "CPU Mem" in prof.key_averages().table()


def test_with_stack():
    with profile(with_stack=True) as prof:
        ember.ones(3).neg()
    neg = [e for e in prof.events() if e.name == "aten::neg"][0]
    assert any("test_profiler.py" in frame for frame in neg.stack)


def test_dataloader_and_optimizer_recorded():
    data = pytest.importorskip("ember.data")
    nn = pytest.importorskip("ember.nn")
    ds = data.TensorDataset(ember.randn(8, 3), ember.randn(8, 1))
    loader = data.DataLoader(ds, batch_size=4)
    model = nn.Linear(3, 1)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    with profile() as prof:
        for xb, yb in loader:
            opt.zero_grad()
            ((model(xb) - yb) ** 2).mean().backward()
            opt.step()
    got = names(prof)
    assert got.count("Optimizer.step#SGD.step") == 2
    fetches = [n for n in got if n.startswith("enumerate(DataLoader)#") and n.endswith(".__next__")]
    assert len(fetches) >= 2


def test_cuda_activity_accepted_and_errors():
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        ember.ones(2) + 1
    assert "aten::add" in names(prof)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:  # no device timing here
        ember.ones(2) + 1
    if not ember.cuda.is_available():
        assert len(prof.events()) == 0
    with pytest.raises(RuntimeError, match="already running"):
        with profile():
            with profile():
                pass
    p = profile()
    with pytest.raises(RuntimeError, match="no trace"):
        p.key_averages()
    with pytest.raises(TypeError):
        profile(activities=["CPU"])
    with pytest.raises(TypeError):
        record_function(3)


def test_names_match_torch():
    torch = pytest.importorskip("torch")
    from torch.profiler import profile as tprofile

    def run(lib):
        x = lib.ones(3, 4)
        return (x * 2 + 1).sum()

    with profile() as prof:
        run(ember)
    with tprofile() as tprof:
        run(torch)
    ours = {e.name for e in prof.events()}
    theirs = {e.name for e in tprof.events()}
    assert {"aten::ones", "aten::mul", "aten::add", "aten::sum"} <= ours & theirs


def test_device_kernels_in_table_and_trace(tmp_path):
    # The Python side of device activity (a backend's DeviceActivity, autograd/profiler.h):
    # kernels attach to the op that launched them, get CUDA columns and their own process.
    from ember.profiler import _build_events

    raw = {
        "start_ns": 1_000_000, "stop_ns": 1_050_000, "start_wall_us": 1_700_000_000_000_000,
        "threads": [(7, "main")],
        "events": [(0, "aten::mm", 0, 7, 1_001_000, 1_011_000, -1, -1, 0, [[2, 2], [2, 2]],
                    ["float32", "float32"], 0, 0, None)],
        "memory": [],
        "device_events": [("gemm_kernel", "cuda", 0, 5, 1_004_000, 1_009_000, 0)],
    }
    ev = _build_events(raw, profile_memory=False, with_device=True)
    (mm,) = [e for e in ev if e.device_type == "cpu"]
    assert mm.time_range.elapsed_us() == pytest.approx(10.0)
    assert mm.device_time_total == pytest.approx(5.0)
    (k,) = [e for e in ev if e.device_type == "cuda"]  # the kernel's own row, as torch's
    assert k.name == "gemm_kernel" and k.self_cuda_time_total == pytest.approx(5.0)
    assert k.cpu_time_total == 0.0
    table = ev.key_averages().table(sort_by="self_cuda_time_total")
    assert "Self CUDA" in table and "Self CUDA time total: 5.000us" in table
    path = tmp_path / "t.json"
    ev.export_chrome_trace(str(path))
    evs = json.loads(path.read_text())["traceEvents"]
    (kernel,) = [e for e in evs if e.get("cat") == "kernel"]
    assert kernel["pid"] == 0 and kernel["tid"] == 5 and kernel["dur"] == pytest.approx(5.0)
    assert any(e["ph"] == "M" and e["pid"] == 0 and e["name"] == "process_name" for e in evs)


def test_forked_child_does_not_profile():
    import multiprocessing as mp

    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork on this platform")
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child(q):
        q.put((ember.profiler.is_profiler_enabled(), float((ember.ones(3) + 1).sum())))

    with profile() as prof:
        p = ctx.Process(target=child, args=(q,))
        p.start()
        got = q.get(timeout=60)
        p.join(timeout=60)
        ember.ones(1) + 1
    assert got == (False, 6.0) and p.exitcode == 0
    assert "aten::add" in names(prof)


def test_profiler_and_op_observer_together():
    # Both hooks sit behind the same check of each op: each sees what it should.
    seen = []
    x = ember.randn(4, 6)
    ember._C._set_op_observer(lambda op, ins, outs: seen.append(op))
    try:
        with profile() as prof:
            ember.nn.functional.layer_norm(x, (6,))
            (x + 1).sum()
    finally:
        ember._C._set_op_observer(None)
    assert seen == ["layer_norm", "add", "sum"]  # the observer: outermost ops only
    assert [(e.name, e.cpu_parent.name if e.cpu_parent else None) for e in prof.events()] == [
        ("aten::layer_norm", None), ("aten::native_layer_norm", "aten::layer_norm"),
        ("aten::add", None), ("aten::sum", None)]
