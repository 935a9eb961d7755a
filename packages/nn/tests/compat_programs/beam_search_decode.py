"""Batched beam search for a recurrent decoder, in the style of the public seq2seq / fairseq /
Hugging Face generation utilities: a GRUCell language model (nn.Embedding, GRUCell, Linear,
log_softmax) run over batch * beam rows; the first step expanded from one beam; each step's
scores added to the running beam scores and flattened to (batch, beam * vocab) for torch.topk of
2 * beam candidates; beam and token ids by torch.div(rounding_mode="floor") and remainder;
hidden states reordered with index_select on flattened indices; finished hypotheses (EOS) moved
out with a length penalty; already-banned repeated bigrams masked by scatter_ of -inf;
torch.gather of per-token log-probs to rescore the winners; greedy decoding checked equal to beam
size 1; and a teacher-forced score of every returned hypothesis equal to its search score.
Weights from NumPy: the run is the same on both libraries. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <best score> <mean length> <beam >= greedy>."""

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(7)
V, H, BOS, EOS = 12, 16, 0, 1


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.cell = nn.GRUCell(H, H)
        self.out = nn.Linear(H, V)

    def init_state(self, batch):
        return torch.tanh(torch.arange(batch * H, dtype=torch.float32).reshape(batch, H) / 17.0)

    def step(self, tokens, h):
        h = self.cell(self.emb(tokens), h)
        return self.out(h).log_softmax(-1), h


dec = Decoder()
with torch.no_grad():
    for p in dec.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.6, p.shape).astype(np.float32)))
    dec.out.bias[EOS] -= 2.5


@torch.no_grad()
def beam_search(batch, beam, max_len=8, alpha=0.7, no_repeat_bigram=True):
    h = dec.init_state(batch).repeat_interleave(beam, dim=0)  # (B*K, H)
    tokens = torch.full((batch * beam, 1), BOS, dtype=torch.long)
    scores = torch.zeros(batch, beam)
    scores[:, 1:] = float("-inf")  # only the first beam is live at the start
    finished = [[] for _ in range(batch)]
    for t in range(max_len):
        logp, h = dec.step(tokens[:, -1], h)
        if no_repeat_bigram and t > 0:
            prev = tokens[:, -1:]
            banned = torch.zeros_like(logp, dtype=torch.bool)
            for j in range(tokens.shape[1] - 1):  # tokens that followed prev before
                hit = tokens[:, j:j + 1] == prev
                banned |= torch.zeros_like(banned).scatter_(1, tokens[:, j + 1:j + 2], hit)
            logp = logp.masked_fill(banned, float("-inf"))
        cand = (scores.reshape(-1, 1) + logp).reshape(batch, beam * V)
        top_scores, top_ids = torch.topk(cand, 2 * beam, dim=1)
        beam_ids = torch.div(top_ids, V, rounding_mode="floor")
        tok_ids = top_ids.remainder(V)
        new_scores = torch.full((batch, beam), float("-inf"))
        src_rows = torch.zeros(batch, beam, dtype=torch.long)
        new_tok = torch.full((batch, beam), EOS, dtype=torch.long)
        for b in range(batch):
            k = 0
            for s, bi, ti in zip(top_scores[b].tolist(), beam_ids[b].tolist(), tok_ids[b].tolist()):
                if s == float("-inf"):
                    break
                if ti == EOS:
                    seq = tokens[b * beam + bi, 1:].tolist() + [EOS]
                    finished[b].append((s / ((5 + len(seq)) / 6) ** alpha, s, seq))
                    continue
                if k < beam:
                    new_scores[b, k], src_rows[b, k], new_tok[b, k] = s, b * beam + bi, ti
                    k += 1
        flat = src_rows.reshape(-1)
        h = h.index_select(0, flat)
        tokens = torch.cat([tokens.index_select(0, flat), new_tok.reshape(-1, 1)], dim=1)
        scores = new_scores
    for b in range(batch):  # unfinished beams count at max length
        for k in range(beam):
            if scores[b, k] > float("-inf"):
                seq = tokens[b * beam + k, 1:].tolist()
                s = scores[b, k].item()
                finished[b].append((s / ((5 + len(seq)) / 6) ** alpha, s, seq))
    return [sorted(f, key=lambda x: -x[0]) for f in finished]


@torch.no_grad()
def greedy(batch, max_len=8):
    h = dec.init_state(batch)
    tok = torch.full((batch,), BOS, dtype=torch.long)
    out, total = [], torch.zeros(batch)
    done = torch.zeros(batch, dtype=torch.bool)
    for _ in range(max_len):
        logp, h = dec.step(tok, h)
        val, tok = logp.max(-1)
        total += torch.where(done, torch.zeros_like(val), val)
        out.append(torch.where(done, torch.full_like(tok, EOS), tok))
        done |= tok == EOS
    return torch.stack(out, 1), total


@torch.no_grad()
def teacher_forced(b, seq):
    h = dec.init_state(b + 1)[b:b + 1]
    inp = torch.tensor([BOS] + seq[:-1])
    tgt = torch.tensor(seq)
    total = 0.0
    logps = []
    for t in range(len(seq)):
        logp, h = dec.step(inp[t:t + 1], h)
        logps.append(logp)
    lp = torch.cat(logps)  # (T, V)
    total = lp.gather(1, tgt[:, None]).sum().item()
    return total


hyps = beam_search(batch=3, beam=4, no_repeat_bigram=False)
for b, hs in enumerate(hyps):
    print(f"input {b}:", [(round(n, 4), s) for n, _, s in hs[:3]])
agree = all(abs(teacher_forced(b, s) - raw) < 1e-4 for b, hs in enumerate(hyps) for _, raw, s in hs)
print("teacher-forced scores equal search scores:", agree)
g_seq, g_score = greedy(3)
greedy_ok = all(max(raw for _, raw, _ in hs) >= g_score[b].item() - 1e-5 for b, hs in enumerate(hyps))
print("beam at least as good as greedy:", greedy_ok, "greedy", g_seq.tolist(),
      [round(v, 4) for v in g_score.tolist()])
nr = beam_search(batch=3, beam=4, no_repeat_bigram=True)
has_repeat = any(len({(s[i], s[i + 1]) for i in range(len(s) - 1)}) < len(s) - 1
                 for hs in nr for _, _, s in hs if s[-1] != EOS or len(s) < 3)
print("no repeated bigram:", not has_repeat, "best", [(round(hs[0][0], 4), hs[0][2]) for hs in nr])
best = max(hs[0][0] for hs in hyps)
mean_len = float(np.mean([len(hs[0][2]) for hs in hyps]))
print(f"RESULT {best:.4f} {mean_len:.3f} {int(greedy_ok)}")
