"""Differentiable architecture search (DARTS, Liu et al.) in the style of the public reference
code, on 1-D signals: a MixedOp over candidate operations (none / identity / max and average
pooling / separable and dilated convolutions) weighted by a softmax over architecture
parameters, a cell of mixed edges whose intermediate nodes sum their inputs, the architecture
parameters kept apart from the weights (arch_parameters() vs parameters() filtered by id),
first-order alternating updates (Adam on alphas with weight decay over a validation split, SGD
with momentum and CosineAnnealingLR on the weights, clip_grad_norm_), and the discrete genotype
derived by the strongest non-zero operation per edge with the top-2 incoming edges per node.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <validation accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(145)
C, LEN = 8, 32


class Zero(nn.Module):
    def forward(self, x):
        return x.mul(0.0)


class SepConv(nn.Module):
    def __init__(self, c, k, dilation=1):
        super().__init__()
        pad = dilation * (k - 1) // 2
        self.op = nn.Sequential(nn.ReLU(inplace=False), nn.Conv1d(c, c, k, padding=pad, dilation=dilation, groups=c, bias=False),
                                nn.Conv1d(c, c, 1, bias=False), nn.BatchNorm1d(c, affine=False))

    def forward(self, x):
        return self.op(x)


OPS = {
    "none": lambda c: Zero(),
    "skip_connect": lambda c: nn.Identity(),
    "max_pool_3": lambda c: nn.Sequential(nn.MaxPool1d(3, stride=1, padding=1), nn.BatchNorm1d(c, affine=False)),
    "avg_pool_3": lambda c: nn.Sequential(nn.AvgPool1d(3, stride=1, padding=1, count_include_pad=False),
                                          nn.BatchNorm1d(c, affine=False)),
    "sep_conv_3": lambda c: SepConv(c, 3),
    "sep_conv_5": lambda c: SepConv(c, 5),
    "dil_conv_3": lambda c: SepConv(c, 3, dilation=2),
}
PRIMITIVES = list(OPS)


class MixedOp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self._ops = nn.ModuleList([OPS[p](c) for p in PRIMITIVES])

    def forward(self, x, weights):
        return sum(w * op(x) for w, op in zip(weights, self._ops))


class Cell(nn.Module):
    def __init__(self, c, steps=3):
        super().__init__()
        self.steps = steps
        self._ops = nn.ModuleList([MixedOp(c) for i in range(steps) for _ in range(1 + i)])

    def forward(self, s0, weights):
        states, offset = [s0], 0
        for i in range(self.steps):
            s = sum(self._ops[offset + j](h, weights[offset + j]) for j, h in enumerate(states))
            offset += len(states)
            states.append(s)
        return torch.cat(states[1:], dim=1)


class Network(nn.Module):
    def __init__(self, n_classes=3, steps=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv1d(1, C, 3, padding=1, bias=False), nn.BatchNorm1d(C))
        self.cell = Cell(C, steps)
        self.classifier = nn.Linear(steps * C, n_classes)
        k = sum(1 + i for i in range(steps))
        self.alphas = nn.Parameter(1e-3 * torch.from_numpy(rng.normal(size=(k, len(PRIMITIVES))).astype(np.float32)))

    def arch_parameters(self):
        return [self.alphas]

    def weight_parameters(self):
        arch = {id(p) for p in self.arch_parameters()}
        return [p for p in self.parameters() if id(p) not in arch]

    def forward(self, x):
        s = self.cell(self.stem(x), F.softmax(self.alphas, dim=-1))
        return self.classifier(F.adaptive_avg_pool1d(s, 1).flatten(1))

    def genotype(self):
        w = F.softmax(self.alphas, dim=-1).detach().numpy()
        gene, start, n = [], 0, 1
        none = PRIMITIVES.index("none")
        for i in range(self.cell.steps):
            ws = w[start:start + n]
            edges = sorted(range(n), key=lambda j: -max(ws[j][k] for k in range(len(ws[j])) if k != none))[:2]
            for j in sorted(edges):
                k_best = max((k for k in range(len(ws[j])) if k != none), key=lambda k: ws[j][k])
                gene.append((PRIMITIVES[k_best], j))
            start += n
            n += 1
        return gene


def signals(n):
    """Class 0: smooth sine, 1: square wave, 2: sparse spikes; random phase and amplitude."""
    t = np.arange(LEN)
    y = rng.integers(0, 3, n)
    ph = rng.uniform(0, 2 * np.pi, n)[:, None]
    amp = rng.uniform(0.5, 1.5, n)[:, None]
    base = np.where(y[:, None] == 0, np.sin(0.4 * t + ph),
                    np.where(y[:, None] == 1, np.sign(np.sin(0.4 * t + ph)), (rng.random((n, LEN)) < 0.1) * 2.0))
    x = amp * base + 0.3 * rng.normal(size=(n, LEN))
    return torch.from_numpy(x[:, None].astype(np.float32)), torch.from_numpy(y)


net = Network()
with torch.no_grad():
    for name, p in net.named_parameters():
        if name != "alphas" and p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, np.sqrt(2 / p[0].numel()), p.shape).astype(np.float32)))
        elif name == "classifier.bias":
            p.zero_()
print(f"weights {sum(p.numel() for p in net.weight_parameters())} arch {net.alphas.numel()} "
      f"edges {len(net.cell._ops)} ops/edge {len(PRIMITIVES)}")

xtr, ytr = signals(192)
xva, yva = signals(192)
w_opt = torch.optim.SGD(net.weight_parameters(), lr=0.05, momentum=0.9, weight_decay=3e-4)
a_opt = torch.optim.Adam(net.arch_parameters(), lr=6e-3, betas=(0.5, 0.999), weight_decay=1e-3)
steps = 20
sched = torch.optim.lr_scheduler.CosineAnnealingLR(w_opt, steps, eta_min=1e-3)
losses = []
for step in range(steps):
    i = (step * 32) % 192
    xb, yb, xv, yv = xtr[i:i + 32], ytr[i:i + 32], xva[i:i + 32], yva[i:i + 32]
    a_opt.zero_grad()
    F.cross_entropy(net(xv), yv).backward()
    a_opt.step()
    w_opt.zero_grad()
    loss = F.cross_entropy(net(xb), yb)
    loss.backward()
    nn.utils.clip_grad_norm_(net.weight_parameters(), 5.0)
    w_opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 5 == 0:
        print(f"step {step:2d} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.5f}")

net.eval()
with torch.no_grad():
    acc = (net(xva).argmax(1) == yva).float().mean().item()
probs = F.softmax(net.alphas, dim=-1)
print(f"alpha rows sum to one: {torch.allclose(probs.sum(-1), torch.ones(len(probs)))} "
      f"strongest edge op {PRIMITIVES[int(probs.max(1).values.argmax())]}")
print(f"genotype {net.genotype()}")
print(f"validation accuracy {acc:.4f}")
print(f"RESULT {np.mean(losses[:4]):.4f} {np.mean(losses[-4:]):.4f} {acc:.4f}")
