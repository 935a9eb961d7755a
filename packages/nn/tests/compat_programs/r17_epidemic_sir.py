"""Epidemic modelling in PyTorch as computational-epidemiology notebooks write it: an SEIR model
integrated by a hand-written RK4 step (torch.stack of derivatives), the final-size relation
solved by Newton's method with autograd derivatives, R0 from the next-generation matrix
(torch.linalg.eigvals, the spectral radius of a complex-valued result), a multi-group
contact-matrix model, parameter fitting of beta and gamma to Poisson-noised daily case counts
by maximizing torch.distributions.Poisson log-likelihood with Adam through the unrolled
solver, a Laplace approximation of the posterior from torch.autograd.functional.hessian,
a stochastic chain-binomial simulation driven by NumPy uniforms through Binomial.icdf-free
inverse CDF (torch.special.betainc-free: cumulative sums of Binomial.log_prob), and the
effective reproduction number over time. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <final size> <beta
hat> <gamma hat>."""

import math

import numpy as np
import torch
from torch.distributions import Binomial, Poisson

torch.set_default_dtype(torch.float64)


def seir_rhs(y, beta, sigma, gamma):
    S, E, Inf, R = y.unbind(-1)
    N = y.sum(-1)
    inf = beta * S * Inf / N
    return torch.stack([-inf, inf - sigma * E, sigma * E - gamma * Inf, gamma * Inf], -1)


def rk4(f, y, dt, steps, *args):
    out = [y]
    for _ in range(steps):
        k1 = f(y, *args)
        k2 = f(y + dt / 2 * k1, *args)
        k3 = f(y + dt / 2 * k2, *args)
        k4 = f(y + dt * k3, *args)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(y)
    return torch.stack(out)


y0 = torch.tensor([9990.0, 0.0, 10.0, 0.0])
traj = rk4(seir_rhs, y0, 0.5, 400, torch.tensor(0.5), torch.tensor(0.2), torch.tensor(0.2))
print(f"population conserved {torch.allclose(traj.sum(1), torch.full((401,), 10000.0))} peak infected {traj[:, 2].max().item():.3f} at day {traj[:, 2].argmax().item() * 0.5:.2f}")
final = traj[-1, 3].item() / 10000

# final size: z = 1 - exp(-R0 z)
R0 = 2.5
zf = torch.tensor(0.8, requires_grad=True)
for it in range(20):
    g = zf - (1 - torch.exp(-R0 * zf))
    dg, = torch.autograd.grad(g, zf)
    zf = (zf - g / dg).detach().requires_grad_(True)
print(f"final size newton {zf.item():.8f} simulated {final:.6f} (S0/N < 1 and seeded) close {abs(zf.item() - final) < 0.01}")

# next-generation matrix for a 3-group model
contacts = torch.tensor([[8.0, 3.0, 1.0], [3.0, 6.0, 2.0], [1.0, 2.0, 4.0]])
pop = torch.tensor([0.3, 0.5, 0.2])
susc = torch.tensor([1.0, 0.8, 1.2])
K = 0.05 * susc[:, None] * contacts * pop[:, None] / pop[None, :] * pop[None, :] / 0.2
ev = torch.linalg.eigvals(K)
r0_groups = ev.abs().max().item()
print(f"eigvals dtype {ev.dtype} R0 (spectral radius) {r0_groups:.6f} power iteration {(lambda v: [v := K @ v / (K @ v).norm() for _ in range(200)][-1])(torch.ones(3)) @ K @ (lambda v: [v := K @ v / (K @ v).norm() for _ in range(200)][-1])(torch.ones(3)):.6f}")


def sir_groups(y, beta_m, gamma):
    S, Inf, R = y[:3], y[3:6], y[6:]
    lam = beta_m @ (Inf / (S + Inf + R))
    return torch.cat([-S * lam, S * lam - gamma * Inf, gamma * Inf])


yg = torch.cat([pop * 1e4 - torch.tensor([1.0, 1.0, 1.0]), torch.ones(3), torch.zeros(3)])
tg = rk4(sir_groups, yg, 0.5, 300, 0.05 * susc[:, None] * contacts, 0.2)
attack = tg[-1, 6:] / (pop * 1e4)
print(f"group attack rates {[round(v, 4) for v in attack.tolist()]} highest in the most susceptible {attack.argmax().item() == 2}")

# fit beta, gamma to noisy daily incidence
rng = np.random.default_rng(1713)
days = 80
true = rk4(seir_rhs, y0, 1.0, days, torch.tensor(0.45), torch.tensor(0.2), torch.tensor(0.15))
incidence = -(true[1:, 0] - true[:-1, 0])
cases = torch.from_numpy(rng.poisson(incidence.numpy()).astype(np.float64))
print(f"observed cases total {int(cases.sum().item())} peak day {cases.argmax().item()}")
log_params = torch.tensor([math.log(0.3), math.log(0.1)], requires_grad=True)


def nll(lp):
    beta, gamma = lp.exp()
    tr = rk4(seir_rhs, y0, 1.0, days, beta, torch.tensor(0.2), gamma)
    inc = (tr[:-1, 0] - tr[1:, 0]).clamp(min=1e-6)
    return -Poisson(inc).log_prob(cases).sum()


opt = torch.optim.Adam([log_params], lr=0.08)
for it in range(90):
    loss = nll(log_params)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if it % 30 == 0:
        print(f"fit it {it} nll {loss.item():.4f} beta {log_params[0].exp().item():.4f} gamma {log_params[1].exp().item():.4f}")
beta_hat, gamma_hat = log_params.detach().exp().tolist()
Hm = torch.autograd.functional.hessian(nll, log_params.detach())
cov = torch.linalg.inv(Hm)
sd = cov.diagonal().sqrt()
print(f"laplace sd of log beta {sd[0].item():.5f} log gamma {sd[1].item():.5f} correlation {(cov[0, 1] / (sd[0] * sd[1])).item():.4f}")

# chain binomial: S -> I with prob 1 - exp(-beta I / N), I -> R with prob 1 - exp(-gamma)
u = torch.from_numpy(rng.uniform(size=(60, 2)))


def binom_draw(n, p, uu):
    k = torch.arange(0, int(n) + 1, dtype=torch.float64)
    cdf = Binomial(total_count=n, probs=p).log_prob(k).exp().cumsum(0)
    return torch.searchsorted(cdf, uu[None]).clamp(max=int(n)).item()


S_, I_, R_ = 990.0, 10.0, 0.0
hist = []
for t in range(60):
    p_inf = 1 - math.exp(-0.4 * I_ / 1000)
    new_i = binom_draw(S_, torch.tensor(p_inf), u[t, 0]) if S_ > 0 else 0
    new_r = binom_draw(I_, torch.tensor(1 - math.exp(-0.15)), u[t, 1]) if I_ > 0 else 0
    S_, I_, R_ = S_ - new_i, I_ + new_i - new_r, R_ + new_r
    hist.append((S_, I_, R_))
H_ = torch.tensor(hist)
print(f"chain binomial final S {int(H_[-1, 0])} I {int(H_[-1, 1])} R {int(H_[-1, 2])} peak I {int(H_[:, 1].max())}")
rt = 0.45 / 0.15 * true[:, 0] / 10000
print(f"R_t drops below one on day {int((rt < 1).nonzero()[0].item())} (herd immunity threshold {1 - 0.15 / 0.45:.4f})")
print(f"RESULT {final:.6f} {beta_hat:.4f} {gamma_hat:.4f}")
