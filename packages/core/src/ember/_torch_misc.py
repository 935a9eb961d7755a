"""Smaller top-level functions and Tensor attributes of PyTorch's namespace:

* predicates as functions: ``ember.get_device``, ``is_inference``, ``is_signed``,
  ``is_distributed``;
* ``set_flush_denormal`` (flush-to-zero / denormals-are-zero on x86, the calling thread);
* tensors over existing memory: ``frombuffer`` (any buffer-protocol object, shared),
  ``from_file`` (a file, mapped shared or copy-on-write); ``empty_permuted``;
* ``segment_reduce`` (sum/mean/max/min/prod over consecutive segments, differentiable);
* eager control flow: ``cond`` and ``while_loop``;
* constants and small functions: ``ember.pi``, ``e``, ``inf``, ``nan``, ``newaxis``,
  the deprecated ``range`` (end included), ``fill``, ``is_storage``,
  ``get_device_module``, ``compiled_with_cxx11_abi``, ``set_deterministic_debug_mode`` /
  ``get_deterministic_debug_mode``, ``init_num_threads``, ``is_vulkan_available``, and the
  deprecated per-device autocast switches (``get_autocast_cpu_dtype``, ``set_autocast_gpu_dtype``
  ...: ``ember.amp``'s functions with the device type filled in, with a DeprecationWarning);
* the top-level losses over C++ ops, ``kl_div`` and ``binary_cross_entropy_with_logits``, with
  PyTorch's int ``reduction`` and its default: none (``F``'s functions and ``ember.ops.aten``
  default to the mean);
* Tensor attributes: ``as_subclass``, the deprecated ``resize`` / ``resize_as``, ``output_nr``,
  ``name``, ``const_data_ptr``, the device predicates of devices ember has not
  (``is_nested``, ``is_xpu``, ``is_mps`` ... all False) and ``chalf`` (complex32 is not a dtype
  of ember: a clear error);
* for ported code: ``TYPE_CHECKING``, ``SymInt`` / ``SymFloat`` / ``SymBool`` (never produced:
  no symbolic shapes), ``legacy_contiguous_format``, ``cudnn_is_acceptable``,
  ``thread_safe_generator``, and the removed ``matrix_rank`` (PyTorch's error).

>>> import ember
>>> ember.frombuffer(bytearray(b"\\x01\\x00\\x02\\x00"), dtype=ember.int16).tolist()
[1, 2]
>>> ember.segment_reduce(ember.tensor([1.0, 2.0, 3.0]), "sum", lengths=ember.tensor([2, 1])).tolist()
[3.0, 3.0]
>>> ember.cond(ember.tensor(True), lambda x: x + 1, lambda x: x - 1, (ember.zeros(1),)).tolist()
[1.0]
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ember import _C
from ember._C import Tensor
from ember._memory_format import contiguous_format

__all__ = [
    "get_device", "is_inference", "is_signed", "is_distributed", "set_flush_denormal",
    "frombuffer", "from_file", "empty_permuted", "segment_reduce", "cond", "while_loop",
    "pi", "e", "inf", "nan", "newaxis", "range", "fill", "is_storage",
    "get_device_module", "compiled_with_cxx11_abi", "set_deterministic_debug_mode",
    "get_deterministic_debug_mode", "init_num_threads", "is_vulkan_available",
    "has_lapack", "has_spectral", "has_mkl", "has_openmp", "sym_int", "sym_float", "sym_max",
    "sym_min", "sym_not", "sym_ite", "sym_sqrt", "sym_sum", "sym_fresh_size",
    "sym_constrain_range", "sym_constrain_range_for_size", "fork", "wait",
    "TYPE_CHECKING", "SymInt", "SymFloat", "SymBool", "cudnn_is_acceptable", "matrix_rank",
    "thread_safe_generator", "legacy_contiguous_format",
]

pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None
# PyTorch's deprecated build flags: ember always has LAPACK (OpenBLAS) and its own FFT; it uses
# neither MKL nor OpenMP.
has_lapack = True
has_spectral = True
has_mkl = False
has_openmp = False
# PyTorch's flag for code that imports only for type checkers (False when running)
TYPE_CHECKING = False
# the memory format of PyTorch's legacy "contiguous" default: the same object
legacy_contiguous_format = contiguous_format


# ---- symbolic scalar types ---------------------------------------------------------------------
# ember has no symbolic shapes (sizes are always ints), so no value is ever one of these; they
# exist for annotations and ``isinstance(x, (int, torch.SymInt))`` checks in ported code.
class SymInt:
    """A symbolic int (PyTorch's, under torch.compile); never produced by ember."""

    def __init__(self, node: Any) -> None:
        self.node = node


class SymFloat:
    """A symbolic float (PyTorch's, under torch.compile); never produced by ember."""

    def __init__(self, node: Any) -> None:
        self.node = node


class SymBool:
    """A symbolic bool (PyTorch's, under torch.compile); never produced by ember."""

    def __init__(self, node: Any) -> None:
        self.node = node


def cudnn_is_acceptable(tensor: Tensor) -> bool:
    """Whether cuDNN could take ``tensor``: a CUDA tensor of a floating dtype, with cuDNN
    available and enabled (``ember.backends.cudnn``)."""
    _need_tensor("cudnn_is_acceptable", tensor, "self")
    from ember.backends import cudnn

    floating = (_C.float16, _C.bfloat16, _C.float32, _C.float64)
    return bool(tensor.is_cuda and tensor.dtype in floating and cudnn.enabled
                and cudnn.is_available())


def matrix_rank(input: Any, tol: Any = None, symmetric: bool = False, *, out: Any = None) -> Any:
    """Removed from PyTorch (since 1.9): raises its error pointing at ``linalg.matrix_rank``."""
    raise RuntimeError(
        "This function was deprecated since version 1.9 and is now removed.\n"
        "Please use the `torch.linalg.matrix_rank` function instead. The parameter 'symmetric' "
        "was renamed in `torch.linalg.matrix_rank()` to 'hermitian'."
    )


def thread_safe_generator() -> Any:
    """The generator of the DataLoader thread worker calling it, else None (the global RNG):
    ember's DataLoader workers are processes, so this is None everywhere, which ember's
    random functions take as their ``generator=`` default."""
    from ember.utils.data import get_worker_info

    info = get_worker_info()
    if getattr(info, "worker_method", None) == "thread" and getattr(info, "rng", None) is not None:
        return info.rng.torch_generator
    return None


# ---- top-level losses with an int reduction ----------------------------------------------------
_INT_REDUCTIONS = {1: "mean", 2: "sum"}


def _int_reduction(op: str, reduction: Any, extra: tuple[str, ...] = ()) -> str:
    """PyTorch's int reduction as the C++ op's string: 1 mean, 2 sum, any other int none (as
    PyTorch's kernels read it). ember's strings are taken too."""
    if isinstance(reduction, str) and reduction in ("none", "mean", "sum", *extra):
        return reduction
    if isinstance(reduction, bool) or not isinstance(reduction, int):
        raise TypeError(f"{op}(): argument 'reduction' must be int, not "
                        f"{type(reduction).__name__}")
    return _INT_REDUCTIONS.get(reduction, "none")


def kl_div(input: Tensor, target: Tensor, reduction: int = 0, *,
           log_target: bool = False) -> Tensor:
    """``torch.kl_div``: pointwise ``target * (log(target) - input)``, reduced by the int
    ``reduction`` (0 none -- the default of PyTorch's top-level function --, 1 mean, 2 sum).

    >>> import ember
    >>> ember.kl_div(ember.tensor([0.0, 0.0]), ember.tensor([1.0, 0.0])).tolist()
    [0.0, 0.0]
    """
    for t in (input, target):
        if isinstance(t, Tensor) and t.is_complex():
            raise RuntimeError("kl_div: Complex inputs not supported.")
        if isinstance(t, Tensor) and not t.is_floating_point():
            raise RuntimeError("kl_div: Integral inputs not supported.")
    return _C.kl_div(input, target, _int_reduction("kl_div", reduction, ("batchmean",)),
                     log_target=log_target)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None,
                                     reduction: int = 0) -> Tensor:
    """``torch.binary_cross_entropy_with_logits``: the int ``reduction`` (0 none -- the default
    of PyTorch's top-level function --, 1 mean, 2 sum).

    >>> import ember
    >>> ember.binary_cross_entropy_with_logits(ember.zeros(2), ember.ones(2)).shape
    ember.Size([2])
    """
    return _C.binary_cross_entropy_with_logits(
        input, target, weight, pos_weight,
        _int_reduction("binary_cross_entropy_with_logits", reduction))


