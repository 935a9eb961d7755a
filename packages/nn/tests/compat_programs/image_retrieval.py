"""Instance-level image retrieval, in the style of the public NetVLAD / GeM / R-MAC
re-implementations and of backbones ported from Caffe / Lua Torch: a small CNN whose frozen early
stage keeps the legacy nn.CrossMapLRN2d, generalized-mean (GeM) pooling with a learnable p
(clamp, pow, avg_pool2d, pow(1/p)), R-MAC regional max-pooling over a grid of regions,
NetVLAD with soft assignment (a 1x1 Conv2d + softmax), residuals to the cluster centres,
intra-normalization of the (B, K, D) descriptor with F.normalize over dim=2 and the whole
descriptor normalized over dims (1, 2) at once, then flattened; PCA whitening learned by
torch.linalg.eigh on the database descriptors; a triplet margin loss with the hardest negative
mined from a cdist matrix; a snapshot of the best descriptor tensor (with its gradient) kept by
copy.deepcopy; and mean average precision from a ranking by argsort. Data and weights from
NumPy. Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <netvlad mAP>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(81)
N_CLASSES, PER, S = 6, 6, 12
templates = rng.normal(size=(N_CLASSES, 3, S, S)).astype(np.float32)
imgs, labels = [], []
for c in range(N_CLASSES):
    for _ in range(PER):
        shift = rng.integers(-2, 3, 2)
        img = np.roll(templates[c], tuple(shift), axis=(1, 2)) * rng.uniform(0.7, 1.3) + 0.4 * rng.normal(size=(3, S, S))
        imgs.append(img.astype(np.float32))
        labels.append(c)
X, y = torch.from_numpy(np.stack(imgs)), torch.tensor(labels)
print(f"images {tuple(X.shape)} classes {N_CLASSES}")


class Backbone(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, d, 3, padding=1)
        self.lrn = nn.CrossMapLRN2d(5, alpha=1e-3, beta=0.75, k=1.0)
        self.conv2 = nn.Conv2d(d, d, 3, padding=1)

    def forward(self, x):
        with torch.no_grad():  # the ported stem stays frozen
            stem = self.lrn(F.relu(self.conv1(x)))
        return F.relu(self.conv2(stem))


class GeM(nn.Module):
    def __init__(self, p=3.0, eps=1e-6):
        super().__init__()
        self.p, self.eps = nn.Parameter(torch.tensor(p)), eps

    def forward(self, f):
        return F.avg_pool2d(f.clamp(min=self.eps).pow(self.p), f.shape[-2:]).pow(1.0 / self.p).flatten(1)


def rmac(f, levels=2):
    regions = [F.adaptive_max_pool2d(f, 1).flatten(1)]
    for level in range(2, levels + 1):
        pooled = F.adaptive_max_pool2d(f, level).flatten(2)  # (B, D, level^2) regional maxima
        regions.append(F.normalize(pooled, dim=1).sum(2))
    return F.normalize(torch.stack(regions, 0).sum(0), dim=1)


class NetVLAD(nn.Module):
    def __init__(self, d=16, k=4):
        super().__init__()
        self.assign = nn.Conv2d(d, k, 1)
        self.centres = nn.Parameter(torch.zeros(k, d))

    def forward(self, f):
        a = F.softmax(self.assign(f).flatten(2), dim=1)  # (B, K, HW)
        x = f.flatten(2)  # (B, D, HW)
        vlad = torch.einsum("bkn,bdn->bkd", a, x) - a.sum(2)[..., None] * self.centres
        vlad = F.normalize(vlad, dim=2)  # intra-normalization
        return F.normalize(vlad, dim=(1, 2)).flatten(1)


def init(m):
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() > 0:
                p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(max(1, p[0].numel())), p.shape).astype(np.float32)))
    return m


def mean_ap(desc, labels):
    sims = desc @ desc.T
    aps = []
    for i in range(desc.shape[0]):
        order = torch.argsort(sims[i], descending=True, stable=True)
        order = order[order != i]
        rel = (labels[order] == labels[i]).float()
        prec = rel.cumsum(0) / torch.arange(1, rel.numel() + 1)
        aps.append(((prec * rel).sum() / rel.sum()).item())
    return float(np.mean(aps))


backbone, gem, vlad = init(Backbone()), GeM(), init(NetVLAD())
with torch.no_grad():
    f = backbone(X)
    print(f"features {tuple(f.shape)} untrained mAP: gem {mean_ap(F.normalize(gem(f), dim=1), y):.4f} "
          f"rmac {mean_ap(rmac(f), y):.4f} netvlad {mean_ap(vlad(f), y):.4f}")
backbone.conv1.requires_grad_(False)
params = [p for p in backbone.parameters() if p.requires_grad] + list(gem.parameters()) + list(vlad.parameters())
opt = torch.optim.Adam(params, lr=3e-3)
losses, best, best_loss = [], None, float("inf")
for step in range(40):
    idx = torch.from_numpy(rng.choice(X.shape[0], 18, replace=False))
    f = backbone(X[idx])
    d = vlad(f)
    d.retain_grad()
    same = y[idx][:, None] == y[idx][None]

    def hardest_triplet(desc):
        dist = torch.cdist(desc, desc)
        pos = dist.masked_fill(~same | torch.eye(18, dtype=torch.bool), -1).amax(1)
        neg = dist.masked_fill(same, float("inf")).amin(1)
        return F.relu(pos - neg + 0.3).mean()

    loss = hardest_triplet(d) + 0.5 * hardest_triplet(F.normalize(gem(f), dim=1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if loss.item() < best_loss:
        best_loss, best = loss.item(), copy.deepcopy(d.detach().requires_grad_(False))
    if step % 10 == 0:
        print(f"step {step:2d} triplet loss {loss.item():.5f} gem p {gem.p.item():.4f} grad norm {d.grad.norm().item():.5f}")
leaf = torch.ones(3, requires_grad=True)
(leaf * 2).sum().backward()
snap = copy.deepcopy(leaf)
print(f"best snapshot {tuple(best.shape)} loss {best_loss:.5f}; deepcopy keeps grad: {snap.grad.tolist()}")

with torch.no_grad():
    f = backbone(X)
    db = vlad(f)
    mean = db.mean(0)
    cov = torch.cov((db - mean).T)
    evals, evecs = torch.linalg.eigh(cov)
    top = evecs[:, -8:] / (evals[-8:] + 1e-2).sqrt()  # shrunk whitening of the top 8
    white = F.normalize((db - mean) @ top, dim=1)
    m_vlad, m_white = mean_ap(db, y), mean_ap(white, y)
    print(f"trained mAP: gem {mean_ap(F.normalize(gem(f), dim=1), y):.4f} rmac {mean_ap(rmac(f), y):.4f} "
          f"netvlad {m_vlad:.4f} whitened {m_white:.4f}")
    print(f"descriptor norms {db.norm(dim=1).min().item():.4f} {db.norm(dim=1).max().item():.4f} "
          f"lrn {backbone.lrn}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {m_vlad:.4f}")
