"""Memory formats: ``ember.contiguous_format``, ``ember.channels_last`` (NHWC strides for a 4-d
tensor), ``ember.channels_last_3d`` (NDHWC for 5-d) and ``ember.preserve_format``, accepted where
PyTorch takes ``memory_format=``: ``Tensor.contiguous``, ``Tensor.is_contiguous``,
``Tensor.clone``, ``Tensor.to`` and ``Module.to``. A channels-last tensor is an ordinary strided
tensor whose channel dimension is innermost in memory; every op reads it through its strides, so
results are the same as for the contiguous tensor.

>>> import ember
>>> x = ember.zeros(2, 3, 4, 5).contiguous(memory_format=ember.channels_last)
>>> x.stride(), x.is_contiguous(), x.is_contiguous(memory_format=ember.channels_last)
((60, 1, 15, 3), False, True)
"""

from __future__ import annotations

from typing import Any

from ember._C import Tensor

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d",
           "preserve_format"]


class _NamedConstant:
    """A constant of the ember namespace (a memory format, a layout): printed as
    ``ember.<name>`` and pickled as the module attribute of that name, so it stays a singleton.
    """

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"ember.{self._name}"

    def __reduce__(self) -> str:
        return self._name  # pickles as the module attribute <its class's module>.<name>


class memory_format(_NamedConstant):
    """How a tensor's elements are laid out in memory (see the module docstring)."""

    __slots__ = ()


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

# the dimension order, outermost first, that each channels-last format keeps in memory
_ORDERS = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def _check(fmt: Any, op: str) -> None:
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{op}(): memory_format must be an ember.memory_format (such as "
                        f"ember.channels_last), got {type(fmt).__name__}")


def _order(t: Tensor, fmt: memory_format, op: str) -> tuple[int, ...]:
    ndim, order = _ORDERS[fmt]
    if t.dim() != ndim:
        raise RuntimeError(f"{op}(): required rank {ndim} tensor to use {fmt} format, got a "
                           f"tensor of rank {t.dim()}")
    return order


def _strides_follow(t: Tensor, order: tuple[int, ...]) -> bool:
    """Whether t's strides are the dense ones for its dims laid out in `order` (size-1 dims
    may have any stride)."""
    expected = 1
    for d in reversed(order):
        size = t.shape[d]
        if size != 1 and t.stride(d) != expected:
            return False
        expected *= size
    return True


def _suggest(t: Tensor) -> memory_format:
    """PyTorch's suggest_memory_format: channels-last when t's strides order a 4-d tensor N, H,
    W, C from the outermost dim in (5-d: N, D, H, W, C), size-1 dims taking any stride that
    keeps that order; else contiguous. An empty tensor, or one whose C stride could as well be
    read as contiguous, is contiguous."""
    n = t.dim()
    if n not in (4, 5):
        return contiguous_format
    shape, stride = t.shape, t.stride()
    if stride[1] == 0:
        return contiguous_format
    low = 0
    for d in _ORDERS[channels_last if n == 4 else channels_last_3d][1][::-1]:
        if shape[d] == 0 or stride[d] < low or (d == 0 and low == stride[1]):
            return contiguous_format
        low = stride[d] * max(shape[d], 1)
    return channels_last if n == 4 else channels_last_3d


def _dense_order(t: Tensor) -> list[int] | None:
    """t's dims from the largest stride to the smallest when t is dense (no gaps or overlaps:
    a transposed or channels-last tensor), else None."""
    stride = t.stride()
    order = sorted(range(t.dim()), key=lambda d: -stride[d])
    expected = 1
    for d in reversed(order):
        size = t.shape[d]
        if size != 1 and stride[d] != expected:
            return None
        expected *= size
    return order


def _inferred_order(t: Tensor) -> list[int]:
    """The memory order (outermost dim first) that preserve_format gives a copy of a tensor
    with gaps or overlaps, as PyTorch infers it: dims by decreasing stride, equal strides by
    decreasing size, and a broadcast (stride 0) dim left where it stands among the others."""
    shape, stride = t.shape, t.stride()
    perm = list(range(t.dim()))[::-1]  # innermost first

    def outward(a: int, b: int) -> int:  # > 0: dim a belongs outside dim b
        if stride[a] == 0 or stride[b] == 0:
            return 0
        if stride[a] != stride[b]:
            return 1 if stride[a] > stride[b] else -1
        return 1 if shape[a] > shape[b] else 0

    for i in range(1, len(perm)):
        j = i
        for k in range(i - 1, -1, -1):
            c = outward(perm[k], perm[j])
            if c > 0:
                perm[k], perm[j] = perm[j], perm[k]
                j = k
            elif c < 0:
                break
    return perm[::-1]


def _like_layout(out: Tensor, t: Tensor) -> Tensor:
    """out (t's values, or values for a tensor shaped like t) laid out as preserve_format lays
    out a copy of t: t's own strides when t is dense, else dense strides in the memory order t
    has (differentiable)."""
    order = _dense_order(t)
    dense = order is not None
    if order is None:
        order = _inferred_order(t)
    if order != sorted(order) or not _plain_is_contiguous(out):
        out = _copy_in_order(out, order)
    if dense and out.stride() != t.stride():  # only size-1 dims differ: t's strides for them
        out = out.as_strided(t.shape, t.stride(), out.storage_offset())
    return out


def _canonical_strides(t: Tensor, order: Any) -> tuple[int, ...]:
    """The dense strides of t's shape laid out in `order` (size-1 dims included)."""
    strides = [0] * t.dim()
    expected = 1
    for d in reversed(order):
        strides[d] = expected
        expected *= max(t.shape[d], 1)
    return tuple(strides)


