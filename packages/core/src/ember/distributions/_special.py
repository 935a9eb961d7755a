"""Special functions and samplers the distributions need, written on ember's tensor ops.

lgamma, digamma and trigamma take their values from the native CPU kernel ``_C._gamma_values``
(torch's algorithms; other devices use the tensor-op forms here); the incomplete gamma functions and the Gamma/Poisson/Binomial samplers are written
here in float64 and cast back to the input's dtype; derivatives come from custom autograd
Functions (lgamma' = digamma, digamma' = trigamma = polygamma(1, x)).

>>> import ember
>>> from ember.distributions._special import lgamma, digamma
>>> round(lgamma(ember.tensor([5.0], dtype=ember.float64)).item(), 10)  # log(4!)
3.1780538303
>>> round(digamma(ember.tensor([1.0], dtype=ember.float64)).item(), 10)  # -Euler gamma
-0.5772156649
"""

from __future__ import annotations

import math

import ember
from ember import Tensor
from ember.autograd import Function

__all__ = ["digamma", "gammainc", "lgamma", "poisson", "binomial", "standard_gamma", "trigamma", "xlogy"]

_F64 = ember.float64

# Lanczos approximation, g = 7, nine terms (relative error ~1e-15 for Re(z) >= 0.5).
_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993,
    676.5203681218851,
    -1259.1392167224028,
    771.32342877765313,
    -176.61502916214059,
    12.507343278686905,
    -0.13857109526572012,
    9.9843695780195716e-6,
    1.5056327351493116e-7,
)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _lgamma_pos(x: Tensor) -> Tensor:
    """log Gamma(x) for x >= 0.5 (float64, no autograd)."""
    z = x - 1.0
    acc = ember.full_like(z, _LANCZOS[0])
    for i in range(1, len(_LANCZOS)):
        acc = acc + _LANCZOS[i] / (z + i)
    t = z + (_LANCZOS_G + 0.5)
    return _HALF_LOG_2PI + (z + 0.5) * ember.log(t) - t + ember.log(acc)


def _lgamma_raw(x: Tensor) -> Tensor:
    """log |Gamma(x)| for any real x: the reflection formula below 0.5, +inf at the poles."""
    small = x < 0.5
    xr = ember.where(small, 1.0 - x, x)
    pos = _lgamma_pos(xr)
    # sin(pi x) from x's distance to the nearest integer (exact), as digamma's tan below:
    # pi * x itself rounds, which near a pole (x = -49 + 1e-14) left 0.6 of the log wrong
    sin_pix = ember.abs(ember.sin(math.pi * (x - ember.round(x))))
    refl = math.log(math.pi) - ember.log(sin_pix) - pos
    out = ember.where(small, refl, pos)
    # poles, and both infinities (the Lanczos sum gives inf - inf = NaN at +inf)
    pole = (small & (x == ember.floor(x))) | x.isinf()
    return ember.where(pole, math.inf, out)


def _digamma_raw(x: Tensor) -> Tensor:
    """psi(x) = d/dx log Gamma(x): recurrence up to x + 10, then the asymptotic series; the
    reflection formula below 0.5; NaN at the poles (torch gives -inf at 0 and NaN below)."""
    small = x < 0.5
    xr = ember.where(small, 1.0 - x, x)
    acc = ember.zeros_like(xr)
    for k in range(10):
        acc = acc + 1.0 / (xr + k)
    y = xr + 10.0
    y2 = 1.0 / (y * y)
    series = y2 * (1 / 12 - y2 * (1 / 120 - y2 * (1 / 252 - y2 * (1 / 240 - y2 * (1 / 132 - y2 * (691 / 32760 - y2 / 12))))))
    pos = ember.log(y) - 0.5 / y - series - acc
    # tan(pi x) from x's distance to the nearest integer (exact): pi * x itself rounds, which
    # near a pole (x = -49 + 1e-14) leaves next to nothing of the distance
    refl = pos - math.pi / ember.tan(math.pi * (x - ember.round(x)))
    out = ember.where(small, refl, pos)
    out = ember.where(small & (x == ember.floor(x)), math.nan, out)
    # at a zero, the infinity of the side its sign says: -inf at +0.0, inf at -0.0 (as torch)
    return ember.where(x == 0, ember.where(x.signbit(), math.inf, -math.inf), out)


