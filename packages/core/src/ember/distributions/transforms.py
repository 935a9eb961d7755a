"""Invertible (or at least differentiable) maps between constraint sets, with the log of the
absolute Jacobian determinant that TransformedDistribution needs.

>>> import ember
>>> from ember.distributions.transforms import ExpTransform
>>> t = ExpTransform()
>>> x = ember.tensor([0.0, 1.0], dtype=ember.float64)
>>> bool(ember.allclose(t.inv(t(x)), x))
True
"""

from __future__ import annotations

import math
import weakref
from numbers import Number
from typing import Any, Callable, Sequence

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.utils import _stable_softplus, _sum_rightmost

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "CatTransform",
    "ComposeTransform",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "ExpTransform",
    "IndependentTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "TanhTransform",
    "Transform",
    "identity_transform",
]


def _softplus(x: Tensor) -> Tensor:
    return _stable_softplus(x)


class Transform:
    """Base class: a map ``y = t(x)`` with ``t.inv(y)``, ``t.log_abs_det_jacobian(x, y)``,
    its ``domain``/``codomain`` constraints, ``bijective`` and ``sign``.

    ``cache_size=1`` remembers the last (x, y) pair so ``inv(t(x))`` returns ``x`` itself.

    >>> import ember
    >>> from ember.distributions.transforms import AffineTransform
    >>> AffineTransform(1.0, 2.0)(ember.tensor([1.0])).tolist()
    [3.0]
    """

    bijective = False
    domain: constraints.Constraint
    codomain: constraints.Constraint

    def __init__(self, cache_size: int = 0) -> None:
        self._cache_size = cache_size
        self._inv: Any = None
        if cache_size == 0:
            pass
        elif cache_size == 1:
            self._cached_x_y: tuple[Any, Any] = (None, None)
        else:
            raise ValueError("cache_size must be 0 or 1")
        super().__init__()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_inv"] = None
        return state

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> Transform:
        """The inverse transform (``inv.inv`` is this transform)."""
        inv = None
        if self._inv is not None:
            inv = self._inv()
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = weakref.ref(inv)
        return inv

    @property
    def sign(self) -> Any:
        """+1 or -1 (or a tensor of them): the sign of the derivative of a monotone map."""
        raise NotImplementedError

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x: Tensor) -> Tensor:
        return self._through_cache(x, self._call, 0)

    def _inv_call(self, y: Tensor) -> Tensor:
        return self._through_cache(y, self._inverse, 1)

    def _through_cache(self, value: Tensor, compute: Callable[[Tensor], Tensor], side: int) -> Tensor:
        """``compute(value)``, where ``value`` is the x (``side`` 0) or y (``side`` 1) of the
        pair: with a cache, the other half of the cached (x, y) pair when ``value`` is that
        pair's half, and the new pair is cached."""
        if self._cache_size == 0:
            return compute(value)
        pair = self._cached_x_y
        if value is pair[side]:
            return pair[1 - side]
        result = compute(value)
        self._cached_x_y = (value, result) if side == 0 else (result, value)
        return result

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """log |dy/dx| for y = t(x), summed over the transform's event dimensions."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.__class__.__name__ + "()"

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        """The output shape for an input of ``shape``."""
        return shape

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        """The input shape for an output of ``shape``."""
        return shape


class _InverseTransform(Transform):
    """The inverse of a transform, made by ``Transform.inv``."""

    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return self._inv.domain

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self._inv.bijective

    @property
    def sign(self) -> Any:
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _InverseTransform):
            return False
        return self._inv == other._inv

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self._inv!r})"

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """Applies ``parts`` one after the other (``ComposeTransform([])`` is the identity).

    >>> import ember
    >>> t = ComposeTransform([AffineTransform(0.0, 2.0), ExpTransform()])
    >>> round(t(ember.tensor([0.5])).item(), 5)
    2.71828
    """

    def __init__(self, parts: list[Transform], cache_size: int = 0) -> None:
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ComposeTransform):
            return False
        return self.parts == other.parts

    __hash__ = object.__hash__

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        assert event_dim >= domain.event_dim
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        assert event_dim >= codomain.event_dim
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(p.bijective for p in self.parts)

    @property
    def sign(self) -> Any:
        sign: Any = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self) -> Transform:
        inv = None
        if self._inv is not None:
            inv = self._inv()
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = weakref.ref(inv)
            inv._inv = weakref.ref(self)
        return inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x: Tensor) -> Tensor:
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        if not self.parts:
            return ember.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms: list[Any] = []
        event_dim = self.domain.event_dim
        for part, xi, yi in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(_sum_rightmost(part.log_abs_det_jacobian(xi, yi), event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        total: Any = 0
        for t in terms:
            total = total + t
        return total

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self) -> str:
        inner = ",\n    ".join(repr(p) for p in self.parts)
        return f"{self.__class__.__name__}(\n    {inner}\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """Wraps a transform to treat ``reinterpreted_batch_ndims`` more dimensions as its event
    (its log-det-Jacobian is summed over them)."""

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self.base_transform.bijective

    @property
    def sign(self) -> Any:
        return self.base_transform.sign

    def _call(self, x: Tensor) -> Tensor:
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y: Tensor) -> Tensor:
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        result = self.base_transform.log_abs_det_jacobian(x, y)
        return _sum_rightmost(result, self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshapes the rightmost ``in_shape`` dimensions to ``out_shape`` (same element count)."""

    bijective = True

    def __init__(self, in_shape: Sequence[int], out_shape: Sequence[int], cache_size: int = 0) -> None:
        self.in_shape = Size(in_shape)
        self.out_shape = Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x: Tensor) -> Tensor:
        batch_shape = tuple(x.shape[: x.dim() - len(self.in_shape)])
        return x.reshape(batch_shape + tuple(self.out_shape))

    def _inverse(self, y: Tensor) -> Tensor:
        batch_shape = tuple(y.shape[: y.dim() - len(self.out_shape)])
        return y.reshape(batch_shape + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        batch_shape = tuple(x.shape[: x.dim() - len(self.in_shape)])
        return ember.zeros(batch_shape, dtype=x.dtype, device=x.device)

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        if len(shape) < len(self.in_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.in_shape)
        if tuple(shape[cut:]) != tuple(self.in_shape):
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {self.in_shape}")
        return tuple(shape[:cut]) + tuple(self.out_shape)

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        if len(shape) < len(self.out_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.out_shape)
        if tuple(shape[cut:]) != tuple(self.out_shape):
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {self.out_shape}")
        return tuple(shape[:cut]) + tuple(self.in_shape)


class _ParameterFreeTransform(Transform):
    """A transform with no parameters: all instances of one such class are equal.

    >>> from ember.distributions.transforms import ExpTransform
    >>> ExpTransform() == ExpTransform(), ExpTransform() == ExpTransform().inv
    (True, False)
    """

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self))

    __hash__ = object.__hash__


