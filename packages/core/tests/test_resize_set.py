"""Tensor.resize_ / resize_as_ / set_ / untyped_storage() / storage(), compared with PyTorch."""

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def same(e: ember.Tensor, t: "torch.Tensor") -> None:
    assert tuple(e.shape) == tuple(t.shape)
    assert tuple(e.stride()) == tuple(t.stride())
    assert e.storage_offset() == t.storage_offset()
    assert e.tolist() == t.tolist()


def both(fn):
    return fn(ember), fn(torch)


# ---- resize_ ---------------------------------------------------------------------------------

def test_resize_grow_shrink_grow_keeps_the_first_elements():
    e, t = both(lambda m: m.arange(6.0))
    for sizes in [(2, 3), (2,), (4,), (3, 2), (6,)]:
        e.resize_(*sizes)
        t.resize_(*sizes)
        same(e, t)
    e.resize_(8)
    t.resize_(8)
    # the grown tail is uninitialized: only the first six elements are defined
    assert e[:6].tolist() == t[:6].tolist()
    assert e.untyped_storage().nbytes() == t.untyped_storage().nbytes() == 32


def test_resize_never_shrinks_the_storage_and_takes_a_list():
    e, t = both(lambda m: m.arange(12, dtype=m.int64))
    e.resize_([2, 2])
    t.resize_([2, 2])
    same(e, t)
    assert e.untyped_storage().nbytes() == t.untyped_storage().nbytes() == 96
    e.resize_(ember.Size([3, 4]))
    assert e.flatten().tolist() == list(range(12))


def test_resize_same_sizes_keeps_strides_unless_a_format_is_given():
    e, t = both(lambda m: m.arange(6.0).reshape(2, 3).t())
    e.resize_(3, 2)
    t.resize_(3, 2)
    same(e, t)
    e.resize_(3, 2, memory_format=ember.contiguous_format)
    t.resize_(3, 2, memory_format=torch.contiguous_format)
    assert e.stride() == t.stride() == (2, 1)


def test_resize_channels_last():
    e, t = both(lambda m: m.ones(2, 3, 4, 5))
    e.resize_(2, 3, 4, 6, memory_format=ember.channels_last)
    t.resize_(2, 3, 4, 6, memory_format=torch.channels_last)
    assert e.stride() == t.stride()
    assert e.is_contiguous(memory_format=ember.channels_last)
    e3 = ember.ones(1, 2, 3, 4, 5).resize_(1, 2, 3, 4, 5, memory_format=ember.channels_last_3d)
    t3 = torch.ones(1, 2, 3, 4, 5).resize_(1, 2, 3, 4, 5, memory_format=torch.channels_last_3d)
    assert e3.stride() == t3.stride()
    with pytest.raises(RuntimeError, match="rank 4"):
        ember.ones(2, 3).resize_(2, 3, memory_format=ember.channels_last)
    with pytest.raises(RuntimeError, match="unsupported memory format"):
        ember.ones(2).resize_(3, memory_format=ember.preserve_format)


def test_resize_of_an_offset_view_and_views_stay_valid():
    e, t = both(lambda m: m.arange(4.0))
    ev, tv = e[1:], t[1:]
    ev.resize_(2, 2)
    tv.resize_(2, 2)
    assert ev.shape == tv.shape and ev.stride() == tv.stride()
    assert ev.storage_offset() == tv.storage_offset() == 1
    assert ev.flatten()[:3].tolist() == tv.flatten()[:3].tolist()  # the rest is uninitialized
    assert e.untyped_storage().nbytes() == t.untyped_storage().nbytes() == 20
    # the base keeps its own sizes and sees the reallocated memory
    assert e.tolist() == t.tolist()
    ev[1, 1] = 9.0
    tv[1, 1] = 9.0
    assert e.shape == (4,)
    a = ember.arange(4.0)
    view = a[1:]
    a.resize_(1000)  # reallocates: the view reads the new memory, which holds the old bytes
    assert view.tolist() == [1.0, 2.0, 3.0]
    assert view.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    a[2] = 7.0
    assert view[1].item() == 7.0


def test_resize_bumps_version_and_zero_size():
    e, t = both(lambda m: m.ones(3))
    v = e._version
    e.resize_(0)
    t.resize_(0)
    same(e, t)
    assert e._version == v + 1
    e.resize_(2, 0, 3)
    assert e.shape == (2, 0, 3)


