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

``ember.save`` over an existing checkpoint the user may not write (made read-only to protect it)
replaced it: the save writes a temporary file and renames it over the target, and a rename
needs only the folder to be writable. ``open(path, "wb")`` (so PyTorch) refuses; ember.save now
raises PermissionError naming the file and keeps it (as root, where open() succeeds, the save
still goes through). Both formats; the temporary file is not left behind.
``ember.save(..., pickle_protocol="2")`` was a ValueError; PyTorch (pickle) raises TypeError for
a protocol that is not an int, and so does ember now (an int out of range stays a ValueError).

The rest of round 7: packages/nn/tests/test_nn_hostile_round7.py (optimizer state dicts from
another optimizer, load_state_dict into meta modules) and
packages/distributed/tests/test_dist_hostile_round7.py.
"""

from __future__ import annotations

import gc
import os
import pathlib
import shutil
import tempfile

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


def _save_as_another_user(path: str, fmt: str) -> str:
    """ember.save(..., path) as a user that does not own ``path`` (nobody, from root); the
    exception's class and message, or "saved"."""
    def attempt() -> str:
        try:
            ember.save({"v": ember.zeros(2)}, path, format=fmt)
            return "saved"
        except Exception as e:  # noqa: BLE001  (reported to the test)
            return f"{type(e).__name__}: {e}"

    if os.geteuid() != 0:
        return attempt()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child drops root, tries, reports through the pipe
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            os.write(w, attempt().encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return out


@pytest.fixture
def open_folder():
    """A folder anyone may reach and create files in (pytest's tmp_path is under a folder only
    its owner may enter): there a rename over the target would succeed."""
    folder = tempfile.mkdtemp(prefix="ember_ro_")
    os.chmod(folder, 0o777)
    try:
        yield pathlib.Path(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("fmt", ["ember", "torch"])
def test_save_over_a_read_only_checkpoint_is_refused_and_keeps_it(open_folder, fmt):
    tmp_path = open_folder
    path = tmp_path / "ck.pt"
    ember.save({"v": ember.ones(2)}, path, format=fmt)
    os.chmod(path, 0o444)
    out = _save_as_another_user(str(path), fmt)
    assert out.startswith("PermissionError: [Errno 13] ember.save: the target file is not "
                          "writable (it is kept as it is)"), out
    assert ember.load(path)["v"].tolist() == [1.0, 1.0]
    assert sorted(os.listdir(tmp_path)) == ["ck.pt"]  # no temporary file left


def test_save_over_a_writable_checkpoint_still_replaces_it(tmp_path):
    path = tmp_path / "ck.pt"
    ember.save({"v": ember.ones(2)}, path)
    os.chmod(path, 0o640)
    ember.save({"v": ember.zeros(2)}, path)
    assert ember.load(path)["v"].tolist() == [0.0, 0.0]
    assert os.stat(path).st_mode & 0o777 == 0o640  # its mode is kept


@pytest.mark.parametrize("protocol, exc", [("2", TypeError), (2.0, TypeError),
                                           (1, ValueError), (99, ValueError)])
def test_a_pickle_protocol_that_is_not_an_int_is_a_type_error(tmp_path, protocol, exc):
    path = tmp_path / "ck.pt"
    ember.save({"v": ember.ones(1)}, path)
    with pytest.raises(exc, match=r"ember.save: pickle_protocol must be an int from 2 to"):
        ember.save({"v": ember.zeros(1)}, path, pickle_protocol=protocol)
    assert ember.load(path)["v"].tolist() == [1.0]
    ember.save({"v": ember.zeros(1)}, path, pickle_protocol=4)
    assert ember.load(path)["v"].tolist() == [0.0]


def test_torch_refuses_a_str_pickle_protocol_with_a_type_error(tmp_path):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        torch.save({}, tmp_path / "t.pt", pickle_protocol="2")
