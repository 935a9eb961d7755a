"""CUDA tensors across processes (ember.multiprocessing, csrc/cuda/cuda_ipc.cpp).

The GPU tests (skipped without a device) pass CUDA tensors between two spawned processes on one
GPU: in-place writes seen by both sides, views and offsets, the producer's memory held until the
consumer lets go, the error when the producer has exited, no leak over many tensors, and the
error of a forked child that touches CUDA. The others check the reference-count files and the
error paths without a GPU (they need the CUDA extension, built with CUDA=1).
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time

import ember
import ember.multiprocessing as mp
import pytest
from ember import _C
from ember import multiprocessing_reductions as red

C = pytest.importorskip("ember._C_cuda", reason="ember built without CUDA (CUDA=1)")

TIMEOUT = 120  # seconds; generous: a loaded machine
needs_gpu = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")


def _names(pid: int) -> set[str]:
    prefix = _C._shm_prefix(pid)
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)}


def _spawn():  # noqa: ANN202 - a multiprocessing context
    return mp.get_context("spawn")


# ---- reference-count files and error paths (no GPU needed) ------------------------------------


def test_a_message_reference_is_released_once_and_then_collected():
    pending = C._ipc_pending()
    name, nbytes, slot = C._ipc_test_entry()
    assert name.lstrip("/") in _names(os.getpid())
    assert C._ipc_test_count(name, slot) == 1
    assert C._ipc_pending() == pending + 1
    assert C._ipc_collect() == 0  # the message's reference is out: nothing to free
    C._ipc_test_take(name, nbytes, slot, os.getpid())  # a consumer takes it and lets go
    assert C._ipc_test_count(name, slot) == 0
    assert C._ipc_collect() == 1
    assert C._ipc_pending() == pending
    with pytest.raises(RuntimeError, match="can be received only once"):
        C._ipc_test_take(name, nbytes, slot, os.getpid())
    # The freed slot is reused by the next send (same file, no new segment).
    name2, _, slot2 = C._ipc_test_entry()
    assert (name2, slot2) == (name, slot)
    C._ipc_test_take(name2, nbytes, slot2, os.getpid())
    assert C._ipc_collect() == 1


def test_slots_fill_a_file_then_a_new_one():
    entries = [C._ipc_test_entry() for _ in range(1025)]  # one file holds 1024 references
    files = {e[0] for e in entries}
    assert len(files) >= 2 and len({(e[0], e[2]) for e in entries}) == len(entries)
    for name, nbytes, slot in entries:
        C._ipc_test_take(name, nbytes, slot, os.getpid())
    assert C._ipc_collect() == len(entries)


def _take(name: str, nbytes: int, slot: int, sender: int, hold: bool) -> None:
    if hold:  # released by the exit hook, as a received CUDA tensor still alive at exit
        red._install_cuda_exit_hook()
    C._ipc_test_take(name, nbytes, slot, sender, hold)


@pytest.mark.parametrize("hold", [False, True], ids=["released", "held-until-exit"])
def test_a_consumer_process_releases_its_reference(hold):
    name, nbytes, slot = C._ipc_test_entry()
    p = _spawn().Process(target=_take, args=(name, nbytes, slot, os.getpid(), hold))
    p.start()
    p.join(TIMEOUT)
    assert p.exitcode == 0
    assert C._ipc_test_count(name, slot) == 0
    assert C._ipc_collect() >= 1


def _take_and_die(name: str, nbytes: int, slot: int, sender: int) -> None:
    C._ipc_test_take(name, nbytes, slot, sender, True)
    os.kill(os.getpid(), signal.SIGKILL)  # no exit hook: the reference is never given back


def test_the_references_of_a_killed_consumer_are_reclaimed():
    name, nbytes, slot = C._ipc_test_entry()
    p = _spawn().Process(target=_take_and_die, args=(name, nbytes, slot, os.getpid()))
    p.start()
    p.join(TIMEOUT)
    assert p.exitcode == -signal.SIGKILL
    assert C._ipc_test_count(name, slot) == 1  # still counted in the file...
    assert C._ipc_collect() >= 1  # ...but its consumer is gone: the entry is freed


def _produce_and_exit(q, held: bool) -> None:
    name, nbytes, slot = C._ipc_test_entry()
    red._install_cuda_exit_hook()  # what sending a CUDA tensor does
    if not held:
        C._ipc_test_take(name, nbytes, slot, os.getpid())
    q.put((name, nbytes, slot, os.getpid()))


@pytest.mark.parametrize("held", [False, True], ids=["all-released", "still-held"])
def test_dev_shm_is_clean_after_a_producer_exits(held):
    ctx = _spawn()
    q = ctx.SimpleQueue()
    p = ctx.Process(target=_produce_and_exit, args=(q, held))
    p.start()
    name, nbytes, slot, pid = q.get()
    p.join(TIMEOUT)
    assert p.exitcode == 0
    assert _names(pid) == set()  # its reference file went with it
    # A message from it that arrives now: the clear error, not a crash or a CUDA error.
    info = (0, b"\0" * 64, 4096, 0, 4096, b"", name, nbytes, slot, pid, pid)
    with pytest.raises(RuntimeError, match=rf"the process that shared this CUDA tensor \(pid {pid}\) "
                                           r"has exited; keep it alive until consumers"):
        red.rebuild_cuda_tensor(info, "float32", (1024,), (1,), 0, False)


def _produce_and_wait(q) -> None:
    q.put(C._ipc_test_entry() + (os.getpid(),))
    time.sleep(600)


def test_dev_shm_is_clean_after_sigkill_of_a_producer():
    ctx = _spawn()
    q = ctx.SimpleQueue()
    p = ctx.Process(target=_produce_and_wait, args=(q,))
    p.start()
    name, nbytes, slot, pid = q.get()
    assert name.lstrip("/") in _names(pid)
    os.kill(pid, signal.SIGKILL)
    p.join(TIMEOUT)
    assert p.exitcode == -signal.SIGKILL
    assert _names(pid) == set()  # removed by the parent when it saw the child die
    with pytest.raises(RuntimeError, match=rf"\(pid {pid}\) has exited"):
        C._ipc_test_take(name, nbytes, slot, pid)


def test_a_zombie_producer_counts_as_exited():
    assert C._ipc_producer_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + TIMEOUT
    while C._ipc_producer_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # exited but not reaped: a zombie
    assert not C._ipc_producer_alive(child.pid)
    assert child.poll() == 0  # reaped now
    assert not C._ipc_producer_alive(child.pid)


def test_a_failed_open_gives_the_reference_back():
    name, nbytes, slot = C._ipc_test_entry()
    pid = os.getpid()
    info = (0, b"\0" * 64, 4096, 0, 4096, b"", name, nbytes, slot, pid, pid)
    # No device here: a device error; on a GPU: an invalid handle (CUDA's error). Either way
    # the message's reference is released, so the producer frees its entry.
    with pytest.raises((RuntimeError, ValueError), match=r"cuda ipc|CUDA"):
        red.rebuild_cuda_tensor(info, "float32", (1024,), (1,), 0, False)
    assert C._ipc_test_count(name, slot) == 0
    assert C._ipc_collect() >= 1


def test_inconsistent_messages_are_refused_before_anything_is_opened():
    name, nbytes, slot = C._ipc_test_entry()
    pid = os.getpid()
    base = [0, b"\0" * 64, 4096, 0, 4096, b"", name, nbytes, slot, pid, pid]
    with pytest.raises(ValueError, match="reaches past the end of its storage of 4096 bytes"):
        red.rebuild_cuda_tensor(tuple(base), "float32", (1025,), (1,), 0, False)
    with pytest.raises(ValueError, match="does not fit its allocation"):
        red.rebuild_cuda_tensor(tuple(base[:3] + [1024] + base[4:]), "float32", (4,), (1,), 0,
                                False)
    with pytest.raises(ValueError, match="memory handle has 3 bytes, expected 64"):
        red.rebuild_cuda_tensor(tuple(base[:1] + [b"abc"] + base[2:]), "float32", (4,), (1,), 0,
                                False)
    assert C._ipc_test_count(name, slot) == 1  # none of them took the reference
    C._ipc_test_take(name, nbytes, slot, pid)
    assert C._ipc_collect() >= 1


def test_a_cpu_tensor_is_not_shared_by_cuda_ipc():
    with pytest.raises(RuntimeError, match="expected a CUDA tensor"):
        C._ipc_share(ember.ones(3))


# ---- on a GPU ---------------------------------------------------------------------------------


def _consumer_add_one(inbox, outbox) -> None:
    x, expected = inbox.get()
    outbox.put(("values", bool(ember.equal(x.cpu(), expected)), str(x.device), x.is_shared()))
    x.add_(1)  # in place, in the producer's memory
    ember.cuda.synchronize()
    outbox.put(("written", None, None, None))
    assert inbox.get() == "bye"


@needs_gpu
def test_a_cuda_tensor_round_trip_with_in_place_writes():
    ctx = _spawn()
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_consumer_add_one, args=(inbox, outbox))
    p.start()
    try:
        x = ember.arange(1000, dtype=ember.float32, device="cuda") * 2
        ptr = x.untyped_storage_ptr()
        assert x.is_shared()
        # A no-op for CUDA, as in PyTorch: the memory stays where it is.
        assert x.share_memory_().untyped_storage_ptr() == ptr == x.untyped_storage_ptr()
        inbox.put((x, x.cpu()))
        tag, ok, device, shared = outbox.get(timeout=TIMEOUT)
        assert (tag, ok, device, shared) == ("values", True, "cuda:0", True)
        assert outbox.get(timeout=TIMEOUT)[0] == "written"
        assert ember.equal(x.cpu(), ember.arange(1000, dtype=ember.float32) * 2 + 1)
        inbox.put("bye")
    finally:
        p.join(TIMEOUT)
    assert p.exitcode == 0


def _consumer_reads(inbox, outbox) -> None:
    x = inbox.get()
    outbox.put(x.cpu())  # on this process's stream, which waited for the producer's writes


@needs_gpu
def test_the_consumer_waits_for_writes_queued_on_a_side_stream():
    ctx = _spawn()
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_consumer_reads, args=(inbox, outbox))
    p.start()
    try:
        s = ember.cuda.Stream()
        with ember.cuda.stream(s):
            x = ember.zeros(1 << 20, device="cuda")  # allocated on s
            C._sleep(500_000_000)  # ~0.3 s of GPU time before the write
            x.fill_(5.0)
            # put() pickles in the queue's feeder thread, whose current stream is the default
            # one: the send still waits for s.
            inbox.put(x)
        got = outbox.get(timeout=TIMEOUT)
        assert ember.equal(got, ember.full((1 << 20,), 5.0))
    finally:
        p.join(TIMEOUT)
    assert p.exitcode == 0


def _fill_rank(rank: int, x: ember.Tensor) -> None:
    x[rank].fill_(float(rank + 1))  # an argument of spawn: mapped, not copied
    ember.cuda.synchronize()


@needs_gpu
def test_a_cuda_tensor_as_an_argument_of_spawn():
    x = ember.zeros(2, 3, device="cuda")
    mp.spawn(_fill_rank, args=(x,), nprocs=2, join=True)
    assert ember.equal(x.cpu(), ember.tensor([[1.0] * 3, [2.0] * 3]))
    ember.cuda.ipc_collect()
    assert C._ipc_pending() == 0


def _consumer_views(inbox, outbox) -> None:
    views, expected = inbox.get()
    same = [bool(ember.equal(v.cpu(), e)) for v, e in zip(views, expected)]
    a, b = views[0], views[1]  # two views of one storage arrive as views of one storage
    shared_storage = a.untyped_storage_ptr() == b.untyped_storage_ptr()
    b.fill_(-1.0)  # through the second view: the first sees it where they overlap
    ember.cuda.synchronize()
    outbox.put((same, shared_storage, [tuple(v.shape) for v in views],
                [tuple(v.stride()) for v in views], float(a.cpu()[0])))


@needs_gpu
def test_views_and_offsets_arrive_with_the_right_values():
    ctx = _spawn()
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_consumer_views, args=(inbox, outbox))
    p.start()
    try:
        filler = ember.ones(3000, device="cuda")  # the big tensor starts inside a segment
        big = ember.arange(20000, dtype=ember.float32, device="cuda")
        views = [
            big[1000:3000:2],               # strided, at an offset
            big[1000:1500],                 # overlaps the first
            big[5000:].view(150, 100).t(),  # transposed
            ember.arange(7, dtype=ember.int64, device="cuda"),  # small pool
            ember.tensor([1.5, 2.5], dtype=ember.float16, device="cuda"),
        ]
        inbox.put((views, [v.cpu() for v in views]))
        same, shared_storage, shapes, strides, first = outbox.get(timeout=TIMEOUT)
        assert same == [True] * len(views)
        assert shared_storage
        assert shapes == [tuple(v.shape) for v in views]
        assert strides == [tuple(v.stride()) for v in views]
        assert first == -1.0
        assert ember.equal(big[1000:1500].cpu(), ember.full((500,), -1.0))
        assert float(big[999].cpu()) == 999.0 and float(big[1500].cpu()) == 1500.0
        del filler
    finally:
        p.join(TIMEOUT)
    assert p.exitcode == 0


def _consumer_hold_then_drop(inbox, outbox) -> None:
    x = inbox.get()
    outbox.put(float(x.sum().cpu()))
    assert inbox.get() == "drop"
    del x
    gc.collect()
    outbox.put("dropped")
    assert inbox.get() == "bye"


@needs_gpu
def test_the_producer_memory_is_reused_only_after_the_consumer_drops_it():
    ctx = _spawn()
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_consumer_hold_then_drop, args=(inbox, outbox))
    p.start()
    try:
        ember.cuda.synchronize()
        ember.cuda.ipc_collect()
        before = ember.cuda.memory_allocated()
        x = ember.full((1 << 20,), 3.0, device="cuda")  # 4 MiB
        held = ember.cuda.memory_allocated()
        assert held - before >= 4 << 20
        inbox.put(x)
        assert outbox.get(timeout=TIMEOUT) == 3.0 * (1 << 20)
        del x
        gc.collect()
        ember.cuda.ipc_collect()
        assert ember.cuda.memory_allocated() == held  # the consumer still maps it
        y = ember.zeros((1 << 20,), device="cuda")  # may not land on the sent block
        assert ember.cuda.memory_allocated() >= held + (4 << 20)
        del y
        inbox.put("drop")
        assert outbox.get(timeout=TIMEOUT) == "dropped"
        ember.cuda.ipc_collect()
        assert C._ipc_pending() == 0
        assert ember.cuda.memory_allocated() == before
        inbox.put("bye")
    finally:
        p.join(TIMEOUT)
    assert p.exitcode == 0


def _producer_exits(q) -> None:
    q.put(ember.arange(100, dtype=ember.float32, device="cuda"))
    q.close()
    q.join_thread()  # the message is in the pipe; exit without waiting for the consumer


@needs_gpu
def test_a_consumer_of_an_exited_producer_gets_a_clear_error():
    ctx = _spawn()
    q = ctx.Queue()
    p = ctx.Process(target=_producer_exits, args=(q,))
    p.start()
    p.join(TIMEOUT)
    assert p.exitcode == 0
    assert _names(p.pid) == set()
    with pytest.raises(RuntimeError, match=rf"the process that shared this CUDA tensor "
                                           rf"\(pid {p.pid}\) has exited"):
        q.get(timeout=TIMEOUT)


def _producer_many(q, back, n: int) -> None:
    ember.cuda.synchronize()
    before = ember.cuda.memory_allocated()
    for i in range(n):
        q.put(ember.full((16384,), float(i), device="cuda"))  # 64 KiB each
    assert back.get() == "done"
    ember.cuda.ipc_collect()
    back.put((C._ipc_pending(), ember.cuda.memory_allocated() - before))
    assert back.get() == "bye"


@needs_gpu
def test_many_tensors_do_not_leak():
    ctx = _spawn()
    q, back = ctx.Queue(), ctx.Queue()
    n = 200
    mine = _names(os.getpid())
    p = ctx.Process(target=_producer_many, args=(q, back, n))
    p.start()
    try:
        for i in range(n):
            t = q.get(timeout=TIMEOUT)
            assert t.device.type == "cuda" and float(t[-1].cpu()) == float(i)
            del t
        gc.collect()
        back.put("done")
        pending, extra = back.get(timeout=TIMEOUT)
        assert pending == 0 and extra == 0
        back.put("bye")
    finally:
        p.join(TIMEOUT)
    assert p.exitcode == 0
    assert _names(p.pid) == set()
    assert _names(os.getpid()) == mine


def _consumer_holds_and_exits(inbox, outbox) -> None:
    kept = [inbox.get() for _ in range(3)]
    outbox.put(sum(float(t.sum().cpu()) for t in kept))
    # exits holding them: its exit hook gives the references back


@needs_gpu
def test_a_consumer_that_exits_holding_tensors_gives_them_back():
    ctx = _spawn()
    inbox, outbox = ctx.Queue(), ctx.Queue()
    ember.cuda.synchronize()
    ember.cuda.ipc_collect()
    before = ember.cuda.memory_allocated()
    p = ctx.Process(target=_consumer_holds_and_exits, args=(inbox, outbox))
    p.start()
    try:
        for _ in range(3):
            inbox.put(ember.ones(300_000, device="cuda"))
        assert outbox.get(timeout=TIMEOUT) == 900_000.0
    finally:
        p.join(TIMEOUT)
    assert p.exitcode == 0
    ember.cuda.ipc_collect()
    assert C._ipc_pending() == 0
    assert ember.cuda.memory_allocated() == before


@needs_gpu
def test_a_message_read_by_its_sender_is_the_same_storage():
    q = mp.SimpleQueue()
    x = ember.arange(10, dtype=ember.float32, device="cuda")
    q.put([x, x[2:5]])
    y, v = q.get()
    assert y.untyped_storage_ptr() == x.untyped_storage_ptr() == v.untyped_storage_ptr()
    y.add_(1)
    assert ember.equal(x.cpu(), ember.arange(10, dtype=ember.float32) + 1)
    assert ember.equal(v.cpu(), ember.tensor([3.0, 4.0, 5.0]))
    del y, v
    ember.cuda.ipc_collect()
    assert C._ipc_pending() == 0


def _forwarder(inbox, onward) -> None:
    x = inbox.get()
    assert C._ipc_is_received(x)
    onward.put(x)  # sent on with the producer's handle; held here until the next one lets go
    assert inbox.get() == "bye"


def _last(onward, outbox) -> None:
    x = onward.get()
    x.mul_(10)
    ember.cuda.synchronize()
    outbox.put("done")
    del x


@needs_gpu
def test_a_received_cuda_tensor_can_be_forwarded():
    ctx = _spawn()
    inbox, onward, outbox = ctx.Queue(), ctx.Queue(), ctx.Queue()
    a = ctx.Process(target=_forwarder, args=(inbox, onward))
    b = ctx.Process(target=_last, args=(onward, outbox))
    a.start()
    b.start()
    try:
        x = ember.ones(1000, device="cuda")
        inbox.put(x)
        assert outbox.get(timeout=TIMEOUT) == "done"
        assert ember.equal(x.cpu(), ember.full((1000,), 10.0))
        b.join(TIMEOUT)
        assert b.exitcode == 0
    finally:
        inbox.put("bye")
        a.join(TIMEOUT)
        b.join(TIMEOUT)
    assert a.exitcode == 0
    ember.cuda.ipc_collect()
    assert C._ipc_pending() == 0


def _forked_cuda(q) -> None:
    try:
        ember.ones(2, device="cuda")
        q.put("no error")
    except RuntimeError as e:
        q.put(str(e))


@needs_gpu
def test_a_forked_child_cannot_use_cuda():
    ember.ones(2, device="cuda")  # CUDA is initialized in this process
    ctx = mp.get_context("fork")
    q = ctx.SimpleQueue()
    p = ctx.Process(target=_forked_cuda, args=(q,))
    p.start()
    msg = q.get()
    p.join(TIMEOUT)
    assert "Cannot re-initialize CUDA in forked subprocess" in msg
    assert "'spawn' start method" in msg