def test_resize_errors():
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        ember.ones(2, requires_grad=True).resize_(3)
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        (ember.ones(2, requires_grad=True) * 2).resize_(3)
    with ember.no_grad(), pytest.raises(RuntimeError, match="require grad"):
        ember.ones(2, requires_grad=True).resize_(3)
    ember.ones(2, requires_grad=True).detach().resize_(3)  # fine
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        ember.ones(2).resize_(-1)
    with pytest.raises(TypeError, match="ints"):
        ember.ones(2).resize_(2.5)
    with pytest.raises(RuntimeError, match="too many elements|overflow|larger than int64"):
        ember.ones(2).resize_(2**40, 2**40)


def test_resize_of_a_numpy_buffer_is_not_resizable():
    arr = np.ones(4)
    e = ember.from_numpy(arr)
    t = torch.from_numpy(np.ones(4))
    for x in (e, t):
        with pytest.raises(RuntimeError, match="Trying to resize storage that is not resizable"):
            x.resize_(5)
    e.resize_(2)  # fits: no storage change
    t.resize_(2)
    same(e, t)


def test_resize_of_shared_memory_is_not_resizable():
    # (torch 2.13's own resize_ of a shared-memory tensor crashes the process: not compared)
    e = ember.arange(4.0).share_memory_()
    assert not e.untyped_storage().resizable()
    with pytest.raises(RuntimeError, match="Trying to resize storage that is not resizable"):
        e.resize_(5)
    e.resize_(2, 2)  # fits: no storage change
    assert e.tolist() == [[0.0, 1.0], [2.0, 3.0]] and e.is_shared()


def test_resize_of_an_inference_tensor_outside_inference_mode():
    with ember.inference_mode():
        e = ember.ones(2)
        e.resize_(3)  # fine inside
    with torch.inference_mode():
        t = torch.ones(2)
    for x in (e, t):
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
            x.resize_(4)
    assert e.shape == (3,)


def test_resize_on_meta_changes_shape_only():
    e = ember.empty(2, device="meta")
    t = torch.empty(2, device="meta")
    e.resize_(4, 5)
    t.resize_(4, 5)
    assert e.shape == t.shape and e.stride() == t.stride()
    assert e.untyped_storage().nbytes() == t.untyped_storage().nbytes() == 80
    assert e.is_meta


def test_resize_as_():
    e, t = both(lambda m: m.arange(3.0))
    e.resize_as_(ember.ones(2, 2))
    t.resize_as_(torch.ones(2, 2))
    assert e.shape == t.shape
    assert e.flatten()[:3].tolist() == t.flatten()[:3].tolist()
    with pytest.raises(TypeError, match="must be Tensor"):
        e.resize_as_([2, 2])


def test_collate_style_preallocated_batch():
    # default_collate's older form: a buffer of the batch's numel, then resize_ to (B, *shape)
    batch = [ember.full((2, 3), float(i)) for i in range(4)]
    out = batch[0].new_empty(0).resize_(len(batch), *batch[0].size())
    ember.stack(batch, out=out)
    assert out.shape == (4, 2, 3) and out[3].tolist() == [[3.0] * 3] * 2


def test_old_default_collate_shared_storage_pattern():
    # torch's older default_collate in a DataLoader worker
    batch = [ember.full((2, 3), float(i)) for i in range(4)]
    elem = batch[0]
    storage = elem.storage()._new_shared(sum(x.numel() for x in batch))
    out = elem.new(storage).resize_(len(batch), *list(elem.size()))
    ember.stack(batch, 0, out=out)
    assert out.is_shared() and storage.is_shared()
    assert out.untyped_storage().data_ptr() == storage.data_ptr()
    assert out[2].tolist() == [[2.0] * 3] * 2
    raw = elem.untyped_storage()._new_shared(16)
    assert raw.nbytes() == 16 and raw.is_shared()
    assert elem.new(raw).shape == (4,)


# ---- set_ ------------------------------------------------------------------------------------

def test_set_to_tensor_shares_storage():
    e_src, t_src = both(lambda m: m.arange(6.0).reshape(2, 3)[:, 1:])
    e, t = ember.empty(0), torch.empty(0)
    e.set_(e_src)
    t.set_(t_src)
    same(e, t)
    assert e.untyped_storage().data_ptr() == e_src.untyped_storage().data_ptr()
    assert e.is_set_to(e_src) and not e.is_set_to(e_src.clone())
    e[0, 0] = 100.0
    assert e_src[0, 0].item() == 100.0
    with pytest.raises(RuntimeError, match="could not set tensor of type"):
        ember.empty(0).set_(ember.arange(3))


