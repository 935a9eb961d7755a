"""Gradients of the view, shape and indexing ops (ops/views.yaml, shape.yaml, indexing.yaml,
tensor.yaml): gradcheck with contiguous and strided inputs, first and second derivatives against
PyTorch (see grad_table.py)."""

import ember
import numpy as np
import pytest
from core_helpers import torch
from grad_table import GradCase, lib, run_case


def r(*shape):
    return lambda rng: [rng.standard_normal(shape)]


def idx(*values):
    return np.array(values, dtype=np.int64)


VIEWS = [
    GradCase("view", lambda a: a.view(4, 3), r(3, 4), noncontig=False),
    GradCase("view_neg", lambda a: a.view(-1), r(3, 4), noncontig=False),
    GradCase("view_as", lambda a, b: a.view_as(b), lambda rng: [rng.standard_normal((2, 6)),
                                                                 rng.standard_normal((3, 4))],
             noncontig=False),
    GradCase("reshape", lambda a: a.reshape(2, 6), r(3, 4)),
    GradCase("reshape_0d", lambda a: a.reshape(1, 1), r()),
    GradCase("reshape_as", lambda a: a.reshape_as(lib(a).zeros(6, 2)), r(3, 4)),
    GradCase("transpose", lambda a: a.transpose(0, -1), r(2, 3, 4)),
    GradCase("swapaxes", lambda a: a.swapaxes(1, 2), r(2, 3, 4)),
    GradCase("swapdims", lambda a: lib(a).swapdims(a, 0, 1), r(2, 3)),
    GradCase("t", lambda a: a.t(), r(3, 4)),
    GradCase("t_1d", lambda a: a.t(), r(4)),
    GradCase("adjoint", lambda a: a.adjoint(), r(2, 3, 4)),
    GradCase("permute", lambda a: a.permute(2, 0, 1), r(2, 3, 4)),
    GradCase("squeeze", lambda a: a.squeeze(), r(3, 1, 4, 1)),
    GradCase("squeeze_dim", lambda a: a.squeeze(1), r(3, 1, 4)),
    GradCase("unsqueeze", lambda a: a.unsqueeze(-1), r(3, 4)),
    GradCase("expand", lambda a: a.expand(2, 3, 4), r(3, 1)),
    GradCase("expand_as", lambda a: a.expand_as(lib(a).zeros(3, 4)), r(4)),
    GradCase("broadcast_to", lambda a: lib(a).broadcast_to(a, (2, 3)), r(1, 3)),
    GradCase("broadcast_tensors", lambda a, b: lib(a).broadcast_tensors(a, b),
             lambda rng: [rng.standard_normal((3, 1)), rng.standard_normal(4)]),
    GradCase("narrow", lambda a: a.narrow(1, 1, 2), r(3, 4)),
    GradCase("narrow_negstart", lambda a: lib(a).narrow(a, 0, -2, 2), r(3, 4)),
    GradCase("select", lambda a: a.select(1, -1), r(3, 4)),
    GradCase("select_1d", lambda a: a.select(0, 2), r(4)),
    GradCase("unfold", lambda a: a.unfold(1, 3, 1), r(2, 5)),
    GradCase("unfold_step", lambda a: a.unfold(0, 2, 3), r(7, 2)),
    GradCase("as_strided", lambda a: a.as_strided((2, 2), (1, 2), 1), r(6), noncontig=False),
    GradCase("as_strided_overlap", lambda a: a.as_strided((3, 3), (1, 1)), r(6),
             noncontig=False),
    GradCase("flatten", lambda a: a.flatten(1), r(2, 3, 4)),
    GradCase("flatten_same", lambda a: a.flatten(1, 1) * 2, r(2, 3)),
    GradCase("ravel", lambda a: a.ravel(), r(3, 4)),
    GradCase("unflatten", lambda a: a.unflatten(1, (2, -1)), r(3, 4)),
    GradCase("split", lambda a: a.split(2, -1), r(3, 5)),
    GradCase("split_sizes", lambda a: a.split([1, 3], 1), r(2, 4)),
    GradCase("split_with_sizes", lambda a: a.split_with_sizes([2, 1], 0), r(3, 2)),
    GradCase("tensor_split", lambda a: a.tensor_split(3, 1), r(2, 7)),
    GradCase("tensor_split_idx", lambda a: a.tensor_split([1, 3], 0), r(5, 2)),
    GradCase("tensor_split_idx_back", lambda a: a.tensor_split([3, 1], 0), r(5, 2)),
    GradCase("hsplit", lambda a: a.hsplit(2), r(3, 4)),
    GradCase("hsplit_idx", lambda a: a.hsplit([1]), r(5)),
    GradCase("vsplit", lambda a: a.vsplit([1, 2]), r(4, 2)),
    GradCase("chunk", lambda a: a.chunk(3, 1), r(2, 7)),
    GradCase("unbind", lambda a: a.unbind(-1), r(2, 3)),
    GradCase("diagonal", lambda a: a.diagonal(), r(3, 4)),
    GradCase("diagonal_offset", lambda a: a.diagonal(-1, 0, 2), r(3, 2, 4)),
    GradCase("diagonal_offset_pos", lambda a: a.diagonal(2), r(3, 4)),
    GradCase("movedim", lambda a: a.movedim(0, -1), r(2, 3, 4)),
    GradCase("moveaxis", lambda a: lib(a).moveaxis(a, [0, 1], [2, 0]), r(2, 3, 4)),
]

