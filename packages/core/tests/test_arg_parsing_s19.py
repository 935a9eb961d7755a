"""Argument parsing as PyTorch 2.13's parser does it (session 19): the exception class for an
argument of the wrong type, and the message naming the op, the argument, the expected and the
given type.

Rules pinned here (each against PyTorch where it is installed, with ember's message):

* an ``int`` argument takes a Python int, a NumPy integer or a 0-dim integer tensor, and
  rejects a bool (``x.unsqueeze(True)``), a NumPy bool, a float, a bool or float tensor, a
  tensor of more dims and None with a TypeError; an int past int64 is PyTorch's ValueError
  "Overflow when unpacking long long";
* a ``bool`` argument takes only True / False (``keepdim=1`` and ``keepdim=None`` are TypeErrors);
* an ``int[]`` argument (a size, dims) takes an int or a sequence whose first element is an int:
  a bare bool or float, or a first element of another type, is a TypeError, while later elements
  may be bools (``x.view((6, True))`` is a (6, 1) view, as in PyTorch);
* the Python-level functions (ember.linalg, ember.special, the compat ops) raise the TypeError
  of an ``int`` / ``float`` / ``Tensor`` argument of the wrong type before any later error.

The rules for the generated bindings live in the casters of csrc/python/bind_support.h (named
per op and argument by tools/codegen/gen_ops.py); those of the Python functions in
ember/_argcheck.py.
"""

from __future__ import annotations

import builtins
import re

import ember
import numpy as np
import pytest

try:
    import torch
except ImportError:  # ember's side still runs
    torch = None


def _run(code: str, mod):
    """('ok', None) or (exception class name, message) of `code` run with M = mod."""
    ns = {"M": mod, "np": np, "F": mod.nn.functional,
          "x": mod.arange(6.0).reshape(2, 3), "x3": mod.ones(2, 3, 4),
          "idx": mod.zeros(2, 3, dtype=mod.int64)}
    try:
        eval(code, ns)
    except Exception as e:  # noqa: BLE001 -- the class is what is compared
        return type(e).__name__, str(e)
    return "ok", None


def _class_of(name: str) -> type:
    return getattr(builtins, name)


