"""``__torch_dispatch__``: Tensor subclasses and modes that see every op below autograd.

Every op with a device kernel (and the view ops and ``*_like`` factories) starts, in C++, with
a check of one counter (``csrc/ops/python_dispatch.h``). While a :class:`TorchDispatchMode` is
entered, or once a Tensor subclass defining ``__torch_dispatch__`` exists, the op comes here
when this thread has a mode entered or one of its tensor arguments is such a subclass
instance: the innermost mode's ``__torch_dispatch__(func, types, args, kwargs)`` runs (with
that mode popped, so the ops it runs go to the modes outside it), then the subclasses'
``__torch_dispatch__`` classmethods, subclasses before their bases. Autograd has already
recorded the op, so a backward pass reaches the handlers op by op (``threshold_backward``,
``mm``, ...). Composite ops (``linear``, ``softmax``'s helpers...) run as the ops they are
made of.

Handlers see PyTorch's op and overload names (``_softmax``, ``index.Tensor``, ``view`` or
``_unsafe_view`` for a reshape, ``sum.dim_IntList`` ...; see ``_torch_op_names``).

``func`` is an :class:`OpOverload`: ``str(func)`` is ``"aten.mm.default"``, ``func.__name__``
``"mm.default"``, ``func.overloadpacket.__name__`` ``"mm"``, ``func.name()`` ``"aten::mm"``;
calling it runs the op (below autograd: its result records no history).

>>> import ember
>>> from ember.utils._python_dispatch import TorchDispatchMode
>>> class Log(TorchDispatchMode):
...     def __init__(self):
...         super().__init__()
...         self.names = []
...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
...         self.names.append(func.overloadpacket.__name__)
...         return func(*args, **(kwargs or {}))
>>> x = ember.ones(2, 2)
>>> with Log() as log:
...     _ = ember.mm(x, x).relu()
>>> log.names
['mm', 'relu']
"""

from __future__ import annotations

import ast
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ember import _C

__all__ = ["TorchDispatchMode", "OpOverload", "OpOverloadPacket", "_get_current_dispatch_mode",
           "_get_current_dispatch_mode_stack", "_disable_current_modes", "_push_mode", "_pop_mode",
           "is_traceable_wrapper_subclass"]

_state = threading.local()


def _stack() -> list:
    s = getattr(_state, "stack", None)
    if s is None:
        s = _state.stack = []
    return s


# ---- the op objects -----------------------------------------------------------------------------
class OpOverloadPacket:
    """``aten.<name>``: every overload of one op (``.default`` is the first).

    >>> from ember.utils._python_dispatch import OpOverload
    >>> OpOverload.by_name("mm").overloadpacket.__name__
    'mm'
    """

    def __init__(self, name: str) -> None:
        self.__name__ = name
        self._overloads: dict[str, OpOverload] = {}

    def overloads(self) -> list[str]:
        """The overload names."""
        return list(self._overloads)

    def __getattr__(self, name: str) -> OpOverload:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._overloads[name]
        except KeyError:
            raise AttributeError(f"aten.{self.__name__} has no overload {name!r}") from None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return next(iter(self._overloads.values()))(*args, **kwargs)

    def __repr__(self) -> str:
        return f"aten.{self.__name__}"

    __str__ = __repr__

    # Equal (and hashed alike) to ``ember.ops.aten.<name>``, so the FLOP-counter idiom
    # ``registry = {aten.mm: f}; registry.get(func.overloadpacket)`` finds it.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, OpOverloadPacket):
            return other is self or _canonical(other.__name__) == _canonical(self.__name__)
        name = getattr(other, "_qualname", None)  # ember.ops.aten.<op> (a _BuiltinOp)
        if isinstance(name, str) and name.startswith("aten::"):
            return _canonical(name[6:]) == _canonical(self.__name__)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("aten", _canonical(self.__name__)))


_PACKETS: dict[str, OpOverloadPacket] = {}
_OPS: list[OpOverload] = []


_ALIASES: dict[str, str] = {}


