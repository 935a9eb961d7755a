"""Observers: modules that watch the values flowing through a model and choose quantization
parameters (scale, zero point) for them, with PyTorch's ``torch.ao.quantization.observer``
arithmetic (float32 tensors, so the numbers agree with PyTorch's bit for bit).

>>> import ember
>>> from ember.ao.quantization import MinMaxObserver
>>> obs = MinMaxObserver()
>>> _ = obs(ember.tensor([-1.0, 2.0]))
>>> scale, zero_point = obs.calculate_qparams()
>>> round(scale.item(), 6), zero_point.tolist()
(0.011765, [85])
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import ember
from ember import Tensor, nn

__all__ = [
    "ObserverBase", "UniformQuantizationObserverBase", "MinMaxObserver",
    "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver", "HistogramObserver", "PlaceholderObserver",
    "NoopObserver", "FixedQParamsObserver", "default_observer", "default_weight_observer",
    "default_per_channel_weight_observer", "default_histogram_observer",
    "default_dynamic_quant_observer", "default_placeholder_observer",
    "default_float_qparams_observer", "calculate_qmin_qmax",
]

_EPS = ember.finfo(ember.float32).eps
_QUANT_DTYPES = (ember.qint8, ember.quint8, ember.qint32, ember.int8, ember.uint8, ember.int32,
                 ember.quint4x2)


class _PartialWrapper:
    """A constructor with some keyword arguments bound (``Observer.with_args(...)``); calling
    it makes a new instance each time."""

    def __init__(self, p: functools.partial) -> None:
        self.p = p
        self.callable_args: dict[str, Any] = {}

    def __call__(self, *args: Any, **keywords: Any) -> Any:
        for k, fn in self.callable_args.items():
            keywords.setdefault(k, fn())
        return self.p(*args, **keywords)

    def __repr__(self) -> str:
        return self.p.__repr__() + self.callable_args.__repr__()

    def with_args(self, **kwargs: Any) -> _PartialWrapper:
        return _with_args(self, **kwargs)

    def with_callable_args(self, **kwargs: Any) -> _PartialWrapper:
        out = _PartialWrapper(self.p)
        out.callable_args = {**self.callable_args, **kwargs}
        return out


def _with_args(cls_or_self: Any, **kwargs: Any) -> _PartialWrapper:
    """``cls_or_self`` with ``kwargs`` bound, for a QConfig (``MinMaxObserver.with_args(...)``).

    >>> from ember.ao.quantization import MinMaxObserver
    >>> MinMaxObserver.with_args(quant_min=0, quant_max=127)().quant_max
    127
    """
    if isinstance(cls_or_self, _PartialWrapper):
        out = _PartialWrapper(functools.partial(cls_or_self.p, **kwargs))
        out.callable_args = dict(cls_or_self.callable_args)
        return out
    return _PartialWrapper(functools.partial(cls_or_self, **kwargs))


def _with_callable_args(cls_or_self: Any, **kwargs: Any) -> _PartialWrapper:
    out = _PartialWrapper(functools.partial(cls_or_self))
    return out.with_callable_args(**kwargs)


def calculate_qmin_qmax(quant_min: int | None, quant_max: int | None, has_customized_qrange: bool,
                        dtype: Any, reduce_range: bool) -> tuple[int, int]:
    """The integer range an observer quantizes to: ``[quant_min, quant_max]`` when given (halved
    with ``reduce_range``), else the 8-bit (or 32-bit) range of ``dtype``.

    >>> import ember
    >>> calculate_qmin_qmax(None, None, False, ember.quint8, True)
    (0, 127)
    """
    if has_customized_qrange:
        assert quant_min is not None and quant_max is not None
        span = quant_max - quant_min + 1
        if dtype in (ember.qint8, ember.int8) and not 0 < span <= 256:
            raise AssertionError("quantization range should be positive and not exceed the "
                                 "maximum bit range (=256).")
        if dtype in (ember.qint32, ember.int32) and not 0 < span <= 2**32:
            raise AssertionError("quantization range should be positive and not exceed the "
                                 "maximum bit range (=4294967296).")
        if reduce_range:
            quant_min, quant_max = quant_min // 2, quant_max // 2
        return quant_min, quant_max
    if dtype in (ember.qint8, ember.int8):
        return (-64, 63) if reduce_range else (-128, 127)
    if dtype in (ember.quint8, ember.uint8):
        return (0, 127) if reduce_range else (0, 255)
    if dtype in (ember.qint32, ember.int32):
        return -(2**31), 2**31 - 1
    return 0, 15


def _is_per_channel(qscheme: Any) -> bool:
    return qscheme in (ember.per_channel_affine, ember.per_channel_symmetric,
                       ember.per_channel_affine_float_qparams)


def _is_per_tensor(qscheme: Any) -> bool:
    return qscheme in (ember.per_tensor_affine, ember.per_tensor_symmetric)


def _is_symmetric(qscheme: Any) -> bool:
    return qscheme in (ember.per_tensor_symmetric, ember.per_channel_symmetric)


def _min_max_valid(min_val: Tensor, max_val: Tensor) -> bool:
    if min_val.numel() == 0 or max_val.numel() == 0:
        warnings.warn("must run observer before calling calculate_qparams. Returning default "
                      "values.", stacklevel=3)
        return False
    if min_val.dim() == 0 or max_val.dim() == 0:
        if min_val.item() == math.inf and max_val.item() == -math.inf:
            warnings.warn("must run observer before calling calculate_qparams. Returning "
                          "default values.", stacklevel=3)
            return False
        if min_val.item() > max_val.item():
            raise AssertionError(f"min {min_val} should be less than max {max_val}")
    elif bool((min_val > max_val).any()):
        raise AssertionError(f"min {min_val} should be less than max {max_val}")
    return True


class ObserverBase(nn.Module):
    """Base of the observers: ``forward`` records statistics of its input and returns it
    unchanged; ``calculate_qparams`` gives the quantization parameters."""

    with_args = classmethod(_with_args)
    with_callable_args = classmethod(_with_callable_args)

    def __init__(self, dtype: Any, is_dynamic: bool = False) -> None:
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    def forward(self, x: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def calculate_qparams(self, **kwargs: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class UniformQuantizationObserverBase(ObserverBase):
    """Common part of the observers that quantize uniformly: dtype, qscheme, the integer
    range and PyTorch's scale / zero point formulas (``_calculate_qparams``)."""

    def __init__(self, dtype: Any = ember.quint8, qscheme: Any = ember.per_tensor_affine,
                 reduce_range: bool = False, quant_min: int | None = None,
                 quant_max: int | None = None, factory_kwargs: Any = None, eps: float = _EPS,
                 is_dynamic: bool = False, **kwargs: Any) -> None:
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(kwargs)}")
        self.qscheme = qscheme
        if reduce_range:
            warnings.warn("Please use quant_min and quant_max to specify the range for "
                          "observers. reduce_range will be deprecated in a future release of "
                          "PyTorch.", stacklevel=2)
        self.reduce_range = reduce_range
        self.register_buffer("eps", ember.tensor([eps]))
        if not (_is_per_tensor(qscheme) or _is_per_channel(qscheme)):
            raise AssertionError("Default Observer only works for per_tensor_affine, "
                                 "per_tensor_symmetric, per_channel_affine, "
                                 "per_channel_symmetric and per_channel_float_qparams "
                                 f"quantization scheme, got {qscheme}")
        if dtype not in _QUANT_DTYPES:
            raise AssertionError(f"Default Observer only works for {_QUANT_DTYPES} data type, "
                                 f"got {dtype}")
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        if self.has_customized_qrange:
            if not quant_min <= 0 <= quant_max:  # type: ignore[operator]
                raise AssertionError("Used-specified quantization range must include 0.")
            if quant_min >= quant_max:  # type: ignore[operator]
                raise AssertionError("qmin must be strictly less than qmax for user-specified "
                                     "quantization range.")
        self.quant_min, self.quant_max = calculate_qmin_qmax(
            quant_min, quant_max, self.has_customized_qrange, dtype, reduce_range)

    def _calculate_qparams(self, min_val: Tensor, max_val: Tensor) -> tuple[Tensor, Tensor]:
        """Scale (float32) and zero point for running ``min_val``/``max_val`` (per tensor or
        per channel), as PyTorch's observers compute them."""
        if not _min_max_valid(min_val, max_val):
            return ember.tensor([1.0]), ember.tensor([0])
        qmin, qmax = self.quant_min, self.quant_max
        min_neg = ember.minimum(min_val, ember.zeros_like(min_val))
        max_pos = ember.maximum(max_val, ember.zeros_like(max_val))
        zero_point = ember.zeros(tuple(min_neg.shape), dtype=ember.int64)
        if _is_symmetric(self.qscheme):
            max_pos = ember.maximum(-min_neg, max_pos)
            scale = max_pos / (float(qmax - qmin) / 2)
            scale = ember.maximum(scale, self.eps)
            if self.dtype in (ember.quint8, ember.uint8):
                fill = (qmin + qmax) // 2 if self.has_customized_qrange else 128
                zero_point = ember.full(tuple(zero_point.shape), fill, dtype=ember.int64)
        elif self.qscheme is ember.per_channel_affine_float_qparams:
            scale = (max_val - min_val) / float(qmax - qmin)
            scale = ember.where(scale > self.eps, scale, ember.ones_like(scale))
            zero_point = -1 * min_val / scale
        else:
            scale = (max_pos - min_neg) / float(qmax - qmin)
            scale = ember.maximum(scale, self.eps)
            zero_point = qmin - ember.round(min_neg / scale).to(ember.int32)
            zero_point = ember.clamp(zero_point, qmin, qmax)
        if scale.dim() == 0:
            scale = scale.reshape(1)
        if zero_point.dim() == 0:
            zero_point = zero_point.reshape(1)
        return scale, zero_point

    def reset_min_max_vals(self) -> None:
        raise NotImplementedError("Cannot reset min/max values in the given observer.")


