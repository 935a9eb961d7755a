"""Reading the checkpoints PyTorch's ``torch.save`` writes (its zip format: ``<name>/data.pkl``
and one ``<name>/data/<key>`` file per storage), so that ``ember.load`` opens a ``.pt``/``.pth``
file from a PyTorch run: state dicts, optimizer states, nested containers of tensors, numbers and
strings; and writing that format (``ember.save(obj, f, format="torch")``, at the end of this file)
so that ``torch.load`` opens an ember run's checkpoint. The writer names torch's globals in the
pickle (``torch._utils._rebuild_tensor_v2``, ``torch.FloatStorage``, ...) without importing torch.

The object tree is a pickle, read here with an unpickler that can build nothing but what such a
file needs, as PyTorch's own ``weights_only=True`` loader does: ``find_class`` answers only a
fixed list of names (the tensor and parameter rebuild functions, the storage types, dtypes,
``torch.Size``, ``torch.device``, ``OrderedDict``, ``_codecs.encode`` for bytes, NumPy's array
and scalar reconstructors), each mapped to ember or NumPy code; any other global (a pickled class, a function) is refused with
``pickle.UnpicklingError``. So loading a file never imports or runs code named by the file.
Whole pickled modules (``torch.save(model)``) therefore do not load; save the ``state_dict()``.

The legacy format (``torch.save(obj, f, _use_new_zipfile_serialization=False)``, and files from
PyTorch before 1.6) is one stream instead of an archive: five pickles in a row (a magic number,
the protocol version 1001, a dict describing the writer's byte order and type sizes, the object
tree, the sorted list of storage keys), then each listed storage's data: an int64 element count
and the elements, little-endian. Its persistent ids have a sixth field, an old-style view of
another storage (``(view key, offset, size)`` in elements) or None. The object's pickle comes
before the data it refers to, so it is read twice: once to learn the storages (allocated, still
empty), once more after their bytes are read, to build the tensors (and move them where
``map_location`` says) from filled storages. Read by the same restricted unpickler.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
import sys
import zipfile
import zlib
from typing import Any, Callable

from ember import _C
from ember._C import Tensor

# the storage classes' names -> ember dtype names
_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
    "BoolStorage": "bool", "UntypedStorage": "uint8", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}
_DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                "uint8", "bool", "float", "double", "half", "long", "int", "short", "complex64",
                "complex128", "cfloat", "cdouble", "uint16", "uint32", "uint64", "float8_e4m3fn",
                "float8_e5m2")


def _refused(message: str) -> pickle.UnpicklingError:
    """The error for a global the reader does not build (named, with advice): a plain
    UnpicklingError, marked so that it is raised as is, not reported as a corrupt file."""
    exc = pickle.UnpicklingError(message)
    exc._ember_refused = True  # type: ignore[attr-defined]
    return exc


def _not_the_files(exc: BaseException) -> bool:
    """Whether exc while reading a checkpoint is no sign of a corrupt file: ember running out
    of memory for a storage, whose size the file's real bytes bound (reported as corruption, a
    good file could be deleted). Python's MemoryError stays a sign of corruption: the unpickler
    raises it for a length field that is garbage."""
    import ember

    return isinstance(exc, ember.OutOfMemoryError)


def _is_refused(exc: BaseException) -> bool:
    return getattr(exc, "_ember_refused", False)


# the quantized storage classes' names -> (the ember dtype of their bytes, the quantized dtype)
_QSTORAGE_DTYPES = {"QInt8Storage": ("int8", "qint8"), "QUInt8Storage": ("uint8", "quint8"),
                    "QInt32Storage": ("int32", "qint32"),
                    "QUInt4x2Storage": ("uint8", "quint4x2"),
                    "QUInt2x4Storage": ("uint8", "quint2x4")}


class _StorageType:
    """Stands for a torch storage class in the pickle: only its dtype matters (and, for a
    quantized storage, its quantized dtype)."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name in _QSTORAGE_DTYPES:
            self.dtype, self.qdtype = _QSTORAGE_DTYPES[name]
        else:
            self.dtype, self.qdtype = _STORAGE_DTYPES[name], None


class _Storage:
    """A storage read from the archive: its bytes as a 1-d uint8 tensor, and where it was."""

    def __init__(self, raw: Tensor, dtype: str, location: str, qdtype: str | None = None
                 ) -> None:
        self.raw, self.dtype, self.location = raw, dtype, location
        self.qdtype = qdtype


def _dtype(name: str) -> Any:
    import ember

    return getattr(ember, name)


