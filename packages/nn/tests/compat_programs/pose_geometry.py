"""3-D rotation and pose utilities, in the style of the public PyTorch3D-like "rotation
conversions" modules and point-cloud registration code: axis-angle to matrix by Rodrigues'
formula and by torch.linalg.matrix_exp of the skew matrix, matrix to quaternion (the
largest-component branch chosen with argmax and gather, signs fixed with copysign / signbit),
quaternion multiply / conjugate / to-matrix, the 6-D continuous rotation representation
(Gram-Schmidt with torch.linalg.cross and F.normalize), geodesic angles through acos of a
clamped trace (rad2deg), Euler angles from atan2 / asin, Kabsch alignment by SVD with the
reflection fixed by the determinant's sign, slerp, torch.linalg.vecdot / vector_norm, and a
pose refined by gradient descent on the 6-D representation (Adam) to match noisy
correspondences, plus heaviside for a visibility mask. Float64, data from NumPy: torch and ember
print the same numbers. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <angle error (deg)>."""

import math

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(5)


def hat(v):
    z = torch.zeros_like(v[..., 0])
    return torch.stack([torch.stack([z, -v[..., 2], v[..., 1]], -1),
                        torch.stack([v[..., 2], z, -v[..., 0]], -1),
                        torch.stack([-v[..., 1], v[..., 0], z], -1)], -2)


def axis_angle_to_matrix(aa):
    theta = torch.linalg.vector_norm(aa, dim=-1, keepdim=True)[..., None]
    K = hat(aa / theta.squeeze(-1))
    eye = torch.eye(3).expand_as(K)
    return eye + torch.sin(theta) * K + (1 - torch.cos(theta)) * (K @ K)


def matrix_to_quaternion(R):
    m = R.reshape(*R.shape[:-2], 9)
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = m.unbind(-1)
    q_abs = torch.sqrt(torch.clamp(torch.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22,
                                                1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1),
                                   min=0.0))
    cands = torch.stack([
        torch.stack([q_abs[..., 0] ** 2, m21 - m12, m02 - m20, m10 - m01], -1),
        torch.stack([m21 - m12, q_abs[..., 1] ** 2, m10 + m01, m02 + m20], -1),
        torch.stack([m02 - m20, m10 + m01, q_abs[..., 2] ** 2, m12 + m21], -1),
        torch.stack([m10 - m01, m20 + m02, m21 + m12, q_abs[..., 3] ** 2], -1)], -2)
    cands = cands / (2.0 * q_abs[..., None].clamp(min=0.1))
    best = q_abs.argmax(-1)
    q = torch.gather(cands, -2, best[..., None, None].expand(*best.shape, 1, 4)).squeeze(-2)
    return torch.where(torch.signbit(q[..., :1]), -q, q)  # w >= 0


def quaternion_to_matrix(q):
    w, x, y, z = q.unbind(-1)
    two_s = 2.0 / (q * q).sum(-1)
    return torch.stack([1 - two_s * (y * y + z * z), two_s * (x * y - z * w), two_s * (x * z + y * w),
                        two_s * (x * y + z * w), 1 - two_s * (x * x + z * z), two_s * (y * z - x * w),
                        two_s * (x * z - y * w), two_s * (y * z + x * w), 1 - two_s * (x * x + y * y)],
                       -1).reshape(q.shape[:-1] + (3, 3))


def quat_mul(a, b):
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def rotation_6d_to_matrix(d6):
    a1, a2 = d6[..., :3], d6[..., 3:]
    b1 = F.normalize(a1, dim=-1)
    b2 = F.normalize(a2 - torch.linalg.vecdot(b1, a2).unsqueeze(-1) * b1, dim=-1)
    b3 = torch.linalg.cross(b1, b2, dim=-1)
    return torch.stack((b1, b2, b3), dim=-2)


def geodesic_deg(R1, R2):
    tr = torch.diagonal(R1.transpose(-1, -2) @ R2, dim1=-2, dim2=-1).sum(-1)
    return torch.rad2deg(torch.acos(((tr - 1) / 2).clamp(-1 + 1e-7, 1 - 1e-7)))


