"""BSR / BSC tensors and the ``*_like`` factories of sparse tensors, compared with PyTorch."""

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _dense(seed: int = 0, m: int = 4, n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n))
    a[0:2, 2:4] = 0  # a whole zero block
    a[0, 0] = 0  # a zero inside a kept block
    return a


def _e(a: np.ndarray) -> ember.Tensor:
    return ember.tensor(a.tolist(), dtype=ember.float64)


def _t(a: np.ndarray) -> "torch.Tensor":
    return torch.tensor(a, dtype=torch.float64)


def _np(t) -> np.ndarray:
    return np.array(t.detach().tolist() if hasattr(t, "detach") else t.tolist())


@pytest.mark.parametrize("blocksize", [(2, 2), (1, 2), (2, 3), (4, 1)])
def test_dense_to_bsr_arrays_match_torch(blocksize):
    a = _dense()
    e, t = _e(a).to_sparse_bsr(blocksize), _t(a).to_sparse_bsr(blocksize)
    assert e.layout is ember.sparse_bsr and str(e.layout) == "ember.sparse_bsr"
    assert e.crow_indices().tolist() == t.crow_indices().tolist()
    assert e.col_indices().tolist() == t.col_indices().tolist()
    np.testing.assert_array_equal(_np(e.values()), t.values().numpy())
    assert e._nnz() == t._nnz() and tuple(e.shape) == tuple(t.shape)
    assert (e.sparse_dim(), e.dense_dim()) == (t.sparse_dim(), t.dense_dim())
    np.testing.assert_array_equal(_np(e.to_dense()), a)


@pytest.mark.parametrize("blocksize", [(2, 2), (1, 2), (2, 3)])
def test_dense_to_bsc_arrays_match_torch(blocksize):
    a = _dense(1)
    e, t = _e(a).to_sparse_bsc(blocksize), _t(a).to_sparse_bsc(blocksize)
    assert e.layout is ember.sparse_bsc
    assert e.ccol_indices().tolist() == t.ccol_indices().tolist()
    assert e.row_indices().tolist() == t.row_indices().tolist()
    np.testing.assert_array_equal(_np(e.values()), t.values().numpy())
    np.testing.assert_array_equal(_np(e.to_dense()), a)
    with pytest.raises(RuntimeError, match="crow_indices"):
        e.crow_indices()


def test_to_sparse_layout_blocksize_and_from_sparse():
    a = _dense(2)
    e = _e(a).to_sparse(layout=ember.sparse_bsr, blocksize=(1, 2))
    t = _t(a).to_sparse(layout=torch.sparse_bsr, blocksize=(1, 2))
    assert e.col_indices().tolist() == t.col_indices().tolist()
    for src_e, src_t in ((_e(a).to_sparse(), _t(a).to_sparse()),
                         (_e(a).to_sparse_csr(), _t(a).to_sparse_csr())):
        b_e, b_t = src_e.to_sparse_bsr((2, 2)), src_t.to_sparse_bsr((2, 2))
        assert b_e.crow_indices().tolist() == b_t.crow_indices().tolist()
        assert b_e.col_indices().tolist() == b_t.col_indices().tolist()
        np.testing.assert_array_equal(_np(b_e.values()), b_t.values().numpy())
    b = _e(a).to_sparse_bsr((2, 2))
    assert b.to_sparse_bsr((2, 2)) is b
    np.testing.assert_array_equal(_np(b.to_sparse_bsc((2, 1)).to_dense()), a)


def test_factories_match_torch():
    vals = np.arange(16.0).reshape(2, 2, 4)
    e = ember.sparse_bsr_tensor([0, 1, 2], [0, 1], _e(vals), (4, 8))
    t = torch.sparse_bsr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), _t(vals), (4, 8))
    np.testing.assert_array_equal(_np(e.to_dense()), t.to_dense().numpy())
    e = ember.sparse_bsc_tensor([0, 1, 2], [0, 1], _e(vals))
    t = torch.sparse_bsc_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), _t(vals))
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(_np(e.to_dense()), t.to_dense().numpy())
    c = ember.sparse_compressed_tensor([0, 1, 1], [1], _e(vals[:1]), (4, 8),
                                       layout=ember.sparse_bsr)
    assert c.layout is ember.sparse_bsr and c.to_dense()[0:2, 4:8].sum().item() == 28.0


