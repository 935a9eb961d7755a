"""Dynamically quantized modules (``ember.ao.nn.quantized.dynamic``: Linear, LSTM, GRU): float
in, float out, int8 weights; each matrix product quantizes its input with parameters chosen
from that input's own range (quint8, range halved as fbgemm does), accumulates in int32 and
rescales to float ``x_scale * w_scale * acc + bias``.

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
from ember.nn.modules.rnn import RNNBase, _gru_step, _lstm_step

__all__ = ["Linear", "LSTM", "GRU"]


def _dynamic_linear(x: Tensor, qweight: Any, bias: Tensor | None) -> Tensor:
    """``x @ W.T + bias`` (``x`` float32, 2-D) as fbgemm's dynamic linear computes it: ``x``
    quantized to quint8 with parameters from its own range (halved), int32 accumulation
    against the int8 weight, then ``x_scale * w_scale * acc + bias`` in float32."""
    lo = float(x.min()) if x.numel() else 0.0
    hi = float(x.max()) if x.numel() else 0.0
    scale, zp = choose_qparams(lo, hi, 0, 255, reduce_range=True)
    xq = ember.quantize_per_tensor(x, _f32(scale), zp, ember.quint8)
    w, w_scale = nnq._weight_terms(qweight)
    acc = (xq._data.to(ember.int32) - zp) @ w.t()  # int32 accumulation
    out = acc.to(ember.float32) * (_f32(scale) * w_scale).reshape(1, -1)
    return out if bias is None else out + bias


class Linear(nnq.Linear):
    """A dynamically quantized Linear layer (what ``quantize_dynamic`` puts in place of an
    ``nn.Linear``)."""

    _FLOAT_MODULE: Any = nn.Linear
    _version = 4  # PyTorch's

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
        lead = tuple(x.shape[:-1])
        out = _dynamic_linear(x.detach().to(ember.float32).reshape(-1, self.in_features),
                              self._qweight, self._bias)
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


class _RNNBase(nn.Module):
    """Common parts of the dynamic quantized LSTM / GRU: per layer and direction, int8
    ``weight_ih`` / ``weight_hh`` and float biases. The input projection of a layer runs over
    the whole sequence at once (one dynamic quantization of it), the hidden projection once per
    step, as PyTorch's kernels do."""

    _MODE = ""
    _GATES = 0

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, dtype: Any = ember.qint8) -> None:
        super().__init__()
        self.mode = self._MODE
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.dtype = dtype
        self._params: list[tuple[Any, Any, Tensor | None, Tensor | None]] = []

    def _get_name(self) -> str:
        return f"DynamicQuantized{self._MODE}"

    proj_size = 0  # (no projections; read by the float RNN's extra_repr shared below)
    extra_repr = RNNBase.extra_repr

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> _RNNBase:
        """The dynamic quantized RNN for a float ``mod`` with a qconfig (weights quantized by
        its weight observer, one per matrix)."""
        if type(mod).__name__ != cls._MODE or not hasattr(mod, "qconfig") or \
                mod.qconfig is None:
            raise AssertionError(f"{cls.__name__}.from_float expects an nn.{cls._MODE} with a "
                                 "qconfig")
        if getattr(mod, "proj_size", 0):
            raise NotImplementedError(f"dynamic quantized {cls._MODE} with proj_size")
        out = cls(mod.input_size, mod.hidden_size, mod.num_layers, mod.bias, mod.batch_first,
                  mod.dropout, mod.bidirectional)

        def quantize(w: Tensor) -> Any:
            observer = mod.qconfig.weight()
            if observer.dtype is not ember.qint8:
                raise NotImplementedError(f"dynamic quantized {cls._MODE} supports qint8 "
                                          f"weights, got {observer.dtype}")
            observer(w)
            return nnq._quantize_weight(w.detach().float(), observer)

        for layer in range(mod.num_layers):
            for suffix in ("", "_reverse")[:2 if mod.bidirectional else 1]:
                name = f"l{layer}{suffix}"
                w_ih = quantize(getattr(mod, f"weight_ih_{name}"))
                w_hh = quantize(getattr(mod, f"weight_hh_{name}"))
                b_ih = getattr(mod, f"bias_ih_{name}", None) if mod.bias else None
                b_hh = getattr(mod, f"bias_hh_{name}", None) if mod.bias else None
                out._params.append((w_ih, w_hh,
                                    None if b_ih is None else b_ih.detach().float(),
                                    None if b_hh is None else b_hh.detach().float()))
        return out

    def _cell(self, gi: Tensor, h: Tensor, c: Any, w_hh: Any, b_hh: Any) -> tuple[Any, Any]:
        raise NotImplementedError  # pragma: no cover

    def _names(self) -> list[str]:
        dirs = ("", "_reverse")[:2 if self.bidirectional else 1]
        return [f"l{layer}{suffix}" for layer in range(self.num_layers) for suffix in dirs]

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for name, (w_ih, w_hh, b_ih, b_hh) in zip(self._names(), self._params):
            destination[f"{prefix}weight_ih_{name}"] = w_ih
            destination[f"{prefix}weight_hh_{name}"] = w_hh
            if b_ih is not None:
                destination[f"{prefix}bias_ih_{name}"] = b_ih
                destination[f"{prefix}bias_hh_{name}"] = b_hh

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: Any,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        params = []
        for i, name in enumerate(self._names()):
            row = []
            for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                key = f"{prefix}{kind}_{name}"
                if key in state_dict:
                    row.append(state_dict.pop(key))
                else:
                    if strict and (kind.startswith("weight") or self.bias):
                        missing_keys.append(key)
                    row.append(self._params[i][len(row)] if i < len(self._params) else None)
            params.append(tuple(row))
        self._params = params
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Any]:
        if not isinstance(input, Tensor):
            raise NotImplementedError(f"{self._get_name()}: packed sequences are not supported; "
                                      "pass a padded tensor")
        if input.dim() != 3:  # (PyTorch's dynamic RNNs take no unbatched input either)
            raise RuntimeError(f"input must have 3 dimensions, got {input.dim()}")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        x = input.detach().to(ember.float32)
        x = x.transpose(0, 1) if self.batch_first else x
        steps, batch = x.shape[0], x.shape[1]
        dirs = 2 if self.bidirectional else 1
        lstm = self._MODE == "LSTM"
        if hx is None:
            zeros = ember.zeros(self.num_layers * dirs, batch, self.hidden_size)
            h0, c0 = zeros, (zeros if lstm else None)
        else:
            h0, c0 = (hx if lstm else (hx, None))
            want = (self.num_layers * dirs, batch, self.hidden_size)
            for t in (h0, c0) if lstm else (h0,):
                if tuple(t.shape) != want:
                    raise RuntimeError(f"Expected hidden size {want}, got {tuple(t.shape)}")
        h_n, c_n = [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh = self._params[layer * dirs + d]
                gi = _dynamic_linear(layer_in.reshape(steps * batch, -1), w_ih, b_ih)
                gi = gi.reshape(steps, batch, -1)
                h = h0[layer * dirs + d].to(ember.float32)
                c = c0[layer * dirs + d].to(ember.float32) if lstm else None
                seq = [ember.zeros(batch, self.hidden_size)] * steps
                order = range(steps - 1, -1, -1) if d == 1 else range(steps)
                for t in order:
                    h, c = self._cell(gi[t], h, c, w_hh, b_hh)
                    seq[t] = h
                outs.append(ember.stack(seq))
                h_n.append(h)
                if lstm:
                    c_n.append(c)
            layer_in = outs[0] if dirs == 1 else ember.cat(outs, 2)
        out = layer_in.transpose(0, 1) if self.batch_first else layer_in
        hn = ember.stack(h_n)
        return out, ((hn, ember.stack(c_n)) if lstm else hn)


class LSTM(_RNNBase):
    """A dynamically quantized LSTM (what ``quantize_dynamic`` makes of an ``nn.LSTM`` child):
    int8 weights, float hidden state and gates."""

    _MODE = "LSTM"

    def _cell(self, gi: Tensor, h: Tensor, c: Any, w_hh: Any, b_hh: Any) -> tuple[Any, Any]:
        return _lstm_step(gi + _dynamic_linear(h, w_hh, b_hh), c)


class GRU(_RNNBase):
    """A dynamically quantized GRU: int8 weights, float hidden state and gates."""

    _MODE = "GRU"

    def _cell(self, gi: Tensor, h: Tensor, c: Any, w_hh: Any, b_hh: Any) -> tuple[Any, Any]:
        return _gru_step(gi, _dynamic_linear(h, w_hh, b_hh), h), None
