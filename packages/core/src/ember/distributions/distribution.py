"""The ``Distribution`` base class: shapes, argument/sample validation and the common API.

>>> import ember
>>> from ember.distributions import Normal
>>> d = Normal(ember.zeros(3), 1.0)
>>> d.batch_shape, d.event_shape
(ember.Size([3]), ember.Size([]))
>>> tuple(d.sample((2,)).shape)
(2, 3)
"""

from __future__ import annotations

import warnings
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.utils import lazy_property

__all__ = ["Distribution"]

_ShapeLike = Any  # a Size, tuple or list of ints


class Distribution:
    """Abstract base class of probability distributions.

    Subclasses set ``arg_constraints`` and ``support`` and implement what they can of
    ``sample``/``rsample``, ``log_prob``, ``cdf``/``icdf``, ``entropy``, ``mean``, ``mode``,
    ``variance`` and ``expand``.

    >>> import ember
    >>> from ember.distributions import Bernoulli
    >>> Bernoulli(0.3).mean.item() == ember.tensor(0.3).item()
    True
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turns argument/sample validation on or off for every distribution made afterwards
        without an explicit ``validate_args``.

        >>> Distribution.set_default_validate_args(True)
        """
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args expects True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(
        self,
        batch_shape: _ShapeLike = Size(),
        event_shape: _ShapeLike = Size(),
        validate_args: bool | None = None,
    ) -> None:
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(
                    f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = {{}}` "
                    "or initialize the distribution with `validate_args=False` to turn off validation.",
                    stacklevel=2,
                )
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # checked by the subclass
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # not constructed (e.g. probs when logits were given)
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(
                        f"Expected parameter {param} "
                        f"({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {self!r} "
                        f"to satisfy the constraint {constraint!r}, "
                        f"but found invalid values:\n{value}"
                    )
        super().__init__()

    def expand(self, batch_shape: _ShapeLike, _instance: Distribution | None = None) -> Distribution:
        """A new distribution of the same kind with its batch dimensions expanded to
        ``batch_shape`` (parameters are expanded views, not copies)."""
        raise NotImplementedError

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        """Maps each parameter name to the constraint its values must satisfy."""
        raise NotImplementedError

    @property
    def support(self) -> constraints.Constraint | None:
        """The constraint that values of this distribution satisfy."""
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        """The mean of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        """The mode of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        """The variance of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        """The standard deviation of the distribution."""
        return self.variance.sqrt()

    def sample(self, sample_shape: _ShapeLike = Size()) -> Tensor:
        """A sample (or batch of samples, shape ``sample_shape + batch_shape + event_shape``),
        outside any autograd graph."""
        with ember.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: _ShapeLike = Size()) -> Tensor:
        """A reparameterized sample: gradients flow back to the parameters."""
        raise NotImplementedError(f"{self.__class__} does not implement rsample")

    def sample_n(self, n: int) -> Tensor:
        """``n`` samples (deprecated, use ``sample((n,))``)."""
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the probability density/mass function evaluated at ``value``."""
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function evaluated at ``value``."""
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function evaluated at ``value``."""
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """All values of a discrete distribution along a new leading dimension."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy, batched over ``batch_shape``."""
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        """exp(entropy)."""
        return ember.exp(self.entropy())

    def _extended_shape(self, sample_shape: _ShapeLike = Size()) -> Size:
        if not isinstance(sample_shape, Size):
            if isinstance(sample_shape, int):  # Size(3) would say "'int' object is not iterable"
                raise TypeError(f"{type(self).__name__}: sample_shape must be a tuple of ints "
                                f"such as ({sample_shape},), got the int {sample_shape}")
            sample_shape = Size(sample_shape)
        if any(s < 0 for s in sample_shape):
            raise RuntimeError(f"{type(self).__name__}: sample_shape must hold non-negative "
                               f"sizes, got {tuple(sample_shape)}")
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Tensor) -> None:
        """Raises ValueError when ``value`` has the wrong shape or lies outside the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(
                f"The right-most size of value must match event_shape: {value.shape} vs {self._event_shape}."
            )
        actual_shape = tuple(value.shape)
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: {Size(actual_shape)} vs "
                    f"{Size(expected_shape)}."
                )
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(
                f"{self.__class__} does not define `support` to enable sample validation. Please initialize "
                "the distribution with `validate_args=False` to turn off validation.",
                stacklevel=2,
            )
            return
        assert support is not None
        valid = support.check(value)
        if not bool(valid.all()):
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({support!r}) "
                f"of the distribution {self!r}, "
                f"but found invalid values:\n{value}"
            )

    def _expand_params(self, cls: type, batch_shape: _ShapeLike, _instance: Distribution | None, *names: str) -> Any:
        """The common body of ``expand``: a new instance (of ``cls``, or ``_instance``) with the
        given batch shape, this one's event shape and validation setting, and expanded views of
        the parameters ``names`` (each of which has the batch shape).

        >>> import ember
        >>> from ember.distributions import Normal
        >>> d = Normal(ember.zeros(3), 1.0)
        >>> d._expand_params(Normal, (2, 3), None, "loc", "scale").scale.shape
        ember.Size([2, 3])
        """
        new = self._get_checked_instance(cls, _instance)
        batch_shape = Size(batch_shape)
        for name in names:
            setattr(new, name, getattr(self, name).expand(batch_shape))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls: type, _instance: Distribution | None = None) -> Any:
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom __init__ method "
                "must also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        try:
            names = list(self.arg_constraints.keys())
        except NotImplementedError:
            names = []
        parts = []
        for p in names:
            if p in self.__dict__:
                v = self.__dict__[p]
                parts.append(f"{p}: {v if v.numel() == 1 else v.size()}")
        return self.__class__.__name__ + "(" + ", ".join(parts) + ")"
