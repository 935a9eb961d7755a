"""out= tensors of the wrong shape, against PyTorch: they are resized to the result's shape, with
a UserWarning naming the op when they held elements (an empty out= is resized silently, one of
the right shape is written as it is). Every op goes through the engine's one helper
(core/out_tensor.h: dtype and device checks, the resize, the warning), also the Python-level
linalg functions (``_C._prepare_out``) and the ops returning several tensors (sort, topk, max).
"""

from __future__ import annotations

import warnings

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, to_np, torch

pytestmark = needs_torch


def _inputs(m):
    x = m.tensor([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]])
    a = m.tensor([[4.0, 1.0], [1.0, 3.0]])
    return x, a


# name -> (call(m, out), number of out= tensors, out dtypes)
CASES = {
    # pointwise (TensorIterator)
    "add": (lambda m, o: m.add(_inputs(m)[0], 1.5, out=o), ["float32"]),
    "where": (lambda m, o: m.where(_inputs(m)[0] > 1, _inputs(m)[0], m.tensor(0.0), out=o),
              ["float32"]),
    # reductions
    "sum": (lambda m, o: m.sum(_inputs(m)[0], 0, out=o), ["float32"]),
    "argmax": (lambda m, o: m.argmax(_inputs(m)[0], 1, out=o), ["int64"]),
    "cumsum": (lambda m, o: m.cumsum(_inputs(m)[0], 1, out=o), ["float32"]),
    # matmul
    "matmul": (lambda m, o: m.matmul(_inputs(m)[0], _inputs(m)[0].T, out=o), ["float32"]),
    "mm": (lambda m, o: m.mm(_inputs(m)[0].T, _inputs(m)[0], out=o), ["float32"]),
    # cat / stack
    "cat": (lambda m, o: m.cat([_inputs(m)[0], _inputs(m)[0]], 1, out=o), ["float32"]),
    "stack": (lambda m, o: m.stack([_inputs(m)[1], _inputs(m)[1]], out=o), ["float32"]),
    # the stacking ops built on cat warn under their own names
    "hstack": (lambda m, o: m.hstack([_inputs(m)[0], _inputs(m)[0]], out=o), ["float32"]),
    "vstack": (lambda m, o: m.vstack([_inputs(m)[0], m.tensor([1.0, 2.0, 3.0])], out=o),
               ["float32"]),
    "dstack": (lambda m, o: m.dstack([_inputs(m)[0], _inputs(m)[0]], out=o), ["float32"]),
    "column_stack": (lambda m, o: m.column_stack([m.tensor([1.0, 2.0]), _inputs(m)[0]], out=o),
                     ["float32"]),
    # index ops
    "index_select": (lambda m, o: m.index_select(_inputs(m)[0], 1, m.tensor([2, 0]), out=o),
                     ["float32"]),
    "gather": (lambda m, o: m.gather(_inputs(m)[0], 1, m.tensor([[2], [1]]), out=o),
               ["float32"]),
    "masked_select": (lambda m, o: m.masked_select(_inputs(m)[0], _inputs(m)[0] > 1, out=o),
                      ["float32"]),
    "tril": (lambda m, o: m.tril(_inputs(m)[0], out=o), ["float32"]),
    # linalg (Python-level functions and their named tuples)
    "linalg.inv": (lambda m, o: m.linalg.inv(_inputs(m)[1], out=o), ["float32"]),
    "linalg.vector_norm": (lambda m, o: m.linalg.vector_norm(_inputs(m)[0], dim=1, out=o),
                           ["float32"]),
    "linalg.solve": (lambda m, o: m.linalg.solve(_inputs(m)[1], _inputs(m)[1][:, :1], out=o),
                     ["float32"]),
    "linalg.cholesky": (lambda m, o: m.linalg.cholesky(_inputs(m)[1], out=o), ["float32"]),
    "linalg.eigh": (lambda m, o: m.linalg.eigh(_inputs(m)[1], out=o), ["float32", "float32"]),
    "linalg.inv_ex": (lambda m, o: m.linalg.inv_ex(_inputs(m)[1], out=o), ["float32", "int32"]),
    # Python-level ops of other packages
    "normalize": (lambda m, o: m.nn.functional.normalize(_inputs(m)[0], out=o), ["float32"]),
    # several results
    "sort": (lambda m, o: m.sort(_inputs(m)[0], 1, out=o), ["float32", "int64"]),
    "topk": (lambda m, o: m.topk(_inputs(m)[0], 2, out=o), ["float32", "int64"]),
    "max.dim": (lambda m, o: m.max(_inputs(m)[0], 1, out=o), ["float32", "int64"]),
    "kthvalue": (lambda m, o: m.kthvalue(_inputs(m)[0], 2, 1, out=o), ["float32", "int64"]),
    "cummax": (lambda m, o: m.cummax(_inputs(m)[0], 0, out=o), ["float32", "int64"]),
    "aminmax": (lambda m, o: m.aminmax(_inputs(m)[0], dim=0, out=o), ["float32", "float32"]),
}


