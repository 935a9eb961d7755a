"""Randomized and iterative spectral methods as ``torch.svd_lowrank``, ``torch.pca_lowrank`` and
``torch.lobpcg``, composed of ember's matmul, QR, SVD and symmetric eigensolver.

``svd_lowrank`` is the randomized range finder with power (subspace) iterations followed by
an SVD of the small projected matrix (Halko, Martinsson and Tropp, 2009, algorithms 4.4 and
5.1); ``pca_lowrank`` applies it to the centered data. ``lobpcg`` is Knyazev's locally optimal
block preconditioned conjugate gradient method for a few extreme eigenpairs of a symmetric
(positive-definite) A, optionally with a positive-definite B (A x = lambda B x) and a
preconditioner iK: each step does a Rayleigh-Ritz projection on the span of the current
approximations X, their (preconditioned) residuals W and the previous search directions P,
with the basis B-orthonormalized by an eigendecomposition of its Gram matrix (columns that
are numerically dependent are dropped).

>>> import ember
>>> A = ember.diag(ember.tensor([5.0, 4.0, 3.0, 2.0, 1.0, 0.5], dtype=ember.float64))
>>> E, X = ember.lobpcg(A, k=2)
>>> [round(e, 6) for e in E.tolist()]
[5.0, 4.0]
"""

from __future__ import annotations

import types
from typing import Any, Callable

from ember import _C
from ember._C import Tensor
from ember._finfo import finfo

__all__ = ["svd_lowrank", "pca_lowrank", "lobpcg"]


def _mH(t: Tensor) -> Tensor:
    t = t.transpose(-2, -1)
    return t.conj() if t.is_complex() else t


def _orthonormal_basis(X: Tensor) -> Tensor:
    from ember import linalg

    return linalg.qr(X).Q


def _approximate_basis(A: Tensor, q: int, niter: int, M: Tensor | None) -> Tensor:
    """An orthonormal (m x q) basis approximately spanning the range of A - M."""
    n = A.shape[-1]
    R = _C.randn(*A.shape[:-2], n, q, dtype=A.dtype, device=A.device)

    def mul(X: Tensor) -> Tensor:
        return A @ X if M is None else A @ X - M @ X

    def mul_h(X: Tensor) -> Tensor:
        return _mH(A) @ X if M is None else _mH(A) @ X - _mH(M) @ X

    Q = _orthonormal_basis(mul(R))
    for _ in range(niter):
        Q = _orthonormal_basis(mul_h(Q))
        Q = _orthonormal_basis(mul(Q))
    return Q


def _check_matrix(op: str, A: Any, complex_ok: bool = False) -> None:
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: A must have at least 2 dimensions, got shape {list(A.shape)}")
    if complex_ok and A.is_complex():
        return
    if not A.is_floating_point():
        kinds = "a floating-point or complex A" if complex_ok else \
            "a real floating-point A (float32 or float64)"
        raise RuntimeError(f"{op}: expected {kinds}, got {A.dtype}")


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int = 2,
                M: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """An approximate rank-q SVD ``A ~ U diag(S) V^H`` (of ``A - M`` when M is given, M
    broadcasting to A; real or complex) by a randomized range finder with ``niter`` power iterations: U (*, m,
    q), S (*, q), V (*, n, q), q capped at min(m, n). Random (ember's generator): exact when A
    has rank <= q, else close to the leading singular triplets.

    >>> import ember
    >>> A = ember.randn(20, 3, dtype=ember.float64) @ ember.randn(3, 10, dtype=ember.float64)
    >>> U, S, V = ember.svd_lowrank(A, q=3)
    >>> bool(((U * S) @ V.T - A).abs().max() < 1e-8)
    True
    """
    _check_matrix("svd_lowrank", A, complex_ok=True)
    q = 6 if q is None else int(q)
    if q < 0:
        raise RuntimeError(f"svd_lowrank: q (={q}) must be a non-negative integer")
    # (a negative niter is no power iteration, as PyTorch's range(niter))
    m, n = A.shape[-2], A.shape[-1]
    q = min(q, m, n)
    if M is not None:
        M = M.broadcast_to(A.shape) if M.shape != A.shape else M
    if m < n:  # work on the tall A^T: the basis then has q columns in the smaller dim
        U, S, V = _svd_lowrank_tall(_mH(A), q, niter, None if M is None else _mH(M))
        return V, S, U
    return _svd_lowrank_tall(A, q, niter, M)


