"""Hidden Markov models in the style of public pomegranate / hmmlearn-like torch code: sequences
sampled from a 3-state HMM with Gaussian emissions (NumPy), the scaled-free forward algorithm in
log space (torch.logsumexp over broadcast transitions), the backward pass, posteriors, Baum-Welch
EM updates (expected transitions by einsum over xi, means and variances by weighted sums), the
same log-likelihood maximized by gradient ascent on unconstrained parameters (log_softmax rows,
softplus scales) with autograd checked against EM's fixed point, the Fisher identity (the
gradient of log p(x) equals the expected complete-data gradient), Viterbi decoding by max /
argmax with backtracking via torch.gather, posterior sampling by torch.distributions.Categorical
driven by NumPy uniforms through cumsum + searchsorted, and state accuracy up to label
permutation (itertools.permutations). float64 throughout. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT <initial
log-likelihood> <EM log-likelihood> <Viterbi accuracy>."""

import itertools

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributions import Categorical, Normal

rng = np.random.default_rng(135)
K, T, B = 3, 60, 8
A_true = np.array([[0.9, 0.08, 0.02], [0.05, 0.9, 0.05], [0.1, 0.1, 0.8]])
mu_true, sd_true = np.array([-2.0, 0.0, 2.5]), np.array([0.6, 0.5, 0.8])
states = np.zeros((B, T), np.int64)
for b in range(B):
    states[b, 0] = rng.integers(K)
    for t in range(1, T):
        states[b, t] = rng.choice(K, p=A_true[states[b, t - 1]])
obs = torch.from_numpy(mu_true[states] + sd_true[states] * rng.normal(size=(B, T)))
Z = torch.from_numpy(states)


def emissions(x, mu, sd):
    return Normal(mu, sd).log_prob(x.unsqueeze(-1))  # (B, T, K)


def forward(log_pi, log_A, log_e):
    alpha = [log_pi + log_e[:, 0]]
    for t in range(1, log_e.shape[1]):
        alpha.append(torch.logsumexp(alpha[-1].unsqueeze(2) + log_A, dim=1) + log_e[:, t])
    return torch.stack(alpha, 1)


def backward(log_A, log_e):
    beta = [torch.zeros_like(log_e[:, 0])]
    for t in range(log_e.shape[1] - 1, 0, -1):
        beta.append(torch.logsumexp(log_A + (log_e[:, t] + beta[-1]).unsqueeze(1), dim=2))
    return torch.stack(beta[::-1], 1)


def loglik(log_pi, log_A, mu, sd):
    return torch.logsumexp(forward(log_pi, log_A, emissions(obs, mu, sd))[:, -1], -1).sum()


pi = torch.full((K,), 1.0 / K, dtype=torch.float64)
A = torch.full((K, K), 0.2, dtype=torch.float64) + 0.4 * torch.eye(K, dtype=torch.float64)
mu = torch.tensor([-1.0, 0.5, 1.0], dtype=torch.float64)
sd = torch.ones(K, dtype=torch.float64)
ll0 = loglik(pi.log(), A.log(), mu, sd).item()
print(f"initial log-likelihood {ll0:.5f}")
for it in range(25):
    log_e = emissions(obs, mu, sd)
    la, lb = forward(pi.log(), A.log(), log_e), backward(A.log(), log_e)
    ll = torch.logsumexp(la[:, -1], -1)
    gamma = (la + lb - ll.view(B, 1, 1)).exp()
    xi = (la[:, :-1].unsqueeze(3) + A.log() + (log_e[:, 1:] + lb[:, 1:]).unsqueeze(2) - ll.view(B, 1, 1, 1)).exp()
    pi = gamma[:, 0].mean(0)
    A = torch.einsum("btij->ij", xi)
    A = A / A.sum(1, keepdim=True)
    w = gamma.sum((0, 1))
    mu = torch.einsum("btk,bt->k", gamma, obs) / w
    sd = (torch.einsum("btk,btk->k", gamma, (obs.unsqueeze(-1) - mu).pow(2)) / w).sqrt()
    if it % 6 == 0:
        print(f"em iter {it:2d} log-likelihood {ll.sum().item():.5f} gamma sums {gamma.sum(-1).mean().item():.6f}")
