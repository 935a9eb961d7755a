"""KL divergence between distributions, dispatched on the pair of types.

>>> import ember
>>> from ember.distributions import Normal, kl_divergence
>>> kl_divergence(Normal(0.0, 1.0), Normal(0.0, 1.0)).item()
0.0
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import ember
from ember import Tensor
from ember.distributions._linalg import solve_triangular
from ember.distributions._special import digamma, lgamma, xlogy
from ember.distributions.bernoulli import Bernoulli
from ember.distributions.beta import Beta
from ember.distributions.binomial import Binomial
from ember.distributions.categorical import Categorical
from ember.distributions.cauchy import Cauchy
from ember.distributions.continuous_bernoulli import ContinuousBernoulli
from ember.distributions.dirichlet import Dirichlet
from ember.distributions.distribution import Distribution
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.exponential import Exponential
from ember.distributions.gamma import Gamma
from ember.distributions.geometric import Geometric
from ember.distributions.gumbel import Gumbel
from ember.distributions.half_normal import HalfNormal
from ember.distributions.independent import Independent
from ember.distributions.laplace import Laplace
from ember.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from ember.distributions.multivariate_normal import MultivariateNormal
from ember.distributions.normal import Normal
from ember.distributions.one_hot_categorical import OneHotCategorical
from ember.distributions.pareto import Pareto
from ember.distributions.poisson import Poisson
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.uniform import Uniform
from ember.distributions.utils import _stable_softplus, _sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict[tuple[type, type], Callable[[Any, Any], Tensor]] = {}
_KL_MEMOIZE: dict[tuple[type, type], Any] = {}


def register_kl(type_p: type, type_q: type) -> Callable[[Callable], Callable]:
    """Decorator registering ``fn(p, q)`` as the KL divergence of ``type_p`` from ``type_q``.
    Lookup picks the most specific registered pair of base classes.

    >>> from ember.distributions import Distribution
    >>> class MyDist(Distribution):
    ...     pass
    >>> @register_kl(MyDist, MyDist)
    ... def _kl_my(p, q):
    ...     return 0.0
    """
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun: Callable) -> Callable:
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun

    return decorator


def _dispatch_kl(type_p: type, type_q: type) -> Any:
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return NotImplemented
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    left = min(matches, key=lambda m: (mro_p.index(m[0]), mro_q.index(m[1])))
    right = min(matches, key=lambda m: (mro_q.index(m[1]), mro_p.index(m[0])))
    left_fun, right_fun = _KL_REGISTRY[left], _KL_REGISTRY[right]
    if left_fun is not right_fun:
        warnings.warn(
            f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl"
            f"({left[0].__name__}, {right[1].__name__})",
            RuntimeWarning,
            stacklevel=3,
        )
    return left_fun


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) = E_p[log p(x) - log q(x)], batched over the batch shape.

    Raises NotImplementedError when no function is registered for the pair of types.

    >>> import ember
    >>> from ember.distributions import Bernoulli
    >>> round(kl_divergence(Bernoulli(0.5), Bernoulli(0.25)).item(), 5)
    0.14384
    """
    key = (type(p), type(q))
    fun = _KL_MEMOIZE.get(key)
    if fun is None:
        fun = _dispatch_kl(*key)
        _KL_MEMOIZE[key] = fun
    if fun is NotImplemented:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type {q.__class__.__name__}"
        )
    return fun(p, q)


