"""ember.backends.quantized: the quantized engine setting (``engine``, ``supported_engines``),
as PyTorch's ``torch.backends.quantized``.

ember's quantized modules compute as PyTorch's fbgemm / x86 kernels do whatever the engine; the
other engines' kernels (qnnpack's fixed-point requantization) can differ from them by one
quantization step in a few outputs.

>>> import ember
>>> ember.backends.quantized.engine
'x86'
>>> ember.backends.quantized.engine = "fbgemm"
>>> ember.backends.quantized.engine
'fbgemm'
>>> ember.backends.quantized.engine = "x86"
"""

from __future__ import annotations

import sys
import types

_ENGINES = ["qnnpack", "onednn", "x86", "fbgemm"]


class _QuantizedModule(types.ModuleType):
    _engine = "x86"

    @property
    def engine(self) -> str:
        """The quantized engine's name."""
        return self._engine

    @engine.setter
    def engine(self, name: str) -> None:
        if name not in _ENGINES:
            raise RuntimeError(f"{name} is not a valid value for quantized engine")
        type(self)._engine = name

    @property
    def supported_engines(self) -> list[str]:
        """The engines ``engine`` accepts."""
        return list(_ENGINES)


sys.modules[__name__].__class__ = _QuantizedModule
