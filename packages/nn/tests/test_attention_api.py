"""ember.nn.attention's API (SDPBackend, sdpa_kernel, the bias module) and its agreement with
ember.backends.cuda's switches, compared with torch.nn.attention."""

import warnings

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from ember.backends import cuda as bcuda
from ember.nn.attention import SDPBackend, _cur_sdpa_kernel_backends, sdpa_kernel
from ember.nn.attention.bias import (
    CausalBias,
    CausalVariant,
    causal_lower_right,
    causal_upper_left,
)


def _flags(fw):
    c = fw.backends.cuda
    return (c.flash_sdp_enabled(), c.mem_efficient_sdp_enabled(), c.math_sdp_enabled(),
            c.cudnn_sdp_enabled())


def test_backend_enum_matches_torch():
    pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend as TB

    assert {b.name: int(b) for b in SDPBackend} == {n: int(b) for n, b in TB.__members__.items()}


@pytest.mark.parametrize("choice", [
    "MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION",
    ("MATH", "FLASH_ATTENTION"), ("EFFICIENT_ATTENTION", "MATH"), (),
])
def test_sdpa_kernel_sets_the_same_switches_as_torch(choice):
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend as TB
    from torch.nn.attention import _cur_sdpa_kernel_backends as t_cur
    from torch.nn.attention import sdpa_kernel as t_kernel

    names = (choice,) if isinstance(choice, str) else choice
    mine = [SDPBackend[n] for n in names]
    theirs = [getattr(TB, n) for n in names]
    before = _flags(ember)
    with sdpa_kernel(mine[0] if len(mine) == 1 else mine), \
            t_kernel(theirs[0] if len(theirs) == 1 else theirs):
        assert _flags(ember) == _flags(torch)
        assert [b.name for b in _cur_sdpa_kernel_backends()] == [
            b.name for b in t_cur() if b.name != "OVERRIDEABLE"]
        fused = any(n != "MATH" for n in names)
        assert ember._C._sdp_backends() == ("MATH" in names, fused)
    assert _flags(ember) == before == (True, True, True, True)


def test_sdpa_kernel_validates_and_restores():
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
        with sdpa_kernel(["MATH"]):
            pass
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
        with sdpa_kernel(3):
            pass
    with pytest.raises(RuntimeError, match="boom"):
        with sdpa_kernel(SDPBackend.MATH):
            raise RuntimeError("boom")
    assert _flags(ember) == (True, True, True, True)
    with sdpa_kernel(SDPBackend.MATH):
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            assert _flags(ember) == (True, False, False, False)
        assert _flags(ember) == (False, False, True, False)
    q = ember.randn(1, 2, 3, 4)
    with sdpa_kernel([]):
        with pytest.raises(RuntimeError, match="no available kernel"):
            F.scaled_dot_product_attention(q, q, q)


def test_backends_cuda_sdp_kernel_is_deprecated_and_restores():
    torch = pytest.importorskip("torch")
    for fw in (ember, torch):
        with pytest.warns(FutureWarning, match="sdp_kernel"):
            with fw.backends.cuda.sdp_kernel(enable_flash=False, enable_cudnn=False):
                inside = _flags(fw)
        assert _flags(fw) == (True, True, True, True)
        if fw is ember:
            mine = inside
    assert mine == inside == (False, True, True, False)
    bcuda.enable_math_sdp(False)
    try:
        assert SDPBackend.MATH not in _cur_sdpa_kernel_backends()
    finally:
        bcuda.enable_math_sdp(True)


@pytest.mark.parametrize("L,S", [(3, 3), (2, 5), (5, 2), (1, 4)])
def test_causal_masks_match_torch(L, S):
    pytest.importorskip("torch")
    from torch.nn.attention import bias as tbias

    for mine, theirs in ((causal_upper_left, tbias.causal_upper_left),
                         (causal_lower_right, tbias.causal_lower_right)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = mine(L, S)._materialize().tolist()
            mine_warned = [str(w.message) for w in caught]
            caught.clear()
            want = theirs(L, S)._materialize().tolist()
            torch_warned = [str(w.message) for w in caught]
        assert got == want
        assert bool(mine_warned) == bool(torch_warned)  # lower right with L > S: rows see no key


@pytest.mark.parametrize("L,S", [(4, 4), (3, 6)])
@pytest.mark.parametrize("make", ["causal_upper_left", "causal_lower_right"])
def test_sdpa_with_a_causal_bias_matches_torch(L, S, make):
    torch = pytest.importorskip("torch")
    from torch.nn.attention import bias as tbias

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape) for shape in ((2, 2, L, 8), (2, 2, S, 8), (2, 2, S, 8)))
    et = [ember.tensor(a, requires_grad=True) for a in (q, k, v)]
    tt = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    bias = {"causal_upper_left": causal_upper_left,
            "causal_lower_right": causal_lower_right}[make](L, S)
    out = F.scaled_dot_product_attention(*et, attn_mask=bias)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *tt, attn_mask=getattr(tbias, make)(L, S))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-10)
    out.sum().backward()
    ref.sum().backward()
    for a, b in zip(et, tt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-9)
    # and it equals the explicit mask
    plain = F.scaled_dot_product_attention(*[t.detach() for t in et], attn_mask=bias._materialize())
    np.testing.assert_allclose(out.detach().numpy(), plain.numpy(), atol=1e-12)


def test_upper_left_runs_the_causal_kernel():
    q = ember.randn(1, 2, 5, 8)
    with ember.profiler.profile() as prof:
        F.scaled_dot_product_attention(q, q, q, attn_mask=causal_upper_left(5, 5))
    ran = {e.key for e in prof.key_averages()}
    assert "aten::_scaled_dot_product_fused_attention" in ran


def test_causal_bias_errors_and_other_functions():
    q, k = ember.ones(1, 2, 4), ember.ones(1, 3, 4)
    with pytest.raises(ValueError, match="for 2 queries and 5 keys, got 2 and 3"):
        F.scaled_dot_product_attention(q, k, k, attn_mask=causal_lower_right(2, 5))
    with pytest.raises(ValueError, match="do not also pass is_causal=True"):
        F.scaled_dot_product_attention(q, k, k, attn_mask=causal_lower_right(2, 3), is_causal=True)
    with pytest.raises(ValueError, match="non-negative int"):
        CausalBias(CausalVariant.UPPER_LEFT, -1, 2)
    with pytest.raises(TypeError, match="CausalVariant"):
        CausalBias(1, 2, 2)
    with pytest.raises(ValueError, match="expected \\(seq_len_q, seq_len_kv\\)"):
        causal_upper_left(2)
    bias = causal_lower_right(2, 3)
    assert ember.logical_not(bias).tolist() == [[False, False, True], [False, False, False]]
    assert tuple(bias.shape) == (2, 3) and bias.dtype == ember.bool
    assert "LOWER_RIGHT" in repr(bias)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ember.where(bias, 1.0, 0.0).sum().item() == 5.0


def test_nn_attention_reachable_without_its_own_import():
    # torch.nn.attention.sdpa_kernel works in a program that imported only torch.
    import subprocess
    import sys

    code = ("import ember; print(ember.nn.attention.SDPBackend.MATH.name, "
            "ember.nn.common_types.__name__); ember.nn.no_such_thing")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.stdout.split() == ["MATH", "ember.nn.common_types"], p.stderr
    assert "module 'ember.nn' has no attribute 'no_such_thing'" in p.stderr
