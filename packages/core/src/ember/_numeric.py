"""PyTorch's floating-point and numerical helpers that are compositions of ember's ops:
``nextafter`` / ``Tensor.nextafter_``
(the neighbouring representable value, from the bits), ``isreal``, ``gradient`` (central
differences, uniform or on coordinates, first- or second-order edges) and ``histogramdd``
(multi-dimensional histograms, as ``torch.histogramdd``).

>>> import ember
>>> ember.isreal(ember.tensor([1.0])).tolist()
[True]
>>> ember.gradient(ember.tensor([1.0, 4.0, 9.0]))[0].tolist()
[3.0, 4.0, 5.0]
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

from ember import _C
from ember._C import Tensor

__all__ = ["nextafter", "isreal", "gradient", "histogramdd"]

# (integer dtype of the same width, mantissa bits, exponent mask, exponent field of [0.5, 1))
_BITS = {
    "float64": ("int64", 52, 0x7FF, 1022),
    "float32": ("int32", 23, 0xFF, 126),
    "float16": ("int16", 10, 0x1F, 14),
    "bfloat16": ("int16", 7, 0xFF, 126),
}


def _ember() -> Any:
    """The ember package (its Python-level functions, such as result_type)."""
    import ember

    return ember


def _layout(dtype: Any) -> tuple[Any, int, int, int]:
    name = str(dtype).rsplit(".", 1)[-1]
    itype, mant, mask, half = _BITS[name]
    return getattr(_C, itype), mant, mask, half


def _rt(name: str, fields: Sequence[str], values: Sequence[Any]) -> Any:
    from ember import return_types

    return return_types._make(name, fields)(*values)


def nextafter(input: Tensor, other: Tensor | float, *, out: Tensor | None = None) -> Tensor:
    """The next representable value after each element of ``input`` towards ``other``
    (their dtypes promote; floating dtypes only): ``other`` where they are equal, NaN where
    either is NaN.

    >>> import ember
    >>> ember.nextafter(ember.tensor([1.0]), ember.tensor([2.0])).item() - 1.0
    1.1920928955078125e-07
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"nextafter(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if not isinstance(other, Tensor):
        other = _C.tensor(other, dtype=input.dtype if input.is_floating_point() else None)
    dtype = _ember().result_type(input, other)
    if not dtype.is_floating_point:
        raise _ember().DtypeNotImplementedError(  # (NotImplementedError, as PyTorch's)
            f"nextafter: expected floating-point tensors, got {input.dtype} and {other.dtype}")
    x, y = _ember().broadcast_tensors(input.detach().to(dtype), other.detach().to(dtype))
    itype = _layout(dtype)[0]
    bits = x.contiguous().view(itype)
    up = y > x
    step = _C.where(up ^ (x < 0), _C.ones_like(bits), -_C.ones_like(bits))
    r = (bits + step).view(dtype)
    tiny = _C.ones_like(bits).view(dtype)  # the smallest subnormal
    r = _C.where(x == 0, _C.where(y > 0, tiny, -tiny), r)
    r = _C.where(x == y, y, r)
    r = _C.where(_C.isnan(x) | _C.isnan(y), x + y, r)
    if out is not None:
        if not isinstance(out, Tensor):
            raise TypeError(f"nextafter(): argument 'out' must be Tensor, not "
                            f"{type(out).__name__}")
        if _C.is_grad_enabled() and (out.requires_grad or any(
                isinstance(t, Tensor) and t.requires_grad for t in (input, other))):
            raise RuntimeError("nextafter(): functions with out=... arguments don't support "
                               "automatic differentiation, but one of the arguments requires "
                               "grad.")
        _C._prepare_out(out, r, "nextafter", True)
        out.copy_(r)
        return out
    return r


def _nextafter_(self: Tensor, other: Tensor | float) -> Tensor:
    r = nextafter(self, other)
    if r.shape != self.shape:
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast "
                           f"shape {list(r.shape)}")
    if r.dtype != self.dtype and not _ember().can_cast(r.dtype, self.dtype):
        raise RuntimeError(f"result type {r.dtype} can't be cast to the desired output type "
                           f"{self.dtype}")
    return self.copy_(r)


