"""The tensor idioms that real PyTorch code leans on, in the style of the snippets collected in
cookbooks and answers: einsum contractions, scatter_add_/index_add_/bincount histograms and
segment sums, topk/sort/argsort/gather for top-k accuracy and ranking, masked_fill/where for
masking, cumsum/cumprod, one_hot, F.pad in its four modes, unfold/fold sliding windows (and
Tensor.unfold), repeat_interleave, unique, nonzero, clamp, chunk/split, flip/roll, tril/triu and
diagonal, a segment softmax. Everything printed is deterministic: the test compares ember's output
to torch's line by line. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember."""

import numpy as np
import torch
import torch.nn.functional as F

torch.set_printoptions(precision=4)
rng = np.random.default_rng(0)
a = torch.from_numpy(rng.standard_normal((2, 3, 4)).astype(np.float32))
b = torch.from_numpy(rng.standard_normal((2, 4, 5)).astype(np.float32))

# ---- einsum ----
bmm = torch.einsum("bij,bjk->bik", a, b)
assert torch.allclose(bmm, torch.bmm(a, b), atol=1e-6)
print("einsum trace", torch.einsum("ii", torch.arange(9.).view(3, 3)))
print("einsum outer", torch.einsum("i,j->ij", torch.arange(3.), torch.arange(2.)))
print("einsum sum b", torch.einsum("bij->j", a).shape, torch.einsum("...j,j->...", a,
                                                                    torch.ones(4)).shape)
q = a.view(2, 3, 2, 2)  # (batch, seq, heads, dim)
scores = torch.einsum("bqhd,bkhd->bhqk", q, q)
print("attention scores", tuple(scores.shape), f"{scores.sum().item():.4f}")

# ---- scatter / index_add / bincount ----
labels = torch.tensor([0, 2, 1, 2, 2, 0, 3])
values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
seg = torch.zeros(4).scatter_add_(0, labels, values)
print("segment sums", seg)
print("index_add", torch.zeros(4).index_add_(0, labels, values, alpha=2))
print("bincount", torch.bincount(labels), torch.bincount(labels, weights=values, minlength=6))
counts = torch.bincount(labels, minlength=4).clamp(min=1)
print("segment means", seg / counts)
rows = torch.zeros(3, 5).scatter_(1, torch.tensor([[0, 1], [2, 3], [4, 0]]), 1.0)
print("scatter_ rows", rows)
print("scatter reduce", torch.zeros(4).scatter_reduce(0, labels, values, reduce="amax",
                                                     include_self=False))
feats = torch.arange(14.).view(7, 2)
pooled = torch.zeros(4, 2).index_add_(0, labels, feats)
print("index_add rows", pooled)
print("index_select", feats.index_select(0, torch.tensor([6, 0])))

# ---- top-k, sort, gather ----
logits = torch.from_numpy(rng.standard_normal((6, 5)).astype(np.float32))
target = torch.tensor([0, 1, 2, 3, 4, 0])
_, pred = logits.topk(3, dim=1, largest=True, sorted=True)
correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
print("top-1/top-3 acc", correct[:1].reshape(-1).float().sum(0).item(),
      correct[:3].reshape(-1).float().sum(0, keepdim=True).item())
vals, idx = torch.sort(logits[0], descending=True)
print("sorted", vals, idx)
print("argsort stable", torch.argsort(torch.tensor([3, 1, 2, 1, 3]), stable=True))
print("gather", logits.gather(1, target.unsqueeze(1)).squeeze(1))
print("kthvalue", torch.kthvalue(logits[0], 2).values.item() == vals[-2].item())
print("max dim", logits.max(dim=1).indices, logits.argmin(1))

# ---- masking ----
lengths = torch.tensor([3, 1, 4])
mask = torch.arange(4)[None, :] < lengths[:, None]
print("length mask", mask)
s = torch.arange(12.).view(3, 4).masked_fill(~mask, float("-inf"))
print("masked softmax", s.softmax(-1))
print("where", torch.where(mask, torch.arange(12.).view(3, 4), torch.tensor(-1.0)))
print("where scalar", torch.where(logits[0] > 0, logits[0], 0.0))
print("masked_select", torch.arange(12).view(3, 4).masked_select(mask))
x = torch.arange(12.).view(3, 4)
x[~mask] = 0
x[x > 6] *= 10
print("bool-index assign", x)
print("nonzero", mask.nonzero(), torch.nonzero(mask, as_tuple=True)[1])

