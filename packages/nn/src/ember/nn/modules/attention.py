"""Multi-head attention (``nn.MultiheadAttention``).

>>> import ember
>>> mha = ember.nn.MultiheadAttention(8, 2, batch_first=True)
>>> x = ember.randn(3, 5, 8)
>>> out, w = mha(x, x, x)
>>> out.shape, w.shape
(ember.Size([3, 5, 8]), ember.Size([3, 5, 5]))
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Tensor
from ember.nn import init
from ember.nn.modules.linear import NonDynamicallyQuantizableLinear
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = ["MultiheadAttention"]


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _additive_mask(mask: Tensor, dtype: Any, what: str) -> Tensor:
    """A float mask to add to attention scores: bool True (= not allowed to attend) → -inf."""
    if mask.dtype == ember.bool:
        zeros = ember.zeros(_shape(mask), dtype=dtype, device=mask.device)
        return zeros.masked_fill(mask, float("-inf"))
    if not mask.is_floating_point():
        raise TypeError(
            f"MultiheadAttention: only bool and floating {what} are supported, got {mask.dtype}"
        )
    return mask.to(dtype)


class MultiheadAttention(Module):
    """Attention over ``num_heads`` subspaces of ``embed_dim // num_heads`` features each.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` takes (L, N, E) queries and (S, N, E) keys and
    values ((N, L, E) with ``batch_first``, (L, E) unbatched) and returns the output and, with
    ``need_weights``, the attention weights (averaged over heads unless
    ``average_attn_weights=False``). Bool masks mark with True the positions that may NOT be
    attended; float masks are added to the scores.

    >>> import ember
    >>> mha = ember.nn.MultiheadAttention(4, 2, kdim=3, vdim=5)
    >>> out, _ = mha(ember.randn(2, 4), ember.randn(6, 3), ember.randn(6, 5), need_weights=False)
    >>> out.shape
    ember.Size([2, 4])
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if not isinstance(embed_dim, int) or embed_dim <= 0 or not isinstance(num_heads, int) or num_heads <= 0:
            raise ValueError(
                f"MultiheadAttention: embed_dim and num_heads must be positive ints, got "
                f"embed_dim={embed_dim!r} and num_heads={num_heads!r}"
            )
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                f"({num_heads})"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout}")
        kw = {"dtype": dtype, "device": device}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = float(dropout)
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(ember.empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(ember.empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(ember.empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(ember.empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(ember.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        # PyTorch's class for it (a Linear that quantization leaves alone), as it prints
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(ember.empty(1, 1, embed_dim, **kw))
            self.bias_v = Parameter(ember.empty(1, 1, embed_dim, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _projections(self) -> tuple[Tensor, Tensor, Tensor]:
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            e = self.embed_dim
            return w[:e], w[e : 2 * e], w[2 * e :]
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if any(getattr(t, "is_nested", False) for t in (query, key, value)):  # fast path only
            from ember.nested.modules import mha_forward

            return mha_forward(self, query, key, value, key_padding_mask, need_weights,
                               attn_mask, average_attn_weights)
        wq, wk, wv = self._projections()
        out, weights = _attention(
            query, key, value, self.num_heads, wq, wk, wv, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout if self.training else 0.0,
            self.out_proj, key_padding_mask, need_weights, attn_mask, average_attn_weights,
            is_causal, self.batch_first, "MultiheadAttention")
        if self._takes_fast_path(query, key, value, key_padding_mask, attn_mask):
            # PyTorch's fused kernel gives NaN rows for queries that may attend to nothing
            # (its slow path gives zeros there): programs that nan_to_num them see the same
            full = _fully_masked_rows(
                self.merge_masks(attn_mask, key_padding_mask, query)[0], query.shape[1])
            if full is not None:
                out = out.masked_fill(full.unsqueeze(-1), float("nan"))
        return out, weights

    def _takes_fast_path(self, query: Tensor, key: Tensor, value: Tensor,
                         key_padding_mask: Tensor | None, attn_mask: Tensor | None) -> bool:
        """PyTorch's conditions for its fused self-attention in eval mode (boolean or no
        masks, batch-first self-attention with packed projections, nothing needing grad)."""
        from ember.backends import mha

        if any(m is not None and m.is_floating_point() for m in (attn_mask, key_padding_mask)):
            return False
        if not (mha.get_fastpath_enabled() and query.dim() == 3 and query is key
                and key is value and not self.training and self.batch_first
                and self.num_heads % 2 == 0 and self.bias_k is None and self.bias_v is None
                and not self.add_zero_attn and self._qkv_same_embed_dim
                and self.in_proj_bias is not None and self.in_proj_weight is not None
                and query.dtype == self.in_proj_weight.dtype == self.in_proj_bias.dtype
                and not ember.is_autocast_enabled()):
            return False
        args = [query, self.in_proj_weight, self.in_proj_bias, self.out_proj.weight,
                self.out_proj.bias]
        if ember.overrides.has_torch_function(args):
            return False
        return not (ember.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in args))

    def merge_masks(self, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                    query: Tensor) -> tuple[Tensor | None, int | None]:
        """PyTorch's helper: the mask type (None, 1 for a key_padding_mask alone, 2 when an
        attn_mask is given) and the mask; with an attn_mask, both are expanded to (batch,
        num_heads, seq_len, seq_len) of the batch-first ``query`` and added (a logical or for
        boolean masks; a True padding entry adds 1 to a float attn_mask, as in PyTorch)."""
        mask_type: int | None = None
        merged: Tensor | None = None
        if key_padding_mask is not None:
            mask_type, merged = 1, key_padding_mask
        if attn_mask is not None:
            batch, seq_len = query.shape[0], query.shape[1]
            mask_type = 2
            if attn_mask.dim() == 3:
                merged = attn_mask.view(batch, -1, seq_len, seq_len)
            else:
                merged = attn_mask.view(1, 1, seq_len, seq_len).expand(
                    batch, self.num_heads, -1, -1)
            if key_padding_mask is not None:
                merged = merged + key_padding_mask.view(batch, 1, 1, seq_len).expand(
                    -1, self.num_heads, -1, -1)
        return merged, mask_type


def _fully_masked_rows(merged: Tensor | None, seq_len: int) -> Tensor | None:
    """(batch, seq_len) True where a query may attend to no key under ``merge_masks``'s
    result: boolean True or float -inf over the whole row, for any head; a (batch, S)
    key_padding_mask alone blocks every query of a fully padded sequence. None if no row is."""
    if merged is None:
        return None
    blocked = merged if merged.dtype == ember.bool else merged == float("-inf")
    if blocked.dim() == 2:
        full = blocked.all(-1, keepdim=True).expand(-1, seq_len)
    else:
        full = blocked.all(-1).any(1)
    return full if bool(full.any()) else None


def _attention(
    query: Tensor, key: Tensor, value: Tensor, num_heads: int, wq: Tensor, wk: Tensor,
    wv: Tensor, in_proj_bias: Tensor | None, bias_k: Tensor | None, bias_v: Tensor | None,
    add_zero_attn: bool, dropout_p: float, out_proj: Any, key_padding_mask: Tensor | None,
    need_weights: bool, attn_mask: Tensor | None, average_attn_weights: bool, is_causal: bool,
    batch_first: bool, who: str,
) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention with the given projections (``MultiheadAttention.forward`` and
    ``F.multi_head_attention_forward``); ``out_proj`` maps (N * L, E) to (N * L, E)."""
    E, H = wq.shape[0], num_heads
    D = E // H
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(
            f"{who}: query, key and value must all be 3-D (batched) or 2-D "
            f"(unbatched), got {_shape(query)}, {_shape(key)} and {_shape(value)}"
        )
    unbatched = query.ndim == 2
    for t, dim, what in ((query, wq.shape[1], "query"), (key, wk.shape[1], "key"),
                         (value, wv.shape[1], "value")):
        if t.shape[-1] != dim:
            raise RuntimeError(
                f"{who}: expected {what} with {dim} features in the last "
                f"dimension, got shape {_shape(t)}"
            )
    if unbatched:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    elif not batch_first:
        query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    # now (N, L, E) / (N, S, kdim) / (N, S, vdim)
    N, L, S = query.shape[0], query.shape[1], key.shape[1]
    if _shape(key)[:2] != _shape(value)[:2] or key.shape[0] != N:
        raise RuntimeError(
            f"{who}: key {_shape(key)} and value {_shape(value)} must share "
            f"batch and sequence dimensions with each other and the batch of query "
            f"{_shape(query)}"
        )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            f"{who}: is_causal=True is a hint and needs attn_mask (for example "
            "nn.Transformer.generate_square_subsequent_mask(L))"
        )
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias[:E], in_proj_bias[E : 2 * E], in_proj_bias[2 * E :]
    q = query.matmul(wq.t())
    k = key.matmul(wk.t())
    v = value.matmul(wv.t())
    if bq is not None:
        q, k, v = q + bq, k + bk, v + bv

    mask = None
    if attn_mask is not None:
        m = _additive_mask(attn_mask, q.dtype, "attn_mask")
        if m.ndim == 2:
            if _shape(m) != (L, S):
                raise RuntimeError(
                    f"{who}: the 2-D attn_mask should be of shape {(L, S)}, got "
                    f"{_shape(m)}"
                )
            m = m.reshape(1, 1, L, S)
        elif m.ndim == 3:
            if _shape(m) != (N * H, L, S):
                raise RuntimeError(
                    f"{who}: the 3-D attn_mask should be of shape "
                    f"{(N * H, L, S)}, got {_shape(m)}"
                )
            m = m.reshape(N, H, L, S)
        else:
            raise RuntimeError(
                f"{who}: attn_mask must be 2-D or 3-D, got shape {_shape(m)}"
            )
        mask = m
    if key_padding_mask is not None:
        if _shape(key_padding_mask) != (N, S):
            raise RuntimeError(
                f"{who}: expected key_padding_mask of shape {(N, S)}, got "
                f"{_shape(key_padding_mask)}"
            )
        kpm = _additive_mask(key_padding_mask, q.dtype, "key_padding_mask").reshape(N, 1, 1, S)
        mask = kpm if mask is None else mask + kpm

    if bias_k is not None:
        k = ember.cat([k, bias_k.expand(N, 1, E)], 1)
        v = ember.cat([v, bias_v.expand(N, 1, E)], 1)
        S += 1
        if mask is not None:
            mask = ember.cat([mask, ember.zeros(*_shape(mask)[:3], 1, dtype=mask.dtype)], 3)

    q = q.reshape(N, L, H, D).transpose(1, 2)
    k = k.reshape(N, S, H, D).transpose(1, 2)
    v = v.reshape(N, S, H, D).transpose(1, 2)
    if add_zero_attn:
        k = ember.cat([k, ember.zeros(N, H, 1, D, dtype=k.dtype, device=k.device)], 2)
        v = ember.cat([v, ember.zeros(N, H, 1, D, dtype=v.dtype, device=v.device)], 2)
        S += 1
        if mask is not None:
            mask = ember.cat([mask, ember.zeros(*_shape(mask)[:3], 1, dtype=mask.dtype)], 3)

    weights = None
    if need_weights:
        scores = q.matmul(k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        if mask is not None:
            scores = scores + mask
        weights = ember.softmax(scores, -1)
        if dropout_p > 0:  # like PyTorch, the returned weights are the dropped-out ones
            weights = ember.dropout(weights, dropout_p, True)
        out = weights.matmul(v)
    else:
        out = ember.scaled_dot_product_attention(q, k, v, mask, dropout_p)
    out = out.transpose(1, 2).reshape(N * L, E)
    out = out_proj(out).reshape(N, L, E)
    if weights is not None and average_attn_weights:
        weights = weights.mean(1)
    if unbatched:
        out = out.squeeze(0)
        weights = weights.squeeze(0) if weights is not None else None
    elif not batch_first:
        out = out.transpose(0, 1)
    return out, weights
