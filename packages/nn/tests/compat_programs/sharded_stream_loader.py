"""Streaming data loading with worker processes, in the style of the public large-corpus
training scripts (WebDataset-like shards without the library): an IterableDataset over "shard
files" split between DataLoader workers with torch.utils.data.get_worker_info() (id,
num_workers, seed, dataset), per-worker NumPy seeding in worker_init_fn, num_workers=2 with
persistent_workers and prefetch_factor, a token-packing stream that yields fixed-length
blocks, a map-style dataset of dicts (tensors, ints, strings, NumPy arrays) through the default
collate_fn and a custom one, a length-grouping Sampler plus BatchSampler, WeightedRandomSampler
and random_split with a seeded torch.Generator (only sizes and coverage printed: the draws are
library-specific), ConcatDataset / Subset indexing and default_convert. Then a tiny bag-of-tokens
model is trained on the stream. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <blocks>."""

import collections

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    Sampler,
    Subset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)

SHARDS = [np.random.default_rng(s).integers(1, 50, size=37 + 5 * s) for s in range(6)]


class ShardStream(IterableDataset):
    def __init__(self, shards, block=8):
        self.shards, self.block = shards, block

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        for sid in range(wid, len(self.shards), nw):  # shard-level split between workers
            buf = self.shards[sid].tolist()
            while len(buf) >= self.block + 1:
                chunk, buf = buf[: self.block + 1], buf[self.block:]
                x = torch.tensor(chunk)
                yield {"input": x[:-1], "target": x[1:], "shard": sid, "worker": wid}


def seed_worker(worker_id):
    info = get_worker_info()
    assert info.id == worker_id and isinstance(info.dataset, ShardStream)
    np.random.seed(1234 + worker_id)


def blocks_of(loader):
    out = []
    for batch in loader:
        out.extend(zip(batch["shard"].tolist(), batch["input"][:, 0].tolist()))
    return sorted(out)


stream = ShardStream(SHARDS)
single = blocks_of(DataLoader(stream, batch_size=4))
multi = DataLoader(stream, batch_size=4, num_workers=2, worker_init_fn=seed_worker,
                   persistent_workers=True, prefetch_factor=2)
first_pass = blocks_of(multi)
second_pass = blocks_of(multi)
print("blocks:", len(single), "same blocks with 2 workers:", single == first_pass,
      "persistent workers repeat:", first_pass == second_pass)
workers_seen = sorted({b["worker"].tolist()[0] for b in multi})
print("workers seen:", workers_seen, "main-process info:", get_worker_info())


class Records(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return {"x": torch.full((3,), float(i)), "len": 2 + i % 4, "name": f"rec{i}",
                "arr": np.arange(2, dtype=np.float32) * i}


batch = next(iter(DataLoader(Records(), batch_size=4)))
print("collated:", {k: (type(v).__name__, getattr(v, "dtype", None)) for k, v in batch.items()})
print("names:", batch["name"], "arr:", batch["arr"].tolist())
Point = collections.namedtuple("Point", "x y")
print("namedtuple collate:", default_collate([Point(1, 2.0), Point(3, 4.0)]))
print("default_convert:", default_convert([np.int64(3), np.ones(2, dtype=np.float32)]))


class GroupByLength(Sampler):
    def __init__(self, lengths):
        self.lengths = lengths

    def __iter__(self):
        return iter(sorted(range(len(self.lengths)), key=lambda i: (self.lengths[i], i)))

    def __len__(self):
        return len(self.lengths)


ds = Records()
lens = [ds[i]["len"] for i in range(len(ds))]
bs = BatchSampler(GroupByLength(lens), batch_size=3, drop_last=False)
print("length groups:", list(bs), "len", len(bs))


def pad_collate(items):
    n = max(it["len"] for it in items)
    x = torch.zeros(len(items), n)
    for r, it in enumerate(items):
        x[r, : it["len"]] = it["x"][0]
    return x, torch.tensor([it["len"] for it in items])


shapes = [tuple(x.shape) for x, _ in DataLoader(ds, batch_sampler=bs, collate_fn=pad_collate)]
print("padded batch shapes:", shapes)
g = torch.Generator().manual_seed(0)
train, val = random_split(ds, [0.8, 0.2], generator=g)
print("split sizes:", len(train), len(val), "disjoint cover:",
      sorted(train.indices + val.indices) == list(range(10)), type(train).__name__)
wrs = list(WeightedRandomSampler([0.0, 1.0, 0.0, 1.0], num_samples=8, replacement=True,
                                 generator=torch.Generator().manual_seed(1)))
print("weighted sampler only draws weighted items:", sorted(set(wrs)) in ([1, 3], [1], [3]))
cat = ConcatDataset([Subset(ds, [0, 1, 2]), Subset(ds, [7, 8])])
print("concat:", len(cat), cat.cumulative_sizes, cat[3]["name"], cat[-1]["name"])

emb = nn.EmbeddingBag(50, 16, mode="mean")
out = nn.Linear(16, 50)
rng = np.random.default_rng(0)
with torch.no_grad():
    for p in list(emb.parameters()) + list(out.parameters()):
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
opt = torch.optim.Adam(list(emb.parameters()) + list(out.parameters()), lr=0.05)
losses = []
for epoch in range(3):
    for b in DataLoader(stream, batch_size=8):  # deterministic order: one process
        logits = out(emb(b["input"]))
        loss = F.cross_entropy(logits, b["target"][:, -1])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {len(single)}")
