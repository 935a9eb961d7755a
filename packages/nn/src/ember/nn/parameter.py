"""``Parameter``: a tensor that a ``Module`` registers as one of its learnable weights.

A Parameter is a Python subclass of ``ember.Tensor``: an alias of the data (shared memory and
version counter, no autograd history) that is a leaf and requires grad.

>>> import ember
>>> from ember.nn import Parameter
>>> w = Parameter(ember.zeros(2, 3))
>>> isinstance(w, Parameter), isinstance(w, ember.Tensor), w.requires_grad, w.is_leaf
(True, True, True, True)
>>> isinstance(ember.zeros(2), Parameter)
False
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

import ember
from ember import Tensor


def is_parameter(obj: Any) -> bool:
    """Whether ``obj`` is a Parameter."""
    return isinstance(obj, Parameter)


class _NotATensorError(TypeError, AttributeError):
    """Parameter(data) of a non-tensor: a TypeError, and the AttributeError PyTorch raises."""


class _ParameterMeta(type(Tensor)):  # type: ignore[misc]
    """``isinstance(t, Parameter)`` also holds for a custom tensor made a parameter (whose
    type stays its own; ``Parameter(data)`` marks it ``_is_param``), as in PyTorch."""

    def __instancecheck__(cls, instance: Any) -> bool:
        if cls is Parameter and type(instance) is not Tensor and isinstance(instance, Tensor) \
                and getattr(instance, "_is_param", False):
            return True
        return super().__instancecheck__(instance)


class Parameter(Tensor, metaclass=_ParameterMeta):
    """A learnable tensor: ``Parameter(data=None, requires_grad=True)``.

    Shares ``data``'s memory (like ``data.detach()``), is a leaf, and requires grad unless told
    otherwise. Assigning one to a ``Module`` attribute registers it as a parameter. As in
    PyTorch, a subclass builds itself in ``__new__`` (``super().__new__(cls, data,
    requires_grad)`` or ``Tensor._make_subclass(cls, data, requires_grad)``) and may take more
    arguments there and in its ``__init__``; a custom tensor type given as ``data`` stays of its
    type, marked as a parameter.

    >>> import ember
    >>> p = ember.nn.Parameter(ember.ones(2), requires_grad=False)
    >>> p.requires_grad
    False
    >>> class Quantized(ember.nn.Parameter):
    ...     def __new__(cls, data=None, requires_grad=True, scale=1.0):
    ...         p = super().__new__(cls, data, requires_grad)
    ...         p.scale = scale
    ...         return p
    >>> q = Quantized(ember.ones(2), scale=0.5)
    >>> type(q).__name__, q.scale, q.requires_grad, type(q * 2).__name__
    ('Quantized', 0.5, True, 'Tensor')
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = ember.empty(0)
        if type(data) is Tensor or type(data) is Parameter:
            return Tensor._make_subclass(cls, data, requires_grad)
        if not isinstance(data, Tensor):  # PyTorch fails on data.detach: an AttributeError
            raise _NotATensorError(
                f"Parameter(): expected data to be an ember.Tensor, got {type(data).__name__}")
        # a custom tensor type keeps its type (its detach() must keep it), marked as a parameter
        t = data.detach().requires_grad_(requires_grad)
        if type(t) is not type(data):
            raise RuntimeError(
                f"Creating a Parameter from an instance of type {type(data).__name__} requires "
                f"that detach() returns an instance of the same type, but return type "
                f"{type(t).__name__} was found instead. To use the type as a Parameter, please "
                "correct the detach() semantics defined by its __torch_dispatch__() "
                "implementation."
            )
        t._is_param = True
        return t

    # Ops on a Parameter return plain tensors (no __torch_function__ wrapping), as in PyTorch.
    __torch_function__ = ember._C._disabled_torch_function_impl

    def __repr__(self) -> str:
        text = Tensor.__repr__(self)
        # a parameter holding a sparse grad sits in a same-named subclass (ember.sparse's
        # grad property): it still prints as a plain Parameter
        cls = getattr(type(self), "_ember_dense_class", type(self))
        if cls is not Parameter:  # a subclass: PyTorch's "Parameter(Sub(...))"
            text = f"Parameter({text})"
        return "Parameter containing:\n" + text

    __str__ = __repr__  # print(param) and f"{param}" say so too, as in PyTorch

    def __deepcopy__(self, memo: dict) -> Parameter:
        # PyTorch's: type(self)(a copy of the data, requires_grad) (a subclass's extra
        # constructor arguments take their defaults); ember also copies .grad.
        if id(self) not in memo:
            with ember.no_grad():
                new = type(self)(self.data.clone(), self.requires_grad)
                if self.grad is not None:
                    new.grad = self.grad.detach().clone()
            memo[id(self)] = new
        return memo[id(self)]

    def __reduce_ex__(self, protocol: int):
        # PyTorch's: rebuilt as a Parameter (not the subclass) with its Python state set again
        from ember._tensor import _get_obj_state

        state = _get_obj_state(self)
        if not state:
            return (_rebuild_parameter, (self.data, self.requires_grad, OrderedDict()))
        return (_rebuild_parameter_with_state,
                (self.data, self.requires_grad, OrderedDict(), state))


