"""Hostile input, round 6 (nn part): optimizer hyper-parameters changed in ``param_groups`` after
the optimizer was made.

The constructor refuses ``lr=nan`` or ``lr="0.1"``, but a value written into ``param_groups``
later (by hand, or by a scheduler fed a NaN) went straight to the update: a NaN lr, momentum or
beta silently turned every parameter of the group into NaN (PyTorch does the same), and a str
failed deep inside the fused kernel's binding with a list of C++ signatures. ``step()`` now
checks them before any parameter is written: a non-number is a TypeError, a NaN (or an infinite
lr) a ValueError, each naming the optimizer, the group and the key. Tensor values are not read
(no device synchronization per step) and negative numbers still pass, as in PyTorch. The rest of
round 6 is in packages/core/tests/test_hostile_input_round6.py.
"""

from __future__ import annotations

import ember
import pytest

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _opt(lib, cls, **kw):
    p = lib.nn.Parameter(lib.ones(3))
    p.grad = lib.ones(3)
    return p, getattr(lib.optim, cls)([p], **kw)


@pytest.mark.parametrize("cls, kw, key, value, exc, fragment", [
    ("SGD", {"lr": 0.1}, "lr", float("nan"), ValueError,
     "SGD.step: param group 0 has lr=nan, which would make every parameter of the group NaN"),
    ("SGD", {"lr": 0.1}, "lr", float("inf"), ValueError, "SGD.step: param group 0 has lr=inf"),
    ("SGD", {"lr": 0.1, "momentum": 0.9}, "momentum", float("nan"), ValueError,
     "SGD.step: param group 0 has momentum=nan"),
    ("Adam", {"lr": 0.1}, "lr", "0.1", TypeError,
     "Adam.step: param group 0 has lr='0.1' (str); expected a number or a Tensor"),
    ("Adam", {"lr": 0.1}, "betas", (0.9, float("nan")), ValueError,
     "Adam.step: param group 0 has betas[1]=nan"),
    ("AdamW", {"lr": 0.1}, "weight_decay", float("nan"), ValueError,
     "AdamW.step: param group 0 has weight_decay=nan"),
    ("RMSprop", {"lr": 0.1}, "eps", None, None, None),  # None: not a hyper-parameter it checks
])
def test_a_hyperparameter_broken_after_construction_is_refused_at_step(cls, kw, key, value, exc,
                                                                         fragment):
    p, opt = _opt(ember, cls, **kw)
    if exc is None:  # an untouched group steps as before
        opt.step()
        assert p.tolist() != [1.0, 1.0, 1.0]
        return
    opt.param_groups[0][key] = value
    with pytest.raises(exc, match=fragment.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        opt.step()
    assert p.tolist() == [1.0, 1.0, 1.0] and not opt.state[p]  # nothing was written
    if torch is not None and exc is ValueError:  # PyTorch steps into NaN without a word
        tp, topt = _opt(torch, cls, **kw)
        topt.param_groups[0][key] = value
        topt.step()
        topt.step()  # (SGD's momentum first acts at the second step)
        assert any(v != v or abs(v) == float("inf") for v in tp.tolist())


def test_valid_changes_to_a_group_still_step():
    p, opt = _opt(ember, "SGD", lr=0.1)
    opt.param_groups[0]["lr"] = -1.0  # a negative lr: gradient ascent, as in PyTorch
    opt.step()
    assert p.tolist() == [2.0, 2.0, 2.0]
    p, opt = _opt(ember, "Adam", lr=ember.tensor(0.1))  # a Tensor lr is not read per step
    opt.step()
    assert [round(v, 4) for v in p.tolist()] == [0.9, 0.9, 0.9]
    p, opt = _opt(ember, "Adam", lr=0.1)
    sched = ember.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    for _ in range(8):  # the schedule reaches lr=0 and comes back: all numbers stay valid
        opt.step()
        sched.step()
    assert all(v == v for v in p.tolist())