class _Loader:
    def __init__(self, zf: zipfile.ZipFile, prefix: str, name: str, map_location: Any) -> None:
        self.zf, self.prefix, self.name = zf, prefix, name
        self.map_location = map_location
        self.passthrough: BaseException | None = None  # an error of the caller's, not the file's
        self.storages: dict[str, _Storage] = {}
        order = f"{prefix}byteorder"
        self.byteorder = (self.read_member(order).decode("ascii", "replace")
                          if order in zf.namelist() else "little")
        if self.byteorder not in ("little", "big"):
            raise self.error(f"unknown byte order {self.byteorder!r}")

    def error(self, what: str) -> Exception:
        from ember.serialization import CheckpointError

        return CheckpointError(f"{self.name}: {what}")

    # ---- the pickle's hooks ----------------------------------------------------------------
    def persistent_load(self, saved_id: Any) -> _Storage:
        if not (isinstance(saved_id, tuple) and len(saved_id) == 5 and saved_id[0] == "storage"):
            raise pickle.UnpicklingError(f"{self.name}: unsupported persistent id {saved_id!r} "
                                         "(only storages are expected)")
        _, stype, key, location, numel = saved_id
        if not isinstance(stype, _StorageType):
            raise pickle.UnpicklingError(f"{self.name}: storage of unknown type {stype!r}")
        key = str(key)
        if key not in self.storages:
            self.storages[key] = _Storage(self.read_storage(key, stype.dtype), stype.dtype,
                                          str(location), stype.qdtype)
        return self.storages[key]

    def read_storage(self, key: str, dtype: str) -> Tensor:
        import ember

        member = f"{self.prefix}data/{key}"
        try:
            data = self.read_member(member)
        except KeyError:
            raise self.error(f"the archive lacks the storage file {member!r}") from None
        raw = ember.empty(len(data), dtype=ember.uint8)
        if data:
            memoryview(raw)[:] = data
        itemsize = _C.empty(0, dtype=_dtype(dtype)).itemsize
        if len(data) % itemsize:
            raise self.error(f"storage {key} has {len(data)} bytes, not a multiple of the "
                             f"{dtype} item size {itemsize}")
        if self.byteorder != sys.byteorder and itemsize > 1 and data:
            raw = raw.view(-1, itemsize).flip(1).reshape(-1).clone()
        return raw

    def rebuild_tensor_v3(self, storage: _Storage, offset: int, size: Any, stride: Any,
                          requires_grad: bool, backward_hooks: Any, dtype: Any,
                          metadata: Any = None) -> Tensor:
        """PyTorch's form for dtypes without a typed storage class (uint16/32/64, float8): an
        untyped storage and the dtype beside it."""
        if not isinstance(dtype, _C.dtype):
            raise self.error(f"a tensor with dtype {dtype!r}")
        return self.rebuild_tensor(storage, offset, size, stride, requires_grad, backward_hooks,
                                   metadata, dtype=dtype)

    def rebuild_tensor(self, storage: _Storage, offset: int, size: Any, stride: Any,
                       requires_grad: bool = False, backward_hooks: Any = None,
                       metadata: Any = None, dtype: Any = None) -> Tensor:
        if not isinstance(storage, _Storage):
            raise pickle.UnpicklingError(f"{self.name}: a tensor without a storage")
        self.tensors_built = getattr(self, "tensors_built", 0) + 1
        dtype = _dtype(storage.dtype) if dtype is None else dtype
        raw = storage.raw
        if not (_ints(size) and _ints(stride) and _is_int(offset)):
            # int() would truncate a float offset (reading other elements) or fail with a bare
            # "invalid literal" on a string
            raise self.error(f"corrupt PyTorch checkpoint: a tensor with size {size!r}, stride "
                             f"{stride!r} and storage offset {offset!r} (expected ints)")
        size, stride = [int(s) for s in size], [int(s) for s in stride]
        if any(s < 0 for s in size) or len(size) != len(stride):
            raise self.error(f"corrupt PyTorch checkpoint: a tensor with size {size} and stride "
                             f"{stride} (sizes must be >= 0, one stride per dim)")
        n = raw.numel() // _C.empty(0, dtype=dtype).itemsize
        if math.prod(size):
            last = int(offset) + sum((a - 1) * b for a, b in zip(size, stride))
            if int(offset) < 0 or last >= n or any(s < 0 for s in stride):
                raise self.error(f"a tensor of shape {size} (strides {stride}, offset {offset}) "
                                 f"reaches past its storage of {n} {repr(dtype).split('.')[-1]} elements")
        base = raw.view(dtype) if raw.numel() else _C.empty(0, dtype=dtype)
        if storage.dtype == "bool" and raw.numel() and int(raw.max().item()) > 1:
            base = raw.ne(0)  # any nonzero byte reads as True
        t = base.as_strided(size, stride, int(offset) if math.prod(size) else 0)
        t = self.apply_metadata(t, metadata)
        t = self.place(t, storage.location)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def apply_metadata(self, t: Tensor, metadata: Any) -> Tensor:
        """PyTorch's lazy conjugate and negative views: their storage holds the values before
        the conjugation/negation, and the pickle says so in a ``{"conj": True}`` /
        ``{"neg": True}`` dict. Ignoring it would load conj(x) as x (a silent wrong number);
        ember has no lazy views, so the values are materialized (the tensor then no longer
        shares memory with other views of that storage)."""
        if metadata is None:
            return t
        if not isinstance(metadata, dict):
            raise self.error(f"corrupt PyTorch checkpoint: a tensor's metadata is a "
                             f"{type(metadata).__name__}, expected a dict")
        unknown = sorted(str(k) for k in metadata if k not in ("conj", "neg"))
        if unknown:
            raise self.error(f"a tensor carries metadata {unknown} that ember cannot apply "
                             "(only PyTorch's 'conj' and 'neg' view bits are known)")
        if metadata.get("conj") and t.is_complex():
            t = t.conj_physical()
        if metadata.get("neg"):
            t = t.neg()
        return t

    def place(self, t: Tensor, location: str) -> Tensor:
        try:
            return self._place(t, location)
        except Exception as exc:
            # the caller's map_location (or a device it names) failed, not the file: the
            # error must reach the caller as it is, not be reported as a corrupt checkpoint
            self.passthrough = exc
            raise

    def _place(self, t: Tensor, location: str) -> Tensor:
        import ember

        ml = self.map_location
        if callable(ml) and not isinstance(ml, (str, dict, ember.device)):
            placed = ml(t, location)
            if placed is not None:
                return placed if isinstance(placed, Tensor) else t
            target = location
        elif ml is None:
            target = location
        elif isinstance(ml, dict):
            target = str(ml.get(location, location))
        else:
            target = str(ml)
        if target == "cpu":
            return t
        try:
            device = ember.device(target)
        except (RuntimeError, ValueError) as exc:
            if target == location:  # the file's own tag
                raise self.error(f"corrupt PyTorch checkpoint: a storage saved at "
                                 f"{location!r}, which is not a device ({exc})") from None
            raise ValueError(f"ember.load: bad map_location device {target!r} for a storage "
                             f"saved at {location!r} ({exc})") from None
        if target.startswith("cuda") and not ember.cuda.is_available():
            raise RuntimeError(
                f"Attempting to deserialize object on a CUDA device ('{target}') but "
                "ember.cuda.is_available() is False. If you are running on a CPU-only machine, "
                "please use ember.load with map_location=ember.device('cpu') to map your "
                f"storages to the CPU (loading {self.name})")
        return t.to(device)

    def rebuild_qtensor(self, storage: _Storage, offset: int, size: Any, stride: Any,
                        quantizer_params: Any, requires_grad: bool = False,
                        backward_hooks: Any = None) -> Any:
        """PyTorch's form of a quantized tensor: its integers in a quantized storage
        (QUInt8Storage, ...; sub-byte dtypes packed) and the quantizer's parameters."""
        from ember import _quantized

        if not isinstance(storage, _Storage) or storage.qdtype is None:
            raise self.error("corrupt PyTorch checkpoint: a quantized tensor whose storage is "
                             "not a quantized storage")
        if storage.qdtype in ("quint4x2", "quint2x4"):
            unpacked = _quantized.unpack_sub_byte(storage.raw, storage.qdtype)
            storage = _Storage(unpacked, "uint8", storage.location, storage.qdtype)
        values = self.rebuild_tensor(storage, offset, size, stride)
        if values.device.type != "cpu":
            raise RuntimeError(f"ember.load: quantized tensors are CPU-only, map_location put "
                               f"one on {values.device} (loading {self.name})")
        try:
            return _quantized.from_torch_pickle(values, storage.qdtype, quantizer_params)
        except RuntimeError as exc:
            raise self.error(f"corrupt PyTorch checkpoint: {exc}") from None

    def rebuild_meta_tensor(self, dtype: Any, size: Any, stride: Any,
                            requires_grad: bool = False) -> Tensor:
        """PyTorch's form of a meta tensor (shape, strides and dtype, no data)."""
        import ember

        if not (isinstance(dtype, _C.dtype) and _ints(size) and _ints(stride)
                and len(size) == len(stride) and all(n >= 0 for n in size)):
            raise self.error(f"corrupt PyTorch checkpoint: a meta tensor with dtype {dtype!r}, "
                             f"size {size!r} and stride {stride!r}")
        return ember.empty_strided(tuple(size), tuple(stride), dtype=dtype, device="meta",
                                   requires_grad=bool(requires_grad))

    @staticmethod
    def rebuild_parameter(data: Tensor, requires_grad: bool, backward_hooks: Any,
                          state: Any = None) -> Any:
        from ember._tensor import _set_state
        from ember.nn import Parameter

        p = Parameter(data, requires_grad=requires_grad)
        return _set_state(p, state) if state else p

    @staticmethod
    def rebuild_from_type(func: Callable[..., Any], new_type: Any, args: tuple,
                          state: Any) -> Any:
        """PyTorch's reduction of a tensor that carries Python attributes (t.name = value); its
        class is one find() resolved, so ember.Tensor or Parameter."""
        from ember._tensor import _set_state

        t = func(*args)
        if type(t) is not new_type:
            t = t.as_subclass(new_type)
        return _set_state(t, state) if state else t

    def bytearray(self, *args: Any) -> bytearray:
        """``bytearray(...)`` for the pickle: its payload (bytes or a str and an encoding, as
        pickle writes a bytearray), never ``bytearray(n)``, which would allocate n zero bytes
        from a number in the file."""
        if args and isinstance(args[0], int):
            raise pickle.UnpicklingError(f"bytearray({args[0]!r}) in the pickle (a bytearray is "
                                         "pickled with its bytes, not a size)")
        return bytearray(*args)

    @staticmethod
    def parameter_class() -> type:
        from ember.nn import Parameter

        return Parameter

    def find(self, module: str, name: str) -> Any:
        import ember

        if module == "__builtin__":  # protocol 2 pickles name the builtins as Python 2 did
            module = "builtins"
        full = f"{module}.{name}"
        table: dict[str, Callable[..., Any] | Any] = {
            "torch._utils._rebuild_tensor_v2": self.rebuild_tensor,
            "torch._utils._rebuild_tensor_v3": self.rebuild_tensor_v3,
            "torch._utils._rebuild_parameter": self.rebuild_parameter,
            "torch._utils._rebuild_parameter_with_state": self.rebuild_parameter,
            "torch._utils._rebuild_sparse_tensor": ember.sparse._rebuild_torch_sparse,
            "torch._utils._rebuild_meta_tensor_no_storage": self.rebuild_meta_tensor,
            "torch._utils._rebuild_qtensor": self.rebuild_qtensor,
            "torch._tensor._rebuild_from_type_v2": self.rebuild_from_type,
            "torch.Tensor": ember.Tensor,
            "torch.serialization._get_layout": _layout,
            "collections.OrderedDict": collections.OrderedDict,
            "collections.Counter": collections.Counter,  # (torch's weights_only loads it too)
            "torch.Size": lambda *a: ember.Size(*a),
            "torch.device": ember.device,
            "builtins.set": set, "builtins.frozenset": frozenset, "builtins.complex": complex,
            "builtins.slice": slice, "builtins.range": range, "builtins.bytearray": self.bytearray,
            "_codecs.encode": lambda s, enc="utf-8": s.encode(enc),
        }
        if full in table:
            return table[full]
        if full == "torch.nn.parameter.Parameter":
            return self.parameter_class()
        numpy_global = _numpy_global(module, name)
        if numpy_global is not None:
            return numpy_global
        if module in ("torch", "torch.storage") and (name in _STORAGE_DTYPES
                                                     or name in _QSTORAGE_DTYPES):
            return _StorageType(name)
        if module == "torch":
            from ember import _quantized

            if name in _quantized._QDTYPES:  # torch.qint8, ... (a quantized module's dtype)
                return _quantized._QDTYPES[name]
            if name in _quantized._QSCHEMES:  # torch.per_tensor_affine, ...
                return _quantized._QSCHEMES[name]
        if module == "torch" and name in _DTYPE_NAMES:
            return _dtype(name)
        if module == "torch._utils" and name.startswith("_rebuild_"):
            # a kind of tensor (nested, quantized, a wrapper subclass, ...), not a pickled object:
            # "save the state_dict()" would be the wrong advice
            kind = name[len("_rebuild_"):].replace("_", " ")
            raise _refused(
                f"{self.name}: this PyTorch checkpoint holds a tensor that torch rebuilds with "
                f"{full} ({kind}), a kind of tensor ember cannot load; convert it to a plain "
                "strided tensor before torch.save (e.g. unbind a nested tensor)")
        if module == "torch" and getattr(ember, name, None) is None and \
                name.islower() and not name.startswith("_"):
            # most likely a dtype ember lacks (complex32, float8_e4m3fnuz, qint8, ...)
            raise _refused(
                f"{self.name}: this PyTorch checkpoint needs torch.{name}, which ember does not "
                f"have (a tensor of dtype torch.{name}?); convert such tensors to a dtype ember "
                "has (ember.float32, ember.complex64, ...) before torch.save")
        raise _refused(
            f"{self.name}: this PyTorch checkpoint needs the global {full}, which ember does not "
            "load (only tensors, parameters, containers, numbers and strings load: objects such "
            "as whole pickled modules would run code from the file). Save the model's "
            "state_dict() instead")

    def read_member(self, member: str) -> bytes:
        try:
            return self.zf.read(member)
        except (zlib.error, NotImplementedError, RuntimeError, EOFError, zipfile.BadZipFile,
                UnicodeDecodeError, ValueError, OverflowError, OSError) as exc:
            # a deflated member whose data is corrupt (zlib.error), one compressed with a method
            # or zip version zipfile lacks (NotImplementedError), encrypted (RuntimeError), a
            # bad CRC or local header (BadZipFile), a mangled name (UnicodeDecodeError) or an
            # offset before the start of the file (ValueError: negative seek)
            raise self.error(f"corrupt PyTorch checkpoint: cannot read {member!r} from the "
                             f"archive ({type(exc).__name__}: {exc})") from None

    def load(self, pickle_load_args: dict) -> Any:
        return self.load_from(io.BytesIO(self.read_member(f"{self.prefix}data.pkl")),
                              pickle_load_args)

    def load_from(self, stream: io.BytesIO, pickle_load_args: dict) -> Any:
        loader = self

        class _Unpickler(pickle.Unpickler):
            def find_class(self, module: str, name: str) -> Any:
                return loader.find(module, name)

            def persistent_load(self, pid: Any) -> Any:
                loader.references += 1
                return loader.persistent_load(pid)

        self.references = self.tensors_built = 0
        obj = _Unpickler(stream, **pickle_load_args).load()
        # a storage reference no tensor consumed is a bare storage in the object tree: only then
        # is the tree walked (a deeply nested plain tree stays untouched)
        return self.public_storages(obj, {}) if self.references > self.tensors_built else obj

    def public_storages(self, obj: Any, memo: dict[int, Any]) -> Any:
        """``obj`` with every bare storage of the pickle (``torch.save(t.untyped_storage())``,
        or storages kept in a dict) turned into an ember TypedStorage sharing the tensors'
        memory, as PyTorch's loader returns them; a storage only a tensor used stays inside
        it. Walks the containers a checkpoint can hold."""
        if id(obj) in memo:
            return memo[id(obj)]
        if isinstance(obj, _Storage):
            import ember

            dt = _dtype(obj.dtype)
            flat = obj.raw.view(dt) if obj.raw.numel() else _C.empty(0, dtype=dt)
            out: Any = ember.TypedStorage(
                wrap_storage=self.place(flat, obj.location).untyped_storage(), dtype=dt)
        elif isinstance(obj, (list, dict)):
            # in place: keeps the container's identity, self-references and attributes (a state
            # dict's ``_metadata``)
            memo[id(obj)] = obj
            keys = obj.keys() if isinstance(obj, dict) else range(len(obj))
            for k in list(keys):
                v = obj[k]
                new = self.public_storages(v, memo)
                if new is not v:
                    obj[k] = new
            return obj
        elif type(obj) in (tuple, set, frozenset):
            items = [self.public_storages(v, memo) for v in obj]
            changed = any(a is not b for a, b in zip(items, obj))
            out = type(obj)(items) if changed else obj
        else:
            return obj
        memo[id(obj)] = out
        return out


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _ints(xs: Any) -> bool:
    return isinstance(xs, (tuple, list)) and all(_is_int(x) for x in xs)


