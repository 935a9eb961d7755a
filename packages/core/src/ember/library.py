"""``torch.library``: custom operators defined in Python.

``custom_op("mylib::op", mutates_args=())`` turns a function into an operator, reachable as
``ember.ops.mylib.op``, with a kernel per device type (``register_kernel``), a meta kernel
(``register_fake``: what the op gives on the meta device, sizes and dtype only), and a gradient
(``register_autograd``). ``Library("mylib", "DEF")`` is the lower-level spelling: ``define`` a
schema, then ``impl`` kernels for dispatch keys ("CPU", "CUDA", "Meta", "CompositeImplicitAutograd",
"Autograd"). Custom ops take part in ``__torch_function__``.

>>> import ember
>>> @ember.library.custom_op("doc_lib::scale", mutates_args=())
... def scale(x: ember.Tensor, factor: float) -> ember.Tensor:
...     return x * factor
>>> @scale.register_fake
... def _(x, factor):
...     return ember.empty_like(x)
>>> scale.register_autograd(lambda ctx, g: (g * ctx.factor, None),
...                         setup_context=lambda ctx, inputs, output: setattr(ctx, "factor",
...                                                                            inputs[1]))
>>> x = ember.ones(2, requires_grad=True)
>>> ember.ops.doc_lib.scale(x, 3.0).sum().backward()
>>> x.grad.tolist(), ember.ops.doc_lib.scale(ember.ones(2, device="meta"), 2.0).device.type
([3.0, 3.0], 'meta')
"""

from __future__ import annotations

import ast
import inspect
import re
import threading
import typing
import warnings
from typing import Any, Callable, Iterable, Sequence, Union

import ember
from ember import _C
from ember._C import Tensor

__all__ = [
    "CustomOpDef", "Library", "custom_op", "define", "get_op", "impl", "infer_schema",
    "register_autograd", "register_fake", "register_kernel", "impl_abstract", "register_autocast",
    "register_vmap", "get_ctx",
]

_DEVICE_TYPES = ("cpu", "cuda", "meta", "privateuseone")
# Dispatch keys of Library.impl -> the device type they fill (None: every device).
_DISPATCH_KEYS = {
    "CPU": "cpu", "CUDA": "cuda", "Meta": "meta", "PrivateUse1": "privateuseone",
    "CompositeExplicitAutograd": None,
    # kernels that differentiate through the ops they run (every device, before any other)
    "": "implicit", "CompositeImplicitAutograd": "implicit", "Autograd": "autograd",
    "AutogradCPU": "autograd", "AutogradCUDA": "autograd",
}

# ---- schemas ------------------------------------------------------------------------------------
_TYPES = ("Tensor", "Tensor?", "Tensor[]", "Tensor?[]", "int", "int?", "int[]", "int[]?", "SymInt",
          "SymInt?", "SymInt[]", "SymInt[]?", "float", "float?", "float[]", "bool", "bool?", "bool[]", "str", "str?",
          "Scalar", "Scalar?", "ScalarType", "ScalarType?", "Device", "Device?", "Layout",
          "Layout?", "MemoryFormat", "MemoryFormat?", "Generator?", "Any")


class _Arg:
    def __init__(self, type_: str, name: str, default: Any, kw_only: bool, mutable: bool):
        self.type, self.name, self.default, self.kw_only, self.mutable = (
            type_, name, default, kw_only, mutable)

    def __repr__(self) -> str:
        mut = "(a!)" if self.mutable else ""
        base = self.type.replace("Tensor", f"Tensor{mut}", 1) if mut else self.type
        d = "" if self.default is inspect.Parameter.empty else f"={_fmt_default(self.default)}"
        return f"{base} {self.name}{d}"


def _fmt_default(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_default(x) for x in v) + "]"
    return repr(v) if isinstance(v, str) else str(v)


class _Schema:
    """A parsed ``name(args) -> returns`` schema."""

    def __init__(self, name: str, args: list[_Arg], returns: list[str]):
        self.name, self.args, self.returns = name, args, returns

    def __str__(self) -> str:
        parts, kw = [], False
        for a in self.args:
            if a.kw_only and not kw:
                parts.append("*")
                kw = True
            parts.append(repr(a))
        ret = self.returns[0] if len(self.returns) == 1 else f"({', '.join(self.returns)})"
        return f"{self.name}({', '.join(parts)}) -> {ret}"

    def signature(self) -> inspect.Signature:
        params = []
        for a in self.args:
            kind = (inspect.Parameter.KEYWORD_ONLY if a.kw_only
                    else inspect.Parameter.POSITIONAL_OR_KEYWORD)
            params.append(inspect.Parameter(a.name, kind, default=a.default))
        return inspect.Signature(params)


