"""scaled_dot_product_attention's kernel switches: ember.backends.cuda.enable_*_sdp and
ember.nn.attention.sdpa_kernel choose between the fused kernel and the math path on every device."""

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from ember.backends import cuda as bcuda
from ember.nn.attention import SDPBackend, sdpa_kernel


def _ran_ops(fn):
    with ember.profiler.profile() as prof:
        fn()
    return {e.key for e in prof.key_averages()}


def _qkv(dtype=ember.float64):
    g = ember.Generator().manual_seed(0)
    return [ember.randn(2, 3, 5, 8, generator=g, dtype=dtype) for _ in range(3)]


def test_defaults_take_the_fused_kernel():
    q, k, v = _qkv()
    ops = _ran_ops(lambda: F.scaled_dot_product_attention(q, k, v))
    assert "aten::_scaled_dot_product_fused_attention" in ops
    assert ember._C._sdp_backends() == (True, True)


@pytest.mark.parametrize("causal", [False, True])
def test_math_only_takes_the_math_path_with_the_same_values(causal):
    q, k, v = _qkv()
    fused = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with sdpa_kernel(SDPBackend.MATH):
        assert ember._C._sdp_backends() == (True, False)
        ops = _ran_ops(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        math = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert "aten::_scaled_dot_product_fused_attention" not in ops
    assert "aten::softmax" in ops
    np.testing.assert_allclose(math.numpy(), fused.numpy(), rtol=1e-12, atol=1e-12)
    assert ember._C._sdp_backends() == (True, True)  # restored


def test_flash_only_refuses_what_the_fused_kernel_cannot_take():
    q, k, v = _qkv()
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        F.scaled_dot_product_attention(q, k, v)  # fused: fine
        with pytest.raises(RuntimeError, match="no available kernel.*dropout_p 0.5"):
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)  # math again after the block


def test_every_kernel_disabled_raises_and_the_flags_are_restored_after_an_error():
    q, k, v = _qkv()
    with pytest.raises(RuntimeError, match="scaled_dot_product_attention: no available kernel"):
        with sdpa_kernel([]):
            F.scaled_dot_product_attention(q, k, v)
    assert (bcuda.flash_sdp_enabled(), bcuda.mem_efficient_sdp_enabled(),
            bcuda.math_sdp_enabled(), bcuda.cudnn_sdp_enabled()) == (True,) * 4
    assert ember._C._sdp_backends() == (True, True)


def test_global_switches_as_torch():
    q, k, v = _qkv()
    try:
        bcuda.enable_flash_sdp(False)
        bcuda.enable_mem_efficient_sdp(False)
        assert ember._C._sdp_backends() == (True, True)  # cuDNN still stands for the fused one
        bcuda.enable_cudnn_sdp(False)
        assert ember._C._sdp_backends() == (True, False)
        ops = _ran_ops(lambda: F.scaled_dot_product_attention(q, k, v))
        assert "aten::_scaled_dot_product_fused_attention" not in ops
    finally:
        for f in (bcuda.enable_flash_sdp, bcuda.enable_mem_efficient_sdp,
                  bcuda.enable_cudnn_sdp, bcuda.enable_math_sdp):
            f(True)
    assert ember._C._sdp_backends() == (True, True)


def test_same_api_as_torch():
    torch = pytest.importorskip("torch")
    for name in ("enable_flash_sdp", "enable_mem_efficient_sdp", "enable_math_sdp",
                 "enable_cudnn_sdp", "flash_sdp_enabled", "mem_efficient_sdp_enabled",
                 "math_sdp_enabled", "cudnn_sdp_enabled"):
        assert hasattr(torch.backends.cuda, name) and hasattr(bcuda, name)
