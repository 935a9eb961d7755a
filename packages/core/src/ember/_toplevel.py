"""Small top-level functions and tensor attributes that real PyTorch programs touch (issue 15):

* type predicates: ``ember.is_tensor``, ``is_floating_point``, ``is_complex``, ``is_nonzero``,
  ``numel``, ``is_same_size``, ``typename``; ``Tensor.is_complex()``, ``Tensor.is_signed()``,
  ``dtype.is_complex``; the layout attributes ``Tensor.layout`` (``ember.strided``),
  ``is_sparse``, ``is_quantized``, ``is_mkldnn``;
* ``element in tensor``;
* reproducibility switches: ``use_deterministic_algorithms`` and its queries, ``ember.seed``,
  ``set_num_interop_threads`` / ``get_num_interop_threads``;
* a few ops composed from others: ``diff``, ``logit``, ``clamp_min``, ``clamp_max``,
  ``detach`` (as functions and, where PyTorch has them, as methods);
* PyTorch's NumPy-style aliases (``multiply``, ``divide``, ``subtract``, ``greater``,
  ``less_equal``, ``negative``, ``absolute``, ``arctan2``, ``fix`` ...), as functions, methods
  and in-place methods; ``Tensor.get_device()``;
* from ``_numeric``: ``nextafter``, ``isreal``, ``gradient``, ``histogramdd``; from
  ``_lowrank``: ``svd_lowrank``, ``pca_lowrank``, ``lobpcg``.

>>> import ember
>>> ember.is_tensor(ember.ones(2)), ember.is_complex(ember.ones(2)), 2.0 in ember.arange(3.0)
(True, False, True)
>>> ember.diff(ember.tensor([1, 4, 9, 16])).tolist()
[3, 5, 7]
"""

from __future__ import annotations

import numbers
import sys
from typing import Any

from ember import _C, _outarg
from ember._C import Tensor
from ember._memory_format import _NamedConstant

__all__ = [
    "is_tensor", "is_floating_point", "is_complex", "is_nonzero", "numel", "is_same_size",
    "typename", "layout", "strided", "jagged", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
    "set_num_interop_threads", "get_num_interop_threads", "diff", "logit", "clamp_min",
    "clamp_max", "detach", "_assert",
]


def _need_tensor(name: str, obj: Any) -> None:
    if not isinstance(obj, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(obj).__name__}")


# ---- predicates -------------------------------------------------------------------------------
def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is an ember tensor (parameters included).

    >>> import ember
    >>> ember.is_tensor(ember.zeros(1)), ember.is_tensor([0.0])
    (True, False)
    """
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> bool:
    """Whether the tensor's dtype is a floating-point type.

    >>> import ember
    >>> ember.is_floating_point(ember.ones(1)), ember.is_floating_point(ember.ones(1).long())
    (True, False)
    """
    _need_tensor("is_floating_point", input)
    return input.is_floating_point()


def _tensor_is_complex(self: Tensor) -> bool:
    """Whether the dtype is complex (complex64 or complex128)."""
    return bool(self.dtype.is_complex)


def is_complex(input: Tensor) -> bool:
    """Whether the tensor's dtype is complex (complex64 or complex128).

    >>> import ember
    >>> ember.is_complex(ember.ones(1)), ember.is_complex(ember.ones(1, dtype=ember.complex64))
    (False, True)
    """
    _need_tensor("is_complex", input)
    return _tensor_is_complex(input)


def _tensor_is_signed(self: Tensor) -> bool:
    """Whether the dtype holds negative values (False for bool and uint8)."""
    return bool(self.dtype.is_signed)


def is_nonzero(input: Tensor) -> bool:
    """Whether a one-element tensor is nonzero; any other size raises RuntimeError.

    >>> import ember
    >>> ember.is_nonzero(ember.tensor([0.5])), ember.is_nonzero(ember.tensor(0))
    (True, False)
    """
    _need_tensor("is_nonzero", input)
    n = input.numel()
    if n != 1:
        what = "no values" if n == 0 else "more than one value"
        raise RuntimeError(
            f"is_nonzero: Boolean value of Tensor with {what} is ambiguous (shape "
            f"{tuple(input.shape)}; expected exactly one element)"
        )
    return input.item() != 0


def numel(input: Tensor) -> int:
    """The number of elements.

    >>> import ember
    >>> ember.numel(ember.zeros(2, 3))
    6
    """
    _need_tensor("numel", input)
    return input.numel()


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether two tensors have the same shape.

    >>> import ember
    >>> ember.is_same_size(ember.zeros(2, 3), ember.ones(2, 3))
    True
    """
    _need_tensor("is_same_size", input)
    _need_tensor("is_same_size", other)
    return tuple(input.shape) == tuple(other.shape)