def _softplus(x: Tensor) -> Tensor:
    return _stable_softplus(x)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p: ExponentialFamily, q: ExponentialFamily) -> Tensor:
    """The Bregman divergence of the log normalizer: F(theta_q) - F(theta_p) -
    <theta_q - theta_p, grad F(theta_p)> (members of the same family only)."""
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential families cannot be computed "
            "using Bregman divergences"
        )
    p_nparams = [t.detach().requires_grad_() for t in p._natural_params]
    q_nparams = q._natural_params
    with ember.enable_grad():
        lg_normal = p._log_normalizer(*p_nparams)
        gradients = ember.autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        result = result - _sum_rightmost((qnp - pnp) * g, len(q.event_shape))
    return result


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - ember.log(var_ratio))


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (_softplus(-q.logits) - _softplus(-p.logits))
    t1 = ember.where(q.probs == 0, math.inf, t1)
    t1 = ember.where(p.probs == 0, 0.0, t1)
    t2 = (1 - p.probs) * (_softplus(q.logits) - _softplus(p.logits))
    t2 = ember.where(q.probs == 1, math.inf, t2)
    t2 = ember.where(p.probs == 1, 0.0, t2)
    return t1 + t2


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Binomial, q: Binomial) -> Tensor:
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + ember.log1p(-p.probs) - ember.log1p(-q.probs))
    return ember.where(p.total_count > q.total_count, math.inf, kl)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = ember.where((q.probs == 0).expand_as(t), math.inf, t)
    t = ember.where((p.probs == 0).expand_as(t), 0.0, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Tensor:
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(sum_p)
    t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(sum_q)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_q - sum_p) * digamma(sum_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Tensor:
    t1 = q.concentration * ember.log(p.rate / q.rate)
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = lgamma(sum_p) - lgamma(sum_q)
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    rate_ratio = q.rate / p.rate
    return -ember.log(rate_ratio) + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = ember.abs(p.loc - q.loc)
    t1 = -ember.log(scale_ratio)
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * ember.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ember.log((q.high - q.low) / (p.high - p.low))
    return ember.where((q.low > p.low) | (q.high < p.high), math.inf, result)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> Tensor:
    return p.rate * (ember.log(p.rate) - ember.log(q.rate)) - (p.rate - q.rate)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes cannot be computed"
        )
    return _kl_gaussians(p, p._unbroadcasted_scale_tril, q, q._unbroadcasted_scale_tril)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
@register_kl(LowRankMultivariateNormal, MultivariateNormal)
@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_gaussians(p: Any, q: Any) -> Tensor:
    # through the Cholesky factors of the dense covariances (event sizes are small where the
    # low-rank form meets a full one)
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two (Low Rank) Multivariate Normals with different event "
            f"shapes cannot be computed: {tuple(p.event_shape)} and {tuple(q.event_shape)}"
        )
    return _kl_gaussians(p, _scale_tril_of(p), q, _scale_tril_of(q))


def _scale_tril_of(d: Any) -> Tensor:
    if isinstance(d, MultivariateNormal):
        return d._unbroadcasted_scale_tril
    return ember.linalg.cholesky(d.covariance_matrix)


def _kl_gaussians(p: Any, lp: Tensor, q: Any, lq: Tensor) -> Tensor:
    """KL between Gaussians given the lower Cholesky factors of their covariances."""
    half_term1 = ember.log(ember.diagonal(lq, 0, -2, -1)).sum(-1) - ember.log(ember.diagonal(lp, 0, -2, -1)).sum(-1)
    n = p.event_shape[0]
    batch = ember.broadcast_shapes(tuple(lq.shape[:-2]), tuple(lp.shape[:-2]))
    # tr(Sq^-1 Sp) = ||Lq^-1 Lp||_F^2
    m = solve_triangular(lq.expand(tuple(batch) + (n, n)), lp.expand(tuple(batch) + (n, n)))
    term2 = (m * m).sum((-2, -1))
    diff = (q.loc - p.loc).unsqueeze(-1)
    sol = solve_triangular(lq, diff).squeeze(-1)
    term3 = (sol * sol).sum(-1)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p: TransformedDistribution, q: TransformedDistribution) -> Tensor:
    if p.transforms != q.transforms:
        raise NotImplementedError
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    extra_event_dim = len(p.event_shape) - len(p.base_dist.event_shape)
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), extra_event_dim)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p: Geometric, q: Geometric) -> Tensor:
    # -H(p) - E_p[log q(k)], with log q(k) = k log(1 - q) + log q and E_p[k] = 1/p - 1
    return -p.entropy() - ember.log1p(-q.probs) / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Gumbel, q: Gumbel) -> Tensor:
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ember.log(ct1) - ct2 + ct3
    t2 = ct1 * _EULER
    t3 = ember.exp(ct2 - ct3 + lgamma(1 + ct1))
    return t1 + t2 + t3 - (1 + _EULER)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p: HalfNormal, q: HalfNormal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    return 0.5 * (var_ratio - 1 - ember.log(var_ratio))


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Cauchy, q: Cauchy) -> Tensor:
    # closed form of Chyzak and Nielsen (2019)
    t1 = ember.log((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2))
    t2 = ember.log(4 * p.scale * q.scale)
    return t1 - t2


