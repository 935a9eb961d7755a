"""Second-order optimizers built from module hooks, in the style of the public K-FAC and
Shampoo re-implementations in plain PyTorch: forward pre-hooks (register_forward_pre_hook)
collecting each Linear layer's inputs and full backward hooks (register_full_backward_hook,
and register_full_backward_pre_hook for a counter) collecting gradients w.r.t. outputs,
running Kronecker factors A = E[a a^T] (the bias folded in with F.pad(value=1)) and G =
E[g g^T] updated with torch.lerp_, an eigen-decomposed (torch.linalg.eigh) damped inverse
applied as Q_G ((Q_G^T V Q_A) / (l_G l_A^T + damping)) Q_A^T, KL clipping of the step,
a Shampoo preconditioner with matrix inverse fourth roots from eigh (eigenvalues clamped)
and grafting onto the SGD step norm, post-accumulate-grad hooks on the parameters, a
global module hook by torch.nn.modules.module.register_module_forward_hook, and the hooks
removed through their handles. Compared with plain SGD on the same regression. Data and
weights from NumPy. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <sgd loss> <kfac loss> <shampoo loss>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(2)
X = torch.from_numpy(rng.normal(size=(256, 8)).astype(np.float32)) * torch.linspace(0.2, 3, 8)
Wt = torch.from_numpy(rng.normal(size=(8, 3)).astype(np.float32))
Y = torch.tanh(X @ Wt) + 0.05 * torch.from_numpy(rng.normal(size=(256, 3)).astype(np.float32))
init = [rng.normal(0, 1 / np.sqrt(s[-1]), s).astype(np.float32) for s in [(24, 8), (24,), (3, 24), (3,)]]


def make():
    net = nn.Sequential(nn.Linear(8, 24), nn.Tanh(), nn.Linear(24, 3))
    with torch.no_grad():
        for p, v in zip(net.parameters(), init):
            p.copy_(torch.from_numpy(v))
    return net


class KFAC:
    def __init__(self, net, lr=0.1, damping=0.03, decay=0.9, kl_clip=0.01):
        self.layers = [m for m in net.modules() if isinstance(m, nn.Linear)]
        self.lr, self.damping, self.decay, self.kl_clip = lr, damping, decay, kl_clip
        self.A, self.G, self.a, self.g, self.backward_calls = {}, {}, {}, {}, 0
        self.handles = []
        for m in self.layers:
            self.handles.append(m.register_forward_pre_hook(self._save_input))
            self.handles.append(m.register_full_backward_hook(self._save_grad))
            self.handles.append(m.register_full_backward_pre_hook(self._count))

    def _save_input(self, m, inputs):
        if torch.is_grad_enabled():
            self.a[m] = F.pad(inputs[0].detach(), (0, 1), value=1.0)

    def _save_grad(self, m, grad_input, grad_output):
        self.g[m] = grad_output[0].detach() * grad_output[0].shape[0]

    def _count(self, m, grad_output):
        self.backward_calls += 1

    @torch.no_grad()
    def step(self):
        updates, vg = [], 0.0
        for m in self.layers:
            a, g = self.a[m], self.g[m]
            A, G = a.T @ a / a.shape[0], g.T @ g / g.shape[0]
            if m not in self.A:
                self.A[m], self.G[m] = A, G
            else:
                self.A[m].lerp_(A, 1 - self.decay)
                self.G[m].lerp_(G, 1 - self.decay)
            la, Qa = torch.linalg.eigh(self.A[m])
            lg, Qg = torch.linalg.eigh(self.G[m])
            V = torch.cat([m.weight.grad, m.bias.grad[:, None]], 1)
            U = Qg @ ((Qg.T @ V @ Qa) / (lg[:, None] * la[None, :] + self.damping)) @ Qa.T
            updates.append(U)
            vg += (U * V).sum().item() * self.lr ** 2
        nu = min(1.0, (self.kl_clip / vg) ** 0.5)
        for m, U in zip(self.layers, updates):
            m.weight.sub_(self.lr * nu * U[:, :-1])
            m.bias.sub_(self.lr * nu * U[:, -1])
        return nu


class Shampoo(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, eps=1e-4):
        super().__init__(params, dict(lr=lr, eps=eps))

    @staticmethod
    def inv_root(M, eps, p=4):
        lam, Q = torch.linalg.eigh(M)
        return Q @ torch.diag(lam.clamp(min=eps) ** (-1.0 / p)) @ Q.T

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad if p.grad.dim() == 2 else p.grad[:, None]
                st = self.state[p]
                if not st:
                    st["L"] = group["eps"] * torch.eye(g.shape[0])
                    st["R"] = group["eps"] * torch.eye(g.shape[1])
                st["L"].add_(g @ g.T)
                st["R"].add_(g.T @ g)
                d = self.inv_root(st["L"], group["eps"]) @ g @ self.inv_root(st["R"], group["eps"])
                d = d * (g.norm() / d.norm())  # graft onto the SGD step size
                p.sub_(group["lr"] * d.view_as(p))


def train(kind, steps=30):
    net = make()
    seen = []
    accumulated = [0]
    for p in net.parameters():
        p.register_post_accumulate_grad_hook(lambda p: accumulated.__setitem__(0, accumulated[0] + 1))
    glob = nn.modules.module.register_module_forward_hook(lambda m, i, o: seen.append(type(m).__name__))
    kfac = KFAC(net) if kind == "kfac" else None
    opt = torch.optim.SGD(net.parameters(), lr=0.1) if kind == "sgd" else Shampoo(net.parameters(), lr=0.05)
    losses = []
    for step in range(steps):
        net.zero_grad()
        loss = F.mse_loss(net(X), Y)
        loss.backward()
        nu = kfac.step() if kfac else opt.step()
        losses.append(loss.item())
    glob.remove()
    if kfac:
        for h in kfac.handles:
            h.remove()
        print(f"kfac: backward pre-hook calls {kfac.backward_calls} last nu {nu:.4f} "
              f"A factor {tuple(kfac.A[kfac.layers[0]].shape)} hooks left {len(net[0]._forward_pre_hooks)}")
    print(f"{kind:8s} loss {losses[0]:.5f} -> {losses[5]:.5f} -> {losses[-1]:.5f} "
          f"module calls {len(seen)} ({seen[:3]}) grad accumulations {accumulated[0]}")
    return losses[-1]


sgd, kfac, sh = train("sgd"), train("kfac"), train("shampoo")
lam = torch.linalg.eigvalsh(torch.tensor([[2.0, 1.0], [1.0, 2.0]]))
print(f"eigvalsh {lam.tolist()} inverse 4th root check: "
      f"{torch.allclose(torch.linalg.matrix_power(Shampoo.inv_root(torch.tensor([[2.0, 1.0], [1.0, 2.0]]), 1e-6), 4).inverse(), torch.tensor([[2.0, 1.0], [1.0, 2.0]]), atol=1e-4)}")
print(f"RESULT {sgd:.5f} {kfac:.5f} {sh:.5f}")
