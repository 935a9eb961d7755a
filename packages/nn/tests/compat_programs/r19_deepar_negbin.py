"""DeepAR-style probabilistic forecasting of count series, in the style of the public
GluonTS-to-PyTorch ports (written anew): per-series scaling by the mean of the context window
(1 + mean, kept as a buffer-like tensor), lagged inputs built with torch.roll and a mask for the
first steps, an item embedding, a 2-layer LSTM carrying its (h, c) from the conditioning range
into the prediction range, a NegativeBinomial likelihood (total_count from softplus, logits
from the mean through log(mu) - log(r)) via torch.distributions.NegativeBinomial.log_prob,
checked against the closed form with torch.lgamma, ancestral sampling of 50 paths with the
samples drawn by NumPy from the predicted parameters (inverse-CDF on a grid by torch.searchsorted
of the cdf built from exp(log_prob).cumsum), quantiles of the sample paths, the continuous
ranked probability score estimated from samples, and a seasonal-naive baseline. Weights and
data from NumPy. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first nll> <last nll> <crps ratio to naive>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import NegativeBinomial

rng = np.random.default_rng(47)
# float64: the sampled paths are discrete draws, and float64 keeps both libraries on the same ones
torch.set_default_dtype(torch.float64)
S, CTX, PRED, LAGS = 24, 28, 7, (1, 7)
T_ALL = CTX + PRED + 7
t = np.arange(T_ALL)
level = rng.uniform(2, 20, size=(S, 1))
weekly = 1 + 0.5 * np.sin(2 * np.pi * t / 7 + rng.uniform(0, 6, size=(S, 1)))
mu_true = level * weekly
r_true = 5.0
counts = rng.negative_binomial(r_true, r_true / (r_true + mu_true)).astype(np.float64)
Z = torch.from_numpy(counts)
print("series", tuple(Z.shape), "mean count", round(Z.mean().item(), 4), "zeros", int((Z == 0).sum()))

# the library's NegativeBinomial log_prob against the closed form
r_, p_logit, k = torch.tensor(3.5), torch.tensor(0.4), torch.tensor([0.0, 2.0, 9.0])
nb = NegativeBinomial(total_count=r_, logits=p_logit)
closed = torch.lgamma(k + r_) - torch.lgamma(r_) - torch.lgamma(k + 1) + r_ * F.logsigmoid(-p_logit) + k * F.logsigmoid(p_logit)
print("log_prob == closed form", torch.allclose(nb.log_prob(k), closed), "mean", round(nb.mean.item(), 5), "variance", round(nb.variance.item(), 5))


class DeepAR(nn.Module):
    def __init__(self, n_items, h=24):
        super().__init__()
        self.emb = nn.Embedding(n_items, 4)
        self.lstm = nn.LSTM(len(LAGS) + 4 + 2, h, num_layers=2, batch_first=True)
        self.mu = nn.Linear(h, 1)
        self.alpha = nn.Linear(h, 1)

    def step_inputs(self, z_scaled, items, t_idx):
        lags = torch.stack([torch.roll(z_scaled, lag, dims=1) for lag in LAGS], -1)
        valid = (torch.arange(z_scaled.shape[1]) >= max(LAGS)).float()[None, :, None]
        season = torch.stack([torch.sin(2 * np.pi * t_idx / 7), torch.cos(2 * np.pi * t_idx / 7)], -1)
        season = season.expand(z_scaled.shape[0], -1, -1)
        e = self.emb(items)[:, None, :].expand(-1, z_scaled.shape[1], -1)
        return torch.cat([lags * valid, e, season], -1)

    def params(self, out, scale):
        mu = F.softplus(self.mu(out)).squeeze(-1) * scale
        alpha = F.softplus(self.alpha(out)).squeeze(-1) + 1e-3  # 1 / total_count
        r = 1.0 / alpha
        return r, torch.log(mu + 1e-6) - torch.log(r)

    def forward(self, z, items, state=None):
        scale = 1.0 + z[:, :CTX].mean(1, keepdim=True)
        inp = self.step_inputs(z / scale, items, torch.arange(z.shape[1], dtype=torch.get_default_dtype()))
        out, state = self.lstm(inp, state)
        r, logits = self.params(out, scale)
        return r, logits, state


model = DeepAR(S)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.2, size=tuple(p.shape))))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
items = torch.arange(S)
train = Z[:, : CTX + 7]  # the last week of the training range is its validation-free target
losses = []
for epoch in range(100):
    r, logits, _ = model(train[:, :-1], items)
    # predict z[t] from inputs up to t-1: shift by one
    target = train[:, 1:]
    nll = -NegativeBinomial(total_count=r[:, max(LAGS):], logits=logits[:, max(LAGS):]).log_prob(target[:, max(LAGS):]).mean()
    opt.zero_grad()
    nll.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    losses.append(nll.item())
    if epoch % 25 == 0:
        print(f"epoch {epoch:3d} nll {nll.item():.5f} mean r {r.mean().item():.3f}")

# forecast the final PRED steps by ancestral sampling (NumPy draws by inverse cdf)
hist = Z[:, : T_ALL - PRED]
N_PATHS = 50
grid = torch.arange(0, 200, dtype=torch.get_default_dtype())
paths = hist.repeat_interleave(N_PATHS, 0)
it = items.repeat_interleave(N_PATHS)
with torch.no_grad():
    for h in range(PRED):
        r, logits, _ = model(paths, it)
        dist = NegativeBinomial(total_count=r[:, -1:], logits=logits[:, -1:])
        cdf = torch.exp(dist.log_prob(grid)).cumsum(-1)
        u = torch.from_numpy(rng.uniform(size=(paths.shape[0], 1)))
        draw = torch.searchsorted(cdf, u * cdf[:, -1:]).clamp(max=len(grid) - 1).float()
        paths = torch.cat([paths, draw], 1)
fc = paths[:, -PRED:].reshape(S, N_PATHS, PRED)
truth = Z[:, -PRED:]
q = torch.quantile(fc, torch.tensor([0.1, 0.5, 0.9]), dim=1)
cover = ((truth >= q[0]) & (truth <= q[2])).float().mean().item()
crps = ((fc - truth[:, None]).abs().mean(1) - 0.5 * (fc[:, :, None] - fc[:, None, :]).abs().mean((1, 2))).mean().item()
naive = Z[:, -PRED - 7:-7]
naive_mae = (naive - truth).abs().mean().item()
print(f"median mae {(q[1] - truth).abs().mean().item():.4f} naive mae {naive_mae:.4f} 80% coverage {cover:.4f} crps {crps:.4f}")
print("sample shape", tuple(fc.shape), "integer samples", bool((fc == fc.round()).all()))
torch.set_default_dtype(torch.float32)
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {crps / naive_mae:.6f}")
