"""ember.distributed.device_mesh in one process (a one-rank world from a HashStore), and DDP's
torch 2.13 arguments (device_mesh=, init_sync=, forward_sync_buffers= and the deprecated
broadcast_buffers=). The 4-rank layouts (groups per dimension, sub-meshes, _flatten, DDP over a
sub-mesh) run against torch's reference in test_compat_dist_programs.py (device_mesh_2d)."""

from __future__ import annotations

import warnings

import ember
import ember.distributed as dist
import pytest
from ember import nn
from ember.distributed.device_mesh import DeviceMesh, init_device_mesh
from ember.nn.parallel import DistributedDataParallel as DDP


@pytest.fixture
def world1():
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_one_rank_mesh_uses_the_world_group(world1):
    mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("dp",))
    assert repr(mesh) == "DeviceMesh((dp=1), 'cpu', stride=(1,))"
    assert mesh.get_group() is dist.group.WORLD and mesh.get_group("dp") is dist.group.WORLD
    assert mesh.get_coordinate() == (0,) and mesh.get_local_rank() == 0 and mesh.get_rank() == 0
    assert mesh.mesh.dtype == ember.int32 and mesh.mesh.tolist() == [0]
    assert mesh["dp"] is mesh and mesh._flatten("dp") is mesh
    assert dist.DeviceMesh is DeviceMesh and dist.init_device_mesh is init_device_mesh


def test_three_dims_of_one_rank_slice_and_flatten(world1):
    mesh = init_device_mesh("cpu", (1, 1, 1), mesh_dim_names=("pp", "dp", "tp"))
    assert repr(mesh["pp", "tp"]) == "DeviceMesh((pp=1, tp=1), 'cpu', stride=(1, 1))"
    flat = mesh["dp", "tp"]._flatten()
    assert repr(flat) == "DeviceMesh((dp_tp=1), 'cpu', stride=(1,))"
    assert mesh["dp_tp"] is flat  # the root finds its flattened meshes by name
    assert len(mesh.get_all_groups()) == 3 and mesh.size() == 1 and mesh.size("tp") == 1


def test_bad_meshes_raise_clear_errors(world1):
    with pytest.raises(RuntimeError, match="needs 4 ranks but the world has 1"):
        init_device_mesh("cpu", (2, 2))
    with pytest.raises(RuntimeError, match="same length"):
        init_device_mesh("cpu", (1, 1), mesh_dim_names=("a",))
    with pytest.raises(RuntimeError, match="must be unique"):
        init_device_mesh("cpu", (1, 1), mesh_dim_names=("a", "a"))
    with pytest.raises(TypeError, match="tuple of ints"):
        init_device_mesh("cpu", (1.0,))
    with pytest.raises(ValueError, match="positive"):
        init_device_mesh("cpu", (0,))
    with pytest.raises(RuntimeError, match="outside the world of 1"):
        DeviceMesh("cpu", [0, 1])
    with pytest.raises(RuntimeError, match="more than once"):
        DeviceMesh("cpu", [0, 0])
    mesh = init_device_mesh("cpu", (1, 1))
    with pytest.raises(RuntimeError, match="without mesh_dim_names"):
        mesh["dp"]
    with pytest.raises(RuntimeError, match="`mesh_dim` needs to be specified"):
        mesh.get_group()
    with pytest.raises(IndexError, match="out of range"):
        mesh.get_group(2)
    named = init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    with pytest.raises(KeyError, match="ascending order"):
        named["tp", "dp"]
    with pytest.raises(KeyError, match="Valid mesh_dim_names"):
        named["xx"]
    with pytest.raises(KeyError, match="does not exist"):
        named.get_group("xx")


def test_from_group_and_equality(world1):
    m = DeviceMesh.from_group(dist.group.WORLD, "cpu", mesh_dim_names=("w",))
    assert m.get_group() is dist.group.WORLD and m.mesh.tolist() == [0]
    assert m == DeviceMesh("cpu", [0], mesh_dim_names=("w",))
    assert hash(m) == hash(DeviceMesh("cpu", [0], mesh_dim_names=("w",)))
    assert m != DeviceMesh("cpu", [0])
    with pytest.raises(ValueError, match="not the group's ranks"):
        DeviceMesh.from_group(dist.group.WORLD, "cpu", mesh=[1])


class _BN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        return self.bn(self.lin(x))


def test_ddp_device_mesh_and_torch_213_arguments(world1):
    mesh = init_device_mesh("cpu", (1,))
    ddp = DDP(_BN(), device_mesh=mesh)
    assert ddp.process_group is dist.group.WORLD and ddp.device_mesh is mesh
    with pytest.raises(RuntimeError, match="Cannot specify both"):
        DDP(_BN(), process_group=dist.group.WORLD, device_mesh=mesh)
    with pytest.raises(RuntimeError, match="Only 1D device mesh"):
        DDP(_BN(), device_mesh=init_device_mesh("cpu", (1, 1)))
    with pytest.raises(ValueError, match="at the same time"):
        DDP(_BN(), param_to_hook_all_reduce=object())
    with pytest.raises(NotImplementedError, match="mixed_precision"):
        DDP(_BN(), mixed_precision=object())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = DDP(_BN(), forward_sync_buffers=False, batched_grad_copy=True)
    assert quiet.broadcast_buffers is False and quiet.forward_sync_buffers is False
    with pytest.warns(FutureWarning, match="`broadcast_buffers` is deprecated"):
        old = DDP(_BN(), broadcast_buffers=False)
    assert old.forward_sync_buffers is False
    with pytest.warns(FutureWarning, match="check_reduction"):
        DDP(_BN(), check_reduction=True)
    # torch's order: init_sync is the sixth positional argument, before process_group
    positional = DDP(_BN(), None, None, 0, None, True, dist.group.WORLD)
    assert positional.process_group is dist.group.WORLD


def test_ddp_init_sync_false_skips_the_initial_broadcast(world1, monkeypatch):
    calls = []
    real = dist.broadcast
    monkeypatch.setattr(dist, "broadcast", lambda *a, **k: calls.append(1) or real(*a, **k))
    DDP(_BN(), init_sync=False)
    assert calls == []
    DDP(_BN())
    assert calls  # the default broadcasts rank 0's parameters and buffers
