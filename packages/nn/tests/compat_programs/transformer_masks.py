"""Attention masks the way sequence models build and pass them: nn.Transformer.
generate_square_subsequent_mask (a float -inf mask) against a boolean causal mask and
is_causal=True, src / tgt / memory key_padding_masks, attn_mask and key_padding_mask combined,
3-D per-head masks (batch * heads, L, S), nn.MultiheadAttention with need_weights=False,
average_attn_weights=False (per-head maps), add_bias_kv / add_zero_attn, kdim / vdim,
batch_first and sequence-first layouts, F.scaled_dot_product_attention with a boolean mask,
an additive mask and is_causal, a full nn.Transformer (norm_first, activation="gelu",
custom dim_feedforward) trained on a copy-with-offset task under teacher forcing, and a
TransformerEncoder in eval mode with a padding mask (the nested-tensor fast path zeroing the
padded positions), and torch.masked mean pooling / softmax / amax over the real tokens.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <greedy accuracy>."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def det_init(module, scale=0.2):
    with torch.no_grad():
        for i, (name, p) in enumerate(module.named_parameters()):
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or \
                    name.endswith("norm3.weight") or name.endswith("norm.weight"):
                p.fill_(1.0)
                continue
            p.copy_(scale * torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.37 +
                                      i * 1.3).view_as(p))


def fmt(t):
    return [round(v, 4) for v in t.flatten().tolist()[:6]]


# ---- masks ----
L = 5
float_mask = nn.Transformer.generate_square_subsequent_mask(L)
bool_mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
print("subsequent mask row 1", float_mask[1].tolist(), float_mask.dtype)
print("bool mask row 1", bool_mask[1].tolist())

E, Hh = 8, 2
mha = nn.MultiheadAttention(E, Hh, batch_first=True)
det_init(mha)
mha.eval()
q = torch.sin(torch.arange(2 * L * E, dtype=torch.float32) * 0.1).view(2, L, E)
out_f, w_f = mha(q, q, q, attn_mask=float_mask)
out_b, w_b = mha(q, q, q, attn_mask=bool_mask)
out_c, w_c = mha(q, q, q, attn_mask=bool_mask, is_causal=True)
print("float mask == bool mask:", torch.allclose(out_f, out_b, atol=1e-6),
      "is_causal agrees:", torch.allclose(out_f, out_c, atol=1e-6))
print("causal weights upper triangle zero:", bool((w_f.triu(1) == 0).all()),
      "rows sum to 1:", torch.allclose(w_f.sum(-1), torch.ones(2, L)))
kpm = torch.tensor([[False, False, False, True, True], [False, False, False, False, True]])
out_k, w_k = mha(q, q, q, key_padding_mask=kpm)
print("key_padding_mask: weights on padded keys", w_k[0, :, 3:].abs().max().item(),
      w_k[1, :, 4].abs().max().item(), fmt(out_k[0]))
out_kf, _ = mha(q, q, q, key_padding_mask=kpm.float().masked_fill(kpm, float("-inf")))
print("float key_padding_mask agrees:", torch.allclose(out_k, out_kf, atol=1e-6))
out_both, w_both = mha(q, q, q, attn_mask=float_mask, key_padding_mask=kpm)
print("both masks", fmt(w_both[0, 4]), fmt(out_both[1]))
_, per_head = mha(q, q, q, attn_mask=float_mask, average_attn_weights=False)
print("per-head weights", tuple(per_head.shape), "mean == averaged:",
      torch.allclose(per_head.mean(1), w_f, atol=1e-6))
out_nw, none_w = mha(q, q, q, need_weights=False)
print("need_weights=False ->", none_w, tuple(out_nw.shape))
head_mask = torch.zeros(2 * Hh, L, L)
head_mask[1::2, :, 0] = float("-inf")  # the second head of each batch ignores key 0
_, w3 = mha(q, q, q, attn_mask=head_mask, average_attn_weights=False)
print("3-d mask: head 1 key 0 weight", w3[:, 1, :, 0].abs().max().item(),
      "head 0 key 0 weight > 0:", bool((w3[:, 0, :, 0] > 0).all()))

# sequence-first layout, bias_kv / zero_attn, kdim / vdim
mha2 = nn.MultiheadAttention(E, Hh, add_bias_kv=True, add_zero_attn=True, kdim=6, vdim=4)
det_init(mha2)
qs = q.transpose(0, 1)  # (L, N, E)
k = torch.cos(torch.arange(7 * 2 * 6, dtype=torch.float32) * 0.2).view(7, 2, 6)
v = torch.sin(torch.arange(7 * 2 * 4, dtype=torch.float32) * 0.3).view(7, 2, 4)
o2, w2 = mha2(qs, k, v)
print("bias_kv + zero_attn: out", tuple(o2.shape), "weights", tuple(w2.shape), fmt(o2))
print("param names", sorted(n for n, _ in mha2.named_parameters()))

# scaled_dot_product_attention
qh = q.view(2, L, Hh, E // Hh).transpose(1, 2)
a_causal = F.scaled_dot_product_attention(qh, qh, qh, is_causal=True)
a_bool = F.scaled_dot_product_attention(qh, qh, qh, attn_mask=~bool_mask)
a_add = F.scaled_dot_product_attention(qh, qh, qh, attn_mask=float_mask)
print("sdpa causal == bool == additive:", torch.allclose(a_causal, a_bool, atol=1e-6),
      torch.allclose(a_causal, a_add, atol=1e-6), fmt(a_causal))
print("sdpa scale", fmt(F.scaled_dot_product_attention(qh, qh, qh, scale=0.1)))

# ---- a full nn.Transformer on copy-with-offset ----
V, D, BOS = 10, 16, 0
torch.manual_seed(0)
model = nn.Transformer(d_model=D, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                       dim_feedforward=32, dropout=0.0, activation="gelu", batch_first=True,
                       norm_first=True)
emb = nn.Embedding(V, D)
head = nn.Linear(D, V)
pos = nn.Parameter(torch.zeros(1, 8, D))
det_init(model, 0.15)
det_init(emb, 0.5)
det_init(head, 0.3)
with torch.no_grad():
    pos.copy_(0.3 * torch.sin(torch.arange(8 * D, dtype=torch.float32).view(1, 8, D) * 0.5))
params = list(model.parameters()) + list(emb.parameters()) + list(head.parameters()) + [pos]
opt = torch.optim.Adam(params, lr=3e-3)
src = torch.tensor([[(3 * i + 2 * j) % (V - 1) + 1 for j in range(6)] for i in range(16)])
lengths = torch.tensor([6, 5, 4, 6] * 4)
src_kpm = torch.arange(6)[None] >= lengths[:, None]
src = src.masked_fill(src_kpm, 0)
tgt_out = ((src + 1) % (V - 1) + 1).masked_fill(src_kpm, 0)
tgt_in = torch.cat([torch.full((16, 1), BOS), tgt_out[:, :-1]], dim=1)
tgt_mask = nn.Transformer.generate_square_subsequent_mask(6)


def run(src, tgt_in):
    s = emb(src) + pos[:, :src.shape[1]]
    t = emb(tgt_in) + pos[:, :tgt_in.shape[1]]
    h = model(s, t, tgt_mask=tgt_mask[:t.shape[1], :t.shape[1]], src_key_padding_mask=src_kpm,
              memory_key_padding_mask=src_kpm, tgt_is_causal=True)
    return head(h)


losses = []
for step in range(60):
    logits = run(src, tgt_in)
    loss = F.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=0)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(f"transformer loss {losses[0]:.4f} -> {losses[-1]:.4f}")
model.eval()
with torch.no_grad():
    dec = torch.full((16, 1), BOS)
    for _ in range(6):
        nxt = run(src, dec)[:, -1].argmax(-1, keepdim=True)
        dec = torch.cat([dec, nxt], dim=1)
pred = dec[:, 1:]
real = ~src_kpm
acc = ((pred == tgt_out) & real).sum().item() / real.sum().item()
print(f"greedy accuracy on real tokens {acc:.3f}")

# ---- an encoder in eval mode with a padding mask ----
enc_layer = nn.TransformerEncoderLayer(D, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
encoder = nn.TransformerEncoder(enc_layer, num_layers=2, enable_nested_tensor=False)
det_init(encoder, 0.15)
encoder.eval()
with torch.no_grad():
    x_in = emb(src) + pos[:, :6]
    enc = encoder(x_in, src_key_padding_mask=src_kpm)
    alone = encoder(x_in[1:2, :5])  # the second sequence without its padding
print("eval encoder", tuple(enc.shape), "padded batch == unpadded sequence:",
      torch.allclose(enc[1, :5], alone[0], atol=1e-5))
# the default enable_nested_tensor=True: in eval mode without gradients the padded positions
# come out as zeros (then through the final norm, when there is one)
fast = nn.TransformerEncoder(enc_layer, num_layers=2, norm=nn.LayerNorm(D))
fast.load_state_dict(encoder.state_dict(), strict=False)
with torch.no_grad():
    fast.norm.bias.fill_(0.25)
fast.eval()
with torch.no_grad():
    out_fast = fast(x_in, src_key_padding_mask=src_kpm)
    out_plain = fast.norm(enc)
print("nested fast path: real tokens agree", torch.allclose(out_fast[~src_kpm],
                                                            out_plain[~src_kpm], atol=1e-5),
      "padded rows", fmt(out_fast[1, 5]))
fast.train()
out_train = fast(x_in, src_key_padding_mask=src_kpm)
print("training mode keeps padded positions:", torch.allclose(out_train[1, 5],
                                                              out_plain[1, 5], atol=1e-5))
with torch.no_grad():
    torch.backends.mha.set_fastpath_enabled(False)
    fast.eval()
    print("fast path disabled:", torch.allclose(fast(x_in, src_key_padding_mask=src_kpm),
                                                out_plain, atol=1e-5))
    torch.backends.mha.set_fastpath_enabled(True)
import warnings  # noqa: E402

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 2, 32), 1)
print("warning for batch_first=False:", [str(w.message) for w in caught])
# torch.masked for pooling and attention over real tokens only
real = (~src_kpm).unsqueeze(-1).expand_as(enc)
pooled = torch.masked.mean(enc, 1, mask=real)
manual = (enc * real).sum(1) / real.sum(1)
print("masked mean pooling == manual:", torch.allclose(pooled, manual, atol=1e-6),
      tuple(pooled.shape))
scores = torch.einsum("bd,bld->bl", pooled, enc)
attn = torch.masked.softmax(scores, 1, mask=~src_kpm)
print("masked softmax: padded weight", attn[1, 5].item(), "rows sum to 1:",
      torch.allclose(attn.sum(1), torch.ones(16)), "max over real tokens",
      fmt(torch.masked.amax(scores, 1, mask=~src_kpm)[:2]))
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {acc:.4f}")
