"""Parameter-efficient fine-tuning with LoRA, in the style of the public LoRA / PEFT-like
implementations written in plain PyTorch: a small Transformer classifier pretrained on one task,
then its query/value projections and MLP nn.Linear layers swapped for LoRALinear wrappers found through
named_modules() and put back with setattr on the parent from get_submodule() (the frozen base
weight kept, A initialised with nn.init.kaiming_uniform_(a=math.sqrt(5)), B with zeros, a
scaling of alpha / r, dropout on the adapter input), every base parameter frozen with
requires_grad_(False) and the trainable parameter count printed, the adapted model equal to
the base one before training (B = 0), AdamW over the adapter parameters only, the adapters'
state_dict filtered by name and loaded into a fresh copy with load_state_dict(strict=False)
(missing/unexpected keys printed), the adapters merged into the base weights (torch.addmm) and
unmerged again with the outputs unchanged, and the same adapter as a
torch.nn.utils.parametrize parametrization (W + B A, registered and removed with
leave_parametrized=True). Weights and data from NumPy: the run is the same on both libraries.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <pretrain acc> <before finetune acc> <after finetune acc>."""

import argparse
import copy
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.parametrize as parametrize

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
VOCAB, D, T = 20, 32, 10


class Block(nn.Module):
    def __init__(self, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.q_proj, self.k_proj = nn.Linear(D, D), nn.Linear(D, D)
        self.v_proj, self.o_proj = nn.Linear(D, D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 64), nn.GELU(), nn.Linear(64, D))

    def forward(self, x):
        b, t, _ = x.shape
        h = self.norm1(x)
        q, k, v = (p(h).view(b, t, self.heads, -1).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, D)
        x = x + self.o_proj(a)
        return x + self.mlp(self.norm2(x))


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(1, T, D))
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(D, 2)

    def forward(self, x):
        h = self.blocks(self.emb(x) + self.pos)
        return self.head(h.mean(1))


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r=4, alpha=8, dropout=0.0):
        super().__init__()
        self.base = base
        self.r, self.scaling = r, alpha / r
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout)
        self.merged = False

    def forward(self, x):
        out = self.base(x)
        if not self.merged:
            out = out + (self.dropout(x) @ self.lora_A.T @ self.lora_B.T) * self.scaling
        return out

    @torch.no_grad()
    def merge(self, sign=1.0):
        w = self.base.weight
        w.copy_(torch.addmm(w, self.lora_B, self.lora_A, alpha=sign * self.scaling))
        self.merged = sign > 0


def init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                continue
            scale = 0.5 if p.dim() == 1 else 1 / math.sqrt(p.shape[-1])
            p.copy_(torch.from_numpy(r.normal(0, scale, tuple(p.shape)).astype(np.float32)))


def task(n, rule):
    x = rng.integers(0, VOCAB, (n, T))
    return torch.from_numpy(x), torch.from_numpy(rule(x).astype(np.int64))


pre_x, pre_y = task(256, lambda x: (x[:, :5].sum(1) > x[:, 5:].sum(1)))  # first half bigger?
ft_x, ft_y = task(256, lambda x: ((x == 3).sum(1) > (x == 7).sum(1)))  # more 3s than 7s?
test_x, test_y = task(128, lambda x: ((x == 3).sum(1) > (x == 7).sum(1)))


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def train(model, params, x, y, steps, lr):
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.train()
    for step in range(steps):
        i = (step * 32) % len(x)
        loss = F.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 0:
            print(f"  step {step:2d} loss {loss.item():.4f}")
    return loss.item()


model = Classifier()
init(model, 1)
print("pretraining")
train(model, model.parameters(), pre_x, pre_y, args.steps, 2e-3)
pre_acc = accuracy(model, pre_x, pre_y)
print(f"pretrain accuracy {pre_acc:.4f}")

# swap in the adapters
torch.manual_seed(0)
base = copy.deepcopy(model)
targets = [n for n, m in model.named_modules()
           if isinstance(m, nn.Linear) and n.endswith(("q_proj", "v_proj", "mlp.0", "mlp.2"))]
