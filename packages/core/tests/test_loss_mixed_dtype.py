"""Result dtypes of the element-wise losses for inputs and targets of different floating
dtypes, against PyTorch: huber_loss and soft_margin_loss keep the input's dtype, mse_loss,
l1_loss and smooth_l1_loss promote the two."""

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from core_helpers import needs_torch, torch

pytestmark = needs_torch

PAIRS = [
    ("bfloat16", "float32"),
    ("float32", "bfloat16"),
    ("float16", "float32"),
    ("float32", "float64"),
    ("float64", "float32"),
    ("bfloat16", "float16"),
]
LOSSES = ["huber_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "soft_margin_loss"]


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_mixed_dtype_loss_matches_torch(name, pair, reduction):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(6) * 2).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    ex = ember.tensor(a).to(getattr(ember, pair[0])).requires_grad_()
    et = ember.tensor(b).to(getattr(ember, pair[1]))
    tx = torch.tensor(a).to(getattr(torch, pair[0])).requires_grad_()
    tt = torch.tensor(b).to(getattr(torch, pair[1]))
    e = getattr(F, name)(ex, et, reduction=reduction)
    t = getattr(torch.nn.functional, name)(tx, tt, reduction=reduction)
    assert str(e.dtype) == "ember." + str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(
        e.detach().float().numpy(), t.detach().float().numpy(), rtol=2e-2, atol=2e-2
    )
    e.sum().backward()
    assert ex.grad.dtype == ex.dtype
    if name == "huber_loss":  # torch's huber backward rejects mixed dtypes
        return
    t.sum().backward()
    np.testing.assert_allclose(
        ex.grad.float().numpy(), tx.grad.float().numpy(), rtol=2e-2, atol=2e-2
    )
