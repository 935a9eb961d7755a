"""ember.linalg's factorizations on LAPACK (csrc/kernels/cpu/linalg_lapack.cpp): values against
numpy.linalg and torch, batched / empty / non-contiguous inputs, errors with PyTorch's
messages, the meta device, and gradients (gradcheck in float64, and against torch)."""

import math

import ember
import numpy as np
import pytest
from ember.autograd import gradcheck, gradgradcheck

LA = ember.linalg
RNG = np.random.default_rng(0)


def arr(*shape, seed=None):
    r = np.random.default_rng(seed) if seed is not None else RNG
    return r.standard_normal(shape)


def well(*shape, seed=None):
    """Well-conditioned square matrices (*shape[:-1], n, n)."""
    n = shape[-1]
    return arr(*shape, n, seed=seed) + 2 * n ** 0.5 * np.eye(n)


def spd(*shape, seed=None):
    a = arr(*shape, shape[-1], seed=seed)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def T(a, dtype="float64", grad=False):
    t = ember.tensor(np.ascontiguousarray(a)).to(getattr(ember, dtype))
    return t.requires_grad_() if grad else t


def close(got, want, dtype="float64", **kw):
    tol = {"float64": 1e-9, "float32": 2e-4}[dtype]
    got = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    np.testing.assert_allclose(got, np.asarray(want), rtol=kw.get("rtol", tol),
                               atol=kw.get("atol", tol))


DTYPES = ["float32", "float64"]


# ---- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3,), (2, 4), (2, 3, 5), (0, 3), (0,)])
def test_inv_solve_det_match_numpy(dtype, shape):
    a = well(*shape)
    b = arr(*shape, 2)
    A, B = T(a, dtype), T(b, dtype)
    close(LA.inv(A), np.linalg.inv(a), dtype)
    close(LA.solve(A, B), np.linalg.solve(a, b), dtype)
    close(LA.det(A), np.linalg.det(a), dtype, rtol=1e-3 if dtype == "float32" else 1e-9)
    sign, logabs = LA.slogdet(A)
    ws, wl = np.linalg.slogdet(a)
    close(sign, ws, dtype)
    close(logabs, wl, dtype)
    assert LA.inv(A).dtype == A.dtype and LA.inv(A).shape == A.shape


def test_solve_forms_match_torch():
    torch = pytest.importorskip("torch")
    a, a1 = well(2, 3), well(3)
    cases = [(a, arr(2, 3)), (a, arr(3)), (a, arr(2, 3, 4)), (a1, arr(5, 3, 2)), (a, arr(1, 3, 2))]
    for x, y in cases:
        for left in (True, False):
            if not left and (y.ndim == 1 or y.shape == x.shape[:-1]):
                continue  # vectors only on the left, as in PyTorch
            yy = y if left else np.swapaxes(y, -1, -2)
            want = torch.linalg.solve(torch.tensor(x), torch.tensor(yy), left=left)
            got = LA.solve(T(x), T(yy), left=left)
            assert tuple(got.shape) == tuple(want.shape), (x.shape, y.shape, left)
            close(got, want.numpy())


def test_non_contiguous_inputs():
    a = well(2, 4)
    At = T(np.swapaxes(a, -1, -2)).mT  # the same values through a transposed view
    close(LA.inv(At), np.linalg.inv(a))
    big = T(arr(2, 8, 8))
    sl = big[:, ::2, 1::2]
    close(LA.svdvals(sl), np.linalg.svd(sl.numpy(), compute_uv=False))
    close(LA.det(sl), np.linalg.det(sl.numpy()))
    b = T(arr(2, 4, 6))[..., ::3]
    close(LA.solve(T(a), b), np.linalg.solve(a, b.numpy()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 4, 4), (0, 3), (3, 0), (2, 0, 0)])
def test_svd_qr(dtype, shape):
    a = arr(*shape)
    A = T(a, dtype)
    k = min(shape[-2:])
    for full in (True, False):
        U, S, Vh = LA.svd(A, full_matrices=full)
        m, n = shape[-2:]
        assert tuple(U.shape) == shape[:-2] + ((m, m) if full else (m, k))
        assert tuple(Vh.shape) == shape[:-2] + ((n, n) if full else (k, n))
        rec = (U[..., :, :k] * S.unsqueeze(-2)) @ Vh[..., :k, :]
        close(rec, a, dtype)
        UtU = (U.mT @ U).numpy()
        close(UtU, np.broadcast_to(np.eye(UtU.shape[-1]), UtU.shape), dtype)
    close(S, np.linalg.svd(a, compute_uv=False) if k else np.zeros(shape[:-2] + (0,)), dtype)
    close(LA.svdvals(A), S.numpy(), dtype)
    for mode in ("reduced", "complete", "r"):
        Q, R = LA.qr(A, mode=mode)
        wq, wr = np.linalg.qr(a, mode=mode) if mode != "r" else (None, np.linalg.qr(a, mode="r"))
        assert tuple(R.shape) == wr.shape
        close(R.abs(), np.abs(wr), dtype)
        if mode != "r":
            assert tuple(Q.shape) == wq.shape
            close(Q @ R, a, dtype)
        else:
            assert Q.numel() == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh(dtype):
    a = spd(3, 5) - 3 * np.eye(5)
    for uplo in ("L", "U"):
        # the other triangle must not be read
        junk = np.tril(a) + 7 * np.triu(np.ones_like(a), 1) if uplo == "L" else \
            np.triu(a) + 7 * np.tril(np.ones_like(a), -1)
        L, V = LA.eigh(T(junk, dtype), UPLO=uplo)
        close(L, np.linalg.eigvalsh(a), dtype)
        close((V * L.unsqueeze(-2)) @ V.mT, a, dtype)
        close(LA.eigvalsh(T(junk, dtype), UPLO=uplo.lower()), L.numpy(), dtype)
    L0, V0 = LA.eigh(T(np.zeros((2, 0, 0)), dtype))
    assert tuple(L0.shape) == (2, 0) and tuple(V0.shape) == (2, 0, 0)



