"""autocast over nn layers and losses, and GradScaler, against torch (issue 15 item 10)."""

from __future__ import annotations

import math

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from ember import nn

torch = pytest.importorskip("torch")


def _pair(make_e, make_t, seed=0):
    """An ember layer and a torch layer with the same weights."""
    ember.manual_seed(seed)
    e = make_e()
    t = make_t()
    with torch.no_grad():
        for (_, pe), (_, pt) in zip(e.named_parameters(), t.named_parameters()):
            pt.copy_(torch.tensor(pe.detach().numpy()))
    return e, t


@pytest.mark.parametrize("kind", ["linear", "conv1d", "conv2d", "conv_transpose2d", "bilinear"])
def test_autocast_layers_match_torch(kind):
    rng = np.random.default_rng(1)
    if kind == "linear":
        e, t = _pair(lambda: nn.Linear(6, 5), lambda: torch.nn.Linear(6, 5))
        x = rng.standard_normal((4, 6)).astype(np.float32)
        args = lambda m, xx: (xx,)  # noqa: E731
    elif kind == "conv1d":
        e, t = _pair(lambda: nn.Conv1d(2, 3, 3), lambda: torch.nn.Conv1d(2, 3, 3))
        x = rng.standard_normal((2, 2, 9)).astype(np.float32)
        args = lambda m, xx: (xx,)  # noqa: E731
    elif kind == "conv2d":
        e, t = _pair(lambda: nn.Conv2d(2, 3, 3, padding=1), lambda: torch.nn.Conv2d(2, 3, 3, padding=1))
        x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
        args = lambda m, xx: (xx,)  # noqa: E731
    elif kind == "conv_transpose2d":
        e, t = _pair(lambda: nn.ConvTranspose2d(2, 3, 2), lambda: torch.nn.ConvTranspose2d(2, 3, 2))
        x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
        args = lambda m, xx: (xx,)  # noqa: E731
    else:
        e, t = _pair(lambda: nn.Bilinear(3, 4, 2), lambda: torch.nn.Bilinear(3, 4, 2))
        x = rng.standard_normal((5, 3)).astype(np.float32)
        x2 = rng.standard_normal((5, 4)).astype(np.float32)
        args = lambda m, xx: (xx, m.tensor(x2))  # noqa: E731
    with ember.autocast("cpu", dtype=ember.bfloat16):
        ye = e(*args(ember, ember.tensor(x)))
        le = F.mse_loss(ye, ember.zeros(ye.shape))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = t(*args(torch, torch.tensor(x)))
        lt = torch.nn.functional.mse_loss(yt, torch.zeros(yt.shape))
    lower = kind != "bilinear"  # torch's CPU autocast leaves bilinear in float32
    assert ye.dtype is (ember.bfloat16 if lower else ember.float32)
    assert yt.dtype == (torch.bfloat16 if lower else torch.float32)
    assert le.dtype is ember.float32 and lt.dtype == torch.float32  # losses run in float32
    np.testing.assert_allclose(ye.float().detach().numpy(), yt.float().detach().numpy(), rtol=3e-2, atol=3e-2)
    le.backward()
    lt.backward()
    for (n, pe), (_, pt) in zip(e.named_parameters(), t.named_parameters()):
        assert pe.grad.dtype is ember.float32, n
        np.testing.assert_allclose(pe.grad.numpy(), pt.grad.numpy(), rtol=5e-2, atol=5e-2)


def test_autocast_attention_and_transformer_run_in_bfloat16():
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = ember.randn(2, 5, 8)
    with ember.autocast("cpu"):
        out, _ = mha(x, x, x)
        sdpa = F.scaled_dot_product_attention(x, x, x)
    assert out.dtype is ember.bfloat16 and sdpa.dtype is ember.bfloat16
    ref, _ = mha(x, x, x)
    np.testing.assert_allclose(out.float().detach().numpy(), ref.detach().numpy(), atol=5e-2)


def test_autocast_cross_entropy_in_float32():
    logits = ember.randn(4, 5).bfloat16()
    with ember.autocast("cpu"):
        loss = F.cross_entropy(logits, ember.tensor([0, 1, 2, 3]))
    assert loss.dtype is ember.float32


# ---- GradScaler ---------------------------------------------------------------------------------

