"""Numerical limits of the floating and integer dtypes (``ember.finfo`` / ``ember.iinfo``)."""

from __future__ import annotations

from typing import Any

from ember import _C

# dtype name -> (bits, mantissa bits (excluding the implicit one), max exponent, min exponent)
_FLOAT_FORMATS = {
    "float16": (16, 10, 15, -14),
    "bfloat16": (16, 7, 127, -126),
    "float32": (32, 23, 127, -126),
    "float64": (64, 52, 1023, -1022),
    "float8_e4m3fn": (8, 3, 8, -6),
    "float8_e5m2": (8, 2, 15, -14),
}
# float8_e4m3fn spends its top mantissa code on NaN: its largest value is 1.75 * 2^8, not 1.875
_FLOAT_MAX = {"float8_e4m3fn": 448.0}
_INT_BITS = {"uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16,
             "uint32": 32, "uint64": 64}
_UNSIGNED = {"uint8", "uint16", "uint32", "uint64"}


def _dtype_name(dt: Any) -> str:
    return repr(dt).split(".", 1)[1]


class finfo:  # noqa: N801  (the name matches torch.finfo)
    """Machine limits of a floating dtype, like ``torch.finfo``.

    >>> import ember
    >>> ember.finfo(ember.float16).max
    65504.0
    >>> ember.finfo(ember.float32).eps
    1.1920928955078125e-07
    """

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type: Any = None) -> None:  # noqa: A002  (torch's argument name)
        if type is None:
            type = _C.get_default_dtype()  # noqa: A001
        if not isinstance(type, _C.dtype):
            raise TypeError(
                f"finfo(): argument 'type' (position 1) must be ember.dtype, not {_type_name(type)}"
            )
        name = _dtype_name(type)
        # a complex dtype has the limits of its parts, as in PyTorch
        name = {"complex64": "float32", "complex128": "float64"}.get(name, name)
        if name not in _FLOAT_FORMATS:
            raise TypeError(
                f"ember.finfo() requires a floating point input type, got {type!r}. "
                "Use ember.iinfo to handle integer types"
            )
        bits, mant, emax, emin = _FLOAT_FORMATS[name]
        self.bits = bits
        self.eps = 2.0 ** -mant
        self.max = _FLOAT_MAX.get(name, (2.0 - 2.0 ** -mant) * 2.0 ** emax)
        self.min = -self.max
        self.tiny = 2.0 ** emin
        self.smallest_normal = self.tiny
        # 10 ** -(decimal digits of precision), as NumPy and PyTorch define it.
        digits = 0
        while 10.0 ** -(digits + 1) >= self.eps:
            digits += 1
        self.resolution = float(f"1e-{digits}")
        self.dtype = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    __hash__ = None  # type: ignore[assignment]  (unhashable, like torch.finfo)

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:  # noqa: N801  (the name matches torch.iinfo)
    """Limits of an integer dtype, like ``torch.iinfo``.

    >>> import ember
    >>> ember.iinfo(ember.int8).min, ember.iinfo(ember.uint8).max
    (-128, 255)
    """

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type: Any) -> None:  # noqa: A002  (torch's argument name)
        if not isinstance(type, _C.dtype):
            raise TypeError(
                f"iinfo(): argument 'type' (position 1) must be ember.dtype, not {_type_name(type)}"
            )
        name = _dtype_name(type)
        if name == "bool":
            raise TypeError("ember.bool is not supported by ember.iinfo")
        if name not in _INT_BITS:
            raise TypeError(
                f"ember.iinfo() requires an integer input type, got {type!r}. "
                "Use ember.finfo to handle floating types"
            )
        bits = _INT_BITS[name]
        self.bits = bits
        if name in _UNSIGNED:
            self.min, self.max = 0, 2**bits - 1
        else:
            self.min, self.max = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        self.dtype = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def _type_name(o: Any) -> str:
    return type(o).__name__