def _rebuild_parameter(data: Tensor, requires_grad: bool, backward_hooks: Any = None) -> Parameter:
    return Parameter(data, requires_grad)


def _rebuild_parameter_with_state(data: Tensor, requires_grad: bool, backward_hooks: Any,
                                  state: Any) -> Parameter:
    from ember._tensor import _set_obj_state

    return _set_obj_state(Parameter(data, requires_grad), state)


def _copy_parameter(p: Tensor, memo: dict | None = None) -> Tensor:
    """A copy of p (its type, data, requires_grad and grad), as deepcopy makes."""
    return copy.deepcopy(p, {} if memo is None else memo)


class _BufferMeta(type(Tensor)):  # type: ignore[misc]
    """``isinstance(t, Buffer)``: a tensor that ``Buffer(...)`` marked (``t._is_buffer``)."""

    def __instancecheck__(cls, instance: Any) -> bool:
        if cls is Buffer:
            return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False) is True
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """A tensor to register as a module buffer by assignment: ``self.mask = Buffer(t)`` does what
    ``self.register_buffer("mask", t, persistent=...)`` does (PyTorch 2.5's spelling).

    As in PyTorch, ``Buffer(data, *, persistent=True)`` is a plain tensor aliasing ``data``
    (shared memory, no autograd history, the same ``requires_grad``) that carries the attributes
    ``persistent`` and ``_is_buffer``; ``isinstance(t, Buffer)`` checks the mark.

    >>> import ember
    >>> class M(ember.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.mask = ember.nn.Buffer(ember.ones(2))
    ...         self.cache = ember.nn.Buffer(ember.zeros(1), persistent=False)
    >>> m = M()
    >>> list(m.state_dict()), [n for n, _ in m.named_buffers()]
    (['mask'], ['mask', 'cache'])
    >>> type(m.mask).__name__, isinstance(m.mask, ember.nn.Buffer)
    ('Tensor', True)
    """

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> Any:
        if data is None:
            data = ember.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer(): expected data to be an ember.Tensor, got {type(data).__name__}")
        t = Tensor.detach(data)
        if data.requires_grad:
            t.requires_grad_(True)
        t.persistent = bool(persistent)
        t._is_buffer = True
        return t


def _rebuild_buffer(data: Tensor, persistent: bool) -> Tensor:
    """Unpickles a Buffer pickled by an earlier ember (a subclass instance then)."""
    return Buffer(data, persistent=persistent)


# ---- uninitialized parameters and buffers (lazy modules) ---------------------------------------
_UNINIT_MSG = (
    "Attempted to use an uninitialized {kind} (`{name}`). This happens with lazy modules "
    "(LazyLinear, LazyConv2d, ...) before their first forward, or when manipulating "
    "ember.nn.parameter.{cls} objects directly: call the module once with a dummy batch of the "
    "right shape to initialize its parameters first."
)
# What an uninitialized tensor still allows: its metadata, its gradient flags, conversions of
# dtype/device (Module.to), and materialize.
_UNINIT_ALLOWED = frozenset({
    "data", "dtype", "device", "requires_grad", "requires_grad_", "grad", "is_leaf", "grad_fn",
    "is_floating_point", "is_complex", "to", "cpu", "cuda", "float", "double", "half",
    "bfloat16", "get_device", "materialize", "cls_to_become", "share_memory_",
})


