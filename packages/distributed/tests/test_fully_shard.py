"""fully_shard (FSDP2) in a one-rank world: arguments it refuses, mixed precision, keeping the
root unsharded after forward, register_fsdp_forward_method, and gradients equal to the plain
module's. Two ranks against torch: the fsdp2_train program of test_compat_dist_programs.py."""

from __future__ import annotations

import ember
import ember.distributed as dist
import numpy as np
import pytest
from ember import nn
from ember.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    fully_shard,
    register_fsdp_forward_method,
)


@pytest.fixture
def world1():
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _mlp() -> nn.Module:
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))


def test_needs_a_process_group():
    with pytest.raises(RuntimeError, match="initialized process group"):
        fully_shard(_mlp())


def test_refusals(world1):
    from ember.distributed.tensor import Shard

    m = fully_shard(_mlp())
    with pytest.raises(ValueError, match="already fully sharded"):
        fully_shard(m)
    with pytest.raises(NotImplementedError, match="one module at a time"):
        fully_shard([_mlp(), _mlp()])
    with pytest.raises(TypeError, match="OffloadPolicy"):
        fully_shard(_mlp(), offload_policy="cpu")
    with pytest.raises(ValueError, match="shard_placement_fn must return None or Shard"):
        fully_shard(_mlp(), shard_placement_fn=lambda p: Shard(5))
    assert fully_shard(_mlp(), offload_policy=CPUOffloadPolicy())[0].weight.device.type == "cpu"
    with pytest.raises(TypeError, match="nn.Module"):
        fully_shard(ember.ones(2))


def test_gradients_and_types_match_the_plain_module(world1):
    from ember.distributed.tensor import DTensor

    plain, sharded = _mlp(), fully_shard(_mlp())
    assert isinstance(sharded, FSDPModule) and type(sharded).__name__ == "FSDPSequential"
    x = ember.randn(4, 3)
    plain(x).pow(2).sum().backward()
    sharded(x).pow(2).sum().backward()
    for p, q in zip(plain.parameters(), sharded.parameters()):
        assert isinstance(q, DTensor) and isinstance(q.grad, DTensor)
        np.testing.assert_allclose(q.grad.full_tensor().numpy(), p.grad.numpy(), rtol=1e-6)


def test_mixed_precision_and_reshard_after_forward(world1):
    from ember.distributed.tensor import DTensor

    seen = []
    m = _mlp()
    m[0].register_forward_hook(lambda mod, i, o: seen.append((mod.weight.dtype, o.dtype)))
    fully_shard(m, mp_policy=MixedPrecisionPolicy(param_dtype=ember.bfloat16,
                                                  output_dtype=ember.float32),
                reshard_after_forward=False)
    out = m(ember.randn(2, 3))
    assert seen == [(ember.bfloat16, ember.bfloat16)] and out.dtype == ember.float32
    assert not isinstance(m[0].weight, DTensor)  # kept gathered until backward
    out.sum().backward()
    assert isinstance(m[0].weight, DTensor) and m[0].weight.grad.dtype == ember.float32


def test_forward_method_gathers_parameters(world1):
    class Gen(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x)

        def generate(self, x):
            return self.lin.weight.shape, self.lin(x)

    g = fully_shard(Gen())
    register_fsdp_forward_method(g, "generate")
    shape, _ = g.generate(ember.ones(1, 2))
    assert shape == (2, 2)


def test_module_apply_and_deepcopy_keep_working(world1):
    import copy

    m = fully_shard(_mlp())
    m.double()  # new DTensor parameters: the next forward gathers those
    out = m(ember.randn(2, 3, dtype=ember.float64))
    assert out.dtype == ember.float64
    out.sum().backward()
    assert m[0].weight.grad.dtype == ember.float64
    twin = copy.deepcopy(m)
    assert type(twin).__name__ == "FSDPSequential"
    np.testing.assert_array_equal(twin(ember.ones(1, 3, dtype=ember.float64)).detach().numpy(),
                                  m(ember.ones(1, 3, dtype=ember.float64)).detach().numpy())


def test_with_activation_checkpointing(world1):
    # backward gathers again before the checkpointed blocks recompute their forward
    from ember.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing,
    )

    def build() -> nn.Module:
        ember.manual_seed(0)
        return nn.Sequential(nn.Sequential(nn.Linear(3, 5), nn.Tanh()),
                             nn.Sequential(nn.Linear(5, 5), nn.Tanh()), nn.Linear(5, 2))

    plain, m = build(), build()
    apply_activation_checkpointing(m, check_fn=lambda s: isinstance(s, nn.Sequential)
                                   and s is not m)
    for block in list(m)[:2]:
        fully_shard(block)
    fully_shard(m)
    x = ember.randn(4, 3)
    plain(x).pow(2).sum().backward()
    m(x).pow(2).sum().backward()
    for p, q in zip(plain.parameters(), m.parameters()):
        np.testing.assert_allclose(q.grad.full_tensor().numpy(), p.grad.numpy(), atol=1e-6)


def test_collectives_refuse_dtensors(world1):
    from ember.distributed.device_mesh import init_device_mesh
    from ember.distributed.tensor import Shard, distribute_tensor

    d = distribute_tensor(ember.ones(2, 2), init_device_mesh("cpu", (1,)), [Shard(0)])
    with pytest.raises(TypeError, match="collectives take plain tensors"):
        dist.all_reduce(d)
    with pytest.raises(RuntimeError, match="mixed ember.Tensor and DTensor"):
        ember.mm(d, ember.ones(2, 2))
