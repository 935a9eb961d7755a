"""The fused CPU attention (kernels/cpu/nn_attention.cpp): scaled_dot_product_attention without
dropout on float32/float64 CPU tensors runs _scaled_dot_product_fused_attention and its backward.

Values and gradients against torch (float64 to 1e-10, float32 to float tolerances), causal and
not, bool and additive masks (broadcast, rows with every key masked), lengths around the query
block (32 rows), L != S, Ev != E, 2-D to 5-D inputs, non-contiguous q/k/v; numerical gradients
(gradcheck) and second derivatives in float64; forward-mode AD; the dispatch itself (the fused op
runs, dropout and masks with history take the unfused path); bad arguments of the op."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember.autograd import forward_ad, gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"float32": dict(rtol=2e-4, atol=2e-5), "float64": dict(rtol=1e-10, atol=1e-11)}


def arr(shape, seed, dtype):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def both(a, grad=True):
    e = ember.tensor(a).requires_grad_(grad)
    t = torch.tensor(a).requires_grad_(grad)
    return e, t


def close(e, t, dtype):
    np.testing.assert_allclose(np.asarray(e.detach().numpy()), t.detach().numpy(), **TOL[dtype])


def check(qs, ks, vs, dtype, make=None, mask=None, seed=0, **kw):
    """Output and q/k/v gradients of ember vs torch; make(x) builds each operand from an array
    (for strided layouts); mask: a numpy array (bool or float)."""
    make = make or (lambda x: x)
    q, k, v = arr(qs, seed, dtype), arr(ks, seed + 1, dtype), arr(vs, seed + 2, dtype)
    (eq, tq), (ek, tk), (ev, tv) = both(q), both(k), both(v)
    kw_e, kw_t = dict(kw), dict(kw)
    if mask is not None:
        kw_e["attn_mask"], kw_t["attn_mask"] = ember.tensor(mask), torch.tensor(mask)
    eo = ember.scaled_dot_product_attention(make(eq), make(ek), make(ev), **kw_e)
    to = TF.scaled_dot_product_attention(make(tq), make(tk), make(tv), **kw_t)
    close(eo, to, dtype)
    g = arr(tuple(to.shape), seed + 3, dtype)
    eo.backward(ember.tensor(g))
    to.backward(torch.tensor(g))
    for e, t in ((eq, tq), (ek, tk), (ev, tv)):
        close(e.grad, t.grad, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [
    (2, 3, 5, 5, 4, 4),      # (B, H, L, S, E, Ev)
    (1, 2, 33, 33, 8, 8),    # one row past the query block
    (2, 1, 70, 45, 16, 7),   # L > S, Ev != E
    (1, 2, 31, 64, 8, 5),    # L < S
    (1, 1, 1, 1, 3, 2),
])
def test_values_and_grads(dtype, causal, shape):
    b, h, L, S, E, Ev = shape
    check((b, h, L, E), (b, h, S, E), (b, h, S, Ev), dtype, is_causal=causal)



@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("causal", [False, True])
def test_zero_head_dim(dtype, causal):
    # E = 0 (the raw op: F.scaled_dot_product_attention takes the math path there): the scores
    # are all 0, the output a mean of the values, and dV is not zero.
    q, k, v, g = (arr(s, i, dtype) for i, s in enumerate(((2, 37, 0), (2, 41, 0), (2, 41, 5),
                                                           (2, 37, 5))))
    C = ember._C
    out, lse = C._scaled_dot_product_fused_attention(
        [ember.tensor(q), ember.tensor(k), ember.tensor(v)], None, causal, 0.7)
    grads = C._scaled_dot_product_fused_attention_backward(
        ember.tensor(g), ember.tensor(q), ember.tensor(k), ember.tensor(v), None, out, lse, causal,
        0.7)
    tq, tk, tv = (torch.tensor(x).requires_grad_() for x in (q, k, v))
    to = TF.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=0.7)
    to.backward(torch.tensor(g))
    close(out, to, dtype)
    for e, t in zip(grads, (tq, tk, tv)):
        assert tuple(e.shape) == tuple(t.shape)
        close(e, t.grad, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_dims(dtype):
    check((7, 65, 16), (7, 65, 16), (7, 65, 16), dtype, is_causal=True)   # 3-D
    check((9, 8), (12, 8), (12, 4), dtype)                                 # 2-D
    check((2, 2, 2, 6, 4), (2, 2, 2, 6, 4), (2, 2, 2, 6, 4), dtype, is_causal=True, scale=0.7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_masks(dtype):
    rng = np.random.default_rng(7)
    keep = rng.uniform(size=(37, 40)) > 0.4
    keep[:, 0] = True
    check((2, 3, 37, 8), (2, 3, 40, 8), (2, 3, 40, 6), dtype, mask=keep)          # (L, S)
    keep4 = rng.uniform(size=(2, 1, 37, 40)) > 0.5
    keep4[..., 3] = True
    check((2, 3, 37, 8), (2, 3, 40, 8), (2, 3, 40, 6), dtype, mask=keep4)         # (B, 1, L, S)
    add = rng.standard_normal((3, 1, 40)).astype(dtype)
    check((2, 3, 37, 8), (2, 3, 40, 8), (2, 3, 40, 6), dtype, mask=add)           # (H, 1, S)
    add_inf = rng.standard_normal((37, 40)).astype(dtype)
    add_inf[rng.uniform(size=(37, 40)) > 0.7] = -np.inf
    add_inf[:, 5] = 0.0
    check((2, 37, 8), (2, 40, 8), (2, 40, 6), dtype, mask=add_inf)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fully_masked_rows_give_zero(dtype):
    keep = np.ones((6, 5), dtype=bool)
    keep[2] = False
    q, k, v = (ember.tensor(arr((2, 6 if i == 0 else 5, 4), i, dtype)).requires_grad_()
               for i in range(3))
    o = ember.scaled_dot_product_attention(q, k, v, attn_mask=ember.tensor(keep))
    on = o.detach().numpy()
    assert np.all(on[:, 2] == 0) and np.all(np.isfinite(on))
    o.sum().backward()
    for t in (q, k, v):
        assert np.all(np.isfinite(t.grad.numpy()))
    assert np.all(q.grad.numpy()[:, 2] == 0)
    # The other rows as torch computes them.
    tq, tk, tv = (torch.tensor(t.detach().numpy()) for t in (q, k, v))
    ref = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(keep))
    rows = [0, 1, 3, 4, 5]
    np.testing.assert_allclose(on[:, rows], ref.numpy()[:, rows], **TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_non_contiguous(dtype):
    # q/k/v as GPT makes them: heads split off a packed projection, then transposed.
    b, L, h, e = 2, 45, 3, 8
    x = arr((b, L, 3 * h * e), 0, dtype)
    ex, tx = both(x)

    def heads(t, i):
        return t[..., i * h * e:(i + 1) * h * e].reshape(b, L, h, e).transpose(1, 2)

    eo = ember.scaled_dot_product_attention(heads(ex, 0), heads(ex, 1), heads(ex, 2),
                                            is_causal=True)
    to = TF.scaled_dot_product_attention(heads(tx, 0), heads(tx, 1), heads(tx, 2),
                                         is_causal=True)
    close(eo, to, dtype)
    g = arr(tuple(to.shape), 5, dtype)
    eo.backward(ember.tensor(g))
    to.backward(torch.tensor(g))
    close(ex.grad, tx.grad, dtype)
    # A last dim that is not unit-stride, a broadcast (stride 0) batch dim, a non-contiguous
    # gradient of the output.
    check((2, 3, 9, 6), (2, 3, 6, 7), (2, 3, 7, 5), dtype,
          make=lambda t: t.transpose(-1, -2) if tuple(t.shape[-2:]) == (6, 7) else t, is_causal=False)
    q, k, v = arr((1, 3, 10, 4), 1, dtype), arr((2, 1, 12, 4), 2, dtype), arr((2, 3, 12, 4), 3,
                                                                                dtype)
    (eq, tq), (ek, tk), (ev, tv) = both(q), both(k), both(v)
    eo = ember.scaled_dot_product_attention(eq.expand(2, 3, 10, 4), ek.expand(2, 3, 12, 4), ev)
    to = TF.scaled_dot_product_attention(tq.expand(2, 3, 10, 4), tk.expand(2, 3, 12, 4), tv)
    close(eo, to, dtype)
    g = arr((2, 3, 4, 10), 4, dtype)
    eo.backward(ember.tensor(g).transpose(-1, -2))
    to.backward(torch.tensor(g).transpose(-1, -2))
    for e, t in ((eq, tq), (ek, tk), (ev, tv)):
        close(e.grad, t.grad, dtype)


def test_self_attention_same_tensor():
    x = arr((2, 2, 20, 8), 0, "float64")
    ex, tx = both(x)
    eo = ember.scaled_dot_product_attention(ex, ex, ex, is_causal=True)
    to = TF.scaled_dot_product_attention(tx, tx, tx, is_causal=True)
    eo.sum().backward()
    to.sum().backward()
    close(eo, to, "float64")
    close(ex.grad, tx.grad, "float64")


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_float64(causal):
    q, k, v = (ember.tensor(arr(s, i, "float64")).requires_grad_()
               for i, s in enumerate([(2, 7, 3), (2, 7, 3), (2, 7, 4)]))
    assert gradcheck(lambda a, b, c: ember.scaled_dot_product_attention(a, b, c, is_causal=causal),
                     (q, k, v))
    keep = ember.tensor(np.random.default_rng(3).uniform(size=(7, 7)) > 0.3) | ember.eye(
        7, dtype=ember.bool)
    assert gradcheck(lambda a, b, c: ember.scaled_dot_product_attention(a, b, c, attn_mask=keep),
                     (q, k, v))
    assert gradgradcheck(
        lambda a, b, c: ember.scaled_dot_product_attention(a, b, c, is_causal=causal), (q, k, v))


def test_double_backward_matches_torch():
    q, k, v = arr((2, 9, 4), 0, "float64"), arr((2, 9, 4), 1, "float64"), arr((2, 9, 3), 2,
                                                                                  "float64")
    (eq, tq), (ek, tk), (ev, tv) = both(q), both(k), both(v)
    eo = ember.scaled_dot_product_attention(eq, ek, ev, is_causal=True)
    to = TF.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    (egq,) = ember.autograd.grad((eo * eo).sum(), [eq], create_graph=True)
    (tgq,) = torch.autograd.grad((to * to).sum(), [tq], create_graph=True)
    close(egq, tgq, "float64")
    egk, egv = ember.autograd.grad(egq.sum(), [ek, ev])
    tgk, tgv = torch.autograd.grad(tgq.sum(), [tk, tv])
    close(egk, tgk, "float64")
    close(egv, tgv, "float64")


@pytest.mark.parametrize("causal", [False, True])
def test_forward_ad(causal):
    shapes = [(2, 11, 4), (2, 11, 4), (2, 11, 5)]
    prim = [arr(s, i, "float64") for i, s in enumerate(shapes)]
    tang = [arr(s, 10 + i, "float64") for i, s in enumerate(shapes)]
    for which in ([0], [1], [2], [0, 1, 2]):
        with forward_ad.dual_level():
            args = [forward_ad.make_dual(ember.tensor(p), ember.tensor(t)) if i in which
                    else ember.tensor(p) for i, (p, t) in enumerate(zip(prim, tang))]
            out = ember.scaled_dot_product_attention(*args, is_causal=causal)
            jvp = forward_ad.unpack_dual(out).tangent.numpy()
        targs = [torch.tensor(p) for p in prim]
        tt = [torch.tensor(t) if i in which else torch.zeros_like(torch.tensor(t))
              for i, t in enumerate(tang)]
        _, ref = torch.func.jvp(
            lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, is_causal=causal),
            tuple(targs), tuple(tt))
        np.testing.assert_allclose(jvp, ref.numpy(), rtol=1e-10, atol=1e-11)


def _ops_run(fn):
    with ember.profiler.profile() as p:
        fn()
    return {e.key for e in p.key_averages()}


def test_dispatch():
    q = ember.randn(2, 3, 8, 4, requires_grad=True)
    fused = "aten::_scaled_dot_product_fused_attention"
    ran = _ops_run(lambda: ember.scaled_dot_product_attention(q, q, q, is_causal=True)
                   .sum().backward())
    assert fused in ran and fused + "_backward" in ran
    # Dropout, a mask with history, and integer inputs take the unfused path.
    ran = _ops_run(lambda: ember.scaled_dot_product_attention(q, q, q, dropout_p=0.5))
    assert fused not in ran
    m = ember.zeros(8, 8, requires_grad=True)
    ran = _ops_run(lambda: ember.scaled_dot_product_attention(q, q, q, attn_mask=m).sum()
                   .backward())
    assert fused not in ran and m.grad is not None
    # float16 is not fused (but still works).
    h = ember.randn(1, 4, 4).half()
    assert fused not in _ops_run(lambda: ember.scaled_dot_product_attention(h, h, h))


def test_two_threads_same_result():
    x = ember.randn(4, 3, 70, 16, requires_grad=True)
    prev = ember.get_num_threads()
    outs = []
    try:
        for n in (1, 2):
            ember.set_num_threads(n)
            x.grad = None
            o = ember.scaled_dot_product_attention(x, x, x, is_causal=True)
            o.square().sum().backward()
            outs.append((o.detach().numpy(), x.grad.numpy()))
    finally:
        ember.set_num_threads(prev)
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


def test_op_errors():
    C = ember._C
    q, k, v = ember.randn(2, 5, 4), ember.randn(2, 6, 4), ember.randn(2, 6, 3)
    with pytest.raises(RuntimeError,
                       match=r"_scaled_dot_product_fused_attention: expected \[query"):
        C._scaled_dot_product_fused_attention([q, k], None, False, 1.0)
    with pytest.raises(RuntimeError, match="share their batch dims"):
        C._scaled_dot_product_fused_attention([q, ember.randn(3, 6, 4), v], None, False, 1.0)
    with pytest.raises(RuntimeError, match=r"key must be \(\.\.\., S, E\)"):
        C._scaled_dot_product_fused_attention([q, ember.randn(2, 6, 5), v], None, False, 1.0)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        C._scaled_dot_product_fused_attention([q, k, v], ember.ones(5, 5, dtype=ember.bool),
                                              False, 1.0)
    with pytest.raises(RuntimeError, match="attn_mask must be bool or of the query's dtype"):
        C._scaled_dot_product_fused_attention([q, k, v], ember.ones(5, 6, dtype=ember.int64),
                                              False, 1.0)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        C._scaled_dot_product_fused_attention([q, k, v], ember.ones(5, 6), True, 1.0)
    with pytest.raises(TypeError, match="float32 and float64"):
        C._scaled_dot_product_fused_attention([q.half(), k.half(), v.half()], None, False, 1.0)
    out, lse = C._scaled_dot_product_fused_attention([q, k, v], None, False, 1.0)
    with pytest.raises(RuntimeError, match="expected grad_out and out of shape"):
        C._scaled_dot_product_fused_attention_backward(ember.randn(2, 5, 4), q, k, v, None, out,
                                                       lse, False, 1.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_propagates(dtype):
    # A NaN in a query or key: every output it reaches is NaN (a row of NaN scores is not taken
    # for a masked row), as in torch.
    x = arr((2, 40, 8), 0, dtype)
    x[0, 3, 2] = np.nan
    e = ember.scaled_dot_product_attention(*(ember.tensor(x) for _ in range(3))).numpy()
    t = TF.scaled_dot_product_attention(*(torch.tensor(x) for _ in range(3))).numpy()
    np.testing.assert_array_equal(np.isnan(e), np.isnan(t))
    assert np.isnan(e[0]).all() and not np.isnan(e[1]).any()
    np.testing.assert_allclose(e[1], t[1], **TOL[dtype])
