"""Random numbers (ops/creation.yaml): reproducibility, statistics and errors."""

from __future__ import annotations

import ember
import numpy as np
import pytest

N = 1_000_000


def npy(t):
    return np.asarray(t if t.dtype not in (ember.bfloat16,) else t.to(ember.float32))


DRAWS = {
    "rand": lambda g: ember.rand(1000, generator=g),
    "randn": lambda g: ember.randn(3, 333, generator=g),
    "randn64": lambda g: ember.randn(999, generator=g, dtype=ember.float64),
    "randint": lambda g: ember.randint(-5, 7, (1001,), generator=g),
    "randperm": lambda g: ember.randperm(500, generator=g),
    "bernoulli": lambda g: ember.bernoulli(ember.full((999,), 0.3), generator=g),
    "multinomial": lambda g: ember.multinomial(
        ember.tensor([0.1, 0.2, 0.7]), 50, True, generator=g
    ),
    "multinomial_noreplace": lambda g: ember.multinomial(ember.ones(4, 20), 5, generator=g),
    "uniform_": lambda g: ember.empty(77).uniform_(-2, 3, generator=g),
    "normal_": lambda g: ember.empty(77, dtype=ember.float16).normal_(1, 2, generator=g),
    "exponential_": lambda g: ember.empty(77).exponential_(2.0, generator=g),
    "random_": lambda g: ember.empty(77, dtype=ember.int32).random_(0, 1000, generator=g),
    "normal": lambda g: ember.normal(0.0, 1.0, (5, 5), generator=g),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_manual_seed_reproducible(name):
    f = DRAWS[name]
    ember.manual_seed(1234)
    a = npy(f(None)).copy()
    b = npy(f(None)).copy()
    ember.manual_seed(1234)
    a2 = npy(f(None)).copy()
    np.testing.assert_array_equal(a, a2)
    assert not np.array_equal(a, b)  # the stream moves on


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_generator_objects(name):
    f = DRAWS[name]
    g1 = ember.Generator().manual_seed(7)
    g2 = ember.Generator()
    g2.manual_seed(7)
    ember.manual_seed(99)
    first_default = npy(DRAWS["rand"](None)).copy()
    np.testing.assert_array_equal(npy(f(g1)), npy(f(g2)))
    # Drawing from a private generator leaves the default one alone.
    ember.manual_seed(99)
    f(g1)
    np.testing.assert_array_equal(npy(DRAWS["rand"](None)), first_default)


def test_generator_state_roundtrip():
    g = ember.Generator().manual_seed(3)
    ember.rand(10, generator=g)
    state = g.get_state()
    a = npy(ember.randn(20, generator=g)).copy()
    g.set_state(state)
    np.testing.assert_array_equal(npy(ember.randn(20, generator=g)), a)


def test_independent_of_thread_count():
    n = ember.get_num_threads()
    out = []
    try:
        for threads in (1, 2, 3):
            ember.set_num_threads(threads)
            g = ember.Generator().manual_seed(5)
            out.append(
                np.concatenate(
                    [npy(ember.rand(300_001, generator=g)), npy(ember.randn(200_003, generator=g))]
                )
            )
    finally:
        ember.set_num_threads(n)
    np.testing.assert_array_equal(out[0], out[1])
    np.testing.assert_array_equal(out[0], out[2])


def test_rand_stats():
    g = ember.Generator().manual_seed(0)
    x = npy(ember.rand(N, generator=g))
    assert x.dtype == np.float32 and x.min() >= 0 and x.max() < 1
    assert abs(x.mean() - 0.5) < 3e-3 and abs(x.var() - 1 / 12) < 3e-3
    y = npy(ember.rand(N, generator=g, dtype=ember.float64))
    assert y.dtype == np.float64 and abs(y.mean() - 0.5) < 3e-3
    assert len(np.unique(y[:1000])) == 1000


def test_rand_half_types_stay_below_one():
    g = ember.Generator().manual_seed(9)
    for dt in (ember.float16, ember.bfloat16):
        x = npy(ember.rand(200_000, generator=g, dtype=dt).to(ember.float32))
        assert x.min() >= 0 and x.max() < 1 and abs(x.mean() - 0.5) < 1e-2


def test_randn_stats():
    g = ember.Generator().manual_seed(1)
    for dt in (ember.float32, ember.float64):
        x = npy(ember.randn(N, generator=g, dtype=dt))
        assert abs(x.mean()) < 5e-3 and abs(x.std() - 1) < 5e-3
        assert abs((np.abs(x) < 1).mean() - 0.6827) < 3e-3  # shape, not just moments
    for dt in (ember.float16, ember.bfloat16):
        t = ember.randn(100_000, generator=g, dtype=dt)
        assert t.dtype is dt
        x = npy(t.to(ember.float32))
        assert abs(x.mean()) < 2e-2 and abs(x.std() - 1) < 2e-2


def test_inplace_fills_stats_and_views():
    g = ember.Generator().manual_seed(2)
    x = npy(ember.empty(N).uniform_(-3, 5, generator=g))
    assert x.min() >= -3 and x.max() <= 5 and abs(x.mean() - 1) < 2e-2
    x = npy(ember.empty(N, dtype=ember.float64).normal_(2, 0.5, generator=g))
    assert abs(x.mean() - 2) < 3e-3 and abs(x.std() - 0.5) < 3e-3
    x = npy(ember.empty(N).exponential_(4.0, generator=g))
    assert x.min() >= 0 and abs(x.mean() - 0.25) < 3e-3
    # A strided view: only its elements change.
    base = ember.zeros(6, 4)
    view = base[::2]
    assert view.uniform_(1, 2, generator=g) is view
    b = npy(base)
    assert np.all(b[1::2] == 0) and np.all((b[::2] >= 1) & (b[::2] < 2))
    t = ember.zeros(3)
    v = t._version if hasattr(t, "_version") else None
    t.normal_()
    if v is not None:
        assert t._version > v


def test_randint_and_random_():
    g = ember.Generator().manual_seed(3)
    x = npy(ember.randint(-5, 7, (N,), generator=g))
    assert x.dtype == np.int64 and x.min() == -5 and x.max() == 6
    counts = np.bincount(x + 5)
    assert np.all(np.abs(counts / N - 1 / 12) < 3e-3)
    assert ember.randint(10, (2, 3)).shape == (2, 3)
    assert ember.randint(0, 10, (4,), dtype=ember.float32).dtype is ember.float32
    u8 = npy(ember.empty(100_000, dtype=ember.uint8).random_(generator=g))
    assert u8.min() == 0 and u8.max() == 255
    b = npy(ember.empty(1000, dtype=ember.bool).random_(generator=g))
    assert b.any() and not b.all()
    f = npy(ember.empty(1000).random_(10, generator=g))
    assert f.min() >= 0 and f.max() <= 9 and np.all(f == np.round(f))
    big = npy(ember.empty(1000, dtype=ember.int64).random_(generator=g))
    assert big.min() >= 0 and big.max() > 2**60
    r = npy(ember.empty(1000, dtype=ember.int64).random_(-(2**62), 2**62, generator=g))
    assert r.min() < -(2**60) and r.max() > 2**60
    assert ember.randint_like(ember.zeros(2, 2), 3).dtype is ember.float32


def test_bernoulli():
    g = ember.Generator().manual_seed(4)
    x = npy(ember.bernoulli(ember.full((N,), 0.3), generator=g))
    assert set(np.unique(x)) <= {0.0, 1.0} and abs(x.mean() - 0.3) < 3e-3
    p = ember.tensor([0.0, 1.0, 0.5], dtype=ember.float64)
    r = ember.bernoulli(p, generator=g)
    assert r.dtype is ember.float64 and r[0].item() == 0 and r[1].item() == 1
    y = npy(ember.bernoulli(ember.zeros(N), 0.7, generator=g))
    assert abs(y.mean() - 0.7) < 3e-3
    z = ember.ones(N, dtype=ember.int64).bernoulli_(0.25, generator=g)
    assert z.dtype is ember.int64 and abs(npy(z).mean() - 0.25) < 3e-3
    w = ember.empty(1000, 2).bernoulli_(ember.tensor([0.0, 1.0]), generator=g)
    assert np.all(npy(w)[:, 0] == 0) and np.all(npy(w)[:, 1] == 1)
    assert abs(npy(ember.empty(N).bernoulli_(generator=g)).mean() - 0.5) < 3e-3


def test_multinomial():
    g = ember.Generator().manual_seed(5)
    p = np.array([0.1, 0.0, 0.6, 0.3])
    x = npy(ember.multinomial(ember.tensor(p), 200_000, True, generator=g))
    assert x.dtype == np.int64 and x.shape == (200_000,)
    np.testing.assert_allclose(np.bincount(x, minlength=4) / x.size, p, atol=5e-3)
    rows = ember.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]], dtype=ember.float64)
    assert ember.multinomial(rows, 4, True, generator=g).tolist() == [[0] * 4, [2] * 4]
    # Without replacement: distinct categories, first pick distributed like p.
    w = ember.tensor([1.0, 2.0, 3.0, 4.0])
    s = npy(
        ember.multinomial(
            w.expand(20000, 4) if hasattr(w, "expand") else ember.ones(20000, 1) * w, 4, generator=g
        )
    )
    assert np.all(np.sort(s, axis=1) == np.arange(4))
    np.testing.assert_allclose(
        np.bincount(s[:, 0], minlength=4) / len(s), [0.1, 0.2, 0.3, 0.4], atol=1.5e-2
    )
    assert sorted(ember.multinomial(ember.tensor([1.0, 0.0]), 2, generator=g).tolist()) == [0, 1]


