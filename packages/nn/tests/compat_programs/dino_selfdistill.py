"""Self-distillation without labels (DINO, Caron et al.) in the style of the public reference
code: multi-crop augmentation (two global and four local crops resized by F.interpolate with
antialias-free bilinear sampling and random flips by torch.flip), a DINOHead whose last layer is
weight-normalised through torch.nn.utils.parametrizations.weight_norm with the magnitude
(parametrizations.weight.original0) frozen at one, parameter groups without weight decay for
biases and norms, cosine schedules as NumPy arrays indexed by iteration (lr with warmup, weight
decay, teacher momentum), teacher temperature warmup, a center buffer updated by EMA of teacher
outputs, the cross-view loss skipping same-view pairs, cancel-last-layer gradients during the
first iterations, per-parameter gradient clipping as in DINO's clip_gradients, and the teacher
as an EMA of the student (torch._foreach_mul_ / _foreach_add_). Evaluated by k-NN on the
teacher's features. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <k-NN accuracy>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import weight_norm

rng = np.random.default_rng(154)
S, OUT = 16, 64


def images(n):
    """Blobs of one of four colours on noise: the colour is the (unused) label."""
    y = rng.integers(0, 4, n)
    palette = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], dtype=np.float64)
    yy, xx = np.meshgrid(np.arange(S), np.arange(S), indexing="ij")
    c = rng.uniform(4, 12, (n, 2))
    blob = np.exp(-((yy[None] - c[:, :1, None]) ** 2 + (xx[None] - c[:, 1:, None]) ** 2) / 8.0)
    x = palette[y][:, :, None, None] * blob[:, None] + 0.2 * rng.normal(size=(n, 3, S, S))
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


def crop(x, size, out):
    n = x.shape[0]
    i, j = rng.integers(0, S - size + 1, 2)
    patch = x[:, :, i:i + size, j:j + size]
    patch = F.interpolate(patch, size=(out, out), mode="bilinear", align_corners=False)
    flip = torch.from_numpy(rng.random(n) < 0.5).view(n, 1, 1, 1)
    return torch.where(flip, torch.flip(patch, dims=[3]), patch)


def multi_crop(x):
    return [crop(x, 14, 16), crop(x, 14, 16)] + [crop(x, 8, 8) for _ in range(4)]


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.GELU(), nn.Conv2d(16, 32, 3, stride=2, padding=1),
                                 nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(32))

    def forward(self, x):
        return self.net(x)


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, hidden=48, bottleneck=16):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, bottleneck))
        self.last_layer = weight_norm(nn.Linear(bottleneck, out_dim, bias=False))
        self.last_layer.parametrizations.weight.original0.data.fill_(1)
        self.last_layer.parametrizations.weight.original0.requires_grad = False

    def forward(self, x):
        x = F.normalize(self.mlp(x), dim=-1, p=2)
        return self.last_layer(x)


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, crops):
        # crops of one resolution run as one batch, as the reference (unique_consecutive of sizes)
        sizes = torch.tensor([c.shape[-1] for c in crops])
        counts = torch.unique_consecutive(sizes, return_counts=True)[1]
        idx = torch.cumsum(counts, 0)
        start, out = 0, []
        for end in idx.tolist():
            out.append(self.backbone(torch.cat(crops[start:end])))
            start = end
        return self.head(torch.cat(out))


class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops, warmup_teacher_temp, teacher_temp, warmup_epochs, nepochs,
                 student_temp=0.1, center_momentum=0.9):
        super().__init__()
        self.student_temp, self.center_momentum, self.ncrops = student_temp, center_momentum, ncrops
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.teacher_temp_schedule = np.concatenate((np.linspace(warmup_teacher_temp, teacher_temp, warmup_epochs),
                                                     np.ones(nepochs - warmup_epochs) * teacher_temp))

    def forward(self, student_output, teacher_output, epoch):
        student_out = (student_output / self.student_temp).chunk(self.ncrops)
        temp = self.teacher_temp_schedule[epoch]
        teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1).detach().chunk(2)
        total_loss, n_loss_terms = 0, 0
        for iq, q in enumerate(teacher_out):
            for v in range(len(student_out)):
                if v == iq:
                    continue
                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                total_loss += loss.mean()
                n_loss_terms += 1
        self.update_center(teacher_output)
        return total_loss / n_loss_terms

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = torch.sum(teacher_output, dim=0, keepdim=True) / len(teacher_output)
        self.center = self.center * self.center_momentum + batch_center * (1 - self.center_momentum)


def cosine_scheduler(base, final, iters, warmup_iters=0, start_warmup=0.0):
    warm = np.linspace(start_warmup, base, warmup_iters)
    it = np.arange(iters - warmup_iters)
    sched = final + 0.5 * (base - final) * (1 + np.cos(np.pi * it / len(it)))
    return np.concatenate((warm, sched))


def get_params_groups(model):
    regularized, not_regularized = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (not_regularized if name.endswith(".bias") or len(param.shape) == 1 else regularized).append(param)
    return [{"params": regularized}, {"params": not_regularized, "weight_decay": 0.0}]


def clip_gradients(model, clip):
    norms = []
    for name, p in model.named_parameters():
        if p.grad is not None:
            param_norm = p.grad.data.norm(2)
            norms.append(param_norm.item())
            clip_coef = clip / (param_norm + 1e-6)
            if clip_coef < 1:
                p.grad.data.mul_(clip_coef)
    return norms


def cancel_gradients_last_layer(epoch, model, freeze_last_layer):
    if epoch >= freeze_last_layer:
        return
    for n, p in model.named_parameters():
        if "last_layer" in n:
            p.grad = None


student = MultiCropWrapper(Backbone(), DINOHead(32, OUT))
with torch.no_grad():
    for name, p in student.named_parameters():
        if "original0" in name:
            continue
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p[0].numel()), p.shape).astype(np.float32)))
        elif name.endswith("bias"):
            p.zero_()
teacher = copy.deepcopy(student)
for p in teacher.parameters():
    p.requires_grad = False
print(f"last layer parametrized: {nn.utils.parametrize.is_parametrized(student.head.last_layer)} "
      f"magnitude frozen: {not student.head.last_layer.parametrizations.weight.original0.requires_grad} "
      f"unit-norm rows: {torch.allclose(student.head.last_layer.weight.norm(dim=1), torch.ones(OUT))}")

EPOCHS, ITERS = 4, 8
groups = get_params_groups(student)
print(f"param groups: {len(groups[0]['params'])} decayed, {len(groups[1]['params'])} not")
opt = torch.optim.AdamW(groups)
lr_s = cosine_scheduler(5e-3, 1e-4, EPOCHS * ITERS, warmup_iters=ITERS)
wd_s = cosine_scheduler(0.04, 0.4, EPOCHS * ITERS)
mom_s = cosine_scheduler(0.9, 1.0, EPOCHS * ITERS)
dino_loss = DINOLoss(OUT, 6, 0.04, 0.07, 2, EPOCHS)
losses = []
for epoch in range(EPOCHS):
    for it in range(ITERS):
        gi = epoch * ITERS + it
        for i, pg in enumerate(opt.param_groups):
            pg["lr"] = lr_s[gi]
            if i == 0:
                pg["weight_decay"] = wd_s[gi]
        x, _ = images(32)
        crops = multi_crop(x)
        teacher_output = teacher(crops[:2])
        student_output = student(crops)
        loss = dino_loss(student_output, teacher_output, epoch)
        opt.zero_grad()
        loss.backward()
        clip_gradients(student, 3.0)
        cancel_gradients_last_layer(epoch, student, 1)
        opt.step()
        with torch.no_grad():
            m = mom_s[gi]
            ps, pt = list(student.parameters()), list(teacher.parameters())
            torch._foreach_mul_(pt, m)
            torch._foreach_add_(pt, ps, alpha=1 - m)
        losses.append(loss.item())
    print(f"epoch {epoch} loss {np.mean(losses[-ITERS:]):.4f} teacher temp {dino_loss.teacher_temp_schedule[epoch]:.4f} "
          f"center norm {dino_loss.center.norm().item():.4f}")

with torch.no_grad():
    xtr, ytr = images(200)
    xte, yte = images(100)
    ftr = F.normalize(teacher.backbone(xtr), dim=1)
    fte = F.normalize(teacher.backbone(xte), dim=1)
    sim = fte @ ftr.T
    topv, topi = sim.topk(10, dim=1)
    votes = torch.zeros(100, 4).scatter_add_(1, ytr[topi], (topv / 0.07).exp())
    acc = (votes.argmax(1) == yte).float().mean().item()
print(f"k-NN accuracy on teacher features {acc:.4f}")
print(f"RESULT {np.mean(losses[:4]):.4f} {np.mean(losses[-4:]):.4f} {acc:.4f}")
