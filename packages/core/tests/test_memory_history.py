"""ember.memory._record_memory_history / _snapshot / _dump_snapshot: the CPU caching allocator's
history in the pickled format pytorch.org/memory_viz reads."""

import pickle

import ember
import ember.memory as mm
import pytest

SEGMENT_KEYS = {"device", "address", "total_size", "allocated_size", "active_size", "stream",
                "segment_type", "blocks"}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
TRACE_KEYS = {"action", "addr", "size", "stream", "time_us", "frames"}


@pytest.fixture(autouse=True)
def history_off():
    yield
    mm._record_memory_history(enabled=None, clear_history=True)


def events_at(trace, addr):
    return [e["action"] for e in trace if e["addr"] == addr]


def test_round_trip(tmp_path):
    mm._record_memory_history(stacks="python", clear_history=True)
    x = ember.ones(5000)  # 20000 bytes, a block of the small pool
    addr = x.data_ptr()
    keep = ember.zeros(300)
    del x
    path = tmp_path / "snap.pickle"
    mm._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snap = pickle.load(f)
    assert set(snap) >= {"segments", "device_traces"}
    assert snap["segments"] and all(SEGMENT_KEYS <= set(s) for s in snap["segments"])
    for s in snap["segments"]:
        assert s["segment_type"] in ("small", "large")
        assert sum(b["size"] for b in s["blocks"]) == s["total_size"]
        assert s["allocated_size"] == sum(b["size"] for b in s["blocks"]
                                          if b["state"] == "active_allocated")
        for b in s["blocks"]:
            assert BLOCK_KEYS <= set(b)
            assert b["state"] in ("active_allocated", "active_pending_free", "inactive")
    trace = snap["device_traces"][0]
    assert trace and all(TRACE_KEYS <= set(e) for e in trace)
    times = [e["time_us"] for e in trace]
    assert times == sorted(times)
    # the freed block: alloc, then free_requested, then free_completed, in that order
    assert events_at(trace, addr)[-3:] == ["alloc", "free_requested", "free_completed"]
    alloc = [e for e in trace if e["addr"] == addr and e["action"] == "alloc"][-1]
    assert alloc["size"] >= 20000
    assert any(fr["filename"].endswith("test_memory_history.py") and fr["name"] == "test_round_trip"
               for fr in alloc["frames"])
    # the live block is in a segment, with the stack that allocated it
    live = [b for s in snap["segments"] for b in s["blocks"] if b["address"] == keep.data_ptr()]
    assert len(live) == 1 and live[0]["state"] == "active_allocated"
    assert any(fr["name"] == "test_round_trip" for fr in live[0]["frames"])


def test_segments_without_caching():
    was = ember._C.allocator_caching()
    ember._C.set_allocator_caching(False)
    try:
        mm._record_memory_history(context=None, clear_history=True)
        x = ember.empty(3 << 20, dtype=ember.uint8)
        addr = x.data_ptr()
        del x
        snap = mm._snapshot()
    finally:
        ember._C.set_allocator_caching(was)
    trace = snap["device_traces"][0]
    assert events_at(trace, addr)[-5:] == ["segment_alloc", "alloc", "free_requested",
                                          "free_completed", "segment_free"]
    assert all(e["frames"] == [] for e in trace)  # context=None: no stacks


def test_oom_recorded():
    mm._record_memory_history(context=None, clear_history=True)
    with pytest.raises(ember.cuda.OutOfMemoryError):
        ember.empty(1 << 50, dtype=ember.uint8)
    trace = mm._snapshot()["device_traces"][0]
    assert trace[-1]["action"] == "oom" and trace[-1]["size"] == 1 << 50


def test_max_entries_stop_and_state():
    mm._record_memory_history(context=None, max_entries=4, clear_history=True)
    for _ in range(10):
        ember.ones(10)
    trace = mm._snapshot()["device_traces"][0]
    assert len(trace) == 4
    mm._record_memory_history(enabled=None)
    ember.ones(10)
    assert mm._snapshot()["device_traces"][0] == trace  # stopped: kept, nothing added
    mm._record_memory_history(enabled="state", context="state", stacks="python",
                              clear_history=True)
    y = ember.ones(64)
    snap = mm._snapshot()
    assert snap["device_traces"][0] == []
    (blk,) = [b for s in snap["segments"] for b in s["blocks"] if b["address"] == y.data_ptr()]
    assert blk["frames"]


def test_memory_over_time_and_plot(tmp_path):
    mm._record_memory_history(context=None, clear_history=True)
    before = ember.memory_allocated()
    xs = [ember.ones(1000) for _ in range(3)]
    del xs[0]
    snap = mm._snapshot()
    t, allocated, reserved = mm.memory_over_time(snap)
    assert len(t) == len(allocated) == len(reserved) == len(snap["device_traces"][0])
    assert allocated[-1] == ember.memory_allocated()
    assert max(allocated) >= before + 3 * 4000
    assert allocated[0] >= before
    assert all(r >= a for a, r in zip(allocated, reserved))
    pytest.importorskip("matplotlib")
    out = mm.plot_memory_over_time(snap, tmp_path / "mem.png")
    assert (tmp_path / "mem.png").stat().st_size > 0 and out.endswith("mem.png")


def test_bad_arguments_and_cuda():
    with pytest.raises(ValueError, match="enabled"):
        mm._record_memory_history(enabled="some")
    with pytest.raises(ValueError, match="context"):
        mm._record_memory_history(context="x")
    with pytest.raises(ValueError, match="stacks"):
        mm._record_memory_history(stacks="cpp")
    with pytest.raises(ValueError, match="max_entries"):
        mm._record_memory_history(max_entries=-1)
    with pytest.raises(ValueError, match="ember.cuda.memory"):
        mm._snapshot("cuda")
    import ember.cuda.memory as cm

    assert cm is ember.cuda.memory
    if not ember.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            cm._record_memory_history()
        with pytest.raises(RuntimeError, match="no CUDA device"):
            cm._snapshot()
    assert cm.memory_allocated is ember.cuda.memory_allocated


def test_cpp_frames_with_stacks_all():
    mm._record_memory_history(stacks="all", clear_history=True)
    x = ember.ones(50)
    trace = mm._snapshot()["device_traces"][0]
    (alloc,) = [e for e in trace if e["addr"] == x.data_ptr() and e["action"] == "alloc"]
    files = [fr["filename"] for fr in alloc["frames"]]
    assert any(f.endswith("test_memory_history.py") for f in files)  # Python frames first
    assert any("libember_engine" in f for f in files)  # then the C++ call stack
