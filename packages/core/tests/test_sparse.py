"""Sparse COO and CSR tensors (ember.sparse) against PyTorch: construction, coalescing,
conversions, printing, element-wise ops and sums, the products over CSR rows with their
gradients (gradcheck in float64), softmax, saving, and the errors of what is not supported."""

from __future__ import annotations

import io
import warnings

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

IDX = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 3]]  # (0, 2) twice: uncoalesced
VALS = [3.0, 4.0, 5.0, 1.0, -2.0]
SIZE = (3, 4)


def pair(indices=IDX, values=VALS, size=SIZE, dtype="float32"):
    e = ember.sparse_coo_tensor(ember.tensor(indices), ember.tensor(values,
                                dtype=getattr(ember, dtype)), size)
    t = torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values,
                                dtype=getattr(torch, dtype)), size)
    return e, t


def same(e, t, rtol=1e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(e.detach().numpy()), t.detach().numpy(), rtol=rtol,
                               atol=atol)


def rand(*shape, seed=0, dtype="float32"):
    a = np.random.default_rng(seed).normal(size=shape).astype(dtype)
    return ember.tensor(a), torch.tensor(a)


def random_sparse(m, n, nnz, seed=0, dtype="float32", dup=True):
    r = np.random.default_rng(seed)
    rows, cols = r.integers(0, m, nnz), r.integers(0, n, nnz)
    if dup:  # repeat a few entries
        rows, cols = np.concatenate([rows, rows[:3]]), np.concatenate([cols, cols[:3]])
    vals = r.normal(size=rows.shape[0]).astype(dtype)
    return [rows.tolist(), cols.tolist()], vals.tolist()


# ---- construction, attributes, printing -----------------------------------------------------
def test_attributes_match_torch():
    e, t = pair()
    assert str(e.layout) == "ember.sparse_coo" and repr(ember.sparse_csr) == "ember.sparse_csr"
    assert ember.strided is not ember.sparse_coo
    assert e.is_sparse and not e.is_sparse_csr and not ember.ones(1).is_sparse_csr
    assert tuple(e.shape) == tuple(t.shape) and e.size(1) == t.size(1) and e.ndim == 2
    assert e.dtype is ember.float32 and e.device.type == "cpu"
    assert e._nnz() == t._nnz() == 5 and e.sparse_dim() == 2 and e.dense_dim() == 0
    assert e.is_coalesced() == t.is_coalesced() is False
    assert e.numel() == 12
    assert not isinstance(e, ember.Tensor)


def test_size_inferred_and_hybrid():
    e = ember.sparse_coo_tensor([[0, 3], [1, 0]], [1.0, 2.0])
    t = torch.sparse_coo_tensor([[0, 3], [1, 0]], [1.0, 2.0])
    assert tuple(e.shape) == tuple(t.shape) == (4, 2)
    eh = ember.sparse_coo_tensor([[0, 2]], ember.ones(2, 3), (4, 3))
    th = torch.sparse_coo_tensor([[0, 2]], torch.ones(2, 3), (4, 3))
    assert eh.sparse_dim() == 1 and eh.dense_dim() == 1
    same(eh.to_dense(), th.to_dense())


def test_repr_matches_torch():
    e, t = pair()
    assert repr(e) == repr(t).replace("torch.", "ember.")
    assert repr(e.coalesce()) == repr(t.coalesce()).replace("torch.", "ember.")
    eh = ember.sparse_coo_tensor([[0, 1]], ember.ones(2, 2), (3, 2))
    th = torch.sparse_coo_tensor([[0, 1]], torch.ones(2, 2), (3, 2))
    assert repr(eh) == repr(th).replace("torch.", "ember.")
    assert "layout=ember.sparse_csr" in repr(e.to_sparse_csr())
    assert "requires_grad=True" in repr(pair()[0].requires_grad_())


