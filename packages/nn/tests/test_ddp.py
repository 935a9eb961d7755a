"""DistributedDataParallel's bucketing, hooks and semantics, over a small fake of
ember.distributed's collectives (all_reduce / broadcast with torch's signatures).

The fake runs each "rank" in a forked process; ranks exchange data through socket pairs on a
communication thread per process, so async collectives really overlap backward. With world size
1 it runs in the test's own process. It records every collective so that tests can check which
buckets were reduced and when.
"""

from __future__ import annotations

import enum
import multiprocessing as mp
import os
import queue
import threading
import traceback
from typing import Any, Callable

import ember
import ember.distributed as dist
import numpy as np
import pytest
from ember import nn
from ember.nn.parallel import DistributedDataParallel as DDP

TIMEOUT = 120.0  # seconds: generous on a loaded machine; a hang fails instead of blocking CI


class FakeReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"


def _op_name(op: Any) -> str:
    """SUM, AVG, ... for a member of ember.distributed.ReduceOp (ours or the real one)."""
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX"):
        if op == getattr(dist.ReduceOp, name, object()):
            return name
    raise ValueError(f"fake all_reduce: unknown op {op!r}")


def _to_numpy(t: ember.Tensor) -> np.ndarray:
    t = t.detach()
    if t.dtype == ember.bfloat16:  # NumPy has no bfloat16: carry it as float32
        t = t.float()
    return np.ascontiguousarray(t.contiguous().numpy())


class FakeWork:
    def __init__(self, finish: Callable[[Any], None]) -> None:
        self._event = threading.Event()
        self._finish = finish
        self.result: Any = None
        self.error: BaseException | None = None

    def is_completed(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: Any = None) -> bool:
        if not self._event.wait(TIMEOUT):
            raise RuntimeError("fake collective timed out")
        if self.error is not None:
            raise self.error
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish(self.result)
        return True


class FakeGroup:
    """The default process group of one rank."""

    def __init__(self, rank: int, world: int, conns: dict[int, Any]) -> None:
        self.rank, self.world, self.conns = rank, world, conns
        self.calls: list[tuple[str, int, str, bool]] = []  # (op, numel, dtype, async)
        self._jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            work, compute = self._jobs.get()
            try:
                work.result = compute()
            except BaseException as e:  # noqa: BLE001
                work.error = e
            work._event.set()

    def _gather(self, data: np.ndarray) -> list[np.ndarray]:
        parts = {self.rank: data}
        for peer in sorted(self.conns):
            c = self.conns[peer]
            if self.rank < peer:
                c.send_bytes(data.tobytes())
                parts[peer] = np.frombuffer(c.recv_bytes(), dtype=data.dtype).reshape(data.shape)
            else:
                parts[peer] = np.frombuffer(c.recv_bytes(), dtype=data.dtype).reshape(data.shape)
                c.send_bytes(data.tobytes())
        return [parts[r] for r in range(self.world)]

    def _submit(
        self, tensor: ember.Tensor, compute: Callable[[], np.ndarray], async_op: bool
    ) -> FakeWork | None:
        def finish(result: np.ndarray) -> None:
            with ember.no_grad():
                tensor.copy_(ember.from_numpy(np.ascontiguousarray(result)).reshape(tensor.shape))

        work = FakeWork(finish)
        self._jobs.put((work, compute))
        if async_op:
            return work
        work.wait()
        return None

    # ---- the patched ember.distributed functions ----
    def all_reduce(
        self, tensor: ember.Tensor, op: Any = None, group: Any = None, async_op: bool = False
    ):
        name = _op_name(op) if op is not None else "SUM"
        self.calls.append(("all_reduce", tensor.numel(), str(tensor.dtype), async_op))
        data = _to_numpy(tensor)

        def compute() -> np.ndarray:
            parts = self._gather(data)
            if name in ("SUM", "AVG"):
                out = parts[0].copy()
                for p in parts[1:]:
                    out += p
                return out / self.world if name == "AVG" else out
            if name == "MAX":
                return np.maximum.reduce(parts)
            if name == "MIN":
                return np.minimum.reduce(parts)
            return np.multiply.reduce(parts)

        return self._submit(tensor, compute, async_op)

    def all_gather(self, tensors: list, tensor: ember.Tensor, group: Any = None,
                   async_op: bool = False):
        self.calls.append(("all_gather", tensor.numel(), str(tensor.dtype), async_op))
        parts = self._gather(_to_numpy(tensor))
        with ember.no_grad():
            for t, part in zip(tensors, parts):
                t.copy_(ember.from_numpy(np.ascontiguousarray(part)).reshape(t.shape))

    def broadcast(self, tensor: ember.Tensor, src: int, group: Any = None, async_op: bool = False):
        self.calls.append(("broadcast", tensor.numel(), str(tensor.dtype), async_op))
        data = _to_numpy(tensor)
        return self._submit(tensor, lambda: self._gather(data)[src], async_op)

    def install(self, setter: Callable[[str, Any], None]) -> None:
        setter("is_initialized", lambda: True)
        setter("get_rank", lambda group=None: self.rank)
        setter("get_world_size", lambda group=None: self.world)
        setter("get_global_rank", lambda group, group_rank: group_rank)
        setter("all_reduce", self.all_reduce)
        setter("broadcast", self.broadcast)
        setter("all_gather", self.all_gather)
        if not hasattr(dist, "ReduceOp"):
            setter("ReduceOp", FakeReduceOp)


