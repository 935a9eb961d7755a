"""A TabNet-style tabular model with sparse attention, in the style of the public TabNet
(Arik & Pfister) and entmax re-implementations: sparsemax and 1.5-entmax written as
torch.autograd.Function subclasses (the threshold from a descending torch.sort, cumsum and
a support count, the backward through the support; entmax by bisection), checked with
torch.autograd.gradcheck in float64 and against the simplex projection by hand; ghost batch
normalization over virtual batches (x.chunk then BatchNorm1d with momentum=0.02, running stats
checked, the model in float64 by Module.double()); gated linear units with F.glu; the attentive transformer with the prior scales
(gamma - mask) and a sparsity entropy regularizer; feature importances aggregated from the
masks with torch.einsum and normalized; and a Tensor.scatter-built one-hot feature mask.
Data and weights from NumPy. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(14)


class Sparsemax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, dim=-1):
        zs, _ = torch.sort(z, dim=dim, descending=True)
        k = torch.arange(1, z.shape[dim] + 1, dtype=z.dtype).view([-1 if d == dim % z.dim() else 1 for d in range(z.dim())])
        cs = zs.cumsum(dim) - 1
        support = (k * zs > cs).sum(dim=dim, keepdim=True)
        tau = cs.gather(dim, support - 1) / support.to(z.dtype)
        out = torch.clamp(z - tau, min=0)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        s = (out > 0).to(g.dtype)
        v = (g * s).sum(ctx.dim, keepdim=True) / s.sum(ctx.dim, keepdim=True)
        return s * (g - v), None


class Entmax15(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, dim=-1, iters=50):
        z = z / 2
        lo = z.max(dim, keepdim=True).values - 1
        hi = z.max(dim, keepdim=True).values
        for _ in range(iters):  # bisection on tau: sum(relu(z - tau)^2) = 1
            tau = (lo + hi) / 2
            f = (torch.clamp(z - tau, min=0) ** 2).sum(dim, keepdim=True) - 1
            lo = torch.where(f > 0, tau, lo)
            hi = torch.where(f > 0, hi, tau)
        out = torch.clamp(z - (lo + hi) / 2, min=0) ** 2
        out = out / out.sum(dim, keepdim=True)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        gppr = y.sqrt()
        dX = g * gppr
        q = dX.sum(ctx.dim, keepdim=True) / gppr.sum(ctx.dim, keepdim=True)
        return dX - q * gppr, None, None


z = torch.tensor([[1.2, 0.9, -0.3, 0.1], [0.0, 0.0, 0.0, 3.0]], dtype=torch.float64)
p = Sparsemax.apply(z)
print(f"sparsemax {[[round(v, 4) for v in r] for r in p.tolist()]} sums {p.sum(1).tolist()}")
print(f"entmax15 {[[round(v, 4) for v in r] for r in Entmax15.apply(z).tolist()]}")
zz = torch.from_numpy(rng.normal(size=(3, 5))).requires_grad_()
print(f"gradcheck sparsemax {torch.autograd.gradcheck(lambda x: Sparsemax.apply(x), (zz,))} "
      f"entmax {torch.autograd.gradcheck(lambda x: Entmax15.apply(x), (zz,), atol=1e-5)}")


class GBN(nn.Module):
    def __init__(self, d, vbs=16):
        super().__init__()
        self.bn, self.vbs = nn.BatchNorm1d(d, momentum=0.02), vbs

    def forward(self, x):
        if not self.training:
            return self.bn(x)
        return torch.cat([self.bn(c) for c in x.chunk(max(1, x.shape[0] // self.vbs))], 0)


class GLUBlock(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.fc, self.bn = nn.Linear(i, 2 * o, bias=False), GBN(2 * o)

    def forward(self, x):
        return F.glu(self.bn(self.fc(x)), dim=-1)


class TabNet(nn.Module):
    def __init__(self, d_in, n_d=8, steps=3, gamma=1.3):
        super().__init__()
        self.steps, self.gamma, self.n_d = steps, gamma, n_d
        self.bn = nn.BatchNorm1d(d_in, momentum=0.02)
        self.feat = nn.ModuleList([nn.Sequential(GLUBlock(d_in, 2 * n_d), GLUBlock(2 * n_d, 2 * n_d)) for _ in range(steps + 1)])
        self.att = nn.ModuleList([nn.Sequential(nn.Linear(n_d, d_in, bias=False), GBN(d_in)) for _ in range(steps)])
        self.head = nn.Linear(n_d, 2)

    def forward(self, x):
        x = self.bn(x)
        prior = torch.ones_like(x)
        a = self.feat[0](x)[:, self.n_d:]
        out, masks, ent = 0, [], 0
        for s in range(self.steps):
            m = Sparsemax.apply(self.att[s](a) * prior)
            prior = prior * (self.gamma - m)
            ent = ent + (-m * torch.log(m + 1e-10)).sum(1).mean() / self.steps
            h = self.feat[s + 1](m * x)
            out = out + F.relu(h[:, : self.n_d])
            a = h[:, self.n_d:]
            masks.append(m)
        return self.head(out), torch.stack(masks, 1), ent


N, D = 256, 10
X = torch.from_numpy(rng.normal(size=(N, D)))  # float64: sparsemax supports flip with rounding
y = ((X[:, 0] * X[:, 3] > 0) ^ (X[:, 7] > 0.5)).long()
model = TabNet(D).double()
with torch.no_grad():
    for p in model.parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]), p.shape)))
        elif p is model.head.bias:
            p.zero_()
opt = torch.optim.Adam(model.parameters(), lr=0.02)
losses = []
for epoch in range(40):
    model.train()
    logits, masks, ent = model(X)
    loss = F.cross_entropy(logits, y) + 1e-3 * ent
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if epoch % 10 == 0:
        print(f"epoch {epoch:2d} loss {loss.item():.5f} mask entropy {ent.item():.4f} zeros {(masks == 0).float().mean().item():.4f}")
model.eval()
with torch.no_grad():
    logits, masks, _ = model(X)
    acc = (logits.argmax(1) == y).float().mean().item()
    imp = torch.einsum("bsd,b->d", masks, torch.ones(N, dtype=torch.float64))
    imp = imp / imp.sum()
    top = imp.topk(3).indices.sort().values.tolist()
print(f"accuracy {acc:.4f} top features {top} running var mean {model.bn.running_var.mean().item():.4f} "
      f"batches tracked {int(model.bn.num_batches_tracked)}")
sel = torch.zeros(2, D).scatter(1, torch.tensor([[0, 3], [7, 7]]), 1.0)
print(f"feature mask rows {sel.sum(1).tolist()}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
