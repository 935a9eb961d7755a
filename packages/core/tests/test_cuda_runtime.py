"""The CUDA runtime: streams, events, devices, the per-stream caching allocator (record_stream,
statistics, snapshots, OOM), pinned host memory and asynchronous copies, and backward on the
forward's stream. GPU tests skip without a device; the CPU-only tests check the clear errors.

Only allocation, host<->device copies and ember.cuda._sleep (a kernel that spins on the current
stream, to keep a stream busy) are used on the device, so the file needs no other CUDA kernel.
"""

from __future__ import annotations

import ember
import pytest

gpu = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")
cpu_only = pytest.mark.skipif(ember.cuda.is_available(), reason="a CUDA device is present")

MiB = 1 << 20
LONG = 1_000_000_000  # GPU clock cycles: ~0.5 s, far longer than any host step below


# ---- without a GPU ---------------------------------------------------------------------------


@cpu_only
def test_api_without_gpu_raises_clearly():
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == 0
    assert ember.cuda.is_initialized() is False
    for call in (
        lambda: ember.cuda.Stream(),
        lambda: ember.cuda.current_stream(),
        lambda: ember.cuda.default_stream(),
        lambda: ember.cuda.Event().record(),
        lambda: ember.cuda.memory_snapshot(),
        lambda: ember.cuda.memory_summary(),
        lambda: ember.cuda.get_device_properties(0),
        lambda: ember.cuda.mem_get_info(),
        lambda: ember.cuda.synchronize(),
        lambda: ember.cuda.init(),
        lambda: ember.ones(2).record_stream(None),
    ):
        with pytest.raises((RuntimeError, TypeError), match="no CUDA device available|Stream"):
            call()
    with pytest.raises(RuntimeError, match="pin_memory=True needs a CUDA device"):
        ember.zeros(2, pin_memory=True)
    with pytest.raises(RuntimeError, match="pin_memory=True needs a CUDA device"):
        ember.tensor([1.0], pin_memory=True)


@cpu_only
def test_pinning_without_gpu_is_a_no_op():
    t = ember.ones(3)
    assert t.is_pinned() is False
    assert t.pin_memory() is t
    # Context managers that need no device accept None / -1 everywhere.
    with ember.cuda.device(None), ember.cuda.device(-1), ember.cuda.stream(None):
        pass


@cpu_only
def test_dataloader_pin_memory_warns_without_gpu():
    from ember.data import DataLoader

    dl = DataLoader([ember.ones(2)] * 4, batch_size=2, pin_memory=True)
    with pytest.warns(UserWarning, match="no accelerator is found"):
        batches = list(dl)
    assert len(batches) == 2 and not batches[0].is_pinned()


def test_out_of_memory_error_is_a_runtime_error():
    assert issubclass(ember.cuda.OutOfMemoryError, RuntimeError)
    assert ember.cuda.OutOfMemoryError is ember.OutOfMemoryError


# ---- devices -----------------------------------------------------------------------------------


@gpu
def test_device_queries():
    ember.cuda.init()
    assert ember.cuda.is_initialized()
    n = ember.cuda.device_count()
    assert n >= 1
    assert 0 <= ember.cuda.current_device() < n
    p = ember.cuda.get_device_properties(0)
    assert isinstance(p.name, str) and p.name == ember.cuda.get_device_name(0)
    assert p.total_memory > 1 << 30 and p.multi_processor_count > 0
    assert ember.cuda.get_device_capability(0) == (p.major, p.minor) and p.major >= 7
    assert "total_memory" in repr(p)
    free, total = ember.cuda.mem_get_info()
    assert 0 < free <= total == p.total_memory
    with ember.cuda.device(0):
        assert ember.cuda.current_device() == 0
    with ember.cuda.device("cuda:0"), ember.cuda.device(ember.device("cuda", 0)):
        assert ember.cuda.current_device() == 0
    ember.cuda.set_device(0)
    ember.cuda.synchronize()
    ember.cuda.synchronize(0)
    with pytest.raises(AssertionError, match="Invalid device id"):
        ember.cuda.get_device_properties(n)


