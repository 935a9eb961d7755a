"""The CPU FFT's lone-line paths (kernels/cpu/fft.cpp): contiguous lines of a length n = n1 n2
(n1, n2 multiples of the vector width, up to 16384) run one at a time as a four-step FFT
(column FFTs in lanes, twiddles and a transpose, row FFTs in lanes), Bluestein lengths whose
convolution length has such a plan run their chirp products along the line, and even real
transforms post-process along the line. Checked against NumPy's pocketfft in float64 (1e-12)
and float32, forward and inverse with every normalization, batches split over threads, the
lengths around the four-step limits, and the AVX2 and baseline copies (other vector widths,
so other splits) in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import ember
import numpy as np
import pytest

# four-step at every width (256 = 16 * 16 up to 16384), widths that split unevenly (768, 1280,
# 6144), Bluestein lengths whose power of two has a four-step plan (127 -> 256, 1009 -> 2048,
# 4099 -> 16384), lengths without one (lanes as before: 1000, 2 * 1009, 32768)
LENGTHS = [64, 128, 256, 512, 768, 1024, 1280, 2048, 6144, 16384, 127, 1009, 4099, 1000, 2018,
           32768]


def _rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _err(got, want) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


def _lines(n: int) -> int:
    return 3 if n >= 8192 else 11


@pytest.mark.parametrize("n", LENGTHS)
def test_complex128_forward_and_inverse(n):
    a = _rand((_lines(n), n), np.complex128, n)
    z = ember.from_numpy(a)
    assert _err(ember.fft.fft(z).numpy(), np.fft.fft(a)) <= 1e-12
    for norm in ("backward", "ortho", "forward"):
        assert _err(ember.fft.ifft(z, norm=norm).numpy(), np.fft.ifft(a, norm=norm)) <= 1e-12


@pytest.mark.parametrize("n", LENGTHS)
def test_complex64_forward_and_inverse(n):
    a = _rand((_lines(n), n), np.complex64, n)
    z = ember.from_numpy(a)
    want = np.fft.fft(a.astype(np.complex128))
    assert _err(ember.fft.fft(z).numpy(), want) <= 2e-6
    assert _err(ember.fft.ifft(z, norm="ortho").numpy(), np.fft.ifft(a, norm="ortho")) <= 2e-6


@pytest.mark.parametrize("n", [512, 2048, 1536, 2 * 1009, 32768, 510])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rfft_and_its_inverse(n, dtype):
    x = _rand((_lines(n), n), dtype, n + 1)
    tol = 1e-12 if dtype == np.float64 else 2e-6
    got = ember.fft.rfft(ember.from_numpy(x), norm="ortho").numpy()
    want = np.fft.rfft(x.astype(np.float64), norm="ortho")
    assert got.shape == want.shape and _err(got, want) <= tol
    back = ember.fft.irfft(ember.from_numpy(got), n=n, norm="ortho").numpy()
    assert _err(back, x.astype(np.float64)) <= 10 * tol


def test_single_line_strided_and_multi_dim():
    a = _rand((4, 1024, 6), np.complex128, 5)
    z = ember.from_numpy(a)
    # one line; lines with a stride (the last dim moved); two dims, one of them contiguous
    assert _err(ember.fft.fft(z[0, :, 0]).numpy(), np.fft.fft(a[0, :, 0])) <= 1e-12
    assert _err(ember.fft.fft(z, dim=1).numpy(), np.fft.fft(a, axis=1)) <= 1e-12
    b = np.ascontiguousarray(np.moveaxis(a, 1, 2))
    assert _err(ember.fft.fft2(ember.from_numpy(b)).numpy(), np.fft.fft2(b)) <= 1e-12
    x = np.ascontiguousarray(a.real[:, :, :4].transpose(2, 0, 1))  # (4, 4, 1024)
    assert _err(ember.fft.rfft2(ember.from_numpy(x)).numpy(), np.fft.rfft2(x)) <= 1e-12


def test_batches_split_over_threads_agree():
    a = _rand((64, 2048), np.complex128, 9)
    want = np.fft.fft(a)
    before = ember.get_num_threads()
    try:
        for threads in (1, 2, 3):
            ember.set_num_threads(threads)
            assert _err(ember.fft.fft(ember.from_numpy(a)).numpy(), want) <= 1e-12
    finally:
        ember.set_num_threads(before)


_CHILD = """
import json, sys
sys.path.insert(0, {here!r})
import numpy as np, ember
import test_fft_four_step as t
out = []
for n in (256, 512, 1024, 1009, 2048, 768):
    for dt in (np.complex64, np.complex128):
        a = t._rand((9, n), dt, n)
        want = np.fft.fft(a.astype(np.complex128))
        out.append(t._err(ember.fft.fft(ember.from_numpy(a)).numpy(), want))
    x = t._rand((9, 2 * n), np.float64, n)
    out.append(t._err(ember.fft.rfft(ember.from_numpy(x)).numpy(), np.fft.rfft(x)))
print(json.dumps(out))
"""


@pytest.mark.parametrize("isa", ["avx2", "baseline"])
def test_other_isa_copies(isa):
    env = dict(os.environ, EMBER_CPU_ISA=isa)
    code = _CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    errs = json.loads(r.stdout)
    # per length: complex64 (float32 accuracy), complex128, float64 rfft
    for i in range(0, len(errs), 3):
        assert errs[i] <= 2e-6 and errs[i + 1] <= 1e-12 and errs[i + 2] <= 1e-12, errs
