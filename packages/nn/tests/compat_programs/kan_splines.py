"""Kolmogorov-Arnold networks in the style of the public `efficient-kan` implementation: a
KANLinear with a grid buffer extended by spline_order knots on each side, B-spline bases by the
Cox-de Boor recursion on broadcast comparisons ((x >= grid[:-1]) & (x < grid[1:])), a base
branch F.linear(silu(x)) plus a spline branch F.linear over the flattened basis, standalone
spline scalers, curve2coeff by torch.linalg.lstsq on the basis matrices (permuted to a batch
of per-feature problems), grid updates from the data's sorted quantiles mixed with a uniform
grid (torch.sort, torch.linspace, torch.cat of extensions) that keep the represented function,
and the L1 + entropy regularization of the reference code. Fits a 2-D symbolic target with Adam
then LBFGS. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <test rmse>."""

import math

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(148)
torch.set_default_dtype(torch.float64)


class KANLinear(torch.nn.Module):
    def __init__(self, in_features, out_features, grid_size=5, spline_order=3, scale_noise=0.1,
                 scale_base=1.0, scale_spline=1.0, grid_eps=0.02, grid_range=(-1, 1)):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.grid_size, self.spline_order = grid_size, spline_order
        h = (grid_range[1] - grid_range[0]) / grid_size
        grid = (torch.arange(-spline_order, grid_size + spline_order + 1) * h + grid_range[0]).expand(in_features, -1).contiguous()
        self.register_buffer("grid", grid)
        self.base_weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.spline_weight = torch.nn.Parameter(torch.empty(out_features, in_features, grid_size + spline_order))
        self.spline_scaler = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.scale_noise, self.scale_base, self.scale_spline = scale_noise, scale_base, scale_spline
        self.grid_eps = grid_eps
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            bound = self.scale_base / math.sqrt(self.in_features)
            self.base_weight.copy_(torch.from_numpy(rng.uniform(-bound, bound, self.base_weight.shape)))
            noise = (torch.from_numpy(rng.random((self.grid_size + 1, self.in_features, self.out_features))) - 0.5) \
                * self.scale_noise / self.grid_size
            self.spline_weight.data.copy_(self.curve2coeff(self.grid.T[self.spline_order:-self.spline_order], noise))
            bound = self.scale_spline / math.sqrt(self.in_features)
            self.spline_scaler.copy_(torch.from_numpy(rng.uniform(-bound, bound, self.spline_scaler.shape)))

    def b_splines(self, x):
        grid = self.grid
        x = x.unsqueeze(-1)
        bases = ((x >= grid[:, :-1]) & (x < grid[:, 1:])).to(x.dtype)
        for k in range(1, self.spline_order + 1):
            bases = ((x - grid[:, : -(k + 1)]) / (grid[:, k:-1] - grid[:, : -(k + 1)]) * bases[:, :, :-1]) + (
                (grid[:, k + 1:] - x) / (grid[:, k + 1:] - grid[:, 1:(-k)]) * bases[:, :, 1:])
        assert bases.size() == (x.size(0), self.in_features, self.grid_size + self.spline_order)
        return bases.contiguous()

    def curve2coeff(self, x, y):
        a = self.b_splines(x).transpose(0, 1)
        b = y.transpose(0, 1)
        solution = torch.linalg.lstsq(a, b).solution
        return solution.permute(2, 0, 1).contiguous()

    @property
    def scaled_spline_weight(self):
        return self.spline_weight * self.spline_scaler.unsqueeze(-1)

    def forward(self, x):
        base_output = F.linear(F.silu(x), self.base_weight)
        spline_output = F.linear(self.b_splines(x).view(x.size(0), -1),
                                 self.scaled_spline_weight.view(self.out_features, -1))
        return base_output + spline_output

    @torch.no_grad()
    def update_grid(self, x, margin=0.01):
        batch = x.size(0)
        splines = self.b_splines(x).permute(1, 0, 2)
        orig_coeff = self.scaled_spline_weight.permute(1, 2, 0)
        unreduced = torch.bmm(splines, orig_coeff).permute(1, 0, 2)
        x_sorted = torch.sort(x, dim=0)[0]
        grid_adaptive = x_sorted[torch.linspace(0, batch - 1, self.grid_size + 1, dtype=torch.int64)]
        uniform_step = (x_sorted[-1] - x_sorted[0] + 2 * margin) / self.grid_size
        grid_uniform = torch.arange(self.grid_size + 1, dtype=x.dtype).unsqueeze(1) * uniform_step + x_sorted[0] - margin
        grid = self.grid_eps * grid_uniform + (1 - self.grid_eps) * grid_adaptive
        grid = torch.cat([grid[:1] - uniform_step * torch.arange(self.spline_order, 0, -1, dtype=x.dtype).unsqueeze(1),
                          grid,
                          grid[-1:] + uniform_step * torch.arange(1, self.spline_order + 1, dtype=x.dtype).unsqueeze(1)], dim=0)
        self.grid.copy_(grid.T)
        self.spline_weight.data.copy_(self.curve2coeff(x, unreduced))

    def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0):
        l1_fake = self.spline_weight.abs().mean(-1)
        regularization_loss_activation = l1_fake.sum()
        p = l1_fake / regularization_loss_activation
        regularization_loss_entropy = -torch.sum(p * p.log())
        return regularize_activation * regularization_loss_activation + regularize_entropy * regularization_loss_entropy


