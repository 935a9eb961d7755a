"""Fixes from the ninth drop-in compatibility round (core): Tensor subclasses when ember is
imported as torch, subclass __new__ with extra arguments, ember.Tensor's module name, namedtuples
in checkpoints and get_unsafe_globals_in_checkpoint, PyTorch's grad_fn names, and
ember.backends.mha."""

from __future__ import annotations

import collections
import io
import pickle
import sys

import ember
import pytest
from ember import _serialization_objects

Pair = collections.namedtuple("Pair", ["first", "second"])


class Meters(ember.Tensor):
    """A subclass built with as_subclass in __new__, with an extra argument."""

    @staticmethod
    def __new__(cls, data, unit="m"):
        t = ember.as_tensor(data).as_subclass(cls)
        t.unit = unit
        return t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        if isinstance(out, Meters):
            out.unit = "m"
        return out


# ---- subclasses ---------------------------------------------------------------------------------
def test_subclass_new_with_extra_arguments_keeps_its_data():
    m = Meters([1.0, 2.0], "km")
    assert type(m) is Meters and m.unit == "km" and m.tolist() == [1.0, 2.0]
    out = m * 2
    assert type(out) is Meters and out.unit == "m" and out.tolist() == [2.0, 4.0]


def test_subclass_new_keeps_the_autograd_link():
    x = ember.ones(3, requires_grad=True)

    class Linked(ember.Tensor):
        @staticmethod
        def __new__(cls, src, tag):
            return src.as_subclass(cls)

    y = Linked(x * 2, "tag")
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_plain_subclass_and_parameter_construction_unchanged():
    class Plain(ember.Tensor):
        pass

    assert Plain([1.0, 2.0]).tolist() == [1.0, 2.0] and tuple(Plain(2, 3).shape) == (2, 3)
    p = ember.nn.Parameter(ember.ones(2), requires_grad=False)
    assert type(p) is ember.nn.Parameter and not p.requires_grad


def test_subclass_torch_function_runs_when_ember_is_imported_as_torch(monkeypatch):
    # a program doing `sys.modules["torch"] = ember` (or an import shim): ember's own tensors
    # are not foreign PyTorch tensors
    monkeypatch.setitem(sys.modules, "torch", ember)
    seen = []

    class Logged(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs or {})

    x = ember.ones(2).as_subclass(Logged)
    y = (x + 1).sum()
    assert type(y) is Logged and seen == ["add", "sum"]


def test_tensor_module_is_ember():
    assert ember.Tensor.__module__ == "ember"
    assert repr(ember.Tensor) == "<class 'ember.Tensor'>"
    assert pickle.loads(pickle.dumps(ember.Tensor)) is ember.Tensor
    t = pickle.loads(pickle.dumps(ember.arange(3.0)))
    assert t.tolist() == [0.0, 1.0, 2.0]


# ---- checkpoints --------------------------------------------------------------------------------
def _saved(obj) -> io.BytesIO:
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return buf


def test_namedtuple_saves_as_itself_and_needs_an_allowlist():
    base = ember.arange(4.0)
    buf = _saved({"p": Pair(base[1:3], 7), "base": base, "plain": (1, 2)})
    with pytest.raises(pickle.UnpicklingError, match="Pair"):
        ember.load(buf, weights_only=True)
    buf.seek(0)
    with ember.serialization.safe_globals([Pair]):
        back = ember.load(buf, weights_only=True)
    assert type(back["p"]) is Pair and back["p"].second == 7 and type(back["plain"]) is tuple
    # the view inside the pickled namedtuple still shares the base's storage
    back["base"][1] = 10.0
    assert back["p"].first.tolist() == [10.0, 2.0]
    buf.seek(0)
    assert type(ember.load(buf, weights_only=False)["p"]) is Pair


def test_return_types_stay_plain_containers():
    vals = ember.tensor([3.0, 1.0, 2.0]).sort()
    back = ember.load(_saved({"s": vals}), weights_only=True)
    assert back["s"][0].tolist() == [1.0, 2.0, 3.0]


def test_get_unsafe_globals_in_checkpoint():
    import fractions

    buf = _saved({"w": ember.ones(1), "p": Pair(1, 2), "q": Pair(3, fractions.Fraction(1, 2)),
                  "n": 3})
    found = ember.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(buf.getvalue()))
    assert found == [f"{__name__}.Pair", "fractions.Fraction"]
    ember.serialization.add_safe_globals([Pair])
    try:
        found = ember.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(buf.getvalue()))
    finally:
        ember.serialization.clear_safe_globals()
    assert found == ["fractions.Fraction"]
    assert ember.serialization.get_unsafe_globals_in_checkpoint(_saved({"w": ember.ones(2)})) \
        == []


