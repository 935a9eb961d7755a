"""The fused CUDA attention (csrc/cuda/nn_attention.cu): _scaled_dot_product_fused_attention and
its backward on CUDA tensors against the CPU fused op (float32 / float64, the same op on the CPU
copies) and against a float64 NumPy evaluation of the math path (softmax(q k^T * scale + mask) v
and its gradients), through the raw ops and through F.scaled_dot_product_attention's autograd.

Covered: head dims 3 to 256 (every template bucket and the odd widths), L != S both ways, causal
with L < S and L > S, bool and additive masks broadcast from (L, S), (B, 1, L, S) and (H, 1, S),
-inf in additive masks, rows whose every key is masked (output 0, logsumexp -inf, finite
gradients), GQA (enable_gqa), non-contiguous q / k / v (heads split off a packed projection and
transposed; a key whose last dim is strided), float16 / bfloat16 against float32 math (loose
tolerances; the logsumexp is float32), determinism of the backward, the dispatch (which calls
take the fused op), argument errors, and L = 4096 within a small fraction of the memory the
(L, S) scores would take. The tensor-core calls with both settings of the mma switch (the
mma.sync kernels of nn_attention_mma.cu, or the WMMA ones of nn_attention_tc.cu). Skipped without a CUDA device; EMBER_TEST_SDPA_DEVICE=cpu runs the same
comparisons CPU against CPU (a dry run of the test logic on a machine without a GPU: the cases
that need the CUDA kernels themselves are skipped)."""

from __future__ import annotations

import math
import os

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from core_helpers import to_np

DEV = os.environ.get("EMBER_TEST_SDPA_DEVICE", "cuda")
ON_CUDA = DEV == "cuda"
pytestmark = pytest.mark.skipif(ON_CUDA and not ember.cuda.is_available(),
                                reason="needs a CUDA device")
needs_cuda = pytest.mark.skipif(not ON_CUDA, reason="checks the CUDA kernels themselves")

C = ember._C
FUSED = "aten::_scaled_dot_product_fused_attention"
# Tolerances relative to the largest magnitude of the reference (sums in another order).
TOL = {"float64": 1e-10, "float32": 3e-5, "float16": 1.5e-2, "bfloat16": 5e-2}
EDT = {"float64": ember.float64, "float32": ember.float32, "float16": ember.float16,
       "bfloat16": ember.bfloat16}


