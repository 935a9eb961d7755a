"""Continual learning over a sequence of tasks, in the style of the public Elastic Weight
Consolidation / Synaptic Intelligence / experience-replay baselines: permuted-feature tasks
built by indexing columns with NumPy permutations, a shared MLP with a multi-head output
(nn.ModuleDict of heads added per task, the optimizer extended with add_param_group), the
diagonal Fisher from per-sample gradients by torch.func.vmap(torch.func.grad(...)) over
functional_call with the model's params and buffers (checked against a loop of backward
passes), snapshots of the anchor parameters as {name: p.detach().clone()}, the EWC penalty
summed over tasks (online EWC with a decayed Fisher), Synaptic Intelligence's path integral
accumulated from -grad * delta after each step, accuracy on
every seen task after each task (the accuracy matrix, backward transfer), copy.deepcopy of the
model to compare methods from the same start, and an optimizer state_dict round trip.
Data and weights from NumPy. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <naive bwt> <ewc bwt> <si bwt>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

rng = np.random.default_rng(70)
D, T, N = 10, 3, 200
base = rng.normal(size=(N, D)).astype(np.float32)
tasks = []
for t in range(T):
    perm, w_true = rng.permutation(D), rng.normal(size=D)
    x = torch.from_numpy(base[:, perm].copy())
    y = torch.from_numpy((np.tanh(base[:, :3] @ w_true[:3]) * base[:, 3] + base @ w_true > 0).astype(np.int64))
    tasks.append((x, y))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.heads = nn.ModuleDict()

    def add_head(self, t):
        self.heads[str(t)] = nn.Linear(32, 2)
        with torch.no_grad():
            for p in self.heads[str(t)].parameters():
                p.copy_(torch.from_numpy(rng.normal(0, 0.2, p.shape).astype(np.float32)))
        return self.heads[str(t)]

    def forward(self, x, t):
        return self.heads[str(t)](self.body(x))


start = Net()
with torch.no_grad():
    for p in start.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]), p.shape).astype(np.float32)))


def fisher_diag(model, t, x, y):
    params = {k: v.detach() for k, v in model.named_parameters() if k.startswith("body")}
    rest = {k: v.detach() for k, v in model.named_parameters() if not k.startswith("body")}

    def loss_one(p, xi, yi):
        out = functional_call(model, {**p, **rest}, (xi[None], t))
        return F.cross_entropy(out, yi[None])

    g = vmap(grad(loss_one), in_dims=(None, 0, 0))(params, x, y)
    return {k: (v ** 2).mean(0) for k, v in g.items()}


def train(method, lam):
    model = copy.deepcopy(start)
    opt = torch.optim.SGD(model.body.parameters(), lr=0.05)
    anchors, fishers, omega = [], [], {n: torch.zeros_like(p) for n, p in model.body.named_parameters()}
    acc = np.zeros((T, T))
    for t, (x, y) in enumerate(tasks):
        opt.add_param_group({"params": list(model.add_head(t).parameters()), "lr": 0.05})
        w_path = {n: torch.zeros_like(p) for n, p in model.body.named_parameters()}
        start_t = {n: p.detach().clone() for n, p in model.body.named_parameters()}
        for epoch in range(60):
            loss = F.cross_entropy(model(x, t), y)
            pen = 0.0
            for anc, fis in zip(anchors, fishers):
                for n, p in model.body.named_parameters():
                    pen = pen + (fis[n] * (p - anc[n]) ** 2).sum()
            opt.zero_grad()
            (loss + lam / 2 * pen).backward()
            before = {n: p.detach().clone() for n, p in model.body.named_parameters()}
            grads = {n: p.grad.detach().clone() for n, p in model.body.named_parameters()}
            opt.step()
            for n, p in model.body.named_parameters():
                w_path[n] -= grads[n] * (p.detach() - before[n])
        anchors = [{n: p.detach().clone() for n, p in model.body.named_parameters()}] if method != "naive" else []
        if method == "ewc":
            f = {k[len("body."):]: v for k, v in fisher_diag(model, t, x, y).items()}
            fishers = [f if not fishers else {k: 0.5 * fishers[0][k] + f[k] for k in f}]  # online EWC
        elif method == "si":
            for n, p in model.body.named_parameters():
                omega[n] += w_path[n] / ((p.detach() - start_t[n]) ** 2 + 1e-3)
            fishers = [dict(omega)]
        with torch.no_grad():
            for s in range(t + 1):
                acc[t, s] = (model(tasks[s][0], s).argmax(1) == tasks[s][1]).float().mean().item()
    bwt = np.mean([acc[T - 1, s] - acc[s, s] for s in range(T - 1)])
    sd = opt.state_dict()
    groups = [{"params": list(model.body.parameters())}] + [{"params": list(h.parameters())} for h in model.heads.values()]
    opt2 = torch.optim.SGD(groups, lr=0.01)
    opt2.load_state_dict(sd)
    print(f"{method:5s} final row {[round(float(a), 4) for a in acc[T - 1]]} diag {[round(float(acc[i, i]), 4) for i in range(T)]} "
          f"bwt {bwt:+.4f} param groups {len(opt2.param_groups)} lr {opt2.param_groups[0]['lr']}")
    return bwt


# Fisher by vmap against a loop of backward passes
m = copy.deepcopy(start)
m.add_head(0)
x, y = tasks[0]
f = fisher_diag(m, 0, x[:16], y[:16])
loop = torch.zeros_like(m.body[0].weight)
for i in range(16):
    m.zero_grad()
    F.cross_entropy(m(x[i:i + 1], 0), y[i:i + 1]).backward()
    loop += m.body[0].weight.grad ** 2 / 16
print(f"vmap fisher == loop: {torch.allclose(f['body.0.weight'], loop, atol=1e-7)} keys {sorted(f)[:2]}")
naive, ewc, si = train("naive", 0.0), train("ewc", 50.0), train("si", 1.0)
print(f"RESULT {naive:.4f} {ewc:.4f} {si:.4f}")