# ---- cumulative ----
print("cumsum", torch.arange(1, 6).cumsum(0), torch.ones(2, 3).cumsum(dim=1))
print("cumprod", torch.tensor([1.0, 2.0, 3.0, 4.0]).cumprod(0))
rewards = torch.tensor([0.0, 0.0, 1.0, 0.0, 1.0])
gamma = 0.9
disc = gamma ** torch.arange(5.0)
returns = (rewards * disc).flip(0).cumsum(0).flip(0) / disc
print("discounted returns", returns)
print("cummax", torch.cummax(torch.tensor([1, 3, 2, 5, 4]), 0).values,
      torch.logcumsumexp(torch.zeros(3), 0))

# ---- one_hot ----
oh = F.one_hot(labels, num_classes=5)
print("one_hot", oh.dtype, oh.sum(0), F.one_hot(torch.tensor([[0, 1], [2, 0]])).shape)
smoothed = oh.float() * 0.9 + 0.1 / 5
print("smoothed row", smoothed[0])

# ---- padding ----
img = torch.arange(9.).view(1, 1, 3, 3)
for mode in ("constant", "reflect", "replicate", "circular"):
    p = F.pad(img, (1, 1, 1, 0), mode=mode) if mode != "constant" else F.pad(img, (1, 1, 1, 0),
                                                                             value=-1.0)
    print("pad", mode, p[0, 0])
print("pad 1d", F.pad(torch.arange(4.).view(1, 1, 4), (2, 1), mode="reflect"))
print("pad last dims", F.pad(torch.ones(2, 3), (0, 2)).shape, F.pad(torch.ones(2, 3), (1, 1, 2, 0)))

# ---- unfold / fold ----
x = torch.arange(32.).view(1, 2, 4, 4)
cols = F.unfold(x, kernel_size=2, stride=2)
print("unfold", tuple(cols.shape), cols[0, :, 0])
back = F.fold(cols, output_size=(4, 4), kernel_size=2, stride=2)
print("fold roundtrip", torch.equal(back, x))
ov = F.fold(F.unfold(x, kernel_size=3, padding=1), (4, 4), kernel_size=3, padding=1)
div = F.fold(F.unfold(torch.ones_like(x), kernel_size=3, padding=1), (4, 4), kernel_size=3,
             padding=1)
