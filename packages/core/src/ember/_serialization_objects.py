"""Objects in checkpoints beyond tensors and containers: NumPy data, and anything picklable.

``ember.save`` writes what its JSON object tree can express natively. This module adds:

* NumPy arrays and scalars (any dtype but ``object``/structured): native nodes holding the raw
  bytes, so they load without running code, with ``weights_only=True``;
* any other picklable object (a whole ``nn.Module``, a dataclass or ``argparse.Namespace`` of
  hyper-parameters, a set, ...): pickled, with every tensor (and NumPy array) inside it stored
  as a storage of the checkpoint, not in the pickle. All pickles of one file form one stream with
  one memo, so objects shared between them stay shared after loading.

Loading a pickle can run code, so ``ember.load`` (``weights_only=True`` by default) unpickles only
the globals allowed here: a few harmless builtins and those a program allow-lists with
:func:`add_safe_globals` or the :class:`safe_globals` context manager. ``weights_only=False``
loads anything, for files from a trusted source.

>>> import argparse, io, ember, numpy as np
>>> buf = io.BytesIO()
>>> ember.save({"args": argparse.Namespace(lr=0.1), "table": np.arange(3)}, buf)
>>> _ = buf.seek(0)
>>> with ember.serialization.safe_globals([argparse.Namespace]):
...     ember.load(buf)
{'args': Namespace(lr=0.1), 'table': array([0, 1, 2])}
"""

from __future__ import annotations

import collections
import io
import pickle
import sys
import threading
from typing import Any, Iterable

__all__ = ["add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals"]

_PROTOCOL = 4
TAGS = ("$objects", "$pickle", "$ndarray", "$npscalar")

# Globals any file may use: containers and numbers that construct nothing else.
_DEFAULT_SAFE: dict[str, Any] = {
    "collections.OrderedDict": collections.OrderedDict,
    "collections.Counter": collections.Counter,
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "builtins.complex": complex,
    "builtins.slice": slice,
    "builtins.range": range,
    "builtins.bytearray": bytearray,
}

_lock = threading.Lock()
_user_safe: list[Any] = []  # what add_safe_globals added, in order (objects or (obj, name) pairs)


def _global_name(entry: Any) -> tuple[str, Any]:
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError("add_safe_globals: a tuple entry must be (object, 'module.name'), got "
                            f"{entry!r}")
        return entry[1], entry[0]
    module = getattr(entry, "__module__", None)
    name = getattr(entry, "__qualname__", None) or getattr(entry, "__name__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        raise TypeError(f"add_safe_globals: {entry!r} has no __module__/__qualname__; pass "
                        "(object, 'module.name') instead")
    return f"{module}.{name}", entry


def add_safe_globals(safe_globals: Iterable[Any]) -> None:
    """Allows ``ember.load(..., weights_only=True)`` to unpickle these classes and functions
    (each an object, or ``(object, "module.name")`` for one saved under another name).
    Only allow-list globals of code you trust: unpickling calls them.

    >>> import argparse, ember
    >>> ember.serialization.add_safe_globals([argparse.Namespace])
    >>> argparse.Namespace in ember.serialization.get_safe_globals()
    True
    >>> ember.serialization.clear_safe_globals()
    """
    entries = list(safe_globals)
    for e in entries:
        _global_name(e)  # validates
    with _lock:
        _user_safe.extend(entries)


def get_safe_globals() -> list[Any]:
    """The globals allow-listed by :func:`add_safe_globals` (and active :class:`safe_globals`
    blocks)."""
    with _lock:
        return list(_user_safe)


def clear_safe_globals() -> None:
    """Forgets every global added by :func:`add_safe_globals`."""
    with _lock:
        _user_safe.clear()


class safe_globals:  # noqa: N801  (PyTorch's name; used as a context manager)
    """Allow-lists globals for ``ember.load`` inside a ``with`` block only.

    >>> import argparse, io, ember
    >>> buf = io.BytesIO()
    >>> ember.save(argparse.Namespace(lr=0.1), buf)
    >>> _ = buf.seek(0)
    >>> with ember.serialization.safe_globals([argparse.Namespace]):
    ...     ember.load(buf)
    Namespace(lr=0.1)
    """

    def __init__(self, safe_globals: Iterable[Any]) -> None:
        self.globals = list(safe_globals)
        for e in self.globals:
            _global_name(e)

    def __enter__(self) -> safe_globals:
        with _lock:
            self._start = len(_user_safe)
            _user_safe.extend(self.globals)
        return self

    def __exit__(self, *exc: Any) -> None:
        with _lock:
            # remove exactly what this block added (blocks may nest)
            for e in self.globals:
                for i in range(len(_user_safe) - 1, -1, -1):
                    if _user_safe[i] is e:
                        del _user_safe[i]
                        break