print(f"adapted layers: {len(targets)}, e.g. {targets[:2]}")
r = np.random.default_rng(2)
for name in targets:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name)
    lora = LoRALinear(getattr(parent, child))
    with torch.no_grad():  # NumPy's numbers instead of kaiming_uniform_'s, for both libraries
        bound = 1 / math.sqrt(lora.lora_A.shape[1])
        lora.lora_A.copy_(torch.from_numpy(r.uniform(-bound, bound, tuple(lora.lora_A.shape))
                                           .astype(np.float32)))
    setattr(parent, child, lora)
for name, p in model.named_parameters():
    p.requires_grad_("lora_" in name or name.startswith("head."))
trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
total = sum(p.numel() for p in model.parameters())
print(f"trainable params: {trainable} || all params: {total} || "
      f"trainable%: {100 * trainable / total:.4f}")
with torch.no_grad():
    same = torch.allclose(model(test_x), base(test_x), atol=1e-6)
print(f"adapted == base before training (B = 0): {same}")
before = accuracy(model, test_x, test_y)
print("fine-tuning the adapters")
train(model, [p for p in model.parameters() if p.requires_grad], ft_x, ft_y, args.steps, 5e-3)
after = accuracy(model, test_x, test_y)
print(f"fine-tune accuracy: before {before:.4f}, after {after:.4f}")
frozen_same = torch.equal(model.blocks[0].q_proj.base.weight,
                          base.blocks[0].q_proj.weight)
print(f"base weights untouched: {frozen_same}")

# save only the adapters, load them into a fresh adapted copy
adapter_sd = {k: v for k, v in model.state_dict().items() if "lora_" in k or k.startswith("head.")}
print(f"adapter state_dict: {len(adapter_sd)} tensors, first {sorted(adapter_sd)[0]}")
fresh = copy.deepcopy(model)
with torch.no_grad():
    for n, p in fresh.named_parameters():
        if "lora_B" in n:
            p.zero_()
result = fresh.load_state_dict(adapter_sd, strict=False)
print(f"missing keys: {len(result.missing_keys)}, unexpected: {result.unexpected_keys}")
with torch.no_grad():
    print(f"reloaded adapters agree: {torch.allclose(fresh(test_x), model(test_x), atol=1e-5)}")

# merge into the base weights and back
model.eval()
with torch.no_grad():
    ref = model(test_x)
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.merge()
    merged = model(test_x)
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.merge(-1.0)
    unmerged = model(test_x)
print(f"merged agrees: {torch.allclose(merged, ref, atol=1e-4)}, "
      f"unmerged agrees: {torch.allclose(unmerged, ref, atol=1e-4)}")


class LoRAParametrization(nn.Module):
    def __init__(self, A, B, scaling):
        super().__init__()
        self.A, self.B, self.scaling = nn.Parameter(A), nn.Parameter(B), scaling

    def forward(self, W):
        return W + self.B @ self.A * self.scaling


lin = base.blocks[0].mlp[0]
adapter = model.blocks[0].mlp[0]
parametrize.register_parametrization(
    lin, "weight", LoRAParametrization(adapter.lora_A.detach().clone(),
                                       adapter.lora_B.detach().clone(), adapter.scaling))
x = torch.from_numpy(rng.normal(size=(3, D)).astype(np.float32))
with torch.no_grad():
    agree = torch.allclose(lin(x), adapter(x), atol=1e-5)
print(f"parametrized: {parametrize.is_parametrized(lin, 'weight')}, "
      f"keys {sorted(k for k in lin.state_dict() if 'parametrizations' in k)}, agrees {agree}")
parametrize.remove_parametrizations(lin, "weight", leave_parametrized=True)
with torch.no_grad():
    print(f"removed (leave_parametrized): {type(lin.weight).__name__}, agrees "
          f"{torch.allclose(lin(x), adapter(x), atol=1e-5)}")
print(f"RESULT {pre_acc:.4f} {before:.4f} {after:.4f}")
