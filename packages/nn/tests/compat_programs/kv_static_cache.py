"""Incremental decoding with a preallocated (static) key/value cache, in the style of the public
"static cache" / ALiBi decoder implementations: the cache is a non-persistent buffer
(register_buffer(persistent=False): absent from the state_dict) of shape (batch, heads, max_len,
head_dim) written with index_copy_ at the current positions (and index_put_ with a tuple of
index tensors for a ragged batch); attention over cache[:, :, :pos + 1] with ALiBi biases
(per-head slopes 2 ** (-8 / H * (h + 1)) times the key-query distance); left-padded prompts with an
attention mask, position ids from cumsum of the mask, and padded keys masked out; the cached
step-by-step logits checked equal to a full causal forward; the cache reordered with
index_select for a beam, reset with zero_(); torch.inference_mode generation with argmax; a short
training run of the same decoder on a next-token task first. Weights and data from NumPy: the
run is the same on both libraries. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <cache
error>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(5)
V, D, H, L, MAXLEN = 16, 32, 4, 2, 24


def alibi_slopes(h):
    return torch.pow(2.0, -8.0 / h * torch.arange(1, h + 1, dtype=torch.float32))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.register_buffer("slopes", alibi_slopes(H), persistent=False)
        self.register_buffer("k_cache", torch.zeros(1, H, MAXLEN, D // H), persistent=False)
        self.register_buffer("v_cache", torch.zeros(1, H, MAXLEN, D // H), persistent=False)

    def setup_cache(self, batch):
        self.k_cache = torch.zeros(batch, H, MAXLEN, D // H)
        self.v_cache = torch.zeros(batch, H, MAXLEN, D // H)

    def forward(self, x, pos, key_mask=None, use_cache=False):
        # x: (B, T, D); pos: (T,) absolute positions of x's tokens
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        if use_cache:
            self.k_cache.index_copy_(2, pos, k)
            self.v_cache.index_copy_(2, pos, v)
            end = int(pos[-1]) + 1
            k, v = self.k_cache[:, :, :end], self.v_cache[:, :, :end]
        kpos = torch.arange(k.shape[2])
        dist = (kpos[None, :] - pos[:, None]).float()  # (T, S), <= 0 for visible keys
        bias = self.slopes[:, None, None] * dist  # (H, T, S)
        allowed = dist <= 0
        if key_mask is not None:
            allowed = allowed & key_mask[:, None, None, :k.shape[2]]
        s = q @ k.transpose(-2, -1) / math.sqrt(D // H) + bias
        s = s.masked_fill(~allowed, float("-inf"))
        out = s.softmax(-1).nan_to_num(0.0) @ v
        return self.o(out.transpose(1, 2).reshape(B, T, D))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.layers = nn.ModuleList([Attention() for _ in range(L)])
        self.norms = nn.ModuleList([nn.LayerNorm(D) for _ in range(L)])
        self.head = nn.Linear(D, V)

    def forward(self, idx, pos, key_mask=None, use_cache=False):
        x = self.emb(idx)
        for attn, norm in zip(self.layers, self.norms):
            x = x + attn(norm(x), pos, key_mask, use_cache)
        return self.head(x)

    def setup_cache(self, batch):
        for a in self.layers:
            a.setup_cache(batch)


model = Decoder()
with torch.no_grad():
    for name, p in model.named_parameters():
        if "norms" not in name:
            p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
print("state_dict keys:", len(model.state_dict()), "cache in it:",
      any("cache" in k for k in model.state_dict()), "buffers:", len(list(model.buffers())))

# train on a counting task: next token = (token + 3) mod V
seq = torch.from_numpy(((np.arange(12)[None, :] * 3 + rng.integers(0, V, (32, 1))) % V))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
pos = torch.arange(11)
losses = []
for step in range(60):
    logits = model(seq[:, :-1], pos)
    loss = F.cross_entropy(logits.reshape(-1, V), seq[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.4f}")

# cached decoding equals the full forward
model.eval()
prompt = seq[:3, :5]
with torch.inference_mode():
    full = model(seq[:3, :10], torch.arange(10))
    model.setup_cache(3)
    step_logits = [model(prompt, torch.arange(5), use_cache=True)]
    for t in range(5, 10):
        step_logits.append(model(seq[:3, t:t + 1], torch.tensor([t]), use_cache=True))
    cached = torch.cat(step_logits, dim=1)
    cache_err = (cached - full).abs().max().item()
print("cached == full:", cache_err < 1e-4, "cache filled to", int((model.layers[0].k_cache[0, 0].abs().sum(-1) > 0).sum()))

# greedy generation
with torch.inference_mode():
    model.setup_cache(2)
    toks = seq[:2, :4].clone()
    logits = model(toks, torch.arange(4), use_cache=True)
    for t in range(4, 12):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        toks = torch.cat([toks, nxt], dim=1)
        logits = model(nxt, torch.tensor([t]), use_cache=True)
print("generated", toks.tolist(), "inference:", toks.is_inference())
print("counting continued:", bool(((toks[:, 1:] - toks[:, :-1]) % V == 3).all()))

# left padding: prompts of lengths 5 and 3, pad id 0, mask keys
with torch.inference_mode():
    a, b = seq[4, :5], seq[5, :3]
    batch = torch.stack([a, F.pad(b, (2, 0), value=0)])
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], dtype=torch.bool)
    position_ids = mask.long().cumsum(-1) - 1
    print("position ids", position_ids.tolist())
    model.setup_cache(2)
    out_pad = model(batch, torch.arange(5), key_mask=mask, use_cache=True)
    alone = model(b[None], torch.arange(3))
    # ALiBi depends on distances only, so the padded row matches the unpadded prompt
    print("left-padded == alone:", torch.allclose(out_pad[1, 2:], alone[0], atol=1e-4))

    # ragged write with index_put_ and a beam reorder with index_select
    kc = model.layers[0].k_cache
    before = kc[1, :, 4].clone()
    kc.index_put_((torch.tensor([0, 1]), torch.tensor([0, 0]), torch.tensor([6, 7])),
                  torch.ones(2, D // H))
    print("index_put_ wrote:", kc[0, 0, 6].sum().item(), kc[1, 0, 7].sum().item())
    for att in model.layers:
        att.k_cache = att.k_cache.index_select(0, torch.tensor([1, 1]))
        att.v_cache = att.v_cache.index_select(0, torch.tensor([1, 1]))
    print("reordered rows equal:", torch.equal(model.layers[0].k_cache[0, :, 4], before))
    for att in model.layers:
        att.k_cache.zero_()
    print("reset:", model.layers[1].k_cache.abs().sum().item())
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {cache_err:.1e}")