def isreal(input: Tensor) -> Tensor:
    """Whether each element is real: a zero imaginary part for complex tensors, always True
    for real ones.

    >>> import ember
    >>> ember.isreal(ember.tensor([1 + 0j, 1 + 1j])).tolist()
    [True, False]
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"isreal(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.is_complex():
        return _C.imag(input) == 0
    return _C.ones_like(input, dtype=_C.bool)


# ---- gradient --------------------------------------------------------------------------------


def _is_scalar(v: Any) -> bool:
    return isinstance(v, numbers.Number) or (isinstance(v, Tensor) and v.ndim == 0)


def _gradient_dims(input: Tensor, dim: Any) -> list[int]:
    nd = input.ndim
    dims = list(range(nd)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    out = []
    for d in dims:
        if not -nd <= d < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                             f"{nd - 1}], but got {d})")
        out.append(d % nd)
    if len(set(out)) != len(out):
        dup = next(d for d in out if out.count(d) > 1)
        raise RuntimeError(f"dim {dup} appears multiple times in the list of dims")
    return out


def _slice(t: Tensor, d: int, start: int, stop: int | None = None) -> Tensor:
    n = t.shape[d]
    stop = n if stop is None else stop % n if stop < 0 else stop
    start = start % n if start < 0 else start
    return t.narrow(d, start, stop - start)


def _along(v: Tensor, d: int, nd: int) -> Tensor:
    """A 1-D tensor shaped to broadcast along dim d of an nd-dim tensor."""
    shape = [1] * nd
    shape[d] = v.shape[0]
    return v.reshape(shape)


def _gradient_uniform(f: Tensor, d: int, h: Any, edge_order: int) -> Tensor:
    inner = (_slice(f, d, 2) - _slice(f, d, 0, -2)) / (2 * h)
    f0, f1, f2 = (_slice(f, d, i, i + 1) for i in range(3)) if edge_order == 2 else \
        (_slice(f, d, 0, 1), _slice(f, d, 1, 2), None)
    g0 = (-1.5 * f0 + 2 * f1 - 0.5 * f2) / h if edge_order == 2 else (f1 - f0) / h
    n = f.shape[d]
    la, lb = _slice(f, d, n - 1, n), _slice(f, d, n - 2, n - 1)
    if edge_order == 2:
        lc = _slice(f, d, n - 3, n - 2)
        gn = (0.5 * lc - 2 * lb + 1.5 * la) / h
    else:
        gn = (la - lb) / h
    return _C.cat([g0, inner, gn], d)


def _gradient_coords(f: Tensor, d: int, x: Tensor, edge_order: int) -> Tensor:
    nd, n = f.ndim, f.shape[d]
    dx = x[1:] - x[:-1]
    a1, a2 = dx[:-1], dx[1:]
    ca = _along(-a2 / (a1 * (a1 + a2)), d, nd)
    cb = _along((a2 - a1) / (a1 * a2), d, nd)
    cc = _along(a1 / (a2 * (a1 + a2)), d, nd)
    inner = ca * _slice(f, d, 0, -2) + cb * _slice(f, d, 1, -1) + cc * _slice(f, d, 2)
    f0, f1 = _slice(f, d, 0, 1), _slice(f, d, 1, 2)
    lb, la = _slice(f, d, n - 2, n - 1), _slice(f, d, n - 1, n)
    if edge_order == 1:
        g0 = (f1 - f0) / dx[0]
        gn = (la - lb) / dx[-1]
    else:
        h1, h2 = dx[0], dx[1]
        f2 = _slice(f, d, 2, 3)
        g0 = (-(2 * h1 + h2) / (h1 * (h1 + h2)) * f0 + (h1 + h2) / (h1 * h2) * f1
              - h1 / (h2 * (h1 + h2)) * f2)
        h1, h2 = dx[-2], dx[-1]
        lc = _slice(f, d, n - 3, n - 2)
        gn = (h2 / (h1 * (h1 + h2)) * lc - (h2 + h1) / (h1 * h2) * lb
              + (2 * h2 + h1) / (h2 * (h1 + h2)) * la)
    return _C.cat([g0, inner, gn], d)


def gradient(input: Tensor, *, spacing: Any = 1, dim: int | Sequence[int] | None = None,
             edge_order: int = 1) -> tuple[Tensor, ...]:
    """The gradient of a function sampled in ``input`` along each of ``dim`` (all dims by
    default), as ``torch.gradient``: second-order central differences inside, one-sided
    differences of order ``edge_order`` (1 or 2) at the edges. ``spacing`` is one scalar for
    every dim, a list of one scalar per dim, or a list of 1-D coordinate tensors (the
    sample points along each dim, not necessarily uniform). Integer input gives float32.

    >>> import ember
    >>> ember.gradient(ember.tensor([1.0, 4.0, 9.0, 16.0]), spacing=2.0)[0].tolist()
    [1.5, 2.0, 3.0, 3.5]
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"gradient(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if input.dtype == _C.uint8:  # (PyTorch refuses it before anything else)
        raise RuntimeError("torch.gradient does not support uint8 input.")
    dims = _gradient_dims(input, dim)
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if _is_scalar(spacing):
        spacings: list[Any] = [spacing] * len(dims)
    else:
        spacings = list(spacing)
        if len(spacings) != len(dims):
            if dim is None:
                raise RuntimeError(
                    f"torch.gradient expected spacing to be unspecified, a scalar, or a list of "
                    f"length equal to 'self.dim() = {input.ndim}', since dim argument was not "
                    f"given, but got a list of length {len(spacings)}")
            raise RuntimeError(
                f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing "
                f"and dim arguments to have the same length, but got a spacing argument of "
                f"length {len(spacings)} and a dim argument of length {len(dims)}.")
        if any(isinstance(s, Tensor) for s in spacings):
            for s in spacings:
                if not isinstance(s, Tensor) or s.ndim != 1:
                    nd = s.ndim if isinstance(s, Tensor) else 0
                    raise RuntimeError(f"torch.gradient expected each element of spacing to have "
                                       f"one dimension, but got an element with {nd} "
                                       f"dimensions!")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
    f = input
    if not (f.is_floating_point() or f.is_complex()):
        f = f.to(_C.get_default_dtype())
    out = []
    for d, h in zip(dims, spacings):
        if isinstance(h, Tensor) and h.ndim == 1:
            if h.shape[0] != input.shape[d]:
                raise RuntimeError(f"torch.gradient expected the coordinates for dim {d} to "
                                   f"have {input.shape[d]} elements (the size of that dim), "
                                   f"but got {h.shape[0]}")
            x = h if (h.is_floating_point() or h.is_complex()) else h.to(f.dtype)
            out.append(_gradient_coords(f, d, x.to(_ember().result_type(f, x)), edge_order))
        else:
            if isinstance(h, Tensor):
                h = h.item()
            out.append(_gradient_uniform(f, d, h, edge_order))
    return tuple(out)


