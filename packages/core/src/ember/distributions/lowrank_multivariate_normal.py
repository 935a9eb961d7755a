"""The multivariate Normal with a low-rank-plus-diagonal covariance
``cov_factor @ cov_factor.T + diag(cov_diag)``, computed through the k x k "capacitance" matrix
``I + W^T D^-1 W`` (Woodbury), so an n-dimensional density with a rank-k factor costs O(n k^2).

>>> import ember
>>> from ember.distributions import LowRankMultivariateNormal
>>> d = LowRankMultivariateNormal(ember.zeros(3), ember.ones(3, 1), ember.ones(3))
>>> d.covariance_matrix.tolist()
[[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]]
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._linalg import cholesky, solve_triangular
from ember.distributions.distribution import Distribution
from ember.distributions.multivariate_normal import _inverse_from_tril
from ember.distributions.utils import _standard_normal, lazy_property

__all__ = ["LowRankMultivariateNormal"]


class LowRankMultivariateNormal(Distribution):
    """Multivariate Normal with mean ``loc`` (..., n) and covariance
    ``cov_factor @ cov_factor.mT + diag(cov_diag)``: ``cov_factor`` (..., n, k), ``cov_diag``
    (..., n) positive.

    >>> import ember
    >>> d = LowRankMultivariateNormal(ember.zeros(2), ember.tensor([[1.0], [0.0]]), ember.ones(2))
    >>> f"{d.log_prob(ember.zeros(2)).item():.4f}"
    '-2.1845'
    """

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, cov_factor: Tensor, cov_diag: Tensor,
                 validate_args: bool | None = None) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading "
                             "batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} "
                             "x m")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        batch_shape = ember.broadcast_shapes(tuple(loc.shape[:-1]),
                                             tuple(cov_factor.shape[:-2]),
                                             tuple(cov_diag.shape[:-1]))
        self.loc = loc.expand(tuple(batch_shape) + event_shape)
        self.cov_factor = cov_factor.expand(tuple(batch_shape) + tuple(cov_factor.shape[-2:]))
        self.cov_diag = cov_diag.expand(tuple(batch_shape) + event_shape)
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = self._capacitance(cov_factor, cov_diag)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    @staticmethod
    def _capacitance(W: Tensor, D: Tensor) -> Tensor:
        """The Cholesky factor of ``I + W^T D^-1 W``."""
        k = W.shape[-1]
        Wt_Dinv = W.mT / D.unsqueeze(-2)
        cap = Wt_Dinv @ W + ember.eye(k, dtype=W.dtype, device=W.device)
        return cholesky(cap)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None
               ) -> LowRankMultivariateNormal:
        new = self._expand_params(LowRankMultivariateNormal, batch_shape, _instance)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        return new

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag) \
            .expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        W = self._unbroadcasted_cov_factor
        cov = W @ W.mT + ember.diag_embed(self._unbroadcasted_cov_diag)
        return cov.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def scale_tril(self) -> Tensor:
        return cholesky(self.covariance_matrix)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return _inverse_from_tril(cholesky(self.covariance_matrix))

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        w_shape = tuple(shape[:-1]) + tuple(self.cov_factor.shape[-1:])
        eps_w = _standard_normal(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_cov_factor @ eps_w.unsqueeze(-1)).squeeze(-1) \
            + self._unbroadcasted_cov_diag.sqrt() * eps_d

    def _log_det(self) -> Tensor:
        cap_diag = ember.diagonal(self._capacitance_tril, 0, -2, -1)
        return 2 * cap_diag.log().sum(-1) + self._unbroadcasted_cov_diag.log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        D, W = self._unbroadcasted_cov_diag, self._unbroadcasted_cov_factor
        # x^T (W W^T + D)^-1 x = x^T D^-1 x - |C^-1 W^T D^-1 x|^2 with C C^T the capacitance
        Wt_Dinv_x = ((W.mT / D.unsqueeze(-2)) @ diff.unsqueeze(-1))
        shape = ember.broadcast_shapes(tuple(self._capacitance_tril.shape[:-2]),
                                       tuple(Wt_Dinv_x.shape[:-2]))
        low = self._capacitance_tril.expand(tuple(shape) + tuple(self._capacitance_tril.shape[-2:]))
        rhs = Wt_Dinv_x.expand(tuple(shape) + tuple(Wt_Dinv_x.shape[-2:]))
        sol = solve_triangular(low, rhs).squeeze(-1)
        m = (diff.pow(2) / D).sum(-1) - sol.pow(2).sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m + self._log_det())

    def entropy(self) -> Tensor:
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        if len(self._batch_shape) == 0:
            return h
        return h.expand(tuple(self._batch_shape))
