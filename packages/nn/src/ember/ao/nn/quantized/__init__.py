"""Quantized modules (``ember.ao.nn.quantized``), what ``convert`` turns observed float modules
into. They take and return quantized tensors (quint8 activations) and compute in integers as
PyTorch's fbgemm (x86) kernels do: int8 weights (per tensor or per output channel), int32
accumulation of ``(x - x_zero_point) * (w - w_zero_point)``, the float bias added as
``bias / (x_scale * w_scale)``, and the result requantized to the module's output ``scale``
and ``zero_point`` (rounding half to even, clamped to [0, 255]).

>>> import ember
>>> from ember.ao.nn.quantized import Linear
>>> m = Linear(2, 1)
>>> m.set_weight_bias(ember.quantize_per_tensor(ember.tensor([[1.0, -1.0]]), 0.5, 0,
...                                             ember.qint8), ember.tensor([0.5]))
>>> m.scale, m.zero_point = 0.25, 10
>>> x = ember.quantize_per_tensor(ember.tensor([[3.0, 1.0]]), 0.5, 0, ember.quint8)
>>> m(x).dequantize().tolist()
[[2.5]]
"""

from __future__ import annotations

from typing import Any

import ember
import ember.nn.functional as F
from ember import Tensor, nn
from ember._quantized import QuantizedTensor, _f32

__all__ = ["Quantize", "DeQuantize", "Linear", "Conv1d", "Conv2d", "ConvTranspose1d",
           "ConvTranspose2d", "ReLU", "ReLU6", "FloatFunctional", "QFunctional", "BatchNorm2d",
           "Hardswish", "LeakyReLU", "ELU", "Sigmoid", "Softmax", "LayerNorm", "Dropout",
           "Embedding", "EmbeddingBag", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
           "PReLU"]


def _check_quantized(op: str, x: Any) -> QuantizedTensor:
    if not isinstance(x, QuantizedTensor):
        raise RuntimeError(f"{op}: expected a quantized (quint8) input tensor, got "
                           f"{getattr(x, 'dtype', type(x).__name__)}; put a QuantStub before "
                           "it (or call ember.quantize_per_tensor)")
    if x.dtype is not ember.quint8 or x._per_channel():
        raise RuntimeError(f"{op}: expected a per-tensor quint8 input, got {x.dtype} "
                           f"({x.qscheme()})")
    return x


def _weight_terms(qweight: QuantizedTensor) -> tuple[Tensor, Tensor]:
    """The int32 weights minus their zero points, and the float32 weight scale per output
    channel."""
    w = qweight._data.to(ember.int32)
    n = w.shape[0]
    if qweight._per_channel():
        if qweight._axis != 0:
            raise RuntimeError("quantized weights must be per channel along axis 0")
        zp = qweight._zero_point.to(ember.int32).reshape([-1] + [1] * (w.dim() - 1))
        scale = qweight._scale.to(ember.float32)
    else:
        zp = ember.tensor(qweight._zero_point, dtype=ember.int32)
        scale = ember.full((n,), _f32(qweight._scale))
    return w - zp, scale


def _requantize(acc: Tensor, x_scale: float, w_scale: Tensor, bias: Tensor | None,
                out_scale: float, out_zero_point: int, relu: bool, channel_dim: int) -> Tensor:
    """fbgemm's output stage: int32 accumulators -> quint8 integers."""
    shape = [1] * acc.dim()
    shape[channel_dim] = -1
    ab_scale = (_f32(x_scale) * w_scale).reshape(shape)  # float32, per output channel
    raw = acc.to(ember.float32)
    if bias is not None:
        raw = raw + bias.detach().to(ember.float32).reshape(shape) / ab_scale
    multiplier = ab_scale / _f32(out_scale)
    q = ember.round(raw * multiplier) + out_zero_point
    return q.clamp(out_zero_point if relu else 0, 255).to(ember.uint8)


def _quantized_out(data: Tensor, scale: float, zero_point: int) -> QuantizedTensor:
    return QuantizedTensor(data, ember.quint8, ember.per_tensor_affine, float(scale),
                           int(zero_point))


class Quantize(nn.Module):
    """Quantizes its float input with a fixed ``scale`` / ``zero_point`` (what a QuantStub
    becomes).

    >>> import ember
    >>> Quantize(0.5, 1, ember.quint8)(ember.tensor([1.0])).int_repr().tolist()
    [3]
    """

    def __init__(self, scale: float, zero_point: int, dtype: Any, factory_kwargs: Any = None
                 ) -> None:
        super().__init__()
        self.register_buffer("scale", ember.tensor([float(scale)]))
        self.register_buffer("zero_point", ember.tensor([int(zero_point)], dtype=ember.int64))
        self.dtype = dtype

    def forward(self, X: Tensor) -> QuantizedTensor:
        return ember.quantize_per_tensor(X, self.scale.item(), int(self.zero_point.item()),
                                         self.dtype)

    @staticmethod
    def from_float(mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Quantize:
        app = mod.activation_post_process
        scale, zero_point = app.calculate_qparams()
        return Quantize(scale.float().item(), int(zero_point.item()), app.dtype)

    def extra_repr(self) -> str:
        return f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}"


