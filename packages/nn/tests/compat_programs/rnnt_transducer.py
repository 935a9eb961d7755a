"""An RNN-Transducer trained on a toy alignment task, in the style of the public "RNN-T from
scratch" implementations (the loss written in PyTorch instead of a CUDA kernel): an LSTM
encoder over padded acoustic frames, a prediction network (Embedding of blank-prefixed labels +
GRU), the joint network over the broadcast (B, T, U+1, V) lattice with tanh, log_softmax over the
vocabulary, blank and label log-probabilities gathered with torch.gather, the forward variables
alpha (a finite log-zero) computed over anti-diagonals of the (T, U+1) lattice with torch.logaddexp and
F.pad-shifted neighbours, per-utterance lengths handled with masks and gathered final states,
the result checked against a direct double loop and its gradient against finite differences
(float64), greedy decoding (at most a few symbols per frame), and a token error rate by
edit distance. Data from NumPy. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <TER>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(17)
V, BLANK, FEAT = 6, 0, 5
TEMPLATES = torch.from_numpy(rng.normal(0, 1.0, size=(V, FEAT)).astype(np.float32))


def make_batch(B):
    labels, frames = [], []
    for _ in range(B):
        seq = rng.integers(1, V, size=rng.integers(2, 4)).tolist()
        reps = [int(r) for r in rng.integers(2, 4, size=len(seq))]
        f = torch.cat([TEMPLATES[s].repeat(r, 1) for s, r in zip(seq, reps)])
        frames.append(f + 0.3 * torch.from_numpy(rng.normal(size=f.shape).astype(np.float32)))
        labels.append(torch.tensor(seq))
    x_len = torch.tensor([len(f) for f in frames])
    y_len = torch.tensor([len(y) for y in labels])
    x = nn.utils.rnn.pad_sequence(frames, batch_first=True)
    y = nn.utils.rnn.pad_sequence(labels, batch_first=True, padding_value=BLANK)
    return x, x_len, y, y_len


def rnnt_loss(logp, y, x_len, y_len):
    """logp: (B, T, U+1, V) log-probabilities; alpha over anti-diagonals t + u = n."""
    B, T, U1, _ = logp.shape
    blank = logp[..., BLANK]                                           # (B, T, U+1)
    lab = torch.gather(logp[:, :, :-1, :], 3, y[:, None, :, None].expand(B, T, U1 - 1, 1)).squeeze(3)
    # a large finite "log zero": logaddexp(-inf, -inf) would give NaN gradients
    lab = F.pad(lab, (0, 1), value=-1e4)                               # (B, T, U+1)
    neg_inf = torch.tensor(-1e4, dtype=logp.dtype)
    alpha = torch.full((B, T, U1), -1e4, dtype=logp.dtype)
    alpha[:, 0, 0] = 0.0
    t_idx = torch.arange(T)[:, None]
    u_idx = torch.arange(U1)[None, :]
    for n in range(1, T + U1 - 1):
        from_t = torch.where(t_idx >= 1, F.pad(alpha + blank, (0, 0, 1, 0))[:, :T, :], neg_inf)
        from_u = torch.where(u_idx >= 1, F.pad(alpha + lab, (1, 0))[:, :, :U1], neg_inf)
        on_diag = (t_idx + u_idx) == n
        alpha = torch.where(on_diag, torch.logaddexp(from_t, from_u), alpha)
    b = torch.arange(B)
    final = alpha[b, x_len - 1, y_len] + blank[b, x_len - 1, y_len]
    return -final


def rnnt_loss_loop(logp, y, T, U):
    alpha = {}
    for t in range(T):
        for u in range(U + 1):
            if t == 0 and u == 0:
                alpha[t, u] = torch.zeros((), dtype=logp.dtype)
                continue
            terms = []
            if t > 0:
                terms.append(alpha[t - 1, u] + logp[t - 1, u, BLANK])
            if u > 0:
                terms.append(alpha[t, u - 1] + logp[t, u - 1, y[u - 1]])
            alpha[t, u] = torch.logsumexp(torch.stack(terms), 0)
    return -(alpha[T - 1, U] + logp[T - 1, U, BLANK])


class Transducer(nn.Module):
    def __init__(self, H=32):
        super().__init__()
        self.enc = nn.LSTM(FEAT, H, batch_first=True)
        self.emb = nn.Embedding(V, H)
        self.pred = nn.GRU(H, H, batch_first=True)
        self.j_enc, self.j_pred = nn.Linear(H, H), nn.Linear(H, H, bias=False)
        self.out = nn.Linear(H, V)

    def joint(self, f, g):
        return self.out(torch.tanh(self.j_enc(f)[:, :, None] + self.j_pred(g)[:, None]))

    def forward(self, x, y):
        f, _ = self.enc(x)
        g, _ = self.pred(self.emb(F.pad(y, (1, 0), value=BLANK)))
        return self.joint(f, g).log_softmax(-1)

    @torch.no_grad()
    def greedy(self, x, T):
        f, _ = self.enc(x[None, :T])
        hyp, h = [], None
        g, h = self.pred(self.emb(torch.tensor([[BLANK]])), h)
        for t in range(T):
            for _ in range(3):
                k = self.joint(f[:, t:t + 1], g)[0, 0, 0].argmax().item()
                if k == BLANK:
                    break
                hyp.append(k)
                g, h = self.pred(self.emb(torch.tensor([[k]])), h)
        return hyp


def edit_distance(a, b):
    d = torch.arange(len(b) + 1)
    for i, ca in enumerate(a, 1):
        prev, d = d, torch.zeros_like(d)
        d[0] = i
        for j, cb in enumerate(b, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + int(ca != cb))
    return int(d[-1])


model = Transducer()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
x, x_len, y, y_len = make_batch(3)
logp = model(x, y).double()
lat = rnnt_loss(logp, y, x_len, y_len)
loops = torch.stack([rnnt_loss_loop(logp[i], y[i], x_len[i].item(), y_len[i].item()) for i in range(3)])
print("lattice", tuple(logp.shape), "diagonal == loop:", torch.allclose(lat, loops), [round(v, 5) for v in lat.tolist()])
lp = logp.detach()[:1, :x_len[0], : y_len[0] + 1].clone().requires_grad_(True)
rnnt_loss(lp, y[:1], x_len[:1], y_len[:1]).sum().backward()
e = torch.zeros_like(lp)
k = y[0, 1].item()
e[0, 1, 1, k] = 1e-6
fd = (rnnt_loss(lp.detach() + e, y[:1], x_len[:1], y_len[:1]) - rnnt_loss(lp.detach() - e, y[:1], x_len[:1], y_len[:1])) / 2e-6
print("grad vs finite difference:", round(lp.grad[0, 1, 1, k].item(), 6), round(fd.item(), 6),
      "occupancy at the end:", round(-lp.grad[0, -1, -1, BLANK].item(), 6))

opt = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
for step in range(40):
    x, x_len, y, y_len = make_batch(8)
    loss = (rnnt_loss(model(x, y), y, x_len, y_len) / y_len).mean()
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}")
x, x_len, y, y_len = make_batch(10)
errs = sum(edit_distance(model.greedy(x[i], x_len[i].item()), y[i, :y_len[i]].tolist()) for i in range(10))
ter = errs / y_len.sum().item()
print("example:", model.greedy(x[0], x_len[0].item()), "target", y[0, :y_len[0]].tolist())
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {ter:.4f}")
