"""Speech-recognition-style sequence labelling with CTC, in the style of the public DeepSpeech /
"speech recognition with CTC" examples (no audio library): synthetic "utterances" made of a
feature template per character stretched over a random number of frames plus noise, padded
into a (B, T, F) batch with their frame and label lengths, a Conv1d front-end with stride 2 (the
output lengths computed from the input lengths the usual way), a bidirectional nn.GRU over
pack_padded_sequence, log_softmax over the characters plus blank, nn.CTCLoss(blank=0,
zero_infinity=True) on (T, B, C) log-probabilities with concatenated 1-D targets, checked
against F.ctc_loss on padded 2-D targets and reduction="none" / "sum"; its gradient checked to
flow to the inputs; Adam with gradient clipping; greedy decoding by argmax with
torch.unique_consecutive and the blank removed; the character error rate by edit distance.
Weights and data from NumPy: the run is the same on both libraries. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <character error rate>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

ALPHABET = "_abcdefg"  # index 0 is the CTC blank
C, FEAT = len(ALPHABET), 12
templates = rng.normal(size=(C, FEAT)).astype(np.float32) * 1.5


def utterance():
    n = int(rng.integers(2, 6))
    labels = rng.integers(1, C, n)
    frames = []
    for lab in labels:
        frames += [templates[lab]] * int(rng.integers(3, 6))
        frames += [np.zeros(FEAT, np.float32)] * int(rng.integers(0, 2))  # a pause
    x = np.stack(frames) + rng.normal(size=(len(frames), FEAT)).astype(np.float32) * 0.4
    return x, labels


def batchify(items):
    xs, ys = zip(*items)
    lengths = torch.tensor([len(x) for x in xs])
    x = torch.zeros(len(xs), int(lengths.max()), FEAT)
    for i, a in enumerate(xs):
        x[i, :len(a)] = torch.from_numpy(a)
    target_lengths = torch.tensor([len(y) for y in ys])
    targets = torch.from_numpy(np.concatenate(ys).astype(np.int64))
    return x, lengths, targets, target_lengths, ys


train = [batchify([utterance() for _ in range(16)]) for _ in range(6)]
test = batchify([utterance() for _ in range(32)])


class SpeechModel(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.conv = nn.Conv1d(FEAT, hidden, kernel_size=3, stride=2, padding=1)
        self.bn = nn.BatchNorm1d(hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, C)

    @staticmethod
    def out_lengths(lengths):
        return torch.div(lengths + 2 * 1 - 3, 2, rounding_mode="floor") + 1

    def forward(self, x, lengths):
        h = F.hardtanh(self.bn(self.conv(x.transpose(1, 2))), 0, 20).transpose(1, 2)
        out_len = self.out_lengths(lengths)
        packed = pack_padded_sequence(h, out_len, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=h.size(1))
        return F.log_softmax(self.fc(out), dim=-1), out_len


model = SpeechModel()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        fan = p.shape[1] * (p.shape[2] if p.dim() == 3 else 1) if p.dim() > 1 else 1
        if "bn" not in name:
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32)
                                     / math.sqrt(fan if p.dim() > 1 else 32)))

ctc = nn.CTCLoss(blank=0, zero_infinity=True)
x, lengths, targets, target_lengths, ys = train[0]
logp, out_len = model(x, lengths)
loss = ctc(logp.transpose(0, 1), targets, out_len, target_lengths)
padded = torch.zeros(len(ys), int(target_lengths.max()), dtype=torch.long)
for i, y in enumerate(ys):
    padded[i, :len(y)] = torch.from_numpy(y)
loss2 = F.ctc_loss(logp.transpose(0, 1), padded, out_len, target_lengths, blank=0)
each = F.ctc_loss(logp.transpose(0, 1), targets, out_len, target_lengths, reduction="none")
total = F.ctc_loss(logp.transpose(0, 1), targets, out_len, target_lengths, reduction="sum")
print(f"ctc loss {loss.item():.4f}; padded targets agree: "
      f"{torch.allclose(loss, loss2)}; per utterance {each.shape} {each[:3].tolist()}")
print(f"mean = mean(per utterance / target length): "
      f"{torch.allclose(loss, (each / target_lengths).mean())}, sum {total.item():.3f}")
xg = x.clone().requires_grad_(True)
lp, ol = model(xg, lengths)
ctc(lp.transpose(0, 1), targets, ol, target_lengths).backward()
print(f"input grad finite: {bool(torch.isfinite(xg.grad).all())}, "
      f"nonzero {bool(xg.grad.abs().sum() > 0)}")
model.zero_grad()
impossible = F.ctc_loss(logp.transpose(0, 1)[:2], targets, torch.full((16,), 2), target_lengths,
                        reduction="none", zero_infinity=True)
print(f"too-short inputs with zero_infinity: {impossible[:4].tolist()}")

opt = torch.optim.Adam(model.parameters(), lr=5e-3)
losses = []
for epoch in range(args.epochs):
    model.train()
    for x, lengths, targets, target_lengths, _ in train:
        logp, out_len = model(x, lengths)
        loss = ctc(logp.transpose(0, 1), targets, out_len, target_lengths)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    if epoch % 3 == 0:
        print(f"epoch {epoch} loss {np.mean(losses[-len(train):]):.4f}")


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
    return d[len(b)]


model.eval()
with torch.no_grad():
    x, lengths, targets, target_lengths, ys = test
    logp, out_len = model(x, lengths)
    best = logp.argmax(-1)
    errors, chars = 0, 0
    for i in range(best.size(0)):
        path = torch.unique_consecutive(best[i, :out_len[i]])
        hyp = path[path != 0].tolist()
        errors += edit_distance(hyp, ys[i].tolist())
        chars += len(ys[i])
        if i < 3:
            print(f"ref {''.join(ALPHABET[c] for c in ys[i])!r} "
                  f"hyp {''.join(ALPHABET[c] for c in hyp)!r}")
    cer = errors / chars
    test_loss = ctc(logp.transpose(0, 1), targets, out_len, target_lengths)
print(f"test loss {test_loss.item():.4f}, CER {cer:.4f}")
print(f"RESULT {losses[0]:.4f} {np.mean(losses[-len(train):]):.4f} {cer:.4f}")
