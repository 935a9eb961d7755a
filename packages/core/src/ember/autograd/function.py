"""Custom differentiable operations: subclass ``ember.autograd.Function``.

Write a static ``forward`` (with a ``ctx`` first argument, or without it plus a static
``setup_context(ctx, inputs, output)``) and a static ``backward(ctx, *grad_outputs)`` that
returns one gradient (or None) per argument of forward; call it with ``.apply``. The backward
runs inside the C++ engine, which takes the GIL only for it; written with ember ops, it is
itself differentiable (``create_graph=True``).

For forward-mode AD (``ember.autograd.forward_ad``) add a static ``jvp(ctx, *tangents)``: it
gets one tangent per argument of forward (zeros for a tensor without one, None for
non-tensors) and returns one per output. forward itself runs without tangents (it sees only
the primal values); tensors it needs in jvp go through ``ctx.save_for_forward``.

>>> import ember
>>> class Cube(ember.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x ** 3
...     @staticmethod
...     def backward(ctx, grad):
...         (x,) = ctx.saved_tensors
...         return grad * 3 * x ** 2
>>> x = ember.tensor([2.0], requires_grad=True)
>>> Cube.apply(x).sum().backward()
>>> x.grad.tolist()
[12.0]
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from ember import _C
from ember._C import Tensor
from ember.autograd.graph import Node

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]


class FunctionCtx:
    """What ``forward`` / ``setup_context`` get as ``ctx``: stash tensors and flags for backward."""

    needs_input_grad: tuple[bool, ...] = ()
    materialize_grads: bool = True

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Saves tensors for backward (read them back with ``ctx.saved_tensors``).

        Saved this way (rather than as ctx attributes) they are checked for in-place changes,
        go through saved-tensor hooks, and are freed once backward has run.
        """
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save Tensors (or None), but argument {i} is of "
                    f"type {type(t).__name__}"
                )
        self.to_save = tensors

    def save_for_forward(self, *tensors: Tensor | None) -> None:
        """Saves tensors for ``jvp`` (read them back there with ``ctx.saved_tensors``)."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_forward can only save Tensors (or None), but argument {i} is of "
                    f"type {type(t).__name__}"
                )
        self.saved_for_forward = tensors

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Declares the inputs that forward modified in place (they must also be returned)."""
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """Declares outputs that are not differentiable (they will not require grad); backward
        still gets a gradient for each of them (zeros unless materialization is off)."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """With True (the default) backward gets zeros for outputs that got no gradient; with
        False it gets None for them."""
        self.materialize_grads = bool(value)


class BackwardCFunction(FunctionCtx):
    """Base of the ``<Function>Backward`` classes: the ctx object is also the graph node that
    ``output.grad_fn`` returns."""

    _forward_cls: type[Function]
    _cdata: Any = None
    _jvp_saved: tuple[Tensor | None, ...] | None = None  # what saved_tensors gives inside jvp

    def apply(self, *grads: Any) -> Any:
        """Runs the Function's backward (called by the engine)."""
        cls = self._forward_cls
        user_vjp = cls.vjp is not Function.vjp
        if user_vjp and cls.backward is not Function.backward:
            raise RuntimeError(
                f"Implementing both 'backward' and 'vjp' for a custom Function is not allowed "
                f"({cls.__name__}); implement only one of them."
            )
        fn = cls.vjp if user_vjp else cls.backward
        return fn(self, *grads)

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        """The tensors given to ``save_for_backward`` (after checking they were not modified);
        inside ``jvp``, those given to ``save_for_forward``, without their tangents."""
        if self._jvp_saved is not None:
            return self._jvp_saved
        return _C._function_saved_tensors(self._cdata)

    @property
    def metadata(self) -> dict:
        """A dict kept with this node for the caller's own notes (read-only attribute; the
        dict itself is mutable), as ``grad_fn.metadata`` of the built-in nodes."""
        md = self.__dict__.get("_node_metadata")
        if md is None:
            md = self.__dict__["_node_metadata"] = {}
        return md

    def _node(self) -> _C.Node:
        if self._cdata is None:
            raise RuntimeError(
                f"{type(self).__name__}: this Function was applied without any input requiring "
                "grad (or under no_grad), so it has no graph node"
            )
        return self._cdata.node()

    def name(self) -> str:
        """``'<Function>Backward'``."""
        return type(self).__name__

    @property
    def next_functions(self) -> tuple[tuple[Any, int], ...]:
        """(node, input_nr) for each tensor argument of forward."""
        return self._node().next_functions

    @property
    def _sequence_nr(self) -> int:
        return self._node()._sequence_nr

    def register_hook(self, fn: Callable) -> Any:
        """``fn(grad_inputs, grad_outputs)``, called after this node's backward ran."""
        return self._node().register_hook(fn)

    def register_prehook(self, fn: Callable) -> Any:
        """``fn(grad_outputs)``, called before this node's backward runs."""
        return self._node().register_prehook(fn)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object>"


