"""Quantized CPU tensors (ember.quantize_per_tensor / quantize_per_channel, qint8 / quint8 /
qint32) against explicit values and PyTorch: rounding half to even, clamping, dequantize,
the qparam accessors, printing, indexing, saving, and the ops a quantized tensor supports."""

from __future__ import annotations

import copy
import io

import ember
import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_per_tensor_explicit_values_round_half_even_and_clamp():
    x = ember.tensor([-1.0, 0.25, 0.75, 1.25, 3.0, 100.0, -100.0])
    q = ember.quantize_per_tensor(x, 0.5, 2, ember.quint8)
    # 0.25/0.5 = 0.5 -> 0, 0.75/0.5 = 1.5 -> 2, 1.25/0.5 = 2.5 -> 2 (half to even), then + 2
    assert q.int_repr().tolist() == [0, 2, 4, 4, 8, 202, 0]
    assert q.int_repr().dtype is ember.uint8
    assert q.dequantize().tolist() == [-1.0, 0.0, 1.0, 1.0, 3.0, 100.0, -1.0]
    assert q.dequantize().dtype is ember.float32
    q8 = ember.quantize_per_tensor(x, 0.5, 0, ember.qint8)
    assert q8.int_repr().tolist() == [-2, 0, 2, 2, 6, 127, -128]
    assert q8.int_repr().dtype is ember.int8
    q32 = ember.quantize_per_tensor(x, 1e-9, 0, ember.qint32)
    assert q32.int_repr().tolist()[5:] == [2**31 - 1, -(2**31)]
    assert q.is_quantized and not ember.tensor([1.0]).is_quantized
    assert (q.q_scale(), q.q_zero_point(), q.qscheme()) == (0.5, 2, ember.per_tensor_affine)
    assert isinstance(q.q_scale(), float) and isinstance(q.q_zero_point(), int)
    assert q.shape == (7,) and q.size() == (7,) and q.dim() == 1 and q.numel() == 7
    assert ember.is_tensor(q) and not isinstance(q, ember.Tensor)


def test_dtype_objects():
    assert repr(ember.qint8) == "ember.qint8" and repr(ember.quint8) == "ember.quint8"
    assert repr(ember.qint32) == "ember.qint32"
    assert not ember.qint8.is_floating_point and ember.qint32.itemsize == 4
    assert repr(ember.per_channel_symmetric) == "ember.per_channel_symmetric"
    assert isinstance(ember.per_tensor_affine, ember.qscheme)


@pytest.mark.parametrize("dtype", ["qint8", "quint8", "qint32"])
@pytest.mark.parametrize("scale,zp", [(0.1, 0), (0.37, 3), (0.0123456, -5), (3.3, 10)])
def test_per_tensor_matches_torch(torch, dtype, scale, zp):
    if dtype == "quint8":
        zp = abs(zp)
    g = np.random.default_rng(0)
    x = (g.standard_normal(20000) * 10).astype(np.float32)
    x[:8] = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.0, 1e6, -1e6]) * scale  # ties, clamping
    q = ember.quantize_per_tensor(ember.tensor(x), scale, zp, getattr(ember, dtype))
    t = torch.quantize_per_tensor(torch.tensor(x), scale, zp, getattr(torch, dtype))
    np.testing.assert_array_equal(q.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(q.dequantize().numpy(), t.dequantize().numpy())
    assert q.q_scale() == t.q_scale() and q.q_zero_point() == t.q_zero_point()


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["qint8", "quint8"])
def test_per_channel_matches_torch(torch, axis, dtype):
    g = np.random.default_rng(1)
    x = (g.standard_normal((3, 4, 5)) * 4).astype(np.float32)
    n = x.shape[axis]
    scales = (g.random(n) * 0.1 + 0.01).astype(np.float64)
    zps = g.integers(0, 10, n)
    q = ember.quantize_per_channel(ember.tensor(x), ember.tensor(scales), ember.tensor(zps), axis,
                                   getattr(ember, dtype))
    t = torch.quantize_per_channel(torch.tensor(x), torch.tensor(scales), torch.tensor(zps), axis,
                                   getattr(torch, dtype))
    np.testing.assert_array_equal(q.int_repr().numpy(), t.int_repr().numpy())
    np.testing.assert_array_equal(q.dequantize().numpy(), t.dequantize().numpy())
    assert q.qscheme() is ember.per_channel_affine and q.q_per_channel_axis() == axis
    np.testing.assert_array_equal(q.q_per_channel_scales().numpy(),
                                  t.q_per_channel_scales().numpy())
    assert q.q_per_channel_scales().dtype is ember.float64
    assert q.q_per_channel_zero_points().tolist() == t.q_per_channel_zero_points().tolist()
    assert q.q_per_channel_zero_points().dtype is ember.int64