class DeQuantize(nn.Module):
    """Dequantizes its quantized input to float (what a DeQuantStub becomes)."""

    def forward(self, Xq: Any) -> Tensor:
        return Xq.dequantize()

    @staticmethod
    def from_float(mod: nn.Module, use_precomputed_fake_quant: bool = False) -> DeQuantize:
        return DeQuantize()


class ReLU(nn.Module):
    """ReLU on a quantized tensor: ``max(q, zero_point)``, keeping its parameters."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: QuantizedTensor) -> QuantizedTensor:
        return ember.relu(input)

    @staticmethod
    def from_float(mod: nn.Module, use_precomputed_fake_quant: bool = False) -> ReLU:
        return ReLU(getattr(mod, "inplace", False))


class ReLU6(nn.Module):
    """ReLU6 on a quantized tensor: clamped to [zero_point, zero_point + 6 / scale]."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: QuantizedTensor) -> QuantizedTensor:
        x = _check_quantized("ReLU6", input)
        top = x._zero_point + round(6.0 / x._scale)
        data = x._data.to(ember.int32).clamp(x._zero_point, min(top, 255)).to(ember.uint8)
        return x._with(data)

    @staticmethod
    def from_float(mod: nn.Module, use_precomputed_fake_quant: bool = False) -> ReLU6:
        return ReLU6(getattr(mod, "inplace", False))


def _quantize_weight(float_wt: Tensor, observer: Any) -> QuantizedTensor:
    """The int8 weight for the observer's parameters (per tensor or per channel)."""
    scale, zero_point = observer.calculate_qparams()
    if observer.qscheme in (ember.per_tensor_symmetric, ember.per_tensor_affine):
        return ember.quantize_per_tensor(float_wt, float(scale.item()), int(zero_point.item()),
                                         ember.qint8)
    if observer.qscheme in (ember.per_channel_symmetric, ember.per_channel_affine):
        return ember.quantize_per_channel(float_wt, scale.to(ember.float64),
                                          zero_point.to(ember.int64), observer.ch_axis,
                                          ember.qint8)
    raise ValueError(f"Unsupported qscheme for a quantized weight: {observer.qscheme}")


class _WeightedQuantized(nn.Module):
    """Common parts of the quantized Linear / Conv2d: the int8 weight, the float bias, the
    output scale / zero point, and the state dict entries for them."""

    _RELU = False

    def _init_qparams(self) -> None:
        self.scale = 1.0
        self.zero_point = 0
        self._qweight: QuantizedTensor | None = None
        self._bias: Tensor | None = None

    def set_weight_bias(self, w: QuantizedTensor, b: Tensor | None) -> None:
        if not isinstance(w, QuantizedTensor) or w.dtype is not ember.qint8:
            raise RuntimeError(f"{type(self).__name__}.set_weight_bias: expected a qint8 "
                               f"quantized weight, got {getattr(w, 'dtype', type(w).__name__)}")
        self._qweight = w
        self._bias = None if b is None else b.detach().to(ember.float32)

    def weight(self) -> QuantizedTensor:
        return self._qweight

    def bias(self) -> Tensor | None:
        return self._bias

    @staticmethod
    def _observed_weight(mod: nn.Module, use_precomputed_fake_quant: bool
                         ) -> tuple[nn.Module, QuantizedTensor, Any]:
        """(the float layer, its qint8 weight, the output observer or None) of an observed
        float, fused or QAT module: the QAT module's weight fake quantize (a QAT ConvBn folds
        its batch norm's running statistics into the weight first), else its qconfig's
        weight observer."""
        from ember.ao.nn import intrinsic as nni
        from ember.ao.nn.intrinsic import qat as nniqat
        from ember.nn.utils.fusion import fuse_conv_bn_weights

        if hasattr(mod, "weight_fake_quant"):
            if isinstance(mod, nniqat._ConvBnNd):
                mod.weight, mod.bias = fuse_conv_bn_weights(
                    mod.weight, mod.bias, mod.bn.running_mean, mod.bn.running_var, mod.bn.eps,
                    mod.bn.weight, mod.bn.bias)
            weight_post_process = mod.weight_fake_quant
            app = mod.activation_post_process
        else:
            if not hasattr(mod, "qconfig") or mod.qconfig is None:
                raise AssertionError("Input float module must have qconfig defined")
            app = getattr(mod, "activation_post_process", None)
            if isinstance(mod, nni._FusedModule):
                mod = mod[0]
            weight_post_process = mod.qconfig.weight()
        if not use_precomputed_fake_quant:
            weight_post_process(mod.weight)
        if weight_post_process.dtype is not ember.qint8:
            raise AssertionError(f"Weight observer must have a dtype of qint8, got "
                                 f"{weight_post_process.dtype}")
        return mod, _quantize_weight(mod.weight.detach().float(), weight_post_process), app

    def _take(self, qweight: QuantizedTensor, bias: Tensor | None, app: Any) -> Any:
        """This module with ``qweight`` / ``bias`` and the observer's output parameters."""
        self.set_weight_bias(qweight, bias)
        if app is not None:
            scale, zero_point = app.calculate_qparams()
            self.scale, self.zero_point = float(scale.item()), int(zero_point.item())
        return self

    # PyTorch's state dict layout: a conv's "weight" / "bias" entries, or a Linear's packed
    # parameters ("_packed_params.dtype" and the (weight, bias) pair "_packed_params.
    # _packed_params"), so that checkpoints move between the two libraries
    _PACKED = False

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if not self._PACKED:
            destination[prefix + "weight"] = self._qweight
            destination[prefix + "bias"] = self._bias
        destination[prefix + "scale"] = ember.tensor(self.scale)
        destination[prefix + "zero_point"] = ember.tensor(self.zero_point)
        if self._PACKED:
            metadata = getattr(destination, "_metadata", None)
            if metadata is not None:  # PyTorch's packed-params child module, version 3
                metadata[prefix + "_packed_params"] = {"version": 3}
            destination[prefix + "_packed_params.dtype"] = self._qweight.dtype
            destination[prefix + "_packed_params._packed_params"] = (self._qweight, self._bias)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: Any,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        packed = prefix + "_packed_params._packed_params"
        if packed in state_dict:  # PyTorch's Linear layout (ember's before, too: both load)
            pair = state_dict.pop(packed)
            state_dict.pop(prefix + "_packed_params.dtype", None)
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                error_msgs.append(f"'{packed}': expected a (weight, bias) pair, got "
                                  f"{type(pair).__name__}")
            else:
                state_dict[prefix + "weight"], state_dict[prefix + "bias"] = pair
        for name in ("weight", "bias", "scale", "zero_point"):
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            val = state_dict.pop(key)
            if name == "weight":
                if self._qweight is not None and tuple(getattr(val, "shape", ())) != \
                        tuple(self._qweight.shape):
                    error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                      f"{tuple(getattr(val, 'shape', ()))} from checkpoint, "
                                      f"the shape in current model is "
                                      f"{tuple(self._qweight.shape)}.")
                    continue
                self.set_weight_bias(val, self._bias)
            elif name == "bias":
                # a plain tensor (PyTorch's checkpoints hold a Parameter, which assigned as
                # is would become a registered parameter of this module)
                self._bias = None if val is None else val.detach().to(ember.float32)
            elif name == "scale":
                self.scale = float(val)
            else:
                self.zero_point = int(val)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys,
                                      unexpected_keys, error_msgs)

    def _get_name(self) -> str:
        return "Quantized" + type(self).__name__

    def _qscheme_repr(self) -> str:
        return f"scale={self.scale}, zero_point={self.zero_point}, qscheme=" \
               f"{self._qweight.qscheme() if self._qweight is not None else None}"


