"""The dense linear algebra the multivariate distributions need, on ember.linalg (LAPACK).

Thin wrappers that keep the distributions' calling conventions: ``cholesky`` of a batch of
symmetric positive-definite matrices, ``cholesky_ok`` (which of them have a factor),
``solve_triangular`` for a lower factor with broadcast batch dimensions, and
``batch_mahalanobis``. All are differentiable through ember.linalg's backward formulas.

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


def cholesky(a: Tensor) -> Tensor:
    """Lower Cholesky factor L (L @ L.mT == a) of a batch of symmetric positive-definite
    matrices (ember.linalg.cholesky: reads the lower triangle); differentiable. Raises
    ember.linalg.LinAlgError when a matrix is not positive definite.

    >>> import ember
    >>> cholesky(ember.eye(2, dtype=ember.float64)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    _check_square("cholesky", a)
    return ember.linalg.cholesky(a)


def cholesky_ok(a: Tensor) -> Tensor:
    """Per matrix of the batch: True where it has a Cholesky factor (is positive definite).

    >>> import ember
    >>> cholesky_ok(ember.stack([ember.eye(2), -ember.eye(2)])).tolist()
    [True, False]
    """
    _check_square("cholesky", a)
    with ember.no_grad():
        return ember.linalg.cholesky_ex(a).info == 0


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
    return ember.linalg.solve_triangular(low, b, upper=False)


def batch_mahalanobis(low: Tensor, x: Tensor) -> Tensor:
    """x^T (L L^T)^-1 x for a lower factor L (..., n, n) and vectors x (..., n), broadcast.

    >>> import ember
    >>> batch_mahalanobis(2 * ember.eye(2), ember.tensor([2.0, 4.0])).item()
    5.0
    """
    sol = solve_triangular(low, x.unsqueeze(-1)).squeeze(-1)
    return (sol * sol).sum(-1)
