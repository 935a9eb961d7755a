"""The intra-op thread pool behind parallel_for: chunking, exceptions, nesting, resizing,
concurrent callers, sleeping and waking workers, fork.

`_C._parallel_for_probe(n, grain, throw_at=-1, nested=False)` runs parallel_for over [0, n),
checks that every element was visited exactly once and returns
(chunks, distinct threads, nested calls). Which thread runs a chunk depends on timing (the
caller also runs the chunks no worker has claimed yet), so only chunk counts are exact.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import ember
import numpy as np
import pytest
from ember import _C


def probe(n: int, grain: int, **kw) -> tuple[int, int, int]:
    chunks, nthreads, inner = _C._parallel_for_probe(n, grain, **kw)
    assert 1 <= nthreads <= max(chunks, 1) or chunks == nthreads == 0
    return chunks, inner


def uses_workers(limit_s: float = 5.0) -> bool:
    """Whether a region runs on more than one thread within `limit_s`. The caller runs the
    chunks no worker has claimed yet, so on a busy machine (a woken worker waits for a CPU)
    many regions finish on the caller alone; long chunks (several ms) give the worker time."""
    end = time.perf_counter() + limit_s
    while time.perf_counter() < end:
        if _C._parallel_for_probe(2_000_000, 1000)[1] > 1:
            return True
    return False


@pytest.fixture
def threads():
    before = ember.get_num_threads()
    yield ember.set_num_threads
    ember.set_num_threads(before)


def test_chunks_cover_the_range_once(threads):
    threads(2)
    assert probe(1000, 100) == (2, 0)  # the caller takes chunk 0, the worker (usually) chunk 1
    assert uses_workers()
    assert probe(1001, 1) == (2, 0)
    assert probe(199, 100) == (1, 0)  # below two grains: inline on the caller
    assert probe(0, 100) == (0, 0)
    threads(1)
    assert probe(10_000, 1) == (1, 0)
    threads(3)  # more threads than cores is allowed
    assert probe(10, 1) == (3, 0)
    assert probe(5, 2) == (2, 0)  # no more chunks than grains: one thread skips


def test_exception_in_any_chunk_reaches_the_caller_and_the_pool_survives(threads):
    threads(2)
    for _ in range(50):
        with pytest.raises(ValueError, match=r"_parallel_for_probe\(\).*raised at element 999"):
            probe(1000, 100, throw_at=999)  # in the worker's chunk
        with pytest.raises(ValueError, match=r"raised at element 0\b"):
            probe(1000, 100, throw_at=0)  # in the caller's chunk
        assert probe(1000, 100) == (2, 0)
    # The caller's chunk fails at once while the worker's runs for a while: the caller waits
    # (past its spin, asleep) for the worker before it raises.
    with pytest.raises(ValueError, match="raised at element 5"):
        probe(4_000_000, 1000, throw_at=5)
    assert probe(4_000_000, 1000) == (2, 0)


def test_nested_regions_run_inline(threads):
    threads(2)
    assert probe(1000, 100, nested=True) == (2, 2)
    with pytest.raises(ValueError, match="raised at element 700"):
        probe(1000, 100, throw_at=700, nested=True)
    threads(4)
    assert probe(4000, 1, nested=True) == (4, 4)


def test_set_num_threads_while_idle(threads):
    for n in (1, 2, 3, 4, 2, 1, 2):
        threads(n)
        assert ember.get_num_threads() == n
        assert probe(100 * n, 10) == (n, 0)
        time.sleep(0.002)  # let the workers go to sleep, then resize a sleeping pool
    with pytest.raises(RuntimeError, match="set_num_threads: expected a positive number"):
        ember.set_num_threads(0)


def test_back_to_back_regions_and_wake_ups(threads):
    threads(2)
    for _ in range(2000):  # tiny regions back to back: the workers never go to sleep
        assert probe(64, 16) == (2, 0)
    assert uses_workers()
    # Pauses around the spin bound race a worker going to sleep against the next region.
    for i in range(300):
        time.sleep((i % 7) * 20e-6)
        assert probe(64, 16) == (2, 0)


def test_two_python_threads_share_the_pool(threads):
    threads(2)
    errors: list[BaseException] = []

    def hammer(n: int) -> None:
        try:
            for i in range(400):
                assert probe(n, 8) == (2, 0)
                if i % 50 == 0:
                    with pytest.raises(ValueError, match="raised at element 3"):
                        probe(n, 8, throw_at=3)
        except BaseException as e:  # noqa: BLE001  (reported on the main thread)
            errors.append(e)

    ts = [threading.Thread(target=hammer, args=(n,)) for n in (64, 96)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts), "a parallel region hung"
    assert not errors, errors


def test_resizing_while_another_thread_runs_regions(threads):
    threads(2)
    stop = threading.Event()
    errors: list[BaseException] = []

    def hammer() -> None:
        try:
            while not stop.is_set():
                chunks, _ = probe(3000, 100)  # checks coverage and the thread count itself
                assert 1 <= chunks <= 4
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=hammer)
    t.start()
    try:
        for i in range(60):
            ember.set_num_threads(1 + i % 4)
            time.sleep(0.0005)
    finally:
        stop.set()
        t.join(timeout=60)
    assert not t.is_alive(), "a parallel region hung"
    assert not errors, errors


def test_real_ops_on_two_threads_match_numpy(threads):
    threads(2)
    x = np.random.default_rng(0).standard_normal(200_000).astype(np.float32)
    t = ember.tensor(x)
    for _ in range(20):
        np.testing.assert_allclose(t.exp().numpy(), np.exp(x), rtol=1e-6)
        np.testing.assert_array_equal(t.clone().numpy(), x)
        np.testing.assert_allclose(float(t.sum()), float(x.astype(np.float64).sum()), rtol=1e-4)


_FORK_SCRIPT = textwrap.dedent(
    """
    import os, threading
    import numpy as np
    import ember
    from ember import _C
    from ember.data import DataLoader, Dataset

    ember.set_num_threads(2)
    probe = _C._parallel_for_probe
    for _ in range(100):
        assert probe(1000, 10)[0] == 2  # warm pool: the worker is spinning

    def child_ok():
        x = ember.arange(300_000, dtype=ember.float64)
        # The child's fresh pool has a real worker that takes chunks.
        used = False
        for _ in range(500):  # see uses_workers() in the test module
            if probe(2_000_000, 1000)[1] == 2:
                used = True
                break
        return used and float((x * 2).sum()) == 300_000 * 299_999

    # Fork while another thread is inside parallel regions (it holds the pool's locks).
    stop = threading.Event()
    def hammer():
        while not stop.is_set():
            probe(1000, 10)
    t = threading.Thread(target=hammer, daemon=True)
    t.start()
    for _ in range(5):
        pid = os.fork()
        if pid == 0:
            try:
                os._exit(0 if child_ok() else 1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
    stop.set()
    t.join()

    class Squares(Dataset):
        def __len__(self):
            return 8
        def __getitem__(self, i):
            _C._parallel_for_probe(2000, 10)  # a parallel region in the worker process
            return (ember.ones(100_000) * i).exp().sum()

    def init(_):
        ember.set_num_threads(2)  # use the (fresh) pool in the forked worker

    loader = DataLoader(Squares(), batch_size=2, num_workers=2,
                        multiprocessing_context="fork", worker_init_fn=init)
    got = [v for batch in loader for v in batch.tolist()]
    want = [100_000 * float(np.exp(np.float32(i))) for i in range(8)]
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert probe(1000, 10)[0] == 2  # the parent's pool still works
    print("ok")
    """
)


def test_fork_with_a_busy_pool_and_dataloader_workers():
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_idle_workers_go_to_sleep(threads):
    # After a burst of regions the workers spin only briefly: an idle process burns no CPU.
    threads(2)
    for _ in range(200):
        probe(64, 16)
    time.sleep(0.25)  # OpenBLAS's own threads (from earlier tests) may spin ~0.1 s
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(0.2)
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    assert cpu < 0.25 * wall, f"idle process used {cpu:.3f} s CPU in {wall:.3f} s"
