"""Autograd plumbing that memory-saving and debugging code uses, in the style of the public
"saved tensor hooks" / "optimizer step in backward" tutorials and debugging snippets:
torch.autograd.graph.saved_tensors_hooks packing saved activations to float16 (and counting
them), save_on_cpu, an optimizer applied per parameter from register_post_accumulate_grad_hook
(checked against a plain step), Tensor.register_hook rescaling and recording a gradient and its
removal handle, retain_grad on intermediates, grad_fn.name() / next_functions walks of the
graph down to the leaf's AccumulateGrad.variable, the grad modes nested (no_grad inside
inference_mode(False) inside inference_mode, enable_grad inside inference_mode recording
nothing, the decorator forms, set_grad_enabled as a function), is_inference tensors and the
error of saving one for backward, torch.autograd.set_detect_anomaly /
detect_anomaly(check_nan=True) naming the backward that produced a NaN, and torch.profiler.record_function / torch.autograd.profiler.record_function
as labels around a training step. Weights from NumPy: the numbers are the same on both libraries.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <packed tensors>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(2)
X = torch.from_numpy(rng.normal(size=(64, 8)).astype(np.float32))
Y = torch.from_numpy(rng.normal(size=(64, 1)).astype(np.float32)) + X[:, :1] * X[:, 1:2]
W = [rng.normal(0, 0.35, (32, 8)), np.zeros(32), rng.normal(0, 0.2, (32, 32)), np.zeros(32),
     rng.normal(0, 0.2, (1, 32)), np.zeros(1)]


def make():
    m = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 1))
    with torch.no_grad():
        for p, w in zip(m.parameters(), W):
            p.copy_(torch.tensor(w, dtype=torch.float32))
    return m


# saved tensors packed to float16, as activation-compression code does
packed = []


def pack(t):
    packed.append(t.shape)
    return t.dtype, t.to(torch.float16)


def unpack(saved):
    dtype, t = saved
    return t.to(dtype)


m = make()
with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
    loss = F.mse_loss(m(X), Y)
loss.backward()
g16 = m[0].weight.grad.clone()
m.zero_grad()
F.mse_loss(m(X), Y).backward()
rel = ((g16 - m[0].weight.grad).norm() / m[0].weight.grad.norm()).item()
print(f"packed {len(packed)} tensors, fp16 grads close: {rel < 1e-2}")
with torch.autograd.graph.save_on_cpu(pin_memory=False):
    m.zero_grad()
    F.mse_loss(m(X), Y).backward()
print("save_on_cpu grads equal:", torch.allclose(m[0].weight.grad, g16, rtol=1e-2, atol=1e-4))

# the optimizer step inside backward, one parameter at a time
m_ref, m_hook = make(), make()
opt_ref = torch.optim.Adam(m_ref.parameters(), lr=0.01)
opts = {p: torch.optim.Adam([p], lr=0.01) for p in m_hook.parameters()}


def step_hook(p):
    opts[p].step()
    opts[p].zero_grad()


handles = [p.register_post_accumulate_grad_hook(step_hook) for p in m_hook.parameters()]
losses = []
for it in range(40):
    with torch.profiler.record_function("forward"):
        loss = F.mse_loss(m_ref(X), Y)
    opt_ref.zero_grad()
    with torch.autograd.profiler.record_function("backward"):
        loss.backward()
    opt_ref.step()
    F.mse_loss(m_hook(X), Y).backward()
    losses.append(loss.item())
for h in handles:
    h.remove()
print("step-in-backward == step:", all(torch.allclose(a, b, atol=1e-5) for a, b in
                                       zip(m_ref.parameters(), m_hook.parameters())),
      "grads cleared:", all(p.grad is None for p in m_hook.parameters()))
print("losses", [round(v, 5) for v in losses[::10]])

# tensor hooks, retain_grad and the graph
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
seen = []
h = x.register_hook(lambda g: seen.append(g.clone()) or g * 10)
y = x * x
y.retain_grad()
z = (y.sin() * 2).sum()
z.backward()
print("hooked grad", [round(v, 4) for v in x.grad.tolist()], "seen", [round(v, 4) for v in
                                                                      seen[0].tolist()])
print("retained y.grad", [round(v, 4) for v in y.grad.tolist()], "leaf", y.is_leaf,
      "x.is_leaf", x.is_leaf)
h.remove()
x.grad = None
(x * x).sum().backward()
print("after remove", x.grad.tolist())
fn = z.grad_fn
names = [fn.name()]
while fn.next_functions and fn.next_functions[0][0] is not None:
    fn = fn.next_functions[0][0]
    names.append(fn.name())
print("graph", names[:-1], "ends at the leaf:", fn.variable is x)

# grad modes
a = torch.ones(2, requires_grad=True)
with torch.inference_mode():
    inf = a * 2
    with torch.inference_mode(False):
        b = a * 3
        with torch.no_grad():
            c = a * 4
        d = a * 5
    with torch.enable_grad():  # grad mode on, yet inference mode records nothing
        e = a * 6
        mode = torch.is_grad_enabled()
print("modes: inference", inf.requires_grad, inf.is_inference(), "inference_mode(False) inside",
      b.requires_grad, b.is_inference(), "no_grad", c.requires_grad, "after", d.requires_grad)
print("enable_grad inside inference_mode:", mode, e.requires_grad, e.grad_fn, e.is_inference())
with torch.no_grad():
    with torch.enable_grad():
        e = a * 2
    f = a * 2
print("enable_grad in no_grad", e.requires_grad, f.requires_grad, torch.is_grad_enabled())


@torch.no_grad()
def evaluate(t):
    return t * 2, torch.is_grad_enabled()


@torch.inference_mode()
def infer(t):
    return t * 2


@torch.enable_grad()
def with_grad(t):
    return t * 2


out, enabled = evaluate(a)
print("decorated no_grad", out.requires_grad, enabled, "inference_mode",
      infer(a).is_inference(), "enable_grad under no_grad",
      (lambda: with_grad(a).requires_grad)() if True else None)
torch.set_grad_enabled(False)
off = a * 2
torch.set_grad_enabled(True)
print("set_grad_enabled(False)", off.requires_grad, torch.is_grad_enabled(),
      "is_inference_mode_enabled", torch.is_inference_mode_enabled())
with torch.inference_mode():
    frozen = torch.ones(2)
try:
    (frozen * a).sum().backward()
    print("inference tensor saved for backward: allowed")
except RuntimeError as err:
    print("inference tensor saved for backward: RuntimeError", "Inference tensors" in str(err))

# anomaly detection names the backward that made a NaN
w = torch.tensor([0.0, 1.0], requires_grad=True)
try:
    with torch.autograd.detect_anomaly(check_nan=True):
        torch.sqrt(w * 0).sum().backward()
    print("anomaly: none")
except RuntimeError as err:
    print("anomaly: RuntimeError", str(err).split(" returned")[0])
torch.autograd.set_detect_anomaly(False)
print("anomaly enabled", torch.is_anomaly_enabled())
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {len(packed)}")
