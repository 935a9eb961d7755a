"""Discrete Fourier transforms, as ``torch.fft``.

Every function here resizes its input (``n=`` / ``s=``: zero padding or trimming along the
transformed dims), works out the normalization and calls one of three primitives of the C++ core
(``ember._fft_c2c``, ``_fft_r2c``, ``_fft_c2r``: a mixed-radix Cooley-Tukey FFT with Bluestein's
algorithm for large prime factors). Real inputs give complex64 (float32) or complex128 (float64)
results; integer inputs are promoted to the default float dtype first.

``norm`` is ``"backward"`` (default: the inverse transforms scale by 1/n), ``"ortho"`` (both
by 1/sqrt(n)) or ``"forward"`` (the forward transforms scale by 1/n).

>>> import ember
>>> ember.fft.fft(ember.tensor([1.0, 2.0, 3.0, 4.0]))
tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])
>>> ember.fft.irfft(ember.fft.rfft(ember.tensor([1.0, 2.0, 4.0])), n=3).tolist()
[1.0, 2.0, 4.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ember import _C, _outarg
from ember._C import Tensor

__all__ = [
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn",
    "ifftn", "rfftn", "irfftn", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq",
    "fftshift", "ifftshift",
]

_NORMS = ("backward", "ortho", "forward")


def _norm_mode(norm: str | None, forward: bool, op: str) -> int:
    """The core's normalization code: 0 none, 1 by 1/sqrt(n), 2 by 1/n."""
    if norm is None:
        norm = "backward"
    if norm not in _NORMS:
        raise RuntimeError(f"{op}: Invalid normalization mode: {norm!r} (expected one of "
                         f"{', '.join(map(repr, _NORMS))} or None)")
    if norm == "ortho":
        return 1
    return 2 if (norm == "forward") == forward else 0


def _check_tensor(x: Any, op: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor as input, got {type(x).__name__}")


def _float_input(x: Tensor, op: str, *, real_only: bool = False, to_complex: bool = False) -> Tensor:
    """x as float32/float64 (or complex64/complex128): integers and bool become the default
    float dtype; the 16-bit floats are refused (ember's FFT runs in float32 and float64)."""
    dt = x.dtype
    if dt.is_complex:
        if real_only:
            raise RuntimeError(f"{op} expects a real input tensor, but got {dt}")
        return x
    if dt in (_C.float16, _C.bfloat16):
        raise RuntimeError(f"{op}: Unsupported dtype {dt} (ember's FFT takes float32, float64, "
                           "complex64 and complex128; convert with .float())")
    if not dt.is_floating_point:
        x = x.to(_C.get_default_dtype())
    if to_complex:
        x = x.to(_C.complex128 if x.dtype is _C.float64 else _C.complex64)
    return x


def _wrap(dim: int, ndim: int, op: str) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1) or ndim == 0:
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                         f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {dim})")
    return dim % ndim


def _resize(x: Tensor, dims: Sequence[int], sizes: Sequence[int]) -> Tensor:
    """x zero-padded or trimmed at the end of each dim to the given size."""
    for d, n in zip(dims, sizes):
        cur = x.shape[d]
        if n < cur:
            x = x.narrow(d, 0, n)
        elif n > cur:
            shape = list(x.shape)
            shape[d] = n - cur
            x = _C.cat([x, _C.zeros(shape, dtype=x.dtype, device=x.device)], d)
    return x


