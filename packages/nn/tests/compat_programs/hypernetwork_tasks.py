"""Hypernetworks in the style of the public HyperNetworks / continual-learning-with-hypernetworks
code: a family of 1-D regression tasks (sinusoids with task-specific amplitude and phase), a
hypernetwork that maps a learned task embedding (nn.Embedding) to the full flat parameter vector
of a small target MLP, the flat vector split into named tensors by torch.split + view and run
through torch.func.functional_call on the target module (checked against a batched einsum
forward of all tasks at once via torch.func.vmap), a chunked hypernetwork variant (chunk
embeddings concatenated with the task embedding, outputs cat'ed and truncated), fast adaptation
to a new task by optimizing only a fresh embedding with the hypernetwork frozen
(requires_grad_(False)), and parameter counting with numel. Data and weights from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <new-task loss after adaptation>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, vmap

rng = np.random.default_rng(137)
TASKS, NPTS = 12, 40
amps = rng.uniform(0.5, 2.0, TASKS + 1).astype(np.float32)
phases = rng.uniform(0, np.pi, TASKS + 1).astype(np.float32)
xs = torch.linspace(-3, 3, NPTS).unsqueeze(1)
ys = torch.from_numpy(amps[:, None] * np.sin(xs.numpy().T + phases[:, None])).unsqueeze(-1)  # (T+1, N, 1)


def init_(module, scale=1.0):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy((rng.normal(0, scale / math.sqrt(p.shape[-1]), p.shape) if p.dim() > 1
                                      else np.zeros(p.shape)).astype(np.float32)))
    return module


target = nn.Sequential(nn.Linear(1, 24), nn.Tanh(), nn.Linear(24, 24), nn.Tanh(), nn.Linear(24, 1))
shapes = {n: p.shape for n, p in target.named_parameters()}
sizes = [math.prod(s) for s in shapes.values()]
n_target = sum(sizes)
print(f"target parameters {n_target} tensors {list(shapes)}")


def unflatten(flat):
    return {n: t.view(s) for (n, s), t in zip(shapes.items(), torch.split(flat, sizes))}


class HyperNet(nn.Module):
    def __init__(self, emb=8, h=64, chunk=None):
        super().__init__()
        self.task = nn.Embedding(TASKS + 1, emb)
        self.chunk = chunk
        if chunk is None:
            self.net = nn.Sequential(nn.Linear(emb, h), nn.ReLU(), nn.Linear(h, n_target))
        else:
            self.n_chunks = -(-n_target // chunk)
            self.chunk_emb = nn.Parameter(torch.zeros(self.n_chunks, emb))
            self.net = nn.Sequential(nn.Linear(2 * emb, h), nn.ReLU(), nn.Linear(h, chunk))

    def forward(self, t):
        e = self.task(t)
        if self.chunk is None:
            return self.net(e)
        inp = torch.cat([e.unsqueeze(-2).expand(*e.shape[:-1], self.n_chunks, -1),
                         self.chunk_emb.expand(*e.shape[:-1], -1, -1)], -1)
        return self.net(inp).flatten(-2)[..., :n_target]


def run_target(flat, x):
    return functional_call(target, unflatten(flat), (x,))


def batched_forward(flats, x):
    p = [t.view(flats.shape[0], *s) for s, t in zip(shapes.values(), torch.split(flats, sizes, dim=1))]
    h = torch.tanh(torch.einsum("ni,toi->tno", x, p[0]) + p[1].unsqueeze(1))
    h = torch.tanh(torch.einsum("tni,toi->tno", h, p[2]) + p[3].unsqueeze(1))
    return torch.einsum("tni,toi->tno", h, p[4]) + p[5].unsqueeze(1)


results = {}
for kind, chunk in (("full", None), ("chunked", 128)):
    hyper = init_(HyperNet(chunk=chunk), 0.5)
    with torch.no_grad():
        hyper.task.weight.copy_(torch.from_numpy(rng.normal(size=(TASKS + 1, 8)).astype(np.float32)))
        if chunk is not None:
            hyper.chunk_emb.copy_(torch.from_numpy(rng.normal(size=hyper.chunk_emb.shape).astype(np.float32)))
    print(f"{kind}: hypernetwork parameters {sum(p.numel() for p in hyper.parameters())}")
    opt = torch.optim.Adam(hyper.parameters(), lr=2e-3)
    ids = torch.arange(TASKS)
    losses = []
    for step in range(150):
        flats = hyper(ids)
        pred = vmap(run_target, in_dims=(0, None))(flats, xs)
        loss = F.mse_loss(pred, ys[:TASKS])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"{kind} step {step:3d} loss {loss.item():.5f}")
    with torch.no_grad():
        flats = hyper(ids)
        pred = vmap(run_target, in_dims=(0, None))(flats, xs)
        loop = torch.stack([run_target(f, xs) for f in flats])
        print(f"{kind}: vmap == loop == einsum: {torch.allclose(pred, loop, atol=1e-5)} "
              f"{torch.allclose(batched_forward(flats, xs), loop, atol=1e-5)}")
    results[kind] = losses

# adapt to the held-out task through a fresh embedding only
hyper.requires_grad_(False)
hyper.zero_grad()
emb = nn.Parameter(hyper.task.weight[:TASKS].mean(0, keepdim=True).clone())
opt = torch.optim.Adam([emb], lr=5e-2)


def new_task_loss():
    inp = torch.cat([emb.expand(hyper.n_chunks, -1), hyper.chunk_emb], -1)
    flat = hyper.net(inp).flatten()[:n_target]
    return F.mse_loss(run_target(flat, xs), ys[TASKS])


before = new_task_loss().item()
for step in range(60):
    loss = new_task_loss()
    opt.zero_grad()
    loss.backward()
    opt.step()
after = new_task_loss().item()
print(f"new task loss {before:.5f} -> {after:.5f} hyper grads untouched: {all(p.grad is None for p in hyper.parameters())}")
print(f"RESULT {results['full'][0]:.5f} {results['full'][-1]:.5f} {after:.5f}")
