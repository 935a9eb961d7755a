"""Fixes from the ninth drop-in compatibility round (nn): get_submodule / set_submodule lookups
and messages, grid_sample's border gradients, nn.TransformerEncoder's nested-tensor fast path,
and the cross_entropy grad_fn name."""

from __future__ import annotations

import warnings

import ember
import ember.nn as nn
import ember.nn.functional as F
import pytest

try:
    import torch

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


# ---- get_submodule / set_submodule -------------------------------------------------------------
class _Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
        self.register_buffer("scale", ember.ones(1))

    @property
    def first(self):  # a module reachable as an attribute, not registered under this name
        return self.seq[0]


def test_get_submodule_messages_are_torchs():
    m = _Holder()
    assert m.get_submodule("first") is m.seq[0]
    with pytest.raises(AttributeError, match=r"^Sequential has no attribute `5`$"):
        m.get_submodule("seq.5")
    with pytest.raises(AttributeError, match=r"^`scale` is not an nn.Module$"):
        m.get_submodule("scale")
    with pytest.raises(AttributeError, match=r"^`weight` is not an nn.Module$"):
        m.get_submodule("seq.0.weight")
    with pytest.raises(AttributeError, match=r"^Linear has no attribute `w2`$"):
        m.get_parameter("seq.0.w2")


def test_set_submodule_messages_are_torchs():
    m = _Holder()
    with pytest.raises(AttributeError, match=r"^Sequential has no attribute `3`$"):
        m.set_submodule("seq.3", nn.Tanh(), strict=True)
    with pytest.raises(AttributeError, match=r"^`scale` is not an nn.Module$"):
        m.set_submodule("scale", nn.Tanh())
    m.set_submodule("seq.1", nn.Tanh())
    assert isinstance(m.seq[1], nn.Tanh)


@pytest.mark.skipif(not HAVE_TORCH, reason="compares with torch")
def test_submodule_messages_match_torch():
    msgs = []
    for lib in (torch, ember):
        seq = lib.nn.Sequential(lib.nn.Linear(2, 2))
        got = []
        for target in ("3", "0.weight", "0.bias.x"):
            try:
                seq.get_submodule(target)
            except AttributeError as e:
                got.append(str(e))
        msgs.append(got)
    assert msgs[0] == msgs[1]


# ---- grid_sample --------------------------------------------------------------------------------
def _border_case(lib, padding_mode, align_corners):
    img = lib.arange(16.0).view(1, 1, 4, 4).cos()
    grid = lib.tensor([[[[1.0, 0.3], [-1.0, -1.0], [0.2, 1.0], [1.2, 0.5], [-0.7, 0.999],
                         [-1.0, 0.1]]]], requires_grad=True)
    out = lib.nn.functional.grid_sample(img, grid, mode="bilinear", padding_mode=padding_mode,
                                        align_corners=align_corners)
    out.sum().backward()
    return [v + 0.0 for v in out.flatten().tolist()], [v + 0.0 for v in grid.grad.flatten()
                                                       .tolist()]


@pytest.mark.parametrize("padding_mode", ["border", "reflection"])
def test_grid_sample_no_gradient_on_the_border(padding_mode):
    _, g = _border_case(ember, padding_mode, True)
    # x = 1.0 and x = -1.0 lie on the borders (align_corners=True): no gradient along x there
    assert g[0] == 0.0 and g[2] == 0.0 and g[10] == 0.0
    assert g[5] == 0.0  # y = 1.0
    assert g[1] != 0.0  # y = 0.3 inside


@pytest.mark.skipif(not HAVE_TORCH, reason="compares with torch")
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sample_gradients_match_torch(padding_mode, align_corners):
    out_e, g_e = _border_case(ember, padding_mode, align_corners)
    out_t, g_t = _border_case(torch, padding_mode, align_corners)
    assert out_e == pytest.approx(out_t, abs=1e-5)
    assert g_e == pytest.approx(g_t, abs=1e-5)


# ---- TransformerEncoder's nested-tensor fast path -----------------------------------------------
def _encoder(lib, batch_first=True, nhead=2, norm=None, **kw):
    layer = lib.nn.TransformerEncoderLayer(8, nhead, dim_feedforward=16, dropout=0.0,
                                           batch_first=batch_first, **kw)
    enc = lib.nn.TransformerEncoder(layer, 2, norm=norm)
    with lib.no_grad():
        for i, p in enumerate(enc.parameters()):
            p.copy_(0.2 * lib.sin(lib.arange(p.numel(), dtype=lib.float32) + i).view_as(p))
    return enc


def _inputs(lib):
    x = lib.cos(lib.arange(2 * 4 * 8, dtype=lib.float32)).view(2, 4, 8)
    kpm = lib.tensor([[False, False, True, True], [False, False, False, False]])
    return x, kpm


def test_encoder_fast_path_zeroes_padded_positions():
    enc = _encoder(ember)
    x, kpm = _inputs(ember)
    enc.eval()
    with ember.no_grad():
        fast = enc(x, src_key_padding_mask=kpm)
    slow = enc(x, src_key_padding_mask=kpm)  # gradients enabled: no fast path
    assert fast[0, 2:].abs().max().item() == 0.0
    assert slow[0, 2:].abs().max().item() > 0.0
    assert ember.allclose(fast[0, :2], slow[0, :2]) and ember.allclose(fast[1], slow[1])
    enc.train()
    with ember.no_grad():
        assert enc(x, src_key_padding_mask=kpm)[0, 2:].abs().max().item() > 0.0