# (code, torch's outcome: "ok" or an exception class, a regex ember's message must match)
CASES = [
    # -- a bool, float, None or tensor where an int is expected
    ("x.unsqueeze(True)", TypeError, r"unsqueeze\(\): argument 'dim' must be int, not bool"),
    ("M.unsqueeze(x, True)", TypeError, r"unsqueeze\(\): argument 'dim' must be int, not bool"),
    ("x.unsqueeze(dim=True)", TypeError, r"argument 'dim' must be int, not bool"),
    ("x.unsqueeze(1.5)", TypeError, r"argument 'dim' must be int, not float"),
    ("x.unsqueeze(None)", TypeError, r"argument 'dim' must be int, not NoneType"),
    ("x.unsqueeze(np.bool_(True))", TypeError, r"argument 'dim' must be int, not numpy\.bool"),
    ("x.unsqueeze(M.tensor(True))", TypeError, r"argument 'dim' must be int, not Tensor"),
    ("x.unsqueeze(M.tensor(1.0))", TypeError, r"argument 'dim' must be int, not Tensor"),
    ("x.unsqueeze(M.tensor([1]))", TypeError, r"argument 'dim' must be int, not Tensor"),
    ("x.unsqueeze(np.float64(1))", TypeError, r"must be int, not numpy\.float64"),
    ("M.topk(x, True)", TypeError, r"topk\(\): argument 'k' must be int, not bool"),
    ("x.topk(None)", TypeError, r"topk\(\): argument 'k' must be int, not NoneType"),
    ("x.kthvalue(True)", TypeError, r"kthvalue\(\): argument 'k' must be int, not bool"),
    ("x.transpose(True, 0)", TypeError, r"transpose\(\): argument 'dim0' must be int, not bool"),
    ("x.select(True, 0)", TypeError, r"select\(\): argument 'dim' must be int, not bool"),
    ("x.narrow(0, 0, True)", TypeError, r"not bool|incompatible"),
    ("x.flatten(True)", TypeError, r"argument 'start_dim' must be int, not bool"),
    ("M.cumsum(x, True)", TypeError, r"cumsum\(\): argument 'dim' must be int, not bool"),
    ("x.cumprod(True)", TypeError, r"argument 'dim' must be int, not bool"),
    ("x.softmax(True)", TypeError, r"argument 'dim' must be int, not bool"),
    ("x.argmax(True)", TypeError, r"argument 'dim' must be int, not bool"),
    ("M.tril(x, True)", TypeError, r"tril\(\): argument 'diagonal' must be int, not bool"),
    ("M.diag(x, True)", TypeError, r"argument '(diagonal|offset)' must be int, not bool"),
    ("x.diagonal(True)", TypeError, r"argument 'offset' must be int, not bool"),
    ("x.chunk(True)", TypeError, r"chunk\(\): argument 'chunks' must be int, not bool"),
    ("x.index_select(True, M.tensor([0]))", TypeError, r"argument 'dim' must be int, not bool"),
    ("x.gather(True, idx)", TypeError, r"argument 'dim' must be int, not bool"),
    ("M.eye(True)", TypeError, r"eye\(\): argument 'n' must be int, not bool"),
    ("M.cat([x, x], True)", TypeError, r"cat\(\): argument 'dim' must be int, not bool"),
    ("M.stack([x, x], True)", TypeError, r"stack\(\): argument 'dim' must be int, not bool"),
    ("x.size(True)", TypeError, r"size\(\): argument 'dim' must be int, not bool"),
    ("x.stride(1.0)", TypeError, r"stride\(\): argument 'dim' must be int, not float"),
    ("x.max(True)", TypeError, None),
    # -- what an int argument does take
    ("x.unsqueeze(M.tensor(1))", "ok", None),
    ("x.unsqueeze(M.tensor(1, dtype=M.uint8))", "ok", None),
    ("x.unsqueeze(np.int64(1))", "ok", None),
    ("x.size(None)", "ok", None),
    ("x.stride(-1)", "ok", None),
    ("x.std(True)", "ok", None),  # std(unbiased: bool), another overload
    ("M.arange(True)", "ok", None),  # a Scalar, not an int
    ("x.clamp(min=True)", "ok", None),
    ("x.pow(True)", "ok", None),
    # -- ints past int64
    ("x.sum(2**70)", ValueError, r"Overflow when unpacking long long"),
    ("x.squeeze(2**70)", ValueError, r"Overflow when unpacking long long"),
    ("x.unsqueeze(2**70)", ValueError, r"Overflow when unpacking long long"),
    ("M.topk(x, 2**70)", ValueError, r"Overflow when unpacking long long"),
    ("x.size(2**70)", ValueError, r"Overflow when unpacking long long"),
    # -- bool arguments take only True / False
    ("x.sum(0, keepdim=1)", TypeError, r"argument 'keepdim' must be bool, not int"),
    ("x.sum(0, keepdim=None)", TypeError, r"argument 'keepdim' must be bool, not NoneType"),
    ("x.argsort(descending=1)", TypeError, r"argument 'descending' must be bool, not int"),
    ("x.cumsum(0).all(0, np.bool_(True))", TypeError, r"not numpy\.bool|incompatible"),
    ("x.sum(0, keepdim=True)", "ok", None),
    ("x.sort(stable=None)", "ok", None),  # sort's stable is `bool?` in PyTorch
    ("M.sort(x, stable=None)", "ok", None),
    ("x.argsort(stable=None)", TypeError, r"argument 'stable' must be bool, not NoneType"),
    # -- int[] arguments: sizes and dims
    ("M.zeros(True)", TypeError, r"zeros\(\): argument 'size' must be tuple of ints, not bool"),
    ("M.zeros(2.0)", TypeError, r"zeros\(\): argument 'size' must be tuple of ints, not float"),
    ("M.zeros((True, 2))", TypeError,
     r"argument 'size' must be tuple of ints, but found element of type bool at pos 0"),
    ("M.zeros([2.0])", TypeError,
     r"argument 'size' must be tuple of ints, but found element of type float at pos 0"),
    ("M.ones(size=[2.0])", TypeError, r"found element of type float at pos 0"),
    ("x.view(True)", TypeError, r"not bool"),
    ("x.view(6.0)", TypeError, r"not float"),
    ("x.sum((True,))", TypeError, r"sum\(\): argument 'dim' must be tuple of ints"),
    ("x.flip(0.0)", TypeError, r"must be tuple of ints"),
    ("x.roll(1.0)", TypeError, r"roll\(\): argument 'shifts' must be tuple of ints, not float"),
    ("x.roll([1.0])", TypeError,
     r"roll\(\): argument 'shifts' must be tuple of ints, but found element of type float"),
    ("x.roll((1, 2.0), (0, 1))", TypeError,
     r"roll\(\): argument 'shifts' failed to unpack the object at pos 2 .*got float"),
    ("x.view((6, True))", "ok", None),  # only the first element's type is checked
    ("x.sum([0, True])", "ok", None),
    ("M.zeros(M.tensor(2))", "ok", None),
    ("x.view(np.int64(6))", "ok", None),
    ("M.zeros(2, dtype=None)", "ok", None),
    # -- the Python-level functions: the type error comes before any later one
    ("M.combinations(x3, True, True)", TypeError, r"combinations\(\): argument 'r' must be int"),
    ("M.linalg.tensorinv((1,), 0)", TypeError, r"argument 'A' must be Tensor, not tuple"),
    ("M.mvlgamma(M.ones(2, dtype=M.bool), 'fro')", TypeError,
     r"(mvlgamma|multigammaln)\(\): argument 'p' must be int, not str"),
    ("F.channel_shuffle(M.ones(4), True)", TypeError,
     r"channel_shuffle\(\): argument 'groups' must be int, not bool"),
]


