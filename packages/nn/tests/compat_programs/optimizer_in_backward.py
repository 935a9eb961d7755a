"""Memory-saving training tricks built on autograd and module hooks, in the style of the PyTorch
"optimizer step in backward" recipe and of the activation-statistics / debugging utilities of
training frameworks: one optimizer per parameter stepped from
Tensor.register_post_accumulate_grad_hook (the gradient freed right after), checked to give the
same weights as the usual loss.backward(); opt.step() loop; torch.autograd.graph.
register_multi_grad_hook (mode="all" and mode="any") counting when the gradients of a group are
ready; global module hooks (nn.modules.module.register_module_forward_pre_hook /
register_module_forward_hook / register_module_full_backward_hook) collecting activation
statistics for every layer, removed through their handles; forward hooks with with_kwargs=True
and always_call=True (run even when forward raises), prepend=True ordering of hooks; a forward
pre-hook rewriting a keyword argument; torch.nn.utils.stateless.functional_call with a tied
weight; and retain_grad on an intermediate. Weights and data from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <max weight difference>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
)

rng = np.random.default_rng(29)


def make_model():
    r = np.random.default_rng(0)
    m = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 3))
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.4, p.shape).astype(np.float32)))
    return m


X = torch.from_numpy(rng.normal(0, 1, (64, 6)).astype(np.float32))
Y = torch.from_numpy(rng.integers(0, 3, 64))

# ---- the usual loop ----
ref = make_model()
opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.01)
for step in range(20):
    loss = F.cross_entropy(ref(X), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()

# ---- optimizer in backward ----
model = make_model()
opt_dict = {p: torch.optim.AdamW([p], lr=1e-2, weight_decay=0.01) for p in model.parameters()}
hook_calls = []


def optimizer_hook(param):
    opt_dict[param].step()
    opt_dict[param].zero_grad()
    hook_calls.append(param.shape)


handles = [p.register_post_accumulate_grad_hook(optimizer_hook) for p in model.parameters()]
losses = []
for step in range(20):
    loss = F.cross_entropy(model(X), Y)
    loss.backward()
    losses.append(loss.item())
    if step % 5 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} grads freed: {all(p.grad is None for p in model.parameters())}")
diff = max((a - b).abs().max().item() for a, b in zip(ref.parameters(), model.parameters()))
print(f"same weights as the usual loop: {diff < 1e-5} hook calls {len(hook_calls)}")
print("last hooked shapes", [tuple(s) for s in hook_calls[:3]])
for h in handles:
    h.remove()

# ---- multi-grad hooks ----
events = []
first, last = model[0], model[4]
h_all = torch.autograd.graph.register_multi_grad_hook(
    [first.weight, last.weight], lambda grads: events.append(("all", [g is not None for g in grads])))
h_any = torch.autograd.graph.register_multi_grad_hook(
    [first.weight, last.weight], lambda g: events.append(("any", tuple(g.shape))), mode="any")
F.cross_entropy(model(X), Y).backward()
print("multi-grad hooks:", events)
h_all.remove()
h_any.remove()
model.zero_grad()
# only the last layer's gradient (backward(inputs=...)): "all" still fires, with None for the missing one
events.clear()
h_all = torch.autograd.graph.register_multi_grad_hook(
    [first.weight, last.weight], lambda grads: events.append(("all", [g is not None for g in grads])))
F.cross_entropy(model(X), Y).backward(inputs=[last.weight])
print("partial backward:", events)
h_all.remove()

# ---- global module hooks: activation statistics ----
stats, order = {}, []
names = {m: n for n, m in model.named_modules()}
pre = register_module_forward_pre_hook(lambda m, inp: order.append(type(m).__name__))
fwd = register_module_forward_hook(
    lambda m, inp, out: stats.__setitem__(names.get(m, "?"), (round(out.mean().item(), 4), round(out.std().item(), 4)))
    if isinstance(m, nn.Linear) else None)
bwd = register_module_full_backward_hook(
    lambda m, gin, gout: stats.__setitem__("grad " + names.get(m, "?"), round(gout[0].norm().item(), 5))
    if isinstance(m, nn.Linear) else None)
F.cross_entropy(model(X), Y).backward()
print("forward order", order)
for k in sorted(stats):
    print(f"  {k:8s} {stats[k]}")
for h in (pre, fwd, bwd):
    h.remove()
order.clear()
model(X)
print("after remove:", order)

# ---- with_kwargs, always_call, prepend ----


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x, *, scale=1.0, fail=False):
        if fail:
            raise RuntimeError("forward failed")
        return self.lin(x) * scale


s = Scaled()
seen = []
s.register_forward_pre_hook(lambda m, args, kwargs: (args, {**kwargs, "scale": 2.0}), with_kwargs=True)
s.register_forward_hook(lambda m, args, kwargs, out: seen.append(("kw", sorted(kwargs))), with_kwargs=True)
s.register_forward_hook(lambda m, args, out: seen.append(("first", None)), prepend=True)
s.register_forward_hook(lambda m, args, out: seen.append(("always", out is None)), always_call=True)
xin = torch.ones(1, 3)
out = s(xin, scale=0.5)
print("pre-hook rewrote scale:", torch.allclose(out, s.lin(xin) * 2.0), "hooks", seen)
seen.clear()
try:
    s(xin, fail=True)
except RuntimeError as e:
    print("raised:", type(e).__name__, "forward failed" in str(e), "hooks run:", seen)

# ---- stateless functional_call with tied weights ----
tied = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5, bias=False))
tied[1].weight = tied[0].weight
new_w = torch.ones(5, 4)
out = torch.nn.utils.stateless.functional_call(tied, {"0.weight": new_w}, (torch.tensor([1, 2]),),
                                               tie_weights=True)
print("tied functional_call:", out.tolist()[0], "original untouched:", not torch.equal(tied[0].weight, new_w))

# ---- retain_grad ----
h = model[0](X)
h.retain_grad()
F.cross_entropy(model[1:](h), Y).backward()
print("retained grad", tuple(h.grad.shape), "is_leaf", h.is_leaf, f"norm {h.grad.norm().item():.5f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {diff:.1e}")