def _dims_and_sizes(x: Tensor, s: int | Sequence[int] | None, dim: int | Sequence[int] | None, op: str,
                    default_all: bool = True) -> tuple[list[int], list[int] | None]:
    """torch.fft's rules for (s, dim): s alone transforms the last len(s) dims; dim alone (or
    neither) gives the sizes of x; both must have the same length."""
    if isinstance(dim, int):
        dim = [dim]
    if s is not None:
        s = [int(s)] if isinstance(s, int) else [int(v) for v in s]  # one int: one size (torch)
        if dim is None:
            if len(s) > x.ndim:
                raise RuntimeError(f"{op}: Got shape with {len(s)} values but input tensor only "
                                   f"has {x.ndim} dimensions.")
            dim = list(range(x.ndim - len(s), x.ndim))
        elif len(s) != len(dim):
            raise RuntimeError(f"{op}: When given, dim and shape arguments must have the same "
                               f"length (got {len(dim)} and {len(s)})")
    elif dim is None:
        dim = list(range(x.ndim)) if default_all else [x.ndim - 1]
    dims = [_wrap(int(d), x.ndim, op) for d in dim]
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{op}: FFT dims must be unique")
    if s is not None:
        for n in s:
            if n != -1 and n < 1:
                raise RuntimeError(f"{op}: Invalid number of data points ({n}) specified")
    return dims, s


def _check_points(x: Tensor, dims: Sequence[int], sizes: Sequence[int], op: str) -> None:
    for d, n in zip(dims, sizes):
        if n < 1:
            raise RuntimeError(f"{op}: Invalid number of data points ({n}) specified")
    del x


def _one_n(n: int | None, op: str) -> list[int] | None:
    """A 1-D transform's ``n`` as the sizes list (-1 means "keep" only for the n-D ``s``)."""
    if n is None:
        return None
    if n < 1:
        raise RuntimeError(f"{op}: Invalid number of data points ({n}) specified")
    return [n]


def _c2c(x: Tensor, s: Any, dim: Any, norm: str | None, forward: bool, op: str,
         default_all: bool) -> Tensor:
    _check_tensor(x, op)
    x = _float_input(x, op, to_complex=True)
    dims, s = _dims_and_sizes(x, s, dim, op, default_all)
    if not dims:  # no axis to transform: the input as complex, a new tensor (as torch)
        return x.clone()
    sizes = [x.shape[d] if s is None or s[i] == -1 else s[i] for i, d in enumerate(dims)]
    _check_points(x, dims, sizes, op)
    x = _resize(x, dims, sizes)
    return _C._fft_c2c(x, dims, _norm_mode(norm, forward, op), forward)


def _r2c(x: Tensor, s: Any, dim: Any, norm: str | None, forward: bool, op: str,
         default_all: bool) -> Tensor:
    _check_tensor(x, op)
    x = _float_input(x, op, real_only=True)
    dims, s = _dims_and_sizes(x, s, dim, op, default_all)
    if not dims:
        raise RuntimeError(f"{op} must transform at least one axis")
    sizes = [x.shape[d] if s is None or s[i] == -1 else s[i] for i, d in enumerate(dims)]
    _check_points(x, dims, sizes, op)
    x = _resize(x, dims, sizes)
    out = _C._fft_r2c(x, dims, _norm_mode(norm, forward, op), True)
    # the inverse direction (ihfft): conj of the forward transform
    return out if forward else out.conj()


