"""FlashAttention's algorithm written in plain PyTorch, as tutorials and reference kernels do:
a tiled forward pass with the online softmax (running row max, rescaled running sum and output
per key block), the log-sum-exp saved for the backward pass, a tiled backward that recomputes
probabilities from the saved statistics (dV, dP, D = rowsum(dO * O), dS, dQ, dK), wrapped in a
torch.autograd.Function with ctx.save_for_backward; causal masking by block skipping plus an
in-block triu mask; checked against F.scaled_dot_product_attention (values and gradients, with
and without is_causal, and with a boolean attn_mask), torch.autograd.gradcheck in float64 on a
tiny problem, and the memory argument (the largest intermediate is a block, not an L x L
matrix). Also grouped-query attention by repeat_interleave of key/value heads against SDPA's
enable_gqa, a sliding window mask, and token merging (ToMe bipartite soft matching with
scatter_reduce(mean)). A small causal model is trained with the tiled attention. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <1.0 where the tiled attention matched SDPA>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1611)
BLOCK = 8


def t(a, dtype=np.float32):
    return torch.from_numpy(np.asarray(a, dtype=dtype))


def flash_fwd(q, k, v, causal, block=BLOCK):
    *batch, n, d = q.shape
    scale = 1.0 / math.sqrt(d)
    o = torch.zeros_like(q)
    lse = torch.empty(*batch, n, dtype=q.dtype)
    largest = 0
    for i0 in range(0, n, block):
        qi = q[..., i0:i0 + block, :] * scale
        m = torch.full(qi.shape[:-1], -math.inf, dtype=q.dtype)
        s_sum = torch.zeros(qi.shape[:-1], dtype=q.dtype)
        acc = torch.zeros_like(qi)
        for j0 in range(0, n, block):
            if causal and j0 > i0 + block - 1:
                break
            s = qi @ k[..., j0:j0 + block, :].transpose(-1, -2)
            largest = max(largest, s.numel())
            if causal:
                rows = torch.arange(i0, i0 + s.shape[-2])[:, None]
                cols = torch.arange(j0, j0 + s.shape[-1])[None]
                s = s.masked_fill(cols > rows, -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            p = torch.exp(s - m_new.unsqueeze(-1))
            alpha = torch.exp(m - m_new)
            s_sum = alpha * s_sum + p.sum(-1)
            acc = alpha.unsqueeze(-1) * acc + p @ v[..., j0:j0 + block, :]
            m = m_new
        o[..., i0:i0 + block, :] = acc / s_sum.unsqueeze(-1)
        lse[..., i0:i0 + block] = m + torch.log(s_sum)
    return o, lse, largest


def flash_bwd(q, k, v, o, lse, do, causal, block=BLOCK):
    n, d = q.shape[-2:]
    scale = 1.0 / math.sqrt(d)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (do * o).sum(-1)
    for j0 in range(0, n, block):
        kj, vj = k[..., j0:j0 + block, :], v[..., j0:j0 + block, :]
        for i0 in range(0, n, block):
            if causal and j0 > i0 + block - 1:
                continue
            qi, doi = q[..., i0:i0 + block, :], do[..., i0:i0 + block, :]
            s = (qi @ kj.transpose(-1, -2)) * scale
            if causal:
                rows = torch.arange(i0, i0 + s.shape[-2])[:, None]
                cols = torch.arange(j0, j0 + s.shape[-1])[None]
                s = s.masked_fill(cols > rows, -math.inf)
            p = torch.exp(s - lse[..., i0:i0 + block].unsqueeze(-1))
            dv[..., j0:j0 + block, :] += p.transpose(-1, -2) @ doi
            dp = doi @ vj.transpose(-1, -2)
            ds = p * (dp - D[..., i0:i0 + block].unsqueeze(-1))
            dq[..., i0:i0 + block, :] += ds @ kj * scale
            dk[..., j0:j0 + block, :] += ds.transpose(-1, -2) @ qi * scale
    return dq, dk, dv


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        o, lse, _ = flash_fwd(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_bwd(q, k, v, o, lse, do, ctx.causal)
        return dq, dk, dv, None


q, k, v = (t(rng.normal(size=(2, 3, 37, 16))).requires_grad_(True) for _ in range(3))
errs = []
for causal in (False, True):
    out = FlashAttention.apply(q, k, v, causal)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    g = t(rng.normal(size=out.shape))
    grads = torch.autograd.grad(out, (q, k, v), g)
    rgrads = torch.autograd.grad(ref, (q, k, v), g)
    err = (out - ref).abs().max().item()
    gerr = max((a - b).abs().max().item() for a, b in zip(grads, rgrads))
    errs.append(max(err, gerr))
    print(f"causal={causal}: output matches sdpa {err < 1e-5} gradients match {gerr < 1e-4}")
_, lse, largest = flash_fwd(q.detach(), k.detach(), v.detach(), False)
full_lse = torch.logsumexp(q.detach() @ k.detach().transpose(-1, -2) / 4.0, -1)
print(f"saved lse == logsumexp of scores: {torch.allclose(lse, full_lse, atol=1e-5)} largest block {largest} vs full {2 * 3 * 37 * 37}")
mask = t(rng.random((37, 37)) > 0.3).bool()
mask.fill_diagonal_(True)
ref_masked = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
manual = torch.softmax((q @ k.transpose(-1, -2) / 4.0).masked_fill(~mask, float("-inf")), -1) @ v
print(f"boolean attn_mask == masked_fill softmax: {torch.allclose(ref_masked, manual, atol=1e-5)}")
qs, ks, vs = (t(rng.normal(size=(1, 1, 10, 4)), np.float64).requires_grad_(True) for _ in range(3))
print(f"gradcheck causal tiled attention: {torch.autograd.gradcheck(lambda a, b, c: FlashAttention.apply(a, b, c, True), (qs, ks, vs))}")

# grouped-query attention: 6 query heads share 2 key/value heads
qg = t(rng.normal(size=(2, 6, 12, 8)))
kg, vg = t(rng.normal(size=(2, 2, 12, 8))), t(rng.normal(size=(2, 2, 12, 8)))
rep = F.scaled_dot_product_attention(qg, kg.repeat_interleave(3, dim=1), vg.repeat_interleave(3, dim=1), is_causal=True)
gqa = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True, enable_gqa=True)
print(f"gqa by repeat_interleave == enable_gqa: {torch.allclose(rep, gqa, atol=1e-6)} shape {tuple(gqa.shape)}")
idx = torch.arange(12)
window = (idx[None] <= idx[:, None]) & (idx[:, None] - idx[None] < 4)
sw = F.scaled_dot_product_attention(qg, kg.repeat_interleave(3, 1), vg.repeat_interleave(3, 1), attn_mask=window)
print(f"sliding window row 11 attends to {window[11].nonzero().flatten().tolist()} output norm {sw.norm().item():.4f}")


def tome_merge(x, r):
    """Merges r tokens of x (B, N, C): alternate tokens into sets A and B, each A token matched to
    its most similar B token by cosine similarity, the r best-matched A tokens averaged into
    their B partners."""
    a, b = x[:, ::2], x[:, 1::2]
    scores = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).transpose(-1, -2)
    node_max, node_idx = scores.max(dim=-1)
    edge_idx = node_max.argsort(dim=-1, descending=True)[..., None]
    unm_idx, src_idx = edge_idx[:, r:], edge_idx[:, :r]
    dst_idx = node_idx[..., None].gather(dim=1, index=src_idx)
    c = x.shape[-1]
    unm = a.gather(dim=1, index=unm_idx.expand(-1, -1, c))
    src = a.gather(dim=1, index=src_idx.expand(-1, -1, c))
    dst = b.scatter_reduce(1, dst_idx.expand(-1, -1, c), src, reduce="mean")
    return torch.cat([unm, dst], dim=1)


xt = t(rng.normal(size=(2, 10, 4)))
xt[:, 2] = xt[:, 3] + 0.01  # a near duplicate pair: token 2 (set A) and token 3 (set B)
merged = tome_merge(xt, 1)
merged2 = tome_merge(xt, 2)
# 4 unmerged A tokens come first, then the 5 B tokens; B token 1 is the partner of token 2
print(f"tome: {tuple(xt.shape)} -> {tuple(merged.shape)} {tuple(merged2.shape)} duplicate merged into its partner {torch.allclose(merged[0, 4 + 1], (xt[0, 2] + xt[0, 3]) / 2, atol=1e-6)}")


class TinyLM(nn.Module):
    def __init__(self, vocab=12, d=32, heads=2, n=24):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(t(rng.normal(0, 0.02, (n, d))))
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))
        self.ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)
        self.heads = heads

    def forward(self, idx):
        b, n = idx.shape
        x = self.tok(idx) + self.pos[:n]
        q, k, v = self.qkv(self.ln(x)).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = FlashAttention.apply(q, k, v, True).transpose(1, 2).reshape(b, n, -1)
        x = x + self.proj(a)
        x = x + self.ff(x)
        return self.out(x)


model = TinyLM()
with torch.no_grad():
    for name, p in model.named_parameters():
        if name != "pos" and p.dim() > 1:
            p.copy_(t(rng.normal(0, 0.1, p.shape)))
        elif name.endswith("bias"):
            p.zero_()
opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
losses = []
for step in range(60):
    # sequences that repeat a random prefix of length 6: the second half is copyable
    pre = rng.integers(0, 12, (16, 6))
    seq = torch.from_numpy(np.concatenate([pre, pre, pre, pre], 1))
    logits = model(seq[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 12), seq[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {float(max(errs) < 1e-4):.1f}")
