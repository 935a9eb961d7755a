"""Regression tests for what the PyTorch distributed programs in compat_programs/ found
(test_compat_dist_programs.py runs the programs): get_backend of a new_group under a "gloo"
default group, the "gloo" alias logging below WARNING, and a rank that reaches a barrier after
a peer gave up on it failing instead of passing."""

from __future__ import annotations

import logging
import multiprocessing as mp
import time
import traceback
from datetime import timedelta

import ember.distributed as dist
import pytest
from ember.distributed import distributed_c10d


@pytest.fixture
def world1():
    """A one-rank world from a HashStore, made by the test's backend argument."""
    made = []

    def make(backend):
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        made.append(1)

    yield make
    if dist.is_initialized():
        dist.destroy_process_group()


def test_new_group_reports_the_gloo_name(world1):
    # torch: dist.get_backend(new_group(...)) under a gloo world is "gloo"; ember runs it on shm
    world1("gloo")
    g = dist.new_group([0])
    g_shm = dist.new_group([0], backend="shm")
    g_gloo = dist.new_group([0], backend="GLOO")
    assert dist.get_backend() == "gloo"
    assert dist.get_backend(g) == "gloo" and g.name() == "shm"
    assert dist.get_backend(g_shm) == "shm"
    assert dist.get_backend(g_gloo) == "gloo"


def test_new_group_under_shm_says_shm(world1):
    world1("shm")
    assert dist.get_backend(dist.new_group([0])) == "shm"


def test_gloo_alias_is_not_a_warning(world1, monkeypatch, caplog):
    # every rank of every ported program would print it on stderr
    monkeypatch.setattr(distributed_c10d, "_logged_gloo", False)
    with caplog.at_level(logging.WARNING, logger="ember.distributed"):
        world1("gloo")
    assert not [r for r in caplog.records if "runs as" in r.getMessage()]


def _late_barrier(rank: int, init: str, q) -> None:
    try:
        import ember.distributed as d

        d.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                             timeout=timedelta(seconds=30))
        if rank == 1:
            time.sleep(1.5)  # arrives after rank 0 gave up
        try:
            d.monitored_barrier(timeout=timedelta(seconds=0.5))
            outcome = "passed"
        except RuntimeError as e:
            outcome = str(e)
        d.destroy_process_group()
        q.put((rank, outcome))
    except BaseException:  # noqa: BLE001
        q.put((rank, "error: " + traceback.format_exc()))


def test_late_rank_fails_a_barrier_its_peer_gave_up_on(tmp_path):
    # Before: rank 0 timed out (and aborted the group), yet rank 1, arriving later, passed the
    # barrier because rank 0 had entered it; torch's rank 1 fails (its peer left).
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_late_barrier, args=(r, f"file://{tmp_path / 'store'}", q))
             for r in range(2)]
    for p in procs:
        p.start()
    got = dict(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    assert "did not reach it" in got[0] and "rank(s) [1]" in got[0], got[0]
    assert got[1] != "passed" and "rank 0 aborted the group" in got[1], got[1]


def test_record_writes_the_error_file_the_launcher_reads(tmp_path, monkeypatch):
    # torchrun scripts decorate main with torch.distributed.elastic...errors.record
    from ember.distributed._launcher import _read_error_file
    from ember.distributed.elastic.multiprocessing.errors import record

    err = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(err))

    @record
    def main(x):
        raise KeyError(f"bad {x}")

    with pytest.raises(KeyError, match="bad 3"):
        main(3)
    info = _read_error_file(str(err))
    assert info["message"] == "KeyError: 'bad 3'"
    assert "raise KeyError" in info["traceback"] and info["timestamp"] > 0

    @record()
    def ok():
        return 5

    @record
    def leave():
        raise SystemExit(0)

    assert ok() == 5 and ok.__name__ == "ok" and leave() is None
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE")
    err.unlink()
    with pytest.raises(ValueError):
        record(lambda: (_ for _ in ()).throw(ValueError("x")))()
    assert not err.exists()


