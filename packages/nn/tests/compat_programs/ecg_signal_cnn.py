"""A 1-D convolutional classifier for physiological signals, in the style of the public ECG /
EEG / accelerometer training scripts: Conv1d with padding_mode="reflect" and "circular" (and the
equivalent nn.ReflectionPad1d / nn.CircularPad1d / nn.ReplicationPad1d modules), BatchNorm1d with
momentum=None (a cumulative moving average) and with track_running_stats=False, SELU with
lecun-normal-style init and AlphaDropout, CELU, RReLU (its eval-mode slope), Dropout1d, LPPool1d,
AvgPool1d(ceil_mode=True, count_include_pad=False), AdaptiveMaxPool1d(return_indices=True) to find
the most active time step, soft denoising with nn.Softshrink / Hardshrink / Tanhshrink, a
prototype head with nn.PairwiseDistance and nn.CosineSimilarity, the printed model (every
module's repr), state_dict keys, and a short AdamW training run. Dropout layers are only run in
eval mode (the libraries' draws differ). Weights and data from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(37)


def arr(*shape, s=1.0):
    return torch.from_numpy(rng.normal(0, s, shape).astype(np.float32))


# ---- padding ----
sig = torch.arange(6.0).reshape(1, 1, 6)
print("reflect", nn.ReflectionPad1d(2)(sig).flatten().tolist())
print("replicate", nn.ReplicationPad1d((1, 3))(sig).flatten().tolist())
print("circular", nn.CircularPad1d(2)(sig).flatten().tolist())
w = arr(2, 1, 5, s=0.5)
for mode, pad in [("reflect", nn.ReflectionPad1d(2)), ("circular", nn.CircularPad1d(2))]:
    c = nn.Conv1d(1, 2, 5, padding=2, padding_mode=mode, bias=False)
    with torch.no_grad():
        c.weight.copy_(w)
    print(f"Conv1d padding_mode={mode}: equals explicit pad {torch.allclose(c(sig), F.conv1d(pad(sig), w), atol=1e-5)}")

# ---- activations and shrinkage ----
t = torch.linspace(-2, 2, 9)
print("softshrink", [round(v, 3) for v in nn.Softshrink(0.5)(t).tolist()])
print("hardshrink", nn.Hardshrink(0.75)(t).tolist())
print("tanhshrink", [round(v, 4) for v in nn.Tanhshrink()(t).tolist()[:3]])
print("celu", [round(v, 4) for v in nn.CELU(alpha=0.5)(t).tolist()[:3]],
      "selu", [round(v, 4) for v in nn.SELU()(t).tolist()[:2]])
rr = nn.RReLU(0.1, 0.3)
rr.eval()
print("rrelu eval slope", [round(v, 4) for v in rr(t).tolist()[:2]], rr)
ad = nn.AlphaDropout(0.2)
ad.eval()
d1 = nn.Dropout1d(0.3)
d1.eval()
print("AlphaDropout/Dropout1d in eval are identities:", torch.equal(ad(t), t), torch.equal(d1(sig), sig))

# ---- pooling ----
x = arr(2, 3, 11)
lp = nn.LPPool1d(2, 3, stride=2)
print("LPPool1d", tuple(lp(x).shape), round(lp(x.abs()).sum().item(), 4),
      "equals sqrt of summed squares:", torch.allclose(lp(x), (F.avg_pool1d(x ** 2, 3, 2) * 3).sqrt(), atol=1e-5))
ap = nn.AvgPool1d(4, stride=3, padding=1, ceil_mode=True, count_include_pad=False)
print("AvgPool1d ceil_mode", tuple(ap(x).shape), round(ap(x).sum().item(), 4))
vals, idx = nn.AdaptiveMaxPool1d(1, return_indices=True)(x)
print("adaptive max indices", idx.flatten().tolist(), "gather ok:", torch.equal(x.gather(2, idx), vals))

# ---- batch norm variants ----
bn_cum = nn.BatchNorm1d(3, momentum=None)
for k in range(3):
    bn_cum(x + k)
print("cumulative running mean", [round(v, 4) for v in bn_cum.running_mean.tolist()],
      "expected", [round(v, 4) for v in (x.mean((0, 2)) + 1).tolist()], "tracked", bn_cum.num_batches_tracked.item())
bn_free = nn.BatchNorm1d(3, track_running_stats=False)
bn_free.eval()
print("no running stats:", bn_free.running_mean is None, "eval still normalizes:",
      torch.allclose(bn_free(x).mean((0, 2)), torch.zeros(3), atol=1e-5))


class ECGNet(nn.Module):
    def __init__(self, n_cls=3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 8, 7, padding=3, padding_mode="reflect", bias=False), nn.BatchNorm1d(8), nn.CELU(0.5),
            nn.Conv1d(8, 8, 5, padding=2, padding_mode="circular", groups=2), nn.SELU(),
            nn.AlphaDropout(0.1), nn.LPPool1d(2, 2),
            nn.Conv1d(8, 16, 3, padding=1, bias=False), nn.BatchNorm1d(16, momentum=None), nn.RReLU(),
            nn.Dropout1d(0.1), nn.AdaptiveMaxPool1d(4), nn.Flatten())
        self.proj = nn.Linear(64, 8)
        self.prototypes = nn.Parameter(torch.zeros(n_cls, 8))
        self.dist = nn.PairwiseDistance(p=2, eps=1e-6)
        self.cos = nn.CosineSimilarity(dim=-1)

    def forward(self, x):
        z = self.proj(self.features(x))  # (B, 8)
        d = self.dist(z[:, None, :], self.prototypes[None])  # (B, C)
        return -d + 0.5 * self.cos(z[:, None, :], self.prototypes[None])


net = ECGNet()
with torch.no_grad():
    for name, p in net.named_parameters():
        if p.ndim > 1:
            p.copy_(arr(*p.shape, s=(1.0 / np.prod(p.shape[1:])) ** 0.5))  # lecun normal
        elif name.endswith("bias") and "features.1" not in name and "features.8" not in name:
            p.zero_()
print(net)
print("state_dict", [k for k in net.state_dict() if "features.8" in k])

# three rhythm classes: different beat periods, plus baseline wander and noise
n, L = 48, 96
tt = np.arange(L)
Xn, Yn = [], []
for i in range(n):
    c = i % 3
    period = [12, 20, 32][c]
    s = np.zeros(L)
    s[(tt + 3 * i) % period == 0] = 1.0
    s = np.convolve(s, np.hanning(5), mode="same") + 0.3 * np.sin(tt / 15 + i) + 0.1 * rng.normal(size=L)
    Xn.append(s)
    Yn.append(c)
X = torch.from_numpy(np.array(Xn, dtype=np.float32))[:, None]
Y = torch.tensor(Yn)
net.eval()  # the dropouts and RReLU act as in inference (deterministic); batch norms below
for m in net.modules():
    if isinstance(m, nn.BatchNorm1d):
        m.train()
opt = torch.optim.AdamW(net.parameters(), lr=5e-3)
losses = []
for step in range(40):
    loss = F.cross_entropy(net(X), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f} cum-bn tracked {net.features[8].num_batches_tracked.item()}")
net.eval()
with torch.no_grad():
    acc = (net(X).argmax(1) == Y).float().mean().item()
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {acc:.4f}")
