"""``torch.nn.modules.utils``: the argument normalizers custom layers import (``_pair`` and
friends turn an int or a sequence into an n-tuple).

>>> from ember.nn.modules.utils import _pair
>>> _pair(3), _pair((1, 2))
((3, 3), (1, 2))
"""

from __future__ import annotations

import collections.abc
from itertools import repeat
from typing import Any, Callable

__all__ = ["_ntuple", "_single", "_pair", "_triple", "_quadruple", "_reverse_repeat_tuple",
           "_list_with_default", "consume_prefix_in_state_dict_if_present"]


def _ntuple(n: int, name: str = "parse") -> Callable[[Any], tuple]:
    def parse(x: Any) -> tuple:
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """Each element of t, reversed, repeated n times: (1, 2) -> (2, 2, 1, 1) for n=2 (the
    padding order F.pad wants)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size: Any, defaults: list) -> list:
    """out_size with its None entries filled from the trailing dims of ``defaults``."""
    if isinstance(out_size, (int, type(None))) and not isinstance(out_size, bool):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict: dict, prefix: str) -> None:
    """Strips ``prefix`` from the keys of ``state_dict`` that start with it, in place, and from
    its ``_metadata`` keys (a checkpoint of a ``DataParallel``/``DistributedDataParallel`` model
    loads into the bare model with ``prefix="module."``).

    >>> import collections
    >>> sd = collections.OrderedDict([("module.w", 1), ("b", 2)])
    >>> consume_prefix_in_state_dict_if_present(sd, "module.")
    >>> list(sd)
    ['b', 'w']
    """
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            # metadata keys are module names: the wrapper's own entry is the prefix sans dot
            if len(key) == 0:
                continue
            if key == prefix.replace(".", "") or key.startswith(prefix):
                metadata[key[len(prefix):]] = metadata.pop(key)
