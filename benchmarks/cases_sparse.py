"""Sparse-dense products as graph networks run them: torch.sparse.mm(adj, x) with a random
adjacency in COO (coalesced) and CSR form, float32, forward alone and forward + backward (the
gradient of the dense operand and of the adjacency's values), one intra-op thread per framework
as everywhere."""

from __future__ import annotations

import numpy as np
from harness import Stmt, case

# (nodes, edges, features)
SIZES = [(10_000, 100_000, 64), (2_000, 20_000, 16)]


def _graph(fw, n: int, e: int, f: int, csr: bool, grad: bool):
    rng = np.random.default_rng(n)
    idx = np.stack([rng.integers(0, n, e), rng.integers(0, n, e)]).astype(np.int64)
    vals = fw.from_numpy(rng.random(e, dtype=np.float32))
    adj = fw.mod.sparse_coo_tensor(fw.from_numpy(idx), vals, (n, n)).coalesce()
    if grad:  # the adjacency's leaf values (the statement builds the tensor over them)
        return adj.indices(), adj.values().requires_grad_(True), x_of(fw, rng, n, f, grad)
    if csr:
        adj = adj.to_sparse_csr()
    return adj, x_of(fw, rng, n, f, grad)


def x_of(fw, rng, n: int, f: int, grad: bool):
    x = fw.from_numpy(rng.standard_normal((n, f), dtype=np.float32))
    return x.requires_grad_(True) if grad else x


def _register(n: int, e: int, f: int) -> None:
    for layout in ("coo", "csr"):
        @case(f"sparse/mm {layout} ({n}, {n}) nnz {e} @ ({n}, {f})", unit="us", rtol=1e-4,
              atol=1e-4, doc=f"torch.sparse.mm(adj, x): adj {layout} (n={n}, ~{e} entries), "
              f"x ({n}, {f}) float32")
        def _fwd(fw, layout=layout):
            adj, x = _graph(fw, n, e, f, layout == "csr", False)
            return Stmt("sp.mm(adj, x)", sp=fw.mod.sparse, adj=adj, x=x)

    @case(f"sparse/mm coo fwd+bwd ({n}, {n}) nnz {e} @ ({n}, {f})", unit="us", check=False,
          doc=f"torch.sparse.mm(adj, x).sum().backward(): gradients of x and of adj's values "
          f"(n={n}, ~{e} entries, {f} features, float32)")
    def _bwd(fw):
        i, v, x = _graph(fw, n, e, f, False, True)
        return Stmt("sp.mm(coo(i, v, size, is_coalesced=True, check_invariants=False), x)"
                    ".sum().backward()", sp=fw.mod.sparse, coo=fw.mod.sparse_coo_tensor, i=i,
                    v=v, x=x, size=(n, n))


for _n, _e, _f in SIZES:
    _register(_n, _e, _f)


# Block-sparse (BSR) matrix times a dense matrix, as block-sparse attention/weights use it: square
# blocks (PyTorch's CPU kernel takes only those), ~10% of the blocks kept, float32.
BSR_SIZES = [(1024, 16, 64), (512, 32, 128)]  # (n, block, features)


def _bsr(fw, n: int, b: int, f: int, grad: bool):
    rng = np.random.default_rng(n + b)
    keep = rng.random((n // b, n // b)) < 0.1
    dense = rng.standard_normal((n, n), dtype=np.float32)
    dense *= np.kron(keep, np.ones((b, b), dtype=np.float32))
    s = fw.from_numpy(dense).to_sparse_bsr((b, b))
    x = x_of(fw, rng, n, f, grad)
    return s, x


def _register_bsr(n: int, b: int, f: int) -> None:
    @case(f"sparse/mm bsr ({n}, {n}) block {b} @ ({n}, {f})", unit="us", rtol=1e-4, atol=1e-3,
          doc=f"bsr @ x: ({n}, {n}) float32 in {b}x{b} blocks, ~10% of them kept; x ({n}, {f})")
    def _fwd(fw):
        s, x = _bsr(fw, n, b, f, False)
        return Stmt("s @ x", s=s, x=x)


for _n, _b, _f in BSR_SIZES:
    _register_bsr(_n, _b, _f)
