"""APIs that the PyTorch-style example programs (packages/nn/tests/compat_programs) found
missing or different in ember: torch.cdist, the grad-mode context managers as bare decorators
and on generators, is_inference_mode_enabled, inference_mode(False)."""

from __future__ import annotations

import ember
import numpy as np
import pytest

MODES = ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
         "donot_use_mm_for_euclid_dist"]


@pytest.mark.parametrize("shapes", [((5, 3), (4, 3)), ((2, 30, 3), (7, 3)),
                                    ((2, 1, 6, 4), (3, 5, 4)), ((0, 3), (4, 3))])
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, float("inf")])
@pytest.mark.parametrize("mode", MODES)
def test_cdist_matches_torch(shapes, p, mode):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ea, eb = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    want = torch.cdist(ta, tb, p, compute_mode=mode)
    got = ember.cdist(ea, eb, p, compute_mode=mode)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-4)
    if want.numel():
        w = rng.standard_normal(tuple(want.shape)).astype(np.float32)
        (want * torch.tensor(w)).sum().backward()
        (got * ember.tensor(w)).sum().backward()
        np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_cdist_zero_distance_has_zero_gradient(mode):
    x = ember.randn(30, 3, dtype=ember.float64, requires_grad=True)
    d = ember.cdist(x, x.detach(), compute_mode=mode)
    assert d.diagonal().abs().max().item() < 1e-6
    d.sum().backward()
    assert x.grad.isfinite().all().item()


def test_cdist_bad_input():
    with pytest.raises(RuntimeError, match="at least 2D tensors, X1 got: 1D"):
        ember.cdist(ember.ones(3), ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="same number of columns. X1: 3 X2: 4"):
        ember.cdist(ember.ones(2, 3), ember.ones(2, 4))
    with pytest.raises(RuntimeError, match="floating-point dtypes, X1 got: ember.int64"):
        ember.cdist(ember.ones(2, 3, dtype=ember.int64), ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="non-negative p values"):
        ember.cdist(ember.ones(2, 3), ember.ones(2, 3), p=-1.0)
    with pytest.raises(ValueError, match="possible modes"):
        ember.cdist(ember.ones(2, 3), ember.ones(2, 3), compute_mode="fast")


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_grad_modes_decorate_bare_and_called(lib_name):
    lib = ember if lib_name == "ember" else pytest.importorskip("torch")
    x = lib.ones(2, requires_grad=True)

    @lib.no_grad
    def f(x):
        return x * 2

    @lib.inference_mode
    def g(x):
        return x * 2, lib.is_inference_mode_enabled()

    @lib.enable_grad
    def h(x):
        return x * 2

    @lib.set_grad_enabled(False)
    def k(x):
        return x * 2

    assert lib.is_grad_enabled()  # decorating with set_grad_enabled changed nothing outside
    assert not f(x).requires_grad and not k(x).requires_grad
    y, inference = g(x)
    assert not y.requires_grad and inference and not lib.is_inference_mode_enabled()
    with lib.no_grad():
        assert h(x).requires_grad
    assert lib.is_grad_enabled()


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_inference_mode_nesting(lib_name):
    lib = ember if lib_name == "ember" else pytest.importorskip("torch")
    assert not lib.is_inference_mode_enabled()
    with lib.inference_mode():
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
        with lib.inference_mode(False):  # back to grad mode, as in PyTorch
            assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
        with lib.enable_grad():
            assert lib.is_inference_mode_enabled() and lib.is_grad_enabled()
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
    assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
    assert isinstance(lib.inference_mode(False).clone(), lib.inference_mode)


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_grad_mode_decorates_generators(lib_name):
    lib = ember if lib_name == "ember" else pytest.importorskip("torch")

    @lib.no_grad()
    def gen():
        sent = yield lib.is_grad_enabled()
        yield sent, lib.is_grad_enabled()

    it = gen()
    assert next(it) is False and lib.is_grad_enabled()  # the mode holds inside the generator only
    assert it.send(5) == (5, False)
    with pytest.raises(StopIteration):
        next(it)
    assert lib.is_grad_enabled()


def test_grad_mode_refuses_to_decorate_a_class():
    with pytest.raises(RuntimeError, match="decorate its methods"):
        ember.no_grad()(type("C", (), {}))
