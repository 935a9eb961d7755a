"""``ember.linalg``: PyTorch's ``torch.linalg`` for real (float32/float64) and complex
(complex64/complex128) matrices.

The factorizations run on LAPACK on the CPU (OpenBLAS's, ``csrc/kernels/cpu/linalg_lapack.cpp``),
batched over the leading dims, with derivatives: ``inv``/``inv_ex``, ``solve``/``solve_ex``,
``det``, ``slogdet``, ``svd``/``svdvals``, ``qr``, ``eigh``/``eigvalsh``, ``lstsq``,
``lu_factor``/``lu_factor_ex``/``lu``/``lu_solve``, ``cholesky``/``cholesky_ex``,
``solve_triangular``, and on top of them ``pinv``, ``matrix_rank``, ``cond``,
``tensorinv``/``tensorsolve`` and ``matrix_power`` (negative powers too). Then the rest: vector
and matrix norms (``'nuc'`` and 2 / -2 through the SVD), cross and dot products, matmul,
diagonal, multi_dot, vander and ``matrix_exp`` (Pade approximation with scaling and squaring).
A value-dependent failure (a singular matrix for inv or solve, no convergence) raises
:class:`LinAlgError` with PyTorch's message. The general eigendecomposition ``eig``/``eigvals``
(LAPACK's geev, real or complex input, complex results, differentiable),
``householder_product`` (orgqr) and the LDL^T functions ``ldl_factor``/``ldl_factor_ex``/
``ldl_solve`` (sytrf / sytrs; these four also take complex matrices) complete the set; ``torch.geqrf``, ``orgqr`` and
``ormqr`` are installed at the top level and as Tensor methods, and the removed ``Tensor.eig``,
``symeig``, ``lstsq`` and ``solve`` raise PyTorch's "use linalg.X" errors. Only CPU (and meta)
tensors have factorization kernels. Complex matrices take the same functions (LAPACK's c / z
routines: Hermitian ``eigh``, ``A = L L^H`` Cholesky, unitary Q, real singular values and
eigenvalues, complex determinants with a complex ``slogdet`` sign, real norms), with
PyTorch's complex gradients.

>>> import ember
>>> ember.linalg.vector_norm(ember.tensor([3.0, 4.0])).item()
5.0
>>> ember.linalg.inv(ember.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
[[0.5, 0.0], [0.0, 0.25]]
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ember import _C, _outarg
from ember._C import Tensor

__all__ = ["vector_norm", "matrix_norm", "norm", "cross", "vecdot", "matmul", "diagonal",
           "multi_dot", "matrix_power", "vander", "cholesky", "cholesky_ex", "solve_triangular",
           "LinAlgError", "inv", "inv_ex", "solve", "solve_ex", "det", "slogdet", "svd",
           "svdvals", "qr", "eigh", "eigvalsh", "lstsq", "lu_factor", "lu_factor_ex", "lu",
           "lu_solve", "pinv", "matrix_rank", "cond", "tensorinv", "tensorsolve", "matrix_exp",
           "eig", "eigvals", "householder_product", "ldl_factor", "ldl_factor_ex", "ldl_solve"]


class LinAlgError(RuntimeError):
    """A linear-algebra routine could not complete (a matrix not positive definite, say), as
    ``torch.linalg.LinAlgError``."""


def __getattr__(name: str) -> Any:
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


def _check_dtype_arg(op: str, dtype: Any) -> None:
    if dtype is not None and not isinstance(dtype, _C.dtype):
        raise TypeError(f"{op}(): argument 'dtype' must be an ember dtype, not "
                        f"{type(dtype).__name__}")


def _check_no_narrowing(op: str, x: Any, dtype: Any) -> None:
    """A norm's dtype= may widen the input, never narrow it (float32 input, dtype=float16 would
    round the input before the norm), as torch."""
    if (dtype is not None and isinstance(x, Tensor) and x.is_complex() == dtype.is_complex
            and _C.promote_types(x.dtype, dtype) != dtype):
        raise RuntimeError(f"{op}: the dtype of the input ({_dtype_name(x.dtype)}) should be "
                           f"convertible without narrowing to the specified dtype "
                           f"({_dtype_name(dtype)})")


def vector_norm(x: Tensor, ord: float = 2, dim: int | Sequence[int] | None = None,
                keepdim: bool = False, *, dtype: Any = None, out: Tensor | None = None) -> Tensor:
    """The vector ``ord``-norm of ``x`` over ``dim`` (all dims by default): inf and -inf the
    largest and smallest absolute values, 0 the count of nonzeros, else
    ``sum(|x|**ord) ** (1 / ord)``.

    >>> import ember
    >>> ember.linalg.vector_norm(ember.tensor([[3.0, -4.0]]), ord=1, dim=1).tolist()
    [7.0]
    """
    _check_dtype_arg("linalg.vector_norm", dtype)
    if ord is None or isinstance(ord, (str, bytes)):
        # (compared with numbers below: "'<' not supported between 'str' and 'int'")
        raise TypeError(f"linalg.vector_norm: argument 'ord' must be a number, not "
                        f"{type(ord).__name__} ({ord!r}); the matrix norms 'fro' and 'nuc' are "
                        "linalg.matrix_norm's")
    if isinstance(x, Tensor) and not (x.is_floating_point() or x.is_complex()):
        # checked before dtype= converts it: an integer input is refused either way (torch)
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {_dtype_name(x.dtype)}")
    if dtype is not None:
        if isinstance(x, Tensor) and x.is_complex() != dtype.is_complex:
            want = "complex for complex" if x.is_complex() else "real for real"
            raise RuntimeError(f"linalg.vector_norm: dtype should be {want} inputs, but got "
                               f"{_dtype_name(dtype)}")
        _check_no_narrowing("linalg.vector_norm", x, dtype)
        x = x.to(dtype)
    if x.is_complex():  # the norm of the absolute values (a real result)
        x = x.abs()
    elif not x.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {_dtype_name(x.dtype)}")
    dims = _dims(x, dim)
    if x.ndim == 0:
        r = x.abs() if ord != 0 else (x != 0).to(x.dtype)
    elif ord == math.inf or ord == -math.inf:
        if any(x.shape[d] == 0 for d in (dims if dims else range(x.ndim))):
            # (+inf too: amax of nothing has no identity either, a RuntimeError as PyTorch's)
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty "
                               f"tensor because the operation does not have an identity")
        a = x.abs()
        r = a.amax(dims, keepdim) if ord > 0 else a.amin(dims, keepdim)
    elif ord == 0:
        r = (x != 0).to(x.dtype).sum(dims, keepdim=keepdim)
    elif ord < 0:
        if any(x.shape[d] == 0 for d in (dims if dims else range(x.ndim))):
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty "
                               f"tensor because the operation does not have an identity")
        # a zero element makes the norm 0 (|0|**ord is inf); those slices get zero gradients
        a = x.abs()
        zero = a == 0
        safe = _C.where(zero, _C.ones_like(a), a)
        # |x|**ord of a half tensor underflows (1e4**-2 in float16): sum it in float32, as torch
        half = x.dtype in (_C.float16, _C.bfloat16)
        r = (safe.float() if half else safe).pow(ord).sum(dims, keepdim=keepdim).pow(1.0 / ord)
        r = r.to(x.dtype) if half else r
        # ... unless the slice holds a NaN, which wins (as in torch)
        hit = zero & ~a.isnan().any(dims, keepdim=True) if dims else zero & ~a.isnan()
        r = _C.where(hit.any(dims, keepdim=keepdim) if dims else hit, _C.zeros_like(r), r)
    elif math.isnan(ord) and any(x.shape[d] == 0 for d in (dims if dims else range(x.ndim))):
        r = x.abs().sum(dims, keepdim=keepdim)  # an empty sum is 0, whatever the power (torch)
    else:
        r = x.norm(float(ord), dims, keepdim)
    return _out(r, out, "linalg.vector_norm")


def matrix_norm(A: Tensor, ord: str | float = "fro", dim: tuple[int, int] = (-2, -1),
                keepdim: bool = False, *, dtype: Any = None, out: Tensor | None = None) -> Tensor:
    """The matrix norm of ``A`` over the two ``dim`` dims: ``'fro'``, or ``inf``/``-inf``
    (max/min absolute row sum), ``1``/``-1`` (max/min absolute column sum), ``'nuc'`` (the
    sum of the singular values) and ``2``/``-2`` (the largest/smallest singular value).

    >>> import ember
    >>> ember.linalg.matrix_norm(ember.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1).item()
    6.0
    """
    _check_dtype_arg("linalg.matrix_norm", dtype)
    if isinstance(A, Tensor) and not (A.is_floating_point() or A.is_complex()):
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor as "
                           f"input. Got {_dtype_name(A.dtype)}")
    if dtype is not None:
        if A.is_complex() != dtype.is_complex:
            want = "complex for complex" if A.is_complex() else "real for real"
            raise RuntimeError(f"linalg.matrix_norm: dtype should be {want} inputs, but got "
                               f"{_dtype_name(dtype)}")
        _check_no_narrowing("linalg.matrix_norm", A, dtype)
        A = A.to(dtype)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 "
                           f"dimensions, got shape {tuple(A.shape)}")
    dim = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple, got {list(dim)}")
    d0, d1 = _dims(A, dim)
    if ord == "fro":
        r = vector_norm(A, 2, (d0, d1), keepdim)
    elif ord in (math.inf, -math.inf, 1, -1):
        # rows (inf) sum over the column dim; columns (1) over the row dim
        sum_dim, red_dim = (d1, d0) if ord in (math.inf, -math.inf) else (d0, d1)
        s = A.abs().sum(sum_dim, keepdim=True)
        if ord > 0 and s.shape[red_dim] == 0:  # no rows (columns): the norm is 0, as torch's
            r = s.sum(red_dim, keepdim=True)
        else:
            r = s.amax(red_dim, keepdim=True) if ord > 0 else s.amin(red_dim, keepdim=True)
        if not keepdim:
            r = r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    elif ord in ("nuc", 2, -2):
        _check_matrix("linalg.matrix_norm", A)
        d0, d1 = sorted((d0, d1))
        s = svdvals(A.movedim((d0, d1), (-2, -1)))
        if ord == 2 and s.shape[-1] == 0:  # an empty matrix: 0, as torch (amax has no identity)
            r = s.sum(-1)
        else:
            r = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
        if keepdim:
            r = r.unsqueeze(d0).unsqueeze(d1)
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord!r} not supported.")
    return _out(r, out, "linalg.matrix_norm")


def norm(A: Tensor, ord: str | float | None = None, dim: int | Sequence[int] | None = None,
         keepdim: bool = False, *, dtype: Any = None, out: Tensor | None = None) -> Tensor:
    """A vector or matrix norm, as ``torch.linalg.norm``: a matrix norm when ``dim`` is a pair
    or ``ord`` a string (or ``dim`` is None, ``ord`` given and A 2-D), else a vector norm;
    ord=None is the 2-norm of the flattened input or the Frobenius norm.

    >>> import ember
    >>> ember.linalg.norm(ember.tensor([[3.0, 4.0]])).item()
    5.0
    """
    try:
        return _norm(A, ord, dim, keepdim, dtype, out)
    except Exception as e:  # errors name the op called, not the one it dispatched to
        msg = e.args[0] if e.args and isinstance(e.args[0], str) else ""
        for inner in ("linalg.vector_norm", "linalg.matrix_norm"):
            if msg.startswith(inner):
                e.args = ("linalg.norm" + msg[len(inner):], *e.args[1:])
        raise


def _norm(A: Tensor, ord: Any, dim: Any, keepdim: bool, dtype: Any, out: Tensor | None) -> Tensor:
    if dim is not None and not isinstance(dim, int):
        dim = tuple(dim)
        if len(dim) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                               f"Got {list(dim)}")
    if dim is None and ord is not None and A.ndim not in (1, 2):
        # (a string ord too: 'fro' of a 3-D input is not taken over its last two dims)
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {A.ndim}D.")
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
    if isinstance(x, Tensor) and isinstance(y, Tensor) and x.dtype != y.dtype:
        # (no promotion, as torch: float16 x complex128 gave a complex128 result)
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x "
                           f"of type {_dtype_name(x.dtype)} and y of type {_dtype_name(y.dtype)} "
                           f"instead")
    return ((x.conj() if x.is_complex() else x) * y).sum(dim)  # conjugates x, as torch


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
    for i, t in enumerate(ts):
        if not isinstance(t, Tensor):
            raise TypeError(f"multi_dot(): expected a sequence of Tensors, but element {i} is "
                            f"{type(t).__name__}")
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
    if n == 3:  # as torch: (A B) C unless A (B C) costs strictly less (low precision rounds alike)
        ab_c = dims[0] * dims[2] * (dims[1] + dims[3])
        a_bc = dims[1] * dims[3] * (dims[0] + dims[2])
        split[0][2] = 0 if ab_c > a_bc else 1

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
    return _out(r, out, "linalg.multi_dot")


def matrix_power(A: Tensor, n: int, *, out: Tensor | None = None) -> Tensor:
    """A square matrix (or batch) to the integer power n by repeated squaring (of the inverse
    for n < 0).

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
        A, n = inv(A), -n
    if n == 0:
        r = _eye(A.shape[-1], A).expand(*A.shape).clone()
    else:
        r = None
        base = A
        while n:
            if n & 1:
                r = base if r is None else _C.matmul(r, base)
            n >>= 1
            if n:
                base = _C.matmul(base, base)
    return _out(r, out, "linalg.matrix_power")


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """The Vandermonde matrix with increasing powers ``x**0, x**1, ..., x**(N-1)`` along a
    new last dim (batched over x's leading dims).

    >>> import ember
    >>> ember.linalg.vander(ember.tensor([2, 3])).tolist()
    [[1, 2], [1, 3]]
    """
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    if x.dtype in (_C.bool, _C.float16, _C.bfloat16):
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer tensors, "
                           f"but got {_dtype_name(x.dtype)}")
    n = x.shape[-1] if N is None else N
    if n <= 1 and N is not None and N < 1:
        raise RuntimeError(f"N must be greater than 1, got {N}")
    cols = [_C.ones_like(x)]
    for _ in range(1, n):
        cols.append(cols[-1] * x)
    return _C.stack(cols, -1)


