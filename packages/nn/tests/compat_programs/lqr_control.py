"""Linear control of a cart-pole linearization, in the style of the public differentiable-control
and system-identification notebooks written in PyTorch: zero-order-hold discretization by the
Van Loan block matrix_exp, stability from torch.linalg.eig's complex eigenvalues (.abs(),
.angle(), real / imag parts), controllability through matrix_power and matrix_rank, the discrete
algebraic Riccati equation by fixed-point iteration with linalg.solve, the closed-loop Lyapunov
equation solved through torch.kron and checked, a symmetric-indefinite KKT system solved with
torch.linalg.ldl_factor / ldl_solve against linalg.solve, a rollout whose running cost is
integrated with torch.trapezoid / cumulative_trapezoid, and the LQR weight learned by
differentiating through the unrolled Riccati iterations (imitation of an expert gain, Adam).
Float64 and deterministic: torch and ember print the same numbers. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first imitation loss> <last imitation loss> <spectral radius>."""

import torch

torch.set_default_dtype(torch.float64)

g, mc, mp, pole, dt = 9.81, 1.0, 0.1, 0.5, 0.05
A = torch.tensor([[0.0, 1.0, 0.0, 0.0],
                  [0.0, 0.0, -mp * g / mc, 0.0],
                  [0.0, 0.0, 0.0, 1.0],
                  [0.0, 0.0, (mc + mp) * g / (pole * mc), 0.0]])
B = torch.tensor([[0.0], [1.0 / mc], [0.0], [-1.0 / (pole * mc)]])
n, m = B.shape

# zero-order hold: expm([[A, B], [0, 0]] dt) = [[Ad, Bd], [0, I]]
M = torch.zeros(n + m, n + m)
M[:n, :n], M[:n, n:] = A, B
E = torch.linalg.matrix_exp(M * dt)
Ad, Bd = E[:n, :n], E[:n, n:]
print("Ad[0]", [round(v, 6) for v in Ad[0].tolist()], "Bd", [round(v, 6) for v in Bd[:, 0].tolist()])
ev = torch.linalg.eigvals(Ad)
print("open-loop |eig|", sorted(round(v, 6) for v in ev.abs().tolist()), ev.dtype,
      "unstable:", bool((ev.abs() > 1 + 1e-9).any()))
C = torch.cat([torch.linalg.matrix_power(Ad, k) @ Bd for k in range(n)], dim=1)
print("controllability rank", torch.linalg.matrix_rank(C).item(), "cond",
      f"{torch.linalg.cond(C).item():.4e}")


def dare(Ad, Bd, Q, R, iters=300):
    P = Q.clone()
    for _ in range(iters):
        K = torch.linalg.solve(R + Bd.T @ P @ Bd, Bd.T @ P @ Ad)
        P = Q + Ad.T @ P @ (Ad - Bd @ K)
        P = 0.5 * (P + P.T)
    return P, K


Q, R = torch.diag(torch.tensor([1.0, 0.1, 10.0, 0.1])), torch.tensor([[0.5]])
P, K = dare(Ad, Bd, Q, R, iters=1500)
res = Q + Ad.T @ P @ Ad - Ad.T @ P @ Bd @ torch.linalg.solve(R + Bd.T @ P @ Bd, Bd.T @ P @ Ad) - P
print("riccati residual small:", res.abs().max().item() < 1e-8, "K", [round(v, 4) for v in K[0].tolist()])
Acl = Ad - Bd @ K
eig = torch.linalg.eig(Acl)
rho = eig.eigenvalues.abs().max().item()
print(f"closed-loop spectral radius {rho:.6f}", "complex pairs:",
      int((eig.eigenvalues.imag.abs() > 1e-12).sum().item()),
      "angles", sorted(round(abs(a), 5) for a in eig.eigenvalues.angle().tolist()))
V = eig.eigenvectors
print("eigvec check:", torch.allclose(Acl.to(V.dtype) @ V, V * eig.eigenvalues, atol=1e-10))

# discrete Lyapunov: X = Acl X Acl^T + W, vectorized with kron
W = torch.eye(n) * 0.01
X = torch.linalg.solve(torch.eye(n * n) - torch.kron(Acl, Acl), W.reshape(-1)).reshape(n, n)
print("lyapunov residual small:", (Acl @ X @ Acl.T + W - X).abs().max().item() < 1e-12,
      "stationary state std", [round(v, 5) for v in X.diagonal().sqrt().tolist()])

# an equality-constrained step: KKT = [[H, G^T], [G, 0]] is symmetric indefinite
H = Q + K.T @ K
G = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
KKT = torch.cat([torch.cat([H, G.T], 1), torch.cat([G, torch.zeros(1, 1)], 1)], 0)
rhs = torch.cat([-torch.ones(n), torch.tensor([0.3])])[:, None]
LD, piv = torch.linalg.ldl_factor(KKT)
sol = torch.linalg.ldl_solve(LD, piv, rhs)
print("ldl == solve:", torch.allclose(sol, torch.linalg.solve(KKT, rhs)), "constraint",
      round((G @ sol[:n]).item(), 10), "pivots", piv.tolist())

# rollout and integrated cost
x = torch.tensor([0.0, 0.0, 0.2, 0.0])
xs, us = [x], []
for t in range(100):
    u = -(K @ x)
    x = Ad @ x + Bd @ u
    xs.append(x)
    us.append(u)
xs, us = torch.stack(xs), torch.stack(us)
cost = (xs[:-1] @ Q * xs[:-1]).sum(1) + (us @ R * us).sum(1)
tgrid = torch.arange(100) * dt
print(f"angle after 5 s {xs[-1, 2].item():.3e} cost integral {torch.trapezoid(cost, dx=dt).item():.6f}",
      "cumulative", [round(v, 6) for v in torch.cumulative_trapezoid(cost, tgrid)[[9, 49, 98]].tolist()])

# learn diagonal Q weights so that the LQR gain imitates an expert's
log_q = torch.zeros(n, requires_grad=True)
opt = torch.optim.Adam([log_q], lr=0.1)
losses = []
for step in range(40):
    _, K_learn = dare(Ad, Bd, torch.diag(log_q.exp()), R, iters=80)
    loss = ((K_learn - K) ** 2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print("learned q", [round(v, 3) for v in log_q.exp().tolist()])
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {rho:.6f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