# ---- pairs of different families -------------------------------------------------------------

_EULER = 0.57721566490153286060


def _infinite_like(t: Tensor) -> Tensor:
    return ember.full_like(t, math.inf)


def _gamma_e_log_density(e_x: Tensor, e_log_x: Tensor, q: Gamma) -> Tensor:
    """E_p[log q(x)] for q Gamma, from p's E[x] and E[log x]."""
    return (
        q.concentration * ember.log(q.rate)
        + (q.concentration - 1) * e_log_x
        - q.rate * e_x
        - lgamma(q.concentration)
    )


def _normal_cross_entropy(mean: Tensor, second_central: Tensor, q: Normal) -> Tensor:
    """-E_p[log q(x)] for q Normal, from p's mean and variance."""
    return 0.5 * ember.log(2 * math.pi * q.scale.pow(2)) + (second_central + (mean - q.loc).pow(2)) / (
        2 * q.scale.pow(2)
    )


def _kl_by_moments_normal(p: Any, q: Normal) -> Tensor:
    """KL(p || Normal): p's entropy and the cross-entropy, which needs only p's mean and variance."""
    return -p.entropy() + _normal_cross_entropy(p.mean, p.variance, q)


for _p in (Beta, Exponential, Gamma, Gumbel, Laplace, Uniform):
    register_kl(_p, Normal)(_kl_by_moments_normal)


def _kl_support_mismatch(p: Any, q: Any) -> Tensor:
    # q gives zero density where p has mass
    return _infinite_like(p.mean + q.mean * 0)