def _need_tensor(name: str, obj: Any, arg: str = "input") -> None:
    if not isinstance(obj, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(obj).__name__}")


# ---- predicates ---------------------------------------------------------------------------------
def get_device(input: Tensor) -> int:
    """The device index of ``input``: -1 for CPU tensors.

    >>> import ember
    >>> ember.get_device(ember.ones(1))
    -1
    """
    _need_tensor("get_device", input)
    return input.get_device()


def is_inference(input: Tensor) -> bool:
    """Whether ``input`` was created in ``ember.inference_mode()``.

    >>> import ember
    >>> with ember.inference_mode():
    ...     x = ember.ones(1)
    >>> ember.is_inference(x), ember.is_inference(ember.ones(1))
    (True, False)
    """
    _need_tensor("is_inference", input)
    return input.is_inference()


def is_signed(input: Tensor) -> bool:
    """Whether ``input``'s dtype holds negative values (False for bool and uint8).

    >>> import ember
    >>> ember.is_signed(ember.ones(1)), ember.is_signed(ember.ones(1, dtype=ember.uint8))
    (True, False)
    """
    _need_tensor("is_signed", input)
    return bool(input.dtype.is_signed)


def is_distributed(input: Tensor) -> bool:
    """False: an ember tensor always lives on one device (as PyTorch's dense tensors).

    >>> import ember
    >>> ember.is_distributed(ember.ones(1))
    False
    """
    _need_tensor("is_distributed", input)
    return False


# ---- denormals ----------------------------------------------------------------------------------
_MXCSR_DAZ = 1 << 6  # denormal inputs are read as zero
_MXCSR_FTZ = 1 << 15  # denormal results are written as zero


