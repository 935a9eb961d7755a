"""Direction-of-arrival estimation with a microphone / antenna array, in the style of the public
array-processing notebooks that moved from NumPy to PyTorch: steering vectors built with
torch.polar and torch.exp of imaginary phases, narrow-band snapshots with complex noise made by
torch.complex, the spatial covariance as X @ X.mH, a Hermitian eigendecomposition
(torch.linalg.eigh on complex128) split into signal and noise subspaces, the MUSIC pseudo-spectrum
and delay-and-sum / MVDR (Capon) beamformers through torch.linalg.solve on complex matrices,
peaks found with a max-pool comparison, torch.vdot / torch.inner / conj() / conj_physical /
resolve_conj / is_conj, view_as_real / view_as_complex, angle / abs / real / imag, and
a complex-weight beamformer trained by gradient descent (Wirtinger gradients through .abs()) to
null an interferer. Float64 / complex128 and data from NumPy: torch and ember print the same
numbers. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <mean DOA error (deg)>."""

import math

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(8)
M, N, d = 8, 200, 0.5  # sensors, snapshots, spacing in wavelengths
true_deg = torch.tensor([-20.0, 15.0])


def steering(deg):
    phase = 2 * math.pi * d * torch.arange(M)[:, None] * torch.sin(torch.deg2rad(deg))[None, :]
    return torch.polar(torch.ones_like(phase), phase)  # (M, K)


A = steering(true_deg)
print("steering", A.dtype, tuple(A.shape), "unit modulus:", torch.allclose(A.abs(), torch.ones(M, 2)),
      "exp form:", torch.allclose(A, torch.exp(1j * A.angle())))
S = torch.complex(torch.from_numpy(rng.normal(size=(2, N))), torch.from_numpy(rng.normal(size=(2, N))))
noise = 0.3 * torch.complex(torch.from_numpy(rng.normal(size=(M, N))),
                            torch.from_numpy(rng.normal(size=(M, N))))
X = A @ S + noise
R = X @ X.mH / N
print("covariance hermitian:", torch.allclose(R, R.mH), "trace", round(torch.trace(R).real.item(), 4),
      "imag trace ~0:", abs(torch.trace(R).imag.item()) < 1e-12)

evals, evecs = torch.linalg.eigh(R)
print("eigenvalues", [round(v, 4) for v in evals.tolist()], evals.dtype)
En = evecs[:, :-2]  # noise subspace
grid = torch.linspace(-90, 90, 721)
Ag = steering(grid)
music = 1.0 / (En.mH @ Ag).abs().pow(2).sum(0)
das = (Ag.conj() * (R @ Ag)).sum(0).real / M
Rinv_A = torch.linalg.solve(R, Ag)
mvdr = 1.0 / (Ag.conj() * Rinv_A).sum(0).real


def peaks(spec, k=2):
    s = spec[None, None, :]
    is_peak = (F.max_pool1d(s, 9, stride=1, padding=4) == s)[0, 0]
    cand = torch.nonzero(is_peak).squeeze(1)
    top = cand[spec[cand].topk(k).indices]
    return torch.sort(grid[top]).values


for name, spec in (("music", music), ("delay-and-sum", das), ("mvdr", mvdr)):
    db = 10 * torch.log10(spec / spec.max())
    print(f"{name:14s} peaks {peaks(spec).tolist()} median dB {db.median().item():.3f}")
doa = peaks(music)
err = (doa - true_deg).abs().mean().item()

# complex utilities on the first steering vector
a0, a1 = A[:, 0], A[:, 1]
c = a0.conj()
print("vdot == sum(conj*x):", torch.allclose(torch.vdot(a0, a1), (a0.conj() * a1).sum()),
      "inner", [round(v, 6) for v in torch.view_as_real(torch.inner(a0, a1)).tolist()],
      "conj:", torch.equal(c.resolve_conj(), torch.conj_physical(a0)), c.resolve_conj().is_conj(),
      torch.conj_physical(a0).is_conj())
ri = torch.view_as_real(a0)
print("view_as_real", tuple(ri.shape), ri.stride(), "round trip:",
      torch.equal(torch.view_as_complex(ri), a0), "real/imag", round(a0.real.sum().item(), 6),
      round(a0.imag.sum().item(), 6))

# train beamformer weights: unit gain toward the first source, a null toward the second
w = torch.zeros(M, dtype=torch.complex128)
w[0] = 1.0
w.requires_grad_(True)
opt = torch.optim.Adam([w], lr=0.05)
losses = []
for step in range(200):
    y = w.conj() @ X
    gain = (w.conj() @ a0)
    loss = y.abs().pow(2).mean() + 10 * (gain - 1).abs().pow(2)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
with torch.no_grad():
    resp = (w.conj() @ A).abs()
print(f"trained response toward sources {[round(v, 4) for v in resp.tolist()]}", "grad dtype:",
      w.grad.dtype)
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {err:.4f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
