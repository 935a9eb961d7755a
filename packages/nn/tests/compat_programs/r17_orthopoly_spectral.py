"""Spectral methods with orthogonal polynomials as numerical-analysis code writes them in
PyTorch: torch.special's Chebyshev (T, U), Legendre, physicists' / probabilists' Hermite and
Laguerre polynomial families checked against their three-term recurrences, Gauss-Legendre and
Gauss-Hermite quadrature nodes by the Golub-Welsch eigenvalue method (torch.linalg.eigh of the
Jacobi matrix), a Chebyshev least-squares fit by torch.linalg.lstsq, Clenshaw summation, a
Chebyshev spectral differentiation matrix solving a boundary value problem with
torch.linalg.solve, and a KAN-style layer with learnable Chebyshev coefficients trained by Adam
on a 1-d regression. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <bvp max error>."""

import math

import numpy as np
import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)
x = torch.linspace(-1, 1, 9)

# three-term recurrences against torch.special
T = [torch.ones_like(x), x.clone()]
U = [torch.ones_like(x), 2 * x]
P = [torch.ones_like(x), x.clone()]
H = [torch.ones_like(x), 2 * x]
He = [torch.ones_like(x), x.clone()]
for n in range(1, 6):
    T.append(2 * x * T[n] - T[n - 1])
    U.append(2 * x * U[n] - U[n - 1])
    P.append(((2 * n + 1) * x * P[n] - n * P[n - 1]) / (n + 1))
    H.append(2 * x * H[n] - 2 * n * H[n - 1])
    He.append(x * He[n] - n * He[n - 1])
xl = torch.linspace(0, 4, 9)
L = [torch.ones_like(xl), 1 - xl]
for n in range(1, 6):
    L.append(((2 * n + 1 - xl) * L[n] - n * L[n - 1]) / (n + 1))
ok = []
for n in range(7):
    ok.append(torch.allclose(torch.special.chebyshev_polynomial_t(x, n), T[n]))
    ok.append(torch.allclose(torch.special.chebyshev_polynomial_u(x, n), U[n]))
    ok.append(torch.allclose(torch.special.legendre_polynomial_p(x, n), P[n]))
    ok.append(torch.allclose(torch.special.hermite_polynomial_h(x, n), H[n]))
    ok.append(torch.allclose(torch.special.hermite_polynomial_he(x, n), He[n]))
    ok.append(torch.allclose(torch.special.laguerre_polynomial_l(xl, n), L[n]))
print(f"recurrences agree: {all(ok)} ({len(ok)} checks)")
print(f"T_5 at x {[round(v, 4) for v in torch.special.chebyshev_polynomial_t(x, 5).tolist()]}")
nt = torch.tensor([0, 1, 2, 3])
print(f"tensor degrees T_n(0.5) {torch.special.chebyshev_polynomial_t(torch.tensor(0.5), nt).tolist()}")
print(f"cos identity T_7(cos t) == cos 7t: {torch.allclose(torch.special.chebyshev_polynomial_t(torch.cos(x), 7), torch.cos(7 * x))}")


def golub_welsch(a, b, mu0):
    """Nodes and weights from the Jacobi matrix with diagonal a and off-diagonal b."""
    J = torch.diag(a) + torch.diag(b, 1) + torch.diag(b, -1)
    evals, evecs = torch.linalg.eigh(J)
    return evals, mu0 * evecs[0] ** 2


n = 8
k = torch.arange(1, n, dtype=torch.float64)
nodes, weights = golub_welsch(torch.zeros(n), k / torch.sqrt(4 * k ** 2 - 1), 2.0)
print(f"gauss-legendre nodes {[round(v, 6) for v in nodes[n // 2:].tolist()]} weights sum {weights.sum().item():.6f}")
exact = [2 / (p + 1) if p % 2 == 0 else 0.0 for p in range(16)]
quad = [(weights * nodes ** p).sum().item() for p in range(16)]
print(f"exact to degree 15: {np.allclose(quad, exact, atol=1e-12)}")
# the Legendre roots: P_8 vanishes at the nodes
print(f"P_8(nodes) max {torch.special.legendre_polynomial_p(nodes, 8).abs().max().item() < 1e-12}")
hn, hw = golub_welsch(torch.zeros(n), torch.sqrt(k / 2), math.sqrt(math.pi))
print(f"gauss-hermite integral of x^4 e^-x^2 {(hw * hn ** 4).sum().item():.8f} exact {3 * math.sqrt(math.pi) / 4:.8f}")

