"""A ResNet-style network assembled from containers and reshaped the way fine-tuning and
pruning code reshapes models: BasicBlocks with optional downsample built with nn.Sequential,
stages in an nn.ModuleDict, per-stage scales in an nn.ParameterList and an nn.ParameterDict,
torch.nn.init (kaiming_normal_ fan_out, constant_, zero-init of the last BN gamma, orthogonal_,
calculate_gain) through model.apply, register_buffer (persistent and not), named_modules /
named_children / get_submodule / set_submodule-style replacement with setattr, a partial
state_dict load with strict=False (missing/unexpected keys), freezing with requires_grad_,
parameter groups with different learning rates, a forward pre-hook, nn.Identity head removal,
module printing (extra_repr) and a short training run. Weights and data come from NumPy through
the state dict: the test compares ember's output to torch's line by line. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember."""

import collections

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self, layers=(1, 1), widths=(8, 16), num_classes=3):
        super().__init__()
        self.inplanes = widths[0]
        self.stem = nn.Sequential(collections.OrderedDict([
            ("conv", nn.Conv2d(1, widths[0], 3, padding=1, bias=False)),
            ("bn", nn.BatchNorm2d(widths[0])), ("relu", nn.ReLU(inplace=True))]))
        self.stages = nn.ModuleDict()
        for i, (n, w) in enumerate(zip(layers, widths)):
            self.stages[f"layer{i + 1}"] = self._make_layer(w, n, stride=1 if i == 0 else 2)
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in widths])
        self.extra = nn.ParameterDict({"temperature": nn.Parameter(torch.tensor(1.0))})
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[-1] * BasicBlock.expansion, num_classes)
        self.register_buffer("mean", torch.tensor([0.5]).view(1, 1, 1, 1))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long), persistent=False)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        for m in self.modules():  # zero-init the last BN of each residual branch
            if isinstance(m, BasicBlock):
                nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        self.calls += 1
        x = self.stem(x - self.mean)
        for scale, stage in zip(self.scales, self.stages.values()):
            x = stage(x) * scale
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x) / self.extra["temperature"]


model = TinyResNet()
print(model.stages["layer2"][0].downsample)
print(model.stem)
print(f"named_children: {[n for n, _ in model.named_children()]}")
print(f"{sum(1 for _ in model.named_modules())} modules; convs: "
      f"{[n for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]}")
sd = model.state_dict()
print(f"state_dict: {len(sd)} entries, 'calls' persistent: {'calls' in sd}, "
      f"buffers {[n for n, _ in model.named_buffers()][:3]}")
print(f"zero-init bn2: {model.get_submodule('stages.layer1.0.bn2').weight.abs().sum().item()}")
print(f"gain relu {nn.init.calculate_gain('relu'):.4f} leaky {nn.init.calculate_gain('leaky_relu', 0.2):.4f}"
      f" tanh {nn.init.calculate_gain('tanh'):.4f}")
w = torch.empty(4, 6)
nn.init.orthogonal_(w)
print(f"orthogonal_ rows orthonormal: {torch.allclose(w @ w.T, torch.eye(4), atol=1e-5)}")
for init in (nn.init.xavier_normal_, nn.init.kaiming_uniform_, nn.init.uniform_, nn.init.normal_,
             nn.init.trunc_normal_, nn.init.eye_, nn.init.dirac_ if False else nn.init.zeros_):
    init(w)
t = torch.empty(3, 2, 3, 3)
nn.init.dirac_(t[:2])
print(f"dirac_ centre taps: {t[:2, :, 1, 1].tolist()}")

# deterministic weights from NumPy for everything that follows
with torch.no_grad():
    new_sd = {}
    for k, v in model.state_dict().items():
        if v.is_floating_point() and "running_var" not in k:
            new_sd[k] = torch.from_numpy(rng.normal(0, 0.3, tuple(v.shape)).astype(np.float32))
        else:
            new_sd[k] = v
    model.load_state_dict(new_sd)

# partial load: a checkpoint from a 10-class model, with an extra key
ckpt = {k: v.clone() for k, v in model.state_dict().items()}
ckpt["fc.weight"] = torch.zeros(10, 16)
del ckpt["fc.bias"]
ckpt["projector.weight"] = torch.zeros(2)
ckpt = {k: v for k, v in ckpt.items() if not (k.startswith("fc.") and v.shape[0] == 10)}
result = model.load_state_dict(ckpt, strict=False)
print(f"missing keys: {result.missing_keys}")
print(f"unexpected keys: {result.unexpected_keys}")
try:
    model.load_state_dict(ckpt)
except RuntimeError as e:
    print("strict load refused:", "Missing key(s)" in str(e) and "Unexpected key(s)" in str(e))

# surgery: a new head, a frozen stem, a swapped activation
model.fc = nn.Linear(16, 2)
with torch.no_grad():
    model.fc.weight.copy_(torch.from_numpy(rng.normal(0, 0.3, (2, 16)).astype(np.float32)))
    model.fc.bias.zero_()
model.stem.requires_grad_(False)
model.stem.relu = nn.LeakyReLU(0.1)
for name, module in model.named_modules():
    if isinstance(module, BasicBlock):
        module.relu = nn.ReLU6()
print(model.stem)
trainable = [n for n, p in model.named_parameters() if p.requires_grad]
print(f"trainable tensors {len(trainable)}, frozen "
      f"{sum(1 for p in model.parameters() if not p.requires_grad)}")
seen_shapes = []
hook = model.fc.register_forward_pre_hook(lambda m, inp: seen_shapes.append(tuple(inp[0].shape)))

head_params = list(model.fc.parameters())
head_ids = {id(p) for p in head_params}
body_params = [p for p in model.parameters() if p.requires_grad and id(p) not in head_ids]
optimizer = torch.optim.SGD([{"params": body_params, "lr": 0.01},
                             {"params": head_params}], lr=0.1, momentum=0.9)
print("group lrs", [g["lr"] for g in optimizer.param_groups],
      [len(g["params"]) for g in optimizer.param_groups])

x = torch.from_numpy(rng.normal(0, 1, (24, 1, 8, 8)).astype(np.float32))
y = torch.from_numpy((x[:, 0, :4].mean((1, 2)) > x[:, 0, 4:].mean((1, 2))).numpy().astype(np.int64))
stem_before = model.stem.conv.weight.clone()
model.train()
losses = []
for step in range(12):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print("losses", " ".join(f"{v:.4f}" for v in losses[::3]))
print(f"stem unchanged: {torch.equal(stem_before, model.stem.conv.weight)}; hook saw "
      f"{seen_shapes[0]} x{len(seen_shapes)}; calls {model.calls.item()}")
hook.remove()
model.fc = nn.Identity()
model.eval()
with torch.no_grad():
    feats = model(x)
print(f"features {tuple(feats.shape)}, mean {feats.mean().item():.4f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f}")
