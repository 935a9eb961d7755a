"""Round 20's fixes, found by the r20_ programs:

- nn.MultiheadAttention in eval mode with boolean masks (PyTorch's fused self-attention path)
  gives NaN rows for queries that may attend to no key; float masks and training mode give 0.
- nn.TransformerEncoderLayer's fused eval path does the same whatever the masks' dtype; its
  slow path (another activation) turns boolean masks into float ones first and gives finite rows.
- gradcheck / gradgradcheck evaluate the finite differences in the caller's grad mode, so a
  function that differentiates inside (an IRM gradient penalty) can be checked."""

from __future__ import annotations

import math
import warnings

import ember
import ember.nn as nn
import numpy as np
import pytest

L, E = 4, 8


def _fill(module, seed=0):
    rng = np.random.default_rng(seed)
    with ember.no_grad():
        for p in module.parameters():
            p.copy_(ember.from_numpy(rng.normal(0, 0.3, size=tuple(p.shape))).float())
    return module


def _x(seed=1):
    return ember.from_numpy(np.random.default_rng(seed).normal(size=(2, L, E))).float()


PAD = [[True, True, False, False], [False, False, False, False]]


def _causal_bool():
    return ember.triu(ember.ones(L, L, dtype=ember.bool), 1)


def _rows_nan(out):
    return [[bool(math.isnan(v)) for v in row] for row in out[..., 0].tolist()]


def _mha_out(lib, training, bool_masks, grad=False, seed=0):
    mha = lib.nn.MultiheadAttention(E, 2, batch_first=True)
    rng = np.random.default_rng(seed)
    with lib.no_grad():
        for p in mha.parameters():
            p.copy_(lib.from_numpy(rng.normal(0, 0.3, size=tuple(p.shape))).float())
    mha.train(training)
    x = lib.from_numpy(np.random.default_rng(1).normal(size=(2, L, E))).float()
    pad = lib.tensor(PAD)
    causal = lib.triu(lib.ones(L, L, dtype=lib.bool), 1)
    if not bool_masks:
        pad = lib.zeros(2, L).masked_fill(pad, float("-inf"))
        causal = lib.zeros(L, L).masked_fill(causal, float("-inf"))
    with lib.set_grad_enabled(grad):
        return mha(x, x, x, attn_mask=causal, key_padding_mask=pad, need_weights=False)[0]


def test_mha_eval_boolean_masks_fully_masked_rows_are_nan():
    out = _mha_out(ember, training=False, bool_masks=True)
    assert _rows_nan(out) == [[True, True, False, False], [False] * 4]
    # the other rows are the same numbers as the slow path's
    ref = _mha_out(ember, training=True, bool_masks=True)
    assert ember.allclose(out[0, 2:], ref[0, 2:]) and ember.allclose(out[1], ref[1])
    assert not bool(ember.isnan(ref).any())

def test_mha_float_masks_training_and_grad_stay_finite():
    for kw in ({"training": False, "bool_masks": False}, {"training": True, "bool_masks": True},
               {"training": False, "bool_masks": True, "grad": True}):
        out = _mha_out(ember, **kw)
        assert not bool(ember.isnan(out).any()), kw


def test_mha_fully_padded_sequence_and_need_weights():
    mha = _fill(nn.MultiheadAttention(E, 2, batch_first=True)).eval()
    x = _x()
    pad = ember.tensor([[True] * L, [False] * L])
    with ember.no_grad():
        out = mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        odd = _fill(nn.MultiheadAttention(E, 1, batch_first=True)).eval()(
            x, x, x, key_padding_mask=pad, need_weights=False)[0]
        cross = mha(x, x.clone(), x.clone(), key_padding_mask=pad, need_weights=False)[0]
    assert _rows_nan(out) == [[True] * L, [False] * L]
    assert not bool(ember.isnan(odd).any())  # an odd number of heads: not the fused path
    assert not bool(ember.isnan(cross).any())  # not self-attention: not the fused path


