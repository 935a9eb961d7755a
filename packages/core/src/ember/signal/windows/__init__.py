"""Window functions (PyTorch's ``torch.signal.windows``, SciPy's definitions).

Each takes the length ``M`` and keyword-only ``sym`` (True: a symmetric window for filter design;
False: the periodic window for spectral analysis, the first ``M`` points of the symmetric window
of length ``M + 1``), ``dtype`` (float32 or float64, the default dtype when None), ``layout``,
``device`` and ``requires_grad``. The cosine sums (general_cosine and the windows built on it)
follow PyTorch's steps in ``dtype``; the others are computed in float64 and rounded once.

>>> import ember
>>> ember.signal.windows.bartlett(5).tolist()
[0.0, 0.5, 1.0, 0.5, 0.0]
>>> [round(v, 4) for v in ember.signal.windows.hann(4, sym=False).tolist()]
[0.0, 0.5, 1.0, 0.5]
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import ember
from ember import Tensor

__all__ = [
    "bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
    "general_hamming", "hamming", "hann", "kaiser", "nuttall",
]


def _check(name: str, M: Any, dtype: Any) -> Any:
    if isinstance(M, bool) or not isinstance(M, int):
        raise TypeError(f"{name}: M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    dtype = ember.get_default_dtype() if dtype is None else dtype
    if dtype not in (ember.float32, ember.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return dtype


def _finish(w: Tensor, dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    w = w.to(dtype)
    if device is not None:
        w = w.to(device)
    return w.requires_grad_(True) if requires_grad else w


def _window(name: str, M: int, sym: bool, dtype: Any, device: Any, requires_grad: bool,
            values: Any) -> Tensor:
    """``values(n, span)`` over positions ``n = 0..M-1`` (float64), ``span`` being ``M - 1``
    for symmetric windows and ``M`` for periodic ones; lengths 0 and 1 are empty and [1]."""
    dtype = _check(name, M, dtype)
    if M == 0:
        return _finish(ember.zeros(0, dtype=ember.float64), dtype, device, requires_grad)
    if M == 1:
        return _finish(ember.ones(1, dtype=ember.float64), dtype, device, requires_grad)
    n = ember.arange(M, dtype=ember.float64)
    return _finish(values(n, M - 1 if sym else M), dtype, device, requires_grad)


def general_cosine(M: int, *, a: Iterable[float], sym: bool = True, dtype: Any = None,
                   layout: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """The weighted cosine sum ``w[n] = sum_k (-1)^k a[k] cos(2 pi k n / span)``.

    >>> import ember
    >>> ember.signal.windows.general_cosine(3, a=[0.5, 0.5]).tolist()
    [0.0, 1.0, 0.0]
    """
    if not isinstance(a, (list, tuple)):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    coeffs = [float(c) for c in a]
    dtype = _check("general_cosine", M, dtype)
    if M <= 1:
        return _window("general_cosine", M, sym, dtype, device, requires_grad, None)
    # PyTorch's steps in dtype (angles by linspace, a (terms, M) product summed over the terms),
    # so the sums round as its do: blackman's ends are -1.49e-08 in float32, not 0
    step = 2 * math.pi / (M - 1 if sym else M)
    angles = ember.linspace(0.0, (M - 1) * step, M, dtype=dtype)
    signed = ember.tensor([(-1) ** k * c for k, c in enumerate(coeffs)], dtype=dtype)
    k = ember.arange(len(coeffs), dtype=dtype)
    w = (signed.unsqueeze(-1) * (k.unsqueeze(-1) * angles).cos()).sum(0)
    return _finish(w, dtype, device, requires_grad)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype: Any = None,
                    layout: Any = None, device: Any = None,
                    requires_grad: bool = False) -> Tensor:
    """``general_cosine`` with ``a = [alpha, 1 - alpha]``.

    >>> import ember
    >>> [round(v, 2) for v in ember.signal.windows.general_hamming(3, alpha=0.6).tolist()]
    [0.2, 1.0, 0.2]
    """
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
            device: Any = None, requires_grad: bool = False) -> Tensor:
    """The Hamming window, ``general_hamming`` with ``alpha = 0.54``.

    >>> import ember
    >>> [round(v, 2) for v in ember.signal.windows.hamming(3).tolist()]
    [0.08, 1.0, 0.08]
    """
    return general_hamming(M, alpha=0.54, sym=sym, dtype=dtype, device=device,
                           requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
         device: Any = None, requires_grad: bool = False) -> Tensor:
    """The Hann window, ``general_hamming`` with ``alpha = 0.5``.

    >>> import ember
    >>> ember.signal.windows.hann(3).tolist()
    [0.0, 1.0, 0.0]
    """
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, device=device,
                           requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
             device: Any = None, requires_grad: bool = False) -> Tensor:
    """The Blackman window, ``general_cosine`` with ``a = [0.42, 0.5, 0.08]``.

    >>> import ember
    >>> [round(v, 4) for v in ember.signal.windows.blackman(5).tolist()[1:4]]
    [0.34, 1.0, 0.34]
    """
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
            device: Any = None, requires_grad: bool = False) -> Tensor:
    """Nuttall's minimum 4-term Blackman-Harris window.

    >>> import ember
    >>> [round(v, 4) for v in ember.signal.windows.nuttall(3).tolist()]
    [0.0004, 1.0, 0.0004]
    """
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, device=device, requires_grad=requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
             device: Any = None, requires_grad: bool = False) -> Tensor:
    """The triangular Bartlett window ``1 - |2 n / span - 1|``.

    >>> import ember
    >>> ember.signal.windows.bartlett(3).tolist()
    [0.0, 1.0, 0.0]
    """
    return _window("bartlett", M, sym, dtype, device, requires_grad,
                   lambda n, span: 1 - (n * (2.0 / span) - 1).abs())


def cosine(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
           device: Any = None, requires_grad: bool = False) -> Tensor:
    """The cosine (sine) window ``sin(pi (n + 0.5) / (span + 1))``.

    >>> import ember
    >>> [round(v, 4) for v in ember.signal.windows.cosine(2).tolist()]
    [0.7071, 0.7071]
    """
    return _window("cosine", M, sym, dtype, device, requires_grad,
                   lambda n, span: ((n + 0.5) * (math.pi / (span + 1))).sin())


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True,
                dtype: Any = None, layout: Any = None, device: Any = None,
                requires_grad: bool = False) -> Tensor:
    """The exponential (Poisson) window ``exp(-|n - center| / tau)``; ``center`` defaults to
    the middle (``span / 2``) and may only be given for periodic windows (``sym=False``).

    >>> import ember
    >>> [round(v, 4) for v in ember.signal.windows.exponential(3).tolist()]
    [0.3679, 1.0, 0.3679]
    """
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 1 and center is not None:  # a given center applies to the single point too
        dtype = _check("exponential", M, dtype)
        one = ember.tensor([math.exp(-abs(center) / tau)], dtype=ember.float64)
        return _finish(one, dtype, device, requires_grad)

    def values(n: Tensor, span: int) -> Tensor:
        c = span / 2 if center is None else center
        return (-(n - c).abs() / tau).exp()

    return _window("exponential", M, sym, dtype, device, requires_grad, values)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype: Any = None,
             layout: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """The Gaussian window ``exp(-((n - span / 2) / std)^2 / 2)``.

    >>> import ember
    >>> [round(v, 4) for v in ember.signal.windows.gaussian(3).tolist()]
    [0.6065, 1.0, 0.6065]
    """
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    return _window("gaussian", M, sym, dtype, device, requires_grad,
                   lambda n, span: (-((n - span / 2) / std).square() / 2).exp())


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype: Any = None,
           layout: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """The Kaiser window ``I0(beta sqrt(1 - (2 n / span - 1)^2)) / I0(beta)``.

    >>> import ember
    >>> [round(v, 4) for v in ember.signal.windows.kaiser(3, beta=1.0).tolist()]
    [0.7898, 1.0, 0.7898]
    """
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")

    def values(n: Tensor, span: int) -> Tensor:
        r = n * (2.0 / span) - 1
        arg = (1 - r.square()).clamp(min=0).sqrt() * beta
        return arg.i0() / ember.tensor(float(beta), dtype=ember.float64).i0()

    return _window("kaiser", M, sym, dtype, device, requires_grad, values)
