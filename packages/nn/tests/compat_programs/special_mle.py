"""Maximum-likelihood fits written with torch.special, in the style of the public statistics
notebooks that fit distributions by hand: a Dirichlet fitted to proportions by Minka's
fixed-point iteration (digamma, and its inverse by Newton steps with polygamma(1, .)), a Gamma
shape by Newton on log(a) - digamma(a), a von Mises concentration from the Bessel ratio
i1e / i0e solved by bisection, chi-square goodness-of-fit p-values from gammaincc (and
gammainc, checked against Chi2.cdf), a probit link through ndtri / erfinv / ndtr, the Wishart
normalizer with multigammaln, Shannon entropies with special.entr, Zipf's normalizer with
zeta, xlogy / xlog1py in a Bernoulli likelihood, log_ndtr tails, sinc, and the special
log_softmax / logsumexp. Everything is float64 and deterministic (data from NumPy), so torch and
ember print the same numbers. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first nll> <last nll> <alpha0>."""

import math

import numpy as np
import torch
from torch.distributions import Chi2, Dirichlet, Gamma, VonMises

torch.set_default_dtype(torch.float64)
sp = torch.special
rng = np.random.default_rng(7)

# ---- Dirichlet by Minka's fixed point ----
alpha_true = np.array([2.0, 5.0, 1.5, 0.7])
P = torch.from_numpy(rng.dirichlet(alpha_true, size=400))
mean_log_p = P.log().mean(0)


def inv_digamma(y, iters=5):
    x = torch.where(y >= -2.22, y.exp() + 0.5, -1.0 / (y - sp.digamma(torch.ones(()))))
    for _ in range(iters):
        x = x - (sp.digamma(x) - y) / sp.polygamma(1, x)
    return x


def dirichlet_nll(a):
    return -Dirichlet(a).log_prob(P).mean()


alpha = torch.ones(4)
nlls = [dirichlet_nll(alpha).item()]
for it in range(30):
    alpha = inv_digamma(sp.digamma(alpha.sum()) + mean_log_p)
    nlls.append(dirichlet_nll(alpha).item())
print("dirichlet alpha", [round(a, 3) for a in alpha.tolist()], "nll", round(nlls[-1], 5))
print("nll decreasing:", all(b <= a + 1e-12 for a, b in zip(nlls, nlls[1:])))
print("inv_digamma check", round((sp.digamma(inv_digamma(torch.tensor([-3.0, 0.0, 2.0])))
                                  - torch.tensor([-3.0, 0.0, 2.0])).abs().max().item(), 12))

# ---- Gamma shape by Newton ----
g = torch.from_numpy(rng.gamma(3.0, 2.0, size=500))
s = math.log(g.mean()) - g.log().mean()
a = torch.tensor((3 - s + math.sqrt((s - 3) ** 2 + 24 * s)) / (12 * s))
for _ in range(6):
    a = a - (a.log() - sp.digamma(a) - s) / (1 / a - sp.polygamma(1, a))
rate = a / g.mean()
print(f"gamma shape {a.item():.4f} rate {rate.item():.4f} "
      f"loglik {Gamma(a, rate).log_prob(g).sum().item():.3f}")

# ---- von Mises concentration: A(k) = i1(k) / i0(k) = mean resultant length ----
theta = torch.from_numpy(rng.vonmises(0.5, 4.0, size=300))
R = torch.sqrt(theta.cos().mean() ** 2 + theta.sin().mean() ** 2)
lo, hi = torch.tensor(1e-6), torch.tensor(100.0)
for _ in range(60):
    mid = (lo + hi) / 2
    if (sp.i1e(mid) / sp.i0e(mid)) < R:
        lo = mid
    else:
        hi = mid
mu = torch.atan2(theta.sin().mean(), theta.cos().mean())
print(f"von mises mu {mu.item():.4f} kappa {lo.item():.4f} "
      f"nll {-VonMises(mu, lo).log_prob(theta).mean().item():.5f}")