class ExpTransform(_ParameterFreeTransform):
    """y = exp(x)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x: Tensor) -> Tensor:
        return ember.exp(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return ember.log(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class PowerTransform(Transform):
    """y = x ** exponent on the positive reals."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent: Tensor | float, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        if isinstance(exponent, Number):
            exponent = ember.tensor(float(exponent), dtype=ember.get_default_dtype())
        self.exponent = exponent

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    # (no __repr__ of its own: "PowerTransform()", as PyTorch prints it)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PowerTransform):
            return False
        return bool(ember.eq(self.exponent, other.exponent).all())

    __hash__ = object.__hash__

    @property
    def sign(self) -> Any:
        return ember.sign(self.exponent)

    def _call(self, x: Tensor) -> Tensor:
        return x.pow(self.exponent)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return ember.log(ember.abs(self.exponent * y / x))

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return ember.broadcast_shapes(tuple(shape), tuple(self.exponent.shape))

    inverse_shape = forward_shape  # broadcasting with the exponent either way


class SigmoidTransform(_ParameterFreeTransform):
    """y = 1 / (1 + exp(-x)), kept inside (0, 1) of the dtype."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def _call(self, x: Tensor) -> Tensor:
        fi = ember.finfo(x.dtype)
        return ember.clamp(ember.sigmoid(x), min=fi.tiny, max=1.0 - fi.eps)

    def _inverse(self, y: Tensor) -> Tensor:
        fi = ember.finfo(y.dtype)
        y = y.clamp(min=fi.tiny, max=1.0 - fi.eps)
        return ember.log(y) - ember.log1p(-y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -_softplus(-x) - _softplus(x)


class SoftplusTransform(_ParameterFreeTransform):
    """y = log(1 + exp(x))."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x: Tensor) -> Tensor:
        return _softplus(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return ember.log(-ember.expm1(-y)) + y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -_softplus(-x)


class TanhTransform(_ParameterFreeTransform):
    """y = tanh(x); its inverse is atanh, so values of exactly +-1 map to +-inf."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def _call(self, x: Tensor) -> Tensor:
        return ember.tanh(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return 0.5 * (ember.log1p(y) - ember.log1p(-y))

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        # log(1 - tanh(x)^2), written stably
        return 2.0 * (math.log(2.0) - x - _softplus(-2.0 * x))


class AbsTransform(_ParameterFreeTransform):
    """y = |x| (not bijective; its inverse picks the positive branch)."""

    domain = constraints.real
    codomain = constraints.positive

    def _call(self, x: Tensor) -> Tensor:
        return ember.abs(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, with ``event_dim`` rightmost dimensions per event.

    >>> import ember
    >>> AffineTransform(0.0, -2.0).sign
    -1
    """

    bijective = True

    def __init__(
        self, loc: Tensor | float, scale: Tensor | float, event_dim: int = 0, cache_size: int = 0
    ) -> None:
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, Number) and isinstance(b, Number):
                if a != b:
                    return False
            elif not bool((ember.as_tensor(a) == ember.as_tensor(b)).all()):
                return False
        return True

    __hash__ = object.__hash__

    @property
    def sign(self) -> Any:
        if isinstance(self.scale, Number):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return ember.sign(self.scale)

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        shape = tuple(x.shape)
        scale = self.scale
        if isinstance(scale, Number):
            result = ember.full_like(x, math.log(abs(float(scale))))
        else:
            result = ember.log(ember.abs(scale))
        if self.event_dim:
            result = result.reshape(tuple(result.shape[: result.dim() - self.event_dim]) + (-1,)).sum(-1)
            shape = shape[: len(shape) - self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        return ember.broadcast_shapes(tuple(shape), tuple(getattr(self.loc, "shape", ())), tuple(getattr(self.scale, "shape", ())))

    inverse_shape = forward_shape  # broadcasting with loc and scale either way


class SoftmaxTransform(_ParameterFreeTransform):
    """Unconstrained vectors to the simplex by exp and normalization over the last dimension
    (not bijective: the inverse is log, defined up to a constant)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x: Tensor) -> Tensor:
        logprobs = x - x.max(-1, keepdim=True)[0]
        probs = ember.exp(logprobs)
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y: Tensor) -> Tensor:
        return ember.log(y)

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape


class StickBreakingTransform(_ParameterFreeTransform):
    """Unconstrained vectors of length K - 1 to the K-simplex by stick breaking: the i-th
    coordinate takes the fraction sigmoid(x_i - log(K - 1 - i)) of what is left of the stick
    (the offset makes x = 0 map to the uniform vector). Bijective, unlike SoftmaxTransform.

    >>> import ember
    >>> [round(v, 6) for v in StickBreakingTransform()(ember.zeros(2, dtype=ember.float64)).tolist()]
    [0.333333, 0.333333, 0.333333]
    """

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    @staticmethod
    def _log_offset(k: int, like: Tensor) -> Tensor:
        # log(K - 1 - i) for i = 0 .. K - 2, with K - 1 = k inputs
        return ember.log(ember.arange(k, 0, -1, dtype=like.dtype, device=like.device))

    def _call(self, x: Tensor) -> Tensor:
        z = ember.sigmoid(x - self._log_offset(x.shape[-1], x))
        remaining = ember.cumprod(1 - z, -1)
        ones = ember.ones(tuple(x.shape[:-1]) + (1,), dtype=x.dtype, device=x.device)
        return ember.cat([z, ones], -1) * ember.cat([ones, remaining], -1)

    def _inverse(self, y: Tensor) -> Tensor:
        y_crop = y[..., :-1]
        left = 1 - ember.cumsum(y_crop, -1)
        left = ember.clamp(left, min=ember.finfo(y.dtype).tiny)
        # z_i = y_i / (left before i), and x_i = logit(z_i) + log offset = log y_i - log left_i + log offset
        return ember.log(y_crop) - ember.log(left) + self._log_offset(y_crop.shape[-1], y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        shifted = x - self._log_offset(x.shape[-1], x)
        # dy_i/dx_i = y_i * (1 - z_i), with log(1 - z_i) = -shifted + logsigmoid(shifted)
        log_sig = -_softplus(-shifted)
        return (-shifted + log_sig + ember.log(y[..., :-1])).sum(-1)

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(_ParameterFreeTransform):
    """Square matrices to lower-triangular ones with a positive diagonal: keeps the strictly
    lower part and exponentiates the diagonal (the upper part is dropped, so not bijective).

    >>> import ember
    >>> LowerCholeskyTransform()(ember.zeros(2, 2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    @staticmethod
    def _with_diagonal(x: Tensor, diag: Tensor) -> Tensor:
        eye = ember.eye(x.shape[-1], dtype=x.dtype, device=x.device)
        return ember.tril(x, -1) + diag.unsqueeze(-1) * eye

    def _call(self, x: Tensor) -> Tensor:
        return self._with_diagonal(x, ember.exp(ember.diagonal(x, 0, -2, -1)))

    def _inverse(self, y: Tensor) -> Tensor:
        return self._with_diagonal(y, ember.log(ember.diagonal(y, 0, -2, -1)))


def _strict_lower_index(n: int, offset: int, device: Any) -> Tensor:
    """Flat (row-major) positions of the entries (i, j) with j <= i + offset of an n x n matrix,
    row by row: the order vectors of lower-triangular entries use."""
    rows, cols = ember.tril_indices(n, n, offset, device=device)
    return rows * n + cols


def _tril_to_vec(mat: Tensor, offset: int) -> Tensor:
    n = mat.shape[-1]
    flat = mat.reshape(tuple(mat.shape[:-2]) + (n * n,))
    return flat[..., _strict_lower_index(n, offset, mat.device)]


def _vec_to_tril(vec: Tensor, n: int, offset: int) -> Tensor:
    flat = ember.zeros(tuple(vec.shape[:-1]) + (n * n,), dtype=vec.dtype, device=vec.device)
    idx = _strict_lower_index(n, offset, vec.device).expand(tuple(vec.shape))
    return flat.scatter(-1, idx, vec).reshape(tuple(vec.shape[:-1]) + (n, n))


def _corr_size(k: int) -> int:
    """D with D (D - 1) / 2 == k, or ValueError."""
    d = round((0.25 + 2 * k) ** 0.5 + 0.5)
    if d * (d - 1) // 2 != k:
        raise ValueError("Input is not a flattened lower-diagonal number")
    return d


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length D (D - 1) / 2 to Cholesky factors of D x D correlation
    matrices (lower triangular, positive diagonal, rows of unit length): the entries fill the
    strictly lower triangle row by row through tanh, and each row is completed by a signed stick
    breaking (entry j keeps its share r_ij of what the earlier ones of the row left).

    >>> import ember
    >>> y = CorrCholeskyTransform()(ember.tensor([0.5, -0.3, 0.8], dtype=ember.float64))
    >>> [round(v, 6) for v in (y @ y.mT).diagonal().tolist()]
    [1.0, 1.0, 1.0]
    """

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x: Tensor) -> Tensor:
        eps = ember.finfo(x.dtype).eps
        r = ember.tanh(x).clamp(min=-1 + eps, max=1 - eps)
        d = _corr_size(x.shape[-1])
        r = _vec_to_tril(r, d, -1)
        # what each row leaves before column j: prod_{k < j} sqrt(1 - r_ik^2)
        left = ember.cumprod(ember.sqrt(1 - r * r), -1)
        ones = ember.ones(tuple(left.shape[:-1]) + (1,), dtype=x.dtype, device=x.device)
        left = ember.cat([ones, left[..., :-1]], -1)
        return (r + ember.eye(d, dtype=x.dtype, device=x.device)) * left

    def _inverse(self, y: Tensor) -> Tensor:
        used = ember.cumsum(y * y, -1)
        zeros = ember.zeros(tuple(used.shape[:-1]) + (1,), dtype=y.dtype, device=y.device)
        left = 1 - ember.cat([zeros, used[..., :-1]], -1)  # 1 - sum_{k < j} y_ik^2
        t = _tril_to_vec(y, -1) / ember.sqrt(_tril_to_vec(left, -1))
        return ember.atanh(t)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        # with respect to the strictly lower entries of y: the stick breaking's
        # 1/2 sum log(1 - sum_{k < j} y_ik^2) over j >= 1, and tanh's log(1 - tanh(x)^2)
        left = 1 - ember.cumsum(y * y, -1)
        stick = 0.5 * ember.log(_tril_to_vec(left, -2)).sum(-1)
        tanh = 2 * (math.log(2.0) - x - _softplus(-2 * x)).sum(-1)
        return stick + tanh

    def forward_shape(self, shape: Sequence[int]) -> Sequence[int]:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        d = _corr_size(shape[-1])
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape: Sequence[int]) -> Sequence[int]:
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)


class PositiveDefiniteTransform(_ParameterFreeTransform):
    """Square matrices to symmetric positive-definite ones: L L^T with L the
    LowerCholeskyTransform of the input (not bijective: the upper part is dropped).

    >>> import ember
    >>> PositiveDefiniteTransform()(ember.zeros(2, 2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x: Tensor) -> Tensor:
        low = LowerCholeskyTransform()(x)
        return low @ low.mT

    def _inverse(self, y: Tensor) -> Tensor:
        return LowerCholeskyTransform().inv(ember.linalg.cholesky(y))


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x), onto (0, 1) (a copula's marginal); the inverse is its icdf
    and log |dy/dx| its log_prob.

    >>> import ember
    >>> from ember.distributions import Normal
    >>> CumulativeDistributionTransform(Normal(0.0, 1.0))(ember.tensor([0.0])).tolist()
    [0.5]
    """

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution: Any, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return self.distribution.support

    def with_cache(self, cache_size: int = 1) -> CumulativeDistributionTransform:
        if self._cache_size == cache_size:
            return self
        return type(self)(self.distribution, cache_size=cache_size)

    def _call(self, x: Tensor) -> Tensor:
        return self.distribution.cdf(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return self.distribution.log_prob(x)


class StackTransform(Transform):
    """Applies ``tseq[i]`` to the i-th slice along ``dim`` (x.select(dim, i)) and stacks the
    results; log |det| likewise, slice by slice.

    >>> import ember
    >>> t = StackTransform([ExpTransform(), AffineTransform(1.0, 2.0)], dim=1)
    >>> t(ember.zeros(1, 2)).tolist()
    [[1.0, 1.0]]
    """

    def __init__(self, tseq: Sequence[Transform], dim: int = 0, cache_size: int = 0) -> None:
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("StackTransform: every element of tseq must be a Transform")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size: int = 1) -> StackTransform:
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, z: Tensor) -> list[Tensor]:
        if z.shape[self.dim] != len(self.transforms):
            raise ValueError(f"StackTransform: expected {len(self.transforms)} slices along dim "
                             f"{self.dim}, got {z.shape[self.dim]}")
        return [z.select(self.dim, i) for i in range(z.shape[self.dim])]

    def _call(self, x: Tensor) -> Tensor:
        return ember.stack([t(s) for t, s in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y: Tensor) -> Tensor:
        return ember.stack([t.inv(s) for t, s in zip(self.transforms, self._slices(y))],
                           self.dim)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        parts = [t.log_abs_det_jacobian(a, b)
                 for t, a, b in zip(self.transforms, self._slices(x), self._slices(y))]
        return ember.stack(parts, self.dim)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CatTransform(Transform):
    """Applies ``tseq[i]`` to the i-th block of ``lengths[i]`` entries along ``dim`` (1 each by
    default) and concatenates the results; log |det| per block, summed over event dims where a
    block's transform has fewer.

    >>> import ember
    >>> t = CatTransform([ExpTransform(), AffineTransform(1.0, 2.0)], dim=0, lengths=[1, 2])
    >>> t(ember.zeros(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, tseq: Sequence[Transform], dim: int = 0,
                 lengths: Sequence[int] | None = None, cache_size: int = 0) -> None:
        if not all(isinstance(t, Transform) for t in tseq):
            raise TypeError("CatTransform: every element of tseq must be a Transform")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: {len(self.transforms)} transforms but "
                             f"{len(self.lengths)} lengths")
        self.dim = dim

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self) -> int:
        return sum(self.lengths)

    def with_cache(self, cache_size: int = 1) -> CatTransform:
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _blocks(self, z: Tensor) -> list[Tensor]:
        if z.shape[self.dim] != self.length:
            raise ValueError(f"CatTransform: expected {self.length} entries along dim "
                             f"{self.dim}, got {z.shape[self.dim]}")
        return list(ember.split(z, self.lengths, self.dim))

    def _call(self, x: Tensor) -> Tensor:
        return ember.cat([t(b) for t, b in zip(self.transforms, self._blocks(x))], self.dim)

    def _inverse(self, y: Tensor) -> Tensor:
        return ember.cat([t.inv(b) for t, b in zip(self.transforms, self._blocks(y))], self.dim)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        parts = []
        for t, a, b in zip(self.transforms, self._blocks(x), self._blocks(y)):
            part = t.log_abs_det_jacobian(a, b)
            if t.event_dim < self.event_dim:
                part = _sum_rightmost(part, self.event_dim - t.event_dim)
            parts.append(part)
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        # the concatenated dim survives in the result only if it is not an event dim
        return ember.cat(parts, dim) if dim < 0 else sum(parts[1:], parts[0])

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)
