"""Hostile input, round 3, data loading: collate errors that name the field and the sample,
wrong generator / num_workers types, and DataLoaders that stay usable after a worker or the
loop itself raised (KeyboardInterrupt included). Every multi-process case has a timeout."""

from __future__ import annotations

import ember
import pytest
from ember.utils.data import DataLoader, Dataset, RandomSampler, default_collate


class Items(Dataset):
    def __init__(self, n: int = 8, bad: int | None = None) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i == self.bad:
            raise ValueError(f"bad item {i}")
        return ember.tensor([float(i)])


@pytest.mark.parametrize("batch, fragment", [
    ([1.0, ember.zeros(2)], "field sample is a number in sample 0 but a Tensor in sample 1"),
    ([ember.zeros(2), 1.0], "field sample is a Tensor in sample 0 but a float in sample 1"),
    ([{"x": 1}, {"x": "a"}], "field sample['x'] is a number in sample 0 but a str in sample 1"),
    ([(ember.ones(1), 2), (ember.ones(1), None)],
     "field sample[1] is a number in sample 0 but a NoneType in sample 1"),
])
def test_default_collate_names_the_field_whose_samples_differ(batch, fragment):
    # Before: "tensor(): expected a number, got ember._C.Tensor" or an AttributeError
    # ('float' object has no attribute 'shape') from inside the stacking.
    with pytest.raises(TypeError, match="default_collate: the samples' ") as info:
        default_collate(batch)
    assert fragment in str(info.value)


def test_default_collate_still_mixes_ints_and_floats():
    assert default_collate([1, 2.5]).tolist() == [1.0, 2.5]
    assert default_collate([[1, 2.0], [3, 4]])[1].tolist() == [2.0, 4.0]


@pytest.mark.parametrize("make", [
    lambda g: DataLoader(Items(), shuffle=True, generator=g),
    lambda g: RandomSampler(range(4), generator=g),
])
@pytest.mark.parametrize("g", [5, "seed", ember.tensor(3)])
def test_generator_must_be_a_generator(make, g):
    # Before: random_()'s whole binding signature, at the first iteration
    with pytest.raises(TypeError, match=r"(DataLoader|RandomSampler): generator must be an "
                                        r"ember.Generator \(or None\), got"):
        make(g)


def test_seeded_generators_give_the_same_order():
    def order(seed):
        g = ember.Generator().manual_seed(seed)
        return [b.tolist() for b in DataLoader(Items(), shuffle=True, generator=g, batch_size=4)]

    assert order(3) == order(3)


@pytest.mark.parametrize("n", [1.5, -1, "2"])
def test_num_workers_must_be_a_non_negative_int(n):
    with pytest.raises(ValueError, match=rf"got num_workers={n!r}, expected an int >= 0"):
        DataLoader(Items(), num_workers=n)


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_is_usable_after_a_sample_raised(workers):
    ds = Items(bad=5)
    dl = DataLoader(ds, batch_size=2, num_workers=workers, timeout=60 if workers else 0)
    with pytest.raises(ValueError, match="bad item 5") as info:
        list(dl)
    if workers:  # the worker's error names the worker and the sample
        assert "in DataLoader worker process" in str(info.value)
        assert "sample index 5" in str(info.value)
    ds.bad = None
    assert [b.tolist() for b in dl] == [[[2.0 * k], [2.0 * k + 1]] for k in range(4)]


@pytest.mark.parametrize("persistent", [False, True])
def test_loader_is_usable_after_a_keyboard_interrupt_in_the_loop(persistent):
    dl = DataLoader(Items(20), batch_size=2, num_workers=2, timeout=60,
                    persistent_workers=persistent)
    with pytest.raises(KeyboardInterrupt):
        for i, _ in enumerate(dl):
            if i == 1:
                raise KeyboardInterrupt
    assert [b[0].item() for b in dl] == [2.0 * k for k in range(10)]


def test_worker_init_fn_error_names_the_start():
    def init(worker_id):
        raise RuntimeError("init failed")

    dl = DataLoader(Items(), batch_size=2, num_workers=1, worker_init_fn=init, timeout=60)
    with pytest.raises(RuntimeError, match=r"(?s)while starting \(worker_init_fn.*init failed"):
        list(dl)
