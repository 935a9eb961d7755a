"""``ember.quantization``: the older spelling of :mod:`ember.ao.quantization` (as
``torch.quantization`` is of ``torch.ao.quantization``); the same objects."""

from __future__ import annotations

from ember.ao.quantization import *  # noqa: F401,F403
from ember.ao.quantization import (  # noqa: F401
    __all__,  # noqa: F401
    fake_quantize,
    observer,
    qconfig,
    quantize,
    stubs,
)
