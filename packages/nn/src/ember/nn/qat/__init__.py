"""``ember.nn.qat``: the older spelling of :mod:`ember.ao.nn.qat`
(as PyTorch keeps ``torch.nn.qat``
for ``torch.ao.nn.qat``); the same classes."""

from __future__ import annotations

from ember.ao.nn.qat import *  # noqa: F401,F403
from ember.ao.nn.qat import __all__  # noqa: F401
