"""Calls that no overload of a generated binding takes raise PyTorch's TypeError (session 21):
a missing, surplus, duplicated or unknown argument is named, as PyTorch's parser does, and a
call whose count and names fit but whose types do not shows the expected signature(s) against
the types given - never pybind11's list of C++ signatures ("incompatible function arguments").
Tensor methods take no out= (only the function forms do, as in PyTorch).

The late overload behind this (python/arg_errors_py.cpp) runs in pybind11's converting pass
only, so calls that need a conversion (a NumPy scalar, an int for a float, None for a
Generator) still reach the real overload; the second half of this file pins that.
"""

from __future__ import annotations

import re

import ember
import numpy as np
import pytest

try:
    import torch
except ImportError:  # ember's side still runs
    torch = None


def _outcome(code: str, mod) -> tuple[str, str]:
    ns = {"M": mod, "np": np, "F": mod.nn.functional, "x": mod.arange(6.0).reshape(2, 3)}
    try:
        eval(code, ns)
    except Exception as e:  # noqa: BLE001 -- the class and message are what is compared
        return type(e).__name__, str(e)
    return "ok", ""


# (code, the exact message ember gives; where PyTorch has one signature it gives the same)
SAME_AS_TORCH = [
    ("x.add()", 'add() missing 1 required positional arguments: "other"'),
    ("M.softmax(x)", 'softmax() missing 1 required positional arguments: "dim"'),
    ("x.softmax()", 'softmax() missing 1 required positional arguments: "dim"'),
    ("x.transpose(0)", 'transpose() missing 1 required positional arguments: "dim1"'),
    ("M.cat()", 'cat() missing 1 required positional arguments: "tensors"'),
    ("M.full((2,))", 'full() missing 1 required positional arguments: "fill_value"'),
    ("M.topk(x)", 'topk() missing 1 required positional arguments: "k"'),
    ("x.index_select(0)", 'index_select() missing 1 required positional arguments: "index"'),
    ("M.add(x, x, x, x)", "add() takes 2 positional arguments but 4 were given"),
    ("M.sum(x, dim=0, bogus=1)", "sum() got an unexpected keyword argument 'bogus'"),
    ("x.sum(dim=0, out=x)", "sum() got an unexpected keyword argument 'out'"),
    ("x.add(x, out=x)", "add() got an unexpected keyword argument 'out'"),
]


@pytest.mark.parametrize("code,message", SAME_AS_TORCH, ids=[c for c, _ in SAME_AS_TORCH])
def test_arity_messages(code, message):
    kind, text = _outcome(code, ember)
    assert (kind, text) == ("TypeError", message)
    assert "incompatible function arguments" not in text
    if torch is not None:
        assert _outcome(code, torch)[0] == "TypeError"


# Where ember's message names the fault and PyTorch's (several overloads) lists signatures.
OTHER_FAULTS = [
    ("M.add(x)", r'add\(\) missing 1 required positional arguments: "other"'),
    ("M.mm(x)", r'mm\(\) missing 1 required positional arguments: "mat2"'),
    ("x.add(x, alpha=1, foo=2)", r"add\(\) got an unexpected keyword argument 'foo'"),
    ("x.clamp_(foo=1)", r"clamp_\(\) got an unexpected keyword argument 'foo'"),
    ("M.mm(x, x.t(), mat2=x)", r"mm\(\) got multiple values for argument 'mat2'"),
    ("x.sum(0, True, M.float32, 5)",
     r"sum\(\) takes from 0 to 2 positional arguments but 4 were given"),
    ("M.clamp()", r'clamp\(\) missing 1 required positional arguments: "input"'),
    ("M.sum(x, 0, False, 3, 4)",
     r"sum\(\) takes from 1 to 3 positional arguments but 5 were given"),
    # count and names fit, a type does not: the signature against the types given
    ("M.mm(x, 'a')",
     r"mm\(\) received an invalid combination of arguments - got \(Tensor, str\), but expected"
     r" \(Tensor input, Tensor mat2, \*, Tensor out = None\)"),
    ("M.arange()", r"arange\(\) received an invalid combination of arguments - got \(\), but "
                   r"expected one of:\n \* \(Number end, \*, ember\.dtype dtype = None"),
    ("M.mm(x, mat2=[1, 'a'])",
     r"got \(Tensor, mat2=list of \(int, str\)\), but expected"),
]


@pytest.mark.parametrize("code,pattern", OTHER_FAULTS, ids=[c for c, _ in OTHER_FAULTS])
def test_faults_named(code, pattern):
    kind, text = _outcome(code, ember)
    assert kind == "TypeError", (kind, text)
    assert re.search(pattern, text), text
    assert "incompatible function arguments" not in text and "ember._C" not in text
    if torch is not None:
        assert _outcome(code, torch)[0] == "TypeError"