def _eigh_errors(a, dtype, uplo="L"):
    """(eigenvalue error, reconstruction error, orthogonality error) of eigh on a (batched,
    symmetric) in units of the dtype's eps, relative to the largest |eigenvalue|."""
    L, V = LA.eigh(T(a, dtype), UPLO=uplo)
    L, V = L.numpy().astype(np.float64), V.numpy().astype(np.float64)
    ref = np.linalg.eigvalsh(a)
    assert np.all(np.diff(L, axis=-1) >= 0), "eigenvalues not ascending"
    scale = max(np.abs(ref).max(), np.finfo(np.float64).tiny)
    eps = np.finfo(getattr(np, dtype)).eps
    n = a.shape[-1]
    rec = (V * L[..., None, :]) @ np.swapaxes(V, -1, -2)
    lv = LA.eigvalsh(T(a, dtype), UPLO=uplo).numpy()
    return (max(np.abs(L - ref).max(), np.abs(lv - ref).max()) / scale / eps,
            np.abs(rec - a).max() / scale / eps,
            np.abs(np.swapaxes(V, -1, -2) @ V - np.eye(n)).max() / eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_small_matrices_accuracy(dtype):
    # Sizes on both sides of the own kernel's limit (32), batches of even and odd length (the
    # kernel runs matrices in pairs), random and structured matrices (zeros, identity, repeated
    # eigenvalues, rank 1, a tridiagonal one, scales far from 1): all within a small multiple of
    # eps of numpy.
    rng = np.random.default_rng(4)
    for n in (1, 2, 3, 4, 5, 8, 15, 16, 17, 31, 32, 33):
        a = rng.standard_normal((6, n, n))
        a = a + np.swapaxes(a, -1, -2)
        q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        v = rng.standard_normal(n)
        tri = np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1) + np.diag(np.arange(n))
        big = 1e250 if dtype == "float64" else 1e30
        mats = [a, a[:5], np.zeros((2, n, n)), np.broadcast_to(np.eye(n), (2, n, n)),
                (q * rng.integers(0, 3, n)) @ q.T, np.outer(v, v), tri, a * big, a / big]
        for m in mats:
            for uplo in ("L", "U"):
                errs = _eigh_errors(np.asarray(m, np.float64), dtype, uplo)
                assert max(errs) <= 30 * max(n, 4), (n, uplo, errs)


def test_eigh_small_matrices_read_one_triangle_and_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    for n in (3, 8, 32):
        a = rng.standard_normal((4, n, n)).astype(np.float32)
        for uplo in ("L", "U"):
            tri = np.tril(a) if uplo == "L" else np.triu(a)
            junk = tri + 100 * (np.triu(np.ones((n, n)), 1) if uplo == "L" else
                                np.tril(np.ones((n, n)), -1)).astype(np.float32)
            L, V = LA.eigh(ember.tensor(junk), UPLO=uplo)
            tL, tV = torch.linalg.eigh(torch.tensor(junk), UPLO=uplo)
            np.testing.assert_allclose(L.numpy(), tL.numpy(), rtol=1e-4, atol=1e-4)
            # eigenvectors agree up to sign (the eigenvalues are distinct here)
            dots = np.abs(np.einsum("bki,bki->bi", V.numpy(), tV.numpy()))
            np.testing.assert_allclose(dots, 1.0, atol=1e-3)


