"""Regression tests for the session-23 distributed compatibility round: the stores' queues,
list_keys, barrier and clone (and QueueEmptyError, DistNetworkError); ``torch.multiprocessing.
spawn``'s module path; the launcher's ChildFailedError / ProcessFailure report and torchrun's
exit code 1; new_group(sort_ranks=False), barrier(timeout=), all_gather_single /
reduce_scatter_single, HierarchicalModelAverager, fp16 / bf16_compress_wrapper and
GradBucket.set_buffer replacing the bucket's tensor; fully_shard's state dict hooks;
ZeroRedundancyOptimizer under Join; torch's backward of distributed.nn.functional.all_reduce
for every op; torch.distributed.launcher.api (elastic_launch, LaunchConfig)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

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


# ---- process groups: new_group(sort_ranks=), barrier(timeout=), the *_single names,
# object p2p use_batch, HierarchicalModelAverager, fp16 / bf16 compress wrappers ------------


def _groups_worker(rank: int, init: str, conn: Any) -> None:
    try:
        from collections import OrderedDict

        import ember
        import ember.nn as nn
        from ember.distributed.algorithms.ddp_comm_hooks import default_hooks
        from ember.distributed.algorithms.model_averaging.hierarchical_model_averager import (
            HierarchicalModelAverager,
        )
        from ember.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=4,
                                timeout=timedelta(seconds=60))
        out: dict[str, Any] = {}
        rev = dist.new_group([3, 1, 2, 0], sort_ranks=False)
        srt = dist.new_group([3, 1, 2, 0])
        out["rev_rank"] = dist.get_rank(rev)
        out["sorted_rank"] = dist.get_rank(srt)
        out["rev_ranks"] = dist.get_process_group_ranks(rev)
        t = ember.tensor([float(rank)])
        dist.broadcast(t, group=rev, group_src=0)  # group rank 0 of rev: global rank 3
        out["bcast"] = t.item()
        got = ember.zeros(4)
        dist.all_gather_single(got, ember.tensor([float(rank)]), group=rev)
        out["gather_rev_order"] = got.tolist()
        rs = ember.zeros(1)
        dist.reduce_scatter_single(rs, ember.arange(4.0) * (rank + 1))
        out["reduce_scatter_single"] = rs.tolist()
        with pytest.raises(ValueError, match="distinct"):
            dist.new_group([1, 1])

        t0 = time.monotonic()
        dist.barrier(timeout=timedelta(seconds=20))
        out["barrier_fast"] = time.monotonic() - t0 < 15
        pair = dist.new_group([0, 1])
        if rank == 0:
            t0 = time.monotonic()
            try:
                dist.barrier(group=pair, timeout=timedelta(seconds=0.5))
                out["barrier_timeout"] = None
            except RuntimeError as e:
                out["barrier_timeout"] = [type(e).__name__, round(time.monotonic() - t0) < 10]
        with pytest.raises(ValueError, match="positive"):
            dist.barrier(timeout=timedelta(seconds=0))

        if rank in (2, 3):
            sub = dist.new_group([2, 3])
            if rank == 2:
                dist.send_object_list([{"a": 1}, "b"], dst=3, group=sub, use_batch=True)
            else:
                objs: list = [None, None]
                dist.recv_object_list(objs, src=2, group=sub, use_batch=True)
                out["objects"] = objs
        else:
            dist.new_group([2, 3])

        # averaging: pairs every 2 steps, all 4 every 4, after 1 warm-up step
        w = nn.Parameter(ember.tensor([float(rank)]))
        w.grad = ember.zeros(1)  # (parameters without a gradient are not averaged, as torch)
        avg = HierarchicalModelAverager(OrderedDict([(2, 2), (4, 4)]), warmup_steps=1)
        trace = []
        for step in range(5):
            with ember.no_grad():
                w.add_(1.0 + rank)
            avg.average_parameters([w])
            trace.append(w.item())
        out["hier"] = trace

        m = DDP(nn.Linear(3, 2, bias=False))
        with ember.no_grad():
            m.module.weight.copy_(ember.tensor([[0.3, -0.2, 0.1], [0.05, 0.4, -0.35]]))
        seen = {}

        def avg_hook(state: Any, bucket: Any) -> Any:
            seen["dtype"] = str(bucket.buffer().dtype)
            fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
            return fut.then(lambda f: f.value()[0] / 4)

        m.register_comm_hook(None, default_hooks.bf16_compress_wrapper(avg_hook))
        x = ember.tensor([[1.0, 2.0, 3.0]]) * (rank + 1) / 3
        m(x).sum().backward()
        out["bf16_hook_saw"] = seen["dtype"]
        out["bf16_grad"] = m.module.weight.grad.tolist()
        dist.barrier()
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def group_results(tmp_path_factory: Any) -> list[dict]:
    from dist_helpers import run_ranks

    init = "file://" + str(tmp_path_factory.mktemp("s23g") / "store")
    return run_ranks(_groups_worker, 4, (init,), 240)


def test_new_group_sort_ranks_false_keeps_the_given_order(group_results):
    assert [r["rev_rank"] for r in group_results] == [3, 1, 2, 0]
    assert [r["sorted_rank"] for r in group_results] == [0, 1, 2, 3]
    assert all(r["rev_ranks"] == [3, 1, 2, 0] for r in group_results)
    assert all(r["bcast"] == 3.0 for r in group_results)
    # gathered in group-rank order: global ranks 3, 1, 2, 0
    assert all(r["gather_rev_order"] == [3.0, 1.0, 2.0, 0.0] for r in group_results)


def test_single_collective_names(group_results):
    # sum over ranks of arange(4) * (rank + 1) = arange(4) * 10; rank i keeps element i
    assert [r["reduce_scatter_single"] for r in group_results] == [[0.0], [10.0], [20.0],
                                                                    [30.0]]


def test_barrier_timeout(group_results):
    assert all(r["barrier_fast"] for r in group_results)
    # rank 1 never enters the pair's barrier: rank 0's gives up after its own 0.5 s
    assert group_results[0]["barrier_timeout"] == ["DistBackendError", True]


def test_object_p2p_use_batch(group_results):
    assert group_results[3]["objects"] == [{"a": 1}, "b"]


def test_hierarchical_model_averager(group_results):
    # w_r = r, +(1 + r) per step; step 0 warm-up; step 2 pair average; step 4 global average
    # (steps 1 and 3: no period divides them)
    def expected(rank: int) -> list[float]:
        w = [float(r) for r in range(4)]
        trace = []
        for step in range(5):
            w = [v + 1 + r for r, v in enumerate(w)]
            if step >= 1 and step % 4 == 0:
                w = [sum(w) / 4] * 4
            elif step >= 1 and step % 2 == 0:
                w = [(w[0] + w[1]) / 2] * 2 + [(w[2] + w[3]) / 2] * 2
            trace.append(w[rank])
        return trace

    for rank, r in enumerate(group_results):
        assert r["hier"] == pytest.approx(expected(rank)), rank
    assert group_results[0]["hier"] == pytest.approx([1.0, 2.0, 5.0, 6.0, 14.0])


def test_hierarchical_model_averager_argument_errors():
    from ember.distributed.algorithms.model_averaging.hierarchical_model_averager import (
        HierarchicalModelAverager,
    )

    with pytest.raises(ValueError, match="must not be empty"):
        HierarchicalModelAverager({})
    with pytest.raises(ValueError, match="positive"):
        HierarchicalModelAverager({0: 1})


def test_bf16_compress_wrapper(group_results):
    import numpy as np

    assert all(r["bf16_hook_saw"] == "ember.bfloat16" for r in group_results)
    # d(sum(W x))/dW = x per rank: x_r = [1, 2, 3] (r + 1) / 3, averaged: [1, 2, 3] * 2.5 / 3,
    # rounded through bfloat16 (each x_r first)
    xs = [np.array([1.0, 2.0, 3.0], np.float32) * (r + 1) / 3 for r in range(4)]
    grads = group_results[0]["bf16_grad"]
    exact = sum(xs) / 4
    assert np.allclose(grads, [exact, exact], rtol=1e-2)
    assert all(g == group_results[0]["bf16_grad"] for g in (r["bf16_grad"]
                                                          for r in group_results))
    # every value is a bfloat16 number (its low 16 bits zero)
    bits = np.asarray(grads, np.float32).view(np.uint32)
    assert (bits & 0xFFFF == 0).all()


def test_grad_bucket_set_buffer_replaces():
    import ember
    from ember.distributed.algorithms._comm_types import GradBucket

    b = GradBucket(0, ember.ones(4), [], [], True)
    half = b.buffer().half()
    b.set_buffer(half)
    assert b.buffer() is half and b.buffer().dtype == ember.float16
    with pytest.raises(ValueError, match="4 elements"):
        b.set_buffer(ember.ones(3))


def test_dist_network_error_on_unreachable_store():
    assert issubclass(dist.DistNetworkError, dist.DistError)
    assert not issubclass(dist.DistNetworkError, dist.DistStoreError)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(dist.DistNetworkError, match="cannot connect"):
        dist.TCPStore("127.0.0.1", port, 2, False, timedelta(seconds=0.3))


def test_group_api_signatures_match_torch():
    torch_dist = pytest.importorskip("torch.distributed")
    import inspect

    for name, param in (("new_group", "sort_ranks"), ("barrier", "timeout"),
                        ("send_object_list", "use_batch"), ("recv_object_list", "use_batch")):
        assert param in inspect.signature(getattr(torch_dist, name)).parameters
        assert param in inspect.signature(getattr(dist, name)).parameters
    for name in ("all_gather_single", "reduce_scatter_single", "DistNetworkError",
                 "QueueEmptyError"):
        assert hasattr(torch_dist, name) and hasattr(dist, name)


# ---- fully_shard: saving / loading state registers the sharded parameters first -------------


def _fsdp_gathered_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember
        import ember.nn as nn
        from ember.distributed.checkpoint.state_dict import (
            get_model_state_dict,
            get_optimizer_state_dict,
        )
        from ember.distributed.fsdp import fully_shard
        from ember.distributed.tensor import DTensor

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        ember.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
        fully_shard(m[0])
        fully_shard(m)
        opt = ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        m(ember.ones(2, 3)).sum().backward()
        opt.step()
        m(ember.ones(2, 3))  # a forward without backward: the root stays gathered
        out: dict[str, Any] = {
            "gathered": [type(p).__name__ for p in m.parameters()],
        }
        sd = m.state_dict()
        out["state_dict"] = {k: isinstance(v, DTensor) for k, v in sd.items()}
        out["after"] = [isinstance(p, DTensor) for p in m.parameters()]
        m(ember.ones(2, 3))
        osd = get_optimizer_state_dict(m, opt)
        out["optim_keys"] = sorted(osd["state"])
        msd = get_model_state_dict(m)
        m(ember.ones(2, 3))
        m.load_state_dict(msd)  # loading into a gathered root: its DTensors are loaded
        out["loaded"] = [isinstance(p, DTensor) for p in m.parameters()]
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


def test_fully_shard_state_dict_reshards_a_gathered_root(tmp_path):
    from dist_helpers import run_ranks

    res = run_ranks(_fsdp_gathered_worker, 2, ("file://" + str(tmp_path / "store"),), 180)
    for r in res:
        # torch's layout: the inner module's parameters are DTensors, the root's gathered
        assert r["gathered"] == ["DTensor", "DTensor", "Parameter", "Parameter"]
        assert r["state_dict"] == {"0.weight": True, "0.bias": True, "1.weight": True,
                                   "1.bias": True}
        assert r["after"] == [True] * 4 and r["loaded"] == [True] * 4
        assert r["optim_keys"] == ["0.bias", "0.weight", "1.bias", "1.weight"]


# ---- ZeroRedundancyOptimizer is a Joinable ----------------------------------------------------


def _zero_join_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember
        import ember.nn as nn
        from ember.distributed.algorithms.join import Join, Joinable
        from ember.distributed.optim import ZeroRedundancyOptimizer
        from ember.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        net = nn.Linear(2, 2, bias=False)
        with ember.no_grad():
            net.weight.copy_(ember.tensor([[1.0, 0.0], [0.0, 1.0]]))
        model = DDP(net)
        zopt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=ember.optim.SGD,
                                       lr=0.5)
        out: dict[str, Any] = {"joinable": isinstance(zopt, Joinable)}
        # rank 0: 3 batches, rank 1: 1; loss sum(W x) so dW = x (averaged over the ranks)
        n = 3 if rank == 0 else 1
        with Join([model, zopt]):
            for _ in range(n):
                model(ember.tensor([[1.0, 2.0]])).sum().backward()
                zopt.step()
                zopt.zero_grad()
        out["weight"] = model.module.weight.tolist()
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


def test_zero_redundancy_optimizer_under_join(tmp_path):
    from dist_helpers import run_ranks

    res = run_ranks(_zero_join_worker, 2, ("file://" + str(tmp_path / "store"),), 180)
    assert res[0]["joinable"] and res[1]["joinable"]
    # The single parameter is owned by rank 0. Step 1: both train, grad = [1, 2] in each row,
    # W -= 0.5 [1, 2]. Steps 2 and 3: rank 1 has joined; DDP averages rank 0's gradient with
    # the joined rank's zeros (divided by the initial world size): grad = [0.5, 1]; rank 0
    # owns W and updates it, then broadcasts: W -= 2 * 0.5 * [0.5, 1].
    expected = [[1.0 - 0.5 - 0.5, 0.0 - 1.0 - 1.0], [0.0 - 0.5 - 0.5, 1.0 - 1.0 - 1.0]]
    assert res[0]["weight"] == expected and res[1]["weight"] == expected


# ---- torch.distributed.nn.functional.all_reduce: every op has torch's backward --------------


def _nn_all_reduce_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember
        import ember.distributed.nn.functional as dfn

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        out: dict[str, Any] = {}
        for name, op in (("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN),
                         ("product", dist.ReduceOp.PRODUCT), ("sum", dist.ReduceOp.SUM)):
            x = ember.tensor([1.0 + rank, 4.0 - rank], requires_grad=True)
            y = dfn.all_reduce(x, op=op)
            (y * ember.tensor([2.0 + rank, 3.0 - 2 * rank])).sum().backward()
            out[name] = [y.tolist(), x.grad.tolist()]
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


def test_nn_functional_all_reduce_backward_for_every_op(tmp_path):
    from dist_helpers import run_ranks

    res = run_ranks(_nn_all_reduce_worker, 2, ("file://" + str(tmp_path / "store"),), 120)
    # inputs: rank 0 [1, 4], rank 1 [2, 3]; upstream gradients: rank 0 [2, 3], rank 1 [3, 1];
    # the backward all-reduces those with the forward's op (torch's rule)
    expected = {"max": [[2.0, 4.0], [3.0, 3.0]], "min": [[1.0, 3.0], [2.0, 1.0]],
                "product": [[2.0, 12.0], [6.0, 3.0]], "sum": [[3.0, 7.0], [5.0, 4.0]]}
    for r in res:
        assert r == expected


# ---- torch.distributed.launcher.api: elastic_launch / LaunchConfig --------------------------


def test_launch_config_checks():
    from ember.distributed.launcher.api import LaunchConfig, elastic_launch

    cfg = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2)
    assert cfg.max_restarts == 3 and cfg.role == "default_role" and cfg.start_method == "spawn"
    with pytest.raises(ValueError, match="min_nodes"):
        LaunchConfig(min_nodes=2, max_nodes=1, nproc_per_node=1)
    with pytest.raises(ValueError, match="nproc_per_node"):
        LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=0)
    with pytest.raises(NotImplementedError, match="one node"):
        elastic_launch(LaunchConfig(min_nodes=1, max_nodes=2, nproc_per_node=1), print)()
    with pytest.raises(ValueError, match="entrypoint"):
        elastic_launch(cfg, None)()
    with pytest.raises(TypeError, match="entrypoint"):
        elastic_launch(cfg, 3)()


def test_launch_config_matches_torch():
    api = pytest.importorskip("torch.distributed.launcher.api")
    import dataclasses

    from ember.distributed.launcher import api as mine

    theirs = {f.name for f in dataclasses.fields(api.LaunchConfig)}
    ours = {f.name for f in dataclasses.fields(mine.LaunchConfig)}
    assert theirs <= ours, theirs - ours


def test_elastic_launch_functions_restarts_and_failures(tmp_path):
    # a child Python: the entry points must be importable by the spawned workers
    mod = tmp_path / "entry.py"
    mod.write_text(
        "import os\n"
        "import ember, ember.distributed as dist\n"
        "def total(x):\n"
        "    dist.init_process_group('shm')\n"
        "    t = ember.tensor([x * (dist.get_rank() + 1)])\n"
        "    dist.all_reduce(t)\n"
        "    dist.destroy_process_group()\n"
        "    return t.item()\n"
        "def flaky():\n"
        "    n = int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
        "    if os.environ['RANK'] == '0' and n < 2:\n"
        "        raise KeyError('try ' + str(n))\n"
        "    return n\n")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import entry\n"
        "from ember.distributed.launcher.api import LaunchConfig, elastic_launch\n"
        "from ember.distributed.elastic.multiprocessing.errors import ChildFailedError\n"
        "cfg = lambda r: LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2,\n"
        "                              max_restarts=r, rdzv_endpoint='localhost:0')\n"
        "print(elastic_launch(cfg(0), entry.total)(1.5))\n"
        "print(elastic_launch(cfg(2), entry.flaky)())\n"
        "try:\n"
        "    elastic_launch(cfg(1), entry.flaky)()\n"
        "except ChildFailedError as e:\n"
        "    r, f = e.get_first_failure()\n"
        "    print(r, f.exitcode, f.message)\n")
    r = _python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["{0: 4.5, 1: 4.5}", "{0: 2, 1: 2}",
                                     "0 1 KeyError: 'try 1'"]


# ---- ddp_comm_hooks.register_ddp_comm_hook / DDPCommHookType / noop_hook -------------------


def _comm_hook_type_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember
        import ember.nn as nn
        from ember.distributed.algorithms.ddp_comm_hooks import (
            DDPCommHookType,
            register_ddp_comm_hook,
        )
        from ember.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        out: dict[str, Any] = {}
        for kind in ("ALLREDUCE", "NOOP", "POWER_SGD", "FP16_COMPRESS"):
            net = nn.Linear(2, 1, bias=False)
            with ember.no_grad():
                net.weight.fill_(1.0)
            m = DDP(net)
            register_ddp_comm_hook(DDPCommHookType[kind], m)
            x = ember.tensor([[1.0 + rank, 1.0 / 3.0 + rank]])
            m(x).sum().backward()
            out[kind] = m.module.weight.grad.tolist()[0]
            if kind == "POWER_SGD":
                state = m.reducer.comm_hook[0]
                out["psgd_state"] = [state.matrix_approximation_rank, state.start_powerSGD_iter]
        with pytest.raises(TypeError, match="DDPCommHookType"):
            register_ddp_comm_hook("ALLREDUCE", m)
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


def test_register_ddp_comm_hook_by_type(tmp_path):
    import numpy as np
    from dist_helpers import run_ranks

    res = run_ranks(_comm_hook_type_worker, 2, ("file://" + str(tmp_path / "store"),), 180)
    mean = [1.5, 1.0 / 3.0 + 0.5]
    for rank, r in enumerate(res):
        assert r["ALLREDUCE"] == pytest.approx(mean)
        assert r["NOOP"] == pytest.approx([1.0 + rank, 1.0 / 3.0 + rank])  # local, unreduced
        assert r["POWER_SGD"] == pytest.approx(mean)  # before start_powerSGD_iter: all-reduce
        assert r["psgd_state"] == [1, 1000]
        # the average of float16 halves: 1/6 -> float16 -> 0.16662598
        halves = np.float16(np.float32(1.0 / 3.0) / 2) + np.float16(np.float32(4.0 / 3.0) / 2)
        assert r["FP16_COMPRESS"] == [0.75 + 0.75, float(np.float32(np.float16(halves)))]


def test_ddp_comm_hook_type_names_match_torch():
    hooks = pytest.importorskip("torch.distributed.algorithms.ddp_comm_hooks")
    from ember.distributed.algorithms import ddp_comm_hooks as mine

    theirs = {m.name for m in hooks.DDPCommHookType} - {"QUANTIZE_PER_TENSOR",
                                                         "QUANTIZE_PER_CHANNEL"}
    assert theirs == {m.name for m in mine.DDPCommHookType}
    assert mine.default is mine.default_hooks and mine.powerSGD is mine.powerSGD_hook
