"""BERT-style masked-language-model pretraining on a toy corpus, in the style of the public
"BERT from scratch" implementations: [CLS]/[SEP]/[PAD]/[MASK] special tokens, sentence pairs
with token-type (segment) ids, padded batches with an attention mask, the 15% / 80-10-10
masking recipe (labels -100 where not predicted, random replacement tokens) with the draws from
NumPy, token + position + segment embeddings with LayerNorm and dropout, encoder layers built on
nn.MultiheadAttention(batch_first=True) called with both a key_padding_mask (float, -inf on
padding) and a float additive attn_mask, the HF-style extended mask
(1 - mask) * torch.finfo(dtype).min checked against it, need_weights with
average_attn_weights=False (per-head maps, zero on padding), the MLM head (dense, GELU,
LayerNorm, decoder tied to the word embeddings plus its own bias), a next-sentence head on the
tanh-pooled [CLS] state, CrossEntropyLoss(ignore_index=-100), AdamW with linear warmup/decay
(LambdaLR), masked-token accuracy, and fill-mask predictions by topk. Weights and data from
NumPy: the run is the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <masked accuracy> <nsp accuracy>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=80)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

PAD, CLS, SEP, MASK = 0, 1, 2, 3
WORDS = 16  # word ids 4 .. 19
VOCAB, D, HEADS, MAXLEN = 4 + WORDS, 32, 4, 20


def sentence():
    """Counting sentences: w, w+1, w+2, ... (mod WORDS), 3 to 7 words."""
    start, n = int(rng.integers(0, WORDS)), int(rng.integers(3, 8))
    return [4 + (start + i) % WORDS for i in range(n)]


def pair():
    a = sentence()
    if rng.random() < 0.5:  # IsNext: b continues a
        b = [4 + (a[-1] - 4 + 1 + i) % WORDS for i in range(int(rng.integers(3, 8)))]
        is_next = 1
    else:
        b, is_next = sentence(), 0
    tokens = [CLS] + a + [SEP] + b + [SEP]
    segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return tokens, segments, is_next


def mask_tokens(tokens):
    tokens = tokens.copy()
    labels = np.full_like(tokens, -100)
    special = np.isin(tokens, [PAD, CLS, SEP])
    chosen = (rng.random(tokens.shape) < 0.15) & ~special
    labels[chosen] = tokens[chosen]
    roll = rng.random(tokens.shape)
    tokens[chosen & (roll < 0.8)] = MASK
    rand = chosen & (roll >= 0.8) & (roll < 0.9)
    tokens[rand] = rng.integers(4, VOCAB, int(rand.sum()))
    return tokens, labels


def make_batch(n):
    items = [pair() for _ in range(n)]
    ids = np.zeros((n, MAXLEN), np.int64)
    seg = np.zeros((n, MAXLEN), np.int64)
    att = np.zeros((n, MAXLEN), np.int64)
    for i, (t, s, _) in enumerate(items):
        ids[i, :len(t)], seg[i, :len(s)], att[i, :len(t)] = t, s, 1
    masked, labels = mask_tokens(ids)
    nsp = np.array([it[2] for it in items])
    return [torch.from_numpy(a) for a in (masked, seg, att, labels, nsp, ids)]


batches = [make_batch(32) for _ in range(6)]
test = make_batch(64)


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(VOCAB, D, padding_idx=PAD)
        self.position = nn.Embedding(MAXLEN, D)
        self.token_type = nn.Embedding(2, D)
        self.norm = nn.LayerNorm(D, eps=1e-12)
        self.dropout = nn.Dropout(0.0)
        self.register_buffer("position_ids", torch.arange(MAXLEN).expand((1, -1)),
                             persistent=False)

    def forward(self, ids, seg):
        pos = self.position_ids[:, :ids.size(1)]
        return self.dropout(self.norm(self.word(ids) + self.position(pos) + self.token_type(seg)))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, HEADS, dropout=0.0, batch_first=True)
        self.norm1, self.norm2 = nn.LayerNorm(D, eps=1e-12), nn.LayerNorm(D, eps=1e-12)
        self.ff = nn.Sequential(nn.Linear(D, 64), nn.GELU(), nn.Linear(64, D))

    def forward(self, x, key_padding_mask, attn_mask, need_weights=False):
        a, w = self.attn(x, x, x, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                         need_weights=need_weights, average_attn_weights=False)
        x = self.norm1(x + a)
        return self.norm2(x + self.ff(x)), w


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = Embeddings()
        self.layers = nn.ModuleList(Layer() for _ in range(2))
        self.pooler = nn.Linear(D, D)
        self.mlm_dense, self.mlm_norm = nn.Linear(D, D), nn.LayerNorm(D, eps=1e-12)
        self.decoder = nn.Linear(D, VOCAB, bias=False)
        self.decoder.weight = self.embeddings.word.weight  # tied
        self.decoder_bias = nn.Parameter(torch.zeros(VOCAB))
        self.nsp = nn.Linear(D, 2)

    def forward(self, ids, seg, att, return_weights=False):
        # both masks float and additive (mixing a bool key_padding_mask with a float attn_mask
        # is deprecated in torch): -inf on padding keys
        pad = torch.zeros(att.shape).masked_fill(att == 0, float("-inf"))
        # a float additive mask too: no attention from a segment-A token to the segment-B [SEP]
        # would be a real model's choice; here a mild bias towards the same segment
        same = (seg.unsqueeze(2) == seg.unsqueeze(1)).float()
        bias = ((same - 1.0) * 0.5).repeat_interleave(HEADS, dim=0)  # (B * heads, T, T)
        h = self.embeddings(ids, seg)
        weights = None
        for layer in self.layers:
            h, w = layer(h, pad, bias, need_weights=return_weights)
            weights = w if w is not None else weights
        pooled = torch.tanh(self.pooler(h[:, 0]))
        m = self.mlm_norm(F.gelu(self.mlm_dense(h)))
        return self.decoder(m) + self.decoder_bias, self.nsp(pooled), weights


model = Bert()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if "norm" in name:
            continue
        p.copy_(torch.from_numpy(r.normal(0, 0.02 if p.dim() == 1 or "embeddings" in name
                                          else 1 / math.sqrt(p.shape[1]), tuple(p.shape))
                                 .astype(np.float32)))
    model.embeddings.word.weight[PAD].zero_()
print(f"parameters: {sum(p.numel() for p in model.parameters())}, tied decoder: "
      f"{model.decoder.weight is model.embeddings.word.weight}")

ids, seg, att, labels, nsp, orig = batches[0]
print(f"masked positions in batch 0: {int((labels != -100).sum())}, "
      f"[MASK] tokens {int((ids == MASK).sum())}, labels ignore {int((labels == -100).sum())}")
ext = (1.0 - att[:, None, None, :].float()) * torch.finfo(torch.float32).min
print(f"extended mask {tuple(ext.shape)} min {ext.min().item():.3e}, "
      f"zero on tokens: {bool((ext[att[:, None, None, :] == 1] == 0).all())}")

no_decay = ["bias", "norm"]
groups = [
    {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
     "weight_decay": 0.01},
    {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
     "weight_decay": 0.0},
]
opt = torch.optim.AdamW(groups, lr=1e-2)
warmup = 6
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: s / warmup if s < warmup else max(0.0, (args.steps - s) / (args.steps - warmup)))
ce = nn.CrossEntropyLoss(ignore_index=-100)
losses = []
for step in range(args.steps):
    ids, seg, att, labels, nsp, _ = batches[step % len(batches)]
    mlm_logits, nsp_logits, _ = model(ids, seg, att)
    mlm_loss = ce(mlm_logits.view(-1, VOCAB), labels.view(-1))
    nsp_loss = ce(nsp_logits, nsp)
    loss = mlm_loss + nsp_loss
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} mlm {mlm_loss.item():.4f} nsp {nsp_loss.item():.4f} "
              f"lr {sched.get_last_lr()[0]:.5f}")

model.eval()
with torch.no_grad():
    ids, seg, att, labels, nsp, orig = test
    mlm_logits, nsp_logits, weights = model(ids, seg, att, return_weights=True)
    sel = labels != -100
    mlm_acc = (mlm_logits.argmax(-1)[sel] == labels[sel]).float().mean().item()
    nsp_acc = (nsp_logits.argmax(-1) == nsp).float().mean().item()
    pad_cols = (att == 0)[:, None, None, :].expand_as(weights)
    print(f"attention weights {tuple(weights.shape)}, zero on padding: "
          f"{bool((weights[pad_cols] == 0).all())}, rows sum to 1: "
          f"{torch.allclose(weights.sum(-1)[~(att == 0)[:, None, :].expand(-1, HEADS, -1)], torch.ones(1))}")
    # fill-mask: the top-3 words for the first [MASK] of the first sentence
    q = ids.clone()
    q[0, 2] = MASK
    top = F.softmax(model(q, seg, att)[0][0, 2], -1).topk(3)
    print(f"fill-mask for {orig[0, 2].item()}: {top.indices.tolist()} "
          f"p={[round(v, 4) for v in top.values.tolist()]}")
print(f"masked-token accuracy {mlm_acc:.4f}, next-sentence accuracy {nsp_acc:.4f}")
print(f"RESULT {losses[0]:.4f} {np.mean(losses[-6:]):.4f} {mlm_acc:.4f} {nsp_acc:.4f}")
