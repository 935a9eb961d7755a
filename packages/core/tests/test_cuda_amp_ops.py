"""The GradScaler ops _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_: CPU
kernels against PyTorch's ops (same names and semantics) and hand-worked values, argument
checks, and the CUDA kernels against the CPU ones (skipped without a CUDA device)."""

from __future__ import annotations

import math

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, to_np, torch

needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")
unscale = ember._C._amp_foreach_non_finite_check_and_unscale_
update_scale = ember._C._amp_update_scale_


def _flag(dev="cpu"):
    return ember.zeros((), dtype=ember.float32, device=dev)


def _scalar(v, dev="cpu", dtype=ember.float32):
    return ember.full((), v, dtype=dtype, device=dev)


def _grads(dtype, dev="cpu", bad=None):
    """Gradients of several sizes (one above a CUDA chunk of 32768), one non-contiguous; bad puts
    an inf or nan into the third."""
    rng = np.random.default_rng(7)
    shapes = [(3,), (5, 7), (40000,), (6, 4)]
    out = []
    for i, s in enumerate(shapes):
        a = (rng.standard_normal(s) * 64).astype(np.float32)
        if bad is not None and i == 2:
            a[12345] = bad
        t = ember.tensor(a).to(getattr(ember, dtype))
        if dev != "cpu":
            t = t.to(dev)
        out.append(t.t() if i == 3 else t)  # the last one non-contiguous
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("bad", [None, math.inf, -math.inf, math.nan])
def test_unscale_cpu(dtype, bad):
    gs = _grads(dtype, bad=bad)
    before = [to_np(g) for g in gs]
    found, inv = _flag(), _scalar(0.25)
    unscale(gs, found, inv)
    assert found.item() == (0.0 if bad is None else 1.0)
    for g, b in zip(gs, before):
        want = (b * 0.25).astype(np.float64)
        np.testing.assert_array_equal(to_np(g), to_np(ember.tensor(want).to(g.dtype)))
    assert not gs[3].is_contiguous()


def test_unscale_keeps_found_inf_set_and_skips_multiply_by_one():
    g = ember.tensor([1.0, 3.0])
    found = _scalar(1.0)
    unscale([g], found, _scalar(1.0))
    assert found.item() == 1.0 and g.tolist() == [1.0, 3.0]  # a set flag is never cleared
    v = g._version
    unscale([g], _flag(), _scalar(0.5))
    assert g.tolist() == [0.5, 1.5] and g._version > v
    unscale([], found, _scalar(0.5))  # an empty list is fine


@needs_torch
@pytest.mark.parametrize("bad", [None, math.inf, math.nan])
def test_unscale_matches_torch(bad):
    gs = _grads("float32", bad=bad)
    tg = [torch.tensor(to_np(g)).float() for g in gs]
    found, tfound = _flag(), torch.zeros(())
    unscale(gs, found, _scalar(1 / 1024))
    torch._amp_foreach_non_finite_check_and_unscale_(tg, tfound, torch.full((), 1 / 1024))
    assert found.item() == tfound.item()
    for g, t in zip(gs, tg):
        np.testing.assert_array_equal(to_np(g), to_np(t))


def test_unscale_argument_checks():
    g = [ember.ones(2)]
    with pytest.raises(TypeError, match="found_inf must be a float32 tensor"):
        unscale(g, ember.zeros((), dtype=ember.float64), _scalar(1.0))
    with pytest.raises(RuntimeError, match="inv_scale must be a one-element tensor"):
        unscale(g, _flag(), ember.ones(2))
    with pytest.raises(TypeError, match=r"self\[1\] must be a floating-point tensor"):
        unscale([ember.ones(2), ember.ones(2, dtype=ember.int64)], _flag(), _scalar(1.0))


def _update_ref(scale, tracker, found, growth, backoff, interval):
    """PyTorch's documented update, in float32."""
    f32 = lambda x: float(np.float32(x))  # noqa: E731
    if found:
        return f32(np.float32(scale) * np.float32(backoff)), 0
    if tracker + 1 == interval:
        grown = np.float32(scale) * np.float32(growth)
        return (f32(grown) if math.isfinite(grown) else scale), 0
    return scale, tracker + 1


