"""The meta device: tensors with sizes, strides and dtype and no data (PyTorch's). Factories,
views, element-wise ops, reductions and autograd run on meta and give the CPU's metadata;
reading values is a clear error; `with ember.device("meta")` / set_default_device pick where
factories allocate; mixing devices raises PyTorch's error (0-d CPU tensors excepted)."""

from __future__ import annotations

import threading

import ember
import pytest
from core_helpers import torch


def meta(*shape, **kw):
    return ember.empty(*shape, device="meta", **kw)


def same_meta(m, c):
    assert m.device.type == "meta"
    assert (tuple(m.shape), m.stride(), m.dtype) == (tuple(c.shape), c.stride(), c.dtype)


def test_factories_take_no_memory():
    before = ember.memory_allocated() if hasattr(ember, "memory_allocated") else None
    big = ember.empty(1 << 20, 1 << 20, device="meta")  # 4 TiB worth of float32
    assert big.shape == (1 << 20, 1 << 20) and big.device == ember.device("meta")
    for f in (ember.zeros, ember.ones, ember.rand, ember.randn):
        t = f(1 << 20, 1 << 16, device="meta")
        assert t.device.type == "meta"
    t = ember.full((1 << 20, 1 << 16), 2.5, device="meta")
    t.uniform_()
    t.normal_(0, 0.02)
    t.fill_(3)
    t.zero_()
    assert ember.arange(10, device="meta").shape == (10,)
    assert ember.randint(0, 5, (3,), device="meta").dtype == ember.int64
    if before is not None:
        assert ember.memory_allocated() - before < 1 << 20


def test_data_access_is_a_clear_error():
    m = meta(2, 3)
    with pytest.raises(RuntimeError, match="Tensor.item\\(\\) cannot be called on meta tensors"):
        m.sum().item()
    with pytest.raises(RuntimeError, match="Tensor.item\\(\\) cannot be called on meta tensors"):
        bool(m.sum())
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
        m.tolist()
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
        m.cpu()
    with pytest.raises(TypeError, match="can't convert meta device type tensor to numpy"):
        m.numpy()
    assert m.data_ptr() == 0
    with pytest.raises(NotImplementedError, match="nonzero: not supported on the meta device"):
        m.nonzero()
    with pytest.raises(NotImplementedError, match="masked_select: not supported on the meta"):
        m.masked_select(meta(2, 3, dtype=ember.bool))


def test_repr_matches_torch():
    assert repr(meta(2, 3)) == "tensor(..., device='meta', size=(2, 3))"
    assert repr(meta(4, dtype=ember.int64)) == (
        "tensor(..., device='meta', size=(4,), dtype=ember.int64)")
    r = repr(ember.ones(2, device="meta", requires_grad=True) * 2)
    assert r == "tensor(..., device='meta', size=(2,), grad_fn=<MulBackward0>)"
    if torch is not None:
        assert repr(torch.empty(2, 3, device="meta")) == repr(meta(2, 3))


def test_ops_give_cpu_metadata():
    a, b = ember.randn(4, 1, 3), ember.randn(5, 3)
    ma, mb = a.to("meta"), b.to("meta")
    same_meta(ma + mb, a + b)
    same_meta(ma.transpose(0, 2) * 2, a.transpose(0, 2) * 2)
    same_meta((ma > 0), (a > 0))
    same_meta(ma.sum(0), a.sum(0))
    same_meta(ma.mean((0, 2), keepdim=True), a.mean((0, 2), keepdim=True))
    same_meta(ember.matmul(mb, mb.t()), ember.matmul(b, b.t()))
    same_meta(ma.reshape(12).softmax(0), a.reshape(12).softmax(0))
    same_meta(ember.cat([mb, mb], 1), ember.cat([b, b], 1))
    same_meta(ma.int() + 1, a.int() + 1)
    v, i = ma.max(2)
    cv, ci = a.max(2)
    same_meta(v, cv)
    same_meta(i, ci)
    x = ember.randn(2, 3, 8, 8)
    w = ember.randn(4, 3, 3, 3)
    same_meta(ember.conv2d(x.to("meta"), w.to("meta"), padding=1), ember.conv2d(x, w, padding=1))


