"""Speculative decoding in the style of the public speculative-sampling reference code and
Hugging Face assisted generation: a larger "target" and a smaller "draft" causal GRU language
model trained briefly on a synthetic grammar (NumPy), temperature and top-k / top-p filtering
of logits (torch.topk, sort + cumsum + scatter of the removal mask, masked_fill -inf),
sampling by inverse CDF from NumPy uniforms (torch.searchsorted on cumsum), the draft
proposing gamma tokens, the target scoring them in one batched pass, acceptance with
probability min(1, p / q), resampling from the normalized residual max(p - q, 0) on rejection,
a bonus token when all are accepted, key/value state carried as GRU hidden states sliced back on
rejection, and a Monte Carlo check that speculative sampling reproduces the target's next-token
distribution (total variation against torch.softmax). Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember. Prints RESULT <target loss>
<acceptance rate> <total variation>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(144)
V = 10
trans = rng.dirichlet(np.full(V, 0.3), size=V)


def corpus(n, T=24):
    x = np.zeros((n, T), np.int64)
    x[:, 0] = rng.integers(0, V, n)
    for t in range(1, T):
        u = rng.random(n)
        x[:, t] = (trans[x[:, t - 1]].cumsum(1) < u[:, None]).sum(1).clip(max=V - 1)
    return torch.from_numpy(x)


class LM(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.emb = nn.Embedding(V, h)
        self.rnn = nn.GRU(h, h, batch_first=True)
        self.out = nn.Linear(h, V)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(h), p.shape).astype(np.float32)))

    def forward(self, x, state=None):
        y, state = self.rnn(self.emb(x), state)
        return self.out(y), state


def train(model, steps):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        x = corpus(32)
        logits, _ = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


target, draft = LM(48), LM(8)
t_loss, d_loss = train(target, 60), train(draft, 15)
print(f"target loss {t_loss:.5f} draft loss {d_loss:.5f}")


def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    logits = logits / temperature
    if top_k > 0:
        kth = torch.topk(logits, top_k).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, idx = torch.sort(logits, descending=True)
        cum = torch.softmax(sorted_logits, -1).cumsum(-1)
        remove = cum > top_p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        logits = logits.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))
    return logits


def sample(probs):
    u = torch.from_numpy(rng.random((*probs.shape[:-1], 1)).astype(np.float32))
    return torch.searchsorted(probs.cumsum(-1), u * probs.sum(-1, keepdim=True)).clamp_max(V - 1).squeeze(-1)


lg = torch.tensor([[2.0, 1.0, 0.5, 0.1, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
print(f"top-k 3 keeps {torch.isfinite(filter_logits(lg, top_k=3)).sum().item()} "
      f"top-p 0.7 keeps {torch.isfinite(filter_logits(lg, top_p=0.7)).sum().item()}")


@torch.no_grad()
def speculative(prefix, n_new, gamma=4, temp=1.0):
    seq = prefix.clone()
    _, t_state = target(seq[:, :-1])
    _, d_state = draft(seq[:, :-1])
    proposed = accepted = 0
    while seq.shape[1] < prefix.shape[1] + n_new:
        d_tok, d_probs, st = [], [], d_state
        last = seq[:, -1:]
        for _ in range(gamma):
            logits, st = draft(last, st)
            q = torch.softmax(filter_logits(logits[:, -1], temp), -1)
            last = sample(q).view(1, 1)
            d_tok.append(last)
            d_probs.append(q)
        cand = torch.cat([seq[:, -1:]] + d_tok, 1)
        logits, t_all = target(cand, t_state)
        p_all = torch.softmax(filter_logits(logits[0], temp), -1)
        n_ok = 0
        for i in range(gamma):
            tok = d_tok[i].item()
            p, q = p_all[i, tok], d_probs[i][0, tok]
            if rng.random() < min(1.0, (p / q).item()):
                n_ok += 1
            else:
                resid = (p_all[i] - d_probs[i][0]).clamp_min(0)
                nxt = sample(resid / resid.sum()).view(1, 1)
                break
        else:
            nxt = sample(p_all[gamma]).view(1, 1)
        proposed += gamma
        accepted += n_ok
        seq = torch.cat([seq] + d_tok[:n_ok] + [nxt], 1)
        # re-run the states over the accepted tokens (the slice that survives)
        _, t_state = target(cand[:, :n_ok + 1], t_state)
        _, d_state = draft(cand[:, :n_ok + 1], d_state)
    return seq[:, :prefix.shape[1] + n_new], accepted / proposed


prefix = torch.tensor([[3, 1, 4]])
out, rate = speculative(prefix, 40)
print(f"generated {out.shape[1]} tokens acceptance {rate:.4f} first {out[0, :12].tolist()}")

# the first speculative token is distributed as the target's next-token distribution
with torch.no_grad():
    p_true = torch.softmax(target(prefix)[0][0, -1], -1)
counts = torch.zeros(V)
for _ in range(200):
    tok = speculative(prefix, 1, gamma=2)[0][0, -1]
    counts[tok] += 1
tv = 0.5 * (counts / counts.sum() - p_true).abs().sum().item()
print(f"target next-token top {p_true.argmax().item()} p {p_true.max().item():.4f} empirical tv {tv:.4f}")
print(f"RESULT {t_loss:.5f} {rate:.4f} {tv:.4f}")
