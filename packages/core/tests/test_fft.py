"""ember.fft and ember.stft/istft against NumPy's pocketfft and torch: sizes with every kind of
factor (powers of 2, 3, 5, small and large primes for Bluestein), all norms, batched and
non-contiguous inputs, dtypes, and the argument errors."""

import warnings

import ember
import numpy as np
import pytest

SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 15, 16, 30, 64, 97, 100, 243, 1009, 1024]
NORMS = [None, "backward", "ortho", "forward"]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def rand(*shape, complex_=False, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if complex_:
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def check(got, want, rtol=1e-12):
    """Relative accuracy against the size of the transform's values (as FFT error bounds go)."""
    got = got.numpy()
    assert got.shape == want.shape
    scale = max(np.abs(want).max(), 1e-300) if want.size else 1.0
    err = np.abs(got - want).max() / scale if want.size else 0.0
    assert err <= rtol, f"max relative error {err:.3g} > {rtol:g}"


@pytest.mark.parametrize("n", SIZES)
def test_fft_ifft_float64_sizes(n):
    a = rand(3, n, complex_=True, dtype=np.complex128)
    z = ember.tensor(a)
    check(ember.fft.fft(z), np.fft.fft(a))
    check(ember.fft.ifft(z), np.fft.ifft(a))
    r = rand(2, n)
    check(ember.fft.rfft(ember.tensor(r)), np.fft.rfft(r))
    check(ember.fft.irfft(ember.tensor(np.fft.rfft(r)), n=n), r)


@pytest.mark.parametrize("n", [7, 16, 97, 1009])
@pytest.mark.parametrize("norm", NORMS)
def test_norms(n, norm):
    a = rand(n, complex_=True, dtype=np.complex128, seed=n)
    r = rand(n, seed=n + 1)
    z, x = ember.tensor(a), ember.tensor(r)
    f = ember.fft
    check(f.fft(z, norm=norm), np.fft.fft(a, norm=norm))
    check(f.ifft(z, norm=norm), np.fft.ifft(a, norm=norm))
    check(f.rfft(x, norm=norm), np.fft.rfft(r, norm=norm))
    check(f.irfft(z[: n // 2 + 1], n=n, norm=norm), np.fft.irfft(a[: n // 2 + 1], n=n, norm=norm))
    check(f.hfft(z[: n // 2 + 1], n=n, norm=norm), np.fft.hfft(a[: n // 2 + 1], n=n, norm=norm))
    check(f.ihfft(x, norm=norm), np.fft.ihfft(r, norm=norm))


@pytest.mark.parametrize("n", [8, 13, 100, 1009])
def test_float32_results(n):
    a = rand(4, n, complex_=True, dtype=np.complex64)
    got = ember.fft.fft(ember.tensor(a))
    assert got.dtype is ember.complex64
    check(got, np.fft.fft(a.astype(np.complex128)), rtol=2e-6)
    r = rand(4, n, dtype=np.float32)
    got = ember.fft.rfft(ember.tensor(r))
    assert got.dtype is ember.complex64
    check(got, np.fft.rfft(r.astype(np.float64)), rtol=2e-6)
    back = ember.fft.irfft(got, n=n)
    assert back.dtype is ember.float32
    check(back, r.astype(np.float64), rtol=2e-6)


def test_result_dtypes_match_torch(torch):
    cases = [(np.float32, "fft"), (np.float64, "fft"), (np.int64, "fft"), (np.float32, "rfft"),
             (np.float64, "ihfft"), (np.int32, "rfft")]
    for dt, name in cases:
        a = np.arange(6).astype(dt)
        got = getattr(ember.fft, name)(ember.tensor(a))
        want = getattr(torch.fft, name)(torch.tensor(a))
        assert repr(got.dtype).split(".")[1] == str(want.dtype).split(".")[1], (dt, name)
        np.testing.assert_allclose(got.numpy(), want.resolve_conj().numpy(), rtol=1e-6, atol=1e-5)
    assert ember.fft.irfft(ember.ones(5, dtype=ember.complex128)).dtype is ember.float64
    assert ember.fft.hfft(ember.ones(5, dtype=ember.complex64)).dtype is ember.float32


def test_n_pads_and_trims():
    a = rand(2, 10, complex_=True, dtype=np.complex128)
    z = ember.tensor(a)
    for n in (1, 4, 10, 17):
        check(ember.fft.fft(z, n=n), np.fft.fft(a, n=n))
        check(ember.fft.ifft(z, n=n, dim=0), np.fft.ifft(a, n=n, axis=0))
        check(ember.fft.rfft(z.real, n=n), np.fft.rfft(a.real, n=n))
        check(ember.fft.irfft(z, n=n), np.fft.irfft(a, n=n))


def test_batched_dims_and_noncontiguous():
    a = rand(4, 6, 5, complex_=True, dtype=np.complex128)
    z = ember.tensor(a)
    for d in (0, 1, 2, -1, -3):
        check(ember.fft.fft(z, dim=d), np.fft.fft(a, axis=d))
    t = z.transpose(0, 2)  # (5, 6, 4), non-contiguous
    check(ember.fft.fft(t), np.fft.fft(a.transpose(2, 1, 0)))
    check(ember.fft.fft(z[:, ::2, 1:]), np.fft.fft(a[:, ::2, 1:]))
    r = rand(6, 9)
    check(ember.fft.rfft(ember.tensor(r).t(), dim=0), np.fft.rfft(r.T, axis=0))
    # the input is left untouched
    np.testing.assert_array_equal(z.numpy(), a)


def test_nd_transforms():
    a = rand(3, 4, 5, 6, complex_=True, dtype=np.complex128)
    r = rand(3, 4, 5, 6)
    z, x = ember.tensor(a), ember.tensor(r)
    f = ember.fft
    check(f.fft2(z), np.fft.fft2(a))
    check(f.ifft2(z), np.fft.ifft2(a))
    check(f.fftn(z), np.fft.fftn(a))
    check(f.ifftn(z, norm="ortho"), np.fft.ifftn(a, norm="ortho"))
    check(f.fftn(z, s=(3, 7)), np.fft.fftn(a, s=(3, 7), axes=(2, 3)))
    check(f.fftn(z, dim=(0, 2)), np.fft.fftn(a, axes=(0, 2)))
    check(f.fftn(z, s=(2, 8), dim=(1, 3)), np.fft.fftn(a, s=(2, 8), axes=(1, 3)))
    check(f.rfft2(x), np.fft.rfft2(r))
    check(f.rfftn(x), np.fft.rfftn(r))
    check(f.rfftn(x, dim=(1, 2)), np.fft.rfftn(r, axes=(1, 2)))
    spec = np.fft.rfftn(r)
    check(f.irfftn(ember.tensor(spec), s=r.shape), r)
    check(f.irfft2(ember.tensor(np.fft.rfft2(r)), s=(5, 6)), r)
    check(f.irfftn(ember.tensor(spec)), np.fft.irfftn(spec))
    check(f.irfftn(ember.tensor(spec), s=(4, 7), dim=(0, 3)),
          np.fft.irfftn(spec, s=(4, 7), axes=(0, 3)))


def test_hfftn_ihfftn_vs_torch(torch):
    a = rand(4, 5, complex_=True, dtype=np.complex128)
    r = rand(4, 6)
    for norm in NORMS:
        want = torch.fft.hfftn(torch.tensor(a), norm=norm).numpy()
        check(ember.fft.hfftn(ember.tensor(a), norm=norm), want)
        want = torch.fft.ihfftn(torch.tensor(r), norm=norm).resolve_conj().numpy()
        check(ember.fft.ihfftn(ember.tensor(r), norm=norm), want)
        want = torch.fft.hfft2(torch.tensor(a), s=(4, 6), norm=norm).numpy()
        check(ember.fft.hfft2(ember.tensor(a), s=(4, 6), norm=norm), want)


def test_accuracy_large_prime_and_power_of_two():
    for n in (1009, 4096, 4099):
        a = rand(n, complex_=True, dtype=np.complex128, seed=n)
        check(ember.fft.fft(ember.tensor(a)), np.fft.fft(a), rtol=1e-13)
        check(ember.fft.ifft(ember.fft.fft(ember.tensor(a))), a, rtol=1e-13)


def test_freq_and_shift():
    for n in (1, 4, 5, 10):
        np.testing.assert_allclose(ember.fft.fftfreq(n, 0.5).numpy(), np.fft.fftfreq(n, 0.5))
        np.testing.assert_allclose(ember.fft.rfftfreq(n, 2.0).numpy(), np.fft.rfftfreq(n, 2.0))
    assert ember.fft.fftfreq(4, dtype=ember.float64).dtype is ember.float64
    a = np.arange(30.0).reshape(5, 6)
    x = ember.tensor(a)
    np.testing.assert_array_equal(ember.fft.fftshift(x).numpy(), np.fft.fftshift(a))
    np.testing.assert_array_equal(ember.fft.ifftshift(x).numpy(), np.fft.ifftshift(a))
    np.testing.assert_array_equal(ember.fft.fftshift(x, dim=1).numpy(), np.fft.fftshift(a, 1))
    np.testing.assert_array_equal(ember.fft.ifftshift(x, dim=(0,)).numpy(),
                                  np.fft.ifftshift(a, (0,)))


def test_errors():
    f = ember.fft
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        f.fft(ember.ones(0))
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        f.fft(ember.ones(4), n=0)
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        f.irfft(ember.ones(1, dtype=ember.complex64))
    with pytest.raises(RuntimeError, match="Invalid normalization mode"):
        f.fft(ember.ones(4), norm="sideways")
    with pytest.raises(RuntimeError, match="real input"):
        f.rfft(ember.ones(4, dtype=ember.complex64))
    with pytest.raises(IndexError, match="Dimension out of range"):
        f.fft(ember.ones(4), dim=1)
    with pytest.raises(IndexError):
        f.fft(ember.tensor(1.0))
    with pytest.raises(RuntimeError, match="unique"):
        f.fftn(ember.ones(4, 4), dim=(0, 0))
    with pytest.raises(RuntimeError, match="same length"):
        f.fftn(ember.ones(4, 4), s=(4,), dim=(0, 1))
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        f.fft(ember.ones(4, dtype=ember.float16))
    with pytest.raises(TypeError, match="Tensor"):
        f.fft([1.0, 2.0])
    with pytest.raises(TypeError, match="complex"):
        ember._C._fft_c2c(ember.ones(4), [0], 0, True)
    with pytest.raises(ValueError, match="normalization"):
        ember._C._fft_c2c(ember.ones(4, dtype=ember.complex64), [0], 7, True)


# ---- stft / istft ------------------------------------------------------------------------------

STFT_CASES = [
    dict(n_fft=16, hop_length=4, window="hann"),
    dict(n_fft=16, hop_length=5, win_length=10, window="hann"),
    dict(n_fft=15, hop_length=3, window="hamming", center=False),
    dict(n_fft=8, window=None),
    dict(n_fft=16, hop_length=4, window="hann", normalized=True),
    dict(n_fft=16, hop_length=4, window="hann", onesided=False),
    dict(n_fft=12, hop_length=4, window="hann", pad_mode="constant"),
]


def _window(kind, length, lib):
    if kind is None:
        return None
    return getattr(lib, f"{kind}_window")(length, dtype=lib.float64)


@pytest.mark.parametrize("case", STFT_CASES)
def test_stft_istft_vs_torch(torch, case):
    case = dict(case)
    kind = case.pop("window")
    wl = case.get("win_length", case["n_fft"])
    x = rand(2, 100, seed=7)
    got = ember.stft(ember.tensor(x), window=_window(kind, wl, ember), return_complex=True,
                     **case)
    want = torch.stft(torch.tensor(x), window=_window(kind, wl, torch), return_complex=True,
                      **case)
    check(got, want.numpy())
    assert got.dtype is ember.complex128
    one = ember.stft(ember.tensor(x[0]), window=_window(kind, wl, ember), return_complex=True,
                     **case)
    check(one, want.numpy()[0])
    if kind is None and wl < case["n_fft"]:
        return
    inv_case = {k: v for k, v in case.items() if k != "pad_mode"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # center=False: both pad the uncovered tail with zeros
        got_inv = ember.istft(got, window=_window(kind, wl, ember), length=100, **inv_case)
        want_inv = torch.istft(want, window=_window(kind, wl, torch), length=100, **inv_case)
    check(got_inv, want_inv.numpy(), rtol=1e-10)
    if case.get("center", True):
        check(got_inv, x, rtol=1e-10)


def test_stft_float32_and_errors(torch):
    x = rand(64, dtype=np.float32)
    w = ember.hann_window(16)
    got = ember.stft(ember.tensor(x), 16, window=w, return_complex=True)
    assert got.dtype is ember.complex64 and got.shape == (9, 17)
    want = torch.stft(torch.tensor(x), 16, window=torch.hann_window(16), return_complex=True)
    check(got, want.numpy(), rtol=1e-5)
    assert ember.tensor(x).stft(16, window=w, return_complex=True).shape == (9, 17)
    y = got.istft(16, window=w, length=64)
    check(y, x.astype(np.float64), rtol=1e-5)
    with pytest.raises(RuntimeError, match="return_complex"):
        ember.stft(ember.tensor(x), 16)
    with pytest.raises(RuntimeError, match="n_fft"):
        ember.stft(ember.tensor(x[:4]), 16, center=False, return_complex=True)
    with pytest.raises(RuntimeError, match="window"):
        ember.stft(ember.tensor(x), 16, window=ember.ones(8), return_complex=True)
    with pytest.raises(RuntimeError, match="complex-valued"):
        ember.istft(ember.ones(9, 4), 16)
    with pytest.raises(RuntimeError, match="NOLA|overlap"):
        ember.istft(got, 16, window=ember.zeros(16))
    with pytest.warns(UserWarning, match="deprecated"):
        real_out = ember.stft(ember.tensor(x), 16, window=w, return_complex=False)
    assert real_out.shape == (9, 17, 2)


# ---- autograd ----------------------------------------------------------------------------------

def _grad_check(torch, f_ember, f_torch, a):
    xe = ember.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    f_ember(xe).backward()
    f_torch(xt).backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.resolve_conj().numpy(), rtol=1e-9,
                               atol=1e-11)


@pytest.mark.parametrize("norm", NORMS)
def test_fft_grads_match_torch(torch, norm):
    w = rand(4, 7, seed=3)
    z = rand(4, 7, complex_=True, dtype=np.complex128, seed=4)
    r = rand(4, 10, seed=5)
    for name in ("fft", "ifft"):
        _grad_check(torch, lambda a: (getattr(ember.fft, name)(a, norm=norm).abs() * ember.tensor(w)).sum(),
                    lambda a: (getattr(torch.fft, name)(a, norm=norm).abs() * torch.tensor(w)).sum(), z)
    _grad_check(torch, lambda a: (ember.fft.rfft(a, norm=norm).abs() ** 2).sum(),
                lambda a: (torch.fft.rfft(a, norm=norm).abs() ** 2).sum(), r)
    _grad_check(torch, lambda a: ember.view_as_real(ember.fft.rfft2(a, norm=norm)).sum(),
                lambda a: torch.view_as_real(torch.fft.rfft2(a, norm=norm)).sum(), r)
    for n in (12, 13):
        wn = ember.tensor(rand(4, n, seed=n))
        wt = torch.tensor(rand(4, n, seed=n))
        _grad_check(torch, lambda a: (ember.fft.irfft(a, n=n, norm=norm) * wn).sum(),
                    lambda a: (torch.fft.irfft(a, n=n, norm=norm) * wt).sum(), z)
    _grad_check(torch, lambda a: ember.fft.hfft(a, n=8, norm=norm).sum(),
                lambda a: torch.fft.hfft(a, n=8, norm=norm).sum(), z[:, :5])


def test_spectrogram_loss_grad_matches_torch(torch):
    x = rand(2, 200, seed=11)
    target = np.abs(rand(2, 33, 13, seed=12))

    def loss(lib, a):
        spec = lib.stft(a, 64, hop_length=16, window=lib.hann_window(64, dtype=lib.float64),
                        return_complex=True)
        return ((spec.abs() - lib.tensor(target)) ** 2).mean()

    _grad_check(torch, lambda a: loss(ember, a), lambda a: loss(torch, a), x)


def test_stft_without_window_warns_once_per_process(monkeypatch):
    import warnings

    from ember import _spectral

    monkeypatch.setattr(_spectral, "_warned_rectangular", False)
    x = ember.linspace(0, 1, 64)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ember.stft(x, 16, return_complex=True)
        ember.stft(x, 16, return_complex=True)
        ember.stft(x, 16, window=ember.ones(16), return_complex=True)
    leak = [m for m in w if "rectangular window" in str(m.message)]
    assert len(leak) == 1 and leak[0].category is UserWarning
