"""Reference quantized modules (``ember.ao.nn.quantized.reference``): float modules that carry
their weight's quantization parameters and compute with the quantized-then-dequantized weight,
``F.linear(x, dequantize(quantize(weight)), bias)``: the quantized model's arithmetic written
in float ops (what ``convert(..., is_reference=True)`` and the FX reference flow produce).

>>> import ember
>>> from ember.ao.nn.quantized.reference import Linear
>>> lin = ember.nn.Linear(2, 1)
>>> lin.weight.data = ember.tensor([[0.26, -0.1]])
>>> ref = Linear.from_float(lin, {"qscheme": ember.per_tensor_affine, "dtype": ember.qint8,
...                                "scale": 0.1, "zero_point": 0})
>>> [round(v, 4) for v in ref.get_weight().flatten().tolist()]
[0.3, -0.1]
"""

from __future__ import annotations

from typing import Any

import ember
import ember.nn.functional as F
from ember import Tensor, nn

__all__ = ["Linear", "Conv1d", "Conv2d"]

_SYMMETRIC_TO_AFFINE = {"per_tensor_symmetric": "per_tensor_affine",
                        "per_channel_symmetric": "per_channel_affine"}


def get_qparam_dict(observer: Any) -> dict[str, Any]:
    """The weight_qparams dict of an observer (symmetric schemes are stored as affine, as
    PyTorch does: the zero point carries the symmetry)."""
    scheme = getattr(observer, "qscheme", None)
    if scheme is not None and scheme._name in _SYMMETRIC_TO_AFFINE:
        scheme = getattr(ember, _SYMMETRIC_TO_AFFINE[scheme._name])
    out: dict[str, Any] = {"qscheme": scheme, "dtype": observer.dtype}
    for name in ("quant_min", "quant_max"):
        if hasattr(observer, name):
            out[name] = getattr(observer, name)
    if scheme is None:
        return out
    scale, zero_point = observer.calculate_qparams()
    out["scale"], out["zero_point"] = scale, zero_point
    if getattr(observer, "ch_axis", None) is not None and scheme in (
            ember.per_channel_affine, ember.per_channel_affine_float_qparams):
        out["axis"] = observer.ch_axis
    return out