def test_get_unsafe_globals_of_a_torch_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "t.pt"
    torch.save({"w": torch.ones(2), "p": Pair(1, 2), "od": collections.OrderedDict(a=1)}, path)
    assert ember.serialization.get_unsafe_globals_in_checkpoint(str(path)) == \
        [f"{__name__}.Pair"]
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(path)) == \
        [f"{__name__}.Pair"]


def test_pickle_globals_follows_the_memo():
    data = pickle.dumps([Pair(1, 2), Pair(3, 4), collections.OrderedDict()], protocol=4)
    assert _serialization_objects.pickle_globals(data) == [f"{__name__}.Pair",
                                                           "collections.OrderedDict"]
    # protocol 2 names globals with the GLOBAL opcode ("module name")
    assert _serialization_objects.pickle_globals(pickle.dumps(Pair(1, 2), protocol=2)) == \
        [f"{__name__}.Pair"]


# ---- grad_fn names -------------------------------------------------------------------------------
@pytest.mark.parametrize("expr,name", [
    (lambda w: w.max(), "MaxBackward1"),
    (lambda w: w.max(0).values, "MaxBackward0"),
    (lambda w: ember.max(w, w * 2), "MaximumBackward0"),
    (lambda w: w.min(), "MinBackward1"),
    (lambda w: w.min(1)[0], "MinBackward0"),
    (lambda w: w.var(0), "VarBackward0"),
    (lambda w: w.std(), "StdBackward0"),
    (lambda w: w.to(ember.float64), "ToCopyBackward0"),
    (lambda w: w.view(4), "ViewBackward0"),
    (lambda w: w.reshape(4), "ViewBackward0"),
    (lambda w: w.narrow(0, 0, 1), "SliceBackward0"),
    (lambda w: w.chunk(2)[0], "SplitBackward0"),
    (lambda w: w.log1p(), "Log1PBackward0"),
    (lambda w: w.norm(), "LinalgVectorNormBackward0"),
    (lambda w: w.sum(), "SumBackward0"),
    (lambda w: w * 2, "MulBackward0"),
])
def test_grad_fn_names_are_pytorchs(expr, name):
    w = ember.tensor([[0.5, 1.0], [2.0, 3.0]], requires_grad=True)
    out = expr(w)
    assert out.grad_fn.name() == name
    assert repr(out.grad_fn) == f"<{name} object>"
    assert f"grad_fn=<{name}>" in repr(out)


def test_grad_fn_names_match_torch():
    torch = pytest.importorskip("torch")
    cases = ["w.max()", "w.max(0)[0]", "w.min()", "w.var()", "w.to(lib.float64)", "w.view(4)",
             "w.narrow(1, 0, 1)", "w.chunk(2, 1)[1]", "w.expand_as(w)", "w.movedim(0, 1)",
             "w.tile(2)", "w.square()", "w.t().contiguous()", "w.log1p()"]
    for lib in (torch, ember):
        w = lib.tensor([[0.5, 1.0], [2.0, 3.0]], requires_grad=True)
        names = [eval(c, {"w": w, "lib": lib}).grad_fn.name() for c in cases]
        if lib is torch:
            ref = names
    assert names == ref


def test_graph_walks_see_the_same_names():
    x = ember.ones(3, requires_grad=True)
    y = x.double().max()
    fn = y.grad_fn
    assert fn.name() == "MaxBackward1" and fn.next_functions[0][0].name() == "ToCopyBackward0"


# ---- backends.mha --------------------------------------------------------------------------------
def test_mha_fastpath_switch():
    assert ember.backends.mha.get_fastpath_enabled() is True
    ember.backends.mha.set_fastpath_enabled(False)
    try:
        assert ember.backends.mha.get_fastpath_enabled() is False
    finally:
        ember.backends.mha.set_fastpath_enabled(True)


# ---- from_numpy --------------------------------------------------------------------------------
def test_from_numpy_warns_once_for_a_read_only_array(monkeypatch):
    import warnings

    import numpy as np
    from ember import _interop

    monkeypatch.setattr(_interop, "_warned_read_only", False)
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = ember.from_numpy(ro)
        ember.as_tensor(ro)
        ember.from_numpy(np.arange(2.0))
    assert [str(w.message).split(",")[0] for w in caught] == ["The given NumPy array is not "
                                                              "writable"]
    assert np.shares_memory(t.numpy(), ro) and t.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError, match="expected np.ndarray"):
        ember.from_numpy([1.0, 2.0])


