"""FSDP's hybrid sharding (HYBRID_SHARD, _HYBRID_SHARD_ZERO2) on 4 spawned ranks: 2 shard groups
of 2 ranks (the "nodes"), each shard replicated over the groups. The groups come from a 2-D
DeviceMesh (replicate, shard), from a (shard, replicate) tuple, or from LOCAL_WORLD_SIZE as a
launcher sets it. Each rank trains on its quarter of every batch; the ground truth is
single-process training of the same module on the whole batch, in this process: gradients
averaged over all 4 ranks make them the same to float tolerance. Also: ranks of one shard
group hold different shards and replicas the same one, clip_grad_norm_ gives the global norm,
and bad group arguments raise clear errors."""

from __future__ import annotations

import os
import traceback
from datetime import timedelta
from typing import Any

import ember
import ember.distributed as dist
import numpy as np
import pytest
from dist_helpers import run_ranks
from ember import nn

WORLD = 4
BATCH = 16
STEPS = 3
TIMEOUT = 240.0


def _model() -> nn.Module:
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))
    rng = np.random.default_rng(0)
    with ember.no_grad():
        for p in model.parameters():
            p.copy_(ember.from_numpy((0.3 * rng.standard_normal(tuple(p.shape)))
                                     .astype(np.float32)))
    return model


def _train(model: Any, rank: int | None) -> list[float]:
    """STEPS SGD steps with clip_grad_norm_ on this rank's quarter of each batch (None: all of
    it); returns the norms."""
    opt = ember.optim.SGD(model.parameters(), lr=0.2)
    norms = []
    for step in range(STEPS):
        rng = np.random.default_rng(100 + step)
        x = rng.standard_normal((BATCH, 6)).astype(np.float32)
        y = rng.standard_normal((BATCH, 3)).astype(np.float32)
        if rank is not None:
            q = BATCH // WORLD
            x, y = x[rank * q:(rank + 1) * q], y[rank * q:(rank + 1) * q]
        opt.zero_grad()
        ember.nn.functional.mse_loss(model(ember.from_numpy(x)), ember.from_numpy(y)).backward()
        clip = (model.clip_grad_norm_(0.5) if hasattr(model, "clip_grad_norm_")
                else nn.utils.clip_grad_norm_(model.parameters(), 0.5))
        norms.append(float(clip))
        opt.step()
    return norms


def _scenario(rank: int, how: str, strategy_name: str) -> dict:
    from ember.distributed.device_mesh import init_device_mesh
    from ember.distributed.fsdp import FullyShardedDataParallel as FSDP
    from ember.distributed.fsdp import ShardingStrategy
    from ember.distributed.fsdp.wrap import ModuleWrapPolicy

    strategy = getattr(ShardingStrategy, strategy_name)
    kwargs: dict[str, Any] = {}
    if how == "mesh":
        kwargs["device_mesh"] = init_device_mesh("cpu", (2, 2), mesh_dim_names=("rep", "shard"))
    elif how == "tuple":
        shard, _ = dist.new_subgroups_by_enumeration([[0, 1], [2, 3]])
        rep, _ = dist.new_subgroups_by_enumeration([[0, 2], [1, 3]])
        kwargs["process_group"] = (shard, rep)
    else:  # the nodes from the launcher's LOCAL_WORLD_SIZE
        os.environ["LOCAL_WORLD_SIZE"] = "2"
    model = FSDP(_model(), sharding_strategy=strategy,
                 auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), **kwargs)
    groups = [dist.get_process_group_ranks(model.process_group),
              dist.get_process_group_ranks(model._inter_node_pg)]
    norms = _train(model, rank)
    shard = model.module[0]._handle.flat.detach().tolist()
    with FSDP.summon_full_params(model):
        full = [p.detach().numpy().copy() for p in model.parameters()]
    return {"groups": groups, "norms": norms, "shard": shard, "full": full,
            "strategy": str(model.sharding_strategy)}


def _errors() -> list[str]:
    from ember.distributed.device_mesh import init_device_mesh
    from ember.distributed.fsdp import FullyShardedDataParallel as FSDP
    from ember.distributed.fsdp import ShardingStrategy

    out = []
    os.environ.pop("LOCAL_WORLD_SIZE", None)
    for kwargs in ({"sharding_strategy": ShardingStrategy.HYBRID_SHARD},
                   {"sharding_strategy": ShardingStrategy.HYBRID_SHARD,
                    "device_mesh": init_device_mesh("cpu", (4,))},
                   {"process_group": (dist.group.WORLD, dist.group.WORLD)},
                   {"device_mesh": init_device_mesh("cpu", (2, 2))}):
        try:
            FSDP(_model(), **kwargs)
            out.append("no error")
        except ValueError as e:
            out.append(str(e))
    return out


def _worker(rank: int, init: str, conn: Any) -> None:
    try:
        dist.init_process_group("shm", init_method=init, rank=rank, world_size=WORLD,
                                timeout=timedelta(seconds=120))
        results = {}
        for how, strategy in (("mesh", "HYBRID_SHARD"), ("tuple", "HYBRID_SHARD"),
                              ("env", "HYBRID_SHARD"), ("mesh", "_HYBRID_SHARD_ZERO2")):
            results[(how, strategy)] = _scenario(rank, how, strategy)
        results["errors"] = _errors()
        dist.destroy_process_group()
        conn.send(("ok", results))
    except BaseException:  # noqa: BLE001  (sent to the test)
        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("fsdp_hybrid")
    return run_ranks(_worker, WORLD, (f"file://{tmp / 'store'}",), TIMEOUT)


CASES = [("mesh", "HYBRID_SHARD"), ("tuple", "HYBRID_SHARD"), ("env", "HYBRID_SHARD"),
         ("mesh", "_HYBRID_SHARD_ZERO2")]


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_hybrid_sharding_trains_like_one_process(ranks, case):
    reference = _model()
    ref_norms = _train(reference, None)
    want = [p.detach().numpy() for p in reference.parameters()]
    for r, res in enumerate(ranks):
        got = res[case]
        assert got["strategy"] == f"ShardingStrategy.{case[1]}"
        assert got["groups"] == [[0, 1] if r < 2 else [2, 3], [r % 2, r % 2 + 2]]
        np.testing.assert_allclose(got["norms"], ref_norms, rtol=1e-5)
        for g, w in zip(got["full"], want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    shards = [res[case]["shard"] for res in ranks]
    assert shards[0] == shards[2] and shards[1] == shards[3]  # replicas hold the same shard
    assert shards[0] != shards[1]  # the ranks of a shard group hold different halves


def test_bad_hybrid_groups_are_refused(ranks):
    errors = ranks[0]["errors"]
    assert "LOCAL_WORLD_SIZE" in errors[0]
    assert "2-D device mesh" in errors[1]
    assert "for HYBRID_SHARD or _HYBRID_SHARD_ZERO2 only" in errors[2]
    assert "2-D mesh is for HYBRID_SHARD" in errors[3]