def _fenv_type() -> Any:
    """glibc's ``fenv_t`` on x86-64: the x87 environment (28 bytes), then the SSE MXCSR.
    (ctypes is imported here, on first use: it is slow to import for every ``import ember``.)"""
    import ctypes

    class FenvX86_64(ctypes.Structure):
        _fields_ = [("x87", ctypes.c_uint8 * 28), ("mxcsr", ctypes.c_uint32)]

    return FenvX86_64


def _libm() -> Any:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("m")
    return ctypes.CDLL(name) if name else None


def _cpu_has_daz() -> bool:
    """SSE3-class x86-64 CPUs (``pni`` in /proc/cpuinfo) honour the DAZ bit."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64") or not sys.platform.startswith("linux"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return "pni" in flags or "sse3" in flags
    except OSError:
        return False
    return False


def set_flush_denormal(mode: bool) -> bool:
    """Turns flushing of denormal floats to zero on (``mode=True``) or off for the calling thread,
    by setting the FTZ and DAZ bits of the SSE control register (MXCSR), as PyTorch does. Returns
    True when the setting took effect; False on CPUs or systems without it (not x86-64 Linux
    with SSE3), where nothing changes.

    >>> import ember
    >>> ember.set_flush_denormal(True) in (True, False)
    True
    >>> ember.set_flush_denormal(False) in (True, False)
    True
    """
    if not isinstance(mode, bool):
        raise TypeError(f"set_flush_denormal(): mode must be a bool, got {type(mode).__name__}")
    if not _cpu_has_daz():
        return False
    libm = _libm()
    if libm is None:
        return False
    import ctypes

    env = _fenv_type()()
    if libm.fegetenv(ctypes.byref(env)) != 0:
        return False
    bits = _MXCSR_DAZ | _MXCSR_FTZ
    env.mxcsr = (env.mxcsr | bits) if mode else (env.mxcsr & ~bits & 0xFFFFFFFF)
    return libm.fesetenv(ctypes.byref(env)) == 0


# ---- tensors over existing memory ---------------------------------------------------------------
def _from_bytes(array: Any, dtype: Any, count: int) -> Tensor:
    """A tensor of ``count`` elements of ``dtype`` over a uint8 NumPy array (sharing it)."""
    t = _C.from_numpy(array)
    if dtype is not _C.uint8:
        t = t.view(dtype)
    return t[:count] if t.shape[0] != count else t


def frombuffer(buffer: Any, *, dtype: Any, count: int = -1, offset: int = 0,
               requires_grad: bool = False) -> Tensor:
    """A 1-D tensor over the memory of a Python buffer-protocol object (``bytearray``,
    ``array.array``, ``memoryview``, ``mmap`` ...): ``count`` elements of ``dtype`` (all that fit
    when -1) starting ``offset`` bytes in. The tensor shares the memory: writes through it
    change the buffer. A read-only buffer (``bytes``) gives a warning, as PyTorch, since writing
    to the tensor would be undefined.

    >>> import ember, array
    >>> a = array.array("f", [1.0, 2.0, 3.0])
    >>> t = ember.frombuffer(a, dtype=ember.float32, count=2, offset=4)
    >>> t.tolist()
    [2.0, 3.0]
    >>> t += 1; a.tolist()
    [1.0, 3.0, 4.0]
    """
    import numpy as np

    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"frombuffer(): dtype must be an ember.dtype, got {type(dtype).__name__}")
    for name, v in (("count", count), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"frombuffer(): {name} must be an int, got {type(v).__name__}")
    try:
        view = memoryview(buffer)
    except TypeError:
        raise TypeError(
            f"frombuffer(): object of type {type(buffer).__name__} does not implement the Python "
            "buffer protocol"
        ) from None
    if not view.c_contiguous:
        raise ValueError("frombuffer(): the buffer must be C-contiguous (a strided memoryview "
                         "is not one block of memory)")
    nbytes = view.nbytes
    item = dtype.itemsize
    if count == 0 or (count < 0 and count != -1):
        raise ValueError(f"frombuffer(): count must be -1 or positive, got {count}")
    if offset < 0 or offset >= max(nbytes, 1) or (nbytes == 0):
        raise ValueError(
            f"frombuffer(): offset ({offset} bytes) must be non-negative and no greater than the "
            f"buffer length ({nbytes} bytes) minus 1"
        )
    if count == -1:
        if (nbytes - offset) % item:
            raise ValueError(
                f"frombuffer(): buffer length ({nbytes - offset} bytes) after offset ({offset} "
                f"bytes) must be a multiple of element size ({item})"
            )
        count = (nbytes - offset) // item
    elif offset + count * item > nbytes:
        raise ValueError(
            f"frombuffer(): requested buffer length ({count} * {item} bytes) after offset "
            f"({offset} bytes) must not be greater than actual buffer length ({nbytes} bytes)"
        )
    if view.readonly:
        warnings.warn(
            "The given buffer is not writable, and ember does not support non-writable tensors. "
            "This means writing to this tensor raises an error (in-place ops, out=, item "
            "assignment). You may want to copy the buffer to protect its data or make it writable "
            "before converting it to a tensor.",
            UserWarning, stacklevel=2,
        )
    raw = np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view,
                        dtype=np.uint8, count=count * item, offset=offset)
    t = _from_bytes(raw, dtype, count)
    if requires_grad:
        t.requires_grad_(True)
    return t


def from_file(filename: str | os.PathLike, shared: bool | None = None, size: int = 0, *,
              dtype: Any = None, layout: Any = None, device: Any = None,
              pin_memory: bool = False) -> Tensor:
    """A 1-D tensor of ``size`` elements of ``dtype`` read from a file by mapping it into
    memory. With ``shared=True`` the mapping is shared: writes to the tensor go to the file,
    which is created, or grown with zeros, to hold ``size`` elements (as PyTorch). Otherwise
    the file must hold them already and the mapping is private (copy on write): the tensor can
    be changed without touching the file.

    >>> import ember, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> _ = open(path, "wb").write(bytes([1, 2, 3, 4]))
    >>> ember.from_file(path, size=4, dtype=ember.uint8).tolist()
    [1, 2, 3, 4]
    """
    import numpy as np

    dtype = _C.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"from_file(): dtype must be an ember.dtype, got {type(dtype).__name__}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"from_file(): size must be a non-negative int, got {size!r}")
    if pin_memory:
        raise RuntimeError("from_file(): pin_memory=True needs a CUDA device; map the file first")
    nbytes = size * dtype.itemsize
    if shared:
        with open(filename, "ab") as f:  # creates a missing file; never truncates
            if f.tell() < nbytes:
                f.truncate(nbytes)
    have = os.path.getsize(filename)
    if nbytes > have:
        raise RuntimeError(
            f"from_file(): file <{os.fspath(filename)}> size <{have}> is smaller than the "
            f"required mapping size <{nbytes}> ({size} elements of {dtype})"
        )
    if nbytes == 0:
        t = _C.empty([0], dtype=dtype)
    else:
        mode = "r+" if shared else "c"
        raw = np.memmap(filename, dtype=np.uint8, mode=mode, shape=(nbytes,))
        t = _from_bytes(raw, dtype, size)
    return t if device is None else t.to(device)


def empty_permuted(size: Sequence[int], physical_layout: Sequence[int], *, dtype: Any = None,
                   layout: Any = None, device: Any = None, requires_grad: bool = False,
                   pin_memory: bool = False) -> Tensor:
    """An uninitialized tensor of logical shape ``size`` whose memory holds the dims in the order
    ``physical_layout`` (outermost first): ``empty_permuted((2, 3, 4), (0, 2, 1))`` is laid out
    like ``empty(2, 4, 3).permute(0, 2, 1)``.

    >>> import ember
    >>> ember.empty_permuted((2, 3, 4), (0, 2, 1)).stride()
    (12, 1, 3)
    """
    size = tuple(size)
    perm = tuple(physical_layout)
    if sorted(perm) != list(range(len(size))):
        raise RuntimeError(
            f"empty_permuted(): physical_layout {list(perm)} must be a permutation of "
            f"0..{len(size) - 1} (one entry per dim of size {list(size)})"
        )
    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    if device is not None:
        kwargs["device"] = device
    phys = _C.empty([size[p] for p in perm], **kwargs)
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    out = phys.permute(tuple(inverse))
    if requires_grad:
        out.requires_grad_(True)
    return out


# ---- segment_reduce -----------------------------------------------------------------------------
_SEGMENT_REDUCTIONS = ("sum", "mean", "max", "min", "prod")


def segment_reduce(data: Tensor, reduce: str, *, lengths: Tensor | None = None,
                   indices: Tensor | None = None, offsets: Tensor | None = None, axis: int = 0,
                   unsafe: bool = False, initial: Any = None) -> Tensor:
    """Reduces consecutive segments of ``data`` along ``axis``: segment ``i`` holds
    ``lengths[..., i]`` elements (or runs from ``offsets[..., i]`` to ``offsets[..., i + 1]``).
    ``reduce`` is ``"sum"``, ``"mean"``, ``"max"``, ``"min"`` or ``"prod"``; ``initial`` joins
    every segment's reduction (and is the value of empty ones, which otherwise are 0 for sum,
    1 for prod, nan for mean, -inf for max and inf for min). ``axis`` must be the last dim of
    ``lengths``, whose leading dims match ``data``'s. Differentiable (ties of max/min share the
    gradient).

    >>> import ember
    >>> d = ember.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    >>> ember.segment_reduce(d, "max", lengths=ember.tensor([2, 0, 3])).tolist()
    [2.0, -inf, 5.0]
    """
    _need_tensor("segment_reduce", data, "data")
    if reduce not in _SEGMENT_REDUCTIONS:
        raise RuntimeError(
            f"segment_reduce(): reduce must be one of {_SEGMENT_REDUCTIONS}, got {reduce!r}"
        )
    if not data.dtype.is_floating_point:
        raise RuntimeError(
            f"segment_reduce(): data must be floating point (as PyTorch's), got {data.dtype}"
        )
    if indices is not None:
        raise NotImplementedError("segment_reduce(): indices are not supported (as PyTorch); "
                                  "pass lengths or offsets")
    if (lengths is None) == (offsets is None):
        raise RuntimeError("segment_reduce(): pass exactly one of lengths and offsets")
    if offsets is not None:
        _need_tensor("segment_reduce", offsets, "offsets")
        if offsets.shape[-1] < 1:
            raise RuntimeError("segment_reduce(): offsets must hold at least one entry")
        n = offsets.shape[-1]
        lengths = offsets.narrow(-1, 1, n - 1) - offsets.narrow(-1, 0, n - 1)
    assert lengths is not None
    _need_tensor("segment_reduce", lengths, "lengths")
    if lengths.dtype.is_floating_point or lengths.dtype.is_complex:
        raise RuntimeError(f"segment_reduce(): lengths must be integers, got {lengths.dtype}")
    ax = axis + data.ndim if axis < 0 else axis
    if lengths.ndim == 0 or ax != lengths.ndim - 1:
        raise RuntimeError(
            f"segment_reduce(): Expected axis to be the last dimension of lengths but got {axis}."
        )
    if ax >= data.ndim or tuple(data.shape[:ax]) != tuple(lengths.shape[:-1]):
        raise RuntimeError(
            f"segment_reduce(): the leading dims of lengths {list(lengths.shape[:-1])} must match "
            f"data's dims before axis {axis} (data shape {list(data.shape)})"
        )
    lens = lengths.reshape(-1, lengths.shape[-1]).tolist()
    if any(v < 0 for row in lens for v in row):
        raise RuntimeError("segment_reduce(): lengths must be non-negative")
    if not unsafe and any(sum(row) != data.shape[ax] for row in lens):
        raise RuntimeError(
            "segment_reduce(): Expected all rows of lengths along axis to sum to "
            f"data.size(lengths.dim()-1) ({data.shape[ax]}) when !unsafe."
        )
    if unsafe and any(sum(row) > data.shape[ax] for row in lens):
        raise RuntimeError(
            f"segment_reduce(): the segments (lengths summing to {max(sum(r) for r in lens)}) "
            f"run past the {data.shape[ax]} elements of data along axis {axis}"
        )
    import numpy as np

    rest = tuple(data.shape[ax + 1:])
    batch, n_seg, length = len(lens), lengths.shape[-1], data.shape[ax]
    width = math.prod(rest)
    # every element's segment as a row of the (batch * n_seg + 1, width) result; elements past
    # the segments (unsafe=True) go to the extra last row, dropped below
    ids = np.full((batch, length), batch * n_seg, dtype=np.int64)
    for b, row in enumerate(lens):
        seg = np.repeat(np.arange(b * n_seg, (b + 1) * n_seg, dtype=np.int64), row)
        ids[b, :seg.shape[0]] = seg
    index = _C.from_numpy(ids.reshape(-1, 1)).to(data.device).expand(batch * length, width)
    values = data.reshape(batch * length, width)
    op = {"sum": "sum", "mean": "sum", "prod": "prod", "max": "amax", "min": "amin"}[reduce]
    out = values.new_zeros((batch * n_seg + 1, width)).scatter_reduce(
        0, index, values, op, include_self=False)[:batch * n_seg]
    counts_np = np.asarray(lens, dtype=np.float64).reshape(-1, 1)
    empty = _C.from_numpy(counts_np == 0).to(data.device)
    if initial is not None:
        if reduce in ("sum", "mean"):
            out = out + initial
        elif reduce == "prod":
            out = out * initial
        else:
            bound = _C.full((1, width), initial, dtype=data.dtype, device=data.device)
            out = _C.maximum(out, bound) if reduce == "max" else _C.minimum(out, bound)
    if reduce == "mean":
        counts = _C.from_numpy(np.maximum(counts_np, 1.0)).to(data.device, data.dtype)
        out = out / counts
    fill = {"sum": 0.0, "prod": 1.0, "mean": math.nan, "max": -math.inf, "min": math.inf}[reduce]
    fill = fill if initial is None else initial
    out = _C.where(empty, _C.full((1, width), fill, dtype=data.dtype, device=data.device), out)
    return out.reshape((*lengths.shape, *rest))


# ---- eager control flow -------------------------------------------------------------------------
def _truth(name: str, pred: Any) -> bool:
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(
                f"{name}(): expected pred to be a bool or a single-element tensor, but got a "
                f"tensor of shape {list(pred.shape)}"
            )
        return bool(pred.item())
    if isinstance(pred, (bool, int, float)):
        return bool(pred)
    raise RuntimeError(
        f"{name}(): expected pred to be a bool or a tensor, but got {type(pred).__name__}"
    )


def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any],
         operands: tuple[Any, ...] | list[Any] = ()) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``, run eagerly (PyTorch's
    ``torch.cond`` traced as one graph in ``torch.compile``; ember runs the chosen branch).

    >>> import ember
    >>> ember.cond(False, lambda x: x * 2, lambda x: x + 10, [ember.ones(2)]).tolist()
    [11.0, 11.0]
    """
    for name, fn in (("true_fn", true_fn), ("false_fn", false_fn)):
        if not callable(fn):
            raise TypeError(f"cond(): {name} must be callable, got {type(fn).__name__}")
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(
            f"cond(): operands must be a tuple or list, got {type(operands).__name__}"
        )
    return (true_fn if _truth("cond", pred) else false_fn)(*operands)


