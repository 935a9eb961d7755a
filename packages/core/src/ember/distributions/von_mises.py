"""The von Mises distribution: a circular analogue of the normal distribution for angles.

>>> import ember
>>> from ember.distributions import VonMises
>>> d = VonMises(ember.tensor([0.0]), ember.tensor([1.0]))
>>> round(d.log_prob(ember.tensor([0.0])).item(), 4)
-1.0738
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all

__all__ = ["VonMises"]


def _log_i0(x: Tensor) -> Tensor:
    """log I0(x) for x >= 0, without overflow (I0(x) = i0e(x) exp(x))."""
    return ember.log(ember.special.i0e(x)) + x


def _i1_over_i0(x: Tensor) -> Tensor:
    """I1(x) / I0(x), the mean resultant length, stable for large x."""
    return ember.special.i1e(x) / ember.special.i0e(x)


class VonMises(Distribution):
    """Von Mises distribution over angles, with mean direction ``loc`` and ``concentration``
    kappa > 0: density exp(kappa cos(x - loc)) / (2 pi I0(kappa)). Samples lie in [-pi, pi)
    (Best and Fisher's rejection sampler, in float64 for small concentrations); ``log_prob``
    accepts any real angle.

    >>> import ember
    >>> from ember.distributions import VonMises
    >>> _ = ember.manual_seed(0)
    >>> s = VonMises(0.5, 4.0).sample((1000,))
    >>> bool((s >= -3.1416).all() and (s < 3.1416).all())
    True
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc: Tensor | float, concentration: Tensor | float,
                 validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> VonMises:
        return self._expand_params(VonMises, batch_shape, _instance, "loc", "concentration")

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * ember.cos(value - self.loc) - math.log(2 * math.pi)
                - _log_i0(self.concentration))

    @property
    def mean(self) -> Tensor:
        """The circular mean (``loc``)."""
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        """The circular variance, 1 - I1(kappa) / I0(kappa)."""
        return 1 - _i1_over_i0(self.concentration)

    @ember.no_grad()
    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        dtype = self.loc.dtype
        # float64 keeps the proposal accurate for concentrations near 0
        k = self.concentration.to(ember.float64).expand(shape)
        tau = 1 + ember.sqrt(1 + 4 * k * k)
        rho = (tau - ember.sqrt(2 * tau)) / (2 * k)
        r = (1 + rho * rho) / (2 * rho)
        x = ember.empty(shape, dtype=ember.float64)
        done = ember.zeros(shape, dtype=ember.bool)
        for _ in range(1000):  # each round accepts most of what is left
            if bool(done.all()):
                break
            u1, u2, u3 = (ember.rand(shape, dtype=ember.float64) for _ in range(3))
            z = ember.cos(math.pi * u1)
            f = (1 + r * z) / (r + z)
            c = k * (r - f)
            accept = ((c * (2 - c) - u2) > 0) | ((ember.log(c / u2) + 1 - c) >= 0)
            new = accept & ~done
            x = ember.where(new, ember.sign(u3 - 0.5) * ember.acos(f.clamp(-1, 1)), x)
            done = done | accept
        if not bool(done.all()):
            raise RuntimeError("VonMises.sample: the rejection sampler did not converge")
        out = (x + self.loc.to(ember.float64) + math.pi).remainder(2 * math.pi) - math.pi
        return out.to(dtype)
