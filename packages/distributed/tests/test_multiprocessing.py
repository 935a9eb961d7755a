"""ember.multiprocessing: the multiprocessing drop-in, spawn's error report, tensors through
queues and pipes by shared memory (both sharing strategies), Hogwild, /dev/shm hygiene."""

from __future__ import annotations

import multiprocessing as std_mp
import os
import signal
import subprocess
import sys
import textwrap
import time

import ember
import ember.multiprocessing as mp
import pytest
from ember import _C

TIMEOUT = 120  # seconds; generous: 2 busy cores

DTYPES = [
    ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64, ember.int32,
    ember.int16, ember.int8, ember.uint8, ember.bool,
]


def _ember_names(pid: int | None = None) -> set[str]:
    """The /dev/shm segments of process pid (default: this one); other users of the machine
    have theirs."""
    prefix = _C._shm_prefix(os.getpid() if pid is None else pid)
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)}


@pytest.fixture(autouse=True)
def _default_strategy():
    yield
    mp.set_sharing_strategy("file_system")


def _make(dtype, n: int) -> ember.Tensor:
    x = ember.arange(n) % 7
    return (x > 3) if dtype == ember.bool else x.to(dtype)


# ---- the drop-in ---------------------------------------------------------------------------


def test_reexports_the_standard_library():
    for name in std_mp.__all__:
        assert hasattr(mp, name), name
    for name in ("spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
                 "ProcessExitedException", "get_all_sharing_strategies", "get_sharing_strategy",
                 "set_sharing_strategy", "init_reductions"):
        assert name in mp.__all__
    assert mp.get_start_method() == std_mp.get_start_method()
    for method in mp.get_all_start_methods():
        ctx = mp.get_context(method)
        assert ctx.get_start_method() == method
        assert issubclass(ctx.Process, std_mp.process.BaseProcess)
        assert ctx.get_context() is ctx
    with pytest.raises(ValueError, match="cannot find context"):
        mp.get_context("teleport")


def _double(q, t) -> None:
    q.put(t * 2)


def test_default_process_class():
    q = mp.Queue()
    p = mp.Process(target=_double, args=(q, ember.arange(70_000.0)))
    p.start()
    assert ember.equal(q.get(timeout=TIMEOUT), ember.arange(70_000.0) * 2)
    p.join(TIMEOUT)
    assert p.exitcode == 0 and isinstance(p, std_mp.process.BaseProcess)


def test_pipe_and_simple_queue_in_process():
    a, b = mp.Pipe()
    big = ember.arange(50_000, dtype=ember.float32)
    a.send({"x": big, "s": ember.ones(3)})
    got = b.recv()
    assert got["x"].is_shared() and ember.equal(got["x"], big) and ember.equal(got["s"], ember.ones(3))
    q = mp.SimpleQueue()
    q.put(big.view(100, 500).t())
    assert ember.equal(q.get(), big.view(100, 500).t())


# ---- spawn / start_processes ---------------------------------------------------------------


def _fail_rank_one(rank: int, delay: float) -> None:
    if rank == 1:
        raise ValueError(f"bad input on rank {rank}")
    time.sleep(delay)  # terminated by the parent when rank 1 fails


def test_spawn_names_the_failed_rank_and_stops_the_others():
    before = set(mp.active_children())  # daemon workers an earlier test may still be closing
    t0 = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(_fail_rank_one, args=(60.0,), nprocs=2, start_method="fork")
    assert time.monotonic() - t0 < 50  # rank 0 did not sleep its 60 s
    e = info.value
    assert e.error_index == 1 and e.pid > 0
    assert "Process 1 terminated with the following error" in str(e)
    assert "ValueError: bad input on rank 1" in str(e) and "Traceback" in str(e)
    assert not set(mp.active_children()) - before  # both ranks were joined


def _exit_or_kill(rank: int) -> None:
    if rank == 0:
        os._exit(3)
    os.kill(os.getpid(), signal.SIGKILL)