@pytest.fixture
def fake_world1(monkeypatch):
    """ember.distributed with a single rank, in this process."""
    g = FakeGroup(0, 1, {})
    g.install(lambda name, value: monkeypatch.setattr(dist, name, value, raising=False))
    return g


def _child(fn: Callable, rank: int, world: int, conns: dict, result_conn: Any, args: tuple) -> None:
    try:
        g = FakeGroup(rank, world, conns)
        g.install(lambda name, value: setattr(dist, name, value))
        result = fn(rank, world, g, *args)
        result_conn.send(("ok", result))
    except BaseException:  # noqa: BLE001
        result_conn.send(("error", traceback.format_exc()))
    finally:
        os._exit(0)


def run_ranks(fn: Callable, world: int = 2, *args: Any) -> list[Any]:
    """Runs ``fn(rank, world, group, *args)`` in ``world`` forked processes; returns the results."""
    ctx = mp.get_context("fork")
    pairs = {(i, j): ctx.Pipe(duplex=True) for i in range(world) for j in range(i + 1, world)}
    procs, results = [], []
    for r in range(world):
        conns = {}
        for (i, j), (a, b) in pairs.items():
            if i == r:
                conns[j] = a
            elif j == r:
                conns[i] = b
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(fn, r, world, conns, send, args))
        p.start()
        procs.append(p)
        results.append(recv)
    out = []
    try:
        for r, recv in enumerate(results):
            if not recv.poll(TIMEOUT):
                raise AssertionError(f"rank {r} did not finish within {TIMEOUT}s (a hang)")
            status, value = recv.recv()
            if status != "ok":
                raise AssertionError(f"rank {r} failed:\n{value}")
            out.append(value)
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    return out


# ---- models -------------------------------------------------------------------------------


class Net(nn.Module):
    def __init__(self, unused_branch: bool = False) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.bn = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, 8)
        self.fc3 = nn.Linear(8, 3)
        if unused_branch:
            self.extra = nn.Linear(8, 3)

    def forward(self, x: ember.Tensor, use_extra: bool = False) -> ember.Tensor:
        h = ember.relu(self.fc2(ember.relu(self.bn(self.fc1(x)))))
        out = self.fc3(h)
        if use_extra:
            out = out + self.extra(h)
        return out


def _data(seed: int = 0, n: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 6)).astype(np.float32), rng.integers(0, 3, n).astype(np.int64)


def _params(m: nn.Module) -> dict[str, np.ndarray]:
    return {n: p.detach().numpy().copy() for n, p in m.named_parameters()}


def _grads(m: nn.Module) -> dict[str, np.ndarray | None]:
    return {n: None if p.grad is None else p.grad.numpy().copy() for n, p in m.named_parameters()}


def _train(model: nn.Module, xs: np.ndarray, ys: np.ndarray, steps: int) -> None:
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        opt.zero_grad()
        x, y = ember.from_numpy(xs[s]), ember.from_numpy(ys[s])
        ember.cross_entropy(model(x), y).backward()
        opt.step()


