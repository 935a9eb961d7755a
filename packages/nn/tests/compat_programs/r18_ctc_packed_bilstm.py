"""A small speech-recognition pipeline in the style of the public CTC tutorials: variable-length
feature sequences from NumPy, sorted batches padded by pad_sequence and packed by
pack_padded_sequence (enforce_sorted=False with the permutation kept in the PackedSequence),
a bidirectional two-layer LSTM with proj_size, pad_packed_sequence back with total_length,
log_softmax over time-major logits and nn.CTCLoss (blank=0, reduction="mean" and "sum",
zero_infinity=True for impossible alignments), greedy decoding by argmax + unique_consecutive,
prefix beam search over a few hypotheses, Levenshtein distance for the character error rate,
and gradient clipping by value. Data from NumPy: the run is the same on both libraries. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <character error rate>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

rng = np.random.default_rng(5)
VOCAB = 6  # 0 = blank, symbols 1..5
FEAT = 8
protos = rng.normal(0, 1, (VOCAB, FEAT)).astype(np.float32)


def utterance():
    n = int(rng.integers(2, 5))
    labels = rng.integers(1, VOCAB, n)
    frames = []
    for lab in labels:
        for _ in range(int(rng.integers(2, 4))):
            frames.append(protos[lab] + rng.normal(0, 0.3, FEAT))
        if rng.random() < 0.5:
            frames.append(protos[0] + rng.normal(0, 0.3, FEAT))  # a pause
    return torch.from_numpy(np.array(frames, dtype=np.float32)), torch.from_numpy(labels)


data = [utterance() for _ in range(200)]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(FEAT, 24, num_layers=2, bidirectional=True, proj_size=12, batch_first=True)
        self.out = nn.Linear(24, VOCAB)

    def forward(self, feats, lengths):
        packed = pack_padded_sequence(feats, lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = self.rnn(packed)
        padded, out_lens = pad_packed_sequence(out, batch_first=True, total_length=feats.shape[1])
        return self.out(padded), out_lens, h, c


model = Model()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.2, p.shape).astype(np.float32)))
print("lstm weights", [(n, tuple(p.shape)) for n, p in model.rnn.named_parameters()][:5])


def batch(idx):
    feats = [data[i][0] for i in idx]
    labs = [data[i][1] for i in idx]
    lengths = torch.tensor([len(f) for f in feats])
    return pad_sequence(feats, batch_first=True), lengths, torch.cat(labs), torch.tensor([len(lab) for lab in labs])


x, lens, targets, tlens = batch(range(6))
packed = pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
print("lengths", lens.tolist(), "sorted_indices", packed.sorted_indices.tolist(), "batch_sizes head", packed.batch_sizes[:4].tolist())
logits, out_lens, h, c = model(x, lens)
print("padded out", tuple(logits.shape), "out lens", out_lens.tolist(), "h", tuple(h.shape), "c", tuple(c.shape))
print("padding rows are bias only", torch.allclose(logits[lens.argmin(), -1], model.out.bias))
ctc_mean = nn.CTCLoss(blank=0, reduction="mean", zero_infinity=True)
ctc_sum = nn.CTCLoss(blank=0, reduction="sum")
lp = logits.log_softmax(-1).transpose(0, 1)
print(f"ctc mean {ctc_mean(lp, targets, lens, tlens).item():.5f} sum {ctc_sum(lp, targets, lens, tlens).item():.5f}")
imp = F.ctc_loss(lp[:2, :1], torch.tensor([[1, 2, 3]]), torch.tensor([2]), torch.tensor([3]), reduction="none")
imp0 = F.ctc_loss(lp[:2, :1], torch.tensor([[1, 2, 3]]), torch.tensor([2]), torch.tensor([3]), reduction="none", zero_infinity=True)
print("impossible alignment", imp.item(), "zero_infinity", imp0.item())
padded_targets = pad_sequence([data[i][1] for i in range(6)], batch_first=True)
print("padded 2-D targets agree", torch.allclose(ctc_sum(lp, padded_targets, lens, tlens), ctc_sum(lp, targets, lens, tlens)))


def greedy(logp, length):
    best = logp[:length].argmax(-1)
    collapsed = torch.unique_consecutive(best)
    return collapsed[collapsed != 0].tolist()


def beam(logp, length, width=3):
    beams = {(): (0.0, -math.inf)}  # prefix -> (log p ending in blank, log p ending in non-blank)
    for t in range(length):
        nxt = {}
        for prefix, (pb, pnb) in beams.items():
            total = np.logaddexp(pb, pnb)
            for s in range(VOCAB):
                p = logp[t, s].item()
                if s == 0:
                    b, nb = nxt.get(prefix, (-math.inf, -math.inf))
                    nxt[prefix] = (np.logaddexp(b, total + p), nb)
                else:
                    new = prefix + (s,)
                    b, nb = nxt.get(new, (-math.inf, -math.inf))
                    add = pb + p if prefix and prefix[-1] == s else total + p
                    nxt[new] = (b, np.logaddexp(nb, add))
                    if prefix and prefix[-1] == s:
                        b2, nb2 = nxt.get(prefix, (-math.inf, -math.inf))
                        nxt[prefix] = (b2, np.logaddexp(nb2, pnb + p))
        beams = dict(sorted(nxt.items(), key=lambda kv: -np.logaddexp(*kv[1]))[:width])
    return list(max(beams.items(), key=lambda kv: np.logaddexp(*kv[1]))[0])


def edit_distance(a, b):
    d = torch.arange(len(b) + 1)
    for i, ca in enumerate(a, 1):
        prev = d.clone()
        d[0] = i
        for j, cb in enumerate(b, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (ca != cb))
    return int(d[-1])


opt = torch.optim.Adam(model.parameters(), lr=5e-3)
losses = []
for step in range(70):
    idx = rng.choice(160, 16, replace=False)
    x, lens, targets, tlens = batch(idx)
    logits, _, _, _ = model(x, lens)
    loss = ctc_mean(logits.log_softmax(-1).transpose(0, 1), targets, lens, tlens)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_value_(model.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} ctc {loss.item():.5f}")

model.eval()
with torch.no_grad():
    x, lens, targets, tlens = batch(range(160, 200))
    logp = model(x, lens)[0].log_softmax(-1)
errs, total, agree = 0, 0, 0
for i in range(40):
    ref = data[160 + i][1].tolist()
    hyp = greedy(logp[i], int(lens[i]))
    agree += hyp == beam(logp[i], int(lens[i]))
    errs += edit_distance(hyp, ref)
    total += len(ref)
cer = errs / total
print("example", data[160][1].tolist(), "->", greedy(logp[0], int(lens[0])), "beam == greedy on", agree, "of 40")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {cer:.4f}")