def _canonical(name: str) -> str:
    """The ember op behind a PyTorch op name (PyTorch's attention kernels are ember's one fused
    kernel: equal to it, so a policy or registry naming any of them finds it)."""
    if not _ALIASES:
        from ember.library import _ATEN_ALIASES

        _ALIASES.update(_ATEN_ALIASES)
    return _ALIASES.get(name, name)


class OpOverload:
    """One op as ``__torch_dispatch__`` receives it (PyTorch's ``OpOverload``).

    >>> import ember
    >>> from ember.utils._python_dispatch import OpOverload
    >>> mm = OpOverload.by_name("mm")
    >>> str(mm), mm.__name__, mm.name()
    ('aten.mm.default', 'mm.default', 'aten::mm')
    >>> mm(ember.ones(1, 2), ember.ones(2, 1)).tolist()
    [[2.0]]
    """

    def __init__(self, index: int, name: str, overload: str, schema: str, modes: bool) -> None:
        self._index = index
        self._modes = modes  # whether modes see it with plain tensors (else its parts)
        self._opname = name
        self._overloadname = overload
        self._args: list[tuple[str, bool, Any, str]] = []
        for arg, kwonly, default, typ in ast.literal_eval(schema):
            self._args.append((arg, kwonly, _literal(default), typ))
        self.__name__ = f"{name}.{overload}"
        self.__qualname__ = self.__name__
        packet = _PACKETS.get(name)
        if packet is None:
            packet = _PACKETS[name] = OpOverloadPacket(name)
        packet._overloads[overload] = self
        self.overloadpacket = self._overloadpacket = packet  # PyTorch has both names
        self._fn: Callable | None = None

    @staticmethod
    def by_name(name: str, overload: str = "default") -> OpOverload:
        """The op named ``name`` (an ``ember.ops.aten`` name such as ``"mm"``)."""
        _load()
        try:
            return getattr(_PACKETS[name], overload)
        except KeyError:
            raise AttributeError(f"no dispatched op named {name!r}") from None

    @property
    def _schema(self) -> str:
        parts, star = [], False
        for arg, kwonly, default, typ in self._args:
            if kwonly and not star:
                parts.append("*")
                star = True
            parts.append(f"{typ} {arg}" + ("" if default is _NO_DEFAULT else f"={default!r}"))
        suffix = "" if self._overloadname == "default" else f".{self._overloadname}"
        return f"aten::{self._opname}{suffix}({', '.join(parts)})"

    def name(self) -> str:
        suffix = "" if self._overloadname == "default" else f".{self._overloadname}"
        return f"aten::{self._opname}{suffix}"

    @property
    def namespace(self) -> str:
        return "aten"

    def __repr__(self) -> str:
        return f"aten.{self._opname}.{self._overloadname}"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OpOverload):
            return other is self
        if isinstance(other, OpOverloadPacket):
            return False
        name = getattr(other, "_qualname", None)  # ember.ops.aten.<op> (a _BuiltinOp)
        if isinstance(name, str) and name.startswith("aten::"):
            return _canonical(name[6:]) == _canonical(self._opname)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("aten", _canonical(self._opname)))

    def _split(self, values: list) -> tuple[tuple, dict]:
        """The boxed arguments (schema order) as PyTorch passes them: positional ones as args,
        keyword-only ones as kwargs; arguments left at their defaults are dropped."""
        args: list = []
        kwargs: dict = {}
        for (arg, kwonly, default, typ), v in zip(self._args, values, strict=True):
            if type(v) is tuple and typ.startswith("int[]"):
                v = list(v)  # PyTorch passes int[] arguments as lists
            if kwonly:
                if not _is_default(v, default):
                    kwargs[arg] = v
            else:
                args.append(v)
        n = len(args)
        positional = [a for a in self._args if not a[1]]
        while n > 0 and _is_default(args[n - 1], positional[n - 1][2]):
            n -= 1
        return tuple(args[:n]), kwargs

    def _callable(self) -> Callable:
        if self._fn is None:
            fn = getattr(_C, self._opname, None)
            if fn is None or not callable(fn) or isinstance(fn, type):
                fn = getattr(_tensor(), self._opname)  # a method-only op
            self._fn = fn
        return self._fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = self._fn or self._callable()
        if not _C.is_grad_enabled():
            return fn(*args, **kwargs)
        _C._set_grad_enabled(False)  # below autograd: the result records no history
        try:
            return fn(*args, **kwargs)
        finally:
            _C._set_grad_enabled(True)


