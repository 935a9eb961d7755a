"""Random numbers on the CUDA device: reproducible per seed (ember.manual_seed and
ember.cuda.manual_seed), fresh on every call, and distributed right (moments over 1M samples,
ranges, permutations, multinomial frequencies). Skipped without a CUDA device."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from core_helpers import to_np

pytestmark = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")

N = 1 << 20


def host(t):
    assert t.device.type == "cuda"
    return to_np(t.cpu())


def test_manual_seed_reproduces_and_calls_differ():
    ember.manual_seed(123)
    a = host(ember.rand(1000, device="cuda"))
    b = host(ember.rand(1000, device="cuda"))
    ember.manual_seed(123)
    a2 = host(ember.rand(1000, device="cuda"))
    b2 = host(ember.rand(1000, device="cuda"))
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)
    assert not np.array_equal(a, b)
    ember.manual_seed(124)
    assert not np.array_equal(a, host(ember.rand(1000, device="cuda")))


def test_cuda_manual_seed_and_initial_seed():
    ember.cuda.manual_seed(7)
    assert ember.cuda.initial_seed() == 7
    a = host(ember.randn(513, device="cuda"))
    ember.cuda.manual_seed_all(7)
    np.testing.assert_array_equal(a, host(ember.randn(513, device="cuda")))
    # the CPU generator is a separate stream: seeding CUDA does not touch it
    ember.manual_seed(0)
    c = to_np(ember.rand(4))
    ember.cuda.manual_seed(99)
    ember.manual_seed(0)
    np.testing.assert_array_equal(c, to_np(ember.rand(4)))


def test_explicit_generator_reproduces():
    g = ember.Generator()
    g.manual_seed(5)
    a = host(ember.rand(100, generator=g, device="cuda"))
    g.manual_seed(5)
    np.testing.assert_array_equal(a, host(ember.rand(100, generator=g, device="cuda")))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_uniform_moments_and_range(dtype):
    ember.manual_seed(1)
    x = host(ember.rand(N, device="cuda", dtype=getattr(ember, dtype)))
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 5e-3
    assert abs(x.var() - 1 / 12) < 5e-3
    t = ember.empty(N, device="cuda")
    t.uniform_(-2.0, 3.0)
    y = host(t)
    assert y.min() >= -2.0 and y.max() < 3.0
    assert abs(y.mean() - 0.5) < 2e-2


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_normal_moments(dtype):
    ember.manual_seed(2)
    x = host(ember.randn(N + 3, device="cuda", dtype=getattr(ember, dtype)))  # odd tail
    assert np.isfinite(x).all()
    assert abs(x.mean()) < 5e-3
    assert abs(x.std() - 1.0) < 5e-3
    assert abs(((x - x.mean()) ** 3).mean()) < 2e-2  # symmetric
    assert abs((x**4).mean() - 3.0) < 5e-2  # kurtosis of a normal
    t = ember.empty(N, device="cuda", dtype=getattr(ember, dtype))
    t.normal_(2.0, 3.0)
    y = host(t)
    assert abs(y.mean() - 2.0) < 2e-2 and abs(y.std() - 3.0) < 2e-2


def test_normal_strided_self():
    ember.manual_seed(3)
    t = ember.empty(512, 1024, device="cuda").t()
    t.normal_()
    y = host(t)
    assert abs(y.mean()) < 1e-2 and abs(y.std() - 1.0) < 1e-2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exponential_moments(dtype):
    t = ember.empty(N, device="cuda", dtype=getattr(ember, dtype))
    t.exponential_(2.0)
    x = host(t)
    assert x.min() >= 0.0 and np.isfinite(x).all()
    assert abs(x.mean() - 0.5) < 5e-3
    assert abs(x.var() - 0.25) < 5e-3


def test_random_integers():
    t = ember.empty(N, device="cuda", dtype=ember.int64)
    t.random_(0, 10)
    x = host(t)
    assert x.min() == 0 and x.max() == 9
    assert abs(x.mean() - 4.5) < 2e-2
    assert set(np.unique(x)) == set(range(10))
    t.random_(-3, 2)
    x = host(t)
    assert x.min() == -3 and x.max() == 1
    t.random_(5)
    assert host(t).max() == 4
    t8 = ember.empty(N, device="cuda", dtype=ember.int8)
    t8.random_()  # [0, 127]
    x8 = host(t8)
    assert x8.min() == 0 and x8.max() == 127
    tb = ember.empty(1000, device="cuda", dtype=ember.bool)
    tb.random_()
    assert 300 < host(tb).sum() < 700
    tf = ember.empty(N, device="cuda", dtype=ember.int64)
    tf.random_(0, 1 << 40)  # wide range: 64-bit draws
    xf = host(tf)
    assert xf.min() >= 0 and xf.max() < 2.0**40 and abs(xf.mean() / 2.0**39 - 1) < 1e-2
    with pytest.raises(RuntimeError, match="from"):
        t.random_(5, 5)


def test_bernoulli_forms():
    ember.manual_seed(4)
    p = ember.full((N,), 0.3, device="cpu").to("cuda")
    x = host(ember.bernoulli(p))
    assert set(np.unique(x)) <= {0.0, 1.0}
    assert abs(x.mean() - 0.3) < 5e-3
    y = host(ember.bernoulli(ember.empty(N, device="cuda"), 0.8))
    assert abs(y.mean() - 0.8) < 5e-3
    t = ember.empty(N, device="cuda", dtype=ember.int64)
    t.bernoulli_(0.25)
    assert abs(host(t).mean() - 0.25) < 5e-3
    probs = ember.tensor([0.0, 1.0, 0.5]).to("cuda")
    t3 = ember.empty(200000, 3, device="cuda")
    t3.bernoulli_(probs)
    m = host(t3).mean(axis=0)
    assert m[0] == 0.0 and m[1] == 1.0 and abs(m[2] - 0.5) < 1e-2
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        ember.bernoulli(ember.tensor([1.5]).to("cuda"))


def test_multinomial():
    ember.manual_seed(5)
    w = ember.tensor([1.0, 0.0, 3.0, 4.0]).to("cuda")
    s = host(ember.multinomial(w, 200000, replacement=True))
    freq = np.bincount(s, minlength=4) / s.size
    np.testing.assert_allclose(freq, [0.125, 0.0, 0.375, 0.5], atol=5e-3)
    rows = ember.tensor([[1.0, 1.0, 1.0, 1.0, 0.0], [0.0, 5.0, 0.0, 1.0, 1.0]]).to("cuda")
    r = host(ember.multinomial(rows, 3))
    assert r.shape == (2, 3)
    for row, p in zip(r, to_np(rows.cpu())):
        assert len(set(row)) == 3 and all(p[k] > 0 for k in row)
    # without replacement: the first draw follows the weights
    firsts = host(ember.multinomial(ember.tensor([[1.0, 3.0]] * 20000).to("cuda"), 1))[:, 0]
    assert abs(firsts.mean() - 0.75) < 2e-2
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        ember.multinomial(ember.tensor([0.0, 0.0]).to("cuda"), 1)


def test_randperm_on_cuda_is_a_permutation():
    ember.manual_seed(6)
    p = ember.randperm(1000, device="cuda")
    assert p.device.type == "cuda"
    x = host(p)
    assert sorted(x.tolist()) == list(range(1000))
    ember.manual_seed(6)
    np.testing.assert_array_equal(x, host(ember.randperm(1000, device="cuda")))


def test_seed_applied_before_first_use():
    # a seed given through ember.cuda before any CUDA random op still rules the first draw
    ember.cuda.manual_seed(11)
    a = host(ember.rand(10, device="cuda"))
    ember.manual_seed(11)
    np.testing.assert_array_equal(a, host(ember.rand(10, device="cuda")))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_one_generator_state_draws_the_cpu_stream(dtype):
    # The CUDA kernels use the CPU kernels' counters (value i of a call from counter base + i /
    # per) and transforms, so one Generator state draws the same numbers on both devices; float
    # normals differ only by the devices' log / sincos rounding.
    dt = getattr(ember, dtype)
    g = ember.Generator()

    def both(fill, n=1027):  # an odd count: the last counter is partly used
        g.manual_seed(77)
        c = to_np(fill(ember.empty(n, dtype=dt)))
        g.manual_seed(77)
        return c, host(fill(ember.empty(n, dtype=dt, device="cuda")))

    c, d = both(lambda t: t.uniform_(-2.0, 3.0, generator=g))
    np.testing.assert_array_equal(d, c)
    c, d = both(lambda t: t.exponential_(1.5, generator=g))
    np.testing.assert_allclose(d, c, rtol=1e-3 if dtype == "float16" else 1e-6)
    c, d = both(lambda t: t.normal_(0.5, 2.0, generator=g))
    tol = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3}[dtype]
    np.testing.assert_allclose(d, c, rtol=tol, atol=10 * tol)
    c, d = both(lambda t: t.bernoulli_(0.3, generator=g))
    np.testing.assert_array_equal(d, c)
    # a strided self: drawn in row-major order into a temporary, then copied in
    g.manual_seed(78)
    c = to_np(ember.empty(31, 33, dtype=dt).t().uniform_(generator=g))
    g.manual_seed(78)
    d = host(ember.empty(31, 33, dtype=dt, device="cuda").t().uniform_(generator=g))
    np.testing.assert_array_equal(d, c)


def test_one_generator_state_draws_the_cpu_integers():
    g = ember.Generator()
    for dt, args in ((ember.int64, (0, 10)), (ember.int64, (-(1 << 40), 1 << 40)),
                     (ember.int64, ()), (ember.int8, ()), (ember.bool, ())):
        g.manual_seed(5)
        c = to_np(ember.empty(1029, dtype=dt).random_(*args, generator=g))
        g.manual_seed(5)
        d = host(ember.empty(1029, dtype=dt, device="cuda").random_(*args, generator=g))
        np.testing.assert_array_equal(d, c)
    p = ember.rand(3, 7)
    for replacement, n in ((True, 50), (False, 5)):
        g.manual_seed(9)
        c = to_np(ember.multinomial(p, n, replacement, generator=g))
        g.manual_seed(9)
        d = host(ember.multinomial(p.to("cuda"), n, replacement, generator=g))
        np.testing.assert_array_equal(d, c)
