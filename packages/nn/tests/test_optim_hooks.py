"""Optimizer hooks (step, state_dict, load_state_dict; per optimizer and global) and the
scheduler-stepped-before-optimizer warning, against PyTorch's behaviour."""

from __future__ import annotations

import importlib
import warnings

import ember
import pytest
from ember import nn, optim
from ember.optim import optimizer as optimizer_mod
from nn_helpers import torch


def _lib(name: str):
    return ember if name == "ember" else torch


def _opt(name: str):
    lib = _lib(name)
    w = lib.nn.Parameter(lib.ones(2))
    return lib.optim.SGD([w], lr=0.1, momentum=0.9), w


def _hook_events(name: str) -> list:
    mod = optimizer_mod if name == "ember" else importlib.import_module("torch.optim.optimizer")
    opt, w = _opt(name)
    ev: list = []
    handles = [
        mod.register_optimizer_step_pre_hook(lambda o, a, k: ev.append("global_pre")),
        mod.register_optimizer_step_post_hook(lambda o, a, k: ev.append("global_post")),
        opt.register_step_pre_hook(lambda o, a, k: ev.append("pre")),
        opt.register_step_post_hook(lambda o, a, k: ev.append("post")),
        opt.register_state_dict_pre_hook(lambda o: ev.append("sd_pre")),
        opt.register_state_dict_pre_hook(lambda o: ev.append("sd_pre0"), prepend=True),
        opt.register_state_dict_post_hook(lambda o, sd: ev.append("sd_post") or {**sd, "extra": 1}),
        opt.register_load_state_dict_pre_hook(lambda o, sd: ev.append(("load_pre", "extra" in sd))),
        opt.register_load_state_dict_post_hook(lambda o: ev.append("load_post")),
    ]
    try:
        (w * w).sum().backward()
        opt.step()
        sd = opt.state_dict()
        ev.append(("extra", sd.get("extra")))

        def drop_extra(o, sd):
            sd = dict(sd)
            sd.pop("extra")
            return sd

        opt.register_load_state_dict_pre_hook(drop_extra)
        opt.load_state_dict(sd)
        ev.append(("kept", "extra" in sd))
    finally:
        for h in handles[:2]:
            h.remove()
    opt.step()  # the global hooks are gone
    return ev


def test_optimizer_hooks_order_and_results_match_torch():
    pytest.importorskip("torch")
    ours = _hook_events("ember")
    assert ours == _hook_events("torch")
    assert ours[:4] == ["global_pre", "pre", "post", "global_post"]
    assert ours[4:7] == ["sd_pre0", "sd_pre", "sd_post"]
    # the load pre-hook saw the extra key; the caller's dict was not changed by the hooks
    assert ("load_pre", True) in ours and ("kept", True) in ours
    assert ours.count("pre") == 2 and ours.count("global_pre") == 1


def test_step_pre_hook_replaces_arguments_and_bad_result_raises():
    opt, w = _opt("ember")
    seen = []

    def closure():
        seen.append("closure")
        return ember.tensor(1.0)

    # the new args carry the optimizer first, as PyTorch's hooks receive and return them
    opt.register_step_pre_hook(lambda o, a, k: ((o,), {"closure": closure}))
    loss = opt.step()
    assert seen == ["closure"] and loss.item() == 1.0
    opt2, _ = _opt("ember")
    opt2.register_step_pre_hook(lambda o, a, k: "nonsense")
    with pytest.raises(RuntimeError, match="pre-hook must return None"):
        opt2.step()


def test_removed_state_dict_hooks_stop_running():
    opt, _ = _opt("ember")
    calls = []
    with opt.register_state_dict_post_hook(lambda o, sd: calls.append(1)):
        opt.state_dict()
    opt.state_dict()
    h = opt.register_load_state_dict_post_hook(lambda o: calls.append(2))
    opt.load_state_dict(opt.state_dict())
    h.remove()
    opt.load_state_dict(opt.state_dict())
    assert calls == [1, 2]


def _scheduler_warnings(name: str, scenario: str) -> list[str]:
    lib = _lib(name)
    opt, w = _opt(name)
    sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(3):
            if scenario == "right_order":
                opt.step()
                sched.step()
            elif scenario == "scheduler_first":
                sched.step()
                opt.step()
            elif scenario == "overridden":
                opt.step = lambda *a, **k: None
                opt.step()
                sched.step()
    return [str(r.message) for r in rec]


@pytest.mark.parametrize("scenario", ["right_order", "scheduler_first", "overridden"])
def test_scheduler_before_optimizer_warning_matches_torch(scenario):
    pytest.importorskip("torch")
    ours = _scheduler_warnings("ember", scenario)
    theirs = _scheduler_warnings("torch", scenario)
    assert len(ours) == len(theirs)
    if scenario == "scheduler_first":
        prefix = "Detected call of `lr_scheduler.step()` before `optimizer.step()`."
        assert ours[0].startswith(prefix) and theirs[0].startswith(prefix)
    elif scenario == "overridden":
        assert "replaced" in ours[0]


def test_scheduler_warning_without_torch():
    opt, w = _opt("ember")
    sched = optim.lr_scheduler.ExponentialLR(opt, 0.5)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before"):
        sched.step()
    # two schedulers on one optimizer wrap its step once; stepping the optimizer first is quiet
    opt, w = _opt("ember")
    s1 = optim.lr_scheduler.ExponentialLR(opt, 0.5)
    s2 = optim.lr_scheduler.StepLR(opt, step_size=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        s1.step()
        s2.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 * 0.1)
    assert "_opt_called" not in optim.SGD([nn.Parameter(ember.ones(1))], lr=0.1).__dict__