def cholesky(A: Tensor, *, upper: bool = False, out: Tensor | None = None) -> Tensor:
    """The Cholesky factor of a (batch of) symmetric (complex: Hermitian) positive-definite
    matrices: lower L with ``L @ L.mH == A`` from A's lower triangle (or upper ``U = L.mH``
    from its upper triangle with ``upper=True``); LAPACK's potrf, differentiable (the gradient is symmetric: A's two
    triangles share each off-diagonal entry). Raises LinAlgError for a matrix that is not
    positive definite.

    >>> import ember
    >>> ember.linalg.cholesky(ember.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    L, info = cholesky_ex(A, upper=upper)
    _raise_cholesky(info)
    return _out(L, out, "linalg.cholesky")


def _raise_cholesky(info: Tensor) -> None:
    bad = _first_failure(info)
    if bad is not None:
        raise LinAlgError(f"linalg.cholesky: {bad[0]}The factorization could not be completed "
                          f"because the input is not positive-definite (the leading minor of "
                          f"order {bad[1]} is not positive-definite).")


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False, out: Tensor | None = None) -> Tensor:
    """The solution X of ``A @ X = B`` (``X @ A = B`` with ``left=False``) for triangular A
    (only its ``upper`` or lower triangle is read; ``unitriangular`` takes its diagonal as
    ones); batch dims broadcast; BLAS's trsm, differentiable.

    >>> import ember
    >>> a = ember.tensor([[2.0, 1.0], [0.0, 1.0]])
    >>> ember.linalg.solve_triangular(a, ember.tensor([[3.0], [1.0]]), upper=True).tolist()
    [[1.0], [1.0]]
    """
    op = "linalg.solve_triangular"
    _check_matrix(op, A, square=True)
    if not isinstance(B, Tensor) or B.ndim < 2:
        raise RuntimeError(f"{op}: B must have at least 2 dimensions, got shape "
                           f"{tuple(B.shape) if isinstance(B, Tensor) else type(B).__name__}")
    _check_same_dtype(op, A, B)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{op}: incompatible shapes of A {tuple(A.shape)} and B "
                           f"{tuple(B.shape)}")
    if left:
        r = _C._linalg_solve_triangular(A, B, upper, unitriangular)
    else:  # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way
        r = _C._linalg_solve_triangular(A.mT, B.mT, not upper, unitriangular).mT
    return _out(r, out, "linalg.solve_triangular")


# ---- factorizations (LAPACK kernels: ember._C._linalg_*) -----------------------------------

_TORCH_DTYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
                      "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
                      "int8": "Char", "uint8": "Byte", "bool": "Bool",
                      "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def _dtype_name(dtype: Any) -> str:
    name = str(dtype).rsplit(".", 1)[-1]
    return _TORCH_DTYPE_NAMES.get(name, name)


_RETURN_TYPES: dict[str, type] = {}


def _rt(name: str, fields: Sequence[str], values: Sequence[Any], out: Any = None) -> Any:
    """The named tuple ``ember.return_types.<name>`` of ``values``, or of the ``out`` tensors
    after ``values`` are copied into them (see :func:`_out`)."""
    if out is not None:
        op = name.replace("linalg_", "linalg.")
        if _C.is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad
                                        for t in (*values, *out)):
            # (checked for all first: a sign written into out[0] before logabsdet's refusal)
            raise RuntimeError(f"{op}(): functions with out=... arguments don't support "
                               "automatic differentiation, but one of the arguments requires "
                               "grad.")
        values = [_out(v, o, op) for v, o in zip(values, out)]
    cls = _RETURN_TYPES.get(name)
    if cls is None:
        from ember import return_types

        cls = _RETURN_TYPES[name] = return_types._make(name, fields)
    return cls(*values)


# Ops whose integer-dtype refusal is torch's NotImplementedError (a kernel with no integer
# version), not its "Expected a floating point or complex tensor" RuntimeError.
_INT_NOTIMPL = frozenset({"linalg.eigh", "linalg.eigvalsh", "linalg.lu",
                          "torch.linalg.lu_factor_ex", "linalg.solve_triangular",
                          "cholesky_solve", "cholesky_inverse"})
# Ops whose float16 / bfloat16 refusal is a RuntimeError in torch (not a NotImplementedError).
_LOWP_RUNTIME = frozenset({"linalg.inv", "linalg.slogdet", "linalg.pinv", "linalg.lstsq",
                           "linalg.matrix_rank", "linalg.matrix_norm", "logdet"})


def _check_matrix(op: str, A: Tensor, name: str = "A", square: bool = False) -> None:
    """PyTorch's argument checks of a matrix operand, in its order and words."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}: expected a Tensor for {name}, got {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if not (A.is_floating_point() or A.is_complex()):
        err = NotImplementedError if op in _INT_NOTIMPL else RuntimeError
        raise err(f"{op}: Expected a floating point or complex tensor as input. Got "
                  f"{_dtype_name(A.dtype)}")
    if A.dtype not in (_C.float32, _C.float64, _C.complex64, _C.complex128):
        # torch's own check (a RuntimeError) covers a few ops; the rest reach a kernel that is
        # not implemented for half dtypes (a NotImplementedError)
        err = RuntimeError if op in _LOWP_RUNTIME else NotImplementedError
        raise err(f"{op}: Low precision dtypes not supported. Got {_dtype_name(A.dtype)}")
    if A.is_complex() and A.device.type not in ("cpu", "meta"):
        raise RuntimeError(f"{op}: complex matrices are supported on the CPU only, got a "
                           f"{_dtype_name(A.dtype)} tensor on {A.device}")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _adj(A: Tensor) -> Tensor:
    """The conjugate transpose of the matrices in A (A.mT for real A)."""
    return A.mT.conj_physical() if A.is_complex() else A.mT


