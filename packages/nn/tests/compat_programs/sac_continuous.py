"""Soft actor-critic in the style of the public SAC / CleanRL code on a tiny continuous control
task written in torch (a 1-D point mass pushed toward the origin, batched over environments): a
tanh-squashed Gaussian policy as TransformedDistribution(Normal, [TanhTransform(cache_size=1),
AffineTransform]) with rsample and log_prob (checked against the manual
log N - log(1 - tanh^2 + eps) correction), twin Q networks with clipped double-Q targets,
Polyak averaging of target networks with torch._foreach_mul_ / _foreach_add_ (checked
against lerp_), automatic entropy tuning of log_alpha toward a target entropy, a ring replay
buffer of preallocated tensors filled by index_copy_, deterministic evaluation with the mean
through the transforms, and torch.nn.utils.clip_grad_norm_ on the actor. Randomness from a
seeded torch.Generator is avoided: noise and sampling come from NumPy. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first return> <last return> <final alpha>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

rng = np.random.default_rng(134)
E, OBS, ACT, HOR = 8, 2, 1, 20
MAX_A = 2.0


def env_reset():
    return torch.from_numpy(rng.uniform(-1, 1, size=(E, OBS)).astype(np.float32))


def env_step(s, a):
    pos, vel = s[:, 0], s[:, 1]
    vel = 0.9 * vel + 0.1 * a[:, 0]
    pos = (pos + 0.1 * vel).clamp(-2, 2)
    r = -(pos.pow(2) + 0.1 * vel.pow(2) + 0.01 * a[:, 0].pow(2))
    return torch.stack([pos, vel], 1), r


def mlp(i, o, h=64):
    net = nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]) if p.dim() > 1 else 0.0, p.shape).astype(np.float32)))
    return net


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(OBS, 2 * ACT)

    def dist(self, s):
        mu, log_std = self.net(s).chunk(2, -1)
        log_std = log_std.clamp(-5, 2)
        base = Normal(mu, log_std.exp())
        return TransformedDistribution(base, [TanhTransform(cache_size=1), AffineTransform(0.0, MAX_A)]), mu

    def sample(self, s, eps):
        d, mu = self.dist(s)
        base = d.base_dist
        u = base.loc + base.scale * eps  # the reparameterized draw, noise from NumPy
        a = d.transforms[1](d.transforms[0](u))
        return a, d.log_prob(a).sum(-1), u, base


actor = Actor()
q1, q2 = mlp(OBS + ACT, 1), mlp(OBS + ACT, 1)
q1_t, q2_t = copy.deepcopy(q1), copy.deepcopy(q2)
log_alpha = torch.zeros(1, requires_grad=True)
target_entropy = -float(ACT)
a_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
q_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=1e-3)
al_opt = torch.optim.Adam([log_alpha], lr=3e-3)

s = env_reset()
eps = torch.from_numpy(rng.normal(size=(E, ACT)).astype(np.float32))
a, logp, u, base = actor.sample(s, eps)
manual = (base.log_prob(u) - torch.log(MAX_A * (1 - torch.tanh(u).pow(2)) + 1e-12)).sum(-1)
print(f"log_prob matches manual: {torch.allclose(logp, manual, atol=1e-3)} actions in range: {bool((a.abs() <= MAX_A).all())}")

CAP = 4096
buf = {k: torch.zeros(CAP, n) for k, n in (("s", OBS), ("a", ACT), ("r", 1), ("s2", OBS))}
ptr, size = 0, 0


def store(s, a, r, s2):
    global ptr, size
    idx = (torch.arange(E) + ptr) % CAP
    for k, v in (("s", s), ("a", a), ("r", r.unsqueeze(1)), ("s2", s2)):
        buf[k].index_copy_(0, idx, v)
    ptr, size = (ptr + E) % CAP, min(size + E, CAP)


def soft_update(src, dst, tau=0.05):
    with torch.no_grad():
        dp, sp = list(dst.parameters()), list(src.parameters())
        torch._foreach_mul_(dp, 1 - tau)
        torch._foreach_add_(dp, sp, alpha=tau)


chk_a, chk_b = mlp(2, 1), mlp(2, 1)
ref = copy.deepcopy(chk_b)
soft_update(chk_a, chk_b, 0.3)
with torch.no_grad():
    for pr, pa in zip(ref.parameters(), chk_a.parameters()):
        pr.lerp_(pa, 0.3)
print(f"foreach polyak == lerp: {all(torch.allclose(x, y, atol=1e-6) for x, y in zip(ref.parameters(), chk_b.parameters()))}")


def evaluate():
    s, ret = env_reset(), torch.zeros(E)
    with torch.no_grad():
        for _ in range(HOR):
            d, mu = actor.dist(s)
            a = MAX_A * torch.tanh(mu)
            s, r = env_step(s, a)
            ret += r
    return ret.mean().item()


returns = [evaluate()]
print(f"initial return {returns[0]:.5f}")
for it in range(12):
    s = env_reset()
    for t in range(HOR):
        with torch.no_grad():
            eps = torch.from_numpy(rng.normal(size=(E, ACT)).astype(np.float32))
            a = actor.sample(s, eps)[0]
        s2, r = env_step(s, a)
        store(s, a, r, s2)
        s = s2
        idx = torch.from_numpy(rng.integers(0, size, 64))
        bs, ba, br, bs2 = (buf[k][idx] for k in ("s", "a", "r", "s2"))
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            eps = torch.from_numpy(rng.normal(size=(64, ACT)).astype(np.float32))
            a2, logp2, _, _ = actor.sample(bs2, eps)
            x2 = torch.cat([bs2, a2], 1)
            target = br + 0.95 * (torch.min(q1_t(x2), q2_t(x2)) - alpha * logp2.unsqueeze(1))
        x = torch.cat([bs, ba], 1)
        q_loss = F.mse_loss(q1(x), target) + F.mse_loss(q2(x), target)
        q_opt.zero_grad()
        q_loss.backward()
        q_opt.step()
        eps = torch.from_numpy(rng.normal(size=(64, ACT)).astype(np.float32))
        an, logp, _, _ = actor.sample(bs, eps)
        xa = torch.cat([bs, an], 1)
        pi_loss = (alpha * logp - torch.min(q1(xa), q2(xa)).squeeze(1)).mean()
        a_opt.zero_grad()
        pi_loss.backward()
        nn.utils.clip_grad_norm_(actor.parameters(), 5.0)
        a_opt.step()
        al_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
        al_opt.zero_grad()
        al_loss.backward()
        al_opt.step()
        soft_update(q1, q1_t)
        soft_update(q2, q2_t)
    returns.append(evaluate())
    if it % 3 == 0:
        print(f"iter {it:2d} return {returns[-1]:.5f} q loss {q_loss.item():.5f} pi loss {pi_loss.item():.5f} "
              f"alpha {log_alpha.exp().item():.5f} buffer {size}")
print(f"RESULT {returns[0]:.5f} {returns[-1]:.5f} {log_alpha.exp().item():.5f}")