def test_per_channel_explicit():
    q = ember.quantize_per_channel(ember.tensor([[1.0, 2.0], [1.0, 2.0]]),
                                   ember.tensor([0.5, 1.0]), ember.tensor([0, 1]), 0, ember.quint8)
    assert q.int_repr().tolist() == [[2, 4], [2, 3]]
    assert q.dequantize().tolist() == [[1.0, 2.0], [1.0, 2.0]]


def test_printing_matches_torch(torch):
    x = [-1.0, 0.25, 0.75, 1.25, 3.0, 100.0]
    q = ember.quantize_per_tensor(ember.tensor(x), 0.5, 2, ember.quint8)
    t = torch.quantize_per_tensor(torch.tensor(x), 0.5, 2, torch.quint8)
    assert repr(q) == repr(t).replace("torch.", "ember.")
    m = [[1.0, 2.0], [3.0, 4.0]]
    q = ember.quantize_per_tensor(ember.tensor(m), 0.1, 0, ember.qint32)
    t = torch.quantize_per_tensor(torch.tensor(m), 0.1, 0, torch.qint32)
    assert repr(q) == repr(t).replace("torch.", "ember.")
    m = [[0.9, -1.0, -0.6], [-1.2, 0.8, 1.4]]
    args = ([0.1, 0.2], [0, 1])
    q = ember.quantize_per_channel(ember.tensor(m), ember.tensor(args[0], dtype=ember.float64),
                                   ember.tensor(args[1]), 0, ember.qint8)
    t = torch.quantize_per_channel(torch.tensor(m), torch.tensor(args[0], dtype=torch.float64),
                                   torch.tensor(args[1]), 0, torch.qint8)
    assert repr(q) == repr(t).replace("torch.", "ember.")
    assert repr(q[0]) == repr(t[0]).replace("torch.", "ember.")  # one channel: per tensor


def test_dynamic_matches_torch(torch):
    x = [-1.0, 0.25, 0.75, 1.25, 3.0, 100.0]
    for dtype, rr in (("quint8", False), ("quint8", True), ("qint8", False)):
        q = ember.quantize_per_tensor_dynamic(ember.tensor(x), getattr(ember, dtype), rr)
        t = torch.quantize_per_tensor_dynamic(torch.tensor(x), getattr(torch, dtype), rr)
        assert (q.q_scale(), q.q_zero_point()) == (t.q_scale(), t.q_zero_point())
        assert q.int_repr().tolist() == t.int_repr().tolist()
    q = ember.quantize_per_tensor_dynamic(ember.tensor([0.0, 255.0]), ember.quint8, False)
    assert (q.q_scale(), q.q_zero_point()) == (1.0, 0)


def test_indexing_views_clone():
    x = ember.arange(12, dtype=ember.float32).reshape(3, 4)
    q = ember.quantize_per_tensor(x, 0.5, 1, ember.qint8)
    assert q[1].int_repr().tolist() == [9, 11, 13, 15]
    assert q[:, 1:3].int_repr().tolist() == [[3, 5], [11, 13], [19, 21]]
    assert q[1:, 0].dequantize().tolist() == [4.0, 8.0]
    assert q.reshape(4, 3).int_repr().tolist()[0] == [1, 3, 5]
    assert q.flatten().shape == (12,) and q.t().shape == (4, 3)
    c = q.clone()
    assert c.equal(q) and c._data is not q._data
    assert copy.deepcopy(q).equal(q)
    pc = ember.quantize_per_channel(x, ember.tensor([0.5, 1.0, 2.0]), ember.tensor([0, 1, 2]), 0,
                                    ember.quint8)
    sub = pc[1:]
    assert sub.q_per_channel_scales().tolist() == [1.0, 2.0] and sub.q_per_channel_axis() == 0
    assert sub.dequantize().tolist() == pc.dequantize()[1:].tolist()
    one = pc[2]
    assert one.qscheme() is ember.per_tensor_affine and (one.q_scale(), one.q_zero_point()) == (
        2.0, 2)
    col = pc[:, 2]
    assert col.q_per_channel_axis() == 0
    assert col.dequantize().tolist() == pc.dequantize()[:, 2].tolist() == [2.0, 6.0, 10.0]
    assert pc.t().q_per_channel_axis() == 1


