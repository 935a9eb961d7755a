"""Decision Transformer (Chen et al.) in the style of the public reference and minimal ports:
offline trajectories from a scripted behaviour policy on a 1-D chain environment, returns-to-go
by flip / cumsum / flip (and a discounted variant by a reversed loop checked against a
Toeplitz matrix of powers), (R, s, a) tokens interleaved by torch.stack(dim=2).reshape, learned
timestep embeddings, a causal nn.TransformerEncoder (norm_first, GELU, mask from
generate_square_subsequent_mask, key padding masks for left-padded short contexts), action
prediction from the state tokens, context windows sampled with padding, and evaluation by
conditioning on a target return and rolling the model out autoregressively (with
torch.backends.mha.set_fastpath_enabled(False), the usual workaround for the fast path's NaN
rows under left padding). Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <return achieved>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1506)
L, T, K = 8, 12, 6  # chain length, episode length, context


def env_step(s, a):
    s2 = int(np.clip(s + (1 if a == 1 else -1), 0, L - 1))
    return s2, (1.0 if s2 == L - 1 else 0.0)


def rollout(eps):
    s, S, A, R = int(rng.integers(0, 3)), [], [], []
    for _ in range(T):
        a = 1 if rng.uniform() > eps else int(rng.integers(0, 2))
        S.append(s)
        A.append(a)
        s, r = env_step(s, a)
        R.append(r)
    return np.array(S), np.array(A), np.array(R, dtype=np.float32)


data = [rollout(eps) for eps in rng.uniform(0.1, 1.0, 120)]
rewards = torch.from_numpy(np.stack([d[2] for d in data]))
rtg = torch.flip(torch.cumsum(torch.flip(rewards, [1]), 1), [1])
print(f"returns-to-go[0] {rtg[0, :6].tolist()} first == return: {torch.equal(rtg[:, 0], rewards.sum(1))}")
gamma = 0.9
disc = torch.zeros_like(rewards)
running = torch.zeros(rewards.shape[0])
for t in reversed(range(T)):
    running = rewards[:, t] + gamma * running
    disc[:, t] = running
idx = torch.arange(T)
toeplitz = torch.where(idx[None] >= idx[:, None], gamma ** (idx[None] - idx[:, None]).float(), torch.zeros(()))
print(f"discounted loop == toeplitz matmul: {torch.allclose(disc, rewards @ toeplitz.T, atol=1e-6)}")
print(f"dataset returns mean {rewards.sum(1).mean().item():.4f} max {rewards.sum(1).max().item():.1f}")


class DecisionTransformer(nn.Module):
    def __init__(self, h=32, heads=2, layers=2):
        super().__init__()
        self.embed_t = nn.Embedding(T, h)
        self.embed_s = nn.Embedding(L, h)
        self.embed_a = nn.Embedding(2, h)
        self.embed_r = nn.Linear(1, h)
        self.ln = nn.LayerNorm(h)
        layer = nn.TransformerEncoderLayer(h, heads, 2 * h, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.tf = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(h, 2)

    def forward(self, r, s, a, t, pad):
        B, k = s.shape
        te = self.embed_t(t)
        tokens = torch.stack([self.embed_r(r.unsqueeze(-1)) + te, self.embed_s(s) + te,
                              self.embed_a(a) + te], dim=2).reshape(B, 3 * k, -1)
        mask = nn.Transformer.generate_square_subsequent_mask(3 * k)
        pad3 = pad.repeat_interleave(3, dim=1)
        h = self.tf(self.ln(tokens), mask=mask, src_key_padding_mask=pad3)
        return self.head(h.reshape(B, k, 3, -1)[:, :, 1])  # predict a_t from s_t's token


def batch(m):
    r, s, a, t, pad = [], [], [], [], []
    for _ in range(m):
        i = int(rng.integers(0, len(data)))
        end = int(rng.integers(1, T + 1))
        start = max(0, end - K)
        n = end - start
        padn = K - n
        S, A, _ = data[i]
        r.append(np.concatenate([np.zeros(padn), rtg[i, start:end].numpy()]))
        s.append(np.concatenate([np.zeros(padn, int), S[start:end]]))
        a.append(np.concatenate([np.zeros(padn, int), A[start:end]]))
        t.append(np.concatenate([np.zeros(padn, int), np.arange(start, end)]))
        pad.append(np.arange(K) < padn)
    def f(v, dt):
        return torch.from_numpy(np.array(v)).to(dt)

    return f(r, torch.float32), f(s, torch.long), f(a, torch.long), f(t, torch.long), f(pad, torch.bool)


model = DecisionTransformer()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 0.1, p.shape).astype(np.float32)))
        elif "norm" not in name and not name.startswith("ln"):
            p.zero_()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
losses = []
for step in range(60):
    r, s, a, t, pad = batch(32)
    logits = model(r, s, a, t, pad)
    loss = F.cross_entropy(logits[~pad], a[~pad])
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f}")

model.eval()
# left-padded contexts leave the padded query rows with every key masked: torch's native fast
# path (eval + no_grad) turns those rows to NaN that then leaks through every key
# (pytorch/pytorch#118628), so rollouts go through the regular path as in training
torch.backends.mha.set_fastpath_enabled(False)


@torch.no_grad()
def evaluate(target, start=0):
    s, total = start, 0.0
    R, S, A, Tt = [target], [s], [0], [0]
    for step in range(T):
        k = min(len(S), K)
        padn = K - k
        pad = torch.tensor([[True] * padn + [False] * k])
        def f(v, dt, padn=padn, k=k):
            return torch.tensor([[0] * padn + v[-k:]], dtype=dt)

        logits = model(f(R, torch.float32), f(S, torch.long), f(A, torch.long), f(Tt, torch.long), pad)
        act = int(logits[0, -1].argmax())
        A[-1] = act
        s, rew = env_step(s, act)
        total += rew
        if step + 1 < T:
            R.append(R[-1] - rew)
            S.append(s)
            A.append(0)
            Tt.append(step + 1)
    return total


for target in (0.0, 3.0, 6.0):
    print(f"target return {target:.0f}: achieved {evaluate(target):.0f}")
best = evaluate(float(rewards.sum(1).max()))
torch.backends.mha.set_fastpath_enabled(True)
print(f"RESULT {np.mean(losses[:3]):.5f} {np.mean(losses[-3:]):.5f} {best:.1f}")
