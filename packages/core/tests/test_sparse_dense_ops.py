"""Dense functions and Tensor methods given sparse operands (ember.add(D, S), D.add_(S),
ember.cat([S, S]), ember.sum(S, 1), ...), compared with PyTorch; refusals name the op and the
layout; dense calls are unchanged."""

from __future__ import annotations

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")

IDX = [[0, 1, 1, 2], [2, 0, 2, 1]]
VALS = [3.0, 4.0, 5.0, -1.0]


def pair(lib):
    s = lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VALS), (3, 3))
    d = lib.arange(9, dtype=lib.float32).reshape(3, 3)
    return s, d


CASES = {
    "add(D, S)": lambda lib, s, d: lib.add(d, s),
    "add(D, S, alpha)": lambda lib, s, d: lib.add(d, s, alpha=2),
    "sub(D, S)": lambda lib, s, d: lib.sub(d, s),
    "add(S, S)": lambda lib, s, d: lib.add(s, s),
    "D + S": lambda lib, s, d: d + s,
    "D - S": lambda lib, s, d: d - s,
    "D.add(S)": lambda lib, s, d: d.add(s),
    "D.clone().add_(S, alpha)": lambda lib, s, d: d.clone().add_(s, alpha=-0.5),
    "D.clone().sub_(S)": lambda lib, s, d: d.clone().sub_(s),
    "D += S": lambda lib, s, d: _iadd(d.clone(), s),
    "S * 2": lambda lib, s, d: s * 2,
    "mul(D, S)": lambda lib, s, d: lib.mul(d, s),
    "mul(S, D)": lambda lib, s, d: lib.mul(s, d),
    "D * S": lambda lib, s, d: d * s,
    "S * D[0] (broadcast)": lambda lib, s, d: s * d[0],
    "S / 2": lambda lib, s, d: s / 2,
    "sum(S)": lambda lib, s, d: lib.sum(s),
    "sum(S, 1)": lambda lib, s, d: lib.sum(s, 1),
    "sum(S, (0, 1))": lambda lib, s, d: lib.sum(s, (0, 1)),
    "sparse.sum(S, 0)": lambda lib, s, d: lib.sparse.sum(s, 0),
    "cat dim 0": lambda lib, s, d: lib.cat([s, s * 2], 0),
    "cat dim 1": lambda lib, s, d: lib.cat([s, s], 1),
    "stack dim 0": lambda lib, s, d: lib.stack([s, s * 3]),
    "stack dim 1": lambda lib, s, d: lib.stack([s, s * 3], 1),
    "index_select dim 0": lambda lib, s, d: lib.index_select(s, 0, lib.tensor([2, 0, 2])),
    "S.index_select dim 1": lambda lib, s, d: s.index_select(1, lib.tensor([1])),
    "mm": lambda lib, s, d: lib.mm(s, d),
    "matmul": lambda lib, s, d: lib.matmul(s, d),
    "addmm": lambda lib, s, d: lib.addmm(d, s, d),
    "sparse.addmm": lambda lib, s, d: lib.sparse.addmm(d, s, d, beta=0.5, alpha=2),
    "mv": lambda lib, s, d: lib.mv(s, d[0]),
    "S @ vec": lambda lib, s, d: s @ d[1],
    "neg": lambda lib, s, d: lib.neg(s),
    "abs": lambda lib, s, d: lib.abs(s),
    "transpose": lambda lib, s, d: lib.transpose(s, 0, 1),
    "t": lambda lib, s, d: lib.t(s),
    "clone": lambda lib, s, d: lib.clone(s),
    "unsqueeze 0": lambda lib, s, d: lib.unsqueeze(s, 0),
    "unsqueeze 2": lambda lib, s, d: lib.unsqueeze(s, 2),
    "sparse.softmax": lambda lib, s, d: lib.sparse.softmax(s, 1),
    "sparse.log_softmax": lambda lib, s, d: lib.sparse.log_softmax(s, 0),
}


def _iadd(d, s):
    d += s
    return d


