"""Quantization-aware training written by hand, in the style of the public "QAT from scratch"
tutorials that avoid torch.ao: a float MLP classifier trained first, then fine-tuned with
weights fake-quantized per output channel to 4 bits (torch.fake_quantize_per_channel_affine with
symmetric scales from amax over dim 1 over [-7, 7], int32 zero points, axis 0) and activations fake-quantized
per tensor to uint8 (torch.fake_quantize_per_tensor_affine) with scales and zero points from a
moving-average min/max observer kept in registered buffers (torch.aminmax, updated under
torch.no_grad in training mode and frozen in eval mode). The straight-through gradient is
checked (1 inside the range, 0 where clamped), the quantization error of the weights is reported,
and the float, post-training-quantized and QAT accuracies are compared; a real integer matmul
(integer weights and activations, int32 accumulation, then rescaling) reproduces the
fake-quantized layer's output. Weights and data from NumPy. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <float acc> <ptq acc> <qat acc>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
K, D = 4, 16
centers = rng.normal(0, 1.0, (K, D))
ys = rng.integers(0, K, 800)
X = torch.from_numpy((centers[ys] + rng.normal(0, 1.4, (800, D))).astype(np.float32))
Y = torch.from_numpy(ys.astype(np.int64))
Xtr, Ytr, Xte, Yte = X[:600], Y[:600], X[600:], Y[600:]

x = torch.tensor([-1.0, 0.26, 0.74, 3.0], requires_grad=True)
y = torch.fake_quantize_per_tensor_affine(x, 0.5, 0, -2, 2)
y.sum().backward()
print("fake quant", y.tolist(), "ste grad", x.grad.tolist())


class ActObserverFQ(nn.Module):
    """Moving-average min/max of the activations -> uint8 scale / zero point."""

    def __init__(self, momentum=0.1):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("min_val", torch.tensor(float("inf")))
        self.register_buffer("max_val", torch.tensor(float("-inf")))
        self.enabled = False

    def qparams(self):
        lo = torch.clamp(self.min_val, max=0.0)
        hi = torch.clamp(self.max_val, min=0.0)
        scale = torch.clamp((hi - lo) / 255.0, min=1e-8)
        zero_point = int(torch.clamp(torch.round(-lo / scale), 0, 255).item())
        return scale.item(), zero_point

    def forward(self, x):
        if not self.enabled:
            return x
        if self.training:
            with torch.no_grad():
                mn, mx = torch.aminmax(x.detach())
                if torch.isinf(self.min_val):
                    self.min_val.copy_(mn)
                    self.max_val.copy_(mx)
                else:
                    self.min_val.lerp_(mn, self.momentum)
                    self.max_val.lerp_(mx, self.momentum)
        scale, zero_point = self.qparams()
        return torch.fake_quantize_per_tensor_affine(x, scale, zero_point, 0, 255)


class QLinear(nn.Linear):
    """A Linear whose weight is fake-quantized per output channel (symmetric 4-bit)."""

    quantize = False

    def weight_qparams(self):
        amax = self.weight.detach().abs().amax(dim=1).clamp(min=1e-8)
        return amax / 7.0, torch.zeros(self.out_features, dtype=torch.int32)

    def forward(self, x):
        w = self.weight
        if self.quantize:
            scale, zp = self.weight_qparams()
            w = torch.fake_quantize_per_channel_affine(w, scale, zp, 0, -7, 7)
        return F.linear(x, w, self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = QLinear(D, 32), QLinear(32, 32), QLinear(32, K)
        self.obs_in, self.obs1, self.obs2 = ActObserverFQ(), ActObserverFQ(), ActObserverFQ()

    def forward(self, x):
        x = self.obs_in(x)
        x = self.obs1(F.relu(self.fc1(x)))
        x = self.obs2(F.relu(self.fc2(x)))
        return self.fc3(x)

    def set_quant(self, on):
        for m in self.modules():
            if isinstance(m, QLinear):
                m.quantize = on
            if isinstance(m, ActObserverFQ):
                m.enabled = on


model = Net()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        fan_in = p[0].numel() if p.dim() > 1 else p.numel()
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                / math.sqrt(fan_in))


def train(steps, lr):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        i = torch.from_numpy(rng.integers(0, 600, 64))
        loss = F.cross_entropy(model(Xtr[i]), Ytr[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def accuracy():
    model.eval()
    with torch.no_grad():
        return (model(Xte).argmax(1) == Yte).float().mean().item()


print(f"float training loss {train(150, 1e-2):.5f}")
acc_float = accuracy()
# post-training quantization: calibrate the observers on training data, no weight updates
model.set_quant(True)
model.train()
with torch.no_grad():
    for i in range(0, 600, 100):
        model(Xtr[i:i + 100])
acc_ptq = accuracy()
scale, zp = model.obs1.qparams()
print(f"obs1 range [{model.obs1.min_val.item():.4f}, {model.obs1.max_val.item():.4f}] "
      f"scale {scale:.6f} zero_point {zp}")
w = model.fc2.weight.detach()
s, z = model.fc2.weight_qparams()
wq = torch.fake_quantize_per_channel_affine(w, s, z, 0, -7, 7)
print(f"fc2 weight quantization error {(wq - w).abs().max().item():.6f} <= scale / 2: "
      f"{bool(((wq - w).abs() <= s[:, None] / 2 + 1e-7).all())}")
print(f"QAT loss {train(60, 1e-3):.5f}")
acc_qat = accuracy()

# integer arithmetic reproduces the fake-quantized fc2
model.eval()
with torch.no_grad():
    h = model.obs1(F.relu(model.fc1(model.obs_in(Xte[:8]))))
    a_scale, a_zp = model.obs1.qparams()
    a_int = torch.clamp(torch.round(h / a_scale) + a_zp, 0, 255).to(torch.int64)
    w_scale, _ = model.fc2.weight_qparams()
    w_int = torch.clamp(torch.round(model.fc2.weight / w_scale[:, None]), -7, 7).to(torch.int64)
    acc32 = (a_int - a_zp) @ w_int.t()
    y_int = acc32.to(torch.float32) * (a_scale * w_scale) + model.fc2.bias
    y_fq = model.fc2(h)
print("integer matmul == fake-quant layer:", torch.allclose(y_int, y_fq, atol=1e-4),
      acc32.dtype)
print(f"accuracy float {acc_float:.4f} ptq {acc_ptq:.4f} qat {acc_qat:.4f}")
print(f"RESULT {acc_float:.5f} {acc_ptq:.5f} {acc_qat:.5f}")
