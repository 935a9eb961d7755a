"""``torch.utils.hooks``: ``RemovableHandle``, the handle hook registrations return.

>>> from collections import OrderedDict
>>> from ember.utils.hooks import RemovableHandle
>>> hooks = OrderedDict()  # weakly referenced: an OrderedDict, as modules keep their hooks
>>> h = RemovableHandle(hooks)
>>> hooks[h.id] = print
>>> h.remove(); len(hooks)
0
"""

from __future__ import annotations

from typing import Any

__all__ = ["RemovableHandle"]  # noqa: F822  (provided by __getattr__, from ember.nn)


def __getattr__(name: str) -> Any:
    if name == "RemovableHandle":  # the nn package's class (one type for every hook handle)
        from ember.nn.modules.module import RemovableHandle

        return RemovableHandle
    raise AttributeError(f"module 'ember.utils.hooks' has no attribute {name!r}")
