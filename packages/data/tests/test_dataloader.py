"""DataLoader semantics in the main process (num_workers=0) and argument checking."""

from __future__ import annotations

import ember
import pytest
from ember.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    TensorDataset,
    get_worker_info,
)


class Squares(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return {"x": ember.full((2,), float(i)), "y": i * i}


class Count(IterableDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


def test_map_style_batches_and_len():
    dl = DataLoader(Squares(10), batch_size=4)
    batches = list(dl)
    assert len(dl) == 3 and len(batches) == 3
    assert batches[0]["x"].shape == (4, 2) and batches[0]["y"].tolist() == [0, 1, 4, 9]
    assert batches[-1]["y"].tolist() == [64, 81]
    dl = DataLoader(Squares(10), batch_size=4, drop_last=True)
    assert len(dl) == 2 and len(list(dl)) == 2
    assert get_worker_info() is None


def test_shuffle_is_a_permutation_and_reproducible():
    def epoch(seed):
        g = ember.Generator()
        g.manual_seed(seed)
        return [y for b in DataLoader(Squares(20), batch_size=3, shuffle=True, generator=g)
                for y in b["y"].tolist()]

    a = epoch(1)
    assert sorted(a) == sorted(i * i for i in range(20)) and a == epoch(1) and a != epoch(2)


def test_no_auto_batching_and_custom_collate():
    items = list(DataLoader(Squares(3), batch_size=None))
    assert items[1]["y"] == 1 and isinstance(items[1]["x"], ember.Tensor)
    dl = DataLoader(Squares(5), batch_size=2, collate_fn=lambda b: [s["y"] for s in b])
    assert list(dl) == [[0, 1], [4, 9], [16]]
    bs = BatchSampler(SequentialSampler(range(5)), 3, False)
    assert [b["y"].tolist() for b in DataLoader(Squares(5), batch_sampler=bs)] == [[0, 1, 4],
                                                                                   [9, 16]]


def test_iterable_dataset_main_process():
    dl = DataLoader(Count(7), batch_size=3)
    assert [b.tolist() for b in dl] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(dl) == 3
    assert len(DataLoader(Count(7), batch_size=3, drop_last=True)) == 2
    assert [b.tolist() for b in DataLoader(Count(7), batch_size=3, drop_last=True)] == [
        [0, 1, 2], [3, 4, 5]]
    assert list(DataLoader(Count(3), batch_size=None)) == [0, 1, 2]


def test_tensor_dataset_loader():
    x, y = ember.arange(30.0).reshape(10, 3), ember.arange(10)
    out = list(DataLoader(TensorDataset(x, y), batch_size=4))
    assert out[0][0].shape == (4, 3) and out[2][1].tolist() == [8, 9]


def test_pin_memory_flag():
    b = next(iter(DataLoader(Squares(4), batch_size=2, pin_memory=True)))
    assert b["x"].shape == (2, 2)


def test_exception_in_main_process_propagates_with_index_note():
    class Bad(Squares):
        def __getitem__(self, i):
            if i == 3:
                raise ValueError("bad sample")
            return super().__getitem__(i)

    with pytest.raises(ValueError, match="bad sample") as ei:
        list(DataLoader(Bad(6), batch_size=2))
    notes = getattr(ei.value, "__notes__", [])
    assert not notes or "sample index 3" in notes[0]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=[[0]], shuffle=True), "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=[[0]], sampler=[0]), "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
        (dict(sampler=[0], shuffle=True), "sampler option is mutually exclusive with shuffle"),
        (dict(num_workers=-1), "num_workers option should be non-negative"),
        (dict(prefetch_factor=2), "prefetch_factor option could only be specified"),
        (dict(num_workers=1, prefetch_factor=0), "prefetch_factor"),
        (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
        (dict(timeout=-1), "timeout option should be non-negative"),
        (dict(batch_size=None, drop_last=True), "mutually exclusive with drop_last"),
        (dict(multiprocessing_context="fork"), "multiprocessing_context can only be used"),
        (dict(num_workers=1, multiprocessing_context="nope"), "valid start method"),
    ],
)
def test_contradictory_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DataLoader(Squares(4), **kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [(dict(shuffle=True), "expected unspecified shuffle"),
     (dict(sampler=[0]), "expected unspecified sampler"),
     (dict(batch_sampler=[[0]]), "expected unspecified batch_sampler")],
)
def test_iterable_dataset_rejects_samplers(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DataLoader(Count(4), **kwargs)


def test_frozen_attributes_and_context_type():
    dl = DataLoader(Squares(4))
    with pytest.raises(ValueError, match="batch_size attribute should not be set"):
        dl.batch_size = 3
    with pytest.raises(TypeError, match="multiprocessing_context"):
        DataLoader(Squares(4), num_workers=1, multiprocessing_context=3)


def test_matches_torch_batches():
    torch = pytest.importorskip("torch")
    tud = pytest.importorskip("torch.utils.data")

    class T(tud.Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return {"x": torch.full((2,), float(i)), "y": i * i}

    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)):
        ours = list(DataLoader(Squares(10), **kw))
        theirs = list(tud.DataLoader(T(), **kw))
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            assert o["x"].tolist() == t["x"].tolist()
            oy, ty = o["y"], t["y"]
            assert (oy.tolist() if isinstance(oy, ember.Tensor) else oy) == (
                ty.tolist() if isinstance(ty, torch.Tensor) else ty)
