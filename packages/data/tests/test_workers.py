"""Worker processes: results, seeding, sharding, errors, dead workers, timeouts, shutdown, and
no leftovers (processes, /dev/shm segments). Every loader here runs under the conftest's hard
time limit; scenarios that kill the main process run in a subprocess with a timeout."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import ember
import pytest
from data_helpers import own_segments, shm_segments
from ember.data import DataLoader, Dataset, IterableDataset, get_worker_info

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX workers, /dev/shm")


class Images(Dataset):
    """3x32x32 images (large enough to be collated into shared memory) with int labels."""

    def __init__(self, n: int = 40) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return ember.full((3, 32, 32), float(i)), i


class Faulty(Images):
    def __init__(self, n: int, bad: int, action: str) -> None:
        super().__init__(n)
        self.bad, self.action = bad, action

    def __getitem__(self, i: int):
        if i == self.bad:
            if self.action == "raise":
                raise ValueError(f"cannot decode sample {i}")
            if self.action == "sleep":
                time.sleep(30)
            if self.action == "exit":
                os._exit(3)  # e.g. a C library calling exit() inside the dataset
            os.kill(os.getpid(), getattr(signal, self.action))
        return super().__getitem__(i)


class Shards(IterableDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class RandomDraws(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        import numpy as np

        info = get_worker_info()
        return (info.id, info.seed, random.random(), float(np.random.rand()),
                ember.rand(1).item())


def labels(batches) -> list[int]:
    return [y for b in batches for y in b[1].tolist()]


@pytest.mark.parametrize("num_workers", [1, 2])
def test_map_style_same_batches_as_main_process(num_workers, no_shm_leak):
    ref = list(DataLoader(Images(), batch_size=6))
    got = list(DataLoader(Images(), batch_size=6, num_workers=num_workers))
    assert len(got) == len(ref) == 7
    for (gx, gy), (rx, ry) in zip(got, ref):
        assert gy.tolist() == ry.tolist()
        assert gx.shape == rx.shape and bool((gx == rx).all().item())
    assert got[0][0].is_shared()  # stacked in a worker, mapped here without a copy
    del got


def test_shuffled_with_generator_is_reproducible(no_shm_leak):
    def run():
        g = ember.Generator()
        g.manual_seed(5)
        return labels(DataLoader(Images(), batch_size=5, shuffle=True, num_workers=2,
                                 generator=g))

    a = run()
    assert sorted(a) == list(range(40)) and a == run()


def test_iterable_dataset_sharded_across_workers(no_shm_leak):
    for nw in (1, 2):
        out = [x for b in DataLoader(Shards(11), batch_size=2, num_workers=nw)
               for x in b.tolist()]
        assert sorted(out) == list(range(11))
    items = list(DataLoader(Shards(5), batch_size=None, num_workers=2))
    assert sorted(items) == list(range(5))


def test_worker_seeds_differ_across_workers_and_repeat_with_generator(no_shm_leak):
    def run(seed):
        g = ember.Generator()
        g.manual_seed(seed)
        return list(DataLoader(RandomDraws(), batch_size=None, num_workers=2, generator=g))

    a, b, c = run(1), run(1), run(2)
    assert a == b and a != c
    w0 = [r for r in a if r[0] == 0]
    w1 = [r for r in a if r[0] == 1]
    assert w0 and w1 and w1[0][1] == w0[0][1] + 1  # seed = base_seed + worker id
    assert w0[0][2:] != w1[0][2:]  # Python, NumPy and ember draws differ across workers


def _init(worker_id: int) -> None:
    os.environ["EMBER_TEST_WORKER"] = str(worker_id * 10)


class EnvDataset(Images):
    def __getitem__(self, i: int):
        return int(os.environ.get("EMBER_TEST_WORKER", "-1"))


def test_worker_init_fn(no_shm_leak):
    out = list(DataLoader(EnvDataset(4), batch_size=None, num_workers=2, worker_init_fn=_init))
    assert sorted(set(out)) == [0, 10]


def test_exception_names_worker_sample_and_traceback(no_shm_leak):
    dl = DataLoader(Faulty(20, 13, "raise"), batch_size=4, num_workers=2)
    with pytest.raises(ValueError) as ei:
        list(dl)
    msg = str(ei.value)
    assert "DataLoader worker process" in msg and "sample index 13" in msg
    assert "cannot decode sample 13" in msg and "Traceback" in msg and "__getitem__" in msg


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSEGV"])
def test_killed_worker_is_reported_quickly(sig, no_shm_leak):
    dl = DataLoader(Faulty(40, 9, sig), batch_size=4, num_workers=2)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"pid \d+\) was killed by signal {sig}"):
        list(dl)
    assert time.monotonic() - t0 < 10


def test_worker_exiting_is_reported_with_its_exit_code(no_shm_leak):
    dl = DataLoader(Faulty(40, 9, "exit"), batch_size=4, num_workers=2)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker \d \(pid \d+\) exited unexpectedly with exit "
                                           r"code 3"):
        list(dl)
    assert time.monotonic() - t0 < 10


def test_timeout_raises(no_shm_leak):
    dl = DataLoader(Faulty(8, 0, "sleep"), batch_size=2, num_workers=1, timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        next(iter(dl))
    assert time.monotonic() - t0 < 10


def test_break_del_and_exception_leave_nothing_behind(no_shm_leak):
    dl = DataLoader(Images(200), batch_size=4, num_workers=2)
    for i, _ in enumerate(dl):
        if i == 2:
            break
    it = iter(dl)
    next(it)
    del it
    with pytest.raises(KeyError):
        for _ in dl:
            raise KeyError("training loop failed")
    gc.collect()


def test_many_abandoned_iterators(no_shm_leak):
    with own_segments() as ours:
        before = ours()
        dl = DataLoader(Images(400), batch_size=8, num_workers=2)
        for _ in range(20):
            it = iter(dl)
            next(it)
            del it
        gc.collect()
        assert not ours() - before
    assert not mp.active_children()


def test_persistent_workers_keep_processes_across_epochs(no_shm_leak):
    dl = DataLoader(Images(12), batch_size=4, num_workers=2, persistent_workers=True)
    e1 = labels(dl)
    pids = [w.pid for w in dl._iterator._pool.workers]
    e2 = labels(dl)
    assert e1 == e2 == list(range(12))
    assert [w.pid for w in dl._iterator._pool.workers] == pids
    it = iter(dl)
    next(it)  # abandon mid-epoch: the next epoch ignores the stale batches
    assert labels(dl) == list(range(12))
    dl2 = DataLoader(Shards(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert sorted(x for b in dl2 for x in b.tolist()) == list(range(6))
    assert sorted(x for b in dl2 for x in b.tolist()) == list(range(6))
    del dl, dl2, it
    gc.collect()


def test_in_order_false_yields_everything(no_shm_leak):
    out = labels(DataLoader(Images(30), batch_size=3, num_workers=2, in_order=False))
    assert sorted(out) == list(range(30))


def test_prefetch_bound():
    dl = DataLoader(Images(400), batch_size=2, num_workers=2, prefetch_factor=3)
    it = iter(dl)
    next(it)
    assert it._send_idx - it._consumed <= 2 * 3
    del it
    gc.collect()


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawn_and_forkserver(method, no_shm_leak):
    dl = DataLoader(Images(12), batch_size=4, num_workers=2, multiprocessing_context=method)
    assert labels(dl) == list(range(12))


def _run(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    here = os.path.dirname(__file__)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_main_process_killed_leaves_no_workers_or_segments(how):
    # The child starts a loader, prints its workers' pids, then dies by `how` mid-epoch.
    code = f"""
        import os, signal, sys
        from test_workers import Images
        from ember.data import DataLoader
        it = iter(DataLoader(Images(10000), batch_size=8, num_workers=2))
        next(it)
        print(" ".join(str(w.pid) for w in it._pool.workers), flush=True)
        os.kill(os.getpid(), signal.{how})
        import time; time.sleep(30)
    """
    r = _run(code)
    pids = [int(p) for p in r.stdout.split()]
    assert len(pids) == 2, r.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "workers outlived their main process"
    # The segments of a killed tree go with its janitor, which acts once the whole tree is gone:
    # give it the same time (a loaded machine delays it).
    left = [n for n in shm_segments() for p in pids if n.startswith(f"ember_{p}_")]
    while left and time.monotonic() < deadline + 10:
        time.sleep(0.1)
        left = [n for n in shm_segments() for p in pids if n.startswith(f"ember_{p}_")]
    assert not left, left


def _workers_gone(pids: list[int], seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return not any(_alive(p) for p in pids)


@pytest.mark.parametrize("thread", ["main", "other"])
@pytest.mark.parametrize("case", ["late_start", "stuck_in_dataset"])
def test_workers_die_with_a_killed_loader_however_they_are_caught(case, thread):
    # late_start: the loader is killed before its workers run (a loaded machine): they must not
    # take their adoptive parent for the loader, nor its zombie (unreaped while we read its
    # stdout) for a live process. stuck_in_dataset: the workers are inside __getitem__ (no
    # check between tasks runs). With the loader in its main thread the kernel's parent-death
    # signal kills them; in another thread, their watchdog thread does.
    code = f"""
        import os, signal, sys, threading, time
        from test_workers import Images
        from ember.data import DataLoader, Sampler

        class KillFirst(Sampler):
            def __iter__(self):  # the loader dies after forking, before any task
                os.kill(os.getpid(), signal.SIGKILL)
                yield 0

            def __len__(self):
                return 1

        class Stuck(Images):
            def __getitem__(self, i):
                time.sleep(120)

        def late_start():
            # one write() per pid: the two workers print at once
            os.register_at_fork(after_in_child=lambda: (os.write(1, b"%d\\n" % os.getpid()),
                                                        time.sleep(1.0)))
            iter(DataLoader(Images(100), sampler=KillFirst(), batch_size=4, num_workers=2))

        def stuck_in_dataset():
            it = iter(DataLoader(Stuck(100), batch_size=4, num_workers=2))
            print(" ".join(str(w.pid) for w in it._pool.workers), flush=True)
            time.sleep(1.0)  # the workers are in __getitem__
            os.kill(os.getpid(), signal.SIGKILL)

        if {thread!r} == "main":
            {case}()
        else:
            threading.Thread(target={case}).start()
        time.sleep(30)
    """
    r = _run(code, timeout=45)  # the workers hold its stdout: run() returns when they are gone
    pids = [int(p) for p in r.stdout.split()]
    assert len(pids) == 2 and r.returncode == -signal.SIGKILL, (r.stdout, r.stderr)
    assert _workers_gone(pids), "workers outlived their main process"


def test_loader_made_in_a_thread_that_ends_keeps_its_workers(no_shm_leak):
    # The parent-death signal follows the thread that forked: a loader started in a short-lived
    # thread must not lose its workers when that thread ends.
    import threading

    box = []
    t = threading.Thread(target=lambda: box.append(iter(DataLoader(Images(64), batch_size=8,
                                                                   num_workers=2))))
    t.start()
    t.join()
    time.sleep(0.5)
    it = box.pop()
    assert [int(y[0]) for _, y in it] == list(range(0, 64, 8))


def test_leak_checks_count_only_this_tests_segments():
    # Another test run's dead worker whose segment waits for its janitor is not a leak of ours
    # (the check once counted every dead creator's segment: a flake on a busy machine).
    stranger = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    theirs = f"/dev/shm/ember_{int(stranger.stdout)}_0_1"
    with own_segments() as ours:
        before = ours()
        open(theirs, "wb").close()
        try:
            it = iter(DataLoader(Images(16), batch_size=8, num_workers=1))
            next(it)  # a batch in shared memory
            made = ours() - before
            worker = it._pool.workers[0].pid
            del it
            gc.collect()
        finally:
            os.unlink(theirs)
    assert made and all(n.startswith(f"ember_{worker}_") for n in made), made


def test_out_of_shared_memory_in_worker_is_a_clear_error(no_shm_leak):
    # RLIMIT_FSIZE makes the worker's posix_fallocate fail like a full /dev/shm would.
    dl = DataLoader(Images(8), batch_size=4, num_workers=1, worker_init_fn=_limit_file_size)
    with pytest.raises(RuntimeError, match=r"/dev/shm[\s\S]*--shm-size"):
        list(dl)


def _limit_file_size(worker_id: int) -> None:
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_ctrl_c_while_waiting_for_a_batch_leaves_nothing_behind():
    # Ctrl-C in a terminal signals the whole process group: the workers ignore it, the main
    # process gets KeyboardInterrupt out of next() and the program goes on without leftovers.
    code = """
        import gc, multiprocessing as mp, os, signal, threading, time
        from test_workers import Faulty, shm_segments
        from ember.data import DataLoader

        class Slow(Faulty):
            def __getitem__(self, i):
                if i == 0:
                    time.sleep(2)
                return super().__getitem__(i)

        it = iter(DataLoader(Slow(40, -1, ""), batch_size=4, num_workers=2))
        pids = [w.pid for w in it._pool.workers]
        threading.Timer(0.5, os.killpg, (os.getpgid(0), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            next(it)
            print("no interrupt")
        except KeyboardInterrupt:
            print("interrupted after", round(time.monotonic() - t0, 1))
        del it
        gc.collect()
        print("children", len(mp.active_children()))
        print("segments", sorted(n for n in shm_segments() for p in pids
                                 if n.startswith(f"ember_{p}_")))
        print("pids", *pids)
    """
    here = os.path.dirname(__file__)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=60, env=env, start_new_session=True)
    out = r.stdout.splitlines()
    assert out[0].startswith("interrupted after 0."), (r.stdout, r.stderr)
    assert out[1:3] == ["children 0", "segments []"], (r.stdout, r.stderr)
    pids = [int(p) for p in out[3].split()[1:]]
    assert not any(_alive(p) for p in pids)
    assert "Traceback" not in r.stderr, r.stderr  # the workers ignored the SIGINT


def test_numpy_seeded_in_workers_only_when_they_import_it():
    # Importing numpy.random costs ~20 ms per worker: it is seeded on import, not imported.
    code = """
        import sys
        import ember
        from ember.data import DataLoader, Dataset

        class Draws(Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                if i < 2:
                    return "numpy.random" in sys.modules
                import numpy.random
                return float(numpy.random.rand())

        assert "numpy.random" not in sys.modules
        for seed in (1, 1, 2):
            g = ember.Generator()
            g.manual_seed(seed)
            print(list(DataLoader(Draws(), batch_size=None, num_workers=2, generator=g)))
    """
    r = _run(code)
    lines = r.stdout.splitlines()
    assert len(lines) == 3, r.stderr
    a, b, c = (eval(line) for line in lines)
    assert a[:2] == [False, False]  # not imported by the worker's seeding
    assert a == b and a[2:] != c[2:]  # seeded from the loader's generator
    assert a[2] != a[3]  # workers 0 and 1 draw different numbers
