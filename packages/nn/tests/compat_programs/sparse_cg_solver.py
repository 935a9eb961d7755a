"""Sparse linear algebra as graph and PDE code uses it: the 5-point Laplacian of a grid built as
a COO tensor from edge lists (duplicates summed by coalesce, indices / values / nnz, transposes,
symmetry by comparing to_dense), conversion to CSR (crow_indices / col_indices / values) and back,
sparse @ dense products (torch.sparse.mm, torch.mm, matmul with CSR), a Jacobi-preconditioned
conjugate gradient solve of a Poisson problem checked against torch.linalg.solve on the dense
matrix, label propagation on a k-NN graph with a row-normalized sparse adjacency
(torch.sparse.sum, sparse * dense broadcasting via values), sparse_mask, and gradients flowing
through torch.sparse.mm into the values of a sparse tensor built with requires_grad (a learned
edge weighting fit by Adam). Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <cg iterations> <cg residual ok> <label
propagation accuracy>."""

import numpy as np
import torch

rng = np.random.default_rng(1511)
torch.set_default_dtype(torch.float64)


def grid_laplacian(n, shift=0.0):
    rows, cols, vals = [], [], []
    def idx(i, j):
        return i * n + j

    for i in range(n):
        for j in range(n):
            rows.append(idx(i, j))
            cols.append(idx(i, j))
            vals.append(4.0 + shift)
            for di, dj in ((0, 1), (1, 0), (0, -1), (-1, 0)):
                a, b = i + di, j + dj
                if 0 <= a < n and 0 <= b < n:
                    rows.append(idx(i, j))
                    cols.append(idx(a, b))
                    vals.append(-1.0)
    # every diagonal entry appears twice, as halves, to exercise coalesce
    rows = rows + rows[:1]
    cols = cols + cols[:1]
    vals = vals + [0.0]
    return torch.sparse_coo_tensor(torch.tensor([rows, cols]), torch.tensor(vals), (n * n, n * n))


n = 10
A = grid_laplacian(n, shift=0.1)
print(f"coalesced before {A.is_coalesced()} nnz {A._nnz()}")
A = A.coalesce()
print(f"coalesced {A.is_coalesced()} nnz {A._nnz()} indices {tuple(A.indices().shape)} layout {A.layout}")
D = A.to_dense()
print(f"symmetric {torch.equal(D, D.T)} transpose equal {torch.equal(A.t().coalesce().to_dense(), D)} diag {D.diagonal()[:3].tolist()}")
csr = A.to_sparse_csr()
print(f"csr crow {tuple(csr.crow_indices().shape)} col {tuple(csr.col_indices().shape)} layout {csr.layout} "
      f"first row cols {csr.col_indices()[:3].tolist()} back to coo equal {torch.equal(csr.to_sparse_coo().to_dense(), D)}")
x = torch.from_numpy(rng.normal(size=(n * n, 3)))
print(f"products agree: sparse.mm {torch.allclose(torch.sparse.mm(A, x), D @ x)} mm {torch.allclose(torch.mm(A, x), D @ x)} "
      f"csr matmul {torch.allclose(csr @ x, D @ x)} mv {torch.allclose(torch.mv(A, x[:, 0]), D @ x[:, 0])}")

b = torch.from_numpy(rng.normal(size=n * n))
diag = torch.sparse.sum(A * torch.sparse_coo_tensor(A.indices(), (A.indices()[0] == A.indices()[1]).double(), A.shape), dim=1).to_dense()
print(f"diagonal via sparse.sum == dense diagonal: {torch.allclose(diag, D.diagonal())}")


def pcg(A, b, M_inv, tol=1e-10, maxiter=200):
    x = torch.zeros_like(b)
    r = b - torch.mv(A, x)
    z = M_inv * r
    p = z.clone()
    rz = torch.dot(r, z)
    for k in range(maxiter):
        Ap = torch.mv(A, p)
        alpha = rz / torch.dot(p, Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        if torch.linalg.norm(r) < tol * torch.linalg.norm(b):
            return x, k + 1
        z = M_inv * r
        rz_new = torch.dot(r, z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, maxiter


x_cg, iters = pcg(A, b, 1.0 / diag)
x_ref = torch.linalg.solve(D, b)
ok = torch.allclose(x_cg, x_ref, atol=1e-8)
print(f"pcg converged in {iters} iterations, matches solve: {ok}")

# label propagation on a kNN graph
m = 120
centers = np.array([[0, 0], [3, 0], [1.5, 2.5]])
y = rng.integers(0, 3, m)
pts = torch.from_numpy(centers[y] + 0.6 * rng.normal(size=(m, 2)))
d = torch.cdist(pts, pts)
d.fill_diagonal_(float("inf"))
knn = d.topk(6, largest=False).indices
rows = torch.arange(m).repeat_interleave(6)
cols = knn.reshape(-1)
w = torch.exp(-d[rows, cols] ** 2)
W = torch.sparse_coo_tensor(torch.stack([torch.cat([rows, cols]), torch.cat([cols, rows])]), torch.cat([w, w]), (m, m)).coalesce()
deg = torch.sparse.sum(W, dim=1).to_dense()
P = torch.sparse_coo_tensor(W.indices(), W.values() / deg[W.indices()[0]], (m, m))
print(f"row-stochastic: {torch.allclose(torch.sparse.sum(P, 1).to_dense(), torch.ones(m))} nnz {W._nnz()} symmetric {torch.equal(W.to_dense(), W.to_dense().T)}")
labeled = torch.zeros(m, dtype=torch.bool)
labeled[torch.from_numpy(rng.permutation(m)[:9])] = True
Y0 = torch.zeros(m, 3)
Y0[labeled, torch.from_numpy(y)[labeled]] = 1
F_ = Y0.clone()
for _ in range(50):
    F_ = 0.9 * torch.sparse.mm(P, F_) + 0.1 * Y0
acc = (F_.argmax(1) == torch.from_numpy(y))[~labeled].double().mean().item()
print(f"label propagation accuracy {acc:.4f}")
masked = W.sparse_mask(torch.sparse_coo_tensor(W.indices()[:, :10], torch.ones(10), (m, m)).coalesce())
print(f"sparse_mask keeps {masked._nnz()} values equal {torch.equal(masked.values(), W.values()[:10])}")

# gradients into sparse values: learn per-edge weights so that smoothing fits a target signal
vals = torch.ones(W._nnz(), requires_grad=True)
target = torch.sin(pts[:, 0]) + pts[:, 1] * 0.3
noisy = target + 0.3 * torch.from_numpy(rng.normal(size=m))
opt = torch.optim.Adam([vals], lr=0.05)
for step in range(40):
    Ws = torch.sparse_coo_tensor(W.indices(), torch.nn.functional.softplus(vals), (m, m))
    sm = torch.sparse.mm(Ws, noisy.unsqueeze(1)).squeeze(1) / torch.sparse.mm(Ws, torch.ones(m, 1)).squeeze(1)
    loss = ((sm - target) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step in (0, 39):
        print(f"edge weighting step {step:2d} loss {loss.item():.6f} grad shape {tuple(vals.grad.shape)}")
print(f"RESULT {iters} {int(ok)} {acc:.4f}")
