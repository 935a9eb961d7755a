"""``QConfig``: how a module's activations and weights are observed (or fake-quantized), and
PyTorch's default configurations for its x86 / fbgemm / qnnpack / onednn backends.

>>> from ember.ao.quantization import get_default_qconfig
>>> qc = get_default_qconfig("x86")
>>> type(qc.activation()).__name__, type(qc.weight()).__name__
('HistogramObserver', 'PerChannelMinMaxObserver')
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import ember
from ember import nn
from ember.ao.quantization.fake_quantize import (
    FakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    default_fake_quant,
    default_fused_per_channel_wt_fake_quant,
    default_fused_wt_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
)
from ember.ao.quantization.observer import (
    HistogramObserver,
    MovingAverageMinMaxObserver,
    NoopObserver,
    PlaceholderObserver,
    default_dynamic_quant_observer,
    default_float_qparams_observer,
    default_observer,
    default_per_channel_weight_observer,
    default_weight_observer,
)

__all__ = [
    "QConfig", "QConfigDynamic", "default_qconfig", "default_qat_qconfig",
    "default_dynamic_qconfig", "per_channel_dynamic_qconfig", "float16_dynamic_qconfig",
    "default_per_channel_qconfig", "get_default_qconfig", "get_default_qat_qconfig",
    "float_qparams_weight_only_qconfig",
]

_BACKENDS = ["fbgemm", "x86", "qnnpack", "onednn"]


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """The observer (or fake quantize) constructors for a module's output activation and its
    weight; ``activation()`` / ``weight()`` make new instances. Pass classes or
    ``.with_args(...)`` wrappers, not instances.

    >>> import ember
    >>> from ember.ao.quantization import QConfig, MinMaxObserver
    >>> qc = QConfig(activation=MinMaxObserver.with_args(dtype=ember.quint8),
    ...              weight=MinMaxObserver.with_args(dtype=ember.qint8,
    ...                                              qscheme=ember.per_tensor_symmetric))
    >>> qc.weight().dtype
    ember.qint8
    """

    __slots__ = ()

    def __new__(cls, activation: Any, weight: Any) -> QConfig:
        if isinstance(activation, nn.Module) or isinstance(weight, nn.Module):
            raise ValueError("QConfig received observer instance, please pass observer class "
                             "instead. Use MyObserver.with_args(x=1) to override arguments to "
                             "constructor if needed")
        return super().__new__(cls, activation, weight)


class QConfigDynamic(namedtuple("QConfigDynamic", ["activation", "weight"])):
    """The dynamic-quantization counterpart of :class:`QConfig` (deprecated in PyTorch: a
    ``QConfig`` serves both)."""

    __slots__ = ()

    def __new__(cls, activation: Any = nn.Identity, weight: Any = nn.Identity) -> QConfigDynamic:
        if isinstance(weight, nn.Module):
            raise ValueError("QConfigDynamic received observer instance, please pass observer "
                             "class instead. Use MyObserver.with_args(x=1) to override "
                             "arguments to constructor if needed")
        return super().__new__(cls, activation, weight)


default_qconfig = QConfig(activation=default_observer, weight=default_weight_observer)
default_per_channel_qconfig = QConfig(activation=default_observer,
                                      weight=default_per_channel_weight_observer)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                  weight=default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float16_dynamic_qconfig = QConfig(
    activation=PlaceholderObserver.with_args(dtype=ember.float16, is_dynamic=True),
    weight=PlaceholderObserver.with_args(dtype=ember.float16))
float_qparams_weight_only_qconfig = QConfig(
    activation=NoopObserver.with_args(dtype=ember.float32),
    weight=default_float_qparams_observer)
default_qat_qconfig = QConfig(activation=default_fake_quant, weight=default_weight_fake_quant)


def _check_backend(backend: str) -> None:
    if backend not in _BACKENDS:
        raise AssertionError(f"backend: {backend} not supported. backend must be one of "
                             f"{_BACKENDS}")


def get_default_qconfig(backend: str = "x86", version: int = 0) -> QConfig:
    """The default post-training (static) quantization QConfig of ``backend``: a histogram
    observer for activations (range halved for x86 / fbgemm) and symmetric int8 weights (per
    channel except for qnnpack).

    >>> from ember.ao.quantization import get_default_qconfig
    >>> get_default_qconfig("fbgemm").activation().quant_max
    127
    """
    _check_backend(backend)
    if version != 0:
        raise AssertionError(f"Version number: {version} in get_default_qconfig is not "
                             "supported. Version number must be 0")
    if backend in ("fbgemm", "x86"):
        return QConfig(activation=HistogramObserver.with_args(reduce_range=True),
                       weight=default_per_channel_weight_observer)
    if backend == "qnnpack":
        return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                       weight=default_weight_observer)
    return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                   weight=default_per_channel_weight_observer)


def get_default_qat_qconfig(backend: str = "x86", version: int = 1) -> QConfig:
    """The default quantization-aware-training QConfig of ``backend`` (version 1: the fused
    moving-average observer + fake quantize modules; version 0: separate ones).

    >>> from ember.ao.quantization import get_default_qat_qconfig
    >>> type(get_default_qat_qconfig("x86").activation()).__name__
    'FusedMovingAvgObsFakeQuantize'
    """
    _check_backend(backend)
    reduce = backend in ("fbgemm", "x86")
    if version == 0:
        kwargs: dict[str, Any] = {"observer": MovingAverageMinMaxObserver, "quant_min": 0,
                                  "quant_max": 255}
        if backend != "onednn":
            kwargs["reduce_range"] = reduce
        weight = (default_weight_fake_quant if backend == "qnnpack"
                  else default_per_channel_weight_fake_quant)
        return QConfig(activation=FakeQuantize.with_args(**kwargs), weight=weight)
    if version == 1:
        kwargs = {"observer": MovingAverageMinMaxObserver, "quant_min": 0, "quant_max": 255}
        if backend != "onednn":
            kwargs["reduce_range"] = reduce
        weight = (default_fused_wt_fake_quant if backend == "qnnpack"
                  else default_fused_per_channel_wt_fake_quant)
        return QConfig(activation=FusedMovingAvgObsFakeQuantize.with_args(**kwargs),
                       weight=weight)
    raise AssertionError(f"Version number: {version} in get_default_qat_qconfig is not "
                         "supported. Version number must be 0 or 1")


def _assert_valid_qconfig(qconfig: Any, mod: nn.Module) -> None:
    if qconfig is None:
        return
    if not isinstance(qconfig, (QConfig, QConfigDynamic)):
        raise TypeError(f"qconfig of {type(mod).__name__} must be a QConfig, got "
                        f"{type(qconfig).__name__}")

    if isinstance(mod, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        # fbgemm's transposed convolutions take per-tensor weights only
        from ember.ao.quantization.observer import _is_per_channel

        weight = qconfig.weight()
        if _is_per_channel(getattr(weight, "qscheme", None)):
            raise AssertionError("Per channel weight observer is not supported yet for "
                                 "ConvTranspose{n}d.")
