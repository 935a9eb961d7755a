"""Nonlinear state estimation in PyTorch, in the style of public filtering tutorials and
differentiable-filter repositories: the univariate nonstationary growth model, a bootstrap
particle filter with log-weights normalized by torch.logsumexp, the effective sample size,
systematic and multinomial-free stratified resampling by torch.searchsorted over the cumulative
weights (checked against a NumPy reference), the log marginal likelihood estimate; an unscented
Kalman filter on a 2-D range-bearing tracking problem with Merwe scaled sigma points from
torch.linalg.cholesky, wrapped angle residuals by torch.atan2(sin, cos), the cross-covariance
and Kalman gain by torch.linalg.solve, and a Rauch-Tung-Striebel smoother for the linear
special case checked against a batch least-squares solve of the whole trajectory (a
block-tridiagonal system). Noise from NumPy; float64. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember. Prints RESULT <pf rmse>
<ukf rmse> <smoother error>."""

import math

import numpy as np
import torch

rng = np.random.default_rng(1613)
torch.set_default_dtype(torch.float64)

# nonstationary growth model
T, P = 50, 500


def f(x, k):
    return 0.5 * x + 25 * x / (1 + x ** 2) + 8 * math.cos(1.2 * k)


xs, ys = [], []
x = 0.1
for k in range(T):
    x = f(torch.tensor(x), k).item() + rng.normal(0, math.sqrt(10))
    xs.append(x)
    ys.append(x ** 2 / 20 + rng.normal(0, 1))
xs, ys = torch.tensor(xs), torch.tensor(ys)


def systematic(weights, u):
    n = weights.shape[0]
    positions = (torch.arange(n, dtype=weights.dtype) + u) / n
    cdf = torch.cumsum(weights, 0)
    cdf[-1] = 1.0
    return torch.searchsorted(cdf, positions)


def stratified(weights, us):
    n = weights.shape[0]
    positions = (torch.arange(n, dtype=weights.dtype) + us) / n
    cdf = torch.cumsum(weights, 0)
    cdf[-1] = 1.0
    return torch.searchsorted(cdf, positions, right=True).clamp(max=n - 1)


w_test = torch.tensor([0.1, 0.0, 0.4, 0.2, 0.3])
u = 0.37
idx = systematic(w_test, u)
ref = np.searchsorted(np.cumsum(w_test.numpy()), (np.arange(5) + u) / 5)
print(f"systematic resampling {idx.tolist()} numpy {ref.tolist()} zero-weight particle never drawn {bool((idx != 1).all())}")
print(f"stratified resampling {stratified(w_test, torch.tensor([0.0, 0.5, 0.99, 0.2, 0.7])).tolist()}")

particles = torch.from_numpy(rng.normal(0, 2, P))
logw = torch.full((P,), -math.log(P))
est, loglik, ess_hist, resamples = [], 0.0, [], 0
for k in range(T):
    particles = f(particles, k) + torch.from_numpy(rng.normal(0, math.sqrt(10), P))
    loglike = -0.5 * (ys[k] - particles ** 2 / 20) ** 2 - 0.5 * math.log(2 * math.pi)
    logw = logw + loglike
    lse = torch.logsumexp(logw, 0)
    loglik += lse.item()
    logw = logw - lse
    w = logw.exp()
    est.append((w * particles).sum().item())
    ess = 1.0 / (w ** 2).sum()
    ess_hist.append(ess.item())
    if ess < P / 2:
        particles = particles[systematic(w, rng.random())]
        logw = torch.full((P,), -math.log(P))
        resamples += 1
pf_rmse = torch.sqrt(((torch.tensor(est) - xs) ** 2).mean()).item()
print(f"particle filter rmse {pf_rmse:.4f} log marginal likelihood {loglik:.4f} resampled {resamples} times min ess {min(ess_hist):.2f}")
# the model is bimodal in the sign of x: compare magnitudes too
print(f"|x| rmse {torch.sqrt(((torch.tensor(est).abs() - xs.abs()) ** 2).mean()).item():.4f}")

# UKF: constant-velocity target observed by range and bearing
dt = 1.0
F_cv = torch.tensor([[1, 0, dt, 0], [0, 1, 0, dt], [0, 0, 1, 0], [0, 0, 0, 1.0]])
Q = 0.01 * torch.eye(4)
R = torch.diag(torch.tensor([0.25, 0.0004]))


def h(x):
    return torch.stack([torch.sqrt(x[..., 0] ** 2 + x[..., 1] ** 2), torch.atan2(x[..., 1], x[..., 0])], -1)


def sigma_points(m, Pm, alpha=0.5, beta=2.0, kappa=0.0):
    n = m.shape[0]
    lam = alpha ** 2 * (n + kappa) - n
    L = torch.linalg.cholesky((n + lam) * Pm)
    pts = torch.cat([m[None], m[None] + L.T, m[None] - L.T])
    wm = torch.full((2 * n + 1,), 1 / (2 * (n + lam)))
    wc = wm.clone()
    wm[0] = lam / (n + lam)
    wc[0] = lam / (n + lam) + 1 - alpha ** 2 + beta
    return pts, wm, wc


def wrap(a):
    return torch.atan2(torch.sin(a), torch.cos(a))


