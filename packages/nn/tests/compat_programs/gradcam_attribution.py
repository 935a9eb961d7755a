"""Attribution methods for a small CNN in the style of the public pytorch-grad-cam and Captum
code: Grad-CAM from a forward hook that keeps the target layer's activations and a
register_full_backward_hook that keeps the gradients w.r.t. its output, ReLU-ed and bilinearly
upsampled; guided backpropagation by full backward hooks on every nn.ReLU that clamp
grad_input (returning a replacement tuple); integrated gradients with a batch of path points
(torch.linspace alphas, autograd.grad of the target logits summed) and the completeness check;
SmoothGrad averaging gradients over noisy copies; occlusion sensitivity by sliding patches; a
global module forward hook (torch.nn.modules.module.register_module_forward_hook) counting
calls; forward pre-hooks that rewrite the input; and removal of all handles. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <grad-cam localisation>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(151)
S = 16


def images(n):
    """A bright square (class 1) or a bright cross (class 0) at a random place on noise."""
    x = 0.2 * rng.normal(size=(n, 1, S, S))
    y = rng.integers(0, 2, n)
    loc = rng.integers(2, S - 6, (n, 2))
    for i in range(n):
        r, c = loc[i]
        if y[i]:
            x[i, 0, r:r + 4, c:c + 4] += 1.5
        else:
            x[i, 0, r + 1:r + 3, c:c + 4] += 1.5
            x[i, 0, r:r + 4, c + 1:c + 3] += 1.5
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y), torch.from_numpy(loc)


model = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
    nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 2))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, np.sqrt(2 / p[0].numel()) if p.dim() > 1 else 0.0, p.shape).astype(np.float32)))

opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(60):
    x, y, _ = images(32)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.4f}")
model.eval()


class GradCAM:
    def __init__(self, model, layer):
        self.model, self.activations, self.gradients = model, None, None
        self.handles = [layer.register_forward_hook(self._save_act), layer.register_full_backward_hook(self._save_grad)]

    def _save_act(self, module, inp, out):
        self.activations = out.detach()

    def _save_grad(self, module, grad_input, grad_output):
        self.gradients = grad_output[0].detach()

    def __call__(self, x, target):
        self.model.zero_grad()
        out = self.model(x)
        out.gather(1, target.unsqueeze(1)).sum().backward()
        weights = self.gradients.mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * self.activations).sum(1, keepdim=True))
        cam = F.interpolate(cam, size=x.shape[-2:], mode="bilinear", align_corners=False)
        cam = cam - cam.amin(dim=(2, 3), keepdim=True)
        return cam / (cam.amax(dim=(2, 3), keepdim=True) + 1e-8)

    def remove(self):
        for h in self.handles:
            h.remove()


x, y, loc = images(16)
x.requires_grad_(True)
cam = GradCAM(model, model[5])(x, y)
peak = cam.flatten(1).argmax(1)
pr, pc = peak // S, peak % S
inside = ((pr >= loc[:, 0] - 2) & (pr < loc[:, 0] + 6) & (pc >= loc[:, 1] - 2) & (pc < loc[:, 1] + 6)).float().mean().item()
print(f"grad-cam {tuple(cam.shape)} in [0, 1]: {bool(cam.min() >= 0) and bool(cam.max() <= 1)} "
      f"peak near the object {inside:.4f}")

# guided backprop: only positive gradients through positive activations
handles = []


def guided_relu_hook(module, grad_input, grad_output):
    return (torch.clamp(grad_input[0], min=0.0),)


for m in model.modules():
    if isinstance(m, nn.ReLU):
        handles.append(m.register_full_backward_hook(guided_relu_hook))
xg = x.detach().clone().requires_grad_(True)
model(xg).gather(1, y.unsqueeze(1)).sum().backward()
guided = xg.grad.clone()
for h in handles:
    h.remove()
xv = x.detach().clone().requires_grad_(True)
model(xv).gather(1, y.unsqueeze(1)).sum().backward()
print(f"guided grads differ from vanilla: {not torch.allclose(guided, xv.grad)} "
      f"hooks removed: {all(len(m._backward_hooks) == 0 for m in model.modules())}")


def integrated_gradients(x, target, steps=32):
    baseline = torch.zeros_like(x)
    alphas = torch.linspace(0, 1, steps).view(-1, 1, 1, 1)
    path = (baseline + alphas * (x - baseline)).requires_grad_(True)
    out = model(path)[:, target].sum()
    (grads,) = torch.autograd.grad(out, path)
    avg = (grads[:-1] + grads[1:]).mean(0) / 2  # trapezoid rule
    return (x - baseline) * avg


x0 = x[:1].detach()
ig = integrated_gradients(x0, int(y[0]), steps=64)
with torch.no_grad():
    delta = (model(x0)[0, y[0]] - model(torch.zeros_like(x0))[0, y[0]]).item()
print(f"integrated gradients completeness: sum {ig.sum().item():.4f} vs f(x) - f(0) {delta:.4f} "
      f"close {abs(ig.sum().item() - delta) < 0.05 * abs(delta) + 0.05}")

noise = torch.from_numpy(rng.normal(0, 0.15, (20, 1, S, S)).astype(np.float32))
noisy = (x0 + noise).requires_grad_(True)
(sg,) = torch.autograd.grad(model(noisy)[:, y[0]].sum(), noisy)
smooth = sg.mean(0, keepdim=True)
print(f"smoothgrad energy inside the object box: {smooth.abs()[0, 0, loc[0, 0]:loc[0, 0] + 4, loc[0, 1]:loc[0, 1] + 4].sum().item() / smooth.abs().sum().item():.4f}")

with torch.no_grad():
    base = F.softmax(model(x0), 1)[0, y[0]]
    occl = torch.zeros(S // 2, S // 2)
    for i in range(0, S, 2):
        for j in range(0, S, 2):
            xo = x0.clone()
            xo[..., i:i + 4, j:j + 4] = 0
            occl[i // 2, j // 2] = base - F.softmax(model(xo), 1)[0, y[0]]
r, c = divmod(int(occl.argmax()), S // 2)
print(f"occlusion peak at ({2 * r}, {2 * c}) object at {tuple(loc[0].tolist())}")

calls = []
g = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: calls.append(type(m).__name__))
pre = model[0].register_forward_pre_hook(lambda m, args: (args[0] * 0,))
with torch.no_grad():
    zero_out = model(x0)
    ref = model[9](model[8](model[7](torch.zeros(1, 16, 1, 1))))
g.remove()
pre.remove()
print(f"global hook saw {len(calls)} calls, first {calls[:3]}; pre-hook zeroed the input: "
      f"{torch.allclose(zero_out, model(torch.zeros_like(x0)))}")
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-5:]):.4f} {inside:.4f}")
