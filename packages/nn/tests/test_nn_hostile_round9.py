"""Hostile input, round 9 (nn part): always-called forward hooks and named parameter groups.

A forward hook registered with ``always_call=True`` is where programs clean up (close a
profiling range, pop a context); PyTorch runs it even when the call fails. ember ran it when
``forward`` or another forward hook raised, but not when a forward *pre*-hook raised, so the
cleanup silently never happened. It now runs there too (with ``None`` as the output, as in
PyTorch), and the pre-hook's error is the one raised.

An optimizer whose parameter groups are given partly as ``(name, param)`` pairs and partly as
bare parameters (``[{"params": named}, {"params": unnamed}]`` or a later ``add_param_group``)
was accepted, and its ``state_dict()`` then had ``param_names`` for some groups only. PyTorch
refuses the mix with a ValueError; ember now does too, naming the optimizer and which kind the
existing groups are.

The rest of round 9: packages/core/tests/test_hostile_input_round9.py and
packages/data/tests/test_data_hostile_round9.py.
"""

import warnings

import ember as E
import pytest
from ember import nn, optim

# ---- always_call forward hooks ------------------------------------------------------------------


def _linear():
    m = nn.Linear(2, 1)
    with E.no_grad():
        m.weight.copy_(E.tensor([[2.0, 3.0]]))
        m.bias.fill_(1.0)
    return m


def test_an_always_called_hook_runs_when_a_pre_hook_raises():
    m = _linear()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(("always", out)), always_call=True)
    m.register_forward_hook(lambda mod, args, out: seen.append(("plain", out)))
    pre = m.register_forward_pre_hook(lambda mod, args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        m(E.ones(2))
    assert seen == [("always", None)]  # only the always-called one, with no output
    # with the pre-hook gone both run once, on the real output
    pre.remove()
    seen.clear()
    out = m(E.ones(2))
    assert out.tolist() == [6.0]
    assert [k for k, _ in seen] == ["always", "plain"] and seen[0][1].tolist() == [6.0]


def test_a_failing_always_called_hook_does_not_hide_the_pre_hooks_error():
    m = _linear()
    m.register_forward_hook(lambda mod, args, out: out.sum(), always_call=True)  # None.sum()
    m.register_forward_pre_hook(lambda mod, args: (_ for _ in ()).throw(KeyError("pre")))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(KeyError, match="pre"):
            m(E.ones(2))
    assert any("always_call=True raised an exception that was silenced" in str(x.message)
               for x in w)


def test_always_called_hooks_with_kwargs_and_global_ones_run_too():
    m = _linear()
    seen = []
    m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(("kw", out)),
                            with_kwargs=True, always_call=True)
    h = nn.modules.module.register_module_forward_hook(
        lambda mod, args, out: seen.append(("global", out)), always_call=True)
    try:
        m.register_forward_pre_hook(lambda mod, args: (_ for _ in ()).throw(ValueError("bad")))
        with pytest.raises(ValueError, match="bad"):
            m(E.ones(2))
    finally:
        h.remove()
    assert seen == [("global", None), ("kw", None)]


def test_a_failing_forward_still_runs_the_always_called_hook_once():
    class Boom(nn.Module):
        def forward(self, x):
            raise RuntimeError("forward failed")

    m = Boom()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    m.register_forward_pre_hook(lambda mod, args: None)
    with pytest.raises(RuntimeError, match="forward failed"):
        m(E.ones(1))
    assert seen == [None]


def test_torch_runs_the_always_called_hook_when_a_pre_hook_raises():
    torch = pytest.importorskip("torch")
    m = torch.nn.Linear(2, 1)
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    m.register_forward_pre_hook(lambda mod, args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        m(torch.ones(2))
    assert seen == [None]


# ---- named and unnamed parameter groups ------------------------------------------------------


def _p(v):
    return nn.Parameter(E.full((2,), float(v)))


def test_mixing_named_and_unnamed_groups_is_refused():
    with pytest.raises(ValueError, match=r"SGD: all optimizer param groups should be with/without "
                                         r"names \(the existing groups are with names\); cannot "
                                         r"add a param group without names"):
        optim.SGD([{"params": [("a", _p(1))]}, {"params": [_p(2)]}], lr=0.1)
    with pytest.raises(ValueError, match=r"existing groups are without names\); cannot add a "
                                         r"param group with names"):
        optim.Adam([{"params": [_p(1)]}, {"params": [("b", _p(2))]}])
    opt = optim.SGD([("a", _p(1))], lr=0.1)
    with pytest.raises(ValueError, match="with/without names"):
        opt.add_param_group({"params": [_p(2)]})
    assert len(opt.param_groups) == 1  # the refused group was not added


def test_all_named_or_all_unnamed_groups_still_work():
    a, b = _p(1), _p(2)
    opt = optim.SGD([{"params": [("a", a)]}, {"params": [("b", b)], "lr": 0.5}], lr=0.1)
    opt.add_param_group({"params": [("c", _p(3))]})
    a.grad, b.grad = E.ones(2), E.ones(2)
    opt.step()
    assert a.tolist() == pytest.approx([0.9, 0.9]) and b.tolist() == [1.5, 1.5]
    sd = opt.state_dict()
    assert [g["param_names"] for g in sd["param_groups"]] == [["a"], ["b"], ["c"]]
    opt2 = optim.SGD([{"params": [_p(1)]}, {"params": [_p(2)]}], lr=0.1)
    opt2.add_param_group({"params": [_p(3)]})
    assert all("param_names" not in g for g in opt2.state_dict()["param_groups"])


def test_torch_refuses_the_same_mix():
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.ones(2))
    q = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(ValueError, match="all optimizer param groups should be with/without "
                                         "names"):
        torch.optim.SGD([{"params": [("a", p)]}, {"params": [q]}], lr=0.1)
