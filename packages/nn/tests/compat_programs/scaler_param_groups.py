"""A fine-tuning loop with loss scaling, parameter groups and chained schedulers, in the style of
the public transfer-learning recipes: a backbone / head split into optimizer parameter groups
(different lr and weight_decay, no decay on biases and norms), torch.amp.GradScaler("cpu") with
a small init_scale and growth_interval (its scale after skipped and successful steps, an injected
inf gradient making scaler.step skip the optimizer step, scaler.unscale_ before
clip_grad_norm_, scaler.state_dict / load_state_dict), SequentialLR over LinearLR warmup and
CosineAnnealingLR (per-group learning rates printed each epoch), ReduceLROnPlateau on a
validation metric afterwards, the optimizer's param_groups keys (defaults such as maximize /
foreach / capturable / differentiable / fused) and state_dict layout (state indices, step as a
tensor), add_param_group for an unfrozen layer mid-run, and an optimizer / scaler resumed from a
torch.save'd checkpoint (weights_only=True) reproducing the next step exactly. Weights and data from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first loss> <last loss> <final scale>."""

import copy
import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(47)


def arr(*shape, s=1.0):
    return torch.from_numpy(rng.normal(0, s, shape).astype(np.float32))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(10, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.extra = nn.Linear(32, 32)
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.backbone(x) + 0.1 * self.extra(self.backbone(x)))


net = Net()
with torch.no_grad():
    for name, p in net.named_parameters():
        if "1." not in name[:11]:
            p.copy_(arr(*p.shape, s=0.3))
X, Y = arr(96, 10), torch.from_numpy(rng.integers(0, 3, 96))
Xv, Yv = arr(48, 10), torch.from_numpy(rng.integers(0, 3, 48))
net.extra.requires_grad_(False)

decay, no_decay = [], []
for name, p in net.backbone.named_parameters():
    (no_decay if p.ndim == 1 else decay).append(p)
groups = [{"params": decay, "lr": 1e-3, "weight_decay": 0.01},
          {"params": no_decay, "lr": 1e-3, "weight_decay": 0.0},
          {"params": net.head.parameters(), "lr": 1e-2}]
opt = torch.optim.AdamW(groups, lr=5e-3, weight_decay=0.05)
print("group sizes", [len(g["params"]) for g in opt.param_groups], "head wd", opt.param_groups[2]["weight_decay"])
print("param_group keys", sorted(opt.param_groups[0].keys()))
warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=1e-5)
sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[warm, cos], milestones=[3])
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_factor=2.0, backoff_factor=0.5,
                              growth_interval=3)
print("scaler enabled", scaler.is_enabled(), "scale", scaler.get_scale(), "keys", sorted(scaler.state_dict()))


def train_epoch(epoch, inject_inf=False):
    tot = 0.0
    for b in range(3):
        xb, yb = X[b * 32:(b + 1) * 32], Y[b * 32:(b + 1) * 32]
        loss = F.cross_entropy(net(xb), yb)
        opt.zero_grad()
        scaler.scale(loss).backward()
        if inject_inf and b == 1:
            net.head.weight.grad[0, 0] = float("inf")
        scaler.unscale_(opt)
        norm = nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
        before = net.head.bias.detach().clone()
        scaler.step(opt)
        scaler.update()
        skipped = torch.equal(before, net.head.bias)
        tot += loss.item()
        if inject_inf and b == 1:
            print(f"  injected inf: norm {norm.item()} step skipped {skipped} scale now {scaler.get_scale()}")
    return tot / 3


losses = []
for epoch in range(9):
    if epoch == 5:
        net.extra.requires_grad_(True)
        opt.add_param_group({"params": net.extra.parameters(), "lr": 2e-4})
        print("added group:", len(opt.param_groups), sorted(k for k in opt.param_groups[3] if k != "params"))
    loss = train_epoch(epoch, inject_inf=(epoch == 2))
    losses.append(loss)
    if epoch < 8:
        sched.step()
    print(f"epoch {epoch} loss {loss:.5f} scale {scaler.get_scale()} lrs {[f'{v:.6f}' for v in sched.get_last_lr()]}")

sd = opt.state_dict()
print("state indices", sorted(sd["state"])[:4], "...", len(sd["state"]), "step", sd["state"][0]["step"],
      "state keys", sorted(sd["state"][0]))
print("saved group params", [g["params"] for g in sd["param_groups"]][:2])

# resume: copies of everything continue identically
net2 = copy.deepcopy(net)
opt2 = torch.optim.AdamW([{"params": [p for n, p in net2.backbone.named_parameters() if p.ndim != 1],
                           "lr": 1e-3, "weight_decay": 0.01},
                          {"params": [p for n, p in net2.backbone.named_parameters() if p.ndim == 1],
                           "lr": 1e-3, "weight_decay": 0.0},
                          {"params": net2.head.parameters(), "lr": 1e-2},
                          {"params": net2.extra.parameters(), "lr": 2e-4}], lr=5e-3, weight_decay=0.05)
buf = io.BytesIO()
torch.save({"opt": opt.state_dict(), "scaler": scaler.state_dict()}, buf)
buf.seek(0)
ckpt = torch.load(buf, weights_only=True)
opt2.load_state_dict(ckpt["opt"])
scaler2 = torch.amp.GradScaler("cpu")
scaler2.load_state_dict(ckpt["scaler"])
print("scaler resumed scale", scaler2.get_scale(), "growth tracker", scaler2.state_dict()["_growth_tracker"])
for o, s_, m in ((opt, scaler, net), (opt2, scaler2, net2)):
    loss = F.cross_entropy(m(X[:32]), Y[:32])
    o.zero_grad()
    s_.scale(loss).backward()
    s_.step(o)
    s_.update()
print("resumed step identical:", all(torch.equal(a, b) for a, b in zip(net.parameters(), net2.parameters())))

plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1, threshold=1e-3,
                                                     min_lr=[1e-6, 1e-6, 1e-5, 1e-6])
for k in range(5):
    with torch.no_grad():
        val = F.cross_entropy(net(Xv), Yv).item()
    plateau.step(1.0)  # a flat metric: reduce after patience
    lrs = [f"{g['lr']:.2e}" for g in opt.param_groups]
    print(f"plateau {k}: val {val:.5f} lrs {lrs} bad epochs {plateau.num_bad_epochs}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {scaler.get_scale()}")
