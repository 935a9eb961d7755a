"""Checkpoint files that loading can never turn into code execution.

``ember.save(obj, f)`` writes nested dicts / lists / tuples of tensors, numbers, strings, bytes,
None and bools (state dicts, optimizer states) to one file::

    [prelude: magic "EMBERCKP", u32 version, u32 header crc32, u64 header offset, u64 header
     length, zero padding to 64 bytes]
    [storage 0][storage 1]...   raw little-endian bytes, each starting on a 64-byte boundary
    [header: UTF-8 JSON describing the storages (offset, size, crc32), the tensors (storage,
     dtype, shape, strides, offset) and the object tree]

Tensors that share memory (views) share one storage in the file and again after loading. The
header comes last so that saving streams each storage once. ``ember.load`` reads only JSON and
raw bytes, checks every offset, size, view and checksum against the file, and with
``mmap=True`` memory-maps the storages instead of reading them. Objects the tree cannot express
are pickled (``_serialization_objects``) and unpickled only with ``weights_only=False`` or
allow-listed globals (``add_safe_globals``).

Saving to a path writes a temporary file next to it and renames it over the target when it is
complete, so a checkpoint saved over the one a process has memory-mapped (the usual "save the
latest to ckpt.pt" loop) never changes or truncates the mapped file: the mapping keeps the old
file's contents, and an interrupted save leaves the previous checkpoint intact.

``ember.save_safetensors`` / ``ember.load_safetensors`` (or ``ember.save(..., format=
"safetensors")``) use the Hugging Face safetensors format: u64 little-endian header length, a JSON
header ``{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__":
{...}}``, then the tensors' bytes.

>>> import io, ember
>>> buf = io.BytesIO()
>>> ember.save({"w": ember.ones(2), "step": 3}, buf)
>>> _ = buf.seek(0)
>>> ember.load(buf)
{'w': tensor([1., 1.]), 'step': 3}
"""

from __future__ import annotations

import collections
import errno
import io
import json
import math
import os
import pickle
import stat
import struct
import sys
import zlib
from typing import IO, Any

from ember import _C
from ember import _serialization_objects as _objects
from ember._C import Tensor
from ember._serialization_objects import (  # noqa: F401  (PyTorch's allow-list API)
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    safe_globals,
)

__all__ = ["save", "load", "save_safetensors", "load_safetensors", "CheckpointError",
           "add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals",
           "get_unsafe_globals_in_checkpoint"]

_MAGIC = b"EMBERCKP"
_VERSION = 1
_PRELUDE = struct.Struct("<8sIIQQ")  # magic, version, header crc32, header offset, header length
_ALIGN = 64
_MAX_DEPTH = 200
_CHUNK = 1 << 24

FileLike = str | os.PathLike | IO[bytes]


class CheckpointError(RuntimeError):
    """A checkpoint file is truncated, corrupt, or not a checkpoint at all."""


def _dtypes() -> dict[str, Any]:
    import ember

    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
             "float64", "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e4m3fn",
             "float8_e5m2"]
    return {n: getattr(ember, n) for n in names}


def _dtype_name(dt) -> str:
    return repr(dt).split(".")[-1]


def _name(f) -> str:
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    return getattr(f, "name", None) or f"<{type(f).__name__}>"


# ---- saving --------------------------------------------------------------------------------------