def test_spawn_reports_exit_code_and_signal():
    for nprocs, want in ((1, "exit code 3"), (2, None)):
        with pytest.raises(mp.ProcessExitedException) as info:
            mp.start_processes(_exit_or_kill, nprocs=nprocs, start_method="fork")
        e = info.value
        if want:
            assert e.error_index == 0 and e.exit_code == 3 and want in str(e)
        else:  # whichever rank the parent noticed first
            assert (e.exit_code, e.signal_name) in ((3, None), (-signal.SIGKILL, "SIGKILL"))
            assert f"process {e.error_index}" in str(e)


def test_spawn_checks_its_arguments_and_exceptions_pickle():
    import pickle

    with pytest.raises(TypeError, match="fn must be callable"):
        mp.spawn(42)
    with pytest.raises(TypeError, match="args must be a tuple"):
        mp.spawn(print, args=[1])
    with pytest.raises(ValueError, match="cannot find context for 'teleport'"):
        mp.start_processes(print, start_method="teleport")
    e = pickle.loads(pickle.dumps(mp.ProcessExitedException("m", 1, 99, -9, "SIGKILL")))
    assert (e.error_index, e.pid, e.exit_code, e.signal_name, str(e)) == (1, 99, -9, "SIGKILL", "m")
    r = pickle.loads(pickle.dumps(mp.ProcessRaisedException("trace", 2, 7)))
    assert isinstance(r, mp.ProcessException) and (r.error_index, r.pid) == (2, 7)


def _write_rank(rank: int, shared: ember.Tensor) -> None:
    shared[rank] = float(rank + 1)


def test_spawn_join_false_and_shared_writes():
    shared = ember.zeros(4).share_memory_()
    ctx = mp.spawn(_write_rank, args=(shared,), nprocs=2, join=False)  # start method "spawn"
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 2
    deadline = time.monotonic() + TIMEOUT
    while not ctx.join(timeout=1):
        assert time.monotonic() < deadline
    assert shared.tolist() == [1.0, 2.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="nprocs"):
        mp.spawn(_write_rank, nprocs=0)


# ---- tensors through queues ----------------------------------------------------------------


def _echo(inbox, outbox) -> None:
    while True:
        item = inbox.get(timeout=TIMEOUT)
        if item is None:
            return
        outbox.put(item)


def _cases() -> list[ember.Tensor]:
    out = []
    for dtype in DTYPES:
        out.append(_make(dtype, 10))  # by value
        out.append(_make(dtype, 70_000))  # copied into shared memory
    big = ember.arange(120_000, dtype=ember.float32).view(300, 400)
    shared = ember.arange(120_000, dtype=ember.float64).view(300, 400).share_memory_()
    out += [big.t(), big[::3, 5:], big[7], shared.t()[2:, ::2], shared[10:20]]
    out.append(ember.ones(1).expand(100_000))  # stride 0
    out.append(ember.arange(24.0).view(2, 3, 4).permute(2, 0, 1))
    return out


@pytest.mark.parametrize("strategy", ["file_system", "file_descriptor"])
def test_queue_round_trip_of_every_dtype_and_views(strategy):
    mp.set_sharing_strategy(strategy)
    ctx = mp.get_context("fork")  # the child inherits the strategy
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_echo, args=(inbox, outbox))
    p.start()
    try:
        cases = _cases()
        for t in cases:
            inbox.put(t)
            got = outbox.get(timeout=TIMEOUT)
            assert got.dtype == t.dtype and got.shape == t.shape
            assert ember.equal(got, t), (t.dtype, t.shape, t.stride())
        if strategy == "file_descriptor":
            assert not _ember_names(p.pid)
    finally:
        inbox.put(None)
        p.join(TIMEOUT)
    assert p.exitcode == 0


def _share_and_mutate(q, done) -> None:
    t = q.get(timeout=TIMEOUT)
    t.add_(1.0)  # the same pages as the parent's tensor
    done.put(t.sum().item())


@pytest.mark.parametrize("strategy", ["file_system", "file_descriptor"])
def test_shared_tensor_writes_are_seen_by_the_sender(strategy):
    mp.set_sharing_strategy(strategy)
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Queue()
    t = ember.zeros(10, 10).share_memory_()
    p = ctx.Process(target=_share_and_mutate, args=(q, done))
    p.start()
    q.put(t[2:5])  # a view: offset and shape travel with the name
    assert done.get(timeout=TIMEOUT) == 30.0
    p.join(TIMEOUT)
    assert t.sum().item() == 30.0 and t[2:5].eq(1.0).all().item() and t[5].eq(0.0).all().item()


