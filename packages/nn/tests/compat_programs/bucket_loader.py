"""Data loading for variable-length sequences, in the style of the public speech / NLP training
scripts: a length-bucketing batch sampler (a Sampler yielding lists of indices, handed to
DataLoader as batch_sampler), a BatchSampler over a custom Sampler with drop_last, a collate_fn
returning a custom batch object (padded tensor, lengths, a mask, sorted by length for
pack_padded_sequence), DistributedSampler shards (num_replicas / rank, padding to equal shards,
drop_last, set_epoch changing the order), SequentialSampler / SubsetRandomSampler with a seeded
generator (same seed, same order), StackDataset and TensorDataset, ChainDataset over
IterableDatasets, worker processes with worker_init_fn seeding NumPy per worker and
get_worker_info sharding an IterableDataset (no sample duplicated), a seeded DataLoader
generator (same seed, same batches; a different seed, another order), and an LSTM classifier
trained over the bucketed batches with pack_padded_sequence. Everything printed is
deterministic and compared with torch. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss>
<last loss> <accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import (
    BatchSampler,
    ChainDataset,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    Sampler,
    SequentialSampler,
    StackDataset,
    SubsetRandomSampler,
    TensorDataset,
    get_worker_info,
)

rng = np.random.default_rng(0)


class Sequences(Dataset):
    def __init__(self, n):
        self.lengths = rng.integers(3, 20, n)
        self.items = []
        for n_ in self.lengths:
            x = rng.normal(size=(n_, 2)).astype(np.float32)
            self.items.append((torch.from_numpy(x), int(x[:, 0].sum() > 0)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class BucketBatchSampler(Sampler):
    """Sorts indices by length within chunks and yields batches of similar lengths."""

    def __init__(self, lengths, batch_size, seed):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def __iter__(self):
        r = np.random.default_rng(self.seed + self.epoch)
        order = r.permutation(len(self.lengths))
        chunks = [order[i:i + 4 * self.batch_size] for i in range(0, len(order), 4 * self.batch_size)]
        batches = []
        for c in chunks:
            c = sorted(c.tolist(), key=lambda i: self.lengths[i])
            batches += [c[i:i + self.batch_size] for i in range(0, len(c), self.batch_size)]
        for j in r.permutation(len(batches)):
            yield batches[j]

    def __len__(self):
        return sum(math.ceil(len(c) / self.batch_size)
                   for c in np.array_split(np.arange(len(self.lengths)),
                                           range(4 * self.batch_size, len(self.lengths), 4 * self.batch_size)))


class Batch:
    def __init__(self, x, lengths, y):
        self.x, self.lengths, self.y = x, lengths, y
        self.mask = torch.arange(x.shape[1])[None] < lengths[:, None]

    def pin_memory(self):
        return self


def collate(items):
    items = sorted(items, key=lambda it: -len(it[0]))
    xs, ys = zip(*items)
    return Batch(pad_sequence(xs, batch_first=True), torch.tensor([len(x) for x in xs]),
                 torch.tensor(ys))


ds = Sequences(120)
bs = BucketBatchSampler(ds.lengths, 8, seed=1)
loader = DataLoader(ds, batch_sampler=bs, collate_fn=collate)
print("batches", len(loader), "first", [tuple(b.x.shape) for b in list(loader)[:3]])
spread = [int(b.lengths.max() - b.lengths.min()) for b in loader]
print("max length spread in a batch", max(spread), "mask sums ok",
      all(int(b.mask.sum()) == int(b.lengths.sum()) for b in loader))


class EveryOther(Sampler):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(0, self.n, 2))

    def __len__(self):
        return (self.n + 1) // 2


print("BatchSampler", list(BatchSampler(EveryOther(11), 4, drop_last=True)),
      list(BatchSampler(EveryOther(11), 4, drop_last=False))[-1])
shards = [list(DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
print("distributed shards", shards)
print("distributed drop_last", [list(DistributedSampler(range(10), num_replicas=3, rank=r,
                                                        shuffle=False, drop_last=True)) for r in range(3)])
dsamp = DistributedSampler(range(12), num_replicas=2, rank=0, shuffle=True, seed=3)
e0 = list(dsamp)
dsamp.set_epoch(1)
e1 = list(dsamp)
both = sorted(list(DistributedSampler(range(12), num_replicas=2, rank=0, shuffle=True, seed=3))
              + list(DistributedSampler(range(12), num_replicas=2, rank=1, shuffle=True, seed=3)))
print("shuffled shard: epochs differ", e0 != e1, "shards cover all", both == list(range(12)),
      "len", len(dsamp))
print("sequential", list(SequentialSampler(range(5))))
g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
s1 = list(SubsetRandomSampler([3, 5, 7, 9], generator=g1))
s2 = list(SubsetRandomSampler([3, 5, 7, 9], generator=g2))
print("subset random: same seed same order", s1 == s2, "a permutation", sorted(s1) == [3, 5, 7, 9])

st = StackDataset(TensorDataset(torch.arange(6.0)), torch.arange(6) * 10)
print("StackDataset", len(st), st[2])
st_named = StackDataset(a=torch.arange(3), b=torch.arange(3) + 100)
print("named StackDataset", st_named[1], next(iter(DataLoader(st_named, batch_size=3))))


class Stream(IterableDataset):
    def __init__(self, start, end):
        self.start, self.end = start, end

    def __iter__(self):
        info = get_worker_info()
        lo, hi = self.start, self.end
        if info is not None:
            per = math.ceil((hi - lo) / info.num_workers)
            lo = lo + info.id * per
            hi = min(hi, lo + per)
        return iter(range(lo, hi))


print("ChainDataset", list(ChainDataset([Stream(0, 3), Stream(10, 13)])))


def seed_worker(worker_id):
    np.random.seed(torch.initial_seed() % 2 ** 32)


got = sorted(int(v) for b in DataLoader(Stream(0, 20), batch_size=3, num_workers=2,
                                        worker_init_fn=seed_worker) for v in b)
print("2 workers, every sample once:", got == list(range(20)))
tensors = TensorDataset(torch.arange(16.0).reshape(8, 2), torch.arange(8))


def dl(seed):
    return [b[1].tolist() for b in DataLoader(tensors, batch_size=4, shuffle=True,
                                              generator=torch.Generator().manual_seed(seed))]


print("seeded loader: same seed same batches", dl(5) == dl(5), "other seed differs", dl(5) != dl(6))
print("worker loader with generator matches in-process order:",
      [b[1].tolist() for b in DataLoader(tensors, batch_size=4, shuffle=True, num_workers=2,
                                         generator=torch.Generator().manual_seed(5))] == dl(5))


class LSTMClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(2, 16, batch_first=True)
        self.out = nn.Linear(16, 2)

    def forward(self, batch):
        packed = pack_padded_sequence(batch.x, batch.lengths, batch_first=True)
        _, (h, _) = self.lstm(packed)
        return self.out(h[-1])


model = LSTMClassifier()
r = np.random.default_rng(2)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(r.uniform(-0.25, 0.25, tuple(p.shape)).astype(np.float32)))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for epoch in range(4):
    bs.epoch = epoch
    for batch in loader:
        loss = F.cross_entropy(model(batch), batch.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(f"epoch {epoch} loss {np.mean(losses[-len(loader):]):.5f}")
with torch.no_grad():
    correct = sum(int((model(b).argmax(-1) == b.y).sum()) for b in loader)
acc = correct / len(ds)
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-len(loader):]):.5f} {acc:.5f}")