# Chebyshev least-squares fit and Clenshaw evaluation
xs = torch.cos(math.pi * (torch.arange(64) + 0.5) / 64)
f = torch.exp(xs) * torch.sin(3 * xs)
V = torch.stack([torch.special.chebyshev_polynomial_t(xs, j) for j in range(16)], 1)
coef = torch.linalg.lstsq(V, f[:, None]).solution.squeeze(1)
print(f"chebyshev coefficients decay: |c_0..3| {[round(v, 5) for v in coef[:4].abs().tolist()]} |c_15| < 1e-10 {coef[15].abs().item() < 1e-10}")


def clenshaw(c, t):
    b1 = torch.zeros_like(t)
    b2 = torch.zeros_like(t)
    for cj in reversed(c[1:].unbind()):
        b1, b2 = 2 * t * b1 - b2 + cj, b1
    return t * b1 - b2 + c[0]


tt = torch.linspace(-1, 1, 101)
direct = torch.stack([torch.special.chebyshev_polynomial_t(tt, j) for j in range(16)], 1) @ coef
cl = clenshaw(coef, tt)
print(f"clenshaw == direct sum {torch.allclose(cl, direct, atol=1e-13)} fit error < 1e-9 {(cl - torch.exp(tt) * torch.sin(3 * tt)).abs().max().item() < 1e-9}")

# Chebyshev collocation: u'' = exp(4x), u(-1) = u(1) = 0 (Trefethen's p13)
N = 16
j = torch.arange(N + 1)
xc = torch.cos(math.pi * j / N)
c = torch.ones(N + 1)
c[0] = c[N] = 2
c = c * (-1.0) ** j
X = xc.repeat(N + 1, 1).T
dX = X - X.T
D = torch.outer(c, 1 / c) / (dX + torch.eye(N + 1))
D = D - torch.diag(D.sum(1))
D2 = (D @ D)[1:-1, 1:-1]
u = torch.zeros(N + 1)
u[1:-1] = torch.linalg.solve(D2, torch.exp(4 * xc[1:-1]))
exact_u = (torch.exp(4 * xc) - torch.sinh(torch.tensor(4.0)) * xc - torch.cosh(torch.tensor(4.0))) / 16
bvp_err = (u - exact_u).abs().max().item()
print(f"D applied to x^3 == 3x^2: {torch.allclose(D @ xc ** 3, 3 * xc ** 2)} bvp error {bvp_err:.3e}")
print(f"u(0) {u[N // 2].item():.10f}")


class ChebyKAN(nn.Module):
    def __init__(self, fan_in, fan_out, degree):
        super().__init__()
        self.degree = degree
        self.coef = nn.Parameter(torch.zeros(fan_in, fan_out, degree + 1))
        self.register_buffer("ar", torch.arange(degree + 1), persistent=False)

    def forward(self, x):
        x = torch.tanh(x)
        # T_n(cos t) = cos(n t): the basis by acos
        basis = torch.cos(self.ar * torch.acos(x.clamp(-1 + 1e-7, 1 - 1e-7)).unsqueeze(-1))
        return torch.einsum("bid,iod->bo", basis, self.coef)


rng = np.random.default_rng(17)
torch.set_default_dtype(torch.float32)
xtr = torch.from_numpy(rng.uniform(-2, 2, (256, 1)).astype(np.float32))
ytr = torch.sin(2 * xtr) + 0.3 * xtr ** 2
model = nn.Sequential(ChebyKAN(1, 8, 5), ChebyKAN(8, 1, 5))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 1 / 6, p.shape).astype(np.float32)))
print(f"state_dict keys {list(model.state_dict().keys())}")
opt = torch.optim.Adam(model.parameters(), lr=2e-2)
losses = []
for step in range(300):
    loss = nn.functional.mse_loss(model(xtr), ytr)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.5f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {bvp_err:.3e}")
