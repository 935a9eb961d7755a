"""``ember.linalg``: the part of ``torch.linalg`` that needs no matrix factorization: vector and
matrix norms, cross and dot products, matmul, diagonal, multi_dot, matrix_power (n >= 0) and
vander, plus cholesky and solve_triangular (column by column on ember's ops, differentiable;
fine for the small matrices of distributions and examples). ember has no other factorization
yet (svd, qr, eigh, solve, inv, det, ...): asking for one raises an AttributeError that says
so.

>>> import ember
>>> ember.linalg.vector_norm(ember.tensor([3.0, 4.0])).item()
5.0
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ember import _C
from ember._C import Tensor

__all__ = ["vector_norm", "matrix_norm", "norm", "cross", "vecdot", "matmul", "diagonal",
           "multi_dot", "matrix_power", "vander", "cholesky", "solve_triangular", "LinAlgError"]


class LinAlgError(RuntimeError):
    """A linear-algebra routine could not complete (a matrix not positive definite, say), as
    ``torch.linalg.LinAlgError``."""

# torch.linalg functions that need a factorization ember does not have
_FACTORIZATIONS = (
    "svd", "svdvals", "qr", "eig", "eigvals", "eigh", "eigvalsh", "inv", "inv_ex", "solve",
    "solve_ex", "det", "slogdet", "cholesky_ex", "lstsq",
    "pinv", "matrix_rank", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "ldl_factor",
    "ldl_factor_ex", "ldl_solve", "matrix_exp", "tensorinv", "tensorsolve", "cond",
    "householder_product",
)


def __getattr__(name: str) -> Any:
    if name in _FACTORIZATIONS:
        raise AttributeError(
            f"ember.linalg.{name} is not available: ember has no matrix factorizations "
            f"other than Cholesky (no LU, QR, SVD or eigen) yet; ember.linalg offers {', '.join(__all__)}")
    raise AttributeError(f"module 'ember.linalg' has no attribute {name!r}")


def _dims(x: Tensor, dim: int | Sequence[int] | None) -> list[int]:
    if dim is None:
        return list(range(x.ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    nd = max(x.ndim, 1)
    out = []
    for d in dims:
        if not -nd <= d < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                             f"{nd - 1}], but got {d})")
        out.append(d % nd)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {tuple(dims)} appears multiple times in the list of dims")
    return out


def vector_norm(x: Tensor, ord: float = 2, dim: int | Sequence[int] | None = None,
                keepdim: bool = False, *, dtype: Any = None, out: Tensor | None = None) -> Tensor:
    """The vector ``ord``-norm of ``x`` over ``dim`` (all dims by default): inf and -inf the
    largest and smallest absolute values, 0 the count of nonzeros, else
    ``sum(|x|**ord) ** (1 / ord)``.

    >>> import ember
    >>> ember.linalg.vector_norm(ember.tensor([[3.0, -4.0]]), ord=1, dim=1).tolist()
    [7.0]
    """
    if dtype is not None:
        x = x.to(dtype)
    if not x.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {x.dtype}")
    dims = _dims(x, dim)
    if x.ndim == 0:
        r = x.abs() if ord != 0 else (x != 0).to(x.dtype)
    elif ord == math.inf or ord == -math.inf:
        if x.numel() == 0 and ord == -math.inf:
            raise RuntimeError("linalg.vector_norm cannot compute the -inf norm on an empty "
                               "tensor because the operation does not have an identity")
        a = x.abs()
        r = a.amax(dims, keepdim) if ord > 0 else a.amin(dims, keepdim)
    elif ord == 0:
        r = (x != 0).to(x.dtype).sum(dims, keepdim=keepdim)
    elif ord < 0:
        # a zero element makes the norm 0 (|0|**ord is inf); those slices get zero gradients
        a = x.abs()
        zero = a == 0
        safe = _C.where(zero, _C.ones_like(a), a)
        r = safe.pow(ord).sum(dims, keepdim=keepdim).pow(1.0 / ord)
        r = _C.where(zero.any(dims, keepdim=keepdim) if dims else zero, _C.zeros_like(r), r)
    else:
        r = x.norm(float(ord), dims, keepdim)
    if out is not None:
        out.copy_(r)
        return out
    return r


def matrix_norm(A: Tensor, ord: str | float = "fro", dim: tuple[int, int] = (-2, -1),
                keepdim: bool = False, *, dtype: Any = None, out: Tensor | None = None) -> Tensor:
    """The matrix norm of ``A`` over the two ``dim`` dims: ``'fro'``, or ``inf``/``-inf``
    (max/min absolute row sum) and ``1``/``-1`` (max/min absolute column sum). ``'nuc'``
    and ``2``/``-2`` need singular values, which ember cannot compute yet.

    >>> import ember
    >>> ember.linalg.matrix_norm(ember.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1).item()
    6.0
    """
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 "
                           f"dimensions, got shape {tuple(A.shape)}")
    d0, d1 = _dims(A, tuple(dim))
    if ord == "fro":
        r = vector_norm(A, 2, (d0, d1), keepdim)
    elif ord in (math.inf, -math.inf, 1, -1):
        # rows (inf) sum over the column dim; columns (1) over the row dim
        sum_dim, red_dim = (d1, d0) if ord in (math.inf, -math.inf) else (d0, d1)
        s = A.abs().sum(sum_dim, keepdim=True)
        r = s.amax(red_dim, keepdim=True) if ord > 0 else s.amin(red_dim, keepdim=True)
        if not keepdim:
            r = r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    elif ord in ("nuc", 2, -2):
        raise RuntimeError(f"linalg.matrix_norm: ord={ord!r} needs singular values, which ember "
                           f"cannot compute yet (no SVD); use 'fro', 1, -1, inf or -inf")
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord!r} not supported.")
    if out is not None:
        out.copy_(r)
        return out
    return r


def norm(A: Tensor, ord: str | float | None = None, dim: int | Sequence[int] | None = None,
         keepdim: bool = False, *, dtype: Any = None, out: Tensor | None = None) -> Tensor:
    """A vector or matrix norm, as ``torch.linalg.norm``: a matrix norm when ``dim`` is a pair
    or ``ord`` a string (or ``dim`` is None, ``ord`` given and A 2-D), else a vector norm;
    ord=None is the 2-norm of the flattened input or the Frobenius norm.

    >>> import ember
    >>> ember.linalg.norm(ember.tensor([[3.0, 4.0]])).item()
    5.0
    """
    if dim is not None and not isinstance(dim, int):
        dim = tuple(dim)
    if isinstance(ord, str) or (isinstance(dim, tuple) and len(dim) == 2) or (
            dim is None and ord is not None and A.ndim == 2):
        if dim is None:
            dim = (-2, -1)
        if ord is None:
            ord = "fro"
        return matrix_norm(A, ord, dim, keepdim, dtype=dtype, out=out)
    if dim is None and ord is not None and A.ndim != 1:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {A.ndim}D.")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype, out=out)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (the last by default), broadcast.

    >>> import ember
    >>> ember.linalg.cross(ember.tensor([0.0, 1.0, 0.0]), ember.tensor([0.0, 0.0, 1.0])).tolist()
    [1.0, 0.0, 0.0]
    """
    from ember._compat_ops import cross as _cross

    return _cross(input, other, dim)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of x and y along ``dim``, broadcast.

    >>> import ember
    >>> ember.linalg.vecdot(ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0])).item()
    11.0
    """
    return (x * y).sum(dim)


def matmul(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Alias of :func:`ember.matmul`."""
    return _C.matmul(input, other, out=out) if out is not None else _C.matmul(input, other)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonals of the matrices in A (a view), by default over the last two dims.

    >>> import ember
    >>> ember.linalg.diagonal(ember.eye(2)).tolist()
    [1.0, 1.0]
    """
    return A.diagonal(offset, dim1, dim2)


def multi_dot(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor:
    """The product of a chain of matrices (the first may be a 1-D row vector, the last a 1-D
    column vector), multiplied in the order that needs the fewest operations.

    >>> import ember
    >>> ember.linalg.multi_dot([ember.ones(2, 3), ember.ones(3, 4), ember.ones(4)]).tolist()
    [12.0, 12.0]
    """
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = [ts[0].unsqueeze(0) if first_vec else ts[0]] + ts[1:-1] + \
        [ts[-1].unsqueeze(1) if last_vec else ts[-1]]
    for i, m in enumerate(mats):
        if m.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D (the first and last may be "
                               f"1D) but got {ts[i].ndim}D")
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{tuple(mats[i].shape)} and {tuple(mats[i + 1].shape)} cannot "
                               f"be multiplied")
    # the classic O(n^3) chain-order dynamic program
    dims = [mats[0].shape[0]] + [m.shape[1] for m in mats]
    n = len(mats)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return mats[i]
        k = split[i][j]
        return _C.matmul(product(i, k), product(k + 1, j))

    r = product(0, n - 1)
    if first_vec:
        r = r.squeeze(0)
    if last_vec:
        r = r.squeeze(-1)
    if out is not None:
        out.copy_(r)
        return out
    return r


def matrix_power(A: Tensor, n: int, *, out: Tensor | None = None) -> Tensor:
    """A square matrix (or batch) to the integer power n >= 0 by repeated squaring (n < 0
    needs an inverse, which ember cannot compute yet).

    >>> import ember
    >>> ember.linalg.matrix_power(ember.tensor([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
    [[1.0, 3.0], [0.0, 1.0]]
    """
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {A.shape[-2] if A.ndim >= 2 else A.numel()} by "
                           f"{A.shape[-1] if A.ndim else 1} matrices")
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise RuntimeError("linalg.matrix_power: a negative power needs the matrix inverse, which "
                           "ember cannot compute yet (no LU factorization)")
    if n == 0:
        r = _C.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(*A.shape).clone()
    else:
        r = None
        base = A
        while n:
            if n & 1:
                r = base if r is None else _C.matmul(r, base)
            n >>= 1
            if n:
                base = _C.matmul(base, base)
    if out is not None:
        out.copy_(r)
        return out
    return r


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """The Vandermonde matrix with increasing powers ``x**0, x**1, ..., x**(N-1)`` along a
    new last dim (batched over x's leading dims).

    >>> import ember
    >>> ember.linalg.vander(ember.tensor([2, 3])).tolist()
    [[1, 2], [1, 3]]
    """
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    n = x.shape[-1] if N is None else N
    if n <= 1 and N is not None and N < 1:
        raise RuntimeError(f"N must be greater than 1, got {N}")
    cols = [_C.ones_like(x)]
    for _ in range(1, n):
        cols.append(cols[-1] * x)
    return _C.stack(cols, -1)


def cholesky(A: Tensor, *, upper: bool = False, out: Tensor | None = None) -> Tensor:
    """The Cholesky factor of a (batch of) symmetric positive-definite matrices: lower L with
    ``L @ L.mT == A`` from A's lower triangle (or upper ``U = L.mT`` from its upper triangle
    with ``upper=True``); differentiable. Raises
    LinAlgError for a matrix that is not positive definite.

    >>> import ember
    >>> ember.linalg.cholesky(ember.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    from ember.distributions import _linalg

    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.cholesky: A must be batches of square matrices, got shape "
                           f"{tuple(A.shape)}")
    # PyTorch reads one triangle only (the lower, or the upper for upper=True), and gives
    # the symmetric gradient (A's two triangles share each off-diagonal entry's gradient)
    part = A.triu() if upper else A.tril()
    values = part + part.mT - A.diagonal(0, -2, -1).diag_embed()
    half = (A + A.mT) * 0.5
    sym = half + (values - half).detach()
    try:
        r = _linalg.cholesky(sym)
    except ValueError:
        raise LinAlgError("linalg.cholesky: The factorization could not be completed because "
                          "the input is not positive-definite") from None
    r = r.mT if upper else r
    if out is not None:
        out.copy_(r)
        return out
    return r


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False, out: Tensor | None = None) -> Tensor:
    """The solution X of ``A @ X = B`` (``X @ A = B`` with ``left=False``) for triangular A
    (only its ``upper`` or lower triangle is read; ``unitriangular`` takes its diagonal as
    ones); batch dims broadcast; differentiable.

    >>> import ember
    >>> a = ember.tensor([[2.0, 1.0], [0.0, 1.0]])
    >>> ember.linalg.solve_triangular(a, ember.tensor([[3.0], [1.0]]), upper=True).tolist()
    [[1.0], [1.0]]
    """
    from ember.distributions import _linalg

    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.solve_triangular: A must be batches of square matrices, "
                           f"got shape {tuple(A.shape)}")
    if B.ndim < 2:
        raise RuntimeError(f"linalg.solve_triangular: B must have at least 2 dimensions, got "
                           f"shape {tuple(B.shape)}")
    n = A.shape[-1]
    tri = A.triu() if upper else A.tril()
    if unitriangular:
        eye = _C.eye(n, dtype=A.dtype, device=A.device)
        tri = tri * (1 - eye) + eye
    if not left:  # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way
        tri, B, upper = tri.mT, B.mT, not upper
    if B.shape[-2] != n:
        raise RuntimeError(f"linalg.solve_triangular: incompatible shapes of A "
                           f"{tuple(A.shape)} and B {tuple(B.shape)}")
    if upper:  # reversing rows and columns turns an upper triangle into a lower one
        x = _linalg.solve_triangular(tri.flip([-2, -1]), B.flip([-2])).flip([-2])
    else:
        x = _linalg.solve_triangular(tri, B)
    r = x.mT if not left else x
    if out is not None:
        out.copy_(r)
        return out
    return r