ll_em = loglik(pi.log(), A.log(), mu, sd).item()
print(f"em: log-likelihood {ll_em:.5f} means {[round(v, 3) for v in mu.tolist()]} sds {[round(v, 3) for v in sd.tolist()]}")
print(f"transition diagonal {[round(v, 3) for v in torch.diagonal(A).tolist()]}")

# gradient at EM's fixed point through unconstrained parameters is ~0
theta = [pi.log().clone().requires_grad_(), A.log().clone().requires_grad_(), mu.clone().requires_grad_(),
         torch.log(torch.expm1(sd)).requires_grad_()]
ll = loglik(F.log_softmax(theta[0], 0), F.log_softmax(theta[1], 1), theta[2], F.softplus(theta[3]))
grads = torch.autograd.grad(ll, theta)
print(f"gradient at the EM fixed point small: {max(g.abs().max().item() for g in grads) < 0.05}")

# gradient ascent from the initial point
theta = [torch.zeros(K, dtype=torch.float64, requires_grad=True),
         (2 * torch.eye(K, dtype=torch.float64)).requires_grad_(),
         torch.tensor([-1.0, 0.5, 1.0], dtype=torch.float64, requires_grad=True),
         torch.zeros(K, dtype=torch.float64, requires_grad=True)]
opt = torch.optim.Adam(theta, lr=0.1)
for step in range(60):
    nll = -loglik(F.log_softmax(theta[0], 0), F.log_softmax(theta[1], 1), theta[2], F.softplus(theta[3]))
    opt.zero_grad()
    nll.backward()
    opt.step()
    if step % 20 == 0:
        print(f"adam step {step:2d} nll {nll.item():.5f}")
print(f"adam: log-likelihood {-nll.item():.5f} means {[round(v, 2) for v in sorted(theta[2].tolist())]}")

# Fisher identity: d/dmu log p(x) == E_post[d/dmu log p(x, z)]
mu_r = mu.clone().requires_grad_()
g_direct = torch.autograd.grad(loglik(pi.log(), A.log(), mu_r, sd), mu_r)[0]
g_fisher = torch.einsum("btk,btk->k", gamma, (obs.unsqueeze(-1) - mu) / sd.pow(2))
print(f"fisher identity holds: {torch.allclose(g_direct, g_fisher, atol=1e-6)}")


def viterbi(log_pi, log_A, log_e):
    delta, back = log_pi + log_e[:, 0], []
    for t in range(1, log_e.shape[1]):
        scores = delta.unsqueeze(2) + log_A
        delta, arg = scores.max(1)
        delta = delta + log_e[:, t]
        back.append(arg)
    path = [delta.argmax(-1)]
    for arg in reversed(back):
        path.append(torch.gather(arg, 1, path[-1].unsqueeze(1)).squeeze(1))
    return torch.stack(path[::-1], 1), delta.max(-1).values


log_e = emissions(obs, mu, sd)
path, best = viterbi(pi.log(), A.log(), log_e)
acc = max((torch.tensor(p)[path] == Z).double().mean().item() for p in itertools.permutations(range(K)))
print(f"viterbi accuracy {acc:.4f} best path score {best.sum().item():.4f} <= loglik: {best.sum().item() <= ll_em}")

# posterior sampling with the forward-filtering backward-sampling recursion
la = forward(pi.log(), A.log(), log_e)
u = torch.from_numpy(rng.random((B, T)))
z = torch.searchsorted(Categorical(logits=la[:, -1]).probs.cumsum(-1), u[:, -1:]).squeeze(1).clamp_max(K - 1)
samples = [z]
for t in range(T - 2, -1, -1):
    probs = Categorical(logits=la[:, t] + A.log()[:, samples[-1]].T).probs
    samples.append(torch.searchsorted(probs.cumsum(-1), u[:, t:t + 1]).squeeze(1).clamp_max(K - 1))
sample = torch.stack(samples[::-1], 1)
agree = (sample == path).double().mean().item()
print(f"posterior sample agrees with viterbi on {agree:.4f} of steps, entropy {Categorical(probs=gamma).entropy().mean().item():.5f}")
print(f"RESULT {ll0:.5f} {ll_em:.5f} {acc:.4f}")