# ---- tests --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"bucket_cap_mb": 0.0005},  # ~500 bytes: several buckets
        {"bucket_cap_mb": 0.0005, "gradient_as_bucket_view": True},
        {"find_unused_parameters": True},
        {"static_graph": True, "forward_sync_buffers": False},
    ],
    ids=["default", "small_buckets", "grad_as_bucket_view", "find_unused", "static_graph"],
)
def test_two_ranks_match_one_process_over_the_combined_batch(kwargs):
    steps, n = 3, 4
    # BatchNorm's batch statistics of half a batch differ from the full batch's: its running
    # statistics are used instead (eval mode), so the step is separable over the batch.
    ref = _reference_frozen_bn(steps, 2, n)
    res = run_ranks(_ddp_rank_frozen_bn, 2, steps, n, kwargs)
    for r in res:
        for name, value in ref.items():
            np.testing.assert_allclose(r["params"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert res[0]["buckets"] == res[1]["buckets"]
    if kwargs.get("bucket_cap_mb"):
        assert len(res[0]["buckets"]) > 1


def _frozen(model: Net) -> Net:
    model.bn.eval()  # running statistics, the same on every rank: the step is batch-separable
    return model


def _reference_frozen_bn(steps: int, world: int, n: int) -> dict[str, np.ndarray]:
    ember.manual_seed(0)
    model = _frozen(Net())
    batches = [_data(100 + s, n * world) for s in range(steps)]
    _train(model, np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches]), steps)
    return _params(model)


def _ddp_rank_frozen_bn(
    rank: int, world: int, g: FakeGroup, steps: int, n: int, kwargs: dict
) -> dict:
    ember.manual_seed(rank)
    model = Net()
    ddp = DDP(model, **kwargs)
    _frozen(model)
    batches = [_data(100 + s, n * world) for s in range(steps)]
    xs = np.stack([b[0][rank * n : (rank + 1) * n] for b in batches])
    ys = np.stack([b[1][rank * n : (rank + 1) * n] for b in batches])
    _train(ddp, xs, ys, steps)
    return {"params": _params(model), "buckets": ddp.reducer.bucket_indices}


def _broadcast_rank(rank: int, world: int, g: FakeGroup) -> dict:
    ember.manual_seed(10 + rank)
    model = Net()
    with ember.no_grad():
        model.bn.running_mean.fill_(float(rank + 1))
    before = _params(model)
    ddp = DDP(model)
    after_init = _params(model)
    with ember.no_grad():
        model.bn.running_mean.fill_(float(rank + 5))  # drifts apart; forward re-broadcasts
    ddp(ember.from_numpy(_data(0, 4)[0]))
    return {"before": before, "after": after_init, "bn": model.bn.running_mean.numpy().copy()}


def test_construction_broadcasts_parameters_and_forward_broadcasts_buffers():
    r0, r1 = run_ranks(_broadcast_rank, 2)
    for name in r0["before"]:
        np.testing.assert_array_equal(r1["after"][name], r0["before"][name])
        np.testing.assert_array_equal(r0["after"][name], r0["before"][name])
    assert not np.array_equal(r1["before"]["fc1.weight"], r0["before"]["fc1.weight"])
    # Rank 0's buffer (5.0) reached rank 1 before its forward updated the running mean.
    np.testing.assert_allclose(r1["bn"], r0["bn"], rtol=1e-6)


def _no_sync_rank(rank: int, world: int, g: FakeGroup, n: int) -> dict:
    ember.manual_seed(0)
    model = _frozen(Net())
    ddp = DDP(model, bucket_cap_mb=0.0005)
    _frozen(model)
    x1, y1 = _data(1, n * world)
    x2, y2 = _data(2, n * world)
    sl = slice(rank * n, (rank + 1) * n)

    def reductions() -> int:
        return sum(c[0] == "all_reduce" for c in g.calls)

    before = reductions()
    with ddp.no_sync():
        ember.cross_entropy(ddp(ember.from_numpy(x1[sl])), ember.from_numpy(y1[sl])).backward()
    calls_in_no_sync = reductions() - before
    local = _grads(model)
    ember.cross_entropy(ddp(ember.from_numpy(x2[sl])), ember.from_numpy(y2[sl])).backward()
    return {"grads": _grads(model), "local": local, "calls_in_no_sync": calls_in_no_sync}


