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


# The general eigensolver (geev) and the Householder / LDL^T factorizations, float64.
def _gen(fw, shape, seed=0):
    return fw.from_numpy(np.random.default_rng(seed).standard_normal(shape))


def _register_general(b: int, n: int) -> None:
    @case(f"linalg/eig ({b}, {n}, {n})", unit="us", check=False,
          doc=f"torch.linalg.eig(a), a ({b}, {n}, {n}) float64 (not compared: the eigenvalues' "
          "order and eigenvectors' phases may differ between LAPACKs; test_linalg_extra.py "
          "checks both)")
    def _eig(fw):
        return Stmt("LA.eig(a)", LA=fw.mod.linalg, a=_gen(fw, (b, n, n)))

    @case(f"linalg/geqrf ({b}, {2 * n}, {n})", unit="us", rtol=1e-9, atol=1e-9,
          doc=f"torch.geqrf(a), a ({b}, {2 * n}, {n}) float64")
    def _geqrf(fw):
        return Stmt("m.geqrf(a).a", m=fw.mod, a=_gen(fw, (b, 2 * n, n)))

    @case(f"linalg/ldl_factor ({b}, {n}, {n})", unit="us", rtol=1e-9, atol=1e-9,
          doc=f"torch.linalg.ldl_factor(a), a ({b}, {n}, {n}) symmetric float64")
    def _ldl(fw):
        a = np.random.default_rng(n).standard_normal((b, n, n))
        return Stmt("LA.ldl_factor(a).LD", LA=fw.mod.linalg,
                    a=fw.from_numpy(a + np.swapaxes(a, -1, -2)))


for _b, _n in [(256, 8), (1, 128)]:
    _register_general(_b, _n)