aa = torch.from_numpy(rng.normal(size=(5, 3)))
R = axis_angle_to_matrix(aa)
print("rodrigues == matrix_exp(hat):", torch.allclose(R, torch.linalg.matrix_exp(hat(aa))),
      "orthonormal:", torch.allclose(R @ R.mT, torch.eye(3).expand(5, 3, 3)),
      "det", [round(d, 6) for d in torch.linalg.det(R).tolist()])
q = matrix_to_quaternion(R)
print("quaternion round trip:", torch.allclose(quaternion_to_matrix(q), R),
      "w >= 0:", bool((q[:, 0] >= 0).all()), "unit:", torch.allclose(q.norm(dim=-1), torch.ones(5)))
q_conj = q * torch.tensor([1.0, -1, -1, -1])
print("q * conj(q) = identity:", torch.allclose(quat_mul(q, q_conj), torch.tensor([1.0, 0, 0, 0]).expand(5, 4)),
      "composition:", torch.allclose(quaternion_to_matrix(quat_mul(q[0], q[1])), R[0] @ R[1]))
angles = geodesic_deg(R[:1], R)
print("geodesic angles (deg):", [round(a, 4) for a in angles.tolist()])
print("axis-angle norms (deg):", [round(a, 4) for a in torch.rad2deg(aa.norm(dim=-1)).tolist()])
yaw = torch.atan2(R[:, 1, 0], R[:, 0, 0])
pitch = torch.asin(-R[:, 2, 0].clamp(-1, 1))
print("euler (deg):", [round(v, 4) for v in torch.rad2deg(yaw).tolist()],
      [round(v, 4) for v in torch.rad2deg(pitch).tolist()],
      "deg2rad inverse:", torch.allclose(torch.deg2rad(torch.rad2deg(yaw)), yaw))
print("copysign:", torch.copysign(torch.tensor([1.0, 2.0]), torch.tensor([-0.0, 3.0])).tolist(),
      "signbit:", torch.signbit(torch.tensor([-0.0, 0.0, -2.0])).tolist())

# slerp between two rotations
t = torch.linspace(0, 1, 5)[:, None]
d = (q[0] * q[1]).sum().clamp(-1, 1)
q1 = torch.where(d < 0, -q[1], q[1])
omega = torch.acos(d.abs())
slerp = (torch.sin((1 - t) * omega) * q[0] + torch.sin(t * omega) * q1) / torch.sin(omega)
print("slerp angles to start:", [round(a, 4) for a in geodesic_deg(R[:1], quaternion_to_matrix(slerp)).tolist()])

# Kabsch registration with a reflection check
P = torch.from_numpy(rng.normal(size=(40, 3)))
R_true, t_true = R[2], torch.tensor([0.5, -1.0, 2.0])
Q = P @ R_true.T + t_true + 0.01 * torch.from_numpy(rng.normal(size=(40, 3)))
Pc, Qc = P - P.mean(0), Q - Q.mean(0)
U, S, Vh = torch.linalg.svd(Pc.T @ Qc)
sign = torch.sign(torch.linalg.det(Vh.T @ U.T))
D = torch.diag(torch.stack([torch.tensor(1.0), torch.tensor(1.0), sign]))
R_k = Vh.T @ D @ U.T
t_k = Q.mean(0) - P.mean(0) @ R_k.T
print(f"kabsch angle error {geodesic_deg(R_k, R_true).item():.4f} deg, "
      f"translation error {(t_k - t_true).norm().item():.5f}")
vis = torch.heaviside(P[:, 2], torch.tensor(0.5))
print("visible points:", int(vis.sum().item()), vis.dtype)

# refine a pose from a rough start by gradient descent on the 6-D representation
d6 = torch.cat([R_k[0] + 0.3, R_k[1] - 0.2]).clone().requires_grad_(True)
tt = torch.zeros(3, requires_grad=True)
opt = torch.optim.Adam([d6, tt], lr=0.05)
losses = []
for step in range(150):
    Rm = rotation_6d_to_matrix(d6)
    loss = ((P @ Rm.T + tt - Q) ** 2).sum(-1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
err = geodesic_deg(rotation_6d_to_matrix(d6.detach()), R_true).item()
print(f"refined: loss {losses[0]:.5f} -> {losses[-1]:.6f}, angle error {err:.4f}, pi={math.pi:.5f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.6f} {err:.4f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
