"""What the third set of PyTorch-style programs (compat_programs/bf16_autocast.py,
unet_segmentation.py) found different in ember.nn: F.linear with a bias under bfloat16 autocast
rounded twice (the product, then the sum), where PyTorch's addmm rounds once."""

from __future__ import annotations

import ember
import ember.nn.functional as F
import numpy as np
import pytest


def _arr(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("lead", [(64,), (4, 16), (2, 2, 16)])
def test_linear_bias_under_bf16_autocast_rounds_once_like_torch(lead):
    torch = pytest.importorskip("torch")
    x, w, b = _arr(*lead, 128), _arr(32, 128, seed=1, scale=0.1), _arr(32, seed=2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w), torch.tensor(b))
    with ember.autocast("cpu", dtype=ember.bfloat16):
        got = F.linear(ember.tensor(x), ember.tensor(w), ember.tensor(b))
    assert got.dtype == ember.bfloat16 and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_linear_bias_gradients_and_float32_agree_with_torch():
    torch = pytest.importorskip("torch")
    x, w, b = _arr(3, 5, 6), _arr(4, 6, seed=1), _arr(4, seed=2)
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    ex, ew, eb = (ember.tensor(v, requires_grad=True) for v in (x, w, b))
    want = torch.nn.functional.linear(tx, tw, tb)
    got = F.linear(ex, ew, eb)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    (want * want).sum().backward()
    (got * got).sum().backward()
    for e, t in ((ex, tx), (ew, tw), (eb, tb)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_linear_mixed_dtype_bias_and_scalar_bias():
    # a bias in another dtype (no autocast) keeps the separate addition's promotion and errors
    x = ember.ones(2, 3)
    out = F.linear(x, ember.ones(4, 3), ember.tensor(0.5))  # a 0-d bias broadcasts
    assert out.tolist() == [[3.5] * 4] * 2
    with pytest.raises(RuntimeError, match="linear: expected bias of shape"):
        F.linear(x, ember.ones(4, 3), ember.ones(3))


@pytest.mark.parametrize("name,kwargs", [("SGD", {"lr": 0.1, "momentum": 0.9}),
                                         ("AdamW", {"lr": 1e-3}), ("Adam", {})])
def test_optimizer_prints_like_torch(name, kwargs):
    torch = pytest.importorskip("torch")

    def groups(lib):
        return [{"params": [lib.nn.Parameter(lib.ones(1))]},
                {"params": [lib.nn.Parameter(lib.ones(1))], "lr": 0.5}]

    want = repr(getattr(torch.optim, name)(groups(torch), **kwargs))
    got = repr(getattr(ember.optim, name)(groups(ember), **kwargs))
    assert got == want


def test_parameter_str_says_parameter():
    p = ember.nn.Parameter(ember.ones(2))
    assert str(p) == repr(p) == f"{p}"
    assert str(p).startswith("Parameter containing:\ntensor([1., 1.], requires_grad=True)")


@pytest.mark.parametrize("separate", [False, True])
@pytest.mark.parametrize("batched", [True, False])
def test_multi_head_attention_forward_matches_torch(separate, batched):
    # CLIP's AttentionPool2d calls the functional form with separate q/k/v weights
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    E, H, L, S, N = 8, 2, 3, 5, 2
    q = rng.standard_normal((L, N, E) if batched else (L, E)).astype(np.float32)
    kv = rng.standard_normal((S, N, E) if batched else (S, E)).astype(np.float32)
    w = {n: rng.standard_normal(s).astype(np.float32) * 0.3 for n, s in (
        ("in_w", (3 * E, E)), ("in_b", (3 * E,)), ("q", (E, E)), ("k", (E, E)), ("v", (E, E)),
        ("out_w", (E, E)), ("out_b", (E,)))}
    kpm = np.zeros((N, S) if batched else (S,), dtype=bool)
    kpm[..., -1] = True

    def run(lib, F):
        t = {k: lib.tensor(v) for k, v in w.items()}
        return F.multi_head_attention_forward(
            lib.tensor(q), lib.tensor(kv), lib.tensor(kv), E, H,
            None if separate else t["in_w"], t["in_b"], None, None, False, 0.0, t["out_w"],
            t["out_b"], training=False, key_padding_mask=lib.tensor(kpm), need_weights=True,
            use_separate_proj_weight=separate, q_proj_weight=t["q"], k_proj_weight=t["k"],
            v_proj_weight=t["v"], average_attn_weights=False)

    want = run(torch, torch.nn.functional)
    got = run(ember, F)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="was expecting embedding dimension of 6"):
        F.multi_head_attention_forward(ember.tensor(q), ember.tensor(kv), ember.tensor(kv), 6,
                                       H, ember.ones(18, 6), None, None, None, False, 0.0,
                                       ember.eye(6), None)
