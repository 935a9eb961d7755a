"""The caching allocator: the process-wide CPU allocator and a CachingAllocator over a fake
raw allocator (ember._C._TestCachingAllocator) that counts calls and fails past a capacity."""

import gc
import os
import subprocess
import sys

import ember
import pytest

KiB, MiB = 1024, 1 << 20
STATS_KEYS = {
    "allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
    "reserved_bytes.all.peak", "requested_bytes.all.current", "active.all.current",
    "segment.all.current", "num_alloc", "num_free", "num_raw_alloc", "num_raw_free",
    "num_alloc_retries", "num_ooms", "num_splits", "num_merges", "num_cache_hits",
}


def fake(capacity=1 << 40):
    return ember._C._TestCachingAllocator(capacity)


def segments(a):
    return sorted(a.snapshot(), key=lambda s: s["address"])


def layout(seg):
    return [(b["size"], b["state"] == "active_allocated") for b in seg["blocks"]]


# ---- the fake-backed allocator ---------------------------------------------------------------

def test_rounding_to_512():
    a = fake()
    a.malloc(1)
    assert a.stats()["allocated_bytes.all.current"] == 512
    a.malloc(513)
    assert a.stats()["allocated_bytes.all.current"] == 512 + 1024
    a.malloc(1024)
    assert a.stats()["allocated_bytes.all.current"] == 512 + 1024 + 1024
    assert a.stats()["requested_bytes.all.current"] == 1 + 513 + 1024
    h, addr = a.malloc(0)
    assert addr == 0 and a.stats()["num_alloc"] == 3  # zero bytes: no block at all
    a.free(h)


def test_tiny_pool():
    a = ember._C._TestCachingAllocator(1 << 40, round=64, tiny=8)
    h1, p1 = a.malloc(4)  # -> 8 bytes, from a 64 KiB tiny segment
    h2, p2 = a.malloc(12)  # -> 16
    assert a.stats()["allocated_bytes.all.current"] == 8 + 16
    assert a.stats()["requested_bytes.all.current"] == 4 + 12
    assert p2 == p1 + 8 and a.raw_in_use == 64 * KiB
    _, p3 = a.malloc(60)  # -> 64: an ordinary small block, in its own 2 MiB segment
    _, p4 = a.malloc(100)  # -> 128
    assert a.raw_calls == 2 and a.raw_in_use == 64 * KiB + 2 * MiB
    assert p4 == p3 + 64
    tiny, small = sorted(a.snapshot(), key=lambda s: s["total_size"])
    assert tiny["segment_type"] == "small" and tiny["total_size"] == 64 * KiB
    assert layout(tiny) == [(8, True), (16, True), (64 * KiB - 24, False)]
    a.free(h1)
    a.free(h2)  # merges back into one free block
    assert layout(segments(a)[0]) == [(64 * KiB, False)]
    _, p5 = a.malloc(1)
    assert p5 == p1 and a.raw_calls == 2  # served from the cache


def test_rounding_must_be_powers_of_two():
    with pytest.raises(RuntimeError, match="power of two"):
        ember._C._TestCachingAllocator(1 << 40, round=100)
    with pytest.raises(RuntimeError, match="tiny"):
        ember._C._TestCachingAllocator(1 << 40, round=64, tiny=64)


def test_small_pool_segments_and_splitting():
    a = fake()
    h1, p1 = a.malloc(1000)
    assert a.raw_calls == 1 and a.raw_in_use == 2 * MiB
    h2, p2 = a.malloc(3000)
    assert a.raw_calls == 1  # carved out of the same 2 MiB segment
    assert p2 == p1 + 1024
    (seg,) = a.snapshot()
    assert seg["segment_type"] == "small" and seg["total_size"] == 2 * MiB
    assert layout(seg) == [(1024, True), (3072, True), (2 * MiB - 4096, False)]
    assert seg["blocks"][0]["requested_size"] == 1000
    assert a.stats()["num_splits"] == 2
    # The largest small request (1 MiB) still comes from the small pool.
    a.malloc(MiB)
    assert a.raw_calls == 1
    a.malloc(MiB)
    assert a.raw_calls == 2  # the first segment has < 1 MiB left


