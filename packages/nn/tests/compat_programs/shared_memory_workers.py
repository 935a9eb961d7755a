"""Worker processes that share tensors, in the style of the public Hogwild / A3C / parameter
server examples built on torch.multiprocessing (made deterministic: each worker owns its slice):
model.share_memory() and Tensor.share_memory_() / is_shared(), torch.multiprocessing.Process
workers (fork) that read the shared weights, compute gradients on their data shard and write them
into a shared (workers, n_params) gradient buffer, the parent averaging them into .grad with
torch.nn.utils.vector_to_parameters / parameters_to_vector, a torch.multiprocessing Queue
carrying tensors and results back, mp.Event / join / exitcode handling, a shared rollout buffer
filled in place by the workers, and tensors rebuilt from raw bytes (torch.frombuffer over a
bytearray, torch.asarray, NumPy views through np.asarray and the DLPack protocol). Data from
NumPy: the numbers do not depend on process timing. Written against `torch`; the test suite runs
it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

WORKERS, STEPS = 2, 8
rng = np.random.default_rng(21)
X = torch.from_numpy(rng.normal(size=(240, 6)).astype(np.float32))
Y = (X[:, 0] * X[:, 1] + X[:, 2] > 0).long()

model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.5, p.shape).astype(np.float32)))
model.share_memory()
n_params = parameters_to_vector(model.parameters()).numel()
grads = torch.zeros(WORKERS, n_params).share_memory_()
rollout = torch.zeros(WORKERS, 4, 3).share_memory_()
print("shared:", all(p.is_shared() for p in model.parameters()), grads.is_shared(),
      "plain tensor shared:", torch.zeros(2).is_shared(), "n_params", n_params)


def worker(rank, model, grads, rollout, go, done, results):
    shard = slice(rank * 120, (rank + 1) * 120)
    for step in range(STEPS):
        go[rank].wait()
        go[rank].clear()
        model.zero_grad()
        loss = F.cross_entropy(model(X[shard]), Y[shard])
        loss.backward()
        grads[rank].copy_(parameters_to_vector(p.grad for p in model.parameters()))
        rollout[rank, step % 4] = torch.tensor([rank, step, loss.item()])
        results.put((rank, step, loss.detach().clone()))
        done[rank].set()
    go[rank].wait()  # stay alive until the parent has received the queued tensors


ctx = mp.get_context("fork")
go = [ctx.Event() for _ in range(WORKERS)]
done = [ctx.Event() for _ in range(WORKERS)]
results = ctx.Queue()
procs = [ctx.Process(target=worker, args=(r, model, grads, rollout, go, done, results))
         for r in range(WORKERS)]
for p in procs:
    p.start()

opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
losses = []
for step in range(STEPS):
    for e in go:
        e.set()
    for e in done:
        e.wait()
        e.clear()
    got = sorted((results.get(timeout=60) for _ in range(WORKERS)), key=lambda r: r[0])
    losses.append(sum(r[2].item() for r in got) / WORKERS)
    mean_grad = grads.mean(0)
    offset = 0
    for p in model.parameters():
        p.grad = mean_grad[offset: offset + p.numel()].view_as(p).clone()
        offset += p.numel()
    opt.step()  # in place on the shared weights: the workers see the update
    print(f"step {step} loss {losses[-1]:.5f} from ranks {[r[0] for r in got]}")
for e in go:
    e.set()
for p in procs:
    p.join(timeout=60)
print("exit codes:", [p.exitcode for p in procs], "alive:", any(p.is_alive() for p in procs))
print("rollout (rank, step):", rollout[:, :, :2].reshape(-1, 2).tolist()[:4])

# the parent's full-batch gradient equals the mean of the shard gradients
check = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
vector_to_parameters(parameters_to_vector(model.parameters()).detach().clone(), check.parameters())
print("weights copied:", torch.equal(parameters_to_vector(check.parameters()),
                                     parameters_to_vector(model.parameters())))

# tensors from raw bytes and zero-copy views
raw = bytearray(np.arange(6, dtype=np.float32).tobytes())
t = torch.frombuffer(raw, dtype=torch.float32)
t[0] = 42.0
print("frombuffer shares memory:", np.frombuffer(raw, dtype=np.float32)[0] == 42.0, t.shape,
      "offset view", torch.frombuffer(raw, dtype=torch.float32, count=2, offset=8).tolist())
a = np.arange(4.0)
ta = torch.asarray(a)
a[0] = -1.0
print("asarray shares:", ta[0].item(), ta.dtype, "copy=True:",
      torch.asarray(a, copy=True).data_ptr() != ta.data_ptr(),
      "dtype cast:", torch.asarray([1, 2], dtype=torch.float32).tolist())
w = model[0].weight.detach()
view = np.asarray(w)
dl = np.from_dlpack(w)
print("numpy views share:", np.shares_memory(view, dl), view.dtype, dl.shape)
with torch.no_grad():
    acc = (model(X).argmax(1) == Y).float().mean().item()
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
