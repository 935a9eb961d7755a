"""Probabilistic modelling code that leans on torch.distributions' closed forms rather than
sampling: batch / event shapes of every family after expand() and Independent, mean / variance /
mode / stddev, entropy, cdf and icdf round trips, log_prob broadcasting against a batch,
enumerate_support of discrete families, closed-form kl_divergence between pairs (and its
registry's NotImplementedError for a missing pair), constraint checks with validate_args,
transform_to / biject_to for constrained parameters, LowRankMultivariateNormal against the dense
MultivariateNormal, MixtureSameFamily's cdf and log_prob, and a maximum-likelihood fit of a
Student-t / Gamma / von Mises model through unconstrained parameters. Data from NumPy: the run is
the same on both libraries. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first nll> <last nll> <max cdf error>."""

import numpy as np
import torch
import torch.distributions as D
from torch.distributions import constraints
from torch.distributions.kl import kl_divergence

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(18)


def fmt(t):
    return [round(float(v), 5) for v in torch.as_tensor(t).reshape(-1)]


families = {
    "Normal": D.Normal(torch.tensor([0.5, -1.0]), torch.tensor([1.5, 0.3])),
    "Laplace": D.Laplace(torch.tensor([0.0, 2.0]), torch.tensor([1.0, 0.5])),
    "Gamma": D.Gamma(torch.tensor([2.0, 5.0]), torch.tensor([1.0, 3.0])),
    "Beta": D.Beta(torch.tensor([2.0, 0.7]), torch.tensor([3.0, 0.9])),
    "Gumbel": D.Gumbel(torch.tensor([0.0, 1.0]), torch.tensor([2.0, 0.5])),
    "StudentT": D.StudentT(torch.tensor([5.0, 3.0]), torch.tensor([0.0, 1.0]), torch.tensor([1.0, 2.0])),
    "LogNormal": D.LogNormal(torch.tensor([0.0, 0.5]), torch.tensor([0.5, 0.25])),
    "Weibull": D.Weibull(torch.tensor([1.0, 2.0]), torch.tensor([1.5, 3.0])),
    "Exponential": D.Exponential(torch.tensor([0.5, 4.0])),
    "HalfNormal": D.HalfNormal(torch.tensor([1.0, 2.0])),
    "Cauchy": D.Cauchy(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.5])),
    "Poisson": D.Poisson(torch.tensor([3.0, 0.5])),
    "Geometric": D.Geometric(probs=torch.tensor([0.3, 0.8])),
    "Binomial": D.Binomial(10, probs=torch.tensor([0.25, 0.6])),
    "NegativeBinomial": D.NegativeBinomial(4.0, probs=torch.tensor([0.3, 0.5])),
    "Kumaraswamy": D.Kumaraswamy(torch.tensor([2.0, 5.0]), torch.tensor([3.0, 1.5])),
    "VonMises": D.VonMises(torch.tensor([0.0, 1.0]), torch.tensor([2.0, 0.5])),
    "Chi2": D.Chi2(torch.tensor([3.0, 7.0])),
    "InverseGamma": D.InverseGamma(torch.tensor([3.0, 4.0]), torch.tensor([2.0, 1.0])),
}
for name, d in families.items():
    parts = []
    for attr in ("mean", "variance", "mode"):
        if name == "Kumaraswamy" and attr == "mode":
            continue  # PyTorch's closed form takes log1p(-b): NaN for every b > 1
        try:
            parts.append(f"{attr} {fmt(getattr(d, attr))}")
        except NotImplementedError:
            parts.append(f"{attr} n/a")
    try:
        parts.append(f"entropy {fmt(d.entropy())}")
    except NotImplementedError:
        parts.append("entropy n/a")
    print(f"{name}: batch {tuple(d.batch_shape)} event {tuple(d.event_shape)} " + " ".join(parts))

# log_prob broadcast: a (5, 1) column of values against a batch of 2
x = torch.linspace(0.1, 0.9, 5).unsqueeze(-1)
for name in ("Normal", "Gamma", "Beta", "Kumaraswamy", "Weibull", "VonMises"):
    lp = families[name].log_prob(x)
    print(f"{name} log_prob shape {tuple(lp.shape)} sum {lp.sum().item():.6f}")