@pytest.mark.parametrize("code, want, pattern", CASES, ids=[c[0] for c in CASES])
def test_argument_types_are_parsed_as_torch_does(code, want, pattern):
    got, msg = _run(code, ember)
    if want == "ok":
        assert got == "ok", (code, got, msg)
    else:
        assert issubclass(_class_of(got), want) if hasattr(builtins, got) else False, \
            (code, got, msg)
        if pattern:
            assert re.search(pattern, msg), (code, msg)
    if torch is not None:
        tgot, tmsg = _run(code, torch)
        assert (tgot == "ok") == (want == "ok"), (code, tgot, tmsg)
        if want != "ok":
            assert issubclass(_class_of(tgot), want), (code, tgot, tmsg)


def test_int_arguments_still_take_their_usual_values():
    x = ember.arange(24.0).reshape(2, 3, 4)
    assert x.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert x.transpose(0, 2).shape == (4, 3, 2)
    assert x.sum(dim=(0, 2)).tolist() == x.sum(0).sum(1).tolist()
    assert x.topk(2).values.shape == (2, 3, 2)
    assert x.size(-1) == 4 and x.size() == (2, 3, 4) and x.stride(0) == 12
    assert x.view(np.int64(24)).shape == (24,)
    assert ember.zeros(np.int32(2), 3).shape == (2, 3)
    assert x.narrow(ember.tensor(1), 0, 2).shape == (2, 2, 4)
    assert x.sum(1, keepdim=True).shape == (2, 1, 4)


def test_sizes_are_required_as_in_torch():
    """f() is not f(()): factories and shape methods need their sizes (torch's TypeError),
    while an explicit empty tuple is a 0-d shape; x.T of a 0-d tensor is itself."""
    import warnings

    x, s = ember.ones(2, 3), ember.tensor(1.0)
    for call, name in [(lambda: ember.zeros(), "size"), (lambda: x.view(), "size"),
                       (lambda: s.permute(), "dims"), (lambda: x.flip(), "dims"),
                       (lambda: x.repeat(), "repeats"), (lambda: s.expand(), "size"),
                       (lambda: ember.rand(), "size"), (lambda: x.new_zeros(), "size")]:
        with pytest.raises(TypeError, match=f'missing 1 required positional arguments: "{name}"'):
            call()
    assert ember.zeros(()).shape == () and s.reshape(()).shape == ()
    assert ember.empty(size=()).shape == () and ember.tile(x, ()).shape == (2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert s.T.shape == () and s.H.shape == ()
    assert "deprecated on 0-D tensors" in str(caught[0].message)
