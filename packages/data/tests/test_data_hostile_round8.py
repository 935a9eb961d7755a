"""Hostile input, round 8 (data part): namedtuple samples of another length.

``default_collate`` collates a namedtuple field by field with ``zip``: a later sample with more
elements (a plain tuple ``(1, 2, 3)`` after ``P(a=1, b=2)``) lost the extra ones, and a shorter
one cut every field's batch short, silently (PyTorch does the same). Lists and tuples were
already checked ("each element in list of batch should be of equal size"); namedtuples now are
too, and a sample that is not a tuple at all is a TypeError naming the field.
"""

from __future__ import annotations

import collections

import ember
import pytest
from ember.utils.data import DataLoader, Dataset, default_collate

P = collections.namedtuple("P", "a b")


@pytest.mark.parametrize("other", [(1, 2, 3), (1,)])
def test_a_namedtuple_sample_of_another_length_is_refused(other):
    with pytest.raises(RuntimeError, match=r"equal size: sample is a P of 2 fields in sample 0 "
                                           rf"but has {len(other)} elements in sample 1"):
        default_collate([P(1, 2), other])


def test_a_namedtuple_then_a_non_tuple_names_the_field():
    with pytest.raises(TypeError, match=r"field sample\[0\] is a P in sample 0 but a int in "
                                        r"sample 1"):
        default_collate([[P(1, 2)], [5]])


def test_namedtuples_of_the_same_length_still_collate():
    out = default_collate([P(1, ember.tensor([1.0])), P(3, ember.tensor([2.0]))])
    assert isinstance(out, P)
    assert out.a.tolist() == [1, 3] and out.b.tolist() == [[1.0], [2.0]]
    out = default_collate([P(1, 2), (3, 4)])  # a plain tuple of the same length, as PyTorch
    assert out.a.tolist() == [1, 3] and out.b.tolist() == [2, 4]


def test_the_loader_reports_the_short_sample():
    class Ragged(Dataset):
        def __len__(self) -> int:
            return 2

        def __getitem__(self, i: int):
            return P(i, i) if i == 0 else (i, i, i)

    with pytest.raises(RuntimeError, match="2 fields in sample 0 but has 3 elements"):
        list(DataLoader(Ragged(), batch_size=2))


def test_pytorch_drops_the_extra_element_silently():
    pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate

    TP = collections.namedtuple("TP", "a b")
    out = torch_collate([TP(1, 2), (1, 2, 3)])
    assert len(out) == 2  # the third element of sample 1 is gone, without a word