def test_repr_of_empty_and_non_default_dtypes_matches_torch():
    # The parts print without a dtype and, when empty, with their size; the dtype is the
    # sparse tensor's own suffix unless it is a default one.
    def cases(M):
        return [M.sparse_coo_tensor(M.zeros(2, 0, dtype=M.long), M.zeros(0), (2, 3)),
                M.sparse_coo_tensor(M.tensor([[0], [1]]), M.tensor([1.5], dtype=M.float64),
                                    (2, 3)),
                M.sparse_coo_tensor(M.tensor([[0], [1]]), M.tensor([3], dtype=M.int32), (2, 3)),
                M.zeros(2, 2, dtype=M.float64).to_sparse_csr()]

    got = [repr(x) for x in cases(ember)]
    assert got[0] == ("tensor(indices=tensor([], size=(2, 0)),\n"
                      "       values=tensor([], size=(0,)),\n"
                      "       size=(2, 3), nnz=0, layout=ember.sparse_coo)")
    assert "nnz=1, dtype=ember.float64, layout=" in got[1] and "values=tensor([1.5000])" in got[1]
    assert "dtype=ember.int32" in got[2] and "values=tensor([3])," in got[2]
    assert "col_indices=tensor([], size=(0,))" in got[3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = [repr(x).replace("torch.", "ember.") for x in cases(torch)]
    assert got == ref


def test_factory_options():
    e = ember.sparse_coo_tensor(IDX, VALS, SIZE, dtype=ember.float64, requires_grad=True)
    assert e.dtype is ember.float64 and e.requires_grad and e.is_leaf
    v = ember.tensor(VALS)
    s = ember.sparse_coo_tensor(IDX, v, SIZE, requires_grad=True)
    assert s.requires_grad and not v.requires_grad  # the caller's values are left alone
    c = ember.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (2,), is_coalesced=True)
    assert c.is_coalesced() and c.indices().tolist() == [[0, 1]]


# ---- coalesce and conversions ---------------------------------------------------------------
def test_coalesce_matches_torch():
    e, t = pair()
    ec, tc = e.coalesce(), t.coalesce()
    assert ec.is_coalesced() and ec.indices().tolist() == tc.indices().tolist()
    same(ec.values(), tc.values())
    assert ec.coalesce() is ec
    with pytest.raises(RuntimeError, match="uncoalesced"):
        e.indices()
    assert e._indices().tolist() == IDX


def test_dense_round_trips():
    e, t = pair()
    same(e.to_dense(), t.to_dense())
    d = ember.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0]])
    s, ts = d.to_sparse(), torch.tensor(d.tolist()).to_sparse()
    assert s.indices().tolist() == ts.indices().tolist() and s.is_coalesced()
    same(s.values(), ts.values())
    s1, ts1 = d.to_sparse(1), torch.tensor(d.tolist()).to_sparse(1)
    assert s1.indices().tolist() == ts1.indices().tolist()
    same(s1.values(), ts1.values())
    same(s1.to_dense(), ts1.to_dense())


def test_csr_matches_torch():
    e, t = pair()
    ec, tc = e.to_sparse_csr(), t.to_sparse_csr()
    assert ec.layout is ember.sparse_csr and ec.is_sparse_csr and not ec.is_sparse
    assert ec.crow_indices().tolist() == tc.crow_indices().tolist()
    assert ec.col_indices().tolist() == tc.col_indices().tolist()
    same(ec.values(), tc.values())
    same(ec.to_dense(), tc.to_dense())
    back = ec.to_sparse_coo()
    assert back.indices().tolist() == tc.to_sparse_coo().indices().tolist()
    d = ember.tensor([[0.0, 1.0], [2.0, 3.0]])
    same(d.to_sparse_csr().to_dense(), torch.tensor(d.tolist()))
    assert d.to_sparse(layout=ember.sparse_csr).layout is ember.sparse_csr
    m = ember.sparse_csr_tensor([0, 1, 1, 3], [2, 0, 1], [1.0, 2.0, 3.0], (3, 3))
    tm = torch.sparse_csr_tensor([0, 1, 1, 3], [2, 0, 1], [1.0, 2.0, 3.0], (3, 3))
    same(m.to_dense(), tm.to_dense())


# ---- element-wise ops and sums --------------------------------------------------------------
def test_elementwise_match_torch():
    e, t = pair()
    same((-e).to_dense(), (-t).to_dense())
    same((e * 2.5).to_dense(), (t * 2.5).to_dense())
    same((2 * e).to_dense(), (2 * t).to_dense())
    same((e / 2).to_dense(), (t / 2).to_dense())
    de, dt = rand(*SIZE)
    prod, tprod = e * de, t * dt
    assert prod.layout is ember.sparse_coo
    same(prod.to_dense(), tprod.to_dense())
    e2, t2 = pair([[2, 0], [1, 1]], [7.0, 1.0])
    s, ts = e + e2, t + t2
    assert s.layout is ember.sparse_coo
    same(s.to_dense(), ts.to_dense())
    same((e - e2).to_dense(), (t - t2).to_dense())
    same(e + de, dt + t)  # torch refuses sparse + dense; ember gives the dense sum
    same(de + e, dt + t)
    same(de - e, dt - t)
    same((e * e2).to_dense(), (t * t2).to_dense())