def _split_top(text: str) -> list[str]:
    """text split at the commas outside brackets (a schema's or a signature's arguments)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _parse_default(text: str) -> Any:
    text = text.strip()
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _parse_schema(schema: str, name: str) -> _Schema:
    """Parses ``"(Tensor x, float y=1.0) -> Tensor"`` (the name may lead: ``"op(...) -> ..."``)."""
    m = re.fullmatch(r"\s*([\w.:]*)\s*\((.*)\)\s*->\s*(.+?)\s*", schema, re.S)
    if m is None:
        raise ValueError(f"{name}: could not parse the schema {schema!r}; expected "
                         f"'(Tensor x, float y) -> Tensor'")
    args, kw_only = [], False
    for item in _split_top(m.group(2)):
        if item == "*":
            kw_only = True
            continue
        mutable = "!" in item
        item = re.sub(r"\([a-z]!?\)", "", item)
        am = re.fullmatch(r"([\w\[\]?]+)\s+(\w+)\s*(?:=\s*(.+))?", item.strip())
        if am is None or am.group(1) not in _TYPES:
            raise ValueError(f"{name}: unsupported argument {item!r} in schema {schema!r} "
                             f"(types: {', '.join(_TYPES)})")
        default = inspect.Parameter.empty if am.group(3) is None else _parse_default(am.group(3))
        args.append(_Arg(am.group(1), am.group(2), default, kw_only, mutable))
    ret = m.group(3).strip()
    if ret.startswith("(") and ret.endswith(")"):
        returns = [re.sub(r"\([a-z]!?\)", "", r).split()[0] for r in _split_top(ret[1:-1])]
    else:
        returns = [re.sub(r"\([a-z]!?\)", "", ret).split()[0]]
    if returns == ["None"]:
        returns = []
    return _Schema(m.group(1) or name, args, returns)


def _type_name(annotation: Any, fn_name: str, arg: str) -> str:
    if isinstance(annotation, str):  # an annotation left as text: its simple names only
        last = annotation.rsplit(".", 1)[-1]
        annotation = {"Tensor": Tensor, "int": int, "float": float, "bool": bool,
                      "str": str}.get(last, annotation)
    if annotation is Tensor:
        return "Tensor"
    simple = {int: "SymInt", float: "float", bool: "bool", str: "str", ember.dtype: "ScalarType",
              ember.device: "Device"}
    if annotation in simple:
        return simple[annotation]
    origin, targs = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Union and len(targs) == 2 and type(None) in targs:
        inner = _type_name(next(t for t in targs if t is not type(None)), fn_name, arg)
        return inner + "?"
    if origin in (list, tuple, Sequence, typing.Sequence, __import__("collections.abc").abc.Sequence):
        elem = targs[0] if targs else None
        if elem is not None:
            return _type_name(elem, fn_name, arg) + "[]"
    raise ValueError(
        f"infer_schema({fn_name}): parameter {arg!r} has unsupported type annotation "
        f"{annotation!r}; use Tensor, int, float, bool, str, a list or an Optional of these "
        f"(or give schema=)"
    )


def infer_schema(prototype_function: Callable, /, *, mutates_args: Any,
                 op_name: str | None = None) -> str:
    """The schema of a function from its type annotations.

    >>> import ember
    >>> def f(x: ember.Tensor, n: int = 2) -> ember.Tensor: ...
    >>> ember.library.infer_schema(f, mutates_args=())
    '(Tensor x, SymInt n=2) -> Tensor'
    """
    fn_name = getattr(prototype_function, "__name__", "fn")
    try:
        hints = typing.get_type_hints(prototype_function)
    except Exception:  # noqa: BLE001  (unresolvable forward references: use the raw annotations)
        hints = dict(getattr(prototype_function, "__annotations__", {}))
    sig = inspect.signature(prototype_function)
    mutated = _mutated_names(mutates_args, sig, fn_name)
    parts, kw = [], False
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"infer_schema({fn_name}): *args and **kwargs are not supported")
        if p.name not in hints:
            raise ValueError(f"infer_schema({fn_name}): parameter {p.name!r} has no type "
                             "annotation")
        t = _type_name(hints[p.name], fn_name, p.name)
        if p.kind == p.KEYWORD_ONLY and not kw:
            parts.append("*")
            kw = True
        if p.name in mutated:
            t = t.replace("Tensor", "Tensor(a!)", 1)
        d = "" if p.default is p.empty else f"={_fmt_default(p.default)}"
        parts.append(f"{t} {p.name}{d}")
    ret = hints.get("return", None)
    if ret is None or ret is type(None):
        rs = "()"
    elif typing.get_origin(ret) is tuple:
        rs = "(" + ", ".join(_type_name(t, fn_name, "return") for t in typing.get_args(ret)) + ")"
    else:
        rs = _type_name(ret, fn_name, "return")
    return f"({', '.join(parts)}) -> {rs}"


def _mutated_names(mutates_args: Any, sig: inspect.Signature, name: str) -> set[str]:
    if mutates_args == "unknown":
        return set()
    if isinstance(mutates_args, str) or not isinstance(mutates_args, Iterable):
        raise TypeError(f"{name}: mutates_args must be a tuple of argument names or 'unknown', "
                        f"got {mutates_args!r}")
    names = set(mutates_args)
    unknown = names - set(sig.parameters)
    if unknown:
        raise ValueError(f"{name}: mutates_args names {sorted(unknown)}, which are not "
                         f"arguments of the function ({list(sig.parameters)})")
    return names


# ---- operators ----------------------------------------------------------------------------------
_OPS: dict[str, CustomOpDef] = {}


def _split_name(qualname: str) -> tuple[str, str]:
    m = re.fullmatch(r"(\w+)::(\w+)(?:\.\w+)?", qualname)
    if m is None:
        raise ValueError(f"expected an operator name 'namespace::name', got {qualname!r}")
    return m.group(1), m.group(2)


def _normalize_devices(device_types: Any, what: str) -> list[str | None]:
    if device_types is None:
        return [None]
    items = [device_types] if isinstance(device_types, (str, ember.device)) else list(device_types)
    out = []
    for d in items:
        name = d.type if isinstance(d, ember.device) else str(d)
        if name not in _DEVICE_TYPES:
            raise ValueError(f"{what}: unknown device type {name!r}; expected one of "
                             f"{', '.join(_DEVICE_TYPES)}")
        out.append(name)
    return out


def _tensors_in(values: Iterable[Any]) -> list[Tensor]:
    found = []
    for v in values:
        if isinstance(v, Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(x for x in v if isinstance(x, Tensor))
    return found


class CustomOpDef:
    """An operator made by :func:`custom_op` or ``Library.define``; call it like a function.

    ``register_kernel(device_types)``, ``register_fake`` and ``register_autograd`` add to it;
    ``ember.ops.<namespace>.<name>`` is the same object.
    """

    def __init__(self, namespace: str, name: str, schema: _Schema, mutates: set[str],
                 init_fn: Callable | None, device_types: Any) -> None:
        self._namespace, self._name = namespace, name
        self._qualname = f"{namespace}::{name}"
        self._schema = schema
        self._signature = schema.signature()
        self._mutates = mutates
        self._kernels: dict[str | None, Callable] = {}
        self._fake: Callable | None = None
        self._backward: Callable | None = None
        self._setup_context: Callable | None = None
        self._function: Any = None
        self._autocast: dict[str, Any] = {}  # device type -> dtype floating inputs are cast to
        self._vmap: Callable | None = None
        self._libs: list = []
        self.__name__ = name
        self.__qualname__ = name
        self.__module__ = f"ember.ops.{namespace}"
        if init_fn is not None:
            self.__doc__ = init_fn.__doc__
            for d in _normalize_devices(device_types, self._qualname):
                self._kernels[d] = init_fn

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"

    @property
    def _opname(self) -> str:
        return self._qualname

    @property
    def default(self) -> CustomOpDef:
        """The op's one overload (``ember.ops.ns.op.default``)."""
        return self

    @property
    def schema(self) -> str:
        return str(self._schema)

    # -- registration ----------------------------------------------------------------------------
    def register_kernel(self, device_types: Any, fn: Callable | None = None) -> Any:
        """The implementation for ``device_types`` ("cpu", "cuda", "meta", or a list; None:
        every device without its own); usable as a decorator."""
        devices = _normalize_devices(device_types, f"{self._qualname}.register_kernel")

        def register(f: Callable) -> Callable:
            if not callable(f):
                raise TypeError(f"{self._qualname}.register_kernel: expected a function, got "
                                f"{type(f).__name__}")
            for d in devices:
                self._kernels[d] = f
            return f

        return register if fn is None else register(fn)

    def register_fake(self, fn: Callable | None = None, /) -> Any:
        """The meta kernel: given meta tensors, returns meta tensors of the result's sizes and
        dtype (``ember.empty_like``, ``x.new_empty``), touching no data."""

        def register(f: Callable) -> Callable:
            if not callable(f):
                raise TypeError(f"{self._qualname}.register_fake: expected a function")
            self._fake = f
            return f

        return register if fn is None else register(fn)

    def register_autocast(self, device_type: str, cast_inputs: Any) -> None:
        """Inside an autocast region of ``device_type``, the op's floating-point tensor inputs
        on that device are cast to ``cast_inputs`` and the op runs with autocast off."""
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        from ember.amp.autocast_mode import is_autocast_available

        if not is_autocast_available(device_type):
            raise ValueError(f"Device type '{device_type}' does not support autocast.")
        self._autocast[device_type] = cast_inputs

    def register_vmap(self, func: Callable | None = None, /) -> Any:
        """The batching rule ``func(info, in_dims, *args) -> (output, out_dims)``. It is kept,
        but ``ember.func.vmap`` runs the function once per slice (no batching rules), so the
        op's own kernel gives every result; the rule never changes what vmap returns."""

        def register(f: Callable) -> Callable:
            if not callable(f):
                raise TypeError(f"{self._qualname}.register_vmap: expected a function")
            self._vmap = f
            return f

        return register if func is None else register(func)

    def _with_autocast(self, args: tuple, kwargs: dict) -> Any:
        """The call under a registered autocast rule (None when none applies)."""
        from ember.amp.autocast_mode import autocast, is_autocast_enabled

        for device_type, dtype in self._autocast.items():
            if not is_autocast_enabled(device_type):
                continue

            def cast(v: Any, device_type: str = device_type, dtype: Any = dtype) -> Any:
                if isinstance(v, Tensor):
                    if v.is_floating_point() and v.device.type == device_type:
                        return v.to(dtype)
                    return v
                if isinstance(v, (list, tuple)):
                    return type(v)(cast(x) for x in v)
                return v

            with autocast(device_type, enabled=False):
                return (self(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()}),)
        return None

    def register_autograd(self, backward: Callable, /, *,
                          setup_context: Callable | None = None) -> None:
        """``backward(ctx, *grads)`` returns one gradient (or None) per input;
        ``setup_context(ctx, inputs, output)`` saves what it needs on ctx (``save_for_backward``
        or attributes)."""
        if not callable(backward):
            raise TypeError(f"{self._qualname}.register_autograd: backward must be callable")
        if setup_context is not None and not callable(setup_context):
            raise TypeError(f"{self._qualname}.register_autograd: setup_context must be callable")
        if self._mutates:
            raise RuntimeError(f"{self._qualname}.register_autograd: not supported for an op that "
                               f"mutates its inputs ({sorted(self._mutates)})")
        self._backward, self._setup_context = backward, setup_context
        self._function = None

    # -- calling ---------------------------------------------------------------------------------
    def _bind(self, args: tuple, kwargs: dict) -> inspect.BoundArguments:
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self._qualname}(): {e} (schema: {self._schema})") from None
        bound.apply_defaults()
        for a in self._schema.args:
            v = bound.arguments[a.name]
            if a.type == "Tensor" and not isinstance(v, Tensor):
                raise TypeError(f"{self._qualname}(): argument {a.name!r} must be a Tensor, got "
                                f"{type(v).__name__}")
        return bound

    def _kernel_for(self, tensors: list[Tensor]) -> Callable:
        kinds = {t.device.type for t in tensors if not (t.device.type == "cpu" and t.dim() == 0)}
        if not kinds:
            kinds = {t.device.type for t in tensors} or {"cpu"}
        if len(kinds) > 1:
            raise RuntimeError(f"{self._qualname}: expected all tensors to be on the same device, "
                               f"got {sorted(kinds)}")
        device = kinds.pop()
        if device == "meta":
            kernel = self._kernels.get("meta")
            if kernel is None and self._fake is not None:
                kernel = _with_fake_ctx(self, self._fake)
            if kernel is None:
                raise NotImplementedError(
                    f"{self._qualname}: no fake (meta) kernel; register one with "
                    f"@{self._name}.register_fake to run it on meta tensors")
            return kernel
        kernel = self._kernels.get(device) or self._kernels.get(None)
        if kernel is None:
            have = sorted(k or "default" for k in self._kernels if k != "implicit") or ["none"]
            raise NotImplementedError(f"{self._qualname}: no kernel for device type {device!r} "
                                      f"(registered: {', '.join(have)})")
        return kernel

    def _check_output(self, out: Any) -> Any:
        want = self._schema.returns
        if len(want) == 1 and want[0] == "Tensor" and not isinstance(out, Tensor):
            raise RuntimeError(f"{self._qualname}: the kernel returned {type(out).__name__}, the "
                               f"schema says Tensor ({self._schema})")
        if len(want) > 1 and not (isinstance(out, tuple) and len(out) == len(want)):
            raise RuntimeError(f"{self._qualname}: the kernel must return a tuple of {len(want)} "
                               f"values ({self._schema})")
        return out

    def _autograd_function(self) -> type:
        if self._function is None:
            op = self

            class _Op(ember.autograd.Function):
                @staticmethod
                def forward(ctx: Any, *args: Any) -> Any:
                    kernel = op._kernel_for(_tensors_in(args))
                    out = op._check_output(kernel(*args))
                    if op._setup_context is not None:
                        op._setup_context(ctx, args, out)
                    return out

                @staticmethod
                def backward(ctx: Any, *grads: Any) -> Any:
                    if op._backward is None:
                        raise RuntimeError(
                            f"Autograd has not been implemented for operator {op._qualname}: "
                            "register a backward with register_autograd")
                    result = op._backward(ctx, *grads)
                    result = result if isinstance(result, tuple) else (result,)
                    if len(result) != len(op._schema.args):
                        raise RuntimeError(
                            f"{op._qualname}: backward returned {len(result)} gradient(s), "
                            f"expected {len(op._schema.args)} (one per input, None for "
                            "non-tensors)")
                    return result

            _Op.__name__ = _Op.__qualname__ = f"{self._name}_backward"
            self._function = _Op
        return self._function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        relevant = tuple(args) + tuple(kwargs.values())
        if _C._has_torch_function(relevant + tuple(_tensors_in(relevant))):
            return ember.overrides.handle_torch_function(self, relevant, *args, **kwargs)
        if self._autocast:
            done = self._with_autocast(args, kwargs)
            if done is not None:
                return done[0]
        bound = self._bind(args, kwargs)
        values = tuple(bound.arguments[a.name] for a in self._schema.args)
        autograd = self._kernels.get("autograd") or self._kernels.get("implicit")
        if autograd is not None:
            return autograd(*values)
        tensors = _tensors_in(values)
        needs_grad = ember.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if needs_grad and not self._mutates:
            return self._autograd_function().apply(*values)
        kernel = self._kernel_for(tensors)
        with ember.no_grad() if needs_grad else _nullcontext():
            return self._check_output(kernel(*values))


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args: Any,
              device_types: Any = None, schema: str | None = None) -> Any:
    """Decorator: ``fn`` becomes the operator ``name`` ("namespace::op"), callable as the returned
    object and as ``ember.ops.namespace.op``. ``mutates_args``: the names of the arguments fn
    writes in place (or "unknown"); ``device_types``: the devices fn is the kernel for (None:
    all); ``schema``: when the annotations do not say it.

    >>> import ember
    >>> @ember.library.custom_op("doc_lib::add_one", mutates_args=())
    ... def add_one(x: ember.Tensor) -> ember.Tensor:
    ...     return x + 1
    >>> ember.ops.doc_lib.add_one(ember.zeros(2)).tolist()
    [1.0, 1.0]
    """

    def make(f: Callable) -> CustomOpDef:
        namespace, opname = _split_name(name)
        if name in _OPS:
            raise RuntimeError(f"custom_op: the operator {name} is already defined")
        text = schema if schema is not None else infer_schema(f, mutates_args=mutates_args)
        parsed = _parse_schema(text, name)
        if schema is not None:
            mutated = {a.name for a in parsed.args if a.mutable}
        else:
            mutated = _mutated_names(mutates_args, inspect.signature(f), name)
        op = CustomOpDef(namespace, opname, parsed, mutated, f, device_types)
        op._schema.name = name
        _OPS[name] = op
        return op

    return make if fn is None else make(fn)


