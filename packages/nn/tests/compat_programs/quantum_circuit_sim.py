"""A state-vector quantum circuit simulator in the style of small public PyTorch VQE / QML
notebooks: an n-qubit state as a complex128 tensor of shape (2,) * n, one- and two-qubit gates
applied by tensordot + movedim, rotation gates built from torch.stack of cos / -i sin entries so
autograd flows through complex intermediates into real angles, expectation values <psi|H|psi>
by vdot / conj, a transverse-field Ising Hamiltonian assembled with torch.kron and its ground
energy by eigvalsh, exact time evolution by matrix_exp(-iHt) against Trotter steps, the
parameter-shift rule checked against autograd, and a VQE trained with Adam on the angles.
Also a batched variational classifier: vmap over inputs of the same circuit, binary cross
entropy on <Z>. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first energy> <last energy> <exact ground energy>."""

import math

import numpy as np
import torch
from torch.func import vmap

rng = np.random.default_rng(1502)
CD = torch.complex128
N = 4

I2 = torch.eye(2, dtype=CD)
X = torch.tensor([[0, 1], [1, 0]], dtype=CD)
Y = torch.tensor([[0, -1j], [1j, 0]], dtype=CD)
Z = torch.tensor([[1, 0], [0, -1]], dtype=CD)
H = torch.tensor([[1, 1], [1, -1]], dtype=CD) / math.sqrt(2)
CNOT = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]], dtype=CD).reshape(2, 2, 2, 2)


def zero_state(n=N):
    psi = torch.zeros((2,) * n, dtype=CD)
    psi[(0,) * n] = 1
    return psi


def apply1(psi, gate, q):
    out = torch.tensordot(gate, psi, dims=([1], [q]))
    return torch.movedim(out, 0, q)


def apply2(psi, gate, q1, q2):
    out = torch.tensordot(gate, psi, dims=([2, 3], [q1, q2]))
    return torch.movedim(out, (0, 1), (q1, q2))


def rx(theta):
    c, s = torch.cos(theta / 2).to(CD), torch.sin(theta / 2).to(CD)
    return torch.stack([torch.stack([c, -1j * s]), torch.stack([-1j * s, c])])


def ry(theta):
    c, s = torch.cos(theta / 2).to(CD), torch.sin(theta / 2).to(CD)
    return torch.stack([torch.stack([c, -s]), torch.stack([s, c])])


def rz(theta):
    e = torch.exp(-0.5j * theta.to(CD))
    return torch.diag(torch.stack([e, e.conj()]))


def op_on(ops, n=N):
    """kron of single-qubit operators {qubit: op}, identity elsewhere."""
    m = torch.ones(1, 1, dtype=CD)
    for q in range(n):
        m = torch.kron(m, ops.get(q, I2))
    return m


def ising(n=N, h=0.9):
    ham = torch.zeros(2 ** n, 2 ** n, dtype=CD)
    for q in range(n - 1):
        ham -= op_on({q: Z, q + 1: Z}, n)
    for q in range(n):
        ham -= h * op_on({q: X}, n)
    return ham


def expectation(psi, ham):
    v = psi.reshape(-1)
    return torch.vdot(v, ham @ v).real


def ansatz(params, n=N):
    psi = zero_state(n)
    for layer in range(params.shape[0]):
        for q in range(n):
            psi = apply1(psi, ry(params[layer, q, 0]), q)
            psi = apply1(psi, rz(params[layer, q, 1]), q)
        for q in range(n - 1):
            psi = apply2(psi, CNOT, q, q + 1)
    return psi


# gates and states
bell = apply2(apply1(zero_state(2), H, 0), CNOT, 0, 1)
print(f"bell probabilities {[round(a, 5) for a in bell.reshape(-1).abs().pow(2).tolist()]} norm {torch.linalg.vector_norm(bell).item():.6f}")
print(f"rx(pi) == -iX: {torch.allclose(rx(torch.tensor(math.pi, dtype=torch.float64)), -1j * X)} "
      f"rz unitary: {torch.allclose(rz(torch.tensor(0.3, dtype=torch.float64)) @ rz(torch.tensor(0.3, dtype=torch.float64)).mH, I2)}")