def test_eigh_non_finite_and_gradients_of_small_matrices():
    # Non-finite matrices go to LAPACK as before (NaN results with vectors, like torch's; no
    # convergence without, torch's error too), also when paired with a finite one; the others'
    # gradients pass gradcheck (float64) through the own kernel.
    a = np.array([[[1.0, np.nan], [np.nan, 2.0]], [[2.0, 1.0], [1.0, 3.0]]])
    L, V = LA.eigh(T(a))
    assert np.isnan(L.numpy()[0]).all() and np.isnan(V.numpy()[0]).all()
    close(L[1], np.linalg.eigvalsh(a[1]))
    b = arr(3, 6, 6)
    b = b + np.swapaxes(b, -1, -2)
    b[1, 0, 0] = np.nan
    with pytest.raises(LA.LinAlgError, match="Batch element 1"):
        LA.eigvalsh(T(b))
    close(LA.eigvalsh(T(np.stack([a[1], a[1] + np.eye(2), a[1]]))),
          np.linalg.eigvalsh(np.stack([a[1], a[1] + np.eye(2), a[1]])))
    sym = lambda x: (x + x.mT) / 2  # noqa: E731
    s = spd(3, 6) + np.diag(np.arange(6.0))
    _gc(lambda x: (lambda w, v: (w, v * v))(*LA.eigh(sym(x))), s)
    _gc(lambda x: LA.eigvalsh(sym(x), UPLO="U"), s)


def test_lstsq_matches_torch():
    torch = pytest.importorskip("torch")
    cases = [(arr(5, 3), arr(5, 2)), (arr(2, 5, 3), arr(2, 5, 2)), (arr(3, 5), arr(3, 2)),
             (arr(4, 3), arr(4)), (np.ones((4, 3)), arr(4, 2))]
    for a, b in cases:
        for driver in (None, "gelsy", "gelsd", "gelss", "gels"):
            if driver == "gels" and (np.linalg.matrix_rank(a) < min(a.shape[-2:])).any():
                continue
            want = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
            got = LA.lstsq(T(a), T(b), driver=driver)
            assert type(got).__name__ == "linalg_lstsq"
            for g, w, name in zip(got, want, got._fields):
                assert tuple(g.shape) == tuple(w.shape), (name, driver, a.shape)
                assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], name
                close(g, w.numpy(), atol=1e-8, rtol=1e-7)


def test_lu_family():
    torch = pytest.importorskip("torch")
    for shape in [(4, 4), (2, 3, 3), (3, 5), (5, 3)]:
        a = arr(*shape)
        LU, piv = LA.lu_factor(T(a))
        wLU, wpiv = torch.linalg.lu_factor(torch.tensor(a))
        close(LU, wLU.numpy())
        assert piv.dtype == ember.int32 and piv.tolist() == wpiv.tolist()
        P, L, U = LA.lu(T(a))
        for g, w in zip((P, L, U), torch.linalg.lu(torch.tensor(a))):
            close(g, w.numpy())
        close(P @ L @ U, a)
        for g, w in zip(ember.lu_unpack(LU, piv), torch.lu_unpack(wLU, wpiv)):
            close(g, w.numpy())
    a, b = well(2, 3), arr(2, 3, 2)
    LU, piv = LA.lu_factor(T(a))
    wLU, wpiv = torch.linalg.lu_factor(torch.tensor(a))
    for left in (True, False):
        for adjoint in (True, False):
            bb = b if left else np.swapaxes(b, -1, -2)
            want = torch.linalg.lu_solve(wLU, wpiv, torch.tensor(bb), left=left, adjoint=adjoint)
            close(LA.lu_solve(LU, piv, T(bb), left=left, adjoint=adjoint), want.numpy())
    info = LA.lu_factor_ex(T(np.zeros((2, 3, 3)))).info
    assert info.tolist() == [1, 1]


def test_pinv_rank_power_cond_cholesky_match_torch():
    torch = pytest.importorskip("torch")
    low = arr(2, 5, 2) @ arr(2, 2, 4)  # rank 2
    sym = spd(4)
    for x, kw in [(low, {}), (arr(3, 4), {}), (low, {"atol": 0.5}), (low, {"rtol": 0.3}),
                  (sym, {"hermitian": True})]:
        close(LA.pinv(T(x), **kw), torch.linalg.pinv(torch.tensor(x), **kw).numpy(), atol=1e-8)
        assert LA.matrix_rank(T(x), **kw).tolist() == \
            torch.linalg.matrix_rank(torch.tensor(x), **kw).tolist()
    m = well(2, 3)
    for n in (-1, -2, 3):
        close(LA.matrix_power(T(m), n), torch.linalg.matrix_power(torch.tensor(m), n).numpy())
    for p in (None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf):
        close(LA.cond(T(m), p), torch.linalg.cond(torch.tensor(m), p).numpy())
    L = np.linalg.cholesky(spd(2, 3))
    b = arr(2, 3, 2)
    for upper in (False, True):
        f = np.swapaxes(L, -1, -2) if upper else L
        close(ember.cholesky_solve(T(b), T(f), upper),
              torch.cholesky_solve(torch.tensor(b), torch.tensor(f), upper).numpy())
        close(ember.cholesky_inverse(T(f[0]), upper),
              torch.cholesky_inverse(torch.tensor(f[0]), upper).numpy())
    e = spd(2, 3)
    e[1] = -e[1]
    Lx, info = LA.cholesky_ex(T(e))
    assert info.tolist() == [0, 1]
    with pytest.raises(LA.LinAlgError, match=r"\(Batch element 1\): .* minor of order 1 is not"):
        LA.cholesky(T(e))
    close(Lx[0], np.linalg.cholesky(e[0]))
    w6, b6 = well(6), arr(2, 3)
    close(LA.tensorinv(T(w6).reshape(6, 2, 3), ind=1),
          torch.linalg.tensorinv(torch.tensor(w6).reshape(6, 2, 3), ind=1).numpy())
    A6 = w6.reshape(2, 3, 6)
    close(LA.tensorsolve(T(A6), T(b6)),
          torch.linalg.tensorsolve(torch.tensor(A6), torch.tensor(b6)).numpy())