def _allowed() -> dict[str, Any]:
    allowed = dict(_DEFAULT_SAFE)
    import ember

    allowed["ember._size.Size"] = ember.Size
    # the namedtuples ember's ops return (values, indices): plain data, as safe as a tuple
    import ember.return_types as rt

    for name, cls in vars(rt).items():
        if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
            allowed[f"{cls.__module__}.{cls.__qualname__}"] = cls
    with _lock:
        for e in _user_safe:
            name, obj = _global_name(e)
            allowed[name] = obj
    return allowed


_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE",
                         "SHORT_BINSTRING", "BINSTRING", "STRING"})


def pickle_globals(data: bytes) -> list[str]:
    """The globals (``"module.name"``) a pickle stream (of one or more pickles) names, in order,
    each once, read from its opcodes without unpickling anything."""
    import pickletools

    found: dict[str, None] = {}
    stream = io.BytesIO(data)
    # ember.save's pickles share one memo (one Pickler, one Unpickler): a later pickle may name
    # its module by a BINGET of a string an earlier one memoized
    memo: dict[int, Any] = {}
    while stream.tell() < len(data):
        strings: list[Any] = []
        top: Any = None  # the last value pushed, when it is a string (what memo ops store)
        for op, arg, _ in pickletools.genops(stream):
            name = op.name
            if name in _STRING_OPS:
                top = arg
                strings.append(arg)
            elif name in ("BINGET", "LONG_BINGET", "GET"):
                top = memo.get(int(arg))
                strings.append(top)
            elif name == "MEMOIZE":
                memo[len(memo)] = top
            elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
                memo[int(arg)] = top
            elif name == "GLOBAL":
                found[str(arg).replace(" ", ".")] = None
                top = None
            elif name == "STACK_GLOBAL":
                if len(strings) >= 2 and all(isinstance(v, str) for v in strings[-2:]):
                    found[f"{strings[-2]}.{strings[-1]}"] = None
                top = None
            else:
                top = None
    return list(found)


# ---- saving -------------------------------------------------------------------------------------


def _numpy_node(w: Any, obj: Any) -> dict | None:
    """A native node for a NumPy array or scalar, or None when it must be pickled."""
    np = sys.modules.get("numpy")
    if np is None or not isinstance(obj, (np.ndarray, np.generic)):
        return None
    dt = obj.dtype
    if dt.hasobject or dt.fields is not None or dt.subdtype is not None:
        return None
    if isinstance(obj, np.generic):
        return {"$npscalar": [dt.str, obj.tobytes().hex()]}
    from ember import _C

    data = np.ascontiguousarray(obj).reshape(-1).view(np.uint8)
    u8 = _C._tensor_from_bytes(data.tobytes(), _C.uint8, [data.size])
    return {"$ndarray": {"tensor": w.tensor(u8), "dtype": dt.str, "shape": list(obj.shape)}}


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, w: Any) -> None:
        super().__init__(file, protocol=getattr(w, "pickle_protocol", _PROTOCOL))
        self.w = w

    def persistent_id(self, obj: Any) -> Any:
        import ember

        if isinstance(obj, ember.Tensor) and obj.is_nested:  # its parts, as ember.save does
            return ("node", self.w.encode(obj, "(pickled)", 0, set()))
        if isinstance(obj, ember.Tensor):
            return ("tensor", self.w.tensor(obj))
        if isinstance(obj, (ember.dtype, ember.device)):
            return ("node", self.w.encode(obj, "(pickled)", 0, set()))
        node = _numpy_node(self.w, obj)
        if node is not None:
            return ("node", node)
        return None


def encode_object(w: Any, obj: Any, path: str) -> Any:
    """The node for an object the JSON tree has no native form for (NumPy data or a pickle)."""
    node = _numpy_node(w, obj)
    if node is not None:
        return node
    if getattr(w, "_pickler", None) is None:
        w._pickle_buf = io.BytesIO()
        w._pickler = _Pickler(w._pickle_buf, w)
        w._pickle_count = 0
    try:
        w._pickler.dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        # pickle's own exception class (PicklingError for a lambda, AttributeError for a local
        # object, TypeError for a lock), as torch.save lets it through, with where it was
        raise type(exc)(f"ember.save: cannot save the {type(obj).__name__} at {path}: it is not "
                        f"a tensor, number, string, container or NumPy array, and pickling it "
                        f"failed: {exc}") from exc
    w._pickle_count += 1
    return {"$pickle": w._pickle_count - 1}


def finish(w: Any, root: Any) -> Any:
    """Wraps the root when the tree holds pickles: their stream is stored as one storage."""
    if getattr(w, "_pickler", None) is None:
        return root
    from ember import _C

    data = w._pickle_buf.getvalue()
    u8 = _C._tensor_from_bytes(data, _C.uint8, [len(data)])
    return {"$objects": {"pickles": w.tensor(u8), "count": w._pickle_count, "root": root}}


# ---- loading ------------------------------------------------------------------------------------