def _trigamma_raw(x: Tensor) -> Tensor:
    """psi'(x): recurrence up to x + 10, asymptotic series, reflection below 0.5."""
    small = x < 0.5
    xr = ember.where(small, 1.0 - x, x)
    acc = ember.zeros_like(xr)
    for k in range(10):
        acc = acc + 1.0 / ((xr + k) * (xr + k))
    y = xr + 10.0
    iy = 1.0 / y
    y2 = iy * iy
    series = iy + 0.5 * y2 + iy * y2 * (1 / 6 - y2 * (1 / 30 - y2 * (1 / 42 - y2 * (1 / 30 - y2 * (5 / 66 - y2 * (691 / 2730 - y2 * 7 / 6))))))
    pos = series + acc
    s = ember.sin(math.pi * (x - ember.round(x)))  # sin^2 has period 1; the distance is exact
    refl = (math.pi * math.pi) / (s * s) - pos
    out = ember.where(small, refl, pos)
    return ember.where(small & (x == ember.floor(x)), math.inf, out)


_RAW = {-1: _lgamma_raw, 0: _digamma_raw, 1: _trigamma_raw}


def _native(order: int, x: Tensor) -> Tensor:
    """lgamma (order -1), digamma (0) or trigamma (1) of a floating tensor, no autograd: on the
    CPU from the native kernel (kernels/gamma_math.h: torch's algorithms, float32 computed in
    float32, so the values agree with torch's to the ulp); elsewhere from the tensor-op forms
    above, in float64."""
    with ember.no_grad():
        if x.device.type == "cpu":
            return ember._C._gamma_values(x, order)
        return _RAW[order](x.to(_F64)).to(x.dtype)


