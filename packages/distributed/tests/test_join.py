"""DistributedDataParallel.join() / ember.distributed.algorithms.join.Join: training with a
different number of batches on each rank, over the shm backend with 2 spawned ranks.

Each scenario's final parameters are compared with a hand computation of the semantics (the
ranks still training all-reduce their gradients, a joined rank contributes zeros, the sum is
divided by the initial world size or by the ranks still training; at the end the model of the
last rank to join is broadcast) and, when torch is installed, with torch's DDP + gloo running the
same uneven schedule in the same processes."""

from __future__ import annotations

import contextlib
import os
import traceback
from datetime import timedelta

import ember
import ember.distributed as dist
import numpy as np
import pytest
from dist_helpers import run_ranks
from ember import nn
from ember.distributed.algorithms.join import Join, Joinable, JoinHook
from ember.nn.parallel import DistributedDataParallel as DDP

TIMEOUT = 240.0  # the whole run, both ranks (a hang fails the test instead of blocking CI)
LR = 0.1

# name -> (batches of rank 0, batches of rank 1, DDP kwargs, join kwargs, model kind, options:
# "hook": the fp16 compression comm hook; "accumulate": k, backward k-1 times in no_sync;
# "group": DDP over a process group of its own rather than the default one)
SCENARIOS = {
    "default": (2, 5, {"bucket_cap_mb": 0.0002}, {}, "bn", {}),
    "divide_by_remaining": (2, 4, {}, {"divide_by_initial_world_size": False}, "bn", {}),
    "rank1_short_find_unused": (4, 1, {"find_unused_parameters": True}, {}, "unused", {}),
    "no_broadcast_buffers": (3, 1, {"broadcast_buffers": False}, {}, "bn", {}),
    "rank0_without_batches": (0, 3, {}, {}, "mlp", {}),
    "fp16_hook_bucket_view": (1, 3, {"bucket_cap_mb": 0.0002, "gradient_as_bucket_view": True},
                              {}, "mlp", {"hook": True}),
    "no_sync_accumulation": (4, 6, {}, {}, "bn", {"accumulate": 2}),
    "own_process_group": (3, 1, {}, {}, "bn", {"group": True}),
}


def _batch(rank: int, step: int, n: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1000 * rank + step)
    return rng.standard_normal((n, 6)).astype(np.float32), rng.integers(0, 3, n).astype(np.int64)


def _ember_model(kind: str) -> nn.Module:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(6, 8)
            self.bn = nn.BatchNorm1d(8) if kind == "bn" else None
            self.fc2 = nn.Linear(8, 3)
            self.extra = nn.Linear(8, 3) if kind == "unused" else None

        def forward(self, x: ember.Tensor) -> ember.Tensor:
            h = self.fc1(x)
            if self.bn is not None:
                h = self.bn(h)
            return self.fc2(ember.relu(h))

    return Net()


def _torch_model(kind: str, state: dict[str, np.ndarray]):
    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(6, 8)
            self.bn = torch.nn.BatchNorm1d(8) if kind == "bn" else None
            self.fc2 = torch.nn.Linear(8, 3)
            self.extra = torch.nn.Linear(8, 3) if kind == "unused" else None

        def forward(self, x):
            h = self.fc1(x)
            if self.bn is not None:
                h = self.bn(h)
            return self.fc2(torch.relu(h))

    m = Net()
    m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    return m


def _state(m: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}


def _synced(step: int, options: dict) -> bool:
    # Every rank must agree on which iterations synchronize: k divides the batch counts.
    k = options.get("accumulate", 1)
    return step % k == k - 1


