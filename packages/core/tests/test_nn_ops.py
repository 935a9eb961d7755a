"""The nn ops of ops/nn.yaml (softmax, activations, losses, convolution, pooling, normalization,
embedding, dropout, attention, fused optimizer steps): values against torch.nn.functional,
gradients through op_db's gradient runner, and errors for bad input."""

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch
from op_db import GradCase, run_case

F = torch.nn.functional if torch is not None else None
DTYPES = ["float32", "float64"]


def tol(dtype):
    return dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)


def pair(a, dtype="float64"):
    """The same values as an ember and a torch tensor."""
    a = np.asarray(a).astype(dtype)
    return ember.tensor(a), torch.tensor(a)


def close(e, t, dtype="float64", **kw):
    k = tol(dtype)
    k.update(kw)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), **k)


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---- softmax --------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 7), 1), ((3, 7), 0), ((2, 3, 4), 1),
                                       ((2, 3, 4), -1), ((2, 3, 4), 0), ((), 0)])
def test_softmax_values(dtype, shape, dim):
    a = rnd(*shape) * 10
    e, t = pair(a, dtype)
    close(ember.softmax(e, dim), torch.softmax(t, dim), dtype)
    close(ember.log_softmax(e, dim), torch.log_softmax(t, dim), dtype)
    close(e.softmax(dim), t.softmax(dim), dtype)


@needs_torch
def test_softmax_stable_noncontiguous_and_dtype():
    a = rnd(4, 6) * 1000  # exp would overflow without subtracting the max
    e, t = pair(a, "float32")
    close(ember.softmax(e.t(), 1), torch.softmax(t.t(), 1), "float32")
    close(ember.log_softmax(e.t(), 0), torch.log_softmax(t.t(), 0), "float32")
    r = ember.softmax(e, 1, dtype=ember.float64)
    assert r.dtype == ember.float64
    close(r, torch.softmax(t, 1, dtype=torch.float64), "float64", rtol=1e-6)
    inf = ember.tensor([[-float("inf"), 0.0, 1.0]])
    assert np.isfinite(ember.log_softmax(inf, 1).numpy()[0, 1:]).all()


def test_softmax_errors():
    with pytest.raises(IndexError, match="softmax"):
        ember.softmax(ember.ones(2, 3), 2)
    with pytest.raises(TypeError, match="softmax.*int64"):
        ember.softmax(ember.arange(3), 0)


# ---- activations ----------------------------------------------------------------------------

ACTIVATIONS = [
    ("gelu", lambda m, x: m.gelu(x) if m is ember else F.gelu(x)),
    ("gelu_tanh", lambda m, x: m.gelu(x, approximate="tanh") if m is ember
     else F.gelu(x, approximate="tanh")),
    ("silu", lambda m, x: ember.silu(x) if m is ember else F.silu(x)),
    ("elu", lambda m, x: ember.elu(x, 0.7) if m is ember else F.elu(x, 0.7)),
    ("selu", lambda m, x: ember.selu(x) if m is ember else F.selu(x)),
    ("celu", lambda m, x: ember.celu(x, 1.5) if m is ember else F.celu(x, 1.5)),
    ("leaky_relu", lambda m, x: ember.leaky_relu(x, 0.1) if m is ember else F.leaky_relu(x, 0.1)),
    ("softplus", lambda m, x: ember.softplus(x, 2.0, 3.0) if m is ember
     else F.softplus(x, 2.0, 3.0)),
    ("hardtanh", lambda m, x: ember.hardtanh(x, -0.5, 0.8) if m is ember
     else F.hardtanh(x, -0.5, 0.8)),
    ("relu6", lambda m, x: ember.relu6(x) if m is ember else F.relu6(x)),
    ("hardsigmoid", lambda m, x: ember.hardsigmoid(x) if m is ember else F.hardsigmoid(x)),
    ("hardswish", lambda m, x: ember.hardswish(x) if m is ember else F.hardswish(x)),
    ("mish", lambda m, x: ember.mish(x) if m is ember else F.mish(x)),
    ("softsign", lambda m, x: ember.softsign(x) if m is ember else F.softsign(x)),
    ("logsigmoid", lambda m, x: ember.logsigmoid(x) if m is ember else F.logsigmoid(x)),
]


def mod(x):
    return ember if isinstance(x, ember.Tensor) else torch


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_values(dtype, name, fn):
    a = np.concatenate([rnd(50) * 4, [-30.0, -3.0, 0.0, 3.0, 30.0]])
    e, t = pair(a, dtype)
    close(fn(ember, e), fn(torch, t), dtype)
    # strided input
    e2, t2 = pair(rnd(6, 8) * 3, dtype)
    close(fn(ember, e2.t()), fn(torch, t2.t()), dtype)


def _act_inputs(rng):
    # keep away from the kinks (|x| = 3 for the hard* ops, the clamp bounds, 0) for finite
    # differences
    x = rng.uniform(-4.5, 4.5, (3, 5))
    for k in (-3.0, -0.5, 0.0, 0.8, 3.0, 6.0):
        x = np.where(np.abs(x - k) < 0.05, x + 0.2, x)
    return [x]


# torch can't differentiate its hardsigmoid backward (ours is 0 there): first derivatives only.
ACT_GRAD_CASES = [GradCase(name, lambda x, fn=fn: fn(mod(x), x), _act_inputs,
                           gradgrad=name != "hardsigmoid")
                  for name, fn in ACTIVATIONS]


@pytest.mark.parametrize("case", ACT_GRAD_CASES, ids=[c.name for c in ACT_GRAD_CASES])
def test_activation_grads(case):
    run_case(case)


def test_activation_inplace_keeps_gradients():
    x = ember.tensor(rnd(7), requires_grad=True)
    y = x * 1.0
    y.elu_()
    y.sum().backward()
    expected = np.where(x.detach().numpy() > 0, 1.0, np.exp(x.detach().numpy()))
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)
    z = x * 1.0
    z.hardtanh_(-0.5, 0.5)
    assert np.all(np.abs(z.detach().numpy()) <= 0.5)


def test_activation_errors():
    with pytest.raises(ValueError, match="gelu: approximate"):
        ember.gelu(ember.ones(2), approximate="fast")
    with pytest.raises(TypeError, match="silu.*int64"):
        ember.silu(ember.arange(3))
    with pytest.raises(ValueError, match="hardtanh"):
        ember.hardtanh(ember.ones(2), 1.0, -1.0)


# ---- losses ---------------------------------------------------------------------------------

