"""Advantage actor-critic on a small grid world written here, in the style of the public PyTorch
actor-critic example: a shared body with actor and critic heads, Categorical action sampling,
SavedAction namedtuples, discounted returns normalized with eps, smooth_l1_loss for the critic,
an entropy bonus, RMSprop; then a batched evaluation under inference_mode with einsum,
gather/scatter_ one-hot bookkeeping, and tensors printed as they are (repr, set_printoptions).
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <early average reward> <late average reward> <greedy success rate>."""

import argparse
import sys
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

parser = argparse.ArgumentParser(description="PyTorch actor-critic example")
parser.add_argument("--gamma", type=float, default=0.9, metavar="G")
parser.add_argument("--seed", type=int, default=543, metavar="N")
parser.add_argument("--episodes", type=int, default=150)
parser.add_argument("--log-interval", type=int, default=50, metavar="N")
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(args.seed)

SavedAction = namedtuple("SavedAction", ["log_prob", "value"])
SIZE = 4  # a SIZE x SIZE grid; start at (0, 0), goal at (SIZE-1, SIZE-1)
MOVES = [(-1, 0), (1, 0), (0, -1), (0, 1)]


class Grid:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.pos = (0, int(self.rng.integers(0, SIZE)))
        self.t = 0
        return self.obs()

    def obs(self):
        o = np.zeros(2 * SIZE, dtype=np.float32)
        o[self.pos[0]] = 1.0
        o[SIZE + self.pos[1]] = 1.0
        return o

    def step(self, action):
        dr, dc = MOVES[action]
        self.pos = (min(max(self.pos[0] + dr, 0), SIZE - 1), min(max(self.pos[1] + dc, 0),
                                                                 SIZE - 1))
        self.t += 1
        done = self.pos == (SIZE - 1, SIZE - 1)
        reward = 1.0 if done else -0.05
        return self.obs(), reward, done or self.t >= 20, {}


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(2 * SIZE, 64)
        self.action_head = nn.Linear(64, 4)
        self.value_head = nn.Linear(64, 1)
        self.saved_actions = []
        self.rewards = []
        self.entropies = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


model = Policy()
optimizer = optim.RMSprop(model.parameters(), lr=3e-3, alpha=0.99, eps=1e-5)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    model.entropies.append(m.entropy())
    return action.item()


def finish_episode():
    R = 0
    saved_actions = model.saved_actions
    policy_losses = []
    value_losses = []
    returns = []
    for r in model.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    if len(returns) > 1:
        returns = (returns - returns.mean()) / (returns.std() + eps)
    for (log_prob, value), R in zip(saved_actions, returns):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum() \
        - 0.01 * torch.stack(model.entropies).sum()
    loss.backward()
    optimizer.step()
    del model.rewards[:]
    del model.saved_actions[:]
    del model.entropies[:]


env = Grid(args.seed)
running_reward = 0.0
history = []
for i_episode in range(args.episodes):
    state, ep_reward = env.reset(), 0
    for t in range(1, 10000):
        action = select_action(state)
        state, reward, done, _ = env.step(action)
        model.rewards.append(reward)
        ep_reward += reward
        if done:
            break
    running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
    history.append(ep_reward)
    finish_episode()
    if i_episode % args.log_interval == 0:
        print("Episode {}\tLast reward: {:.2f}\tAverage reward: {:.2f}".format(
            i_episode, ep_reward, running_reward))

# every start state at once: the greedy policy's rollouts, batched
with torch.inference_mode():
    starts = torch.arange(SIZE)
    rows = torch.zeros(SIZE, dtype=torch.long)
    cols = starts.clone()
    done = torch.zeros(SIZE, dtype=torch.bool)
    moves = torch.tensor(MOVES)
    for _ in range(12):
        obs = torch.zeros(SIZE, 2 * SIZE)
        obs.scatter_(1, rows.unsqueeze(1), 1.0)
        obs.scatter_(1, (cols + SIZE).unsqueeze(1), 1.0)
        probs, values = model(obs)
        greedy = probs.argmax(dim=1, keepdim=True)
        p_greedy = probs.gather(1, greedy).squeeze(1)
        assert (p_greedy >= probs.max(dim=1).values - 1e-6).all()
        step = moves[greedy.squeeze(1)] * (~done).long().unsqueeze(1)
        rows = (rows + step[:, 0]).clamp(0, SIZE - 1)
        cols = (cols + step[:, 1]).clamp(0, SIZE - 1)
        done |= (rows == SIZE - 1) & (cols == SIZE - 1)
    success = done.float().mean().item()
    # expected value under the policy, by einsum, against a plain sum
    q = torch.randn(SIZE, 4)
    ev = torch.einsum("ba,ba->b", probs, q)
    assert torch.allclose(ev, (probs * q).sum(1), atol=1e-6)
    outer = torch.einsum("i,j->ij", torch.arange(3.0), torch.arange(4.0))
    assert torch.equal(outer, torch.outer(torch.arange(3.0), torch.arange(4.0)))

# printing tensors, as programs do
fixed = torch.tensor([[0.5, -1.25, 3.0], [1e-4, 2.5e3, -7.0]])
print(fixed)
print(torch.tensor([1, 2, 3]), torch.tensor([True, False]))
print(repr(torch.zeros(2, 3, dtype=torch.float64)))
print(torch.tensor([[1.0, 2.0]], requires_grad=True))
print(torch.arange(4.0).view(2, 2) * 1.5 + 0.25)
torch.set_printoptions(precision=2)
print(torch.tensor([3.14159, 2.71828]))
torch.set_printoptions(profile="default")
print(torch.tensor(2.5), torch.tensor([]), torch.tensor(7))
print(f"one-hot: {F.one_hot(torch.tensor([0, 2]), 3)}")
print(f"greedy success {success:.2f}")
early, late = np.mean(history[:20]), np.mean(history[-30:])
print(f"RESULT {early:.4f} {late:.4f} {success:.4f}")
