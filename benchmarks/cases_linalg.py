"""torch.linalg's symmetric eigensolvers on batches of small float32 matrices (the size of
per-head or per-point covariance matrices): eigh (values and vectors) and eigvalsh, one
intra-op thread per framework as everywhere."""

from __future__ import annotations

import numpy as np
from harness import Stmt, case

# (batch, n): the same number of matrix entries give or take, from many tiny to fewer larger
SIZES = [(512, 4), (256, 8), (128, 16), (64, 32)]


def _sym(fw, b: int, n: int):
    """A batch of random symmetric float32 matrices (the same values for both frameworks)."""
    a = np.random.default_rng(n).standard_normal((b, n, n), dtype=np.float32)
    return fw.from_numpy(a + np.swapaxes(a, -1, -2))


def _register(b: int, n: int) -> None:
    @case(f"linalg/eigh ({b}, {n}, {n})", unit="us", check=False,
          doc=f"torch.linalg.eigh(a), a ({b}, {n}, {n}) symmetric float32 (not compared: the "
          "eigenvectors' signs are arbitrary; tests/test_linalg_lapack.py checks both)")
    def _eigh(fw):
        return Stmt("LA.eigh(a)", LA=fw.mod.linalg, a=_sym(fw, b, n))

    @case(f"linalg/eigvalsh ({b}, {n}, {n})", unit="us", rtol=1e-4, atol=1e-4,
          doc=f"torch.linalg.eigvalsh(a), a ({b}, {n}, {n}) symmetric float32")
    def _eigvalsh(fw):
        return Stmt("LA.eigvalsh(a)", LA=fw.mod.linalg, a=_sym(fw, b, n))


for _b, _n in SIZES:
    _register(_b, _n)
