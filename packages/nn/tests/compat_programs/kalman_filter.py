"""A Kalman filter, RTS smoother and system identification with torch.linalg, in the style of
state-space-model notebooks and differentiable-filtering code: a constant-velocity tracker
whose innovation covariance is factored by torch.linalg.cholesky_ex (info checked), gains by
torch.cholesky_solve and torch.linalg.solve_triangular (left=False), the Joseph-form covariance
update kept symmetric, the innovations log-likelihood from the Cholesky diagonal checked against
MultivariateNormal.log_prob; a Rauch-Tung-Striebel smoother with torch.linalg.solve; the
transition matrix re-estimated from the smoothed states by torch.linalg.lstsq (driver="gelsd")
and by an SVD-based pseudo-inverse (torch.linalg.pinv with rtol, and svd(full_matrices=False));
eigenvalues of the estimate by torch.linalg.eigvals and of the steady-state covariance by
torch.linalg.eigh; matrix_rank, slogdet, cond, a failed Cholesky of an indefinite matrix
(cholesky_ex info > 0, torch.linalg.LinAlgError from cholesky); then the process and measurement
noise scales learned by maximizing the likelihood with Adam through the filter. Data from
NumPy, float64: the run is the same on both libraries. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember. Prints RESULT <first nll>
<last nll> <smoother rmse>."""

import math

import numpy as np
import torch
from torch.distributions import MultivariateNormal

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(4)
dt, T = 0.1, 60
F_true = torch.tensor([[1.0, 0, dt, 0], [0, 1.0, 0, dt], [0, 0, 1.0, 0], [0, 0, 0, 1.0]])
Hm = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
q_true, r_true = 0.05, 0.3
states = [torch.tensor([0.0, 0.0, 1.0, 0.5])]
for t in range(T - 1):
    states.append(F_true @ states[-1] + q_true * torch.from_numpy(rng.normal(0, 1, 4)))
X_true = torch.stack(states)
Z = X_true @ Hm.T + r_true * torch.from_numpy(rng.normal(0, 1, (T, 2)))


def kalman(F, Q, R, check=False):
    x, P = torch.zeros(4), torch.eye(4) * 10.0
    xs, Ps, xps, Pps, ll = [], [], [], [], 0.0
    I4 = torch.eye(4)
    for t in range(T):
        xp, Pp = F @ x, F @ P @ F.T + Q
        S = Hm @ Pp @ Hm.T + R
        L, info = torch.linalg.cholesky_ex(S)
        assert info.item() == 0
        innov = Z[t] - Hm @ xp
        # K = Pp H^T S^-1 via S^-1 = L^-T L^-1
        K = torch.cholesky_solve(Hm @ Pp, L).T
        alpha = torch.linalg.solve_triangular(L, innov[:, None], upper=False)
        ll = ll - 0.5 * (alpha.pow(2).sum() + 2 * torch.log(torch.diagonal(L)).sum()
                         + 2 * math.log(2 * math.pi))
        if check and t == 5:
            ref = MultivariateNormal(Hm @ xp, covariance_matrix=S).log_prob(Z[t])
            mine = -0.5 * (alpha.pow(2).sum() + 2 * torch.log(torch.diagonal(L)).sum()
                           + 2 * math.log(2 * math.pi))
            K2 = torch.linalg.solve_triangular(
                L.T, torch.linalg.solve_triangular(L, Hm @ Pp, upper=False), upper=True).T
            K3 = torch.linalg.solve_triangular(L.T, Pp @ Hm.T @ torch.linalg.inv(L), upper=True,
                                               left=False)
            print("step-5 log-lik equals MVN:", torch.allclose(ref, mine), "gains agree:",
                  torch.allclose(K, K2), torch.allclose(K, K3))
        x = xp + K @ innov
        A = I4 - K @ Hm
        P = A @ Pp @ A.T + K @ R @ K.T  # Joseph form
        P = 0.5 * (P + P.T)
        xs.append(x)
        Ps.append(P)
        xps.append(xp)
        Pps.append(Pp)
    return torch.stack(xs), torch.stack(Ps), torch.stack(xps), torch.stack(Pps), ll


