"""torch.fft on the CPU: complex transforms of power-of-two, mixed-radix and prime (Bluestein)
lengths, the real-input rfft, and a short-time Fourier transform, one intra-op thread per
framework as everywhere. Inputs are the same random values for both frameworks."""

from __future__ import annotations

import numpy as np
from harness import Stmt, case


def _signal(fw, shape: tuple[int, ...], dtype: str):
    """Random samples of `dtype` (float32/float64/complex64/complex128), the same for both."""
    key = ("fft", shape, dtype)
    if key not in fw.data_cache:
        rng = np.random.default_rng(sum(shape))
        re = rng.standard_normal(shape)
        arr = re + 1j * rng.standard_normal(shape) if dtype.startswith("complex") else re
        fw.data_cache[key] = arr.astype(dtype)
    return fw.from_numpy(fw.data_cache[key])


def _register_fft(shape: tuple[int, ...], dtype: str, note: str) -> None:
    short = {"complex64": "c64", "complex128": "c128"}[dtype]
    dims = "x".join(str(s) for s in shape)

    @case(f"fft/fft {short} {dims}", unit="us", rtol=1e-3, atol=1e-3,
          doc=f"torch.fft.fft(x) over the last dim, x {shape} {dtype} ({note})")
    def _fft(fw):
        return Stmt("F.fft(x)", F=fw.mod.fft, x=_signal(fw, shape, dtype))


_register_fft((1, 1 << 20), "complex64", "one long power-of-two transform")
_register_fft((256, 1024), "complex64", "a batch of power-of-two transforms")
_register_fft((64, 1009), "complex128", "prime length: Bluestein's algorithm")
_register_fft((128, 1000), "complex64", "mixed radix 2^3 * 5^3")


@case("fft/rfft f32 256x1024", unit="us", rtol=1e-3, atol=1e-3,
      doc="torch.fft.rfft(x) over the last dim, x (256, 1024) float32")
def _rfft(fw):
    return Stmt("F.rfft(x)", F=fw.mod.fft, x=_signal(fw, (256, 1024), "float32"))


@case("fft/stft 8x16000 n_fft=512 hop=128", unit="us", rtol=1e-3, atol=1e-3,
      doc="torch.stft(x, 512, hop_length=128, window=hann(512), return_complex=True), "
      "x (8, 16000) float32")
def _stft(fw):
    return Stmt("m.stft(x, 512, hop_length=128, window=w, return_complex=True)", m=fw.mod,
                x=_signal(fw, (8, 16000), "float32"), w=fw.mod.hann_window(512))
