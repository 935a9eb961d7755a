"""A word-level Transformer language model, in the style of the public PyTorch word_language_model
example and the nn.Transformer tutorial: a Dictionary/Corpus tokenizer, batchify into columns,
get_batch with bptt windows, a sinusoidal PositionalEncoding registered as a buffer,
nn.TransformerEncoder of TransformerEncoderLayers with a causal mask from
nn.Transformer.generate_square_subsequent_mask, SGD with a LambdaLR warmup, clip_grad_norm_,
perplexity with math.exp, greedy generation, and a state_dict checkpoint reloaded into a fresh
model. Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. ``--save-init``/``--init-from`` move the initial weights through an .npz file.
Prints RESULT <first val loss> <last val loss> <test loss of the reloaded model>."""

import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(description="Transformer LM on a tiny corpus")
parser.add_argument("--emsize", type=int, default=32)
parser.add_argument("--nhid", type=int, default=64)
parser.add_argument("--nlayers", type=int, default=2)
parser.add_argument("--nhead", type=int, default=4)
parser.add_argument("--lr", type=float, default=1.0)
parser.add_argument("--clip", type=float, default=0.5)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--bptt", type=int, default=12)
parser.add_argument("--dropout", type=float, default=0.0)
parser.add_argument("--seed", type=int, default=1111)
parser.add_argument("--out", default=".")
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(args.seed)
device = torch.device("cpu")

SUBJECTS = ["the cat", "a dog", "the bird", "my friend", "the teacher"]
VERBS = ["sees", "likes", "follows", "finds"]
OBJECTS = ["the ball", "a tree", "the house", "some food", "the river"]


def make_text(n, seed):
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        s, v, o = (rng.integers(len(SUBJECTS)), rng.integers(len(VERBS)),
                   rng.integers(len(OBJECTS)))
        lines.append(f"{SUBJECTS[s]} {VERBS[v]} {OBJECTS[o]} .")
    return lines


class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self):
        self.dictionary = Dictionary()
        self.train = self.tokenize(make_text(300, 0))
        self.valid = self.tokenize(make_text(40, 1))
        self.test = self.tokenize(make_text(40, 2))

    def tokenize(self, lines):
        idss = []
        for line in lines:
            words = line.split() + ["<eos>"]
            ids = [self.dictionary.add_word(word) for word in words]
            idss.append(torch.tensor(ids).type(torch.int64))
        return torch.cat(idss)


corpus = Corpus()


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


eval_batch_size = 10
train_data = batchify(corpus.train, 16)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)
ntokens = len(corpus.dictionary)
print(f"vocabulary {ntokens} words, train data {tuple(train_data.shape)}")


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Module):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super(TransformerModel, self).__init__()
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers,
                                                         enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                mask = nn.Transformer.generate_square_subsequent_mask(len(src)).to(src.device)
                self.src_mask = mask
        else:
            self.src_mask = None
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


model = TransformerModel(ntokens, args.emsize, args.nhead, args.nhid, args.nlayers,
                         args.dropout).to(device)
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})
mask = nn.Transformer.generate_square_subsequent_mask(4)
print("causal mask:", mask[1].tolist())
criterion = nn.NLLLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
warmup = 10
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lr_lambda=lambda step: min(1.0, (step + 1) / warmup))


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def evaluate(data_source, m=model):
    m.eval()
    total_loss = 0.
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output = m(data)
            output = output.view(-1, ntokens)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train(epoch):
    model.train()
    total_loss = 0.
    start_time = time.time()
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        output = model(data)
        output = output.view(-1, ntokens)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        scheduler.step()
        total_loss += loss.item()
        if batch % 10 == 0 and batch > 0:
            cur_loss = total_loss / 10
            elapsed = time.time() - start_time
            print("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | "
                  "loss {:5.2f} | ppl {:8.2f}".format(
                      epoch, batch, len(train_data) // args.bptt, scheduler.get_last_lr()[0],
                      elapsed * 1000 / 10, cur_loss, math.exp(cur_loss)))
            total_loss = 0
            start_time = time.time()


val_losses = [evaluate(val_data)]
print("initial valid loss {:5.2f}".format(val_losses[0]))
for epoch in range(1, args.epochs + 1):
    train(epoch)
    val_loss = evaluate(val_data)
    val_losses.append(val_loss)
    print("-" * 89)
    print("| end of epoch {:3d} | valid loss {:5.3f} | valid ppl {:8.3f}".format(
        epoch, val_loss, math.exp(val_loss)))
    print("-" * 89)

os.makedirs(args.out, exist_ok=True)
path = os.path.join(args.out, "model.pt")
with open(path, "wb") as f:
    torch.save(model.state_dict(), f)
fresh = TransformerModel(ntokens, args.emsize, args.nhead, args.nhid, args.nlayers, args.dropout)
with open(path, "rb") as f:
    fresh.load_state_dict(torch.load(f))
test_loss = evaluate(test_data, fresh)
print("| End of training | test loss {:5.3f} | test ppl {:8.3f}".format(
    test_loss, math.exp(test_loss)))

# greedy continuation of a prompt
fresh.eval()
ids = torch.tensor([corpus.dictionary.word2idx[w] for w in "the cat".split()]).unsqueeze(1)
with torch.no_grad():
    for _ in range(3):
        next_id = fresh(ids)[-1, 0].argmax()
        ids = torch.cat([ids, next_id.view(1, 1)], dim=0)
print("generated:", " ".join(corpus.dictionary.idx2word[i] for i in ids.squeeze(1).tolist()))
print(f"RESULT {val_losses[0]:.6f} {val_losses[-1]:.6f} {test_loss:.6f}")
