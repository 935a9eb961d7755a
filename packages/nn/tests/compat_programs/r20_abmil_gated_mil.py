"""Attention-based deep multiple-instance learning (Ilse et al.'s gated ABMIL, in the style of the
public AMLab-Amsterdam/AttentionDeepMIL and CLAM code): bags of a variable number of instances
padded by torch.nn.utils.rnn.pad_sequence with a length mask, an instance encoder, gated
attention (tanh(V h) * sigmoid(U h)) scored per instance, masked_fill(-inf) + softmax over each
bag, the attention-weighted bag embedding by torch.bmm, a bag classifier trained with
BCEWithLogitsLoss and Adam with weight decay on a ReduceLROnPlateau schedule, an instance-level
auxiliary loss on the top-k attended instances (CLAM style, torch.topk + gather), and evaluation:
bag AUC by the rank-sum formula with average ranks for ties, attention concentrated on the
positive instances, padded bags equal to unpadded single-bag runs, and permutation invariance.
Data from NumPy (a bag is positive when it holds a "key" instance). Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <bag AUC>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

torch.manual_seed(0)
rng = np.random.default_rng(23)
D, H, A = 6, 16, 8
key = rng.normal(size=D)
key /= np.linalg.norm(key)


def make_bag(positive):
    n = int(rng.integers(3, 10))
    x = rng.normal(size=(n, D))
    x -= np.outer(x @ key, key)  # negatives carry no key component
    inst = np.zeros(n)
    if positive:
        k = int(rng.integers(1, 3))
        pos = rng.choice(n, k, replace=False)
        x[pos] += 2.5 * key
        inst[pos] = 1
    return torch.from_numpy(x).float(), torch.from_numpy(inst).float()


bags = [make_bag(i % 2 == 0) for i in range(96)]
labels = torch.tensor([1.0 if i % 2 == 0 else 0.0 for i in range(96)])


class GatedABMIL(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Dropout(0.0))
        self.att_v = nn.Linear(H, A)
        self.att_u = nn.Linear(H, A)
        self.att_w = nn.Linear(A, 1)
        self.classifier = nn.Linear(H, 1)
        self.inst_classifier = nn.Linear(H, 2)

    def forward(self, x, mask):
        h = self.encoder(x)  # (B, N, H)
        a = self.att_w(torch.tanh(self.att_v(h)) * torch.sigmoid(self.att_u(h))).squeeze(-1)
        a = a.masked_fill(~mask, float("-inf"))
        w = torch.softmax(a, dim=1)
        z = torch.bmm(w.unsqueeze(1), h).squeeze(1)
        return self.classifier(z).squeeze(-1), w, h


def batchify(items):
    xs = [b[0] for b in items]
    lengths = torch.tensor([len(x) for x in xs])
    x = pad_sequence(xs, batch_first=True)
    mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    return x, mask


model = GatedABMIL()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, size=tuple(p.shape))).float() if p.dim() > 1 else torch.zeros_like(p))
opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2)
bce = nn.BCEWithLogitsLoss()
train_idx, test_idx = list(range(64)), list(range(64, 96))
losses = []
for epoch in range(12):
    order = rng.permutation(train_idx)
    tot = 0.0
    for i in range(0, 64, 16):
        idx = order[i:i + 16].tolist()
        x, mask = batchify([bags[j] for j in idx])
        logit, w, h = model(x, mask)
        loss = bce(logit, labels[idx])
        # CLAM-style instance loss: top-2 attended instances of positive bags are pseudo-positive
        top = w.topk(2, dim=1).indices
        h_top = torch.gather(h, 1, top.unsqueeze(-1).expand(-1, -1, H))
        pseudo = labels[idx].long().unsqueeze(1).expand(-1, 2)
        inst_loss = F.cross_entropy(model.inst_classifier(h_top).reshape(-1, 2), pseudo.reshape(-1))
        loss_total = loss + 0.3 * inst_loss
        opt.zero_grad()
        loss_total.backward()
        opt.step()
        tot += loss.item()
    losses.append(tot / 4)
    sched.step(losses[-1])
    if epoch % 3 == 0:
        print(f"epoch {epoch} bag loss {losses[-1]:.5f} inst loss {inst_loss.item():.5f} lr {opt.param_groups[0]['lr']:.5f}")


def auc(scores, y):
    # rank-sum with average ranks for ties
    order = scores.argsort()
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    uniq, inv = torch.unique(scores, return_inverse=True)
    avg = torch.zeros_like(uniq).index_add_(0, inv, ranks) / torch.bincount(inv).to(scores.dtype)
    ranks = avg[inv]
    n_pos = y.sum()
    n_neg = len(y) - n_pos
    return ((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


model.eval()
with torch.no_grad():
    x, mask = batchify([bags[j] for j in test_idx])
    logit, w, _ = model(x, mask)
    test_auc = auc(logit, labels[test_idx])
    acc = ((logit > 0).float() == labels[test_idx]).float().mean().item()
    inst = pad_sequence([bags[j][1] for j in test_idx], batch_first=True)
    pos_bags = labels[test_idx] == 1
    att_on_pos = (w * inst)[pos_bags].sum(1).mean().item()
    print(f"test AUC {test_auc:.4f} acc {acc:.4f} attention mass on key instances {att_on_pos:.4f}")
    print("padded weights zero", bool((w[~mask] == 0).all()), "rows sum to 1", torch.allclose(w.sum(1), torch.ones(len(test_idx))))
    single = torch.stack([model(bags[j][0].unsqueeze(0), torch.ones(1, len(bags[j][0]), dtype=torch.bool))[0][0] for j in test_idx])
    print("padded batch == one bag at a time", torch.allclose(single, logit, atol=1e-6))
    xb, ib = bags[test_idx[0]]
    perm = torch.from_numpy(rng.permutation(len(xb)))
    a0 = model(xb[None], torch.ones(1, len(xb), dtype=torch.bool))[0]
    a1 = model(xb[perm][None], torch.ones(1, len(xb), dtype=torch.bool))[0]
    print("permutation invariant", torch.allclose(a0, a1, atol=1e-6), "lengths", [len(bags[j][0]) for j in test_idx[:6]])
    tied = torch.tensor([0.1, 0.4, 0.4, 0.8, 0.4, 0.2])
    print(f"auc with ties {auc(tied, torch.tensor([0.0, 1.0, 0.0, 1.0, 1.0, 0.0])):.6f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {test_auc:.6f}")