def test_in_place_and_out_on_meta():
    m = meta(2, 3)
    v = m._version
    m.add_(1)
    assert m._version > v
    out = meta(0)
    r = ember.add(meta(2, 3), meta(3), out=out)
    assert r is out and out.shape == (2, 3)
    c = ember.empty(0)
    ember.add(ember.ones(2, 3), ember.ones(3), out=c)
    same_meta(out, c)


def test_autograd_on_meta():
    w = ember.empty(5, 3, device="meta", requires_grad=True)
    x = ember.empty(4, 3, device="meta")
    y = (x @ w.t()).relu().sum()
    y.backward()
    assert w.grad.device.type == "meta" and w.grad.shape == (5, 3)
    g, = ember.autograd.grad((x * w[0]).sum(), [w])
    assert g.shape == (5, 3)


def test_mixed_devices_error_and_cpu_scalars():
    m = meta(2, 3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but "
                       "found at least two devices, meta and cpu!"):
        m + ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="found at least two devices, cpu and meta!"):
        ember.mm(ember.ones(3, 3), meta(3, 3))
    with pytest.raises(RuntimeError, match="same device"):
        ember.cat([m, ember.ones(2, 3)])
    # a 0-d CPU tensor is a number: it joins any device
    assert (m + ember.tensor(2.0)).device.type == "meta"
    assert (ember.tensor(2.0) * m).device.type == "meta"
    assert ember.where(meta(2, 3, dtype=ember.bool), m, ember.tensor(0.0)).device.type == "meta"


def test_device_context_and_default_device():
    assert ember.get_default_device() == ember.device("cpu")
    with ember.device("meta"):
        assert ember.ones(3).device.type == "meta"
        assert ember.tensor([1, 2]).device.type == "meta"
        assert ember.get_default_device() == ember.device("meta")
        with ember.device("cpu"):
            assert ember.ones(1).device.type == "cpu"
        assert ember.zeros(1).device.type == "meta"
    assert ember.ones(3).device.type == "cpu"
    ember.set_default_device("meta")
    try:
        assert ember.randn(2).device.type == "meta"
        seen = []
        t = threading.Thread(target=lambda: seen.append(ember.ones(1).device.type))
        t.start()
        t.join()
        assert seen == ["cpu"]  # per thread, as in PyTorch
    finally:
        ember.set_default_device(None)
    assert ember.ones(1).device.type == "cpu"


def test_to_and_copies_between_cpu_and_meta():
    c = ember.randn(3, 4).t()
    m = c.to("meta")
    same_meta(m, c)  # a dense layout is kept
    assert m.to("meta") is m
    dst = meta(4, 3)
    dst.copy_(c)  # into meta: only the shapes are checked
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        meta(2, 2).copy_(ember.ones(3))
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        ember.ones(2, 3).copy_(meta(2, 3))


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_strides_of_layout_keeping_ops_match_torch():
    for shape, perm in [((2, 3, 4), (2, 0, 1)), ((4, 5), (1, 0))]:
        e = ember.empty(*shape, device="meta").permute(*perm)
        t = torch.empty(*shape, device="meta").permute(*perm)
        assert (e * 2).stride() == (t * 2).stride()
        assert e.exp().stride() == t.exp().stride()
        assert e.sum(0).stride() == t.sum(0).stride()


def test_hostile_uses_of_meta_tensors_raise_clearly():
    # Each of these crashed (null data read or written) or gave a silent wrong shape before.
    m = meta(4, 3)
    m[0] = 1.0  # a number written into a meta view: nothing to write, no crash
    m[ember.zeros(2, dtype=ember.int64).to("meta")] = 2.0
    m[:] = ember.ones(3)  # a CPU value copied into meta, as torch allows
    with pytest.raises(NotImplementedError, match="boolean mask: not supported on the meta"):
        m[meta(4, 3, dtype=ember.bool)]
    with pytest.raises(TypeError, match="DLPack"):
        m.__dlpack__()
    import pickle

    back = pickle.loads(pickle.dumps(m))  # as torch: by shape, strides and dtype (no data)
    assert (back.device.type, back.shape, back.stride(), back.dtype) == \
        ("meta", m.shape, m.stride(), m.dtype)
    with pytest.raises(RuntimeError, match="cannot be called on meta tensors"):
        ember.tensor([m[0, 0], m[0, 1]])
    with pytest.raises(RuntimeError, match="cannot be called on meta tensors"):
        ember.ones(3)[ember.zeros((), dtype=ember.int64).to("meta")]
