"""Optimizers take a gradient kept in another dtype on purpose (``Tensor.grad_dtype``, e.g.
FSDP's ``keep_low_precision_grads``): the step equals the one with that gradient upcast; a
gradient of a foreign dtype that grad_dtype does not allow is still refused."""

from __future__ import annotations

import ember
import pytest


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW"])
def test_low_precision_gradient_steps_like_its_upcast(opt):
    g = ember.tensor([0.5, -1.25, 2.0]).to(ember.bfloat16)
    p = ember.nn.Parameter(ember.ones(3))
    p.grad_dtype = None
    p.grad = g.clone()
    ref = ember.nn.Parameter(ember.ones(3))
    ref.grad = g.float()
    for q in (p, ref):
        getattr(ember.optim, opt)([q], lr=0.1).step()
    assert p.grad.dtype == ember.bfloat16 and p.tolist() == ref.tolist()


def test_a_gradient_grad_dtype_does_not_allow_is_refused():
    p = ember.nn.Parameter(ember.ones(2))
    p.grad = ember.ones(2)
    p.data = p.data.double()  # the parameter changed dtype under its float32 gradient
    assert p.grad_dtype == ember.float64 and p.grad.dtype == ember.float32
    with pytest.raises(RuntimeError, match=r"SGD: gradient of dtype ember.float32 and shape "
                                           r"\(2,\) does not match its parameter"):
        ember.optim.SGD([p], lr=0.1).step()
