"""Hostile input, round 8 (core part): function transforms, saved-tensor hooks, seed gradients
and distribution sample shapes.

``vmap`` runs its function once per sample (ember has no batching rules), and three misuses
gave silently wrong results:

* ``randomness="same"`` drew different numbers for every sample (the flag was only checked for
  its spelling); each sample now replays the default generator's state, so all draw the same.
* ``randomness="error"`` (the default) let random ops through, each sample drawing anew; as
  PyTorch, a function that draws from the generator is now refused with PyTorch's words.
* a function writing into state shared between the samples (``lambda a: y.add_(a)`` with a
  captured ``y``) returned the same tensor for every sample, so every row of the result was
  the last sample's value; PyTorch refuses the in-place write of a batched value into an
  unbatched tensor. ember now refuses results that a later sample wrote over (samples writing
  their own slices of a mapped input still work).

``functional_call`` with different tensors for two tied names (``m.w2 = m.weight``) silently
used one of them; it is now PyTorch's ValueError. ``grad(f, argnums=0.0)`` said "'float' object
is not iterable"; it is now a RuntimeError naming argnums, as PyTorch.

A ``saved_tensors_hooks`` unpack hook returning a tensor of another shape than the one saved
went into backward as the saved value: one that broadcasts (``ember.full((1,), 5.)`` for a
saved ``(2,)``) gave a silently wrong gradient (PyTorch too). It is now a RuntimeError naming the
hook and both shapes.

``backward(gradient)`` / ``autograd.grad(grad_outputs=)`` with a gradient on another device (a
meta tensor for a CPU output) failed deep in a copy ("Cannot copy out of meta tensor", a
NotImplementedError); it is now PyTorch's RuntimeError "invalid gradient at index 0 - expected
device cpu but got meta".

``Distribution.sample((-1,))`` failed inside ``expand`` with a message about a leading
dimension; it is now a RuntimeError naming the distribution and the sample shape, and
``sample(3)`` (an int, not a shape) a TypeError that says to pass ``(3,)``. ``Categorical``
(so ``OneHotCategorical``, ``Multinomial``, ``MixtureSameFamily``) could not draw an empty sample
shape such as ``(0,)`` ("shape '[0]' is invalid for input of size 1"; PyTorch fails too) nor
``Multinomial(total_count=0)``; both now give empty or all-zero results.

The rest of round 8: packages/nn/tests/test_nn_hostile_round8.py.
"""

from __future__ import annotations

import ember
import pytest
from ember import nn
from ember.func import functional_call, grad, vmap

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch for comparison")


# ---- vmap randomness -------------------------------------------------------------------------
def test_vmap_randomness_same_draws_the_same_numbers_for_every_sample():
    ember.manual_seed(0)
    out = vmap(lambda a: a * 0 + ember.rand(()), randomness="same")(ember.zeros(4))
    assert out.shape == (4,)
    assert len(set(out.tolist())) == 1
    # the one draw is the generator's next number, as outside vmap
    ember.manual_seed(0)
    expected = ember.rand(()).item()
    assert out[0].item() == expected
    # and the generator moved on as for one draw
    ember.manual_seed(0)
    vmap(lambda a: a + ember.rand(()), randomness="same")(ember.zeros(3))
    after = ember.rand(()).item()
    ember.manual_seed(0)
    ember.rand(())
    assert after == ember.rand(()).item()


def test_vmap_randomness_different_still_draws_per_sample():
    ember.manual_seed(1)
    out = vmap(lambda a: a + ember.rand(()), randomness="different")(ember.zeros(4))
    assert len(set(out.tolist())) == 4


def test_vmap_randomness_error_refuses_random_ops():
    with pytest.raises(RuntimeError, match="random operation while in randomness error mode"):
        vmap(lambda a: a + ember.rand(()))(ember.zeros(3))
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: nn.functional.dropout(a, 0.5))(ember.ones(3, 2))
    # no random op: the default works, and dropout in eval mode draws nothing
    out = vmap(lambda a: nn.functional.dropout(a, 0.5, training=False) * 2)(ember.ones(3, 2))
    assert out.tolist() == [[2.0, 2.0]] * 3


