"""ember.nested (packages/core/src/ember/nested/): nested tensors of both layouts, compared with
torch.nested on the same data (those tests skip without torch), and gradients checked in
float64 against central differences and against the per-component dense computation."""

from __future__ import annotations

import ember
import ember.nn.functional as F
import numpy as np
import pytest


def _torch():
    return pytest.importorskip("torch")


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _arrays(lengths=(2, 3, 1), tail=(4,), seed=0):
    rng = _rng(seed)
    return [rng.standard_normal((n, *tail)) for n in lengths]


def _layouts(torch, layout: str):
    return (ember.jagged, torch.jagged) if layout == "jagged" else (ember.strided, torch.strided)


def _pair(arrays, layout="jagged", requires_grad=False):
    """The same nested tensor in ember and torch (float64)."""
    torch = _torch()
    el, tl = _layouts(torch, layout)
    e = ember.nested.nested_tensor([ember.tensor(a) for a in arrays], layout=el,
                                   requires_grad=requires_grad)
    t = torch.nested.nested_tensor([torch.tensor(a) for a in arrays], layout=tl,
                                   requires_grad=requires_grad)
    return e, t


def _np(x):
    return x.detach().numpy()


def _shape(x):
    """A jagged shape with the ragged entry as "j" (ember's RaggedDim, torch's SymInt)."""
    return [s if isinstance(s, int) else "j" for s in x.shape]


def _same(e, t, tol=1e-10):
    """ember result e equals torch result t: nestedness, layout shape, each component."""
    assert e.is_nested == t.is_nested
    if not t.is_nested:
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_allclose(_np(e), _np(t), rtol=tol, atol=tol)
        return
    assert e.dim() == t.dim()
    if e.layout is ember.jagged:
        assert _shape(e) == _shape(t)
    ec, tc = e.unbind(), t.unbind()
    assert len(ec) == len(tc)
    for a, b in zip(ec, tc):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


# ---- construction and metadata -----------------------------------------------------------------
@pytest.mark.parametrize("layout", ["jagged", "strided"])
def test_nested_tensor_metadata_matches_torch(layout):
    e, t = _pair(_arrays(), layout)
    _same(e, t)
    assert isinstance(e, ember.Tensor) and e.is_nested and not ember.ones(2).is_nested
    assert e.layout is (ember.jagged if layout == "jagged" else ember.strided)
    assert (e.dim(), e.ndim, e.dtype, e.device.type) == (3, 3, ember.float64, "cpu")
    assert (e.size(0), e.size(2), e.size(-1), len(e.unbind())) == (3, 4, 4, 3)
    assert e.numel() == t.numel() == 24
    if layout == "strided":
        with pytest.raises(RuntimeError, match="irregular"):
            e.size(1)
        with pytest.raises(RuntimeError, match="irregular"):
            t.size(1)
    else:  # as PyTorch: the ragged size, as in shape
        assert e.size(1) == e.shape[1] and repr(e.size(1)) == repr(e.shape[1])
    if layout == "jagged":
        assert repr(e.shape) == f"ember.Size([3, j{e._nt_rid}, 4])"
        assert e.offsets().tolist() == t.offsets().tolist() == [0, 2, 5, 6]
        assert e.lengths() is None and t.lengths() is None
        np.testing.assert_allclose(_np(e.values()), _np(t.values()))
        assert e.is_contiguous()
        assert "NestedTensor(size=(3, j" in repr(e)
    else:
        with pytest.raises(RuntimeError):
            e.shape
        assert repr(e).startswith("nested_tensor([")


def test_nested_tensor_from_lists_and_dtypes():
    torch = _torch()
    e = ember.nested.nested_tensor([[1, 2], [3]], layout=ember.jagged)
    t = torch.nested.nested_tensor([[1, 2], [3]], layout=torch.jagged)
    assert e.dtype == ember.int64 and str(t.dtype) == "torch.int64"
    _same(e, t)
    e2 = ember.nested.nested_tensor([[1, 2], [3]], dtype=ember.float32)
    assert e2.dtype == ember.float32 and [c.tolist() for c in e2.unbind()] == [[1.0, 2.0], [3.0]]
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.nested.nested_tensor([ember.ones(2), ember.ones(3, dtype=ember.int64)])
    with pytest.raises(RuntimeError, match="empty"):
        ember.nested.nested_tensor([], layout=ember.jagged)
    with pytest.raises(RuntimeError, match="zero-dim"):
        ember.nested.nested_tensor([ember.tensor(1.0)], layout=ember.jagged)
    with pytest.raises(RuntimeError, match="same dimension"):
        ember.nested.nested_tensor([ember.ones(2), ember.ones(2, 2)])
    with pytest.raises(RuntimeError, match="unsupported"):
        ember.nested.nested_tensor([ember.ones(2)], layout=ember.layout("sparse_coo"))
    assert ember.nested.nested_tensor([]).dim() == 1  # strided: empty is allowed, as in torch


def test_jagged_ragged_dim_is_the_one_that_differs():
    rng = _rng(1)
    arrays = [rng.standard_normal((2, n)) for n in (3, 5)]
    e, t = _pair(arrays)
    _same(e, t)
    assert e._ragged_idx == t._ragged_idx == 2
    with pytest.raises(RuntimeError, match="one ragged dimension"):
        ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3, 4)], layout=ember.jagged)
    # a strided nested tensor may differ in several dims
    s = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3, 4)])
    assert [tuple(c.shape) for c in s.unbind()] == [(2, 3), (3, 4)]
    with pytest.raises(RuntimeError, match="irregular"):
        s.size(2)