def _targets(shape, c, seed=1, ignore=None):
    t = np.random.default_rng(seed).integers(0, c, shape)
    if ignore is not None and t.size > 1:
        t.flat[0] = ignore
    return t


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5,), (4, 5), (3, 5, 2), (2, 5, 3, 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_and_cross_entropy_values(dtype, shape, reduction, weighted):
    c = 5
    x = rnd(*shape)
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    tgt = _targets(tshape, c, ignore=-100 if len(shape) > 1 else None)
    w = np.random.default_rng(2).uniform(0.5, 2.0, c)
    e, t = pair(x, dtype)
    et, tt = ember.tensor(tgt), torch.tensor(tgt)
    ew, tw = (pair(w, dtype) if weighted else (None, None))
    close(ember.nll_loss(ember.log_softmax(e, 1 if len(shape) > 1 else 0), et, ew, reduction),
          F.nll_loss(torch.log_softmax(t, 1 if len(shape) > 1 else 0), tt, tw,
                     reduction=reduction), dtype)
    close(ember.cross_entropy(e, et, ew, reduction),
          F.cross_entropy(t, tt, tw, reduction=reduction), dtype)
    close(ember.cross_entropy(e, et, ew, reduction, label_smoothing=0.2),
          F.cross_entropy(t, tt, tw, reduction=reduction, label_smoothing=0.2), dtype)
    # class probabilities
    p = np.abs(rnd(*shape, seed=3))
    p = p / p.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
    ep, tp = pair(p, dtype)
    close(ember.cross_entropy(e, ep, ew, reduction, label_smoothing=0.1),
          F.cross_entropy(t, tp, tw, reduction=reduction, label_smoothing=0.1), dtype)


@needs_torch
def test_nll_loss_ignore_index():
    x = rnd(4, 3)
    tgt = np.array([0, 2, 1, 2])
    e, t = pair(x)
    for ign in (2, 1):
        close(ember.nll_loss(e, ember.tensor(tgt), ignore_index=ign),
              F.nll_loss(t, torch.tensor(tgt), ignore_index=ign))
    # all targets ignored: mean is nan, as in torch
    r = ember.nll_loss(e, ember.tensor(np.full(4, 7)), ignore_index=7)
    assert np.isnan(r.item())


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_and_binary_losses(dtype, reduction):
    x, y = rnd(3, 4), rnd(3, 4, seed=1)
    e, t = pair(x, dtype)
    ey, ty = pair(y, dtype)
    close(ember.mse_loss(e, ey, reduction), F.mse_loss(t, ty, reduction=reduction), dtype)
    close(ember.l1_loss(e, ey, reduction), F.l1_loss(t, ty, reduction=reduction), dtype)
    for beta in (0.5, 1.0, 0.0):
        close(ember.smooth_l1_loss(e, ey, reduction, beta),
              F.smooth_l1_loss(t, ty, reduction=reduction, beta=beta), dtype)
    close(ember.huber_loss(e, ey, reduction, 0.7),
          F.huber_loss(t, ty, reduction=reduction, delta=0.7), dtype)
    p = 1 / (1 + np.exp(-x))
    q = np.random.default_rng(4).uniform(0, 1, (3, 4))
    ep, tp = pair(p, dtype)
    eq, tq = pair(q, dtype)
    w = np.random.default_rng(5).uniform(0.5, 1.5, 4)
    ew, tw = pair(w, dtype)
    close(ember.binary_cross_entropy(ep, eq, ew, reduction),
          F.binary_cross_entropy(tp, tq, tw, reduction=reduction), dtype)
    close(ember.binary_cross_entropy_with_logits(e * 10, eq, ew, ew * 2, reduction),
          F.binary_cross_entropy_with_logits(t * 10, tq, tw, reduction=reduction,
                                             pos_weight=tw * 2), dtype)
    close(ember.binary_cross_entropy_with_logits(e, eq, reduction=reduction),
          F.binary_cross_entropy_with_logits(t, tq, reduction=reduction), dtype)
    lq = np.log(q)
    elq, tlq = pair(lq, dtype)
    close(ember.kl_div(e, eq, reduction), F.kl_div(t, tq, reduction=reduction), dtype)
    close(ember.kl_div(e, elq, reduction, log_target=True),
          F.kl_div(t, tlq, reduction=reduction, log_target=True), dtype)


@needs_torch
def test_kl_div_batchmean_and_zero_target():
    x, q = rnd(3, 4), np.random.default_rng(4).uniform(0, 1, (3, 4))
    q[0, 0] = 0.0
    e, t = pair(x)
    eq, tq = pair(q)
    close(ember.kl_div(e, eq, "batchmean"), F.kl_div(t, tq, reduction="batchmean"))


def _logp(rng, shape, dim=1):
    x = rng.standard_normal(shape)
    return x - np.log(np.exp(x).sum(axis=dim, keepdims=True))


W3 = np.array([0.5, 1.0, 2.0])
W4 = np.array([0.5, 1.0, 2.0, 1.5])
LOSS_GRAD_CASES = [
    GradCase("nll_mean", lambda x, t: mod(x).nn.functional.nll_loss(x, t) if mod(x) is torch
             else ember.nll_loss(x, t),
             lambda rng: [_logp(rng, (4, 3)), np.array([0, 2, 1, 2])]),
    GradCase("nll_weight_sum_nd", lambda x, t: ember.nll_loss(x, t, ember.tensor(W3), "sum", 1)
             if mod(x) is ember else F.nll_loss(x, t, torch.tensor(W3), reduction="sum",
                                                ignore_index=1),
             lambda rng: [_logp(rng, (2, 3, 4)), rng.integers(0, 3, (2, 4))]),
    GradCase("cross_entropy", lambda x, t: ember.cross_entropy(x, t, label_smoothing=0.1)
             if mod(x) is ember else F.cross_entropy(x, t, label_smoothing=0.1),
             lambda rng: [rng.standard_normal((4, 5)), rng.integers(0, 5, 4)]),
    GradCase("cross_entropy_probs", lambda x, p: ember.cross_entropy(x, p, reduction="sum")
             if mod(x) is ember else F.cross_entropy(x, p, reduction="sum"),
             lambda rng: [rng.standard_normal((3, 4)), rng.dirichlet(np.ones(4), 3)]),
    GradCase("mse", lambda a, b: ember.mse_loss(a, b) if mod(a) is ember else F.mse_loss(a, b),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4))]),
    GradCase("bce", lambda p, q: ember.binary_cross_entropy(p, q) if mod(p) is ember
             else F.binary_cross_entropy(p, q),
             lambda rng: [rng.uniform(0.1, 0.9, (3, 4)), rng.uniform(0, 1, (3, 4))]),
    GradCase("bce_logits", lambda x, q: ember.binary_cross_entropy_with_logits(
        x, q, pos_weight=ember.tensor(W4), reduction="mean") if mod(x) is ember
        else F.binary_cross_entropy_with_logits(x, q, pos_weight=torch.tensor(W4)),
        lambda rng: [rng.standard_normal((3, 4)), rng.uniform(0, 1, (3, 4))]),
    GradCase("kl_div", lambda x, q: ember.kl_div(x, q, "batchmean") if mod(x) is ember
             else F.kl_div(x, q, reduction="batchmean"),
             lambda rng: [rng.standard_normal((3, 4)), rng.uniform(0.1, 1, (3, 4))]),
    GradCase("smooth_l1", lambda a, b: ember.smooth_l1_loss(a, b, beta=0.5) if mod(a) is ember
             else F.smooth_l1_loss(a, b, beta=0.5),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4))]),
    GradCase("huber", lambda a, b: ember.huber_loss(a, b, delta=0.5) if mod(a) is ember
             else F.huber_loss(a, b, delta=0.5),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4))]),
    GradCase("l1", lambda a, b: ember.l1_loss(a, b) if mod(a) is ember else F.l1_loss(a, b),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4))]),
]


