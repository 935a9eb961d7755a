"""``ember.ao.nn``: fused (``intrinsic``), quantization-aware-training (``qat``), quantized
(``quantized``) and dynamically quantized (``quantized.dynamic``) modules."""

from __future__ import annotations

from ember.ao.nn import intrinsic, qat, quantized  # noqa: F401

__all__ = ["intrinsic", "qat", "quantized"]