def test_transpose_and_sums_match_torch():
    e, t = pair()
    same(e.t().to_dense(), t.t().to_dense())
    assert e.t()._indices().tolist() == t.t()._indices().tolist()
    same(e.transpose(0, 1).to_dense(), t.transpose(0, 1).to_dense())
    same(e.sum(), t.sum())
    for dim in (0, 1, -1, (0, 1)):
        r, tr = ember.sparse.sum(e, dim), torch.sparse.sum(t, dim)
        if isinstance(tr, torch.Tensor) and tr.layout == torch.strided:
            same(r, tr)
        else:
            assert r.layout is ember.sparse_coo
            same(r.to_dense(), tr.to_dense())
    eh = ember.sparse_coo_tensor([[0, 2]], ember.ones(2, 3), (4, 3))
    th = torch.sparse_coo_tensor([[0, 2]], torch.ones(2, 3), (4, 3))
    same(ember.sparse.sum(eh, 1).to_dense(), torch.sparse.sum(th, 1).to_dense())
    same(ember.sparse.sum(eh, 0), torch.sparse.sum(th, 0))


def test_clone_detach_to():
    e, _ = pair()
    c = e.clone()
    assert c._values() is not e._values() and c._indices().tolist() == IDX
    e.requires_grad_()
    assert not e.detach().requires_grad
    d = e.to(ember.float64)
    assert d.dtype is ember.float64 and d.double().dtype is ember.float64
    assert e.cpu().device.type == "cpu"


