"""PyTorch functions that real programs call and ember lacked (found by running PyTorch-style
example programs through a ``torch`` -> ``ember`` import shim), composed from ember's own ops so
that autograd, dtypes and devices follow: diagonals (diag, diag_embed, diagflat, trace,
fill_diagonal_), index helpers (tril_indices, triu_indices, cartesian_prod, combinations,
block_diag, unravel_index, isin), pointwise math (logaddexp, hypot, fmax, copysign, sinc,
inverse hyperbolics, ...), statistics (cov, corrcoef, logcumsumexp, trapezoid) and a few
small ones. Each is installed on ``ember`` and, where PyTorch has one, as a Tensor method."""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from typing import Any, Callable, Sequence

from ember import _C
from ember._argcheck import method_args
from ember._C import Tensor
from ember.autograd.function import Function as _Function


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _float_of(t: Tensor) -> Tensor:
    """t itself when floating or complex (a cast would drop the imaginary part), else t in the
    default float dtype (for ops that promote ints)."""
    return t if t.is_floating_point() or t.is_complex() else t.to(_C.get_default_dtype())


def _float_result_type(input: Tensor, other: Tensor) -> Any:
    """The promoted dtype of two operands, the default float dtype when it is not floating."""
    dt = result_type(input, other)
    return dt if dt.is_floating_point or dt.is_complex else _C.get_default_dtype()


def _as_tensor_like(v: Any, like: Tensor) -> Tensor:
    if isinstance(v, Tensor):
        return v
    return _C.tensor(v, dtype=like.dtype if like.is_floating_point() else None,
                     device=like.device)