def _assert(condition: Any, message: str) -> None:
    """``assert condition, message`` as a function (what scripted and traced model code calls:
    ``torch._assert``); a one-element tensor condition is tested by its value.

    >>> import ember
    >>> ember._assert(ember.tensor(True), "never raised")
    """
    assert condition, message


def typename(obj: Any) -> str:
    """The type name of ``obj``: a tensor's legacy type (``ember.FloatTensor``), else the
    qualified class name.

    >>> import ember
    >>> ember.typename(ember.ones(1)), ember.typename(1.5)
    ('ember.FloatTensor', 'float')
    """
    if isinstance(obj, Tensor):
        return obj.type()
    t = obj if isinstance(obj, type) else type(obj)
    module = getattr(t, "__module__", "") or ""
    if module in ("builtins", "__builtin__"):
        return t.__qualname__
    return f"{module}.{t.__qualname__}"


class layout(_NamedConstant):
    """A tensor memory layout: ``ember.strided`` (dense tensors) or ``ember.jagged`` (the
    packed layout of ``ember.nested`` tensors)."""

    __slots__ = ()


strided = layout("strided")
jagged = layout("jagged")  # ember.nested's packed layout (its strided one is ember.strided)


def _contains(self: Tensor, element: Any) -> bool:
    if isinstance(element, (Tensor, numbers.Number)):
        return bool((self == element).any().item())
    raise RuntimeError(
        "Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
        f"{type(element).__name__}"
    )