SHAPE = [
    GradCase("cat", lambda a, b: lib(a).cat([a, b], -1),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 1))]),
    GradCase("concat", lambda a, b: lib(a).concat([a, b]),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((1, 3))]),
    GradCase("concatenate", lambda a, b: lib(a).concatenate([a, b], axis=1),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 2))]),
    GradCase("stack", lambda a, b: lib(a).stack([a, b], 1),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))]),
    GradCase("stack_neg", lambda a, b: lib(a).stack([a, b], -1),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(3)]),
    GradCase("hstack", lambda a, b: lib(a).hstack([a, b]),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 1))]),
    GradCase("hstack_1d", lambda a, b: lib(a).hstack([a, b]),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(2)]),
    GradCase("vstack", lambda a, b: lib(a).vstack([a, b]),
             lambda rng: [rng.standard_normal(3), rng.standard_normal((2, 3))]),
    GradCase("row_stack", lambda a, b: lib(a).row_stack([a, b]),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(3)]),
    GradCase("dstack", lambda a, b: lib(a).dstack([a, b]),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))]),
    GradCase("column_stack", lambda a, b: lib(a).column_stack([a, b]),
             lambda rng: [rng.standard_normal(3), rng.standard_normal((3, 2))]),
    GradCase("atleast_1d", lambda a: lib(a).atleast_1d(a), r()),
    GradCase("atleast_2d", lambda a: lib(a).atleast_2d(a), r(3)),
    GradCase("atleast_3d", lambda a: lib(a).atleast_3d(a), r(2, 3)),
    GradCase("atleast_2d_list", lambda a, b: lib(a).atleast_2d([a, b]),
             lambda rng: [rng.standard_normal(()), rng.standard_normal((2, 3))]),
    GradCase("flip", lambda a: a.flip(0, -1), r(2, 3, 4)),
    GradCase("fliplr", lambda a: a.fliplr(), r(3, 4)),
    GradCase("flipud", lambda a: a.flipud(), r(3, 4)),
    GradCase("roll", lambda a: a.roll(1, 0), r(3, 4)),
    GradCase("roll_multi", lambda a: a.roll((-1, 2), (1, 0)), r(3, 4)),
    GradCase("roll_flat", lambda a: a.roll(5), r(3, 4)),
    GradCase("rot90", lambda a: a.rot90(1, [0, 1]), r(3, 4)),
    GradCase("rot90_k3", lambda a: a.rot90(3, [1, 2]), r(2, 3, 4)),
    GradCase("rot90_k2", lambda a: a.rot90(-2, [0, 1]), r(3, 4)),
    GradCase("repeat", lambda a: a.repeat(2, 1, 3), r(3, 2)),
    GradCase("repeat_0d", lambda a: a.repeat(3), r()),
    GradCase("tile", lambda a: a.tile((2,)), r(3, 2)),
    GradCase("tile_more", lambda a: lib(a).tile(a, (2, 1, 2)), r(2)),
    GradCase("repeat_interleave", lambda a: a.repeat_interleave(2), r(2, 3)),
    GradCase("repeat_interleave_dim", lambda a: a.repeat_interleave(3, dim=1), r(2, 3)),
    GradCase("repeat_interleave_tensor",
             lambda a, n: lib(a).repeat_interleave(a, n, dim=0),
             lambda rng: [rng.standard_normal((3, 2)), idx(1, 0, 2)]),
    GradCase("tril", lambda a: a.tril(), r(3, 4)),
    GradCase("tril_batched", lambda a: lib(a).tril(a, -1), r(2, 3, 3)),
    GradCase("triu", lambda a: a.triu(1), r(3, 4)),
    GradCase("meshgrid", lambda a, b: lib(a).meshgrid(a, b, indexing="ij"),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(2)]),
    GradCase("meshgrid_xy", lambda a, b, c: lib(a).meshgrid(a, b, c, indexing="xy"),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(2), rng.standard_normal(())]),
    GradCase("clone", lambda a: a.clone(), r(3, 4)),
    GradCase("contiguous", lambda a: a.contiguous(), r(3, 4)),
]