class KAN(torch.nn.Module):
    def __init__(self, widths, **kw):
        super().__init__()
        self.layers = torch.nn.ModuleList([KANLinear(a, b, **kw) for a, b in zip(widths, widths[1:])])

    def forward(self, x, update_grid=False):
        for layer in self.layers:
            if update_grid:
                layer.update_grid(x)
            x = layer(x)
        return x

    def regularization_loss(self):
        return sum(layer.regularization_loss() for layer in self.layers)


def target(x):
    return torch.exp(torch.sin(math.pi * x[:, :1]) + x[:, 1:] ** 2)


model = KAN([2, 5, 1], grid_size=5)
layer = model.layers[0]
xb = torch.from_numpy(rng.uniform(-1, 1, (64, 2)))
basis = layer.b_splines(xb)
print(f"basis {tuple(basis.shape)} partition of unity: {torch.allclose(basis.sum(-1), torch.ones(64, 2))} "
      f"nonnegative: {bool((basis >= 0).all())}")
y_probe = layer(xb)
coeff = layer.curve2coeff(xb, (basis.permute(1, 0, 2) @ layer.scaled_spline_weight.permute(1, 2, 0)).permute(1, 0, 2))
print(f"curve2coeff recovers scaled weights: {torch.allclose(coeff, layer.scaled_spline_weight, atol=1e-8)}")

xtr = torch.from_numpy(rng.uniform(-1, 1, (400, 2)))
ytr = target(xtr)
xte = torch.from_numpy(rng.uniform(-1, 1, (400, 2)))
yte = target(xte)

opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(60):
    loss = F.mse_loss(model(xtr, update_grid=(step == 20)), ytr)
    total = loss + 1e-5 * model.regularization_loss()
    opt.zero_grad()
    total.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"adam step {step:2d} mse {loss.item():.6f}")

with torch.no_grad():
    before = model(xte)
    model.layers[0].update_grid(xtr)
    after = model(xte)
print(f"grid update (the scaler is applied twice, as upstream): mean change {(before - after).abs().mean().item():.4f} "
      f"grid range [{model.layers[0].grid[0, 3].item():.4f}, {model.layers[0].grid[0, -4].item():.4f}]")

lbfgs = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=20, history_size=10, line_search_fn="strong_wolfe")


def closure():
    lbfgs.zero_grad()
    lo = F.mse_loss(model(xtr), ytr)
    lo.backward()
    return lo


for i in range(3):
    lo = lbfgs.step(closure)
    losses.append(lo.item())
with torch.no_grad():
    rmse = F.mse_loss(model(xte), yte).sqrt().item()
print(f"lbfgs mse {F.mse_loss(model(xtr), ytr).item():.3e}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.3e} {rmse:.4f}")