class MinMaxObserver(UniformQuantizationObserverBase):
    """Quantization parameters from the running minimum and maximum of what it has seen
    (per tensor: ``per_tensor_affine`` or ``per_tensor_symmetric``).

    >>> import ember
    >>> obs = MinMaxObserver(dtype=ember.qint8, qscheme=ember.per_tensor_symmetric)
    >>> _ = obs(ember.tensor([-1.0, 2.0]))
    >>> [round(v, 6) for v in obs.calculate_qparams()[0].tolist()]
    [0.015686]
    """

    def __init__(self, dtype: Any = ember.quint8, qscheme: Any = ember.per_tensor_affine,
                 reduce_range: bool = False, quant_min: int | None = None,
                 quant_max: int | None = None, factory_kwargs: Any = None, eps: float = _EPS,
                 is_dynamic: bool = False, **kwargs: Any) -> None:
        if not _is_per_tensor(qscheme):
            raise NotImplementedError("MinMaxObserver's qscheme only support "
                                      "ember.per_tensor_symmetric and ember.per_tensor_affine.")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps,
                         is_dynamic, **kwargs)
        self.register_buffer("min_val", ember.tensor(math.inf))
        self.register_buffer("max_val", ember.tensor(-math.inf))
        if qscheme is ember.per_tensor_symmetric and reduce_range and dtype is ember.quint8:
            raise NotImplementedError("Cannot reduce range for symmetric quantization for "
                                      "quint8")

    def forward(self, x_orig: Tensor) -> Tensor:
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(self.min_val.dtype)
        lo, hi = ember.aminmax(x)
        self.min_val.copy_(ember.minimum(lo, self.min_val))
        self.max_val.copy_(ember.maximum(hi, self.max_val))
        return x_orig

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val.item()}, max_val={self.max_val.item()}"

    def reset_min_max_vals(self) -> None:
        self.min_val.fill_(math.inf)
        self.max_val.fill_(-math.inf)


