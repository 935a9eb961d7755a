"""Packed variable-length sequences through deep bidirectional recurrent nets, in the style of
the public speaker-embedding / sequence-classification repositories: a list of sequences packed
with pack_sequence(enforce_sorted=False) (its data, batch_sizes, sorted_indices and
unsorted_indices), a 2-layer bidirectional nn.LSTM with proj_size (h_n of the projected size,
c_n of the hidden size) started from given (h0, c0) in the caller's batch order, the packed
output equal to running every sequence alone, unpack_sequence / unpad_sequence /
pad_packed_sequence(total_length=...) giving the same steps, the last layer's forward and
backward final states concatenated for a classifier, a 3-layer bidirectional GRU over
pack_padded_sequence from padded batch_first tensors with a lengths tensor, nn.LSTMCell unrolled
by hand matching a one-layer nn.LSTM, PackedSequence.to(dtype) and a float64 run, and Adam
training of the LSTM classifier. Weights from NumPy: the numbers are the same on both libraries.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <train accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import (
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
    unpad_sequence,
)

rng = np.random.default_rng(4)


def fill(module, scale=0.3):
    with torch.no_grad():
        for _, p in module.named_parameters():
            p.copy_(torch.from_numpy(rng.uniform(-scale, scale, p.shape).astype(np.float32)))


# sequences: the label says whether the running sum of channel 0 ever exceeds 1.5
lengths = rng.integers(3, 11, size=32)
seqs = [torch.from_numpy(rng.normal(0, 0.8, (n, 4)).astype(np.float32)) for n in lengths]
labels = torch.tensor([int((s[:, 0].cumsum(0) > 1.5).any()) for s in seqs])


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 12, num_layers=2, bidirectional=True, batch_first=True,
                            proj_size=6)
        self.head = nn.Linear(12, 2)

    def forward(self, packed, state=None):
        out, (h, c) = self.lstm(packed, state)
        last = torch.cat([h[-2], h[-1]], dim=1)  # last layer, forward and backward
        return self.head(last), out, (h, c)


model = Classifier()
fill(model)
batch = seqs[:6]
packed = pack_sequence(batch, enforce_sorted=False)
print("packed data", tuple(packed.data.shape), "batch_sizes", packed.batch_sizes.tolist())
print("sorted_indices", packed.sorted_indices.tolist(), "unsorted",
      packed.unsorted_indices.tolist())
h0 = torch.from_numpy(rng.normal(0, 0.1, (4, 6, 6)).astype(np.float32))
c0 = torch.from_numpy(rng.normal(0, 0.1, (4, 6, 12)).astype(np.float32))
logits, out, (h, c) = model(packed, (h0, c0))
print("h_n", tuple(h.shape), "c_n", tuple(c.shape), "out data", tuple(out.data.shape))
alone = []
for i, s in enumerate(batch):
    lo, _, (hi, ci) = model(s.unsqueeze(0), (h0[:, i:i + 1].contiguous(),
                                             c0[:, i:i + 1].contiguous()))
    alone.append((lo, hi, ci))
print("packed == one at a time:",
      all(torch.allclose(logits[i], alone[i][0][0], atol=1e-5) for i in range(6)),
      all(torch.allclose(h[:, i], alone[i][1][:, 0], atol=1e-5) for i in range(6)),
      all(torch.allclose(c[:, i], alone[i][2][:, 0], atol=1e-5) for i in range(6)))
steps = unpack_sequence(out)
padded, lens = pad_packed_sequence(out, batch_first=True, total_length=12)
again = unpad_sequence(padded, lens, batch_first=True)
print("unpacked lengths", [t.shape[0] for t in steps], "padded", tuple(padded.shape),
      "lens", lens.tolist())
print("unpack == unpad:", all(torch.equal(a, b) for a, b in zip(steps, again)),
      "padding zero:", padded[1, lens[1]:].abs().sum().item() == 0.0)
print("first logits", [round(v, 5) for v in logits[0].tolist()])

# a 3-layer bidirectional GRU over padded batches
gru = nn.GRU(4, 5, num_layers=3, bidirectional=True, batch_first=True)
fill(gru)
pad = pad_sequence(seqs[:5], batch_first=True)
lens_t = torch.tensor(lengths[:5])
pk = pack_padded_sequence(pad, lens_t, batch_first=True, enforce_sorted=False)
gout, gh = gru(pk)
gpad, _ = pad_packed_sequence(gout, batch_first=True)
print("gru h_n", tuple(gh.shape), "out", tuple(gpad.shape), "final fwd == out at last step:",
      all(torch.allclose(gh[-2, i], gpad[i, lens_t[i] - 1, :5], atol=1e-6) for i in range(5)),
      "final bwd == out at step 0:",
      all(torch.allclose(gh[-1, i], gpad[i, 0, 5:], atol=1e-6) for i in range(5)))
g64, _ = gru.double()(pk.to(torch.float64))
print("float64 packed run:", g64.data.dtype, torch.allclose(g64.data.float(), gout.data,
                                                            atol=1e-5))

# LSTMCell unrolled == one-layer LSTM
cell = nn.LSTMCell(4, 7)
fill(cell)
one = nn.LSTM(4, 7)
with torch.no_grad():
    one.weight_ih_l0.copy_(cell.weight_ih)
    one.weight_hh_l0.copy_(cell.weight_hh)
    one.bias_ih_l0.copy_(cell.bias_ih)
    one.bias_hh_l0.copy_(cell.bias_hh)
x = seqs[0].unsqueeze(1)
hx = cx = torch.zeros(1, 7)
for t in range(x.shape[0]):
    hx, cx = cell(x[t], (hx, cx))
o1, (h1, c1) = one(x)
print("LSTMCell loop == LSTM:", torch.allclose(hx, h1[0], atol=1e-6),
      torch.allclose(cx, c1[0], atol=1e-6))

# training
opt = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
for epoch in range(12):
    for b in range(0, 32, 8):
        pk = pack_sequence(seqs[b:b + 8], enforce_sorted=False)
        lo, _, _ = model(pk)
        loss = F.cross_entropy(lo, labels[b:b + 8])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    if epoch % 4 == 0:
        print(f"epoch {epoch} loss {np.mean(losses[-4:]):.5f}")
with torch.no_grad():
    lo, _, _ = model(pack_sequence(seqs, enforce_sorted=False))
acc = (lo.argmax(1) == labels).float().mean().item()
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-4:]):.5f} {acc:.4f}")
