"""The nccl backend's own logic, on a machine without a GPU: a fake NCCL (same C signatures,
called the same way through ctypes) that moves bytes between CPU tensors, and fake CUDA streams
and events. Two ranks run as two threads over one fake fabric, so the multi-rank parts (unique
id through the store, offsets of all_to_all / reduce_scatter / gather / scatter, send / recv,
the EMBER_DISTRIBUTED_DEBUG=DETAIL check) are exercised; one rank checks the Work handles and the
watchdog's timeout. The real library is tested in test_cuda_nccl.py (on a GPU machine).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from datetime import timedelta
from typing import Any, Callable

import ember
import ember.distributed as dist
import numpy as np
import pytest
from ember.distributed import _nccl
from ember.distributed import distributed_c10d as c10d

_NP = {0: np.int8, 1: np.uint8, 2: np.int32, 4: np.int64, 6: np.float16, 7: np.float32,
       8: np.float64}
_RED: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    0: lambda a: a.sum(0), 1: lambda a: a.prod(0), 2: lambda a: a.max(0), 3: lambda a: a.min(0),
    4: lambda a: a.sum(0) / len(a)}


def _arr(ptr: int, count: int, dt: int) -> np.ndarray:
    """count elements of ncclDataType_t dt at address ptr (CPU memory here)."""
    if count == 0:
        return np.zeros(0, _NP[dt])
    nbytes = count * np.dtype(_NP[dt]).itemsize
    raw = ctypes.cast(ptr, ctypes.POINTER(ctypes.c_byte))
    return np.ctypeslib.as_array(raw, (nbytes,)).view(_NP[dt])


class _Fabric:
    """The ranks' meeting point: every rank deposits its call's arguments; rank 0 moves the
    data once all are there; then all return (as an NCCL collective completes)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.bar = threading.Barrier(n, timeout=30)
        self.slots: list[Any] = [None] * n

    def run(self, rank: int, args: Any, move: Callable[[list], None]) -> int:
        self.slots[rank] = args
        self.bar.wait()
        if rank == 0:
            move(list(self.slots))
        self.bar.wait()
        return 0


