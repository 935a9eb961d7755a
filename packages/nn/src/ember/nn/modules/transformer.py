"""Transformer encoder/decoder layers and stacks, and the full ``nn.Transformer``.

>>> import ember
>>> layer = ember.nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32,
...                                          batch_first=True)
>>> enc = ember.nn.TransformerEncoder(layer, num_layers=2)
>>> enc(ember.randn(2, 7, 16)).shape
ember.Size([2, 7, 16])
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import ember
from ember import Tensor
from ember.nn import init
from ember.nn.modules.activation import GELU, ReLU
from ember.nn.modules.attention import MultiheadAttention, _fully_masked_rows
from ember.nn.modules.container import ModuleList
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = [
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
]

try:  # the shared layer modules, when present
    from ember.nn.modules.dropout import Dropout  # type: ignore[import-not-found]
    from ember.nn.modules.normalization import LayerNorm  # type: ignore[import-not-found]
except ImportError:

    class LayerNorm(Module):  # type: ignore[no-redef]
        """Layer normalization over the last ``normalized_shape`` dims (same state as nn.LayerNorm)."""

        def __init__(
            self,
            normalized_shape: int | tuple[int, ...],
            eps: float = 1e-5,
            elementwise_affine: bool = True,
            bias: bool = True,
            device: Any = None,
            dtype: Any = None,
        ) -> None:
            super().__init__()
            shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
            self.normalized_shape = shape
            self.eps = eps
            self.elementwise_affine = elementwise_affine
            kw = {"dtype": dtype, "device": device}
            if elementwise_affine:
                self.weight = Parameter(ember.ones(tuple(shape), **kw))
                self.bias = Parameter(ember.zeros(tuple(shape), **kw)) if bias else None
            else:
                self.weight = self.bias = None

        def forward(self, input: Tensor) -> Tensor:
            return ember.layer_norm(input, list(self.normalized_shape), self.weight, self.bias, self.eps)

        def extra_repr(self) -> str:
            return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"

    class Dropout(Module):  # type: ignore[no-redef]
        """Zeroes elements with probability p in training and scales the rest by 1/(1-p)."""

        def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
            super().__init__()
            self.p = p
            self.inplace = inplace

        def forward(self, input: Tensor) -> Tensor:
            return ember.dropout(input, self.p, self.training) if self.p > 0 else input

        def extra_repr(self) -> str:
            return f"p={self.p}, inplace={self.inplace}"


def _get_activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if callable(activation):
        return activation
    if activation == "relu":
        return ember.relu
    if activation == "gelu":
        return ember.gelu
    raise RuntimeError(f"activation should be 'relu' or 'gelu' or a callable, not {activation!r}")


def _functional() -> Any:
    from ember.nn import functional

    return functional


def _why_no_nested_tensor(layer: Any) -> str:
    """Why PyTorch's encoder would not use nested tensors with this layer ("" if it would)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return (f"{name}.self_attn.batch_first was not True(use batch_first for better inference "
                "performance)")
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not getattr(layer, "activation_relu_or_gelu", 0):
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


def _float_mask(mask: Tensor | None, dtype: Any) -> Tensor | None:
    """A boolean mask as an additive one of ``dtype`` (True -> -inf); others unchanged."""
    if mask is None or mask.dtype != ember.bool:
        return mask
    return ember.zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(
        mask, float("-inf"))


def _clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _causal_mask(sz: int, dtype: Any = None, device: Any = None) -> Tensor:
    mask = ember.full((sz, sz), float("-inf"), dtype=dtype or ember.float32, device=device)
    return ember.triu(mask, 1)