@gpu
@pytest.mark.skipif(ember.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_two_devices_allocate_and_switch():
    before0, before1 = ember.cuda.memory_allocated(0), ember.cuda.memory_allocated(1)
    x = ember.empty(MiB // 4, device="cuda:1")
    assert x.device == ember.device("cuda", 1)
    assert ember.cuda.memory_allocated(1) == before1 + MiB
    assert ember.cuda.memory_allocated(0) == before0
    with ember.cuda.device(1):
        assert ember.cuda.current_device() == 1
        y = ember.empty(4, device="cuda")
        assert y.device == ember.device("cuda", 1)
        s = ember.cuda.Stream()
        assert s.device == ember.device("cuda", 1)
    assert ember.cuda.current_device() == 0
    with ember.cuda.stream(s):  # a stream of another device makes that device current
        assert ember.cuda.current_device() == 1 and ember.cuda.current_stream() == s
    assert ember.cuda.current_device() == 0
    with ember.cuda.device_of(x):
        assert ember.cuda.current_device() == 1
    h = ember.arange(8, dtype=ember.float32)
    assert h.to("cuda:1").cpu().tolist() == h.tolist()
    del x, y


# ---- streams and events ---------------------------------------------------------------------------


@gpu
def test_stream_objects():
    default = ember.cuda.default_stream()
    assert default.cuda_stream == 0
    assert ember.cuda.current_stream() == default
    s = ember.cuda.Stream()
    assert s != default and s.cuda_stream != 0 and s.device == ember.device("cuda", 0)
    assert hash(s) == hash(ember.cuda.Stream._wrap(s.cuda_stream, 0))
    least, greatest = ember.cuda.Stream.priority_range()
    assert greatest <= least
    hi = ember.cuda.Stream(priority=greatest)
    assert hi.priority == greatest and s.priority == 0
    with ember.cuda.stream(s):
        assert ember.cuda.current_stream() == s
        with ember.cuda.stream(None):
            assert ember.cuda.current_stream() == s
        with ember.cuda.stream(hi):
            assert ember.cuda.current_stream() == hi
        assert ember.cuda.current_stream() == s
    assert ember.cuda.current_stream() == default
    ember.cuda.set_stream(s)
    assert ember.cuda.current_stream() == s
    ember.cuda.set_stream(default)
    assert ember.cuda.current_stream() == default
    ctx = ember.cuda.StreamContext(s)
    with ctx as entered:
        assert entered == s
    assert "cuda_stream" in repr(s)


@gpu
def test_stream_query_and_synchronize():
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        ember.cuda._sleep(LONG)
    assert s.query() is False  # still spinning
    s.synchronize()
    assert s.query() is True


@gpu
def test_event_timing_query_and_errors():
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    assert start.query() is True  # never recorded
    start.record()
    ember.cuda._sleep(LONG // 10)
    end.record()
    end.synchronize()
    assert end.query() is True
    ms = start.elapsed_time(end)
    assert ms > 0
    plain = ember.cuda.Event()
    plain.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        plain.elapsed_time(end)
    with pytest.raises(RuntimeError, match="must be recorded"):
        ember.cuda.Event(enable_timing=True).elapsed_time(end)
    e = ember.cuda.current_stream().record_event()
    assert isinstance(e, ember.cuda.Event)
    ember.cuda.synchronize()
    assert e.query() is True


def _ordering_case(wait):
    """A side stream copies `value` into a device tensor after a long spin; the default stream
    then copies the device tensor back after `wait(side)`. Returns what the default stream read."""
    n = 1 << 20
    dev = ember.zeros(n).to("cuda")
    ember.cuda.synchronize()
    src = ember.full((n,), 7.0).pin_memory()
    side = ember.cuda.Stream()
    with ember.cuda.stream(side):
        ember.cuda._sleep(LONG)
        dev.copy_(src, non_blocking=True)
    wait(side)
    out = dev.cpu()  # queued on the default stream, then waited for
    ember.cuda.synchronize()
    return out


@gpu
def test_wait_stream_orders_work():
    cur = ember.cuda.current_stream()
    out = _ordering_case(lambda side: cur.wait_stream(side))
    assert out[0].item() == 7.0 and out[-1].item() == 7.0


@gpu
def test_wait_event_orders_work():
    def wait(side):
        e = ember.cuda.Event()
        side.record_event(e)
        ember.cuda.current_stream().wait_event(e)

    out = _ordering_case(wait)
    assert out[0].item() == 7.0 and out[-1].item() == 7.0


@gpu
def test_event_wait_on_stream():
    def wait(side):
        e = side.record_event()
        e.wait()  # the current stream

    out = _ordering_case(wait)
    assert out[-1].item() == 7.0


# ---- the caching allocator -------------------------------------------------------------------------


@gpu
def test_allocation_uses_the_current_streams_pool():
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        x = ember.empty(1000, device="cuda")
    segs = [g for g in ember.cuda.memory_snapshot()
            if any(b["address"] == x.data_ptr() for b in g["blocks"])]
    assert len(segs) == 1 and segs[0]["stream"] == s.cuda_stream
    del x


@gpu
def test_record_stream_delays_reuse_until_the_stream_is_done():
    ember.cuda.synchronize()
    ember.cuda.empty_cache()
    n = 4 * MiB // 4  # 4 MiB: the large pool, a 20 MiB segment
    x = ember.empty(n, device="cuda")  # on the default stream
    ptr = x.data_ptr()
    side = ember.cuda.Stream()
    with ember.cuda.stream(side):
        ember.cuda._sleep(LONG)  # x "is used" by work queued here
    x.record_stream(side)
    x.record_stream(side)  # recording twice is harmless
    del x
    assert ember.cuda.memory_stats()["pending_event_blocks"] == 1
    y = ember.empty(n, device="cuda")
    assert y.data_ptr() != ptr  # side is still spinning: x's block is held
    side.synchronize()
    del y
    z = ember.empty(n, device="cuda")  # the event completed: the block is back (merged)
    assert z.data_ptr() == ptr
    assert ember.cuda.memory_stats()["pending_event_blocks"] == 0
    del z


@gpu
def test_record_stream_freed_block_counts_as_active_not_allocated():
    ember.cuda.synchronize()
    base = ember.cuda.memory_stats()
    x = ember.empty(MiB // 4, device="cuda")
    side = ember.cuda.Stream()
    with ember.cuda.stream(side):
        ember.cuda._sleep(LONG)
    x.record_stream(side)
    del x
    st = ember.cuda.memory_stats()
    assert st["allocated_bytes.all.current"] == base["allocated_bytes.all.current"]
    assert st["active_bytes.all.current"] == base["active_bytes.all.current"] + MiB
    states = [b["state"] for g in ember.cuda.memory_snapshot() for b in g["blocks"]]
    assert "active_pending_free" in states
    ember.cuda.empty_cache()  # waits for the pending events first
    st = ember.cuda.memory_stats()
    assert st["active_bytes.all.current"] == base["active_bytes.all.current"]
    assert st["pending_event_blocks"] == 0


@gpu
def test_record_stream_rejects_cpu_tensors_and_non_streams():
    with pytest.raises(RuntimeError, match="expected a CUDA tensor"):
        ember.ones(2).record_stream(ember.cuda.current_stream())
    with pytest.raises(TypeError, match="expected an ember.cuda.Stream"):
        ember.empty(2, device="cuda").record_stream(0)


@gpu
def test_memory_stats_arithmetic():
    ember.cuda.synchronize()
    ember.cuda.empty_cache()
    a0, r0 = ember.cuda.memory_allocated(), ember.cuda.memory_reserved()
    x = ember.empty(MiB // 4, device="cuda")  # exactly 1 MiB: a multiple of 512
    assert ember.cuda.memory_allocated() == a0 + MiB
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    y = ember.empty(100, device="cuda")  # 400 bytes round to 512
    assert ember.cuda.memory_allocated() == a0 + MiB + 512
    assert ember.cuda.max_memory_allocated() >= a0 + MiB + 512
    r1 = ember.cuda.memory_reserved()
    del x, y
    assert ember.cuda.memory_allocated() == a0
    assert ember.cuda.memory_reserved() == r1  # cached, not returned
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_allocated() == a0
    assert ember.cuda.max_memory_reserved() == r1
    ember.cuda.empty_cache()
    assert ember.cuda.memory_reserved() == r0
    st = ember.cuda.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "reserved_bytes.all.peak",
                "active_bytes.all.current", "active.all.current", "allocation.all.current",
                "segment.all.current", "num_alloc_retries", "num_ooms", "num_device_alloc"):
        assert isinstance(st[key], int), key
    ember.cuda.reset_max_memory_allocated()
    assert ember.cuda.memory_stats(0) == ember.cuda.memory_stats(ember.device("cuda", 0))


@gpu
def test_memory_snapshot_and_summary():
    x = ember.empty(3000, device="cuda")
    y = ember.empty(5 * MiB // 4, device="cuda")
    snap = ember.cuda.memory_snapshot()
    assert snap
    for seg in snap:
        assert set(seg) >= {"device", "address", "total_size", "allocated_size", "active_size",
                            "stream", "segment_type", "blocks"}
        assert seg["segment_type"] in ("small", "large")
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        assert seg["blocks"][0]["address"] == seg["address"]
        for b in seg["blocks"]:
            assert b["state"] in ("active_allocated", "active_pending_free", "inactive")
    by_addr = {b["address"]: (g, b) for g in snap for b in g["blocks"]}
    gx, bx = by_addr[x.data_ptr()]
    gy, by = by_addr[y.data_ptr()]
    assert gx["segment_type"] == "small" and bx["size"] == 12288 // 512 * 512
    assert bx["state"] == "active_allocated" and bx["requested_size"] == 12000
    assert gy["segment_type"] == "large" and by["size"] == 5 * MiB
    text = ember.cuda.memory_summary()
    assert "Allocated memory" in text and "GPU reserved memory" in text
    assert "Allocated memory" in ember.cuda.memory_summary(abbreviated=True)
    del x, y


@gpu
def test_fragmentation_mixed_sizes_then_empty_cache():
    ember.cuda.synchronize()
    ember.cuda.empty_cache()
    a0, r0 = ember.cuda.memory_allocated(), ember.cuda.memory_reserved()
    seg0 = ember.cuda.memory_stats()["segment.all.current"]
    sizes = [512 * 1024, 3 * MiB, 700 * 1024, 12 * MiB, 1536 * 1024, 9 * MiB, 4096, 100]
    live = [ember.empty(s // 4 or 1, device="cuda") for s in sizes * 4]
    total = ember.cuda.memory_allocated() - a0
    assert total >= sum(sizes) * 4
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    del live[::2]  # holes between live blocks
    st = ember.cuda.memory_stats()
    assert st["reserved_bytes.all.current"] >= st["allocated_bytes.all.current"]
    # Reuse: the same sizes again fit into the holes (cache hits, no new segments needed).
    hits = st["num_cache_hits"]
    again = [ember.empty(s // 4 or 1, device="cuda") for s in sizes * 2]
    assert ember.cuda.memory_stats()["num_cache_hits"] > hits
    del again, live
    assert ember.cuda.memory_allocated() == a0
    ember.cuda.empty_cache()
    assert ember.cuda.memory_reserved() == r0
    assert ember.cuda.memory_stats()["segment.all.current"] == seg0


@gpu
def test_out_of_memory_message_and_recovery():
    ooms = ember.cuda.memory_stats()["num_ooms"]
    keep = ember.empty(MiB // 4, device="cuda")
    with pytest.raises(ember.OutOfMemoryError) as ei:
        ember.empty(1 << 48, device="cuda")  # 1 PiB of float32
    msg = str(ei.value)
    assert "CUDA out of memory. Tried to allocate 1.00 PiB" in msg
    assert "GPU 0 has a total capacity of" in msg and "is free" in msg
    assert "allocated by ember" in msg and "reserved by ember but unallocated" in msg
    assert isinstance(ei.value, RuntimeError)
    st = ember.cuda.memory_stats()
    assert st["num_ooms"] == ooms + 1 and st["num_alloc_retries"] >= 1
    # The allocator still works afterwards, and the live tensor is intact.
    y = ember.arange(16, dtype=ember.float32).to("cuda")
    assert y.cpu().tolist() == list(range(16))
    del keep


# ---- pinned memory and copies -----------------------------------------------------------------


@gpu
def test_pin_memory_and_is_pinned():
    t = ember.arange(10, dtype=ember.float32)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu" and p.tolist() == t.tolist()
    assert p.pin_memory() is p
    assert p[2:5].is_pinned()  # a view shares the pinned storage
    assert not p.clone().is_pinned()
    nc = ember.arange(12, dtype=ember.float64).reshape(3, 4).t()
    pn = nc.pin_memory()
    assert pn.is_pinned() and pn.tolist() == nc.tolist() and pn.stride() == nc.stride()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        ember.empty(2, device="cuda").pin_memory()
    for f in (lambda: ember.zeros(3, pin_memory=True), lambda: ember.ones(3, pin_memory=True),
              lambda: ember.empty(3, pin_memory=True), lambda: ember.full((3,), 2.0,
                                                                            pin_memory=True),
              lambda: ember.rand(3, pin_memory=True), lambda: ember.randn(3, pin_memory=True),
              lambda: ember.tensor([1.0, 2.0, 3.0], pin_memory=True)):
        r = f()
        assert r.is_pinned() and r.shape == (3,)
    assert ember.ones(2, pin_memory=True, requires_grad=True).requires_grad
    assert ember.zeros(3, pin_memory=False).is_pinned() is False
    st = ember.cuda.host_memory_stats()
    assert st["allocated_bytes.all.current"] > 0


@gpu
def test_non_blocking_copies_are_correct_after_synchronize():
    n = 1 << 22
    src = ember.arange(n, dtype=ember.float32).pin_memory()
    d = src.to("cuda", non_blocking=True)
    back = ember.empty(n, pin_memory=True)
    back.copy_(d, non_blocking=True)
    ember.cuda.synchronize()
    assert back[0].item() == 0.0 and back[-1].item() == float(n - 1)
    assert back.tolist()[:5] == [0.0, 1.0, 2.0, 3.0, 4.0]
    # Pageable source: non_blocking is accepted and correct too.
    d2 = ember.arange(100, dtype=ember.float64).to("cuda", non_blocking=True)
    assert d2.cpu().tolist() == [float(i) for i in range(100)]


@gpu
def test_non_blocking_copy_from_pinned_returns_before_the_copy_runs():
    src = ember.ones(1 << 20).pin_memory()
    d = ember.empty(1 << 20, device="cuda")  # allocated first: cudaMalloc may synchronize
    ember.cuda.synchronize()
    ember.cuda._sleep(LONG)  # the current stream is busy: the copy queues behind it
    d.copy_(src, non_blocking=True)
    assert ember.cuda.current_stream().query() is False  # returned without waiting
    ember.cuda.synchronize()
    assert d.cpu()[123].item() == 1.0


@gpu
def test_pinned_block_reused_only_after_the_copy_events():
    from ember import _C_cuda

    ember.cuda.synchronize()
    _C_cuda._host_empty_cache()  # no cached pinned segments: p starts a fresh one
    n = 4 * MiB // 4
    p = ember.ones(n).pin_memory()
    ptr = p.data_ptr()
    side = ember.cuda.Stream()
    with ember.cuda.stream(side):
        # A cached device block for d on this stream first: a cudaMalloc inside to() may wait for
        # the device, and so for the spin, and then the copy would be done before p is freed.
        warm = ember.empty(n, device="cuda")
        del warm
        ember.cuda.synchronize()
        ember.cuda._sleep(LONG)
        d = p.to("cuda", non_blocking=True)  # reads p after the spin
    del p  # the copy has not run yet
    assert ember.cuda.host_memory_stats()["pending_event_blocks"] == 1
    q = ember.empty(n, pin_memory=True)
    assert q.data_ptr() != ptr  # not handed out while the copy may still read it
    side.synchronize()
    del q
    r = ember.empty(n, pin_memory=True)
    assert r.data_ptr() == ptr  # the event completed: reused
    assert ember.cuda.host_memory_stats()["pending_event_blocks"] == 0
    assert d.cpu()[0].item() == 1.0


@gpu
def test_dataloader_pin_memory_gives_page_locked_batches():
    from ember.data import DataLoader

    data = [(ember.full((3, 4), float(i)), i) for i in range(8)]
    for workers in (0, 2):
        dl = DataLoader(data, batch_size=4, num_workers=workers, pin_memory=True)
        for x, y in dl:
            assert x.is_pinned() and y.is_pinned()
            assert x.to("cuda", non_blocking=True).cpu().tolist() == x.tolist()


# ---- autograd on streams -------------------------------------------------------------------------


@gpu
def test_backward_runs_on_the_forward_stream():
    side = ember.cuda.Stream()
    seen = []
    x = ember.ones(4, requires_grad=True)
    with ember.cuda.stream(side):
        y = x.to("cuda")  # its backward node records `side`
    y.register_hook(lambda g: seen.append(ember.cuda.current_stream()))
    z = y.cpu()
    z.sum().backward()
    assert seen == [side]
    assert ember.cuda.current_stream() == ember.cuda.default_stream()
    assert x.grad.tolist() == [1.0] * 4