class _FakeNccl:
    """What NcclBackend calls of NcclLibrary, implemented over a _Fabric (comm handle = 1000 +
    rank). Pending GPU work is simulated by FakeEvent."""

    version_code = 23203
    ncclGetLastError = None
    ncclCommFinalize = None

    def __init__(self, n: int) -> None:
        self.f = _Fabric(n)
        self.n = n
        self.log: list = []
        self.local = threading.local()

    def version(self) -> tuple:
        return (2, 32, 3)

    def error_string(self, r: int) -> str:
        return f"error {r}"

    def last_error(self, comm: Any = None) -> str:
        return ""

    def check(self, r: int, what: str, comm: Any = None) -> None:
        if r:
            raise dist.DistBackendError(f"{what} failed: {r}")

    def unique_id(self) -> _nccl.UniqueId:
        u = _nccl.UniqueId()
        u.internal[5] = 42
        return u

    def ncclCommInitRank(self, ph: Any, n: int, uid: Any, r: int) -> int:  # noqa: N802
        assert n == self.n and uid.internal[5] == 42  # the id came through the store
        ctypes.cast(ph, ctypes.POINTER(ctypes.c_void_p))[0] = 1000 + r
        self.log.append("init")
        self.f.bar.wait()
        return 0

    def ncclCommGetAsyncError(self, h: Any, perr: Any) -> int:  # noqa: N802
        return 0

    def ncclCommAbort(self, h: Any) -> int:  # noqa: N802
        self.log.append("abort")
        return 0

    def ncclCommDestroy(self, h: Any) -> int:  # noqa: N802
        self.log.append("destroy")
        return 0

    @staticmethod
    def _rank(c: Any) -> int:
        return (c.value if hasattr(c, "value") else c) - 1000

    def ncclAllReduce(self, s, rb, n, dt, op, c, st):  # noqa: N802, ANN001, ANN201
        self.log.append(("all_reduce", dt, op))

        def move(sl: list) -> None:
            res = _RED[op](np.stack([_arr(a[0], n, dt) for a in sl])).astype(_NP[dt])
            for a in sl:
                _arr(a[1], n, dt)[:] = res

        return self.f.run(self._rank(c), (s, rb), move)

    def ncclReduce(self, s, rb, n, dt, op, root, c, st):  # noqa: N802, ANN001, ANN201
        def move(sl: list) -> None:
            res = _RED[op](np.stack([_arr(a[0], n, dt) for a in sl])).astype(_NP[dt])
            _arr(sl[root][1], n, dt)[:] = res

        return self.f.run(self._rank(c), (s, rb), move)

    def ncclBroadcast(self, s, rb, n, dt, root, c, st):  # noqa: N802, ANN001, ANN201
        def move(sl: list) -> None:
            src = _arr(sl[root][0], n, dt).copy()
            for a in sl:
                _arr(a[1], n, dt)[:] = src

        return self.f.run(self._rank(c), (s, rb), move)

    def ncclAllGather(self, s, rb, n, dt, c, st):  # noqa: N802, ANN001, ANN201
        def move(sl: list) -> None:
            parts = np.concatenate([_arr(a[0], n, dt).copy() for a in sl])
            for a in sl:
                _arr(a[1], n * self.n, dt)[:] = parts

        return self.f.run(self._rank(c), (s, rb), move)

    def ncclReduceScatter(self, s, rb, n, dt, op, c, st):  # noqa: N802, ANN001, ANN201
        def move(sl: list) -> None:
            full = _RED[op](np.stack([_arr(a[0], n * self.n, dt) for a in sl])).astype(_NP[dt])
            for i, a in enumerate(sl):
                _arr(a[1], n, dt)[:] = full[i * n:(i + 1) * n]

        return self.f.run(self._rank(c), (s, rb), move)

    def ncclGroupStart(self) -> int:  # noqa: N802
        self.local.ops, self.local.rank = [], None
        return 0

    def ncclSend(self, p, n, dt, peer, c, st):  # noqa: N802, ANN001, ANN201
        self.local.rank = self._rank(c)
        self.local.ops.append(("send", p, n * np.dtype(_NP[dt]).itemsize, peer))
        return 0

    def ncclRecv(self, p, n, dt, peer, c, st):  # noqa: N802, ANN001, ANN201
        self.local.rank = self._rank(c)
        self.local.ops.append(("recv", p, n * np.dtype(_NP[dt]).itemsize, peer))
        return 0

    def ncclGroupEnd(self) -> int:  # noqa: N802
        def move(sl: list) -> None:
            sends: dict = {}
            for me, ops in enumerate(sl):
                for kind, p, n, peer in ops or []:
                    if kind == "send":
                        sends.setdefault((me, peer), []).append((p, n))
            for me, ops in enumerate(sl):
                for kind, p, n, peer in ops or []:
                    if kind == "recv":
                        sp, sn = sends[(peer, me)].pop(0)
                        assert sn == n, f"rank {peer} sent {sn} bytes, rank {me} expects {n}"
                        ctypes.memmove(p, sp, n)
            assert not any(sends.values()), f"unmatched sends {sends}"

        self.log.append(("group", len(self.local.ops)))
        return self.f.run(self.local.rank, self.local.ops, move)


class _FakeStream:
    def __init__(self, device: Any = None, priority: int = 0) -> None:
        self.cuda_stream, self._idx = 99, 0


class _FakeEvent:
    """A CUDA event whose work completes at `busy_until` (monotonic time) when recorded."""

    busy_until = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.done_at: float | None = None

    def record(self, stream: Any = None) -> None:
        self.done_at = _FakeEvent.busy_until

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return self.done_at is None or time.monotonic() >= self.done_at


def _fake_check(real: Callable) -> Callable:
    def check(name: str, t: Any, arg: str = "tensor", device: int | None = None) -> int:
        if isinstance(t, ember.Tensor) and t.device.type == "cpu":
            return 0  # CPU tensors pose as cuda:0 tensors
        return real(name, t, arg, device)

    return check


