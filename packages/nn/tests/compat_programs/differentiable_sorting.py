"""Differentiable sorting and ranking in the style of the public NeuralSort / SoftSort /
fast-soft-sort PyTorch code: NeuralSort's relaxed permutation matrix (|s_i - s_j| row sums,
(n + 1 - 2i) s scaled by a temperature, a row softmax), SoftSort's -|s_sorted - s| / tau
softmax, both converging to the hard permutation (from torch.sort(descending=True, stable=True))
as tau shrinks, soft ranks from pairwise sigmoids, a Spearman-correlation loss for learning to
rank, the straight-through hard permutation (hard - soft.detach() + soft), and tie handling in
torch.sort / argsort / topk / unique_consecutive / searchsorted / bucketize / kthvalue / msort.
A small scorer is trained on a listwise task with the soft Spearman loss and judged by the hard
Spearman correlation. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <test spearman>."""

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(1512)


def neural_sort(s, tau):
    """s: (B, n) scores -> (B, n, n) relaxed permutation (row i soft-selects the i-th largest)."""
    n = s.shape[1]
    s = s.unsqueeze(-1)
    A = torch.abs(s - s.transpose(1, 2))
    B = A.sum(dim=2, keepdim=True).expand(-1, -1, n).transpose(1, 2)  # b_j = sum_k |s_j - s_k|
    scaling = (n + 1 - 2 * (torch.arange(n, dtype=s.dtype) + 1)).view(1, n, 1)
    C = scaling * s.transpose(1, 2)
    return torch.softmax((C - B) / tau, dim=-1)


def soft_sort(s, tau):
    s_sorted = s.sort(descending=True, dim=1).values
    return torch.softmax(-torch.abs(s_sorted.unsqueeze(-1) - s.unsqueeze(1)) / tau, dim=-1)


def hard_perm(s):
    idx = torch.sort(s, descending=True, stable=True, dim=1).indices
    return torch.nn.functional.one_hot(idx, s.shape[1]).to(s.dtype)


def soft_rank(s, tau):
    """rank_i = 1 + sum_j sigmoid((s_j - s_i) / tau), rank 1 = largest."""
    return 1 + torch.sigmoid((s.unsqueeze(-1) - s.unsqueeze(-2)) / tau).sum(-2) - 0.5


def spearman(a, b):
    a = a - a.mean(-1, keepdim=True)
    b = b - b.mean(-1, keepdim=True)
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


def hard_rank(s):
    return torch.argsort(torch.argsort(s, dim=-1, descending=True), dim=-1).to(s.dtype) + 1


s = torch.tensor([[0.3, 2.0, -1.0, 0.9, 1.1]])
P = hard_perm(s)
print(f"hard permutation rows {P.argmax(-1).tolist()} sorted {(P @ s.unsqueeze(-1)).squeeze(-1).tolist()}")
for tau in (1.0, 0.1, 0.01):
    ns, ss = neural_sort(s, tau), soft_sort(s, tau)
    print(f"tau {tau:5.2f} neuralsort err {(ns - P).abs().max().item():.6f} softsort err {(ss - P).abs().max().item():.6f} "
          f"row sums {ns.sum(-1).mean().item():.6f} column sums neuralsort {[round(v, 4) for v in ns.sum(-2)[0].tolist()]}")
print(f"soft ranks tau 0.05 {[round(v, 4) for v in soft_rank(s, 0.05)[0].tolist()]} hard {hard_rank(s)[0].tolist()}")

x = s.clone().requires_grad_(True)
soft = neural_sort(x, 0.5)
st = hard_perm(x) - soft.detach() + soft
(st @ torch.arange(5.0).view(1, 5, 1)).sum().backward()
print(f"straight-through forward is hard: {torch.equal(st.detach(), P)} grad {[round(v, 5) for v in x.grad[0].tolist()]}")

# ties
t = torch.tensor([3, 1, 2, 3, 1, 3, 2])
v, i = torch.sort(t, stable=True)
print(f"stable sort indices {i.tolist()} descending {torch.sort(t, descending=True, stable=True).indices.tolist()}")
print(f"argsort stable {torch.argsort(t, stable=True).tolist()} msort {torch.msort(t).tolist()}")
tk = torch.topk(torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0]), 2)
print(f"topk values {tk.values.tolist()} kthvalue {torch.kthvalue(torch.tensor([1.0, 3.0, 3.0, 2.0]), 2).values.item()}")
uc = torch.unique_consecutive(torch.tensor([1, 1, 2, 2, 2, 1, 3, 3]), return_counts=True, return_inverse=True)
print(f"unique_consecutive {uc[0].tolist()} inverse {uc[1].tolist()} counts {uc[2].tolist()}")
edges = torch.tensor([0.0, 1.0, 1.0, 2.0])
q = torch.tensor([-1.0, 0.0, 1.0, 1.5, 2.0, 3.0])
print(f"searchsorted left {torch.searchsorted(edges, q).tolist()} right {torch.searchsorted(edges, q, right=True).tolist()} "
      f"side {torch.searchsorted(edges, q, side='right').tolist()}")
print(f"bucketize {torch.bucketize(q, edges).tolist()} right {torch.bucketize(q, edges, right=True).tolist()}")
sorter = torch.argsort(torch.tensor([2.0, 0.0, 1.0]))
print(f"searchsorted with sorter {torch.searchsorted(torch.tensor([2.0, 0.0, 1.0]), torch.tensor([0.5, 1.5]), sorter=sorter).tolist()}")

# learning to rank with the soft spearman loss
d, n = 6, 8
w_true = torch.from_numpy(rng.normal(size=d).astype(np.float32))


def lists(b):
    x = torch.from_numpy(rng.normal(size=(b, n, d)).astype(np.float32))
    rel = x @ w_true + 0.3 * torch.from_numpy(rng.normal(size=(b, n)).astype(np.float32))
    return x, rel


scorer = nn.Sequential(nn.Linear(d, 16), nn.Tanh(), nn.Linear(16, 1))
with torch.no_grad():
    for p in scorer.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
opt = torch.optim.Adam(scorer.parameters(), lr=0.01)
losses = []
for step in range(60):
    x, rel = lists(32)
    scores = scorer(x).squeeze(-1)
    loss = (1 - spearman(soft_rank(scores, 0.1), hard_rank(rel))).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
x, rel = lists(200)
with torch.no_grad():
    rho = spearman(hard_rank(scorer(x).squeeze(-1)), hard_rank(rel)).mean().item()
print(f"loss {np.mean(losses[:3]):.5f} -> {np.mean(losses[-3:]):.5f} test spearman {rho:.4f}")
print(f"RESULT {np.mean(losses[:3]):.5f} {np.mean(losses[-3:]):.5f} {rho:.4f}")
