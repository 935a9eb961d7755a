"""pin_memory=True: batches pinned in a background thread (with workers), custom batch types,
pin_memory_device, errors and clean shutdown of the thread."""

from __future__ import annotations

import collections
import dataclasses
import gc
import os
import sys
import threading
import time

import ember
import pytest
from ember.data import DataLoader, Dataset
from ember.data.dataloader import pin_memory

PIN_THREAD = "ember_data_pin_memory"


def pin_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == PIN_THREAD]


class Images(Dataset):
    def __init__(self, n: int = 24, bad: int = -1, action: str = "") -> None:
        self.n, self.bad, self.action = n, bad, action

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i == self.bad:
            if self.action == "kill":
                os.kill(os.getpid(), 9)
            time.sleep(30)
        return ember.full((3, 32, 32), float(i)), i


class Batch:
    """A custom batch type: the loader must call its own pin_memory()."""

    def __init__(self, labels: list, pinned_in: str = "") -> None:
        self.labels, self.pinned_in = labels, pinned_in

    def pin_memory(self) -> Batch:
        if self.labels and self.labels[0] == -1:
            raise RuntimeError("custom pinning failed")
        return Batch(self.labels, threading.current_thread().name)


def collate_batch(samples: list) -> Batch:
    return Batch([y for _, y in samples])


class Negative(Images):
    def __getitem__(self, i: int):
        return None, -1 if i == 4 else i


@pytest.mark.parametrize("num_workers", [0, 2])
def test_custom_batch_pinned_in_pin_thread_with_workers(num_workers, no_shm_leak):
    dl = DataLoader(Images(12), batch_size=4, num_workers=num_workers, collate_fn=collate_batch,
                    pin_memory=True)
    batches = list(dl)
    assert [b.labels for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    # PyTorch's rule: with workers a background thread pins, without them the main thread.
    expected = PIN_THREAD if num_workers else threading.main_thread().name
    assert {b.pinned_in for b in batches} == {expected}
    assert not pin_threads()  # the epoch ended: the thread stopped with the workers


def test_tensor_batches_and_pin_memory_device(no_shm_leak):
    dl = DataLoader(Images(10), batch_size=4, num_workers=2, pin_memory=True,
                    pin_memory_device="cuda")
    xs, ys = zip(*dl)
    assert [y.tolist() for y in ys] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert xs[2].shape == (2, 3, 32, 32) and float(xs[2][1, 0, 0, 0].item()) == 9.0
    if not ember.cuda.is_available():
        assert not xs[0].is_pinned()  # CPU build: pinning is a no-op


def test_pin_memory_device_argument_checks():
    with pytest.raises(ValueError, match="pin_memory_device='gpu0' is not a valid device"):
        DataLoader(Images(), pin_memory=True, pin_memory_device="gpu0")
    with pytest.raises(TypeError, match="pin_memory_device option should be a device string"):
        DataLoader(Images(), pin_memory=True, pin_memory_device=0)
    with pytest.warns(UserWarning, match="no effect without pin_memory=True"):
        DataLoader(Images(), pin_memory_device="cuda")


def test_error_in_custom_pin_memory_is_reraised(no_shm_leak):
    dl = DataLoader(Negative(12), batch_size=4, num_workers=2, collate_fn=collate_batch,
                    pin_memory=True)
    it = iter(dl)
    assert next(it).labels == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="custom pinning failed") as ei:
        next(it)
    assert "pin memory thread" in str(ei.value)
    del it, ei
    gc.collect()
    assert not pin_threads()


def test_break_del_and_exception_stop_the_thread(no_shm_leak):
    dl = DataLoader(Images(400), batch_size=4, num_workers=2, pin_memory=True)
    for i, _ in enumerate(dl):
        if i == 0:
            assert len(pin_threads()) == 1
        if i == 2:
            break
    gc.collect()
    assert not pin_threads()
    it = iter(dl)
    next(it)
    del it
    assert not pin_threads()
    with pytest.raises(KeyError):
        for _ in dl:
            raise KeyError("training step failed")
    gc.collect()
    assert not pin_threads()


def test_dead_worker_and_timeout_with_pin_thread(no_shm_leak):
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"pid \d+\) was killed by signal SIGKILL"):
        list(DataLoader(Images(40, 9, "kill"), batch_size=4, num_workers=2, pin_memory=True))
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        next(iter(DataLoader(Images(8, 0, "sleep"), batch_size=2, num_workers=1, timeout=0.5,
                             pin_memory=True)))
    assert time.monotonic() - t0 < 15
    gc.collect()
    assert not pin_threads()


def test_persistent_workers_keep_one_pin_thread(no_shm_leak):
    dl = DataLoader(Images(8), batch_size=4, num_workers=2, pin_memory=True,
                    persistent_workers=True)
    for _ in range(3):
        assert [y.tolist() for _, y in dl] == [[0, 1, 2, 3], [4, 5, 6, 7]]
        assert len(pin_threads()) == 1
    del dl
    gc.collect()
    assert not pin_threads()


Pair = collections.namedtuple("Pair", ["a", "b"])


@dataclasses.dataclass
class Sample:
    x: object
    name: str


class Marked:
    def pin_memory(self) -> str:
        return "pinned by its own method"


class Labels(collections.abc.Sequence):
    def __init__(self, items):
        self.items = list(items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def test_pin_memory_keeps_container_types():
    t = ember.ones(2)
    d = collections.defaultdict(list, {"x": t})
    out = pin_memory(d)
    assert type(out) is collections.defaultdict and out.default_factory is list
    assert isinstance(out["x"], ember.Tensor)
    od = pin_memory(collections.OrderedDict(b=t, a="s"))
    assert type(od) is collections.OrderedDict and list(od) == ["b", "a"] and od["a"] == "s"
    p = pin_memory(Pair(t, 3))
    assert type(p) is Pair and p.b == 3
    s = pin_memory(Sample(t, "n"))
    assert type(s) is Sample and s.name == "n" and isinstance(s.x, ember.Tensor)
    assert pin_memory((t, b"raw"))[1] == b"raw"
    assert type(pin_memory(Labels([t, 1]))) is Labels
    assert pin_memory([Marked(), "s", 1.5]) == ["pinned by its own method", "s", 1.5]
    if sys.platform == "linux" and not ember.cuda.is_available():
        assert not pin_memory(t).is_pinned()