def _check_same_dtype(op: str, A: Tensor, B: Tensor) -> None:
    if A.dtype != B.dtype:
        raise RuntimeError(f"{op}: Expected A and B to have the same dtype, but found A of type "
                           f"{_dtype_name(A.dtype)} and B of type {_dtype_name(B.dtype)} instead")


def _first_failure(info: Tensor) -> tuple[str, int] | None:
    """(batch prefix, info value) of the first nonzero entry of ``info``, or None (always None
    on the meta device, where there are no values)."""
    if info.device.type == "meta" or info.numel() == 0:
        return None
    values = (info if info.device.type == "cpu" else info.cpu()).numpy().reshape(-1)
    if not values.any():
        return None
    b = int(values.nonzero()[0][0])
    return (f"(Batch element {b}): " if info.ndim > 0 else ""), int(values[b])


def _out(r: Tensor, out: Tensor | None, op: str, exact: bool = True) -> Tensor:
    """r, or r copied into ``out`` after the engine's shared out= preparation (dtype and device
    checks; a resize to r's shape, which warns when ``out`` had elements). As torch, ``out``
    must have r's dtype, except for the composites (``exact=False``: any dtype r casts to)."""
    if out is not None:
        if not isinstance(out, Tensor):
            raise TypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
        # out= is not differentiable: r requires grad when an input does (it was recorded)
        if _C.is_grad_enabled() and (r.requires_grad or out.requires_grad):
            raise RuntimeError(f"{op}(): functions with out=... arguments don't support "
                               "automatic differentiation, but one of the arguments requires "
                               "grad.")
        _C._prepare_out(out, r, op, exact)
        out.copy_(r)
        return out
    return r


def _eye(n: int, like: Tensor, m: int | None = None) -> Tensor:
    """The n x m (n x n) identity in like's dtype and device."""
    m = n if m is None else m
    if like.is_complex():  # (eye makes real dtypes only)
        real = _C.float64 if like.dtype == _C.complex128 else _C.float32
        return _C.eye(n, m, dtype=real, device=like.device).to(like.dtype)
    return _C.eye(n, m, dtype=like.dtype, device=like.device)


def inv_ex(A: Tensor, *, check_errors: bool = False, out: Any = None) -> Any:
    """The inverses of square matrices and LAPACK's ``info`` (int32 per matrix: 0, or k > 0
    when U[k-1, k-1] of A's LU factorization is zero: A is singular). With
    ``check_errors=True`` a singular matrix raises LinAlgError.

    >>> import ember
    >>> ember.linalg.inv_ex(ember.tensor([[1.0, 2.0], [2.0, 4.0]])).info.item()
    2
    """
    _check_matrix("linalg.inv", A, square=True)
    r, _, _, info = _C._linalg_solve_ex(A, _eye(A.shape[-1], A))
    if check_errors:
        _raise_inv(info)
    return _rt("linalg_inv_ex", ("inverse", "info"), (r, info), out)


def _raise_inv(info: Tensor) -> None:
    bad = _first_failure(info)
    if bad is not None:
        raise LinAlgError(f"linalg.inv: {bad[0]}The diagonal element {bad[1]} is zero, the "
                          f"inversion could not be completed because the input matrix is "
                          f"singular.")


