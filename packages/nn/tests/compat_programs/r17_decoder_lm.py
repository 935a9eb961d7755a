"""A character-level language model and a copy-task encoder-decoder as tutorials write them with
PyTorch's stock transformer modules: nn.TransformerDecoderLayer stacked by nn.TransformerDecoder
(norm_first, activation="gelu" by name, a final LayerNorm), nn.Transformer's
generate_square_subsequent_mask (a float mask of -inf), tgt_is_causal, key padding masks as
booleans, memory from an nn.TransformerEncoder, sinusoidal positions registered as a buffer,
weight tying between the embedding and the output layer, label smoothing, greedy decoding and
top-k / nucleus sampling from NumPy uniforms through cumsum + searchsorted, with an
incremental-free generate loop. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <copy acc>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1701)
TEXT = ("the quick brown fox jumps over the lazy dog. " * 6 + "pack my box with five dozen liquor jugs. " * 6)
chars = sorted(set(TEXT))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
V, D, CTX = len(chars), 32, 24


def init_(module):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(rng.normal(0, 0.08, p.shape).astype(np.float32)))
            elif name.endswith("bias"):
                p.zero_()


class Positional(nn.Module):
    def __init__(self, d, n=256):
        super().__init__()
        pos = torch.arange(n).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(n, d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.size(1)]


class CharLM(nn.Module):
    """Decoder-only: TransformerDecoder with an all-zero one-step memory."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = Positional(D)
        layer = nn.TransformerDecoderLayer(D, 4, 64, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
        self.dec = nn.TransformerDecoder(layer, num_layers=2, norm=nn.LayerNorm(D))
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        x = self.pos(self.emb(idx) * math.sqrt(D))
        mask = nn.Transformer.generate_square_subsequent_mask(idx.size(1))
        mem = torch.zeros(idx.size(0), 1, D)
        return self.head(self.dec(x, mem, tgt_mask=mask, tgt_is_causal=True))


mask4 = nn.Transformer.generate_square_subsequent_mask(4)
print(f"causal mask dtype {mask4.dtype} row 1 {mask4[1].tolist()}")
lm = CharLM()
init_(lm)
print(f"tied: {lm.head.weight is lm.emb.weight} params {sum(p.numel() for p in lm.parameters())}")
print(f"decoder layers {len(lm.dec.layers)} norm_first {lm.dec.layers[0].norm_first}")
opt = torch.optim.AdamW(lm.parameters(), lr=3e-3, weight_decay=0.01)
starts = rng.integers(0, len(data) - CTX - 1, (120, 16))
losses = []
for step in range(120):
    ix = torch.from_numpy(starts[step])
    xb = torch.stack([data[i:i + CTX] for i in ix])
    yb = torch.stack([data[i + 1:i + CTX + 1] for i in ix])
    logits = lm(xb)
    loss = F.cross_entropy(logits.reshape(-1, V), yb.reshape(-1), label_smoothing=0.05)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
    if step % 40 == 0:
        print(f"step {step:3d} loss {loss.item():.4f} grad norm {gn.item():.4f}")


@torch.no_grad()
def generate(model, prompt, n, mode, u):
    model.eval()
    idx = torch.tensor([[stoi[c] for c in prompt]])
    for t in range(n):
        logits = model(idx[:, -CTX:])[:, -1, :]
        if mode == "greedy":
            nxt = logits.argmax(-1, keepdim=True)
        else:
            if mode == "topk":
                v, _ = torch.topk(logits, 5)
                logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
            probs = F.softmax(logits / 0.8, dim=-1)
            if mode == "nucleus":
                sp, si = torch.sort(probs, descending=True)
                keep = sp.cumsum(-1) - sp < 0.9
                sp = sp * keep
                sp = sp / sp.sum(-1, keepdim=True)
                j = torch.searchsorted(sp.cumsum(-1), torch.tensor([[u[t]]]))
                nxt = si.gather(-1, j.clamp(max=V - 1))
            else:
                j = torch.searchsorted(probs.cumsum(-1), torch.tensor([[u[t]]]))
                nxt = j.clamp(max=V - 1)
        idx = torch.cat([idx, nxt], 1)
    model.train()
    return "".join(chars[i] for i in idx[0].tolist())


u = rng.uniform(0, 1, 40).astype(np.float32)
print(f"greedy: {generate(lm, 'the quick', 30, 'greedy', u)!r}")
s_topk = generate(lm, "pack my", 30, "topk", u)
s_nuc = generate(lm, "pack my", 30, "nucleus", u)
print(f"top-k sample length {len(s_topk)} nucleus sample length {len(s_nuc)}")


class Copier(nn.Module):
    """Encoder-decoder on a reverse-copy task with padded sources."""

    def __init__(self, vocab=12, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = Positional(d)
        enc = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
        dec = nn.TransformerDecoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc, 2, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, 2)
        self.out = nn.Linear(d, vocab)

    def forward(self, src, tgt_in):
        pad = src == 0
        mem = self.encoder(self.pos(self.emb(src)), src_key_padding_mask=pad)
        mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1))
        h = self.decoder(self.pos(self.emb(tgt_in)), mem, tgt_mask=mask, memory_key_padding_mask=pad)
        return self.out(h)


def copy_batch(n):
    lens = rng.integers(3, 7, n)
    src = np.zeros((n, 6), dtype=np.int64)
    tgt = np.zeros((n, 7), dtype=np.int64)
    for i, length in enumerate(lens):
        s = rng.integers(3, 12, length)
        src[i, :length] = s
        tgt[i, 0] = 1  # BOS
        tgt[i, 1:length + 1] = s[::-1]
        tgt[i, length + 1:] = 0
    return torch.from_numpy(src), torch.from_numpy(tgt)


cp = Copier()
init_(cp)
opt = torch.optim.Adam(cp.parameters(), lr=2e-3)
for step in range(200):
    src, tgt = copy_batch(32)
    logits = cp(src, tgt[:, :-1])
    loss = F.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=0)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0:
        print(f"copy step {step:3d} loss {loss.item():.4f}")
cp.eval()
src, tgt = copy_batch(64)
with torch.no_grad():
    ys = torch.ones(64, 1, dtype=torch.long)
    for _ in range(6):
        ys = torch.cat([ys, cp(src, ys)[:, -1:].argmax(-1)], 1)
valid = tgt[:, 1:] != 0
acc = (ys[:, 1:] == tgt[:, 1:])[valid].float().mean().item()
print(f"copy token accuracy {acc:.3f}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {acc:.3f}")
