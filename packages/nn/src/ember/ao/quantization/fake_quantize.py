"""Fake quantization modules for quantization-aware training: an observer chooses the
parameters, and the values go through quantize / dequantize in float with a straight-through
gradient (``ember.fake_quantize_per_tensor_affine`` / ``_per_channel_affine``).

>>> import ember
>>> from ember.ao.quantization import FakeQuantize
>>> fq = FakeQuantize()
>>> [round(v, 4) for v in fq(ember.tensor([0.0, 0.3, 2.55])).tolist()]
[0.0, 0.3, 2.55]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor, nn
from ember._quantized import _f32, choose_qparams
from ember.ao.quantization.observer import (
    FixedQParamsObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    _is_per_channel,
    _is_per_tensor,
    _is_symmetric,
    _with_args,
    _with_callable_args,
)

__all__ = [
    "FakeQuantizeBase", "FakeQuantize", "FusedMovingAvgObsFakeQuantize", "disable_fake_quant",
    "enable_fake_quant", "disable_observer", "enable_observer", "default_fake_quant",
    "default_weight_fake_quant", "default_per_channel_weight_fake_quant",
    "default_fused_act_fake_quant", "default_fused_wt_fake_quant",
    "default_fused_per_channel_wt_fake_quant", "default_histogram_fake_quant",
    "FixedQParamsFakeQuantize", "default_fixed_qparams_range_0to1_fake_quant",
    "default_fixed_qparams_range_neg1to1_fake_quant",
]


class FakeQuantizeBase(nn.Module):
    """Base of the fake quantize modules: the ``fake_quant_enabled`` / ``observer_enabled``
    switches (uint8 buffers, as PyTorch's)."""

    with_args = classmethod(_with_args)
    with_callable_args = classmethod(_with_callable_args)

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("fake_quant_enabled", ember.tensor([1], dtype=ember.uint8))
        self.register_buffer("observer_enabled", ember.tensor([1], dtype=ember.uint8))

    def enable_fake_quant(self, enabled: bool = True) -> None:
        self.fake_quant_enabled[0] = 1 if enabled else 0

    def disable_fake_quant(self) -> None:
        self.enable_fake_quant(False)

    def enable_observer(self, enabled: bool = True) -> None:
        self.observer_enabled[0] = 1 if enabled else 0

    def disable_observer(self) -> None:
        self.enable_observer(False)


class FakeQuantize(FakeQuantizeBase):
    """Observe (while ``observer_enabled``) and fake-quantize (while ``fake_quant_enabled``)
    with the observer's current scale and zero point.

    >>> import ember
    >>> fq = FakeQuantize(quant_min=0, quant_max=255)
    >>> x = ember.tensor([-1.0, 0.5, 1.0], requires_grad=True)
    >>> fq(x).sum().backward()
    >>> x.grad.tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, observer: Any = MovingAverageMinMaxObserver, quant_min: int | None = None,
                 quant_max: int | None = None, is_dynamic: bool = False,
                 **observer_kwargs: Any) -> None:
        super().__init__()
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:
                raise AssertionError("quant_min must be less than or equal to quant_max")
            observer_kwargs.update({"quant_min": quant_min, "quant_max": quant_max})
        observer_kwargs["is_dynamic"] = is_dynamic
        self.activation_post_process = observer(**observer_kwargs)
        app = self.activation_post_process
        self.quant_min = app.quant_min
        self.quant_max = app.quant_max
        self.is_dynamic = app.is_dynamic
        zp_dtype = (ember.float32 if app.qscheme is ember.per_channel_affine_float_qparams
                    else ember.int32)
        self.register_buffer("scale", ember.tensor([1.0]))
        self.register_buffer("zero_point", ember.tensor([0], dtype=zp_dtype))
        self.dtype = app.dtype
        self.qscheme = app.qscheme
        self.ch_axis = getattr(app, "ch_axis", -1)
        if not (_is_per_channel(self.qscheme) or _is_per_tensor(self.qscheme)):
            raise AssertionError("Only per channel and per tensor quantization are supported in "
                                 f"fake quantize got qscheme: {self.qscheme}")
        self.is_per_channel = _is_per_channel(self.qscheme)

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        return self.activation_post_process.calculate_qparams()

    def _set_qparams(self, scale: Tensor, zero_point: Tensor) -> None:
        if tuple(self.scale.shape) != tuple(scale.shape):
            self.scale = ember.empty(tuple(scale.shape))
            self.zero_point = ember.empty(tuple(zero_point.shape), dtype=self.zero_point.dtype)
        self.scale.copy_(scale)
        self.zero_point.copy_(zero_point)

    def forward(self, X: Tensor) -> Tensor:
        if int(self.observer_enabled[0]) == 1:
            self.activation_post_process(X.detach())
            self._set_qparams(*self.calculate_qparams())
        if int(self.fake_quant_enabled[0]) == 1:
            if self.is_per_channel:
                X = ember.fake_quantize_per_channel_affine(
                    X, self.scale, self.zero_point, self.ch_axis,
                    self.activation_post_process.quant_min,
                    self.activation_post_process.quant_max)
            else:
                X = ember.fake_quantize_per_tensor_affine(
                    X, self.scale, self.zero_point, self.activation_post_process.quant_min,
                    self.activation_post_process.quant_max)
        return X

    def extra_repr(self) -> str:
        return (f"fake_quant_enabled={self.fake_quant_enabled}, "
                f"observer_enabled={self.observer_enabled}, quant_min="
                f"{self.activation_post_process.quant_min}, quant_max="
                f"{self.activation_post_process.quant_max}, dtype={self.dtype}, "
                f"qscheme={self.qscheme}, ch_axis={self.ch_axis}, scale={self.scale}, "
                f"zero_point={self.zero_point}")

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = self.scale
        destination[prefix + "zero_point"] = self.zero_point

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any) -> None:
        for name in ("scale", "zero_point"):  # per-channel parameters may change size
            if prefix + name in state_dict:
                dtype = getattr(self, name).dtype
                setattr(self, name, ember.empty(tuple(state_dict[prefix + name].shape),
                                                dtype=dtype))
        super()._load_from_state_dict(state_dict, prefix, *args)


def _choose_qparams_fused(lo: float, hi: float, qmin: int, qmax: int,
                          preserve_sparsity: bool) -> tuple[float, int]:
    """The scale (float32) and zero point of PyTorch's fused observer + fake quantize op."""
    scale, zp = choose_qparams(lo, hi, qmin, qmax, False, preserve_sparsity)
    return _f32(scale), zp


class FusedMovingAvgObsFakeQuantize(FakeQuantize):
    """:class:`FakeQuantize` with a moving-average min/max observer, observing and
    fake-quantizing in one step as PyTorch's ``fused_moving_avg_obs_fake_quant`` op does
    (its parameters come from the C++ ``ChooseQuantizationParams``, not the observer's
    ``calculate_qparams``); the QAT default of ``get_default_qat_qconfig``.

    >>> import ember
    >>> fq = FusedMovingAvgObsFakeQuantize(quant_min=0, quant_max=255)
    >>> fq(ember.tensor([0.0, 2.55])).tolist()
    [0.0, 2.549999952316284]
    """

    def __init__(self, observer: Any = MovingAverageMinMaxObserver, quant_min: int = 0,
                 quant_max: int = 255, **observer_kwargs: Any) -> None:
        super().__init__(observer, quant_min, quant_max, **observer_kwargs)
        if not isinstance(self.activation_post_process,
                          (MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver)):
            raise AssertionError("Fused observer+fake_quant module only works with "
                                 "MovingAverageMinMaxObserver")
        self.is_symmetric_quant = _is_symmetric(self.activation_post_process.qscheme)

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        return self.activation_post_process.calculate_qparams()

    def forward(self, X: Tensor) -> Tensor:
        app = self.activation_post_process
        qmin, qmax = app.quant_min, app.quant_max
        if int(self.observer_enabled[0]) == 1:
            app(X.detach())
            if self.is_per_channel:
                pairs = [_choose_qparams_fused(lo, hi, qmin, qmax, self.is_symmetric_quant)
                         for lo, hi in zip(app.min_val.tolist(), app.max_val.tolist())]
                scale = ember.tensor([p[0] for p in pairs])
                zp = ember.tensor([p[1] for p in pairs], dtype=ember.int32)
            else:
                s, z = _choose_qparams_fused(app.min_val.item(), app.max_val.item(), qmin, qmax,
                                             self.is_symmetric_quant)
                scale, zp = ember.tensor([s]), ember.tensor([z], dtype=ember.int32)
            self._set_qparams(scale, zp)
        if int(self.fake_quant_enabled[0]) == 1:
            if self.is_per_channel:
                return ember.fake_quantize_per_channel_affine(X, self.scale, self.zero_point,
                                                              self.ch_axis, qmin, qmax)
            return ember.fake_quantize_per_tensor_affine(X, self.scale, self.zero_point, qmin,
                                                         qmax)
        return X

    def extra_repr(self) -> str:
        return (f"fake_quant_enabled={self.fake_quant_enabled}, "
                f"observer_enabled={self.observer_enabled}, scale={self.scale}, "
                f"zero_point={self.zero_point}, dtype={self.dtype}, "
                f"quant_min={self.activation_post_process.quant_min}, "
                f"quant_max={self.activation_post_process.quant_max}, qscheme={self.qscheme}, "
                f"reduce_range={self.activation_post_process.reduce_range}")


class FixedQParamsFakeQuantize(FakeQuantize):
    """Fake quantization with fixed parameters (those of a :class:`FixedQParamsObserver`), for
    bounded outputs: sigmoid / hardsigmoid / softmax in [0, 1) (scale 1/256, zero point 0) and
    tanh in [-1, 1) (scale 2/256, zero point 128), as their quantized kernels output.

    >>> import ember
    >>> fq = default_fixed_qparams_range_0to1_fake_quant()
    >>> fq(ember.tensor([0.5, 0.999, 1.5])).tolist()
    [0.5, 0.99609375, 0.99609375]
    """

    def __init__(self, observer: Any) -> None:
        super().__init__(observer=observer)
        if type(self.activation_post_process) is not FixedQParamsObserver:
            raise AssertionError(f"{type(self).__name__}'s observer must be a "
                                 "FixedQParamsObserver")
        self.scale = self.activation_post_process.scale
        self.zero_point = self.activation_post_process.zero_point

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        return self.scale, self.zero_point

    def extra_repr(self) -> str:
        return (f"fake_quant_enabled={self.fake_quant_enabled}, "
                f"observer_enabled={self.observer_enabled}, scale={self.scale}, "
                f"zero_point={self.zero_point}, dtype={self.dtype}, "
                f"quant_min={self.activation_post_process.quant_min}, "
                f"quant_max={self.activation_post_process.quant_max}, qscheme={self.qscheme}")


def _fq_modules(mod: nn.Module) -> bool:
    return isinstance(mod, FakeQuantizeBase)


def disable_fake_quant(mod: nn.Module) -> None:
    """Turn fake quantization off in ``mod`` if it is a fake quantize module (for
    ``model.apply(disable_fake_quant)``)."""
    if _fq_modules(mod):
        mod.disable_fake_quant()


def enable_fake_quant(mod: nn.Module) -> None:
    """Turn fake quantization on in ``mod`` if it is a fake quantize module."""
    if _fq_modules(mod):
        mod.enable_fake_quant()


def disable_observer(mod: nn.Module) -> None:
    """Freeze the quantization parameters of ``mod`` if it is a fake quantize module."""
    if _fq_modules(mod):
        mod.disable_observer()


def enable_observer(mod: nn.Module) -> None:
    """Let ``mod`` (a fake quantize module) update its quantization parameters again."""
    if _fq_modules(mod):
        mod.enable_observer()


from ember.ao.quantization._histogram import HistogramObserver  # noqa: E402

default_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=ember.quint8,
    qscheme=ember.per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=ember.qint8,
    qscheme=ember.per_tensor_symmetric, reduce_range=False)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127,
    dtype=ember.qint8, qscheme=ember.per_channel_symmetric, reduce_range=False, ch_axis=0)
default_histogram_fake_quant = FakeQuantize.with_args(
    observer=HistogramObserver, quant_min=0, quant_max=255, dtype=ember.quint8,
    qscheme=ember.per_tensor_affine, reduce_range=True)
default_fused_act_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=ember.quint8)
default_fused_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=ember.qint8,
    qscheme=ember.per_tensor_symmetric)
default_fused_per_channel_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127,
    dtype=ember.qint8, qscheme=ember.per_channel_symmetric)
default_fixed_qparams_range_0to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=FixedQParamsObserver.with_args(scale=1.0 / 256.0, zero_point=0, dtype=ember.quint8,
                                            quant_min=0, quant_max=255))
default_fixed_qparams_range_neg1to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=FixedQParamsObserver.with_args(scale=2.0 / 256.0, zero_point=128,
                                            dtype=ember.quint8, quant_min=0, quant_max=255))
