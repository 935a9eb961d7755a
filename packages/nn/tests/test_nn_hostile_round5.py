"""Hostile input, round 5 (nn part): lr schedulers whose periods are zero or negative.

PyTorch builds these and fails later, at the first step (``CosineAnnealingLR(T_max=0)``: "integer
modulo by zero") or at once with a bare ZeroDivisionError (``CyclicLR(step_size_up=0)``), or
cycles the lr backwards without a word (a negative CyclicLR step size). Ember refuses them when
the scheduler is made, with a ValueError naming the scheduler and the argument, as it already
does for ``StepLR(step_size=0)``. The rest of round 5 is in
packages/core/tests/test_hostile_input_round5.py.
"""

from __future__ import annotations

import ember
import pytest

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _sgd(lib, momentum=0.9):
    return lib.optim.SGD([lib.nn.Parameter(lib.ones(2))], lr=1.0, momentum=momentum)


@pytest.mark.parametrize("make, fragment", [
    (lambda L, o: L.optim.lr_scheduler.CosineAnnealingLR(o, T_max=0),
     "CosineAnnealingLR: T_max must be a positive number, got 0"),
    (lambda L, o: L.optim.lr_scheduler.CosineAnnealingLR(o, T_max=-3),
     "CosineAnnealingLR: T_max must be a positive number, got -3"),
    (lambda L, o: L.optim.lr_scheduler.CosineAnnealingLR(o, T_max="10"),
     "T_max must be a positive number, got '10'"),
    (lambda L, o: L.optim.lr_scheduler.CyclicLR(o, 0.1, 1.0, step_size_up=0),
     "CyclicLR: step_size_up must be positive and step_size_down non-negative, got 0 and None"),
    (lambda L, o: L.optim.lr_scheduler.CyclicLR(o, 0.1, 1.0, step_size_up=-2, step_size_down=5),
     "got -2 and 5"),
    (lambda L, o: L.optim.lr_scheduler.CyclicLR(o, 0.1, 1.0, step_size_up=2, step_size_down=-1),
     "got 2 and -1"),
])
def test_schedulers_with_an_empty_or_negative_period_are_refused(make, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        make(ember, _sgd(ember))


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_pytorch_fails_later_or_not_at_all_on_the_same_arguments():
    o = _sgd(torch)
    s = torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=0)
    o.step()
    with pytest.raises(ZeroDivisionError):
        s.step()
    with pytest.raises(ZeroDivisionError):
        torch.optim.lr_scheduler.CyclicLR(_sgd(torch), 0.1, 1.0, step_size_up=0)


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("kwargs", [dict(T_max=1), dict(T_max=7), dict(T_max=2.5)])
def test_valid_cosine_periods_still_match_torch(kwargs):
    lrs = {}
    for lib in (ember, torch):
        o = _sgd(lib)
        s = lib.optim.lr_scheduler.CosineAnnealingLR(o, eta_min=0.1, **kwargs)
        seq = []
        for _ in range(12):
            o.step()
            s.step()
            seq.append(o.param_groups[0]["lr"])
        lrs[lib.__name__] = seq
    assert lrs["ember"] == pytest.approx(lrs["torch"], rel=1e-12, abs=1e-12)


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("up, down", [(1, 0), (3, None), (2, 5)])
def test_valid_cyclic_sizes_still_match_torch(up, down):
    lrs = {}
    for lib in (ember, torch):
        o = _sgd(lib)
        s = lib.optim.lr_scheduler.CyclicLR(o, 0.1, 1.0, step_size_up=up, step_size_down=down)
        seq = []
        for _ in range(10):
            o.step()
            s.step()
            seq.append(o.param_groups[0]["lr"])
        lrs[lib.__name__] = seq
    assert lrs["ember"] == pytest.approx(lrs["torch"], rel=1e-12, abs=1e-12)