# ---- products -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_mm_matches_torch(dtype, layout):
    ind, vals = random_sparse(30, 20, 60, seed=1, dtype=dtype)
    e, t = pair(ind, vals, (30, 20), dtype)
    if layout == "csr":
        e, t = e.to_sparse_csr(), t.to_sparse_csr()
    de, dt = rand(20, 7, seed=2, dtype=dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    ref = torch.sparse.mm(t, dt)
    same(ember.sparse.mm(e, de), ref, tol, tol)
    same(e @ de, ref, tol, tol)
    same(ember.mm(e, de), ref, tol, tol)
    same(ember.matmul(e, de), ref, tol, tol)
    same(ember.spmm(e, de), ref, tol, tol)
    same(e.mm(de), ref, tol, tol)
    ve, vt = rand(20, seed=3, dtype=dtype)
    same(e @ ve, t @ vt, tol, tol)
    le, lt = rand(5, 30, seed=4, dtype=dtype)
    same(le @ e, lt @ t.to_dense(), tol, tol)
    same(ember.mm(le, e), lt @ t.to_dense(), tol, tol)


def test_mm_empty_rows_and_no_entries():
    e = ember.sparse_coo_tensor(ember.zeros(2, 0, dtype=ember.int64), ember.zeros(0), (3, 4))
    assert ember.sparse.mm(e, ember.ones(4, 2)).tolist() == [[0.0, 0.0]] * 3
    e2 = ember.sparse_coo_tensor([[2], [1]], [5.0], (3, 4))
    assert ember.sparse.mm(e2, ember.ones(4, 1)).tolist() == [[0.0], [0.0], [5.0]]


def test_sparse_times_sparse_and_addmm():
    e, t = pair()
    e2, t2 = pair([[0, 3, 2], [1, 0, 2]], [1.0, 2.0, 3.0], (4, 3))
    r = ember.sparse.mm(e, e2)
    assert r.layout is ember.sparse_coo
    same(r.to_dense(), torch.sparse.mm(t, t2).to_dense())
    be, bt = rand(3, 5, seed=5)
    de, dt = rand(4, 5, seed=6)
    same(ember.sparse.addmm(be, e, de, beta=0.5, alpha=2.0),
         torch.sparse.addmm(bt, t, dt, beta=0.5, alpha=2.0), 1e-5, 1e-5)
    same(ember.addmm(be, e, de), torch.addmm(bt, t, dt), 1e-5, 1e-5)
    # the dense forms still reach the dense ops
    same(ember.addmm(be, e.to_dense(), de), torch.addmm(bt, t.to_dense(), dt), 1e-5, 1e-5)
    out = ember.empty(4, 4)
    ember.mm(de, de.t(), out=out)
    same(out, dt @ dt.t(), 1e-5, 1e-5)


@pytest.mark.parametrize("coalesced", [True, False])
def test_mm_gradients_match_torch(coalesced):
    ind, vals = random_sparse(12, 9, 25, seed=7, dup=not coalesced)
    ve = ember.tensor(vals, requires_grad=True)
    vt = torch.tensor(vals, requires_grad=True)
    se = ember.sparse_coo_tensor(ind, ve, (12, 9))
    st = torch.sparse_coo_tensor(ind, vt, (12, 9))
    if coalesced:
        se, st = se.coalesce(), st.coalesce()
    de, dt = rand(9, 4, seed=8)
    de.requires_grad_()
    dt.requires_grad_()
    ge, gt = rand(12, 4, seed=9)
    (ember.sparse.mm(se, de) * ge).sum().backward()
    (torch.sparse.mm(st, dt) * gt).sum().backward()
    same(de.grad, dt.grad, 1e-5, 1e-5)
    same(ve.grad, vt.grad, 1e-5, 1e-5)


def test_leaf_sparse_grad_has_the_pattern():
    ind, vals = random_sparse(6, 5, 10, seed=10, dup=False)
    se = ember.sparse_coo_tensor(ind, vals, (6, 5)).coalesce().requires_grad_()
    st = torch.sparse_coo_tensor(ind, vals, (6, 5)).coalesce().requires_grad_()
    de, dt = rand(5, 3, seed=11)
    ember.sparse.mm(se, de).sum().backward()
    torch.sparse.mm(st, dt).sum().backward()
    assert se.grad.layout is ember.sparse_coo
    same(se.grad.to_dense(), st.grad.to_dense(), 1e-5, 1e-5)
    dense_grad = de.new_ones(6, 3) @ de.t()  # d(sum(S @ D))/dS, dense
    mask = se.detach().to_dense() != 0
    same(se.grad.to_dense(), torch.tensor((dense_grad * mask).tolist()), 1e-5, 1e-5)


def test_gradcheck_mm_float64():
    ind, vals = random_sparse(7, 6, 12, seed=12, dtype="float64")
    v = ember.tensor(vals, dtype=ember.float64, requires_grad=True)
    d = ember.tensor(np.random.default_rng(13).normal(size=(6, 3)), requires_grad=True)

    def f(values, dense):
        return ember.sparse.mm(ember.sparse_coo_tensor(ind, values, (7, 6)), dense)

    def f_csr(values, dense):
        s = ember.sparse_coo_tensor(ind, values, (7, 6)).coalesce().to_sparse_csr()
        return s @ dense

    def f_left(values, dense):
        return dense.t() @ ember.sparse_coo_tensor(ind, values, (7, 6)).t().t()

    assert ember.autograd.gradcheck(f, (v, d))
    assert ember.autograd.gradcheck(f_csr, (v, d))
    assert ember.autograd.gradgradcheck(f, (v, d))
    d2 = ember.tensor(np.random.default_rng(14).normal(size=(3, 7)), requires_grad=True)
    assert ember.autograd.gradcheck(lambda values, dense: dense @ ember.sparse_coo_tensor(
        ind, values, (7, 6)), (v, d2))
    del f_left


def test_to_dense_and_coalesce_are_differentiable():
    ve = ember.tensor(VALS, requires_grad=True)
    vt = torch.tensor(VALS, requires_grad=True)
    ge, gt = rand(*SIZE, seed=15)
    (ember.sparse_coo_tensor(IDX, ve, SIZE).coalesce().to_dense() * ge).sum().backward()
    (torch.sparse_coo_tensor(IDX, vt, SIZE).coalesce().to_dense() * gt).sum().backward()
    same(ve.grad, vt.grad)


# ---- softmax --------------------------------------------------------------------------------
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_matches_torch(log, dim):
    ind, vals = random_sparse(6, 5, 12, seed=16, dup=False)
    ve = ember.tensor(vals, requires_grad=True)
    vt = torch.tensor(vals, requires_grad=True)
    se = ember.sparse_coo_tensor(ind, ve, (6, 5)).coalesce()
    st = torch.sparse_coo_tensor(ind, vt, (6, 5)).coalesce()
    fe = ember.sparse.log_softmax if log else ember.sparse.softmax
    ft = torch.sparse.log_softmax if log else torch.sparse.softmax
    re, rt = fe(se, dim), ft(st, dim)
    assert re.indices().tolist() == rt.coalesce().indices().tolist()
    same(re.values(), rt.coalesce().values(), 1e-5, 1e-5)
    we, wt = rand(re._nnz(), seed=17)
    (re.values() * we).sum().backward()
    (rt.coalesce().values() * wt).sum().backward()
    same(ve.grad, vt.grad, 1e-5, 1e-5)


# ---- saving ---------------------------------------------------------------------------------
def test_save_load_round_trip(tmp_path):
    e, _ = pair()
    buf = io.BytesIO()
    ember.save({"coo": e, "csr": e.to_sparse_csr(), "c": e.coalesce()}, buf)
    buf.seek(0)
    back = ember.load(buf)  # weights_only: sparse tensors are allowed
    assert back["coo"]._indices().tolist() == IDX and not back["coo"].is_coalesced()
    assert back["c"].is_coalesced()
    same(back["csr"].to_dense(), pair()[1].to_dense())
    path = tmp_path / "t.pt"
    _, t = pair()
    torch.save({"coo": t, "csr": t.coalesce().to_sparse_csr()}, path)
    loaded = ember.load(path)
    assert loaded["coo"].layout is ember.sparse_coo and loaded["csr"].layout is ember.sparse_csr
    same(loaded["coo"].to_dense(), t.to_dense())
    same(loaded["csr"].to_dense(), t.to_dense())


# ---- errors ---------------------------------------------------------------------------------
def test_errors():
    e, _ = pair()
    with pytest.raises(NotImplementedError, match="sparse_coo: op exp not supported"):
        e.exp()
    with pytest.raises(NotImplementedError, match="op getitem not supported"):
        e[0]
    with pytest.raises(NotImplementedError, match="exp: not supported for ember.sparse_coo"):
        ember.exp(e)  # the dense op refuses it instead of computing on something else
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        ember.sparse.mm(e, ember.ones(3, 2))
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.sparse.mm(e, ember.ones(4, 2, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="size is inconsistent"):
        ember.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,))
    with pytest.raises(RuntimeError, match="negative index"):
        ember.sparse_coo_tensor([[0, -1]], [1.0, 2.0], (3,))
    with pytest.raises(RuntimeError, match="nnz"):
        ember.sparse_coo_tensor([[0, 1]], [1.0], (3,))
    with pytest.raises(RuntimeError, match="col_indices"):
        ember.sparse_csr_tensor([0, 1, 2], [0, 7], [1.0, 2.0], (2, 3))
    with pytest.raises(RuntimeError, match="crow_indices"):
        ember.sparse_csr_tensor([0, 2, 1], [0, 1], [1.0, 2.0], (2, 3))
    eh = ember.sparse_coo_tensor([[0, 2]], ember.ones(2, 3), (4, 3))
    with pytest.raises(RuntimeError, match="without dense dims"):
        ember.sparse.mm(eh, ember.ones(3, 2))
    with pytest.raises(NotImplementedError, match="adding a number"):
        e + 1
    with pytest.raises(RuntimeError, match="differ"):
        e + ember.sparse_coo_tensor([[0]], [1.0], (5,))
    with pytest.raises(RuntimeError, match="truth value"):
        bool(e)
    with pytest.raises(RuntimeError, match="expected a tensor of layout ember.sparse_csr"):
        e.crow_indices()


