"""ember.distributed: stores, process groups and the shm backend's collectives, run on 2-3 ranks
(spawned processes) and compared with NumPy references; failures (dead and hung ranks), the
EMBER_DISTRIBUTED_DEBUG=DETAIL check, and the mpi backend under mpirun when it is installed."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from datetime import timedelta
from pathlib import Path

import ember
import ember.distributed as dist
import numpy as np
import pytest

# Small slots and mailboxes, so small tensors exercise the chunked paths.
SMALL_SHM = {"EMBER_SHM_SLOT_BYTES": "262144", "EMBER_SHM_MAILBOX_BYTES": "8192"}


# ---- a pool of ranks that run test functions ------------------------------------------------
def _serve(rank: int, world: int, init: str, env: dict, conn) -> None:
    os.environ.update(env)
    import ember.distributed as d

    try:
        d.init_process_group("shm", init_method=init, rank=rank, world_size=world,
                             timeout=timedelta(seconds=60))
    except BaseException:  # noqa: BLE001
        conn.send(("err", traceback.format_exc()))
        return
    conn.send(("ok", None))
    while True:
        msg = conn.recv()
        if msg is None:
            break
        fn, args = msg
        try:
            conn.send(("ok", fn(rank, world, *args)))
        except BaseException:  # noqa: BLE001  (sent to the test)
            conn.send(("err", traceback.format_exc()))
    d.destroy_process_group()
    conn.send(("ok", None))


class Ranks:
    """world spawned processes in one process group; run(fn) calls fn(rank, world, *args) on
    each and returns their results in rank order (re-raising a rank's error)."""

    def __init__(self, world: int, tmp: Path, env: dict | None = None) -> None:
        ctx = mp.get_context("spawn")
        init = f"file://{tmp / f'store{world}'}"
        self.world = world
        self.conns, self.procs = [], []
        for r in range(world):
            a, b = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(r, world, init, dict(env or SMALL_SHM), b),
                            daemon=True)
            p.start()
            self.conns.append(a)
            self.procs.append(p)
        self._collect(120)

    def _collect(self, timeout: float) -> list:
        out, errors = [], []
        deadline = time.monotonic() + timeout
        for r, c in enumerate(self.conns):
            if not c.poll(max(0.0, deadline - time.monotonic())):
                self.close(kill=True)
                raise AssertionError(f"rank {r} did not answer within {timeout} s")
            status, value = c.recv()
            if status == "err":
                errors.append(f"rank {r}:\n{value}")
            out.append(value)
        if errors:
            raise AssertionError("\n".join(errors))
        return out

    def run(self, fn, *args, timeout: float = 90) -> list:
        for c in self.conns:
            c.send((fn, args))
        return self._collect(timeout)

    def close(self, kill: bool = False) -> None:
        for c, p in zip(self.conns, self.procs):
            if not kill:
                try:
                    c.send(None)
                    c.poll(10) and c.recv()
                except (OSError, EOFError):
                    pass
            p.join(0 if kill else 10)
            if p.is_alive():
                p.kill()
                p.join()


@pytest.fixture(scope="module")
def ranks2(tmp_path_factory):
    r = Ranks(2, tmp_path_factory.mktemp("dist2"))
    yield r
    r.close()


@pytest.fixture(scope="module")
def ranks3(tmp_path_factory):
    r = Ranks(3, tmp_path_factory.mktemp("dist3"))
    yield r
    r.close()


DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64}
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]


def _data(rank: int, n: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(rank + 10)
    if dtype == "int64":
        return rng.integers(-5, 6, n).astype(np.int64)
    return (rng.standard_normal(n) + (0.5 if dtype != "int64" else 0)).astype(DTYPES[dtype])


def _reference(op: str, arrays: list[np.ndarray]) -> np.ndarray:
    s = np.stack(arrays)
    return {"SUM": s.sum(0), "AVG": s.mean(0), "PRODUCT": s.prod(0), "MIN": s.min(0),
            "MAX": s.max(0)}[op].astype(arrays[0].dtype)


def _close(a, b, dtype: str) -> None:
    if dtype == "int64":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)


# ---- collectives ----------------------------------------------------------------------------
N = 40_001  # > one 64 KiB slot for every dtype: several chunks, uneven shares


def _w_all_reduce(rank, world, op, dtype, n):
    t = ember.from_numpy(_data(rank, n, dtype))
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    return t.numpy()


def _w_all_reduce_sizes(rank, world, op, dtype, sizes):
    return [_w_all_reduce(rank, world, op, dtype, n) for n in sizes]


# Sizes: small (one-barrier path), several 256 KiB chunks with a partial last one (reduce-scatter
# and all-gather path), and empty. AVG of integers is refused (test_bad_input).
SIZES = [1001, 100_003, 0]


@pytest.mark.parametrize("op,dtype", [(o, d) for o in OPS for d in DTYPES
                                      if not (o == "AVG" and d == "int64")])
def test_all_reduce_ops_dtypes(ranks2, op, dtype):
    out = ranks2.run(_w_all_reduce_sizes, op, dtype, SIZES)
    for i, n in enumerate(SIZES):
        ref = _reference(op, [_data(r, n, dtype) for r in range(2)])
        for o in out:
            _close(o[i], ref, dtype)
        np.testing.assert_array_equal(out[0][i], out[1][i])  # every rank gets the same bits


@pytest.mark.parametrize("op", ["SUM", "MAX", "PRODUCT", "AVG"])
def test_all_reduce_three_ranks(ranks3, op):
    out = ranks3.run(_w_all_reduce_sizes, op, "float64", SIZES)
    for i, n in enumerate(SIZES):
        ref = _reference(op, [_data(r, n, "float64") for r in range(3)])
        for o in out:
            _close(o[i], ref, "float64")
        np.testing.assert_array_equal(out[0][i], out[2][i])


