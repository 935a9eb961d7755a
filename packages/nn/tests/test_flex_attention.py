"""ember.nn.attention.flex_attention against torch 2.13's FlexAttention on the CPU (forward; torch
has no CPU backward) and against a float64 NumPy softmax-attention reference (forward and, through
finite differences, gradients). Tests that need torch skip without it."""

from __future__ import annotations

import math
import warnings

import ember
import numpy as np
import pytest
from ember.nn.attention import flex_attention as fa
from ember.nn.attention.flex_attention import (
    AuxOutput,
    AuxRequest,
    BlockMask,
    and_masks,
    create_block_mask,
    create_mask,
    flex_attention,
    noop_mask,
    or_masks,
)

RNG = np.random.default_rng(1234)


def _torch():
    return pytest.importorskip("torch")


def _maybe_torch():
    """torch, or None where it is not installed (the comparisons with it are then left out)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _tflex():
    """torch's flex_attention module (skips the test without torch)."""
    _torch()
    from torch.nn.attention import flex_attention as tfa

    return tfa


def _maybe_tflex():
    return _tflex() if _maybe_torch() is not None else None


def _np(t) -> np.ndarray:
    """An ember or torch tensor (or an array) as a float64 (or bool/int) NumPy array."""
    if isinstance(t, np.ndarray):
        return t.astype(np.float64) if t.dtype.kind == "f" else t
    if hasattr(t, "detach"):
        t = t.detach()
    if hasattr(t, "dtype") and str(t.dtype).endswith(("bfloat16", "float16")):
        t = t.float()
    a = t.numpy()
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _pair(*shape, dtype="float32"):
    """The same random data as an ember tensor and a torch tensor (None without torch)."""
    torch = _maybe_torch()
    a = RNG.standard_normal(shape)
    e = ember.from_numpy(a).to(getattr(ember, dtype))
    t = None if torch is None else torch.from_numpy(a).to(getattr(torch, dtype))
    return e, t


def _qkv(B=2, Hq=3, L=37, S=45, E=16, Ev=8, Hkv=None, dtype="float32"):
    Hkv = Hq if Hkv is None else Hkv
    q, tq = _pair(B, Hq, L, E, dtype=dtype)
    k, tk = _pair(B, Hkv, S, E, dtype=dtype)
    v, tv = _pair(B, Hkv, S, Ev, dtype=dtype)
    return (q, k, v), (tq, tk, tv)


def _run_torch(*args, **kwargs):
    """torch's flex_attention, its warnings (no torch.compile, deprecated return_lse) silenced."""
    tfa = _tflex()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tfa.flex_attention(*args, **kwargs)


