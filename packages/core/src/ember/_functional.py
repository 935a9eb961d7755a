"""Python front-ends for ops whose PyTorch call style the op schema cannot express
(variadic tensors, a dims argument that is an int or a pair of lists)."""

from __future__ import annotations

from typing import Any, Sequence

from ember import _C
from ember._C import Tensor


def einsum(*args: Any) -> Tensor:
    """Einstein summation, as ``torch.einsum``: ``einsum(equation, *operands)`` (operands as
    arguments or as one list), or the sublist form ``einsum(op1, sublist1, op2, sublist2, ...,
    [sublist_out])`` where a sublist holds ints in [0, 52) (0-25 stand for A-Z, 26-51 for a-z)
    and ``...``.

    >>> import ember
    >>> ember.einsum("ij,jk->ik", ember.ones(2, 3), ember.ones(3, 4)).shape
    ember.Size([2, 4])
    >>> ember.einsum(ember.ones(2, 3), [0, 1], ember.ones(3, 4), [1, 2], [0, 2]).shape
    ember.Size([2, 4])
    """
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if isinstance(args[0], Tensor):
        equation = ",".join(_sublist_subscripts(sub) for sub in args[1::2])
        if len(args) % 2 == 1:  # an odd count ends with the output's sublist
            equation += "->" + _sublist_subscripts(args[-1])
            operands: tuple = tuple(args[:-1:2])
        else:
            operands = tuple(args[::2])
    else:
        equation, operands = args[0], tuple(args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:  # einsum("ij", []): PyTorch's ValueError, as for no operands at all
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    return _C.einsum(equation, _promote_private_sums(equation, list(operands)))


def _sublist_subscripts(sublist: Sequence) -> str:
    """The equation letters of one sublist of einsum's sublist form."""
    letters = []
    for n in sublist:
        if n is Ellipsis:
            letters.append("...")
        elif isinstance(n, int) and 0 <= n < 26:
            letters.append(chr(ord("A") + n))
        elif isinstance(n, int) and 26 <= n < 52:
            letters.append(chr(ord("a") + n - 26))
        else:
            raise ValueError("einsum(): subscript in subscript list is not within the valid "
                             "range [0, 52)")
    return "".join(letters)


def _promote_private_sums(equation: str, operands: list) -> list:
    """torch sums a label found in one operand only (and not in the output) with sum(), which
    takes integer and bool operands to int64 (einsum('ij->', int16) is int64): do the same."""
    if not isinstance(equation, str) or not all(isinstance(t, Tensor) for t in operands):
        return operands  # the op's own checks report it
    lhs, arrow, rhs = equation.partition("->")
    terms = [{c for c in term if c.isalpha()} for term in lhs.split(",")]
    if len(terms) != len(operands):
        return operands
    letters = [c for c in lhs if c.isalpha()]
    out = {c for c in rhs if c.isalpha()} if arrow else {c for c in letters
                                                          if letters.count(c) == 1}
    res = []
    for k, (t, term) in enumerate(zip(operands, terms)):
        others = set().union(*(terms[:k] + terms[k + 1:]))
        private = term - others - out
        integral = not (t.is_floating_point() or t.is_complex())
        res.append(t.to(_C.int64) if private and integral else t)
    return res


def tensordot(a: Tensor, b: Tensor, dims: int | Sequence = 2, out: Tensor | None = None) -> Tensor:
    """Contracts ``dims`` trailing dims of ``a`` with leading dims of ``b`` (or the listed pairs).

    >>> import ember
    >>> ember.tensordot(ember.ones(2, 3, 4), ember.ones(3, 4, 5), dims=([1, 2], [0, 1])).shape
    ember.Size([2, 5])
    """
    if isinstance(dims, int):
        # A dims past either rank is the op's own error (never a list of 2**40 pairs).
        if 0 <= dims <= min(getattr(a, "ndim", -1), getattr(b, "ndim", -1)):
            a, b = _sum_broadcast_pairs(a, b, range(-dims, 0), range(dims))
        return _C.tensordot(a, b, dims, out=out)
    da, db = dims
    if isinstance(da, int):
        da, db = [da], [db]
    a, b = _sum_broadcast_pairs(a, b, da, db)
    return _C.tensordot(a, b, list(da), list(db), out=out)


def _sum_broadcast_pairs(a: Any, b: Any, da: Any, db: Any) -> tuple[Any, Any]:
    """A contracted pair of sizes (1, n) broadcasts, as in PyTorch: the size-n side is summed
    over that dim (kept, size 1) first, so that the contraction itself sees equal sizes. Pairs
    the op refuses (bad dims, other sizes) are left for its own checks."""
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
        return a, b
    try:
        pairs = [(int(x), int(y)) for x, y in zip(da, db, strict=True)]
    except (TypeError, ValueError):
        return a, b
    for x, y in pairs:
        if not (-a.ndim <= x < a.ndim and -b.ndim <= y < b.ndim) or a.ndim == 0 or b.ndim == 0:
            return a, b
    for x, y in pairs:
        sa, sb = a.shape[x], b.shape[y]
        if sa == sb:
            continue
        if sb == 1:
            a = a.sum(x, keepdim=True, dtype=a.dtype)
        elif sa == 1:
            b = b.sum(y, keepdim=True, dtype=b.dtype)
    return a, b


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                "donot_use_mm_for_euclid_dist")


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """p-norm distances between each row of ``x1`` (..., P, M) and each row of ``x2``
    (..., R, M), as ``torch.cdist``: a (..., P, R) result over the broadcast batch dims.

    For p = 2 with more than 25 rows on a side (or ``compute_mode="use_mm_for_euclid_dist"``)
    the distances come from one matrix product, ``|a|^2 + |b|^2 - 2 a.b``, faster and slightly
    less exact; ``"donot_use_mm_for_euclid_dist"`` always takes the differences. Zero distances
    get a zero gradient.

    >>> import ember
    >>> ember.cdist(ember.tensor([[0.0, 0.0]]), ember.tensor([[3.0, 4.0], [0.0, 1.0]])).tolist()
    [[5.0, 1.0]]
    """
    if x1.ndim < 2 or x2.ndim < 2:
        bad, t = ("X1", x1) if x1.ndim < 2 else ("X2", x2)
        raise RuntimeError(f"cdist only supports at least 2D tensors, {bad} got: {t.ndim}D "
                           f"(shape {tuple(t.shape)})")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"cdist: X1 and X2 must have the same number of columns. "
                           f"X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    for name, t in (("X1", x1), ("X2", x2)):
        if not t.is_floating_point():
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {t.dtype}")
    if x1.dtype != x2.dtype:
        raise RuntimeError(f"cdist: X1 and X2 must have the same dtype, got {x1.dtype} and "
                           f"{x2.dtype}")
    p = float(p)
    if not p >= 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got p={p}")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"cdist: {compute_mode!r} is not a valid value for compute_mode; "
                         f"possible modes: {', '.join(_CDIST_MODES)}")
    use_mm = p == 2.0 and (
        compute_mode == "use_mm_for_euclid_dist"
        or (compute_mode == _CDIST_MODES[0] and (x1.shape[-2] > 25 or x2.shape[-2] > 25)))
    if use_mm:
        sq = ((x1 * x1).sum(-1, keepdim=True) + (x2 * x2).sum(-1).unsqueeze(-2)
              - 2 * _C.matmul(x1, x2.transpose(-2, -1)))
        pos = sq > 0
        # sqrt of the positive entries only: a zero distance has a zero (not a NaN) gradient
        return _C.where(pos, _C.where(pos, sq, _C.ones_like(sq)).sqrt(), _C.zeros_like(sq))
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (..., P, R, M)
    if x1.dtype in (_C.float16, _C.bfloat16) and diff.numel():
        # torch's direct kernel has no half version (only its matrix-product path takes one)
        raise NotImplementedError(f"cdist: not implemented for {x1.dtype} (only p=2 with more "
                                  f"than 25 rows, through a matrix product, takes half dtypes)")
    return diff.norm(p, [diff.ndim - 1], False)


def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
):
    """The unique elements (or slices along ``dim``), optionally with inverse indices and counts.

    >>> import ember
    >>> ember.unique(ember.tensor([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    out, inverse, counts = _C._unique(input, sorted, return_inverse, return_counts, dim)
    if not (return_inverse or return_counts):
        return out
    extra = ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return (out, *extra)


from ember import _argcheck  # noqa: E402

_argcheck.guard_module(globals())  # non-tensor arguments: a TypeError naming them
Tensor.unique = unique