def _svd_lowrank_tall(A: Tensor, q: int, niter: int,
                      M: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    from ember import linalg

    Q = _approximate_basis(A, q, niter, M)
    Bm = _mH(Q) @ A if M is None else _mH(Q) @ A - _mH(Q) @ M
    U, S, Vh = linalg.svd(Bm, full_matrices=False)
    return Q @ U, S, _mH(Vh)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True,
                niter: int = 2) -> tuple[Tensor, Tensor, Tensor]:
    """A principal component analysis of the rows of A (*, m, n) by :func:`svd_lowrank` of the
    data centered on its column means (when ``center``): ``(U, S, V)`` with the principal
    directions in V's columns, q = min(6, m, n) by default.

    >>> import ember
    >>> U, S, V = ember.pca_lowrank(ember.randn(50, 4, dtype=ember.float64), q=2)
    >>> tuple(U.shape), tuple(S.shape), tuple(V.shape)
    ((50, 2), (2,), (4, 2))
    """
    _check_matrix("pca_lowrank", A, complex_ok=True)
    m, n = A.shape[-2], A.shape[-1]
    if q is None:
        q = min(6, m, n)
    elif not (isinstance(q, int) and 0 <= q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)="
                         f"{min(m, n)}")
    if not (isinstance(niter, int) and niter >= 0):
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return svd_lowrank(A, q, niter=niter)
    C = A.mean(dim=-2, keepdim=True)
    return svd_lowrank(A, q, niter=niter, M=C.broadcast_to(A.shape))


# ---- LOBPCG ------------------------------------------------------------------------------------


def _b_orthonormal(S: Tensor, Bmul: Callable[[Tensor], Tensor]) -> Tensor:
    """A B-orthonormal basis of span(S) (columns), dropping numerically dependent directions:
    S Q diag(l)^-1/2 for the eigendecomposition Q diag(l) Q^T of S^T B S, twice over."""
    from ember import linalg

    eps = finfo(S.dtype).eps
    for _ in range(2):
        norms = Bmul(S).mul(S).sum(0).clamp_min(0).sqrt()
        keep = norms > 0
        if not bool(keep.all()):
            S = S[:, keep]
            norms = norms[keep]
        if S.shape[1] == 0:
            return S
        S = S / norms  # equilibrate the columns before the Gram matrix
        G = _mH(S) @ Bmul(S)
        G = (G + _mH(G)) / 2
        lam, Q = linalg.eigh(G)
        good = lam > lam.max() * eps * S.shape[1] * 10
        S = S @ (Q[:, good] / lam[good].sqrt())
    return S


def lobpcg(A: Tensor, k: int | None = None, B: Tensor | None = None, X: Tensor | None = None,
           n: int | None = None, iK: Tensor | None = None, niter: int | None = None,
           tol: float | None = None, largest: bool | None = None, method: str | None = None,
           tracker: Callable[[Any], None] | None = None, ortho_iparams: dict | None = None,
           ortho_fparams: dict | None = None,
           ortho_bparams: dict | None = None) -> tuple[Tensor, Tensor]:
    """The k largest (``largest=True``, the default) or smallest eigenpairs of the symmetric
    positive-definite generalized problem ``A x = lambda B x`` (B = I by default), by LOBPCG
    with ``n`` (default k) search vectors started from X (random by default) and an optional
    preconditioner ``iK`` (a matrix approximating A^-1). Returns ``(E, X)``: E (*, k), ordered
    from the most extreme, and B-orthonormal eigenvectors X (*, m, k). Stops when every
    residual norm ``|A x - lambda B x|`` is below ``tol`` (default sqrt(eps) of the dtype)
    times ``|lambda|`` (at least ``tol``), or after ``niter`` steps (default 1000; -1: until
    convergence). ``tracker`` is called after each step with an object holding ``E``, ``X``,
    ``R`` (the residuals) and ``iteration``. ``method`` may be ``'basic'`` or ``'ortho'`` (one
    algorithm serves both: the basis is always B-orthonormalized); ``ortho_*params`` are
    accepted and unused. Dense tensors only. Differentiable through E (in A and B); X is
    returned without a history.

    >>> import ember
    >>> A = ember.diag(ember.arange(1.0, 13.0, dtype=ember.float64))
    >>> E, X = ember.lobpcg(A, k=1, largest=False)
    >>> round(E.item(), 8)
    1.0
    """
    del ortho_iparams, ortho_fparams, ortho_bparams
    _check_matrix("lobpcg", A)
    m = A.shape[-1]
    if A.shape[-2] != m:
        raise ValueError(f"lobpcg: A must be a square matrix (or a batch of them), got shape "
                         f"{list(A.shape)}")
    if B is not None and tuple(B.shape) != tuple(A.shape):
        raise ValueError(f"lobpcg: B must have A's shape {list(A.shape)}, got {list(B.shape)}")
    if method not in (None, "basic", "ortho"):
        raise ValueError(f"lobpcg: method must be 'basic' or 'ortho', got {method!r}")
    if X is not None and (X.ndim < 2 or X.shape[-2] != m):
        raise ValueError(f"lobpcg: X must have shape (*, {m}, n), got {list(X.shape)}")
    k = 1 if k is None else int(k)
    n = (k if X is None else X.shape[-1]) if n is None else int(n)
    if not 0 < k <= n:
        raise ValueError(f"lobpcg: expected 0 < k <= n, got k={k}, n={n}")
    if m < 3 * n:
        raise ValueError(f"LPBPCG algorithm is not applicable when the number of A rows (={m}) "
                         f"is smaller than 3 x the number of requested eigenpairs (={n})")
    largest = True if largest is None else bool(largest)
    niter = 1000 if niter is None else int(niter)
    tol = finfo(A.dtype).eps ** 0.5 if tol is None else float(tol)
    if A.ndim > 2:  # one problem per batch element
        Es, Xs = [], []
        for i in range(A.shape[0]):
            E_i, X_i = lobpcg(A[i], k, None if B is None else B[i], None if X is None else X[i],
                              n, None if iK is None else iK[i], niter, tol, largest, method,
                              tracker)
            Es.append(E_i)
            Xs.append(X_i)
        return _C.stack(Es), _C.stack(Xs)
    return _lobpcg_2d(A, k, B, X, n, iK, niter, tol, largest, tracker)