@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(case):
    es, ed = pair(ember)
    ts, td = pair(torch)
    got = CASES[case](ember, es, ed)
    want = CASES[case](torch, ts, td)
    g_sparse = isinstance(got, ember.sparse.SparseTensor)
    assert g_sparse == (want.layout != torch.strided), case
    g = (got.to_dense() if g_sparse else got).detach().numpy()
    w = (want.to_dense() if g_sparse else want).detach().numpy()
    assert g.shape == w.shape
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_in_place_dense_add_keeps_aliases_and_grads():
    s, _ = pair(ember)
    d = ember.zeros(3, 3)
    view = d[1]
    d += s
    assert view.tolist() == [4.0, 0.0, 5.0]  # in place: views see it
    w = ember.zeros(3, 3, requires_grad=True)
    vals = ember.tensor(VALS, requires_grad=True)
    sv = ember.sparse_coo_tensor(ember.tensor(IDX), vals, (3, 3))
    (ember.add(w, sv, alpha=2) ** 2).sum().backward()
    np.testing.assert_allclose(vals.grad.numpy(), 8 * np.array(VALS))
    np.testing.assert_allclose(w.grad.numpy(), 4 * ember.sparse_coo_tensor(
        ember.tensor(IDX), ember.tensor(VALS), (3, 3)).to_dense().numpy())


def test_refusals_name_op_and_layout():
    s, d = pair(ember)
    csr = s.to_sparse_csr()
    for fn in (lambda: ember.exp(s), lambda: ember.mean(s), lambda: ember.narrow(s, 0, 0, 1),
               lambda: ember.equal(s, s), lambda: ember.bmm(s, s), lambda: ember.softmax(s, 0)):
        with pytest.raises(NotImplementedError, match=r"\w+: not supported for ember.sparse_coo"):
            fn()
    with pytest.raises(NotImplementedError, match="reshape: not supported for ember.sparse_csr"):
        ember.reshape(csr, (9,))
    with pytest.raises(RuntimeError, match="dense tensor was found at position 1"):
        ember.cat([s, d])
    with pytest.raises(NotImplementedError, match="cat: ember.sparse_csr tensors"):
        ember.cat([csr, csr])
    with pytest.raises(NotImplementedError, match="along the dense dim"):
        h = ember.sparse_coo_tensor([[0, 2]], ember.ones(2, 3), (4, 3))
        ember.cat([h, h], 1)
    with pytest.raises(RuntimeError, match="must have the same size"):
        ember.add(ember.ones(2, 2), s)
    with pytest.raises(RuntimeError, match="broadcast"):
        s * ember.ones(2)
    with pytest.raises(NotImplementedError, match="div: only a sparse tensor divided"):
        ember.div(d, s)
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.zeros(3, 3, dtype=ember.int64).add_(s)


def test_dense_calls_unchanged():
    a = ember.ones(2)
    assert ember.add(a, 1).tolist() == [2.0, 2.0]
    assert ember.add(a, a, alpha=2).tolist() == [3.0, 3.0]
    assert ember.cat([a, a]).shape == (4,)
    with pytest.raises(TypeError, match=r"add\(\) received an invalid combination of arguments"):
        ember.add(a, "x")  # no sparse operand: the binding's TypeError, as before
    with pytest.raises(TypeError, match=r"add_\(\) received an invalid combination of arguments"):
        a.add_("x")
    with pytest.raises(NotImplementedError, match="copy_: not supported for ember.sparse_coo"):
        ember.zeros(2).copy_(ember.eye(2).to_sparse())  # PyTorch refuses too
    with pytest.raises(RuntimeError, match="relu"):
        ember._C._add_sparse_fallback(ember.nn.functional, "relu", False)


def test_blocked_layouts_need_a_blocksize():
    s, d = pair(ember)
    assert s.layout != ember.sparse_bsr and str(ember.sparse_bsc) == "ember.sparse_bsc"
    for fn in (lambda: d.to_sparse(layout=ember.sparse_bsr),
               lambda: s.to_sparse(layout=ember.sparse_bsr)):
        with pytest.raises(RuntimeError, match="needs a blocksize"):
            fn()
    with pytest.raises(TypeError, match="blocksize"):
        d.to_sparse_bsc()
    with pytest.raises(RuntimeError, match="3-D values"):
        ember.sparse_bsr_tensor([0, 1], [0], [1.0])


