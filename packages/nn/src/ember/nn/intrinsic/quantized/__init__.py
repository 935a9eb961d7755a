"""``ember.nn.intrinsic.quantized``: the older spelling of :mod:`ember.ao.nn.intrinsic.quantized`
(as PyTorch keeps ``torch.nn.intrinsic.quantized``
for ``torch.ao.nn.intrinsic.quantized``); the same classes."""

from __future__ import annotations

from ember.ao.nn.intrinsic.quantized import *  # noqa: F401,F403
from ember.ao.nn.intrinsic.quantized import __all__  # noqa: F401
