"""``ember.ao``: architecture optimization, as PyTorch's ``torch.ao``: eager-mode
quantization (``ember.ao.quantization``) and the quantized / QAT / fused modules
(``ember.ao.nn``)."""

from __future__ import annotations

from ember.ao import nn, quantization  # noqa: F401

__all__ = ["nn", "quantization"]
