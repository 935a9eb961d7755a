"""Anomaly detection in the style of the public Deep SVDD and autoencoder-baseline code on
synthetic 8x8 "normal" patterns with anomalies of other shapes (NumPy): a bias-free CNN encoder
(bias=False everywhere and BatchNorm2d(affine=False), as Deep SVDD requires to avoid the
trivial collapse), the hypersphere center c fixed from an initial forward pass with small
values pushed away from zero (c[(abs(c) < eps) & (c < 0)] = -eps), the one-class objective and
the soft-boundary variant with the radius updated to the (1 - nu) quantile of distances by
torch.quantile, weight decay by AdamW with a MultiStepLR milestone, a convolutional autoencoder
baseline (ConvTranspose2d, output_padding) scored by reconstruction error, and ROC AUC
computed from ranks (torch.argsort twice, ties averaged via torch.unique with return_inverse
and scatter_add) checked against the pairwise probability definition. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <Deep SVDD AUC>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(145)
S = 8
yy, xx = np.mgrid[:S, :S]


def ring(n):
    r = rng.uniform(2.0, 3.0, n)[:, None, None]
    cy, cx = rng.uniform(3, 4, (2, n, 1, 1))
    d = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
    return np.exp(-((d - r) ** 2) / 0.5)


def bars(n):
    pos = rng.integers(1, S - 2, n)[:, None, None]
    return np.exp(-((xx - pos) ** 2) / 0.5) + 0 * yy


def prep(a):
    a = a + 0.1 * rng.normal(size=a.shape)
    return torch.from_numpy(a[:, None].astype(np.float32))


Xtr = prep(ring(400))
Xte = torch.cat([prep(ring(150)), prep(bars(50))])
Yte = torch.cat([torch.zeros(150), torch.ones(50)])


def init_(m):
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p[0].numel()), p.shape).astype(np.float32)))
    return m


class Encoder(nn.Module):
    def __init__(self, rep=16):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, bias=False, padding=1)
        self.bn1 = nn.BatchNorm2d(8, eps=1e-4, affine=False)
        self.conv2 = nn.Conv2d(8, 16, 3, bias=False, padding=1)
        self.bn2 = nn.BatchNorm2d(16, eps=1e-4, affine=False)
        self.fc = nn.Linear(16 * 2 * 2, rep, bias=False)

    def forward(self, x):
        x = F.max_pool2d(F.leaky_relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.leaky_relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def auc(scores, labels):
    order = torch.argsort(scores)
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    _, inv = torch.unique(scores, return_inverse=True)  # average the ranks of ties
    sums = torch.zeros(int(inv.max()) + 1).scatter_add(0, inv, ranks)
    cnts = torch.zeros(int(inv.max()) + 1).scatter_add(0, inv, torch.ones_like(ranks))
    ranks = (sums / cnts)[inv]
    n_pos = labels.sum()
    n_neg = len(labels) - n_pos
    return ((ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


s, lab = torch.tensor([0.1, 0.4, 0.4, 0.8, 0.2]), torch.tensor([0., 1., 0., 1., 0.])
pair = ((s[lab == 1].unsqueeze(1) > s[lab == 0]).float() + 0.5 * (s[lab == 1].unsqueeze(1) == s[lab == 0]).float()).mean()
print(f"rank auc {auc(s, lab):.4f} pairwise {pair.item():.4f}")

net = init_(Encoder())
with torch.no_grad():
    net.eval()
    c = net(Xtr).mean(0)
    net.train()
    eps = 0.1
    c[(abs(c) < eps) & (c < 0)] = -eps
    c[(abs(c) < eps) & (c > 0)] = eps
opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-6)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[15], gamma=0.1)
losses = []
nu, R = 0.1, torch.tensor(0.0)
for epoch in range(20):
    perm = torch.from_numpy(rng.permutation(400))
    for idx in perm.split(50):
        dist = (net(Xtr[idx]) - c).pow(2).sum(1)
        if epoch < 10:
            loss = dist.mean()
        else:  # soft boundary after a warm-up
            loss = R ** 2 + (1 / nu) * F.relu(dist - R ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if epoch >= 10:
            R = torch.quantile(dist.detach().sqrt(), 1 - nu)
    sched.step()
    if epoch % 5 == 0:
        print(f"epoch {epoch:2d} loss {loss.item():.6f} R {R.item():.5f} lr {sched.get_last_lr()[0]:.6f}")
net.eval()
with torch.no_grad():
    scores = (net(Xte) - c).pow(2).sum(1)
svdd_auc = auc(scores, Yte)
print(f"deep svdd auc {svdd_auc:.4f} outside radius: normal {(scores[:150] > R ** 2).float().mean().item():.4f} "
      f"anomalies {(scores[150:] > R ** 2).float().mean().item():.4f}")

ae = init_(nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                         nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
                         nn.ConvTranspose2d(8, 1, 3, stride=2, padding=1, output_padding=1)))
with torch.no_grad():
    for m in ae.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            m.bias.zero_()
opt = torch.optim.Adam(ae.parameters(), lr=3e-3)
for epoch in range(15):
    for idx in torch.from_numpy(rng.permutation(400)).split(50):
        loss = F.mse_loss(ae(Xtr[idx]), Xtr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    rec = (ae(Xte) - Xte).pow(2).flatten(1).mean(1)
print(f"autoencoder loss {loss.item():.6f} auc {auc(rec, Yte):.4f} output {tuple(ae(Xte[:1]).shape)}")
print(f"RESULT {losses[0]:.6f} {losses[79]:.6f} {svdd_auc:.4f}")
