"""Statistical dependence and two-sample testing as public PyTorch code computes them: MINE
(mutual information neural estimation) with the Donsker-Varadhan bound, the moving-average
bias correction of its gradient (a detached EMA of the exponential term) and marginal samples by
shuffling with an index permutation, compared with the closed-form mutual information of a
correlated Gaussian; the InfoNCE lower bound with a bilinear critic; HSIC with centred Gram
matrices (H K H by broadcasting means) and a permutation null; the unbiased MMD^2 estimator
with a multi-bandwidth RBF kernel (diagonals removed by masked sums), its permutation test
p-value; kernel density estimation with the leave-one-out log-likelihood over a bandwidth grid
via logsumexp, and Scott's rule. All samples and permutations from NumPy; float64 where the
statistics are compared. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <mine estimate> <true mi>
<mmd p-value>."""

import math

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(1614)


def corr_gauss(n, rho, d=2):
    x = rng.normal(size=(n, d))
    e = rng.normal(size=(n, d))
    y = rho * x + math.sqrt(1 - rho ** 2) * e
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.float32))


rho, D = 0.8, 2
true_mi = -0.5 * D * math.log(1 - rho ** 2)
print(f"true mutual information {true_mi:.4f} nats")


class Critic(nn.Module):
    def __init__(self, d=D, h=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * d, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1))

    def forward(self, x, y):
        return self.net(torch.cat([x, y], -1)).squeeze(-1)


def init(m, scale=1.0):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, scale / math.sqrt(p.shape[-1]), p.shape).astype(np.float32)) if p.dim() > 1 else torch.zeros_like(p))


critic = Critic()
init(critic)
opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
ema, mine_hist = None, []
for step in range(300):
    x, y = corr_gauss(256, rho)
    y_marg = y[torch.from_numpy(rng.permutation(256))]
    t_joint = critic(x, y).mean()
    t_marg = critic(x, y_marg)
    et = torch.exp(t_marg).mean()
    ema = et.detach() if ema is None else 0.99 * ema + 0.01 * et.detach()
    mi_lb = t_joint - torch.log(et)
    # bias-corrected gradient: d/dtheta [t_joint - et / ema]
    loss = -(t_joint - et / ema)
    opt.zero_grad()
    loss.backward()
    opt.step()
    mine_hist.append(mi_lb.item())
    if step % 100 == 0:
        print(f"mine step {step:3d} dv bound {mi_lb.item():.4f}")
mine = float(np.mean(mine_hist[-50:]))
print(f"mine estimate {mine:.4f} (true {true_mi:.4f})")

# InfoNCE with a bilinear critic: I >= log N - L
W = torch.zeros(D, D, requires_grad=True)
opt = torch.optim.Adam([W], lr=0.05)
for step in range(100):
    x, y = corr_gauss(128, rho)
    scores = x @ W @ y.T
    nce = nn.functional.cross_entropy(scores, torch.arange(128))
    opt.zero_grad()
    nce.backward()
    opt.step()
print(f"infonce bound {math.log(128) - nce.item():.4f} critic diagonal {[round(v, 3) for v in torch.diagonal(W.detach()).tolist()]}")


def rbf_gram(a, bw):
    return torch.exp(-torch.cdist(a, a) ** 2 / (2 * bw ** 2))


def median_bw(a):
    d = torch.pdist(a)
    return torch.median(d).item()


def hsic(K, L):
    n = K.shape[0]
    Kc = K - K.mean(0, keepdim=True) - K.mean(1, keepdim=True) + K.mean()
    H = torch.eye(n, dtype=K.dtype) - 1.0 / n
    return (Kc * L).sum() / (n - 1) ** 2, (H @ K @ H * L).sum() / (n - 1) ** 2


