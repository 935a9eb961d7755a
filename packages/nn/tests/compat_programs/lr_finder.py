"""A learning-rate range test in the style of the public `torch-lr-finder` package and fastai's
lr_find: the model and optimizer states are saved with copy.deepcopy(state_dict()), an
exponential schedule written as an LRScheduler subclass (get_lr from self.last_epoch and
self.base_lrs), a cycling iterator over a DataLoader(TensorDataset, drop_last=True), smoothed
losses by an exponential moving average with bias correction, early stop once the loss
diverges past 5x the best, the suggestion at the steepest descent of the smoothed curve
(np.gradient), and the states restored (load_state_dict) before the real run with OneCycleLR
whose max_lr is the suggestion. A deliberately too-large constant rate is shown to diverge for
contrast. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <suggested lr> <one-cycle final loss> <test accuracy>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LRScheduler, OneCycleLR
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(143)

centers = rng.normal(0, 2.0, size=(4, 8))
y_np = rng.integers(0, 4, 1200)
x_np = centers[y_np] + rng.normal(size=(1200, 8))
X = torch.from_numpy(x_np.astype(np.float32))
Y = torch.from_numpy(y_np)
train_loader = DataLoader(TensorDataset(X[:1000], Y[:1000]), batch_size=50, shuffle=False, drop_last=True)
xte, yte = X[1000:], Y[1000:]

model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]) if p.dim() > 1 else 0.0, p.shape)
                                 .astype(np.float32)))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9)


class ExponentialLR(LRScheduler):
    """Raises the learning rate exponentially from the base rate to end_lr over num_iter steps."""

    def __init__(self, optimizer, end_lr, num_iter, last_epoch=-1):
        self.end_lr = end_lr
        self.num_iter = num_iter
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        r = self.last_epoch / (self.num_iter - 1)
        return [base_lr * (self.end_lr / base_lr) ** r for base_lr in self.base_lrs]


class DataLoaderIter:
    def __init__(self, loader):
        self.loader = loader
        self._it = iter(loader)

    def __next__(self):
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self.loader)
            return next(self._it)


class LRFinder:
    def __init__(self, model, optimizer, criterion):
        self.model, self.optimizer, self.criterion = model, optimizer, criterion
        self.state = {"model": copy.deepcopy(model.state_dict()), "optimizer": copy.deepcopy(optimizer.state_dict())}
        self.history = {"lr": [], "loss": []}

    def reset(self):
        self.model.load_state_dict(self.state["model"])
        self.optimizer.load_state_dict(self.state["optimizer"])

    def range_test(self, loader, end_lr=10.0, num_iter=100, smooth_f=0.05, diverge_th=5.0):
        sched = ExponentialLR(self.optimizer, end_lr, num_iter)
        it = DataLoaderIter(loader)
        best, avg = None, 0.0
        for i in range(num_iter):
            x, y = next(it)
            self.model.train()
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self.history["lr"].append(sched.get_last_lr()[0])
            sched.step()
            avg = smooth_f * loss.item() + (1 - smooth_f) * avg
            smoothed = avg / (1 - (1 - smooth_f) ** (i + 1))
            self.history["loss"].append(smoothed)
            if best is None or smoothed < best:
                best = smoothed
            if smoothed > diverge_th * best or not np.isfinite(smoothed):
                return i
        return num_iter

    def suggestion(self, skip_start=5, skip_end=3):
        lrs = np.array(self.history["lr"][skip_start:-skip_end])
        losses = np.array(self.history["loss"][skip_start:-skip_end])
        i = int(np.gradient(losses, np.log10(lrs)).argmin())
        return float(lrs[i])


finder = LRFinder(model, optimizer, nn.CrossEntropyLoss())
w_before = model[0].weight.detach().clone()
stopped = finder.range_test(train_loader, end_lr=100.0, num_iter=100)
lr_s = finder.suggestion()
print(f"range test stopped at iteration {stopped} of 100, lr then {finder.history['lr'][-1]:.4g}")
print(f"loss at lr {finder.history['lr'][10]:.3g}: {finder.history['loss'][10]:.4f}, "
      f"minimum smoothed loss {min(finder.history['loss']):.4f}")
print(f"suggested lr {lr_s:.4g}")
finder.reset()
print(f"weights restored: {torch.equal(model[0].weight, w_before)} "
      f"optimizer lr restored: {optimizer.param_groups[0]['lr']} momentum buffers: {len(optimizer.state)}")


def fit(model, optimizer, scheduler=None, epochs=3):
    losses = []
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            losses.append(loss.item())
    return losses


too_big = copy.deepcopy(model)
opt_big = torch.optim.SGD(too_big.parameters(), lr=finder.history["lr"][-1], momentum=0.9)
big = fit(too_big, opt_big, epochs=1)
print(f"constant lr {finder.history['lr'][-1]:.3g}: diverges {max(big[-5:]) > 2 * big[0]} (start {big[0]:.3f})")

optimizer = torch.optim.SGD(model.parameters(), lr=lr_s, momentum=0.9)
sched = OneCycleLR(optimizer, max_lr=lr_s, epochs=3, steps_per_epoch=len(train_loader))
losses = fit(model, optimizer, sched)
with torch.no_grad():
    acc = (model(xte).argmax(1) == yte).float().mean().item()
print(f"one-cycle: first {losses[0]:.4f} last {losses[-1]:.4f} final lr {sched.get_last_lr()[0]:.3g}")
print(f"RESULT {lr_s:.4g} {np.mean(losses[-5:]):.4f} {acc:.4f}")
