"""Variational inference with torch.distributions, in the style of the public Pyro-free VI and
normalizing-flow tutorials: Bayesian logistic regression fitted by maximizing the ELBO with a
mean-field Normal posterior (reparameterized with NumPy noise, the KL term by kl_divergence
against the prior, checked against a Monte Carlo estimate), then a posterior made richer by a
flow: a custom Transform subclass (a planar-like invertible map with log_abs_det_jacobian)
composed with AffineTransform through ComposeTransform inside a TransformedDistribution; the
constraint machinery (biject_to / transform_to for positive, simplex, interval and
correlation-Cholesky constraints, their inverses and log-determinants, StickBreakingTransform and
SoftmaxTransform, IndependentTransform, ReshapeTransform, CatTransform / StackTransform,
CumulativeDistributionTransform); kl_divergence between many pairs (Normal, MultivariateNormal,
Independent, Dirichlet, Beta, Gamma, Bernoulli, Categorical, Exponential, Laplace, Poisson) and
a custom pair added with register_kl; and LogNormal / Gumbel written as TransformedDistributions
checked against the library's own. Weights, data and noise from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first -elbo> <last -elbo> <accuracy>."""


import numpy as np
import torch
import torch.distributions as D
import torch.distributions.transforms as T
from torch.distributions import constraints
from torch.distributions.kl import kl_divergence, register_kl

rng = np.random.default_rng(0)


def arr(*shape, scale=1.0):
    return torch.from_numpy((scale * rng.normal(size=shape)).astype(np.float32))


# data for a Bayesian logistic regression
N, P = 200, 4
w_true = torch.tensor([1.5, -2.0, 0.5, 0.0])
X = arr(N, P)
y = (torch.from_numpy(rng.uniform(size=N).astype(np.float32)) < torch.sigmoid(X @ w_true)).float()
prior = D.Independent(D.Normal(torch.zeros(P), torch.ones(P)), 1)

loc = torch.zeros(P, requires_grad=True)
raw_scale = torch.full((P,), -1.0, requires_grad=True)
opt = torch.optim.Adam([loc, raw_scale], lr=0.05)
losses = []
for step in range(120):
    q = D.Independent(D.Normal(loc, torch.nn.functional.softplus(raw_scale)), 1)
    eps = arr(8, P)
    w = q.base_dist.loc + q.base_dist.scale * eps  # reparameterized draws
    lik = D.Bernoulli(logits=w @ X.T).log_prob(y).sum(-1).mean()
    loss = -(lik - kl_divergence(q, prior))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 40 == 0:
        print(f"step {step:3d} -elbo {loss.item():.4f}")
with torch.no_grad():
    q = D.Independent(D.Normal(loc, torch.nn.functional.softplus(raw_scale)), 1)
    w = q.mean + q.stddev * arr(4000, P)
    mc_kl = (q.log_prob(w) - prior.log_prob(w)).mean().item()
    print(f"posterior mean {[round(v, 3) for v in q.mean.tolist()]}")
    print(f"kl closed form {kl_divergence(q, prior).item():.4f} monte carlo near: "
          f"{abs(mc_kl - kl_divergence(q, prior).item()) < 0.1}")
    acc = ((X @ q.mean > 0).float() == y).float().mean().item()


class Planar(T.Transform):
    """x + u tanh(w x + b) in 1-D, invertible for u * w > -1."""
    domain = constraints.real
    codomain = constraints.real
    bijective = True

    def __init__(self, u, w, b):
        super().__init__(cache_size=1)
        self.u, self.w, self.b = u, w, b

    def _call(self, x):
        return x + self.u * torch.tanh(self.w * x + self.b)

    def log_abs_det_jacobian(self, x, y):
        return torch.log1p(self.u * self.w * (1 - torch.tanh(self.w * x + self.b) ** 2)).abs()


flow = D.TransformedDistribution(D.Normal(0.0, 1.0),
                                 T.ComposeTransform([Planar(torch.tensor(0.8), torch.tensor(1.5),
                                                            torch.tensor(0.2)),
                                                     T.AffineTransform(1.0, 2.0)]))
z = arr(5)
xs = flow.transforms[0](z)
fx = T.AffineTransform(1.0, 2.0)(Planar(torch.tensor(0.8), torch.tensor(1.5), torch.tensor(0.2))(z))
print("flow samples by hand == transforms:", torch.allclose(xs, fx))
# the density of a flow through a non-analytic inverse: change of variables on the grid of z
zz = torch.linspace(-8, 8, 20001)
t = flow.transforms[0].parts[0]
yy = t(zz)
dens = D.Normal(0.0, 1.0).log_prob(zz).exp() / t.log_abs_det_jacobian(zz, yy).exp()
print(f"flow density integrates to {torch.trapezoid(dens, yy).item():.4f}")
print("event_shape", tuple(flow.event_shape), "batch_shape", tuple(flow.batch_shape))

# constraints and bijections
for name, c, shape in [("positive", constraints.positive, (3,)),
                       ("simplex", constraints.simplex, (3,)),
                       ("interval", constraints.interval(-1.0, 2.0), (3,)),
                       ("corr_cholesky", constraints.corr_cholesky, (3,))]:
    tr = D.biject_to(c) if name != "corr_cholesky" else D.transform_to(c)
    u = arr(*shape)
    v = tr(u)
    back = tr.inv(v)
    ok = c.check(v).all().item()
    print(f"{name}: check {ok} round trip {torch.allclose(tr(back), v, atol=1e-5)} "
          f"ladj {tr.log_abs_det_jacobian(u, v).sum().item():.4f}")