# ---- diagonals --------------------------------------------------------------------------------
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """A tensor whose (dim1, dim2) diagonals at ``offset`` hold the last dim of ``input`` (one
    more dim than input), zeros elsewhere.

    >>> import ember
    >>> ember.diag_embed(ember.tensor([[1.0, 2.0]])).tolist()
    [[[1.0, 0.0], [0.0, 2.0]]]
    """
    nd = input.ndim + 1
    d1, d2 = dim1 % nd if -nd <= dim1 < nd else None, dim2 % nd if -nd <= dim2 < nd else None
    if d1 is None or d2 is None:
        raise IndexError(f"diag_embed: dim1 ({dim1}) and dim2 ({dim2}) must be in "
                         f"[{-nd}, {nd - 1}] for an output of {nd} dims")
    if d1 == d2:
        raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    if input.ndim == 0:
        raise RuntimeError("diag_embed: expected an input of at least 1 dim, got a 0-dim tensor")
    n = input.shape[-1] + abs(offset)
    batch = list(_shape(input)[:-1])
    out_shape = []
    for d in range(nd):
        out_shape.append(n if d in (d1, d2) else batch.pop(0))
    out = _C.zeros(out_shape, dtype=input.dtype, device=input.device)
    out.diagonal(offset, d1, d2).copy_(input)
    return out


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-D input as the ``diagonal``-th diagonal of a square matrix; a 2-D input's
    ``diagonal``-th diagonal as a 1-D tensor (a copy).

    >>> import ember
    >>> ember.diag(ember.tensor([1, 2])).tolist()
    [[1, 0], [0, 2]]
    >>> ember.diag(ember.tensor([[1, 2], [3, 4]]), 1).tolist()
    [2]
    """
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return input.diagonal(diagonal).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D (shape "
                       f"{_shape(input)})")


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """The flattened input as the ``offset``-th diagonal of a square matrix.

    >>> import ember
    >>> ember.diagflat(ember.tensor([[1, 2]])).tolist()
    [[1, 0], [0, 2]]
    """
    return diag_embed(input.reshape(-1), offset, 0, 1)


# PyTorch has no trace kernel for bool and the unsigned types past uint8 (whose sums work)
_NO_TRACE_DTYPES = (_C.bool, _C.uint16, _C.uint32, _C.uint64)


def trace(input: Tensor) -> Tensor:
    """The sum of a 2-D tensor's main diagonal.

    >>> import ember
    >>> ember.trace(ember.tensor([[1.0, 2.0], [3.0, 4.0]])).item()
    5.0
    """
    if input.dtype in _NO_TRACE_DTYPES:  # (checked before the rank, as PyTorch)
        import ember

        name = str(input.dtype).rsplit(".", 1)[-1]
        raise ember.DtypeNotImplementedError(f"trace: not implemented for dtype {name}")
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim} "
                           f"(shape {_shape(input)})")
    return input.diagonal().sum()


def fill_diagonal_(self: Tensor, fill_value: float, wrap: bool = False) -> Tensor:
    """Fills the main diagonal in place (all dims of equal size, or a 2-D tensor; ``wrap``
    continues down a tall matrix every ``cols + 1`` elements).

    >>> import ember
    >>> ember.zeros(2, 3).fill_diagonal_(5.0).tolist()
    [[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]]
    """
    if self.ndim < 2:
        raise RuntimeError(f"fill_diagonal_: dimensions must larger than 1, got {self.ndim}")
    shape = _shape(self)
    if self.ndim > 2 and len(set(shape)) != 1:
        raise RuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length, "
                           f"got shape {shape}")
    if self.ndim == 2:
        rows, cols = shape
        if wrap and rows > cols:
            flat = range(0, rows * cols, cols + 1)
            idx = ([p // cols for p in flat], [p % cols for p in flat])
        else:
            k = min(rows, cols)
            idx = (list(range(k)), list(range(k)))
    else:
        idx = tuple(list(range(shape[0])) for _ in shape)
    index = tuple(_C.tensor(i, dtype=_C.int64, device=self.device) for i in idx)
    value = _C.full([], fill_value, dtype=self.dtype, device=self.device)
    return self.index_put_(index, value)


# ---- index helpers ----------------------------------------------------------------------------
def _clamped_sum(a: int, b: int, c: int) -> int:
    """sum(min(max(k, 0), c) for k in range(a, b + 1)), in closed form (no loop over k)."""
    if a > b or c <= 0:
        return 0
    total = 0
    lo, hi = max(a, 1), min(b, c)  # the k in [1, c] count k
    if lo <= hi:
        total += (lo + hi) * (hi - lo + 1) // 2
    lo = max(a, c + 1)  # the k above c count c
    if lo <= b:
        total += c * (b - lo + 1)
    return total


def _tri_indices(op: str, row: int, col: int, offset: int, dtype: Any, device: Any,
                 lower: bool) -> Tensor:
    for name, v in (("row", row), ("col", col), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{op}(): argument '{name}' must be int, not {type(v).__name__}")
        if not -2**63 <= v < 2**63:  # (row = 2**64 gave an empty result)
            raise ValueError(f"{op}(): argument '{name}' must fit in int64, got {v} (Overflow "
                             "when unpacking long long)")
    if dtype not in (_C.int64, _C.int32):  # as torch's kernel (bool gave [0, 1, 1, 1, ...])
        raise _C.DtypeNotImplementedError(f"{op}: not implemented for dtype {dtype} (int64 or "
                                          "int32 indices only)")
    if row < 0 or col < 0:
        raise RuntimeError(f"{op}: row and col must be non-negative, got row={row}, col={col}")
    # Entries per row r: lower keeps columns [0, clamp(r + offset + 1, 0, col)); upper keeps
    # [clamp(r + offset, 0, col), col). The count is computed first, so an absurd size fails
    # before any work.
    if lower:
        count = _clamped_sum(offset + 1, offset + row, col)
    else:
        count = row * col - _clamped_sum(offset, offset + row - 1, col)
    if 2 * count * 8 >= 2**63:
        raise RuntimeError(f"{op}: the result of size (2, {count}) for row={row}, col={col}, "
                           f"offset={offset} is too large (its storage size overflows int64)")
    import numpy as np

    import ember

    try:
        return _tri_fill(count, row, col, offset, lower, dtype, device, np)
    except (MemoryError, ember.OutOfMemoryError) as e:  # NumPy's temporaries, or the result
        raise ember.OutOfMemoryError(
            f"{op}: out of memory building the (2, {count}) result for row={row}, col={col}, "
            f"offset={offset} ({e})") from e


def _tri_fill(count: int, row: int, col: int, offset: int, lower: bool, dtype: Any, device: Any,
              np: Any) -> Tensor:
    out = _C.empty((2, count), dtype=_C.int64)  # fails first (and cleanly) when too large
    if count == 0:
        rows = np.zeros(0, dtype=np.int64)
        cols = rows
    else:
        # Only rows with entries are materialized (at most count of them).
        if lower:
            r0, r1 = max(0, -offset), row - 1
        else:
            r0, r1 = 0, min(row - 1, col - offset - 1)
        r = np.arange(r0, r1 + 1, dtype=np.int64)
        if lower:
            start = np.zeros_like(r)
            n = np.clip(r + offset + 1, 0, col)
        else:
            start = np.clip(r + offset, 0, col)
            n = col - start
        rows = np.repeat(r, n)
        first = np.repeat(np.cumsum(n) - n, n)  # position of each row's first entry
        cols = np.arange(count, dtype=np.int64) - first + np.repeat(start, n)
    if count:
        out.numpy()[0] = rows
        out.numpy()[1] = cols
    return out.to(dtype=dtype, device=device) if device is not None else out.to(dtype)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None,
                 device: Any = None, layout: Any = None) -> Tensor:
    """The (2, N) row and column indices of a row x col matrix's lower triangle (row-major).

    >>> import ember
    >>> ember.tril_indices(2, 2).tolist()
    [[0, 1, 1], [0, 0, 1]]
    """
    return _tri_indices("tril_indices", row, col, offset, dtype or _C.int64, device, True)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None,
                 device: Any = None, layout: Any = None) -> Tensor:
    """The (2, N) row and column indices of a row x col matrix's upper triangle (row-major).

    >>> import ember
    >>> ember.triu_indices(2, 2).tolist()
    [[0, 0, 1], [0, 1, 1]]
    """
    return _tri_indices("triu_indices", row, col, offset, dtype or _C.int64, device, False)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """The cartesian product of 1-D tensors, one row per combination (itertools.product
    order); a single tensor comes back as it is.

    >>> import ember
    >>> ember.cartesian_prod(ember.tensor([1, 2]), ember.tensor([3, 4])).tolist()
    [[1, 3], [1, 4], [2, 3], [2, 4]]
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"cartesian_prod: expect a 1D vector, but got shape {_shape(t)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = _C.meshgrid(list(tensors), indexing="ij")
    return _C.stack([g.reshape(-1) for g in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-r combinations of a 1-D tensor's elements (itertools order), one per row.

    >>> import ember
    >>> ember.combinations(ember.tensor([1, 2, 3])).tolist()
    [[1, 2], [1, 3], [2, 3]]
    """
    if input.ndim != 1:
        raise RuntimeError(f"combinations: Expect a 1D vector, but got shape {_shape(input)}")
    if r < 0:
        raise RuntimeError(f"combinations: Expect a non-negative number, but got {r}")
    if r == 0:
        return _C.empty([0], dtype=input.dtype, device=input.device)
    n = input.shape[0]
    count = math.comb(n + r - 1, r) if with_replacement else math.comb(n, r)
    if count * r >= 2**31:  # the index list is built in Python: refuse before exhausting memory
        raise RuntimeError(f"combinations: the result would hold {count} x {r} elements "
                           f"(n={n}, r={r}, with_replacement={with_replacement}), too many to "
                           "build")
    if count == 0:  # r > n without replacement (itertools would still allocate r slots)
        return _C.empty([0, r], dtype=input.dtype, device=input.device)
    make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    combos = list(make(range(n), r))
    idx = _C.tensor(combos, dtype=_C.int64, device=input.device)
    return input.index_select(0, idx.reshape(-1)).reshape(len(combos), r)


def block_diag(*tensors: Tensor) -> Tensor:
    """The tensors (0-, 1- or 2-D) placed along the diagonal of one 2-D tensor.

    >>> import ember
    >>> ember.block_diag(ember.tensor([[1]]), ember.tensor([2, 3])).tolist()
    [[1, 0, 0], [0, 2, 3]]
    """
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.ndim} dimensions")
        mats.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not mats:
        return _C.empty([1, 0])
    # as torch's result_type: 0-d inputs only raise the kind (float32 with a 0-d complex128
    # gives complex64), so promote them apart and combine the two
    dims = [t.dtype for t in tensors if t.ndim > 0]
    zeros = [t.dtype for t in tensors if t.ndim == 0]
    dtype = (dims or zeros)[0]
    for d in dims[1:] if dims else zeros[1:]:
        dtype = _C.promote_types(dtype, d)
    if dims and zeros:
        z = zeros[0]
        for d in zeros[1:]:
            z = _C.promote_types(z, d)
        dtype = result_type(_C.empty([0], dtype=dtype), _C.empty([], dtype=z))
    rows = sum(m.shape[0] for m in mats)
    cols = sum(m.shape[1] for m in mats)
    out = _C.zeros([rows, cols], dtype=dtype, device=mats[0].device)
    r = c = 0
    for m in mats:
        h, w = m.shape
        out[r:r + h, c:c + w] = m
        r, c = r + h, c + w
    return out


def unravel_index(indices: Tensor | int, shape: int | Sequence[int]) -> tuple[Tensor, ...]:
    """Flat indices into coordinates of a tensor of the given shape, one tensor per dim.

    >>> import ember
    >>> [t.tolist() for t in ember.unravel_index(ember.tensor([5, 7]), (2, 4))]
    [[1, 1], [1, 3]]
    """
    if not isinstance(indices, Tensor):
        indices = _C.tensor(indices)
    if indices.is_floating_point() or indices.dtype == _C.bool:
        raise TypeError(f"unravel_index: expected 'indices' to be an integer tensor, got "
                        f"{indices.dtype}")
    shape = [shape] if isinstance(shape, int) else list(shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, got {shape}")
    total = math.prod(shape)
    # in int64 first: int16 + total would wrap, and -total compared with uint8 indices too
    indices = indices.to(_C.int64)
    if indices.numel() and ((indices < -total).any().item() or (indices >= total).any().item()):
        raise ValueError(f"unravel_index: 'indices' must be in range [{-total}, {total - 1}] "
                         f"for shape {tuple(shape)}")
    flat = _C.where(indices < 0, indices + total, indices)
    out = []
    for s in reversed(shape):
        out.append(flat.remainder(s))
        flat = flat.div(s, rounding_mode="floor")
    return tuple(reversed(out))


def isin(elements: Tensor | float, test_elements: Tensor | float, *,
         assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` occurs in ``test_elements`` (either may be a
    number), as a bool tensor of elements' shape.

    >>> import ember
    >>> ember.isin(ember.tensor([1, 2, 3]), ember.tensor([2, 5])).tolist()
    [False, True, False]
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: at least one of elements and test_elements must be a Tensor")
    if not isinstance(elements, Tensor):
        elements = _C.tensor(elements, device=test_elements.device)
    if not isinstance(test_elements, Tensor):
        test_elements = _C.tensor(test_elements, device=elements.device)
    if _C.bool in (elements.dtype, test_elements.dtype):  # (a Python bool too, as PyTorch)
        raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    dtype = _C.promote_types(elements.dtype, test_elements.dtype)
    if dtype in (_C.uint16, _C.uint32, _C.uint64):  # (sort takes them, PyTorch's isin does not)
        import ember

        name = str(dtype).rsplit(".", 1)[-1]
        raise ember.DtypeNotImplementedError(f"isin: not implemented for dtype {name}")
    test = test_elements.reshape(-1).to(dtype).sort().values
    if test.is_floating_point():  # NaN matches nothing, and searchsorted steps past it to the end
        test = test[~test.isnan()]
    e = elements.to(dtype)
    if test.numel() == 0:
        found = _C.zeros(_shape(elements), dtype=_C.bool, device=elements.device)
    else:
        pos = _C.searchsorted(test, e.reshape(-1).contiguous()).clamp(max=test.numel() - 1)
        found = (test.index_select(0, pos) == e.reshape(-1)).reshape(_shape(elements))
    return found.logical_not() if invert else found


# ---- pointwise math ---------------------------------------------------------------------------
def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(input) + exp(other))`` without overflow.

    >>> import ember
    >>> round(ember.logaddexp(ember.tensor(0.0), ember.tensor(0.0)).item(), 4)
    0.6931
    """
    other = _as_tensor_like(other, input)
    dt = _float_result_type(input, other)
    if dt in (_C.float16, _C.bfloat16):  # one rounding at the end, as a fused kernel would
        return logaddexp(input.to(_C.float32), other.to(_C.float32)).to(dt)
    input, other = input.to(dt), other.to(dt)
    if dt.is_complex:  # factor out the operand of the larger real part (input on a tie)
        pick = input.real >= other.real
        m, o = _C.where(pick, input, other), _C.where(pick, other, input)
        same = input == other
        return _C.where(same, input + math.log(2.0),
                        m + _C.where(same, _C.zeros_like(m), o - m).exp().log1p())
    m = _C.maximum(input, other)
    d = (input - other).abs()
    # equal infinities: d is nan; their sum is the infinity itself (plus log 2 for finite ties)
    same = input == other
    return _C.where(same, input + math.log(2.0), m + _C.where(same, 0.0 * d, -d).exp().log1p())


def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """``log2(2**input + 2**other)`` without overflow.

    >>> import ember
    >>> ember.logaddexp2(ember.tensor(1.0), ember.tensor(1.0)).item()
    2.0
    """
    other = _as_tensor_like(other, input)
    dt = _float_result_type(input, other)
    if dt.is_complex:
        raise NotImplementedError(f"logaddexp2: not implemented for {dt} (as torch; logaddexp "
                                  f"takes complex tensors)")
    return logaddexp(input.to(dt) * math.log(2.0), other.to(dt) * math.log(2.0)) / math.log(2.0)


def _hypot_value(a: Tensor, b: Tensor, dt: Any) -> Tensor:
    """hypot's value in dt (no autograd), computed in float64."""
    # squares of a wide float32 (or any half) value fit float64: one rounding at the end, no
    # spurious overflow (torch gives hypot(1e30, 1) == 1e30 where x*x + y*y overflows)
    a, b = a.to(_C.float64), b.to(_C.float64)
    if dt is _C.float64:
        # scale by the larger magnitude so the squares cannot overflow
        big = _C.maximum(a.abs(), b.abs())
        small = _C.minimum(a.abs(), b.abs())
        safe = _C.where(big == 0, _C.ones_like(big), big)
        r = big * (1 + (small / safe) ** 2).sqrt()
    else:
        r = (a * a + b * b).sqrt()
    # an infinite leg makes the hypotenuse infinite even when the other one is NaN (C's hypot)
    r = _C.where(a.isinf() | b.isinf(), math.inf, r)
    return r.to(dt)


class _Hypot(_Function):
    """hypot with torch's derivatives: grad * x / r for either leg (NaN at the origin, 0 / 0)
    and the tangent (x_t x + y_t y) / r over the legs that carry one."""

    _node_name = "HypotBackward0"  # torch's node

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.set_materialize_grads(False)
        r = _hypot_value(a, b, a.dtype)
        ctx.save_for_backward(a, b, r)
        ctx.save_for_forward(a, b, r)
        return r

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b, r = ctx.saved_tensors
        if grad is None:
            return None, None
        ga = grad * a / r if ctx.needs_input_grad[0] else None
        gb = grad * b / r if ctx.needs_input_grad[1] else None
        return ga, gb

    @staticmethod
    def jvp(ctx: Any, ta: Tensor | None, tb: Tensor | None) -> Tensor:
        a, b, r = ctx.saved_tensors
        num = None if ta is None else ta * a
        if tb is not None:
            num = tb * b if num is None else num + tb * b
        return num / r


def hypot(input: Tensor, other: Tensor) -> Tensor:
    """``sqrt(input**2 + other**2)``, elementwise.

    >>> import ember
    >>> ember.hypot(ember.tensor([3.0]), ember.tensor([4.0])).tolist()
    [5.0]
    """
    other = _as_tensor_like(other, input)
    dt = _float_result_type(input, other)
    if dt.is_complex:
        # sqrt(a*a + b*b) of complex legs is no length (hypot(1j, 1) was 0); torch refuses too
        raise NotImplementedError(f"hypot: not implemented for complex tensors (got "
                                  f"{input.dtype} and {other.dtype}); take the legs' magnitudes "
                                  "with .abs() first")
    a, b = input.to(dt), other.to(dt)
    if a.shape != b.shape:  # (only then: broadcast_tensors gives a tangent-less side zeros)
        a, b = _C.broadcast_tensors([a, b])
    return _Hypot.apply(a, b)


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise maximum that ignores NaN (the other value wins over a NaN).

    >>> import ember
    >>> ember.fmax(ember.tensor([1.0, float("nan")]), ember.tensor([float("nan"), 2.0])).tolist()
    [1.0, 2.0]
    """
    other = _as_tensor_like(other, input)
    m = _C.maximum(input, other)
    if not (input.is_floating_point() or other.is_floating_point()):
        return m
    return _C.where(input.isnan(), other, _C.where(other.isnan(), input, m)).to(m.dtype)


def fmin(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise minimum that ignores NaN (the other value wins over a NaN).

    >>> import ember
    >>> ember.fmin(ember.tensor([1.0, float("nan")]), ember.tensor([float("nan"), 2.0])).tolist()
    [1.0, 2.0]
    """
    other = _as_tensor_like(other, input)
    m = _C.minimum(input, other)
    if not (input.is_floating_point() or other.is_floating_point()):
        return m
    return _C.where(input.isnan(), other, _C.where(other.isnan(), input, m)).to(m.dtype)


def signbit(input: Tensor) -> Tensor:
    """Whether each element's sign bit is set (true for -0.0).

    >>> import ember
    >>> ember.signbit(ember.tensor([-1.0, -0.0, 0.0, 2.0])).tolist()
    [True, True, False, False]
    """
    if not input.dtype.is_signed:  # bool and the unsigned types (no < for uint16/32/64)
        return _C.zeros(_shape(input), dtype=_C.bool, device=input.device)
    if not input.is_floating_point():
        return input < 0
    return (input < 0) | ((input == 0) & ((1.0 / input) < 0))


def copysign(input: Tensor, other: Tensor | float) -> Tensor:
    """``|input|`` with the sign of ``other`` (a float result; -0.0 counts as negative).

    >>> import ember
    >>> ember.copysign(ember.tensor([1.0, -2.0]), -1.0).tolist()
    [-1.0, -2.0]
    """
    for v in (input, other):
        if isinstance(v, Tensor) and v.is_complex():
            raise NotImplementedError(f"copysign: not implemented for complex tensors, got "
                                      f"{v.dtype}")
    if isinstance(other, complex):  # float() would leak its own TypeError
        raise NotImplementedError(f"copysign: not implemented for a complex number ({other!r})")
    if not isinstance(other, Tensor) and not hasattr(other, "__float__"):
        raise TypeError(f"copysign(): argument 'other' must be a Tensor or a number, not "
                        f"{type(other).__name__}")
    o = other if isinstance(other, Tensor) else _C.tensor(float(other), device=input.device)
    x = input.to(_float_result_type(input, o)) if isinstance(other, Tensor) else \
        _float_of(input)
    neg = signbit(o)
    a = x.abs()
    return _C.where(neg, -a, a)


def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians.

    >>> import ember
    >>> round(ember.deg2rad(ember.tensor([180.0])).item(), 5)
    3.14159
    """
    if input.is_complex():  # a cast to float would drop the imaginary part
        raise RuntimeError(f"deg2rad: not supported for complex tensors, got {input.dtype}")
    return _float_of(input) * (math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees.

    >>> import ember
    >>> round(ember.rad2deg(ember.tensor([3.141592653589793])).item(), 3)
    180.0
    """
    if input.is_complex():  # a cast to float would drop the imaginary part
        raise RuntimeError(f"rad2deg: not supported for complex tensors, got {input.dtype}")
    return _float_of(input) * (180.0 / math.pi)


def isposinf(input: Tensor) -> Tensor:
    """Whether each element is +inf.

    >>> import ember
    >>> ember.isposinf(ember.tensor([float("inf"), -float("inf"), 1.0])).tolist()
    [True, False, False]
    """
    if input.is_complex():
        raise RuntimeError("isposinf does not support complex inputs.")
    return input.isinf() & (input > 0)


def isneginf(input: Tensor) -> Tensor:
    """Whether each element is -inf.

    >>> import ember
    >>> ember.isneginf(ember.tensor([float("inf"), -float("inf"), 1.0])).tolist()
    [False, True, False]
    """
    if input.is_complex():
        raise RuntimeError("isneginf does not support complex inputs.")
    return input.isinf() & (input < 0)


def positive(input: Tensor) -> Tensor:
    """The input itself (unary plus); bool tensors are refused, as in PyTorch.

    >>> import ember
    >>> ember.positive(ember.tensor([-1.0])).tolist()
    [-1.0]
    """
    if input.dtype == _C.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def sinc(input: Tensor) -> Tensor:
    """The normalized sinc, ``sin(pi x) / (pi x)``, 1 at 0.

    >>> import ember
    >>> ember.sinc(ember.tensor([0.0, 1.0])).tolist()[0]
    1.0
    """
    x = _float_of(input)
    if x.dtype in (_C.float16, _C.bfloat16):  # in float32, as torch (pi * x rounds badly)
        return sinc(x.float()).to(x.dtype)
    zero = x == 0
    px = _C.where(zero, _C.ones_like(x), x) * math.pi
    return _C.where(zero, _C.ones_like(x), px.sin() / px)


def float_power(input: Tensor | float, exponent: Tensor | float) -> Tensor:
    """``input ** exponent`` computed in float64.

    >>> import ember
    >>> ember.float_power(ember.tensor([2]), 3).dtype
    ember.float64
    """
    def is_complex(v: Any) -> bool:
        return v.is_complex() if isinstance(v, Tensor) else isinstance(v, complex)

    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError(f"float_power(): expected a Tensor as input or exponent, got "
                        f"({type(input).__name__}, {type(exponent).__name__})")
    # float64, or complex128 when either operand is complex (the imaginary part is kept)
    dt = _C.complex128 if is_complex(input) or is_complex(exponent) else _C.float64
    cast = complex if dt == _C.complex128 else float
    if not isinstance(input, Tensor):
        base = _C.tensor(cast(input), dtype=dt, device=exponent.device)
        return base.pow(exponent.to(dt))
    e = exponent.to(dt) if isinstance(exponent, Tensor) else cast(exponent)
    return input.to(dt).pow(e)


def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """The Heaviside step: 0 below zero, 1 above, ``values`` at zero.

    >>> import ember
    >>> ember.heaviside(ember.tensor([-1.0, 0.0, 2.0]), ember.tensor([0.5])).tolist()
    [0.0, 0.5, 1.0]
    """
    if input.dtype != values.dtype:
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different "
                           f"dtypes, got {input.dtype} and {values.dtype}")
    return _C.where(input == 0, values, (input > 0).to(input.dtype))


# ---- reductions and statistics ----------------------------------------------------------------
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input), dim))`` without overflow.

    >>> import ember
    >>> [round(v, 4) for v in ember.logcumsumexp(ember.tensor([0.0, 0.0]), 0).tolist()]
    [0.0, 0.6931]
    """
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"logcumsumexp(): dim must be an int, got {type(dim).__name__}")
    nd = max(input.ndim, 1)
    if not -nd <= dim < nd:
        raise IndexError(f"logcumsumexp: dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim})")
    if input.is_complex():  # (a cast to float would drop the imaginary part)
        if input.device.type != "cpu":
            raise NotImplementedError(f"logcumsumexp: complex input ({input.dtype}) is only "
                                      f"supported on the CPU yet")
        # The kernel's recurrence gives PyTorch's imaginary parts (not wrapped into (-pi, pi]).
        return _C._logcumsumexp(input, dim)
    if not input.is_floating_point():
        import ember

        raise ember.DtypeNotImplementedError(  # (NotImplementedError, as PyTorch's)
            f"logcumsumexp: not implemented for dtype {input.dtype}")
    x = input
    if x.ndim == 0 or x.numel() == 0:
        return x.clone()
    if x.device.type == "cpu":
        # The kernel's running log-space sum: one shift by the whole dim's max (below) turns
        # exp of the leading elements into 0 when a later one is ~90 (float32) larger.
        c = _C.complex128 if x.dtype == _C.float64 else _C.complex64
        # contiguous: a fresh tensor as torch's, not a strided view into the complex result
        return _C._logcumsumexp(x.to(c), dim).real.to(x.dtype).contiguous()
    m = x.detach().amax(dim, keepdim=True)
    m = _C.where(m.isinf(), _C.zeros_like(m), m)
    return (x - m).exp().cumsum(dim).log() + m


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of ``input - other`` (broadcast).

    >>> import ember
    >>> ember.dist(ember.tensor([0.0, 0.0]), ember.tensor([3.0, 4.0])).item()
    5.0
    """
    if isinstance(p, Tensor) and p.numel() == 1:
        p = p.item()
    if not isinstance(p, numbers.Real):
        raise TypeError(f"dist(): argument 'p' must be a real number, not {type(p).__name__}")
    # a float, as PyTorch's Scalar p: an int beyond int64 (2**63) is a huge norm, not an error
    d = input - other
    if d.numel() == 0 and math.isnan(p):
        return d.abs().sum()  # the empty sum: 0 whatever the power, as PyTorch
    return d.norm(float(p))


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice along ``dim`` rescaled so its p-norm is at most ``maxnorm``.

    >>> import ember
    >>> ember.renorm(ember.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, 0, 1.0).tolist()[1]
    [0.30000001192092896, 0.4000000059604645]
    """
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} "
                           "dimensions")
    if not p > 0:  # (written so that a NaN is refused too)
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p={p}")
    if not maxnorm >= 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"renorm: dim must be an int, got {type(dim).__name__}")
    if not -input.ndim <= dim < input.ndim:
        raise IndexError(f"renorm: dimension out of range (expected to be in range of "
                         f"[{-input.ndim}, {input.ndim - 1}], but got {dim})")
    d = dim % input.ndim
    others = [i for i in range(input.ndim) if i != d]
    norms = input.norm(p, others, True) if others else input.abs()
    scale = _C.where(norms > maxnorm, maxnorm / (norms + 1e-7), _C.ones_like(norms))
    return input * scale


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the variables in the rows of ``input`` (observations in the
    columns), with optional integer frequency and float observation weights.

    >>> import ember
    >>> ember.cov(ember.tensor([[0.0, 2.0], [1.0, 3.0]])).tolist()
    [[2.0, 2.0], [2.0, 2.0]]
    """
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.ndim} dimensions")
    if input.dtype == _C.bool:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = _float_of(input)
    x = x.reshape(1, -1) if x.ndim < 2 else x
    real_dt = x.real.dtype if x.is_complex() else x.dtype  # weights and the norm are real
    n = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.is_floating_point():
            raise RuntimeError("cov(): expected fweights to have integral dtype")
        if fweights.ndim > 1 or fweights.numel() != n:
            raise RuntimeError(f"cov(): expected fweights to have one dimension and {n} "
                               f"elements, got shape {_shape(fweights)}")
        if (fweights < 0).any().item():
            raise RuntimeError("cov(): fweights cannot be negative")
        w = fweights.to(real_dt)
    if aweights is not None:
        if not aweights.is_floating_point():
            raise RuntimeError("cov(): expected aweights to have floating point dtype")
        if aweights.ndim > 1 or aweights.numel() != n:
            raise RuntimeError(f"cov(): expected aweights to have one dimension and {n} "
                               f"elements, got shape {_shape(aweights)}")
        if (aweights < 0).any().item():
            raise RuntimeError("cov(): aweights cannot be negative")
        w = aweights.to(real_dt) if w is None else w * aweights.to(real_dt)
    if w is None:
        w_sum = _C.tensor(float(n), dtype=real_dt, device=x.device)
        avg = x.mean(1, keepdim=True)
    else:
        w_sum = w.sum()
        if w_sum.item() == 0:  # every weight 0: no mean to take (PyTorch refuses too)
            raise RuntimeError("cov(): weights sum to zero, can't be normalized")
        avg = (x * w).sum(1, keepdim=True) / w_sum
    if w is None:
        norm = w_sum - correction
    elif correction == 0:
        norm = w_sum
    elif aweights is None:
        norm = w_sum - correction
    else:
        norm = w_sum - correction * (w * aweights.to(real_dt)).sum() / w_sum
    norm = norm.clamp(min=0)
    xm = x - avg
    xw = xm * w if w is not None else xm
    xt = xm.transpose(0, 1)
    c = (xw @ (xt.conj() if x.is_complex() else xt)) / norm  # Hermitian for complex inputs
    return c.squeeze() if input.ndim < 2 or x.shape[0] == 1 else c


