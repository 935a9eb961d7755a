"""Counting FLOPs and timing a model, in the style of the public "FLOP counting with
__torch_dispatch__" gist and the MFU estimates of nanoGPT-like training scripts: a
TorchDispatchMode subclass with a registry keyed by torch.ops.aten packets (aten.mm, aten.addmm,
aten.bmm, aten.convolution) looked up through func._overloadpacket / func.overloadpacket,
shape-based FLOP formulas read from the op's arguments (addmm's mat1 / mat2, convolution's
stride-aware output shape, transposed flag), a per-module breakdown through forward pre-hooks /
hooks that keep a module-name stack, ops compared with `func == aten.mm.default`, the counted
total checked against a closed-form count, the 6 * N * tokens rule of thumb, torch.utils.flop_counter.FlopCounterMode (get_total_flops,
per-module get_flop_counts, a custom_mapping formula), parameter counts
by named_parameters, torch.profiler.record_function labels in prof.key_averages(), and
torch.utils.benchmark.Timer (only what does not depend on the machine is printed). Attention is
written with torch.bmm, as older transformer code does. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <GFLOPs per forward>."""

from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.benchmark as benchmark
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

aten = torch.ops.aten


def prod(xs):
    out = 1
    for v in xs:
        out *= v
    return out


def mm_flop(args, out):
    a, b = args[0], args[1]
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


def addmm_flop(args, out):
    return mm_flop(args[1:], out)


def bmm_flop(args, out):
    a, b = args[0], args[1]
    return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]


def conv_flop(args, out):
    x, w, transposed = args[0], args[1], args[6]
    spatial = out.shape[2:] if not transposed else x.shape[2:]
    return 2 * prod(w.shape) * out.shape[0] * prod(spatial)


REGISTRY = {aten.mm: mm_flop, aten.addmm: addmm_flop, aten.bmm: bmm_flop,
            aten.convolution: conv_flop}


class FlopCounter(TorchDispatchMode):
    def __init__(self, model):
        super().__init__()
        self.counts = defaultdict(lambda: defaultdict(int))
        self.parents = ["Global"]
        self.handles = []
        for name, m in model.named_modules():
            if name:
                self.handles.append(m.register_forward_pre_hook(self._enter(name)))
                self.handles.append(m.register_forward_hook(self._exit(name)))

    def _enter(self, name):
        def hook(mod, args):
            self.parents.append(name)
        return hook

    def _exit(self, name):
        def hook(mod, args, out):
            assert self.parents.pop() == name
        return hook

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        packet = func._overloadpacket
        if packet in REGISTRY:
            flops = REGISTRY[packet](args, out)
            for p in set(self.parents):
                self.counts[p][str(func.overloadpacket)] += flops
        if func == aten.mm.default:
            self.counts["Global"]["mm calls"] += 1
        return out


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.qkv, self.out = h, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        def heads(t):
            return t.reshape(B, T, self.h, D // self.h).transpose(1, 2).reshape(B * self.h, T, -1)

        q, k, v = heads(q), heads(k), heads(v)
        att = torch.bmm(q, k.transpose(1, 2)) / (D // self.h) ** 0.5
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        y = torch.bmm(att.softmax(-1), v).reshape(B, self.h, T, -1).transpose(1, 2).reshape(B, T, D)
        return self.out(y)


class TinyLM(nn.Module):
    def __init__(self, vocab=32, d=32, h=4):
        super().__init__()
        self.stem = nn.Conv1d(d, d, 3, padding=1)
        self.emb = nn.Embedding(vocab, d)
        self.attn = Attention(d, h)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.emb(idx)
        x = x + self.stem(x.transpose(1, 2)).transpose(1, 2)
        x = x + self.attn(x)
        x = x + self.mlp(x)
        return self.head(x)


model = TinyLM()
rng = np.random.default_rng(9)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.2, p.shape).astype(np.float32)))
B, T, V, D = 4, 16, 32, 32
idx = torch.from_numpy(rng.integers(0, V, size=(B, T + 1)))
n_params = sum(p.numel() for p in model.parameters())
n_emb = sum(p.numel() for n, p in model.named_parameters() if n.startswith("emb"))
print(f"params {n_params} non-embedding {n_params - n_emb}")

with torch.no_grad(), FlopCounter(model) as fc:
    model(idx[:, :-1])
total = sum(fc.counts["Global"][k] for k in ("aten.mm", "aten.addmm", "aten.bmm", "aten.convolution"))
for name in ("Global", "stem", "attn", "attn.qkv", "mlp", "head"):
    print(f"{name:9s}", {k: v for k, v in sorted(fc.counts[name].items())})
tok = B * T
closed = (2 * tok * D * 3 * D + 2 * tok * D * D            # qkv, out
          + 2 * 2 * B * T * T * D                           # scores and weighted sum
          + 2 * 2 * tok * D * 4 * D + 2 * tok * D * V       # mlp, head
          + 2 * D * D * 3 * tok)                            # conv
print("counted == closed form:", total == closed, f"GFLOPs {total / 1e9:.6f}",
      f"6*N*tokens {6 * (n_params - n_emb) * tok / 1e9:.6f}")
print("hooks removed:", all(len(m._forward_hooks) == 0 for m in model.modules()))

# the library's counter: per-module counts named by class and attribute path
with torch.no_grad(), FlopCounterMode(display=False, depth=2) as lib:
    model(idx[:, :-1])
counts = lib.get_flop_counts()
print("FlopCounterMode total", lib.get_total_flops(), "== ours:", lib.get_total_flops() == total)
for name in ("TinyLM", "TinyLM.stem", "TinyLM.attn", "TinyLM.attn.qkv", "TinyLM.head"):
    print(f"  {name:16s}", sorted((str(k), v) for k, v in counts[name].items()))
custom = FlopCounterMode(display=False, custom_mapping={torch.ops.aten.bmm: lambda a, b, out_shape=None: 0})
with torch.no_grad(), custom:
    model(idx[:, :-1])
print("custom bmm formula:", custom.get_total_flops() == total - fc.counts["Global"]["aten.bmm"])

opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
losses = []
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for step in range(15):
        with record_function("train_step"):
            logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, V), idx[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses.append(loss.item())
keys = {e.key: e.count for e in prof.key_averages()}
print("profiled train_step calls:", keys.get("train_step"))

timer = benchmark.Timer(stmt="model(x)", globals={"model": model, "x": idx[:, :-1]},
                        label="tinylm", sub_label="fwd", description="cpu", num_threads=1)
m = timer.timeit(3)
print("timer:", type(m).__name__, m.label, m.sub_label, m.task_spec.num_threads, m.median > 0)
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {total / 1e9:.6f}")