# ---- reproducibility ---------------------------------------------------------------------------
_DETERMINISTIC = {"enabled": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Asks for deterministic algorithms only. ember's kernels are CPU kernels without
    nondeterministic variants (no atomic floating-point accumulation), so nothing changes in
    what runs: the setting is recorded for :func:`are_deterministic_algorithms_enabled`.

    >>> import ember
    >>> ember.use_deterministic_algorithms(True)
    >>> ember.are_deterministic_algorithms_enabled()
    True
    >>> ember.use_deterministic_algorithms(False)
    """
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): mode must be a bool, got {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(
            f"use_deterministic_algorithms(): warn_only must be a bool, got {type(warn_only).__name__}"
        )
    _DETERMINISTIC["enabled"] = mode
    _DETERMINISTIC["warn_only"] = warn_only


def are_deterministic_algorithms_enabled() -> bool:
    """What :func:`use_deterministic_algorithms` last set (False at the start)."""
    return _DETERMINISTIC["enabled"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """The ``warn_only`` flag :func:`use_deterministic_algorithms` last set."""
    return _DETERMINISTIC["warn_only"]


_INTEROP: dict[str, int | None] = {"threads": None}


def set_num_interop_threads(n: int) -> None:
    """Sets the number of inter-op threads. ember runs ops one after another on the calling
    thread (ops parallelize inside, see ``set_num_threads``), so the value is only recorded;
    like PyTorch, it must be a positive int and can be set once.

    >>> import ember
    >>> ember.get_num_interop_threads() >= 1
    True
    """
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise RuntimeError(f"set_num_interop_threads: expected a positive int, got {n!r}")
    if _INTEROP["threads"] is not None:
        raise RuntimeError(
            "Error: cannot set number of interop threads after parallel work has started or "
            "set_num_interop_threads called"
        )
    _INTEROP["threads"] = n


def get_num_interop_threads() -> int:
    """The number set by :func:`set_num_interop_threads`, else the intra-op thread count."""
    n = _INTEROP["threads"]
    return n if n is not None else _C.get_num_threads()


# ---- ops composed from others --------------------------------------------------------------
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The n-th forward difference along ``dim`` (``out[i] = x[i + 1] - x[i]``), after
    concatenating ``prepend`` before and ``append`` after; bool tensors give ``x[i + 1] != x[i]``.
    Differentiable.

    >>> import ember
    >>> ember.diff(ember.tensor([[1., 2., 4.], [0., 0., 3.]]), dim=1).tolist()
    [[1.0, 2.0], [0.0, 3.0]]
    >>> ember.tensor([1, 4, 9, 16]).diff(n=2).tolist()
    [2, 2]
    """
    _need_tensor("diff", input)
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise RuntimeError(f"diff expects n to be a non-negative int, got {n!r}")
    d = dim + input.ndim if dim < 0 else dim
    if not 0 <= d < input.ndim:
        raise IndexError(
            f"diff: dim {dim} is out of range for a tensor of {input.ndim} dimensions"
        )
    if n == 0:
        return input  # as PyTorch: no difference taken, prepend/append not applied
    parts = []
    for name, t in (("prepend", prepend), (None, input), ("append", append)):
        if t is None:
            continue
        if name is not None:
            if not isinstance(t, Tensor):
                raise TypeError(f"diff(): {name} must be a Tensor, got {type(t).__name__}")
            if t.ndim != input.ndim:
                raise RuntimeError(
                    f"diff expects {name} to have as many dimensions as input ({input.ndim}), "
                    f"got shape {tuple(t.shape)}"
                )
        parts.append(t)
    x = _C.cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
        x = (hi != lo) if x.dtype is _C.bool else hi - lo
    return x


diff = _outarg.accept_out(diff)  # out= as torch.diff's


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given.

    >>> import ember
    >>> [round(v, 4) for v in ember.logit(ember.tensor([0.5, 0.75])).tolist()]
    [0.0, 1.0986]
    """
    _need_tensor("logit", input)
    if not (input.is_floating_point() or input.is_complex()):
        # integers and bools promote first: ``1 - p`` in uint8 would wrap (torch: float result)
        input = input.to(_C.get_default_dtype())
    if eps is not None and not isinstance(eps, numbers.Real):
        raise TypeError(f"logit(): argument 'eps' must be float, not {type(eps).__name__}")
    if eps is not None and input.is_floating_point():
        # torch compares eps in the input's dtype: -1e-308 is -0.0 (a clamp) in float32
        eps = _C.tensor(eps, dtype=input.dtype).item()
    if eps is None or not eps >= 0:  # a negative (or NaN) eps clamps nothing, as torch's
        p = input
    elif eps > 0.5:
        # the bounds cross: below eps -> eps, otherwise (above 1 - eps) -> 1 - eps, NaN kept,
        # as torch's ``x < lo ? lo : (x > hi ? hi : x)`` (clamp would make everything 1 - eps)
        p = input.clamp(min=eps).where(input < eps, input.clamp(max=1.0 - eps))
    else:
        p = input.clamp(eps, 1.0 - eps)
    return (p / (1 - p)).log()


logit = _outarg.accept_out(logit)  # out= as torch.logit's


def clamp_min(input: Tensor, min: Any) -> Tensor:
    """``clamp(input, min=min)``.

    >>> import ember
    >>> ember.clamp_min(ember.tensor([-1.0, 2.0]), 0.0).tolist()
    [0.0, 2.0]
    """
    _need_tensor("clamp_min", input)
    return input.clamp(min=min)


def clamp_max(input: Tensor, max: Any) -> Tensor:
    """``clamp(input, max=max)``.

    >>> import ember
    >>> ember.clamp_max(ember.tensor([-1.0, 2.0]), 0.0).tolist()
    [-1.0, 0.0]
    """
    _need_tensor("clamp_max", input)
    return input.clamp(max=max)


def detach(input: Tensor) -> Tensor:
    """``input.detach()``: the same data, cut from the autograd graph."""
    _need_tensor("detach", input)
    return input.detach()


# alias -> the op it names, for ember.<alias>, Tensor.<alias> and Tensor.<alias>_
_ALIASES = {
    "absolute": "abs", "arctan2": "atan2", "divide": "div", "multiply": "mul", "subtract": "sub",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "negative": "neg",
    "not_equal": "ne", "arccos": "acos", "arcsin": "asin", "arctan": "atan", "fix": "trunc",
    "true_divide": "div", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
}


def _alias_of(alias: str, target: str, fn: Any) -> Any:
    """``fn`` (the op ``target``) under the name ``alias``: its errors name the alias the
    program called (``multiply: result type ...``, not ``mul: ...``)."""
    # (an in-place method's kernel may name the out-of-place op: mul_ raises "mul: ...")
    names = sorted({target, target.rstrip("_")}, key=len, reverse=True)

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            msg = e.args[0] if e.args and isinstance(e.args[0], str) else ""
            for name in names:
                if msg.startswith((name + ":", name + "()")):
                    e.args = (alias + msg[len(name):], *e.args[1:])
                    break
            raise

    call.__name__ = call.__qualname__ = alias
    call.__doc__ = f"Alias for ``ember.{target.rstrip('_')}``."  # (its examples run there)
    call.__wrapped__ = fn
    return call


def _get_device(self: Tensor) -> int:
    """The device index: -1 on the CPU (and for devices without an index), as PyTorch."""
    if self.device.type == "cpu" or self.device.index is None:
        return -1
    return self.device.index


def _special_method(name: str, target: str, inplace: bool) -> Any:
    # ember.special imports the distributions' special functions: loaded on first call
    def method(self: Tensor, *args: Any) -> Tensor:
        from ember import special

        # in place, the function reads a copy: its backward may save the input, which the
        # write below would otherwise invalidate (torch saves self's old value too)
        src = self.clone() if inplace and self.requires_grad else self
        out = getattr(special, target)(src, *args)
        if not inplace:
            return out
        # as every in-place op: a float result is not truncated into an integer self
        if not _C.can_cast(out.dtype, self.dtype):
            raise RuntimeError(f"{name}: result type {out.dtype} can't be cast to the desired "
                               f"output type {self.dtype}")
        if tuple(out.shape) != tuple(self.shape):
            raise RuntimeError(f"{name}: output with shape {tuple(self.shape)} doesn't match the "
                               f"broadcast shape {tuple(out.shape)}")
        return self.copy_(out)

    method.__name__ = name
    method.__doc__ = f"``ember.special.{target}`` of this tensor" + (", in place." if inplace else ".")
    return method


# Ops PyTorch also takes with a Python number as the first operand (torch.pow(2, t),
# torch.add(1, t)) -> whether two numbers are taken as well (torch.add(1, 2) is tensor(3)).
_NUMBER_FIRST = {"add": True, "sub": True, "mul": True, "div": True, "true_divide": True,
                 "floor_divide": True, "remainder": False, "pow": False}


def _kind(dtype: Any) -> int:
    return 3 if dtype.is_complex else 2 if dtype.is_floating_point else int(dtype != _C.bool)


def _number_first(name: str, two_numbers: bool) -> Any:
    """The handler of ``_C.<name>(number, other, ...)``: the number becomes a 0-d tensor that
    promotes as PyTorch's wrapped number (the result has ``result_type(number, other)``)."""
    fn = getattr(_C, name)
    other_name = "exponent" if name == "pow" else "other"

    def handler(number: Any, *args: Any, **kwargs: Any) -> Any:
        from ember._compat_ops import result_type

        args = list(args)
        other = args.pop(0) if args else kwargs.pop(other_name, None)
        if not isinstance(other, Tensor):
            if not (two_numbers and isinstance(other, numbers.Number)):
                raise TypeError(f"{name}(): argument '{other_name}' (position 2) must be Tensor, "
                                f"not {type(other).__name__}")
            other = _C.tensor(other)
        dtype = result_type(number, other)
        # The op runs with the number at full width (0.1 + a float16 tensor rounds once, and
        # -2 / a 0-d uint8 tensor is -1.0, as torch); a result of the promoted kind but wider
        # (next to a 0-d tensor, or a float number next to an integer tensor) is cast down to
        # the promoted dtype. (A division of integers stays the float it is.)
        wide = (_C.bool if isinstance(number, bool) else _C.int64 if isinstance(number, int)
                else _C.float64 if isinstance(number, float) else _C.complex128)
        r = fn(_C.tensor(number, dtype=wide), other, *args, **kwargs)
        if kwargs.get("out") is None and r.dtype != dtype and _kind(r.dtype) == _kind(dtype):
            r = r.to(dtype)
        return r

    handler.__name__ = name
    return handler


def _install() -> None:
    ember = sys.modules["ember"]
    if hasattr(_C, "_add_number_first_overload"):
        for name, two_numbers in _NUMBER_FIRST.items():
            _C._add_number_first_overload(_C, name, _number_first(name, two_numbers))
    for name in __all__:
        if not hasattr(ember, name):
            setattr(ember, name, globals()[name])
    from ember import _lowrank, _numeric  # frexp, gradient, ...; svd_lowrank, lobpcg

    _numeric.install(vars(ember))
    _lowrank.install(vars(ember))
    methods = {
        "is_complex": _tensor_is_complex,
        "is_signed": _tensor_is_signed,
        "__contains__": _contains,
        "diff": diff,
        "logit": logit,
        "clamp_min": clamp_min,
        "clamp_max": clamp_max,
    }
    for name, fn in methods.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for alias, target in _ALIASES.items():
        if not hasattr(ember, alias) and hasattr(ember, target):
            setattr(ember, alias, _alias_of(alias, target, getattr(ember, target)))
        for suffix in ("", "_"):
            if not hasattr(Tensor, alias + suffix) and hasattr(Tensor, target + suffix):
                setattr(Tensor, alias + suffix,
                        _alias_of(alias + suffix, target + suffix, getattr(Tensor, target + suffix)))
    if not hasattr(Tensor, "clamp_min_"):
        Tensor.clamp_min_ = lambda self, min: self.clamp_(min=min)
        Tensor.clamp_max_ = lambda self, max: self.clamp_(max=max)
    for name, target in (("lgamma", "gammaln"), ("digamma", "digamma"), ("xlogy", "xlogy")):
        for suffix in ("", "_"):
            if not hasattr(Tensor, name + suffix):
                setattr(Tensor, name + suffix, _special_method(name + suffix, target, suffix == "_"))
    if not hasattr(Tensor, "get_device"):
        Tensor.get_device = _get_device
    for name, value in (("layout", strided), ("is_sparse", False), ("is_quantized", False),
                        ("is_mkldnn", False)):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, property(lambda self, v=value: v))


_install()
