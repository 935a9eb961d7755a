"""Proximal policy optimisation with generalised advantage estimation, in the style of the
public single-file PPO implementations (CleanRL-like, written anew): a vectorised point-mass
environment written here with tensors, an actor-critic with orthogonal-initialised layers
(nn.init.orthogonal_ with gains, then NumPy weights for reproducibility), a state-independent
log-std nn.Parameter and torch.distributions.Normal (log_prob(...).sum(-1), entropy), actions
drawn by the reparameterisation mean + std * eps with eps from NumPy, rollout buffers
preallocated with torch.zeros and filled in place, GAE computed backwards with a done mask,
returns = advantages + values, minibatches by a NumPy permutation, the clipped surrogate
(ratio = exp(new - old log-prob), torch.clamp to 1 +- eps, torch.max of the two losses),
a clipped value loss, the approximate KL ((ratio - 1) - log ratio).mean() and the clip
fraction, advantage normalisation, Adam(eps=1e-5) with the learning rate annealed by hand
through param_groups, and nn.utils.clip_grad_norm_. Weights, noise and batches from NumPy: the
run is the same on both libraries. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember.
Prints RESULT <first return> <last return> <last approx kl>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.distributions.normal import Normal

parser = argparse.ArgumentParser()
parser.add_argument("--updates", type=int, default=12)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
N_ENVS, N_STEPS, OBS, ACT = 8, 32, 4, 2
GAMMA, LAM, CLIP, EPOCHS, MINIBATCHES = 0.9, 0.95, 0.2, 4, 4


class PointMass:
    """Push a point towards the origin: obs (x, y, vx, vy), reward -distance, episodes of 24."""

    def __init__(self, n):
        self.n = n
        self.state = torch.zeros(n, OBS)
        self.t = torch.zeros(n, dtype=torch.long)

    def reset_where(self, mask):
        k = int(mask.sum())
        if k:
            fresh = torch.from_numpy(rng.uniform(-1, 1, (k, OBS)).astype(np.float32))
            fresh[:, 2:] = 0
            self.state[mask] = fresh
            self.t[mask] = 0

    def step(self, action):
        a = action.clamp(-1, 1)
        self.state[:, 2:] = 0.8 * self.state[:, 2:] + 0.5 * a
        self.state[:, :2] = self.state[:, :2] + 0.1 * self.state[:, 2:]
        self.t += 1
        reward = -self.state[:, :2].norm(dim=1) - 0.01 * (a ** 2).sum(1)
        done = self.t >= 24
        return reward, done


def layer_init(layer, std=math.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(OBS, 32)), nn.Tanh(),
                                    layer_init(nn.Linear(32, 32)), nn.Tanh(),
                                    layer_init(nn.Linear(32, 1), std=1.0))
        self.actor_mean = nn.Sequential(layer_init(nn.Linear(OBS, 32)), nn.Tanh(),
                                        layer_init(nn.Linear(32, 32)), nn.Tanh(),
                                        layer_init(nn.Linear(32, ACT), std=0.01))
        self.actor_logstd = nn.Parameter(torch.zeros(1, ACT))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None, eps=None):
        mean = self.actor_mean(x)
        std = self.actor_logstd.expand_as(mean).exp()
        probs = Normal(mean, std)
        if action is None:
            action = mean + std * eps
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


agent = Agent()
r = np.random.default_rng(1)
with torch.no_grad():  # orthogonal_ drew from torch's generator: NumPy's orthogonal matrices
    for name, p in agent.named_parameters():
        if p.dim() == 2:
            q, _ = np.linalg.qr(r.normal(size=(max(p.shape), min(p.shape))))
            q = q if p.shape[0] >= p.shape[1] else q.T
            gain = 0.01 if name.startswith("actor_mean.4") else 1.0 if "critic.4" in name \
                else math.sqrt(2)
            p.copy_(torch.from_numpy((gain * q[:p.shape[0], :p.shape[1]]).astype(np.float32)))
print(f"orthogonal rows: {torch.allclose(agent.critic[0].weight.T @ agent.critic[0].weight / 2, torch.eye(OBS), atol=1e-5)}")
optimizer = torch.optim.Adam(agent.parameters(), lr=3e-3, eps=1e-5)

env = PointMass(N_ENVS)
env.reset_where(torch.ones(N_ENVS, dtype=torch.bool))
obs_buf = torch.zeros(N_STEPS, N_ENVS, OBS)
act_buf = torch.zeros(N_STEPS, N_ENVS, ACT)
logp_buf = torch.zeros(N_STEPS, N_ENVS)
rew_buf = torch.zeros(N_STEPS, N_ENVS)
done_buf = torch.zeros(N_STEPS, N_ENVS)
val_buf = torch.zeros(N_STEPS, N_ENVS)
next_done = torch.zeros(N_ENVS)
returns_log, kl_log = [], []

for update in range(args.updates):
    frac = 1.0 - update / args.updates
    optimizer.param_groups[0]["lr"] = frac * 3e-3
    ep_reward = torch.zeros(N_ENVS)
    for step in range(N_STEPS):
        obs = env.state.clone()
        obs_buf[step] = obs
        done_buf[step] = next_done
        with torch.no_grad():
            eps = torch.from_numpy(rng.normal(size=(N_ENVS, ACT)).astype(np.float32))
            action, logprob, _, value = agent.get_action_and_value(obs, eps=eps)
            val_buf[step] = value.flatten()
        act_buf[step], logp_buf[step] = action, logprob
        reward, done = env.step(action)
        rew_buf[step] = reward
        ep_reward += reward
        next_done = done.float()
        env.reset_where(done)
    returns_log.append(ep_reward.mean().item() / N_STEPS)

    with torch.no_grad():
        next_value = agent.get_value(env.state).reshape(1, -1)
        advantages = torch.zeros_like(rew_buf)
        lastgaelam = 0
        for t in reversed(range(N_STEPS)):
            if t == N_STEPS - 1:
                nextnonterminal, nextvalues = 1.0 - next_done, next_value
            else:
                nextnonterminal, nextvalues = 1.0 - done_buf[t + 1], val_buf[t + 1]
            delta = rew_buf[t] + GAMMA * nextvalues * nextnonterminal - val_buf[t]
            advantages[t] = lastgaelam = delta + GAMMA * LAM * nextnonterminal * lastgaelam
        returns = advantages + val_buf

    b_obs, b_act = obs_buf.reshape(-1, OBS), act_buf.reshape(-1, ACT)
    b_logp, b_adv = logp_buf.reshape(-1), advantages.reshape(-1)
    b_ret, b_val = returns.reshape(-1), val_buf.reshape(-1)
    batch = N_ENVS * N_STEPS
    mb = batch // MINIBATCHES
    clipfracs = []
    for epoch in range(EPOCHS):
        perm = torch.from_numpy(rng.permutation(batch))
        for start in range(0, batch, mb):
            idx = perm[start:start + mb]
            _, newlogp, entropy, newvalue = agent.get_action_and_value(b_obs[idx], b_act[idx])
            logratio = newlogp - b_logp[idx]
            ratio = logratio.exp()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs.append(((ratio - 1.0).abs() > CLIP).float().mean().item())
            adv = b_adv[idx]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - CLIP, 1 + CLIP)).mean()
            newvalue = newvalue.view(-1)
            v_unclipped = (newvalue - b_ret[idx]) ** 2
            v_clipped = b_val[idx] + torch.clamp(newvalue - b_val[idx], -CLIP, CLIP)
            v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_ret[idx]) ** 2).mean()
            loss = pg_loss - 0.0 * entropy.mean() + 0.5 * v_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            optimizer.step()
    y_pred, y_true = b_val, b_ret
    explained = 1 - torch.var(y_true - y_pred) / torch.var(y_true)
    kl_log.append(approx_kl.item())
    print(f"update {update}: mean reward {returns_log[-1]:.4f} pg {pg_loss.item():.4f} "
          f"v {v_loss.item():.4f} kl {approx_kl.item():.5f} clipfrac {np.mean(clipfracs):.4f} "
          f"explained var {explained.item():.4f} lr {optimizer.param_groups[0]['lr']:.5f} "
          f"std {agent.actor_logstd.exp().mean().item():.4f}")
print(f"RESULT {returns_log[0]:.4f} {np.mean(returns_log[-2:]):.4f} {kl_log[-1]:.5f}")
