"""nn.Embedding(sparse=True) / F.embedding(sparse=True): the weight's gradient is a sparse COO
tensor as in PyTorch (one entry per looked-up index, padding_idx left out, accumulated over
backward calls), and SGD, Adagrad and SparseAdam apply it as PyTorch does; Adam refuses it."""

from __future__ import annotations

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

W = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
IDS = [[1, 2, 1], [0, 7, 2]]


def embeddings(padding_idx=None):
    out = []
    for lib in (ember, torch):
        e = lib.nn.Embedding(8, 3, padding_idx=padding_idx, sparse=True)
        with lib.no_grad():
            e.weight.copy_(lib.tensor(W))
        out.append(e)
    return out


def backward(e, lib, ids=IDS, scale=1.0):
    out = e(lib.tensor(ids))
    (out * scale * lib.arange(out.numel(), dtype=lib.float32).reshape(out.shape)).sum().backward()


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_sparse_grad_matches_torch(padding_idx):
    ee, te = embeddings(padding_idx)
    backward(ee, ember)
    backward(te, torch)
    g, tg = ee.weight.grad, te.weight.grad
    assert g.layout is ember.sparse_coo and g.is_sparse and not g.is_coalesced()
    assert g._indices().tolist() == tg._indices().tolist()
    np.testing.assert_allclose(g._values().numpy(), tg._values().numpy())
    backward(ee, ember, scale=0.5)  # a second backward accumulates (uncoalesced)
    backward(te, torch, scale=0.5)
    assert ee.weight.grad._nnz() == te.weight.grad._nnz()
    np.testing.assert_allclose(ee.weight.grad.to_dense().numpy(),
                               te.weight.grad.to_dense().numpy())


def test_functional_and_dense_mix():
    w = ember.nn.Parameter(ember.tensor(W))
    out = ember.nn.functional.embedding(ember.tensor([3, 3]), w, sparse=True)
    (out.sum() + (w * 2).sum()).backward()  # the weight also used densely: a dense sum
    expect = np.full((8, 3), 2.0, np.float32)
    expect[3] += 2.0
    g = w.grad
    assert isinstance(g, ember.Tensor)
    np.testing.assert_allclose(g.numpy(), expect)
    with pytest.raises(RuntimeError, match="scale_grad_by_freq"):
        ember.nn.functional.embedding(ember.tensor([1]), w, scale_grad_by_freq=True,
                                      sparse=True).sum().backward()
    with ember.no_grad():  # no gradient needed: the plain embedding
        assert ember.nn.functional.embedding(ember.tensor([1]), w, sparse=True).shape == (1, 3)


