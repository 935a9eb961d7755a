"""``ember.nn.intrinsic``: the older spelling of :mod:`ember.ao.nn.intrinsic`
(as PyTorch keeps ``torch.nn.intrinsic``
for ``torch.ao.nn.intrinsic``); the same classes."""

from __future__ import annotations

from ember.ao.nn.intrinsic import *  # noqa: F401,F403
from ember.ao.nn.intrinsic import __all__  # noqa: F401
from ember.nn.intrinsic import qat, quantized  # noqa: E402,F401
