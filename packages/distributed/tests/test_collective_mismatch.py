"""Collectives whose ranks disagree (another collective, other sizes, dtypes or roots) fail on
every rank with an error naming each rank's call, instead of mixing unrelated bytes into the
result (what the shm backend did without EMBER_DISTRIBUTED_DEBUG=DETAIL; gloo crashes or times
out there). The tensors are left as they were, and the other groups stay usable.

Two spawned ranks run every case, each in a group of its own (a failed group is unusable), with
a 20 s group timeout; the whole run has a timeout too."""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from datetime import timedelta

import ember
import ember.distributed as dist
import pytest

# (name, what rank 0 calls, what rank 1 calls); `t` is ember, `d` ember.distributed, `x` the
# rank's tensor (returned after the call), `g` the case's group.
CASES = [
    ("all_reduce_numel", "x = t.ones(4); d.all_reduce(x, group=g)",
     "x = t.ones(5); d.all_reduce(x, group=g)"),
    ("all_reduce_dtype", "x = t.ones(4); d.all_reduce(x, group=g)",
     "x = t.ones(4, dtype=t.float64); d.all_reduce(x, group=g)"),
    ("all_reduce_op", "x = t.ones(4); d.all_reduce(x, op=d.ReduceOp.SUM, group=g)",
     "x = t.ones(4); d.all_reduce(x, op=d.ReduceOp.MAX, group=g)"),
    ("all_reduce_big", "x = t.ones(300_000); d.all_reduce(x, group=g)",  # several chunks
     "x = t.ones(300_001); d.all_reduce(x, group=g)"),
    ("broadcast_src", "x = t.ones(4); d.broadcast(x, src=0, group=g)",
     "x = t.ones(4) * 2; d.broadcast(x, src=1, group=g)"),
    ("broadcast_vs_all_reduce", "x = t.ones(4); d.all_reduce(x, group=g)",
     "x = t.ones(4) * 2; d.broadcast(x, src=0, group=g)"),
    ("all_gather_shape", "x = t.ones(2); d.all_gather([t.zeros(2), t.zeros(2)], x, group=g)",
     "x = t.ones(3); d.all_gather([t.zeros(3), t.zeros(3)], x, group=g)"),
    ("barrier_vs_all_reduce", "x = t.ones(4); d.barrier(group=g)",
     "x = t.ones(4); d.all_reduce(x, group=g)"),
    ("reduce_scatter_numel",
     "x = t.zeros(2); d.reduce_scatter(x, [t.ones(2), t.ones(2)], group=g)",
     "x = t.zeros(3); d.reduce_scatter(x, [t.ones(3), t.ones(3)], group=g)"),
]


def _rank(rank: int, init: str, q) -> None:
    import ember as t
    import ember.distributed as d

    d.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                         timeout=timedelta(seconds=60))
    for name, *calls in CASES:
        g = d.new_group(timeout=timedelta(seconds=20))
        env = {"t": t, "d": d, "g": g}
        t0 = time.monotonic()
        try:
            exec(calls[rank], env)
            out = ("ok", "", env["x"].tolist()[:6])
        except Exception as e:  # noqa: BLE001  (reported to the test)
            out = (type(e).__name__, str(e), env["x"].tolist()[:6] if "x" in env else None)
        q.put((name, rank, *out, time.monotonic() - t0))
    try:  # the default group was not touched by the failures
        x = t.ones(3) * (rank + 1)
        d.all_reduce(x)
        q.put(("world_after", rank, "ok", "", x.tolist(), 0.0))
    except Exception:  # noqa: BLE001
        q.put(("world_after", rank, "error", traceback.format_exc(), None, 0.0))
    d.destroy_process_group()


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = f"file://{tmp_path_factory.mktemp('mismatch') / 'store'}"
    procs = [ctx.Process(target=_rank, args=(r, init, q), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    got = {}
    try:
        for _ in range(2 * (len(CASES) + 1)):
            name, rank, *rest = q.get(timeout=120)
            got[name, rank] = rest
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    return got


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_disagreeing_ranks_both_fail_fast_and_name_each_call(outcomes, name):
    for rank in (0, 1):
        kind, msg, x, elapsed = outcomes[name, rank]
        assert kind == "DistBackendError", (rank, kind, msg, x)
        assert "the ranks called different collectives or disagree" in msg, msg
        assert "rank 0 called" in msg and "rank 1 called" in msg, msg
        assert elapsed < 15, f"rank {rank} waited {elapsed:.1f} s: a timeout, not the check"
        if x is not None:  # the tensor is as the rank passed it
            assert set(x) <= {0.0, 1.0, 2.0} and len(set(x)) == 1, x


def test_the_message_shows_the_calls(outcomes):
    msg = outcomes["all_reduce_numel", 0][1]
    assert "all_reduce(4:float32, SUM, -1)" in msg and "all_reduce(5:float32, SUM, -1)" in msg
    msg = outcomes["broadcast_src", 1][1]
    assert "broadcast(16 bytes, src=0)" in msg and "broadcast(16 bytes, src=1)" in msg


def test_other_groups_stay_usable(outcomes):
    assert outcomes["world_after", 0] == ["ok", "", [3.0, 3.0, 3.0], 0.0]
    assert outcomes["world_after", 1] == ["ok", "", [3.0, 3.0, 3.0], 0.0]


def test_agreeing_ranks_are_not_refused():
    # a world of one agrees with itself, whatever it calls
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    try:
        x = ember.ones(5)
        dist.all_reduce(x)
        dist.broadcast(x, src=0)
        dist.barrier()
        assert x.tolist() == [1.0] * 5
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(rank=0, world_size=0), ValueError, "world_size > 0, got rank=0, world_size=0"),
    (dict(rank=-2, world_size=2), ValueError, "rank must be >= 0"),
    (dict(rank=0, world_size="2"), TypeError, "world_size must be an int, got str '2'"),
    (dict(rank=0.0, world_size=1), TypeError, "rank must be an int, got float"),
    (dict(rank=True, world_size=1), TypeError, "rank must be an int, got bool"),
    (dict(), ValueError, "with a store, rank and world_size are required"),
])
def test_init_process_group_checks_rank_and_world_size(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        dist.init_process_group("shm", store=dist.HashStore(), **kwargs)
    assert not dist.is_initialized()