@pytest.mark.parametrize("name, kwargs", [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("Adagrad", {"lr": 0.1}),
    ("SparseAdam", {"lr": 0.05}),
])
def test_optimizers_match_torch(name, kwargs):
    ee, te = embeddings()
    oe = getattr(ember.optim, name)(ee.parameters(), **kwargs)
    ot = getattr(torch.optim, name)(te.parameters(), **kwargs)
    r = np.random.default_rng(1)
    for step in range(4):
        ids = r.integers(0, 8, size=(2, 3)).tolist()
        for e, lib, o in ((ee, ember, oe), (te, torch, ot)):
            o.zero_grad()
            backward(e, lib, ids, scale=1.0 / (step + 1))
            o.step()
    np.testing.assert_allclose(ee.weight.detach().numpy(), te.weight.detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_zero_grad_and_refusals():
    ee, _ = embeddings()
    backward(ee, ember)
    opt = ember.optim.SGD(ee.parameters(), lr=0.1)
    opt.zero_grad(set_to_none=False)
    assert ee.weight.grad.layout is ember.sparse_coo and ee.weight.grad._nnz() == 0
    opt.zero_grad()
    assert ee.weight.grad is None
    backward(ee, ember)
    with pytest.raises(RuntimeError, match="Adam does not support sparse gradients, please "
                       "consider SparseAdam"):
        ember.optim.Adam(ee.parameters()).step()
    lin = ember.nn.Linear(2, 2)
    lin(ember.ones(1, 2)).sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        ember.optim.SparseAdam(lin.parameters()).step()
    # A weight holding a sparse grad checks a newly assigned one. (Tensor.grad of any other
    # tensor stays the C++ property, which takes dense grads only: a sparse one is a TypeError.)
    w = ee.weight
    with pytest.raises(RuntimeError, match="different size"):
        w.grad = ember.sparse_coo_tensor([[0]], ember.ones(1, 2), (8, 2))
    fresh = ember.nn.Parameter(ember.ones(8, 3))
    fresh.grad = ember.sparse_coo_tensor([[0]], ember.ones(1, 3), (8, 3))
    assert fresh.grad.is_sparse and fresh.grad._nnz() == 1


BAG_CASES = [
    dict(x=[1, 2, 4, 1, 0], off=[0, 2], mode="sum"),
    dict(x=[1, 2, 4, 1, 0], off=[0, 2], mode="mean"),
    dict(x=[1, 2, 4, 1, 0], off=[0, 2, 5], mode="mean", include_last_offset=True),
    dict(x=[[1, 2], [4, 1]], off=None, mode="mean", padding_idx=1),
    dict(x=[1, 2, 4, 1, 0], off=[0, 2, 2], mode="mean"),  # an empty bag
    dict(x=[1, 2, 4, 1, 0], off=[0, 2], mode="sum", padding_idx=1, psw=True),
]


@pytest.mark.parametrize("case", BAG_CASES, ids=lambda c: str(sorted(c.items())))
def test_embedding_bag_sparse_grad_matches_torch(case):
    res = []
    for lib in (ember, torch):
        w = lib.nn.Parameter(lib.tensor(W))
        psw = lib.arange(5.0).requires_grad_() if case.get("psw") else None
        off = None if case["off"] is None else lib.tensor(case["off"])
        out = lib.nn.functional.embedding_bag(
            lib.tensor(case["x"]), w, off, mode=case["mode"], sparse=True,
            padding_idx=case.get("padding_idx"), per_sample_weights=psw,
            include_last_offset=case.get("include_last_offset", False))
        (out * lib.arange(out.numel(), dtype=lib.float32).reshape(out.shape)).sum().backward()
        res.append((out.detach().numpy(), w.grad, psw))
    (eo, eg, ep), (to, tg, tp) = res
    np.testing.assert_allclose(eo, to, rtol=1e-6)
    assert eg.layout is ember.sparse_coo
    assert eg._indices().tolist() == tg._indices().tolist()
    np.testing.assert_allclose(eg._values().numpy(), tg._values().numpy(), rtol=1e-6)
    if ep is not None:
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-6)


def test_embedding_bag_module_and_max_mode():
    bag = ember.nn.EmbeddingBag(10, 3, mode="sum", sparse=True)
    bag(ember.tensor([[1, 2], [3, 3]])).sum().backward()
    assert bag.weight.grad.layout is ember.sparse_coo and bag.weight.grad._nnz() == 4
    with pytest.raises(ValueError, match="max mode does not support sparse weights"):
        ember.nn.EmbeddingBag(10, 3, mode="max", sparse=True)(ember.tensor([[1, 2]]))


def test_sparse_buffer_moves_saves_and_loads(tmp_path):
    class GraphModel(ember.nn.Module):
        def __init__(self, scale: float = 1.0) -> None:
            super().__init__()
            self.register_buffer("adj", ember.eye(3).to_sparse() * scale)
            self.lin = ember.nn.Linear(3, 2)

        def forward(self, x):
            return ember.sparse.mm(self.adj, self.lin(x))

    m = GraphModel(2.0).double()
    assert m.adj.dtype is ember.float64 and m.adj.layout is ember.sparse_coo
    assert m(ember.ones(3, 3, dtype=ember.float64)).shape == (3, 2)
    ember.save(m.state_dict(), tmp_path / "m.pt")
    m2 = GraphModel()
    m2.load_state_dict(ember.load(tmp_path / "m.pt"))
    assert m2.adj.layout is ember.sparse_coo and m2.adj.dtype is ember.float32
    assert m2.adj.to_dense().tolist()[0] == [2.0, 0.0, 0.0]
    with pytest.raises(TypeError, match="cannot assign 'list'"):
        m2.adj = [1.0]
