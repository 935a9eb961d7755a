"""Black-box optimisation of network weights, in the style of the public OpenAI-ES and
CMA-ES PyTorch code: a policy's weights flattened by torch.nn.utils.parameters_to_vector and
written back by vector_to_parameters, antithetic Gaussian perturbations (NumPy noise), the
whole population evaluated in one call by torch.func.functional_call under torch.func.vmap
over a dict of stacked parameters (torch.func.stack_module_state of per-member module copies
agrees), centered-rank fitness shaping (argsort of argsort), the ES gradient estimate fed to
a torch.optim.Adam step through .grad, and a (mu / mu_w, lambda)-CMA-ES with rank-one and
rank-mu covariance updates and torch.linalg.eigh for the symmetric square root that shapes the samples on the Rosenbrock
function. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first fitness> <last fitness> <cma-es rosenbrock>."""

import copy
import math

import numpy as np
import torch
import torch.nn as nn
from torch.func import functional_call, stack_module_state, vmap
from torch.nn.utils import parameters_to_vector, vector_to_parameters

rng = np.random.default_rng(159)
torch.set_default_dtype(torch.float64)

# a regression task: fit a small net to y = sin(2x) + 0.5 x by black-box search only
X = torch.linspace(-2, 2, 64).unsqueeze(1)
Y = torch.sin(2 * X) + 0.5 * X
policy = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
with torch.no_grad():
    for p in policy.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.5, p.shape)))
theta = parameters_to_vector(policy.parameters()).detach().clone()
n_params = theta.numel()
shapes = {k: v.shape for k, v in policy.named_parameters()}
print(f"flat parameters {n_params} shapes {[tuple(s) for s in shapes.values()]}")


def unflatten(flat):
    out, i = {}, 0
    for k, s in shapes.items():
        n = math.prod(s)
        out[k] = flat[..., i:i + n].reshape(*flat.shape[:-1], *s)
        i += n
    return out


def population_fitness(flat_pop):
    params = unflatten(flat_pop)
    preds = vmap(lambda p: functional_call(policy, p, (X,)), in_dims=(0,))(params)
    return -((preds - Y) ** 2).mean(dim=(1, 2))


def centered_ranks(x):
    ranks = torch.empty_like(x)
    ranks[x.argsort()] = torch.arange(len(x), dtype=x.dtype)
    return ranks / (len(x) - 1) - 0.5


f0 = population_fitness(theta.unsqueeze(0))
print(f"initial fitness {f0.item():.5f} ranks {centered_ranks(torch.tensor([3.0, -1.0, 2.0, 10.0])).tolist()}")

# stack_module_state of member copies agrees with the flat route
members = [copy.deepcopy(policy) for _ in range(3)]
with torch.no_grad():
    for i, m in enumerate(members):
        vector_to_parameters(theta + 0.1 * i, m.parameters())
stacked, _ = stack_module_state(members)
via_stack = vmap(lambda p: functional_call(policy, p, (X,)))(stacked)
via_flat = vmap(lambda p: functional_call(policy, p, (X,)))(unflatten(torch.stack([theta + 0.1 * i for i in range(3)])))
print(f"stack_module_state == flat unflatten: {torch.allclose(via_stack, via_flat)} keys {sorted(stacked)}")

SIGMA, HALF = 0.05, 24
theta_param = nn.Parameter(theta.clone())
opt = torch.optim.Adam([theta_param], lr=0.03)
history = []
for gen in range(60):
    eps = torch.from_numpy(rng.normal(size=(HALF, n_params)))
    eps = torch.cat([eps, -eps])
    with torch.no_grad():
        fit = population_fitness(theta_param.detach() + SIGMA * eps)
    shaped = centered_ranks(fit)
    g = (shaped.unsqueeze(1) * eps).sum(0) / (2 * HALF * SIGMA)
    opt.zero_grad()
    theta_param.grad = -g  # ascent on fitness
    opt.step()
    with torch.no_grad():
        history.append(population_fitness(theta_param.detach().unsqueeze(0)).item())
    if gen % 20 == 0:
        print(f"gen {gen:2d} fitness {history[-1]:.5f} population best {fit.max().item():.5f}")
vector_to_parameters(theta_param.detach(), policy.parameters())
with torch.no_grad():
    mse = ((policy(X) - Y) ** 2).mean().item()
print(f"written-back policy mse {mse:.5f} == -fitness: {abs(mse + history[-1]) < 1e-12}")


def rosenbrock(x):
    return (100 * (x[..., 1:] - x[..., :-1] ** 2) ** 2 + (1 - x[..., :-1]) ** 2).sum(-1)


def cma_es(f, x0, sigma, gens):
    n = x0.numel()
    lam = 4 + int(3 * math.log(n))
    mu = lam // 2
    w = torch.log(torch.tensor(mu + 0.5)) - torch.log(torch.arange(1, mu + 1, dtype=torch.float64))
    w = w / w.sum()
    mueff = 1 / (w ** 2).sum()
    cc, cs = (4 + mueff / n) / (n + 4 + 2 * mueff / n), (mueff + 2) / (n + mueff + 5)
    c1 = 2 / ((n + 1.3) ** 2 + mueff)
    cmu = min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + mueff))
    damps = 1 + 2 * max(0, math.sqrt((mueff - 1) / (n + 1)) - 1) + cs
    chi_n = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
    mean, C = x0.clone(), torch.eye(n)
    pc, ps = torch.zeros(n), torch.zeros(n)
    for g in range(gens):
        evals, B = torch.linalg.eigh(C)
        Dm = evals.clamp(min=1e-20).sqrt()
        z = torch.from_numpy(rng.normal(size=(lam, n)))
        # the symmetric square root B D B^T: unlike B D alone it does not depend on the
        # eigenvectors' signs, which eigh leaves to the LAPACK build
        y = z @ (B * Dm) @ B.T
        xs = mean + sigma * y
        order = torch.argsort(f(xs))
        y_sel = y[order[:mu]]
        y_w = (w.unsqueeze(1) * y_sel).sum(0)
        mean = mean + sigma * y_w
        c_inv_sqrt = B @ torch.diag(1 / Dm) @ B.T
        ps = (1 - cs) * ps + math.sqrt(cs * (2 - cs) * mueff) * (c_inv_sqrt @ y_w)
        hsig = float(ps.norm() / math.sqrt(1 - (1 - cs) ** (2 * (g + 1))) / chi_n < 1.4 + 2 / (n + 1))
        pc = (1 - cc) * pc + hsig * math.sqrt(cc * (2 - cc) * mueff) * y_w
        rank_mu = (w.view(-1, 1, 1) * y_sel.unsqueeze(2) * y_sel.unsqueeze(1)).sum(0)
        C = (1 - c1 - cmu) * C + c1 * (torch.outer(pc, pc) + (1 - hsig) * cc * (2 - cc) * C) + cmu * rank_mu
        C = (C + C.T) / 2
        sigma = sigma * math.exp((cs / damps) * (ps.norm().item() / chi_n - 1))
    return mean, sigma


best, final_sigma = cma_es(rosenbrock, torch.tensor([-1.0, 1.5, 0.5, -0.5]), 0.5, 150)
print(f"cma-es rosenbrock {rosenbrock(best).item():.3e} at {[round(v, 3) for v in best.tolist()]} sigma {final_sigma:.2e}")
print(f"RESULT {history[0]:.5f} {history[-1]:.5f} {rosenbrock(best).item():.3e}")
