"""Learned image compression in the style of the public CompressAI code (Balle et al. 2017 /
2018): GDN / inverse GDN layers whose beta and gamma are kept positive by a LowerBound
autograd.Function (gradient passes where the input is above the bound or points upward) and a
squared reparameterization with a pedestal, an EntropyBottleneck with a factorized density
model (a cascade of softplus-constrained matrices, tanh-gated factors), likelihoods from
differences of sigmoid CDFs evaluated at +-1/2 with the sign trick for stability, additive
uniform noise at training time and rounding around the learned medians at test time (the
quantiles found by an auxiliary loss), a rate-distortion loss in bits per pixel, and
parameters split into main / auxiliary optimizers by name. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <test bpp>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1507)


class LowerBoundFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.save_for_backward(x, bound)
        return torch.max(x, bound)

    @staticmethod
    def backward(ctx, grad_output):
        x, bound = ctx.saved_tensors
        pass_through = (x >= bound) | (grad_output < 0)
        return pass_through * grad_output, None


class LowerBound(nn.Module):
    def __init__(self, bound):
        super().__init__()
        self.register_buffer("bound", torch.Tensor([float(bound)]))

    def forward(self, x):
        return LowerBoundFunction.apply(x, self.bound)


class NonNegativeParametrizer(nn.Module):
    def __init__(self, minimum=0.0, reparam_offset=2 ** -18):
        super().__init__()
        self.register_buffer("pedestal", torch.Tensor([reparam_offset ** 2]))
        self.lower_bound = LowerBound((minimum + reparam_offset ** 2) ** 0.5)

    def init(self, x):
        return torch.sqrt(torch.max(x + self.pedestal, self.pedestal))

    def forward(self, x):
        out = self.lower_bound(x)
        return out ** 2 - self.pedestal


class GDN(nn.Module):
    def __init__(self, c, inverse=False, beta_min=1e-6, gamma_init=0.1):
        super().__init__()
        self.inverse = inverse
        self.beta_reparam = NonNegativeParametrizer(minimum=beta_min)
        self.gamma_reparam = NonNegativeParametrizer()
        self.beta = nn.Parameter(self.beta_reparam.init(torch.ones(c)))
        self.gamma = nn.Parameter(self.gamma_reparam.init(gamma_init * torch.eye(c)))

    def forward(self, x):
        c = x.size(1)
        beta = self.beta_reparam(self.beta)
        gamma = self.gamma_reparam(self.gamma).reshape(c, c, 1, 1)
        norm = torch.sqrt(F.conv2d(x ** 2, gamma, beta))
        return x * norm if self.inverse else x / norm


class EntropyBottleneck(nn.Module):
    def __init__(self, channels, filters=(3, 3), init_scale=10.0, tail_mass=1e-9):
        super().__init__()
        self.filters = (1, *filters, 1)
        scale = init_scale ** (1 / (len(self.filters) - 1))
        self.matrices, self.biases, self.factors = nn.ParameterList(), nn.ParameterList(), nn.ParameterList()
        for i in range(len(self.filters) - 1):
            init = math.log(math.expm1(1 / scale / self.filters[i + 1]))
            self.matrices.append(nn.Parameter(torch.full((channels, self.filters[i + 1], self.filters[i]), init)))
            self.biases.append(nn.Parameter(torch.from_numpy(rng.uniform(-0.5, 0.5, (channels, self.filters[i + 1], 1)).astype(np.float32))))
            if i < len(self.filters) - 2:
                self.factors.append(nn.Parameter(torch.zeros(channels, self.filters[i + 1], 1)))
        self.quantiles = nn.Parameter(torch.tensor([-init_scale, 0, init_scale]).repeat(channels, 1, 1))
        target = math.log(2 / tail_mass - 1)
        self.register_buffer("target", torch.tensor([-target, 0, target]))

    def _logits_cumulative(self, x, stop_gradient):
        logits = x
        for i in range(len(self.filters) - 1):
            matrix, bias = self.matrices[i], self.biases[i]
            if stop_gradient:
                matrix, bias = matrix.detach(), bias.detach()
            logits = torch.matmul(F.softplus(matrix), logits) + bias
            if i < len(self.factors):
                factor = self.factors[i].detach() if stop_gradient else self.factors[i]
                logits = logits + torch.tanh(factor) * torch.tanh(logits)
        return logits

    def loss(self):
        logits = self._logits_cumulative(self.quantiles, stop_gradient=True)
        return torch.abs(logits - self.target).sum()

    def likelihood(self, x):
        lower = self._logits_cumulative(x - 0.5, stop_gradient=False)
        upper = self._logits_cumulative(x + 0.5, stop_gradient=False)
        sign = -torch.sign(lower + upper).detach()
        return torch.abs(torch.sigmoid(sign * upper) - torch.sigmoid(sign * lower))

    def forward(self, y, training):
        c = y.size(1)
        values = y.permute(1, 0, 2, 3).reshape(c, 1, -1)  # channels first for the density model
        medians = self.quantiles[:, :, 1:2].detach()
        if training:
            noise = torch.from_numpy(rng.uniform(-0.5, 0.5, values.shape).astype(np.float32))
            q = values + noise
        else:
            q = torch.round(values - medians) + medians
        lik = torch.clamp(self.likelihood(q), min=1e-9)
        shape = (c, y.size(0), y.size(2), y.size(3))
        return q.reshape(shape).permute(1, 0, 2, 3), lik.reshape(shape).permute(1, 0, 2, 3)


class FactorizedPrior(nn.Module):
    def __init__(self, n=8, m=12):
        super().__init__()
        self.g_a = nn.Sequential(nn.Conv2d(1, n, 5, 2, 2), GDN(n), nn.Conv2d(n, m, 5, 2, 2))
        self.g_s = nn.Sequential(nn.ConvTranspose2d(m, n, 5, 2, 2, output_padding=1), GDN(n, inverse=True),
                                 nn.ConvTranspose2d(n, 1, 5, 2, 2, output_padding=1))
        self.entropy_bottleneck = EntropyBottleneck(m)

    def forward(self, x):
        y = self.g_a(x)
        y_hat, lik = self.entropy_bottleneck(y, self.training)
        return self.g_s(y_hat), lik


def images(m):
    yy, xx = np.mgrid[0:16, 0:16] / 16.0
    a, b, c = rng.uniform(-1, 1, (3, m, 1, 1))
    img = 0.5 + 0.25 * np.sin(2 * np.pi * (a * xx + b * yy) + c * 3) + 0.05 * rng.normal(size=(m, 16, 16))
    return torch.from_numpy(img[:, None].clip(0, 1).astype(np.float32))


x = torch.tensor([-1.0, 0.5, 2.0], requires_grad=True)
out = LowerBoundFunction.apply(x, torch.tensor([1.0]))
out.backward(torch.tensor([1.0, -1.0, 1.0]))
print(f"lower bound {out.tolist()} grad {x.grad.tolist()}")
gdn = GDN(3)
z = torch.from_numpy(rng.normal(size=(2, 3, 4, 4)).astype(np.float32))
print(f"igdn(gdn(x)) ~ x: {torch.allclose(GDN(3, inverse=True)(gdn(z)), z, atol=0.05)} beta {gdn.beta_reparam(gdn.beta)[:2].tolist()}")

model = FactorizedPrior()
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.startswith(("g_a", "g_s")) and p.dim() == 4:
            p.copy_(torch.from_numpy(rng.normal(0, 0.6 / math.sqrt(p[0].numel()), p.shape).astype(np.float32)))
        elif name.startswith(("g_a", "g_s")) and p.dim() == 1 and name.endswith("bias"):
            p.zero_()
params = {n for n, p in model.named_parameters() if not n.endswith("quantiles")}
aux_params = {n for n, p in model.named_parameters() if n.endswith("quantiles")}
pd = dict(model.named_parameters())
print(f"main parameters {len(params)} aux {len(aux_params)} disjoint {not (params & aux_params)}")
opt = torch.optim.Adam([pd[n] for n in sorted(params)], lr=5e-3)
aux_opt = torch.optim.Adam([pd[n] for n in sorted(aux_params)], lr=5e-2)
lmbda = 0.05
losses = []
for step in range(60):
    x = images(16)
    x_hat, lik = model(x)
    n_pix = x.size(0) * x.size(2) * x.size(3)
    bpp = torch.log(lik).sum() / (-math.log(2) * n_pix)
    mse = F.mse_loss(x_hat, x)
    loss = lmbda * 255 ** 2 * mse + bpp
    opt.zero_grad()
    aux_opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    aux = model.entropy_bottleneck.loss()
    aux.backward()
    aux_opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.4f} bpp {bpp.item():.4f} mse {mse.item():.6f} aux {aux.item():.2f}")

model.eval()
with torch.no_grad():
    x = images(32)
    x_hat, lik = model(x)
    bpp = (torch.log(lik).sum() / (-math.log(2) * x.numel())).item()
    psnr = (10 * torch.log10(1 / F.mse_loss(x_hat.clamp(0, 1), x))).item()
    y = model.g_a(x)
    med = model.entropy_bottleneck.quantiles[:, 0, 1]
    symbols = torch.round(y - med.view(1, -1, 1, 1))
print(f"test bpp {bpp:.4f} psnr {psnr:.3f} distinct symbols {torch.unique(symbols).numel()} integer {bool((symbols == symbols.round()).all())}")
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-3:]):.4f} {bpp:.4f}")
