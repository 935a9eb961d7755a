"""Ordinal regression three ways, in the style of the public coral-pytorch / CORN code: CORAL (one
shared weight vector with K-1 ordered bias units, nn.Parameter biases initialised from the
cumulative label frequencies, logits broadcast against them, levels from a label-to-levels
encoding, BCE-with-logits summed over tasks, rank-consistency of the learned biases), CORN
(conditional training subsets selected by boolean masks, cumulative products of conditional
probabilities by torch.cumprod), and a cumulative-link (ordered logit) model whose cut-points are
kept ordered by a softplus-cumsum parametrisation, against plain cross-entropy; predictions by
counting probabilities over 1/2, MAE / RMSE / quadratic weighted kappa (a confusion matrix by
index_put_ with accumulate=True). Data from NumPy (a latent score cut into 5 grades). Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <CORAL test MAE>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(29)
N, D, K = 400, 6, 5
w = rng.normal(size=D)
Xn = rng.normal(size=(N, D))
latent = Xn @ w / np.linalg.norm(w) + 0.4 * rng.normal(size=N)
cuts = np.quantile(latent, [0.15, 0.4, 0.7, 0.9])
yn = np.searchsorted(cuts, latent)
X = torch.from_numpy(Xn).float()
Y = torch.from_numpy(yn).long()
tr, te = slice(0, 300), slice(300, None)
print("grade counts", torch.bincount(Y, minlength=K).tolist())


def levels_from_labels(y, num_classes):
    return (torch.arange(num_classes - 1)[None, :] < y[:, None]).float()


def init_(*mods):
    with torch.no_grad():
        for m in mods:
            for name, p in m.named_parameters():
                if name.endswith("weight") and p.dim() > 1:
                    p.copy_(torch.from_numpy(rng.normal(0, p.shape[1] ** -0.5, size=tuple(p.shape))).float())
                elif name.split(".")[-1] == "bias":
                    p.zero_()


class Backbone(nn.Module):
    def __init__(self, out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(D, 16), nn.SiLU(), nn.Linear(16, out))

    def forward(self, x):
        return self.net(x)


class CoralLayer(nn.Module):
    def __init__(self, size_in, num_classes, y_train):
        super().__init__()
        self.fc = nn.Linear(size_in, 1, bias=False)
        # biases start at the logits of the cumulative label frequencies (ordered by construction)
        p = levels_from_labels(y_train, num_classes).mean(0).clamp(1e-3, 1 - 1e-3)
        self.coral_bias = nn.Parameter(torch.log(p / (1 - p)))

    def forward(self, x):
        return self.fc(x) + self.coral_bias


class CumulativeLink(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.first = nn.Parameter(torch.tensor([-1.5]))
        self.gaps = nn.Parameter(torch.zeros(num_classes - 2))

    def cutpoints(self):
        return torch.cat([self.first, self.first + torch.cumsum(F.softplus(self.gaps), 0)])

    def forward(self, score):
        cdf = torch.sigmoid(self.cutpoints()[None, :] - score)  # P(y <= k)
        cdf = F.pad(cdf, (1, 0), value=0.0)
        cdf = F.pad(cdf, (0, 1), value=1.0)
        return (cdf[:, 1:] - cdf[:, :-1]).clamp(min=1e-8)


def metrics(pred, y):
    mae = (pred - y).abs().float().mean().item()
    rmse = ((pred - y).float() ** 2).mean().sqrt().item()
    conf = torch.zeros(K, K)
    conf.index_put_((y, pred), torch.ones(len(y)), accumulate=True)
    wts = (torch.arange(K)[:, None] - torch.arange(K)[None, :]).float() ** 2 / (K - 1) ** 2
    expected = torch.outer(conf.sum(1), conf.sum(0)) / conf.sum()
    qwk = 1 - (wts * conf).sum() / (wts * expected).sum()
    return mae, rmse, qwk.item()


def train(kind):
    if kind == "coral":
        body, head = Backbone(16), CoralLayer(16, K, Y[tr])
    elif kind == "cumlink":
        body, head = Backbone(1), CumulativeLink(K)
    else:
        body, head = Backbone(16), nn.Linear(16, K if kind == "ce" else K - 1)
    init_(body, head)
    model = nn.Sequential(body, head)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for epoch in range(25):
        perm = torch.from_numpy(rng.permutation(300))
        tot = 0.0
        for i in range(0, 300, 50):
            idx = perm[i:i + 50]
            xb, yb = X[tr][idx], Y[tr][idx]
            out = model(xb)
            if kind == "coral":
                loss = F.binary_cross_entropy_with_logits(out, levels_from_labels(yb, K), reduction="none").sum(1).mean()
            elif kind == "corn":
                terms = []
                for k in range(K - 1):
                    sel = yb > k - 1  # examples that passed grade k - 1
                    if sel.any():
                        terms.append(F.binary_cross_entropy_with_logits(out[sel, k], (yb[sel] > k).float(), reduction="sum"))
                loss = torch.stack(terms).sum() / len(yb)
            elif kind == "cumlink":
                loss = F.nll_loss(torch.log(out), yb)
            else:
                loss = F.cross_entropy(out, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item() / 6
        losses.append(tot)
    with torch.no_grad():
        out = model(X[te])
        if kind == "coral":
            pred = (torch.sigmoid(out) > 0.5).sum(1)
        elif kind == "corn":
            pred = (torch.cumprod(torch.sigmoid(out), 1) > 0.5).sum(1)
        elif kind == "cumlink":
            pred = out.argmax(1)
        else:
            pred = out.argmax(1)
    return model, losses, pred


results = {}
for kind in ["coral", "corn", "cumlink", "ce"]:
    model, losses, pred = train(kind)
    mae, rmse, qwk = metrics(pred, Y[te])
    results[kind] = (losses, mae)
    print(f"{kind:8s} loss {losses[0]:.5f} -> {losses[-1]:.5f} MAE {mae:.4f} RMSE {rmse:.4f} QWK {qwk:.4f}")
    if kind == "coral":
        b = model[1].coral_bias.detach()
        print("coral biases", [round(v, 4) for v in b.tolist()], "rank consistent", bool((b[1:] <= b[:-1]).all()))
    if kind == "cumlink":
        c = model[1].cutpoints().detach()
        print("cut-points", [round(v, 4) for v in c.tolist()], "ordered", bool((c[1:] > c[:-1]).all()))
print("levels of [0, 2, 4]", levels_from_labels(torch.tensor([0, 2, 4]), K).tolist())
losses, mae = results["coral"]
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {mae:.6f}")
