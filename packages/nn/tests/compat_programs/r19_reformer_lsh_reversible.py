"""Reformer pieces in the style of the public PyTorch re-implementations: LSH attention (random
rotations shared by queries and keys, bucket = argmax over [xR, -xR], a stable torch.argsort of
bucket * n + position, torch.gather into sorted order, chunked attention to the own and the
previous chunk built with torch.cat / roll, self-attention masked except when alone, logsumexp
for the normalizer, scatter back to the original order with the inverse permutation), checked
against full attention when every token falls in one bucket; and reversible residual layers
(y1 = x1 + F(x2), y2 = x2 + G(y1)) whose custom torch.autograd.Function stores no activations
and reconstructs the inputs in backward under torch.enable_grad, with the parameter gradients
checked against ordinary autograd and torch.autograd.gradcheck in float64. A copy-the-first-half
sequence task trained with Adam. Weights and data from NumPy. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <copy accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(7)
D, HASHES, CHUNK = 16, 2, 4


def lsh_attention(qk, v, rotations, chunk):
    b, n, d = qk.shape
    outs, lses = [], []
    for h in range(rotations.shape[0]):
        rot = qk @ rotations[h]
        buckets = torch.argmax(torch.cat([rot, -rot], dim=-1), dim=-1)  # (b, n)
        pos = torch.arange(n).expand(b, n)
        order = torch.argsort(buckets * n + pos, dim=-1, stable=True)
        undo = torch.argsort(order, dim=-1)
        sq = torch.gather(qk, 1, order[..., None].expand(-1, -1, d))
        sv = torch.gather(v, 1, order[..., None].expand(-1, -1, d))
        spos = torch.gather(pos, 1, order)
        nc = n // chunk
        cq = sq.reshape(b, nc, chunk, d)
        ck = F.normalize(cq, dim=-1)
        cv = sv.reshape(b, nc, chunk, d)
        cp = spos.reshape(b, nc, chunk)
        keys = torch.cat([ck, torch.roll(ck, 1, dims=1)], dim=2)
        vals = torch.cat([cv, torch.roll(cv, 1, dims=1)], dim=2)
        kpos = torch.cat([cp, torch.roll(cp, 1, dims=1)], dim=2)
        scores = torch.einsum("bcid,bcjd->bcij", cq, keys) / d ** 0.5
        self_mask = cp[..., :, None] == kpos[..., None, :]
        scores = scores.masked_fill(self_mask, -1e5)  # attend to self only when alone
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        o = torch.einsum("bcij,bcjd->bcid", torch.exp(scores - lse), vals).reshape(b, n, d)
        outs.append(torch.gather(o, 1, undo[..., None].expand(-1, -1, d)))
        lses.append(torch.gather(lse.reshape(b, n), 1, undo))
    lse = torch.stack(lses)  # combine the hash rounds by their normalizers
    w = torch.softmax(lse, dim=0)
    return (torch.stack(outs) * w[..., None]).sum(0)


class RevFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, f, g, *params):
        ctx.f, ctx.g = f, g
        x1, x2 = x.chunk(2, dim=-1)
        with torch.no_grad():
            y1 = x1 + f(x2)
            y2 = x2 + g(y1)
        y = torch.cat([y1, y2], dim=-1)
        ctx.save_for_backward(y.detach())
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        f, g = ctx.f, ctx.g
        y1, y2 = y.chunk(2, dim=-1)
        dy1, dy2 = dy.chunk(2, dim=-1)
        fp, gp = list(f.parameters()), list(g.parameters())
        with torch.enable_grad():
            y1 = y1.detach().requires_grad_(True)
            gy1 = g(y1)
            grads = torch.autograd.grad(gy1, [y1] + gp, dy2)
        x2 = (y2 - gy1).detach()
        dy1 = dy1 + grads[0]
        with torch.enable_grad():
            x2 = x2.requires_grad_(True)
            fx2 = f(x2)
            fgrads = torch.autograd.grad(fx2, [x2] + fp, dy1)
        dx2 = dy2 + fgrads[0]
        return (torch.cat([dy1, dx2], dim=-1), None, None, *fgrads[1:], *grads[1:])


class RevBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.f = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.Tanh())
        self.g = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x, reversible=True):
        if reversible:
            return RevFn.apply(x, self.f, self.g, *self.f.parameters(), *self.g.parameters())
        x1, x2 = x.chunk(2, dim=-1)
        y1 = x1 + self.f(x2)
        return torch.cat([y1, x2 + self.g(y1)], dim=-1)


def np_init(module, scale=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.from_numpy(rng.normal(0, scale, size=tuple(p.shape))).to(p.dtype))
            elif name.endswith("bias"):
                p.zero_()


# LSH attention == full attention when there is a single bucket per hash (one rotation column
# that every token projects positively on) and one chunk
qk = torch.from_numpy(rng.normal(size=(2, 8, D)).astype(np.float32))
v = torch.from_numpy(rng.normal(size=(2, 8, D)).astype(np.float32))
rot1 = torch.zeros(1, D, 1)
qk_pos = qk.abs() + 0.1
rot1[0, :, 0] = 1.0
lsh = lsh_attention(qk_pos, v, rot1, chunk=8)
k = F.normalize(qk_pos, dim=-1)
full = qk_pos @ k.transpose(1, 2) / D ** 0.5
full = full.masked_fill(torch.eye(8, dtype=torch.bool), -1e5)
ref = torch.softmax(full, -1) @ v
print("single bucket == full attention", torch.allclose(lsh, ref, atol=1e-5))

# reversible block: gradients equal ordinary autograd's; gradcheck in float64
blk = RevBlock(4).double()
np_init(blk)
x = torch.from_numpy(rng.normal(size=(3, 8))).requires_grad_(True)
y = blk(x)
gy = torch.from_numpy(rng.normal(size=(3, 8)))
gx, *gp = torch.autograd.grad(y, [x, *blk.parameters()], gy)
y_ref = blk(x, reversible=False)
gx_ref, *gp_ref = torch.autograd.grad(y_ref, [x, *blk.parameters()], gy)
print("rev forward equal", torch.allclose(y, y_ref), "input grad equal", torch.allclose(gx, gx_ref))
print("param grads equal", all(torch.allclose(a, b) for a, b in zip(gp, gp_ref)), len(gp))
ok = torch.autograd.gradcheck(lambda t: blk(t), (x,), eps=1e-6, atol=1e-5)
print("gradcheck", ok, "grad_fn", type(y.grad_fn).__name__)


class Reformer(nn.Module):
    def __init__(self, vocab=8, depth=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, 2 * D)
        self.pos = nn.Parameter(torch.zeros(1, 16, 2 * D))
        self.qkv = nn.Linear(2 * D, 2 * D)
        self.blocks = nn.ModuleList([RevBlock(D) for _ in range(depth)])
        self.out = nn.Linear(2 * D, vocab)
        self.register_buffer("rot", torch.from_numpy(rng.normal(size=(HASHES, D, 2)).astype(np.float32)))

    def forward(self, tok):
        h = self.emb(tok) + self.pos
        qk, v = self.qkv(h).chunk(2, dim=-1)
        att = lsh_attention(qk, v, self.rot, CHUNK)
        h = h + torch.cat([att, att], dim=-1)
        for blk in self.blocks:
            h = blk(h)
        return self.out(h)


model = Reformer()
np_init(model, 0.2)
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
data = torch.from_numpy(rng.integers(1, 8, size=(256, 8)))
losses = []
for step in range(120):
    src = data[(step * 16) % 256:(step * 16) % 256 + 16]
    seq = torch.cat([src, src], dim=1)
    logits = model(torch.cat([src, torch.zeros_like(src)], dim=1))
    loss = F.cross_entropy(logits[:, 8:].reshape(-1, 8), seq[:, 8:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 30 == 0:
        print(f"step {step:3d} loss {loss.item():.5f}")
with torch.no_grad():
    src = data[:64]
    pred = model(torch.cat([src, torch.zeros_like(src)], dim=1))[:, 8:].argmax(-1)
    acc = (pred == src).float().mean().item()
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {acc:.6f}")
