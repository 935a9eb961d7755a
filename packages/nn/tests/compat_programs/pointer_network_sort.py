"""Pointer networks in the style of the public pointer-network / attention-model (Kool et al.)
code on learning to sort sets of numbers: an LSTM encoder over embedded inputs, an LSTMCell
decoder fed the embedding of the previously pointed-to element (gathered with
torch.gather on an expanded index), additive (Bahdanau) attention with v^T tanh(W1 e + W2 d)
as pointer logits, already-chosen positions masked with masked_fill(-inf) through a boolean
visited mask updated by scatter, teacher forcing on the argsort targets (torch.sort indices)
with F.cross_entropy over the pointer logits, greedy decoding and a width-3 beam search over
log-probabilities (topk over flattened beam x position scores, integer division and
remainder to recover parents), and sequence accuracy / Kendall-tau-like pair accuracy.
Data from NumPy. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <greedy sequence
accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(148)
L, H = 6, 48


def batch(n):
    x = torch.from_numpy(rng.random((n, L)).astype(np.float32))
    return x, torch.sort(x, dim=1).indices


class PointerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(1, H)
        self.encoder = nn.LSTM(H, H, batch_first=True)
        self.decoder = nn.LSTMCell(H, H)
        self.W1, self.W2 = nn.Linear(H, H, bias=False), nn.Linear(H, H, bias=False)
        self.v = nn.Linear(H, 1, bias=False)
        self.start = nn.Parameter(torch.zeros(H))
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(H), p.shape).astype(np.float32)))

    def encode(self, x):
        emb = self.embed(x.unsqueeze(-1))
        enc, (h, c) = self.encoder(emb)
        return emb, enc, (h[0], c[0]), self.W1(enc)

    def step(self, inp, state, enc_proj, visited):
        h, c = self.decoder(inp, state)
        logits = self.v(torch.tanh(enc_proj + self.W2(h).unsqueeze(1))).squeeze(-1)
        return logits.masked_fill(visited, float("-inf")), (h, c)

    def forward(self, x, targets):
        emb, enc, state, proj = self.encode(x)
        b = x.shape[0]
        visited = torch.zeros(b, L, dtype=torch.bool)
        inp = self.start.expand(b, -1)
        out = []
        for t in range(L):
            logits, state = self.step(inp, state, proj, visited)
            out.append(logits)
            idx = targets[:, t]
            visited = visited.scatter(1, idx.unsqueeze(1), True)
            inp = torch.gather(emb, 1, idx.view(b, 1, 1).expand(-1, 1, H)).squeeze(1)
        return torch.stack(out, 1)

    @torch.no_grad()
    def greedy(self, x):
        emb, enc, state, proj = self.encode(x)
        b = x.shape[0]
        visited = torch.zeros(b, L, dtype=torch.bool)
        inp, picks = self.start.expand(b, -1), []
        for _ in range(L):
            logits, state = self.step(inp, state, proj, visited)
            idx = logits.argmax(-1)
            picks.append(idx)
            visited = visited.scatter(1, idx.unsqueeze(1), True)
            inp = emb[torch.arange(b), idx]
        return torch.stack(picks, 1)

    @torch.no_grad()
    def beam(self, x, width=3):  # one instance at a time
        emb, enc, (h, c), proj = self.encode(x.unsqueeze(0))
        scores = torch.zeros(1)
        seqs = torch.zeros(1, 0, dtype=torch.long)
        visited = torch.zeros(1, L, dtype=torch.bool)
        inp = self.start.unsqueeze(0)
        for _ in range(L):
            k = seqs.shape[0]
            logits, (h, c) = self.step(inp, (h, c), proj.expand(k, -1, -1), visited)
            cand = (scores.unsqueeze(1) + F.log_softmax(logits, -1)).flatten()
            top = torch.topk(cand, min(width, int(torch.isfinite(cand).sum())))
            parent, pos = top.indices // L, top.indices % L
            scores = top.values
            seqs = torch.cat([seqs[parent], pos.unsqueeze(1)], 1)
            visited = visited[parent].scatter(1, pos.unsqueeze(1), True)
            h, c, inp = h[parent], c[parent], emb[0, pos]
        return seqs[0], scores[0]


model = PointerNet()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=50, T_mult=2)
losses = []
for step in range(150):
    x, y = batch(64)
    logits = model(x, y)
    loss = F.cross_entropy(logits.reshape(-1, L), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 2.0)
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 30 == 0:
        print(f"step {step:3d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.6f}")

x, y = batch(200)
pred = model.greedy(x)
seq_acc = (pred == y).all(1).float().mean().item()
vals = torch.gather(x, 1, pred)
pairs = (vals[:, 1:] >= vals[:, :-1]).float().mean().item()
print(f"greedy: sequence accuracy {seq_acc:.4f} ordered neighbours {pairs:.4f} permutations: "
      f"{bool((pred.sort(1).values == torch.arange(L)).all())}")
beam_ok = 0
for i in range(20):
    seq, score = model.beam(x[i])
    beam_ok += int(torch.equal(seq, y[i]))
    if i < 2:
        print(f"beam {seq.tolist()} target {y[i].tolist()} log-prob {score.item():.4f}")
print(f"beam sequence accuracy {beam_ok / 20:.4f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {seq_acc:.4f}")