def test_zero_redundancy_optimizer_on_one_rank_is_the_plain_optimizer(world1):
    # torch.distributed.optim.ZeroRedundancyOptimizer was missing (the two-rank sharding runs
    # in compat_programs/local_sgd.py)
    import ember
    from ember.distributed.optim import ZeroRedundancyOptimizer

    world1("gloo")
    ember.manual_seed(0)
    a = ember.nn.Linear(4, 3)
    b = ember.nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    zero = ZeroRedundancyOptimizer(a.parameters(), optimizer_class=ember.optim.AdamW, lr=0.05,
                                   weight_decay=0.1)
    plain = ember.optim.AdamW(b.parameters(), lr=0.05, weight_decay=0.1)
    x = ember.randn(5, 4)
    for step in range(3):
        for m, o in ((a, zero), (b, plain)):
            o.zero_grad()
            m(x).pow(2).sum().backward()
            o.step()
        if step == 0:
            zero.param_groups[0]["lr"] = plain.param_groups[0]["lr"] = 0.02  # a scheduler
    assert all(ember.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    with pytest.raises(RuntimeError, match="consolidate_state_dict"):
        zero.state_dict()
    zero.consolidate_state_dict(to=0)
    sd, ref = zero.state_dict(), plain.state_dict()
    assert sd["param_groups"][0]["params"] == [0, 1] and sd["param_groups"][0]["lr"] == 0.02
    assert ember.equal(sd["state"][1]["exp_avg_sq"], ref["state"][1]["exp_avg_sq"])
    fresh = ZeroRedundancyOptimizer(a.parameters(), optimizer_class=ember.optim.AdamW, lr=1.0)
    fresh.load_state_dict(ref)
    assert fresh.param_groups[0]["lr"] == 0.02 and fresh.optim.param_groups[0]["lr"] == 0.02
    assert ember.equal(fresh.optim.state[a.bias]["exp_avg"], plain.state[b.bias]["exp_avg"])


def test_zero_redundancy_optimizer_partition_is_torchs(world1):
    # per group, largest first, each to the rank with the fewest elements so far
    import ember
    from ember.distributed.optim import ZeroRedundancyOptimizer

    world1("gloo")
    ps = [ember.nn.Parameter(ember.zeros(n)) for n in (3, 10, 4, 6)]
    extra = ember.nn.Parameter(ember.zeros(5))
    zero = ZeroRedundancyOptimizer([{"params": ps}, {"params": [extra], "lr": 0.5}],
                                   optimizer_class=ember.optim.SGD, lr=0.1)
    zero.world_size = 2  # the partition as two ranks would compute it
    parts = zero._partition_parameters()
    sizes = [[[p.numel() for p in g["params"]] for g in rank] for rank in parts]
    assert sizes == [[[10, 3], []], [[6, 4], [5]]]  # 3 goes to rank 0 on the 10-10 tie
    assert parts[1][1]["lr"] == 0.5 and parts[0][0]["lr"] == 0.1
    with pytest.raises(NotImplementedError, match="overlap_with_ddp"):
        ZeroRedundancyOptimizer(ps, optimizer_class=ember.optim.SGD, overlap_with_ddp=True,
                                lr=0.1)


def test_spawn_exceptions_carry_torchs_error_pid():
    # torch.multiprocessing.ProcessRaisedException has error_pid (ember had only pid)
    import pickle

    import ember.multiprocessing as emp

    e = emp.ProcessRaisedException("boom", 1, 4242)
    assert (e.error_index, e.error_pid, e.pid) == (1, 4242, 4242)
    x = pickle.loads(pickle.dumps(emp.ProcessExitedException("m", 0, 77, -9, "SIGKILL")))
    assert (x.error_pid, x.exit_code, x.signal_name) == (77, -9, "SIGKILL")


def test_initializing_twice_is_a_value_error(world1):
    # torch raises ValueError("trying to initialize the default process group twice!")
    world1("gloo")
    with pytest.raises(ValueError, match="twice"):
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    assert dist.get_world_size() == 1


def test_differentiable_collectives_on_one_rank(world1):
    # torch.distributed.nn.functional was missing (two ranks: compat_programs/
    # tensor_collectives.py)
    import ember
    from ember.distributed.nn import functional as dnn

    world1("gloo")
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (out,) = dnn.all_gather(x)
    y = dnn.all_reduce(x * 2)
    b = dnn.broadcast(x, src=0)
    (out * 3 + y + b).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]
    assert out.tolist() == [1.0, 2.0] and not out.data_ptr() == x.data_ptr()
    z = ember.tensor([4.0], requires_grad=True)
    r = dnn.reduce_scatter(ember.empty(1), [z])
    (a2a,) = dnn.all_to_all([ember.empty(1)], [z * 5])
    (r + a2a).sum().backward()
    assert z.grad.tolist() == [6.0]
    # MAX's backward: the gradients all-reduced with MAX, as torch's (one rank: unchanged)
    x.grad = None
    (dnn.all_reduce(x, op=dist.ReduceOp.MAX) * ember.tensor([2.0, 5.0])).sum().backward()
    assert x.grad.tolist() == [2.0, 5.0]