def get_op(qualname: str) -> CustomOpDef:
    """The custom op named ``"namespace::name"``."""
    _split_name(qualname)
    base = qualname.split(".")[0]
    if base not in _OPS:
        raise RuntimeError(f"operator {base} is not defined (define it with custom_op or "
                           "Library.define)")
    return _OPS[base]


def _op(op: Any) -> CustomOpDef:
    return op if isinstance(op, CustomOpDef) else get_op(op)


def register_kernel(op: Any, device_types: Any, func: Callable | None = None, /, *,
                    lib: Any = None) -> Any:
    """``op.register_kernel(device_types, func)`` for an op given by name or object."""
    return _op(op).register_kernel(device_types, func)


def register_fake(op: Any, func: Callable | None = None, /, *, lib: Any = None,
                  _stacklevel: int = 1) -> Any:
    """``op.register_fake(func)`` for an op given by name or object."""
    return _op(op).register_fake(func)


def impl_abstract(qualname: Any, func: Callable | None = None, *, lib: Any = None,
                  _stacklevel: int = 1) -> Any:
    """Deprecated name of :func:`register_fake` (renamed in PyTorch 2.4); warns FutureWarning."""
    warnings.warn("`torch.library.impl_abstract` was renamed to `torch.library.register_fake`. "
                  "Please use that instead; we will remove `torch.library.impl_abstract` in a "
                  "future version of PyTorch.", FutureWarning, stacklevel=2)
    return register_fake(qualname, func, lib=lib, _stacklevel=_stacklevel + 1)