class _TransformerLayer(Module):
    """What the encoder and decoder layers share: self-attention and feed-forward sub-layers
    with their norms and dropouts; a decoder layer (``_cross``) adds attention over the memory,
    a third norm and a third dropout. Sub-modules are registered in PyTorch's order."""

    _cross = False

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        kw = {"dtype": dtype, "device": device}

        def attention() -> MultiheadAttention:
            return MultiheadAttention(
                d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
            )

        def norm() -> LayerNorm:
            return LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)

        self.self_attn = attention()
        if self._cross:
            self.multihead_attn = attention()
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = norm()
        self.norm2 = norm()
        if self._cross:
            self.norm3 = norm()
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if self._cross:
            self.dropout3 = Dropout(dropout)
        self.activation = _get_activation(activation)
        act = self.activation
        # what PyTorch's encoder fast path checks (1: relu, 2: gelu, 0: another activation)
        self.activation_relu_or_gelu = (
            1 if act is ember.relu or act is _functional().relu or isinstance(act, ReLU)
            else 2 if act is ember.gelu or act is _functional().gelu or isinstance(act, GELU)
            else 0)

    def _sa_block(
        self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool
    ) -> Tensor:
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
            need_weights=False, is_causal=is_causal,
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        out_dropout = self.dropout3 if self._cross else self.dropout2
        return out_dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention then a feed-forward block, each with a residual connection and LayerNorm.

    With ``norm_first`` the LayerNorm is applied before each block (pre-LN) instead of after.

    >>> import ember
    >>> layer = ember.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation="gelu")
    >>> layer(ember.randn(5, 3, 8)).shape
    ember.Size([5, 3, 8])
    """

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        # like PyTorch, boolean masks become additive float ones first (so the attention
        # below never takes MultiheadAttention's boolean-mask fast path)
        src_key_padding_mask = _float_mask(src_key_padding_mask, src.dtype)
        src_mask = _float_mask(src_mask, src.dtype)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        if (src_mask is not None or src_key_padding_mask is not None) and self._takes_fast_path(src):
            # PyTorch's fused encoder layer gives NaN rows where a query may attend to nothing
            merged = self.self_attn.merge_masks(src_mask, src_key_padding_mask, src)[0]
            full = _fully_masked_rows(merged, src.shape[1])
            if full is not None:
                x = x.masked_fill(full.unsqueeze(-1), float("nan"))
        return x

    def _takes_fast_path(self, src: Tensor) -> bool:
        """PyTorch's conditions for its fused encoder layer (eval mode, batch-first packed
        self-attention, relu or gelu, nothing needing grad, no hooks)."""
        from ember.backends import mha

        attn = self.self_attn
        if not (mha.get_fastpath_enabled() and src.dim() == 3 and not self.training
                and attn.batch_first and attn.in_proj_bias is not None
                and attn._qkv_same_embed_dim and self.activation_relu_or_gelu
                and self.norm1.eps == self.norm2.eps and attn.num_heads % 2 == 0
                and not ember.is_autocast_enabled()):
            return False
        if any(m._forward_hooks or m._forward_pre_hooks for m in self.modules()):
            return False
        params = [src, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight,
                  attn.out_proj.bias, self.norm1.weight, self.norm1.bias, self.norm2.weight,
                  self.norm2.bias, self.linear1.weight, self.linear1.bias,
                  self.linear2.weight, self.linear2.bias]
        if ember.overrides.has_torch_function(params):
            return False
        return not (ember.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in params))


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, attention over the encoder's memory, then a feed-forward block.

    >>> import ember
    >>> layer = ember.nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)
    >>> layer(ember.randn(4, 2, 8), ember.randn(6, 2, 8)).shape
    ember.Size([4, 2, 8])
    """

    _cross = True

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(
                self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
            )
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(
                x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            )
            x = self.norm3(x + self._ff_block(x))
        return x

    def _mha_block(
        self,
        x: Tensor,
        mem: Tensor,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool,
    ) -> Tensor:
        x = self.multihead_attn(
            x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
            is_causal=is_causal, need_weights=False,
        )[0]
        return self.dropout2(x)


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of an encoder layer, with an optional final norm.

    >>> import ember
    >>> enc = ember.nn.TransformerEncoder(ember.nn.TransformerEncoderLayer(8, 2, 16), 3)
    >>> len(enc.layers)
    3
    """

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        # PyTorch's nested-tensor fast path (which zeroes the padded positions of the output):
        # taken in eval mode when the layer allows it (use_nested_tensor) and the call does
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = _why_no_nested_tensor(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why_not}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        out = src
        for layer in self.layers:
            out = layer(
                out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                is_causal=bool(is_causal),
            )
        if self._takes_fast_path(src, mask, src_key_padding_mask):
            # PyTorch runs the layers on a nested tensor of the real tokens and pads the result
            # with zeros: padded positions come out as 0 (before the final norm)
            pad = src_key_padding_mask
            if pad.dtype != ember.bool:
                pad = pad != 0
            out = out.masked_fill(pad.unsqueeze(-1), 0.0)
        return self.norm(out) if self.norm is not None else out

    def _takes_fast_path(self, src: Tensor, mask: Tensor | None,
                         src_key_padding_mask: Tensor | None) -> bool:
        """PyTorch's conditions for its nested-tensor fast path in forward."""
        from ember.backends import mha

        first = self.layers[0]
        if not (mha.get_fastpath_enabled() and getattr(self, "use_nested_tensor", False)
                and not first.training and src.dim() == 3 and src_key_padding_mask is not None
                and mask is None and src_key_padding_mask.dim() == 2):
            return False
        if ember.is_autocast_enabled():
            return False
        pad = src_key_padding_mask
        if pad.dtype != ember.bool:
            pad = pad != 0
        if getattr(self, "mask_check", True):
            # the real tokens must come first in each sequence (a "left-aligned" mask)
            keep = (~pad).to(ember.int64)
            if bool((keep[:, 1:] > keep[:, :-1]).any()):
                return False
        attn = first.self_attn
        params = [src, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight,
                  attn.out_proj.bias, first.norm1.weight, first.norm1.bias, first.norm2.weight,
                  first.norm2.bias, first.linear1.weight, first.linear1.bias,
                  first.linear2.weight, first.linear2.bias]
        if ember.overrides.has_torch_function(params):
            return False
        return not (ember.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in params))


