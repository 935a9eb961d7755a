"""Hostile input, round 7: the profiler driven out of order.

``profile.step()`` on a profile never started (no ``with``, no ``start()``) started the
process-wide profiler for the schedule's first active step, and nothing was left to stop it:
every later ``profile()`` in the process failed with "a profiler is already running" (PyTorch:
``step()`` before start is an AssertionError). It is now a RuntimeError naming the call, and a
profile dropped while recording (``start()`` without ``stop()``, say an exception between them)
stops the profiler when it is collected, so the next one can run. Starting a second profile
while another one records says which (the step it is at) and how to end it.

``record_function.__exit__`` without an ``__enter__`` was ``IndexError: pop from empty list``; it
is now a RuntimeError naming the range.

The rest of round 7: packages/nn/tests/test_nn_hostile_round7.py (optimizer state dicts from
another optimizer, load_state_dict into meta modules) and
packages/distributed/tests/test_dist_hostile_round7.py.
"""

from __future__ import annotations

import gc

import ember
import pytest
from ember.profiler import profile, record_function, schedule


def _a_profile_runs() -> bool:
    with profile() as p:
        ember.ones(2) + 1
    return any(e.name == "aten::add" for e in p.events())


def test_step_before_start_is_refused_and_leaves_nothing_running():
    p = profile(schedule=schedule(wait=0, warmup=0, active=1))
    with pytest.raises(RuntimeError, match=r"profile.step: the profiler is not started \(enter "
                                           r"its `with` block or call start\(\) first\)"):
        p.step()
    del p
    assert _a_profile_runs()


def test_step_after_stop_is_refused():
    p = profile(schedule=schedule(wait=0, warmup=0, active=1))
    with p:
        p.step()
    with pytest.raises(RuntimeError, match="profile.step: the profiler is not started"):
        p.step()
    assert _a_profile_runs()


def test_torch_refuses_step_before_start():
    torch = pytest.importorskip("torch")
    p = torch.profiler.profile(schedule=torch.profiler.schedule(wait=0, warmup=0, active=1))
    with pytest.raises(AssertionError):
        p.step()


def test_a_profile_dropped_while_recording_frees_the_profiler():
    p = profile()
    p.start()
    ember.ones(2) * 2
    del p
    gc.collect()
    assert _a_profile_runs()


def test_a_second_profile_names_the_one_still_recording():
    p = profile()
    p.start()
    try:
        ember.ones(2) * 2
        with pytest.raises(RuntimeError, match=r"a profiler is already running \(one "
                                               r"ember.profiler.profile at a time; the other was "
                                               r"started at step 0 and not stopped\): leave its "
                                               r"`with` block or call its stop\(\) first"):
            with profile():
                pass
    finally:
        p.stop()
    assert any(e.name == "aten::mul" for e in p.events())  # the first kept its trace
    assert _a_profile_runs()


def test_a_scheduled_profile_still_steps_and_saves():
    seen = []
    with profile(schedule=schedule(wait=1, warmup=0, active=1),
                 on_trace_ready=lambda pr: seen.append(len(pr.events()))) as p:
        for _ in range(3):
            ember.ones(2) + 1
            p.step()
    assert seen and all(n > 0 for n in seen)


def test_record_function_exit_without_enter_names_the_range():
    r = record_function("load")
    with pytest.raises(RuntimeError, match=r"record_function\('load'\): __exit__ without a "
                                           r"matching __enter__"):
        r.__exit__(None, None, None)
    with r:  # still usable the ordinary way
        pass
    with profile() as p:
        with r:
            ember.ones(2) + 1
    assert [e.name for e in p.events() if e.name == "load"] == ["load"]
