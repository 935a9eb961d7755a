"""Tensor hooks and Python's cycle collector: a hook whose closure refers to its own tensor
forms a cycle through C++ (tensor -> hooks -> closure -> tensor) that gc must be able to free,
while hooks of tensors that a live graph still uses must survive a collection."""

from __future__ import annotations

import gc
import weakref

import ember
import pytest


def _collected(make) -> bool:
    ref = make()
    gc.collect()
    return ref() is None


def test_leaf_hook_referring_to_its_tensor_is_collected():
    def make():
        x = ember.randn(3, requires_grad=True)
        x.register_hook(lambda g: g * x.detach())
        return weakref.ref(x)

    assert _collected(make)


def test_post_accumulate_hook_cycle_is_collected():
    def make():
        x = ember.randn(3, requires_grad=True)
        x.register_post_accumulate_grad_hook(lambda t: x.grad)
        return weakref.ref(x)

    assert _collected(make)


def test_non_leaf_hook_cycle_is_collected():
    def make():
        x = ember.randn(3, requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: g + y.detach())
        return weakref.ref(y)

    assert _collected(make)


def test_parameter_subclass_hook_cycle_is_collected():
    nn = pytest.importorskip("ember.nn")

    def make():
        p = nn.Parameter(ember.randn(2, 2))
        p.register_hook(lambda g: g + p.detach())
        return weakref.ref(p)

    assert _collected(make)


def test_hooks_in_a_live_graph_survive_collection():
    seen = []

    def build():
        x = ember.randn(3, requires_grad=True)
        y = x * 2

        def hook(g):
            seen.append(tuple(y.shape))  # the closure refers to y, which the graph also saves
            return g * 10

        y.register_hook(hook)
        return x, (y * y).sum()

    x, z = build()  # only the graph (and the closure) keep y now
    gc.collect()
    z.backward()
    assert seen == [(3,)]
    assert ember.allclose(x.grad, 2 * 10 * 2 * (x.detach() * 2))


def test_leaf_hook_survives_while_tensor_is_reachable():
    x = ember.randn(3, requires_grad=True)
    x.register_hook(lambda g: g * 3 + 0 * x.detach())
    gc.collect()
    (x * 1).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_collection_during_backward_from_a_hook():
    # gc running inside a hook (with the engine mid-backward) must neither crash nor drop hooks
    x = ember.randn(4, requires_grad=True)
    y = x.exp()

    def hook(g):
        gc.collect()
        return g + 1

    y.register_hook(hook)
    y.sum().backward()
    assert ember.allclose(x.grad, (1 + 1) * x.detach().exp())


def test_collection_while_a_new_subclass_instance_is_laid_out():
    # The first instance of a new Tensor subclass makes pybind11 create a weakref inside
    # allocate_layout; a collection at that moment sees an object with no holder table yet.
    old = gc.get_threshold()
    try:
        for _ in range(10):

            class Sub(ember.Tensor):
                pass

            keep = [ember.ones(2) for _ in range(3)]
            gc.set_threshold(1)
            x = Sub(ember.ones(2))
            gc.set_threshold(*old)
            assert type(x) is Sub and x.tolist() == [1.0, 1.0] and len(keep) == 3
    finally:
        gc.set_threshold(*old)
