"""A small Swin Transformer on synthetic images, in the style of the public Swin / timm
implementations: window_partition / window_reverse through view + permute + contiguous, shifted
windows by torch.roll with the attention mask built from slice assignments on an image-shaped
id map, the relative position bias table indexed by a relative_position_index buffer made with
torch.meshgrid / flatten / permute / sum (persistent=False), patch merging by strided slicing and
torch.cat, torch.movedim / moveaxis / swapaxes / narrow for layout changes, trunc_normal_ init,
AdamW and a classification head on the pooled tokens. Weights come from NumPy and the batches
are fixed, so torch and ember print the same numbers. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <train accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)


def window_partition(x, ws):  # (B, H, W, C) -> (B * nW, ws, ws, C)
    B, H, W, C = x.shape
    x = x.view(B, H // ws, ws, W // ws, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, C)


def window_reverse(windows, ws, H, W):
    B = int(windows.shape[0] / (H * W / ws / ws))
    x = windows.view(B, H // ws, W // ws, ws, ws, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class WindowAttention(nn.Module):
    def __init__(self, dim, ws, heads):
        super().__init__()
        self.ws, self.heads, self.scale = ws, heads, (dim // heads) ** -0.5
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij"))
        flat = torch.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += ws - 1
        rel[:, :, 1] += ws - 1
        rel[:, :, 0] *= 2 * ws - 1
        self.register_buffer("relative_position_index", rel.sum(-1), persistent=False)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def forward(self, x, mask=None):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]
        attn = attn + bias.view(N, N, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.heads, N, N)
        x = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)


class SwinBlock(nn.Module):
    def __init__(self, dim, res, ws, shift):
        super().__init__()
        self.res, self.ws, self.shift = res, ws, shift
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, ws, heads=2)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        mask = None
        if shift:
            img = torch.zeros((1, res, res, 1))
            cnt = 0
            for h in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                for w in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                    img[:, h, w, :] = cnt
                    cnt += 1
            mw = window_partition(img, ws).view(-1, ws * ws)
            mask = mw.unsqueeze(1) - mw.unsqueeze(2)
            mask = mask.masked_fill(mask != 0, float(-100.0)).masked_fill(mask == 0, float(0.0))
        self.register_buffer("attn_mask", mask, persistent=False)

    def forward(self, x):
        B, L, C = x.shape
        H = W = self.res
        shortcut = x
        x = self.norm1(x).view(B, H, W, C)
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        win = window_partition(x, self.ws).view(-1, self.ws * self.ws, C)
        win = self.attn(win, mask=self.attn_mask).view(-1, self.ws, self.ws, C)
        x = window_reverse(win, self.ws, H, W)
        if self.shift:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        x = shortcut + x.view(B, H * W, C)
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, res, dim):
        super().__init__()
        self.res = res
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        B, L, C = x.shape
        x = x.view(B, self.res, self.res, C)
        x0, x1 = x[:, 0::2, 0::2, :], x[:, 1::2, 0::2, :]
        x2, x3 = x[:, 0::2, 1::2, :], x[:, 1::2, 1::2, :]
        x = torch.cat([x0, x1, x2, x3], -1).view(B, -1, 4 * C)
        return self.reduction(self.norm(x))


class TinySwin(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.patch_embed = nn.Conv2d(1, 16, kernel_size=2, stride=2)
        self.blocks = nn.Sequential(SwinBlock(16, 8, 4, 0), SwinBlock(16, 8, 4, 2))
        self.merge = PatchMerging(8, 16)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        x = torch.movedim(self.patch_embed(x), 1, -1)  # (B, 8, 8, 16)
        x = self.blocks(x.flatten(1, 2))
        x = self.norm(self.merge(x))
        return self.head(torch.swapaxes(x, 1, 2).mean(-1))


model = TinySwin()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.2, p.shape).astype(np.float32)))
print("buffers:", [(n, tuple(b.shape)) for n, b in model.named_buffers()])
print("state_dict has the index:", any("relative_position_index" in k for k in model.state_dict()))
idx = model.blocks[0].attn.relative_position_index
print("index corners", idx[0, :4].tolist(), idx.max().item(), idx.dtype)
m = model.blocks[1].attn_mask
print("mask", tuple(m.shape), "masked per window", (m != 0).sum((1, 2)).tolist())

# images: class = where a bright bar is (rows, columns, diagonal)
imgs = rng.normal(0, 0.3, (24, 1, 16, 16)).astype(np.float32)
labels = np.arange(24) % 3
for i, c in enumerate(labels):
    if c == 0:
        imgs[i, 0, 6:9, :] += 2
    elif c == 1:
        imgs[i, 0, :, 6:9] += 2
    else:
        imgs[i, 0][np.eye(16, dtype=bool)] += 2
x, y = torch.from_numpy(imgs), torch.from_numpy(labels)
xw = torch.moveaxis(x, 1, 3)
print("narrow / moveaxis", tuple(torch.narrow(xw, 1, 4, 8).shape), xw.is_contiguous())
xp = window_partition(xw, 8)
print("partition round trip:", torch.equal(window_reverse(xp, 8, 16, 16), xw))

opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
losses = []
for step in range(30):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f}")
with torch.no_grad():
    acc = (model(x).argmax(1) == y).float().mean().item()
g = model.blocks[0].attn.relative_position_bias_table
print("bias table grad rows", g.shape[0], "trained:", g.requires_grad)
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {acc:.4f}")
