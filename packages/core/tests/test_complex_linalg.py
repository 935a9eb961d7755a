"""ember.linalg on complex64 / complex128 matrices, compared with torch (and NumPy): values,
dtypes, batching, errors, and PyTorch's complex gradients."""

import math

import ember
import numpy as np
import pytest
from ember import linalg as LA

torch = pytest.importorskip("torch")

DT = {ember.complex64: (torch.complex64, np.complex64, 1e-4),
      ember.complex128: (torch.complex128, np.complex128, 1e-10)}


def crandn(*shape, dtype=np.complex128, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def hpd(n, batch=(), dtype=np.complex128, seed=0):
    """A (batch of) Hermitian positive-definite matrices."""
    x = crandn(*batch, n, n, dtype=dtype, seed=seed)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(dtype)


def E(a, grad=False):
    return ember.tensor(np.ascontiguousarray(a), requires_grad=grad)


def T(a, grad=False):
    return torch.tensor(np.ascontiguousarray(a), requires_grad=grad)


def N(t):
    if isinstance(t, np.ndarray):
        return t
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().numpy()
    return t.detach().numpy()


def close(a, b, tol=1e-10):
    a, b = N(a), N(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def adj(a):
    return np.conj(np.swapaxes(a, -1, -2))


# ---- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize("edt", [ember.complex64, ember.complex128])
def test_dtypes_of_results(edt):
    tdt, ndt, _ = DT[edt]
    a = E(crandn(3, 3, dtype=ndt))
    h = E(hpd(3, dtype=ndt))
    rdt = ember.float32 if edt == ember.complex64 else ember.float64
    assert LA.svd(a).S.dtype == rdt and LA.svd(a).U.dtype == edt
    assert LA.svdvals(a).dtype == rdt
    assert LA.eigh(h).eigenvalues.dtype == rdt and LA.eigh(h).eigenvectors.dtype == edt
    assert LA.eigvalsh(h).dtype == rdt
    assert LA.det(a).dtype == edt
    s = LA.slogdet(a)
    assert s.sign.dtype == edt and s.logabsdet.dtype == rdt
    assert LA.vector_norm(a).dtype == rdt
    assert LA.matrix_norm(a, "nuc").dtype == rdt
    assert LA.inv(a).dtype == edt and LA.qr(a).Q.dtype == edt
    assert LA.cholesky(h).dtype == edt
    assert LA.matrix_rank(a).dtype == ember.int64


@pytest.mark.parametrize("edt", [ember.complex64, ember.complex128])
def test_inv_det_slogdet_solve(edt):
    tdt, ndt, tol = DT[edt]
    a = crandn(2, 4, 4, dtype=ndt, seed=1)
    b = crandn(2, 4, 3, dtype=ndt, seed=2)
    close(LA.inv(E(a)), torch.linalg.inv(T(a)), tol)
    close(LA.det(E(a)), torch.linalg.det(T(a)), tol * 10)
    s, t = LA.slogdet(E(a)), torch.linalg.slogdet(T(a))
    close(s.sign, t.sign, tol)
    close(s.logabsdet, t.logabsdet, tol)
    np.testing.assert_allclose(np.abs(N(s.sign)), 1.0, rtol=tol)
    close(LA.solve(E(a), E(b)), torch.linalg.solve(T(a), T(b)), tol * 10)
    close(LA.solve(E(a), E(b[..., 0])), torch.linalg.solve(T(a), T(b[..., 0])), tol * 10)
    bl = crandn(2, 3, 4, dtype=ndt, seed=3)
    close(LA.solve(E(a), E(bl), left=False), torch.linalg.solve(T(a), T(bl), left=False),
          tol * 10)
    # broadcasting of the batch dims, and torch.det / torch.inverse spellings
    close(LA.solve(E(a[0]), E(b)), torch.linalg.solve(T(a[0]), T(b)), tol * 10)
    close(ember.det(E(a)), torch.det(T(a)), tol * 10)
    close(ember.inverse(E(a)), torch.inverse(T(a)), tol)


def test_singular_det_slogdet_and_inv_error():
    a = np.array([[1 + 1j, 2 - 3j], [0, 0]], dtype=np.complex128)
    assert abs(LA.det(E(a)).item()) < 1e-12
    s = LA.slogdet(E(a))
    t = torch.linalg.slogdet(T(a))
    assert s.sign.item() == t.sign.item() == 0
    assert s.logabsdet.item() == -math.inf
    with pytest.raises(LA.LinAlgError, match="singular"):
        LA.inv(E(a))
    with pytest.raises(LA.LinAlgError, match="singular"):
        LA.solve(E(a), E(np.ones((2, 1), np.complex128)))
    assert LA.inv_ex(E(a)).info.item() == torch.linalg.inv_ex(T(a)).info.item()


@pytest.mark.parametrize("edt", [ember.complex64, ember.complex128])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3)])
def test_qr(edt, shape):
    tdt, ndt, tol = DT[edt]
    a = crandn(*shape, dtype=ndt, seed=4)
    m, n = shape[-2:]
    for mode in ("reduced", "complete"):
        Q, R = LA.qr(E(a), mode)
        tQ, tR = torch.linalg.qr(T(a), mode)
        assert Q.shape == tQ.shape and R.shape == tR.shape
        q, r = N(Q), N(R)
        np.testing.assert_allclose(q @ r, a, atol=tol * 10)
        np.testing.assert_allclose(adj(q) @ q, np.broadcast_to(np.eye(q.shape[-1]),
                                                               (adj(q) @ q).shape), atol=tol * 10)
        assert np.allclose(np.tril(r, -1), 0)
        # LAPACK's Householder QR: R's diagonal is real, as torch's
        d = np.diagonal(r, axis1=-2, axis2=-1)
        np.testing.assert_allclose(d.imag, 0, atol=tol)
        np.testing.assert_allclose(np.abs(r), np.abs(N(tR)), atol=tol * 10)
    Q, R = LA.qr(E(a), "r")
    assert Q.numel() == 0
    np.testing.assert_allclose(np.abs(N(R)), np.abs(N(torch.linalg.qr(T(a), "r").R)),
                               atol=tol * 10)


