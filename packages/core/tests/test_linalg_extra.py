"""The torch.linalg / torch math functions added last: linalg.eig / eigvals (LAPACK's geev, real
and complex input, with derivatives), geqrf / householder_product (orgqr) / ormqr, the LDL^T
functions (sytrf / sytrs), the removed Tensor.eig / symeig / lstsq / solve, frexp, nextafter,
isreal, gradient, histogramdd, svd_lowrank / pca_lowrank and lobpcg: values against torch and
numpy, batches, errors, gradients."""

import ember
import numpy as np
import pytest
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")

LA = ember.linalg
RNG = np.random.default_rng(7)


def arr(*shape):
    return RNG.standard_normal(shape)


def carr(*shape):
    return arr(*shape) + 1j * arr(*shape)


def E(a, dtype=None):
    t = ember.tensor(np.ascontiguousarray(a))
    return t if dtype is None else t.to(getattr(ember, dtype))


def Tt(a, dtype=None):
    t = torch.tensor(np.ascontiguousarray(a))
    return t if dtype is None else t.to(getattr(torch, dtype))


def npy(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def close(got, want, rtol=1e-9, atol=1e-10):
    np.testing.assert_allclose(npy(got), npy(want), rtol=rtol, atol=atol)


# ---- eig / eigvals ---------------------------------------------------------------------------


def _sorted(w):
    w = np.asarray(w).reshape(-1, np.asarray(w).shape[-1])
    return np.stack([row[np.lexsort((row.imag.round(6), row.real.round(6)))] for row in w])


@pytest.mark.parametrize("dtype,cdtype,tol", [("float64", "complex128", 1e-10),
                                             ("float32", "complex64", 2e-4),
                                             ("complex128", "complex128", 1e-10),
                                             ("complex64", "complex64", 2e-4)])
def test_eig_values_and_vectors(dtype, cdtype, tol):
    a = carr(3, 5, 5) if dtype.startswith("complex") else arr(3, 5, 5)
    A = E(a, dtype)
    w, V = LA.eig(A)
    assert w.dtype == getattr(ember, cdtype) and V.dtype == getattr(ember, cdtype)
    assert tuple(w.shape) == (3, 5) and tuple(V.shape) == (3, 5, 5)
    An, wn, Vn = npy(A).astype(np.complex128), npy(w), npy(V)
    # A V = V diag(w), unit columns
    np.testing.assert_allclose(An @ Vn, Vn * wn[:, None, :], atol=tol * 50)
    np.testing.assert_allclose(np.linalg.norm(Vn, axis=-2), 1, atol=tol * 10)
    np.testing.assert_allclose(_sorted(wn), _sorted(np.linalg.eigvals(npy(A))), atol=tol * 50)
    # the same eigenvalue order and eigenvectors (up to a phase per column) as torch
    wt, Vt = torch.linalg.eig(Tt(npy(A)))
    np.testing.assert_allclose(wn, wt.numpy(), atol=tol * 50)
    overlap = np.abs(np.einsum("bij,bij->bj", Vn.conj(), Vt.numpy()))
    np.testing.assert_allclose(overlap, 1, atol=tol * 50)
    close(LA.eigvals(A), w, rtol=0, atol=0)


def test_eig_complex_pair_and_real_blocks():
    w, V = LA.eig(E([[0.0, 1.0], [-1.0, 0.0]]))
    close(w, np.array([1j, -1j]))
    close(V, np.array([[1, 1], [1j, -1j]]) / np.sqrt(2), atol=1e-12)
    w, _ = LA.eig(E(np.diag([3.0, -1.0, 2.0])))
    close(w, np.array([3, -1, 2], dtype=complex))


def test_eig_empty_noncontiguous_and_out():
    w, V = LA.eig(ember.zeros(2, 0, 0))
    assert tuple(w.shape) == (2, 0) and tuple(V.shape) == (2, 0, 0)
    assert w.dtype == ember.complex64
    a = arr(4, 4)
    A = E(a).t()  # a transposed view
    close(LA.eigvals(A), torch.linalg.eigvals(Tt(a).t()), atol=1e-10)
    ow, oV = ember.empty(0, dtype=ember.complex128), ember.empty(0, dtype=ember.complex128)
    r = LA.eig(E(a), out=(ow, oV))
    assert r.eigenvalues is ow and tuple(oV.shape) == (4, 4)


def test_eig_errors():
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        LA.eig(ember.randn(3, 4))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.eigvals(ember.randn(3))
    with pytest.raises(RuntimeError, match="dtype"):
        LA.eig(ember.ones(3, 3, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="dtype"):
        LA.eig(ember.ones(3, 3, dtype=ember.float16))
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        LA.eig(ember.full((2, 3, 3), float("nan")))
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        LA.eigvals(E(np.array([[1.0, np.inf], [0.0, 1.0]])))


def _eig_loss(lib, A):
    w, V = lib.linalg.eig(A)
    # real-valued and independent of the eigenvectors' phases
    return (w.abs() ** 2).sum() + (lib.view_as_real(w)[..., 1] * 0.5).sum() + \
        ((V.abs() ** 2) * lib.arange(1, A.shape[-1] + 1, dtype=V.abs().dtype)).sum()


@pytest.mark.parametrize("complex_input", [False, True])
def test_eig_gradient_matches_torch(complex_input):
    a = carr(2, 4, 4) if complex_input else arr(2, 4, 4)
    A = E(a).requires_grad_()
    At = Tt(a).requires_grad_()
    _eig_loss(ember, A).backward()
    _eig_loss(torch, At).backward()
    assert A.grad.dtype == A.dtype
    close(A.grad, At.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_eigvals_gradcheck_and_eig_vectors_gradcheck():
    A = E(arr(4, 4)).requires_grad_()
    assert gradcheck(lambda x: ember.view_as_real(LA.eigvals(x)), (A,))
    assert gradcheck(lambda x: LA.eig(x).eigenvectors.abs(), (A,))


def test_eig_complex_input_gradcheck_through_its_parts():
    # ember's gradcheck takes float64 inputs: A = X + iY is built from two of them
    X, Y = (E(arr(4, 4)).requires_grad_() for _ in range(2))
    assert gradcheck(lambda x, y: ember.view_as_real(LA.eigvals(ember.complex(x, y))), (X, Y))
    assert gradcheck(lambda x, y: LA.eig(ember.complex(x, y)).eigenvectors.abs(), (X, Y))


def test_eig_phase_dependent_loss_raises():
    A = E(carr(3, 3)).requires_grad_()
    with pytest.raises(RuntimeError, match="ill-defined"):
        ember.view_as_real(LA.eig(A).eigenvectors).sum().backward()
    B = E(arr(6, 3, 3)).requires_grad_()  # a batch: the check runs on ember's threads
    with pytest.raises(RuntimeError, match="ill-defined"):
        ember.view_as_real(LA.eig(B).eigenvectors).sum().backward()


def test_eig_float32_gradient_matches_torch():
    a = arr(5, 5).astype(np.float32)
    A, At = E(a).requires_grad_(), Tt(a).requires_grad_()
    _eig_loss(ember, A).backward()
    _eig_loss(torch, At).backward()
    assert A.grad.dtype == ember.float32
    close(A.grad, At.grad.numpy(), rtol=1e-3, atol=1e-3 * np.abs(At.grad.numpy()).max())


# ---- geqrf / householder_product / ormqr -----------------------------------------------------


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (0, 3)])
def test_geqrf_matches_torch(shape):
    a = arr(*shape)
    r = ember.geqrf(E(a))
    rt = torch.geqrf(Tt(a))
    close(r.a, rt.a.numpy(), atol=1e-12)
    close(r.tau, rt.tau.numpy(), atol=1e-12)
    close(E(a).geqrf()[1], rt.tau.numpy(), atol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_householder_product_matches_torch_and_qr(dtype):
    a = arr(3, 6, 4)
    ga, tau = ember.geqrf(E(a, dtype))
    Q = LA.householder_product(ga, tau)
    Qt = torch.linalg.householder_product(*torch.geqrf(Tt(a, dtype)))
    tol = 1e-10 if dtype == "float64" else 1e-5
    close(Q, Qt.numpy(), rtol=tol, atol=tol)
    close(Q, LA.qr(E(a, dtype)).Q, rtol=tol, atol=tol)
    close(ember.orgqr(ga, tau), Q, rtol=0, atol=0)
    close(ga.orgqr(tau), Q, rtol=0, atol=0)
    # fewer reflectors than columns
    close(LA.householder_product(ga, tau[..., :2]),
          torch.linalg.householder_product(Tt(npy(ga)), Tt(npy(tau[..., :2]))).numpy(),
          rtol=tol, atol=tol)


def test_householder_product_errors():
    with pytest.raises(RuntimeError, match=r"input.shape\[-2\] must be greater than or equal"):
        LA.householder_product(ember.randn(2, 3), ember.randn(2))
    with pytest.raises(RuntimeError, match=r"input.shape\[-1\] must be greater than or equal"):
        LA.householder_product(ember.randn(3, 2), ember.randn(3))
    with pytest.raises(RuntimeError, match="batch dimensions of tau"):
        LA.householder_product(ember.randn(2, 3, 2), ember.randn(3, 2))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ember.geqrf(ember.randn(3))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_ormqr_matches_torch(left, transpose):
    a = arr(2, 5, 3)
    c = arr(2, 5, 4) if left else arr(2, 4, 5)
    ga, tau = ember.geqrf(E(a))
    got = ember.ormqr(ga, tau, E(c), left, transpose)
    want = torch.ormqr(Tt(npy(ga)), Tt(npy(tau)), Tt(c), left, transpose)
    close(got, want.numpy(), atol=1e-12)
    close(ga.ormqr(tau, E(c), left=left, transpose=transpose), got, rtol=0, atol=0)
    # the same as multiplying by the explicit full Q
    Q = LA.householder_product(
        ember.cat([ga, ember.zeros(2, 5, 2, dtype=ga.dtype)], -1),
        ember.cat([tau, ember.zeros(2, 2, dtype=tau.dtype)], -1))
    Qn = npy(Q).swapaxes(-1, -2) if transpose else npy(Q)
    close(got, Qn @ c if left else c @ Qn, atol=1e-12)


# geqrf of real matrices with m <= 48 and m * n <= 48 * 48 runs ember's own unblocked
# Householder loops (LAPACK's geqr2 conventions); the rest goes to LAPACK's geqrf.
_QR_TOL = {"float64": 1e-12, "float32": 2e-5}


def _check_geqrf(a, dtype, got=None):
    """ember.geqrf(a) equals torch.geqrf(a) to a few ulps and reproduces a as Q R."""
    ga, tau = ember.geqrf(E(a, dtype)) if got is None else got
    want = torch.geqrf(Tt(a, dtype))
    tol = _QR_TOL[dtype] * max(1.0, float(np.abs(a).max()))
    assert ga.dtype == getattr(ember, dtype) and tau.dtype == ga.dtype
    close(ga, want.a.numpy(), rtol=0, atol=tol)
    close(tau, want.tau.numpy(), rtol=0, atol=_QR_TOL[dtype])
    m, n = a.shape[-2:]
    if m >= n:  # Q R == A
        Q = LA.householder_product(ga, tau)
        R = np.triu(npy(ga))[..., :n, :]
        close(npy(Q) @ R, a, rtol=0, atol=10 * tol)
    return ga, tau


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(16, 8), (8, 16), (1, 1), (1, 6), (6, 1), (48, 48), (30, 60),
                                   (49, 10), (256, 16, 8), (2, 3, 5, 4)])
