"""Hostile input, round 7 (nn part): an optimizer state dict from another optimizer or without a
hyperparameter, and load_state_dict into a module on the meta device.

``SGD.load_state_dict(adam.state_dict())`` loaded, and the next ``step()`` failed with a bare
``KeyError: 'momentum'`` (PyTorch does the same; a group without ``betas`` likewise). The load
now refuses a parameter group that lacks a hyperparameter the optimizer needs (a number, pair or
Tensor), naming the keys, and says the dict looks like another optimizer's when it holds keys
this one does not take; nothing is changed. Options (bools or None, such as ``foreach`` or
``maximize``) an older checkpoint lacks keep the optimizer's value, as PyTorch's
``__setstate__`` fills them.

``load_state_dict`` into a module made on the meta device (without ``assign=True``) copies into
tensors without memory: a no-op, and the checkpoint's values were dropped without a word.
PyTorch warns ("copying from a non-meta parameter in the checkpoint to a meta parameter in the
current model, which is a no-op"); so does ember now, with the same text.
"""

from __future__ import annotations

import copy
import warnings

import ember
import pytest
from ember import nn, optim

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _trained(lib, cls, **kw):
    lib.manual_seed(0)
    m = lib.nn.Linear(2, 2)
    o = getattr(lib.optim, cls)(m.parameters(), lr=0.1, **kw)
    m(lib.ones(1, 2)).sum().backward()
    o.step()
    return m, o


@pytest.mark.parametrize("dst, src, lacking, extra", [
    ("SGD", "Adam", "['dampening', 'momentum']", "'betas'"),
    ("Adam", "SGD", "['betas', 'eps']", "'momentum'"),
    ("RMSprop", "Adagrad", "['alpha', 'momentum']", "'lr_decay'"),
])
def test_a_state_dict_of_another_optimizer_is_refused_at_load(dst, src, lacking, extra):
    _, so = _trained(ember, src)
    m, o = _trained(ember, dst, **({"momentum": 0.9} if dst == "SGD" else {}))
    before = copy.deepcopy(o.state_dict())
    with pytest.raises(ValueError) as ei:
        o.load_state_dict(so.state_dict())
    assert (f"{dst}.load_state_dict: parameter group 0 of the state dict lacks the "
            f"hyperparameter(s) {lacking} that {dst} needs") in str(ei.value)
    if extra is not None:
        assert extra in str(ei.value) and "is it from another optimizer?" in str(ei.value)
    after = o.state_dict()  # nothing changed
    assert after["param_groups"] == before["param_groups"]
    assert sorted(after["state"][0]) == sorted(before["state"][0])
    m(ember.ones(1, 2)).sum().backward()
    o.step()  # and it still steps


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_pytorch_fails_only_at_step_with_a_key_error():
    _, so = _trained(torch, "Adam")
    m, o = _trained(torch, "SGD", momentum=0.9)
    o.load_state_dict(so.state_dict())
    m(torch.ones(1, 2)).sum().backward()
    with pytest.raises(KeyError, match="momentum"):
        o.step()


def test_a_group_without_a_hyperparameter_is_refused():
    _, o = _trained(ember, "Adam")
    sd = copy.deepcopy(o.state_dict())
    del sd["param_groups"][0]["betas"]
    with pytest.raises(ValueError, match=r"lacks the hyperparameter\(s\) \['betas'\] that Adam "
                                         r"needs$"):
        o.load_state_dict(sd)


def test_an_older_state_dict_without_options_still_loads():
    m, o = _trained(ember, "Adam", amsgrad=True)
    sd = copy.deepcopy(o.state_dict())
    for k in ("foreach", "maximize", "capturable", "differentiable", "fused",
              "decoupled_weight_decay"):
        sd["param_groups"][0].pop(k, None)
    m2, o2 = _trained(ember, "Adam", amsgrad=True)
    o2.load_state_dict(sd)
    g = o2.param_groups[0]
    assert g["maximize"] is False and g["amsgrad"] is True and g["betas"] == (0.9, 0.999)
    m2(ember.ones(1, 2)).sum().backward()
    o2.step()
    assert int(o2.state[m2.weight]["step"]) == 2


def test_an_equal_optimizer_state_dict_still_loads_and_resumes_exactly():
    m, o = _trained(ember, "SGD", momentum=0.9)
    m2 = copy.deepcopy(m)
    o2 = optim.SGD(m2.parameters(), lr=0.5, momentum=0.1)
    o2.load_state_dict(o.state_dict())
    assert o2.param_groups[0]["lr"] == 0.1 and o2.param_groups[0]["momentum"] == 0.9
    for mod, opt in ((m, o), (m2, o2)):
        opt.zero_grad()
        mod(ember.ones(1, 2)).sum().backward()
        opt.step()
    assert m.weight.tolist() == m2.weight.tolist()


# ---- load_state_dict into meta ---------------------------------------------------------------
def test_load_into_a_meta_module_warns_that_nothing_is_kept():
    src = nn.Linear(2, 3)
    m = nn.Linear(2, 3, device="meta")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m.load_state_dict(src.state_dict())
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 2, msgs
    for key, msg in zip(("weight", "bias"), msgs):
        assert msg.startswith(f"for {key}: copying from a non-meta parameter in the checkpoint to "
                              "a meta parameter in the current model, which is a no-op. (Did you "
                              "mean to pass `assign=True`")
    assert m.weight.device.type == "meta"


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_pytorch_warns_the_same():
    m = torch.nn.Linear(2, 3, device="meta")
    with pytest.warns(UserWarning, match="copying from a non-meta parameter in the checkpoint "
                                         "to a meta parameter"):
        m.load_state_dict(torch.nn.Linear(2, 3).state_dict())


def test_assign_or_meta_sources_do_not_warn():
    src = nn.Linear(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = nn.Linear(2, 3, device="meta")
        m.load_state_dict(src.state_dict(), assign=True)
        assert m.weight.device.type == "cpu" and m.weight.tolist() == src.weight.tolist()
        m2 = nn.Linear(2, 3, device="meta")
        m2.load_state_dict(nn.Linear(2, 3, device="meta").state_dict())  # meta into meta
        nn.Linear(2, 3).load_state_dict(src.state_dict())  # an ordinary copy


def test_a_state_dict_saved_before_a_scheduler_still_loads():
    # a scheduler adds initial_lr to the optimizer's groups; a state dict saved before it was
    # made has none, and that is not a missing hyperparameter
    m, o = _trained(ember, "SGD", momentum=0.9)
    sd = copy.deepcopy(o.state_dict())
    optim.lr_scheduler.StepLR(o, 1)
    assert "initial_lr" in o.param_groups[0]
    o.load_state_dict(sd)
    assert o.param_groups[0]["lr"] == 0.1
