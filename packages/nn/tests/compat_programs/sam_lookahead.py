"""Sharpness-aware minimization and Lookahead as optimizer wrappers, in the style of the public
`sam.py` (davda54/sam) and Lookahead reference code: a torch.optim.Optimizer subclass that
builds its base optimizer from the shared param_groups, first_step (e_w = rho / (||g|| + eps)
times g, or the adaptive ASAM variant with p^2 g, kept in self.state[p]["old_p"]) and
second_step (restore, then base step) under @torch.no_grad(), a closure wrapped in
torch.enable_grad(), the grad norm by torch.norm(torch.stack([...]), p=2), BatchNorm momentum
switched off for the second pass (a backup_momentum attribute set through model.apply), and
load_state_dict / state_dict round trips. Lookahead keeps slow weights in a separate state and
interpolates every k steps. Compared with plain SGD by test accuracy and a sharpness probe (the
loss increase under an adversarial weight perturbation of radius rho). Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <SGD sharpness> <SAM sharpness> <SAM test accuracy>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

rng = np.random.default_rng(142)


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"
        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super().__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data = self.state[p]["old_p"]
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def step(self, closure=None):
        assert closure is not None, "Sharpness Aware Minimization requires closure, but it was not provided"
        closure = torch.enable_grad()(closure)
        self.first_step(zero_grad=True)
        closure()
        self.second_step()

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device
        return torch.norm(torch.stack([
            ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
            for group in self.param_groups for p in group["params"] if p.grad is not None]), p=2)

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.base_optimizer.param_groups = self.param_groups


class Lookahead:
    def __init__(self, optimizer, k=5, alpha=0.5):
        self.optimizer, self.k, self.alpha = optimizer, k, alpha
        self.param_groups = optimizer.param_groups
        self.slow = [[p.detach().clone() for p in g["params"]] for g in self.param_groups]
        self.counter = 0

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self):
        self.optimizer.step()
        self.counter += 1
        if self.counter % self.k == 0:
            for group, slow in zip(self.param_groups, self.slow):
                for p, q in zip(group["params"], slow):
                    q.add_(p - q, alpha=self.alpha)
                    p.copy_(q)


def disable_running_stats(model):
    def _disable(module):
        if isinstance(module, _BatchNorm):
            module.backup_momentum = module.momentum
            module.momentum = 0

    model.apply(_disable)


def enable_running_stats(model):
    def _enable(module):
        if isinstance(module, _BatchNorm) and hasattr(module, "backup_momentum"):
            module.momentum = module.backup_momentum

    model.apply(_enable)


def data(n):
    x = rng.normal(size=(n, 10)).astype(np.float32)
    w = np.linspace(-1, 1, 10).astype(np.float32)
    y = ((x @ w + 0.5 * np.sin(3 * x[:, 0]) + 0.3 * rng.normal(size=n)) > 0).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


xtr, ytr = data(128)
xte, yte = data(1000)
net0 = nn.Sequential(nn.Linear(10, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
with torch.no_grad():
    for p in net0.parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, np.sqrt(2 / p.shape[1]), p.shape).astype(np.float32)))
        else:
            p.fill_(0.0 if p is not net0[1].weight else 1.0)
batches = [rng.permutation(128)[:32] for _ in range(120)]


def sharpness(model, rho=0.05):
    model.eval()
    m = copy.deepcopy(model)
    loss = F.cross_entropy(m(xtr), ytr)
    grads = torch.autograd.grad(loss, list(m.parameters()))
    norm = torch.sqrt(sum((g ** 2).sum() for g in grads))
    with torch.no_grad():
        for p, g in zip(m.parameters(), grads):
            p.add_(rho * g / norm)
        return F.cross_entropy(m(xtr), ytr).item() - loss.item()


def accuracy(model):
    model.eval()
    with torch.no_grad():
        return (model(xte).argmax(1) == yte).float().mean().item()


def train(kind):
    model = copy.deepcopy(net0)
    if kind == "sam":
        opt = SAM(model.parameters(), torch.optim.SGD, rho=0.1, lr=0.1, momentum=0.9)
    elif kind == "asam":
        opt = SAM(model.parameters(), torch.optim.SGD, rho=0.5, adaptive=True, lr=0.1, momentum=0.9)
    elif kind == "lookahead":
        opt = Lookahead(torch.optim.Adam(model.parameters(), lr=3e-3), k=5, alpha=0.5)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for idx in batches:
        model.train()
        x, y = xtr[idx], ytr[idx]
        if kind in ("sam", "asam"):
            enable_running_stats(model)
            F.cross_entropy(model(x), y).backward()
            opt.first_step(zero_grad=True)
            disable_running_stats(model)
            F.cross_entropy(model(x), y).backward()
            opt.second_step(zero_grad=True)
        else:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        train_loss = F.cross_entropy(model(xtr), ytr).item()
    return model, opt, train_loss


results = {}
for kind in ("sgd", "sam", "asam", "lookahead"):
    model, opt, tl = train(kind)
    results[kind] = (sharpness(model), accuracy(model))
    print(f"{kind:9s} train loss {tl:.4f} sharpness {results[kind][0]:.5f} test accuracy {results[kind][1]:.4f}")

# the closure form and a state_dict round trip
model = copy.deepcopy(net0)
opt = SAM(model.parameters(), torch.optim.SGD, rho=0.1, lr=0.1, momentum=0.9)


def closure():
    loss = F.cross_entropy(model(xtr[:32]), ytr[:32])
    loss.backward()
    return loss


F.cross_entropy(model(xtr[:32]), ytr[:32]).backward()
opt.step(closure)
sd = opt.state_dict()
opt2 = SAM(copy.deepcopy(model).parameters(), torch.optim.SGD, rho=0.1, lr=0.1, momentum=0.9)
opt2.load_state_dict(sd)
print(f"closure step ok, groups share base: {opt2.base_optimizer.param_groups is opt2.param_groups} "
      f"state keys {sorted(next(iter(sd['state'].values())).keys())} rho {sd['param_groups'][0]['rho']}")
print(f"bn momentum restored: {model[1].momentum}")
print(f"RESULT {results['sgd'][0]:.5f} {results['sam'][0]:.5f} {results['sam'][1]:.4f}")