def test_requires_grad_leaf_and_grad():
    torch = _torch()
    for layout in ("jagged", "strided"):
        e, t = _pair(_arrays(), layout, requires_grad=True)
        assert (e.requires_grad, e.is_leaf, e.grad_fn) == (True, True, None)
        assert (t.requires_grad, t.is_leaf) == (True, True)
        (e * e).sum().backward()
        (t * t).sum().backward() if layout == "jagged" else torch.nested.to_padded_tensor(
            t * t, 0.0).sum().backward()
        assert e.grad.is_nested
        _same(e.grad, t.grad)
    d = ember.nested.nested_tensor([ember.ones(2)], layout=ember.jagged)
    assert not d.requires_grad
    assert d.requires_grad_() is d and d.requires_grad and d.values().requires_grad


def test_nested_tensor_from_jagged_matches_torch():
    torch = _torch()
    rng = _rng(2)
    v = rng.standard_normal((7, 3))
    off = [0, 2, 7]
    e = ember.nested.nested_tensor_from_jagged(ember.tensor(v), ember.tensor(off))
    t = torch.nested.nested_tensor_from_jagged(torch.tensor(v), torch.tensor(off))
    _same(e, t)
    e = ember.nested.nested_tensor_from_jagged(ember.tensor(v), lengths=ember.tensor([2, 5]))
    t = torch.nested.nested_tensor_from_jagged(torch.tensor(v), lengths=torch.tensor([2, 5]))
    _same(e, t)
    assert e.offsets().tolist() == t.offsets().tolist() == off
    # offsets and lengths: holes, not contiguous
    e = ember.nested.nested_tensor_from_jagged(ember.tensor(v), ember.tensor(off),
                                               lengths=ember.tensor([1, 3]))
    t = torch.nested.nested_tensor_from_jagged(torch.tensor(v), torch.tensor(off),
                                               lengths=torch.tensor([1, 3]))
    _same(e, t)
    assert e.is_contiguous() is t.is_contiguous() is False
    assert e.lengths().tolist() == [1, 3]
    _same(e.contiguous(), t.contiguous())
    assert e.contiguous().is_contiguous()
    _same(e * 2 + 1, t * 2 + 1)
    # jagged_dim=2: values (3, sum, 4)
    w = rng.standard_normal((3, 7, 4))
    e = ember.nested.nested_tensor_from_jagged(ember.tensor(w), ember.tensor(off), jagged_dim=2)
    t = torch.nested.nested_tensor_from_jagged(torch.tensor(w), torch.tensor(off), jagged_dim=2)
    _same(e, t)
    assert tuple(e.values().shape) == tuple(t.values().shape) == (3, 7, 4)
    with pytest.raises(RuntimeError, match="offsets or lengths"):
        ember.nested.nested_tensor_from_jagged(ember.tensor(v))
    with pytest.raises(RuntimeError, match="outside"):
        ember.nested.nested_tensor_from_jagged(ember.tensor(v), ember.tensor([0, 2, 9]))


def test_from_jagged_is_a_view_that_autograd_follows():
    v = ember.tensor(_rng(3).standard_normal((5, 2)), requires_grad=True)
    nt = ember.nested.nested_tensor_from_jagged(v, ember.tensor([0, 3, 5]))
    assert nt.grad_fn is not None and not nt.is_leaf
    (nt.cos() * ember.tensor([1.0, 2.0])).sum().backward()
    expected = -np.sin(_np(v)) * np.array([1.0, 2.0])
    np.testing.assert_allclose(_np(v.grad), expected, rtol=1e-12)


def test_narrow_matches_torch():
    torch = _torch()
    base = _rng(4).standard_normal((3, 5, 2))
    starts, lens = [0, 1, 2], [2, 3, 1]
    e = ember.nested.narrow(ember.tensor(base), 1, ember.tensor(starts), ember.tensor(lens),
                            layout=ember.jagged)
    t = torch.nested.narrow(torch.tensor(base), 1, torch.tensor(starts), torch.tensor(lens),
                            layout=torch.jagged)
    _same(e, t)
    assert e.offsets().tolist() == t.offsets().tolist()
    assert e.lengths().tolist() == t.lengths().tolist()
    assert e.is_contiguous() is t.is_contiguous() is False
    e = ember.nested.narrow(ember.tensor(base), 1, 1, 2, layout=ember.jagged)
    t = torch.nested.narrow(torch.tensor(base), 1, 1, 2, layout=torch.jagged)
    _same(e, t)
    assert e.offsets().tolist() == t.offsets().tolist()
    # strided: copies of the same windows
    s = ember.nested.narrow(ember.tensor(base), 1, ember.tensor(starts), ember.tensor(lens))
    assert s.layout is ember.strided
    for i, c in enumerate(s.unbind()):
        np.testing.assert_array_equal(_np(c), base[i, starts[i]:starts[i] + lens[i]])
    with pytest.raises(RuntimeError, match="dim=1"):
        ember.nested.narrow(ember.tensor(base), 2, 0, 1, layout=ember.jagged)
    with pytest.raises(RuntimeError, match="exceeds"):
        ember.nested.narrow(ember.tensor(base), 1, 4, 2, layout=ember.jagged)


