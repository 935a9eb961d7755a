"""torch.distributed._composable: checkpoint(module) and the older FSDP2 import path."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import nn


class Counted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.calls = 0

    def forward(self, x: ember.Tensor, scale: float = 1.0) -> ember.Tensor:
        self.calls += 1
        return ember.tanh(self.fc(x)) * scale


def test_checkpoint_recomputes_in_backward_with_the_same_gradients():
    from ember.distributed._composable import checkpoint

    ember.manual_seed(0)
    plain, ckpt = Counted(), Counted()
    ckpt.load_state_dict(plain.state_dict())
    assert checkpoint(ckpt) is ckpt and type(ckpt) is Counted
    assert list(ckpt.state_dict()) == ["fc.weight", "fc.bias"]
    x = ember.randn(4, 3)
    plain(x, scale=2.0).pow(2).sum().backward()
    ckpt(x, scale=2.0).pow(2).sum().backward()
    assert plain.calls == 1 and ckpt.calls == 2  # run again in backward
    np.testing.assert_allclose(ckpt.fc.weight.grad.numpy(), plain.fc.weight.grad.numpy(),
                               rtol=1e-6)
    with pytest.raises(RuntimeError, match="already checkpointed"):
        checkpoint(ckpt)
    with pytest.raises(TypeError, match="nn.Module"):
        checkpoint(lambda x: x)


def test_old_fsdp2_path_is_the_same_api():
    from ember.distributed import fsdp
    from ember.distributed._composable import fsdp as old

    assert old.fully_shard is fsdp.fully_shard
    assert old.MixedPrecisionPolicy is fsdp.MixedPrecisionPolicy


def test_replicate_on_one_rank():
    import copy

    import ember.distributed as dist
    from ember.distributed._composable import replicate

    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = replicate(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)))
        assert type(model).__name__ == "DDPSequential" and isinstance(model, nn.Sequential)
        assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
        model(ember.randn(5, 3)).sum().backward()
        assert model[0].weight.grad is not None
        assert type(model[0:2]) is nn.Sequential  # slicing builds a plain module
        model.set_requires_gradient_sync(False)
        model(ember.randn(5, 3)).sum().backward()
        with pytest.raises(AssertionError, match="deepcopy"):
            copy.deepcopy(model)
        with pytest.raises(RuntimeError, match="already replicated"):
            replicate(model)
    finally:
        dist.destroy_process_group()