def _resolve_for(op: Any, what: str) -> CustomOpDef:
    if not isinstance(op, (str, CustomOpDef)):
        raise ValueError(f"{what}({op}): got unexpected type for op: {type(op)}")
    return _op(op)


def register_autocast(op: Any, device_type: str, cast_inputs: Any, /, *,
                      lib: Any = None) -> None:
    """Inside an autocast region of ``device_type``, a call of the custom op ``op`` (a name or
    the op) casts its floating-point tensor inputs on that device to ``cast_inputs`` and runs
    with autocast off.

    >>> import ember
    >>> @ember.library.custom_op("doc_autocast::double", mutates_args=())
    ... def double(x: ember.Tensor) -> ember.Tensor:
    ...     return x * 2
    >>> ember.library.register_autocast("doc_autocast::double", "cpu", ember.float64)
    >>> with ember.autocast("cpu", dtype=ember.bfloat16):
    ...     double(ember.ones(2)).dtype
    ember.float64
    """
    _resolve_for(op, "register_autocast").register_autocast(device_type, cast_inputs)


def register_vmap(op: Any, func: Callable | None = None, /, *, lib: Any = None) -> Any:
    """``op.register_vmap(func)`` for a custom op given by name or object (see
    :meth:`CustomOpDef.register_vmap`: ember's loop-based vmap keeps but does not need it)."""
    return _resolve_for(op, "register_vmap").register_vmap(func)