def test_no_sync_accumulates_locally_then_reduces_the_sum():
    n, world = 4, 2
    res = run_ranks(_no_sync_rank, world, n)
    ember.manual_seed(0)
    ref = _frozen(Net())
    for seed in (1, 2):
        x, y = _data(seed, n * world)
        ember.cross_entropy(ref(ember.from_numpy(x)), ember.from_numpy(y)).backward()
    expected = _grads(ref)
    for r in res:
        assert r["calls_in_no_sync"] == 0  # only the buffers' broadcast, no gradient reduction
        for name, value in expected.items():
            np.testing.assert_allclose(r["grads"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(res[0]["local"]["fc3.weight"], res[1]["local"]["fc3.weight"])


def _unused_rank(rank: int, world: int, g: FakeGroup, kwargs: dict, use_extra_on: tuple) -> dict:
    ember.manual_seed(0)
    model = _frozen(Net(unused_branch=True))
    ddp = DDP(model, **kwargs)
    _frozen(model)
    x, y = _data(3, 4)
    for _ in range(2):
        model.zero_grad()
        ember.cross_entropy(
            ddp(ember.from_numpy(x), use_extra=rank in use_extra_on), ember.from_numpy(y)
        ).backward()
    return {"grads": _grads(model)}


def test_find_unused_parameters_does_not_hang():
    # "extra" is used on rank 0 only: rank 1 marks it ready at the start of backward.
    r0, r1 = run_ranks(_unused_rank, 2, {"find_unused_parameters": True}, (0,))
    np.testing.assert_allclose(r0["grads"]["extra.weight"], r1["grads"]["extra.weight"], rtol=1e-6)
    for name in r0["grads"]:
        np.testing.assert_allclose(r0["grads"][name], r1["grads"][name], rtol=1e-5, atol=1e-7)
    # Used nowhere: its gradient stays None on every rank.
    r0, r1 = run_ranks(_unused_rank, 2, {"find_unused_parameters": True}, ())
    assert r0["grads"]["extra.weight"] is None and r1["grads"]["extra.bias"] is None
    assert r0["grads"]["fc1.weight"] is not None


def test_static_graph_handles_unused_parameters_without_find_unused():
    r0, r1 = run_ranks(_unused_rank, 2, {"static_graph": True}, ())
    assert r0["grads"]["extra.weight"] is None
    np.testing.assert_allclose(r0["grads"]["fc1.weight"], r1["grads"]["fc1.weight"], rtol=1e-6)


def test_unused_parameter_without_find_unused_raises_at_next_forward(fake_world1):
    ember.manual_seed(0)
    model = Net(unused_branch=True)
    ddp = DDP(model)
    x = ember.randn(4, 6)
    ddp(x).sum().backward()  # completes: the launched buckets do not block
    with pytest.raises(RuntimeError, match=r"find_unused_parameters=True.*extra\.weight"):
        ddp(x)
    # The iteration was abandoned: training can go on with all parameters used.
    ddp(x, use_extra=True).sum().backward()
    assert model.extra.weight.grad is not None


def test_buckets_fill_in_reverse_order_and_overlap_backward(fake_world1):
    ember.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(16, 16) for _ in range(6)])
    ddp = DDP(model, bucket_cap_mb=(16 * 16 + 16) * 4 * 2 / 2**20)  # two layers per bucket
    names = [n for n, _ in model.named_parameters()]
    # As torch: one bucket, in registration order, until the first iteration showed the order
    # the gradients come in
    assert [[names[i] for i in b] for b in ddp.reducer.bucket_indices] == [names]
    assert [c[0] for c in fake_world1.calls] == ["all_gather", "broadcast", "broadcast"]
    ddp(ember.randn(3, 16)).sum().backward()
    reduces = [c for c in fake_world1.calls if c[0] == "all_reduce" and c[3]]
    assert [c[1] for c in reduces] == [6 * (16 * 16 + 16)]
    # rebuilt in the ready order: the last layers' bucket first
    ddp(ember.randn(3, 16)).sum().backward()
    buckets = [[names[i] for i in b] for b in ddp.reducer.bucket_indices]
    assert sorted(buckets[0]) == ["4.bias", "4.weight", "5.bias", "5.weight"]
    assert sorted(buckets[-1]) == ["0.bias", "0.weight", "1.bias", "1.weight"]
    assert len(buckets) == 3
    # When the first layer's gradient arrives, the buckets of the later layers were already sent.
    seen = []
    model[0].weight.register_post_accumulate_grad_hook(
        lambda p: seen.append(sum(c[0] == "all_reduce" and c[3] for c in fake_world1.calls))
    )
    before = len([c for c in fake_world1.calls if c[0] == "all_reduce" and c[3]])
    ddp(ember.randn(3, 16)).sum().backward()
    assert seen and seen[0] >= before + 2
    reduces = [c for c in fake_world1.calls if c[0] == "all_reduce" and c[3]][before:]
    assert [c[1] for c in reduces] == [2 * (16 * 16 + 16)] * 3


