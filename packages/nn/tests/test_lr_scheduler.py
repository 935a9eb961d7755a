"""Every scheduler's learning-rate (and momentum) sequence equals PyTorch's; state dicts resume."""

from __future__ import annotations

import math
import warnings

import ember
import pytest
from ember import nn, optim
from nn_helpers import torch


def _sched(mod, opt, name, **kw):
    return getattr(mod, name)(opt, **kw)


# name -> factory(lr_scheduler module, optimizer) building the scheduler the same way in both
CASES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2, eta_min=0.01),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=40),
    "OneCycleLR-3phase-linear": lambda m, o: m.OneCycleLR(
        o, max_lr=0.8, epochs=4, steps_per_epoch=10, three_phase=True, anneal_strategy="linear"
    ),
    "CyclicLR": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    "CyclicLR-triangular2": lambda m, o: m.CyclicLR(
        o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=3, step_size_down=5, mode="triangular2"
    ),
    "CyclicLR-exp_range": lambda m, o: m.CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=4, mode="exp_range", gamma=0.97
    ),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lr_lambda=[lambda e: 0.95**e, lambda e: 1 / (e + 1)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lr_lambda=lambda e: 0.9),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=8, power=2.0),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o,
        schedulers=[m.LinearLR(o, start_factor=0.1, total_iters=4), m.ExponentialLR(o, gamma=0.9),
                    m.CosineAnnealingLR(o, T_max=5)],
        milestones=[4, 10],
    ),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.5, total_iters=3), m.ExponentialLR(o, gamma=0.9)]
    ),
}
NEEDS_BETAS = {"OneCycleLR-3phase-linear"}


def _optimizers(name):
    w = [nn.Parameter(ember.zeros(2)), nn.Parameter(ember.zeros(1))]
    tw = [torch.zeros(2, requires_grad=True), torch.zeros(1, requires_grad=True)]
    if name in NEEDS_BETAS:
        return (optim.Adam([{"params": [w[0]]}, {"params": [w[1]], "lr": 0.05}], lr=0.1),
                torch.optim.Adam([{"params": [tw[0]]}, {"params": [tw[1]], "lr": 0.05}], lr=0.1))
    return (
        optim.SGD([{"params": [w[0]]}, {"params": [w[1]], "lr": 0.05}], lr=0.1, momentum=0.9),
        torch.optim.SGD([{"params": [tw[0]]}, {"params": [tw[1]], "lr": 0.05}], lr=0.1, momentum=0.9),
    )


def _trace(opt, sched, steps):
    out = []
    for _ in range(steps):
        out.append((list(sched.get_last_lr()), [g.get("momentum", g.get("betas")) for g in opt.param_groups]))
        opt.step()
        sched.step()
    return out


def _assert_same(a, b):
    assert len(a) == len(b)
    for i, ((lr_a, m_a), (lr_b, m_b)) in enumerate(zip(a, b)):
        for x, y in zip(lr_a, lr_b):
            assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15), (i, lr_a, lr_b)
        assert repr(m_a) == repr(m_b) or all(
            math.isclose(float(u), float(v), rel_tol=1e-12)
            for ua, va in zip(m_a, m_b)
            for u, v in zip(ua if isinstance(ua, tuple) else (ua,), va if isinstance(va, tuple) else (va,))
        ), (i, m_a, m_b)


@pytest.mark.parametrize("name", list(CASES))
def test_lr_sequence_matches_torch(name):
    pytest.importorskip("torch")
    eopt, topt = _optimizers(name)
    steps = 39 if name.startswith("OneCycle") else 30
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation notes
        ours = _trace(eopt, CASES[name](optim.lr_scheduler, eopt), steps)
        theirs = _trace(topt, CASES[name](torch.optim.lr_scheduler, topt), steps)
    _assert_same(ours, theirs)


@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_resume(name):
    eopt, _ = _optimizers(name) if torch is not None else (None, None)
    if eopt is None:
        pytest.skip("needs torch to build the reference optimizers")
    sched = CASES[name](optim.lr_scheduler, eopt)
    _trace(eopt, sched, 10)
    sd_sched, sd_opt = sched.state_dict(), eopt.state_dict()
    rest = _trace(eopt, sched, 15)

    # the usual checkpoint pattern: build both, then load the optimizer's and scheduler's state
    eopt2, _ = _optimizers(name)
    sched2 = CASES[name](optim.lr_scheduler, eopt2)
    eopt2.load_state_dict(sd_opt)
    sched2.load_state_dict(sd_sched)
    _assert_same(_trace(eopt2, sched2, 15), rest)


