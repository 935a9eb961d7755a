"""The masked reductions and normalizations of ``ember.masked`` (see the package's docstring):
each takes a boolean ``mask`` broadcast to the input and computes over its True elements."""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence, TypeVar, Union

import ember
from ember import _C
from ember._C import Tensor

__all__ = ["amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp",
           "logsumexp", "mean", "median", "norm", "normalize", "prod", "softmax", "softmin",
           "std", "sum", "var"]

Dims = Union[int, Sequence[int], None]
_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def _takes_masked(fn: _Fn) -> _Fn:
    """fn also takes a MaskedTensor input: its data, with its mask (and ``mask`` when given
    too), as PyTorch's masked functions do; the result is a plain tensor."""
    @functools.wraps(fn)
    def run(input: Any, *args: Any, **kwargs: Any) -> Any:
        inner = getattr(input, "_masked_mask", None)
        if inner is not None and isinstance(input, Tensor):
            given = kwargs.get("mask")
            kwargs["mask"] = inner if given is None else inner & given
            input = input._masked_data
        return fn(input, *args, **kwargs)

    return run  # type: ignore[return-value]


def _input(input: Tensor, dtype: Any) -> Tensor:
    return input if dtype is None or input.dtype is dtype else input.to(dtype)


def _mask(input: Tensor, mask: Tensor | None) -> Tensor | None:
    """The mask as a bool tensor of the input's shape (None: everything)."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked: expected mask to be a Tensor, got {type(mask).__name__}")
    if mask.dtype is not _C.bool:
        raise ValueError(f"masked: expected mask to have dtype bool, got {mask.dtype}")
    try:
        return ember.broadcast_to(mask, input.shape)
    except RuntimeError:
        raise ValueError(f"masked: mask of shape {tuple(mask.shape)} cannot be broadcast to the "
                         f"input's shape {tuple(input.shape)}") from None


def _fill(x: Tensor, mask: Tensor | None, value: float) -> Tensor:
    return x if mask is None else ember.where(mask, x, ember.full((), value, dtype=x.dtype,
                                                                   device=x.device))


def _dims(x: Tensor, dim: Dims) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(x.ndim))
    return (dim,) if isinstance(dim, int) else tuple(dim)


def _lowest(dtype: Any) -> float:
    return -math.inf if dtype.is_floating_point else ember.iinfo(dtype).min


def _highest(dtype: Any) -> float:
    return math.inf if dtype.is_floating_point else ember.iinfo(dtype).max


@_takes_masked
def sum(input: Tensor, dim: Dims = None, *, keepdim: bool | None = False, dtype: Any = None,
        mask: Tensor | None = None) -> Tensor:
    """Sum of the unmasked elements over ``dim`` (all dims when None); 0 where none is."""
    x = _input(input, dtype)
    return _fill(x, _mask(x, mask), 0).sum(dim=_dims(x, dim), keepdim=bool(keepdim))


@_takes_masked
def prod(input: Tensor, dim: Dims = None, *, keepdim: bool | None = False, dtype: Any = None,
         mask: Tensor | None = None) -> Tensor:
    """Product of the unmasked elements; 1 where none is."""
    x = _fill(_input(input, dtype), _mask(input, mask), 1)
    if x.ndim == 0:  # (still promoted as prod promotes: integers to int64)
        return x.prod()
    for d in sorted((d % max(x.ndim, 1) for d in _dims(x, dim)), reverse=True):
        x = x.prod(d, keepdim=bool(keepdim))
    return x


@_takes_masked
def amax(input: Tensor, dim: Dims = None, *, keepdim: bool | None = False, dtype: Any = None,
         mask: Tensor | None = None) -> Tensor:
    """Largest unmasked element; -inf (an integer type's minimum) where none is."""
    x = _input(input, dtype)
    return _fill(x, _mask(x, mask), _lowest(x.dtype)).amax(dim=_dims(x, dim),
                                                          keepdim=bool(keepdim))


@_takes_masked
def amin(input: Tensor, dim: Dims = None, *, keepdim: bool | None = False, dtype: Any = None,
         mask: Tensor | None = None) -> Tensor:
    """Smallest unmasked element; inf (an integer type's maximum) where none is."""
    x = _input(input, dtype)
    return _fill(x, _mask(x, mask), _highest(x.dtype)).amin(dim=_dims(x, dim),
                                                           keepdim=bool(keepdim))


def _arg(input: Tensor, dim: int | None, keepdim: bool | None, dtype: Any,
         mask: Tensor | None, largest: bool) -> Tensor:
    x = input
    value = _lowest(x.dtype) if largest else _highest(x.dtype)
    x = _fill(x, _mask(x, mask), value)
    out = x.argmax(dim, keepdim=bool(keepdim)) if largest else x.argmin(dim,
                                                                       keepdim=bool(keepdim))
    return out.to(dtype if dtype is not None else input.dtype)  # PyTorch's dtype default


@_takes_masked
def argmax(input: Tensor, dim: int | None = None, *, keepdim: bool | None = False,
           dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    """Index of the largest unmasked element (in the input's dtype unless ``dtype`` is given,
    as PyTorch returns it)."""
    return _arg(input, dim, keepdim, dtype, mask, True)


@_takes_masked
def argmin(input: Tensor, dim: int | None = None, *, keepdim: bool | None = False,
           dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    """Index of the smallest unmasked element (in the input's dtype unless ``dtype`` is
    given)."""
    return _arg(input, dim, keepdim, dtype, mask, False)


def _floating(input: Tensor, dtype: Any, name: str) -> Tensor:
    x = _input(input, dtype)
    if not (x.is_floating_point() or x.is_complex()):
        raise ValueError(f"{name}(): Could not infer output dtype. Input dtype must be either a "
                         f"floating point or complex dtype. Got: {x.dtype}")
    return x


def _count(x: Tensor, mask: Tensor | None, dims: tuple[int, ...], keepdim: bool) -> Tensor:
    if mask is None:
        n = 1
        for d in dims:
            n *= x.shape[d]
        shape = [1 if i in [d % x.ndim for d in dims] else s for i, s in enumerate(x.shape)]
        if not keepdim:
            shape = [s for i, s in enumerate(shape) if i not in [d % x.ndim for d in dims]]
        return ember.full(shape, n, dtype=x.dtype, device=x.device)
    return mask.to(x.dtype).sum(dim=dims, keepdim=keepdim)


@_takes_masked
def mean(input: Tensor, dim: Dims = None, *, keepdim: bool | None = False, dtype: Any = None,
         mask: Tensor | None = None) -> Tensor:
    """Mean of the unmasked elements; NaN where none is."""
    x = _floating(input, dtype, "mean")
    m = _mask(x, mask)
    dims = _dims(x, dim)
    return _fill(x, m, 0).sum(dim=dims, keepdim=bool(keepdim)) / _count(x, m, dims,
                                                                         bool(keepdim))


@_takes_masked
def var(input: Tensor, dim: Dims = None, unbiased: bool | None = None, *,
        correction: float | None = None, keepdim: bool | None = False, dtype: Any = None,
        mask: Tensor | None = None) -> Tensor:
    """Variance of the unmasked elements (``correction`` 1 unless ``unbiased=False`` or given);
    NaN where fewer than ``correction`` + 1 are."""
    if dtype is None and not (input.is_floating_point() or input.is_complex()):
        dtype = ember.get_default_dtype()  # PyTorch's var / std of integers: in the default
    x = _floating(input, dtype, "var")
    m = _mask(x, mask)
    dims = _dims(x, dim)
    if correction is None:
        correction = 0 if unbiased is False else 1
    centre = _fill(x, m, 0).sum(dim=dims, keepdim=True) / _count(x, m, dims, True)
    dev = _fill(x - centre, m, 0)
    sq = (dev * dev.conj()).real if dev.is_complex() else dev * dev
    count = _count(sq, m, dims, bool(keepdim))
    return sq.sum(dim=dims, keepdim=bool(keepdim)) / (count - correction).clamp(min=0)


@_takes_masked
def std(input: Tensor, dim: Dims = None, unbiased: bool | None = None, *,
        correction: float | None = None, keepdim: bool | None = False, dtype: Any = None,
        mask: Tensor | None = None) -> Tensor:
    """Standard deviation of the unmasked elements: the square root of :func:`var`."""
    return var(input, dim, unbiased, correction=correction, keepdim=keepdim, dtype=dtype,
               mask=mask).sqrt()


@_takes_masked
def median(input: Tensor, dim: int = -1, *, keepdim: bool = False, dtype: Any = None,
           mask: Tensor | None = None) -> Tensor:
    """Median (the lower of the two middle values) of the unmasked elements along ``dim``;
    NaN where none is."""
    x = _floating(input, dtype, "median")
    return _fill(x, _mask(x, mask), math.nan).nanmedian(dim, keepdim=keepdim).values


@_takes_masked
def logsumexp(input: Tensor, dim: Dims = None, *, keepdim: bool = False, dtype: Any = None,
              mask: Tensor | None = None) -> Tensor:
    """log(sum(exp(x))) over the unmasked elements; -inf where none is."""
    x = _input(input, dtype)
    return _fill(x, _mask(x, mask), -math.inf).logsumexp(_dims(x, dim), keepdim=keepdim)


def logaddexp(input: Tensor, other: Tensor, *, dtype: Any = None,
              input_mask: Tensor | None = None, other_mask: Tensor | None = None) -> Tensor:
    """log(exp(input) + exp(other)), masked-out elements of either side counting as -inf."""
    a, b = _input(input, dtype), _input(other, dtype)
    return ember.logaddexp(_fill(a, _mask(a, input_mask), -math.inf),
                           _fill(b, _mask(b, other_mask), -math.inf))


@_takes_masked
def norm(input: Tensor, ord: float | None = 2.0, dim: Dims = None, *,
         keepdim: bool | None = False, dtype: Any = None, mask: Tensor | None = None) -> Tensor:
    """Vector ``ord``-norm of the unmasked elements; 0 where none is (inf for ord=-inf)."""
    x = _input(input, dtype)
    ord = 2.0 if ord is None else ord
    x = _fill(x, _mask(x, mask), math.inf if ord == -math.inf else 0)
    return ember.linalg.vector_norm(x, ord, dim=_dims(x, dim), keepdim=bool(keepdim))


@_takes_masked
def normalize(input: Tensor, ord: float, dim: int, *, eps: float = 1e-12, dtype: Any = None,
              mask: Tensor | None = None) -> Tensor:
    """input divided by the ``ord``-norm of its unmasked elements along ``dim`` (at least
    ``eps``); masked-out positions are 0."""
    x = _input(input, dtype)
    m = _mask(x, mask)
    nrm = norm(x, ord, dim, keepdim=True, mask=m)
    return _fill(x, m, 0) / nrm.clamp(min=eps)


@_takes_masked
def softmax(input: Tensor, dim: int, *, dtype: Any = None,
            mask: Tensor | None = None) -> Tensor:
    """Softmax over the unmasked elements along ``dim``: masked-out positions get 0."""
    x = _input(input, dtype)
    return ember.softmax(_fill(x, _mask(x, mask), -math.inf), dim)


@_takes_masked
def log_softmax(input: Tensor, dim: int, *, dtype: Any = None,
                mask: Tensor | None = None) -> Tensor:
    """Log-softmax over the unmasked elements along ``dim``: masked-out positions get -inf."""
    x = _input(input, dtype)
    return ember.log_softmax(_fill(x, _mask(x, mask), -math.inf), dim)


@_takes_masked
def softmin(input: Tensor, dim: int, *, dtype: Any = None,
            mask: Tensor | None = None) -> Tensor:
    """Softmin (softmax of the negated input) over the unmasked elements along ``dim``."""
    x = _input(input, dtype)
    return ember.softmax(-_fill(x, _mask(x, mask), math.inf), dim)


@_takes_masked
def cumsum(input: Tensor, dim: int, *, dtype: Any = None,
           mask: Tensor | None = None) -> Tensor:
    """Cumulative sum along ``dim`` in which masked-out elements count as 0."""
    x = _input(input, dtype)
    return _fill(x, _mask(x, mask), 0).cumsum(dim)


@_takes_masked
def cumprod(input: Tensor, dim: int, *, dtype: Any = None,
            mask: Tensor | None = None) -> Tensor:
    """Cumulative product along ``dim`` in which masked-out elements count as 1."""
    x = _input(input, dtype)
    return _fill(x, _mask(x, mask), 1).cumprod(dim)