def _c2r(x: Tensor, s: Any, dim: Any, norm: str | None, forward: bool, op: str,
         default_all: bool) -> Tensor:
    _check_tensor(x, op)
    x = _float_input(x, op, to_complex=True)
    dims, s = _dims_and_sizes(x, s, dim, op, default_all)
    if not dims:
        raise RuntimeError(f"{op} must transform at least one axis")
    sizes = [x.shape[d] if s is None or s[i] == -1 else s[i] for i, d in enumerate(dims)]
    last = dims[-1]
    if s is None or s[-1] == -1:
        sizes[-1] = 2 * (x.shape[last] - 1)
    _check_points(x, dims, sizes, op)
    # the other dims take their full sizes; the last holds n // 2 + 1 one-sided bins
    x = _resize(x, dims[:-1] + [last], sizes[:-1] + [sizes[-1] // 2 + 1])
    if forward:  # hfft: the forward transform of a Hermitian signal
        x = x.conj()
    return _C._fft_c2r(x, dims, _norm_mode(norm, forward, op), sizes[-1])


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """One-dimensional discrete Fourier transform along ``dim`` (complex result).

    >>> import ember
    >>> ember.fft.fft(ember.tensor([1.0, 0.0, 0.0, 0.0])).tolist()
    [(1+0j), (1+0j), (1+0j), (1+0j)]
    """
    return _c2c(input, _one_n(n, "fft"), [dim], norm, True, "fft", False)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """Inverse of :func:`fft`.

    >>> import ember
    >>> ember.fft.ifft(ember.tensor([4.0, 0.0, 0.0, 0.0])).real.tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    return _c2c(input, _one_n(n, "ifft"), [dim], norm, False, "ifft", False)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """FFT of a real signal: the ``n // 2 + 1`` non-negative frequency bins.

    >>> import ember
    >>> ember.fft.rfft(ember.tensor([1.0, 1.0, 1.0, 1.0])).tolist()
    [(4+0j), 0j, 0j]
    """
    return _r2c(input, _one_n(n, "rfft"), [dim], norm, True, "rfft", False)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """Inverse of :func:`rfft`: a real signal of ``n`` points (default ``2 * (m - 1)``).

    >>> import ember
    >>> ember.fft.irfft(ember.tensor([4.0, 0.0, 0.0])).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    return _c2r(input, _one_n(n, "irfft"), [dim], norm, False, "irfft", False)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """FFT of a Hermitian-symmetric signal given by its first half (real result).

    >>> import ember
    >>> ember.fft.hfft(ember.tensor([1.0, 0.0, 0.0])).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    return _c2r(input, _one_n(n, "hfft"), [dim], norm, True, "hfft", False)


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """Inverse of :func:`hfft`: the one-sided inverse FFT of a real signal.

    >>> import ember
    >>> ember.fft.ihfft(ember.tensor([4.0, 4.0, 4.0, 4.0])).abs().tolist()
    [4.0, 0.0, 0.0]
    """
    return _r2c(input, _one_n(n, "ihfft"), [dim], norm, False, "ihfft", False)


def fftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
         norm: str | None = None) -> Tensor:
    """N-dimensional FFT over ``dim`` (default: all dims, or the last ``len(s)``).

    >>> import ember
    >>> ember.fft.fftn(ember.ones(2, 2)).tolist()
    [[(4+0j), 0j], [0j, 0j]]
    """
    return _c2c(input, s, dim, norm, True, "fftn", True)


def ifftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
          norm: str | None = None) -> Tensor:
    """Inverse of :func:`fftn`.

    >>> import ember
    >>> ember.fft.ifftn(ember.fft.fftn(ember.ones(2, 2))).real.tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    return _c2c(input, s, dim, norm, False, "ifftn", True)


def rfftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
          norm: str | None = None) -> Tensor:
    """N-dimensional FFT of a real signal; the last dim keeps ``n // 2 + 1`` bins.

    >>> import ember
    >>> ember.fft.rfftn(ember.ones(2, 4)).shape
    ember.Size([2, 3])
    """
    return _r2c(input, s, dim, norm, True, "rfftn", True)


def irfftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
           norm: str | None = None) -> Tensor:
    """Inverse of :func:`rfftn` (real result).

    >>> import ember
    >>> ember.fft.irfftn(ember.fft.rfftn(ember.ones(2, 4))).tolist()
    [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """
    return _c2r(input, s, dim, norm, False, "irfftn", True)


def hfftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
          norm: str | None = None) -> Tensor:
    """N-dimensional :func:`hfft` (the last dim is the one-sided one).

    >>> import ember
    >>> ember.fft.hfftn(ember.ones(2, 2)).shape
    ember.Size([2, 2])
    """
    return _c2r(input, s, dim, norm, True, "hfftn", True)


def ihfftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
           norm: str | None = None) -> Tensor:
    """N-dimensional :func:`ihfft`.

    >>> import ember
    >>> ember.fft.ihfftn(ember.ones(2, 2)).shape
    ember.Size([2, 2])
    """
    return _r2c(input, s, dim, norm, False, "ihfftn", True)


def _two(name: str, base: Any) -> Any:
    def f(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Tensor:
        return base(input, s, dim, norm)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"Two-dimensional :func:`{base.__name__}` over ``dim`` (default the last two)."
                 f"\n\n    >>> import ember\n    >>> ember.fft.{name}(ember.ones(2, 2)).shape\n"
                 "    ember.Size([2, 2])\n")
    return f


