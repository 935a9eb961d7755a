"""A message-passing neural network for molecular property regression (Gilmer et al., in the
style of the public PyTorch Geometric NNConv + Set2Set QM9 example, written in plain PyTorch):
random "molecules" as edge lists with bond features (NumPy), graphs batched by offsetting node
ids and a batch vector, an edge-conditioned convolution whose per-edge weight matrices come from
an edge network (bmm of (E, 1, d) by (E, d, d)), mean aggregation by index_add_ over
destination nodes divided by in-degrees (torch.bincount), a GRU cell as the update, Set2Set
readout (an LSTM over processing steps with a softmax per graph computed by scatter_reduce
"amax" and index_add_ sums) next to a sum pool, target standardisation, L1 loss with Adam and
ReduceLROnPlateau, then checks: node-permutation invariance of the prediction, batching
independence (one graph alone vs in a batch), and a per-graph softmax that sums to one.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <test MAE in target units>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(33)
NODE_F, EDGE_F, Hd = 4, 3, 16


def random_molecule():
    n = int(rng.integers(4, 9))
    atoms = rng.integers(0, NODE_F, size=n)
    edges = [(i, int(rng.integers(0, i))) for i in range(1, n)]  # a tree
    for _ in range(int(rng.integers(0, 3))):
        a, b = rng.choice(n, 2, replace=False)
        if (a, b) not in edges and (b, a) not in edges:
            edges.append((int(a), int(b)))
    bonds = rng.integers(0, EDGE_F, size=len(edges))
    # the "property": a sum of atom and bond contributions plus a ring bonus
    y = np.array([0.5, -0.2, 1.0, 0.3])[atoms].sum() + np.array([0.1, 0.4, -0.3])[bonds].sum() + 0.7 * (len(edges) - n + 1)
    src = [a for a, b in edges] + [b for a, b in edges]
    dst = [b for a, b in edges] + [a for a, b in edges]
    x = np.eye(NODE_F)[atoms]
    e = np.eye(EDGE_F)[np.concatenate([bonds, bonds])]
    return x, np.array([src, dst]), e, y


mols = [random_molecule() for _ in range(160)]


def collate(items):
    xs, eis, es, ys, batch = [], [], [], [], []
    offset = 0
    for g, (x, ei, e, y) in enumerate(items):
        xs.append(x)
        eis.append(ei + offset)
        es.append(e)
        ys.append(y)
        batch.append(np.full(len(x), g))
        offset += len(x)
    return (torch.from_numpy(np.concatenate(xs)).float(), torch.from_numpy(np.concatenate(eis, 1)).long(),
            torch.from_numpy(np.concatenate(es)).float(), torch.tensor(ys).float(), torch.from_numpy(np.concatenate(batch)).long())


class NNConv(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.edge_net = nn.Sequential(nn.Linear(EDGE_F, 32), nn.ReLU(), nn.Linear(32, dim * dim))
        self.root = nn.Linear(dim, dim)
        self.dim = dim

    def forward(self, h, edge_index, e):
        src, dst = edge_index
        W = self.edge_net(e).view(-1, self.dim, self.dim)
        msg = torch.bmm(h[src].unsqueeze(1), W).squeeze(1)
        agg = torch.zeros_like(h).index_add_(0, dst, msg)
        deg = torch.bincount(dst, minlength=h.shape[0]).clamp(min=1).unsqueeze(1).to(h.dtype)
        return agg / deg + self.root(h)


def segment_softmax(scores, batch, n_graphs):
    mx = torch.full((n_graphs,), -float("inf")).scatter_reduce(0, batch, scores, reduce="amax", include_self=True)
    ex = torch.exp(scores - mx[batch])
    den = torch.zeros(n_graphs).index_add_(0, batch, ex)
    return ex / den[batch]


class Set2Set(nn.Module):
    def __init__(self, dim, steps):
        super().__init__()
        self.lstm = nn.LSTM(2 * dim, dim, batch_first=True)
        self.steps, self.dim = steps, dim

    def forward(self, h, batch, n_graphs):
        q_star = torch.zeros(n_graphs, 2 * self.dim)
        state = (torch.zeros(1, n_graphs, self.dim), torch.zeros(1, n_graphs, self.dim))
        for _ in range(self.steps):
            q, state = self.lstm(q_star.unsqueeze(1), state)
            q = q.squeeze(1)
            a = segment_softmax((h * q[batch]).sum(-1), batch, n_graphs)
            r = torch.zeros(n_graphs, self.dim).index_add_(0, batch, a.unsqueeze(-1) * h)
            q_star = torch.cat([q, r], -1)
        self.last_attention = a
        return q_star


class MPNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(NODE_F, Hd)
        self.conv = NNConv(Hd)
        self.gru = nn.GRUCell(Hd, Hd)
        self.readout = Set2Set(Hd, 3)
        self.head = nn.Sequential(nn.Linear(3 * Hd, Hd), nn.ReLU(), nn.Linear(Hd, 1))

    def forward(self, x, edge_index, e, batch, n_graphs):
        h = F.relu(self.embed(x))
        for _ in range(3):
            m = F.relu(self.conv(h, edge_index, e))
            h = self.gru(m, h)
        pooled = torch.zeros(n_graphs, Hd).index_add_(0, batch, h)  # the property is extensive
        return self.head(torch.cat([self.readout(h, batch, n_graphs), pooled], -1)).squeeze(-1)


model = MPNN()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.2 if p.dim() > 1 else 0.02, size=tuple(p.shape))).float())
ys = torch.tensor([m[3] for m in mols[:128]]).float()
mu, sd = ys.mean(), ys.std()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.7, patience=2, min_lr=1e-4)
losses = []
for epoch in range(20):
    order = rng.permutation(128)
    tot = 0.0
    for i in range(0, 128, 32):
        x, ei, e, y, batch = collate([mols[j] for j in order[i:i + 32]])
        pred = model(x, ei, e, batch, 32)
        loss = F.l1_loss(pred, (y - mu) / sd)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot += loss.item() / 4
    sched.step(tot)
    losses.append(tot)
    if epoch % 5 == 0:
        print(f"epoch {epoch} l1 {tot:.5f} lr {opt.param_groups[0]['lr']:.5f}")

model.eval()
with torch.no_grad():
    x, ei, e, y, batch = collate(mols[128:])
    pred = model(x, ei, e, batch, 32) * sd + mu
    mae = (pred - y).abs().mean().item()
    print(f"test MAE {mae:.4f} target std {sd.item():.4f} mean-predictor MAE {(y - mu).abs().mean().item():.4f}")
    a = model.readout.last_attention
    print("per-graph softmax sums to 1", torch.allclose(torch.zeros(32).index_add_(0, batch, a), torch.ones(32), atol=1e-5))
    x0, ei0, e0, y0, b0 = collate(mols[128:129])
    alone = model(x0, ei0, e0, b0, 1)
    print("alone == in batch", torch.allclose(alone * sd + mu, pred[:1], atol=1e-5))
    perm = torch.from_numpy(rng.permutation(len(x0)))
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(len(perm))
    permuted = model(x0[perm], inv[ei0], e0, b0, 1)
    print("permutation invariant", torch.allclose(alone, permuted, atol=1e-5), "nodes", len(x0), "edges", ei0.shape[1])
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {mae:.6f}")