def test_masked_select_matches_torch():
    torch = _torch()
    x = np.arange(12.0).reshape(2, 3, 2)
    m = (np.arange(12).reshape(2, 3, 2) % 3) == 0
    e = ember.nested.masked_select(ember.tensor(x), ember.tensor(m))
    t = torch.nested.masked_select(torch.tensor(x), torch.tensor(m))
    _same(e, t)
    assert e.offsets().tolist() == t.offsets().tolist()
    m2 = np.array([[True, False, True], [False, False, True]])
    e = ember.nested.masked_select(ember.tensor(x[:, :, 0]), ember.tensor(m2))
    t = torch.nested.masked_select(torch.tensor(x[:, :, 0]), torch.tensor(m2))
    _same(e, t)


@pytest.mark.parametrize("layout", ["jagged", "strided"])
def test_to_padded_tensor_matches_torch(layout):
    torch = _torch()
    e, t = _pair(_arrays(), layout)
    _same(ember.nested.to_padded_tensor(e, 0.5), torch.nested.to_padded_tensor(t, 0.5))
    # output_size pads every dimension, as documented (and as torch's strided layout does;
    # torch 2.13's jagged layout takes only the ragged entry of it)
    ts = torch.nested.nested_tensor(list(t.unbind()))
    _same(e.to_padded_tensor(-1.0, (4, 5, 6)), torch.nested.to_padded_tensor(ts, -1.0, (4, 5, 6)))
    with pytest.raises(RuntimeError, match="Truncation"):
        ember.nested.to_padded_tensor(e, 0.0, (3, 2, 4))
    s = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(1, 4)])
    ts = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(1, 4)])
    _same(ember.nested.to_padded_tensor(s, 7.0), torch.nested.to_padded_tensor(ts, 7.0))


def test_to_padded_tensor_gradient_reaches_components():
    a = ember.ones(2, 3, requires_grad=True)
    b = ember.ones(1, 3, requires_grad=True)
    nt = ember.nested.as_nested_tensor([a, b], layout=ember.jagged)
    w = ember.arange(12.0).reshape(2, 2, 3)
    (ember.nested.to_padded_tensor(nt, 0.0) * w).sum().backward()
    np.testing.assert_array_equal(_np(a.grad), _np(w[0]))
    np.testing.assert_array_equal(_np(b.grad), _np(w[1, :1]))


@pytest.mark.parametrize("layout", ["jagged", "strided"])
def test_as_nested_tensor_keeps_autograd_like_torch(layout):
    torch = _torch()
    el, tl = _layouts(torch, layout)
    arrays = _arrays(tail=(3,), seed=5)
    ea = [ember.tensor(a, requires_grad=True) for a in arrays]
    ta = [torch.tensor(a, requires_grad=True) for a in arrays]
    e = ember.nested.as_nested_tensor(ea, layout=el)
    t = torch.nested.as_nested_tensor(ta, layout=tl)
    assert not e.is_leaf and e.requires_grad
    _same(e, t)
    rng = _rng(6)
    g = [rng.standard_normal(a.shape) for a in arrays]
    e.backward(ember.nested.nested_tensor([ember.tensor(x) for x in g], layout=el))
    tg = torch.nested.nested_tensor([torch.tensor(x) for x in g], layout=tl)
    if layout == "jagged":  # torch wants the output's own ragged size
        tg = torch.nested.nested_tensor_from_jagged(tg.values(), t.offsets())
    t.backward(tg)
    for x, y, z in zip(ea, ta, g):
        np.testing.assert_allclose(_np(x.grad), _np(y.grad))
        np.testing.assert_allclose(_np(x.grad), z)


def test_as_nested_tensor_from_dense_and_nested():
    torch = _torch()
    x = _rng(7).standard_normal((3, 4, 5))
    for el, tl in ((ember.jagged, torch.jagged), (ember.strided, torch.strided)):
        e = ember.nested.as_nested_tensor(ember.tensor(x), layout=el)
        t = torch.nested.as_nested_tensor(torch.tensor(x), layout=tl)
        _same(e, t)
        assert ember.nested.as_nested_tensor(e) is e
        assert ember.nested.as_nested_tensor(e, dtype=ember.float32).dtype == ember.float32
    with pytest.raises(TypeError):
        ember.nested.as_nested_tensor([1.0, 2.0])


# ---- elementwise ---------------------------------------------------------------------------------
_UNARY = [
    ("cos", lambda fw, x: x.cos()), ("exp", lambda fw, x: fw.exp(x)), ("neg", lambda fw, x: -x),
    ("abs", lambda fw, x: x.abs()), ("tanh", lambda fw, x: fw.tanh(x)),
    ("sigmoid", lambda fw, x: x.sigmoid()), ("pow", lambda fw, x: x ** 2),
    ("rsub", lambda fw, x: 1 - x), ("rdiv", lambda fw, x: 1 / (x.abs() + 1)),
    ("relu", lambda fw, x: fw.nn.functional.relu(x)),
    ("gelu", lambda fw, x: fw.nn.functional.gelu(x)),
    ("gelu_tanh", lambda fw, x: fw.nn.functional.gelu(x, approximate="tanh")),
    ("silu", lambda fw, x: fw.nn.functional.silu(x)),
    ("leaky_relu", lambda fw, x: fw.nn.functional.leaky_relu(x, 0.1)),
    ("clamp", lambda fw, x: x.clamp(-0.5, 0.5)), ("gt", lambda fw, x: x > 0),
    ("float32", lambda fw, x: x.to(fw.float32)), ("detach", lambda fw, x: x.detach()),
    ("clone", lambda fw, x: x.clone()), ("masked_fill", lambda fw, x: x.masked_fill(x > 0, 0.0)),
]