def test_sharing_strategies():
    assert mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    assert mp.get_sharing_strategy() == "file_system"
    with pytest.raises(ValueError, match="unknown strategy 'tcp'"):
        mp.set_sharing_strategy("tcp")
    a, b = mp.Pipe()
    big = ember.arange(100_000, dtype=ember.float32)
    mp.set_sharing_strategy("file_descriptor")
    assert mp.get_sharing_strategy() == "file_descriptor"
    before = _ember_names()
    a.send(big)
    got = b.recv()
    assert _ember_names() == before  # anonymous memory: nothing named in /dev/shm
    assert ember.equal(got, big)
    assert got.is_shared()
    own = ember.zeros(100).share_memory_()  # unnamed too
    assert own.is_shared() and _ember_names() == before
    a.send(own)
    first = b.recv()
    a.send(first[10:])  # a received one goes on by the same descriptor
    b.recv().fill_(5.0)
    assert own.sum().item() == 450.0 and first[10].item() == 5.0
    mp.set_sharing_strategy("file_system")
    a.send(ember.arange(100_000, dtype=ember.float64))
    assert b.recv().is_shared()


@pytest.mark.parametrize("strategy", ["file_system", "file_descriptor"])
def test_recycled_segments_are_reused_only_once_released(strategy):
    mp.set_sharing_strategy(strategy)
    a, b = mp.Pipe()
    held = []
    for i in range(8):
        a.send(ember.full((20_000,), float(i)))  # 80 KB: a copy into a recycled segment
        held.append((i, b.recv()))
        if i % 2:
            held.pop(0)  # released: its segment may carry a later tensor
        for j, t in held:
            assert t.eq(float(j)).all().item(), (i, j)


def _forward(inbox, outbox) -> None:
    outbox.put(inbox.get(timeout=TIMEOUT) + 0)  # a fresh tensor
    outbox.put(inbox.get(timeout=TIMEOUT))  # forward what was received


def test_a_received_tensor_can_be_forwarded(monkeypatch):
    from ember import multiprocessing_reductions as red

    monkeypatch.setattr(red, "MP_POOL_MAX_BYTES", 0)  # handoff segments: received once
    ctx = mp.get_context("fork")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_forward, args=(inbox, outbox))
    p.start()
    x = ember.arange(100_000, dtype=ember.float32)
    inbox.put(x)
    inbox.put(x)
    assert ember.equal(outbox.get(timeout=TIMEOUT), x)
    assert ember.equal(outbox.get(timeout=TIMEOUT), x)
    p.join(TIMEOUT)
    assert p.exitcode == 0


def _square_sum(t: ember.Tensor) -> ember.Tensor:
    return (t * t).sum()


def _big_row(i: int) -> ember.Tensor:
    return ember.full((50_000,), float(i))


def test_pool_map_with_tensors():
    inputs = [ember.arange(70_000, dtype=ember.float64), ember.ones(3), ember.full((5,), 2.0)]
    with mp.get_context("fork").Pool(2) as pool:
        sums = pool.map(_square_sum, inputs)
        rows = pool.map(_big_row, range(3))
    assert [s.item() for s in sums] == [(t * t).sum().item() for t in inputs]
    assert [r.sum().item() for r in rows] == [0.0, 50_000.0, 100_000.0]


# ---- Hogwild -------------------------------------------------------------------------------


def _loss(model, x, y):
    return ((model(x) - y) ** 2).mean()


def _data(seed: int):
    g = ember.Generator()
    g.manual_seed(seed)
    x = ember.randn(64, 4, generator=g)
    y = x @ ember.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.25
    return x, y


def _hogwild_train(rank: int, model) -> None:
    ember.manual_seed(rank)
    x, y = _data(100 + rank)
    opt = ember.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(40):
        opt.zero_grad()
        _loss(model, x, y).backward()
        opt.step()  # updates the shared parameters in place, without locks


