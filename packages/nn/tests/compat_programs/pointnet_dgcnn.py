"""Point-cloud classification in the style of the public PointNet and DGCNN implementations:
synthetic clouds (sphere, cube surface, cylinder, torus) of N points, randomly rotated about
the z axis; PointNet with an input T-Net predicting a 3x3 transform (identity added through
torch.eye(...).repeat, applied with torch.bmm), shared MLPs as Conv1d(k=1) + BatchNorm1d,
symmetric max pooling (torch.max(x, 2, keepdim=True)[0]) and the feature-transform
orthogonality regularizer ||I - A A^T||; a DGCNN EdgeConv layer with the k-nearest neighbours
found from the pairwise distance -2 x^T x + |x|^2 (topk) and gathered through a flattened
index with idx_base, edge features cat(x_j - x_i, x_i) through Conv2d and max over neighbours.
Permutation invariance is checked by shuffling the points. Weights and data from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
N_PTS, K = 64, 4


def make_cloud(kind):
    u, v = rng.uniform(0, 2 * np.pi, N_PTS), rng.uniform(-1, 1, N_PTS)
    if kind == 0:
        p = rng.normal(size=(N_PTS, 3))
        p /= np.linalg.norm(p, axis=1, keepdims=True)
    elif kind == 1:
        p = rng.uniform(-1, 1, (N_PTS, 3))
        ax = rng.integers(0, 3, N_PTS)
        p[np.arange(N_PTS), ax] = np.sign(rng.uniform(-1, 1, N_PTS))
    elif kind == 2:
        p = np.stack([np.cos(u), np.sin(u), v], 1)
    else:
        w = rng.uniform(0, 2 * np.pi, N_PTS)
        p = np.stack([(1 + 0.4 * np.cos(w)) * np.cos(u), (1 + 0.4 * np.cos(w)) * np.sin(u),
                      0.4 * np.sin(w)], 1)
    t = rng.uniform(0, 2 * np.pi)
    rot = np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
    return (p @ rot.T + rng.normal(0, 0.02, p.shape)).astype(np.float32)


labels = rng.integers(0, 4, 160)
clouds = torch.from_numpy(np.stack([make_cloud(k) for k in labels])).transpose(1, 2)  # (B, 3, N)
Y = torch.from_numpy(labels.astype(np.int64))


class TNet(nn.Module):
    def __init__(self, k=3):
        super().__init__()
        self.k = k
        self.conv1, self.conv2 = nn.Conv1d(k, 32, 1), nn.Conv1d(32, 64, 1)
        self.bn1, self.bn2 = nn.BatchNorm1d(32), nn.BatchNorm1d(64)
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, k * k)

    def forward(self, x):
        b = x.size(0)
        x = F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, 64)
        x = self.fc2(F.relu(self.fc1(x)))
        iden = torch.eye(self.k, dtype=x.dtype).view(1, self.k * self.k).repeat(b, 1)
        return (x + iden).view(-1, self.k, self.k)


def knn(x, k):
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = torch.sum(x ** 2, dim=1, keepdim=True)
    pairwise = -xx - inner - xx.transpose(2, 1)
    return pairwise.topk(k=k, dim=-1)[1]  # (B, N, k)


def graph_feature(x, k):
    b, c, n = x.size()
    idx = knn(x, k)
    idx_base = torch.arange(0, b).view(-1, 1, 1) * n
    idx = (idx + idx_base).view(-1)
    x = x.transpose(2, 1).contiguous()
    feature = x.view(b * n, -1)[idx, :].view(b, n, k, c)
    x = x.view(b, n, 1, c).repeat(1, 1, k, 1)
    return torch.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()


class Net(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.stn = TNet(3)
        self.edge = nn.Sequential(nn.Conv2d(6, 32, 1, bias=False), nn.BatchNorm2d(32),
                                  nn.LeakyReLU(0.2))
        self.fstn = TNet(32)
        self.conv = nn.Sequential(nn.Conv1d(32, 64, 1), nn.BatchNorm1d(64), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.0),
                                  nn.Linear(32, classes))

    def forward(self, x):
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = self.edge(graph_feature(x, K)).max(dim=-1, keepdim=False)[0]
        trans_feat = self.fstn(x)
        x = torch.bmm(x.transpose(2, 1), trans_feat).transpose(2, 1)
        x = torch.max(self.conv(x), 2)[0]
        return F.log_softmax(self.head(x), dim=1), trans_feat


def feature_transform_regularizer(trans):
    d = trans.size(1)
    eye = torch.eye(d)[None, :, :]
    return torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - eye, dim=(1, 2)))


model = Net()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if "bn" in name or name.startswith(("edge.1", "conv.1")):
            continue
        fan_in = p[0].numel() if p.dim() > 1 else p.numel()
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                / math.sqrt(fan_in))
print("parameters:", sum(p.numel() for p in model.parameters()))
idx = knn(clouds[:2], K)
print("knn", tuple(idx.shape), idx.dtype, "self is nearest:",
      bool((idx[:, :, 0] == torch.arange(N_PTS)).all()))
print("edge features", tuple(graph_feature(clouds[:2], K).shape))

opt = torch.optim.Adam(model.parameters(), lr=2e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.5)
losses = []
for step in range(40):
    i = torch.from_numpy(rng.integers(0, 128, 16))
    pred, tf = model(clouds[i])
    loss = F.nll_loss(pred, Y[i]) + 0.001 * feature_transform_regularizer(tf)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:3d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.5f}")

model.eval()
with torch.no_grad():
    pred, tf = model(clouds[128:])
    acc = (pred.argmax(1) == Y[128:]).float().mean().item()
    perm = torch.from_numpy(rng.permutation(N_PTS))
    pred_perm, _ = model(clouds[128:][:, :, perm])
print("permutation invariant:", torch.allclose(pred, pred_perm, atol=1e-5))
print(f"regularizer {feature_transform_regularizer(tf).item():.5f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {acc:.5f}")