class Linear(_WeightedQuantized):
    """A quantized Linear layer: quint8 input, qint8 weight, float bias, quint8 output with
    ``scale`` / ``zero_point``."""

    _FLOAT_MODULE: Any = nn.Linear
    _PACKED = True
    _version = 3  # PyTorch's: its loader reads the packed layout from version 2 on

    def __init__(self, in_features: int, out_features: int, bias_: bool = True,
                 dtype: Any = ember.qint8) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self._init_qparams()
        qw = ember.quantize_per_tensor(ember.zeros(out_features, in_features), 1.0, 0,
                                       ember.qint8)
        self.set_weight_bias(qw, ember.zeros(out_features) if bias_ else None)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                + self._qscheme_repr())

    def forward(self, x: QuantizedTensor) -> QuantizedTensor:
        x = _check_quantized(type(self).__name__, x)
        if x.shape[-1] != self.in_features:
            raise RuntimeError(f"{type(self).__name__}: input of shape {tuple(x.shape)} does not "
                               f"have {self.in_features} features in its last dimension")
        w, w_scale = _weight_terms(self._qweight)
        lead = tuple(x.shape[:-1])
        xi = x._data.to(ember.int32).reshape(-1, self.in_features) - x._zero_point
        acc = xi @ w.t()  # int32 accumulation
        out = _requantize(acc, x._scale, w_scale, self._bias, self.scale, self.zero_point,
                          self._RELU, 1)
        return _quantized_out(out.reshape(*lead, self.out_features), self.scale,
                              self.zero_point)

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Linear:
        """The quantized layer for an observed float (or QAT) Linear / LinearReLU."""
        mod, qweight, app = cls._observed_weight(mod, use_precomputed_fake_quant)
        if app is None:
            raise AssertionError("Input float module must have an activation_post_process "
                                 "(run prepare and calibrate first)")
        return cls(mod.in_features, mod.out_features)._take(qweight, mod.bias, app)


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)  # type: ignore[return-value]


def _conv_repr(m: Any, optional: tuple[str, ...]) -> str:
    """A quantized conv's repr as PyTorch prints it: the optional geometry only where it
    differs from its default (0 for paddings, 1 for dilation)."""
    s = (f"{m.in_channels}, {m.out_channels}, kernel_size={m.kernel_size}, "
         f"stride={m.stride}, scale={m.scale}, zero_point={m.zero_point}")
    for name in optional:
        value = getattr(m, name)
        if value != (1 if name == "dilation" else 0,) * len(m.kernel_size):
            s += f", {name}={value}"
    if m.groups != 1:
        s += f", groups={m.groups}"
    if m._bias is None:
        s += ", bias=False"
    return s


