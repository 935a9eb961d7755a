"""Model pruning with torch.nn.utils.prune, in the style of the public PyTorch pruning tutorial:
l1_unstructured on one layer's weight (weight_orig as the parameter, weight_mask as a buffer,
the pruned weight recomputed by a forward pre-hook), random_unstructured skipped in favour of
deterministic methods, ln_structured(n=2, dim=0) pruning whole output channels of a Conv2d,
iterative pruning (a second l1_unstructured on top of the first: the PruningContainer and its
_tensor_name), global_unstructured over several layers with L1Unstructured, identity, a custom
BasePruningMethod subclass (prune every other entry), prune.is_pruned, sparsity reports, the
state_dict keys of a pruned model, fine-tuning that keeps the pruned entries at zero, and
prune.remove making the pruning permanent. Weights from NumPy, batches in order: the run prints
the same on both libraries. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <dense acc> <pruned acc> <fine-tuned acc>
<global sparsity>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.prune as prune

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=12)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 3)
        self.conv2 = nn.Conv2d(6, 8, 3)
        self.fc1 = nn.Linear(8, 32)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def det_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                    / math.sqrt(fan_in))


# three classes of 12x12 images: a horizontal bar, a vertical bar, a diagonal
imgs = rng.normal(0, 0.3, (192, 1, 12, 12)).astype(np.float32)
labels = rng.integers(0, 3, 192)
for i, c in enumerate(labels):
    k = rng.integers(2, 10)
    if c == 0:
        imgs[i, 0, k, 1:11] += 1.5
    elif c == 1:
        imgs[i, 0, 1:11, k] += 1.5
    else:
        imgs[i, 0, np.arange(12), np.arange(12)] += 1.5
X, Y = torch.from_numpy(imgs), torch.from_numpy(labels.astype(np.int64))


def train(model, epochs, lr=0.05):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for _ in range(epochs):
        for i in range(0, 160, 32):
            opt.zero_grad()
            F.cross_entropy(model(X[i:i + 32]), Y[i:i + 32]).backward()
            opt.step()


def accuracy(model):
    with torch.no_grad():
        return (model(X[160:]).argmax(1) == Y[160:]).float().mean().item()


def sparsity(t):
    return float((t == 0).sum()) / t.nelement()


model = LeNet()
det_init(model, 1)
train(model, args.epochs)
dense_acc = accuracy(model)
print(f"dense accuracy {dense_acc:.4f}")

# ---- one layer, unstructured ----------------------------------------------------------------
prune.l1_unstructured(model.fc1, name="weight", amount=0.3)
print(f"fc1 parameters: {[n for n, _ in model.fc1.named_parameters()]}")
print(f"fc1 buffers: {[n for n, _ in model.fc1.named_buffers()]}")
print(f"fc1 pre-hooks: {len(model.fc1._forward_pre_hooks)}, weight is a Parameter: "
      f"{isinstance(model.fc1.weight, nn.Parameter)}")
print(f"fc1 sparsity {sparsity(model.fc1.weight):.4f}, weight == orig * mask: "
      f"{torch.equal(model.fc1.weight, model.fc1.weight_orig * model.fc1.weight_mask)}")

# ---- structured: whole output channels by L2 norm --------------------------------------------
prune.ln_structured(model.conv2, name="weight", amount=0.25, n=2, dim=0)
zero_channels = (model.conv2.weight.flatten(1).abs().sum(1) == 0).nonzero().flatten().tolist()
print(f"conv2 zeroed channels: {zero_channels}")

# ---- iterative: prune fc1 again, 50% of what is left ----------------------------------------
prune.l1_unstructured(model.fc1, name="weight", amount=0.5)
hook = next(h for h in model.fc1._forward_pre_hooks.values() if isinstance(h, prune.BasePruningMethod))
print(f"iterative container: {type(hook).__name__} of {len(hook)} ({hook._tensor_name}), "
      f"fc1 sparsity {sparsity(model.fc1.weight):.4f}")


# ---- a custom method ---------------------------------------------------------------------------
class EveryOther(prune.BasePruningMethod):
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        mask = default_mask.clone()
        mask.view(-1)[::2] = 0
        return mask


EveryOther.apply(model.fc2, "bias")
print(f"custom: fc2.bias {model.fc2.bias.tolist() == [0.0, model.fc2.bias_orig[1].item(), 0.0]}"
      f", is_pruned {prune.is_pruned(model.fc2)} / {prune.is_pruned(LeNet())}")
print(f"state_dict keys: {sorted(model.state_dict().keys())}")
pruned_acc = accuracy(model)

# ---- global --------------------------------------------------------------------------------------
params = [(model.conv1, "weight"), (model.conv2, "weight"), (model.fc1, "weight"),
          (model.fc2, "weight")]
prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=0.4)
for m, n in params:
    print(f"global: {type(m).__name__} sparsity {sparsity(getattr(m, n)):.4f}")
total = sum(getattr(m, n).nelement() for m, n in params)
global_sparsity = sum(float((getattr(m, n) == 0).sum()) for m, n in params) / total
print(f"global sparsity {global_sparsity:.4f}")
prune.identity(model.conv1, "bias")

# ---- fine-tune with the masks, then make it permanent -------------------------------------------
train(model, 2, lr=0.02)
still_zero = all(bool((getattr(m, n)[getattr(m, n + "_mask") == 0] == 0).all()) for m, n in params)
tuned_acc = accuracy(model)
print(f"fine-tuned accuracy {tuned_acc:.4f}, pruned entries still zero: {still_zero}")
for m, n in params + [(model.fc2, "bias"), (model.conv1, "bias")]:
    prune.remove(m, n)
print(f"after remove: is_pruned {prune.is_pruned(model)}, parameters "
      f"{sorted(n for n, _ in model.named_parameters())}")
print(f"accuracy unchanged by remove: {accuracy(model) == tuned_acc}")
print(f"RESULT {dense_acc:.4f} {pruned_acc:.4f} {tuned_acc:.4f} {global_sparsity:.4f}")
