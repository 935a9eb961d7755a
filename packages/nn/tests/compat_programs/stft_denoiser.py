"""Speech-enhancement by spectral masking, in the style of the public STFT-domain denoisers:
torch.stft(n_fft, hop_length, win_length, window=torch.hann_window(...), center=True,
return_complex=True) of noisy synthetic "speech" (gliding harmonic tones with an envelope),
magnitude via .abs() and phase via torch.angle, log-magnitude features, a mask network of
Conv1d layers with F.glu gating (and nn.GLU) and a sigmoid mask over frequency bins, the
enhanced spectrum rebuilt with torch.polar(mask * magnitude, phase) and resynthesized with
torch.istft(length=...). Perfect reconstruction istft(stft(x)) is checked, the loss is the
spectral L1 plus a time-domain SI-SDR term, and the SI-SDR improvement is reported. Signals and
weights from NumPy. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <SI-SDR gain dB>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
SR, T = 2000, 2048
N_FFT, HOP = 128, 32
t = np.arange(T) / SR


def utterance():
    f0 = rng.uniform(80, 200) * (1 + 0.3 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * t))
    phase = 2 * np.pi * np.cumsum(f0) / SR
    env = np.clip(np.sin(np.pi * t / t[-1] * rng.integers(1, 4)), 0, None)
    return sum(np.sin(k * phase) / k for k in range(1, 5)) * env


clean_np = np.stack([utterance() for _ in range(24)]).astype(np.float32) * 0.5
noisy_np = clean_np + rng.normal(0, 0.3, clean_np.shape).astype(np.float32)
clean, noisy = torch.from_numpy(clean_np), torch.from_numpy(noisy_np)
window = torch.hann_window(N_FFT)


def stft(x):
    return torch.stft(x, N_FFT, hop_length=HOP, win_length=N_FFT, window=window, center=True,
                      return_complex=True)


def istft(spec, length):
    return torch.istft(spec, N_FFT, hop_length=HOP, win_length=N_FFT, window=window,
                       center=True, length=length)


spec = stft(noisy[:2])
print("stft", tuple(spec.shape), spec.dtype, "window", tuple(window.shape))
back = istft(spec, T)
print(f"istft(stft(x)) max error {(back - noisy[:2]).abs().max().item():.2e} < 1e-5:",
      (back - noisy[:2]).abs().max().item() < 1e-5)
print("phase in [-pi, pi]:", bool((torch.angle(spec).abs() <= math.pi + 1e-6).all()))


class MaskNet(nn.Module):
    def __init__(self, bins=N_FFT // 2 + 1, hidden=64):
        super().__init__()
        self.inp = nn.Conv1d(bins, 2 * hidden, 5, padding=2)
        self.mid = nn.Sequential(nn.Conv1d(hidden, 2 * hidden, 3, padding=1), nn.GLU(dim=1))
        self.out = nn.Conv1d(hidden, bins, 1)

    def forward(self, logmag):
        h = F.glu(self.inp(logmag), dim=1)
        h = h + self.mid(h)
        return torch.sigmoid(self.out(h))


def si_sdr(est, ref, eps=1e-8):
    ref = ref - ref.mean(dim=-1, keepdim=True)
    est = est - est.mean(dim=-1, keepdim=True)
    proj = (est * ref).sum(-1, keepdim=True) / (ref.pow(2).sum(-1, keepdim=True) + eps) * ref
    noise = est - proj
    return 10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps)


def enhance(model, x):
    s = stft(x)
    mag, phase = s.abs(), torch.angle(s)
    mask = model(torch.log1p(mag))
    return istft(torch.polar(mask * mag, phase), x.shape[-1]), mask * mag


model = MaskNet()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        fan_in = p[0].numel() if p.dim() > 1 else p.numel()
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                / math.sqrt(fan_in))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
clean_mag = stft(clean).abs()
losses = []
for step in range(40):
    i = torch.from_numpy(rng.integers(0, 20, 8))
    est, est_mag = enhance(model, noisy[i])
    loss = F.l1_loss(est_mag, clean_mag[i]) - 0.01 * si_sdr(est, clean[i]).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:3d} loss {loss.item():.5f}")

with torch.no_grad():
    est, _ = enhance(model, noisy[20:])
    before = si_sdr(noisy[20:], clean[20:]).mean().item()
    after = si_sdr(est, clean[20:]).mean().item()
print(f"SI-SDR noisy {before:.3f} dB, enhanced {after:.3f} dB")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {after - before:.5f}")
