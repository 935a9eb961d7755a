"""``ember.nn.intrinsic.qat``: the older spelling of :mod:`ember.ao.nn.intrinsic.qat`
(as PyTorch keeps ``torch.nn.intrinsic.qat``
for ``torch.ao.nn.intrinsic.qat``); the same classes."""

from __future__ import annotations

from ember.ao.nn.intrinsic.qat import *  # noqa: F401,F403
from ember.ao.nn.intrinsic.qat import __all__  # noqa: F401