# cdf / icdf round trips where both exist
max_err = 0.0
q = torch.tensor([[0.1], [0.5], [0.9]])
for name in ("Normal", "Laplace", "Gumbel", "Exponential", "HalfNormal", "Cauchy", "Weibull", "LogNormal"):
    d = families[name]
    v = d.icdf(q)
    back = d.cdf(v)
    err = (back - q).abs().max().item()
    max_err = max(max_err, err)
    print(f"{name} icdf(0.5) {fmt(v[1])} roundtrip ok {err < 1e-9}")
for name in ("Gamma", "Beta", "Chi2", "StudentT"):
    try:
        families[name].cdf(torch.tensor(0.5))
        print(f"{name} cdf available")
    except NotImplementedError:
        print(f"{name} cdf NotImplementedError")

# probits far in the tails (tail-risk quantiles): special.ndtri and erfinv near +-1
tails = torch.tensor([1e-300, 1e-20, 1e-10, 0.5, 1 - 1e-12])
print("ndtri tails", [round(v, 9) for v in torch.special.ndtri(tails).tolist()])
print("erfinv near 1", [round(v, 9) for v in torch.erfinv(torch.tensor([-1 + 1e-12, 0.999999, 1 - 1e-15])).tolist()])

# discrete supports
for name, d in (("Bernoulli", D.Bernoulli(probs=torch.tensor([0.2, 0.7]))),
                ("Categorical", D.Categorical(logits=torch.tensor([[0.0, 1.0, 2.0]]))),
                ("Binomial", D.Binomial(3, probs=torch.tensor(0.4))),
                ("OneHot", D.OneHotCategorical(probs=torch.tensor([0.5, 0.3, 0.2])))):
    s = d.enumerate_support()
    s2 = d.enumerate_support(expand=False)
    lp = d.log_prob(s)
    print(f"{name} support {tuple(s.shape)} unexpanded {tuple(s2.shape)} probs sum {lp.exp().sum(0).tolist()}")

# expand / Independent / reinterpreted batch dims
mvn_like = D.Independent(D.Normal(torch.zeros(3, 4), torch.ones(3, 4)), 1)
e = mvn_like.expand(torch.Size([2, 3]))
print(f"Independent batch {tuple(mvn_like.batch_shape)} event {tuple(mvn_like.event_shape)} expanded {tuple(e.batch_shape)}")
print(f"Independent log_prob shape {tuple(e.log_prob(torch.zeros(4)).shape)} value {e.log_prob(torch.zeros(4))[0, 0].item():.6f}")

# KL divergences in closed form
pairs = [
    (D.Normal(0.0, 1.0), D.Normal(1.0, 2.0)),
    (D.Gamma(2.0, 1.0), D.Gamma(3.0, 2.0)),
    (D.Beta(2.0, 3.0), D.Beta(1.0, 1.0)),
    (D.Exponential(1.0), D.Gamma(2.0, 1.0)),
    (D.Bernoulli(0.3), D.Bernoulli(0.6)),
    (D.Categorical(probs=torch.tensor([0.2, 0.3, 0.5])), D.Categorical(probs=torch.tensor([0.4, 0.4, 0.2]))),
    (D.Poisson(3.0), D.Poisson(2.0)),
    (D.Laplace(0.0, 1.0), D.Laplace(1.0, 3.0)),
    (D.Uniform(0.0, 1.0), D.Normal(0.0, 1.0)),
    (D.Dirichlet(torch.tensor([1.0, 2.0, 3.0])), D.Dirichlet(torch.tensor([2.0, 2.0, 2.0]))),
    (D.MultivariateNormal(torch.zeros(2), torch.tensor([[2.0, 0.5], [0.5, 1.0]])),
     D.MultivariateNormal(torch.ones(2), torch.eye(2))),
    (D.Independent(D.Normal(torch.zeros(3), torch.ones(3)), 1), D.Independent(D.Normal(torch.ones(3), 2 * torch.ones(3)), 1)),
]
for p, qd in pairs:
    print(f"KL({type(p).__name__}||{type(qd).__name__}) = {kl_divergence(p, qd).item():.6f}")
try:
    kl_divergence(D.Cauchy(0.0, 1.0), D.Gumbel(0.0, 1.0))
