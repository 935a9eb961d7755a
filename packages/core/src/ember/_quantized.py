"""Quantized tensors on the CPU: ``ember.qint8`` / ``quint8`` / ``qint32``,
``ember.quantize_per_tensor``, ``ember.quantize_per_channel`` and the quantized tensor's methods
(``dequantize``, ``int_repr``, ``q_scale``, ``q_zero_point``, ``q_per_channel_*``, ``qscheme``).

Design. As ``ember.sparse``'s ``SparseTensor``, a quantized tensor is a Python object that is not
an ``ember.Tensor``: a :class:`QuantizedTensor` holds its integer values as an ordinary ember
tensor (int8 for qint8, uint8 for quint8, int32 for qint32) plus its quantization parameters.
It is never silently taken for a float tensor: the ember functions it supports
(``relu``, ``flatten``, ``reshape``, pooling, ``cat``, ...) reach it through its
``__torch_function__`` and run on the integers; any other function raises
``NotImplementedError`` naming the op, as PyTorch's "Could not run ... QuantizedCPU" does.
``ember.is_tensor`` is True for it; ``isinstance(q, ember.Tensor)`` is False.

Arithmetic matches PyTorch's CPU kernels: a float32 ``x`` is quantized to
``clamp(round_half_even(x * float32(1 / float32(scale)) + zero_point), qmin, qmax)`` and
dequantized to ``(q - zero_point) * float32(scale)`` in float32.

>>> import ember
>>> q = ember.quantize_per_tensor(ember.tensor([-1.0, 0.25, 0.75, 100.0]), 0.5, 2, ember.quint8)
>>> q.int_repr().tolist(), q.dequantize().tolist()
([0, 2, 4, 202], [-1.0, 0.0, 1.0, 100.0])
"""

from __future__ import annotations

import math
import operator
from typing import Any

import ember
from ember._C import Tensor

__all__ = [
    "QuantizedTensor", "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "qscheme", "per_tensor_affine",
    "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
    "per_channel_affine_float_qparams", "quantize_per_tensor", "quantize_per_channel",
    "quantize_per_tensor_dynamic", "dequantize", "int_repr",
]


class _QDtype:
    """A quantized dtype (``ember.qint8``, ``ember.quint8``, ``ember.qint32``)."""

    __module__ = "ember"
    is_floating_point = False
    is_complex = False

    def __init__(self, name: str, storage: Any, qmin: int, qmax: int) -> None:
        self._name = name
        self.storage = storage  # the dtype of int_repr()
        self.qmin = qmin
        self.qmax = qmax
        self.itemsize = storage.itemsize

    @property
    def is_signed(self) -> bool:
        raise RuntimeError("isSignedType not supported for quantized types")

    def __repr__(self) -> str:
        return f"ember.{self._name}"

    def __reduce__(self) -> str:
        return self._name  # pickled as the global ember.<name>

    def to_real(self) -> _QDtype:
        return self


qint8 = _QDtype("qint8", ember.int8, -128, 127)
quint8 = _QDtype("quint8", ember.uint8, 0, 255)
qint32 = _QDtype("qint32", ember.int32, -(2**31), 2**31 - 1)
# sub-byte dtypes (weight-only embeddings): ember keeps one value per uint8 element; PyTorch's
# storage packs them (two / four per byte, low bits first), which only its pickles show
quint4x2 = _QDtype("quint4x2", ember.uint8, 0, 15)
quint2x4 = _QDtype("quint2x4", ember.uint8, 0, 3)
_QDTYPES = {"qint8": qint8, "quint8": quint8, "qint32": qint32, "quint4x2": quint4x2,
            "quint2x4": quint2x4}


class qscheme:  # noqa: N801  (PyTorch's class name)
    """A quantization scheme (``ember.per_tensor_affine`` and friends)."""

    __module__ = "ember"

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"ember.{self._name}"

    def __reduce__(self) -> str:
        return self._name


