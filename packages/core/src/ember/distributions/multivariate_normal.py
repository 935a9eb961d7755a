"""The multivariate Normal distribution.

>>> import ember
>>> from ember.distributions import MultivariateNormal
>>> d = MultivariateNormal(ember.zeros(2, dtype=ember.float64), covariance_matrix=ember.eye(2, dtype=ember.float64))
>>> round(d.entropy().item(), 6)
2.837877
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._linalg import batch_mahalanobis, cholesky, solve_triangular
from ember.distributions.distribution import Distribution
from ember.distributions.utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _eye_like(n: int, like: Tensor) -> Tensor:
    return ember.eye(n, dtype=like.dtype, device=like.device)


def _inverse_from_tril(low: Tensor) -> Tensor:
    """(L L^T)^-1 = L^-T L^-1."""
    inv = solve_triangular(low, _eye_like(low.shape[-1], low).expand(tuple(low.shape)))
    return inv.mT @ inv


class MultivariateNormal(Distribution):
    """Multivariate Normal with mean ``loc`` and exactly one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (lower triangular with a positive diagonal).

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> d = MultivariateNormal(ember.zeros(3), scale_tril=ember.eye(3))
    >>> d.sample((4,)).shape
    ember.Size([4, 3])
    """

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            if scale_tril.dim() < 2:
                raise ValueError("scale_tril matrix must be at least two-dimensional, with optional leading batch dimensions")
            batch_shape = ember.broadcast_shapes(tuple(scale_tril.shape[:-2]), tuple(loc.shape[:-1]))
            self.scale_tril = scale_tril.expand(tuple(batch_shape) + (-1, -1))
        elif covariance_matrix is not None:
            if covariance_matrix.dim() < 2:
                raise ValueError(
                    "covariance_matrix must be at least two-dimensional, with optional leading batch dimensions"
                )
            batch_shape = ember.broadcast_shapes(tuple(covariance_matrix.shape[:-2]), tuple(loc.shape[:-1]))
            self.covariance_matrix = covariance_matrix.expand(tuple(batch_shape) + (-1, -1))
        else:
            assert precision_matrix is not None
            if precision_matrix.dim() < 2:
                raise ValueError(
                    "precision_matrix must be at least two-dimensional, with optional leading batch dimensions"
                )
            batch_shape = ember.broadcast_shapes(tuple(precision_matrix.shape[:-2]), tuple(loc.shape[:-1]))
            self.precision_matrix = precision_matrix.expand(tuple(batch_shape) + (-1, -1))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        event_shape = self.loc.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            assert precision_matrix is not None
            # L = chol(P^-1): invert through the Cholesky factor of P.
            self._unbroadcasted_scale_tril = cholesky(_inverse_from_tril(cholesky(precision_matrix)))

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> MultivariateNormal:
        new = self._expand_params(MultivariateNormal, batch_shape, _instance)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        if "covariance_matrix" in self.__dict__:
            new.covariance_matrix = self.covariance_matrix.expand(cov_shape)
        if "scale_tril" in self.__dict__:
            new.scale_tril = self.scale_tril.expand(cov_shape)
        if "precision_matrix" in self.__dict__:
            new.precision_matrix = self.precision_matrix.expand(cov_shape)
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        low = self._unbroadcasted_scale_tril
        return (low @ low.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return _inverse_from_tril(self._unbroadcasted_scale_tril).expand(
            tuple(self._batch_shape) + tuple(self._event_shape) * 2
        )

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = ember.log(ember.diagonal(self._unbroadcasted_scale_tril, 0, -2, -1)).sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - half_log_det

    def entropy(self) -> Tensor:
        half_log_det = ember.log(ember.diagonal(self._unbroadcasted_scale_tril, 0, -2, -1)).sum(-1)
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        if len(self._batch_shape) == 0:
            return h
        return h.expand(tuple(self._batch_shape))