def _install(monkeypatch: pytest.MonkeyPatch, n: int) -> _FakeNccl:
    fake = _FakeNccl(n)
    cu = ember.cuda
    for name, value in [("is_available", lambda: True), ("device_count", lambda: 1),
                        ("current_device", lambda: 0), ("Stream", _FakeStream),
                        ("Event", _FakeEvent), ("current_stream", lambda d=None: _FakeStream()),
                        ("stream", lambda s: contextlib.nullcontext()),
                        ("device", lambda d: contextlib.nullcontext())]:
        monkeypatch.setattr(cu, name, value)
    monkeypatch.setattr(ember.Tensor, "record_stream", lambda self, s: None)
    monkeypatch.setattr(_nccl, "_lib", fake)
    monkeypatch.setattr(_nccl, "check_cuda_tensor", _fake_check(_nccl.check_cuda_tensor))
    monkeypatch.setattr(c10d, "_object_device", lambda pg, device=None: ember.device("cpu"))
    monkeypatch.setattr(_FakeEvent, "busy_until", 0.0)
    return fake


@pytest.fixture
def default_group():
    """The API needs a default group even when the calls name their own."""
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _two_ranks(body: Callable[[int, Any], None], timeout: float = 10.0) -> None:
    """Runs body(rank, group) in two threads, each with its nccl ProcessGroup."""
    store = dist.HashStore()
    store.set_timeout(timedelta(seconds=20))
    errors: list = []

    def main(r: int) -> None:
        pg = None
        try:
            impl = _nccl.NcclBackend(dist.PrefixStore("nccl", store), r, 2, timeout, "W")
            pg = c10d.ProcessGroup(impl, [0, 1], "nccl", "W", timeout)
            body(r, pg)
        except BaseException as e:  # noqa: BLE001  (re-raised in the test's thread)
            errors.append(e)
            _nccl._lib.f.bar.abort()
        finally:
            if pg is not None:
                pg.shutdown()

    threads = [threading.Thread(target=main, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]


def _ar(values: list, dtype: Any = ember.float32) -> ember.Tensor:
    return ember.tensor(values, dtype=dtype)


def test_two_rank_reductions(monkeypatch: pytest.MonkeyPatch, default_group: None) -> None:
    fake = _install(monkeypatch, 2)
    R = dist.ReduceOp  # noqa: N806

    def body(r: int, pg: Any) -> None:
        t = _ar([1.0 + r, 10.0 * (r + 1)])
        dist.all_reduce(t, group=pg)
        assert t.tolist() == [3.0, 30.0]
        t = _ar([1.0 + r, 10.0 * (r + 1)]).reshape(2, 1).expand(2, 2).t()  # strided
        t = t.contiguous().t()
        dist.all_reduce(t, op=R.AVG, group=pg)
        assert t.tolist() == [[1.5, 1.5], [15.0, 15.0]]
        t = _ar([1 + r, 5 - r], ember.int64)
        dist.all_reduce(t, op=R.MAX, group=pg)
        assert t.tolist() == [2, 5]
        t = _ar([True, r == 1, False], ember.bool)
        dist.all_reduce(t, group=pg)  # SUM on bool: a logical or
        assert t.tolist() == [True, True, False]
        t = _ar([1.0 + r])
        dist.reduce(t, dst=1, group=pg)
        assert t.tolist() == ([3.0] if r == 1 else [1.0])
        t = _ar([float(r), 7.0])
        dist.broadcast(t, src=1, group=pg)
        assert t.tolist() == [1.0, 7.0]
        ins = [ember.full((3,), float(10 * r + i)) for i in range(2)]
        o = ember.zeros(3)
        dist.reduce_scatter(o, ins, group=pg)
        assert o.tolist() == [10.0 + 2 * r] * 3
        o = ember.zeros(2, 2).t()
        dist.reduce_scatter_tensor(o, ember.arange(8, dtype=ember.float32) * (r + 1), group=pg)
        piece = ember.arange(8, dtype=ember.float32)[4 * r:4 * r + 4] * 3
        assert o.tolist() == piece.reshape(2, 2).tolist()

    _two_ranks(body)
    assert fake.log.count("init") == 2 and fake.log.count("destroy") == 2
    assert ("all_reduce", 1, 2) in fake.log  # bool -> uint8 with ncclMax


def test_two_rank_data_movement(monkeypatch: pytest.MonkeyPatch, default_group: None) -> None:
    _install(monkeypatch, 2)

    def x_of(i: int) -> ember.Tensor:
        return ember.arange(6, dtype=ember.float32).reshape(2, 3) + 100 * i

    def body(r: int, pg: Any) -> None:
        outs = [ember.zeros(2, 3) for _ in range(2)]
        dist.all_gather(outs, x_of(r), group=pg)
        assert [o.tolist() for o in outs] == [x_of(0).tolist(), x_of(1).tolist()]
        o = ember.zeros(3, 4).t()  # (4, 3), strided
        dist.all_gather_into_tensor(o, x_of(r), group=pg)
        assert o.tolist() == ember.cat([x_of(0), x_of(1)]).tolist()
        inp = _ar([[10 * r], [10 * r + 1]], ember.int32)
        o = ember.zeros(2, 1, dtype=ember.int32)
        dist.all_to_all_single(o, inp, group=pg)
        assert o.reshape(-1).tolist() == [r, 10 + r]
        # uneven: rank 0 keeps 1 row and sends 2; rank 1 sends 2 rows and keeps 1
        inp = _ar([100 * r + i for i in range(3)], ember.int64)
        splits = [1, 2] if r == 0 else [2, 1]
        o = ember.zeros(3, dtype=ember.int64)
        dist.all_to_all_single(o, inp, splits, splits, group=pg)
        assert o.tolist() == ([0, 100, 101] if r == 0 else [1, 2, 102])
        outs = [ember.zeros(2) for _ in range(2)]
        dist.all_to_all(outs, [ember.full((2,), float(10 * r + i)) for i in range(2)], group=pg)
        assert [o.tolist() for o in outs] == [[float(r)] * 2, [float(10 + r)] * 2]
        g = [ember.zeros(2) for _ in range(2)] if r == 1 else None
        dist.gather(ember.full((2,), float(r + 5)), g, dst=1, group=pg)
        if r == 1:
            assert [t.tolist() for t in g] == [[5.0, 5.0], [6.0, 6.0]]
        s = ember.zeros(2)
        sl = [ember.full((2,), 1.0), ember.full((2,), 2.0)] if r == 0 else None
        dist.scatter(s, sl, src=0, group=pg)
        assert s.tolist() == [1.0 + r] * 2
        if r == 0:
            dist.send(_ar([4.0, 5.0]), dst=1, group=pg)
        else:
            b = ember.zeros(2)
            assert dist.recv(b, src=0, group=pg) == 0
            assert b.tolist() == [4.0, 5.0]
        a, b = ember.full((3,), float(r)), ember.zeros(3)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, a, 1 - r, group=pg),
                                        dist.P2POp(dist.irecv, b, 1 - r, group=pg)])
        assert len(works) == 1 and works[0].wait()
        assert b.tolist() == [float(1 - r)] * 3
        objs = [{"x": 1}, "y"] if r == 0 else [None, None]
        dist.broadcast_object_list(objs, src=0, group=pg)
        assert objs == [{"x": 1}, "y"]
        got = [None, None]
        dist.all_gather_object(got, {"r": r, "pad": "z" * (5 * r)}, group=pg)
        assert got == [{"r": 0, "pad": ""}, {"r": 1, "pad": "zzzzz"}]

    _two_ranks(body)


