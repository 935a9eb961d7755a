"""``torch.ops``: operators by namespace. ``ember.ops.<ns>.<op>`` is a custom op defined with
``ember.library`` (``custom_op`` or ``Library.define``); ``ember.ops.aten.<op>`` is one of
ember's built-in ops under its ATen name (any overload name, ``.default``, ``.Tensor``, selects
the same op).

>>> import ember
>>> ember.ops.aten.add.Tensor(ember.ones(2), ember.ones(2)).tolist()
[2.0, 2.0]
"""

from __future__ import annotations

from typing import Any

from ember import library as _library

aten = _library._AtenNamespace()


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _library._OpNamespace(name)
