"""The torch.utils.data toolbox as programs use it (the "Datasets & DataLoaders" tutorial and
the data-loading recipes, written anew): a map-style Dataset returning dicts, transforms as
callables, Subset / ConcatDataset / random_split with fractions, samplers (SequentialSampler,
RandomSampler with a generator, SubsetRandomSampler, WeightedRandomSampler, BatchSampler, a
custom Sampler), default_collate of dicts, tuples and namedtuples, a custom collate_fn with
padding, an IterableDataset sharded with get_worker_info, worker processes with a
worker_init_fn and a seeded generator, persistent_workers, drop_last, and
default_convert on NumPy data. Everything printed is deterministic and compared with torch.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember."""

import math
from collections import namedtuple

import numpy as np
import torch
from torch.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    get_worker_info,
    random_split,
)
from torch.utils.data.dataloader import default_collate

Point = namedtuple("Point", ["x", "y"])


class Squares(Dataset):
    def __init__(self, n, transform=None, target_transform=None):
        self.n = n
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        if idx < 0 or idx >= self.n:
            raise IndexError(idx)
        sample = {"x": torch.tensor([float(idx)]), "y": idx * idx, "name": f"item{idx}"}
        if self.transform:
            sample["x"] = self.transform(sample["x"])
        if self.target_transform:
            sample["y"] = self.target_transform(sample["y"])
        return sample


ds = Squares(10, transform=lambda t: t * 2, target_transform=lambda y: y + 1)
print("len", len(ds), "item 3:", ds[3])
loader = DataLoader(ds, batch_size=4)
for batch in loader:
    print({k: (v.tolist() if torch.is_tensor(v) else v) for k, v in batch.items()})
print("batches with drop_last:", len(DataLoader(ds, batch_size=4, drop_last=True)))

print("collate tuples:", default_collate([(1, 2.0), (3, 4.0)]))
print("collate namedtuples:", default_collate([Point(1, 2.0), Point(3, 4.0)]))
print("collate arrays:", default_collate([np.array([1, 2]), np.array([3, 4])]))
print("collate nested:", default_collate([{"a": [1, 2]}, {"a": [3, 4]}]))

sub = Subset(ds, [1, 3, 5])
print("subset:", [s["y"] for s in sub], "indices", sub.indices)
cat = ConcatDataset([Squares(3), Squares(2)])
print("concat:", len(cat), [cat[i]["y"] for i in range(len(cat))], cat.cumulative_sizes)
a, b, c = random_split(range(10), [0.5, 0.3, 0.2], generator=torch.Generator().manual_seed(42))
print("split sizes:", len(a), len(b), len(c), "disjoint:",
      sorted(list(a) + list(b) + list(c)) == list(range(10)))

print("sequential:", list(SequentialSampler(range(5))))
rs = RandomSampler(range(6), generator=torch.Generator().manual_seed(0))
print("random sampler covers all:", sorted(rs) == list(range(6)), "len", len(rs))
rsr = RandomSampler(range(6), replacement=True, num_samples=10,
                    generator=torch.Generator().manual_seed(0))
print("with replacement:", len(list(rsr)), all(0 <= i < 6 for i in rsr))
srs = SubsetRandomSampler([2, 4, 6], generator=torch.Generator().manual_seed(0))
print("subset random:", sorted(srs))
w = WeightedRandomSampler([0.0, 0.0, 1.0, 0.0], num_samples=5, replacement=True)
print("weighted:", list(w))
print("batch sampler:", list(BatchSampler(SequentialSampler(range(7)), batch_size=3,
                                          drop_last=False)))
print("batch sampler drop_last:", list(BatchSampler(range(7), 3, True)))


class EvenFirst(Sampler):
    def __init__(self, data_source):
        self.n = len(data_source)

    def __iter__(self):
        return iter(list(range(0, self.n, 2)) + list(range(1, self.n, 2)))

    def __len__(self):
        return self.n


print("custom sampler:", [int(b["y"][0]) for b in DataLoader(ds, sampler=EvenFirst(ds))][:6])
print("batch_sampler=:", [b["y"].tolist() for b in DataLoader(
    ds, batch_sampler=BatchSampler(EvenFirst(ds), 5, False))])


def pad_collate(batch):
    seqs = [torch.tensor(s) for s in batch]
    lengths = torch.tensor([len(s) for s in seqs])
    return torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=-1), lengths


seqs = [[1], [2, 3, 4], [5, 6]]
padded, lengths = next(iter(DataLoader(seqs, batch_size=3, collate_fn=pad_collate)))
print("padded:", padded.tolist(), lengths.tolist())


class Range(IterableDataset):
    def __init__(self, start, end):
        super().__init__()
        self.start, self.end = start, end

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            lo, hi = self.start, self.end
        else:
            per = int(math.ceil((self.end - self.start) / float(info.num_workers)))
            lo = self.start + info.id * per
            hi = min(lo + per, self.end)
        return iter(range(lo, hi))


it = Range(3, 10)
print("iterable, main process:", list(DataLoader(it, batch_size=None)))
print("iterable, 2 workers:", sorted(int(v) for v in DataLoader(it, num_workers=2)))


def seed_worker(worker_id):
    np.random.seed(1000 + worker_id)


tds = TensorDataset(torch.arange(12.0).view(6, 2), torch.arange(6))
wl = DataLoader(tds, batch_size=2, shuffle=True, num_workers=2, worker_init_fn=seed_worker,
                generator=torch.Generator().manual_seed(0), persistent_workers=True)
for epoch in range(2):
    seen = sorted(int(i) for _, y in wl for i in y)
    print(f"epoch {epoch} with workers: every sample once: {seen == list(range(6))}")
xs, ys = next(iter(DataLoader(tds, batch_size=3)))
print("tensor dataset batch:", xs.shape, ys.dtype, ys.tolist())
print("numpy items:", next(iter(DataLoader([np.float32(1.5), np.float32(2.5)], batch_size=2))))