sb = T.StickBreakingTransform()
u = arr(4, 3)
s = sb(u)
print("stick breaking", tuple(s.shape), f"sums {s.sum(-1).tolist()[0]:.5f}",
      "inverse ok:", torch.allclose(sb.inv(s), u, atol=1e-4),
      f"ladj {sb.log_abs_det_jacobian(u, s).sum().item():.4f}")
sm = T.SoftmaxTransform()
print("softmax transform == softmax:", torch.allclose(sm(u), u.softmax(-1)))
it = T.IndependentTransform(T.ExpTransform(), 1)
print(f"independent exp ladj {tuple(it.log_abs_det_jacobian(u, it(u)).shape)} "
      f"{it.log_abs_det_jacobian(u, it(u)).sum().item():.4f}")
rs = T.ReshapeTransform((4, 3), (2, 6))
print("reshape", tuple(rs(u).shape), tuple(rs.inv(rs(u)).shape))
ct = T.CatTransform([T.ExpTransform(), T.SigmoidTransform()], dim=1, lengths=[1, 2])
print(f"cat transform {ct(u).sum().item():.4f} ladj {ct.log_abs_det_jacobian(u, ct(u)).sum().item():.4f}")
st = T.StackTransform([T.ExpTransform(), T.TanhTransform(), T.AffineTransform(0.0, 3.0)], dim=1)
print(f"stack transform {st(u).sum().item():.4f} ladj {st.log_abs_det_jacobian(u, st(u)).sum().item():.4f}")
cdf = T.CumulativeDistributionTransform(D.Normal(0.0, 1.0))
print(f"cdf transform {cdf(torch.tensor([0.0, 1.0])).tolist()[1]:.5f} inverse "
      f"{cdf.inv(torch.tensor([0.975])).item():.4f}")

# kl_divergence between pairs, closed forms
L = torch.tensor([[1.0, 0.0], [0.5, 0.8]])
pairs = [
    ("normal", D.Normal(0.3, 1.2), D.Normal(-0.5, 0.7)),
    ("mvn", D.MultivariateNormal(torch.zeros(2), scale_tril=L),
     D.MultivariateNormal(torch.ones(2), covariance_matrix=2 * torch.eye(2))),
    ("independent", D.Independent(D.Normal(torch.zeros(3), torch.ones(3)), 1),
     D.Independent(D.Normal(torch.ones(3), 2 * torch.ones(3)), 1)),
    ("dirichlet", D.Dirichlet(torch.tensor([1.0, 2.0, 3.0])), D.Dirichlet(torch.ones(3))),
    ("beta", D.Beta(2.0, 3.0), D.Beta(1.0, 1.0)),
    ("gamma", D.Gamma(2.0, 3.0), D.Gamma(1.5, 1.0)),
    ("bernoulli", D.Bernoulli(probs=0.3), D.Bernoulli(probs=0.6)),
    ("categorical", D.Categorical(logits=torch.tensor([0.0, 1.0, 2.0])),
     D.Categorical(probs=torch.tensor([0.2, 0.3, 0.5]))),
    ("exponential", D.Exponential(2.0), D.Exponential(0.5)),
    ("exp-gamma", D.Exponential(2.0), D.Gamma(2.0, 1.0)),
    ("laplace", D.Laplace(0.0, 1.0), D.Laplace(1.0, 2.0)),
    ("poisson", D.Poisson(3.0), D.Poisson(5.0)),
    ("uniform-normal", D.Uniform(-1.0, 2.0), D.Normal(0.0, 1.0)),
]
for name, p, q in pairs:
    print(f"kl {name}: {kl_divergence(p, q).item():.5f}")


class Shifted(D.Normal):
    pass


@register_kl(Shifted, Shifted)
def _kl_shifted(p, q):
    return ((p.loc - q.loc) ** 2).sum() * 0 + 42.0


print("registered kl:", float(kl_divergence(Shifted(0.0, 1.0), Shifted(1.0, 1.0))),
      "parent rule for mixed:", round(float(kl_divergence(Shifted(0.0, 1.0), D.Normal(1.0, 1.0))), 4))
try:
    kl_divergence(D.Beta(1.0, 1.0), D.Poisson(1.0))
except NotImplementedError as e:
    print("no kl rule: NotImplementedError", type(e).__name__)

# LogNormal and Gumbel as transformed distributions
v = torch.tensor([0.5, 1.0, 3.0])
ln = D.TransformedDistribution(D.Normal(0.2, 0.5), [T.ExpTransform()])
print("lognormal agrees:", torch.allclose(ln.log_prob(v), D.LogNormal(0.2, 0.5).log_prob(v)))
gb = D.TransformedDistribution(D.Exponential(1.0), [T.ExpTransform().inv,
                                                    T.AffineTransform(0.5, -2.0)])
print("gumbel agrees:", torch.allclose(gb.log_prob(v), D.Gumbel(0.5, 2.0).log_prob(v), atol=1e-5))
print(f"cdf / icdf of affine-normal {D.TransformedDistribution(D.Normal(0.0, 1.0), T.AffineTransform(1.0, 2.0)).cdf(torch.tensor(3.0)).item():.5f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {acc:.5f}")