IDX = [
    GradCase("index_select", lambda a, i: a.index_select(1, i),
             lambda rng: [rng.standard_normal((3, 4)), idx(0, 3, 0)]),
    GradCase("gather", lambda a, i: a.gather(1, i),
             lambda rng: [rng.standard_normal((3, 4)), idx(0, 1, 1, 3, 2, 2).reshape(3, 2)]),
    GradCase("scatter", lambda a, s, i: a.scatter(0, i, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((2, 4)),
                          idx(0, 1, 2, 0, 2, 0, 1, 1).reshape(2, 4)]),
    GradCase("scatter_value", lambda a, i: a.scatter(1, i, 2.5),
             lambda rng: [rng.standard_normal((3, 4)), idx(0, 2, 1).reshape(3, 1)]),
    # torch has no derivative for reduce='add'; ember's equals scatter_add's.
    GradCase("scatter_reduce_add", lambda a, s, i: a.scatter(1, i, s, reduce="add"),
             lambda rng: [rng.standard_normal((2, 4)), rng.standard_normal((2, 3)),
                          idx(0, 0, 3, 1, 2, 1).reshape(2, 3)],
             torch_fn=lambda a, s, i: a.scatter_add(1, i, s)),
    GradCase("scatter_add", lambda a, s, i: a.scatter_add(0, i, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((2, 4)),
                          idx(0, 0, 2, 0, 2, 0, 1, 1).reshape(2, 4)]),
    GradCase("index_add", lambda a, s, i: a.index_add(0, i, s, alpha=2.0),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4)),
                          idx(0, 2, 0)]),
    GradCase("index_copy", lambda a, s, i: a.index_copy(1, i, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 2)), idx(3, 0)]),
    GradCase("index_fill", lambda a, i: a.index_fill(1, i, -1.0),
             lambda rng: [rng.standard_normal((3, 4)), idx(1, 3)]),
    GradCase("index_fill_tensor", lambda a, v, i: a.index_fill(0, i, v),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(()), idx(0, 2)]),
    GradCase("index_put", lambda a, v, i: a.index_put((i,), v),
             lambda rng: [rng.standard_normal((4, 3)), rng.standard_normal((2, 3)), idx(3, 1)]),
    GradCase("index_put_bcast", lambda a, v, i, j: a.index_put((i, j), v),
             lambda rng: [rng.standard_normal((4, 3)), rng.standard_normal(()), idx(3, 1),
                          idx(0, 2)]),
    GradCase("index_put_acc", lambda a, v, i: a.index_put((i,), v, accumulate=True),
             lambda rng: [rng.standard_normal((4, 3)), rng.standard_normal(3), idx(1, 1, 2)]),
    GradCase("adv_index", lambda a, i: a[i], lambda rng: [rng.standard_normal((4, 3)),
                                                          idx(3, 0, 3)]),
    GradCase("adv_index_2", lambda a, i, j: a[i, :, j],
             lambda rng: [rng.standard_normal((3, 2, 4)), idx(0, 2, 2), idx(1, 3, 1)]),
    GradCase("adv_index_mask", lambda a, m: a[m],
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4)) > 0]),
    GradCase("basic_index", lambda a: a[1:, None, ::2, 1], r(3, 4, 2)),
    GradCase("basic_index_int", lambda a: a[-1], r(3, 4)),
    GradCase("masked_fill", lambda a, m: a.masked_fill(m, 3.0),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(4) > 0]),
    GradCase("masked_fill_bcast_self", lambda a, m: a.masked_fill(m, 3.0),
             lambda rng: [rng.standard_normal(4), rng.standard_normal((3, 4)) > 0]),
    GradCase("masked_fill_tensor", lambda a, v, m: a.masked_fill(m, v),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(()),
                          rng.standard_normal((3, 4)) > 0]),
    GradCase("masked_scatter", lambda a, s, m: a.masked_scatter(m, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((4, 4)),
                          rng.standard_normal((3, 4)) > 0]),
    GradCase("masked_select", lambda a, m: a.masked_select(m),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4)) > 0]),
    GradCase("masked_select_bcast", lambda a, m: lib(a).masked_select(a, m),
             lambda rng: [rng.standard_normal(4), rng.standard_normal((3, 4)) > 0]),
    GradCase("take", lambda a, i: a.take(i),
             lambda rng: [rng.standard_normal((3, 4)), idx(0, 11, -1, 5).reshape(2, 2)]),
    GradCase("take_along_dim", lambda a, i: lib(a).take_along_dim(a, i, 1),
             lambda rng: [rng.standard_normal((3, 4)), idx(0, 3, 3, 1, 2, 2).reshape(3, 2)]),
    GradCase("take_along_dim_bcast", lambda a, i: lib(a).take_along_dim(a, i, 0),
             lambda rng: [rng.standard_normal((3, 1)), idx(0, 2, 1, 1).reshape(2, 2)]),
    GradCase("take_along_dim_flat", lambda a, i: lib(a).take_along_dim(a, i),
             lambda rng: [rng.standard_normal((3, 4)), idx(0, 7, 7)]),
]


