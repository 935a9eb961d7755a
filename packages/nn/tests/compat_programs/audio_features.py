"""Audio front-ends as speech and music repositories write them when they avoid complex tensors:
a log-mel spectrogram computed with torch.hann_window, framing by F.pad(mode="reflect") and
Tensor.unfold, a real DFT as two matmuls against cos/sin bases (and the same STFT as a strided
Conv1d with fixed weights, registered as buffers), a triangular mel filterbank from linspace and
clamp, log compression with clamp(min=1e-10).log10(), per-utterance normalization, SpecAugment-
style time and frequency masking with masked_fill, a Kaiser-windowed low-pass FIR filter
(torch.kaiser_window, torch.special.i0 / sinc) applied with F.conv1d, and a small CNN keyword
classifier over the features with AdaptiveAvgPool2d. Signals and masks come from NumPy: from the
same initial weights (``--save-init``/``--init-from``) the numbers agree with torch's. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)
rng = np.random.default_rng(0)
SR, N_FFT, HOP, N_MELS, CLASSES = 4000, 128, 32, 20, 3


def make_clips(n):
    """Class 0: a steady tone; 1: an upward chirp; 2: noise bursts. 0.25 s each."""
    t = np.arange(SR // 4) / SR
    clips, labels = [], []
    for i in range(n):
        k = i % CLASSES
        if k == 0:
            x = np.sin(2 * np.pi * rng.uniform(300, 900) * t)
        elif k == 1:
            f0 = rng.uniform(200, 400)
            x = np.sin(2 * np.pi * (f0 * t + 2500 * t ** 2))
        else:
            x = rng.normal(0, 0.5, t.shape) * (np.sin(2 * np.pi * 12 * t) > 0)
        clips.append(x + rng.normal(0, 0.05, t.shape))
        labels.append(k)
    return torch.tensor(np.stack(clips), dtype=torch.float32), torch.tensor(labels)


def hz_to_mel(f):
    return 2595.0 * math.log10(1.0 + f / 700.0)


def mel_filterbank(n_freqs, n_mels, sr, f_min=0.0, f_max=None):
    f_max = f_max or sr / 2
    all_freqs = torch.linspace(0, sr // 2, n_freqs)
    m_pts = torch.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2)
    f_pts = 700.0 * (10 ** (m_pts / 2595.0) - 1.0)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)  # (n_freqs, n_mels + 2)
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.max(torch.zeros(1), torch.min(down, up))  # (n_freqs, n_mels)


class LogMel(nn.Module):
    def __init__(self):
        super().__init__()
        window = torch.hann_window(N_FFT)
        n = torch.arange(N_FFT, dtype=torch.float32)
        k = torch.arange(N_FFT // 2 + 1, dtype=torch.float32)
        angle = 2 * math.pi * k[:, None] * n[None, :] / N_FFT
        self.register_buffer("cos_basis", torch.cos(angle) * window)
        self.register_buffer("sin_basis", -torch.sin(angle) * window)
        self.register_buffer("mel_fb", mel_filterbank(N_FFT // 2 + 1, N_MELS, SR))

    def power_spectrogram(self, wav):
        padded = F.pad(wav.unsqueeze(1), (N_FFT // 2, N_FFT // 2), mode="reflect").squeeze(1)
        frames = padded.unfold(-1, N_FFT, HOP)  # (batch, frames, n_fft)
        real = frames @ self.cos_basis.T
        imag = frames @ self.sin_basis.T
        return (real ** 2 + imag ** 2).transpose(1, 2)  # (batch, freqs, frames)

    def forward(self, wav):
        mel = torch.matmul(self.mel_fb.T, self.power_spectrogram(wav))
        logmel = mel.clamp(min=1e-10).log10()
        mean = logmel.mean(dim=(1, 2), keepdim=True)
        std = logmel.std(dim=(1, 2), keepdim=True)
        return (logmel - mean) / (std + 1e-5)


def conv_stft_power(wav, frontend):
    """The same power spectrogram as a strided Conv1d whose kernels are the windowed bases."""
    weight = torch.cat([frontend.cos_basis, frontend.sin_basis]).unsqueeze(1)
    padded = F.pad(wav.unsqueeze(1), (N_FFT // 2, N_FFT // 2), mode="reflect")
    out = F.conv1d(padded, weight, stride=HOP)
    re, im = out.chunk(2, dim=1)
    return re ** 2 + im ** 2


def spec_augment(x, max_f=4, max_t=5):
    x = x.clone()
    b, f, t = x.shape
    f0 = torch.from_numpy(rng.integers(0, f - max_f, b))
    t0 = torch.from_numpy(rng.integers(0, t - max_t, b))
    fw = torch.from_numpy(rng.integers(1, max_f + 1, b))
    tw = torch.from_numpy(rng.integers(1, max_t + 1, b))
    fi, ti = torch.arange(f)[None, :], torch.arange(t)[None, :]
    fmask = (fi >= f0[:, None]) & (fi < (f0 + fw)[:, None])
    tmask = (ti >= t0[:, None]) & (ti < (t0 + tw)[:, None])
    return x.masked_fill(fmask[:, :, None] | tmask[:, None, :], 0.0)


def lowpass_fir(cutoff_hz, taps=31, beta=6.0):
    n = torch.arange(taps, dtype=torch.float64) - (taps - 1) / 2
    h = 2 * cutoff_hz / SR * torch.sinc(2 * cutoff_hz / SR * n)
    w = torch.kaiser_window(taps, periodic=False, beta=beta, dtype=torch.float64)
    h = h * w
    return (h / h.sum()).float()


class KeywordCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d((1, 1)))
        self.classifier = nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x.unsqueeze(1)), 1))


x_train, y_train = make_clips(90)
x_test, y_test = make_clips(30)
frontend = LogMel()
model = KeywordCNN()
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})

fb = frontend.mel_fb
print(f"mel filterbank {tuple(fb.shape)}, peak {fb.max().item():.4f}, empty filters "
      f"{int((fb.sum(0) == 0).sum())}")
print(f"hann window sum {torch.hann_window(N_FFT).sum().item():.4f}, periodic/symmetric last "
      f"{torch.hann_window(8)[-1].item():.4f}/{torch.hann_window(8, periodic=False)[-1].item():.4f}")
power = frontend.power_spectrogram(x_train[:2])
print(f"power spectrogram {tuple(power.shape)}; conv1d STFT agrees: "
      f"{torch.allclose(power, conv_stft_power(x_train[:2], frontend), rtol=1e-3, atol=1e-3)}")
tone_bin = power[0].mean(1).argmax().item()
print(f"tone clip peak bin {tone_bin} ({tone_bin * SR / N_FFT:.0f} Hz)")
h = lowpass_fir(500.0)
print(f"kaiser FIR: {h.numel()} taps, dc gain {h.sum().item():.4f}, i0(6) "
      f"{torch.special.i0(torch.tensor(6.0)).item():.4f}")
smoothed = F.conv1d(x_train[:3].unsqueeze(1), h.view(1, 1, -1), padding=h.numel() // 2)
hf_before = frontend.power_spectrogram(x_train[2:3])[0, N_FFT // 4:].mean().item()
hf_after = frontend.power_spectrogram(smoothed[2:3, 0])[0, N_FFT // 4:].mean().item()
print(f"low-pass removes high frequencies: {hf_after < 0.05 * hf_before}")

feats_train, feats_test = frontend(x_train), frontend(x_test)
print(f"features {tuple(feats_train.shape)}, normalized mean {feats_train.mean().item():.4f}")
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
losses = []
for epoch in range(args.epochs):
    model.train()
    total = 0.0
    for i in range(0, len(feats_train), 30):
        xb = spec_augment(feats_train[i:i + 30])
        loss = F.cross_entropy(model(xb), y_train[i:i + 30])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    losses.append(total / 3)
    if epoch % 2 == 1:
        print(f"epoch {epoch + 1}: loss {losses[-1]:.4f}")
model.eval()
with torch.no_grad():
    acc = (model(feats_test).argmax(1) == y_test).float().mean().item()
print(f"test accuracy {acc:.3f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {acc:.4f}")