@pytest.mark.parametrize("case", LOSS_GRAD_CASES, ids=[c.name for c in LOSS_GRAD_CASES])
def test_loss_grads(case):
    run_case(case)


def test_loss_errors():
    x = ember.zeros(4, 3)
    with pytest.raises(RuntimeError, match=r"nll_loss: expected target of shape \(4,\) for input of shape \(4, 3\)"):
        ember.nll_loss(x, ember.zeros(3, dtype=ember.int64))
    with pytest.raises(IndexError, match="nll_loss: target 3 is out of bounds"):
        ember.nll_loss(x, ember.tensor([0, 1, 3, 0]))
    with pytest.raises(TypeError, match="nll_loss: expected target to hold class indices"):
        ember.nll_loss(x, ember.zeros(4))
    with pytest.raises(RuntimeError, match="weight to be a 1-D tensor of 3"):
        ember.cross_entropy(x, ember.tensor([0, 1, 2, 0]), ember.ones(4))
    with pytest.raises(ValueError, match="reduction must be"):
        ember.cross_entropy(x, ember.tensor([0, 1, 2, 0]), reduction="avg")
    with pytest.raises(ValueError, match=r"binary_cross_entropy: expected target of shape \(4, 3\)"):
        ember.binary_cross_entropy(ember.full((4, 3), 0.5), ember.zeros(4))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        ember.binary_cross_entropy(ember.full((2,), 1.5), ember.zeros(2))


# ---- convolution ----------------------------------------------------------------------------