def test_matrix_exp_matches_torch():
    torch = pytest.importorskip("torch")
    for x in [arr(3, 3), 8 * arr(2, 4, 4), np.zeros((0, 2, 2)), arr(1, 1)]:
        for dtype in DTYPES:
            want = torch.linalg.matrix_exp(torch.tensor(x).to(getattr(torch, dtype)))
            close(LA.matrix_exp(T(x, dtype)), want.numpy(), dtype,
                  rtol=1e-4 if dtype == "float32" else 1e-9)
    close(T(arr(3, 3, seed=2)).matrix_exp(), torch.tensor(arr(3, 3, seed=2)).matrix_exp().numpy())


def test_toplevel_and_methods_match_torch():
    torch = pytest.importorskip("torch")
    a, t = well(2, 3), None
    A, t = T(a), torch.tensor(a)
    close(ember.inverse(A), torch.inverse(t).numpy())
    close(A.inverse(), t.inverse().numpy())
    close(A.det(), t.det().numpy())
    close(ember.logdet(A), torch.logdet(t).numpy())
    close(A.logdet(), t.logdet().numpy())
    assert np.isnan(ember.logdet(T(-np.eye(3))).item())
    s = A.slogdet()
    assert type(s).__name__ == "slogdet" and s._fields == ("sign", "logabsdet")
    close(s.logabsdet, t.slogdet().logabsdet.numpy())
    r = arr(4, 3)
    for some in (True, False):
        U, S, V = ember.svd(T(r), some=some)
        wU, wS, wV = torch.svd(torch.tensor(r), some=some)
        assert tuple(U.shape) == tuple(wU.shape) and tuple(V.shape) == tuple(wV.shape)
        close((U[:, :3] * S) @ V[:, :3].mT, r)
    U, S, V = T(r).svd(compute_uv=False)
    assert U.shape == (4, 4) and not U.numpy().any() and V.shape == (3, 3)
    Q, R = T(r).qr()
    assert type(ember.qr(T(r))).__name__ == "qr"
    close(Q @ R, r)
    assert tuple(ember.qr(T(r), some=False).Q.shape) == (4, 4)
    close(T(r).pinverse(), torch.pinverse(torch.tensor(r)).numpy())
    close(A.matrix_power(-1), torch.linalg.inv(t).numpy())
    LU, piv = T(a).lu()
    close(T(arr(2, 3, 1, seed=3)).lu_solve(LU, piv),
          torch.linalg.lu_solve(*torch.linalg.lu_factor(t), torch.tensor(arr(2, 3, 1, seed=3)))
          .numpy())
    assert type(LA.svd(A)).__name__ == "linalg_svd" and type(LA.eigh(A)).__name__ == "linalg_eigh"
    assert LA.inv_ex(A)._fields == ("inverse", "info")


def test_out_arguments():
    a = well(2, 3)
    o = ember.empty(2, 3, 3, dtype=ember.float64)
    assert LA.inv(T(a), out=o) is o
    close(o, np.linalg.inv(a))
    s, la = ember.empty(2, dtype=ember.float64), ember.empty(2, dtype=ember.float64)
    r = LA.slogdet(T(a), out=(s, la))
    assert r.sign is s and r.logabsdet is la
    close(la, np.linalg.slogdet(a)[1])
    o = ember.empty(3, dtype=ember.float64)  # the wrong shape: resized, with a warning (torch)
    with pytest.warns(UserWarning, match="linalg.det: the out= tensor had shape"):
        assert LA.det(T(a), out=o) is o
    close(o, np.linalg.det(a))


def test_empty_and_batch_zero():
    assert LA.det(T(np.zeros((0, 0)))).item() == 1.0
    assert tuple(LA.det(T(np.zeros((0, 3, 3)))).shape) == (0,)
    assert tuple(LA.inv(T(np.zeros((0, 3, 3)))).shape) == (0, 3, 3)
    assert tuple(LA.inv(T(np.zeros((2, 0, 0)))).shape) == (2, 0, 0)
    assert tuple(LA.solve(T(np.zeros((0, 3, 3))), T(np.zeros((0, 3)))).shape) == (0, 3)
    assert tuple(LA.eigvalsh(T(np.zeros((0, 4, 4)))).shape) == (0, 4)
    U, S, Vh = LA.svd(T(np.zeros((3, 0))))
    close(U, np.eye(3))
    assert tuple(S.shape) == (0,) and tuple(Vh.shape) == (0, 0)
    assert tuple(LA.lstsq(T(np.zeros((0, 4, 3))), T(np.zeros((0, 4, 2)))).solution.shape) == \
        (0, 3, 2)


