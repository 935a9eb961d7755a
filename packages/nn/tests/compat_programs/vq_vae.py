"""A VQ-VAE on small synthetic images, in the style of the public VQ-VAE implementations
(van den Oord et al., 2017): a strided Conv2d encoder, a vector quantizer whose codebook is an
nn.Embedding, nearest codes found with torch.cdist and argmin (and the expanded
||z||^2 - 2 z.e + ||e||^2 form with torch.addmm agreeing), codes looked up with F.embedding,
the straight-through estimator z + (z_q - z).detach(), the codebook and commitment losses, an
exponential-moving-average codebook variant (one_hot counts, matmul sums, Laplace smoothing,
in-place mul_/add_ on buffers under torch.no_grad), codebook perplexity from the code usage
(torch.bincount with minlength), dead codes restarted from encoder outputs, a ConvTranspose2d
decoder with a residual block, and images decoded from code indices. Weights and data from
NumPy: the run is the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember.
Prints RESULT <first recon> <last recon> <perplexity>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
K, D = 16, 8


def make_images(n):
    """16x16 images of bars and blobs on a noisy background."""
    yy, xx = np.mgrid[0:16, 0:16]
    imgs = np.zeros((n, 1, 16, 16), np.float32)
    for i in range(n):
        if rng.random() < 0.5:
            c = rng.integers(2, 14)
            imgs[i, 0, :, max(c - 1, 0):c + 2] = 1.0
        else:
            cy, cx = rng.integers(4, 12, 2)
            imgs[i, 0] = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 8.0)
    return imgs + rng.normal(0, 0.05, imgs.shape).astype(np.float32)


data = torch.from_numpy(make_images(192))


class ResBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.block = nn.Sequential(nn.ReLU(), nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(),
                                   nn.Conv2d(ch, ch, 1))

    def forward(self, x):
        return x + self.block(x)


class VectorQuantizer(nn.Module):
    def __init__(self, beta=0.25):
        super().__init__()
        self.embedding = nn.Embedding(K, D)
        self.beta = beta

    def forward(self, z):
        z = z.permute(0, 2, 3, 1).contiguous()  # (B, H, W, D)
        flat = z.view(-1, D)
        dist = torch.cdist(flat, self.embedding.weight)
        idx = dist.argmin(dim=1)
        d2 = torch.addmm(flat.pow(2).sum(1, keepdim=True) + self.embedding.weight.pow(2).sum(1),
                         flat, self.embedding.weight.t(), beta=1, alpha=-2)
        self.agree = bool((d2.argmin(1) == idx).float().mean() > 0.99)
        z_q = F.embedding(idx, self.embedding.weight).view(z.shape)
        codebook = F.mse_loss(z_q, z.detach())
        commit = F.mse_loss(z, z_q.detach())
        z_q = z + (z_q - z).detach()  # straight-through
        return z_q.permute(0, 3, 1, 2).contiguous(), codebook + self.beta * commit, idx


class EMAQuantizer(nn.Module):
    def __init__(self, decay=0.9, eps=1e-5):
        super().__init__()
        self.decay, self.eps = decay, eps
        self.register_buffer("codebook", torch.zeros(K, D))
        self.register_buffer("cluster_size", torch.zeros(K))
        self.register_buffer("embed_avg", torch.zeros(K, D))

    def forward(self, z):
        z = z.permute(0, 2, 3, 1)
        flat = z.reshape(-1, D)
        idx = torch.cdist(flat, self.codebook).argmin(1)
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(idx, K).type(flat.dtype)
                self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                self.embed_avg.mul_(self.decay).add_(onehot.t() @ flat, alpha=1 - self.decay)
                n = self.cluster_size.sum()
                size = (self.cluster_size + self.eps) / (n + K * self.eps) * n
                self.codebook.copy_(self.embed_avg / size.unsqueeze(1))
        z_q = self.codebook[idx].view(z.shape)
        commit = F.mse_loss(z, z_q.detach())
        return (z + (z_q - z).detach()).permute(0, 3, 1, 2), 0.25 * commit, idx


class VQVAE(nn.Module):
    def __init__(self, quantizer):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 16, 4, 2, 1), nn.ReLU(),
                                     nn.Conv2d(16, 16, 4, 2, 1), ResBlock(16),
                                     nn.Conv2d(16, D, 1))
        self.quantizer = quantizer
        self.decoder = nn.Sequential(nn.Conv2d(D, 16, 3, padding=1), ResBlock(16), nn.ReLU(),
                                     nn.ConvTranspose2d(16, 16, 4, 2, 1), nn.ReLU(),
                                     nn.ConvTranspose2d(16, 1, 4, 2, 1))

    def forward(self, x):
        z = self.encoder(x)
        z_q, vq_loss, idx = self.quantizer(z)
        return self.decoder(z_q), vq_loss, idx, z


def init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan = p[0].numel() if "decoder" not in name or p.shape[0] != 16 else p.shape[1]
                p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32)
                                         / math.sqrt(max(fan, 1))))
            else:
                p.zero_()


def perplexity(idx):
    counts = torch.bincount(idx, minlength=K).float()
    probs = counts / counts.sum()
    return torch.exp(-(probs * torch.log(probs + 1e-10)).sum()).item(), int((counts == 0).sum())


def train(model, label):
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    recons = []
    for step in range(args.steps):
        x = data[(step * 32) % 192:(step * 32) % 192 + 32]
        recon, vq_loss, idx, z = model(x)
        rec = F.mse_loss(recon, x)
        loss = rec + vq_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        recons.append(rec.item())
        if step % 10 == 9:
            ppl, dead = perplexity(idx)
            print(f"{label} step {step + 1}: recon {rec.item():.5f} vq {vq_loss.item():.5f} "
                  f"perplexity {ppl:.3f} dead {dead}")
            if dead and isinstance(model.quantizer, VectorQuantizer) and step + 1 < args.steps:
                with torch.no_grad():  # restart dead codes at encoder outputs
                    used = torch.bincount(idx, minlength=K) > 0
                    flat = z.permute(0, 2, 3, 1).reshape(-1, D)
                    pick = torch.arange(int((~used).sum())) * 7 % flat.size(0)
                    model.quantizer.embedding.weight[~used] = flat[pick]
    return recons


vq = VQVAE(VectorQuantizer())
init(vq, 1)
with torch.no_grad():
    vq.quantizer.embedding.weight.uniform_(-1.0 / K, 1.0 / K)
    vq.quantizer.embedding.weight.copy_(torch.from_numpy(
        np.random.default_rng(2).uniform(-1 / K, 1 / K, (K, D)).astype(np.float32)))
recons = train(vq, "vq")
print(f"cdist argmin == expanded-distance argmin: {vq.quantizer.agree}")
grads_reach_encoder = vq.encoder[0].weight.grad is not None and \
    vq.encoder[0].weight.grad.abs().sum().item() > 0
print(f"straight-through gradient reaches the encoder: {grads_reach_encoder}")

ema = VQVAE(EMAQuantizer())
init(ema, 1)
with torch.no_grad():
    start = torch.from_numpy(np.random.default_rng(3).normal(0, 0.1, (K, D)).astype(np.float32))
    ema.quantizer.codebook.copy_(start)
    ema.quantizer.embed_avg.copy_(start)
    ema.quantizer.cluster_size.fill_(1.0)
ema_recons = train(ema, "ema")
print(f"ema buffers: {[k for k, _ in ema.quantizer.named_buffers()]}, "
      f"codebook requires_grad {ema.quantizer.codebook.requires_grad}")

vq.eval()
with torch.no_grad():
    recon, _, idx, _ = vq(data[:64])
    ppl, dead = perplexity(idx)
    grid = idx.view(64, 4, 4)
    decoded = vq.decoder(F.embedding(grid, vq.quantizer.embedding.weight).permute(0, 3, 1, 2))
    print(f"code grid {tuple(grid.shape)}, decode(indices) == reconstruction: "
          f"{torch.allclose(decoded, recon, atol=1e-5)}")
    print(f"eval recon {F.mse_loss(recon, data[:64]).item():.5f}, perplexity {ppl:.3f}")
print(f"RESULT {recons[0]:.5f} {np.mean(recons[-5:]):.5f} {ppl:.4f}")
