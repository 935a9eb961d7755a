"""Weak references keyed by object identity (PyTorch's ``torch.utils.weak``): tensors define
``==`` elementwise and are not meant as dict keys by value, so ``weakref.WeakKeyDictionary``
does not fit them; these compare keys with ``is``.

>>> import ember
>>> from ember.utils.weak import WeakIdKeyDictionary
>>> d = WeakIdKeyDictionary()
>>> t = ember.ones(2)
>>> d[t] = "first"
>>> d[t], len(d)
('first', 1)
>>> del t
>>> len(d)
0
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, Callable

__all__ = ["WeakIdRef", "WeakIdKeyDictionary", "WeakTensorKeyDictionary", "TensorWeakRef"]


class WeakIdRef(weakref.ref):
    """A weak reference hashed and compared by the identity of its referent (a dead reference
    equals only itself).

    >>> import ember
    >>> t = ember.zeros(1)
    >>> WeakIdRef(t) == WeakIdRef(t)
    True
    """

    __slots__ = ["_id"]

    def __init__(self, key: Any, callback: Callable | None = None) -> None:
        self._id = id(key)
        super().__init__(key, callback)

    def __call__(self) -> Any:
        return super().__call__()

    def __hash__(self) -> int:
        return self._id

    def __eq__(self, other: object) -> bool:
        a = self()
        if isinstance(other, _IdKey):  # a dictionary lookup by a live object
            return a is not None and a is other.obj
        b = other() if isinstance(other, WeakIdRef) else None
        if a is not None and b is not None:
            return a is b
        return self is other

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


class _IdKey:
    """A strong lookup key that hashes and compares like the WeakIdRef of the same object."""

    __slots__ = ["obj"]

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WeakIdRef):
            return other() is self.obj
        return isinstance(other, _IdKey) and other.obj is self.obj


class WeakIdKeyDictionary(MutableMapping):
    """A mapping whose keys are held weakly and matched by identity; an entry goes away when its
    key is collected.

    >>> import ember
    >>> d = WeakIdKeyDictionary({ember.ones(1): 1})  # the temporary key dies at once
    >>> len(d)
    0
    """

    def __init__(self, dict: Any = None, ref_type: type = WeakIdRef) -> None:
        self.data: dict = {}
        self.ref_type = ref_type
        self_ref = weakref.ref(self)

        def remove(k: Any) -> None:
            owner = self_ref()
            if owner is not None:
                owner.data.pop(k, None)

        self._remove = remove
        if dict is not None:
            self.update(dict)

    def __getitem__(self, key: Any) -> Any:
        return self.data[_IdKey(key)]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.data[self.ref_type(key, self._remove)] = value

    def __delitem__(self, key: Any) -> None:
        del self.data[_IdKey(key)]

    def __contains__(self, key: object) -> bool:
        try:
            return _IdKey(key) in self.data
        except TypeError:
            return False

    def __iter__(self) -> Iterator[Any]:
        for ref in list(self.data):
            obj = ref()
            if obj is not None:
                yield obj

    def __len__(self) -> int:
        return sum(1 for ref in list(self.data) if ref() is not None)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} at {id(self):#x}>"

    def copy(self) -> WeakIdKeyDictionary:
        new = WeakIdKeyDictionary(ref_type=self.ref_type)
        for k, v in self.items():
            new[k] = v
        return new

    __copy__ = copy

    # the dict union operators, as weakref.WeakKeyDictionary's (a new dictionary, or in place)
    def __or__(self, other: Any) -> Any:
        if not isinstance(other, Mapping):
            return NotImplemented
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other: Any) -> Any:
        if not isinstance(other, Mapping):
            return NotImplemented
        out = WeakIdKeyDictionary(ref_type=self.ref_type)
        out.update(other)
        out.update(self)
        return out

    def __ior__(self, other: Any) -> WeakIdKeyDictionary:
        self.update(other)
        return self

    def keyrefs(self) -> list:
        """The weak references to the keys."""
        return list(self.data)


WeakTensorKeyDictionary = WeakIdKeyDictionary


class TensorWeakRef:
    """A weak reference to a tensor: calling it gives the tensor, or None once it is gone.

    >>> import ember
    >>> t = ember.ones(2)
    >>> r = TensorWeakRef(t)
    >>> r() is t
    True
    """

    __slots__ = ["ref"]

    def __init__(self, tensor: Any) -> None:
        from ember import Tensor

        if not isinstance(tensor, Tensor):
            raise TypeError(f"TensorWeakRef: expected a tensor, got {type(tensor).__name__}")
        self.ref = weakref.ref(tensor)

    def __call__(self) -> Any:
        return self.ref()
