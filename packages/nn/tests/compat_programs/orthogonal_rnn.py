"""An orthogonal RNN on the copying-memory task, in the style of the public expRNN / scoRNN /
"orthogonal constraints" code: the recurrent matrix of an nn.RNNCell constrained orthogonal by
torch.nn.utils.parametrizations.orthogonal (orthogonal_map "matrix_exp", "cayley" and
"householder"; use_trivialization True and False), and by a hand-written parametrization
(a skew-symmetric matrix through torch.linalg.matrix_exp) registered with
nn.utils.parametrize.register_parametrization with a right_inverse; an nn.RNN layer whose
weight_hh_l0 is parametrized in place; the modReLU nonlinearity; the copy task's data (a
sequence to remember, blanks, a marker) from NumPy, cross_entropy on the recall phase;
orthogonality ||W^T W - I|| and the spectrum (linalg.eigvals magnitudes all 1) tracked through
training (gradients clipped by clip_grad_norm_, Adam), parametrize.cached() for an unrolled loop, the gradient norm through 60 steps
(no vanishing), and remove_parametrizations(leave_parametrized=True). Weights and data from
NumPy, in float64: the run is the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss>
<orthogonality error>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrizations, parametrize

rng = np.random.default_rng(0)
torch.manual_seed(0)
# float64 throughout: the copy task's training is sensitive enough that float32 rounding
# alone sends two runs apart after a few dozen steps
torch.set_default_dtype(torch.float64)


def arr(*shape, s=1.0):
    return torch.from_numpy((s * rng.normal(size=shape)).astype(np.float64))


def ortho_err(W):
    return torch.linalg.matrix_norm(W.T @ W - torch.eye(W.shape[0])).item()


# the three built-in maps on a square Linear
for orth_map in ("matrix_exp", "cayley", "householder"):
    lin = nn.Linear(6, 6, bias=False)
    with torch.no_grad():
        lin.weight.copy_(arr(6, 6))
    parametrizations.orthogonal(lin, orthogonal_map=orth_map)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        lin(arr(4, 6)).pow(2).sum().backward()
        opt.step()
    print(f"{orth_map}: orthogonal after steps {ortho_err(lin.weight) < 1e-4}, "
          f"|det| {abs(torch.linalg.det(lin.weight).item()):.5f}, "
          f"original {tuple(lin.parametrizations.weight.original.shape)}")
lin = nn.Linear(5, 3)
parametrizations.orthogonal(lin, use_trivialization=False)
print("wide 3x5 has orthonormal rows:",
      torch.allclose(lin.weight @ lin.weight.T, torch.eye(3), atol=1e-5))


class Skew(nn.Module):
    def forward(self, A):
        return A.triu(1) - A.triu(1).T


class MatrixExp(nn.Module):
    def forward(self, X):
        return torch.linalg.matrix_exp(X)

    def right_inverse(self, Q):  # start from the identity whatever Q is
        return torch.zeros_like(Q)


def mod_relu(z, b):
    return torch.sign(z) * F.relu(z.abs() + b)


class OrthoRNN(nn.Module):
    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.cell = nn.RNNCell(n_in, hidden, bias=False, nonlinearity="tanh")
        parametrize.register_parametrization(self.cell, "weight_hh", Skew())
        parametrize.register_parametrization(self.cell, "weight_hh", MatrixExp())
        self.b = nn.Parameter(torch.full((hidden,), -0.05))
        self.out = nn.Linear(hidden, n_out)

    def forward(self, x):
        h = x.new_zeros(x.shape[1], self.cell.hidden_size)
        outs = []
        with parametrize.cached():
            W = self.cell.weight_hh
            for t in range(x.shape[0]):
                h = mod_relu(x[t] @ self.cell.weight_ih.T + h @ W.T, self.b)
                outs.append(h)
        return self.out(torch.stack(outs))


K, BLANK = 4, 20  # symbols 1..K, delay
def copy_batch(n):
    seq = rng.integers(1, K + 1, (5, n))
    x = np.zeros((5 + BLANK + 5, n), np.int64)
    x[:5] = seq
    x[5 + BLANK - 1] = K + 1  # the marker
    y = np.zeros_like(x)
    y[-5:] = seq
    return (F.one_hot(torch.from_numpy(x), K + 2).double(), torch.from_numpy(y))


model = OrthoRNN(K + 2, 24, K + 1)
with torch.no_grad():
    model.cell.weight_ih.copy_(arr(24, K + 2, s=0.5))
    model.out.weight.copy_(arr(K + 1, 24, s=0.3))
    model.out.bias.zero_()
print("weight_hh is the identity:", torch.allclose(model.cell.weight_hh, torch.eye(24)),
      "chain", [type(m).__name__ for m in model.cell.parametrizations.weight_hh])
with torch.no_grad():  # a random skew start: set the unconstrained original directly
    model.cell.parametrizations.weight_hh.original.copy_(arr(24, 24, s=0.3))
print(f"orthogonal error < 1e-4: {ortho_err(model.cell.weight_hh) < 1e-4} "
      f"|eigvals| all 1: {torch.allclose(torch.linalg.eigvals(model.cell.weight_hh).abs(), torch.ones(24), atol=1e-4)}")
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(40):
    x, y = copy_batch(32)
    logits = model(x)
    loss = F.cross_entropy(logits[-5:].reshape(-1, K + 1), y[-5:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        g = model.cell.parametrizations.weight_hh.original.grad
        print(f"step {step:2d} loss {loss.item():.5f} grad norm {g.norm().item():.5f} "
              f"orthogonal {ortho_err(model.cell.weight_hh) < 1e-4}")
err = ortho_err(model.cell.weight_hh)

# gradient reaching the first input through 60 steps
x = arr(60, 1, K + 2).requires_grad_(True)
model(x)[-1].sum().backward()
print(f"grad at t=0 {x.grad[0].norm().item():.5f} at t=59 {x.grad[-1].norm().item():.5f}")

# nn.RNN's weight_hh_l0 parametrized in place
rnn = nn.RNN(3, 8, batch_first=True)
parametrizations.orthogonal(rnn, "weight_hh_l0")
xs = arr(2, 7, 3)
out, hn = rnn(xs)
h = torch.zeros(2, 8)
for t in range(7):
    h = torch.tanh(xs[:, t] @ rnn.weight_ih_l0.T + rnn.bias_ih_l0 + h @ rnn.weight_hh_l0.T
                   + rnn.bias_hh_l0)
print("parametrized nn.RNN == manual loop:", torch.allclose(hn[0], h, atol=1e-5),
      "orthogonal:", ortho_err(rnn.weight_hh_l0) < 1e-4)
W = model.cell.weight_hh.detach().clone()
parametrize.remove_parametrizations(model.cell, "weight_hh", leave_parametrized=True)
print("removed, kept value:", torch.equal(model.cell.weight_hh, W),
      "is a Parameter:", isinstance(model.cell.weight_hh, nn.Parameter),
      "parametrized:", parametrize.is_parametrized(model.cell))
torch.set_default_dtype(torch.float32)
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {err:.3f}")