pts, wm, wc = sigma_points(torch.tensor([1.0, 2.0, 0.5, -0.5]), torch.diag(torch.tensor([1.0, 2.0, 0.5, 0.1])))
mean_back = (wm[:, None] * pts).sum(0)
cov_back = ((pts - mean_back).T * wc) @ (pts - mean_back)
print(f"sigma points {tuple(pts.shape)} recover mean {torch.allclose(mean_back, torch.tensor([1.0, 2.0, 0.5, -0.5]))} covariance {torch.allclose(cov_back, torch.diag(torch.tensor([1.0, 2.0, 0.5, 0.1])))}")
print(f"wrapped residual of 3.1 - (-3.1) {wrap(torch.tensor(3.1 - (-3.1))).item():.6f}")

truth = [torch.tensor([10.0, -5.0, -0.3, 0.6])]
for k in range(39):
    truth.append(F_cv @ truth[-1] + torch.from_numpy(rng.multivariate_normal(np.zeros(4), Q.numpy())))
truth = torch.stack(truth)
obs = h(truth) + torch.from_numpy(rng.normal(size=(40, 2))) * torch.sqrt(torch.diag(R))
m, Pm = torch.tensor([9.0, -4.0, 0.0, 0.0]), torch.diag(torch.tensor([4.0, 4.0, 1.0, 1.0]))
ukf_est = []
for k in range(40):
    if k:
        m, Pm = F_cv @ m, F_cv @ Pm @ F_cv.T + Q
    pts, wm, wc = sigma_points(m, Pm)
    Z = h(pts)
    z_mean = torch.stack([(wm * Z[:, 0]).sum(), torch.atan2((wm * torch.sin(Z[:, 1])).sum(), (wm * torch.cos(Z[:, 1])).sum())])
    dz = Z - z_mean
    dz[:, 1] = wrap(dz[:, 1])
    dx = pts - m
    S = (dz.T * wc) @ dz + R
    C = (dx.T * wc) @ dz
    K = torch.linalg.solve(S, C.T).T
    innov = obs[k] - z_mean
    innov[1] = wrap(innov[1])
    m = m + K @ innov
    Pm = Pm - K @ S @ K.T
    Pm = 0.5 * (Pm + Pm.T)
    ukf_est.append(m)
ukf_est = torch.stack(ukf_est)
ukf_rmse = torch.sqrt(((ukf_est[:, :2] - truth[:, :2]) ** 2).sum(1).mean()).item()
raw = torch.stack([obs[:, 0] * torch.cos(obs[:, 1]), obs[:, 0] * torch.sin(obs[:, 1])], 1)
raw_rmse = torch.sqrt(((raw - truth[:, :2]) ** 2).sum(1).mean()).item()
print(f"ukf position rmse {ukf_rmse:.4f} raw measurement rmse {raw_rmse:.4f} covariance positive definite {bool((torch.linalg.eigvalsh(Pm) > 0).all())}")

# linear-Gaussian: Kalman filter + RTS smoother == batch MAP over the whole trajectory
A, Hm, q, r, n = 0.9, 1.0, 0.5, 1.0, 30
xt = [rng.normal()]
for k in range(n - 1):
    xt.append(A * xt[-1] + rng.normal(0, math.sqrt(q)))
yv = torch.tensor(xt) + torch.from_numpy(rng.normal(0, math.sqrt(r), n))
m0, p0 = 0.0, 1.0
mf, pf, mp, pp = [], [], [], []
m_, p_ = m0, p0
for k in range(n):
    if k:
        m_, p_ = A * m_, A * A * p_ + q
    mp.append(m_)
    pp.append(p_)
    kg = p_ * Hm / (Hm * p_ * Hm + r)
    m_ = m_ + kg * (yv[k].item() - Hm * m_)
    p_ = (1 - kg * Hm) * p_
    mf.append(m_)
    pf.append(p_)
ms = mf[:]
for k in range(n - 2, -1, -1):
    g = pf[k] * A / pp[k + 1]
    ms[k] = mf[k] + g * (ms[k + 1] - mp[k + 1])
# batch: minimize x0^2/p0 + sum (x_k - A x_{k-1})^2/q + sum (y_k - x_k)^2/r
Hb = torch.zeros(n, n)
Hb += torch.eye(n) / r
Hb[0, 0] += 1 / p0
idx = torch.arange(1, n)
Hb[idx, idx] += 1 / q
Hb[idx - 1, idx - 1] += A * A / q
Hb[idx, idx - 1] -= A / q
Hb[idx - 1, idx] -= A / q
batch = torch.linalg.solve(Hb, yv / r)
smooth_err = (torch.tensor(ms) - batch).abs().max().item()
print(f"rts smoother == batch solve: {smooth_err < 1e-10} tridiagonal {bool((torch.triu(Hb, 2) == 0).all())} filter mse {((torch.tensor(mf) - torch.tensor(xt)) ** 2).mean().item():.4f} smoother mse {((torch.tensor(ms) - torch.tensor(xt)) ** 2).mean().item():.4f}")
print(f"RESULT {pf_rmse:.4f} {ukf_rmse:.4f} {float(smooth_err < 1e-10):.1f}")