def test_randperm():
    g = ember.Generator().manual_seed(6)
    for n in (0, 1, 2, 7, 100_000):
        p = npy(ember.randperm(n, generator=g))
        assert p.dtype == np.int64
        np.testing.assert_array_equal(np.sort(p), np.arange(n))
    p = npy(ember.randperm(1000, generator=g))
    assert not np.array_equal(p, np.arange(1000))
    firsts = np.array([ember.randperm(4, generator=g)[0].item() for _ in range(4000)])
    assert np.all(np.abs(np.bincount(firsts, minlength=4) / 4000 - 0.25) < 0.04)
    f = ember.randperm(5, dtype=ember.float32, generator=g)
    assert f.dtype is ember.float32 and sorted(f.tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_like_and_normal_overloads():
    g = ember.Generator().manual_seed(8)
    base = ember.zeros(2, 3, dtype=ember.float64)
    assert ember.rand_like(base, generator=g).dtype is ember.float64
    assert ember.randn_like(base).shape == (2, 3)
    m = ember.full((N,), 3.0)
    x = npy(ember.normal(m, 2.0, generator=g))
    assert abs(x.mean() - 3) < 1e-2 and abs(x.std() - 2) < 1e-2
    x = npy(ember.normal(m, ember.full((N,), 0.5), generator=g))
    assert abs(x.std() - 0.5) < 3e-3
    x = npy(ember.normal(1.0, ember.full((N,), 0.1), generator=g))
    assert abs(x.mean() - 1) < 1e-3
    assert ember.normal(0.0, 1.0, (2, 2), dtype=ember.float64).dtype is ember.float64


def test_random_errors():
    with pytest.raises(
        RuntimeError,
        match=r"uniform_: expects to return a \[from, to\) range, but found from=1 > to=0",
    ):
        ember.empty(3).uniform_(1, 0)
    with pytest.raises(RuntimeError, match="normal_: expects std >= 0.0, but found std -1"):
        ember.empty(3).normal_(0, -1)
    with pytest.raises(
        RuntimeError, match="exponential_: expects lambda > 0.0, but found lambda=0"
    ):
        ember.empty(3).exponential_(0)
    with pytest.raises(TypeError, match="uniform_: not implemented for dtype int64"):
        ember.empty(3, dtype=ember.int64).uniform_()
    with pytest.raises(TypeError, match="rand: expected a floating-point dtype, but got int64"):
        ember.rand(3, dtype=ember.int64)
    with pytest.raises(TypeError, match="randn: expected a floating-point dtype"):
        ember.randn(3, dtype=ember.int32)
    with pytest.raises(
        RuntimeError, match="random_: expects 'from' to be less than 'to', but got from=5 >= to=5"
    ):
        ember.randint(5, 5, (3,))
    with pytest.raises(RuntimeError, match="out of bounds for uint8"):
        ember.randint(0, 300, (3,), dtype=ember.uint8)
    with pytest.raises(RuntimeError, match="out of bounds for uint8"):
        ember.randint(-5, 5, (3,), dtype=ember.uint8)
    with pytest.raises(
        RuntimeError, match=r"bernoulli_: expects p to be in \[0, 1\], but got p=1.5"
    ):
        ember.ones(3).bernoulli_(1.5)
    with pytest.raises(
        RuntimeError, match=r"bernoulli: expects all probabilities to be in \[0, 1\]"
    ):
        ember.bernoulli(ember.tensor([0.5, 1.5]))
    with pytest.raises(TypeError, match="bernoulli: expected a floating-point tensor"):
        ember.bernoulli(ember.tensor([1, 0]))
    with pytest.raises(RuntimeError, match="bernoulli_: .*broadcast"):
        ember.ones(3).bernoulli_(ember.tensor([0.1, 0.2]))
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        ember.multinomial(ember.tensor([1.0, 2.0]), 3)
    with pytest.raises(
        RuntimeError, match="probability tensor contains either `inf`, `nan` or element < 0"
    ):
        ember.multinomial(ember.tensor([1.0, -1.0]), 1)
    with pytest.raises(
        RuntimeError, match=r"invalid multinomial distribution \(sum of probabilities <= 0\)"
    ):
        ember.multinomial(ember.tensor([0.0, 0.0]), 1)
    with pytest.raises(
        TypeError, match="multinomial: only supports floating-point dtypes for input, got: int64"
    ):
        ember.multinomial(ember.tensor([1, 2]), 1)
    with pytest.raises(RuntimeError, match="prob_dist must be 1 or 2 dim"):
        ember.multinomial(ember.ones(2, 2, 2), 1)
    with pytest.raises(RuntimeError, match="cannot sample n_sample <= 0 samples"):
        ember.multinomial(ember.ones(2), 0)
    with pytest.raises(RuntimeError, match="randperm: n must be non-negative, got -1"):
        ember.randperm(-1)
    with pytest.raises(
        RuntimeError, match="randperm: n is too large for result tensor type: uint8"
    ):
        ember.randperm(300, dtype=ember.uint8)
    with pytest.raises(RuntimeError, match="normal: expects all elements of std >= 0.0"):
        ember.normal(ember.zeros(2), ember.tensor([1.0, -1.0]))


def test_fork_rng_takes_torch_arguments():
    # issue 15: programs write `with torch.random.fork_rng(devices=[]):`
    ember.manual_seed(3)
    with ember.random.fork_rng(devices=[]):
        inside = ember.rand(3)
    with ember.random.fork_rng(devices=[], enabled=True, device_type="cuda"):
        again = ember.rand(3)
    assert bool((inside == again).all()) and bool((ember.rand(3) == inside).all())
    with ember.random.fork_rng(enabled=False):
        ember.rand(1)  # not forked: the generator advances
    assert not bool((ember.rand(3) == inside).all())
    if not ember.cuda.is_available():
        with pytest.raises(RuntimeError, match=r"devices=\[0\] names cuda device 0, but there are 0"):
            with ember.random.fork_rng(devices=[0]):
                pass
    with pytest.raises(TypeError, match="device_type must be a str"):
        with ember.random.fork_rng(device_type=None):
            pass
