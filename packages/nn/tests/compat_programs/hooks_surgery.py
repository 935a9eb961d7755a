"""Model inspection and surgery with module hooks, in the style of the public feature-extraction,
Grad-CAM and "model surgery" snippets: forward hooks on named_modules() collecting activations
(and one returning a modified output), a forward pre-hook with with_kwargs=True rewriting an
argument, register_full_backward_hook recording grad_output norms and scaling grad_input,
register_full_backward_pre_hook, Grad-CAM from a hooked conv layer's activations and gradients,
hooks removed through their handles (and the module then checked hook-free), layers swapped in
place by setattr on the parent found from a dotted name (ReLU -> GELU, Linear widened with
its old weights copied in), a state_dict loaded with strict=False reporting missing and
unexpected keys (the returned NamedTuple), _load_from_state_dict renaming of an old key through
register_load_state_dict_pre_hook, and the parameter count before and after. Weights and data
from NumPy. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <loss before> <loss after> <cam peak>."""

import math
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(1, 8, 3, padding=1)), ("act1", nn.ReLU()),
            ("conv2", nn.Conv2d(8, 8, 3, padding=1)), ("act2", nn.ReLU())]))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.ReLU(),
                                        nn.Linear(16, 3))

    def forward(self, x, scale=1.0):
        return self.classifier(self.pool(self.features(x * scale)))


def init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                    / math.sqrt(fan_in))


model = Net()
init(model, 1)
x = torch.from_numpy(rng.normal(size=(4, 1, 8, 8)).astype(np.float32))
y = torch.tensor([0, 1, 2, 1])
print("modules:", [n for n, _ in model.named_modules() if n])

acts, handles = {}, []
for name, m in model.named_modules():
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        handles.append(m.register_forward_hook(
            lambda mod, inp, out, name=name: acts.__setitem__(name, out.detach())))
out = model(x)
print("captured:", {k: tuple(v.shape) for k, v in acts.items()})

grad_norms = []
h1 = model.classifier[3].register_full_backward_hook(
    lambda mod, gin, gout: grad_norms.append(round(gout[0].norm().item(), 5)))
h2 = model.classifier[1].register_full_backward_hook(
    lambda mod, gin, gout: (gin[0] * 0.5,))
pre_seen = []
h3 = model.classifier[3].register_full_backward_pre_hook(
    lambda mod, gout: pre_seen.append(tuple(gout[0].shape)))
h4 = model.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"scale": 2.0}),
                                     with_kwargs=True)
h5 = model.features.act2.register_forward_hook(lambda mod, inp, out: out + 0.0)
loss = F.cross_entropy(model(x, scale=1.0), y)
loss.backward()
print(f"loss with pre-hook scale {loss.item():.5f}, grad_output norms {grad_norms}, "
      f"pre-hook saw {pre_seen}")
g_scaled = model.features.conv1.weight.grad.clone()
for h in handles + [h1, h2, h3, h4, h5]:
    h.remove()
print("hooks left:", sum(len(m._forward_hooks) + len(m._backward_hooks)
                         + len(m._forward_pre_hooks) for m in model.modules()))
model.zero_grad()
F.cross_entropy(model(x, scale=2.0), y).backward()
print("halved grad_input reached conv1:",
      torch.allclose(g_scaled, 0.5 * model.features.conv1.weight.grad, atol=1e-6))

# Grad-CAM on conv2
store = {}
fh = model.features.conv2.register_forward_hook(lambda m, i, o: store.__setitem__("a", o))
bh = model.features.conv2.register_full_backward_hook(
    lambda m, gi, go: store.__setitem__("g", go[0]))
logits = model(x[:1])
model.zero_grad()
logits[0, logits.argmax()].backward()
weights = store["g"].mean(dim=(2, 3), keepdim=True)
cam = F.relu((weights * store["a"]).sum(1)).detach()
cam = cam / (cam.max() + 1e-8)
fh.remove()
bh.remove()
print("cam", tuple(cam.shape), f"peak at {divmod(cam[0].argmax().item(), 8)}")

# surgery: swap activations, widen a Linear keeping its weights
before = sum(p.numel() for p in model.parameters())
loss_before = F.cross_entropy(model(x), y).item()
for name, m in list(model.named_modules()):
    if isinstance(m, nn.ReLU):
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, nn.GELU())
old = model.classifier[1]
wide = nn.Linear(8, 24)
init(wide, 2)
with torch.no_grad():
    wide.weight[:16] = old.weight
    wide.bias[:16] = old.bias
model.classifier[1] = wide
last = nn.Linear(24, 3)
with torch.no_grad():
    last.weight.zero_()
    last.weight[:, :16] = model.classifier[3].weight
    last.bias.copy_(model.classifier[3].bias)
model.classifier[3] = last
after = sum(p.numel() for p in model.parameters())
print(model.classifier)
print(f"parameters {before} -> {after}, GELU count "
      f"{sum(isinstance(m, nn.GELU) for m in model.modules())}")

# strict=False loading: an old checkpoint with a renamed key and an extra key
state = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("classifier.3")}
state["features.conv1.w"] = state.pop("features.conv1.weight")
state["extra.running_thing"] = torch.zeros(2)
state["classifier.1.weight"] = state["classifier.1.weight"][:16]
state["classifier.1.bias"] = state["classifier.1.bias"][:16]


def rename_hook(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
    if prefix + "w" in state_dict:
        state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")


fresh = Net()
init(fresh, 3)
result = fresh.load_state_dict(state, strict=False)
print("missing:", sorted(result.missing_keys), "unexpected:", sorted(result.unexpected_keys))
hook = fresh.features.conv1.register_load_state_dict_pre_hook(rename_hook)
result = fresh.load_state_dict(state, strict=False)
hook.remove()
print("after rename hook, missing:", sorted(result.missing_keys), "unexpected:",
      sorted(result.unexpected_keys))
try:
    fresh.load_state_dict(state)
except RuntimeError as e:
    print("strict load raises:", "Unexpected key(s)" in str(e), "Missing key(s)" in str(e))
print("conv1 loaded:", torch.equal(fresh.features.conv1.weight, model.features.conv1.weight))
loss_after = F.cross_entropy(model(x), y).item()
print(f"RESULT {loss_before:.5f} {loss_after:.5f} {cam.max().item():.5f}")
