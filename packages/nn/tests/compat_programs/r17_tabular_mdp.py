"""Tabular reinforcement learning as textbook code writes it in PyTorch: a windy gridworld MDP as
a dense transition tensor P[s, a, s'] built with index_put_(accumulate=True) over slip
outcomes, value iteration with einsum Bellman backups and amax, policy iteration with exact
policy evaluation by torch.linalg.solve, the discounted state occupancy and its identity
(1 - gamma) d^T r = (1 - gamma) mu^T V, soft (entropy-regularised) value iteration with
logsumexp and its softmax policy, Q-learning and expected SARSA driven by NumPy uniforms,
temporal-difference lambda evaluation with eligibility traces, and a policy-gradient check: the
exact gradient of J(theta) for a softmax policy by autograd through the linear solve vs the
policy-gradient theorem. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <v* start> <q-learning error> <pg gap>."""

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
Hh, Ww = 4, 6
S, A = Hh * Ww, 4
moves = torch.tensor([[-1, 0], [0, 1], [1, 0], [0, -1]])  # up right down left
wind = torch.tensor([0, 0, 1, 1, 1, 0])
goal, start, pit = 5, 18, 9
rows = torch.arange(S) // Ww
cols = torch.arange(S) % Ww


def step_to(s_rows, s_cols, a):
    r = (s_rows + moves[a, 0] - wind[s_cols]).clamp(0, Hh - 1)
    c = (s_cols + moves[a, 1]).clamp(0, Ww - 1)
    return r * Ww + c


P = torch.zeros(S, A, S)
for a in range(A):
    for slip, prob in [(a, 0.8), ((a + 1) % 4, 0.1), ((a + 3) % 4, 0.1)]:
        nxt = step_to(rows, cols, torch.tensor(slip))
        P.index_put_((torch.arange(S), torch.full((S,), a), nxt), torch.full((S,), prob), accumulate=True)
terminal = torch.zeros(S, dtype=torch.bool)
terminal[goal] = terminal[pit] = True
P[terminal] = 0
P[terminal, :, terminal.nonzero()[0]] = 0
for s in (goal, pit):
    P[s, :, s] = 1.0
R = torch.full((S, A), -0.04)
R[goal] = 0
R[pit] = 0
into = torch.einsum("sat,t->sa", P, (torch.arange(S) == goal).double()) * 1.0 - torch.einsum("sat,t->sa", P, (torch.arange(S) == pit).double())
R = R + into * (~terminal)[:, None]
gamma = 0.95
print(f"transition rows sum to one {torch.allclose(P.sum(-1), torch.ones(S, A))} reward range {R.min().item():.4f} {R.max().item():.4f}")

V = torch.zeros(S)
for it in range(1000):
    Q = R + gamma * torch.einsum("sat,t->sa", P, V)
    V_new = Q.amax(1)
    if (V_new - V).abs().max() < 1e-12:
        break
    V = V_new
pi_vi = Q.argmax(1)
print(f"value iteration converged in {it} sweeps V*(start) {V[start].item():.6f}")
arrows = "^>v<"
grid = ["".join("G" if s == goal else "X" if s == pit else arrows[pi_vi[s]] for s in range(r * Ww, (r + 1) * Ww)) for r in range(Hh)]
print("greedy policy " + "|".join(grid))

pi = torch.zeros(S, dtype=torch.long)
for k in range(50):
    P_pi = P[torch.arange(S), pi]
    r_pi = R[torch.arange(S), pi]
    V_pi = torch.linalg.solve(torch.eye(S) - gamma * P_pi, r_pi)
    Q_pi = R + gamma * torch.einsum("sat,t->sa", P, V_pi)
    new_pi = Q_pi.argmax(1)
    if torch.equal(new_pi, pi):
        break
    pi = new_pi
print(f"policy iteration converged in {k} improvements same values {torch.allclose(V_pi, V, atol=1e-9)}")

