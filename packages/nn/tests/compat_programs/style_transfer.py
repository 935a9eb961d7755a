"""Neural style transfer, in the style of the public PyTorch tutorial "Neural Transfer Using
PyTorch" (with a small fixed random CNN instead of VGG): feature maps collected by forward hooks
on named layers of an nn.Sequential built by walking another model's children, content and style
losses as transparent modules (the Gram matrix by view + torch.mm, divided by the number of
elements; the target detached), the input image itself optimized (requires_grad_) with
optim.LBFGS (then Adam) and a closure that clamps it in place under torch.no_grad, a total-variation
regularizer, the model frozen with requires_grad_(False) and eval(), torch._assert on the input
shape, and the normalization module with buffers made by register_buffer from view(-1, 1, 1).
Images and weights from NumPy: the run is the same on both libraries. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first style loss> <last style loss> <first content loss> <last content loss>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)


class Normalization(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(-1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(-1, 1, 1))

    def forward(self, img):
        torch._assert(img.dim() == 4, "expected a batch of images")
        return (img - self.mean) / self.std


def gram_matrix(x):
    b, c, h, w = x.size()
    features = x.view(b * c, h * w)
    return torch.mm(features, features.t()).div(b * c * h * w)


class ContentLoss(nn.Module):
    def __init__(self, target):
        super().__init__()
        self.target = target.detach()

    def forward(self, x):
        self.loss = F.mse_loss(x, self.target)
        return x


class StyleLoss(nn.Module):
    def __init__(self, target_feature):
        super().__init__()
        self.target = gram_matrix(target_feature).detach()

    def forward(self, x):
        self.loss = F.mse_loss(gram_matrix(x), self.target)
        return x


# a "pretrained" feature extractor: fixed weights from NumPy
cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(8, 8, 3, padding=1),
                    nn.ReLU(inplace=True), nn.AvgPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                    nn.ReLU(inplace=True), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(inplace=True))
with torch.no_grad():
    for m in cnn:
        if isinstance(m, nn.Conv2d):
            fan_in = m.weight[0].numel()
            m.weight.copy_(torch.from_numpy(rng.normal(0, math.sqrt(2 / fan_in),
                                                       tuple(m.weight.shape)).astype(np.float32)))
            m.bias.zero_()
cnn.eval().requires_grad_(False)

yy, xx = np.mgrid[:24, :24] / 24.0
style_np = np.stack([np.sin(12 * xx), np.cos(12 * yy), np.sin(8 * (xx + yy))])[None] * 0.5 + 0.5
content_np = np.zeros((1, 3, 24, 24))
content_np[:, :, 6:18, 6:18] = [[[0.9]], [[0.2]], [[0.4]]]
style_img = torch.from_numpy(style_np.astype(np.float32))
content_img = torch.from_numpy(content_np.astype(np.float32))
norm = Normalization([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])

content_layers, style_layers = ["conv_4"], ["conv_1", "conv_2", "conv_3", "conv_4"]
model = nn.Sequential(norm)
content_losses, style_losses = [], []
i = 0
for layer in cnn.children():
    if isinstance(layer, nn.Conv2d):
        i += 1
        name = f"conv_{i}"
    elif isinstance(layer, nn.ReLU):
        name = f"relu_{i}"
        layer = nn.ReLU(inplace=False)
    else:
        name = f"pool_{i}"
    model.add_module(name, layer)
    if name in content_layers:
        cl = ContentLoss(model(content_img))
        model.add_module(f"content_loss_{i}", cl)
        content_losses.append(cl)
    if name in style_layers:
        sl = StyleLoss(model(style_img))
        model.add_module(f"style_loss_{i}", sl)
        style_losses.append(sl)
print(f"model: {[n for n, _ in model.named_children()]}")

# hooks: the mean activation of every conv, recorded at each forward
acts = {}
hooks = [m.register_forward_hook(lambda mod, inp, out, n=n: acts.__setitem__(n, out.mean().item()))
         for n, m in model.named_children() if n.startswith("conv")]

input_img = content_img.clone()
input_img.requires_grad_(True)
optimizer = torch.optim.LBFGS([input_img], lr=1.0, max_iter=10)
style_weight, content_weight, tv_weight = 1e3, 1.0, 1e-3
history = []


def closure():
    with torch.no_grad():
        input_img.clamp_(0, 1)
    optimizer.zero_grad()
    model(input_img)
    s = sum(sl.loss for sl in style_losses)
    c = sum(cl.loss for cl in content_losses)
    tv = (input_img[..., 1:, :] - input_img[..., :-1, :]).abs().mean() + \
        (input_img[..., :, 1:] - input_img[..., :, :-1]).abs().mean()
    loss = style_weight * s + content_weight * c + tv_weight * tv
    loss.backward()
    history.append((s.item(), c.item()))
    return loss


optimizer.step(closure)  # one L-BFGS step (10 evaluations), then Adam on the pixels
print(f"lbfgs: evaluations {len(history)}, style {history[-1][0]:.6e} content "
      f"{history[-1][1]:.6e}")
optimizer = torch.optim.Adam([input_img], lr=0.01)
for step in range(args.steps * 10):
    optimizer.step(closure)
    if step % 10 == 9:
        s, c = history[-1]
        print(f"adam step {step + 1}: style {s:.6e} content {c:.6e}")
with torch.no_grad():
    input_img.clamp_(0, 1)
for h in hooks:
    h.remove()
print(f"activations: {', '.join(f'{k} {v:.4f}' for k, v in sorted(acts.items()))}")
print(f"image in [0, 1]: {bool((input_img >= 0).all() and (input_img <= 1).all())}, "
      f"grad kept: {input_img.grad is not None}, cnn frozen: "
      f"{not any(p.requires_grad for p in cnn.parameters())}")
print(f"RESULT {history[0][0]:.6e} {history[-1][0]:.6e} {history[0][1]:.6e} {history[-1][1]:.6e}")
