"""How tensors print: PyTorch's format (``torch/_tensor_str.py``), element for element.

Only the elements that are shown are read: a summarized tensor (more than ``threshold``
elements) is sliced down to its edge items with basic indexing before ``tolist()``, so printing
a huge tensor costs no more than printing a small one.
"""

from __future__ import annotations

import math
from typing import Any

from ember import _C

_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80}
_PROFILES = {
    "default": _DEFAULTS,
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}
_OPTIONS: dict[str, Any] = {**_DEFAULTS, "sci_mode": None}


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Sets how tensors print, like ``torch.set_printoptions``.

    >>> import ember
    >>> ember.set_printoptions(precision=2)
    >>> ember.tensor([1.12345])
    tensor([1.12])
    >>> ember.set_printoptions(profile="default")
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(
                f"set_printoptions: unknown profile {profile!r}; expected one of "
                f"{', '.join(_PROFILES)}"
            )
        _OPTIONS.update(_PROFILES[profile])
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(
                    f"set_printoptions: {key} must be a non-negative number, got {value!r}"
                )
            _OPTIONS[key] = value
    _OPTIONS["sci_mode"] = sci_mode  # like torch: not passing it resets it to automatic


def get_printoptions() -> dict[str, Any]:
    """The current print options, as keyword arguments for ``set_printoptions``."""
    return dict(_OPTIONS)


class _Ellipsis:
    """Marks where summarization dropped rows or elements."""


_SKIP = _Ellipsis()


def _gather(t: Any, summarize: bool, edge: int) -> list:
    """The shown part of `t` (ndim >= 1) as nested lists, with _SKIP where items are elided."""
    n = t.shape[0]
    if not summarize or n == 0:
        return t.tolist()
    if t.ndim == 1:
        if n > 2 * edge:
            return t[:edge].tolist() + [_SKIP] + t[n - edge:].tolist()
        return t.tolist()
    if n > 2 * edge:
        return ([_gather(t[i], True, edge) for i in range(edge)] + [_SKIP]
                + [_gather(t[i], True, edge) for i in range(n - edge, n)])
    return [_gather(t[i], True, edge) for i in range(n)]


def _flatten(data: Any, out: list) -> None:
    if isinstance(data, list):
        for d in data:
            _flatten(d, out)
    elif data is not _SKIP:
        out.append(data)


class _Formatter:
    def __init__(self, values: list, floating: bool) -> None:
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        precision = _OPTIONS["precision"]
        if not floating:
            for v in values:
                self.max_width = max(self.max_width, len(str(v)))
            return
        finite = [v for v in values if v != 0 and math.isfinite(v)]
        if not finite:
            return
        absolute = [abs(v) for v in finite]
        lo, hi = min(absolute), max(absolute)
        self.int_mode = all(v == math.ceil(v) for v in finite)
        if _OPTIONS["sci_mode"] is None:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        else:
            self.sci_mode = bool(_OPTIONS["sci_mode"])
        if self.sci_mode:
            width = max(len(f"{v:.{precision}e}") for v in finite)
        elif self.int_mode:
            # Integral floats print as "1." : one more than the digits.
            width = max(len(f"{v:.0f}") for v in finite) + 1
        else:
            width = max(len(f"{v:.{precision}f}") for v in finite)
        self.max_width = max(self.max_width, width)

    def format(self, v: Any) -> str:
        if self.floating:
            precision = _OPTIONS["precision"]
            if self.sci_mode:
                s = f"{v:{self.max_width}.{precision}e}"
            elif self.int_mode:
                s = f"{v:.0f}"
                if not (math.isinf(v) or math.isnan(v)):
                    s += "."
            else:
                s = f"{v:.{precision}f}"
        else:
            s = str(v)
        return (self.max_width - len(s)) * " " + s