def test_geqrf_small_matches_torch(dtype, shape):
    _check_geqrf(arr(*shape), dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_geqrf_small_zero_columns_and_rank_deficiency(dtype):
    a = arr(5, 7, 5)
    a[0] = 0  # all zero: every tau is 0, the matrix unchanged
    a[1, :, 0] = 0  # a zero first column
    a[2, :, 2] = 0  # a zero column inside
    a[3, 3:] = 0  # rank 3: the last reflectors see exact zeros, tau 0
    a[4, 1:, 0] = 0  # x = 0 below the diagonal, alpha != 0: tau is 0
    ga, tau = _check_geqrf(a, dtype)
    assert np.all(npy(tau[0]) == 0) and np.all(npy(ga[0]) == 0)
    assert npy(tau[1])[0] == 0 and np.all(npy(tau[3])[3:] == 0) and npy(tau[4])[0] == 0
    # numerically rank deficient (the trailing reflectors act on round-off, so only Q R == A
    # and the vanishing diagonal of R are compared)
    b = np.stack([np.outer(arr(7), arr(5)), arr(7, 5)])
    b[1, :, 3] = 2 * b[1, :, 1]
    b = b.astype(dtype)
    ga, tau = ember.geqrf(E(b))
    R = np.triu(npy(ga))[..., :5, :]
    tol = _QR_TOL[dtype] * 10 * np.abs(b).max()
    close(npy(LA.householder_product(ga, tau)) @ R, b, rtol=0, atol=tol)
    assert np.all(np.abs(np.diagonal(R[0])[1:]) < tol) and abs(R[1, 3, 3]) < tol


def test_geqrf_small_tiny_and_huge_scales():
    # |beta| < safmin: LAPACK's rescaling loop; no overflow in the norms at the top of the range
    for scale in (1e-300, 1e-310, 1e300):
        a = arr(2, 6, 4) * scale
        ga, tau = ember.geqrf(E(a))
        want = torch.geqrf(Tt(a))
        close(ga, want.a.numpy(), rtol=1e-12, atol=0)
        close(tau, want.tau.numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_geqrf_small_non_contiguous(dtype):
    a = arr(4, 9, 12)
    t = E(a, dtype).transpose(-1, -2)  # (4, 12, 9), column-major already
    _check_geqrf(np.swapaxes(a, -1, -2), dtype, ember.geqrf(t))
    s = E(a, dtype)[::2, 1::2, ::3]  # strided views
    _check_geqrf(a[::2, 1::2, ::3], dtype, ember.geqrf(s))
    b = E(a[0], dtype).expand(3, 9, 12)  # a stride-0 batch
    ga, tau = _check_geqrf(np.broadcast_to(a[0], (3, 9, 12)), dtype, ember.geqrf(b))
    close(ga[2], ga[0], rtol=0, atol=0)


def test_geqrf_small_complex_and_downstream():
    # complex stays on LAPACK; ormqr / householder_product take the small path's reflectors
    c = carr(3, 6, 4)
    ga, tau = ember.geqrf(E(c))
    want = torch.geqrf(Tt(c))
    close(ga, want.a.numpy(), atol=1e-12)
    close(tau, want.tau.numpy(), atol=1e-12)
    a, x = arr(3, 6, 4), arr(3, 6, 2)
    ga, tau = ember.geqrf(E(a))
    close(ember.ormqr(ga, tau, E(x), True, True),
          torch.ormqr(*torch.geqrf(Tt(a)), Tt(x), True, True).numpy(), atol=1e-12)


def test_householder_product_and_ormqr_gradients():
    a, c = arr(5, 3), arr(5, 2)
    ga, tau = (t.requires_grad_() for t in ember.geqrf(E(a)))
    assert gradcheck(lambda x, t: LA.householder_product(x, t), (ga, tau))
    assert gradcheck(lambda x, t: LA.householder_product(x, t[:2]), (ga, tau))
    C = E(c).requires_grad_()
    for left, transpose in ((True, False), (True, True)):
        assert gradcheck(lambda x, t, y: ember.ormqr(x, t, y, left, transpose), (ga, tau, C))
    Cr = E(arr(2, 5)).requires_grad_()
    for transpose in (False, True):
        assert gradcheck(lambda x, t, y: x.ormqr(t, y, left=False, transpose=transpose),
                         (ga, tau, Cr))
    # the same gradients as torch, and the same values as the LAPACK path
    gat, taut = (Tt(npy(t)).requires_grad_() for t in (ga, tau))
    w = arr(5, 3)
    (LA.householder_product(ga, tau) * E(w)).sum().backward()
    (torch.linalg.householder_product(gat, taut) * Tt(w)).sum().backward()
    close(ga.grad, gat.grad.numpy(), rtol=1e-9, atol=1e-12)
    close(tau.grad, taut.grad.numpy(), rtol=1e-9, atol=1e-12)
    with ember.no_grad():
        close(LA.householder_product(ga, tau), LA.householder_product(ga, tau.detach()),
              atol=1e-12)
    close(LA.householder_product(ga, tau).detach(), LA.householder_product(ga.detach(),
                                                                           tau.detach()),
          atol=1e-12)
    close(ember.ormqr(ga, tau, C, True, True).detach(),
          ember.ormqr(ga.detach(), tau.detach(), C.detach(), True, True), atol=1e-12)
    with pytest.raises(RuntimeError, match=r"input.shape\[-1\] must be greater than or equal"):
        LA.householder_product(E(arr(3, 2)).requires_grad_(), E(arr(3)))


def test_ormqr_errors():
    ga, tau = ember.geqrf(ember.randn(5, 3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match=r"other.shape\[-2\] must be equal to input.shape"):
        ember.ormqr(ga, tau, ember.randn(4, 2, dtype=ember.float64))
    with pytest.raises(RuntimeError, match=r"other.shape\[-1\] must be equal to input.shape"):
        ember.ormqr(ga, tau, ember.randn(2, 4, dtype=ember.float64), left=False)
    with pytest.raises(RuntimeError, match=r"must be greater than or equal to tau.shape"):
        ember.ormqr(ga, tau, ember.randn(4, 2, dtype=ember.float64), left=False)
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.ormqr(ga, tau, ember.randn(5, 2))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ember.ormqr(ga, tau, ember.randn(5, dtype=ember.float64))


# ---- LDL^T -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_factor_and_solve_match_torch(dtype, hermitian):
    a = arr(3, 5, 5)
    a = a + a.swapaxes(-1, -2)  # symmetric indefinite: 2 x 2 pivots appear
    A = E(a, dtype)
    LD, piv, info = LA.ldl_factor_ex(A, hermitian=hermitian)
    LDt, pivt, infot = torch.linalg.ldl_factor_ex(Tt(a, dtype), hermitian=hermitian)
    tol = 1e-10 if dtype == "float64" else 2e-4
    close(LD, LDt.numpy(), rtol=tol, atol=tol)
    assert piv.dtype == ember.int32 and piv.tolist() == pivt.tolist()
    assert info.tolist() == infot.tolist() == [0, 0, 0]
    b = arr(5, 2)
    X = LA.ldl_solve(LD, piv, E(b, dtype), hermitian=hermitian)  # B broadcasts over the batch
    Xt = torch.linalg.ldl_solve(LDt, pivt, Tt(b, dtype), hermitian=hermitian)
    close(X, Xt.numpy(), rtol=tol * 10, atol=tol * 10)
    close(npy(A) @ npy(X), np.broadcast_to(b, (3, 5, 2)), rtol=tol * 10, atol=tol * 10)
    LD2, piv2 = LA.ldl_factor(A)
    close(LD2, LD, rtol=0, atol=0)
    assert piv2.tolist() == piv.tolist()


# ldl_factor of real matrices with n <= 128 runs ember's own Bunch-Kaufman loops (LAPACK's sytf2
# conventions); larger ones and complex input go to LAPACK's sytrf / hetrf.
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n", [1, 2, 3, 8, 33, 128, 129])
def test_ldl_factor_small_matches_torch(dtype, n):
    a = arr(6, n, n)
    a = a + a.swapaxes(-1, -2)
    a[0] = 0  # all zero: info 1, nothing changes
    a[1, :, 0] = a[1, 0, :] = 0  # a zero first column: info 1, the rest still factored
    if n > 2:
        a[2] = 0
        a[2, 0, 1] = a[2, 1, 0] = 1  # a 2 x 2 pivot on a zero diagonal, then zeros: info 3
        a[3, 0, 0] = 1e-3  # small leading diagonal: the 2 x 2 / row-interchange branches
        a[4, :, n - 1] = a[4, n - 1, :] = 0  # singular at the last step
    a = a.astype(dtype)
    LD, piv, info = LA.ldl_factor_ex(E(a, dtype))
    LDt, pivt, infot = torch.linalg.ldl_factor_ex(Tt(a, dtype))
    assert info.tolist() == infot.tolist()
    assert piv.tolist() == pivt.tolist()
    eps = np.finfo(dtype).eps
    close(LD, LDt.numpy(), rtol=0, atol=1e3 * eps * max(1.0, float(np.abs(npy(LDt)).max())))
    assert np.all(np.triu(npy(LD), 1) == 0)
    ok = npy(info) == 0
    b = arr(n, 2).astype(dtype)  # A X = B through the factors, where they are nonsingular
    X = npy(LA.ldl_solve(LD, piv, E(b, dtype)))[ok]
    tol = 1e-8 if dtype == "float64" else 5e-2
    res = np.abs(a[ok] @ X - b).max() / max(1.0, float(np.abs(a[ok]).max() * np.abs(X).max()))
    assert res < tol


def test_ldl_factor_small_non_contiguous():
    a = arr(3, 10, 10)
    a = a + a.swapaxes(-1, -2)
    for view, ref in [(E(a)[::2, ::2, ::2], a[::2, ::2, ::2]),
                      (E(a).transpose(-1, -2), a.swapaxes(-1, -2)),
                      (E(a[0]).expand(4, 10, 10), np.broadcast_to(a[0], (4, 10, 10)))]:
        LD, piv = LA.ldl_factor(view)
        LDt, pivt = torch.linalg.ldl_factor(Tt(ref))
        close(LD, LDt.numpy(), rtol=0, atol=1e-12)
        assert piv.tolist() == pivt.tolist()


def test_ldl_and_ormqr_take_strided_inputs():
    a = arr(4, 4)
    s = a + a.T
    LD, piv = LA.ldl_factor(E(s).t())  # a transposed view
    LDt, pivt = torch.linalg.ldl_factor(Tt(s).t())
    close(LD, LDt.numpy(), atol=1e-12)
    b = arr(3, 4)
    close(LA.ldl_solve(LD, piv, E(b).t()), torch.linalg.ldl_solve(LDt, pivt, Tt(b).t()).numpy(),
          atol=1e-10)
    ga, tau = ember.geqrf(E(arr(3, 5)).t())
    c = arr(3, 5)
    close(ember.ormqr(ga, tau, E(c).t()),
          torch.ormqr(Tt(npy(ga)), Tt(npy(tau)), Tt(c).t()).numpy(), atol=1e-12)


def test_ldl_errors():
    with pytest.raises(LA.LinAlgError, match="not invertible"):
        LA.ldl_factor(ember.zeros(3, 3))
    with pytest.raises(LA.LinAlgError, match="not invertible"):
        LA.ldl_factor_ex(ember.zeros(3, 3), check_errors=True)
    assert LA.ldl_factor_ex(ember.zeros(3, 3)).info.item() == 1
    with pytest.raises(RuntimeError, match="square"):
        LA.ldl_factor(ember.randn(2, 3))
    LD, piv = LA.ldl_factor(ember.eye(4))
    with pytest.raises(RuntimeError, match="Incompatible matrix sizes"):
        LA.ldl_solve(LD, piv, ember.randn(5, 2))
    with pytest.raises(RuntimeError, match="pivots must be in"):
        LA.ldl_solve(LD, ember.tensor([1, 2, 9, 4], dtype=ember.int32), ember.randn(4, 2))
    for bad in ([1, 2, 3, -4], [-1, 2, 3, 4], [1, -2, -3, 4]):
        with pytest.raises(RuntimeError, match="negative pivot"):
            LA.ldl_solve(LD, ember.tensor(bad, dtype=ember.int32), ember.randn(4, 2))
    # a valid 2 x 2 block passes the check
    assert LA.ldl_solve(LD, ember.tensor([1, -3, -3, 4], dtype=ember.int32),
                        ember.randn(4, 2)).shape == (4, 2)
    with pytest.raises(RuntimeError, match="dtype"):
        LA.ldl_factor(ember.eye(2).to(ember.float16))
    # int64 pivots are accepted, as torch does
    X = LA.ldl_solve(LD, piv.long(), ember.ones(4, 1))
    close(X, np.ones((4, 1)))


@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_householder_and_ldl_match_torch(dtype):
    tol = 1e-10 if dtype == "complex128" else 2e-4
    a = carr(2, 5, 3)
    ga, tau = ember.geqrf(E(a, dtype))
    gat, taut = torch.geqrf(Tt(a, dtype))
    close(ga, gat.numpy(), rtol=tol, atol=tol)
    close(tau, taut.numpy(), rtol=tol, atol=tol)
    close(LA.householder_product(ga, tau), torch.linalg.householder_product(gat, taut).numpy(),
          rtol=tol, atol=tol)
    for left, transpose in ((True, False), (True, True), (False, True)):
        c = carr(2, 5, 2) if left else carr(2, 2, 5)
        close(ember.ormqr(ga, tau, E(c, dtype), left, transpose),
              torch.ormqr(gat, taut, Tt(c, dtype), left, transpose).numpy(), rtol=tol, atol=tol)
    s = carr(2, 4, 4)
    for hermitian in (False, True):
        m = s + (np.conj(s.swapaxes(-1, -2)) if hermitian else s.swapaxes(-1, -2))
        LD, piv = LA.ldl_factor(E(m, dtype), hermitian=hermitian)
        LDt, pivt = torch.linalg.ldl_factor(Tt(m, dtype), hermitian=hermitian)
        close(LD, LDt.numpy(), rtol=tol, atol=tol)
        assert piv.tolist() == pivt.tolist()
        b = carr(2, 4, 3)
        close(LA.ldl_solve(LD, piv, E(b, dtype), hermitian=hermitian),
              torch.linalg.ldl_solve(LDt, pivt, Tt(b, dtype), hermitian=hermitian).numpy(),
              rtol=tol * 10, atol=tol * 10)


# ---- removed functions -----------------------------------------------------------------------


@pytest.mark.parametrize("name,hint", [("eig", "linalg.eig"), ("symeig", "linalg.eigh"),
                                       ("lstsq", "linalg.lstsq"), ("solve", "linalg.solve")])
def test_removed_functions_name_their_replacement(name, hint):
    A = ember.randn(3, 3)
    for fn in (getattr(A, name), getattr(ember, name)):
        with pytest.raises(RuntimeError, match="deprecated since version 1.9") as e:
            fn(A) if fn is getattr(ember, name) else fn()
        assert hint in str(e.value)


# ---- frexp / nextafter / isreal --------------------------------------------------------------

SPECIAL = [0.0, -0.0, 1.0, 3.0, -5.5, 0.1, 1e30, -1e-30, float("inf"), float("-inf"),
           float("nan")]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_frexp_matches_torch(dtype):
    tiny = {"float64": [1e-310, -4e-320], "float32": [1e-40, -3e-45],
            "float16": [1e-6, -6e-8], "bfloat16": [1e-39]}[dtype]
    vals = np.array(SPECIAL + tiny + list(arr(20) * 100))
    x = ember.tensor(vals, dtype=ember.float64).to(getattr(ember, dtype))
    xt = torch.tensor(vals, dtype=torch.float64).to(getattr(torch, dtype))
    m, e = ember.frexp(x)
    mt, et = torch.frexp(xt)
    assert e.dtype == ember.int32 and m.dtype == x.dtype
    np.testing.assert_array_equal(npy(m.double()), mt.double().numpy())
    np.testing.assert_array_equal(npy(e), et.numpy())
    m2, e2 = x.frexp()
    np.testing.assert_array_equal(npy(e2), et.numpy())


def test_frexp_out_and_errors():
    om, oe = ember.empty(0), ember.empty(0, dtype=ember.int32)
    r = ember.frexp(ember.tensor([4.0, 0.75]), out=(om, oe))
    assert r.mantissa is om and om.tolist() == [0.5, 0.75] and oe.tolist() == [3, 0]
    with pytest.raises(RuntimeError, match="only supports floating-point dtypes"):
        ember.frexp(ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="frexp.*out= tensor to have dtype int32"):
        ember.frexp(ember.tensor([4.0]), out=(ember.empty(0), ember.empty(0)))
    with pytest.raises(RuntimeError, match="frexp.*out= tensor to have dtype float64"):
        ember.frexp(ember.tensor([4.0], dtype=ember.float64),
                    out=(ember.empty(0), ember.empty(0, dtype=ember.int32)))


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_frexp_every_exponent_and_layouts(dtype):
    """Every power of two of the dtype (subnormals, the largest finite values), a value between
    each and the next, and the special values, on a transposed and a strided input."""
    lo, hi = {"float64": (-1074, 1023), "float32": (-149, 127), "float16": (-24, 15),
              "bfloat16": (-133, 127)}[dtype]
    k = np.arange(lo, hi + 1, dtype=np.float64)
    vals = np.concatenate([np.exp2(k), -np.exp2(k) * 1.5, np.exp2(k) * 1.75, SPECIAL])
    vals = np.resize(vals, (vals.size + 1) // 2 * 2)
    x = ember.tensor(vals, dtype=ember.float64).to(getattr(ember, dtype)).reshape(2, -1)
    xt = torch.tensor(vals, dtype=torch.float64).to(getattr(torch, dtype)).reshape(2, -1)
    for e_in, t_in in ((x.t(), xt.t()), (x[:, ::3], xt[:, ::3])):
        m, e = ember.frexp(e_in)
        mt, et = torch.frexp(t_in)
        assert tuple(m.shape) == tuple(mt.shape)
        np.testing.assert_array_equal(npy(m.double()), mt.double().numpy())
        np.testing.assert_array_equal(npy(e), et.numpy())


def test_frexp_gradient_and_meta():
    vals = np.array([3.0, -0.3, 1e-3, 700.0, -5e-310])
    x = ember.tensor(vals, requires_grad=True)
    xt = torch.tensor(vals, requires_grad=True)
    m, e = ember.frexp(x)
    mt, et = torch.frexp(xt)
    assert m.requires_grad and not e.requires_grad
    (m * ember.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=ember.float64)).sum().backward()
    (mt * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64)).sum().backward()
    close(x.grad, xt.grad.numpy(), rtol=0, atol=0)
    assert gradcheck(lambda a: ember.frexp(a).mantissa, (ember.tensor(arr(3, 2),
                                                                       requires_grad=True),))
    h = ember.tensor([3.0, 0.1], dtype=ember.float16, requires_grad=True)
    ember.frexp(h).mantissa.sum().backward()
    assert h.grad.dtype == ember.float16 and h.grad.tolist() == [0.25, 8.0]
    mm, me = ember.frexp(ember.empty(2, 3, device="meta"))
    assert mm.device.type == "meta" and me.dtype == ember.int32 and tuple(me.shape) == (2, 3)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_nextafter_matches_torch(dtype):
    xs = SPECIAL + list(arr(10))
    ys = [1.0, -1.0, 2.0, 0.0, -6.0, 0.1, float("inf"), 0.0, 0.0, 5.0, 1.0] + list(arr(10))
    x = ember.tensor(xs, dtype=ember.float64).to(getattr(ember, dtype))
    y = ember.tensor(ys, dtype=ember.float64).to(getattr(ember, dtype))
    want = torch.nextafter(torch.tensor(xs, dtype=torch.float64).to(getattr(torch, dtype)),
                           torch.tensor(ys, dtype=torch.float64).to(getattr(torch, dtype)))
    got = ember.nextafter(x, y)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(npy(got.double()), want.double().numpy())
    z = x.clone()
    assert z.nextafter_(y) is z
    np.testing.assert_array_equal(npy(z.double()), want.double().numpy())
    np.testing.assert_array_equal(npy(x.nextafter(y).double()), want.double().numpy())


def test_nextafter_promotes_broadcasts_and_rejects_integers():
    got = ember.nextafter(ember.tensor([[1.0], [2.0]]), ember.tensor([0.0, 3.0],
                                                                     dtype=ember.float64))
    want = torch.nextafter(torch.tensor([[1.0], [2.0]]), torch.tensor([0.0, 3.0],
                                                                      dtype=torch.float64))
    assert got.dtype == ember.float64 and tuple(got.shape) == (2, 2)
    np.testing.assert_array_equal(npy(got), want.numpy())
    with pytest.raises(RuntimeError, match="floating-point"):
        ember.nextafter(ember.tensor([1, 2]), ember.tensor([1, 2]))


def test_isreal_matches_torch():
    z = [1 + 0j, 1 + 1j, -0j, complex(float("nan"), 0), complex(0, float("nan"))]
    assert ember.isreal(ember.tensor(z)).tolist() == torch.isreal(torch.tensor(z)).tolist()
    assert ember.isreal(ember.tensor([1, 2])).tolist() == [True, True]
    assert ember.tensor([1.5]).isreal().dtype == ember.bool


# ---- gradient --------------------------------------------------------------------------------

COORDS = [0.0, 1.0, 3.0, 4.0, 7.0, 7.5]


def _grad_cases():
    x6 = arr(6)
    x2 = arr(5, 6)
    c5, c6 = [0.0, 0.5, 2.0, 2.5, 4.0], COORDS
    return [
        ("1d", x6, {}), ("1d h", x6, {"spacing": 2.5}), ("1d e2", x6, {"edge_order": 2}),
        ("1d coords", x6, {"spacing": ("t", [c6])}),
        ("1d coords e2", x6, {"spacing": ("t", [c6]), "edge_order": 2}),
        ("2d", x2, {}), ("2d dim1", x2, {"dim": 1}), ("2d dim -2", x2, {"dim": -2}),
        ("2d list", x2, {"spacing": [2.0, 0.5]}),
        ("2d list dims", x2, {"spacing": [3.0], "dim": [1]}),
        ("2d coords", x2, {"spacing": ("t", [c5, c6]), "edge_order": 2}),
        ("2d coords dim", x2, {"spacing": ("t", [c6]), "dim": (1,)}),
        ("0-d spacing", x2, {"spacing": ("t0", 2.0)}),
        ("int input", np.array([1, 4, 9, 16, 25]), {}),
        ("int input coords", np.array([1, 4, 9, 16, 25]),
         {"spacing": ("ti", [[0, 1, 3, 4, 7]])}),
    ]


def _spacing(lib, v):
    if isinstance(v, tuple):
        kind, val = v
        if kind == "t0":
            return lib.tensor(val)
        if kind == "ti":
            return [lib.tensor(c) for c in val]
        return [lib.tensor(np.array(c)) for c in val]
    return v


@pytest.mark.parametrize("case", _grad_cases(), ids=lambda c: c[0])
def test_gradient_matches_torch(case):
    _, a, kw = case
    ke = {k: _spacing(ember, v) if k == "spacing" else v for k, v in kw.items()}
    kt = {k: _spacing(torch, v) if k == "spacing" else v for k, v in kw.items()}
    got = ember.gradient(ember.tensor(a), **ke)
    want = torch.gradient(torch.tensor(a), **kt)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        close(g, w.numpy(), rtol=1e-12, atol=1e-12)


def test_gradient_errors_match_torch():
    x = arr(3, 4)
    cases = [
        (np.array([1.0]), {}),
        (np.array([1.0, 2.0]), {"edge_order": 2}),
        (np.array([1.0, 2.0, 3.0]), {"edge_order": 3}),
        (x, {"spacing": [1.0, 2.0, 3.0]}),
        (x, {"spacing": [1.0], "dim": [0, 1]}),
        (x, {"dim": [0, 0]}),
        (x, {"dim": 2}),
        (x, {"spacing": ("t", [np.ones((3, 1))]), "dim": 0}),
        (x, {"spacing": ("t0list", None)}),
    ]
    for a, kw in cases:
        def run(lib):
            k = dict(kw)
            if "spacing" in k and isinstance(k["spacing"], tuple):
                kind, val = k["spacing"]
                k["spacing"] = ([lib.tensor(2.0), lib.tensor(3.0)] if kind == "t0list"
                                else [lib.tensor(v) for v in val])
            return lib.gradient(lib.tensor(a), **k)

        with pytest.raises(Exception) as te:
            run(torch)
        with pytest.raises(type(te.value)) as ee:
            run(ember)
        assert str(ee.value) == str(te.value), kw
    assert ember.gradient(ember.tensor(1.0)) == ()


# ---- histogramdd -----------------------------------------------------------------------------


def _hist_cases():
    pts = arr(40, 2)
    return [
        ("int bins", pts, 4, {}),
        ("list bins", pts, [3, 5], {}),
        ("range", pts, [2, 3], {"range": [-1.0, 1.0, -0.5, 2.0]}),
        ("weights", pts, 3, {"weight": ("w", arr(40))}),
        ("density", pts, [3, 2], {"density": True}),
        ("density range weights", pts, 3, {"density": True, "weight": ("w", np.abs(arr(40))),
                                          "range": [-2.0, 2.0, -2.0, 2.0]}),
        ("edge tensors", pts, ("edges", [[-3.0, -1.0, 0.0, 0.5, 3.0], [-2.0, 0.0, 2.0]]), {}),
        ("3d batch", arr(2, 10, 3), [2, 3, 2], {}),
        ("constant", np.ones((5, 2)), 2, {}),
        ("empty", np.zeros((0, 2)), 2, {}),
    ]


@pytest.mark.parametrize("case", _hist_cases(), ids=lambda c: c[0])
def test_histogramdd_matches_torch(case):
    _, pts, bins, kw = case

    def run(lib):
        k = {n: (lib.tensor(v[1]) if isinstance(v, tuple) else v) for n, v in kw.items()}
        b = [lib.tensor(np.array(e)) for e in bins[1]] if isinstance(bins, tuple) else bins
        return lib.histogramdd(lib.tensor(pts), b, **k)

    h, edges = run(ember)
    ht, edges_t = run(torch)
    close(h, ht.numpy(), rtol=1e-12, atol=1e-12)
    assert len(edges) == len(edges_t)
    for e, et in zip(edges, edges_t):
        close(e, et.numpy(), rtol=1e-12, atol=1e-12)


def test_histogramdd_edge_rules_match_torch():
    """Points on edges (interior ones go right, the last edge into the last bin), repeated
    edges, points outside and NaN / inf points (not counted), equal bins from the data with
    values exactly on the edges, float32, one dim, weights with density."""
    g = np.linspace(-1.0, 1.0, 9)
    pts = np.stack(np.meshgrid(g, g[::-1]), -1).reshape(-1, 2)
    pts = np.concatenate([pts, [[np.nan, 0.0], [0.0, np.inf], [-2.0, 0.5], [0.5, 1.5]]])
    w = np.abs(arr(pts.shape[0]))
    edges = [[-1.0, -0.5, -0.5, 0.0, 0.25, 1.0], [-1.0, 0.0, 0.0, 0.0, 1.0]]
    cases = [
        (pts, ("edges", edges), {}),
        (pts, ("edges", [list(np.linspace(-1.0, 1.0, 41)), [-1.0] + list(np.geomspace(0.01, 1.0,
                                                                                  40))]), {}),
        (pts, 4, {"range": [-1.0, 1.0, -1.0, 1.0]}),
        (pts, [3, 5], {"range": [-0.75, 0.5, -1.0, 0.0], "weight": w}),
        (pts[:81], [8, 3], {}),
        (pts[:81], 5, {"weight": w[:81], "density": True}),
        (pts[:81].astype(np.float32), [4, 7], {}),
        (arr(50, 1), 6, {}),
        (arr(3, 4, 3), ("edges", [[-1.0, 0.0, 1.0], [-2.0, 2.0], [-0.5, 0.0, 0.5, 3.0]]),
         {"density": True}),
    ]
    for x, bins, kw in cases:
        def run(lib):
            k = {n: (lib.tensor(v) if isinstance(v, np.ndarray) else v) for n, v in kw.items()}
            b = [lib.tensor(np.array(e, dtype=x.dtype)) for e in bins[1]] \
                if isinstance(bins, tuple) else bins
            return lib.histogramdd(lib.tensor(x), b, **k)

        h, e = run(ember)
        ht, et = run(torch)
        assert h.dtype == (ember.float32 if x.dtype == np.float32 else ember.float64)
        close(h, ht.numpy(), rtol=1e-12, atol=1e-12)
        for a, b in zip(e, et):
            np.testing.assert_array_equal(npy(a), b.numpy())


def test_histogramdd_kernel_errors():
    x = ember.tensor(arr(6, 2))
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.histogramdd(x, 2, weight=ember.ones(6))
    with pytest.raises(RuntimeError, match="range \\[inf, inf\\] is not finite"):
        ember.histogramdd(ember.tensor([[0.0, float("inf")]]), 2)
    with pytest.raises(RuntimeError, match="non-decreasing"):
        ember.histogramdd(x, [ember.tensor([0.0, 1.0], dtype=ember.float64),
                              ember.tensor([1.0, 0.0], dtype=ember.float64)])
    with pytest.raises(RuntimeError, match="bin counts or bin edges"):
        ember._C._histogramdd(x, [], [])
    with pytest.raises(NotImplementedError):
        ember._C._histogramdd(ember.empty(4, 2, device="meta"), [2, 2], [])


def test_histogramdd_out():
    pts = arr(20, 2)
    oh, oe = ember.empty(0, dtype=ember.float64), [ember.empty(0, dtype=ember.float64)
                                                   for _ in range(2)]
    r = ember.histogramdd(ember.tensor(pts), [2, 3], out=(oh, oe))
    assert r.hist is oh and tuple(oh.shape) == (2, 3) and tuple(oe[1].shape) == (4,)
    close(oh, torch.histogramdd(torch.tensor(pts), [2, 3]).hist.numpy())


def test_histogramdd_errors_match_torch():
    x = arr(4, 2)
    cases = [({"bins": [2, 2, 2]}), ({"bins": 2, "range": [0.0, 1.0]}),
             ({"bins": 2, "range": [1.0, 0.0, 0.0, 1.0]}), ({"bins": 0}),
             ({"bins": 2, "weight": "w3"}), ({"bins": 2, "range": [0.0, float("inf"), 0, 1]})]
    for kw in cases:
        def run(lib):
            k = dict(kw)
            if k.get("weight") == "w3":
                k["weight"] = lib.ones(3, dtype=lib.float64)
            return lib.histogramdd(lib.tensor(x), **k)

        with pytest.raises(RuntimeError) as te:
            run(torch)
        with pytest.raises(RuntimeError) as ee:
            run(ember)
        assert str(ee.value) == str(te.value), kw
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ember.histogramdd(ember.randn(5), bins=2)
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.histogramdd(ember.tensor(x), bins=[ember.tensor([0.0, 1.0]),
                                                  ember.tensor([0.0, 1.0])])


# ---- svd_lowrank / pca_lowrank / lobpcg --------------------------------------------------------


def _low_rank(m, n, r, batch=()):
    return ember.tensor(arr(*batch, m, r) @ arr(*batch, r, n))


@pytest.mark.parametrize("m,n", [(30, 12), (12, 30)])
def test_svd_lowrank_reconstructs_low_rank_matrices(m, n):
    A = _low_rank(m, n, 4, batch=(2,))
    U, S, V = ember.svd_lowrank(A, q=4, niter=2)
    assert tuple(U.shape) == (2, m, 4) and tuple(S.shape) == (2, 4) and tuple(V.shape) == (2, n, 4)
    close((U * S.unsqueeze(-2)) @ V.mT, A, atol=1e-9)
    close(S, np.linalg.svd(npy(A), compute_uv=False)[..., :4], rtol=1e-9)
    close(U.mT @ U, np.broadcast_to(np.eye(4), (2, 4, 4)), atol=1e-10)


def test_svd_lowrank_approximates_leading_singular_values_and_takes_M():
    A = ember.tensor(arr(40, 25))
    S_exact = np.linalg.svd(npy(A), compute_uv=False)
    _, S, _ = ember.svd_lowrank(A, q=10, niter=6)
    assert tuple(S.shape) == (10,)
    np.testing.assert_allclose(npy(S)[:3], S_exact[:3], rtol=0.05)
    assert np.all(npy(S) <= S_exact[:10] * (1 + 1e-9))
    # with M: the decomposition of A - M
    M = ember.tensor(arr(1, 25))
    B = _low_rank(40, 25, 3) + M
    U, S, V = ember.svd_lowrank(B, q=3, M=M)
    close((U * S) @ V.T, B - M, atol=1e-9)
    _, S2, _ = ember.svd_lowrank(A, q=100)
    assert tuple(S2.shape) == (25,)


def test_pca_lowrank_centers_and_checks_arguments():
    mean = arr(1, 8) * 10
    A = _low_rank(50, 8, 3) + ember.tensor(mean)
    U, S, V = ember.pca_lowrank(A, q=3)
    centered = npy(A) - npy(A).mean(0, keepdims=True)
    close((U * S) @ V.T, centered, atol=1e-8)
    close(S, np.linalg.svd(centered, compute_uv=False)[:3], rtol=1e-8)
    U, S, V = ember.pca_lowrank(A)
    assert tuple(S.shape) == (6,)
    _, S_nc, _ = ember.pca_lowrank(A, q=4, center=False)
    close(S_nc[:4], np.linalg.svd(npy(A), compute_uv=False)[:4], rtol=1e-8)
    with pytest.raises(ValueError, match="not greater than min"):
        ember.pca_lowrank(A, q=9)
    with pytest.raises(ValueError, match="niter"):
        ember.pca_lowrank(A, niter=-1)


def _spd(n, seed_shift=0.0):
    a = arr(n, n)
    return a @ a.T + n * np.eye(n) * (1 + seed_shift)


@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_finds_extreme_eigenpairs(largest):
    a = _spd(40)
    A = ember.tensor(a)
    Ev, X = ember.lobpcg(A, k=3, largest=largest, niter=500)
    w = np.linalg.eigvalsh(a)
    want = w[::-1][:3] if largest else w[:3]
    close(Ev, want, rtol=1e-7)
    Xn = npy(X)
    np.testing.assert_allclose(a @ Xn, Xn * npy(Ev), atol=1e-5 * np.abs(w).max())
    close(X.T @ X, np.eye(3), atol=1e-8)


def test_lobpcg_eigenvalue_gradients():
    a, b = _spd(15), _spd(15, 1.0)
    A, B = ember.tensor(a).requires_grad_(), ember.tensor(b).requires_grad_()
    Ev, X = ember.lobpcg(A, k=2, niter=500)
    (Ev * ember.tensor([1.0, 2.0])).sum().backward()
    _, V = np.linalg.eigh(a)
    x1, x2 = V[:, -1:], V[:, -2:-1]
    close(A.grad, x1 @ x1.T + 2 * x2 @ x2.T, atol=1e-6)
    A.grad = None
    Ev, X = ember.lobpcg(A, k=1, B=B, niter=500)
    Ev.sum().backward()
    x = npy(X)
    close(A.grad, x @ x.T, atol=1e-6)
    close(B.grad, -npy(Ev) * x @ x.T, atol=1e-6)


def test_lobpcg_generalized_preconditioned_and_batched():
    a, b = _spd(30), _spd(30, 1.0)
    A, B = ember.tensor(a), ember.tensor(b)
    Ev, X = ember.lobpcg(A, k=2, B=B, X=ember.tensor(arr(30, 3)), iK=ember.tensor(
        np.linalg.inv(a)))
    L = np.linalg.cholesky(b)
    Li = np.linalg.inv(L)
    w = np.linalg.eigvalsh(Li @ a @ Li.T)[::-1][:2]
    close(Ev, w, rtol=1e-6)
    close(X.T @ B @ X, np.eye(2), atol=1e-8)
    batch = ember.tensor(np.stack([_spd(12), _spd(12)]))
    Eb, Xb = ember.lobpcg(batch, k=1)
    assert tuple(Eb.shape) == (2, 1) and tuple(Xb.shape) == (2, 12, 1)
    close(Eb[:, 0], np.linalg.eigvalsh(npy(batch))[:, -1], rtol=1e-6)
    seen = []
    ember.lobpcg(A, k=1, tracker=lambda s: seen.append(s.iteration))
    assert seen and seen[0] == 0
    with pytest.raises(ValueError, match="not applicable"):
        ember.lobpcg(ember.eye(5, dtype=ember.float64), k=2)
    with pytest.raises(ValueError, match="square"):
        ember.lobpcg(ember.randn(6, 7), k=1)