# ---- errors --------------------------------------------------------------------------------


def test_errors_match_torch():
    torch = pytest.importorskip("torch")
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    batch = np.stack([np.eye(2), sing])
    cases = [
        (lambda L, x: L.linalg.inv(x(sing)), "linalg.inv: The diagonal element 2 is zero"),
        (lambda L, x: L.linalg.inv(x(batch)), r"\(Batch element 1\): The diagonal element 2"),
        (lambda L, x: L.linalg.solve(x(batch), x(np.ones(2))), "The solver failed because"),
        (lambda L, x: L.linalg.inv(x(np.ones((2, 3)))), "must be batches of square matrices"),
        (lambda L, x: L.linalg.det(x(np.ones((2, 3)))), "must be batches of square matrices"),
        (lambda L, x: L.linalg.inv(x(np.ones(2))), "must have at least 2 dimensions"),
        (lambda L, x: L.linalg.svd(x(np.ones(3))), "must have at least 2 dimensions"),
        (lambda L, x: L.linalg.inv(x(np.ones((2, 2), dtype=np.int64))),
         "Expected a floating point or complex tensor as input. Got Long"),
        (lambda L, x: L.linalg.solve(x(np.eye(3)), x(np.ones(2))),
         r"Incompatible shapes of A and B for the equation AX = B \(3x3 and 2x1\)"),
        (lambda L, x: L.linalg.solve(x(np.eye(3)), x(np.ones((3, 2))), left=False),
         r"for the equation XA = B \(3x3 and 3x2\)"),
        (lambda L, x: L.linalg.solve(x(np.eye(3)).float(), x(np.ones((3, 3)))),
         "Expected A and B to have the same dtype, but found A of type Float and B of type Double"),
        (lambda L, x: L.linalg.qr(x(np.eye(3)), mode="x"), "qr received unrecognized mode 'x'"),
        (lambda L, x: L.linalg.eigh(x(np.eye(3)), UPLO="x"),
         "Expected UPLO argument to be 'L' or 'U', but got x"),
        (lambda L, x: L.linalg.svd(x(np.full((3, 3), np.nan))), "contained non-finite values"),
        (lambda L, x: L.linalg.lstsq(x(np.eye(3)), x(np.ones((2, 2)))),
         r"input.size\(-2\) should match other.size\(-2\)"),
        (lambda L, x: L.linalg.lstsq(x(np.eye(3)), x(np.ones((3, 2))), driver="x"),
         "parameter `driver` should be one of"),
        (lambda L, x: L.linalg.lu_factor(x(np.zeros((3, 3)))), r"U\[1,1\] is zero"),
        (lambda L, x: L.linalg.inv(x(np.eye(2)).half()), "Low precision dtypes not supported"),
    ]
    for fn, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            fn(torch, torch.tensor)
        with pytest.raises(RuntimeError, match=msg):
            fn(ember, ember.tensor)
    with pytest.raises(LA.LinAlgError):
        LA.inv(T(sing))
    assert LA.inv_ex(T(batch)).info.tolist() == [0, 2]
    assert LA.solve_ex(T(batch), T(np.ones(2))).info.tolist() == [0, 2]
    with pytest.raises(LA.LinAlgError):
        LA.inv_ex(T(batch), check_errors=True)


def test_meta_shapes():
    m = ember.empty(2, 5, 3, device="meta", dtype=ember.float64)
    sq = ember.empty(2, 4, 4, device="meta")
    assert LA.inv(sq).shape == (2, 4, 4) and LA.inv(sq).device.type == "meta"
    assert LA.solve(sq, ember.empty(4, device="meta")).shape == (2, 4)
    assert LA.det(sq).shape == (2,) and LA.slogdet(sq).sign.shape == (2,)
    U, S, Vh = LA.svd(m)
    assert (U.shape, S.shape, Vh.shape) == ((2, 5, 5), (2, 3), (2, 3, 3))
    assert [t.shape for t in LA.qr(m)] == [(2, 5, 3), (2, 3, 3)]
    assert [t.shape for t in LA.eigh(sq)] == [(2, 4), (2, 4, 4)]
    assert LA.lstsq(m, ember.empty(2, 5, 2, device="meta", dtype=ember.float64)).solution.shape \
        == (2, 3, 2)
    LU, piv = LA.lu_factor(m)
    assert LU.shape == (2, 5, 3) and piv.shape == (2, 3) and piv.dtype == ember.int32
    assert LA.lu(m).P.shape == (2, 5, 5)
    assert LA.pinv(m).shape == (2, 3, 5)


