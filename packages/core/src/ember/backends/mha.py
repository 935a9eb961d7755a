"""ember.backends.mha: the switch of PyTorch's "fast path" for multi-head attention inference.

ember has no separate fast-path kernels, but one visible effect follows the switch as in
PyTorch: an ``nn.TransformerEncoder`` that would take the nested-tensor fast path (eval mode, a
trailing ``src_key_padding_mask``, no gradients) returns zeros at the padded positions.

>>> import ember
>>> ember.backends.mha.get_fastpath_enabled()
True
"""

from __future__ import annotations

__all__ = ["get_fastpath_enabled", "set_fastpath_enabled"]

_enabled = True


def get_fastpath_enabled() -> bool:
    """Whether the multi-head attention fast path is enabled (True by default)."""
    return _enabled


def set_fastpath_enabled(value: bool) -> None:
    """Enables or disables the multi-head attention fast path."""
    global _enabled
    _enabled = bool(value)