def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the variables in the rows of ``input``.

    >>> import ember
    >>> ember.corrcoef(ember.tensor([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]])).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    sd = d.real.sqrt() if c.is_complex() else d.sqrt()  # a complex cov's diagonal is real
    c = c / sd.unsqueeze(1) / sd.unsqueeze(0)
    if c.is_complex():  # both parts clipped to [-1, 1]
        return _C.complex(c.real.clamp(-1, 1), c.imag.clamp(-1, 1))
    return c.clamp(-1, 1)


def _trapezoid_operand(y: Tensor, x: Tensor | None) -> Tensor:
    """y in the integral's dtype: with sample points x, that of ``y * x`` (an integer y with
    float16 x integrates in float16, as torch); else y's own, integers as the default float."""
    if isinstance(x, Tensor):
        return y.to(_float_result_type(y, x))
    return _float_of(y)


def _trapezoid_dim(op: str, y: Tensor, x: Tensor | None, dim: int) -> int:
    """``dim`` wrapped against y's dims (PyTorch's rule, x's dims do not count), after the
    dtype checks both integrals make."""
    if y.dtype == _C.bool or (isinstance(x, Tensor) and x.dtype == _C.bool):
        raise RuntimeError(f"{op}: received a bool input for `x` or `y`, but bool is not "
                           f"supported")
    if y.ndim == 0:
        raise IndexError(f"{op}: expected y with at least one dimension (the samples), got a "
                         f"0-dim tensor")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if not -y.ndim <= dim < y.ndim:
        raise IndexError(f"{op}: dimension out of range (expected to be in range of "
                         f"[{-y.ndim}, {y.ndim - 1}], but got {dim})")
    return dim % y.ndim


def _trapezoid_spacing(op: str, y: Tensor, x: Tensor, d: int) -> Tensor:
    """The widths between x's sample points along y's dim d, shaped to broadcast with y's
    pairs: a 1-D x lies along d, an x of fewer dims than y gets leading ones, and any other x
    is sliced along d itself (as PyTorch, which slices x by y's dim)."""
    n = y.shape[d]
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point; "
                               f"got {x.shape[0]} x values and {n} samples along dim {d} of y "
                               f"of shape {_shape(y)}")
        shape = [1] * y.ndim
        shape[d] = n
        x = x.reshape(shape)
    elif x.ndim < y.ndim:
        x = x.reshape([1] * (y.ndim - x.ndim) + list(_shape(x)))
    m = x.shape[d]
    return x.narrow(d, min(m, 1), max(m - 1, 0)) - x.narrow(d, 0, max(m - 1, 0))


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
              dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``, with sample points ``x`` or a constant spacing
    ``dx`` (default 1).

    >>> import ember
    >>> ember.trapezoid(ember.tensor([1.0, 2.0, 3.0])).item()
    4.0
    """
    if x is not None and dx is not None:
        raise TypeError("trapezoid: received both x and dx; pass only one")
    d = _trapezoid_dim("trapezoid", y, x, dim)
    n = y.shape[d]
    if n == 0:  # torch: zeros of y's own dtype (an integer y too)
        z = y.sum(d) * 0
        return z if y.is_floating_point() or y.is_complex() else z.to(y.dtype)
    y = _trapezoid_operand(y, x)
    mid = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) / 2
    if x is None:
        return mid.sum(d) * (1.0 if dx is None else dx)
    return (mid * _trapezoid_spacing("trapezoid", y, x, d)).sum(d)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
                         dim: int = -1) -> Tensor:
    """The running trapezoidal-rule integral along ``dim`` (one fewer element there).

    >>> import ember
    >>> ember.cumulative_trapezoid(ember.tensor([1.0, 2.0, 3.0])).tolist()
    [1.5, 4.0]
    """
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid: received both x and dx; pass only one")
    d = _trapezoid_dim("cumulative_trapezoid", y, x, dim)
    y = _trapezoid_operand(y, x)
    n = y.shape[d]
    mid = (y.narrow(d, min(n, 1), max(n - 1, 0)) + y.narrow(d, 0, max(n - 1, 0))) / 2
    if x is None:
        return (mid * (1.0 if dx is None else dx)).cumsum(d)
    return (mid * _trapezoid_spacing("cumulative_trapezoid", y, x, d)).cumsum(d)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of a 1-D tensor: columns are powers of x (decreasing by
    default).

    >>> import ember
    >>> ember.vander(ember.tensor([1, 2, 3]), 3).tolist()
    [[1, 1, 1], [4, 2, 1], [9, 3, 1]]
    """
    if x.ndim != 1:
        raise RuntimeError(f"x must be a one-dimensional tensor, got shape {_shape(x)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError(f"N must be non-negative, got {N}")
    if n == 0:
        return _C.empty([x.shape[0], 0], dtype=x.dtype, device=x.device)
    dtype = x.dtype if x.dtype != _C.bool else _C.int64
    cols = [_C.ones_like(x, dtype=dtype)]
    for _ in range(1, n):
        cols.append(cols[-1] * x)
    out = _C.stack(cols, 1)
    return out if increasing else out.flip([1])


# ---- small ones -------------------------------------------------------------------------------
def scalar_tensor(s: float, *, dtype: Any = None, device: Any = None, layout: Any = None,
                  requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A 0-dim tensor holding ``s`` (the default float dtype unless told).

    >>> import ember
    >>> ember.scalar_tensor(3).tolist()
    3.0
    """
    if isinstance(s, Tensor) and s.ndim == 0:  # a 0-dim tensor is a number, as torch's
        s = s.item()
    if isinstance(s, Tensor) or not isinstance(s, (bool, int, float, complex)) and not hasattr(s, "__float__"):
        # (a list made a 1-D tensor)
        raise TypeError(f"scalar_tensor(): argument 's' must be Number, not {type(s).__name__}")
    if isinstance(s, int) and not -2**63 <= s < 2**64:  # (uint64 values are taken, as torch)
        raise OverflowError(f"scalar_tensor(): value {s} fits neither int64 nor uint64 (int too "
                            "big to convert)")
    t = _C.tensor(s, dtype=dtype or _C.get_default_dtype(), device=device)
    return t.requires_grad_() if requires_grad else t


def result_type(tensor1: Tensor | complex | bool, tensor2: Tensor | complex | bool) -> Any:
    """The dtype an arithmetic op on the two operands gives (PyTorch's promotion: a 0-dim
    tensor or a Python number only lifts the category, not the width).

    >>> import ember
    >>> ember.result_type(ember.tensor([1], dtype=ember.int32), 1.0)
    ember.float32
    """
    def probe(v: Any) -> Any:
        if isinstance(v, Tensor):  # a zero of its dtype, 0-dim if it is, else 1-D
            return _C.zeros([] if v.ndim == 0 else [1], dtype=v.dtype)
        if isinstance(v, (bool, int, float, complex)):
            return v
        raise TypeError(f"result_type(): expected Tensor or Number, got {type(v).__name__}")

    a, b = probe(tensor1), probe(tensor2)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        if isinstance(a, complex) or isinstance(b, complex):
            return _C.complex128 if _C.get_default_dtype() == _C.float64 else _C.complex64
        if isinstance(a, float) or isinstance(b, float):
            return _C.get_default_dtype()
        return _C.bool if isinstance(a, bool) and isinstance(b, bool) else _C.int64
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype == b.dtype:
        return a.dtype
    if all(x.dtype == _C.bool if isinstance(x, Tensor) else isinstance(x, bool) for x in (a, b)):
        return _C.bool
    return (a + b).dtype


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (default: the first dim of size 3, as
    ``torch.cross``; ``ember.linalg.cross`` defaults to the last), inputs broadcast.

    >>> import ember
    >>> ember.cross(ember.tensor([1.0, 0.0, 0.0]), ember.tensor([0.0, 1.0, 0.0]), dim=0).tolist()
    [0.0, 0.0, 1.0]
    """
    from ember._tensor import broadcast_shapes

    # PyTorch's checks, made before broadcasting: the same number of dims, and a dim of size 3
    # in both (a size-1 dim is not broadcast to 3)
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got "
                           f"shapes {_shape(input)} and {_shape(other)}")
    if dim is None:
        import warnings

        warnings.warn("Using cross without specifying the dim arg is deprecated: pass the dim "
                      "explicitly, or use ember.linalg.cross (the last dim)", UserWarning,
                      stacklevel=2)
        dim = next((i for i, n in enumerate(_shape(input)) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dimension of size 3 in input of shape "
                               f"{_shape(input)}")
    if not -input.ndim <= dim < input.ndim:  # (a 0-dim input has no dim to take)
        raise IndexError(f"cross: dim {dim} out of range for inputs of {input.ndim} dims")
    dim %= input.ndim
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[dim]} and {other.shape[dim]}")
    # no promotion, as torch's kernel (complex64 x int64 gave complex64, float32 x float64
    # float64); bool has no kernel (the products' subtraction refused it, naming sub)
    if input.dtype != other.dtype:
        raise RuntimeError(f"linalg.cross: expected input and other to have the same dtype, got "
                           f"{input.dtype} and {other.dtype}")
    if input.dtype == _C.bool:
        raise _C.DtypeNotImplementedError("linalg.cross: not implemented for dtype bool")
    shape = tuple(broadcast_shapes(_shape(input), _shape(other)))
    a, b = input.expand(tuple(shape)), other.expand(tuple(shape))
    a0, a1, a2 = a.unbind(dim)
    b0, b1, b2 = b.unbind(dim)
    return _C.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op: str, input: Tensor, q: Any, dim: int | None, keepdim: bool,
              interpolation: str, ignore_nan: bool) -> Tensor:
    if not input.is_floating_point():
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype, got "
                           f"{input.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{op}() interpolation must be one of {', '.join(_INTERPOLATIONS)}. "
                         f"Got '{interpolation}'")
    scalar_q = not isinstance(q, Tensor)
    if not scalar_q and q.dtype != input.dtype:  # (not converted: torch refuses it)
        raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor (input "
                           f"{input.dtype}, q {q.dtype})")
    qt = _C.tensor([float(q)] if scalar_q else q.tolist() if q.ndim else [q.item()],
                   dtype=input.dtype, device=input.device).reshape(-1)
    if isinstance(q, Tensor) and q.ndim > 1:
        raise RuntimeError(f"{op}() q must be a scalar or 1D tensor, got shape {_shape(q)}")
    # (as "not inside": a NaN q compares false both ways and gave a silent NaN quantile)
    if qt.numel() and not ((qt >= 0) & (qt <= 1)).all().item():
        if scalar_q:
            raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {float(q)}")
        bad = qt[~((qt >= 0) & (qt <= 1))][0].item()
        raise RuntimeError(f"{op}() q values must be in the range [0, 1], got {bad}")
    if input.numel() == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty")
    if dim is None:
        x = input.reshape(-1)
        d = 0
    else:
        d = dim % max(input.ndim, 1)
        x = input if input.ndim else input.reshape(1)
    x = x.movedim(d, -1)  # (..., n)
    n = x.shape[-1]
    srt = x.sort(-1).values  # NaNs sort last
    nan = x.isnan()
    if ignore_nan:
        count = (~nan).sum(-1, keepdim=True).to(input.dtype)  # (..., 1)
    else:
        count = _C.full(list(_shape(x)[:-1]) + [1], float(n), dtype=input.dtype,
                        device=input.device)
    pos = qt * (count - 1).clamp(min=0)  # (..., nq)
    lo = pos.floor()
    hi = pos.ceil()
    if interpolation == "lower":
        pos = lo
    elif interpolation == "higher":
        pos = hi
    elif interpolation == "nearest":
        pos = pos.round()
    lo_i = lo.to(_C.int64).clamp(0, n - 1)
    hi_i = hi.to(_C.int64).clamp(0, n - 1)
    v_lo = srt.gather(-1, lo_i if interpolation not in ("higher", "nearest") else
                      pos.to(_C.int64).clamp(0, n - 1))
    if interpolation in ("linear", "midpoint"):
        v_hi = srt.gather(-1, hi_i)
        w = (pos - lo) if interpolation == "linear" else _C.full_like(pos, 0.5) * (hi > lo)
        out = v_lo + (v_hi - v_lo) * w
    else:
        out = v_lo
    bad = (count == 0) if ignore_nan else nan.any(-1, keepdim=True)
    out = _C.where(bad, _C.full_like(out, float("nan")), out)
    out = out.movedim(-1, 0)  # (nq, ...)
    if keepdim:
        if dim is None:
            out = out.reshape([out.shape[0]] + [1] * input.ndim)
        elif input.ndim:
            out = out.unsqueeze(d + 1)
    elif dim is None:
        out = out.reshape(out.shape[0])
    return out[0] if scalar_q or (isinstance(q, Tensor) and q.ndim == 0) else out