def _sr(reduce, include_self):
    return GradCase(
        f"scatter_reduce_{reduce}_{include_self}",
        lambda a, s, i: a.scatter_reduce(0, i, s, reduce, include_self=include_self),
        lambda rng: [rng.standard_normal((3, 2)), rng.standard_normal((4, 2)),
                     idx(0, 0, 2, 1, 0, 2, 0, 1).reshape(4, 2)],
        # amax/amin are piecewise: their double derivative is zero (torch has none).
        gradgrad=reduce in ("sum", "mean"))


SCATTER_REDUCE = [_sr(red, inc) for red in ("sum", "prod", "mean", "amax", "amin")
                  for inc in (True, False)]

def _pad(pad, mode="constant", **kw):
    """F.pad for either library (non-constant modes: torch's backward has a spurious dependence
    on the input, ember's does not, so only first derivatives are compared)."""
    def f(a):
        if isinstance(a, ember.Tensor):
            return ember.pad(a, list(pad), mode=mode, **kw)
        return torch.nn.functional.pad(a, pad, mode=mode, **kw)
    return f


PAD = [
    GradCase("constant_pad_nd", lambda a: lib(a).constant_pad_nd(a, [1, 2, 0, 1], 0.5), r(2, 3)),
    GradCase("constant_pad_nd_crop", lambda a: lib(a).constant_pad_nd(a, [-1, 2, 1, -1]),
             r(3, 4)),
    GradCase("pad_constant", _pad((2, 0, 1, 1, 1, 0), value=-1.0), r(2, 3, 2)),
    GradCase("pad_reflect_1", _pad((2, 1), "reflect"), r(2, 4), gradgrad=False),
    GradCase("pad_reflect_2", _pad((1, 2, 2, 0), "reflect"), r(2, 3, 4), gradgrad=False),
    GradCase("pad_reflect_3", _pad((1, 1, 0, 1, 1, 0), "reflect"), r(1, 2, 3, 3), gradgrad=False),
    GradCase("pad_replicate", _pad((3, 1, 0, 2), "replicate"), r(1, 2, 3), gradgrad=False),
    GradCase("pad_replicate_crop", _pad((-1, 2), "replicate"), r(2, 4), gradgrad=False),
    GradCase("pad_circular", _pad((2, 1, 1, 3), "circular"), r(1, 3, 4), gradgrad=False),
    GradCase("pad_circular_crop", _pad((-1, 3), "circular"), r(1, 2, 4), gradgrad=False),
]

