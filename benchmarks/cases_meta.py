"""The meta device: building a GPT-2-XL-shaped Transformer (1.56 billion parameters) without
memory, as users do before `to_empty` + `load_state_dict` (or sharding). Each measurement runs
in a fresh interpreter (so resident memory is the build's alone): the time to construct the
model under `with <fw>.device("meta")`, including every parameter's init, and the growth of the
process's resident set (VmRSS) over the build, in MiB. The model code is the same for both
frameworks (`import <fw> as torch`)."""

from __future__ import annotations

import os
import subprocess
import sys

import harness
from harness import SelfTimed, case

harness.UNITS.setdefault("MiB", float(1 << 20))
harness.UNIT_LABELS.setdefault("MiB", "MiB")

GPT2_XL = dict(vocab=50257, ctx=1024, n_layer=48, n_embd=1600, n_head=25)

_SCRIPT = r'''
import time
import {fw} as torch
from {fw} import nn

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_proj = nn.Linear(4 * d, d)

class GPT(nn.Module):
    def __init__(self, vocab, ctx, n_layer, n_embd, n_head):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(ctx, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        for name, p in self.named_parameters():  # GPT-2's init
            if p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.02)

torch.ones(1)  # warm the library (not part of the build)
r0 = rss()
t0 = time.perf_counter()
with torch.device("meta"):
    model = GPT({vocab}, {ctx}, {n_layer}, {n_embd}, {n_head})
t = time.perf_counter() - t0
n = sum(p.numel() for p in model.parameters())
assert n > 1_500_000_000 and all(p.device.type == "meta" for p in model.parameters())
print(t, rss() - r0, n)
'''


def _measure(fw: str) -> tuple[float, float]:
    env = dict(os.environ)
    env.pop("PYTHONSTARTUP", None)
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(fw=fw, **GPT2_XL)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise NotImplementedError(f"{fw}: {proc.stderr.strip().splitlines()[-1:]}")
    t, rss, _ = proc.stdout.split()
    return float(t), float(rss)


@case("meta/gpt2-xl build", unit="ms", check=False, repeats=(5, 1),
      doc="GPT-2-XL-shaped model (1.56B params) built and initialized on meta, fresh process")
def _gpt2_build(fw):
    return SelfTimed(lambda: _measure(fw.name)[0])


@case("meta/gpt2-xl build RSS", unit="MiB", check=False, repeats=(3, 1),
      doc="resident memory grown by that build (VmRSS after - before), MiB")
def _gpt2_rss(fw):
    return SelfTimed(lambda: _measure(fw.name)[1])