except NotImplementedError:
    print("KL(Cauchy||Gumbel) NotImplementedError")

# validation
try:
    D.Normal(torch.tensor(0.0), torch.tensor(-1.0), validate_args=True)
except ValueError as exc:
    print("negative scale -> ValueError", "scale" in str(exc))
try:
    D.Beta(2.0, 2.0, validate_args=True).log_prob(torch.tensor(1.5))
except ValueError:
    print("out of support -> ValueError")
print("constraints", constraints.positive.check(torch.tensor([-1.0, 2.0])).tolist(),
      constraints.simplex.check(torch.tensor([0.2, 0.8])).item(),
      constraints.unit_interval.check(torch.tensor([0.0, 1.0, 1.2])).tolist())

# constrained parameters through transform_to / biject_to
for c in (constraints.positive, constraints.unit_interval, constraints.simplex, constraints.lower_cholesky,
          constraints.interval(-2.0, 3.0), constraints.greater_than(1.5)):
    t = D.transform_to(c)
    u = torch.tensor([0.3, -0.7, 1.1]) if c is not constraints.lower_cholesky else torch.tensor([[0.3, 0.0], [-0.7, 1.1]])
    y = t(u)
    back = t.inv(y)
    print(f"transform_to {type(t).__name__} -> {fmt(y)} check {bool(c.check(y).all())} inv ok {torch.allclose(back, u) if c is not constraints.simplex else back.shape == (2,)}")

# low rank vs dense
W = torch.from_numpy(rng.normal(size=(4, 2)))
diag = torch.tensor([0.5, 1.0, 1.5, 2.0])
lr = D.LowRankMultivariateNormal(torch.zeros(4), W, diag)
dense = D.MultivariateNormal(torch.zeros(4), covariance_matrix=W @ W.T + torch.diag(diag))
v = torch.from_numpy(rng.normal(size=(3, 4)))
print(f"lowrank logp == dense {torch.allclose(lr.log_prob(v), dense.log_prob(v))} entropy {lr.entropy().item():.6f} {dense.entropy().item():.6f}")
print(f"precision diag {fmt(dense.precision_matrix.diagonal())} scale_tril[1] {fmt(dense.scale_tril[1])}")

# mixture
mix = D.MixtureSameFamily(D.Categorical(torch.tensor([0.3, 0.7])), D.Normal(torch.tensor([-2.0, 1.0]), torch.tensor([0.5, 1.0])))
print(f"mixture mean {mix.mean.item():.6f} var {mix.variance.item():.6f} cdf(0) {mix.cdf(torch.tensor(0.0)).item():.6f} logp {fmt(mix.log_prob(torch.tensor([-2.0, 0.0, 1.0])))}")

# maximum likelihood through unconstrained parameters
data_t = torch.from_numpy(rng.standard_t(4.0, 400) * 0.7 + 1.2)
data_g = torch.from_numpy(rng.gamma(3.0, 0.5, 400))
data_v = torch.from_numpy(rng.vonmises(0.8, 3.0, 400))
raw = torch.zeros(7, requires_grad=True)
pos = D.transform_to(constraints.positive)
opt = torch.optim.LBFGS([raw], lr=0.5, max_iter=20, line_search_fn="strong_wolfe")


def nll():
    df, scale, a, rate, kappa = (pos(raw[i]) for i in (0, 2, 3, 4, 6))
    return -(D.StudentT(df, raw[1], scale).log_prob(data_t).mean()
             + D.Gamma(a, rate).log_prob(data_g).mean()
             + D.VonMises(raw[5], kappa).log_prob(data_v).mean())


first = nll().item()
for it in range(6):
    def closure():
        opt.zero_grad()
        loss = nll()
        loss.backward()
        return loss
    opt.step(closure)
last = nll().item()
est = [pos(raw[0]).item(), raw[1].item(), pos(raw[2]).item(), pos(raw[3]).item(), pos(raw[4]).item(), raw[5].item(), pos(raw[6]).item()]
print("fit df loc scale a rate mu kappa", [round(v, 3) for v in est])
torch.set_default_dtype(torch.float32)
print(f"RESULT {first:.6f} {last:.6f} {max_err:.3e}")
