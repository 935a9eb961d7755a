"""Face-recognition style metric learning with additive angular margins, in the style of the
public insightface / pytorch-metric-learning heads: an ArcFace head (F.normalize on features and
class centres, acos of the clamped cosine, the easy-margin switch with torch.where, scale s) and
a CosFace head sharing one backbone through nn.ModuleDict, trained with CrossEntropyLoss(
label_smoothing=...) under SGD with nesterov momentum and a MultiStepLR; evaluation by
torch.cdist nearest neighbours (recall@1 by topk), verification ROC-free accuracy at the best
threshold from torch.sort, and the margin's effect on the angle between features and their
centre (torch.rad2deg). Data from NumPy. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <recall@1>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(20)
C, D, N = 6, 10, 240
centres = rng.normal(size=(C, D)) * 1.6
y_np = np.repeat(np.arange(C), N // C)
x_np = centres[y_np] + 1.5 * rng.normal(size=(N, D))
X = torch.from_numpy(x_np).float()
Y = torch.from_numpy(y_np).long()


class ArcFace(nn.Module):
    def __init__(self, dim, classes, s=16.0, m=0.3, easy_margin=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(classes, dim))
        nn.init.xavier_uniform_(self.weight)
        self.s, self.m, self.easy = s, m, easy_margin
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m

    def forward(self, emb, label):
        cosine = F.linear(F.normalize(emb), F.normalize(self.weight)).clamp(-1 + 1e-7, 1 - 1e-7)
        theta = torch.acos(cosine)
        phi = torch.cos(theta + self.m)
        if self.easy:
            phi = torch.where(cosine > 0, phi, cosine)
        else:
            phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        one_hot = torch.zeros_like(cosine).scatter_(1, label.view(-1, 1), 1.0)
        return self.s * (one_hot * phi + (1.0 - one_hot) * cosine)


class CosFace(nn.Module):
    def __init__(self, dim, classes, s=16.0, m=0.25):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(classes, dim) * 0.1)
        self.s, self.m = s, m

    def forward(self, emb, label):
        cosine = F.normalize(emb) @ F.normalize(self.weight, dim=1).t()
        return self.s * (cosine - self.m * F.one_hot(label, cosine.size(1)).to(cosine.dtype))


backbone = nn.Sequential(nn.Linear(D, 32), nn.BatchNorm1d(32), nn.PReLU(32), nn.Linear(32, 8))
heads = nn.ModuleDict({"arc": ArcFace(8, C), "cos": CosFace(8, C)})
params = list(backbone.parameters()) + list(heads.parameters())
with torch.no_grad():  # the same start on both libraries: weights from NumPy
    for name, prm in list(backbone.named_parameters()) + list(heads.named_parameters()):
        if prm.dim() > 1:
            prm.copy_(torch.from_numpy(rng.normal(0, prm.shape[1] ** -0.5, size=tuple(prm.shape))))
        elif "bias" in name:
            prm.zero_()
opt = torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[20, 32], gamma=0.3)
crit = nn.CrossEntropyLoss(label_smoothing=0.1)
losses = []
for epoch in range(40):
    backbone.train()
    perm = torch.from_numpy(rng.permutation(N))
    tot = 0.0
    for i in range(0, N, 60):
        idx = perm[i:i + 60]
        emb = backbone(X[idx])
        loss = crit(heads["arc"](emb, Y[idx]), Y[idx]) + 0.5 * crit(heads["cos"](emb, Y[idx]), Y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 5.0)
        opt.step()
        tot += loss.item()
    sched.step()
    losses.append(tot / 4)
    if epoch % 10 == 0:
        print(f"epoch {epoch} loss {losses[-1]:.5f} lr {sched.get_last_lr()[0]:.5f}")
print("milestones", dict(sched.milestones), "prelu weight shape", tuple(backbone[2].weight.shape))

backbone.eval()
with torch.no_grad():
    emb = F.normalize(backbone(X))
    dist = torch.cdist(emb, emb)
    dist.fill_diagonal_(float("inf"))
    nn_idx = dist.topk(1, largest=False).indices.squeeze(1)
    recall1 = (Y[nn_idx] == Y).float().mean().item()
    w = F.normalize(heads["arc"].weight)
    ang = torch.rad2deg(torch.acos((emb * w[Y]).sum(1).clamp(-1, 1)))
    other = torch.rad2deg(torch.acos((emb @ w.t()).masked_fill(F.one_hot(Y, C).bool(), -1).max(1).values.clamp(-1, 1)))
    print(f"angle to own centre {ang.mean().item():.4f} to nearest other {other.mean().item():.4f}")
    # verification: pairs (i, i + 1) within a class and (i, i + 40) across classes
    i = torch.arange(0, N - 40, 2)
    pos = (emb[i] * emb[i + 1]).sum(1)
    neg = (emb[i] * emb[i + 40]).sum(1)
    scores = torch.cat([pos, neg])
    labels = torch.cat([torch.ones_like(pos), torch.zeros_like(neg)])
    s_sorted, order = torch.sort(scores, descending=True)
    tp = torch.cumsum(labels[order], 0)
    fp = torch.cumsum(1 - labels[order], 0)
    acc = (tp + (len(neg) - fp)) / len(scores)
    best = acc.argmax()
    print(f"verification acc {acc[best].item():.4f} at threshold {s_sorted[best].item():.4f}")
    logits = heads["cos"](backbone(X), Y)
    print("cosface logits range", round(logits.min().item(), 4), round(logits.max().item(), 4), "bound", 16.0)
print(f"recall@1 {recall1:.4f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {recall1:.6f}")
