"""Every data test runs under a hard time limit: a hung DataLoader must fail, not block CI."""

from __future__ import annotations

import signal

import pytest
from data_helpers import own_segments

TEST_TIMEOUT_S = 60


@pytest.fixture(autouse=True)
def _hard_timeout():
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def on_alarm(signum, frame):
        raise TimeoutError(f"data test exceeded its {TEST_TIMEOUT_S} s limit (hung loader?)")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def no_shm_leak():
    """Fails the test if it leaves ember segments in /dev/shm or worker processes behind."""
    import multiprocessing as mp

    with own_segments() as ours:
        before = ours()
        yield
        import gc

        gc.collect()
        leaked = ours() - before
    assert not leaked, f"shared-memory segments left in /dev/shm: {sorted(leaked)[:5]}"
    children = [p for p in mp.active_children()]
    assert not children, f"worker processes left behind: {children}"
