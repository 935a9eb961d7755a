"""fully_shard issues one all-gather and one reduce-scatter per fully_shard call (torch's
FSDPParamGroup), not one per parameter: 2 spawned ranks on the shm backend record every
collective's kind, size and dtype (the padded, packed buffers), CommDebugMode's counts, and the
values of training against an unsharded model on the whole batch; uneven shapes, mixed
precision, a frozen parameter of another dtype, HSDP, unused parameters, dim-1 sharding and CPU
offload. The same counts from torch (gloo) when it is installed. Program-level comparison with
torch: compat_programs/fsdp2_comm_counts.py."""

from __future__ import annotations

import traceback
from datetime import timedelta

import numpy as np
import pytest
from dist_helpers import run_ranks

TIMEOUT = 240.0
LR = 0.1


def _data(rank: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(100 * step + rank)
    return g.standard_normal((4, 5)).astype(np.float32), g.standard_normal((4, 1)).astype(
        np.float32)


def _init(net, seed: int) -> None:
    g = np.random.default_rng(seed)
    for p in net.parameters():
        p.data.copy_(_from(p, 0.4 * g.standard_normal(p.shape)))


def _from(p, a: np.ndarray):
    import ember

    return ember.from_numpy(a.astype(np.float32)).to(p.dtype)


def _net(nn_mod, F, spare: bool = False):
    class Block(nn_mod.Module):
        def __init__(self, n_in: int, n_out: int) -> None:
            super().__init__()
            self.lin = nn_mod.Linear(n_in, n_out)
            self.spare = nn_mod.Linear(n_in, n_out) if spare else None  # never used

        def forward(self, x):
            return F.tanh(self.lin(x))

    class Net(nn_mod.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn_mod.ModuleList([Block(5, 7), Block(7, 3)])
            self.head = nn_mod.Linear(3, 1)  # one row: rank 1's piece of it is empty

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    return Net()


class _Recorder:
    """Wraps ember.distributed's collectives that fully_shard calls: (name, numel, dtype)."""

    NAMES = ("all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce")

    def __init__(self) -> None:
        import ember.distributed as dist

        self.calls: list[tuple[str, int, str]] = []
        self.orig = {n: getattr(dist, n) for n in self.NAMES}
        for n in self.NAMES:
            setattr(dist, n, self._wrap(n))

    def _wrap(self, name: str):
        fn = self.orig[name]

        def call(*args, **kwargs):
            t = args[1] if name != "all_reduce" else args[0]  # the input
            self.calls.append((name, int(t.numel()), str(t.dtype).replace("ember.", "")))
            return fn(*args, **kwargs)

        return call

    def take(self) -> list[tuple[str, int, str]]:
        out, self.calls = self.calls, []
        return out

    def close(self) -> None:
        import ember.distributed as dist

        for n, f in self.orig.items():
            setattr(dist, n, f)


def _counts(cm) -> dict[str, int]:
    return {str(k): v for k, v in cm.get_comm_counts().items()}


def _ember_scenarios(rank: int) -> dict:
    import ember
    import ember.distributed as dist
    from ember import nn
    from ember.distributed.device_mesh import init_device_mesh
    from ember.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    from ember.distributed.tensor import Shard
    from ember.distributed.tensor.debug import CommDebugMode

    def make(seed: int = 1, spare: bool = False):
        ember.manual_seed(0)
        net = _net(nn, ember, spare)
        with ember.no_grad():
            _init(net, seed)
        return net

    def shard(net, **kw):
        for b in net.blocks:
            fully_shard(b, **kw)
        return fully_shard(net, **kw)

    def full(net) -> dict[str, np.ndarray]:
        return {n: p.full_tensor().detach().numpy().copy() for n, p in net.named_parameters()}

    def grads(net) -> dict[str, np.ndarray | None]:
        return {n: None if p.grad is None else p.grad.full_tensor().numpy().copy()
                for n, p in net.named_parameters()}

    def train(net, steps: int = 2, sharded: bool = True, plain_dtype=None):
        opt = ember.optim.SGD(net.parameters(), lr=LR)
        for step in range(steps):
            if sharded:
                x, y = (ember.from_numpy(a) for a in _data(rank, step))
            else:  # the whole batch: both ranks' parts
                parts = [_data(r, step) for r in range(2)]
                x = ember.from_numpy(np.concatenate([p[0] for p in parts]))
                y = ember.from_numpy(np.concatenate([p[1] for p in parts]))
            if plain_dtype is not None:
                x, y = x.to(plain_dtype), y.to(plain_dtype)
            ((net(x) - y) ** 2).mean().backward()
            if step < steps - 1:
                opt.step()
                opt.zero_grad()
        return net

    res: dict = {}
    rec = _Recorder()
    try:
        # counts and the packed buffers' sizes
        net = shard(make())
        x, y = (ember.from_numpy(a) for a in _data(rank, 0))
        with CommDebugMode() as cm:
            loss = ((net(x) - y) ** 2).mean()
        res["fwd_counts"], res["fwd_calls"] = _counts(cm), rec.take()
        with CommDebugMode() as cm:
            loss.backward()
        res["bwd_counts"], res["bwd_calls"] = _counts(cm), rec.take()
        res["one_step_grads"] = grads(net)
        plain = make()
        train(plain, steps=1, sharded=False)
        res["plain_one_step_grads"] = {n: p.grad.numpy().copy()
                                       for n, p in plain.named_parameters()}
        res["local_shapes"] = {n: list(p.to_local().shape) for n, p in net.named_parameters()}

        # training: the same parameters as the unsharded model on the whole batch
        res["trained"] = full(train(shard(make())))
        res["trained_grads"] = grads(train(shard(make())))
        plain = train(make(), sharded=False)
        res["plain_trained"] = {n: p.detach().numpy().copy() for n, p in plain.named_parameters()}
        res["plain_trained_grads"] = {n: p.grad.numpy().copy()
                                      for n, p in plain.named_parameters()}
        rec.take()

        # mixed precision: gathered in float64, reduced in float64, kept in float32
        mp_net = shard(make(), mp_policy=MixedPrecisionPolicy(param_dtype=ember.float64,
                                                              reduce_dtype=ember.float64))
        rec.take()
        train(mp_net, steps=1)
        res["mp_calls"] = rec.take()
        res["mp_grads"] = grads(mp_net)
        res["mp_grad_dtypes"] = sorted({str(p.grad.dtype) for p in mp_net.parameters()})
        plain64 = make().double()
        train(plain64, steps=1, sharded=False, plain_dtype=ember.float64)
        res["plain64_grads"] = {n: p.grad.numpy().copy() for n, p in plain64.named_parameters()}
        low = shard(make(), mp_policy=MixedPrecisionPolicy(reduce_dtype=ember.float16))
        rec.take()
        train(low, steps=1)
        res["fp16_reduce_calls"] = rec.take()

        # a frozen float64 parameter beside float32 ones: one all-gather, of bytes
        frozen = make()
        frozen.head.scale = nn.Parameter(0.5 * ember.arange(3, dtype=ember.float64),
                                         requires_grad=False)
        shard(frozen)
        rec.take()
        frozen.unshard()
        res["frozen_calls"] = rec.take()
        res["frozen_values"] = (frozen.head.scale.detach().numpy().copy(),
                                frozen.head.weight.detach().numpy().copy(),
                                make().head.weight.detach().numpy().copy())
        frozen.reshard()

        # trainable parameters of two dtypes in one fully_shard call: refused at first use
        two = make()
        two.blocks[0].lin.bias = nn.Parameter(two.blocks[0].lin.bias.detach().double())
        shard(two)
        try:
            two(ember.from_numpy(_data(rank, 0)[0]))
            res["two_dtypes"] = "no error"
        except AssertionError as e:
            res["two_dtypes"] = str(e)
        rec.take()

        # HSDP: sharded over 2 ranks (replicas: 1), and replicated over 2 (shards: 1)
        for name, shape in (("hsdp_1x2", (1, 2)), ("hsdp_2x1", (2, 1))):
            mesh = init_device_mesh("cpu", shape)
            h = train(shard(make(), mesh=mesh), steps=2)
            res[name] = full(h)
            res[name + "_calls"] = [c[0] for c in rec.take()]

        # unused parameters: not waited for, no gradient, resharded
        un = shard(make(2, spare=True))
        rec.take()
        x, y = (ember.from_numpy(a) for a in _data(rank, 0))
        with CommDebugMode() as cm:
            ((un(x) - y) ** 2).mean().backward()
        res["unused_counts"] = _counts(cm)
        res["unused_grad_none"] = {n: p.grad is None for n, p in un.named_parameters()}
        res["unused_all_sharded"] = all(hasattr(p, "full_tensor") for p in un.parameters())
        rec.take()

        # dim-1 sharding (7 columns over 2 ranks) and CPU offload: the same values
        dim1 = shard(make(), shard_placement_fn=lambda p: Shard(1) if p.ndim == 2 else None)
        res["dim1"] = full(train(dim1))
        res["dim1_calls"] = rec.take()
        off = train(shard(make(), offload_policy=CPUOffloadPolicy(pin_memory=False)))
        res["offload"] = full(off)
        res["offload_grad_devices"] = sorted({p.grad.to_local().device.type
                                              for p in off.parameters()})
        rec.take()
    finally:
        rec.close()
    dist.barrier()
    return res


def _torch_counts(rank: int) -> dict:
    import torch
    import torch.nn.functional as tF
    from torch import nn
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.debug import CommDebugMode

    def shard(net):
        for b in net.blocks:
            fully_shard(b)
        return fully_shard(net)

    def counts(cm):
        return {str(k): v for k, v in cm.get_comm_counts().items()}

    out = {}
    torch.manual_seed(0)
    net = shard(_net(nn, torch))
    x = torch.from_numpy(_data(rank, 0)[0])
    with CommDebugMode() as cm:
        loss = net(x).square().mean()
    out["fwd_counts"] = counts(cm)
    with CommDebugMode() as cm:
        loss.backward()
    out["bwd_counts"] = counts(cm)
    un = shard(_net(nn, torch, spare=True))
    with CommDebugMode() as cm:
        tF.mse_loss(un(x), torch.zeros(4, 1)).backward()
    out["unused_counts"] = counts(cm)
    return out


def _worker(rank: int, init: str, torch_init: str | None, conn) -> None:
    try:
        import ember.distributed as dist

        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=120))
        out = {"ember": _ember_scenarios(rank)}
        dist.destroy_process_group()
        if torch_init is not None:
            import torch
            import torch.distributed as tdist

            torch.set_num_threads(1)
            tdist.init_process_group("gloo", init_method=torch_init, rank=rank, world_size=2,
                                     timeout=timedelta(seconds=120))
            out["torch"] = _torch_counts(rank)
            tdist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001  (reported by the test)
        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("fsdp_grouped")
    try:
        import torch  # noqa: F401

        torch_init = f"file://{tmp / 'torch_store'}"
    except ImportError:
        torch_init = None
    return run_ranks(_worker, 2, (f"file://{tmp / 'store'}", torch_init), TIMEOUT)