def _lobpcg_2d(A: Tensor, k: int, B: Tensor | None, X: Tensor | None, n: int,
               iK: Tensor | None, niter: int, tol: float, largest: bool,
               tracker: Callable[[Any], None] | None) -> tuple[Tensor, Tensor]:
    from ember import linalg

    A_in, B_in = A, B
    A = A.detach()
    B = None if B is None else B.detach()
    m = A.shape[-1]

    def Bmul(V: Tensor) -> Tensor:
        return V if B is None else B @ V

    def rayleigh_ritz(S: Tensor) -> tuple[Tensor, Tensor]:
        T = _mH(S) @ (A @ S)
        lam, C = linalg.eigh((T + _mH(T)) / 2)
        order = _C.arange(lam.shape[0] - 1, -1, -1) if largest else _C.arange(lam.shape[0])
        cols = order[:min(n, lam.shape[0])]
        return lam[cols], S @ C[:, cols]

    X0 = _C.randn(m, n, dtype=A.dtype, device=A.device) if X is None else X.detach()
    E, Xc = rayleigh_ritz(_b_orthonormal(X0, Bmul))
    P: Tensor | None = None
    it = 0
    while True:
        R = A @ Xc - Bmul(Xc) * E
        rnorm = R.norm(dim=0)
        converged = bool((rnorm[:k] <= tol * E[:k].abs().clamp_min(1.0)).all())
        if tracker is not None:
            tracker(types.SimpleNamespace(E=E, X=Xc, R=R, iteration=it))
        if converged or (niter >= 0 and it >= niter):
            break
        W = R if iK is None else iK @ R
        parts = [Xc, W] if P is None else [Xc, W, P]
        S = _b_orthonormal(_C.cat(parts, 1), Bmul)
        E_new, X_new = rayleigh_ritz(S)
        # the new directions: X_new's component outside the span of the old X
        P = X_new - Xc @ (_mH(Xc) @ Bmul(X_new))
        E, Xc = E_new, X_new
        it += 1
    E, Xc = E[:k], Xc[:, :k]
    if _C.is_grad_enabled() and (A_in.requires_grad or (B_in is not None and B_in.requires_grad)):
        # The Rayleigh quotients x^T A x / x^T B x of the (fixed) eigenvectors: at an
        # eigenvector their derivative in x vanishes, so this gives E's exact first derivatives
        # in A and B (x x^T and -lambda x x^T).
        num = (Xc * (A_in @ Xc)).sum(0)
        E = num if B_in is None else num / (Xc * (B_in @ Xc)).sum(0)
    return E, Xc


def install(namespace: dict) -> None:
    """Adds the functions to ember's namespace (where missing)."""
    for name in __all__:
        namespace.setdefault(name, globals()[name])
