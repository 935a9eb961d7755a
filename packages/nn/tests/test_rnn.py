"""RNN / LSTM / GRU, the cells and packed sequences against PyTorch with identical weights."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import nn
from ember.nn.utils import rnn as rnn_utils
from nn_helpers import assert_close, copy_weights, to_ember, to_np, to_torch

torch = pytest.importorskip("torch")

TOL = {"rtol": 1e-9, "atol": 1e-10}


def _pair(kind, *args, **kwargs):
    ember.manual_seed(0)
    e = getattr(nn, kind)(*args, dtype=ember.float64, **kwargs)
    t = getattr(torch.nn, kind)(*args, dtype=torch.float64, **kwargs)
    copy_weights(e, t)
    return e, t


def _compare_grads(e, t, tol=TOL):
    for (n, pe), (_, pt) in zip(e.named_parameters(), t.named_parameters()):
        assert pe.grad is not None, n
        assert_close(pe.grad, pt.grad, **tol)


def _outputs(out):
    if isinstance(out, tuple):
        res = []
        for o in out:
            res.extend(_outputs(o))
        return res
    if isinstance(out, (rnn_utils.PackedSequence, torch.nn.utils.rnn.PackedSequence)):
        return [out.data]
    return [out]


def _loss(outs, lib):
    total = 0
    for i, o in enumerate(outs):
        w = lib.from_numpy(np.linspace(-1.0, 1.0, int(np.prod(o.shape))).reshape(tuple(o.shape)))
        total = total + (o * w).sum() * (i + 1)
    return total


CONFIGS = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 3, "batch_first": True}),
    ("LSTM", {"num_layers": 3, "batch_first": True, "bias": False}),
    ("LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True, "bias": False}),
    ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("GRU", {"bias": False}),
]


@pytest.mark.parametrize("kind,kw", CONFIGS)
@pytest.mark.parametrize("with_hx", [False, True])
def test_matches_torch(kind, kw, with_hx):
    e, t = _pair(kind, 4, 5, **kw)
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 4) if kw.get("batch_first") else (6, 2, 4))
    xe, xt = to_ember(x, True), to_torch(x, True)
    args_e, args_t = [xe], [xt]
    hx_leaves = []
    if with_hx:
        layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        h = rng.standard_normal((layers, 2, kw.get("proj_size") or 5))
        he, ht = to_ember(h, True), to_torch(h, True)
        hx_leaves.append((he, ht))
        if kind == "LSTM":
            c = rng.standard_normal((layers, 2, 5))
            ce, ct = to_ember(c, True), to_torch(c, True)
            hx_leaves.append((ce, ct))
            args_e.append((he, ce))
            args_t.append((ht, ct))
        else:
            args_e.append(he)
            args_t.append(ht)
    oe, ot = _outputs(e(*args_e)), _outputs(t(*args_t))
    for a, b in zip(oe, ot):
        assert_close(a, b, **TOL)
    _loss(oe, ember).backward()
    _loss(ot, torch).backward()
    assert_close(xe.grad, xt.grad, **TOL)
    for le, lt in hx_leaves:
        assert_close(le.grad, lt.grad, **TOL)
    _compare_grads(e, t)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_unbatched(kind):
    e, t = _pair(kind, 3, 4, num_layers=2)
    x = np.random.default_rng(2).standard_normal((5, 3))
    for a, b in zip(_outputs(e(to_ember(x))), _outputs(t(to_torch(x)))):
        assert tuple(a.shape) == tuple(b.shape)
        assert_close(a, b, **TOL)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequence(kind, enforce_sorted):
    e, t = _pair(kind, 3, 4, num_layers=2, bidirectional=True)
    lengths = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    x = np.random.default_rng(3).standard_normal((5, 3, 3))
    xe, xt = to_ember(x, True), to_torch(x, True)
    pe = rnn_utils.pack_padded_sequence(xe, lengths, enforce_sorted=enforce_sorted)
    pt = torch.nn.utils.rnn.pack_padded_sequence(xt, torch.tensor(lengths), enforce_sorted=enforce_sorted)
    assert_close(pe.data, pt.data)
    assert pe.batch_sizes.tolist() == pt.batch_sizes.tolist()
    oe, ot = e(pe), t(pt)
    pad_e, len_e = rnn_utils.pad_packed_sequence(oe[0])
    pad_t, len_t = torch.nn.utils.rnn.pad_packed_sequence(ot[0])
    assert len_e.tolist() == len_t.tolist()
    assert_close(pad_e, pad_t, **TOL)
    rest_e, rest_t = _outputs(oe[1]), _outputs(ot[1])
    for a, b in zip(rest_e, rest_t):
        assert_close(a, b, **TOL)
    _loss([pad_e, *rest_e], ember).backward()
    _loss([pad_t, *rest_t], torch).backward()
    assert_close(xe.grad, xt.grad, **TOL)
    _compare_grads(e, t)


def test_dropout_between_layers_train_and_eval():
    ember.manual_seed(0)
    lstm = nn.LSTM(3, 8, num_layers=3, dropout=0.5)
    x = ember.randn(4, 2, 3)
    lstm.eval()
    a, b = lstm(x)[0], lstm(x)[0]
    assert_close(a, b, rtol=0, atol=0)
    lstm.train()
    c = lstm(x)[0]
    assert not np.allclose(to_np(a), to_np(c))


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched", [True, False])
def test_cells(kind, batched):
    e, t = _pair(kind, 3, 4)
    rng = np.random.default_rng(4)
    shape = (2, 3) if batched else (3,)
    x = rng.standard_normal(shape)
    h = rng.standard_normal(shape[:-1] + (4,))
    xe, xt = to_ember(x, True), to_torch(x, True)
    if kind == "LSTMCell":
        c = rng.standard_normal(shape[:-1] + (4,))
        oe, ot = e(xe, (to_ember(h), to_ember(c))), t(xt, (to_torch(h), to_torch(c)))
    else:
        oe, ot = e(xe, to_ember(h)), t(xt, to_torch(h))
    oe, ot = _outputs(oe), _outputs(ot)
    for a, b in zip(oe, ot):
        assert_close(a, b, **TOL)
    _loss(oe, ember).backward()
    _loss(ot, torch).backward()
    assert_close(xe.grad, xt.grad, **TOL)
    _compare_grads(e, t)
    # no hidden state given: zeros
    assert_close(_outputs(e(xe))[0], _outputs(t(xt))[0], **TOL)


def test_default_init_range_and_repr():
    ember.manual_seed(0)
    m = nn.GRU(10, 16, num_layers=2, batch_first=True)
    bound = 1 / 4
    for p in m.parameters():
        arr = to_np(p)
        assert arr.min() >= -bound and arr.max() <= bound
    assert repr(m) == repr(torch.nn.GRU(10, 16, num_layers=2, batch_first=True))
    assert repr(nn.LSTM(3, 4, proj_size=2)) == repr(torch.nn.LSTM(3, 4, proj_size=2))
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == repr(torch.nn.RNNCell(3, 4, nonlinearity="relu"))


def test_bad_input_messages():
    lstm = nn.LSTM(4, 5)
    with pytest.raises(RuntimeError, match="input_size.*Expected 4, got 3"):
        lstm(ember.randn(2, 3, 3))
    with pytest.raises(RuntimeError, match=r"hidden state h_0 of shape \(1, 3, 5\)"):
        lstm(ember.randn(2, 3, 4), (ember.zeros(1, 2, 5), ember.zeros(1, 3, 5)))
    with pytest.raises(ValueError, match="2 \\(unbatched\\) or 3 dimensions"):
        lstm(ember.randn(4))
    with pytest.raises(ValueError, match="proj_size"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(RuntimeError, match="GRUCell.*expected 3"):
        nn.GRUCell(3, 4)(ember.randn(2, 5))


def test_pad_and_pack_utils_match_torch():
    seqs = [np.arange(n * 2, dtype=np.float64).reshape(n, 2) for n in (2, 4, 1)]
    es, ts = [to_ember(s) for s in seqs], [to_torch(s) for s in seqs]
    for bf in (False, True):
        for side in ("right", "left"):
            assert_close(
                rnn_utils.pad_sequence(es, batch_first=bf, padding_value=-1.0, padding_side=side),
                torch.nn.utils.rnn.pad_sequence(ts, batch_first=bf, padding_value=-1.0, padding_side=side),
            )
    pe = rnn_utils.pack_sequence(es, enforce_sorted=False)
    pt = torch.nn.utils.rnn.pack_sequence(ts, enforce_sorted=False)
    assert_close(pe.data, pt.data)
    assert pe.sorted_indices.tolist() == pt.sorted_indices.tolist()
    assert pe.unsorted_indices.tolist() == pt.unsorted_indices.tolist()
    out_e, _ = rnn_utils.pad_packed_sequence(pe, batch_first=True, padding_value=9.0, total_length=6)
    out_t, _ = torch.nn.utils.rnn.pad_packed_sequence(pt, batch_first=True, padding_value=9.0, total_length=6)
    assert_close(out_e, out_t)
    for a, b in zip(rnn_utils.unpack_sequence(pe), seqs):
        assert_close(a, b)
    with pytest.raises(RuntimeError, match="not sorted in decreasing order"):
        rnn_utils.pack_sequence(es)


def test_lstm_trains():
    ember.manual_seed(0)
    lstm = nn.LSTM(1, 8, batch_first=True)
    head = nn.Linear(8, 1)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = ember.optim.Adam(params, lr=0.05)
    x = ember.randn(16, 5, 1)
    y = x.sum(1)  # learn to add up the sequence
    losses = []
    for _ in range(60):
        opt.zero_grad()
        out, _ = lstm(x)
        loss = ((head(out[:, -1]) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]


def _rnn_run(m, x, h, c=None):
    """Output, final states and every gradient of one LSTM/GRU forward/backward."""
    if c is None:
        out, hn = m(x, h)
        states, inputs = [hn], [x, h]
    else:
        out, (hn, cn) = m(x, (h, c))
        states, inputs = [hn, cn], [x, h, c]
    loss = out.sum()
    for k, st in enumerate(states):
        loss = loss + (st * (k + 2)).sum()
    loss.backward()
    return [out, *states] + [t.grad for t in inputs] + [p.grad for p in m.parameters()]


@pytest.mark.parametrize("kind,kw", [
    ("LSTM", {}),
    ("GRU", {}),
    ("GRU", {"bias": False, "batch_first": True}),
])
def test_fused_layer_matches_step_loop(monkeypatch, kind, kw):
    """nn.LSTM / nn.GRU run each layer as the fused C++ op; the Python step loop (kept for packed
    sequences, projections and forward AD) gives the same values and gradients."""
    from ember.nn.modules import rnn as rnn_mod

    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 6, 4) if kw.get("batch_first") else (6, 3, 4))
    h, c = rng.standard_normal((4, 3, 5)), rng.standard_normal((4, 3, 5))
    ember.manual_seed(0)
    m = getattr(nn, kind)(4, 5, num_layers=2, bidirectional=True, dtype=ember.float64, **kw)

    def run():
        cell = to_ember(c, True) if kind == "LSTM" else None
        return _rnn_run(m, to_ember(x, True), to_ember(h, True), cell)

    fused = run()
    m.zero_grad()
    monkeypatch.setattr(rnn_mod, "_fused_rnn_ok", lambda *a: False)
    loop = run()
    assert len(fused) == len(loop)
    for a, b in zip(fused, loop):
        assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_gru_cell_fused_matches_step_loop(monkeypatch, bias):
    from ember.nn.modules import rnn as rnn_mod

    rng = np.random.default_rng(12)
    x, h = rng.standard_normal((3, 4)), rng.standard_normal((3, 5))
    ember.manual_seed(0)
    m = nn.GRUCell(4, 5, bias=bias, dtype=ember.float64)

    def run():
        xe, he = to_ember(x, True), to_ember(h, True)
        out = m(xe, he)
        (out * out).sum().backward()
        return [out, xe.grad, he.grad] + [p.grad for p in m.parameters()]

    fused = run()
    m.zero_grad()
    monkeypatch.setattr(rnn_mod, "_fused_rnn_ok", lambda *a: False)
    for a, b in zip(fused, run()):
        assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_float32_matches_torch(kind):
    ember.manual_seed(0)
    e = getattr(nn, kind)(16, 64, num_layers=2)
    t = getattr(torch.nn, kind)(16, 64, num_layers=2)
    copy_weights(e, t)
    x = np.random.default_rng(3).standard_normal((12, 8, 16)).astype(np.float32)
    xe, xt = to_ember(x, True), to_torch(x, True)
    oe, ot = _outputs(e(xe)), _outputs(t(xt))
    for a, b in zip(oe, ot):
        assert_close(a, b, rtol=1e-5, atol=1e-6)
    _loss(oe, ember).backward()
    _loss(ot, torch).backward()
    assert_close(xe.grad, xt.grad, rtol=1e-4, atol=1e-5)
    _compare_grads(e, t, {"rtol": 1e-4, "atol": 1e-5})


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_second_derivatives(kind):
    ember.manual_seed(0)
    m = getattr(nn, kind)(2, 3, dtype=ember.float64)
    x = to_ember(np.random.default_rng(5).standard_normal((3, 2, 2)), True)
    assert ember.autograd.gradgradcheck(lambda inp: m(inp)[0], [x])


def test_gru_cell_second_derivatives():
    ember.manual_seed(0)
    m = nn.GRUCell(2, 3, dtype=ember.float64)
    rng = np.random.default_rng(7)
    x, h = to_ember(rng.standard_normal((2, 2)), True), to_ember(rng.standard_normal((2, 3)), True)
    assert ember.autograd.gradgradcheck(m, [x, h])


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_forward_mode_ad(kind):
    import ember.autograd.forward_ad as fwAD

    ember.manual_seed(0)
    m = getattr(nn, kind)(3, 4, num_layers=2, dtype=ember.float64)
    rng = np.random.default_rng(6)
    x, v = rng.standard_normal((5, 2, 3)), rng.standard_normal((5, 2, 3))
    with fwAD.dual_level():
        out, _ = m(fwAD.make_dual(to_ember(x), to_ember(v)))
        tangent = to_np(fwAD.unpack_dual(out).tangent)
    eps = 1e-6
    with ember.no_grad():
        fd = (to_np(m(to_ember(x + eps * v))[0]) - to_np(m(to_ember(x - eps * v))[0])) / (2 * eps)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-8)