def _tensor() -> type:
    import ember

    return ember.Tensor


class _NoDefault:
    def __repr__(self) -> str:
        return "<required>"


_NO_DEFAULT: Any = _NoDefault()


def _literal(default: str | None) -> Any:
    if default is None:
        return _NO_DEFAULT
    try:
        return ast.literal_eval(default)
    except (ValueError, SyntaxError):
        return _NO_DEFAULT  # a dtype name and the like: never dropped


def _is_default(value: Any, default: Any) -> bool:
    if default is _NO_DEFAULT:
        return False
    if default is None or value is None:
        return value is None and default is None
    if isinstance(value, bool) or isinstance(default, bool):
        return type(value) is type(default) and value == default
    if isinstance(default, list):
        return isinstance(value, (list, tuple)) and list(value) == default
    if isinstance(value, str) or isinstance(default, str):
        return isinstance(value, str) and isinstance(default, str) and value == default
    if isinstance(value, (int, float)) and isinstance(default, (int, float)):
        return value == default
    return False


# PyTorch's overload names of the ops ember declares several times (in declaration order).
_TORCH_OVERLOADS = {
    "view": ["dtype", "default"], "arange": ["default", "start_step"], "max": ["default", "dim"],
    "min": ["default", "dim"], "median": ["default", "dim"], "nanmedian": ["default", "dim"],
    "split": ["Tensor", "sizes"], "tensor_split": ["sections", "indices"],
    "hsplit": ["int", "array"], "vsplit": ["int", "array"], "scatter": ["src", "value"],
    "bernoulli": ["default", "p"], "random_": ["default", "to", "from"],
    "randint": ["default", "low"], "randint_like": ["default", "low"],
    "normal": ["Tensor_Tensor", "Tensor_float", "float_Tensor", "float_float"],
    "repeat_interleave": ["self_Tensor", "Tensor"], "tensordot": ["default", "dims"],
}


def _load() -> None:
    if _OPS:
        return
    for i in range(_C._python_dispatch_num_ops()):
        _OPS.append(OpOverload(i, *_C._python_dispatch_op_info(i)))
    for name, names in _TORCH_OVERLOADS.items():
        packet = _PACKETS.get(name)
        if packet is None or len(packet._overloads) != len(names):
            continue
        ops = list(packet._overloads.values())
        packet._overloads = {}
        for op, overload in zip(ops, names, strict=True):
            op._overloadname = overload
            op.__name__ = op.__qualname__ = f"{name}.{overload}"
            packet._overloads[overload] = op


# Ops that are not declared ops (negative indices): autograd's detach, Tensor.item(); the
# Tensor method each runs.
_SYNTHETIC: dict[int, OpOverload] = {}
_SYNTHETIC_METHODS = {"detach": "detach", "_local_scalar_dense": "item"}


def _op(index: int) -> OpOverload:
    if not _OPS:
        _load()
    if index < 0:
        op = _SYNTHETIC.get(index)
        if op is None:
            op = _SYNTHETIC[index] = OpOverload(index, *_C._python_dispatch_op_info(index))
            op._fn = getattr(_tensor(), _SYNTHETIC_METHODS[op._opname])
        return op
    return _OPS[index]