def _train_ember(rank: int, name: str) -> dict[str, np.ndarray]:
    from ember.distributed.algorithms.ddp_comm_hooks import default_hooks

    n0, n1, ddp_kw, join_kw, kind, options = SCENARIOS[name]
    ember.manual_seed(7 + rank)  # different initial weights: DDP broadcasts rank 0's
    model = _ember_model(kind)
    if options.get("group"):
        ddp_kw = {**ddp_kw, "process_group": dist.new_group([1, 0])}
    ddp = DDP(model, **ddp_kw)
    if options.get("hook"):
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = ember.optim.SGD(ddp.parameters(), lr=LR)
    n = n0 if rank == 0 else n1
    with ddp.join(**join_kw):
        for step in range(n):
            x, y = _batch(rank, step)
            synced = _synced(step, options)
            with contextlib.nullcontext() if synced else ddp.no_sync():
                ember.cross_entropy(ddp(ember.from_numpy(x)), ember.from_numpy(y)).backward()
            if synced:
                opt.step()
                opt.zero_grad()
    return _state(model)


def _train_torch(rank: int, name: str, start: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import torch
    import torch.distributed as tdist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    n0, n1, ddp_kw, join_kw, kind, options = SCENARIOS[name]
    model = _torch_model(kind, start)
    if options.get("group"):
        ddp_kw = {**ddp_kw, "process_group": tdist.new_group([1, 0])}
    ddp = torch.nn.parallel.DistributedDataParallel(model, **ddp_kw)
    if options.get("hook"):
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    n = n0 if rank == 0 else n1
    with ddp.join(**join_kw):
        for step in range(n):
            x, y = _batch(rank, step)
            synced = _synced(step, options)
            with contextlib.nullcontext() if synced else ddp.no_sync():
                out = ddp(torch.from_numpy(x))
                torch.nn.functional.cross_entropy(out, torch.from_numpy(y)).backward()
            if synced:
                opt.step()
                opt.zero_grad()
    tdist.barrier()
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _throw_on_early_termination(rank: int) -> str:
    ember.manual_seed(0)
    ddp = DDP(_ember_model("mlp"))
    try:
        with ddp.join(throw_on_early_termination=True):
            for step in range(1 if rank == 0 else 4):
                x, _ = _batch(rank, step)
                ddp(ember.from_numpy(x)).sum().backward()
    except RuntimeError as e:
        return str(e)
    return "no error"


class _CountingJoinable:
    """A Joinable by duck typing (no inheritance): counts what Join calls."""

    def __init__(self) -> None:
        self._join_config = None
        self.calls: list = []

    def join_hook(self, **kwargs):
        me = self

        class Hook(JoinHook):
            def main_hook(self) -> None:
                me.calls.append("main")

            def post_hook(self, is_last_joiner: bool) -> None:
                me.calls.append(("post", is_last_joiner))

        me.calls.append(("kwargs", kwargs))
        return Hook()

    @property
    def join_device(self):
        return ember.device("cpu")

    @property
    def join_process_group(self):
        return None


def _custom_joinable(rank: int) -> list:
    j = _CountingJoinable()
    with Join([j], flavour="x"):
        for _ in range(1 if rank == 0 else 3):
            Join.notify_join_context(j)
    return j.calls


def _worker(rank: int, init: str, torch_init: str | None, conn) -> None:
    try:
        dist.init_process_group("shm", init_method=init, rank=rank, world_size=2,
                                timeout=timedelta(seconds=120))
        out: dict = {"ember": {}, "start": {}, "pid": os.getpid()}
        for name, (_, _, _, _, kind, _) in SCENARIOS.items():
            out["ember"][name] = _train_ember(rank, name)
            ember.manual_seed(7)  # rank 0's initial weights, for the references
            out["start"][name] = _state(_ember_model(kind))
        out["throw"] = _throw_on_early_termination(rank)
        out["custom"] = _custom_joinable(rank)
        dist.destroy_process_group()
        if torch_init is not None:
            import torch
            import torch.distributed as tdist

            torch.set_num_threads(1)
            tdist.init_process_group("gloo", init_method=torch_init, rank=rank, world_size=2,
                                     timeout=timedelta(seconds=120))
            out["torch"] = {name: _train_torch(rank, name, out["start"][name])
                            for name in SCENARIOS}
            tdist.destroy_process_group()
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001  (reported by the test)
        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("join")
    try:
        import torch  # noqa: F401

        torch_init = f"file://{tmp / 'torch_store'}"
    except ImportError:
        torch_init = None
    return run_ranks(_worker, 2, (f"file://{tmp / 'store'}", torch_init), TIMEOUT)


def _hand_reference(name: str, start: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The semantics, in one process: at each global step the ranks that still have a batch
    contribute their gradient, the others zero; the sum is divided by the world size (or by the
    ranks still training). Only for models without buffers, whose replicas stay equal."""
    n0, n1, _, join_kw, kind, options = SCENARIOS[name]
    assert kind != "bn" and not options
    model = _ember_model(kind)
    model.load_state_dict({k: ember.from_numpy(v.copy()) for k, v in start.items()})
    params = dict(model.named_parameters())
    for step in range(max(n0, n1)):
        active = [r for r, n in enumerate((n0, n1)) if step < n]
        total = {k: np.zeros_like(v.detach().numpy()) for k, v in params.items()}
        for r in active:
            x, y = _batch(r, step)
            model.zero_grad()
            ember.cross_entropy(model(ember.from_numpy(x)), ember.from_numpy(y)).backward()
            for k, p in params.items():
                if p.grad is not None:
                    total[k] += p.grad.numpy()
        divisor = 2 if join_kw.get("divide_by_initial_world_size", True) else len(active)
        with ember.no_grad():
            for k, p in params.items():
                p -= LR * ember.from_numpy(total[k] / divisor)
    return _state(model)


def _assert_state_close(got: dict, want: dict, what: str, tol: float = 1e-5) -> None:
    assert sorted(got) == sorted(want), what
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=10 * tol, atol=tol, err_msg=f"{what}: {k}")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_uneven_inputs_end_with_equal_replicas(results, name):
    r0, r1 = results[0]["ember"][name], results[1]["ember"][name]
    keys = list(r0)
    if SCENARIOS[name][2].get("broadcast_buffers") is False:  # each rank keeps its own stats
        keys = [k for k in keys if not k.startswith("bn.running") and "num_batches" not in k]
    for k in keys:
        np.testing.assert_array_equal(r0[k], r1[k], err_msg=f"{name}: {k} differs across ranks")


@pytest.mark.parametrize("name", [n for n, s in SCENARIOS.items() if s[4] != "bn" and not s[5]])
def test_uneven_inputs_match_the_hand_computation(results, name):
    want = _hand_reference(name, results[0]["start"][name])
    _assert_state_close(results[0]["ember"][name], want, name)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_uneven_inputs_match_torch(results, name):
    if "torch" not in results[0]:
        pytest.skip("torch is not installed")
    for rank in (0, 1):
        tol = 1e-3 if SCENARIOS[name][5].get("hook") else 1e-5  # float16 rounding
        _assert_state_close(results[rank]["ember"][name], results[rank]["torch"][name],
                            f"{name}, rank {rank}", tol)


def test_throw_on_early_termination_raises_on_every_rank(results):
    assert "rank 0 has run out of inputs" in results[0]["throw"], results[0]["throw"]
    assert "a rank has run out of inputs" in results[1]["throw"], results[1]["throw"]


def test_join_drives_any_joinable(results):
    # Rank 0 joined after 1 iteration and shadowed rank 1's 2 others; rank 1 joined last.
    assert results[0]["custom"] == [("kwargs", {"flavour": "x"}), "main", "main", ("post", False)]
    assert results[1]["custom"] == [("kwargs", {"flavour": "x"}), ("post", True)]


def test_joinable_checks():
    assert isinstance(_CountingJoinable(), Joinable)
    assert issubclass(DDP, Joinable)
    with pytest.raises(TypeError, match="Joinable"):
        Join([object()])
    with pytest.raises(ValueError, match="at least one"):
        Join([])
    with pytest.raises(RuntimeError, match="_join_config"):
        Join.notify_join_context(object())


def test_no_segments_left(results):
    prefixes = tuple(f"ember_dist_{r['pid']}_" for r in results)
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(prefixes)]
