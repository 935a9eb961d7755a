"""Regression tests for the session-23 distributed compatibility round: the stores' queues,
list_keys, barrier and clone (and QueueEmptyError); ``torch.multiprocessing.spawn``'s module
path; the launcher's ChildFailedError / ProcessFailure report and torchrun's exit code 1."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import ember.distributed as dist
import pytest


def _stores(tmp_path: Path) -> dict[str, dist.Store]:
    tcp = dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=10))
    return {"hash": dist.HashStore(), "tcp": tcp, "prefix": dist.PrefixStore("p", tcp),
            "prefix_hash": dist.PrefixStore("q", dist.HashStore())}


@pytest.mark.parametrize("kind", ["hash", "tcp", "prefix", "prefix_hash"])
def test_store_queues(tmp_path, kind):
    s = _stores(tmp_path)[kind]
    s.set_timeout(timedelta(seconds=0.3))
    assert s.queue_len("q") == 0
    s.queue_push("q", "a")
    s.queue_push("q", b"b")
    assert s.queue_len("q") == 2 and s.check(["q"])
    assert s.queue_pop("q") == b"a"
    assert s.queue_pop("q", block=False) == b"b"
    assert s.queue_len("q") == 0 and not s.check(["q"])
    with pytest.raises(dist.QueueEmptyError, match="empty"):
        s.queue_pop("q", block=False)
    t0 = time.monotonic()
    with pytest.raises(dist.DistStoreError) as info:
        s.queue_pop("q")
    assert not isinstance(info.value, dist.QueueEmptyError)
    assert 0.25 <= time.monotonic() - t0 < 5


def test_store_queue_pop_waits_for_a_push():
    s = dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=10))
    other = s.clone()
    threading.Timer(0.2, lambda: other.queue_push("jobs", "late")).start()
    assert s.queue_pop("jobs") == b"late"


def test_queue_empty_error_class():
    assert issubclass(dist.QueueEmptyError, dist.DistStoreError)
    assert issubclass(dist.QueueEmptyError, RuntimeError)


def test_store_list_keys_barrier_clone(tmp_path):
    tcp = dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=10))
    tcp.set("x", "1")
    assert tcp.list_keys() == ["x"]  # the joined-clients counter is not listed
    pre = dist.PrefixStore("job", tcp)
    pre.set("a", "2")
    pre.queue_push("q", "v")
    assert sorted(pre.list_keys()) == ["a", "q"]
    assert sorted(tcp.list_keys()) == ["job/a", "job/q", "x"]
    assert pre.clone().get("a") == b"2" and isinstance(pre.clone(), dist.PrefixStore)
    c = tcp.clone()
    assert isinstance(c, dist.TCPStore) and c.get("x") == b"1" and c.port == tcp.port
    h = dist.HashStore()
    h.set("k", "v")
    hc = h.clone()
    hc.set("k2", "w")
    assert h.get("k2") == b"w" and sorted(h.list_keys()) == ["k", "k2"]

    # a barrier of three threads, each on its own clone
    arrived = []

    def member(i):
        tcp.clone().barrier("b", 3, timedelta(seconds=10))
        arrived.append(i)

    ts = [threading.Thread(target=member, args=(i,)) for i in range(3)]
    for t in ts[:2]:
        t.start()
    time.sleep(0.2)
    assert arrived == []  # two of three wait
    ts[2].start()
    for t in ts:
        t.join(10)
    assert sorted(arrived) == [0, 1, 2]
    with pytest.raises(dist.DistStoreError):
        h.barrier("never", 2, timedelta(seconds=0.2))
    with pytest.raises(ValueError, match="world_size"):
        h.barrier("bad", 0)


def test_file_store_queue_unsupported_and_clone(tmp_path):
    fs = dist.FileStore(str(tmp_path / "fs"), 1)
    for call in (lambda: fs.queue_push("q", "a"), lambda: fs.queue_pop("q"),
                 lambda: fs.queue_len("q")):
        with pytest.raises(NotImplementedError, match="queue"):
            call()
    assert fs.has_extended_api() is False
    fs.set("k", "v")
    assert fs.clone().get("k") == b"v" and fs.list_keys() == ["k"]


def test_store_additions_match_torch():
    torch_dist = pytest.importorskip("torch.distributed")

    def trace(mod):
        s = mod.HashStore()
        s.set_timeout(timedelta(seconds=0.2))
        out = [s.queue_len("q")]
        s.queue_push("q", "1")
        s.queue_push("q", "2")
        out += [s.queue_len("q"), s.check(["q"]), s.queue_pop("q"), s.queue_pop("q", False),
                s.check(["q"])]
        try:
            s.queue_pop("q", block=False)
        except mod.DistStoreError as e:
            out.append(type(e).__name__)
        s.set("a", "x")
        out.append(sorted(s.list_keys()))
        p = mod.PrefixStore("ns", s)
        p.set("b", "y")
        out += [sorted(p.list_keys()), p.clone().get("b"), s.clone().get("a")]
        s.barrier("solo", 1)
        return out

    assert trace(dist) == trace(torch_dist) == [
        0, 2, True, b"1", b"2", False, "QueueEmptyError", ["a"], ["b"], b"y", b"x"]


def _env(**env: str) -> dict[str, str]:
    import ember

    e = dict(os.environ, **env)
    roots = {str(Path(p).parent) for p in ember.__path__}
    e["PYTHONPATH"] = os.pathsep.join([*roots, e.get("PYTHONPATH", "")])
    return e


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=_env(**env))


def test_multiprocessing_spawn_module_path():
    # torch.multiprocessing.spawn is the module of the spawn API (and the package's function)
    r = _python(
        "import ember.multiprocessing as mp\n"
        "from ember.multiprocessing.spawn import ProcessException, ProcessRaisedException, "
        "ProcessExitedException, ProcessContext, start_processes\n"
        "import sys\n"
        "m = sys.modules['ember.multiprocessing.spawn']\n"
        "assert callable(mp.spawn) and mp.spawn.__name__ == 'spawn', mp.spawn\n"
        "assert m.spawn is mp.spawn and issubclass(ProcessRaisedException, ProcessException)\n"
        "assert mp.ProcessExitedException is ProcessExitedException\n"
        "print('ok')\n")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_multiprocessing_spawn_module_path_through_the_torch_shim():
    shim = Path(__file__).resolve().parent / "compat_programs" / "torch_shim"
    r = _python(
        "import torch.multiprocessing as mp\n"
        "from torch.multiprocessing.spawn import ProcessException\n"
        "assert callable(mp.spawn) and mp.spawn.__name__ == 'spawn', mp.spawn\n"
        "print(ProcessException.__name__)\n",
        PYTHONPATH=str(shim) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    assert r.returncode == 0 and r.stdout.strip() == "ProcessException", r.stderr


def test_child_failed_error_and_process_failure(tmp_path):
    from ember.distributed.elastic.multiprocessing.errors import (
        ChildFailedError,
        ProcessFailure,
        record,
    )

    err = tmp_path / "error.json"

    @record
    def worker():
        raise KeyError("shard 3")

    os.environ["TORCHELASTIC_ERROR_FILE"] = str(err)
    try:
        with pytest.raises(KeyError):
            worker()
    finally:
        del os.environ["TORCHELASTIC_ERROR_FILE"]
    read = ProcessFailure(local_rank=1, pid=11, exitcode=1, error_file=str(err))
    assert read.message == "KeyError: 'shard 3'" and "raise KeyError" in read.traceback
    killed = ProcessFailure(local_rank=0, pid=10, exitcode=-15, error_file="",
                            timestamp=read.timestamp + 1)
    assert killed.signal_name() == "SIGTERM" and read.signal_name() == "<N/A>"
    e = ChildFailedError("train.py", {0: killed, 1: read})
    assert e.get_first_failure() == (1, read)
    msg = str(e)
    assert msg == e.format_msg() and "train.py FAILED" in msg
    root = msg[msg.index("Root Cause"):]
    assert "rank      : 1 (local_rank: 1)" in root and "KeyError: 'shard 3'" in root
    assert "exitcode  : -15 (pid: 10)  (SIGTERM)" in msg
    with pytest.raises(ValueError, match="at least one"):
        ChildFailedError("x", {})


def test_child_failed_error_matches_torch_api():
    errors = pytest.importorskip("torch.distributed.elastic.multiprocessing.errors")
    from ember.distributed.elastic.multiprocessing import errors as mine

    for mod in (errors, mine):
        f = mod.ProcessFailure(local_rank=2, pid=5, exitcode=3, error_file="")
        e = mod.ChildFailedError("job.py", {2: f})
        assert e.name == "job.py" and e.failures == {2: f} and e.get_first_failure() == (2, f)
        assert "job.py" in str(e) and "exitcode  : 3" in str(e)
        assert f.signal_name() == "<N/A>"


def test_launcher_raises_child_failed_error_exit_code_1(tmp_path):
    script = tmp_path / "w.py"
    script.write_text("import os, sys\nif os.environ['RANK'] == '1': sys.exit(5)\n")
    code = (
        "import sys\n"
        "from ember.distributed.run import parse_args, run\n"
        "from ember.distributed.elastic.multiprocessing.errors import ChildFailedError\n"
        f"args = parse_args(['--nproc-per-node', '2', {str(script)!r}])\n"
        "try:\n"
        "    run(args)\n"
        "except ChildFailedError as e:\n"
        "    rank, f = e.get_first_failure()\n"
        "    print(rank, f.local_rank, f.exitcode, sorted(e.failures))\n")
    r = _python(code)
    assert r.returncode == 0 and r.stdout.split() == ["1", "1", "5", "[1]"], r.stderr
    r = subprocess.run([sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2",
                        str(script)], capture_output=True, text=True, timeout=120, env=_env())
    assert r.returncode == 1  # torchrun's: the uncaught ChildFailedError
    assert "ChildFailedError" in r.stderr and "exitcode  : 5" in r.stderr
