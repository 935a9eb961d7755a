"""Hostile input, round 9 (data part): an IterableDataset that yields more than its length.

An ``IterableDataset`` that does not split its samples between the DataLoader's workers (no
``get_worker_info()`` in ``__iter__``) is iterated in full by every worker, so with two workers
every sample comes twice: the epoch silently trains on duplicates. PyTorch warns ("Length of
IterableDataset ... was reported to be N (when accessing len(dataloader)), but M samples have
been fetched") once ``len(dataloader)`` was asked and more batches come out; ember said nothing.
It now warns the same way (once per epoch, naming the dataset, the reported length and the
count, and how to split the samples). A correctly split dataset does not warn, also when each
worker ends on its own partial batch (up to ``num_workers - 1`` batches more than ``len()``).

The rest of round 9: packages/core/tests/test_hostile_input_round9.py and
packages/nn/tests/test_nn_hostile_round9.py.
"""

import warnings

import ember
import pytest
from ember.utils.data import DataLoader, IterableDataset, get_worker_info


class Unsplit(IterableDataset):
    """Every worker yields all six samples."""

    def __iter__(self):
        return iter(range(6))

    def __len__(self):
        return 6


class Split(Unsplit):
    """Each worker yields its own share."""

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(6))
        return iter(range(info.id, 6, info.num_workers))


def _epoch(ds, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dl = DataLoader(ds, **kw)
        n = len(dl)
        batches = [b.tolist() if hasattr(b, "tolist") else b for b in dl]
    return n, batches, [str(x.message) for x in w if "Length of IterableDataset" in str(x.message)]


def test_an_unsplit_dataset_with_workers_warns_about_the_extra_samples():
    n, batches, warned = _epoch(Unsplit(), batch_size=None, num_workers=2)
    assert n == 6
    assert sorted(batches) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]  # every sample twice
    assert len(warned) == 1  # once per epoch, not once per extra sample
    assert ("was reported to be 6 (when accessing len(dataloader)), but 7 samples have been "
            "fetched") in warned[0]
    assert "Unsplit" in warned[0] and "get_worker_info()" in warned[0]


def test_batches_are_counted_against_the_batch_length():
    n, batches, warned = _epoch(Unsplit(), batch_size=2, num_workers=2)
    assert n == 3
    assert sorted(x for b in batches for x in b) == sorted(list(range(6)) * 2)
    # a correct split can give one partial batch per worker: 3 + 1 batches, so the 5th warns
    assert len(warned) == 1
    assert "was reported to be 3 (when accessing len(dataloader)), but 5 batches" in warned[0]


def test_a_split_dataset_does_not_warn():
    for kw in ({"batch_size": None, "num_workers": 2}, {"batch_size": 2, "num_workers": 2},
               {"batch_size": 4, "num_workers": 2, "drop_last": True}, {"batch_size": 2}):
        n, batches, warned = _epoch(Split(), **kw)
        assert warned == [], kw
    # each worker ends on its own partial batch: 4 batches for len() == 3, and no warning
    n, batches, warned = _epoch(Split(), batch_size=2, num_workers=2)
    assert (n, sorted(x for b in batches for x in b), warned) == (3, list(range(6)), [])


def test_no_len_asked_no_warning_and_a_short_len_warns_without_workers():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert len(list(DataLoader(Unsplit(), batch_size=None, num_workers=2))) == 12
    assert not [x for x in w if "Length of IterableDataset" in str(x.message)]

    class Short(Unsplit):
        def __len__(self):
            return 4

    n, batches, warned = _epoch(Short(), batch_size=None)
    assert (n, batches) == (4, [0, 1, 2, 3, 4, 5])
    assert len(warned) == 1 and "but 5 samples have been fetched. " in warned[0]
    assert "multiprocessing" not in warned[0]


def test_persistent_workers_warn_in_each_epoch():
    dl = DataLoader(Unsplit(), batch_size=None, num_workers=2, persistent_workers=True)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert len(dl) == 6
            assert sorted(int(b) for b in dl) == sorted(list(range(6)) * 2)
        assert len([x for x in w if "Length of IterableDataset" in str(x.message)]) == 1
    del dl
    assert ember.ones(1).item() == 1.0


def test_torch_warns_for_the_unsplit_dataset():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TDataLoader
    from torch.utils.data import IterableDataset as TIterableDataset

    class TUnsplit(TIterableDataset):
        def __iter__(self):
            return iter(range(6))

        def __len__(self):
            return 6

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dl = TDataLoader(TUnsplit(), batch_size=None, num_workers=2)
        assert len(dl) == 6
        assert sorted(int(b) for b in dl) == sorted(list(range(6)) * 2)
    msgs = [str(x.message) for x in w if "Length of IterableDataset" in str(x.message)]
    assert msgs and "was reported to be 6(when accessing len(dataloader)), but 7 samples" in msgs[0]
    assert torch.ones(1).item() == 1.0