def _w_bitwise(rank, world):
    out = {}
    for op in ("BAND", "BOR", "BXOR"):
        t = ember.tensor([12, 10, 7 + rank, -1], dtype=ember.int32) + rank
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        out[op] = t.tolist()
    b = ember.tensor([True, False, rank == 1, False])
    dist.all_reduce(b)  # SUM of bools: or
    out["bool_sum"] = b.tolist()
    b = ember.tensor([True, False, rank == 1, True])
    dist.all_reduce(b, op=dist.ReduceOp.MIN)
    out["bool_min"] = b.tolist()
    h = ember.tensor([0.5, -1.0, 2.0], dtype=ember.float16) * (rank + 1)
    dist.all_reduce(h, op=dist.ReduceOp.AVG)
    out["half_avg"] = h.float().tolist()
    return out


def test_bitwise_bool_half(ranks2):
    a = [np.array([12, 10, 7 + r, -1], dtype=np.int32) + r for r in range(2)]
    for o in ranks2.run(_w_bitwise):
        assert o["BAND"] == (a[0] & a[1]).tolist()
        assert o["BOR"] == (a[0] | a[1]).tolist()
        assert o["BXOR"] == (a[0] ^ a[1]).tolist()
        assert o["bool_sum"] == [True, False, True, False]
        assert o["bool_min"] == [True, False, False, True]
        assert o["half_avg"] == [0.75, -1.5, 3.0]


def _w_reduce_bcast(rank, world):
    res = {}
    t = ember.from_numpy(_data(rank, N, "int64"))
    dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
    res["reduce"] = t.numpy()
    b = ember.from_numpy(_data(rank, N, "float32"))
    dist.broadcast(b, src=1)
    res["broadcast"] = b.numpy()
    # A non-contiguous tensor is reduced in place through a contiguous copy.
    m = ember.from_numpy(np.arange(12, dtype=np.float64).reshape(3, 4) * (rank + 1)).t()
    dist.all_reduce(m)
    res["strided"] = m.numpy()
    h = ember.ones(100, dtype=ember.bfloat16) * (rank + 1)
    dist.all_reduce(h)
    res["bf16"] = h.float().numpy()
    return res


def _w_coalesced(rank, world):
    ts = [ember.full((n,), float(rank)) for n in (3, 5, 7)] + [ember.zeros(2, dtype=ember.int64)
                                                              + rank]
    dist.distributed_c10d._broadcast_coalesced(None, ts, buffer_size=40, src=1)
    return [t.tolist() for t in ts]


def test_broadcast_coalesced(ranks2):
    for out in ranks2.run(_w_coalesced):
        assert out == [[1.0] * 3, [1.0] * 5, [1.0] * 7, [1, 1]]


def test_reduce_broadcast_strided(ranks2):
    out = ranks2.run(_w_reduce_bcast)
    np.testing.assert_array_equal(out[1]["reduce"], _reference("MAX", [_data(r, N, "int64")
                                                                       for r in range(2)]))
    np.testing.assert_array_equal(out[0]["reduce"], _data(0, N, "int64"))  # not the dst: as is
    for o in out:
        np.testing.assert_array_equal(o["broadcast"], _data(1, N, "float32"))
        np.testing.assert_array_equal(o["strided"], np.arange(12.0).reshape(3, 4).T * 3)
        np.testing.assert_array_equal(o["bf16"], np.full(100, 3.0))


def _w_gathers(rank, world):
    res = {}
    x = ember.from_numpy(_data(rank, N, "float64"))
    outs = [ember.zeros(N, dtype=ember.float64) for _ in range(world)]
    dist.all_gather(outs, x)
    res["all_gather"] = [o.numpy() for o in outs]
    flat = ember.zeros(world, N, dtype=ember.float64)
    dist.all_gather_into_tensor(flat, x)
    res["into"] = flat.numpy()
    glist = [ember.zeros(N, dtype=ember.float64) for _ in range(world)] if rank == 0 else None
    dist.gather(x, glist, dst=0)
    res["gather"] = [g.numpy() for g in glist] if glist else None
    recv = ember.zeros(N, dtype=ember.int64)
    slist = ([ember.from_numpy(_data(10 + j, N, "int64")) for j in range(world)]
             if rank == world - 1 else None)
    dist.scatter(recv, slist, src=world - 1)
    res["scatter"] = recv.numpy()
    return res


@pytest.mark.parametrize("world", [2, 3])
def test_gather_family(ranks2, ranks3, world):
    pool = ranks2 if world == 2 else ranks3
    out = pool.run(_w_gathers)
    inputs = [_data(r, N, "float64") for r in range(world)]
    for r, o in enumerate(out):
        for j in range(world):
            np.testing.assert_array_equal(o["all_gather"][j], inputs[j])
        np.testing.assert_array_equal(o["into"], np.stack(inputs))
        np.testing.assert_array_equal(o["scatter"], _data(10 + r, N, "int64"))
    assert [len(g) for g in out[0]["gather"]] == [N] * world
    for j in range(world):
        np.testing.assert_array_equal(out[0]["gather"][j], inputs[j])
    assert all(o["gather"] is None for o in out[1:])


def _w_reduce_scatter(rank, world, op, dtype):
    n = 5003
    ins = [ember.from_numpy(_data(rank * 7 + j, n, dtype)) for j in range(world)]
    out = ember.zeros(n, dtype=getattr(ember, dtype))
    dist.reduce_scatter(out, ins, op=getattr(dist.ReduceOp, op))
    big = ember.cat(ins)
    out2 = ember.zeros(n, dtype=getattr(ember, dtype))
    dist.reduce_scatter_tensor(out2, big, op=getattr(dist.ReduceOp, op))
    return out.numpy(), out2.numpy()


