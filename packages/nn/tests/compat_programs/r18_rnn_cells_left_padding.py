"""Recurrent-network plumbing as sequence-labelling and decoder code writes it: nn.RNN with
nonlinearity="relu" (bidirectional, two layers, an explicit h0), nn.GRU fed an initial state
from an encoder, the module run step by step through nn.RNNCell / nn.GRUCell / nn.LSTMCell that
share its weights (weight_ih_l0 / weight_hh_l0 copied into the cells) and required to agree,
left padding for decoder-only batching (pad_sequence(padding_side="left")), unpad_sequence and
unpack_sequence back to lists, pack_sequence(enforce_sorted=False) and the
PackedSequence.sorted_indices / unsorted_indices round trip, flatten_parameters and all_weights,
a per-timestep masked loss, and a sequence tagger trained on the packed path. Data from NumPy:
the run is the same on both libraries. Written against `torch`; the test suite runs it unchanged
on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <token
accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import (
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
    unpad_sequence,
)

rng = np.random.default_rng(404)


def fill_(m, std=0.3):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, std, p.shape).astype(np.float32)))


seqs = [torch.from_numpy(rng.normal(size=(n, 3)).astype(np.float32)) for n in (4, 6, 2, 5)]
left = pad_sequence(seqs, batch_first=True, padding_side="left", padding_value=0.0)
right = pad_sequence(seqs, batch_first=True)
lens = torch.tensor([len(s) for s in seqs])
print("left padded", tuple(left.shape), "first rows zero", [bool((left[i, : 6 - n] == 0).all()) for i, n in enumerate(lens.tolist())])
print("right == left rolled", all(torch.equal(right[i, :n], left[i, 6 - n:]) for i, n in enumerate(lens.tolist())))
back = unpad_sequence(right, lens, batch_first=True)
print("unpad", [tuple(b.shape) for b in back], all(torch.equal(a, b) for a, b in zip(back, seqs)))
packed = pack_sequence(seqs, enforce_sorted=False)
print("packed batch_sizes", packed.batch_sizes.tolist(), "sorted", packed.sorted_indices.tolist(), "unsorted", packed.unsorted_indices.tolist())
print("unpack", all(torch.equal(a, b) for a, b in zip(unpack_sequence(packed), seqs)))

# an RNN with relu, run by the module and by cells sharing its weights
rnn = nn.RNN(3, 5, num_layers=2, nonlinearity="relu", bidirectional=True, batch_first=True)
fill_(rnn)
rnn.flatten_parameters()
print("all_weights", [[tuple(w.shape) for w in layer] for layer in rnn.all_weights][:2])
h0 = torch.from_numpy(rng.normal(0, 0.1, (4, 1, 5)).astype(np.float32))
x = seqs[1].unsqueeze(0)
out, hn = rnn(x, h0)
cells = {}
for layer in range(2):
    for d, suffix in enumerate(("", "_reverse")):
        cell = nn.RNNCell(3 if layer == 0 else 10, 5, nonlinearity="relu")
        with torch.no_grad():
            cell.weight_ih.copy_(getattr(rnn, f"weight_ih_l{layer}{suffix}"))
            cell.weight_hh.copy_(getattr(rnn, f"weight_hh_l{layer}{suffix}"))
            cell.bias_ih.copy_(getattr(rnn, f"bias_ih_l{layer}{suffix}"))
            cell.bias_hh.copy_(getattr(rnn, f"bias_hh_l{layer}{suffix}"))
        cells[(layer, d)] = cell
inp = x[0]
finals = []
for layer in range(2):
    outs = []
    for d in range(2):
        h = h0[2 * layer + d]
        steps = range(inp.shape[0]) if d == 0 else reversed(range(inp.shape[0]))
        res = [None] * inp.shape[0]
        for t in steps:
            h = cells[(layer, d)](inp[t:t + 1], h)
            res[t] = h
        outs.append(torch.cat(res))
        finals.append(h)
    inp = torch.cat(outs, 1)
print("cells == RNN output", torch.allclose(inp, out[0], atol=1e-5), "h_n", torch.allclose(torch.cat(finals), hn[:, 0], atol=1e-5))

# GRU and LSTM cells vs the modules
gru = nn.GRU(3, 4)
fill_(gru)
gcell = nn.GRUCell(3, 4)
lstm = nn.LSTM(3, 4)
fill_(lstm)
lcell = nn.LSTMCell(3, 4)
with torch.no_grad():
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        getattr(gcell, name).copy_(getattr(gru, name + "_l0"))
        getattr(lcell, name).copy_(getattr(lstm, name + "_l0"))
xs = seqs[0].unsqueeze(1)
g_out, g_h = gru(xs, torch.full((1, 1, 4), 0.2))
l_out, (l_h, l_c) = lstm(xs)
h = torch.full((1, 4), 0.2)
hl, cl = torch.zeros(1, 4), torch.zeros(1, 4)
for t in range(xs.shape[0]):
    h = gcell(xs[t], h)
    hl, cl = lcell(xs[t], (hl, cl))
print("GRUCell == GRU", torch.allclose(h, g_h[0], atol=1e-6), "LSTMCell == LSTM", torch.allclose(hl, l_h[0], atol=1e-6) and torch.allclose(cl, l_c[0], atol=1e-6))
print("unbatched cell input", tuple(gcell(xs[0, 0]).shape), "unbatched RNN", tuple(gru(seqs[0])[0].shape))

# a tagger: label = sign of the running sum of the first feature
data = []
for _ in range(160):
    n = int(rng.integers(3, 10))
    s = rng.normal(size=(n, 3)).astype(np.float32)
    data.append((torch.from_numpy(s), torch.from_numpy((np.cumsum(s[:, 0]) > 0).astype(np.int64))))


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.GRU(3, 12, batch_first=True, bidirectional=False)
        self.out = nn.Linear(12, 2)

    def forward(self, xs):
        out, _ = self.enc(pack_sequence(xs, enforce_sorted=False))
        padded, lengths = pad_packed_sequence(out, batch_first=True)
        return self.out(padded), lengths


tagger = Tagger()
fill_(tagger, 0.2)
opt = torch.optim.Adam(tagger.parameters(), lr=0.01)
losses = []
for step in range(80):
    idx = rng.choice(128, 16, replace=False)
    xs = [data[i][0] for i in idx]
    ys = pad_sequence([data[i][1] for i in idx], batch_first=True, padding_value=-100)
    logits, lengths = tagger(xs)
    loss = F.cross_entropy(logits.reshape(-1, 2), ys.reshape(-1), ignore_index=-100)
    mask = torch.arange(ys.shape[1])[None] < lengths[:, None]
    manual = (F.cross_entropy(logits.transpose(1, 2), ys.clamp(min=0), reduction="none") * mask).sum() / mask.sum()
    if step == 0:
        print("ignore_index == masked mean", torch.allclose(loss, manual, atol=1e-6))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f}")
with torch.no_grad():
    xs = [d[0] for d in data[128:]]
    ys = [d[1] for d in data[128:]]
    logits, lengths = tagger(xs)
    preds = unpad_sequence(logits.argmax(-1), lengths, batch_first=True)
    acc = torch.cat([p == y for p, y in zip(preds, ys)]).float().mean().item()
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