_fake_ctx = threading.local()


def get_ctx() -> Any:
    """Outside a fake kernel: None. Inside one (``register_fake``, run on meta tensors, since
    ember has no FakeTensors) it raises RuntimeError, as PyTorch does for meta tensors: the
    context exists to make data-dependent output sizes, which meta tensors cannot have."""
    op = getattr(_fake_ctx, "op", None)
    if op is None:
        return None
    raise RuntimeError(
        f"{op._qualname}: You're trying to run this operator with meta Tensors (as opposed to "
        "FakeTensors), but this operator may return an output Tensor with data-dependent shape. "
        "Meta Tensors don't support operators with outputs that have data-dependent shapes (and "
        "ember has no FakeTensors). If your operator does not return an output with "
        "data-dependent shape, make sure the fake and/or meta kernel does not call "
        "ember.library.get_ctx().")


def _with_fake_ctx(op: CustomOpDef, fake: Callable) -> Callable:
    def run(*args: Any, **kwargs: Any) -> Any:
        prev = getattr(_fake_ctx, "op", None)
        _fake_ctx.op = op
        try:
            return fake(*args, **kwargs)
        finally:
            _fake_ctx.op = prev

    return run


def register_autograd(op: Any, backward: Callable, /, *, setup_context: Callable | None = None,
                      lib: Any = None) -> None:
    """``op.register_autograd(backward, setup_context=...)`` for an op given by name or object."""
    _op(op).register_autograd(backward, setup_context=setup_context)