def _layer(activation="relu", norm_first=False):
    layer = nn.TransformerEncoderLayer(E, 2, 16, dropout=0.0, batch_first=True,
                                       activation=activation, norm_first=norm_first)
    return _fill(layer).eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_fast_path_nan_rows_any_mask_dtype(norm_first):
    layer = _layer(norm_first=norm_first)
    x = _x()
    pad = ember.tensor(PAD)
    fpad = ember.zeros(2, L).masked_fill(pad, float("-inf"))
    causal = nn.Transformer.generate_square_subsequent_mask(L)
    with ember.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m, kpm in ((_causal_bool(), pad), (causal, fpad), (causal, pad)):
            out = layer(x, src_mask=m, src_key_padding_mask=kpm)
            assert _rows_nan(out) == [[True, True, False, False], [False] * 4]
        assert not bool(ember.isnan(layer(x, src_mask=_causal_bool())).any())
    # with grad (training-style call) the same layer gives finite rows
    assert not bool(ember.isnan(layer(x, src_mask=causal, src_key_padding_mask=pad)).any())


def test_encoder_layer_slow_path_and_hooks_stay_finite():
    x = _x()
    pad = ember.tensor(PAD)
    with ember.no_grad():
        tanh = _layer(activation=ember.tanh)(x, src_mask=_causal_bool(), src_key_padding_mask=pad)
        hooked = _layer()
        hooked.register_forward_hook(lambda m, i, o: None)
        h = hooked(x, src_mask=_causal_bool(), src_key_padding_mask=pad)
    assert not bool(ember.isnan(tanh).any()) and not bool(ember.isnan(h).any())


def test_stack_with_mask_propagates_nan_and_nested_path_zeroes():
    enc = nn.TransformerEncoder(_layer(), 2, enable_nested_tensor=False).eval()
    x = _x()
    pad = ember.tensor(PAD)
    with ember.no_grad():
        out = enc(x, mask=nn.Transformer.generate_square_subsequent_mask(L),
                  src_key_padding_mask=pad)
    # layer 2 multiplies the NaN values of padded keys by zero weights: the whole sequence
    assert _rows_nan(out) == [[True] * 4, [False] * 4]
    right = ember.tensor([[False, False, True, True], [False] * 4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nested = nn.TransformerEncoder(_layer(), 2).eval()
    with ember.no_grad():
        z = nested(x, src_key_padding_mask=right)
    assert not bool(ember.isnan(z).any()) and z[0, 2:].abs().max().item() == 0.0


def _torch_layer_out(torch, activation, mask_kind):
    layer = torch.nn.TransformerEncoderLayer(E, 2, 16, dropout=0.0, batch_first=True,
                                             activation=activation)
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.3, size=tuple(p.shape))).float())
    layer.eval()
    x = torch.from_numpy(np.random.default_rng(1).normal(size=(2, L, E))).float()
    pad = torch.tensor(PAD)
    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    if mask_kind == "float":
        causal = torch.zeros(L, L).masked_fill(causal, float("-inf"))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return layer(x, src_mask=causal, src_key_padding_mask=pad).numpy()


@pytest.mark.parametrize("activation,mask_kind", [("relu", "bool"), ("gelu", "float"),
                                                   ("tanh", "bool")])
def test_encoder_layer_matches_torch(activation, mask_kind):
    torch = pytest.importorskip("torch")
    ref = _torch_layer_out(torch, activation if activation != "tanh" else torch.tanh, mask_kind)
    got = _torch_layer_out(ember, activation if activation != "tanh" else ember.tanh, mask_kind)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)  # NaN positions equal too


