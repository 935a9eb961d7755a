"""The CPU FFT kernel's code paths against NumPy's pocketfft: every radix pass (8, 4, 2, 5, 3
and the generic odd primes), Bluestein lengths, batches in lanes and their remainders, lone
long transforms with the passes split over threads, even/odd real transforms and their
inverses, non-last dims, and the plan cache shared across lengths, dtypes and threads."""

import threading

import ember
import numpy as np
import pytest


def rand(*shape, complex_=False, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if complex_:
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def rel_err(got, want):
    got = got.numpy() if hasattr(got, "numpy") else got
    assert got.shape == want.shape
    if want.size == 0:
        return 0.0
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-300))


# each length exercises a pass or a mix: 8^k, 8^k * 4, 8^k * 2, 5, 3, 7, 11, 61 (largest generic
# prime), 67 and 1009 (Bluestein), mixed 2^a 3^b 5^c 7 and a prime square
LENGTHS = [1, 2, 3, 4, 5, 7, 8, 11, 16, 32, 61, 64, 67, 120, 128, 243, 343, 360, 512, 625,
           1000, 1009, 2048, 3 * 5 * 7 * 8, 4096, 6561]


@pytest.mark.parametrize("n", LENGTHS)
def test_radix_paths_complex128(n):
    # 19 lines: one group of 8 lanes, then 11 (one group + 3 single lines)
    a = rand(19, n, complex_=True, seed=n, dtype=np.complex128)
    z = ember.tensor(a)
    assert rel_err(ember.fft.fft(z), np.fft.fft(a)) <= 1e-12
    assert rel_err(ember.fft.ifft(z), np.fft.ifft(a)) <= 1e-12
    one = ember.tensor(a[:1])  # a lone line (no lanes)
    assert rel_err(ember.fft.fft(one), np.fft.fft(a[:1])) <= 1e-12


@pytest.mark.parametrize("n", [1, 2, 3, 8, 61, 67, 1000, 1009, 4096])
def test_radix_paths_complex64(n):
    a = rand(35, n, complex_=True, seed=n, dtype=np.complex64)  # 2 groups of 16 + 3
    got = ember.fft.fft(ember.tensor(a))
    assert got.dtype == ember.complex64
    assert rel_err(got, np.fft.fft(a.astype(np.complex128))) <= 2e-6 * max(1.0, np.log2(n))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 9, 10, 17, 64, 67, 98, 1000, 1009, 1024])
def test_rfft_irfft_even_odd(n):
    r = rand(21, n, seed=n)
    x = ember.tensor(r)
    spec = np.fft.rfft(r)
    assert rel_err(ember.fft.rfft(x), spec) <= 1e-12
    assert rel_err(ember.fft.irfft(ember.tensor(spec), n=n), r) <= 1e-12
    # irfft ignores the imaginary parts of bins 0 and n / 2 (as pocketfft and torch)
    noisy = spec.copy()
    noisy[:, 0] += 0.5j
    if n % 2 == 0:
        noisy[:, -1] -= 0.25j
    assert rel_err(ember.fft.irfft(ember.tensor(noisy), n=n), np.fft.irfft(noisy, n=n)) <= 1e-12
    # fewer bins than n // 2 + 1 (zero-padded) and more (trimmed)
    for m in (max(1, n // 4), n // 2 + 3):
        s = np.fft.rfft(rand(3, 2 * m, seed=m))[:, :m]
        assert rel_err(ember.fft.irfft(ember.tensor(s), n=n), np.fft.irfft(s, n=n)) <= 1e-12


def test_float32_rfft_irfft():
    r = rand(40, 1024, seed=3, dtype=np.float32)
    got = ember.fft.rfft(ember.tensor(r))
    assert got.dtype == ember.complex64
    assert rel_err(got, np.fft.rfft(r.astype(np.float64))) <= 1e-5
    back = ember.fft.irfft(got, n=1024)
    assert back.dtype == ember.float32
    assert rel_err(back, r.astype(np.float64)) <= 1e-5


def test_non_last_dims_and_strided_inputs():
    a = rand(6, 40, 20, complex_=True, seed=1, dtype=np.complex128)
    z = ember.tensor(a)
    assert rel_err(ember.fft.fft(z, dim=1), np.fft.fft(a, axis=1)) <= 1e-12
    assert rel_err(ember.fft.fft(z, dim=0), np.fft.fft(a, axis=0)) <= 1e-12
    assert rel_err(ember.fft.fftn(z), np.fft.fftn(a)) <= 1e-12
    t = z.transpose(0, 2)  # non-contiguous input
    assert rel_err(ember.fft.ifft(t, dim=1), np.fft.ifft(a.transpose(2, 1, 0), axis=1)) <= 1e-12
    r = rand(6, 40, 20, seed=2)
    x = ember.tensor(r)
    assert rel_err(ember.fft.rfft(x, dim=1), np.fft.rfft(r, axis=1)) <= 1e-12
    assert rel_err(ember.fft.rfftn(x), np.fft.rfftn(r)) <= 1e-12
    s = np.fft.rfftn(r)
    assert rel_err(ember.fft.irfftn(ember.tensor(s), s=r.shape), r) <= 1e-12
    xt = x.transpose(1, 2)
    assert rel_err(ember.fft.rfft(xt), np.fft.rfft(r.transpose(0, 2, 1))) <= 1e-12


@pytest.mark.parametrize("n", [1 << 20, 3 * (1 << 15)])
def test_long_transform_threads(n):
    # a lone long line: its passes split over the pool with two threads, serial with one
    a = rand(n, complex_=True, seed=7, dtype=np.complex128)
    want = np.fft.fft(a)
    old = ember.get_num_threads()
    try:
        for threads in (1, 2):
            ember.set_num_threads(threads)
            assert rel_err(ember.fft.fft(ember.tensor(a)), want) <= 1e-12
    finally:
        ember.set_num_threads(old)
    r = a.real.copy()
    assert rel_err(ember.fft.rfft(ember.tensor(r)), np.fft.rfft(r)) <= 1e-12


def test_plan_cache_across_lengths_dtypes_and_threads():
    # more lengths than the cache holds (it starts over), each in both dtypes, from 4 threads
    lengths = list(range(1, 90)) + [1009, 1024, 97]
    data = {n: rand(3, n, complex_=True, seed=n, dtype=np.complex128) for n in lengths}
    errors = []

    def work(order):
        try:
            for n in order:
                a = data[n]
                got = ember.fft.fft(ember.tensor(a))
                if rel_err(got, np.fft.fft(a)) > 1e-12:
                    errors.append(("c128", n))
                got32 = ember.fft.fft(ember.tensor(a.astype(np.complex64)))
                if rel_err(got32, np.fft.fft(a)) > 1e-5:
                    errors.append(("c64", n))
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(lengths[i::2] + lengths,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_empty_batch_and_size_one():
    z = ember.zeros(0, 8, dtype=ember.complex64)
    assert tuple(ember.fft.fft(z).shape) == (0, 8)
    assert tuple(ember.fft.rfft(ember.zeros(0, 8)).shape) == (0, 5)
    one = ember.tensor(np.array([[2.0 - 1.0j]]))
    assert ember.fft.fft(one).numpy()[0, 0] == 2.0 - 1.0j
    assert ember.fft.irfft(ember.tensor(np.array([3.0 + 4.0j])), n=1).numpy()[0] == 3.0
