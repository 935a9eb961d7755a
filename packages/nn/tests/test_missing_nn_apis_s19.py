"""optim.swap_in_optimizer_params_and_state (torch 2.13): an optimizer steps other tensors for
a block and comes back unchanged; compared with torch doing the same."""

from __future__ import annotations

import copy

import ember
import numpy as np
import pytest


def _run(lib):
    rng = np.random.default_rng(3)
    w = lib.nn.Parameter(lib.from_numpy(rng.standard_normal((3, 2)).astype(np.float32)))
    b = lib.nn.Parameter(lib.from_numpy(rng.standard_normal(2).astype(np.float32)))
    opt = lib.optim.Adam([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1)
    for p in (w, b):
        p.grad = lib.ones_like(p)
    opt.step()
    params_list = opt.param_groups[0]["params"]
    osd = copy.deepcopy(opt.state_dict())
    osd["param_groups"][1]["lr"] = 0.01
    shadow = {"w": w.detach().clone(), "b": b.detach().clone()}
    for t in shadow.values():
        t.grad = lib.full_like(t, 2.0)
    with lib.optim.swap_in_optimizer_params_and_state(opt, shadow, osd):
        inside_lr = [g["lr"] for g in opt.param_groups]
        opt.step()
    return {
        "shadow": [shadow["w"].tolist(), shadow["b"].tolist()],
        "live": [w.detach().tolist(), b.detach().tolist()],
        "exp_avg": osd["state"][0]["exp_avg"].tolist(),  # updated in place
        "step": float(osd["state"][1]["step"]),
        "live_step": float(opt.state[b]["step"]),
        "inside_lr": inside_lr, "after_lr": [g["lr"] for g in opt.param_groups],
        "same_list": opt.param_groups[0]["params"] is params_list,
    }


def test_swap_in_matches_torch():
    got = _run(ember)
    assert got["inside_lr"] == [0.1, 0.01] and got["after_lr"] == [0.1, 0.5]
    assert got["same_list"] and got["live_step"] == 1.0 and got["step"] == 2.0
    torch = pytest.importorskip("torch")
    want = _run(torch)
    for k in ("shadow", "live", "exp_avg"):
        np.testing.assert_allclose(np.array(got[k][0] if k != "exp_avg" else got[k]),
                                   np.array(want[k][0] if k != "exp_avg" else want[k]),
                                   rtol=1e-6)
    assert {k: v for k, v in got.items() if k not in ("shadow", "live", "exp_avg")} == {
        k: v for k, v in want.items() if k not in ("shadow", "live", "exp_avg")}


def test_swap_in_refuses_mismatched_parameters():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="2 parameters given for an optimizer of 1"):
        with ember.optim.swap_in_optimizer_params_and_state(
                opt, {"a": ember.ones(2), "b": ember.ones(2)}, opt.state_dict()):
            pass
    with pytest.raises(ValueError, match="param_groups"):
        with ember.optim.swap_in_optimizer_params_and_state(opt, {"a": ember.ones(2)}, {}):
            pass
    assert opt.param_groups[0]["params"][0] is p
