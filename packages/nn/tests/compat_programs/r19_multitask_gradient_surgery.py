"""Multi-task learning with gradient manipulation, in the style of the public PCGrad / GradNorm /
uncertainty-weighting PyTorch code: a shared trunk with two heads (regression + classification),
per-task gradients from torch.autograd.grad(retain_graph=True, allow_unused=True,
materialize_grads=True), flattened with nn.utils.parameters_to_vector-like torch.cat of views,
PCGrad's projection of conflicting gradients (torch.dot, a cosine-similarity log), the combined
gradient written back into .grad through torch.split + view_as, GradNorm's learnable task
weights trained on the gradient-norm gap at the last shared layer (create_graph=True, a detached
target, renormalization to the task count under torch.no_grad), homoscedastic uncertainty
weighting with log-variance parameters, nn.utils.vector_to_parameters round trips, a
logging optimizer step pre-hook, and a checkpoint helper that falls back to the state_dict
when torch.save of the module raises pickle's error (a lambda forward hook). Weights
and data from NumPy. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import io
import pickle

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

rng = np.random.default_rng(21)
X = torch.from_numpy(rng.normal(size=(256, 8)).astype(np.float32))
w_true = torch.from_numpy(rng.normal(size=(8,)).astype(np.float32))
Y_reg = (X @ w_true + 0.1 * torch.from_numpy(rng.normal(size=256).astype(np.float32))).unsqueeze(1)
Y_cls = ((X[:, 0] - X[:, 1] * X[:, 2]) > 0).long()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.reg = nn.Linear(32, 1)
        self.cls = nn.Linear(32, 2)
        self.unused = nn.Linear(2, 2)  # never used: its gradient is materialized as zeros

    def forward(self, x):
        h = self.trunk(x)
        return self.reg(h), self.cls(h)


def fresh():
    torch.manual_seed(0)
    net = Net()
    r = np.random.default_rng(0)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.3, size=tuple(p.shape)).astype(np.float32)))
    return net


def task_losses(net, idx):
    out_r, out_c = net(X[idx])
    return [F.mse_loss(out_r, Y_reg[idx]), F.cross_entropy(out_c, Y_cls[idx])]


def flat_grad(loss, params):
    gs = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True, materialize_grads=True)
    return torch.cat([g.reshape(-1) for g in gs])


def write_grad(params, vec):
    for p, g in zip(params, torch.split(vec, [p.numel() for p in params])):
        p.grad = g.view_as(p).clone()


# round trip of the flat parameter vector
net = fresh()
params = list(net.parameters())
vec = parameters_to_vector(params)
vector_to_parameters(vec * 2, params)
print("vector round trip", torch.allclose(parameters_to_vector(params), vec * 2), vec.numel())

results = {}
for method in ("sum", "pcgrad", "gradnorm", "uncertainty"):
    net = fresh()
    params = list(net.parameters())
    task_w = torch.ones(2, requires_grad=True)
    log_vars = torch.zeros(2, requires_grad=True)
    extra = [task_w] if method == "gradnorm" else [log_vars] if method == "uncertainty" else []
    opt = torch.optim.Adam(params + ([log_vars] if method == "uncertainty" else []), lr=0.01)
    w_opt = torch.optim.Adam([task_w], lr=0.02) if method == "gradnorm" else None
    conflicts, first, l0 = 0, None, None
    seen_args = []
    # a logging pre-hook: PyTorch passes step's positional arguments with the optimizer first
    opt.register_step_pre_hook(lambda o, args, kwargs: seen_args.append((len(args), args[0] is o)))
    for step in range(60):
        idx = torch.arange(step * 32, step * 32 + 32) % 256
        losses = task_losses(net, idx)
        total = sum(losses)
        if first is None:
            first = total.item()
        opt.zero_grad()
        if method == "sum":
            total.backward()
        elif method == "pcgrad":
            g = [flat_grad(li, params) for li in losses]
            out = []
            for i in range(2):
                gi = g[i].clone()
                gj = g[1 - i]
                d = torch.dot(gi, gj)
                if d < 0:
                    conflicts += 1
                    gi = gi - d / gj.dot(gj) * gj
                out.append(gi)
            write_grad(params, out[0] + out[1])
        elif method == "gradnorm":
            shared = net.trunk[2].weight
            if l0 is None:
                l0 = torch.stack([li.detach() for li in losses])
            norms = torch.stack([torch.autograd.grad(task_w[i] * losses[i], shared, retain_graph=True, create_graph=True)[0].norm()
                                 for i in range(2)])
            ratio = torch.stack([li.detach() for li in losses]) / l0
            target = (norms.mean() * (ratio / ratio.mean()) ** 1.5).detach()
            gn_loss = (norms - target).abs().sum()
            weighted = (task_w * torch.stack(losses)).sum()
            w_opt.zero_grad()
            task_w.grad = torch.autograd.grad(gn_loss, task_w, retain_graph=True)[0]
            weighted.backward()
            w_opt.step()
            with torch.no_grad():
                task_w.mul_(2 / task_w.sum())
        else:
            prec = torch.exp(-log_vars)
            (prec[0] * losses[0] + prec[1] * losses[1] + log_vars.sum()).backward()
        opt.step()
    with torch.no_grad():
        out_r, out_c = net(X)
        mse = F.mse_loss(out_r, Y_reg).item()
        acc = (out_c.argmax(1) == Y_cls).float().mean().item()
    results[method] = (first, total.item(), acc)
    msg = f"{method:11s} first {first:.5f} last {total.item():.5f} mse {mse:.5f} acc {acc:.4f}"
    if method == "pcgrad":
        msg += f" conflicts {conflicts}"
    if method == "gradnorm":
        msg += f" weights {[round(v, 4) for v in task_w.tolist()]}"
    if method == "uncertainty":
        msg += f" sigma {[round(v, 4) for v in torch.exp(0.5 * log_vars).tolist()]}"
    print(msg)
    print("  step hook args", seen_args[0], "calls", len(seen_args))
    unused_g = torch.autograd.grad(task_losses(net, torch.arange(8))[0], net.unused.weight, allow_unused=True)
    print("  unused grad", unused_g[0], "materialized", flat_grad(task_losses(net, torch.arange(8))[0], [net.unused.weight]).abs().sum().item())
# a checkpoint helper: the whole module if it pickles, else its state_dict
net.register_forward_hook(lambda mod, inp, out: None)  # a lambda hook does not pickle
buf = io.BytesIO()
try:
    torch.save(net, buf)
    kind = "module"
except (pickle.PicklingError, AttributeError) as exc:
    kind = f"state_dict ({type(exc).__name__} caught)"
    buf = io.BytesIO()
    torch.save(net.state_dict(), buf)
buf.seek(0)
restored = fresh()
restored.load_state_dict(torch.load(buf))
print("checkpoint saved as", kind, "restored equal", torch.equal(restored.cls.weight, net.cls.weight))
first, last, acc = results["pcgrad"]
print(f"RESULT {first:.6f} {last:.6f} {acc:.6f}")
