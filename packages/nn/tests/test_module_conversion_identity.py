"""Module conversions (``.double()``, ``.to()``, ``.half()``) keep each Parameter object and
its ``.grad`` object, as PyTorch does, so an optimizer made before the conversion still steps
the module's parameters; ``ember.__future__`` switches to new objects or to
``ember.utils.swap_tensors``, which is tested here too."""

from __future__ import annotations

import weakref

import ember
import numpy as np
import pytest
from ember import nn


@pytest.fixture
def future_flags():
    """Restores ember.__future__'s switches after a test."""
    f = ember.__future__
    saved = (f.get_overwrite_module_params_on_conversion(),
             f.get_swap_module_params_on_conversion())
    yield f
    f.set_overwrite_module_params_on_conversion(saved[0])
    f.set_swap_module_params_on_conversion(saved[1])


def _train_then_convert(lib, flags=None):
    """A Linear trained one step in float32, converted to float64, stepped again by the
    optimizer made before the conversion; returns (weight identity kept, grad identity kept,
    final weight, weight dtype)."""
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    with lib.no_grad():
        m.weight.copy_(lib.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
        m.bias.copy_(lib.tensor([0.05, -0.05]))
    opt = lib.optim.SGD(m.parameters(), lr=0.5)
    x = lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
    m(x).pow(2).sum().backward()
    w, g = m.weight, m.weight.grad
    if flags:
        flags(lib)
    m.double()
    kept_w, kept_g = m.weight is w, m.weight.grad is g
    opt.step()
    opt.zero_grad()
    m(x.double()).pow(2).sum().backward()
    opt.step()
    return kept_w, kept_g, m.weight.detach().numpy().copy(), str(m.weight.dtype).split(".")[-1]


def test_double_keeps_parameter_and_grad_objects_and_the_optimizer_steps_them():
    kept_w, kept_g, w, dt = _train_then_convert(ember)
    assert kept_w and kept_g and dt == "float64"
    torch = pytest.importorskip("torch")
    t_kept_w, t_kept_g, tw, tdt = _train_then_convert(torch)
    assert (t_kept_w, t_kept_g, tdt) == (True, True, "float64")
    np.testing.assert_allclose(w, tw, rtol=1e-6)


def test_overwrite_flag_makes_new_parameters(future_flags):
    future_flags.set_overwrite_module_params_on_conversion(True)
    m = nn.Linear(2, 2)
    w = m.weight
    m(ember.ones(1, 2)).sum().backward()
    m.double()
    assert m.weight is not w and isinstance(m.weight, nn.Parameter)
    assert m.weight.dtype == ember.float64 and m.weight.grad.dtype == ember.float64
    assert w.dtype == ember.float32  # the old object is left as it was
    np.testing.assert_allclose(m.weight.detach().numpy(), w.detach().numpy(), rtol=1e-7)


def test_swap_flag_keeps_objects_and_converts_them(future_flags):
    future_flags.set_swap_module_params_on_conversion(True)
    m = nn.Linear(2, 3)
    w, before = m.weight, m.weight.detach().numpy().copy()
    m(ember.ones(1, 2)).sum().backward()
    g = m.weight.grad
    m.double()
    assert m.weight is w and type(w) is nn.Parameter and w.requires_grad
    assert w.dtype == ember.float64 and w.is_leaf
    np.testing.assert_allclose(w.detach().numpy(), before, rtol=1e-7)
    assert m.weight.grad is g and g.dtype == ember.float64
    np.testing.assert_allclose(g.numpy(), np.ones((3, 1)) * np.ones((1, 2)))


def test_shared_parameters_stay_shared_and_buffers_convert():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.BatchNorm1d(2), lin)
    seq.double()
    assert seq[0].weight is seq[2].weight and seq[0].weight.dtype == ember.float64
    assert seq[1].running_mean.dtype == ember.float64
    assert seq[1].num_batches_tracked.dtype == ember.int64  # integers are not converted


def test_future_module_attribute_and_defaults():
    assert ember.__future__.get_overwrite_module_params_on_conversion() is False
    assert ember.__future__.get_swap_module_params_on_conversion() is False
    from ember.__future__ import set_swap_module_params_on_conversion  # noqa: F401


def test_swap_tensors_swaps_data_class_and_attributes():
    a = ember.tensor([1.0, 2.0])
    b = nn.Parameter(ember.tensor([[3.0], [4.0], [5.0]], dtype=ember.float64))
    a.tag = "a"
    b.tag = "b"
    ember.utils.swap_tensors(a, b)
    assert type(a) is nn.Parameter and type(b) is ember.Tensor
    assert a.tag == "b" and b.tag == "a"
    assert a.shape == (3, 1) and a.dtype == ember.float64 and a.requires_grad
    assert b.tolist() == [1.0, 2.0] and not b.requires_grad
    # the swapped autograd state works: a is a leaf that accumulates
    (a * 2).sum().backward()
    assert a.grad.tolist() == [[2.0], [2.0], [2.0]]


def test_swap_tensors_with_torch():
    torch = pytest.importorskip("torch")
    for lib in (ember, torch):
        a, b = lib.zeros(2), lib.ones(3, dtype=lib.float64)
        lib.utils.swap_tensors(a, b)
        assert a.tolist() == [1.0, 1.0, 1.0] and b.tolist() == [0.0, 0.0]
        assert str(a.dtype).endswith("float64")


def test_swap_tensors_refusals():
    a, b = ember.zeros(2), ember.ones(2)
    r = weakref.ref(a)
    with pytest.raises(RuntimeError, match="weakref"):
        ember.utils.swap_tensors(a, b)
    del r
    v = a[:1]  # a view keeps a referenced: swapping would change what it sees
    with pytest.raises(RuntimeError, match="Expected single reference to a's"):
        ember.utils.swap_tensors(a, b)
    del v
    x = ember.ones(2, requires_grad=True)
    y = (x * x).sum()  # the graph saved x
    with pytest.raises(RuntimeError, match="single reference"):
        ember.utils.swap_tensors(x, b)
    del y
    ember.utils.swap_tensors(x, b)
    assert b.requires_grad and not x.requires_grad
    with pytest.raises(TypeError, match="expected t2 to be a tensor"):
        ember.utils.swap_tensors(a, [1.0])
    assert a.tolist() == [0.0, 0.0]  # nothing changed after a refusal


def _load_with_swap(lib):
    lib.__future__.set_swap_module_params_on_conversion(True)
    try:
        m = lib.nn.Linear(2, 2)
        w = m.weight
        sd = {"weight": lib.tensor([[1.0, 2.0], [3.0, 4.0]]), "bias": lib.tensor([0.5, -0.5])}
        m.load_state_dict(sd)
        kept = m.weight is w and type(m.weight).__name__ == "Parameter" and w.requires_grad
        m2 = lib.nn.Linear(2, 2)
        m2.load_state_dict(sd, assign=True)
        return kept, m.weight.tolist(), m.bias.tolist(), m2.weight.tolist(), sd["bias"].tolist()
    finally:
        lib.__future__.set_swap_module_params_on_conversion(False)


def test_load_state_dict_swaps_under_the_swap_flag():
    kept, w, b, w2, sd_b = _load_with_swap(ember)
    assert kept and w == [[1.0, 2.0], [3.0, 4.0]] and b == [0.5, -0.5]
    assert w2 == [[1.0, 2.0], [3.0, 4.0]] and sd_b == [0.5, -0.5]
    torch = pytest.importorskip("torch")
    assert _load_with_swap(torch) == (kept, w, b, w2, sd_b)
