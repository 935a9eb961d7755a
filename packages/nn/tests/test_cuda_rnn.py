"""The fused recurrent layers on CUDA (cuda/nn_rnn.cu) against the CPU's: the raw ops
(_lstm_layer with and without its input projection, _gru_layer with and without b_hh, their
backwards and _rnn_input_backward: outputs, workspace and every gradient), and nn.LSTM / nn.GRU /
the cells through autograd (layers, directions, batch_first, bias, proj_size, packed sequences,
second derivatives). float64 must agree tightly, float32 to 1e-4-ish (sums in another order).
Skipped without a CUDA device; EMBER_TEST_NN_DEVICE=cpu runs the same comparisons CPU against CPU
(a dry run of the test logic on a machine without a GPU)."""

from __future__ import annotations

import os

import ember
import numpy as np
import pytest
from ember import _C, nn
from ember.nn.modules import rnn as rnn_mod
from ember.nn.utils import rnn as rnn_utils

DEV = os.environ.get("EMBER_TEST_NN_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(
    DEV == "cuda" and not ember.cuda.is_available(), reason="needs a CUDA device"
)


@pytest.fixture(autouse=True)
def _full_precision_float32():
    """float32 products in full precision (the default; restored afterwards), whatever an earlier
    test left."""
    prev = ember.backends.cuda.matmul.allow_tf32
    ember.backends.cuda.matmul.allow_tf32 = False
    yield
    ember.backends.cuda.matmul.allow_tf32 = prev


TOL = {"float64": {"rtol": 1e-9, "atol": 1e-10}, "float32": {"rtol": 1e-4, "atol": 2e-5}}
DTYPES = ["float64", "float32"]