def quantile(input: Tensor, q: float | Tensor, dim: int | None = None, keepdim: bool = False,
             *, interpolation: str = "linear") -> Tensor:
    """The q-th quantiles of the input (flattened, or along ``dim``), with linear, lower,
    higher, midpoint or nearest interpolation between order statistics; a NaN in a row gives
    NaN. A 1-D ``q`` adds a leading dim.

    >>> import ember
    >>> ember.quantile(ember.tensor([1.0, 2.0, 3.0, 4.0]), 0.5).item()
    2.5
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q: float | Tensor, dim: int | None = None,
                keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
    """:func:`quantile` ignoring NaNs (NaN only where a row has nothing else).

    >>> import ember
    >>> ember.nanquantile(ember.tensor([1.0, float("nan"), 3.0]), 0.5).item()
    2.0
    """
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def unique_consecutive(input: Tensor, return_inverse: bool = False,
                       return_counts: bool = False, dim: int | None = None) -> Any:
    """The input with runs of equal consecutive elements (or slices along ``dim``) collapsed
    to one, optionally with the inverse indices and the run lengths.

    >>> import ember
    >>> ember.unique_consecutive(ember.tensor([1, 1, 2, 2, 3, 1, 1])).tolist()
    [1, 2, 3, 1]
    """
    if dim is None:
        x = input.reshape(-1)
        flat = x
    else:
        nd = input.ndim
        if nd == 0:
            raise IndexError(f"unique_consecutive: dimension specified as {dim} but the tensor "
                             f"has no dimensions")
        if not -nd <= dim < nd:  # (checked: a dim taken modulo ndim would be silently wrong)
            raise IndexError(f"unique_consecutive: dimension out of range (expected to be in "
                             f"range of [{-nd}, {nd - 1}], but got {dim})")
        d = dim % nd
        x = input.movedim(d, 0)
        flat = x.reshape(x.shape[0], math.prod(x.shape[1:]))  # (not -1: ambiguous when empty)
    n = flat.shape[0]
    if n == 0:
        out = x.clone() if dim is None else input.clone()  # flattened when dim is None
        inv = _C.zeros(_shape(input) if dim is None else [0], dtype=_C.int64,
                       device=input.device)
        counts = _C.zeros([0], dtype=_C.int64, device=input.device)
    else:
        if dim is None:
            change = flat[1:] != flat[:-1]
        else:
            change = (flat[1:] != flat[:-1]).any(1)  # (n - 1, m) already: no reshape of 0 rows
        first = _C.ones([1], dtype=_C.bool, device=input.device)
        starts = _C.cat([first, change])
        idx = starts.nonzero().reshape(-1)
        out = x.index_select(0, idx)
        if dim is not None:
            out = out.movedim(0, d)
        run = starts.to(_C.int64).cumsum(0) - 1
        inv = run.reshape(_shape(input)) if dim is None else run
        ends = _C.cat([idx[1:], _C.tensor([n], dtype=_C.int64, device=input.device)])
        counts = ends - idx
    if not (return_inverse or return_counts):
        return out
    extra = ((inv,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return (out, *extra)


def asarray(obj: Any, *, dtype: Any = None, device: Any = None, copy: bool | None = None,
            requires_grad: bool = False) -> Tensor:
    """``obj`` as a tensor: a tensor or NumPy array is shared when dtype and device allow
    (``copy=True`` always copies; ``copy=False`` raises where a copy is needed), anything
    else (numbers, nested sequences) becomes a new tensor.

    >>> import numpy as np, ember
    >>> a = np.zeros(2, dtype=np.float32); t = ember.asarray(a); a[0] = 1; t[0].item()
    1.0
    """
    from ember._interop import as_tensor, foreign_tensor
    from ember._legacy import tensor as new_tensor

    foreign = foreign_tensor(obj)
    if foreign is not None:
        obj = foreign
    shareable = isinstance(obj, Tensor) or (hasattr(obj, "__array_interface__")
                                            and hasattr(obj, "dtype"))
    if not shareable:
        if copy is False:
            raise ValueError(f"asarray(): can't alias a {type(obj).__name__} (copy=False): "
                             "only tensors and arrays can be shared")
        t = new_tensor(obj, dtype=dtype, device=device)
    else:
        t = as_tensor(obj, dtype=dtype, device=device)
        shares = (t.data_ptr() == obj.data_ptr()) if isinstance(obj, Tensor) else \
            hasattr(obj, "__array_interface__") and t.numel() > 0 and \
            t.data_ptr() == obj.__array_interface__["data"][0]
        if copy is False and not shares and (t.numel() > 0):
            raise ValueError("asarray(): copy=False, but the requested dtype/device needs a "
                             "copy")
        if copy and (shares or t is obj):
            t = t.clone()
        if isinstance(obj, Tensor) and t is obj and requires_grad:
            t = t.detach()
    if requires_grad:
        t.requires_grad_(True)
    return t


def _integral_operands(op: str, input: Tensor, other: Tensor) -> tuple[Tensor, Tensor]:
    """Both operands in their promoted dtype, which must be an integer one (as torch, a bool
    operand next to an integer one is promoted, not refused)."""
    from ember.linalg import _dtype_name  # torch's names: Float, ComplexFloat, Bool, ...

    dt = result_type(input, other)
    if dt.is_floating_point or dt.is_complex or dt == _C.bool:
        # NotImplementedError (a RuntimeError) as torch's dtype refusals
        raise NotImplementedError(f"\"{op}_cpu\" not implemented for "
                                  f"'{_dtype_name(dt)}' ({op} takes integer tensors)")
    return input.to(dt), other.to(dt)


def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise greatest common divisor of integer tensors (non-negative; gcd(0, 0)
    is 0).

    >>> import ember
    >>> ember.gcd(ember.tensor([12, -18]), ember.tensor([8, 12])).tolist()
    [4, 6]
    """
    other = other if isinstance(other, Tensor) else _C.tensor(other, device=input.device)
    input, other = _integral_operands("gcd", input, other)
    a, b = input.abs(), other.abs()
    a, b = a + b * 0, b + a * 0  # broadcast to one shape, in the promoted dtype
    while bool((b != 0).any()):
        nz = b != 0
        safe = _C.where(nz, b, _C.ones_like(b))
        # fmod (C's %, truncating) as torch's kernel: a remainder taking the divisor's sign
        # differs where abs() wrapped (int8 -128 stays negative)
        a, b = _C.where(nz, b, a), _C.where(nz, a.fmod(safe), b)
    return a


def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise least common multiple of integer tensors (0 if either is 0).

    >>> import ember
    >>> ember.lcm(ember.tensor([4, 6]), ember.tensor([6, 4])).tolist()
    [12, 12]
    """
    other = other if isinstance(other, Tensor) else _C.tensor(other, device=input.device)
    input, other = _integral_operands("lcm", input, other)
    g = gcd(input, other)
    safe = _C.where(g == 0, _C.ones_like(g), g)
    # abs(a / g * b), as torch's kernel, so that an overflowing product wraps the same way:
    # in int32 for the narrower types (C++ promotes them), then cast back
    narrow = g.dtype in (_C.int8, _C.int16, _C.uint8)
    a, b, safe = ((t.to(_C.int32) for t in (input, other, safe)) if narrow
                  else (input, other, safe))
    return ((a // safe * b).abs() * (g != 0).to(a.dtype)).to(g.dtype)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with the elements at the flat (row-major) positions ``index`` set to
    (or, with ``accumulate``, incremented by) ``source``; negative positions count from the end.

    >>> import ember
    >>> ember.put(ember.zeros(2, 2), ember.tensor([0, -1]), ember.tensor([1.0, 2.0])).tolist()
    [[1.0, 0.0], [0.0, 2.0]]
    """
    for name, v in (("input", input), ("index", index), ("source", source)):
        if not isinstance(v, Tensor):
            raise TypeError(f"put(): argument '{name}' must be a Tensor, not {type(v).__name__}")
    if index.is_floating_point() or index.dtype == _C.bool:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {index.dtype}")
    if index.numel() != source.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source.numel()}, "
                           f"index.numel() = {index.numel()}")
    n = input.numel()
    flat_idx = index.reshape(-1).to(_C.int64)
    if flat_idx.numel() and (bool((flat_idx >= n).any()) or bool((flat_idx < -n).any())):
        raise IndexError(f"put_(): index out of range for a tensor of {n} elements")
    out = input.reshape(-1).index_put((flat_idx,), source.reshape(-1).to(input.dtype),
                                      accumulate)
    return out.reshape(_shape(input))


def _put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """In-place :func:`put` (``Tensor.put_``)."""
    return self.copy_(put(self, index, source, accumulate))


