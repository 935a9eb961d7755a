"""Regression tests for the session-25 distributed compatibility round: randperm on torch's
MT19937 stream (so DistributedSampler / random_split / RandomSampler / a shuffling DataLoader
seeded as in a torch script give torch's order), DDP's bucket layout as torch builds it (one bucket in registration
order until the rebuild in the ready order; no rebuild with find_unused_parameters; a small
first bucket only with the default cap), Work.source_rank(), torchrun's --role, and the
messages of gather / scatter on the wrong rank and of monitored_barrier."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import ember
import ember.distributed as dist
import ember.nn as nn
import pytest
from ember.data import DistributedSampler, RandomSampler, random_split
from ember.distributed.algorithms.ddp_comm_hooks import default_hooks
from ember.nn.parallel import DistributedDataParallel as DDP

# ---- randperm: torch's permutations for torch's seeds -----------------------------------------


def _gen(seed: int) -> ember.Generator:
    g = ember.Generator()
    g.manual_seed(seed)
    return g


def test_randperm_gives_torchs_permutation_for_a_seed():
    g = _gen(0)
    assert ember.randperm(10, generator=g).tolist() == [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]
    assert ember.randperm(5, generator=g).tolist() == [3, 2, 4, 0, 1]  # the stream goes on
    assert ember.randperm(8, generator=_gen(2**40 + 3)).tolist() == [2, 4, 3, 5, 1, 0, 6, 7]
    assert ember.randperm(7, generator=ember.Generator()).tolist() == [4, 3, 0, 1, 2, 6, 5]
    ember.manual_seed(5)
    assert ember.randperm(6).tolist() == [5, 0, 1, 3, 4, 2]
    got = ember.randperm(6, generator=_gen(5), dtype=ember.int32)
    assert got.dtype == ember.int32 and got.tolist() == [5, 0, 1, 3, 4, 2]
    assert ember.randperm(1, generator=_gen(1)).tolist() == [0]
    assert ember.randperm(0, generator=_gen(1)).tolist() == []


def test_samplers_and_splits_follow_torchs_order():
    a, b = random_split(range(10), [7, 3], generator=_gen(42))
    assert [list(a), list(b)] == [[2, 6, 1, 8, 4, 5, 0], [9, 3, 7]]
    s = DistributedSampler(range(11), num_replicas=2, rank=1, seed=5)
    s.set_epoch(2)
    assert list(s) == [0, 2, 8, 10, 7, 3]
    assert list(RandomSampler(range(6), generator=_gen(5))) == [5, 0, 1, 3, 4, 2]


def test_dataloader_shuffle_with_a_generator_follows_torch():
    # the loader's seed draw and the sampler's trailing (empty) permutation move the generator
    # as torch's do, so every epoch's order is torch's
    from ember.data import DataLoader

    dl = DataLoader(list(range(10)), batch_size=3, shuffle=True, generator=_gen(0))
    assert [b.tolist() for b in dl] == [[3, 7, 5], [2, 0, 8], [1, 6, 9], [4]]
    assert [b.tolist() for b in dl] == [[1, 3, 2], [7, 5, 9], [0, 6, 4], [8]]


def test_dataloader_shuffle_with_a_generator_matches_torch():
    torch = pytest.importorskip("torch")
    from ember.data import DataLoader

    tg = torch.Generator()
    tg.manual_seed(7)
    tdl = torch.utils.data.DataLoader(list(range(13)), batch_size=4, shuffle=True, generator=tg)
    dl = DataLoader(list(range(13)), batch_size=4, shuffle=True, generator=_gen(7))
    for _ in range(3):
        assert [b.tolist() for b in dl] == [b.tolist() for b in tdl]


def test_randperm_is_a_function_of_the_generator_state():
    g = _gen(3)
    ember.randperm(20, generator=g)
    state = g.get_state()
    second = ember.randperm(9, generator=g).tolist()
    ember.randperm(4, generator=_gen(11))  # another stream in between on this thread
    h = ember.Generator()
    h.set_state(state)
    assert ember.randperm(9, generator=h).tolist() == second
    # far along the counter (other random ops moved it): still deterministic, a permutation
    g1, g2 = _gen(7), _gen(7)
    ember.rand(5 << 22, generator=g1)
    ember.rand(5 << 22, generator=g2)
    p1, p2 = ember.randperm(50, generator=g1).tolist(), ember.randperm(50, generator=g2).tolist()
    assert p1 == p2 and sorted(p1) == list(range(50))


def test_randperm_between_other_random_ops_is_deterministic_and_cheap():
    # a training loop's randperm(n)[:b] with dropout moving the counter in between: every call
    # misses the cached stream; it is reseeded from (seed, offset) rather than replayed
    g, h = _gen(5), _gen(5)
    x, y = ember.empty(4000), ember.empty(4000)
    got, again = [], []
    for _ in range(40):  # the counter passes 2**14 draws on the way
        x.normal_(generator=g)
        got.append(ember.randperm(16, generator=g).tolist())
        y.normal_(generator=h)
        again.append(ember.randperm(16, generator=h).tolist())
    assert got == again and all(sorted(p) == list(range(16)) for p in got)
    assert len({tuple(p) for p in got}) > 30  # the permutations differ from call to call


def test_randperm_matches_torch():
    torch = pytest.importorskip("torch")
    for seed in (0, 1, 123456789, 2**33 + 5):
        tg, g = torch.Generator(), _gen(seed)
        tg.manual_seed(seed)
        for n in (2, 17, 1000):
            assert ember.randperm(n, generator=g).tolist() == \
                torch.randperm(n, generator=tg).tolist()


# ---- DDP's buckets as torch lays them out ------------------------------------------------------


@pytest.fixture
def world1():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _bucket_views(lib: Any, ddp_cls: Any, hooks: Any, **kwargs: Any) -> list:
    """Per iteration, what a comm hook sees: (index, is_last, gradient shapes) per bucket;
    lib is ember or torch."""
    model = ddp_cls(lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Linear(4, 5),
                                      lib.nn.Linear(5, 2)), **kwargs)
    seen: list = []

    def spy(state, bucket):  # (torch checks a hook's annotations: none here)
        seen[-1].append((bucket.index(), bucket.is_last(),
                         [list(g.shape) for g in bucket.gradients()]))
        return hooks.allreduce_hook(state, bucket)

    model.register_comm_hook(None, spy)
    for _ in range(3):
        seen.append([])
        model(lib.ones(2, 3)).sum().backward()
    return seen


FORWARD = [[4, 3], [4], [5, 4], [5], [2, 5], [2]]
READY = FORWARD[::-1]


@pytest.mark.parametrize("kwargs, orders", [
    ({}, [FORWARD, READY, READY]),  # rebuilt after the first iteration
    ({"find_unused_parameters": True}, [FORWARD] * 3),  # never rebuilt
    ({"static_graph": True}, [FORWARD, FORWARD, READY]),  # rebuilt after the second
])
def test_ddp_bucket_order_per_iteration(world1, kwargs, orders):
    got = _bucket_views(ember, DDP, default_hooks, **kwargs)
    assert got == [[(0, True, o)] for o in orders]


def test_ddp_bucket_order_matches_torch(world1):
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as thooks
    from torch.nn.parallel import DistributedDataParallel as TDDP

    tdist.init_process_group("gloo", store=tdist.HashStore(), rank=0, world_size=1)
    try:
        for kwargs in ({}, {"find_unused_parameters": True}, {"static_graph": True}):
            assert _bucket_views(torch, TDDP, thooks, **kwargs) == \
                _bucket_views(ember, DDP, default_hooks, **kwargs)
    finally:
        tdist.destroy_process_group()


def test_ddp_initial_buckets_with_find_unused_parameters(world1):
    # sized in registration order, then reversed: bucket 0 holds the last layers, each bucket
    # its parameters in registration order; an explicit cap has no 1 MiB first bucket
    model = nn.Sequential(nn.Linear(300, 300), nn.Linear(300, 400), nn.Linear(400, 600),
                          nn.Linear(600, 2))
    ddp = DDP(model, bucket_cap_mb=0.3, find_unused_parameters=True)
    names = [n for n, _ in model.named_parameters()]
    assert [[names[i] for i in b] for b in ddp.reducer.bucket_indices] == [
        ["2.bias", "3.weight", "3.bias"], ["1.bias", "2.weight"], ["0.bias", "1.weight"],
        ["0.weight"]]
    # the default cap (25 MiB) keeps torch's 1 MiB first bucket for the first gradients
    ddp = DDP(nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 512), nn.Linear(512, 512)),
              find_unused_parameters=True)
    # (the first weight fills it; the rest share the last bucket, reduced first)
    assert [b.buffer.numel() * 4 for b in ddp.reducer.buckets] == [4 * (3 * 512 * 512 + 3 * 512
                                                                     - 512 * 512), 512 * 512 * 4]


# ---- Work.source_rank, and the wrong-rank / monitored_barrier messages -------------------------


def _worker(rank: int, init: str, conn: Any) -> None:
    try:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        out: dict[str, Any] = {}
        rev = dist.new_group([1, 0], sort_ranks=False)
        if rank == 0:
            dist.send(ember.tensor([1.0]), dst=1)
            dist.send(ember.tensor([2.0]), dst=1)
            dist.send(ember.tensor([3.0]), dst=1, group=rev)
            w = dist.isend(ember.tensor([4.0]), dst=1)
            w.wait()
            try:
                w.source_rank()
            except RuntimeError as e:
                out["send"] = str(e)
        else:
            a, b, c, d = (ember.zeros(1) for _ in range(4))
            # (one at a time: which of a pending any-source and a named receive takes a
            # message is up to the backend)
            wa = dist.irecv(a)
            wa.wait()
            wb = dist.irecv(b, src=0)
            wb.wait()
            wc = dist.irecv(c, group=rev)
            dist.recv(d, src=0)
            out["sources"] = [wa.source_rank(), wb.source_rank(), wc.source_rank(),
                              a.item(), b.item(), c.item()]
        for fn in (lambda: dist.gather(ember.ones(1), [ember.ones(1)] * 2, dst=1 - rank),
                   lambda: dist.scatter(ember.ones(1), [ember.ones(1)] * 2, src=1 - rank)):
            try:
                fn()
            except ValueError as e:
                out.setdefault("wrong_rank", []).append(str(e))
        if rank == 1:
            import time

            time.sleep(0.6)
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=0.3))
        except RuntimeError as e:
            out["monitored"] = [type(e).__name__, str(e)]
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def rank_results(tmp_path_factory):
    from dist_helpers import run_ranks

    store = tmp_path_factory.mktemp("s25") / "store"
    return run_ranks(_worker, 2, ("file://" + str(store),), 120)


def test_work_source_rank(rank_results):
    # any source, a named source, and a reversed group's rank of the sender (global 0 is 1)
    assert rank_results[1]["sources"] == [0, 0, 1, 1.0, 2.0, 3.0]
    assert "recv" in rank_results[0]["send"] and "sourceRank()" in rank_results[0]["send"]


def test_wrong_rank_lists_and_monitored_barrier_messages(rank_results):
    for r in (0, 1):
        gather_msg, scatter_msg = rank_results[r]["wrong_rank"]
        assert "gather_list" in gather_msg and "non-destination" in gather_msg
        assert "scatter_list" in scatter_msg and "non-source" in scatter_msg
    cls, msg = rank_results[0]["monitored"]
    assert cls == "DistBackendError" and "monitoredBarrier" in msg and "1" in msg


def test_work_source_rank_error_matches_torch():
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist

    tdist.init_process_group("gloo", store=tdist.HashStore(), rank=0, world_size=1)
    try:
        w = tdist.all_reduce(torch.ones(1), async_op=True)
        w.wait()
        with pytest.raises(RuntimeError, match="sourceRank"):
            w.source_rank()
    finally:
        tdist.destroy_process_group()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        w = dist.all_reduce(ember.ones(1), async_op=True)
        w.wait()
        with pytest.raises(RuntimeError, match="sourceRank"):
            w.source_rank()
    finally:
        dist.destroy_process_group()


# ---- torchrun --role ---------------------------------------------------------------------------


def test_launcher_role():
    from ember.distributed._launcher import worker_env
    from ember.distributed.run import config_from_args, parse_args

    cfg = config_from_args(parse_args(["--standalone", "--nproc-per-node=2", "--role=trainer",
                                       "--local-addr=127.0.0.1", "script.py"]))
    assert cfg.role == "trainer"
    env = worker_env(cfg, 1, 0, "/tmp/err.json")
    assert (env["ROLE_NAME"], env["ROLE_RANK"], env["ROLE_WORLD_SIZE"]) == ("trainer", "1", "2")
    cfg = config_from_args(parse_args(["--nproc-per-node=2", "script.py"]))
    assert worker_env(cfg, 0, 0, "/tmp/err.json")["ROLE_NAME"] == "default"


def test_launcher_role_matches_torch():
    pytest.importorskip("torch")
    from torch.distributed.run import config_from_args, parse_args

    cfg, _, _ = config_from_args(parse_args(["--standalone", "--nproc-per-node=2",
                                             "--role=trainer", "script.py"]))
    assert cfg.role == "trainer"