def inv(A: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The inverse of a square matrix (or of each in a batch), by LU with partial pivoting;
    a singular matrix raises LinAlgError. Differentiable.

    >>> import ember
    >>> ember.linalg.inv(ember.tensor([[1.0, 1.0], [0.0, 2.0]])).tolist()
    [[1.0, -0.5], [0.0, 0.5]]
    """
    r, info = inv_ex(A)
    _raise_inv(info)
    return _out(r, out, "linalg.inv")


def _solve_args(A: Tensor, B: Tensor, left: bool) -> tuple[Tensor, Tensor, bool]:
    op = "linalg.solve"
    _check_matrix(op, A, square=True)
    if not isinstance(B, Tensor):
        raise TypeError(f"{op}: expected a Tensor for B, got {type(B).__name__}")
    _check_same_dtype(op, A, B)
    n = A.shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2 if left else -1] != n:
        shown = tuple(Bm.shape[-2:]) if Bm.ndim >= 2 else (1, 1)
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation {eq} "
                           f"({n}x{n} and {shown[0]}x{shown[1]})")
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return A.mT, Bm.mT, vector
    return A, Bm, vector


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False,
             out: Any = None) -> Any:
    """:func:`solve` that returns ``(result, info)`` rather than raising for a singular A
    (info k > 0: U[k-1, k-1] of A's LU factorization is zero), unless ``check_errors``.

    >>> import ember
    >>> ember.linalg.solve_ex(ember.eye(2), ember.ones(2)).result.tolist()
    [1.0, 1.0]
    """
    A2, B2, vector = _solve_args(A, B, left)
    x, _, _, info = _C._linalg_solve_ex(A2, B2)
    if vector:
        x = x.squeeze(-1)
    elif not left:
        x = x.mT
    if check_errors:
        _raise_solve(info)
    return _rt("linalg_solve_ex", ("result", "info"), (x, info), out)


def _raise_solve(info: Tensor) -> None:
    bad = _first_failure(info)
    if bad is not None:
        raise LinAlgError(f"torch.linalg.solve: {bad[0]}The solver failed because the input "
                          f"matrix is singular.")


def solve(A: Tensor, B: Tensor, *, left: bool = True, out: Tensor | None = None) -> Tensor:
    """The solution X of ``A @ X = B`` (``X @ A = B`` with ``left=False``) for square A; B may
    be a batch of vectors (shape ``A.shape[:-1]``) or matrices, batch dims broadcast. LU with
    partial pivoting; a singular A raises LinAlgError. Differentiable in A and B.

    >>> import ember
    >>> ember.linalg.solve(ember.tensor([[2.0, 0.0], [0.0, 4.0]]), ember.tensor([2.0, 2.0])).tolist()
    [1.0, 0.5]
    """
    x, info = solve_ex(A, B, left=left)
    _raise_solve(info)
    return _out(x, out, "linalg.solve")


def det(A: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The determinant of a square matrix (or of each in a batch), from its LU factorization;
    differentiable, singular matrices included.

    >>> import ember
    >>> ember.linalg.det(ember.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=ember.float64)).item()
    -2.0
    """
    _check_matrix("linalg.det", A, square=True)
    return _out(_C._linalg_det(A)[0], out, "linalg.det")


def slogdet(A: Tensor, *, out: Any = None) -> Any:
    """``(sign, logabsdet)`` of the determinant of square matrices: sign 0 and logabsdet -inf
    for a singular one; for complex A the sign is ``det / |det|`` (complex) and logabsdet is
    real. Differentiable (the sign of a real matrix has a zero gradient).

    >>> import ember
    >>> r = ember.linalg.slogdet(ember.tensor([[-2.0, 0.0], [0.0, 1.0]]))
    >>> r.sign.item(), round(r.logabsdet.item(), 4)
    (-1.0, 0.6931)
    """
    _check_matrix("linalg.slogdet", A, square=True)
    logabs, sign = _C._linalg_slogdet(A)[:2]
    return _rt("linalg_slogdet", ("sign", "logabsdet"), (sign, logabs), out)


def logdet(A: Tensor) -> Tensor:
    """``log(det(A))``: NaN where the determinant is negative, -inf where it is zero (as
    ``torch.logdet``).

    >>> import ember
    >>> round(ember.logdet(ember.tensor([[2.0, 0.0], [0.0, 3.0]])).item(), 4)
    1.7918
    """
    _check_matrix("linalg.slogdet", A, square=True)
    logabs, sign = _C._linalg_slogdet(A)[:2]
    if A.is_complex():  # log |det| + i arg(det)
        return (sign + 0j).log() + logabs  # (+ 0j: a -0 imaginary part gives +pi i, as torch)
    return _C.where(sign.lt(0), _C.full_like(logabs, math.nan), logabs)


def _raise_svd(info: Tensor, op: str = "linalg.svd") -> None:
    bad = _first_failure(info)
    if bad is None:
        return
    if bad[1] == -1:
        raise LinAlgError(f"{op}: {bad[0]}The algorithm failed to converge because the input "
                          f"matrix contained non-finite values.")
    raise LinAlgError(f"{op}: {bad[0]}The algorithm failed to converge because the input matrix "
                      f"is ill-conditioned or has too many repeated singular values (error code: "
                      f"{bad[1]}).")


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None,
        out: Any = None) -> Any:
    """The singular value decomposition ``A = U @ diag(S) @ Vh`` of (a batch of) m x n
    matrices, S descending; U is m x m and Vh n x n with ``full_matrices`` (the default), else
    m x k and k x n for k = min(m, n). LAPACK's gesdd. Differentiable for losses that do not
    depend on the signs of the singular vectors (and, with ``full_matrices``, not on the
    columns past k).

    >>> import ember
    >>> ember.linalg.svd(ember.tensor([[3.0, 0.0], [0.0, -4.0]])).S.tolist()
    [4.0, 3.0]
    """
    _check_matrix("linalg.svd", A)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    U, S, Vh, info = _C._linalg_svd(A, full_matrices, True)
    _raise_svd(info)
    return _rt("linalg_svd", ("U", "S", "Vh"), (U, S, Vh), out)


def _grad_needed(A: Tensor) -> bool:
    return A.requires_grad and _C.is_grad_enabled()


def svdvals(A: Tensor, *, driver: str | None = None, out: Tensor | None = None) -> Tensor:
    """The singular values of (a batch of) matrices, descending; differentiable.

    >>> import ember
    >>> ember.linalg.svdvals(ember.tensor([[0.0, 2.0], [1.0, 0.0]])).tolist()
    [2.0, 1.0]
    """
    _check_matrix("linalg.svdvals", A)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    # the derivative needs the singular vectors
    _, S, _, info = _C._linalg_svd(A, False, _grad_needed(A))
    _raise_svd(info)  # PyTorch names linalg.svd in the message of svdvals too
    return _out(S, out, "linalg.svdvals")


def qr(A: Tensor, mode: str = "reduced", *, out: Any = None) -> Any:
    """The QR decomposition ``A = Q @ R`` of (a batch of) m x n matrices, Q with orthonormal
    columns and R upper triangular: ``mode='reduced'`` gives Q m x k and R k x n for
    k = min(m, n), ``'complete'`` Q m x m and R m x n, ``'r'`` only R (Q empty).
    Householder reflections (LAPACK's geqrf / orgqr). Differentiable (not for mode 'r', nor
    'complete' with m > n, as in PyTorch).

    >>> import ember
    >>> ember.linalg.qr(ember.tensor([[0.0, 1.0], [2.0, 0.0]])).R.abs().tolist()
    [[2.0, 0.0], [0.0, 1.0]]
    """
    _check_matrix("linalg.qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'")
    Q, R = _C._linalg_qr(A, mode)
    return _rt("linalg_qr", ("Q", "R"), (Q, R), out)


def _check_uplo(UPLO: str) -> None:
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U") or len(UPLO) != 1:
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _raise_eigh(info: Tensor, op: str) -> None:
    bad = _first_failure(info)
    if bad is not None:
        raise LinAlgError(f"{op}: {bad[0]}The algorithm failed to converge because the input "
                          f"matrix is ill-conditioned or has too many repeated eigenvalues (error "
                          f"code: {bad[1]}).")


def eigh(A: Tensor, UPLO: str = "L", *, out: Any = None) -> Any:
    """Eigenvalues (ascending, real) and orthonormal eigenvectors (the columns of
    ``eigenvectors``) of symmetric (or complex Hermitian) matrices, read from their lower
    (``UPLO='L'``) or upper triangle; LAPACK's syevd (heevd). Differentiable for losses that do
    not depend on the eigenvectors' signs (phases: a loss that does raises, as in PyTorch).

    >>> import ember
    >>> ember.linalg.eigh(ember.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues.tolist()
    [1.0, 3.0]
    """
    _check_matrix("linalg.eigh", A, square=True)
    _check_uplo(UPLO)
    L, V, info = _C._linalg_eigh(A, UPLO.upper(), True)
    _raise_eigh(info, "linalg.eigh")
    return _rt("linalg_eigh", ("eigenvalues", "eigenvectors"), (L, V), out)


def eigvalsh(A: Tensor, UPLO: str = "L", *, out: Tensor | None = None) -> Tensor:
    """The eigenvalues (ascending) of symmetric matrices; differentiable.

    >>> import ember
    >>> ember.linalg.eigvalsh(ember.tensor([[2.0, 1.0], [1.0, 2.0]])).tolist()
    [1.0, 3.0]
    """
    _check_matrix("linalg.eigvalsh", A, square=True)
    _check_uplo(UPLO)
    L, _, info = _C._linalg_eigh(A, UPLO.upper(), _grad_needed(A))
    _raise_eigh(info, "linalg.eigvalsh")
    return _out(L, out, "linalg.eigvalsh")


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None) -> Any:
    """A least-squares solution of ``A @ X = B`` for A (*, m, n) and B (*, m, k) or (*, m),
    batch dims broadcast, as ``torch.linalg.lstsq`` on the CPU: LAPACK driver ``'gelsy'`` (the
    default, QR with column pivoting), ``'gelsd'``/``'gelss'`` (SVD) or ``'gels'`` (QR, full
    rank only). Returns ``(solution, residuals, rank, singular_values)``: the squared residuals
    when m > n, every A has full rank and the driver is not gelsy; the rank except for gels;
    the singular values for gelsd and gelss; empty tensors otherwise. ``rcond`` (default:
    eps * max(m, n)) sets the rank cutoff. Differentiable in A and B (the solution).

    >>> import ember
    >>> a = ember.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> ember.linalg.lstsq(a, ember.tensor([[1.0], [2.0], [3.0]])).solution.tolist()
    [[1.0], [2.0]]
    """
    op = "torch.linalg.lstsq"
    _check_matrix("linalg.lstsq", A)
    if not isinstance(B, Tensor):
        raise TypeError(f"{op}: expected a Tensor for B, got {type(B).__name__}")
    if driver is not None and driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"{op}: parameter `driver` should be one of (gels, gelsy, gelsd, "
                           f"gelss)")
    if not 0 <= A.ndim - B.ndim <= 1:  # (B with more batch dims than A was broadcast)
        raise RuntimeError(f"{op}: input.dim() must be greater or equal to other.dim() and "
                           f"(input.dim() - other.dim()) <= 1 (input {tuple(A.shape)}, other "
                           f"{tuple(B.shape)})")
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != A.shape[-2]:
        raise RuntimeError(f"{op}: input.size(-2) should match other.size(-2)")
    if not (B.is_floating_point() or B.is_complex()) or B.dtype != A.dtype:
        raise RuntimeError(f"{op}: Expected input and other to have the same dtype, but got "
                           f"input's dtype {_dtype_name(A.dtype)} and other's dtype "
                           f"{_dtype_name(B.dtype)}")
    x, res, rank, sv = _C._linalg_lstsq(A, Bm, rcond, driver)
    if vector:
        x = x.squeeze(-1)
    return _rt("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"),
               (x, res, rank, sv))


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False,
                 out: Any = None) -> Any:
    """``(LU, pivots, info)``: the LU factorization with partial pivoting of (a batch of)
    m x n matrices, L (unit diagonal, not stored) and U packed in LU, the 1-based row
    interchanges in pivots (int32), and LAPACK's info (k > 0: U[k-1, k-1] is zero).

    >>> import ember
    >>> ember.linalg.lu_factor_ex(ember.tensor([[1.0, 2.0], [3.0, 4.0]])).pivots.tolist()
    [2, 2]
    """
    _check_matrix("torch.linalg.lu_factor_ex", A)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    LU, piv, info = _C._linalg_lu_factor_ex(A, pivot)
    if check_errors:
        _raise_lu(info, "torch.linalg.lu_factor_ex")
    return _rt("linalg_lu_factor_ex", ("LU", "pivots", "info"), (LU, piv, info), out)