Q = q_true ** 2 * torch.eye(4)
R = r_true ** 2 * torch.eye(2)
xf, Pf, xp, Pp, ll = kalman(F_true, Q, R, check=True)
print(f"filter log-lik {ll.item():.4f} filtered rmse {(xf[:, :2] - X_true[:, :2]).pow(2).mean().sqrt().item():.4f}")

# RTS smoother
xs_, Ps_ = [xf[-1]], [Pf[-1]]
for t in range(T - 2, -1, -1):
    G = torch.linalg.solve(Pp[t + 1], F_true @ Pf[t]).T  # Pf F^T Pp^-1
    xs_.insert(0, xf[t] + G @ (xs_[0] - xp[t + 1]))
    Ps_.insert(0, Pf[t] + G @ (Ps_[0] - Pp[t + 1]) @ G.T)
xsm = torch.stack(xs_)
rmse = (xsm[:, :2] - X_true[:, :2]).pow(2).mean().sqrt().item()
print(f"smoothed rmse {rmse:.4f} smoother beats filter:",
      rmse < (xf[:, :2] - X_true[:, :2]).pow(2).mean().sqrt().item())

# system identification: x_{t+1} ~ F x_t
A_, Bm = xsm[:-1], xsm[1:]
sol = torch.linalg.lstsq(A_, Bm, driver="gelsd")
F_ls = sol.solution.T
F_pinv = (torch.linalg.pinv(A_, rtol=1e-10) @ Bm).T
U, Sv, Vh = torch.linalg.svd(A_, full_matrices=False)
F_svd = (Vh.T @ torch.diag(1 / Sv) @ U.T @ Bm).T
print("lstsq rank", sol.rank.item(), "singular values", sol.singular_values.shape,
      "residuals", tuple(sol.residuals.shape))
print("lstsq == pinv == svd:", torch.allclose(F_ls, F_pinv, atol=1e-8), torch.allclose(F_ls, F_svd, atol=1e-8))
print("F estimate diag", [round(v, 3) for v in F_ls.diagonal().tolist()])
ev = torch.linalg.eigvals(F_ls)
print("eigvals dtype", ev.dtype, "max |eig|", round(ev.abs().max().item(), 3))
Pss = Pf[-1]
w, Vv = torch.linalg.eigh(Pss)
print("steady-state cov eigvals", [f"{v:.4e}" for v in w.tolist()],
      "orthonormal:", torch.allclose(Vv.T @ Vv, torch.eye(4), atol=1e-10))
sign, logdet = torch.linalg.slogdet(Pss)
print("slogdet", sign.item(), round(logdet.item(), 4), "rank", torch.linalg.matrix_rank(Pss).item(),
      "cond", f"{torch.linalg.cond(Pss).item():.3f}")
bad = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
L, info = torch.linalg.cholesky_ex(bad)
print("indefinite: info", info.item())
try:
    torch.linalg.cholesky(bad)
except torch.linalg.LinAlgError as e:
    print("LinAlgError:", e)

# learn the noise scales by maximum likelihood
log_q = torch.tensor(math.log(0.2), requires_grad=True)
log_r = torch.tensor(math.log(1.0), requires_grad=True)
opt = torch.optim.Adam([log_q, log_r], lr=0.1)
nlls = []
for step in range(40):
    _, _, _, _, ll = kalman(F_true, log_q.exp() ** 2 * torch.eye(4), log_r.exp() ** 2 * torch.eye(2))
    loss = -ll / T
    opt.zero_grad()
    loss.backward()
    opt.step()
    nlls.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} nll {loss.item():.5f} q {log_q.exp().item():.4f} r {log_r.exp().item():.4f}")
print(f"RESULT {nlls[0]:.5f} {nlls[-1]:.5f} {rmse:.5f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