@pytest.mark.parametrize("name,fn", _UNARY, ids=[u[0] for u in _UNARY])
def test_unary_matches_torch_jagged(name, fn):
    torch = _torch()
    e, t = _pair(_arrays())
    _same(fn(ember, e), fn(torch, t), tol=1e-6 if name == "float32" else 1e-10)


@pytest.mark.parametrize("name,fn", _UNARY[:3] + _UNARY[9:11] + _UNARY[12:13],
                         ids=[u[0] for u in _UNARY[:3] + _UNARY[9:11] + _UNARY[12:13]])
def test_unary_on_strided_layout(name, fn):
    e, _ = _pair(_arrays(), "strided")
    out = fn(ember, e)
    assert out.is_nested and out.layout is ember.strided
    for c, x in zip(out.unbind(), e.unbind()):
        np.testing.assert_allclose(_np(c), _np(fn(ember, x)))


def test_binary_with_nested_scalars_and_dense_matches_torch():
    torch = _torch()
    arrays = _arrays()
    e, t = _pair(arrays)
    other = [a * 2 - 1 for a in arrays]
    e2 = ember.nested.nested_tensor_from_jagged(ember.tensor(np.concatenate(other)), e.offsets())
    t2 = torch.nested.nested_tensor_from_jagged(torch.tensor(np.concatenate(other)), t.offsets())
    _same(e + e2, t + t2)
    _same(e * e2 - e2 / 3, t * t2 - t2 / 3)
    _same(ember.maximum(e, e2), torch.maximum(t, t2))
    _same(ember.where(e > 0, e, e2), torch.where(t > 0, t, t2))
    _same(e * 3 + 0.5, t * 3 + 0.5)
    _same(e + ember.tensor(2.0, dtype=ember.float64), t + torch.tensor(2.0, dtype=torch.float64))
    rng = _rng(8)
    for shape in [(4,), (1, 1, 4), (3, 1, 4), (3, 1, 1), (1, 4)]:
        d = rng.standard_normal(shape)
        _same(e + ember.tensor(d), t + torch.tensor(d))
        _same(e * ember.tensor(d), t * torch.tensor(d))
    # separately built nested tensors of the same lengths: the same structure for ember
    e3 = ember.nested.nested_tensor([ember.tensor(a) for a in other], layout=ember.jagged)
    _same(e + e3, t + t2)
    with pytest.raises(RuntimeError, match="cannot call binary pointwise function"):
        e + ember.nested.nested_tensor([ember.ones(1, 4)] * 3, layout=ember.jagged)


def test_binary_strided_matches_torch():
    e, t = _pair(_arrays(), "strided")
    e2, t2 = _pair(_arrays(seed=9), "strided")
    _same(e + e2, t + t2)
    _same(e * e2, t * t2)
    _same(e * 2.5, t * 2.5)


def test_inplace_ops_update_the_nested_tensor():
    e = ember.nested.nested_tensor([ember.tensor([-1.0, 2.0]), ember.tensor([3.0])],
                                   layout=ember.jagged)
    assert e.mul_(2) is e
    assert F.relu(e, inplace=True) is e
    assert [c.tolist() for c in e.unbind()] == [[0.0, 4.0], [6.0]]
    s = ember.nested.nested_tensor([ember.tensor([-1.0, 2.0]), ember.tensor([3.0])])
    s.add_(1)
    assert [c.tolist() for c in s.unbind()] == [[0.0, 3.0], [4.0]]


# ---- reductions and dimension-wise ops -----------------------------------------------------------
_REDUCE = [
    ("sum-1", lambda x: x.sum(-1)), ("sum-1k", lambda x: x.sum(-1, keepdim=True)),
    ("sum1", lambda x: x.sum(1)), ("sum", lambda x: x.sum()), ("mean-1", lambda x: x.mean(-1)),
    ("mean-1k", lambda x: x.mean(dim=-1, keepdim=True)), ("mean1", lambda x: x.mean(1)),
    ("amax-1", lambda x: x.amax(-1)), ("max-1", lambda x: x.max(-1).values),
    ("argmax-1", lambda x: x.max(-1).indices), ("sum01", lambda x: x.sum((0, 1))),
    ("softmax-1", lambda x: x.softmax(-1)), ("softmax1", lambda x: x.softmax(1)),
]


@pytest.mark.parametrize("name,fn", _REDUCE, ids=[r[0] for r in _REDUCE])
def test_reductions_match_torch_jagged(name, fn):
    e, t = _pair(_arrays(tail=(4,), seed=10))
    _same(fn(e), fn(t))


def test_dimwise_on_4d_jagged_matches_torch():
    torch = _torch()
    e, t = _pair(_arrays(tail=(2, 3), seed=11))
    for fn in (lambda x: x.sum(2), lambda x: x.mean(-1), lambda x: x.softmax(2),
               lambda x: x.log_softmax(-1), lambda x: x.sum(1), lambda x: x.amax(-1)):
        _same(fn(e), fn(t))
    _same(F.log_softmax(e, -1), torch.nn.functional.log_softmax(t, -1))
    _same(F.softmax(e, dim=1), torch.nn.functional.softmax(t, dim=1))