def _raise_lu(info: Tensor, op: str) -> None:
    bad = _first_failure(info)
    if bad is not None:
        raise RuntimeError(f"{op}: {bad[0]}U[{bad[1]},{bad[1]}] is zero and using it on lu_solve "
                           f"would result in a division by zero. If you still want to perform "
                           f"the factorization, consider calling linalg.lu(A, pivot) or "
                           f"linalg.lu_factor_ex(A, pivot)")


def lu_factor(A: Tensor, *, pivot: bool = True, out: Any = None) -> Any:
    """``(LU, pivots)`` of :func:`lu_factor_ex`; an exactly singular matrix raises (its U has a
    zero on the diagonal, which lu_solve would divide by). Differentiable.

    >>> import ember
    >>> LU, piv = ember.linalg.lu_factor(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> ember.linalg.lu_solve(LU, piv, ember.tensor([[5.0], [11.0]])).tolist()
    [[1.0], [2.0]]
    """
    if isinstance(A, Tensor) and A.ndim < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(A.shape)} instead")
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    _raise_lu(info, "torch.linalg.lu_factor")
    return _rt("linalg_lu_factor", ("LU", "pivots"), (LU, piv), out)


def _permutation(pivots: Tensor, m: int, like: Tensor) -> Tensor:
    """P (*, m, m) with ``A = P @ L @ U`` from LAPACK's 1-based row interchanges."""
    import numpy as np

    batch = tuple(pivots.shape[:-1])
    if pivots.device.type == "meta":
        return _C.empty(*batch, m, m, dtype=like.dtype, device=like.device)
    if pivots.numel() == 0:  # empty batch or 0 x n matrices: nothing swapped
        return _C.eye(m, dtype=like.dtype, device=like.device).expand(*batch, m, m).clone()
    k = pivots.shape[-1]
    piv = pivots.cpu().numpy().reshape(-1, k).astype(np.int64) - 1
    perm = np.tile(np.arange(m), (piv.shape[0], 1))
    rows = np.arange(piv.shape[0])
    for i in range(k):  # row i was swapped with row piv[:, i]
        j = piv[:, i]
        a, b = perm[rows, i].copy(), perm[rows, j].copy()
        perm[rows, i], perm[rows, j] = b, a
    # A[perm[i]] = (L U)[i], so P[perm[i], i] = 1
    p = (perm[:, None, :] == np.arange(m)[None, :, None]).astype(np.float64)
    return _C.tensor(p.reshape(*batch, m, m), dtype=like.dtype, device=like.device)


def _unpack(LU: Tensor, pivots: Tensor, unpack_data: bool = True,
            unpack_pivots: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    empty = _C.empty(0, dtype=LU.dtype, device=LU.device)
    P = _permutation(pivots, m, LU) if unpack_pivots else empty
    if unpack_data:
        L = LU[..., :, :k].tril(-1) + _eye(m, LU, k)
        U = LU[..., :k, :].triu()
    else:
        L = U = empty
    return P, L, U


def lu(A: Tensor, *, pivot: bool = True, out: Any = None) -> Any:
    """``(P, L, U)`` with ``A = P @ L @ U``: the LU factorization with partial pivoting of
    (a batch of) m x n matrices, P a permutation, L m x k unit lower and U k x n upper
    triangular (k = min(m, n)). Differentiable.

    >>> import ember
    >>> P, L, U = ember.linalg.lu(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> (P @ L @ U).tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    _check_matrix("linalg.lu", A)
    LU, piv, _ = lu_factor_ex(A, pivot=pivot)
    P, L, U = _unpack(LU, piv)
    return _rt("linalg_lu", ("P", "L", "U"), (P, L, U), out)


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False,
             out: Tensor | None = None) -> Tensor:
    """The solution X of ``A @ X = B`` from A's :func:`lu_factor` (``X @ A = B`` with
    ``left=False``, A^T in place of A with ``adjoint``); batch dims broadcast. Differentiable
    in LU and B.

    >>> import ember
    >>> LU, piv = ember.linalg.lu_factor(ember.tensor([[2.0, 0.0], [0.0, 4.0]]))
    >>> ember.linalg.lu_solve(LU, piv, ember.tensor([[2.0], [2.0]])).tolist()
    [[1.0], [0.5]]
    """
    op = "linalg.lu_solve"
    _check_matrix(op, LU, "LU", square=True)
    _check_matrix(op, B, "B")
    _check_same_dtype(op, LU, B)
    if adjoint and LU.is_complex():
        # A^H X = B  <=>  A^T conj(X) = conj(B);  X A^H = B  <=>  A conj(X)^T = conj(B)^T
        if left:
            x = _C._lu_solve(LU, pivots, B.conj_physical(), True).conj_physical()
        else:
            x = _C._lu_solve(LU, pivots, B.conj_physical().mT, False).mT.conj_physical()
    elif left:
        x = _C._lu_solve(LU, pivots, B, adjoint)
    else:  # X A = B  <=>  A^T X^T = B^T
        x = _C._lu_solve(LU, pivots, B.mT, not adjoint).mT
    return _out(x, out, "linalg.lu_solve")


def _tolerance(S: Tensor, shape: Sequence[int], atol: Any, rtol: Any,
               rcond: Any = None) -> Tensor:
    """PyTorch's cutoff max(atol, rtol * largest singular value) for pinv / matrix_rank."""
    m, n = shape[-2], shape[-1]
    if rcond is not None:
        rtol = rcond
    eps = 2.220446049250313e-16 if S.dtype in (_C.float64, _C.complex128) \
        else 1.1920928955078125e-07
    if rtol is None:
        rtol = 0.0 if (atol is not None and not (isinstance(atol, (int, float)) and atol <= 0)) \
            else eps * max(m, n)
    smax = S.amax(-1, keepdim=True) if S.shape[-1] > 0 else _C.zeros_like(S[..., :1])
    tol = smax * rtol if not isinstance(rtol, Tensor) else smax * rtol.unsqueeze(-1)
    if atol is not None:
        a = atol.unsqueeze(-1) if isinstance(atol, Tensor) else atol
        tol = _C.maximum(tol, _C.zeros_like(tol) + a)
    return tol


