"""``QuantStub`` / ``DeQuantStub``: the places a model's float values enter and leave the
quantized part. Identity before ``convert``; then a Quantize / DeQuantize module."""

from __future__ import annotations

from typing import Any

from ember import nn

__all__ = ["QuantStub", "DeQuantStub", "QuantWrapper"]


class QuantStub(nn.Module):
    """Marks where float values get quantized; an observer (added by ``prepare``) records
    their range and ``convert`` replaces the stub by ``nn.quantized.Quantize``.

    >>> import ember
    >>> QuantStub()(ember.tensor([1.5])).tolist()
    [1.5]
    """

    def __init__(self, qconfig: Any = None) -> None:
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x: Any) -> Any:
        return x


class DeQuantStub(nn.Module):
    """Marks where quantized values go back to float; ``convert`` replaces it by
    ``nn.quantized.DeQuantize``."""

    def __init__(self, qconfig: Any = None) -> None:
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x: Any) -> Any:
        return x


class QuantWrapper(nn.Module):
    """``module`` between a QuantStub and a DeQuantStub (``quant``, ``module``, ``dequant``)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        qconfig = getattr(module, "qconfig", None)
        self.add_module("quant", QuantStub(qconfig))
        self.add_module("dequant", DeQuantStub(qconfig))
        self.add_module("module", module)
        self.train(module.training)

    def forward(self, X: Any) -> Any:
        return self.dequant(self.module(self.quant(X)))