def test_indexing_matches_torch(torch):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 3
    q = ember.quantize_per_tensor(ember.tensor(x), 0.2, 3, ember.quint8)
    t = torch.quantize_per_tensor(torch.tensor(x), 0.2, 3, torch.quint8)
    for idx in ((0,), (slice(None), 1), (Ellipsis, slice(1, 3)), (1, slice(None, None, 2), 0)):
        assert q[idx].int_repr().tolist() == t[idx].int_repr().tolist()
        assert q[idx].shape == tuple(t[idx].shape)


def test_save_load_round_trip():
    q = ember.quantize_per_tensor(ember.tensor([0.3, -2.0, 7.0]), 0.25, -3, ember.qint8)
    pc = ember.quantize_per_channel(ember.tensor([[1.0, 2.0], [3.0, 4.0]]),
                                    ember.tensor([0.5, 0.25]), ember.tensor([1, 0]), 1,
                                    ember.qint8)
    for weights_only in (True, False):
        buf = io.BytesIO()
        ember.save({"q": q, "pc": pc, "dtype": ember.quint8,
                    "scheme": ember.per_channel_symmetric}, buf)
        buf.seek(0)
        d = ember.load(buf, weights_only=weights_only)
        assert d["q"].equal(q) and d["pc"].equal(pc) and d["pc"].q_per_channel_axis() == 1
        assert d["dtype"] is ember.quint8 and d["scheme"] is ember.per_channel_symmetric


def test_supported_ops_and_refusals():
    q = ember.quantize_per_tensor(ember.tensor([-1.0, 0.5, 2.0, -0.2]), 0.1, 5, ember.quint8)
    r = ember.relu(q)
    assert r.int_repr().tolist() == [5, 10, 25, 5] and r.q_scale() == 0.1
    assert ember.dequantize(q).tolist() == q.dequantize().tolist()
    assert ember.flatten(q.reshape(2, 2)).int_repr().tolist() == q.int_repr().tolist()
    cat = ember.cat([q, q])
    assert cat.int_repr().tolist() == q.int_repr().tolist() * 2
    f = ember.tensor([1.5])
    assert f.dequantize() is f
    with pytest.raises(NotImplementedError, match="Could not run 'exp'"):
        ember.exp(q)
    with pytest.raises(NotImplementedError):
        q + q
    with pytest.raises(RuntimeError, match="float32"):
        ember.quantize_per_tensor(ember.tensor([1.0], dtype=ember.float64), 0.1, 0, ember.qint8)
    with pytest.raises(RuntimeError, match="dtype"):
        ember.quantize_per_tensor(ember.tensor([1.0]), 0.1, 0, ember.float32)
    with pytest.raises(RuntimeError, match="zero_point"):
        ember.quantize_per_tensor(ember.tensor([1.0]), 0.1, 300, ember.quint8)
    with pytest.raises(RuntimeError, match="scales"):
        ember.quantize_per_channel(ember.ones(2, 3), ember.tensor([0.1]), ember.tensor([0]), 0,
                                   ember.qint8)
    with pytest.raises(RuntimeError, match="per-channel"):
        q.q_per_channel_scales()


def test_pooling_matches_torch(torch):
    import ember.nn.functional as F

    g = np.random.default_rng(2)
    x = (g.standard_normal((1, 2, 6, 6)) * 3).astype(np.float32)
    q = ember.quantize_per_tensor(ember.tensor(x), 0.05, 60, ember.quint8)
    t = torch.quantize_per_tensor(torch.tensor(x), 0.05, 60, torch.quint8)
    np.testing.assert_array_equal(F.max_pool2d(q, 2).int_repr().numpy(),
                                  torch.nn.functional.max_pool2d(t, 2).int_repr().numpy())
    a = F.adaptive_avg_pool2d(q, 1).int_repr().numpy().astype(int)
    b = torch.nn.functional.adaptive_avg_pool2d(t, 1).int_repr().numpy().astype(int)
    assert np.abs(a - b).max() <= 1


@pytest.mark.parametrize("dtype", ["quint8", "qint8", "qint32"])
def test_nan_matches_torch(torch, dtype):
    x = [float("nan"), 1.0, float("inf"), -float("inf")]
    q = ember.quantize_per_tensor(ember.tensor(x), 0.1, 5, getattr(ember, dtype))
    t = torch.quantize_per_tensor(torch.tensor(x), 0.1, 5, getattr(torch, dtype))
    assert q.int_repr().tolist() == t.int_repr().tolist()
    pc = ember.quantize_per_channel(ember.tensor([x]), ember.tensor([0.1]), ember.tensor([5]), 0,
                                    getattr(ember, dtype))
    tpc = torch.quantize_per_channel(torch.tensor([x]), torch.tensor([0.1]), torch.tensor([5]),
                                     0, getattr(torch, dtype))
    assert pc.int_repr().tolist() == tpc.int_repr().tolist()


