"""A LLaMA-style decoder-only language model with KV-cache generation, in the style of the public
"LLaMA from scratch" implementations: nn.RMSNorm, rotary position embeddings computed the
complex way (torch.polar of outer(positions, inverse frequencies), torch.view_as_complex on
pairs of channels, view_as_real and flatten back), grouped-query attention (repeat_interleave
of the key/value heads), F.scaled_dot_product_attention with is_causal and with an explicit
boolean mask for cached steps, a SwiGLU feed-forward, weight tying, AdamW with a cosine
schedule, then generation: a KV cache grown with torch.cat (the cached logits checked against a
full recomputation), temperature, top-k by torch.topk and top-p (nucleus) filtering by sort,
softmax, cumsum and scatter, and the token drawn by inverse-CDF with torch.searchsorted from a
NumPy uniform (and torch.multinomial, whose draws are only checked to fall in the nucleus).
Weights and data from NumPy: the run is the same on both libraries. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <greedy accuracy>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=50)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

VOCAB, DIM, HEADS, KV_HEADS, LAYERS, CTX = 24, 32, 4, 2, 2, 32
HEAD_DIM = DIM // HEADS


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(DIM, HEADS * HEAD_DIM, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wo = nn.Linear(HEADS * HEAD_DIM, DIM, bias=False)

    def forward(self, x, freqs_cis, cache=None):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, HEADS, HEAD_DIM)
        xk = self.wk(x).view(bsz, seqlen, KV_HEADS, HEAD_DIM)
        xv = self.wv(x).view(bsz, seqlen, KV_HEADS, HEAD_DIM)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        if cache is not None:
            if "k" in cache:
                xk = torch.cat([cache["k"], xk], dim=1)
                xv = torch.cat([cache["v"], xv], dim=1)
            cache["k"], cache["v"] = xk, xv
        n_rep = HEADS // KV_HEADS
        keys = xk.repeat_interleave(n_rep, dim=2).transpose(1, 2)
        values = xv.repeat_interleave(n_rep, dim=2).transpose(1, 2)
        q = xq.transpose(1, 2)
        total = keys.size(2)
        if seqlen == total:
            out = F.scaled_dot_product_attention(q, keys, values, is_causal=True)
        else:  # new queries at the end of the cached sequence
            mask = torch.ones(seqlen, total, dtype=torch.bool).tril(diagonal=total - seqlen)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.wo(out.transpose(1, 2).contiguous().view(bsz, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.w1 = nn.Linear(DIM, hidden, bias=False)
        self.w2 = nn.Linear(hidden, DIM, bias=False)
        self.w3 = nn.Linear(DIM, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = nn.RMSNorm(DIM, eps=1e-5)
        self.attention = Attention()
        self.ffn_norm = nn.RMSNorm(DIM, eps=1e-5)
        self.feed_forward = FeedForward()

    def forward(self, x, freqs_cis, cache=None):
        h = x + self.attention(self.attention_norm(x), freqs_cis, cache)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.RMSNorm(DIM, eps=1e-5)
        self.output = nn.Linear(DIM, VOCAB, bias=False)
        self.output.weight = self.tok_embeddings.weight  # tied
        self.register_buffer("freqs_cis", precompute_freqs_cis(HEAD_DIM, CTX * 2),
                             persistent=False)

    def forward(self, tokens, start_pos=0, caches=None):
        h = self.tok_embeddings(tokens)
        freqs_cis = self.freqs_cis[start_pos:start_pos + tokens.size(1)]
        for i, layer in enumerate(self.layers):
            h = layer(h, freqs_cis, None if caches is None else caches[i])
        return self.output(self.norm(h)).float()


model = Transformer()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(r.normal(0, 0.02 if "emb" in name else 1 / math.sqrt(p.shape[1]),
                                              tuple(p.shape)).astype(np.float32)))
n_params = sum(p.numel() for p in model.parameters())
print(f"parameters: {n_params} (tied: {model.output.weight is model.tok_embeddings.weight}), "
      f"freqs_cis {tuple(model.freqs_cis.shape)} {model.freqs_cis.dtype}")
print(f"buffers in state_dict: {[k for k in model.state_dict() if 'freqs' in k]}")

# a corpus of arithmetic-progression "sentences": token t+1 = token t + stride (mod VOCAB)
starts, strides = rng.integers(0, VOCAB, 400), rng.integers(1, 4, 400)
data = (starts[:, None] + strides[:, None] * np.arange(CTX + 1)) % VOCAB
data = torch.from_numpy(data.astype(np.int64))

opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps, eta_min=3e-4)
losses = []
for step in range(args.steps):
    i = (step * 16) % 384
    batch = data[i:i + 16]
    logits = model(batch[:, :-1])
    loss = F.cross_entropy(logits.view(-1, VOCAB), batch[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:3d} loss {loss.item():.4f} norm {norm.item():.4f} "
              f"lr {sched.get_last_lr()[0]:.6f}")


def sample_top_p(probs, p, u):
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    mask = probs_sum - probs_sort > p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    cdf = torch.cumsum(probs_sort, dim=-1)
    pick = torch.searchsorted(cdf, u.unsqueeze(-1)).clamp_(max=probs.size(-1) - 1)
    return torch.gather(probs_idx, -1, pick), mask


def top_k_logits(logits, k):
    v, _ = torch.topk(logits, k)
    return logits.masked_fill(logits < v[:, [-1]], float("-inf"))


model.eval()
prompt = data[390:396, :6]
with torch.inference_mode():
    # KV-cache decoding agrees with recomputing the whole sequence
    caches = [{} for _ in range(LAYERS)]
    tokens = prompt
    logits = model(tokens, 0, caches)[:, -1]
    greedy = [tokens]
    worst = 0.0
    for t in range(8):
        nxt = logits.argmax(-1, keepdim=True)
        greedy.append(nxt)
        full = model(torch.cat(greedy, 1))[:, -1]
        logits = model(nxt, tokens.size(1) + t, caches)[:, -1]
        worst = max(worst, (full - logits).abs().max().item())
    greedy = torch.cat(greedy, 1)
    print(f"kv cache: keys {tuple(caches[0]['k'].shape)}, cached == recomputed: {worst < 1e-4}")
    target = data[390:396, :14]
    acc = (greedy[:, 6:] == target[:, 6:]).float().mean().item()
    print(f"greedy continuation accuracy {acc:.3f}")
    print("greedy:", greedy[0].tolist())

    # temperature + top-k + top-p sampling with NumPy's uniforms
    caches = [{} for _ in range(LAYERS)]
    logits = model(prompt, 0, caches)[:, -1]
    out, pos, kept = [], prompt.size(1), []
    for t in range(6):
        logits = top_k_logits(logits / 0.8, 8)
        probs = F.softmax(logits, dim=-1)
        u = torch.from_numpy(rng.random(probs.size(0)).astype(np.float32))
        nxt, mask = sample_top_p(probs, 0.9, u)
        kept.append((~mask).sum(-1).float().mean().item())
        out.append(nxt)
        logits = model(nxt, pos, caches)[:, -1]
        pos += 1
    sampled = torch.cat(out, 1)
    print("sampled:", sampled.tolist())
    print(f"nucleus sizes: {[f'{k:.2f}' for k in kept]}")
    # torch.multinomial draws its own random numbers: only where they land is compared
    probs = F.softmax(top_k_logits(model(prompt)[:, -1], 3), dim=-1)
    g = torch.Generator().manual_seed(0)
    draws = torch.multinomial(probs, num_samples=5, replacement=True, generator=g)
    allowed = torch.topk(probs, 3).indices
    inside = (draws.unsqueeze(-1) == allowed.unsqueeze(1)).any(-1).all().item()
    print(f"multinomial {tuple(draws.shape)} {draws.dtype}, within top-3: {inside}")

print(f"RESULT {losses[0]:.4f} {np.mean(losses[-5:]):.4f} {acc:.4f}")