class TransformerDecoder(Module):
    """A stack of ``num_layers`` copies of a decoder layer, with an optional final norm.

    >>> import ember
    >>> dec = ember.nn.TransformerDecoder(ember.nn.TransformerDecoderLayer(8, 2, 16), 2)
    >>> dec(ember.randn(3, 1, 8), ember.randn(5, 1, 8)).shape
    ember.Size([3, 1, 8])
    """

    def __init__(
        self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None
    ) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        out = tgt
        for layer in self.layers:
            out = layer(
                out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal,
            )
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """The encoder-decoder model of "Attention Is All You Need".

    Every weight matrix is re-drawn with Xavier-uniform init, like PyTorch's.

    >>> import ember
    >>> model = ember.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1,
    ...                              num_decoder_layers=1, dim_feedforward=32)
    >>> tgt_mask = ember.nn.Transformer.generate_square_subsequent_mask(4)
    >>> model(ember.randn(6, 2, 16), ember.randn(4, 2, 16), tgt_mask=tgt_mask).shape
    ember.Size([4, 2, 16])
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        kw = {"dtype": dtype, "device": device}
        common = dict(
            dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
            layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first,
            bias=bias, **kw,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, **common)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, **common)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError(
                f"Transformer: the batch size of src {tuple(src.shape)} and tgt "
                f"{tuple(tgt.shape)} must be equal (batch_first={self.batch_first})"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(
                f"Transformer: the feature size of src {tuple(src.shape)} and tgt "
                f"{tuple(tgt.shape)} must equal d_model={self.d_model}"
            )
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """A (sz, sz) float mask with -inf above the diagonal and 0 elsewhere (causal attention).

        >>> import ember
        >>> ember.nn.Transformer.generate_square_subsequent_mask(2).tolist()
        [[0.0, -inf], [0.0, 0.0]]
        """
        return _causal_mask(sz, dtype=dtype, device=device)
