"""Hostile input, round 7 (ember.data part): DataLoader timeouts that are not numbers, and
random_split lengths that are NaN, infinite, strings, or a generator that is not one.

``DataLoader(ds, num_workers=1, timeout=float("nan"))`` was accepted, and since ``nan > 0`` is
False the loader then waited for its workers forever: the timeout the user asked for silently
became none (PyTorch does the same). A NaN timeout is now a ValueError, and a str one a
TypeError naming DataLoader (it was ``'<' not supported between instances of 'str' and 'int'``).

``random_split(ds, [nan, 1.0])`` failed with ``cannot convert float NaN to integer`` and
``[inf, 1.0]`` with an OverflowError (PyTorch: ValueError "Sum of input lengths does not equal
the length of the input dataset!"); both are now ValueErrors naming random_split and the
lengths. A str length and a generator that is not an ember.Generator are TypeErrors naming
random_split (they were ``unsupported operand type(s)`` and pybind's list of signatures).

``DistributedSampler(ds)`` without a process group raised RuntimeError where PyTorch raises
ValueError; it is a ValueError now.

The other cases attacked this round (batch_sampler/sampler combinations, persistent workers
reused after an error or a timeout, a dying worker, unpicklable results, IterableDataset
duplication without sharding, DistributedSampler ranks) already behaved; see
packages/core/tests/test_hostile_input_round7.py for the rest of round 7.
"""

from __future__ import annotations

import ember
import pytest
from ember.data import DataLoader, random_split

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


@pytest.mark.parametrize("timeout, exc, fragment", [
    (float("nan"), ValueError, "DataLoader: timeout should be a non-negative number of seconds, "
                               "got nan"),
    ("5", TypeError, "DataLoader: timeout should be a number of seconds, got str '5'"),
    (None, TypeError, "got NoneType None"),
    (-1, ValueError, "timeout option should be non-negative"),
])
def test_a_timeout_that_is_not_a_duration_is_refused(timeout, exc, fragment):
    with pytest.raises(exc, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        DataLoader(list(range(4)), num_workers=1, timeout=timeout)


def test_number_timeouts_still_work():
    import numpy as np

    for t in (0, 2.5, np.float64(3.0), float("inf")):
        assert DataLoader(list(range(4)), num_workers=1, timeout=t).timeout == t
    assert [int(x) for x in DataLoader(list(range(4)), batch_size=None, num_workers=1,
                                       timeout=30)] == [0, 1, 2, 3]


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_pytorch_takes_a_nan_timeout_and_refuses_a_str_with_a_type_error():
    from torch.utils.data import DataLoader as TorchLoader

    TorchLoader(list(range(4)), num_workers=1, timeout=float("nan"))  # no error: no timeout
    with pytest.raises(TypeError):
        TorchLoader(list(range(4)), num_workers=1, timeout="5")


@pytest.mark.parametrize("lengths", [[float("nan"), 1.0], [float("inf"), 1.0],
                                     [0.5, float("-inf")]])
def test_random_split_of_non_finite_lengths_is_a_value_error(lengths):
    with pytest.raises(ValueError, match=r"random_split: lengths must be finite counts or "
                                         r"fractions, got \["):
        random_split(list(range(10)), lengths)


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_pytorch_refuses_non_finite_lengths_with_a_value_error():
    from torch.utils.data import random_split as torch_split

    for lengths in ([float("nan"), 1.0], [float("inf"), 1.0]):
        with pytest.raises(ValueError):
            torch_split(list(range(10)), lengths)


def test_random_split_names_a_str_length_and_a_bad_generator():
    with pytest.raises(TypeError, match=r"random_split: lengths must be numbers \(counts or "
                                        r"fractions\), got str '5'"):
        random_split(list(range(10)), ["5", "5"])
    with pytest.raises(TypeError, match=r"random_split: generator must be an ember.Generator "
                                        r"\(or None\), got int"):
        random_split(list(range(10)), [5, 5], generator=3)


def test_random_split_still_splits_counts_and_fractions():
    g = ember.Generator().manual_seed(0)
    a, b = random_split(list(range(10)), [3, 7], generator=g)
    assert len(a) == 3 and len(b) == 7 and sorted(list(a) + list(b)) == list(range(10))
    c, d = random_split(range(10), [0.5, 0.5])
    assert (len(c), len(d)) == (5, 5)
    import numpy as np

    e, f = random_split(range(4), [np.int64(1), np.int64(3)])
    assert (len(e), len(f)) == (1, 3)


def test_distributed_sampler_without_a_process_group_is_a_value_error():
    from ember.data import DistributedSampler

    # PyTorch's class (its get_world_size raises it); ember raised RuntimeError
    with pytest.raises(ValueError, match=r"DistributedSampler: num_replicas and rank were not "
                                         r"given and the default process group is not "
                                         r"initialized"):
        DistributedSampler(range(4))
    assert list(DistributedSampler(range(4), num_replicas=2, rank=1, shuffle=False)) == [1, 3]


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_pytorch_distributed_sampler_without_a_process_group_is_a_value_error():
    import torch.distributed as tdist
    from torch.utils.data import DistributedSampler as TorchSampler

    if not tdist.is_available():
        pytest.skip("torch without distributed")
    with pytest.raises(ValueError):
        TorchSampler(range(4))
