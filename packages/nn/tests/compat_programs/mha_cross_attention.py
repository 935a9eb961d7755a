"""Cross-attention with nn.MultiheadAttention in every calling convention real models use, in
the style of the public image-captioning / Perceiver / DETR-decoder code: queries attending to
a memory of another width (kdim / vdim), batch_first and sequence-first layouts, boolean and
float attn_mask (2-D shared and 3-D per-head (N * heads, L, S)), a boolean key_padding_mask
combined with either, need_weights with average_attn_weights True and False, add_bias_kv and
add_zero_attn (the extra key/value column), is_causal with a causal mask on self-attention,
each checked against the attention written out by hand from in_proj / q_proj_weight and
out_proj, and against F.scaled_dot_product_attention (boolean and float masks, scale=,
enable_gqa with fewer key/value heads); a Perceiver-style latent array trained to summarize a
set by cross-attention, with the attention entropy printed. Weights and data from NumPy: the
run is the same on both libraries. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <entropy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)


def arr(*shape, s=1.0):
    return torch.from_numpy((s * rng.normal(size=shape)).astype(np.float32))


def init(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(arr(*p.shape, s=0.3))


E, H, KD, VD = 8, 2, 6, 5
N, L, S = 3, 4, 7
mha = nn.MultiheadAttention(E, H, kdim=KD, vdim=VD, batch_first=True)
init(mha)
print("separate projections:", mha.in_proj_weight is None, tuple(mha.q_proj_weight.shape),
      tuple(mha.k_proj_weight.shape), tuple(mha.v_proj_weight.shape))
q, k, v = arr(N, L, E), arr(N, S, KD), arr(N, S, VD)
kpm = torch.zeros(N, S, dtype=torch.bool)
kpm[0, 5:] = True
kpm[2, 3:] = True


def by_hand(q, k, v, add_mask=None):
    bq, bk, bv = mha.in_proj_bias.chunk(3)
    Q = (q @ mha.q_proj_weight.T + bq).view(N, L, H, E // H).transpose(1, 2)
    K = (k @ mha.k_proj_weight.T + bk).view(N, S, H, E // H).transpose(1, 2)
    V = (v @ mha.v_proj_weight.T + bv).view(N, S, H, E // H).transpose(1, 2)
    scores = Q @ K.transpose(-1, -2) / math.sqrt(E // H)
    if add_mask is not None:
        scores = scores + add_mask
    w = scores.softmax(-1)
    out = (w @ V).transpose(1, 2).reshape(N, L, E)
    return out @ mha.out_proj.weight.T + mha.out_proj.bias, w


out, w = mha(q, k, v, key_padding_mask=kpm)
ref, wref = by_hand(q, k, v, torch.zeros(N, 1, 1, S).masked_fill(kpm[:, None, None], float("-inf")))
print("key_padding_mask: out", tuple(out.shape), "weights", tuple(w.shape),
      "match:", torch.allclose(out, ref, atol=1e-5), torch.allclose(w, wref.mean(1), atol=1e-6))
print("padded keys get zero weight:", w[0, :, 5:].abs().max().item() == 0.0)

# a 2-D bool mask and the equivalent float mask
bmask = torch.from_numpy(rng.uniform(size=(L, S)) < 0.3)
bmask[:, 0] = False
fmask = torch.zeros(L, S).masked_fill(bmask, float("-inf"))
o1, _ = mha(q, k, v, attn_mask=bmask, need_weights=False)
o2, _ = mha(q, k, v, attn_mask=fmask, need_weights=False)
print("bool mask == float mask:", torch.allclose(o1, o2, atol=1e-6),
      "need_weights=False gives", _)
o3, _ = mha(q, k, v, attn_mask=bmask, key_padding_mask=kpm, need_weights=False)
ref3, _ = by_hand(q, k, v, fmask + torch.zeros(N, 1, 1, S).masked_fill(kpm[:, None, None], float("-inf")))
print("mask + padding:", torch.allclose(o3, ref3, atol=1e-5))
# a 3-D per-head float mask (a relative-position bias)
bias = arr(N * H, L, S, s=0.5)
o4, w4 = mha(q, k, v, attn_mask=bias, average_attn_weights=False)
ref4, wref4 = by_hand(q, k, v, bias.view(N, H, L, S))
print("per-head bias:", tuple(w4.shape), torch.allclose(o4, ref4, atol=1e-5),
      torch.allclose(w4, wref4, atol=1e-6))
print(f"head weights [0, 1, 0] {[round(x, 5) for x in w4[0, 1, 0].tolist()]}")

# sequence-first layout, add_bias_kv / add_zero_attn
mha2 = nn.MultiheadAttention(E, H, add_bias_kv=True, add_zero_attn=True)
init(mha2)
qs, ks = arr(L, N, E), arr(S, N, E)
o5, w5 = mha2(qs, ks, ks, key_padding_mask=kpm)
print("add_bias_kv + add_zero_attn: out", tuple(o5.shape), "weights", tuple(w5.shape),
      f"zero-attn column mean {w5[..., -1].mean().item():.5f}",
      f"bias_k column mean {w5[..., -2].mean().item():.5f}")
print("bias_k", tuple(mha2.bias_k.shape), "in_proj", tuple(mha2.in_proj_weight.shape))

# self-attention with is_causal
sa = nn.MultiheadAttention(E, H, batch_first=True, bias=False)
init(sa)
x = arr(N, 5, E)
causal = nn.Transformer.generate_square_subsequent_mask(5)
c1, cw = sa(x, x, x, attn_mask=causal, is_causal=True)
c2, _ = sa(x, x, x, attn_mask=torch.ones(5, 5, dtype=torch.bool).triu(1))
print("is_causal agrees:", torch.allclose(c1, c2, atol=1e-6), "upper triangle zero:",
      cw.triu(1).abs().max().item() == 0.0)
print("no bias:", sa.in_proj_bias is None, sa.out_proj.bias is None)

# scaled_dot_product_attention: bool / float masks, scale, grouped-query heads
Q, K, V = arr(2, 4, 6, 8), arr(2, 4, 9, 8), arr(2, 4, 9, 8)
m = torch.from_numpy(rng.uniform(size=(6, 9)) < 0.7)
m[:, 0] = True  # True = attend for SDPA
s1 = F.scaled_dot_product_attention(Q, K, V, attn_mask=m)
s2 = F.scaled_dot_product_attention(Q, K, V, attn_mask=torch.zeros(6, 9).masked_fill(~m, float("-inf")))
manual = ((Q @ K.transpose(-1, -2) / math.sqrt(8)).masked_fill(~m, float("-inf")).softmax(-1)) @ V
print("sdpa bool == float == manual:", torch.allclose(s1, s2, atol=1e-6),
      torch.allclose(s1, manual, atol=1e-5))
s3 = F.scaled_dot_product_attention(Q, K, V, scale=0.1)
print("sdpa scale=:", torch.allclose(s3, ((Q @ K.transpose(-1, -2)) * 0.1).softmax(-1) @ V, atol=1e-6))
Kg, Vg = K[:, :2], V[:, :2]
g = F.scaled_dot_product_attention(Q, Kg, Vg, enable_gqa=True)
gr = F.scaled_dot_product_attention(Q, Kg.repeat_interleave(2, 1), Vg.repeat_interleave(2, 1))
print("gqa:", tuple(g.shape), torch.allclose(g, gr, atol=1e-6))
c = F.scaled_dot_product_attention(Q, K[:, :, :6], V[:, :, :6], is_causal=True)
print(f"sdpa is_causal first row == V[0]: {torch.allclose(c[:, :, 0], V[:, :, 0], atol=1e-6)}")


# a Perceiver-style summarizer: 4 latents cross-attend to a set of 10 points
class Perceiver(nn.Module):
    def __init__(self):
        super().__init__()
        self.latents = nn.Parameter(arr(4, 16, s=0.5))
        self.embed = nn.Linear(2, 12)
        self.cross = nn.MultiheadAttention(16, 4, kdim=12, vdim=12, batch_first=True)
        self.ln = nn.LayerNorm(16)
        self.out = nn.Linear(16, 3)
        init(self.cross)

    def forward(self, pts, pad):
        lat = self.latents.expand(pts.shape[0], -1, -1)
        e = self.embed(pts)
        h, w = self.cross(lat, e, e, key_padding_mask=pad)
        return self.out(self.ln(h + lat).mean(1)), w


net = Perceiver()
with torch.no_grad():
    for name, p in net.named_parameters():
        if not name.startswith("cross") and name != "latents":
            p.copy_(arr(*p.shape, s=0.3))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
losses = []
for step in range(40):
    pts = arr(16, 10, 2)
    n = torch.from_numpy(rng.integers(4, 11, 16))
    pad = torch.arange(10)[None] >= n[:, None]
    valid = (~pad).unsqueeze(-1).float()
    target = torch.cat([(pts * valid).sum(1) / valid.sum(1),
                        (pts.norm(dim=-1) * valid[..., 0]).amax(1, keepdim=True)], 1)
    pred, w = net(pts, pad)
    loss = F.smooth_l1_loss(pred, target, beta=0.5)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.5f}")
ent = -(w.clamp_min(1e-12).log() * w).sum(-1).mean().item()
print(f"attention entropy {ent:.5f} (uniform over 10: {math.log(10):.5f})")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {ent:.5f}")
