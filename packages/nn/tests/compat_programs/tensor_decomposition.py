"""Tensor decompositions, in the style of the public TensorLy-like PyTorch backends and the
"CP / Tucker from scratch" notebooks: mode-n unfolding and folding with torch.movedim and
reshape, the Khatri-Rao product by einsum (checked against torch.kron columns), CP decomposition
by alternating least squares (Hadamard products of Gram matrices, torch.linalg.pinv and
linalg.lstsq with driver="gelsd"), column normalization into weights, the reconstruction by
einsum, Tucker by the higher-order SVD (torch.linalg.svd(full_matrices=False) of each unfolding,
the core by successive torch.tensordot) and one HOOI refinement, the multilinear rank from
svdvals, a CP layer that compresses a Linear layer's weight (reshape into a 3-way tensor) then
fine-tuned with its factors as nn.Parameters in an nn.ParameterList, and torch.linalg.norm over
dims. Float64 and data from NumPy: torch and ember print the same numbers. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <CP relative error>."""

import numpy as np
import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(23)


def unfold(T, mode):
    return torch.movedim(T, mode, 0).reshape(T.shape[mode], -1)


def fold(M, mode, shape):
    full = [shape[mode]] + [s for i, s in enumerate(shape) if i != mode]
    return torch.movedim(M.reshape(full), 0, mode)


def khatri_rao(A, B):
    return torch.einsum("ir,jr->ijr", A, B).reshape(-1, A.shape[1])


def cp_reconstruct(weights, factors):
    return torch.einsum("r,ir,jr,kr->ijk", weights, *factors)


shape, rank = (6, 5, 4), 3
true = [torch.from_numpy(rng.normal(size=(s, rank))) for s in shape]
T = cp_reconstruct(torch.ones(rank), true) + 0.01 * torch.from_numpy(rng.normal(size=shape))
print("unfold/fold round trip:", all(torch.equal(fold(unfold(T, m), m, shape), T) for m in range(3)),
      [tuple(unfold(T, m).shape) for m in range(3)])
A, B = true[0], true[1]
kr = khatri_rao(A, B)
print("khatri-rao == kron columns:", torch.allclose(kr[:, 1], torch.kron(A[:, 1], B[:, 1])), tuple(kr.shape))

factors = [torch.from_numpy(rng.normal(size=(s, rank))) for s in shape]
errs = []
for it in range(60):
    for mode in range(3):
        others = [factors[m] for m in range(3) if m != mode]
        V = (others[0].T @ others[0]) * (others[1].T @ others[1])
        kr = khatri_rao(others[0], others[1])
        if mode == 1:  # solve by least squares instead of the pseudo-inverse
            sol = torch.linalg.lstsq(kr, unfold(T, mode).T, driver="gelsd").solution
            factors[mode] = sol.T
        else:
            factors[mode] = unfold(T, mode) @ kr @ torch.linalg.pinv(V)
    rec = cp_reconstruct(torch.ones(rank), factors)
    errs.append((torch.linalg.norm(T - rec) / torch.linalg.norm(T)).item())
norms = torch.stack([torch.linalg.vector_norm(f, dim=0) for f in factors])
weights = norms.prod(0)
unit = [f / n for f, n in zip(factors, norms)]
print(f"cp-als error {errs[0]:.5f} -> {errs[-1]:.6f}", "weights sorted",
      [round(w, 4) for w in torch.sort(weights, descending=True).values.tolist()],
      "same tensor:", torch.allclose(cp_reconstruct(weights, unit), rec))

# Tucker by HOSVD, then one HOOI sweep
ranks = (3, 3, 3)
Us = [torch.linalg.svd(unfold(T, m), full_matrices=False).U[:, :r] for m, r in enumerate(ranks)]


def tucker_core(T, Us):
    G = T
    for m, U in enumerate(Us):
        G = torch.movedim(torch.tensordot(G, U, dims=([m], [0])), -1, m)
    return G


def tucker_full(G, Us):
    X = G
    for m, U in enumerate(Us):
        X = torch.movedim(torch.tensordot(X, U, dims=([m], [1])), -1, m)
    return X


G = tucker_core(T, Us)
e_hosvd = (torch.linalg.norm(T - tucker_full(G, Us)) / torch.linalg.norm(T)).item()
for m in range(3):
    Y = T
    for k in range(3):
        if k != m:
            Y = torch.movedim(torch.tensordot(Y, Us[k], dims=([k], [0])), -1, k)
    Us[m] = torch.linalg.svd(unfold(Y, m), full_matrices=False).U[:, : ranks[m]]
G = tucker_core(T, Us)
e_hooi = (torch.linalg.norm(T - tucker_full(G, Us)) / torch.linalg.norm(T)).item()
print(f"tucker core {tuple(G.shape)} hosvd error {e_hosvd:.6f} hooi error {e_hooi:.6f}",
      "orthonormal:", all(torch.allclose(U.T @ U, torch.eye(U.shape[1])) for U in Us))
print("multilinear rank:", [int((torch.linalg.svdvals(unfold(T, m)) > 0.5).sum()) for m in range(3)],
      "frobenius over dims", [round(v, 4) for v in torch.linalg.norm(T, dim=(1, 2)).tolist()[:3]])


# compress a Linear layer's weight (out=6*5, in=4 -> a 6x5x4 tensor) with CP, then fine-tune
class CPLinear(nn.Module):
    def __init__(self, weights, factors, out_shape):
        super().__init__()
        self.factors = nn.ParameterList([nn.Parameter(f * w ** (1 / 3)) for f, w in
                                         zip(factors, [weights] * 3)])
        self.out_shape = out_shape

    def forward(self, x):
        W = torch.einsum("ir,jr,kr->ijk", *self.factors).reshape(-1, x.shape[-1])
        return x @ W.T


dense = nn.Linear(4, 30, bias=False)
with torch.no_grad():
    dense.weight.copy_(T.reshape(30, 4))
layer = CPLinear(weights, unit, (6, 5))
X = torch.from_numpy(rng.normal(size=(64, 4)))
target = dense(X).detach()
opt = torch.optim.Adam(layer.parameters(), lr=0.01)
losses = []
for step in range(50):
    loss = nn.functional.mse_loss(layer(X), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print("cp layer params", sum(p.numel() for p in layer.parameters()), "vs dense", dense.weight.numel(),
      f"fine-tune {losses[0]:.3e} -> {losses[-1]:.3e}")
print(f"RESULT {losses[0]:.6e} {losses[-1]:.6e} {errs[-1]:.6f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