def _arr(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _t(a):
    return ember.from_numpy(np.ascontiguousarray(a))


def _dev(t):
    return t.to(DEV) if isinstance(t, ember.Tensor) else t


def _np(t):
    return t.detach().to("cpu").numpy()


def _check(got, ref, dtype, what=""):
    """got (on DEV) matches ref (CPU): device, shape, dtype and values. The absolute tolerance
    scales with the largest |ref| (gradients summed over many steps in another order)."""
    assert got.device.type == DEV, (what, got.device)
    assert tuple(got.shape) == tuple(ref.shape), (what, tuple(got.shape), tuple(ref.shape))
    assert got.dtype == ref.dtype, (what, got.dtype, ref.dtype)
    r = _np(ref)
    scale = max(1.0, float(np.abs(r).max())) if r.size else 1.0
    tol = TOL[dtype]
    np.testing.assert_allclose(_np(got), r, err_msg=what, rtol=tol["rtol"],
                               atol=tol["atol"] * scale)


def _lstm_raw_inputs(T, B, H, dtype, project, bias, seed=0):
    rng = np.random.default_rng(seed)
    h0, c0 = _arr(rng, (B, H), dtype), _arr(rng, (B, H), dtype)
    w_hh = _arr(rng, (4 * H, H), dtype, 0.4)
    if not project:
        return [_arr(rng, (T, B, 4 * H), dtype), h0, c0, w_hh]
    feat = 3
    arrays = [_arr(rng, (T, B, feat), dtype), h0, c0, w_hh, _arr(rng, (4 * H, feat), dtype, 0.4)]
    if bias:
        arrays.append(_arr(rng, (4 * H,), dtype, 0.3))
    return arrays


def _grad_seeds(shapes, dtype, seed=5):
    rng = np.random.default_rng(seed)
    return [_arr(rng, s, dtype) for s in shapes]


# ---- the raw ops -------------------------------------------------------------------------------

LSTM_RAW = [(False, False), (True, False), (True, True)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("project,bias", LSTM_RAW, ids=["gates_x", "x_w_ih", "x_w_ih_bias"])
@pytest.mark.parametrize("T,B,H", [(1, 1, 1), (5, 3, 4), (6, 8, 33)])
def test_lstm_layer_forward_and_backward(dtype, reverse, project, bias, T, B, H):
    arrays = _lstm_raw_inputs(T, B, H, dtype, project, bias)
    ref = _C._lstm_layer([_t(a) for a in arrays], reverse)
    got = _C._lstm_layer([_dev(_t(a)) for a in arrays], reverse)
    for name, g, r in zip(["output", "hn", "cn", "workspace"], got, ref):
        _check(g, r, dtype, name)
    # backward from each side's own forward results
    go, ghn, gcn = (_t(a) for a in _grad_seeds([(T, B, H), (B, H), (B, H)], dtype))
    h0, c0, w = (_t(a) for a in arrays[1:4])
    ref_g = _C._lstm_layer_backward(go, ghn, gcn, h0, c0, w, ref[0], ref[3], reverse)
    got_g = _C._lstm_layer_backward(*(_dev(t) for t in (go, ghn, gcn, h0, c0, w)), got[0], got[3],
                                    reverse)
    for name, g, r in zip(["grad_gates_x", "grad_h0", "grad_c0", "grad_w_hh"], got_g, ref_g):
        _check(g, r, dtype, name)
    if project:  # the input projection's gradients
        x, w_ih = _t(arrays[0]), _t(arrays[4])
        G = 4 * H
        ref_p = _C._rnn_input_backward(ref_g[0].reshape(T * B, G), x.reshape(T * B, 3), w_ih)
        got_p = _C._rnn_input_backward(got_g[0].reshape(T * B, G), _dev(x).reshape(T * B, 3),
                                       _dev(w_ih))
        for name, g, r in zip(["grad_input", "grad_weight", "grad_bias"], got_p, ref_p):
            _check(g, r, dtype, name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("T,B,H", [(1, 1, 1), (5, 3, 4), (6, 8, 33)])
def test_gru_layer_forward_and_backward(dtype, reverse, bias, T, B, H):
    rng = np.random.default_rng(1)
    arrays = [_arr(rng, (T, B, 3 * H), dtype), _arr(rng, (B, H), dtype),
              _arr(rng, (3 * H, H), dtype, 0.4)]
    if bias:
        arrays.append(_arr(rng, (3 * H,), dtype, 0.3))
    ref = _C._gru_layer([_t(a) for a in arrays], reverse)
    got = _C._gru_layer([_dev(_t(a)) for a in arrays], reverse)
    for name, g, r in zip(["output", "hn", "workspace"], got, ref):
        _check(g, r, dtype, name)
    go, ghn = (_t(a) for a in _grad_seeds([(T, B, H), (B, H)], dtype))
    h0, w = _t(arrays[1]), _t(arrays[2])
    ref_g = _C._gru_layer_backward(go, ghn, h0, w, ref[0], ref[2], reverse)
    got_g = _C._gru_layer_backward(*(_dev(t) for t in (go, ghn, h0, w)), got[0], got[2], reverse)
    for name, g, r in zip(["grad_gates_x", "grad_h0", "grad_w_hh", "grad_b_hh"], got_g, ref_g):
        _check(g, r, dtype, name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N,G,F", [(1, 4, 1), (7, 12, 5), (300, 40, 17), (0, 8, 3), (5, 8, 0)])
def test_rnn_input_backward(dtype, N, G, F):
    rng = np.random.default_rng(2)
    g, x, w = _arr(rng, (N, G), dtype), _arr(rng, (N, F), dtype), _arr(rng, (G, F), dtype)
    ref = _C._rnn_input_backward(_t(g), _t(x), _t(w))
    got = _C._rnn_input_backward(_dev(_t(g)), _dev(_t(x)), _dev(_t(w)))
    for name, a, b in zip(["grad_input", "grad_weight", "grad_bias"], got, ref):
        _check(a, b, dtype, name)


@pytest.mark.parametrize("T,B,H", [(0, 3, 4), (4, 0, 4), (3, 2, 0)])
def test_empty_sizes(T, B, H):
    """No steps, no samples or no units: the states pass through, gradients are zeros."""
    dtype = "float64"
    for project, bias in LSTM_RAW:
        arrays = _lstm_raw_inputs(T, B, H, dtype, project, bias)
        ref = _C._lstm_layer([_t(a) for a in arrays], True)
        got = _C._lstm_layer([_dev(_t(a)) for a in arrays], True)
        for name, g, r in zip(["output", "hn", "cn", "workspace"], got, ref):
            _check(g, r, dtype, name)
        go, ghn, gcn = (_t(a) for a in _grad_seeds([(T, B, H), (B, H), (B, H)], dtype))
        h0, c0, w = (_t(a) for a in arrays[1:4])
        ref_g = _C._lstm_layer_backward(go, ghn, gcn, h0, c0, w, ref[0], ref[3], False)
        got_g = _C._lstm_layer_backward(*(_dev(t) for t in (go, ghn, gcn, h0, c0, w)), got[0],
                                        got[3], False)
        for name, g, r in zip(["grad_gates_x", "grad_h0", "grad_c0", "grad_w_hh"], got_g, ref_g):
            _check(g, r, dtype, name)
    rng = np.random.default_rng(3)
    arrays = [_arr(rng, (T, B, 3 * H), dtype), _arr(rng, (B, H), dtype),
              _arr(rng, (3 * H, H), dtype), _arr(rng, (3 * H,), dtype)]
    ref = _C._gru_layer([_t(a) for a in arrays], False)
    got = _C._gru_layer([_dev(_t(a)) for a in arrays], False)
    for name, g, r in zip(["output", "hn", "workspace"], got, ref):
        _check(g, r, dtype, name)
    go, ghn = (_t(a) for a in _grad_seeds([(T, B, H), (B, H)], dtype))
    ref_g = _C._gru_layer_backward(go, ghn, _t(arrays[1]), _t(arrays[2]), ref[0], ref[2], True)
    got_g = _C._gru_layer_backward(_dev(go), _dev(ghn), _dev(_t(arrays[1])), _dev(_t(arrays[2])),
                                   got[0], got[2], True)
    for name, g, r in zip(["grad_gates_x", "grad_h0", "grad_w_hh", "grad_b_hh"], got_g, ref_g):
        _check(g, r, dtype, name)


def test_strided_inputs():
    """Non-contiguous inputs and gradients give the contiguous inputs' results."""
    dtype = "float64"
    arrays = _lstm_raw_inputs(4, 3, 5, dtype, True, True)
    ref = _C._lstm_layer([_t(a) for a in arrays], False)
    strided = [_dev(_t(np.ascontiguousarray(np.swapaxes(a, 0, -1)))).transpose(0, -1)
               if a.ndim > 1 else _dev(_t(a)) for a in arrays]
    assert not strided[0].is_contiguous()
    got = _C._lstm_layer(strided, False)
    for name, g, r in zip(["output", "hn", "cn", "workspace"], got, ref):
        _check(g, r, dtype, name)
    go = _t(_grad_seeds([(4, 3, 5)], dtype)[0])
    go_strided = _dev(_t(np.ascontiguousarray(np.swapaxes(go.numpy(), 0, 2)))).transpose(0, 2)
    zeros = ember.zeros(3, 5, dtype=ember.float64)
    ref_g = _C._lstm_layer_backward(go, zeros, zeros, _t(arrays[1]), _t(arrays[2]),
                                    _t(arrays[3]), ref[0], ref[3], False)
    got_g = _C._lstm_layer_backward(go_strided, _dev(zeros).expand(3, 5), _dev(zeros),
                                    strided[1], strided[2], strided[3], got[0], got[3], False)
    for name, g, r in zip(["grad_gates_x", "grad_h0", "grad_c0", "grad_w_hh"], got_g, ref_g):
        _check(g, r, dtype, name)


def test_bad_inputs_match_the_cpu_messages():
    rng = np.random.default_rng(4)
    gx, h0, c0 = _arr(rng, (2, 3, 8), "float64"), _arr(rng, (3, 2), "float64"), \
        _arr(rng, (3, 2), "float64")
    w = _arr(rng, (8, 2), "float64")
    d = [_dev(_t(a)) for a in (gx, h0, c0, w)]
    with pytest.raises(RuntimeError, match=r"_lstm_layer: expected inputs \[gates_x, h0, c0, w_hh\]"):
        _C._lstm_layer(d[:3], False)
    with pytest.raises(RuntimeError, match=r"_lstm_layer: h0 and c0 must be"):
        _C._lstm_layer([d[0], d[1][:2], d[2], d[3]], False)
    with pytest.raises(RuntimeError, match=r"_lstm_layer: w_hh must be"):
        _C._lstm_layer([d[0], d[1], d[2], d[3][:4]], False)
    with pytest.raises(TypeError, match=r"_lstm_layer: all inputs must have dtype float64"):
        _C._lstm_layer([d[0], d[1].float(), d[2], d[3]], False)
    with pytest.raises(TypeError, match=r"_lstm_layer: expected float32 or float64"):
        _C._lstm_layer([t.half() for t in d], False)
    with pytest.raises(RuntimeError, match=r"_gru_layer: gates_x must be \(T, B, 3H\)"):
        _C._gru_layer([d[0][..., :7], d[1], d[3][:6]], False)
    with pytest.raises(RuntimeError, match=r"_rnn_input_backward: expected grad \(N, G\)"):
        _C._rnn_input_backward(d[1], d[2][:2], d[3])


# ---- the modules -------------------------------------------------------------------------------


def _pair(kind, dtype, *args, **kwargs):
    """The same module twice (same seed): on the CPU and moved to DEV."""
    mods = []
    for _ in range(2):
        ember.manual_seed(0)
        mods.append(getattr(nn, kind)(*args, dtype=getattr(ember, dtype), **kwargs))
    return mods[0], mods[1].to(DEV)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if isinstance(out, rnn_utils.PackedSequence):
        return [out.data]
    return [out]


def _loss(outs):
    total = 0
    for i, o in enumerate(outs):
        n = int(np.prod(o.shape))
        w = ember.from_numpy(np.linspace(-1.0, 1.0, n).reshape(tuple(o.shape))).to(o.dtype)
        total = total + (o * _dev(w) if o.device.type == DEV else o * w).sum() * (i + 1)
    return total


def _compare_module(kind, kw, dtype, x_shape, with_hx, hidden=5, inp=4):
    cpu, gpu = _pair(kind, dtype, inp, hidden, **kw)
    rng = np.random.default_rng(7)
    x = _t(_arr(rng, x_shape, dtype))
    xc, xg = x.clone().requires_grad_(), _dev(x).requires_grad_()
    args_c, args_g, leaves = [xc], [xg], []
    if with_hx:
        layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        batch = x_shape[0] if kw.get("batch_first") else x_shape[1]
        h = _t(_arr(rng, (layers, batch, kw.get("proj_size") or hidden), dtype))
        hc, hg = h.clone().requires_grad_(), _dev(h).requires_grad_()
        leaves.append((hc, hg))
        if kind == "LSTM":
            c = _t(_arr(rng, (layers, batch, hidden), dtype))
            cc, cg = c.clone().requires_grad_(), _dev(c).requires_grad_()
            leaves.append((cc, cg))
            args_c.append((hc, cc))
            args_g.append((hg, cg))
        else:
            args_c.append(hc)
            args_g.append(hg)
    oc, og = _flat(cpu(*args_c)), _flat(gpu(*args_g))
    for k, (g, r) in enumerate(zip(og, oc)):
        _check(g, r, dtype, f"output {k}")
    _loss(oc).backward()
    _loss(og).backward()
    _check(xg.grad, xc.grad, dtype, "input grad")
    for k, (lc, lg) in enumerate(leaves):
        _check(lg.grad, lc.grad, dtype, f"hx[{k}] grad")
    for (name, pc), (_, pg) in zip(cpu.named_parameters(), gpu.named_parameters()):
        assert pg.grad is not None, name
        _check(pg.grad, pc.grad, dtype, name + " grad")


MODULE_CONFIGS = [
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"num_layers": 2, "batch_first": True, "bias": False}),
    ("LSTM", {"bidirectional": True, "batch_first": True}),
    ("LSTM", {"proj_size": 3, "num_layers": 2, "bidirectional": True}),
    ("GRU", {}),
    ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("GRU", {"num_layers": 2, "bias": False}),
    ("GRU", {"bidirectional": True, "bias": False}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_hx", [False, True])
@pytest.mark.parametrize("kind,kw", MODULE_CONFIGS,
                         ids=[f"{k}-{'-'.join(f'{a}{b}' for a, b in kw.items()) or 'plain'}"
                              for k, kw in MODULE_CONFIGS])
def test_module_matches_cpu(kind, kw, dtype, with_hx):
    x_shape = (3, 6, 4) if kw.get("batch_first") else (6, 3, 4)
    _compare_module(kind, kw, dtype, x_shape, with_hx)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_module_larger_float32(kind):
    """A model-sized layer (hidden 64, 20 steps, batch 16): the float32 products of many steps."""
    _compare_module(kind, {"num_layers": 2}, "float32", (20, 16, 32), True, hidden=64, inp=32)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_loss_on_the_output_alone(kind, dtype):
    """The unused h_n / c_n get zero gradients (made on DEV by the autograd engine)."""
    cpu, gpu = _pair(kind, dtype, 4, 5, num_layers=2, bidirectional=True)
    x = _t(_arr(np.random.default_rng(11), (6, 3, 4), dtype))
    xc, xg = x.clone().requires_grad_(), _dev(x).requires_grad_()
    oc, og = cpu(xc)[0], gpu(xg)[0]
    _check(og, oc, dtype, "output")
    _loss([oc]).backward()
    _loss([og]).backward()
    _check(xg.grad, xc.grad, dtype, "input grad")
    for (name, p_c), (_, p_g) in zip(cpu.named_parameters(), gpu.named_parameters()):
        _check(p_g.grad, p_c.grad, dtype, name + " grad")


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_unbatched(kind):
    _compare_module(kind, {"num_layers": 2}, "float64", (5, 4), False)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("lengths", [[4, 4, 4], [5, 3, 2], [2, 5, 3]],
                         ids=["uniform", "sorted", "unsorted"])
def test_packed_sequence(kind, lengths):
    dtype = "float64"
    cpu, gpu = _pair(kind, dtype, 3, 4, num_layers=2, bidirectional=True)
    x = _t(_arr(np.random.default_rng(8), (max(lengths), 3, 3), dtype))
    xc, xg = x.clone().requires_grad_(), _dev(x).requires_grad_()
    pc = rnn_utils.pack_padded_sequence(xc, lengths, enforce_sorted=lengths == sorted(lengths)[::-1])
    pg = rnn_utils.pack_padded_sequence(xg, lengths, enforce_sorted=lengths == sorted(lengths)[::-1])
    oc, og = cpu(pc), gpu(pg)
    pad_c, len_c = rnn_utils.pad_packed_sequence(oc[0])
    pad_g, len_g = rnn_utils.pad_packed_sequence(og[0])
    assert len_c.tolist() == len_g.tolist()
    rest_c, rest_g = _flat(oc[1]), _flat(og[1])
    for k, (g, r) in enumerate(zip([pad_g, *rest_g], [pad_c, *rest_c])):
        _check(g, r, dtype, f"output {k}")
    _loss([pad_c, *rest_c]).backward()
    _loss([pad_g, *rest_g]).backward()
    _check(xg.grad, xc.grad, dtype, "input grad")
    for (name, p_c), (_, p_g) in zip(cpu.named_parameters(), gpu.named_parameters()):
        _check(p_g.grad, p_c.grad, dtype, name + " grad")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells(kind, dtype, bias):
    cpu, gpu = _pair(kind, dtype, 3, 5, bias=bias)
    rng = np.random.default_rng(9)
    x, h = _t(_arr(rng, (4, 3), dtype)), _t(_arr(rng, (4, 5), dtype))
    xc, xg = x.clone().requires_grad_(), _dev(x).requires_grad_()
    hc, hg = h.clone().requires_grad_(), _dev(h).requires_grad_()
    if kind == "LSTMCell":
        c = _t(_arr(rng, (4, 5), dtype))
        cc, cg = c.clone().requires_grad_(), _dev(c).requires_grad_()
        oc, og = _flat(cpu(xc, (hc, cc))), _flat(gpu(xg, (hg, cg)))
        leaves = [(xc, xg), (hc, hg), (cc, cg)]
    else:
        oc, og = [cpu(xc, hc)], [gpu(xg, hg)]
        leaves = [(xc, xg), (hc, hg)]
    for k, (g, r) in enumerate(zip(og, oc)):
        _check(g, r, dtype, f"output {k}")
    _loss(oc).backward()
    _loss(og).backward()
    for k, (lc, lg) in enumerate(leaves):
        _check(lg.grad, lc.grad, dtype, f"leaf {k} grad")
    for (name, p_c), (_, p_g) in zip(cpu.named_parameters(), gpu.named_parameters()):
        _check(p_g.grad, p_c.grad, dtype, name + " grad")


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_the_fused_ops_run_on_the_device(kind, monkeypatch):
    """float32 / float64 layers on DEV go through the fused ops (not the per-step composite)."""
    name = "_lstm_layer" if kind == "LSTM" else "_gru_layer"
    calls = []
    real = getattr(_C, name)

    def spy(inputs, *args):
        calls.append({t.device.type for t in inputs})
        return real(inputs, *args)

    monkeypatch.setattr(_C, name, spy)
    _, gpu = _pair(kind, "float32", 4, 5, num_layers=2, bidirectional=True)
    gpu(_dev(ember.randn(6, 3, 4)))
    assert len(calls) == 4 and all(c == {DEV} for c in calls)
    assert rnn_mod._fused_rnn_ok(_dev(ember.zeros(2)), _dev(ember.zeros(3)))
    assert not rnn_mod._fused_rnn_ok(_dev(ember.zeros(2, dtype=ember.float16)))
    if DEV != "cpu":
        assert not rnn_mod._fused_rnn_ok(_dev(ember.zeros(2)), ember.zeros(3))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_second_derivatives(kind):
    """create_graph: the backward runs the composite ops, on DEV as on the CPU."""
    dtype = "float64"
    cpu, gpu = _pair(kind, dtype, 3, 4)
    x = _t(_arr(np.random.default_rng(10), (4, 2, 3), dtype))
    results = []
    for m, xx in ((cpu, x.clone().requires_grad_()), (gpu, _dev(x).requires_grad_())):
        out = _flat(m(xx))[0]
        (gx,) = ember.autograd.grad((out * out).sum(), [xx], create_graph=True)
        (gx * gx).sum().backward()
        results.append([gx, xx.grad] + [p.grad for p in m.parameters()])
    for k, (g, r) in enumerate(zip(results[1], results[0])):
        _check(g, r, dtype, f"second-order result {k}")