def test_kernel_checks():
    crow, col = ember.tensor([0, 1, 2]), ember.tensor([0, 9])
    with pytest.raises(IndexError, match="out of range"):
        ember._C._sparse_csr_mm(crow, col, ember.ones(2), ember.ones(3, 2))
    with pytest.raises(RuntimeError, match="non-decreasing"):
        ember._C._sparse_csr_mm(ember.tensor([0, 2, 1]), ember.tensor([0, 1]), ember.ones(2),
                                ember.ones(3, 2))
    with pytest.raises(RuntimeError, match="one value per column index"):
        ember._C._sparse_csr_mm(crow, ember.tensor([0, 1]), ember.ones(3), ember.ones(3, 2))
    with pytest.raises(TypeError, match="same dtype"):
        ember._C._sparse_csr_sddmm(crow, ember.tensor([0, 1]), ember.ones(2, 2),
                                   ember.ones(3, 2, dtype=ember.float64))


def test_smm_hspmm_sparse_mask_is_tensor():
    e, t = pair()
    de, dt = rand(4, 3, seed=18)
    r, tr = ember.smm(e, de), torch.smm(t, dt)
    assert r.layout is ember.sparse_coo
    same(r.to_dense(), tr.to_dense(), 1e-5, 1e-5)
    h, th = ember.hspmm(e, de), torch.hspmm(t.coalesce(), dt)
    assert (h.sparse_dim(), h.dense_dim()) == (th.sparse_dim(), th.dense_dim())
    assert h.indices().tolist() == th.coalesce().indices().tolist()
    same(h.to_dense(), th.to_dense(), 1e-5, 1e-5)
    me, mt = rand(*SIZE, seed=19)
    m, tm = me.sparse_mask(e), mt.sparse_mask(t.coalesce())
    assert m.indices().tolist() == tm.indices().tolist()
    same(m.values(), tm.values())
    assert ember.is_tensor(e) and ember.is_tensor(me) and not ember.is_tensor([1.0])


