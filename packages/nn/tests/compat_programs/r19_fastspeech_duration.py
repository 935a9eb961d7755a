"""A non-autoregressive text-to-spectrogram model in the style of the public FastSpeech /
Glow-TTS PyTorch code: monotonic alignment search (the Viterbi-like dynamic program over a
text x frame log-likelihood matrix, written with torch.maximum / torch.roll / torch.where and a
backtrack), durations as alignment column sums, a length regulator expanding each phoneme's
hidden state by torch.repeat_interleave with a tensor of repeats (and the batched variant through
cumsum + searchsorted), nn.utils.rnn.pad_sequence, a duration predictor (Conv1d + LayerNorm over
the channel dim via transpose) trained on log(1 + d) with MSE over a sequence mask built by
torch.arange < lengths, a masked L1 mel loss, speed control by scaling predicted durations with
torch.clamp(torch.round(...)), and sequence_mask / lengths bookkeeping. Weights and data from
NumPy. Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <duration accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

rng = np.random.default_rng(3)
VOCAB, H, MEL = 10, 24, 6
PROTO = torch.from_numpy(rng.normal(size=(VOCAB, MEL)).astype(np.float32))  # a phoneme's sound
TRUE_DUR = torch.tensor([1, 2, 3, 1, 4, 2, 3, 1, 2, 3])  # each phoneme's length


def sequence_mask(lengths, max_len=None):
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len)[None, :] < lengths[:, None]


def monotonic_alignment_search(logp):
    """logp (T_text, T_mel); returns the 0/1 path maximizing the sum, monotonic, each text used."""
    t_text, t_mel = logp.shape
    neg = torch.tensor(-1e9, dtype=logp.dtype)
    q = torch.full((t_text,), -1e9, dtype=logp.dtype)
    q[0] = logp[0, 0]
    qs = [q]
    for j in range(1, t_mel):
        stay = q
        move = torch.roll(q, 1)
        move[0] = neg
        q = torch.maximum(stay, move) + logp[:, j]
        q = torch.where(torch.arange(t_text) <= j, q, neg)
        qs.append(q)
    path = torch.zeros(t_text, t_mel, dtype=torch.long)
    i = t_text - 1
    for j in range(t_mel - 1, -1, -1):
        path[i, j] = 1
        if j > 0 and i > 0 and (i == j or qs[j - 1][i - 1] > qs[j - 1][i]):
            i -= 1
    return path


def make(n):
    texts, mels, durs = [], [], []
    for _ in range(n):
        t = torch.from_numpy(rng.integers(0, VOCAB, size=rng.integers(3, 7)))
        d = TRUE_DUR[t]
        mel = torch.repeat_interleave(PROTO[t], d, dim=0)
        mel = mel + 0.1 * torch.from_numpy(rng.normal(size=tuple(mel.shape)).astype(np.float32))
        texts.append(t), mels.append(mel), durs.append(d)
    return texts, mels, durs


class DurationPredictor(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(H, H, 3, padding=1)
        self.norm1 = nn.LayerNorm(H)
        self.conv2 = nn.Conv1d(H, H, 3, padding=1)
        self.norm2 = nn.LayerNorm(H)
        self.proj = nn.Linear(H, 1)

    def forward(self, x, mask):  # x (B, T, H)
        h = F.relu(self.conv1(x.transpose(1, 2))).transpose(1, 2)
        h = self.norm1(h)
        h = F.relu(self.conv2(h.transpose(1, 2))).transpose(1, 2)
        h = self.norm2(h)
        return self.proj(h).squeeze(-1).masked_fill(~mask, 0.0)


class FastSpeech(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, H, padding_idx=None)
        self.enc = nn.Conv1d(H, H, 3, padding=1)
        self.dur = DurationPredictor()
        self.dec = nn.Sequential(nn.Linear(H, H), nn.ReLU(), nn.Linear(H, MEL))

    def encode(self, text):
        e = self.emb(text)
        return e + torch.tanh(self.enc(e.transpose(1, 2))).transpose(1, 2)


def length_regulate(h, durs, lengths):
    """Batched: frame f of sample b reads the phoneme searchsorted(cumsum(d), f, right=True)."""
    ends = torch.cumsum(durs, dim=1)
    total = ends[:, -1]
    frames = torch.arange(int(total.max()))
    idx = torch.searchsorted(ends, frames.expand(h.shape[0], -1).contiguous(), right=True)
    idx = idx.clamp(max=h.shape[1] - 1)
    out = torch.gather(h, 1, idx[..., None].expand(-1, -1, h.shape[-1]))
    return out * sequence_mask(total, out.shape[1])[..., None], total


model = FastSpeech()
with torch.no_grad():
    for name, p in model.named_parameters():
        if "norm" not in name:
            p.copy_(torch.from_numpy(rng.normal(0, 0.2, size=tuple(p.shape)).astype(np.float32)))

texts, mels, durs = make(64)
# MAS recovers the true durations from the log-likelihood of each frame under each phoneme
t0, m0 = texts[0], mels[0]
logp = -((m0[None, :, :] - PROTO[t0][:, None, :]) ** 2).sum(-1)
path = monotonic_alignment_search(logp)
print("text", t0.tolist(), "MAS durations", path.sum(1).tolist(), "true", durs[0].tolist())
print("path monotonic", bool((path.argmax(0).diff() >= 0).all()), "each frame once", bool((path.sum(0) == 1).all()))
mas_ok = sum(int(torch.equal(monotonic_alignment_search(-((m[None] - PROTO[t][:, None]) ** 2).sum(-1)).sum(1), d))
             for t, m, d in zip(texts, mels, durs))
print("MAS exact on", mas_ok, "of", len(texts))

h = torch.arange(6.0).reshape(1, 3, 2)
one = torch.repeat_interleave(h[0], torch.tensor([2, 0, 3]), dim=0)
batched, total = length_regulate(h, torch.tensor([[2, 0, 3]]), torch.tensor([3]))
print("repeat_interleave", one[:, 0].tolist(), "batched equal", torch.equal(one, batched[0]), "total", total.tolist())

opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(80):
    sl = slice((step * 8) % 64, (step * 8) % 64 + 8)
    tb = pad_sequence(texts[sl], batch_first=True)
    lens = torch.tensor([len(t) for t in texts[sl]])
    db = pad_sequence(durs[sl], batch_first=True)
    mb = pad_sequence(mels[sl], batch_first=True)
    mask = sequence_mask(lens)
    hid = model.encode(tb)
    log_d = model.dur(hid.detach(), mask)
    dur_loss = F.mse_loss(log_d[mask], torch.log1p(db[mask].float()))
    frames, total = length_regulate(hid, db, lens)
    mel_mask = sequence_mask(total, mb.shape[1])[..., None]
    pred = model.dec(frames)
    mel_loss = (torch.abs(pred - mb) * mel_mask).sum() / (mel_mask.sum() * MEL)
    loss = mel_loss + dur_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} mel {mel_loss.item():.5f} dur {dur_loss.item():.5f}")

with torch.no_grad():
    tb = pad_sequence(texts, batch_first=True)
    lens = torch.tensor([len(t) for t in texts])
    mask = sequence_mask(lens)
    log_d = model.dur(model.encode(tb), mask)
    pred_d = torch.clamp(torch.round(torch.expm1(log_d)), min=1).long()
    acc = (pred_d[mask] == pad_sequence(durs, batch_first=True)[mask]).float().mean().item()
    fast = torch.clamp(torch.round(torch.expm1(log_d) * 0.5), min=1).long().masked_fill(~mask, 0)
    print("speed x2 frames", int(fast.sum()), "normal frames", int(pred_d.masked_fill(~mask, 0).sum()), "dtype", pred_d.dtype)
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {acc:.6f}")
