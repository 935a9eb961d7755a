"""torch.distributed.algorithms._checkpoint.checkpoint_wrapper in ember: apply_activation_
checkpointing wraps the chosen submodules bottom-up; the wrappers are invisible in state dicts
and parameter names and fall through attribute / item lookups; gradients equal the unwrapped
model's (reentrant with keyword arguments, non-reentrant, CPU offload); compared with torch
doing the same when it is installed."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    CheckpointWrapper,
    apply_activation_checkpointing,
    checkpoint_wrapper,
    offload_wrapper,
)
from ember.distributed.fsdp.wrap import ModuleWrapPolicy


def _model(lib):
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.scale = 2.0

        def forward(self, x, shift=0.0):
            return lib.tanh(self.fc(x)) * self.scale + shift

    model = nn.Sequential(Block(), nn.Sequential(Block(), nn.ReLU()), nn.Linear(4, 1))
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    return model, Block


def _grads(model, lib, x):
    model.zero_grad()
    model(lib.from_numpy(x)).sum().backward()
    return [p.grad.numpy().copy() for p in model.parameters()]


def _wrapped_summary(lib, wrap_mod):
    model, block = _model(lib)
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    plain = _grads(model, lib, x)
    wrap_mod.apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, block))
    return {
        "types": [type(m).__name__ for m in model.modules()],
        "state_keys": list(model.state_dict()),
        "param_names": [n for n, _ in model.named_parameters()],
        "scale": model[0].scale,
        "same_grads": all(np.allclose(a, b, atol=1e-6)
                          for a, b in zip(plain, _grads(model, lib, x))),
    }


def test_apply_activation_checkpointing_matches_torch():
    import ember.distributed.algorithms._checkpoint.checkpoint_wrapper as ember_mod

    got = _wrapped_summary(ember, ember_mod)
    assert got["types"].count("CheckpointWrapper") == 2 and got["same_grads"]
    assert got["state_keys"] == ["0.fc.weight", "0.fc.bias", "1.0.fc.weight", "1.0.fc.bias",
                                 "2.weight", "2.bias"]
    # the root's named_parameters shows the wrapper level (the wrapper's own hides it), as torch
    assert got["param_names"][0] == "0._checkpoint_wrapped_module.fc.weight"
    assert got["scale"] == 2.0  # attribute lookup through the wrapper
    torch = pytest.importorskip("torch")
    import torch.distributed.algorithms._checkpoint.checkpoint_wrapper as torch_mod

    assert got == _wrapped_summary(torch, torch_mod)


def test_load_plain_state_dict_into_wrapped_model_and_back():
    model, block = _model(ember)
    sd = {k: v.clone() + 1 for k, v in model.state_dict().items()}
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, block))
    assert model.load_state_dict(sd).missing_keys == []
    np.testing.assert_array_equal(model[0].fc.weight.detach().numpy(), sd["0.fc.weight"].numpy())
    fresh, _ = _model(ember)
    fresh.load_state_dict(model.state_dict())
    np.testing.assert_array_equal(fresh[1][0].fc.bias.detach().numpy(),
                                  sd["1.0.fc.bias"].numpy())
    assert model[1][1].__class__.__name__ == "ReLU"
    assert [n for n, _ in model[0].named_parameters()] == ["fc.weight", "fc.bias"]


@pytest.mark.parametrize("make", [
    lambda m: checkpoint_wrapper(m, CheckpointImpl.REENTRANT),
    lambda m: checkpoint_wrapper(m, checkpoint_fn=ember.utils.checkpoint.checkpoint,
                                 use_reentrant=False, preserve_rng_state=False),
    offload_wrapper,
], ids=["reentrant", "custom_fn", "offload"])
def test_wrappers_keep_gradients_and_keyword_inputs(make):
    model, block = _model(ember)
    x = ember.randn(3, 4, requires_grad=True)
    plain = model[0](x, shift=1.5).sum()
    plain.backward()
    want = [x.grad.clone(), model[0].fc.weight.grad.clone()]
    x.grad = None
    model.zero_grad()
    wrapped = make(model[0])
    wrapped(x, shift=1.5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), want[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(model[0].fc.weight.grad.numpy(), want[1].numpy(), rtol=1e-6)


def test_policy_and_no_double_wrapping():
    model, block = _model(ember)
    apply_activation_checkpointing(model, auto_wrap_policy=ModuleWrapPolicy({block}))
    apply_activation_checkpointing(model, auto_wrap_policy=ModuleWrapPolicy({block}))
    assert sum(isinstance(m, CheckpointWrapper) for m in model.modules()) == 2
    assert not isinstance(model, CheckpointWrapper)  # the root itself is never wrapped