class Library:
    """A set of registrations in one namespace: ``kind`` "DEF" (defines the namespace; one per
    namespace), "FRAGMENT" (defines more ops in it) or "IMPL" (kernels for ops defined
    elsewhere).

    >>> import ember
    >>> lib = ember.library.Library("doc_lib2", "DEF")
    >>> lib.define("twice(Tensor x) -> Tensor")
    'twice'
    >>> lib.impl("twice", lambda x: x * 2, "CPU")
    >>> ember.ops.doc_lib2.twice(ember.ones(2)).tolist()
    [2.0, 2.0]
    """

    _defined_namespaces: set[str] = set()

    def __init__(self, ns: str, kind: str, dispatch_key: str = "") -> None:
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError(f"Library: kind must be 'DEF', 'IMPL' or 'FRAGMENT', got {kind!r}")
        if not re.fullmatch(r"\w+", ns):
            raise ValueError(f"Library: invalid namespace {ns!r}")
        if kind == "DEF":
            if ns in Library._defined_namespaces:
                raise RuntimeError(f"Library: the namespace {ns!r} is already defined by another "
                                   "Library(..., 'DEF'); use 'FRAGMENT' to add to it")
            Library._defined_namespaces.add(ns)
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._defined: list[str] = []
        self._impls: list[tuple[CustomOpDef, str | None, Callable | None]] = []

    def __repr__(self) -> str:
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})"

    def define(self, schema: str, alias_analysis: str = "", *, tags: Any = ()) -> str:
        """Declares an op from ``"name(Tensor x, ...) -> Tensor"``; returns its name."""
        if self.kind == "IMPL":
            raise RuntimeError(f"Library({self.ns!r}, 'IMPL'): define() needs a 'DEF' or "
                               "'FRAGMENT' library")
        parsed = _parse_schema(schema, f"{self.ns}::?")
        if not parsed.name or "::" in parsed.name:
            raise ValueError(f"Library.define: the schema must start with the op's name "
                             f"(without namespace), got {schema!r}")
        name = parsed.name.split(".")[0]
        qualname = f"{self.ns}::{name}"
        if qualname in _OPS:
            raise RuntimeError(f"Library.define: the operator {qualname} is already defined")
        parsed.name = qualname
        mutated = {a.name for a in parsed.args if a.mutable}
        _OPS[qualname] = CustomOpDef(self.ns, name, parsed, mutated, None, None)
        self._defined.append(qualname)
        return name

    def impl(self, op_name: Any, fn: Callable, dispatch_key: str = "", *,
             with_keyset: bool = False) -> None:
        """Registers ``fn`` as ``op_name``'s kernel for ``dispatch_key`` ("CPU", "CUDA", "Meta",
        "CompositeImplicitAutograd" or "" for every device, "Autograd" for a kernel that does
        its own autograd)."""
        op = op_name if isinstance(op_name, CustomOpDef) else get_op(
            op_name if "::" in str(op_name) else f"{self.ns}::{op_name}")
        key = dispatch_key or self.dispatch_key
        if key not in _DISPATCH_KEYS:
            raise ValueError(f"Library.impl({op._qualname}): unknown dispatch key {key!r}; "
                             f"expected one of {sorted(k for k in _DISPATCH_KEYS if k)}")
        if not callable(fn):
            raise TypeError(f"Library.impl({op._qualname}): expected a function")
        device = _DISPATCH_KEYS[key]
        self._impls.append((op, device, op._kernels.get(device)))
        op._kernels[device] = fn

    def _destroy(self) -> None:
        """Removes what this library registered."""
        for op, device, previous in reversed(self._impls):
            if previous is None:
                op._kernels.pop(device, None)
            else:
                op._kernels[device] = previous
        for q in self._defined:
            _OPS.pop(q, None)
        if self.kind == "DEF":
            Library._defined_namespaces.discard(self.ns)
        self._impls, self._defined = [], []


