"""torch.fx graph passes in the style of the FX tutorials and the model-optimization scripts built
on them: symbolic_trace of a small CNN with a residual add, a flatten and F.relu calls; walking
graph.nodes (op, target, args, users); a pass that swaps F.relu calls for F.gelu and recompiles;
a pass that fuses Conv2d + BatchNorm2d in eval mode by rewriting call_module nodes; ShapeProp to
annotate every node with its output shape; an Interpreter subclass that counts calls and
records activations; subgraph_rewriter.replace_pattern turning x * sigmoid(x) into F.silu; tracer
leaf modules and concrete_args; and the rewritten modules checked against the original outputs,
then fine-tuned for a few steps. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <nodes>."""

import collections

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        return x + h * torch.sigmoid(h)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.stem_bn = nn.BatchNorm2d(4)
        self.block = Block(4)
        self.head = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        x = self.block(x)
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        return self.head(x)


def det_init(model):
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            p.copy_(0.3 * torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.7 + i)
                    .view_as(p))
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.linspace(-0.1, 0.1, m.num_features))
                m.running_var.copy_(torch.linspace(0.9, 1.1, m.num_features))


model = Net()
det_init(model)
model.eval()
x = torch.cos(torch.arange(2 * 64, dtype=torch.float32) * 0.3).view(2, 1, 8, 8)
ref = model(x)

gm = fx.symbolic_trace(model)
print("graph module", type(gm).__name__, isinstance(gm, fx.GraphModule))
ops = collections.Counter(n.op for n in gm.graph.nodes)
print("node ops", sorted(ops.items()))
for n in gm.graph.nodes:
    target = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "?")
    print(f"  {n.op:14s} {n.name:16s} {target:12s} users={len(n.users)} "
          f"args={len(n.args)} kwargs={sorted(n.kwargs)}")
print("traced == eager:", torch.allclose(gm(x), ref, atol=1e-6))
n_nodes = len(gm.graph.nodes)

# ---- a pass: F.relu -> F.gelu ----
swapped = 0
for n in gm.graph.nodes:
    if n.op == "call_function" and n.target is F.relu:
        n.target = F.gelu
        n.kwargs = {}  # F.relu's inplace=False means nothing to gelu
        swapped += 1
gm.recompile()
print("relu -> gelu:", swapped, "changed output:", not torch.allclose(gm(x), ref, atol=1e-4),
      "code mentions gelu:", "gelu" in gm.code)

# ---- a pass: Conv2d + BatchNorm2d fusion ----
fused_gm = fx.symbolic_trace(model)
modules = dict(fused_gm.named_modules())
fused = 0
for n in list(fused_gm.graph.nodes):
    if n.op != "call_module" or not isinstance(modules[n.target], nn.BatchNorm2d):
        continue
    prev = n.args[0]
    if not (isinstance(prev, fx.Node) and prev.op == "call_module" and
            isinstance(modules[prev.target], nn.Conv2d) and len(prev.users) == 1):
        continue
    conv, bn = modules[prev.target], modules[n.target]
    new_conv = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    parent_name, _, attr = prev.target.rpartition(".")
    parent = fused_gm.get_submodule(parent_name) if parent_name else fused_gm
    setattr(parent, attr, new_conv)
    n.replace_all_uses_with(prev)
    fused_gm.graph.erase_node(n)
    fused += 1
fused_gm.graph.lint()
fused_gm.delete_all_unused_submodules()
fused_gm.recompile()
print("fused conv+bn pairs:", fused, "fused == eager:", torch.allclose(fused_gm(x), ref,
                                                                       atol=1e-5),
      "batchnorms left:", sum(isinstance(m, nn.BatchNorm2d) for m in fused_gm.modules()))

# ---- ShapeProp ----
sp_gm = fx.symbolic_trace(model)
ShapeProp(sp_gm).propagate(x)
for n in sp_gm.graph.nodes:
    meta = n.meta.get("tensor_meta")
    if meta is not None and n.op in ("call_module", "call_function"):
        print(f"  shape {n.name:16s} {tuple(meta.shape)} {meta.dtype}")


# ---- an Interpreter that records activations ----
class Recorder(fx.Interpreter):
    def __init__(self, module):
        super().__init__(module)
        self.calls = collections.Counter()
        self.means = {}

    def run_node(self, n):
        out = super().run_node(n)
        self.calls[n.op] += 1
        if isinstance(out, torch.Tensor) and n.op == "call_module":
            self.means[n.name] = round(out.mean().item(), 5)
        return out


rec = Recorder(fx.symbolic_trace(model))
out = rec.run(x)
print("interpreter == eager:", torch.allclose(out, ref, atol=1e-6), sorted(rec.calls.items()))
print("activation means", rec.means)


# ---- replace_pattern: x * sigmoid(x) -> silu ----
def pattern(h):
    return h * torch.sigmoid(h)


def replacement(h):
    return F.silu(h)


rw = fx.symbolic_trace(model)
matches = fx.subgraph_rewriter.replace_pattern(rw, pattern, replacement)
print("replace_pattern matches:", len(matches), "same output:",
      torch.allclose(rw(x), ref, atol=1e-6), "silu in code:", "silu" in rw.code)


# ---- leaf modules and concrete_args ----
class LeafTracer(fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return isinstance(m, Block) or super().is_leaf_module(m, qualname)


graph = LeafTracer().trace(model)
leaf_gm = fx.GraphModule(model, graph)
print("Block kept as a leaf:", [n.target for n in leaf_gm.graph.nodes if n.op == "call_module"])


def scaled(x, scale=None):
    return x * 2 if scale is None else x * scale


cgm = fx.symbolic_trace(scaled, concrete_args={"scale": None})
print("concrete_args:", cgm(torch.tensor([1.5])).tolist(),
      len([n for n in cgm.graph.nodes if n.op == "placeholder"]))

# ---- fine-tune the fused model ----
fused_gm.train()
opt = torch.optim.SGD(fused_gm.parameters(), lr=0.05, momentum=0.9)
target = torch.tensor([0, 2])
losses = []
for step in range(20):
    loss = F.cross_entropy(fused_gm(x), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(f"fine-tune {losses[0]:.5f} -> {losses[-1]:.5f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {n_nodes}")
