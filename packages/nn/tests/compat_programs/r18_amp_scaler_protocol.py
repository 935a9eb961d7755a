"""Mixed-precision training on CPU as the AMP recipe writes it, device-agnostic: torch.autocast
("cpu", dtype=torch.bfloat16) around the forward (the dtypes each op family produces: matmul and
conv in bfloat16, softmax / log_softmax / layer_norm / losses in float32, sums and the explicit
float() casts), autocast nested with enabled=False for a float32 island, the decorator form,
torch.amp.GradScaler("cpu") with the full protocol (scale, backward, unscale_ then clip, step
skipped on an injected inf, update with backoff and growth, get_scale / state_dict /
load_state_dict round trip through torch.save), gradient accumulation with the scaled loss
divided by the number of micro-batches, and the bfloat16 run compared with a float32 run from
the same weights. Data from NumPy: the run is the same on both libraries. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <bf16 vs fp32 loss gap>."""

import copy
import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

rng = np.random.default_rng(8)
device = "cpu"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.ckpt = False
        self.conv = nn.Conv1d(2, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8)
        self.fc1 = nn.Linear(8 * 12, 32)
        self.fc2 = nn.Linear(32, 3)

    def features(self, x):
        h = F.gelu(self.conv(x))
        return self.norm(h.transpose(1, 2)).transpose(1, 2)

    def forward(self, x):
        # activation checkpointing inside autocast: the recomputation runs under autocast too
        h = checkpoint(self.features, x, use_reentrant=False) if self.ckpt else self.features(x)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def init(m):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.2, p.shape).astype(np.float32)))


X = torch.from_numpy(rng.normal(size=(256, 2, 12)).astype(np.float32))
Y = torch.from_numpy(((X[:, 0].numpy().sum(1) > 0).astype(np.int64) + (X[:, 1].numpy().max(1) > 1.8)))

net = Net().to(device)
init(net)
ref_net = copy.deepcopy(net)
twin = copy.deepcopy(net)
twin.ckpt = True
for m in (net, twin):
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        F.cross_entropy(m(X[:16]), Y[:16]).backward()
print("checkpointed under autocast: grads equal", all(torch.equal(a.grad, b.grad) for a, b in zip(net.parameters(), twin.parameters())))
net.zero_grad(set_to_none=True)

with torch.autocast(device_type=device, dtype=torch.bfloat16):
    xb = X[:4]
    conv = net.conv(xb)
    lin = net.fc1(torch.zeros(4, 96))
    sm = torch.softmax(lin, -1)
    lsm = F.log_softmax(lin, -1)
    ln = net.norm(conv.transpose(1, 2))
    loss = F.cross_entropy(net(xb), Y[:4])
    s = lin.sum()
    up = lin.float()
    with torch.autocast(device_type=device, enabled=False):
        island = up @ up.T
    mixed = conv + torch.ones(1)
    # composed from bmm / mm: the autocast dtype even from float32 inputs
    attn = torch.einsum("bcl,bdl->bcd", xb, xb)
    td = torch.tensordot(up, up, dims=([1], [1]))
print("dtypes conv", conv.dtype, "linear", lin.dtype, "softmax", sm.dtype, "log_softmax", lsm.dtype, "layer_norm", ln.dtype)
print("dtypes loss", loss.dtype, "sum", s.dtype, "float()", up.dtype, "island", island.dtype, "bf16 + f32", mixed.dtype)
print("einsum", attn.dtype, "tensordot", td.dtype)
print("autocast state inside/outside", torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))


@torch.autocast(device_type=device, dtype=torch.bfloat16)
def predict(m, x):
    return m(x)


print("decorated output", predict(net, X[:2]).dtype)

scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10, growth_factor=2.0, backoff_factor=0.5, growth_interval=5)
print("scaler enabled", scaler.is_enabled(), "scale", scaler.get_scale())
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
ref_opt = torch.optim.SGD(ref_net.parameters(), lr=0.05, momentum=0.9)
ACC = 2
losses, ref_losses, skipped = [], [], 0
for step in range(40):
    idx = torch.from_numpy(rng.choice(256, 32, replace=False))
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for micro in idx.chunk(ACC):
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            out = net(X[micro])
            loss = F.cross_entropy(out, Y[micro]) / ACC
        scaler.scale(loss).backward()
        total += loss.item()
    if step == 7:  # a poisoned gradient: the step is skipped and the scale backs off
        next(net.parameters()).grad[0, 0, 0] = float("inf")
    scaler.unscale_(opt)
    gnorm = nn.utils.clip_grad_norm_(net.parameters(), 5.0)
    before = scaler.get_scale()
    w_before = net.fc2.weight.detach().clone()
    scaler.step(opt)
    scaler.update()
    if scaler.get_scale() < before:
        skipped += 1
        print(f"step {step} skipped: weights unchanged {torch.equal(w_before, net.fc2.weight)} scale {before} -> {scaler.get_scale()} grad norm {gnorm.item()}")
    losses.append(total)
    # the float32 reference
    ref_opt.zero_grad()
    rl = F.cross_entropy(ref_net(X[idx]), Y[idx])
    rl.backward()
    nn.utils.clip_grad_norm_(ref_net.parameters(), 5.0)
    ref_opt.step()
    ref_losses.append(rl.item())
    if step % 10 == 0:
        print(f"step {step:2d} bf16 loss {total:.4f} fp32 loss {rl.item():.4f} scale {scaler.get_scale()}")
print("skipped steps", skipped, "final scale", scaler.get_scale())

buf = io.BytesIO()
torch.save({"scaler": scaler.state_dict(), "model": net.state_dict()}, buf)
buf.seek(0)
ck = torch.load(buf)
s2 = torch.amp.GradScaler(device)
s2.load_state_dict(ck["scaler"])
print("scaler state", sorted(ck["scaler"]), "restored scale", s2.get_scale(), "growth tracker", ck["scaler"]["_growth_tracker"])
off = torch.amp.GradScaler(device, enabled=False)
t = torch.tensor(3.0)
print("disabled scaler passes through", off.scale(t) is t, off.get_scale(), off.state_dict())
with torch.no_grad():
    acc = (net(X).argmax(1) == Y).float().mean().item()
gap = abs(np.mean(losses[-10:]) - np.mean(ref_losses[-10:]))
print(f"accuracy {acc:.4f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {gap:.5f}")