def _reference(q, k, v, scale=None, bias=None, mask=None, gqa=1):
    """float64 softmax attention in NumPy: ``bias`` (broadcast to (B, H, L, S)) is added to the
    scaled scores, ``mask`` (bool, True attends) masks; fully masked rows give 0 / lse -inf."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    k, v = np.repeat(k, gqa, axis=1), np.repeat(v, gqa, axis=1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if bias is not None:
        s = s + bias
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(s - m)
    tot = w.sum(-1, keepdims=True)
    p = w / np.where(tot > 0, tot, 1.0)
    with np.errstate(divide="ignore"):
        lse = np.where(tot > 0, np.log(np.where(tot > 0, tot, 1.0)) + m, -np.inf)[..., 0]
    return p @ v, lse


def _close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


# ----------------------------------------------------------------------------------------------
# Forward against torch and the NumPy reference


def test_no_mods_matches_torch_and_reference():
    (q, k, v), (tq, tk, tv) = _qkv()
    out, aux = flex_attention(q, k, v, return_aux=AuxRequest(lse=True))
    tout, tlse = _run_torch(tq, tk, tv, return_lse=True)
    _close(out, tout)
    _close(aux.lse, tlse)
    ref, ref_lse = _reference(_np(q), _np(k), _np(v))
    _close(out, ref)
    _close(aux.lse, ref_lse)
    assert isinstance(aux, AuxOutput) and aux.max_scores is None
    # scale given explicitly, and the same as SDPA
    out2 = flex_attention(q, k, v, scale=0.3)
    _close(out2, _run_torch(tq, tk, tv, scale=0.3))
    _close(out2, ember.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3))


def _compare_mask(mask_mod, B, H, L, S, block=16, score_mod=None, tscore_mod=None,
                  tmask_mod=None, **kw):
    """flex_attention with create_block_mask(mask_mod) and the score_mod; where torch is
    installed, the block mask's tensors and the outputs are compared with torch's."""
    (q, k, v), (tq, tk, tv) = _qkv(B=B or 1, Hq=kw.pop("Hq", 2), L=L, S=S, **kw)
    bm = create_block_mask(mask_mod, B, H, L, S, device="cpu", BLOCK_SIZE=block)
    out, aux = flex_attention(q, k, v, score_mod=score_mod, block_mask=bm,
                              return_aux=AuxRequest(lse=True))
    tfa = _maybe_tflex()
    if tfa is None:
        return (q, k, v), out, aux.lse
    tbm = tfa.create_block_mask(tmask_mod or mask_mod, B, H, L, S, device="cpu",
                                BLOCK_SIZE=block)
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                 "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"):
        np.testing.assert_array_equal(_np(getattr(bm, name)), _np(getattr(tbm, name)), name)
    assert bm.shape == tbm.shape and bm.BLOCK_SIZE == tbm.BLOCK_SIZE
    assert bm.sparsity() == pytest.approx(tbm.sparsity())
    np.testing.assert_array_equal(_np(bm.to_dense()), _np(tbm.to_dense()))
    tout, tlse = _run_torch(tq, tk, tv, score_mod=tscore_mod or score_mod, block_mask=tbm,
                            return_lse=True)
    _close(out, tout)
    _close(aux.lse, tlse)
    return (q, k, v), out, aux.lse


def test_causal_block_mask_matches_torch():
    (q, k, v), out, lse = _compare_mask(causal, None, None, 37, 45)
    tri = np.tril(np.ones((37, 45), dtype=bool))
    ref, ref_lse = _reference(_np(q), _np(k), _np(v), mask=tri)
    _close(out, ref)
    _close(lse, ref_lse)


def test_sliding_window_and_masks_matches_torch():
    def window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= 7

    tfa = _maybe_tflex()
    (q, k, v), out, _ = _compare_mask(and_masks(causal, window), 1, 1, 40, 40, block=8,
                                      tmask_mod=tfa and tfa.and_masks(causal, window))
    i, j = np.arange(40)[:, None], np.arange(40)[None, :]
    ref, _ = _reference(_np(q), _np(k), _np(v), mask=(i >= j) & (i - j <= 7))
    _close(out, ref)


def test_or_masks_prefix_lm_matches_torch():
    def prefix(b, h, q_idx, kv_idx):
        return kv_idx < 10

    tfa = _maybe_tflex()
    (q, k, v), out, _ = _compare_mask(or_masks(causal, prefix), 2, 1, 33, 33, block=8,
                                      tmask_mod=tfa and tfa.or_masks(causal, prefix))
    i, j = np.arange(33)[:, None], np.arange(33)[None, :]
    ref, _ = _reference(_np(q), _np(k), _np(v), mask=(i >= j) | (j < 10))
    _close(out, ref)


def test_document_mask_closing_over_tensor_matches_torch():
    torch = _maybe_torch()
    docs = np.array([[0] * 10 + [1] * 15 + [2] * 7, [0] * 20 + [1] * 12])
    doc_e, doc_t = ember.from_numpy(docs), torch and torch.from_numpy(docs)

    def doc_mask(b, h, q_idx, kv_idx):
        return (doc_e[b, q_idx] == doc_e[b, kv_idx]) & (q_idx >= kv_idx)

    def tdoc_mask(b, h, q_idx, kv_idx):
        return (doc_t[b, q_idx] == doc_t[b, kv_idx]) & (q_idx >= kv_idx)

    (q, k, v), out, _ = _compare_mask(doc_mask, 2, None, 32, 32, block=8, tmask_mod=tdoc_mask)
    same = docs[:, None, :, None] == docs[:, None, None, :]
    ref, _ = _reference(_np(q), _np(k), _np(v), mask=same & np.tril(np.ones((32, 32), bool)))
    _close(out, ref)


def test_alibi_score_mod_matches_torch():
    torch = _maybe_torch()
    H = 4
    slopes = [2 ** (-8 * (i + 1) / H) for i in range(H)]
    se, st = ember.tensor(slopes), torch and torch.tensor(slopes)

    def alibi(score, b, h, q_idx, kv_idx):
        return score + se[h] * (kv_idx - q_idx)

    def talibi(score, b, h, q_idx, kv_idx):
        return score + st[h] * (kv_idx - q_idx)

    (q, k, v), out, _ = _compare_mask(causal, None, None, 30, 30, block=8, score_mod=alibi,
                                      tscore_mod=talibi, Hq=H)
    i, j = np.arange(30)[:, None], np.arange(30)[None, :]
    bias = np.array(slopes)[None, :, None, None] * (j - i)
    ref, _ = _reference(_np(q), _np(k), _np(v), bias=bias, mask=i >= j)
    _close(out, ref)


def test_score_mod_with_where_and_softcap_matches_torch():
    torch = _torch()
    (q, k, v), (tq, tk, tv) = _qkv(L=20, S=24)

    def mod(fw):
        def score_mod(score, b, h, q_idx, kv_idx):
            capped = 5.0 * fw.tanh(score / 5.0)
            return fw.where((q_idx + kv_idx + h) % 3 == 0, capped * 2, capped)
        return score_mod

    _close(flex_attention(q, k, v, score_mod=mod(ember)), _run_torch(tq, tk, tv,
                                                                     score_mod=mod(torch)))


def test_relative_bias_table_forward_matches_torch():
    torch = _torch()
    L = S = 24
    table = RNG.standard_normal(L + S - 1)
    te, tt = ember.from_numpy(table).float(), torch.from_numpy(table).float()

    def rel(t):
        return lambda score, b, h, q_idx, kv_idx: score + t[q_idx - kv_idx + S - 1]

    (q, k, v), (tq, tk, tv) = _qkv(L=L, S=S)
    _close(flex_attention(q, k, v, score_mod=rel(te)),
           _run_torch(tq, tk, tv, score_mod=rel(tt)))


def test_gqa_matches_torch():
    (q, k, v), (tq, tk, tv) = _qkv(Hq=6, Hkv=2, L=17, S=19)
    out, aux = flex_attention(q, k, v, enable_gqa=True, return_aux=AuxRequest(lse=True))
    tout, tlse = _run_torch(tq, tk, tv, enable_gqa=True, return_lse=True)
    _close(out, tout)
    _close(aux.lse, tlse)
    ref, _ = _reference(_np(q), _np(k), _np(v), gqa=3)
    _close(out, ref)
    # with a head-dependent mask: query head h must see its own index, not the kv head's
    tfa = _tflex()

    def odd_heads_causal(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) | (h % 2 == 1)

    bm = create_block_mask(odd_heads_causal, None, 6, 17, 19, device="cpu", BLOCK_SIZE=4)
    tbm = tfa.create_block_mask(odd_heads_causal, None, 6, 17, 19, device="cpu", BLOCK_SIZE=4)
    _close(flex_attention(q, k, v, block_mask=bm, enable_gqa=True),
           _run_torch(tq, tk, tv, block_mask=tbm, enable_gqa=True))


def test_return_lse_is_natural_log_and_deprecated():
    (q, k, v), (tq, tk, tv) = _qkv(B=1, Hq=2, L=5, S=6)
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        out, lse = flex_attention(q, k, v, return_lse=True)
    _, tlse = _run_torch(tq, tk, tv, return_lse=True)
    _close(lse, tlse)
    s = _np(q) @ np.swapaxes(_np(k), -1, -2) / 4.0
    _close(lse, np.log(np.exp(s).sum(-1)))
    assert lse.shape == (1, 2, 5) and lse.dtype == ember.float32
    with pytest.raises(ValueError, match="Cannot specify both return_lse and return_aux"):
        flex_attention(q, k, v, return_lse=True, return_aux=AuxRequest(lse=True))
    # max_scores (torch has it on CUDA only): the row max of the modified, masked scores
    _, aux = flex_attention(q, k, v, score_mod=lambda s_, b, h, i, j: s_ * 2,
                            return_aux=AuxRequest(max_scores=True))
    assert aux.lse is None
    _close(aux.max_scores, (2 * s).max(-1))


def test_fully_masked_rows_give_zero_and_neg_inf_lse():
    def late(b, h, q_idx, kv_idx):
        return kv_idx >= q_idx + 4  # rows q_idx >= S - 4 see nothing

    (q, k, v), out, lse = _compare_mask(late, None, None, 12, 12, block=4)
    o, lse_np = _np(out), _np(lse)
    assert np.all(o[:, :, 8:] == 0) and np.all(np.isneginf(lse_np[:, :, 8:]))
    assert np.all(np.isfinite(lse_np[:, :, :8]))
    # every row masked, and gradients stay finite (no NaN from 0/0)
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    bm = create_block_mask(lambda b, h, i, j: i < 0, None, None, 12, 12, device="cpu",
                           BLOCK_SIZE=4)
    assert bm.sparsity() == 100.0
    out, aux = flex_attention(qg, kg, vg, block_mask=bm, return_aux=AuxRequest(lse=True))
    assert np.all(_np(out) == 0) and np.all(np.isneginf(_np(aux.lse)))
    (out.sum() + ember.where(ember.isneginf(aux.lse), 0.0, aux.lse).sum()).backward()
    for t in (qg, kg, vg):
        assert np.all(_np(t.grad) == 0)
    # a score_mod that gives -inf masks too
    out = flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: ember.where(
        i >= 6, float("-inf"), s))
    assert np.all(_np(out)[:, :, 6:] == 0)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float16", 2e-3),
                                       ("bfloat16", 1.6e-2)])
def test_dtypes_match_torch(dtype, tol):
    (q, k, v), (tq, tk, tv) = _qkv(B=1, Hq=2, L=20, S=24, dtype=dtype)
    tfa = _tflex()
    bm = create_block_mask(causal, None, None, 20, 24, device="cpu", BLOCK_SIZE=8)
    tbm = tfa.create_block_mask(causal, None, None, 20, 24, device="cpu", BLOCK_SIZE=8)
    out, aux = flex_attention(q, k, v, block_mask=bm, return_aux=AuxRequest(lse=True))
    tout, tlse = _run_torch(tq, tk, tv, block_mask=tbm, return_lse=True)
    assert out.dtype == getattr(ember, dtype)
    assert str(aux.lse.dtype).split(".")[-1] == str(tlse.dtype).split(".")[-1]
    _close(out, tout, rtol=tol, atol=tol)
    _close(aux.lse, tlse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [("float16", 5e-3), ("bfloat16", 4e-2)])
def test_half_precision_gradients_follow_float64(dtype, tol):
    data = [RNG.standard_normal(s) for s in ((1, 2, 12, 8), (1, 2, 12, 8), (1, 2, 12, 4))]
    bm = create_block_mask(causal, None, None, 12, 12, device="cpu", BLOCK_SIZE=4)
    upstream = RNG.standard_normal((1, 2, 12, 4))

    def grads(dt):
        q, k, v = (ember.from_numpy(a).to(dt).requires_grad_() for a in data)
        table = ember.from_numpy(np.linspace(-1, 1, 23)).float().requires_grad_()
        out = flex_attention(q, k, v, block_mask=bm,
                             score_mod=lambda s, b, h, i, j: s + table[i - j + 11])
        (out.float() * ember.from_numpy(upstream).float()).sum().backward()
        assert out.dtype == dt and q.grad.dtype == dt and table.grad.dtype == ember.float32
        return [_np(t.grad) for t in (q, k, v, table)]

    for low, exact in zip(grads(getattr(ember, dtype)), grads(ember.float64)):
        np.testing.assert_allclose(low, exact, rtol=tol, atol=tol * 4)


def test_kv_batch_broadcast_with_block_mask_matches_torch():
    tfa = _tflex()
    q, tq = _pair(3, 2, 8, 16)
    k, tk = _pair(1, 2, 8, 16)
    v, tv = _pair(1, 2, 8, 4)
    bm = create_block_mask(causal, 3, None, 8, 8, device="cpu", BLOCK_SIZE=4)
    tbm = tfa.create_block_mask(causal, 3, None, 8, 8, device="cpu", BLOCK_SIZE=4)
    _close(flex_attention(q, k, v, block_mask=bm), _run_torch(tq, tk, tv, block_mask=tbm))


def test_create_mask_matches_torch():
    tfa = _tflex()

    def mod(score, b, h, q_idx, kv_idx):
        return ember.where(q_idx >= kv_idx + h, score, float("-inf"))

    def tmod(score, b, h, q_idx, kv_idx):
        import torch
        return torch.where(q_idx >= kv_idx + h, score, float("-inf"))

    np.testing.assert_array_equal(_np(create_mask(mod, None, 3, 5, 6, "cpu")),
                                  _np(tfa.create_mask(tmod, None, 3, 5, 6, "cpu")))
    np.testing.assert_array_equal(_np(create_mask(causal, 2, None, 5, 6, "cpu")),
                                  _np(tfa.create_mask(causal, 2, None, 5, 6, "cpu")))
    assert create_mask(noop_mask, 2, 3, 4, 5, "cpu").shape == (2, 3, 4, 5)


# ----------------------------------------------------------------------------------------------
# Gradients


def test_relative_bias_table_gradients_float64():
    L, S, E = 6, 7, 4
    q, k, v = (ember.from_numpy(RNG.standard_normal(s)).requires_grad_()
               for s in ((1, 2, L, E), (1, 2, S, E), (1, 2, S, 3)))
    table = ember.from_numpy(RNG.standard_normal(L + S - 1)).requires_grad_()
    bm = create_block_mask(causal, None, None, L, S, device="cpu", BLOCK_SIZE=2)

    def attend(q, k, v, table):
        def rel(score, b, h, q_idx, kv_idx):
            return score + table[q_idx - kv_idx + S - 1]
        out, aux = flex_attention(q, k, v, score_mod=rel, block_mask=bm,
                                  return_aux=AuxRequest(lse=True))
        return out, aux.lse

    assert ember.autograd.gradcheck(attend, (q, k, v, table), eps=1e-6, atol=1e-6)
    # and the forward equals the reference with the bias gathered in NumPy
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    ref, ref_lse = _reference(_np(q), _np(k), _np(v), bias=_np(table)[i - j + S - 1],
                              mask=i >= j)
    out, lse = attend(q, k, v, table)
    _close(out, ref, rtol=1e-12, atol=1e-12)
    _close(lse, ref_lse, rtol=1e-12, atol=1e-12)
    # the table's gradient reaches only the offsets a causal mask uses (q_idx - kv_idx >= 0)
    out.sum().backward()
    g = _np(table.grad)
    assert np.all(g[:S - 1] == 0) and np.any(g[S - 1:] != 0)


def test_gradients_gqa_alibi_and_fully_masked_rows_float64():
    slopes = ember.tensor([0.5, 0.25, 0.125, 0.0625], dtype=ember.float64).requires_grad_()
    q = ember.from_numpy(RNG.standard_normal((2, 4, 5, 3))).requires_grad_()
    k = ember.from_numpy(RNG.standard_normal((2, 2, 6, 3))).requires_grad_()
    v = ember.from_numpy(RNG.standard_normal((2, 2, 6, 2))).requires_grad_()
    bm = create_block_mask(lambda b, h, i, j: (j <= i) & (i != 2 + b), 2, None, 5, 6,
                           device="cpu", BLOCK_SIZE=2)

    def attend(q, k, v, slopes):
        return flex_attention(q, k, v, block_mask=bm, enable_gqa=True,
                              score_mod=lambda s, b, h, i, j: s - slopes[h] * (i - j))

    assert ember.autograd.gradcheck(attend, (q, k, v, slopes), eps=1e-6, atol=1e-6)
    out = attend(q, k, v, slopes)
    assert np.all(_np(out)[0, :, 2] == 0) and np.all(_np(out)[1, :, 3] == 0)


def test_bias_tensor_indexed_by_all_four_indices_matches_plain_attention_gradients():
    # score + bias[b, h, q_idx, kv_idx]: the gradients equal those of softmax attention built from
    # ember's own ops (matmul, softmax), for q, k, v and the captured bias
    B, H, L, S, E = 2, 3, 5, 6, 4
    q, k, v, bias = (ember.from_numpy(RNG.standard_normal(s)).requires_grad_()
                     for s in ((B, H, L, E), (B, H, S, E), (B, H, S, 3), (B, H, L, S)))
    out = flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + bias[b, h, i, j],
                         scale=0.7)
    upstream = ember.from_numpy(RNG.standard_normal((B, H, L, 3)))
    grads = ember.autograd.grad((out * upstream).sum(), (q, k, v, bias))
    plain = ember.softmax(q @ k.transpose(-1, -2) * 0.7 + bias, dim=-1) @ v
    plain_grads = ember.autograd.grad((plain * upstream).sum(), (q, k, v, bias))
    _close(out, plain, rtol=1e-12, atol=1e-12)
    for g, pg in zip(grads, plain_grads):
        _close(g, pg, rtol=1e-10, atol=1e-12)


def test_chunked_queries_give_the_same_values_and_gradients(monkeypatch):
    q, k, v = (ember.from_numpy(RNG.standard_normal(s)).requires_grad_()
               for s in ((2, 2, 19, 4), (2, 2, 23, 4), (2, 2, 23, 5)))
    bias = ember.from_numpy(RNG.standard_normal(2)).requires_grad_()
    bm = create_block_mask(lambda b, h, i, j: (j <= i + 2) & (i < 17), 2, 2, 19, 23,
                           device="cpu", BLOCK_SIZE=(4, 8))

    def run():
        out, aux = flex_attention(q, k, v, block_mask=bm, score_mod=lambda s, b, h, i, j: s
                                  + bias[h], return_aux=AuxRequest(lse=True, max_scores=True))
        for t in (q, k, v, bias):
            t.grad = None
        (out * out).sum().backward()
        return [_np(x) for x in (out, aux.lse, aux.max_scores, q.grad, k.grad, v.grad,
                                 bias.grad)]

    whole = run()
    monkeypatch.setattr(fa, "_CHUNK_ELEMENTS", 2 * 2 * 23 * 3)  # 3 query rows a chunk
    chunked = run()
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # create_block_mask evaluates the mask_mod a query block at a time: same layout
    bm2 = create_block_mask(lambda b, h, i, j: (j <= i + 2) & (i < 17), 2, 2, 19, 23,
                            device="cpu", BLOCK_SIZE=(4, 8))
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):
        np.testing.assert_array_equal(_np(getattr(bm, name)), _np(getattr(bm2, name)))


def test_chunks_skip_keys_outside_their_blocks_without_changing_results(monkeypatch):
    # a sliding window over 64 keys in blocks of 8, 4 query rows a chunk: each chunk computes only
    # the keys of its blocks; values and gradients equal the dense masked softmax attention
    monkeypatch.setattr(fa, "_CHUNK_ELEMENTS", 2 * 64 * 4)
    L = S = 64
    q, k, v = (ember.from_numpy(RNG.standard_normal(s)).requires_grad_()
               for s in ((1, 2, L, 4), (1, 2, S, 4), (1, 2, S, 3)))

    def window(b, h, i, j):
        return (i >= j) & (i - j < 10 + 4 * h)

    bm = create_block_mask(window, None, 2, L, S, device="cpu", BLOCK_SIZE=8)
    out, aux = flex_attention(q, k, v, block_mask=bm, return_aux=AuxRequest(lse=True))
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    allowed = (i >= j) & (i - j < 10 + 4 * np.arange(2)[:, None, None])
    ref, ref_lse = _reference(_np(q), _np(k), _np(v), mask=allowed[None])
    _close(out, ref, rtol=1e-12, atol=1e-12)
    _close(aux.lse, ref_lse, rtol=1e-12, atol=1e-12)
    dense = ember.where(ember.from_numpy(allowed), q @ k.transpose(-1, -2) * 0.5,
                        float("-inf"))
    plain = ember.softmax(dense, dim=-1) @ v
    grads = ember.autograd.grad(out.pow(2).sum(), (q, k, v))
    for g, pg in zip(grads, ember.autograd.grad(plain.pow(2).sum(), (q, k, v))):
        _close(g, pg, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# BlockMask


def test_block_mask_sparsity_dense_repr_and_str_match_torch():
    tfa = _tflex()
    args = (causal, 2, 3, 40, 24)
    bm = create_block_mask(*args, device="cpu", BLOCK_SIZE=(16, 8))
    tbm = tfa.create_block_mask(*args, device="cpu", BLOCK_SIZE=(16, 8))
    assert bm.shape == tbm.shape == (2, 3, 40, 24)
    assert bm.numel() == tbm.numel()
    assert bm.sparsity() == pytest.approx(tbm.sparsity())
    assert bm.to_dense().dtype == ember.int32
    np.testing.assert_array_equal(_np(bm.to_dense()), _np(tbm.to_dense()))
    assert repr(bm) == repr(tbm).replace("torch.", "ember.")
    assert "mask_mod=causal" in repr(bm) and "sparsity=" in repr(bm)
    assert str(bm) == str(tbm)
    assert bm.to_string(grid_size=2, limit=2) == tbm.to_string(grid_size=2, limit=2)
    flat, nested = bm.as_tuple(), bm.as_tuple(flatten=False)
    assert flat[:2] == (40, 24) and flat[-3:-1] == (16, 8) and flat[-1] is causal
    assert nested[0] == (40, 24) and nested[-2] == (16, 8) and len(flat) == len(nested) + 2
    assert len(flat) == len(tbm.as_tuple())
    # separate_full_blocks=False lists every computed block as partial
    merged = create_block_mask(*args, device="cpu", BLOCK_SIZE=(16, 8),
                               separate_full_blocks=False)
    assert merged.full_kv_num_blocks is None
    np.testing.assert_array_equal(_np(merged.to_dense()), _np(bm.to_dense()))


def test_block_mask_slicing_adjust_and_to_match_torch():
    tfa = _tflex()
    bm = create_block_mask(causal, 2, 3, 40, 24, device="cpu", BLOCK_SIZE=(16, 8))
    tbm = tfa.create_block_mask(causal, 2, 3, 40, 24, device="cpu", BLOCK_SIZE=(16, 8))
    for index in (0, (1, 2), (slice(0, 2), slice(1, 2)), (-1,)):
        mine, theirs = bm[index], tbm[index]
        assert mine.shape == theirs.shape
        np.testing.assert_array_equal(_np(mine.to_dense()), _np(theirs.to_dense()))
    with pytest.raises(RuntimeError, match="sliced BlockMask"):
        bm[0].mask_mod(*(ember.tensor(0),) * 4)
    q = ember.zeros(1, 3, 40, 4)
    with pytest.raises(RuntimeError, match="sliced BlockMask"):
        flex_attention(q, q[:, :, :24], q[:, :, :24], block_mask=bm[0])
    small, tsmall = bm._adjust(20, 16), tbm._adjust(20, 16)
    assert small.shape == tsmall.shape == (2, 3, 20, 16)
    np.testing.assert_array_equal(_np(small.to_dense()), _np(tsmall.to_dense()))
    assert small.mask_mod is causal
    moved = bm.to("cpu")
    assert moved.kv_num_blocks.device == ember.device("cpu") and moved.mask_mod is causal
    np.testing.assert_array_equal(_np(moved.kv_indices), _np(bm.kv_indices))


def test_from_kv_blocks_applies_mask_mod_only_on_partial_blocks():
    # 2x2 blocks of 4: row 0 computes block 1 as a partial block (mask_mod q >= kv: all False
    # there), row 1 computes block 0 as a full block (mask_mod skipped) and nothing else
    i32 = ember.int32
    bm = BlockMask.from_kv_blocks(
        ember.tensor([[[1, 0]]], dtype=i32), ember.tensor([[[[1, 0], [0, 1]]]], dtype=i32),
        ember.tensor([[[0, 1]]], dtype=i32), ember.tensor([[[[0, 1], [0, 1]]]], dtype=i32),
        BLOCK_SIZE=4, mask_mod=causal)
    assert bm.shape == (1, 1, 8, 8) and bm.sparsity() == 50.0
    assert bm.to_dense().tolist() == [[[[0, 1], [1, 0]]]]
    assert bm.q_num_blocks.tolist() == [[[0, 1]]] and bm.full_q_num_blocks.tolist() == [[[1, 0]]]
    q, k, v = (ember.from_numpy(RNG.standard_normal(s)) for s in ((1, 1, 8, 4), (1, 1, 8, 4),
                                                                  (1, 1, 8, 2)))
    mask = np.zeros((8, 8), dtype=bool)
    mask[4:, :4] = True
    ref, ref_lse = _reference(_np(q), _np(k), _np(v), mask=mask)
    out, aux = flex_attention(q, k, v, block_mask=bm, return_aux=AuxRequest(lse=True))
    _close(out, ref, rtol=1e-12, atol=1e-12)
    _close(aux.lse, ref_lse, rtol=1e-12, atol=1e-12)


def test_create_block_mask_arguments():
    with pytest.raises(AssertionError, match="requires a mask_mod"):
        create_block_mask(lambda s, b, h, i, j: s, 1, 1, 8, 8, device="cpu")
    with pytest.warns(DeprecationWarning, match="_compile"):
        create_block_mask(causal, 1, 1, 8, 8, device="cpu", BLOCK_SIZE=4, _compile=True)
    with pytest.raises(ValueError, match="Q_LEN"):
        create_block_mask(causal, 1, 1, -1, 8, device="cpu")
    with pytest.raises(ValueError, match="dq_kv_order"):
        create_block_mask(causal, 1, 1, 8, 8, device="cpu", dq_kv_order="x")
    default = create_block_mask(causal, 1, 1, 8, 8)  # device: CUDA if available, else the CPU
    assert default.kv_num_blocks.device.type == ("cuda" if ember.cuda.is_available() else "cpu")
    assert default.BLOCK_SIZE == (128, 128) and default.to_dense().tolist() == [[[[1]]]]


# ----------------------------------------------------------------------------------------------
# Errors


def test_shape_dtype_and_argument_errors_name_flex_attention():
    q = ember.zeros(2, 4, 8, 16)
    with pytest.raises(NotImplementedError, match=r"flex_attention: .*4D.*\(4, 8, 16\)"):
        flex_attention(q[0], q[0], q[0])
    with pytest.raises(ValueError, match=r"same embedding dimension.*E=16 and E=8"):
        flex_attention(q, q[..., :8], q)
    with pytest.raises(ValueError, match=r"Hq=4 and Hkv=2\. Try setting enable_gqa"):
        flex_attention(q, q[:, :2], q[:, :2])
    with pytest.raises(ValueError, match=r"multiple of kv heads.*Hq=4 and Hkv=3"):
        flex_attention(q, q[:, :3], q[:, :3], enable_gqa=True)
    with pytest.raises(ValueError, match=r"same batch size.*Bq=2, and Bkv=1"):
        flex_attention(q, q[:1], q[:1])
    with pytest.raises(ValueError, match=r"key and value must agree.*\(2, 4, 7, 16\)"):
        flex_attention(q, q, q[:, :, :7])
    with pytest.raises(ember.DtypeNotImplementedError, match="flex_attention.*int64"):
        flex_attention(q.long(), q.long(), q.long())
    with pytest.raises(TypeError, match="flex_attention: key must be a Tensor"):
        flex_attention(q, None, q)
    bm = create_block_mask(causal, None, None, 16, 16, device="cpu", BLOCK_SIZE=8)
    with pytest.raises(ValueError, match=r"block_mask\.shape=\(1, 1, 16, 16\).*_adjust"):
        flex_attention(q, q, q, block_mask=bm)
    with pytest.raises(ValueError, match="smaller length"):
        big = ember.zeros(2, 4, 32, 16)
        flex_attention(big, big, big, block_mask=bm)
    bm3 = create_block_mask(causal, 3, None, 8, 8, device="cpu", BLOCK_SIZE=8)
    with pytest.raises(ValueError, match=r"does not broadcast.*B=2, Hq=4"):
        flex_attention(q, q, q, block_mask=bm3)
    with pytest.raises(ValueError, match="score_mod must take 5"):
        flex_attention(q, q, q, score_mod=causal)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        flex_attention(q, q, q, score_mod=lambda s, b, h, i, j: ember.zeros(3))


def test_data_dependent_control_flow_raises_a_clear_error():
    q = ember.zeros(1, 2, 8, 4)

    def branchy(score, b, h, q_idx, kv_idx):
        if q_idx >= kv_idx:
            return score
        return score - 1

    with pytest.raises(RuntimeError, match=r"score_mod uses Python control flow.*torch\.where"):
        flex_attention(q, q, q, score_mod=branchy)

    def logical(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx and kv_idx > 0

    with pytest.raises(RuntimeError, match="mask_mod uses Python control flow"):
        create_block_mask(logical, 1, 1, 8, 8, device="cpu")

    table = [0.0, 1.0]
    with pytest.raises(RuntimeError, match="score_mod uses Python control flow"):
        flex_attention(q, q, q, score_mod=lambda s, b, h, i, j: s + table[h])
    with pytest.raises(TypeError, match="must return a bool tensor"):
        create_block_mask(lambda b, h, i, j: i - j, 1, 1, 8, 8, device="cpu")


# ----------------------------------------------------------------------------------------------
# A research-style program, run unchanged with `import ember as torch` and with torch


def _program(torch, arrays):
    """Causal + sliding-window attention with a relative bias, as a model would use it (the
    module path and API are the same on both)."""
    from importlib import import_module

    fx = import_module(torch.__name__ + ".nn.attention.flex_attention")
    q, k, v = (torch.from_numpy(a).float() for a in arrays)
    B, H, L, E = q.shape
    rel = torch.linspace(-1.0, 1.0, 2 * L - 1)

    def sliding(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < 20)

    def bias(score, b, h, q_idx, kv_idx):
        return score + rel[q_idx - kv_idx + L - 1] * (h + 1)

    block_mask = fx.create_block_mask(sliding, None, None, L, L, device="cpu", BLOCK_SIZE=16)
    out, aux = fx.flex_attention(q, k, v, score_mod=bias, block_mask=block_mask,
                                 return_aux=fx.AuxRequest(lse=True))
    return out.sum(dim=-1), aux.lse, round(block_mask.sparsity(), 4)


def test_research_program_runs_unchanged_on_ember_and_torch():
    arrays = [RNG.standard_normal((2, 4, 48, 16)) for _ in range(3)]
    out, lse, sparsity = _program(ember, arrays)
    assert out.shape == (2, 4, 48) and sparsity == pytest.approx(100 * (1 - 6 / 9), abs=1e-4)
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tout, tlse, tsparsity = _program(torch, arrays)
    assert tsparsity == sparsity
    _close(out, tout)
    _close(lse, tlse)
