"""Warnings PyTorch gives that ember now gives too: get_lr() outside step(), state_dict's
positional arguments, and backward(create_graph=True)'s reference cycle (once per process)."""

import warnings

import ember
import pytest
from ember import nn

try:
    import torch
except ImportError:  # the comparisons with PyTorch skip
    torch = None


def _caught(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn()
    return [(x.category.__name__, str(x.message)) for x in w]


@pytest.mark.parametrize("name, make", [
    ("StepLR", lambda L, o: L.optim.lr_scheduler.StepLR(o, 2)),
    ("CosineAnnealingLR", lambda L, o: L.optim.lr_scheduler.CosineAnnealingLR(o, 10)),
    ("LambdaLR", lambda L, o: L.optim.lr_scheduler.LambdaLR(o, lambda e: 0.5 ** e)),
    ("OneCycleLR", lambda L, o: L.optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=10)),
])
def test_get_lr_outside_step_warns(name, make):
    libs = [ember] + ([torch] if torch is not None else [])
    for lib in libs:
        o = lib.optim.SGD(lib.nn.Linear(2, 2).parameters(), lr=0.1)
        sched = make(lib, o)
        got = _caught(lambda: (o.step(), sched.step()))  # inside step(): no warning
        assert got == [], (lib.__name__, got)
        got = _caught(sched.get_lr)
        assert got == [("UserWarning", "To get the last learning rate computed by the scheduler, "
                        "please use `get_last_lr()`.")], (lib.__name__, name)


def test_a_users_get_lr_does_not_warn():
    class Half(ember.optim.lr_scheduler.LRScheduler):
        def get_lr(self):
            return [g["lr"] * 0.5 for g in self.optimizer.param_groups]

    o = ember.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    sched = Half(o)
    assert _caught(sched.get_lr) == []
    assert sched.get_lr() == [pytest.approx(0.025)]  # the constructor took the first step


def test_state_dict_positional_args_warn():
    m = nn.Linear(2, 2)
    dest = {}
    got = _caught(lambda: m.state_dict(dest, "p."))
    assert [c for c, _ in got] == ["FutureWarning"]
    assert got[0][1].startswith("Positional args are being deprecated, use kwargs instead.")
    assert sorted(dest) == ["p.bias", "p.weight"]
    assert _caught(lambda: m.state_dict(destination={}, prefix="q.")) == []
    if torch is not None:
        tgot = _caught(lambda: torch.nn.Linear(2, 2).state_dict({}, "p."))
        assert tgot == got


def test_backward_create_graph_warns_once(monkeypatch):
    import ember.autograd as ag

    monkeypatch.setattr(ag, "_create_graph_warned", False)
    x = ember.ones(2, requires_grad=True)

    def twice():
        (x * x).sum().backward(create_graph=True)
        (x * x).sum().backward(create_graph=True)

    got = _caught(twice)
    assert len(got) == 1 and got[0][0] == "UserWarning"
    assert got[0][1].startswith("Using backward() with create_graph=True will create a reference "
                                "cycle between the parameter and its gradient")
    assert x.grad.tolist() == [4.0, 4.0] and x.grad.requires_grad
    # with inputs= (no leaf's .grad keeps the graph alive unasked) there is none
    monkeypatch.setattr(ag, "_create_graph_warned", False)
    y = ember.ones(2, requires_grad=True)
    assert _caught(lambda: (y * y).sum().backward(create_graph=True, inputs=[y])) == []