AG, RS = "c10d._allgather_base_", "c10d._reduce_scatter_base_"


def test_one_all_gather_and_one_reduce_scatter_per_fully_shard_call(results):
    for r in results:
        e = r["ember"]
        # forward: the root (head), then each block; backward: the two blocks again (they
        # were resharded after forward; the root was not), three reduce-scatters
        assert e["fwd_counts"] == {AG: 3}
        assert e["bwd_counts"] == {AG: 2, RS: 3}


def test_packed_buffers_are_padded_to_a_multiple_of_the_world_size(results):
    e = results[0]["ember"]
    # per rank: head 1x3 -> 1 row (3) + bias 1 -> 1: 4; block 0: 7x5 -> 4 rows (20) + 7 -> 4: 24;
    # block 1: 3x7 -> 2 rows (14) + 3 -> 2: 16
    assert e["fwd_calls"] == [("all_gather_into_tensor", 4, "float32"),
                              ("all_gather_into_tensor", 24, "float32"),
                              ("all_gather_into_tensor", 16, "float32")]
    # backward: block 1 gathered, head reduced (2 ranks x 4), block 1 (2 x 16), block 0
    # gathered (while block 1's backward runs) and reduced (2 x 24)
    assert sorted(e["bwd_calls"]) == sorted([
        ("all_gather_into_tensor", 16, "float32"), ("all_gather_into_tensor", 24, "float32"),
        ("reduce_scatter_tensor", 8, "float32"), ("reduce_scatter_tensor", 32, "float32"),
        ("reduce_scatter_tensor", 48, "float32")])
    assert results[0]["ember"]["local_shapes"] == {
        "blocks.0.lin.weight": [4, 5], "blocks.0.lin.bias": [4], "blocks.1.lin.weight": [2, 7],
        "blocks.1.lin.bias": [2], "head.weight": [1, 3], "head.bias": [1]}
    assert results[1]["ember"]["local_shapes"] == {
        "blocks.0.lin.weight": [3, 5], "blocks.0.lin.bias": [3], "blocks.1.lin.weight": [1, 7],
        "blocks.1.lin.bias": [1], "head.weight": [0, 3], "head.bias": [0]}


