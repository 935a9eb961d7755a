"""Language-model training with a fused classifier-head loss, as recent LM scripts write it with
torch 2.13's F.linear_cross_entropy: a small decoder (causal nn.TransformerEncoder over token +
learned position embeddings) on a synthetic grammar with right padding, the main next-token loss
computed from the final hidden states and the *tied* embedding matrix by
F.linear_cross_entropy(hidden, tok.weight, targets, ignore_index=PAD,
options=nn.LinearCrossEntropyOptions(batch_chunk_size=64)) so the (tokens x vocab) logits are
never kept (checked against cross_entropy over explicit logits, values and gradients), a
multi-token-prediction auxiliary head nn.LinearCrossEntropyLoss(d, V, out_features=(2,),
bias=True, label_smoothing=0.1) predicting tokens t+1 and t+2 with (N, 2) targets (checked
against its flat Linear viewed as (V, 2, d)), a token-weighted perplexity, AdamW with
decoupled weight decay on matrices only, and greedy continuation. Data and weights from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <validation perplexity>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(152)
V, PAD, T, D = 24, 0, 16, 32
trans = rng.dirichlet(np.full(V - 1, 0.2), size=V)


def sentences(n):
    out = np.full((n, T + 1), PAD, np.int64)
    for i in range(n):
        L = int(rng.integers(8, T + 2))
        tok = int(rng.integers(1, V))
        for t in range(L):
            out[i, t] = tok
            tok = 1 + int(rng.choice(V - 1, p=trans[tok]))
    return torch.from_numpy(out)


train_data, val_data = sentences(256), sentences(64)


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Parameter(torch.zeros(T, D))
        layer = nn.TransformerEncoderLayer(D, 4, 2 * D, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(D)
        self.mtp = nn.LinearCrossEntropyLoss(D, V, out_features=(2,), bias=True, label_smoothing=0.1)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(T), persistent=False)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() > 1:
                    p.copy_(torch.from_numpy(rng.normal(0, 0.02 if name == "pos" else 1 / math.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
                elif name.endswith("bias"):
                    p.zero_()

    def forward(self, ids):
        h = self.tok(ids) + self.pos[:ids.shape[1]]
        n = ids.shape[1]
        return self.norm(self.blocks(h, mask=self.mask[:n, :n], is_causal=True))


model = LM()
opts = nn.LinearCrossEntropyOptions(batch_chunk_size=64)

# the fused loss against explicit logits, values and gradients
ids = train_data[:4]
h = model(ids[:, :-1]).reshape(-1, D)
tgt = ids[:, 1:].reshape(-1)
fused = F.linear_cross_entropy(h, model.tok.weight, tgt, ignore_index=PAD, options=opts)
g1 = torch.autograd.grad(fused, model.tok.weight, retain_graph=True)[0]
explicit = F.cross_entropy(h @ model.tok.weight.T, tgt, ignore_index=PAD)
g2 = torch.autograd.grad(explicit, model.tok.weight)[0]
print(f"fused == explicit: {abs(fused.item() - explicit.item()) < 1e-5} grads {torch.allclose(g1, g2, atol=1e-5)} "
      f"loss {fused.item():.5f} ln V {math.log(V):.5f}")
w = model.mtp.linear.weight.view(V, 2, D)
mtp_t = torch.stack([ids[:, 1:T - 1], ids[:, 2:T]], -1).reshape(-1, 2)
hh = model(ids[:, :T - 2]).reshape(-1, D)
ref = F.cross_entropy(torch.einsum("nd,vkd->nvk", hh, w) + model.mtp.linear.bias.view(V, 2), mtp_t, label_smoothing=0.1)
print(f"multi-token head: linear {tuple(model.mtp.linear.weight.shape)} matches reference: {torch.allclose(model.mtp(hh, mtp_t), ref, atol=1e-5)}")

decay = [p for n, p in model.named_parameters() if p.dim() > 1 and n != "pos"]
rest = [p for n, p in model.named_parameters() if not (p.dim() > 1 and n != "pos")]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=3e-3, betas=(0.9, 0.95))
losses = []
for step in range(80):
    ids = train_data[torch.from_numpy(rng.choice(256, 32, replace=False))]
    h = model(ids[:, :-1])
    main = F.linear_cross_entropy(h.reshape(-1, D), model.tok.weight, ids[:, 1:].reshape(-1), ignore_index=PAD, options=opts)
    mtp_t = torch.stack([ids[:, 1:T], ids[:, 2:T + 1]], -1).reshape(-1, 2)
    keep = (mtp_t != PAD).all(1)
    aux = model.mtp(h[:, :T - 1].reshape(-1, D)[keep], mtp_t[keep])
    loss = main + 0.3 * aux
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(main.item())
    if step % 20 == 0:
        print(f"step {step:2d} main {main.item():.5f} mtp {aux.item():.5f}")

with torch.no_grad():
    h = model(val_data[:, :-1]).reshape(-1, D)
    tgt = val_data[:, 1:].reshape(-1)
    nll = F.linear_cross_entropy(h, model.tok.weight, tgt, ignore_index=PAD, reduction="sum")
    ppl = math.exp(nll.item() / (tgt != PAD).sum().item())
    seq = val_data[:1, :4]
    for _ in range(6):
        nxt = (model(seq)[:, -1] @ model.tok.weight.T).argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], 1)
print(f"validation perplexity {ppl:.4f} continuation {seq[0].tolist()}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {ppl:.4f}")