class UninitializedTensorMixin:
    """Shared behaviour of ``UninitializedParameter`` and ``UninitializedBuffer``: a tensor
    without a shape yet (no data) until ``materialize(shape)`` gives it one.

    Anything that needs the data or the shape raises a RuntimeError that says to run the lazy
    module's forward first. Only ``dtype``/``device`` conversions and the autograd flags work.
    """

    cls_to_become: type
    _kind = "tensor"
    __torch_function__ = ember._C._disabled_torch_function_impl

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or name in _UNINIT_ALLOWED:
            return object.__getattribute__(self, name)
        if object.__getattribute__(self, "_is_materialized")():
            return object.__getattribute__(self, name)
        if name in ("shape", "size", "numel", "dim", "ndim", "ndimension", "nelement"):
            raise RuntimeError(
                f"Can't access the shape of an uninitialized {self._kind} ({name}). This usually "
                "happens in load_state_dict when loading an uninitialized parameter into an "
                "initialized one, or when a lazy module has not run forward yet: call forward "
                "(with a dummy batch) to initialize the parameters before using them."
            )
        raise RuntimeError(
            _UNINIT_MSG.format(kind=self._kind, name=name, cls=type(self).__name__)
        )

    def _is_materialized(self) -> bool:
        return False

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Gives the tensor its shape: new uninitialized memory of ``shape`` (on ``device`` with
        ``dtype``, by default those it was created with); a parameter becomes a ``Parameter``.

        >>> from ember.nn.parameter import UninitializedParameter, Parameter
        >>> p = UninitializedParameter()
        >>> p.materialize((2, 3))
        >>> type(p) is Parameter, tuple(p.shape)
        (True, (2, 3))
        """
        if device is None:
            device = self.data.device
        if dtype is None:
            dtype = self.data.dtype
        if isinstance(shape, int):
            shape = (shape,)
        self.data = ember.empty(tuple(shape), device=device, dtype=dtype)
        self._become_initialized()

    def _become_initialized(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        if self._is_materialized():
            return ember.Tensor.__repr__(self)
        return f"<{type(self).__name__}>"

    def __str__(self) -> str:
        return self.__repr__()

    def __deepcopy__(self, memo: dict) -> Any:
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.data.device, self.data.dtype)
        return memo[id(self)]

    def __reduce_ex__(self, protocol: int) -> Any:
        return (type(self), (self.requires_grad, None, self.data.dtype))


def _uninit_operator(name: str) -> Any:
    def op(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._is_materialized():
            return getattr(ember.Tensor, name)(self, *args, **kwargs)
        raise RuntimeError(
            _UNINIT_MSG.format(kind=self._kind, name=name, cls=type(self).__name__)
        )

    op.__name__ = name
    return op


# Python operators look methods up on the type (not through __getattribute__): block them there.
for _name in (
    "__getitem__", "__setitem__", "__len__", "__iter__", "__bool__", "__float__", "__int__",
    "__index__", "__neg__", "__pos__", "__abs__", "__invert__", "__lt__", "__le__", "__gt__",
    "__ge__", "__array__",
    *(f"__{p}{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                 "matmul", "and", "or", "xor", "lshift", "rshift")
      for p in ("", "r", "i")),
):
    setattr(UninitializedTensorMixin, _name, _uninit_operator(_name))


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter without a shape yet: what lazy modules hold before their first forward.

    ``materialize(shape)`` turns it, in place, into a ``Parameter`` of that shape (the same
    object, so optimizers holding it keep working).

    >>> import ember
    >>> lin = ember.nn.LazyLinear(3)
    >>> lin.weight
    <UninitializedParameter>
    >>> _ = lin(ember.ones(2, 5))
    >>> type(lin.weight).__name__, tuple(lin.weight.shape)
    ('Parameter', (3, 5))
    """

    cls_to_become = Parameter
    _kind = "parameter"

    def __new__(cls, requires_grad: bool = True, device: Any = None,
                dtype: Any = None) -> UninitializedParameter:
        return Tensor._make_subclass(cls, ember.empty(0, device=device, dtype=dtype), requires_grad)

    def _become_initialized(self) -> None:
        self.__class__ = self.cls_to_become


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer without a shape yet (e.g. LazyBatchNorm's running statistics).

    ``materialize(shape)`` gives it data; the lazy module then registers a plain tensor in its
    place (an ember tensor object cannot change its class to ``ember.Tensor``).
    """

    cls_to_become = Tensor
    _kind = "buffer"

    def __new__(cls, requires_grad: bool = False, device: Any = None,
                dtype: Any = None) -> UninitializedBuffer:
        b = Tensor._make_subclass(cls, ember.empty(0, device=device, dtype=dtype), requires_grad)
        b.__dict__["_materialized"] = False
        return b

    def _is_materialized(self) -> bool:
        return self.__dict__.get("_materialized", False)

    def _become_initialized(self) -> None:
        self.__dict__["_materialized"] = True


def is_lazy(param: Any) -> bool:
    """Whether ``param`` is an uninitialized parameter or buffer (not materialized yet)."""
    return isinstance(param, UninitializedTensorMixin) and not param._is_materialized()
