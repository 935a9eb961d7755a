"""Bilinear pooling and a tensor-network classifier, in the style of the public fine-grained
recognition (bilinear CNN, compact bilinear pooling) and "tensor networks for ML" (matrix
product state) code: outer-product pooling of two feature maps by einsum / bmm with the signed
square root and L2 normalization, compact bilinear pooling by count sketch (index_add_ with
random signs) and an rfft product, checked against the exact bilinear kernel; nn.Bilinear and
F.bilinear against an einsum; torch.tensordot (int dims and dim lists), torch.kron, outer /
inner / vdot / addr, torch.linalg.multi_dot, einsum in sublist form and with ellipses and
repeated indices (trace, diagonal), torch.backends.opt_einsum; then a matrix product state
(MPS) classifier: cores contracted left to right with einsum, the label index on the middle
core, canonicalized with torch.linalg.qr (mode="reduced") without changing the outputs, trained
with Adam. Weights and data from NumPy: the run is the same on both libraries. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <sketch error>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(17)
torch.set_default_dtype(torch.float64)


def arr(*shape, s=1.0):
    return torch.from_numpy(rng.normal(0, s, shape))


# ---- bilinear pooling ----
fa, fb = arr(2, 5, 4, 4), arr(2, 6, 4, 4)  # two CNN feature maps (N, C, H, W)
A, Bm = fa.flatten(2), fb.flatten(2)  # (N, C, HW)
phi = torch.einsum("nch,ndh->ncd", A, Bm) / A.shape[-1]
phi2 = torch.bmm(A, Bm.transpose(1, 2)) / A.shape[-1]
print("einsum == bmm:", torch.allclose(phi, phi2), tuple(phi.shape))
z = phi.flatten(1)
z = torch.sign(z) * torch.sqrt(z.abs() + 1e-12)
z = F.normalize(z, dim=1)
print("signed sqrt + l2:", [round(v, 5) for v in z[0, :4].tolist()], "norms", [round(v, 9) for v in z.norm(dim=1).tolist()])

# compact bilinear pooling (Tensor Sketch)
d_sketch = 512
h1, h2 = torch.from_numpy(rng.integers(0, d_sketch, 5)), torch.from_numpy(rng.integers(0, d_sketch, 6))
s1 = torch.from_numpy(rng.choice([-1.0, 1.0], 5))
s2 = torch.from_numpy(rng.choice([-1.0, 1.0], 6))


def sketch(x, h, s):  # x: (N, C, HW) -> (N, d, HW)
    out = torch.zeros(x.shape[0], d_sketch, x.shape[2])
    return out.index_add_(1, h, x * s[None, :, None])


def compact(a, b):
    pa = torch.fft.rfft(sketch(a, h1, s1), dim=1)
    pb = torch.fft.rfft(sketch(b, h2, s2), dim=1)
    return torch.fft.irfft(pa * pb, n=d_sketch, dim=1).sum(-1) / a.shape[-1]


ca = compact(A, Bm)
exact = (phi[0] * phi[1]).sum()  # <B(x0), B(x1)>
approx = (ca[0] * ca[1]).sum()
sk_err = abs(approx - exact).item() / abs(exact).item()
print(f"tensor sketch kernel {approx.item():.5f} exact {exact.item():.5f} relative error small: {sk_err < 0.5}")

# ---- bilinear layers and contractions ----
bil = nn.Bilinear(4, 3, 2)
with torch.no_grad():
    for p in bil.parameters():
        p.copy_(arr(*p.shape, s=0.5))
x1, x2 = arr(5, 4), arr(5, 3)
ref = torch.einsum("ni,kij,nj->nk", x1, bil.weight, x2) + bil.bias
print("nn.Bilinear == einsum:", torch.allclose(bil(x1, x2), ref),
      "F.bilinear:", torch.allclose(F.bilinear(x1, x2, bil.weight, bil.bias), ref), bil)
T1, T2 = arr(3, 4, 5), arr(4, 5, 2)
print("tensordot dims=2", tuple(torch.tensordot(T1, T2, dims=2).shape),
      "lists", tuple(torch.tensordot(T1, T2, dims=([1, 2], [0, 1])).shape),
      "dims=0", tuple(torch.tensordot(T1[:, 0, 0], T2[0, 0], dims=0).shape))
print("tensordot == einsum:", torch.allclose(torch.tensordot(T1, T2, dims=([2, 1], [1, 0])),
                                            torch.einsum("abc,bcd->ad", T1, T2)))
K = torch.kron(torch.eye(2), torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
print("kron", K.tolist())
u, v = torch.arange(3.0), torch.arange(1.0, 4.0)
print("outer", torch.outer(u, v).tolist(), "inner", torch.inner(u, v).item(), "vdot", torch.vdot(u, v).item())
print("addr", torch.addr(torch.ones(3, 3), u, v, beta=0.5, alpha=2.0).tolist())
mats = [arr(3, 4), arr(4, 6), arr(6, 2), arr(2, 5)]
print("multi_dot == chain:", torch.allclose(torch.linalg.multi_dot(mats), mats[0] @ mats[1] @ mats[2] @ mats[3]))
M1, M2 = arr(3, 4), arr(4, 2)
print("sublist einsum:", torch.allclose(torch.einsum(M1, [0, 1], M2, [1, 2], [0, 2]), M1 @ M2))
S = arr(2, 3, 3)
print("trace", [round(v, 5) for v in torch.einsum("...ii->...", S).tolist()],
      "diag equal:", torch.equal(torch.einsum("bii->bi", S), torch.diagonal(S, dim1=-2, dim2=-1)))
print("ellipsis broadcast", tuple(torch.einsum("...ij,...jk->...ik", arr(2, 1, 3, 4), arr(5, 4, 2)).shape))
oe = torch.backends.opt_einsum
print("opt_einsum enabled iff available:", oe.enabled == oe.is_available(),
      "strategy", oe.strategy if oe.is_available() else "auto")
with oe.flags(enabled=False):
    off = torch.einsum("ab,bc,cd->ad", *mats[:3])
    print("flags(enabled=False):", oe.enabled, "same result:",
          torch.allclose(off, torch.linalg.multi_dot(mats[:3])))
print("restored:", oe.enabled == oe.is_available())

# ---- an MPS classifier on 8 "pixels" ----
n_sites, bond, n_cls = 8, 6, 2
X = torch.from_numpy(rng.uniform(0, 1, (200, n_sites)))
Y = ((X[:, :4].mean(1) - X[:, 4:].mean(1)) > 0).long()
feat = torch.stack([torch.cos(torch.pi / 2 * X), torch.sin(torch.pi / 2 * X)], -1)  # (N, sites, 2)


class MPS(nn.Module):
    def __init__(self):
        super().__init__()
        eye = torch.eye(bond)[None].repeat(2, 1, 1)  # (phys, left, right)
        cores = [eye + 0.05 * arr(2, bond, bond) for _ in range(n_sites)]
        self.cores = nn.ParameterList([nn.Parameter(c) for c in cores])
        self.label = nn.Parameter(torch.eye(bond)[None].repeat(n_cls, 1, 1) + 0.05 * arr(n_cls, bond, bond))
        self.register_buffer("left", torch.ones(bond) / bond ** 0.5)
        self.register_buffer("right", torch.ones(bond) / bond ** 0.5)

    def forward(self, f):
        v = self.left.expand(f.shape[0], bond)
        for i, core in enumerate(self.cores):
            if i == n_sites // 2:
                v = torch.einsum("nl,clr->ncr", v, self.label).reshape(-1, bond)
                f_rep = f.repeat_interleave(n_cls, dim=0)
            ff = f if i < n_sites // 2 else f_rep
            v = torch.einsum("nl,np,plr->nr", v, ff[:, i], core)
            v = v / v.norm(dim=-1, keepdim=True).detach()  # keep the scale in range
        return (v @ self.right).reshape(-1, n_cls)


mps = MPS()
out0 = mps(feat[:5])
# left-canonicalize the first core with QR: absorb R into the next core
with torch.no_grad():
    c0 = mps.cores[0].permute(0, 1, 2).reshape(2 * bond, bond)
    Q, R = torch.linalg.qr(c0, mode="reduced")
    mps.cores[0].copy_(Q.reshape(2, bond, bond))
    mps.cores[1].copy_(torch.einsum("ab,pbc->pac", R, mps.cores[1]))
print("QR shapes", tuple(Q.shape), tuple(R.shape), "orthonormal:", torch.allclose(Q.T @ Q, torch.eye(bond)))
out1 = mps(feat[:5])
print("canonicalization keeps predictions:", torch.equal(out0.argmax(1), out1.argmax(1)))
opt = torch.optim.Adam(mps.parameters(), lr=0.02)
losses = []
for step in range(40):
    loss = F.cross_entropy(mps(feat) * 10, Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.5f}")
acc = (mps(feat).argmax(1) == Y).double().mean().item()
print(f"mps accuracy {acc:.3f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {sk_err:.4f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
