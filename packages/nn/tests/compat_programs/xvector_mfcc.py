"""Speaker verification front-end and model as the public x-vector / ECAPA / SpeechBrain-style
PyTorch code writes them: MFCCs from torch.stft (hann window, center=True, reflect padding,
return_complex=True), a mel filterbank, log compression, an orthonormal DCT-II matrix built by
hand (checked orthogonal and against an FFT-based DCT), delta and delta-delta features by a
fixed conv1d kernel over replicate-padded frames, cepstral mean and variance normalization,
SpecAugment masks, a TDNN (dilated Conv1d) x-vector network with attentive statistics pooling
(softmax over time, weighted mean and standard deviation), an additive angular margin
(ArcFace / AAM-softmax) loss on normalized embeddings with F.normalize and acos / cos, and an
equal error rate from cosine scores computed with sort and cumsum. Signals are synthetic
"speakers" (harmonic stacks with speaker-specific formants) from NumPy. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <eer>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1609)
SR, N_FFT, HOP, N_MELS, N_MFCC, SPK = 8000, 256, 80, 24, 13, 6


def hz_to_mel(f):
    return 2595.0 * math.log10(1.0 + f / 700.0)


def mel_fbank(n_mels, n_fft, sr):
    mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    bins = torch.linspace(0, sr / 2, n_fft // 2 + 1)
    lower, centre, upper = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    up = (bins[None] - lower) / (centre - lower)
    down = (upper - bins[None]) / (upper - centre)
    return torch.clamp(torch.minimum(up, down), min=0.0)  # (n_mels, n_freq)


def dct_matrix(n_mfcc, n_mels):
    n = torch.arange(n_mels, dtype=torch.float32)
    k = torch.arange(n_mfcc, dtype=torch.float32)[:, None]
    d = torch.cos(math.pi / n_mels * (n + 0.5) * k) * math.sqrt(2.0 / n_mels)
    d[0] /= math.sqrt(2.0)
    return d  # (n_mfcc, n_mels)


FB = mel_fbank(N_MELS, N_FFT, SR)
DCT = dct_matrix(N_MFCC, N_MELS)
WINDOW = torch.hann_window(N_FFT)


def mfcc(wave):
    spec = torch.stft(wave, N_FFT, HOP, window=WINDOW, center=True, pad_mode="reflect", return_complex=True)
    power = spec.abs() ** 2
    logmel = torch.log(torch.clamp(FB @ power, min=1e-10))
    return DCT @ logmel  # (..., n_mfcc, frames)


def deltas(feat, width=2):
    k = torch.arange(-width, width + 1, dtype=feat.dtype)
    kernel = (k / (2 * (k ** 2)[width + 1:].sum())).view(1, 1, -1).repeat(feat.shape[1], 1, 1)
    padded = F.pad(feat, (width, width), mode="replicate")
    return F.conv1d(padded, kernel, groups=feat.shape[1])


full = dct_matrix(N_MELS, N_MELS)
print(f"dct orthonormal: {torch.allclose(full @ full.T, torch.eye(N_MELS), atol=1e-5)} first row constant {torch.allclose(full[0], full[0, :1].expand(N_MELS))}")
v = torch.from_numpy(rng.normal(size=N_MELS).astype(np.float32))
# DCT-II through an FFT of the even extension
ext = torch.cat([v, v.flip(0)])
fft = torch.fft.fft(ext)[:N_MFCC]
phase = torch.exp(-1j * math.pi * torch.arange(N_MFCC) / (2 * N_MELS))
via_fft = (fft * phase).real * math.sqrt(1.0 / (2 * N_MELS))
via_fft[0] /= math.sqrt(2.0)
print(f"dct by matrix == dct by fft: {torch.allclose(DCT @ v, via_fft, atol=1e-4)}")
ramp = torch.arange(10.0).view(1, 1, 10)
print(f"deltas of a ramp {[round(v, 4) for v in deltas(ramp)[0, 0].tolist()]}")
print(f"mel filterbank {tuple(FB.shape)} peak per filter {FB.max(1).values.min().item():.4f} empty filters {int((FB.sum(1) == 0).sum())}")


def speaker_wave(spk, seconds=0.4):
    n = int(SR * seconds)
    tt = np.arange(n) / SR
    f0 = 100 + 25 * spk + rng.normal(0, 3)
    formants = [500 + 180 * spk, 1500 + 120 * ((spk * 3) % SPK)]
    sig = np.zeros(n)
    for h in range(1, 30):
        f = h * f0
        if f > SR / 2:
            break
        amp = sum(np.exp(-((f - fm) / 200.0) ** 2) for fm in formants) + 0.05
        sig += amp * np.sin(2 * np.pi * f * tt + rng.uniform(0, 2 * np.pi))
    sig += 0.05 * rng.normal(size=n)
    return sig.astype(np.float32)


def features(waves, augment=False):
    m = mfcc(waves)  # (B, 13, T)
    x = torch.cat([m, deltas(m), deltas(deltas(m))], dim=1)
    x = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5)  # CMVN per utterance
    if augment:
        b, c, tlen = x.shape
        f0 = torch.from_numpy(rng.integers(0, c - 6, b))
        t0 = torch.from_numpy(rng.integers(0, tlen - 8, b))
        fr = torch.arange(c)[None]
        tr = torch.arange(tlen)[None]
        fmask = (fr >= f0[:, None]) & (fr < f0[:, None] + 6)
        tmask = (tr >= t0[:, None]) & (tr < t0[:, None] + 8)
        x = x.masked_fill(fmask[:, :, None] | tmask[:, None, :], 0.0)
    return x


class AttentiveStatsPool(nn.Module):
    def __init__(self, c, hidden=32):
        super().__init__()
        self.att = nn.Sequential(nn.Conv1d(c, hidden, 1), nn.Tanh(), nn.Conv1d(hidden, c, 1))

    def forward(self, x):
        w = torch.softmax(self.att(x), dim=2)
        mu = (x * w).sum(2)
        sg = torch.sqrt((((x ** 2) * w).sum(2) - mu ** 2).clamp(min=1e-5))
        return torch.cat([mu, sg], 1)


class XVector(nn.Module):
    def __init__(self, emb=16):
        super().__init__()
        self.tdnn = nn.Sequential(
            nn.Conv1d(3 * N_MFCC, 32, 5, dilation=1), nn.ReLU(), nn.BatchNorm1d(32),
            nn.Conv1d(32, 32, 3, dilation=2), nn.ReLU(), nn.BatchNorm1d(32),
            nn.Conv1d(32, 32, 3, dilation=3), nn.ReLU(), nn.BatchNorm1d(32))
        self.pool = AttentiveStatsPool(32)
        self.emb = nn.Linear(64, emb)

    def forward(self, x):
        return self.emb(self.pool(self.tdnn(x)))


class AAMSoftmax(nn.Module):
    def __init__(self, emb, classes, margin=0.2, scale=20.0):
        super().__init__()
        self.weight = nn.Parameter(torch.from_numpy(rng.normal(0, 0.1, (classes, emb)).astype(np.float32)))
        self.m, self.s = margin, scale

    def forward(self, e, y):
        cos = F.linear(F.normalize(e), F.normalize(self.weight)).clamp(-1 + 1e-7, 1 - 1e-7)
        theta = torch.acos(cos)
        target = torch.cos(theta + self.m)
        onehot = F.one_hot(y, cos.shape[1]).bool()
        logits = self.s * torch.where(onehot, target, cos)
        return F.cross_entropy(logits, y), cos


x = features(torch.from_numpy(np.stack([speaker_wave(0), speaker_wave(1)])), augment=True)
print(f"features {tuple(x.shape)} masked entries {int((x == 0).sum())} stft frames {1 + int(SR * 0.4) // HOP}")

model, head = XVector(), AAMSoftmax(16, SPK)
with torch.no_grad():
    for p in model.parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(p[0].numel()), p.shape).astype(np.float32)))
    for m in model.modules():
        if isinstance(m, (nn.Conv1d, nn.Linear)):  # BatchNorm keeps its ones and zeros
            m.bias.zero_()
opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=3e-3)
losses = []
for step in range(30):
    ys = rng.integers(0, SPK, 16)
    waves = torch.from_numpy(np.stack([speaker_wave(s) for s in ys]))
    loss, cos = head(model(features(waves, augment=True)), torch.from_numpy(ys))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} aam loss {loss.item():.4f} mean target cosine {cos[torch.arange(16), torch.from_numpy(ys)].mean().item():.4f}")

model.eval()
ys = np.repeat(np.arange(SPK), 5)
with torch.no_grad():
    emb = F.normalize(model(features(torch.from_numpy(np.stack([speaker_wave(s) for s in ys])))))
scores = emb @ emb.T
iu = torch.triu_indices(len(ys), len(ys), offset=1)
s = scores[iu[0], iu[1]]
same = torch.from_numpy(ys)[iu[0]] == torch.from_numpy(ys)[iu[1]]
order = torch.argsort(s, descending=True)
tp = torch.cumsum(same[order].float(), 0) / same.sum()
fp = torch.cumsum((~same[order]).float(), 0) / (~same).sum()
fnr = 1 - tp
k = torch.argmin((fnr - fp).abs())
eer = ((fnr[k] + fp[k]) / 2).item()
print(f"trials {s.numel()} target {int(same.sum())} mean target score {s[same].mean().item():.4f} non-target {s[~same].mean().item():.4f}")
print(f"eer {eer:.4f}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {eer:.4f}")
