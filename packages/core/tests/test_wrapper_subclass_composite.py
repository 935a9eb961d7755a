"""Composite ops (those that run as other ops) take a __torch_dispatch__ wrapper subclass
next to plain tensors: the wrapper is storage-less but on its real device, so the composite's
device check passes, and two plain tensors on different devices still name the composite."""

from __future__ import annotations

import ember
import numpy as np
import pytest


class Wrapper(ember.Tensor):
    __torch_function__ = ember._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, inner):
        t = ember.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype,
                                                device=inner.device)
        t.elem = inner
        return t

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(a):
            return a.elem if isinstance(a, Wrapper) else a
        out = func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})
        if isinstance(out, tuple):
            items = [Wrapper(o) if isinstance(o, ember.Tensor) else o for o in out]
            return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
        return Wrapper(out) if isinstance(out, ember.Tensor) else out


def test_composite_losses_take_a_wrapper_and_plain_tensors():
    x = ember.randn(4, 5, dtype=ember.float64)
    target = ember.tensor([0, 4, 2, 1])
    got = ember.nn.functional.cross_entropy(Wrapper(x), target)
    assert isinstance(got, Wrapper)
    np.testing.assert_allclose(got.elem.numpy(),
                               ember.nn.functional.cross_entropy(x, target).numpy())
    y = ember.randn(4, 5, dtype=ember.float64)
    got = ember.nn.functional.mse_loss(Wrapper(x), y)
    np.testing.assert_allclose(got.elem.numpy(), ember.nn.functional.mse_loss(x, y).numpy())


def test_plain_tensors_on_two_devices_still_name_the_composite():
    with pytest.raises(RuntimeError, match=r"same device.*\(in cross_entropy"):
        ember.nn.functional.cross_entropy(ember.randn(2, 3), ember.tensor([0, 1], device="meta"))
