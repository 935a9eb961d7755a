"""A distributed training script run as a single process, as DDP scripts are run on one
machine for debugging and in CI: torch.distributed.init_process_group("gloo") with a file://
init_method, rank 0 of world_size 1 (is_available / is_initialized / get_rank / get_world_size /
get_backend), the model wrapped in nn.parallel.DistributedDataParallel (its .module, state_dict
keys under "module.", find_unused_parameters), a DataLoader over a DistributedSampler with
set_epoch, no_sync() for gradient accumulation, all_reduce of a loss tensor (SUM and AVG),
broadcast / all_gather / all_gather_object / broadcast_object_list / reduce / barrier,
a new_group, the checkpoint saved from rank 0 with the "module." prefix stripped, and
destroy_process_group; the trained weights equal a plain single-process run's. Data and
weights from NumPy: the numbers are the same on both libraries. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <ddp == plain>."""

import io
import os
import shutil
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

rng = np.random.default_rng(21)
X = torch.from_numpy(rng.normal(size=(64, 6)).astype(np.float32))
y = torch.from_numpy((X[:, 0] - X[:, 3] > 0).numpy().astype(np.int64))
W = [rng.normal(0, 0.4, (16, 6)), np.zeros(16), rng.normal(0, 0.3, (2, 16)), np.zeros(2)]


def make():
    m = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
    with torch.no_grad():
        for p, w in zip(m.parameters(), W):
            p.copy_(torch.tensor(w, dtype=torch.float32))
    return m


def train(model, loader, sampler=None, accum=2):
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    losses = []
    for epoch in range(3):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            last = (i + 1) % accum == 0
            ctx = model.no_sync() if isinstance(model, DDP) and not last else _null()
            with ctx:
                loss = F.cross_entropy(model(xb), yb) / accum
                loss.backward()
            if last:
                opt.step()
                opt.zero_grad()
            losses.append(loss.item() * accum)
    return losses


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


print("distributed available:", dist.is_available(), "initialized:", dist.is_initialized())
tmp = tempfile.mkdtemp()
dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "store"), rank=0,
                        world_size=1)
print("initialized:", dist.is_initialized(), "rank", dist.get_rank(), "world",
      dist.get_world_size(), "backend", dist.get_backend())

ds = TensorDataset(X, y)
sampler = DistributedSampler(ds, num_replicas=dist.get_world_size(), rank=dist.get_rank(),
                             shuffle=False)
loader = DataLoader(ds, batch_size=8, sampler=sampler)
ddp = DDP(make(), find_unused_parameters=False)
print("wrapped:", type(ddp.module).__name__, "keys", list(ddp.state_dict().keys())[:2])
ddp_losses = train(ddp, loader, sampler)
plain = make()
plain_losses = train(plain, DataLoader(ds, batch_size=8, shuffle=False))
same = all(torch.allclose(a, b, atol=1e-6) for a, b in zip(ddp.module.parameters(),
                                                           plain.parameters()))
print("losses", [round(v, 5) for v in ddp_losses[::6]])
print("ddp == plain:", same, "losses equal:", np.allclose(ddp_losses, plain_losses, atol=1e-6))

# collectives on one rank
t = torch.tensor([ddp_losses[-1], 2.0])
dist.all_reduce(t, op=dist.ReduceOp.SUM)
avg = torch.tensor([4.0, 6.0])
dist.all_reduce(avg, op=dist.ReduceOp.AVG)
print("all_reduce sum", [round(v, 5) for v in t.tolist()], "avg", avg.tolist())
b = torch.arange(3.0) if dist.get_rank() == 0 else torch.zeros(3)
dist.broadcast(b, src=0)
gathered = [torch.zeros(2) for _ in range(dist.get_world_size())]
dist.all_gather(gathered, torch.tensor([1.0, 2.0]))
objs = [None] * dist.get_world_size()
dist.all_gather_object(objs, {"rank": dist.get_rank(), "loss": round(ddp_losses[-1], 4)})
lst = [{"lr": 0.2}] if dist.get_rank() == 0 else [None]
dist.broadcast_object_list(lst, src=0)
r = torch.tensor([5.0])
dist.reduce(r, dst=0)
dist.barrier()
grp = dist.new_group(ranks=[0])
g = torch.tensor([3.0])
dist.all_reduce(g, group=grp)
print("broadcast", b.tolist(), "all_gather", [x.tolist() for x in gathered],
      "objects", objs == [{"rank": 0, "loss": round(ddp_losses[-1], 4)}], lst, "reduce",
      r.tolist(), "group", g.tolist())

# rank 0 saves a checkpoint without the DDP prefix
if dist.get_rank() == 0:
    buf = io.BytesIO()
    sd = {k.removeprefix("module."): v for k, v in ddp.state_dict().items()}
    torch.save(sd, buf)
    buf.seek(0)
    fresh = make()
    fresh.load_state_dict(torch.load(buf))
    print("checkpoint keys", list(sd.keys()), "reloaded == trained:",
          torch.allclose(fresh(X), ddp(X), atol=1e-6))
dist.destroy_process_group()
shutil.rmtree(tmp, ignore_errors=True)
print("initialized after destroy:", dist.is_initialized())
print(f"RESULT {ddp_losses[0]:.5f} {np.mean(ddp_losses[-8:]):.5f} {int(same)}")
