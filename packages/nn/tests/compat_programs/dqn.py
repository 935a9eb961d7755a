"""Deep Q-learning on a small chain environment written here, in the style of the public
PyTorch DQN tutorial: a Transition namedtuple and a deque ReplayMemory, epsilon-greedy actions
with math.exp decay, policy and target networks, a batch built with torch.cat over the
transitions and a non-final mask (tuple(map(lambda ...))), state_action_values via gather,
next-state values via max(1).values under no_grad written through a boolean mask, SmoothL1Loss,
AdamW(amsgrad=True), clip_grad_value_, and the soft target update done key by key on
state_dicts. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <early return> <late return> <greedy return>."""

import math
import random
from collections import deque, namedtuple
from itertools import count

import torch
import torch.nn as nn
import torch.optim as optim

random.seed(0)
torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

N_STATES = 6  # a chain: start in the middle; the right end pays 1, the left end 0.1


class Chain:
    def reset(self):
        self.s = N_STATES // 2
        self.t = 0
        return self.obs(), {}

    def obs(self):
        o = [0.0] * N_STATES
        o[self.s] = 1.0
        return o

    def step(self, action):  # 0: left, 1: right
        self.s += 1 if action == 1 else -1
        self.t += 1
        terminated = self.s in (0, N_STATES - 1)
        reward = 1.0 if self.s == N_STATES - 1 else (0.1 if self.s == 0 else -0.01)
        return self.obs(), reward, terminated, self.t >= 30, {}


env = Chain()
Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory(object):
    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):
    def __init__(self, n_observations, n_actions):
        super(DQN, self).__init__()
        self.layer1 = nn.Linear(n_observations, 32)
        self.layer2 = nn.Linear(32, 32)
        self.layer3 = nn.Linear(32, n_actions)

    def forward(self, x):
        x = torch.relu(self.layer1(x))
        x = torch.relu(self.layer2(x))
        return self.layer3(x)


BATCH_SIZE = 32
GAMMA = 0.9
EPS_START = 0.9
EPS_END = 0.05
EPS_DECAY = 300
TAU = 0.05
LR = 3e-3
n_actions = 2
state, info = env.reset()
n_observations = len(state)
policy_net = DQN(n_observations, n_actions).to(device)
target_net = DQN(n_observations, n_actions).to(device)
target_net.load_state_dict(policy_net.state_dict())
optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
memory = ReplayMemory(2000)
steps_done = 0


def select_action(state):
    global steps_done
    sample = random.random()
    eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1. * steps_done / EPS_DECAY)
    steps_done += 1
    if sample > eps_threshold:
        with torch.no_grad():
            return policy_net(state).max(1).indices.view(1, 1)
    else:
        return torch.tensor([[random.randrange(n_actions)]], device=device, dtype=torch.long)


def optimize_model():
    if len(memory) < BATCH_SIZE:
        return None
    transitions = memory.sample(BATCH_SIZE)
    batch = Transition(*zip(*transitions))
    non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)),
                                  device=device, dtype=torch.bool)
    non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
    state_batch = torch.cat(batch.state)
    action_batch = torch.cat(batch.action)
    reward_batch = torch.cat(batch.reward)
    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = torch.zeros(BATCH_SIZE, device=device)
    with torch.no_grad():
        next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch
    criterion = nn.SmoothL1Loss()
    loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()
    return loss.item()


returns = []
for i_episode in range(60):
    state, info = env.reset()
    state = torch.tensor(state, dtype=torch.float32, device=device).unsqueeze(0)
    total = 0.0
    for t in count():
        action = select_action(state)
        observation, reward, terminated, truncated, _ = env.step(action.item())
        total += reward
        reward = torch.tensor([reward], device=device)
        done = terminated or truncated
        if terminated:
            next_state = None
        else:
            next_state = torch.tensor(observation, dtype=torch.float32,
                                      device=device).unsqueeze(0)
        memory.push(state, action, next_state, reward)
        state = next_state
        optimize_model()
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key] * TAU + \
                target_net_state_dict[key] * (1 - TAU)
        target_net.load_state_dict(target_net_state_dict)
        if done:
            returns.append(total)
            break
    if i_episode % 20 == 0:
        print(f"episode {i_episode:3d}  return {total:+.2f}  memory {len(memory)}")

# the greedy policy from the start state
state, _ = env.reset()
greedy = 0.0
for t in count():
    with torch.no_grad():
        q = policy_net(torch.tensor([state], dtype=torch.float32))
    state, reward, terminated, truncated, _ = env.step(q.argmax(1).item())
    greedy += reward
    if terminated or truncated:
        break
with torch.no_grad():
    q_all = policy_net(torch.eye(N_STATES))
print("greedy actions:", q_all.argmax(1).tolist()[1:-1])
early, late = sum(returns[:10]) / 10, sum(returns[-10:]) / 10
print(f"RESULT {early:.4f} {late:.4f} {greedy:.4f}")
