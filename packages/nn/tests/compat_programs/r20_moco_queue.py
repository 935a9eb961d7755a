"""Momentum contrast (MoCo v2) in the style of the public facebookresearch/moco code: a query
encoder and a key encoder copied from it with requires_grad_(False) and updated by an exponential
moving average under torch.no_grad (torch._foreach_mul_ / _foreach_add_ on the parameter
lists), a queue of negatives registered as a buffer and updated in place with a pointer buffer
(ring-buffer slicing, F.normalize(dim=0)), logits by torch.einsum('nc,nc->n') and
einsum('nc,ck->nk'), the InfoNCE target as zeros, augmentations as NumPy jitter + masking, then a
linear probe on frozen features (requires_grad_ False, encoder.eval()) and kNN accuracy. The
state_dict carries the queue and pointer; a fresh model loaded from it continues identically.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <probe accuracy>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(21)
C, D, N = 4, 12, 256
proto = rng.normal(size=(C, D)) * 1.2
y_np = rng.integers(0, C, size=N)
x_np = (proto[y_np] + 0.8 * rng.normal(size=(N, D))).astype(np.float32)


def augment(x):
    noise = rng.normal(0, 0.3, size=x.shape).astype(np.float32)
    keep = (rng.uniform(size=x.shape) > 0.15).astype(np.float32)
    return torch.from_numpy((x + noise) * keep)


class MoCo(nn.Module):
    def __init__(self, dim=16, K=64, m=0.99, T=0.2):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = nn.Sequential(nn.Linear(D, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, dim))
        self.encoder_k = copy.deepcopy(self.encoder_q)
        for p in self.encoder_k.parameters():
            p.requires_grad_(False)
        self.register_buffer("queue", F.normalize(torch.from_numpy(rng.normal(size=(dim, K)).astype(np.float32)), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def momentum_update(self):
        q = list(self.encoder_q.parameters())
        k = list(self.encoder_k.parameters())
        torch._foreach_mul_(k, self.m)
        torch._foreach_add_(k, q, alpha=1 - self.m)

    @torch.no_grad()
    def enqueue(self, keys):
        b = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % b == 0
        self.queue[:, ptr:ptr + b] = keys.T
        self.queue_ptr[0] = (ptr + b) % self.K

    def forward(self, xq, xk):
        q = F.normalize(self.encoder_q(xq), dim=1)
        with torch.no_grad():
            self.momentum_update()
            k = F.normalize(self.encoder_k(xk), dim=1)
        l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", q, self.queue.clone().detach())
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self.enqueue(k)
        return logits, labels


model = MoCo()
with torch.no_grad():
    for p in model.encoder_q.parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, p.shape[1] ** -0.5, size=tuple(p.shape)).astype(np.float32)))
        else:
            p.fill_(0.01)
    model.encoder_k.load_state_dict(model.encoder_q.state_dict())
opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.01, momentum=0.9, weight_decay=1e-4)
print("trainable", sum(p.numel() for p in model.parameters() if p.requires_grad),
      "frozen", sum(p.numel() for p in model.parameters() if not p.requires_grad),
      "buffers", [n for n, _ in model.named_buffers()])
losses = []
B = 32
for step in range(50):
    idx = rng.choice(N, B, replace=False)
    logits, labels = model(augment(x_np[idx]), augment(x_np[idx]))
    loss = F.cross_entropy(logits, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        acc = (logits.argmax(1) == 0).float().mean().item()
        print(f"step {step} loss {loss.item():.5f} top1 {acc:.4f} ptr {model.queue_ptr.item()}")

# the state_dict carries the queue: a fresh model continues identically
sd = model.state_dict()
clone = MoCo()
clone.load_state_dict(sd)
xa, xb = augment(x_np[:32]), augment(x_np[:32])
la, _ = model(xa, xb)
lb, _ = clone(xa, xb)
print("queue in state_dict", "queue" in sd, "resumed logits equal", torch.allclose(la, lb), "ptr", clone.queue_ptr.tolist())
print("key encoder lags query", round(sum((a - b).abs().sum().item() for a, b in zip(model.encoder_q.parameters(), model.encoder_k.parameters())), 4))

# linear probe on frozen features
enc = model.encoder_q.eval().requires_grad_(False)
X = torch.from_numpy(x_np)
Y = torch.from_numpy(y_np).long()
feats = F.normalize(enc(X), dim=1)
probe = nn.Linear(16, C)
with torch.no_grad():
    probe.weight.zero_()
    probe.bias.zero_()
popt = torch.optim.Adam(probe.parameters(), lr=0.05)
for _ in range(80):
    ploss = F.cross_entropy(probe(feats[:192]), Y[:192])
    popt.zero_grad()
    ploss.backward()
    popt.step()
probe_acc = (probe(feats[192:]).argmax(1) == Y[192:]).float().mean().item()
sim = feats[192:] @ feats[:192].T
top = sim.topk(5, dim=1).indices
votes = F.one_hot(Y[:192][top], C).sum(1)
knn_acc = (votes.argmax(1) == Y[192:]).float().mean().item()
print(f"probe loss {ploss.item():.5f} probe acc {probe_acc:.4f} knn acc {knn_acc:.4f} encoder grads {any(p.requires_grad for p in enc.parameters())}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {probe_acc:.6f}")
