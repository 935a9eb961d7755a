"""A word-level LSTM language model with an adaptive softmax, in the style of the public
word_language_model example and its large-vocabulary variants: a Zipf-distributed synthetic
corpus with a vocabulary sorted by frequency (collections.Counter.most_common), batchify into
(T, B) columns, get_batch slices for truncated backpropagation through time with the hidden
state detached between batches (repackage_hidden over a tuple), nn.Embedding + nn.LSTM
(2 layers, dropout 0) + nn.AdaptiveLogSoftmaxWithLoss(cutoffs, div_value) in place of a full
softmax, its (output, loss) namedtuple, clip_grad_norm_, SGD with the learning rate divided by 4
when validation loss stops improving, perplexity with math.exp, log_prob for the full
distribution (checked to sum to 1 with logsumexp), predict for the argmax, and text generation
by greedy decoding. Weights from NumPy: the run is the same on both libraries. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first val ppl> <last val ppl> <unigram ppl>."""

import argparse
import collections
import math
import sys

import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--bptt", type=int, default=12)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

# ---- a corpus: a Markov chain over 120 words with Zipfian word frequencies --------------------
V = 120
zipf = 1.0 / np.arange(1, V + 1)
zipf /= zipf.sum()
succ = rng.integers(0, V, (V, 3))
words, w = [], 0
for _ in range(6000):
    w = int(succ[w, rng.integers(0, 3)]) if rng.uniform() < 0.7 else int(rng.choice(V, p=zipf))
    words.append(f"tok{w}")
counts = collections.Counter(words)
itos = [w for w, _ in counts.most_common()]
stoi = {w: i for i, w in enumerate(itos)}
ids = torch.tensor([stoi[w] for w in words], dtype=torch.long)
ntokens = len(itos)
train_ids, val_ids = ids[:5000], ids[5000:]
print(f"vocabulary {ntokens}, most common {itos[:3]}, train {train_ids.numel()} tokens")


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp=32, nhid=48, nlayers=2, cutoffs=(10, 40)):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.crit = nn.AdaptiveLogSoftmaxWithLoss(nhid, ntoken, list(cutoffs), div_value=2.0)
        self.nlayers, self.nhid = nlayers, nhid

    def forward(self, src, hidden, targets):
        out, hidden = self.rnn(self.encoder(src), hidden)
        res = self.crit(out.reshape(-1, self.nhid), targets)
        return res, hidden, out

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


model = RNNModel(ntokens)
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(r.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))
print(f"tail sizes: {[tuple(m[1].weight.shape) for m in model.crit.tail]}, head "
      f"{tuple(model.crit.head.weight.shape)}")
train_data, val_data = batchify(train_ids, 10), batchify(val_ids, 5)


def evaluate(data):
    model.eval()
    total, n = 0.0, 0
    hidden = model.init_hidden(data.size(1))
    with torch.no_grad():
        for i in range(0, data.size(0) - 1, args.bptt):
            x, y = get_batch(data, i)
            res, hidden, _ = model(x, hidden, y)
            total += res.loss.item() * y.numel()
            n += y.numel()
    return total / n


lr = 20.0
best = None
val_ppls = [math.exp(evaluate(val_data))]
print(f"initial val ppl {val_ppls[0]:.3f}")
opt = torch.optim.SGD(model.parameters(), lr=lr)
for epoch in range(args.epochs):
    model.train()
    hidden = model.init_hidden(10)
    total = 0.0
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        x, y = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        res, hidden, _ = model(x, hidden, y)
        res.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        total += res.loss.item()
    val = evaluate(val_data)
    val_ppls.append(math.exp(val))
    print(f"| epoch {epoch + 1} | train loss {total / (batch + 1):5.3f} | valid loss {val:5.3f} | "
          f"valid ppl {math.exp(val):8.3f} | lr {opt.param_groups[0]['lr']:.4f}")
    if best is None or val < best:
        best = val
    else:
        for g in opt.param_groups:
            g["lr"] /= 4.0

model.eval()
with torch.no_grad():
    x, y = get_batch(val_data, 0)
    _, _, out = model(x, model.init_hidden(5), y)
    logp = model.crit.log_prob(out.reshape(-1, model.nhid))
    print(f"log_prob {tuple(logp.shape)} sums to 1: "
          f"{torch.allclose(torch.logsumexp(logp, 1), torch.zeros(logp.size(0)), atol=1e-5)}")
    pred = model.crit.predict(out.reshape(-1, model.nhid))
    print(f"predict == argmax log_prob: {torch.equal(pred, logp.argmax(1))}, "
          f"accuracy {(pred == y).float().mean().item():.4f}")
    hidden = model.init_hidden(1)
    tok = torch.tensor([[stoi["tok0"]]])
    text = []
    for _ in range(8):
        emb_out, hidden = model.rnn(model.encoder(tok), hidden)
        tok = model.crit.predict(emb_out.reshape(-1, model.nhid)).view(1, 1)
        text.append(itos[int(tok)])
print(f"generated: {' '.join(text)}")
unigram = np.array([counts[w] for w in itos], dtype=np.float64) / len(words)
uni_ppl = math.exp(-np.mean(np.log(unigram[val_ids.numpy()])))
print(f"RESULT {val_ppls[0]:.3f} {val_ppls[-1]:.3f} {uni_ppl:.3f}")
