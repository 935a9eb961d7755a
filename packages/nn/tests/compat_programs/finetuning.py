"""Transfer learning, in the style of the public PyTorch fine-tuning tutorials: a small CNN
"backbone" pretrained here on one task, saved, and reloaded into a new model with
load_state_dict(strict=False) (missing/unexpected keys reported); the backbone frozen with
requires_grad_(False) and BatchNorm kept in eval mode, a new head trained with its own
parameter group and learning rate, then everything unfrozen with a lower backbone lr;
forward hooks extracting features, named_modules / children walks, copy.deepcopy of the best
model, parameters_to_vector, a CosineAnnealingLR schedule and torch.manual_seed
reproducibility. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <pretrain acc> <head-only acc> <finetuned acc>."""

import copy
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(7)
SIDE = 10


def make_task(n, seed, kind):
    """Images with a bright square: kind 'pos' labels its quadrant (4 classes), kind 'size'
    labels whether it is large (2 classes)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.3, (n, 1, SIDE, SIDE)).astype(np.float32)
    y = np.zeros(n, dtype=np.int64)
    for i in range(n):
        big = rng.random() < 0.5
        s = 4 if big else 2
        r, c = rng.integers(0, SIDE - s + 1, size=2)
        x[i, 0, r:r + s, c:c + s] += 1.5
        if kind == "pos":
            y[i] = int(r + s / 2 >= SIDE / 2) * 2 + int(c + s / 2 >= SIDE / 2)
        else:
            y[i] = int(big)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((2, 2)),
        )
        self.fc = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def run_epoch(model, loader, optimizer=None):
    training = optimizer is not None
    model.train(training)
    if training and getattr(model, "frozen", False):
        model.features.eval()  # frozen BatchNorm keeps its running statistics
    correct, total, loss_sum = 0, 0, 0.0
    with torch.set_grad_enabled(training):
        for x, y in loader:
            out = model(x)
            loss = F.cross_entropy(out, y)
            if training:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            loss_sum += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
    return loss_sum / total, correct / total


# ---- pretraining on the quadrant task ----
pre_train = DataLoader(make_task(256, 0, "pos"), batch_size=32, shuffle=True)
pre_val = DataLoader(make_task(128, 1, "pos"), batch_size=64)
backbone = Backbone()
opt = torch.optim.Adam(backbone.parameters(), lr=0.01)
for epoch in range(4):
    run_epoch(backbone, pre_train, opt)
_, pre_acc = run_epoch(backbone, pre_val)
print(f"pretrained quadrant accuracy {pre_acc:.3f}")
ckpt = os.path.join(tempfile.mkdtemp(), "backbone.pth")
torch.save(backbone.state_dict(), ckpt)


# ---- fine-tuning on the size task ----
class FineTuned(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = Backbone().features
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 2))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


model = FineTuned()
result = model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True),
                               strict=False)
print("missing keys:", sorted(result.missing_keys))
print("unexpected keys:", sorted(result.unexpected_keys))
assert torch.equal(model.features[0].weight, backbone.features[0].weight)
try:
    model.load_state_dict(torch.load(ckpt, weights_only=True))
except RuntimeError as e:
    print("strict load refused:", "Missing key(s)" in str(e) and "Unexpected key(s)" in str(e))

for p in model.features.parameters():
    p.requires_grad_(False)
model.frozen = True
n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
n_all = sum(p.numel() for p in model.parameters())
print(f"trainable parameters: {n_train} of {n_all}")
print("modules:", [name for name, _ in model.named_modules()][:6])
print("children:", [type(m).__name__ for m in model.children()])

feats = {}
handle = model.features[-1].register_forward_hook(
    lambda module, inputs, output: feats.__setitem__("pooled", output.detach()))

ft_train = DataLoader(make_task(256, 2, "size"), batch_size=32, shuffle=True)
ft_val = DataLoader(make_task(128, 3, "size"), batch_size=64)
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
before = nn.utils.parameters_to_vector(model.features.parameters()).clone()
running_mean = model.features[1].running_mean.clone()
for epoch in range(4):
    run_epoch(model, ft_train, opt)
_, head_acc = run_epoch(model, ft_val)
assert torch.equal(nn.utils.parameters_to_vector(model.features.parameters()), before)
assert torch.equal(model.features[1].running_mean, running_mean)  # BN stayed in eval
assert feats["pooled"].shape[1:] == (16, 2, 2)
print(f"head-only accuracy {head_acc:.3f}")

# unfreeze, with a lower learning rate for the backbone
model.frozen = False
for p in model.parameters():
    p.requires_grad = True
opt = torch.optim.SGD([
    {"params": model.features.parameters(), "lr": 0.01},
    {"params": model.classifier.parameters()},
], lr=0.05, momentum=0.9)
print("group lrs:", [g["lr"] for g in opt.param_groups])
scheduler = lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.001)
best_acc, best = 0.0, None
for epoch in range(4):
    run_epoch(model, ft_train, opt)
    scheduler.step()
    _, acc = run_epoch(model, ft_val)
    if acc >= best_acc:
        best_acc, best = acc, copy.deepcopy(model.state_dict())
    print(f"epoch {epoch}: accuracy {acc:.3f}, lrs "
          f"{', '.join(f'{lr:.4f}' for lr in scheduler.get_last_lr())}")
handle.remove()
feats.clear()
model.load_state_dict(best)
_, final_acc = run_epoch(model, ft_val)
assert not feats  # the hook is gone
assert final_acc == best_acc
twin = copy.deepcopy(model)
assert twin.features[0].weight is not model.features[0].weight
assert torch.equal(twin.features[0].weight, model.features[0].weight)
print(f"RESULT {pre_acc:.4f} {head_acc:.4f} {final_acc:.4f}")
sys.stdout.flush()