class Conv2d(_WeightedQuantized):
    """A quantized Conv2d (zeros padding): quint8 input, qint8 weight (per output channel or
    per tensor), float bias, quint8 output with ``scale`` / ``zero_point``."""

    _FLOAT_MODULE: Any = nn.Conv2d

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"{type(self).__name__}: only padding_mode='zeros' is "
                                      f"supported, got {padding_mode!r}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{type(self).__name__}: in_channels ({in_channels}) and "
                             f"out_channels ({out_channels}) must be divisible by groups "
                             f"({groups})")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = _pair(padding)
        self.dilation = _pair(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        self._init_qparams()
        qw = ember.quantize_per_tensor(
            ember.zeros(out_channels, in_channels // groups, *self.kernel_size), 1.0, 0,
            ember.qint8)
        self.set_weight_bias(qw, ember.zeros(out_channels) if bias else None)

    def extra_repr(self) -> str:
        return _conv_repr(self, ("padding", "dilation"))

    def _geometry(self) -> tuple[tuple[int, int], ...]:
        """(kernel_size, stride, padding, dilation) as 2-D pairs."""
        return self.kernel_size, self.stride, self.padding, self.dilation

    def forward(self, x: QuantizedTensor) -> QuantizedTensor:
        x = _check_quantized(type(self).__name__, x)
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}: expected an input of shape (N, "
                             f"{self.in_channels}, H, W), got {tuple(x.shape)}")
        return self._conv(x)

    def _conv(self, x: QuantizedTensor) -> QuantizedTensor:
        n, _, h, w_ = x.shape
        (kh, kw), stride, padding, dilation = self._geometry()
        w, w_scale = _weight_terms(self._qweight)
        w = w.reshape(self.out_channels, -1)
        # integers minus the zero point, exact in float32; zero padding then stands for the
        # real value 0, as the quantized kernel pads with the zero point
        xf = x._data.to(ember.float32) - x._zero_point
        cols = F.unfold(xf, (kh, kw), dilation=dilation, padding=padding,
                        stride=stride).to(ember.int32)  # (N, C*kh*kw, L)
        ho = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        wo = (w_ + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
        g = self.groups
        cin_g = self.in_channels // g
        cout_g = self.out_channels // g
        parts = []
        for i in range(g):
            wg = w[i * cout_g:(i + 1) * cout_g]
            cg = cols[:, i * cin_g * kh * kw:(i + 1) * cin_g * kh * kw]
            parts.append(wg @ cg)  # int32 accumulation: (N, cout_g, L)
        acc = parts[0] if g == 1 else ember.cat(parts, 1)
        out = _requantize(acc, x._scale, w_scale, self._bias, self.scale, self.zero_point,
                          self._RELU, 1)
        return _quantized_out(out.reshape(n, self.out_channels, ho, wo), self.scale,
                              self.zero_point)

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Conv2d:
        """The quantized layer for an observed float (or QAT) Conv2d and its fused forms;
        a QAT ConvBn folds its batch norm (running statistics) into the weight first."""
        mod, qweight, app = cls._observed_weight(mod, use_precomputed_fake_quant)
        out = cls(mod.in_channels, mod.out_channels, mod.kernel_size, mod.stride, mod.padding,
                  mod.dilation, mod.groups, mod.bias is not None, mod.padding_mode)
        return out._take(qweight, mod.bias, app)


class Conv1d(Conv2d):
    """A quantized Conv1d (zeros padding): the 2-D kernel over a height of one."""

    _FLOAT_MODULE: Any = nn.Conv1d

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        def single(v: Any) -> tuple[int]:
            return (v,) if isinstance(v, int) else tuple(v)  # type: ignore[return-value]

        super().__init__(in_channels, out_channels, (1, single(kernel_size)[0]), 1, 0, 1, groups,
                         bias, padding_mode)
        self.kernel_size = single(kernel_size)
        self.stride = single(stride)
        self.padding = single(padding)
        self.dilation = single(dilation)
        qw = ember.quantize_per_tensor(
            ember.zeros(out_channels, in_channels // groups, *self.kernel_size), 1.0, 0,
            ember.qint8)
        self.set_weight_bias(qw, self._bias)

    def _geometry(self) -> tuple[tuple[int, int], ...]:
        return ((1, self.kernel_size[0]), (1, self.stride[0]), (0, self.padding[0]),
                (1, self.dilation[0]))


    def forward(self, x: QuantizedTensor) -> QuantizedTensor:
        x = _check_quantized(type(self).__name__, x)
        if x.dim() != 3 or x.shape[1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}: expected an input of shape (N, "
                             f"{self.in_channels}, L), got {tuple(x.shape)}")
        out = self._conv(x.unsqueeze(2))
        return out.squeeze(2)


class _ConvTransposeNd(_WeightedQuantized):
    """A quantized transposed convolution (zeros padding): quint8 input, qint8 weight of
    shape (in, out / groups, *kernel) quantized per tensor (as PyTorch's fbgemm requires),
    float bias, quint8 output. The integers are accumulated exactly (a float64 transposed
    convolution of the zero-point-shifted integers) and requantized as the other convs."""

    _DIMS = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")

        def tup(v: Any) -> tuple[int, ...]:
            return (v,) * self._DIMS if isinstance(v, int) else tuple(v)

        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = tup(kernel_size), tup(stride), tup(padding)
        self.output_padding, self.dilation = tup(output_padding), tup(dilation)
        self.groups, self.padding_mode, self.transposed = groups, padding_mode, True
        self._init_qparams()
        qw = ember.quantize_per_tensor(
            ember.zeros(in_channels, out_channels // groups, *self.kernel_size), 1.0, 0,
            ember.qint8)
        self.set_weight_bias(qw, ember.zeros(out_channels) if bias else None)

    def set_weight_bias(self, w: QuantizedTensor, b: Tensor | None) -> None:
        if isinstance(w, QuantizedTensor) and w._per_channel():
            raise RuntimeError(f"{type(self).__name__}.set_weight_bias: the weight must be "
                               "quantized per tensor (per-channel weights are not supported "
                               "for transposed convolutions, as in PyTorch)")
        super().set_weight_bias(w, b)

    def extra_repr(self) -> str:
        return _conv_repr(self, ("padding", "dilation", "output_padding"))

    def forward(self, x: QuantizedTensor) -> QuantizedTensor:
        name = type(self).__name__
        x = _check_quantized(name, x)
        if x.dim() != self._DIMS + 2 or x.shape[1] != self.in_channels:
            raise ValueError(f"{name}: expected an input of shape (N, {self.in_channels}, "
                             f"{', '.join('LHW'[3 - self._DIMS:])}), got {tuple(x.shape)}")
        xi = x._data.to(ember.float64) - x._zero_point
        w = self._qweight
        wi = w._data.to(ember.float64) - w._zero_point
        conv = F.conv_transpose1d if self._DIMS == 1 else F.conv_transpose2d
        acc = conv(xi, wi, None, self.stride, self.padding, self.output_padding, self.groups,
                   self.dilation)  # exact: sums of integer products well inside float64
        w_scale = ember.full((self.out_channels,), _f32(w._scale))
        out = _requantize(acc, x._scale, w_scale, self._bias, self.scale, self.zero_point,
                          self._RELU, 1)
        return _quantized_out(out, self.scale, self.zero_point)

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False
                   ) -> _ConvTransposeNd:
        """The quantized layer for an observed float ConvTranspose (per-tensor weight
        observer)."""
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f" nnq.{cls.__name__}.from_float only works for "
                                 f"{cls._FLOAT_MODULE.__name__}")
        mod, qweight, app = cls._observed_weight(mod, use_precomputed_fake_quant)
        out = cls(mod.in_channels, mod.out_channels, mod.kernel_size, mod.stride, mod.padding,
                  mod.output_padding, mod.groups, mod.bias is not None, mod.dilation,
                  mod.padding_mode)
        return out._take(qweight, mod.bias, None if app is None or app.dtype is ember.float32
                         else app)


class ConvTranspose1d(_ConvTransposeNd):
    """A quantized ConvTranspose1d."""

    _FLOAT_MODULE: Any = nn.ConvTranspose1d
    _DIMS = 1


class ConvTranspose2d(_ConvTransposeNd):
    """A quantized ConvTranspose2d.

    >>> import ember
    >>> m = ConvTranspose2d(1, 1, 2)
    >>> m.set_weight_bias(ember.quantize_per_tensor(ember.ones(1, 1, 2, 2), 0.5, 0, ember.qint8),
    ...                   None)
    >>> m.scale = 0.5
    >>> x = ember.quantize_per_tensor(ember.ones(1, 1, 1, 1), 0.5, 0, ember.quint8)
    >>> m(x).dequantize().tolist()
    [[[[1.0, 1.0], [1.0, 1.0]]]]
    """

    _FLOAT_MODULE: Any = nn.ConvTranspose2d
    _DIMS = 2


# ---- element-wise and normalization modules: float math between dequantize and requantize ----
class _OutputQParamsState(nn.Module):
    """Saves the output ``scale`` / ``zero_point`` (plain numbers) in the state dict, as
    PyTorch's quantized modules do, and loads them back."""

    # shape of the saved entries: () as a fresh PyTorch module has them; a converted PyTorch
    # BatchNorm holds its observer's one-element tensors (from_float sets (1,))
    _qparams_shape: tuple[int, ...] = ()

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        shape = self._qparams_shape
        destination[prefix + "scale"] = ember.tensor(self.scale).reshape(shape)
        destination[prefix + "zero_point"] = ember.tensor(self.zero_point).reshape(shape)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: Any,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        for name, kind in (("scale", float), ("zero_point", int)):
            if prefix + name in state_dict:
                setattr(self, name, kind(state_dict.pop(prefix + name)))
            elif strict:
                missing_keys.append(prefix + name)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class _Requantized(_OutputQParamsState):
    """A module that computes on the dequantized input and quantizes the result to its own
    ``scale`` / ``zero_point`` (the observed output range), as PyTorch's quantized kernels of
    these ops do."""

    def __init__(self, scale: float = 1.0, zero_point: int = 0) -> None:
        super().__init__()
        self.scale = float(scale)
        self.zero_point = int(zero_point)

    def _float(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, input: QuantizedTensor) -> QuantizedTensor:
        x = _per_tensor(type(self).__name__, input)
        return ember.quantize_per_tensor(self._float(x.dequantize()), self.scale,
                                         self.zero_point, x.dtype)

    def extra_repr(self) -> str:
        return f"scale={self.scale}, zero_point={self.zero_point}"

    # the float module's attributes its quantized form takes after (scale, zero_point)
    _FLOAT_ARGS: tuple[str, ...] = ()

    def _get_name(self) -> str:
        return "Quantized" + type(self).__name__

    @staticmethod
    def _observed(mod: nn.Module) -> tuple[float, int]:
        scale, zero_point = mod.activation_post_process.calculate_qparams()
        return float(scale.item()), int(zero_point.item())

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Any:
        """The quantized module for an observed float one: its observer's output parameters
        and the float module's ``_FLOAT_ARGS``."""
        return cls(*cls._observed(mod), *(getattr(mod, name) for name in cls._FLOAT_ARGS))


class Hardswish(_Requantized):
    """Quantized Hardswish."""

    def _float(self, x: Tensor) -> Tensor:
        return F.hardswish(x)

    def extra_repr(self) -> str:
        return ""


class LeakyReLU(_Requantized):
    """Quantized LeakyReLU."""

    _FLOAT_ARGS = ("negative_slope", "inplace")

    def __init__(self, scale: float, zero_point: int, negative_slope: float = 1e-2,
                 inplace: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__(scale, zero_point)
        self.negative_slope = negative_slope
        self.inplace = inplace

    def _float(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(_Requantized):
    """Quantized ELU."""

    _FLOAT_ARGS = ("alpha",)

    def __init__(self, scale: float, zero_point: int, alpha: float = 1.0) -> None:
        super().__init__(scale, zero_point)
        self.alpha = alpha

    def _float(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Sigmoid(_Requantized):
    """Quantized Sigmoid with the given output parameters (PyTorch's ``nnq.Sigmoid``; eager
    ``convert`` leaves ``nn.Sigmoid`` float, as PyTorch's default mapping does)."""

    def __init__(self, output_scale: float, output_zero_point: int) -> None:
        super().__init__(output_scale, output_zero_point)

    @property
    def output_scale(self) -> float:
        return self.scale

    @property
    def output_zero_point(self) -> int:
        return self.zero_point

    def _float(self, x: Tensor) -> Tensor:
        return ember.sigmoid(x)

    def _get_name(self) -> str:
        return "Sigmoid"  # (PyTorch's prints as the float module)

    def extra_repr(self) -> str:
        return ""


class Softmax(_Requantized):
    """Quantized Softmax over ``dim`` with the output's ``scale`` / ``zero_point``."""

    def __init__(self, dim: int | None = None, scale: float = 1.0, zero_point: int = 0) -> None:
        super().__init__(scale, zero_point)
        self.dim = dim

    def _float(self, x: Tensor) -> Tensor:
        dim = self.dim if self.dim is not None else (0 if x.dim() in (0, 1, 3) else 1)
        return F.softmax(x, dim)


    def extra_repr(self) -> str:
        return f"dim={self.dim}"

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Softmax:
        return cls(mod.dim, *cls._observed(mod))


class LayerNorm(_Requantized):
    """Quantized LayerNorm: the float normalization of the dequantized input (its float
    ``weight`` / ``bias``), requantized to the output's ``scale`` / ``zero_point``."""

    def __init__(self, normalized_shape: Any, weight: Tensor | None, bias: Tensor | None,
                 scale: float, zero_point: int, eps: float = 1e-5,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None
                 ) -> None:
        super().__init__(scale, zero_point)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(int(n) for n in shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        # the given float weight / bias (None: none, as in PyTorch)
        self.weight = None if weight is None else nn.Parameter(
            weight.detach().float().clone(), requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(
            bias.detach().float().clone(), requires_grad=False)

    def _float(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine="
                f"{self.elementwise_affine}, bias={self.bias is not None}")

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> LayerNorm:
        scale, zero_point = cls._observed(mod)
        return cls(mod.normalized_shape, mod.weight, mod.bias, scale, zero_point, mod.eps,
                   mod.elementwise_affine)


class GroupNorm(_Requantized):
    """Quantized GroupNorm: the float group normalization of the dequantized input,
    requantized to the output's ``scale`` / ``zero_point``."""

    def __init__(self, num_groups: int, num_channels: int, weight: Tensor | None,
                 bias: Tensor | None, scale: float, zero_point: int, eps: float = 1e-5,
                 affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__(scale, zero_point)
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        self.weight, self.bias = _frozen(weight), _frozen(bias)

    def _float(self, x: Tensor) -> Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> GroupNorm:
        return cls(mod.num_groups, mod.num_channels, mod.weight, mod.bias, *cls._observed(mod),
                   mod.eps, mod.affine)


class _InstanceNorm(_Requantized):
    """Quantized InstanceNorm: per-sample, per-channel normalization in float, requantized."""

    def __init__(self, num_features: int, weight: Tensor | None, bias: Tensor | None,
                 scale: float, zero_point: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(scale, zero_point)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight, self.bias = _frozen(weight), _frozen(bias)

    def _float(self, x: Tensor) -> Tensor:
        return F.instance_norm(x, None, None, self.weight, self.bias, True, self.momentum,
                               self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Any:
        return cls(mod.num_features, mod.weight, mod.bias, *cls._observed(mod), mod.eps,
                   mod.momentum, mod.affine)


class InstanceNorm1d(_InstanceNorm):
    """Quantized InstanceNorm1d."""


class InstanceNorm2d(_InstanceNorm):
    """Quantized InstanceNorm2d."""


class PReLU(_Requantized):
    """Quantized PReLU: a quint8 slope per channel (or one), float arithmetic on the
    dequantized values, requantized to ``scale`` / ``zero_point``."""

    def __init__(self, output_scale: float, output_zero_point: int, num_parameters: int = 1
                 ) -> None:
        super().__init__(output_scale, output_zero_point)
        self.num_parameters = num_parameters
        self.set_weight(ember.quantize_per_tensor(ember.full((num_parameters,), 0.25), 1.0, 0,
                                                  ember.quint8))

    def set_weight(self, w: QuantizedTensor) -> None:
        if not isinstance(w, QuantizedTensor) or w.numel() != self.num_parameters:
            raise RuntimeError(f"PReLU.set_weight: expected a quantized weight of "
                               f"{self.num_parameters} values, got "
                               f"{getattr(w, 'shape', type(w).__name__)}")
        self.weight = w

    def _float(self, x: Tensor) -> Tensor:
        w = self.weight.dequantize()
        if w.numel() > 1 and x.dim() > 1:
            w = w.reshape([1, -1] + [1] * (x.dim() - 2))
        return ember.where(x >= 0, x, w * x)

    def extra_repr(self) -> str:
        return ""

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> PReLU:
        out = cls(*cls._observed(mod), mod.num_parameters)
        observer = mod.qconfig.weight()
        float_wt = mod.weight.detach().float()
        observer(float_wt)
        scale, zero_point = observer.calculate_qparams()
        out.set_weight(ember.quantize_per_tensor(float_wt, float(scale.reshape(-1)[0]),
                                                 int(zero_point.reshape(-1)[0]), ember.quint8))
        return out


def _frozen(t: Tensor | None) -> nn.Parameter | None:
    return None if t is None else nn.Parameter(t.detach().float().clone(), requires_grad=False)


class BatchNorm2d(_Requantized):
    """Quantized BatchNorm2d (inference: running statistics), optionally followed by ReLU in
    the fused ``ember.ao.nn.intrinsic.quantized.BNReLU2d``."""

    _RELU = False
    _version = 2  # (PyTorch's: its state dict has num_batches_tracked)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.weight = nn.Parameter(ember.ones(num_features), requires_grad=False)
        self.bias = nn.Parameter(ember.zeros(num_features), requires_grad=False)
        self.register_buffer("running_mean", ember.zeros(num_features))
        self.register_buffer("running_var", ember.ones(num_features))
        self.register_buffer("num_batches_tracked", ember.tensor(0, dtype=ember.int64))

    def _float(self, x: Tensor) -> Tensor:
        if x.dim() != 4 or x.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected an input of shape (N, "
                             f"{self.num_features}, H, W), got {tuple(x.shape)}")
        y = F.batch_norm(x, self.running_mean, self.running_var, self.weight.detach(),
                         self.bias.detach(), False, 0.0, self.eps)
        return F.relu(y) if self._RELU else y


    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine=True, "
                "bias=True, track_running_stats=True")

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False
                   ) -> BatchNorm2d:
        scale, zero_point = cls._observed(mod)
        from ember.ao.nn import intrinsic as nni

        if isinstance(mod, nni.BNReLU2d):
            mod = mod[0]
        out = cls(mod.num_features, mod.eps)
        out.weight = nn.Parameter(mod.weight.detach().clone(), requires_grad=False)
        out.bias = nn.Parameter(mod.bias.detach().clone(), requires_grad=False)
        out.running_mean = mod.running_mean.clone()
        out.running_var = mod.running_var.clone()
        out.scale, out.zero_point = scale, zero_point
        out._qparams_shape = (1,)
        return out


class Dropout(nn.Module):
    """Dropout of a quantized model: the identity (quantized inference has no dropout)."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        self.p = p
        self.inplace = inplace

    def forward(self, input: Any) -> Any:
        return input

    def _get_name(self) -> str:
        return "QuantizedDropout"

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Dropout:
        return cls(mod.p, mod.inplace)


# ---- functional modules (skip connections and other ops between tensors) -------------------
class FloatFunctional(nn.Module):
    """Tensor ops (``add``, ``cat``, ``mul``, ...) as a module, so that quantization can observe
    their output: ``prepare`` gives it an observer as ``activation_post_process`` and
    ``convert`` turns it into a :class:`QFunctional` with that output's parameters.

    >>> import ember
    >>> FloatFunctional().add(ember.tensor([1.0]), ember.tensor([2.0])).tolist()
    [3.0]
    """

    def __init__(self) -> None:
        super().__init__()
        self.activation_post_process = nn.Identity()

    def forward(self, x: Any) -> Any:
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please use "
                           "the underlying operation")

    def add(self, x: Tensor, y: Tensor) -> Tensor:
        return self.activation_post_process(ember.add(x, y))

    def add_scalar(self, x: Tensor, y: float) -> Tensor:
        return ember.add(x, y)  # not observed: the quantized op derives its parameters

    def mul(self, x: Tensor, y: Tensor) -> Tensor:
        return self.activation_post_process(ember.mul(x, y))

    def mul_scalar(self, x: Tensor, y: float) -> Tensor:
        return ember.mul(x, y)  # not observed: the quantized op derives its parameters

    def cat(self, x: list[Tensor], dim: int = 0) -> Tensor:
        return self.activation_post_process(ember.cat(x, dim=dim))

    def add_relu(self, x: Tensor, y: Tensor) -> Tensor:
        return self.activation_post_process(F.relu(ember.add(x, y)))

    def matmul(self, x: Tensor, y: Tensor) -> Tensor:
        return self.activation_post_process(ember.matmul(x, y))


def _per_tensor(op: str, x: Any) -> QuantizedTensor:
    if not isinstance(x, QuantizedTensor) or x._per_channel():
        raise RuntimeError(f"QFunctional.{op}: expected per-tensor quantized operands, got "
                           f"{getattr(x, 'dtype', type(x).__name__)}")
    return x


class QFunctional(_OutputQParamsState):
    """The quantized :class:`FloatFunctional`: each op works on the dequantized values and
    requantizes the result to ``scale`` / ``zero_point`` (``add_scalar`` / ``mul_scalar``
    derive their output parameters from the input, as PyTorch's quantized ops do).

    >>> import ember
    >>> qf = QFunctional()
    >>> qf.scale, qf.zero_point = 0.5, 0
    >>> a = ember.quantize_per_tensor(ember.tensor([1.0, 2.0]), 0.25, 0, ember.quint8)
    >>> qf.add(a, a).dequantize().tolist()
    [2.0, 4.0]
    """

    def __init__(self) -> None:
        super().__init__()
        self.scale = 1.0
        self.zero_point = 0
        self.activation_post_process = nn.Identity()

    def extra_repr(self) -> str:
        return f"scale={self.scale}, zero_point={self.zero_point}"

    def forward(self, x: Any) -> Any:
        raise RuntimeError("Functional is not intended to use the 'forward'. Please use the "
                           "underlying operation")

    def _out(self, values: Tensor, dtype: Any, relu: bool = False) -> QuantizedTensor:
        q = ember.quantize_per_tensor(values, self.scale, self.zero_point, dtype)
        return ember.relu(q) if relu else q

    def add(self, x: QuantizedTensor, y: QuantizedTensor) -> QuantizedTensor:
        a, b = _per_tensor("add", x), _per_tensor("add", y)
        return self._out(a.dequantize() + b.dequantize(), a.dtype)

    def add_relu(self, x: QuantizedTensor, y: QuantizedTensor) -> QuantizedTensor:
        a, b = _per_tensor("add_relu", x), _per_tensor("add_relu", y)
        return self._out(a.dequantize() + b.dequantize(), a.dtype, relu=True)

    def mul(self, x: QuantizedTensor, y: QuantizedTensor) -> QuantizedTensor:
        a, b = _per_tensor("mul", x), _per_tensor("mul", y)
        return self._out(a.dequantize() * b.dequantize(), a.dtype)

    def matmul(self, x: QuantizedTensor, y: QuantizedTensor) -> QuantizedTensor:
        a, b = _per_tensor("matmul", x), _per_tensor("matmul", y)
        return self._out(ember.matmul(a.dequantize(), b.dequantize()), a.dtype)

    def cat(self, x: list[QuantizedTensor], dim: int = 0) -> QuantizedTensor:
        parts = [_per_tensor("cat", t) for t in x]
        return self._out(ember.cat([t.dequantize() for t in parts], dim=dim), parts[0].dtype)

    def add_scalar(self, x: QuantizedTensor, y: float) -> QuantizedTensor:
        """``x + y`` by moving the zero point by ``round(y / scale)``; when that leaves the
        integer range, the scale widens to fit (and the values are requantized)."""
        a = _per_tensor("add_scalar", x)
        s, z = a._scale, a._zero_point
        qmin, qmax = a.dtype.qmin, a.dtype.qmax
        c_q = int(round(y / s))
        shifted = z - c_q
        if qmin <= shifted <= qmax:
            return QuantizedTensor(a._data.clone(), a.dtype, ember.per_tensor_affine, s, shifted)
        if shifted < qmin:
            s2, z2 = (qmax - shifted) / (qmax - qmin) * s, qmin
        else:
            s2, z2 = (shifted - qmin) / (qmax - qmin) * s, qmax
        return ember.quantize_per_tensor(a.dequantize() + _f32(c_q * s), s2, z2, a.dtype)

    def mul_scalar(self, x: QuantizedTensor, y: float) -> QuantizedTensor:
        """``x * y`` by scaling the scale (a negative ``y`` mirrors the integers)."""
        a = _per_tensor("mul_scalar", x)
        qmin, qmax = a.dtype.qmin, a.dtype.qmax
        if y == 0:
            return QuantizedTensor(ember.zeros_like(a._data), a.dtype, ember.per_tensor_affine,
                                   1.0, 0)
        if y > 0:
            return QuantizedTensor(a._data.clone(), a.dtype, ember.per_tensor_affine,
                                   a._scale * y, a._zero_point)
        mirrored = (qmax + qmin - a._data.to(ember.int64)).to(a._data.dtype)
        return QuantizedTensor(mirrored, a.dtype, ember.per_tensor_affine, a._scale * -y,
                               qmax + qmin - a._zero_point)

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False
                   ) -> QFunctional:
        if type(mod) is not FloatFunctional:
            raise AssertionError("QFunctional.from_float expects an instance of "
                                 "FloatFunctional")
        scale, zero_point = mod.activation_post_process.calculate_qparams()
        out = cls()
        out.scale = float(scale.item())
        out.zero_point = int(zero_point.item())
        return out


from ember.ao.nn.quantized import dynamic  # noqa: E402,F401
from ember.ao.nn.quantized.embedding_ops import Embedding, EmbeddingBag  # noqa: E402