def test_set_storage_offset_size_stride():
    e_src, t_src = both(lambda m: m.arange(6.0))
    e, t = ember.empty(0), torch.empty(0)
    e.set_(e_src.untyped_storage(), 2, (2, 2), (1, 1))
    t.set_(t_src.untyped_storage(), 2, (2, 2), (1, 1))
    same(e, t)
    e.set_(e_src.untyped_storage())
    t.set_(t_src.untyped_storage())
    same(e, t)
    e.set_(e_src.storage(), 1, (5,))
    t.set_(t_src.storage(), 1, (5,))
    same(e, t)


def test_set_grows_a_too_small_storage_like_torch():
    e_src, t_src = both(lambda m: m.arange(6.0))
    e, t = ember.empty(0), torch.empty(0)
    e.set_(e_src.untyped_storage(), 2, (5,), (1,))
    t.set_(t_src.untyped_storage(), 2, (5,), (1,))
    assert e.untyped_storage().nbytes() == t.untyped_storage().nbytes() == 28
    assert e[:4].tolist() == t[:4].tolist()
    assert e_src.tolist() == t_src.tolist()  # the source keeps its sizes and values
    fixed = ember.from_numpy(np.zeros(2, dtype=np.float32))
    with pytest.raises(RuntimeError, match="not resizable"):
        ember.empty(0).set_(fixed.untyped_storage(), 0, (3,), (1,))


def test_set_empty_and_errors():
    e, t = both(lambda m: m.arange(4.0))
    e.set_()
    t.set_()
    same(e, t)
    assert e.untyped_storage().nbytes() == 0
    e.resize_(3)  # an empty storage grows
    assert e.shape == (3,)
    s = ember.arange(4.0).untyped_storage()
    with pytest.raises(RuntimeError, match="negative dimension"):
        ember.empty(0).set_(s, 0, (-1,), (1,))
    with pytest.raises(RuntimeError, match="invalid storage offset"):
        ember.empty(0).set_(s, -1, (1,), (1,))
    with pytest.raises(RuntimeError, match="mismatch in length"):
        ember.empty(0).set_(s, 0, (1, 1), (1,))
    with pytest.raises(TypeError, match="storage"):
        ember.empty(0).set_([1, 2])
    with pytest.raises(RuntimeError, match="requires grad"):
        ember.ones(2, requires_grad=True).set_(ember.ones(3))
    w = ember.ones(2, requires_grad=True)
    with ember.no_grad():
        w.set_(ember.full((3,), 2.0))
    assert w.tolist() == [2.0, 2.0, 2.0] and w.requires_grad


def test_set_of_a_view_detaches_it_from_its_base():
    base = ember.zeros(4)
    view = base[:2]
    view.set_(ember.ones(3))
    assert view._base is None
    view[0] = 5.0
    assert base.tolist() == [0.0] * 4


# ---- storages --------------------------------------------------------------------------------

def test_untyped_storage_basics_match_torch():
    e, t = both(lambda m: m.arange(6, dtype=m.int32).reshape(2, 3)[1])
    es, ts = e.untyped_storage(), t.untyped_storage()
    assert es.nbytes() == ts.nbytes() == 24
    assert es.size() == len(es) == ts.size() == len(ts)
    assert es.element_size() == ts.element_size() == 1
    assert es.data_ptr() == e.data_ptr() - 12
    assert str(es.device) == "cpu" and not es.is_cuda
    assert es.tolist() == ts.tolist()
    # PyTorch's repr: the bytes one a line, then the class, device and size
    assert repr(es) == repr(ts).replace("torch", "ember")
    fresh = ember.UntypedStorage(8)
    assert fresh.nbytes() == 8 and fresh.resizable()
    fresh.resize_(16)
    assert fresh.nbytes() == 16
    fresh.resize_(4)  # shrinks, as PyTorch's
    assert fresh.nbytes() == 4


def test_typed_storage_basics_match_torch():
    e, t = both(lambda m: m.arange(6.0))
    es, ts = e.storage(), t.untyped_storage()
    assert es.size() == len(es) == 6
    assert es.nbytes() == ts.nbytes()
    assert es.element_size() == 4 and es.dtype == ember.float32
    assert es.data_ptr() == e.data_ptr()
    assert es.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert e._typed_storage().size() == 6
    assert es.untyped().nbytes() == 24