# In-place forms on tensors with history, and on views of them (CopySlices).
INPLACE = [
    GradCase("index_fill_", lambda a, i: (a * 1).index_fill_(1, i, 2.0),
             lambda rng: [rng.standard_normal((3, 4)), idx(0, 2)]),
    GradCase("index_add_view", lambda a, s, i: (a * 1)[1:].index_add_(1, i, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((2, 2)), idx(3, 3)]),
    GradCase("index_copy_", lambda a, s, i: (a * 1).index_copy_(0, i, s),
             lambda rng: [rng.standard_normal((3, 2)), rng.standard_normal((1, 2)), idx(1)]),
    GradCase("masked_scatter_view", lambda a, s, m: (a * 1)[:, 1:].masked_scatter_(m, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(9),
                          rng.standard_normal((3, 3)) > 0]),
    GradCase("masked_fill_view", lambda a, m: (a * 1).t().masked_fill_(m, 1.5),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((4, 3)) > 0]),
    GradCase("scatter_", lambda a, s, i: (a * 1).scatter_(1, i, s),
             lambda rng: [rng.standard_normal((2, 4)), rng.standard_normal((2, 2)),
                          idx(3, 0, 1, 2).reshape(2, 2)]),
    GradCase("scatter_add_view", lambda a, s, i: (a * 1)[0].scatter_add_(0, i, s),
             lambda rng: [rng.standard_normal((2, 4)), rng.standard_normal(3), idx(3, 3, 0)]),
    GradCase("index_put_", lambda a, v, i: (a * 1).index_put_((i,), v, accumulate=True),
             lambda rng: [rng.standard_normal(5), rng.standard_normal(3), idx(4, 0, 4)]),
    GradCase("tril_view", lambda a: (a * 1)[1:].tril_(), r(4, 3)),
    GradCase("copy_view", lambda a, b: (a * 1).diagonal().copy_(b),
             lambda rng: [rng.standard_normal((3, 3)), rng.standard_normal(3)]),
]

# Empty tensors and empty index lists.
EMPTY = [
    GradCase("narrow_empty", lambda a: a.narrow(1, 2, 0) + 1, r(3, 4), noncontig=False),
    GradCase("cat_empty", lambda a, b: lib(a).cat([a, b]),
             lambda rng: [rng.standard_normal((0, 3)), rng.standard_normal((2, 3))]),
    GradCase("index_select_empty", lambda a, i: a.index_select(0, i),
             lambda rng: [rng.standard_normal((3, 2)), np.zeros(0, dtype=np.int64)]),
    GradCase("split_empty_piece", lambda a: a.split([0, 3], 0), r(3, 2)),
]

CASES = VIEWS + SHAPE + IDX + SCATTER_REDUCE + PAD + INPLACE + EMPTY


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grad(case):
    run_case(case)


def test_scatter_reduce_prod_with_zeros():
    """prod's gradient where factors are zero: one zero (the others' product) and two (zero)."""
    pytest.importorskip("torch")
    self_ = np.array([[2.0, 0.0], [3.0, 1.5]])
    src = np.array([[0.0, 4.0], [5.0, 0.0], [0.0, 2.0]])
    index = np.array([[0, 0], [0, 1], [1, 0]])
    for include_self in (True, False):
        outs = []
        for L in (ember, torch):
            a = L.tensor(self_, requires_grad=True)
            s = L.tensor(src, requires_grad=True)
            out = a.scatter_reduce(0, L.tensor(index), s, "prod", include_self=include_self)
            out.backward(L.tensor(np.arange(1.0, 5.0).reshape(2, 2)))
            outs.append((np.array(a.grad.tolist()), np.array(s.grad.tolist())))
        np.testing.assert_allclose(outs[0][0], outs[1][0])
        np.testing.assert_allclose(outs[0][1], outs[1][1])


