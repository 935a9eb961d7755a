"""Bad input to backward() and autograd.grad(): each gives a clear error saying what was expected
(the wording follows PyTorch's where it has one)."""

import ember
import pytest
from core_helpers import torch


def test_backward_on_a_non_scalar_without_gradient():
    y = ember.ones(2, 3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"grad can be implicitly created only for scalar outputs \(got an output of shape \(2, 3\)\)"):
        y.backward()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        ember.autograd.grad(y, y)


def test_output_that_does_not_require_grad():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        ember.ones(2).sum().backward()
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="element 1 of tensors does not require grad"):
        ember.autograd.grad([x.sum(), ember.ones(1).sum()], x)


def test_input_that_does_not_require_grad():
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"One of the differentiated Tensors \(input 0\) does not require grad"):
        ember.autograd.grad((x * 2).sum(), x.detach())


def test_unused_input_needs_allow_unused():
    x = ember.ones(2, requires_grad=True)
    y = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"input 1\) appears to not have been used in the graph. Set allow_unused=True"):
        ember.autograd.grad((x * 2).sum(), [x, y])
    gx, gy = ember.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)
    assert gx.tolist() == [2.0, 2.0] and gy is None
    _, gy = ember.autograd.grad((x * 2).sum(), [x, y], materialize_grads=True)
    assert gy.tolist() == [0.0, 0.0]


def test_gradient_of_the_wrong_shape():
    y = ember.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of \(3,\) and output\[0\] has a shape of \(2,\)"):
        y.backward(ember.ones(3))
    with pytest.raises(RuntimeError, match="grad: got 1 outputs but 2 grad_outputs"):
        ember.autograd.grad([y], [y], [ember.ones(2), ember.ones(2)])


def test_gradient_dtype():
    x = ember.ones(2, requires_grad=True)
    # A non-floating gradient is refused (PyTorch would cast it silently).
    with pytest.raises(TypeError, match=r"backward: grad_output\[0\] must be a floating point tensor like output\[0\] \(float32\), got bool"):
        (x * 2).backward(ember.ones(2, dtype=ember.bool))
    # Another floating dtype is cast to the output's, as in PyTorch.
    (x * 2).backward(ember.ones(2, dtype=ember.float64))
    assert x.grad.dtype == ember.float32 and x.grad.tolist() == [2.0, 2.0]
    if torch is not None:
        t = torch.ones(2, requires_grad=True)
        (t * 2).backward(torch.ones(2, dtype=torch.float64))
        assert t.grad.dtype == torch.float32


def test_assigning_a_wrong_grad():
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"assigned grad has data of a different size \(\(3,\) vs \(2,\)\)"):
        x.grad = ember.ones(3)
    with pytest.raises(RuntimeError, match="assign a gradient with dtype 'float64' to a tensor "
                                           "with grad_dtype 'float32'"):
        x.grad = ember.ones(2, dtype=ember.float64)


@pytest.mark.parametrize("value", [None, 1, "no", 0.0])
def test_requires_grad_takes_a_bool_only(value):
    x = ember.ones(2)
    with pytest.raises(TypeError, match=r"requires_grad_\(\): argument 'requires_grad' "
                                        r"\(position 1\) must be bool, not "):
        x.requires_grad_(value)
    assert not x.requires_grad  # None used to be taken as False, 1 as True
    assert x.requires_grad_().requires_grad and not x.requires_grad_(False).requires_grad