print("i0 vs i0e", torch.allclose(sp.i0(mid) * torch.exp(-mid), sp.i0e(mid)),
      "i1", round(sp.i1(torch.tensor(1.5)).item(), 8))

# ---- chi-square goodness of fit ----
counts = torch.from_numpy(np.bincount(rng.integers(0, 6, size=600), minlength=6)).double()
expected = torch.full((6,), 100.0)
stat = ((counts - expected) ** 2 / expected).sum()
p = sp.gammaincc(torch.tensor(2.5), stat / 2)
print(f"chi2 stat {stat.item():.3f} p {p.item():.5f} cdf agrees:",
      torch.allclose(1 - p, Chi2(torch.tensor(5.0)).cdf(stat)),
      torch.allclose(sp.gammainc(torch.tensor(2.5), stat / 2), 1 - p))

# ---- probit regression by Newton-free gradient descent ----
X = torch.from_numpy(rng.normal(size=(300, 2)))
w_true = torch.tensor([1.5, -1.0])
u = torch.from_numpy(rng.uniform(size=300))
y = (u < sp.ndtr(X @ w_true)).double()
w = torch.zeros(2, requires_grad=True)
opt = torch.optim.LBFGS([w], lr=1, max_iter=50, line_search_fn="strong_wolfe")


def closure():
    opt.zero_grad()
    z = X @ w
    nll = -(y * sp.log_ndtr(z) + (1 - y) * sp.log_ndtr(-z)).mean()
    nll.backward()
    return nll


first = closure().item()
opt.step(closure)
last = closure().item()
print("probit w", [round(v, 4) for v in w.tolist()], f"nll {first:.5f} -> {last:.5f}")
q = torch.tensor([0.025, 0.5, 0.975])
print("ndtri", [round(v, 6) for v in sp.ndtri(q).tolist()], "erfinv form:",
      torch.allclose(sp.ndtri(q), math.sqrt(2) * torch.erfinv(2 * q - 1)),
      "logit/expit", torch.allclose(sp.expit(sp.logit(q)), q))

# ---- assorted normalizers ----
print("wishart normalizer", round(sp.multigammaln(torch.tensor(3.5), 3).item(), 8))
print("zipf normalizer", round(sp.zeta(torch.tensor(2.5), torch.tensor(1.0)).item(), 8),
      "hurwitz", round(sp.zeta(torch.tensor(3.0), torch.tensor(2.0)).item(), 8))
probs = torch.tensor([[0.5, 0.25, 0.25, 0.0], [0.1, 0.2, 0.3, 0.4]])
print("entropy (nats)", [round(v, 6) for v in sp.entr(probs).sum(1).tolist()])
b = torch.tensor([0.0, 1.0, 1.0])
q = torch.tensor([0.0, 0.3, 1.0])
print("bernoulli loglik xlogy", (sp.xlogy(b, q) + sp.xlogy(1 - b, 1 - q)).tolist(),
      "xlog1py", sp.xlog1py(torch.tensor([0.0, 2.0]), torch.tensor([-1.0, 0.5])).tolist())
print("log_ndtr tail", round(sp.log_ndtr(torch.tensor(-20.0)).item(), 6),
      "erfcx", round(sp.erfcx(torch.tensor(10.0)).item(), 8),
      "sinc", [round(v, 6) for v in sp.sinc(torch.tensor([0.0, 0.5, 1.0])).tolist()])
logits = torch.tensor([[1.0, 2.0, 3.0]])
print("special log_softmax", torch.allclose(sp.log_softmax(logits, 1),
                                            logits - sp.logsumexp(logits, 1, keepdim=True)),
      "softmax dtype", sp.softmax(logits, 1, dtype=torch.float32).dtype)
print(f"RESULT {nlls[0]:.5f} {nlls[-1]:.5f} {alpha.sum().item():.4f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
