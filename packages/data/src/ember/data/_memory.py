"""Keeping forked workers from copying the dataset: ``CompactList`` and the fork preparation.

A forked worker shares the parent's memory copy-on-write, but CPython writes to every object it
touches: reading ``items[i]`` increments the element's reference count, which dirties the 4 KiB
page holding it, and a full collection of the cyclic GC writes into the header of every container
object. One epoch over a list of 2 million strings thus copies ~150 MiB into every worker.

Two mechanisms, applied by the DataLoader when it forks workers:

- ``gc.freeze()`` right before the fork moves every existing object to the GC's permanent
  generation, which collections never traverse, so the worker's GC leaves the inherited heap
  alone (the parent unfreezes after the fork; the worker's copy stays frozen).
- Large Python lists and tuples of immutable values (ints, floats, strings, bytes, None, bools and
  tuples of those) held by the dataset are packed, in the parent, into a few flat buffers
  (:class:`CompactList`); the worker's copy of the dataset sees the packed list, whose elements are
  decoded on access. Touching a buffer object dirties one page, not one per element. Values are
  immutable, so a fresh equal object is indistinguishable from the original for the dataset code,
  and a worker that writes to the list sees what it would see with the list (see CompactList).
"""

from __future__ import annotations

import gc
import itertools
import pickle
import warnings
from array import array
from collections.abc import Iterator, MutableSequence, Sequence
from typing import Any

__all__ = ["CompactList"]

_ATOMS = (int, float, complex, str, bytes, bool, type(None))
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _offsets(lengths: Any) -> array:
    out = array("q", [0])
    out.extend(itertools.accumulate(lengths))
    return out


class CompactList(MutableSequence):
    """A list packed into a few flat buffers instead of one Python object per element.

    Ints and floats are stored as 64-bit arrays, strings and bytes as one blob with offsets,
    anything else as one pickle per element. Indexing returns a new object equal to the stored
    one. Forked DataLoader workers share a CompactList without copying it (reading a plain list
    writes the reference count of every element it reads, which copies its memory page), and it
    pickles as its buffers, which is fast for spawn workers.

    It behaves as a list otherwise: an assigned element is kept aside (a worker's per-sample
    cache only costs what it caches), and the first change of length or order (``append``,
    ``del``, ``sort``...) turns it into a plain list inside.

    >>> from ember.data import CompactList
    >>> names = CompactList([f"img_{i}.jpg" for i in range(100_000)])
    >>> len(names), names[7], names[-1]
    (100000, 'img_7.jpg', 'img_99999.jpg')
    >>> CompactList([(1, "a"), (2, "b")])[1]
    (2, 'b')
    """

    __slots__ = ("_kind", "_n", "_data", "_offsets", "_assigned")

    def __init__(self, items: Any = ()) -> None:
        if not isinstance(items, (list, tuple)):
            items = list(items)
        kind, data, offsets = _pack(items, _types(items))
        self._set(kind, len(items), data, offsets, None)

    def _set(self, kind: str, n: int, data: Any, offsets: Any, assigned: dict | None) -> None:
        self._kind, self._n, self._data, self._offsets = kind, n, data, offsets
        self._assigned = assigned

    @classmethod
    def _from_parts(
        cls, kind: str, n: int, data: Any, offsets: Any, assigned: dict | None = None
    ) -> CompactList:
        self = cls.__new__(cls)
        self._set(kind, n, data, offsets, assigned)
        return self

    def __reduce__(self) -> Any:
        parts = (self._kind, self._n, self._data, self._offsets, self._assigned)
        return CompactList._from_parts, parts

    def __len__(self) -> int:
        return len(self._data) if self._kind == "list" else self._n

    def _get(self, i: int) -> Any:
        kind = self._kind
        if kind == "list" or kind == "q" or kind == "d":
            if self._assigned and i in self._assigned:
                return self._assigned[i]
            return self._data[i]
        if self._assigned and i in self._assigned:
            return self._assigned[i]
        o = self._offsets
        a, b = o[i], o[i + 1]
        if kind == "str" or kind == "bytes":
            return self._data[a:b]
        if kind == "utf8":
            return str(self._data[a:b], "utf-8")
        return pickle.loads(memoryview(self._data)[a:b])

    def _index(self, index: Any) -> int:
        try:
            i = index.__index__()
        except AttributeError:
            raise TypeError(
                f"CompactList indices must be integers or slices, not {type(index).__name__}"
            ) from None
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"CompactList index {index} out of range for length {n}")
        return i

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._get(i) for i in range(*index.indices(len(self)))]
        return self._get(self._index(index))

    def __iter__(self) -> Iterator[Any]:
        if self._kind in ("list", "q", "d") and not self._assigned:
            return iter(self._data)
        return map(self._get, range(len(self)))

    def _as_list(self) -> list:
        """Turns the storage into a plain list (before a change of length or order)."""
        if self._kind != "list":
            self._set("list", self._n, list(self), None, None)
        return self._data

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            self._as_list()[index] = value
        elif self._kind == "list":
            self._data[self._index(index)] = value
        else:
            i = self._index(index)
            if self._assigned is None:
                self._assigned = {}
            self._assigned[i] = value

    def __delitem__(self, index: Any) -> None:
        del self._as_list()[index]

    def insert(self, index: int, value: Any) -> None:
        self._as_list().insert(index, value)

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        self._as_list().sort(key=key, reverse=reverse)

    def copy(self) -> list:
        return list(self)

    def __add__(self, other: Any) -> list:
        if not isinstance(other, (list, CompactList)):
            return NotImplemented
        return [*self, *other]

    def __radd__(self, other: Any) -> list:
        if not isinstance(other, list):
            return NotImplemented
        return [*other, *self]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, CompactList)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        n = len(self)
        head = ", ".join(repr(self._get(i)) for i in range(min(n, 3)))
        more = ", ..." if n > 3 else ""
        return f"CompactList([{head}{more}], len={n})"

    def nbytes(self) -> int:
        """Bytes of the packed buffers (0 once it has turned into a plain list)."""
        if self._kind == "list":
            return 0
        n = len(self._data) * getattr(self._data, "itemsize", 1)
        if self._offsets is not None:
            n += len(self._offsets) * self._offsets.itemsize
        return n