# ---- histogramdd -----------------------------------------------------------------------------


def histogramdd(input: Tensor, bins: Any, *, range: Sequence[float] | None = None,
                weight: Tensor | None = None, density: bool = False, out: Any = None) -> Any:
    """A D-dimensional histogram of the points in the last dim of ``input`` (..., D), as
    ``torch.histogramdd``: ``bins`` is a bin count for every dim, a list of counts, or a list
    of increasing 1-D tensors of bin edges; with counts, the bins split ``range``
    (min0, max0, min1, max1, ...; default: the data's extent, widened by 0.5 each way where it
    is a single value) evenly. A point falls in bin i when ``edges[i] <= x < edges[i + 1]``
    (the last bin includes its right edge); points outside are not counted. ``weight``
    (input's shape without the last dim) weighs each point; ``density`` divides by the total
    and the bin volumes. Returns ``(hist, bin_edges)``.

    >>> import ember
    >>> r = ember.histogramdd(ember.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]]), bins=2)
    >>> r.hist.tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"histogramdd(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if input.ndim < 2:
        raise RuntimeError(f"torch.histogramdd: input tensor should have at least 2 dimensions, "
                           f"but got {input.ndim}")
    if isinstance(bins, numbers.Integral):
        bins = [int(bins)] * input.shape[-1]
    bins = list(bins)
    rng = None
    if bins and all(isinstance(b, Tensor) for b in bins):
        counts, edge_tensors = [], [b.detach() for b in bins]  # range: unused with edges
    else:
        counts, edge_tensors = [int(b) for b in bins], []
        if range is not None:
            rng = _C.tensor([float(v) for v in range], dtype=_C.float64)
    if weight is not None:
        if not isinstance(weight, Tensor):
            raise TypeError(f"histogramdd(): argument 'weight' must be Tensor, not "
                            f"{type(weight).__name__}")
        if list(weight.shape) != list(input.shape[:-1]):  # torch's message (shapes as lists)
            raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should have "
                               f"the same shape as the input tensor excluding its innermost "
                               f"dimension, but got input with shape {list(input.shape)} and "
                               f"weight with shape {list(weight.shape)}")
        weight = weight.detach()
    device = input.device
    if device.type != "cpu":  # the kernel is the CPU one: count on the host, results back
        edge_tensors = [e.cpu() for e in edge_tensors]
        hist, *edges = _C._histogramdd(input.detach().cpu(), counts, edge_tensors, rng,
                                       None if weight is None else weight.cpu(), density)
        hist, edges = hist.to(device), [e.to(device) for e in edges]
    else:
        hist, *edges = _C._histogramdd(input.detach(), counts, edge_tensors, rng, weight,
                                       density)
    if out is not None:
        o_hist, o_edges = out
        o_hist.resize_(hist.shape)
        o_hist.copy_(hist)
        for o, e in zip(o_edges, edges):
            o.resize_(e.shape)
            o.copy_(e)
        hist, edges = o_hist, list(o_edges)
    return _rt("histogramdd", ("hist", "bin_edges"), (hist, tuple(edges)))


def install(namespace: dict) -> None:
    """Adds the functions to ember's namespace and ``nextafter``/``nextafter_``/``isreal`` to
    Tensor (where they are missing)."""
    for name in __all__:
        namespace.setdefault(name, globals()[name])
    for name, fn in (("nextafter", nextafter), ("nextafter_", _nextafter_),
                     ("isreal", isreal)):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