def _layout(name: str) -> Any:
    """ember's layout for PyTorch's pickled name of one (``"torch.sparse_coo"``)."""
    import ember

    layouts = {"torch.strided": ember.strided, "torch.sparse_coo": ember.sparse.sparse_coo,
               "torch.sparse_csr": ember.sparse.sparse_csr,
               "torch.sparse_csc": ember.sparse.sparse_csc,
               "torch.sparse_bsr": ember.sparse.sparse_bsr,
               "torch.sparse_bsc": ember.sparse.sparse_bsc}
    if name not in layouts:
        raise pickle.UnpicklingError(f"PyTorch layout {name!r} is not supported by ember")
    return layouts[name]


def _numpy_global(module: str, name: str) -> Any:
    """NumPy's array and scalar reconstructors (training scripts save numpy floats and arrays
    in their checkpoints); their payloads are plain data."""
    if module in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray") or \
            module.startswith(("numpy.dtypes",)):
        import numpy as np

        allowed = {"dtype": np.dtype, "ndarray": np.ndarray}
        if name in allowed:
            return allowed[name]
        if name in ("scalar", "_reconstruct"):
            core = getattr(np, "_core", None) or np.core
            return getattr(core.multiarray, name)
        if module.startswith("numpy.dtypes") and name.endswith("DType"):
            return getattr(np.dtypes, name)
    return None


