"""Mixed-precision training on the CPU as recent training scripts do it: torch.autocast
(device_type="cpu", dtype=torch.bfloat16) around the forward only, the dtypes each layer produces
under autocast printed (Linear, Conv1d, matmul, bmm, LayerNorm, softmax, log_softmax,
cross_entropy, mse_loss, sum, cat of mixed dtypes, addition with float32), a nested
autocast(enabled=False) region, the loss cast back with .float(), a
torch.amp.GradScaler("cpu", enabled=False) used through its full protocol, gradients and the
optimizer state in float32 (master weights), a model cast whole to bfloat16 with .to(), and the
bfloat16 numbers (finfo, rounding) printed. From the same initial weights (``--save-init``/
``--init-from``) the losses agree with torch's to bfloat16 rounding. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)
rng = np.random.default_rng(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8)
        self.fc1 = nn.Linear(8 * 16, 32)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x, trace=None):
        h = F.gelu(self.conv(x))
        h = self.norm(h.transpose(1, 2))
        logits = self.fc2(F.relu(self.fc1(h.flatten(1))))
        if trace is not None:
            trace.update(conv=h.dtype, logits=logits.dtype)
        return logits


x_np = rng.normal(0, 1, (192, 2, 16)).astype(np.float32)
y_np = ((x_np[:, 0].mean(1) > 0).astype(np.int64) + (x_np[:, 1].std(1) > 1.0)).astype(np.int64)
x_all, y_all = torch.from_numpy(x_np), torch.from_numpy(y_np)
model = Net()
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})

# what autocast does to each op
a = torch.randn(4, 8)
b = torch.randn(8, 3)
with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
    print("autocast enabled:", torch.is_autocast_enabled("cpu"),
          torch.get_autocast_dtype("cpu"))
    mm = a @ b
    lin = F.linear(a, b.t())
    bmm = torch.bmm(a.unsqueeze(0), b.unsqueeze(0))
    ln = F.layer_norm(mm, (3,))
    sm = torch.softmax(mm, dim=-1)
    lsm = F.log_softmax(mm, dim=-1)
    ce = F.cross_entropy(mm, torch.tensor([0, 1, 2, 0]))
    mse = F.mse_loss(mm, torch.zeros(4, 3))
    added = mm + torch.ones(4, 3)
    cat = torch.cat([mm, torch.ones(4, 3)])
    s = mm.sum()
    with torch.autocast(device_type="cpu", enabled=False):
        inner = a @ b
    trace = {}
    model(x_all[:2], trace)
print("dtypes: mm", mm.dtype, "linear", lin.dtype, "bmm", bmm.dtype, "layer_norm", ln.dtype)
print("dtypes: softmax", sm.dtype, "log_softmax", lsm.dtype, "cross_entropy", ce.dtype, "mse",
      mse.dtype)
print("dtypes: add", added.dtype, "cat", cat.dtype, "sum", s.dtype, "disabled region",
      inner.dtype, "model", trace)
print("outside:", torch.is_autocast_enabled("cpu"), (a @ b).dtype)
print(f"bf16 matmul error below 2%: {((mm.float() - a @ b).abs().max() / (a @ b).abs().max()).item() < 0.02}")

optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
scaler = torch.amp.GradScaler("cpu", enabled=False)
losses = []
for step in range(args.steps):
    i = (step * 32) % len(x_all)
    xb, yb = x_all[i:i + 32], y_all[i:i + 32]
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    losses.append(loss.float().item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {losses[-1]:.4f} (logits {logits.dtype}, loss {loss.dtype})")
print("master weights and grads:", {p.dtype for p in model.parameters()},
      {p.grad.dtype for p in model.parameters()},
      {v.dtype for st in optimizer.state.values() for v in st.values() if v.dim() > 0})
print(f"scaler enabled {scaler.is_enabled()}, scale {scaler.get_scale()}")

model.eval()
with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
    acc = (model(x_all).argmax(1) == y_all).float().mean().item()
half = Net().to(torch.bfloat16)
half.load_state_dict(model.state_dict())
with torch.no_grad():
    out16 = half(x_all[:8].to(torch.bfloat16))
    out32 = model(x_all[:8])
print(f"whole-bf16 model: {out16.dtype}, {half.fc1.weight.dtype}, close to fp32: "
      f"{torch.allclose(out16.float(), out32, atol=0.1, rtol=0.05)}")
fi = torch.finfo(torch.bfloat16)
print(f"finfo bf16: eps {fi.eps} max {fi.max:.4e} tiny {fi.tiny:.4e} bits {fi.bits}")
print("rounding:", torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 257.0, 3.14159]).to(
    torch.bfloat16).tolist())
print(f"RESULT {losses[0]:.6f} {np.mean(losses[-5:]):.6f} {acc:.4f}")