def histogram(input: Tensor, bins: Any, *, range: Sequence[float] | None = None,
              weight: Tensor | None = None, density: bool = False, out: Any = None) -> Any:
    """The histogram of ``input``'s values: ``(hist, bin_edges)``. ``bins`` is a count of equal
    bins over ``range`` (default: the values' min and max, widened by 0.5 each way when equal)
    (the unit range when there are none) or a 1-D tensor of increasing edges; each bin holds [left edge, right edge), the last one
    its right edge too; values outside are not counted. ``weight`` (input's shape) weights each
    value; ``density`` divides by the total and the bin widths.

    >>> import ember
    >>> h = ember.histogram(ember.tensor([0.0, 1.0, 1.0, 3.0]), bins=3)
    >>> h.hist.tolist(), h.bin_edges.tolist()
    ([1.0, 2.0, 1.0], [0.0, 1.0, 2.0, 3.0])
    """

    from ember.return_types import _make

    if out is not None:
        raise TypeError("histogram(): out= is not supported")
    if not input.is_floating_point():
        raise NotImplementedError(f"histogram: not implemented for {input.dtype} input (expected "
                                  "a floating-point tensor)")
    x = input.reshape(-1)
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError("histogram(): range is only taken with an integer bin count")
        if bins.dim() != 1 or bins.numel() < 1:
            raise RuntimeError("torch.histogram(): bins tensor should have one dimension and at "
                               f"least 1 element, got shape {tuple(bins.shape)}")
        edges = bins.to(input.dtype)
        if edges.numel() > 1 and bool((edges[1:] < edges[:-1]).any()):
            raise RuntimeError("torch.histogram(): bin edges must be non-decreasing")
        if bool(edges.isnan().any()):  # NaN compares false, so it passed the check above
            raise RuntimeError(f"torch.histogram(): bin edges must not be NaN, got "
                               f"{edges.tolist()}")
    else:
        if isinstance(bins, bool) or not isinstance(bins, int) or bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, got {bins!r}")
        if range is not None:
            lo, hi = (float(v) for v in range)
        elif x.numel():
            lo, hi = x.min().item(), x.max().item()
        else:
            lo, hi = 0.0, 1.0  # no values: the unit range, as PyTorch
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histogram(): range [{lo}, {hi}] is not finite")
        if lo > hi:
            raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min {lo} "
                               f"max {hi}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = None
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise RuntimeError(f"torch.histogram(): weight of shape {tuple(weight.shape)} must "
                               f"match input of shape {tuple(input.shape)}")
        weight = weight.detach().reshape(-1).to(input.dtype)
    # the counting is histogramdd's kernel on one dim (one pass, the same edge rules; equal bins
    # found by arithmetic)
    device = input.device
    host = device.type != "cpu"  # the kernel is the CPU one: count on the host, results back
    pts = x.detach().reshape(-1, 1)
    if host:
        pts = pts.cpu()
        weight = None if weight is None else weight.cpu()
    if edges is None:
        hist, edges = _C._histogramdd(pts, [bins], [], _C.tensor([lo, hi], dtype=_C.float64),
                                      weight, density)
    else:
        hist = _C._histogramdd(pts, [], [edges.detach().cpu() if host else edges.detach()], None,
                               weight, density)[0]
    if host:
        hist, edges = hist.to(device), edges.to(device)
    return _make("histogram", ["hist", "bin_edges"])(hist, edges)


_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """A copy of ``input`` whose slices ``index[i]`` along ``dim`` are reduced (``"prod"``,
    ``"mean"``, ``"amax"`` or ``"amin"``) with the slices ``i`` of ``source``, the slice's own
    values included unless ``include_self=False`` (slices no index names keep their values).

    >>> import ember
    >>> x = ember.ones(3, 2)
    >>> src = ember.tensor([[2.0, 3.0], [4.0, 5.0]])
    >>> ember.index_reduce(x, 0, ember.tensor([0, 0]), src, "prod").tolist()
    [[8.0, 15.0], [1.0, 1.0], [1.0, 1.0]]
    """
    op = "index_reduce_()"
    for name, value, kind in (("input", input, Tensor), ("dim", dim, numbers.Integral),
                              ("index", index, Tensor), ("source", source, Tensor),
                              ("reduce", reduce, str)):
        if not isinstance(value, kind) or (name == "dim" and isinstance(value, bool)):
            expected = "int" if name == "dim" else kind.__name__
            raise TypeError(f"{op}: argument '{name}' must be {expected}, not "
                            f"{type(value).__name__}")
    dim = int(dim)
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"{op}: expected reduce to be one of prod, mean, amax or amin, got "
                           f"{reduce!r}")
    if index.dim() > 1 or index.is_floating_point() or index.dtype == _C.bool:
        raise IndexError(f"{op}: index must be a 1-D tensor of int64 or int32, got a "
                         f"{index.dim()}-D {index.dtype} tensor")
    nd = max(input.dim(), 1)
    if not -nd <= dim < nd:
        raise IndexError(f"{op}: dim {dim} is out of range for a {input.dim()}-D tensor")
    dim = dim % nd
    shape, src_shape = _shape(input), _shape(source)
    if len(src_shape) != len(shape) or any(a != b for d, (a, b) in
                                           enumerate(zip(shape, src_shape)) if d != dim):
        raise RuntimeError(f"{op}: source of shape {src_shape} must match self of shape "
                           f"{shape} in every dim but dim {dim}")
    n = index.numel()
    if (src_shape[dim] if src_shape else 1) != n:
        raise RuntimeError(f"{op}: the index has {n} entries but source has "
                           f"{src_shape[dim] if src_shape else 1} slices along dim {dim}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"{op}: self ({input.dtype}) and source ({source.dtype}) must have "
                           "the same dtype")
    idx = index.reshape(-1).to(_C.int64)
    size = shape[dim] if shape else 1
    if n and (bool((idx >= size).any()) or bool((idx < -size).any())):
        raise IndexError(f"{op}: index out of range for dim {dim} of size {size}")
    idx = idx.remainder(size) if n else idx
    view = [1] * len(src_shape)
    if view:
        view[dim] = -1
        idx = idx.reshape(view).expand(src_shape)
    return input.scatter_reduce(dim, idx, source, reduce=reduce, include_self=include_self)


def _index_reduce_(self: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """In-place :func:`index_reduce` (``Tensor.index_reduce_``)."""
    # The reduction's backward saves its input: reduce a copy, so that writing the result into
    # self does not invalidate what autograd saved.
    needs_copy = _C.is_grad_enabled() and (self.requires_grad or getattr(source, "requires_grad",
                                                                          False))
    base = self.clone() if needs_copy else self  # (index_reduce checks the argument types)
    return self.copy_(index_reduce(base, dim, index, source, reduce, include_self=include_self))


def _with_generator(generator: Any, draw: Any) -> Tensor:
    """draw() on the global generator, or, given a Generator, on a stream seeded from it (the
    global state put back afterwards): reproducible per generator."""
    if generator is None:
        return draw()
    from ember import random as _random

    seed = int(_C.randint(0, 2 ** 62, [1], generator=generator).item())
    state = _random.get_rng_state()
    try:
        _random.manual_seed(seed)
        return draw()
    finally:
        _random.set_rng_state(state)


def poisson(input: Tensor, generator: Any = None) -> Tensor:
    """Poisson draws with rates ``input`` (same shape and dtype; rate 0 gives 0).

    >>> import ember
    >>> ember.poisson(ember.zeros(3)).tolist()
    [0.0, 0.0, 0.0]
    """
    from ember.distributions._special import poisson as _poisson

    if not input.is_floating_point():
        import ember

        raise ember.DtypeNotImplementedError(  # (NotImplementedError, as PyTorch's)
            f"poisson: expected a floating-point rate tensor, got {input.dtype}")
    if input.numel() and not bool((input >= 0).all()):  # nan too, as torch
        raise RuntimeError("poisson: invalid Poisson rate, expected rate to be non-negative")
    return _with_generator(generator, lambda: _poisson(input))


def binomial(count: Tensor, prob: Tensor, generator: Any = None) -> Tensor:
    """Binomial draws: successes in ``count`` trials of probability ``prob`` (broadcast; a
    float result).

    >>> import ember
    >>> ember.binomial(ember.tensor([5.0]), ember.tensor([1.0])).tolist()
    [5.0]
    """
    from ember.distributions._special import binomial as _binomial

    for what, t in (("count", count), ("prob", prob)):  # PyTorch's ValueError
        if isinstance(t, Tensor) and not t.is_floating_point():
            raise ValueError(f"binomial only supports floating-point dtypes for {what}, got: "
                             f"{t.dtype}")
    if isinstance(count, Tensor) and isinstance(prob, Tensor) and count.dtype != prob.dtype:
        raise RuntimeError(f"binomial: count ({count.dtype}) and prob ({prob.dtype}) must have "
                           "the same dtype")
    if prob.numel() and (bool((prob < 0).any()) or bool((prob > 1).any())):
        raise RuntimeError("binomial: expected prob in [0, 1]")
    return _with_generator(generator, lambda: _binomial(count, prob))


_WARN_ALWAYS = [False]


def set_warn_always(b: bool) -> None:
    """Whether warnings that PyTorch gives once per process are given every time (a flag
    ember's once-only warnings consult).

    >>> import ember
    >>> ember.set_warn_always(False); ember.is_warn_always_enabled()
    False
    """
    _WARN_ALWAYS[0] = bool(b)


def is_warn_always_enabled() -> bool:
    """The flag :func:`set_warn_always` sets."""
    return _WARN_ALWAYS[0]


def set_default_tensor_type(t: Any) -> None:
    """The deprecated way to set the default float dtype: ``ember.DoubleTensor`` or the name
    ``"torch.DoubleTensor"`` / ``"ember.FloatTensor"`` (CPU types only).

    >>> import warnings, ember
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     ember.set_default_tensor_type("torch.FloatTensor")
    >>> ember.get_default_dtype()
    ember.float32
    """
    import warnings

    from ember._legacy import _TYPE_NAMES

    warnings.warn("set_default_tensor_type() is deprecated; use set_default_dtype() instead",
                  UserWarning, stacklevel=2)
    name = t if isinstance(t, str) else getattr(t, "__name__", repr(t))
    base = name.rsplit(".", 1)[-1]
    if isinstance(t, str) and ".cuda." in t:
        raise TypeError(f"set_default_tensor_type(): ember keeps no default device type "
                        f"({t!r}); use set_default_device('cuda') and set_default_dtype()")
    dtype = _TYPE_NAMES.get(base)
    if dtype is None or not dtype.is_floating_point:
        raise TypeError(f"set_default_tensor_type(): invalid type {name!r}: only floating-point "
                        f"types are supported as the default type")
    _C.set_default_dtype(dtype)


# ---- Tensor-only methods ----------------------------------------------------------------------
def _new(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """The legacy ``Tensor.new``: sizes give an uninitialized tensor, data a new tensor, of
    self's dtype and device.

    >>> import ember
    >>> ember.zeros(1, dtype=ember.float64).new(2, 3).dtype
    ember.float64
    """
    from ember._legacy import _legacy_new
    from ember._storage import TypedStorage, UntypedStorage

    if len(args) == 1 and not kwargs and isinstance(args[0], (TypedStorage, UntypedStorage)):
        # new(storage): a 1-d tensor of self's dtype over the whole storage (shares it)
        return _C.empty(0, dtype=self.dtype, device=args[0].device).set_(args[0])
    kwargs.setdefault("device", self.device)
    return _legacy_new(self.dtype, args, kwargs, "new")


def _apply_(self: Tensor, callable: Any) -> Tensor:
    """Replaces each element by ``callable(element)`` in place (CPU tensors; slow, Python)."""
    if self.device.type != "cpu":
        raise TypeError("apply_ is only implemented on CPU tensors")
    vals = [callable(v) for v in self.reshape(-1).tolist()]
    return self.copy_(_C.tensor(vals, dtype=self.dtype).reshape(_shape(self)))


def _map_(self: Tensor, tensor: Tensor, callable: Any) -> Tensor:
    """Replaces each element by ``callable(element, other's element)`` in place, other
    broadcast to self (CPU tensors; slow, Python)."""
    if self.device.type != "cpu":
        raise TypeError("map_ is only implemented on CPU tensors")
    other = tensor.expand(tuple(_shape(self))).reshape(-1).tolist()
    vals = [callable(a, b) for a, b in zip(self.reshape(-1).tolist(), other)]
    return self.copy_(_C.tensor(vals, dtype=self.dtype).reshape(_shape(self)))


def _module_load(self: Tensor, other: Tensor, assign: bool = False) -> Tensor:
    """What ``load_state_dict`` puts in place of self for ``other`` (PyTorch's hook for tensor
    subclasses): ``other`` detached when ``assign``, else self with other's values copied in,
    detached (a leaf that requires grad refuses the copy outside ``no_grad``, as in PyTorch).

    >>> import ember
    >>> ember.zeros(2).module_load(ember.ones(2)).tolist()
    [1.0, 1.0]
    """
    if assign:
        return other.detach()
    return self.copy_(other).detach()  # load_state_dict calls it under no_grad


def _sum_to_size(self: Tensor, *size: Any) -> Tensor:
    """Sums self down to ``size``, which it must be expandable from.

    >>> import ember
    >>> ember.ones(2, 3).sum_to_size(1, 3).tolist()
    [[2.0, 2.0, 2.0]]
    """
    if len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0])
    shape = _shape(self)
    lead = len(shape) - len(size)
    ok = lead >= 0 and all(s in (1, n) for s, n in zip(size, shape[lead:]))
    if not ok:
        raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                           f"{{{', '.join(map(str, shape))}}}.")
    out = self.sum(list(range(lead))) if lead else self
    dims = [i for i, (s, n) in enumerate(zip(size, shape[lead:])) if s == 1 and n != 1]
    return out.sum(dims, keepdim=True) if dims else out


