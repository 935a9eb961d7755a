"""ember.nn.grad (convolution gradients for hand-written backward passes) and the deprecated
names old PyTorch scripts still use (nn.init.xavier_uniform, nn.NLLLoss2d), checked against
NumPy-built references and against PyTorch where it is installed."""

from __future__ import annotations

import warnings

import ember
import numpy as np
import pytest
from nn_helpers import torch

CASES = [  # (dims, input shape, weight shape, stride, padding, dilation, groups)
    (1, (2, 4, 11), (6, 2, 3), 2, 1, 1, 2),
    (2, (2, 4, 9, 9), (6, 2, 3, 3), 2, 1, 2, 2),
    (2, (1, 3, 7, 6), (5, 3, 2, 3), (1, 2), (0, 1), 1, 1),
    (3, (1, 2, 5, 6, 5), (4, 1, 3, 3, 2), 1, (1, 0, 1), 1, 2),
]


@pytest.mark.parametrize("dims,xs,ws,stride,padding,dilation,groups", CASES)
def test_conv_grads_match_autograd(dims, xs, ws, stride, padding, dilation, groups):
    rng = np.random.default_rng(dims)
    x = ember.tensor(rng.standard_normal(xs), requires_grad=True)
    w = ember.tensor(rng.standard_normal(ws), requires_grad=True)
    conv = getattr(ember.nn.functional, f"conv{dims}d")
    out = conv(x, w, None, stride, padding, dilation, groups)
    go = ember.tensor(rng.standard_normal(tuple(out.shape)))
    out.backward(go)
    gi = getattr(ember.nn.grad, f"conv{dims}d_input")(x.shape, w, go, stride, padding, dilation,
                                                       groups)
    gw = getattr(ember.nn.grad, f"conv{dims}d_weight")(x, w.shape, go, stride, padding,
                                                        dilation, groups)
    np.testing.assert_allclose(gi.numpy(), x.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw.numpy(), w.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert not gi.requires_grad and not gw.requires_grad
    if torch is not None:
        tgi = getattr(torch.nn.grad, f"conv{dims}d_input")(
            xs, torch.tensor(w.detach().numpy()), torch.tensor(go.numpy()), stride, padding,
            dilation, groups)
        np.testing.assert_allclose(gi.numpy(), tgi.numpy(), rtol=1e-10, atol=1e-10)


def test_functional_grad_is_the_module_and_shape_errors_are_clear():
    assert ember.nn.functional.grad is ember.nn.grad
    with pytest.raises(RuntimeError, match=r"conv2d_input: grad_output has shape \(1, 3, 2, 2\)"):
        ember.nn.grad.conv2d_input((1, 2, 5, 5), ember.randn(3, 2, 3, 3), ember.randn(1, 3, 2, 2))


@pytest.mark.parametrize("old", ["uniform", "normal", "constant", "eye", "dirac", "xavier_uniform",
                                 "xavier_normal", "kaiming_uniform", "kaiming_normal",
                                 "orthogonal", "sparse"])
def test_deprecated_init_names_warn_and_fill(old):
    shape = (3, 4, 3) if old == "dirac" else (6, 4)
    args = {"constant": (0.5,), "sparse": (0.5,)}.get(old, ())
    t = ember.full(shape, 7.0)
    with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor of "
                                           f"`nn.init.{old}_`"):
        out = getattr(ember.nn.init, old)(t, *args)
    assert out is t and getattr(ember.nn.init, old).__name__ == old
    assert not bool((t == 7.0).all())


def test_nllloss2d_is_nllloss_with_a_warning():
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        loss = ember.nn.NLLLoss2d(ignore_index=1)
    assert isinstance(loss, ember.nn.NLLLoss)
    logp = ember.randn(2, 3, 4, 4).log_softmax(1)
    target = ember.randint(0, 3, (2, 4, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = ember.nn.functional.nll_loss(logp, target, ignore_index=1)
    assert loss(logp, target).item() == pytest.approx(expected.item())