class _ReferenceWeight:
    """The weight quantization parameters (buffers ``weight_scale`` / ``weight_zero_point`` /
    ``weight_axis``, and ``weight_qscheme`` / ``weight_dtype`` in the state dict) and the
    quantize-dequantize of the float weight."""

    def _init_weight_qparams(self, weight_qparams: dict[str, Any] | None) -> None:
        if weight_qparams is None:
            weight_qparams = {"qscheme": ember.per_tensor_affine, "dtype": ember.quint8,
                              "scale": 1.0, "zero_point": 0}
        self.weight_qscheme = weight_qparams["qscheme"]
        self.weight_dtype = weight_qparams["dtype"]
        if self.weight_qscheme not in (None, ember.per_tensor_affine, ember.per_channel_affine,
                                       ember.per_channel_affine_float_qparams):
            raise AssertionError(f"qscheme: {self.weight_qscheme} is not support in reference "
                                 f"quantized {type(self).__name__}")
        if self.weight_qscheme is None:
            return
        zp_dtype = (ember.float32 if self.weight_qscheme is
                    ember.per_channel_affine_float_qparams else ember.int64)
        scale = weight_qparams["scale"]
        zero_point = weight_qparams["zero_point"]
        self.register_buffer("weight_scale", scale.detach().clone().float()
                             if isinstance(scale, Tensor) else ember.tensor(float(scale)))
        self.register_buffer("weight_zero_point", zero_point.detach().clone().to(zp_dtype)
                             if isinstance(zero_point, Tensor)
                             else ember.tensor(zero_point, dtype=zp_dtype))
        self.register_buffer("weight_axis",
                             ember.tensor(int(weight_qparams.get("axis", 0)),
                                          dtype=ember.int64))

    def get_quantized_weight(self) -> Any:
        """The weight as a quantized tensor."""
        w = self.weight.detach().float()
        if self.weight_qscheme is ember.per_tensor_affine:
            return ember.quantize_per_tensor(w, float(self.weight_scale.reshape(-1)[0]),
                                             int(self.weight_zero_point.reshape(-1)[0]),
                                             self.weight_dtype)
        return ember.quantize_per_channel(w, self.weight_scale.reshape(-1),
                                          self.weight_zero_point.reshape(-1),
                                          int(self.weight_axis), self.weight_dtype)

    def get_weight(self) -> Tensor:
        """The float weight after quantization and dequantization with its parameters."""
        if self.weight_qscheme is None:
            return self.weight
        return self.get_quantized_weight().dequantize()

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "weight_qscheme"] = self.weight_qscheme
        destination[prefix + "weight_dtype"] = self.weight_dtype

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: Any,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        for name in ("weight_qscheme", "weight_dtype"):
            if prefix + name in state_dict:
                setattr(self, name, state_dict.pop(prefix + name))
            elif strict:
                missing_keys.append(prefix + name)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class Linear(_ReferenceWeight, nn.Linear):
    """Reference quantized Linear: ``F.linear(x, get_weight(), bias)`` (float in, float out)."""

    def __init__(self, in_features: int, out_features: int, bias_: bool = True,
                 device: Any = None, dtype: Any = None,
                 weight_qparams: dict[str, Any] | None = None) -> None:
        nn.Linear.__init__(self, in_features, out_features, bias_, device=device, dtype=dtype)
        self._init_weight_qparams(weight_qparams)

    def _get_name(self) -> str:
        return "QuantizedLinear(Reference)"

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.get_weight(), self.bias)

    @classmethod
    def from_float(cls, float_linear: nn.Module, weight_qparams: dict[str, Any]) -> Linear:
        out = cls(float_linear.in_features, float_linear.out_features,
                  float_linear.bias is not None, weight_qparams=weight_qparams)
        out.weight = nn.Parameter(float_linear.weight.detach().clone())
        if float_linear.bias is not None:
            out.bias = nn.Parameter(float_linear.bias.detach().clone())
        return out


class _ConvRef(_ReferenceWeight):
    _FLOAT: Any = None

    def _conv_args(self) -> tuple:
        return (self.stride, self.padding, self.dilation, self.groups)

    def forward(self, x: Tensor) -> Tensor:
        if self.padding_mode != "zeros":
            raise NotImplementedError(f"reference quantized {type(self).__name__}: "
                                      "padding_mode='zeros' only")
        fn = F.conv1d if isinstance(self, nn.Conv1d) else F.conv2d
        return fn(x, self.get_weight(), self.bias, *self._conv_args())

    @classmethod
    def from_float(cls, float_conv: nn.Module, weight_qparams: dict[str, Any]) -> Any:
        out = cls(float_conv.in_channels, float_conv.out_channels, float_conv.kernel_size,
                  float_conv.stride, float_conv.padding, float_conv.dilation, float_conv.groups,
                  float_conv.bias is not None, float_conv.padding_mode,
                  weight_qparams=weight_qparams)
        out.weight = nn.Parameter(float_conv.weight.detach().clone())
        if float_conv.bias is not None:
            out.bias = nn.Parameter(float_conv.bias.detach().clone())
        return out


class Conv1d(_ConvRef, nn.Conv1d):
    """Reference quantized Conv1d (float conv with the quantize-dequantized weight)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None,
                 weight_qparams: dict[str, Any] | None = None) -> None:
        nn.Conv1d.__init__(self, in_channels, out_channels, kernel_size, stride, padding,
                           dilation, groups, bias, padding_mode)
        self._init_weight_qparams(weight_qparams)

    def _get_name(self) -> str:
        return "QuantizedConv1d(Reference)"


class Conv2d(_ConvRef, nn.Conv2d):
    """Reference quantized Conv2d (float conv with the quantize-dequantized weight)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None,
                 weight_qparams: dict[str, Any] | None = None) -> None:
        nn.Conv2d.__init__(self, in_channels, out_channels, kernel_size, stride, padding,
                           dilation, groups, bias, padding_mode)
        self._init_weight_qparams(weight_qparams)

    def _get_name(self) -> str:
        return "QuantizedConv2d(Reference)"