def pinv(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False,
         rcond: Any = None, out: Tensor | None = None) -> Tensor:
    """The Moore-Penrose pseudoinverse of (a batch of) matrices, from the SVD (the
    eigendecomposition with ``hermitian=True``); singular values at or below
    max(atol, rtol * the largest) count as zero (rtol defaults to eps * max(m, n) when atol is
    not given). Differentiable.

    >>> import ember
    >>> ember.linalg.pinv(ember.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    _check_matrix("linalg.pinv", A, square=hermitian)
    if hermitian:
        L, V = eigh(A)
        tol = _tolerance(L.abs(), A.shape, atol, rtol, rcond)
        keep = L.abs() > tol
        inv_l = _C.where(keep, L, _C.ones_like(L)).reciprocal() * keep.to(L.dtype)
        return _out(_C.matmul(V * inv_l.unsqueeze(-2), _adj(V)), out, "linalg.pinv", exact=False)
    U, S, Vh = svd(A, full_matrices=False)
    tol = _tolerance(S, A.shape, atol, rtol, rcond)
    keep = S > tol
    inv_s = _C.where(keep, S, _C.ones_like(S)).reciprocal() * keep.to(S.dtype)
    return _out(_C.matmul(_adj(Vh) * inv_s.unsqueeze(-2), _adj(U)), out, "linalg.pinv",
                exact=False)


def matrix_rank(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False,
                tol: Any = None, out: Tensor | None = None) -> Tensor:
    """The number of singular values (absolute eigenvalues with ``hermitian``) above
    max(atol, rtol * the largest), as int64; see :func:`pinv` for the defaults.

    >>> import ember
    >>> ember.linalg.matrix_rank(ember.ones(3, 3)).item()
    1
    """
    _check_matrix("linalg.matrix_rank", A, square=hermitian)
    if tol is not None:
        atol, rtol = tol, 0.0
    from ember.autograd.grad_mode import no_grad

    with no_grad():
        S = eigvalsh(A).abs() if hermitian else svdvals(A)
    cutoff = _tolerance(S, A.shape, atol, rtol)
    return _out((S > cutoff).sum(-1), out, "linalg.matrix_rank", exact=False)


def cond(A: Tensor, p: Any = None, *, out: Tensor | None = None) -> Tensor:
    """The condition number of (a batch of) matrices in the norm ``p``: None or 2 (ratio of
    the largest to the smallest singular value), -2 (its inverse), or 'fro', 'nuc', inf,
    -inf, 1, -1 (``norm(A, p) * norm(inv(A), p)``, square invertible A only).

    >>> import ember
    >>> ember.linalg.cond(ember.tensor([[4.0, 0.0], [0.0, 2.0]])).item()
    2.0
    """
    _check_matrix("linalg.cond", A, square=isinstance(p, str))
    if isinstance(p, str):
        valid = p in ("fro", "nuc")
    else:
        valid = p is None or p in (2, -2, 1, -1, math.inf, -math.inf)
    if not valid:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if A.numel() == 0:  # no condition number to take: zeros, as PyTorch (and before squareness)
        real = A.real.dtype if A.is_complex() else A.dtype
        return _out(_C.zeros(list(A.shape[:-2]), dtype=real, device=A.device), out,
                    "linalg.cond", exact=False)
    _check_matrix("linalg.cond", A, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        S = svdvals(A)
        r = S[..., 0] / S[..., -1] if p != -2 else S[..., -1] / S[..., 0]
    elif p == "nuc":  # PyTorch's: from the singular values (a singular A: huge, or NaN for 0)
        S = svdvals(A)
        r = S.sum(-1) * S.reciprocal().sum(-1)
    else:
        # A singular matrix's condition number is inf (PyTorch), not an error: where inv_ex
        # reports a zero pivot the inverse is zeroed (its norm stays finite) and the result
        # replaced by inf.
        Ai, info = inv_ex(A)
        singular = info > 0
        Ai = Ai.masked_fill(singular[..., None, None], 0)
        r = (matrix_norm(A, p) * matrix_norm(Ai, p)).masked_fill(singular, math.inf)
    return _out(r, out, "linalg.cond", exact=False)


def tensorinv(A: Tensor, ind: int = 2, *, out: Tensor | None = None) -> Tensor:
    """The tensor X with ``tensordot(X, A, ind) == I`` (A reshaped to a square matrix of its
    first ``ind`` dims by the rest), shaped ``A.shape[ind:] + A.shape[:ind]``.

    >>> import ember
    >>> ember.linalg.tensorinv(ember.eye(4).reshape(4, 2, 2), ind=1).shape
    ember.Size([2, 2, 4])
    """
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows = math.prod(A.shape[:ind])
    cols = math.prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    r = inv(A.reshape(rows, cols)).reshape(*A.shape[ind:], *A.shape[:ind])
    return _out(r, out, "linalg.tensorinv", exact=False)


def tensorsolve(A: Tensor, B: Tensor, dims: Sequence[int] | None = None, *,
                out: Tensor | None = None) -> Tensor:
    """The tensor X with ``tensordot(A, X, X.ndim) == B``: A's leading dims (B's shape) and
    the rest (X's shape) are flattened into a square system (``dims`` first moves those dims
    of A to the end).

    >>> import ember
    >>> ember.linalg.tensorsolve(ember.eye(6).reshape(6, 2, 3), ember.ones(6)).shape
    ember.Size([2, 3])
    """
    if dims is not None:
        wrapped = _dims(A, dims)  # a 0-d A wraps dims as a 1-d one does (PyTorch)
        if A.ndim > 0:
            rest = [d for d in range(A.ndim) if d not in wrapped]
            A = A.permute(*(rest + wrapped))
    lead = tuple(A.shape[:B.ndim])
    if lead != tuple(B.shape):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:])"
                           f" == prod(self.shape[:other.ndim]), but got shapes {tuple(A.shape)} "
                           f"and {tuple(B.shape)}")
    xshape = A.shape[B.ndim:]
    r = solve(A.reshape(math.prod(lead), math.prod(xshape)), B.reshape(-1)).reshape(tuple(xshape))
    return _out(r, out, "linalg.tensorsolve", exact=False)


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False,
                out: Any = None) -> Any:
    """``(L, info)``: :func:`cholesky` that reports a matrix that is not positive definite in
    info (int32 per matrix: k > 0 when the leading minor of order k is not positive-definite;
    L is then incomplete) instead of raising, unless ``check_errors``.

    >>> import ember
    >>> ember.linalg.cholesky_ex(ember.eye(2)).info.item()
    0
    """
    _check_matrix("linalg.cholesky", A, square=True)
    L, info = _C._linalg_cholesky_ex(A, upper)
    if check_errors:
        _raise_cholesky(info)
    return _rt("linalg_cholesky_ex", ("L", "info"), (L, info), out)


# Pade coefficients of degree 13 and the 1-norm bound below which it is exact to double
# precision (Higham, "The scaling and squaring method for the matrix exponential revisited").
_EXP_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
               1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
               33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_EXP_THETA13 = 5.371920351148152


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential of square matrices: the degree-13 Pade approximant of A / 2**s
    (s from the largest 1-norm in the batch), squared s times; differentiable (through the
    solve and products it is made of).

    >>> import ember
    >>> ember.linalg.matrix_exp(ember.tensor([[0.0, 1.0], [0.0, 0.0]])).tolist()
    [[1.0, 1.0], [0.0, 1.0]]
    """
    if isinstance(A, Tensor) and A.dtype in (_C.float16, _C.bfloat16):
        # as torch, half dtypes are accepted: the approximant runs in float32 (in half its
        # powers overflow long before the result does)
        return matrix_exp(A.float()).to(A.dtype)
    _check_matrix("linalg.matrix_exp", A, square=True)
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    s = 0
    if A.device.type != "meta":
        bad = ~_C.isfinite(A.detach()).all(-1).all(-1)
        if bool(bad.any()):
            # a matrix with an inf or NaN has a NaN exponential (as PyTorch's); computed apart
            # so that its infinite norm does not set the scaling of the whole batch (which
            # failed converting inf to an int)
            mask = bad.unsqueeze(-1).unsqueeze(-1)
            R = matrix_exp(_C.where(mask, _C.zeros_like(A), A))
            nan = complex(math.nan, math.nan) if A.is_complex() else math.nan
            return _C.where(mask, _C.full_like(R, nan), R)
        norm = float(A.detach().abs().sum(-2).amax().item())
        if norm > _EXP_THETA13:
            s = int(math.ceil(math.log2(norm / _EXP_THETA13)))
    X = A / (2.0 ** s) if s else A
    b = _EXP_PADE13
    eye = _eye(n, A)
    X2 = _C.matmul(X, X)
    X4 = _C.matmul(X2, X2)
    X6 = _C.matmul(X4, X2)
    U = _C.matmul(X, _C.matmul(X6, b[13] * X6 + b[11] * X4 + b[9] * X2)
                  + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
    V = (_C.matmul(X6, b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4
         + b[2] * X2 + b[0] * eye)
    R = solve(V - U, V + U)
    for _ in range(s):
        R = _C.matmul(R, R)
    return R


# ---- torch.* spellings and Tensor methods -----------------------------------------------------


def inverse(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Alias of :func:`ember.linalg.inv` (``torch.inverse``)."""
    return inv(input, out=out)


def _svd_legacy(input: Tensor, some: bool = True, compute_uv: bool = True, *,
                out: Any = None) -> Any:
    """``torch.svd``: ``(U, S, V)`` with ``input = U @ diag(S) @ V.mT`` (V, not Vh); reduced
    factors unless ``some=False``; with ``compute_uv=False`` U and V are zero-filled m x m and
    n x n matrices.

    >>> import ember
    >>> ember.svd(ember.eye(2)).V.tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    if compute_uv:
        U, S, Vh = svd(input, full_matrices=not some)
        V = _adj(Vh)
    else:
        S = svdvals(input)
        m, n = input.shape[-2], input.shape[-1]
        U = _C.zeros(*input.shape[:-2], m, m, dtype=input.dtype, device=input.device)
        V = _C.zeros(*input.shape[:-2], n, n, dtype=input.dtype, device=input.device)
    return _rt("svd", ("U", "S", "V"), (U, S, V), out)


def _qr_legacy(input: Tensor, some: bool = True, *, out: Any = None) -> Any:
    """``torch.qr``: :func:`ember.linalg.qr` with mode 'reduced' (``some=True``) or 'complete'.

    >>> import ember
    >>> ember.qr(ember.eye(2)).R.abs().tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    Q, R = qr(input, "reduced" if some else "complete")
    return _rt("qr", ("Q", "R"), (Q, R), out)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: :func:`pinv` with relative cutoff ``rcond``."""
    return pinv(input, rtol=rcond)


def _det(input: Tensor) -> Tensor:
    """``torch.det``: :func:`ember.linalg.det`."""
    return det(input)


def _slogdet(input: Tensor) -> Any:
    """``torch.slogdet``: :func:`ember.linalg.slogdet`."""
    sign, logabs = slogdet(input)
    return _rt("slogdet", ("sign", "logabsdet"), (sign, logabs))


def _matrix_power(input: Tensor, n: int) -> Tensor:
    """``torch.matrix_power``: :func:`ember.linalg.matrix_power`."""
    return matrix_power(input, n)


_matrix_power = _outarg.accept_out(_matrix_power, "matrix_power", exact=True)


def _cholesky_legacy(input: Tensor, upper: bool = False, *, out: Tensor | None = None) -> Tensor:
    """``torch.cholesky``: :func:`ember.linalg.cholesky`."""
    return cholesky(input, upper=upper, out=out)


def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False, *,
                   out: Tensor | None = None) -> Tensor:
    """``torch.cholesky_solve``: the solution X of ``A @ X = input`` for A given by its
    Cholesky factor ``input2`` (``A = L @ L.mT``, or ``U.mT @ U`` with ``upper``), by two
    triangular solves; batch dims broadcast; differentiable.

    >>> import ember
    >>> L = ember.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> ember.cholesky_solve(ember.tensor([[4.0], [3.0]]), L).tolist()
    [[0.5], [1.0]]
    """
    _check_matrix("cholesky_solve", input2, "input2", square=True)
    _check_matrix("cholesky_solve", input, "input")
    _check_same_dtype("cholesky_solve", input2, input)
    if input.shape[-2] != input2.shape[-1]:
        n, (r, c) = input2.shape[-1], input.shape[-2:]
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {n} "
                           f"by {n} but each b matrix is {r} by {c}")
    L = _adj(input2) if upper else input2
    y = _C._linalg_solve_triangular(L, input, False, False)  # L y = B
    x = _C._linalg_solve_triangular(_adj(L), y, True, False)  # L^H x = y
    return _out(x, out, "cholesky_solve", exact=False)


def cholesky_inverse(input: Tensor, upper: bool = False, *,
                     out: Tensor | None = None) -> Tensor:
    """``torch.cholesky_inverse``: the inverse of A given by its Cholesky factor
    (``A = L @ L.mT``, or ``U.mT @ U`` with ``upper``); differentiable.

    >>> import ember
    >>> ember.cholesky_inverse(ember.tensor([[2.0, 0.0], [0.0, 1.0]])).tolist()
    [[0.25, 0.0], [0.0, 1.0]]
    """
    _check_matrix("cholesky_inverse", input, "input", square=True)
    r = cholesky_solve(_eye(input.shape[-1], input).expand(*input.shape), input, upper)
    return _out(r, out, "cholesky_inverse", exact=False)


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,
              unpack_pivots: bool = True, *, out: Any = None) -> Any:
    """``torch.lu_unpack``: ``(P, L, U)`` from :func:`lu_factor`'s results (empty tensors for
    the parts not asked for).

    >>> import ember
    >>> P, L, U = ember.lu_unpack(*ember.linalg.lu_factor(ember.tensor([[1.0, 2.0], [3.0, 4.0]])))
    >>> P.tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    if unpack_pivots:
        _check_pivots("lu_unpack", LU_data, LU_pivots)
    P, L, U = _unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)
    return _rt("lu_unpack", ("P", "L", "U"), (P, L, U), out)


def _check_pivots(op: str, LU: Tensor, pivots: Any) -> None:
    """lu_factor's pivots for LU: int32, (*, min(m, n)), each a row of LU (1-based). Others
    would build a wrong permutation without an error (0 read as "no swap", a float
    truncated, a short array leaving rows unswapped)."""
    _check_matrix(op, LU, "LU_data")
    if not isinstance(pivots, Tensor):
        raise TypeError(f"{op}: expected LU_pivots to be a Tensor, got {type(pivots).__name__}")
    if pivots.dtype != _C.int32:
        raise RuntimeError(f"{op}: LU_pivots is expected to be a tensor of int32 dtype (as "
                           f"linalg.lu_factor returns), got {_dtype_name(pivots.dtype)}")
    m, n = LU.shape[-2], LU.shape[-1]
    want = tuple(LU.shape[:-2]) + (min(m, n),)
    if tuple(pivots.shape) != want:
        raise RuntimeError(f"{op}: LU_pivots of shape {tuple(pivots.shape)} do not fit LU_data "
                           f"of shape {tuple(LU.shape)} (expected shape {want})")
    if pivots.numel() and pivots.device.type != "meta":
        lo, hi = int(pivots.min()), int(pivots.max())
        if lo < 1 or hi > m:
            raise RuntimeError(f"{op}: pivots passed to lu_unpack must be between 1 and "
                               f"LU.size(-2) = {m} inclusive, got values in [{lo}, {hi}]. Did "
                               "you properly pass the result of lu_factor?")


def _lu_legacy(A: Tensor, pivot: bool = True, get_infos: bool = False,
               out: Any = None) -> Any:
    """``torch.lu``: ``(LU, pivots)``, plus info with ``get_infos``."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    if not get_infos:
        _raise_lu(info, "torch.linalg.lu_factor")
        return LU, piv
    return LU, piv, info


