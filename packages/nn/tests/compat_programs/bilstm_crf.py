"""A BiLSTM-CRF sequence tagger, in the style of the public PyTorch tutorial "Advanced: Making
Dynamic Decisions and the Bi-LSTM CRF" (written anew here, batched): word embeddings, a
bidirectional nn.LSTM over pack_padded_sequence, hidden2tag emissions, a transition matrix with
START/STOP tags forbidden by -10000 entries, the forward algorithm with torch.logsumexp over a
broadcast (B, K, K) score tensor and masked updates via torch.where, the gold path score with
gather, the negative log-likelihood, and Viterbi decoding with max(dim) backpointers followed by
a Python backtrace. The task: tag digits in a token stream as B-NUM/I-NUM/O. SGD with momentum,
weights initialized from NumPy: the run is the same on both libraries. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <token accuracy>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=12)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

WORDS = ["<pad>"] + [f"w{i}" for i in range(12)] + [str(d) for d in range(10)]
TAGS = ["O", "B-NUM", "I-NUM", "<START>", "<STOP>"]
START, STOP = TAGS.index("<START>"), TAGS.index("<STOP>")
w2i = {w: i for i, w in enumerate(WORDS)}


def make_sentence():
    toks, tags = [], []
    while len(toks) < rng.integers(4, 11):
        if rng.uniform() < 0.3:
            n = int(rng.integers(1, 4))
            toks += [str(d) for d in rng.integers(0, 10, n)]
            tags += ["B-NUM"] + ["I-NUM"] * (n - 1)
        else:
            toks.append(f"w{rng.integers(0, 12)}")
            tags.append("O")
    return ([w2i[t] for t in toks], [TAGS.index(t) for t in tags])


data = [make_sentence() for _ in range(160)]
train, test = data[:128], data[128:]


def batchify(items):
    lengths = torch.tensor([len(s) for s, _ in items])
    words = pad_sequence([torch.tensor(s) for s, _ in items], batch_first=True)
    tags = pad_sequence([torch.tensor(t) for _, t in items], batch_first=True)
    mask = torch.arange(words.size(1))[None, :] < lengths[:, None]
    return words, tags, lengths, mask


class BiLSTM_CRF(nn.Module):
    def __init__(self, vocab, ntags, emb=16, hidden=24):
        super().__init__()
        self.ntags = ntags
        self.embed = nn.Embedding(vocab, emb, padding_idx=0)
        self.lstm = nn.LSTM(emb, hidden // 2, bidirectional=True, batch_first=True)
        self.hidden2tag = nn.Linear(hidden, ntags)
        self.transitions = nn.Parameter(torch.zeros(ntags, ntags))  # [to, from]

    def constrain(self):
        with torch.no_grad():
            self.transitions.data[START, :] = -10000.0
            self.transitions.data[:, STOP] = -10000.0

    def emissions(self, words, lengths):
        packed = pack_padded_sequence(self.embed(words), lengths, batch_first=True,
                                      enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=words.size(1))
        return self.hidden2tag(out)

    def log_partition(self, feats, mask):
        B = feats.size(0)
        alpha = torch.full((B, self.ntags), -10000.0)
        alpha[:, START] = 0.0
        for t in range(feats.size(1)):
            # scores[b, to, from] = alpha[b, from] + trans[to, from] + emit[b, to]
            scores = alpha.unsqueeze(1) + self.transitions.unsqueeze(0) + feats[:, t].unsqueeze(2)
            new = torch.logsumexp(scores, dim=2)
            alpha = torch.where(mask[:, t].unsqueeze(1), new, alpha)
        return torch.logsumexp(alpha + self.transitions[STOP].unsqueeze(0), dim=1)

    def gold_score(self, feats, tags, mask, lengths):
        B = feats.size(0)
        start = torch.full((B, 1), START, dtype=torch.long)
        prev = torch.cat([start, tags[:, :-1]], dim=1)
        trans = self.transitions[tags, prev]
        emit = feats.gather(2, tags.unsqueeze(2)).squeeze(2)
        score = ((trans + emit) * mask).sum(1)
        last = tags.gather(1, (lengths - 1).unsqueeze(1)).squeeze(1)
        return score + self.transitions[STOP, last]

    def neg_log_likelihood(self, words, tags, lengths, mask):
        feats = self.emissions(words, lengths)
        return (self.log_partition(feats, mask) - self.gold_score(feats, tags, mask, lengths)).mean()

    def viterbi(self, words, lengths):
        feats = self.emissions(words, lengths)
        paths = []
        for b in range(words.size(0)):
            v = torch.full((self.ntags,), -10000.0)
            v[START] = 0
            back = []
            for t in range(int(lengths[b])):
                scores = v.unsqueeze(0) + self.transitions  # [to, from]
                best, arg = scores.max(dim=1)
                back.append(arg)
                v = best + feats[b, t]
            v = v + self.transitions[STOP]
            score, tag = v.max(0)
            path = [int(tag)]
            for arg in reversed(back[1:]):
                path.append(int(arg[path[-1]]))
            paths.append((score.item(), path[::-1]))
        return paths


model = BiLSTM_CRF(len(WORDS), len(TAGS))
r = np.random.default_rng(1)
with torch.no_grad():
    for name, prm in model.named_parameters():
        fan = prm.shape[-1] if prm.dim() > 1 else prm.numel()
        prm.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(prm.shape)).astype(np.float32)) /
                  math.sqrt(fan))
model.constrain()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
losses = []
for epoch in range(args.epochs):
    total = 0.0
    for i in range(0, len(train), 16):
        words, tags, lengths, mask = batchify(train[i:i + 16])
        model.zero_grad()
        loss = model.neg_log_likelihood(words, tags, lengths, mask)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 5.0)
        opt.step()
        model.constrain()
        total += loss.item()
    losses.append(total / 8)
    if epoch % 3 == 0 or epoch == args.epochs - 1:
        print(f"epoch {epoch:2d} nll {losses[-1]:.5f}")

with torch.no_grad():
    words, tags, lengths, mask = batchify(test)
    decoded = model.viterbi(words, lengths)
    feats = model.emissions(words, lengths)
    logz = model.log_partition(feats, mask)
    gold = model.gold_score(feats, tags, mask, lengths)
correct = sum(int(p == t) for (_, path), (_, tg) in zip(decoded, test) for p, t in zip(path, tg))
total = sum(len(t) for _, t in test)
print(f"best path score <= log Z: {all(s <= z + 1e-4 for (s, _), z in zip(decoded, logz.tolist()))}")
print(f"gold score <= log Z: {bool((gold <= logz + 1e-4).all())}")
sent = [WORDS[i] for i in test[0][0]]
print(f"tagged: {' '.join(f'{w}/{TAGS[t]}' for w, t in zip(sent, decoded[0][1]))}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {correct / total:.4f}")