# ---- gradients -------------------------------------------------------------------------------


def _gc(fn, *arrays):
    inputs = [T(a, grad=True) for a in arrays]
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradcheck():
    a, b = well(2, 3), arr(2, 3, 2)
    _gc(LA.inv, a)
    _gc(lambda x, y: LA.solve(x, y), a, b)
    _gc(lambda x, y: LA.solve(x, y, left=False), a, np.swapaxes(b, -1, -2))
    _gc(lambda x, y: LA.solve(x, y), well(3), arr(3))  # vector B, broadcast A
    _gc(LA.det, a)
    _gc(LA.det, np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, 0.0]]))  # singular
    _gc(lambda x: LA.slogdet(x).logabsdet, a)
    r = arr(2, 4, 3)
    _gc(LA.svdvals, r)
    _gc(lambda x: LA.svdvals(x), arr(3, 5))
    # gauge-invariant functions of the singular vectors
    _gc(lambda x: (lambda u, s, vh: (u @ vh, u[..., 0:1] * vh[..., 0:1, :]))(*LA.svd(x, False)),
        r)
    _gc(lambda x: (lambda u, s, vh: u[..., :3] @ vh)(*LA.svd(x, True)), r)
    _gc(lambda x: (lambda u, s, vh: (u @ vh))(*LA.svd(x, False)), arr(3, 5))
    for shape in [(4, 3), (3, 3), (2, 3, 5)]:
        _gc(lambda x: LA.qr(x), arr(*shape))
    _gc(lambda x: LA.qr(x, mode="complete"), arr(3, 3))
    # eigh reads one triangle: differentiate through a symmetric input
    sym = lambda x: (x + x.mT) / 2  # noqa: E731
    s = spd(2, 4) + np.diag([0.0, 1.0, 3.0, 6.0])
    _gc(lambda x: LA.eigvalsh(sym(x)), s)
    _gc(lambda x: (lambda w, v: (w, v * v, v[..., :1] @ v[..., :1].mT))(*LA.eigh(sym(x))), s)
    _gc(lambda x, y: LA.lstsq(x, y).solution, arr(2, 5, 3), arr(2, 5, 2))
    _gc(lambda x, y: LA.lstsq(x, y, driver="gelsd").solution, arr(3, 5), arr(3, 2))
    _gc(LA.pinv, arr(4, 3))
    _gc(lambda y: LA.lu_solve(*LA.lu_factor(T(a)), y), b)
    L = np.linalg.cholesky(spd(3))
    _gc(lambda y, f: ember.cholesky_solve(y, f), arr(3, 2), L)
    _gc(lambda m: LA.matrix_power(m, -2), well(3))
    for shape in [(2, 3, 3), (3, 5), (2, 5, 3)]:
        _gc(lambda x: LA.lu_factor(x).LU, arr(*shape))
    _gc(lambda x: (lambda p, lo, up: (lo, up))(*LA.lu(x)), well(3))
    _gc(lambda f, y: LA.lu_solve(f, LA.lu_factor(T(a)).pivots, y, adjoint=True),
        LA.lu_factor(T(a)).LU.numpy(), b)
    _gc(lambda x: LA.cholesky(sym(x)), spd(2, 3))
    _gc(lambda x: LA.cholesky(sym(x), upper=True), spd(3))
    for upper, left, unit in [(False, True, False), (True, False, True)]:
        _gc(lambda x, y: LA.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit),
            L if not upper else L.T, arr(3, 2) if left else arr(2, 3))
    _gc(LA.matrix_exp, arr(2, 3, 3))


def test_second_derivatives():
    for fn, x in [(LA.inv, well(3)), (LA.det, well(3)), (LA.svdvals, arr(4, 3)),
                  (lambda m: LA.cholesky((m + m.mT) / 2), spd(3)),
                  (lambda m: LA.eigvalsh((m + m.mT) / 2), spd(3) + np.diag([0.0, 1.0, 3.0]))]:
        assert gradgradcheck(fn, [T(x, grad=True)], eps=1e-6, atol=1e-5, rtol=1e-3)