def _refusal(src_name: str, what: str, name: str) -> pickle.UnpicklingError:
    short = name.rsplit(".", 1)[-1]
    return pickle.UnpicklingError(
        f"ember.load: weights-only loading of {src_name} stopped: the file holds a pickled "
        f"object that needs {what} '{name}', which is not allow-listed (with weights_only=True, "
        "the default, ember.load runs no code from a file). If you trust where the file comes "
        "from, either load it with ember.load(..., weights_only=False), which can run arbitrary "
        f"code, or allow this global: ember.serialization.add_safe_globals([{short}]), or "
        f"`with ember.serialization.safe_globals([{short}]): ember.load(...)` for one load."
    )


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, reader: Any, weights_only: bool, **load_args: Any) -> None:
        super().__init__(file, **load_args)
        self.reader = reader
        self.weights_only = weights_only
        self.allowed = _allowed() if weights_only else None

    def find_class(self, module: str, name: str) -> Any:
        if self.allowed is None:
            return super().find_class(module, name)
        full = f"{module}.{name}"
        if full in self.allowed:
            return self.allowed[full]
        raise _refusal(self.reader.src.name, "the global", full)

    def persistent_load(self, pid: Any) -> Any:
        if isinstance(pid, tuple) and len(pid) == 2:
            kind, val = pid
            if kind == "tensor":
                return self.reader.tensor(val)
            if kind == "node":
                return self.reader.decode(val, 1)
        raise pickle.UnpicklingError(f"ember.load: corrupt checkpoint {self.reader.src.name}: "
                                     f"unknown persistent id {pid!r}")


def decode_node(reader: Any, tag: str, val: Any, depth: int) -> Any:
    from ember.serialization import CheckpointError

    src = reader.src

    def check(cond: bool, what: str) -> None:
        if not cond:
            raise CheckpointError(f"{src.name}: corrupt checkpoint: {what}")

    if tag == "$objects":
        check(isinstance(val, dict) and isinstance(val.get("count"), int) and "root" in val,
              f"malformed objects node {val!r}")
        data = bytes(memoryview(reader.tensor(val["pickles"])))
        reader._unpickler = _Unpickler(io.BytesIO(data), reader,
                                       getattr(reader, "weights_only", True) is not False,
                                       **getattr(reader, "pickle_load_args", {}))
        reader._pickled = []
        reader._pickle_count = val["count"]
        return reader.decode(val["root"], depth + 1)
    if tag == "$pickle":
        check(isinstance(val, int) and 0 <= val < getattr(reader, "_pickle_count", 0),
              f"pickle index {val!r} out of range")
        # one stream with one memo: load the objects in order up to this one
        while len(reader._pickled) <= val:
            try:
                reader._pickled.append(reader._unpickler.load())
            except pickle.UnpicklingError:
                raise
            except EOFError:
                raise CheckpointError(f"{src.name}: corrupt checkpoint: the pickle stream ends "
                                      "early") from None
        return reader._pickled[val]
    import numpy as np

    if tag == "$npscalar":
        check(isinstance(val, list) and len(val) == 2 and all(isinstance(v, str) for v in val),
              f"malformed NumPy scalar {val!r}")
        dt = _numpy_dtype(np, val[0], check)
        raw = bytes.fromhex(val[1])
        check(len(raw) == dt.itemsize, f"NumPy scalar of {len(raw)} bytes for dtype {val[0]}")
        return np.frombuffer(raw, dtype=dt)[0]
    if tag == "$ndarray":
        check(isinstance(val, dict) and isinstance(val.get("shape"), list) and
              isinstance(val.get("dtype"), str), f"malformed NumPy array {val!r}")
        dt = _numpy_dtype(np, val["dtype"], check)
        shape = tuple(val["shape"])
        check(all(isinstance(s, int) and s >= 0 for s in shape), f"bad shape {shape}")
        u8 = reader.tensor(val["tensor"])
        n = 1
        for s in shape:
            n *= s
        check(u8.numel() == n * dt.itemsize, f"NumPy array of shape {shape} and dtype "
              f"{val['dtype']} needs {n * dt.itemsize} bytes, the file holds {u8.numel()}")
        return np.frombuffer(bytes(memoryview(u8)), dtype=dt).reshape(shape).copy()
    raise CheckpointError(f"{src.name}: corrupt checkpoint: unknown node type {tag!r}")


def _numpy_dtype(np: Any, s: str, check: Any) -> Any:
    # dtype strings like "<f4", "|b1", "<M8[ns]": np.dtype parses them without running code
    check(len(s) <= 32 and s[:1] in "<>|=" , f"bad NumPy dtype {s!r}")
    try:
        dt = np.dtype(s)
    except TypeError:
        check(False, f"bad NumPy dtype {s!r}")
    check(not dt.hasobject, f"NumPy dtype {s!r} holds objects")
    return dt