def _close(a: dict, b: dict, tol: float = 2e-6) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=tol, atol=tol, err_msg=k)


def test_gradients_and_training_equal_the_unsharded_model(results):
    for r in results:
        e = r["ember"]
        _close(e["one_step_grads"], e["plain_one_step_grads"])
        _close(e["trained"], e["plain_trained"])
        _close(e["trained_grads"], e["plain_trained_grads"])
    np.testing.assert_array_equal(results[0]["ember"]["trained"]["head.weight"],
                                  results[1]["ember"]["trained"]["head.weight"])


def test_mixed_precision_gathers_and_reduces_in_the_policy_dtypes(results):
    e = results[0]["ember"]
    assert sorted(e["mp_calls"]) == sorted([
        ("all_gather_into_tensor", 4, "float64"), ("all_gather_into_tensor", 24, "float64"),
        ("all_gather_into_tensor", 16, "float64"), ("all_gather_into_tensor", 16, "float64"),
        ("all_gather_into_tensor", 24, "float64"), ("reduce_scatter_tensor", 8, "float64"),
        ("reduce_scatter_tensor", 32, "float64"), ("reduce_scatter_tensor", 48, "float64")])
    assert e["mp_grad_dtypes"] == ["ember.float32"]
    _close(e["mp_grads"], e["plain64_grads"], 1e-6)
    assert [c for c in e["fp16_reduce_calls"] if c[0] == "reduce_scatter_tensor"] == [
        ("reduce_scatter_tensor", 8, "float16"), ("reduce_scatter_tensor", 32, "float16"),
        ("reduce_scatter_tensor", 48, "float16")]


