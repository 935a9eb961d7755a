"""Post-training compression of an MLP classifier in the style of public low-rank / pruning
recipes: train a baseline, then replace each nn.Linear by a rank-r factorisation from the
truncated SVD (torch.linalg.svd with full_matrices=False, singular values split as sqrt into
both factors, the energy kept per layer from cumsum of S^2), by torch.svd_lowrank with a fixed
number of power iterations and seeded starting matrix, checking the relative reconstruction
error against the Eckart-Young bound (the norm of the dropped singular values); swap modules in
place through named_modules / setattr on the parent, fine-tune the factors briefly, compare
parameter counts and accuracy, then global magnitude pruning with torch.nn.utils.prune
(global_unstructured, L1Unstructured) on the factors, prune.remove to make it permanent, and
the sparsity per layer. Data from NumPy. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <compressed accuracy>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.prune as prune

torch.manual_seed(0)
rng = np.random.default_rng(32)
N, D, C = 600, 20, 5
centres = rng.normal(size=(C, D)) * 1.2
y_np = rng.integers(0, C, size=N)
proj = rng.normal(size=(D, D)) / np.sqrt(D)
X = torch.from_numpy((centres[y_np] + rng.normal(size=(N, D))) @ proj).float()
Y = torch.from_numpy(y_np).long()
tr, te = slice(0, 480), slice(480, None)

model = nn.Sequential(nn.Linear(D, 96), nn.ReLU(), nn.Linear(96, 96), nn.ReLU(), nn.Linear(96, 64), nn.ReLU(), nn.Linear(64, C))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, p.shape[-1] ** -0.5, size=tuple(p.shape))).float())


def fit(m, epochs, lr):
    opt = torch.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=lr)
    losses = []
    for _ in range(epochs):
        perm = torch.from_numpy(rng.permutation(480))
        tot = 0.0
        for i in range(0, 480, 96):
            idx = perm[i:i + 96]
            loss = F.cross_entropy(m(X[tr][idx]), Y[tr][idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item() / 5
        losses.append(tot)
    return losses


def acc(m):
    with torch.no_grad():
        return (m(X[te]).argmax(1) == Y[te]).float().mean().item()


def n_params(m):
    return sum(p.numel() for p in m.parameters())


losses = fit(model, 15, 5e-3)
base_acc = acc(model)
print(f"baseline loss {losses[0]:.5f} -> {losses[-1]:.5f} acc {base_acc:.4f} params {n_params(model)}")


class LowRankLinear(nn.Module):
    def __init__(self, first, second):
        super().__init__()
        self.first, self.second = first, second

    def forward(self, x):
        return self.second(self.first(x))


def factorize(lin, rank, method):
    W = lin.weight.detach()
    if method == "svd":
        U, S, Vh = torch.linalg.svd(W, full_matrices=False)
        V = Vh.T
        S_all = S
    else:
        torch.manual_seed(0)
        U, S, V = torch.svd_lowrank(W, q=rank + 8, niter=6)
        S_all = torch.linalg.svdvals(W)
    U, S, V = U[:, :rank], S[:rank], V[:, :rank]
    first = nn.Linear(W.shape[1], rank, bias=False)
    second = nn.Linear(rank, W.shape[0], bias=lin.bias is not None)
    with torch.no_grad():
        first.weight.copy_((V * S.sqrt()).T)
        second.weight.copy_(U * S.sqrt())
        if lin.bias is not None:
            second.bias.copy_(lin.bias)
    err = torch.linalg.matrix_norm(second.weight @ first.weight - W) / torch.linalg.matrix_norm(W)
    bound = S_all[rank:].square().sum().sqrt() / S_all.square().sum().sqrt()
    energy = (torch.cumsum(S_all ** 2, 0) / (S_all ** 2).sum())[rank - 1]
    return LowRankLinear(first, second), err.item(), bound.item(), energy.item()


variants = {}
for method in ["svd", "svd_lowrank"]:
    small = copy.deepcopy(model)
    report = []
    for name, mod in list(small.named_modules()):
        if isinstance(mod, nn.Linear) and min(mod.in_features, mod.out_features) >= 64:
            new, err, bound, energy = factorize(mod, 12, method)
            parent = small.get_submodule(name.rpartition(".")[0]) if "." in name else small
            setattr(parent, name.rpartition(".")[2], new)
            report.append(f"{name}: err {err:.4f} bound {bound:.4f} energy {energy:.4f}")
    print(method, "; ".join(report))
    print(f"{method} before fine-tune acc {acc(small):.4f} params {n_params(small)} structure {[type(m).__name__ for m in small]}")
    variants[method] = small
compressed = variants["svd"]  # the randomized factors depend on the generator's stream
ft = fit(compressed, 6, 2e-3)
comp_acc = acc(compressed)
print(f"fine-tuned loss {ft[0]:.5f} -> {ft[-1]:.5f} acc {comp_acc:.4f}")

params_to_prune = [(m, "weight") for m in compressed.modules() if isinstance(m, nn.Linear)]
prune.global_unstructured(params_to_prune, pruning_method=prune.L1Unstructured, amount=0.4)
names = sorted(n for n, _ in compressed.named_buffers())
print("mask buffers", names[:3], "has weight_orig", any(n.endswith("weight_orig") for n, _ in compressed.named_parameters()))
pruned_acc = acc(compressed)
for m, _ in params_to_prune:
    prune.remove(m, "weight")
zeros = [round((m.weight == 0).float().mean().item(), 4) for m, _ in params_to_prune]
total = sum(int((m.weight == 0).sum()) for m, _ in params_to_prune) / sum(m.weight.numel() for m, _ in params_to_prune)
print(f"pruned acc {pruned_acc:.4f} sparsity per layer {zeros} global {total:.4f} after remove buffers {len(list(compressed.named_buffers()))}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {comp_acc:.6f}")