@pytest.mark.parametrize("op,dtype", [("SUM", "float32"), ("MIN", "int64"), ("AVG", "float64"),
                                      ("PRODUCT", "float64")])
def test_reduce_scatter(ranks3, op, dtype):
    out = ranks3.run(_w_reduce_scatter, op, dtype)
    for r, (a, b) in enumerate(out):
        ref = _reference(op, [_data(q * 7 + r, 5003, dtype) for q in range(3)])
        _close(a, ref, dtype)
        _close(b, ref, dtype)


def _w_all_to_all(rank, world):
    # Rank r sends (r + j + 1) * 1000 elements to rank j: uneven pieces, several chunks.
    ins = [ember.full(((rank + j + 1) * 1000,), float(rank * 10 + j)) for j in range(world)]
    outs = [ember.zeros((j + rank + 1) * 1000) for j in range(world)]
    dist.all_to_all(outs, ins)
    res = [o.numpy() for o in outs]
    in_splits = [j + 1 for j in range(world)]  # rows sent to rank j
    out_splits = [rank + 1] * world  # rows received from each rank
    src = ember.cat([ember.full((j + 1, 3), float(rank * 10 + j), dtype=ember.int64)
                     for j in range(world)])
    dst = ember.zeros(sum(out_splits), 3, dtype=ember.int64)
    dist.all_to_all_single(dst, src, out_splits, in_splits)
    even = ember.arange(world * 2, dtype=ember.float64) + 100 * rank
    even_out = ember.zeros(world * 2, dtype=ember.float64)
    dist.all_to_all_single(even_out, even)
    return res, dst.numpy(), even_out.numpy()


def test_all_to_all(ranks3):
    out = ranks3.run(_w_all_to_all)
    for r, (res, single, even) in enumerate(out):
        for j in range(3):
            np.testing.assert_array_equal(res[j], np.full((j + r + 1) * 1000, j * 10 + r))
        ref = np.concatenate([np.full((r + 1, 3), j * 10 + r) for j in range(3)])
        np.testing.assert_array_equal(single, ref)
        np.testing.assert_array_equal(even, np.concatenate(
            [np.arange(2 * r, 2 * r + 2) + 100 * j for j in range(3)]))