def _in_format(t: Tensor, fmt: memory_format, op: str, exact: bool = False) -> Tensor:
    """t itself when already laid out in fmt, else a copy that is (differentiable). With
    ``exact``, "laid out in fmt" means exactly fmt's canonical strides (what ``to`` gives, as
    PyTorch's does), not only strides that agree wherever a dim's size is above 1."""
    if fmt is contiguous_format:
        return _plain_contiguous(t)
    order = _order(t, fmt, op)
    if t.stride() == _canonical_strides(t, order) or not exact and _strides_follow(t, order):
        return t
    return _copy_in_order(t, order)


def _copy_in_order(t: Tensor, order: Any) -> Tensor:
    """A copy of t with dense strides in `order` (outermost dim first; differentiable)."""
    p = t.permute(*order)
    c = _plain_contiguous(p)
    if c is p:  # p is contiguous already (perhaps with odd size-1 strides): a fresh plain copy
        c = _plain_clone(p.reshape(-1)).view(tuple(p.shape))
    return c.permute(*[list(order).index(d) for d in range(len(order))])


_plain_contiguous = Tensor.contiguous
_plain_is_contiguous = Tensor.is_contiguous
_plain_clone = Tensor.clone
_plain_to = Tensor.to


def _contiguous(self: Tensor, *, memory_format: memory_format = contiguous_format) -> Tensor:
    """self if laid out in memory_format already, else a copy that is.

    >>> import ember
    >>> ember.ones(1, 2, 2, 2).contiguous(memory_format=ember.channels_last).stride()
    (8, 1, 4, 2)
    """
    _check(memory_format, "contiguous")
    if memory_format is preserve_format:
        raise RuntimeError("contiguous(): preserve memory format is unsupported by the "
                           "contiguous operator")
    return _in_format(self, memory_format, "contiguous")


def _is_contiguous(self: Tensor, memory_format: memory_format = contiguous_format) -> bool:
    """Whether self is dense in memory_format's dimension order.

    >>> import ember
    >>> ember.ones(2, 3).t().is_contiguous()
    False
    """
    _check(memory_format, "is_contiguous")
    if memory_format is contiguous_format:
        return _plain_is_contiguous(self)
    if memory_format is preserve_format:
        raise RuntimeError("is_contiguous(): preserve memory format is unsupported")
    ndim, order = _ORDERS[memory_format]
    return self.dim() == ndim and _strides_follow(self, order)


def _clone(self: Tensor, *, memory_format: memory_format = preserve_format) -> Tensor:
    """A copy of self with its own storage, in memory_format (by default the layout of self:
    a channels-last tensor clones channels-last).

    >>> import ember
    >>> ember.ones(2).clone().tolist()
    [1.0, 1.0]
    """
    _check(memory_format, "clone")
    if memory_format is preserve_format:  # the C++ clone keeps self's layout
        return _plain_clone(self)
    if memory_format is contiguous_format:
        if not _plain_is_contiguous(self):
            return _plain_contiguous(self)
        out = _plain_clone(self)  # (keeps the strides of size-1 dims: the plain ones wanted)
        plain = _canonical_strides(self, range(self.dim()))
        return out if out.stride() == plain else _copy_in_order(self, range(self.dim()))
    out = _in_format(self, memory_format, "clone", exact=True)
    return _plain_clone(out) if out is self else out


def _to(self: Tensor, *args: Any, memory_format: memory_format = preserve_format,
        **kwargs: Any) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``, each with an
    optional ``memory_format=`` (``ember.channels_last`` lays a 4-d tensor out as NHWC).

    >>> import ember
    >>> ember.ones(1, 3, 2, 2).to(memory_format=ember.channels_last).stride()
    (12, 1, 6, 3)
    """
    _check(memory_format, "to")
    out = _plain_to(self, *args, **kwargs)
    if memory_format is preserve_format:
        return out
    return _in_format(out, memory_format, "to", exact=True)


_to.__wrapped__ = _plain_to  # type: ignore[attr-defined]
Tensor.contiguous = _contiguous
Tensor.is_contiguous = _is_contiguous
Tensor.clone = _clone
Tensor.to = _to


_LIKE = ("empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
         "randint_like")


def _like_with_format(name: str, fn: Any) -> Any:
    def like(input: Tensor, *args: Any, memory_format: memory_format = preserve_format,
             **kwargs: Any) -> Tensor:
        _check(memory_format, name)
        out = fn(input, *args, **kwargs)
        if (not isinstance(out, Tensor) or not isinstance(input, Tensor)
                or memory_format is contiguous_format):
            return out  # (a sparse or nested input has no strides to keep)
        if memory_format is preserve_format:
            if out.stride() == input.stride() or tuple(out.shape) != tuple(input.shape):
                return out
            return _like_layout(out, input)
        return _in_format(out, memory_format, name, exact=True)

    like.__name__ = name
    like.__qualname__ = name
    like.__doc__ = (f"``{name}`` with ``memory_format=`` (by default the layout of ``input``: "
                    "a channels-last input gives a channels-last result).\n\n"
                    + (getattr(fn, "__doc__", None) or ""))
    like.__wrapped__ = fn  # type: ignore[attr-defined]
    like._takes_memory_format = True  # type: ignore[attr-defined]
    return like


def install(namespace: dict) -> None:
    """Gives ember's ``*_like`` factories ``memory_format=`` (PyTorch's optimizers call
    ``zeros_like(p, memory_format=torch.preserve_format)``)."""
    for name in _LIKE:
        fn = namespace.get(name)
        if fn is not None and not getattr(fn, "_takes_memory_format", False):
            namespace[name] = _like_with_format(name, fn)