def arr(shape, seed, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def et(a, dtype, grad=False):
    """A CPU ember tensor of `dtype` holding the float64 array a (rounded to dtype)."""
    t = ember.tensor(np.asarray(a, dtype=np.float64))
    if dtype != "float64":
        t = t.to(ember.float32).to(EDT[dtype])
    return t.requires_grad_(grad) if grad else t


def npv(t):
    """t's values as a float64 (floating dtypes) NumPy array, from any device."""
    return to_np(t.detach().cpu() if isinstance(t, ember.Tensor) else t)


def dev(t):
    return t.to(DEV) if isinstance(t, ember.Tensor) else t


def close(actual, ref, dtype, what=""):
    a, r = npv(actual), np.asarray(ref, dtype=np.float64)
    assert a.shape == r.shape, (what, a.shape, r.shape)
    fin = np.isfinite(r)
    assert np.array_equal(np.isfinite(a), fin), f"{what}: non-finite entries differ"
    if not fin.any():
        return
    scale = max(1.0, float(np.abs(r[fin]).max()))
    np.testing.assert_allclose(a[fin], r[fin], rtol=TOL[dtype], atol=TOL[dtype] * scale,
                               err_msg=what)


# ---- the float64 reference (the math path, in NumPy) --------------------------------------------

def ref_attention(q, k, v, mask=None, causal=False, scale=None, dout=None):
    """(out, lse, grads) of softmax(q k^T * scale + mask) v over float64 arrays (..., L, E),
    (..., S, E), (..., S, Ev); rows whose every key is masked give 0 and lse -inf. grads is
    (dq, dk, dv) for the output gradient dout (None without one)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones((L, S), dtype=bool)), s, -np.inf)
    elif mask is not None and mask.dtype == bool:
        s = np.where(mask, s, -np.inf)
    elif mask is not None:
        s = s + mask
    m = s.max(-1, keepdims=True)
    none = m == -np.inf
    shift = np.where(none, 0.0, m)
    e = np.exp(s - shift)
    tot = e.sum(-1, keepdims=True)
    p = np.where(none, 0.0, e / np.where(tot == 0, 1.0, tot))
    out = p @ v
    lse = np.where(none, -np.inf, shift + np.log(np.where(tot == 0, 1.0, tot)))[..., 0]
    if dout is None:
        return out, lse, None
    dout = np.asarray(dout, dtype=np.float64)
    dv = np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    dq = ds @ k * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    return out, lse, (dq, dk, dv)


def rounded(a, dtype):
    """a as the float64 values a tensor of dtype holds."""
    return npv(et(a, dtype))


# ---- the raw ops against the CPU fused op and the reference --------------------------------------

SHAPES = [  # (B, H, L, S, E, Ev)
    (2, 3, 5, 5, 4, 4),
    (1, 1, 1, 1, 3, 2),
    (3, 2, 17, 17, 8, 5),
    (1, 2, 33, 47, 16, 16),
    (2, 1, 70, 45, 64, 64),
    (1, 2, 31, 64, 80, 80),
    (1, 1, 40, 40, 128, 96),
    (1, 1, 20, 36, 256, 256),
    (1, 1, 37, 29, 200, 33),
    (2, 4, 1, 1000, 64, 64),   # one query (decoding) against a long cache
    (1, 2, 300, 1, 32, 32),    # one key
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fused_op_matches_cpu_and_reference(dtype, causal, shape):
    B, H, L, S, E, Ev = shape
    scale = 0.9 / math.sqrt(E)
    q, k, v = arr((B, H, L, E), 1), arr((B, H, S, E), 2), arr((B, H, S, Ev), 3)
    g = arr((B, H, L, Ev), 4)
    qc, kc, vc, gc = (et(x, dtype) for x in (q, k, v, g))
    out, lse = C._scaled_dot_product_fused_attention([dev(qc), dev(kc), dev(vc)], None, causal,
                                                    scale)
    assert out.device.type == DEV and out.dtype == EDT[dtype] and lse.dtype == EDT[dtype]
    cout, clse = C._scaled_dot_product_fused_attention([qc, kc, vc], None, causal, scale)
    close(out, npv(cout), dtype, "out vs CPU")
    close(lse, npv(clse), dtype, "lse vs CPU")
    r_out, r_lse, r_grads = ref_attention(q, k, v, causal=causal, scale=scale, dout=g)
    close(out, r_out, dtype, "out vs math")
    close(lse, r_lse, dtype, "lse vs math")
    grads = C._scaled_dot_product_fused_attention_backward(
        dev(gc), dev(qc), dev(kc), dev(vc), None, out, lse, causal, scale)
    cgrads = C._scaled_dot_product_fused_attention_backward(gc, qc, kc, vc, None, cout, clse,
                                                           causal, scale)
    for name, a, c, r in zip("qkv", grads, cgrads, r_grads):
        assert a.shape == c.shape and a.dtype == EDT[dtype]
        close(a, npv(c), dtype, f"d{name} vs CPU")
        close(a, r, dtype, f"d{name} vs math")


def autograd_check(dtype, qs, ks, vs, mask=None, seed=0, make=None, ref_dtype=None, **kw):
    """F.scaled_dot_product_attention on the device (forward and q/k/v gradients) against the
    float64 reference of the same (rounded) values; make(t) gives a tensor of t's values in
    another layout (a non-contiguous view), which becomes the leaf. Returns the device output."""
    make = make or (lambda t: t)
    q, k, v = arr(qs, seed), arr(ks, seed + 1), arr(vs, seed + 2)
    q, k, v = (rounded(x, dtype) for x in (q, k, v))
    leaves = [make(dev(et(x, dtype))).detach().requires_grad_() for x in (q, k, v)]
    em = None if mask is None else dev(et(mask, dtype) if mask.dtype != bool else
                                       ember.tensor(mask))
    out = F.scaled_dot_product_attention(*leaves, attn_mask=em, **kw)
    g = rounded(arr(tuple(out.shape), seed + 3), dtype)
    out.backward(dev(et(g, dtype)))
    rq, rk, rv = q, k, v
    if kw.get("enable_gqa") and qs[-3] != ks[-3]:
        rep = qs[-3] // ks[-3]
        rk, rv = np.repeat(k, rep, axis=-3), np.repeat(v, rep, axis=-3)
    rmask = mask if mask is None or mask.dtype == bool else rounded(mask, dtype)
    r_out, _, (dq, dk, dv) = ref_attention(rq, rk, rv, mask=rmask, causal=kw.get("is_causal",
                                                                                  False),
                                           scale=kw.get("scale"), dout=g)
    if rk is not k:
        rep = qs[-3] // ks[-3]
        dk = dk.reshape(dk.shape[:-3] + (ks[-3], rep) + dk.shape[-2:]).sum(-3)
        dv = dv.reshape(dv.shape[:-3] + (ks[-3], rep) + dv.shape[-2:]).sum(-3)
    tol_dtype = ref_dtype or dtype
    close(out, r_out, tol_dtype, "out")
    for name, t, r in zip("qkv", leaves, (dq, dk, dv)):
        close(t.grad, r, tol_dtype, f"d{name}")
    return out


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("L,S", [(31, 64), (70, 45), (1, 9), (9, 1)])
def test_causal_l_ne_s(dtype, L, S):
    autograd_check(dtype, (2, 2, L, 16), (2, 2, S, 16), (2, 2, S, 12), is_causal=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_masks(dtype):
    rng = np.random.default_rng(7)
    keep = rng.uniform(size=(37, 40)) > 0.4
    keep[:, 0] = True
    autograd_check(dtype, (2, 3, 37, 8), (2, 3, 40, 8), (2, 3, 40, 6), mask=keep)
    keep4 = rng.uniform(size=(2, 1, 37, 40)) > 0.5
    keep4[..., 3] = True
    autograd_check(dtype, (2, 3, 37, 8), (2, 3, 40, 8), (2, 3, 40, 6), mask=keep4)
    add = rng.standard_normal((3, 1, 40))
    autograd_check(dtype, (2, 3, 37, 64), (2, 3, 40, 64), (2, 3, 40, 64), mask=add, scale=0.3)
    add_inf = rng.standard_normal((37, 40))
    add_inf[rng.uniform(size=(37, 40)) > 0.7] = -np.inf
    add_inf[:, 5] = 0.0
    autograd_check(dtype, (2, 37, 8), (2, 40, 8), (2, 40, 6), mask=add_inf)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_fully_masked_rows(dtype, kind):
    keep = np.ones((6, 40), dtype=bool)
    keep[2] = False
    keep[5, 33:] = False
    mask = keep if kind == "bool" else np.where(keep, 0.0, -np.inf)
    q, k, v = arr((2, 6, 4), 0), arr((2, 40, 4), 1), arr((2, 40, 4), 2)
    qd, kd, vd = (dev(et(x, dtype)) for x in (q, k, v))
    md = dev(ember.tensor(mask) if kind == "bool" else et(mask, dtype))
    out, lse = C._scaled_dot_product_fused_attention([qd, kd, vd], md, False, 0.5)
    on, ln = npv(out), npv(lse)
    assert np.all(on[:, 2] == 0) and np.all(np.isfinite(on))
    assert np.all(ln[:, 2] == -np.inf) and np.all(np.isfinite(np.delete(ln, 2, axis=1)))
    r_out, r_lse, _ = ref_attention(rounded(q, dtype), rounded(k, dtype), rounded(v, dtype),
                                    mask=mask if kind == "bool" else mask, scale=0.5)
    close(out, r_out, dtype, "out")
    close(lse, r_lse, dtype, "lse")
    g = dev(et(arr((2, 6, 4), 3), dtype))
    grads = C._scaled_dot_product_fused_attention_backward(g, qd, kd, vd, md, out, lse, False, 0.5)
    for t in grads:
        assert np.all(np.isfinite(npv(t)))
    assert np.all(npv(grads[0])[:, 2] == 0)
    # Through autograd as well.
    autograd_check(dtype, (2, 6, 4), (2, 40, 4), (2, 40, 4), mask=mask)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gqa(dtype):
    autograd_check(dtype, (2, 8, 19, 16), (2, 2, 23, 16), (2, 2, 23, 16), enable_gqa=True)
    autograd_check(dtype, (1, 6, 40, 32), (1, 3, 40, 32), (1, 3, 40, 8), enable_gqa=True,
                   is_causal=True)


def _strided(make, dtype, *shapes, **kw):
    """autograd_check with operands laid out by make, checked to be non-contiguous."""
    probe = make(dev(et(arr(shapes[0], 9), dtype)))
    assert not probe.is_contiguous() and probe.shape == shapes[0]
    autograd_check(dtype, *shapes, make=make, **kw)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_non_contiguous(dtype):
    b, L, h, e = 2, 45, 3, 16

    def split(t):  # (b, h, L, e) values as heads split off a packed (b, L, h * e) projection
        return t.transpose(1, 2).contiguous().reshape(b, L, h * e).reshape(b, L, h, e) \
            .transpose(1, 2)
    _strided(split, dtype, (b, h, L, e), (b, h, L, e), (b, h, L, e), is_causal=True)

    def cols(t):  # stored transposed: the last dim has stride L
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    _strided(cols, dtype, (b, h, L, e), (b, h, 50, e), (b, h, 50, 8))

    def perm(t):  # batch dims that do not coalesce
        return t.permute(1, 0, 2, 3, 4).contiguous().permute(1, 0, 2, 3, 4)
    _strided(perm, dtype, (2, 3, 2, 9, 8), (2, 3, 2, 11, 8), (2, 3, 2, 11, 8))

    def many(t):  # nine batch dims with reversed strides: more than the kernels take (a copy)
        nb = t.dim() - 2
        order = list(range(nb))[::-1] + [nb, nb + 1]
        return t.permute(*order).contiguous().permute(*order)
    shape = (2,) * 9
    _strided(many, dtype, shape + (3, 4), shape + (5, 4), shape + (5, 4), is_causal=True)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("E", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_half_precision(dtype, E, causal):
    # The 16-bit inputs' float64 values are the reference's: what remains is float32 math and
    # the 16-bit rounding of the outputs and gradients.
    out = autograd_check(dtype, (2, 4, 77, E), (2, 4, 77, E), (2, 4, 77, E), is_causal=causal)
    assert out.dtype == EDT[dtype]


@needs_cuda
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_raw_op(dtype):
    q, k, v = arr((1, 2, 50, 96), 0), arr((1, 2, 70, 96), 1), arr((1, 2, 70, 40), 2)
    keep = np.random.default_rng(3).uniform(size=(50, 70)) > 0.3
    keep[:, 0] = True
    keep[7] = False
    qd, kd, vd = (dev(et(x, dtype)) for x in (q, k, v))
    out, lse = C._scaled_dot_product_fused_attention([qd, kd, vd], dev(ember.tensor(keep)), False,
                                                    0.1)
    assert out.dtype == EDT[dtype] and lse.dtype == ember.float32
    r_out, r_lse, _ = ref_attention(*(rounded(x, dtype) for x in (q, k, v)), mask=keep, scale=0.1)
    close(out, r_out, dtype, "out")
    close(lse, r_lse, "float32", "lse")  # float32 statistics of 16-bit scores
    assert np.all(npv(out)[0, :, 7] == 0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_additive_mask(dtype):
    add = np.random.default_rng(5).standard_normal((1, 60)) * 0.5
    autograd_check(dtype, (3, 20, 32), (3, 60, 32), (3, 60, 32), mask=add)


def test_empty_slices():
    # No batch, or no queries: empty results (and zero gradients), no launch of the kernels.
    for qs, ks in (((0, 3, 5, 8), (0, 3, 6, 8)), ((2, 0, 8), (2, 6, 8))):
        q, k = dev(ember.randn(*qs)), dev(ember.randn(*ks))
        out, lse = C._scaled_dot_product_fused_attention([q, k, k], None, False, 1.0)
        assert tuple(out.shape) == qs and tuple(lse.shape) == qs[:-1]
        grads = C._scaled_dot_product_fused_attention_backward(out, q, k, k, None, out, lse,
                                                               False, 1.0)
        for g, t in zip(grads, (q, k, k)):
            assert tuple(g.shape) == tuple(t.shape) and np.all(npv(g) == 0)



@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
def test_zero_width_queries_and_keys(dtype, causal):
    # E = 0: every score is 0 (+ mask), so the output is a mean of the values and dV is not
    # zero (dQ and dK have no elements); the kernels run with no dot-product columns.
    q, k, v = arr((2, 3, 37, 0), 0), arr((2, 3, 41, 0), 1), arr((2, 3, 41, 5), 2)
    g = arr((2, 3, 37, 5), 3)
    qd, kd, vd, gd = (dev(et(x, dtype)) for x in (q, k, v, g))
    out, lse = C._scaled_dot_product_fused_attention([qd, kd, vd], None, causal, 0.7)
    r_out, r_lse, (dq, dk, dv) = ref_attention(q, k, rounded(v, dtype), causal=causal, scale=0.7,
                                               dout=rounded(g, dtype))
    close(out, r_out, dtype, "out")
    close(lse, r_lse, dtype, "lse")
    grads = C._scaled_dot_product_fused_attention_backward(gd, qd, kd, vd, None, out, lse, causal,
                                                           0.7)
    assert tuple(grads[0].shape) == q.shape and tuple(grads[1].shape) == k.shape
    close(grads[2], dv, dtype, "dv")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_first_key_tiles_fully_masked(dtype, kind):
    # The kernels walk the keys in tiles of 32: rows whose first tiles hide every key start the
    # online softmax from -inf (all keys before 32 or 64 masked), one row sees only its last key,
    # and one additive entry dominates its row from a late tile (the running max jumps).
    keep = np.ones((20, 70), dtype=bool)
    keep[:, :32] = False
    keep[4, :64] = False
    keep[9, :69] = False
    keep[3] = False
    mask = keep if kind == "bool" else np.where(keep, 0.0, -np.inf)
    if kind == "additive":
        mask[7, 40] = 30.0
    autograd_check(dtype, (2, 20, 8), (2, 70, 8), (2, 70, 5), mask=mask)


@needs_cuda
def test_backward_deterministic():
    q = dev(et(arr((2, 4, 150, 64), 0), "float32")).requires_grad_()
    k = dev(et(arr((2, 4, 170, 64), 1), "float32")).requires_grad_()
    v = dev(et(arr((2, 4, 170, 64), 2), "float32")).requires_grad_()
    g = dev(et(arr((2, 4, 150, 64), 3), "float32"))
    runs = []
    for _ in range(2):
        for t in (q, k, v):
            t.grad = None
        F.scaled_dot_product_attention(q, k, v).backward(g)
        runs.append([npv(t.grad) for t in (q, k, v)])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


@needs_cuda
def test_side_stream():
    # The kernels run on the caller's current stream: a side stream gives the same values.
    x = [dev(et(arr((2, 3, 70, 32), s), "float32")).requires_grad_() for s in range(3)]
    g = dev(et(arr((2, 3, 70, 32), 3), "float32"))
    ref = F.scaled_dot_product_attention(*x, is_causal=True)
    ref.backward(g)
    ref_grads = [npv(t.grad) for t in x]
    for t in x:
        t.grad = None
    side = ember.cuda.Stream()
    side.wait_stream(ember.cuda.current_stream())
    with ember.cuda.stream(side):
        out = F.scaled_dot_product_attention(*x, is_causal=True)
        out.backward(g)
    side.synchronize()
    np.testing.assert_array_equal(npv(out), npv(ref))
    for t, r in zip(x, ref_grads):
        np.testing.assert_array_equal(npv(t.grad), r)


def test_double_backward():
    # create_graph: the fused op's gradients as a composite of ops (differentiable), the same
    # on the device as on the CPU.
    results = []
    for where in (DEV, "cpu"):
        q, k, v = (et(arr(s, i), "float64").to(where).requires_grad_()
                   for i, s in enumerate(((2, 9, 8), (2, 11, 8), (2, 11, 8))))
        w = et(arr((2, 9, 8), 5), "float64").to(where)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=False)
        gq, = ember.autograd.grad((out * w).sum(), [q], create_graph=True)
        gq.square().sum().backward()
        results.append([npv(t) for t in (out, gq, q.grad, k.grad, v.grad)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def _ops_run(fn):
    with ember.profiler.profile() as p:
        fn()
    return {e.key for e in p.key_averages()}


@needs_cuda
def test_dispatch():
    q = dev(et(arr((2, 3, 8, 16), 0), "float32")).requires_grad_()
    ran = _ops_run(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True).sum()
                   .backward())
    assert FUSED in ran and FUSED + "_backward" in ran
    h = q.detach().half()
    assert FUSED in _ops_run(lambda: F.scaled_dot_product_attention(h, h, h))
    b = q.detach().to(ember.bfloat16)
    assert FUSED in _ops_run(lambda: F.scaled_dot_product_attention(b, b, b))
    # Dropout, a mask with history and head dims past 256 take the unfused path (and work).
    assert FUSED not in _ops_run(lambda: F.scaled_dot_product_attention(q, q, q, dropout_p=0.5))
    m = dev(ember.zeros(8, 8)).requires_grad_()
    ran = _ops_run(lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=m).sum().backward())
    assert FUSED not in ran and m.grad is not None
    w = dev(et(arr((1, 5, 300), 1), "float32"))
    ran = _ops_run(lambda: F.scaled_dot_product_attention(w, w, w))
    assert FUSED not in ran
    r_out, _, _ = ref_attention(*(npv(w),) * 3)
    close(F.scaled_dot_product_attention(w, w, w), r_out, "float32", "E=300 (unfused)")


@needs_cuda
def test_unfused_causal_on_device():
    # The unfused (math) path builds its causal mask on the scores' device (it was a CPU mask,
    # failing where()'s device check): head dims past 256 and dropout take that path.
    w = dev(et(arr((2, 7, 300), 2), "float32"))
    out = F.scaled_dot_product_attention(w, w, w, is_causal=True)
    r_out, _, _ = ref_attention(*(npv(w),) * 3, causal=True)
    close(out, r_out, "float32", "E=300 causal (unfused)")
    q = dev(et(arr((2, 3, 9, 16), 3), "float32"))
    d = F.scaled_dot_product_attention(q, q, q, is_causal=True, dropout_p=0.5)
    assert d.shape == (2, 3, 9, 16) and d.device == q.device
    assert np.isfinite(npv(d)).all()
    # the first query row sees only key 0: its output is v[0] / (1 - p) or 0 (dropped)
    row0, v0 = npv(d)[..., 0, :], npv(q)[..., 0, :]
    kept = np.isclose(row0, 2 * v0, rtol=1e-5, atol=1e-6).all(-1)
    dropped = (row0 == 0).all(-1)
    assert (kept | dropped).all()


@needs_cuda
def test_op_errors():
    q, k, v = (dev(ember.randn(*s)) for s in ((2, 5, 4), (2, 6, 4), (2, 6, 3)))
    op, bwd = C._scaled_dot_product_fused_attention, C._scaled_dot_product_fused_attention_backward
    with pytest.raises(RuntimeError, match=r"_scaled_dot_product_fused_attention: expected \[q"):
        op([q, k], None, False, 1.0)
    with pytest.raises(RuntimeError, match="share their batch dims"):
        op([q, dev(ember.randn(3, 6, 4)), v], None, False, 1.0)
    with pytest.raises(RuntimeError, match=r"key must be \(\.\.\., S, E\)"):
        op([q, dev(ember.randn(2, 6, 5)), v], None, False, 1.0)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        op([q, k, v], dev(ember.ones(5, 5, dtype=ember.bool)), False, 1.0)
    with pytest.raises(RuntimeError, match="attn_mask must be bool or of the query's dtype"):
        op([q, k, v], dev(ember.ones(5, 6, dtype=ember.int64)), False, 1.0)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        op([q, k, v], dev(ember.ones(5, 6)), True, 1.0)
    with pytest.raises(RuntimeError, match="head dims up to 256"):
        w = dev(ember.randn(2, 5, 257))
        op([w, w, w], None, False, 1.0)
    with pytest.raises(TypeError, match="float16, bfloat16, float32 or float64"):
        i = dev(ember.ones(2, 5, 4, dtype=ember.int32))
        op([i, i, i], None, False, 1.0)
    with pytest.raises(RuntimeError, match=r"same (CUDA )?device"):
        op([q, k.cpu(), v], None, False, 1.0)
    out, lse = op([q, k, v], None, False, 1.0)
    with pytest.raises(RuntimeError, match="expected grad_out and out of shape"):
        bwd(dev(ember.randn(2, 5, 4)), q, k, v, None, out, lse, False, 1.0)


@needs_cuda
@pytest.mark.parametrize("causal", [False, True])
def test_long_sequence_memory(causal):
    # L = S = 4096 on 2 heads: the scores would take 2 * 4096 * 4096 * 4 bytes = 128 MiB; forward
    # and backward together must stay under a quarter of one head's worth.
    B, H, L, E = 1, 2, 4096, 64
    x = [dev(et(arr((B, H, L, E), s), "float32")).requires_grad_() for s in range(3)]
    g = dev(et(arr((B, H, L, E), 3), "float32"))
    ember.cuda.synchronize()
    base = ember.cuda.memory_allocated()
    ember.cuda.reset_peak_memory_stats()
    out = F.scaled_dot_product_attention(*x, is_causal=causal)
    out.backward(g)
    ember.cuda.synchronize()
    peak = ember.cuda.max_memory_allocated() - base
    assert peak < L * L * 4 // 4, f"peak {peak} bytes over the inputs"
    # A sample of rows against the reference (the whole problem in float64 NumPy is too big).
    rows = np.array([0, 1, 31, 32, 33, 1000, 2047, 4095])
    q, k, v = (npv(t) for t in x)
    if causal:
        r_out = np.concatenate([ref_attention(q[..., i:i + 1, :], k[..., :i + 1, :],
                                              v[..., :i + 1, :])[0] for i in rows], axis=-2)
    else:
        r_out = ref_attention(q[..., rows, :], k, v)[0]
    close(npv(out)[..., rows, :], r_out, "float32", "out rows")
    for t in x:
        assert np.all(np.isfinite(npv(t.grad)))


# ---- the tensor-core kernels (nn_attention_tc.cu) ------------------------------------------------
# float16 / bfloat16 without a mask, E == Ev in {32, 64, 96, 128}, on sm_80+: the WMMA kernels
# (16-bit P and dS, float accumulators). Compared with the CPU fused op on float32 copies of the
# same 16-bit values, with the switch ember._C_cuda._set_sdpa_tensor_cores off (the CUDA-core
# kernels), and with themselves (determinism).

# Tolerances relative to the largest magnitude of the reference (16-bit P / dS in the products).
TC_TOL = {"float16": 1e-2, "bfloat16": 2e-2}


def _tc_capable():
    if not (ON_CUDA and ember.cuda.is_available()):
        return False
    return ember.cuda.get_device_capability()[0] >= 8


needs_tc = pytest.mark.skipif(not _tc_capable(), reason="needs an sm_80+ CUDA device")


class _tensor_cores:
    """Sets ember._C_cuda's tensor-core switch for the block (restored after)."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        from ember import _C_cuda
        self.mod = _C_cuda
        self.prev = _C_cuda._get_sdpa_tensor_cores()
        _C_cuda._set_sdpa_tensor_cores(self.on)

    def __exit__(self, *exc):
        self.mod._set_sdpa_tensor_cores(self.prev)


def close_tc(actual, ref, tol, what):
    a, r = npv(actual), np.asarray(ref, dtype=np.float64)
    assert a.shape == r.shape, (what, a.shape, r.shape)
    assert np.all(np.isfinite(a)), f"{what}: non-finite entries"
    scale = max(1.0, float(np.abs(r).max()))
    err = float(np.abs(a - r).max())
    assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol * scale:.3g}"


