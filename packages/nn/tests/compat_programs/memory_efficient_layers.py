"""Hand-written backward passes in the style of public memory-saving / DP-SGD code: a
convolution + ReLU fused into one torch.autograd.Function that saves only the input and a
boolean mask and computes its gradients with torch.nn.grad.conv2d_input / conv2d_weight
(gradcheck in float64, equality with autograd in float32), a 1-D variant for a temporal layer
through conv1d_input / conv1d_weight with stride and dilation, per-sample weight gradients of
the convolution by conv2d_weight on groups (the Opacus "unfold" alternative checked against
F.unfold + einsum), and a self-attention block that keeps its own packed in_proj tensors and
calls F.multi_head_attention_forward directly (key_padding_mask, averaged and per-head
weights), compared with nn.MultiheadAttention loaded from the same tensors. A small CNN with
the fused layer trains on NumPy data with DP-SGD (per-sample clipping, Gaussian noise from
NumPy). Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <max abs attention
difference>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.grad import conv1d_input, conv1d_weight, conv2d_input, conv2d_weight

rng = np.random.default_rng(140)


class ConvReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, padding):
        out = F.conv2d(x, w, b, padding=padding)
        mask = out > 0
        ctx.save_for_backward(x, w, mask)
        ctx.padding = padding
        return out * mask

    @staticmethod
    def backward(ctx, grad):
        x, w, mask = ctx.saved_tensors
        g = grad * mask
        gx = conv2d_input(x.shape, w, g, padding=ctx.padding) if ctx.needs_input_grad[0] else None
        gw = conv2d_weight(x, w.shape, g, padding=ctx.padding)
        return gx, gw, g.sum((0, 2, 3)), None


x64 = torch.from_numpy(rng.normal(size=(2, 3, 5, 5))).requires_grad_()
w64 = torch.from_numpy(rng.normal(size=(4, 3, 3, 3))).requires_grad_()
b64 = torch.from_numpy(rng.normal(size=(4,))).requires_grad_()
print(f"gradcheck fused conv-relu: {torch.autograd.gradcheck(lambda a, b, c: ConvReLU.apply(a, b, c, 1), (x64, w64, b64))}")

x = torch.from_numpy(rng.normal(size=(4, 3, 8, 8)).astype(np.float32)).requires_grad_()
w = torch.from_numpy(rng.normal(size=(6, 3, 3, 3)).astype(np.float32)).requires_grad_()
b = torch.zeros(6, requires_grad=True)
g1 = torch.autograd.grad(ConvReLU.apply(x, w, b, 1).pow(2).sum(), (x, w, b))
g2 = torch.autograd.grad(F.relu(F.conv2d(x, w, b, padding=1)).pow(2).sum(), (x, w, b))
print(f"fused == autograd: {[torch.allclose(p, q, atol=1e-3) for p, q in zip(g1, g2)]}")

s = torch.from_numpy(rng.normal(size=(2, 4, 20)).astype(np.float32)).requires_grad_()
k = torch.from_numpy(rng.normal(size=(5, 4, 3)).astype(np.float32)).requires_grad_()
y = F.conv1d(s, k, stride=2, dilation=2, padding=2)
gy = torch.from_numpy(rng.normal(size=y.shape).astype(np.float32))
gs, gk = torch.autograd.grad(y, (s, k), gy)
print(f"conv1d grads: input {torch.allclose(conv1d_input(s.shape, k, gy, stride=2, padding=2, dilation=2), gs, atol=1e-4)} "
      f"weight {torch.allclose(conv1d_weight(s, k.shape, gy, stride=2, padding=2, dilation=2), gk, atol=1e-4)}")


def per_sample_conv_grads(x, w_shape, g, padding):
    n, cin = x.shape[:2]
    cout = g.shape[1]
    xg = x.reshape(1, n * cin, *x.shape[2:])
    gg = g.reshape(1, n * cout, *g.shape[2:])
    big = conv2d_weight(xg, (n * cout, cin, *w_shape[2:]), gg, padding=padding, groups=n)
    return big.view(n, cout, cin, *w_shape[2:])


def per_sample_unfold(x, w_shape, g, padding):
    cols = F.unfold(x, w_shape[2:], padding=padding)  # (n, cin*k*k, L)
    return torch.einsum("nol,nkl->nok", g.flatten(2), cols).view(x.shape[0], *w_shape)


g = torch.from_numpy(rng.normal(size=(4, 6, 8, 8)).astype(np.float32))
ps1, ps2 = per_sample_conv_grads(x.detach(), w.shape, g, 1), per_sample_unfold(x.detach(), w.shape, g, 1)
print(f"per-sample grads agree: {torch.allclose(ps1, ps2, atol=1e-3)} sum == batch grad: "
      f"{torch.allclose(ps1.sum(0), conv2d_weight(x.detach(), w.shape, g, padding=1), atol=1e-3)}")

E, H, L = 16, 4, 7
in_w = torch.from_numpy(rng.normal(0, 0.3, (3 * E, E)).astype(np.float32))
in_b = torch.from_numpy(rng.normal(0, 0.1, 3 * E).astype(np.float32))
out_w = torch.from_numpy(rng.normal(0, 0.3, (E, E)).astype(np.float32))
out_b = torch.zeros(E)
q = torch.from_numpy(rng.normal(size=(L, 2, E)).astype(np.float32))  # (L, N, E): the functional layout
pad = torch.tensor([[False] * L, [False] * 5 + [True] * 2])
out_f, w_avg = F.multi_head_attention_forward(q, q, q, E, H, in_w, in_b, None, None, False, 0.0, out_w, out_b,
                                              training=False, key_padding_mask=pad, need_weights=True)
_, w_heads = F.multi_head_attention_forward(q, q, q, E, H, in_w, in_b, None, None, False, 0.0, out_w, out_b,
                                            training=False, key_padding_mask=pad, need_weights=True,
                                            average_attn_weights=False)
mha = nn.MultiheadAttention(E, H)
with torch.no_grad():
    mha.in_proj_weight.copy_(in_w)
    mha.in_proj_bias.copy_(in_b)
    mha.out_proj.weight.copy_(out_w)
    mha.out_proj.bias.copy_(out_b)
mha.eval()
with torch.no_grad():
    out_m, w_m = mha(q, q, q, key_padding_mask=pad)
att_err = (out_f - out_m).abs().max().item()
print(f"functional mha == module: {att_err < 1e-5} weights {tuple(w_avg.shape)} per head {tuple(w_heads.shape)} "
      f"padded weight {w_avg[1, :, 5:].abs().max().item():.1f} heads average: {torch.allclose(w_heads.mean(1), w_avg, atol=1e-6)}")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.from_numpy(rng.normal(0, 0.3, (8, 1, 3, 3)).astype(np.float32)))
        self.b = nn.Parameter(torch.zeros(8))
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(ConvReLU.apply(x, self.w, self.b, 1).mean((2, 3)))


imgs = rng.normal(size=(128, 1, 6, 6)).astype(np.float32)
labels = (imgs[:, 0, :3].mean((1, 2)) > imgs[:, 0, 3:].mean((1, 2))).astype(np.int64)
imgs[:, 0, :3] += 0.5 * (labels[:, None, None] * 2 - 1)
Xd, Yd = torch.from_numpy(imgs), torch.from_numpy(labels)
net = Net()
with torch.no_grad():
    net.fc.weight.copy_(torch.from_numpy(rng.normal(0, 0.3, (2, 8)).astype(np.float32)))
    net.fc.bias.zero_()
losses = []
clip, sigma, lr = 1.0, 0.5, 0.5
for step in range(40):
    idx = torch.from_numpy(rng.choice(128, 32, replace=False))
    xb, yb = Xd[idx], Yd[idx]
    per = []
    for i in range(len(idx)):  # per-sample gradients, clipped, summed, noised
        loss_i = F.cross_entropy(net(xb[i:i + 1]), yb[i:i + 1])
        gi = torch.autograd.grad(loss_i, list(net.parameters()))
        norm = torch.sqrt(sum(t.pow(2).sum() for t in gi))
        per.append([t * (clip / (norm + 1e-6)).clamp(max=1.0) for t in gi])
    with torch.no_grad():
        for j, p in enumerate(net.parameters()):
            noise = torch.from_numpy(rng.normal(0, sigma * clip, p.shape).astype(np.float32))
            p.sub_(lr * (torch.stack([g_[j] for g_ in per]).sum(0) + noise) / len(idx))
        loss = F.cross_entropy(net(xb), yb)
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"dp-sgd step {step:2d} loss {loss.item():.5f}")
with torch.no_grad():
    acc = net(Xd).argmax(1).eq(Yd).float().mean().item()
print(f"train accuracy {acc:.4f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {att_err:.2e}")