def test_grads_match_torch():
    torch = pytest.importorskip("torch")
    a, r, s = well(2, 3), arr(4, 3), spd(3) + np.diag([0.0, 1.0, 3.0])

    def both(fn_e, fn_t, x):
        xe, xt = T(x, grad=True), torch.tensor(x, requires_grad=True)
        fn_e(xe).backward()
        fn_t(xt).backward()
        close(xe.grad, xt.grad.numpy(), rtol=1e-7, atol=1e-9)

    both(lambda x: (ember.linalg.inv(x) ** 2).sum(), lambda x: (torch.linalg.inv(x) ** 2).sum(), a)
    both(lambda x: ember.linalg.det(x).sum(), lambda x: torch.linalg.det(x).sum(), a)
    both(lambda x: ember.linalg.det(x), lambda x: torch.linalg.det(x), np.ones((3, 3)))
    both(lambda x: (ember.linalg.svd(x, False).U[:, :2] ** 2).sum(),
         lambda x: (torch.linalg.svd(x, False).U[:, :2] ** 2).sum(), r)
    both(lambda x: ember.linalg.svd(x).S.sum(), lambda x: torch.linalg.svd(x).S.sum(), r)
    both(lambda x: (ember.linalg.qr(x).Q.sum() + ember.linalg.qr(x).R.sum()),
         lambda x: (torch.linalg.qr(x).Q.sum() + torch.linalg.qr(x).R.sum()), r)
    both(lambda x: (ember.linalg.eigh(x).eigenvectors ** 2 * ember.arange(3.0)).sum()
         + ember.linalg.eigh(x).eigenvalues[0],
         lambda x: (torch.linalg.eigh(x).eigenvectors ** 2 * torch.arange(3.0)).sum()
         + torch.linalg.eigh(x).eigenvalues[0], s)
    both(lambda x: ember.linalg.lstsq(x, T(arr(4, 2, seed=5))).solution.sum(),
         lambda x: torch.linalg.lstsq(x, torch.tensor(arr(4, 2, seed=5))).solution.sum(), r)
    both(lambda x: ember.linalg.pinv(x).sum(), lambda x: torch.linalg.pinv(x).sum(), r)
    w = arr(3, 3, seed=7)
    for x in (a[0], r, r.T):
        wx = arr(*x.shape, seed=9)
        both(lambda x: (ember.linalg.lu_factor(x).LU * T(wx)).sum(),
             lambda x: (torch.linalg.lu_factor(x).LU * torch.tensor(wx)).sum(), x)
    LU, piv = torch.linalg.lu_factor(torch.tensor(a[0]))
    bb = arr(3, 2, seed=8)
    for adjoint in (False, True):
        both(lambda f: (ember.linalg.lu_solve(f, ember.tensor(piv.numpy()), T(bb),
                                              adjoint=adjoint) ** 2).sum(),
             lambda f: (torch.linalg.lu_solve(f, piv, torch.tensor(bb), adjoint=adjoint) ** 2)
             .sum(), LU.numpy())
    both(lambda x: (ember.linalg.matrix_exp(x) * T(w)).sum(),
         lambda x: (torch.linalg.matrix_exp(x) * torch.tensor(w)).sum(), a[0] / 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_column_major_copies_of_views_and_broadcasts(dtype):
    # Operands reach LAPACK through a transposing copy: broadcast batch dims (size 1 and
    # expanded, stride 0), views with a storage offset and odd strides, in both dtypes.
    torch = pytest.importorskip("torch")
    a, b = well(3, 1, 4, seed=5), arr(1, 2, 4, 3, seed=6)
    got = LA.solve(T(a, dtype), T(b, dtype))
    want = torch.linalg.solve(torch.tensor(a), torch.tensor(b))
    assert tuple(got.shape) == (3, 2, 4, 3)
    close(got, want.numpy(), dtype)
    base = T(well(5, 6, seed=7), dtype)
    v = base[1:4, 1:5, 1:5]  # storage offset, row stride 6
    e = T(well(4, seed=8), dtype).expand(3, 4, 4)  # stride-0 batch
    for x in (v, v.mT, e):
        xn = x.double().numpy()
        close(LA.inv(x), np.linalg.inv(xn), dtype)
        close(LA.det(x), np.linalg.det(xn), dtype)
        close(LA.qr(x).R.abs(), np.abs(np.linalg.qr(xn)[1]), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 5, 16, 32, 33])