def tc_run(dtype, shape, causal, scale=None, seed=0, layout=None):
    """The fused op and its backward on the device (q, k, v of shape (B, H, L|S, E)) and on the
    CPU in float32 of the same 16-bit values: (device results, CPU results), each
    (out, lse, dq, dk, dv). layout(t) gives the device operands another layout."""
    B, H, L, S, E = shape
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    q, k, v = (rounded(arr((B, H, n, E), seed + i), dtype) for i, n in enumerate((L, S, S)))
    g = rounded(arr((B, H, L, E), seed + 3), dtype)
    make = layout or (lambda t: t)
    qd, kd, vd = (make(dev(et(x, dtype))) for x in (q, k, v))
    gd = dev(et(g, dtype))
    out, lse = C._scaled_dot_product_fused_attention([qd, kd, vd], None, causal, scale)
    grads = C._scaled_dot_product_fused_attention_backward(gd, qd, kd, vd, None, out, lse,
                                                           causal, scale)
    qc, kc, vc, gc = (et(x, "float32") for x in (q, k, v, g))
    cout, clse = C._scaled_dot_product_fused_attention([qc, kc, vc], None, causal, scale)
    cgrads = C._scaled_dot_product_fused_attention_backward(gc, qc, kc, vc, None, cout, clse,
                                                           causal, scale)
    return (out, lse) + tuple(grads), (cout, clse) + tuple(cgrads)


