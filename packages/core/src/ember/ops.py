"""``torch.ops``: operators by namespace. ``ember.ops.<ns>.<op>`` is a custom op defined with
``ember.library`` (``custom_op`` or ``Library.define``); ``ember.ops.aten.<op>`` is one of
ember's built-in ops under its ATen name (any overload name, ``.default``, ``.Tensor``, selects
the same op). ``ember.ops.c10d_functional`` / ``_c10d_functional`` / ``c10d`` name the
collectives (``ember.ops.c10d_functional.all_reduce``): the keys of CommDebugMode's counts.

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
    collectives = _library._collective_namespace(name)  # c10d_functional, c10d: stable objects
    return collectives if collectives is not None else _library._OpNamespace(name)