def test_large_pool_segment_sizes():
    a = fake()
    a.malloc(MiB + 1)  # 1 MiB < size < 10 MiB: a 20 MiB segment
    assert a.raw_in_use == 20 * MiB
    (seg,) = a.snapshot()
    assert seg["segment_type"] == "large"
    assert layout(seg) == [(MiB + 512, True), (19 * MiB - 512, False)]
    a.malloc(5 * MiB)  # fits in the remainder
    assert a.raw_calls == 1
    b = fake()
    b.malloc(12 * MiB)  # >= 10 MiB: its own segment rounded to 2 MiB
    assert b.raw_in_use == 12 * MiB
    b.malloc(11 * MiB + 1)
    assert b.raw_in_use == 24 * MiB
    b.malloc(15 * MiB)  # a 16 MiB segment; the 1 MiB left over is too small to split off
    assert b.raw_in_use == 40 * MiB
    assert b.stats()["allocated_bytes.all.current"] == 40 * MiB
    assert [len(s["blocks"]) for s in b.snapshot()] == [1, 1, 1]


def test_reuse_of_freed_block():
    a = fake()
    h, p = a.malloc(4096)
    a.free(h)
    assert a.stats()["allocated_bytes.all.current"] == 0
    assert a.stats()["reserved_bytes.all.current"] == 2 * MiB  # cached, not returned
    hits = a.stats()["num_cache_hits"]
    h2, p2 = a.malloc(4096)
    assert p2 == p and a.raw_calls == 1 and a.raw_frees == 0
    assert a.stats()["num_cache_hits"] == hits + 1
    with pytest.raises(IndexError, match="bad handle"):
        a.free(h)  # already freed
    with pytest.raises(IndexError):
        a.free(1000)


def test_cache_is_kept_unless_bounded():
    # One tensor at a time over 1 KiB .. 64 MiB (the GPU alloc-free benchmark): after the first
    # round every request is a cache hit, as with PyTorch's CUDA allocator. With bound_cache (the
    # CPU allocator) whole free large segments go back while the cache outweighs the live bytes.
    sizes = [KiB << i for i in range(17)]
    for bound, frees in ((False, 0), (True, None)):
        a = ember._C._TestCachingAllocator(1 << 40, bound_cache=bound)
        for n in sizes:
            a.free(a.malloc(n)[0])
        calls = a.raw_calls
        for _ in range(3):
            for n in sizes:
                a.free(a.malloc(n)[0])
        if frees is None:
            assert a.raw_frees > 0 and a.raw_calls > calls
        else:
            assert a.raw_calls == calls and a.raw_frees == frees


def test_best_fit():
    a = fake()
    small, ps = a.malloc(4096)
    a.malloc(512)  # separators keep the free blocks from merging
    big, pb = a.malloc(8192)
    a.malloc(512)
    a.free(big)
    a.free(small)
    # 4000 -> 4096: the exact-size hole, not the 8 KiB one or the segment's tail
    _, p = a.malloc(4000)
    assert p == ps
    # 6000 -> 6144: the 8 KiB hole is the smallest that fits; it is split
    _, p = a.malloc(6000)
    assert p == pb
    (seg,) = a.snapshot()
    assert layout(seg)[:5] == [(4096, True), (512, True), (6144, True), (2048, False), (512, True)]
    assert a.raw_calls == 1


def test_merging_free_neighbours():
    a = fake()
    h1, _ = a.malloc(1024)
    h2, _ = a.malloc(2048)
    h3, _ = a.malloc(4096)
    a.free(h1)
    a.free(h3)  # merges with the free tail
    (seg,) = a.snapshot()
    assert layout(seg) == [(1024, False), (2048, True), (2 * MiB - 3072, False)]
    merges = a.stats()["num_merges"]
    a.free(h2)  # merges both ways: one free block spans the segment again
    (seg,) = a.snapshot()
    assert layout(seg) == [(2 * MiB, False)]
    assert a.stats()["num_merges"] == merges + 2
    assert a.stats()["active.all.current"] == 0


def test_streams_keep_separate_pools():
    a = fake()
    h, p = a.malloc(1000, stream=0)
    a.free(h)
    _, p1 = a.malloc(1000, stream=1)
    assert a.raw_calls == 2 and p1 != p  # stream 0's cached block is not handed to stream 1
    _, p0 = a.malloc(1000, stream=0)
    assert p0 == p and a.raw_calls == 2
    assert sorted(s["stream"] for s in a.snapshot()) == [0, 1]