def while_loop(cond_fn: Callable[..., Any], body_fn: Callable[..., Any],
               carried_inputs: tuple[Any, ...] | list[Any]) -> tuple[Any, ...]:
    """Runs ``carried = body_fn(*carried)`` while ``cond_fn(*carried)`` holds and returns the
    final ``carried`` as a tuple (eager ``torch.while_loop``); ``body_fn`` must return as many
    values as it receives.

    >>> import ember
    >>> i, s = ember.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * 2),
    ...                         (ember.tensor(0), ember.ones(2)))
    >>> i.item(), s.tolist()
    (3, [8.0, 8.0])
    """
    if not callable(cond_fn) or not callable(body_fn):
        raise RuntimeError("while_loop(): cond_fn and body_fn must be callable")
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(
            f"while_loop(): carried_inputs must be a tuple or list, got "
            f"{type(carried_inputs).__name__}"
        )
    carried = tuple(carried_inputs)
    while _truth("while_loop", cond_fn(*carried)):
        out = body_fn(*carried)
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(out) != len(carried):
            raise RuntimeError(
                f"while_loop(): body_fn returned {len(out)} values for {len(carried)} carried "
                "inputs; it must return one per input"
            )
        carried = out
    return carried


# ---- small functions ----------------------------------------------------------------------------
def _torch_range(start: float, end: float, step: float = 1, *, dtype: Any = None,
          device: Any = None, requires_grad: bool = False, **kwargs: Any) -> Tensor:
    """Deprecated (as PyTorch's): the values ``start, start + step, ...`` up to ``end``
    *included*, in the default float dtype unless ``dtype`` is given; ``arange`` excludes
    ``end``.

    >>> import ember, warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     ember.range(1, 4).tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    warnings.warn("ember.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "ember.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    out_arg = kwargs.pop("out", None)
    if "layout" in kwargs:
        from ember._factory_kwargs import sparse_result, take_layout

        if (sparse := take_layout("range", kwargs)) is not None:
            return sparse_result("range", _torch_range, sparse, (start, end, step), kwargs)
    if kwargs:
        raise TypeError(f"range() got unexpected keyword arguments {sorted(kwargs)}")
    if out_arg is not None:  # computed in out's dtype unless dtype= says (it must then agree)
        if dtype is not None and dtype is not out_arg.dtype:
            raise RuntimeError(f"range(): dtype {dtype} does not match out's dtype "
                               f"{out_arg.dtype}")
        with warnings.catch_warnings():  # warned once above
            warnings.simplefilter("ignore")
            r = _torch_range(start, end, step, dtype=out_arg.dtype, device=out_arg.device)
        out_arg.resize_(r.shape).copy_(r)
        return out_arg
    if step == 0:
        raise RuntimeError("range(): step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(
            f"range(): upper bound and larger bound inconsistent with step sign "
            f"(start={start}, end={end}, step={step})"
        )
    if not all(math.isfinite(float(v)) for v in (start, end)):
        raise RuntimeError(f"range(): unsupported range: {start} -> {end}")
    n = int(math.floor((end - start) / step)) + 1  # in double, as PyTorch (0.3 / 0.1 < 3)
    dtype = _C.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"range(): argument 'dtype' must be ember.dtype, not "
                        f"{type(dtype).__name__}")
    kw: dict[str, Any] = {"dtype": _C.float64 if dtype.is_floating_point else _C.int64}
    if device is not None:
        kw["device"] = device
    out = (_C.arange(n, **kw) * step + start).to(dtype)
    return out.requires_grad_(True) if requires_grad else out


_torch_range.__name__ = _torch_range.__qualname__ = "range"


def fill(input: Tensor, value: Any) -> Tensor:
    """A new tensor shaped like ``input`` holding ``value`` (a number or a one-element tensor).

    >>> import ember
    >>> ember.fill(ember.zeros(2), 3.0).tolist()
    [3.0, 3.0]
    """
    _need_tensor("fill", input)
    return input.clone().fill_(value)


def is_storage(obj: Any) -> bool:
    """Whether ``obj`` is a storage (what ``Tensor.untyped_storage()`` / ``storage()`` give).

    >>> import ember
    >>> ember.is_storage(ember.ones(1).untyped_storage()), ember.is_storage(ember.ones(1))
    (True, False)
    """
    from ember._storage import TypedStorage

    return isinstance(obj, (TypedStorage, _C.UntypedStorage))


def get_device_module(device: Any = None) -> Any:
    """The module of a device type: ``ember.cuda`` for "cuda", ``ember.cpu`` for "cpu"; with no
    argument, the current accelerator's (``ember.cpu`` without one).

    >>> import ember
    >>> ember.get_device_module("cpu").__name__
    'ember.cpu'
    """
    import importlib

    if device is None:
        from ember import cuda

        name = "cuda" if cuda.is_available() else "cpu"
    else:
        name = device.type if isinstance(device, _C.device) else _C.device(device).type
    if name not in ("cpu", "cuda"):
        raise RuntimeError(f"get_device_module(): ember has no module for device type {name!r}")
    return importlib.import_module(f"ember.{name}")


def compiled_with_cxx11_abi() -> bool:
    """True: ember's C++ library is built with the C++11 ABI of libstdc++ (what an extension
    built against it must use).

    >>> import ember
    >>> ember.compiled_with_cxx11_abi()
    True
    """
    return True


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode: str | int) -> None:
    """``"default"``/0 turns deterministic algorithms off, ``"warn"``/1 on with warnings only,
    ``"error"``/2 on (see :func:`ember.use_deterministic_algorithms`).

    >>> import ember
    >>> ember.set_deterministic_debug_mode("warn")
    >>> ember.get_deterministic_debug_mode()
    1
    >>> ember.set_deterministic_debug_mode(0)
    """
    from ember import _toplevel

    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(
                f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but "
                f"got {debug_mode}"
            )
        debug_mode = _DEBUG_MODES[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int) or \
            debug_mode not in (0, 1, 2):
        raise RuntimeError(
            f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode!r}"
        )
    _toplevel.use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    """0 (deterministic algorithms off), 1 (on, warnings only) or 2 (on).

    >>> import ember
    >>> ember.get_deterministic_debug_mode()
    0
    """
    from ember import _toplevel

    if not _toplevel.are_deterministic_algorithms_enabled():
        return 0
    return 1 if _toplevel.is_deterministic_algorithms_warn_only_enabled() else 2


def init_num_threads() -> None:
    """Nothing to do: ember's thread pool starts its threads on first use (PyTorch calls this
    to set up OpenMP in a new thread).

    >>> import ember
    >>> ember.init_num_threads()
    """


def is_vulkan_available() -> bool:
    """False: ember has no Vulkan backend.

    >>> import ember
    >>> ember.is_vulkan_available()
    False
    """
    return False


# ---- the sym_* helpers -----------------------------------------------------------------------
# torch.sym_* work on plain numbers as on the symbolic sizes of traced programs; ember runs
# eagerly, so sizes are always plain numbers.


def sym_int(a: Any) -> int:
    """``int(a)`` (toward zero).

    >>> import ember
    >>> ember.sym_int(2.7), ember.sym_int(-2.7)
    (2, -2)
    """
    return int(a)


def sym_float(a: Any) -> float:
    """``float(a)``."""
    return float(a)


def _sym_pair(name: str, a: Any, b: Any, pick: Callable[[Any, Any], Any]) -> Any:
    for v in (a, b):
        if isinstance(v, Tensor) or not isinstance(v, (int, float)):
            raise TypeError(f"{name}: expected int or float arguments, got {type(v).__name__}")
    r = pick(a, b)
    return float(r) if isinstance(a, float) or isinstance(b, float) else r


def sym_max(a: Any, b: Any) -> Any:
    """The larger number, a float when either is (``sym_max(2.0, 3) == 3.0``)."""
    return _sym_pair("sym_max", a, b, max)


def sym_min(a: Any, b: Any) -> Any:
    """The smaller number, a float when either is."""
    return _sym_pair("sym_min", a, b, min)


def sym_not(a: Any) -> Any:
    """``not a`` (a tensor: its logical not)."""
    if isinstance(a, Tensor):
        return _C.logical_not(a)
    return not a


def sym_ite(b: Any, t: Any, f: Any) -> Any:
    """``t if b else f``."""
    return t if b else f


def sym_sqrt(a: Any) -> float:
    """``math.sqrt(a)``."""
    return math.sqrt(a)


def sym_sum(args: Any) -> Any:
    """The sum of the numbers in ``args``."""
    return sum(args)


def sym_fresh_size(expr: Any) -> Any:
    """``expr`` itself (a fresh symbol only means something to a tracer)."""
    return expr


def sym_constrain_range(size: Any, min: Any = None, max: Any = None) -> None:  # noqa: A002
    """Nothing: a range hint for a tracer's symbolic sizes."""


