"""Evaluation and preprocessing code that mixes NumPy arrays and tensors the way quick research
scripts do: `tensor == ndarray` accuracy, `tensor * ndarray` class weights (NumPy's reflected
operator computes and hands the result back as a tensor through __array_wrap__, float64 by
NumPy's promotion), NumPy ufuncs applied to tensors (np.exp, np.log1p, np.sqrt, np.maximum)
returning tensors, `tensor += ndarray` rebinding to a new float64 tensor, np.asarray / np.array
of tensors, torch.from_numpy / torch.as_tensor memory sharing both ways, .numpy() refusing a
tensor that requires grad (and the same refusal through a ufunc), boolean ufunc results as
uint8 tensors, and a small logistic-regression fit whose metrics (ROC-AUC, Brier, ECE) are
computed half in NumPy. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <auc>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1705)
X_np = rng.normal(size=(300, 5)).astype(np.float32)
w_true = np.array([1.5, -2.0, 0.0, 0.7, 0.0], dtype=np.float32)
y_np = (X_np @ w_true + 0.5 * rng.normal(size=300) > 0).astype(np.int64)

X = torch.from_numpy(X_np)
y = torch.from_numpy(y_np)
X_np[0, 0] = 42.0
print(f"from_numpy shares memory: {X[0, 0].item()}")
X_np[0, 0] = X[1, 0].item()
t = torch.as_tensor(y_np)
t[0] = 1 - t[0]
print(f"as_tensor shares memory: {bool(y_np[0] == t[0])}")
t[0] = 1 - t[0]

pred = torch.tensor([0, 1, 1, 0, 1])
labels = np.array([0, 1, 0, 0, 1])
eq = pred == labels
print(f"tensor == ndarray: {type(eq).__name__} {eq.dtype} {eq.tolist()} accuracy {eq.float().mean().item():.2f}")
cw = np.array([0.25, 0.75])
wt = pred * cw[labels]
print(f"tensor * ndarray: {type(wt).__name__} {wt.dtype} {wt.tolist()}")
logits = torch.tensor([[2.0, -1.0], [0.5, 0.5]])
ex = np.exp(logits)
print(f"np.exp(tensor): {type(ex).__name__} {ex.dtype} {[[round(v, 4) for v in r] for r in ex.tolist()]}")
print(f"np.log1p / np.sqrt / np.maximum: {np.log1p(torch.tensor([0.0, 1.0])).tolist()} {np.sqrt(torch.tensor([4.0, 9.0])).tolist()} {np.maximum(torch.tensor([1.0, -1.0]), 0).tolist()}")
gt = np.greater(torch.tensor([1.0, -1.0]), 0)
print(f"np.greater(tensor, 0): {type(gt).__name__} {gt.dtype} {gt.tolist()}")
acc = torch.zeros(3)
acc += np.ones(3)
print(f"tensor += ndarray: {acc.dtype} {acc.tolist()}")
print(f"np.asarray(tensor) {np.asarray(torch.arange(3)).dtype} np.array(tensor, float32) {np.array(torch.arange(3), dtype=np.float32).dtype}")
p = torch.ones(2, requires_grad=True)
for name, fn in [("numpy()", lambda: p.numpy()), ("ufunc", lambda: p * np.ones(2))]:
    try:
        fn()
        print(f"{name}: no error")
    except RuntimeError as e:
        print(f"{name} on a tensor that requires grad: RuntimeError {'detach' in str(e)}")
print(f"detach().numpy() ok {p.detach().numpy().tolist()}")

model = nn.Linear(5, 1)
with torch.no_grad():
    model.weight.copy_(torch.from_numpy(rng.normal(0, 0.1, (1, 5)).astype(np.float32)))
    model.bias.zero_()
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=10, history_size=5, line_search_fn="strong_wolfe")
tr, te = slice(0, 200), slice(200, 300)
losses = []


def closure():
    opt.zero_grad()
    loss = F.binary_cross_entropy_with_logits(model(X[tr]).squeeze(1), y[tr].float())
    loss.backward()
    return loss


for it in range(5):
    loss = opt.step(closure)
    losses.append(loss.item())
    print(f"lbfgs outer {it} loss {loss.item():.5f}")

with torch.no_grad():
    prob = torch.sigmoid(model(X[te]).squeeze(1))
y_te = y_np[200:]
hits = (prob > 0.5).long() == y_te
print(f"test accuracy {hits.float().mean().item():.3f}")
order = np.argsort(-prob.numpy(), kind="stable")
ys = y_te[order]
tpr = np.cumsum(ys) / ys.sum()
fpr = np.cumsum(1 - ys) / (1 - ys).sum()
auc = float(np.trapezoid(np.concatenate([[0], tpr]), np.concatenate([[0], fpr])))
brier = ((prob - y_te) ** 2).mean()
print(f"auc {auc:.4f} brier {type(brier).__name__} {brier.item():.4f}")
bins = np.linspace(0, 1, 6)
idx = np.clip(np.digitize(prob.numpy(), bins) - 1, 0, 4)
ece = 0.0
for b in range(5):
    m = idx == b
    if m.any():
        ece += m.mean() * abs(prob[torch.from_numpy(m)].mean().item() - y_te[m].mean())
print(f"ece {ece:.4f} weights {[round(v, 3) for v in model.weight.detach().flatten().tolist()]}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {auc:.4f}")
