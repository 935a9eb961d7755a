"""Quantized tensors, part 2: PyTorch's pickles of them (``torch._utils._rebuild_qtensor``) load
in ember, ember's ``save(format="torch")`` of them loads in torch, and float-qparams /
sub-byte (quint4x2) per-channel quantization."""

import io
import pickle

import ember
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _torch_to_ember(obj, legacy=False, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    buf.seek(0)
    return ember.load(buf, **kw)


def _ember_to_torch(obj):
    buf = io.BytesIO()
    ember.save(obj, buf, format="torch")
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def _same(e, t):
    assert e.dtype is getattr(ember, str(t.dtype).split(".")[-1])
    assert str(e.qscheme()).split(".")[-1] == str(t.qscheme()).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    assert e.int_repr().tolist() == t.int_repr().tolist()
    assert e.dequantize().tolist() == t.dequantize().tolist()


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_saved_per_tensor_qtensors_load(legacy):
    q = torch.quantize_per_tensor(torch.tensor([1.0, 2.0, -3.0, 0.26]), 0.1, 3, torch.quint8)
    q8 = torch.quantize_per_tensor(torch.tensor([[1.0, -2.0], [3.0, 4.0]]), 0.5, -2, torch.qint8)
    q32 = torch.quantize_per_tensor(torch.tensor([1e3, -7.0]), 0.25, 5, torch.qint32)
    got = _torch_to_ember({"u": q, "i": q8.t(), "w": q32, "v": q[1:]}, legacy,
                          weights_only=True)
    assert got["u"].int_repr().tolist() == [13, 23, 0, 6]  # explicit: round(x / 0.1) + 3
    assert got["u"].q_scale() == 0.1 and got["u"].q_zero_point() == 3
    _same(got["u"], q)
    _same(got["i"], q8.t())  # a transposed view: its strides are kept
    assert got["i"].int_repr().tolist() == [[0, 4], [-6, 6]]
    _same(got["w"], q32)
    _same(got["v"], q[1:])


def test_torch_saved_per_channel_qtensors_load():
    w = torch.tensor([[0.3, -1.2, 2.0], [0.05, 0.4, -0.7]])
    q = torch.quantize_per_channel(w, torch.tensor([0.1, 0.2], dtype=torch.float64),
                                   torch.tensor([0, 1]), 0, torch.qint8)
    got = _torch_to_ember(q, weights_only=True)
    _same(got, q)
    assert got.int_repr().tolist() == [[3, -12, 20], [1, 3, -2]]  # -2.5 rounds to even
    assert got.q_per_channel_axis() == 0
    assert got.q_per_channel_scales().dtype is ember.float64


def test_torch_saved_float_qparams_and_quint4x2_load():
    w = torch.tensor([[0.0, 0.5, 1.0, -1.0, 0.3], [3.0, 4.0, 5.0, 6.0, 2.2]])
    scales, zps = torch.tensor([0.1, 0.2]), torch.tensor([1.5, -2.0])
    for dtype in (torch.quint8, torch.quint4x2):
        q = torch.quantize_per_channel(w, scales, zps, 0, dtype)
        got = _torch_to_ember(q, weights_only=True)
        assert got.qscheme() is ember.per_channel_affine_float_qparams
        assert got.q_per_channel_zero_points().tolist() == [1.5, -2.0]
        assert got.dequantize().tolist() == q.dequantize().tolist()
        # ember's own quantization of the same values agrees
        mine = ember.quantize_per_channel(ember.tensor(w.tolist()), ember.tensor([0.1, 0.2]),
                                          ember.tensor([1.5, -2.0]), 0,
                                          getattr(ember, str(dtype).split(".")[-1]))
        assert mine.int_repr().tolist() == got.int_repr().tolist()
        back = _ember_to_torch(got)
        assert back.qscheme() == torch.per_channel_affine_float_qparams
        assert back.dequantize().tolist() == q.dequantize().tolist()
    assert got.int_repr().tolist() == [[2, 6, 12, 0, 4], [13, 15, 15, 15, 9]]  # 4-bit: <= 15


def test_ember_saved_qtensors_load_in_torch():
    x = ember.tensor([[1.0, -2.0, 0.3], [4.0, 0.0, -0.26]])
    qs = {"t": ember.quantize_per_tensor(x, 0.1, 7, ember.quint8),
          "c": ember.quantize_per_channel(x, ember.tensor([0.1, 0.05]), ember.tensor([0, -3]), 0,
                                          ember.qint8),
          "i": ember.quantize_per_tensor(x, 0.01, 0, ember.qint32),
          "dtype": ember.quint8, "scheme": ember.per_channel_affine}
    got = _ember_to_torch(qs)
    assert got["dtype"] is torch.quint8 and got["scheme"] is torch.per_channel_affine
    for k in ("t", "c", "i"):
        assert got[k].int_repr().tolist() == qs[k].int_repr().tolist()
        assert got[k].dequantize().tolist() == qs[k].dequantize().tolist()
        assert got[k].qscheme() == getattr(torch, str(qs[k].qscheme()).split(".")[-1])
    assert got["c"].q_per_channel_zero_points().tolist() == [0, -3]
    # and torch's own quantization of the values is the same
    ref = torch.quantize_per_tensor(torch.tensor(x.tolist()), 0.1, 7, torch.quint8)
    assert torch.equal(got["t"], ref)


def test_ember_format_keeps_float_qparams():
    q = ember.quantize_per_channel(ember.tensor([[0.2, 0.9]]), ember.tensor([0.1]),
                                   ember.tensor([0.5]), 0, ember.quint4x2)
    buf = io.BytesIO()
    ember.save(q, buf)
    buf.seek(0)
    got = ember.load(buf, weights_only=True)
    assert got.qscheme() is ember.per_channel_affine_float_qparams
    assert got.int_repr().tolist() == [[2, 10]] and ember.equal(got, q)


def test_malformed_torch_quantizer_params_are_checkpoint_errors():
    from ember.serialization import CheckpointError

    q = torch.quantize_per_channel(torch.ones(2, 2), torch.tensor([0.1, 0.2]),
                                   torch.tensor([0, 0]), 0, torch.qint8)
    buf = io.BytesIO()
    torch.save(q, buf)
    assert ember.load(io.BytesIO(buf.getvalue())).int_repr().tolist() == [[10, 10], [5, 5]]
    # a per-tensor scheme with per-channel parameters
    with pytest.raises((CheckpointError, pickle.UnpicklingError)):
        ember.load(io.BytesIO(buf.getvalue().replace(b"per_channel_affine",
                                                     b"per_tensor_affine\n")))


def test_torch_pickles_with_bad_quantizer_values_are_refused():
    import struct

    from ember.serialization import CheckpointError

    q = torch.quantize_per_tensor(torch.ones(2), 0.5, 3, torch.quint8)
    buf = io.BytesIO()
    torch.save(q, buf, _use_new_zipfile_serialization=False)  # (no CRC over the pickle)
    good = buf.getvalue()
    assert ember.load(io.BytesIO(good)).int_repr().tolist() == [5, 5]
    # the scale (BINFLOAT, 8 bytes big-endian) set to -0.5

    bad = good.replace(b"G" + struct.pack(">d", 0.5), b"G" + struct.pack(">d", -0.5))
    assert bad != good
    with pytest.raises((CheckpointError, RuntimeError), match="scale"):
        ember.load(io.BytesIO(bad))