def sym_constrain_range_for_size(size: Any, min: Any = None, max: Any = None) -> None:  # noqa: A002
    """Nothing: a range hint for a tracer's symbolic sizes."""


def fork(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``ember.jit.fork``: runs ``func`` and returns a future of its result."""
    from ember import jit

    return jit.fork(func, *args, **kwargs)


def wait(future: Any) -> Any:
    """``ember.jit.wait``: the result of a future from ``fork``."""
    from ember import jit

    return jit.wait(future)


# PyTorch's deprecated per-device autocast spellings -> (ember.amp function, device type, the
# argument they take)
_LEGACY_AUTOCAST = {
    "get_autocast_cpu_dtype": ("get_autocast_dtype", "cpu", ""),
    "get_autocast_gpu_dtype": ("get_autocast_dtype", "cuda", ""),
    "is_autocast_cpu_enabled": ("is_autocast_enabled", "cpu", ""),
    "set_autocast_cpu_enabled": ("set_autocast_enabled", "cpu", "enabled"),
    "set_autocast_cpu_dtype": ("set_autocast_dtype", "cpu", "dtype"),
    "set_autocast_gpu_dtype": ("set_autocast_dtype", "cuda", "dtype"),
}


def _legacy_autocast(name: str, target: str, device_type: str, arg: str) -> Callable[..., Any]:
    new_call = f"ember.{target}('{device_type}'{', ' + arg if arg else ''})"

    def legacy(*args: Any) -> Any:
        from ember import amp

        warnings.warn(f"ember.{name}({arg}) is deprecated. Please use {new_call} instead.",
                      DeprecationWarning, stacklevel=2)
        return getattr(amp, target)(device_type, *args)

    legacy.__name__ = legacy.__qualname__ = name
    legacy.__doc__ = f"Deprecated: ``{new_call}``."
    return legacy


def _no_device(kind: str) -> Any:
    def to_device(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        raise RuntimeError(f"Tensor.{kind}(): ember has no {kind} device (only cpu and cuda)")

    to_device.__name__ = kind
    return to_device


# ---- Tensor attributes --------------------------------------------------------------------------
def _as_subclass_function() -> Any:
    from ember.autograd import Function

    class _AsSubclass(Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor, cls: type) -> Tensor:
            from ember.overrides import _alias_as

            return _alias_as(cls, x)

        @staticmethod
        def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
            return grad, None

    return _AsSubclass


_AS_SUBCLASS: list[Any] = []


def _as_subclass(self: Tensor, cls: type) -> Tensor:
    """An instance of ``cls`` (a subclass of ``ember.Tensor``) over the same memory, still
    attached to the autograd graph: gradients flow back to ``self``.

    >>> import ember
    >>> class Mine(ember.Tensor):
    ...     pass
    >>> y = ember.ones(2).as_subclass(Mine)
    >>> type(y).__name__, y.tolist()
    ('Mine', [1.0, 1.0])
    """
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass(): cls must be a subclass of ember.Tensor, got {cls!r}")
    if not self.requires_grad or not _C.is_grad_enabled():
        from ember.overrides import _alias_as

        return _alias_as(cls, self)  # cls.__init__ is not called, as in PyTorch
    if not _AS_SUBCLASS:
        _AS_SUBCLASS.append(_as_subclass_function())
    return _AS_SUBCLASS[0].apply(self, cls)


def _sizes(name: str, sizes: tuple[Any, ...]) -> tuple[int, ...]:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):  # ember.Size is a tuple
        sizes = tuple(sizes[0])
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int):
            raise TypeError(f"{name}(): sizes must be ints, got {type(s).__name__}")
    return tuple(sizes)


def _resize(self: Tensor, *sizes: Any) -> Tensor:
    """Deprecated out-of-place resize: ``self`` reshaped to ``sizes``, which must hold as many
    elements (a warning says so; use ``reshape`` or ``resize_``).

    >>> import ember, warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     ember.ones(2, 3).resize(3, 2).shape
    ember.Size([3, 2])
    """
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    shape = _sizes("resize", sizes)
    n = math.prod(shape)
    if n != self.numel():
        raise RuntimeError(
            f"requested resize to {'x'.join(map(str, shape))} ({n} elements in total), but the "
            f"given tensor has a size of {'x'.join(map(str, self.shape))} ({self.numel()} "
            "elements). autograd's resize can only change the shape of a given tensor, while "
            "preserving the number of elements."
        )
    return self.contiguous().view(tuple(shape))


def _resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    """Deprecated out-of-place ``resize`` to ``tensor``'s shape (same number of elements)."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    _need_tensor("resize_as", tensor, "tensor")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _resize(self, tuple(tensor.shape))


def _output_nr(self: Tensor) -> int:
    """Which output of its ``grad_fn`` this tensor is (0 for leaves and single-output ops),
    read from the edge a view of it would take back to that node."""
    if self.grad_fn is None:
        return 0
    from ember.autograd.grad_mode import enable_grad

    with enable_grad():
        edge = self.view_as(self).grad_fn
    nexts = getattr(edge, "next_functions", ())
    return int(nexts[0][1]) if nexts else 0


def _chalf(self: Tensor, *, memory_format: Any = None) -> Tensor:
    raise TypeError(
        "Tensor.chalf(): complex32 (chalf) is not supported by ember; use cfloat() for complex64 "
        "or cdouble() for complex128"
    )


def _install() -> None:
    ember = sys.modules["ember"]
    for name in __all__:
        if not hasattr(ember, name):
            setattr(ember, name, _torch_range if name == "range" else globals()[name])
    # over the C++ bindings of the same name (their str reduction defaults to the mean)
    ember.kl_div = kl_div
    ember.binary_cross_entropy_with_logits = binary_cross_entropy_with_logits
    for name, spec in _LEGACY_AUTOCAST.items():
        if not hasattr(ember, name):
            setattr(ember, name, _legacy_autocast(name, *spec))
    methods: dict[str, Any] = {
        "as_subclass": _as_subclass,
        "resize": _resize,
        "resize_as": _resize_as,
        "const_data_ptr": lambda self: self.data_ptr(),
        "chalf": _chalf,
        "is_distributed": lambda self: False,
        "xpu": _no_device("xpu"),
        "ipu": _no_device("ipu"),
        "mtia": _no_device("mtia"),
    }
    for name, fn in methods.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    if not hasattr(Tensor, "output_nr"):
        Tensor.output_nr = property(_output_nr)
    if not hasattr(Tensor, "volatile"):  # removed autograd flag: always False, as PyTorch's
        Tensor.volatile = property(lambda self: False)
    if not hasattr(Tensor, "name"):
        Tensor.name = property(lambda self: None)
    for name in ("is_nested", "is_xpu", "is_mps", "is_ipu", "is_maia", "is_mtia", "is_xla",
                 "is_vulkan"):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, property(lambda self: False))
    # Private hooks that libraries call on torch._C: ember records no TorchScript traces and
    # logs no API usage.
    if not hasattr(_C, "_get_tracing_state"):
        _C._get_tracing_state = lambda: None
    if not hasattr(_C, "_log_api_usage_once"):
        _C._log_api_usage_once = lambda event: None

