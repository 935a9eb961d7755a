"""``ember.special``: the special functions of ``torch.special`` that ember computes, all
differentiable: logistic and error functions, the gamma family (``gammaln``, ``digamma``/``psi``,
``gammainc``/``gammaincc``), ``xlogy``/``xlog1py``/``entr``, the normal CDF family (``ndtr``,
``ndtri``, ``log_ndtr``), ``sinc``, the modified Bessel functions ``i0``/``i0e``/``i1``/``i1e``,
``multigammaln``, ``erfcx``, the Hurwitz ``zeta`` and ``polygamma``, and the usual aliases
(``expit``, ``exp2``, ``logsumexp`` ...).
``ember.lgamma``, ``ember.digamma`` and ``ember.xlogy`` (and the tensor methods) are these too.

The Bessel and Airy family (``bessel_j0``/``j1``/``y0``/``y1``, ``modified_bessel_i0``/``i1``/
``k0``/``k1``, ``scaled_modified_bessel_k0``/``k1``, ``airy_ai``, ``spherical_bessel_j0``) and the
orthogonal polynomials (``chebyshev_polynomial_t``/``u``/``v``/``w`` and their shifted forms,
``hermite_polynomial_h``/``he``, ``laguerre_polynomial_l``, ``legendre_polynomial_p``) are native
pointwise ops (ops/pointwise.yaml, kernels/special_math.h) and, as in torch, not differentiable.

>>> import ember
>>> x = ember.tensor([0.5, 2.0], dtype=ember.float64)
>>> [f"{v:.6f}" for v in ember.special.gammaln(x).tolist()]
['0.572365', '0.000000']
>>> [f"{v:.6f}" for v in ember.special.ndtr(ember.tensor([0.0, 1.0])).tolist()]
['0.500000', '0.841345']
"""

from __future__ import annotations

import math
from typing import Any, Callable

import ember
from ember import Tensor
from ember.distributions import _special

__all__ = [
    "expit", "logit", "erf", "erfc", "erfinv", "gammaln", "digamma", "psi", "gammainc",
    "gammaincc", "xlogy", "xlog1py", "entr", "ndtr", "ndtri", "log_ndtr", "sinc", "exp2", "expm1",
    "log1p", "logsumexp", "softmax", "log_softmax", "round", "i0", "i0e", "i1", "i1e",
    "multigammaln", "zeta", "polygamma", "erfcx", "airy_ai", "bessel_j0", "bessel_j1",
    "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
    "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "spherical_bessel_j0", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
    "chebyshev_polynomial_v", "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p",
]

_SQRT2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _tensor(name: str, x: Any) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (int, float)):
        return ember.tensor(float(x))
    raise TypeError(f"special.{name}(): expected a Tensor, got {type(x).__name__}")


def _scalar_like(v: Any, like: Tensor, name: str = "") -> Tensor:
    """A Python number as a tensor shaped like ``like``, in like's dtype when that is floating
    (a scalar does not promote it), else the default float dtype (2.5 must not truncate)."""
    if isinstance(v, complex):  # as torch's kernels: no complex (float(v) would leak its error)
        raise NotImplementedError(f"{name}: not implemented for a complex number ({v!r})")
    if not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise TypeError(f"{name}(): expected a Tensor or a number, got {type(v).__name__}")
    dt = like.dtype if like.is_floating_point() else ember.get_default_dtype()
    if dt in (ember.float16, ember.bfloat16) and abs(float(v)) > ember.finfo(dt).max:
        dt = ember.float32  # 2**20 must not overflow float16 (the caller casts the result back)
    return ember.full_like(like, float(v), dtype=dt)


def _half_of_number_call(input: Any, other: Any) -> Any:
    """The half dtype a (tensor, number) call's result keeps, else None."""
    t = input if isinstance(input, Tensor) else other
    if isinstance(input, Tensor) != isinstance(other, Tensor) and \
            t.dtype in (ember.float16, ember.bfloat16):
        return t.dtype
    return None