def test_batch_dimension_reductions_raise():
    e, t = _pair(_arrays())
    with pytest.raises(RuntimeError, match="batch dimension"):
        e.sum(0)
    with pytest.raises(RuntimeError):
        t.sum(0)
    with pytest.raises(RuntimeError, match="batch dimension"):
        e.softmax(0)
    with pytest.raises(RuntimeError, match="dim=0"):
        e.unbind(1)


def test_strided_reductions():
    e, _ = _pair(_arrays(), "strided")
    out = e.sum(-1, keepdim=True)
    assert out.is_nested and [tuple(c.shape) for c in out.unbind()] == [(2, 1), (3, 1), (1, 1)]
    np.testing.assert_allclose(_np(e.sum()), sum(a.sum() for a in _arrays()))
    dense = e.mean(1)  # over the irregular dim: one row per component
    assert not dense.is_nested and tuple(dense.shape) == (3, 4)
    _same_rows = [a.mean(0) for a in _arrays()]
    np.testing.assert_allclose(_np(dense), np.stack(_same_rows))


# ---- layers --------------------------------------------------------------------------------------
def test_linear_matmul_layer_norm_match_torch():
    torch = _torch()
    e, t = _pair(_arrays(seed=12))
    rng = _rng(13)
    w, b = rng.standard_normal((5, 4)), rng.standard_normal(5)
    _same(F.linear(e, ember.tensor(w), ember.tensor(b)),
          torch.nn.functional.linear(t, torch.tensor(w), torch.tensor(b)))
    m = rng.standard_normal((4, 3))
    _same(e @ ember.tensor(m), t @ torch.tensor(m))
    _same(ember.matmul(e, ember.tensor(m)), torch.matmul(t, torch.tensor(m)))
    g, bb = rng.standard_normal(4), rng.standard_normal(4)
    _same(F.layer_norm(e, (4,), ember.tensor(g), ember.tensor(bb)),
          torch.nn.functional.layer_norm(t, (4,), torch.tensor(g), torch.tensor(bb)))
    _same(F.layer_norm(e, (4,)), torch.nn.functional.layer_norm(t, (4,)))


def test_nn_modules_on_nested():
    torch = _torch()
    e, t = _pair(_arrays(seed=14))
    lin, tlin = ember.nn.Linear(4, 6).double(), torch.nn.Linear(4, 6).double()
    ln, tln = ember.nn.LayerNorm(6).double(), torch.nn.LayerNorm(6).double()
    with torch.no_grad():
        tlin.weight.copy_(torch.tensor(_np(lin.weight)))
        tlin.bias.copy_(torch.tensor(_np(lin.bias)))
    _same(ln(ember.nn.GELU()(lin(e))), tln(torch.nn.GELU()(tlin(t))))


def test_strided_linear_and_bmm_match_torch():
    torch = _torch()
    e, t = _pair(_arrays(seed=15), "strided")
    w = _rng(16).standard_normal((3, 4))
    _same(F.linear(e, ember.tensor(w)), torch.nn.functional.linear(t, torch.tensor(w)))
    _same(e @ e.transpose(1, 2), t @ t.transpose(1, 2))
    _same(ember.bmm(e, e.transpose(-1, -2)), torch.bmm(t, t.transpose(-1, -2)))
    _same(e.softmax(-1), t.softmax(-1))


def test_nested_matmul_nested_jagged_per_component():
    e, _ = _pair(_arrays(tail=(2, 3), seed=17))  # (B, j, 2, 3)
    out = e @ e.transpose(-1, -2)  # (B, j, 2, 2)
    for c, x in zip(out.unbind(), e.unbind()):
        np.testing.assert_allclose(_np(c), _np(x) @ np.swapaxes(_np(x), -1, -2))
    with pytest.raises(RuntimeError, match="one ragged dimension"):
        e.transpose(1, 2) @ e.transpose(1, 2).transpose(-1, -2)  # (2, j, j) per component


def test_transpose_matches_torch():
    e, t = _pair(_arrays(tail=(2, 3), seed=18))
    et, tt = e.transpose(1, 2), t.transpose(1, 2)
    _same(et, tt)
    assert et._ragged_idx == tt._ragged_idx == 2
    _same(et.transpose(1, 2), tt.transpose(1, 2))
    _same(e.transpose(-1, -2), t.transpose(-1, -2))
    _same((et * 2).softmax(-1), (tt * 2).softmax(-1))
    _same(e.unflatten(-1, (3, 1)), t.unflatten(-1, (3, 1)))
    _same(e.flatten(-2, -1), t.flatten(-2, -1))
    _same(e.unsqueeze(-1), t.unsqueeze(-1))
    _same(e.unsqueeze(-1).squeeze(-1), t.unsqueeze(-1).squeeze(-1))
    _same(e.reshape(3, -1, 6), t.reshape(3, -1, 6))
    _same(e.view(3, -1, 6), t.view(3, -1, 6))
    _same(e[..., 0], t[..., 0])
    _same(e[1], t[1])
    with pytest.raises(RuntimeError, match="batch dimension"):
        e.transpose(0, 1)


