"""Core compatibility gaps with PyTorch (session 24): pickling and deep copies of views (strides,
storage offset, whole storage; deepcopy keeps views of one storage shared), ..."""

import copy
import pickle

import ember
import pytest

try:
    import torch
except ImportError:  # the comparisons against PyTorch skip without it
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- pickling and deepcopy of views ----------------------------------------------------------

def _geometry(t):
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.untyped_storage().nbytes(),
            t.is_contiguous())


def test_pickle_keeps_view_strides_offset_and_storage():
    b = ember.arange(12.0).reshape(3, 4)
    r = pickle.loads(pickle.dumps(b.t()))
    assert _geometry(r) == ((4, 3), (1, 4), 0, 48, False)
    assert r.tolist() == b.t().tolist()
    r = pickle.loads(pickle.dumps(b[1:, 1:]))
    assert _geometry(r) == ((2, 3), (4, 1), 5, 48, False)
    assert r.tolist() == [[5.0, 6.0, 7.0], [9.0, 10.0, 11.0]]
    assert r._base is None and r.is_leaf
    # a stride-0 expansion keeps its stride (and its small storage)
    r = pickle.loads(pickle.dumps(ember.tensor([1, 2, 3]).expand(4, 3)))
    assert _geometry(r) == ((4, 3), (0, 1), 0, 24, False)
    assert r.tolist() == [[1, 2, 3]] * 4
    # another dtype's view, bool, bfloat16
    r = pickle.loads(pickle.dumps(b.view(ember.int32)[1:]))
    assert (r.dtype, r.stride(), r.storage_offset()) == (ember.int32, (4, 1), 4)
    r = pickle.loads(pickle.dumps(ember.tensor([True, False, True])[1:]))
    assert r.tolist() == [False, True] and r.storage_offset() == 1
    x = ember.arange(16.0).reshape(4, 4).to(ember.bfloat16)[::2]
    r = pickle.loads(pickle.dumps(x))
    assert r.dtype == ember.bfloat16 and r.stride() == (8, 1) and ember.equal(r, x)


def test_pickle_contiguous_and_grad_flags():
    x = ember.arange(6.0).reshape(2, 3)
    r = pickle.loads(pickle.dumps(x))
    assert _geometry(r) == ((2, 3), (3, 1), 0, 24, True) and r.tolist() == x.tolist()
    p = ember.nn.Parameter(ember.arange(12.0).reshape(3, 4).t())
    r = pickle.loads(pickle.dumps(p))
    assert type(r) is ember.nn.Parameter and r.requires_grad and r.stride() == (1, 4)
    r = pickle.loads(pickle.dumps(ember.empty(3, 4, device="meta").t()))
    assert r.device.type == "meta" and r.stride() == (1, 4)
    assert pickle.loads(pickle.dumps(ember.empty(0))).shape == (0,)


def test_pickle_like_torch_no_sharing_between_pickled_tensors():
    # as in PyTorch, each pickled tensor carries its own copy of its storage
    b = ember.arange(12.0).reshape(3, 4)
    a, v = pickle.loads(pickle.dumps([b, b.t()]))
    a[0, 1] = 100.0
    assert v[1, 0].item() == 1.0
    a, c = pickle.loads(pickle.dumps([b, b]))
    assert a is c  # one object stays one object


def test_unpickle_refuses_view_past_storage():
    from ember.multiprocessing_reductions import rebuild_tensor_strided

    with pytest.raises(ValueError, match="do not fit a storage of 16 bytes"):
        rebuild_tensor_strided(b"\0" * 16, "float32", (2, 2), (4, 1), 0, False)
    t = rebuild_tensor_strided(bytes(range(8)), "uint8", (2, 2), (1, 2), 3, False)
    assert t.tolist() == [[3, 5], [4, 6]] and t.storage_offset() == 3


def test_deepcopy_keeps_views_shared():
    b = ember.arange(12.0).reshape(3, 4)
    d = copy.deepcopy({"v": b.t(), "s": b[1:, 1:], "b": b})
    assert d["v"].untyped_storage().data_ptr() == d["s"].untyped_storage().data_ptr()
    assert d["b"].untyped_storage().data_ptr() == d["v"].untyped_storage().data_ptr()
    assert d["b"].untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
    assert d["s"].storage_offset() == 5 and d["v"].stride() == (1, 4)
    d["b"][1, 1] = -1.0
    assert d["v"][1, 1].item() == -1.0 and d["s"][0, 0].item() == -1.0
    assert b[1, 1].item() == 5.0
    x = ember.arange(6.0)[::2]
    r = copy.deepcopy(x)
    assert (r.stride(), r.storage_offset(), r.untyped_storage().nbytes()) == ((2,), 0, 24)
    # leaf flags and grad
    w = ember.ones(3, requires_grad=True)
    w.grad = ember.full((3,), 2.0)
    r = copy.deepcopy(w)
    assert r.requires_grad and r.is_leaf and r.grad.tolist() == [2.0, 2.0, 2.0]
    m = copy.deepcopy(ember.empty(3, 4, device="meta").t())
    assert m.device.type == "meta" and m.stride() == (1, 4)


@needs_torch
def test_pickle_and_deepcopy_match_torch():
    for lib in (ember, torch):
        b = lib.arange(12.0).reshape(3, 4)
        got = []
        for x in (b.t(), b[1:, 1:], b[:, ::2], lib.zeros(2, 3).expand(4, 2, 3)):
            r = pickle.loads(pickle.dumps(x))
            got.append((tuple(r.stride()), r.storage_offset(), r.untyped_storage().nbytes(),
                        r.tolist()))
        d = copy.deepcopy([b, b.t(), b[1:]])
        got.append([x.untyped_storage().data_ptr() == d[0].untyped_storage().data_ptr()
                    for x in d])
        if lib is ember:
            mine = got
    assert mine == got
