"""Device-agnostic training boilerplate, in the style of the public training scripts that run
unchanged on a laptop and on a GPU server: the device picked by torch.cuda.is_available() /
torch.backends.mps.is_available() / torch.accelerator.is_available(), memory logging through
torch.cuda.memory_allocated / max_memory_allocated / memory_reserved and
torch.cuda.empty_cache() called unconditionally (0 and a no-op without a GPU), seeding through
torch.manual_seed and torch.cuda.manual_seed_all, torch.backends.cudnn flags and
torch.set_float32_matmul_precision, torch.get_num_threads, tensors moved with
.to(device, non_blocking=True), a DataLoader whose pin_memory follows the device, autocast
enabled only on CUDA (torch.autocast(device_type=device.type, enabled=use_amp)), a GradScaler
that is disabled without CUDA, torch.device parsing and comparison, and a checkpoint loaded with
map_location=device. Runs on the CPU here; torch and ember print the same lines. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <accuracy>."""

import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

if torch.cuda.is_available():
    device = torch.device("cuda")
elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")
use_amp = device.type == "cuda"
print("device:", device, "amp:", use_amp, "cuda devices:", torch.cuda.device_count())
print("accelerator available:", torch.accelerator.is_available())

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
torch.set_float32_matmul_precision("high")
print("matmul precision:", torch.get_float32_matmul_precision(),
      "threads >= 1:", torch.get_num_threads() >= 1)
print("cudnn flags:", torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic)


def log_memory(tag):
    mb = 1024 ** 2
    print(f"[{tag}] allocated {torch.cuda.memory_allocated() / mb:.1f} MB, "
          f"peak {torch.cuda.max_memory_allocated() / mb:.1f} MB, "
          f"reserved {torch.cuda.memory_reserved() / mb:.1f} MB")


d = torch.device("cuda:1")
print("parsed:", d.type, d.index, torch.device("cpu") == torch.device("cpu"),
      torch.device("cpu", 0).index, str(torch.device("cuda", 0)))

rng = np.random.default_rng(3)
X = rng.normal(size=(256, 10)).astype(np.float32)
w = rng.normal(size=(10, 3)).astype(np.float32)
Y = (X @ w).argmax(1)
ds = TensorDataset(torch.from_numpy(X), torch.from_numpy(Y))
loader = DataLoader(ds, batch_size=64, shuffle=False, pin_memory=device.type == "cuda",
                    drop_last=False)
print("pin_memory:", loader.pin_memory, "batches:", len(loader))

model = nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 3))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
model = model.to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
scaler = torch.amp.GradScaler(device.type, enabled=use_amp)
print("scaler enabled:", scaler.is_enabled(), "scale:", scaler.get_scale())
log_memory("start")

losses = []
for epoch in range(4):
    for xb, yb in loader:
        xb = xb.to(device, non_blocking=True)
        yb = yb.to(device, non_blocking=True)
        with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=use_amp):
            out = model(xb)
            loss = F.cross_entropy(out, yb)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    print(f"epoch {epoch} loss {np.mean(losses[-len(loader):]):.4f} norm {norm.item():.4f} "
          f"out dtype {out.dtype}")
    torch.cuda.empty_cache()
log_memory("end")
if torch.cuda.is_available():
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()

buf = io.BytesIO()
torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "scaler": scaler.state_dict()}, buf)
buf.seek(0)
ckpt = torch.load(buf, map_location=device, weights_only=True)
fresh = nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 3)).to(device)
fresh.load_state_dict(ckpt["model"])
print("checkpoint scaler state:", ckpt["scaler"], "param device:",
      next(fresh.parameters()).device.type)
model.eval()
with torch.inference_mode():
    pred = fresh(torch.from_numpy(X).to(device)).argmax(1).cpu()
    acc = (pred == torch.from_numpy(Y)).float().mean().item()
print("same predictions after reload:",
      torch.equal(pred, model(torch.from_numpy(X)).argmax(1).cpu()))
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {acc:.4f}")
torch.set_float32_matmul_precision("highest")  # put back for whatever runs next