def test_dropout_matches_its_definition():
    e, _ = _pair(_arrays(tail=(50,), seed=19))
    assert all(np.array_equal(_np(a), _np(b)) for a, b in zip(F.dropout(e, 0.5, False).unbind(),
                                                             e.unbind()))
    ember.manual_seed(0)
    out = F.dropout(e, 0.5, True)
    assert out.is_nested and out._nt_offsets is e._nt_offsets
    for a, b in zip(out.unbind(), e.unbind()):
        a, b = _np(a), _np(b)
        kept = a != 0
        np.testing.assert_allclose(a[kept], 2 * b[kept])
    frac = np.mean(np.concatenate([(_np(a) == 0).ravel() for a in out.unbind()]))
    assert 0.3 < frac < 0.7


def test_to_detach_clone_and_device_dtype():
    e, _ = _pair(_arrays(), requires_grad=True)
    f = e.to(ember.float32)
    assert f.is_nested and f.dtype == ember.float32 and f.requires_grad
    d = e.detach()
    assert not d.requires_grad and d.is_nested
    c = e.clone()
    assert c.grad_fn is not None and c.values().data_ptr() != e.values().data_ptr()
    assert e.to("cpu").device.type == "cpu"
    assert e.type() == "ember.DoubleTensor"
    import copy

    for x in (e, ember.nested.nested_tensor([ember.ones(2), ember.ones(3)])):
        y = copy.deepcopy(x)
        assert y.is_nested and y.layout is x.layout and y.requires_grad == x.requires_grad
        assert [c.tolist() for c in y.unbind()] == [c.tolist() for c in x.unbind()]
        assert y.unbind()[0].data_ptr() != x.unbind()[0].data_ptr()


@pytest.mark.parametrize("layout", ["jagged", "strided"])
def test_chunk_split_cat_match_torch(layout):
    torch = _torch()
    e, t = _pair(_arrays(tail=(6,), seed=20), layout)
    if layout == "jagged":
        for a, b in zip(e.chunk(3, -1), t.chunk(3, -1)):
            _same(a, b)
        for a, b in zip(e.split(4, -1), t.split(4, -1)):
            _same(a, b)
        for a, b in zip(e.chunk(2, 0), t.chunk(2, 0)):
            _same(a, b)
    else:  # torch's strided layout chunks the last dim only; ember's gives the same result
        parts = e.chunk(2, -1)
        for i, c in enumerate(e.unbind()):
            np.testing.assert_array_equal(_np(parts[1].unbind()[i]), _np(c)[:, 3:])
    e2, t2 = _pair(_arrays(tail=(6,), seed=21), layout)
    if layout == "jagged":
        t2 = torch.nested.nested_tensor_from_jagged(t2.values(), t.offsets())
    _same(ember.cat([e, e2], -1), torch.cat([t, t2], -1))
    if layout == "strided":  # torch's jagged layout refuses dim 0; ember takes it in both
        _same(ember.cat([e, e2], 0), torch.cat([t, t2], 0))
    cat0 = ember.cat([e, e2], 0)
    assert cat0.size(0) == 6 and cat0.layout is e.layout
    with pytest.raises(RuntimeError, match="ragged"):
        ember.cat([e, e2], 1)