def _w_p2p(rank, world):
    n = 100_003  # > the 8 KiB mailbox: many chunks, both directions at once
    peer = 1 - rank
    send = ember.from_numpy(_data(rank, n, "float32"))
    got = ember.zeros(n)
    reqs = [dist.isend(send, peer, tag=3), dist.irecv(got, peer, tag=3)]
    for w in reqs:
        w.wait()
    small = ember.zeros(4, dtype=ember.int64)
    if rank == 0:
        dist.send(ember.arange(4), 1)
        dist.recv(small, 1)
    else:
        dist.recv(small, 0)
        dist.send(small * 2, 0)
    ops = [dist.P2POp(dist.isend, send[:10], peer), dist.P2POp(dist.irecv, got[:10], peer)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return got.numpy(), small.numpy()


def test_send_recv(ranks2):
    out = ranks2.run(_w_p2p)
    np.testing.assert_array_equal(out[0][0], _data(1, 100_003, "float32"))
    np.testing.assert_array_equal(out[1][0], _data(0, 100_003, "float32"))
    np.testing.assert_array_equal(out[0][1], [0, 2, 4, 6])
    np.testing.assert_array_equal(out[1][1], [0, 1, 2, 3])


def _w_p2p_mismatch(rank, world):
    if rank == 0:
        dist.send(ember.zeros(8), 1, tag=5)
        dist.recv(ember.zeros(8), 1, tag=6)  # drains the follow-up message
        return None
    try:
        dist.recv(ember.zeros(4), 0, tag=5)
    except RuntimeError as e:
        msg = str(e)
    got = ember.ones(8)
    dist.recv(got, 0, tag=5)  # the message waits for a matching receive
    dist.send(ember.zeros(8), 0, tag=6)
    return msg, got.tolist()


def test_recv_size_mismatch(ranks2):
    msg, got = ranks2.run(_w_p2p_mismatch)[1]
    assert "expected a message of 16 bytes with tag 5" in msg and "32 bytes" in msg
    assert got == [0.0] * 8


def _w_async(rank, world):
    ts = [ember.full((20_000,), float(rank + i)) for i in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    b = ember.zeros(3) + rank
    wb = dist.broadcast(b, src=0, async_op=True)
    blocking = ember.ones(2)
    dist.all_reduce(blocking)  # waits its turn behind the async ones
    fut = works[0].get_future()
    done = [w.wait() for w in works] + [wb.wait()]
    return ([t[0].item() for t in ts], b.tolist(), blocking.tolist(), done,
            all(w.is_completed() for w in works), fut.value()[0][0].item(),
            works[1].result()[0][0].item())


def test_async_op(ranks2):
    for vals, b, blocking, done, completed, fut, res in ranks2.run(_w_async):
        assert vals == [1.0, 3.0, 5.0, 7.0]
        assert b == [0.0, 0.0, 0.0] and blocking == [2.0, 2.0]
        assert done == [True] * 5 and completed
        assert fut == 1.0 and res == 3.0


def _w_objects(rank, world):
    objs = [{"rank": rank, "data": list(range(rank * 50))}]
    gathered = [None] * world
    dist.all_gather_object(gathered, objs[0])
    bl = ["hello", {"k": (1, 2)}, None] if rank == 1 else [None, None, None]
    dist.broadcast_object_list(bl, src=1)
    go = [None] * world if rank == 0 else None
    dist.gather_object(("x", rank), go, dst=0)
    so = [None]
    dist.scatter_object_list(so, [f"item{j}" for j in range(world)] if rank == 0 else None, src=0)
    return gathered, bl, go, so[0]


def test_object_collectives(ranks3):
    out = ranks3.run(_w_objects)
    for r, (gathered, bl, go, so) in enumerate(out):
        assert gathered == [{"rank": j, "data": list(range(j * 50))} for j in range(3)]
        assert bl == ["hello", {"k": (1, 2)}, None]
        assert so == f"item{r}"
    assert out[0][2] == [("x", 0), ("x", 1), ("x", 2)]


def _w_p2p_objects(rank, world):
    if rank == 0:
        dist.send_object_list([{"to": 1}, [1, 2, 3]], dst=1)
        dist.send_object_list(["any"], dst=2)
        return None
    objs = [None, None] if rank == 1 else [None]
    src = dist.recv_object_list(objs, src=0 if rank == 1 else None)
    return src, objs


def test_send_recv_object_list(ranks3):
    _, r1, r2 = ranks3.run(_w_p2p_objects)
    assert r1 == (0, [{"to": 1}, [1, 2, 3]])
    assert r2 == (0, ["any"])


def _w_subgroups(rank, world):
    before = dist.get_pg_count()
    cur, subs = dist.new_subgroups_by_enumeration([[0, 2], [1]])
    t = ember.ones(2) * (rank + 1)
    dist.all_reduce(t, group=cur)
    ones, ones_all = dist.new_subgroups(1)
    whole, _ = dist.new_subgroups(3)
    u = ember.ones(1)
    dist.all_reduce(u, group=whole)
    errors = []
    for bad in (lambda: dist.new_subgroups(2), lambda: dist.new_subgroups(None),
                lambda: dist.new_subgroups_by_enumeration([[0, 1], [1, 2]])):
        try:
            bad()
        except ValueError as e:
            errors.append(str(e))
    return (t.tolist(), dist.get_process_group_ranks(cur), len(subs),
            dist.get_process_group_ranks(ones), len(ones_all), u.item(),
            dist.get_pg_count() - before, errors)


def test_new_subgroups(ranks3):
    out = ranks3.run(_w_subgroups)
    for r, (t, ranks, n, one, n_one, u, made, errors) in enumerate(out):
        assert ranks == ([0, 2] if r != 1 else [1])
        assert t == ([4.0, 4.0] if r != 1 else [2.0, 2.0])
        assert n == 2 and one == [r] and n_one == 3 and u == 3.0
        assert made == 6  # 2 + 3 + 1 groups, counted on every rank
        assert "cannot be split into subgroups of 2" in errors[0]
        assert "group_size is required" in errors[1]
        assert "rank 1 is in both subgroup 0 and subgroup 1" in errors[2]


def _w_groups(rank, world):
    res = {"rank": dist.get_rank(), "world": dist.get_world_size(),
           "backend": dist.get_backend(), "init": dist.is_initialized()}
    g = dist.new_group([0, 2])
    if rank == 1:
        res["member"] = g is dist.GroupMember.NON_GROUP_MEMBER
        res["grank"] = dist.get_rank(g)
        assert dist.all_reduce(ember.ones(1), group=g) is None
        return res
    t = ember.ones(5) * (rank + 1)
    dist.all_reduce(t, group=g)
    b = ember.zeros(2) + rank
    dist.broadcast(b, src=2, group=g)
    w = g.allreduce([t])  # torch's ProcessGroup methods: asynchronous
    w.wait()
    g.barrier().wait()
    res.update(grank=dist.get_rank(g), gsize=dist.get_world_size(g), sum=t.tolist(),
               bcast=b.tolist(), ranks=dist.get_process_group_ranks(g),
               glob=dist.get_global_rank(g, 1))
    dist.destroy_process_group(g)
    return res


def test_new_group(ranks3):
    r0, r1, r2 = ranks3.run(_w_groups)
    assert [r0["rank"], r1["rank"], r2["rank"]] == [0, 1, 2]
    assert r0["world"] == 3 and r0["backend"] == "shm" and r0["init"]
    assert r1["member"] and r1["grank"] == -1
    assert (r0["grank"], r2["grank"], r2["gsize"]) == (0, 1, 2)
    assert r0["sum"] == r2["sum"] == [8.0] * 5
    assert r0["bcast"] == r2["bcast"] == [2.0, 2.0]
    assert r0["ranks"] == [0, 2] and r0["glob"] == 2


def _w_bad_input(rank, world):
    msgs = []
    for fn in (lambda: dist.all_gather([ember.zeros(3)], ember.zeros(3)),
               lambda: dist.all_reduce(ember.zeros(3, dtype=ember.int64), op=dist.ReduceOp.AVG),
               lambda: dist.broadcast(ember.zeros(3), src=7),
               lambda: dist.all_reduce([1, 2]),
               lambda: dist.send(ember.zeros(1), rank)):
        try:
            fn()
        except (ValueError, TypeError) as e:
            msgs.append(str(e))
    dist.barrier()
    return msgs


def test_bad_input(ranks2):
    msgs = ranks2.run(_w_bad_input)[0]
    assert len(msgs) == 5
    assert "list of 2 tensors" in msgs[0]
    assert "AVG needs a floating-point tensor" in msgs[1]
    assert "rank 7 is not part of group" in msgs[2]
    assert "must be an ember.Tensor" in msgs[3]
    assert "cannot send to itself" in msgs[4]


def _w_hang(rank, world):
    g = dist.new_group(timeout=timedelta(seconds=2))
    if rank == 1:
        return None  # never joins the collective
    t0 = time.monotonic()
    try:
        dist.all_reduce(ember.ones(3), group=g)
    except RuntimeError as e:
        return str(e), time.monotonic() - t0
    return "no error", 0.0


def test_hung_rank_times_out(ranks2):
    msg, elapsed = ranks2.run(_w_hang)[0]
    assert "all_reduce" in msg and "timed out after 2 s" in msg and "[1] did not reach" in msg
    assert elapsed < 60


def _w_debug_mismatch(rank, world):
    os.environ["EMBER_DISTRIBUTED_DEBUG"] = "DETAIL"
    try:
        g = dist.new_group()
    finally:
        del os.environ["EMBER_DISTRIBUTED_DEBUG"]
    t = ember.ones(4)
    dist.all_reduce(t, group=g)  # same shapes: fine
    try:
        dist.all_reduce(ember.ones(4 + rank, dtype=ember.float64 if rank else ember.float32),
                        group=g)
    except RuntimeError as e:
        shape_msg = str(e)
    try:
        dist.all_reduce(ember.ones(2), group=g)
    except RuntimeError as e:
        after = str(e)
    return shape_msg, after


def test_debug_detail_reports_mismatch(ranks2):
    for msg, after in ranks2.run(_w_debug_mismatch):
        assert "EMBER_DISTRIBUTED_DEBUG=DETAIL" in msg
        assert "called all_reduce((4,):float32, op=SUM)" in msg
        assert "all_reduce((5,):float64, op=SUM)" in msg
        assert "unusable after an earlier failure" in after


# ---- a rank that dies -------------------------------------------------------------------------
def _dying(rank: int, init: str, q) -> None:
    import ember.distributed as d

    d.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                         timeout=timedelta(seconds=5))
    if rank == 1:
        os._exit(3)
    t0 = time.monotonic()
    try:
        d.all_reduce(ember.ones(10))
        q.put(("no error", 0.0))
    except RuntimeError as e:
        q.put((str(e), time.monotonic() - t0))


def test_dead_rank_is_reported(tmp_path):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init = f"file://{tmp_path / 'store'}"
    ps = [ctx.Process(target=_dying, args=(r, init, q)) for r in range(2)]
    for p in ps:
        p.start()
    msg, elapsed = q.get(timeout=90)
    for p in ps:
        p.join(30)
    assert "all_reduce" in msg and "rank 1" in msg and "exited" in msg, msg
    assert ps[1].exitcode == 3


# ---- rendezvous ---------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env_rank(rank: int, port: int, q) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE="2")
    import ember.distributed as d

    d.init_process_group()  # env:// and the default backend
    t = ember.ones(3) * (rank + 1)
    d.all_reduce(t)
    q.put((rank, d.get_backend(), t.tolist()))
    d.destroy_process_group()
    q.put((rank, "done", d.is_initialized()))


def test_env_init_and_default_backend():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    ps = [ctx.Process(target=_env_rank, args=(r, port, q)) for r in range(2)]
    for p in ps:
        p.start()
    got = [q.get(timeout=90) for _ in range(4)]
    for p in ps:
        p.join(30)
    results = sorted(g for g in got if g[1] != "done")
    assert results == [(0, "undefined", [3.0] * 3), (1, "undefined", [3.0] * 3)]  # as torch
    assert all(p.exitcode == 0 for p in ps)


def _tcp_rank(rank: int, port: int, q) -> None:
    import ember.distributed as d

    d.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    t = ember.arange(4, dtype=ember.int64) * (rank + 1)
    d.all_reduce(t, op=d.ReduceOp.PRODUCT)
    q.put((rank, t.tolist(), dist.get_world_size()))
    d.destroy_process_group()


def test_tcp_init():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    ps = [ctx.Process(target=_tcp_rank, args=(r, port, q)) for r in range(2)]
    for p in ps:
        p.start()
    got = sorted(q.get(timeout=90) for _ in range(2))
    for p in ps:
        p.join(30)
    assert got == [(0, [0, 2, 8, 18], 2), (1, [0, 2, 8, 18], 2)]


def test_no_segments_left_in_dev_shm(ranks2):
    # Rank 0 unlinks the segment once every rank mapped it.
    pids = [p.pid for p in ranks2.procs]
    assert not [n for n in os.listdir("/dev/shm")
                if any(n.startswith(f"ember_dist_{pid}_") for pid in pids)]


# ---- stores -----------------------------------------------------------------------------------
def _exercise_store(a, b) -> None:
    a.set("k", "v1")
    assert b.get("k") == b"v1"
    assert a.add("n", 2) == 2 and b.add("n", 3) == 5 and a.get("n") == b"5"
    assert b.compare_set("k", "wrong", "x") == b"v1"
    assert b.compare_set("k", "v1", "v2") == b"v2" and a.get("k") == b"v2"
    assert a.compare_set("fresh", "", "new") == b"new"
    assert a.num_keys() == 3
    assert a.delete_key("fresh") and not a.delete_key("fresh")
    assert a.check(["k", "n"]) and not a.check(["k", "missing"])
    threading.Timer(0.2, lambda: b.set("late", b"x")).start()
    a.wait(["late"], timedelta(seconds=30))
    assert a.get("late") == b"x"
    t0 = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="timed out.*'never'"):
        a.wait(["never"], timedelta(seconds=0.3))
    assert time.monotonic() - t0 < 30