def tc_check(dtype, shape, causal, **kw):
    got, ref = tc_run(dtype, shape, causal, **kw)
    B, H, L, S, E = shape
    out, lse = got[0], got[1]
    assert out.dtype == EDT[dtype] and tuple(out.shape) == (B, H, L, E)
    assert lse.dtype == ember.float32 and tuple(lse.shape) == (B, H, L)
    tol = TC_TOL[dtype]
    close_tc(out, npv(ref[0]), tol, "out")
    close_tc(lse, npv(ref[1]), 1e-3, "lse")
    for name, a, r in zip(("dq", "dk", "dv"), got[2:], ref[2:]):
        assert a.dtype == EDT[dtype]
        close_tc(a, npv(r), tol, name)
    return got


TC_SHAPES = [  # (B, H, L, S, E)
    (2, 3, 1, 1, 64),
    (2, 2, 15, 15, 64),
    (1, 3, 64, 64, 64),
    (2, 2, 65, 65, 128),
    (1, 2, 130, 130, 64),
    (1, 2, 77, 200, 128),   # L < S
    (1, 2, 200, 77, 64),    # L > S
    (1, 1, 1, 300, 64),     # one query against a cache
    (1, 1, 300, 1, 128),    # one key
    (2, 2, 70, 70, 32),
    (1, 2, 90, 130, 96),
]