def _matmul_parts(a: Any, b: Any) -> Any:
    """matmul run as the ops PyTorch's modes see it make (dot, mv, mm or bmm, with the views
    around them), so that a mode counting or rewriting aten.mm sees every matrix product.
    None when the shapes do not fit (matmul itself then runs and raises its error)."""
    import ember

    da, db = a.dim(), b.dim()
    if da == 0 or db == 0 or a.shape[-1] != b.shape[-1 if db == 1 else -2]:
        return None
    if da == 1 and db == 1:
        return ember.dot(a, b)
    if da == 2 and db == 1:
        return ember.mv(a, b)
    if da == 2 and db == 2:
        return ember.mm(a, b)
    if da == 1 and db == 2:
        return ember.mm(a.unsqueeze(0), b).squeeze(0)
    from ember.utils._torch_op_names import unsafe_view

    if db <= 2:  # a batch of rows against a vector or matrix: fold the batch into the rows
        rows = a.reshape(-1, a.shape[-1])
        if db == 1:
            return unsafe_view(ember.mv(rows, b), a.shape[:-1])
        return unsafe_view(ember.mm(rows, b), a.shape[:-1] + (b.shape[-1],))
    a2 = a.unsqueeze(0) if da == 1 else a
    b2 = b.unsqueeze(-1) if db == 1 else b
    batch = tuple(ember.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
    (n, k), m = a2.shape[-2:], b2.shape[-1]
    out = unsafe_view(ember.bmm(a2.expand(batch + (n, k)).reshape(-1, n, k),
                                b2.expand(batch + (k, m)).reshape(-1, k, m)), batch + (n, m))
    if da == 1:
        out = out.squeeze(-2)
    return out.squeeze(-1) if db == 1 else out


# ---- the handler the C++ hook calls -------------------------------------------------------------
_presenters: dict | None = None


def _dispatch(index: int, boxed: list, types: tuple) -> Any:
    global _presenters
    func = _op(index)
    args, kwargs = func._split(boxed)
    if _stack() and func._opname == "matmul" and not kwargs:
        r = _matmul_parts(*args)
        if r is not None:
            return r
    if _presenters is None:
        from ember.utils import _torch_op_names

        _presenters = _torch_op_names.PRESENTERS
    present = _presenters.get(func._opname)
    if present is not None:
        from ember.utils._torch_op_names import AS_IS

        r = present(func, args, kwargs, types)
        if r is not AS_IS:
            return r
    return _handle(func, types, args, kwargs)


def _types_of(*tensors: Any) -> tuple:
    """The classes of these tensors that define __torch_dispatch__, subclasses before bases
    (the ``types`` PyTorch passes for them)."""
    out: list[type] = []
    for t in tensors:
        cls = type(t)
        if cls is _tensor() or cls in out or not _defines_dispatch(cls):
            continue
        at = next((i for i, seen in enumerate(out) if issubclass(cls, seen)), len(out))
        out.insert(at, cls)
    return tuple(out)


def _handle(func: OpOverload, types: tuple, args: tuple, kwargs: dict) -> Any:
    """``func`` to the innermost mode of this thread (popped while it runs), else to the
    tensor subclasses' handlers."""
    stack = _stack()
    if not stack and not types:  # a presented op run outside every mode
        return func(*args, **kwargs)
    if stack:
        mode = _pop_mode()
        try:
            r = mode.__torch_dispatch__(func, types, args, kwargs)
        finally:
            _push_mode(mode)
        if r is not NotImplemented:
            return r
        if not types:
            raise TypeError(f"{type(mode).__name__}.__torch_dispatch__ returned NotImplemented "
                            f"for {func} and no tensor subclass handles it")
    for t in types:
        r = t.__torch_dispatch__(func, types, args, kwargs)
        if r is not NotImplemented:
            return r
    names = ", ".join(t.__qualname__ for t in types)
    raise TypeError(f"Multiple dispatch failed for '{func}': all __torch_dispatch__ handlers "
                    f"returned NotImplemented (tensor subclasses: {names})")


# ---- modes --------------------------------------------------------------------------------------
class TorchDispatchMode:
    """A block that sees every op below autograd: subclass it and define
    ``__torch_dispatch__(self, func, types, args=(), kwargs=None)``. Ops the handler runs go to
    the modes entered before it (or to the kernels). Modes are per thread and nest.

    >>> import ember
    >>> from ember.utils._python_dispatch import TorchDispatchMode
    >>> class Count(TorchDispatchMode):
    ...     n = 0
    ...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
    ...         Count.n += 1
    ...         return func(*args, **(kwargs or {}))
    >>> with Count():
    ...     _ = ember.ones(2) + 1
    >>> Count.n >= 1
    True
    """

    def __init__(self, _dispatch_key: Any = None) -> None:
        pass

    def __torch_dispatch__(self, func: OpOverload, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        raise NotImplementedError(
            f"{type(self).__name__} must define __torch_dispatch__(self, func, types, args, kwargs)"
        )

    def __enter__(self) -> TorchDispatchMode:
        _push_mode(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        stack = _stack()
        if not stack:
            raise RuntimeError(f"{type(self).__name__}.__exit__: no TorchDispatchMode is entered")
        if stack[-1] is not self:
            raise RuntimeError(
                f"{type(self).__name__}.__exit__: modes must be exited in the reverse order "
                f"they were entered (the innermost is a {type(stack[-1]).__name__})"
            )
        _pop_mode()

    @classmethod
    def push(cls, *args: Any, **kwargs: Any) -> TorchDispatchMode:
        """Deprecated spelling of ``with cls(*args, **kwargs):``."""
        return cls(*args, **kwargs)

    @classmethod
    def is_infra_mode(cls) -> bool:
        return False


def _push_mode(mode: TorchDispatchMode) -> None:
    """Enter ``mode`` on this thread (innermost)."""
    _stack().append(mode)
    _C._python_dispatch_mode_delta(1)


def _pop_mode() -> TorchDispatchMode:
    """Leave the innermost mode of this thread and return it."""
    stack = _stack()
    if not stack:
        raise RuntimeError("_pop_mode: no TorchDispatchMode is entered")
    mode = stack.pop()
    _C._python_dispatch_mode_delta(-1)
    return mode


def _get_current_dispatch_mode() -> TorchDispatchMode | None:
    """The innermost mode entered on this thread, or None.

    >>> from ember.utils._python_dispatch import _get_current_dispatch_mode
    >>> _get_current_dispatch_mode() is None
    True
    """
    stack = _stack()
    return stack[-1] if stack else None


def _get_current_dispatch_mode_stack() -> list[TorchDispatchMode]:
    """The modes entered on this thread, outermost first."""
    return list(_stack())


def _len_torch_dispatch_stack() -> int:
    return len(_stack())


@contextlib.contextmanager
def _disable_current_modes() -> Iterator[list[TorchDispatchMode]]:
    """Leave every mode of this thread for the block (they are re-entered after it); yields
    them, outermost first.

    >>> from ember.utils._python_dispatch import _disable_current_modes
    >>> with _disable_current_modes() as modes:
    ...     modes
    []
    """
    popped = []
    while _stack():
        popped.append(_pop_mode())
    popped.reverse()
    try:
        yield popped
    finally:
        for m in popped:
            _push_mode(m)


def is_traceable_wrapper_subclass(t: Any) -> bool:
    """Whether ``t`` is a wrapper subclass instance that defines ``__tensor_flatten__``."""
    return getattr(t, "_ember_wrapper_device", None) is not None and hasattr(
        type(t), "__tensor_flatten__")


# ---- subclasses ---------------------------------------------------------------------------------
def _defines_dispatch(cls: type) -> bool:
    impl = getattr(cls, "__torch_dispatch__", None)
    if impl is None:
        return False
    return getattr(impl, "__func__", impl) is not _C._disabled_torch_dispatch_impl


def _note_subclass(cls: type) -> None:
    """Called for every new Tensor subclass: the first that defines __torch_dispatch__ turns
    the C++ hook on for good (its instances may be anywhere from then on)."""
    if _defines_dispatch(cls):
        _C._python_dispatch_enable_subclasses()
        if "__del__" not in vars(cls) and not any(
                getattr(k, "__del__", None) is not None and k.__del__ is not _stash_on_del
                for k in cls.__mro__[1:] if "__del__" in vars(k)):
            cls.__del__ = _stash_on_del


def _stash_on_del(self: Any) -> None:
    """A subclass instance that dies while C++ (autograd's saved tensors, a .grad) still holds
    its tensor comes back with its class and attributes when the tensor reaches a handler."""
    try:
        _C._python_dispatch_stash(self)
    except Exception:  # noqa: BLE001 - interpreter shutdown
        pass


_C._python_dispatch_install(_dispatch)