Node.register(BackwardCFunction)


class _FunctionMeta(type):
    """Gives every Function subclass its ``<Name>Backward`` ctx class. A class attribute
    ``_node_name`` (not inherited) names it instead: ember's own Functions that stand for a
    PyTorch op take that op's node name (``HypotBackward0``)."""

    def __init__(cls, name: str, bases: tuple, attrs: dict) -> None:
        node = attrs.get("_node_name") or name + "Backward"
        cls._backward_cls = type(node, (BackwardCFunction,), {"_forward_cls": cls})
        super().__init__(name, bases, attrs)


def _bind(fn: Callable, args: tuple, kwargs: dict) -> tuple:
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.args


class Function(metaclass=_FunctionMeta):
    """Base class of custom autograd operations (see the module docstring)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{type(self).__name__}: custom Functions are not called on instances; use the "
            f"static forward/backward methods and call {type(self).__name__}.apply(...)"
        )

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        """The computation: ``forward(ctx, *args)``, or ``forward(*args)`` with setup_context."""
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple, output: Any) -> None:
        """Optional: fills ctx from forward's inputs and output (then forward takes no ctx)."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        """One gradient (or None) per argument of forward, given one per output of forward."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx: Any, *tangents: Any) -> Any:
        """Forward-mode derivative: one output tangent per output of forward, given one
        tangent per argument of forward (zeros for tensors without one, None for non-tensors).
        """
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Runs forward and records the node whose backward is ``cls.backward``."""
        with_setup = cls.setup_context is not Function.setup_context
        if kwargs:
            args = _bind(cls.forward, args, kwargs) if with_setup else _bind(cls.forward, (None, *args), kwargs)[1:]
        ctx = cls._backward_cls()
        node = _C._function_prepare(ctx, args)
        prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)
        # forward sees only primal values: the tangents are jvp's business.
        prev_fw = _C._set_fw_ad_disabled(True)
        try:
            if with_setup:
                outputs = cls.forward(*args)
                cls.setup_context(ctx, args, outputs)
            else:
                outputs = cls.forward(ctx, *args)
        finally:
            _C._set_grad_enabled(prev)
            _C._set_fw_ad_disabled(prev_fw)
        in_tangents = None if prev_fw else _C._function_jvp_inputs(args, ctx.materialize_grads)
        out_tangents = None if in_tangents is None else _run_jvp(cls, ctx, in_tangents)
        return _C._function_finish(ctx, node, args, outputs, in_tangents, out_tangents)


def _run_jvp(cls: type[Function], ctx: Any, tangents: tuple) -> Any:
    """Calls ``cls.jvp`` (forward AD off, so it computes plain tensors) with ctx's saved tensors
    reachable as ``ctx.saved_tensors``."""
    if cls.jvp is Function.jvp:
        raise NotImplementedError(
            f"{cls.__name__} does not implement jvp: a custom autograd.Function needs a static "
            "jvp(ctx, *tangents) method to be used with forward-mode AD (one of its inputs "
            "carries a tangent from ember.autograd.forward_ad.make_dual)"
        )
    saved = getattr(ctx, "saved_for_forward", ())
    level = _C._current_dual_level()
    ctx._jvp_saved = tuple(None if t is None else _C._unpack_dual(t, level)[0] for t in saved)
    prev_fw = _C._set_fw_ad_disabled(True)
    try:
        return cls.jvp(ctx, *tangents)
    finally:
        _C._set_fw_ad_disabled(prev_fw)
        del ctx._jvp_saved
        if hasattr(ctx, "saved_for_forward"):
            del ctx.saved_for_forward


def once_differentiable(fn: Callable) -> Callable:
    """Decorates a backward that is not differentiable itself: it runs under no_grad, and trying
    to differentiate its result (create_graph=True) raises a clear error instead of silently
    giving a wrong higher-order gradient.

    >>> import ember
    >>> from ember.autograd.function import once_differentiable
    >>> class Exp(ember.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = x.exp()
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     @once_differentiable
    ...     def backward(ctx, g):
    ...         (y,) = ctx.saved_tensors
    ...         return g * y
    >>> x = ember.tensor([0.0], requires_grad=True)
    >>> Exp.apply(x).sum().backward()
    >>> x.grad.tolist()
    [1.0]
    """

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)
        try:
            outputs = fn(ctx, *args)
        finally:
            _C._set_grad_enabled(prev)
        if not prev:
            return outputs
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        wrapped = _C._delayed_error(
            "trying to differentiate twice a function that was marked with @once_differentiable",
            (outputs,) if single else outputs,
        )
        return wrapped[0] if single else wrapped

    return wrapper
