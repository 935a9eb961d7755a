"""ember.autograd.functional with sparse inputs and sparse gradients, against PyTorch."""

import ember
import numpy as np
import pytest
from ember.autograd.functional import hessian, hvp, jacobian, jvp, vjp

torch = pytest.importorskip("torch")

_A = [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]


def _np(x) -> np.ndarray:
    if hasattr(x, "layout") and x.layout not in (ember.strided, torch.strided):
        x = x.to_dense()
    return np.array(x.tolist())


def test_vjp_sparse_input_gives_sparse_grad_of_its_pattern():
    s_e = ember.tensor(_A).to_sparse()
    s_t = torch.tensor(_A).to_sparse()
    v = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    out_e, g_e = vjp(lambda s: s.to_dense() * 2, s_e, ember.tensor(v))
    out_t, g_t = torch.autograd.functional.vjp(lambda s: s.to_dense() * 2, s_t, torch.tensor(v))
    np.testing.assert_array_equal(_np(out_e), _np(out_t))
    assert g_e.layout is ember.sparse_coo and g_t.layout is torch.sparse_coo
    np.testing.assert_array_equal(_np(g_e), _np(g_t))
    assert g_e._nnz() == g_t._nnz()
    assert not g_e.requires_grad


def test_vjp_sparse_and_dense_inputs_and_csr():
    s_e = ember.tensor(_A).to_sparse_csr()
    x = ember.tensor([1.0, 2.0, 3.0])
    out, (gs, gx) = vjp(lambda s, x: s @ x, (s_e, x), ember.tensor([1.0, -1.0]))
    assert out.tolist() == [7.0, 6.0]
    assert gs.layout is ember.sparse_csr
    np.testing.assert_array_equal(_np(gs), [[1.0, 0.0, 3.0], [0.0, -2.0, 0.0]])
    np.testing.assert_array_equal(_np(gx), [1.0, -3.0, 2.0])


def test_vjp_sparse_embedding_gradient_matches_torch():
    w = np.random.default_rng(0).standard_normal((5, 3))
    idx = [1, 3, 1]
    v = np.ones((3, 3))
    _, g_e = vjp(lambda w: ember.nn.functional.embedding(ember.tensor(idx), w, sparse=True),
                 ember.tensor(w.tolist()), ember.tensor(v.tolist()))
    _, g_t = torch.autograd.functional.vjp(
        lambda w: torch.nn.functional.embedding(torch.tensor(idx), w, sparse=True),
        torch.tensor(w), torch.tensor(v))
    assert g_e.layout is ember.sparse_coo and g_t.layout is torch.sparse_coo
    np.testing.assert_allclose(_np(g_e), _np(g_t))


def test_jacobian_and_hessian_of_sparse_embedding_are_dense():
    w = ember.tensor(np.random.default_rng(1).standard_normal((4, 2)).tolist())
    idx = ember.tensor([1, 1, 2])

    def f(w):
        return ember.nn.functional.embedding(idx, w, sparse=True).sum(0)

    j = jacobian(f, w)
    dense = jacobian(lambda w: ember.nn.functional.embedding(idx, w).sum(0), w)
    assert isinstance(j, ember.Tensor)
    np.testing.assert_array_equal(_np(j), _np(dense))
    assert j[0, 1, 0].item() == 2.0 and j[1, 2, 1].item() == 1.0

    def g(w):
        return (ember.nn.functional.embedding(idx, w, sparse=True) ** 2).sum()

    h = hessian(g, w)
    ref = hessian(lambda w: (ember.nn.functional.embedding(idx, w) ** 2).sum(), w)
    np.testing.assert_allclose(_np(h), _np(ref))


def test_products_through_sparse_operands_match_torch():
    s_e, s_t = ember.tensor(_A).to_sparse(), torch.tensor(_A).to_sparse()
    x = [1.0, 2.0, 3.0]

    def fe(v):
        return (ember.sparse.mm(s_e, v.unsqueeze(1)) ** 2).sum()

    def ft(v):
        return (torch.sparse.mm(s_t, v.unsqueeze(1)) ** 2).sum()

    for fn_e, fn_t, args in ((hvp, torch.autograd.functional.hvp, (x, [1.0, 0.0, -1.0])),):
        r_e = fn_e(fe, ember.tensor(args[0]), ember.tensor(args[1]))
        r_t = fn_t(ft, torch.tensor(args[0]), torch.tensor(args[1]))
        for a, b in zip(r_e, r_t):
            np.testing.assert_allclose(_np(a), _np(b))
    j_e = jacobian(lambda v: ember.sparse.mm(s_e, v.unsqueeze(1)).squeeze(1), ember.tensor(x))
    np.testing.assert_array_equal(_np(j_e), _A)
    _, jv = jvp(lambda v: s_e @ v, ember.tensor(x), ember.tensor([1.0, 0.0, 0.0]))
    assert jv.tolist() == [1.0, 0.0]


def test_other_functions_refuse_sparse_inputs():
    s = ember.tensor(_A).to_sparse()
    for fn in (lambda: jacobian(lambda s: s.to_dense(), s),
               lambda: jvp(lambda s: s.to_dense(), s, s),
               lambda: hessian(lambda s: s.to_dense().sum(), s)):
        with pytest.raises(NotImplementedError, match="sparse inputs are not supported"):
            fn()
