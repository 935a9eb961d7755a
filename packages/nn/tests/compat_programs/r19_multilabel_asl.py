"""Multi-label classification in the style of the public tagging / chest-X-ray PyTorch code:
a shared MLP over bag-of-features inputs with 6 correlated labels, four losses compared on the
same data - BCEWithLogitsLoss with a per-class pos_weight, nn.MultiLabelSoftMarginLoss with
class weights, nn.MultiLabelMarginLoss on -1-padded target index lists, and the asymmetric loss
(ASL: probability shifting of easy negatives with clamp(min=0), separate focusing powers via
torch.pow, the log clamped by eps) written by hand; then evaluation: per-class average
precision by sorting, macro / micro F1 at per-class thresholds tuned on a validation split
(torch.linspace grid, argmax over a broadcast F1 table), Hamming loss, subset accuracy, top-k
precision with torch.topk, label co-occurrence from a matrix product, and the margin loss's
target format converted with torch.nonzero / split. Weights and data from NumPy. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <macro f1>."""

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(41)
N, D, L = 600, 20, 6
W = rng.normal(size=(D, L))
W[:, 1] = 0.7 * W[:, 0] + 0.3 * W[:, 1]  # labels 0 and 1 correlate
bias = np.array([-1.5, -1.8, -0.5, -2.5, 0.0, -3.0])
Xn = (rng.uniform(size=(N, D)) < 0.25).astype(np.float32)
logit = Xn @ W / 2 + bias
Yn = (rng.uniform(size=(N, L)) < 1 / (1 + np.exp(-logit))).astype(np.float32)
X, Y = torch.from_numpy(Xn), torch.from_numpy(Yn)
tr, va, te = slice(0, 400), slice(400, 500), slice(500, 600)
print("label frequency", [round(v, 3) for v in Y.mean(0).tolist()])
co = (Y.T @ Y) / Y.shape[0]
print("co-occurrence 0-1", round(co[0, 1].item(), 4), "0-3", round(co[0, 3].item(), 4))


def to_margin_targets(y):
    out = torch.full(y.shape, -1, dtype=torch.long)
    rows, cols = torch.nonzero(y, as_tuple=True)
    counts = y.sum(1).long().tolist()
    for i, c in enumerate(torch.split(cols, counts)):
        out[i, : len(c)] = c
    return out


def asl(logits, y, gamma_pos=0.0, gamma_neg=4.0, clip=0.05, eps=1e-8):
    p = torch.sigmoid(logits)
    p_neg = (p - clip).clamp(min=0)
    lp = y * torch.log(p.clamp(min=eps)) * torch.pow(1 - p, gamma_pos)
    ln = (1 - y) * torch.log((1 - p_neg).clamp(min=eps)) * torch.pow(p_neg, gamma_neg)
    return -(lp + ln).sum() / logits.shape[0]


pos = Y[tr].sum(0)
pos_weight = (Y[tr].shape[0] - pos) / pos.clamp(min=1)
criteria = {
    "bce_posw": nn.BCEWithLogitsLoss(pos_weight=pos_weight),
    "softmargin": nn.MultiLabelSoftMarginLoss(weight=torch.linspace(0.5, 1.5, L)),
    "margin": nn.MultiLabelMarginLoss(),
    "asl": asl,
}
mt = to_margin_targets(Y[:3])
print("margin targets", mt.tolist(), "rows", Y[:3].long().tolist())


def average_precision(scores, y):
    order = torch.argsort(scores, descending=True, stable=True)
    ys = y[order]
    tp = torch.cumsum(ys, 0)
    prec = tp / torch.arange(1, len(ys) + 1)
    return (prec * ys).sum() / ys.sum().clamp(min=1)


def f1_table(probs, y, grid):
    pred = probs.unsqueeze(0) >= grid.view(-1, 1, 1)  # (G, N, L)
    tp = (pred & y.bool()).sum(1).float()
    fp = (pred & ~y.bool()).sum(1).float()
    fn = (~pred & y.bool()).sum(1).float()
    return 2 * tp / (2 * tp + fp + fn).clamp(min=1)


summary = {}
for name, crit in criteria.items():
    torch.manual_seed(0)
    r = np.random.default_rng(0)
    net = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, L))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.3, size=tuple(p.shape)).astype(np.float32)))
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    losses = []
    for epoch in range(15):
        for b in range(0, 400, 50):
            xb, yb = X[b:b + 50], Y[b:b + 50]
            out = net(xb)
            loss = crit(out, to_margin_targets(yb)) if name == "margin" else crit(out, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    with torch.no_grad():
        pv, pt = torch.sigmoid(net(X[va])), torch.sigmoid(net(X[te]))
    grid = torch.linspace(0.05, 0.95, 19)
    best = grid[f1_table(pv, Y[va], grid).argmax(0)]  # per-class thresholds
    pred = pt >= best
    f1 = f1_table(pt, Y[te], torch.tensor([0.0]))  # placeholder shape check
    tp = (pred & Y[te].bool()).sum(0).float()
    fp = (pred & ~Y[te].bool()).sum(0).float()
    fn = (~pred & Y[te].bool()).sum(0).float()
    macro = (2 * tp / (2 * tp + fp + fn).clamp(min=1)).mean().item()
    micro = (2 * tp.sum() / (2 * tp.sum() + fp.sum() + fn.sum())).item()
    mAP = torch.stack([average_precision(pt[:, j], Y[te][:, j]) for j in range(L)]).mean().item()
    hamming = (pred != Y[te].bool()).float().mean().item()
    subset = (pred == Y[te].bool()).all(1).float().mean().item()
    top2 = torch.topk(pt, 2, dim=1).indices
    p_at_2 = Y[te].gather(1, top2).mean().item()
    summary[name] = (losses[0], losses[-1], macro)
    print(f"{name:10s} loss {losses[0]:.5f} -> {losses[-1]:.5f} mAP {mAP:.4f} macroF1 {macro:.4f} microF1 {micro:.4f} hamming {hamming:.4f} subset {subset:.4f} P@2 {p_at_2:.4f}")
    print(f"{'':10s} thresholds {[round(v, 2) for v in best.tolist()]} f1 table {tuple(f1.shape)}")
first, last, macro = summary["asl"]
print(f"RESULT {first:.6f} {last:.6f} {macro:.6f}")
