"""``ember._foreach_*``: PyTorch's list-of-tensors ops, which custom optimizers and weight
averaging code call (``_foreach_lerp_(ema, params, 0.1)``, ``_foreach_mul_(grads, scale)``...).

Each applies one op to every tensor of a list (with, per op, a scalar, a list of scalars, one
tensor or a second list as the other operand), in a Python loop over ember's ops: the results
and autograd are those of the single-tensor ops. The in-place forms (trailing ``_``) return
None; the others return a list.

>>> import ember
>>> params, grads = [ember.ones(2), ember.ones(3)], [ember.ones(2), ember.full((3,), 2.0)]
>>> ember._foreach_add_(params, grads, alpha=-0.5)
>>> [p.tolist() for p in params]
[[0.5, 0.5], [0.0, 0.0, 0.0]]
>>> [n.item() for n in ember._foreach_norm([ember.tensor([3.0, 4.0])])]
[5.0]
"""

from __future__ import annotations

import numbers
import sys
from typing import Any, Callable, Sequence

from ember import _C
from ember._C import Tensor

__all__: list[str] = []  # filled by _install with every _foreach_ function


def _check_list(name: str, what: str, tensors: Any) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}: {what} must be a list or tuple of Tensors, got {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: {what}[{i}] must be a Tensor, got {type(t).__name__}")
    return list(tensors)


def _same_length(name: str, a: Sequence[Any], b: Sequence[Any], what: str = "Tensor lists") -> None:
    if len(a) != len(b):
        raise RuntimeError(
            f"{name}: {what} must have the same number of tensors, got {len(a)} and {len(b)}"
        )


def _others(name: str, tensors: list[Tensor], other: Any) -> list[Any]:
    """The second operand per tensor: a scalar, a list of scalars, one Tensor or a tensor list."""
    if isinstance(other, (numbers.Number, Tensor)):
        return [other] * len(tensors)
    if isinstance(other, (list, tuple)):
        _same_length(name, tensors, other, "the lists")
        for i, o in enumerate(other):
            if not isinstance(o, (numbers.Number, Tensor)):
                raise TypeError(f"{name}: other[{i}] must be a Tensor or a number, got {type(o).__name__}")
        return list(other)
    raise TypeError(
        f"{name}: other must be a number, a Tensor, or a list of numbers or Tensors, got "
        f"{type(other).__name__}"
    )


def _binary(op: str, with_alpha: bool) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def out_of_place(self: Sequence[Tensor], other: Any, *, alpha: Any = 1) -> list[Tensor]:
        name = f"_foreach_{op}"
        ts = _check_list(name, "self", self)
        res = []
        for t, o in zip(ts, _others(name, ts, other)):
            res.append(getattr(t, op)(o, alpha=alpha) if with_alpha and alpha != 1 else getattr(t, op)(o))
        return res

    def in_place(self: Sequence[Tensor], other: Any, *, alpha: Any = 1) -> None:
        name = f"_foreach_{op}_"
        ts = _check_list(name, "self", self)
        for t, o in zip(ts, _others(name, ts, other)):
            if with_alpha and alpha != 1:
                getattr(t, op + "_")(o, alpha=alpha)
            else:
                getattr(t, op + "_")(o)

    for f, suffix in ((out_of_place, ""), (in_place, "_")):
        f.__name__ = f"_foreach_{op}{suffix}"
        f.__doc__ = (f"``{op}{suffix}`` of each tensor in ``self`` with a scalar, a scalar list, a "
                     "tensor or a tensor list" + (" (``alpha`` scales the other operand)" if with_alpha else "")
                     + (": in place, returns None." if suffix else ": a new list."))
    return out_of_place, in_place


def _unary(op: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def out_of_place(self: Sequence[Tensor]) -> list[Tensor]:
        return [getattr(t, op)() for t in _check_list(f"_foreach_{op}", "self", self)]

    def in_place(self: Sequence[Tensor]) -> None:
        for t in _check_list(f"_foreach_{op}_", "self", self):
            getattr(t, op + "_")()

    for f, suffix in ((out_of_place, ""), (in_place, "_")):
        f.__name__ = f"_foreach_{op}{suffix}"
        f.__doc__ = f"``{op}{suffix}`` of each tensor" + (": in place, returns None." if suffix else ": a new list.")
    return out_of_place, in_place


def _pointwise(op: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    # addcmul / addcdiv: self + value * t1 (*|/) t2, value a scalar or one per tensor
    def values(name: str, ts: list[Tensor], value: Any) -> list[Any]:
        if isinstance(value, Tensor) and value.ndim == 1:
            value = value.tolist()
        return _others(name, ts, value)

    def out_of_place(self: Sequence[Tensor], tensor1: Sequence[Tensor], tensor2: Sequence[Tensor],
                     value: Any = 1) -> list[Tensor]:
        name = f"_foreach_{op}"
        ts = _check_list(name, "self", self)
        t1, t2 = _check_list(name, "tensor1", tensor1), _check_list(name, "tensor2", tensor2)
        _same_length(name, ts, t1)
        _same_length(name, ts, t2)
        return [getattr(t, op)(a, b, value=v) for t, a, b, v in zip(ts, t1, t2, values(name, ts, value))]

    def in_place(self: Sequence[Tensor], tensor1: Sequence[Tensor], tensor2: Sequence[Tensor],
                 value: Any = 1) -> None:
        name = f"_foreach_{op}_"
        ts = _check_list(name, "self", self)
        t1, t2 = _check_list(name, "tensor1", tensor1), _check_list(name, "tensor2", tensor2)
        _same_length(name, ts, t1)
        _same_length(name, ts, t2)
        for t, a, b, v in zip(ts, t1, t2, values(name, ts, value)):
            getattr(t, op + "_")(a, b, value=v)

    for f, suffix in ((out_of_place, ""), (in_place, "_")):
        f.__name__ = f"_foreach_{op}{suffix}"
        f.__doc__ = (f"``{op}{suffix}(tensor1[i], tensor2[i], value=value[i])`` of each tensor"
                     + (": in place, returns None." if suffix else ": a new list."))
    return out_of_place, in_place


def _foreach_lerp(self: Sequence[Tensor], tensors1: Sequence[Tensor], weight: Any) -> list[Tensor]:
    """``self[i] + weight * (tensors1[i] - self[i])``, weight a scalar, a tensor or a list."""
    name = "_foreach_lerp"
    ts, ends = _check_list(name, "self", self), _check_list(name, "tensors1", tensors1)
    _same_length(name, ts, ends)
    return [t.lerp(e, w) for t, e, w in zip(ts, ends, _others(name, ts, weight))]


def _foreach_lerp_(self: Sequence[Tensor], tensors1: Sequence[Tensor], weight: Any) -> None:
    """In-place :func:`_foreach_lerp` (the EMA update ``ema = ema + w * (param - ema)``).

    >>> import ember
    >>> ema = [ember.zeros(2)]
    >>> ember._foreach_lerp_(ema, [ember.ones(2)], 0.1)
    >>> ema[0].tolist()
    [0.10000000149011612, 0.10000000149011612]
    """
    name = "_foreach_lerp_"
    ts, ends = _check_list(name, "self", self), _check_list(name, "tensors1", tensors1)
    _same_length(name, ts, ends)
    for t, e, w in zip(ts, ends, _others(name, ts, weight)):
        t.lerp_(e, w)


def _foreach_norm(self: Sequence[Tensor], ord: Any = 2, dtype: Any = None) -> list[Tensor]:
    """The vector ``ord``-norm of each tensor (all its elements), as 0-d tensors."""
    ts = _check_list("_foreach_norm", "self", self)
    out = []
    for t in ts:
        x = t if dtype is None else t.to(dtype)
        out.append(x.flatten().norm(ord))
    return out


def _foreach_zero_(self: Sequence[Tensor]) -> None:
    """Fills every tensor with zeros."""
    for t in _check_list("_foreach_zero_", "self", self):
        t.zero_()


def _foreach_copy_(self: Sequence[Tensor], src: Sequence[Tensor], non_blocking: bool = False) -> None:
    """``self[i].copy_(src[i])`` for each pair."""
    ts, ss = _check_list("_foreach_copy_", "self", self), _check_list("_foreach_copy_", "src", src)
    _same_length("_foreach_copy_", ts, ss)
    for t, s in zip(ts, ss):
        t.copy_(s)


def _clamp(kind: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def out_of_place(self: Sequence[Tensor], other: Any) -> list[Tensor]:
        name = f"_foreach_{kind}"
        ts = _check_list(name, "self", self)
        return [_clamp_one(kind, t, o) for t, o in zip(ts, _others(name, ts, other))]

    def in_place(self: Sequence[Tensor], other: Any) -> None:
        name = f"_foreach_{kind}_"
        ts = _check_list(name, "self", self)
        for t, o in zip(ts, _others(name, ts, other)):
            t.copy_(_clamp_one(kind, t, o))

    for f, suffix in ((out_of_place, ""), (in_place, "_")):
        f.__name__ = f"_foreach_{kind}{suffix}"
        f.__doc__ = f"``{kind}`` of each tensor with a scalar, a list or tensors" + (
            ": in place, returns None." if suffix else ": a new list.")
    return out_of_place, in_place


def _clamp_one(kind: str, t: Tensor, o: Any) -> Tensor:
    lower = kind in ("clamp_min", "maximum")
    if isinstance(o, Tensor):
        return _C.maximum(t, o) if lower else _C.minimum(t, o)
    return t.clamp(min=o) if lower else t.clamp(max=o)


def _install() -> None:
    ember = sys.modules["ember"]
    fns: dict[str, Callable[..., Any]] = {}
    for op, alpha in (("add", True), ("sub", True), ("mul", False), ("div", False), ("pow", False)):
        fns[f"_foreach_{op}"], fns[f"_foreach_{op}_"] = _binary(op, alpha)
    for op in ("sqrt", "exp", "log", "abs", "neg", "reciprocal", "sign", "sigmoid", "tanh",
               "sin", "cos", "floor", "ceil", "round", "trunc", "frac", "log1p", "expm1", "erf"):
        fns[f"_foreach_{op}"], fns[f"_foreach_{op}_"] = _unary(op)
    for op in ("addcmul", "addcdiv"):
        fns[f"_foreach_{op}"], fns[f"_foreach_{op}_"] = _pointwise(op)
    for kind in ("clamp_min", "clamp_max", "maximum", "minimum"):
        fns[f"_foreach_{kind}"], fns[f"_foreach_{kind}_"] = _clamp(kind)
    fns.update(_foreach_lerp=_foreach_lerp, _foreach_lerp_=_foreach_lerp_, _foreach_norm=_foreach_norm,
               _foreach_zero_=_foreach_zero_, _foreach_copy_=_foreach_copy_)
    for name, fn in fns.items():
        if not hasattr(ember, name):
            setattr(ember, name, fn)
            globals()[name] = fn
            __all__.append(name)


_install()
