"""Growing neural cellular automata, in the style of the public "Growing Neural Cellular
Automata" (Mordvintsev et al., 2020) re-implementations: a 16-channel state grid whose first
four channels are RGBA, perception by fixed identity / Sobel-x / Sobel-y filters built with
torch.outer and applied depthwise (F.conv2d with groups=16 on a repeat-ed kernel, circular
padding by F.pad(mode="circular")), an update network of 1x1 convolutions with the last layer
zero-initialized, stochastic cell updates with NumPy masks, the alive mask from
F.max_pool2d(kernel 3, stride 1, padding 1) on the alpha channel, a sample pool refreshed with
index_copy_ and the worst sample (argmax of per-sample loss) reseeded, gradient normalization
per parameter (damped: p.grad / (p.grad.norm() + 1)), a MultiStepLR schedule, and a damage test.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <alive cells>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(6)
C, S = 16, 16
yy, xx = torch.meshgrid(torch.arange(S), torch.arange(S), indexing="ij")
ring = ((yy - 7.5) ** 2 + (xx - 7.5) ** 2).sqrt() < 5.0  # a disk around the seed
target = torch.zeros(4, S, S)
target[0] = ring.float() * (xx.float() / S)
target[1] = ring.float() * 0.5
target[2] = ring.float() * (1 - yy.float() / S)
target[3] = ring.float()
print(f"target pixels {int(ring.sum())} alpha sum {target[3].sum().item():.1f}")

ident = torch.zeros(3, 3)
ident[1, 1] = 1.0
sobel_x = torch.outer(torch.tensor([1.0, 2.0, 1.0]), torch.tensor([-1.0, 0.0, 1.0])) / 8
kernels = torch.stack([ident, sobel_x, sobel_x.T]).repeat(C, 1, 1)[:, None]  # (3C, 1, 3, 3)


def perceive(x):
    return F.conv2d(F.pad(x, (1, 1, 1, 1), mode="circular"), kernels, groups=C)


def alive(x):
    return F.max_pool2d(x[:, 3:4], kernel_size=3, stride=1, padding=1) > 0.1


class CA(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Conv2d(3 * C, 64, 1)
        self.w2 = nn.Conv2d(64, C, 1, bias=False)
        with torch.no_grad():
            self.w1.weight.copy_(torch.from_numpy(rng.normal(0, 0.1, self.w1.weight.shape).astype(np.float32)))
            self.w1.bias.zero_()
            self.w2.weight.zero_()

    def forward(self, x, fire_rate=0.5):
        pre = alive(x)
        dx = self.w2(F.relu(self.w1(perceive(x))))
        mask = torch.from_numpy((rng.random((x.shape[0], 1, S, S)) < fire_rate).astype(np.float32))
        x = x + dx * mask
        return x * (pre & alive(x)).float()


def seed(n):
    x = torch.zeros(n, C, S, S)
    x[:, 3:, S // 2, S // 2] = 1.0
    return x


ca = CA()
opt = torch.optim.Adam(ca.parameters(), lr=5e-3)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[40], gamma=0.3)
pool = seed(32)
losses = []
for it in range(60):
    idx = torch.from_numpy(rng.choice(32, 8, replace=False))
    x = pool[idx]
    with torch.no_grad():
        worst = ((x[:, :4] - target) ** 2).mean((1, 2, 3)).argmax()
        x[worst] = seed(1)[0]
    for _ in range(int(rng.integers(8, 12))):
        x = ca(x)
    per = ((x[:, :4] - target) ** 2).mean((1, 2, 3))
    loss = per.mean()
    opt.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in ca.parameters():
            p.grad /= p.grad.norm() + 1.0  # damped per-parameter normalization
    opt.step()
    sched.step()
    pool.index_copy_(0, idx, x.detach())
    losses.append(loss.item())
    if it % 15 == 0:
        print(f"it {it:2d} loss {loss.item():.6f} lr {sched.get_last_lr()[0]:.5f} alive {int(alive(x).sum())}")

with torch.no_grad():
    x = seed(1)
    for _ in range(24):
        x = ca(x, fire_rate=1.0)
    grown = ((x[:, :4] - target) ** 2).mean().item()
    n_alive = int(alive(x).sum())
    x[:, :, :, : S // 2] = 0.0  # damage
    damaged = ((x[:, :4] - target) ** 2).mean().item()
    for _ in range(24):
        x = ca(x, fire_rate=1.0)
    print(f"grown loss {grown:.6f} alive {n_alive} damaged {damaged:.6f} regrown {((x[:, :4] - target) ** 2).mean().item():.6f}")
print(f"perception channels {perceive(seed(1)).shape[1]} sobel sums {sobel_x.sum().item():.1f} {sobel_x.abs().sum().item():.2f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {n_alive}")