def test_tcp_store():
    master = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", master.port, 2, timeout=timedelta(seconds=10))
    try:
        _exercise_store(master, client)
        p = dist.PrefixStore("pre", client)
        p.set("a", b"1")
        assert master.get("pre/a") == b"1" and p.get("a") == b"1"
    finally:
        client.close()
        master.close()
    with pytest.raises(dist.DistNetworkError, match="cannot connect"):
        dist.TCPStore("127.0.0.1", master.port, timeout=timedelta(seconds=0.3))


def test_tcp_store_host_serves_connected_ranks_before_exiting(tmp_path):
    """The store's host process sets a key and exits at once (a rank 0 that finishes first):
    a rank still waiting on that key gets its answer, because closing the server serves the
    connected clients until they leave, instead of the process dying under them."""
    port_file = tmp_path / "port"
    code = textwrap.dedent(f"""
        import time, ember.distributed as dist
        from pathlib import Path
        m = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False)
        Path({str(port_file)!r}).write_text(str(m.port))
        while int(m.get("ready")) != 1:
            time.sleep(0.01)
        m.set("done", b"1")
        m.close()
    """)
    env = dict(os.environ)
    host = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text():
            assert time.monotonic() < deadline and host.poll() is None
            time.sleep(0.01)
        client = dist.TCPStore("127.0.0.1", int(port_file.read_text()), 2,
                               timeout=timedelta(seconds=30))
        client.set("ready", b"1")
        time.sleep(0.5)  # the host has set "done" and is closing by now
        client.wait(["done"], timedelta(seconds=30))
        assert client.get("done") == b"1"
        client.close()
        assert host.wait(timeout=30) == 0
    finally:
        if host.poll() is None:
            host.kill()