fft2 = _two("fft2", fftn)
ifft2 = _two("ifft2", ifftn)
rfft2 = _two("rfft2", rfftn)
irfft2 = _two("irfft2", irfftn)
hfft2 = _two("hfft2", hfftn)
ihfft2 = _two("ihfft2", ihfftn)


def _freq_factory(op: str, n: int, d: float, dtype: Any, device: Any, requires_grad: bool,
                  one_sided: bool) -> Tensor:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{op}: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"{op}: n must be non-negative, got {n}")
    if dtype is not None and not isinstance(dtype, _C.dtype):
        raise TypeError(f"{op}: dtype must be an ember dtype, got {type(dtype).__name__}")
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"{op}: expected a floating point dtype, got {dtype}")
    d = float(d)
    # a zero spacing gives infinite frequencies (and NaN for the zero bin), as in torch
    scale = 1.0 / (n * d) if n * d != 0 else math.copysign(math.inf, d)
    i = _C.arange(n // 2 + 1 if one_sided else n, dtype=_C.float64, device=device)
    if not one_sided:
        i = _C.where(i < (n + 1) // 2, i, i - n)
    out = (i * scale).to(dtype or _C.get_default_dtype())
    if requires_grad:
        out.requires_grad_(True)
    return out


def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None,
            requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    """The sample frequencies of :func:`fft`'s bins for a signal of ``n`` points spaced ``d``.

    >>> import ember
    >>> ember.fft.fftfreq(4).tolist()
    [0.0, 0.25, -0.5, -0.25]
    """
    del layout, pin_memory
    return _freq_factory("fftfreq", n, d, dtype, device, requires_grad, False)


def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    """The sample frequencies of :func:`rfft`'s ``n // 2 + 1`` bins.

    >>> import ember
    >>> ember.fft.rfftfreq(4).tolist()
    [0.0, 0.25, 0.5]
    """
    del layout, pin_memory
    return _freq_factory("rfftfreq", n, d, dtype, device, requires_grad, True)


def _shift(input: Tensor, dim: int | Sequence[int] | None, inverse: bool, op: str) -> Tensor:
    _check_tensor(input, op)
    if dim is None:
        dims = list(range(input.ndim))
    elif isinstance(dim, int):
        dims = [dim]
    else:
        dims = list(dim)
    dims = [_wrap(int(d), input.ndim, op) for d in dims]
    if not dims:
        return input.clone()
    shifts = [(-(input.shape[d] // 2) if inverse else input.shape[d] // 2) for d in dims]
    return _C.roll(input, shifts, dims)


def fftshift(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """Moves the zero-frequency bin to the middle (a roll by ``n // 2`` along each dim).

    >>> import ember
    >>> ember.fft.fftshift(ember.fft.fftfreq(4)).tolist()
    [-0.5, -0.25, 0.0, 0.25]
    """
    return _shift(input, dim, False, "fftshift")


def ifftshift(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """Inverse of :func:`fftshift`.

    >>> import ember
    >>> ember.fft.ifftshift(ember.tensor([-0.5, -0.25, 0.0, 0.25])).tolist()
    [0.0, 0.25, -0.5, -0.25]
    """
    return _shift(input, dim, True, "ifftshift")


# out= as torch.fft's (the frequency factories compute in out's dtype when dtype= is not given)
_outarg.accept_out_names(globals(), (
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn",
    "ifftn", "rfftn", "irfftn", "hfft2", "ihfft2", "hfftn", "ihfftn"))
_outarg.accept_out_names(globals(), ("fftfreq", "rfftfreq"), factory=True)

# Functions of this module take part in __torch_function__ (ember.overrides), as torch.fft's.
from ember import _argcheck  # noqa: E402
from ember import overrides as _overrides  # noqa: E402

_argcheck.guard_module(globals())  # non-tensor arguments: a TypeError naming them
_overrides._install_module(globals(), __name__)