def test_first_bucket_is_at_most_one_mib(fake_world1):
    model = nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 512), nn.Linear(512, 512))
    ddp = DDP(model)  # 25 MiB buckets; each weight is 1 MiB
    layer = (512 * 512 + 512) * 4
    assert [b.buffer.numel() * 4 for b in ddp.reducer.buckets] == [3 * layer]
    ddp(ember.randn(1, 512)).sum().backward()
    ddp(ember.randn(1, 512)).sum().backward()
    # Rebuilt: the first bucket closes as soon as it reaches 1 MiB (the last layer); the rest
    # share one.
    assert [b.buffer.numel() * 4 for b in ddp.reducer.buckets] == [layer, 2 * layer]
    # an explicit bucket_cap_mb has no small first bucket (as torch)
    ddp = DDP(model, bucket_cap_mb=25)
    ddp(ember.randn(1, 512)).sum().backward()
    ddp(ember.randn(1, 512)).sum().backward()
    assert [b.buffer.numel() * 4 for b in ddp.reducer.buckets] == [3 * layer]


def test_gradient_as_bucket_view_shares_memory(fake_world1):
    model = Net()
    ddp = DDP(model, gradient_as_bucket_view=True)
    ddp(ember.randn(4, 6)).sum().backward()
    ddp(ember.randn(4, 6)).sum().backward()  # the buckets are rebuilt before this one
    buf = ddp.reducer.buckets[0].buffer
    lo, hi = buf.data_ptr(), buf.data_ptr() + buf.numel() * 4
    assert all(lo <= p.grad.data_ptr() < hi for p in model.parameters())
    # zero_grad(set_to_none=True) then another step: grads become views again.
    model.zero_grad()
    ddp(ember.randn(4, 6)).sum().backward()
    assert all(lo <= p.grad.data_ptr() < hi for p in model.parameters())


def _hook_rank(rank: int, world: int, g: FakeGroup, hook_name: str) -> dict:
    from ember.distributed.algorithms.ddp_comm_hooks import default_hooks

    ember.manual_seed(0)
    model = _frozen(Net())
    ddp = DDP(model, bucket_cap_mb=0.0005)
    _frozen(model)
    ddp.register_comm_hook(None, getattr(default_hooks, hook_name))
    x, y = _data(7 + rank, 4)
    ember.cross_entropy(ddp(ember.from_numpy(x)), ember.from_numpy(y)).backward()
    return {
        "grads": _grads(model),
        "dtypes": sorted({c[2] for c in g.calls if c[0] == "all_reduce" and c[3]}),
    }


@pytest.mark.parametrize(
    ("hook", "dtype", "tol"),
    [
        ("allreduce_hook", "ember.float32", 1e-6),
        ("fp16_compress_hook", "ember.float16", 2e-3),
        ("bf16_compress_hook", "ember.bfloat16", 2e-2),
    ],
)
def test_default_comm_hooks_compress(hook, dtype, tol):
    r0, r1 = run_ranks(_hook_rank, 2, hook)
    assert r0["dtypes"] == [dtype]
    ember.manual_seed(0)
    ref = _frozen(Net())
    x = np.concatenate([_data(7, 4)[0], _data(8, 4)[0]])
    y = np.concatenate([_data(7, 4)[1], _data(8, 4)[1]])
    ember.cross_entropy(ref(ember.from_numpy(x)), ember.from_numpy(y)).backward()
    for name, value in _grads(ref).items():
        np.testing.assert_allclose(r0["grads"][name], value, rtol=tol, atol=tol, err_msg=name)
        np.testing.assert_array_equal(r0["grads"][name], r1["grads"][name])