@pytest.mark.parametrize("edt", [ember.complex64, ember.complex128])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_svd(edt, shape):
    tdt, ndt, tol = DT[edt]
    a = crandn(*shape, dtype=ndt, seed=5)
    for full in (True, False):
        U, S, Vh = LA.svd(E(a), full_matrices=full)
        tU, tS, tVh = torch.linalg.svd(T(a), full_matrices=full)
        assert U.shape == tU.shape and Vh.shape == tVh.shape and S.shape == tS.shape
        close(S, tS, tol * 10)
        k = min(shape[-2:])
        u, s, vh = N(U), N(S), N(Vh)
        np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a,
                                   atol=tol * 10)
        np.testing.assert_allclose(adj(u) @ u, np.broadcast_to(np.eye(u.shape[-1]),
                                                               (adj(u) @ u).shape), atol=tol * 10)
        np.testing.assert_allclose(vh @ adj(vh), np.broadcast_to(
            np.eye(vh.shape[-2]), (vh @ adj(vh)).shape), atol=tol * 10)
    close(LA.svdvals(E(a)), np.linalg.svd(a, compute_uv=False).astype(N(S).dtype), tol * 10)
    # torch.svd: V (not Vh), the conjugate transpose of Vh
    U, S, V = ember.svd(E(a))
    np.testing.assert_allclose((N(U) * N(S)[..., None, :]) @ adj(N(V)), a, atol=tol * 10)


@pytest.mark.parametrize("edt", [ember.complex64, ember.complex128])
def test_eigh_uplo(edt):
    tdt, ndt, tol = DT[edt]
    h = hpd(4, (2,), dtype=ndt, seed=6)
    for uplo in ("L", "U"):
        # the other triangle is garbage: only the UPLO triangle may be read
        g = h.copy()
        junk = crandn(2, 4, 4, dtype=ndt, seed=7)
        if uplo == "L":
            g = np.tril(g) + np.triu(junk, 1)
        else:
            g = np.triu(g) + np.tril(junk, -1)
        L, V = LA.eigh(E(g), UPLO=uplo)
        tL, _ = torch.linalg.eigh(T(g), UPLO=uplo)
        close(L, tL, tol * 10)
        v, lam = N(V), N(L)
        np.testing.assert_allclose((v * lam[..., None, :]) @ adj(v), h, atol=tol * 100)
        close(LA.eigvalsh(E(g), UPLO=uplo), tL, tol * 10)
    np.testing.assert_allclose(N(LA.eigvalsh(E(h))), np.linalg.eigvalsh(h), rtol=tol * 10)