@needs_tc
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", TC_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_tensor_cores_match_cpu(dtype, causal, shape):
    tc_check(dtype, shape, causal, scale=0.8 / math.sqrt(shape[-1]))


@needs_tc
@pytest.mark.parametrize("scale", [0.02, 1.0])
def test_tensor_cores_scale(scale):
    tc_check("bfloat16", (1, 2, 100, 100, 64), True, scale=scale)
    tc_check("float16", (1, 2, 100, 120, 128), False, scale=scale)


@needs_tc
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_cores_switch_agrees(dtype):
    # Off: the CUDA-core kernels (float P and dS); both within the 16-bit tolerance, and not
    # bitwise equal (the switch really routes).
    shape, causal = (2, 3, 150, 170, 64), True
    with _tensor_cores(True):
        on, _ = tc_run(dtype, shape, causal)
    with _tensor_cores(False):
        off, _ = tc_run(dtype, shape, causal)
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), on, off):
        close_tc(a, npv(b), TC_TOL[dtype] if name != "lse" else 1e-3, f"{name}: on vs off")
    assert not np.array_equal(npv(on[0]), npv(off[0])), "the switch changed nothing"


@needs_tc
@pytest.mark.parametrize("causal", [False, True])
def test_tensor_cores_gpt2_shape(causal):
    # GPT-2 small's attention: (8, 12, 1024, 64) in bfloat16, q / k / v split off one packed
    # (B, L, 3 * 768) projection (strided heads, no copy); the first batch element against the
    # CPU, the whole against the CUDA-core kernels.
    B, H, L, E = 8, 12, 1024, 64
    qkv = rounded(arr((B, L, 3 * H * E), 0, 0.5), "bfloat16")
    packed = dev(et(qkv, "bfloat16")).reshape(B, L, 3, H, E)
    q, k, v = (packed[:, :, w].transpose(1, 2) for w in range(3))
    assert not q.is_contiguous()
    g = dev(et(rounded(arr((B, H, L, E), 1), "bfloat16"), "bfloat16"))
    runs = {}
    for on in (True, False):
        with _tensor_cores(on):
            out, lse = C._scaled_dot_product_fused_attention([q, k, v], None, causal, 0.125)
            grads = C._scaled_dot_product_fused_attention_backward(g, q, k, v, None, out, lse,
                                                                   causal, 0.125)
            runs[on] = [npv(t) for t in (out, lse) + tuple(grads)]
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), runs[True], runs[False]):
        close_tc(a, b, 2e-2 if name != "lse" else 1e-3, f"{name}: on vs off")
    qc, kc, vc, gc = (t[:1].cpu().float() for t in (q, k, v, g))
    cout, clse = C._scaled_dot_product_fused_attention([qc, kc, vc], None, causal, 0.125)
    cgrads = C._scaled_dot_product_fused_attention_backward(gc, qc, kc, vc, None, cout, clse,
                                                           causal, 0.125)
    for name, a, r in zip(("out", "lse", "dq", "dk", "dv"), runs[True], (cout, clse) + cgrads):
        close_tc(a[:1], npv(r), 2e-2 if name != "lse" else 1e-3, f"{name} vs CPU")