# ---- ember.masked ------------------------------------------------------------------------------
def _masked_results(lib) -> list:
    import math

    x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    xi = lib.tensor([[1, 2, 3], [4, 5, 6]])
    m = lib.tensor([[True, False, True], [False, False, False]])
    row = lib.tensor([True, False, True])
    masked = lib.masked
    out = []

    def add(t):
        vals = [v if not (isinstance(v, float) and math.isnan(v)) else "nan"
                for v in t.flatten().tolist()]
        out.append((str(t.dtype).split(".")[-1], tuple(t.shape), vals))

    for name in ("sum", "prod", "amax", "amin", "mean", "logsumexp", "var", "std", "norm"):
        f = getattr(masked, name)
        args = (2.0,) if name == "norm" else ()
        for dim in (1, 0, None, (0, 1)):
            for keepdim in (False, True):
                add(f(x, *args, dim, keepdim=keepdim, mask=m))
        add(f(x, *args, 1, mask=row))
        add(f(x, *args, 1))
    for name in ("argmax", "argmin", "median"):
        for keepdim in (False, True):
            add(getattr(masked, name)(x, 1, keepdim=keepdim, mask=m))
        add(getattr(masked, name)(x, 1, mask=row))
    for name in ("sum", "prod", "amax", "amin", "argmax", "argmin"):
        add(getattr(masked, name)(xi, 1, mask=m))
    for name in ("softmax", "log_softmax", "softmin", "cumsum", "cumprod"):
        for dim in (0, 1):
            add(getattr(masked, name)(x, dim, mask=m))
        add(getattr(masked, name)(x, 1, mask=m, dtype=lib.float64))
    for ord in (2.0, 1.0, math.inf, -math.inf, 0.5):
        add(masked.norm(x, ord, 1, mask=m))
        add(masked.normalize(x, ord, 1, mask=m))
    add(masked.var(x, 1, correction=0, mask=m))
    add(masked.var(x, 1, False, mask=m))
    add(masked.logaddexp(x, x * 2, input_mask=m, other_mask=~m))
    add(masked.argmax(x, 1, mask=m, dtype=lib.int64))
    xr = x.clone().requires_grad_()
    (masked.sum(xr, 1, mask=m).sum() + masked.softmax(xr, 1, mask=row)[:, 0].sum()
     + masked.amax(xr, 1, mask=m)[0]).backward()
    add(xr.grad)
    return out


def test_masked_reductions():
    x = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m = ember.tensor([[True, False, True], [False, False, False]])
    assert ember.masked.sum(x, 1, mask=m).tolist() == [4.0, 0.0]
    assert ember.masked.amax(x, 1, mask=m).tolist() == [3.0, float("-inf")]
    assert ember.masked.prod(x, 1, mask=m).tolist() == [3.0, 1.0]
    mean = ember.masked.mean(x, 1, mask=m).tolist()
    assert mean[0] == 2.0 and mean[1] != mean[1]
    assert ember.masked.argmax(x, 1, mask=m).dtype is ember.float32  # torch's default
    assert ember.masked.softmax(x, 1, mask=m)[0, 1].item() == 0.0
    assert ember.masked.cumsum(x, 1, mask=m)[0].tolist() == [1.0, 1.0, 4.0]
    with pytest.raises(ValueError, match="Could not infer output dtype"):
        ember.masked.mean(ember.tensor([1, 2]), mask=ember.tensor([True, False]))
    with pytest.raises(ValueError, match="dtype bool"):
        ember.masked.sum(x, mask=ember.ones(2, 3))
    assert len(_masked_results(ember)) == 135


def test_masked_matches_torch():
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _masked_results(torch)
    got = _masked_results(ember)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g[:2] == r[:2]
        # NaNs are the string "nan" (equal as strings); the numbers equal to rounding
        assert [v for v in g[2] if isinstance(v, str)] == [v for v in r[2] if isinstance(v, str)]
        nums = [(a, b) for a, b in zip(g[2], r[2]) if not isinstance(b, str)]
        assert [a for a, _ in nums] == pytest.approx([b for _, b in nums], rel=1e-5, abs=1e-6)