@pytest.mark.parametrize("edt", [ember.complex64, ember.complex128])
def test_cholesky(edt):
    tdt, ndt, tol = DT[edt]
    h = hpd(5, (3,), dtype=ndt, seed=8)
    for upper in (False, True):
        close(LA.cholesky(E(h), upper=upper), torch.linalg.cholesky(T(h), upper=upper),
              tol * 10)
    # larger than the unblocked size: LAPACK's potrf
    big = hpd(40, dtype=ndt, seed=9)
    close(LA.cholesky(E(big)), torch.linalg.cholesky(T(big)), tol * 100)
    bad = h.copy()
    bad[1, 2, 2] = -100
    info = LA.cholesky_ex(E(bad)).info
    assert info.tolist() == torch.linalg.cholesky_ex(T(bad)).info.tolist()
    with pytest.raises(LA.LinAlgError, match="positive-definite"):
        LA.cholesky(E(bad))
    # cholesky_solve / cholesky_inverse with the complex factor (A = L L^H)
    L = LA.cholesky(E(h))
    b = crandn(3, 5, 2, dtype=ndt, seed=10)
    close(ember.cholesky_solve(E(b), L), torch.cholesky_solve(T(b), T(N(L))), tol * 100)
    close(ember.cholesky_inverse(L[0]), torch.cholesky_inverse(T(N(L[0]))), tol * 100)


@pytest.mark.parametrize("edt", [ember.complex64, ember.complex128])
def test_solve_triangular_and_lu(edt):
    tdt, ndt, tol = DT[edt]
    a = (np.triu(crandn(4, 4, dtype=ndt, seed=11)) + 4 * np.eye(4)).astype(ndt)
    b = crandn(4, 3, dtype=ndt, seed=12)
    close(LA.solve_triangular(E(a), E(b), upper=True),
          torch.linalg.solve_triangular(T(a), T(b), upper=True), tol * 10)
    bl = crandn(3, 4, dtype=ndt, seed=13)
    close(LA.solve_triangular(E(a), E(bl), upper=True, left=False),
          torch.linalg.solve_triangular(T(a), T(bl), upper=True, left=False), tol * 10)
    g = crandn(4, 4, dtype=ndt, seed=14)
    LU, piv = LA.lu_factor(E(g))
    tLU, tpiv = torch.linalg.lu_factor(T(g))
    close(LU, tLU, tol * 10)
    assert piv.tolist() == tpiv.tolist()
    for adjoint in (False, True):
        for left in (True, False):
            rhs = b if left else bl
            close(LA.lu_solve(LU, piv, E(rhs), left=left, adjoint=adjoint),
                  torch.linalg.lu_solve(tLU, tpiv, T(rhs), left=left, adjoint=adjoint), tol * 10)
    P, L, U = LA.lu(E(g))
    np.testing.assert_allclose(N(P) @ N(L) @ N(U), g, atol=tol * 10)


@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss", "gels"])
def test_lstsq(driver):
    a = crandn(6, 3, seed=15)
    b = crandn(6, 2, seed=16)
    r = LA.lstsq(E(a), E(b), driver=driver)
    t = torch.linalg.lstsq(T(a), T(b), driver=driver)
    close(r.solution, t.solution, 1e-9)
    close(r.residuals, t.residuals, 1e-9)
    close(r.rank, t.rank)
    close(r.singular_values, t.singular_values, 1e-9)
    np.testing.assert_allclose(N(r.solution), np.linalg.lstsq(a, b, rcond=None)[0], atol=1e-9)


