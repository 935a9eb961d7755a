"""A masked autoencoder (MAE, He et al.) in the style of the public reference code: patchify /
unpatchify by reshape + torch.einsum("nchpwq->nhwpqc"), per-sample random masking by argsort of
uniform noise with ids_restore = argsort(ids_shuffle) and torch.gather of the kept tokens through
index.unsqueeze(-1).repeat, fixed 2-D sin-cos position embeddings (np.meshgrid, copied into a
frozen parameter), a cls token expanded over the batch, a pre-norm nn.TransformerEncoder
encoder on the visible tokens only, a lighter decoder that appends mask tokens and unshuffles
them with gather, and the normalized-pixel loss averaged over masked patches only. Then a
linear probe on frozen cls features. Written against `torch`; the test suite runs it unchanged
on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <linear
probe accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(141)
IMG, P, C = 16, 4, 1
L = (IMG // P) ** 2


def make_images(n):
    """Oriented stripes: the class is the orientation, the phase and frequency are nuisance."""
    yy, xx = np.meshgrid(np.arange(IMG), np.arange(IMG), indexing="ij")
    cls = rng.integers(0, 3, n)
    ang = cls * np.pi / 3 + 0.1 * rng.normal(size=n)
    freq = rng.uniform(0.5, 0.9, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    u = xx[None] * np.cos(ang)[:, None, None] + yy[None] * np.sin(ang)[:, None, None]
    img = np.sin(freq[:, None, None] * u + phase[:, None, None]) + 0.1 * rng.normal(size=(n, IMG, IMG))
    return torch.from_numpy(img[:, None].astype(np.float32)), torch.from_numpy(cls)


def patchify(imgs):
    n, c, h, w = imgs.shape
    x = imgs.reshape(n, c, h // P, P, w // P, P)
    x = torch.einsum("nchpwq->nhwpqc", x)
    return x.reshape(n, (h // P) * (w // P), P * P * c)


def unpatchify(x):
    h = w = int(x.shape[1] ** 0.5)
    x = x.reshape(x.shape[0], h, w, P, P, C)
    x = torch.einsum("nhwpqc->nchpwq", x)
    return x.reshape(x.shape[0], C, h * P, w * P)


def sincos_2d(dim, grid, cls_token=True):
    gh, gw = np.meshgrid(np.arange(grid, dtype=np.float64), np.arange(grid, dtype=np.float64), indexing="ij")

    def one(d, pos):
        omega = 1.0 / 10000 ** (np.arange(d // 2, dtype=np.float64) / (d / 2.0))
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    emb = np.concatenate([one(dim // 2, gw), one(dim // 2, gh)], axis=1)
    if cls_token:
        emb = np.concatenate([np.zeros([1, dim]), emb], axis=0)
    return emb.astype(np.float32)


class MAE(nn.Module):
    def __init__(self, dim=32, ddim=24):
        super().__init__()
        self.patch_embed = nn.Linear(P * P * C, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, L + 1, dim), requires_grad=False)
        layer = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.decoder_embed = nn.Linear(dim, ddim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, ddim))
        self.decoder_pos_embed = nn.Parameter(torch.zeros(1, L + 1, ddim), requires_grad=False)
        dlayer = nn.TransformerEncoderLayer(ddim, 3, 2 * ddim, dropout=0.0, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerEncoder(dlayer, 1, enable_nested_tensor=False)
        self.decoder_pred = nn.Linear(ddim, P * P * C)
        self.pos_embed.data.copy_(torch.from_numpy(sincos_2d(dim, IMG // P)).unsqueeze(0))
        self.decoder_pos_embed.data.copy_(torch.from_numpy(sincos_2d(ddim, IMG // P)).unsqueeze(0))

    def random_masking(self, x, mask_ratio, noise):
        n, length, d = x.shape
        len_keep = int(length * (1 - mask_ratio))
        ids_shuffle = torch.argsort(noise, dim=1)
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        ids_keep = ids_shuffle[:, :len_keep]
        x_masked = torch.gather(x, dim=1, index=ids_keep.unsqueeze(-1).repeat(1, 1, d))
        mask = torch.ones([n, length])
        mask[:, :len_keep] = 0
        mask = torch.gather(mask, dim=1, index=ids_restore)
        return x_masked, mask, ids_restore

    def forward_encoder(self, imgs, mask_ratio, noise):
        x = self.patch_embed(patchify(imgs)) + self.pos_embed[:, 1:, :]
        x, mask, ids_restore = self.random_masking(x, mask_ratio, noise)
        cls = (self.cls_token + self.pos_embed[:, :1, :]).expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1)
        return self.norm(self.encoder(x)), mask, ids_restore

    def forward_decoder(self, x, ids_restore):
        x = self.decoder_embed(x)
        mask_tokens = self.mask_token.repeat(x.shape[0], ids_restore.shape[1] + 1 - x.shape[1], 1)
        x_ = torch.cat([x[:, 1:, :], mask_tokens], dim=1)
        x_ = torch.gather(x_, dim=1, index=ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))
        x = torch.cat([x[:, :1, :], x_], dim=1) + self.decoder_pos_embed
        return self.decoder_pred(self.decoder(x))[:, 1:, :]

    def forward(self, imgs, noise, mask_ratio=0.75):
        latent, mask, ids_restore = self.forward_encoder(imgs, mask_ratio, noise)
        pred = self.forward_decoder(latent, ids_restore)
        target = patchify(imgs)
        mean = target.mean(dim=-1, keepdim=True)
        var = target.var(dim=-1, keepdim=True)
        target = (target - mean) / (var + 1.0e-6) ** 0.5
        loss = ((pred - target) ** 2).mean(dim=-1)
        return (loss * mask).sum() / mask.sum(), pred, mask


imgs, _ = make_images(4)
print(f"unpatchify(patchify(x)) == x: {torch.equal(unpatchify(patchify(imgs)), imgs)} "
      f"patches {tuple(patchify(imgs).shape)}")

model = MAE()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.requires_grad:
            std = 0.02 if ("token" in name or p.dim() < 2) else 1 / np.sqrt(p.shape[-1])
            if name.endswith("bias"):
                std = 0.0
            if "norm" in name and name.endswith("weight"):
                p.fill_(1.0)
                continue
            p.copy_(torch.from_numpy(rng.normal(0, std, p.shape).astype(np.float32)))

noise = torch.from_numpy(rng.random((2, L)).astype(np.float32))
x_masked, mask, ids_restore = model.random_masking(torch.arange(2 * L * 1.0).reshape(2, L, 1), 0.75, noise)
print(f"kept {x_masked.shape[1]} of {L}, masked per row {mask.sum(1).tolist()}, "
      f"restore is a permutation: {torch.equal(ids_restore.sort(1).values, torch.arange(L).expand(2, -1))}")

opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3, betas=(0.9, 0.95),
                        weight_decay=0.05)
losses = []
for step in range(40):
    imgs, _ = make_images(32)
    noise = torch.from_numpy(rng.random((32, L)).astype(np.float32))
    loss, pred, mask = model(imgs, noise)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} masked-patch loss {loss.item():.4f}")
print(f"frozen pos_embed unchanged by training: {model.pos_embed.grad is None}")

with torch.no_grad():
    xtr, ytr = make_images(240)
    xte, yte = make_images(120)
    keep_all = torch.zeros(xtr.shape[0], L)
    ftr = model.forward_encoder(xtr, 0.0, keep_all)[0][:, 0]
    fte = model.forward_encoder(xte, 0.0, torch.zeros(xte.shape[0], L))[0][:, 0]
probe = nn.Linear(ftr.shape[1], 3)
nn.init.zeros_(probe.weight)
nn.init.zeros_(probe.bias)
popt = torch.optim.LBFGS(probe.parameters(), lr=0.5, max_iter=100, history_size=10, line_search_fn="strong_wolfe")


def closure():
    popt.zero_grad()
    lo = F.cross_entropy(probe(ftr), ytr) + 1e-3 * probe.weight.pow(2).sum()
    lo.backward()
    return lo


popt.step(closure)
acc = (probe(fte).argmax(1) == yte).float().mean().item()
print(f"linear probe accuracy {acc:.4f}")
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-5:]):.4f} {acc:.4f}")