def is_torch_zip(data: bytes) -> bool:
    """Whether data is a zip archive (PyTorch's format starts like any zip file)."""
    return data[:4] == b"PK\x03\x04"


def load_torch_zip(data: bytes, name: str, map_location: Any, pickle_load_args: dict) -> Any:
    """The object a PyTorch zip checkpoint holds (see the module docstring)."""
    from ember.serialization import CheckpointError

    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, UnicodeDecodeError,
            OverflowError) as exc:
        # NotImplementedError: a (mangled) zip version zipfile does not read
        raise CheckpointError(f"{name}: a zip-based (pickle-based PyTorch) checkpoint that is "
                              f"truncated or corrupt ({type(exc).__name__}: {exc})") from None
    pkls = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if len(pkls) != 1:
        raise CheckpointError(f"{name}: a zip archive but not a PyTorch checkpoint (expected one "
                              f"<name>/data.pkl, found {len(pkls)})")
    loader = _Loader(zf, pkls[0][:-len("data.pkl")], name, map_location)
    try:
        return loader.load(pickle_load_args)
    except CheckpointError:
        raise
    except Exception as exc:  # any failure of a corrupt pickle's opcodes or values
        if _is_refused(exc) or exc is loader.passthrough or _not_the_files(exc):
            raise
        raise CheckpointError(f"{name}: corrupt PyTorch checkpoint "
                              f"({type(exc).__name__}: {exc})") from None


