"""Bayesian logistic regression by the Laplace approximation, in the style of the public
laplace-torch-free tutorials: the MAP by L-BFGS with line_search_fn="strong_wolfe" (float64,
closure, state['n_iter'] / func_evals read back), the Hessian of the negative log posterior
from torch.autograd.functional.hessian checked against the closed form X^T diag(p(1-p)) X + I/s^2
and against torch.func.hessian, the posterior as MultivariateNormal(precision_matrix=...) with its
scale_tril, covariance and entropy, torch.linalg.cholesky_ex / cholesky_solve for the posterior
covariance, MacKay's probit-approximated predictive (kappa = 1 / sqrt(1 + pi s^2 / 8)) against
Monte Carlo samples formed from NumPy normals through scale_tril, the Laplace log marginal
likelihood (log det by slogdet) maximized over the prior scale on a grid, then the same
Hessian for a last-layer Laplace on a small MLP through torch.func.functional_call, and
expected calibration error of MAP vs predictive. Data from NumPy. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first nll> <last nll> <best log prior scale>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import MultivariateNormal

rng = np.random.default_rng(53)
N, D = 120, 4
Xn = rng.normal(size=(N, D))
Xn[:, 0] = 1.0  # intercept
w_true = np.array([-0.3, 1.5, -2.0, 0.5])
Yn = (rng.uniform(size=N) < 1 / (1 + np.exp(-Xn @ w_true))).astype(np.float64)
X, Y = torch.from_numpy(Xn), torch.from_numpy(Yn)
Xte = torch.from_numpy(rng.normal(size=(400, D)))
Xte[:, 0] = 1.0
Yte = (torch.from_numpy(rng.uniform(size=400)) < torch.sigmoid(Xte @ torch.from_numpy(w_true))).double()


def neg_log_post(w, prior_scale):
    return F.binary_cross_entropy_with_logits(X @ w, Y, reduction="sum") + 0.5 * (w ** 2).sum() / prior_scale ** 2


def fit(prior_scale):
    w = torch.zeros(D, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=100, line_search_fn="strong_wolfe", tolerance_grad=1e-10, tolerance_change=1e-14)

    def closure():
        opt.zero_grad()
        loss = neg_log_post(w, prior_scale)
        loss.backward()
        return loss

    first = closure().item()
    opt.step(closure)
    st = opt.state[w]
    return w.detach(), first, st["n_iter"], st["func_evals"]


w_map, first, n_iter, n_evals = fit(2.0)
last = neg_log_post(w_map, 2.0).item()
print(f"map {[round(v, 5) for v in w_map.tolist()]} nll {first:.6f} -> {last:.6f} iters {n_iter} evals {n_evals}")
H = torch.autograd.functional.hessian(lambda w: neg_log_post(w, 2.0), w_map)
p = torch.sigmoid(X @ w_map)
H_closed = X.T @ (X * (p * (1 - p))[:, None]) + torch.eye(D, dtype=torch.float64) / 4.0
H_func = torch.func.hessian(lambda w: neg_log_post(w, 2.0))(w_map)
print("hessian == closed form", torch.allclose(H, H_closed), "== func.hessian", torch.allclose(H, H_func))
post = MultivariateNormal(w_map, precision_matrix=H)
L, info = torch.linalg.cholesky_ex(H)
cov = torch.cholesky_solve(torch.eye(D, dtype=torch.float64), L)
print("cholesky info", info.item(), "covariance agrees", torch.allclose(post.covariance_matrix, cov), f"entropy {post.entropy().item():.6f}")
print("posterior std", [round(v, 5) for v in post.stddev.tolist()])

# predictive: probit approximation vs Monte Carlo with NumPy normals
mean_f = Xte @ w_map
var_f = ((Xte @ cov) * Xte).sum(1)
kappa = 1 / torch.sqrt(1 + math.pi * var_f / 8)
p_probit = torch.sigmoid(kappa * mean_f)
eps = torch.from_numpy(rng.normal(size=(4000, D)))
samples = w_map + eps @ post.scale_tril.T
p_mc = torch.sigmoid(Xte @ samples.T).mean(1)
print(f"probit vs mc max diff {(p_probit - p_mc).abs().max().item():.4f} sample cov err {(torch.cov(samples.T) - cov).abs().max().item():.4f}")


def ece(prob, y, bins=10):
    edges = torch.linspace(0, 1, bins + 1)
    b = torch.bucketize(prob, edges[1:-1])
    total = torch.zeros((), dtype=torch.float64)
    for k in range(bins):
        m = b == k
        if m.any():
            total = total + m.double().mean() * (prob[m].mean() - y[m].mean()).abs()
    return total.item()


p_map = torch.sigmoid(mean_f)
print(f"ece map {ece(p_map, Yte):.5f} laplace {ece(p_probit, Yte):.5f} test nll map {F.binary_cross_entropy(p_map, Yte).item():.5f} laplace {F.binary_cross_entropy(p_probit, Yte).item():.5f}")

# evidence over the prior scale
scales = torch.logspace(-1, 1.5, 8).tolist()
evid = []
for s in scales:
    w_s, _, _, _ = fit(s)
    Hs = torch.autograd.functional.hessian(lambda w: neg_log_post(w, s), w_s)
    sign, logdet = torch.linalg.slogdet(Hs)
    log_ev = -neg_log_post(w_s, s) - D * math.log(s) - 0.5 * logdet
    evid.append(log_ev.item())
best = int(torch.tensor(evid).argmax())
print("log evidence", [round(v, 4) for v in evid], "best scale", round(scales[best], 4))

# last-layer Laplace on a small MLP
mlp = nn.Sequential(nn.Linear(D, 8), nn.Tanh(), nn.Linear(8, 1)).double()
with torch.no_grad():
    for prm in mlp.parameters():
        prm.copy_(torch.from_numpy(rng.normal(0, 0.5, size=tuple(prm.shape))))
opt = torch.optim.Adam(mlp.parameters(), lr=0.02)
for it in range(150):
    loss = F.binary_cross_entropy_with_logits(mlp(X).squeeze(1), Y) + 1e-3 * sum((q ** 2).sum() for q in mlp.parameters())
    opt.zero_grad()
    loss.backward()
    opt.step()
params = {k: v.detach() for k, v in mlp.named_parameters()}


def last_layer_loss(w_flat):
    ps = dict(params)
    ps["2.weight"] = w_flat[:8].view(1, 8)
    ps["2.bias"] = w_flat[8:]
    out = torch.func.functional_call(mlp, ps, (X,)).squeeze(1)
    return F.binary_cross_entropy_with_logits(out, Y, reduction="sum") + 0.5 * (w_flat ** 2).sum()


w_last = torch.cat([params["2.weight"].flatten(), params["2.bias"]])
H_last = torch.autograd.functional.hessian(last_layer_loss, w_last)
evals = torch.linalg.eigvalsh(H_last)
print(f"mlp loss {loss.item():.5f} last-layer hessian {tuple(H_last.shape)} min eig {evals.min().item():.5f} max eig {evals.max().item():.4f}")
print(f"RESULT {first:.6f} {last:.6f} {math.log(scales[best]):.6f}")