def test_file_store(tmp_path):
    path = str(tmp_path / "fs")
    _exercise_store(dist.FileStore(path, 2), dist.FileStore(path, 2))
    h = dist.HashStore()
    _exercise_store(h, h)


def _file_store_user(path: str, q) -> None:
    s = dist.FileStore(path, 2)
    s.set("child", b"1")
    q.put(s.get("parent"))
    # Leaves at exit (garbage collection), as the parent's store does with `del`.


def test_file_store_is_deleted_by_its_last_user(tmp_path):
    path = tmp_path / "fs"
    a = dist.FileStore(str(path), 2)
    b = dist.FileStore(str(path), 2)
    a.set("k", b"v")
    assert a.num_keys() == 1  # the reference counts are not keys
    a.close()
    assert path.exists() and b.get("k") == b"v"  # b still uses it
    with pytest.raises(dist.DistStoreError, match="used after close"):
        a.get("k")
    del b
    assert not path.exists()
    # The counts are per file: world_size users must have left, and none may remain.
    c = dist.FileStore(str(path), 2)
    c.close()
    assert path.exists()  # one of 2 left: another may still come
    dist.FileStore(str(path), 2).close()
    assert not path.exists()
    # world_size -1 (unknown number of users): the file is kept.
    dist.FileStore(str(path)).close()
    assert path.exists()
    path.unlink()
    # Another process: its store leaves when it exits; the last one deletes the file.
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    s = dist.FileStore(str(path), 2)
    s.set("parent", b"p")
    p = ctx.Process(target=_file_store_user, args=(str(path), q))
    p.start()
    assert q.get(timeout=90) == b"p"
    p.join(60)
    assert p.exitcode == 0 and s.get("child") == b"1"
    del s
    assert not path.exists()


def test_file_init_method_deletes_the_file_at_destroy(tmp_path):
    path = tmp_path / "init"
    dist.init_process_group("shm", init_method=f"file://{path}", rank=0, world_size=1)
    try:
        assert path.exists()
        t = ember.ones(2)
        dist.all_reduce(t)
        assert t.tolist() == [1.0, 1.0]
    finally:
        dist.destroy_process_group()
    assert not path.exists()


def test_store_extended_api(tmp_path):
    master = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, wait_for_workers=False)
    try:
        stores = [master, dist.FileStore(str(tmp_path / "fs"), 1), dist.HashStore(),
                  dist.PrefixStore("p", dist.HashStore())]
        for s in stores:
            # torch's FileStore says False (its append / multi_* still work)
            assert s.has_extended_api() is not isinstance(s, dist.FileStore)
            s.append("log", b"a")
            s.append("log", "bc")
            s.multi_set(["x", "y"], [b"1", "2"])
            assert s.multi_get(["y", "log", "x"]) == [b"2", b"abc", b"1"], type(s)
            with pytest.raises(ValueError, match="2 keys but 1 values"):
                s.multi_set(["x", "y"], [b"1"])
            with pytest.raises(dist.DistStoreError, match="timed out"):
                s.wait(["never"], timedelta(seconds=0.1))
    finally:
        master.close()


def test_backend_queries_and_the_gloo_alias(monkeypatch, caplog):
    assert dist.is_backend_available("gloo") and dist.is_backend_available("SHM")
    assert dist.is_backend_available("mpi") == dist.is_mpi_available()
    assert not dist.is_backend_available("nccl") and not dist.is_backend_available("ucc")
    assert dist.get_default_backend_for_device("cpu") == "shm"
    assert dist.get_default_backend_for_device(ember.device("cuda:0")) == "nccl"
    with pytest.raises(ValueError, match="no backend for device type 'mps'"):
        dist.get_default_backend_for_device("mps")
    assert dist.get_pg_count() == 0
    # "gloo" runs as shm on one machine, and says so once per process.
    from ember.distributed import distributed_c10d

    monkeypatch.setattr(distributed_c10d, "_logged_gloo", False)
    for _ in range(2):
        with caplog.at_level("INFO", logger="ember.distributed"):
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            assert dist.get_backend() == "gloo" and dist.get_pg_count() == 1
            assert dist.group.WORLD.name() == "shm"
        finally:
            dist.destroy_process_group()
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "runs as" in r.getMessage()]
    assert said == [("INFO", "ember.distributed: backend 'gloo' runs as 'shm' (one machine)")]