class MovingAverageMinMaxObserver(MinMaxObserver):
    """As :class:`MinMaxObserver`, with moving averages ``m += c * (min(x) - m)`` of the
    minimum and maximum (``c = averaging_constant``; the first batch sets them).

    >>> import ember
    >>> obs = MovingAverageMinMaxObserver(averaging_constant=0.5)
    >>> _ = obs(ember.tensor([0.0, 2.0])); _ = obs(ember.tensor([0.0, 4.0]))
    >>> obs.max_val.item()
    3.0
    """

    def __init__(self, averaging_constant: float = 0.01, dtype: Any = ember.quint8,
                 qscheme: Any = ember.per_tensor_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None, eps: float = _EPS,
                 is_dynamic: bool = False, **kwargs: Any) -> None:
        if not _is_per_tensor(qscheme):
            raise NotImplementedError("MovingAverageMinMaxObserver's qscheme only support "
                                      "ember.per_tensor_symmetric and ember.per_tensor_affine. "
                                      f"but got: {qscheme}")
        self.averaging_constant = averaging_constant
        if is_dynamic and averaging_constant != 1:
            raise NotImplementedError("MovingAverageMinMaxObserver doesn't support dynamic "
                                      f"quantization for averaging constant of "
                                      f"{averaging_constant}")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps,
                         is_dynamic=is_dynamic, **kwargs)

    def forward(self, x_orig: Tensor) -> Tensor:
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(self.min_val.dtype)
        lo, hi = ember.aminmax(x)
        if not (self.min_val.item() == math.inf and self.max_val.item() == -math.inf):
            lo = self.min_val + self.averaging_constant * (lo - self.min_val)
            hi = self.max_val + self.averaging_constant * (hi - self.max_val)
        self.min_val.copy_(lo)
        self.max_val.copy_(hi)
        return x_orig


