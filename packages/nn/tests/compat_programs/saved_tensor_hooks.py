"""Memory tricks around autograd's saved tensors, in the style of the public "Hooks for autograd
saved tensors" tutorial and the activation-compression code of large-model training repos:
torch.autograd.graph.saved_tensors_hooks packing activations to bfloat16 (and counting what
is saved), a module-scoped hook context that stores activations on "disk" (a dict keyed by id),
torch.autograd.graph.save_on_cpu, activation checkpointing with use_reentrant=True and False
(equal gradients, keyword arguments, a non-tensor argument, checkpoint_sequential), walking the
backward graph from loss.grad_fn (name(), next_functions, AccumulateGrad.variable), Node
register_prehook / register_hook to observe and rescale gradients, torch.autograd.detect_anomaly
naming the backward that produced NaN, and forward-mode AD (dual_level, make_dual,
unpack_dual) for a directional derivative checked against a double-backward vjp. Weights and data
from NumPy. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <max grad difference>."""

import warnings

import numpy as np
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

rng = np.random.default_rng(11)


def init(m):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.4, p.shape).astype(np.float32)))
    return m


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.fc2, self.norm = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.LayerNorm(d)

    def forward(self, x, scale=1.0, act="gelu"):
        h = self.fc1(self.norm(x))
        h = nn.functional.gelu(h) if act == "gelu" else torch.relu(h)
        return x + scale * self.fc2(h)


blocks = init(nn.ModuleList([Block(8) for _ in range(3)]))
head = init(nn.Linear(8, 1))
x = torch.from_numpy(rng.normal(size=(16, 8)).astype(np.float32))
y = x[:, :3].sum(1, keepdim=True).tanh()


def forward(mode):
    h = x
    for b in blocks:
        if mode == "plain":
            h = b(h, scale=0.5, act="relu")
        else:
            h = checkpoint(b, h, 0.5, "relu", use_reentrant=(mode == "reentrant"))
    return nn.functional.mse_loss(head(h), y)


grads = {}
for mode in ("plain", "reentrant", "non_reentrant"):
    for p in blocks.parameters():
        p.grad = None
    if mode == "reentrant":  # the reentrant variant needs an input that requires grad
        x.requires_grad_(True)
    loss = forward(mode)
    loss.backward()
    x.requires_grad_(False)
    grads[mode] = torch.cat([p.grad.flatten() for p in blocks.parameters()])
    print(f"{mode:14s} loss {loss.item():.6f} grad norm {grads[mode].norm().item():.6f}")
diff = max((grads[m] - grads["plain"]).abs().max().item() for m in grads)
print("checkpoint grads equal:", diff < 1e-6)
seq = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(4)])
init(seq)
out = checkpoint_sequential(seq, 2, x, use_reentrant=False)
print("checkpoint_sequential equal:", torch.allclose(out, seq(x), atol=1e-6))

# ---- saved tensors packed to bfloat16 ----
saved = []


def pack(t):
    saved.append((tuple(t.shape), str(t.dtype).replace("torch.", "")))
    return t.to(torch.bfloat16) if t.is_floating_point() else t


def unpack(t):
    return t.float() if t.dtype == torch.bfloat16 else t


for p in blocks.parameters():
    p.grad = None
with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
    loss = forward("plain")
loss.backward()
g_bf16 = torch.cat([p.grad.flatten() for p in blocks.parameters()])
rel = ((g_bf16 - grads["plain"]).norm() / grads["plain"].norm()).item()
print("tensors saved:", len(saved) > 10, "largest:", max(saved, key=lambda s: np.prod(s[0]))[0],
      "bf16 grads close:", rel < 0.05)

storage = {}


class SaveToDict(torch.autograd.graph.saved_tensors_hooks):
    def __init__(self):
        def pack_to(t):
            key = len(storage)
            storage[key] = t.detach().clone()
            return key

        super().__init__(pack_to, lambda key: storage.pop(key))


with SaveToDict():
    loss = forward("plain")
print("stored then freed:", len(storage) > 0, end=" ")
loss.backward()
print(len(storage) == 0)
with torch.autograd.graph.save_on_cpu(pin_memory=False):
    loss_cpu = forward("plain")
loss_cpu.backward()

# ---- the backward graph ----
fn = loss.grad_fn
print("loss node:", fn.name().endswith("Backward0"), type(fn).__name__ == fn.name())
seen, stack, leaves = set(), [fn], 0
while stack:
    node = stack.pop()
    if node is None or node in seen:
        continue
    seen.add(node)
    if hasattr(node, "variable"):
        leaves += 1
    stack.extend(n for n, _ in node.next_functions)
print("graph nodes > 30:", len(seen) > 30, "leaf accumulators:", leaves)

events = []
w = torch.ones(3, requires_grad=True)
z = w * 2.0
z.grad_fn.register_prehook(lambda grad_outputs: events.append(("pre", grad_outputs[0].tolist())))
z.grad_fn.register_hook(lambda gi, go: tuple(None if g is None else g * 10 for g in gi))
(z * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
print("node hooks:", events, "rescaled grad:", w.grad.tolist())

# ---- anomaly detection ----
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    try:
        with torch.autograd.detect_anomaly():
            a = torch.tensor([0.0, 1.0], requires_grad=True)
            b = torch.sqrt(a) * 0.0
            b.sum().backward()
        print("anomaly: none raised, grad", a.grad.tolist())
    except RuntimeError as e:
        print("anomaly:", str(e).split(".")[0])
print("anomaly mode off again:", torch.is_anomaly_enabled())

# ---- forward-mode AD ----
v = torch.from_numpy(rng.normal(size=(16, 8)).astype(np.float32))
with fwAD.dual_level():
    dual = fwAD.make_dual(x, v)
    out = head(blocks[0](dual))
    primal, tangent = fwAD.unpack_dual(out)
xx = x.clone().requires_grad_(True)
o = head(blocks[0](xx))
u = torch.ones_like(o, requires_grad=True)
(gx,) = torch.autograd.grad(o, xx, u, create_graph=True)
(jvp,) = torch.autograd.grad(gx, u, v)
print("jvp by forward AD == double-vjp:", torch.allclose(tangent, jvp, atol=1e-5),
      "primal unchanged:", torch.allclose(primal, o))

opt = torch.optim.Adam(list(blocks.parameters()) + list(head.parameters()), lr=1e-2)
losses = []
for step in range(20):
    opt.zero_grad()
    loss = forward("non_reentrant")
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {diff:.2e}")
