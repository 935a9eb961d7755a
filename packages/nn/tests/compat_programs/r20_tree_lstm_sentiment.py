"""A child-sum Tree-LSTM (Tai et al., in the style of the public dasguptar/treelstm.pytorch code)
for sentence sentiment over parse trees, batched level by level: random binary trees over a toy
vocabulary whose label is the sign of a weighted sum with negation words flipping a subtree
(NumPy), nodes ordered by height with torch.argsort(stable=True), each level's children states
summed per parent by index_add_, the forget gate computed per child (h_k through U_f, gathered
back to its parent), leaves with zero child states, a root classifier plus per-node auxiliary
labels, NLLLoss on log_softmax, Adagrad with weight decay as in the paper, gradient clipping by
clip_grad_norm_(error_if_nonfinite=True); the batched evaluation checked against a recursive
per-node evaluation, and root / all-node accuracies. Written against `torch`; the test suite runs
it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <root accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(34)
V, E, H = 14, 12, 16
NEG = 1
word_score = rng.normal(size=V)
word_score[NEG] = 0.0


def random_tree(n_leaves):
    """Nodes as (word or -1, children); returns lists of words, children, node sentiment."""
    words, children, score = [], [], []
    stack = []
    for _ in range(n_leaves):
        w = int(rng.integers(0, V))
        words.append(w)
        children.append([])
        score.append(word_score[w])
        stack.append(len(words) - 1)
    while len(stack) > 1:
        i = int(rng.integers(0, len(stack) - 1))
        a, b = stack[i], stack[i + 1]
        s = score[a] + score[b]
        if words[a] == NEG and not children[a]:
            s = -score[b]
        words.append(-1)
        children.append([a, b])
        score.append(s)
        stack[i:i + 2] = [len(words) - 1]
    return words, children, [1 if s > 0 else 0 for s in score]


trees = [random_tree(int(rng.integers(3, 8))) for _ in range(120)]


class ChildSumTreeLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, E)
        self.ioux = nn.Linear(E, 3 * H)
        self.iouh = nn.Linear(H, 3 * H)
        self.fx = nn.Linear(E, H)
        self.fh = nn.Linear(H, H)
        self.out = nn.Linear(H, 2)

    def forward(self, words, parent, height):
        n = len(words)
        x = self.emb(words.clamp(min=0)) * (words >= 0).unsqueeze(-1).float()
        h = torch.zeros(n, H)
        c = torch.zeros(n, H)
        order = torch.argsort(height, stable=True)
        for lvl in range(int(height.max()) + 1):
            nodes = order[height[order] == lvl]
            child_mask = (parent >= 0) & torch.isin(parent, nodes)
            child_idx = child_mask.nonzero().flatten()
            h_sum = torch.zeros(n, H).index_add(0, parent[child_idx], h[child_idx])
            iou = self.ioux(x[nodes]) + self.iouh(h_sum[nodes])
            i, o, u = torch.split(iou, H, dim=1)
            i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)
            f = torch.sigmoid(self.fh(h[child_idx]) + self.fx(x[parent[child_idx]]))
            fc = torch.zeros(n, H).index_add(0, parent[child_idx], f * c[child_idx])
            c_new = i * u + fc[nodes]
            h_new = o * torch.tanh(c_new)
            c = c.index_copy(0, nodes, c_new)
            h = h.index_copy(0, nodes, h_new)
        return F.log_softmax(self.out(h), -1), h

    def recursive(self, words, children, node):
        w = words[node]
        x = self.emb(torch.tensor([max(w, 0)])) * float(w >= 0)
        states = [self.recursive(words, children, k) for k in children[node]]
        h_sum = sum((s[0] for s in states), torch.zeros(1, H))
        i, o, u = torch.split(self.ioux(x) + self.iouh(h_sum), H, dim=1)
        fc = sum((torch.sigmoid(self.fh(hk) + self.fx(x)) * ck for hk, ck in states), torch.zeros(1, H))
        c = torch.sigmoid(i) * torch.tanh(u) + fc
        return torch.sigmoid(o) * torch.tanh(c), c


def flatten(batch):
    words, parent, height, labels, roots = [], [], [], [], []
    for wds, ch, lab in batch:
        off = len(words)
        par = [-1] * len(wds)
        hgt = [0] * len(wds)
        for p, kids in enumerate(ch):
            for k in kids:
                par[k] = p + off
        for p, kids in enumerate(ch):  # children come before parents
            if kids:
                hgt[p] = 1 + max(hgt[k] for k in kids)
        words += wds
        parent += par
        height += hgt
        labels += lab
        roots.append(off + len(wds) - 1)
    return torch.tensor(words), torch.tensor(parent), torch.tensor(height), torch.tensor(labels), torch.tensor(roots)


model = ChildSumTreeLSTM()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.2, size=tuple(p.shape))).float())
opt = torch.optim.Adagrad(model.parameters(), lr=0.05, weight_decay=1e-4)
crit = nn.NLLLoss()
losses = []
for epoch in range(10):
    order = rng.permutation(96)
    tot = 0.0
    for i in range(0, 96, 24):
        words, parent, height, labels, roots = flatten([trees[j] for j in order[i:i + 24]])
        logp, _ = model(words, parent, height)
        loss = crit(logp[roots], labels[roots]) + 0.5 * crit(logp, labels)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0, error_if_nonfinite=True)
        opt.step()
        tot += loss.item() / 4
    losses.append(tot)
    if epoch % 3 == 0:
        print(f"epoch {epoch} loss {tot:.5f}")

with torch.no_grad():
    words, parent, height, labels, roots = flatten(trees[96:])
    logp, h = model(words, parent, height)
    pred = logp.argmax(1)
    root_acc = (pred[roots] == labels[roots]).float().mean().item()
    node_acc = (pred == labels).float().mean().item()
    print(f"test root accuracy {root_acc:.4f} all-node accuracy {node_acc:.4f} nodes {len(words)} max height {int(height.max())}")
    wds, ch, _ = trees[96]
    h_rec, _ = model.recursive(wds, ch, len(wds) - 1)
    print("batched == recursive", torch.allclose(h_rec[0], h[roots[0]], atol=1e-6))
    neg_trees = [t for t in trees[96:] if NEG in t[0]]
    print("trees with a negation", len(neg_trees), "stable order of equal heights", torch.argsort(torch.tensor([1, 0, 1, 0, 0]), stable=True).tolist())
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {root_acc:.6f}")