def test_factory_errors():
    with pytest.raises(RuntimeError, match="divisible by the blocksize"):
        ember.sparse_bsr_tensor([0, 1, 2], [0, 1], ember.ones(2, 2, 2), (5, 4))
    with pytest.raises(RuntimeError, match="col_indices must be in"):
        ember.sparse_bsr_tensor([0, 1, 2], [0, 2], ember.ones(2, 2, 2), (4, 4))
    with pytest.raises(RuntimeError, match="3-D values"):
        ember.sparse_bsr_tensor([0, 1], [0], ember.ones(1, 2), (2, 2))
    with pytest.raises(RuntimeError, match="must be divisible by given blocksize"):
        ember.ones(3, 4).to_sparse_bsr((2, 2))
    with pytest.raises(RuntimeError, match="tuple of size 2"):
        ember.ones(4, 4).to_sparse_bsr((2,))
    with pytest.raises(RuntimeError, match="needs a blocksize"):
        ember.ones(4, 4).to_sparse(layout=ember.sparse_bsc)
    with pytest.raises(RuntimeError, match="2-D"):
        ember.ones(2, 2, 2).to_sparse_bsr((1, 1))


@pytest.mark.parametrize("lay", ["bsr", "bsc"])
@pytest.mark.parametrize("blocksize", [(2, 2), (2, 3)])
def test_products_match_dense_and_grads(lay, blocksize):
    a = _dense(3)
    rng = np.random.default_rng(4)
    d = rng.standard_normal((6, 5))
    left = rng.standard_normal((3, 4))
    s = getattr(_e(a), f"to_sparse_{lay}")(blocksize)
    s.requires_grad_(True)
    de = _e(d).requires_grad_(True)
    out = s @ de
    np.testing.assert_allclose(_np(out), a @ d, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(ember.sparse.mm(s, de)), a @ d, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(ember.mm(s, de)), a @ d, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(ember.addmm(_e(np.ones((4, 5))), s, de, beta=2, alpha=3)),
                               2 + 3 * (a @ d), rtol=1e-12)
    np.testing.assert_allclose(_np(_e(left) @ s), left @ a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(s @ _e(d[:, 0])), a @ d[:, 0], rtol=1e-12, atol=1e-12)
    # Gradients: the dense operand gets S^T G, the blocks get G D^T at each block.
    g = rng.standard_normal((4, 5))
    (out * _e(g)).sum().backward()
    np.testing.assert_allclose(_np(de.grad), a.T @ g, rtol=1e-12, atol=1e-12)
    full = g @ d.T
    sg = s.grad
    assert sg.layout is s.layout
    mask = _np(ember.ones_like(s.detach()).to_dense()) != 0  # the block pattern
    assert mask.sum() == s._nnz() * blocksize[0] * blocksize[1]
    np.testing.assert_allclose(_np(sg.to_dense()), np.where(mask, full, 0), rtol=1e-12,
                               atol=1e-12)