@pytest.mark.parametrize("training,bool_masks", [(False, True), (False, False), (True, True)])
def test_mha_matches_torch(training, bool_masks):
    torch = pytest.importorskip("torch")
    ref = _mha_out(torch, training, bool_masks).numpy()
    got = _mha_out(ember, training, bool_masks).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_decoder_layer_bool_tgt_mask_nan_rows_like_torch():
    dec = _fill(nn.TransformerDecoderLayer(E, 2, 16, dropout=0.0, batch_first=True)).eval()
    x, mem = _x(), _x(2)[:, :3]
    with ember.no_grad():
        b = dec(x, mem, tgt_mask=_causal_bool(), tgt_key_padding_mask=ember.tensor(PAD))
        f = dec(x, mem, tgt_mask=nn.Transformer.generate_square_subsequent_mask(L),
                tgt_key_padding_mask=ember.tensor(PAD))
    assert _rows_nan(b) == [[True, True, False, False], [False] * 4]
    assert not bool(ember.isnan(f).any())


def _penalty(lib, w, x, y):
    scale = lib.ones(1, dtype=w.dtype, requires_grad=True)
    loss = lib.nn.functional.binary_cross_entropy_with_logits((x @ w) * scale, y)
    return lib.autograd.grad(loss, [scale], create_graph=True)[0].pow(2).sum()


def test_gradcheck_function_that_differentiates_inside():
    rng = np.random.default_rng(5)
    x = ember.from_numpy(rng.normal(size=(12, 3)))
    y = ember.from_numpy((rng.uniform(size=12) > 0.5).astype(np.float64))
    w = ember.from_numpy(rng.normal(size=3)).requires_grad_(True)
    assert ember.autograd.gradcheck(lambda v: _penalty(ember, v, x, y), (w,))
    assert ember.autograd.gradgradcheck(lambda v: _penalty(ember, v, x, y), (w,))
    # the penalty's value and its gradient, against the closed form
    # d/ds BCE(s z, y) at s = 1 is mean((sigmoid(z) - y) z)
    z = x @ w.detach()
    g = ((ember.sigmoid(z) - y) * z).mean()
    assert _penalty(ember, w, x, y).item() == pytest.approx(g.item() ** 2, rel=1e-12)


def test_gradcheck_in_grad_mode_and_under_no_grad():
    x = ember.tensor([0.3, -1.2, 2.0], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))
    # under no_grad the output has no graph while its numerical derivative is not 0 (as PyTorch)
    with ember.no_grad(), pytest.raises(ember.autograd.GradcheckError):
        ember.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))


def test_gradcheck_penalty_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    xn, yn, wn = rng.normal(size=(10, 3)), (rng.uniform(size=10) > 0.5) * 1.0, rng.normal(size=3)
    vals = []
    for lib in (torch, ember):
        w = lib.from_numpy(wn).requires_grad_(True)
        x, y = lib.from_numpy(xn), lib.from_numpy(yn)
        assert lib.autograd.gradcheck(lambda v: _penalty(lib, v, x, y), (w,))
        p = _penalty(lib, w, x, y)
        vals.append([p.item(), *lib.autograd.grad(p, w)[0].tolist()])
    np.testing.assert_allclose(vals[1], vals[0], rtol=1e-10)


def test_mha_per_head_mask_one_head_blocked_and_unbatched():
    # a row blocked in one head only is NaN (the heads are mixed by out_proj); unbatched
    # inputs do not take the fused path
    rng = np.random.default_rng(0)
    mha = nn.MultiheadAttention(E, 2, batch_first=True)
    with ember.no_grad():
        for p in mha.parameters():
            p.copy_(ember.from_numpy(rng.normal(0, 0.3, size=tuple(p.shape))).float())
    mha.eval()
    x = ember.from_numpy(rng.normal(size=(2, 3, E))).float()
    m = ember.zeros(4, 3, 3, dtype=ember.bool)
    m[1, 0] = True
    m[2, 2] = True
    with ember.no_grad():
        o = mha(x, x, x, attn_mask=m, need_weights=False)[0]
        u = mha(x[0], x[0], x[0], attn_mask=m[:2], need_weights=False)[0]
    assert _rows_nan(o) == [[True, False, False], [False, False, True]]
    np.testing.assert_allclose(o[0, 1:, 0].tolist(), [1.6931, 1.5299], atol=1e-4)  # torch 2.13
    np.testing.assert_allclose(u[:, 0].tolist(), [1.6827, 1.6931, 1.5299], atol=1e-4)
