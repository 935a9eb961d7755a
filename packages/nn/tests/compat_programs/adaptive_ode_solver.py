"""An adaptive-step ODE solver and a neural ODE trained through it, in the style of the public
torchdiffeq-like "dopri5 from scratch" code: the Dormand-Prince 5(4) Butcher tableau held as
tensors, stages combined with torch.stack and tensordot, the embedded error estimate scaled by
rtol / atol (the mixed RMS norm through torch.linalg.vector_norm), step acceptance with
torch.where-free Python control flow on .item() values, the step-size controller (safety
factor, clamp of the growth factor, a minimum step), dense output at requested times by cubic
Hermite interpolation, counting function evaluations with a wrapper module, and a neural ODE
(an MLP vector field) fitted to a damped spiral by backpropagating through the accepted steps
(Adam, gradient clipping); integration in float64 is checked against the exact solution of a
linear system (torch.linalg.matrix_exp). Deterministic: torch and ember print the same numbers.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <steps taken>."""

import numpy as np
import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)

C = torch.tensor([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0])
A = [torch.tensor(r) for r in ([], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
                               [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
                               [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
                               [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])]
B5 = torch.tensor([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0])
B4 = torch.tensor([5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40])


class Counted(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f, self.nfe = f, 0

    def forward(self, t, y):
        self.nfe += 1
        return self.f(t, y)


def dopri5(f, y0, t_eval, rtol=1e-6, atol=1e-8, h0=0.05):
    t, y, h = float(t_eval[0]), y0, h0
    k1 = f(t, y)
    out, accepted, rejected, i = [y0], 0, 0, 1
    while i < len(t_eval):
        t_end = float(t_eval[-1])
        h = min(h, t_end - t)
        ks = [k1]
        for s in range(1, 7):
            ys = y + h * torch.tensordot(A[s], torch.stack(ks), dims=1)
            ks.append(f(t + float(C[s]) * h, ys))
        K = torch.stack(ks)
        y5 = y + h * torch.tensordot(B5, K, dims=1)
        err = h * torch.tensordot(B5 - B4, K, dims=1)
        scale = atol + rtol * torch.maximum(y.abs(), y5.abs())
        en = (torch.linalg.vector_norm(err / scale) / err.numel() ** 0.5).item()
        if en <= 1.0:
            # dense output by cubic Hermite between (t, y, k1) and (t + h, y5, k7)
            while i < len(t_eval) and float(t_eval[i]) <= t + h + 1e-12:
                s = (float(t_eval[i]) - t) / h
                h00, h10 = 2 * s ** 3 - 3 * s ** 2 + 1, s ** 3 - 2 * s ** 2 + s
                h01, h11 = -2 * s ** 3 + 3 * s ** 2, s ** 3 - s ** 2
                out.append(h00 * y + h10 * h * k1 + h01 * y5 + h11 * h * ks[6])
                i += 1
            t, y, k1 = t + h, y5, ks[6]
            accepted += 1
        else:
            rejected += 1
        factor = 0.9 * max(en, 1e-10) ** -0.2
        h = max(h * min(5.0, max(0.2, factor)), 1e-6)
    return torch.stack(out), accepted, rejected


# exact check on a linear system y' = M y
M = torch.tensor([[-0.1, -1.0], [1.0, -0.1]])
y0 = torch.tensor([2.0, 0.0])
ts = torch.linspace(0, 10, 21)
lin = Counted(lambda t, y: M @ y)
ys, acc, rej = dopri5(lin, y0, ts)
exact = torch.stack([torch.linalg.matrix_exp(M * t) @ y0 for t in ts])
print(f"linear system: {acc} accepted, {rej} rejected, {lin.nfe} evaluations, "
      f"max error {(ys - exact).abs().max().item():.3e}")
tight, acc2, _ = dopri5(lin, y0, ts, rtol=1e-9, atol=1e-11)
print("tighter tolerance: more steps", acc2 > acc, "smaller error",
      (tight - exact).abs().max().item() < (ys - exact).abs().max().item())
print("tableau rows sum to c:", torch.allclose(torch.stack([a.sum() for a in A[1:]]), C[1:]),
      "weights sum to 1:", round(B5.sum().item(), 12), round(B4.sum().item(), 12))


class Field(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 2))

    def forward(self, t, y):
        return self.net(y ** 3)


rng = np.random.default_rng(29)
true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])
t_obs = torch.linspace(0, 4, 30)
with torch.no_grad():
    truth, _, _ = dopri5(lambda t, y: (y ** 3) @ true_A, torch.tensor([2.0, 0.0]), t_obs)
field = Counted(Field())
with torch.no_grad():
    for p in field.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.2, p.shape)))
opt = torch.optim.Adam(field.parameters(), lr=0.01)
losses, steps = [], []
for it in range(30):
    pred, acc_i, _ = dopri5(field, torch.tensor([2.0, 0.0]), t_obs, rtol=1e-5, atol=1e-7)
    loss = (pred - truth).abs().mean()
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(field.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
    steps.append(acc_i)
    if it % 10 == 0:
        print(f"iter {it} loss {loss.item():.5f} steps {acc_i} nfe so far {field.nfe}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {steps[-1]}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
