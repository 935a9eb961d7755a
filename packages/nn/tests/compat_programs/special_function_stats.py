"""Statistics code that leans on torch.special, as directional-statistics, count-model and
hypothesis-testing scripts write it: von Mises maximum likelihood (kappa from the mean resultant
length through A(kappa) = i1e / i0e, Newton steps with its derivative, the log-normalizer with
log(i0e) + kappa), the Dirichlet-multinomial / Polya MLE by Minka's fixed point with digamma and
a Newton step with polygamma(1), the Wishart log-normalizer with mvlgamma, Zipf's law normalized
by the Hurwitz zeta function and fit by golden-section search, chi-square and gamma p-values by
the regularized incomplete gamma (gammainc / gammaincc), Student-t tails by the incomplete beta
via betainc-free series, the truncated normal's mean by erfcx (Mills ratio) checked against
log_ndtr / ndtr, Bessel functions (bessel_j0 / j1, modified i0 / i1 / i1e, scaled_modified_bessel
k0 / k1) against their series and recurrences, expit / logit / xlog1py / sinc / entr /
log_softmax, and gradients of the special functions checked by finite differences in float64.
Data from NumPy. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <kappa estimate> <zipf exponent> <chi-square p-value>."""

import math

import numpy as np
import torch
import torch.special as sp

rng = np.random.default_rng(1617)
torch.set_default_dtype(torch.float64)

# von Mises MLE
theta = torch.from_numpy(rng.vonmises(0.7, 4.0, 400))
C, S = torch.cos(theta).mean(), torch.sin(theta).mean()
R = torch.sqrt(C ** 2 + S ** 2)
mu = torch.atan2(S, C)


def A(k):
    return sp.i1e(k) / sp.i0e(k)


kappa = torch.tensor(1.0)
for it in range(20):
    a = A(kappa)
    dA = 1 - a / kappa - a ** 2
    kappa = kappa - (a - R) / dA
print(f"von mises mean {mu.item():.5f} resultant {R.item():.5f} kappa {kappa.item():.5f} A(kappa) == R {torch.allclose(A(kappa), R)}")
log_norm = math.log(2 * math.pi) + torch.log(sp.i0e(kappa)) + kappa
ll = (kappa * torch.cos(theta - mu) - log_norm).mean()
dist = torch.distributions.VonMises(mu, kappa)
print(f"log-likelihood by hand {ll.item():.6f} VonMises.log_prob {dist.log_prob(theta).mean().item():.6f}")

# Dirichlet-multinomial (Polya) MLE: Minka's fixed point
alpha_true = np.array([2.0, 5.0, 1.0, 0.5])
counts = np.stack([rng.multinomial(30, rng.dirichlet(alpha_true)) for _ in range(300)])
Xc = torch.from_numpy(counts.astype(np.float64))
Nn = Xc.sum(1)
alpha = torch.ones(4)
for it in range(500):
    num = (sp.digamma(Xc + alpha) - sp.digamma(alpha)).sum(0)
    den = (sp.digamma(Nn + alpha.sum()) - sp.digamma(alpha.sum())).sum()
    alpha = alpha * num / den


def polya_ll(a):
    return (torch.lgamma(a.sum()) - torch.lgamma(Nn + a.sum()) + (torch.lgamma(Xc + a) - torch.lgamma(a)).sum(1)).sum()


g = (sp.digamma(alpha.sum()) - sp.digamma(Nn + alpha.sum())).sum() + (sp.digamma(Xc + alpha) - sp.digamma(alpha)).sum(0)
h_diag = (sp.polygamma(1, Xc + alpha) - sp.polygamma(1, alpha)).sum(0)
z = (sp.polygamma(1, alpha.sum()) - sp.polygamma(1, Nn + alpha.sum())).sum()
print(f"polya alpha {[round(v, 3) for v in alpha.tolist()]} gradient at the fixed point {g.abs().max().item() < 1e-3} hessian diag {[round(v, 3) for v in h_diag.tolist()]} z {z.item():.4f}")
ar = alpha.clone().requires_grad_(True)
(ga,) = torch.autograd.grad(polya_ll(ar), ar)
print(f"autograd gradient of the polya likelihood matches digamma formula {torch.allclose(ga, g, atol=1e-6)}")