def define(qualname: str, schema: str, *, lib: Library | None = None, tags: Any = ()) -> None:
    """``define("mylib::op", "(Tensor x) -> Tensor")``."""
    ns, name = _split_name(qualname)
    (lib or Library(ns, "FRAGMENT")).define(f"{name}{schema}")


def impl(qualname: Any, types: Any, func: Callable | None = None, *,
         lib: Library | None = None) -> Any:
    """``impl("mylib::op", "cpu", fn)`` (or as a decorator): a kernel for device types."""

    def register(f: Callable) -> Callable:
        op = _op(qualname)
        if isinstance(types, str) and types in _DISPATCH_KEYS:
            device = _DISPATCH_KEYS[types]
            op._kernels[device] = f
        else:
            op.register_kernel(types, f)
        return f

    return register if func is None else register(func)


# ---- ember.ops -----------------------------------------------------------------------------------
class _OpNamespace:
    """``ember.ops.<namespace>``: its custom ops as attributes."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, op: str) -> Any:
        if op.startswith("__"):
            raise AttributeError(op)
        qualname = f"{self._name}::{op}"
        if qualname in _OPS:
            return _OPS[qualname]
        raise AttributeError(f"'ember.ops.{self._name}' has no operator {op!r} (define it with "
                             f"ember.library.custom_op or Library('{self._name}', ...).define)")

    def __repr__(self) -> str:
        return f"<ember.ops.{self._name}>"


class _BuiltinOp:
    """``ember.ops.aten.<op>``: one of ember's own ops (``.default`` is itself)."""

    def __init__(self, name: str, fn: Callable) -> None:
        self._fn, self.__name__, self._qualname = fn, name, f"aten::{name}"

    @property
    def default(self) -> _BuiltinOp:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<ember.ops.aten.{self.__name__}>"

    # Equal (and hashed alike) to the same op as __torch_dispatch__ receives it
    # (ember.utils._python_dispatch.OpOverload) and to its packet, so `func in {aten.mm.default:
    # ...}` and `func.overloadpacket in {aten.mm: ...}` both work.
    def __eq__(self, other: object) -> bool:
        name = getattr(other, "_qualname", None)
        if isinstance(other, _BuiltinOp):
            return name == self._qualname
        opname = getattr(other, "_opname", None)
        if isinstance(opname, str) and isinstance(other, _OpOverload()):
            return f"aten::{_ATEN_ALIASES.get(opname, opname)}" == self._qualname
        if type(other).__name__ == "OpOverloadPacket":  # func.overloadpacket == aten.mm
            name = other.__name__
            return f"aten::{_ATEN_ALIASES.get(name, name)}" == self._qualname
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("aten", self.__name__))


def _OpOverload() -> type:
    from ember.utils._python_dispatch import OpOverload

    return OpOverload


# PyTorch's fused attention kernels, for which ember has one (the op scaled_dot_product_attention
# dispatches): a selective-checkpoint policy listing any of them matches ember's.
_ATEN_ALIASES = {
    "_scaled_dot_product_flash_attention": "_scaled_dot_product_fused_attention",
    "_scaled_dot_product_efficient_attention": "_scaled_dot_product_fused_attention",
    "_scaled_dot_product_cudnn_attention": "_scaled_dot_product_fused_attention",
    "_scaled_dot_product_flash_attention_for_cpu": "_scaled_dot_product_fused_attention",
    "_scaled_dot_product_flash_attention_backward": "_scaled_dot_product_fused_attention_backward",
    "_scaled_dot_product_efficient_attention_backward":
        "_scaled_dot_product_fused_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward": "_scaled_dot_product_fused_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward":
        "_scaled_dot_product_fused_attention_backward",
}


