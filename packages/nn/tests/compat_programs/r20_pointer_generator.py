"""A pointer-generator summariser (See et al., in the style of the public
atulkum/pointer_summarizer code) on a toy copy task with out-of-vocabulary words: source ids
mapped into an extended vocabulary per batch (OOV words get temporary ids past the vocabulary),
a bidirectional GRU encoder over packed sequences (pack_padded_sequence with
enforce_sorted=False, pad_packed_sequence), Bahdanau attention with a coverage vector, the
generation probability p_gen from context, state and input, the final distribution as
p_gen * P_vocab padded with zeros for the OOV slots plus (1 - p_gen) * attention scattered onto
source ids with scatter_add_, the NLL of the gold extended ids (gather + log, a padding mask),
coverage loss sum(min(a, c)), teacher forcing, Adam + clip_grad_norm_, and greedy decoding that
copies OOV words back by their extended ids. Data from NumPy. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <token accuracy incl. OOV>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

torch.manual_seed(0)
rng = np.random.default_rng(30)
V, OOV_POOL, E, H = 12, 6, 16, 24  # ids 0 pad, 1 bos, 2 eos, 3 unk, 4.. words
PAD, BOS, EOS, UNK = 0, 1, 2, 3


def make_example():
    # target: every other source word (a "summary"); some source words are OOV (ids >= V)
    n = int(rng.integers(4, 9))
    words = [int(w) for w in rng.integers(4, V + OOV_POOL, size=n)]
    return words, words[::2]


def batch(examples):
    B = len(examples)
    src_len = torch.tensor([len(s) for s, _ in examples])
    S = int(src_len.max())
    T = max(len(t) for _, t in examples) + 1
    src = torch.full((B, S), PAD)
    src_ext = torch.full((B, S), PAD)
    tgt_in = torch.full((B, T), PAD)
    tgt_out = torch.full((B, T), PAD)
    n_oov = 0
    for b, (s, t) in enumerate(examples):
        oovs = sorted({w for w in s if w >= V})
        ext = {w: V + i for i, w in enumerate(oovs)}
        n_oov = max(n_oov, len(oovs))
        src[b, :len(s)] = torch.tensor([w if w < V else UNK for w in s])
        src_ext[b, :len(s)] = torch.tensor([w if w < V else ext[w] for w in s])
        gold = [w if w < V else ext[w] for w in t] + [EOS]
        inp = [BOS] + [w if w < V else UNK for w in t]
        tgt_in[b, :len(inp)] = torch.tensor(inp)
        tgt_out[b, :len(gold)] = torch.tensor(gold)
    return src, src_ext, src_len, tgt_in, tgt_out, n_oov


class PointerGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, E, padding_idx=PAD)
        self.encoder = nn.GRU(E, H, batch_first=True, bidirectional=True)
        self.reduce = nn.Linear(2 * H, H)
        self.W_h = nn.Linear(2 * H, 2 * H, bias=False)
        self.W_s = nn.Linear(H, 2 * H)
        self.w_c = nn.Linear(1, 2 * H, bias=False)
        self.v = nn.Linear(2 * H, 1, bias=False)
        self.cell = nn.GRUCell(E + 2 * H, H)
        self.p_gen = nn.Linear(2 * H + H + E, 1)
        self.out = nn.Sequential(nn.Linear(H + 2 * H, H), nn.Linear(H, V))

    def encode(self, src, src_len):
        packed = pack_padded_sequence(self.emb(src), src_len, batch_first=True, enforce_sorted=False)
        out, h = self.encoder(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        return out, torch.tanh(self.reduce(torch.cat([h[0], h[1]], -1)))

    def step(self, y, s, enc, enc_feat, mask, coverage, ctx, src_ext, n_oov):
        e = self.emb(y)
        s = self.cell(torch.cat([e, ctx], -1), s)
        scores = self.v(torch.tanh(enc_feat + self.W_s(s).unsqueeze(1) + self.w_c(coverage.unsqueeze(-1)))).squeeze(-1)
        attn = torch.softmax(scores.masked_fill(~mask, -1e9), -1)
        ctx = torch.bmm(attn.unsqueeze(1), enc).squeeze(1)
        p_gen = torch.sigmoid(self.p_gen(torch.cat([ctx, s, e], -1)))
        p_vocab = torch.softmax(self.out(torch.cat([s, ctx], -1)), -1)
        final = F.pad(p_gen * p_vocab, (0, n_oov))
        final = final.scatter_add(1, src_ext, (1 - p_gen) * attn)
        return final, s, attn, ctx, p_gen

    def forward(self, src, src_ext, src_len, tgt_in, n_oov):
        enc, s = self.encode(src, src_len)
        enc_feat = self.W_h(enc)
        mask = src != PAD
        coverage = torch.zeros(src.shape, dtype=enc.dtype)
        ctx = torch.zeros(src.shape[0], 2 * H)
        dists, cov_losses, gens = [], [], []
        for t in range(tgt_in.shape[1]):
            final, s, attn, ctx, p_gen = self.step(tgt_in[:, t], s, enc, enc_feat, mask, coverage, ctx, src_ext, n_oov)
            cov_losses.append(torch.minimum(attn, coverage).sum(1))
            coverage = coverage + attn
            dists.append(final)
            gens.append(p_gen)
        return torch.stack(dists, 1), torch.stack(cov_losses, 1), torch.cat(gens, 1)


model = PointerGenerator()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.15, size=tuple(p.shape))).float())
    model.emb.weight[PAD].zero_()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
train_set = [make_example() for _ in range(64)]
test_set = [make_example() for _ in range(32)]
losses = []
for epoch in range(12):
    order = rng.permutation(64)
    tot = 0.0
    for i in range(0, 64, 16):
        src, src_ext, src_len, tgt_in, tgt_out, n_oov = batch([train_set[j] for j in order[i:i + 16]])
        dist, cov, _ = model(src, src_ext, src_len, tgt_in, n_oov)
        gold_p = dist.gather(2, tgt_out.unsqueeze(-1)).squeeze(-1)
        m = (tgt_out != PAD).float()
        nll = -(torch.log(gold_p + 1e-12) * m).sum() / m.sum()
        loss = nll + 0.5 * (cov * m).sum() / m.sum()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        tot += nll.item() / 4
    losses.append(tot)
    if epoch % 4 == 0:
        print(f"epoch {epoch} nll {tot:.5f} coverage {(cov * m).sum().item() / m.sum().item():.5f}")

model.eval()
with torch.no_grad():
    src, src_ext, src_len, tgt_in, tgt_out, n_oov = batch(test_set)
    enc, s = model.encode(src, src_len)
    enc_feat = model.W_h(enc)
    mask = src != PAD
    coverage = torch.zeros(src.shape)
    ctx = torch.zeros(src.shape[0], 2 * H)
    y = torch.full((src.shape[0],), BOS)
    outs, gens = [], []
    for t in range(tgt_out.shape[1]):
        final, s, attn, ctx, p_gen = model.step(y, s, enc, enc_feat, mask, coverage, ctx, src_ext, n_oov)
        coverage = coverage + attn
        pred = final.argmax(1)
        outs.append(pred)
        gens.append(p_gen.squeeze(1))
        y = torch.where(pred >= V, torch.full_like(pred, UNK), pred)  # OOV ids are fed back as unk
    pred = torch.stack(outs, 1)
    m = tgt_out != PAD
    acc = (pred == tgt_out)[m].float().mean().item()
    oov_m = m & (tgt_out >= V)
    oov_acc = (pred == tgt_out)[oov_m].float().mean().item()
    print(f"test token accuracy {acc:.4f} OOV copied {oov_acc:.4f} ({int(oov_m.sum())} OOV tokens) mean p_gen {torch.stack(gens, 1)[m].mean().item():.4f}")
    print("example src", test_set[0][0], "gold", test_set[0][1], "decoded ext ids", pred[0][m[0]].tolist())
    print("distributions sum to 1", torch.allclose(final.sum(1), torch.ones(len(test_set)), atol=1e-5), "extended width", final.shape[1])
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {acc:.6f}")
