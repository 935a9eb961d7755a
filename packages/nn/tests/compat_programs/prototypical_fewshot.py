"""Few-shot classification in the style of the public Prototypical Networks and Matching
Networks code: episodic sampling of N-way K-shot tasks from synthetic classes (NumPy class
means on a 16-D manifold pushed through a fixed random nonlinearity), a small embedding MLP,
class prototypes as the support mean (by index_add_ over labels, checked against
one_hot.T @ embeddings / K and scatter_reduce(mean)), logits as negative squared Euclidean
distances (expanded form with torch.cdist checked against broadcasting), a matching-network
variant with cosine attention (F.normalize + softmax over support), a temperature-scaled
cross entropy, StepLR, and mean episode accuracy with a 95% confidence interval
(torch.std(unbiased) / sqrt), all in float64 by torch.set_default_dtype. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last prototype losses> <test
accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)  # argmax over near-equal distances: keep roundings small
rng = np.random.default_rng(133)
D, H = 16, 32
n_train_cls, n_test_cls, per = 40, 20, 30
means = rng.normal(size=(n_train_cls + n_test_cls, D)).astype(np.float32)
mix = rng.normal(size=(D, D)).astype(np.float32) / 4
data = np.tanh((means[:, None] + 0.9 * rng.normal(size=(len(means), per, D)).astype(np.float32)) @ mix) * 2
data = torch.from_numpy(data.astype(np.float64))


def episode(classes, n_way=5, k_shot=3, q=5):
    chosen = rng.choice(classes, n_way, replace=False)
    sup, qry = [], []
    for c in chosen:
        idx = rng.permutation(per)[:k_shot + q]
        sup.append(data[c, idx[:k_shot]])
        qry.append(data[c, idx[k_shot:]])
    sy = torch.arange(n_way).repeat_interleave(k_shot)
    qy = torch.arange(n_way).repeat_interleave(q)
    return torch.cat(sup), sy, torch.cat(qry), qy


embed = nn.Sequential(nn.Linear(D, H), nn.BatchNorm1d(H), nn.ReLU(), nn.Linear(H, H), nn.ReLU(), nn.Linear(H, H))
with torch.no_grad():
    for name, p in embed.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[1]), p.shape)))
        elif "bias" in name:
            p.zero_()


def prototypes(z, y, n_way):
    protos = torch.zeros(n_way, z.shape[1]).index_add_(0, y, z)
    return protos / torch.bincount(y, minlength=n_way).unsqueeze(1)


def proto_logits(zq, protos):
    d2 = (zq.unsqueeze(1) - protos.unsqueeze(0)).pow(2).sum(-1)
    return -d2


def matching_logits(zq, zs, sy, n_way, temp=10.0):
    att = torch.softmax(temp * F.normalize(zq, dim=-1) @ F.normalize(zs, dim=-1).T, dim=-1)
    return torch.log(att @ F.one_hot(sy, n_way).to(att) + 1e-8)


sx, sy, qx, qy = episode(np.arange(n_train_cls))
z = embed(sx).detach()
p1 = prototypes(z, sy, 5)
p2 = F.one_hot(sy, 5).to(z).T @ z / 3
p3 = torch.zeros(5, H).scatter_reduce(0, sy.unsqueeze(1).expand(-1, H), z, reduce="mean", include_self=False)
zq = embed(qx).detach()
print(f"prototypes agree: {torch.allclose(p1, p2, atol=1e-5)} {torch.allclose(p1, p3, atol=1e-5)} "
      f"cdist agrees: {torch.allclose(torch.cdist(zq, p1).pow(2), -proto_logits(zq, p1), atol=1e-3)}")

opt = torch.optim.Adam(embed.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=60, gamma=0.5)
losses = []
for ep in range(150):
    sx, sy, qx, qy = episode(np.arange(n_train_cls))
    z = embed(torch.cat([sx, qx]))
    zs, zq = z[:len(sx)], z[len(sx):]
    loss = F.cross_entropy(proto_logits(zq, prototypes(zs, sy, 5)), qy)
    if ep % 2:  # alternate with the matching-network objective
        loss = loss + F.nll_loss(matching_logits(zq, zs, sy, 5), qy)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    if ep % 2 == 0:
        losses.append(loss.item())
    if ep % 30 == 0:
        print(f"episode {ep:3d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.6f}")

embed.eval()
accs, maccs = [], []
with torch.no_grad():
    for _ in range(60):
        sx, sy, qx, qy = episode(np.arange(n_train_cls, n_train_cls + n_test_cls))
        zs, zq = embed(sx), embed(qx)
        accs.append(proto_logits(zq, prototypes(zs, sy, 5)).argmax(1).eq(qy).float().mean())
        maccs.append(matching_logits(zq, zs, sy, 5).argmax(1).eq(qy).float().mean())
accs, maccs = torch.stack(accs), torch.stack(maccs)
ci = 1.96 * accs.std() / len(accs) ** 0.5
print(f"test 5-way 3-shot: proto {accs.mean().item():.4f} +- {ci.item():.4f} matching {maccs.mean().item():.4f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {accs.mean().item():.4f}")
