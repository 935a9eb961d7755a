"""Dynamically quantized modules (``ember.ao.nn.quantized.dynamic``): float in, float out,
int8 weights; each call quantizes its input with parameters chosen from that input's own range
(quint8, range halved as fbgemm does), accumulates in int32 and rescales to float
``x_scale * w_scale * acc + bias``.

>>> import ember
>>> from ember.ao.nn.quantized.dynamic import Linear
>>> m = Linear(2, 1)
>>> m.set_weight_bias(ember.quantize_per_tensor(ember.tensor([[1.0, -1.0]]), 0.5, 0,
...                                             ember.qint8), ember.tensor([0.5]))
>>> [round(v, 4) for v in m(ember.tensor([[3.0, 1.0]])).flatten().tolist()]  # 2.5 in float
[2.5079]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor, nn
from ember._quantized import _f32, choose_qparams
from ember.ao.nn import quantized as nnq

__all__ = ["Linear"]


class Linear(nnq.Linear):
    """A dynamically quantized Linear layer (what ``quantize_dynamic`` puts in place of an
    ``nn.Linear``)."""

    _FLOAT_MODULE: Any = nn.Linear

    def __init__(self, in_features: int, out_features: int, bias_: bool = True,
                 dtype: Any = ember.qint8) -> None:
        super().__init__(in_features, out_features, bias_, dtype)
        self.version = 4

    def _get_name(self) -> str:
        return "DynamicQuantizedLinear"

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype={self._qweight.dtype}, qscheme={self._qweight.qscheme()}")

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or not x.dtype.is_floating_point:
            raise RuntimeError(f"{self._get_name()}: expected a float input tensor, got "
                               f"{getattr(x, 'dtype', type(x).__name__)}")
        if x.shape[-1] != self.in_features:
            raise RuntimeError(f"{self._get_name()}: input of shape {tuple(x.shape)} does not "
                               f"have {self.in_features} features in its last dimension")
        xf = x.detach().to(ember.float32)
        lo = float(xf.min()) if xf.numel() else 0.0
        hi = float(xf.max()) if xf.numel() else 0.0
        scale, zp = choose_qparams(lo, hi, 0, 255, reduce_range=True)
        xq = ember.quantize_per_tensor(xf, _f32(scale), zp, ember.quint8)
        w, w_scale = nnq._weight_terms(self._qweight)
        lead = tuple(x.shape[:-1])
        xi = xq._data.to(ember.int32).reshape(-1, self.in_features) - zp
        acc = xi @ w.t()  # int32 accumulation
        out = acc.to(ember.float32) * (_f32(scale) * w_scale).reshape(1, -1)
        if self._bias is not None:
            out = out + self._bias
        return out.reshape(*lead, self.out_features).to(x.dtype)

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Linear:
        """The dynamic quantized layer for a float ``mod`` with a (dynamic) qconfig; its
        weight observer gives the int8 weight."""
        if not hasattr(mod, "qconfig") or mod.qconfig is None:
            raise AssertionError("Input float module must have qconfig defined")
        from ember.ao.nn import intrinsic as nni

        if isinstance(mod, nni.LinearReLU):
            raise NotImplementedError("dynamic quantization of a fused LinearReLU")
        weight_observer = mod.qconfig.weight()
        if weight_observer.dtype is not ember.qint8:
            raise NotImplementedError(f"dynamic quantized Linear supports qint8 weights, got "
                                      f"{weight_observer.dtype}")
        weight_observer(mod.weight)
        qweight = nnq._quantize_weight(mod.weight.detach().float(), weight_observer)
        out = cls(mod.in_features, mod.out_features)
        out.set_weight_bias(qweight, mod.bias)
        return out