print(f"pauli algebra XY == iZ: {torch.equal(X @ Y, 1j * Z)} dtype {(X @ Y).dtype}")

ham = ising()
evals = torch.linalg.eigvalsh(ham)
e0 = evals[0].item()
print(f"hamiltonian hermitian: {torch.allclose(ham, ham.mH)} ground energy {e0:.6f} gap {(evals[1] - evals[0]).item():.6f}")

# exact evolution vs first-order Trotter
psi0 = apply1(zero_state(), H, 0).reshape(-1)
tau = 0.5
exact = torch.linalg.matrix_exp(-1j * tau * ham) @ psi0
zz = sum(op_on({q: Z, q + 1: Z}) for q in range(N - 1))
xx = sum(op_on({q: X}) for q in range(N))
for steps in (4, 16, 64):
    u = torch.linalg.matrix_exp(1j * tau / steps * zz) @ torch.linalg.matrix_exp(1j * 0.9 * tau / steps * xx)
    trot = torch.linalg.matrix_power(u, steps) @ psi0
    print(f"trotter {steps:2d} steps fidelity {torch.abs(torch.vdot(exact, trot)).pow(2).item():.8f}")

# parameter shift == autograd
params = torch.tensor(rng.uniform(0, 2 * math.pi, (2, N, 2)), requires_grad=True)
energy = expectation(ansatz(params), ham)
(g,) = torch.autograd.grad(energy, params)
with torch.no_grad():
    shift = torch.zeros_like(params)
    shift[0, 1, 0] = math.pi / 2
    ps = 0.5 * (expectation(ansatz(params + shift), ham) - expectation(ansatz(params - shift), ham))
print(f"energy {energy.item():.6f} parameter shift {ps.item():.6f} autograd {g[0, 1, 0].item():.6f}")

# VQE
opt = torch.optim.Adam([params], lr=0.1)
energies = []
for step in range(60):
    opt.zero_grad()
    e = expectation(ansatz(params), ham)
    e.backward()
    opt.step()
    energies.append(e.item())
    if step % 20 == 0:
        print(f"vqe step {step:2d} energy {e.item():.6f}")
with torch.no_grad():
    final = ansatz(params).reshape(-1)
    ground = torch.linalg.eigh(ham).eigenvectors[:, 0]
    print(f"vqe energy {energies[-1]:.5f} error {energies[-1] - e0:.5f} overlap {torch.abs(torch.vdot(ground, final)).pow(2).item():.4f}")
    probs = final.abs() ** 2
    print(f"measurement probabilities sum {probs.sum().item():.6f} most likely {torch.argmax(probs).item():04b}")

# a two-qubit variational classifier, vmapped over inputs
def classifier(w, x):
    psi = zero_state(2)
    psi = apply1(psi, ry(x[0]), 0)
    psi = apply1(psi, ry(x[1]), 1)
    psi = apply2(psi, CNOT, 0, 1)
    psi = apply1(psi, ry(w[0]), 0)
    psi = apply1(psi, rx(w[1]), 1)
    psi = apply2(psi, CNOT, 1, 0)
    psi = apply1(psi, ry(w[2]), 0)
    return expectation(psi, op_on({0: Z}, 2))


xs = torch.tensor(rng.uniform(-math.pi / 2, math.pi / 2, (64, 2)))
ys = (xs[:, 0] * xs[:, 1] > 0).double()
w = torch.tensor(rng.normal(0, 0.5, 3), requires_grad=True)
opt = torch.optim.Adam([w], lr=0.1)
for step in range(40):
    z = vmap(classifier, in_dims=(None, 0))(w, xs)
    loss = torch.nn.functional.binary_cross_entropy((1 - z) / 2, ys)
    opt.zero_grad()
    loss.backward()
    opt.step()
acc = (((1 - z) / 2 > 0.5).double() == ys).double().mean().item()
print(f"classifier loss {loss.item():.5f} accuracy {acc:.4f}")
print(f"RESULT {energies[0]:.5f} {energies[-1]:.5f} {e0:.5f}")
