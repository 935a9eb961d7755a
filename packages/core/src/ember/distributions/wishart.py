"""The Wishart distribution over symmetric positive-definite p x p matrices: the scatter matrix
of ``df`` independent N(0, Sigma) vectors (for integer df), a conjugate prior of a Gaussian's
precision matrix.

>>> import ember
>>> from ember.distributions import Wishart
>>> Wishart(ember.tensor(4.0), covariance_matrix=ember.eye(2)).mean.tolist()
[[4.0, 0.0], [0.0, 4.0]]
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._linalg import cholesky
from ember.distributions.distribution import Distribution
from ember.distributions.multivariate_normal import _inverse_from_tril
from ember.distributions.utils import lazy_property

__all__ = ["Wishart"]


class Wishart(Distribution):
    """Wishart(df, covariance_matrix | precision_matrix | scale_tril): density
    |X|^((df - p - 1) / 2) exp(-tr(Sigma^-1 X) / 2) / (2^(df p / 2) |Sigma|^(df / 2)
    Gamma_p(df / 2)), defined for df > p - 1. Reparameterized samples by the Bartlett
    decomposition X = L A A^T L^T (A lower triangular, chi-distributed diagonal, standard normal
    below it).

    >>> import ember
    >>> w = Wishart(ember.tensor(5.0), scale_tril=ember.eye(3))
    >>> tuple(w.rsample((2,)).shape), w.event_shape
    ((2, 3, 3), ember.Size([3, 3]))
    """

    arg_constraints = {
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
        "df": constraints.greater_than(0),
    }
    support = constraints.positive_definite
    has_rsample = True

    def __init__(self, df: Tensor | float, covariance_matrix: Tensor | None = None,
                 precision_matrix: Tensor | None = None, scale_tril: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril "
                             "may be specified.")
        param = given[0]
        if param.dim() < 2:
            raise ValueError("scale_tril, covariance_matrix and precision_matrix must be at least "
                             "two-dimensional, with optional leading batch dimensions")
        p = param.shape[-1]
        if not isinstance(df, Tensor):
            df = ember.tensor(float(df), dtype=param.dtype, device=param.device)
        batch_shape = ember.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape))
        event_shape = Size((p, p))
        self.df = df.expand(tuple(batch_shape))
        full = tuple(batch_shape) + (p, p)
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(full)
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(full)
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            assert precision_matrix is not None
            self.precision_matrix = precision_matrix.expand(full)
            self._unbroadcasted_scale_tril = cholesky(_inverse_from_tril(cholesky(precision_matrix)))
        # df > p - 1 is what the density needs; checked with the other arguments
        self.arg_constraints = dict(type(self).arg_constraints,
                                    df=constraints.greater_than(p - 1))
        super().__init__(Size(batch_shape), event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Wishart:
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(batch_shape)
        full = tuple(batch_shape) + tuple(self._event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        new.df = self.df.expand(tuple(batch_shape))
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(full))
        new.arg_constraints = self.arg_constraints
        super(Wishart, new).__init__(batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _p(self) -> int:
        return self._event_shape[-1]

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape)
                                                     + tuple(self._event_shape))

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        low = self._unbroadcasted_scale_tril
        return (low @ low.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return _inverse_from_tril(self._unbroadcasted_scale_tril).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    def _df(self) -> Tensor:
        """df shaped to broadcast against (batch, p, p) matrices."""
        return self.df.view(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self) -> Tensor:
        return self._df() * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self._p - 1
        factor = ember.where(factor <= 0, math.nan, factor)
        return factor.view(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        cov = self.covariance_matrix
        diag = ember.diagonal(cov, 0, -2, -1)
        return self._df() * (cov.pow(2) + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _half_log_det(self) -> Tensor:
        """log |Sigma| / 2 = sum log diag(L)."""
        return ember.log(ember.diagonal(self._unbroadcasted_scale_tril, 0, -2, -1)).sum(-1)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = Size(sample_shape)
        p = self._p
        full = tuple(shape) + tuple(self._batch_shape)
        dtype, device = self._unbroadcasted_scale_tril.dtype, self._unbroadcasted_scale_tril.device
        # Bartlett: A[i, i] = sqrt(chi2(df - i)), A[i, j] ~ N(0, 1) below the diagonal
        dfs = self.df.unsqueeze(-1) - ember.arange(p, dtype=dtype, device=device)
        chi2 = ember.distributions.Chi2(dfs).rsample(shape)  # (*full, p)
        normal = ember.randn(*full, p, p, dtype=dtype, device=device).tril(-1)
        a = normal + ember.diag_embed(chi2.sqrt())
        la = self._unbroadcasted_scale_tril @ a
        return la @ la.mT

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        p, df = self._p, self.df
        log_det_x = ember.linalg.slogdet(value)[1]
        # tr(Sigma^-1 X): the precision (from L) times X elementwise, summed (both symmetric)
        precision = _inverse_from_tril(self._unbroadcasted_scale_tril)
        trace = (precision * value).sum((-2, -1))
        return (0.5 * (df - p - 1) * log_det_x - 0.5 * trace - 0.5 * df * p * math.log(2)
                - df * self._half_log_det() - ember.special.multigammaln(0.5 * df, p))

    def entropy(self) -> Tensor:
        p, df = self._p, self.df
        digamma_p = sum(ember.digamma(0.5 * df - 0.5 * i) for i in range(p))
        return ((p + 1) * self._half_log_det() + 0.5 * p * (p + 1) * math.log(2)
                + ember.special.multigammaln(0.5 * df, p) - 0.5 * (df - p - 1) * digamma_p
                + 0.5 * df * p)
