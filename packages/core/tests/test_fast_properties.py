"""The hot Tensor properties (shape, ndim, dtype, device, requires_grad, is_leaf, grad_fn,
is_cuda, is_cpu) are C getset descriptors that check __torch_function__ themselves: their
values, their overrides and modes, nn.Parameter, and the requires_grad setter."""

import ember
import pytest
from ember import overrides

FAST = ["shape", "ndim", "dtype", "device", "requires_grad", "is_leaf", "grad_fn", "is_cuda",
        "is_cpu"]


def _getter(name):
    """The overridable func of a property: the one listed for ember.Tensor named
    Tensor.<name>.__get__."""
    for f in overrides.get_overridable_functions()[ember.Tensor]:
        if f.__qualname__ == f"Tensor.{name}.__get__":
            return f
    raise AssertionError(f"no overridable getter for Tensor.{name}")


@pytest.mark.parametrize("name", FAST)
def test_is_a_getset_descriptor(name):
    descr = vars(ember.Tensor)[name]
    assert type(descr).__name__ == "getset_descriptor"
    assert not isinstance(descr, property)


def test_values_match_torch():
    torch = pytest.importorskip("torch")
    for fw in (ember, torch):
        a = fw.ones(2, 3, requires_grad=True)
        b = (a * 2).to(fw.float64)
        got = [tuple(a.shape), a.ndim, str(a.dtype).split(".")[-1], str(a.device),
               a.requires_grad, a.is_leaf, a.grad_fn, a.is_cuda, a.is_cpu,
               tuple(b.shape), b.ndim, str(b.dtype).split(".")[-1], b.requires_grad, b.is_leaf,
               b.grad_fn is not None, fw.ones(()).shape, fw.zeros(0, 4).shape]
        if fw is ember:
            ember_got = got
        else:
            assert ember_got == got
    assert type(ember.ones(2).shape) is ember.Size
    assert ember.ones(2).device == ember.device("cpu")


def test_meta_device_and_dtypes():
    x = ember.empty(4, 5, device="meta", dtype=ember.int32)
    assert x.shape == (4, 5) and x.dtype is ember.int32
    assert x.device == ember.device("meta") and not x.is_cpu and not x.is_cuda
    assert ember.ones(1).device is not None and ember.ones(1).device.type == "cpu"


class Logged(ember.Tensor):
    log: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.log.append(func)
        return super().__torch_function__(func, types, args, kwargs)


@pytest.mark.parametrize("name", FAST)
def test_subclass_override_sees_the_listed_getter(name):
    x = ember.ones(2, 3).as_subclass(Logged)
    Logged.log.clear()
    value = getattr(x, name)
    assert len(Logged.log) == 1
    func = Logged.log[0]
    assert func is _getter(name)
    assert func.__name__ == "__get__"
    assert overrides.is_tensor_method_or_property(func)
    assert value == getattr(ember.ones(2, 3), name)


def test_subclass_override_can_replace_the_value():
    class Fixed(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is _getter("shape"):
                return (7, 7)
            return super().__torch_function__(func, types, args, kwargs)

    x = ember.ones(2).as_subclass(Fixed)
    assert x.shape == (7, 7)
    assert x.ndim == 1
    with ember._C.DisableTorchFunctionSubclass():
        assert x.shape == (2,)


def test_mode_sees_property_reads():
    class Count(overrides.TorchFunctionMode):
        def __init__(self):
            self.names = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__qualname__)
            return func(*args, **(kwargs or {}))

    x = ember.ones(2, 3)
    with Count() as mode:
        shape, dtype, rg = x.shape, x.dtype, x.requires_grad
    assert mode.names == ["Tensor.shape.__get__", "Tensor.dtype.__get__",
                          "Tensor.requires_grad.__get__"]
    assert (shape, dtype, rg) == ((2, 3), ember.float32, False)
    assert x.shape == (2, 3)  # after the block: direct again


def test_parameter_reads_and_requires_grad_setter():
    p = ember.nn.Parameter(ember.ones(2, 3))
    assert type(p).__name__ == "Parameter"
    assert p.shape == (2, 3) and p.ndim == 2 and p.dtype is ember.float32
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    p.requires_grad = False
    assert not p.requires_grad
    p.requires_grad = True
    (p * 2).sum().backward()
    assert p.grad.tolist() == [[2.0] * 3] * 2


def test_requires_grad_setter_errors():
    x = ember.ones(2)
    x.requires_grad = True
    assert x.requires_grad and x.is_leaf
    y = x * 2
    assert not y.is_leaf and y.grad_fn is not None
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False
    with pytest.raises(TypeError, match="requires_grad must be a bool"):
        x.requires_grad = "yes"
    with pytest.raises(AttributeError, match="requires_grad"):
        del x.requires_grad
    with pytest.raises(AttributeError, match="shape"):
        x.shape = (1, 2)
    with pytest.raises(AttributeError, match="is_leaf"):
        x.is_leaf = True


def test_uninitialized_tensor_raises():
    from ember._legacy import _tensor_new  # pybind11's allocation (Tensor.__new__ builds one)

    t = _tensor_new(ember.Tensor)
    with pytest.raises((RuntimeError, TypeError)):
        t.shape  # noqa: B018