@needs_torch
def test_torch_vmap_randomness_matches():
    with pytest.raises(RuntimeError, match="randomness error mode"):
        torch.func.vmap(lambda a: a + torch.rand(()))(torch.zeros(3))
    out = torch.func.vmap(lambda a: a + torch.rand(()), randomness="same")(torch.zeros(3))
    assert len(set(out.tolist())) == 1


# ---- vmap and state shared between samples ---------------------------------------------------
def test_vmap_refuses_a_result_a_later_sample_wrote_over():
    y = ember.zeros(())
    with pytest.raises(RuntimeError, match="modified in place by a later sample"):
        vmap(lambda a: y.add_(a))(ember.tensor([1.0, 2.0, 3.0]))


def test_vmap_samples_writing_their_own_slices_still_work():
    x = ember.tensor([1.0, 2.0, 3.0])
    assert vmap(lambda a: a.mul_(2))(x).tolist() == [2.0, 4.0, 6.0]
    assert x.tolist() == [2.0, 4.0, 6.0]
    c = ember.tensor(5.0)  # a captured tensor returned unchanged is fine
    assert vmap(lambda a: c)(ember.zeros(2)).tolist() == [5.0, 5.0]
    assert vmap(lambda a: a * a.item())(ember.tensor([1.0, 2.0, 3.0])).tolist() == [1.0, 4.0, 9.0]


@needs_torch
def test_torch_vmap_refuses_the_shared_write():
    y = torch.zeros(())
    with pytest.raises(RuntimeError):
        torch.func.vmap(lambda a: y.add_(a))(torch.tensor([1.0, 2.0, 3.0]))


# ---- functional_call and grad arguments ------------------------------------------------------
def test_functional_call_refuses_two_values_for_tied_names():
    m = nn.Linear(2, 2)
    m.w2 = m.weight
    with pytest.raises(ValueError, match=r"multiple values for keys \['w2', 'weight'\].*tied"):
        functional_call(m, {"weight": ember.zeros(2, 2), "w2": ember.ones(2, 2)},
                        (ember.ones(1, 2),))
    # one tensor for both, or tie_weights=False, still run
    w = ember.zeros(2, 2)
    out = functional_call(m, {"weight": w, "w2": w, "bias": ember.ones(2)}, (ember.ones(1, 2),))
    assert out.tolist() == [[1.0, 1.0]]
    out = functional_call(m, {"weight": w, "w2": ember.ones(2, 2), "bias": ember.zeros(2)},
                          (ember.ones(1, 2),), tie_weights=False)
    assert out.tolist() == [[0.0, 0.0]]


@needs_torch
def test_torch_functional_call_refuses_the_same():
    m = torch.nn.Linear(2, 2)
    m.w2 = m.weight
    with pytest.raises(ValueError, match="tied"):
        torch.func.functional_call(m, {"weight": torch.zeros(2, 2), "w2": torch.ones(2, 2)},
                                   (torch.ones(1, 2),))


def test_grad_argnums_of_the_wrong_type_is_named():
    with pytest.raises(RuntimeError, match="argnums must be int or Tuple"):
        grad(lambda x: x.sum(), argnums=0.0)(ember.ones(3))
    assert grad(lambda x: (x * x).sum(), argnums=[0])(ember.tensor([1.0, 2.0]))[0].tolist() == \
        [2.0, 4.0]
    if torch is not None:
        with pytest.raises(RuntimeError, match="argnums must be int"):
            torch.func.grad(lambda x: x.sum(), argnums=0.0)(torch.ones(3))


