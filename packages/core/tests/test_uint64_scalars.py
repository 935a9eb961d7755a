"""Python ints from 2**63 to 2**64 - 1 as op arguments: PyTorch takes them as uint64 numbers (for
uint64 tensors and the floating types; other integer types keep the low 64 bits, or refuse in
fill_ / full), and refuses larger ones with OverflowError."""

import ember
import pytest

try:
    import torch
except ImportError:  # the comparisons with PyTorch skip
    torch = None

U63, U64MAX = 2**63, 2**64 - 1


def both(make):
    """make(ember) and, where installed, make(torch): each one's result or exception class."""
    out = []
    for lib in (ember, torch):
        if lib is None:
            continue
        try:
            r = make(lib)
            out.append((r.dtype.__str__().split(".")[-1], r.tolist()) if hasattr(r, "tolist") else r)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            out.append(type(e).__name__)
    return out


@pytest.mark.parametrize("make, expected", [
    (lambda L: L.full((2,), U63, dtype=L.uint64), ("uint64", [U63, U63])),
    (lambda L: L.full((2,), U64MAX, dtype=L.uint64), ("uint64", [U64MAX, U64MAX])),
    (lambda L: L.zeros(2, dtype=L.uint64).fill_(U64MAX), ("uint64", [U64MAX, U64MAX])),
    (lambda L: L.zeros(2).fill_(U63), ("float32", [float(U63)] * 2)),
    (lambda L: L.full((2,), U63, dtype=L.float64), ("float64", [float(U63)] * 2)),
    (lambda L: L.zeros(2, dtype=L.float64) + U63, ("float64", [float(U63)] * 2)),
    (lambda L: L.ones(2) * U63, ("float32", [float(U63)] * 2)),
    (lambda L: L.zeros(2).add(1, alpha=U63), ("float32", [float(U63)] * 2)),
    (lambda L: L.ones(1, dtype=L.float64).new_full((2,), U64MAX), ("float64", [float(U64MAX)] * 2)),
    (lambda L: L.where(L.tensor([True, False]), L.zeros(2), U63), ("float32", [0.0, float(U63)])),
    (lambda L: L.clamp(L.zeros(2), max=U63), ("float32", [0.0, 0.0])),
    (lambda L: L.zeros(2).masked_fill(L.tensor([True, False]), U63), ("float32", [float(U63), 0.0])),
    (lambda L: L.zeros(3).index_fill(0, L.tensor([1]), U63), ("float32", [0.0, float(U63), 0.0])),
    (lambda L: L.linspace(0, U63, 3), ("float32", [0.0, float(2**62), float(U63)])),
    (lambda L: L.zeros(2, dtype=L.uint64) | U63, ("uint64", [U63, U63])),
    (lambda L: L.ones(2) > U63, ("bool", [False, False])),
    # integer tensors keep the low 64 bits, as a C cast (PyTorch's result)
    (lambda L: L.zeros(2, dtype=L.int64) + U63, ("int64", [-(2**63)] * 2)),
    (lambda L: L.zeros(2, dtype=L.int64) - U64MAX, ("int64", [1, 1])),
    (lambda L: L.zeros(2, dtype=L.int32) + U63, ("int32", [0, 0])),
    (lambda L: L.zeros(2, dtype=L.uint8) + U63, ("uint8", [0, 0])),
    (lambda L: L.tensor([U64MAX], dtype=L.uint64) == U64MAX, ("bool", [True])),
])
def test_uint64_range_ints_as_numbers(make, expected):
    got = both(make)
    assert got[0] == expected
    if torch is not None:
        assert got[1] == expected


@pytest.mark.parametrize("make, exc", [
    # an int infers int64, which 2**63 overflows
    (lambda L: L.full((2,), U63), RuntimeError),
    (lambda L: L.full((2,), U63, dtype=L.int64), RuntimeError),
    (lambda L: L.zeros(2, dtype=L.int64).fill_(U63), RuntimeError),
    (lambda L: L.zeros(2, dtype=L.uint32).fill_(U63), RuntimeError),
    (lambda L: L.zeros(2, dtype=L.int8).fill_(U64MAX), RuntimeError),
    # beyond 64 bits
    (lambda L: L.zeros(2) + 2**64, OverflowError),
    (lambda L: L.zeros(2).fill_(2**70), OverflowError),
    (lambda L: L.full((2,), 2**64, dtype=L.uint64), OverflowError),
    (lambda L: L.zeros(2) - 2**64, OverflowError),
    (lambda L: L.zeros(2).fill_(-(2**63) - 1), OverflowError),
    # PyTorch does not promote bool with uint64
    (lambda L: L.zeros(2, dtype=L.bool) + U63, RuntimeError),
])
def test_uint64_range_ints_refused(make, exc):
    with pytest.raises(exc):
        make(ember)
    if torch is not None:
        with pytest.raises(exc):
            make(torch)


def test_refusals_name_the_value_and_type():
    with pytest.raises(RuntimeError, match="9223372036854775808 cannot be converted to type int64"):
        ember.zeros(2, dtype=ember.int64).fill_(U63)
    with pytest.raises(OverflowError, match="does not fit in 64 bits"):
        ember.zeros(2).fill_(2**64)


def test_uint64_elements_read_back_unsigned():
    # (PyTorch's int() of such an element raises; ember gives the value)
    t = ember.tensor([U64MAX, U63], dtype=ember.uint64)
    assert t[0].item() == U64MAX
    assert int(t[0]) == U64MAX
    assert float(t[1]) == float(U63)
    # a 0-d uint64 tensor as a number in a float op
    assert (ember.zeros(1, dtype=ember.float64) + t[1]).tolist() == [float(U63)]


def test_numpy_uint64_scalars():
    # (PyTorch refuses NumPy's uint64 scalars with a TypeError; ember takes them as Python ints)
    np = pytest.importorskip("numpy")
    assert ember.full((1,), np.uint64(U64MAX), dtype=ember.uint64).tolist() == [U64MAX]
    assert ember.zeros(1, dtype=ember.float64).fill_(np.uint64(U63)).tolist() == [float(U63)]
