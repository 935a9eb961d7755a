"""``ember.nn.quantized.dynamic``: the older spelling of :mod:`ember.ao.nn.quantized.dynamic`
(as PyTorch keeps ``torch.nn.quantized.dynamic``
for ``torch.ao.nn.quantized.dynamic``); the same classes."""

from __future__ import annotations

from ember.ao.nn.quantized.dynamic import *  # noqa: F401,F403
from ember.ao.nn.quantized.dynamic import __all__  # noqa: F401
