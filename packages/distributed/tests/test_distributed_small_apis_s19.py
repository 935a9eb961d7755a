"""torch.distributed names ember lacked: all_reduce_coalesced / all_gather_coalesced (on 2
spawned ranks, against NumPy), torch.distributed.nn.functional's differentiable gather /
scatter / reduce / all_to_all_single (values and gradients on 2 ranks), supports_complex,
get_backend_config, the deprecated reduce_op and breakpoint's skip count."""

from __future__ import annotations

import multiprocessing as mp
import traceback
from datetime import timedelta
from typing import Any

import ember
import ember.distributed as dist
import numpy as np
import pytest


def _coalesced(rank: int, init: str, conn: Any) -> None:
    try:
        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        a = [ember.full((2, 2), float(rank + 1)), ember.arange(3.0) * (rank + 1)]
        dist.all_reduce_coalesced(a, op=dist.ReduceOp.MAX)
        b = [ember.tensor([rank + 1], dtype=ember.int64)]
        fut = dist.all_reduce_coalesced(b, async_op=True)
        outs = [[ember.empty(2), ember.empty(1, 3)] for _ in range(2)]
        dist.all_gather_coalesced(outs, [ember.full((2,), 10.0 * rank),
                                         ember.arange(3.0).reshape(1, 3) + rank])
        cplx = [ember.tensor([1 + 2j]) * (rank + 1)]
        dist.all_reduce_coalesced(cplx)
        conn.send(("ok", {"max": [t.tolist() for t in a], "async": fut.wait()[0].tolist(),
                          "gathered": [[t.tolist() for t in o] for o in outs],
                          "complex": cplx[0].tolist()}))
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (sent to the test)
        conn.send(("err", traceback.format_exc()))


def _differentiable(rank: int, init: str, conn: Any) -> None:
    try:
        from ember.distributed.nn import functional as dfn

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        res = {}
        t = (ember.ones(2) * (rank + 1)).requires_grad_()
        out = dfn.gather(t, dst=0)
        (sum((i + 1) * o.sum() for i, o in enumerate(out))).backward()
        res["gather"] = [[o.tolist() for o in out], t.grad.tolist()]
        parts = [ember.full((2,), 5.0).requires_grad_(), ember.full((2,), 7.0).requires_grad_()]
        got = dfn.scatter(parts, src=0)
        ((rank + 2) * got.sum()).backward()
        res["scatter"] = [got.tolist(), [p.grad.tolist() for p in parts]]
        t = (ember.ones(2) * (rank + 1)).requires_grad_()
        red = dfn.reduce(t, dst=0)
        ((3 if rank == 0 else 1) * red.sum()).backward()
        res["reduce"] = [red.tolist() if rank == 0 else None, t.grad.tolist()]
        x = (ember.arange(4.0) + 10 * rank).requires_grad_()
        y = dfn.all_to_all_single(ember.empty(4), x)
        ((rank + 1) * y.sum()).backward()
        res["a2a"] = [y.tolist(), x.grad.tolist()]
        conn.send(("ok", res))
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (sent to the test)
        conn.send(("err", traceback.format_exc()))


def _two_ranks(fn: Any, tmp_path: Any) -> list:
    ctx = mp.get_context("spawn")
    conns, procs = [], []
    for r in range(2):
        a, b = ctx.Pipe()
        p = ctx.Process(target=fn, args=(r, f"file://{tmp_path / 'store'}", b), daemon=True)
        p.start()
        conns.append(a)
        procs.append(p)
    results = []
    for r, c in enumerate(conns):
        assert c.poll(120), f"rank {r} did not answer"
        status, value = c.recv()
        assert status == "ok", value
        results.append(value)
    for p in procs:
        p.join(10)
    return results


def test_differentiable_collectives_on_two_ranks(tmp_path):
    r0, r1 = _two_ranks(_differentiable, tmp_path)
    assert r0["gather"] == [[[1.0, 1.0], [2.0, 2.0]], [1.0, 1.0]]
    assert r1["gather"] == [[[0.0, 0.0], [0.0, 0.0]], [2.0, 2.0]]  # dst's weights come back
    assert r0["scatter"] == [[5.0, 5.0], [[2.0, 2.0], [3.0, 3.0]]]
    assert r1["scatter"][0] == [7.0, 7.0]
    assert r0["reduce"] == [[3.0, 3.0], [3.0, 3.0]] and r1["reduce"][1] == [3.0, 3.0]
    assert r0["a2a"] == [[0.0, 1.0, 10.0, 11.0], [1.0, 1.0, 2.0, 2.0]]
    assert r1["a2a"] == [[2.0, 3.0, 12.0, 13.0], [1.0, 1.0, 2.0, 2.0]]


def test_coalesced_collectives_on_two_ranks(tmp_path):
    results = _two_ranks(_coalesced, tmp_path)
    for res in results:
        np.testing.assert_array_equal(res["max"][0], np.full((2, 2), 2.0))
        np.testing.assert_array_equal(res["max"][1], np.arange(3.0) * 2)
        assert res["async"] == [3]
        assert res["gathered"] == [[[0.0, 0.0], [[0.0, 1.0, 2.0]]],
                                   [[10.0, 10.0], [[1.0, 2.0, 3.0]]]]
        assert res["complex"] == [3 + 6j]


@pytest.fixture
def world1():
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_coalesced_argument_errors(world1):
    with pytest.raises(ValueError, match="share one dtype"):
        dist.all_reduce_coalesced([ember.ones(2), ember.ones(2, dtype=ember.int64)])
    with pytest.raises(TypeError, match="List"):
        dist.all_reduce_coalesced([ember.ones(2), 3])
    with pytest.raises(ValueError, match="must match the inputs' shapes"):
        dist.all_gather_coalesced([[ember.empty(3)]], [ember.ones(2)])
    with pytest.raises(ValueError, match="holds 2 lists for a group of 1"):
        dist.all_gather_coalesced([[ember.empty(2)], [ember.empty(2)]], [ember.ones(2)])
    with pytest.raises(TypeError, match="should be a list"):
        dist.all_gather_coalesced(ember.empty(2), [ember.ones(2)])


def test_supports_complex_backend_config_and_reduce_op(world1):
    assert dist.supports_complex(dist.ReduceOp.SUM) and dist.supports_complex(dist.ReduceOp.AVG)
    assert not any(dist.supports_complex(op) for op in (
        dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT, dist.ReduceOp.BAND))
    assert dist.get_backend_config().startswith("cpu:shm")
    with pytest.warns(FutureWarning, match="reduce_op` is deprecated"):
        assert dist.reduce_op.MAX is dist.ReduceOp.MAX


def test_breakpoint_skips_its_first_calls(world1, monkeypatch):
    import pdb

    from ember.distributed import distributed_c10d

    stops = []
    monkeypatch.setattr(pdb.Pdb, "set_trace", lambda self, *a: stops.append(1))
    monkeypatch.setattr(distributed_c10d, "_breakpoint_calls", 0)
    dist.breakpoint(skip=2)
    dist.breakpoint(skip=2)
    assert stops == []
    dist.breakpoint(skip=2)
    assert stops == [1]
    dist.breakpoint(rank=1)  # another rank stops; this one only waits at the barrier
    assert stops == [1]
