"""Test-time augmentation and rotation equivariance over the dihedral group D4, in the style of
the public segmentation / Kaggle TTA helpers and group-equivariant CNN (p4 G-CNN) code: the
eight D4 transforms built from torch.rot90(k, dims) and torch.flip / fliplr / flipud, their
inverses checked to undo them, a segmentation network's predictions averaged over the
de-augmented outputs (and the averaged model checked to be exactly D4-equivariant), a p4 lifting
convolution whose filters are the four rot90 copies of one kernel (F.conv2d on a stacked weight)
with a group max pool over rotations giving a rotation-invariant feature, torch.roll with
several shifts and dims for a circular translation check, gradients through rot90 / flip, and a
short training run of the invariant classifier on rotated patterns. Weights and data from
NumPy: the run is the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss>
<equivariance error>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(23)


def arr(*shape, s=1.0):
    return torch.from_numpy(rng.normal(0, s, shape).astype(np.float32))


def d4(x, g):
    """The g-th element of D4 acting on the last two dims: rotation by g % 4, then a flip."""
    y = torch.rot90(x, g % 4, dims=(-2, -1))
    return y.flip(-1) if g >= 4 else y


def d4_inv(x, g):
    y = x.flip(-1) if g >= 4 else x
    return torch.rot90(y, -(g % 4), dims=(-2, -1))


img = torch.arange(12.0).reshape(1, 1, 3, 4)
print("rot90 k=1", torch.rot90(img, 1, dims=(2, 3))[0, 0].tolist())
print("rot90 k=-1 == k=3:", torch.equal(torch.rot90(img, -1, (2, 3)), torch.rot90(img, 3, (2, 3))),
      "k=2 == flip both:", torch.equal(torch.rot90(img, 2, (2, 3)), img.flip(2, 3)))
print("fliplr", torch.fliplr(img[0, 0]).tolist()[0], "flipud", torch.flipud(img[0, 0]).tolist()[0])
print("Tensor.rot90 dims (3, 2)", img.rot90(1, [3, 2])[0, 0].tolist()[0])
print("inverses undo:", all(torch.equal(d4_inv(d4(img, g), g), img) for g in range(8)))
print("roll", torch.roll(img[0, 0], shifts=(1, -1), dims=(0, 1)).tolist()[0],
      "flat roll", torch.roll(torch.arange(5), 2).tolist())

x = arr(2, 1, 8, 8, s=1.0)
xg = x.clone().requires_grad_(True)
w = arr(2, 1, 8, 8)
(d4(xg, 5) * w).sum().backward()
print("grad through rot90+flip == inverse transform:", torch.equal(xg.grad, d4_inv(w, 5)))

seg = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 6, 3, padding=1, dilation=1),
                    nn.ReLU(), nn.Conv2d(6, 3, 1))
with torch.no_grad():
    for p in seg.parameters():
        p.copy_(arr(*p.shape, s=0.4))


def tta(model, x):
    outs = [d4_inv(model(d4(x, g)), g) for g in range(8)]
    return torch.stack(outs).mean(0)


with torch.no_grad():
    plain = seg(x)
    avg = tta(seg, x)
    eq_plain = max((seg(d4(x, g)) - d4(plain, g)).abs().max().item() for g in range(8))
    eq_tta = max((tta(seg, d4(x, g)) - d4(avg, g)).abs().max().item() for g in range(8))
print(f"plain model equivariance error {eq_plain:.4f}; TTA error small: {eq_tta < 1e-5}")
print("TTA output", tuple(avg.shape), "softmax sums", [round(v, 5) for v in avg.softmax(1).sum(1)[0, 0, :3].tolist()])


class P4Lift(nn.Module):
    """A lifting convolution: one kernel in four rotations, then a max over the rotations."""

    def __init__(self, cin, cout, k):
        super().__init__()
        self.weight = nn.Parameter(arr(cout, cin, k, k, s=0.3))
        self.bias = nn.Parameter(torch.zeros(cout))

    def forward(self, x):
        w = torch.cat([torch.rot90(self.weight, r, dims=(2, 3)) for r in range(4)], 0)  # (4*cout, ...)
        y = F.conv2d(x, w, self.bias.repeat(4), padding=self.weight.shape[-1] // 2)
        y = y.view(x.shape[0], 4, -1, *y.shape[-2:])
        return y.amax(1)  # invariant to the rotation channel


class Invariant(nn.Module):
    def __init__(self):
        super().__init__()
        self.lift = P4Lift(1, 8, 3)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        f = F.relu(self.lift(x))
        return self.head(f.mean((-2, -1)))


net = Invariant()
with torch.no_grad():
    net.head.weight.copy_(arr(2, 8, s=0.3))
    net.head.bias.zero_()
    f0 = net(x)
    rot_err = max((net(torch.rot90(x, r, (2, 3))) - f0).abs().max().item() for r in range(4))
print(f"p4 invariance error small: {rot_err < 1e-5}")

# two classes: an L shape vs a bar, in random rotations
L_shape = torch.zeros(7, 7)
L_shape[1:6, 2] = 1.0
L_shape[5, 2:5] = 1.0
bar = torch.zeros(7, 7)
bar[1:6, 3] = 1.0
data, labels = [], []
for i in range(32):
    base = L_shape if i % 2 == 0 else bar
    data.append(torch.rot90(base, i // 2 % 4, (0, 1)) + 0.1 * arr(7, 7))
    labels.append(i % 2)
X = torch.stack(data)[:, None]
Y = torch.tensor(labels)
opt = torch.optim.Adam(net.parameters(), lr=0.03)
losses = []
for step in range(40):
    loss = F.cross_entropy(net(X), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.5f}")
acc = (net(X).argmax(1) == Y).float().mean().item()
print(f"accuracy {acc:.3f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {eq_tta:.1e}")