def test_two_rank_debug_detail_names_the_mismatch(monkeypatch: pytest.MonkeyPatch,
                                                  default_group: None) -> None:
    _install(monkeypatch, 2)
    monkeypatch.setenv("EMBER_DISTRIBUTED_DEBUG", "DETAIL")
    said: dict = {}

    def body(r: int, pg: Any) -> None:
        for _ in range(3):  # matching calls pass (and the old keys are cleaned up)
            t = ember.ones(2)
            dist.all_reduce(t, group=pg)
            assert t.tolist() == [2.0, 2.0]
        with pytest.raises(dist.DistBackendError) as e:
            dist.all_reduce(ember.zeros(2 + r), group=pg)
        said[r] = str(e.value)
        with pytest.raises(dist.DistBackendError, match="unusable after an earlier failure"):
            dist.all_reduce(ember.zeros(2), group=pg)

    _two_ranks(body)
    assert ("collective #4 of group W differs between ranks: rank 0 called "
            "all_reduce((2,):float32, op=SUM) but rank 1 called all_reduce((3,):float32, "
            "op=SUM)") in said[0]


def test_one_rank_work_handles(monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, 1)
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "nccl" and dist.group.WORLD.is_nccl
        _FakeEvent.busy_until = time.monotonic() + 0.3  # the "GPU" is busy for 0.3 s
        t = ember.ones(2)
        w = dist.all_reduce(t, async_op=True)
        assert isinstance(w, dist.Work) and not w.is_completed()
        assert w.wait() and not w.is_completed()  # wait() does not block the host
        assert w.get_future().wait()[0] is t and w.get_future().value()[0] is t
        w.synchronize()  # this one does
        assert w.is_completed() and w.is_success() and w.exception() is None
        assert "completed" in repr(w)
        _FakeEvent.busy_until = time.monotonic() + 0.5
        w = dist.all_reduce(t, async_op=True)
        with pytest.raises(RuntimeError, match=r"Work.wait: all_reduce \(collective #2 of group "
                           r"WORLD\) did not complete within 0.05 s on rank 0"):
            w.wait(timeout=0.05)
        w.synchronize()
        _FakeEvent.busy_until = 0.0
        dist.group.WORLD.impl.comm(0).barrier_tensor = ember.zeros(1)
        assert dist.barrier() is None
        with pytest.raises(ValueError, match="recv: the nccl backend cannot receive from any "
                           "source"):
            dist.recv(ember.zeros(2))
        with pytest.raises(ValueError, match="send: rank 0 cannot send to itself"):
            dist.send(ember.zeros(2), dst=0)
        with pytest.raises(ValueError, match="ReduceOp.BOR is not supported by the nccl"):
            dist.all_reduce(ember.zeros(2, dtype=ember.int32), op=dist.ReduceOp.BOR)
        # a CPU group beside the nccl default group (torch's new_group(backend="gloo"))
        cpu_group = dist.new_group(backend="gloo")
        assert cpu_group.name() == "shm" and not cpu_group.is_nccl
        t = ember.tensor([3.0])
        dist.all_reduce(t, group=cpu_group)
        objs = [None]
        dist.all_gather_object(objs, {"k": 1}, group=cpu_group)
        assert t.tolist() == [3.0] and objs == [{"k": 1}]
        assert dist.new_group(backend="cuda:nccl").is_nccl
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("how", ["watchdog", "synchronize"])
def test_one_rank_timeout_aborts(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    fake = _install(monkeypatch, 1)
    dist.init_process_group("cpu:gloo,cuda:nccl", store=dist.HashStore(), rank=0, world_size=1,
                            timeout=timedelta(seconds=0.3))
    try:
        nccl = dist.group.WORLD.cuda_backend("test")
        _FakeEvent.busy_until = time.monotonic() + 100  # never completes
        w = nccl.all_reduce(ember.ones(2), dist.ReduceOp.SUM, True)
        if how == "watchdog":
            deadline = time.monotonic() + 20
            while w.exception() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            with pytest.raises(dist.DistBackendError) as e:
                w.wait()
        else:
            with pytest.raises(dist.DistBackendError) as e:
                w.synchronize()
        msg = str(e.value)
        assert ("all_reduce (collective #1 of group WORLD) on rank 0 (cuda:0) timed out after "
                "0.3 s") in msg
        assert fake.log.count("abort") == 1
        with pytest.raises(dist.DistBackendError, match="unusable after an earlier failure"):
            nccl.broadcast(ember.ones(2), 0, False)
        cpu = ember.ones(2)
        dist.all_reduce(cpu)  # the CPU backend of the group is unaffected
        assert cpu.tolist() == [1.0, 1.0]
    finally:
        dist.destroy_process_group()
    assert "destroy" not in fake.log  # an aborted communicator is not destroyed again