per_tensor_affine = qscheme("per_tensor_affine")
per_channel_affine = qscheme("per_channel_affine")
per_tensor_symmetric = qscheme("per_tensor_symmetric")
per_channel_symmetric = qscheme("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme("per_channel_affine_float_qparams")
_QSCHEMES = {s._name: s for s in (per_tensor_affine, per_channel_affine, per_tensor_symmetric,
                                  per_channel_symmetric, per_channel_affine_float_qparams)}


def _f32(v: float) -> float:
    """``v`` rounded to float32 (PyTorch's kernels use the scale as a float)."""
    return ember.tensor(float(v), dtype=ember.float32).item()


def _check_qdtype(op: str, dtype: Any) -> _QDtype:
    if not isinstance(dtype, _QDtype):
        raise RuntimeError(f"{op}: dtype must be ember.qint8, ember.quint8 or ember.qint32, got "
                           f"{dtype}")
    return dtype


def _check_float(op: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not {type(x).__name__}")
    if x.dtype is not ember.float32:
        raise RuntimeError(f"{op}: quantize only works on a float32 tensor, got {x.dtype}")
    if x.device.type != "cpu":
        raise RuntimeError(f"{op}: quantized tensors are CPU-only, got a tensor on {x.device}")
    return x.detach()


def _suggested_layout(data: Tensor, like: Tensor) -> Tensor:
    """``data`` laid out as PyTorch allocates a quantized result: in ``like``'s suggested memory
    format (channels-last stays so; any other layout becomes contiguous)."""
    if not like.is_contiguous():
        for fmt, nd in ((ember.channels_last, 4), (ember.channels_last_3d, 5)):
            if like.dim() == nd and like.is_contiguous(memory_format=fmt):
                return data.contiguous(memory_format=fmt)
    return data.contiguous()


def _quantize(x: Tensor, inv_scale: Any, zero_point: Any, dtype: _QDtype,
              nan_value: int | None = None) -> Tensor:
    """The integers of ``x`` (float32) for scales given as their float32 reciprocals; NaN
    becomes ``nan_value`` (PyTorch's kernels: qmax per tensor, 0 per channel, qmin for
    qint32)."""
    if bool(x.isnan().any()):
        if nan_value is None:
            nan_value = dtype.qmin if dtype is qint32 else dtype.qmax
        out = _quantize(ember.where(x.isnan(), 0.0, x), inv_scale, zero_point, dtype)
        return ember.where(x.isnan(), ember.tensor(nan_value, dtype=dtype.storage), out)
    # the zero point is added before rounding, in float32, as PyTorch's kernels do
    if dtype is qint32:  # float64 keeps the whole int32 range exact after rounding
        q = ember.round((x * inv_scale).to(ember.float64) + zero_point)
    else:
        q = ember.round(x * inv_scale + zero_point)
    return q.clamp(dtype.qmin, dtype.qmax).to(dtype.storage)


class QuantizedTensor:
    """A quantized CPU tensor: integer values and their quantization parameters.

    Made by :func:`quantize_per_tensor` / :func:`quantize_per_channel` (or by the quantized
    modules of ``ember.ao.nn.quantized``), not directly.

    >>> import ember
    >>> q = ember.quantize_per_tensor(ember.tensor([0.3, 9.0]), 0.25, 2, ember.qint8)
    >>> q.int_repr().tolist(), q.q_scale(), q.q_zero_point(), q.qscheme()
    ([3, 38], 0.25, 2, ember.per_tensor_affine)
    """

    is_quantized = True
    is_sparse = False
    is_sparse_csr = False
    is_mkldnn = False
    is_cuda = False
    is_meta = False
    requires_grad = False
    grad = None
    grad_fn = None
    is_leaf = True

    def __init__(self, data: Tensor, dtype: _QDtype, scheme: qscheme, scale: Any,
                 zero_point: Any, axis: int | None = None) -> None:
        self._data = data
        self._dtype = dtype
        self._qscheme = scheme
        self._scale = scale  # a float, or a float64 tensor of per-channel scales
        self._zero_point = zero_point  # an int, or an int64 tensor
        self._axis = axis

    # ---- the tensor's description ------------------------------------------------------------
    @property
    def dtype(self) -> _QDtype:
        return self._dtype

    @property
    def shape(self) -> Any:
        return self._data.shape

    def size(self, dim: int | None = None) -> Any:
        return self._data.size() if dim is None else self._data.size(dim)

    def dim(self) -> int:
        return self._data.dim()

    @property
    def ndim(self) -> int:
        return self._data.dim()

    def numel(self) -> int:
        return self._data.numel()

    nelement = numel

    def stride(self, dim: int | None = None) -> Any:
        return self._data.stride() if dim is None else self._data.stride(dim)

    def element_size(self) -> int:
        return self._dtype.itemsize

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return self._data.is_contiguous()

    @property
    def device(self) -> Any:
        return self._data.device

    @property
    def layout(self) -> Any:
        return ember.strided

    def __len__(self) -> int:
        return len(self._data)

    def get_device(self) -> int:
        return -1

    # ---- quantization parameters -------------------------------------------------------------
    def qscheme(self) -> qscheme:
        return self._qscheme

    def _per_channel(self) -> bool:
        return self._axis is not None

    def _need(self, per_channel: bool, op: str) -> None:
        if self._per_channel() != per_channel:
            raise RuntimeError(f"{op}: expected a {'per-channel' if per_channel else 'per-tensor'}"
                               f" quantized tensor, got qscheme {self._qscheme}")

    def q_scale(self) -> float:
        self._need(False, "q_scale")
        return self._scale

    def q_zero_point(self) -> int:
        self._need(False, "q_zero_point")
        return self._zero_point

    def q_per_channel_scales(self) -> Tensor:
        self._need(True, "q_per_channel_scales")
        return self._scale.clone()

    def q_per_channel_zero_points(self) -> Tensor:
        self._need(True, "q_per_channel_zero_points")
        return self._zero_point.clone()

    def q_per_channel_axis(self) -> int:
        self._need(True, "q_per_channel_axis")
        return self._axis

    def int_repr(self) -> Tensor:
        return self._data.clone()

    def _channel_shape(self) -> list[int]:
        shape = [1] * self._data.dim()
        shape[self._axis] = -1
        return shape

    def _is_float_qparams(self) -> bool:
        return self._qscheme is per_channel_affine_float_qparams

    def _float_qparams(self) -> tuple[Any, Any]:
        """(scale, zero_point) as float32 numbers / tensors broadcasting against the values."""
        if not self._per_channel():
            return _f32(self._scale), self._zero_point
        shape = self._channel_shape()
        return (self._scale.to(ember.float32).reshape(shape),
                self._zero_point.to(ember.float32).reshape(shape))

    def dequantize(self) -> Tensor:
        """The float32 values ``(q - zero_point) * scale``."""
        scale, zp = self._float_qparams()
        if self._is_float_qparams():  # float32 scales and zero points, computed in float32
            return (self._data.to(ember.float32) - zp) * scale
        if self._per_channel():  # PyTorch's per-channel kernel computes in double
            shape = self._channel_shape()
            return ((self._data.to(ember.float64) - self._zero_point.reshape(shape))
                    * self._scale.reshape(shape)).to(ember.float32)
        if self._dtype is qint32:
            return ((self._data.to(ember.float64) - zp) * scale).to(ember.float32)
        return (self._data.to(ember.float32) - zp) * scale

    # ---- views and copies (same parameters over rearranged integers) --------------------------
    def _with(self, data: Tensor, axis: Any = "same") -> QuantizedTensor:
        if not self._per_channel():
            return QuantizedTensor(data, self._dtype, self._qscheme, self._scale,
                                   self._zero_point)
        axis = self._axis if axis == "same" else axis
        return QuantizedTensor(data, self._dtype, self._qscheme, self._scale, self._zero_point,
                               axis)

    def clone(self, memory_format: Any = None) -> QuantizedTensor:
        out = self._with(self._data.clone())
        if self._per_channel():
            out._scale, out._zero_point = self._scale.clone(), self._zero_point.clone()
        return out

    def detach(self) -> QuantizedTensor:
        return self._with(self._data)

    def contiguous(self, memory_format: Any = None) -> QuantizedTensor:
        return self._with(self._data.contiguous())

    def cpu(self) -> QuantizedTensor:
        return self

    def to(self, *args: Any, **kwargs: Any) -> QuantizedTensor:
        for a in (*args, *kwargs.values()):
            if a is None or isinstance(a, bool):
                continue
            if isinstance(a, (str, ember.device)) and ember.device(a).type == "cpu":
                continue
            if a is self._dtype:
                continue
            raise RuntimeError(f"Tensor.to: a quantized tensor ({self._dtype}) only stays on the "
                               f"CPU with its dtype; got {a!r} (dequantize() it first)")
        return self

    def __deepcopy__(self, memo: dict) -> QuantizedTensor:
        return self.clone()

    def _keeps_axis(self, new_shape: tuple[int, ...]) -> int:
        """The channel axis after a reshape to ``new_shape`` (it must survive unchanged)."""
        old = tuple(self._data.shape)
        before = math.prod(old[:self._axis])
        acc = 1
        for i, n in enumerate(new_shape):
            if acc == before and n == old[self._axis]:
                return i
            acc *= n
        raise RuntimeError(f"reshape: a per-channel quantized tensor of shape {old} (axis "
                           f"{self._axis}) can't be reshaped to {new_shape} without merging or "
                           "splitting its channel axis")

    def reshape(self, *shape: Any) -> QuantizedTensor:
        data = self._data.reshape(*shape)
        axis = self._keeps_axis(tuple(data.shape)) if self._per_channel() else None
        return self._with(data, axis)

    def view(self, *shape: Any) -> QuantizedTensor:
        data = self._data.view(*shape)
        axis = self._keeps_axis(tuple(data.shape)) if self._per_channel() else None
        return self._with(data, axis)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> QuantizedTensor:
        data = self._data.flatten(start_dim, end_dim)
        axis = self._keeps_axis(tuple(data.shape)) if self._per_channel() else None
        return self._with(data, axis)

    def permute(self, *dims: Any) -> QuantizedTensor:
        data = self._data.permute(*dims)
        if not self._per_channel():
            return self._with(data)
        order = list(dims[0] if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims)
        order = [d % self._data.dim() for d in order]
        return self._with(data, order.index(self._axis))

    def transpose(self, dim0: int, dim1: int) -> QuantizedTensor:
        order = list(range(self._data.dim()))
        d0, d1 = dim0 % len(order), dim1 % len(order)
        order[d0], order[d1] = order[d1], order[d0]
        return self.permute(order)

    def t(self) -> QuantizedTensor:
        return self.transpose(0, 1) if self._data.dim() == 2 else self

    def __getitem__(self, index: Any) -> QuantizedTensor:
        data = self._data[index]
        if not self._per_channel():
            return self._with(data)
        # Where does the channel axis go? Walk the index like basic indexing does.
        idx = index if isinstance(index, tuple) else (index,)
        if any(not (isinstance(i, (int, slice)) or i is None or i is Ellipsis) for i in idx):
            raise NotImplementedError("__getitem__: a per-channel quantized tensor takes only "
                                      "ints, slices, None and ... as indices")
        n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
        expanded: list[Any] = []
        for i in idx:
            if i is Ellipsis:
                expanded += [slice(None)] * (self._data.dim() - n_real)
            else:
                expanded.append(i)
        expanded += [slice(None)] * (self._data.dim() - sum(1 for i in expanded if i is not None))
        dim_in, dim_out = 0, 0
        for i in expanded:
            if i is None:
                dim_out += 1
                continue
            if dim_in == self._axis:
                if isinstance(i, slice):
                    r = range(self._data.shape[dim_in])[i]
                    keep = ember.tensor(list(r), dtype=ember.int64)
                    return QuantizedTensor(data, self._dtype, self._qscheme,
                                           self._scale[keep], self._zero_point[keep], dim_out)
                # one channel: a per-tensor quantized result with that channel's parameters
                c = operator.index(i) % self._data.shape[dim_in]
                scheme = (per_tensor_symmetric if self._qscheme is per_channel_symmetric
                          else per_tensor_affine)
                return QuantizedTensor(data, self._dtype, scheme, float(self._scale[c].item()),
                                       int(self._zero_point[c].item()))
            dim_in += 1
            if isinstance(i, slice):
                dim_out += 1
        raise AssertionError("unreachable")

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    def equal(self, other: Any) -> bool:
        return _equal(self, other)

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(value, QuantizedTensor):
            value = value.dequantize()
        if isinstance(value, Tensor) or isinstance(value, (int, float)):
            full = self.dequantize()
            full[index] = value
            self._data = _requantize_like(full, self)._data
            return
        raise TypeError(f"__setitem__: can't assign a {type(value).__name__} to a quantized "
                        "tensor")

    def _no_arithmetic(self, *args: Any) -> Any:
        raise NotImplementedError("Could not run arithmetic with a quantized tensor "
                                  "(QuantizedCPU); dequantize() it first")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_arithmetic
    __truediv__ = __rtruediv__ = __matmul__ = __rmatmul__ = __neg__ = _no_arithmetic
    __iadd__ = __isub__ = __imul__ = _no_arithmetic

    # A one-element quantized tensor converts through its dequantized value, as in PyTorch
    # (more elements: the float tensor's own "cannot be converted" errors).
    def item(self) -> Any:
        return self.dequantize().item()

    def __bool__(self) -> bool:
        return bool(self.dequantize())

    def __float__(self) -> float:
        return float(self.dequantize())

    def __int__(self) -> int:
        return int(self.dequantize())

    def __complex__(self) -> complex:
        return complex(self.dequantize())

    # Comparisons compare the dequantized values elementwise (PyTorch's quantized eq / lt / ...),
    # never the objects' identities; hashing stays by identity, as for tensors.
    __hash__ = object.__hash__

    # ---- printing and pickling ---------------------------------------------------------------
    def __repr__(self) -> str:
        return _repr(self)

    def __reduce_ex__(self, protocol: int) -> Any:
        if self._per_channel():
            params: tuple[Any, ...] = (self._scale, self._zero_point, self._axis)
        else:
            params = (float(self._scale), int(self._zero_point))
        return (_rebuild_quantized, (self._dtype._name, self._qscheme._name, self._data, params))

    # ---- other ember functions ---------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        # Tensor methods: the supported ones run on the quantized tensor, the others raise
        # NotImplementedError naming the op when called (as PyTorch's QuantizedCPU does)
        if name.startswith("_") or not hasattr(Tensor, name):
            raise AttributeError(f"'QuantizedTensor' object has no attribute '{name}'")
        impl = _FUNCTIONS.get(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            if impl is None:
                return QuantizedTensor.__torch_function__(getattr(Tensor, name), (), (self, *args),
                                                          kwargs)
            return impl(self, *args, **kwargs)

        return method

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        impl = _FUNCTIONS.get(name)
        if impl is None:
            raise NotImplementedError(
                f"Could not run '{name}' with a quantized tensor (QuantizedCPU): ember's "
                "quantized tensors support dequantize(), int_repr() and "
                f"{', '.join(sorted(_FUNCTIONS))}; dequantize() first for other ops")
        return impl(*args, **kwargs)


def _dequantize_all(input: Any) -> Any:
    if isinstance(input, (list, tuple)):
        return [_dequantize_all(t) for t in input]
    return input.dequantize()


def _comparison(name: str) -> Any:
    def op(input: Any, other: Any, *, out: Any = None) -> Tensor:
        a = input.dequantize() if isinstance(input, QuantizedTensor) else input
        b = other.dequantize() if isinstance(other, QuantizedTensor) else other
        fn = getattr(ember, name)
        return fn(a, b) if out is None else fn(a, b, out=out)

    op.__name__ = name
    return op


def _dunder_comparison(name: str) -> Any:
    def method(self: QuantizedTensor, other: Any) -> Any:
        if not isinstance(other, (QuantizedTensor, Tensor, bool, int, float)):
            return NotImplemented
        return _comparison(name)(self, other)

    method.__name__ = f"__{name}__"
    return method


for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(QuantizedTensor, f"__{_cmp}__", _dunder_comparison(_cmp))


def _same_qparams(a: QuantizedTensor, b: QuantizedTensor) -> bool:
    if a._dtype is not b._dtype or a._qscheme is not b._qscheme or a._axis != b._axis:
        return False
    if a._per_channel():
        return bool(ember.equal(a._scale, b._scale)) and bool(
            ember.equal(a._zero_point, b._zero_point))
    return a._scale == b._scale and a._zero_point == b._zero_point


def _equal(a: Any, b: Any) -> bool:
    if not (isinstance(a, QuantizedTensor) and isinstance(b, QuantizedTensor)):
        return False
    return (_same_qparams(a, b) and tuple(a.shape) == tuple(b.shape)
            and bool(ember.equal(a._data, b._data)))


def _requantize_like(x: Tensor, like: QuantizedTensor) -> QuantizedTensor:
    if like._per_channel():
        return quantize_per_channel(x, like._scale, like._zero_point, like._axis, like._dtype)
    return quantize_per_tensor(x, like._scale, like._zero_point, like._dtype)


def _rebuild_quantized(dtype: str, scheme: str, data: Tensor, params: tuple) -> QuantizedTensor:
    """Unpickles a quantized tensor (allow-listed for ``ember.load(weights_only=True)``: it only
    checks and assembles plain values)."""
    if dtype not in _QDTYPES or scheme not in _QSCHEMES or not isinstance(data, Tensor):
        raise RuntimeError(f"ember.load: malformed quantized tensor ({dtype!r}, {scheme!r})")
    qd = _QDTYPES[dtype]
    if data.dtype is not qd.storage:
        raise RuntimeError(f"ember.load: a {dtype} tensor's values must be {qd.storage}, got "
                           f"{data.dtype}")
    if len(params) == 3:
        scale, zp, axis = params
        if not (isinstance(scale, Tensor) and isinstance(zp, Tensor) and isinstance(axis, int)
                and 0 <= axis < data.dim() and scale.numel() == zp.numel() == data.shape[axis]):
            raise RuntimeError("ember.load: malformed per-channel quantization parameters")
        return QuantizedTensor(data, qd, _QSCHEMES[scheme], scale, zp, axis)
    scale, zp = params
    return QuantizedTensor(data, qd, _QSCHEMES[scheme], float(scale), int(zp))


# ---- PyTorch's pickle of a quantized tensor (torch._utils._rebuild_qtensor) -------------------
# the storage class PyTorch names for each quantized dtype
TORCH_STORAGES = {"qint8": "QInt8Storage", "quint8": "QUInt8Storage", "qint32": "QInt32Storage",
                  "quint4x2": "QUInt4x2Storage", "quint2x4": "QUInt2x4Storage"}
_BITS = {"quint4x2": 4, "quint2x4": 2}


def unpack_sub_byte(raw: Tensor, dtype_name: str) -> Tensor:
    """The values of a quint4x2 / quint2x4 storage (``raw``: its bytes), one per uint8 element,
    low bits first; other dtypes' storages are returned as they are."""
    bits = _BITS.get(dtype_name)
    if bits is None:
        return raw
    per = 8 // bits
    shifts = ember.tensor([bits * k for k in range(per)], dtype=ember.int32)
    vals = (raw.to(ember.int32).reshape(-1, 1) >> shifts) & ((1 << bits) - 1)
    return vals.reshape(-1).to(ember.uint8)


def _pack_sub_byte(values: Tensor, bits: int) -> Tensor:
    per = 8 // bits
    flat = values.reshape(-1).to(ember.int32)
    pad = -flat.numel() % per
    if pad:
        flat = ember.cat([flat, ember.zeros(pad, dtype=ember.int32)])
    shifts = ember.tensor([bits * k for k in range(per)], dtype=ember.int32)
    return (flat.reshape(-1, per) << shifts).sum(1).to(ember.uint8)


def from_torch_pickle(values: Tensor, dtype_name: str, params: Any) -> QuantizedTensor:
    """The quantized tensor PyTorch's pickle describes: its integers (already laid out with the
    pickle's size and strides) and ``params``, ``(qscheme, scale, zero_point)`` or
    ``(qscheme, scales, zero_points, axis)``. Only plain values are accepted (this runs for
    ``ember.load(weights_only=True)``)."""
    dtype = _QDTYPES.get(dtype_name)
    if dtype is None or not isinstance(values, Tensor):
        raise RuntimeError(f"ember.load: a quantized tensor of unknown dtype {dtype_name!r}")
    if not isinstance(params, tuple) or not params or not isinstance(params[0], qscheme):
        raise RuntimeError(f"ember.load: malformed quantizer parameters {params!r} of a "
                           "quantized tensor")
    scheme = params[0]
    data = values.to(dtype.storage).contiguous()
    if scheme in (per_tensor_affine, per_tensor_symmetric):
        if len(params) != 3 or not isinstance(params[1], (int, float)) or \
                isinstance(params[2], bool) or not isinstance(params[2], int):
            raise RuntimeError(f"ember.load: malformed per-tensor quantizer parameters "
                               f"{params!r}")
        scale, zero_point = float(params[1]), int(params[2])
        if not (scale > 0 and math.isfinite(scale)) or \
                not dtype.qmin <= zero_point <= dtype.qmax:
            raise RuntimeError(f"ember.load: a {dtype_name} tensor with scale {scale} and zero "
                               f"point {zero_point} (expected a positive finite scale and a "
                               f"zero point in [{dtype.qmin}, {dtype.qmax}])")
        return QuantizedTensor(data, dtype, per_tensor_affine, scale, zero_point)
    if len(params) != 4:
        raise RuntimeError(f"ember.load: malformed per-channel quantizer parameters {params!r}")
    _, scales, zps, axis = params
    if type(scales) is list and type(zps) is list:  # (older PyTorch pickles lists)
        floats = scheme is per_channel_affine_float_qparams
        scales = ember.tensor(scales, dtype=ember.float32 if floats else ember.float64)
        zps = ember.tensor(zps, dtype=ember.float32 if floats else ember.int64)
    if not (isinstance(scales, Tensor) and isinstance(zps, Tensor) and isinstance(axis, int)
            and 0 <= axis < data.dim() and scales.dim() == zps.dim() == 1
            and scales.numel() == zps.numel() == data.shape[axis]):
        raise RuntimeError(f"ember.load: per-channel quantizer parameters (scales "
                           f"{getattr(scales, 'shape', scales)!r}, zero points "
                           f"{getattr(zps, 'shape', zps)!r}, axis {axis!r}) do not fit a "
                           f"quantized tensor of shape {tuple(data.shape)}")
    if scales.numel() and (not bool((scales.to(ember.float64) > 0).all())
                           or not bool(scales.to(ember.float64).isfinite().all())):
        raise RuntimeError("ember.load: a per-channel quantized tensor with scales that are not "
                           "all positive finite numbers")
    # PyTorch pickles float-qparams tensors as per_channel_affine: float zero points tell
    if scheme is per_channel_affine_float_qparams or zps.dtype.is_floating_point:
        return QuantizedTensor(data, dtype, per_channel_affine_float_qparams,
                               scales.to(ember.float32),
                               zps.to(ember.float32), axis)
    return QuantizedTensor(data, dtype, per_channel_affine, scales.to(ember.float64),
                           zps.to(ember.int64), axis)


def to_torch_pickle(q: QuantizedTensor) -> tuple[str, Tensor, tuple]:
    """What PyTorch's pickle of ``q`` holds: the storage class name, the storage's bytes (a
    contiguous tensor of the values, sub-byte dtypes packed) and the quantizer parameters
    (qscheme objects and tensors, written by the caller's pickler)."""
    data = q._data.contiguous()
    bits = _BITS.get(q._dtype._name)
    raw = _pack_sub_byte(data, bits) if bits else data.clone()
    if q._per_channel():
        # (as PyTorch: per_channel_affine also for float qparams, which float zero points mark)
        params: tuple = (per_channel_affine, q._scale.clone(), q._zero_point.clone(), q._axis)
    else:
        params = (q._qscheme, float(q._scale), int(q._zero_point))
    return TORCH_STORAGES[q._dtype._name], raw, params


# ---- constructors ---------------------------------------------------------------------------
def _scalar(op: str, what: str, v: Any, kind: type) -> Any:
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise RuntimeError(f"{op}: {what} must be a number or a one-element tensor, got "
                               f"shape {tuple(v.shape)}")
        v = v.item()
    if kind is int:
        try:
            return operator.index(v)
        except TypeError:
            raise TypeError(f"{op}: {what} must be an int, got {type(v).__name__}") from None
    if not isinstance(v, (int, float)):
        raise TypeError(f"{op}: {what} must be a float, got {type(v).__name__}")
    return float(v)


def quantize_per_tensor(input: Tensor | list[Tensor], scale: Any, zero_point: Any,
                        dtype: Any) -> QuantizedTensor | list[QuantizedTensor]:
    """``input`` (float32) quantized with one ``scale`` and ``zero_point``: the integers
    ``clamp(round(input / scale) + zero_point)`` in ``dtype``'s range, rounding half to even.
    A list of tensors takes tensors of scales and zero points (one each) and gives a list.

    >>> import ember
    >>> q = ember.quantize_per_tensor(ember.tensor([0.25, 0.75, 9.0]), 0.5, 0, ember.qint8)
    >>> q.int_repr().tolist()
    [0, 2, 18]
    """
    op = "quantize_per_tensor"
    if isinstance(input, (list, tuple)):
        return _quantize_list(op, input, scale, zero_point, dtype)
    x = _check_float(op, input)
    dtype = _check_qdtype(op, dtype)
    scale = _scalar(op, "scale", scale, float)
    zero_point = _scalar(op, "zero_point", zero_point, int)
    if not scale > 0 or not math.isfinite(scale):
        raise RuntimeError(f"{op}: scale must be a positive finite number, got {scale}")
    if not dtype.qmin <= zero_point <= dtype.qmax:
        raise RuntimeError(f"{op}: zero_point {zero_point} is out of the range of {dtype} "
                           f"[{dtype.qmin}, {dtype.qmax}]")
    inv = _f32(1.0 / _f32(scale))
    return QuantizedTensor(_suggested_layout(_quantize(x, inv, zero_point, dtype), x), dtype,
                           per_tensor_affine, scale, zero_point)


def _quantize_list(op: str, tensors: Any, scales: Any, zero_points: Any,
                   dtype: Any) -> list[QuantizedTensor]:
    """PyTorch's list overload: tensor i quantized with ``scales[i]`` and ``zero_points[i]``."""
    if not isinstance(scales, Tensor) or not isinstance(zero_points, Tensor):
        raise TypeError(f"{op}: a list of tensors takes tensors of scales and zero_points, got "
                        f"{type(scales).__name__} and {type(zero_points).__name__}")
    n = len(tensors)
    if scales.numel() != n or zero_points.numel() != n:
        raise RuntimeError(f"{op}: expected {n} scales and zero_points (one per tensor), got "
                           f"{scales.numel()} and {zero_points.numel()}")
    s, z = scales.reshape(-1).tolist(), zero_points.reshape(-1).tolist()
    return [quantize_per_tensor(t, float(s[i]), int(z[i]), dtype) for i, t in enumerate(tensors)]


def quantize_per_channel(input: Tensor, scales: Tensor, zero_points: Tensor, axis: int,
                         dtype: Any) -> QuantizedTensor:
    """``input`` (float32) quantized with one scale and zero point per index along ``axis``.

    >>> import ember
    >>> q = ember.quantize_per_channel(ember.tensor([[1.0, 2.0], [1.0, 2.0]]),
    ...                                ember.tensor([0.5, 1.0]), ember.tensor([0, 1]), 0,
    ...                                ember.quint8)
    >>> q.int_repr().tolist()
    [[2, 4], [2, 3]]
    """
    op = "quantize_per_channel"
    x = _check_float(op, input)
    dtype = _check_qdtype(op, dtype)
    if not isinstance(scales, Tensor) or not isinstance(zero_points, Tensor):
        raise TypeError(f"{op}: scales and zero_points must be tensors, got "
                        f"{type(scales).__name__} and {type(zero_points).__name__}")
    axis = operator.index(axis)
    if not 0 <= axis < x.dim():
        raise RuntimeError(f"{op}: axis {axis} is out of range for a tensor of {x.dim()} "
                           "dimensions")
    n = x.shape[axis]
    if scales.dim() != 1 or zero_points.dim() != 1 or scales.numel() != n or \
            zero_points.numel() != n:
        raise RuntimeError(f"{op}: expected scales and zero_points of shape ({n},) (the size of "
                           f"axis {axis} of input of shape {tuple(x.shape)}), got "
                           f"{tuple(scales.shape)} and {tuple(zero_points.shape)}")
    if not scales.is_floating_point():
        raise RuntimeError(f"{op}: scale tensor must be floating point, got {scales.dtype}")
    scales64 = scales.detach().to(ember.float64)
    if n and (not bool((scales64 > 0).all()) or not bool(scales64.isfinite().all())):
        raise RuntimeError(f"{op}: scales must be positive finite numbers")
    shape = [1] * x.dim()
    shape[axis] = -1
    if zero_points.dtype.is_floating_point:
        # float zero points: per_channel_affine_float_qparams (weight-only embeddings), all in
        # float32: round(x / scale + zero_point)
        s32 = scales.detach().to(ember.float32)
        z32 = zero_points.detach().to(ember.float32)
        data = _quantize(x, (1.0 / s32).reshape(shape), z32.reshape(shape), dtype, 0)
        return QuantizedTensor(data, dtype, per_channel_affine_float_qparams, s32, z32, axis)
    zps = zero_points.detach().to(ember.int64)
    if n and (int(zps.min()) < dtype.qmin or int(zps.max()) > dtype.qmax):
        raise RuntimeError(f"{op}: zero_points out of the range of {dtype} "
                           f"[{dtype.qmin}, {dtype.qmax}]")
    inv = (1.0 / scales64.to(ember.float32).to(ember.float64)).to(ember.float32).reshape(shape)
    data = _quantize(x, inv, zps.reshape(shape).to(ember.float32), dtype,
                     dtype.qmin if dtype is qint32 else 0)
    data = _suggested_layout(data, x)
    return QuantizedTensor(data, dtype, per_channel_affine, scales64, zps, axis)


def quantize_per_tensor_dynamic(input: Tensor, dtype: Any, reduce_range: bool) -> QuantizedTensor:
    """``input`` quantized with the scale and zero point of its own range (which always
    includes 0), as a dynamic quantized op does with its activation.

    >>> import ember
    >>> q = ember.quantize_per_tensor_dynamic(ember.tensor([0.0, 255.0]), ember.quint8, False)
    >>> q.q_scale(), q.q_zero_point()
    (1.0, 0)
    """
    op = "quantize_per_tensor_dynamic"
    x = _check_float(op, input)
    dtype = _check_qdtype(op, dtype)
    if dtype is qint32:
        raise RuntimeError(f"{op}: dtype must be ember.qint8 or ember.quint8, got {dtype}")
    lo = min(float(x.min()), 0.0) if x.numel() else 0.0
    hi = max(float(x.max()), 0.0) if x.numel() else 0.0
    if not (math.isfinite(lo) and math.isfinite(hi)):  # min / max propagate NaN
        # PyTorch refuses such a range (RuntimeError), no scale or zero point fits it
        raise RuntimeError(f"{op}: the input's range [{lo}, {hi}] must be finite (it holds NaN "
                           "or infinity)")
    scale, zp = choose_qparams(lo, hi, dtype.qmin, dtype.qmax, reduce_range)
    return quantize_per_tensor(x, scale, zp, dtype)


def choose_qparams(lo: float, hi: float, qmin: int, qmax: int, reduce_range: bool = False,
                   preserve_sparsity: bool = False) -> tuple[float, int]:
    """The (scale, zero_point) PyTorch's C++ ``ChooseQuantizationParams`` picks for the range
    ``[lo, hi]`` (dynamic quantization, the fused observer + fake quantize op): float32
    bounds widened to include 0, a double scale ``(hi - lo) / (qmax - qmin)`` (at least 6.1e-5),
    and the zero point from whichever bound loses less, rounded half to even.

    >>> choose_qparams(-1.0, 3.0, 0, 255)
    (0.01568627450980392, 64)
    """
    if reduce_range:
        qmin, qmax = qmin // 2, qmax // 2
    lo, hi = _f32(lo), _f32(hi)
    if preserve_sparsity and lo < 0 and hi > 0:
        sym_qmin = -((qmax - qmin) // 2 + 1)
        sym_qmax = (qmax - qmin) // 2
        max_scale = max(abs(lo / sym_qmin), abs(hi / sym_qmax))
        lo, hi = _f32(max_scale * sym_qmin), _f32(max_scale * sym_qmax)
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / (qmax - qmin)
    if _f32(scale) == 0.0 or math.isinf(1.0 / _f32(scale)):
        scale = 0.1
    small = _f32(6.1e-5)
    if _f32(scale) < small:  # cut off tiny scales, widening the range to match
        org = _f32(scale)
        scale = small
        if lo == 0.0:
            hi = _f32(small * (qmax - qmin))
        elif hi == 0.0:
            lo = _f32(-small * (qmax - qmin))
        else:
            amp = _f32(small / org)
            lo, hi = _f32(lo * amp), _f32(hi * amp)
    zero_from_min = qmin - lo / scale
    zero_from_max = qmax - hi / scale
    err_min = abs(qmin) - abs(lo / scale)
    err_max = abs(qmax) - abs(hi / scale)
    initial = zero_from_min if err_min < err_max else zero_from_max
    if preserve_sparsity and lo < 0 and hi > 0:
        initial = (qmin + qmax) / 2
    if initial < qmin:
        zp = qmin
    elif initial > qmax:
        zp = qmax
    else:
        zp = int(round(initial))  # half to even, as nearbyint
    return scale, zp


def dequantize(input: Any) -> Any:
    """``input.dequantize()``; a list of tensors gives the list of their dequantized values.

    >>> import ember
    >>> ember.dequantize(ember.quantize_per_tensor(ember.tensor([1.3]), 0.5, 0, ember.qint8))
    tensor([1.5000])
    """
    if isinstance(input, (list, tuple)):
        return [dequantize(t) for t in input]
    if isinstance(input, (QuantizedTensor, Tensor)):
        return input.dequantize()
    raise TypeError(f"dequantize(): argument 'input' must be a Tensor, not "
                    f"{type(input).__name__}")


def int_repr(input: QuantizedTensor) -> Tensor:
    """The integers of a quantized tensor (``input.int_repr()``)."""
    if not isinstance(input, QuantizedTensor):
        raise NotImplementedError(f"int_repr: expected a quantized tensor, got "
                                  f"{getattr(input, 'dtype', type(input).__name__)}")
    return input.int_repr()


# ---- printing --------------------------------------------------------------------------------
def _add_suffixes(body: str, suffixes: list[str], indent: int, width: int = 80) -> str:
    parts = [body]
    last = len(body) - body.rfind("\n") + 1  # PyTorch's line-length count (one over)
    for s in suffixes:
        if last + len(s) + 2 > width:
            parts.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            parts.append(", " + s)
            last += len(s) + 2
    return "".join(parts) + ")"


def _repr(q: QuantizedTensor) -> str:
    text = repr(q.dequantize())
    body = text[:-1]  # "tensor([...]" without the closing parenthesis
    suffixes = [f"size={tuple(q.shape)}", f"dtype={q.dtype}",
                f"quantization_scheme={q.qscheme()}"]
    if q._per_channel():
        suffixes += [f"scale={q._scale!r}", f"zero_point={q._zero_point!r}",
                     f"axis={q._axis}"]
    else:
        suffixes += [f"scale={q._scale!r}", f"zero_point={q._zero_point}"]
    return _add_suffixes(body, suffixes, len("tensor("))


# ---- ember functions on quantized tensors ----------------------------------------------------
def _relu(input: QuantizedTensor, inplace: bool = False) -> QuantizedTensor:
    if input._per_channel():
        zp = input._zero_point.reshape(input._channel_shape()).to(input._data.dtype)
        data = ember.maximum(input._data, zp)
    else:
        data = input._data.clamp(min=input._zero_point)
    if inplace:
        input._data = data
        return input
    return input._with(data)


def _relu_(input: QuantizedTensor) -> QuantizedTensor:
    return _relu(input, True)


def _unwrap_first(name: str) -> Any:
    def fn(input: QuantizedTensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = name
    return fn


def _pool(name: str) -> Any:
    """Max pooling on the integers (order-preserving, so exact for any positive scale)."""

    def fn(input: QuantizedTensor, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("return_indices"):
            raise NotImplementedError(f"{name}: return_indices with a quantized tensor")
        if input._per_channel():
            raise NotImplementedError(f"{name}: per-channel quantized input")
        import ember.nn.functional as F  # noqa: PLC0415  (only reached with ember-nn loaded)

        out = getattr(F, name)(input._data.to(ember.float32), *args, **kwargs)
        return input._with(out.to(input._data.dtype))

    fn.__name__ = name
    return fn


def _avg_pool(name: str) -> Any:
    """Average pooling: mean of the integers, rounded half to even (the quantized kernel)."""

    def fn(input: QuantizedTensor, *args: Any, **kwargs: Any) -> Any:
        if input._per_channel():
            raise NotImplementedError(f"{name}: per-channel quantized input")
        import ember.nn.functional as F  # noqa: PLC0415

        out = getattr(F, name)(input._data.to(ember.float64), *args, **kwargs)
        out = ember.round(out).clamp(input._dtype.qmin, input._dtype.qmax)
        return input._with(out.to(input._data.dtype))

    fn.__name__ = name
    return fn


def _cat(tensors: Any, dim: int = 0) -> QuantizedTensor:
    ts = list(tensors)
    if not ts or not all(isinstance(t, QuantizedTensor) for t in ts):
        raise NotImplementedError("cat: quantized tensors can only be concatenated with "
                                  "quantized tensors")
    first = ts[0]
    if any(t._dtype is not first._dtype for t in ts):
        # PyTorch refuses the mix rather than requantizing across dtypes
        raise RuntimeError("cat: All dtypes must be the same, got "
                           f"{', '.join(str(t._dtype) for t in ts)}")
    if all(_same_qparams(first, t) for t in ts):
        return first._with(ember.cat([t._data for t in ts], dim))
    # different parameters: requantize the values to the first one's, as PyTorch's cat does
    return _requantize_like(ember.cat([t.dequantize() for t in ts], dim), first)


def _dropout(input: QuantizedTensor, p: float = 0.5, training: bool = True,
             inplace: bool = False) -> QuantizedTensor:
    if training:
        raise NotImplementedError("dropout: training-mode dropout of a quantized tensor (a "
                                  "quantized model runs in eval mode)")
    return input


def _nn_functional() -> Any:
    import ember.nn.functional as F  # noqa: PLC0415  (only reached with ember-nn loaded)

    return F


def _float_then_requantize(name: str, fn: Any, fixed: dict[_QDtype, tuple[float, int]] | None
                           = None) -> Any:
    """An op computed on the dequantized values and quantized again: with the input's own
    parameters, or with the fixed output parameters PyTorch's kernel uses for a bounded
    function (sigmoid: [0, 1), tanh: [-1, 1))."""

    def op(input: QuantizedTensor, *args: Any, **kwargs: Any) -> QuantizedTensor:
        if input._per_channel():
            raise NotImplementedError(f"{name}: per-channel quantized input")
        out = fn(input.dequantize(), *args, **kwargs)
        if fixed is not None:
            if input._dtype not in fixed:
                raise NotImplementedError(f"{name}: quantized input of dtype {input._dtype}")
            scale, zp = fixed[input._dtype]
            return quantize_per_tensor(out, scale, zp, input._dtype)
        return _requantize_like(out, input)

    op.__name__ = name
    return op


_UNIT = {quint8: (1.0 / 256, 0), qint8: (1.0 / 256, -128)}
_SIGNED_UNIT = {quint8: (2.0 / 256, 128), qint8: (2.0 / 256, 0)}


def _interpolate(input: QuantizedTensor, *args: Any, **kwargs: Any) -> QuantizedTensor:
    if input._per_channel():
        raise NotImplementedError("interpolate: per-channel quantized input")
    F = _nn_functional()
    out = F.interpolate(input._data.to(ember.float32), *args, **kwargs)  # on the integers
    out = ember.round(out).clamp(input._dtype.qmin, input._dtype.qmax)
    return input._with(out.to(input._data.dtype))


_FUNCTIONS: dict[str, Any] = {
    "relu": _relu, "relu_": _relu_, "dequantize": lambda input: _dequantize_all(input),
    "int_repr": lambda input: input.int_repr(), "cat": _cat, "concat": _cat, "concatenate": _cat,
    "max_pool1d": _pool("max_pool1d"), "max_pool2d": _pool("max_pool2d"),
    "adaptive_max_pool2d": _pool("adaptive_max_pool2d"),
    "avg_pool2d": _avg_pool("avg_pool2d"), "adaptive_avg_pool2d": _avg_pool("adaptive_avg_pool2d"),
    "is_tensor": lambda obj: True, "equal": _equal,
    "numel": lambda input: input.numel(), "dropout": _dropout,
    "sigmoid": _float_then_requantize("sigmoid", ember.sigmoid, _UNIT),
    "hardsigmoid": _float_then_requantize(
        "hardsigmoid", lambda x, inplace=False: _nn_functional().hardsigmoid(x), _UNIT),
    "tanh": _float_then_requantize("tanh", ember.tanh, _SIGNED_UNIT),
    "hardtanh": _float_then_requantize(
        "hardtanh", lambda x, min_val=-1.0, max_val=1.0, inplace=False:
        x.clamp(min_val, max_val)),
    "relu6": _float_then_requantize("relu6", lambda x, inplace=False: x.clamp(0.0, 6.0)),
    "leaky_relu": _float_then_requantize(
        "leaky_relu", lambda x, negative_slope=0.01, inplace=False:
        _nn_functional().leaky_relu(x, negative_slope)),
    "mean": _float_then_requantize("mean", lambda x, *a, **k: x.mean(*a, **k)),
    "interpolate": _interpolate,
}
for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    _FUNCTIONS[_cmp] = _FUNCTIONS[f"__{_cmp}__"] = _comparison(_cmp)  # float_tensor < q too
for _name in ("flatten", "reshape", "view", "permute", "transpose", "t", "clone", "detach",
              "contiguous", "q_scale", "q_zero_point", "q_per_channel_scales",
              "q_per_channel_zero_points", "q_per_channel_axis", "qscheme", "size", "dim",
              "squeeze", "unsqueeze"):
    _FUNCTIONS[_name] = _unwrap_first(_name)


def _squeeze(self: QuantizedTensor, dim: Any = None) -> QuantizedTensor:
    data = self._data.squeeze() if dim is None else self._data.squeeze(dim)
    axis = self._keeps_axis(tuple(data.shape)) if self._per_channel() else None
    return self._with(data, axis)


def _unsqueeze(self: QuantizedTensor, dim: int) -> QuantizedTensor:
    data = self._data.unsqueeze(dim)
    axis = self._keeps_axis(tuple(data.shape)) if self._per_channel() else None
    return self._with(data, axis)


QuantizedTensor.squeeze = _squeeze  # type: ignore[attr-defined]
QuantizedTensor.unsqueeze = _unsqueeze  # type: ignore[attr-defined]


def _is_tensor_or_quantized(obj: Any) -> bool:
    return isinstance(obj, QuantizedTensor) or _IS_TENSOR(obj)


_IS_TENSOR: Any = None


def _install(ns: dict[str, Any]) -> None:
    global _IS_TENSOR
    for name in ("qint8", "quint8", "qint32", "quint4x2", "quint2x4", "qscheme",
                 "per_tensor_affine",
                 "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
                 "per_channel_affine_float_qparams", "quantize_per_tensor", "quantize_per_channel",
                 "quantize_per_tensor_dynamic", "dequantize", "int_repr"):
        ns[name] = globals()[name]
    # A plain tensor's dequantize() is its float32 value (itself when already float32), as in
    # PyTorch
    Tensor.dequantize = lambda self: self.to(ember.float32)
    _IS_TENSOR = ns["is_tensor"]
    _is_tensor_or_quantized.__doc__ = _IS_TENSOR.__doc__
    _is_tensor_or_quantized.__name__ = "is_tensor"
    ns["is_tensor"] = _is_tensor_or_quantized
    from ember import _serialization_objects

    _serialization_objects._DEFAULT_SAFE["ember._quantized._rebuild_quantized"] = \
        _rebuild_quantized
    for name in (*_QDTYPES, *_QSCHEMES):
        _serialization_objects._DEFAULT_SAFE[f"ember.{name}"] = ns[name]
