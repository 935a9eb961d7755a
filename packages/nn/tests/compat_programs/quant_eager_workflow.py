"""Eager-mode quantization as PyTorch tutorials write it: quantized tensors (per tensor and per
channel, printed), quantization-aware training of a small conv net (fuse_modules_qat on
conv-bn-relu and linear-relu, a residual add through FloatFunctional, prepare_qat with the x86
QAT qconfig, SGD, observers and batch-norm statistics frozen for the last steps, convert),
post-training static quantization of the float net (fuse_modules, prepare with the x86
histogram qconfig, calibration, convert), dynamic quantization of an MLP, and a quantized
state_dict saved and loaded. Data and initial weights come from NumPy, so the run is the same
on both libraries. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <QAT accuracy>."""

import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.ao.nn.quantized import FloatFunctional
from torch.ao.quantization import (
    DeQuantStub,
    QuantStub,
    convert,
    disable_observer,
    fuse_modules,
    fuse_modules_qat,
    get_default_qat_qconfig,
    get_default_qconfig,
    prepare,
    prepare_qat,
    quantize_dynamic,
)

torch.backends.quantized.engine = "x86"
rng = np.random.default_rng(24)

# ---- quantized tensors ----
q = torch.quantize_per_tensor(torch.tensor([-1.0, 0.25, 0.75, 1.25, 100.0]), 0.5, 2, torch.quint8)
print(q)
print("int_repr", q.int_repr().tolist(), "qscheme", q.qscheme(), "scale", q.q_scale())
w = torch.tensor([[0.9, -1.0, -0.6], [-1.2, 0.8, 1.4]])
qc = torch.quantize_per_channel(w, torch.tensor([0.1, 0.2], dtype=torch.float64),
                                torch.tensor([0, 1]), 0, torch.qint8)
print(qc)
print("per channel", qc.int_repr().tolist(), qc.q_per_channel_axis(), qc.dequantize().tolist())


# ---- data: four classes of 8x8 images ----
def make_data(n):
    y = rng.integers(0, 4, n)
    x = rng.normal(scale=0.6, size=(n, 1, 8, 8))
    for i, c in enumerate(y):
        if c == 0:
            x[i, 0, 2:6, 1:3] += 1.5
        elif c == 1:
            x[i, 0, 1:3, 2:6] += 1.5
        elif c == 2:
            x[i, 0, np.arange(8), np.arange(8)] += 1.5
        else:
            x[i, 0, 3:5, 3:5] -= 1.5
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y)


X_train, Y_train = make_data(256)
X_test, Y_test = make_data(128)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = QuantStub()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.relu2 = nn.ReLU()
        self.skip = FloatFunctional()
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(8 * 4 * 4, 32)
        self.relu3 = nn.ReLU()
        self.fc2 = nn.Linear(32, 4)
        self.dequant = DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        a = self.relu1(self.bn1(self.conv1(x)))
        b = self.relu2(self.bn2(self.conv2(a)))
        x = self.pool(self.skip.add(a, b))
        x = torch.flatten(x, 1)
        x = self.fc2(self.relu3(self.fc1(x)))
        return self.dequant(x)


def numpy_init(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.tensor(rng.normal(scale=0.05, size=p.shape), dtype=torch.float32))
            elif p.dim() == 1:  # batch-norm weight
                p.copy_(torch.tensor(rng.uniform(0.8, 1.2, size=p.shape), dtype=torch.float32))
            else:
                fan_in = int(np.prod(p.shape[1:]))
                p.copy_(torch.tensor(rng.normal(scale=1 / np.sqrt(fan_in), size=p.shape),
                                     dtype=torch.float32))
    return model


FUSE = [["conv1", "bn1", "relu1"], ["conv2", "bn2", "relu2"], ["fc1", "relu3"]]


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


# ---- quantization-aware training ----
float_init = numpy_init(Net())
model = Net()
model.load_state_dict(float_init.state_dict())
model.train()
model = fuse_modules_qat(model, FUSE)
print("fused", type(model.conv1).__name__, type(model.fc1).__name__, type(model.bn1).__name__)
model.qconfig = get_default_qat_qconfig("x86")
model = prepare_qat(model)
print("qat", type(model.conv1).__name__, type(model.fc2).__name__,
      type(model.conv1.weight_fake_quant).__name__)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
losses = []
for step in range(24):
    idx = torch.tensor(rng.choice(256, 32, replace=False))
    loss = F.cross_entropy(model(X_train[idx]), Y_train[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 6 == 0:
        print(f"step {step} loss {loss.item():.4f}")
    if step == 18:
        model.apply(disable_observer)
        model.apply(torch.ao.nn.intrinsic.qat.freeze_bn_stats)
model.eval()
fq_acc = accuracy(model, X_test, Y_test)
quantized = convert(model)
print("converted", type(quantized.quant).__name__, type(quantized.conv1).__name__,
      type(quantized.skip).__name__, type(quantized.fc2).__name__)
print("fc2 output qparams", round(quantized.fc2.scale, 6), quantized.fc2.zero_point)
q_acc = accuracy(quantized, X_test, Y_test)
with torch.no_grad():
    agree = (quantized(X_test).argmax(1) == model(X_test).argmax(1)).float().mean().item()
print(f"fake-quant acc {fq_acc:.4f} quantized acc {q_acc:.4f} agreement {agree:.4f}")

# ---- a quantized state_dict round trip ----
buf = io.BytesIO()
torch.save(quantized.state_dict(), buf)
buf.seek(0)
state = torch.load(buf, weights_only=False)
fresh = fuse_modules_qat(numpy_init(Net()).train(), FUSE)
fresh.qconfig = get_default_qat_qconfig("x86")
fresh = prepare_qat(fresh)
fresh.eval()
fresh_q = convert(fresh)
fresh_q.load_state_dict(state)
with torch.no_grad():
    same = torch.equal(fresh_q(X_test[:16]), quantized(X_test[:16]))
print("state_dict round trip equal", same)

# ---- post-training static quantization ----
float_model = Net()
float_model.load_state_dict(float_init.state_dict())
float_model.eval()
fused = fuse_modules(float_model, FUSE)
fused.qconfig = get_default_qconfig("x86")
prepared = prepare(fused)
print("observer", type(prepared.conv1.activation_post_process).__name__)
with torch.no_grad():
    for i in range(4):
        prepared(X_train[i * 32:(i + 1) * 32])
ptq = convert(prepared)
with torch.no_grad():
    ref = float_model(X_test)
    out = ptq(X_test)
step = ptq.fc2.scale
print("ptq max error in steps", round(float((out - ref).abs().max()) / step, 1) <= 8.0)
print("ptq quant scale", round(ptq.quant.scale.item(), 6), "zero point", ptq.quant.zero_point.item())

# ---- dynamic quantization ----
mlp = numpy_init(nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 4)))
dyn = quantize_dynamic(mlp, {nn.Linear}, dtype=torch.qint8)
print(dyn[0])
with torch.no_grad():
    flat = X_test.flatten(1)
    err = (dyn(flat) - mlp(flat)).abs().max().item()
print("dynamic max abs error small", err < 0.05, "weight scale", round(dyn[0].weight().q_scale(), 6))

print("RESULT", f"{losses[0]:.4f}", f"{np.mean(losses[-4:]):.4f}", f"{q_acc:.4f}")
