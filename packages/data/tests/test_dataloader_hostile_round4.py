"""Hostile input, round 4, data loading: workers that die (exit, SIGSEGV, KeyboardInterrupt),
return what cannot be pickled or samples of inconsistent shapes, samplers that yield what the
dataset then refuses, and the main process interrupted (SIGINT to the whole process group, as
Ctrl-C sends it) or killed: every worker must be gone afterwards (no orphans, no zombies).
Everything runs in child interpreters with timeouts, so a hang fails the test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and sends signals")

_PRELUDE = """
import json, os, signal, sys, threading, time
import ember
from ember.utils.data import DataLoader, Dataset


class DS(Dataset):
    def __init__(self, fn, n=8):
        self.fn, self.n = fn, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.fn(i)


class Unpicklable(Exception):
    def __init__(self, a, b):  # two arguments: the worker cannot rebuild it from args
        super().__init__(a)
        self.lock = threading.Lock()


def outcome(fn):
    try:
        r = fn()
        return {"exc": None, "msg": repr(r)[:200]}
    except BaseException as e:
        return {"exc": type(e).__name__, "msg": str(e)[:600]}
"""


def _run(body: str, timeout: float = 120.0) -> dict:
    code = _PRELUDE + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _crash_at_3(how: str) -> str:
    return f"""
def fn(i):
    if i == 3:
        {how}
    return ember.tensor([float(i)])


dl = DataLoader(DS(fn), batch_size=2, num_workers=2, timeout=60)
out = outcome(lambda: [b.tolist() for b in dl])
del dl
import multiprocessing as mp
time.sleep(0.5)
out["children"] = len(mp.active_children())
print(json.dumps(out))
"""


@pytest.mark.parametrize("how, fragments", [
    ("os._exit(7)", ["DataLoader worker 1", "exited unexpectedly with exit code 7"]),
    ("os.kill(os.getpid(), signal.SIGSEGV)", ["killed by signal SIGSEGV", "dataset code crashed"]),
    ("raise KeyboardInterrupt", ["DataLoader worker 1", "exited unexpectedly"]),
    ("raise Unpicklable('boom', 2)", ["Caught Unpicklable in DataLoader worker process 1",
                                      "sample index 3", "boom"]),
])
def test_a_dying_worker_is_named_and_nothing_is_left(how, fragments):
    # PyTorch says only "DataLoader worker (pid(s) N) exited unexpectedly" for the first three
    out = _run(_crash_at_3(how))
    assert out["exc"] == "RuntimeError", out
    for f in fragments:
        assert f in out["msg"], (f, out["msg"])
    assert out["children"] == 0


@pytest.mark.parametrize("what, exc, fragment", [
    ("threading.Lock()", "TypeError", "while sending batch 0"),
    ("lambda: 1", "AttributeError", "while sending batch 0"),
])
def test_a_worker_result_that_cannot_be_pickled_is_named(what, exc, fragment):
    # PyTorch's loader waits for the batch until its timeout ("DataLoader timed out after 30
    # seconds"); ember's worker reports the pickling error at once
    out = _run(f"""
dl = DataLoader(DS(lambda i: {what}), batch_size=None, num_workers=2, timeout=60)
t0 = time.monotonic()
out = outcome(lambda: next(iter(dl)))
out["fast"] = time.monotonic() - t0 < 50
print(json.dumps(out))
""")
    assert out["exc"] == exc and fragment in out["msg"] and out["fast"], out


def test_samples_of_inconsistent_shapes_name_the_field():
    out = _run("""
dl = DataLoader(DS(lambda i: ember.zeros(i % 3 + 1)), batch_size=2)
print(json.dumps(outcome(lambda: list(dl))))
""")
    assert out["exc"] == "RuntimeError"
    assert "sample 0 has shape [1] but sample 1 has shape [2]" in out["msg"], out


def test_a_sampler_index_the_dataset_refuses_is_reported_from_the_worker():
    out = _run("""
class Strict(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if not 0 <= i < 4:
            raise IndexError(f"index {i} out of range for 4 samples")
        return ember.tensor([float(i)])


dl = DataLoader(Strict(), sampler=[0, 1, 100], batch_size=2, num_workers=2, timeout=60)
print(json.dumps(outcome(lambda: list(dl))))
""")
    assert out["exc"] == "IndexError", out
    assert "index 100 out of range" in out["msg"] and "sample index 100" in out["msg"], out


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


_SLOW_LOADER = """
import ember
from ember.utils.data import DataLoader, Dataset
import multiprocessing as mp
import time


class Slow(Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        time.sleep(0.02)
        return ember.tensor([float(i)])


dl = DataLoader(Slow(), batch_size=2, num_workers=3, persistent_workers={persistent})
it = iter(dl)
next(it)
print("PIDS", [p.pid for p in mp.active_children()], flush=True)
for _ in it:
    pass
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
@pytest.mark.parametrize("persistent", [False, True])
def test_no_worker_outlives_an_interrupted_or_killed_main_process(sig, persistent):
    # SIGINT goes to the whole process group (a terminal's Ctrl-C reaches the workers too);
    # SIGKILL only to the main process, which then cannot clean up: the workers must notice.
    p = subprocess.Popen([sys.executable, "-c", _SLOW_LOADER.format(persistent=persistent)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        for line in p.stdout:
            if line.startswith("PIDS"):
                pids = json.loads(line[4:])
                break
            assert time.monotonic() < deadline
        assert len(pids) == 3
        time.sleep(0.5)
        if sig == "SIGINT":
            os.killpg(p.pid, signal.SIGINT)
        else:
            p.send_signal(signal.SIGKILL)
        _, err = p.communicate(timeout=60)
        if sig == "SIGINT":
            assert "KeyboardInterrupt" in err, err[-2000:]
        deadline = time.monotonic() + 30
        while any(_state(q) not in (None, "Z") for q in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [q for q in pids if _state(q) not in (None, "Z")] == [], "workers outlived main"
    finally:
        for q in pids:
            if _state(q) not in (None, "Z"):
                os.kill(q, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
            p.wait()