def test_empty_cache_releases_only_free_segments():
    a = fake()
    h1, _ = a.malloc(1000)  # small segment, kept busy
    h2, _ = a.malloc(3 * MiB)  # large segment, freed
    h3, _ = a.malloc(18 * MiB)  # another large segment (no fit in the 17 MiB left), freed
    a.malloc(100)  # lands in the busy small segment
    a.free(h2)
    a.free(h3)
    assert a.raw_frees == 0 and len(a.snapshot()) == 3
    a.empty_cache()
    assert a.raw_frees == 2
    assert a.raw_in_use == 2 * MiB
    (seg,) = a.snapshot()
    assert seg["segment_type"] == "small"
    assert a.stats()["reserved_bytes.all.current"] == 2 * MiB
    assert a.stats()["segment.all.current"] == 1
    a.free(h1)
    a.empty_cache()
    assert a.raw_frees == 2  # the 100-byte block still pins the small segment


def test_retry_after_freeing_cache_then_oom():
    a = fake(capacity=21 * MiB)
    h, _ = a.malloc(1000)
    a.free(h)  # 2 MiB cached
    big, _ = a.malloc(3 * MiB)  # needs 20 MiB: fails once, frees the cache, succeeds
    assert a.raw_failures == 1 and a.raw_frees == 1
    st = a.stats()
    assert st["num_alloc_retries"] == 1 and st["num_ooms"] == 0
    with pytest.raises(ember.OutOfMemoryError, match=r"tried to allocate 25165824 bytes") as ei:
        a.malloc(24 * MiB)
    assert isinstance(ei.value, RuntimeError)
    assert "out of memory" in str(ei.value) and "reserved" in str(ei.value)
    assert a.stats()["num_ooms"] == 1 and a.stats()["num_alloc_retries"] == 2
    # The allocator is still usable afterwards.
    _, p = a.malloc(2 * MiB)  # fits in big's segment: no raw call needed
    assert p != 0
    a.free(big)


def test_oom_error_type():
    assert issubclass(ember.OutOfMemoryError, RuntimeError)
    a = fake(capacity=MiB)
    with pytest.raises(RuntimeError, match="out of memory"):
        a.malloc(10)


def test_caching_disabled():
    a = fake()
    a.set_caching(False)
    h1, _ = a.malloc(1000)
    assert a.raw_in_use == 1024  # exactly the rounded size: no 2 MiB segment
    h2, _ = a.malloc(1000)
    assert a.raw_calls == 2
    a.free(h1)
    assert a.raw_frees == 1 and a.raw_in_use == 1024
    a.free(h2)
    assert a.raw_frees == 2 and a.raw_in_use == 0 and a.snapshot() == []
    a.set_caching(True)
    h, _ = a.malloc(1000)
    a.free(h)
    assert a.raw_frees == 2 and a.raw_in_use == 2 * MiB


def test_disabling_caching_releases_free_segments():
    a = fake()
    h, _ = a.malloc(1000)
    a.free(h)
    assert a.raw_in_use == 2 * MiB
    a.set_caching(False)
    assert a.raw_in_use == 0 and a.raw_frees == 1


def test_peak_and_counters():
    a = fake()
    h1, _ = a.malloc(MiB)
    h2, _ = a.malloc(MiB)
    a.free(h1)
    st = a.stats()
    assert set(st) == STATS_KEYS
    assert st["allocated_bytes.all.peak"] == 2 * MiB
    assert st["allocated_bytes.all.current"] == MiB
    assert st["num_alloc"] == 2 and st["num_free"] == 1
    assert st["num_raw_alloc"] == a.raw_calls
    assert st["reserved_bytes.all.peak"] >= st["reserved_bytes.all.current"]
    a.free(h2)


# ---- the real CPU allocator -------------------------------------------------------------------

def test_cpu_memory_accounting():
    gc.collect()
    base = ember.memory_allocated()
    x = ember.empty(1000)  # 4000 bytes -> 4032 (CPU blocks are multiples of 64 bytes)
    assert ember.memory_allocated() == base + 4032
    assert ember.memory_reserved() >= ember.memory_allocated()
    y = ember.empty(250, dtype=ember.float64)  # 2000 -> 2048
    assert ember.memory_allocated() == base + 4032 + 2048
    s = ember.tensor(1.5)  # a float32 scalar: 4 bytes -> 8 (tiny pool)
    assert ember.memory_allocated() == base + 4032 + 2048 + 8
    del x, y, s
    assert ember.memory_allocated() == base


