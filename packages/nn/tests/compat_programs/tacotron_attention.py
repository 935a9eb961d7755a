"""An attention-based text-to-spectrogram decoder in the style of the public Tacotron 2 code
(NVIDIA/tacotron2, espnet): a character encoder (Embedding, Conv1d + BatchNorm stack, a
bidirectional LSTM over pack_padded_sequence inputs), location-sensitive attention (a Conv1d
over the concatenated previous and cumulative attention weights, processed query / memory /
location projections, energies masked with masked_fill(-inf) on padded characters, softmax),
an LSTMCell decoder with a two-layer prenet, teacher forcing from frames, a stop-token head
with BCE over lengths, a postnet residual, mel losses masked by lengths, the guided attention
loss (W_nt = 1 - exp(-(n/N - t/T)^2 / 2g^2)) that pushes alignments toward the diagonal, and
monotonicity / diagonality of the learned alignment. Dropout is switched off so both libraries
see the same numbers. Data: synthetic "utterances" whose frames are a smooth function of the
characters, from NumPy. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first loss> <last loss>
<alignment diagonality>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

rng = np.random.default_rng(1616)
VOCAB, EMB, MEL, FPC = 10, 16, 8, 2  # frames per character
CODEBOOK = rng.normal(0, 1, (VOCAB, MEL)).astype(np.float32)


def batch(b):
    lens = rng.integers(4, 9, b)
    lens[0] = 8
    text = np.zeros((b, 8), np.int64)
    mels = np.zeros((b, 8 * FPC, MEL), np.float32)
    for i, n in enumerate(lens):
        chars = rng.integers(1, VOCAB, n)
        text[i, :n] = chars
        frames = np.repeat(CODEBOOK[chars], FPC, 0)
        kernel = np.array([0.25, 0.5, 0.25])
        frames = np.stack([np.convolve(frames[:, k], kernel, mode="same") for k in range(MEL)], 1)
        mels[i, : n * FPC] = frames
    return torch.from_numpy(text), torch.from_numpy(lens), torch.from_numpy(mels), torch.from_numpy(lens * FPC)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMB, padding_idx=0)
        self.convs = nn.ModuleList(nn.Sequential(nn.Conv1d(EMB, EMB, 5, padding=2), nn.BatchNorm1d(EMB)) for _ in range(2))
        self.lstm = nn.LSTM(EMB, EMB // 2, batch_first=True, bidirectional=True)

    def forward(self, text, lens):
        x = self.emb(text).transpose(1, 2)
        for c in self.convs:
            x = F.relu(c(x))
        packed = pack_padded_sequence(x.transpose(1, 2), lens, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=text.shape[1])
        return out


class LocationSensitiveAttention(nn.Module):
    def __init__(self, query_dim, memory_dim, attn_dim=16, filters=4, kernel=5):
        super().__init__()
        self.query = nn.Linear(query_dim, attn_dim, bias=False)
        self.memory = nn.Linear(memory_dim, attn_dim, bias=False)
        self.loc_conv = nn.Conv1d(2, filters, kernel, padding=(kernel - 1) // 2, bias=False)
        self.loc_dense = nn.Linear(filters, attn_dim, bias=False)
        self.v = nn.Linear(attn_dim, 1)

    def forward(self, q, processed_memory, memory, weights_cat, mask):
        loc = self.loc_dense(self.loc_conv(weights_cat).transpose(1, 2))
        energies = self.v(torch.tanh(self.query(q).unsqueeze(1) + processed_memory + loc)).squeeze(-1)
        energies = energies.masked_fill(mask, -float("inf"))
        w = F.softmax(energies, dim=1)
        return torch.bmm(w.unsqueeze(1), memory).squeeze(1), w


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.prenet = nn.Sequential(nn.Linear(MEL, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.attn_rnn = nn.LSTMCell(16 + EMB, 32)
        self.attn = LocationSensitiveAttention(32, EMB)
        self.dec_rnn = nn.LSTMCell(32 + EMB, 32)
        self.proj = nn.Linear(32 + EMB, MEL)
        self.stop = nn.Linear(32 + EMB, 1)

    def forward(self, memory, text_mask, mels):
        b, n, _ = memory.shape
        T = mels.shape[1]
        h1 = c1 = memory.new_zeros(b, 32)
        h2 = c2 = memory.new_zeros(b, 32)
        w = memory.new_zeros(b, n)
        w_cum = memory.new_zeros(b, n)
        ctx = memory.new_zeros(b, EMB)
        pm = self.attn.memory(memory)
        prev = memory.new_zeros(b, MEL)  # the <go> frame
        outs, stops, aligns = [], [], []
        for t in range(T):
            p = self.prenet(prev)
            h1, c1 = self.attn_rnn(torch.cat([p, ctx], -1), (h1, c1))
            ctx, w = self.attn(h1, pm, memory, torch.stack([w, w_cum], 1), text_mask)
            w_cum = w_cum + w
            h2, c2 = self.dec_rnn(torch.cat([h1, ctx], -1), (h2, c2))
            hc = torch.cat([h2, ctx], -1)
            outs.append(self.proj(hc))
            stops.append(self.stop(hc).squeeze(-1))
            aligns.append(w)
            prev = mels[:, t]  # teacher forcing
        return torch.stack(outs, 1), torch.stack(stops, 1), torch.stack(aligns, 1)


class Tacotron(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.decoder = Encoder(), Decoder()
        self.postnet = nn.Sequential(nn.Conv1d(MEL, 16, 5, padding=2), nn.Tanh(), nn.Conv1d(16, MEL, 5, padding=2))

    def forward(self, text, lens, mels):
        memory = self.encoder(text, lens)
        mask = torch.arange(text.shape[1])[None] >= lens[:, None]
        out, stop, align = self.decoder(memory, mask, mels)
        post = out + self.postnet(out.transpose(1, 2)).transpose(1, 2)
        return out, post, stop, align


def guided_attention_weights(text_lens, mel_lens, g=0.2):
    N, T = int(text_lens.max()), int(mel_lens.max())
    n = torch.arange(N)[None, None].float() / text_lens[:, None, None]
    t = torch.arange(T)[None, :, None].float() / mel_lens[:, None, None]
    W = 1 - torch.exp(-((n - t) ** 2) / (2 * g * g))
    valid = (torch.arange(T)[None, :, None] < mel_lens[:, None, None]) & (torch.arange(N)[None, None] < text_lens[:, None, None])
    return W * valid, valid


Wg, valid = guided_attention_weights(torch.tensor([4, 2]), torch.tensor([6, 3]))
print(f"guided attention weights {tuple(Wg.shape)} diagonal small {Wg[0, 0, 0].item():.4f} corner {Wg[0, 5, 0].item():.4f} masked {int((~valid).sum())}")
att = LocationSensitiveAttention(4, 6)
mem = torch.from_numpy(rng.normal(size=(2, 5, 6)).astype(np.float32))
mask = torch.tensor([[False] * 5, [False, False, False, True, True]])
_, w0 = att(torch.zeros(2, 4), att.memory(mem), mem, torch.zeros(2, 2, 5), mask)
print(f"attention rows sum to one {torch.allclose(w0.sum(1), torch.ones(2))} padded characters get {w0[1, 3:].sum().item():.1f}")

model = Tacotron()
with torch.no_grad():
    for name, p in model.named_parameters():
        if "bn" in name or (p.dim() == 1 and "convs" in name and name.endswith(("1.weight", "1.bias"))):
            continue
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(p[0].numel()), p.shape).astype(np.float32)))
        else:
            p.zero_()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses, diag = [], 0.0
for step in range(30):
    text, lens, mels, mlens = batch(8)
    out, post, stop, align = model(text, lens, mels)
    fmask = (torch.arange(mels.shape[1])[None] < mlens[:, None]).unsqueeze(-1)
    mel_loss = (F.mse_loss(out, mels, reduction="none") * fmask).sum() / (fmask.sum() * MEL)
    post_loss = (F.mse_loss(post, mels, reduction="none") * fmask).sum() / (fmask.sum() * MEL)
    stop_target = (torch.arange(mels.shape[1])[None] >= (mlens[:, None] - 1)).float()
    stop_loss = F.binary_cross_entropy_with_logits(stop, stop_target)
    Wg, valid = guided_attention_weights(lens, mlens)
    ga_loss = (align * Wg).sum() / valid.sum()
    loss = mel_loss + post_loss + stop_loss + ga_loss
    opt.zero_grad()
    loss.backward()
    gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f} mel {mel_loss.item():.4f} stop {stop_loss.item():.4f} guided {ga_loss.item():.4f} grad norm {gn.item():.3f}")

model.eval()
with torch.no_grad():
    text, lens, mels, mlens = batch(4)
    _, post, stop, align = model(text, lens, mels)
peaks = align[0].argmax(1)[: int(mlens[0])]
expected = torch.arange(int(mlens[0])) // FPC
diag = (peaks - expected).abs().le(1).float().mean().item()
mono = bool((peaks.diff() >= -1).all())
pred_len = int((torch.sigmoid(stop[0]) > 0.5).float().argmax())
print(f"alignment peaks {peaks.tolist()}")
print(f"diagonality {diag:.4f} monotone {mono} predicted stop frame {pred_len} true {int(mlens[0]) - 1}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {diag:.4f}")
