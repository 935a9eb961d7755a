"""``torch.nn.attention.bias``: causal masks that scaled_dot_product_attention reads without
building them. ``causal_upper_left(L, S)`` lets query i see keys ``j <= i``;
``causal_lower_right(L, S)`` aligns the diagonal to the last key, ``j <= i + S - L`` (a decoder
with a cache of ``S - L`` earlier keys). Passed as ``attn_mask``, the upper-left mask (and the
lower-right one of a square) runs the causal kernel itself (``is_causal=True``: the fused kernel
skips the masked tiles); other shapes use the boolean mask. Any other function given a
CausalBias sees the boolean mask.

>>> import ember
>>> from ember.nn.attention.bias import causal_lower_right
>>> bias = causal_lower_right(2, 4)
>>> bias._materialize().tolist()
[[True, True, True, False], [True, True, True, True]]
>>> q, k = ember.ones(1, 2, 8), ember.ones(1, 4, 8)
>>> ember.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=bias).shape
ember.Size([1, 2, 8])
"""

from __future__ import annotations

import enum
import warnings
from typing import Any

import ember

__all__ = ["CausalBias", "CausalVariant", "causal_lower_right", "causal_upper_left"]

_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
              "enable_gqa")


class CausalVariant(enum.IntEnum):
    """Where the causal diagonal starts: the top-left corner or the bottom-right one."""

    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias:
    """A causal mask of ``seq_len_q`` queries by ``seq_len_kv`` keys, kept as its shape only
    (``_materialize(device)`` builds the boolean tensor). Takes part in ``__torch_function__``."""

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> None:
        if not isinstance(variant, CausalVariant):
            raise TypeError(f"CausalBias: variant must be a CausalVariant, got {variant!r}")
        for name, n in (("seq_len_q", seq_len_q), ("seq_len_kv", seq_len_kv)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"CausalBias: {name} must be a non-negative int, got {n!r}")
        self.variant, self.seq_len_q, self.seq_len_kv = variant, seq_len_q, seq_len_kv

    def __repr__(self) -> str:
        return (f"CausalBias(variant={self.variant.name}, seq_len_q={self.seq_len_q}, "
                f"seq_len_kv={self.seq_len_kv})")

    @property
    def shape(self) -> ember.Size:
        return ember.Size([self.seq_len_q, self.seq_len_kv])

    @property
    def dtype(self) -> ember.dtype:
        return ember.bool

    def _materialize(self, device: Any = None) -> ember.Tensor:
        """The boolean mask (True attends), on ``device`` (default: the default device)."""
        mask = ember.ones(self.seq_len_q, self.seq_len_kv, dtype=ember.bool, device=device)
        offset = 0
        if self.variant is CausalVariant.LOWER_RIGHT:
            offset = self.seq_len_kv - self.seq_len_q
        return mask.tril(diagonal=offset)

    def _sdpa(self, query: ember.Tensor, key: ember.Tensor, value: ember.Tensor,
              attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
              scale: float | None = None, enable_gqa: bool = False) -> ember.Tensor:
        if is_causal:
            raise ValueError("scaled_dot_product_attention: a CausalBias attn_mask is causal "
                             "already; do not also pass is_causal=True")
        if (query.shape[-2], key.shape[-2]) != (self.seq_len_q, self.seq_len_kv):
            raise ValueError(
                f"scaled_dot_product_attention: the CausalBias is for {self.seq_len_q} queries "
                f"and {self.seq_len_kv} keys, got {query.shape[-2]} and {key.shape[-2]}")
        sdpa = ember.nn.functional.scaled_dot_product_attention
        square = self.seq_len_q == self.seq_len_kv
        if self.variant is CausalVariant.UPPER_LEFT or square:
            return sdpa(query, key, value, None, dropout_p, True, scale=scale,
                        enable_gqa=enable_gqa)
        return sdpa(query, key, value, self._materialize(query.device), dropout_p, False,
                    scale=scale, enable_gqa=enable_gqa)

    @classmethod
    def __torch_function__(cls, func: Any, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is ember.nn.functional.scaled_dot_product_attention:
            bound = dict(zip(_SDPA_ARGS, args))
            bound.update(kwargs)
            bias = bound.pop("attn_mask", None)
            if not isinstance(bias, CausalBias):
                return NotImplemented
            return bias._sdpa(attn_mask=None, **bound)

        def plain(v: Any, device: Any) -> Any:
            if isinstance(v, CausalBias):
                return v._materialize(device)
            if isinstance(v, (list, tuple)):
                return type(v)(plain(x, device) for x in v)
            return v

        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, ember.Tensor)]
        device = tensors[0].device if tensors else None
        return func(*plain(args, device), **{k: plain(v, device) for k, v in kwargs.items()})


def causal_upper_left(*size: int) -> CausalBias:
    """The causal mask aligned to the top-left corner: query i sees keys ``j <= i``
    (``size``: ``(seq_len_q, seq_len_kv)``).

    >>> from ember.nn.attention.bias import causal_upper_left
    >>> causal_upper_left(3, 2)._materialize().tolist()
    [[True, False], [True, True], [True, True]]
    """
    if len(size) != 2:
        raise ValueError(f"causal_upper_left: expected (seq_len_q, seq_len_kv), got {size}")
    return CausalBias(CausalVariant.UPPER_LEFT, size[0], size[1])


def causal_lower_right(*size: int) -> CausalBias:
    """The causal mask aligned to the bottom-right corner: query i sees keys
    ``j <= i + seq_len_kv - seq_len_q``.

    >>> from ember.nn.attention.bias import causal_lower_right
    >>> causal_lower_right(1, 3)._materialize().tolist()
    [[True, True, True]]
    """
    if len(size) != 2:
        raise ValueError(f"causal_lower_right: expected (seq_len_q, seq_len_kv), got {size}")
    if size[0] > size[1]:
        warnings.warn(
            f"causal_lower_right({size[0]}, {size[1]}): with more queries than keys the first "
            f"{size[0] - size[1]} query rows attend to no key, so attention gives no meaningful "
            "value (NaN) there", UserWarning, stacklevel=2)
    return CausalBias(CausalVariant.LOWER_RIGHT, size[0], size[1])