class _ComplexFormatter:
    """Complex numbers as PyTorch prints them: the real parts and the imaginary parts each get a
    formatter of their own (``1.+2.j``, ``0.5000-1.2500j``)."""

    def __init__(self, values: list) -> None:
        self.real = _Formatter([v.real for v in values], True)
        self.imag = _Formatter([v.imag for v in values], True)
        self.max_width = self.real.max_width + self.imag.max_width + 1

    def format(self, v: Any) -> str:
        real = self.real.format(v.real)
        imag = (self.imag.format(v.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _formatter(values: list, dtype: Any) -> Any:
    if dtype.is_complex:
        return _ComplexFormatter(values)
    return _Formatter(values, dtype.is_floating_point)


def _vector_str(data: list, indent: int, fmt: Any) -> str:
    element_length = fmt.max_width + 2  # the value, a comma and a space
    per_line = max(1, math.floor((_OPTIONS["linewidth"] - indent) / element_length))
    items = [" ..." if v is _SKIP else fmt.format(v) for v in data]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_str(data: list, ndim: int, indent: int, fmt: Any) -> str:
    if ndim == 1:
        return _vector_str(data, indent, fmt)
    rows = ["..." if row is _SKIP else _nested_str(row, ndim - 1, indent + 1, fmt) for row in data]
    return "[" + ("," + "\n" * (ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _tensor_str(t: Any, indent: int) -> str:
    if t.numel() == 0:
        return "[]"
    summarize = t.numel() > _OPTIONS["threshold"]
    if t.ndim == 0:
        v = t.item()
        return _formatter([v], t.dtype).format(v)
    edge = int(_OPTIONS["edgeitems"])
    if summarize and edge <= 0:
        return "[...]"
    data = _gather(t, summarize, edge)
    values: list = []
    _flatten(data, values)
    return _nested_str(data, t.ndim, indent, _formatter(values, t.dtype))


def _add_suffixes(text: str, suffixes: list, indent: int) -> str:
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > _OPTIONS["linewidth"]:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def _grad_fn_name(grad_fn: Any) -> str:
    name = type(grad_fn).__name__
    getter = getattr(grad_fn, "name", None)
    if callable(getter):
        name = getter()
    return str(name).rsplit("::", 1)[-1]


def tensor_repr(t: Any) -> str:
    """``repr(tensor)``: PyTorch's ``tensor([...], dtype=...)`` format."""
    cls = type(t).__name__
    prefix = "tensor(" if cls in ("Tensor", "Parameter") else f"{cls}("
    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    default = _C.get_default_dtype()
    default_complex = _C.complex128 if default is _C.float64 else _C.complex64
    dtype = t.dtype
    if t.device.type == "meta":
        # No data to show: PyTorch's tensor(..., device='meta', size=(2, 3)).
        suffixes.append(f"size={tuple(t.shape)}")
        if dtype is not default:
            suffixes.append(f"dtype={dtype!r}")
        body = "..."
    elif t.numel() == 0:
        # Shape (0,) is implied by "[]"; any other empty shape is spelled out, like NumPy.
        if t.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        # No element shows the dtype, so anything but the default float is printed.
        if dtype is not default:
            suffixes.append(f"dtype={dtype!r}")
        body = "[]"
    else:
        if not _OPTIONS["edgeitems"]:
            suffixes.append(f"size={tuple(t.shape)}")
        if dtype not in (default, default_complex, _C.int64, _C.bool):
            suffixes.append(f"dtype={dtype!r}")
        body = _tensor_str(t if t.device.type == "cpu" else t.cpu(), indent)
    grad_fn = getattr(t, "grad_fn", None)
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{_grad_fn_name(grad_fn)}>")
    elif getattr(t, "requires_grad", False):
        suffixes.append("requires_grad=True")
    level = _C._current_dual_level()
    if level >= 0 and t.device.type != "meta":
        tangent = _C._unpack_dual(t, level)[1]
        if tangent is not None:  # a dual tensor shows its tangent, as in PyTorch
            suffixes.append(f"tangent={tangent}")
    return _add_suffixes(prefix + body, suffixes, indent)