def test_bsr_grad_matches_torch():
    a = _dense(5)
    vals = _t(a).to_sparse_bsr((2, 2)).values()
    d = np.random.default_rng(6).standard_normal((6, 2))
    tv = vals.clone().requires_grad_(True)
    ts = torch.sparse_bsr_tensor(torch.tensor([0, 2, 5]), torch.tensor([0, 2, 0, 1, 2]), tv,
                                 (4, 6))
    (ts @ _t(d)).pow(2).sum().backward()
    ev = _e(vals.numpy()).requires_grad_(True)
    es = ember.sparse_bsr_tensor([0, 2, 5], [0, 2, 0, 1, 2], ev, (4, 6))
    (es @ _e(d)).pow(2).sum().backward()
    np.testing.assert_allclose(_np(ev.grad), tv.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_transpose_coo_and_elementwise():
    a = _dense(7)
    e, t = _e(a).to_sparse_bsr((2, 3)), _t(a).to_sparse_bsr((2, 3))
    et, tt = e.t(), t.t()
    assert et.layout is ember.sparse_bsc and tt.layout is torch.sparse_bsc
    assert et.ccol_indices().tolist() == tt.ccol_indices().tolist()
    assert et.row_indices().tolist() == tt.row_indices().tolist()
    np.testing.assert_array_equal(_np(et.values()), tt.values().numpy())
    np.testing.assert_array_equal(_np(et.to_dense()), a.T)
    assert et.t().layout is ember.sparse_bsr
    c_e, c_t = e.to_sparse_coo(), t.to_sparse_coo()
    assert c_e._nnz() == c_t._nnz()
    np.testing.assert_array_equal(_np(c_e.coalesce().indices()), c_t.coalesce().indices().numpy())
    np.testing.assert_array_equal(_np(c_e.to_dense()), a)
    np.testing.assert_array_equal(_np((e * 2).to_dense()), 2 * a)
    np.testing.assert_array_equal(_np(e.abs().to_dense()), np.abs(a))
    s = e + e
    assert s.layout is ember.sparse_bsr
    np.testing.assert_array_equal(_np(s.to_dense()), 2 * a)
    assert ember.sparse.sum(e).item() == pytest.approx(a.sum())
    assert "layout=ember.sparse_bsr" in repr(e) and "crow_indices=" in repr(e)
    assert "ccol_indices=" in repr(et)


def test_save_load_round_trip(tmp_path):
    a = _dense(8)
    for s in (_e(a).to_sparse_bsr((2, 2)), _e(a).to_sparse_bsc((1, 3))):
        path = tmp_path / "s.pt"
        ember.save(s, path)
        r = ember.load(path)
        assert r.layout is s.layout
        np.testing.assert_array_equal(_np(r.to_dense()), a)


# ---- *_like ------------------------------------------------------------------------------------
_LAYOUTS = {
    "coo": lambda x: x.to_sparse(), "csr": lambda x: x.to_sparse_csr(),
    "csc": lambda x: x.to_sparse_csc(), "bsr": lambda x: x.to_sparse_bsr((1, 1)),
    "bsc": lambda x: x.to_sparse_bsc((1, 1)),
}


@pytest.mark.parametrize("lay", sorted(_LAYOUTS))
def test_zeros_like_empty_like(lay):
    a = _dense(9)
    e, t = _LAYOUTS[lay](_e(a)), _LAYOUTS[lay](_t(a))
    for name in ("zeros_like", "empty_like"):
        r_e = getattr(ember, name)(e, dtype=ember.float32)
        r_t = getattr(torch, name)(t, dtype=torch.float32)
        assert str(r_e.layout).split(".")[-1] == str(r_t.layout).split(".")[-1]
        assert r_e._nnz() == r_t._nnz() and tuple(r_e.shape) == tuple(r_t.shape)
        assert r_e.dtype is ember.float32
        if name == "zeros_like":
            assert r_e.to_dense().abs().sum().item() == 0
            assert tuple(r_e.values().shape) == tuple(r_t.values().shape)
    z = ember.zeros_like(e, layout=ember.strided)
    assert isinstance(z, ember.Tensor) and tuple(z.shape) == a.shape and z.sum().item() == 0
    assert ember.zeros_like(e, requires_grad=True).requires_grad


@pytest.mark.parametrize("lay", sorted(_LAYOUTS))
def test_ones_full_randn_like(lay):
    a = _dense(10)
    e, t = _LAYOUTS[lay](_e(a)), _LAYOUTS[lay](_t(a))
    for name, args in (("ones_like", ()), ("full_like", (2.5,)), ("randn_like", ())):
        try:
            r_t = getattr(torch, name)(t, *args)
        except NotImplementedError:
            with pytest.raises(NotImplementedError, match=name):
                getattr(ember, name)(e, *args)
            continue
        r_e = getattr(ember, name)(e, *args)
        assert r_e.layout is e.layout and r_e._nnz() == r_t._nnz()
        if name != "randn_like":
            np.testing.assert_array_equal(_np(r_e.values()), r_t.values().numpy())


def test_zeros_like_coo_hybrid_and_layout_change():
    h_e = ember.sparse_coo_tensor([[0, 1]], ember.ones(2, 3), (2, 3))
    h_t = torch.sparse_coo_tensor([[0, 1]], torch.ones(2, 3), (2, 3))
    z_e, z_t = ember.zeros_like(h_e), torch.zeros_like(h_t)
    assert (z_e.sparse_dim(), z_e.dense_dim()) == (z_t.sparse_dim(), z_t.dense_dim())
    assert tuple(z_e._values().shape) == tuple(z_t._values().shape)
    assert z_e.is_coalesced() == z_t.is_coalesced()
    s = ember.eye(3).to_sparse()
    c = ember.zeros_like(s, layout=ember.sparse_csr)
    assert c.layout is ember.sparse_csr and c.crow_indices().tolist() == [0, 0, 0, 0]
    with pytest.raises(RuntimeError, match="needs a blocksize"):
        ember.zeros_like(s, layout=ember.sparse_bsr)


def test_load_torch_saved_blocked(tmp_path):
    a = _dense(11)
    path = tmp_path / "t.pt"
    torch.save({"bsr": _t(a).to_sparse_bsr((2, 3)), "bsc": _t(a).to_sparse_bsc((1, 2))}, path)
    loaded = ember.load(path)
    assert loaded["bsr"].layout is ember.sparse_bsr and loaded["bsc"].layout is ember.sparse_bsc
    np.testing.assert_array_equal(_np(loaded["bsr"].to_dense()), a)
    np.testing.assert_array_equal(_np(loaded["bsc"].to_dense()), a)


@pytest.mark.parametrize("lay", ["bsr", "bsc"])
def test_sparse_mask_keeps_the_blocks(lay):
    a = np.arange(24.0).reshape(4, 6)
    m = np.ones((4, 6))
    m[0:2, 2:4] = 0
    mask_e = getattr(_e(m), f"to_sparse_{lay}")((2, 2))
    mask_t = getattr(_t(m), f"to_sparse_{lay}")((2, 2))
    r_e, r_t = _e(a).sparse_mask(mask_e), _t(a).sparse_mask(mask_t)
    assert r_e.layout is mask_e.layout and r_e._nnz() == r_t._nnz()
    np.testing.assert_array_equal(_np(r_e.values()), r_t.values().numpy())
    np.testing.assert_array_equal(_np(r_e.to_dense()), r_t.to_dense().numpy())


def test_zeros_like_into_the_other_blocked_layout():
    a = _dense(12)
    e = _e(a).to_sparse_bsr((2, 3))
    z = ember.zeros_like(e, layout=ember.sparse_bsc)
    t = torch.zeros_like(_t(a).to_sparse_bsr((2, 3)), layout=torch.sparse_bsc)
    assert z.layout is ember.sparse_bsc and z._nnz() == 0
    assert z.ccol_indices().tolist() == t.ccol_indices().tolist()
    assert tuple(z.values().shape) == tuple(t.values().shape)
    assert z.to_dense().abs().sum().item() == 0


@pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr"])
def test_linear_with_a_sparse_weight_like_torch(layout):
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F

    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    x = rng.standard_normal((2, 5, 6)).astype(np.float32)

    def sparse(t):
        return {"coo": t.to_sparse, "csr": t.to_sparse_csr, "csc": t.to_sparse_csc,
                "bsr": lambda: t.to_sparse_bsr((2, 2))}[layout]()

    got = F.linear(ember.tensor(x), sparse(ember.tensor(w)), ember.ones(4))
    want = torch.nn.functional.linear(torch.tensor(x), sparse(torch.tensor(w)), torch.ones(4))
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    xe = ember.tensor(x[0], requires_grad=True)
    F.linear(xe, sparse(ember.tensor(w))).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), np.broadcast_to(w.sum(0), (5, 6)), rtol=1e-5)