def test_api_before_init():
    assert dist.is_available() and not dist.is_initialized()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="unknown init_method"):
        dist.init_process_group("shm", init_method="udp://x", rank=0, world_size=1)
    if not dist.is_nccl_available():  # (tests/test_cuda_nccl.py covers the GPU side)
        with pytest.raises(RuntimeError, match="nccl backend is not available"):
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    assert dist.Backend("GLOO") == dist.Backend.GLOO == "gloo"
    assert dist.ReduceOp.SUM == 0 and dist.ReduceOp("max") is dist.ReduceOp.MAX


def test_world_of_one_in_process():
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = ember.arange(5.0)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        outs = [ember.zeros(5)]
        dist.all_gather(outs, t)
        assert outs[0].tolist() == t.tolist()
        w = dist.barrier(async_op=True)
        assert w.wait() and w.is_completed()
        with pytest.raises(ValueError, match="twice"):
            dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


# ---- mpi --------------------------------------------------------------------------------------
MPI_SCRIPT = textwrap.dedent("""
    import numpy as np, ember, ember.distributed as dist
    dist.init_process_group("mpi")
    r, w = dist.get_rank(), dist.get_world_size()
    t = ember.arange(6, dtype=ember.float64) * (r + 1)
    dist.all_reduce(t)
    assert t.tolist() == [float(3 * i) for i in range(6)], t
    m = ember.tensor([r, -r], dtype=ember.int64)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    assert m.tolist() == [1, 0]
    a = ember.ones(4) * (r + 1)
    dist.all_reduce(a, op=dist.ReduceOp.AVG)
    assert a.tolist() == [1.5] * 4
    b = ember.zeros(3) + r
    dist.broadcast(b, src=1)
    assert b.tolist() == [1.0] * 3
    outs = [ember.zeros(2) for _ in range(w)]
    dist.all_gather(outs, ember.ones(2) * r)
    assert [o.tolist() for o in outs] == [[0.0, 0.0], [1.0, 1.0]]
    rs = ember.zeros(2)
    dist.reduce_scatter_tensor(rs, ember.arange(4.0) + r)
    assert rs.tolist() == ([1.0, 3.0] if r == 0 else [5.0, 7.0]), rs
    o = ember.zeros(2)
    dist.all_to_all_single(o, ember.tensor([10.0 * r, 10.0 * r + 1]))
    assert o.tolist() == [float(r), 10.0 + r], o
    if r == 0:
        dist.send(ember.arange(3.0), 1)
    else:
        x = ember.zeros(3); dist.recv(x, 0); assert x.tolist() == [0.0, 1.0, 2.0]
    if r == 1:
        dist.send(ember.ones(2), 0, tag=4)
    else:
        y = ember.zeros(2); assert dist.recv(y, tag=4) == 1 and y.tolist() == [1.0, 1.0]
    w_ = dist.all_reduce(ember.ones(2), async_op=True); w_.wait()
    objs = [None, None]; dist.all_gather_object(objs, {"r": r})
    assert objs == [{"r": 0}, {"r": 1}]
    g = dist.new_group([1])
    if r == 1:
        s = ember.ones(3)
        dist.all_reduce(s, group=g)
        assert s.tolist() == [1.0] * 3 and dist.get_rank(g) == 0
    else:
        assert g is dist.GroupMember.NON_GROUP_MEMBER
    try:
        dist.all_reduce(ember.ones(2, dtype=ember.int64), op=dist.ReduceOp.AVG)
    except TypeError as e:
        assert "AVG needs a floating-point tensor" in str(e)
    dist.barrier()
    if os.environ.get("EMBER_DISTRIBUTED_DEBUG") != "DETAIL":
        g2 = dist.new_group()
        if r == 0:  # destroy with a receive pending: it fails instead of hanging
            w2 = dist.irecv(ember.zeros(3), 1, group=g2)
            dist.destroy_process_group(g2)
            try:
                w2.wait()
            except RuntimeError as e:
                assert "destroyed group" in str(e) and "receive was cancelled" in str(e), e
                print("PENDING-ABORTED", flush=True)
        else:
            dist.destroy_process_group(g2)
    if os.environ.get("EMBER_DISTRIBUTED_DEBUG") == "DETAIL":
        try:
            dist.all_reduce(ember.zeros(2 + r))
        except dist.DistBackendError as e:
            assert "differs between ranks" in str(e) and "(2,)" in str(e) and "(3,)" in str(e)
            print("MISMATCH-REPORTED", r)
    dist.destroy_process_group()
    print("MPI-OK", r)
""")


@pytest.mark.parametrize("debug", ["", "DETAIL"])
def test_mpi_backend(tmp_path, debug):
    # With DETAIL, every collective also runs as the blocking call on the helper thread.
    extra = {"EMBER_MPI_BLOCKING_BYTES": "0"} if debug else {}
    r = _mpirun(tmp_path, "import os\n" + MPI_SCRIPT, 2, EMBER_DISTRIBUTED_DEBUG=debug, **extra)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("MPI-OK") == 2
    assert r.stdout.count("MISMATCH-REPORTED") == (2 if debug else 0), r.stdout + r.stderr
    assert r.stdout.count("PENDING-ABORTED") == (0 if debug else 1), r.stdout + r.stderr