def _promoted_floats(name: str, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """x and y in their promoted dtype (0-d tensors weigh less, as in torch), the default
    float dtype when that is not floating; complex refused."""
    _float(x, name), _float(y, name)
    dt = ember.result_type(x, y)
    if not dt.is_floating_point:
        dt = ember.get_default_dtype()
    return x.to(dt), y.to(dt)


# the functions here that torch also computes on complex tensors; the others refuse them
_COMPLEX_OK = ("sinc", "exp2", "expm1", "log1p")


def _float(x: Tensor, name: str = "") -> Tensor:
    """x in a floating dtype (integers promote to the default dtype); complex tensors are refused
    (a cast would drop the imaginary part) except by the functions of ``_COMPLEX_OK``."""
    if x.is_complex():
        if name in _COMPLEX_OK:
            return x
        raise NotImplementedError(f"special.{name or 'function'}(): not implemented for complex "
                                  f"input ({x.dtype})")
    return x if x.is_floating_point() else x.to(ember.get_default_dtype())


def expit(input: Tensor) -> Tensor:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return _tensor("expit", input).sigmoid()


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``, ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    return ember.logit(_float(_tensor("logit", input), "logit"), eps)


def erf(input: Tensor) -> Tensor:
    """The error function."""
    return _float(_tensor("erf", input), "erf").erf()


def erfc(input: Tensor) -> Tensor:
    """The complementary error function ``1 - erf(x)``."""
    return ember.erfc(_float(_tensor("erfc", input), "erfc"))


def erfcx(input: Tensor) -> Tensor:
    """The scaled complementary error function exp(x^2) erfc(x), finite for large x (where it
    is 1 / (sqrt(pi) K(x)), K the continued fraction of :func:`ember.erfc`); computed in
    float64.

    >>> import ember
    >>> f"{erfcx(ember.tensor(30.0, dtype=ember.float64)).item():.10f}"
    '0.0187958889'
    """
    x0 = _float(_tensor("erfcx", input), "erfcx")
    x = x0.to(ember.float64)
    z = x.clamp(min=3.0)
    k = z
    for j in range(32, 0, -1):
        k = z + (j / 2) / k
    tail = 1.0 / (math.sqrt(math.pi) * k)
    xs = ember.where(x > 3.0, ember.zeros_like(x), x)
    near = (xs * xs).exp() * (1 - xs.erf())
    return ember.where(x > 3.0, tail, near).to(x0.dtype)


def erfinv(input: Tensor) -> Tensor:
    """The inverse error function on (-1, 1)."""
    return _float(_tensor("erfinv", input), "erfinv").erfinv()


def gammaln(input: Tensor) -> Tensor:
    """``log |Gamma(x)|`` (PyTorch's ``lgamma``); its derivative is digamma.

    >>> import ember
    >>> f"{ember.special.gammaln(ember.tensor(5.0, dtype=ember.float64)).item():.8f}"  # log 4!
    '3.17805383'
    """
    return _special.lgamma(_float(_tensor("gammaln", input), "gammaln"))


def digamma(input: Tensor) -> Tensor:
    """The digamma function ``d/dx log Gamma(x)``; its derivative is trigamma. At a zero it is
    the infinity of the side the zero's sign says (``-inf`` at +0.0, ``inf`` at -0.0), as torch.

    >>> import ember
    >>> ember.special.digamma(ember.tensor([0.0, -0.0])).tolist()
    [-inf, inf]
    """
    # the signed infinities at zero come from _special itself, so the gradient there is
    # trigamma(0) = inf, as torch (a where() here would make it 0 * inf = NaN)
    return _special.digamma(_float(_tensor("digamma", input), "digamma"))


psi = digamma
lgamma = gammaln  # the top-level name, ember.lgamma


def _gammainc_checked(name: str, input: Tensor, other: Tensor, upper: bool = False) -> Tensor:
    """``P(a, x)`` (``Q(a, x) = 1 - P(a, x)`` with ``upper``) in the promoted float dtype of
    ``a`` and ``x``, with the edge cases of ``torch.special``: NaN outside the domain (``a < 0``,
    ``x < 0``, ``a == x == 0``, both infinite), P = 1 for ``a == 0 < x``, P = 0 for an infinite
    ``a`` and finite ``x``."""
    a, x = _tensor(name, input), _tensor(name, other)
    if a.is_complex() or x.is_complex():
        raise NotImplementedError(f"special.{name}(): complex inputs are not supported, got "
                                  f"{a.dtype} and {x.dtype}")
    dt = ember.result_type(a, x)
    if not dt.is_floating_point:
        dt = ember.get_default_dtype()
    a, x = a.to(dt), x.to(dt)
    if a.device.type == "meta":  # shapes only (the series' convergence test reads values)
        a, x = ember.broadcast_tensors(a, x)
        return (a + x) * 0
    p = _special.gammainc(a, x, upper)
    with ember.no_grad():
        ad, xd = a.detach(), x.detach()
        nan = (ad < 0) | (xd < 0) | ((ad == 0) & (xd == 0)) | (ad.isinf() & xd.isinf())
        one = (ad == 0) & (xd > 0)
        zero = ad.isinf() & xd.isfinite()
    p_one, p_zero = (0.0, 1.0) if upper else (1.0, 0.0)  # the values where P is 1, 0
    p = ember.where(one, p_one, ember.where(zero, p_zero, p))
    return ember.where(nan, float("nan"), p)


def gammainc(input: Tensor, other: Tensor) -> Tensor:
    """The regularized lower incomplete gamma function ``P(a, x)`` (``input`` is ``a``), in the
    promoted floating dtype of both; NaN where ``a < 0`` or ``x < 0``.

    >>> import ember
    >>> f"{ember.special.gammainc(ember.tensor(1.0), ember.tensor(1.0)).item():.4f}"
    '0.6321'
    """
    return _gammainc_checked("gammainc", input, other)


def gammaincc(input: Tensor, other: Tensor) -> Tensor:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``.

    >>> import ember
    >>> f"{ember.special.gammaincc(ember.tensor(1.0), ember.tensor(1.0)).item():.4f}"
    '0.3679'
    """
    return _gammainc_checked("gammaincc", input, other, upper=True)


def xlogy(input: Tensor | float, other: Tensor | float) -> Tensor:
    """``x * log(y)``, 0 where ``x == 0`` (NaN where ``y`` is NaN).

    >>> import ember
    >>> ember.special.xlogy(ember.tensor([0.0, 2.0]), ember.tensor([0.0, 1.0])).tolist()
    [0.0, 0.0]
    """
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("xlogy(): expected at least one Tensor argument")
    y = other if isinstance(other, Tensor) else _scalar_like(other, input, "xlogy")
    x = input if isinstance(input, Tensor) else _scalar_like(input, y, "xlogy")
    x, y = _promoted_floats("xlogy", x, y)
    if x.shape != y.shape:  # (only then: broadcast_tensors gives a tangent-less side zeros)
        x, y = ember.broadcast_tensors(x, y)
    fn = _XLogY if isinstance(input, Tensor) and isinstance(other, Tensor) else \
        _XLogYScalarSelf if isinstance(other, Tensor) else _XLogYScalarOther
    out = fn.apply(x, y)
    half = _half_of_number_call(input, other)
    return out if half is None else out.to(half)


def _xlogy_value(x: Tensor, y: Tensor) -> Tensor:
    """x * log(y), 0 where x == 0, NaN where y is NaN (no autograd)."""
    with ember.no_grad():
        return ember.where(ember.isnan(y), y, _special.xlogy(x, y))


class _XLogY(ember.autograd.Function):
    """xlogy with torch's derivatives: d/dx = xlogy(x != 0, y) (0 at x == 0 unless y is NaN),
    d/dy = x / y (NaN at x == y == 0); the tangent xlogy(x_t, y) (0 where x == 0 and y <= 0)
    plus y_t x / y."""

    _node_name = "XlogyBackward0"  # torch's node (XlogyBackward1 / 2: a number x / y)

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)
        return _xlogy_value(x, y)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, y = ctx.saved_tensors
        if grad is None:
            return None, None
        gx = gy = None
        if ctx.needs_input_grad[0]:
            # xlogy(x != 0, y), written with differentiable ops (double backward reaches y);
            # log reads 1 where x == 0 so its derivative there is no 0 * inf
            nz = x != 0
            log_y = ember.log(ember.where(nz, y, ember.ones_like(y)))
            gx = grad * ember.where(nz, log_y, ember.where(ember.isnan(y), y, ember.zeros_like(y)))
        if ctx.needs_input_grad[1]:
            gy = grad * x / y
        return gx, gy

    @staticmethod
    def jvp(ctx: Any, tx: Tensor | None, ty: Tensor | None) -> Tensor:
        x, y = ctx.saved_tensors
        t = _xlogy_value(ember.zeros_like(x) if tx is None else tx, y)
        t = t.masked_fill((x == 0) & (y <= 0), 0.0)
        return t if ty is None else t + ty * x / y


class _XLogYScalarSelf(_XLogY):
    """xlogy(number, tensor): torch's XlogyBackward1."""

    _node_name = "XlogyBackward1"


class _XLogYScalarOther(_XLogY):
    """xlogy(tensor, number): torch's XlogyBackward2."""

    _node_name = "XlogyBackward2"


def xlog1py(input: Tensor | float, other: Tensor | float) -> Tensor:
    """``x * log1p(y)``, 0 where ``x == 0`` (NaN where ``y`` is NaN)."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("xlog1py(): expected at least one Tensor argument")
    y = other if isinstance(other, Tensor) else _scalar_like(other, input, "xlog1py")
    x = input if isinstance(input, Tensor) else _scalar_like(input, y, "xlog1py")
    x, y = _promoted_floats("xlog1py", x, y)
    zero = x == 0
    safe = ember.where(zero, ember.zeros_like(y), y)
    out = ember.where(zero, ember.zeros_like(x * y), x * safe.log1p())
    out = ember.where(ember.isnan(y), y, out)
    half = _half_of_number_call(input, other)
    return out if half is None else out.to(half)


def entr(input: Tensor) -> Tensor:
    """The elementwise entropy ``-x log x``: 0 at 0, ``-inf`` for ``x < 0``."""
    x = _float(_tensor("entr", input), "entr")
    pos = x > 0
    safe = ember.where(pos, x, ember.ones_like(x))
    out = ember.where(pos, -x * safe.log(), ember.zeros_like(x))
    out = ember.where(x < 0, ember.full_like(x, -math.inf), out)
    return ember.where(ember.isnan(x), x, out)


def _log_ndtr_tail(x: Tensor) -> Tensor:
    """log Phi(x) for x < -5 (other entries are replaced by -5): with z = -x / sqrt 2,
    Phi(x) = erfc(z) / 2 and erfc(z) = exp(-z^2) / (sqrt(pi) K(z)), K the continued fraction
    z + (1/2) / (z + (2/2) / (z + (3/2) / ...)), 40 levels (converged to double precision for
    z > 3.5), so nothing underflows or cancels."""
    z = -ember.where(x < -5, x, ember.full_like(x, -5.0)) / _SQRT2
    k = z
    for j in range(40, 0, -1):
        k = z + (j / 2) / k
    return math.log(0.5) - z * z - 0.5 * math.log(math.pi) - k.log()


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF ``(1 + erf(x / sqrt 2)) / 2`` (from the tail's continued fraction
    below -5, where the sum would cancel)."""
    x = _float(_tensor("ndtr", input), "ndtr")
    direct = 0.5 * (1 + (x / _SQRT2).erf())
    # the tail is computed in float64: cast back so a half input keeps its dtype (as torch)
    return ember.where(x < -5, _log_ndtr_tail(x).exp().to(x.dtype), direct)


def _ndtri_value(p: Tensor) -> Tensor:
    """ndtri's value (no autograd), computed in float64: Abramowitz & Stegun 26.2.23's guess for
    the lower tail (error below 4.5e-4), then Halley steps on ndtr(z) = min(p, 1 - p) with ndtr
    from erfc, accurate in the tail (``sqrt(2) erfinv(2p - 1)`` loses every digit of a small p to
    the rounding of 2p - 1)."""
    with ember.no_grad():
        q = p.to(ember.float64)
        lower = q < 0.5
        r = ember.where(lower, q, 1 - q)
        t = (-2 * r.clamp(min=1e-320).log()).sqrt()
        z = -(t - (2.515517 + t * (0.802853 + t * 0.010328))
              / (1 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
        for _ in range(3):
            u = (0.5 * (-z / _SQRT2).erfc() - r) / ((-0.5 * z * z).exp() / _SQRT_2PI)
            z = z - u / (1 + 0.5 * z * u)
        z = ember.where(lower, z, -z).masked_fill(q == 0.5, 0.0)
        z = z.masked_fill(q == 0, -math.inf).masked_fill(q == 1, math.inf)
        z = z.masked_fill((q < 0) | (q > 1) | q.isnan(), math.nan)
        return z.to(p.dtype)


class _Ndtri(ember.autograd.Function):
    """ndtri with torch's derivative ``sqrt(2 pi) exp(z^2 / 2)`` of the output z (which keeps
    its graph: double backward differentiates through it)."""

    _node_name = "SpecialNdtriBackward0"

    @staticmethod
    def forward(ctx: Any, p: Tensor) -> Tensor:
        z = _ndtri_value(p)
        ctx.save_for_backward(z)
        ctx.save_for_forward(z)
        return z

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (z,) = ctx.saved_tensors
        return grad * _SQRT_2PI * (0.5 * z * z).exp()

    @staticmethod
    def jvp(ctx: Any, tp: Tensor) -> Tensor:
        (z,) = ctx.saved_tensors
        return tp * _SQRT_2PI * (0.5 * z * z).exp()


def ndtri(input: Tensor) -> Tensor:
    """The inverse of :func:`ndtr` on (0, 1) (``-inf`` at 0, ``inf`` at 1), accurate in both
    tails.

    >>> import ember
    >>> p = ember.tensor([1e-20, 0.5, 0.975], dtype=ember.float64)
    >>> [f"{v:.6f}" for v in ember.special.ndtri(p).tolist()]
    ['-9.262340', '0.000000', '1.959964']
    """
    p = _float(_tensor("ndtri", input), "ndtri")
    return _Ndtri.apply(p)


def log_ndtr(input: Tensor) -> Tensor:
    """``log(ndtr(x))``, accurate for very negative ``x`` too.

    >>> import ember
    >>> f"{ember.special.log_ndtr(ember.tensor(-20.0, dtype=ember.float64)).item():.4f}"
    '-203.9172'
    """
    x = _float(_tensor("log_ndtr", input), "log_ndtr")
    t = x * (1 / _SQRT2)
    # left of -1: log(erfc(-t) / 2) (erfc is accurate in its tail); from -1 on:
    # log1p(-erfc(t) / 2), which keeps the tiny negative values log(Phi(x)) rounds to 0
    left = (0.5 * ember.erfc(-ember.where(x < -1, t, ember.full_like(t, -1.0)))).log()
    right = ember.log1p(-0.5 * ember.erfc(ember.where(x >= -1, t, ember.zeros_like(t))))
    out = ember.where(x < -5, _log_ndtr_tail(x), ember.where(x < -1, left, right))
    return ember.where(x.isnan(), x, out).to(x.dtype)  # NaN stays NaN


def sinc(input: Tensor) -> Tensor:
    """The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0."""
    x = _float(_tensor("sinc", input), "sinc")
    half = x.dtype in (ember.float16, ember.bfloat16)
    if half:  # pi * x rounded to 8 bits made sinc(3) -0.0013 in bfloat16: float32, as torch
        return sinc(x.float()).to(x.dtype)
    zero = x == 0
    safe = ember.where(zero, ember.ones_like(x), x) * math.pi
    return ember.where(zero, ember.ones_like(x), safe.sin() / safe)


def exp2(input: Tensor) -> Tensor:
    """``2 ** x`` (exact at integers; complex infinities as C's cexp2)."""
    return ember.exp2(_float(_tensor("exp2", input), "exp2"))


def expm1(input: Tensor) -> Tensor:
    """``exp(x) - 1``, accurate near 0."""
    return _float(_tensor("expm1", input), "expm1").expm1()


def log1p(input: Tensor) -> Tensor:
    """``log(1 + x)``, accurate near 0."""
    return _float(_tensor("log1p", input), "log1p").log1p()


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` over ``dim``, computed stably."""
    return ember.logsumexp(_tensor("logsumexp", input), dim, keepdim)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """``softmax`` over ``dim`` (``dtype`` casts first)."""
    x = _tensor("softmax", input)
    return (x if dtype is None else x.to(dtype)).softmax(dim)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """``log_softmax`` over ``dim`` (``dtype`` casts first)."""
    x = _tensor("log_softmax", input)
    return (x if dtype is None else x.to(dtype)).log_softmax(dim)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Rounds half to even, to ``decimals`` places."""
    return ember.round(_tensor("round", input), decimals=decimals)


# ---- modified Bessel functions of the first kind, orders 0 and 1 -------------------------------
# Computed in float64 from two expansions: the power series sum_k (x/2)^(2k+nu) / (k! (k+nu)!)
# for |x| <= 30, and the large-argument expansion
# I_nu(x) ~ e^x / sqrt(2 pi x) * sum_k (-1)^k prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! (8x)^k)
# beyond. Both are written with ember's ops, so autograd differentiates them (d i0 = i1).
_BESSEL_SWITCH = 30.0


def _bessel_series(ax: Tensor, nu: int) -> Tensor:
    """e^-x I_nu(x) for 0 <= x <= _BESSEL_SWITCH by the power series (scaled to stay finite)."""
    half_sq = (ax / 2) ** 2
    term = (ax / 2) ** nu / math.factorial(nu)
    total = term
    for k in range(1, 96):  # (15^2)^k / (k!)^2 has fallen below 1e-17 of the sum by then
        term = term * half_sq / (k * (k + nu))
        total = total + term
    return total * (-ax).exp()


def _bessel_asymptotic(ax: Tensor, nu: int) -> Tensor:
    """e^-x I_nu(x) for x >= _BESSEL_SWITCH by the large-argument expansion."""
    mu = 4.0 * nu * nu
    coef, total, inv = 1.0, ember.ones_like(ax), 1.0 / (8.0 * ax)
    power = ember.ones_like(ax)
    for k in range(1, 16):
        coef *= -(mu - (2 * k - 1) ** 2) / k
        power = power * inv
        total = total + coef * power
    return total / (2 * math.pi * ax).sqrt()


def _bessel_scaled(name: str, input: Tensor, nu: int) -> Tensor:
    """e^-|x| I_nu(x), in input's floating dtype (the default dtype for integers)."""
    x = _float(_tensor(name, input), name)
    x64 = x.to(ember.float64)
    ax = x64.abs()
    small = ax <= _BESSEL_SWITCH
    series = _bessel_series(ax.clamp(max=_BESSEL_SWITCH), nu)
    asym = _bessel_asymptotic(ax.clamp(min=_BESSEL_SWITCH), nu)
    out = ember.where(small, series, asym)
    if nu == 1:
        out = out * x64.sign()  # I_1 is odd
    return out.to(x.dtype)


def i0e(input: Tensor) -> Tensor:
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) * i0(x)``.

    >>> import ember
    >>> f"{ember.special.i0e(ember.tensor(1.0)).item():.6f}"
    '0.465760'
    """
    return _bessel_scaled("i0e", input, 0)


def i1e(input: Tensor) -> Tensor:
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) * i1(x)``."""
    return _bessel_scaled("i1e", input, 1)


def i0(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 0 (``inf`` once it overflows).

    >>> import ember
    >>> f"{ember.special.i0(ember.tensor(1.0)).item():.5f}"
    '1.26607'
    """
    x = _float(_tensor("i0", input), "i0")
    return (_bessel_scaled("i0", x.to(ember.float64), 0) * x.to(ember.float64).abs().exp()) \
        .to(x.dtype)


def i1(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind of order 1."""
    x = _float(_tensor("i1", input), "i1")
    return (_bessel_scaled("i1", x.to(ember.float64), 1) * x.to(ember.float64).abs().exp()) \
        .to(x.dtype)


def _check_int64(op: str, name: str, v: int) -> None:
    """An int argument must fit in int64: PyTorch's parser raises this ValueError for one that
    does not (polygamma(2**64, x) is refused, not computed)."""
    if not -2**63 <= v < 2**63:
        raise ValueError(f"{op}(): argument '{name}' must fit in int64, got {v} (Overflow when "
                         "unpacking long long)")


def multigammaln(input: Tensor, p: int) -> Tensor:
    """The log of the multivariate gamma function of dimension ``p``:
    ``p (p - 1) / 4 * log(pi) + sum_{j<p} gammaln(x - j / 2)``. Like PyTorch 2.13, entries
    at or below ``(p - 1) / 2`` (outside its domain) are not refused: they give that sum.

    >>> import ember
    >>> f"{ember.special.multigammaln(ember.tensor(2.5), 2).item():.6f}"
    '0.857048'
    """
    input = _tensor("multigammaln", input)
    if input.dtype == ember.bool:
        raise RuntimeError("multigammaln: the input tensor may not be a boolean tensor")
    x = _float(input, "multigammaln")
    if isinstance(p, bool) or not isinstance(p, int):
        raise TypeError(f"multigammaln: p must be an int, got {type(p).__name__}")
    _check_int64("multigammaln", "p", p)
    if p < 1:
        raise RuntimeError(f"multigammaln: p has to be greater than or equal to 1, got {p}")
    j = ember.arange(p, dtype=x.dtype, device=x.device)
    return (x.unsqueeze(-1) - j / 2).lgamma().sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


# Euler-Maclaurin correction coefficients of the Hurwitz zeta tail: (2j)! / B_2j
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)


def _hurwitz_scaled(x: Tensor, q: Tensor, c: Tensor | None) -> Tensor:
    """c^x * sum_k (q + k)^-x in float64 (c = 1 when None), without the domain fix-ups: direct
    terms until q + k > 9, then the Euler-Maclaurin tail. The scale c keeps the terms in range
    where (q + k)^-x alone would overflow or underflow (polygamma of a large order)."""
    # enough direct terms that every q + k passes 9 (bounded: huge negative q is NaN/inf
    # territory anyway for non-integer x)
    # (a meta q has no values: the default term count gives the right shape)
    qmin = float(q.detach().min()) if q.numel() and q.device.type != "meta" else 0.0
    extra = 0 if not math.isfinite(qmin) else int(min(max(0.0, math.ceil(9.0 - qmin)), 1e5))
    n = max(9, extra)

    def term(a: Tensor) -> Tensor:
        return a.pow(-x) if c is None else (c / a).pow(x)

    total = term(q)
    a = q
    for _ in range(n):
        a = a + 1.0
        total = total + term(a)
    b = term(a)
    total = total + b * a / (x - 1.0) - 0.5 * b
    # g = x (x + 1) ... (x + k - 1) b / a^k, built as one product: apart, the rising factorial
    # overflows for a huge x (1e13) while b underflows, inf * 0 = NaN
    g = b
    k = 0.0
    for coef in _ZETA_A:
        g = g * (x + k) / a
        total = total + g / coef
        k += 1.0
        g = g * (x + k) / a
        k += 1.0
    return total


def zeta(input: Tensor | float, other: Tensor | float) -> Tensor:
    """The Hurwitz zeta function sum_k (other + k)^-input (the Riemann zeta at other = 1):
    direct terms until other + k > 9, then the Euler-Maclaurin tail, in float64. inf at
    input = 1 or at a non-positive integer ``other``; NaN for input < 1 and for a negative
    ``other`` with a non-integer input. Differentiable in ``other``.

    >>> import ember
    >>> f"{zeta(ember.tensor(2.0, dtype=ember.float64), 1.0).item():.10f}"  # pi^2 / 6
    '1.6449340668'
    """
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("special.zeta(): expected at least one Tensor argument")
    for v in (input, other):
        if isinstance(v, Tensor):
            _float(v, "zeta")  # refuses complex tensors
    # PyTorch's promotion (a 0-dim tensor or a number lifts only the category), then floating
    dtype = ember.result_type(input, other)
    if not dtype.is_floating_point:
        dtype = ember.get_default_dtype()
    # a number goes to the tensor's device (a CPU scalar met a meta or CUDA tensor in pow)
    dev = (input if isinstance(input, Tensor) else other).device
    x = (input if isinstance(input, Tensor) else ember.tensor(float(input), device=dev)
         ).to(ember.float64)
    q = (other if isinstance(other, Tensor) else ember.tensor(float(other), device=dev)
         ).to(ember.float64)
    x, q = ember.broadcast_tensors(x, q)
    total = _hurwitz_scaled(x, q, None)
    inf = ember.full_like(total, math.inf)
    nan = ember.full_like(total, math.nan)
    q_int = q == ember.floor(q)
    out = ember.where(x == 1.0, inf, total)
    out = ember.where(x < 1.0, nan, out)
    out = ember.where((q <= 0) & q_int & (x >= 1.0), inf, out)
    out = ember.where((q < 0) & ~q_int & (x != ember.floor(x)), nan, out)
    # x = +inf: only the k = 0 term survives when q = 1 (1), and it blows up for 0 < q < 1
    # (the sum computed inf / inf = NaN), as torch's
    out = ember.where((x == math.inf) & (q == 1.0), ember.ones_like(out), out)
    out = ember.where((x == math.inf) & (q > 0) & (q < 1.0), inf, out)
    return out.to(dtype)


def _polygamma_value(n: int, x: Tensor) -> Tensor:
    """polygamma(n, x) for a floating x, no autograd: digamma and trigamma from the native
    kernel (torch's algorithms); n >= 2 from the Hurwitz zeta in float64."""
    if n <= 1:
        return _special._native(n, x)
    sign = 1.0 if n % 2 == 1 else -1.0
    s = float(n + 1)
    x64 = x.to(ember.float64)  # in float64 throughout: n! alone overflows float32 from n = 35
    if n <= 170:
        r = (sign * float(math.factorial(n))) * zeta(s, x64)
    else:  # n! overflows a double (and math.factorial of a huge n would take forever)
        r = ember._C.full_like(x64, math.nan)
    # n! zeta(n + 1, x) overflows or underflows on the way (n > 170, or a large x) while the
    # result may be in range (polygamma(171, 10) is 1.24e137, polygamma(150, 1e3) -4.1e-190):
    # there, n! c^-s * (c^s zeta(s, x)) in logs, c the distance from x to the nearest pole
    # (x itself for x > 0), so that the scaled sum's largest term is +-1.
    finite = x64.isfinite()
    pole = (x64 <= 0) & (x64 == ember.floor(x64))
    redo = finite & ~pole & ~(r.isfinite() & (r.abs() >= 2.2250738585072014e-308))
    if x64.device.type != "meta" and bool(redo.any()):  # (meta: shapes only, no values)
        safe = ember._C.where(redo, x64, ember._C.full_like(x64, 1.0))
        c = ember._C.where(safe > 0, safe, (safe - ember.round(safe)).abs())
        z = _hurwitz_scaled(ember._C.full_like(safe, s), safe, c)
        log_r = math.lgamma(s) - s * c.log() + z.abs().log()
        scaled = (sign * z.sign()) * log_r.exp()
        r = ember._C.where(redo, scaled, r)
    if n > 170:  # the poles (sign * inf, as for smaller n) and NaN
        r = ember._C.where(pole, ember._C.full_like(r, sign * math.inf), r)
        r = ember._C.where(x64.isnan(), x64, r)
    # the limit at +inf is 0 (zeta(s, inf) is NaN; torch's polygamma is NaN there for n >= 2:
    # a deliberate difference)
    r = ember._C.where(x64 == math.inf, ember._C.zeros_like(r), r)
    return r.to(x.dtype)


class _Polygamma(ember.autograd.Function):
    """polygamma(n, x), whose derivative is polygamma(n + 1, x) (so that at the poles it is
    the signed infinity of the next order, as torch, not the NaN of differentiating the sum)."""

    _node_name = "PolygammaBackward0"  # torch's node

    @staticmethod
    def forward(ctx: Any, x: Tensor, n: int) -> Tensor:
        ctx.n = n
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return _polygamma_value(n, x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        return grad * _Polygamma.apply(x, ctx.n + 1), None

    @staticmethod
    def jvp(ctx: Any, t: Tensor, _n: Any = None) -> Tensor:
        (x,) = ctx.saved_tensors
        return t * _Polygamma.apply(x, ctx.n + 1)


def polygamma(n: int, input: Tensor) -> Tensor:
    """The n-th derivative of the digamma function: ``digamma`` for n = 0, else
    (-1)^(n+1) n! zeta(n + 1, input). Differentiable (its derivative is polygamma(n + 1)).

    >>> import ember
    >>> f"{polygamma(1, ember.tensor(1.0, dtype=ember.float64)).item():.8f}"  # pi^2 / 6
    '1.64493407'
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"polygamma(): n must be an int, got {type(n).__name__}")
    _check_int64("polygamma", "n", n)
    if n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n, got n = {n}")
    x = _float(_tensor("polygamma", input), "polygamma")
    return _Polygamma.apply(x, n)


# ---- Bessel, Airy and polynomial functions: the native ops special_* ---------------------------


def _unary(name: str, doc: str) -> Callable[..., Tensor]:
    op = getattr(ember._C, "special_" + name)

    def fn(input: Tensor, *, out: Tensor | None = None) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"special.{name}(): argument 'input' must be a Tensor, got "
                            f"{type(input).__name__}")
        return op(input) if out is None else op(input, out=out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _poly(name: str, doc: str) -> Callable[..., Tensor]:
    op = getattr(ember._C, "special_" + name)

    def fn(input: Tensor | float, n: Tensor | float, *, out: Tensor | None = None) -> Tensor:
        for arg, v in (("input", input), ("n", n)):
            if not isinstance(v, (Tensor, int, float)):
                raise TypeError(f"special.{name}(): argument '{arg}' must be a Tensor or a "
                                f"number, got {type(v).__name__}")
        if not isinstance(input, Tensor) and not isinstance(n, Tensor):
            raise TypeError(f"special.{name}(): expected input or n to be a Tensor, got two "
                            "numbers")
        return op(input, n) if out is None else op(input, n, out=out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


airy_ai = _unary("airy_ai", """The Airy function Ai(x) (NaN at +-inf, as torch).

>>> import ember
>>> f"{ember.special.airy_ai(ember.tensor(0.0, dtype=ember.float64)).item():.10f}"
'0.3550280539'
""")
bessel_j0 = _unary("bessel_j0", """The Bessel function of the first kind of order 0.

>>> import ember
>>> f"{ember.special.bessel_j0(ember.tensor(1.0, dtype=ember.float64)).item():.10f}"
'0.7651976866'
""")
bessel_j1 = _unary("bessel_j1", """The Bessel function of the first kind of order 1.

>>> import ember
>>> f"{ember.special.bessel_j1(ember.tensor(1.0, dtype=ember.float64)).item():.10f}"
'0.4400505857'
""")
bessel_y0 = _unary("bessel_y0", """The Bessel function of the second kind of order 0 (-inf at 0,
NaN for negative x).

>>> import ember
>>> f"{ember.special.bessel_y0(ember.tensor(1.0, dtype=ember.float64)).item():.10f}"
'0.0882569642'
""")
bessel_y1 = _unary("bessel_y1", """The Bessel function of the second kind of order 1 (-inf at 0,
NaN for negative x).

>>> import ember
>>> f"{ember.special.bessel_y1(ember.tensor(1.0, dtype=ember.float64)).item():.10f}"
'-0.7812128213'
""")
modified_bessel_i0 = _unary("modified_bessel_i0", """The modified Bessel function of the first
kind of order 0 (not differentiable, as torch's; :func:`i0` is).

>>> import ember
>>> f"{ember.special.modified_bessel_i0(ember.tensor(1.0, dtype=ember.float64)).item():.10f}"
'1.2660658778'
""")
modified_bessel_i1 = _unary("modified_bessel_i1", """The modified Bessel function of the first
kind of order 1 (not differentiable, as torch's; :func:`i1` is).

>>> import ember
>>> f"{ember.special.modified_bessel_i1(ember.tensor(1.0, dtype=ember.float64)).item():.10f}"
'0.5651591040'
""")
modified_bessel_k0 = _unary("modified_bessel_k0", """The modified Bessel function of the second
kind of order 0 (inf at 0, NaN for negative x).

>>> import ember
>>> f"{ember.special.modified_bessel_k0(ember.tensor(1.0, dtype=ember.float64)).item():.10f}"
'0.4210244382'
""")
modified_bessel_k1 = _unary("modified_bessel_k1", """The modified Bessel function of the second
kind of order 1 (inf at 0, NaN for negative x).

>>> import ember
>>> f"{ember.special.modified_bessel_k1(ember.tensor(1.0, dtype=ember.float64)).item():.10f}"
'0.6019072302'
""")
scaled_modified_bessel_k0 = _unary("scaled_modified_bessel_k0", """``exp(x) * K0(x)``, finite
where K0 underflows.

>>> import ember
>>> x = ember.tensor(1000.0, dtype=ember.float64)
>>> f"{ember.special.scaled_modified_bessel_k0(x).item():.10f}"
'0.0396283216'
""")
scaled_modified_bessel_k1 = _unary("scaled_modified_bessel_k1", """``exp(x) * K1(x)``, finite
where K1 underflows.

>>> import ember
>>> x = ember.tensor(1.0, dtype=ember.float64)
>>> f"{ember.special.scaled_modified_bessel_k1(x).item():.10f}"
'1.6361534863'
""")
spherical_bessel_j0 = _unary("spherical_bessel_j0", """The spherical Bessel function of the first
kind of order 0, ``sin(x) / x`` (1 at 0, 0 at +-inf).

>>> import ember
>>> f"{spherical_bessel_j0(ember.tensor(1.0, dtype=ember.float64)).item():.8f}"
'0.84147098'
""")

_POLY_DOC = """{what}, ``n`` truncated toward zero (a negative, NaN or infinite order gives 0){extra}.
``input`` and ``n`` broadcast (either may be a number); integers promote to the default float
dtype, and the value is computed in the result's dtype.

>>> import ember
>>> ember.special.{name}(ember.tensor([{x}], dtype=ember.float64), 3).tolist()
[{want}]
"""


def _poly_doc(name: str, what: str, x: str, want: str, extra: str = "") -> str:
    return _POLY_DOC.format(name=name, what=what, x=x, want=want, extra=extra)


chebyshev_polynomial_t = _poly("chebyshev_polynomial_t", _poly_doc(
    "chebyshev_polynomial_t", "The Chebyshev polynomial of the first kind T_n(x)", "0.5", "-1.0"))
chebyshev_polynomial_u = _poly("chebyshev_polynomial_u", _poly_doc(
    "chebyshev_polynomial_u", "The Chebyshev polynomial of the second kind U_n(x)", "0.5", "-1.0"))
chebyshev_polynomial_v = _poly("chebyshev_polynomial_v", _poly_doc(
    "chebyshev_polynomial_v", "The Chebyshev polynomial of the third kind V_n(x)", "0.5", "-1.0"))
chebyshev_polynomial_w = _poly("chebyshev_polynomial_w", _poly_doc(
    "chebyshev_polynomial_w", "The Chebyshev polynomial of the fourth kind W_n(x)", "0.5", "-1.0"))
shifted_chebyshev_polynomial_t = _poly("shifted_chebyshev_polynomial_t", _poly_doc(
    "shifted_chebyshev_polynomial_t", "The shifted Chebyshev polynomial T_n(2x - 1)", "0.75",
    "-1.0"))
shifted_chebyshev_polynomial_u = _poly("shifted_chebyshev_polynomial_u", _poly_doc(
    "shifted_chebyshev_polynomial_u", "The shifted Chebyshev polynomial U_n(2x - 1)", "0.75",
    "-1.0"))
shifted_chebyshev_polynomial_v = _poly("shifted_chebyshev_polynomial_v", _poly_doc(
    "shifted_chebyshev_polynomial_v", "The shifted Chebyshev polynomial V_n(2x - 1)", "0.75",
    "-1.0"))
shifted_chebyshev_polynomial_w = _poly("shifted_chebyshev_polynomial_w", _poly_doc(
    "shifted_chebyshev_polynomial_w", "The shifted Chebyshev polynomial W_n(2x - 1)", "0.75",
    "-1.0"))
hermite_polynomial_h = _poly("hermite_polynomial_h", _poly_doc(
    "hermite_polynomial_h", "The physicists' Hermite polynomial H_n(x)", "1.0", "-4.0",
    "; orders above 128 (float32) or 512 (float64) give NaN, as torch"))
hermite_polynomial_he = _poly("hermite_polynomial_he", _poly_doc(
    "hermite_polynomial_he", "The probabilists' Hermite polynomial He_n(x)", "1.0", "-2.0",
    "; orders above 128 (float32) or 512 (float64) give NaN, as torch"))
laguerre_polynomial_l = _poly("laguerre_polynomial_l", _poly_doc(
    "laguerre_polynomial_l", "The Laguerre polynomial L_n(x)", "3.0", "1.0"))
legendre_polynomial_p = _poly("legendre_polynomial_p", _poly_doc(
    "legendre_polynomial_p", "The Legendre polynomial P_n(x)", "0.5", "-0.4375"))


# out= as torch.special's (the native special_* functions above take it already)
from ember import _outarg  # noqa: E402

_outarg.accept_out_names(globals(), (
    "expit", "logit", "erf", "erfc", "erfcx", "erfinv", "gammaln", "lgamma", "digamma", "psi",
    "gammainc", "gammaincc", "xlogy", "xlog1py", "entr", "ndtr", "ndtri", "log_ndtr", "sinc",
    "exp2", "expm1", "log1p", "logsumexp", "i0", "i0e", "i1", "i1e", "multigammaln", "zeta",
    "polygamma"))
_outarg.accept_out_names(globals(), ("round",), exact=True)  # keeps its dtype, as ember.round

# Functions of this module take part in __torch_function__ (ember.overrides), as torch.special's.
from ember import _argcheck  # noqa: E402
from ember import overrides as _overrides  # noqa: E402

_argcheck.guard_module(globals())  # non-tensor arguments: a TypeError naming them
_overrides._install_module(globals(), __name__)
