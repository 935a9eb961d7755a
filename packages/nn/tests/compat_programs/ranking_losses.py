"""Learning to rank and margin-based metric learning, in the style of the public
recommendation / retrieval / re-identification training scripts: a pairwise RankNet-style scorer
trained with nn.MarginRankingLoss (margin, reduction="none" then masked mean), a listwise
softmax loss, nn.MultiMarginLoss (p=1 and p=2, margin, class weight) as a multi-class hinge,
nn.MultiLabelSoftMarginLoss (with per-class weight) and nn.MultiLabelMarginLoss (targets padded
with -1) for tags, nn.HingeEmbeddingLoss and nn.SoftMarginLoss on pair distances,
nn.CosineEmbeddingLoss, nn.TripletMarginLoss (p, swap) and nn.TripletMarginWithDistanceLoss
with a cosine distance_function and with a lambda, each loss's value and input gradient printed
for fixed inputs; then NDCG@k from torch.topk and sort, mean reciprocal rank, and the trained
scorer's ranking metrics. Weights and data from NumPy: the run is the same on both libraries.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <ndcg@5>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(12)


def arr(*shape, s=1.0):
    return torch.from_numpy(rng.normal(0, s, shape).astype(np.float32))


def show(name, loss_fn, *inputs):
    inputs = [t.clone().requires_grad_(k == 0) for k, t in enumerate(inputs)]
    out = loss_fn(*inputs)
    val = out if out.ndim == 0 else out.sum()
    val.backward()
    g = inputs[0].grad
    print(f"{name:34s} {out.sum().item():9.5f} shape {tuple(out.shape)} grad[0] "
          f"{[round(v, 5) for v in g.flatten()[:3].tolist()]}")


s1, s2 = arr(6), arr(6)
yr = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
show("MarginRankingLoss(margin=0.5)", nn.MarginRankingLoss(margin=0.5), s1, s2, yr)
show("MarginRankingLoss(none)", nn.MarginRankingLoss(reduction="none"), s1, s2, yr)
logits = arr(5, 4)
cls = torch.tensor([0, 3, 1, 2, 3])
show("MultiMarginLoss()", nn.MultiMarginLoss(), logits, cls)
show("MultiMarginLoss(p=2, margin=0.7, w)", nn.MultiMarginLoss(p=2, margin=0.7,
     weight=torch.tensor([1.0, 2.0, 0.5, 1.0])), logits, cls)
show("MultiMarginLoss(sum)", nn.MultiMarginLoss(reduction="sum"), logits, cls)
tags = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 1], [1, 1, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]]).float()
show("MultiLabelSoftMarginLoss(w)", nn.MultiLabelSoftMarginLoss(weight=torch.tensor([1.0, 0.5, 2.0, 1.0])),
     logits, tags)
mlm_t = torch.tensor([[0, 2, -1, 0], [3, -1, 1, 1], [0, 1, 2, -1], [1, -1, 0, 0], [-1, 0, 0, 0]])
show("MultiLabelMarginLoss", nn.MultiLabelMarginLoss(), logits, mlm_t)
d = arr(6).abs()
show("HingeEmbeddingLoss(margin=1.5)", nn.HingeEmbeddingLoss(margin=1.5), d, yr)
show("SoftMarginLoss", nn.SoftMarginLoss(), s1, yr)
a, p_, n_ = arr(4, 8), arr(4, 8), arr(4, 8)
show("CosineEmbeddingLoss(margin=0.2)", nn.CosineEmbeddingLoss(margin=0.2), a, p_,
     torch.tensor([1, -1, 1, -1]))
show("TripletMarginLoss(p=1, swap)", nn.TripletMarginLoss(margin=1.0, p=1, swap=True), a, p_, n_)
show("TripletMarginLoss(eps, none)", nn.TripletMarginLoss(eps=1e-3, reduction="none"), a, p_, n_)
show("TripletWithDistance(cosine)", nn.TripletMarginWithDistanceLoss(
    distance_function=lambda x, y: 1.0 - F.cosine_similarity(x, y), margin=0.3), a, p_, n_)
show("TripletWithDistance(default)", nn.TripletMarginWithDistanceLoss(swap=True), a, p_, n_)
print("functional agrees:", torch.allclose(F.multi_margin_loss(logits, cls, p=2, margin=0.7),
                                           nn.MultiMarginLoss(p=2, margin=0.7)(logits, cls)))

# ---- a pairwise ranker ----
Q, Dn, F_ = 12, 10, 6
w_true = arr(F_)
docs = arr(Q, Dn, F_)
rel = (docs @ w_true + 0.3 * arr(Q, Dn)).clamp(min=-1.5, max=1.5).add(1.5).round()  # grades 0..3


def ndcg_at_k(scores, rel, k=5):
    _, idx = scores.topk(k, dim=1)
    gains = (2 ** rel.gather(1, idx) - 1)
    disc = 1.0 / torch.log2(torch.arange(2, k + 2).float())
    dcg = (gains * disc).sum(1)
    ideal = (2 ** rel.sort(dim=1, descending=True).values[:, :k] - 1)
    idcg = (ideal * disc).sum(1)
    return (dcg / idcg.clamp_min(1e-9)).mean().item()


def mrr(scores, rel):
    order = scores.argsort(dim=1, descending=True)
    first = (rel.gather(1, order) >= 3).float().argmax(1)
    has = (rel >= 3).any(1)
    return (1.0 / (first[has] + 1).float()).mean().item()


scorer = nn.Sequential(nn.Linear(F_, 16), nn.ReLU(), nn.Linear(16, 1))
with torch.no_grad():
    for prm in scorer.parameters():
        prm.copy_(arr(*prm.shape, s=0.4))
i_idx, j_idx = torch.triu_indices(Dn, Dn, offset=1)
crit = nn.MarginRankingLoss(margin=0.1, reduction="none")
opt = torch.optim.Adam(scorer.parameters(), lr=1e-2)
print(f"before: ndcg@5 {ndcg_at_k(scorer(docs).squeeze(-1), rel):.4f} mrr {mrr(scorer(docs).squeeze(-1), rel):.4f}")
losses = []
for step in range(60):
    s = scorer(docs).squeeze(-1)  # (Q, Dn)
    si, sj = s[:, i_idx], s[:, j_idx]
    target = torch.sign(rel[:, i_idx] - rel[:, j_idx])
    mask = target != 0
    pair = crit(si, sj, target)
    listwise = -(F.softmax(rel, 1) * F.log_softmax(s, 1)).sum(1).mean()
    loss = pair[mask].mean() + 0.1 * listwise
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} pairs {int(mask.sum())}")
with torch.no_grad():
    s = scorer(docs).squeeze(-1)
    nd = ndcg_at_k(s, rel)
    print(f"after: ndcg@5 {nd:.4f} mrr {mrr(s, rel):.4f} oracle ndcg {ndcg_at_k(rel, rel):.4f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {nd:.4f}")
