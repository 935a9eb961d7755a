"""Segment-level recurrence with relative positions (Transformer-XL, Dai et al.) in the style of
the public kimiyoung/transformer-xl PyTorch code: sinusoidal relative position embeddings for
klen positions in descending order, learned global biases r_w_bias / r_r_bias, the AC + BD
score decomposition with the _rel_shift trick (zero-pad a column, view as (klen + 1, qlen),
drop the first row) checked against an explicit gather of relative offsets, a causal mask that
lets queries see the whole memory (torch.triu with diagonal = 1 + mlen), memories updated under
torch.no_grad() from the concatenated hidden states and cut to mem_len, and per-layer caches.
A model trained on segments of a long stream must reproduce, with memory, the logits of a
single pass over the full context. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <memory
gain>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(157)
torch.set_default_dtype(torch.float64)
V, D, H, DH, LAYERS = 16, 32, 4, 8, 2


def rel_shift(x):
    """x (qlen, klen, b, h): row i shifted so that column j holds relative offset klen-1-(i+mlen-j)."""
    zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
    return x_padded[1:].view_as(x)


class PositionalEmbedding(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.register_buffer("inv_freq", 1 / (10000 ** (torch.arange(0.0, d, 2.0) / d)))

    def forward(self, pos_seq):
        sinusoid = torch.ger(pos_seq, self.inv_freq)
        return torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)[:, None, :]


class RelMultiHeadAttn(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv_net = nn.Linear(D, 3 * H * DH, bias=False)
        self.r_net = nn.Linear(D, H * DH, bias=False)
        self.o_net = nn.Linear(H * DH, D, bias=False)
        self.layer_norm = nn.LayerNorm(D)
        self.scale = 1 / DH ** 0.5

    def forward(self, w, r, r_w_bias, r_r_bias, attn_mask, mems=None):
        qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
        cat = torch.cat([mems, w], 0) if mems is not None else w
        w_heads = self.qkv_net(cat)
        r_head_k = self.r_net(r)
        w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
        w_head_q = w_head_q[-qlen:]
        klen = w_head_k.size(0)
        w_head_q = w_head_q.view(qlen, bsz, H, DH)
        w_head_k = w_head_k.view(klen, bsz, H, DH)
        w_head_v = w_head_v.view(klen, bsz, H, DH)
        r_head_k = r_head_k.view(rlen, H, DH)
        AC = torch.einsum("ibnd,jbnd->ijbn", (w_head_q + r_w_bias, w_head_k))
        BD = rel_shift(torch.einsum("ibnd,jnd->ijbn", (w_head_q + r_r_bias, r_head_k)))
        score = (AC + BD) * self.scale
        score = score.float().masked_fill(attn_mask[:, :, None, None], -float("inf")).type_as(score)
        prob = F.softmax(score, dim=1)
        vec = torch.einsum("ijbn,jbnd->ibnd", (prob, w_head_v)).contiguous().view(qlen, bsz, H * DH)
        return self.layer_norm(w + self.o_net(vec))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = RelMultiHeadAttn()
        self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.ReLU(), nn.Linear(2 * D, D))
        self.ln = nn.LayerNorm(D)

    def forward(self, x, r, rw, rr, mask, mems):
        h = self.attn(x, r, rw, rr, mask, mems)
        return self.ln(h + self.ff(h))


class MemTransformerLM(nn.Module):
    def __init__(self, mem_len):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos_emb = PositionalEmbedding(D)
        self.r_w_bias = nn.Parameter(torch.zeros(H, DH))
        self.r_r_bias = nn.Parameter(torch.zeros(H, DH))
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.out = nn.Linear(D, V)
        self.mem_len = mem_len

    def init_mems(self):
        return [torch.empty(0) for _ in range(LAYERS + 1)]

    def _update_mems(self, hids, mems, qlen, mlen):
        with torch.no_grad():
            new_mems = []
            end_idx = mlen + max(0, qlen)
            beg_idx = max(0, end_idx - self.mem_len)
            for i in range(len(hids)):
                cat = torch.cat([mems[i], hids[i]], dim=0) if mems[i].numel() else hids[i]
                new_mems.append(cat[beg_idx:end_idx].detach())
        return new_mems

    def forward(self, data, mems):
        qlen, bsz = data.size()
        word_emb = self.emb(data) * math.sqrt(D)
        mlen = mems[0].size(0) if mems[0].numel() else 0
        klen = mlen + qlen
        mask = torch.triu(torch.ones(qlen, klen, dtype=torch.bool), diagonal=1 + mlen)
        pos_seq = torch.arange(klen - 1, -1, -1.0)
        pos_emb = self.pos_emb(pos_seq)
        hids = [word_emb]
        core_out = word_emb
        for i, layer in enumerate(self.layers):
            core_out = layer(core_out, pos_emb, self.r_w_bias, self.r_r_bias, mask, mems[i] if mlen else None)
            hids.append(core_out)
        return self.out(core_out), self._update_mems(hids, mems, qlen, mlen)


# the shift trick against explicit relative offsets
q, k, b, h = 3, 5, 1, 1
raw = torch.arange(q * k, dtype=torch.float64).view(q, k, b, h)
mlen = k - q
shifted = rel_shift(raw)
explicit = torch.stack([raw[i, (k - 1 - (i + mlen - torch.arange(k))).clamp(0, k - 1)] for i in range(q)])
valid = ~torch.triu(torch.ones(q, k, dtype=torch.bool), diagonal=1 + mlen)
print(f"rel_shift == explicit gather on visible entries: {torch.equal(shifted[valid], explicit[valid])}")

model = MemTransformerLM(mem_len=16)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 0.02 if "emb" in name else 1 / math.sqrt(p.shape[-1]), p.shape)))
        elif "bias" in name and "ln" not in name and "layer_norm" not in name:
            p.zero_()

# a stream whose next token depends on the token 10 steps back: memory is needed across segments
STREAM = 8 * 8 * 6 + 1


def stream(bsz):
    s = rng.integers(0, V, (STREAM, bsz))
    for t in range(10, STREAM):
        s[t] = np.where(rng.random(bsz) < 0.9, (s[t - 10] + 3) % V, s[t])
    return torch.from_numpy(s)


opt = torch.optim.Adam(model.parameters(), lr=2e-3)
SEG = 8
losses = []
for it in range(3):
    data = stream(8)
    mems = model.init_mems()
    for s in range(0, STREAM - 1 - SEG + 1, SEG):
        inp, tgt = data[s:s + SEG], data[s + 1:s + SEG + 1]
        logits, mems = model(inp, mems)
        loss = F.cross_entropy(logits.view(-1, V), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        losses.append(loss.item())
    print(f"pass {it} mean loss {np.mean(losses[-(STREAM // SEG):]):.4f} mems {len(mems)} x {tuple(mems[0].shape)}")

model.eval()
with torch.no_grad():
    data = stream(4)[:33]
    full, _ = MemTransformerLM.forward(model, data[:32], model.init_mems())
    mems = model.init_mems()
    seg_logits = []
    for s in range(0, 32, SEG):
        lo, mems = model(data[s:s + SEG], mems)
        seg_logits.append(lo)
    seg = torch.cat(seg_logits)
    print(f"segments with memory == one pass over the last {model.mem_len + SEG} tokens: "
          f"{torch.allclose(seg[:model.mem_len + SEG], full[:model.mem_len + SEG], atol=1e-8)}")
    nomem = torch.cat([model(data[s:s + SEG], model.init_mems())[0] for s in range(0, 32, SEG)])
    tgt = data[1:33].reshape(-1)
    l_mem = F.cross_entropy(seg.view(-1, V), tgt).item()
    l_nomem = F.cross_entropy(nomem.view(-1, V), tgt).item()
print(f"eval loss with memory {l_mem:.4f} without {l_nomem:.4f}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-10:]):.4f} {l_nomem - l_mem:.4f}")