def test_mm_over_many_rows_matches_torch():
    # enough rows and entries that the row loop is split over the thread pool
    ind, vals = random_sparse(3000, 400, 30000, seed=20)
    ve, vt = ember.tensor(vals, requires_grad=True), torch.tensor(vals, requires_grad=True)
    se = ember.sparse_coo_tensor(ind, ve, (3000, 400))
    st = torch.sparse_coo_tensor(ind, vt, (3000, 400))
    de, dt = rand(400, 32, seed=21)
    de.requires_grad_()
    dt.requires_grad_()
    re, rt = ember.sparse.mm(se, de), torch.sparse.mm(st, dt)
    same(re, rt, 1e-4, 1e-4)
    ge, gt = rand(3000, 32, seed=22)
    (re * ge).sum().backward()
    (rt * gt).sum().backward()
    same(de.grad, dt.grad, 1e-4, 1e-4)
    same(ve.grad, vt.grad, 1e-4, 1e-4)


def test_unchecked_tensors_never_give_wrong_numbers():
    bad = ember.sparse_coo_tensor([[0, 1], [5, 0]], [1.0, 2.0], (2, 4), check_invariants=False)
    with pytest.raises(RuntimeError, match="must lie in"):
        bad.to_dense()
    with pytest.raises(RuntimeError, match="must lie in"):
        bad.coalesce()
    with pytest.raises(IndexError, match="out of range"):
        ember.sparse.mm(bad, ember.ones(4, 2))
    rows = ember.sparse_coo_tensor([[0, 3], [1, 0]], [1.0, 2.0], (2, 4), check_invariants=False)
    with pytest.raises(RuntimeError, match="row indices outside"):
        ember.sparse.mm(rows, ember.ones(4, 2))
    # a false is_coalesced is caught when checked, and never trusted by the products
    with pytest.raises(RuntimeError, match="not sorted and unique"):
        ember.sparse_coo_tensor([[1, 0], [0, 0]], [1.0, 2.0], (2, 2), is_coalesced=True)
    lie = ember.sparse_coo_tensor([[1, 0], [0, 0]], [1.0, 2.0], (2, 2), is_coalesced=True,
                                  check_invariants=False)
    assert ember.sparse.mm(lie, ember.eye(2)).tolist() == [[2.0, 0.0], [1.0, 0.0]]


def test_scipy_conversion_as_pygcn_writes_it():
    sp = pytest.importorskip("scipy.sparse")
    mx = sp.random(6, 5, density=0.3, format="csr", random_state=0, dtype=np.float32)

    def to_torch(lib, sparse_mx):
        sparse_mx = sparse_mx.tocoo().astype(np.float32)
        indices = lib.from_numpy(np.vstack((sparse_mx.row, sparse_mx.col)).astype(np.int64))
        values = lib.from_numpy(sparse_mx.data)
        return lib.sparse.FloatTensor(indices, values, lib.Size(sparse_mx.shape))

    e, t = to_torch(ember, mx), to_torch(torch, mx)
    assert e.dtype is ember.float32 and e.layout is ember.sparse_coo
    same(e.to_dense(), t.to_dense())
    np.testing.assert_allclose(e.to_dense().numpy(), mx.toarray())
    x = np.ones((5, 2), np.float32)
    same(ember.spmm(e, ember.tensor(x)), torch.spmm(t, torch.tensor(x)), 1e-6, 1e-6)
    empty = ember.sparse.FloatTensor(2, 3)
    assert empty._nnz() == 0 and tuple(empty.shape) == (2, 3)
    assert ember.sparse.DoubleTensor([[0]], [1.0], (2,)).dtype is ember.float64