# ---- the collectives' op names (torch.ops.c10d_functional / _c10d_functional / c10d) ---------
# ember runs collectives in Python (ember.distributed), not as dispatcher ops; these are their
# torch names, the keys CommDebugMode counts them under.
_COLLECTIVE_OPS = {
    "c10d_functional": (
        "all_reduce", "all_reduce_coalesced", "all_gather_into_tensor",
        "all_gather_into_tensor_coalesced", "reduce_scatter_tensor",
        "reduce_scatter_tensor_coalesced", "all_to_all_single", "broadcast", "wait_tensor"),
    "c10d": (
        "allreduce_", "allreduce_coalesced_", "allgather_", "_allgather_base_",
        "allgather_coalesced_", "allgather_into_tensor_coalesced_", "reduce_scatter_",
        "_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_", "alltoall_",
        "alltoall_base_", "broadcast_", "gather_", "scatter_", "reduce_", "barrier", "send",
        "recv_", "recv_any_source_", "monitored_barrier_"),
}
_COLLECTIVE_OPS["_c10d_functional"] = _COLLECTIVE_OPS["c10d_functional"]


class _CollectiveOverload:
    """``<packet>.default``: the one overload of a collective op name."""

    def __init__(self, packet: _CollectivePacket) -> None:
        self.overloadpacket = packet
        self._overloadname = "default"
        self.__name__ = f"{packet.__name__}.default"

    def __repr__(self) -> str:
        return f"{self.overloadpacket}.default"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.overloadpacket(*args, **kwargs)


class _CollectivePacket:
    """``ember.ops.c10d_functional.all_reduce`` and the other collective op names: one object
    per name (hashable, compared by identity), printed as torch prints its op packet."""

    def __init__(self, ns: str, name: str) -> None:
        self._ns, self.__name__ = ns, name
        self._qualified_op_name = f"{ns}::{name}"
        self.default = _CollectiveOverload(self)

    def overloads(self) -> list[str]:
        return ["default"]

    def __str__(self) -> str:
        return f"{self._ns}.{self.__name__}"

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='{self._ns}.{self.__name__}')>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"ember.ops.{self._ns}.{self.__name__}: ember's collectives are not dispatcher "
            "ops; call ember.distributed or ember.distributed._functional_collectives")


class _CollectiveNamespace(_OpNamespace):
    """``ember.ops.c10d_functional`` (and ``_c10d_functional``, ``c10d``): the collectives'
    op names; anything else is looked up among the custom ops as in any namespace."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._packets = {op: _CollectivePacket(name, op) for op in _COLLECTIVE_OPS[name]}

    def __getattr__(self, op: str) -> Any:
        packet = self.__dict__.get("_packets", {}).get(op)
        return packet if packet is not None else super().__getattr__(op)

    def __repr__(self) -> str:
        return f"<module 'ember.ops.{self._name}' from 'ember.ops'>"


_COLLECTIVE_NAMESPACES: dict[str, _CollectiveNamespace] = {}


def _collective_namespace(name: str) -> _CollectiveNamespace | None:
    """The namespace object for a collectives namespace name (one per name), else None."""
    if name not in _COLLECTIVE_OPS:
        return None
    if name not in _COLLECTIVE_NAMESPACES:
        _COLLECTIVE_NAMESPACES[name] = _CollectiveNamespace(name)
    return _COLLECTIVE_NAMESPACES[name]


class _AtenNamespace:
    """``ember.ops.aten``: ember's built-in ops by their ATen names (``aten.add.Tensor`` and other
    overload names select the same op)."""

    def __getattr__(self, op: str) -> Any:
        if op.startswith("__"):
            raise AttributeError(op)
        op = _ATEN_ALIASES.get(op, op)
        fn = getattr(_C, op, None)
        if fn is None or not callable(fn) or isinstance(fn, type):
            fn = getattr(ember, op, None)
        if fn is None or not callable(fn) or isinstance(fn, type):
            # an op only __torch_dispatch__ handlers see (aten._softmax, aten.view, ...)
            from ember.utils._torch_op_names import packet

            found = packet(op)
            if found is None:
                raise AttributeError(f"'ember.ops.aten' has no operator {op!r}")
            return found
        return _BuiltinOp(op, fn)


def _attach_overload_names() -> None:
    # aten.add.Tensor, aten.mul.Scalar, ...: any overload name returns the op itself.
    def getattr_overload(self: _BuiltinOp, name: str) -> Any:
        if name.startswith("__") or name.startswith("_"):
            raise AttributeError(name)
        return self

    _BuiltinOp.__getattr__ = getattr_overload  # type: ignore[attr-defined]


_attach_overload_names()
