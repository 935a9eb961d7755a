"""An op without a kernel for a dtype raises ``ember.DtypeNotImplementedError``: a
NotImplementedError (and so a RuntimeError), as PyTorch raises there, and a TypeError, as ember
raised before, so ``except`` clauses written for either keep working."""

from __future__ import annotations

import ember
import pytest

CASES = [
    ("floor of complex", lambda M: M.ones(3, dtype=M.complex128).floor()),
    ("erf_ of complex", lambda M: M.ones(3, dtype=M.complex64).erf_()),
    ("shift of complex", lambda M: M.ones(2, dtype=M.complex128).bitwise_left_shift(
        M.ones(2, dtype=M.complex128))),
    ("arange of bool", lambda M: M.arange(3, dtype=M.bool)),
]


def test_the_class_is_both():
    cls = ember.DtypeNotImplementedError
    assert issubclass(cls, NotImplementedError) and issubclass(cls, RuntimeError)
    assert issubclass(cls, TypeError)
    assert cls is ember._C.DtypeNotImplementedError


@pytest.mark.parametrize("what,call", CASES, ids=[c[0] for c in CASES])
def test_ops_raise_it_naming_op_and_dtype(what, call):
    with pytest.raises(ember.DtypeNotImplementedError, match="not implemented for dtype") as info:
        call(ember)
    assert isinstance(info.value, NotImplementedError) and isinstance(info.value, TypeError)


@pytest.mark.parametrize("what,call", CASES, ids=[c[0] for c in CASES])
def test_torch_raises_not_implemented_there_too(what, call):
    torch = pytest.importorskip("torch")
    with pytest.raises(NotImplementedError):
        call(torch)
