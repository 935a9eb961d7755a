"""Hessian spectrum analysis of a trained network, in the style of the public PyHessian /
"loss-landscape" code: the Hessian-vector product by double backward (torch.autograd.grad with
create_graph=True on the flat gradient against a list of vectors), the top eigenvalue by power
iteration with the vector normalized across the parameter list, the trace by Hutchinson's
estimator with Rademacher vectors from NumPy, the eigenvalue density's extremes by Lanczos
(the tridiagonal built with torch.diag(..., 1) and its eigenpairs by torch.linalg.eigh),
everything checked against the exact Hessian from torch.autograd.functional.hessian of the
loss as a function of the flat parameter vector (torch.nn.utils.parameters_to_vector /
vector_to_parameters, torch.func.functional_call), torch.autograd.functional.hvp and vhp
agreeing, torch.func.hessian on a small function, a 1-D loss slice along the top eigenvector,
and grad(allow_unused=True, materialize_grads=True) for an unused parameter. float64.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <top eigenvalue> <trace estimate> <exact trace>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call
from torch.nn.utils import parameters_to_vector, vector_to_parameters

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(9)
X = torch.from_numpy(rng.normal(size=(128, 4)))
y = ((X[:, 0] - X[:, 1] ** 2 + 0.3 * X[:, 2] > 0) ^ torch.from_numpy(rng.random(128) < 0.2)).long()  # 20% label noise
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        self.unused = nn.Linear(1, 1)

    def forward(self, x):
        return self.body(x)


model = Net()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.5, p.shape)))
opt = torch.optim.LBFGS([p for n, p in model.named_parameters() if not n.startswith("unused")], max_iter=25)


def closure():
    opt.zero_grad()
    loss = F.cross_entropy(model(X), y)
    loss.backward()
    return loss


print(f"loss before {closure().item():.6f}")
opt.step(closure)
print(f"loss after lbfgs {closure().item():.6f}")
params = [p for n, p in model.named_parameters() if not n.startswith("unused")]
loss = F.cross_entropy(model(X), y)
grads = torch.autograd.grad(loss, params, create_graph=True)


def hvp(vs):
    return torch.autograd.grad(grads, params, grad_outputs=vs, retain_graph=True)


def normalize(vs):
    n = torch.sqrt(sum((v * v).sum() for v in vs))
    return [v / n for v in vs]


v = normalize([torch.from_numpy(rng.normal(size=p.shape)) for p in params])
eig = 0.0
for i in range(100):
    Hv = hvp(v)
    new = sum((a * b).sum() for a, b in zip(Hv, v)).item()
    v = normalize(Hv)
    if abs(new - eig) < 1e-10 * abs(new):
        break
    eig = new
print(f"power iteration: top eigenvalue {eig:.6f} after {i + 1} iterations")

est = []
for _ in range(200):
    z = [torch.from_numpy(rng.choice([-1.0, 1.0], size=p.shape)) for p in params]
    est.append(sum((a * b).sum() for a, b in zip(hvp(z), z)).item())
trace_est = float(np.mean(est))

m = 12
q = normalize([torch.from_numpy(rng.normal(size=p.shape)) for p in params])
Q, alphas, betas, q_prev, beta = [], [], [], None, 0.0
for j in range(m):
    Q.append(q)
    w = hvp(q)
    alpha = sum((a * b).sum() for a, b in zip(w, q))
    w = [wi - alpha * qi - (beta * pi if q_prev is not None else 0) for wi, qi, pi in zip(w, q, q_prev or q)]
    for old in Q:  # full reorthogonalization
        c = sum((a * b).sum() for a, b in zip(w, old))
        w = [wi - c * oi for wi, oi in zip(w, old)]
    alphas.append(alpha)
    beta = torch.sqrt(sum((wi * wi).sum() for wi in w))
    betas.append(beta)
    q_prev, q = q, [wi / beta for wi in w]
Tm = torch.diag(torch.stack(alphas)) + torch.diag(torch.stack(betas[:-1]), 1) + torch.diag(torch.stack(betas[:-1]), -1)
ritz = torch.linalg.eigh(Tm).eigenvalues
print(f"lanczos {m} steps: ritz max {ritz[-1].item():.6f} min {ritz[0].item():.6f}")

flat = parameters_to_vector(params).detach()
names = [n for n, _ in model.named_parameters() if not n.startswith("unused")]


def loss_of_flat(w):
    chunks, i = {}, 0
    for n, p in zip(names, params):
        chunks[n] = w[i:i + p.numel()].view_as(p)
        i += p.numel()
    return F.cross_entropy(functional_call(model, chunks, (X,)), y)


H = torch.autograd.functional.hessian(loss_of_flat, flat)
ev = torch.linalg.eigvalsh(H)
print(f"exact: {H.shape[0]} params, top {ev[-1].item():.6f} bottom {ev[0].item():.6f} trace {H.trace().item():.6f} "
      f"symmetric {torch.allclose(H, H.T, atol=1e-10)}")
print(f"power matches exact: {abs(eig - ev[-1].item()) < 1e-5 * ev[-1].item()} lanczos max matches: {abs(ritz[-1].item() - ev[-1].item()) < 1e-6} "
      f"trace estimate within 10%: {abs(trace_est - H.trace().item()) < 0.1 * H.trace().item()}")
u = torch.from_numpy(rng.normal(size=flat.shape))
_, hv = torch.autograd.functional.hvp(loss_of_flat, flat, u)
_, vh = torch.autograd.functional.vhp(loss_of_flat, flat, u)
print(f"hvp == H u: {torch.allclose(hv, H @ u)} vhp == hvp: {torch.allclose(hv, vh)}")
f = lambda a: (a[0] ** 3 * a[1] + torch.sin(a[1])).sum()  # noqa: E731
print(f"func.hessian {[[round(x, 4) for x in r] for r in torch.func.hessian(f)(torch.tensor([1.0, 2.0])).tolist()]}")
top = torch.cat([t.flatten() for t in v])
curve = [loss_of_flat(flat + a * top).item() for a in np.linspace(-1, 1, 5)]
print(f"slice along top eigenvector {[round(c, 5) for c in curve]}")
g = torch.autograd.grad(F.cross_entropy(model(X), y), [params[0], model.unused.weight], allow_unused=True, materialize_grads=True)
print(f"unused parameter grad materialized: {g[1].shape} {g[1].abs().sum().item()}")
vector_to_parameters(flat * 0, params)
print(f"vector_to_parameters zeroed: {all(bool((p == 0).all()) for p in params)}")
print(f"RESULT {eig:.6f} {trace_est:.6f} {H.trace().item():.6f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