def _outs(m, dtypes, shape):
    ts = [m.full(shape, 7, dtype=getattr(m, d)) for d in dtypes]
    return ts[0] if len(ts) == 1 else tuple(ts)


def _run(m, name, shape):
    """(result, the out= tensors, the warnings raised) of CASES[name] with out= of `shape`."""
    call, dtypes = CASES[name]
    out = _outs(m, dtypes, shape)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = call(m, out)
    resized = [x for x in w if "resized" in str(x.message)]
    return r, out, resized


def _tensors(r):
    return list(r) if isinstance(r, tuple) else [r]


def _right_shape(name):
    """The result shapes (from torch, without out=)."""
    return [tuple(t.shape) for t in _tensors(CASES[name][0](torch, None))]


@pytest.mark.parametrize("name", list(CASES))
def test_wrong_shape_warns_and_resizes(name):
    er, eout, ew = _run(ember, name, (5,))
    tr, tout, tw = _run(torch, name, (5,))
    n = len(_tensors(tr))
    assert len(tw) == n  # torch warns once per resized out= tensor
    assert len(ew) == n, [str(x.message) for x in ew]
    assert all(issubclass(x.category, UserWarning) for x in ew)
    assert all(name.removesuffix(".dim") in str(x.message) for x in ew)  # names the op
    for e, t, eo in zip(_tensors(er), _tensors(tr), _tensors(eout)):
        assert e is eo  # the out= tensors come back
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_allclose(to_np(e), to_np(t), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_empty_out_is_resized_silently(name):
    er, _, ew = _run(ember, name, (0,))
    tr, _, tw = _run(torch, name, (0,))
    assert tw == [] and ew == []
    for e, t in zip(_tensors(er), _tensors(tr)):
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_allclose(to_np(e), to_np(t), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_right_shape_no_warning(name):
    call, dtypes = CASES[name]
    shapes = _right_shape(name)
    outs = [ember.full(list(s), 7, dtype=getattr(ember, d)) for s, d in zip(shapes, dtypes)]
    ptrs = [o.data_ptr() for o in outs]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = call(ember, outs[0] if len(outs) == 1 else tuple(outs))
    assert [t.data_ptr() for t in _tensors(r)] == ptrs  # written in place, not reallocated


def test_warning_as_error_raises_and_leaves_out_alone():
    out = ember.full((5,), 7.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="add: the out= tensor had shape"):
            ember.add(ember.ones(2, 3), 1, out=out)
        with pytest.raises(UserWarning, match="linalg.inv"):
            ember.linalg.inv(ember.eye(2), out=out)
    assert out.shape == (5,) and out.tolist() == [7.0] * 5


def test_warning_points_at_the_caller():
    with pytest.warns(UserWarning, match="resized") as rec:
        ember.sum(ember.ones(2, 3), 0, out=ember.empty(1))
    assert rec[0].filename == __file__


def test_out_dtype_and_device_checks():
    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        ember.add(x, x, out=ember.empty(2, 3, dtype=ember.int64))
    # reductions and scans without dtype= compute in the out= tensor's dtype (as torch 2.13's)
    assert ember.sum(x, 0, out=ember.empty(3, dtype=ember.int64)).tolist() == [2, 2, 2]
    with pytest.raises(RuntimeError, match="sum: expected the out= tensor on device cpu"):
        ember.sum(x, 0, out=ember.empty(3, device="meta"))
    with pytest.raises(RuntimeError, match="linalg.inv: expected the out= tensor to have dtype"):
        ember.linalg.inv(ember.eye(2), out=ember.empty(2, 2, dtype=ember.int32))
    # the results of sort must go to tensors of their exact dtypes (as torch)
    with pytest.raises(RuntimeError, match="sort.*dtype int64"):
        ember.sort(x, out=(ember.empty(0), ember.empty(0, dtype=ember.int32)))
    with pytest.raises(TypeError, match="tuple of 2 tensors"):
        ember.sort(x, out=(ember.empty(0),))
    # nothing was written before the dtype error
    v = ember.full((2,), 3.0)
    with pytest.raises(RuntimeError):
        ember.topk(x, 1, out=(v, ember.empty(0, dtype=ember.float32)))
    assert v.tolist() == [3.0, 3.0]


def test_tuple_out_returns_named_tuple():
    x = ember.tensor([[3.0, 1.0, 2.0]])
    v, i = ember.empty(0), ember.empty(0, dtype=ember.int64)
    r = ember.sort(x, descending=True, out=(v, i))
    assert r.values is v and r.indices is i
    assert v.tolist() == [[3.0, 2.0, 1.0]] and i.tolist() == [[0, 2, 1]]
    with pytest.raises(TypeError):
        x.sort(out=(v, i))  # as torch: the method takes no out=


# (call, out dtype): torch requires the result's dtype exactly for some ops (matmul, argmax,
# amax, norm, linalg) and takes any dtype the result casts to for others (sum, add, cat, the
# linalg composites).
DTYPE_RULES = [
    (lambda m, o: m.sum(m.ones(2, 3), 0, out=o), "float64"),
    (lambda m, o: m.add(m.ones(2, 3), 1, out=o), "float64"),
    (lambda m, o: m.cumsum(m.ones(2, 3), 0, out=o), "float64"),
    (lambda m, o: m.cat([m.ones(2, 3)], out=o), "float64"),
    (lambda m, o: m.matmul(m.ones(2, 3), m.ones(3, 2), out=o), "float64"),
    (lambda m, o: m.mm(m.ones(2, 3), m.ones(3, 2), out=o), "float16"),
    (lambda m, o: m.addmm(m.ones(2, 2), m.ones(2, 3), m.ones(3, 2), out=o), "float64"),
    (lambda m, o: m.argmax(m.ones(2, 3), 1, out=o), "float32"),
    (lambda m, o: m.argmin(m.ones(2, 3), 1, out=o), "int32"),
    (lambda m, o: m.amax(m.ones(2, 3), 1, out=o), "float64"),
    (lambda m, o: m.norm(m.ones(2, 3), 2, 1, out=o), "float64"),
    (lambda m, o: m.linalg.inv(m.eye(2), out=o), "float64"),
    (lambda m, o: m.linalg.vector_norm(m.ones(3), out=o), "float64"),
    (lambda m, o: m.linalg.pinv(m.eye(2), out=o), "float64"),
    (lambda m, o: m.linalg.matrix_rank(m.eye(2), out=o), "int32"),
    (lambda m, o: m.cholesky_inverse(m.eye(2), out=o), "float64"),
]


@pytest.mark.parametrize("i", range(len(DTYPE_RULES)))
def test_out_dtype_rule_matches_torch(i):
    call, dtype = DTYPE_RULES[i]
    try:
        t = call(torch, torch.empty(0, dtype=getattr(torch, dtype)))
    except RuntimeError:
        with pytest.raises(RuntimeError, match="expected the out= tensor to have dtype"):
            call(ember, ember.empty(0, dtype=getattr(ember, dtype)))
        return
    e = call(ember, ember.empty(0, dtype=getattr(ember, dtype)))
    assert str(e.dtype).split(".")[-1] == dtype
    np.testing.assert_allclose(to_np(e), to_np(t))
