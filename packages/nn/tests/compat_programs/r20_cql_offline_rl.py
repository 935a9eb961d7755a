"""Offline reinforcement learning with conservative Q-learning (CQL), in the style of the public
CORL / d3rlpy single-file implementations: a logged dataset from a noisy behaviour policy on a
small grid MDP (NumPy), one-hot state features, a double Q-network with a Polyak-averaged target
(torch.lerp_ on the parameters under no_grad), the TD target with the min over twin targets,
the CQL regulariser logsumexp(Q(s, .)) - Q(s, a_data) with a Lagrange-tuned alpha (log_alpha
as a parameter, its own Adam, clamped), gradient clipping by clip_grad_value_, and evaluation:
the greedy policy's return by exact policy evaluation (torch.linalg.solve on (I - gamma P_pi)),
against plain DQN on the same data (over-estimation on unseen actions measured by the max over
out-of-data actions), value iteration's optimum, and action agreement. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <CQL policy return>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(26)
W = 5
S, A, gamma = W * W, 4, 0.9
goal = S - 1
moves = [(-1, 0), (1, 0), (0, -1), (0, 1)]
P = np.zeros((S, A, S))
R = np.full((S, A), -0.05)
for s in range(S):
    r, c = divmod(s, W)
    for a, (dr, dc) in enumerate(moves):
        nr, nc = min(max(r + dr, 0), W - 1), min(max(c + dc, 0), W - 1)
        ns = nr * W + nc
        if s == goal:
            ns = goal
        P[s, a, ns] = 1.0
        if ns == goal and s != goal:
            R[s, a] = 1.0
P_t, R_t = torch.from_numpy(P), torch.from_numpy(R)

# value iteration: the optimum
V = torch.zeros(S, dtype=torch.float64)
for _ in range(200):
    Q_star = R_t + gamma * P_t @ V
    V = Q_star.max(1).values
opt_policy = Q_star.argmax(1)

# logged data: behaviour moves down or right (towards the goal) 70% of the time
data = []
for ep in range(40):
    s = int(rng.integers(0, S - 1))
    for t in range(12):
        a = int(rng.choice([1, 3])) if rng.uniform() < 0.7 else int(rng.integers(A))
        ns = int(P[s, a].argmax())
        data.append((s, a, R[s, a], ns, float(ns == goal)))
        s = ns
        if s == goal:
            break
d = np.array(data)
s_b = torch.from_numpy(d[:, 0].astype(np.int64))
a_b = torch.from_numpy(d[:, 1].astype(np.int64))
r_b = torch.from_numpy(d[:, 2]).float()
ns_b = torch.from_numpy(d[:, 3].astype(np.int64))
done_b = torch.from_numpy(d[:, 4]).float()
seen = torch.zeros(S, A, dtype=torch.bool)
seen[s_b, a_b] = True
print(f"transitions {len(d)} distinct (s, a) {int(seen.sum())} of {S * A}")


def make_q():
    q = nn.Sequential(nn.Linear(S, 32), nn.ReLU(), nn.Linear(32, A))
    with torch.no_grad():
        for p in q.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.1, size=tuple(p.shape))).float())
    return q


def train(cql):
    q1, q2 = make_q(), make_q()
    t1, t2 = copy.deepcopy(q1), copy.deepcopy(q2)
    opt = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=3e-3)
    log_alpha = torch.zeros(1, requires_grad=True)
    a_opt = torch.optim.Adam([log_alpha], lr=1e-2)
    losses = []
    for step in range(200):
        idx = torch.from_numpy(rng.integers(0, len(d), size=64))
        s, a, r, ns, done = F.one_hot(s_b[idx], S).float(), a_b[idx], r_b[idx], F.one_hot(ns_b[idx], S).float(), done_b[idx]
        with torch.no_grad():
            next_a = q1(ns).argmax(1, keepdim=True)
            target_q = torch.min(t1(ns).gather(1, next_a), t2(ns).gather(1, next_a)).squeeze(1)
            y = r + gamma * (1 - done) * target_q
        q1_all, q2_all = q1(s), q2(s)
        q1_a, q2_a = q1_all.gather(1, a[:, None]).squeeze(1), q2_all.gather(1, a[:, None]).squeeze(1)
        td = F.mse_loss(q1_a, y) + F.mse_loss(q2_a, y)
        loss = td
        if cql:
            gap = (torch.logsumexp(q1_all, 1) - q1_a).mean() + (torch.logsumexp(q2_all, 1) - q2_a).mean()
            alpha = log_alpha.exp().clamp(0.0, 10.0)
            loss = td + alpha.detach() * (gap - 2 * 1.5)
            a_loss = -(log_alpha.exp() * (gap.detach() - 2 * 1.5)).mean()
            a_opt.zero_grad()
            a_loss.backward()
            a_opt.step()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(list(q1.parameters()) + list(q2.parameters()), 1.0)
        opt.step()
        with torch.no_grad():
            for tp, p in zip(list(t1.parameters()) + list(t2.parameters()), list(q1.parameters()) + list(q2.parameters())):
                tp.lerp_(p, 0.05)
        losses.append(loss.item())
    return q1, losses, log_alpha.exp().item()


def evaluate(q):
    with torch.no_grad():
        qv = q(torch.eye(S)).double()
    pi = qv.argmax(1)
    P_pi = P_t[torch.arange(S), pi]
    r_pi = R_t[torch.arange(S), pi]
    v = torch.linalg.solve(torch.eye(S, dtype=torch.float64) - gamma * P_pi, r_pi)
    unseen_max = qv.masked_fill(seen, -float("inf")).max().item()
    return v, pi, qv, unseen_max


results = {}
for name, cql in [("dqn", False), ("cql", True)]:
    q, losses, alpha = train(cql)
    v, pi, qv, unseen_max = evaluate(q)
    ret = v[:-1].mean().item()
    agree = (pi[:-1] == opt_policy[:-1]).double().mean().item()
    results[name] = (losses, ret)
    print(f"{name} loss {losses[0]:.5f} -> {losses[-1]:.5f} alpha {alpha:.4f} return {ret:.4f} agreement {agree:.4f} max Q unseen {unseen_max:.4f} max Q seen {qv.masked_fill(~seen, -float('inf')).max().item():.4f}")
print(f"optimal return {V[:-1].mean().item():.4f}")
losses, ret = results["cql"]
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {ret:.6f}")
