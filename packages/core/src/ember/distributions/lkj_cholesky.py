"""The LKJ distribution over Cholesky factors of correlation matrices (Lewandowski, Kurowicka
and Joe, 2009): the usual prior on correlations in Bayesian hierarchical models.

>>> import ember
>>> from ember.distributions import LKJCholesky
>>> LKJCholesky(3, 0.5).event_shape
ember.Size([3, 3])
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.beta import Beta
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """LKJ distribution of the lower Cholesky factor L of a ``dim`` x ``dim`` correlation matrix
    L L^T, with density proportional to det(L L^T)^(concentration - 1). Samples come from the
    onion method (each row's squared length drawn from a Beta, its direction uniform);
    concentration 1 is uniform over correlation matrices.

    >>> import ember
    >>> from ember.distributions import LKJCholesky
    >>> _ = ember.manual_seed(0)
    >>> L = LKJCholesky(3, 2.0).sample()
    >>> bool(ember.allclose((L @ L.T).diagonal(), ember.ones(3), atol=1e-5))
    True
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration: Tensor | float = 1.0,
                 validate_args: bool | None = None) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = Size((dim, dim))
        # the onion method's Beta marginals: row i's squared length ~ Beta(i / 2, c + (d - 2 - i) / 2)
        marginal = self.concentration + 0.5 * (self.dim - 2)
        offset = ember.arange(self.dim - 1, dtype=self.concentration.dtype,
                              device=self.concentration.device)
        offset = ember.cat([offset.new_zeros((1,)), offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> LKJCholesky:
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        with ember.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            shape = tuple(self._extended_shape(sample_shape))
            u = ember.randn(shape, dtype=y.dtype, device=y.device).tril(-1)
            norm = u.norm(dim=-1, keepdim=True)
            u = u / ember.where(norm > 0, norm, ember.ones_like(norm))  # row 0 stays zero
            w = ember.sqrt(y) * u
            tiny = ember.finfo(w.dtype).tiny
            diag = ember.clamp(1 - (w * w).sum(-1), min=tiny).sqrt()
            return w + ember.diag_embed(diag)

    def log_prob(self, value: Tensor) -> Tensor:
        """Up to the Jacobian of L -> L L^T (the density of the factor, as PyTorch's)."""
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = ember.arange(2, self.dim + 1, dtype=value.dtype, device=value.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = ember.lgamma(alpha) * dm1
        numerator = ember.mvlgamma(alpha - 0.5, dm1)
        normalizer = 0.5 * dm1 * math.log(math.pi) + numerator - denominator
        return unnormalized - normalizer
