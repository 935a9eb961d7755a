"""Local (sliding-window) attention three ways, in the style of the public Longformer / Mistral
/ "local attention" implementations: (1) a dense band mask from torch.ones(...).tril(w).triu(-w)
and masked_fill(-inf) before softmax; (2) the keys padded with F.pad and windows taken with
Tensor.unfold(dim, size, step), scores by einsum over (query, window) pairs and the padded
positions masked; (3) overlapping chunks of the keys made with as_strided on a contiguous tensor
(size / stride / storage_offset), scores by torch.baddbmm; then a causal window (Mistral style)
with sdpa and a float attn_mask, dilated windows from a strided unfold, rows with no visible key
made safe with nan_to_num, gradients through the unfold path checked against the dense path,
diagonal(offset) / diag_embed / narrow on the score matrix, and a small local-attention layer
trained to copy a neighbour's value. Weights and data from NumPy: the run is the same on both
libraries. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <max path difference>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(11)


def arr(*shape, s=1.0):
    return torch.from_numpy((rng.normal(0, s, shape)).astype(np.float32))


B, T, D, W = 2, 10, 8, 2
q, k, v = arr(B, T, D), arr(B, T, D), arr(B, T, D)
scale = D ** -0.5

# (1) dense band mask
band = torch.ones(T, T, dtype=torch.bool).tril(W).triu(-W)
print("band row counts", band.sum(1).tolist())
s = (q @ k.transpose(-2, -1)) * scale
dense = s.masked_fill(~band, float("-inf")).softmax(-1) @ v
print("diagonals", [round(x, 4) for x in s[0].diagonal(offset=1)[:3].tolist()],
      tuple(torch.diag_embed(s[0].diagonal()).shape), tuple(s.narrow(1, 2, 3).shape))

# (2) unfold over padded keys: windows of 2W+1
kp = F.pad(k, (0, 0, W, W))  # pad the time dim
vp = F.pad(v, (0, 0, W, W))
kw = kp.unfold(1, 2 * W + 1, 1)  # (B, T, D, 2W+1)
vw = vp.unfold(1, 2 * W + 1, 1)
print("unfold shape", tuple(kw.shape), "stride", kw.stride(), "contiguous", kw.is_contiguous())
sw = torch.einsum("btd,btdw->btw", q, kw) * scale
pos = torch.arange(T)[:, None] + torch.arange(-W, W + 1)[None, :]
valid = (pos >= 0) & (pos < T)
sw = sw.masked_fill(~valid, float("-inf"))
unf = torch.einsum("btw,btdw->btd", sw.softmax(-1), vw)
err_unfold = (unf - dense).abs().max().item()
print("unfold == dense:", err_unfold < 1e-5)

# (3) as_strided chunks: windows of 2W+1 keys starting at every position of the padded keys
kc = kp.contiguous()
win = kc.as_strided(size=(B, T, 2 * W + 1, D), stride=(kc.stride(0), D, D, 1))
print("as_strided", tuple(win.shape), win.stride(), "offset", win.storage_offset())
inner = kc[0].as_strided((3, D), (D, 1), storage_offset=D * (W + 1))
print("storage_offset view equals k[0,1:4]:", torch.equal(inner, k[0, 1:4]))
sc = torch.baddbmm(torch.zeros(B * T, 1, 2 * W + 1), q.reshape(B * T, 1, D),
                   win.reshape(B * T, 2 * W + 1, D).transpose(1, 2), beta=0.0, alpha=scale)
sc = sc.reshape(B, T, -1).masked_fill(~valid, float("-inf"))
strided = torch.einsum("btw,btdw->btd", sc.softmax(-1), vw)
err_strided = (strided - dense).abs().max().item()
print("as_strided == dense:", err_strided < 1e-5)

# causal sliding window with sdpa and a float mask
causal_band = torch.ones(T, T, dtype=torch.bool).tril().triu(-W)
fmask = torch.zeros(T, T).masked_fill(~causal_band, float("-inf"))
o1 = F.scaled_dot_product_attention(q, k, v, attn_mask=fmask)
o2 = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_band)
print("float mask == bool mask:", torch.allclose(o1, o2, atol=1e-6),
      "first row attends only to itself:", torch.allclose(o1[:, 0], v[:, 0], atol=1e-6))

# dilated windows: every 2nd key
kd = F.pad(k, (0, 0, 2 * W, 2 * W)).unfold(1, 4 * W + 1, 1)[..., ::2]
print("dilated window", tuple(kd.shape), "stride", kd.stride())

# fully masked rows give NaN, cleaned with nan_to_num
empty = torch.zeros(T, T, dtype=torch.bool)
empty[1:] = band[1:]
p_ = s[0].masked_fill(~empty, float("-inf")).softmax(-1)
print("NaN row:", bool(p_[0].isnan().all()), "after nan_to_num:", p_.nan_to_num(0.0)[0].sum().item())

# gradients: unfold path vs dense path
qg = q.clone().requires_grad_(True)
kg = k.clone().requires_grad_(True)
d1 = ((qg @ kg.transpose(-2, -1) * scale).masked_fill(~band, float("-inf")).softmax(-1) @ v)
g_dense = torch.autograd.grad(d1.pow(2).sum(), (qg, kg))
kpg = F.pad(kg, (0, 0, W, W)).unfold(1, 2 * W + 1, 1)
swg = (torch.einsum("btd,btdw->btw", qg, kpg) * scale).masked_fill(~valid, float("-inf"))
d2 = torch.einsum("btw,btdw->btd", swg.softmax(-1), vw)
g_unf = torch.autograd.grad(d2.pow(2).sum(), (qg, kg))
gerr = max((a - b).abs().max().item() for a, b in zip(g_dense, g_unf))
print("grads agree:", gerr < 1e-4, "requires_grad", d2.requires_grad)


class LocalAttention(nn.Module):
    def __init__(self, d, w):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.w = w

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        kw = F.pad(k, (0, 0, self.w, self.w)).unfold(1, 2 * self.w + 1, 1)
        vw = F.pad(v, (0, 0, self.w, self.w)).unfold(1, 2 * self.w + 1, 1)
        t = x.shape[1]
        pos = torch.arange(t)[:, None] + torch.arange(-self.w, self.w + 1)
        ok = (pos >= 0) & (pos < t)
        att = (torch.einsum("btd,btdw->btw", q, kw) / q.shape[-1] ** 0.5).masked_fill(~ok, -1e9)
        return self.proj(torch.einsum("btw,btdw->btd", att.softmax(-1), vw))


layer = LocalAttention(D, W)
with torch.no_grad():
    for p in layer.parameters():
        p.copy_(arr(*p.shape, s=0.3))
x = arr(16, T, D)
target = torch.roll(x, shifts=1, dims=1)  # copy the previous position's features
target[:, 0] = 0.0
opt = torch.optim.Adam(layer.parameters(), lr=1e-2)
losses = []
for step in range(80):
    loss = F.mse_loss(layer(x), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.4f}")
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {max(err_unfold, err_strided):.1e}")
