"""Weight averaging as training scripts use it: an exponential moving average of the weights with
torch.optim.swa_utils.AveragedModel(multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True),
stochastic weight averaging with a plain AveragedModel, SWALR annealing after a CosineAnnealingLR
phase, update_bn recomputing BatchNorm statistics over a DataLoader, the averaged model's
n_averaged counter and state_dict keys, a custom avg_fn, and the EMA checked by hand. Batches in
order and no dropout: from the same initial weights (``--save-init``/``--init-from``) the numbers
agree with torch's. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import SWALR, AveragedModel, get_ema_multi_avg_fn, update_bn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--swa-start", type=int, default=6)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)

rng = np.random.default_rng(0)
x_np = rng.normal(0, 1, (320, 8)).astype(np.float32)
y_np = (np.sin(x_np[:, 0] * 2) + x_np[:, 1] * x_np[:, 2] > 0).astype(np.int64)
x_all, y_all = torch.from_numpy(x_np), torch.from_numpy(y_np)
train_ds = TensorDataset(x_all[:256], y_all[:256])
loader = DataLoader(train_ds, batch_size=32, shuffle=False)
x_test, y_test = x_all[256:], y_all[256:]

model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 32),
                      nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2))
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})

ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
swa_model = AveragedModel(model)
print("averaged model keys:", [k for k in swa_model.state_dict() if not k.startswith("module.")],
      len(swa_model.state_dict()))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.swa_start)
swa_scheduler = SWALR(optimizer, swa_lr=0.02, anneal_epochs=2, anneal_strategy="cos")

# the EMA by hand, for the first parameter
manual = model[0].weight.detach().clone()


def accuracy(m):
    m.eval()
    with torch.no_grad():
        acc = (m(x_test).argmax(1) == y_test).float().mean().item()
        loss = F.cross_entropy(m(x_test), y_test).item()
    return loss, acc


for epoch in range(args.epochs):
    model.train()
    for xb, yb in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
        ema_model.update_parameters(model)
        manual = 0.9 * manual + 0.1 * model[0].weight.detach()
    if epoch >= args.swa_start:
        swa_model.update_parameters(model)
        swa_scheduler.step()
    else:
        scheduler.step()
    loss, acc = accuracy(model)
    print(f"epoch {epoch}: lr {optimizer.param_groups[0]['lr']:.5f} test loss {loss:.4f} "
          f"acc {acc:.3f}")

print(f"EMA by hand matches: {torch.allclose(ema_model.module[0].weight, manual, atol=1e-5)}; "
      f"n_averaged {ema_model.n_averaged.item()} / swa {swa_model.n_averaged.item()}")
bn = swa_model.module[1]
before = bn.running_mean.clone()
update_bn(loader, swa_model)
print(f"update_bn changed the running mean: {not torch.allclose(before, bn.running_mean)}; "
      f"momentum restored {bn.momentum}; batches tracked {bn.num_batches_tracked.item()}")
# update_bn's statistics are the plain mean over the data of the averaged layer's input
with torch.no_grad():
    h = swa_model.module[0](x_all[:256])
print(f"running mean is the data mean: {torch.allclose(bn.running_mean, h.mean(0), atol=1e-5)}")
swa_loss, swa_acc = accuracy(swa_model)
ema_loss, ema_acc = accuracy(ema_model)
print(f"SWA test loss {swa_loss:.4f} acc {swa_acc:.3f}; EMA test loss {ema_loss:.4f} acc "
      f"{ema_acc:.3f}")

# a custom averaging function: the running maximum of each parameter
maxed = AveragedModel(model, avg_fn=lambda avg, new, n: torch.maximum(avg, new))
with torch.no_grad():
    for p in model.parameters():
        p.add_(1.0)
maxed.update_parameters(model)
print(f"custom avg_fn: {torch.equal(maxed.module[0].weight, model[0].weight)}")
print(f"RESULT {loss:.6f} {swa_loss:.6f} {ema_loss:.6f}")