CONV_CONFIGS = [  # (dims, input shape, weight shape, kwargs)
    (1, (2, 4, 9), (6, 4, 3), dict()),
    (1, (2, 4, 9), (6, 2, 2), dict(stride=2, padding=1, dilation=2, groups=2)),
    (1, (4, 9), (3, 4, 3), dict(padding="same")),
    (2, (2, 3, 7, 6), (5, 3, 3, 3), dict()),
    (2, (2, 3, 7, 6), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    (2, (2, 4, 6, 6), (8, 1, 3, 3), dict(groups=4, padding=1)),  # depthwise
    (2, (2, 4, 6, 6), (6, 2, 1, 1), dict(groups=2)),              # 1x1
    (2, (3, 6, 5), (2, 3, 2, 2), dict(padding="same")),           # unbatched, even kernel
    (2, (2, 3, 6, 5), (2, 3, 3, 3), dict(padding="valid")),
    (3, (1, 2, 5, 4, 4), (3, 2, 2, 3, 2), dict(stride=(1, 2, 1), padding=(1, 1, 0))),
]


def _conv(lib, k, x, w, b, kw):
    f = {1: "conv1d", 2: "conv2d", 3: "conv3d"}[k]
    if lib is ember:
        return getattr(ember, f)(x, w, b, **kw)
    return getattr(F, f)(x, w, b, **kw)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cfg", CONV_CONFIGS, ids=[str(i) for i in range(len(CONV_CONFIGS))])
def test_conv_values(dtype, cfg):
    k, xs, ws, kw = cfg
    x, w, b = rnd(*xs), rnd(*ws, seed=1), rnd(ws[0], seed=2)
    ex, tx = pair(x, dtype)
    ew, tw = pair(w, dtype)
    eb, tb = pair(b, dtype)
    close(_conv(ember, k, ex, ew, eb, kw), _conv(torch, k, tx, tw, tb, kw), dtype)
    close(_conv(ember, k, ex, ew, None, kw), _conv(torch, k, tx, tw, None, kw), dtype)


@needs_torch
def test_conv_large_batch_chunks_and_strided_input():
    # more column memory than one chunk holds: the batch is split
    x, w = rnd(40, 16, 34, 34), rnd(8, 16, 3, 3, seed=1)
    ex, tx = pair(x, "float32")
    ew, tw = pair(w, "float32")
    close(ember.conv2d(ex, ew, padding=1), F.conv2d(tx, tw, padding=1), "float32", atol=1e-4)
    close(ember.conv2d(ex.transpose(2, 3), ew), F.conv2d(tx.transpose(2, 3), tw), "float32",
          atol=1e-4)


TCONV_CONFIGS = [
    (1, (2, 4, 5), (4, 3, 3), dict()),
    (1, (2, 4, 5), (4, 2, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    (2, (2, 3, 4, 5), (3, 2, 3, 3), dict(stride=2, padding=1, output_padding=(1, 0))),
    (2, (3, 4, 4), (3, 2, 2, 3), dict(dilation=2)),
]


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cfg", TCONV_CONFIGS, ids=[str(i) for i in range(len(TCONV_CONFIGS))])
def test_conv_transpose_values(dtype, cfg):
    k, xs, ws, kw = cfg
    x, w = rnd(*xs), rnd(*ws, seed=1)
    b = rnd(ws[1] * kw.get("groups", 1), seed=2)
    ex, tx = pair(x, dtype)
    ew, tw = pair(w, dtype)
    eb, tb = pair(b, dtype)
    f = "conv_transpose1d" if k == 1 else "conv_transpose2d"
    close(getattr(ember, f)(ex, ew, eb, **kw), getattr(F, f)(tx, tw, tb, **kw), dtype)


@needs_torch
def test_unfold_fold_values():
    x = rnd(2, 3, 6, 5)
    ex, tx = pair(x)
    kw = dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    ours = ember.im2col(ex, (2, 3), (1, 2), (1, 1), (2, 1))
    close(ours, F.unfold(tx, **kw))
    cols = rnd(*tuple(ours.shape), seed=1)
    ec, tc = pair(cols)
    close(ember.col2im(ec, (6, 5), (2, 3), (1, 2), (1, 1), (2, 1)),
          F.fold(tc, output_size=(6, 5), **kw))
    close(ember.im2col(ex[0], (2, 2), (1,), (0,), (1,)), F.unfold(tx[0], 2))


def _conv_case(name, k, xs, ws, kw, bias=True, transpose=False):
    def fn(x, w, *b):
        lib = mod(x)
        bb = b[0] if b else None
        if transpose:
            f = "conv_transpose1d" if k == 1 else "conv_transpose2d"
            return getattr(ember if lib is ember else F, f)(x, w, bb, **kw)
        return _conv(lib, k, x, w, bb, kw)
    nb = (ws[1] * kw.get("groups", 1)) if transpose else ws[0]
    return GradCase(name, fn, lambda rng: [rng.standard_normal(xs), rng.standard_normal(ws)]
                    + ([rng.standard_normal(nb)] if bias else []))


CONV_GRAD_CASES = [
    _conv_case("conv1d", 1, (2, 3, 7), (4, 3, 3), dict(stride=2, padding=1)),
    _conv_case("conv2d", 2, (2, 2, 5, 4), (3, 2, 2, 3), dict(padding=(1, 0), dilation=(2, 1))),
    _conv_case("conv2d_groups", 2, (1, 4, 4, 4), (4, 2, 3, 3), dict(groups=2, stride=2),
               bias=False),
    _conv_case("conv2d_same", 2, (1, 2, 4, 5), (2, 2, 2, 2), dict(padding="same")),
    _conv_case("conv3d", 3, (1, 2, 3, 4, 3), (2, 2, 2, 2, 2), dict(padding=1)),
    _conv_case("conv_transpose1d", 1, (2, 3, 4), (3, 2, 3), dict(stride=2, output_padding=1),
               transpose=True),
    _conv_case("conv_transpose2d", 2, (1, 4, 3, 3), (4, 1, 2, 3),
               dict(stride=(2, 1), padding=(0, 1), groups=2), transpose=True),
    GradCase("unfold", lambda x: ember.im2col(x, (2, 2), (1,), (1,), (2,)) if mod(x) is ember
             else F.unfold(x, 2, padding=1, stride=2),
             lambda rng: [rng.standard_normal((2, 2, 4, 5))]),
    GradCase("fold", lambda c: ember.col2im(c, (4, 5), (2, 2), (1,), (0,), (1,)) if mod(c) is ember
             else F.fold(c, (4, 5), 2),
             lambda rng: [rng.standard_normal((2, 8, 12))]),
]


@pytest.mark.parametrize("case", CONV_GRAD_CASES, ids=[c.name for c in CONV_GRAD_CASES])
def test_conv_grads(case):
    run_case(case)


def test_conv_errors():
    x = ember.zeros(2, 3, 8, 8)
    with pytest.raises(RuntimeError, match=r"convolution: expected input of shape \(2, 3, 8, 8\) "
                       r"to have 4 channels"):
        ember.conv2d(x, ember.zeros(5, 4, 3, 3))
    with pytest.raises(RuntimeError, match="conv2d: expected a 3-D .unbatched. or 4-D"):
        ember.conv2d(ember.zeros(8, 8), ember.zeros(5, 3, 3, 3))
    with pytest.raises(RuntimeError, match="conv2d: expected a 4-D weight"):
        ember.conv2d(x, ember.zeros(5, 3, 3))
    with pytest.raises(RuntimeError, match="spans 9 elements.*padded input"):
        ember.conv2d(x, ember.zeros(5, 3, 9, 9))
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided"):
        ember.conv2d(x, ember.zeros(5, 3, 3, 3), None, 2, "same")
    with pytest.raises(RuntimeError, match=r"expected bias of shape \(5,\)"):
        ember.conv2d(x, ember.zeros(5, 3, 3, 3), ember.zeros(4))
    with pytest.raises(RuntimeError, match="should be the same"):
        ember.conv2d(x, ember.zeros(5, 3, 3, 3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="stride must be an int or a tuple of 2"):
        ember.conv2d(x, ember.zeros(5, 3, 3, 3), None, (1, 1, 1))
    with pytest.raises(RuntimeError, match="col2im: expected 12 blocks"):
        ember.col2im(ember.zeros(1, 4, 11), (4, 5), (2, 2), (1,), (0,), (1,))


# ---- pooling --------------------------------------------------------------------------------

POOL_CONFIGS = [
    ("max_pool1d", (2, 3, 9), dict(kernel_size=3)),
    ("max_pool1d", (3, 10), dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)),
    ("max_pool2d", (2, 3, 7, 6), dict(kernel_size=2)),
    ("max_pool2d", (2, 2, 7, 8), dict(kernel_size=(3, 2), stride=(2, 3), padding=1,
                                      ceil_mode=True)),
    ("max_pool2d", (3, 9, 9), dict(kernel_size=3, stride=2, dilation=2)),
    ("avg_pool1d", (2, 3, 9), dict(kernel_size=4, stride=2, padding=2)),
    ("avg_pool1d", (2, 3, 9), dict(kernel_size=4, stride=3, padding=1, ceil_mode=True,
                                   count_include_pad=False)),
    ("avg_pool2d", (2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool2d", (2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                      count_include_pad=False)),
    ("avg_pool2d", (3, 7, 6), dict(kernel_size=2, divisor_override=3)),
    ("adaptive_avg_pool1d", (2, 3, 10), dict(output_size=4)),
    ("adaptive_avg_pool2d", (2, 3, 7, 9), dict(output_size=(3, 4))),
    ("adaptive_avg_pool2d", (3, 5, 5), dict(output_size=1)),
    ("adaptive_max_pool1d", (2, 3, 10), dict(output_size=3)),
    ("adaptive_max_pool2d", (2, 3, 7, 9), dict(output_size=(2, 5))),
]


def _pool(lib, name, x, kw):
    if lib is ember:
        r = getattr(ember, name)(x, **kw)
        return r[0] if isinstance(r, tuple) else r
    return getattr(F, name)(x, **kw)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cfg", POOL_CONFIGS, ids=[f"{c[0]}-{i}" for i, c in enumerate(POOL_CONFIGS)])
def test_pool_values(dtype, cfg):
    name, shape, kw = cfg
    ex, tx = pair(rnd(*shape), dtype)
    close(_pool(ember, name, ex, kw), _pool(torch, name, tx, kw), dtype)


@needs_torch
def test_max_pool_indices():
    ex, tx = pair(rnd(2, 3, 7, 6))
    o, i = ember.max_pool2d_with_indices(ex, 3, 2, 1)
    to, ti = F.max_pool2d(tx, 3, 2, 1, return_indices=True)
    close(o, to)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    o, i = ember.adaptive_max_pool2d(ex, (3, 2))
    to, ti = F.adaptive_max_pool2d(tx, (3, 2), return_indices=True)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    o, i = ember.max_pool1d_with_indices(ex[0], 2)
    to, ti = F.max_pool1d(tx[0], 2, return_indices=True)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


@needs_torch
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=1),
                                dict(kernel_size=2, stride=1, dilation=2),
                                dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, ceil_mode=True)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool_ties_and_nan_indices_match_torch(kw, dtype):
    # few distinct values (ties everywhere) and some NaNs: the first maximum in window order
    # wins and NaN beats everything, in the row-wise fast path and the generic loop alike
    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, (2, 3, 9, 11)).astype(dtype)
    a[rng.random(a.shape) < 0.05] = np.nan
    o, i = ember.max_pool2d_with_indices(ember.from_numpy(a), **kw)
    to, ti = F.max_pool2d(torch.from_numpy(a), return_indices=True, **kw)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    np.testing.assert_array_equal(o.numpy(), to.numpy())


def _pool_case(name, shape, kw):
    # distinct values so that the max is unique under finite differences
    def inputs(rng):
        return [rng.permutation(np.prod(shape)).reshape(shape) * 0.1 + rng.uniform(0, .01, shape)]
    # The backward is linear in the upstream gradient and does not involve the input: the
    # second derivative is 0.
    return GradCase(name, lambda x: _pool(mod(x), name, x, kw), inputs)


POOL_GRAD_CASES = [_pool_case(c[0], c[1], c[2]) for c in POOL_CONFIGS]


@pytest.mark.parametrize("case", POOL_GRAD_CASES,
                         ids=[f"{c.name}-{i}" for i, c in enumerate(POOL_GRAD_CASES)])
def test_pool_grads(case):
    run_case(case)


def test_pool_errors():
    with pytest.raises(RuntimeError, match="max_pool2d: expected a 3-D .unbatched. or 4-D"):
        ember.max_pool2d(ember.zeros(4, 4), 2)
    with pytest.raises(RuntimeError, match="padding should be at most half"):
        ember.max_pool2d(ember.zeros(1, 4, 4), 2, padding=2)
    with pytest.raises(RuntimeError, match="avg_pool2d: kernel_size must be an int or a tuple of 2"):
        ember.avg_pool2d(ember.zeros(1, 4, 4), (2, 2, 2))
    with pytest.raises(RuntimeError, match="larger than the padded input"):
        ember.avg_pool1d(ember.zeros(1, 1, 3), 5)
    with pytest.raises(RuntimeError, match="output_size must be non-negative"):
        ember.adaptive_avg_pool2d(ember.zeros(1, 4, 4), (-1, 2))
    assert tuple(ember.adaptive_avg_pool2d(ember.zeros(1, 4, 4), (0, 2)).shape) == (1, 0, 2)


# ---- normalization --------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_values(dtype):
    x = rnd(4, 6, 5) * 3 + 1
    ex, tx = pair(x, dtype)
    ew, tw = pair(rnd(6, 5, seed=1), dtype)
    eb, tb = pair(rnd(6, 5, seed=2), dtype)
    close(ember.layer_norm(ex, (6, 5), ew, eb, 1e-5), F.layer_norm(tx, (6, 5), tw, tb, 1e-5), dtype)
    close(ember.layer_norm(ex, (5,)), F.layer_norm(tx, (5,)), dtype)
    close(ember.rms_norm(ex, (6, 5), ew), F.rms_norm(tx, (6, 5), tw), dtype)
    close(ember.rms_norm(ex, (5,), eps=0.1), F.rms_norm(tx, (5,), eps=0.1), dtype)
    ecw, tcw = pair(rnd(6, seed=3), dtype)
    ecb, tcb = pair(rnd(6, seed=4), dtype)
    close(ember.group_norm(ex, 3, ecw, ecb), F.group_norm(tx, 3, tcw, tcb), dtype)
    close(ember.group_norm(ex, 6), F.group_norm(tx, 6), dtype)


@needs_torch
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 4)])
def test_batch_norm_running_stats(shape):
    x = rnd(*shape) * 2 + 3
    ex, tx = pair(x)
    erm, trm = pair(np.zeros(3))
    erv, trv = pair(np.ones(3))
    ew, tw = pair(rnd(3, seed=1))
    eb, tb = pair(rnd(3, seed=2))
    for _ in range(2):
        close(ember.batch_norm(ex, ew, eb, erm, erv, True, 0.1, 1e-5),
              F.batch_norm(tx, trm, trv, tw, tb, True, 0.1, 1e-5))
    close(erm, trm)
    close(erv, trv)
    close(ember.batch_norm(ex, ew, eb, erm, erv, False, 0.1, 1e-5),
          F.batch_norm(tx, trm, trv, tw, tb, False, 0.1, 1e-5))
    # instance norm (running stats averaged over the batch)
    if len(shape) >= 3:
        close(ember.instance_norm(ex, ew, eb, erm, erv, True, 0.1, 1e-5),
              F.instance_norm(tx, trm, trv, tw, tb, True, 0.1, 1e-5))
        close(erm, trm)
        close(erv, trv)


