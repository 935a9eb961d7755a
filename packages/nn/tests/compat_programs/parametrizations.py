"""Reparameterized layers as GAN and normalizing-flow code writes them: the old
nn.utils.weight_norm / spectral_norm hooks and their torch.nn.utils.parametrizations successors
(weight_norm's original0/original1, spectral_norm's power iteration and its sigma in eval mode),
a custom parametrization registered with nn.utils.parametrize (a symmetric matrix, a positive
scale via right_inverse), parametrizations.orthogonal keeping W^T W = I through training,
parametrize.cached(), is_parametrized, state_dict keys, remove_parametrizations(leave_parametrized)
and a spectrally normalized discriminator trained a few steps. Everything random is drawn by
NumPy: the test compares ember's output to torch's. Written against `torch`; the test suite runs
it unchanged on torch and, through an import shim, on ember."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.utils.parametrize as P
from torch.nn.utils import parametrizations

rng = np.random.default_rng(0)


def arr(*shape):
    return torch.from_numpy(rng.normal(0, 1, shape).astype(np.float32))


def set_weights(m):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(arr(*p.shape) * 0.3)
    return m


x = arr(8, 6)


def sigma_max(W, iters=200):
    """The largest singular value of W by power iteration on W^T W."""
    v = torch.ones(W.shape[1], dtype=W.dtype)
    for _ in range(iters):
        v = W.T @ (W @ v)
        v = v / v.norm()
    return (W @ v).norm()


# ---- weight norm, old and new ----
old = set_weights(nn.Linear(6, 4))
ref = old(x)
old_wn = nn.utils.weight_norm(old, name="weight", dim=0)
print("old weight_norm params:", sorted(n for n, _ in old_wn.named_parameters()))
print("old weight_norm keeps output:", torch.allclose(old_wn(x), ref, atol=1e-6))
print("g = row norms:", torch.allclose(old_wn.weight_g.squeeze(1), old_wn.weight_v.norm(dim=1)))
nn.utils.remove_weight_norm(old_wn)
print("removed:", sorted(n for n, _ in old_wn.named_parameters()))

new = set_weights(nn.Linear(6, 4))
ref = new(x)
parametrizations.weight_norm(new, name="weight", dim=0)
print("weight_norm parametrization:", sorted(new.state_dict().keys()))
print("output unchanged:", torch.allclose(new(x), ref, atol=1e-6))
g0 = new.parametrizations.weight.original0
print("original0 shape", tuple(g0.shape), "is_parametrized", P.is_parametrized(new, "weight"))
with torch.no_grad():
    g0.mul_(2.0)
print("doubling g doubles the weight:", torch.allclose(new(x) - new.bias, 2 * (ref - new.bias),
                                                        atol=1e-5))

# ---- spectral norm ----
lin = set_weights(nn.Linear(6, 5))
sigma_true = sigma_max(lin.weight.detach())
parametrizations.spectral_norm(lin, n_power_iterations=1)
for _ in range(30):  # power iterations in training mode
    lin(x)
lin.eval()
sigma_est = sigma_max(lin.weight.detach())
print(f"spectral norm after power iterations: {sigma_est.item():.4f} (was {sigma_true.item():.4f})")
print("sn buffers:", sorted(k for k in lin.state_dict() if "_u" in k or "_v" in k))
old_sn = nn.utils.spectral_norm(set_weights(nn.Linear(6, 5)))
for _ in range(30):
    old_sn(x)
print(f"old spectral_norm sigma: {sigma_max(old_sn.weight.detach()).item():.4f}"
      f", keys {sorted(old_sn.state_dict().keys())}")


# ---- custom parametrizations ----
class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


class Positive(nn.Module):
    def forward(self, X):
        return torch.exp(X)

    def right_inverse(self, Y):
        return torch.log(Y)


sym = set_weights(nn.Linear(5, 5))
P.register_parametrization(sym, "weight", Symmetric())
print("symmetric:", torch.equal(sym.weight, sym.weight.T))
scale = nn.Linear(5, 5)
P.register_parametrization(scale, "bias", Positive())
scale.bias = torch.full((5,), 2.0)  # right_inverse stores log(2)
print(f"positive bias via right_inverse: original {scale.parametrizations.bias.original[0].item():.4f}"
      f", value {scale.bias[0].item():.4f}")
P.register_parametrization(sym, "weight", Symmetric())  # chained: still symmetric
print("chained parametrizations:", len(sym.parametrizations.weight))
with P.cached():
    w1 = sym.weight
    w2 = sym.weight
    print("cached() returns the same tensor:", w1 is w2)

# ---- orthogonal ----
orth = nn.Linear(6, 6, bias=False)
set_weights(orth)
parametrizations.orthogonal(orth)
print("orthogonal at init:", torch.allclose(orth.weight.T @ orth.weight, torch.eye(6), atol=1e-5))
opt = torch.optim.SGD(orth.parameters(), lr=0.1)
target = arr(8, 6)
first = None
for step in range(30):
    loss = ((orth(x) - target) ** 2).mean()
    first = loss.item() if first is None else first
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"orthogonal after training: {torch.allclose(orth.weight.T @ orth.weight, torch.eye(6), atol=1e-4)}"
      f", loss {first:.4f} -> {loss.item():.4f}")

# ---- removing ----
w_before = sym.weight.detach().clone()
P.remove_parametrizations(sym, "weight", leave_parametrized=True)
print("removed, kept value:", torch.equal(sym.weight, w_before), type(sym.weight).__name__,
      P.is_parametrized(sym))

# ---- a spectrally normalized discriminator ----
torch.manual_seed(0)
disc = nn.Sequential(parametrizations.spectral_norm(nn.Linear(6, 16)), nn.LeakyReLU(0.2),
                     parametrizations.spectral_norm(nn.Linear(16, 1)))
set_weights(disc)
with torch.no_grad():  # the power iteration's random start vectors, drawn by NumPy here
    for name, buf in disc.named_buffers():
        if name.endswith(("_u", "_v")):
            buf.copy_(nn.functional.normalize(arr(*buf.shape), dim=0))
opt = torch.optim.Adam(disc.parameters(), lr=2e-3, betas=(0.0, 0.9))
real, fake = arr(32, 6) + 1.0, arr(32, 6) - 1.0
for step in range(40):
    loss = torch.relu(1 - disc(real)).mean() + torch.relu(1 + disc(fake)).mean()  # hinge loss
    opt.zero_grad()
    loss.backward()
    opt.step()
disc.eval()
with torch.no_grad():
    sig = [sigma_max(m.weight).item() for m in disc if isinstance(m, nn.Linear)]
    margin = (disc(real).mean() - disc(fake).mean()).item()
print(f"hinge loss {loss.item():.4f}, sigmas {sig[0]:.3f} {sig[1]:.3f}, margin {margin:.4f}")
print(f"RESULT {loss.item():.6f} {margin:.6f}")