@needs_tc
def test_tensor_cores_layouts():
    # Operands the kernels read in place (heads of a packed projection) and ones they copy first
    # (a last dim with stride 2; data 2 bytes off a 16-byte boundary).
    def split(t):
        b, h, n, e = t.shape
        return t.transpose(1, 2).contiguous().reshape(b, n, h * e).reshape(b, n, h, e) \
            .transpose(1, 2)

    def cols(t):
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)

    def offset(t):  # t's values at storage offset 1 (the data pointer 2 bytes off alignment)
        b, h, n, e = t.shape
        wide = ember.zeros(b * h * n * e + 1, dtype=t.dtype, device=t.device)
        wide[1:] = t.reshape(-1)
        return wide[1:].reshape(b, h, n, e)
    for make in (split, cols, offset):
        tc_check("bfloat16", (2, 3, 70, 70, 64), True, layout=make)
        tc_check("float16", (1, 2, 40, 90, 128), False, layout=make)


@needs_tc
def test_tensor_cores_deterministic():
    shape = (2, 4, 150, 170, 64)
    a, _ = tc_run("bfloat16", shape, False)
    b, _ = tc_run("bfloat16", shape, False)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(npv(x), npv(y))


@needs_tc
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_cores_autograd(dtype):
    # Through F.scaled_dot_product_attention (the fused op and its backward) against float64.
    autograd_check(dtype, (2, 4, 97, 64), (2, 4, 97, 64), (2, 4, 97, 64), is_causal=True,
                   ref_dtype="bfloat16")
    autograd_check(dtype, (2, 3, 50, 128), (2, 3, 81, 128), (2, 3, 81, 128), is_causal=False,
                   ref_dtype="bfloat16")