W6 = np.linspace(0.5, 1.5, 6)
NORM_GRAD_CASES = [
    GradCase("layer_norm", lambda x, w, b: ember.layer_norm(x, (5,), w, b) if mod(x) is ember
             else F.layer_norm(x, (5,), w, b),
             lambda rng: [rng.standard_normal((3, 4, 5)), rng.standard_normal(5),
                          rng.standard_normal(5)], gradgrad=False),
    GradCase("layer_norm_2d", lambda x: ember.layer_norm(x, (4, 5)) if mod(x) is ember
             else F.layer_norm(x, (4, 5)),
             lambda rng: [rng.standard_normal((2, 4, 5))], gradgrad=False),
    GradCase("rms_norm", lambda x, w: ember.rms_norm(x, (5,), w) if mod(x) is ember
             else F.rms_norm(x, (5,), w),
             lambda rng: [rng.standard_normal((3, 5)), rng.standard_normal(5)], gradgrad=False),
    GradCase("group_norm", lambda x, w, b: ember.group_norm(x, 2, w, b) if mod(x) is ember
             else F.group_norm(x, 2, w, b),
             lambda rng: [rng.standard_normal((2, 6, 3)), rng.standard_normal(6),
                          rng.standard_normal(6)], gradgrad=False),
    GradCase("batch_norm_train", lambda x, w, b: ember.batch_norm(x, w, b, None, None, True, 0.1,
                                                                   1e-5) if mod(x) is ember
             else F.batch_norm(x, None, None, w, b, True),
             lambda rng: [rng.standard_normal((4, 3, 2)), rng.standard_normal(3),
                          rng.standard_normal(3)], gradgrad=False),
    GradCase("batch_norm_eval", lambda x, w: ember.batch_norm(
        x, w, None, ember.tensor(W6[:3]), ember.tensor(W6[3:]), False, 0.1, 1e-5)
        if mod(x) is ember else F.batch_norm(x, torch.tensor(W6[:3]), torch.tensor(W6[3:]), w,
                                             None, False),
        lambda rng: [rng.standard_normal((4, 3)), rng.standard_normal(3)], gradgrad=False),
    GradCase("instance_norm", lambda x, w: ember.instance_norm(x, w, None, None, None, True, 0.1,
                                                               1e-5) if mod(x) is ember
             else F.instance_norm(x, weight=w),
             lambda rng: [rng.standard_normal((2, 3, 4)), rng.standard_normal(3)],
             gradgrad=False),
]