class PerChannelMinMaxObserver(UniformQuantizationObserverBase):
    """Quantization parameters per channel (index along ``ch_axis``) from the running
    minimum and maximum of each channel.

    >>> import ember
    >>> obs = PerChannelMinMaxObserver(dtype=ember.qint8, qscheme=ember.per_channel_symmetric)
    >>> _ = obs(ember.tensor([[-1.0, 2.0], [3.0, 4.0]]))
    >>> obs.calculate_qparams()[1].tolist()
    [0, 0]
    """

    def __init__(self, ch_axis: int = 0, dtype: Any = ember.quint8,
                 qscheme: Any = ember.per_channel_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None,
                 factory_kwargs: Any = None, eps: float = _EPS, is_dynamic: bool = False,
                 **kwargs: Any) -> None:
        if not _is_per_channel(qscheme):
            raise NotImplementedError("PerChannelMinMaxObserver's qscheme only support "
                                      "ember.per_channel_symmetric, ember.per_channel_affine and "
                                      "ember.per_channel_affine_float_qparams.")
        if is_dynamic:
            raise NotImplementedError("PerChannelMinMaxObserver doesn't support dynamic "
                                      "quantization")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps,
                         is_dynamic, **kwargs)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", ember.tensor([]))
        self.register_buffer("max_val", ember.tensor([]))
        if qscheme is ember.per_channel_symmetric and reduce_range and dtype is ember.quint8:
            raise NotImplementedError("Cannot reduce range for symmetric quantization for "
                                      "quint8")

    def _channels(self, x: Tensor) -> tuple[Tensor, Tensor]:
        order = list(range(x.dim()))
        order[self.ch_axis], order[0] = 0, self.ch_axis
        y = x.permute(order).to(self.min_val.dtype).flatten(1)
        lo, hi = ember.aminmax(y, dim=1)
        return lo, hi

    def forward(self, x_orig: Tensor) -> Tensor:
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = self._channels(x_orig.detach())
        if self.min_val.numel() and self.max_val.numel():
            lo = ember.minimum(lo, self.min_val)
            hi = ember.maximum(hi, self.max_val)
        self.min_val = lo
        self.max_val = hi
        return x_orig

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any) -> None:
        for name in ("min_val", "max_val"):  # the per-channel statistics may change size
            if prefix + name in state_dict:
                setattr(self, name, ember.empty(tuple(state_dict[prefix + name].shape)))
        super()._load_from_state_dict(state_dict, prefix, *args)

    def reset_min_max_vals(self) -> None:
        self.min_val = ember.tensor([])
        self.max_val = ember.tensor([])


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """As :class:`PerChannelMinMaxObserver`, with moving averages of each channel's minimum
    and maximum.

    >>> import ember
    >>> obs = MovingAveragePerChannelMinMaxObserver(averaging_constant=0.5)
    >>> _ = obs(ember.tensor([[0.0, 2.0]])); _ = obs(ember.tensor([[0.0, 4.0]]))
    >>> obs.max_val.tolist()
    [3.0]
    """

    def __init__(self, averaging_constant: float = 0.01, ch_axis: int = 0,
                 dtype: Any = ember.quint8, qscheme: Any = ember.per_channel_affine,
                 reduce_range: bool = False, quant_min: int | None = None,
                 quant_max: int | None = None, eps: float = _EPS, is_dynamic: bool = False,
                 **kwargs: Any) -> None:
        if not _is_per_channel(qscheme):
            raise NotImplementedError("MovingAveragePerChannelMinMaxObserver's qscheme only "
                                      "support ember.per_channel_symmetric, "
                                      "ember.per_channel_affine and "
                                      "ember.per_channel_affine_float_qparams.")
        if is_dynamic:
            raise NotImplementedError("MovingAveragePerChannelMinMaxObserver doesn't support "
                                      "dynamic quantization")
        super().__init__(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme,
                         reduce_range=reduce_range, quant_min=quant_min, quant_max=quant_max,
                         eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.averaging_constant = averaging_constant

    def forward(self, x_orig: Tensor) -> Tensor:
        if x_orig.numel() == 0:
            return x_orig
        lo, hi = self._channels(x_orig.detach())
        if self.min_val.numel() and self.max_val.numel():
            lo = self.min_val + self.averaging_constant * (lo - self.min_val)
            hi = self.max_val + self.averaging_constant * (hi - self.max_val)
        self.min_val = lo
        self.max_val = hi
        return x_orig


class PlaceholderObserver(ObserverBase):
    """Records nothing; carries the dtype (and for dynamic quantization ``is_dynamic``) a
    later step quantizes to."""

    def __init__(self, dtype: Any = ember.float32, custom_op_name: str = "",
                 compute_dtype: Any = None, quant_min: int | None = None,
                 quant_max: int | None = None, qscheme: Any = None, eps: float | None = None,
                 is_dynamic: bool = False) -> None:
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        if qscheme is None:
            qscheme = ember.per_tensor_affine
        if eps is None:
            eps = _EPS
        self.quant_min = quant_min
        self.quant_max = quant_max
        self.qscheme = qscheme
        self.eps = eps
        self.custom_op = custom_op_name

    def forward(self, x: Any) -> Any:
        return x

    def extra_repr(self) -> str:
        return f"dtype={self.dtype}, is_dynamic={self.is_dynamic}"

    def calculate_qparams(self) -> Any:  # type: ignore[override]
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")  # noqa: TRY002


class NoopObserver(ObserverBase):
    """Observes nothing (for float16 and other dtypes that need no parameters)."""

    def __init__(self, dtype: Any = ember.float16, custom_op_name: str = "") -> None:
        super().__init__(dtype=dtype)
        self.custom_op = custom_op_name

    def forward(self, x: Any) -> Any:
        return x

    def calculate_qparams(self) -> Any:  # type: ignore[override]
        raise Exception("calculate_qparams should not be called for NoopObserver")  # noqa: TRY002


class FixedQParamsObserver(ObserverBase):
    """Fixed quantization parameters (for ops whose output range is known, e.g. sigmoid)."""

    def __init__(self, scale: float, zero_point: int, dtype: Any = ember.quint8,
                 qscheme: Any = ember.per_tensor_affine, quant_min: int = 0,
                 quant_max: int = 255, is_dynamic: bool = False, **kwargs: Any) -> None:
        if is_dynamic:
            raise NotImplementedError("FixedQParamsObserver doesn't support dynamic "
                                      "quantization")
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        self.quant_min = quant_min
        self.quant_max = quant_max
        self.register_buffer("scale", ember.tensor([scale]))
        self.register_buffer("zero_point", ember.tensor([zero_point], dtype=ember.int32))
        self.qscheme = qscheme

    def forward(self, x: Any) -> Any:
        return x

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        return self.scale, self.zero_point


from ember.ao.quantization._histogram import HistogramObserver  # noqa: E402

default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_placeholder_observer = PlaceholderObserver
default_weight_observer = MinMaxObserver.with_args(dtype=ember.qint8,
                                                   qscheme=ember.per_tensor_symmetric)
default_histogram_observer = HistogramObserver.with_args(quant_min=0, quant_max=127)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=ember.qint8, qscheme=ember.per_channel_symmetric)
default_dynamic_quant_observer = PlaceholderObserver.with_args(
    dtype=ember.quint8, quant_min=0, quant_max=255, is_dynamic=True)
default_float_qparams_observer = PerChannelMinMaxObserver.with_args(
    dtype=ember.quint8, qscheme=ember.per_channel_affine_float_qparams, ch_axis=0)