@pytest.mark.parametrize("strategy", ["file_system", "file_descriptor"])
def test_hogwild_training_of_a_shared_module(strategy):
    nn = pytest.importorskip("ember.nn")
    mp.set_sharing_strategy(strategy)
    ember.manual_seed(0)
    model = nn.Linear(4, 1)
    before_names = _ember_names()
    model.share_memory()
    assert all(p.is_shared() for p in model.parameters())
    assert (_ember_names() == before_names) == (strategy == "file_descriptor")
    x, y = _data(7)
    with ember.no_grad():
        before = _loss(model, x, y).item()
    mp.spawn(_hogwild_train, args=(model,), nprocs=2)
    with ember.no_grad():
        after = _loss(model, x, y).item()
    assert after < 0.1 * before, (before, after)


# ---- /dev/shm hygiene ----------------------------------------------------------------------


def _receive_then_wait(q, back, ready) -> None:
    got = [q.get(timeout=TIMEOUT) for _ in range(2)]
    mine = ember.ones(40_000).share_memory_()  # a segment of this child
    back.put(ember.arange(100_000, dtype=ember.float32))  # a copy in flight, never received
    ready.put([t.sum().item() for t in got] + [mine.sum().item()])
    time.sleep(TIMEOUT)


def test_dev_shm_is_clean_after_sigkill_of_a_child():
    ctx = mp.get_context("fork")
    q, back, ready = ctx.Queue(), ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_receive_then_wait, args=(q, back, ready))
    p.start()
    shared = ember.ones(50_000).share_memory_()
    q.put(shared)
    q.put(ember.full((80_000,), 2.0))  # copied into shared memory on the way
    assert ready.get(timeout=TIMEOUT) == [50_000.0, 160_000.0, 40_000.0]
    assert _ember_names(p.pid)  # the child's own segment and the copy it sent
    os.kill(p.pid, signal.SIGKILL)
    p.join(TIMEOUT)
    assert p.exitcode == -signal.SIGKILL
    assert not _ember_names(p.pid)  # removed by join()
    name = _C._shm_handle(shared)[0].lstrip("/")
    assert name in _ember_names()
    del shared
    assert name not in _ember_names()


SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    import ember, ember.multiprocessing as mp

    def child(q, ready):
        t = q.get()
        u = ember.zeros(30_000).share_memory_()
        ready.put((t.sum().item(), u.sum().item()))
        time.sleep(60)

    if __name__ == "__main__":
        mp.set_sharing_strategy(sys.argv[1])
        ctx = mp.get_context("fork")
        q, ready = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=child, args=(q, ready))
        p.start()
        keep = ember.ones(100_000)
        q.put(keep)
        q.put(keep * 2)  # never received: in flight when the child dies
        assert ready.get(timeout=60) == (100_000.0, 0.0)
        print(os.getpid(), p.pid, flush=True)
        os.kill(p.pid, signal.SIGKILL)
        if sys.argv[2] == "kill-self":  # the parent dies too, without any cleanup
            os.kill(os.getpid(), signal.SIGKILL)
        p.join()
""")


@pytest.mark.parametrize("strategy,end", [
    ("file_system", "exit"), ("file_system", "kill-self"), ("file_descriptor", "kill-self"),
])
def test_nothing_left_in_dev_shm_after_the_processes_are_gone(tmp_path, strategy, end):
    script = tmp_path / "scenario.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script), strategy, end], capture_output=True,
                         text=True, timeout=TIMEOUT, env=os.environ.copy())
    pids = out.stdout.split()
    assert len(pids) == 2, out.stderr
    if end == "exit":
        assert out.returncode == 0, out.stderr
    deadline = time.monotonic() + TIMEOUT  # a killed parent's janitor cleans up after it
    while any(_ember_names(int(pid)) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        assert not _ember_names(int(pid)), (pid, out.stderr)


def test_a_full_dev_shm_raises_a_clear_error():
    st = os.statvfs("/dev/shm")
    too_big = st.f_blocks * st.f_frsize + (1 << 30)  # more than the whole of /dev/shm
    huge = ember.zeros(1, dtype=ember.uint8).expand(too_big)
    a, _ = mp.Pipe()
    with pytest.raises(RuntimeError, match=r"/dev/shm has .* MiB free of .* MiB.*--shm-size"):
        a.send(huge)
    mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(RuntimeError, match=r"/dev/shm has .* MiB free of .* MiB.*--shm-size"):
        a.send(huge)
