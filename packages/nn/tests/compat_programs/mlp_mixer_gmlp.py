"""All-MLP vision models in the style of the public lucidrains / timm code: MLP-Mixer (token-
mixing MLPs by transposes, or by Conv1d over the patch axis as in some ports), gMLP's spatial
gating unit (a Linear over the sequence axis initialised to zero weight / unit bias, so the gate
starts as the identity), ConvMixer (depthwise convs with a residual, GELU, BatchNorm), LayerScale
and patch embedding by a strided Conv2d or by unfold + Linear, with the two embeddings checked
equal. Trained briefly on 16x16 four-class textures with label smoothing and AdamW with a
linear-warmup cosine schedule built from SequentialLR. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss>
<last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1504)


class PreNormResidual(nn.Module):
    def __init__(self, dim, fn, init_values=None):
        super().__init__()
        self.fn, self.norm = fn, nn.LayerNorm(dim)
        self.gamma = nn.Parameter(init_values * torch.ones(dim)) if init_values else None

    def forward(self, x):
        out = self.fn(self.norm(x))
        return x + (out * self.gamma if self.gamma is not None else out)


def feed_forward(dim, expansion, dense):
    inner = int(dim * expansion)
    return nn.Sequential(dense(dim, inner), nn.GELU(approximate="tanh"), dense(inner, dim))


class TokenMix(nn.Module):
    """MLP over the token axis via transpose (the most common port)."""

    def __init__(self, n, expansion):
        super().__init__()
        self.mlp = feed_forward(n, expansion, nn.Linear)

    def forward(self, x):
        return self.mlp(x.transpose(1, 2)).transpose(1, 2)


def mixer(image=16, patch=4, dim=24, depth=2, classes=4, conv_tokens=False):
    n = (image // patch) ** 2
    token = (lambda: feed_forward(n, 0.5, lambda a, b: nn.Conv1d(a, b, 1))) if conv_tokens else (lambda: TokenMix(n, 0.5))
    return nn.Sequential(
        nn.Conv2d(1, dim, patch, stride=patch), nn.Flatten(2), Transpose(),
        *[nn.Sequential(PreNormResidual(dim, token()), PreNormResidual(dim, feed_forward(dim, 2, nn.Linear)))
          for _ in range(depth)],
        nn.LayerNorm(dim), Mean(1), nn.Linear(dim, classes))


class Transpose(nn.Module):
    def forward(self, x):
        return x.transpose(1, 2)


class Mean(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.mean(dim=self.dim)


class SpatialGatingUnit(nn.Module):
    def __init__(self, dim, n):
        super().__init__()
        self.norm = nn.LayerNorm(dim // 2)
        self.proj = nn.Linear(n, n)
        nn.init.zeros_(self.proj.weight)
        nn.init.ones_(self.proj.bias)

    def forward(self, x):
        u, v = x.chunk(2, dim=-1)
        v = self.proj(self.norm(v).transpose(-1, -2)).transpose(-1, -2)
        return u * v


class GMLPBlock(nn.Module):
    def __init__(self, dim, n, ff=2):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj_in = nn.Linear(dim, dim * ff)
        self.sgu = SpatialGatingUnit(dim * ff, n)
        self.proj_out = nn.Linear(dim * ff // 2, dim)

    def forward(self, x):
        return x + self.proj_out(self.sgu(F.gelu(self.proj_in(self.norm(x)))))


class GMLP(nn.Module):
    def __init__(self, patch=4, dim=24, depth=2, classes=4):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(patch * patch, dim)
        self.blocks = nn.Sequential(*[GMLPBlock(dim, 16) for _ in range(depth)])
        self.head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, classes))

    def forward(self, x):
        p = F.unfold(x, self.patch, stride=self.patch).transpose(1, 2)  # (B, n, p*p)
        return self.head(self.blocks(self.embed(p)).mean(1))


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) + x


def conv_mixer(dim=24, depth=2, kernel=5, patch=2, classes=4):
    return nn.Sequential(
        nn.Conv2d(1, dim, patch, stride=patch), nn.GELU(), nn.BatchNorm2d(dim),
        *[nn.Sequential(Residual(nn.Sequential(nn.Conv2d(dim, dim, kernel, groups=dim, padding="same"), nn.GELU(), nn.BatchNorm2d(dim))),
                        nn.Conv2d(dim, dim, 1), nn.GELU(), nn.BatchNorm2d(dim)) for _ in range(depth)],
        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(dim, classes))


def numpy_init(model, scale=0.3):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(rng.normal(0, scale / np.sqrt(fan_in), p.shape).astype(np.float32)))
            elif "norm" not in name and "gamma" not in name and not name.endswith(("1.weight", "2.weight")):
                p.zero_()
    for m in model.modules():
        if isinstance(m, SpatialGatingUnit):
            nn.init.zeros_(m.proj.weight)
            nn.init.ones_(m.proj.bias)
        if isinstance(m, (nn.LayerNorm, nn.BatchNorm2d)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def textures(m):
    y = rng.integers(0, 4, m)
    yy, xx = np.mgrid[0:16, 0:16]
    freq = rng.uniform(0.6, 1.0, (m, 1, 1))
    phase = rng.uniform(0, 2 * np.pi, (m, 1, 1))
    arg = np.where((y == 0)[:, None, None], xx, np.where((y == 1)[:, None, None], yy,
                   np.where((y == 2)[:, None, None], xx + yy, xx - yy)))
    img = np.sin(freq * arg + phase) + 0.3 * rng.normal(size=(m, 16, 16))
    return torch.from_numpy(img[:, None].astype(np.float32)), torch.from_numpy(y)


# the two patch embeddings agree
conv = nn.Conv2d(1, 8, 4, stride=4)
lin = nn.Linear(16, 8)
with torch.no_grad():
    lin.weight.copy_(conv.weight.view(8, 16))
    lin.bias.copy_(conv.bias)
xb, _ = textures(2)
a = conv(xb).flatten(2).transpose(1, 2)
b = lin(F.unfold(xb, 4, stride=4).transpose(1, 2))
print(f"conv patchify == unfold + linear: {torch.allclose(a, b, atol=1e-6)} tokens {tuple(a.shape)}")
sgu = numpy_init(GMLP()).blocks[0].sgu
v = torch.from_numpy(rng.normal(size=(2, 16, 48)).astype(np.float32))
print(f"sgu starts as the identity on u: {torch.equal(sgu(v), v[..., :24])}")
m1 = numpy_init(mixer())
m2 = mixer(conv_tokens=True)
sd = m1.state_dict()
conv_sd = {k: (v.unsqueeze(-1) if k in [kk for kk in sd if ".0.fn.mlp." in kk and kk.endswith("weight")] else v) for k, v in sd.items()}
conv_sd = {k.replace(".0.fn.mlp.", ".0.fn."): v for k, v in conv_sd.items()}
m2.load_state_dict(conv_sd)
print(f"conv1d token mixing == transposed linear: {torch.allclose(m1(xb), m2(xb), atol=1e-5)}")

results = {}
for name, model in [("mixer", numpy_init(mixer())), ("gmlp", numpy_init(GMLP())), ("convmixer", numpy_init(conv_mixer()))]:
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=5)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=25, eta_min=1e-4)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[5])
    losses = []
    for step in range(30):
        xb, yb = textures(32)
        loss = F.cross_entropy(model(xb), yb, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    xt, yt = textures(128)
    with torch.no_grad():
        acc = (model(xt).argmax(1) == yt).float().mean().item()
    results[name] = (losses, acc)
    print(f"{name:9s} params {sum(p.numel() for p in model.parameters()):5d} loss {np.mean(losses[:3]):.4f} -> "
          f"{np.mean(losses[-3:]):.4f} accuracy {acc:.4f} lr {sched.get_last_lr()[0]:.6f}")
losses, acc = results["mixer"]
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-3:]):.4f} {acc:.4f}")
