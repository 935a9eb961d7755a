"""A small Vision Transformer trained on synthetic images, in the style of the many public ViT
tutorials: a patch embedding (a strided Conv2d, checked against F.unfold + Linear), a learned
class token and position embedding, pre-norm blocks of nn.MultiheadAttention (batch_first) and a
GELU MLP with LayerNorm, AdamW with weight decay on matrices only (param groups by name),
OneCycleLR stepped per batch, cross-entropy with label smoothing, the attention weights read back
for one image, and a CosineAnnealingWarmRestarts schedule printed alongside. Training draws no
random numbers (no dropout, batches in order), so from the same initial weights
(``--save-init``/``--init-from``) the losses agree with torch's to float32 rounding. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts, OneCycleLR

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--save", default=None, help="torch.save a training checkpoint here")
parser.add_argument("--stop-after", type=int, default=None, help="stop (and save) after N epochs")
parser.add_argument("--resume", default=None, help="a checkpoint to evaluate and train on from")
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)

IMG, PATCH, CLASSES = 12, 4, 4


def make_images(n, rng):
    """Class k: a bright 4x4 square in quadrant k, on noise."""
    x = rng.normal(0, 0.3, (n, 1, IMG, IMG)).astype(np.float32)
    y = rng.integers(0, CLASSES, n)
    for i, k in enumerate(y):
        r, c = divmod(int(k), 2)
        oy, ox = r * 6 + rng.integers(0, 3), c * 6 + rng.integers(0, 3)
        x[i, 0, oy:oy + 4, ox:ox + 4] += 2.0
    return torch.from_numpy(x), torch.from_numpy(y)


class PatchEmbed(nn.Module):
    def __init__(self, in_chans=1, embed_dim=32):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=PATCH, stride=PATCH)

    def forward(self, x):
        x = self.proj(x)  # B, D, H/P, W/P
        return x.flatten(2).transpose(1, 2)  # B, N, D


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio=2.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x, need_weights=False):
        h = self.norm1(x)
        a, w = self.attn(h, h, h, need_weights=need_weights, average_attn_weights=True)
        x = x + a
        x = x + self.mlp(self.norm2(x))
        return x, w


class ViT(nn.Module):
    def __init__(self, dim=32, depth=2, heads=4):
        super().__init__()
        self.patch_embed = PatchEmbed(embed_dim=dim)
        n = (IMG // PATCH) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, CLASSES)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, x, return_attn=False):
        x = self.patch_embed(x)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        attn = None
        for i, blk in enumerate(self.blocks):
            x, w = blk(x, need_weights=return_attn and i == len(self.blocks) - 1)
            attn = w if w is not None else attn
        x = self.norm(x)
        logits = self.head(x[:, 0])
        return (logits, attn) if return_attn else logits


rng = np.random.default_rng(0)
x_train, y_train = make_images(256, rng)
x_test, y_test = make_images(128, rng)
model = ViT()
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})

# the patch embedding is a Linear over unfolded patches
conv = model.patch_embed.proj
via_unfold = F.unfold(x_train[:2], kernel_size=PATCH, stride=PATCH).transpose(1, 2) \
    @ conv.weight.view(conv.out_channels, -1).t() + conv.bias
assert torch.allclose(via_unfold, model.patch_embed(x_train[:2]), atol=1e-5)
n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
print(f"ViT: {n_params} parameters, {len(model.blocks)} blocks, tokens "
      f"{tuple(model.pos_embed.shape)}")

decay, no_decay = [], []
for name, p in model.named_parameters():
    (no_decay if p.ndim <= 1 or name in ("cls_token", "pos_embed") else decay).append(p)
print(f"decay {len(decay)} tensors, no decay {len(no_decay)} tensors")
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                               {"params": no_decay, "weight_decay": 0.0}], lr=3e-3,
                              betas=(0.9, 0.999))
BATCH = 32
steps_per_epoch = len(x_train) // BATCH
scheduler = OneCycleLR(optimizer, max_lr=3e-3, epochs=args.epochs,
                       steps_per_epoch=steps_per_epoch, pct_start=0.25)
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)


def evaluate():
    model.eval()
    with torch.no_grad():
        logits = model(x_test)
        loss = F.cross_entropy(logits, y_test).item()
        acc = (logits.argmax(dim=-1) == y_test).float().mean().item()
    return loss, acc


first, _ = evaluate()
print(f"initial test loss {first:.4f}")
start = 0
if args.resume:  # a checkpoint written by torch.save (by this program, on either library)
    ckpt = torch.load(args.resume, map_location="cpu", weights_only=True)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    start = ckpt["epoch"]
    loss, acc = evaluate()
    print(f"resumed at epoch {start}: test loss {loss:.6f} acc {acc:.4f} lr "
          f"{scheduler.get_last_lr()[0]:.6f} step {optimizer.state_dict()['state'][0]['step']}")
for epoch in range(start, args.epochs if args.stop_after is None else args.stop_after):
    model.train()
    total = 0.0
    for i in range(steps_per_epoch):
        xb, yb = x_train[i * BATCH:(i + 1) * BATCH], y_train[i * BATCH:(i + 1) * BATCH]
        loss = criterion(model(xb), yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        total += loss.item()
    test_loss, acc = evaluate()
    print(f"epoch {epoch + 1} train loss {total / steps_per_epoch:.4f} test loss "
          f"{test_loss:.4f} acc {acc:.3f} lr {scheduler.get_last_lr()[0]:.6f}")

if args.save:
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "epoch": epoch + 1}, args.save)
_, attn = model(x_test[:1], return_attn=True)
print(f"attention map {tuple(attn.shape)}, rows sum to 1: "
      f"{torch.allclose(attn.sum(-1), torch.ones(1, 10))}")
# the class token attends most to the patches of the bright square's quadrant
cls_attn = attn[0, 0, 1:].view(IMG // PATCH, IMG // PATCH)
print(f"cls attention argmax patch {cls_attn.argmax().item()} for class {y_test[0].item()}")

# the warm-restarts schedule that many ViT recipes use instead, over 12 steps
opt2 = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
warm = CosineAnnealingWarmRestarts(opt2, T_0=4, T_mult=2, eta_min=0.001)
lrs = []
for _ in range(12):
    lrs.append(opt2.param_groups[0]["lr"])
    opt2.step()
    warm.step()
print("warm restarts:", " ".join(f"{v:.4f}" for v in lrs))
print(f"RESULT {first:.6f} {test_loss:.6f} {acc:.4f}")
