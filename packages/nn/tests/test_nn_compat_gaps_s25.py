"""ember.nn.functional arguments that PyTorch makes keyword-only refuse a positional value, as
PyTorch's do (session 25): ``F.gelu(x, approximate=...)`` and the ``scale`` / ``enable_gqa`` of
``F.scaled_dot_product_attention``. A CausalBias mask still reaches its own attention with the
scale it was given.
"""

from __future__ import annotations

import ember
import ember.nn.functional as F
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def test_gelu_approximate_is_keyword_only() -> None:
    x = ember.tensor([-1.0, 0.0, 2.0], dtype=ember.float64)
    with pytest.raises(TypeError, match=r"gelu\(\) takes 1 positional argument but 2"):
        F.gelu(x, "tanh")
    got = F.gelu(x, approximate="tanh").tolist()
    # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    assert got == pytest.approx([-0.15880800939172324, 0.0, 1.9545976940871754], abs=1e-12)


def test_sdpa_scale_is_keyword_only() -> None:
    q = ember.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=ember.float64)
    v = ember.tensor([[[1.0, 2.0], [3.0, 4.0]]], dtype=ember.float64)
    with pytest.raises(TypeError, match="takes from 3 to 6 positional arguments but 7"):
        F.scaled_dot_product_attention(q, q, v, None, 0.0, False, 1.0)
    out = F.scaled_dot_product_attention(q, q, v, None, 0.0, False, scale=0.0)
    assert out.tolist() == [[[2.0, 3.0], [2.0, 3.0]]]  # scale 0: a plain mean of the values


def test_sdpa_causal_bias_keeps_its_scale() -> None:
    from ember.nn.attention.bias import causal_lower_right

    q = ember.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=ember.float64)
    v = ember.tensor([[[1.0, 2.0], [3.0, 4.0]]], dtype=ember.float64)
    out = F.scaled_dot_product_attention(q, q, v, attn_mask=causal_lower_right(2, 2), scale=0.0)
    assert out.tolist() == [[[1.0, 2.0], [2.0, 3.0]]]


@needs_torch
def test_keyword_only_functional_arguments_match_torch() -> None:
    import torch.nn.functional as TF

    for lib, fn in ((ember, F), (torch, TF)):
        x = lib.ones(1, 2, 2)
        with pytest.raises(TypeError):
            fn.gelu(x, "tanh")
        with pytest.raises(TypeError):
            fn.scaled_dot_product_attention(x, x, x, None, 0.0, False, 1.0)
        assert fn.scaled_dot_product_attention(x, x, x, scale=1.0).tolist() == [[[1.0, 1.0]] * 2]
