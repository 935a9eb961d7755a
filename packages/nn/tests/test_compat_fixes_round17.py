"""Fixes from the seventeenth drop-in compatibility round (nn): the optimizers' ``defaults`` -
and so every ``param_groups`` entry and ``state_dict()["param_groups"]`` - listed their options
in an order of ember's own (``fused`` before ``differentiable`` in SGD / Adam / Adagrad,
RMSprop's ``alpha`` before ``momentum``, ...), so a program printing its optimizer
configuration or a checkpoint's param groups printed different lines than under PyTorch. The
orders are pinned explicitly and, where torch is installed, against it."""

from __future__ import annotations

import ember
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

ORDERS = {
    "SGD": ["lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "foreach",
            "differentiable", "fused"],
    "Adam": ["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach", "capturable",
             "differentiable", "fused", "decoupled_weight_decay"],
    "AdamW": ["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach",
              "capturable", "differentiable", "fused", "decoupled_weight_decay"],
    "Adagrad": ["lr", "lr_decay", "eps", "weight_decay", "initial_accumulator_value", "foreach",
                "maximize", "differentiable", "fused"],
    "Adadelta": ["lr", "rho", "eps", "weight_decay", "maximize", "capturable", "foreach",
                 "differentiable"],
    "NAdam": ["lr", "betas", "eps", "weight_decay", "momentum_decay", "decoupled_weight_decay",
              "maximize", "foreach", "capturable", "differentiable"],
    "RAdam": ["lr", "betas", "eps", "weight_decay", "maximize", "foreach", "capturable",
              "decoupled_weight_decay", "differentiable"],
    "RMSprop": ["lr", "momentum", "alpha", "eps", "centered", "weight_decay", "capturable",
                "foreach", "maximize", "differentiable"],
}


def _groups(lib, name):
    p = lib.nn.Parameter(lib.ones(2))
    opt = getattr(lib.optim, name)([p], lr=0.1)
    p.grad = lib.ones(2)
    opt.step()
    return (list(opt.defaults), list(opt.param_groups[0]),
            list(opt.state_dict()["param_groups"][0]), opt.param_groups[0]["lr"])


@pytest.mark.parametrize("name", sorted(ORDERS))
def test_defaults_and_param_groups_in_torch_order(name):
    defaults, group, saved, lr = _groups(ember, name)
    assert defaults == ORDERS[name]
    assert group == ["params", *ORDERS[name]]
    assert saved == [*ORDERS[name], "params"]  # state_dict packs the params last
    assert lr == 0.1


@needs_torch
@pytest.mark.parametrize("name", sorted(ORDERS))
def test_param_group_order_matches_torch(name):
    assert _groups(ember, name) == _groups(torch, name)


def test_user_group_keys_come_first_then_defaults():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.RMSprop([{"params": [p], "weight_decay": 0.1}], lr=0.01, momentum=0.9)
    g = opt.param_groups[0]
    assert list(g)[:2] == ["params", "weight_decay"]
    assert list(g)[2:] == [k for k in ORDERS["RMSprop"] if k != "weight_decay"]
    assert g["momentum"] == 0.9 and g["weight_decay"] == 0.1
