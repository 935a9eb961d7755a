"""Self-attentive sequential recommendation (SASRec) in the style of the public pmixer/SASRec.pytorch
code: item histories left-padded with 0 (nn.Embedding(padding_idx=0)), learned positions, a
causal nn.TransformerEncoder (batch_first, norm_first, generate_square_subsequent_mask plus a
key padding mask, timeline masking of padded positions; in eval mode PyTorch's fused encoder
layer gives NaN rows for queries that may attend to nothing, which nan_to_num clears), one positive and one sampled negative
per position with BCEWithLogitsLoss on the non-pad entries (torch.where / masked loss), Adam with
betas (0.9, 0.98), then evaluation by scoring the held-out next item against 20 sampled
negatives: HR@5 and NDCG@5 from the rank (negatives scoring higher), and the full-catalogue top-k with
already-seen items masked by scatter_. Interaction data from NumPy (each user walks a cycle of
items). Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <HR@5>."""

import math

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
rng = np.random.default_rng(22)
N_ITEMS, L, USERS, H = 30, 8, 64, 16

# each user walks a cycle through a personal stride: the next item follows from the last two
seqs = []
for u in range(USERS):
    start, stride = rng.integers(1, N_ITEMS + 1), rng.choice([1, 2, 3])
    n = rng.integers(5, L + 2)
    seqs.append([(start - 1 + stride * t) % N_ITEMS + 1 for t in range(n)])


def left_pad(s, n):
    s = s[-n:]
    return [0] * (n - len(s)) + s


train_in = torch.tensor([left_pad(s[:-2], L) for s in seqs])
train_pos = torch.tensor([left_pad(s[1:-1], L) for s in seqs])
test_in = torch.tensor([left_pad(s[:-1], L) for s in seqs])
test_target = torch.tensor([s[-1] for s in seqs])


class SASRec(nn.Module):
    def __init__(self):
        super().__init__()
        self.item_emb = nn.Embedding(N_ITEMS + 1, H, padding_idx=0)
        self.pos_emb = nn.Embedding(L, H)
        layer = nn.TransformerEncoderLayer(H, 2, dim_feedforward=32, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.last_norm = nn.LayerNorm(H)

    def feats(self, seq):
        x = self.item_emb(seq) * math.sqrt(H) + self.pos_emb(torch.arange(seq.shape[1]))
        pad = seq == 0
        x = x * (~pad).unsqueeze(-1)
        causal = nn.Transformer.generate_square_subsequent_mask(seq.shape[1])
        h = self.encoder(x, mask=causal, src_key_padding_mask=pad, is_causal=True)
        self.nan_rows = int(torch.isnan(h).any(-1).sum())
        h = torch.nan_to_num(h, nan=0.0)  # fully padded rows: softmax over nothing
        return self.last_norm(h)

    def forward(self, seq, pos, neg):
        h = self.feats(seq)
        return (h * self.item_emb(pos)).sum(-1), (h * self.item_emb(neg)).sum(-1)


model = SASRec()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 0.1, size=tuple(p.shape)).astype(np.float32)))
        elif name.endswith("bias"):
            p.zero_()
    model.item_emb.weight[0].zero_()
opt = torch.optim.Adam(model.parameters(), lr=0.005, betas=(0.9, 0.98))
bce = nn.BCEWithLogitsLoss(reduction="none")
losses = []
for epoch in range(40):
    model.train()
    neg = torch.from_numpy(rng.integers(1, N_ITEMS + 1, size=tuple(train_pos.shape)))
    pos_logit, neg_logit = model(train_in, train_pos, neg)
    valid = train_pos != 0
    loss_el = bce(pos_logit, torch.ones_like(pos_logit)) + bce(neg_logit, torch.zeros_like(neg_logit))
    loss = torch.where(valid, loss_el, torch.zeros_like(loss_el)).sum() / valid.sum()
    loss = loss + 1e-4 * model.item_emb.weight.norm() ** 2
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if epoch % 10 == 0:
        print(f"epoch {epoch} loss {loss.item():.5f} valid {int(valid.sum())} nan rows {model.nan_rows}")
print("padding row grad-free", model.item_emb.weight[0].abs().sum().item() == 0.0)

model.eval()
with torch.no_grad():
    h = model.feats(test_in)[:, -1]
    print("eval nan rows", model.nan_rows, "of", test_in.numel(), "users with padding", int((test_in == 0).any(1).sum()))
    negs = torch.from_numpy(rng.integers(1, N_ITEMS + 1, size=(USERS, 20)))
    cands = torch.cat([test_target[:, None], negs], dim=1)
    scores = (h[:, None, :] * model.item_emb(cands)).sum(-1)
    rank = (scores[:, 1:] > scores[:, :1]).sum(1)  # ties count in the target's favour
    hr5 = (rank < 5).float().mean().item()
    ndcg5 = torch.where(rank < 5, 1.0 / torch.log2(rank.float() + 2), torch.zeros(USERS)).mean().item()
    full = h @ model.item_emb.weight.T
    full[:, 0] = -float("inf")
    seen = torch.zeros_like(full, dtype=torch.bool).scatter_(1, test_in, True)
    seen[:, 0] = True
    full_unseen = full.masked_fill(seen, -float("inf"))
    top = full.topk(5, dim=1).indices
    hit_full = (top == test_target[:, None]).any(1).float().mean().item()
    print(f"HR@5 {hr5:.4f} NDCG@5 {ndcg5:.4f} full-catalogue HR@5 {hit_full:.4f}")
    print("top-5 unseen for user 0", full_unseen[0].topk(5).indices.tolist(), "seen", sorted(set(test_in[0].tolist()) - {0}))
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {hr5:.6f}")