@pytest.mark.parametrize("case", NORM_GRAD_CASES, ids=[c.name for c in NORM_GRAD_CASES])
def test_norm_grads(case):
    run_case(case)


def test_norm_errors():
    with pytest.raises(RuntimeError, match=r"layer_norm: expected an input whose trailing dims are \(4,\)"):
        ember.layer_norm(ember.zeros(2, 3), (4,))
    with pytest.raises(RuntimeError, match=r"layer_norm: expected weight of shape \(3,\), got \(2,\)"):
        ember.layer_norm(ember.zeros(2, 3), (3,), ember.ones(2))
    with pytest.raises(RuntimeError, match="group_norm: expected the number of channels .6. to be "
                       "divisible by num_groups .4."):
        ember.group_norm(ember.zeros(2, 6, 3), 4)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        ember.batch_norm(ember.zeros(1, 3), None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match=r"batch_norm: expected running_mean of shape \(3,\)"):
        ember.batch_norm(ember.zeros(2, 3), None, None, ember.zeros(4), ember.ones(3), True, 0.1,
                         1e-5)


# ---- embedding, dropout, attention ----------------------------------------------------------

@needs_torch
def test_embedding_values_and_grad():
    w = rnd(10, 4)
    idx = np.array([[1, 3, 3], [0, 9, 2]])
    ew, tw = pair(w)
    ew.requires_grad_(True)
    tw.requires_grad_(True)
    eo = ember.embedding(ew, ember.tensor(idx), padding_idx=3)
    to = F.embedding(torch.tensor(idx), tw, padding_idx=3)
    close(eo, to)
    g = rnd(2, 3, 4, seed=1)
    eo.backward(ember.tensor(g))
    to.backward(torch.tensor(g))
    close(ew.grad, tw.grad)
    ew.grad = None
    tw.grad = None
    eo = ember.embedding(ew, ember.tensor(idx), scale_grad_by_freq=True)
    to = F.embedding(torch.tensor(idx), tw, scale_grad_by_freq=True)
    eo.backward(ember.tensor(g))
    to.backward(torch.tensor(g))
    close(ew.grad, tw.grad)


EMB_GRAD_CASES = [
    GradCase("embedding", lambda w, i: ember.embedding(w, i) if mod(w) is ember
             else F.embedding(i, w),
             lambda rng: [rng.standard_normal((5, 3)), np.array([[0, 2, 4], [2, 1, 1]])]),
    GradCase("embedding_bag_sum", lambda w, i, o: ember.embedding_bag(w, i, o, "sum")
             if mod(w) is ember else F.embedding_bag(i, w, o, mode="sum"),
             lambda rng: [rng.standard_normal((6, 3)), np.array([0, 2, 4, 5, 1]),
                          np.array([0, 2, 2])]),
    GradCase("embedding_bag_mean_2d", lambda w, i: ember.embedding_bag(w, i, None, "mean")
             if mod(w) is ember else F.embedding_bag(i, w, mode="mean"),
             lambda rng: [rng.standard_normal((6, 3)), np.array([[0, 2, 4], [5, 1, 1]])]),
]


@pytest.mark.parametrize("case", EMB_GRAD_CASES, ids=[c.name for c in EMB_GRAD_CASES])
def test_embedding_grads(case):
    run_case(case)


@needs_torch
def test_embedding_bag_max_and_weights():
    w = rnd(6, 3)
    ew, tw = pair(w)
    i, o = np.array([0, 2, 4, 5, 1]), np.array([0, 2, 2])
    close(ember.embedding_bag(ew, ember.tensor(i), ember.tensor(o), "max"),
          F.embedding_bag(torch.tensor(i), tw, torch.tensor(o), mode="max"))
    psw = rnd(5, seed=3)
    close(ember.embedding_bag(ew, ember.tensor(i), ember.tensor(o), "sum",
                              ember.tensor(psw)),
          F.embedding_bag(torch.tensor(i), tw, torch.tensor(o), mode="sum",
                          per_sample_weights=torch.tensor(psw)))


def test_embedding_errors():
    with pytest.raises(IndexError, match="embedding: index 10 is out of range for 10"):
        ember.embedding(ember.zeros(10, 2), ember.tensor([1, 10]))
    with pytest.raises(TypeError, match="embedding: expected integer indices"):
        ember.embedding(ember.zeros(10, 2), ember.zeros(3))


def test_dropout_mask_scale_and_grad():
    ember.manual_seed(0)
    x = ember.ones(200, 100, requires_grad=True)
    y = ember.dropout(x, 0.3, True)
    v = y.detach().numpy()
    kept = v != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(v[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.7, rtol=1e-6)
    assert ember.dropout(x, 0.3, False) is x
    assert not ember.dropout(x, 1.0, True).detach().numpy().any()
    f = ember.feature_dropout(ember.ones(50, 40, 3, 3), 0.5, True).numpy()
    per_channel = f.reshape(50, 40, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    with pytest.raises(ValueError, match="dropout: probability has to be between 0 and 1"):
        ember.dropout(x, 1.5, True)


@needs_torch
@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal"])
def test_sdpa_values(kind):
    q, k, v = rnd(2, 3, 4, 8), rnd(2, 3, 5, 8, seed=1), rnd(2, 3, 5, 6, seed=2)
    eq, tq = pair(q)
    ek, tk = pair(k)
    ev, tv = pair(v)
    kw_e, kw_t = {}, {}
    if kind == "bool":
        m = np.random.default_rng(3).uniform(size=(4, 5)) > 0.3
        m[:, 0] = True
        kw_e["attn_mask"], kw_t["attn_mask"] = ember.tensor(m), torch.tensor(m)
    elif kind == "float":
        m = rnd(4, 5, seed=4)
        kw_e["attn_mask"], kw_t["attn_mask"] = ember.tensor(m), torch.tensor(m)
    elif kind == "causal":
        kw_e["is_causal"] = kw_t["is_causal"] = True
    close(ember.scaled_dot_product_attention(eq, ek, ev, **kw_e, scale=0.3),
          F.scaled_dot_product_attention(tq, tk, tv, **kw_t, scale=0.3))


@needs_torch
def test_sdpa_gqa_and_grad():
    q, k, v = rnd(1, 4, 3, 8), rnd(1, 2, 5, 8, seed=1), rnd(1, 2, 5, 8, seed=2)
    eq, tq = pair(q)
    ek, tk = pair(k)
    ev, tv = pair(v)
    close(ember.scaled_dot_product_attention(eq, ek, ev, enable_gqa=True),
          F.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True))
    run_case(GradCase("sdpa", lambda a, b, c: mod(a).nn.functional.scaled_dot_product_attention(
        a, b, c, is_causal=True) if mod(a) is torch
        else ember.scaled_dot_product_attention(a, b, c, is_causal=True),
        lambda rng: [rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 3)),
                     rng.standard_normal((2, 4, 2))]))


