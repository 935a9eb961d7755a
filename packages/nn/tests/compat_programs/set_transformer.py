"""A Set Transformer on variable-size sets, in the style of the public Set Transformer (Lee et
al., 2019) and Deep Sets re-implementations: sets of different sizes padded into one batch
with a boolean key_padding_mask, multihead attention blocks (MAB) over nn.MultiheadAttention
(batch_first, kdim / vdim equal, need_weights with average_attn_weights=False), induced set
attention blocks (ISAB) with learned inducing points expanded over the batch, pooling by
multihead attention (PMA) with seed vectors, a Deep Sets baseline with masked sum / mean / max
pooling (masked_fill -inf then amax), F.scaled_dot_product_attention with a boolean attn_mask
and an explicit scale checked against the module, permutation invariance checked by
shuffling within each set (torch.gather with per-row permutations), and the task: predict
the number of distinct clusters and the set's max norm. Data and weights from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <invariance error>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(31)
B, NMAX, D, H = 48, 12, 2, 32
sizes = rng.integers(4, NMAX + 1, B)
X = np.zeros((B, NMAX, D), np.float32)
target = np.zeros((B, 2), np.float32)
for b, n in enumerate(sizes):
    k = rng.integers(1, 4)
    centers = rng.normal(0, 3, (k, D))
    pts = centers[rng.integers(0, k, n)] + 0.3 * rng.normal(size=(n, D))
    X[b, :n] = pts
    target[b] = [k, np.linalg.norm(pts, axis=1).max()]
X, Y = torch.from_numpy(X), torch.from_numpy(target)
pad = torch.arange(NMAX)[None] >= torch.from_numpy(sizes)[:, None]  # True = padding
print(f"sets {B} sizes {int(sizes.min())}..{int(sizes.max())} padded fraction {pad.float().mean().item():.4f}")


class MAB(nn.Module):
    def __init__(self, d, heads=4):
        super().__init__()
        self.att = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, q, k, mask=None):
        h, w = self.att(q, k, k, key_padding_mask=mask, need_weights=True, average_attn_weights=False)
        self.last_weights = w
        h = self.n1(q + h)
        return self.n2(h + self.ff(h))


class ISAB(nn.Module):
    def __init__(self, d, m=6):
        super().__init__()
        self.ind = nn.Parameter(torch.zeros(1, m, d))
        self.mab1, self.mab2 = MAB(d), MAB(d)

    def forward(self, x, mask):
        h = self.mab1(self.ind.expand(x.shape[0], -1, -1), x, mask)
        return self.mab2(x, h)


class SetTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(D, H)
        self.enc = nn.ModuleList([ISAB(H), ISAB(H)])
        self.seed = nn.Parameter(torch.zeros(1, 1, H))
        self.pma = MAB(H)
        self.out = nn.Linear(H, 2)

    def forward(self, x, mask):
        h = self.emb(x)
        for blk in self.enc:
            h = blk(h, mask)
        return self.out(self.pma(self.seed.expand(x.shape[0], -1, -1), h, mask).squeeze(1))


class DeepSets(nn.Module):
    def __init__(self):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, H))
        self.rho = nn.Sequential(nn.Linear(3 * H, H), nn.ReLU(), nn.Linear(H, 2))

    def forward(self, x, mask):
        h = self.phi(x).masked_fill(mask[..., None], 0.0)
        n = (~mask).sum(1, keepdim=True)
        mx = self.phi(x).masked_fill(mask[..., None], float("-inf")).amax(1)
        return self.rho(torch.cat([h.sum(1) / NMAX, h.sum(1) / n, mx], -1))


def init(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1 or "ind" in name or "seed" in name:
                p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
            elif name.endswith("bias") and not name.startswith(("n1", "n2")) and ".n" not in name:
                p.copy_(torch.from_numpy(rng.normal(0, 0.1, p.shape).astype(np.float32)))
    return model


def shuffled(x, mask):
    perms = torch.from_numpy(np.stack([np.concatenate([rng.permutation(n), np.arange(n, NMAX)]) for n in sizes]))
    return torch.gather(x, 1, perms[..., None].expand(-1, -1, D)), torch.gather(mask, 1, perms)


results = {}
for name, model in [("set transformer", init(SetTransformer())), ("deep sets", init(DeepSets()))]:
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    for step in range(60):
        loss = F.smooth_l1_loss(model(X, pad), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        Xs, ms = shuffled(X, pad)
        inv = (model(X, pad) - model(Xs, ms)).abs().max().item()
        acc = (model(X, pad)[:, 0].round() == Y[:, 0]).float().mean().item()
    results[name] = (losses, inv)
    print(f"{name:15s} loss {losses[0]:.4f} -> {losses[-1]:.4f} invariance {inv < 1e-4} count acc {acc:.4f}")

w = model_w = None
st = init(SetTransformer())
st(X, pad)
w = st.enc[0].mab1.last_weights
print(f"per-head weights {tuple(w.shape)} padded keys weight {w.masked_select(pad[:, None, None, :].expand_as(w)).abs().max().item():.1f} "
      f"rows sum to 1: {torch.allclose(w.sum(-1), torch.ones(()), atol=1e-5)}")
q, k, v = (torch.from_numpy(rng.normal(size=(2, 4, 5, 8)).astype(np.float32)) for _ in range(3))
allowed = torch.from_numpy(rng.random((5, 5)) < 0.7) | torch.eye(5, dtype=torch.bool)
o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=0.5)
ref = torch.softmax((q @ k.transpose(-1, -2) * 0.5).masked_fill(~allowed, float("-inf")), -1) @ v
print(f"sdpa bool mask + scale matches: {torch.allclose(o, ref, atol=1e-5)}")
print(f"RESULT {results['set transformer'][0][0]:.4f} {results['set transformer'][0][-1]:.4f} {results['set transformer'][1]:.2e}")
