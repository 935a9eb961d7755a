"""PyTorch spellings real programs use on tensors (issue 15 items 1, 4, 7, 9), against torch."""

from __future__ import annotations

import collections
import collections.abc

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch

# ---- item 1: format() / f-strings of 0-d tensors ----------------------------------------------

FORMAT_CASES = [
    (88.0, ""), (88.0, "+.2f"), (2.5, ">8"), (-1.25, ".3e"), (0.125, "%"), (3, ""), (3, "05d"),
    (True, ""), (1.5, "g"), (12345.678, ",.1f"),
]


@pytest.mark.parametrize("value,spec", FORMAT_CASES)
def test_format_of_0d_tensor_is_the_numbers(value, spec):
    t = ember.tensor(value)
    assert format(t, spec) == format(t.item(), spec)
    assert f"{t:{spec}}" == format(t.item(), spec)


@needs_torch
@pytest.mark.parametrize("value,spec", FORMAT_CASES)
def test_format_matches_torch(value, spec):
    assert format(ember.tensor(value), spec) == format(torch.tensor(value), spec)


def test_format_loss_line_as_programs_print_it():
    loss = ember.tensor([0.5, 0.25]).sum()
    assert f"loss {loss:.4f} | {'{:+.2f}'.format(loss)} | {loss}" == "loss 0.7500 | +0.75 | 0.75"


def test_format_of_other_tensors():
    t = ember.ones(2)
    assert f"{t}" == str(t)  # an empty spec is str(), as for any object
    with pytest.raises(TypeError, match="unsupported format string"):
        format(t, ".2f")
    p = ember.nn.Parameter(ember.tensor(1.0)) if hasattr(ember, "nn") else None
    if p is not None:  # subclasses keep their str (as in torch)
        assert f"{p}" == str(p)


# ---- item 4: Tensor.type() ----------------------------------------------------------------------

TYPE_NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor",
              "CharTensor", "ShortTensor", "IntTensor", "LongTensor", "BoolTensor"]


@needs_torch
@pytest.mark.parametrize("name", TYPE_NAMES)
def test_type_names_and_conversions_match_torch(name):
    tt = torch.tensor([1.0, 0.0, 2.5]).type(f"torch.{name}")
    et = ember.tensor([1.0, 0.0, 2.5]).type(f"torch.{name}")
    assert et.type() == f"ember.{name}" and tt.type() == f"torch.{name}"
    assert repr(et.dtype).split(".")[1] == str(tt.dtype).split(".")[1]
    assert et.float().tolist() == tt.float().tolist()
    # the ember spelling and the legacy class are accepted too
    assert ember.ones(1).type(f"ember.{name}").dtype is et.dtype
    assert ember.ones(1).type(getattr(ember, name)).dtype is et.dtype


def test_type_with_dtype_and_identity():
    t = ember.ones(2)
    assert t.type(ember.float32) is t and t.type("ember.FloatTensor") is t
    assert t.type(ember.int64).dtype is ember.int64
    with pytest.raises(ValueError, match="invalid type: 'torch.Foo'"):
        t.type("torch.Foo")
    with pytest.raises(TypeError, match="expected a dtype"):
        t.type(3)


# ---- item 7: legacy constructors ----------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("args", [(), (2, 3), ([[1.5]],), ((2, 3),), ([1, 2],), ([True, False],),
                                  (np.array([1, 2]),), ([[1, 2], [3, 4]],)])