def _nn_method(name: str) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        from ember.nn import functional

        return getattr(functional, name)(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"See :func:`ember.nn.functional.{name}`."
    return method


# ---- window functions (torch.hann_window and friends) ------------------------------------------
def _window(name: str, window_length: int, periodic: bool, dtype: Any, device: Any,
            requires_grad: bool, fn: Any, exact: bool = False) -> Tensor:
    """The window of length L from fn(n, M): n an arange of length M in dtype (the default
    floating dtype when None), M = L + 1 for a periodic window (its last sample dropped), L for
    a symmetric one. fn runs PyTorch's own steps in dtype, so the window rounds as PyTorch's
    does (blackman_window's ends are exactly 0.0 in float64, -2.98e-08 in float32); exact=True
    evaluates fn in float64 and rounds once."""
    if not isinstance(window_length, int) or isinstance(window_length, bool) or \
            window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window length, got "
                           f"window_length={window_length}")
    if dtype is not None and not isinstance(dtype, _C.dtype):
        raise TypeError(f"{name}(): argument 'dtype' must be an ember dtype, not "
                        f"{type(dtype).__name__}")
    dtype = dtype if dtype is not None else _C.get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if window_length <= 1:
        out = _C.ones(window_length, dtype=dtype, device=device)
    else:
        m = window_length + 1 if periodic else window_length
        n = _C.arange(m, dtype=_C.float64 if exact else dtype, device=device)
        out = fn(n, m).to(dtype)[:window_length].contiguous()
    return out.requires_grad_(requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype: Any = None,
                layout: Any = None, device: Any = None, pin_memory: bool = False,
                requires_grad: bool = False) -> Tensor:
    """The Hann window ``1/2 - 1/2 cos(2 pi n / N)`` (periodic: N = length; else N = length - 1).

    >>> import ember
    >>> ember.hann_window(4).tolist()
    [0.0, 0.5, 1.0, 0.5]
    """
    return hamming_window(window_length, periodic, 0.5, 0.5, dtype=dtype, device=device,
                          requires_grad=requires_grad, _name="hann_window")


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype: Any = None, layout: Any = None,
                   device: Any = None, pin_memory: bool = False,
                   requires_grad: bool = False, _name: str = "hamming_window") -> Tensor:
    """The Hamming window ``alpha - beta cos(2 pi n / N)``.

    >>> import ember
    >>> [round(v, 2) for v in ember.hamming_window(4).tolist()]
    [0.08, 0.54, 1.0, 0.54]
    """
    return _window(_name, window_length, periodic, dtype, device, requires_grad,
                   lambda n, m: (n * (2 * math.pi / (m - 1))).cos() * -beta + alpha)


def blackman_window(window_length: int, periodic: bool = True, *, dtype: Any = None,
                    layout: Any = None, device: Any = None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """The Blackman window ``0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)``.

    >>> import ember
    >>> [round(v, 2) for v in ember.blackman_window(4).tolist()]
    [-0.0, 0.34, 1.0, 0.34]
    """
    def fn(n: Tensor, m: int) -> Tensor:
        w = n * (math.pi / (m - 1))
        return (w * 4).cos() * 0.08 - (w * 2).cos() * 0.5 + 0.42

    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad, fn)


def bartlett_window(window_length: int, periodic: bool = True, *, dtype: Any = None,
                    layout: Any = None, device: Any = None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """The triangular Bartlett window ``1 - |2 n / N - 1|``.

    >>> import ember
    >>> ember.bartlett_window(4).tolist()
    [0.0, 0.5, 1.0, 0.5]
    """
    def fn(n: Tensor, m: int) -> Tensor:
        w = n * (2.0 / (m - 1))
        half = ((m - 1) >> 1) + 1  # the rising half as is, the falling one as 2 - w
        return _C.cat([w[:half], 2 - w[half:]])

    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad, fn)


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype: Any = None, layout: Any = None, device: Any = None,
                  pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The Kaiser window ``i0(beta sqrt(1 - (2 n / N - 1)^2)) / i0(beta)``.

    >>> import ember
    >>> [round(v, 4) for v in ember.kaiser_window(3, periodic=False, beta=2.0).tolist()]
    [0.4387, 1.0, 0.4387]
    """
    from ember import special

    def fn(n: Tensor, m: int) -> Tensor:
        r = (1 - (2 * n / (m - 1) - 1) ** 2).clamp(min=0).sqrt()
        return special.i0(beta * r) / special.i0(_C.tensor(float(beta), dtype=_C.float64))

    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, fn,
                   exact=True)


# ---- deprecated and small linear-algebra spellings ---------------------------------------------
def chain_matmul(*matrices: Tensor, out: Tensor | None = None) -> Tensor:
    """The product of the matrices (deprecated in PyTorch for ``linalg.multi_dot``).

    >>> import ember
    >>> ember.chain_matmul(ember.eye(2), ember.ones(2, 3)).shape
    ember.Size([2, 3])
    """
    from ember import linalg

    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:  # matrices only: multi_dot's 1-D ends (and one 3-D tensor) were taken
        if isinstance(m, Tensor) and m.ndim != 2:
            raise RuntimeError(f"chain_matmul(): Tensor dimension is {m.ndim}, expected 2 "
                               f"instead (shape {_shape(m)})")
    if len(matrices) == 1:  # a copy, or out= resized and filled (cast to any dtype, as torch)
        if out is None:
            return matrices[0].clone()
        if not isinstance(out, Tensor):
            raise TypeError(f"chain_matmul(): argument 'out' must be Tensor, not "
                            f"{type(out).__name__}")
        if tuple(out.shape) != tuple(matrices[0].shape):
            out.resize_(matrices[0].shape)
        return out.copy_(matrices[0])
    return linalg.multi_dot(list(matrices), out=out)


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> Any:
    """``(solution, cloned_coefficient)`` of ``A X = b`` for triangular A (``op(A) = A^T`` with
    ``transpose``); deprecated in PyTorch for ``linalg.solve_triangular``.

    >>> import ember
    >>> ember.triangular_solve(ember.ones(2, 1), ember.tensor([[2.0, 0.0], [1.0, 1.0]]),
    ...                        upper=False).solution.tolist()
    [[0.5], [0.5]]
    """
    from ember import linalg, return_types

    tri = A.triu() if upper else A.tril()
    if transpose:
        tri, upper = tri.mT, not upper
    x = linalg.solve_triangular(tri, b, upper=upper, unitriangular=unitriangular)
    cls = return_types._make("triangular_solve", ["solution", "cloned_coefficient"])
    return cls(x, A.clone())


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2 ** other`` (floating result).

    >>> import ember
    >>> ember.ldexp(ember.tensor([1.0, 2.0]), ember.tensor([2, 3])).tolist()
    [4.0, 16.0]
    """
    if not isinstance(other, Tensor):
        raise TypeError(f"ldexp(): expected other to be a Tensor, got {type(other).__name__}")
    # As PyTorch: 2 ** other with the 2 a 0-d tensor of input's dtype (float32 for an integer
    # or bool input), so the power takes other's dtype within the same category (a float16
    # exponent rounds it) and the 2's otherwise (float64 or complex for an integer exponent);
    # the result in the promoted float dtype.
    dtype = _float_result_type(input, other)
    if not (other.is_floating_point() or other.is_complex() or dtype.is_complex):
        # A real input with an integer exponent is exact, as PyTorch's: input times 2 ** other
        # in three factors of 2 ** (at most 734) in double, then rounded once. One power in the
        # 2's dtype overflowed (2 ** 148 in bfloat16): ldexp(-0.0, 148) was NaN,
        # ldexp(1e-30, 130) inf. (A complex input keeps PyTorch's complex power below.)
        # past +-2200 every finite nonzero double is already 0 or inf
        e = other.to(_C.float64).clamp(-2200.0, 2200.0)
        a = (e / 3.0).trunc()
        b = ((e - a) / 2.0).trunc()
        two64 = _C.tensor(2.0, dtype=_C.float64, device=other.device)
        r = input.to(_C.float64)
        for part in (a, b, e - a - b):
            r = r * _C.pow(two64, part)
        return r.to(dtype)
    two = input.dtype if input.is_floating_point() or input.is_complex() else _C.float32
    p = _C.pow(_C.tensor(2.0, dtype=two, device=other.device), other)
    r = input.to(dtype) * p
    return r if r.dtype == dtype else r.to(dtype)


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The log multivariate gamma function (``special.multigammaln``).

    >>> import ember
    >>> round(ember.mvlgamma(ember.tensor(2.5), 2).item(), 6)
    0.857048
    """
    from ember import special

    return special.multigammaln(input, p)


def i0(input: Tensor) -> Tensor:
    """The modified Bessel function of order 0 (``special.i0``).

    >>> import ember
    >>> round(ember.i0(ember.tensor(0.0)).item(), 6)
    1.0
    """
    from ember import special

    return special.i0(input)


# ---- out-of-place scatters of a slice, a selected index or a diagonal ---------------------------
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> Tensor:
    """A copy of input with ``input[..., start:end:step, ...]`` (along dim) replaced by src;
    differentiable in both.

    >>> import ember
    >>> ember.slice_scatter(ember.zeros(4), ember.ones(2), start=1, end=3).tolist()
    [0.0, 1.0, 1.0, 0.0]
    """
    out = input.clone()
    index = [slice(None)] * input.dim()
    index[dim] = slice(start, end, step)
    view = out[tuple(index)]
    if tuple(view.shape) != tuple(src.shape):
        raise RuntimeError(f"slice_scatter: expected src to have a size equal to the slice of "
                           f"self. src size = {list(src.shape)}, slice size = {list(view.shape)}")
    out[tuple(index)] = src
    return out


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of input with ``input.select(dim, index)`` replaced by src.

    >>> import ember
    >>> ember.select_scatter(ember.zeros(2, 2), ember.ones(2), 0, 1).tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    out = input.clone()
    view = out.select(dim, index)
    if tuple(view.shape) != tuple(src.shape):
        raise RuntimeError(f"select_scatter: expected src to have a size equal to the slice of "
                           f"self. src size = {list(src.shape)}, slice size = {list(view.shape)}")
    idx = [slice(None)] * input.dim()
    idx[dim] = index
    out[tuple(idx)] = src
    return out


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> Tensor:
    """A copy of input with its ``diagonal(offset, dim1, dim2)`` replaced by src.

    >>> import ember
    >>> ember.diagonal_scatter(ember.zeros(2, 2), ember.ones(2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    diag = input.diagonal(offset, dim1, dim2)
    if tuple(diag.shape) != tuple(src.shape):
        raise RuntimeError(f"diagonal_scatter: expected src to have a size equal to the slice of "
                           f"self. src size = {list(src.shape)}, slice size = {list(diag.shape)}")
    out = input.clone()
    out.diagonal(offset, dim1, dim2).copy_(src)
    return out


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """``input.narrow(dim, start, length)`` as a new tensor with its own storage.

    >>> import ember
    >>> ember.narrow_copy(ember.arange(5), 0, 1, 2).tolist()
    [1, 2]
    """
    return input.narrow(dim, start, length).clone()


def dsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """Splits a tensor of 3 or more dims along dim 2 (as ``numpy.dsplit``).

    >>> import ember
    >>> [t.shape[2] for t in ember.dsplit(ember.zeros(1, 1, 4), 2)]
    [2, 2]
    """
    if input.dim() < 3:
        raise RuntimeError(f"torch.dsplit requires a tensor with at least 3 dimension, but got a "
                           f"tensor with {input.dim()} dimensions!")
    if isinstance(indices_or_sections, int) and input.shape[2] % indices_or_sections:
        raise RuntimeError(f"torch.dsplit attempted to split along dimension 2, but the size of "
                           f"the dimension {input.shape[2]} is not divisible by the split_size "
                           f"{indices_or_sections}!")
    return tuple(_C.tensor_split(input, indices_or_sections, 2))


def _geometric_stub(p: float, *, generator: Any = None) -> None:
    """geometric_'s signature, for its argument errors (ember._argcheck.method_args)."""


def _log_normal_stub(mean: float = 1.0, std: float = 2.0, *, generator: Any = None) -> None:
    """log_normal_'s signature, for its argument errors."""


def _cauchy_stub(median: float = 0.0, sigma: float = 1.0, *, generator: Any = None) -> None:
    """cauchy_'s signature, for its argument errors."""


_RANDOM_KINDS = {"p": "float", "mean": "float", "std": "float", "median": "float",
                 "sigma": "float", "generator": "Generator"}


@method_args("geometric_", _geometric_stub, _RANDOM_KINDS)
def _geometric_(self: Tensor, p: float, *, generator: Any = None) -> Tensor:
    """Fills self with draws from the geometric distribution: the number of Bernoulli(p) trials
    up to the first success (1, 2, ...).

    >>> import ember
    >>> bool((ember.empty(100).geometric_(0.5) >= 1).all())
    True
    """
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    e = _C.empty(tuple(self.shape), dtype=_C.float64, device=self.device)
    e.exponential_(1.0, generator=generator)
    return self.copy_((e / -math.log1p(-p)).ceil().clamp_(min=1))


@method_args("log_normal_", _log_normal_stub, _RANDOM_KINDS)
def _log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *,
                 generator: Any = None) -> Tensor:
    """Fills self with exp(N(mean, std)) draws (the underlying normal's mean and std).

    >>> import ember
    >>> bool((ember.empty(10).log_normal_() > 0).all())
    True
    """
    if not self.is_floating_point():  # PyTorch: NotImplementedError (no kernel for the dtype)
        raise _C.DtypeNotImplementedError(f"log_normal_: not implemented for dtype {self.dtype} "
                                          "(supported: floating dtypes)")
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return self.normal_(mean, std, generator=generator).exp_()


@method_args("cauchy_", _cauchy_stub, _RANDOM_KINDS)
def _cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *,
             generator: Any = None) -> Tensor:
    """Fills self with Cauchy(median, sigma) draws: median + sigma * tan(pi * (u - 1/2)).

    >>> import ember
    >>> ember.empty(3).cauchy_().shape
    ember.Size([3])
    """
    if not self.is_floating_point():
        raise RuntimeError(f"cauchy_: Cauchy distribution is a continuous probability "
                           f"distribution. dtype must be a floating point but you specified "
                           f"{self.dtype}")
    if sigma <= 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    u = self.uniform_(0.0, 1.0, generator=generator)
    return u.sub_(0.5).mul_(math.pi).tan_().mul_(sigma).add_(median)


