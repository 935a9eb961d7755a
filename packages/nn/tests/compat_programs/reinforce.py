"""REINFORCE on a small corridor environment written here, in the style of the public PyTorch
policy-gradient example: running reward printed with format specs, returns normalized from a
deque, settings saved as a dataclass. Runs unchanged on torch and, through a shim, on ember."""

import collections
import dataclasses
import io
import random

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


@dataclasses.dataclass
class Config:
    gamma: float = 0.9
    lr: float = 0.05
    episodes: int = 60
    seed: int = 1


class Corridor:
    """Start in the middle of a corridor of 7 cells; +1 for reaching the right end, -1 left."""

    def __init__(self, n=7):
        self.n = n

    def reset(self):
        self.pos = self.n // 2
        return self.obs()

    def obs(self):
        o = np.zeros(self.n, dtype=np.float32)
        o[self.pos] = 1.0
        return o

    def step(self, action):
        self.pos += 1 if action == 1 else -1
        done = self.pos in (0, self.n - 1)
        reward = (1.0 if self.pos == self.n - 1 else -1.0) if done else -0.01
        return self.obs(), reward, done


cfg = Config()
random.seed(cfg.seed)
torch.manual_seed(cfg.seed)
torch.cuda.manual_seed(cfg.seed)
env = Corridor()
policy = nn.Sequential(nn.Linear(7, 16), nn.Tanh(), nn.Linear(16, 2))
opt = optim.Adam(policy.parameters(), lr=cfg.lr)
eps = np.finfo(np.float32).eps.item()
running = 0.0
wins = []
for episode in range(cfg.episodes):
    state, log_probs, rewards = env.reset(), [], []
    for _ in range(50):
        logits = policy(torch.from_numpy(state).unsqueeze(0))
        probs = torch.softmax(logits, dim=-1)
        action = torch.multinomial(probs, 1).item()
        log_probs.append(torch.log(probs[0, action]))
        state, reward, done = env.step(action)
        rewards.append(reward)
        if done:
            break
    R, returns = 0.0, collections.deque()
    for r in reversed(rewards):
        R = r + cfg.gamma * R
        returns.appendleft(R)
    returns = torch.tensor(returns)
    if len(returns) > 1:
        returns = (returns - returns.mean()) / (returns.std() + eps)
    loss = torch.stack([-lp * g for lp, g in zip(log_probs, returns)]).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    running = 0.05 * sum(rewards) + 0.95 * running
    wins.append(rewards[-1] > 0)
    if episode % 20 == 0:
        print("Episode {}\tLast reward: {:+.2f}\tAverage reward: {:.2f}\tloss {:.3f}".format(
            episode, rewards[-1], running, loss))

buf = io.BytesIO()
torch.save({"config": cfg, "policy": policy.state_dict(), "wins": torch.tensor(wins)}, buf)
buf.seek(0)
with torch.serialization.safe_globals([Config]):
    ckpt = torch.load(buf)
assert ckpt["config"] == cfg and ckpt["wins"].dtype == torch.bool

# export the policy to ONNX and check it in onnxruntime
try:
    import onnx  # noqa: F401
    import onnxruntime as ort
except ImportError:
    ort = None
if ort is None:
    print("onnx: skipped (onnx/onnxruntime not installed)")
else:
    f = io.BytesIO()
    torch.onnx.export(policy, (torch.from_numpy(env.reset()).unsqueeze(0),), f,
                      input_names=["obs"], output_names=["logits"], opset_version=17,
                      dynamo=False, dynamic_axes={"obs": {0: "batch"}, "logits": {0: "batch"}})
    sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    obs = np.eye(7, dtype=np.float32)  # every cell at once: another batch size
    with torch.no_grad():
        want = policy(torch.from_numpy(obs)).numpy()
    err = float(np.abs(sess.run(None, {"obs": obs})[0] - want).max())
    assert err < 1e-5, err
    print(f"onnx: exported, onnxruntime max abs error {err:.1e}")
print(f"RESULT {np.mean(wins[:20]):.3f} {np.mean(wins[-20:]):.3f}")
