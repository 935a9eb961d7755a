"""Forked workers do not copy a dataset's large Python lists (reference-count and GC writes to
copy-on-write pages): measured with the workers' Private_Dirty memory, plus CompactList itself."""

from __future__ import annotations

import contextlib
import gc
import pickle
import sys

import pytest
from ember.data import CompactList, ConcatDataset, DataLoader, Dataset, Subset, _memory

MiB = 2**20
linux_fork = pytest.mark.skipif(sys.platform != "linux", reason="fork, /proc/<pid>/smaps_rollup")


def private_dirty(pid: int | str = "self") -> int:
    """Bytes of memory only this process has written (copies of shared pages included)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Private_Dirty in smaps_rollup")


class Paths(Dataset):
    """The classic case: a Python list of file names, read by index."""

    def __init__(self, paths: list) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> int:
        return len(self.paths[i])

    def __getitems__(self, indices: list) -> list:
        paths = self.paths
        return [len(paths[i]) for i in indices]


def epoch_growth(dl: DataLoader, expected_total: int) -> list[int]:
    """Private_Dirty growth of each (persistent) worker over one epoch after its first batch."""
    it = iter(dl)
    total = next(it)
    pids = [w.pid for w in it._pool.workers]
    before = [private_dirty(p) for p in pids]
    total += sum(it)
    after = [private_dirty(p) for p in pids]
    assert total == expected_total  # every sample was read, once
    it._shutdown_workers()
    return [a - b for a, b in zip(after, before)]


@linux_fork
def test_workers_do_not_copy_a_large_list_of_strings(no_shm_leak):
    n = 1_000_000
    paths = [f"/data/train/{i // 1000:04d}/{i:08d}.jpg" for i in range(n)]
    element_bytes = sum(map(sys.getsizeof, paths[:1000])) * (n // 1000)  # ~75 MiB
    expected = sum(map(len, paths))
    # Shuffled: each worker reads half of the elements, spread over every page. (The main process
    # draws the permutation after forking: forked later, a worker would end up owning a stale
    # copy of each page of it that the main process touches, 76 MiB here.)
    kw = dict(batch_size=4096, shuffle=True, num_workers=2, persistent_workers=True,
              collate_fn=sum, multiprocessing_context="fork")
    dl = DataLoader(Paths(paths), **kw)
    growth = epoch_growth(dl, expected)
    # Reading the elements copies nothing but the loader's own working memory.
    assert max(growth) < 16 * MiB, [g // MiB for g in growth]

    # The same epoch with packing turned off: each worker copies the pages of the elements it
    # reads (what PyTorch's workers do), which shows that the measurement above means something.
    plain = DataLoader(Paths(paths), **kw)
    plain.compact_lists_min_len = None
    plain_growth = epoch_growth(plain, expected)
    assert min(plain_growth) > element_bytes // 3, [g // MiB for g in plain_growth]


class Records(Dataset):
    """A list of dicts (mutable, so not packed) that the dataset never reads; the worker runs a
    full garbage collection and reports how much memory that wrote."""

    def __init__(self, n: int) -> None:
        self.records = [{"file": f"{i}.jpg", "boxes": [[i, i + 1]]} for i in range(n)]

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> int:
        before = private_dirty()
        gc.collect()
        return private_dirty() - before


@linux_fork
def test_gc_of_a_worker_does_not_touch_the_inherited_heap(monkeypatch, no_shm_leak):
    ds = Records(200_000)  # ~70 MiB of GC-tracked containers
    kw = dict(batch_size=None, num_workers=1, multiprocessing_context="fork")
    with pytest.warns(UserWarning, match=r"Records\.records is a list of 200,000 values"):
        [frozen] = list(DataLoader(ds, **kw))
    assert frozen < 8 * MiB, frozen // MiB
    # Without gc.freeze() before the fork, the collection writes into every object's header.
    monkeypatch.setattr(_memory, "frozen_gc", contextlib.nullcontext)
    with pytest.warns(UserWarning):
        [unfrozen] = list(DataLoader(ds, **kw))
    assert unfrozen > 32 * MiB, unfrozen // MiB
    assert gc.get_freeze_count() == 0  # the parent's objects were unfrozen after the fork


def test_compact_list_kinds_round_trip():
    cases = {
        "q": [0, -1, 2**63 - 1, -(2**63), 12345],
        "d": [0.5, -0.0, float("inf"), 1e-300],
        "str": ["", "a", "img_001.jpg"],
        "utf8": ["é", "", "日本", "x"],
        "bytes": [b"", b"\x00\xff", b"abc"],
        "pickle": [(1, "a"), None, True, 2**70, ("x", (2.5, b"y")), "\ud800"],
    }
    for kind, items in cases.items():
        c = CompactList(items)
        assert c._kind == kind or kind == "pickle", (kind, c._kind)
        assert list(c) == items and len(c) == len(items) and c == items
        assert [type(x) for x in c] == [type(x) for x in items]
        assert c[-1] == items[-1] and c[1:3] == items[1:3] and c[::-1] == items[::-1]
        again = pickle.loads(pickle.dumps(c))
        assert isinstance(again, CompactList) and again == c
    assert CompactList(["\ud800", "a"])._kind == "pickle"  # a lone surrogate has no UTF-8
    assert CompactList([True, 1])[0] is True  # bools are not packed as ints
    assert CompactList(x * 2 for x in range(3)) == [0, 2, 4]
    assert CompactList([]) == [] and 4 in CompactList([3, 4]) and CompactList([3, 4]).index(4) == 1


def test_compact_list_errors_and_copies():
    c = CompactList([{"a": [1]}, {"a": [2]}])  # explicit: any picklable element
    first = c[0]
    first["a"].append(9)
    assert c[0] == {"a": [1]}  # every access decodes a fresh copy
    with pytest.raises(IndexError, match="CompactList index 2 out of range for length 2"):
        c[2]
    with pytest.raises(TypeError, match="indices must be integers or slices, not str"):
        c["a"]
    with pytest.raises(TypeError, match="unhashable"):
        hash(c)
    assert repr(CompactList(range(5))) == "CompactList([0, 1, 2, ...], len=5)"


def test_compact_list_mutates_like_a_list():
    # A worker's dataset may fill a cache list ([None] * n) or edit its list: same results as a
    # list; assigned elements are kept aside, a change of length or order unpacks it.
    ref, c = [None] * 6, CompactList([None] * 6)
    for x in (ref, c):
        x[2] = "two"
        x[-1] = [6]
    assert c == ref and c._kind == "pickle" and c.nbytes() > 0
    assert pickle.loads(pickle.dumps(c)) == ref
    steps = [lambda x: x.append(7), lambda x: x.extend([8, 9]), lambda x: x.insert(0, -1),
             lambda x: x.pop(), lambda x: x.remove(None), lambda x: x.__delitem__(slice(0, 1)),
             lambda x: x.__setitem__(slice(1, 2), ["s", "t"]), lambda x: x.reverse(),
             lambda x: x.__iadd__([5])]
    for step in steps:
        assert step(ref) == step(c)
        assert c == ref and len(c) == len(ref)
    nums, cn = [3, 1, 2], CompactList([3, 1, 2])
    nums.sort(reverse=True)
    cn.sort(reverse=True)
    assert cn == nums and cn + [0] == nums + [0] and [0] + cn == [0] + nums
    assert cn.copy() == nums and type(cn.copy()) is list
    cn.clear()
    assert cn == [] and len(cn) == 0


class Holder(Dataset):
    def __init__(self, **attrs) -> None:
        self.__dict__.update(attrs)

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> int:
        return i


def test_plan_finds_large_immutable_lists_in_wrapped_datasets():
    big = list(range(100))
    inner = Holder(ids=big, names=tuple(map(str, big)), small=[1, 2], rows=[[i] for i in big])
    ds = Subset(ConcatDataset([inner, Holder(ids=big)]), list(range(100)))
    with pytest.warns(UserWarning, match=r"Holder\.rows is a list of 100 values.*list"):
        plan = _memory.plan_compaction(ds, min_len=100)
    found = sorted((type(o).__name__, name) for o, name, _ in plan)
    assert found == [("Holder", "ids"), ("Holder", "ids"), ("Holder", "names"),
                     ("Subset", "indices")]
    packed = {id(c) for o, name, c in plan if name == "ids"}
    assert len(packed) == 1  # one list held twice is packed once
    # apply_compaction (what a forked worker runs) swaps the attributes to the packed lists.
    twin = Holder(ids=list(range(100)))
    _memory.apply_compaction(_memory.plan_compaction(twin, min_len=100))
    assert isinstance(twin.ids, CompactList) and twin.ids == list(range(100))