def test_small_lu_matches_torch(dtype, n):
    # Square matrices up to 32 are factored by ember's own getf2 loops (33 goes to LAPACK):
    # the same pivots as LAPACK, the same info for singular matrices, and NaN propagation.
    torch = pytest.importorskip("torch")
    a = arr(4, n, n, seed=n)
    a[1, :, 0] = 0.0  # a zero first column: info 1, no pivot swap
    if n > 2:
        a[2, 1] = a[2, 0]  # two equal rows: a zero pivot later on
    a[3, n // 2, n // 2] = np.nan
    ta = torch.tensor(a).to(getattr(torch, dtype))
    lu, piv, info = LA.lu_factor_ex(T(a, dtype))
    tlu, tpiv, tinfo = torch.linalg.lu_factor_ex(ta)
    assert np.array_equal(piv.numpy()[:3], tpiv.numpy()[:3])
    assert info.tolist()[:2] == tinfo.tolist()[:2]
    assert np.isnan(lu.numpy()[3]).any()
    close(lu[:1], tlu[:1].numpy(), dtype)
    w = well(3, n, seed=n + 1)
    b = arr(3, n, 70, seed=n + 2)  # more right-hand sides than one block of 64
    tw = torch.tensor(w).to(getattr(torch, dtype))
    close(LA.solve(T(w, dtype), T(b, dtype)), torch.linalg.solve(tw, torch.tensor(b).to(tw.dtype)).numpy(),
          dtype)
    close(LA.inv(T(w, dtype)), torch.linalg.inv(tw).numpy(), dtype)
    close(LA.det(T(w, dtype)), torch.linalg.det(tw).numpy(), dtype, rtol=1e-3 if dtype == "float32" else 1e-9)
    assert np.isnan(LA.inv_ex(T(a[3:], dtype)).inverse.numpy()).any()
    assert np.isnan(LA.det(T(a[3], dtype)).item())
    assert LA.det(T(a[1], dtype)).item() == 0.0  # the zero column: an exactly zero pivot


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (3, 5), (16, 16), (32, 32), (32, 7), (33, 8)])
def test_small_qr_matches_torch_signs_included(dtype, shape):
    # Sizes up to 32 use ember's geqr2 / org2r loops: Q and R (signs included) as LAPACK's,
    # zero columns (no reflection), tiny and huge scales (dlarfg's rescaling, no overflow in the
    # norms), NaN propagation, and every mode.
    torch = pytest.importorskip("torch")
    m, n = shape
    a = arr(5, m, n, seed=m * 100 + n)
    a[1, :, 0] = 0.0
    a[2] *= 1e-300 if dtype == "float64" else 1e-35
    a[3] *= 1e300 if dtype == "float64" else 1e35
    ta = torch.tensor(a).to(getattr(torch, dtype))
    for mode in ("reduced", "complete", "r"):
        Q, R = LA.qr(T(a[:4], dtype), mode=mode)
        tQ, tR = torch.linalg.qr(ta[:4], mode=mode)
        scale = np.abs(a[:4]).max(axis=(1, 2), keepdims=True)
        scale[scale == 0] = 1
        close(R.double().numpy() / scale, tR.double().numpy() / scale, dtype)
        if mode != "r":
            close(Q, tQ.numpy(), dtype)
    bad = a[4].copy()
    bad[m // 2, n // 2] = np.nan
    Q, R = LA.qr(T(bad, dtype))
    tQ, tR = torch.linalg.qr(torch.tensor(bad).to(ta.dtype))
    assert np.array_equal(np.isnan(R.numpy()), np.isnan(tR.numpy()))
    assert np.array_equal(np.isnan(Q.numpy()), np.isnan(tQ.numpy()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 5, 16, 32, 33])
def test_small_cholesky_matches_torch(dtype, n):
    # Sizes up to 32 use ember's potf2 loop (both triangles): the factor, and the info of a
    # matrix that is not positive definite or holds a NaN.
    torch = pytest.importorskip("torch")
    a = spd(4, n, seed=n)
    a[1, n - 1, n - 1] = -1.0  # fails at the last column
    a[2, 0, 0] = np.nan
    ta = torch.tensor(a).to(getattr(torch, dtype))
    for upper in (False, True):
        L, info = LA.cholesky_ex(T(a, dtype), upper=upper)
        tL, tinfo = torch.linalg.cholesky_ex(ta, upper=upper)
        # (OpenBLAS's potrf, used past 32, does not flag a NaN diagonal as torch does)
        keep = [0, 1, 2, 3] if n <= 32 else [0, 1, 3]
        assert [info.tolist()[i] for i in keep] == [tinfo.tolist()[i] for i in keep]
        close(L[::3], tL[::3].numpy(), dtype)
        close(LA.cholesky(T(a[0], dtype), upper=upper), torch.linalg.cholesky(ta[0], upper=upper).numpy(), dtype)


@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss", "gels"])
def test_lstsq_many_small_problems_threaded(driver):
    # batches of small problems run on ember's threads (one LAPACK call per thread at a time);
    # each solution must equal NumPy's, and one rank-deficient matrix among them must drop the
    # residuals of the whole batch (as PyTorch does) whichever thread met it
    rng = np.random.default_rng(3)
    a = rng.standard_normal((96, 12, 8))
    b = rng.standard_normal((96, 12, 3))
    got = ember.linalg.lstsq(ember.from_numpy(a), ember.from_numpy(b), driver=driver)
    for i in range(0, 96, 7):
        want = np.linalg.lstsq(a[i], b[i], rcond=None)
        np.testing.assert_allclose(got.solution.numpy()[i], want[0], atol=1e-10)
        if driver != "gelsy":
            np.testing.assert_allclose(got.residuals.numpy()[i], want[1], atol=1e-10)
    if driver == "gels":
        return  # gels refuses rank-deficient matrices
    a[50, :, 7] = a[50, :, 6]
    got = ember.linalg.lstsq(ember.from_numpy(a), ember.from_numpy(b), driver=driver)
    assert got.rank.numpy()[50] == 7 and (np.delete(got.rank.numpy(), 50) == 8).all()
    assert got.residuals.numel() == 0