def test_encoder_fast_path_conditions():
    x, kpm = _inputs(ember)
    enc = _encoder(ember)
    enc.eval()
    with ember.no_grad():
        # padding that does not trail (not "left aligned"): no fast path
        odd = ember.tensor([[True, False, False, False], [False, False, False, False]])
        assert enc(x, src_key_padding_mask=odd)[0, 0].abs().max().item() > 0.0
        # a mask as well: no fast path
        out = enc(x, mask=ember.zeros(4, 4), src_key_padding_mask=kpm)
        assert out[0, 2:].abs().max().item() > 0.0
        ember.backends.mha.set_fastpath_enabled(False)
        try:
            assert enc(x, src_key_padding_mask=kpm)[0, 2:].abs().max().item() > 0.0
        finally:
            ember.backends.mha.set_fastpath_enabled(True)
    plain = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1,
                                  enable_nested_tensor=False)
    assert plain.use_nested_tensor is False


def test_encoder_final_norm_after_the_zeros():
    enc = _encoder(ember, norm=nn.LayerNorm(8))
    with ember.no_grad():
        enc.norm.bias.fill_(0.5)
    x, kpm = _inputs(ember)
    enc.eval()
    with ember.no_grad():
        out = enc(x, src_key_padding_mask=kpm)
    assert out[0, 3].tolist() == [0.5] * 8


def test_encoder_nested_tensor_warnings():
    cases = [({"batch_first": False}, "encoder_layer.self_attn.batch_first was not True(use "
              "batch_first for better inference performance)"),
             ({"nhead": 1}, "encoder_layer.self_attn.num_heads is odd"),
             ({"norm_first": True}, "encoder_layer.norm_first was True"),
             ({"activation": F.silu}, "encoder_layer.activation_relu_or_gelu was not True")]
    for kw, why in cases:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            enc = _encoder(ember, **kw)
        assert [str(w.message) for w in caught] == [
            f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why}"]
        assert enc.use_nested_tensor is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _encoder(ember).use_nested_tensor is True
    assert nn.TransformerEncoderLayer(8, 2, activation="gelu").activation_relu_or_gelu == 2
    assert nn.TransformerEncoderLayer(8, 2, activation=F.relu).activation_relu_or_gelu == 1
    assert nn.TransformerEncoderLayer(8, 2, activation=nn.GELU()).activation_relu_or_gelu == 2


@pytest.mark.skipif(not HAVE_TORCH, reason="compares with torch")
def test_encoder_fast_path_matches_torch():
    outs = []
    for lib in (torch, ember):
        enc = _encoder(lib, norm=lib.nn.LayerNorm(8))
        x, kpm = _inputs(lib)
        enc.eval()
        with warnings.catch_warnings(), lib.no_grad():
            warnings.simplefilter("ignore")  # torch's prototype nested-tensor note
            outs.append(enc(x, src_key_padding_mask=kpm).tolist())
    flat = [[v for row in b for v in row] for b in outs]
    for a, b in zip(flat[0], flat[1]):
        assert a == pytest.approx(b, abs=1e-5)


# ---- grad_fn names of nn ops ---------------------------------------------------------------------
def test_cross_entropy_grad_fn_is_nll_loss():
    logits = ember.tensor([[0.5, -1.0], [2.0, 3.0]], requires_grad=True)
    loss = F.cross_entropy(logits, ember.tensor([0, 1]))
    assert loss.grad_fn.name() == "NllLossBackward0"
    assert repr(loss).endswith("grad_fn=<NllLossBackward0>)")
    up = F.interpolate(logits[None, None], scale_factor=2, mode="bilinear")
    assert up.grad_fn.name() == "UpsampleBilinear2DBackward0"


# ---- what __torch_function__ handlers see of nn.functional calls ---------------------------------
def _seen_calls(lib):
    class Log(lib.overrides.TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in (lib.nn.functional.relu, lib.nn.functional.softmax,
                        lib.nn.functional.max_pool2d, lib.nn.functional.l1_loss,
                        lib.nn.functional.layer_norm, lib.nn.functional.dropout):
                self.calls.append((func.__name__, len(args), list(kwargs)))
            return func(*args, **kwargs)

    x = lib.ones(1, 2, 4, 4)
    with Log() as log:
        lib.nn.functional.relu(x)
        lib.nn.functional.softmax(x, 1)
        lib.nn.functional.max_pool2d(x, 2, padding=1)
        lib.nn.functional.l1_loss(x, x, reduction="sum")
        lib.nn.functional.layer_norm(x, (4,), eps=1e-3)
        lib.nn.functional.dropout(x, 0.5, False)
    return log.calls


def test_functional_calls_reach_handlers_in_torchs_form():
    calls = _seen_calls(ember)
    assert calls[0] == ("relu", 1, ["inplace"])
    assert calls[2] == ("max_pool2d", 2, ["stride", "padding", "dilation", "ceil_mode",
                                          "return_indices"])
    assert calls[3] == ("l1_loss", 2, ["size_average", "reduce", "reduction"])
    assert calls[5] == ("dropout", 1, ["p", "training", "inplace"])


@pytest.mark.skipif(not HAVE_TORCH, reason="compares with torch")
def test_functional_calls_reach_handlers_as_in_torch():
    assert _seen_calls(ember) == _seen_calls(torch)


def test_functional_call_values_keep_their_meaning():
    seen = {}

    class Keep(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is F.leaky_relu:
                seen.update(kwargs)
            return func(*args, **(kwargs or {}))

    x = ember.tensor([-2.0, 1.0])
    with Keep():
        out = F.leaky_relu(x, 0.25)
    assert seen == {"negative_slope": 0.25, "inplace": False} and out.tolist() == [-0.5, 1.0]
    with Keep(), pytest.raises(TypeError):
        F.leaky_relu(x, 0.1, False, 3)  # a bad call still fails as the function reports it
