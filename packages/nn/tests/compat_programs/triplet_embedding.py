"""A siamese / triplet embedding network, in the style of the public PyTorch metric-learning
examples: an embedding MLP with BatchNorm1d and F.normalize, TripletMarginLoss over online
triplets mined from a batch (cdist distance matrix, masked hardest positive/negative), a
ContrastiveLoss-style pair loss with pairwise_distance and CosineEmbeddingLoss on the side, SGD
with momentum and nesterov, a MultiStepLR schedule, and nearest-neighbour retrieval accuracy
with topk. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <recall@1>."""

import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import MultiStepLR

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=120)
parser.add_argument("--margin", type=float, default=0.3)
parser.add_argument("--seed", type=int, default=3)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(args.seed)

N_CLASSES, DIM, PER_CLASS = 8, 16, 40
g = torch.Generator().manual_seed(0)
centers = torch.randn(N_CLASSES, DIM, generator=g) * 1.5
labels_all = torch.arange(N_CLASSES).repeat_interleave(PER_CLASS)
data_all = centers[labels_all] + torch.randn(len(labels_all), DIM, generator=g) * 1.2
perm = torch.randperm(len(labels_all), generator=g)
train_idx, test_idx = perm[:240], perm[240:]
x_train, y_train = data_all[train_idx], labels_all[train_idx]
x_test, y_test = data_all[test_idx], labels_all[test_idx]


class EmbeddingNet(nn.Module):
    def __init__(self, d_in=DIM, d_emb=8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, 64), nn.BatchNorm1d(64), nn.PReLU(),
                                 nn.Linear(64, d_emb))

    def forward(self, x):
        return F.normalize(self.net(x), p=2, dim=1)


class SiameseNet(nn.Module):
    def __init__(self, embedding_net):
        super().__init__()
        self.embedding_net = embedding_net

    def forward(self, x1, x2):
        return self.embedding_net(x1), self.embedding_net(x2)

    def get_embedding(self, x):
        return self.embedding_net(x)


def hardest_triplets(emb, labels):
    """For each anchor, its farthest positive and nearest negative within the batch."""
    dist = torch.cdist(emb, emb)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    eye = torch.eye(len(labels), dtype=torch.bool)
    pos_d = dist.masked_fill(~same | eye, -1.0)
    neg_d = dist.masked_fill(same, float("inf"))
    pos = pos_d.argmax(dim=1)
    neg = neg_d.argmin(dim=1)
    return pos, neg


model = SiameseNet(EmbeddingNet())
triplet = nn.TripletMarginLoss(margin=args.margin, p=2)
cosine = nn.CosineEmbeddingLoss(margin=0.2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                            weight_decay=1e-4)
scheduler = MultiStepLR(optimizer, milestones=[60, 100], gamma=0.1)

losses = []
for step in range(args.steps):
    model.train()
    idx = torch.randint(0, len(x_train), (64,))
    x, y = x_train[idx], y_train[idx]
    emb = model.get_embedding(x)
    pos, neg = hardest_triplets(emb.detach(), y)
    loss = triplet(emb, emb[pos], emb[neg])
    # a pair loss on shuffled pairs: contrastive on distances plus a cosine term
    j = torch.randperm(64)
    e1, e2 = model(x, x[j])
    target = (y == y[j]).float()
    d = F.pairwise_distance(e1, e2)
    contrastive = (target * d.pow(2) + (1 - target) * F.relu(1.0 - d).pow(2)).mean() / 2
    loss = loss + 0.5 * contrastive + 0.1 * cosine(e1, e2, target * 2 - 1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    scheduler.step()
    losses.append(loss.item())
    if step % 30 == 0:
        print(f"step {step:3d}  loss {loss.item():.4f}  lr {optimizer.param_groups[0]['lr']:.3g}")

model.eval()
with torch.inference_mode():
    q = model.get_embedding(x_test)
    db = model.get_embedding(x_train)
    assert not q.requires_grad and torch.is_inference_mode_enabled()
    norms = q.norm(dim=1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-5)
    sim = q @ db.T
    top = sim.topk(5, dim=1)
    assert top.values.shape == (len(x_test), 5) and (top.values[:, :-1] >= top.values[:, 1:]).all()
    recall1 = (y_train[top.indices[:, 0]] == y_test).float().mean().item()
    votes = F.one_hot(y_train[top.indices], N_CLASSES).sum(1)
    knn = (votes.argmax(1) == y_test).float().mean().item()
    # distances agree with the similarity of unit vectors: |a-b|^2 = 2 - 2 a.b
    d2 = torch.cdist(q, db).pow(2)
    assert torch.allclose(d2, 2 - 2 * sim, atol=1e-4)
print(f"recall@1 {recall1:.3f}  5-nn accuracy {knn:.3f}")
print(f"RESULT {losses[0]:.4f} {sum(losses[-10:]) / 10:.4f} {recall1:.4f}")