@needs_tc
def test_tensor_cores_out_of_scope_unchanged():
    # A mask, E = 80, E != Ev, float32: the CUDA-core kernels whatever the switch (bitwise the same
    # results), and correct.
    def run(dtype, qs, ks, vs, mask=None, causal=False):
        q, k, v = (dev(et(arr(s, i), dtype)) for i, s in enumerate((qs, ks, vs)))
        g = dev(et(arr(qs[:-1] + (vs[-1],), 3), dtype))
        m = None if mask is None else dev(ember.tensor(mask))
        res = []
        for on in (True, False):
            with _tensor_cores(on):
                out, lse = C._scaled_dot_product_fused_attention([q, k, v], m, causal, 0.3)
                grads = C._scaled_dot_product_fused_attention_backward(g, q, k, v, m, out, lse,
                                                                       causal, 0.3)
                res.append([npv(t) for t in (out, lse) + tuple(grads)])
        for a, b in zip(*res):
            np.testing.assert_array_equal(a, b)
        r_out, r_lse, r_grads = ref_attention(*(npv(t) for t in (q, k, v)), mask=mask,
                                              causal=causal, scale=0.3, dout=npv(g))
        tol = "float32" if dtype == "float32" else dtype
        close(res[0][0], r_out, tol, "out")
        for name, a, r in zip("qkv", res[0][2:], r_grads):
            close(a, r, tol, f"d{name}")
    keep = np.random.default_rng(0).uniform(size=(40, 50)) > 0.3
    keep[:, 0] = True
    run("bfloat16", (2, 2, 40, 64), (2, 2, 50, 64), (2, 2, 50, 64), mask=keep)
    run("float16", (2, 2, 40, 80), (2, 2, 50, 80), (2, 2, 50, 80), causal=True)
    run("bfloat16", (2, 2, 40, 64), (2, 2, 50, 64), (2, 2, 50, 32))
    run("float32", (2, 2, 40, 64), (2, 2, 50, 64), (2, 2, 50, 64), causal=True)


