"""Hostile input, round 5 (ember.distributed part): groups used after destroy_process_group, and
timeouts that are negative, NaN or not durations.

A group destroyed with ``destroy_process_group(g)`` had its shared memory unmapped, and the next
collective on it crashed the process (a segfault in the shm backend's first read); it is now a
ValueError naming the group (PyTorch's gloo group keeps working after destroy; ember's can't, so
it says so). A negative timeout was accepted (PyTorch: gloo's RuntimeError "Invalid timeout"),
and a str was parsed as seconds; both are refused. The rest of round 5 is in
packages/core/tests/test_hostile_input_round5.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import timedelta

import ember.distributed as dist
import pytest


def _child(code: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter: a crash or hang there fails the test, not pytest."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


def test_a_destroyed_group_raises_instead_of_crashing(tmp_path):
    r = _child(f"""
        import json
        import ember, ember.distributed as d
        d.init_process_group("shm", init_method="file://{tmp_path / 'store'}", rank=0,
                             world_size=1)
        out = {{}}
        g = d.new_group([0])
        d.destroy_process_group(g)
        d.destroy_process_group(g)  # twice: nothing more to release
        for name, call in [("all_reduce", lambda: d.all_reduce(ember.ones(2), group=g)),
                           ("broadcast", lambda: d.broadcast(ember.ones(2), 0, group=g)),
                           ("barrier", lambda: d.barrier(group=g)),
                           ("get_rank", lambda: d.get_rank(g))]:
            try:
                call()
                out[name] = ["ok", ""]
            except Exception as e:
                out[name] = [type(e).__name__, str(e)]
        x = ember.ones(2)
        d.all_reduce(x)  # the default group is untouched
        out["world"] = x.tolist()
        h = d.new_group([0])  # and new groups work
        y = ember.ones(2)
        d.all_reduce(y, group=h)
        out["new"] = y.tolist()
        d.destroy_process_group()
        try:
            d.all_reduce(ember.ones(2), group=h)
        except Exception as e:
            out["after_world"] = [type(e).__name__, str(e)]
        print(json.dumps(out))
    """)
    assert r.returncode == 0, r.stderr[-3000:]  # before: -11 (SIGSEGV)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for name in ("all_reduce", "broadcast", "barrier", "get_rank"):
        exc, msg = out[name]
        assert exc == "ValueError", (name, exc, msg)
        assert "was destroyed by destroy_process_group" in msg and "new_group" in msg
    assert out["world"] == [1.0, 1.0] and out["new"] == [1.0, 1.0]
    assert out["after_world"][0] == "ValueError"
    assert "Default process group has not been initialized" in out["after_world"][1]


@pytest.mark.parametrize("timeout, exc, fragment", [
    (timedelta(seconds=-1), RuntimeError, "Invalid timeout: expected a non-negative duration"),
    (-5, RuntimeError, "Invalid timeout: expected a non-negative duration, got -5"),
    (float("nan"), RuntimeError, "Invalid timeout"),
    ("30", TypeError, "Expected timeout argument to be of type datetime.timedelta"),
    (True, TypeError, "Expected timeout argument to be of type datetime.timedelta"),
])
def test_init_process_group_refuses_a_bad_timeout(timeout, exc, fragment):
    with pytest.raises(exc, match=fragment):
        dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1,
                                timeout=timeout)
    assert not dist.is_initialized()


def test_new_group_refuses_a_negative_timeout_and_numbers_still_work(tmp_path):
    dist.init_process_group("shm", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1, timeout=30)  # a number of seconds, as before
    try:
        with pytest.raises(RuntimeError, match="Invalid timeout"):
            dist.new_group([0], timeout=timedelta(seconds=-2))
        g = dist.new_group([0], timeout=timedelta(seconds=0))  # zero is a duration
        assert dist.get_world_size(g) == 1
    finally:
        dist.destroy_process_group()
