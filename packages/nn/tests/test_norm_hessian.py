"""Second derivatives through the normalization layers at module level: ember.func.hessian of
tiny models with LayerNorm, BatchNorm (train and eval), GroupNorm, InstanceNorm and RMSNorm
equals PyTorch's with identical weights."""

import ember
import ember.nn as nn
import numpy as np
import pytest
from nn_helpers import copy_weights, to_np, torch

pytestmark = pytest.mark.skipif(torch is None, reason="needs PyTorch")


def _model(m, kind: str):
    """Linear -> norm -> tanh -> Linear over (N, 3) inputs, from library m's nn."""
    norm = {
        "LayerNorm": lambda: m.nn.LayerNorm(4),
        "BatchNorm1d": lambda: m.nn.BatchNorm1d(4),
        "GroupNorm": lambda: m.nn.GroupNorm(2, 4),
        "RMSNorm": lambda: m.nn.RMSNorm(4, eps=1e-6),
    }[kind]()
    return m.nn.Sequential(m.nn.Linear(3, 4), norm, m.nn.Tanh(), m.nn.Linear(4, 2))


@pytest.mark.parametrize("kind, train", [("LayerNorm", True), ("BatchNorm1d", True),
                                         ("BatchNorm1d", False), ("GroupNorm", True),
                                         ("RMSNorm", True)])
def test_hessian_of_a_tiny_model_matches_torch(kind, train):
    ember.manual_seed(0)
    em = _model(ember, kind).double()
    tm = _model(torch, kind).double()
    rng = np.random.default_rng(1)
    with ember.no_grad():  # non-trivial affine parameters and running statistics
        for name, p in list(em.named_parameters()) + list(em.named_buffers()):
            if p.dtype is ember.float64:
                vals = rng.uniform(0.5, 1.5, tuple(p.shape)) if "running_var" in name else \
                    rng.standard_normal(tuple(p.shape))
                p.copy_(ember.tensor(vals))
    copy_weights(em, tm)
    em.train(train)
    tm.train(train)
    x = rng.standard_normal((3, 3))

    def ef(x):
        return (em(x) ** 2).sum()

    def tf(x):
        return (tm(x) ** 2).sum()

    got = ember.func.hessian(ef)(ember.tensor(x))
    # torch.func refuses the in-place running-statistics update; plain autograd does it.
    expected = torch.autograd.functional.hessian(tf, torch.tensor(x))
    np.testing.assert_allclose(to_np(got), to_np(expected), rtol=1e-8, atol=1e-8)
    if kind == "BatchNorm1d" and train:  # the same number of forward passes updated both
        np.testing.assert_allclose(to_np(em[1].running_mean), to_np(tm[1].running_mean),
                                   rtol=1e-12, atol=1e-12)


def test_hessian_through_instance_norm_matches_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4))
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    einorm = nn.InstanceNorm1d(3, affine=True).double()
    tinorm = torch.nn.InstanceNorm1d(3, affine=True).double()
    with ember.no_grad():
        einorm.weight.copy_(ember.tensor(w))
        einorm.bias.copy_(ember.tensor(b))
    copy_weights(einorm, tinorm)
    got = ember.func.hessian(lambda x: (einorm(x) ** 3).sum())(ember.tensor(x))
    expected = torch.autograd.functional.hessian(lambda x: (tinorm(x) ** 3).sum(), torch.tensor(x))
    np.testing.assert_allclose(to_np(got), to_np(expected), rtol=1e-8, atol=1e-8)