class _Trigamma(Function):
    _node_name = "PolygammaBackward0"  # torch's: digamma's derivative is polygamma(1, x)

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return _native(1, x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * ember.special.polygamma(2, x)  # (ember.special imports this module)


def _gamma_function(name: str, node: str, order: int,
                    derivative: type[Function]) -> type[Function]:
    """An autograd Function computing the native ``order`` (see _native), whose derivative is
    the Function ``derivative`` (lgamma -> digamma -> trigamma); its graph node is called
    ``node`` (torch's name)."""

    class _Fn(Function):
        _node_name = node

        @staticmethod
        def forward(ctx, x: Tensor) -> Tensor:
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return _native(order, x)

        @staticmethod
        def backward(ctx, grad: Tensor) -> Tensor:
            (x,) = ctx.saved_tensors
            return grad * derivative.apply(x)

        @staticmethod
        def jvp(ctx, t: Tensor) -> Tensor:
            (x,) = ctx.saved_tensors
            return t * derivative.apply(x)

    _Fn.__name__ = _Fn.__qualname__ = name
    return _Fn


_Digamma = _gamma_function("_Digamma", "DigammaBackward0", 0, _Trigamma)
_Lgamma = _gamma_function("_Lgamma", "LgammaBackward0", -1, _Digamma)


def _as_float(x: Tensor | float) -> Tensor:
    if not isinstance(x, Tensor):
        return ember.tensor(float(x), dtype=ember.get_default_dtype())
    if not x.is_floating_point():
        return x.to(ember.get_default_dtype())
    return x


def lgamma(x: Tensor) -> Tensor:
    """log |Gamma(x)|, differentiable (the derivative is digamma).

    >>> import ember
    >>> round(lgamma(ember.tensor([0.5], dtype=ember.float64)).item(), 8)  # log sqrt(pi)
    0.57236494
    """
    return _Lgamma.apply(_as_float(x))


def digamma(x: Tensor) -> Tensor:
    """The digamma function psi(x), differentiable once (the derivative is trigamma).

    >>> import ember
    >>> round(digamma(ember.tensor([2.0], dtype=ember.float64)).item(), 8)
    0.42278434
    """
    return _Digamma.apply(_as_float(x))


def trigamma(x: Tensor) -> Tensor:
    """The trigamma function psi'(x) (not differentiable further).

    >>> import ember
    >>> round(trigamma(ember.tensor([1.0], dtype=ember.float64)).item(), 8)  # pi^2 / 6
    1.64493407
    """
    return _Trigamma.apply(_as_float(x))


def xlogy(x: Tensor | float, y: Tensor) -> Tensor:
    """x * log(y), defined as 0 where x == 0 (also where y == 0).

    >>> import ember
    >>> xlogy(ember.tensor([0.0, 2.0]), ember.tensor([0.0, 1.0])).tolist()
    [0.0, 0.0]
    """
    if not isinstance(x, Tensor):
        if x == 0:
            return ember.zeros_like(y)
        return x * ember.log(y)
    zero = x == 0
    safe_y = ember.where(zero, ember.ones_like(y), y)
    return ember.where(zero, 0.0, x * ember.log(safe_y))


# ----------------------------------------------------------------------------------------
# Regularized lower incomplete gamma P(a, x)
# ----------------------------------------------------------------------------------------


# Temme's uniform asymptotic expansion (DLMF 8.12.3-8.12.8) for large a, in lambda = x / a,
# mu = lambda - 1 and eta = sign(mu) sqrt(2 (mu - log(1 + mu))):
#   Q(a, x) = erfc(eta sqrt(a / 2)) / 2 + R,  P(a, x) = erfc(-eta sqrt(a / 2)) / 2 - R,
#   R = exp(-a eta^2 / 2) / sqrt(2 pi a) * (c0(eta) + c1(eta) / a + c2(eta) / a^2 + ...),
#   c0 = 1/mu - 1/eta,  c_k = ((1 + mu) / mu) dc_{k-1}/dmu + (-1)^k gamma_k / mu
# (gamma_k: Stirling's series, 1/12, 1/288). The series and the continued fraction need about
# sqrt(a) terms near x = a and lose a log(x) - lgamma(a) to cancellation, so a >= 1000 uses
# this instead: three terms leave an error of about c3 / a^3 < 1e-12. Near mu = 0 eta and the
# c_k cancel, and are taken from their Taylor series in mu (derived with sympy, radius 1).
_TEMME_MIN_A = 1000.0
_TEMME_SERIES_MU = 0.1
_ETA_S = (1.0, -0.3333333333333333, 0.19444444444444445, -0.13518518518518519,
          0.10270061728395062, -0.08233759553203998, 0.06844705320399765, -0.05840173672349598,
          0.050819073696436734, -0.04490435697557504, 0.040169383760970956, -0.03629823350821494,
          0.033077734575438014, -0.030359007414019895, 0.028035031162601393,
          -0.026026964485597544, 0.024275486092980206, -0.022735134066871807)
_C0 = (-0.3333333333333333, 0.08333333333333333, -0.04259259259259259, 0.027237654320987653,
       -0.01947751322751323, 0.01489620076425632, -0.011915478640015678, 0.009842230520037232,
       -0.008328093512180232, 0.007180348385069859, -0.006284419272101214, 0.005568252617885114,
       -0.004984445684415658, 0.004500636357257656, -0.0040940356694601585,
       0.0037481681888972334, -0.003450850376970949)
_C1 = (-0.001851851851851852, -0.003472222222222222, 0.0038029100529100527,
       -0.003429049088771311, 0.002988131981187537, -0.0025972581998334313, 0.002270865542818775,
       -0.002001612631813119, 0.001778942744616595, -0.0015934139242758903, 0.001437430583748347,
       -0.001305075568638374, 0.0011917732719073143, -0.0010939765389837166,
       0.0010089168019233184)
_C2 = (0.004133597883597883, -0.0026813271604938273, 0.001665380658436214,
       -0.0010337630744170097, 0.0006389022577454934, -0.00038609516577918284,
       0.0002202535342409278, -0.000109183361550253, 3.3580519000456503e-05,
       1.8474582461357378e-05, -5.4551992134340815e-05, 7.95842560994561e-05,
       -9.685977986185839e-05)


def _horner(coeffs: tuple[float, ...], t: Tensor) -> Tensor:
    out = ember.full_like(t, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        out = out * t + c
    return out


def _gammainc_temme(a: Tensor, x: Tensor, upper: bool) -> Tensor:
    """P(a, x) (Q with ``upper``) for large a and 0 < x < inf, by Temme's expansion."""
    mu = (x - a) / a
    near = ember.abs(mu) < _TEMME_SERIES_MU
    ms = ember.where(near, mu, 0.0)
    ml = ember.where(near, 1.0, mu)  # mu > -1 as x > 0
    eta = ember.where(near, ms * _horner(_ETA_S, ms),
                      ember.sign(ml) * ember.sqrt(2.0 * (ml - ember.log1p(ml))))
    el = ember.where(near, 1.0, eta)
    c0 = ember.where(near, _horner(_C0, ms), 1.0 / ml - 1.0 / el)
    c1 = ember.where(near, _horner(_C1, ms),
                     el ** -3 - ml ** -3 - ml ** -2 - 1.0 / (12.0 * ml))
    c2 = ember.where(near, _horner(_C2, ms),
                     -3.0 * el ** -5 + 3.0 * ml ** -5 + 5.0 * ml ** -4 + (25.0 / 12.0) * ml ** -3
                     + (1.0 / 12.0) * ml ** -2 + 1.0 / (288.0 * ml))
    inv = 1.0 / a
    r = ember.exp(-0.5 * a * eta * eta) / ember.sqrt(2.0 * math.pi * a) * (c0 + inv * (c1 + inv * c2))
    z = eta * ember.sqrt(0.5 * a)
    return 0.5 * ember.erfc(z) + r if upper else 0.5 * ember.erfc(-z) - r


def _gammainc_raw(a: Tensor, x: Tensor, upper: bool = False) -> Tensor:
    """P(a, x) in float64 (Q = 1 - P with ``upper``, computed directly so that a small Q keeps
    its digits): the power series for x < a + 1, the continued fraction (modified Lentz) for Q
    otherwise, both run until every element has converged; Temme's expansion for a >= 1000."""
    a, x = ember.broadcast_tensors(a, x)
    big = (a >= _TEMME_MIN_A) & (x > 0) & ember.isfinite(x)
    temme = _gammainc_temme(ember.where(big, a, _TEMME_MIN_A), ember.where(big, x, _TEMME_MIN_A),
                            upper)
    a = ember.where(big, 1.0, a)  # the other lanes converge at once
    x = ember.where(big, 1.0, x)
    log_front = a * ember.log(ember.clamp(x, min=1e-300)) - x - _lgamma_raw(a)
    use_series = x < a + 1.0
    # Series: P = x^a e^-x / Gamma(a+1) * sum_k x^k / ((a+1)...(a+k)).
    term = ember.ones_like(x) / a
    total = term.clone()
    ap = a.clone()
    for _ in range(2000):
        ap = ap + 1.0
        term = term * x / ap
        total = total + term
        if not bool(((ember.abs(term) > 1e-17 * ember.abs(total)) & use_series).any()):
            break
    p_series = ember.exp(log_front) * total
    # Continued fraction for Q (Numerical Recipes' gcf in vectorized form).
    tiny = 1e-300
    xs = ember.where(use_series, a + 2.0, x)  # keeps the unused lanes finite
    b = xs + 1.0 - a
    c = ember.full_like(xs, 1.0 / tiny)
    d = 1.0 / b
    h = d.clone()
    for i in range(1, 2000):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = ember.where(ember.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = ember.where(ember.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if not bool(((ember.abs(delta - 1.0) > 1e-16) & ~use_series).any()):
            break
    q_cf = ember.exp(log_front) * h
    if upper:
        out = ember.where(use_series, 1.0 - p_series, q_cf)
        out = ember.where(x <= 0, 1.0, out)
        out = ember.where(ember.isinf(x) & (x > 0), 0.0, out)
    else:
        out = ember.where(use_series, p_series, 1.0 - q_cf)
        out = ember.where(x <= 0, 0.0, out)
        out = ember.where(ember.isinf(x) & (x > 0), 1.0, out)
    return ember.where(big, temme, out)


class _Gammainc(Function):
    @staticmethod
    def forward(ctx, a: Tensor, x: Tensor, upper: bool) -> Tensor:
        ctx.save_for_backward(a, x)
        ctx.upper = upper
        with ember.no_grad():
            return _gammainc_raw(a.to(_F64), x.to(_F64), upper).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: Tensor):
        a, x = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            raise NotImplementedError("gammainc: the derivative with respect to a is not implemented")
        dens = ember.exp((a - 1) * ember.log(x) - x - lgamma(a))
        return None, (-grad if ctx.upper else grad) * dens, None


def gammainc(a: Tensor, x: Tensor, upper: bool = False) -> Tensor:
    """The regularized lower incomplete gamma function P(a, x) (differentiable in x); the upper
    one, Q(a, x) = 1 - P(a, x), with ``upper``.

    >>> import ember
    >>> round(gammainc(ember.tensor([1.0], dtype=ember.float64), ember.tensor([1.0], dtype=ember.float64)).item(), 8)
    0.63212056
    """
    a, x = _as_float(a), _as_float(x)
    # expand each on its own: broadcast_tensors' outputs all require grad when one input does,
    # and a constant ``a`` would then refuse the backward in x
    shape = ember.broadcast_shapes(tuple(a.shape), tuple(x.shape))
    return _Gammainc.apply(a.expand(shape), x.expand(shape), upper)


# ----------------------------------------------------------------------------------------
# Gamma sampling with implicit reparameterization gradients
# ----------------------------------------------------------------------------------------


def _marsaglia_tsang(alpha: Tensor) -> Tensor:
    """Gamma(alpha, 1) draws for alpha >= 1 (float64): Marsaglia & Tsang's squeeze-free
    rejection method, redrawing only the rejected lanes until all are accepted."""
    d = alpha - 1.0 / 3.0
    c = 1.0 / ember.sqrt(9.0 * d)
    out = ember.zeros_like(alpha)
    pending = ember.ones_like(alpha, dtype=ember.bool)
    while True:
        z = ember.randn(tuple(alpha.shape), dtype=_F64, device=alpha.device)
        u = ember.rand(tuple(alpha.shape), dtype=_F64, device=alpha.device)
        v = 1.0 + c * z
        v = v * v * v
        ok = v > 0
        logv = ember.log(ember.where(ok, v, 1.0))
        accept = ok & (ember.log(u) < 0.5 * z * z + d - d * v + d * logv) & pending
        out = ember.where(accept, d * v, out)
        pending = pending & ~accept
        if not bool(pending.any()):
            return out


def _standard_gamma_raw(alpha: Tensor) -> Tensor:
    """Gamma(alpha, 1) for any alpha > 0: alpha < 1 is boosted as Gamma(alpha + 1) * U^(1/alpha)."""
    boost = alpha < 1.0
    x = _marsaglia_tsang(ember.where(boost, alpha + 1.0, alpha))
    u = ember.rand(tuple(alpha.shape), dtype=_F64, device=alpha.device)
    x = ember.where(boost, x * ember.exp(ember.log(u) / alpha), x)
    return ember.clamp(x, min=ember.finfo(_F64).tiny)


def _standard_gamma_grad_raw(alpha: Tensor, x: Tensor) -> Tensor:
    """dx/dalpha of a Gamma(alpha, 1) draw x, by implicit differentiation of its CDF:
    dx/dalpha = -(dP(alpha, x)/dalpha) / p(x; alpha).

    dP/dalpha comes from the power series P = sum_k t_k, t_k = x^(alpha+k) e^-x /
    Gamma(alpha+k+1), whose term-wise derivative is t_k (log x - psi(alpha+k+1)); it is summed
    until every lane has converged (about x + 12 sqrt(x) terms). For x > 200 (alpha of about
    150 and more) that is too slow, and the Wilson-Hilferty approximation is used instead:
    x = alpha (1 - 1/(9 alpha) + z / (3 sqrt(alpha)))^3 with z held fixed, which is accurate to
    about 3e-5 relative there (the series to about 1e-8; torch's approximation is within ~3e-4).
    """
    series = x <= 200.0
    xs = ember.where(series, x, 1.0)
    al = ember.where(series, alpha, 1.0)
    logx = ember.log(xs)
    t = ember.exp(al * logx - xs - _lgamma_raw(al + 1.0))
    psi = _digamma_raw(al + 1.0)
    total_d = t * (logx - psi)
    total = t.clone()
    k = 0
    while True:
        k += 1
        ak = al + k
        t = t * xs / ak
        psi = psi + 1.0 / ak
        total_d = total_d + t * (logx - psi)
        total = total + t
        if k > 20 and not bool((t > 1e-17 * total).any()):
            break
        if k > 5000:
            break
    log_density = (al - 1.0) * logx - xs - _lgamma_raw(al)
    grad_series = -total_d / ember.exp(log_density)
    # Wilson-Hilferty for the large lanes.
    aw = ember.where(series, 1.0, alpha)
    xw = ember.where(series, 1.0, x)
    s = ember.sqrt(aw)
    w = ember.pow(xw / aw, 1.0 / 3.0)  # = 1 - 1/(9a) + z/(3 sqrt a)
    z = (w - 1.0 + 1.0 / (9.0 * aw)) * 3.0 * s
    dw = 1.0 / (9.0 * aw * aw) - z / (6.0 * aw * s)
    grad_wh = w * w * w + 3.0 * aw * w * w * dw
    return ember.where(series, grad_series, grad_wh)


class _StandardGamma(Function):
    _node_name = "StandardGammaBackward0"  # torch._standard_gamma's node

    @staticmethod
    def forward(ctx, alpha: Tensor) -> Tensor:
        with ember.no_grad():
            x = _standard_gamma_raw(alpha.to(_F64)).to(alpha.dtype)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        alpha, x = ctx.saved_tensors
        with ember.no_grad():
            dx = _standard_gamma_grad_raw(alpha.to(_F64), x.to(_F64)).to(alpha.dtype)
        return grad * dx


def standard_gamma(alpha: Tensor) -> Tensor:
    """Draws from Gamma(alpha, 1), reparameterized: the gradient with respect to alpha is the
    implicit one, -(dCDF/dalpha) / density, evaluated at the drawn value.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> x = standard_gamma(ember.full((1000,), 3.0, dtype=ember.float64))
    >>> 2.8 < x.mean().item() < 3.2
    True
    """
    if not alpha.is_floating_point():
        raise TypeError(f"standard_gamma: expected a floating point alpha, got {alpha.dtype}")
    return _StandardGamma.apply(alpha)


def standard_gamma_grad(alpha: Tensor, x: Tensor) -> Tensor:
    """dx/dalpha for Gamma(alpha, 1) draws x (what ``standard_gamma``'s backward uses)."""
    with ember.no_grad():
        return _standard_gamma_grad_raw(alpha.to(_F64), x.to(_F64)).to(alpha.dtype)


# ----------------------------------------------------------------------------------------
# Poisson and Binomial sampling (not differentiable)
# ----------------------------------------------------------------------------------------


def _poisson_small(lam: Tensor) -> Tensor:
    """Knuth's product-of-uniforms method, for rates below 10."""
    limit = ember.exp(-lam)
    count = ember.zeros_like(lam)
    prod = ember.rand(tuple(lam.shape), dtype=_F64, device=lam.device)
    active = prod > limit
    while bool(active.any()):
        count = count + active.to(_F64)
        prod = ember.where(active, prod * ember.rand(tuple(lam.shape), dtype=_F64, device=lam.device), prod)
        active = prod > limit
    return count


def _poisson_large(lam: Tensor) -> Tensor:
    """Hormann's transformed rejection with squeeze (PTRS), for rates of 10 and more."""
    slam = ember.sqrt(lam)
    loglam = ember.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    out = ember.zeros_like(lam)
    pending = ember.ones_like(lam, dtype=ember.bool)
    while bool(pending.any()):
        u = ember.rand(tuple(lam.shape), dtype=_F64, device=lam.device) - 0.5
        v = ember.rand(tuple(lam.shape), dtype=_F64, device=lam.device)
        us = 0.5 - ember.abs(u)
        k = ember.floor((2.0 * a / us + b) * u + lam + 0.43)
        quick = (us >= 0.07) & (v <= vr)
        bad = (k < 0) | ((us < 0.013) & (v > us))
        kk = ember.clamp(k, min=0.0)
        lhs = ember.log(v) + ember.log(inv_alpha) - ember.log(a / (us * us) + b)
        rhs = -lam + kk * loglam - _lgamma_raw(kk + 1.0)
        accept = pending & (quick | (~bad & (lhs <= rhs)))
        out = ember.where(accept, k, out)
        pending = pending & ~accept
    return out


def poisson(rate: Tensor) -> Tensor:
    """Poisson draws (as floats of rate's dtype); rate 0 gives 0.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> x = poisson(ember.full((2000,), 4.0))
    >>> 3.8 < x.mean().item() < 4.2
    True
    """
    with ember.no_grad():
        lam = rate.to(_F64)
        # nan / inf rates would never leave the rejection loops: they draw nan / inf.
        bad = ~ember.isfinite(lam)
        if bool(bad.any()):
            lam = ember.where(bad, 0.0, lam)
        small = lam < 10.0
        lo = _poisson_small(ember.where(small, lam, 0.0))
        hi = _poisson_large(ember.where(small, 10.0, lam))
        out = ember.where(small, lo, hi)
        if bool(bad.any()):
            out = ember.where(bad, rate.to(_F64), out)
        return out.to(rate.dtype)


def _binomial_inversion(n: Tensor, p: Tensor) -> Tensor:
    """Counts the geometric waiting times that fit into n trials (for n * p < 10, p <= 1/2)."""
    log_q = ember.log1p(-p)
    count = ember.zeros_like(n)
    used = ember.zeros_like(n)
    active = (n > 0) & (p > 0)
    while bool(active.any()):
        u = ember.rand(tuple(n.shape), dtype=_F64, device=n.device)
        geom = ember.ceil(ember.log(u) / log_q)
        used = ember.where(active, used + geom, used)
        still = active & (used <= n)
        count = count + still.to(_F64)
        active = still
    return count


def _binomial_btrs(n: Tensor, p: Tensor) -> Tensor:
    """Hormann's BTRS transformed rejection (for n * p >= 10, p <= 1/2)."""
    q = 1.0 - p
    spq = ember.sqrt(n * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = ember.log(p / q)
    m = ember.floor((n + 1.0) * p)
    h = _lgamma_raw(m + 1.0) + _lgamma_raw(n - m + 1.0)
    out = ember.zeros_like(n)
    pending = ember.ones_like(n, dtype=ember.bool)
    while bool(pending.any()):
        u = ember.rand(tuple(n.shape), dtype=_F64, device=n.device) - 0.5
        v = ember.rand(tuple(n.shape), dtype=_F64, device=n.device)
        us = 0.5 - ember.abs(u)
        k = ember.floor((2.0 * a / us + b) * u + c)
        inside = (k >= 0) & (k <= n)
        quick = inside & (us >= 0.07) & (v <= vr)
        kk = ember.clamp(ember.minimum(k, n), min=0.0)
        lv = ember.log(v * alpha / (a / (us * us) + b))
        slow = inside & (lv <= h - _lgamma_raw(kk + 1.0) - _lgamma_raw(n - kk + 1.0) + (kk - m) * lpq)
        accept = pending & (quick | slow)
        out = ember.where(accept, k, out)
        pending = pending & ~accept
    return out


def binomial(count: Tensor, prob: Tensor) -> Tensor:
    """Binomial(count, prob) draws (as floats of prob's dtype).

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> x = binomial(ember.full((2000,), 20.0), ember.full((2000,), 0.3))
    >>> 5.8 < x.mean().item() < 6.2
    True
    """
    with ember.no_grad():
        n, p = ember.broadcast_tensors(count.to(_F64), prob.to(_F64))
        # nan counts or probabilities and infinite counts would never leave the rejection
        # loops: they draw n * p (nan, or inf as torch's).
        bad = ~ember.isfinite(n) | ember.isnan(p)
        any_bad = bool(bad.any())
        if any_bad:
            n_bad, p_bad = n, p
            n, p = ember.where(bad, 0.0, n), ember.where(bad, 0.0, p)
        flip = p > 0.5
        pp = ember.where(flip, 1.0 - p, p)
        small = n * pp < 10.0
        lo = _binomial_inversion(ember.where(small, n, 0.0), ember.where(small, pp, 0.0))
        hi = _binomial_btrs(ember.where(small, 100.0, n), ember.where(small, 0.5, pp))
        x = ember.where(small, lo, hi)
        x = ember.where(flip, n - x, x)
        if any_bad:
            x = ember.where(bad, n_bad * p_bad, x)
        return x.to(prob.dtype)
