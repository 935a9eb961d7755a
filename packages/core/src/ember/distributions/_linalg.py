"""The small dense linear algebra MultivariateNormal needs, on ember's tensor ops.

ember's core has no linalg kernels yet (cholesky, triangular solves). These loop over the
columns of the (batched) matrices with matmul/where, so autograd differentiates them like any
other composite; the cost is O(n) Python-level steps, fine for the event sizes distributions
use (tens of dimensions).

>>> import ember
>>> a = ember.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=ember.float64)
>>> l = cholesky(a)
>>> ember.allclose(l @ l.mT, a)
True
"""

from __future__ import annotations

import ember
from ember import Tensor

__all__ = ["batch_mahalanobis", "cholesky", "cholesky_ok", "solve_triangular"]


def _check_square(name: str, a: Tensor) -> int:
    if a.dim() < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: expected a (batch of) square matrices, got shape {tuple(a.shape)}")
    return a.shape[-1]


def _cholesky_columns(a: Tensor) -> tuple[Tensor, Tensor]:
    """The lower Cholesky factor (NaN where a is not positive definite) and, per batch
    element, whether every pivot was positive."""
    n = _check_square("cholesky", a)
    rows = ember.arange(n, device=a.device)
    cols: list[Tensor] = []
    ok = ember.ones(tuple(a.shape[:-2]), dtype=ember.bool, device=a.device)
    for j in range(n):
        s = a[..., :, j]
        if j:
            prev = ember.stack(cols, -1)  # (..., n, j)
            s = s - (prev @ prev[..., j, :].unsqueeze(-1)).squeeze(-1)
        pivot = s[..., j]
        ok = ok & (pivot > 0)
        below = (rows >= j).to(a.dtype)
        cols.append(s * below / ember.sqrt(pivot).unsqueeze(-1))
    return ember.stack(cols, -1), ok


def cholesky(a: Tensor) -> Tensor:
    """Lower Cholesky factor L (L @ L.mT == a) of a batch of symmetric positive-definite
    matrices; differentiable. Raises ValueError when a matrix is not positive definite.

    >>> import ember
    >>> cholesky(ember.eye(2, dtype=ember.float64)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    # Only the symmetric part matters: factor (a + a^T) / 2, so gradients come out symmetric.
    low, ok = _cholesky_columns((a + a.mT) * 0.5)
    if not bool(ok.all()):
        raise ValueError(
            "cholesky: the factorization could not be completed because the input is not "
            f"positive-definite (shape {tuple(a.shape)})"
        )
    return low


def cholesky_ok(a: Tensor) -> Tensor:
    """Per matrix of the batch: True where it has a Cholesky factor (is positive definite)."""
    with ember.no_grad():
        return _cholesky_columns(a)[1]


def solve_triangular(low: Tensor, b: Tensor) -> Tensor:
    """Solves low @ x = b for x, with low lower triangular (..., n, n) and b (..., n, k);
    batch dimensions broadcast. Differentiable in both.

    >>> import ember
    >>> low = ember.tensor([[2.0, 0.0], [1.0, 1.0]], dtype=ember.float64)
    >>> solve_triangular(low, ember.tensor([[2.0], [3.0]], dtype=ember.float64)).tolist()
    [[1.0], [2.0]]
    """
    n = _check_square("solve_triangular", low)
    if b.dim() < 2 or b.shape[-2] != n:
        raise ValueError(
            f"solve_triangular: b of shape {tuple(b.shape)} does not match the matrix of shape {tuple(low.shape)}"
        )
    batch = ember.broadcast_shapes(tuple(low.shape[:-2]), tuple(b.shape[:-2]))
    low = low.expand(tuple(batch) + (n, n))
    b = b.expand(tuple(batch) + tuple(b.shape[-2:]))
    xs: list[Tensor] = []
    for i in range(n):
        r = b[..., i, :]
        if i:
            prev = ember.stack(xs, -2)  # (..., i, k)
            r = r - (low[..., i : i + 1, :i] @ prev).squeeze(-2)
        xs.append(r / low[..., i, i].unsqueeze(-1))
    return ember.stack(xs, -2)


def batch_mahalanobis(low: Tensor, x: Tensor) -> Tensor:
    """x^T (L L^T)^-1 x for a lower factor L (..., n, n) and vectors x (..., n), broadcast."""
    sol = solve_triangular(low, x.unsqueeze(-1)).squeeze(-1)
    return (sol * sol).sum(-1)
