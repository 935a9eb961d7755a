"""Neural oblivious decision ensembles (NODE, Popov et al.) for tabular regression, in the style
of the public Qwicen/node code: entmax-1.5 by sorting (cumsum, the threshold tau found from the
sorted support) as a custom torch.autograd.Function with its sparse backward, sparsemax next to
it, differentiable feature selection per tree depth, learned thresholds and log-temperatures,
soft binary decisions through entmoid (a sigmoid-shaped entmax over [x, 0]), the 2^depth leaf
probabilities as an outer product built with einsum over a binary code table, a dense block of
two stacked layers, data-aware threshold initialisation from quantiles (torch.quantile on a first
batch), AdamW + CosineAnnealingLR, and checks: entmax outputs on the simplex and sparse, its
gradient against torch.autograd.gradcheck in float64, leaf weights summing to one. Data from
NumPy (a piecewise function of a few features). Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <test R^2>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(27)
N, D = 320, 6
Xn = rng.uniform(-1, 1, size=(N, D))
yn = np.where(Xn[:, 0] > 0.2, 1.0, -0.5) + 0.8 * (Xn[:, 1] > -0.3) * Xn[:, 2] + 0.05 * rng.normal(size=N)
X = torch.from_numpy(Xn).float()
Y = torch.from_numpy(yn).float()


class Entmax15(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, dim):
        z = z / 2
        z = z - z.max(dim, keepdim=True).values
        zs = torch.sort(z, dim=dim, descending=True).values
        k = torch.arange(1, z.shape[dim] + 1, dtype=z.dtype)
        shape = [1] * z.dim()
        shape[dim] = -1
        k = k.view(shape)
        mean = zs.cumsum(dim) / k
        mean_sq = (zs ** 2).cumsum(dim) / k
        ss = k * (mean_sq - mean ** 2)
        delta = (1 - ss) / k
        tau = mean - torch.sqrt(torch.clamp(delta, min=0))
        support = (tau <= zs).sum(dim=dim, keepdim=True)
        tau_star = tau.gather(dim, support - 1)
        out = torch.clamp(z - tau_star, min=0) ** 2
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        gppr = y.sqrt()
        dx = g * gppr
        q = dx.sum(ctx.dim, keepdim=True) / gppr.sum(ctx.dim, keepdim=True)
        return dx - q * gppr, None


def entmax15(z, dim=-1):
    return Entmax15.apply(z, dim)


def sparsemax(z, dim=-1):
    zs = torch.sort(z, dim=dim, descending=True).values
    k = torch.arange(1, z.shape[dim] + 1, dtype=z.dtype)
    cum = zs.cumsum(dim) - 1
    support = (k * zs > cum).sum(dim, keepdim=True)
    tau = cum.gather(dim, support - 1) / support.to(z.dtype)
    return torch.clamp(z - tau, min=0)


def entmoid15(x):
    return entmax15(torch.stack([x, torch.zeros_like(x)], -1), -1)[..., 0]


class ODST(nn.Module):
    def __init__(self, in_features, num_trees, depth, tree_dim=1):
        super().__init__()
        self.depth, self.num_trees, self.tree_dim = depth, num_trees, tree_dim
        self.response = nn.Parameter(torch.from_numpy(rng.normal(0, 1, size=(num_trees, tree_dim, 2 ** depth))).float())
        self.selection_logits = nn.Parameter(torch.from_numpy(rng.uniform(size=(in_features, num_trees, depth))).float())
        self.thresholds = nn.Parameter(torch.zeros(num_trees, depth))
        self.log_temperatures = nn.Parameter(torch.zeros(num_trees, depth))
        codes = torch.arange(2 ** depth)
        bits = ((codes[:, None] >> torch.arange(depth)[None, :]) & 1).float()  # (2^d, d)
        self.register_buffer("bin_codes_1hot", torch.stack([bits, 1 - bits], -1).permute(1, 0, 2).contiguous(), persistent=False)
        self.initialized = False

    def forward(self, x):
        selectors = entmax15(self.selection_logits, dim=0)  # (in, trees, depth)
        feature_values = torch.einsum("bi,ind->bnd", x, selectors)
        if not self.initialized:  # data-aware init: thresholds at random quantiles, temperatures at spreads
            with torch.no_grad():
                q = torch.from_numpy(rng.uniform(0.25, 0.75, size=(self.num_trees, self.depth))).float()
                fv = feature_values.reshape(x.shape[0], -1)
                self.thresholds.copy_(torch.stack([torch.quantile(fv[:, j], q.flatten()[j]) for j in range(fv.shape[1])]).view_as(q))
                spread = (feature_values - self.thresholds).abs().quantile(0.9, dim=0)
                self.log_temperatures.copy_(torch.log(spread + 1e-6))
            self.initialized = True
        threshold_logits = (feature_values - self.thresholds) * torch.exp(-self.log_temperatures)
        threshold_logits = torch.stack([-threshold_logits, threshold_logits], dim=-1)  # (b, n, d, 2)
        bins = entmoid15(threshold_logits)
        bin_matches = torch.einsum("bndt,dct->bndc", bins, self.bin_codes_1hot)
        response_weights = torch.prod(bin_matches, dim=-2)  # (b, n, 2^d)
        out = torch.einsum("bnc,nkc->bnk", response_weights, self.response)
        self.last_weights = response_weights
        return out.flatten(1, 2)


class DenseBlock(nn.Sequential):
    def forward(self, x):
        for layer in self:
            h = layer(x)
            x = torch.cat([x, h], dim=-1)
        return x


model = nn.Sequential(DenseBlock(ODST(D, 8, 3), ODST(D + 8, 8, 3)), nn.Linear(D + 16, 1))
with torch.no_grad():
    model[1].weight.copy_(torch.from_numpy(rng.normal(0, 0.2, size=(1, D + 16))).float())
    model[1].bias.zero_()
    model(X[:256])  # data-aware initialisation
opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=30, eta_min=1e-3)
train, test = slice(0, 256), slice(256, None)
losses = []
for epoch in range(30):
    perm = torch.from_numpy(rng.permutation(256))
    tot = 0.0
    for i in range(0, 256, 64):
        idx = perm[i:i + 64]
        loss = F.mse_loss(model(X[train][idx]).squeeze(1), Y[train][idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot += loss.item() / 4
    sched.step()
    losses.append(tot)
    if epoch % 6 == 0:
        print(f"epoch {epoch} mse {tot:.5f} lr {sched.get_last_lr()[0]:.5f}")

with torch.no_grad():
    pred = model(X[test]).squeeze(1)
    r2 = 1 - ((pred - Y[test]) ** 2).sum() / ((Y[test] - Y[test].mean()) ** 2).sum()
    w = model[0][0].last_weights
    print(f"test mse {F.mse_loss(pred, Y[test]).item():.5f} R2 {r2.item():.4f} leaf weights sum to 1 {torch.allclose(w.sum(-1), torch.ones(w.shape[:2]), atol=1e-5)}")
    sel = entmax15(model[0][0].selection_logits, dim=0)
    print("selection on simplex", torch.allclose(sel.sum(0), torch.ones(8, 3), atol=1e-5), f"sparsity {(sel == 0).float().mean().item():.4f}",
          "top features", sel.sum((1, 2)).argsort(descending=True)[:3].tolist())
z = torch.tensor([[1.5, 0.3, -0.2, 0.9], [0.0, 0.0, 0.0, 0.0]])
print("entmax", [[round(v, 5) for v in r] for r in entmax15(z).tolist()], "sparsemax", [[round(v, 5) for v in r] for r in sparsemax(z).tolist()])
zz = torch.from_numpy(rng.normal(size=(3, 5))).requires_grad_(True)
print("entmax gradcheck", torch.autograd.gradcheck(lambda t: entmax15(t, -1), (zz,), eps=1e-6, atol=1e-5))
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {r2.item():.6f}")