def test_pinv_rank_cond_norms_matrix_exp():
    a = crandn(2, 4, 3, seed=17)
    close(LA.pinv(E(a)), torch.linalg.pinv(T(a)), 1e-9)
    h = hpd(4, seed=18)
    close(LA.pinv(E(h), hermitian=True), torch.linalg.pinv(T(h), hermitian=True), 1e-9)
    low = crandn(5, 2, seed=19) @ crandn(2, 4, seed=20)
    assert LA.matrix_rank(E(low)).item() == torch.linalg.matrix_rank(T(low)).item() == 2
    assert LA.matrix_rank(E(h), hermitian=True).item() == 4
    sq = crandn(3, 3, seed=21)
    for p in (None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf):
        close(LA.cond(E(sq), p), torch.linalg.cond(T(sq), p), 1e-8)
    x = crandn(2, 5, seed=22)
    for ord in (2, 1, math.inf, -math.inf, 0, 3, -1, 0.5):
        close(LA.vector_norm(E(x), ord, dim=-1), torch.linalg.vector_norm(T(x), ord, dim=-1),
              1e-10)
    close(LA.vector_norm(E(x)), torch.linalg.vector_norm(T(x)), 1e-10)
    close(LA.vector_norm(E(x), dim=0, keepdim=True),
          torch.linalg.vector_norm(T(x), dim=0, keepdim=True), 1e-10)
    for ord in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf):
        close(LA.matrix_norm(E(a), ord), torch.linalg.matrix_norm(T(a), ord), 1e-10)
        close(LA.norm(E(a), ord, dim=(-2, -1)), torch.linalg.norm(T(a), ord, dim=(-2, -1)),
              1e-10)
    close(LA.norm(E(x)), torch.linalg.norm(T(x)), 1e-10)
    close(ember.norm(E(x)), torch.norm(T(x)), 1e-10)
    for scale in (0.1, 3.0, 40.0):
        m = crandn(2, 4, 4, seed=23) * scale
        close(LA.matrix_exp(E(m)), torch.linalg.matrix_exp(T(m)), 1e-9 * max(1.0, scale ** 2))
    m64 = crandn(3, 3, dtype=np.complex64, seed=24)
    close(LA.matrix_exp(E(m64)), torch.linalg.matrix_exp(T(m64)), 1e-4)


def test_empty_and_meta():
    z = ember.zeros(0, 3, 3, dtype=ember.complex128)
    assert LA.det(z).shape == (0,)
    assert LA.svd(ember.zeros(3, 0, dtype=ember.complex64)).U.shape == (3, 3)
    m = ember.empty(2, 4, 3, dtype=ember.complex64, device="meta")
    U, S, Vh = LA.svd(m, full_matrices=False)
    assert U.shape == (2, 4, 3) and S.dtype == ember.float32 and S.device.type == "meta"
    L, V = LA.eigh(ember.empty(3, 3, dtype=ember.complex128, device="meta"))
    assert L.dtype == ember.float64 and V.dtype == ember.complex128