# ---- attention -----------------------------------------------------------------------------------
def _heads(x, h):
    return x.unflatten(-1, (h, x.size(-1) // h)).transpose(1, 2)


def test_sdpa_matches_torch_jagged():
    torch = _torch()
    arrays = _arrays(lengths=(3, 5, 1, 4), tail=(8,), seed=22)
    e, t = _pair(arrays)
    eo = F.scaled_dot_product_attention(_heads(e, 2), _heads(e * 0.5, 2), _heads(e.cos(), 2))
    to = torch.nn.functional.scaled_dot_product_attention(_heads(t, 2), _heads(t * 0.5, 2),
                                                          _heads(t.cos(), 2))
    _same(eo, to)
    _same(eo.transpose(1, 2).flatten(-2, -1), to.transpose(1, 2).flatten(-2, -1))


def test_sdpa_per_sequence_equals_dense_attention():
    arrays = _arrays(lengths=(3, 5, 2), tail=(8,), seed=23)
    e, _ = _pair(arrays)
    for causal in (False, True):
        out = F.scaled_dot_product_attention(_heads(e, 2), _heads(e, 2), _heads(e, 2),
                                             is_causal=causal, scale=0.3)
        for c, a in zip(out.unbind(), arrays):
            x = ember.tensor(a).unflatten(-1, (2, 4)).transpose(0, 1)
            ref = F.scaled_dot_product_attention(x, x, x, is_causal=causal, scale=0.3)
            np.testing.assert_allclose(_np(c), _np(ref), rtol=1e-12)
    # padded attention with a key mask gives the same rows
    pad = ember.nested.to_padded_tensor(_heads(e, 2).transpose(1, 2), 0.0).transpose(1, 2)
    lens = [len(a) for a in arrays]
    mask = ember.tensor([[[[j < n for j in range(max(lens))]]] for n in lens])
    ref = F.scaled_dot_product_attention(pad, pad, pad, attn_mask=mask)
    out = F.scaled_dot_product_attention(_heads(e, 2), _heads(e, 2), _heads(e, 2))
    for i, (c, n) in enumerate(zip(out.unbind(), lens)):
        np.testing.assert_allclose(_np(c), _np(ref[i, :, :n]), rtol=1e-12)
    with pytest.raises(ValueError, match="Masks are not yet supported"):  # as in PyTorch
        F.scaled_dot_product_attention(_heads(e, 2), _heads(e, 2), _heads(e, 2),
                                       attn_mask=ember.ones(1, dtype=ember.bool))


def _encoder(F_, x, p, h):
    """A post-norm transformer encoder layer (attention + MLP), written once for both."""
    e = p["w_o"].shape[0]
    q, k, v = (F_.linear(x, w, b) for w, b in zip(p["w_qkv"].chunk(3), p["b_qkv"].chunk(3)))
    a = F_.scaled_dot_product_attention(_heads(q, h), _heads(k, h), _heads(v, h))
    a = a.transpose(1, 2).flatten(-2, -1)
    x = F_.layer_norm(x + F_.linear(a, p["w_o"], p["b_o"]), (e,), p["g1"], p["be1"])
    m = F_.linear(F_.gelu(F_.linear(x, p["w1"], p["b1"])), p["w2"], p["b2"])
    return F_.layer_norm(x + F_.dropout(m, 0.0), (e,), p["g2"], p["be2"])


def _encoder_params(rng, e, f):
    def s(*shape):
        return rng.standard_normal(shape) * 0.3

    return {"w_qkv": s(3 * e, e), "b_qkv": s(3 * e), "w_o": s(e, e), "b_o": s(e),
            "g1": 1 + s(e), "be1": s(e), "w1": s(f, e), "b1": s(f), "w2": s(e, f), "b2": s(e),
            "g2": 1 + s(e), "be2": s(e)}


def test_transformer_encoder_layer_on_variable_length_sequences_matches_torch():
    torch = _torch()
    rng = _rng(24)
    p = _encoder_params(rng, 8, 16)
    seqs = [rng.standard_normal((n, 8)) for n in (3, 7, 1, 5)]
    ep = {k: ember.tensor(v, requires_grad=True) for k, v in p.items()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    ex, tx = _pair(seqs, requires_grad=True)
    eo, to = _encoder(F, ex, ep, 2), _encoder(torch.nn.functional, tx, tp, 2)
    _same(eo, to, tol=1e-12)
    (eo * eo).sum().backward()
    (to * to).sum().backward()
    _same(ex.grad, tx.grad, tol=1e-12)
    for k in p:
        np.testing.assert_allclose(_np(ep[k].grad), _np(tp[k].grad), rtol=1e-10, atol=1e-12)
    # each sequence alone through the same layer gives its row of the batch
    for c, s in zip(eo.unbind(), seqs):
        alone = _encoder(F, ember.nested.nested_tensor([ember.tensor(s)], layout=ember.jagged),
                         ep, 2)
        np.testing.assert_allclose(_np(alone.unbind()[0]), _np(c), rtol=1e-12, atol=1e-12)


# ---- gradients in float64 ------------------------------------------------------------------------
def _pipeline(values, offsets, w):
    nt = ember.nested.nested_tensor_from_jagged(values, offsets)
    h = F.gelu(F.linear(nt, w)).softmax(-1)
    att = F.scaled_dot_product_attention(_heads(h, 2), _heads(h, 2), _heads(nt, 2))
    out = F.layer_norm(att.transpose(1, 2).flatten(-2, -1) + nt, (4,))
    return (out.sum(1) ** 2).sum() + out.mean(-1).softmax(1).sum(1).pow(3).sum()


def _reference(values, offsets, w):
    """The same loss per component, with dense ops only."""
    total = 0
    off = offsets.tolist()
    for a, b in zip(off[:-1], off[1:]):
        x = values[a:b]
        h = F.gelu(F.linear(x, w)).softmax(-1)
        hh = h.unflatten(-1, (2, 2)).transpose(0, 1)
        xx = x.unflatten(-1, (2, 2)).transpose(0, 1)
        att = F.scaled_dot_product_attention(hh, hh, xx)
        out = F.layer_norm(att.transpose(0, 1).flatten(-2, -1) + x, (4,))
        total = total + (out.sum(0) ** 2).sum() + out.mean(-1).softmax(0).sum(0).pow(3)
    return total


def test_gradients_float64_numerical_and_per_component():
    rng = _rng(25)
    v0, w0 = rng.standard_normal((6, 4)), rng.standard_normal((4, 4)) * 0.5
    offsets = ember.tensor([0, 2, 3, 6])
    v, w = ember.tensor(v0, requires_grad=True), ember.tensor(w0, requires_grad=True)
    loss = _pipeline(v, offsets, w)
    loss.backward()
    vr, wr = ember.tensor(v0, requires_grad=True), ember.tensor(w0, requires_grad=True)
    ref = _reference(vr, offsets, wr)
    ref.backward()
    np.testing.assert_allclose(_np(loss), _np(ref), rtol=1e-12)
    np.testing.assert_allclose(_np(v.grad), _np(vr.grad), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(w.grad), _np(wr.grad), rtol=1e-10, atol=1e-12)

    def f(vn, wn):
        return float(_pipeline(ember.tensor(vn), offsets, ember.tensor(wn)))

    eps = 1e-6
    for x0, grad, which in ((v0, v.grad, 0), (w0, w.grad, 1)):
        num = np.zeros_like(x0)
        for idx in np.ndindex(x0.shape):
            up, dn = x0.copy(), x0.copy()
            up[idx] += eps
            dn[idx] -= eps
            args_up = (up, w0) if which == 0 else (v0, up)
            args_dn = (dn, w0) if which == 0 else (v0, dn)
            num[idx] = (f(*args_up) - f(*args_dn)) / (2 * eps)
        np.testing.assert_allclose(_np(grad), num, rtol=1e-5, atol=1e-7)


def test_strided_gradients_reach_components():
    rng = _rng(26)
    arrays = [rng.standard_normal((n, 3)) for n in (2, 4)]
    comps = [ember.tensor(a, requires_grad=True) for a in arrays]
    nt = ember.nested.as_nested_tensor(comps)  # strided
    w = ember.tensor(rng.standard_normal((3, 3)))
    out = F.linear(nt, w).softmax(-1)
    (ember.nested.to_padded_tensor(out, 0.0) ** 2).sum().backward()
    for c, a in zip(comps, arrays):
        x = ember.tensor(a, requires_grad=True)
        (F.linear(x, w).softmax(-1) ** 2).sum().backward()
        np.testing.assert_allclose(_np(c.grad), _np(x.grad), rtol=1e-12)


# ---- errors --------------------------------------------------------------------------------------
def test_unsupported_ops_raise_not_implemented_naming_the_op():
    e, _ = _pair(_arrays())
    for call, name in ((lambda: e.flip(1), "flip"), (lambda: ember.sort(e, -1), "sort"),
                       (lambda: e.index_select(2, ember.tensor([0])), "index_select"),
                       (lambda: F.conv1d(e, ember.ones(1, 3, 1, dtype=ember.float64)), "conv1d")):
        with pytest.raises(NotImplementedError, match=f"{name}.*nested"):
            call()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(e)
    with pytest.raises(RuntimeError, match="explicit"):
        e.backward()


def test_nested_tensor_with_holes_per_component_semantics():
    """A narrow()ed kv-cache view: every op sees only each row's window, and gradients reach
    the base tensor at those windows only."""
    rng = _rng(27)
    base0 = rng.standard_normal((3, 6, 4))
    starts, lens = [0, 2, 1], [3, 4, 1]
    base = ember.tensor(base0, requires_grad=True)
    nt = ember.nested.narrow(base, 1, ember.tensor(starts), ember.tensor(lens),
                             layout=ember.jagged)
    w = ember.tensor(rng.standard_normal((4, 4)))
    out = F.linear(nt, w).softmax(-1).softmax(1)
    pooled = out.sum(1)  # dense (3, 4)
    att = F.scaled_dot_product_attention(_heads(nt, 2), _heads(nt, 2), _heads(nt, 2))
    (pooled.sum() + att.sum()).backward()
    expected_grad = np.zeros_like(base0)
    for i, (s, n) in enumerate(zip(starts, lens)):
        x = ember.tensor(base0[i, s:s + n], requires_grad=True)
        ref = F.linear(x, w).softmax(-1).softmax(0)
        np.testing.assert_allclose(_np(out.unbind()[i]), _np(ref), rtol=1e-12)
        np.testing.assert_allclose(_np(pooled[i]), _np(ref.sum(0)), rtol=1e-12)
        xx = x.unflatten(-1, (2, 2)).transpose(0, 1)
        a = F.scaled_dot_product_attention(xx, xx, xx)
        np.testing.assert_allclose(_np(att.unbind()[i]), _np(a), rtol=1e-12)
        (ref.sum() + a.sum()).backward()
        expected_grad[i, s:s + n] = _np(x.grad)
    np.testing.assert_allclose(_np(base.grad), expected_grad, rtol=1e-10, atol=1e-12)
    assert nt.sum().item() == pytest.approx(sum(base0[i, s:s + n].sum()
                                                for i, (s, n) in enumerate(zip(starts, lens))))


def test_module_training_step_on_nested_batch():
    """An nn.Module encoder block trained one SGD step on a nested batch: the loss goes down and
    every parameter gets the gradient of the per-sequence computation."""
    nn = ember.nn
    ember.manual_seed(3)

    class Block(nn.Module):
        def __init__(self, e: int, h: int) -> None:
            super().__init__()
            self.h = h
            self.qkv = nn.Linear(e, 3 * e)
            self.out = nn.Linear(e, e)
            self.norm = nn.LayerNorm(e)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, -1)
            a = F.scaled_dot_product_attention(_heads(q, self.h), _heads(k, self.h),
                                               _heads(v, self.h), is_causal=True)
            return self.norm(x + self.drop(self.out(a.transpose(1, 2).flatten(-2, -1))))

    block = Block(8, 2).double().eval()
    rng = _rng(28)
    seqs = [ember.tensor(rng.standard_normal((n, 8))) for n in (4, 2, 6)]
    x = ember.nested.nested_tensor(seqs, layout=ember.jagged)
    opt = ember.optim.SGD(block.parameters(), lr=1e-4)

    def loss_fn(out):
        return (out.sum(1) ** 2).sum()

    loss = loss_fn(block(x))
    opt.zero_grad()
    loss.backward()
    grads = {n: _np(p.grad).copy() for n, p in block.named_parameters()}
    block.zero_grad()
    ref = sum((block(ember.nested.nested_tensor([s], layout=ember.jagged)).sum(1) ** 2).sum()
              for s in seqs)
    ref.backward()
    for n, p in block.named_parameters():
        np.testing.assert_allclose(grads[n], _np(p.grad), rtol=1e-10, atol=1e-12)
        p.grad = ember.tensor(grads[n])
    opt.step()
    assert float(loss_fn(block(x))) < float(loss)
