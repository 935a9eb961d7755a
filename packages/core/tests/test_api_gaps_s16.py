"""Small public-API gaps closed in session 16, each against PyTorch where it is installed:
``ember.testing.assert_allclose`` (deprecated alias), ``ember.random.thread_safe_generator``,
``ember.backends.cuda``'s attention / library / cuFFT cache queries, ``ember.library``'s
``register_autocast``, ``register_vmap``, ``impl_abstract``, ``get_ctx`` and
``ember.utils.hooks``' ``unserializable_hook`` / ``warn_if_has_hooks``."""

from __future__ import annotations

import itertools
import warnings

import ember
import pytest
from ember.backends import cuda as ecuda

try:
    import torch
    import torch.backends.cuda as tcuda
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _both():
    return [ember] + ([torch] if torch is not None else [])


# ---- testing.assert_allclose ----------------------------------------------------------------------

def _allclose_outcome(M, actual, expected, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            M.testing.assert_allclose(actual, expected, **kw)
            result = "ok"
        except AssertionError:
            result = "mismatch"
        except (TypeError, ValueError, RuntimeError) as e:
            result = type(e).__name__
    deprecations = [x for x in w if issubclass(x.category, FutureWarning)]
    assert len(deprecations) == 1 and "assert_allclose()` is deprecated since 1.12" in str(
        deprecations[0].message)
    return result


def _allclose_cases(M):
    nan = float("nan")
    return [
        (M.tensor([1.0, 2.0]), M.tensor([1.0, 2.0 + 1.5e-4]), {}),  # within float32's 1e-4
        (M.tensor([1.0, 2.0]), M.tensor([1.0, 2.0 + 5e-4]), {}),
        (M.tensor([1.0, nan]), M.tensor([1.0, nan]), {}),  # NaNs equal by default
        (M.tensor([1.0, nan]), M.tensor([1.0, nan]), {"equal_nan": False}),
        (M.tensor([1, 2]), M.tensor([1.0, 2.0]), {}),  # dtypes not compared
        (M.tensor([1.0, 2.0], dtype=M.float64), [1.0, 2.0 + 1e-6], {}),  # a list: made a tensor
        ([1.0, 2.0], (1.0, 2.0), {}),
        (M.tensor([1.0, 2.0]), M.tensor([1.1, 2.0]), {"rtol": 0.2, "atol": 0.0}),
        (M.tensor([1.0, 2.0]), M.tensor([1.1, 2.0]), {"rtol": 0.01, "atol": 0.0}),
        (M.tensor([1.0, 2.0], dtype=M.float64), M.tensor([1.0, 2.0 + 1e-4], dtype=M.float64), {}),
        (M.tensor([1.0, 2.0], dtype=M.float16), M.tensor([1.0, 2.001], dtype=M.float16), {}),
        (M.ones(2, 2), M.ones(2), {}),  # shapes must match
    ]


def test_assert_allclose_explicit():
    results = [_allclose_outcome(ember, a, e, **kw) for a, e, kw in _allclose_cases(ember)]
    assert results == ["ok", "mismatch", "ok", "mismatch", "ok", "ok", "ok", "ok", "mismatch",
                       "mismatch", "ok", "mismatch"]


@needs_torch
def test_assert_allclose_matches_torch():
    e = [_allclose_outcome(ember, a, x, **kw) for a, x, kw in _allclose_cases(ember)]
    t = [_allclose_outcome(torch, a, x, **kw) for a, x, kw in _allclose_cases(torch)]
    assert e == t


# ---- random.thread_safe_generator --------------------------------------------------------------

def test_thread_safe_generator_is_none_outside_thread_workers():
    assert ember.random.thread_safe_generator() is None
    assert "thread_safe_generator" in ember.random.__all__
    if torch is not None:
        assert torch.random.thread_safe_generator() is None
    # and None may be passed on as generator=
    assert ember.randint(0, 10, (3,), generator=ember.random.thread_safe_generator()).shape == (3,)


# ---- backends.cuda ---------------------------------------------------------------------------------

def _sdpa_cases():
    f32, f64, f16, i64 = ember.float32, ember.float64, ember.float16, ember.int64
    q = ember.randn(1, 2, 4, 8)
    cases = [
        dict(q=q, k=q, v=q),
        dict(q=q.double(), k=q.double(), v=q.double()),
        dict(q=q, k=q, v=q, dropout=0.1),
        dict(q=q.half(), k=q.half(), v=q.half()),  # not fused on the CPU
        dict(q=q, k=q.double(), v=q),
        dict(q=q, k=ember.randn(1, 2, 6, 8), v=ember.randn(1, 2, 6, 3)),  # S != L, Ev != E
        dict(q=q, k=ember.randn(1, 1, 4, 8), v=ember.randn(1, 1, 4, 8), gqa=True),
        dict(q=q, k=ember.randn(2, 2, 4, 8), v=ember.randn(2, 2, 4, 8)),  # batch mismatch
        dict(q=ember.randn(1, 2, 0, 8), k=q, v=q),
        dict(q=q, k=q, v=q, mask=ember.ones(4, 4, dtype=ember.bool)),
        dict(q=q, k=q, v=q, mask=ember.zeros(1, 1, 4, 4)),
        dict(q=q, k=q, v=q, mask=ember.zeros(4, 4, dtype=f64)),  # other float dtype
        dict(q=q, k=q, v=q, mask=ember.zeros(4, 4, requires_grad=True)),
        dict(q=q, k=q, v=q, mask=ember.zeros(1, 4)),  # broadcast over rows
        dict(q=q, k=q, v=q, mask=ember.zeros(4, 1)),  # broadcast over keys
        dict(q=q, k=q, v=q, mask=ember.zeros(3, 4)),  # does not broadcast: an error either way
        dict(q=q, k=q, v=q, causal=True),
    ]
    del f32, f16, i64
    return cases


def test_fused_kernel_reasons_agree_with_what_sdpa_runs():
    """ember's fused kernel runs on the CPU too: with the math path off, scaled_dot_product_
    attention succeeds exactly when the query says the fused kernel takes the inputs."""
    F = ember.nn.functional
    ecuda.enable_math_sdp(False)
    try:
        for c in _sdpa_cases():
            p = ecuda.SDPAParams(c["q"], c["k"], c["v"], c.get("mask"), c.get("dropout", 0.0),
                                 c.get("causal", False), c.get("gqa", False))
            fused = not ecuda._fused_kernel_reasons(p, cuda_only=False)
            try:
                F.scaled_dot_product_attention(c["q"], c["k"], c["v"], attn_mask=c.get("mask"),
                                               dropout_p=c.get("dropout", 0.0),
                                               is_causal=c.get("causal", False),
                                               enable_gqa=c.get("gqa", False))
                ran = True
            except RuntimeError:
                ran = False
            assert fused == ran, c
    finally:
        ecuda.enable_math_sdp(True)


def test_can_use_queries_on_cpu_tensors():
    q = ember.ones(1, 2, 4, 8)
    p = ecuda.SDPAParams(q, q, q, None, 0.0, False, False)
    assert (p.query is q and p.attn_mask is None and p.dropout == 0.0 and p.is_causal is False
            and p.enable_gqa is False)
    for fn in (ecuda.can_use_flash_attention, ecuda.can_use_efficient_attention,
               ecuda.can_use_cudnn_attention):
        assert fn(p) is False  # CPU tensors: as PyTorch answers for them
        with pytest.warns(UserWarning, match="CUDA"):
            assert fn(p, debug=True) is False
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fn(p, False)
    assert ecuda.is_flash_attention_available() == ecuda.is_built()
    if torch is not None:
        tq = torch.ones(1, 2, 4, 8)
        tp = tcuda.SDPAParams(tq, tq, tq, None, 0.0, False, False)
        assert tcuda.can_use_flash_attention(tp) is False
        assert tcuda.can_use_efficient_attention(tp) is False


@pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")
def test_can_use_queries_on_cuda_agree_with_what_sdpa_runs():
    F = ember.nn.functional
    q = ember.randn(1, 2, 4, 8, device="cuda", dtype=ember.float16)
    big = ember.randn(1, 2, 4, 512, device="cuda", dtype=ember.float16)
    cases = [(q, 0.0, True), (q, 0.1, False), (big, 0.0, False), (q.float(), 0.0, True),
             (q.to(ember.int64), 0.0, False)]
    ecuda.enable_math_sdp(False)
    try:
        for t, p_drop, expect in cases:
            p = ecuda.SDPAParams(t, t, t, None, p_drop, False, False)
            assert ecuda.can_use_flash_attention(p) is expect
            assert ecuda.can_use_efficient_attention(p) is expect
            try:
                F.scaled_dot_product_attention(t, t, t, dropout_p=p_drop)
                ran = True
            except RuntimeError:
                ran = False
            assert ran is expect
    finally:
        ecuda.enable_math_sdp(True)
    assert ecuda.is_flash_attention_available()
    assert ecuda.cufft_plan_cache[0].size == 0 and ecuda.cufft_plan_cache.size == 0


def test_can_use_respects_the_switches():
    q = ember.ones(1, 2, 4, 8)
    p = ecuda.SDPAParams(q, q, q, None, 0.0, False, False)
    ecuda.enable_flash_sdp(False)
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert ecuda.can_use_flash_attention(p, debug=True) is False
        assert any("Flash attention is disabled" in str(x.message) for x in w)
    finally:
        ecuda.enable_flash_sdp(True)


def test_preferred_libraries():
    assert ecuda.preferred_linalg_library() == ecuda._LinalgBackend.Default
    assert ecuda.preferred_linalg_library("default") == ecuda._LinalgBackend.Default
    assert repr(ecuda.preferred_linalg_library()) == "<_LinalgBackend.Default: 0>"
    for name in ("cusolver", "magma"):
        with pytest.raises(RuntimeError, match="Cannot set preferred backend"):
            ecuda.preferred_linalg_library(name)
    with pytest.raises(RuntimeError, match="Unknown input value. Choose from: default, "
                                           "cusolver, magma."):
        ecuda.preferred_linalg_library("lapack")
    with pytest.raises(RuntimeError, match="Unknown input value type."):
        ecuda.preferred_linalg_library(3)
    assert ecuda.preferred_blas_library() == ecuda._BlasBackend.Cublas
    assert ecuda.preferred_blas_library("cublas") == ecuda._BlasBackend.Cublas
    assert ecuda.preferred_blas_library(ecuda._BlasBackend.Default) == ecuda._BlasBackend.Cublas
    for name in ("cublaslt", "ck"):
        with pytest.raises(RuntimeError, match="Cannot set preferred backend"):
            ecuda.preferred_blas_library(name)
    if torch is not None:
        assert {k: int(v) for k, v in ecuda._LinalgBackends.items()} == {
            k: int(v) for k, v in tcuda._LinalgBackends.items()}
        assert {k: int(v) for k, v in ecuda._BlasBackends.items()} == {
            k: int(v) for k, v in tcuda._BlasBackends.items()}
        assert int(ecuda.preferred_blas_library()) == int(tcuda.preferred_blas_library())
        assert int(ecuda.preferred_linalg_library()) == int(tcuda.preferred_linalg_library())


def test_cufft_plan_cache():
    cache = ecuda.cuFFTPlanCache(0)
    assert cache.size == 0 and cache.max_size == 4096
    cache.max_size = 10
    assert cache.max_size == 10
    cache.clear()
    with pytest.raises(RuntimeError, match="read-only"):
        cache.size = 3
    n = ember.cuda.device_count()
    with pytest.raises(RuntimeError, match=f"expected 0 <= device index < {n}, but got device "
                                           f"with index {n}"):
        ecuda.cufft_plan_cache[n]
    if n:
        assert ecuda.cufft_plan_cache[0].size == 0
    if torch is not None and not torch.cuda.is_available() and n == 0:
        with pytest.raises(RuntimeError, match="expected 0 <= device index < 0, but got device "
                                               "with index 0"):
            tcuda.cufft_plan_cache[0]


@needs_torch
def test_backends_cuda_names():
    wanted = {"SDPAParams", "is_flash_attention_available", "can_use_flash_attention",
              "can_use_efficient_attention", "can_use_cudnn_attention",
              "preferred_linalg_library", "preferred_blas_library", "cufft_plan_cache",
              "cuFFTPlanCache", "cuFFTPlanCacheManager"}
    assert wanted <= set(tcuda.__all__)
    assert all(hasattr(ecuda, n) for n in wanted)


# ---- library --------------------------------------------------------------------------------------

_counter = itertools.count()


def _define(M, name):
    qual = f"s16gaps::{name}_{next(_counter)}"
    if M is ember:
        def kernel(x: ember.Tensor, n: ember.Tensor) -> ember.Tensor:
            return x * 2 + n
    else:
        def kernel(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
            return x * 2 + n

    op = M.library.custom_op(qual, kernel, mutates_args=())

    return qual, op


def test_register_autocast():
    for M in _both():
        qual, op = _define(M, "autocast")
        M.library.register_autocast(qual, "cpu", M.float64)
        x, n = M.ones(2), M.ones(2, dtype=M.int64)
        with M.autocast("cpu", dtype=M.bfloat16):
            assert op(x, n).dtype == M.float64  # floating inputs cast, ints kept
        assert op(x, n).dtype == M.float32  # outside autocast: untouched
        with pytest.raises(ValueError, match="does not support autocast"):
            M.library.register_autocast(qual, "meta", M.float16)
        with pytest.raises(ValueError, match="got unexpected type for op"):
            M.library.register_autocast(3, "cpu", M.float16)


def test_impl_abstract_and_get_ctx():
    for M in _both():
        qual, op = _define(M, "fake")
        qual2, op2 = _define(M, "fake_ctx")
        assert M.library.get_ctx() is None
        with pytest.warns(FutureWarning, match="impl_abstract` was renamed to "
                                               "`torch.library.register_fake`"):
            @M.library.impl_abstract(qual)
            def _(x, n):
                return M.empty_like(x)

        @M.library.register_fake(qual2)
        def _(x, n):
            M.library.get_ctx()
            return M.empty_like(x)

        meta = (M.ones(3, device="meta"), M.ones(3, device="meta", dtype=M.int64))
        out = op(*meta)
        assert out.device.type == "meta" and tuple(out.shape) == (3,)
        # a fake kernel asking for the context (for data-dependent sizes) on meta tensors
        with pytest.raises(RuntimeError, match="trying to run this operator with meta Tensors"):
            op2(*meta)
        assert M.library.get_ctx() is None
        assert op2(M.ones(2), M.ones(2)).tolist() == [3.0, 3.0]


def test_register_vmap_keeps_vmap_results():
    calls = []
    for M in _both():
        qual, op = _define(M, "vmap")

        def rule(info, in_dims, x, n):
            calls.append(M)
            xd = x if in_dims[0] == 0 else x.unsqueeze(0).expand(info.batch_size, *x.shape)
            nd = n if in_dims[1] == 0 else n.unsqueeze(0).expand(info.batch_size, *n.shape)
            return xd * 2 + nd, 0

        M.library.register_vmap(qual, rule)
        x = M.arange(6.0).reshape(3, 2)
        n = M.ones(2, dtype=M.int64)
        out = M.func.vmap(op, in_dims=(0, None))(x, n)
        assert out.tolist() == (x * 2 + 1).tolist()
        with pytest.raises(ValueError, match="got unexpected type for op"):
            M.library.register_vmap(3.5, rule)
    # PyTorch batches with the rule; ember's loop-based vmap runs the op per slice instead
    assert calls == ([torch] if torch is not None else [])


@needs_torch
def test_library_names():
    for n in ("impl_abstract", "register_autocast", "register_vmap", "get_ctx"):
        assert n in torch.library.__all__ and n in ember.library.__all__


# ---- utils.hooks ----------------------------------------------------------------------------------

def test_unserializable_hook_and_warn_if_has_hooks():
    for M in _both():
        x = M.ones(2, requires_grad=True)

        def plain(g):
            return g

        x.register_hook(plain)
        with pytest.warns(UserWarning, match=r"backward hook <function .*plain.* on tensor will "
                                             r"not be serialized\.  If this is expected, you can "
                                             r"decorate the function with "
                                             r"@torch\.utils\.hooks\.unserializable_hook"):
            M.utils.hooks.warn_if_has_hooks(x)
        y = M.ones(2, requires_grad=True)

        def marked(g):
            return g

        assert M.utils.hooks.unserializable_hook(marked) is marked
        assert marked.__torch_unserializable__ is True
        y.register_hook(marked)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            M.utils.hooks.warn_if_has_hooks(y)
            M.utils.hooks.warn_if_has_hooks(M.ones(2))  # no hooks at all
        # the hooks still run
        (y * 3).sum().backward()
        assert y.grad.tolist() == [3.0, 3.0]
