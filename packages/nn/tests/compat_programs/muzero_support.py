"""MuZero-style learned models in the style of the public muzero-general / EfficientZero code:
the invertible value transform h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x and its closed-form
inverse, scalars encoded as two-hot distributions over an integer support (floor, scatter_ into
neighbouring bins) and decoded by expectation, representation / dynamics / prediction networks
with min-max normalized hidden states, n-step bootstrapped value targets, a K-step unrolled loss
with gradients scaled by 1/2 at each dynamics step through a custom scale_gradient
(register_hook), and a small Monte Carlo tree search with pUCT, Dirichlet-free priors and
MinMaxStats on a deterministic chain game. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss>
<last loss> <search return>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1519)
SUPPORT = 5  # bins -5..5
EPS = 0.001
N_STATES, N_ACTIONS, HID = 6, 2, 16


def h(x):
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1) - 1) + EPS * x


def h_inv(x):
    return torch.sign(x) * (((torch.sqrt(1 + 4 * EPS * (torch.abs(x) + 1 + EPS)) - 1) / (2 * EPS)) ** 2 - 1)


def scalar_to_support(x):
    x = h(x).clamp(-SUPPORT, SUPPORT)
    floor = x.floor()
    prob = x - floor
    logits = torch.zeros(*x.shape, 2 * SUPPORT + 1)
    logits.scatter_(-1, (floor + SUPPORT).long().unsqueeze(-1), (1 - prob).unsqueeze(-1))
    idx = floor + SUPPORT + 1
    prob = prob.masked_fill(2 * SUPPORT < idx, 0.0)
    idx = idx.masked_fill(2 * SUPPORT < idx, 0.0)
    logits.scatter_(-1, idx.long().unsqueeze(-1), prob.unsqueeze(-1))
    return logits


def support_to_scalar(logits):
    probs = torch.softmax(logits, dim=-1)
    support = torch.arange(-SUPPORT, SUPPORT + 1, dtype=torch.float32)
    return h_inv((probs * support).sum(-1))


x = torch.tensor([-30.0, -2.5, 0.0, 0.3, 7.0, 24.0])
print(f"h {[round(v, 5) for v in h(x).tolist()]} inverse round trip {torch.allclose(h_inv(h(x)), x, atol=1e-3)}")
tw = scalar_to_support(x)
print(f"two-hot rows sum to one {torch.allclose(tw.sum(-1), torch.ones(6))} expectation == h(x) "
      f"{torch.allclose((tw * torch.arange(-SUPPORT, SUPPORT + 1)).sum(-1), h(x).clamp(-SUPPORT, SUPPORT), atol=1e-6)}")
print(f"decode(log two-hot) {[round(v, 3) for v in support_to_scalar(torch.log(tw + 1e-9)).tolist()]}")


def scale_gradient(t, scale):
    return t * scale + t.detach() * (1 - scale)


def normalize_hidden(s):
    mn = s.min(1, keepdim=True).values
    mx = s.max(1, keepdim=True).values
    scale = mx - mn
    scale = torch.where(scale < 1e-5, scale + 1e-5, scale)
    return (s - mn) / scale


class MuZeroNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.repr = nn.Sequential(nn.Linear(N_STATES, HID), nn.ELU(), nn.Linear(HID, HID))
        self.dyn = nn.Sequential(nn.Linear(HID + N_ACTIONS, HID), nn.ELU(), nn.Linear(HID, HID))
        self.reward = nn.Linear(HID + N_ACTIONS, 2 * SUPPORT + 1)
        self.policy = nn.Linear(HID, N_ACTIONS)
        self.value = nn.Linear(HID, 2 * SUPPORT + 1)

    def initial(self, obs):
        s = normalize_hidden(self.repr(obs))
        return s, self.policy(s), self.value(s)

    def recurrent(self, s, a):
        sa = torch.cat([s, F.one_hot(a, N_ACTIONS).float()], -1)
        s2 = normalize_hidden(self.dyn(sa))
        return s2, self.reward(sa), self.policy(s2), self.value(s2)


def env_step(state, action):
    """A chain: action 1 moves right; reaching the end pays 10 and resets; action 0 pays 1."""
    if action == 1:
        state += 1
        if state == N_STATES - 1:
            return 0, 10.0
        return state, 0.0
    return max(state - 1, 0), 1.0


def obs_of(states):
    return F.one_hot(torch.as_tensor(states), N_STATES).float()


class MinMaxStats:
    def __init__(self):
        self.maximum, self.minimum = -float("inf"), float("inf")

    def update(self, v):
        self.maximum, self.minimum = max(self.maximum, v), min(self.minimum, v)

    def normalize(self, v):
        return (v - self.minimum) / (self.maximum - self.minimum) if self.maximum > self.minimum else v


class Node:
    def __init__(self, prior):
        self.prior, self.visits, self.value_sum, self.children, self.reward, self.state = prior, 0, 0.0, {}, 0.0, None

    def value(self):
        return self.value_sum / self.visits if self.visits else 0.0


@torch.no_grad()
def mcts(net, obs, sims=16, gamma=0.97):
    root = Node(1.0)
    s, p, v = net.initial(obs.unsqueeze(0))
    root.state = s
    for a, pr in enumerate(torch.softmax(p, -1)[0].tolist()):
        root.children[a] = Node(pr)
    stats = MinMaxStats()
    for _ in range(sims):
        node, path, actions = root, [root], []
        while node.children and node.visits > 0:
            def ucb(child, parent=node):
                pb = child.prior * math.sqrt(parent.visits) / (child.visits + 1) * 1.25
                q = stats.normalize(child.reward + gamma * child.value()) if child.visits else 0.0
                return q + pb
            a = max(node.children, key=lambda k: ucb(node.children[k]))
            actions.append(a)
            parent, node = node, node.children[a]
            path.append(node)
            if node.state is None:
                break
        if node.state is None:
            s2, r, p, v = net.recurrent(parent.state, torch.tensor([actions[-1]]))
            node.state, node.reward = s2, support_to_scalar(r).item()
            for a, pr in enumerate(torch.softmax(p, -1)[0].tolist()):
                node.children[a] = Node(pr)
        value = support_to_scalar(v).item()
        for n in reversed(path):
            n.value_sum += value
            n.visits += 1
            stats.update(n.reward + gamma * n.value())
            value = n.reward + gamma * value
    return [root.children[a].visits for a in range(N_ACTIONS)]


# replay from a behaviour policy; n-step targets
states, actions, rewards = [0], [], []
for t in range(400):
    a = int(rng.uniform() < 0.7)
    s2, r = env_step(states[-1], a)
    actions.append(a)
    rewards.append(r)
    states.append(s2)
gamma, n_step, K = 0.97, 5, 3
R = torch.tensor(rewards)
returns = torch.stack([sum(gamma ** k * R[i + k] for k in range(n_step)) for i in range(len(R) - n_step)])
print(f"n-step returns mean {returns.mean().item():.4f} max {returns.max().item():.4f}")

net = MuZeroNet()
with torch.no_grad():
    for name, p in net.named_parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3 if p.dim() > 1 else 0.0, p.shape).astype(np.float32)))
opt = torch.optim.Adam(net.parameters(), lr=3e-3)
losses = []
for step in range(80):
    idx = torch.from_numpy(rng.integers(0, len(returns) - K, 32))
    s, pol, val = net.initial(obs_of([states[i] for i in idx.tolist()]))
    target_pi = torch.tensor([actions[i] for i in idx.tolist()])
    loss = -(scalar_to_support(returns[idx]) * F.log_softmax(val, -1)).sum(-1).mean() * 0.25 + F.cross_entropy(pol, target_pi)
    for k in range(K):
        a = torch.tensor([actions[i + k] for i in idx.tolist()])
        s, r, pol, val = net.recurrent(s, a)
        s.register_hook(lambda g: g * 0.5)  # halve the gradient flowing into the dynamics
        lk = -(scalar_to_support(R[idx + k]) * F.log_softmax(r, -1)).sum(-1).mean()
        lk = lk - (scalar_to_support(returns[idx + k + 1]) * F.log_softmax(val, -1)).sum(-1).mean() * 0.25
        lk = lk + F.cross_entropy(pol, torch.tensor([actions[i + k + 1] for i in idx.tolist()]))
        loss = loss + scale_gradient(lk, 1.0 / K)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f}")

with torch.no_grad():
    s, _, v = net.initial(obs_of(list(range(N_STATES))))
    print(f"predicted values {[round(x, 3) for x in support_to_scalar(v).tolist()]}")
state, total = 0, 0.0
for t in range(20):
    visits = mcts(net, obs_of(state))
    a = int(np.argmax(visits))
    state, r = env_step(state, a)
    total += r
print(f"search visits at the start {mcts(net, obs_of(0))} return over 20 steps {total:.1f}")
print(f"RESULT {np.mean(losses[:3]):.5f} {np.mean(losses[-3:]):.5f} {total:.1f}")
