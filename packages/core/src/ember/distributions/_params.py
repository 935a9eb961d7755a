"""Parameterizations shared by several distributions (mixins): ``probs`` or ``logits``
(exactly one is given and stored, the other is derived lazily), parameters read from a
wrapped distribution, and ``loc`` / ``scale``.

>>> import ember
>>> from ember.distributions import Bernoulli
>>> d = Bernoulli(logits=ember.tensor([0.0]))
>>> "probs" in d.__dict__, d.probs.tolist(), "probs" in d.__dict__
(False, [0.5], True)
"""

from __future__ import annotations

from typing import Any

from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["CategoricalParams", "LocScale", "ProbsOrLogits", "RelaxedParams"]


class ProbsOrLogits:
    """Mixin for a distribution given by ``probs`` or ``logits`` (exactly one).

    The given one is stored as an attribute and as ``_param``; the other is a
    :class:`~ember.distributions.utils.lazy_property` computed from it on first use: sigmoid /
    log-odds when ``_is_binary`` (one success probability per batch element), else softmax /
    log over the last dimension (probabilities of K categories).

    >>> import ember
    >>> from ember.distributions import Binomial
    >>> d = Binomial(4, logits=ember.tensor([0.0, 0.0]))
    >>> d.probs.tolist(), d.expand((3, 2)).logits.shape
    ([0.5, 0.5], ember.Size([3, 2]))
    """

    _is_binary = True
    _param: Tensor

    def _set_probs_or_logits(self, probs: Any, logits: Any, *others: Any) -> tuple[Tensor, ...]:
        """Stores whichever of ``probs``/``logits`` is given (and as ``_param``), broadcast with
        ``others`` (which come first, so a tensor among them sets the dtype); returns ``others``
        broadcast."""
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        name, value = ("probs", probs) if probs is not None else ("logits", logits)
        *rest, param = broadcast_all(*others, value)
        setattr(self, name, param)
        self._param = param
        return tuple(rest)

    def _expand_probs_or_logits(self, new: ProbsOrLogits, shape: Any) -> None:
        """Sets on ``new`` the expanded views of whichever of ``probs``/``logits`` this one holds."""
        for name in ("probs", "logits"):
            if name in self.__dict__:
                new._param = self.__dict__[name].expand(shape)
                setattr(new, name, new._param)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=self._is_binary)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=self._is_binary)


class CategoricalParams:
    """Mixin for a distribution built on a Categorical it keeps as ``_categorical``: its
    ``probs``, ``logits`` and ``param_shape`` are the Categorical's.

    >>> import ember
    >>> from ember.distributions import OneHotCategorical
    >>> OneHotCategorical(logits=ember.zeros(2, 3)).probs.shape
    ember.Size([2, 3])
    """

    _categorical: Any

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape


class RelaxedParams:
    """Mixin for a relaxed distribution (a transformed ``base_dist``): its ``temperature``,
    ``probs`` and ``logits`` are the base distribution's.

    >>> import ember
    >>> from ember.distributions import RelaxedBernoulli
    >>> RelaxedBernoulli(ember.tensor(0.5), logits=ember.zeros(2)).probs.tolist()
    [0.5, 0.5]
    """

    base_dist: Any

    @property
    def temperature(self) -> Tensor:
        return self.base_dist.temperature

    @property
    def probs(self) -> Tensor:
        return self.base_dist.probs

    @property
    def logits(self) -> Tensor:
        return self.base_dist.logits


class LocScale:
    """Mixin for a real-valued, reparameterized distribution given by a location ``loc`` and
    a positive ``scale``, broadcast together to the batch shape (mode ``loc``).

    >>> import ember
    >>> from ember.distributions import Laplace
    >>> d = Laplace(ember.zeros(3), 1.0)
    >>> d.batch_shape, d.expand((2, 3)).scale.shape, d.mode.tolist()
    (ember.Size([3]), ember.Size([2, 3]), [0.0, 0.0, 0.0])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    loc: Tensor
    scale: Tensor

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.size(), validate_args=validate_args)  # type: ignore[call-arg]

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        return self._expand_params(LocScale, batch_shape, _instance, "loc", "scale")  # type: ignore[attr-defined]

    @property
    def mode(self) -> Tensor:
        return self.loc
