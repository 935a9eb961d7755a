"""ember.nn.init: exact fills, distribution statistics, gains and errors (PyTorch's values)."""

from __future__ import annotations

import math

import ember
import numpy as np
import pytest
from ember.nn import init
from nn_helpers import to_np, torch


@pytest.mark.parametrize(
    "args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",), ("leaky_relu",),
             ("leaky_relu", 0.2), ("leaky_relu", 1), ("selu",)]
)
def test_calculate_gain_matches_torch(args):
    pytest.importorskip("torch")
    assert init.calculate_gain(*args) == torch.nn.init.calculate_gain(*args)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_fans():
    assert init._calculate_fan_in_and_fan_out(ember.empty(3, 4, 5, 6)) == (120, 90)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(ember.empty(3))


def test_exact_fills():
    t = ember.empty(3, 4)
    assert to_np(init.constant_(t, 2.5)).tolist() == [[2.5] * 4] * 3
    assert to_np(init.ones_(t)).sum() == 12
    assert to_np(init.zeros_(t)).sum() == 0
    np.testing.assert_array_equal(to_np(init.eye_(t)), np.eye(3, 4, dtype=np.float32))
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(ember.empty(2, 2, 2))


@pytest.mark.parametrize("shape,groups", [((4, 2, 3), 1), ((6, 3, 3, 3), 2), ((4, 4, 3, 3, 3), 4), ((2, 5, 3), 1)])
def test_dirac_matches_torch(shape, groups):
    pytest.importorskip("torch")
    ours = init.dirac_(ember.empty(*shape), groups=groups)
    theirs = torch.nn.init.dirac_(torch.empty(*shape), groups=groups)
    np.testing.assert_array_equal(to_np(ours), theirs.numpy())


def test_dirac_errors():
    with pytest.raises(ValueError, match="3, 4, or 5"):
        init.dirac_(ember.empty(2, 2))
    with pytest.raises(ValueError, match="divisible by groups"):
        init.dirac_(ember.empty(3, 2, 3), groups=2)


def test_init_does_not_record_gradients():
    w = ember.nn.Parameter(ember.empty(3, 3))
    for fn in (init.uniform_, init.normal_, init.xavier_uniform_, init.kaiming_normal_, init.orthogonal_):
        out = fn(w)
        assert out is w and w.is_leaf and w.grad_fn is None


def _stats(t):
    a = to_np(t).ravel().astype(np.float64)
    return a.mean(), a.std()


@pytest.mark.parametrize(
    "fn,kwargs,std",
    [
        (init.uniform_, dict(a=-2.0, b=4.0), 6 / math.sqrt(12)),
        (init.normal_, dict(mean=1.0, std=0.5), 0.5),
        (init.xavier_uniform_, dict(gain=2.0), 2.0 * math.sqrt(2 / (200 + 300))),
        (init.xavier_normal_, dict(), math.sqrt(2 / (200 + 300))),
        (init.kaiming_uniform_, dict(nonlinearity="relu"), math.sqrt(2) / math.sqrt(300)),
        (init.kaiming_normal_, dict(mode="fan_out", nonlinearity="relu"), math.sqrt(2) / math.sqrt(200)),
        # Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        (init.kaiming_uniform_, dict(a=math.sqrt(5)), 1 / math.sqrt(300) / math.sqrt(3)),
    ],
)
def test_distribution_statistics(fn, kwargs, std):
    ember.manual_seed(0)
    t = fn(ember.empty(200, 300), **kwargs)
    mean, s = _stats(t)
    expected_mean = 1.0 if fn in (init.uniform_, init.normal_) else 0.0
    assert abs(mean - expected_mean) < 0.05 * std  # 60000 samples: the mean's std is std / 245
    assert abs(s - std) < 0.02 * std


def test_kaiming_uniform_bounds_and_modes():
    t = init.kaiming_uniform_(ember.empty(50, 20), a=0.1, mode="fan_out", nonlinearity="leaky_relu")
    bound = math.sqrt(3) * math.sqrt(2 / (1 + 0.1**2)) / math.sqrt(50)
    assert np.abs(to_np(t)).max() <= bound
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(ember.empty(2, 2), mode="fan_avg")
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(ember.empty(0, 3))


def test_trunc_normal():
    ember.manual_seed(0)
    t = init.trunc_normal_(ember.empty(100000), mean=0.5, std=1.0, a=-0.5, b=1.0)
    a = to_np(t)
    assert a.min() >= -0.5 and a.max() <= 1.0
    # a normal truncated to [-1, 0.5] sigma around its mean: mean 0.5 + std * (phi(-1) - phi(.5)) / Z
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))  # noqa: E731
    expected = 0.5 + (phi(-1) - phi(0.5)) / (cdf(0.5) - cdf(-1))
    assert abs(a.mean() - expected) < 0.01
    with pytest.raises(ValueError, match="a < b"):
        init.trunc_normal_(ember.empty(3), a=1.0, b=0.0)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (3, 2, 2), (5, 5)])
def test_orthogonal(shape):
    t = init.orthogonal_(ember.empty(*shape), gain=2.0)
    m = to_np(t).reshape(shape[0], -1).astype(np.float64)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, 4.0 * np.eye(gram.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(ember.empty(3))


def test_sparse():
    t = init.sparse_(ember.empty(10, 6), sparsity=0.25, std=0.1)
    zeros = (to_np(t) == 0).sum(axis=0)
    assert zeros.tolist() == [3] * 6
    with pytest.raises(ValueError, match="2 dimensions"):
        init.sparse_(ember.empty(2, 2, 2), 0.1)


def test_generator_makes_init_reproducible():
    g1, g2 = ember.Generator(), ember.Generator()
    g1.manual_seed(3)
    g2.manual_seed(3)
    a = init.xavier_normal_(ember.empty(4, 4), generator=g1)
    b = init.xavier_normal_(ember.empty(4, 4), generator=g2)
    np.testing.assert_array_equal(to_np(a), to_np(b))


def test_rejects_non_tensor():
    with pytest.raises(TypeError, match="expected an ember.Tensor"):
        init.normal_([1.0, 2.0])