CSC_CASES = {
    "arrays": lambda lib, c, d: (c.ccol_indices(), c.row_indices(), c.values()),
    "from COO": lambda lib, c, d: (d.to_sparse().to_sparse_csc().row_indices(),),
    "from CSR": lambda lib, c, d: (d.to_sparse_csr().to_sparse_csc().ccol_indices(),),
    "to_sparse(layout)": lambda lib, c, d: (d.to_sparse(layout=lib.sparse_csc).values(),),
    "to_dense": lambda lib, c, d: (c.to_dense(),),
    "to COO": lambda lib, c, d: (c.to_sparse_coo().to_dense(),),
    "to CSR": lambda lib, c, d: (c.to_sparse_csr().crow_indices(), c.to_sparse_csr().col_indices()),
    "t() is CSR": lambda lib, c, d: (c.t().crow_indices(), c.t().to_dense()),
    "CSR t() is CSC": lambda lib, c, d: (d.to_sparse_csr().t().ccol_indices(),),
    "mm": lambda lib, c, d: (lib.mm(c, lib.arange(6.0).reshape(3, 2)),),
    "dense @ csc": lambda lib, c, d: (lib.arange(8.0).reshape(2, 4) @ c,),
    "sparse.mm": lambda lib, c, d: (lib.sparse.mm(c, lib.ones(3, 1)),),
    "csc * 2": lambda lib, c, d: ((c * 2).to_dense(),),
    "add(D, csc)": lambda lib, c, d: (lib.add(d, c),),
    "csc + csc": lambda lib, c, d: ((c + c).to_dense(),),
    "factory": lambda lib, c, d: (lib.sparse_csc_tensor(lib.tensor([0, 1, 2]), lib.tensor([1, 0]),
                                                        lib.tensor([3.0, 2.0]), (2, 2)).to_dense(),),
}


@pytest.mark.parametrize("case", list(CSC_CASES))
def test_csc_matches_torch(case):
    out = []
    for lib in (ember, torch):
        d = lib.tensor([[0.0, 2.0, 0.0], [3.0, 4.0, 0.0], [0.0, 0.0, 5.0], [1.0, 0.0, 0.0]])
        c = d.to_sparse_csc()
        assert c.layout == lib.sparse_csc and not c.is_sparse and not c.is_sparse_csr
        out.append([t.detach().numpy() for t in CSC_CASES[case](lib, c, d)])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b)


def test_csc_values_gradient_and_save(tmp_path):
    grads = []
    for lib in (ember, torch):
        d = lib.tensor([[0.0, 2.0, 0.0], [3.0, 4.0, 0.0], [0.0, 0.0, 5.0], [1.0, 0.0, 0.0]])
        c = d.to_sparse_csc()
        v = c.values().clone().requires_grad_(True)
        s = lib.sparse_csc_tensor(c.ccol_indices(), c.row_indices(), v, c.shape)
        (lib.mm(s, lib.arange(6.0).reshape(3, 2)) ** 2).sum().backward()
        grads.append(v.grad.numpy())
        lib.save(c, tmp_path / f"{lib.__name__}.pt")
    np.testing.assert_allclose(grads[0], grads[1])
    for name in ("ember", "torch"):
        back = ember.load(tmp_path / f"{name}.pt")
        assert back.layout is ember.sparse_csc
        np.testing.assert_allclose(back.to_dense().numpy(), [[0, 2, 0], [3, 4, 0], [0, 0, 5],
                                                             [1, 0, 0]])
    with pytest.raises(RuntimeError, match="row_indices must be in"):
        ember.sparse_csc_tensor([0, 1, 3], [0, 5, 1], [1.0, 2.0, 3.0], (2, 2))
    with pytest.raises(RuntimeError, match="ccol_indices must have 3 elements"):
        ember.sparse_csc_tensor([0, 3], [0, 1, 1], [1.0, 2.0, 3.0], (2, 2))
    c = ember.eye(3).to_sparse_csc()
    ember.testing.assert_close(c, c.clone())
    assert "ccol_indices=" in repr(c) and "layout=ember.sparse_csc" in repr(c)


def test_sparse_in_place_add_matches_torch():
    out = []
    for lib in (ember, torch):
        s, d = pair(lib)
        t = s * 2
        s.add_(t)
        s -= t * 0.5
        s += t
        out.append(s.to_dense().numpy())
        with pytest.raises(RuntimeError):
            s.add_(d)  # sparse += dense: refused by both
        with pytest.raises(RuntimeError):
            s += d
    np.testing.assert_allclose(out[0], out[1])
