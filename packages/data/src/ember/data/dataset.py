"""Datasets: map-style (``Dataset``) and iterable (``IterableDataset``), and their combinators."""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from typing import Any, Generic, Iterable, Iterator, Sequence, TypeVar

import ember

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "StackDataset",
    "ConcatDataset",
    "ChainDataset",
    "Subset",
    "random_split",
]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style dataset: ``__getitem__(index)`` and usually ``__len__``."""

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A dataset that is a stream: ``__iter__``. With workers, every worker iterates its own
    copy; use :func:`ember.data.get_worker_info` in ``__iter__`` to shard the stream."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Samples are ``tuple(t[i] for t in tensors)``; all tensors share their first dimension."""

    def __init__(self, *tensors: ember.Tensor) -> None:
        if tensors and any(tensors[0].shape[0] != t.shape[0] for t in tensors):
            sizes = [t.shape[0] for t in tensors]
            raise AssertionError(f"Size mismatch between tensors: first dimensions {sizes}")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class StackDataset(Dataset[T_co]):
    """Samples are tuples (``StackDataset(a, b)``) or dicts (``StackDataset(x=a, y=b)``) of the
    samples of datasets of equal length."""

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args:
            if kwargs:
                raise ValueError(
                    "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) "
                    "like input/output, but both types are given."
                )
            self._length = len(args[0])  # type: ignore[arg-type]
            if any(self._length != len(d) for d in args):  # type: ignore[arg-type]
                raise ValueError("Size mismatch between datasets")
            self.datasets: Any = args
        elif kwargs:
            tmp = list(kwargs.values())
            self._length = len(tmp[0])  # type: ignore[arg-type]
            if any(self._length != len(d) for d in tmp):  # type: ignore[arg-type]
                raise ValueError("Size mismatch between datasets")
            self.datasets = kwargs
        else:
            raise ValueError("At least one dataset should be passed")

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        if isinstance(self.datasets, dict):
            out: list = [{} for _ in indices]
            for k, d in self.datasets.items():
                items = _get_many(d, indices)
                for o, s in zip(out, items):
                    o[k] = s
            return out
        cols = [_get_many(d, indices) for d in self.datasets]
        return [tuple(s) for s in zip(*cols)]

    def __len__(self) -> int:
        return self._length


def _get_many(dataset: Any, indices: list) -> list:
    getitems = getattr(dataset, "__getitems__", None)
    if getitems is not None:
        items = getitems(indices)
        if len(items) != len(indices):
            raise ValueError(
                f"__getitems__ of {type(dataset).__name__} returned {len(items)} samples for "
                f"{len(indices)} indices"
            )
        return items
    return [dataset[i] for i in indices]


class ConcatDataset(Dataset[T_co]):
    """The concatenation of map-style datasets."""

    @staticmethod
    def cumsum(sequence: Sequence) -> list[int]:
        r, s = [], 0
        for e in sequence:
            s += len(e)
            r.append(s)
        return r

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        if dataset_idx >= len(self.datasets):
            raise IndexError(f"index {idx} is out of range for a ConcatDataset of length {len(self)}")
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        return self.datasets[dataset_idx][sample_idx]


class ChainDataset(IterableDataset):
    """The concatenation of iterable datasets, chained lazily."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)  # type: ignore[arg-type]
        return total


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list) -> list:
        return _get_many(self.dataset, [self.indices[i] for i in indices])

    def __len__(self) -> int:
        return len(self.indices)


def random_split(
    dataset: Dataset[T_co],
    lengths: Sequence[int | float],
    generator: ember.Generator | None = None,
) -> list[Subset[T_co]]:
    """Splits ``dataset`` into non-overlapping random subsets of the given lengths, or of the
    given fractions of its length (the remainder goes round-robin to the first subsets).

    >>> import ember
    >>> from ember.data import random_split
    >>> a, b = random_split(range(10), [0.7, 0.3], generator=ember.Generator().manual_seed(0))
    >>> len(a), len(b)
    (7, 3)
    """
    if generator is None:
        generator = ember.default_generator
    elif not isinstance(generator, ember.Generator):
        raise TypeError(f"random_split: generator must be an ember.Generator (or None), got "
                        f"{type(generator).__name__}")
    n = len(dataset)  # type: ignore[arg-type]
    for x in lengths:
        if isinstance(x, (str, bytes)):
            raise TypeError(f"random_split: lengths must be numbers (counts or fractions), got "
                            f"{type(x).__name__} {x!r}")
        if not math.isfinite(x):  # NaN or inf: int() of it failed with a bare error
            raise ValueError(f"random_split: lengths must be finite counts or fractions, got "
                             f"{list(lengths)}")
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths: list[int] = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(int(math.floor(n * frac)))
        remainder = n - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(
                    f"Length of split at index {i} is 0. This might result in an empty dataset.",
                    stacklevel=2,
                )
    if any(int(x) != x or x < 0 for x in lengths):
        raise ValueError(f"random_split: lengths must be non-negative integers, got {list(lengths)}")
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = ember.randperm(int(sum(lengths)), generator=generator).tolist()
    out = []
    for offset, length in zip(itertools.accumulate(lengths), lengths):
        out.append(Subset(dataset, indices[int(offset - length) : int(offset)]))
    return out