print("overlap counts", div[0, 0], torch.allclose(ov / div, x))
w = torch.from_numpy(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
conv_by_unfold = (w.view(3, -1) @ F.unfold(x, 3, padding=1)).view(1, 3, 4, 4)
print("conv as unfold+matmul", torch.allclose(conv_by_unfold, F.conv2d(x, w, padding=1),
                                              atol=1e-4))
series = torch.arange(10.)
win = series.unfold(0, 4, 3)
print("Tensor.unfold", win, series.view(2, 5).unfold(1, 2, 2).shape)
patches = x.unfold(2, 2, 2).unfold(3, 2, 2)
print("patches", tuple(patches.shape), patches[0, 0, 1, 1])

# ---- the rest of the toolbox ----
print("repeat_interleave", torch.repeat_interleave(torch.tensor([1, 2, 3]), torch.tensor([2, 0,
                                                                                          1])),
      torch.tensor([[1, 2]]).repeat_interleave(2, dim=0))
u, inv, cnt = torch.unique(torch.tensor([3, 1, 3, 2, 1, 3]), return_inverse=True,
                           return_counts=True)
print("unique", u, inv, cnt)
print("unique_consecutive", torch.unique_consecutive(torch.tensor([1, 1, 2, 2, 3, 1])))
print("chunk/split", [t.shape[0] for t in torch.arange(10).chunk(3)],
      [t.tolist() for t in torch.arange(7).split([2, 5])])
print("flip/roll", torch.arange(6).view(2, 3).flip(1), torch.roll(torch.arange(5), 2),
      torch.arange(6).view(2, 3).roll(1, dims=1))
print("tril/triu", torch.ones(3, 3).tril(-1), torch.ones(2, 3).triu())
print("diagonal", torch.arange(9).view(3, 3).diagonal(offset=1), torch.diag(torch.tensor([1, 2])),
      torch.diag_embed(torch.ones(2, 2)).shape)
print("clamp", torch.tensor([-2.0, 0.5, 3.0]).clamp(-1, 1), torch.tensor([1, 5, 9]).clamp(max=4))
print("stack/cat", torch.stack([torch.ones(2), torch.zeros(2)], dim=1),
      torch.cat([torch.ones(1, 2), torch.zeros(2, 2)]).shape)
print("expand/repeat", torch.tensor([[1], [2]]).expand(2, 3), torch.tensor([1, 2]).repeat(2, 2))
print("meshgrid", [t.tolist() for t in torch.meshgrid(torch.arange(2), torch.arange(3),
                                                      indexing="ij")])
print("cdist", torch.cdist(torch.tensor([[0.0, 0.0], [3.0, 4.0]]), torch.tensor([[0.0, 0.0]])))
print("norms", torch.linalg.vector_norm(torch.tensor([3.0, 4.0])),
      torch.tensor([[3.0, 4.0]]).norm(dim=1), F.normalize(torch.tensor([[3.0, 4.0]]), dim=1))
print("logsumexp", torch.logsumexp(torch.tensor([[0.0, 0.0], [1.0, 2.0]]), dim=1))
print("amax/aminmax", torch.amax(torch.arange(6).view(2, 3), dim=0),
      torch.aminmax(torch.tensor([3, -1, 7])))
print("std/var", torch.std_mean(torch.tensor([1.0, 2.0, 3.0, 4.0])),
      torch.var(torch.tensor([1.0, 2.0, 3.0, 4.0]), unbiased=False))
print("searchsorted/bucketize", torch.searchsorted(torch.tensor([1, 3, 5, 7]),
                                                   torch.tensor([0, 3, 6, 9])),
      torch.bucketize(torch.tensor([0.1, 2.5, 9.0]), torch.tensor([1.0, 2.0, 3.0])))
print("histc", torch.histc(torch.tensor([1.0, 2.0, 1.0, 4.0]), bins=4, min=0, max=4))
print("isin", torch.isin(torch.tensor([1, 2, 3, 4]), torch.tensor([2, 4])))
print("any/all", mask.any(dim=1), mask.all(dim=1), bool(mask.any()))
print("take_along_dim", torch.take_along_dim(logits, logits.argmax(1, keepdim=True), dim=1)
      .squeeze(1).equal(logits.max(1).values))
print("tensor_split", [t.tolist() for t in torch.tensor_split(torch.arange(7), [2, 5])])
print("movedim/flatten", torch.zeros(2, 3, 4).movedim(-1, 0).shape,
      torch.zeros(2, 3, 4).flatten(1).shape, torch.zeros(2, 12).unflatten(1, (3, 4)).shape)

# a segment softmax over graph edges, in the style of message-passing code
edge_dst = torch.tensor([0, 0, 1, 2, 2, 2])
edge_score = torch.tensor([1.0, 2.0, 0.5, 0.0, 1.0, 3.0])
seg_max = torch.full((3,), float("-inf")).scatter_reduce(0, edge_dst, edge_score, "amax")
ex = (edge_score - seg_max[edge_dst]).exp()
den = torch.zeros(3).index_add_(0, edge_dst, ex)
alpha = ex / den[edge_dst]
print("segment softmax", alpha, torch.zeros(3).index_add_(0, edge_dst, alpha))
# gradients flow through the idioms
x = torch.arange(6.0, requires_grad=True)
y = torch.zeros(3).scatter_add(0, torch.tensor([0, 0, 1, 1, 2, 2]), x * x)
y2 = x.view(2, 3).gather(1, torch.tensor([[2], [0]])).sum() + y.sum() + x.cumsum(0).sum()
y2.backward()
print("grads", x.grad)
print("RESULT", f"{seg.sum().item():.4f}", f"{alpha.sum().item():.4f}")
