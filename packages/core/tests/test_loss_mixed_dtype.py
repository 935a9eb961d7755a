"""Result dtypes of the element-wise losses for inputs and targets of different floating
dtypes, against PyTorch: huber_loss and soft_margin_loss keep the input's dtype, mse_loss,
l1_loss and smooth_l1_loss promote the two; binary_cross_entropy requires the input's dtype and
binary_cross_entropy_with_logits takes the target's."""

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


BCE_PAIRS = [("float32", "float64"), ("float64", "float32"), ("float32", "float16"),
             ("float32", "int64"), ("float32", "bool"), ("float32", "float32")]


def _bce_args(m, pair):
    rng = np.random.default_rng(1)
    p = rng.uniform(0.05, 0.95, 6).astype(np.float32)
    t = (rng.uniform(0, 1, 6) > 0.5).astype(np.float32)
    x = m.tensor(p).to(getattr(m, pair[0])).requires_grad_()
    y = m.tensor(t).to(getattr(m, pair[1]))
    return x, y


@pytest.mark.parametrize("pair", BCE_PAIRS, ids="-".join)
@pytest.mark.parametrize("name", ["binary_cross_entropy", "binary_cross_entropy_with_logits",
                                  "BCELoss", "BCEWithLogitsLoss"])
def test_bce_target_dtype_matches_torch(name, pair):
    """binary_cross_entropy does not promote: a target of another dtype is an error, as in
    torch. binary_cross_entropy_with_logits gives a loss of the target's dtype (an integer or
    bool target is an error)."""
    ex, et = _bce_args(ember, pair)
    tx, tt = _bce_args(torch, pair)

    def call(m, F_, x, y):
        if name[0].isupper():
            return getattr(m.nn, name)()(x, y)
        return getattr(F_, name)(x, y)

    try:
        t = call(torch, torch.nn.functional, tx, tt)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="binary_cross_entropy.*(dtype|target)"):
            call(ember, F, ex, et)
        return
    e = call(ember, F, ex, et)
    assert str(e.dtype) == "ember." + str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(e.item(), t.item(), rtol=5e-3)  # float16 losses round
    e.backward()
    t.backward()
    assert ex.grad.dtype == ex.dtype
    np.testing.assert_allclose(ex.grad.double().numpy(), tx.grad.double().numpy(), rtol=5e-3,
                               atol=1e-5)


def test_bce_error_message_names_both_dtypes():
    x = ember.tensor([0.25, 0.5])
    with pytest.raises(RuntimeError, match="binary_cross_entropy: expected target to have the "
                                           "input's dtype float32, but got float64"):
        F.binary_cross_entropy(x, ember.tensor([0.0, 1.0], dtype=ember.float64))
    with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits: expected a "
                                           "floating point target.*int64"):
        F.binary_cross_entropy_with_logits(x, ember.tensor([0, 1]))


@pytest.mark.parametrize("wdtype", ["float64", "float16", "int64"])
@pytest.mark.parametrize("which", ["weight", "pos_weight"])
def test_bce_weights_do_not_promote(which, wdtype):
    """weight (and pos_weight) of another dtype leave the loss in torch's dtype."""
    fn = "binary_cross_entropy_with_logits" if which == "pos_weight" else "binary_cross_entropy"
    res = []
    for m in (ember, torch):
        x = m.tensor([0.25, 0.5, 0.9])
        y = m.tensor([0.0, 1.0, 1.0])
        kw = {which: m.tensor([1.0, 2.0, 0.5]).to(getattr(m, wdtype))}
        res.append(getattr(m.nn.functional, fn)(x, y, **kw))
    e, t = res
    assert str(e.dtype) == "ember." + str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(e.item(), t.item(), rtol=1e-3)