# ---- the legacy (non-zip) format --------------------------------------------------------------

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


def is_torch_legacy(head: bytes) -> bool:
    """Whether data may be a legacy PyTorch checkpoint: a pickle stream (PROTO opcode, protocol
    2 to 5), checked further against the magic number by :func:`load_torch_legacy`."""
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


class _PlainUnpickler(pickle.Unpickler):
    """Reads the legacy header's pickles: numbers, strings, lists and dicts only."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"unexpected global {module}.{name} in a checkpoint header")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("unexpected persistent id in a checkpoint header")


class _LegacyLoader(_Loader):
    """_Loader's tensor building over the storages of a legacy stream (see the module
    docstring)."""

    def __init__(self, name: str, map_location: Any, size: int) -> None:
        self.name, self.map_location, self.size = name, map_location, size
        self.passthrough: BaseException | None = None
        self.storages = {}
        self.roots: dict[str, _Storage] = {}  # the storages whose data the file holds
        self.byteorder = "little"
        self.placing = False  # the first reading builds throwaway tensors: nothing is moved

    def persistent_load(self, saved_id: Any) -> _Storage:
        import ember

        if not (isinstance(saved_id, tuple) and len(saved_id) == 6 and saved_id[0] == "storage"):
            raise pickle.UnpicklingError(f"{self.name}: unsupported persistent id {saved_id!r} "
                                         "(only storages are expected)")
        _, stype, key, location, numel, view = saved_id
        if not isinstance(stype, _StorageType):
            raise pickle.UnpicklingError(f"{self.name}: storage of unknown type {stype!r}")
        key = str(key)
        itemsize = _C.empty(0, dtype=_dtype(stype.dtype)).itemsize
        if key not in self.storages:
            if not isinstance(numel, int) or numel < 0 or numel * itemsize > self.size:
                raise self.error(f"storage {key} claims {numel!r} {stype.dtype} elements, more "
                                 f"than the file's {self.size} bytes can hold")
            root = _Storage(ember.zeros(numel * itemsize, dtype=ember.uint8), stype.dtype,
                            str(location), stype.qdtype)
            self.storages[key] = self.roots[key] = root
        if view is None:
            return self.storages[key]
        if not (isinstance(view, tuple) and len(view) == 3):
            raise pickle.UnpicklingError(f"{self.name}: malformed storage view {view!r}")
        view_key, offset, size = str(view[0]), view[1], view[2]
        if view_key not in self.storages:
            root = self.storages[key]
            n = root.raw.numel() // itemsize
            if not (isinstance(offset, int) and isinstance(size, int) and 0 <= offset and
                    0 <= size and offset + size <= n):
                raise self.error(f"storage view {view_key} (offset {offset!r}, size {size!r}) "
                                 f"reaches past its storage {key} of {n} elements")
            raw = root.raw[offset * itemsize:(offset + size) * itemsize]
            self.storages[view_key] = _Storage(raw, root.dtype, root.location, root.qdtype)
        return self.storages[view_key]

    def place(self, t: Tensor, location: str) -> Tensor:
        return super().place(t, location) if self.placing else t

    def read_data(self, stream: io.BytesIO, keys: Any) -> None:
        """Fills the listed storages from the stream, where their data follows the key list."""
        if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            raise self.error("corrupt legacy PyTorch checkpoint: the storage key list is "
                             f"malformed ({type(keys).__name__})")
        missing = sorted(set(self.roots) - set(keys))
        if missing:
            raise self.error(f"corrupt legacy PyTorch checkpoint: storages {missing} are used "
                             "but their data is not in the file")
        view = stream.getbuffer()
        pos = stream.tell()
        try:
            for key in keys:
                if key not in self.roots:
                    raise self.error(f"corrupt legacy PyTorch checkpoint: the storage list "
                                     f"names {key!r}, which no tensor uses")
                storage = self.roots[key]
                nbytes = storage.raw.numel()
                if pos + 8 > len(view):
                    raise self.error(f"truncated legacy PyTorch checkpoint: storage {key}'s "
                                     f"header at byte {pos} is past the end ({len(view)} bytes)")
                count = int.from_bytes(view[pos:pos + 8], "little", signed=True)
                itemsize = _C.empty(0, dtype=_dtype(storage.dtype)).itemsize
                if count * itemsize != nbytes:
                    raise self.error(f"corrupt legacy PyTorch checkpoint: storage {key} holds "
                                     f"{count} elements, but its tensors say "
                                     f"{nbytes // itemsize}")
                pos += 8
                if pos + nbytes > len(view):
                    raise self.error(f"truncated legacy PyTorch checkpoint: storage {key} needs "
                                     f"bytes [{pos}, {pos + nbytes}), the file has {len(view)}")
                if nbytes:
                    memoryview(storage.raw)[:] = view[pos:pos + nbytes]
                pos += nbytes
        finally:
            view.release()


def load_torch_legacy(data: bytes, name: str, map_location: Any, pickle_load_args: dict) -> Any:
    """The object a legacy (non-zip) PyTorch checkpoint holds (see the module docstring)."""
    from ember.serialization import CheckpointError

    stream = io.BytesIO(data)

    def header(what: str) -> Any:
        try:
            return _PlainUnpickler(stream, **pickle_load_args).load()
        except Exception as exc:  # any failure of a corrupt stream's opcodes or values
            raise CheckpointError(f"{name}: truncated or corrupt legacy PyTorch checkpoint: "
                                  f"cannot read {what} ({type(exc).__name__}: {exc})") from None

    if header("the magic number") != _LEGACY_MAGIC:
        raise CheckpointError(f"{name}: a pickle but not a PyTorch checkpoint (bad magic "
                              "number)")
    version = header("the protocol version")
    if version != _LEGACY_PROTOCOL:
        raise CheckpointError(f"{name}: legacy PyTorch checkpoint of protocol version "
                              f"{version!r}; ember reads version {_LEGACY_PROTOCOL}")
    info = header("the system info")
    if isinstance(info, dict) and info.get("little_endian") is False:
        raise CheckpointError(f"{name}: a legacy PyTorch checkpoint written on a big-endian "
                              "machine, which ember does not read")
    loader = _LegacyLoader(name, map_location, len(data))
    start = stream.tell()

    def read_object() -> Any:
        stream.seek(start)
        try:
            return loader.load_from(stream, pickle_load_args)
        except CheckpointError:
            raise
        except Exception as exc:  # any failure of a corrupt stream's opcodes or values
            if _is_refused(exc) or exc is loader.passthrough or _not_the_files(exc):
                raise
            raise CheckpointError(f"{name}: truncated or corrupt legacy PyTorch checkpoint "
                                  f"({type(exc).__name__}: {exc})") from None

    read_object()  # learns the storages
    loader.read_data(stream, header("the storage key list"))
    loader.placing = True
    return read_object()


# ---- writing PyTorch's zip format -------------------------------------------------------------

# ember dtype names -> torch's typed storage classes (the others go as untyped storage + dtype)
_TYPED_STORAGES = {dtype: name for name, dtype in _STORAGE_DTYPES.items()
                   if name != "UntypedStorage"}
_ALIGNMENT = 64  # torch aligns each storage's bytes in the archive (for mmap=True)


class _TorchName:
    """A global of torch's, written into the pickle by its name: torch need not be installed."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __reduce__(self) -> str:
        return self.name  # never used: _TorchPickler.save_global writes it

    def __call__(self, *args: Any) -> Any:  # pickle wants reduce functions callable
        raise TypeError(f"{self.module}.{self.name} stands for torch's function in a pickle")