def _lu_solve_legacy(b: Tensor, LU_data: Tensor, LU_pivots: Tensor, *,
                     out: Tensor | None = None) -> Tensor:
    """``torch.lu_solve(b, LU_data, LU_pivots)``: :func:`lu_solve` with b first."""
    return lu_solve(LU_data, LU_pivots, b, out=out)


# ---- general eigendecomposition, Householder products, LDL^T ---------------------------------


def _check_general(op: str, A: Tensor, name: str = "A", square: bool = True) -> None:
    """The argument checks of the ops that take real or complex matrices."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}: expected a Tensor for {name}, got {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if A.dtype not in (_C.float32, _C.float64, _C.complex64, _C.complex128):
        # half dtypes reach a kernel torch does not implement for them
        err = NotImplementedError if A.is_floating_point() else RuntimeError
        raise err(f"{op}: expected {name} of dtype float32, float64, complex64 or "
                  f"complex128, got {_dtype_name(A.dtype)}")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _raise_eig(info: Tensor, op: str) -> None:
    bad = _first_failure(info)
    if bad is None:
        return
    if bad[1] == -1:
        raise RuntimeError(f"torch.{op}: input tensor should not contain infs or NaNs.")
    raise LinAlgError(f"{op}: {bad[0]}The algorithm failed to converge because the input matrix "
                      f"is ill-conditioned or has too many repeated eigenvalues (error code: "
                      f"{bad[1]}).")


def eig(A: Tensor, *, out: Any = None) -> Any:
    """Eigenvalues and eigenvectors (the columns of ``eigenvectors``) of square matrices,
    ``A @ V = V @ diag(L)``, both complex (complex64 for float32 input, complex128 for
    float64); LAPACK's geev, which scales each eigenvector to unit norm with its largest
    component real. Differentiable for losses that do not depend on the eigenvectors' phases.
    Input with NaN or inf raises.

    >>> import ember
    >>> ember.linalg.eig(ember.tensor([[2.0, 0.0], [0.0, 3.0]])).eigenvalues.tolist()
    [(2+0j), (3+0j)]
    """
    _check_general("linalg.eig", A)
    L, V, info = _C._linalg_eig(A, True)
    _raise_eig(info, "linalg.eig")
    return _rt("linalg_eig", ("eigenvalues", "eigenvectors"), (L, V), out)


def eigvals(A: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The (complex) eigenvalues of square matrices, in LAPACK's order; differentiable.

    >>> import ember
    >>> ember.linalg.eigvals(ember.tensor([[0.0, 1.0], [-1.0, 0.0]])).tolist()
    [1j, -1j]
    """
    _check_general("linalg.eigvals", A)
    L, _, info = _C._linalg_eig(A, _grad_needed(A))
    _raise_eig(info, "linalg.eigvals")
    return _out(L, out, "linalg.eigvals")


def _needs_graph(*ts: Tensor) -> bool:
    return _C.is_grad_enabled() and any(t.requires_grad for t in ts)


def _reflect(X: Tensor, V: Tensor, tau: Tensor, i: int, left: bool) -> Tensor:
    """H_i X (left) or X H_i for the real reflection H_i = I - tau_i v_i v_i^T."""
    v = V[..., :, i:i + 1]
    t = tau[..., i:i + 1].unsqueeze(-1)
    if left:
        return X - (t * v) @ (v.mT @ X)
    return X - ((X @ v) * t) @ v.mT


def _reflectors(A: Tensor, k: int) -> Tensor:
    """The Householder vectors in the first k columns of A: unit diagonal, zeros above it."""
    m = A.shape[-2]
    return A[..., :, :k].tril(-1) + _eye(m, A, k)


def _householder_graph(A: Tensor, tau: Tensor) -> Tensor:
    """householder_product as reflections applied one by one to the identity's first columns:
    ember's autograd then gives its derivatives (and higher ones)."""
    m, n = A.shape[-2], A.shape[-1]
    V = _reflectors(A, tau.shape[-1])
    Q = _eye(m, A, n).expand(*A.shape[:-2], m, n)
    for i in reversed(range(tau.shape[-1])):
        Q = _reflect(Q, V, tau, i, True)
    return Q