def test_custom_comm_hook_sees_each_bucket(fake_world1):
    from ember.distributed.algorithms import Future

    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8))
    ddp = DDP(model, bucket_cap_mb=72 * 4 / 2**20)
    seen = []

    def double(state: Any, bucket: Any) -> Future:
        seen.append(
            (
                state,
                bucket.index(),
                bucket.is_last(),
                len(bucket.parameters()),
                [tuple(g.shape) for g in bucket.gradients()],
            )
        )
        fut: Future = Future()
        fut.set_result(bucket.buffer() * 2)
        return fut

    ddp.register_comm_hook("state", double)
    with pytest.raises(RuntimeError, match="only be called once"):
        ddp.register_comm_hook("state", double)
    ddp(ember.randn(2, 8)).sum().backward()
    # the first iteration has one bucket, in registration order (as torch)
    assert [s[1:4] for s in seen] == [(0, True, 6)]
    assert seen[0][4] == [(8, 8), (8,)] * 3
    seen.clear()
    ddp(ember.randn(2, 8)).sum().backward()
    assert [s[1] for s in seen] == [0, 1, 2] and [s[2] for s in seen] == [False, False, True]
    assert seen[0][0] == "state" and sorted(seen[0][4]) == [(8,), (8, 8)]
    x = ember.randn(2, 8)
    model.zero_grad()
    plain = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8))
    plain.load_state_dict(model.state_dict())
    plain(x).sum().backward()
    ddp(x).sum().backward()
    for p, q in zip(model.parameters(), plain.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), 2 * q.grad.numpy(), rtol=1e-6)


def test_future_chaining_and_errors():
    from ember.distributed.algorithms import Future

    calls = []
    f = Future(lambda: calls.append("waited") or 3)
    g = f.then(lambda fut: fut.value() + 1)
    assert not f.done() and g.wait() == 4 and calls == ["waited"] and f.done()
    with pytest.raises(RuntimeError, match="not completed"):
        Future().value()
    # Without a waiter, wait() blocks until another thread completes the future (as torch's).
    import threading

    later = Future()
    threading.Timer(0.05, lambda: later.set_result(7)).start()
    assert later.wait() == 7
    bad = Future(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        bad.wait()
    with pytest.raises(TypeError, match="callable"):
        f.then(3)


def test_construction_errors(monkeypatch, fake_world1):
    with pytest.raises(ValueError, match="device_ids"):
        DDP(nn.Linear(2, 2), device_ids=[0])
    with pytest.raises(RuntimeError, match="doesn't have any parameter that requires a gradient"):
        DDP(nn.Linear(2, 2).requires_grad_(False))
    with pytest.raises(ValueError, match="bucket_cap_mb must be positive"):
        DDP(nn.Linear(2, 2), bucket_cap_mb=0)
    with pytest.raises(TypeError, match="must be an nn.Module"):
        DDP(lambda x: x)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    with pytest.raises(ValueError, match="init_process_group"):  # PyTorch's class
        DDP(nn.Linear(2, 2))


def _mismatch_rank(rank: int, world: int, g: FakeGroup) -> str:
    try:
        DDP(nn.Linear(2, 2 + rank))
    except RuntimeError as e:
        return str(e)
    return ""


def test_different_models_on_the_ranks_are_reported():
    # as torch: the rank whose parameter differs from rank 0's names it; rank 0 (torch's would
    # fail later, in the broadcast of the parameters) names the rank that differs
    r0, r1 = run_ranks(_mismatch_rank, 2)
    assert r1 == ("[1]: params[0] in this process with sizes [3, 2] appears not to match sizes "
                  "of the same param in process 0.")
    assert r0 == ("DDP expects same model across all ranks, but the sizes or strides of the "
                  "parameters of rank(s) [1] differ from those of rank 0")


def _count_mismatch_rank(rank: int, world: int, g: FakeGroup) -> str:
    try:
        DDP(nn.Linear(2, 2, bias=rank == 0))
    except RuntimeError as e:
        return str(e)
    return ""


def test_different_parameter_counts_are_reported_on_every_rank():
    r0, r1 = run_ranks(_count_mismatch_rank, 2)  # torch's messages
    assert r0 == ("DDP expects same model across all ranks, but Rank 0 has 2 params, while "
                  "rank 1 has inconsistent 1 params.")
    assert r1 == ("DDP expects same model across all ranks, but Rank 1 has 1 params, while "
                  "rank 0 has inconsistent 2 params.")


def _startup_calls(rank: int, world: int, g: FakeGroup) -> list:
    DDP(nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)))
    return [c[:3] for c in g.calls]