def _new_empty_strided(self: Tensor, size: Any, stride: Any, *, dtype: Any = None,
                       device: Any = None, requires_grad: bool = False, layout: Any = None,
                       pin_memory: bool = False) -> Tensor:
    """An uninitialized tensor of the given size and strides, of this tensor's dtype and device
    unless given.

    >>> import ember
    >>> ember.ones(2).new_empty_strided((2, 3), (1, 2)).stride()
    (1, 2)
    """
    from ember import empty_strided

    out = empty_strided(tuple(size), tuple(stride), dtype=dtype or self.dtype,
                        device=device if device is not None else self.device)
    return out.requires_grad_(True) if requires_grad else out


def _to_dense(self: Tensor, dtype: Any = None, *, masked_grad: Any = None) -> Tensor:
    """This (strided) tensor itself, or converted to ``dtype`` (``Tensor.to_dense``; code that
    accepts sparse or dense tensors calls it).

    >>> import ember
    >>> t = ember.ones(2)
    >>> t.to_dense() is t
    True
    """
    return self if dtype is None else self.to(dtype)


def _dim_order(self: Tensor, *, ambiguity_check: Any = False) -> tuple:
    """The dims from outermost to innermost in memory: sorted by decreasing stride (ties by
    decreasing size, then dim order), e.g. ``(0, 2, 3, 1)`` for a channels_last image batch.

    >>> import ember
    >>> ember.zeros(2, 3).t().dim_order()
    (1, 0)
    """
    strides, sizes = self.stride(), tuple(self.shape)
    # equal strides (a size-1 dim beside another): the larger dim is the outer one
    return tuple(sorted(range(self.dim()), key=lambda d: (-strides[d], -sizes[d])))


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """The first ``size`` rows of ``nonzero(input)``, padded with ``fill_value`` rows when there
    are fewer (a result of fixed shape).

    >>> import ember
    >>> ember.nonzero_static(ember.tensor([0, 3, 0, 5]), size=3).flatten().tolist()
    [1, 3, -1]
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    nz = _C.nonzero(input)
    if nz.shape[0] >= size:
        return nz[:size].contiguous()
    pad = _C.full((size - nz.shape[0], nz.shape[1]), fill_value, dtype=nz.dtype)
    return _C.cat([nz, pad], 0)


def _alias_narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """x.narrow(dim, start, length) as a plain tensor over x's storage: no view of x (no _base),
    as the outputs of PyTorch's unsafe_* splits."""
    v = x.narrow(dim, start, length)
    return _C.empty(0, dtype=x.dtype, device=x.device).set_(
        v.untyped_storage(), v.storage_offset(), v.shape, v.stride())


class _UnsafeSplit(_Function):
    """Gives the pieces of a split (tensors over the input's storage that are not views of it)
    one node, torch's UnsafeSplitBackward0: they may be written in place under autograd, and
    under no_grad (or of an input without grad) they carry no history. The pieces come in as
    arguments and are marked dirty: outputs aliasing an input would be refused in-place writes."""

    _node_name = "UnsafeSplitBackward0"

    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int, *pieces: Tensor) -> tuple:
        ctx.sizes = [p.shape[dim] for p in pieces]
        ctx.dim, ctx.meta = dim, (tuple(x.shape), x.dtype, x.device)
        ctx.mark_dirty(*pieces)
        return pieces

    @staticmethod
    def backward(ctx: Any, *grads: Tensor | None) -> tuple:
        shape, dt, dev = ctx.meta
        parts = []
        for g, n in zip(grads, ctx.sizes):
            if g is None:  # an unused piece: zeros of its shape
                piece = list(shape)
                piece[ctx.dim] = n
                g = _C.zeros(piece, dtype=dt, device=dev)
            parts.append(g)
        return (_C.cat(parts, ctx.dim), None) + (None,) * len(parts)


class _UnsafeSplitWithSizes(_UnsafeSplit):
    _node_name = "UnsafeSplitWithSizesBackward0"


def _unsafe_pieces(input: Tensor, pieces: Sequence[Tensor], dim: int,
                   with_sizes: bool = False) -> tuple:
    """The pieces of a split as tensors over the input's storage that are not views: PyTorch's
    unsafe_* variants do not make (multi-output) views, so their outputs may be written in place
    under autograd."""
    d = dim + input.dim() if dim < 0 else dim
    level = _C._current_dual_level()
    if level >= 0 and _C._unpack_dual(input, level)[1] is not None:
        # forward-mode AD: plain narrow views carry the tangent pieces
        start, views = 0, []
        for p in pieces:
            views.append(input.narrow(d, start, p.shape[d]))
            start += p.shape[d]
        return tuple(views)
    x, out, start = input.detach(), [], 0
    for p in pieces:
        n = p.shape[d]
        out.append(_alias_narrow(x, d, start, n))
        start += n
    if not (input.requires_grad and _C.is_grad_enabled()):
        return tuple(out)
    fn = _UnsafeSplitWithSizes if with_sizes else _UnsafeSplit
    return tuple(fn.apply(input, d, *out))


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """``chunk`` whose outputs may be modified in place under autograd (plain views).

    >>> import ember
    >>> [t.tolist() for t in ember.unsafe_chunk(ember.arange(4), 2)]
    [[0, 1], [2, 3]]
    """
    return _unsafe_pieces(input, input.detach().chunk(chunks, dim), dim)


def unsafe_split(input: Tensor, split_size: Any, dim: int = 0) -> tuple:
    """``split`` whose outputs may be modified in place under autograd (plain views).

    >>> import ember
    >>> [t.tolist() for t in ember.unsafe_split(ember.arange(5), 2)]
    [[0, 1], [2, 3], [4]]
    """
    return _unsafe_pieces(input, input.detach().split(split_size, dim), dim)


def unsafe_split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple:
    """``split`` with a list of sizes whose outputs may be modified in place under autograd."""
    return _unsafe_pieces(input, input.detach().split(list(split_sizes), dim), dim, True)


_C_NATIVE_GROUP_NORM = _C.native_group_norm


def native_group_norm(input: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor, Tensor]:
    """Group norm returning ``(output, mean, rstd)``, in PyTorch's form
    ``native_group_norm(input, weight, bias, N, C, HxW, group, eps)`` (input seen as
    ``(N, C, HxW)``; mean and rstd of shape ``(N, group)``) or ember's shorter
    ``native_group_norm(input, num_groups, weight, bias, eps)``.

    >>> import ember
    >>> out, mean, rstd = ember.native_group_norm(ember.ones(2, 4, 3), None, None, 2, 4, 3, 2, 1e-5)
    >>> out.shape, mean.shape
    (ember.Size([2, 4, 3]), ember.Size([2, 2]))
    """
    if "num_groups" in kwargs or (args and isinstance(args[0], numbers.Integral)):
        return _C_NATIVE_GROUP_NORM(input, *args, **kwargs)
    names = ("weight", "bias", "N", "C", "HxW", "group", "eps")
    if len(args) > len(names):
        raise TypeError(f"native_group_norm() takes 8 positional arguments but {len(args) + 1} "
                        "were given")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            raise TypeError(f"native_group_norm() got an unexpected or repeated keyword argument "
                            f"'{k}'")
        bound[k] = v
    missing = [k for k in names if k not in bound]
    if missing:
        raise TypeError(f"native_group_norm() missing required arguments: {', '.join(missing)}")
    for k in ("weight", "bias"):
        if bound[k] is not None and not isinstance(bound[k], Tensor):
            raise TypeError(f"native_group_norm(): argument '{k}' must be Tensor, not "
                            f"{type(bound[k]).__name__}")
    if not isinstance(input, Tensor):
        raise TypeError(f"native_group_norm(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    for k in ("N", "C", "HxW", "group"):
        v = bound[k]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"native_group_norm(): argument '{k}' must be int, not "
                            f"{type(v).__name__}")
    n, c, hw = int(bound["N"]), int(bound["C"]), int(bound["HxW"])
    if input.numel() != n * c * hw:
        raise RuntimeError(f"native_group_norm: expected input.numel() == N * C * HxW, but input "
                           f"of shape {tuple(input.shape)} has {input.numel()} elements and "
                           f"N={n}, C={c}, HxW={hw}")
    out, mean, rstd = _C_NATIVE_GROUP_NORM(input.reshape(n, c, hw), int(bound["group"]),
                                           bound["weight"], bound["bias"], float(bound["eps"]))
    return out.reshape(input.shape), mean, rstd


_C_NATIVE_BATCH_NORM = _C.native_batch_norm


def native_batch_norm(input: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor, Tensor]:
    """Batch norm returning ``(output, save_mean, save_invstd)``, as
    ``torch.native_batch_norm(input, weight, bias, running_mean, running_var, training,
    momentum, eps)``: in eval mode (``training=False``) the saved statistics are empty, as in
    PyTorch (backward there uses the running statistics).

    >>> import ember
    >>> x = ember.ones(2, 3)
    >>> out, m, r = ember.native_batch_norm(x, None, None, ember.zeros(3), ember.ones(3),
    ...                                     False, 0.1, 1e-5)
    >>> m.shape, r.shape
    (ember.Size([0]), ember.Size([0]))
    """
    out, mean, invstd = _C_NATIVE_BATCH_NORM(input, *args, **kwargs)
    training = kwargs["training"] if "training" in kwargs else (args[4] if len(args) > 4 else None)
    if training is False:
        mean, invstd = mean.new_empty(0), invstd.new_empty(0)
    return out, mean, invstd


def _keyword_only_generator(method: Callable, name: str, first: str) -> Callable:
    """method (random_, bernoulli), refusing a generator (or None) given as its only positional
    argument, as PyTorch: there the generator is keyword-only (the binding cannot say so for a
    method whose arguments all are keyword-only)."""

    @functools.wraps(method)
    def wrapper(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and (args[0] is None or isinstance(args[0], _C.Generator)):
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"({type(args[0]).__name__}): the first positional argument is "
                            f"'{first}'; pass the generator as generator=...")
        return method(self, *args, **kwargs)

    return wrapper


# the message of an SVD of a matrix with NaN, which PyTorch raises as a LinAlgError
_SVD_NAN = "linalg.svd: The algorithm failed to converge because the input matrix contained"


