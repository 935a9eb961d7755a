"""``nn.MultiheadAttention`` given nested tensors, as PyTorch runs it.

PyTorch runs a multi-head attention module on nested input only on its inference "fast path"
(self-attention in eval mode without autograd, batch_first, an even number of heads, packed
in-projection with biases, no bias_k / bias_v / add_zero_attn, no masks); anywhere else it
raises ``AssertionError`` saying which condition failed, in a fixed order that is reproduced
here. Its jagged nested tensors never reach the fast path (they are a Python tensor subclass:
"some Tensor argument has_torch_function"), so only strided nested tensors run. As on PyTorch's
fast path, ``is_causal`` is not applied there. ``TransformerEncoderLayer`` and
``TransformerEncoder`` then work on strided nested input through this module and per-component
ops, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

import ember
from ember._C import Tensor
from ember.nested.tensor import _components, _is_nested, _strided

_NOT_FAST = ("MultiheadAttention does not support NestedTensor outside of its fast path. The "
             "fast path was not hit because ")
# PyTorch's message holds the indentation of its source line (a backslash continuation)
_BOTH_MASKS = ("supplying both src_key_padding_mask and src_mask at the same time "
               + " " * 33 + "is not supported with NestedTensor input")


def _why_not_fast_path(mha: Any, query: Tensor, key: Tensor, value: Tensor,
                       key_padding_mask: Tensor | None, attn_mask: Tensor | None) -> str:
    """The first of PyTorch's fast-path conditions that fails ("" when all hold)."""
    from ember.backends import mha as mha_backend

    bias, weight = mha.in_proj_bias, mha.in_proj_weight
    if not mha_backend.get_fastpath_enabled():
        return "torch.backends.mha.get_fastpath_enabled() was not True"
    if query.dim() != 3:
        return f"input not batched; expected query.dim() of 3 but got {query.dim()}"
    if query is not key or key is not value:
        return "non-self attention was used (query, key, and value are not the same Tensor)"
    if bias is not None and query.dtype != bias.dtype:
        return (f"dtypes of query ({query.dtype}) and self.in_proj_bias ({bias.dtype}) don't "
                "match")
    if weight is None:
        return "in_proj_weight was None"
    if query.dtype != weight.dtype:
        return (f"dtypes of query ({query.dtype}) and self.in_proj_weight ({weight.dtype}) "
                "don't match")
    if mha.training:
        return "training is enabled"
    if mha.num_heads % 2:
        return "self.num_heads is not even"
    if not mha.batch_first:
        return "batch_first was not True"
    if mha.bias_k is not None:
        return "self.bias_k was not None"
    if mha.bias_v is not None:
        return "self.bias_v was not None"
    if mha.add_zero_attn:
        return "add_zero_attn was enabled"
    if not mha._qkv_same_embed_dim:
        return "_qkv_same_embed_dim was not True"
    if key_padding_mask is not None or attn_mask is not None:
        return _BOTH_MASKS
    if ember.is_autocast_enabled():
        return "autocast is enabled"
    params = (weight, bias, mha.out_proj.weight, mha.out_proj.bias)
    from ember.overrides import has_torch_function

    if (any(t.layout is ember.jagged for t in (query, key, value) if _is_nested(t))
            or has_torch_function(tuple(p for p in params if p is not None))):
        return "some Tensor argument has_torch_function"
    if ember.is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (query, key, value) + params):
        return ("grad is enabled and at least one of query or the input/output projection "
                "weights or biases requires_grad")
    if bias is None:  # PyTorch's fast path needs both; it would go on to the error below
        return "in_proj_bias was None"
    return ""


def mha_forward(mha: Any, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None, need_weights: bool,
                attn_mask: Tensor | None, average_attn_weights: bool) -> tuple[Tensor, Any]:
    """``MultiheadAttention.forward`` where query, key or value is nested: PyTorch's fast
    path (self-attention of each component), or its AssertionError naming why not."""
    why = _why_not_fast_path(mha, query, key, value, key_padding_mask, attn_mask)
    if why:
        raise AssertionError(_NOT_FAST + why)
    comps = _components(query)
    outs, weights = [], []
    for c in comps:
        x = c.unsqueeze(0)
        o, w = mha(x, x, x, need_weights=need_weights,
                   average_attn_weights=average_attn_weights)
        outs.append(o[0])
        weights.append(w)
    out = _strided(outs, query)
    if not need_weights:
        return out, None
    # the weights of every sequence, zero-padded to the longest one: (B, [H,] L, L)
    longest = max((int(c.shape[0]) for c in comps), default=0)
    padded = []
    for w in weights:
        n = int(w.shape[-1])
        padded.append(ember.nn.functional.pad(w[0], (0, longest - n, 0, longest - n)))
    return out, ember.stack(padded)