def test_startup_collectives_are_torchs():
    # torch 2.13: an all-gather of the parameter counts, a broadcast of rank 0's sizes and
    # strides (Linear weight 3x3: 2 + 2, bias and BatchNorm weight and bias: 1 + 1 each), then
    # the parameters and buffers broadcast
    # (one flat buffer per dtype: 9 + 3 + 4 x 3 float32, and the int64 batch count)
    r0, r1 = run_ranks(_startup_calls, 2)
    assert r0 == r1 == [("all_gather", 3, "ember.int64"), ("broadcast", 10, "ember.int64"),
                        ("broadcast", 24, "ember.float32"), ("broadcast", 1, "ember.int64")]


def test_state_dict_and_module_access(fake_world1):
    model = Net()
    ddp = DDP(model)
    assert ddp.module is model
    assert set(ddp.state_dict()) == {f"module.{k}" for k in model.state_dict()}
    ddp.eval()
    with ember.no_grad():
        out = ddp(ember.randn(2, 6))
    assert out.shape == (2, 3)
    assert not ddp.reducer.expect_hooks  # no reduction expected after a no-grad forward


class _Reordered(nn.Module):
    """Registered late-layer first, so gradients arrive in registration order."""

    def __init__(self) -> None:
        super().__init__()
        self.late = nn.Linear(16, 16)
        self.early = nn.Linear(16, 16)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        return self.late(ember.relu(self.early(x)))


@pytest.mark.parametrize("as_view", [False, True])
def test_buckets_are_rebuilt_in_the_order_gradients_arrive(fake_world1, as_view):
    ember.manual_seed(0)
    model = _Reordered()
    ddp = DDP(model, bucket_cap_mb=(16 * 16 + 16) * 4 / 2**20, gradient_as_bucket_view=as_view)
    names = [n for n, _ in model.named_parameters()]

    def buckets() -> list[list[str]]:
        return [[names[i] for i in b] for b in ddp.reducer.bucket_indices]

    # one bucket, in registration order, until the rebuild (as torch)
    assert buckets() == [["late.weight", "late.bias", "early.weight", "early.bias"]]
    x = ember.randn(3, 16)
    ddp(x).sum().backward()
    first = _grads(model)
    assert len(buckets()) == 1  # unchanged during the first iteration
    broadcasts = sum(c[0] == "broadcast" for c in fake_world1.calls)
    ddp(x).sum().backward()  # rebuilt before this iteration: rank 0's order is broadcast
    assert sum(c[0] == "broadcast" for c in fake_world1.calls) == broadcasts + 1
    assert buckets()[0][0].startswith("late") and buckets()[1][0].startswith("early")
    for name, g in _grads(model).items():  # accumulated over both iterations, none lost
        np.testing.assert_allclose(g, 2 * first[name], rtol=1e-6, err_msg=name)
    if as_view:
        buf = ddp.reducer.buckets[0].buffer
        assert model.late.weight.grad.data_ptr() >= buf.data_ptr()
        assert model.late.weight.grad.data_ptr() < buf.data_ptr() + buf.numel() * 4


class _TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 2)
        self.b = nn.Linear(4, 2)

    def forward(self, x: ember.Tensor) -> tuple[ember.Tensor, ember.Tensor]:
        return self.a(x), self.b(x)


def test_a_gradient_twice_in_one_iteration_is_an_error(fake_world1):
    ddp = DDP(_TwoHeads())
    a, b = ddp(ember.randn(3, 4))
    a.sum().backward(retain_graph=True)  # the bucket still waits for b's parameters
    with pytest.raises(RuntimeError, match=r"a\.(weight|bias) .*received a gradient twice"):
        a.sum().backward()


