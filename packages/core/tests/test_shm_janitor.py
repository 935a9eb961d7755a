"""/dev/shm after a whole process tree is SIGKILLed: a process tree (a main process with a
shared tensor, plain ``multiprocessing`` children, fork and spawn, with shared tensors of their
own, DataLoader workers with batches in flight) killed as a group leaves no ``ember_<pid>_*``
segment behind (the janitor of ``ember._shm_janitor``, joined before each process creates its
first named segment, removes them), and the segments of a live process are never touched."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")

TREE = textwrap.dedent(
    """
    import multiprocessing as mp, os, sys, time
    import ember
    from ember.data import DataLoader

    def child(w):
        t = ember.arange(4, dtype=ember.float32).share_memory_()  # a 16-byte Owner segment
        w.send(os.getpid())
        time.sleep(600)

    class DS:
        def __len__(self):
            return 64
        def __getitem__(self, i):
            return ember.full((128, 128), float(i))  # 64 KiB: batches in shared memory

    if __name__ == "__main__":
        keep = ember.zeros(4).share_memory_()
        pids = [os.getpid()]
        for method in sys.argv[1:]:  # a Pipe: a killed spawn Queue would leave semaphores
            ctx = mp.get_context(method)
            r, w = ctx.Pipe(duplex=False)
            ctx.Process(target=child, args=(w,)).start()
            pids.append(r.recv())
        it = iter(DataLoader(DS(), batch_size=2, num_workers=2, multiprocessing_context="fork"))
        batches = [next(it) for _ in range(3)]
        pids += [w.pid for w in it._pool.workers]
        print(" ".join(map(str, pids)), flush=True)
        time.sleep(600)
    """
)

LONER = textwrap.dedent(
    """
    import os, sys
    import ember
    t = ember.ones(4).share_memory_()
    print(os.getpid(), flush=True)
    sys.stdin.read()  # until the test closes stdin
    """
)


def _names(pids):
    return sorted(n for n in os.listdir("/dev/shm") if any(n.startswith(f"ember_{p}_") for p in pids))


def _start(code, args=(), **kw):
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            text=True, start_new_session=True, **kw)


def _readline(proc, timeout=180.0):
    """proc's next stdout line, or a failure (not a hang) when it does not come."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            return proc.stdout.readline()
    raise AssertionError(f"the process tree did not start (exit status {proc.poll()})")


def test_killed_process_tree_leaves_no_segments(tmp_path):
    script = tmp_path / "tree.py"  # a file: spawn children import the main module
    script.write_text(TREE)
    loner = _start(LONER, stdin=subprocess.PIPE)
    tree = subprocess.Popen([sys.executable, str(script), "fork", "spawn"], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        loner_pid = int(_readline(loner))
        pids = [int(x) for x in _readline(tree).split()]
        assert len(pids) == 5, pids
        before = _names(pids)
        # main, both children and at least one worker's batch segment are in /dev/shm
        assert {n.split("_")[1] for n in before} >= {str(p) for p in pids[:3]}, before
        assert len(before) >= 4, before
        os.killpg(tree.pid, signal.SIGKILL)  # the whole group at once (the janitors are not in it)
        tree.wait(timeout=60)
        deadline = time.monotonic() + 60
        while _names(pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _names(pids) == []
        assert len(_names([loner_pid])) == 1  # a live process keeps its segment
    finally:
        if tree.poll() is None:
            os.killpg(tree.pid, signal.SIGKILL)
            tree.wait()
        loner.stdin.close()
        loner.wait(timeout=60)
    # the loner exited normally: its segment is gone too
    deadline = time.monotonic() + 30
    while _names([loner_pid]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _names([loner_pid]) == []


SMALL_TREE = textwrap.dedent(
    """
    import multiprocessing as mp, os, time
    import ember

    def child(w):
        t = ember.ones(4).share_memory_()
        w.send(os.getpid())
        time.sleep(600)

    if __name__ == "__main__":
        keep = ember.ones(4).share_memory_()
        ctx = mp.get_context("fork")
        r, w = ctx.Pipe(duplex=False)
        ctx.Process(target=child, args=(w,)).start()
        print(os.getpid(), r.recv(), flush=True)
        time.sleep(600)
    """
)

# A subreaper that never reaps: the killed tree's processes stay zombies under it.
SUBREAPER = textwrap.dedent(
    """
    import ctypes, subprocess, sys
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    p = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    print(p.pid, p.stdout.readline().strip(), flush=True)
    sys.stdin.read()  # until the test closes stdin; reaps nothing
    """
)


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_janitor_treats_zombies_as_dead():
    """Killed processes nobody reaps (zombies) are dead: their segments go at once, not after
    the janitor's minute of waiting for the pids to disappear (after which it leaves them)."""
    reaper = _start(SUBREAPER, (SMALL_TREE,), stdin=subprocess.PIPE)
    try:
        pgid, *pids = (int(x) for x in _readline(reaper).split())
        assert len(_names(pids)) == 2
        os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 40
        while _names(pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [_state(p) for p in pids] == ["Z", "Z"]  # still unreaped
        assert _names(pids) == []
    finally:
        reaper.stdin.close()
        reaper.wait(timeout=60)
