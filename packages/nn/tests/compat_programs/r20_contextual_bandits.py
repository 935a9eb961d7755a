"""Contextual bandits in the style of public PyTorch bandit tutorials: disjoint LinUCB (per-arm
A^-1 kept by Sherman-Morrison rank-one updates and checked against torch.linalg.inv), linear
Thompson sampling drawing from MultivariateNormal(mean, precision_matrix=...) with a batch of
arms, epsilon-greedy on a small neural reward model (nn.Bilinear arm-context features) trained
online with Adagrad on a replay of the chosen arms, and NeuralUCB-style exploration from the
last layer's gradient (torch.func.vmap of grad over functional_call, one row per arm) with a diagonal design matrix;
cumulative regret per policy, arm pull counts by torch.bincount, the running best-arm rate by
torch.cumsum. Contexts and rewards from NumPy. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints
RESULT <first-30 regret> <last-30 regret> <linucb best-arm rate>."""

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import MultivariateNormal
from torch.func import functional_call, grad, vmap

torch.manual_seed(0)
rng = np.random.default_rng(25)
K, D, T = 4, 5, 120
theta = torch.from_numpy(rng.normal(size=(K, D)))
contexts = torch.from_numpy(rng.normal(size=(T, D)))
noise = torch.from_numpy(rng.normal(0, 0.1, size=(T, K)))
mean_rewards = contexts @ theta.T
rewards = mean_rewards + noise
best = mean_rewards.argmax(1)


def regret_of(t, a):
    return (mean_rewards[t, best[t]] - mean_rewards[t, a]).item()


# LinUCB with Sherman-Morrison
alpha = 0.8
A_inv = torch.eye(D, dtype=torch.float64).repeat(K, 1, 1)
b = torch.zeros(K, D, dtype=torch.float64)
A = torch.eye(D, dtype=torch.float64).repeat(K, 1, 1)
lin_regret, lin_arms = [], []
for t in range(T):
    x = contexts[t]
    th = torch.einsum("kij,kj->ki", A_inv, b)
    ucb = th @ x + alpha * torch.sqrt(torch.einsum("i,kij,j->k", x, A_inv, x))
    a = int(ucb.argmax())
    Ax = A_inv[a] @ x
    A_inv[a] -= torch.outer(Ax, Ax) / (1 + x @ Ax)
    A[a] += torch.outer(x, x)
    b[a] += rewards[t, a] * x
    lin_regret.append(regret_of(t, a))
    lin_arms.append(a)
print("sherman-morrison == inv", torch.allclose(A_inv, torch.linalg.inv(A)), "theta err", round((torch.linalg.solve(A, b.unsqueeze(-1)).squeeze(-1) - theta).norm().item(), 4))

# Thompson sampling (a fixed NumPy stream of standard normals through MultivariateNormal.rsample's
# formula keeps the two libraries on the same draws)
v = 0.3
B = torch.eye(D, dtype=torch.float64).repeat(K, 1, 1)
f = torch.zeros(K, D, dtype=torch.float64)
ts_regret = []
for t in range(T):
    mu = torch.linalg.solve(B, f.unsqueeze(-1)).squeeze(-1)
    post = MultivariateNormal(mu, precision_matrix=B / v ** 2)
    eps = torch.from_numpy(rng.normal(size=(K, D)))
    draw = post.loc + (post.scale_tril @ eps.unsqueeze(-1)).squeeze(-1)
    a = int((draw @ contexts[t]).argmax())
    B[a] += torch.outer(contexts[t], contexts[t])
    f[a] += rewards[t, a] * contexts[t]
    ts_regret.append(regret_of(t, a))
print(f"thompson posterior batch {tuple(post.batch_shape)} event {tuple(post.event_shape)} log_prob(theta) {post.log_prob(theta).sum().item():.4f}")


# neural epsilon-greedy + gradient-based UCB
class RewardNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.arm = nn.Embedding(K, 6)
        self.bil = nn.Bilinear(D, 6, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x, a):
        return self.out(torch.tanh(self.bil(x, self.arm(a)))).squeeze(-1)


net = RewardNet().double()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, size=tuple(p.shape))))
opt = torch.optim.Adagrad(net.parameters(), lr=0.1)
last = {k: v for k, v in net.named_parameters() if k.startswith("out.")}
Z = torch.ones(sum(p.numel() for p in last.values()), dtype=torch.float64)
hist_x, hist_a, hist_r, nn_regret = [], [], [], []
arms = torch.arange(K)


def score(params, x, a):
    return functional_call(net, params, (x.unsqueeze(0), a.unsqueeze(0)))[0]


for t in range(T):
    x = contexts[t]
    with torch.no_grad():
        pred = net(x.expand(K, D), arms)
    params = {k: v.detach() for k, v in net.named_parameters()}
    frozen = {k: v for k, v in params.items() if k not in last}
    g = vmap(grad(lambda lp, a: score({**frozen, **lp}, x, a)), in_dims=(None, 0))(
        {k: params[k] for k in last}, arms)
    gv = torch.cat([g[k].flatten(1) for k in last], 1)  # (K, n_last)
    ucb = pred + 0.2 * torch.sqrt((gv * gv / Z).sum(1))
    a = int(ucb.argmax()) if rng.uniform() > 0.05 else int(rng.integers(K))
    Z += gv[a] ** 2
    hist_x.append(x)
    hist_a.append(a)
    hist_r.append(rewards[t, a])
    nn_regret.append(regret_of(t, a))
    if t % 8 == 7:
        idx = torch.from_numpy(rng.choice(len(hist_x), min(32, len(hist_x)), replace=False))
        X, Aa, R = torch.stack(hist_x)[idx], torch.tensor(hist_a)[idx], torch.stack(hist_r)[idx]
        for _ in range(5):
            loss = ((net(X, Aa) - R) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

for name, reg in [("linucb", lin_regret), ("thompson", ts_regret), ("neural", nn_regret)]:
    c = torch.cumsum(torch.tensor(reg), 0)
    print(f"{name} cumulative regret {c[-1].item():.4f} at 40 {c[39].item():.4f} first-30 {sum(reg[:30]):.4f} last-30 {sum(reg[-30:]):.4f}")
pulls = torch.bincount(torch.tensor(lin_arms), minlength=K)
rate = (torch.tensor(lin_arms) == best).double()
running = torch.cumsum(rate, 0) / torch.arange(1, T + 1)
print("linucb pulls", pulls.tolist(), "best arms", torch.bincount(best, minlength=K).tolist(), f"running best-arm rate {running[-1].item():.4f}")
print(f"neural loss {loss.item():.5f} design diag min {Z.min().item():.4f}")
print(f"RESULT {sum(lin_regret[:30]):.6f} {sum(lin_regret[-30:]):.6f} {running[-1].item():.6f}")
