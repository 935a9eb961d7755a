"""Probabilistic models with torch.distributions as RL and generative code writes them: a
Gaussian policy (Normal with a learned log-std, rsample for the reparameterized path,
log_prob summed over action dims, entropy, a tanh-squashed action with its log-det correction via
TransformedDistribution(TanhTransform)) trained with a policy gradient on a continuous bandit,
a Categorical policy (logits, sample, log_prob, entropy, probs) with a baseline, Independent and
MultivariateNormal, kl_divergence between Normals and between Categoricals, a PPO-style clipped
ratio, Bernoulli, Beta, Dirichlet means, and distribution shapes (batch_shape, event_shape,
expand). The samples come from each library's own generator: numbers are compared in trend, and
what does not depend on the draws (log-probs, KLs, entropies at fixed points) exactly. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember."""

import math

import torch
import torch.nn as nn
from torch.distributions import (
    Bernoulli,
    Beta,
    Categorical,
    Dirichlet,
    Independent,
    MultivariateNormal,
    Normal,
    TransformedDistribution,
    kl_divergence,
)
from torch.distributions.transforms import TanhTransform

torch.manual_seed(0)

# ---- deterministic facts ----
n = Normal(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 2.0]))
print(f"Normal log_prob {n.log_prob(torch.tensor([0.5, 0.5])).tolist()}")
print(f"Normal entropy {n.entropy().tolist()}, cdf {n.cdf(torch.tensor([0.0, 1.0])).tolist()}")
print(f"KL(N0||N1) {kl_divergence(Normal(0.0, 1.0), Normal(1.0, 2.0)).item():.6f}")
c = Categorical(logits=torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]))
print(f"Categorical probs {[[round(v, 4) for v in r] for r in c.probs.tolist()]}")
print(f"Categorical log_prob {c.log_prob(torch.tensor([2, 0])).tolist()}, entropy "
      f"{[round(v, 5) for v in c.entropy().tolist()]}")
c2 = Categorical(probs=torch.tensor([[0.2, 0.3, 0.5], [0.5, 0.25, 0.25]]))
print(f"KL categorical {[round(v, 5) for v in kl_divergence(c, c2).tolist()]}")
ind = Independent(Normal(torch.zeros(3, 2), torch.ones(3, 2)), 1)
print(f"Independent batch {tuple(ind.batch_shape)} event {tuple(ind.event_shape)}, log_prob "
      f"{ind.log_prob(torch.zeros(3, 2))[0].item():.6f}")
mvn = MultivariateNormal(torch.zeros(2), covariance_matrix=torch.tensor([[2.0, 0.5], [0.5, 1.0]]))
print(f"MVN log_prob {mvn.log_prob(torch.tensor([1.0, -1.0])).item():.6f}, entropy "
      f"{mvn.entropy().item():.6f}")
print(f"Bernoulli(logits) log_prob {Bernoulli(logits=torch.tensor(0.3)).log_prob(torch.tensor(1.0)).item():.6f}")
print(f"Beta mean {Beta(torch.tensor(2.0), torch.tensor(3.0)).mean.item():.4f}, Dirichlet mean "
      f"{Dirichlet(torch.tensor([1.0, 2.0, 5.0])).mean.tolist()}")
e = Normal(torch.zeros(1), torch.ones(1)).expand(torch.Size([4, 1]))
print(f"expand: batch {tuple(e.batch_shape)}, sample {tuple(e.sample((2,)).shape)}")
squashed = TransformedDistribution(Normal(0.0, 1.0), [TanhTransform(cache_size=1)])
y = torch.tensor(0.5)
manual = Normal(0.0, 1.0).log_prob(torch.atanh(y)) - torch.log1p(-y * y)
print(f"tanh-squashed log_prob {squashed.log_prob(y).item():.6f} == {manual.item():.6f}")

# ---- a Gaussian policy on a continuous bandit: reward = -(a - target)^2 ----
target = torch.tensor([0.6, -0.3])


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.mu = nn.Parameter(torch.zeros(2))
        self.log_std = nn.Parameter(torch.zeros(2))

    def forward(self):
        return Normal(self.mu, self.log_std.exp())


policy = GaussianPolicy()
opt = torch.optim.Adam(policy.parameters(), lr=0.05)
first = None
for it in range(150):
    dist = policy()
    actions = dist.sample((64,))
    rewards = -((actions - target) ** 2).sum(-1)
    adv = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
    loss = -(dist.log_prob(actions).sum(-1) * adv).mean() - 0.001 * dist.entropy().sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    first = rewards.mean().item() if first is None else first
print(f"REINFORCE: mean reward {first:.3f} -> {rewards.mean().item():.3f}, mu "
      f"{[round(v, 1) for v in policy.mu.tolist()]}")

# the same bandit with the reparameterized gradient (rsample)
policy2 = GaussianPolicy()
opt = torch.optim.Adam(policy2.parameters(), lr=0.05)
for it in range(100):
    a = policy2().rsample((64,))
    loss = ((a - target) ** 2).sum(-1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"rsample: loss {loss.item():.4f}, std shrinks {policy2.log_std.exp().max().item() < 0.5}")

# ---- a categorical policy with a baseline and a PPO clipped objective ----
payoff = torch.tensor([0.1, 0.5, 0.9, 0.2])
logits = nn.Parameter(torch.zeros(4))
opt = torch.optim.SGD([logits], lr=0.5)
baseline = 0.0
for it in range(80):
    old = Categorical(logits=logits.detach())
    a = old.sample((32,))
    r = payoff[a] + 0.05 * torch.randn(32)
    baseline = 0.9 * baseline + 0.1 * r.mean().item()
    for _ in range(2):  # two PPO epochs on the batch
        new = Categorical(logits=logits)
        ratio = torch.exp(new.log_prob(a) - old.log_prob(a))
        adv = r - baseline
        obj = torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv).mean()
        loss = -obj - 0.01 * new.entropy()
        opt.zero_grad()
        loss.backward()
        opt.step()
probs = Categorical(logits=logits).probs
print(f"PPO: best arm {probs.argmax().item()}, its probability > 0.8: {probs.max().item() > 0.8}, "
      f"KL from uniform {kl_divergence(Categorical(logits=logits), Categorical(logits=torch.zeros(4))).item() > 0.5}")
print(f"RESULT {first:.6f} {rewards.mean().item():.6f} {probs.max().item():.6f} "
      f"{math.exp(policy.log_std.mean().item()):.6f}")