# ---- the mma.sync kernels (nn_attention_mma.cu) and the WMMA ones, A / B ---------------------------
# The tensor-core calls take the mma.sync kernels unless ember._C_cuda._set_sdpa_mma(False) sends
# them to the WMMA kernels of nn_attention_tc.cu. Both settings against the CPU fused op in float32
# of the same 16-bit values, forward and backward.


class _mma:
    """Sets ember._C_cuda's mma switch for the block (restored after)."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        from ember import _C_cuda
        self.mod = _C_cuda
        self.prev = _C_cuda._get_sdpa_mma()
        _C_cuda._set_sdpa_mma(self.on)

    def __exit__(self, *exc):
        self.mod._set_sdpa_mma(self.prev)


MMA_SIZES = (1, 15, 64, 65, 130, 1000)
MMA_SHAPES = (  # (B, H, L, S, E): every size with itself, and L != S both ways
    [(1, 2, n, n, 64) for n in MMA_SIZES]
    + [(1, 2, n, n, 128) for n in MMA_SIZES]
    + [(2, 1, 15, 130, 64), (2, 1, 130, 15, 128), (1, 2, 65, 1, 64), (1, 2, 1, 65, 128),
       (1, 1, 64, 1000, 128), (1, 1, 1000, 65, 64), (1, 2, 70, 70, 32), (1, 2, 90, 130, 96),
       (1, 2, 130, 65, 96), (1, 2, 33, 100, 32)])


@needs_tc
@pytest.mark.parametrize("mma", [True, False], ids=["mma", "wmma"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", MMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_mma_switch_matches_cpu(mma, dtype, causal, shape):
    with _mma(mma):
        tc_check(dtype, shape, causal)


@needs_tc
@pytest.mark.parametrize("mma", [True, False], ids=["mma", "wmma"])
@pytest.mark.parametrize("scale", [0.05, 1.5])
def test_mma_switch_scale(mma, scale):
    with _mma(mma):
        tc_check("bfloat16", (1, 2, 130, 100, 64), True, scale=scale)
        tc_check("float16", (1, 2, 65, 130, 128), False, scale=scale)


@needs_tc
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mma_switch_routes(dtype):
    # Both within the 16-bit tolerance of each other, not bitwise equal (the switch routes), and
    # each setting deterministic.
    shape, causal = (2, 3, 150, 170, 64), True
    runs = {}
    for on in (True, False):
        with _mma(on):
            runs[on], _ = tc_run(dtype, shape, causal)
            again, _ = tc_run(dtype, shape, causal)
        for x, y in zip(runs[on], again):
            np.testing.assert_array_equal(npv(x), npv(y))
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), runs[True], runs[False]):
        close_tc(a, npv(b), TC_TOL[dtype] if name != "lse" else 1e-3, f"{name}: mma vs wmma")
    assert not np.array_equal(npv(runs[True][2]), npv(runs[False][2])), "the switch routes nothing"


@needs_tc
@pytest.mark.parametrize("mma", [True, False], ids=["mma", "wmma"])
@pytest.mark.parametrize("causal", [True, False])
def test_mma_switch_gpt2_packed(mma, causal):
    # GPT-2 small's attention at B = 2: (2, 12, 1024, 64) bfloat16, q / k / v the heads of one
    # packed (B, L, 3 * 768) projection (read in place), against the CPU in float32.
    B, H, L, E = 2, 12, 1024, 64
    qkv = rounded(arr((B, L, 3 * H * E), 0, 0.5), "bfloat16")
    packed = dev(et(qkv, "bfloat16")).reshape(B, L, 3, H, E)
    q, k, v = (packed[:, :, w].transpose(1, 2) for w in range(3))
    assert not q.is_contiguous()
    g = dev(et(rounded(arr((B, H, L, E), 1), "bfloat16"), "bfloat16"))
    with _mma(mma):
        out, lse = C._scaled_dot_product_fused_attention([q, k, v], None, causal, 0.125)
        grads = C._scaled_dot_product_fused_attention_backward(g, q, k, v, None, out, lse,
                                                               causal, 0.125)
    qc, kc, vc, gc = (t.cpu().float() for t in (q, k, v, g))
    cout, clse = C._scaled_dot_product_fused_attention([qc, kc, vc], None, causal, 0.125)
    cgrads = C._scaled_dot_product_fused_attention_backward(gc, qc, kc, vc, None, cout, clse,
                                                           causal, 0.125)
    for name, a, r in zip(("out", "lse", "dq", "dk", "dv"), (out, lse) + tuple(grads),
                          (cout, clse) + tuple(cgrads)):
        close_tc(a, npv(r), 2e-2 if name != "lse" else 1e-3, f"{name} vs CPU")


@needs_tc
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mma_autograd(dtype):
    # F.scaled_dot_product_attention through the mma kernels against float64 (default switch).
    from ember import _C_cuda
    assert _C_cuda._get_sdpa_mma()
    autograd_check(dtype, (2, 3, 130, 96), (2, 3, 65, 96), (2, 3, 65, 96), is_causal=True,
                   ref_dtype="bfloat16")
