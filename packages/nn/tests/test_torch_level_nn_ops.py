"""The nn operators PyTorch exposes at the top level with its positional signatures
(ember.nn._torch_ops): int-reduction losses, RNN cells and flat-parameter recurrences (padded and
packed), samplers, conv_tbc, norms and SyncBatchNorm's building blocks, checked against torch
(the batch-norm blocks, CUDA-only in torch, against torch's batch_norm and its gradient)."""

from __future__ import annotations

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def _pair(*shape, dtype="float32", requires_grad=False):
    a = RNG.standard_normal(shape).astype(dtype)
    return (ember.tensor(a).requires_grad_(requires_grad),
            torch.tensor(a).requires_grad_(requires_grad))


def _close(e, t, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_losses_with_int_reduction(reduction):
    a, ta = _pair(4, 3)
    b, tb = _pair(4, 3)
    c, tc = _pair(4, 3)
    y = np.array([1.0, -1.0, 1.0, -1.0], dtype="float32")
    ey, ty = ember.tensor(y), torch.tensor(y)
    _close(ember.cosine_embedding_loss(a, b, ey, 0.1, reduction),
           torch.cosine_embedding_loss(ta, tb, ty, 0.1, reduction))
    _close(ember.hinge_embedding_loss(a, ember.tensor(np.sign(a.numpy())), 0.5, reduction),
           torch.hinge_embedding_loss(ta, torch.sign(ta), 0.5, reduction))
    _close(ember.margin_ranking_loss(a[:, 0], b[:, 0], ey, 0.2, reduction),
           torch.margin_ranking_loss(ta[:, 0], tb[:, 0], ty, 0.2, reduction))
    _close(ember.triplet_margin_loss(a, b, c, 1.0, 2.0, 1e-6, True, reduction),
           torch.triplet_margin_loss(ta, tb, tc, 1.0, 2.0, 1e-6, True, reduction))
    tgt = np.abs(RNG.standard_normal((4, 3))).astype("float32") * 3
    _close(ember.poisson_nll_loss(a, ember.tensor(tgt), True, True, 1e-8, reduction),
           torch.poisson_nll_loss(ta, torch.tensor(tgt), True, True, 1e-8, reduction))
    lp = np.log(np.full((6, 2, 4), 0.25, dtype="float32"))
    targets = np.array([[1, 2], [3, 3]])
    _close(ember.ctc_loss(ember.tensor(lp), ember.tensor(targets), [6, 5], [2, 2], 0,
                          reduction, False),
           torch.ctc_loss(torch.tensor(lp), torch.tensor(targets), [6, 5], [2, 2], 0,
                          reduction, False))


def test_losses_reject_bad_reduction():
    a = ember.ones(2, 2)
    with pytest.raises(ValueError, match="reduction must be 0"):
        ember.cosine_embedding_loss(a, a, ember.ones(2), 0.0, 5)


def _weights(G, H, inp, bias=True):
    shapes = [(G * H, inp), (G * H, H)] + ([(G * H,), (G * H,)] if bias else [])
    pairs = [_pair(*s, requires_grad=True) for s in shapes]
    return [p[0] for p in pairs], [p[1] for p in pairs]


@pytest.mark.parametrize("name,G", [("lstm_cell", 4), ("gru_cell", 3), ("rnn_tanh_cell", 1),
                                    ("rnn_relu_cell", 1)])
def test_cells_forward_and_backward(name, G):
    H, inp = 5, 3
    x, tx = _pair(2, inp, requires_grad=True)
    h, th = _pair(2, H, requires_grad=True)
    ew, tw = _weights(G, H, inp)
    if name == "lstm_cell":
        c, tc = _pair(2, H)
        e_out = ember.lstm_cell(x, (h, c), *ew)
        t_out = torch.lstm_cell(tx, (th, tc), *tw)
    else:
        e_out = (getattr(ember, name)(x, h, *ew),)
        t_out = (getattr(torch, name)(tx, th, *tw),)
    for a, b in zip(e_out, t_out):
        _close(a, b)
    sum(o.sum() for o in e_out).backward()
    sum(o.sum() for o in t_out).backward()
    _close(x.grad, tx.grad)
    _close(h.grad, th.grad)
    for a, b in zip(ew, tw):
        _close(a.grad, b.grad)


def test_cell_shape_errors():
    with pytest.raises(RuntimeError, match="gru_cell"):
        ember.gru_cell(ember.ones(1, 2), ember.ones(1, 3), ember.ones(6, 2), ember.ones(6, 3))


def _flat(G, H, n_in, layers, dirs, bias=True):
    ep, tp = [], []
    for layer in range(layers):
        for _ in range(dirs):
            e, t = _weights(G, H, n_in if layer == 0 else H * dirs, bias)
            ep += e
            tp += t
    return ep, tp


@pytest.mark.parametrize("mode,G", [("lstm", 4), ("gru", 3), ("rnn_tanh", 1), ("rnn_relu", 1)])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrences_padded_and_packed(mode, G, bidirectional):
    T, B, n_in, H, L = 4, 3, 3, 4, 2
    D = 2 if bidirectional else 1
    ep, tp = _flat(G, H, n_in, L, D)
    h, th = _pair(L * D, B, H)
    c, tc = _pair(L * D, B, H)
    ehx, thx = ((h, c), (th, tc)) if mode == "lstm" else (h, th)
    x, tx = _pair(B, T, n_in, requires_grad=True)  # batch_first
    e_out = getattr(ember, mode)(x, ehx, ep, True, L, 0.0, False, bidirectional, True)
    t_out = getattr(torch, mode)(tx, thx, tp, True, L, 0.0, False, bidirectional, True)
    assert len(e_out) == len(t_out)
    for a, b in zip(e_out, t_out):
        _close(a, b, atol=1e-4)
    e_out[0].sum().backward()
    t_out[0].sum().backward()
    _close(x.grad, tx.grad, atol=1e-4)
    _close(ep[0].grad, tp[0].grad, atol=1e-4)
    # packed: data rows ordered by time step, batch_sizes non-increasing
    d, td = _pair(7, n_in)
    sizes = [3, 2, 1, 1]
    e_out = getattr(ember, mode)(d, ember.tensor(sizes), ehx, ep, True, L, 0.0, False,
                                 bidirectional)
    t_out = getattr(torch, mode)(td, torch.tensor(sizes), thx, tp, True, L, 0.0, False,
                                 bidirectional)
    for a, b in zip(e_out, t_out):
        _close(a, b, atol=1e-4)


@pytest.mark.parametrize("mode,G", [("lstm", 4), ("gru", 3)])
def test_fused_recurrences_whole_sequence(mode, G):
    """The whole-sequence path (the fused layer op on the (T, B, F) tensor): padded and
    time-major, packed with one batch size for every step, two bidirectional layers, float64;
    values and the gradients of the input, the state and every weight equal torch's."""
    T, B, n_in, H, L, D = 5, 3, 4, 6, 2, 2
    ep, tp = [], []
    for layer in range(L):
        for _ in range(D):
            e, t = _weights(G, H, n_in if layer == 0 else H * D)
            ep += [a.detach().double().requires_grad_(True) for a in e]
            tp += [a.detach().double().requires_grad_(True) for a in t]
    h, th = _pair(L * D, B, H, dtype="float64", requires_grad=True)
    c, tc = _pair(L * D, B, H, dtype="float64")
    ehx, thx = ((h, c), (th, tc)) if mode == "lstm" else (h, th)
    x, tx = _pair(T, B, n_in, dtype="float64", requires_grad=True)
    e_out = getattr(ember, mode)(x, ehx, ep, True, L, 0.0, False, True, False)
    t_out = getattr(torch, mode)(tx, thx, tp, True, L, 0.0, False, True, False)
    for a, b in zip(e_out, t_out):
        _close(a, b, atol=1e-12, rtol=1e-10)
    (e_out[0].sum() + e_out[1].square().sum()).backward()
    (t_out[0].sum() + t_out[1].square().sum()).backward()
    _close(x.grad, tx.grad, atol=1e-12, rtol=1e-10)
    _close(h.grad, th.grad, atol=1e-12, rtol=1e-10)
    for a, b in zip(ep, tp):
        _close(a.grad, b.grad, atol=1e-12, rtol=1e-10)
    # packed, every step the full batch: the fused op on the (T * B, F) rows
    d, td = _pair(T * B, n_in, dtype="float64")
    sizes = [B] * T
    e_out = getattr(ember, mode)(d, ember.tensor(sizes), ehx, ep, True, L, 0.0, False, True)
    t_out = getattr(torch, mode)(td, torch.tensor(sizes), thx, tp, True, L, 0.0, False, True)
    assert tuple(e_out[0].shape) == (T * B, D * H)
    for a, b in zip(e_out, t_out):
        _close(a, b, atol=1e-12, rtol=1e-10)
    # dropout between layers (train=True) keeps the shapes
    out = getattr(ember, mode)(x, ehx, ep, True, L, 0.5, True, True, False)
    assert tuple(out[0].shape) == (T, B, D * H)


def test_lstm_without_bias_and_with_projection():
    T, B, n_in, H, P = 3, 2, 3, 4, 2
    ep, tp = [], []
    for s in [(4 * H, n_in), (4 * H, P), (P, H)]:
        e, t = _pair(*s)
        ep.append(e)
        tp.append(t)
    h, th = _pair(1, B, P)
    c, tc = _pair(1, B, H)
    x, tx = _pair(T, B, n_in)
    e_out = ember.lstm(x, (h, c), ep, False, 1, 0.0, False, False, False)
    t_out = torch.lstm(tx, (th, tc), tp, False, 1, 0.0, False, False, False)
    for a, b in zip(e_out, t_out):
        _close(a, b)


def test_recurrence_argument_errors():
    ep, _ = _flat(3, 4, 3, 1, 1)
    with pytest.raises(RuntimeError, match="expected 4 parameters"):
        ember.gru(ember.ones(2, 1, 3), ember.zeros(1, 1, 4), ep[:3], True, 1, 0.0, False, False,
                  False)
    with pytest.raises(RuntimeError, match="hx of shape"):
        ember.gru(ember.ones(2, 1, 3), ember.zeros(2, 1, 4), ep, True, 1, 0.0, False, False,
                  False)
    with pytest.raises(RuntimeError, match="batch_sizes"):
        ember.gru(ember.ones(3, 3), ember.tensor([1, 2]), ember.zeros(1, 2, 4), ep, True, 1, 0.0,
                  False, False)


@pytest.mark.parametrize("interp", [0, 1, 2])
@pytest.mark.parametrize("padding", [0, 1, 2])
def test_grid_sampler_int_modes_forward_and_backward(interp, padding):
    g = (RNG.random((2, 3, 3, 2)) * 2.6 - 1.3).astype("float64")
    for align in (False, True):
        x, tx = _pair(2, 2, 4, 5, dtype="float64", requires_grad=True)
        eg, tg = ember.tensor(g).requires_grad_(True), torch.tensor(g).requires_grad_(True)
        got = ember.grid_sampler(x, eg, interp, padding, align)
        expected = torch.grid_sampler(tx, tg, interp, padding, align)
        _close(got, expected, atol=1e-10)
        w = RNG.standard_normal(tuple(expected.shape))
        (got * ember.tensor(w)).sum().backward()
        (expected * torch.tensor(w)).sum().backward()
        _close(x.grad, tx.grad, atol=1e-10)
        if interp != 1:  # nearest has no gradient in the grid
            _close(eg.grad, tg.grad, atol=1e-9)
        _close(ember.grid_sampler_2d(x, eg, interp, padding, align),
               torch.grid_sampler_2d(tx, tg, interp, padding, align), atol=1e-10)
    with pytest.raises(ValueError, match="interpolation_mode"):
        ember.grid_sampler(x, eg, 7, 0, False)


def test_grid_sampler_3d_and_affine_grid_generator():
    theta = np.array([[[0.9, 0.1, 0.0, 0.1], [0.0, 1.1, 0.2, 0.0], [0.1, 0.0, 1.0, -0.1]]],
                     dtype="float32")
    eg = ember.affine_grid_generator(ember.tensor(theta), [1, 1, 2, 3, 4], False)
    tg = torch.affine_grid_generator(torch.tensor(theta), [1, 1, 2, 3, 4], False)
    _close(eg, tg)
    x, tx = _pair(1, 2, 2, 3, 4)
    g = (RNG.random((1, 2, 3, 2, 3)) * 2.6 - 1.3).astype("float32")
    for interp in (0, 1):
        for padding in (0, 1, 2):
            for align in (False, True):
                _close(ember.grid_sampler_3d(x, ember.tensor(g), interp, padding, align),
                       torch.grid_sampler_3d(tx, torch.tensor(g), interp, padding, align),
                       atol=1e-5)
    _close(ember.grid_sampler_3d(x, eg, 0, 0, False), torch.grid_sampler_3d(tx, tg, 0, 0, False),
           atol=1e-4)
    with pytest.raises(RuntimeError, match="5-D"):
        ember.grid_sampler_3d(ember.ones(1, 1, 2, 2), eg, 0, 0, False)


def test_conv_tbc():
    x, tx = _pair(7, 2, 3, requires_grad=True)
    w, tw = _pair(3, 3, 4, requires_grad=True)
    b, tb = _pair(4)
    for pad in (0, 1):
        _close(ember.conv_tbc(x, w, b, pad), torch.conv_tbc(tx, tw, tb, pad), atol=1e-4)
    ember.conv_tbc(x, w, b, 1).sum().backward()
    torch.conv_tbc(tx, tw, tb, 1).sum().backward()
    _close(w.grad, tw.grad, atol=1e-4)
    with pytest.raises(RuntimeError, match="conv_tbc"):
        ember.conv_tbc(x, w[:, :2], b, 0)


@pytest.mark.filterwarnings("ignore:at::nuclear_norm is deprecated")
def test_norms():
    v, tv = _pair(3, 4, 5)
    for p, d in ((2, 0), (2, 1), (3, 2), (2, -1)):
        _close(ember.norm_except_dim(v, p, d), torch.norm_except_dim(tv, p, d))
    _close(ember.frobenius_norm(v, (0, 1)), torch.frobenius_norm(tv, (0, 1)))
    _close(ember.frobenius_norm(v, [1], True), torch.frobenius_norm(tv, [1], True))
    _close(ember.nuclear_norm(v[0]), torch.nuclear_norm(tv[0]), atol=1e-4)
    _close(ember.nuclear_norm(v, (0, 2), True), torch.nuclear_norm(tv, (0, 2), True), atol=1e-4)
    assert abs(ember.native_norm(v).item() - torch.linalg.vector_norm(tv).item()) < 1e-4
    n = ember.native_norm(v, 3, [1], True, ember.float64)
    assert n.dtype == ember.float64
    _close(n, torch.linalg.vector_norm(tv.double(), 3, [1], True))


def test_sync_batch_norm_blocks_equal_batch_norm():
    """Two 'workers' each hold half of a batch: stats -> gather -> elemt equals batch norm on the
    whole batch; backward_reduce -> (all-reduce) -> backward_elemt equals its input gradient."""
    x, tx = _pair(6, 3, 4, dtype="float64")
    w, tw = _pair(3, dtype="float64")
    b, tb = _pair(3, dtype="float64")
    eps, momentum = 1e-5, 0.1
    parts = [x[:4], x[4:]]
    stats = [ember.batch_norm_stats(p, eps) for p in parts]
    counts = ember.tensor([float(p.numel() // p.shape[1]) for p in parts], dtype=ember.float64)
    rm, rv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    mean, invstd = ember.batch_norm_gather_stats_with_counts(
        x, ember.stack([s[0] for s in stats]), ember.stack([s[1] for s in stats]), rm, rv,
        momentum, eps, counts)
    out = ember.cat([ember.batch_norm_elemt(p, w, b, mean, invstd, eps) for p in parts])
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    ttx = tx.clone().requires_grad_(True)
    tout = torch.nn.functional.batch_norm(ttx, trm, trv, tw, tb, True, momentum, eps)
    _close(out, tout, atol=1e-10)
    _close(rm, trm, atol=1e-10)
    _close(rv, trv, atol=1e-10)
    gy, tgy = _pair(6, 3, 4, dtype="float64")
    tout.backward(tgy)
    reds = [ember.batch_norm_backward_reduce(g, p, mean, invstd, w, True, True, True)
            for g, p in zip([gy[:4], gy[4:]], parts)]
    sum_dy = reds[0][0] + reds[1][0]
    sum_dy_xmu = reds[0][1] + reds[1][1]
    grad_w = reds[0][2] + reds[1][2]
    grad_b = reds[0][3] + reds[1][3]
    count_i32 = ember.tensor([16, 8], dtype=ember.int32)
    gx = ember.cat([ember.batch_norm_backward_elemt(g, p, mean, invstd, w, sum_dy, sum_dy_xmu,
                                                    count_i32)
                    for g, p in zip([gy[:4], gy[4:]], parts)])
    t_gw, t_gb = torch.autograd.grad(
        torch.nn.functional.batch_norm(tx, None, None, tw.requires_grad_(True),
                                       tb.requires_grad_(True), True, 0.1, eps), [tw, tb], tgy)
    _close(gx, ttx.grad, atol=1e-10)
    _close(grad_w, t_gw, atol=1e-10)
    _close(grad_b, t_gb, atol=1e-10)
    none = ember.batch_norm_backward_reduce(gy, x, mean, invstd, None, False, True, False)
    assert none[0] is None and none[1] is None and none[3] is None and none[2] is not None
    # gather_stats: the same count everywhere
    m2, s2 = ember.batch_norm_gather_stats(x, ember.stack([stats[0][0], stats[0][0]]),
                                           ember.stack([stats[0][1], stats[0][1]]), None, None,
                                           momentum, eps, 16)
    _close(m2, stats[0][0], atol=1e-12)
    _close(s2, stats[0][1], atol=1e-9)


def test_batch_norm_update_stats_matches_torch():
    x, tx = _pair(5, 3, 2)
    rm, rv = ember.zeros(3), ember.ones(3)
    trm, trv = torch.zeros(3), torch.ones(3)
    for a, b in zip(ember.batch_norm_update_stats(x, rm, rv, 0.2),
                    torch.batch_norm_update_stats(tx, trm, trv, 0.2)):
        _close(a, b)
    _close(rm, trm)
    _close(rv, trv)


def test_inplace_dropouts_and_embedding_renorm():
    ember.manual_seed(0)
    x = ember.ones(4, 5, 6)
    assert ember.dropout_(x, 0.5, True) is x
    vals = set(np.unique(x.numpy()).tolist())
    assert vals <= {0.0, 2.0} and len(vals) == 2
    y = ember.ones(4, 5, 6)
    assert ember.feature_dropout_(y, 0.5, True) is y
    per_channel = y.numpy().reshape(20, 6)
    assert all(len(set(row.tolist())) == 1 for row in per_channel)  # whole channels dropped
    z = ember.ones(3, 4)
    assert ember.alpha_dropout_(z, 0.5, False) is z and z.tolist() == [[1.0] * 4] * 3
    assert ember.feature_alpha_dropout_(z, 0.5, False) is z
    w, tw = _pair(5, 3)
    w, tw = w * 3, tw * 3
    idx = [0, 2, 2]
    ember.embedding_renorm_(w, ember.tensor(idx), 1.0, 2.0)
    with torch.no_grad():
        torch.embedding_renorm_(tw, torch.tensor(idx), 1.0, 2.0)
    _close(w, tw, atol=1e-5)


def test_sync_batch_norm_blocks_accumulate_half_in_float32():
    x = ember.tensor(RNG.standard_normal((8, 2, 3)).astype("float16"))
    mean, invstd = ember.batch_norm_stats(x, 1e-5)
    assert mean.dtype == invstd.dtype == ember.float32
    ref = x.float()
    np.testing.assert_allclose(mean.numpy(), ref.mean((0, 2)).numpy(), atol=1e-6)
    out = ember.batch_norm_elemt(x, None, None, mean, invstd, 1e-5)
    assert out.dtype == ember.float16
    expected = torch.nn.functional.batch_norm(torch.tensor(ref.numpy()), None, None,
                                              training=True, eps=1e-5)
    np.testing.assert_allclose(out.float().numpy(), expected.numpy(), atol=2e-3)