def test_cpu_block_alignment():
    # Tiny blocks come from their own segments: every other block stays 64-byte aligned.
    scalars = [ember.tensor(float(i)) for i in range(5)]
    tensors = [ember.empty(n) for n in (17, 100, 1000, 300000)]
    for t in scalars:
        assert t.data_ptr() % 8 == 0
    for t in tensors:
        assert t.data_ptr() % 64 == 0
    del scalars, tensors


def test_cpu_views_share_storage():
    base = ember.memory_allocated()
    x = ember.zeros(100, 100)
    after = ember.memory_allocated()
    v = x[10:20]
    t = x[:, ::2]
    assert ember.memory_allocated() == after
    del x
    assert ember.memory_allocated() == after  # the views keep the storage alive
    del v, t
    assert ember.memory_allocated() == base


def test_cpu_peak_stats():
    ember.reset_peak_memory_stats()
    base = ember.memory_allocated()
    assert ember.max_memory_allocated() == base
    x = ember.empty(4 * MiB, dtype=ember.uint8)
    del x
    assert ember.max_memory_allocated() >= base + 4 * MiB
    assert ember.memory_allocated() == base
    ember.reset_peak_memory_stats()
    assert ember.max_memory_allocated() == base
    assert ember.max_memory_reserved() == ember.memory_reserved()


def test_cpu_memory_stats_and_snapshot():
    x = ember.ones(3000)
    st = ember.memory_stats()
    assert set(st) == STATS_KEYS
    assert st["allocated_bytes.all.current"] == ember.memory_allocated()
    assert st["reserved_bytes.all.current"] == ember.memory_reserved()
    snap = ember.memory_snapshot()
    assert sum(s["total_size"] for s in snap) == ember.memory_reserved()
    for seg in snap:
        assert set(seg) == {"address", "total_size", "stream", "segment_type", "blocks"}
        assert seg["segment_type"] in ("small", "large")
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        for b in seg["blocks"]:
            assert set(b) == {"address", "size", "requested_size", "state"}
            assert b["state"] in ("active_allocated", "inactive")
    active = sum(b["size"] for s in snap for b in s["blocks"] if b["state"] == "active_allocated")
    assert active == ember.memory_allocated()
    ptr = x.data_ptr()
    assert any(b["address"] == ptr and b["requested_size"] == 12000
               for s in snap for b in s["blocks"])
    del x


def test_cpu_empty_cache():
    x = ember.empty(16 * MiB, dtype=ember.uint8)  # its own large segment
    del x
    frees = ember.memory_stats()["num_raw_free"]
    ember.empty_cache()
    # The freed segment went back to the system. (Totals are not compared: threads left by
    # earlier tests in this process may allocate in between.)
    assert ember.memory_stats()["num_raw_free"] >= frees + 1
    for seg in ember.memory_snapshot():  # everything left holds a live block
        assert any(b["state"] == "active_allocated" for b in seg["blocks"])


def test_cpu_caching_toggle():
    assert ember.allocator_caching() in (True, False)
    was = ember.allocator_caching()
    try:
        ember.set_allocator_caching(False)
        assert ember.allocator_caching() is False
        base_alloc, base_res = ember.memory_allocated(), ember.memory_reserved()
        raw_frees = ember.memory_stats()["num_raw_free"]
        x = ember.empty(10000)  # 40000 bytes (a multiple of 64), a segment of exactly that size
        assert ember.memory_allocated() == base_alloc + 40000
        assert ember.memory_reserved() == base_res + 40000
        del x  # the last reference: freed to the system at once
        assert ember.memory_allocated() == base_alloc
        assert ember.memory_reserved() == base_res
        assert ember.memory_stats()["num_raw_free"] == raw_frees + 1
        ember.set_allocator_caching(True)
        assert ember.allocator_caching() is True
        y = ember.empty(10000)
        del y
        assert ember.memory_allocated() == base_alloc
    finally:
        ember.set_allocator_caching(was)


@pytest.mark.parametrize("value,expected", [("0", False), ("false", False), ("1", True)])
def test_env_var_disables_caching(value, expected):
    env = dict(os.environ, EMBER_CPU_ALLOCATOR_CACHING=value)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = ("import ember; x = ember.ones(10); r = ember.memory_reserved(); "
            "print(ember.allocator_caching(), r == ember.memory_allocated())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    caching, exact = out.stdout.split()
    assert caching == str(expected)
    if not expected:
        assert exact == "True"  # no cached slack when every block is its own segment