mu = torch.zeros(S)
mu[start] = 1.0
P_star = P[torch.arange(S), pi]
d = torch.linalg.solve((torch.eye(S) - gamma * P_star).T, mu)
lhs = (d * R[torch.arange(S), pi]).sum()
print(f"occupancy identity d^T r {lhs.item():.8f} mu^T V {V_pi[start].item():.8f} occupancy mass {d.sum().item() * (1 - gamma):.6f}")

tau = 0.1
Vs = torch.zeros(S)
for it in range(3000):
    Qs = R + gamma * torch.einsum("sat,t->sa", P, Vs)
    Vs_new = tau * torch.logsumexp(Qs / tau, 1)
    if (Vs_new - Vs).abs().max() < 1e-12:
        break
    Vs = Vs_new
pi_soft = torch.softmax(Qs / tau, 1)
print(f"soft values above hard {bool((Vs >= V - 1e-9).all())} soft V(start) {Vs[start].item():.6f} policy entropy at start {-(pi_soft[start] * pi_soft[start].log()).sum().item():.6f}")

rng = np.random.default_rng(1712)
U = torch.from_numpy(rng.uniform(size=(25000, 3)))
cdf = P.cumsum(-1)


def sample_next(s, a, u):
    return int(torch.searchsorted(cdf[s, a], torch.tensor([u])).clamp(max=S - 1).item())


Qq = torch.zeros(S, A)
Qe = torch.zeros(S, A)
s, s2 = start, start
eps, lr = 0.2, 0.1
for t in range(25000):
    u_eps, u_act, u_next = U[t].tolist()
    for table, which in ((Qq, 0), (Qe, 1)):
        cur = s if which == 0 else s2
        a = int(u_act * A) if u_eps < eps else int(table[cur].argmax())
        nx = sample_next(cur, a, u_next)
        if which == 0:
            target = R[cur, a] + gamma * table[nx].max() * (~terminal[nx])
        else:
            probs = torch.full((A,), eps / A)
            probs[table[nx].argmax()] += 1 - eps
            target = R[cur, a] + gamma * (probs * table[nx]).sum() * (~terminal[nx])
        table[cur, a] += lr * (target - table[cur, a])
        nx = start if terminal[nx] else nx
        if which == 0:
            s = nx
        else:
            s2 = nx
q_err = (Qq.amax(1) - V)[~terminal].abs().max().item()
print(f"q-learning max value error {q_err:.4f} greedy agrees on {(Qq.argmax(1) == pi_vi)[~terminal].sum().item()} of {(~terminal).sum().item()} states")
print(f"expected sarsa start value {Qe[start].max().item():.4f} (epsilon-greedy, below V* {Qe[start].max().item() < V[start].item()})")

theta = torch.zeros(S, A, requires_grad=True)


def J(theta):
    p = torch.softmax(theta, 1)
    P_th = torch.einsum("sa,sat->st", p, P)
    r_th = (p * R).sum(1)
    return torch.linalg.solve(torch.eye(S) - gamma * P_th, r_th)[start], p


Jv, p = J(theta)
g_auto, = torch.autograd.grad(Jv, theta)
with torch.no_grad():
    P_th = torch.einsum("sa,sat->st", p, P)
    Vt = torch.linalg.solve(torch.eye(S) - gamma * P_th, (p * R).sum(1))
    Qt = R + gamma * torch.einsum("sat,t->sa", P, Vt)
    dt = torch.linalg.solve((torch.eye(S) - gamma * P_th).T, mu)
    g_thm = dt[:, None] * p * (Qt - (p * Qt).sum(1, keepdim=True))
gap = (g_auto - g_thm).abs().max().item()
print(f"policy gradient theorem matches autograd through solve: {gap < 1e-10} J {Jv.item():.6f}")
print(f"RESULT {V[start].item():.6f} {q_err:.4f} {gap:.2e}")
