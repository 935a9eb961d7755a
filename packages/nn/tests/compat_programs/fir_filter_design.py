"""FIR filter design and multirate processing, in the style of the audio-preprocessing code of
speech toolkits (windowed-sinc resamplers, anti-aliasing filters, learnable front ends): window
functions from torch.hann_window / hamming_window / blackman_window / bartlett_window /
kaiser_window (periodic and symmetric) and torch.signal.windows (kaiser, gaussian, cosine,
exponential, general_hamming, nuttall), checked against each other where they coincide; a
windowed-sinc low-pass from torch.sinc with the Kaiser window, its frequency response from
torch.fft.rfft (magnitude in dB, phase by torch.angle, linear phase checked), filtering with
F.conv1d and "same" padding, decimation by strided conv1d and interpolation by conv_transpose1d
(polyphase upsampling, the zero-stuffing equivalent checked), torch.special.i0 for the Kaiser
beta, a sinc-parametrized learnable band-pass front end (SincNet style) trained to separate two
tones, and torch.polar to build analytic test signals. Data from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first loss> <last loss> <stopband attenuation dB>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(43)

# ---- windows ----
N = 9
print("hann periodic", [round(v, 4) for v in torch.hann_window(N).tolist()][:4])
print("hann symmetric == signal.windows.hann:",
      torch.allclose(torch.hann_window(N, periodic=False), torch.signal.windows.hann(N)))
print("hamming", [round(v, 4) for v in torch.hamming_window(N, periodic=False).tolist()][:3],
      "== general_hamming(0.54):", torch.allclose(torch.hamming_window(N, periodic=False),
                                                  torch.signal.windows.general_hamming(N, alpha=0.54)))
print("blackman", [round(v, 4) + 0.0 for v in torch.blackman_window(N, periodic=False).tolist()][:3],
      "bartlett", [round(v, 4) for v in torch.bartlett_window(N, periodic=False).tolist()][:3])
print("kaiser beta=8", [round(v, 4) for v in torch.kaiser_window(N, periodic=False, beta=8.0).tolist()][:3],
      "== signal.windows.kaiser:", torch.allclose(torch.kaiser_window(N, periodic=False, beta=8.0),
                                                  torch.signal.windows.kaiser(N, beta=8.0, sym=True)))
print("gaussian", [round(v, 4) for v in torch.signal.windows.gaussian(N, std=2.0).tolist()][:3],
      "cosine", [round(v, 4) for v in torch.signal.windows.cosine(N).tolist()][:3])
print("exponential", [round(v, 4) for v in torch.signal.windows.exponential(N, tau=3.0).tolist()][:3],
      "nuttall", [round(v, 5) for v in torch.signal.windows.nuttall(N).tolist()][:3])
print("window dtype", torch.hann_window(4, dtype=torch.float32).dtype, "length 1", torch.hann_window(1).tolist())

# ---- windowed-sinc low-pass ----
fs, cutoff, taps = 16000.0, 2000.0, 63
atten = 60.0
beta = 0.1102 * (atten - 8.7)
print(f"kaiser beta {beta:.4f} i0(beta) {torch.special.i0(torch.tensor(beta)).item():.4f}")
n = torch.arange(taps) - (taps - 1) / 2
h = 2 * cutoff / fs * torch.sinc(2 * cutoff / fs * n) * torch.kaiser_window(taps, periodic=False, beta=beta)
h = h / h.sum()
H = torch.fft.rfft(h, n=1024)
freqs = torch.fft.rfftfreq(1024, d=1 / fs)
mag_db = 20 * torch.log10(H.abs().clamp_min(1e-12))
stop = mag_db[freqs > 3000].max().item()
print(f"passband ripple {mag_db[freqs < 1500].abs().max().item():.4f} dB, stopband max {stop:.2f} dB")
phase = torch.angle(H[freqs < 1500] * torch.exp(1j * 2 * math.pi * freqs[freqs < 1500] / fs * (taps - 1) / 2))
print("linear phase:", torch.allclose(phase, torch.zeros_like(phase), atol=1e-6), "symmetric taps:",
      torch.allclose(h, h.flip(0)))

# ---- filtering, decimation, interpolation ----
t = torch.arange(800) / fs
tones = torch.polar(torch.ones(2), torch.zeros(2))  # unit phasors
x = (tones[0] * torch.exp(1j * 2 * math.pi * 500 * t)).real + 0.5 * (tones[1] * torch.exp(1j * 2 * math.pi * 5000 * t)).real
y = F.conv1d(x[None, None], h.flip(0)[None, None], padding="same")[0, 0]
print(f"5 kHz removed: in {x[200:600].std().item():.4f} out {y[200:600].std().item():.4f} "
      f"(pure 500 Hz {math.sqrt(0.5):.4f})")
dec = F.conv1d(x[None, None], h.flip(0)[None, None], stride=4, padding=taps // 2)[0, 0]
print("decimated length", dec.shape[0], "equals filtered[::4]:", torch.allclose(dec, y[::4], atol=1e-10))
L = 3
up = F.conv_transpose1d(dec[None, None], (L * h)[None, None], stride=L, padding=taps // 2)[0, 0]
stuffed = torch.zeros(dec.shape[0] * L - (L - 1))
stuffed[::L] = dec
ref = F.conv1d(stuffed[None, None], (L * h).flip(0)[None, None], padding=taps // 2)[0, 0]
print("conv_transpose1d == zero-stuff + filter:", up.shape[0] == ref.shape[0] and torch.allclose(up, ref, atol=1e-10),
      "length", up.shape[0])


class SincBandpass(nn.Module):
    """Band-pass filters parametrized by learnable low / band frequencies (SincNet)."""

    def __init__(self, n_filt, k, fs):
        super().__init__()
        self.fs = fs
        self.low_hz = nn.Parameter(torch.linspace(300.0, 4000.0, n_filt)[:, None])
        self.band_hz = nn.Parameter(torch.full((n_filt, 1), 400.0))
        self.register_buffer("n_", (torch.arange(k) - (k - 1) / 2)[None] / fs)
        self.register_buffer("window", torch.hamming_window(k, periodic=False))

    def forward(self, x):
        low = 50.0 + self.low_hz.abs()
        high = (low + 50.0 + self.band_hz.abs()).clamp(max=self.fs / 2)
        def lp(f): return 2 * f * torch.sinc(2 * f * self.n_)
        filt = (lp(high) - lp(low)) * self.window / self.fs
        return F.conv1d(x, filt[:, None], padding="same")


front = SincBandpass(4, 41, fs)
head = nn.Linear(4, 2)
with torch.no_grad():
    head.weight.copy_(torch.from_numpy(rng.normal(0, 0.5, (2, 4))))
    head.bias.zero_()
sigs, labels = [], []
for i in range(24):
    f0 = 800.0 if i % 2 == 0 else 3000.0
    sigs.append(torch.sin(2 * math.pi * f0 * t[:256] + i) + 0.3 * torch.from_numpy(rng.normal(0, 1, 256)))
    labels.append(i % 2)
X = torch.stack(sigs)[:, None]
Y = torch.tensor(labels)
opt = torch.optim.Adam(list(front.parameters()) + list(head.parameters()), lr=0.05)
losses = []
for step in range(40):
    feats = front(X).pow(2).mean(-1).log1p()
    loss = F.cross_entropy(head(feats * 5), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} low_hz {[round(v, 1) for v in front.low_hz.flatten().tolist()]}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {stop:.3f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