class _PlainTensor:
    """The data of a Parameter, pickled as a plain tensor inside _rebuild_parameter."""

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor


class _TorchPickler(pickle._Pickler):
    """Pickles ember tensors, Parameters, Sizes, dtypes and devices as torch.save does (each
    storage once, as a persistent id naming its file in the archive); other ember objects are
    refused, as torch could not load them."""

    def __init__(self, file: Any, protocol: int) -> None:
        super().__init__(file, protocol)
        self.storages: dict[tuple, tuple[str, Tensor]] = {}  # (device, data_ptr) -> key, bytes
        self.ids: dict[tuple, tuple] = {}

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is tuple and len(obj) == 2 and obj[0] == "ember-storage":
            return self.ids[obj]
        return None

    def save_global(self, obj: Any, name: Any = None) -> None:
        import ember
        from ember import _quantized

        if isinstance(obj, _TorchName):
            module, name = obj.module, obj.name
        elif isinstance(obj, (_quantized._QDtype, _quantized.qscheme)):
            module, name = "torch", obj._name
        elif isinstance(obj, ember.dtype):
            module, name = "torch", str(obj).split(".")[-1]
        else:
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode("utf-8"))
        self.memoize(obj)

    def reducer_override(self, obj: Any) -> Any:
        import ember

        if isinstance(obj, _TorchName):
            return NotImplemented  # its __reduce__ leads to save_global
        if isinstance(obj, _PlainTensor):
            return self._tensor(obj.tensor)
        from ember import _quantized

        if isinstance(obj, (_quantized._QDtype, _quantized.qscheme)):
            return obj._name  # a global: save_global writes torch.<name>
        if isinstance(obj, _quantized.QuantizedTensor):
            return self._qtensor(obj)
        if isinstance(obj, ember.nn.Parameter):
            return (_TorchName("torch._utils", "_rebuild_parameter"),
                    (_PlainTensor(obj.detach()), obj.requires_grad, collections.OrderedDict()))
        if isinstance(obj, Tensor):
            if type(obj) is not ember.Tensor:
                raise TypeError(f"ember.save(format='torch'): a {type(obj).__name__} (a tensor "
                                "subclass) has no form torch.load reads; save a plain tensor")
            return self._tensor(obj)
        if isinstance(obj, ember.Size):
            return (_TorchName("torch", "Size"), (tuple(int(n) for n in obj),))
        if isinstance(obj, ember.dtype):
            return str(obj).split(".")[-1]  # a global: save_global writes torch.<name>
        if isinstance(obj, ember.device):
            args = (obj.type,) if obj.index is None else (obj.type, obj.index)
            return (_TorchName("torch", "device"), args)
        module = getattr(type(obj), "__module__", "") or ""
        if module == "ember" or module.startswith("ember."):
            raise TypeError(f"ember.save(format='torch'): a {type(obj).__name__} from "
                            f"{module} cannot be read by torch.load; the format holds "
                            "containers of tensors, numbers and strings (save model.state_dict())")
        return NotImplemented

    def _qtensor(self, q: Any) -> tuple:
        """torch's form of a quantized tensor: ``_rebuild_qtensor`` over a quantized storage of
        its (contiguous) integers and its quantizer's parameters."""
        from ember import _quantized

        storage_name, raw, params = _quantized.to_torch_pickle(q)
        where = ("quantized", id(raw))
        key = str(len(self.storages))
        self.storages[where] = (key, raw)  # (keeps raw alive, so its id stays unique)
        ref = ("ember-storage", where)
        self.ids[ref] = ("storage", _TorchName("torch", storage_name), key, "cpu", raw.numel())
        size = tuple(int(n) for n in q.shape)
        stride = tuple(int(n) for n in q._data.contiguous().stride())
        return (_TorchName("torch._utils", "_rebuild_qtensor"),
                (ref, 0, size, stride, params, False, collections.OrderedDict()))

    def _tensor(self, t: Tensor) -> tuple:
        import ember

        if t.device.type == "meta" and t.layout == ember.strided and not t.is_nested:
            # torch's form for a tensor without data: dtype, shape and strides
            return (_TorchName("torch._utils", "_rebuild_meta_tensor_no_storage"),
                    (t.dtype, tuple(t.shape), tuple(t.stride()), t.requires_grad))
        if t.layout != ember.strided or t.is_nested or t.device.type not in ("cpu", "cuda"):
            raise TypeError(f"ember.save(format='torch'): a {t.layout} tensor on {t.device} has "
                            "no form torch.load reads; save a strided CPU or CUDA tensor")
        dtype = str(t.dtype).split(".")[-1]
        storage = t.untyped_storage()
        where = (str(t.device), storage.data_ptr(), storage.nbytes())
        if where not in self.storages:
            self.storages[where] = (str(len(self.storages)), storage._tensor())
        key = self.storages[where][0]
        location = "cpu" if t.device.type == "cpu" else f"cuda:{t.device.index or 0}"
        hooks = collections.OrderedDict()
        if dtype in _TYPED_STORAGES:
            pid = ("storage", _TorchName("torch", _TYPED_STORAGES[dtype]), key, location,
                   storage.nbytes() // t.element_size())
        else:
            pid = ("storage", _TorchName("torch.storage", "UntypedStorage"), key, location,
                   storage.nbytes())
        ref = ("ember-storage", where)
        self.ids[ref] = pid
        args: tuple = (ref, t.storage_offset(), tuple(t.shape), tuple(t.stride()),
                       t.requires_grad, hooks)
        if dtype in _TYPED_STORAGES:
            return (_TorchName("torch._utils", "_rebuild_tensor_v2"), args)
        return (_TorchName("torch._utils", "_rebuild_tensor_v3"),
                args + (_TorchName("torch", dtype),))


def _aligned(zf: zipfile.ZipFile, name: str) -> zipfile.ZipInfo:
    """A stored entry whose data starts on a multiple of _ALIGNMENT in the archive (padding in
    an extra field, as torch writes)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    start = zf.fp.tell() + 30 + len(name.encode("utf-8"))
    pad = -(start + 4) % _ALIGNMENT
    info.extra = b"FB" + pad.to_bytes(2, "little") + b"Z" * pad
    return info


def save_torch_zip(obj: Any, f: Any, pickle_protocol: int = 2) -> None:
    """Writes obj in torch.save's zip format to the binary file f (seekable), so torch.load
    (weights_only=True included) reads it: the pickle as data.pkl, each storage's bytes as
    data/<key>, little-endian."""
    buf = io.BytesIO()
    pickler = _TorchPickler(buf, pickle_protocol)
    pickler.dump(obj)
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
        def put(name: str, data: bytes) -> None:
            zf.writestr(_aligned(zf, f"archive/{name}"), data)

        put("data.pkl", buf.getvalue())
        put(".format_version", b"1")
        put(".storage_alignment", str(_ALIGNMENT).encode())
        put("byteorder", sys.byteorder.encode())
        for key, raw in pickler.storages.values():
            put(f"data/{key}", raw.cpu().numpy().tobytes())
        put("version", b"3\n")
