"""``ember.nn.quantized``: the older spelling of :mod:`ember.ao.nn.quantized` (as PyTorch
keeps ``torch.nn.quantized``
for ``torch.ao.nn.quantized``); the same classes."""

from __future__ import annotations

from ember.ao.nn.quantized import *  # noqa: F401,F403
from ember.ao.nn.quantized import __all__  # noqa: F401
from ember.nn.quantized import dynamic  # noqa: E402,F401
