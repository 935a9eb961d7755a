"""The less common torch.optim optimizers as benchmark and ablation scripts sweep them: NAdam
(momentum_decay, decoupled_weight_decay), RAdam (with and without decoupled weight decay),
Adamax, ASGD (t0 / lambd, its averaged "ax" state), Rprop (etas, step_sizes), Adagrad
(lr_decay, initial_accumulator_value), Adam(amsgrad=True, maximize=True) on a negated objective,
SGD(nesterov=True, weight_decay), AdamW(fused=True) against foreach=False, each on the same MLP
classifier from the same NumPy weights; the optimizer's repr as printed by training logs, its
state keys, step pre/post hooks, zero_grad(set_to_none=False), a state_dict saved mid-run and
loaded into a fresh optimizer (the resumed run ends on the same weights), add_param_group for
a head added later, and per-group hyperparameters read back from param_groups. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <best final loss> <worst final loss>."""

import copy
import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(11)
X = torch.from_numpy(rng.normal(size=(96, 5)).astype(np.float32))
y = torch.from_numpy(((X[:, 0] * X[:, 1] + X[:, 2]).numpy() > 0).astype(np.int64))
W0 = {"0.weight": rng.normal(0, 0.45, (16, 5)), "0.bias": np.zeros(16),
      "2.weight": rng.normal(0, 0.25, (2, 16)), "2.bias": np.zeros(2)}


def make_model():
    m = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 2))
    m.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in W0.items()})
    return m


def loss_of(m):
    return F.cross_entropy(m(X), y)


def run(make_opt, steps=25, sign=1.0):
    m = make_model()
    opt = make_opt(m.parameters())
    first = None
    for _ in range(steps):
        loss = loss_of(m)
        first = loss.item() if first is None else first
        opt.zero_grad()
        (sign * loss).backward()
        opt.step()
    return m, opt, first, loss_of(m).item()


zoo = {
    "NAdam": lambda p: torch.optim.NAdam(p, lr=0.02, momentum_decay=0.004),
    "NAdam-decoupled": lambda p: torch.optim.NAdam(p, lr=0.02, weight_decay=0.1,
                                                   decoupled_weight_decay=True),
    "RAdam": lambda p: torch.optim.RAdam(p, lr=0.03, weight_decay=0.01),
    "RAdam-decoupled": lambda p: torch.optim.RAdam(p, lr=0.03, weight_decay=0.1,
                                                   decoupled_weight_decay=True),
    "Adamax": lambda p: torch.optim.Adamax(p, lr=0.05, betas=(0.8, 0.99)),
    "ASGD": lambda p: torch.optim.ASGD(p, lr=0.2, lambd=1e-3, alpha=0.75, t0=10),
    "Rprop": lambda p: torch.optim.Rprop(p, lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-5, 0.5)),
    "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.2, lr_decay=0.01,
                                             initial_accumulator_value=0.1),
    "SGD-nesterov": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                              weight_decay=1e-3),
    "AdamW-fused": lambda p: torch.optim.AdamW(p, lr=0.02, fused=True),
    "AdamW-loop": lambda p: torch.optim.AdamW(p, lr=0.02, foreach=False),
}
finals, first = {}, None
for name, make in zoo.items():
    m, opt, f0, f1 = run(make)
    first = f0
    finals[name] = f1
    st = opt.state[next(iter(m.parameters()))]
    print(f"{name:16s} loss {f0:.4f} -> {f1:.5f} state {sorted(st.keys())}")
print("fused == loop:", abs(finals["AdamW-fused"] - finals["AdamW-loop"]) < 1e-5)

# maximize=True on the negated loss walks the same path as minimizing the loss
m1, _, _, a = run(lambda p: torch.optim.Adam(p, lr=0.02, amsgrad=True))
m2, opt2, _, b = run(lambda p: torch.optim.Adam(p, lr=0.02, amsgrad=True, maximize=True),
                     sign=-1.0)
print(f"amsgrad {a:.5f} maximize(-loss) {b:.5f} same weights:",
      all(torch.allclose(p, q, atol=1e-6) for p, q in zip(m1.parameters(), m2.parameters())))
print("max_exp_avg_sq kept:", "max_exp_avg_sq" in opt2.state[m2[0].weight])
print(opt2)

# ASGD's averaged parameters
m, opt, _, _ = run(zoo["ASGD"], steps=30)
ax = opt.state[m[2].bias]["ax"]
print("ASGD ax", [round(v, 5) for v in ax.tolist()], "eta",
      round(float(opt.state[m[2].bias]["eta"]), 6), "mu", round(float(opt.state[m[2].bias]["mu"]), 6))

# hooks, zero_grad(set_to_none=False), and a mid-run checkpoint resumed exactly
m = make_model()
opt = torch.optim.NAdam(m.parameters(), lr=0.02)
calls = []
h1 = opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
h2 = opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
for step in range(12):
    opt.zero_grad(set_to_none=False)
    loss_of(m).backward()
    opt.step()
    if step == 5:
        buf = io.BytesIO()
        torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, buf)
h1.remove()
h2.remove()
print("hooks", calls[:4], len(calls), "grad kept as zeros:", m[0].weight.grad is not None)
buf.seek(0)
ck = torch.load(buf)
m_r = make_model()
m_r.load_state_dict(ck["model"])
opt_r = torch.optim.NAdam(m_r.parameters(), lr=0.02)
opt_r.load_state_dict(ck["opt"])
print("resumed step counter", int(opt_r.state[m_r[0].weight]["step"]),
      "mu_product", round(float(opt_r.state[m_r[0].weight]["mu_product"]), 6))
for _ in range(6):
    opt_r.zero_grad()
    loss_of(m_r).backward()
    opt_r.step()
print("resumed == uninterrupted:",
      all(torch.allclose(p, q, atol=1e-6) for p, q in zip(m.parameters(), m_r.parameters())))

# a head added later gets its own group
head = nn.Linear(2, 1)
opt_r.add_param_group({"params": head.parameters(), "lr": 0.5, "betas": (0.5, 0.9)})
print("groups", len(opt_r.param_groups), [g["lr"] for g in opt_r.param_groups],
      opt_r.param_groups[1]["betas"], opt_r.param_groups[1]["momentum_decay"])
sd = copy.deepcopy(opt_r.state_dict())
print("state_dict groups params", [g["params"] for g in sd["param_groups"]])
print(f"RESULT {first:.5f} {min(finals.values()):.5f} {max(finals.values()):.5f}")
