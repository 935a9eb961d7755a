"""Pool-based active learning in the style of public BALD / BatchBALD / deep-ensemble code: an
ensemble of small MLPs held as stacked weights (torch.func.stack_module_state) and evaluated
with vmap(functional_call), the acquisition functions max-entropy, BALD (entropy of the mean
minus the mean entropy, with torch.special.entr / xlogy) and variation ratios, a last-layer
Laplace approximation whose Hessian comes from torch.autograd.functional.hessian and whose
Hessian-vector products from autograd.functional.hvp / vhp are checked against it, a probit
approximation of the predictive using torch.special.ndtr / ndtri / log_ndtr, and the labelled
set grown through Subset / ConcatDataset / BatchSampler(SequentialSampler) DataLoaders. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <accuracy with 10 labels> <accuracy after acquisition> <laplace ece>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.functional import hessian, hvp, jacobian, vhp
from torch.func import functional_call, stack_module_state, vmap
from torch.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    SequentialSampler,
    Subset,
    TensorDataset,
)

rng = np.random.default_rng(1520)
M = 5  # ensemble members


def two_moons(n, noise=0.15):
    t = rng.uniform(0, np.pi, n)
    y = rng.integers(0, 2, n)
    x = np.where(y[:, None] == 0, np.stack([np.cos(t), np.sin(t)], 1), np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1))
    x = x + noise * rng.normal(size=x.shape)
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


pool_x, pool_y = two_moons(300)
test_x, test_y = two_moons(300)
pool = TensorDataset(pool_x, pool_y)


def make_member():
    net = nn.Sequential(nn.Linear(2, 24), nn.Tanh(), nn.Linear(24, 24), nn.Tanh(), nn.Linear(24, 2))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.8 if p.dim() > 1 else 0.1, p.shape).astype(np.float32)))
    return net


members = [make_member() for _ in range(M)]
params, buffers = stack_module_state(members)
base = copy.deepcopy(members[0]).to("meta")


def ensemble_logits(params, x):
    return vmap(lambda p, b: functional_call(base, (p, b), (x,)), in_dims=(0, 0))(params, buffers)


def train(params, labelled, epochs=60):
    params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    opt = torch.optim.Adam(params.values(), lr=0.01)
    loader = DataLoader(labelled, batch_sampler=BatchSampler(SequentialSampler(labelled), batch_size=16, drop_last=False))
    for _ in range(epochs):
        for xb, yb in loader:
            logits = ensemble_logits(params, xb)  # (M, B, 2)
            loss = F.cross_entropy(logits.reshape(-1, 2), yb.repeat(M)) + 1e-3 * sum((p ** 2).sum() for p in params.values())
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {k: v.detach() for k, v in params.items()}


def scores(params, x):
    probs = ensemble_logits(params, x).softmax(-1)  # (M, N, C)
    mean = probs.mean(0)
    entropy = torch.special.entr(mean).sum(-1)
    expected = -torch.xlogy(probs, probs).sum(-1).mean(0)
    votes = probs.argmax(-1)
    mode_count = F.one_hot(votes, 2).sum(0).max(-1).values
    return {"entropy": entropy, "bald": entropy - expected, "variation": 1 - mode_count.float() / M}, mean


labelled_idx = [int(i) for i in np.concatenate([rng.choice(np.where(pool_y.numpy() == c)[0], 5, replace=False) for c in (0, 1)])]
labelled = Subset(pool, labelled_idx)
print(f"labelled {len(labelled)} first {labelled[0][1].item()} batches {len(list(BatchSampler(SequentialSampler(labelled), 4, drop_last=True)))}")
trained = train(params, labelled)
with torch.no_grad():
    s, mean = scores(trained, test_x)
acc0 = (mean.argmax(-1) == test_y).float().mean().item()
print(f"10 labels: accuracy {acc0:.4f} mean bald {s['bald'].mean().item():.5f} bald <= entropy {bool((s['bald'] <= s['entropy'] + 1e-6).all())}")

for rnd in range(3):
    with torch.no_grad():
        s, _ = scores(trained, pool_x)
    s_bald = s["bald"].clone()
    s_bald[labelled_idx] = -1
    new = s_bald.topk(10).indices.tolist()
    labelled_idx = labelled_idx + new  # a new list: the first Subset keeps its own
    labelled = ConcatDataset([labelled, Subset(pool, new)])
    trained = train(trained, labelled, epochs=30)
    with torch.no_grad():
        _, mean = scores(trained, test_x)
    acc = (mean.argmax(-1) == test_y).float().mean().item()
    print(f"round {rnd} labelled {len(labelled)} accuracy {acc:.4f} acquired variation ratio {s['variation'][new].mean().item():.3f}")

# last-layer Laplace for member 0: features fixed, weights of the last Linear
feat_net = nn.Sequential(*list(members[0].children())[:-1])
with torch.no_grad():
    for i, (n, p) in enumerate(feat_net.named_parameters()):
        p.copy_(trained[n][0])
    phi_train = feat_net(torch.stack([pool[i][0] for i in labelled_idx]))
    y_train = torch.stack([pool[i][1] for i in labelled_idx])
    phi_test = feat_net(test_x)
W0 = torch.cat([trained["4.weight"][0], trained["4.bias"][0].unsqueeze(1)], 1).double()
phi_tr = torch.cat([phi_train, torch.ones(len(phi_train), 1)], 1).double()
phi_te = torch.cat([phi_test, torch.ones(len(phi_test), 1)], 1).double()


def neg_log_post(w_flat):
    w = w_flat.view(2, -1)
    return F.cross_entropy(phi_tr @ w.T, y_train, reduction="sum") + 0.5 * (w_flat ** 2).sum()


w = W0.flatten()
H = hessian(neg_log_post, w)
v = torch.from_numpy(rng.normal(size=w.shape[0]))
_, hv = hvp(neg_log_post, w, v)
_, vh = vhp(neg_log_post, w, v)
J = jacobian(lambda w_: (phi_te[:5] @ w_.view(2, -1).T), w, vectorize=True)
print(f"hessian {tuple(H.shape)} symmetric {torch.allclose(H, H.T)} hvp == H v {torch.allclose(hv, H @ v)} vhp == hvp {torch.allclose(vh, hv)} "
      f"jacobian {tuple(J.shape)}")
cov = torch.linalg.inv(H)
# probit approximation for the logit difference f = (w1 - w0) . phi: sigmoid(x) ~ ndtr(lam x)
f_mean = phi_te @ (W0[1] - W0[0])
A = torch.cat([-phi_te, phi_te], 1)
f_var = ((A @ cov) * A).sum(-1)
lam2 = torch.pi / 8
p1 = torch.special.ndtr(f_mean * lam2 ** 0.5 / torch.sqrt(1 + lam2 * f_var))
print(f"ndtri(ndtr(x)) round trip {torch.allclose(torch.special.ndtri(torch.special.ndtr(torch.tensor([-2.0, 0.3, 1.5]))), torch.tensor([-2.0, 0.3, 1.5]), atol=1e-5)} "
      f"log_ndtr(-10) {torch.special.log_ndtr(torch.tensor(-10.0, dtype=torch.float64)).item():.5f}")


def ece(p1, y, bins=10):
    conf = torch.maximum(p1, 1 - p1)
    pred = (p1 > 0.5).long()
    edges = torch.linspace(0.5, 1.0, bins // 2 + 1, dtype=conf.dtype)
    which = torch.bucketize(conf, edges[1:-1])
    total = 0.0
    for b in range(bins // 2):
        m = which == b
        if m.any():
            total += m.sum().item() / len(y) * abs((pred[m] == y[m]).double().mean().item() - conf[m].mean().item())
    return total


p_map = torch.special.ndtr(f_mean * lam2 ** 0.5)
e_map, e_lap = ece(p_map, test_y), ece(p1, test_y)
print(f"map ece {e_map:.4f} laplace ece {e_lap:.4f} laplace less confident {bool((torch.maximum(p1, 1 - p1) <= torch.maximum(p_map, 1 - p_map) + 1e-12).all())}")
print(f"RESULT {acc0:.4f} {acc:.4f} {e_lap:.4f}")