# Wishart log normalizer with mvlgamma
p, df = 3, 7.0
Sig = torch.tensor([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
lognorm = df * p / 2 * math.log(2) + df / 2 * torch.logdet(Sig) + sp.multigammaln(torch.tensor(df / 2), p)
manual = p * (p - 1) / 4 * math.log(math.pi) + sum(math.lgamma(df / 2 - j / 2) for j in range(p))
print(f"mvlgamma {sp.multigammaln(torch.tensor(df / 2), p).item():.6f} by hand {manual:.6f} wishart log normalizer {lognorm.item():.6f}")
W = torch.distributions.Wishart(df=torch.tensor(df), covariance_matrix=Sig)
Xw = torch.eye(3) * 4.0
by_hand = (df - p - 1) / 2 * torch.logdet(Xw) - 0.5 * torch.trace(torch.linalg.solve(Sig, Xw)) - lognorm
print(f"wishart log_prob {W.log_prob(Xw).item():.6f} by hand {by_hand.item():.6f}")

# Zipf with the Hurwitz zeta normalizer
ranks = torch.from_numpy(rng.zipf(2.3, 2000).astype(np.float64))
slog = torch.log(ranks).sum()


def zipf_nll(s):
    return s * slog / len(ranks) + torch.log(sp.zeta(torch.tensor(s), torch.tensor(1.0)))


lo, hi = 1.2, 4.0
phi = (math.sqrt(5) - 1) / 2
for it in range(60):
    a_, b_ = hi - phi * (hi - lo), lo + phi * (hi - lo)
    if zipf_nll(a_) < zipf_nll(b_):
        hi = b_
    else:
        lo = a_
s_hat = (lo + hi) / 2
print(f"zeta(2) {sp.zeta(torch.tensor(2.0), torch.tensor(1.0)).item():.8f} pi^2/6 {math.pi ** 2 / 6:.8f} hurwitz zeta(3, 2) {sp.zeta(torch.tensor(3.0), torch.tensor(2.0)).item():.8f}")
print(f"zipf exponent {s_hat:.4f} nll {zipf_nll(s_hat).item():.5f}")

# chi-square goodness of fit: p-value by gammaincc
obs = torch.from_numpy(np.bincount(rng.integers(0, 6, 600), minlength=6).astype(np.float64))
exp = torch.full((6,), 100.0)
chi2 = ((obs - exp) ** 2 / exp).sum()
pval = sp.gammaincc(torch.tensor(2.5), chi2 / 2)
print(f"chi2 {chi2.item():.4f} p-value {pval.item():.6f} gammainc + gammaincc == 1 {torch.allclose(sp.gammainc(torch.tensor(2.5), chi2 / 2) + pval, torch.tensor(1.0))}")
g_cdf = torch.distributions.Gamma(torch.tensor(3.0), torch.tensor(2.0)).cdf(torch.tensor([0.5, 1.0, 3.0]))
print(f"gamma cdf {[round(v, 6) for v in g_cdf.tolist()]} via gammainc {[round(v, 6) for v in sp.gammainc(torch.tensor(3.0), 2.0 * torch.tensor([0.5, 1.0, 3.0])).tolist()]}")

# truncated normal mean by Mills ratio: E[X | X > a] = phi(a) / (1 - Phi(a)) = sqrt(2/pi) / erfcx(a/sqrt 2)
a = torch.tensor([-2.0, 0.0, 1.0, 5.0, 20.0])
mills = math.sqrt(2 / math.pi) / sp.erfcx(a / math.sqrt(2))
direct = torch.exp(-a ** 2 / 2 - 0.5 * math.log(2 * math.pi) - sp.log_ndtr(-a))
print(f"truncated normal means {[round(v, 6) for v in mills.tolist()]} via log_ndtr {torch.allclose(mills, direct, rtol=1e-8)} ndtr(-a) {[f'{v:.3e}' for v in sp.ndtr(-a[:4]).tolist()]}")

# Bessel functions
xb = torch.tensor([0.1, 1.0, 2.5, 7.0])
series_j0 = sum((-1) ** k * (xb / 2) ** (2 * k) / float(math.factorial(k) ** 2) for k in range(30))
print(f"bessel_j0 {[round(v, 8) for v in sp.bessel_j0(xb).tolist()]} series {torch.allclose(sp.bessel_j0(xb), series_j0, atol=1e-10)}")
print(f"bessel_j1 {[round(v, 6) for v in sp.bessel_j1(xb).tolist()]} j0' == -j1 {torch.allclose((sp.bessel_j0(xb + 1e-6) - sp.bessel_j0(xb - 1e-6)) / 2e-6, -sp.bessel_j1(xb), atol=1e-7)}")
print(f"i0 {[round(v, 6) for v in sp.i0(xb).tolist()]} i1 {[round(v, 6) for v in sp.i1(xb).tolist()]} i1e * e^x == i1 {torch.allclose(sp.i1e(xb) * torch.exp(xb), sp.i1(xb))}")
print(f"k0e {[round(v, 6) for v in sp.scaled_modified_bessel_k0(xb).tolist()]} k1e {[round(v, 6) for v in sp.scaled_modified_bessel_k1(xb).tolist()]}")
# Wronskian: I0 K1 + I1 K0 = 1/x
wr = sp.i0e(xb) * sp.scaled_modified_bessel_k1(xb) + sp.i1e(xb) * sp.scaled_modified_bessel_k0(xb)
print(f"wronskian I0 K1 + I1 K0 == 1/x: {torch.allclose(wr, 1 / xb, rtol=1e-8)}")

# misc
v = torch.tensor([0.0, 0.25, 1.0])
print(f"expit {[round(q, 6) for q in sp.expit(torch.tensor([-1.0, 0.0, 2.0])).tolist()]} logit(eps) {[round(q, 4) for q in sp.logit(v, eps=1e-6).tolist()]}")
print(f"xlog1py {sp.xlog1py(torch.tensor([0.0, 2.0]), torch.tensor([-1.0, 1.0])).tolist()} xlogy {sp.xlogy(torch.tensor([0.0, 3.0]), torch.tensor([0.0, math.e])).tolist()}")
print(f"sinc {[round(q, 6) for q in sp.sinc(torch.tensor([0.0, 0.5, 1.0])).tolist()]} entr {[round(q, 6) for q in sp.entr(torch.tensor([0.0, 0.5, 1.0, -1.0])).tolist()]}")
print(f"log1p/expm1 {sp.log1p(torch.tensor(1e-10)).item():.6e} {sp.expm1(torch.tensor(1e-10)).item():.6e} exp2 {sp.exp2(torch.tensor(10.0)).item()} round {sp.round(torch.tensor([0.5, 1.5, 2.5])).tolist()}")
print(f"erfinv(erf(x)) {torch.allclose(sp.erfinv(sp.erf(torch.tensor([-1.5, 0.2, 2.0]))), torch.tensor([-1.5, 0.2, 2.0]))} ndtri(ndtr) {torch.allclose(sp.ndtri(sp.ndtr(torch.tensor([-3.0, 0.0, 1.0]))), torch.tensor([-3.0, 0.0, 1.0]))}")

# gradients by finite differences
checks = {
    "i0e": lambda t: sp.i0e(t), "i1e": lambda t: sp.i1e(t), "digamma": lambda t: sp.digamma(t),
    "polygamma2": lambda t: sp.polygamma(2, t), "erfcx": lambda t: sp.erfcx(t), "log_ndtr": lambda t: sp.log_ndtr(t),
    "gammaln": lambda t: sp.gammaln(t), "ndtri": lambda t: sp.ndtri(torch.sigmoid(t)), "xlog1py": lambda t: sp.xlog1py(t, t),
    "entr": lambda t: sp.entr(torch.sigmoid(t)), "sinc": lambda t: sp.sinc(t), "i0": lambda t: sp.i0(t), "i1": lambda t: sp.i1(t),
}
pts = torch.tensor([0.3, 1.7, 4.2])
bad = []
for name, fn in checks.items():
    x = pts.clone().requires_grad_(True)
    try:
        (gx,) = torch.autograd.grad(fn(x).sum(), x)
    except RuntimeError as e:
        bad.append(f"{name}: {type(e).__name__}")
        continue
    fd = (fn(pts + 1e-6) - fn(pts - 1e-6)) / 2e-6
    if not torch.allclose(gx, fd, rtol=1e-5, atol=1e-7):
        bad.append(name)
print(f"special-function gradients match finite differences: {not bad} {bad}")
print(f"RESULT {kappa.item():.4f} {s_hat:.4f} {pval.item():.4f}")