def _raising_linalg_error(fn: Callable) -> Callable:
    """fn, raising ember.linalg.LinAlgError (a RuntimeError) where its C++ core reports a failed
    SVD: norm(p='nuc') of a matrix with NaN, as ``torch.norm``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RuntimeError as e:
            if type(e) is RuntimeError and str(e).startswith(_SVD_NAN):
                from ember.linalg import LinAlgError

                raise LinAlgError(str(e)) from None
            raise

    return wrapper


def _write_out(result: Tensor, out: Any, op: str) -> Tensor:
    """result, or result written into ``out`` after the engine's out= checks (dtype, device; a
    resize to result's shape, which warns when ``out`` had elements), as torch's."""
    if out is None:
        return result
    # (the result requires grad when an input does: out= is not differentiable)
    return _outarg.write_out(op, out, lambda: result, (result,))


def polygamma(n: int, input: Tensor, *, out: Any = None) -> Tensor:
    """The n-th derivative of digamma (``ember.special.polygamma``).

    >>> import ember
    >>> round(ember.polygamma(1, ember.tensor(1.0, dtype=ember.float64)).item(), 6)
    1.644934
    """
    from ember import special

    result = special.polygamma(n, input)
    return _write_out(result, out, "polygamma")


def igamma(input: Tensor, other: Tensor, *, out: Any = None) -> Tensor:
    """The regularized lower incomplete gamma function (``ember.special.gammainc``)."""
    from ember import special

    result = special.gammainc(input, other)
    return _write_out(result, out, "igamma")


def igammac(input: Tensor, other: Tensor, *, out: Any = None) -> Tensor:
    """The regularized upper incomplete gamma function (``ember.special.gammaincc``)."""
    from ember import special

    result = special.gammaincc(input, other)
    return _write_out(result, out, "igammac")


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    """``Tensor.polygamma(n)``: :func:`ember.polygamma` of this tensor."""
    return polygamma(n, self)


def _saved_self(self: Tensor) -> Tensor:
    """What an in-place op written as ``self.copy_(f(self))`` computes f of: a copy when self
    records grad, since f's backward may save its input, which the copy_ then overwrites (the
    backward raised "modified by an inplace operation"); as torch, which saves the original."""
    return self.clone() if self.requires_grad and _C.is_grad_enabled() else self


def _polygamma_(self: Tensor, n: int) -> Tensor:
    """In-place ``Tensor.polygamma_(n)``."""
    out = polygamma(n, _saved_self(self))
    _check_inplace_cast("polygamma_", out, self)
    return self.copy_(out)


_TENSOR_ONLY = {
    "polygamma": _polygamma_method, "polygamma_": _polygamma_,
    "to_dense": _to_dense, "dim_order": _dim_order,
    "new_empty_strided": _new_empty_strided, "index_reduce_": _index_reduce_,
    "geometric_": _geometric_, "log_normal_": _log_normal_, "cauchy_": _cauchy_,
    "new": _new, "apply_": _apply_, "map_": _map_, "sum_to_size": _sum_to_size, "put_": _put_,
    "module_load": _module_load,
    "prelu": _nn_method("prelu"), "hardshrink": _nn_method("hardshrink"),
}


_FUNCTIONS = {
    "index_reduce": index_reduce, "histogram": histogram, "nonzero_static": nonzero_static,
    "polygamma": polygamma, "igamma": igamma, "igammac": igammac,
    "unsafe_chunk": unsafe_chunk, "unsafe_split": unsafe_split,
    "unsafe_split_with_sizes": unsafe_split_with_sizes,
    "diag": diag, "diag_embed": diag_embed, "diagflat": diagflat, "trace": trace,
    "tril_indices": tril_indices, "triu_indices": triu_indices,
    "cartesian_prod": cartesian_prod, "combinations": combinations, "block_diag": block_diag,
    "unravel_index": unravel_index, "isin": isin, "logaddexp": logaddexp,
    "logaddexp2": logaddexp2, "hypot": hypot, "fmax": fmax, "fmin": fmin, "signbit": signbit,
    "copysign": copysign, "deg2rad": deg2rad, "rad2deg": rad2deg, "isposinf": isposinf,
    "isneginf": isneginf, "positive": positive, "sinc": sinc,
    "float_power": float_power, "heaviside": heaviside,
    "logcumsumexp": logcumsumexp, "dist": dist, "renorm": renorm, "cov": cov,
    "corrcoef": corrcoef, "trapezoid": trapezoid, "trapz": trapezoid,
    "cumulative_trapezoid": cumulative_trapezoid, "vander": vander,
    "scalar_tensor": scalar_tensor, "result_type": result_type, "cross": cross,
    "quantile": quantile, "nanquantile": nanquantile, "unique_consecutive": unique_consecutive,
    "asarray": asarray, "set_warn_always": set_warn_always,
    "is_warn_always_enabled": is_warn_always_enabled,
    "set_default_tensor_type": set_default_tensor_type, "gcd": gcd, "lcm": lcm, "put": put,
    "poisson": poisson, "binomial": binomial, "hann_window": hann_window,
    "hamming_window": hamming_window, "blackman_window": blackman_window,
    "bartlett_window": bartlett_window, "kaiser_window": kaiser_window,
    "chain_matmul": chain_matmul, "triangular_solve": triangular_solve,
    "ldexp": ldexp, "mvlgamma": mvlgamma, "i0": i0, "slice_scatter": slice_scatter,
    "select_scatter": select_scatter, "diagonal_scatter": diagonal_scatter,
    "narrow_copy": narrow_copy, "dsplit": dsplit,
}

# out= as PyTorch's: a dtype the result casts to, or (the composites) exactly the result's dtype
from ember import _outarg  # noqa: E402  (also _write_out's, at call time)

_outarg.accept_out_names(_FUNCTIONS, (
    "deg2rad", "rad2deg", "i0", "sinc", "copysign", "fmax", "fmin", "gcd", "lcm", "hypot",
    "ldexp", "logaddexp", "logaddexp2", "mvlgamma"))
_outarg.accept_out_names(_FUNCTIONS, (
    "isneginf", "isposinf", "signbit", "float_power", "heaviside", "diag", "quantile",
    "nanquantile", "renorm", "narrow_copy", "logcumsumexp", "cross"), exact=True)

# Tensor methods PyTorch has for these (the function with the tensor first)
_METHODS = (
    "index_reduce", "histogram", "nonzero_static", "unsafe_chunk", "unsafe_split", "igamma",
    "igammac",
    "unsafe_split_with_sizes", "diag", "diag_embed", "diagflat", "trace", "logaddexp", "logaddexp2", "hypot", "fmax",
    "fmin", "signbit", "copysign", "deg2rad", "rad2deg", "isposinf", "isneginf", "positive",
    "sinc", "float_power", "heaviside", "logcumsumexp", "dist", "renorm", "cov", "corrcoef", "cross", "quantile",
    "nanquantile", "unique_consecutive", "gcd", "lcm", "put",
    "triangular_solve", "ldexp", "mvlgamma", "i0",
    "slice_scatter", "select_scatter", "diagonal_scatter", "narrow_copy", "dsplit",
)

# in-place methods: the out-of-place result written back into self
_INPLACE = (
    "copysign", "deg2rad", "rad2deg", "sinc", "float_power", "heaviside", "renorm", "hypot", "logit", "gcd", "lcm",
    "i0", "ldexp", "mvlgamma", "igamma", "igammac",
)


def _check_inplace_cast(name: str, out: Tensor, self: Tensor) -> None:
    """An in-place op writes its result into ``self`` only when the result's dtype casts to
    self's without losing its kind (no float into an integer, no complex into a real tensor);
    ``float_power_`` needs the exact float64 / complex128 result dtype, as torch's."""
    if name == "float_power_" and out.dtype != self.dtype:
        raise RuntimeError(f"float_power_: the base has dtype {self.dtype} but the result "
                           f"requires dtype {out.dtype}")
    if not _C.can_cast(out.dtype, self.dtype):
        raise RuntimeError(f"{name}: result type {out.dtype} can't be cast to the desired "
                           f"output type {self.dtype}")


def _make_inplace(name: str) -> Any:
    from ember._argcheck import guard

    fn = _FUNCTIONS.get(name)
    fn = None if fn is None else guard(fn, name + "_")

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        src = _saved_self(self)
        out = fn(src, *args, **kwargs) if fn is not None else getattr(src, name)(*args,
                                                                                  **kwargs)
        _check_inplace_cast(name + "_", out, self)
        return self.copy_(out)

    method.__name__ = name + "_"
    method.__doc__ = f"In-place :func:`ember.{name}`."
    return method


def _check_scalar_fits(op: str, value: Any, tensor: Any) -> None:
    """A Python int that meets an integer tensor takes the tensor's dtype: it must fit there
    (PyTorch refuses rather than wrapping around)."""
    if (isinstance(value, int) and not isinstance(value, bool) and isinstance(tensor, Tensor)
            and not tensor.dtype.is_floating_point and not tensor.is_complex()
            and tensor.dtype != _C.bool):
        from ember._finfo import iinfo

        info = iinfo(tensor.dtype)
        low = info.min if info.min < 0 else -info.max  # unsigned: negatives wrap, as torch's
        if not low <= value <= info.max:
            raise RuntimeError(f"{op}: value {value} cannot be converted to type "
                               f"{tensor.dtype} without overflow (range [{info.min}, "
                               f"{info.max}])")


def _where_with_condition_only(where: Any) -> Any:
    def where_(condition: Tensor, input: Any = None, other: Any = None, **kwargs: Any) -> Any:
        if input is None and other is None and not kwargs:
            # torch.where(condition): the indices of the nonzero entries, one tensor per dim
            return _C.nonzero(condition, as_tuple=True)
        if input is None or other is None:
            raise TypeError("where(): expected where(condition) or where(condition, input, "
                            "other), got only one of input and other")
        _check_scalar_fits("where", input, other)
        _check_scalar_fits("where", other, input)
        return where(condition, input, other, **kwargs)

    where_.__name__ = "where"
    where_.__doc__ = ("``where(condition, input, other)``: input where condition holds, else "
                      "other; ``where(condition)`` is ``nonzero(condition, as_tuple=True)``.\n\n"
                      + (where.__doc__ or ""))
    where_.__wrapped__ = where  # type: ignore[attr-defined]
    return where_


_C_ADJOINT = _C.adjoint


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of a (batch of) matrices: a view for real dtypes, a conjugated
    copy for complex ones (ember has no lazy conjugate views).

    >>> import ember
    >>> ember.adjoint(ember.tensor([[1 + 2j, 3 + 0j]])).tolist()
    [[(1-2j)], [(3-0j)]]
    """
    if isinstance(input, Tensor) and input.ndim == 0:  # PyTorch still accepts it, warning
        import warnings

        warnings.warn("adjoint() is deprecated on 0-D tensors. Consider using x.conj().",
                      UserWarning, stacklevel=2)
        return input.conj() if input.is_complex() else input
    r = _C_ADJOINT(input)
    return r.conj() if r.is_complex() else r


_C_TENSOR_SPLIT = _C.tensor_split


def tensor_split(input: Tensor, indices_or_sections: Any = None, dim: int = 0, *,
                 sections: int | None = None, indices: Sequence[int] | None = None,
                 tensor_indices_or_sections: Tensor | None = None) -> tuple[Tensor, ...]:
    """Views of ``input`` along ``dim``: ``sections`` nearly equal pieces (an int), or pieces
    split before each of ``indices`` (a list). As in PyTorch the split may also be given as an
    int64 CPU tensor: a 0-D one is a number of sections, a 1-D one the indices.

    >>> import ember
    >>> [t.tolist() for t in ember.tensor_split(ember.arange(5), ember.tensor([1, 3]))]
    [[0], [1, 2], [3, 4]]
    """
    given = [v for v in (indices_or_sections, sections, indices, tensor_indices_or_sections)
             if v is not None]
    if len(given) != 1:
        raise TypeError("tensor_split(): expected exactly one of sections (int), indices (a "
                        f"sequence of ints) or tensor_indices_or_sections, got {len(given)}")
    split = given[0]
    if isinstance(split, Tensor):
        if split.dtype != _C.int64 or split.device.type != "cpu":
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be on cpu "
                               f"and of dtype int64, but got device {split.device} and dtype "
                               f"{split.dtype}")
        if split.dim() > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               f"zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {split.dim()} dims")
        split = int(split.item()) if split.dim() == 0 else [int(v) for v in split.tolist()]
    return tuple(_C_TENSOR_SPLIT(input, split, dim))


def _dtype_to_real(self: Any) -> Any:
    """The real counterpart of a complex dtype (complex64 -> float32); other dtypes unchanged.

    >>> import ember
    >>> ember.complex128.to_real()
    ember.float64
    """
    return {_C.complex64: _C.float32, _C.complex128: _C.float64}.get(self, self)


def _dtype_to_complex(self: Any) -> Any:
    """The complex counterpart of a floating dtype (float32 and bfloat16 -> complex64, float64
    -> complex128); complex dtypes unchanged.

    >>> import ember
    >>> ember.float32.to_complex()
    ember.complex64
    """
    if self.is_complex:
        return self
    pairs = {_C.float32: _C.complex64, _C.bfloat16: _C.complex64, _C.float64: _C.complex128}
    if self in pairs:
        return pairs[self]
    if self == _C.float16:  # PyTorch's complex32, a dtype ember does not have
        raise RuntimeError("to_complex: float16's complex counterpart (complex32) is not "
                           "supported by ember")
    raise RuntimeError(f"Unknown Complex ScalarType for {self}")


def install(namespace: dict) -> None:
    """Puts the functions into ``namespace`` (ember's) where missing, and the methods on
    Tensor."""
    from ember._argcheck import guard

    for name, fn in _FUNCTIONS.items():  # non-tensor arguments: a TypeError naming them
        namespace.setdefault(name, guard(fn, name))
    if not hasattr(namespace.get("where"), "__wrapped__"):
        namespace["where"] = _where_with_condition_only(namespace["where"])
    namespace["native_group_norm"] = native_group_norm  # PyTorch's signature too
    namespace["native_batch_norm"] = native_batch_norm  # empty saved statistics in eval mode
    if not hasattr(Tensor.random_, "__wrapped__"):
        Tensor.random_ = _keyword_only_generator(Tensor.random_, "random_", "to")
        Tensor.bernoulli = _keyword_only_generator(Tensor.bernoulli, "bernoulli", "p")
    if not hasattr(namespace["norm"], "__wrapped__"):
        namespace["norm"] = _raising_linalg_error(namespace["norm"])
        Tensor.norm = _raising_linalg_error(Tensor.norm)
    for name in _METHODS:
        if not hasattr(Tensor, name):
            setattr(Tensor, name, guard(_FUNCTIONS[name], name))
    for name in _INPLACE:
        if not hasattr(Tensor, name + "_") and (name in _FUNCTIONS or hasattr(Tensor, name)):
            setattr(Tensor, name + "_", _make_inplace(name))
    # conjugate complex inputs (replace the core binding, which does not)
    namespace["adjoint"] = Tensor.adjoint = adjoint
    if not hasattr(_C.dtype, "to_real"):  # dtype.to_real() / to_complex(), as in PyTorch
        _C.dtype.to_real = _dtype_to_real
        _C.dtype.to_complex = _dtype_to_complex
    # a tensor of indices or sections (PyTorch's third overload) besides ints and lists
    namespace["tensor_split"] = Tensor.tensor_split = tensor_split
    if not hasattr(Tensor, "fill_diagonal_"):
        Tensor.fill_diagonal_ = fill_diagonal_
    for name, fn in _TENSOR_ONLY.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for name in ("is_nonzero", "is_same_size"):  # the top-level predicates, as methods
        if not hasattr(Tensor, name) and name in namespace:
            setattr(Tensor, name, namespace[name])
