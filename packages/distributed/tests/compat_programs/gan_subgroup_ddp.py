"""Two DDP models trained against each other (a GAN: generator and discriminator, each with its
own optimizer, the discriminator stepped on detached fakes, then the generator through the
discriminator with the discriminator's gradients thrown away) on 4 ranks (gloo) split into two
independent data-parallel groups {0, 1} and {2, 3} (process_group=, each group starting from
its own first rank's weights), a frozen embedding (requires_grad=False) DDP leaves out, outputs
as a namedtuple and as a dict, eval-mode forwards under no_grad between steps (BatchNorm's
running statistics broadcast from the group's first rank), and named_parameters' "module."
prefix. Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket
from collections import namedtuple

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

GenOut = namedtuple("GenOut", ["sample", "code"])


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def init_(m, seed):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy((0.5 * g.standard_normal(p.shape)).astype(np.float32)))
    return m


class Gen(nn.Module):
    def __init__(self):
        super().__init__()
        self.label_emb = nn.Embedding(3, 2)
        self.label_emb.weight.requires_grad_(False)  # frozen
        # no bias before the BatchNorm: its gradient would be rounding noise, which Adam
        # turns into steps of the learning rate's size
        self.net = nn.Sequential(nn.Linear(4 + 2, 6, bias=False), nn.BatchNorm1d(6), nn.ReLU(),
                                 nn.Linear(6, 3))

    def forward(self, z, labels):
        code = self.label_emb(labels)
        return GenOut(self.net(torch.cat([z, code], dim=1)), code)


class Disc(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 5), nn.LeakyReLU(0.2), nn.Linear(5, 1))

    def forward(self, x):
        return {"logit": self.net(x)}


def worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    mine = groups[rank // 2]
    res = {}
    # each rank starts from its own weights: DDP copies the group's first rank's
    G = DDP(init_(Gen(), 10 + rank), process_group=mine)
    D = DDP(init_(Disc(), 20 + rank), process_group=mine)
    res["g_start"] = r6(G.module.net[0].weight[0])
    res["d_start"] = r6(D.module.net[2].weight)
    res["trainable"] = sorted(n for n, p in G.named_parameters() if p.requires_grad)
    res["frozen_after_wrap"] = r6(G.module.label_emb.weight[0])
    optG = torch.optim.Adam(G.parameters(), lr=0.05, betas=(0.5, 0.9))
    optD = torch.optim.Adam(D.parameters(), lr=0.05, betas=(0.5, 0.9))
    g = np.random.default_rng(100 + rank)
    hist = []
    for step in range(3):
        z = torch.from_numpy(g.standard_normal((4, 4)).astype(np.float32))
        labels = torch.from_numpy(g.integers(0, 3, 4))
        real = torch.from_numpy((g.standard_normal((4, 3)) + 2.0).astype(np.float32))
        fake = G(z, labels)
        # discriminator step on detached fakes
        d_loss = (F.binary_cross_entropy_with_logits(D(real)["logit"], torch.ones(4, 1))
                  + F.binary_cross_entropy_with_logits(D(fake.sample.detach())["logit"],
                                                       torch.zeros(4, 1)))
        optD.zero_grad()
        d_loss.backward()
        optD.step()
        # generator step through the discriminator
        g_loss = F.binary_cross_entropy_with_logits(D(fake.sample)["logit"], torch.ones(4, 1))
        optG.zero_grad()
        g_loss.backward()
        d_grad_norm = sum(p.grad.norm() ** 2 for p in D.parameters()).sqrt().item()
        optD.zero_grad()
        optG.step()
        # an evaluation forward in between
        G.eval()
        with torch.no_grad():
            ev = G(torch.ones(2, 4), torch.tensor([0, 1])).sample
        G.train()
        hist.append({"d_loss": round(d_loss.item(), 5), "g_loss": round(g_loss.item(), 5),
                     "d_grad_norm": round(d_grad_norm, 5), "eval": r6(ev[0]),
                     "code_grad": fake.code.requires_grad})
    res["hist"] = hist
    res["g_w"] = r6(G.module.net[0].weight)
    res["bn_mean"] = r6(G.module.net[1].running_mean)
    res["d_w"] = r6(D.module.net[2].weight)
    res["emb_grad"] = G.module.label_emb.weight.grad is None
    res["param_names"] = [n for n, _ in D.named_parameters()][:2]

    results = [None] * world
    dist.all_gather_object(results, res)
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(4, free_port(), args.out), nprocs=4, join=True)