x64, y64 = (t.double() for t in corr_gauss(100, 0.5))
K, L = rbf_gram(x64, median_bw(x64)), rbf_gram(y64, median_bw(y64))
h_fast, h_mat = hsic(K, L)
null = [hsic(K, L[p][:, p])[0].item() for p in (torch.from_numpy(rng.permutation(100)) for _ in range(100))]
p_hsic = (1 + sum(v >= h_fast.item() for v in null)) / 101
print(f"hsic {h_fast.item():.6f} via centring matrix {torch.allclose(h_fast, h_mat)} permutation p-value {p_hsic:.4f}")
xi, yi = (t.double() for t in corr_gauss(100, 0.0))
Ki, Li = rbf_gram(xi, median_bw(xi)), rbf_gram(yi, median_bw(yi))
hi = hsic(Ki, Li)[0].item()
null_i = [hsic(Ki, Li[p][:, p])[0].item() for p in (torch.from_numpy(rng.permutation(100)) for _ in range(100))]
print(f"independent hsic {hi:.6f} p-value {(1 + sum(v >= hi for v in null_i)) / 101:.4f}")


def mmd2_unbiased(x, y, bws=(0.5, 1.0, 2.0)):
    z = torch.cat([x, y])
    d2 = torch.cdist(z, z) ** 2
    k = sum(torch.exp(-d2 / (2 * b * b)) for b in bws)
    n, m = x.shape[0], y.shape[0]
    kxx, kyy, kxy = k[:n, :n], k[n:, n:], k[:n, n:]
    off = ~torch.eye(n, dtype=torch.bool)
    offy = ~torch.eye(m, dtype=torch.bool)
    return kxx[off].sum() / (n * (n - 1)) + kyy[offy].sum() / (m * (m - 1)) - 2 * kxy.mean(), k


def mmd_from_k(k, n, perm):
    kp = k[perm][:, perm]
    m = k.shape[0] - n
    off, offy = ~torch.eye(n, dtype=torch.bool), ~torch.eye(m, dtype=torch.bool)
    return kp[:n, :n][off].sum() / (n * (n - 1)) + kp[n:, n:][offy].sum() / (m * (m - 1)) - 2 * kp[:n, n:].mean()


a = torch.from_numpy(rng.normal(0, 1, (60, 2)))
b = torch.from_numpy(rng.normal(0, 1, (60, 2)) * np.array([1.0, 2.0]) + np.array([0.6, 0.0]))
stat, kmat = mmd2_unbiased(a, b)
ident = mmd_from_k(kmat, 60, torch.arange(120))
null_m = [mmd_from_k(kmat, 60, torch.from_numpy(rng.permutation(120))).item() for _ in range(200)]
p_mmd = (1 + sum(v >= stat.item() for v in null_m)) / 201
print(f"mmd^2 {stat.item():.6f} identity permutation agrees {torch.allclose(stat, ident)} p-value {p_mmd:.4f}")
same_stat, _ = mmd2_unbiased(a[:30], a[30:])
print(f"mmd^2 of two halves of one sample {same_stat.item():.6f}")

# KDE: leave-one-out bandwidth selection
s = torch.from_numpy(np.concatenate([rng.normal(-2, 0.5, 150), rng.normal(1.5, 1.0, 100)]))
n = s.shape[0]
diff2 = (s[:, None] - s[None]) ** 2
eye = torch.eye(n, dtype=torch.bool)
scores = []
grid = torch.logspace(-1.5, 0.5, 12, dtype=torch.float64)
for bw in grid:
    logk = (-diff2 / (2 * bw ** 2)).masked_fill(eye, -math.inf)
    loo = torch.logsumexp(logk, 1) - math.log(n - 1) - 0.5 * math.log(2 * math.pi) - torch.log(bw)
    scores.append(loo.mean().item())
best = grid[int(np.argmax(scores))].item()
scott = (s.std() * n ** (-1 / 5)).item()
print(f"kde loo log-likelihoods {[round(v, 3) for v in scores[::3]]} best bandwidth {best:.4f} scott {scott:.4f}")
xq = torch.linspace(-5, 5, 2001, dtype=torch.float64)
dens = torch.exp(-(xq[:, None] - s[None]) ** 2 / (2 * best ** 2)).mean(1) / (best * math.sqrt(2 * math.pi))
print(f"kde integrates to {torch.trapezoid(dens, xq).item():.4f} mode at {xq[dens.argmax()].item():.3f}")
print(f"RESULT {mine:.4f} {true_mi:.4f} {p_mmd:.4f}")