def test_forward_ad_through_products():
    ind, vals = random_sparse(5, 4, 8, seed=23, dtype="float64")
    v = ember.tensor(vals, dtype=ember.float64)
    d = ember.tensor(np.random.default_rng(24).normal(size=(4, 3)))
    tv = ember.tensor(np.random.default_rng(25).normal(size=len(vals)))
    td = ember.tensor(np.random.default_rng(26).normal(size=(4, 3)))

    def f(values, dense):
        return ember.sparse.mm(ember.sparse_coo_tensor(ind, values, (5, 4)), dense)

    _, tangent = ember.func.jvp(f, (v, d), (tv, td))
    same(tangent, torch.tensor((f(tv, d) + f(v, td)).tolist(), dtype=torch.float64), 1e-12, 1e-12)


@pytest.mark.parametrize("name", ["abs", "sqrt", "tanh", "sin", "expm1", "log1p", "sign",
                                  "square", "relu", "floor", "frac", "erf", "isnan"])
def test_zero_preserving_ops_match_torch(name):
    e, t = pair([[0, 0, 1, 2], [1, 1, 0, 3]], [4.0, 5.0, 9.0, 0.25])  # a duplicate entry
    r, tr = getattr(e, name)(), getattr(t, name)()
    assert r.is_coalesced() and r.layout is ember.sparse_coo
    same(r.to_dense(), tr.to_dense(), 1e-6, 1e-6)
    same((e ** 2).to_dense(), (t ** 2).to_dense())
    with pytest.raises(NotImplementedError, match="positive number"):
        e.pow(0)


@pytest.mark.parametrize("dim", [0, 1])
def test_index_select_matches_torch(dim):
    ve, vt = ember.tensor(VALS, requires_grad=True), torch.tensor(VALS, requires_grad=True)
    se = ember.sparse_coo_tensor(IDX, ve, SIZE)
    st = torch.sparse_coo_tensor(IDX, vt, SIZE)
    sel = [2, 0, 2] if dim == 0 else [3, 2, 2, 1]
    r, tr = se.index_select(dim, ember.tensor(sel)), st.index_select(dim, torch.tensor(sel))
    assert tuple(r.shape) == tuple(tr.shape)
    same(r.to_dense(), tr.to_dense())
    ge, gt = rand(*tuple(tr.shape), seed=27)
    (r.to_dense() * ge).sum().backward()
    # (torch has no backward for a sparse index_select: the same selection of the dense form)
    dense = torch.sparse_coo_tensor(IDX, vt, SIZE).to_dense()
    (dense.index_select(dim, torch.tensor(sel)) * gt).sum().backward()
    same(ve.grad, vt.grad)
    eh = ember.sparse_coo_tensor([[0, 2]], ember.ones(2, 3), (4, 3))
    th = torch.sparse_coo_tensor([[0, 2]], torch.ones(2, 3), (4, 3))
    same(eh.index_select(1, ember.tensor([2, 0])).to_dense(),
         th.index_select(1, torch.tensor([2, 0])).to_dense())
    with pytest.raises(IndexError, match="out of range"):
        se.index_select(dim, ember.tensor([7]))


def test_sampled_addmm_matches_torch():
    e, t = pair()
    ec, tc = e.to_sparse_csr(), t.coalesce().to_sparse_csr()
    ae, at = rand(3, 5, seed=28)
    be, bt = rand(5, 4, seed=29)
    ae.requires_grad_()
    at.requires_grad_()
    r = ember.sparse.sampled_addmm(ec, ae, be, beta=0.5, alpha=2.0)
    tr = torch.sparse.sampled_addmm(tc, at, bt, beta=0.5, alpha=2.0)
    assert r.layout is ember.sparse_csr
    assert r.col_indices().tolist() == tr.col_indices().tolist()
    same(r.values(), tr.values(), 1e-5, 1e-5)
    r.values().sum().backward()
    tr.values().sum().backward()
    same(ae.grad, at.grad, 1e-5, 1e-5)
    with pytest.raises(RuntimeError, match="CSR"):
        ember.sparse.sampled_addmm(e, ae, be)
