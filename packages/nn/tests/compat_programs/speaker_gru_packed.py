"""Utterance-level speaker classification with packed sequences, in the style of the public
speaker-ID / keyword-spotting recipes: variable-length feature sequences packed with
nn.utils.rnn.pack_sequence(enforce_sorted=False) (its data / batch_sizes / sorted_indices /
unsorted_indices printed, the repr of a small PackedSequence), a 2-layer bidirectional GRU with
an explicit h0, h_n viewed as (num_layers, num_directions, batch, hidden) to take the last layer's
forward and backward states, pad_packed_sequence(batch_first=True, padding_value, total_length),
unpack_sequence / unpad_sequence round trips, attentive statistics pooling (masked softmax
weights, weighted mean and standard deviation), an nn.RNN(nonlinearity="relu") and an
nn.LSTM(proj_size=...) over the same packed batch, PackedSequence.to(dtype), gradients flowing
into the packed data, the GRU's weight names (weight_hh_l1_reverse) and flatten_parameters(),
and a short training run with gradient clipping. Weights and data from NumPy: the run is the same
on both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

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

rng = np.random.default_rng(41)
FEAT, HID, N_SPK = 6, 12, 4

small = [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0, 5.0]), torch.tensor([6.0])]
ps = pack_sequence(small, enforce_sorted=False)
print(ps)
print("batch_sizes", ps.batch_sizes.tolist(), "sorted", ps.sorted_indices.tolist(), "unsorted",
      ps.unsorted_indices.tolist(), "is_cuda", ps.is_cuda)
padded, lens = pad_packed_sequence(ps, batch_first=True, padding_value=-1.0, total_length=4)
print("padded", padded.tolist(), "lengths", lens.tolist(), lens.dtype)
print("unpack round trip:", all(torch.equal(a, b) for a, b in zip(unpack_sequence(ps), small)))
print("unpad round trip:", all(torch.equal(a, b) for a, b in
                               zip(unpad_sequence(pad_sequence(small, batch_first=True), torch.tensor([2, 3, 1]),
                                                  batch_first=True), small)))
print("to(float64)", ps.to(torch.float64).data.dtype, "sorted kept", ps.to(torch.float64).sorted_indices.tolist())

# utterances: each speaker has a mean feature vector and a drift; lengths 5..14
utts, spk = [], []
means = rng.normal(0, 1.0, (N_SPK, FEAT))
for i in range(32):
    s = i % N_SPK
    T = 5 + (i * 7) % 10
    drift = np.linspace(0, 1, T)[:, None] * means[(s + 1) % N_SPK] * 0.3
    utts.append(torch.from_numpy((means[s] + drift + rng.normal(0, 0.8, (T, FEAT))).astype(np.float32)))
    spk.append(s)
Y = torch.tensor(spk)


class SpeakerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(FEAT, HID, num_layers=2, bidirectional=True, batch_first=True)
        self.att = nn.Linear(2 * HID, 1)
        self.out = nn.Linear(4 * HID + 2 * HID, N_SPK)

    def forward(self, seqs):
        packed = pack_sequence(seqs, enforce_sorted=False)
        h0 = torch.zeros(2 * 2, len(seqs), HID)
        out, h_n = self.gru(packed, h0)
        h_n = h_n.view(2, 2, len(seqs), HID)  # (layers, directions, batch, hidden)
        last = torch.cat([h_n[-1, 0], h_n[-1, 1]], dim=-1)
        y, lengths = pad_packed_sequence(out, batch_first=True)
        mask = torch.arange(y.shape[1])[None, :] < lengths[:, None]
        a = self.att(y).squeeze(-1).masked_fill(~mask, float("-inf")).softmax(-1)
        mu = (a[..., None] * y).sum(1)
        sd = ((a[..., None] * (y - mu[:, None]) ** 2).sum(1)).clamp_min(1e-6).sqrt()
        return self.out(torch.cat([mu, sd, last], -1))


net = SpeakerNet()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
print("gru weights", [n for n, _ in net.gru.named_parameters()][-4:])
net.gru.flatten_parameters()

# an RNN(relu) and an LSTM with projections over the same packed batch
rnn = nn.RNN(FEAT, 5, nonlinearity="relu", batch_first=True)
lstm = nn.LSTM(FEAT, 8, proj_size=3, batch_first=True, bidirectional=True)
with torch.no_grad():
    for p in list(rnn.parameters()) + list(lstm.parameters()):
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
pk = pack_sequence(utts[:5], enforce_sorted=False)
r_out, r_h = rnn(pk)
l_out, (l_h, l_c) = lstm(pk)
print("rnn", tuple(r_out.data.shape), tuple(r_h.shape), "min output", round(r_out.data.min().item(), 4))
print("lstm proj", tuple(l_out.data.shape), tuple(l_h.shape), tuple(l_c.shape),
      [round(v, 4) for v in l_h[1, 0].tolist()])
# the padded run of utterance 2 equals its row of the packed run
alone, _ = lstm(utts[2][None])
padded_l, _ = pad_packed_sequence(l_out, batch_first=True)
print("packed == alone:", torch.allclose(padded_l[2, :len(utts[2])], alone[0], atol=1e-5))
pk_g = pack_sequence([u.clone().requires_grad_(True) for u in utts[:3]], enforce_sorted=False)
o, _ = rnn(pk_g)
o.data.sum().backward()
print("grad reaches packed data:", pk_g.data.grad is None, "(a non-leaf)")

opt = torch.optim.Adam(net.parameters(), lr=5e-3)
losses = []
for step in range(30):
    loss = F.cross_entropy(net(utts), Y)
    opt.zero_grad()
    loss.backward()
    norm = nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f} grad norm {norm.item():.4f}")
with torch.no_grad():
    acc = (net(utts).argmax(1) == Y).float().mean().item()
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {acc:.4f}")