def test_scatter_multiply_is_a_clear_error():
    a = ember.zeros(3, 2, dtype=ember.float64, requires_grad=True)
    out = a.scatter(0, ember.tensor([[0, 1]]), 2.0, reduce="multiply")
    with pytest.raises(NotImplementedError, match="reduce='multiply'"):
        out.sum().backward()


def test_view_dtype_is_not_differentiable():
    a = ember.ones(4, requires_grad=True)
    assert not a.view(ember.float32).requires_grad
    assert not a.view(ember.int32).requires_grad


def test_ops_returning_self_keep_leaves_intact():
    """contiguous()/to()/flatten() may return self itself; a leaf must stay a leaf."""

    for f in (lambda x: x.contiguous(), lambda x: x._to_dtype(ember.float32),
              lambda x: x.flatten(0, 0), lambda x: ember.atleast_1d(x)):
        x = ember.ones(3, requires_grad=True)
        y = f(x)
        assert x.is_leaf and x.grad_fn is None
        (y * 2).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_random_fills_have_zero_gradient():
    x = ember.ones(4, dtype=ember.float64, requires_grad=True)
    for fill in (lambda t: t.uniform_(), lambda t: t.normal_(), lambda t: t.exponential_(),
                 lambda t: t.bernoulli_(0.5)):
        y = x * 1
        fill(y)
        (y * 3).sum().backward()
        assert x.grad.tolist() == [0.0] * 4
    m = ember.zeros(3, dtype=ember.float64, requires_grad=True)
    ember.normal(m * 1, 1.0).sum().backward()
    assert m.grad.tolist() == [0.0] * 3


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_forward_matches_torch(mode):
    tt = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    pads = [(1, 2), (2, 1, 1, 0), (1, 1, 2, 2, 1, 0), (0, -1, 1, 1), (-2, 1, 0, 3)]
    for pad in pads:
        xx = x[None] if len(pad) == 6 else (x[0] if len(pad) == 2 else x)
        want = tt.nn.functional.pad(tt.tensor(xx), pad, mode=mode).numpy()
        got = ember.pad(ember.tensor(xx), list(pad), mode=mode).numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"{mode} {pad}")
    ints = ember.arange(6).view(2, 3)
    assert ember.pad(ints, [1, 1], mode=mode).dtype == ember.int64


def test_pad_values_and_dtypes():
    assert ember.constant_pad_nd(ember.arange(3), [1, 1], 2.5).tolist() == [2, 0, 1, 2, 2]
    assert ember.pad(ember.ones(2), [1, 0], value=3.0).tolist() == [3.0, 1.0, 1.0]
    assert ember.pad(ember.ones(2, 2), [-1, -1, 0, 0]).shape == (2, 0)
    assert ember.pad(ember.ones(2, 3), [1, 1], mode="reflect").tolist() == [[1.0] * 5] * 2


def test_pad_bad_input():
    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="divisible by 2"):
        ember.pad(x, [1])
    with pytest.raises(RuntimeError, match="less than or equal to two times"):
        ember.pad(x, [1, 1, 1, 1, 1, 1])
    with pytest.raises(RuntimeError, match="negative size"):
        ember.pad(x, [-2, -2])
    with pytest.raises(NotImplementedError, match="unrecognised padding mode 'foo'"):
        ember.pad(x, [1, 1], mode="foo")
    with pytest.raises(RuntimeError, match="doesn't take in value"):
        ember.pad(x, [1, 1], mode="reflect", value=1.0)
    with pytest.raises(NotImplementedError, match="not supported for a 1D input"):
        ember.pad(ember.ones(3), [1, 1], mode="reflect")
    with pytest.raises(RuntimeError, match="less than the corresponding input dimension"):
        ember.pad(x, [3, 0], mode="reflect")
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        ember.pad(x, [0, 4], mode="circular")
    with pytest.raises(RuntimeError, match="size 0"):
        ember.pad(ember.ones(1, 0), [1, 1], mode="replicate")