for _p, _q in [
    (Normal, Beta), (Normal, Exponential), (Normal, Gamma), (Normal, Uniform),
    (Laplace, Beta), (Laplace, Exponential), (Laplace, Gamma), (Laplace, Uniform),
    (Gumbel, Beta), (Gumbel, Exponential), (Gumbel, Gamma), (Gumbel, Uniform),
    (Exponential, Beta), (Exponential, Uniform), (Gamma, Beta), (Gamma, Uniform),
]:  # fmt: skip
    register_kl(_p, _q)(_kl_support_mismatch)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p: Exponential, q: Gamma) -> Tensor:
    e_log_x = -_EULER - ember.log(p.rate)
    return -p.entropy() - _gamma_e_log_density(1 / p.rate, e_log_x, q)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p: Gamma, q: Exponential) -> Tensor:
    return -p.entropy() - ember.log(q.rate) + q.rate * p.concentration / p.rate


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p: Normal, q: Laplace) -> Tensor:
    # E|x - m| for x ~ N(mu, s): s sqrt(2/pi) exp(-d^2 / 2s^2) + d erf(d / (s sqrt 2)), d = mu - m
    d = p.loc - q.loc
    e_abs = p.scale * math.sqrt(2 / math.pi) * ember.exp(-d.pow(2) / (2 * p.scale.pow(2))) + d * ember.erf(
        d / (p.scale * math.sqrt(2))
    )
    return -p.entropy() + ember.log(2 * q.scale) + e_abs / q.scale


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p: Exponential, q: Gumbel) -> Tensor:
    # -E[log q] = log b + E[z] + E[exp(-z)], z = (x - m) / b; E[exp(-x/b)] = rate / (rate + 1/b)
    e_z = (1 / p.rate - q.loc) / q.scale
    e_exp = ember.exp(q.loc / q.scale) * p.rate / (p.rate + 1 / q.scale)
    return -p.entropy() + ember.log(q.scale) + e_z + e_exp


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p: Gamma, q: Gumbel) -> Tensor:
    e_z = (p.concentration / p.rate - q.loc) / q.scale
    log_mgf = p.concentration * (ember.log(p.rate) - ember.log(p.rate + 1 / q.scale))
    e_exp = ember.exp(q.loc / q.scale + log_mgf)
    return -p.entropy() + ember.log(q.scale) + e_z + e_exp


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p: Normal, q: Gumbel) -> Tensor:
    e_z = (p.loc - q.loc) / q.scale
    e_exp = ember.exp((q.loc - p.loc) / q.scale + p.scale.pow(2) / (2 * q.scale.pow(2)))
    return -p.entropy() + ember.log(q.scale) + e_z + e_exp


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p: Beta, q: Exponential) -> Tensor:
    return -p.entropy() - ember.log(q.rate) + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p: Beta, q: Gamma) -> Tensor:
    e_log_x = digamma(p.concentration1) - digamma(p.concentration1 + p.concentration0)
    return -p.entropy() - _gamma_e_log_density(p.mean, e_log_x, q)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p: Beta, q: Uniform) -> Tensor:
    result = -p.entropy() + ember.log(q.high - q.low)
    return ember.where((q.low > 0) | (q.high < 1), math.inf, result)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p: Bernoulli, q: Poisson) -> Tensor:
    # log q(k) = k log r - r for k in {0, 1}
    return -p.entropy() - (p.probs * ember.log(q.rate) - q.rate)


def _uniform_e_log(low: Tensor, high: Tensor) -> Tensor:
    """E[log x] for x ~ Uniform(low, high) with 0 <= low < high."""
    def f(t: Tensor) -> Tensor:
        return xlogy(t, t) - t

    return (f(high) - f(low)) / (high - low)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p: Uniform, q: Exponential) -> Tensor:
    result = -p.entropy() - ember.log(q.rate) + q.rate * p.mean
    return ember.where(p.low < 0, math.inf, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p: Uniform, q: Gamma) -> Tensor:
    low = ember.clamp(p.low, min=0.0)
    e_log_q = _gamma_e_log_density(p.mean, _uniform_e_log(low, p.high), q)
    return ember.where(p.low < 0, math.inf, -p.entropy() - e_log_q)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p: Uniform, q: Beta) -> Tensor:
    low = ember.clamp(p.low, min=0.0)
    high = ember.clamp(p.high, max=1.0)
    a, b = q.concentration1, q.concentration0
    log_beta = lgamma(a) + lgamma(b) - lgamma(a + b)
    e_log_q = (a - 1) * _uniform_e_log(low, high) + (b - 1) * _uniform_e_log(1 - high, 1 - low) - log_beta
    return ember.where((p.low < 0) | (p.high > 1), math.inf, -p.entropy() - e_log_q)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p: Uniform, q: Gumbel) -> Tensor:
    width = p.high - p.low
    e_z = (p.mean - q.loc) / q.scale
    e_exp = q.scale * (ember.exp((q.loc - p.low) / q.scale) - ember.exp((q.loc - p.high) / q.scale)) / width
    return -p.entropy() + ember.log(q.scale) + e_z + e_exp


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_bounded(p: Poisson, q: Any) -> Tensor:
    # q has bounded support, p puts mass on every count
    return _infinite_like(p.rate)


# ---- Pareto: a TransformedDistribution with rules of its own ---------------------------------