def householder_product(A: Tensor, tau: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The first n columns of the product ``H_1 ... H_k`` of the Householder reflections
    ``H_i = I - tau_i v_i v_i^H`` whose vectors ``v_i`` are stored below the diagonal of the
    columns of A (m x n, m >= n >= k = tau.shape[-1]) with an implied 1 on it, as
    :func:`ember.geqrf` returns them: ``householder_product(*geqrf(A))`` is the Q of A's QR
    decomposition. LAPACK's orgqr (ungqr for complex matrices). Differentiable for real
    matrices (with gradients to record, the reflections are applied one by one by ember's
    ops).

    >>> import ember
    >>> a, tau = ember.geqrf(ember.tensor([[3.0], [4.0]]))
    >>> [round(v, 4) for v in ember.linalg.householder_product(a, tau).flatten().tolist()]
    [-0.6, -0.8]
    """
    for name, t in (("input", A), ("tau", tau)):
        if not isinstance(t, Tensor):
            raise TypeError(f"linalg.householder_product: expected a Tensor for {name}, got "
                            f"{type(t).__name__}")
    if _needs_graph(A, tau) and not A.is_complex():
        _C.linalg_householder_product(A.detach().to("meta"), tau.detach().to("meta"))  # checks
        r = _householder_graph(A, tau)
    else:
        r = _C.linalg_householder_product(A, tau)
    return _out(r, out, "linalg.householder_product")


def ormqr(input: Tensor, input2: Tensor, input3: Tensor, left: bool = True,
          transpose: bool = False, *, out: Tensor | None = None) -> Tensor:
    """``op(Q) @ input3`` (``left``) or ``input3 @ op(Q)``, op(Q) = Q^H with ``transpose``, for
    the Q = H_1 ... H_k of the Householder reflectors in ``input`` and ``input2`` (tau) as
    :func:`ember.geqrf` returns them, without forming Q (LAPACK's ormqr / unmqr).
    Differentiable for real matrices (with gradients to record, the reflections are applied
    one by one by ember's ops).

    >>> import ember
    >>> a, tau = ember.geqrf(ember.tensor([[3.0], [4.0]]))
    >>> [round(v, 4) for v in ember.ormqr(a, tau, ember.eye(2)).flatten().tolist()]
    [-0.6, -0.8, -0.8, 0.6]
    """
    if not (_needs_graph(input, input2, input3) and not input.is_complex()):
        return _out(_C.ormqr(input, input2, input3, left, transpose), out, "ormqr")
    metas = [t.detach().to("meta") for t in (input, input2, input3)]
    _C.ormqr(*metas, left, transpose)  # the argument checks
    k = input2.shape[-1]
    V = _reflectors(input, k)
    # Q = H_1 ... H_k: Q C applies H_k first, Q^T C H_1 first; C Q applies H_1 first
    order = list(range(k)) if transpose == left else list(reversed(range(k)))
    X = input3
    for i in order:
        X = _reflect(X, V, input2, i, left)
    return _out(X, out, "ormqr")


def orgqr(input: Tensor, tau: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``torch.orgqr``: :func:`householder_product` (the Q of a QR decomposition from geqrf's
    reflectors).

    >>> import ember
    >>> a, tau = ember.geqrf(ember.eye(2))
    >>> ember.orgqr(a, tau).abs().tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    return householder_product(input, tau, out=out)


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False,
                  out: Any = None) -> Any:
    """The LDL^T factorization with Bunch-Kaufman pivoting of symmetric matrices read from
    their lower triangle (LAPACK's sytrf; for complex matrices with ``hermitian``, the LDL^H
    factorization of Hermitian ones, hetrf): ``LD`` packs the unit lower L (below the
    diagonal) and the 1 x 1 and 2 x 2 blocks of D (upper triangle zero), ``pivots`` (int32)
    are LAPACK's interchanges (negative for a 2 x 2 block), ``info`` is k > 0 where
    D[k-1, k-1] is exactly zero. Not differentiable.

    >>> import ember
    >>> ember.linalg.ldl_factor_ex(ember.tensor([[4.0, 2.0], [2.0, 3.0]])).LD.tolist()
    [[4.0, 0.0], [0.5, 2.0]]
    """
    op = "torch.linalg.ldl_factor_ex"
    _check_general(op, A)
    LD, pivots, info = _C._linalg_ldl_factor_ex(A, hermitian)
    if check_errors:
        _raise_ldl(info, "torch.linalg.ldl_factor_ex")
    return _rt("linalg_ldl_factor_ex", ("LD", "pivots", "info"), (LD, pivots, info), out)


def _raise_ldl(info: Tensor, op: str) -> None:
    bad = _first_failure(info)
    if bad is not None:
        raise LinAlgError(f"{op}: {bad[0]}The factorization could not be completed because the "
                          f"input is not invertible: D[{bad[1] - 1}, {bad[1] - 1}] is exactly "
                          f"zero.")


def ldl_factor(A: Tensor, *, hermitian: bool = False, out: Any = None) -> Any:
    """:func:`ldl_factor_ex` without ``info``; a singular D raises :class:`LinAlgError`.

    >>> import ember
    >>> ember.linalg.ldl_factor(ember.tensor([[4.0, 2.0], [2.0, 3.0]])).pivots.tolist()
    [1, 2]
    """
    op = "torch.linalg.ldl_factor"
    _check_general(op, A)
    LD, pivots, info = _C._linalg_ldl_factor_ex(A, hermitian)
    _raise_ldl(info, op)
    return _rt("linalg_ldl_factor", ("LD", "pivots"), (LD, pivots), out)


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False,
              out: Tensor | None = None) -> Tensor:
    """The solution X of ``A @ X = B`` from A's LDL^T factors as :func:`ldl_factor` returns
    them (LAPACK's sytrs); batch dims broadcast.

    >>> import ember
    >>> A = ember.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> LD, piv = ember.linalg.ldl_factor(A)
    >>> ember.linalg.ldl_solve(LD, piv, ember.tensor([[6.0], [5.0]])).flatten().tolist()
    [1.0, 1.0]
    """
    op = "torch.linalg.ldl_solve"
    _check_general(op, LD, "LD")
    _check_general(op, B, "B", square=False)
    return _out(_C._linalg_ldl_solve(LD, pivots, B, hermitian), out, op)


# Tensor.eig / symeig / lstsq / solve (and torch.*) exist only to say what replaces them.
_REMOVED = {
    "eig": ("`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather "
            "than real tensors mimicking complex tensors.\n\nL, _ = torch.eig(A) should be "
            "replaced with:\nL_complex = torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, "
            "eigenvectors=True) should be replaced with:\nL_complex, V_complex = "
            "torch.linalg.eig(A)"),
    "symeig": ("The default behavior has changed from using the upper triangular portion of "
               "the matrix by default to using the lower triangular portion.\n\nL, _ = "
               "torch.symeig(A, upper=upper) should be replaced with:\nL = "
               "torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\nL, V = "
               "torch.symeig(A, eigenvectors=True) should be replaced with:\nL, V = "
               "torch.linalg.eigh(A, UPLO='U' if upper else 'L')"),
    "lstsq": ("`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n"
              "`torch.linalg.lstsq` has reversed arguments and does not return the QR "
              "decomposition in the returned tuple (although it returns other information about "
              "the problem).\n\nX = torch.lstsq(B, A).solution[:A.size(1)] should be replaced "
              "with:\nX = torch.linalg.lstsq(A, B).solution"),
    "solve": ("`torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` "
              "has its arguments reversed and does not return the LU factorization.\n\nX = "
              "torch.solve(B, A).solution should be replaced with:\nX = torch.linalg.solve(A, B)"),
}


def _removed(name: str) -> Any:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"This function was deprecated since version 1.9 and is now removed. "
                           f"{_REMOVED[name]}")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = ("Removed from PyTorch (1.9): raises a RuntimeError that names the "
                  "``torch.linalg`` replacement.")
    return fn


_TOPLEVEL = {
    "inverse": inverse, "det": _det, "logdet": logdet, "slogdet": _slogdet, "svd": _svd_legacy,
    "qr": _qr_legacy, "pinverse": pinverse, "matrix_power": _matrix_power,
    "cholesky": _cholesky_legacy, "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse, "lu_unpack": lu_unpack, "lu": _lu_legacy,
    "lu_solve": _lu_solve_legacy, "matrix_exp": matrix_exp, "orgqr": orgqr, "ormqr": ormqr,
    **{name: _removed(name) for name in _REMOVED},
}
_METHODS = ("inverse", "det", "logdet", "slogdet", "svd", "qr", "pinverse", "matrix_power",
            "cholesky", "cholesky_solve", "cholesky_inverse", "lu", "lu_solve", "matrix_exp",
            "orgqr", "ormqr", *_REMOVED)


def _install(namespace: dict) -> None:
    """Puts the ``torch.*`` spellings (inverse, det, svd, ...) into ember's namespace where
    missing, and the matching Tensor methods on Tensor."""
    from ember._argcheck import guard

    for name, fn in _TOPLEVEL.items():  # non-tensor arguments: a TypeError naming them
        namespace.setdefault(name, guard(fn, name))
    for name in _METHODS:
        if not hasattr(Tensor, name):
            setattr(Tensor, name, guard(_TOPLEVEL[name], name))
    # the YAML op's binding is replaced by the wrapper that records gradients for real input
    namespace["ormqr"] = Tensor.ormqr = ormqr


_outarg.accept_out_names(globals(), ("cross", "vecdot"), exact=True)  # out= as torch's

from ember import _argcheck  # noqa: E402

_argcheck.guard_module(globals())  # non-tensor arguments: a TypeError naming them
