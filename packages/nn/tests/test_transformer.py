"""MultiheadAttention and the Transformer layers against PyTorch with identical weights."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import nn
from nn_helpers import assert_close, copy_weights, to_ember, to_np, to_torch

torch = pytest.importorskip("torch")

TOL = {"rtol": 1e-9, "atol": 1e-10}
# the tests mix bool padding masks with float attention masks on purpose
pytestmark = pytest.mark.filterwarnings("ignore:Support for mismatched", "ignore:enable_nested_tensor")


def _weights(shape):
    return np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)


def _backward(out_e, out_t):
    w = _weights(tuple(out_e.shape))
    (out_e * ember.from_numpy(w)).sum().backward()
    (out_t * torch.from_numpy(w)).sum().backward()


def _compare_grads(e, t, tol=TOL):
    for (n, pe), (_, pt) in zip(e.named_parameters(), t.named_parameters()):
        if pt.grad is None:
            assert pe.grad is None or not to_np(pe.grad).any(), n
            continue
        assert pe.grad is not None, n
        assert_close(pe.grad, pt.grad, **tol)


def _mha_pair(*args, **kwargs):
    ember.manual_seed(0)
    e = nn.MultiheadAttention(*args, dtype=ember.float64, **kwargs)
    t = torch.nn.MultiheadAttention(*args, dtype=torch.float64, **kwargs)
    copy_weights(e, t)
    return e, t


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"batch_first": True},
        {"kdim": 3, "vdim": 5},
        {"add_bias_kv": True, "add_zero_attn": True},
        {"bias": False},
    ],
)
@pytest.mark.parametrize("avg", [True, False])
def test_mha_matches_torch(kw, avg):
    e, t = _mha_pair(8, 2, **kw)
    assert list(e.state_dict()) == list(t.state_dict())
    rng = np.random.default_rng(0)
    L, S, N = 4, 6, 3
    bf = kw.get("batch_first", False)
    shp = lambda n, d: (N, n, d) if bf else (n, N, d)  # noqa: E731
    q = rng.standard_normal(shp(L, 8))
    k = rng.standard_normal(shp(S, kw.get("kdim", 8)))
    v = rng.standard_normal(shp(S, kw.get("vdim", 8)))
    kpm = np.zeros((N, S), dtype=bool)
    kpm[0, -2:] = True
    mask = rng.standard_normal((L, S))
    ins_e = [to_ember(a, True) for a in (q, k, v)]
    ins_t = [to_torch(a, True) for a in (q, k, v)]
    oe, we = e(*ins_e, key_padding_mask=to_ember(kpm), attn_mask=to_ember(mask), average_attn_weights=avg)
    ot, wt = t(*ins_t, key_padding_mask=to_torch(kpm), attn_mask=to_torch(mask), average_attn_weights=avg)
    assert_close(oe, ot, **TOL)
    assert_close(we, wt, **TOL)
    _backward(oe, ot)
    for a, b in zip(ins_e, ins_t):
        assert_close(a.grad, b.grad, **TOL)
    _compare_grads(e, t)


def test_mha_masks_no_weights_and_unbatched():
    e, t = _mha_pair(6, 3)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 6))
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)
    oe, we = e(to_ember(x), to_ember(x), to_ember(x), attn_mask=to_ember(causal), need_weights=False)
    ot, _ = t(to_torch(x), to_torch(x), to_torch(x), attn_mask=to_torch(causal), need_weights=False)
    assert we is None
    assert_close(oe, ot, **TOL)
    # per-head 3-D mask, batched
    xb = rng.standard_normal((5, 2, 6))
    m3 = rng.standard_normal((2 * 3, 5, 5))
    oe, we = e(*(to_ember(xb),) * 3, attn_mask=to_ember(m3), average_attn_weights=False)
    ot, wt = t(*(to_torch(xb),) * 3, attn_mask=to_torch(m3), average_attn_weights=False)
    assert_close(oe, ot, **TOL)
    assert_close(we, wt, **TOL)
    with pytest.raises(RuntimeError, match=r"attn_mask should be of shape \(5, 5\)"):
        e(*(to_ember(xb),) * 3, attn_mask=ember.zeros(4, 5))
    with pytest.raises(RuntimeError, match="needs attn_mask"):
        e(*(to_ember(xb),) * 3, is_causal=True)
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(7, 2)


def test_mha_dropout_train_eval():
    ember.manual_seed(0)
    m = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = ember.randn(4, 2, 8)
    m.eval()
    a = m(x, x, x)[0]
    assert_close(a, m(x, x, x)[0], rtol=0, atol=0)
    m.train()
    assert not np.allclose(to_np(a), to_np(m(x, x, x)[0]))


def _layer_pair(cls, *args, **kwargs):
    ember.manual_seed(0)
    e = getattr(nn, cls)(*args, dtype=ember.float64, **kwargs)
    t = getattr(torch.nn, cls)(*args, dtype=torch.float64, **kwargs)
    copy_weights(e, t)
    return e, t


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_matches_torch(norm_first, activation):
    kw = dict(dim_feedforward=16, dropout=0.0, activation=activation, norm_first=norm_first, batch_first=True)
    ember.manual_seed(0)
    le = nn.TransformerEncoderLayer(8, 2, dtype=ember.float64, **kw)
    lt = torch.nn.TransformerEncoderLayer(8, 2, dtype=torch.float64, **kw)
    e = nn.TransformerEncoder(le, 2, norm=None)
    t = torch.nn.TransformerEncoder(lt, 2, enable_nested_tensor=False)
    copy_weights(e, t)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 5, 8))
    kpm = np.zeros((3, 5), dtype=bool)
    kpm[1, 3:] = True
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=ember.float64)
    xe, xt = to_ember(x, True), to_torch(x, True)
    oe = e(xe, mask=mask, src_key_padding_mask=to_ember(kpm))
    ot = t(xt, mask=to_torch(mask), src_key_padding_mask=to_torch(kpm))
    assert_close(oe, ot, **TOL)
    _backward(oe, ot)
    assert_close(xe.grad, xt.grad, **TOL)
    _compare_grads(e, t)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    e, t = _layer_pair(
        "TransformerDecoderLayer", 8, 2, dim_feedforward=12, dropout=0.0, norm_first=norm_first
    )
    rng = np.random.default_rng(3)
    tgt, mem = rng.standard_normal((4, 2, 8)), rng.standard_normal((6, 2, 8))
    tm = np.triu(np.full((4, 4), -np.inf), 1)
    mkpm = np.zeros((2, 6), dtype=bool)
    mkpm[0, 4:] = True
    te, tt = to_ember(tgt, True), to_torch(tgt, True)
    me, mt = to_ember(mem, True), to_torch(mem, True)
    oe = e(te, me, tgt_mask=to_ember(tm), memory_key_padding_mask=to_ember(mkpm), tgt_is_causal=True)
    ot = t(tt, mt, tgt_mask=to_torch(tm), memory_key_padding_mask=to_torch(mkpm), tgt_is_causal=True)
    assert_close(oe, ot, **TOL)
    _backward(oe, ot)
    assert_close(te.grad, tt.grad, **TOL)
    assert_close(me.grad, mt.grad, **TOL)
    _compare_grads(e, t)


def test_full_transformer_matches_torch():
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16, dropout=0.0)
    ember.manual_seed(0)
    e = nn.Transformer(dtype=ember.float64, **kw)
    t = torch.nn.Transformer(dtype=torch.float64, **kw)
    assert list(e.state_dict()) == list(t.state_dict())
    copy_weights(e, t)
    rng = np.random.default_rng(4)
    src, tgt = rng.standard_normal((5, 2, 8)), rng.standard_normal((3, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=ember.float64)
    assert_close(mask, torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64))
    se, st = to_ember(src, True), to_torch(src, True)
    oe = e(se, to_ember(tgt), tgt_mask=mask)
    ot = t(st, to_torch(tgt), tgt_mask=to_torch(mask))
    assert_close(oe, ot, **TOL)
    _backward(oe, ot)
    assert_close(se.grad, st.grad, **TOL)
    _compare_grads(e, t)
    # Xavier init on matrices: bounded by sqrt(6 / (fan_in + fan_out))
    w = to_np(nn.Transformer(**kw).encoder.layers[0].linear1.weight)
    assert np.abs(w).max() <= np.sqrt(6 / (8 + 16))


def test_transformer_dropout_and_callable_activation():
    ember.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.3, activation=ember.tanh)
    x = ember.randn(4, 2, 8)
    layer.eval()
    a = layer(x)
    assert_close(a, layer(x), rtol=0, atol=0)
    layer.train()
    assert not np.allclose(to_np(a), to_np(layer(x)))
    with pytest.raises(RuntimeError, match="activation should be"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    model = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(RuntimeError, match="batch size of src"):
        model(ember.randn(3, 2, 8), ember.randn(3, 4, 8))