def test_reduce_lr_on_plateau_matches_torch():
    pytest.importorskip("torch")
    metrics = [1.0, 0.9, 0.9, 0.95, 0.91, 0.92, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49999, 0.5, 0.6, 0.7, 0.8]
    configs = [
        dict(patience=1, factor=0.5),
        dict(mode="max", patience=0, threshold=0.05, threshold_mode="abs", cooldown=2, min_lr=[0.02, 0.001]),
        dict(patience=2, factor=0.1, threshold=0.01, eps=1e-3),
    ]
    for cfg in configs:
        eopt, topt = _optimizers("ReduceLROnPlateau")
        es = optim.lr_scheduler.ReduceLROnPlateau(eopt, **cfg)
        ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **cfg)
        for m in metrics:
            es.step(m)
            ts.step(m)
            assert es.get_last_lr() == ts.get_last_lr(), cfg
            assert es.num_bad_epochs == ts.num_bad_epochs and es.cooldown_counter == ts.cooldown_counter
        es2 = optim.lr_scheduler.ReduceLROnPlateau(eopt)
        es2.load_state_dict(es.state_dict())
        assert es2.best == es.best and es2.mode == es.mode and es2.patience == es.patience


def test_closed_form_with_epoch_matches_torch():
    pytest.importorskip("torch")
    for name in ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR",
                 "ConstantLR", "PolynomialLR"]:
        eopt, topt = _optimizers(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            es, ts = CASES[name](optim.lr_scheduler, eopt), CASES[name](torch.optim.lr_scheduler, topt)
            for epoch in [3, 7, 1, 12]:
                es.step(epoch)
                ts.step(epoch)
                for x, y in zip(es.get_last_lr(), ts.get_last_lr()):
                    assert math.isclose(x, y, rel_tol=1e-12), (name, epoch)


def test_warm_restarts_fractional_epochs_match_torch():
    pytest.importorskip("torch")
    eopt, topt = _optimizers("x")
    es = optim.lr_scheduler.CosineAnnealingWarmRestarts(eopt, T_0=3, T_mult=2)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, T_0=3, T_mult=2)
    for e in [0.5, 1.25, 2.9, 3.0, 7.5, 10.0, 20.3]:
        es.step(e)
        ts.step(e)
        assert es.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)


def test_scheduler_bad_input():
    w = nn.Parameter(ember.zeros(1))
    opt = optim.SGD([w], lr=0.1)
    S = optim.lr_scheduler
    with pytest.raises(TypeError, match="not an Optimizer"):
        S.StepLR("opt", step_size=1)
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(optim.SGD([nn.Parameter(ember.zeros(1))], lr=0.1), step_size=2, last_epoch=3)
    with pytest.raises(ValueError, match="factor"):
        S.ConstantLR(opt, factor=2.0)
    with pytest.raises(ValueError, match="start_factor"):
        S.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="T_0"):
        S.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="total_steps"):
        S.OneCycleLR(opt, max_lr=1.0)
    one = S.OneCycleLR(opt, max_lr=1.0, total_steps=2)
    opt.step()
    one.step()
    one.step()
    with pytest.raises(ValueError, match="total steps is 2"):
        one.step()
    with pytest.raises(ValueError, match="momentum"):
        S.CyclicLR(optim.Adagrad([nn.Parameter(ember.zeros(1))]), base_lr=0.1, max_lr=1.0)
    with pytest.raises(ValueError, match="one milestone fewer"):
        S.SequentialLR(opt, [S.ExponentialLR(opt, 0.9)], milestones=[3])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        S.ChainedScheduler([S.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="one per param group|one value per param group"):
        S.OneCycleLR(opt, max_lr=[1.0, 2.0], total_steps=5)
    with pytest.raises(ValueError, match="mode"):
        S.ReduceLROnPlateau(opt, mode="median")
