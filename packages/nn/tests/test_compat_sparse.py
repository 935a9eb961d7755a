"""A PyTorch-style GCN on a sparse adjacency (compat_programs/sparse_gcn.py: sparse_coo_tensor,
coalesce, CSR, torch.sparse.mm, 20 Adam steps, nn.Embedding(sparse=True) with SGD and
SparseAdam, torch.save of a sparse tensor) run unchanged on torch and on ember through the
import shim, compared line by line."""

from __future__ import annotations

import pytest
from test_compat_programs import _close_text, _on_both, _results

pytest.importorskip("torch")


def test_sparse_gcn_tracks_torch(tmp_path, capsys):
    ref, got = _on_both("sparse_gcn.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.7 * first and acc > 0.8
    assert "spmm == dense mm: True, csr == coo: True" in got
    assert "SGD: grad layout ember.sparse_coo nnz 8" in got
    assert "saved and loaded: ember.sparse_coo equal True" in got


def test_sparse_gat_tracks_torch(tmp_path, capsys):
    """compat_programs/sparse_gat.py: sparse.softmax attention, cat/stack/sum/index_select of
    sparse tensors, dense + sparse, sparse embedding grads through a hook, autograd.grad, SGD
    with momentum and Adagrad."""
    ref, got = _on_both("sparse_gat.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=2e-4, atol=2e-5)
    first, last, _ = _results(got)
    assert last < first
    assert "hook saw 10 sparse grads, first ember.sparse_coo nnz 60" in got
    assert "manual update equal: True" in got