def test_error_messages():
    # the dtype message names what is accepted, and complex input no longer meets it
    i = ember.ones(2, 2, dtype=ember.int64)
    for fn in (LA.inv, LA.det, LA.svd, LA.qr, LA.cholesky, LA.eigh):
        with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as "
                                               "input. Got Long"):
            fn(i)
    with pytest.raises(RuntimeError, match="Got Long"):
        LA.vector_norm(ember.ones(3, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="Low precision dtypes not supported. Got Half"):
        LA.inv(ember.ones(2, 2, dtype=ember.float16))
    a = E(crandn(3, 3, seed=25))
    with pytest.raises(RuntimeError, match="same dtype"):
        LA.solve(a, ember.ones(3, 1, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="square"):
        LA.eigh(E(crandn(3, 2, seed=26)))


def test_lowrank_complex():
    a = crandn(12, 2, seed=27) @ crandn(2, 7, seed=28)
    for A in (a, adj(a)):
        U, S, V = ember.svd_lowrank(E(A), q=3)
        assert U.dtype == ember.complex128 and S.dtype == ember.float64
        np.testing.assert_allclose((N(U) * N(S)) @ adj(N(V)), A, atol=1e-9)
        np.testing.assert_allclose(N(S)[:2], np.linalg.svd(A, compute_uv=False)[:2], rtol=1e-9)
    U, S, V = ember.pca_lowrank(E(a), q=2)
    c = a - a.mean(0, keepdims=True)
    np.testing.assert_allclose(N(S), np.linalg.svd(c, compute_uv=False)[:2], rtol=1e-8)


# ---- gradients ---------------------------------------------------------------------------------


def grads(fn_e, fn_t, *arrays):
    """The gradients of ember's and torch's losses with respect to the complex inputs."""
    es = [E(a, True) for a in arrays]
    ts = [T(a, True) for a in arrays]
    fn_e(*es).backward()
    fn_t(*ts).backward()
    for e, t in zip(es, ts):
        close(e.grad, t.grad, 1e-8)


def loss_e(x):
    return (x.abs() ** 2).sum() + x.real.sum() - 0.5 * x.imag.sum()


def test_grad_det_inv_solve_slogdet():
    a = crandn(2, 3, 3, seed=30)
    b = crandn(2, 3, 2, seed=31)
    grads(lambda x: loss_e(LA.det(x)), lambda x: loss_e(torch.linalg.det(x)), a)
    grads(lambda x: loss_e(LA.inv(x)), lambda x: loss_e(torch.linalg.inv(x)), a)
    grads(lambda x, y: loss_e(LA.solve(x, y)), lambda x, y: loss_e(torch.linalg.solve(x, y)),
          a, b)
    grads(lambda x: LA.slogdet(x).logabsdet.sum(),
          lambda x: torch.linalg.slogdet(x).logabsdet.sum(), a)


def test_grad_det_singular():
    # a rank-deficient matrix: the gradient of Re det(A) is conj(cofactor matrix) (ember takes it
    # from the SVD, as for real matrices; torch 2.13 returns zeros when det is exactly 0)
    a = crandn(3, 3, seed=32)
    a[2] = 0
    x = E(a, True)
    LA.det(x).real.backward()
    cof = np.empty_like(a)
    for i in range(3):
        for j in range(3):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            cof[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    np.testing.assert_allclose(N(x.grad), np.conj(cof), atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5)])
def test_grad_qr(shape):
    a = crandn(*shape, seed=33)
    grads(lambda x: loss_e(LA.qr(x).Q) + loss_e(LA.qr(x).R),
          lambda x: loss_e(torch.linalg.qr(x).Q) + loss_e(torch.linalg.qr(x).R), a)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3)])
def test_grad_svd(shape):
    a = crandn(*shape, seed=34)
    k = min(shape)
    rng = np.random.default_rng(35)
    w = (rng.standard_normal((shape[0], k)), rng.standard_normal((k, shape[1])))

    def fe(x):
        U, S, Vh = LA.svd(x, full_matrices=False)
        return ((U.abs() ** 2) * E(w[0])).sum() + ((Vh.abs() ** 2) * E(w[1])).sum() + \
            (S ** 2).sum() + ((U * S.unsqueeze(-2)) @ Vh).real.sum()

    def ft(x):
        U, S, Vh = torch.linalg.svd(x, full_matrices=False)
        return ((U.abs() ** 2) * T(w[0])).sum() + ((Vh.abs() ** 2) * T(w[1])).sum() + \
            (S ** 2).sum() + ((U * S.unsqueeze(-2)) @ Vh).real.sum()

    grads(fe, ft, a)
    grads(lambda x: LA.svdvals(x).sum(), lambda x: torch.linalg.svdvals(x).sum(), a)
    grads(lambda x: LA.matrix_norm(x, "nuc"), lambda x: torch.linalg.matrix_norm(x, "nuc"), a)


def test_grad_svd_gauge_dependent_raises():
    a = crandn(3, 3, seed=36)
    x = E(a, True)
    U, S, Vh = LA.svd(x)
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        U.real.sum().backward()
    t = T(a, True)
    tU, _, _ = torch.linalg.svd(t)
    with pytest.raises(RuntimeError):
        tU.real.sum().backward()