def test_ddp_set_static_graph_after_construction(world1):
    # torch's DistributedDataParallel._set_static_graph(), called by training frameworks
    import ember
    from ember.nn.parallel import DistributedDataParallel as DDP

    world1("gloo")

    class TwoHeads(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = ember.nn.Linear(2, 1)
            self.unused = ember.nn.Linear(2, 1)

        def forward(self, x):
            return self.a(x)

    ddp = DDP(TwoHeads())
    ddp._set_static_graph()
    assert ddp.static_graph and ddp.reducer.static_graph
    for _ in range(2):  # a parameter unused in every iteration is fine with a static graph
        ddp.zero_grad()
        ddp(ember.ones(3, 2)).sum().backward()
    assert ddp.module.a.weight.grad.tolist() == [[3.0, 3.0]]
    assert ddp.module.unused.weight.grad is None


def test_launcher_takes_torchruns_rendezvous_flags():
    # PyTorch's tutorials launch with --rdzv-id / --rdzv-backend=c10d / --rdzv-endpoint; ember's
    # launcher rejected them as unrecognized arguments
    from ember.distributed.run import config_from_args, parse_args

    cfg = config_from_args(parse_args([
        "--nnodes=1", "--nproc-per-node=2", "--rdzv-id=100", "--rdzv-backend=c10d",
        "--rdzv-endpoint=node0:29411", "--start-method=fork", "train.py", "--lr", "1"]))
    assert (cfg.master_addr, cfg.master_port, cfg.run_id) == ("node0", 29411, "100")
    cfg = config_from_args(parse_args(["--nproc_per_node=2", "--rdzv_backend=c10d",
                                       "--rdzv_endpoint=localhost:0", "--rdzv_conf=x=1", "t.py"]))
    assert cfg.master_addr == "localhost" and 0 < cfg.master_port < 65536
    # explicit master flags win over the endpoint; the endpoint alone keeps the default port
    cfg = config_from_args(parse_args(["--master_addr=10.0.0.1", "--master_port=1234",
                                       "--rdzv_endpoint=h:5", "t.py"]))
    assert (cfg.master_addr, cfg.master_port) == ("10.0.0.1", 1234)
    cfg = config_from_args(parse_args(["--rdzv_endpoint=h", "t.py"]))
    assert (cfg.master_addr, cfg.master_port) == ("h", 29500)
    cfg = config_from_args(parse_args(["t.py"]))
    assert (cfg.master_addr, cfg.master_port, cfg.run_id) == ("127.0.0.1", 29500, "none")
    with pytest.raises(ValueError, match="'etcd' is not supported"):
        config_from_args(parse_args(["--rdzv_backend=etcd", "t.py"]))
    with pytest.raises(ValueError, match="single node"):
        config_from_args(parse_args(["--nnodes=2", "--rdzv_endpoint=h:0", "t.py"]))


def test_utils_data_submodules_are_the_data_modules():
    # torch.utils.data.distributed's path: ember.utils.data.distributed was a second copy of
    # ember.data.distributed (and of ember.data.sampler), so its DistributedSampler was not an
    # ember.data.Sampler
    import importlib
    import sys

    import ember.data

    dup = importlib.import_module("ember.utils.data.distributed")
    assert dup is sys.modules["ember.data.distributed"]
    assert importlib.import_module("ember.utils.data.sampler") is sys.modules["ember.data.sampler"]
    assert isinstance(dup.DistributedSampler(list(range(4)), num_replicas=2, rank=0),
                      ember.data.Sampler)
    with pytest.raises(ImportError):
        importlib.import_module("ember.utils.data.no_such_module")


def test_store_errors_are_dist_errors():
    # torch: DistStoreError < DistError < RuntimeError, so `except dist.DistError` catches a
    # rendezvous timeout
    assert issubclass(dist.DistStoreError, dist.DistError)
    assert issubclass(dist.DistStoreError, RuntimeError)
    store = dist.HashStore()
    store.set_timeout(timedelta(seconds=0.1))
    with pytest.raises(dist.DistError):
        store.get("never-set")


def test_complex_tensors_in_collectives(world1):
    # torch's all_reduce (SUM / AVG), broadcast and all_gather take complex tensors (as their
    # real view); ember said "unsupported dtype complex64"
    import ember

    world1("gloo")
    x = ember.tensor([1 + 2j, -3j])
    dist.all_reduce(x)
    assert x.tolist() == [1 + 2j, -3j] and x.dtype == ember.complex64
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    dist.broadcast(x, src=0)
    out = [ember.zeros(2, dtype=ember.complex64)]
    dist.all_gather(out, x)
    assert out[0].tolist() == [1 + 2j, -3j]
    flat = ember.zeros(2, dtype=ember.complex64)
    dist.all_gather_into_tensor(flat, x)
    assert flat.tolist() == [1 + 2j, -3j]
    with pytest.raises(ValueError, match="does not support .*MAX.* on complex"):
        dist.all_reduce(x, op=dist.ReduceOp.MAX)


def test_reduce_op_prints_like_torch():
    assert str(dist.ReduceOp.MAX) == "RedOpType.MAX" and f"{dist.ReduceOp.SUM}" == "RedOpType.SUM"
    assert repr(dist.ReduceOp.AVG) == "<RedOpType.AVG: 1>"
    assert dist.ReduceOp.MAX == 4 and dist.ReduceOp("max") is dist.ReduceOp.MAX


def test_cpu_device_id_is_a_clear_value_error():
    # torch: ValueError "device_id parameter must be an accelerator with an index"; ember went
    # looking for NCCL and failed with a RuntimeError about libnccl
    import ember

    for dev in (ember.device("cpu"), "cpu", ember.device("cuda")):
        with pytest.raises(ValueError, match="must be an accelerator with an index"):
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,
                                    device_id=dev)
        assert not dist.is_initialized()


def test_process_group_names(world1):
    # torch's ProcessGroup.group_name / group_desc / bound_device_id
    world1("gloo")
    world = dist.group.WORLD
    assert world.group_name == "WORLD" and world.bound_device_id is None
    g = dist.new_group([0], group_desc="experts")
    assert g.group_name == g.group_desc == "experts"
    assert dist.new_group([0]).group_name.startswith("group")