def _run_scaler(lib, opt_cls, grads_per_step, **kw):
    """Drives a GradScaler with given gradient multipliers (inf/nan to force skipped steps);
    returns (scales, trackers, parameter values, step results)."""
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
    opt = opt_cls([p], lr=0.1)
    scaler = lib.amp.GradScaler("cpu", **kw)
    scales, params = [], []
    for g in grads_per_step:
        opt.zero_grad()
        loss = (p * lib.tensor([g, 1.0])).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        params.append(p.detach().tolist())
    return scales, params, scaler.state_dict()


@pytest.mark.parametrize("kw", [{}, {"init_scale": 8.0, "growth_interval": 2},
                                {"init_scale": 2.0**127, "growth_interval": 1}])
def test_grad_scaler_matches_torch(kw):
    steps = [1.0, 2.0, math.inf, 0.5, math.nan, 1.0, 1.0, 3.0]
    es, ep, esd = _run_scaler(ember, ember.optim.SGD, steps, **kw)
    ts, tp, tsd = _run_scaler(torch, torch.optim.SGD, steps, **kw)
    assert es == ts
    np.testing.assert_allclose(np.array(ep), np.array(tp), rtol=1e-6)
    assert esd == tsd


def test_grad_scaler_unscale_and_errors():
    p = nn.Parameter(ember.tensor([1.0, 2.0]))
    opt = ember.optim.SGD([p], lr=1.0)
    scaler = ember.amp.GradScaler("cpu", init_scale=4.0)
    scaler.scale((p * 3).sum()).backward()
    assert p.grad.tolist() == [12.0, 12.0]
    scaler.unscale_(opt)
    assert p.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    nn.utils.clip_grad_norm_([p], 1.0)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="no inf checks"):
        scaler.update()
    with pytest.raises(RuntimeError, match="closure"):
        scaler.step(opt, closure=lambda: 0)
    # state dicts travel between scalers
    other = ember.amp.GradScaler("cpu")
    other.load_state_dict(scaler.state_dict())
    assert other.get_scale() == scaler.get_scale()
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})


def test_disabled_grad_scaler_is_a_pass_through():
    p = nn.Parameter(ember.tensor([1.0]))
    opt = ember.optim.SGD([p], lr=1.0)
    scaler = ember.amp.GradScaler(enabled=False)
    loss = (p * 2).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert p.tolist() == [-1.0] and scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    assert not scaler.is_enabled()
    scaler.load_state_dict({})  # ignored when disabled, as in torch


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _states(out):
    if not isinstance(out, tuple):
        return []
    rest = out[1]
    return list(rest) if isinstance(rest, tuple) else [rest]


@pytest.mark.parametrize("name,shape,kw", [
    ("LSTM", (5, 3, 4), {}),
    ("LSTM", (3, 5, 4), {"num_layers": 2, "batch_first": True, "bidirectional": True}),
    ("RNN", (5, 3, 4), {}),
    ("GRU", (5, 3, 4), {}),
    ("LSTMCell", (3, 4), {}),
    ("GRUCell", (3, 4), {}),
    ("RNNCell", (3, 4), {}),
])
def test_autocast_recurrent_layers_match_torch(name, shape, kw):
    # torch's CPU autocast runs LSTM and RNN wholly in bfloat16; GRU and the LSTM/GRU cells give
    # float32 (their products in bfloat16); RNNCell bfloat16
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(4, 6, **kw)
    em = getattr(nn, name)(4, 6, **kw)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = torch.randn(*shape)
    ex = ember.tensor(x.numpy(), requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = tm(x)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        got = em(ex)
    for w, g in zip([_first(want), *_states(want)], [_first(got), *_states(got)]):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_allclose(g.float().detach().numpy(), w.float().detach().numpy(),
                                   atol=2e-2)
    # gradients reach the float32 weights and input through the casts
    _first(got).float().sum().backward()
    assert ex.grad.dtype == ember.float32
    assert all(p.grad is not None and p.grad.dtype == ember.float32 for p in em.parameters())


def test_autocast_lstm_really_computes_in_bfloat16():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 6)
    x = ember.randn(7, 2, 4)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        out, (h, c) = lstm(x)
    assert out.dtype == h.dtype == c.dtype == ember.bfloat16
    ref = nn.LSTM(4, 6).to(ember.bfloat16)
    ref.load_state_dict(lstm.state_dict())
    with ember.no_grad():
        want = ref(x.to(ember.bfloat16))[0]
        full = lstm(x)[0]
    np.testing.assert_allclose(out.detach().float().numpy(), want.float().numpy(), atol=1e-2)
    assert float((out.detach().float() - full).abs().max()) > 0  # not the float32 result
