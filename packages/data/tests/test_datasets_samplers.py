"""Datasets and samplers: PyTorch's semantics; orders are compared structurally with torch's
(same permutation in -> same indices out), since the random generators differ."""

from __future__ import annotations

import math
import warnings

import ember
import pytest
from ember.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)


def gen(seed: int) -> ember.Generator:
    g = ember.Generator()
    g.manual_seed(seed)
    return g


class Squares(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i


class Stream(IterableDataset):
    def __init__(self, items: list) -> None:
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def test_tensor_dataset():
    x, y = ember.arange(12.0).reshape(4, 3), ember.arange(4)
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    a, b = ds[2]
    assert a.tolist() == [6.0, 7.0, 8.0] and b.item() == 2
    with pytest.raises(AssertionError, match="Size mismatch"):
        TensorDataset(x, ember.arange(5))


def test_concat_dataset_indexing_and_errors():
    ds = ConcatDataset([Squares(3), Squares(2)])
    assert len(ds) == 5 and ds.cumulative_sizes == [3, 5]
    assert [ds[i] for i in range(5)] == [0, 1, 4, 0, 1]
    assert ds[-1] == 1 and ds[-5] == 0
    with pytest.raises(ValueError, match="absolute value of index"):
        ds[-6]
    with pytest.raises(IndexError):
        ds[5]
    assert len(Squares(2) + Squares(4)) == 6
    with pytest.raises(AssertionError, match="empty"):
        ConcatDataset([])
    with pytest.raises(AssertionError, match="IterableDataset"):
        ConcatDataset([Stream([1])])


def test_chain_dataset():
    ds = ChainDataset([Stream([1, 2]), Stream([3])])
    assert list(ds) == [1, 2, 3] and len(ds) == 3
    assert list(Stream([1]) + Stream([2])) == [1, 2]
    with pytest.raises(AssertionError, match="IterableDataset"):
        list(ChainDataset([Squares(2)]))


def test_stack_dataset_tuple_and_dict():
    t = StackDataset(Squares(3), Squares(3))
    assert t[2] == (4, 4) and len(t) == 3
    assert t.__getitems__([0, 1]) == [(0, 0), (1, 1)]
    d = StackDataset(a=Squares(2), b=Squares(2))
    assert d[1] == {"a": 1, "b": 1}
    assert d.__getitems__([0, 1]) == [{"a": 0, "b": 0}, {"a": 1, "b": 1}]
    with pytest.raises(ValueError, match="Size mismatch"):
        StackDataset(Squares(2), Squares(3))
    with pytest.raises(ValueError, match="both types"):
        StackDataset(Squares(2), b=Squares(2))


def test_subset():
    s = Subset(Squares(10), [9, 2, 5])
    assert len(s) == 3 and s[0] == 81 and s.__getitems__([1, 2]) == [4, 25]


def test_random_split_lengths_fractions_and_determinism():
    a, b = random_split(Squares(10), [3, 7], generator=gen(0))
    assert len(a) == 3 and len(b) == 7
    assert sorted(a.indices + b.indices) == list(range(10))
    a2, _ = random_split(Squares(10), [3, 7], generator=gen(0))
    assert a.indices == a2.indices
    # Fractions: floor, then the remainder round-robin (PyTorch's rule): 10 * [.33,.33,.34]
    parts = random_split(Squares(10), [0.33, 0.33, 0.34], generator=gen(1))
    assert [len(p) for p in parts] == [4, 3, 3]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(Squares(10), [3, 3])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        random_split(Squares(2), [0.9, 0.1], generator=gen(0))
    assert any("Length of split at index 1 is 0" in str(x.message) for x in w)
    # The split uses exactly randperm(n, generator): same generator state -> same indices.
    a, b = random_split(Squares(6), [2, 4], generator=gen(5))
    assert a.indices + b.indices == ember.randperm(6, generator=gen(5)).tolist()


def test_sequential_and_random_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    s = RandomSampler(range(10), generator=gen(3))
    order = list(s)
    assert sorted(order) == list(range(10)) and len(s) == 10
    assert list(RandomSampler(range(10), generator=gen(3))) == order  # seeded: reproducible
    # num_samples > n without replacement chains permutations of the same generator.
    g = gen(4)
    expect = ember.randperm(5, generator=g).tolist() + ember.randperm(5, generator=g).tolist()[:2]
    assert list(RandomSampler(range(5), num_samples=7, generator=gen(4))) == expect
    r = list(RandomSampler(range(3), replacement=True, num_samples=100, generator=gen(0)))
    assert len(r) == 100 and set(r) <= {0, 1, 2}
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler([])


def test_random_sampler_without_generator_uses_global_seed():
    ember.manual_seed(11)
    a = list(RandomSampler(range(20)))
    ember.manual_seed(11)
    assert list(RandomSampler(range(20))) == a


def test_subset_random_and_weighted_samplers():
    idx = [10, 20, 30, 40]
    out = list(SubsetRandomSampler(idx, generator=gen(0)))
    assert sorted(out) == idx
    perm = ember.randperm(4, generator=gen(0)).tolist()
    assert out == [idx[i] for i in perm]
    w = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 200, generator=gen(0))
    draws = list(w)
    assert len(w) == 200 and set(draws) <= {1, 3} and draws.count(3) > draws.count(1)
    nr = list(WeightedRandomSampler([1.0, 1.0, 1.0], 3, replacement=False, generator=gen(1)))
    assert sorted(nr) == [0, 1, 2]
    with pytest.raises(ValueError, match="weights should be a 1d sequence"):
        WeightedRandomSampler([[1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="num_samples"):
        WeightedRandomSampler([1.0], -1)
    with pytest.raises(ValueError, match="replacement"):
        WeightedRandomSampler([1.0], 1, replacement="yes")


def test_batch_sampler():
    s = SequentialSampler(range(10))
    assert list(BatchSampler(s, 4, False)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(BatchSampler(s, 4, True)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(BatchSampler(s, 4, False)) == 3 and len(BatchSampler(s, 4, True)) == 2
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="batch_size should be a positive integer"):
            BatchSampler(s, bad, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean"):
        BatchSampler(s, 2, 1)


def test_batch_sampler_matches_torch():
    tud = pytest.importorskip("torch.utils.data")
    for n, bs, dl in [(10, 3, False), (10, 3, True), (9, 3, True), (1, 5, False)]:
        ours = list(BatchSampler(SequentialSampler(range(n)), bs, dl))
        theirs = list(tud.BatchSampler(tud.SequentialSampler(range(n)), bs, dl))
        assert ours == theirs
        assert len(BatchSampler(range(n), bs, dl)) == len(tud.BatchSampler(range(n), bs, dl))


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (12, 4, False),
                                                  (2, 5, False), (11, 4, True)])
def test_distributed_sampler_structure_matches_torch(n, replicas, drop_last):
    tud = pytest.importorskip("torch.utils.data")
    counts = set()
    for rank in range(replicas):
        ours_seq = list(DistributedSampler(range(n), replicas, rank, shuffle=False,
                                           drop_last=drop_last))
        torch_seq = list(tud.DistributedSampler(range(n), replicas, rank, shuffle=False,
                                                drop_last=drop_last))
        assert ours_seq == torch_seq  # padding / striding rule, no randomness
        # Shuffled: the same rule applied to our permutation (seed + epoch).
        s = DistributedSampler(range(n), replicas, rank, shuffle=True, seed=7, drop_last=drop_last)
        s.set_epoch(3)
        perm = ember.randperm(n, generator=gen(10)).tolist()
        assert list(s) == [perm[i] for i in torch_seq]
        assert len(s) == len(torch_seq)
        counts.add(len(list(s)))
    assert len(counts) == 1  # every rank gets the same number of samples


def test_distributed_sampler_epochs_and_errors():
    s = DistributedSampler(range(20), num_replicas=2, rank=0, seed=1)
    e0 = list(s)
    assert list(s) == e0
    s.set_epoch(1)
    assert list(s) != e0
    with pytest.raises(ValueError, match="Invalid rank 2"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="Invalid rank -1"):
        DistributedSampler(range(4), num_replicas=2, rank=-1)
    with pytest.raises(ValueError, match="default process group is not initialized"):
        DistributedSampler(range(4))  # no process group (PyTorch: ValueError too)
    # Ranks partition the padded epoch; without drop_last every index is covered.
    parts = [list(DistributedSampler(range(10), 4, r, seed=3)) for r in range(4)]
    assert sorted(set(sum(parts, []))) == list(range(10))
    assert all(len(p) == math.ceil(10 / 4) for p in parts)


def test_random_and_weighted_samplers_draw_like_torch():
    # PyTorch's algorithms, replayed on ember's generator: with replacement, randint in chunks of
    # 32; weighted, one multinomial call.
    g = gen(6)
    chunks = [ember.randint(7, (32,), generator=g).tolist() for _ in range(2)]
    expect = chunks[0] + chunks[1] + ember.randint(7, (6,), generator=g).tolist()
    assert list(RandomSampler(range(7), replacement=True, num_samples=70, generator=gen(6))) == (
        expect)
    w = ember.tensor([0.5, 2.0, 1.0])
    for n, replacement in ((3, False), (9, True)):
        expect = ember.multinomial(w, n, replacement, generator=gen(2)).tolist()
        assert list(WeightedRandomSampler(w, n, replacement, generator=gen(2))) == expect


def test_loader_shuffle_consumes_the_generator_like_torch():
    # PyTorch's iterator draws the workers' base seed from the loader's generator first, then
    # the sampler draws its permutation from the same generator.
    from ember.data import DataLoader

    # torch's seed draw takes two 32-bit MT19937 outputs; ember's generator is moved as far
    # (one counter per torch draw), so the permutation that follows is torch's.
    order = [int(i) for b in DataLoader(Squares(12), batch_size=5, shuffle=True,
                                       generator=gen(9)) for i in b.tolist()]
    torch_order = [6, 2, 4, 8, 7, 3, 1, 5, 10, 0, 11, 9]  # torch 2.13, the same loader
    assert order == [i * i for i in torch_order]
    g = gen(9)
    ember.empty((), dtype=ember.int64).random_(generator=g)
    ember.empty((), dtype=ember.int64).random_(generator=g)
    assert order == [i * i for i in ember.randperm(12, generator=g).tolist()]