# ---- fused optimizer steps ------------------------------------------------------------------

# torch's vectorized kernels fuse some multiply-adds, so results agree to a few ulps.
OPT_TOL = {"float32": dict(rtol=1e-6, atol=1e-7), "float64": dict(rtol=1e-13, atol=1e-15)}


def _params(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (2, 2, 3), (1,)][:n]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cfg", [dict(), dict(weight_decay=0.1), dict(momentum=0.9),
                                 dict(momentum=0.9, dampening=0.1, weight_decay=0.01),
                                 dict(momentum=0.8, nesterov=True, maximize=True)])
def test_fused_sgd_matches_torch(dtype, cfg):
    ps = _params(4, dtype)
    eps_ = [ember.tensor(p.copy()) for p in ps]
    tps = [torch.tensor(p.copy(), requires_grad=True) for p in ps]
    opt = torch.optim.SGD(tps, lr=0.05, foreach=False, **cfg)
    mom = cfg.get("momentum", 0.0)
    bufs = [ember.zeros(tuple(p.shape), dtype=getattr(ember, dtype)) for p in eps_]
    for step in range(3):
        gs = _params(4, dtype, seed=10 + step)
        for t, g in zip(tps, gs):
            t.grad = torch.tensor(g)
        opt.step()
        ember._C._fused_sgd_(eps_, [ember.tensor(g) for g in gs], bufs if mom else [],
                          weight_decay=cfg.get("weight_decay", 0.0), momentum=mom, lr=0.05,
                          dampening=cfg.get("dampening", 0.0), nesterov=cfg.get("nesterov", False),
                          maximize=cfg.get("maximize", False), is_first_step=step == 0)
    for e, t in zip(eps_, tps):
        np.testing.assert_allclose(e.numpy(), t.detach().numpy(), **OPT_TOL[dtype])


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cfg", [dict(), dict(weight_decay=0.1), dict(amsgrad=True),
                                 dict(maximize=True, weight_decay=0.01), dict(decoupled=True),
                                 dict(decoupled=True, amsgrad=True, weight_decay=0.05),
                                 dict(betas=(0.4, 0.99))])
def test_fused_adam_matches_torch(dtype, cfg):
    cfg = dict(cfg)
    decoupled = cfg.pop("decoupled", False)
    betas = cfg.pop("betas", (0.9, 0.999))
    ps = _params(4, dtype)
    eps_ = [ember.tensor(p.copy()) for p in ps]
    tps = [torch.tensor(p.copy(), requires_grad=True) for p in ps]
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    if decoupled:
        cfg.setdefault("weight_decay", 0.0)
    opt = cls(tps, lr=0.01, betas=betas, eps=1e-8, foreach=False, **cfg)
    dt = getattr(ember, dtype)
    m1 = [ember.zeros(tuple(p.shape), dtype=dt) for p in eps_]
    m2 = [ember.zeros(tuple(p.shape), dtype=dt) for p in eps_]
    mx = [ember.zeros(tuple(p.shape), dtype=dt) for p in eps_]
    steps = [ember.zeros((), dtype=ember.float32) for _ in eps_]
    for step in range(4):
        gs = _params(4, dtype, seed=20 + step)
        for t, g in zip(tps, gs):
            t.grad = torch.tensor(g)
        opt.step()
        fn = ember._C._fused_adamw_ if decoupled else ember._C._fused_adam_
        fn(eps_, [ember.tensor(g) for g in gs], m1, m2, mx if cfg.get("amsgrad") else [], steps,
           lr=0.01, beta1=betas[0], beta2=betas[1], weight_decay=cfg.get("weight_decay", 0.0),
           eps=1e-8, amsgrad=cfg.get("amsgrad", False), maximize=cfg.get("maximize", False))
    assert steps[0].item() == 4
    for e, t in zip(eps_, tps):
        np.testing.assert_allclose(e.numpy(), t.detach().numpy(), **OPT_TOL[dtype])
    for e, t in zip(m1, tps):
        np.testing.assert_allclose(e.numpy(), opt.state[t]["exp_avg"].numpy(), **OPT_TOL[dtype])


def test_fused_optimizer_noncontiguous_and_errors():
    base = ember.zeros(4, 6)
    p = base[:, ::2]  # non-contiguous param: updated through a copy written back
    g = ember.ones(4, 3)
    ember._C._fused_sgd_([p], [g], [], weight_decay=0.0, momentum=0.0, lr=0.5, dampening=0.0,
                      nesterov=False, maximize=False, is_first_step=True)
    np.testing.assert_array_equal(base.numpy()[:, ::2], -0.5)
    np.testing.assert_array_equal(base.numpy()[:, 1::2], 0.0)
    with pytest.raises(RuntimeError, match=r"_fused_adam_: exp_avgs\[0\] has shape \(2,\) but "
                       r"params\[0\] has shape \(4, 3\)"):
        ember._C._fused_adam_([p], [g], [ember.zeros(2)], [ember.zeros(4, 3)], [], [ember.zeros(())],
                           lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8,
                           amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError, match="expected 1 grads"):
        ember._C._fused_sgd_([p], [], [], weight_decay=0.0, momentum=0.0, lr=0.5, dampening=0.0,
                          nesterov=False, maximize=False, is_first_step=True)


# ---- vectorized float32 kernels (nn_vec.h) ---------------------------------------------------

def _ulps(got, ref):
    """|got - ref| in units of float32 spacing at ref (denormal spacing near zero)."""
    ref32 = ref.astype(np.float32)
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref32)).astype(np.float64)


