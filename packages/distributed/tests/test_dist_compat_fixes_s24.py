"""Regression tests for the session-24 distributed compatibility round: point-to-point messages
matched by tag rather than by arrival order (and receive-from-any-source among them), torch's
errors for a strided point-to-point tensor and an empty batch_isend_irecv, and
DDP._set_params_and_buffers_to_ignore_for_model (expert-parallel weights kept out of DDP)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import ember.distributed as dist
import pytest


def _run(worker: Any, world: int, tmp_path: Any, timeout: float = 180) -> list:
    from dist_helpers import run_ranks

    return run_ranks(worker, world, ("file://" + str(tmp_path / "store"),), timeout)


# ---- point to point: tags, any source, strided tensors ----------------------------------------


def _tags_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember

        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=3,
                                timeout=timedelta(seconds=60))
        out: dict[str, Any] = {}
        if rank == 1:
            # tags 7, 3, 5 (a large one, through the mailbox in several chunks), then 3 again
            works = [dist.isend(ember.tensor([7.0]), dst=2, tag=7),
                     dist.isend(ember.tensor([3.0, 3.5]), dst=2, tag=3),
                     dist.isend(ember.arange(300_000, dtype=ember.float32), dst=2, tag=5),
                     dist.isend(ember.tensor([33.0, 33.5]), dst=2, tag=3)]
            for w in works:
                w.wait()
            dist.send(ember.tensor([1.0]), dst=0, tag=9)
        elif rank == 2:
            a, b, c = ember.zeros(2), ember.zeros(1), ember.zeros(300_000)
            d = ember.zeros(2)
            out["src_a"] = dist.recv(a, src=1, tag=3)
            w = dist.irecv(c, src=1, tag=5)
            out["src_b"] = dist.recv(b, src=1, tag=7)
            w.wait()
            dist.recv(d, src=1, tag=3)
            out["values"] = [a.tolist(), b.tolist(), d.tolist()]
            out["large_ok"] = bool((c == ember.arange(300_000, dtype=ember.float32)).all())
            dist.send(ember.tensor([2.0]), dst=0, tag=4)
            dist.send(ember.tensor([2.5]), dst=0, tag=9)
        else:
            # from any source: tag 9 comes from rank 1 and from rank 2 (after its tag 4)
            got, senders = [], []
            for _ in range(2):
                t = ember.zeros(1)
                senders.append(dist.recv(t, tag=9))
                got.append(t.item())
            t = ember.zeros(1)
            out["tag4_from"] = dist.recv(t, tag=4)
            out["tag4"] = t.item()
            out["any"] = sorted(zip(senders, got))
        dist.barrier()
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


def test_recv_matches_messages_by_tag_not_arrival_order(tmp_path):
    res = _run(_tags_worker, 3, tmp_path)
    assert res[2] == {"src_a": 1, "src_b": 1, "values": [[3.0, 3.5], [7.0], [33.0, 33.5]],
                      "large_ok": True}
    assert res[0] == {"tag4_from": 2, "tag4": 2.0, "any": [(1, 1.0), (2, 2.5)]}


def _strided_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember

        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        out: dict[str, Any] = {}
        strided = ember.ones(3, 2).t()
        for name, fn in (("send", dist.send), ("isend", dist.isend), ("recv", dist.recv),
                         ("irecv", dist.irecv)):
            try:
                fn(strided, 1 - rank)
                out[name] = "no error"
            except RuntimeError as e:
                out[name] = str(e)
        try:
            dist.batch_isend_irecv([])
        except IndexError as e:
            out["empty"] = str(e)
        # the collectives still take strided tensors
        t = ember.arange(6.0).reshape(2, 3).t()
        dist.all_reduce(t)
        out["all_reduce"] = t.tolist()
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


def test_point_to_point_refuses_strided_tensors_and_empty_batches(tmp_path):
    res = _run(_strided_worker, 2, tmp_path)
    for r in res:
        for name in ("send", "isend", "recv", "irecv"):
            assert "has to be contiguous" in r[name] and "(2, 3)" in r[name], r[name]
        assert r["send"].startswith("send:") and r["recv"].startswith("recv:")
        assert r["empty"] == ("batch_isend_irecv: p2p_op_list is empty; pass at least one "
                              "dist.P2POp")
        assert r["all_reduce"] == [[0.0, 6.0], [2.0, 8.0], [4.0, 10.0]]


def test_point_to_point_errors_match_torch():
    torch = pytest.importorskip("torch")
    import inspect

    src = inspect.getsource(torch.distributed.distributed_c10d.batch_isend_irecv)
    assert "_check_p2p_op_list" in src  # reads p2p_op_list[0] first: IndexError when empty
    check = inspect.getsource(torch.distributed.distributed_c10d._check_p2p_op_list)
    assert "p2p_op_list[0]" in check


# ---- DDP._set_params_and_buffers_to_ignore_for_model ------------------------------------------


def _ignore_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember
        import ember.nn as nn
        from ember.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
        model = nn.Sequential(nn.Linear(2, 1, bias=False), nn.Linear(1, 1, bias=False))
        model.register_buffer("running", ember.zeros(1))
        with ember.no_grad():
            model[0].weight.copy_(ember.tensor([[1.0, 2.0]]) * (rank + 1))
            model[1].weight.fill_(10.0 * (rank + 1))  # ignored: stays each rank's own
            model.running.fill_(float(rank))  # ignored buffer
        DDP._set_params_and_buffers_to_ignore_for_model(model, ["1.weight", "running"])
        out: dict[str, Any] = {
            "attr": model._ddp_params_and_buffers_to_ignore,
            "flags": [getattr(model[1].weight, "_ddp_ignored", False),
                      getattr(model[0].weight, "_ddp_ignored", False),
                      getattr(model.running, "_ddp_ignored", False)]}
        ddp = DDP(model)
        out["ignored"] = sorted(ddp.parameters_to_ignore)
        out["w0"] = model[0].weight.tolist()
        out["w1"] = model[1].weight.item()
        out["rm"] = model.running.item()
        x = ember.tensor([[1.0, 1.0], [2.0, 0.0]]) * (rank + 1)
        ddp(x).sum().backward()
        out["g0"] = model[0].weight.grad.tolist()
        out["g1"] = model[1].weight.grad.item()
        # a rank with a different shape for an ignored parameter is still a model DDP takes
        m2 = nn.Linear(2, 2 + rank)
        DDP._set_params_and_buffers_to_ignore_for_model(m2, ["weight", "bias"])
        try:
            DDP(m2)
            out["all_ignored"] = "no error"
        except RuntimeError as e:
            out["all_ignored"] = str(e)
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


def test_ddp_ignores_the_named_params_and_buffers(tmp_path):
    res = _run(_ignore_worker, 2, tmp_path)
    for rank, r in enumerate(res):
        assert r["attr"] == ["1.weight", "running"]
        assert r["flags"] == [True, False, True]
        assert r["ignored"] == ["1.weight", "running"]
        assert r["w0"] == [[1.0, 2.0]]  # broadcast from rank 0
        assert r["w1"] == 10.0 * (rank + 1)  # not broadcast
        assert r["rm"] == float(rank)
        assert "doesn't have any parameter that requires a gradient" in r["all_ignored"]
    # z = w1 (w0 . x), loss sum(z): dL/dw0 = w1 * (sum of x's rows), averaged over the ranks:
    # (10 [3, 1] + 20 [6, 2]) / 2; dL/dw1 = sum(w0 . x) with w0 = [1, 2] (rank 0's), each rank
    # its own: 3 + 2 on rank 0, twice that on rank 1
    assert res[0]["g0"] == res[1]["g0"] == [[75.0, 25.0]]
    assert [r["g1"] for r in res] == [5.0, 10.0]


def test_set_params_and_buffers_to_ignore_matches_torch():
    torch = pytest.importorskip("torch")
    m = torch.nn.Linear(2, 2)
    torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
        m, ["weight"])
    assert m._ddp_params_and_buffers_to_ignore == ["weight"]
    assert getattr(m.weight, "_ddp_ignored", False) and not hasattr(m.bias, "_ddp_ignored")
    import ember.nn as enn
    from ember.nn.parallel import DistributedDataParallel as DDP

    e = enn.Linear(2, 2)
    DDP._set_params_and_buffers_to_ignore_for_model(e, ["weight"])
    assert e._ddp_params_and_buffers_to_ignore == ["weight"]
    assert getattr(e.weight, "_ddp_ignored", False) and not hasattr(e.bias, "_ddp_ignored")


# ---- torch._utils._flatten_dense_tensors / _unflatten_dense_tensors -----------------------------


def test_flatten_unflatten_dense_tensors():
    import ember
    from ember._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    a = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = ember.tensor([7.0, 8.0])
    flat = _flatten_dense_tensors([a.t(), b])  # a strided one is taken in its logical order
    assert flat.tolist() == [1.0, 4.0, 2.0, 5.0, 3.0, 6.0, 7.0, 8.0]
    pieces = _unflatten_dense_tensors(flat, [a.t(), b])
    assert isinstance(pieces, tuple)
    assert [list(p.shape) for p in pieces] == [[3, 2], [2]]
    assert pieces[0].tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    pieces[1].fill_(0.5)  # views of flat
    assert flat.tolist()[-2:] == [0.5, 0.5]
    one = _flatten_dense_tensors([a])  # one tensor: a flat view of it
    one[0] = 9.0
    assert a[0, 0].item() == 9.0
    with pytest.raises(ValueError, match="non-empty list"):
        _flatten_dense_tensors([])
    with pytest.raises(RuntimeError, match=r"more than the 3 elements of flat \(tensor 0 of "
                                           r"shape \(4,\)"):
        _unflatten_dense_tensors(ember.arange(3.0), [ember.ones(4)])


def test_flatten_dense_tensors_gradient_float64():
    import ember
    from ember._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    a = ember.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=ember.float64, requires_grad=True)
    b = ember.tensor([3.0, -2.0, 1.5], dtype=ember.float64, requires_grad=True)
    w = ember.arange(7, dtype=ember.float64)

    def f(x, y):
        flat = _flatten_dense_tensors([x, y])
        p, q = _unflatten_dense_tensors(flat * w, [x, y])
        return (p.pow(2).sum() + q.sin().sum())

    f(a, b).backward()
    eps = 1e-6
    for t, grad in ((a, a.grad), (b, b.grad)):
        base = t.detach().clone()
        num = []
        for i in range(base.numel()):
            hi, lo = base.clone().view(-1), base.clone().view(-1)
            hi[i] += eps
            lo[i] -= eps
            args = [hi.view(base.shape), b.detach()] if t is a else [a.detach(),
                                                                     hi.view(base.shape)]
            f_hi = f(*args).item()
            args = [lo.view(base.shape), b.detach()] if t is a else [a.detach(),
                                                                     lo.view(base.shape)]
            num.append((f_hi - f(*args).item()) / (2 * eps))
        assert grad.view(-1).tolist() == pytest.approx(num, rel=1e-6, abs=1e-8)
    # d/da of sum((a_i w_i)^2) = 2 a_i w_i^2 with w = 0..3
    assert a.grad.view(-1).tolist() == pytest.approx([0.0, -2.0, 16.0, 4.5])


def test_flatten_dense_tensors_matches_torch():
    torch = pytest.importorskip("torch")
    import ember
    from ember._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    ts = [torch.arange(6.0).reshape(2, 3).t(), torch.tensor([7.0])]
    es = [ember.arange(6.0).reshape(2, 3).t(), ember.tensor([7.0])]
    tf, ef = torch._utils._flatten_dense_tensors(ts), _flatten_dense_tensors(es)
    assert ef.tolist() == tf.tolist()
    assert [p.tolist() for p in _unflatten_dense_tensors(ef, es)] == [
        p.tolist() for p in torch._utils._unflatten_dense_tensors(tf, ts)]


# ---- init_process_group: torch's exception classes, the backend of a group made without one ---


@pytest.mark.parametrize("kwargs, caught_as, msg", [
    (dict(backend="gloo", init_method="tcp://127.0.0.1:1", rank=0, world_size=1),
     AssertionError, "pass init_method or store, not both"),
    (dict(backend="gloo", rank=0), AssertionError, "rank and world_size are required"),
    (dict(backend="gloo", rank=-2, world_size=2), AssertionError, "rank must be >= 0"),
    (dict(backend="no_such_backend", rank=0, world_size=1), AssertionError,
     "unknown backend 'no_such_backend'"),
    (dict(backend="gloo", rank=5, world_size=2), RuntimeError, "rank 5 is outside world_size 2"),
])
def test_init_process_group_errors_have_torchs_classes(kwargs, caught_as, msg):
    for cls in (caught_as, ValueError):  # torch's class, and ember's (ValueError) as before
        with pytest.raises(cls, match=msg):
            dist.init_process_group(store=dist.HashStore(), **kwargs)
        assert not dist.is_initialized()


@pytest.mark.filterwarnings("ignore:Device capability")
def test_init_process_group_error_classes_match_torch():
    torch = pytest.importorskip("torch")
    tdist = torch.distributed
    for kwargs, cls in ((dict(init_method="tcp://127.0.0.1:1", rank=0, world_size=1),
                         AssertionError), (dict(rank=0), AssertionError),
                        (dict(backend="no_such_backend", rank=0, world_size=1), AssertionError),
                        (dict(backend="gloo", rank=5, world_size=2), RuntimeError)):
        with pytest.raises(cls):
            tdist.init_process_group(store=tdist.HashStore(), **kwargs)
        assert not tdist.is_initialized()


def test_get_backend_without_a_backend_named_is_undefined():
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "undefined"
        assert dist.get_backend_config() in ("cpu:gloo", "cpu:gloo,cuda:nccl")
        sub = dist.new_group([0])
        assert dist.get_backend(sub) == "undefined"
        t = dist.new_group([0], backend="gloo")
        assert dist.get_backend(t) == "gloo"
    finally:
        dist.destroy_process_group()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "gloo"
    finally:
        dist.destroy_process_group()


def test_get_backend_without_a_backend_named_matches_torch():
    torch = pytest.importorskip("torch")
    tdist = torch.distributed
    tdist.init_process_group(store=tdist.HashStore(), rank=0, world_size=1)
    try:
        assert tdist.get_backend() == "undefined"
        assert tdist.get_backend_config() in ("cpu:gloo", "cpu:gloo,cuda:nccl")
    finally:
        tdist.destroy_process_group()


# ---- Join: DDP beside a Joinable of one's own that names the default group ---------------------


def _join_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember
        import ember.nn as nn
        from ember.distributed.algorithms.join import Join, Joinable, JoinHook
        from ember.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))

        class Hook(JoinHook):
            def __init__(self, c: Any) -> None:
                self.c = c

            def main_hook(self) -> None:
                dist.all_reduce(ember.zeros(1))
                self.c.shadowed += 1

        class Counter(Joinable):
            def __init__(self) -> None:
                super().__init__()
                self.count, self.shadowed = 0.0, 0

            def __call__(self) -> None:
                Join.notify_join_context(self)
                t = ember.ones(1)
                dist.all_reduce(t)
                self.count += t.item()

            def join_hook(self, **kwargs: Any) -> JoinHook:
                return Hook(self)

            @property
            def join_device(self) -> Any:
                return ember.device("cpu")

            @property
            def join_process_group(self) -> Any:
                return dist.group.WORLD

        net = nn.Linear(1, 1, bias=False)
        with ember.no_grad():
            net.weight.fill_(1.0)
        model = DDP(net)
        out: dict[str, Any] = {"pg_is_world": model.process_group is dist.group.WORLD}
        counter = Counter()
        with Join([model, counter]):
            for i in range(3 if rank == 0 else 1):
                model(ember.tensor([[float(rank + 1)]])).sum().backward()
                out.setdefault("grads", []).append(net.weight.grad.item())
                net.zero_grad()
                counter()
        out["count"], out["shadowed"] = counter.count, counter.shadowed
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


def test_join_takes_ddp_with_a_joinable_naming_the_default_group(tmp_path):
    res = _run(_join_worker, 2, tmp_path)
    assert res[0]["pg_is_world"] and res[1]["pg_is_world"]
    # step 1: both ranks, grad (1 + 2) / 2; steps 2, 3: rank 1 has joined (zeros), 1 / 2
    assert res[0]["grads"] == [1.5, 0.5, 0.5] and res[1]["grads"] == [1.5]
    assert res[0]["count"] == 2.0 + 1.0 + 1.0 and res[0]["shadowed"] == 0
    assert res[1]["count"] == 2.0 and res[1]["shadowed"] == 2


# ---- 16-bit float reductions rounded once; collective futures are ember.futures.Futures -------


def _half_and_futures_worker(rank: int, init: str, conn: Any) -> None:
    try:
        import ember
        import ember.futures as futures

        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=3,
                                timeout=timedelta(seconds=60))
        out: dict[str, Any] = {}
        vals = [0.1, 0.2, 0.3]
        for dtype in (ember.float16, ember.bfloat16):
            name = str(dtype).replace("ember.", "")
            for op in ("SUM", "AVG", "PRODUCT"):
                t = ember.tensor([vals[rank], 1000.0 + rank], dtype=dtype)
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                out[f"{name}_{op}"] = t.float().tolist()
                out[f"{name}_{op}_dtype"] = str(t.dtype)
        fut = dist.all_reduce(ember.ones(1) * (rank + 1), async_op=True).get_future()
        out["is_future"] = isinstance(fut, futures.Future)
        plain = futures.Future()
        plain.set_result("x")
        both = futures.collect_all([fut, plain]).wait()
        out["collect_all"] = [both[0].value()[0].item(), both[1].value()]
        out["wait_all"] = [v[0].item() for v in futures.wait_all(
            [dist.all_reduce(ember.ones(1), async_op=True).get_future() for _ in range(2)])]

        def boom(f: Any) -> None:
            raise ValueError("callback failed")

        chained = dist.all_reduce(ember.ones(1), async_op=True).get_future().then(boom)
        try:
            chained.wait()
        except RuntimeError as e:
            out["then_error"] = str(e)
        f = dist.all_reduce(ember.ones(1), async_op=True).get_future()
        f.add_done_callback(boom)  # reported on stderr, dropped
        out["after_bad_callback"] = f.wait()[0].item()
        dist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001
        import traceback

        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def half_results(tmp_path_factory: Any) -> list[dict]:
    from dist_helpers import run_ranks

    init = "file://" + str(tmp_path_factory.mktemp("s24h") / "store")
    return run_ranks(_half_and_futures_worker, 3, (init,), 180)


def test_16bit_float_reductions_are_rounded_once(half_results):
    # the exact values of fp16(0.1) + fp16(0.2) + fp16(0.3) = 0.5999755859375 and of
    # bf16(0.1) * bf16(0.2) * bf16(0.3) = 0.00602738..., each rounded once: adding in rank
    # order and rounding after each step gives 0.599609375 and 0.006011962890625 instead
    for r in half_results:
        assert r["float16_SUM"] == [0.60009765625, 3004.0]
        assert r["float16_AVG"] == [0.199951171875, 1001.0]  # 0.59997559 / 3 rounded once
        assert r["float16_PRODUCT"][0] == 0.0059967041015625
        assert r["bfloat16_PRODUCT"][0] == 0.00604248046875
        assert r["bfloat16_SUM"] == [0.6015625, 3008.0]  # bf16(1001) = bf16(1002) = 1000
        assert r["float16_SUM_dtype"] == "ember.float16"
        assert r["bfloat16_AVG_dtype"] == "ember.bfloat16"


def test_16bit_float_reductions_match_torch_rounding(half_results):
    torch = pytest.importorskip("torch")
    for tdt, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
        x = torch.tensor([0.1, 0.2, 0.3], dtype=tdt).double()
        assert half_results[0][f"{name}_SUM"][0] == x.sum().to(tdt).item()
        assert half_results[0][f"{name}_PRODUCT"][0] == x.prod().to(tdt).item()
        assert half_results[0][f"{name}_AVG"][0] == (x.sum() / 3).to(tdt).item()


def test_collective_futures_are_ember_futures(half_results):
    for rank, r in enumerate(half_results):
        assert r["is_future"]
        assert r["collect_all"] == [6.0, "x"]
        assert r["wait_all"] == [3.0, 3.0]
        assert r["then_error"] == ("Got the following error when running the callback: "
                                   "ValueError: callback failed")
        assert r["after_bad_callback"] == 3.0
