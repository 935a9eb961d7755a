"""Hostile input, round 6 (ember.data part): a StopIteration raised by a map-style dataset's
``__getitem__``/``__getitems__`` or by a ``collate_fn``.

The loader's ``__next__`` re-raised it, and Python took it as the end of the epoch: a dataset of
1000 samples whose ``__getitem__`` raised StopIteration (a stray ``next()`` on an exhausted
iterator inside it) gave an epoch of zero batches without a word, in the main process and from
the workers alike (PyTorch does the same). As PEP 479 does for generators, it now becomes a
RuntimeError that names where it came from. An IterableDataset still ends its epoch with
StopIteration as before. The rest of round 6 is in packages/core/tests/test_hostile_input_round6.py.
"""

from __future__ import annotations

import pytest
from ember.data import DataLoader, IterableDataset


class _StopsEarly:
    """A map-style dataset whose __getitem__ raises StopIteration from sample 2 on."""

    def __len__(self) -> int:
        return 5

    def __getitem__(self, i: int) -> int:
        if i >= 2:
            next(iter([]))
        return i


class _StopsInGetitems(_StopsEarly):
    def __getitems__(self, indices: list) -> list:
        raise StopIteration


class _Count(IterableDataset):
    def __iter__(self):
        return iter(range(5))


def _stop_collate(batch):
    raise StopIteration


@pytest.mark.parametrize("workers", [0, 1])
def test_stop_iteration_from_getitem_is_an_error_not_the_end_of_the_epoch(workers):
    loader = DataLoader(_StopsEarly(), batch_size=2, num_workers=workers)
    it = iter(loader)
    assert next(it).tolist() == [0, 1]  # the samples before it still come
    with pytest.raises(RuntimeError, match="the dataset's __getitem__ raised StopIteration") as e:
        next(it)
    if workers:
        assert "sample index 2" in str(e.value)
    else:
        assert any("sample index 2" in n for n in getattr(e.value, "__notes__", []))


def test_stop_iteration_from_getitems_or_unbatched_getitem_is_an_error():
    with pytest.raises(RuntimeError, match="the dataset's __getitems__ raised StopIteration"):
        list(DataLoader(_StopsInGetitems(), batch_size=2))
    with pytest.raises(RuntimeError, match="the dataset's __getitem__ raised StopIteration"):
        list(DataLoader(_StopsEarly(), batch_size=None))


@pytest.mark.parametrize("workers", [0, 1])
def test_stop_iteration_from_collate_fn_is_an_error(workers):
    for ds in (list(range(4)), _Count()):
        with pytest.raises(RuntimeError, match="the collate_fn raised StopIteration"):
            list(DataLoader(ds, batch_size=2, collate_fn=_stop_collate, num_workers=workers))


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_datasets_and_index_errors_still_end_or_fail_as_before(workers):
    batches = list(DataLoader(_Count(), batch_size=2, num_workers=workers))
    flat = sorted(v for b in batches for v in b.tolist())
    assert flat == ([0, 0, 1, 1, 2, 2, 3, 3, 4, 4] if workers == 2 else [0, 1, 2, 3, 4])
    assert [b.tolist() for b in DataLoader(list(range(5)), batch_size=2)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(IndexError):  # a sampler index past the dataset is the dataset's error
        list(DataLoader(list(range(3)), sampler=[0, 7]))
