"""Where code meets sparse tensors without ``isinstance(S, ember.Tensor)`` (False by decision, see
ember/sparse.py): is_tensor, module buffers and dtype moves, deepcopy, testing.assert_close,
default_collate (refuses like PyTorch) and a DataLoader with a custom collate_fn and a worker."""

from __future__ import annotations

import copy

import ember
import pytest
from ember.data import DataLoader, default_collate, default_convert

torch = pytest.importorskip("torch")


def coo(scale=1.0):
    return ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0 * scale, 4.0, 5.0], (2, 3))


def test_is_tensor_but_not_an_instance():
    s = coo()
    assert ember.is_tensor(s) and not isinstance(s, ember.Tensor)
    assert torch.is_tensor(torch.eye(2).to_sparse())


def test_module_buffer_moves_and_copies():
    m = ember.nn.Module()
    m.register_buffer("adj", coo())
    m.double()
    assert m.adj.layout is ember.sparse_coo and m.adj.dtype is ember.float64
    m.float()
    assert m.adj.dtype is ember.float32
    c = copy.deepcopy(m)
    assert c.adj is not m.adj
    ember.testing.assert_close(c.adj, m.adj)
    sd = m.state_dict()
    assert sd["adj"].is_sparse


def test_assert_close_on_sparse():
    s = coo()
    ember.testing.assert_close(s, ember.sparse_coo_tensor([[1, 0, 1], [0, 2, 2]], [4.0, 3.0, 5.0],
                                                          (2, 3)))  # order does not matter
    with pytest.raises(AssertionError, match="not close"):
        ember.testing.assert_close(s, coo(1.01))
    with pytest.raises(AssertionError, match="number of specified values"):
        ember.testing.assert_close(s, ember.sparse_coo_tensor([[0], [2]], [3.0], (2, 3)))
    with pytest.raises(AssertionError, match="layout"):
        ember.testing.assert_close(s, s.to_dense())
    c = s.to_sparse_csr()
    ember.testing.assert_close(c, c.clone())
    with pytest.raises(AssertionError, match="crow_indices"):
        ember.testing.assert_close(c, ember.eye(2, 3).to_sparse_csr())
    with pytest.raises(AssertionError, match="col_indices"):
        ember.testing.assert_close(c, ember.tensor([[0.0, 3.0, 0.0], [4.0, 5.0, 0.0]])
                                   .to_sparse_csr())


def test_default_collate_refuses_like_torch():
    from torch.utils.data import default_collate as tcollate

    with pytest.raises(RuntimeError, match="sparse tensors are not currently supported"):
        tcollate([torch.eye(2).to_sparse()] * 2)
    with pytest.raises(RuntimeError, match=r"sparse tensors \(ember.sparse_coo at sample\['a'\]\)"):
        default_collate([{"a": coo()}, {"a": coo(2)}])
    assert default_convert(coo()).is_sparse


def test_dataloader_with_custom_collate_and_worker():
    data = [coo(i) for i in range(1, 5)]
    dl = DataLoader(data, batch_size=2, collate_fn=ember.stack)
    batches = list(dl)
    assert [b.shape for b in batches] == [(2, 2, 3), (2, 2, 3)]
    ember.testing.assert_close(batches[1].to_dense()[0], data[2].to_dense())
    dl = DataLoader(data, batch_size=None, num_workers=1)
    got = list(dl)
    assert all(g.is_sparse for g in got)
    ember.testing.assert_close(got[3], data[3])
