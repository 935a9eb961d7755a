"""The torch.nn.utils toolbox as training and deployment scripts use it: gradient clipping in
its variants (clip_grad_norm_ with norm_type 2 / inf / 1, foreach, error_if_nonfinite raising
on a NaN gradient, the returned total norm; get_total_norm + clip_grads_with_norm_ split in two;
clip_grad_value_), parameters_to_vector / vector_to_parameters for a flat-parameter line search,
weight_norm and spectral_norm through torch.nn.utils.parametrizations (original0 / original1,
parametrize.cached, remove_parametrizations keeping the values), Conv+BN / Linear+BN fusion
(fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval) checked against the unfused
eval-mode model, rnn.pad_sequence with batch_first and padding_side="left", and
skip_init. A small CNN is trained with weight-normalized layers and clipping, then fused for
inference. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <fusion error>."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    parameters_to_vector,
    parametrize,
    vector_to_parameters,
)
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval
from torch.nn.utils.parametrizations import spectral_norm, weight_norm
from torch.nn.utils.rnn import pad_sequence


def det_init(module, scale=0.3):
    with torch.no_grad():
        for i, p in enumerate(module.parameters()):
            p.copy_(scale * torch.sin(torch.arange(p.numel(), dtype=torch.float32) * (0.61 + i))
                    .view_as(p))


# ---- clipping ----
lin = nn.Linear(4, 3)
det_init(lin)
x = torch.linspace(-2, 2, 20).view(5, 4)
for norm_type in (2.0, float("inf"), 1.0):
    lin.zero_grad()
    (lin(x) ** 2).sum().backward()
    total = clip_grad_norm_(lin.parameters(), max_norm=1.0, norm_type=norm_type)
    after = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in lin.parameters()]),
                                     norm_type)
    print(f"clip_grad_norm_ p={norm_type}: total {total.item():.5f} after {after.item():.5f}")
lin.zero_grad()
(lin(x) ** 2).sum().backward()
g_loop = [p.grad.clone() for p in lin.parameters()]
clip_grad_norm_(lin.parameters(), 0.5, foreach=False)
g_loop = [p.grad.clone() for p in lin.parameters()]
lin.zero_grad()
(lin(x) ** 2).sum().backward()
clip_grad_norm_(lin.parameters(), 0.5, foreach=True)
print("foreach == loop:", all(torch.allclose(a, p.grad) for a, p in zip(g_loop,
                                                                      lin.parameters())))
lin.weight.grad[0, 0] = float("nan")
try:
    clip_grad_norm_(lin.parameters(), 1.0, error_if_nonfinite=True)
except RuntimeError as e:
    print("error_if_nonfinite: RuntimeError", "non-finite" in str(e))
print("nan total without the check:", clip_grad_norm_(lin.parameters(), 1.0).isnan().item())
lin.zero_grad()
(lin(x) ** 2).sum().backward()
grads = [p.grad for p in lin.parameters()]
tn = torch.nn.utils.get_total_norm(grads, norm_type=2.0)
torch.nn.utils.clip_grads_with_norm_(lin.parameters(), max_norm=2.0, total_norm=tn)
print(f"get_total_norm {tn.item():.5f} then clip_grads_with_norm_ ->",
      f"{torch.nn.utils.get_total_norm([p.grad for p in lin.parameters()]).item():.5f}")
clip_grad_value_(lin.parameters(), clip_value=0.1)
print("clip_grad_value_ max", max(p.grad.abs().max().item() for p in lin.parameters()))

# ---- flat parameters ----
vec = parameters_to_vector(lin.parameters())
print("parameters_to_vector", tuple(vec.shape), f"{vec.sum().item():.5f}")


def loss_at(v):
    vector_to_parameters(v, lin.parameters())
    with torch.no_grad():
        return F.mse_loss(lin(x), x[:, :3]).item()


direction = -parameters_to_vector([p.grad for p in lin.parameters()])
best = min((loss_at(vec + t * direction), t) for t in (0.0, 0.25, 0.5, 1.0, 2.0))
print(f"line search best step {best[1]} loss {best[0]:.5f}")
vector_to_parameters(vec, lin.parameters())
print("restored:", torch.equal(parameters_to_vector(lin.parameters()), vec))

# ---- parametrizations ----
conv = nn.Conv2d(3, 8, 3, padding=1)
det_init(conv)
w_before = conv.weight.detach().clone()
weight_norm(conv, name="weight", dim=0)
print("weight_norm:", parametrize.is_parametrized(conv, "weight"),
      sorted(n for n, _ in conv.named_parameters()),
      tuple(conv.parametrizations.weight.original0.shape),
      "same weight", torch.allclose(conv.weight, w_before, atol=1e-6))
with parametrize.cached():
    a1 = conv.weight
    a2 = conv.weight
print("cached returns one tensor:", a1 is a2)
fc = nn.Linear(6, 5)
det_init(fc, 1.0)
spectral_norm(fc)
for _ in range(10):  # power iterations run in training mode
    fc(torch.ones(1, 6))
sigma = torch.linalg.matrix_norm(fc.weight.detach(), ord=2).item()
print(f"spectral_norm: largest singular value {sigma:.3f}",
      sorted(k for k in fc.state_dict()))

# ---- a model with weight-normalized convs, trained with clipping ----
model = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                      nn.Conv2d(6, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 8),
                      nn.BatchNorm1d(8), nn.Linear(8, 2))
det_init(model)
for m in model.modules():
    if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)
weight_norm(model[0])
weight_norm(model[3])
yy, xx = torch.meshgrid(torch.linspace(-1, 1, 8), torch.linspace(-1, 1, 8), indexing="ij")
imgs = torch.stack([torch.sin(3 * xx * (k % 3 + 1)) * torch.cos(yy * (k % 2 + 1))
                    for k in range(12)])[:, None]
labels = torch.tensor([k % 2 for k in range(12)])
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
losses, norms = [], []
for step in range(30):
    loss = F.cross_entropy(model(imgs), labels)
    opt.zero_grad()
    loss.backward()
    norms.append(clip_grad_norm_(model.parameters(), 1.0).item())
    opt.step()
    losses.append(loss.item())
print(f"train {losses[0]:.5f} -> {losses[-1]:.5f}, first grad norm {norms[0]:.5f}")
parametrize.remove_parametrizations(model[0], "weight")
parametrize.remove_parametrizations(model[3], "weight", leave_parametrized=True)
print("removed:", parametrize.is_parametrized(model[0]), type(model[0].weight).__name__,
      sorted(n for n, _ in model[0].named_parameters()))

# ---- fusion for inference ----
model.eval()
with torch.no_grad():
    ref = model(imgs)
    fused = nn.Sequential(fuse_conv_bn_eval(model[0], model[1]), nn.ReLU(),
                          fuse_conv_bn_eval(model[3], model[4]), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          fuse_linear_bn_eval(model[8], model[9]), model[10]).eval()
    out = fused(imgs)
fusion_err = (out - ref).abs().max().item()
print("fused conv weight", tuple(fused[0].weight.shape), "bias", fused[0].bias is not None,
      "fused == unfused:", fusion_err < 1e-4)
bn = model[1]
w2, b2 = fuse_conv_bn_weights(model[0].weight, model[0].bias, bn.running_mean, bn.running_var,
                              bn.eps, bn.weight, bn.bias)
print("fuse_conv_bn_weights:", type(w2).__name__, torch.allclose(w2, fused[0].weight),
      torch.allclose(b2, fused[0].bias))

# ---- pad_sequence and skip_init ----
seqs = [torch.tensor([1, 2, 3]), torch.tensor([4]), torch.tensor([5, 6])]
print("pad right", pad_sequence(seqs, batch_first=True).tolist())
print("pad left", pad_sequence(seqs, batch_first=True, padding_value=-1,
                               padding_side="left").tolist())
print("time-major", tuple(pad_sequence(seqs).shape))
sk = torch.nn.utils.skip_init(nn.Linear, 5, 3, bias=False)
print("skip_init", type(sk).__name__, tuple(sk.weight.shape), sk.bias)
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {fusion_err:.1e}")
