"""``QConfigMapping``: which QConfig each part of a model gets in FX graph mode quantization (a
global default, then per module type, then per qualified module name, the later winning), and
``get_default_qconfig_mapping``.

>>> import ember
>>> from ember.ao.quantization import QConfigMapping, default_qconfig
>>> m = QConfigMapping().set_global(default_qconfig).set_module_name("fc", None)
>>> m.global_qconfig is default_qconfig, m.module_name_qconfigs["fc"] is None
(True, True)
"""

from __future__ import annotations

from typing import Any

from ember import nn
from ember.ao.quantization.qconfig import get_default_qat_qconfig, get_default_qconfig

__all__ = ["QConfigMapping", "get_default_qconfig_mapping", "get_default_qat_qconfig_mapping"]


class QConfigMapping:
    """The QConfig of each node of a traced model: ``set_global``, ``set_object_type`` (a
    module class or a function), ``set_module_name`` (a qualified name, prefixes apply to the
    submodules). ``None`` leaves that part float."""

    def __init__(self) -> None:
        self.global_qconfig: Any = None
        self.object_type_qconfigs: dict[Any, Any] = {}
        self.module_name_qconfigs: dict[str, Any] = {}

    def set_global(self, global_qconfig: Any) -> QConfigMapping:
        self.global_qconfig = global_qconfig
        return self

    def set_object_type(self, object_type: Any, qconfig: Any) -> QConfigMapping:
        self.object_type_qconfigs[object_type] = qconfig
        return self

    def set_module_name(self, module_name: str, qconfig: Any) -> QConfigMapping:
        self.module_name_qconfigs[module_name] = qconfig
        return self

    def _qconfig_for(self, object_type: Any, module_name: str | None) -> Any:
        qconfig = self.object_type_qconfigs.get(object_type, self.global_qconfig)
        if module_name is not None:
            parts = module_name.split(".")
            for i in range(1, len(parts) + 1):  # the longest matching prefix wins
                prefix = ".".join(parts[:i])
                if prefix in self.module_name_qconfigs:
                    qconfig = self.module_name_qconfigs[prefix]
        return qconfig

    def to_dict(self) -> dict[str, Any]:
        return {"": self.global_qconfig,
                "object_type": list(self.object_type_qconfigs.items()),
                "module_name": list(self.module_name_qconfigs.items())}

    @classmethod
    def from_dict(cls, qconfig_dict: dict[str, Any]) -> QConfigMapping:
        out = cls()
        if "" in qconfig_dict:
            out.set_global(qconfig_dict[""])
        for key, value in qconfig_dict.get("object_type", []):
            out.set_object_type(key, value)
        for key, value in qconfig_dict.get("module_name", []):
            out.set_module_name(key, value)
        return out

    def __repr__(self) -> str:
        return (f"QConfigMapping (\n global_qconfig\n  {self.global_qconfig}\n object_type_"
                f"qconfigs\n  {self.object_type_qconfigs}\n module_name_qconfigs\n  "
                f"{self.module_name_qconfigs}\n)")


def get_default_qconfig_mapping(backend: str = "x86", version: int = 0) -> QConfigMapping:
    """The default post-training QConfigMapping for ``backend`` (its default QConfig
    everywhere; embeddings weight-only).

    >>> get_default_qconfig_mapping("x86").global_qconfig.activation.p.func.__name__
    'HistogramObserver'
    """
    from ember.ao.quantization.qconfig import float_qparams_weight_only_qconfig

    return (QConfigMapping().set_global(get_default_qconfig(backend, version))
            .set_object_type(nn.Embedding, float_qparams_weight_only_qconfig)
            .set_object_type(nn.EmbeddingBag, float_qparams_weight_only_qconfig))


def get_default_qat_qconfig_mapping(backend: str = "x86", version: int = 1) -> QConfigMapping:
    """The default quantization-aware-training QConfigMapping for ``backend``."""
    return QConfigMapping().set_global(get_default_qat_qconfig(backend, version))
