"""Attention code paths that encoder-style models hit: nn.MultiheadAttention with kdim / vdim
(separate q / k / v projections), add_bias_kv and add_zero_attn, batch_first=False inputs,
boolean and float key_padding_masks, a 3-D per-head attn_mask, need_weights with
average_attn_weights=False, and the in-projection weights copied by hand; F.scaled_dot_product_attention
with a boolean mask, is_causal, an explicit scale and grouped-query attention (enable_gqa);
nn.TransformerEncoder in eval mode with a src_key_padding_mask (the nested-tensor fast path that
zeroes padded positions), mask_check, and the TransformerEncoderLayer's own attention weights
read by a forward hook. Weights from NumPy: the run is the same on both libraries. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1818)


def fill_(module, std=0.15):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(rng.normal(0, std if p.dim() > 1 else 0.02, p.shape).astype(np.float32)))


def r(t, n=4):
    return [round(float(v), n) for v in torch.as_tensor(t).reshape(-1)]


# kdim / vdim and bias_kv / zero_attn, sequence-first
mha = nn.MultiheadAttention(16, 4, kdim=10, vdim=6, add_bias_kv=True, add_zero_attn=True)
fill_(mha)
print("separate proj", mha._qkv_same_embed_dim, mha.in_proj_weight is None, tuple(mha.q_proj_weight.shape), tuple(mha.k_proj_weight.shape), tuple(mha.v_proj_weight.shape), tuple(mha.bias_k.shape))
q = torch.from_numpy(rng.normal(size=(5, 2, 16)).astype(np.float32))
k = torch.from_numpy(rng.normal(size=(7, 2, 10)).astype(np.float32))
v = torch.from_numpy(rng.normal(size=(7, 2, 6)).astype(np.float32))
kpm = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
out, w = mha(q, k, v, key_padding_mask=kpm)
print("bias_kv out", tuple(out.shape), "weights", tuple(w.shape), "sum", r(w.sum(-1)[:, 0]), "padded weight", r(w[1, :, 4:7].sum()))
out2, w2 = mha(q, k, v, key_padding_mask=kpm, average_attn_weights=False)
print("per-head weights", tuple(w2.shape), "mean == averaged", torch.allclose(w2.mean(1), w, atol=1e-6))
fmask = torch.zeros(2, 7).masked_fill(kpm, float("-inf"))
out3, _ = mha(q, k, v, key_padding_mask=fmask)
print("float mask == bool mask", torch.allclose(out3, out, atol=1e-6))
_, w_none = mha(q, k, v, need_weights=False)
print("need_weights False ->", w_none)

# batch_first self attention with a per-head 3-D mask and the packed in_proj
sa = nn.MultiheadAttention(12, 3, batch_first=True, dropout=0.0)
fill_(sa)
x = torch.from_numpy(rng.normal(size=(2, 6, 12)).astype(np.float32))
head_mask = torch.from_numpy(rng.random((2 * 3, 6, 6)) < 0.25)
head_mask[:, torch.arange(6), torch.arange(6)] = False
o, aw = sa(x, x, x, attn_mask=head_mask, average_attn_weights=False)
print("3-D mask weights", tuple(aw.shape), "masked mass", r(aw.reshape(6, 6, 6)[head_mask].sum()))
# by hand, from the packed weights
Wq, Wk, Wv = sa.in_proj_weight.chunk(3)
bq, bk, bv = sa.in_proj_bias.chunk(3)
Q = (x @ Wq.T + bq).view(2, 6, 3, 4).transpose(1, 2)
K = (x @ Wk.T + bk).view(2, 6, 3, 4).transpose(1, 2)
V = (x @ Wv.T + bv).view(2, 6, 3, 4).transpose(1, 2)
att = F.scaled_dot_product_attention(Q, K, V, attn_mask=~head_mask.view(2, 3, 6, 6))
manual = sa.out_proj(att.transpose(1, 2).reshape(2, 6, 12))
print("by hand == module", torch.allclose(manual, o, atol=1e-5))

# sdpa: causal, explicit scale, grouped-query attention
Qg = torch.from_numpy(rng.normal(size=(1, 8, 5, 4)).astype(np.float32))
Kg = torch.from_numpy(rng.normal(size=(1, 2, 5, 4)).astype(np.float32))
Vg = torch.from_numpy(rng.normal(size=(1, 2, 5, 4)).astype(np.float32))
gqa = F.scaled_dot_product_attention(Qg, Kg, Vg, is_causal=True, enable_gqa=True, scale=0.3)
rep = F.scaled_dot_product_attention(Qg, Kg.repeat_interleave(4, 1), Vg.repeat_interleave(4, 1), is_causal=True, scale=0.3)
print("gqa == repeated kv", torch.allclose(gqa, rep, atol=1e-6), "row0 copies v0", torch.allclose(gqa[0, :, 0], Vg[0].repeat_interleave(4, 0)[:, 0], atol=1e-6))
try:
    F.scaled_dot_product_attention(Qg, Kg, Vg)
except RuntimeError:
    print("mismatched heads without enable_gqa -> RuntimeError")
causal_bool = torch.ones(5, 5, dtype=torch.bool).tril()
print("is_causal == tril mask", torch.allclose(F.scaled_dot_product_attention(Qg, Qg, Qg, is_causal=True), F.scaled_dot_product_attention(Qg, Qg, Qg, attn_mask=causal_bool), atol=1e-6))

# encoder with padding: train, then eval through the fast path
V_, D_, L_ = 20, 16, 9
enc_layer = nn.TransformerEncoderLayer(D_, 4, 32, dropout=0.0, batch_first=True)
encoder = nn.TransformerEncoder(enc_layer, 2, enable_nested_tensor=True)
emb = nn.Embedding(V_, D_, padding_idx=0)
head = nn.Linear(D_, 2)
for m in (encoder, emb, head):
    fill_(m)
with torch.no_grad():
    emb.weight[0].zero_()
lengths = torch.from_numpy(rng.integers(3, L_ + 1, 64))
tokens = torch.from_numpy(rng.integers(1, V_, (64, L_)))
pad = torch.arange(L_)[None, :] >= lengths[:, None]
tokens = tokens.masked_fill(pad, 0)
labels = ((tokens == 7).any(1) | (tokens == 3).any(1)).long()
params = [*encoder.parameters(), *emb.parameters(), *head.parameters()]
opt = torch.optim.Adam(params, lr=3e-3)


def forward(tok, mask):
    h = encoder(emb(tok), src_key_padding_mask=mask)
    keep = (~mask).unsqueeze(-1).float()
    return head((h * keep).sum(1) / keep.sum(1)), h


losses = []
for step in range(80):
    logits, _ = forward(tokens, pad)
    loss = F.cross_entropy(logits, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.5f}")
encoder.eval()
with torch.no_grad():
    logits, h = forward(tokens, pad)
acc = (logits.argmax(1) == labels).float().mean().item()
print("eval padded positions zero", bool((h[pad] == 0).all()), "shape", tuple(h.shape))
print("eval unpadded finite", bool(torch.isfinite(h[~pad]).all()))
encoder.train()
with torch.no_grad():
    _, h_train = forward(tokens, pad)
print("train-mode padded positions nonzero", bool((h_train[pad] != 0).any()), "agree on tokens", torch.allclose(h_train[~pad], h[~pad], atol=1e-4))

captured = {}


def grab(mod, args, kwargs, output):
    captured["w"] = output[1]


layer0 = encoder.layers[0]
hook = layer0.self_attn.register_forward_hook(grab, with_kwargs=True)
encoder.train()
with torch.no_grad():
    encoder(emb(tokens[:2]), src_key_padding_mask=pad[:2])
hook.remove()
print("hooked weights", captured["w"])
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