def test_a_frozen_parameter_of_another_dtype_is_gathered_as_bytes(results):
    for r in results:
        e = r["ember"]
        # head: the float32 1x3 weight (1 row: 12 bytes) and bias (4 bytes), the float64
        # scale of 3 (2 rows per rank: 16 bytes)
        assert e["frozen_calls"] == [("all_gather_into_tensor", 32, "uint8")]
        scale, weight, ref = e["frozen_values"]
        assert scale.dtype == np.float64 and scale.tolist() == [0.0, 0.5, 1.0]
        np.testing.assert_array_equal(weight, ref)
        assert e["two_dtypes"] == ("FSDP expects uniform original parameter dtype but got "
                                   "{ember.float32, ember.float64}")


def test_hsdp_values_and_collectives(results):
    for r in results:
        e = r["ember"]
        _close(e["hsdp_1x2"], e["plain_trained"])
        _close(e["hsdp_2x1"], e["plain_trained"])
        # 2 steps x (3 + 2 all-gathers, 3 reduce-scatters, each followed by a 1-rank all-reduce)
        assert e["hsdp_1x2_calls"].count("all_gather_into_tensor") == 10
        assert e["hsdp_1x2_calls"].count("reduce_scatter_tensor") == 6
        assert e["hsdp_1x2_calls"].count("all_reduce") == 6
        # shards of one rank: nothing to gather or scatter, one all-reduce per group
        assert e["hsdp_2x1_calls"] == ["all_reduce"] * 6


def test_unused_parameters_are_not_waited_for(results):
    for r in results:
        e = r["ember"]
        assert e["unused_counts"] == {AG: 5, RS: 3}
        assert e["unused_all_sharded"]
        assert [n for n, none in e["unused_grad_none"].items() if none] == [
            "blocks.0.spare.weight", "blocks.0.spare.bias", "blocks.1.spare.weight",
            "blocks.1.spare.bias"]


def test_dim1_sharding_and_cpu_offload_keep_the_values(results):
    for r in results:
        e = r["ember"]
        _close(e["dim1"], e["plain_trained"])
        _close(e["offload"], e["plain_trained"])
        assert e["offload_grad_devices"] == ["cpu"]
    # block 0's 7x5 weight split along its 5 columns: 3 per rank (padded), x 7 rows = 21
    assert ("all_gather_into_tensor", 21 + 4, "float32") in results[0]["ember"]["dim1_calls"]


def test_counts_equal_torchs(results):
    if "torch" not in results[0]:
        pytest.skip("torch is not installed")
    for r in results:
        assert r["ember"]["fwd_counts"] == r["torch"]["fwd_counts"]
        assert r["ember"]["bwd_counts"] == r["torch"]["bwd_counts"]
        assert r["ember"]["unused_counts"] == r["torch"]["unused_counts"]
