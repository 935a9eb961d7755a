"""Generative flow networks with the trajectory-balance objective (Malkin et al.) in the style of
the public torchgfn / gflownet tutorial code, on a 2-D hypergrid: a forward policy MLP over a
one-hot state encoding with logits for "+1 on each axis" and "stop", invalid actions removed by
masked_fill(-inf) before torch.distributions.Categorical, actions drawn by inverse-CDF sampling
of NumPy uniforms (cumsum + searchsorted) with epsilon-uniform exploration, a uniform backward
policy over parents (its log-probability from the count of non-zero coordinates), a learned
log Z, the loss (log Z + sum log P_F - log R - sum log P_B)^2 on a batch of trajectories
(scatter of the per-step terms by trajectory with index_add_), and the exact terminating
distribution computed by dynamic programming over the grid to measure the L1 distance to the
normalised reward. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <L1 distance>."""

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

rng = np.random.default_rng(158)
H, NDIM = 8, 2
R0, R1, R2 = 0.1, 0.5, 2.0


def reward(x):
    """x (..., NDIM) integer coordinates: the hypergrid reward of Bengio et al."""
    ax = (x.float() / (H - 1) - 0.5).abs()
    return R0 + (0.25 < ax).prod(-1) * R1 + ((0.3 < ax) & (ax < 0.4)).prod(-1) * R2


all_states = torch.cartesian_prod(*[torch.arange(H)] * NDIM)
true_r = reward(all_states)
true_p = true_r / true_r.sum()
print(f"states {all_states.shape[0]} reward levels {sorted(set(round(v, 2) for v in true_r.tolist()))} "
      f"log Z {true_r.sum().log().item():.5f}")


def encode(x):
    return nn.functional.one_hot(x, H).float().flatten(-2)


class TBModel(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(H * NDIM, hidden), nn.LeakyReLU(), nn.Linear(hidden, hidden), nn.LeakyReLU(),
                                 nn.Linear(hidden, NDIM + 1))
        self.logZ = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        logits = self.mlp(encode(x))
        invalid = torch.cat([x == H - 1, torch.zeros(x.shape[0], 1, dtype=torch.bool)], 1)
        return logits.masked_fill(invalid, float("-inf"))


model = TBModel()
with torch.no_grad():
    for p in model.mlp.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]) if p.dim() > 1 else 0.0, p.shape).astype(np.float32)))
opt = torch.optim.Adam([{"params": model.mlp.parameters(), "lr": 1e-3}, {"params": [model.logZ], "lr": 1e-1}])


def sample(model, n, eps):
    x = torch.zeros(n, NDIM, dtype=torch.long)
    done = torch.zeros(n, dtype=torch.bool)
    log_pf = torch.zeros(n)
    log_pb = torch.zeros(n)
    while not bool(done.all()):
        active = (~done).nonzero().squeeze(1)
        logits = model(x[active])
        dist = Categorical(logits=logits)
        probs = (1 - eps) * dist.probs + eps * torch.isfinite(logits).float() / torch.isfinite(logits).float().sum(1, keepdim=True)
        cdf = probs.detach().cumsum(1)
        u = torch.from_numpy(rng.random(len(active)).astype(np.float32)).unsqueeze(1) * cdf[:, -1:]
        a = torch.searchsorted(cdf, u).squeeze(1).clamp(max=NDIM)
        lp = dist.log_prob(a)
        log_pf = log_pf.index_add(0, active, lp)
        stop = a == NDIM
        move = active[~stop]
        x = x.clone()
        x[move, a[~stop]] += 1
        # backward policy: uniform over the parents of the new state (non-zero coordinates)
        n_parents = (x[move] > 0).sum(1).float()
        log_pb = log_pb.index_add(0, move, -n_parents.log())
        done = done.clone()
        done[active[stop]] = True
    return x, log_pf, log_pb


losses = []
for it in range(100):
    x, log_pf, log_pb = sample(model, 16, eps=0.05)
    log_r = reward(x).log()
    loss = (model.logZ + log_pf - log_r - log_pb).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if it % 25 == 0:
        print(f"iter {it:3d} loss {loss.item():.4f} logZ {model.logZ.item():.4f}")


@torch.no_grad()
def terminating_distribution(model):
    """P(terminate at s) by flow over the DAG: states in order of their coordinate sum."""
    probs = torch.softmax(model(all_states), 1)
    reach = torch.zeros(H ** NDIM)
    reach[0] = 1.0
    index = {tuple(s.tolist()): i for i, s in enumerate(all_states)}
    order = sorted(range(len(all_states)), key=lambda i: int(all_states[i].sum()))
    for i in order:
        for d in range(NDIM):
            s = all_states[i].clone()
            if s[d] < H - 1:
                s[d] += 1
                reach[index[tuple(s.tolist())]] += reach[i] * probs[i, d]
    return reach * probs[:, NDIM]


p_model = terminating_distribution(model)
l1 = (p_model - true_p).abs().sum().item()
print(f"terminating distribution sums to {p_model.sum().item():.5f}; L1 to reward {l1:.4f} "
      f"(uniform {(torch.full_like(true_p, 1 / len(true_p)) - true_p).abs().sum().item():.4f})")
print(f"RESULT {np.mean(losses[:10]):.4f} {np.mean(losses[-10:]):.4f} {l1:.4f}")
