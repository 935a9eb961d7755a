"""A tokenizer-free byte-level Transformer, in the style of the public ByT5 / byte-level
classification examples: strings encoded to UTF-8 bytes (torch.tensor(list(s.encode()))),
variable-length batches padded with torch.nn.utils.rnn.pad_sequence (batch_first, a padding
value, padding_side="left" for the decoder-only prompt batch), a boolean src_key_padding_mask,
nn.TransformerEncoder over nn.TransformerEncoderLayer(batch_first=True, norm_first=True,
activation="gelu") with a final LayerNorm, masked mean pooling for a language-identification
head, and a causal byte LM built from the same layer with
nn.Transformer.generate_square_subsequent_mask and is_causal=True, trained with
CrossEntropyLoss(ignore_index=-100); then eval mode: the padded positions' outputs (torch's
fast path zeroes them when the nested-tensor path is enabled, so only real positions are
compared), padding invariance (a sequence alone and in a padded batch agree), a decoder
(nn.TransformerDecoder with memory_key_padding_mask) for byte-level translation teacher-forced
once, and greedy byte generation decoded back with bytes(...).decode(errors="replace"). Weights
from NumPy: the run is the same on both libraries. Written against `torch`; the test suite runs
it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <language accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

rng = np.random.default_rng(0)
torch.manual_seed(0)

WORDS = {0: ["the", "house", "water", "green", "small", "river", "bread"],
         1: ["das", "haus", "wasser", "grün", "klein", "fluss", "brot"],
         2: ["la", "maison", "eau", "vert", "petit", "rivière", "pain"]}


def sentence(lang):
    return " ".join(rng.choice(WORDS[lang], size=rng.integers(2, 5)))


def encode(s):
    return torch.tensor(list(s.encode("utf-8")), dtype=torch.long)


data = [(sentence(lang), lang) for lang in rng.integers(0, 3, 96)]
print("example", data[0][0], "->", encode(data[0][0])[:6].tolist(),
      "utf-8 longer than str:", any(len(s.encode()) > len(s) for s, _ in data))
PAD = 256


def init_(module):
    r = np.random.default_rng(1)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() > 1:
                bound = math.sqrt(6 / (p.shape[0] + p.shape[1]))
                p.copy_(torch.from_numpy(r.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)))
            elif name.endswith("bias"):  # LayerNorm weights keep their ones
                p.copy_(torch.from_numpy(r.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))


class ByteClassifier(nn.Module):
    def __init__(self, d=32, heads=4, layers=2, classes=3, max_len=64):
        super().__init__()
        self.emb = nn.Embedding(257, d, padding_idx=PAD)
        self.pos = nn.Parameter(torch.zeros(max_len, d))
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d),
                                             enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, x, pad_mask):
        h = self.emb(x) + self.pos[: x.shape[1]]
        h = self.encoder(h, src_key_padding_mask=pad_mask)
        keep = (~pad_mask).unsqueeze(-1).float()
        return self.head((h * keep).sum(1) / keep.sum(1)), h


model = ByteClassifier()
init_(model)
print("encoder layers", len(model.encoder.layers), "norm_first", model.encoder.layers[0].norm_first)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
losses = []
for step in range(30):
    batch = [data[i] for i in rng.permutation(80)[:16]]
    x = pad_sequence([encode(s) for s, _ in batch], batch_first=True, padding_value=PAD)
    y = torch.tensor([lang for _, lang in batch])
    logits, _ = model(x, x == PAD)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} batch {tuple(x.shape)}")

model.eval()
with torch.no_grad():
    test = data[80:]
    x = pad_sequence([encode(s) for s, _ in test], batch_first=True, padding_value=PAD)
    logits, h = model(x, x == PAD)
    acc = (logits.argmax(-1) == torch.tensor([lang for _, lang in test])).float().mean().item()
    alone, h0 = model(encode(test[0][0])[None], torch.zeros(1, len(test[0][0].encode()), dtype=torch.bool))
    n0 = h0.shape[1]
    print("padding invariant:", torch.allclose(alone[0], logits[0], atol=1e-5),
          torch.allclose(h0[0], h[0, :n0], atol=1e-5))
    print(f"test accuracy {acc:.4f}")

# a causal byte LM on the same layer type, left padding for prompts
lm_layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
lm = nn.ModuleDict({"emb": nn.Embedding(257, 32, padding_idx=PAD),
                    "enc": nn.TransformerEncoder(lm_layer, 1, enable_nested_tensor=False),
                    "out": nn.Linear(32, 257)})
init_(lm)
pos = torch.from_numpy(rng.normal(0, 0.1, (64, 32)).astype(np.float32))


def lm_forward(x, pad_mask=None):
    n = x.shape[1]
    causal = nn.Transformer.generate_square_subsequent_mask(n)
    h = lm["enc"](lm["emb"](x) + pos[:n], mask=causal, src_key_padding_mask=pad_mask,
                  is_causal=True)
    return lm["out"](h)


print("causal mask", nn.Transformer.generate_square_subsequent_mask(3).tolist())
opt = torch.optim.Adam(lm.parameters(), lr=5e-3)
for step in range(25):
    seqs = [encode(data[i][0]) for i in rng.permutation(80)[:12]]
    x = pad_sequence(seqs, batch_first=True, padding_value=PAD)
    target = pad_sequence([s[1:] for s in seqs], batch_first=True, padding_value=-100)
    logits = lm_forward(x[:, :-1], x[:, :-1] == PAD)
    loss = nn.CrossEntropyLoss(ignore_index=-100)(logits.reshape(-1, 257), target.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 8 == 0:
        print(f"lm step {step:2d} loss {loss.item():.5f}")

prompts = [encode("the "), encode("la mai")]
left = pad_sequence(prompts, batch_first=True, padding_value=PAD, padding_side="left")
print("left padded", left.tolist())
lm.eval()
with torch.no_grad():
    out = encode("the ")[None]
    for _ in range(8):
        nxt = lm_forward(out)[:, -1, :256].argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], 1)
    text = bytes(out[0].tolist()).decode("utf-8", errors="replace")
    print("generated", out[0, 4:].tolist(), len(text) > 4, "bytes", tuple(out.shape))

# a byte-level encoder-decoder teacher-forced once, with memory_key_padding_mask
dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 1)
init_(dec)
src = pad_sequence([encode("the house"), encode("bread")], batch_first=True, padding_value=PAD)
tgt = pad_sequence([encode("das haus"), encode("brot")], batch_first=True, padding_value=PAD)
mem = model.encoder(model.emb(src) + model.pos[: src.shape[1]], src_key_padding_mask=src == PAD)
tmask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
o = dec(model.emb(tgt), mem, tgt_mask=tmask, tgt_key_padding_mask=tgt == PAD,
        memory_key_padding_mask=src == PAD, tgt_is_causal=True)
o1 = dec(model.emb(tgt[1:, :4]), mem[1:, :5], tgt_mask=tmask[:4, :4], tgt_is_causal=True)
print("decoder", tuple(o.shape), "padding invariant:", torch.allclose(o[1, :4], o1[0], atol=1e-5))
print(f"decoder output |o| {o[0].abs().sum().item():.4f} o[0, 0, :3] {[round(v, 4) for v in o[0, 0, :3].tolist()]}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {acc:.5f}")