def _storage_bytes_view(t: Tensor) -> Tensor:
    """A uint8 tensor over all of t's storage (what the file holds for it)."""
    import ember

    nbytes = t._storage_nbytes()
    if nbytes == 0:
        return ember.empty(0, dtype=ember.uint8)
    if nbytes % t.itemsize:
        raise ValueError(f"ember.save: a {_dtype_name(t.dtype)} tensor's storage has {nbytes} "
                         f"bytes, not a multiple of its item size {t.itemsize}")
    base = t.detach().as_strided([nbytes // t.itemsize], [1], 0)
    return base.view(ember.uint8)


def _location_of(t: Tensor) -> str:
    """Where a saved tensor lives, as PyTorch records it: "cpu", "cuda:0", ... (always with the
    device index on CUDA)."""
    if t.is_cpu:
        return "cpu"
    d = t.device
    if d.type == "cuda" and d.index is None:
        import ember

        return f"cuda:{ember.cuda.current_device()}"
    return str(d)


class _Writer:
    """Collects storages and tensors while encoding the object tree."""

    def __init__(self) -> None:
        self.storages: list[Tensor] = []  # uint8 views of each distinct storage
        self.storage_ids: dict[int, int] = {}
        self.tensors: list[dict] = []
        self.tensor_ids: dict[int, int] = {}
        self.keep: list[Any] = []  # keeps ids stable while encoding

    def tensor(self, t: Tensor) -> int:
        if id(t) in self.tensor_ids:
            return self.tensor_ids[id(t)]
        device = _location_of(t)
        # one file storage per memory storage: views of one tensor stay views (on a GPU too, where
        # the whole device storage is copied to the host once)
        ptr = t.untyped_storage_ptr()
        key = (str(t.device), ptr) if t._storage_nbytes() else -len(self.storages) - 1
        sid = self.storage_ids.get(key)
        if sid is None:
            sid = len(self.storages)
            self.storage_ids[key] = sid
            u8 = _storage_bytes_view(t)
            self.storages.append(u8 if u8.is_cpu else u8.cpu())
        entry = {"storage": sid, "dtype": _dtype_name(t.dtype), "shape": list(t.shape),
                 "stride": list(t.stride()), "offset": t.storage_offset(), "device": device}
        if t.requires_grad:
            entry["requires_grad"] = True
        tid = self.tensor_ids[id(t)] = len(self.tensors)
        self.keep.append(t)
        self.tensors.append(entry)
        cls = type(t)
        if cls.__name__ == "Parameter" and cls.__module__.startswith("ember"):
            entry["parameter"] = True
        elif cls is not Tensor:
            # a subclass saves its class by reference (a pickled global: loading it needs
            # weights_only=False or an allow-listed class, as in PyTorch)
            entry["pyclass"] = _objects.encode_object(self, cls, f"the class of tensor {tid}")
        from ember._tensor import _get_obj_state

        state = _get_obj_state(t)  # attributes set on the tensor (t.name = value)
        if state:
            entry["state"] = self.encode(state, f"tensor {tid}'s attributes", 1, set())
        return tid

    def encode(self, obj: Any, path: str, depth: int, active: set) -> Any:
        import ember

        if depth > _MAX_DEPTH:
            raise ValueError(f"ember.save: the object is nested more than {_MAX_DEPTH} levels deep "
                             f"at {path}")
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return obj
        if isinstance(obj, float):
            if math.isfinite(obj):
                return obj
            return {"$float": repr(obj)}
        masked = sys.modules.get("ember.masked.maskedtensor")
        if masked is not None and isinstance(obj, masked.MaskedTensor):  # its data and mask
            fields = [obj.get_data().detach(), obj.get_mask(), bool(obj.requires_grad)]
            return {"$masked": [self.encode(f, f"{path} (masked)", depth + 1, active)
                                for f in fields]}
        if isinstance(obj, Tensor) and obj.is_nested:  # a nested tensor: its parts
            from ember.nested.tensor import _saved_fields, _saved_strided

            strided = obj.layout is ember.strided
            fields = (_saved_strided if strided else _saved_fields)(obj, "ember.save")
            return {"$nested_strided" if strided else "$nested":
                    [self.encode(f, f"{path} (nested)", depth + 1, active) for f in fields]}
        if isinstance(obj, Tensor):
            if obj.device.type == "meta":  # was "Cannot copy out of meta tensor", naming nothing
                raise NotImplementedError(
                    f"ember.save: cannot save the meta tensor at {path} (shape "
                    f"{tuple(obj.shape)}, {obj.dtype}): a meta tensor has no data to write and "
                    "ember's checkpoint format stores data; save its shape and dtype instead, or "
                    "materialize it first (module.to_empty(device='cpu'))")
            return {"$tensor": self.tensor(obj)}
        from ember._storage import TypedStorage, UntypedStorage

        if isinstance(obj, (TypedStorage, UntypedStorage)):
            # a tensor over the whole storage (sharing its file storage with the tensors saved
            # beside it), and the element dtype of a typed storage
            typed = isinstance(obj, TypedStorage)
            node = self.encode(obj._tensor(), f"{path} (storage)", depth + 1, active)
            return {"$storage": [node, _dtype_name(obj.dtype) if typed else None]}
        if type(obj) is bytes:
            return {"$bytes": obj.hex()}
        if isinstance(obj, ember.dtype):
            return {"$dtype": _dtype_name(obj)}
        if isinstance(obj, ember.device):
            return {"$device": str(obj)}
        # only the plain containers are tree nodes: a subclass (ember.Size, a bytearray, a
        # Counter or defaultdict, a return type, a program's own dict or list class) is pickled,
        # so that it loads as itself instead of silently as its base class
        if type(obj) in _NATIVE_CONTAINERS:
            if id(obj) in active:
                raise ValueError(f"ember.save: the object contains itself at {path}")
            active.add(id(obj))
            try:
                if isinstance(obj, dict):
                    items = [[self.encode(k, f"{path} (a key)", depth + 1, active),
                              self.encode(v, f"{path}[{k!r}]", depth + 1, active)]
                             for k, v in obj.items()]
                    attrs = getattr(obj, "__dict__", None)  # an OrderedDict's own attributes
                    if attrs:
                        # a state_dict's _metadata: the module versions _load_from_state_dict
                        # migrates by (dropping it makes a load migrate a current checkpoint)
                        names = [k for k in attrs if not isinstance(k, str)]
                        if names:
                            raise TypeError(f"ember.save: the OrderedDict at {path} has an "
                                            f"attribute named {names[0]!r}, not a str")
                        state = self.encode(dict(attrs), f"{path} (attributes)", depth + 1, active)
                        return {"$odict_attrs": [items, state]}
                    tag = "$odict" if isinstance(obj, collections.OrderedDict) else "$dict"
                    return {tag: items}
                vals = [self.encode(v, f"{path}[{i}]", depth + 1, active)
                        for i, v in enumerate(obj)]
                if isinstance(obj, list):
                    return vals
                return {"$tuple": vals}
            finally:
                active.discard(id(obj))
        # NumPy data as native nodes, anything else pickled (loaded only when allowed)
        return _objects.encode_object(self, obj, path)


_NATIVE_CONTAINERS = (list, tuple, dict, collections.OrderedDict)


def _pad(n: int) -> int:
    return (-n) % _ALIGN


def _write_storage(out: IO[bytes], u8: Tensor) -> int:
    """Writes the bytes of a uint8 tensor; returns their crc32."""
    n = u8.numel()
    if n == 0:
        return 0
    mv = memoryview(u8)
    crc = 0
    for start in range(0, n, _CHUNK):
        chunk = mv[start:start + _CHUNK]
        crc = zlib.crc32(chunk, crc)
        out.write(chunk)
    return crc


def _check_pickle_module(name: str, pickle_module: Any) -> None:
    if pickle_module is not None and pickle_module is not pickle:
        raise TypeError(
            f"{name}: pickle_module must be the standard pickle module (or None), got "
            f"{getattr(pickle_module, '__name__', type(pickle_module).__name__)}: the file is an "
            "ember checkpoint, not a pickle, and its pickled objects use the standard pickler"
        )


def save(obj: Any, f: FileLike, pickle_module: Any = None, pickle_protocol: int | None = None,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False,
         format: str = "ember") -> None:
    """Saves ``obj`` (nested dicts / lists / tuples of tensors, numbers, strings, bytes, None,
    bools, NumPy arrays; any other picklable object, such as a whole module, is pickled with its
    tensors stored beside the pickle) to the path or binary file ``f``. ``format="safetensors"`` writes a flat
    ``{str: Tensor}`` dict as safetensors instead; ``format="torch"`` writes torch.save's zip
    format, which ``torch.load`` reads (containers of tensors, Parameters, numbers, strings,
    dtypes, devices and Sizes: state dicts and optimizer states, not whole modules).

    PyTorch's other arguments are taken: ``pickle_protocol`` is the protocol of the pickled
    objects (4 unless given); ``pickle_module`` may be the standard ``pickle`` module (the file
    is not a pickle, so no other pickler can write it); ``_use_new_zipfile_serialization`` and
    ``_disable_byteorder_record`` choose between PyTorch's container formats, and ember writes
    its one format (little-endian) whatever they say.

    >>> import io, ember
    >>> buf = io.BytesIO()
    >>> x = ember.arange(6.0)
    >>> ember.save({"x": x, "view": x[2:4]}, buf)
    >>> _ = buf.seek(0)
    >>> d = ember.load(buf)
    >>> d["view"].data_ptr() - d["x"].data_ptr()  # still a view
    8
    """
    _check_pickle_module("ember.save", pickle_module)
    if pickle_protocol is not None and (
            isinstance(pickle_protocol, bool) or not isinstance(pickle_protocol, int)
            or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL):
        # a non-int is a TypeError (PyTorch's class: pickle's own), an int out of range not
        err = ValueError if isinstance(pickle_protocol, int) else TypeError
        raise err(f"ember.save: pickle_protocol must be an int from 2 to "
                  f"{pickle.HIGHEST_PROTOCOL}, got {pickle_protocol!r}")
    if format == "safetensors":
        save_safetensors(obj, f)
        return
    if format == "torch":
        _save_torch(obj, f, 2 if pickle_protocol is None else pickle_protocol)
        return
    if format != "ember":
        raise ValueError(f"ember.save: unknown format {format!r}; expected 'ember', 'torch' or "
                         "'safetensors'")
    w = _Writer()
    if pickle_protocol is not None:
        w.pickle_protocol = pickle_protocol
    root = _objects.finish(w, w.encode(obj, "obj", 0, set()))
    _to_file(f, lambda out: _write(out, w, root))


def _save_torch(obj: Any, f: FileLike, protocol: int) -> None:
    from ember._torch_checkpoint import save_torch_zip

    _to_file(f, lambda out: save_torch_zip(obj, out, protocol))


def _to_file(f: FileLike, write: Any) -> None:
    """write(out) into the path f (a temporary file renamed over it once whole) or the binary
    file f; a file that cannot seek gets the bytes built in memory first (both formats seek
    back: ember's prelude is filled in last, zip entries' headers after their data)."""
    if isinstance(f, (str, os.PathLike)):
        with _replacing(f) as out:  # a FIFO or a device path gives a file that cannot seek
            _to_file(out, write)
        return
    if not hasattr(f, "write"):
        raise TypeError(f"ember.save: expected a path or a binary file object, got "
                        f"{type(f).__name__}")
    if getattr(f, "seekable", lambda: False)() and not _appends(f):
        write(_WholeWrites(f))
    else:
        buf = io.BytesIO()
        write(buf)
        _WholeWrites(f).write(buf.getbuffer())


def _appends(f: Any) -> bool:
    """Whether every write to f goes to its end (opened with "ab" or O_APPEND): seeking back to
    fill in a header then writes it after the data instead, a checkpoint nothing can read."""
    mode = getattr(f, "mode", None)
    if isinstance(mode, str) and "a" in mode:
        return True
    try:
        import fcntl

        return bool(fcntl.fcntl(f.fileno(), fcntl.F_GETFL) & os.O_APPEND)
    except (AttributeError, ImportError, OSError, ValueError, io.UnsupportedOperation):
        return False


class _WholeWrites:
    """A file object whose write() writes every byte. A raw file (``io.RawIOBase``:
    ``open(p, "wb", buffering=0)``, a socket's or pipe's file) may take only part of a buffer
    and return how much it took; taking that as done left a truncated checkpoint behind without
    an error. The rest is written again, and a write that takes nothing (0, or None: it would
    block) is an OSError instead of a silently short file. Other file objects (buffered files,
    BytesIO, compressors whose count is not of the bytes given) write whole buffers or raise, and
    are called once, as before."""

    def __init__(self, f: Any) -> None:
        self._f = f
        self._raw = isinstance(f, io.RawIOBase)

    def write(self, data: Any) -> Any:
        if not self._raw:
            return self._f.write(data)
        mv = memoryview(data).cast("B")
        n = len(mv)
        done = 0
        while done < n:
            k = self._f.write(mv[done:] if done else mv)
            if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
                return n  # no count to go by
            if k is None or k <= 0:
                why = "returned None (it would block)" if k is None else f"returned {k}"
                raise OSError(errno.EAGAIN if k is None else errno.EIO,
                              f"ember.save: writing to {_name(self._f)} stopped after {done} "
                              f"of the {n} bytes of a write: its write() {why}; what it holds "
                              "is an incomplete checkpoint")
            done += k
        return n

    def __getattr__(self, name: str) -> Any:  # tell, seek, flush, name, ...
        return getattr(self._f, name)


class _replacing:
    """Opens a temporary file next to ``path`` for writing and, once the block ends without an
    error, renames it over ``path`` (atomically, keeping ``path``'s permissions when it exists).
    A process that memory-mapped the old file keeps seeing the old contents (its inode is not
    truncated or rewritten in place); on an error the temporary file is removed."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.path.realpath(os.fspath(path))  # through a symlink, as open() writes
        self.tmp: str | None = None

    def __enter__(self) -> IO[bytes]:
        import secrets

        folder, base = os.path.split(self.path)
        if os.path.isdir(self.path):  # checked first: the rename would fail only at the end
            raise IsADirectoryError(errno.EISDIR, "ember.save: the target is a directory",
                                    self.path)
        try:
            mode = os.stat(self.path).st_mode
        except OSError:
            mode = None  # a new file
        if mode is not None and stat.S_ISREG(mode) and not os.access(self.path, os.W_OK):
            # open(path, "wb") refuses a file this user may not write (a checkpoint made
            # read-only to protect it); the rename would replace it all the same
            raise PermissionError(errno.EACCES, "ember.save: the target file is not writable "
                                  "(it is kept as it is)", self.path)
        if mode is not None and not stat.S_ISREG(mode):
            # A device or a pipe (/dev/null, a FIFO, /proc/self/fd/1): written to, as open()
            # does; renaming over it would replace the device node with a regular file.
            self.out = open(self.path, "wb")
            return self.out
        tmp = os.path.join(folder, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:  # mode 0o666 less the umask, as open() gives a new file
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError:  # a folder we may not create files in: write the file in place
            self.out = open(self.path, "wb")
            return self.out
        self.tmp = tmp
        try:
            os.chmod(tmp, os.stat(self.path).st_mode & 0o7777)  # the replaced file's mode
        except OSError:
            pass  # a new file
        self.out = os.fdopen(fd, "wb")
        return self.out

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.out.close()
        finally:
            if self.tmp is None:
                pass
            elif exc_type is None:
                try:
                    os.replace(self.tmp, self.path)
                except BaseException:
                    self._discard()
                    raise
            else:
                self._discard()

    def _discard(self) -> None:
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


def _write(out: IO[bytes], w: _Writer, root: Any) -> None:
    start = out.tell()
    out.write(b"\0" * _ALIGN)  # the prelude, filled in at the end
    pos = _ALIGN
    storages = []
    for u8 in w.storages:
        crc = _write_storage(out, u8)
        storages.append({"offset": pos, "nbytes": u8.numel(), "crc32": crc})
        pos += u8.numel()
        pad = _pad(pos)
        out.write(b"\0" * pad)
        pos += pad
    header = json.dumps({"format": "ember", "version": _VERSION, "byteorder": sys.byteorder,
                         "storages": storages, "tensors": w.tensors, "root": root},
                        separators=(",", ":"), allow_nan=False).encode()
    out.write(header)
    end = out.tell()
    out.seek(start)
    out.write(_PRELUDE.pack(_MAGIC, _VERSION, zlib.crc32(header), pos, len(header)))
    out.seek(end)


# ---- loading -------------------------------------------------------------------------------------


class _Source:
    """Random access to the bytes of a checkpoint: a path (optionally memory-mapped) or a file."""

    def __init__(self, f: FileLike) -> None:
        if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "read"):
            raise TypeError(f"ember.load: f must be a path or a binary file-like object (with "
                            f"read, and seek/tell unless it is a stream), got "
                            f"{type(f).__name__}")
        self.name = _name(f)
        self.path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else None
        self.file = open(self.path, "rb") if self.path is not None else f
        self.owned = self.path is not None
        try:
            self.start = self.file.tell()
            self.file.seek(0, os.SEEK_END)
            self.size = self.file.tell() - self.start
            self.file.seek(self.start)
        except (AttributeError, OSError, io.UnsupportedOperation):  # a pipe: read it all
            data = self.file.read()
            self.file = io.BytesIO(data)
            self.start, self.size = 0, len(data)

    def error(self, what: str) -> CheckpointError:
        return CheckpointError(f"{self.name}: {what}")

    def read(self, offset: int, n: int, what: str) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise self.error(f"truncated or corrupt file: {what} spans bytes [{offset}, "
                             f"{offset + n}) but the file has only {self.size} bytes")
        self.file.seek(self.start + offset)
        data = self.file.read(n)
        while data is not None and 0 < len(data) < n:  # a raw file may return fewer bytes
            more = self.file.read(n - len(data))
            if not more:
                break
            data += more
        if data is None or len(data) != n:
            data = data or b""
            raise self.error(f"truncated file: could read only {len(data)} of the {n} bytes of "
                             f"{what}")
        return data

    def readinto(self, offset: int, target: memoryview) -> None:
        self.file.seek(self.start + offset)
        got = 0
        n = target.nbytes
        while got < n:
            k = self.file.readinto(target[got:])
            if not k:
                raise self.error(f"truncated file: storage at byte {offset} ends after {got} of "
                                 f"{n} bytes")
            got += k

    def map_range(self, offset: int, n: int) -> Tensor:
        """A uint8 tensor mapped over n bytes at ``offset``: private and copy-on-write (the
        tensor is writable, writes never reach the file), guarded so that reading pages the
        file has lost since (truncated by another program) gives zeros, not SIGBUS."""
        try:
            fd = self.file.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation) as exc:
            raise self.error("mmap=True needs a file on disk") from exc
        return _C._map_file(fd, self.start + offset, n)

    def close(self) -> None:
        if self.owned:
            self.file.close()


def _check(cond: bool, src: _Source, what: str) -> None:
    if not cond:
        raise src.error(f"corrupt checkpoint: {what}")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _resolve_device(loc: str, map_location) -> str:
    if map_location is None:
        return loc
    if callable(map_location):
        return loc  # applied to the finished tensor
    if isinstance(map_location, dict):
        return str(map_location.get(loc, loc))
    return str(map_location)


class _Reader:
    def __init__(self, src: _Source, header: dict, mmap: bool, map_location) -> None:
        self.src, self.header, self.mmap, self.map_location = src, header, mmap, map_location
        self.dtypes = _dtypes()
        self.storages: dict[int, Tensor] = {}
        self.tensors: dict[int, Tensor] = {}
        self.header_offset = src.size
        self.shared_with_other_dtypes: set | None = None  # storages of non-bool tensors
        self.device_storages: dict[tuple, Tensor] = {}  # storages copied to a device

    def storage(self, sid: int) -> Tensor:
        import ember

        if sid in self.storages:
            return self.storages[sid]
        src = self.src
        entries = self.header["storages"]
        _check(_is_int(sid) and 0 <= sid < len(entries), src, f"storage index {sid!r} out of range")
        e = entries[sid]
        _check(isinstance(e, dict) and _is_int(e.get("offset")) and _is_int(e.get("nbytes")) and
               _is_int(e.get("crc32")), src, f"storage {sid} entry is malformed: {e!r}")
        off, n = e["offset"], e["nbytes"]
        limit = self.header_offset
        if off < _PRELUDE.size or n < 0 or off + n > limit:
            if off + n > src.size:
                raise src.error(f"truncated file: storage {sid} needs bytes [{off}, {off + n}) but "
                                f"the file has {src.size} bytes")
            raise src.error(f"corrupt checkpoint: storage {sid} spans bytes [{off}, {off + n}), "
                            f"outside the data area [{_PRELUDE.size}, {limit})")
        if n == 0:
            t = ember.empty(0, dtype=ember.uint8)
        elif self.mmap:
            t = src.map_range(off, n)
        else:
            t = ember.empty(n, dtype=ember.uint8)
            src.readinto(off, memoryview(t))
        # mapped storages are verified too: this reads them once through the page cache (they
        # stay shared with it), so a corrupt file fails here, not as wrong numbers later
        crc = zlib.crc32(memoryview(t)) if n else 0
        if crc != e["crc32"]:
            raise src.error(f"corrupt checkpoint: storage {sid} (bytes [{off}, {off + n})) "
                            f"has checksum {crc:#010x}, expected {e['crc32']:#010x}")
        self.storages[sid] = t
        return t

    def tensor(self, tid: int) -> Tensor:
        if tid in self.tensors:
            return self.tensors[tid]
        src = self.src
        entries = self.header["tensors"]
        _check(_is_int(tid) and 0 <= tid < len(entries), src, f"tensor index {tid!r} out of range")
        e = entries[tid]
        ok = (isinstance(e, dict) and e.get("dtype") in self.dtypes and
              isinstance(e.get("shape"), list) and isinstance(e.get("stride"), list) and
              len(e["shape"]) == len(e["stride"]) and
              all(_is_int(s) and 0 <= s < 2**63 for s in e["shape"]) and
              all(_is_int(s) and 0 <= s < 2**63 for s in e["stride"]) and
              math.prod(e["shape"]) < 2**63 and _is_int(e.get("offset")) and e["offset"] >= 0)
        _check(ok, src, f"tensor {tid} entry is malformed: {e!r}")
        dtype = self.dtypes[e["dtype"]]
        raw = self.storage(e["storage"])
        itemsize = _C.empty(0, dtype=dtype).itemsize
        nbytes = raw.numel()
        _check(nbytes % itemsize == 0, src, f"tensor {tid}: its storage has {nbytes} bytes, not "
               f"a multiple of the {e['dtype']} item size {itemsize}")
        numel = math.prod(e["shape"])
        if numel:
            # the last element the view touches must lie inside the storage
            last = e["offset"] + sum((n - 1) * s for n, s in zip(e["shape"], e["stride"]))
            _check(last < nbytes // itemsize, src, f"tensor {tid} (shape {e['shape']}, strides "
                   f"{e['stride']}, offset {e['offset']}) reaches element {last} of a storage of "
                   f"{nbytes // itemsize} {e['dtype']} elements")
        if e["dtype"] == "bool" and nbytes:
            raw = self._bool_bytes(e["storage"], raw)
        if sys.byteorder != self.header.get("byteorder", "little"):
            raise src.error("the file was written on a machine with the other byte order")
        loc = e.get("device", "cpu")
        _check(isinstance(loc, str), src, f"tensor {tid} has a malformed device {loc!r}")
        custom = callable(self.map_location) and not isinstance(self.map_location, (str, dict))
        if not custom:
            # the storage moves once; the tensors over it stay views there
            raw = self._placed(e["storage"], raw, self._target(loc, self.map_location))
        base = raw.view(dtype) if nbytes else _C.empty(0, dtype=dtype, device=raw.device)
        t = base.as_strided(e["shape"], e["stride"], e["offset"] if numel else 0)
        if custom:
            placed = self.map_location(t, loc)
            # None: the default placement (the saved location), as PyTorch does
            t = placed if placed is not None else self._moved(t, self._target(loc, None))
        if "pyclass" in e:
            t = t.as_subclass(self._tensor_class(tid, e["pyclass"]))
        if e.get("parameter"):
            t = self._parameter(t, bool(e.get("requires_grad")))
        elif e.get("requires_grad"):
            t.requires_grad_(True)
        self.tensors[tid] = t  # before its attributes, which may refer to it
        if "state" in e:
            from ember._tensor import _set_state

            _set_state(t, self._tensor_state(tid, self.decode(e["state"], 1)))
        return t

    def _tensor_state(self, tid: int, state: Any) -> Any:
        """A tensor's attributes as saved: a dict, or (dict, slots dict) (PyTorch's forms),
        with plain attribute names (no dunder names such as __class__ under weights_only)."""
        parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
        for part in parts:
            _check(part is None or isinstance(part, dict), self.src,
                   f"tensor {tid}'s attributes are malformed: {state!r}")
            for k in part or {}:
                _check(isinstance(k, str) and k.isidentifier(), self.src,
                       f"tensor {tid} has an attribute named {k!r}")
                _check(not (getattr(self, "weights_only", True) and k.startswith("__")),
                       self.src, f"tensor {tid} sets {k!r}, which weights-only loading refuses")
        return state

    def _tensor_class(self, tid: int, node: Any) -> type:
        cls = self.decode(node, 1)
        _check(isinstance(cls, type) and issubclass(cls, Tensor), self.src,
               f"tensor {tid}'s class {cls!r} is not a Tensor subclass")
        return cls

    def _bool_bytes(self, sid: int, raw: Tensor) -> Tensor:
        """The bytes of a bool tensor's storage with every nonzero byte made 1 (a file written
        elsewhere may hold other values, which ember, like PyTorch, reads as True). Fixed in
        place unless a tensor of another dtype shares the storage (its values must not change);
        that bool tensor then gets its own copy."""
        if int(raw.max().item()) <= 1:
            return raw
        if self.shared_with_other_dtypes is None:
            self.shared_with_other_dtypes = {e.get("storage") for e in self.header["tensors"]
                                             if isinstance(e, dict) and e.get("dtype") != "bool"}
        clean = raw.ne(0)
        if sid in self.shared_with_other_dtypes:
            return clean.view(raw.dtype)
        raw.copy_(clean)
        return raw

    def _target(self, loc: str, map_location: Any) -> str:
        """The device a tensor saved at ``loc`` loads onto (checked to exist)."""
        return _target_device(loc, map_location, self.src.name)

    def _placed(self, sid: int, raw: Tensor, target: str) -> Tensor:
        """The bytes of storage ``sid`` on ``target`` (copied there once per storage)."""
        if target == "cpu":
            return raw
        key = (sid, target, raw is self.storages.get(sid))
        hit = self.device_storages.get(key)
        if hit is None:
            hit = self.device_storages[key] = self._moved(raw, target)
        return hit

    @staticmethod
    def _moved(t: Tensor, target: str) -> Tensor:
        import ember

        return t if target == "cpu" else t.to(ember.device(target))

    @staticmethod
    def _parameter(t: Tensor, requires_grad: bool) -> Tensor:
        try:
            from ember.nn import Parameter
        except ImportError:  # ember-nn absent: a plain tensor that requires grad
            return t.requires_grad_(requires_grad)
        return Parameter(t, requires_grad=requires_grad)

    def _nested(self, tag: str, fields: list) -> Any:
        """A saved nested tensor; one object per saved jagged one (as tensors are)."""
        from ember.nested.tensor import _rebuild_jagged, _rebuild_strided

        if tag == "$nested_strided":
            try:
                return _rebuild_strided(*fields)
            except (RuntimeError, TypeError) as exc:
                raise self.src.error(f"corrupt checkpoint: {exc}") from None
        memo = self.__dict__.setdefault("_nested_memo", {})
        key = tuple(id(f) if isinstance(f, Tensor) else f for f in fields)
        if key not in memo:
            try:
                memo[key] = (_rebuild_jagged(*fields), fields)  # fields: keeps the ids alive
            except (RuntimeError, TypeError) as exc:
                raise self.src.error(f"corrupt checkpoint: {exc}") from None
        return memo[key][0]

    def decode(self, node: Any, depth: int = 0) -> Any:
        import ember

        src = self.src
        _check(depth <= _MAX_DEPTH, src, f"the object tree is nested more than {_MAX_DEPTH} deep")
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v, depth + 1) for v in node]
        _check(isinstance(node, dict) and len(node) == 1, src, f"unexpected node {node!r}")
        (tag, val), = node.items()
        if tag == "$tensor":
            return self.tensor(val)
        if tag in ("$dict", "$odict"):
            _check(isinstance(val, list) and all(isinstance(p, list) and len(p) == 2 for p in val),
                   src, f"malformed dict node {node!r}")
            out = collections.OrderedDict() if tag == "$odict" else {}
            for k, v in val:
                key = self.decode(k, depth + 1)
                _check(not isinstance(key, (list, dict)), src, f"unhashable dict key {key!r}")
                out[key] = self.decode(v, depth + 1)
            return out
        if tag == "$odict_attrs":  # an OrderedDict with attributes (a state_dict's _metadata)
            _check(isinstance(val, list) and len(val) == 2, src, f"malformed dict node {node!r}")
            out = self.decode({"$odict": val[0]}, depth)
            attrs = self.decode(val[1], depth + 1)
            _check(isinstance(attrs, dict) and all(isinstance(k, str) for k in attrs), src,
                   f"malformed dict attributes {attrs!r}")
            vars(out).update(attrs)  # (into __dict__: a key such as __class__ changes nothing)
            return out
        if tag == "$tuple":
            _check(isinstance(val, list), src, f"malformed tuple node {node!r}")
            return tuple(self.decode(v, depth + 1) for v in val)
        if tag == "$float":
            _check(val in ("nan", "inf", "-inf"), src, f"malformed float {val!r}")
            return float(val)
        if tag == "$bytes":
            _check(isinstance(val, str), src, f"malformed bytes node {node!r}")
            try:
                return bytes.fromhex(val)
            except ValueError:
                raise src.error(f"corrupt checkpoint: malformed bytes node {node!r}") from None
        if tag == "$storage":
            _check(isinstance(val, list) and len(val) == 2 and (val[1] is None or val[1] in
                   self.dtypes), src, f"malformed storage node {node!r}")
            t = self.decode(val[0], depth + 1)
            _check(isinstance(t, Tensor), src, f"malformed storage node {node!r}")
            from ember._storage import TypedStorage

            u = t.untyped_storage()
            return u if val[1] is None else TypedStorage(u, self.dtypes[val[1]])
        if tag == "$dtype":
            _check(val in self.dtypes, src, f"unknown dtype {val!r}")
            return self.dtypes[val]
        if tag == "$device":
            _check(isinstance(val, str), src, f"malformed device node {node!r}")
            return ember.device(val)
        if tag in ("$nested", "$nested_strided"):
            _check(isinstance(val, list) and len(val) == (5 if tag == "$nested" else 3), src,
                   f"malformed nested node {node!r}")
            return self._nested(tag, [self.decode(v, depth + 1) for v in val])
        if tag == "$masked":
            _check(isinstance(val, list) and len(val) == 3, src, f"malformed masked node {node!r}")
            from ember.masked.maskedtensor import _rebuild

            data, mask, requires_grad = (self.decode(v, depth + 1) for v in val)
            try:
                return _rebuild(data, mask, requires_grad is True)
            except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
                raise src.error(f"corrupt checkpoint: {exc}") from None
        if tag in _objects.TAGS:
            return _objects.decode_node(self, tag, val, depth)
        raise src.error(f"corrupt checkpoint: unknown node type {tag!r}")


def _looks_like_safetensors(head: bytes) -> bool:
    if len(head) < 9:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= 100_000_000 and head[8:9] == b"{"


def _read_header(src: _Source, head: bytes) -> tuple[dict, int]:
    """The checked JSON header of an ember checkpoint (``head``: its prelude) and its offset."""
    if len(head) < _PRELUDE.size:
        raise src.error(f"truncated file: only {src.size} bytes")
    _, version, hcrc, hoff, hlen = _PRELUDE.unpack(head)
    if version > _VERSION:
        raise src.error(f"checkpoint format version {version} is newer than this ember "
                        f"understands ({_VERSION}); upgrade ember")
    if hoff + hlen > src.size:
        raise src.error(f"truncated file: the header needs bytes [{hoff}, {hoff + hlen}) but "
                        f"the file has only {src.size} bytes")
    raw = src.read(hoff, hlen, "the header")
    if zlib.crc32(raw) != hcrc:
        raise src.error("corrupt checkpoint: the header's checksum does not match")
    try:
        header = json.loads(raw)
    except RecursionError:
        raise src.error("corrupt checkpoint: the header is nested too deeply") from None
    except ValueError as exc:
        raise src.error(f"corrupt checkpoint: the header is not valid JSON ({exc})") from None
    _check(isinstance(header, dict) and isinstance(header.get("storages"), list) and
           isinstance(header.get("tensors"), list) and "root" in header, src,
           "the header lacks storages/tensors/root")
    return header, hoff


def load(f: FileLike, map_location: Any = None, pickle_module: Any = None, *,
         weights_only: bool | None = None, mmap: bool | None = False,
         **pickle_load_args: Any) -> Any:
    """Loads what :func:`save` wrote, a safetensors file (as a dict of tensors), or a
    checkpoint PyTorch's ``torch.save`` wrote, in its zip format or its legacy one
    (``_use_new_zipfile_serialization=False``; state dicts, optimizer states,
    containers of tensors and numbers; read by an unpickler that builds only those, so the file
    never runs code: see ``ember._torch_checkpoint``).

    By default (``mmap=False``, as in PyTorch) every storage is read into memory, so the loaded
    tensors own their data: saving the next checkpoint to the same path cannot change them.
    ``mmap=True`` memory-maps the storages from the file instead (``f`` must be a file on disk):
    the mapping is private and copy-on-write (``MAP_PRIVATE``), so the tensors are writable and
    writes never reach the file, and pages are read on demand and shared with the page cache.
    Checksums are verified either way (which reads a mapped file once). :func:`save` never
    rewrites a file in place (it replaces it), so saving to the same path leaves mapped tensors
    as they were; if another program truncates the file, reading the pages it lost gives zeros
    instead of killing the process with SIGBUS. ``None`` means ``False``.

    Tensors load onto the device they were saved from ("cpu", "cuda:0", ...; a CUDA checkpoint
    on a machine without CUDA raises RuntimeError) unless ``map_location`` says otherwise: a
    device or device string (everything goes there: ``map_location="cpu"``), a dict mapping
    saved locations to devices (``{"cuda:1": "cuda:0"}``; unlisted locations stay), or a
    callable ``(tensor, location) -> tensor`` (the tensor on the CPU; returning None keeps the
    default placement). Views of one storage stay views on the device they load onto. Tensors, containers, numbers and NumPy data never run code
    when loaded; other objects were pickled by :func:`save` and load only with
    ``weights_only=False`` (trusted files) or when their classes are allow-listed with
    :func:`add_safe_globals` / :class:`safe_globals` (``pickle.UnpicklingError`` otherwise).
    ``weights_only=None`` (the default) means True, also when ``pickle_module`` is given (where
    PyTorch would switch to False); an explicit ``weights_only=True`` with a ``pickle_module`` is
    a RuntimeError, as in PyTorch.

    ``pickle_module`` (the standard ``pickle`` module or None) and ``pickle_load_args``
    (``encoding``, ``errors``, ``fix_imports``, as PyTorch passes them to the unpickler) apply to
    the pickled objects in the file.

    A truncated or corrupt file raises :class:`CheckpointError` naming the file and the problem.

    >>> import io, ember
    >>> buf = io.BytesIO()
    >>> ember.save([1.5, (ember.zeros(1), None)], buf)
    >>> _ = buf.seek(0)
    >>> ember.load(buf)
    [1.5, (tensor([0.]), None)]
    """
    _check_pickle_module("ember.load", pickle_module)
    if weights_only is True and pickle_module is not None:
        # the pickle module would be ignored (weights-only loading uses its own unpickler), so
        # asking for both is a contradiction, as in PyTorch
        raise RuntimeError("ember.load: cannot load safely (weights_only=True) with an explicit "
                           "pickle_module; drop pickle_module, or pass weights_only=False for a "
                           "file you trust")
    map_location = _checked_map_location(map_location)
    unknown = sorted(set(pickle_load_args) - {"encoding", "errors", "fix_imports"})
    if unknown:
        raise TypeError(f"ember.load: unexpected keyword arguments {unknown} (the unpickler "
                        "takes encoding, errors and fix_imports)")
    mmap = bool(mmap)
    if mmap and not isinstance(f, (str, os.PathLike)) and not _has_fileno(f):
        # nothing to map: the data would silently be read into memory instead
        raise ValueError(f"ember.load: mmap=True needs f to be a file path (or a file opened on "
                         f"disk), got {type(f).__name__}")
    src = _Source(f)
    try:
        head = src.read(0, min(src.size, _PRELUDE.size), "the prelude")
        if head[:8] != _MAGIC:
            if _looks_like_safetensors(head):
                return _placed_safetensors(_load_safetensors(src, mmap), map_location, src.name)
            if head[:4] == b"PK\x03\x04":  # PyTorch's zip format: read without running code
                from ember import _torch_checkpoint

                return _torch_checkpoint.load_torch_zip(src.read(0, src.size, "the archive"),
                                                        src.name, map_location, pickle_load_args)
            from ember import _torch_checkpoint

            if _torch_checkpoint.is_torch_legacy(head):  # PyTorch's legacy stream format
                if mmap:
                    raise src.error("mmap=True needs a checkpoint in PyTorch's zip format; "
                                    "this one is in the legacy format "
                                    "(_use_new_zipfile_serialization=False)")
                return _torch_checkpoint.load_torch_legacy(
                    src.read(0, src.size, "the checkpoint"), src.name, map_location,
                    pickle_load_args)
            if len(head) < _PRELUDE.size and _MAGIC.startswith(head):
                raise src.error(f"truncated file: only {src.size} bytes")
            raise src.error("not an ember checkpoint (bad magic bytes)")
        header, hoff = _read_header(src, head)
        reader = _Reader(src, header, mmap, map_location)
        reader.header_offset = hoff
        reader.weights_only = weights_only is not False
        reader.pickle_load_args = pickle_load_args
        try:
            return reader.decode(header["root"])
        except RecursionError:
            raise src.error("corrupt checkpoint: the object tree is too deeply nested") from None
    finally:
        src.close()


def _has_fileno(f: Any) -> bool:
    try:
        f.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return False
    return True


def _target_device(loc: str, map_location: Any, name: str) -> str:
    """The device a tensor saved at ``loc`` loads onto (checked to exist)."""
    import ember

    if map_location is None:
        target = loc
    elif isinstance(map_location, dict):
        target = str(map_location.get(loc, loc))
    else:
        target = str(map_location)
    if target in ("cpu", "meta"):  # meta: shapes and dtypes only, as in PyTorch
        return target
    if target.startswith("cuda"):
        if not ember.cuda.is_available():
            raise RuntimeError(
                f"Attempting to deserialize object on a CUDA device ('{target}', saved at "
                f"'{loc}') but ember.cuda.is_available() is False. If you are running on a "
                "CPU-only machine, please use ember.load with "
                "map_location=ember.device('cpu') to map your storages to the CPU "
                f"(loading {name})")
        try:
            index = ember.device(target).index
        except (RuntimeError, ValueError) as exc:
            raise ValueError(f"ember.load: bad map_location device {target!r} ({exc})") \
                from None
        count = ember.cuda.device_count()
        if index is not None and index >= count:
            raise RuntimeError(
                f"Attempting to deserialize object on CUDA device {index} but "
                f"ember.cuda.device_count() is {count}. Please use ember.load with "
                "map_location to map your storages to an existing device "
                f"(loading {name})")
        return target
    raise ValueError(f"ember.load: unknown map_location device {target!r} (for a tensor "
                     f"saved at '{loc}'); expected 'cpu', 'meta' or a CUDA device")


def _checked_map_location(map_location: Any) -> Any:
    """A callable ``map_location`` wrapped so that what it returns is checked: a Tensor, or None
    for the default placement (anything else would be loaded in the tensor's place)."""
    import ember

    if isinstance(map_location, (str, dict, ember.device)) or map_location is None:
        return map_location
    if not callable(map_location):
        # an int (a CUDA ordinal?) or another object would otherwise be read as a device string
        raise TypeError(f"ember.load: map_location must be a device, a device string, a dict "
                        f"of locations or a callable (tensor, location) -> tensor, got "
                        f"{type(map_location).__name__}")

    def placed(t: Tensor, location: str) -> Tensor | None:
        r = map_location(t, location)
        if r is not None and not isinstance(r, Tensor):
            raise TypeError(f"ember.load: map_location returned an object of type "
                            f"{type(r).__name__} for a tensor saved at {location!r}; it must "
                            "return a Tensor (or None for the default placement)")
        return r

    return placed


def get_unsafe_globals_in_checkpoint(f: FileLike) -> list[str]:
    """The globals (``"module.name"``) that the pickled objects of checkpoint ``f`` need and that
    are not allow-listed: what ``load(f, weights_only=True)`` would refuse. Nothing is unpickled.

    >>> import fractions, io, ember
    >>> buf = io.BytesIO()
    >>> ember.save({"w": ember.ones(1), "ratio": fractions.Fraction(1, 3)}, buf)
    >>> ember.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(buf.getvalue()))
    ['fractions.Fraction']
    """
    src = _Source(f)
    try:
        head = src.read(0, min(src.size, _PRELUDE.size), "the prelude")
        if head[:4] == b"PK\x03\x04":  # PyTorch's zip format: its data.pkl
            import zipfile

            with zipfile.ZipFile(io.BytesIO(src.read(0, src.size, "the archive"))) as z:
                name = next((n for n in z.namelist() if n.endswith("data.pkl")), None)
                data = z.read(name) if name is not None else b""
            # the tensor-rebuilding globals of PyTorch's format are what ember reads natively
            return [g for g in _objects.pickle_globals(data)
                    if not (g.startswith("torch.") or g == "collections.OrderedDict")
                    and g not in _objects._allowed()]
        if head[:8] != _MAGIC:
            return []  # safetensors and the legacy format hold no pickled objects ember runs
        header, hoff = _read_header(src, head)
        root = header["root"]
        if not (isinstance(root, dict) and isinstance(root.get("$objects"), dict)):
            return []
        reader = _Reader(src, header, False, None)
        reader.header_offset = hoff
        data = bytes(memoryview(reader.tensor(root["$objects"]["pickles"])))
    finally:
        src.close()
    allowed = _objects._allowed()
    return [g for g in _objects.pickle_globals(data) if g not in allowed]


# ---- safetensors ---------------------------------------------------------------------------------

_ST_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32",
              "I64": "int64", "F16": "float16", "BF16": "bfloat16", "F32": "float32",
              "F64": "float64", "U16": "uint16", "U32": "uint32", "U64": "uint64",
              "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}


def save_safetensors(tensors: dict[str, Tensor], path: FileLike,
                     metadata: dict[str, str] | None = None) -> None:
    """Writes a flat ``{name: tensor}`` dict in the safetensors format (readable by Hugging Face's
    ``safetensors`` library); ``metadata`` is an optional ``{str: str}`` dict.

    >>> import io, ember
    >>> buf = io.BytesIO()
    >>> ember.save_safetensors({"w": ember.ones(2, 2)}, buf, metadata={"format": "pt"})
    >>> _ = buf.seek(0)
    >>> ember.load_safetensors(buf)["w"].shape
    ember.Size([2, 2])
    """
    if not isinstance(tensors, dict):
        raise TypeError(f"save_safetensors: expected a dict of name -> Tensor, got "
                        f"{type(tensors).__name__}")
    for k, v in tensors.items():
        if not isinstance(k, str):
            raise TypeError(f"save_safetensors: keys must be str, got {k!r}")
        if not isinstance(v, Tensor):
            raise TypeError(f"save_safetensors: the value of {k!r} is a {type(v).__name__}; "
                            "safetensors holds only tensors (use ember.save for other objects)")
        if k == "__metadata__":
            raise ValueError("save_safetensors: '__metadata__' is reserved for the metadata")
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("save_safetensors: metadata must be a dict of str -> str")
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    blobs = []
    pos = 0
    # largest item size first (then by name), so every tensor's data is aligned to its item size
    for name in sorted(tensors, key=lambda k: (-tensors[k].itemsize, k)):
        t = tensors[name].detach()
        if not t.is_cpu:
            t = t.cpu()
        dt = _dtype_name(t.dtype)
        if dt not in _ST_NAMES:
            raise TypeError(f"save_safetensors: {name!r} has dtype {dt}, which safetensors has no "
                            "name for")
        u8 = t.contiguous().reshape(-1).view(_dtypes()["uint8"]) if t.numel() else None
        n = t.numel() * t.itemsize
        header[name] = {"dtype": _ST_NAMES[dt], "shape": list(t.shape), "data_offsets": [pos, pos + n]}
        blobs.append(u8)
        pos += n
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * ((-len(hjson)) % 8)  # the data starts 8-byte aligned, as HF writes it
    if isinstance(path, (str, os.PathLike)):
        with _replacing(path) as out:
            _write_safetensors(out, hjson, blobs)
    else:
        _write_safetensors(_WholeWrites(path), hjson, blobs)


def _write_safetensors(out: IO[bytes], hjson: bytes, blobs: list) -> None:
    out.write(struct.pack("<Q", len(hjson)))
    out.write(hjson)
    for u8 in blobs:
        if u8 is not None:
            _write_storage(out, u8)


def load_safetensors(path: FileLike, device: str = "cpu", mmap: bool | None = False
                     ) -> dict[str, Tensor]:
    """Reads a safetensors file into a ``{name: tensor}`` dict. ``mmap=True`` memory-maps the
    tensors instead (private, copy-on-write, as :func:`load` describes; safetensors files carry
    no checksums); ``None`` means ``False``. The metadata is available via
    :func:`safetensors_metadata`.

    >>> import io, ember
    >>> buf = io.BytesIO()
    >>> ember.save_safetensors({"b": ember.arange(3)}, buf)
    >>> _ = buf.seek(0)
    >>> ember.load_safetensors(buf)
    {'b': tensor([0, 1, 2])}
    """
    if str(device) != "cpu":
        import ember

        return {k: v.to(ember.device(device)) for k, v in load_safetensors(path, "cpu", mmap).items()}
    src = _Source(path)
    try:
        return _load_safetensors(src, bool(mmap))
    finally:
        src.close()


def safetensors_metadata(path: FileLike) -> dict[str, str]:
    """The ``__metadata__`` dict of a safetensors file ({} when absent)."""
    src = _Source(path)
    try:
        return _st_header(src)[0].get("__metadata__", {}) or {}
    finally:
        src.close()


def _st_header(src: _Source) -> tuple[dict, int]:
    head = src.read(0, 8, "the header length")
    (n,) = struct.unpack("<Q", head)
    if n > 100_000_000:
        raise src.error(f"corrupt safetensors file: header length {n} is implausibly large")
    raw = src.read(8, n, "the safetensors header")
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise src.error(f"corrupt safetensors file: the header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise src.error("corrupt safetensors file: the header is not a JSON object")
    meta = header.get("__metadata__")
    if meta is not None and not (isinstance(meta, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items())):
        raise src.error("corrupt safetensors file: __metadata__ must map str to str")
    return header, 8 + n


def _placed_safetensors(tensors: dict[str, Tensor], map_location: Any,
                        name: str) -> dict[str, Tensor]:
    """``map_location`` applied to a safetensors file's tensors, which are saved at "cpu" (the
    format records no device)."""
    if map_location is None:
        return tensors
    if callable(map_location) and not isinstance(map_location, (str, dict)):
        placed = {k: map_location(t, "cpu") for k, t in tensors.items()}
        return {k: tensors[k] if v is None else v for k, v in placed.items()}
    target = _target_device("cpu", map_location, name)
    return {k: _Reader._moved(t, target) for k, t in tensors.items()}


def _load_safetensors(src: _Source, mmap: bool) -> dict[str, Tensor]:
    import ember

    header, data_start = _st_header(src)
    dtypes = _dtypes()
    entries = []
    for name, e in header.items():
        if name == "__metadata__":
            continue
        ok = (isinstance(e, dict) and isinstance(e.get("shape"), list) and
              all(_is_int(s) and 0 <= s < 2**63 for s in e["shape"]) and
              math.prod(e["shape"]) < 2**63 and isinstance(e.get("data_offsets"), list) and len(e["data_offsets"]) == 2 and
              all(_is_int(o) for o in e["data_offsets"]))
        if not ok:
            raise src.error(f"corrupt safetensors file: entry {name!r} is malformed: {e!r}")
        if e.get("dtype") not in _ST_DTYPES:
            raise src.error(f"safetensors entry {name!r} has dtype {e.get('dtype')!r}, which "
                            f"ember does not support (supported: {', '.join(_ST_DTYPES)})")
        entries.append((name, e))
    buffer_len = src.size - data_start
    # every byte of the data area belongs to exactly one tensor, in order (as the spec requires)
    pos = 0
    for name, e in sorted(entries, key=lambda p: tuple(p[1]["data_offsets"])):
        b, end = e["data_offsets"]
        dtype = dtypes[_ST_DTYPES[e["dtype"]]]
        itemsize = _C.empty(0, dtype=dtype).itemsize
        want = math.prod(e["shape"]) * itemsize
        if b != pos or end < b:
            raise src.error(f"corrupt safetensors file: {name!r} has data_offsets [{b}, {end}] but "
                            f"the previous tensor ends at {pos}")
        if end - b != want:
            raise src.error(f"corrupt safetensors file: {name!r} of shape {e['shape']} and dtype "
                            f"{e['dtype']} needs {want} bytes but its data_offsets span {end - b}")
        pos = end
    if pos > buffer_len:
        raise src.error(f"truncated safetensors file: the tensors need {pos} bytes of data but "
                        f"only {buffer_len} follow the header")
    if pos != buffer_len:
        raise src.error(f"corrupt safetensors file: {buffer_len - pos} bytes after the last tensor")
    out: dict[str, Tensor] = {}
    for name, e in entries:
        b, end = e["data_offsets"]
        dtype = dtypes[_ST_DTYPES[e["dtype"]]]
        n = end - b
        off = data_start + b
        if n == 0:
            raw = ember.empty(0, dtype=ember.uint8)
        elif mmap and (off % _C.empty(0, dtype=dtype).itemsize == 0):
            raw = src.map_range(off, n)
        else:
            raw = ember.empty(n, dtype=ember.uint8)
            src.readinto(off, memoryview(raw))
        if e["dtype"] == "BOOL" and n and int(raw.max().item()) > 1:
            raw.copy_(raw.ne(0))  # any nonzero byte is True (as PyTorch reads it): store 1
        t = raw.view(dtype).reshape(e["shape"]) if n else ember.empty(e["shape"], dtype=dtype)
        out[name] = t
    return out