MPI_TIMEOUT_SCRIPT = textwrap.dedent("""
    import sys, time
    from datetime import timedelta
    import ember, ember.distributed as dist
    dist.init_process_group("mpi", timeout=timedelta(seconds=120))
    r = dist.get_rank()
    g = dist.new_group(timeout=timedelta(seconds=2))
    if r == 0:  # rank 1 never sends: the receive times out, is cancelled, the group stays usable
        try:
            dist.recv(ember.zeros(2), src=1, group=g, tag=9)
        except dist.DistBackendError as e:
            print("RECV-TIMEOUT", e, flush=True)
    dist.barrier()
    t = ember.ones(2)
    dist.all_reduce(t, group=g)
    assert t.tolist() == [3.0, 3.0], t
    print("GROUP-USABLE", r, flush=True)
    h = dist.new_group(timeout=timedelta(seconds=3))
    big = dist.new_group(timeout=timedelta(seconds=2))
    if r == 1:
        time.sleep(600)  # hangs outside ember.distributed
    try:
        dist.all_reduce(ember.ones(2), group=h)
    except dist.DistBackendError as e:
        print(f"AR-TIMEOUT{r}", e, flush=True)
        try:
            dist.all_reduce(ember.ones(2), group=h)
        except dist.DistBackendError as e2:
            print(f"BROKEN{r}", e2, flush=True)
    try:  # 4 KiB: the blocking call on the helper thread (EMBER_MPI_BLOCKING_BYTES=4096)
        dist.all_reduce(ember.ones(1024), group=big)
    except dist.DistBackendError as e:
        print(f"BIG-TIMEOUT{r}", e, flush=True)
    if r != 0:
        time.sleep(600)  # rank 0 reports first (an abort would cut a rank short)
    # Rank 0 leaves now: MPI_Abort at exit ends the job, the sleeping ranks included.
""")

MPI_DEAD_SCRIPT = textwrap.dedent("""
    import os
    from datetime import timedelta
    import ember, ember.distributed as dist
    dist.init_process_group("mpi", timeout=timedelta(seconds=120))
    if dist.get_rank() == 1:
        os._exit(3)
    dist.all_reduce(ember.ones(2))
""")


def _mpirun(tmp_path, script: str, n: int, **env_vars: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mpi4py")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun is not installed")
    path = tmp_path / "mpi_job.py"
    path.write_text(script)
    env = dict(os.environ)
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env.update(env_vars)
    cmd = [mpirun, "-n", str(n), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return subprocess.run(cmd + [sys.executable, str(path)], capture_output=True, text=True,
                          timeout=150, env=env)


def test_mpi_timeouts_name_the_rank_and_the_operation(tmp_path):
    r = _mpirun(tmp_path, MPI_TIMEOUT_SCRIPT, 3, EMBER_MPI_BLOCKING_BYTES="4096")
    out = r.stdout + r.stderr
    assert "RECV-TIMEOUT recv from rank 1 on rank 0 of group group1 timed out after 2 s" in out, out
    assert "rank 1 is in barrier (collective #1 of group WORLD)" in out, out
    assert "the receive was cancelled" in out, out
    assert all(f"GROUP-USABLE {k}" in out for k in range(3)), out
    assert ("AR-TIMEOUT0 all_reduce (collective #1 of group group2) on rank 0 timed out after "
            "3 s: rank(s) [1] did not answer") in out, out
    assert "rank(s) [2] wait in the same operation" in out, out
    assert "BROKEN0 all_reduce: the process group group2 is unusable" in out, out
    assert ("BIG-TIMEOUT0 all_reduce (collective #1 of group group3) on rank 0 timed out after "
            "2 s: rank(s) [1] did not answer") in out, out
    # The job was aborted (instead of hanging in MPI_Finalize for the sleeping rank).
    assert r.returncode != 0 and "aborting the MPI job" in out, out


def test_mpi_dead_rank_ends_the_job(tmp_path):
    r = _mpirun(tmp_path, MPI_DEAD_SCRIPT, 2)
    assert r.returncode == 3, r.stdout + r.stderr


def test_missing_rank_at_init_times_out_and_leaves_nothing():
    with pytest.raises(dist.DistBackendError, match=r"init_process_group.*timed out after 1 s.*"
                                                    r"rank\(s\) \[1\] did not reach it"):
        dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=2,
                                timeout=timedelta(seconds=1))
    assert not dist.is_initialized()
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"ember_dist_{os.getpid()}_")]


def _w_destroy_pending(rank, world):
    g = dist.new_group()
    if rank == 1:
        dist.destroy_process_group(g)
        return None
    t = ember.zeros(3)
    w = dist.irecv(t, 1, group=g)  # rank 1 never sends
    t0 = time.monotonic()
    dist.destroy_process_group(g)  # aborts the pending receive instead of hanging or crashing
    try:
        w.wait()
    except RuntimeError as e:
        return str(e), time.monotonic() - t0
    return "no error", 0.0


def test_destroy_with_pending_operation(ranks2):
    msg, elapsed = ranks2.run(_w_destroy_pending)[0]
    assert "aborted the group" in msg and "pending" in msg, msg
    assert elapsed < 60


def _w_recv_any(rank, world):
    if rank == 0:
        got = []
        for _ in range(world - 1):
            t = ember.zeros(3)
            src = dist.recv(t, tag=7)
            got.append((src, t.tolist()))
        t = ember.zeros(3)
        w = dist.irecv(t, tag=8)
        return sorted(got), w._source_rank(), t.tolist()
    dist.send(ember.full((3,), float(rank)), 0, tag=7)
    if rank == 2:
        dist.send(ember.ones(3), 0, tag=8)
    return None


def test_recv_from_any_source(ranks3):
    got, src, t = ranks3.run(_w_recv_any)[0]
    assert got == [(1, [1.0] * 3), (2, [2.0] * 3)]
    assert src == 2 and t == [1.0] * 3