def _inf_where(cond: Tensor, value: Tensor) -> Tensor:
    return ember.where(cond, math.inf, value)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p: Pareto, q: Pareto) -> Tensor:
    # log(a_p / a_q) + a_q log(s_p / s_q) + a_q / a_p - 1; infinite where p reaches below q's
    # minimum
    ratio = q.alpha / p.alpha
    kl = q.alpha * ember.log(p.scale / q.scale) - ember.log(ratio) + ratio - 1
    return _inf_where(p.scale < q.scale, kl)


def _pareto_e_log(p: Pareto) -> Tensor:
    return ember.log(p.scale) + p.alpha.reciprocal()  # E[log x]


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p: Pareto, q: Exponential) -> Tensor:
    kl = -p.entropy() - ember.log(q.rate) + q.rate * p.mean
    return _inf_where(p.alpha <= 1, kl)  # no finite mean


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p: Pareto, q: Gamma) -> Tensor:
    kl = -p.entropy() - _gamma_e_log_density(p.mean, _pareto_e_log(p), q)
    return _inf_where(p.alpha <= 1, kl)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p: Pareto, q: Normal) -> Tensor:
    return _inf_where(p.alpha <= 2, _kl_by_moments_normal(p, q))  # no finite variance


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p: Uniform, q: Pareto) -> Tensor:
    # -H(p) - E_p[log a + a log s - (a + 1) log x]
    e_log = _uniform_e_log(p.low, p.high)
    kl = -p.entropy() - ember.log(q.alpha) - q.alpha * ember.log(q.scale) + (q.alpha + 1) * e_log
    return _inf_where(p.low < q.scale, kl)


# ---- ContinuousBernoulli against other families ----------------------------------------------

def _cb_cross_entropy(mean: Tensor, q: ContinuousBernoulli) -> Tensor:
    """-E_p[log q(x)] for q ContinuousBernoulli (log q(x) = log C + x logit + log(1 - probs))."""
    return -(mean * q.logits + ember.log1p(-q.probs) + q._cont_bern_log_norm())


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_cb(p: Beta, q: ContinuousBernoulli) -> Tensor:
    return -p.entropy() + _cb_cross_entropy(p.mean, q)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_cb(p: Uniform, q: ContinuousBernoulli) -> Tensor:
    kl = -p.entropy() + _cb_cross_entropy(p.mean, q)
    # PyTorch's rule: infinite once the uniform touches either end of [0, 1]
    return _inf_where((p.high >= 1) | (p.low <= 0), kl)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p: ContinuousBernoulli, q: ContinuousBernoulli) -> Tensor:
    return -p.entropy() + _cb_cross_entropy(p.mean, q)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_cb_exponential(p: ContinuousBernoulli, q: Exponential) -> Tensor:
    return -p.entropy() - ember.log(q.rate) + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_cb_normal(p: ContinuousBernoulli, q: Normal) -> Tensor:
    return _kl_by_moments_normal(p, q)


@register_kl(ContinuousBernoulli, Uniform)
def _kl_cb_uniform(p: ContinuousBernoulli, q: Uniform) -> Tensor:
    kl = -p.entropy() + ember.log(q.high - q.low)
    # PyTorch's rule: infinite unless the uniform reaches strictly past both ends of [0, 1]
    return _inf_where((q.low >= 0) | (q.high <= 1), kl)


def _kl_infinite_p(p: Any, q: Any) -> Tensor:
    # q gives zero density where p has mass: infinite, shaped like p's batch
    return _infinite_like(p.mean + q.mean * 0)


for _p, _q in [
    (Beta, Pareto), (ContinuousBernoulli, Pareto), (Exponential, Pareto), (Gamma, Pareto),
    (Gumbel, Pareto), (Laplace, Pareto), (Normal, Pareto),
    (Pareto, Beta), (Pareto, ContinuousBernoulli), (Pareto, Uniform),
    (Exponential, ContinuousBernoulli), (Gamma, ContinuousBernoulli),
    (Gumbel, ContinuousBernoulli), (Laplace, ContinuousBernoulli), (Normal, ContinuousBernoulli),
]:  # fmt: skip
    register_kl(_p, _q)(_kl_infinite_p)
