"""Training a deep ensemble in one vectorized model, in the style of the PyTorch "model
ensembling" and torch.func tutorials: torch.func.stack_module_state of five MLPs (params and
buffers stacked on a new leading dim), a "meta" base copy (copy.deepcopy then .to("meta")),
torch.func.functional_call under torch.vmap with in_dims=(0, 0, None) (same minibatch for all
members) and (0, 0, 0) (a minibatch per member), chunk_size, the per-member losses from
vmap(grad_and_value) and a hand-written Adam over the stacked tensors, out_dims, nested vmap for
pairwise distances, torch.func.vmap over a function returning a tuple, randomness="same" for a
dropout-free model, checking the vectorized outputs against each member run alone, ensemble
mean / predictive entropy / disagreement on shifted inputs, and a BatchNorm model's stacked
running buffers. Weights and data from NumPy: the run is the same on both libraries. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first mean loss> <last mean loss> <ensemble accuracy>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value, stack_module_state

rng = np.random.default_rng(9)
M, D, K = 5, 4, 3


def make_mlp(seed):
    r = np.random.default_rng(seed)
    net = nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, K))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.5, p.shape).astype(np.float32)))
    return net


models = [make_mlp(s) for s in range(M)]
params, buffers = stack_module_state(models)
print("stacked", {k: tuple(v.shape) for k, v in params.items()})
print("requires_grad", all(v.requires_grad for v in params.values()), "is leaf",
      all(v.is_leaf for v in params.values()))
base = copy.deepcopy(models[0]).to("meta")
print("base on meta:", next(base.parameters()).device)


def fmodel(p, b, x):
    return functional_call(base, (p, b), (x,))


centers = rng.normal(0, 2, (K, D))
lab = rng.integers(0, K, 300)
X = torch.from_numpy((centers[lab] + rng.normal(0, 1.0, (300, D))).astype(np.float32))
Y = torch.from_numpy(lab)

out_same = torch.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, X[:8])
print("same minibatch", tuple(out_same.shape))
loop = torch.stack([m(X[:8]) for m in models])
print("vmap == loop:", torch.allclose(out_same, loop, atol=1e-6))
chunked = torch.vmap(fmodel, in_dims=(0, 0, None), chunk_size=2)(params, buffers, X[:8])
print("chunk_size=2 equal:", torch.allclose(chunked, out_same, atol=1e-6))
xs = X[:40].reshape(M, 8, D)
per = torch.vmap(fmodel)(params, buffers, xs)
print("per-member minibatch", tuple(per.shape), "member 3 ok:",
      torch.allclose(per[3], models[3](xs[3]), atol=1e-6))
moved = torch.vmap(fmodel, in_dims=(0, 0, None), out_dims=1)(params, buffers, X[:8])
print("out_dims=1", tuple(moved.shape))


def loss_fn(p, b, x, y):
    logits = fmodel(p, b, x)
    return F.cross_entropy(logits, y)


step_fn = torch.vmap(grad_and_value(loss_fn), in_dims=(0, 0, 0, 0))
m_state = {k: torch.zeros_like(v) for k, v in params.items()}
v_state = {k: torch.zeros_like(v) for k, v in params.items()}
p = {k: v.detach() for k, v in params.items()}
lr, b1, b2 = 0.02, 0.9, 0.999
history = []
for t in range(1, 61):
    idx = torch.from_numpy(np.stack([(np.arange(32) * (m + 3) + t * 7) % 300 for m in range(M)]))
    grads, losses = step_fn(p, buffers, X[idx], Y[idx])
    for k in p:
        m_state[k] = b1 * m_state[k] + (1 - b1) * grads[k]
        v_state[k] = b2 * v_state[k] + (1 - b2) * grads[k] ** 2
        mh = m_state[k] / (1 - b1 ** t)
        vh = v_state[k] / (1 - b2 ** t)
        p[k] = p[k] - lr * mh / (vh.sqrt() + 1e-8)
    history.append(losses.mean().item())
    if t % 20 == 1:
        print(f"step {t:2d} member losses", [round(v, 4) for v in losses.tolist()])

with torch.no_grad():
    logits = torch.vmap(fmodel, in_dims=(0, 0, None))(p, buffers, X)
    probs = logits.softmax(-1)
    mean_p = probs.mean(0)
    acc = (mean_p.argmax(-1) == Y).float().mean().item()
    entropy = -(mean_p * mean_p.clamp_min(1e-12).log()).sum(-1)
    shifted = torch.vmap(fmodel, in_dims=(0, 0, None))(p, buffers, X + 6.0).softmax(-1)
    disagree = shifted.argmax(-1).float().var(0).mean().item()
print(f"ensemble acc {acc:.4f} mean entropy {entropy.mean().item():.4f} shifted disagreement {disagree:.4f}")
member_acc = (probs.argmax(-1) == Y).float().mean(1)
print("member accs", [round(v, 4) for v in member_acc.tolist()])

# nested vmap: pairwise squared distances; a function with a tuple output
pair = torch.vmap(torch.vmap(lambda a, b: (a - b).pow(2).sum(), in_dims=(None, 0)), in_dims=(0, None))
dd = pair(X[:4], X[:3])
print("pairwise", tuple(dd.shape), torch.allclose(dd, torch.cdist(X[:4], X[:3]) ** 2, atol=1e-4))
mx, am = torch.vmap(lambda r: (r.max(), r.argmax()))(X[:3])
print("tuple outputs", [round(v, 4) for v in mx.tolist()], am.tolist())
same = torch.vmap(lambda r: r * 2, randomness="same")(X[:2])
print("randomness='same' ok:", torch.equal(same, X[:2] * 2))

bn_models = [nn.Sequential(nn.Linear(D, 6), nn.BatchNorm1d(6)) for _ in range(3)]
bp, bb = stack_module_state(bn_models)
print("stacked buffers", sorted((k, tuple(v.shape)) for k, v in bb.items()))
print(f"RESULT {history[0]:.4f} {history[-1]:.4f} {acc:.4f}")
