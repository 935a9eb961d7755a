"""Tensor.__getitem__ / __setitem__: a table of index expressions applied to one tensor and checked
against PyTorch (and NumPy where its rules agree), views vs copies, assignment, dtypes and errors."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, to_np, torch

SHAPE = (2, 3, 4, 5)
BASE = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
MASK_2x3 = np.array([[True, False, True], [False, True, True]])
MASK_3x4 = (np.arange(12).reshape(3, 4) % 3) == 0


class Lib:
    """Builds index tensors with one library (ember, torch or NumPy) so an index expression can be
    applied to each."""

    def __init__(self, name: str) -> None:
        self.name = name

    def T(self, v: Any, dtype: str = "int64") -> Any:  # noqa: N802 (reads like a constructor)
        a = np.asarray(v, dtype=np.dtype(dtype) if dtype != "bool" else bool)
        if self.name == "ember":
            return ember.tensor(a)
        if self.name == "torch":
            return torch.from_numpy(a)
        return a

    def M(self, v: Any) -> Any:  # noqa: N802
        return self.T(v, "bool")


# (description, index builder, NumPy gives the same result)
CASES: list[tuple[str, Callable[[Lib], Any], bool]] = [
    ("int", lambda L: 1, True),
    ("negative int", lambda L: -1, True),
    ("int tuple", lambda L: (1, 2), True),
    ("scalar result", lambda L: (1, -1, 2, 3), True),
    ("slice", lambda L: slice(1, None), True),
    ("slice step", lambda L: (slice(None), slice(None, None, 2)), True),
    ("slice negative bounds", lambda L: (Ellipsis, slice(-4, -1, 2)), True),
    ("empty slice", lambda L: slice(5, 10), True),
    ("ellipsis", lambda L: Ellipsis, True),
    ("ellipsis int", lambda L: (Ellipsis, 0), True),
    ("int ellipsis int", lambda L: (0, Ellipsis, 1), True),
    ("None", lambda L: None, True),
    ("None int None", lambda L: (None, 0, None), True),
    ("ellipsis None", lambda L: (Ellipsis, None), True),
    ("empty tuple", lambda L: (), True),
    ("mixed basic", lambda L: (0, slice(1, 3), None, slice(None, None, 3)), True),
    ("int tensor", lambda L: L.T([0, 1, 1]), True),
    ("negative tensor", lambda L: L.T([-1, 0]), True),
    ("2-d tensor", lambda L: L.T([[0, 1], [1, 0]]), True),
    ("0-d tensor", lambda L: L.T(1), True),
    ("empty tensor", lambda L: L.T([]), True),
    ("int32 tensor", lambda L: L.T([1, 0], "int32"), True),
    ("list", lambda L: [0, 1, 1], True),
    ("empty list", lambda L: [], True),
    ("numpy array", lambda L: np.array([[0, 1], [1, 0]]), True),
    ("numpy int", lambda L: np.int64(1), True),
    ("second dim tensor", lambda L: (slice(None), L.T([0, 2])), True),
    ("adjacent tensors", lambda L: (slice(None), L.T([0, 2]), L.T([1, 3])), True),
    ("separated tensors", lambda L: (L.T([0, 1]), slice(None), L.T([0, 1])), True),
    ("separated by ellipsis", lambda L: (L.T([1, 0]), Ellipsis, L.T([0, 4])), True),
    ("tensors around an int", lambda L: (L.T([0, 1]), 0, L.T([1, 2])), True),
    ("int then separated tensor", lambda L: (0, slice(None), L.T([0, 1])), False),  # NumPy: int is advanced
    ("ellipsis tensor", lambda L: (Ellipsis, L.T([0, 1])), True),
    ("None around tensor", lambda L: (None, L.T([0, 1]), None, slice(1, None)), True),
    ("broadcast tensors", lambda L: (L.T([[0], [1]]), L.T([0, 1, 2])), True),
    ("broadcast separated", lambda L: (L.T([[0], [1]]), slice(None), L.T([0, 1, 2])), True),
    ("lists", lambda L: ([0, 1], [1, 2]), True),
    ("list of lists", lambda L: [[0, 1], [1, 2]], False),  # PyTorch: a tuple of indices
    ("list with a list", lambda L: [0, [1]], False),
    ("0-d and 1-d tensors", lambda L: (L.T([1]), slice(None), L.T(1)), True),
    ("full mask", lambda L: L.M(BASE % 7 == 0), True),
    ("leading mask", lambda L: L.M([True, False]), True),
    ("2-d mask", lambda L: L.M(MASK_2x3), True),
    ("inner mask", lambda L: (slice(None), L.M(MASK_3x4)), True),
    ("mask and int", lambda L: (L.M(MASK_2x3), slice(None), 0), True),
    ("mask and tensor", lambda L: (slice(None), L.M([True, False, True]), L.T([0, 3])), True),
    ("empty mask", lambda L: L.M([False, False]), True),
    ("bool list", lambda L: [True, False], True),
    ("True", lambda L: True, True),
    ("False", lambda L: False, True),
    ("slice True", lambda L: (slice(None), True), True),
    ("int False", lambda L: (0, False), True),
    ("0-d bool tensor", lambda L: L.M(True), True),
]
IDS = [c[0] for c in CASES]


def ember_base() -> ember.Tensor:
    return ember.tensor(BASE)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_getitem_numpy(case: Any) -> None:
    _, build, numpy_agrees = case
    if not numpy_agrees:
        pytest.skip("NumPy's rule differs from PyTorch's here (checked against torch)")
    got = ember_base()[build(Lib("ember"))]
    exp = BASE[build(Lib("numpy"))]
    assert tuple(got.shape) == exp.shape
    np.testing.assert_array_equal(to_np(got), exp)


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_getitem_torch(case: Any) -> None:
    _, build, _ = case
    got = ember_base()[build(Lib("ember"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = torch.from_numpy(BASE.copy())[build(Lib("torch"))]
    assert tuple(got.shape) == tuple(exp.shape)
    np.testing.assert_array_equal(to_np(got), exp.numpy())


@pytest.mark.parametrize("strided", ["step", "transposed"])
def test_getitem_non_contiguous(strided: str) -> None:
    if strided == "step":
        base = BASE[:, ::2]
        x = ember.tensor(BASE)[:, ::2]
    else:
        base = BASE.reshape(6, 20).T
        x = ember.from_numpy(np.ascontiguousarray(BASE.reshape(6, 20)).T)
    assert not x.is_contiguous()
    L = Lib("ember")
    for index, np_index in [
        ((1, 0), (1, 0)),
        ((slice(None), L.T([1, 0])), (slice(None), [1, 0])),
        ((L.T([0, 1]), Ellipsis, L.T([1, 2])), ([0, 1], Ellipsis, [1, 2])),
        (ember.tensor(base > 30), base > 30),
    ]:
        np.testing.assert_array_equal(to_np(x[index]), base[np_index])


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                                   "float32", "float64"])
def test_getitem_dtypes(dtype: str) -> None:
    x = ember.tensor(BASE % 5).to(getattr(ember, dtype))
    ref = (BASE % 5).astype(bool) if dtype == "bool" else BASE % 5
    L = Lib("ember")
    for index, np_index in [
        (1, 1),
        ((slice(None), L.T([2, 0]), 1), (slice(None), [2, 0], 1)),
        (ember.tensor(BASE > 50), BASE > 50),
        ((L.T([1, 0]), slice(None), L.T([3, 3])), ([1, 0], slice(None), [3, 3])),
    ]:
        r = x[index]
        assert r.dtype == x.dtype
        np.testing.assert_array_equal(to_np(r.float()), ref[np_index].astype(np.float32))


def test_views_and_copies() -> None:
    x = ember_base()
    for index in [0, (slice(None), 1), (Ellipsis, slice(None, None, 2)), (None, 1), Ellipsis, ()]:
        v = x[index]
        assert v._base is x, index
        assert v.untyped_storage_ptr() == x.untyped_storage_ptr()
    v = x[1, :, 2]
    v[0] = -1.0
    assert x[1, 0, 2, 0].item() == -1.0
    assert x[1, 0, 2].is_contiguous() and not x[:, 0].is_contiguous()
    for index in [[0], ember.tensor([1]), ember.tensor(BASE > 3), True, (0, ember.tensor(1))]:
        c = x[index]
        assert c._base is None and c.untyped_storage_ptr() != x.untyped_storage_ptr(), index
    c = x[[0, 1]]
    c.fill_(7.0)
    assert x[0, 0, 0, 1].item() == 1.0


def test_basic_index_is_cheap() -> None:
    """x[0] must stay a view computed without touching the advanced-indexing machinery."""
    x = ember.tensor(np.zeros((100, 10), dtype=np.float32))
    for i in range(100):
        assert x[i].shape == (10,)
    assert x[-1].storage_offset() == 990


# ---- __setitem__ ----------------------------------------------------------------------------

# (description, index builder, value builder (lib, dtype) -> value)
SET_CASES: list[tuple[str, Callable[[Lib], Any], Callable[[Lib], Any]]] = [
    ("int scalar", lambda L: 0, lambda L: 1.5),
    ("row tensor broadcast", lambda L: (0, 1), lambda L: L.T(np.arange(5.0), "float32")),
    ("slice broadcast", lambda L: (slice(None), slice(1, 3)), lambda L: L.T(np.ones((2, 1, 4, 5)) * 3, "float32")),
    ("ellipsis 0-d tensor", lambda L: (Ellipsis, 0), lambda L: L.T(9.0, "float32")),
    ("step", lambda L: (slice(None), slice(None, None, 2)), lambda L: -2),
    ("list", lambda L: [1, 0], lambda L: 7),
    ("mask scalar", lambda L: L.M(BASE > 60), lambda L: 0.0),
    ("mask 0-d tensor", lambda L: L.M(BASE > 60), lambda L: L.T(-1.0, "float32")),
    ("mask values", lambda L: L.M(BASE > 100), lambda L: L.T(np.arange(19.0), "float32")),
    ("leading mask", lambda L: L.M([False, True]), lambda L: L.T(np.ones(5), "float32")),
    ("separated tensors", lambda L: (L.T([0, 1]), slice(None), L.T([1, 2])), lambda L: L.T(np.ones((2, 3, 5)), "float32")),
    ("adjacent tensors", lambda L: (slice(None), L.T([0, 2]), L.T([1, 1])), lambda L: L.T([[1.0], [2.0]], "float32")),
    ("int value tensor is cast", lambda L: (1, L.T([0])), lambda L: L.T(np.full(5, 4), "int64")),
    ("True", lambda L: True, lambda L: 3),
    ("inner mask", lambda L: (slice(None), L.M(MASK_3x4)), lambda L: L.T(np.arange(5.0), "float32")),
    ("bool list", lambda L: (0, [True, False, True]), lambda L: 5),
]
SET_IDS = [c[0] for c in SET_CASES]


def _np_value(v: Any) -> Any:
    return v if not isinstance(v, np.ndarray) else v.astype(np.float32)


@pytest.mark.parametrize("case", SET_CASES, ids=SET_IDS)
def test_setitem_numpy(case: Any) -> None:
    _, build, value = case
    x = ember_base()
    x[build(Lib("ember"))] = value(Lib("ember"))
    ref = BASE.copy()
    ref[build(Lib("numpy"))] = _np_value(value(Lib("numpy")))
    np.testing.assert_array_equal(to_np(x), ref)


@needs_torch
@pytest.mark.parametrize("case", SET_CASES, ids=SET_IDS)
def test_setitem_torch(case: Any) -> None:
    _, build, value = case
    x = ember_base()
    x[build(Lib("ember"))] = value(Lib("ember"))
    ref = torch.from_numpy(BASE.copy())
    v = value(Lib("torch"))
    if isinstance(v, torch.Tensor):
        v = v.to(ref.dtype)  # ember casts the value like NumPy; PyTorch wants the dtypes equal here
    ref[build(Lib("torch"))] = v
    np.testing.assert_array_equal(to_np(x), ref.numpy())


def test_setitem_details() -> None:
    x = ember_base()
    v0 = x._version
    x[0, 0, 0, 0] = 5
    assert x._version > v0
    x[0] = ember.ones(1, 1, 4, 5)  # leading size-1 dims of the value are dropped
    assert to_np(x[0]).sum() == 60
    y = ember.tensor(np.arange(6, dtype=np.int64))
    y[0] = 1.7
    y[ember.tensor([1, 2])] = 2.9
    assert y.tolist() == [1, 2, 2, 3, 4, 5]
    b = ember.tensor(np.zeros(3, dtype=bool))
    b[1] = 5
    assert b.tolist() == [False, True, False]
    z = ember.tensor(np.arange(8.0))
    z[1:] = z[:-1]  # overlapping source and destination
    assert z.tolist() == [0, 0, 1, 2, 3, 4, 5, 6]
    z = ember.tensor(np.arange(4.0))
    z[[0, 1]] = z[2:]
    assert z.tolist() == [2, 3, 2, 3]
    x[np.int64(1), np.array([0, 1])] = np.float64(3.0)
    assert to_np(x[1, :2]).min() == 3.0


# ---- errors ---------------------------------------------------------------------------------


def test_index_errors() -> None:
    x = ember_base()
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
        x[5]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 1 with size 3"):
        x[0, -4]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
        x[[5]]
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 1 with size 3"):
        x[:, ember.tensor([0, 7])]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 4"):
        x[0, 0, 0, 0, 0]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 4"):
        x[ember.tensor(BASE > 0), 0]
    with pytest.raises(IndexError, match="only integers, slices"):
        x[1.5]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[ember.tensor([0.0])]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[ember.tensor(np.array([0], dtype=np.int16))]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(ValueError):
        x[::0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ..., ember.tensor([0])]
    with pytest.raises(IndexError, match=r"The shape of the mask \(3,\) at index 0 does not match"):
        x[ember.tensor([True, False, True])]
    with pytest.raises(IndexError, match="shape mismatch: indexing tensors could not be broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(TypeError, match="can't assign a list"):
        x[0] = [1, 2, 3]
    with pytest.raises(TypeError, match="can't assign a NoneType"):
        x[0] = None
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[0] = ember.ones(2, 3, 4, 5)
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \(2,\)"):
        x[ember.tensor(BASE > 3)] = ember.tensor([1.0, 2.0])
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        x[[5]] = 1.0
    s = ember.tensor(3.0)
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 0"):
        s[0]
    assert s[...].shape == () and s[None].shape == (1,)