def test_grad_eigh():
    h = hpd(4, seed=37)
    rng = np.random.default_rng(38)
    w = rng.standard_normal((4, 4))

    def fe(x):
        L, V = LA.eigh(x)
        return (L * L).sum() + ((V.abs() ** 2) * E(w)).sum()

    def ft(x):
        L, V = torch.linalg.eigh(x)
        return (L * L).sum() + ((V.abs() ** 2) * T(w)).sum()

    grads(fe, ft, h)
    grads(lambda x: LA.eigvalsh(x).pow(3).sum(), lambda x: torch.linalg.eigvalsh(x).pow(3).sum(),
          h)
    x = E(h, True)
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        LA.eigh(x).eigenvectors.real.sum().backward()


def test_grad_cholesky_norms_matrix_exp_lstsq():
    h = hpd(4, (2,), seed=39)
    for upper in (False, True):
        grads(lambda x: loss_e(LA.cholesky(x, upper=upper)),
              lambda x: loss_e(torch.linalg.cholesky(x, upper=upper)), h)
    x = crandn(3, 4, seed=40)
    for ord in (2, 1, 3, math.inf):
        grads(lambda v: LA.vector_norm(v, ord, dim=-1).sum(),
              lambda v: torch.linalg.vector_norm(v, ord, dim=-1).sum(), x)
    grads(lambda v: LA.matrix_norm(v), lambda v: torch.linalg.matrix_norm(v), x)
    grads(lambda v: LA.matrix_norm(v, 2), lambda v: torch.linalg.matrix_norm(v, 2), x)
    m = crandn(3, 3, seed=41)
    grads(lambda v: loss_e(LA.matrix_exp(v)), lambda v: loss_e(torch.linalg.matrix_exp(v)), m)
    a, b = crandn(5, 3, seed=42), crandn(5, 2, seed=43)
    grads(lambda u, v: loss_e(LA.lstsq(u, v).solution),
          lambda u, v: loss_e(torch.linalg.lstsq(u, v).solution), a, b)
    grads(lambda u: loss_e(LA.pinv(u)), lambda u: loss_e(torch.linalg.pinv(u)), a)
    t = np.triu(crandn(3, 3, seed=44)) + 3 * np.eye(3)
    grads(lambda u, v: loss_e(LA.solve_triangular(u, v, upper=True)),
          lambda u, v: loss_e(torch.linalg.solve_triangular(u, v, upper=True)), t, b[:3])


def as_complex_fn(f):
    """f of complex matrices, as a function of their real views (for gradcheck)."""
    def g(r):
        out = f(ember.view_as_complex(r))
        return ember.view_as_real(out) if out.is_complex() else out
    return g


@pytest.mark.parametrize("name", ["det", "inv", "solve", "qr", "svd", "eigh", "cholesky",
                                  "vector_norm", "slogdet"])
def test_gradcheck_through_view_as_real(name):
    n = 3
    a = crandn(n, n, seed=50)
    if name in ("eigh", "cholesky"):
        a = hpd(n, seed=51)
    b = E(crandn(n, 2, seed=52))
    fns = {
        "det": LA.det,
        "inv": LA.inv,
        "solve": lambda x: LA.solve(x, b),
        "qr": lambda x: LA.qr(x).Q.abs() + LA.qr(x).R.real,
        "svd": lambda x: (LA.svd(x).U.abs() ** 2).sum(-1) + LA.svd(x).S,
        # the Hermitian input is made in the graph: the perturbations stay Hermitian
        "eigh": lambda x: LA.eigh(x + x.mT.conj_physical()).eigenvalues,
        "cholesky": lambda x: LA.cholesky(x + x.mT.conj_physical()),
        "vector_norm": lambda x: LA.vector_norm(x, dim=-1),
        "slogdet": lambda x: LA.slogdet(x).logabsdet,
    }
    r = ember.view_as_real(E(a)).clone().requires_grad_(True)
    assert ember.autograd.gradcheck(as_complex_fn(fns[name]), (r,), eps=1e-6, atol=1e-5)