def test_bad_scales_raise_instead_of_garbage():
    # PyTorch returns saturated garbage for these; ember says what is wrong
    for scale in (0.0, -0.5, float("nan"), float("inf")):
        with pytest.raises(RuntimeError, match="scale must be a positive finite number"):
            ember.quantize_per_tensor(ember.ones(2), scale, 0, ember.quint8)
    with pytest.raises(RuntimeError, match="scales must be positive"):
        ember.quantize_per_channel(ember.ones(2, 2), ember.tensor([0.5, -0.5]),
                                   ember.tensor([0, 0]), 0, ember.quint8)
    with pytest.raises(TypeError, match="zero_point must be an int"):
        ember.quantize_per_tensor(ember.ones(2), 0.5, 1.5, ember.quint8)
    with pytest.raises(RuntimeError, match="axis 2 is out of range"):
        ember.quantize_per_channel(ember.ones(2, 2), ember.tensor([0.5, 0.5]),
                                   ember.tensor([0, 3]), 2, ember.quint8)


@pytest.mark.parametrize("dtype,zp", [("quint8", 60), ("qint8", 3)])
def test_elementwise_functions_match_torch(torch, dtype, zp):
    import ember.nn.functional as EF
    import torch.nn.functional as TF

    x = (np.random.default_rng(5).standard_normal((1, 2, 4, 4)) * 3).astype(np.float32)
    qe = ember.quantize_per_tensor(ember.tensor(x), 0.05, zp, getattr(ember, dtype))
    qt = torch.quantize_per_tensor(torch.tensor(x), 0.05, zp, getattr(torch, dtype))
    ops = [
        (ember.sigmoid, torch.sigmoid), (EF.hardsigmoid, TF.hardsigmoid),
        (ember.tanh, torch.tanh), (lambda t: t.sigmoid(), lambda t: t.sigmoid()),
        (lambda t: EF.hardtanh(t, -1.0, 1.0), lambda t: TF.hardtanh(t, -1.0, 1.0)),
        (EF.relu6, TF.relu6), (lambda t: EF.leaky_relu(t, 0.2), lambda t: TF.leaky_relu(t, 0.2)),
        (lambda t: t.mean([2, 3]), lambda t: t.mean([2, 3])),
        (lambda t: t.mean((2, 3), keepdim=True), lambda t: t.mean((2, 3), keepdim=True)),
        (lambda t: EF.interpolate(t, scale_factor=2, mode="nearest"),
         lambda t: TF.interpolate(t, scale_factor=2, mode="nearest")),
        (lambda t: EF.interpolate(t, scale_factor=2, mode="bilinear", align_corners=False),
         lambda t: TF.interpolate(t, scale_factor=2, mode="bilinear", align_corners=False)),
        (ember.nn.Sigmoid(), torch.nn.Sigmoid()),
    ]
    for fe, ft in ops:
        a, b = fe(qe), ft(qt)
        assert (a.q_scale(), a.q_zero_point()) == (b.q_scale(), b.q_zero_point())
        assert a.shape == tuple(b.shape) and a.dtype.__repr__()[6:] == repr(b.dtype)[6:]
        d = np.abs(a.int_repr().numpy().astype(int) - b.int_repr().numpy().astype(int))
        assert d.max() <= 1 and (d > 0).mean() < 0.05


def test_fixed_output_qparams_explicit():
    q = ember.quantize_per_tensor(ember.tensor([0.0, 100.0, -100.0]), 1.0, 128, ember.quint8)
    s = ember.sigmoid(q)
    assert (s.q_scale(), s.q_zero_point()) == (1 / 256, 0)
    assert s.int_repr().tolist() == [128, 255, 0]  # 0.5 * 256; 1.0 saturates
    t = q.tanh()
    assert (t.q_scale(), t.q_zero_point()) == (2 / 256, 128)
    assert t.int_repr().tolist() == [128, 255, 0]
    with pytest.raises(NotImplementedError, match="Could not run 'exp'"):
        q.exp()
    with pytest.raises(AttributeError):
        q.no_such_method
