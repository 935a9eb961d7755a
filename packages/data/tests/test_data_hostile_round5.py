"""Hostile input, round 5 (ember.data part): samples whose structure changes between a list and a
str or dict, and a DataLoader timeout that nothing could enforce.

``default_collate`` of ``[[1, 2], "ab"]`` zipped the string in character by character (a
batch of mixed numbers and letters, or a silent wrong batch of strings), and of
``[{"a": 1}, [1]]`` failed inside indexing ("list indices must be integers"); both now name the
field and the sample that differs. ``DataLoader(timeout=5)`` with ``num_workers=0`` ignored the
timeout (a hung ``__getitem__`` hung the loop); it is refused at iteration with PyTorch's class,
AssertionError. The rest of round 5 is in packages/core/tests/test_hostile_input_round5.py.
"""

from __future__ import annotations

import re

import ember
import pytest
from ember.data import DataLoader, default_collate

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


@pytest.mark.parametrize("batch, fragment", [
    ([[1, 2], "ab"], "field sample is a list in sample 0 but a str in sample 1"),
    ([["x", "y"], "ab"], "field sample is a list in sample 0 but a str in sample 1"),
    ([[1, 2], {"a": 1, "b": 2}], "is a list in sample 0 but a dict in sample 1"),
    ([(1, 2), (3, 4), b"ab"], "is a tuple in sample 0 but a bytes in sample 2"),
    ([{"a": 1}, [1]], "field sample is a dict in sample 0 but a list in sample 1"),
    ([{"k": [1, 2]}, {"k": "ab"}], "field sample['k'] is a list in sample 0 but a str"),
    ([{"k": {"a": 1}}, {"k": 3}], "field sample['k'] is a dict in sample 0 but a int"),
])
def test_collate_names_a_field_that_turns_into_a_str_or_dict(batch, fragment):
    with pytest.raises(TypeError, match=re.escape(fragment)):
        default_collate(batch)


def test_collate_still_takes_lists_tuples_and_arrays_as_one_structure():
    np = pytest.importorskip("numpy")
    assert [t.tolist() for t in default_collate([(1, 2), [3, 4]])] == [[1, 3], [2, 4]]
    out = default_collate([[1, 2], np.array([3, 4])])
    assert [t.tolist() for t in out] == [[1, 3], [2, 4]]
    assert default_collate([["a", "b"], ["c", "d"]]) == [("a", "c"), ("b", "d")]
    assert default_collate([{"a": 1}, {"a": 2}])["a"].tolist() == [1, 2]


class _Items(ember.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return ember.tensor([float(i)])


def test_timeout_without_workers_is_refused_at_iteration():
    dl = DataLoader(_Items(), batch_size=2, timeout=5)  # made, as in PyTorch
    with pytest.raises(AssertionError, match=r"timeout=5 needs worker processes \(num_workers > 0\)"):
        iter(dl)
    assert [b.tolist() for b in DataLoader(_Items(), batch_size=2, timeout=0)] == [
        [[0.0], [1.0]], [[2.0], [3.0]]]


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_pytorch_refuses_the_same_timeout_with_the_same_class():
    from torch.utils.data import DataLoader as TDataLoader

    with pytest.raises(AssertionError):
        iter(TDataLoader(list(range(4)), batch_size=2, timeout=5))