# ---- saved-tensor hooks and seed gradients ---------------------------------------------------
def test_an_unpack_hook_of_another_shape_is_refused():
    with ember.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: ember.full((1,), 5.0)):
        x = ember.ones(2, requires_grad=True)
        y = (x * x).sum()
    with pytest.raises(RuntimeError, match=r"unpack_hook '<lambda>'.*shape \(1,\).*shape \(2,\)"):
        y.backward()


def test_unpack_hooks_of_the_right_shape_still_work():
    store = []
    with ember.autograd.graph.saved_tensors_hooks(lambda t: store.append(t) or len(store) - 1,
                                                  lambda i: store[i].double().float()):
        x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
        y = (x ** 3).sum()
    y.backward()
    assert x.grad.tolist() == [3.0, 12.0]
    with ember.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: 3):
        x = ember.ones(2, requires_grad=True)
        y = (x * x).sum()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        y.backward()


def test_a_seed_gradient_on_another_device_is_refused():
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="invalid gradient at index 0 - expected device cpu "
                                           "but got meta"):
        (x * 2).backward(ember.ones(2, device="meta"))
    with pytest.raises(RuntimeError, match="expected device cpu but got meta"):
        ember.autograd.grad(x * 2, x, ember.ones(2, device="meta"))
    assert x.grad is None
    (x * 3).backward(ember.ones(2))
    assert x.grad.tolist() == [3.0, 3.0]


@needs_torch
def test_torch_refuses_the_seed_on_another_device():
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="expected device cpu but got meta"):
        (x * 2).backward(torch.ones(2, device="meta"))


# ---- distribution sample shapes --------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda D: D.Normal(0.0, 1.0),
    lambda D: D.Bernoulli(0.5),
    lambda D: D.Gamma(1.0, 1.0),
    lambda D: D.Categorical(probs=ember.ones(3)),
    lambda D: D.MultivariateNormal(ember.zeros(2), ember.eye(2)),
])
def test_a_negative_sample_shape_names_the_distribution(make):
    d = make(ember.distributions)
    with pytest.raises(RuntimeError, match=r"sample_shape must hold non-negative sizes, got "
                                           r"\(-1,\)"):
        d.sample((-1,))
    assert tuple(d.sample((2,)).shape) == (2, *d.batch_shape, *d.event_shape)
    assert tuple(d.sample((0,)).shape) == (0, *d.batch_shape, *d.event_shape)


def test_categorical_family_draws_zero_samples():
    # the draw went through multinomial, which cannot draw zero samples: sample((0,)) failed
    # reshaping one draw into shape (0,) (PyTorch: "cannot sample n_sample <= 0 samples")
    D = ember.distributions
    c = D.Categorical(probs=ember.ones(2, 3))
    got = c.sample((0, 4))
    assert tuple(got.shape) == (0, 4, 2) and got.dtype == ember.int64
    assert tuple(D.OneHotCategorical(ember.ones(3)).sample((2, 0)).shape) == (2, 0, 3)
    assert tuple(D.Multinomial(3, ember.ones(3)).sample((0,)).shape) == (0, 3)
    # zero trials: every count is 0
    assert D.Multinomial(0, ember.ones(3)).sample((2,)).tolist() == [[0.0, 0.0, 0.0]] * 2
    ember.manual_seed(0)
    draws = c.sample((1000,))
    assert tuple(draws.shape) == (1000, 2) and 0 <= int(draws.min()) and int(draws.max()) <= 2
    assert set(draws.flatten().tolist()) == {0, 1, 2}


def test_an_int_sample_shape_says_to_pass_a_tuple():
    with pytest.raises(TypeError, match=r"sample_shape must be a tuple of ints such as \(3,\)"):
        ember.distributions.Normal(0.0, 1.0).sample(3)
    if torch is not None:
        with pytest.raises(TypeError):
            torch.distributions.Normal(0.0, 1.0).sample(3)
        with pytest.raises(RuntimeError):
            torch.distributions.Normal(0.0, 1.0).sample((-1,))
