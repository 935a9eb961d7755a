"""Weight-only quantized embeddings (``ember.ao.nn.quantized.Embedding`` / ``EmbeddingBag``):
each row of the table is quantized on its own (quint8, or quint4x2 for 4 bits) with a float scale
and a float zero point (``per_channel_affine_float_qparams``, what
``float_qparams_weight_only_qconfig`` observes); the output is float. The arithmetic is fbgemm's
row-wise kernels': a row's value is ``fma(scale, q, bias)`` with ``bias = -zero_point * scale``
(float32 for 8 bits, both rounded to float16 for 4 bits), and a bag accumulates
``acc = fma(w * scale, q, acc + w * bias)`` in index order (``w``: the per-sample weight, or 1).

>>> import ember
>>> from ember.ao.nn.quantized import Embedding
>>> e = Embedding(3, 2)
>>> e.set_weight(ember.quantize_per_channel(ember.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]),
...     ember.tensor([0.5, 0.5, 0.5]), ember.tensor([0.0, 0.0, 0.0]), 0, ember.quint8))
>>> e(ember.tensor([2, 0])).tolist()
[[4.0, 5.0], [0.0, 1.0]]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor, nn
from ember._quantized import QuantizedTensor

__all__ = ["Embedding", "EmbeddingBag"]


def _check_weight(op: str, w: Any, num_embeddings: int, dim: int) -> QuantizedTensor:
    if not isinstance(w, QuantizedTensor) or w.dtype not in (ember.quint8, ember.quint4x2) \
            or w.qscheme() is not ember.per_channel_affine_float_qparams or w._axis != 0:
        raise RuntimeError(f"{op}.set_weight: expected a quint8 or quint4x2 weight quantized "
                           "per row (per_channel_affine_float_qparams, axis 0), got "
                           f"{getattr(w, 'dtype', type(w).__name__)}"
                           f"{' ' + str(w.qscheme()) if isinstance(w, QuantizedTensor) else ''}")
    if tuple(w.shape) != (num_embeddings, dim):
        raise RuntimeError(f"{op}.set_weight: expected a weight of shape ({num_embeddings}, "
                           f"{dim}), got {tuple(w.shape)}")
    return w


class _EmbeddingBase(nn.Module):
    """The quantized table, its state dict entries (PyTorch's ``_packed_params`` layout) and
    the row-wise dequantization terms."""

    _NAME = ""

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype: Any,
                 _weight: QuantizedTensor | None) -> None:
        super().__init__()
        if dtype not in (ember.quint8, ember.quint4x2):
            raise NotImplementedError(f"{self._NAME}: the quantized embedding's dtype must be "
                                      f"ember.quint8 or ember.quint4x2, got {dtype}")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.dtype = dtype
        if _weight is None:
            _weight = ember.quantize_per_channel(
                ember.zeros(num_embeddings, embedding_dim), ember.ones(num_embeddings),
                ember.zeros(num_embeddings), 0, dtype)
        self.set_weight(_weight)

    def set_weight(self, w: QuantizedTensor) -> None:
        self._qweight = _check_weight(self._NAME, w, self.num_embeddings, self.embedding_dim)
        self.dtype = w.dtype
        scale = w._scale.to(ember.float32)
        bias = -(w._zero_point.to(ember.float32) * scale)
        if w.dtype is ember.quint4x2:  # fbgemm's 4-bit rows keep half-precision terms
            scale = scale.to(ember.float16).to(ember.float32)
            bias = bias.to(ember.float16).to(ember.float32)
        self._row_terms = (scale.reshape(-1, 1), bias.reshape(-1, 1))

    def weight(self) -> QuantizedTensor:
        return self._qweight

    def _rows(self, op: str, indices: Tensor) -> Tensor:
        if not isinstance(indices, Tensor) or indices.dtype not in (ember.int64, ember.int32):
            raise ValueError(f"{op}: indices must be an int64 or int32 tensor, got "
                             f"{getattr(indices, 'dtype', type(indices).__name__)}")
        if indices.numel() and (int(indices.min()) < 0
                                or int(indices.max()) >= self.num_embeddings):
            raise IndexError(f"{op}: index out of range: indices must be in [0, "
                             f"{self.num_embeddings}), got values in [{int(indices.min())}, "
                             f"{int(indices.max())}]")
        return indices.to(ember.int64)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        metadata = getattr(destination, "_metadata", None)
        if metadata is not None:  # PyTorch's EmbeddingPackedParams child, version 1
            metadata[prefix + "_packed_params"] = {"version": 1}
        destination[prefix + "_packed_params.dtype"] = self.dtype
        destination[prefix + "_packed_params._packed_weight"] = self._qweight

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: Any,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        key = prefix + "_packed_params._packed_weight"
        state_dict.pop(prefix + "_packed_params.dtype", None)
        if key in state_dict:
            try:
                self.set_weight(state_dict.pop(key))
            except RuntimeError as exc:
                error_msgs.append(f"'{key}': {exc}")
        elif strict:
            missing_keys.append(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def extra_repr(self) -> str:
        return (f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}, "
                f"dtype={self.dtype}, qscheme={self._qweight.qscheme()}")

    @classmethod
    def _quantized_table(cls, mod: nn.Module) -> QuantizedTensor:
        """The float module's weight quantized per row by its qconfig's weight observer."""
        if not hasattr(mod, "qconfig") or mod.qconfig is None:
            raise AssertionError(f"{cls._NAME}.from_float: the float module must have a "
                                 "qconfig defined (float_qparams_weight_only_qconfig)")
        observer = mod.qconfig.weight()
        if observer.dtype not in (ember.quint8, ember.quint4x2):
            raise AssertionError(f"The only supported dtype for nnq.{cls._NAME} is "
                                 f"ember.quint8 and ember.quint4x2, got {observer.dtype}")
        if observer.qscheme is not ember.per_channel_affine_float_qparams:
            raise AssertionError(f"{cls._NAME}.from_float: the weight observer's qscheme must "
                                 "be per_channel_affine_float_qparams, got "
                                 f"{observer.qscheme}")
        observer(mod.weight)
        scales, zero_points = observer.calculate_qparams()
        return ember.quantize_per_channel(mod.weight.detach().float(), scales.float(),
                                          zero_points.float(), 0, observer.dtype)


class Embedding(_EmbeddingBase):
    """A quantized ``nn.Embedding``: float rows looked up from the quantized table."""

    _NAME = "Embedding"
    _version = 1

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: QuantizedTensor | None = None, dtype: Any = ember.quint8) -> None:
        super().__init__(num_embeddings, embedding_dim, dtype, _weight)
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse

    def _get_name(self) -> str:
        return "QuantizedEmbedding"

    def forward(self, indices: Tensor) -> Tensor:
        rows = self._rows("Embedding", indices)
        scale, bias = self._row_terms
        flat = rows.reshape(-1)
        q = self._qweight._data[flat].to(ember.float64)
        out = (q * scale[flat].to(ember.float64) + bias[flat].to(ember.float64))
        return out.to(ember.float32).reshape(*indices.shape, self.embedding_dim)

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Embedding:
        """The quantized embedding for a float ``nn.Embedding`` with a weight-only qconfig."""
        if type(mod) is not nn.Embedding:
            raise AssertionError(f"nnq.Embedding.from_float only works for nn.Embedding, got "
                                 f"{type(mod).__name__}")
        qweight = cls._quantized_table(mod)
        return cls(mod.num_embeddings, mod.embedding_dim, mod.padding_idx, _weight=qweight,
                   dtype=qweight.dtype)


class EmbeddingBag(_EmbeddingBase):
    """A quantized ``nn.EmbeddingBag`` (``mode="sum"``, optionally per-sample weighted):
    float sums of rows of the quantized table per bag."""

    _NAME = "EmbeddingBag"
    _version = 1

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "sum",
                 sparse: bool = False, _weight: QuantizedTensor | None = None,
                 include_last_offset: bool = False, dtype: Any = ember.quint8) -> None:
        # PyTorch's quantized kernel always sums (it takes mode="mean" / "max" and still
        # returns sums); ember refuses those modes instead of returning a wrong number
        if mode != "sum":
            raise NotImplementedError(f"quantized EmbeddingBag: only mode='sum' is supported, "
                                      f"got mode={mode!r}")
        super().__init__(num_embeddings, embedding_dim, dtype, _weight)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def _get_name(self) -> str:
        return "QuantizedEmbeddingBag"

    def forward(self, indices: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None,
                compressed_indices_mapping: Tensor | None = None) -> Tensor:
        op = "EmbeddingBag"
        if compressed_indices_mapping is not None:
            raise NotImplementedError(f"{op}: compressed_indices_mapping (pruned tables)")
        rows = self._rows(op, indices)
        if rows.dim() == 2:  # fixed-size bags, one per row of indices
            if offsets is not None:
                raise ValueError(f"{op}: offsets has to be None if input is 2D")
            n_bags, length = rows.shape
            starts = [i * length for i in range(n_bags)]
            ends = [s + length for s in starts]
            rows = rows.reshape(-1)
        elif rows.dim() == 1:
            if offsets is None:
                raise ValueError(f"{op}: offsets has to be a 1D Tensor but got None")
            offs = self._rows_offsets(op, offsets, rows.numel())
            starts = offs[:-1] if self.include_last_offset else offs
            ends = offs[1:] if self.include_last_offset else offs[1:] + [rows.numel()]
        else:
            raise ValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of "
                             f"dimension {rows.dim()}")
        if per_sample_weights is not None:
            if tuple(per_sample_weights.shape) != (rows.numel(),):
                raise ValueError(f"{op}: per_sample_weights of shape "
                                 f"{tuple(per_sample_weights.shape)} must be 1-D with one "
                                 f"weight per index ({rows.numel()})")
            weights = per_sample_weights.detach().to(ember.float32)
        n_bags = len(starts)
        scale, bias = self._row_terms
        acc = ember.zeros(n_bags, self.embedding_dim)
        longest = max((e - s for s, e in zip(starts, ends)), default=0)
        # step k adds the k-th index of every bag that has one: index order within each bag
        for k in range(longest):
            live = [b for b in range(n_bags) if starts[b] + k < ends[b]]
            pos = ember.tensor([starts[b] + k for b in live], dtype=ember.int64)
            bags = ember.tensor(live, dtype=ember.int64)
            r = rows[pos]
            s, c = scale[r], bias[r]
            if per_sample_weights is not None:
                w = weights[pos].reshape(-1, 1)
                s, c = s * w, c * w
            q = self._qweight._data[r].to(ember.float64)
            step = q * s.to(ember.float64) + (acc[bags] + c).to(ember.float64)
            acc[bags] = step.to(ember.float32)
        return acc

    @staticmethod
    def _rows_offsets(op: str, offsets: Tensor, n: int) -> list[int]:
        if not isinstance(offsets, Tensor) or offsets.dim() != 1 or \
                offsets.dtype not in (ember.int64, ember.int32):
            raise ValueError(f"{op}: offsets has to be a 1D int64 or int32 tensor, got "
                             f"{getattr(offsets, 'dtype', type(offsets).__name__)}")
        offs = [int(v) for v in offsets.tolist()]
        if offs and (offs[0] != 0 or any(b < a for a, b in zip(offs, offs[1:]))
                     or offs[-1] > n):
            raise ValueError(f"{op}: offsets must start at 0, never decrease and stay within "
                             f"the {n} indices, got {offs}")
        return offs

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False
                   ) -> EmbeddingBag:
        """The quantized bag for a float ``nn.EmbeddingBag`` with a weight-only qconfig."""
        if type(mod) is not nn.EmbeddingBag:
            raise AssertionError(f"nnq.EmbeddingBag.from_float only works for "
                                 f"nn.EmbeddingBag, got {type(mod).__name__}")
        qweight = cls._quantized_table(mod)
        return cls(mod.num_embeddings, mod.embedding_dim, mode=mod.mode, _weight=qweight,
                   include_last_offset=mod.include_last_offset, dtype=qweight.dtype)