def test_softmax_exp_approximation_accuracy():
    # Row [0, x...]: softmax is exp(x) / (1 + sum exp(x)), so every exp the kernel evaluates shows
    # up directly, over the whole range softmax feeds it (x - max <= 0), denormal results included.
    x = np.linspace(-104.0, 0.0, 40001, dtype=np.float32)[:-1]
    rows = np.concatenate([np.zeros((x.size // 25, 1), np.float32), x.reshape(-1, 25)], 1)
    got = ember.softmax(ember.tensor(rows), 1).numpy()
    r64 = rows.astype(np.float64)
    ref = np.exp(r64) / np.exp(r64).sum(1, keepdims=True)
    assert _ulps(got, ref).max() <= 6  # exp plus the normalization (torch's is within ~4)
    got = ember.log_softmax(ember.tensor(rows), 1).numpy()
    ref = r64 - np.log(np.exp(r64).sum(1, keepdims=True))
    np.testing.assert_allclose(got, ref, rtol=2e-7, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 16, 17, 33, 1000])
def test_softmax_float32_rows_match_torch(n):
    a = (rnd(5, n) * 8).astype(np.float32)
    e, t = pair(a, "float32")
    e.requires_grad_(True)
    t.requires_grad_(True)
    g = rnd(5, n, seed=2).astype(np.float32)
    for fe, ft in [(ember.softmax, torch.softmax), (ember.log_softmax, torch.log_softmax)]:
        ye, yt = fe(e, 1), ft(t, 1)
        close(ye, yt, "float32", rtol=2e-6, atol=1e-6)
        (ge,) = ember.autograd.grad(ye, e, ember.tensor(g))
        (gt,) = torch.autograd.grad(yt, t, torch.tensor(g))
        close(ge, gt, "float32", rtol=1e-5, atol=1e-5)


def test_softmax_float32_special_rows():
    inf, nan = float("inf"), float("nan")
    a = np.array([[0.0] * 9 + [nan], [-inf] * 10, [inf] + [0.0] * 9, [-inf] * 9 + [3.0]],
                 np.float32)
    s = ember.softmax(ember.tensor(a), 1).numpy()
    assert np.isnan(s[0]).all()  # a NaN poisons its row
    assert np.isnan(s[1]).all()  # all -inf: 0 / 0
    assert np.isnan(s[2, 0])  # inf - inf
    np.testing.assert_array_equal(s[3], [0.0] * 9 + [1.0])
    ls = ember.log_softmax(ember.tensor(a), 1).numpy()
    assert np.isnan(ls[0]).all()
    np.testing.assert_array_equal(ls[3], [-inf] * 9 + [0.0])


@needs_torch
@pytest.mark.parametrize("m", [5, 37, 512])
@pytest.mark.parametrize("affine", ["wb", "w", "none"])
def test_norm_float32_rows_match_torch(m, affine):
    x = (rnd(6, m) * 3 + 2).astype(np.float32)
    ex, tx = pair(x, "float32")
    ew, tw = pair(rnd(m, seed=1), "float32")
    eb, tb = pair(rnd(m, seed=2), "float32")
    ew, eb = (ew if "w" in affine else None), (eb if "b" in affine else None)
    tw, tb = (tw if "w" in affine else None), (tb if "b" in affine else None)
    leaves_e = [t for t in (ex, ew, eb) if t is not None]
    leaves_t = [t for t in (tx, tw, tb) if t is not None]
    for t in leaves_e + leaves_t:
        t.requires_grad_(True)
    g = rnd(6, m, seed=3).astype(np.float32)
    for which in ["layer", "rms"]:
        if which == "layer":
            ye, yt = ember.layer_norm(ex, (m,), ew, eb, 1e-5), F.layer_norm(tx, (m,), tw, tb, 1e-5)
            le, lt = leaves_e, leaves_t
        else:
            ye, yt = ember.rms_norm(ex, (m,), ew), F.rms_norm(tx, (m,), tw)
            k = 2 if ew is not None else 1  # rms_norm has no bias
            le, lt = leaves_e[:k], leaves_t[:k]
        close(ye, yt, "float32", rtol=1e-5, atol=1e-5)
        ge = ember.autograd.grad(ye, le, ember.tensor(g))
        gt = torch.autograd.grad(yt, lt, torch.tensor(g))
        for a, b in zip(ge, gt):
            close(a, b, "float32", rtol=1e-4, atol=1e-4)


def test_layer_norm_float32_long_row_accuracy():
    # A large offset and a long row: float32 statistics must not lose the variance.
    x = (np.random.default_rng(0).standard_normal((2, 100_000)) + 1000).astype(np.float32)
    got = ember.layer_norm(ember.tensor(x), (100_000,)).numpy()
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_fused_optimizer_rejects_mixed_dtypes():
    p = [ember.zeros(3), ember.zeros(3, dtype=ember.float64)]
    g = [ember.ones(3), ember.ones(3, dtype=ember.float64)]
    with pytest.raises(TypeError, match=r"params\[1\] has dtype float64 but params\[0\]"):
        ember._C._fused_sgd_(p, g, [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0,
                             nesterov=False, maximize=False, is_first_step=False)


@needs_torch
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3, 2, 3, 4)])
def test_batch_norm_keeps_channels_last_like_torch(training, shape):
    # A channels-last input gives a channels-last output and input gradient (torch's
    # suggest_memory_format), with the values of the contiguous computation.
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    g = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    fmt_e = ember.channels_last if len(shape) == 4 else ember.channels_last_3d
    fmt_t = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    xe = ember.tensor(x).contiguous(memory_format=fmt_e).requires_grad_()
    xt = torch.tensor(x).contiguous(memory_format=fmt_t).requires_grad_()
    if training:
        args_e = args_t = dict(running_mean=None, running_var=None, training=True)
    else:
        args_e = dict(running_mean=ember.zeros(3), running_var=ember.ones(3), training=False)
        args_t = dict(running_mean=torch.zeros(3), running_var=torch.ones(3), training=False)
    ye = ember.nn.functional.batch_norm(xe, weight=ember.ones(3), bias=ember.zeros(3), **args_e)
    yt = torch.nn.functional.batch_norm(xt, weight=torch.ones(3), bias=torch.zeros(3), **args_t)
    assert ye.stride() == yt.stride()
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    (gi,) = ember.autograd.grad(ye, xe, ember.tensor(g))
    (gt,) = torch.autograd.grad(yt, xt, torch.tensor(g))
    assert gi.stride() == gt.stride()
    np.testing.assert_allclose(gi.numpy(), gt.numpy(), rtol=1e-4, atol=1e-5)