@pytest.mark.parametrize("interval", [1, 3])
def test_update_scale_cpu(interval):
    scale, tracker = _scalar(1024.0), ember.zeros((), dtype=ember.int32)
    s, t = 1024.0, 0
    for found in [0, 0, 1, 0, 0, 0, 0, 1, 1, 0]:
        out = update_scale(scale, tracker, _scalar(float(found)), 2.0, 0.5, interval)
        s, t = _update_ref(s, t, found, 2.0, 0.5, interval)
        assert out is scale or out.data_ptr() == scale.data_ptr()
        assert scale.item() == s and tracker.item() == t


def test_update_scale_does_not_overflow_and_odd_factors_round_in_float32():
    scale, tracker = _scalar(2.0**127), ember.zeros((), dtype=ember.int32)
    update_scale(scale, tracker, _flag(), 2.0, 0.5, 1)
    assert scale.item() == 2.0**127 and tracker.item() == 0  # inf growth refused
    scale = _scalar(1000.0)
    update_scale(scale, tracker, _scalar(3.0), 2.0, 0.3, 5)  # any nonzero found_inf backs off
    assert scale.item() == float(np.float32(1000.0) * np.float32(0.3))


@needs_torch
def test_update_scale_matches_torch():
    e = (_scalar(65536.0), ember.zeros((), dtype=ember.int32))
    t = (torch.full((), 65536.0), torch.zeros((), dtype=torch.int32))
    for found in [0, 0, 0, 1, 0, 0, 0, 0, 1]:
        update_scale(*e, _scalar(float(found)), 3.0, 0.7, 2)
        torch._amp_update_scale_(*t, torch.full((), float(found)), 3.0, 0.7, 2)
        assert e[0].item() == t[0].item() and e[1].item() == t[1].item()


def test_update_scale_argument_checks():
    tr = ember.zeros((), dtype=ember.int32)
    with pytest.raises(TypeError, match="growth_tracker must be a int32 tensor"):
        update_scale(_scalar(1.0), ember.zeros((), dtype=ember.int64), _flag(), 2.0, 0.5, 1)
    with pytest.raises(TypeError, match=r"self \(the scale\) must be a float32 tensor"):
        update_scale(_scalar(1.0, dtype=ember.float64), tr, _flag(), 2.0, 0.5, 1)
    with pytest.raises(RuntimeError, match="found_inf must be a one-element tensor"):
        update_scale(_scalar(1.0), tr, ember.zeros(2), 2.0, 0.5, 1)


# ---- CUDA against the CPU --------------------------------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("bad", [None, math.inf, math.nan])
def test_unscale_cuda_matches_cpu(dtype, bad):
    cg = _grads(dtype, bad=bad)
    gg = _grads(dtype, "cuda", bad=bad)
    cf, gf = _flag(), _flag("cuda")
    unscale(cg, cf, _scalar(0.125))
    unscale(gg, gf, _scalar(0.125, "cuda"))
    assert gf.item() == cf.item()
    for g, c in zip(gg, cg):
        assert g.device.type == "cuda" and g.dtype is c.dtype
        np.testing.assert_array_equal(to_np(g.cpu()), to_np(c))
    assert not gg[3].is_contiguous()


@needs_cuda
def test_unscale_cuda_mixed_dtypes_in_one_call_and_errors():
    gs = [ember.ones(3, device="cuda"), ember.full((70000,), 4.0, dtype=ember.float16,
                                                   device="cuda")]
    f = _flag("cuda")
    unscale(gs, f, _scalar(0.5, "cuda"))
    assert f.item() == 0.0 and gs[0].tolist() == [0.5] * 3
    assert float(gs[1].float().max().item()) == float(gs[1].float().min().item()) == 2.0
    gs[1][69999] = math.inf
    unscale(gs, f, _scalar(1.0, "cuda"))
    assert f.item() == 1.0
    with pytest.raises(RuntimeError, match="(?i)cuda"):
        unscale([ember.ones(3, device="cuda")], _flag(), _scalar(1.0))  # found_inf on the CPU


@needs_cuda
@pytest.mark.parametrize("interval", [1, 3])
def test_update_scale_cuda_matches_cpu(interval):
    c = (_scalar(1024.0), ember.zeros((), dtype=ember.int32))
    g = (_scalar(1024.0, "cuda"), ember.zeros((), dtype=ember.int32, device="cuda"))
    for found in [0, 0, 1, 0, 0, 0, 0, 1, 0, 0]:
        update_scale(*c, _scalar(float(found)), 2.0, 0.5, interval)
        update_scale(*g, _scalar(float(found), "cuda"), 2.0, 0.5, interval)
        assert g[0].item() == c[0].item() and g[1].item() == c[1].item()