def test_methods_take_no_out():
    x = ember.ones(2, 3)
    for call in (lambda: x.sum(0, out=x), lambda: x.mul(2, out=x), lambda: x.exp(out=x),
                 lambda: x.max(0, out=(x, x)), lambda: x.clamp(0, 1, out=x)):
        with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
            call()
    assert ember.equal(x, ember.ones(2, 3))  # nothing was written
    # the function forms keep out=
    out = ember.empty(3)
    assert ember.sum(x, 0, out=out) is out and out.tolist() == [2.0, 2.0, 2.0]
    r = ember.exp(ember.zeros(3), out=ember.empty(3))
    assert r.tolist() == [1.0, 1.0, 1.0]


# -- calls that need a conversion still reach the real overload ---------------------------------


def test_conversions_still_taken():
    x = ember.arange(6.0).reshape(2, 3)
    assert ember.add(x, np.float64(2)).tolist() == [[2, 3, 4], [5, 6, 7]]
    assert x.clamp(min=np.int64(1), max=4.0).tolist() == [[1, 1, 2], [3, 4, 4]]
    assert ember.nn.functional.layer_norm(x, (3,), eps=1).shape == (2, 3)  # an int for a float
    g = ember.Generator().manual_seed(0)
    a = ember.randn((2, 3), generator=g)
    b = ember.randn(2, 3, generator=ember.Generator().manual_seed(0))
    assert ember.equal(a, b) and ember.randn((2, 3), generator=None).shape == (2, 3)
    assert x.sum(np.int64(1)).tolist() == [3.0, 12.0]
    assert ember.softmax(x, dim=np.int32(1)).shape == (2, 3)
    assert x.transpose(np.int64(0), 1).shape == (3, 2)


def test_late_overloads_before_the_errors():
    x = ember.tensor([1.0, 2.0])
    # a number first (the number-first overload), a sparse operand (the sparse fallback)
    assert ember.add(1, x).tolist() == [2.0, 3.0]
    assert ember.pow(2, x).tolist() == [2.0, 4.0]
    s = ember.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    assert ember.mm(s, ember.eye(2)).tolist() == [[0.0, 2.0], [3.0, 0.0]]


def test_torch_function_subclass_sees_the_call():
    seen = []

    class Logged(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs or {})

    x = ember.ones(2).as_subclass(Logged)
    with pytest.raises(TypeError, match=r'missing 1 required positional arguments: "other"'):
        x.add()
    assert x.add(1).tolist() == [2.0, 2.0] and "add" in seen


def test_type_errors_of_named_arguments_kept():
    # the per-argument TypeErrors of session 19 come first (they are raised while converting)
    kind, text = _outcome("x.unsqueeze(True)", ember)
    assert (kind, text.split(" (")[0]) == ("TypeError",
                                          "unsqueeze(): argument 'dim' must be int, not bool")


# -- hand-written bindings: their parameters come from pybind11's docstrings --------------------

HAND_WRITTEN = [
    ("x.item(1)", r"item\(\) takes no arguments \(1 given\)"),
    ("x.dim(1)", r"dim\(\) takes no arguments \(1 given\)"),
    ("x.tolist(1)", r"tolist\(\) takes no arguments \(1 given\)"),
    ("x.detach(1)", r"detach\(\) takes no arguments \(1 given\)"),
    ("x.numel(2)", r"numel\(\) takes no arguments \(1 given\)"),
    ("x.data_ptr(1)", r"data_ptr\(\) takes no arguments \(1 given\)"),
    ("x.item(foo=1)", r"item\(\) got an unexpected keyword argument 'foo'"),
    ("x.requires_grad_(1, 2)",
     r"requires_grad_\(\) takes from 0 to 1 positional arguments but 2 were given"),
    ("x.size(1, 2)", r"size\(\) received an invalid combination of arguments - got \(int, int\)"
                     r", but expected one of:\n \* \(\)\n \* \(int\? dim\)"),
    # decimals is keyword-only, as in PyTorch
    ("x.round(1, 2)", r"round\(\) takes 0 positional arguments but 2 were given"),
    ("M.promote_types(M.float32)",
     r'promote_types\(\) missing 1 required positional arguments: "type2"'),
    ("M.can_cast(1, 2)", r"can_cast\(\) received an invalid combination of arguments - got "
                         r"\(int, int\), but expected \(ember\.dtype from_, ember\.dtype to\)"),
]


@pytest.mark.parametrize("code,pattern", HAND_WRITTEN, ids=[c for c, _ in HAND_WRITTEN])
def test_hand_written_bindings(code, pattern):
    test_faults_named(code, pattern)


def test_hand_written_bindings_still_work():
    x = ember.arange(6.0).reshape(2, 3)
    assert x.size(np.int64(1)) == 3 and x.stride(0) == 3 and x.size() == (2, 3)
    assert x[1, 2].item() == 5.0 and x.numel() == 6 and x.dim() == 2
    assert ember.promote_types(ember.int64, ember.float32) == ember.float32
    assert ember.can_cast(from_=ember.float32, to=ember.int64) is False
    assert x.round(decimals=np.int64(0)).tolist() == x.tolist()
    assert x.requires_grad_(True).requires_grad and x.requires_grad_(requires_grad=False) is x