def test_backward_without_a_new_forward_is_local(fake_world1):
    model = nn.Linear(4, 2)
    ddp = DDP(model)
    ddp(ember.randn(3, 4))  # a forward whose backward never runs is fine
    out = ddp(ember.randn(3, 4)).sum()
    out.backward(retain_graph=True)
    reductions = len(fake_world1.calls)
    first = model.weight.grad.numpy().copy()
    out.backward()  # the iteration is over: no hooks act, the gradient just accumulates
    assert len(fake_world1.calls) == reductions
    np.testing.assert_allclose(model.weight.grad.numpy(), 2 * first, rtol=1e-6)


REAL_WORKER = """
import os, sys
import numpy as np
sys.path.insert(0, {tests!r})
import ember, ember.distributed as dist
from ember.nn.parallel import DistributedDataParallel as DDP
import test_ddp as T

dist.init_process_group({backend!r})
rank, world = dist.get_rank(), dist.get_world_size()
steps, n = 3, 4
ember.manual_seed(rank)
model = T.Net()
ddp = DDP(model, bucket_cap_mb=0.0005, **{kwargs!r})
T._frozen(model)
batches = [T._data(100 + s, n * world) for s in range(steps)]
xs = np.stack([b[0][rank * n : (rank + 1) * n] for b in batches])
ys = np.stack([b[1][rank * n : (rank + 1) * n] for b in batches])
T._train(ddp, xs, ys, steps)
np.savez(os.path.join({out!r}, "rank_%d.npz" % rank), **T._params(model))
dist.destroy_process_group()
"""


@pytest.mark.parametrize(
    "kwargs", [{}, {"gradient_as_bucket_view": True, "find_unused_parameters": True}]
)
def test_two_processes_with_the_real_backend(tmp_path, kwargs):
    """The same check as above through the launcher and ember.distributed's own backend."""
    import subprocess
    import sys
    from pathlib import Path

    if not hasattr(dist, "init_process_group"):
        pytest.skip("ember.distributed has no process group yet")
    pytest.importorskip("ember.distributed.run")
    worker = tmp_path / "worker.py"
    worker.write_text(
        REAL_WORKER.format(
            tests=str(Path(__file__).parent), backend="gloo", kwargs=kwargs, out=str(tmp_path)
        )
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(p).parent) for p in ember.__path__] + [env.get("PYTHONPATH", "")]
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ember.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            str(worker),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    ref = _reference_frozen_bn(3, 2, 4)
    for rank in (0, 1):
        got = np.load(tmp_path / f"rank_{rank}.npz")
        for name, value in ref.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_buffers_sync_after_training_forwards_only(fake_world1):
    ddp = DDP(Net())

    def broadcasts() -> int:
        return sum(c[0] == "broadcast" for c in fake_world1.calls)

    x = ember.randn(4, 6)
    n0 = broadcasts()
    ddp(x).sum().backward()  # first forward: buffers synchronized
    n1 = broadcasts()
    assert n1 > n0
    with ember.no_grad():
        ddp(x)  # follows a training forward: synchronized
        n2 = broadcasts()
        ddp(x)  # follows a no-grad forward: not synchronized
    assert n2 > n1 and broadcasts() == n2
    DDP(Net(), forward_sync_buffers=False)
    n3 = broadcasts()
    ddp2 = DDP(Net(), forward_sync_buffers=False)
    n4 = broadcasts()
    ddp2(x)
    assert broadcasts() == n4 and n4 > n3  # only the construction's broadcast


class _Mixed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4).double()

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        return self.a(x).sum() + self.b(x.double()).sum()


def test_parameters_of_several_dtypes_get_separate_buckets(fake_world1):
    model = _Mixed()
    ddp = DDP(model)
    dtypes = sorted(str(b.buffer.dtype) for b in ddp.reducer.buckets)
    assert dtypes == ["ember.float32", "ember.float64"]
    ddp(ember.randn(2, 4)).backward()
    reduces = [c for c in fake_world1.calls if c[0] == "all_reduce" and c[3]]
    assert sorted(c[2] for c in reduces) == dtypes
    assert model.b.weight.grad.dtype == ember.float64 and model.a.weight.grad is not None
