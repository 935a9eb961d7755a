"""Self-supervised contrastive learning in the style of SimCLR implementations: two augmented
views per sample (NumPy-made crops/flips/noise), an encoder with a projection head, the NT-Xent /
InfoNCE loss written the usual way (F.normalize, a 2N x 2N cosine-similarity matrix, the diagonal
masked with masked_fill(-inf) or eye(bool), labels from arange and roll, cross_entropy over the
similarity logits with temperature), the same loss via a boolean-mask formulation checked
against it, a learnable logit scale as in CLIP (clamped via exp), LARS-free SGD with cosine LR,
and a linear probe (frozen encoder, detach) measuring what the features learned, and a kNN
top-k classifier via torch.mm and topk. Augmentations are drawn by NumPy and batches are in
order: from the same initial weights (``--save-init``/``--init-from``) the losses agree with
torch's. Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--temperature", type=float, default=0.5)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)
rng = np.random.default_rng(0)
L, CLASSES = 24, 4

# signals: each class a different waveform; views shift, scale and add noise
t = np.linspace(0, 2 * np.pi, L * 2)
PROTOS = np.stack([np.sin(t), np.sign(np.sin(2 * t)), np.sin(3 * t) * np.cos(t),
                   (t % 2.0) - 1.0]).astype(np.float32)
labels_np = rng.integers(0, CLASSES, 256)


def view(idx):
    start = rng.integers(0, L, len(idx))
    x = np.stack([PROTOS[labels_np[i], s:s + L] for i, s in zip(idx, start)])
    x = x * rng.uniform(0.7, 1.3, (len(idx), 1)) + rng.normal(0, 0.2, x.shape)
    flip = rng.random(len(idx)) < 0.5
    x[flip] = -x[flip]
    return torch.from_numpy(x.astype(np.float32)).unsqueeze(1)


class Encoder(nn.Module):
    def __init__(self, feat=32, proj=16):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv1d(1, 16, 5, padding=2), nn.BatchNorm1d(16), nn.ReLU(),
            nn.Conv1d(16, 32, 5, padding=2, stride=2), nn.BatchNorm1d(32), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, feat))
        self.projector = nn.Sequential(nn.Linear(feat, feat), nn.ReLU(), nn.Linear(feat, proj))

    def forward(self, x):
        h = self.backbone(x)
        return h, self.projector(h)


def nt_xent(z1, z2, temperature):
    """The NT-Xent loss: each view's positive is the other view of the same sample."""
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    n = z1.shape[0]
    sim = z @ z.T / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    targets = torch.arange(2 * n).roll(n)
    return F.cross_entropy(sim, targets)


def info_nce_masks(z1, z2, temperature):
    """The same loss from positive/negative masks, as other implementations write it."""
    z = F.normalize(torch.cat([z1, z2]), dim=-1)
    n = z1.shape[0]
    sim = torch.mm(z, z.t().contiguous()) / temperature
    labels = torch.cat([torch.arange(n)] * 2)
    pos_mask = (labels.unsqueeze(0) == labels.unsqueeze(1)) & ~torch.eye(2 * n, dtype=torch.bool)
    logits_mask = torch.ones_like(sim).fill_diagonal_(0)
    exp = torch.exp(sim) * logits_mask
    log_prob = sim - torch.log(exp.sum(1, keepdim=True))
    return -(log_prob * pos_mask).sum(1).div(pos_mask.sum(1)).mean()


model = Encoder()
logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})

z1, z2 = torch.randn(8, 16), torch.randn(8, 16)
print(f"two formulations agree: "
      f"{torch.allclose(nt_xent(z1, z2, 0.5), info_nce_masks(z1, z2, 0.5), atol=1e-5)}")
perfect = F.normalize(torch.eye(8, 16), dim=1)
print(f"loss with perfect pairs {nt_xent(perfect * 10, perfect * 10, 0.1).item():.6f}")

BATCH = 64
steps = args.epochs * (256 // BATCH)
optimizer = torch.optim.SGD(list(model.parameters()) + [logit_scale], lr=0.1, momentum=0.9,
                            weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps, eta_min=1e-3)
views = [(view(np.arange(i, i + BATCH)), view(np.arange(i, i + BATCH)))
         for _ in range(args.epochs) for i in range(0, 256, BATCH)]
losses = []
for step, (v1, v2) in enumerate(views):
    model.train()
    _, p1 = model(v1)
    _, p2 = model(v2)
    loss = nt_xent(p1, p2, args.temperature)
    # a CLIP-style symmetric loss with a learned, clamped temperature
    scale = logit_scale.exp().clamp(max=100)
    a, b = F.normalize(p1, dim=-1), F.normalize(p2, dim=-1)
    clip = (F.cross_entropy(scale * a @ b.t(), torch.arange(BATCH)) +
            F.cross_entropy(scale * b @ a.t(), torch.arange(BATCH))) / 2
    total = loss + 0.1 * clip
    optimizer.zero_grad()
    total.backward()
    optimizer.step()
    scheduler.step()
    losses.append(loss.item())
    if step % 8 == 0:
        print(f"step {step:2d} nt-xent {loss.item():.4f} clip {clip.item():.4f} "
              f"scale {scale.item():.3f} lr {scheduler.get_last_lr()[0]:.4f}")

# the features, frozen: a linear probe and a kNN classifier
model.eval()
with torch.no_grad():
    train_x, test_x = view(np.arange(0, 192)), view(np.arange(192, 256))
    f_train, _ = model(train_x)
    f_test, _ = model(test_x)
y_train = torch.from_numpy(labels_np[:192])
y_test = torch.from_numpy(labels_np[192:])
probe = nn.Linear(f_train.shape[1], CLASSES)
popt = torch.optim.Adam(probe.parameters(), lr=0.05)
for _ in range(100):
    ploss = F.cross_entropy(probe(f_train.detach()), y_train)
    popt.zero_grad()
    ploss.backward()
    popt.step()
probe_acc = (probe(f_test).argmax(1) == y_test).float().mean().item()
ft, fq = F.normalize(f_train, dim=1), F.normalize(f_test, dim=1)
sim, idx = torch.mm(fq, ft.t()).topk(k=5, dim=1)
votes = torch.zeros(len(fq), CLASSES).scatter_add_(1, y_train[idx], sim.exp())
knn_acc = (votes.argmax(1) == y_test).float().mean().item()
print(f"linear probe accuracy {probe_acc:.3f}, 5-NN accuracy {knn_acc:.3f}")
print(f"RESULT {losses[0]:.6f} {np.mean(losses[-4:]):.6f} {probe_acc:.4f} {knn_acc:.4f}")
