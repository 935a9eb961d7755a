"""Reservoir computing with an echo state network, in the style of public ReservoirPy-like
PyTorch code: a sparse random reservoir (NumPy mask) rescaled to a target spectral radius
found by torch.linalg.eigvals (complex abs max), an input matrix and bias, leaky-integrator
states collected with a washout, a ridge-regression readout solved three ways (linalg.solve on
the normal equations, cholesky + cholesky_solve, and lstsq on the Tikhonov-augmented system, compared by their fits),
the echo-state property checked by forgetting of two different initial states, teacher-forced
one-step prediction and a free-running closed-loop forecast on the Mackey-Glass series
(integrated in NumPy), the NRMSE, and a gradient-trained readout (Adam on the same features)
for comparison. float64 throughout. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <one-step nrmse> <closed-loop steps
under 0.1 error> <adam readout nrmse>."""

import numpy as np
import torch

rng = np.random.default_rng(156)
torch.set_default_dtype(torch.float64)


def mackey_glass(n, tau=17, beta=0.2, gamma=0.1, p=10, dt=1.0, x0=1.2):
    hist = int(tau / dt)
    x = np.full(n + hist, x0)
    for t in range(hist, n + hist - 1):
        xt = x[t - hist]
        x[t + 1] = x[t] + dt * (beta * xt / (1 + xt ** p) - gamma * x[t])
    return x[hist:]


series = mackey_glass(1600)
series = torch.from_numpy(np.tanh(series - 1.0))
print(f"series mean {series.mean().item():.5f} std {series.std().item():.5f}")

N, LEAK, RHO, RIDGE, WASH = 120, 0.3, 0.9, 1e-6, 100
W = rng.normal(size=(N, N)) * (rng.random((N, N)) < 0.1)
W = torch.from_numpy(W)
rho0 = torch.linalg.eigvals(W).abs().max()
W = W * (RHO / rho0)
eig = torch.linalg.eigvals(W)
print(f"spectral radius before {rho0.item():.5f} after {eig.abs().max().item():.5f} eigvals dtype {eig.dtype}")
W_in = torch.from_numpy(rng.uniform(-0.5, 0.5, (N, 1)))
bias = torch.from_numpy(rng.uniform(-0.2, 0.2, N))


def step(x, u):
    pre = W @ x + W_in @ u.reshape(1) + bias
    return (1 - LEAK) * x + LEAK * torch.tanh(pre)


def run(inputs, x=None):
    x = torch.zeros(N) if x is None else x
    states = []
    for u in inputs:
        x = step(x, u)
        states.append(x)
    return torch.stack(states), x


# echo-state property: two different initial states forget their difference
xa, xb = torch.from_numpy(rng.normal(size=N)), torch.zeros(N)
sa, _ = run(series[:200], xa)
sb, _ = run(series[:200], xb)
print(f"state difference after 10 steps {(sa[9] - sb[9]).norm().item():.4f} after 200 {(sa[-1] - sb[-1]).norm().item():.2e}")

T_TRAIN = 1000
states, x_last = run(series[:T_TRAIN])
X = torch.cat([torch.ones(T_TRAIN, 1), states], 1)[WASH:]
Y = series[1:T_TRAIN + 1][WASH:].unsqueeze(1)
A = X.T @ X + RIDGE * torch.eye(N + 1)
w_solve = torch.linalg.solve(A, X.T @ Y)
L = torch.linalg.cholesky(A)
w_chol = torch.cholesky_solve(X.T @ Y, L)
X_aug = torch.cat([X, np.sqrt(RIDGE) * torch.eye(N + 1)])
Y_aug = torch.cat([Y, torch.zeros(N + 1, 1)])
w_lstsq = torch.linalg.lstsq(X_aug, Y_aug).solution
fit = X @ w_solve
print(f"fits agree: solve == cholesky_solve {torch.allclose(X @ w_chol, fit, atol=1e-7)} "
      f"solve == lstsq {torch.allclose(X @ w_lstsq, fit, atol=1e-6)}")


def nrmse(pred, target):
    return ((pred - target).pow(2).mean().sqrt() / target.std()).item()


test_states, _ = run(series[T_TRAIN:1400], x_last)
Xt = torch.cat([torch.ones(400, 1), test_states], 1)
one_step = (Xt @ w_solve).squeeze(1)
e1 = nrmse(one_step, series[T_TRAIN + 1:1401])
print(f"teacher-forced one-step nrmse {e1:.3e}")

# closed loop: the prediction becomes the next input
x = x_last
u = series[T_TRAIN]
preds = []
for t in range(200):
    x = step(x, u)
    u = (torch.cat([torch.ones(1), x]) @ w_solve).squeeze()
    preds.append(u)
preds = torch.stack(preds)
err = (preds - series[T_TRAIN + 1:T_TRAIN + 201]).abs()
horizon = int((err > 0.1).nonzero()[0, 0]) if bool((err > 0.1).any()) else 200
print(f"closed-loop error after 50 steps {err[49].item():.3e}, stays under 0.1 for {horizon} steps")

w = torch.zeros(N + 1, 1, requires_grad=True)
opt = torch.optim.Adam([w], lr=0.05)
for it in range(300):
    loss = ((X @ w - Y) ** 2).mean() + RIDGE * w.pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
e_adam = nrmse((Xt @ w.detach()).squeeze(1), series[T_TRAIN + 1:1401])
print(f"adam readout nrmse {e_adam:.4f} (final train mse {loss.item():.3e})")
print(f"RESULT {e1:.3e} {horizon} {e_adam:.4f}")
