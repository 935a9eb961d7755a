"""A deep equilibrium model (DEQ), in the style of the public "implicit layers" tutorial code
(Kolter, Duvenaud, Johnson): a layer z = tanh(W z + U x + b) solved to its fixed point by
Anderson acceleration (a history of past iterates in preallocated tensors, the bordered
least-squares system solved batched with torch.linalg.solve / solve_ex and its info tensor),
the forward solve run under torch.no_grad, one more differentiable step re-attached to the
graph, and the implicit backward installed with Tensor.register_hook: the adjoint fixed point
g = J^T g + grad found by iterating torch.autograd.grad with retain_graph on a detached copy
(the hook handle removed after use). The implicit gradient is checked against the gradient of
a long unrolled solve, the Jacobian's spectral norm kept below 0.9 with torch.linalg.matrix_norm(ord=2),
and the DEQ is trained with Adam on a small regression. Data and weights from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <grad rel err>."""

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(21)
torch.set_default_dtype(torch.float64)


def anderson(f, x0, m=5, lam=1e-8, max_iter=60, tol=1e-8, beta=1.0):
    bsz, d = x0.shape
    X = torch.zeros(bsz, m, d, dtype=x0.dtype)
    F_ = torch.zeros(bsz, m, d, dtype=x0.dtype)
    X[:, 0], F_[:, 0] = x0, f(x0)
    X[:, 1], F_[:, 1] = F_[:, 0], f(F_[:, 0])
    H = torch.zeros(bsz, m + 1, m + 1, dtype=x0.dtype)
    H[:, 0, 1:] = H[:, 1:, 0] = 1
    y = torch.zeros(bsz, m + 1, 1, dtype=x0.dtype)
    y[:, 0] = 1
    res = []
    for k in range(2, max_iter):
        n = min(k, m)
        G = F_[:, :n] - X[:, :n]
        H[:, 1:n + 1, 1:n + 1] = torch.bmm(G, G.transpose(1, 2)) + lam * torch.eye(n)[None]
        alpha, info = torch.linalg.solve_ex(H[:, :n + 1, :n + 1], y[:, :n + 1])
        assert int(info.abs().sum()) == 0
        alpha = alpha[:, 1:n + 1, 0]
        X[:, k % m] = beta * (alpha[:, None] @ F_[:, :n])[:, 0] + (1 - beta) * (alpha[:, None] @ X[:, :n])[:, 0]
        F_[:, k % m] = f(X[:, k % m])
        res.append(((F_[:, k % m] - X[:, k % m]).norm() / (1e-5 + F_[:, k % m].norm())).item())
        if res[-1] < tol:
            break
    return X[:, k % m], res


class DEQ(nn.Module):
    def __init__(self, d_in, d):
        super().__init__()
        self.U = nn.Linear(d_in, d)
        self.W = nn.Linear(d, d, bias=False)
        self.head = nn.Linear(d, 1)
        self.handles = []

    def f(self, z, x):
        return torch.tanh(self.W(z) + self.U(x))

    def forward(self, x):
        with torch.no_grad():
            z, self.res = anderson(lambda z: self.f(z, x), torch.zeros(x.shape[0], self.W.weight.shape[0]))
        z = self.f(z, x)  # one differentiable step at the fixed point
        z0 = z.clone().detach().requires_grad_()
        f0 = self.f(z0, x)

        def backward_hook(grad):
            g = grad
            for _ in range(80):
                g_new = torch.autograd.grad(f0, z0, g, retain_graph=True)[0] + grad
                if (g_new - g).norm() < 1e-12:
                    break
                g = g_new
            self.handles.pop().remove()
            return g_new

        if z.requires_grad:
            self.handles.append(z.register_hook(backward_hook))
        return self.head(z)


def init(model, scale=0.4):
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(rng.normal(0, scale / np.sqrt(p.shape[-1]), p.shape)))


d_in, d = 3, 16
X = torch.from_numpy(rng.normal(size=(64, d_in)))
Y = torch.sin(X.sum(1, keepdim=True)) + 0.1 * X[:, :1] ** 2
model = DEQ(d_in, d)
init(model)
print(f"W spectral norm {torch.linalg.matrix_norm(model.W.weight, ord=2).item():.4f} "
      f"fro {torch.linalg.matrix_norm(model.W.weight).item():.4f}")

# implicit gradient against a long unrolled solve
loss = ((model(X[:8]) - Y[:8]) ** 2).mean()
print(f"anderson iterations {len(model.res) + 2} final residual below tol: {model.res[-1] < 1e-8}")
g_imp = torch.autograd.grad(loss, model.W.weight)[0]
z = torch.zeros(8, d)
for _ in range(200):
    z = model.f(z, X[:8])
loss_unrolled = ((model.head(z) - Y[:8]) ** 2).mean()
g_unr = torch.autograd.grad(loss_unrolled, model.W.weight)[0]
rel = ((g_imp - g_unr).norm() / g_unr.norm()).item()
print(f"losses agree: {abs(loss.item() - loss_unrolled.item()) < 1e-8} grad rel err {rel:.2e} "
      f"hooks left {len(model.handles)}")

opt = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
for step in range(40):
    loss = ((model(X) - Y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():  # keep the layer contractive: the fixed point stays unique
        sn = torch.linalg.matrix_norm(model.W.weight, ord=2)
        model.W.weight.mul_(torch.clamp(0.9 / sn, max=1.0))
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.6f} iters {len(model.res) + 2} ||W||_2 {sn.item():.4f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {rel:.2e}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