def test_grad_eigh_real_matches_torch():
    # the real path's gradient is PyTorch's too (the skew-symmetric part of V^T gV)
    rng = np.random.default_rng(60)
    x = rng.standard_normal((4, 4))
    h = x @ x.T + 4 * np.eye(4)
    w = rng.standard_normal((4, 4))
    grads(lambda a: (LA.eigh(a).eigenvalues ** 2).sum() + ((LA.eigh(a).eigenvectors ** 2) *
                                                            E(w)).sum(),
          lambda a: (torch.linalg.eigh(a).eigenvalues ** 2).sum() + (
              (torch.linalg.eigh(a).eigenvectors ** 2) * T(w)).sum(), h)


@pytest.mark.skipif(not ember.cuda.is_available(), reason="needs CUDA")
def test_cuda_complex_raises_clearly():
    a = ember.eye(3).to(ember.complex64).cuda()
    for fn in (LA.inv, LA.det, LA.svd, LA.qr, LA.eigh, LA.cholesky):
        with pytest.raises(RuntimeError, match="complex matrices are supported on the CPU only"):
            fn(a)


def test_norm_dtype_rules_and_tensor_norm():
    x = crandn(2, 3, seed=61)
    x64 = x.astype(np.complex64)
    close(LA.vector_norm(E(x64), dtype=ember.complex128),
          torch.linalg.vector_norm(T(x64), dtype=torch.complex128), 1e-12)
    close(E(x).norm(), T(x).norm(), 1e-12)
    close(E(x).norm(1, dim=1), T(x).norm(1, dim=1), 1e-12)
    close(E(x64).norm(dtype=ember.complex128), T(x64).norm(dtype=torch.complex128), 1e-12)
    for fn in (lambda v, d: LA.vector_norm(v, dtype=d), lambda v, d: v.norm(dtype=d)):
        with pytest.raises(RuntimeError, match="dtype should be complex for complex inputs, but "
                                               "got Float"):
            fn(E(x), ember.float32)
        with pytest.raises(RuntimeError, match="dtype should be real for real inputs, but got "
                                               "ComplexFloat"):
            fn(ember.ones(3), ember.complex64)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_grad_lu_factor_lu(shape):
    a = crandn(*shape, seed=62)
    grads(lambda x: loss_e(LA.lu_factor(x).LU), lambda x: loss_e(torch.linalg.lu_factor(x).LU),
          a)
    grads(lambda x: loss_e(LA.lu(x).L) + loss_e(LA.lu(x).U),
          lambda x: loss_e(torch.linalg.lu(x).L) + loss_e(torch.linalg.lu(x).U), a)


@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("left", [True, False])
def test_grad_lu_solve(adjoint, left):
    a = crandn(4, 4, seed=63)
    b = crandn(4, 2, seed=64) if left else crandn(2, 4, seed=64)

    def fe(x, y):
        LU, piv = LA.lu_factor(x)
        return loss_e(LA.lu_solve(LU, piv, y, left=left, adjoint=adjoint))

    def ft(x, y):
        LU, piv = torch.linalg.lu_factor(x)
        return loss_e(torch.linalg.lu_solve(LU, piv, y, left=left, adjoint=adjoint))

    grads(fe, ft, a, b)


def test_grad_slogdet_sign():
    a = crandn(2, 3, 3, seed=65)
    grads(lambda x: loss_e(LA.slogdet(x).sign) + LA.slogdet(x).logabsdet.sum(),
          lambda x: loss_e(torch.linalg.slogdet(x).sign) + torch.linalg.slogdet(x).logabsdet.sum(),
          a)
    grads(lambda x: LA.slogdet(x).sign.imag.sum(),
          lambda x: torch.linalg.slogdet(x).sign.imag.sum(), a)
    # a real matrix's sign is differentiable too, with a zero gradient (as torch's)
    r = ember.tensor(np.random.default_rng(66).standard_normal((3, 3)), requires_grad=True)
    s = LA.slogdet(r)
    assert s.sign.requires_grad
    (s.sign * 2 + s.logabsdet).backward()
    np.testing.assert_allclose(N(r.grad), np.linalg.inv(N(r)).T, rtol=1e-10)