def _types(items: Sequence) -> set:
    return set(map(type, items))


def _immutable(items: Sequence, types: set) -> bool:
    """Whether every element is an atom or a (nested) tuple of atoms; one pass per tuple level."""
    while True:
        if tuple in types:
            inner = [x for x in items if type(x) is tuple]
            types = types - {tuple}
            if not all(t in _ATOMS for t in types):
                return False
            items = list(itertools.chain.from_iterable(inner))
            types = _types(items)
            continue
        return all(t in _ATOMS for t in types)


def _pack(items: Sequence, types: set) -> tuple[str, Any, Any]:
    if types == {int}:
        try:
            return "q", array("q", items), None
        except OverflowError:
            pass  # beyond int64: pickled below
    elif types == {float}:
        return "d", array("d", items), None
    elif types == {str}:
        blob = "".join(items)
        if blob.isascii():  # one byte per character: slicing the str is the decoding
            return "str", blob, _offsets(map(len, items))
        try:
            encoded = [s.encode("utf-8") for s in items]
        except UnicodeEncodeError:  # lone surrogates: pickle keeps them exact
            return _pickled(items)
        return "utf8", b"".join(encoded), _offsets(map(len, encoded))
    elif types == {bytes}:
        return "bytes", b"".join(items), _offsets(map(len, items))
    return _pickled(items)


def _pickled(items: Sequence) -> tuple[str, Any, Any]:
    dumps = pickle.dumps
    encoded = [dumps(x, pickle.HIGHEST_PROTOCOL) for x in items]
    return "pickle", b"".join(encoded), _offsets(map(len, encoded))


def pack_if_immutable(items: list | tuple) -> CompactList | None:
    """A CompactList of ``items`` when every element is immutable (so that a decoded copy is as
    good as the original), else None."""
    types = _types(items)
    if not _immutable(items, types):
        return None
    kind, data, offsets = _pack(items, types)
    return CompactList._from_parts(kind, len(items), data, offsets)


# (object, attribute name, packed list): what a forked worker swaps into its copy of the dataset.
Plan = list[tuple[Any, str, CompactList]]


def plan_compaction(dataset: Any, min_len: int) -> Plan:
    """Packs the large immutable lists and tuples held in the attributes of ``dataset`` and of
    the datasets it wraps (``Subset.dataset``, ``ConcatDataset.datasets``, ...)."""
    from .dataset import Dataset

    plan: Plan = []
    packed: dict[int, CompactList | None] = {}
    seen: set[int] = set()
    warned: set[int] = set()
    todo = [dataset]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            continue
        for name, val in list(attrs.items()):
            if type(val) is list or type(val) is tuple:
                if len(val) >= min_len:
                    if id(val) not in packed:
                        packed[id(val)] = pack_if_immutable(val)
                    c = packed[id(val)]
                    if c is not None:
                        plan.append((obj, name, c))
                    elif id(val) not in warned:
                        warned.add(id(val))
                        _warn_mutable(obj, name, val)
                elif len(val) <= 1024:
                    todo.extend(v for v in val if isinstance(v, Dataset))
            elif isinstance(val, Dataset):
                todo.append(val)
    return plan


def _warn_mutable(obj: Any, name: str, val: list | tuple) -> None:
    kinds = sorted({type(x).__name__ for x in val[:1000]} - {t.__name__ for t in _ATOMS})
    warnings.warn(
        f"DataLoader: the dataset's attribute {type(obj).__name__}.{name} is a "
        f"{type(val).__name__} of {len(val):,} values that are not all immutable (e.g. "
        f"{', '.join(kinds[:3]) or 'tuples holding such values'}); every forked worker that "
        "reads it copies the memory of the elements it reads (reference counts). Wrap it in "
        "ember.data.CompactList to share it (each access then returns a fresh copy of the "
        "element), or hold the data in NumPy arrays or tensors",
        stacklevel=6,
    )


# The original lists in a worker: never freed there, since freeing a list writes the reference
# count of each of its elements (what packing avoids).
_kept: list[Any] = []


def apply_compaction(plan: Plan) -> None:
    """In a forked worker: points the dataset attributes at their packed lists."""
    for obj, name, compact in plan:
        attrs = obj.__dict__
        _kept.append(attrs.get(name))
        attrs[name] = compact


class frozen_gc:
    """Context manager around forking: ``gc.freeze()`` so that the children's collections skip
    the inherited objects, then ``gc.unfreeze()`` in the parent (unless objects were already
    frozen before, by the application: those stay frozen)."""

    def __enter__(self) -> frozen_gc:
        self._unfreeze = gc.get_freeze_count() == 0
        gc.freeze()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._unfreeze:
            gc.unfreeze()
