"""A recurrent state-space world model with discrete latents, in the style of the public
DreamerV2 / DreamerV3 re-implementations: a GRUCell deterministic path, a prior and a
posterior over 8 categorical latents of 8 classes (logits reshaped to (B, 8, 8)) mixed with 1%
uniform (unimix through softmax), distributions built as Independent(OneHotCategorical
StraightThrough(probs=...), 1), samples taken by Gumbel-max with NumPy noise plus the
straight-through trick, KL balancing with kl_divergence between Independent one-hot
categoricals on detached priors / posteriors and free nats by torch.clamp(min=...), a reward
head read through Normal(mean, 1).log_prob and a continue head through Bernoulli(logits)
(its mean / mode / entropy), symlog / symexp targets, a scan over time with torch.stack of the
states, imagination rollouts from the prior with the mode (argmax one-hot), and
OneHotCategorical's enumerate_support / entropy checked by hand. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <final kl>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import (
    Bernoulli,
    Independent,
    Normal,
    OneHotCategorical,
    OneHotCategoricalStraightThrough,
    kl_divergence,
)

rng = np.random.default_rng(8)
B, T, OBS, ACT, H, G, C = 16, 12, 6, 2, 32, 8, 8


def symlog(x):
    return torch.sign(x) * torch.log1p(x.abs())


def symexp(x):
    return torch.sign(x) * torch.expm1(x.abs())


# a toy environment: a damped rotating point observed through a fixed random projection
P = torch.from_numpy(rng.normal(size=(2, OBS)).astype(np.float32))
acts = torch.from_numpy(rng.uniform(-1, 1, (B, T, ACT)).astype(np.float32))
s = torch.from_numpy(rng.normal(size=(B, 2)).astype(np.float32))
obs, rew, cont = [], [], []
R = torch.tensor([[0.95, -0.3], [0.3, 0.95]])
for t in range(T):
    s = s @ R.T + 0.2 * acts[:, t]
    obs.append(s @ P)
    rew.append(10 * s[:, 0])
    cont.append((s.norm(dim=1) < 2.5).float())
obs, rew, cont = torch.stack(obs, 1), torch.stack(rew, 1), torch.stack(cont, 1)
print(f"obs {tuple(obs.shape)} reward range [{rew.min().item():.3f}, {rew.max().item():.3f}] continue rate {cont.mean().item():.4f}")


class RSSM(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(G * C + ACT, H)
        self.cell = nn.GRUCell(H, H)
        self.prior = nn.Sequential(nn.Linear(H, H), nn.ELU(), nn.Linear(H, G * C))
        self.post = nn.Sequential(nn.Linear(H + OBS, H), nn.ELU(), nn.Linear(H, G * C))
        self.dec = nn.Linear(H + G * C, OBS)
        self.rew = nn.Linear(H + G * C, 1)
        self.cont = nn.Linear(H + G * C, 1)

    def dist(self, logits):
        probs = 0.99 * F.softmax(logits.view(-1, G, C), -1) + 0.01 / C
        return Independent(OneHotCategoricalStraightThrough(probs=probs), 1)

    def sample(self, d):
        gumbel = torch.from_numpy(rng.gumbel(size=d.base_dist.probs.shape).astype(np.float32))
        idx = (d.base_dist.probs.log() + gumbel).argmax(-1)
        one_hot = F.one_hot(idx, C).float()
        return (one_hot + d.base_dist.probs - d.base_dist.probs.detach()).flatten(1)

    def step(self, h, z, a):
        return self.cell(F.elu(self.inp(torch.cat([z, a], -1))), h)


model = RSSM()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.8 / np.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
opt = torch.optim.Adam(model.parameters(), lr=3e-3, eps=1e-6)

d = OneHotCategorical(probs=torch.tensor([0.2, 0.3, 0.5]))
print(f"support {d.enumerate_support().tolist()} entropy ok: "
      f"{abs(d.entropy().item() + (d.probs * d.probs.log()).sum().item()) < 1e-6} mode {d.mode.tolist()}")

losses, kls = [], []
for it in range(40):
    h = torch.zeros(B, H)
    z = torch.zeros(B, G * C)
    priors, posts, feats = [], [], []
    for t in range(T):
        h = model.step(h, z, acts[:, t])
        prior_logits = model.prior(h)
        post_logits = model.post(torch.cat([h, obs[:, t]], -1))
        z = model.sample(model.dist(post_logits))
        priors.append(prior_logits)
        posts.append(post_logits)
        feats.append(torch.cat([h, z], -1))
    feat = torch.stack(feats, 1)
    pr, po = torch.stack(priors, 1).flatten(0, 1), torch.stack(posts, 1).flatten(0, 1)
    kl_dyn = kl_divergence(model.dist(po.detach()), model.dist(pr))
    kl_rep = kl_divergence(model.dist(po), model.dist(pr.detach()))
    kl = 0.5 * torch.clamp(kl_dyn, min=1.0).mean() + 0.1 * torch.clamp(kl_rep, min=1.0).mean()
    rec = F.mse_loss(model.dec(feat), obs)
    rew_nll = -Normal(model.rew(feat).squeeze(-1), 1.0).log_prob(symlog(rew)).mean()
    cont_d = Bernoulli(logits=model.cont(feat).squeeze(-1))
    cont_nll = -cont_d.log_prob(cont).mean()
    loss = rec + rew_nll + cont_nll + kl
    opt.zero_grad()
    loss.backward()
    gn = nn.utils.clip_grad_norm_(model.parameters(), 100.0)
    opt.step()
    losses.append(loss.item())
    kls.append(kl_dyn.mean().item())
    if it % 10 == 0:
        print(f"it {it:2d} loss {loss.item():.4f} rec {rec.item():.4f} rew {rew_nll.item():.4f} "
              f"cont {cont_nll.item():.4f} kl {kl_dyn.mean().item():.4f} |g| {gn.item():.3f}")

with torch.no_grad():
    print(f"continue head: mean {cont_d.mean.mean().item():.4f} mode rate {cont_d.mode.mean().item():.4f} "
          f"entropy {cont_d.entropy().mean().item():.4f}")
    # imagination from the last posterior state with the prior's mode
    hs, z_im = h, z
    rewards = []
    for t in range(5):
        hs = model.step(hs, z_im, torch.zeros(B, ACT))
        dist = model.dist(model.prior(hs))
        z_im = dist.base_dist.mode.flatten(1)
        rewards.append(symexp(model.rew(torch.cat([hs, z_im], -1)).squeeze(-1)))
    print(f"imagined one-hot rows: {bool((z_im.view(B, G, C).sum(-1) == 1).all())} "
          f"reward trajectory {[round(r.mean().item(), 3) for r in torch.stack(rewards).unbind(0)]}")
print(f"symlog round trip: {torch.allclose(symexp(symlog(rew)), rew, atol=1e-4)}")
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {kls[-1]:.4f}")
