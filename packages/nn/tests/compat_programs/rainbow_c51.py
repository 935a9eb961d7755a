"""Pieces of Rainbow DQN as the public PyTorch implementations (Kaixhin/Rainbow, CleanRL's C51)
write them: factorized Gaussian NoisyLinear layers (f(x) = sign(x) sqrt|x| noise, buffers for
epsilon, reset_noise, deterministic in eval), a dueling distributional head with log_softmax
over 51 atoms, the categorical projection of the n-step Bellman target onto the support (floor /
ceil indices, the l == u fix-up, index_add_ on a flattened offset index; checked against a
per-sample loop and for preserved probability mass), double-DQN action selection, prioritized
replay with a sum tree (prefix-sum sampling, importance weights with beta annealing, priorities
updated from the per-sample cross entropy), and n-step returns. It learns a small chain MDP.
All randomness from NumPy. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <greedy return>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1605)
ATOMS, VMIN, VMAX, GAMMA, NSTEP = 51, -2.0, 10.0, 0.9, 3
support = torch.linspace(VMIN, VMAX, ATOMS)
dz = (VMAX - VMIN) / (ATOMS - 1)


class NoisyLinear(nn.Module):
    def __init__(self, in_features, out_features, std_init=0.5):
        super().__init__()
        self.in_features, self.out_features, self.std_init = in_features, out_features, std_init
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
        self.register_buffer("weight_epsilon", torch.empty(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("bias_epsilon", torch.empty(out_features))
        self.reset_parameters()
        self.reset_noise()

    def reset_parameters(self):
        mu_range = 1 / math.sqrt(self.in_features)
        self.weight_mu.data.copy_(torch.from_numpy(rng.uniform(-mu_range, mu_range, (self.out_features, self.in_features)).astype(np.float32)))
        self.weight_sigma.data.fill_(self.std_init / math.sqrt(self.in_features))
        self.bias_mu.data.copy_(torch.from_numpy(rng.uniform(-mu_range, mu_range, self.out_features).astype(np.float32)))
        self.bias_sigma.data.fill_(self.std_init / math.sqrt(self.out_features))

    @staticmethod
    def _scale_noise(size):
        x = torch.from_numpy(rng.standard_normal(size).astype(np.float32))
        return x.sign().mul_(x.abs().sqrt_())

    def reset_noise(self):
        eps_in = self._scale_noise(self.in_features)
        eps_out = self._scale_noise(self.out_features)
        self.weight_epsilon.copy_(eps_out.ger(eps_in))
        self.bias_epsilon.copy_(eps_out)

    def forward(self, x):
        if self.training:
            return F.linear(x, self.weight_mu + self.weight_sigma * self.weight_epsilon,
                            self.bias_mu + self.bias_sigma * self.bias_epsilon)
        return F.linear(x, self.weight_mu, self.bias_mu)


class DuelingC51(nn.Module):
    def __init__(self, n_states, n_actions, hidden=32):
        super().__init__()
        self.n_actions = n_actions
        self.body = nn.Linear(n_states, hidden)
        self.value = NoisyLinear(hidden, ATOMS)
        self.adv = NoisyLinear(hidden, n_actions * ATOMS)

    def forward(self, x, log=False):
        h = F.relu(self.body(x))
        v = self.value(h).view(-1, 1, ATOMS)
        a = self.adv(h).view(-1, self.n_actions, ATOMS)
        q = v + a - a.mean(1, keepdim=True)
        return F.log_softmax(q, dim=2) if log else F.softmax(q, dim=2)

    def reset_noise(self):
        for m in self.modules():
            if isinstance(m, NoisyLinear):
                m.reset_noise()


def project(next_probs, rewards, dones, gamma_n):
    """Projects r + gamma^n z onto the fixed support; next_probs (B, ATOMS)."""
    b = next_probs.shape[0]
    tz = (rewards.unsqueeze(1) + (1 - dones).unsqueeze(1) * gamma_n * support.unsqueeze(0)).clamp(VMIN, VMAX)
    bj = (tz - VMIN) / dz
    lo, up = bj.floor().to(torch.int64), bj.ceil().to(torch.int64)
    lo[(up > 0) & (lo == up)] -= 1
    up[(lo < (ATOMS - 1)) & (lo == up)] += 1
    m = next_probs.new_zeros(b, ATOMS)
    offset = torch.linspace(0, (b - 1) * ATOMS, b).unsqueeze(1).expand(b, ATOMS).to(lo)
    m.view(-1).index_add_(0, (lo + offset).view(-1), (next_probs * (up.float() - bj)).view(-1))
    m.view(-1).index_add_(0, (up + offset).view(-1), (next_probs * (bj - lo.float())).view(-1))
    return m


def project_loop(next_probs, rewards, dones, gamma_n):
    out = torch.zeros_like(next_probs)
    for i in range(next_probs.shape[0]):
        for j in range(ATOMS):
            tz = min(max(rewards[i].item() + (1 - dones[i].item()) * gamma_n * support[j].item(), VMIN), VMAX)
            bj = (tz - VMIN) / dz
            lo, up = math.floor(bj), math.ceil(bj)
            if lo == up:
                out[i, lo] += next_probs[i, j]
            else:
                out[i, lo] += next_probs[i, j] * (up - bj)
                out[i, up] += next_probs[i, j] * (bj - lo)
    return out


p = torch.softmax(torch.from_numpy(rng.normal(size=(4, ATOMS)).astype(np.float32)), 1)
r = torch.tensor([0.0, 1.0, -0.37, 9.5])
dn = torch.tensor([0.0, 0.0, 1.0, 0.0])
m1, m2 = project(p, r, dn, GAMMA ** NSTEP), project_loop(p, r, dn, GAMMA ** NSTEP)
print(f"projection == loop: {torch.allclose(m1, m2, atol=1e-6)} mass {[round(v, 5) for v in m1.sum(1).tolist()]}")
print(f"terminal reward -0.37 lands on atoms {torch.nonzero(m1[2]).flatten().tolist()} weights {[round(v, 4) for v in m1[2][m1[2] > 0].tolist()]}")
on_atom = project(p[:1], torch.tensor([0.0]), torch.tensor([1.0]), 1.0)
print(f"terminal reward 0: index {on_atom.argmax().item()} mass {on_atom.max().item():.4f}")

layer = NoisyLinear(3, 2)
xx = torch.ones(1, 3)
y1 = layer(xx)
layer.reset_noise()
y2 = layer(xx)
layer.eval()
print(f"noisy layer: noise changes train output {not torch.allclose(y1, y2)} eval deterministic {torch.equal(layer(xx), layer(xx))} buffers {[n for n, _ in layer.named_buffers()]}")


class SumTree:
    def __init__(self, capacity):
        self.capacity = capacity
        self.tree = torch.zeros(2 * capacity - 1, dtype=torch.float64)
        self.ptr = 0
        self.size = 0

    def update(self, idx, priority):
        i = idx + self.capacity - 1
        change = priority - self.tree[i]
        while True:
            self.tree[i] += change
            if i == 0:
                break
            i = (i - 1) // 2

    def add(self, priority):
        idx = self.ptr
        self.update(idx, priority)
        self.ptr = (self.ptr + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return idx

    def find(self, value):
        i = 0
        while i < self.capacity - 1:
            left = 2 * i + 1
            if value <= self.tree[left]:
                i = left
            else:
                value -= self.tree[left].item()
                i = left + 1
        return i - (self.capacity - 1)

    def total(self):
        return self.tree[0].item()


st = SumTree(8)
for pr in [1.0, 2.0, 3.0, 4.0]:
    st.add(pr)
hits = np.bincount([st.find(v) for v in np.linspace(0.01, 9.99, 1000)], minlength=8)
print(f"sum tree total {st.total():.1f} sampling counts {hits[:4].tolist()} leaves {st.tree[7:11].tolist()}")

# a chain MDP: 6 states, move left/right, reward 1 per step at the right end, 10 at the end
N_S, N_A = 6, 2


def env_step(s, a):
    s2 = min(s + 1, N_S - 1) if a == 1 else max(s - 1, 0)
    done = s2 == N_S - 1
    return s2, (10.0 if done else (0.1 if a == 0 else 0.0)), done


def onehot(s):
    return F.one_hot(torch.as_tensor(s), N_S).float()


online, target = DuelingC51(N_S, N_A), DuelingC51(N_S, N_A)
with torch.no_grad():
    online.body.weight.copy_(torch.from_numpy(rng.uniform(-0.4, 0.4, (32, N_S)).astype(np.float32)))
    online.body.bias.zero_()
target.load_state_dict(online.state_dict())
opt = torch.optim.Adam(online.parameters(), lr=5e-3, eps=1.5e-4)
CAP = 256
tree = SumTree(CAP)
mem_s, mem_a = torch.zeros(CAP, dtype=torch.long), torch.zeros(CAP, dtype=torch.long)
mem_r, mem_s2, mem_d = torch.zeros(CAP), torch.zeros(CAP, dtype=torch.long), torch.zeros(CAP)
max_prio, losses = 1.0, []
s, traj = 0, []
for t in range(400):
    with torch.no_grad():
        q = (online(onehot(s).unsqueeze(0)) * support).sum(2)
    a = int(q.argmax(1)) if rng.random() > 0.1 else int(rng.integers(0, N_A))
    s2, rew, done = env_step(s, a)
    traj.append((s, a, rew))
    if len(traj) >= NSTEP or done:
        while traj and (len(traj) >= NSTEP or done):
            R = sum(GAMMA ** k * tr[2] for k, tr in enumerate(traj[:NSTEP]))
            idx = tree.add(max_prio)
            mem_s[idx], mem_a[idx], mem_r[idx] = traj[0][0], traj[0][1], R
            mem_s2[idx], mem_d[idx] = s2, float(done)
            traj.pop(0)
            if not done:
                break
    s = 0 if done or len(traj) == 0 and done else s2
    if done:
        traj = []
    if tree.size >= 16 and t % 2 == 0:
        beta = min(1.0, 0.4 + 0.6 * t / 400)
        segment = tree.total() / 16
        idxs = torch.tensor([tree.find(segment * (k + rng.random())) for k in range(16)])
        probs = tree.tree[idxs + CAP - 1] / tree.total()
        weights = (tree.size * probs) ** -beta
        weights = (weights / weights.max()).float()
        with torch.no_grad():
            next_a = (online(onehot(mem_s2[idxs])) * support).sum(2).argmax(1)
            target.reset_noise()
            next_p = target(onehot(mem_s2[idxs]))[torch.arange(16), next_a]
            m = project(next_p, mem_r[idxs], mem_d[idxs], GAMMA ** NSTEP)
        log_p = online(onehot(mem_s[idxs]), log=True)[torch.arange(16), mem_a[idxs]]
        loss_each = -(m * log_p).sum(1)
        loss = (weights * loss_each).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(online.parameters(), 10.0)
        opt.step()
        online.reset_noise()
        for i, le in zip(idxs.tolist(), loss_each.detach().tolist()):
            tree.update(i, le ** 0.5 + 1e-6)
            max_prio = max(max_prio, le ** 0.5 + 1e-6)
        losses.append(loss.item())
    if t % 50 == 0:
        target.load_state_dict(online.state_dict())
    if t % 100 == 0 and losses:
        print(f"t {t:3d} loss {losses[-1]:.4f} max priority {max_prio:.4f}")

online.eval()
with torch.no_grad():
    q = (online(torch.eye(N_S)) * support).sum(2)
s, ret = 0, 0.0
for k in range(20):
    s, rew, done = env_step(s, int(q[s].argmax()))
    ret += GAMMA ** k * rew
    if done:
        break
print(f"greedy policy {q.argmax(1).tolist()} discounted return {ret:.4f} q(0) {[round(v, 3) for v in q[0].tolist()]}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {ret:.4f}")
