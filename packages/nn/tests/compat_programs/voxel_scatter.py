"""Point-cloud voxelization and segment reductions, in the style of the public PointPillars /
VoxelNet re-implementations and the torch_scatter-free "scatter mean/max" helpers: points
quantized to voxel coordinates with floor_divide, linear voxel keys made unique with
torch.unique(return_inverse, return_counts) (and unique(dim=0) on the coordinate rows,
unique_consecutive on the sorted keys), per-voxel features pooled with
Tensor.scatter_reduce_(reduce="amax" / "amin" / "mean" / "prod", include_self=False) and
index_reduce_, counts by index_put_(accumulate=True) and bincount, a dense BEV canvas written
with index_put_ / index_copy_ / masked_scatter_ / index_fill_, cummax for running maxima,
searchsorted (right=True, a sorter) and bucketize for range bins, histc / histogramdd for
occupancy statistics, torch.combinations / cartesian_prod neighbour offsets, and a small
PointNet-style voxel encoder whose scatter-max pooling is trained (its gradient goes to the
maximal point of each voxel). Data and weights from NumPy: the numbers are the same on both
libraries. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(9)
G = 6  # voxels per side on a [0, 3) x [0, 3) ground plane
VOX = 0.5


def make_cloud(kind, n=120):
    if kind == 0:  # a blob
        p = rng.normal(1.5, 0.35, (n, 3))
    else:  # a ring
        a = rng.uniform(0, 2 * np.pi, n)
        p = np.stack([1.5 + 1.0 * np.cos(a), 1.5 + 1.0 * np.sin(a), rng.normal(0.5, 0.2, n)], 1)
    return torch.from_numpy(np.clip(p, 0, 2.999).astype(np.float32))


pts = make_cloud(1)
coords = torch.div(pts[:, :2], VOX, rounding_mode="floor").long()
print("coords dtype", coords.dtype, "range", coords.min().item(), coords.max().item())
keys = coords[:, 0] * G + coords[:, 1]
uniq, inverse, counts = torch.unique(keys, return_inverse=True, return_counts=True)
print("occupied voxels", uniq.numel(), "max points per voxel", counts.max().item())
rows, row_inv = torch.unique(coords, dim=0, return_inverse=True)
print("unique rows == unique keys:", torch.equal(rows[:, 0] * G + rows[:, 1], uniq),
      torch.equal(row_inv, inverse))
sk, _ = keys.sort()
uc, uc_counts = torch.unique_consecutive(sk, return_counts=True)
print("unique_consecutive agrees:", torch.equal(uc, uniq), torch.equal(uc_counts, counts))

V, C = uniq.numel(), pts.shape[1]
idx = inverse.unsqueeze(1).expand(-1, C)
vmax = torch.zeros(V, C).scatter_reduce_(0, idx, pts, reduce="amax", include_self=False)
vmin = torch.zeros(V, C).scatter_reduce_(0, idx, pts, reduce="amin", include_self=False)
vmean = torch.zeros(V, C).scatter_reduce_(0, idx, pts, reduce="mean", include_self=False)
vprod = torch.ones(V, C).scatter_reduce_(0, idx, pts, reduce="prod", include_self=True)
print("voxel 0 max", [round(v, 4) for v in vmax[0].tolist()], "min",
      [round(v, 4) for v in vmin[0].tolist()])
sums = torch.zeros(V, C).index_add_(0, inverse, pts)
print("scatter mean == index_add / counts:", torch.allclose(vmean, sums / counts[:, None]))
imean = torch.zeros(V, C).index_reduce_(0, inverse, pts, "mean", include_self=False)
print("index_reduce mean agrees:", torch.allclose(imean, vmean),
      "prod finite:", bool(torch.isfinite(vprod).all()))
cnt = torch.zeros(G, G).index_put_((coords[:, 0], coords[:, 1]), torch.ones(len(pts)),
                                   accumulate=True)
print("accumulated counts == bincount:", torch.equal(cnt.flatten().long(),
                                                     torch.bincount(keys, minlength=G * G)))

# a dense bird's-eye-view canvas
canvas = torch.zeros(G * G, 2)
canvas.index_copy_(0, uniq, torch.stack([vmax[:, 2], counts.float()], 1))
bev = canvas.T.reshape(2, G, G)
occ = bev[1] > 0
heights = torch.zeros(G, G).masked_scatter_(occ, vmean[:, 2][(uniq // G * G + uniq % G)
                                                            .argsort().argsort()])
heights.index_fill_(0, torch.tensor([0]), -1.0)
print("bev occupied", int(occ.sum()), "height row 2", [round(v, 3) for v in heights[2].tolist()])
canvas2 = torch.zeros(G, G)
canvas2[rows[:, 0], rows[:, 1]] = vmax[:, 2]
print("index_put canvas == index_copy canvas:", torch.allclose(canvas2, bev[0]))

# running maxima, range bins and histograms
run_max, arg = torch.cummax(pts[:10, 2], 0)
print("cummax", [round(v, 3) for v in run_max.tolist()], arg.tolist())
edges = torch.tensor([0.0, 0.5, 1.0, 2.0, 3.0])
z = pts[:12, 2]
print("searchsorted right", torch.searchsorted(edges, z, right=True).tolist())
print("bucketize", torch.bucketize(z, edges).tolist())
unsorted = torch.tensor([2.0, 0.0, 3.0, 1.0, 0.5])
sorter = torch.argsort(unsorted)
print("searchsorted with sorter", torch.searchsorted(unsorted, torch.tensor([0.7, 2.5]),
                                                     sorter=sorter).tolist())
print("histc", torch.histc(pts[:, 2], bins=6, min=0.0, max=1.2).tolist())
hist, hedges = torch.histogramdd(pts[:, :2], bins=[3, 3], range=[0.0, 3.0, 0.0, 3.0])
print("histogramdd", hist.tolist(), [round(v, 2) for v in hedges[0].tolist()])
offs = torch.cartesian_prod(torch.tensor([-1, 0, 1]), torch.tensor([-1, 0, 1]))
pairs = torch.combinations(torch.arange(4), r=2)
print("neighbour offsets", offs.shape[0], offs[0].tolist(), "pairs", pairs.tolist())


# a voxel encoder trained with scatter-max pooling
class VoxelNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.pfn = nn.Linear(6, 16)
        self.head = nn.Sequential(nn.Linear(16 * 2, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, p):
        c = torch.div(p[:, :2], VOX, rounding_mode="floor").long()
        k = c[:, 0] * G + c[:, 1]
        u, inv = torch.unique(k, return_inverse=True)
        centre = torch.zeros(u.numel(), 3).index_reduce_(0, inv, p, "mean", include_self=False)
        feat = F.relu(self.pfn(torch.cat([p, p - centre[inv]], 1)))
        pooled = torch.zeros(u.numel(), 16).scatter_reduce(
            0, inv.unsqueeze(1).expand(-1, 16), feat, reduce="amax", include_self=False)
        return self.head(torch.cat([pooled.max(0).values, pooled.mean(0)]))


net = VoxelNet()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
clouds = [(make_cloud(k % 2, 60 + 10 * (k % 3)), k % 2) for k in range(16)]
opt = torch.optim.Adam(net.parameters(), lr=0.01)
losses = []
for epoch in range(6):
    tot = 0.0
    for cl, lab in clouds:
        loss = F.cross_entropy(net(cl).unsqueeze(0), torch.tensor([lab]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot += loss.item()
    losses.append(tot / len(clouds))
print("epoch losses", [round(v, 4) for v in losses])
x = pts[:20].clone().requires_grad_(True)
m = torch.zeros(3, 3).scatter_reduce(0, (torch.arange(20) % 3).unsqueeze(1).expand(-1, 3), x,
                                     reduce="amax", include_self=False)
m.sum().backward()
print("amax grad goes to the maxima:", int(x.grad.sum().item()), "nonzero", int((x.grad != 0)
                                                                             .sum().item()))
with torch.no_grad():
    acc = np.mean([int(net(cl).argmax().item() == lab) for cl, lab in clouds])
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