def test_Tensor_constructor_matches_torch(args):
    e = ember.Tensor(*args)
    t = torch.Tensor(*args)
    assert tuple(e.shape) == tuple(t.shape)
    assert repr(e.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    if args and not isinstance(args[0], int):
        assert e.tolist() == t.tolist()


def test_Tensor_constructor_sizes_and_alias():
    assert ember.Tensor(ember.Size([2, 4])).shape == (2, 4)
    assert ember.Tensor(0).shape == (0,)
    x = ember.tensor([1, 2])
    y = ember.Tensor(x)  # an alias, as torch.Tensor(tensor): same memory, x's dtype
    assert y.dtype is ember.int64 and y.data_ptr() == x.data_ptr()
    assert ember.Tensor([[1]], device="cpu").tolist() == [[1.0]]


@needs_torch
@pytest.mark.parametrize("bad", [(2.5,), ("ab",), (2, 3.0)])
def test_Tensor_constructor_refuses_like_torch(bad):
    with pytest.raises(TypeError) as t_err:
        torch.Tensor(*bad)
    with pytest.raises(TypeError) as e_err:
        ember.Tensor(*bad)
    assert str(e_err.value) == str(t_err.value)  # PyTorch's "new(): ..." messages


@needs_torch
@pytest.mark.parametrize("name", TYPE_NAMES)
def test_typed_constructors_match_torch(name):
    data = [[1.7, 0.0], [2.0, -3.2]] if name not in ("ByteTensor", "BoolTensor") else [[1.0, 0.0]]
    e, t = getattr(ember, name)(data), getattr(torch, name)(data)
    assert e.type() == f"ember.{name}"
    assert e.float().tolist() == t.float().tolist()
    assert getattr(ember, name)(3, 2).shape == (3, 2)
    assert getattr(ember, name)().shape == (0,)
    assert isinstance(e, getattr(ember, name)) and isinstance(e, ember.Tensor)
    other = "LongTensor" if name != "LongTensor" else "FloatTensor"
    assert not isinstance(e, getattr(ember, other))
    assert isinstance(t, getattr(torch, name)) and not isinstance(t, getattr(torch, other))


def test_typed_constructor_refuses_another_dtype_tensor():
    with pytest.raises(TypeError, match="LongTensor.*int64.*float32"):
        ember.LongTensor(ember.ones(2))
    x = ember.tensor([1, 2])
    assert ember.LongTensor(x).data_ptr() == x.data_ptr()


def test_parameter_still_constructs_through_Tensor():
    nn = pytest.importorskip("ember.nn")
    p = nn.Parameter(ember.ones(2))
    assert p.requires_grad and isinstance(p, ember.Tensor)


# ---- item 9: tensor() of any sequence -----------------------------------------------------------

class _Seq(collections.abc.Sequence):
    def __init__(self, *items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


SEQ_CASES = [
    lambda: collections.deque([1, 2, 3]),
    lambda: collections.deque([1.5, 2.0]),
    lambda: range(4),
    lambda: (collections.deque([1.0, 2.0]), [3, 4]),
    lambda: [range(2), range(2, 4)],
    lambda: _Seq(1, 2.5),
    lambda: [_Seq(True, False)],
    lambda: collections.deque([collections.deque([1]), collections.deque([2])]),
]


@needs_torch
@pytest.mark.parametrize("make", SEQ_CASES)
def test_tensor_of_sequences_matches_torch(make):
    e, t = ember.tensor(make()), torch.tensor(make())
    assert e.tolist() == t.tolist()
    assert repr(e.dtype).split(".")[1] == str(t.dtype).split(".")[1]


@needs_torch
def test_tensor_of_0d_tensors_inside_lists():
    for data in ([1.0, 2.0], [1, 2.5], [True]):
        e = ember.tensor([ember.tensor(v) for v in data])
        t = torch.tensor([torch.tensor(v) for v in data])
        assert e.tolist() == t.tolist()
    e = ember.tensor(collections.deque([ember.tensor(1.0), 2]))
    assert e.tolist() == [1.0, 2.0]
    assert ember.tensor(collections.deque([1, 2]), dtype=ember.float64).dtype is ember.float64
    assert ember.as_tensor(collections.deque([1, 2])).tolist() == [1, 2]


def test_tensor_of_non_sequences_is_refused():
    # PyTorch: RuntimeError for an object it cannot type, TypeError for text
    for bad in ({1, 2}, (i for i in range(2))):
        with pytest.raises(RuntimeError, match="could not infer dtype"):
            ember.tensor(bad)
    with pytest.raises(TypeError, match="could not infer dtype"):
        ember.tensor("ab")
    with pytest.raises(ValueError, match="expected sequence of length 1 at dim 1"):
        ember.tensor(collections.deque([[1], [2, 3]]))


def test_to_dtype_keeps_a_dense_layout_like_torch():
    # Tensor.to(dtype) is PyTorch's _to_copy with preserve_format: a transposed (dense) input
    # keeps its strides; a contiguous one stays contiguous
    x = ember.arange(12.0).reshape(3, 4).t()
    for y in (x.to(ember.float64), x.double(), x.to(ember.float64, copy=True), x.half()):
        assert y.stride() == (1, 4) and y.tolist() == x.tolist()
    assert ember.ones(2, 3).double().stride() == (3, 1)
    assert x.to(ember.float32) is x  # same dtype, no copy
