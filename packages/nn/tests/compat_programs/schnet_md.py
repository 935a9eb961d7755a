"""Machine-learned interatomic potentials in the style of the public SchNet / SchNetPack /
TorchMD code: a Lennard-Jones reference system in a periodic box (minimum image convention by
torch.round, a neighbour list from torch.triu_indices and a cutoff mask), forces as the negative
gradient of the energy by torch.autograd.grad, velocity-Verlet molecular dynamics with total
energy drift measured, radial basis (Gaussian) expansion of distances with a cosine cutoff,
SchNet interaction blocks whose continuous filters weigh neighbour messages aggregated with
index_add_, shifted softplus, per-atom energies summed per molecule with scatter_add, and
force matching (loss on energies and forces with create_graph=True, a double backward through
the network). The model is checked for rotation / translation / permutation invariance and
force equivariance. Weights and data from NumPy, float64. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <force mae>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1604)
torch.set_default_dtype(torch.float64)
BOX, CUT = 5.0, 2.5


def pair_vectors(pos, box=BOX):
    i, j = torch.triu_indices(pos.shape[0], pos.shape[0], offset=1)
    rij = pos[j] - pos[i]
    rij = rij - box * torch.round(rij / box)  # minimum image
    return i, j, rij


def lj_energy(pos, eps=1.0, sigma=1.0):
    i, j, rij = pair_vectors(pos)
    r = rij.norm(dim=-1)
    keep = r < CUT
    sr6 = (sigma / r[keep]) ** 6
    shift = (sigma / CUT) ** 6
    return (4 * eps * (sr6 ** 2 - sr6 - (shift ** 2 - shift))).sum()


def forces(energy_fn, pos, create_graph=False):
    pos = pos if pos.requires_grad else pos.detach().requires_grad_(True)
    e = energy_fn(pos)
    (g,) = torch.autograd.grad(e, pos, create_graph=create_graph)
    return e, -g


# a 3x3x3 lattice with small displacements
grid = torch.stack(torch.meshgrid(*(torch.arange(3.0),) * 3, indexing="ij"), -1).reshape(-1, 3)
pos0 = grid * (BOX / 3) + 0.5 + torch.from_numpy(rng.normal(0, 0.05, (27, 3)))
e0, f0 = forces(lj_energy, pos0)
print(f"lj energy {e0.item():.6f} net force {f0.sum(0).abs().max().item():.2e} (Newton's third law)")
h = 1e-6
dpos = torch.zeros_like(pos0)
dpos[4, 1] = h
fd = -(lj_energy(pos0 + dpos) - lj_energy(pos0 - dpos)) / (2 * h)
print(f"force by autograd {f0[4, 1].item():.6f} by finite differences {fd.item():.6f}")

# velocity Verlet
vel = torch.from_numpy(rng.normal(0, 0.3, (27, 3)))
vel = vel - vel.mean(0)
dt, pos = 0.002, pos0.clone()
_, f = forces(lj_energy, pos)
totals = []
for step in range(200):
    vel = vel + 0.5 * dt * f
    pos = torch.remainder(pos + dt * vel, BOX)
    e, f = forces(lj_energy, pos)
    vel = vel + 0.5 * dt * f
    totals.append(e.item() + 0.5 * (vel ** 2).sum().item())
drift = max(totals) - min(totals)
print(f"md total energy start {totals[0]:.5f} end {totals[-1]:.5f} drift {drift:.2e} momentum {vel.sum(0).abs().max().item():.1e}")


def shifted_softplus(x):
    return F.softplus(x) - math.log(2.0)


class RBF(nn.Module):
    def __init__(self, n=16, cutoff=CUT):
        super().__init__()
        self.register_buffer("centers", torch.linspace(0, cutoff, n))
        self.gamma = 0.5 / (cutoff / (n - 1)) ** 2
        self.cutoff = cutoff

    def forward(self, r):
        fc = 0.5 * (torch.cos(math.pi * r / self.cutoff) + 1) * (r < self.cutoff)
        return torch.exp(-self.gamma * (r.unsqueeze(-1) - self.centers) ** 2), fc


class Interaction(nn.Module):
    def __init__(self, dim, n_rbf):
        super().__init__()
        self.filter = nn.Sequential(nn.Linear(n_rbf, dim), nn.Tanh(), nn.Linear(dim, dim))
        self.in2f = nn.Linear(dim, dim, bias=False)
        self.f2out = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, h, src, dst, rbf, fc):
        w = self.filter(rbf) * fc.unsqueeze(-1)
        msg = self.in2f(h)[src] * w
        agg = torch.zeros_like(h).index_add_(0, dst, msg)
        return h + self.out(shifted_softplus(self.f2out(agg)))


class SchNet(nn.Module):
    def __init__(self, dim=16, n_rbf=16, blocks=2):
        super().__init__()
        self.embed = nn.Embedding(2, dim)
        self.rbf = RBF(n_rbf)
        self.blocks = nn.ModuleList(Interaction(dim, n_rbf) for _ in range(blocks))
        self.head = nn.Sequential(nn.Linear(dim, dim // 2), nn.Tanh(), nn.Linear(dim // 2, 1))

    def forward(self, z, pos, batch, n_mol):
        i, j = torch.triu_indices(pos.shape[0], pos.shape[0], offset=1)
        same = batch[i] == batch[j]
        i, j = i[same], j[same]
        src, dst = torch.cat([i, j]), torch.cat([j, i])
        r = (pos[dst] - pos[src]).norm(dim=-1)
        rbf, fc = self.rbf(r)
        h = self.embed(z)
        for blk in self.blocks:
            h = blk(h, src, dst, rbf, fc)
        e_atom = self.head(h).squeeze(-1)
        return torch.zeros(n_mol).scatter_add(0, batch, e_atom)


def pair_energy(pos, z, batch):
    """Reference: a Morse-like pair potential whose depth depends on the two species."""
    i, j = torch.triu_indices(pos.shape[0], pos.shape[0], offset=1)
    same = batch[i] == batch[j]
    i, j = i[same], j[same]
    r = (pos[j] - pos[i]).norm(dim=-1)
    depth = 0.5 + 0.5 * (z[i] + z[j]).double()
    e = depth * (1 - torch.exp(-1.5 * (r - 1.2))) ** 2 - depth
    return torch.zeros(int(batch.max()) + 1).scatter_add(0, batch[i], e * (r < CUT))


def molecules(m, atoms=5):
    pos = rng.normal(0, 0.8, (m, atoms, 3))
    z = rng.integers(0, 2, (m, atoms))
    return (torch.from_numpy(pos.reshape(-1, 3)), torch.from_numpy(z.reshape(-1)),
            torch.arange(m).repeat_interleave(atoms))


model = SchNet()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(p.shape[-1]), p.shape)) if p.dim() > 1 else torch.zeros_like(p))

pos, z, batch = molecules(3)
e = model(z, pos, batch, 3)
Q, _ = torch.linalg.qr(torch.from_numpy(rng.normal(size=(3, 3))))
rot = model(z, pos @ Q.T + torch.tensor([0.3, -1.0, 2.0]), batch, 3)
perm = torch.cat([torch.randperm(5, generator=torch.Generator().manual_seed(k)) + 5 * k for k in range(3)])
per = model(z[perm], pos[perm], batch, 3)
print(f"invariant to rotation+translation: {torch.allclose(e, rot, atol=1e-10)} permutation: {torch.allclose(e, per, atol=1e-10)}")
_, fr = forces(lambda p: model(z, p, batch, 3).sum(), pos @ Q.T)
_, fo = forces(lambda p: model(z, p, batch, 3).sum(), pos)
print(f"forces rotate with the frame: {torch.allclose(fr, fo @ Q.T, atol=1e-10)}")

opt = torch.optim.Adam(model.parameters(), lr=5e-3)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.99)
losses = []
for step in range(60):
    pos, z, batch = molecules(8)
    pos.requires_grad_(True)
    e_ref = pair_energy(pos, z, batch)
    (f_ref,) = torch.autograd.grad(-e_ref.sum(), pos)
    e_pred, f_pred = forces(lambda p: model(z, p, batch, 8).sum(), pos, create_graph=True)
    e_mol = model(z, pos, batch, 8)
    loss = F.mse_loss(e_mol, e_ref.detach()) + 10 * F.mse_loss(f_pred, f_ref)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.6f}")
pos, z, batch = molecules(20)
pos.requires_grad_(True)
(f_ref,) = torch.autograd.grad(-pair_energy(pos, z, batch).sum(), pos)
_, f_pred = forces(lambda p: model(z, p, batch, 20).sum(), pos)
mae = (f_pred - f_ref).abs().mean().item()
print(f"test force mae {mae:.5f} force scale {f_ref.abs().mean().item():.5f}")
print(f"RESULT {np.mean(losses[:5]):.5f} {np.mean(losses[-5:]):.5f} {mae:.5f}")
