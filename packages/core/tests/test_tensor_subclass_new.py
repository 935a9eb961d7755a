"""Tensor subclassing as PyTorch programs write it: ``Tensor.__new__`` (the legacy constructor) in
a subclass's ``__new__``, ``__init__`` receiving the constructor's arguments,
``Tensor._make_subclass``, ``nn.Parameter`` subclasses, pickling and deep copies of subclass
instances with Python state.

Each scenario runs on a library module (ember, or torch where installed) and returns plain
values: the test asserts the explicit values, then that torch gives the same.
"""

from __future__ import annotations

import copy
import pickle
import sys
import types

import ember
import numpy as np
import pytest
from core_helpers import torch

LIBS = [ember] + ([torch] if torch is not None else [])


def _agree(scenario, expected):
    """scenario(lib) == expected for ember, and for torch where installed."""
    for lib in LIBS:
        assert scenario(lib) == expected, lib.__name__


def _text(lib, s: str) -> str:
    """A message or repr in ember's spelling (torch.X -> ember.X)."""
    return s.replace("torch._C.TensorBase", "ember.Tensor").replace("torch.", "ember.") \
        if lib is not ember else s


def _raised(lib, fn) -> tuple[str, str]:
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the outcome is compared)
        return type(e).__name__, _text(lib, str(e))
    return "no error", ""


# Picklable subclasses, one set per library (pickle finds them by module and name).
_CLASSES: dict[str, types.SimpleNamespace] = {}


def _classes(lib) -> types.SimpleNamespace:
    key = lib.__name__
    if key in _CLASSES:
        return _CLASSES[key]

    class Tagged(lib.Tensor):
        """torch.Tensor.__new__ in __new__, extra state set in __init__."""

        def __new__(cls, data, extra):
            return super().__new__(cls, data)

        def __init__(self, data, extra):
            self.extra = extra

    class Plain(lib.Tensor):
        pass

    class Slotted(lib.Tensor):
        __slots__ = ["s"]

    class Quiet(lib.Tensor):
        __torch_function__ = lib._C._disabled_torch_function_impl

    class Copyable(lib.Tensor):
        """Deep-copyable: its new_empty() keeps the type."""

        def new_empty(self, *args, **kwargs):
            return lib.Tensor.new_empty(self, *args, **kwargs).as_subclass(Copyable)

    class Meta(lib.nn.Parameter if hasattr(lib, "nn") else object):
        """A Parameter subclass with an extra attribute, built with _make_subclass."""

        def __new__(cls, data=None, requires_grad=True, meta=None):
            if data is None:
                data = lib.empty(0)
            p = lib.Tensor._make_subclass(cls, data, requires_grad)
            p.meta = meta
            return p

    class Init(lib.nn.Parameter if hasattr(lib, "nn") else object):
        """A Parameter subclass calling Parameter.__new__, with its own __init__."""

        def __new__(cls, data=None, requires_grad=True, meta=None):
            return super().__new__(cls, data, requires_grad)

        def __init__(self, data=None, requires_grad=True, meta=None):
            self.meta = meta

    ns = types.SimpleNamespace()
    for c in (Tagged, Plain, Slotted, Quiet, Copyable, Meta, Init):
        name = f"_{c.__name__}_{key}"
        c.__name__ = c.__qualname__ = name
        globals()[name] = c
        setattr(ns, c.__name__.split("_")[1], c)
    _CLASSES[key] = ns
    return ns


@pytest.fixture(autouse=True)
def _nn():
    pytest.importorskip("ember.nn")


def _name(obj) -> str:
    """A type's name without the per-library suffix."""
    n = obj.__name__ if isinstance(obj, type) else type(obj).__name__
    return n.split("_")[1] if n.startswith("_") else n


# ---- __new__ calling Tensor.__new__, __init__ with the same arguments ---------------------------
def test_new_calling_tensor_new_and_init_with_extra_arguments():
    def run(lib):
        Tagged = _classes(lib).Tagged  # noqa: N806
        t = lib.tensor([1.0, 2.0])
        a = Tagged([1.0, 2.0], 5)
        b = Tagged(t, 7)
        return [_name(a), a.extra, a.tolist(), str(a.dtype).split(".")[1],
                _name(b), b.extra, b.data_ptr() == t.data_ptr(),
                _name(a + 1), hasattr(a + 1, "extra"), _name(a.clone()), _name(a.__class__),
                isinstance(a, lib.Tensor), _name(Tagged(2, 0)), tuple(Tagged(2, 0).shape),
                str(Tagged(lib.tensor([1, 2]), 0).dtype).split(".")[1]]

    _agree(run, ["Tagged", 5, [1.0, 2.0], "float32", "Tagged", 7, True, "Tagged", False,
                 "Tagged", "Tagged", True, "Tagged", (2,), "int64"])


def test_subclass_of_a_tensor_that_requires_grad_is_a_differentiable_alias():
    def run(lib):
        Tagged = _classes(lib).Tagged  # noqa: N806
        src = lib.tensor([1.0, 2.0], requires_grad=True)
        a = Tagged(src, 0)
        (a * 3).sum().backward()
        with lib.no_grad():
            n = Tagged(src, 0)
        plain = lib.Tensor(src)
        return [a.requires_grad, a.is_leaf, type(a.grad_fn).__name__, src.grad.tolist(),
                n.requires_grad, n.is_leaf, n.grad_fn is None,
                _name(plain), plain.requires_grad, plain.is_leaf, type(plain.grad_fn).__name__]

    _agree(run, [True, False, "AliasBackward0", [3.0, 3.0], True, True, True,
                 "Tensor", True, False, "AliasBackward0"])


def test_init_receives_the_constructor_arguments():
    def run(lib):
        class Recorder(lib.Tensor):
            def __init__(self, *args, **kwargs):
                self.got = (args, kwargs)

        r = Recorder(2, 3)
        s = Recorder([1.0])
        return [r.got, tuple(r.shape), s.got, s.tolist(), _name(Recorder())]

    _agree(run, [((2, 3), {}), (2, 3), (([1.0],), {}), [1.0], "Recorder"])


def test_tensor_new_called_directly():
    def run(lib):
        Plain = _classes(lib).Plain  # noqa: N806
        t = lib.ones(2)
        x = lib.Tensor.__new__(Plain, t)
        return [_name(x), x.data_ptr() == t.data_ptr(), lib.Tensor.__new__(Plain, [1, 2]).tolist(),
                tuple(lib.Tensor.__new__(Plain, 2, 3).shape), tuple(lib.Tensor.__new__(Plain).shape),
                _raised(lib, lambda: lib.Tensor.__new__(int)),
                _raised(lib, lambda: lib.Tensor.__new__(3)),
                _raised(lib, lambda: lib.Tensor.__new__(Plain, [1.0], requires_grad=True))[0]]

    _agree(run, ["Plain", True, [1.0, 2.0], (2, 3), (0,),
                 ("TypeError", "ember.Tensor.__new__(int): int is not a subtype of ember.Tensor"),
                 ("TypeError", "ember.Tensor.__new__(X): X is not a type object (int)"),
                 "TypeError"])


def test_tensor_init_ignores_its_arguments():
    def run(lib):
        t = lib.ones(1)
        return [lib.Tensor.__init__(t, 5), t.tolist()]

    _agree(run, [None, [1.0]])


# ---- the legacy constructor ---------------------------------------------------------------------
def test_legacy_constructor_forms():
    def run(lib):
        t = lib.tensor([1.0, 2.0])
        alias = lib.Tensor(t)
        alias.add_(1)
        s = lib.ones(3).untyped_storage()
        return [tuple(lib.Tensor(2, 3).shape), lib.Tensor([1, 2]).tolist(),
                str(lib.Tensor([1, 2]).dtype).split(".")[1], t.tolist(), t._version,
                alias.data_ptr() == t.data_ptr(), str(lib.Tensor(lib.tensor([1, 2])).dtype).split(".")[1],
                lib.Tensor(lib.tensor([1.0, 2.0]).untyped_storage()).tolist(),
                lib.Tensor(s).data_ptr() == s.data_ptr(),
                tuple(lib.Tensor().shape), tuple(lib.Tensor(()).shape),
                tuple(lib.Tensor(lib.Size([2, 3])).shape), lib.Tensor((2, 3)).tolist(),
                str(lib.Tensor(np.array([1, 2])).dtype).split(".")[1],
                lib.Tensor(range(3)).tolist(), lib.Tensor(data=[1.0]).tolist(),
                tuple(lib.Tensor(size=(2,)).shape), lib.Tensor(other=t).data_ptr() == t.data_ptr(),
                lib.Tensor([lib.tensor(1.0), lib.tensor(2.0)]).tolist(),
                tuple(lib.Tensor(np.int64(2)).shape), lib.Tensor(np.array(3.0)).tolist(),
                lib.Tensor(s, device="cpu").tolist()]

    _agree(run, [(2, 3), [1.0, 2.0], "float32", [2.0, 3.0], 1, True, "int64", [1.0, 2.0], True,
                 (0,), (0,), (2, 3), [2.0, 3.0], "float32", [0.0, 1.0, 2.0], [1.0], (2,), True,
                 [1.0, 2.0], (2,), 3.0, [1.0, 1.0, 1.0]])


def test_legacy_constructor_follows_the_default_dtype():
    def run(lib):
        old = lib.get_default_dtype()
        lib.set_default_dtype(lib.float64)
        try:
            return [str(lib.Tensor([1]).dtype).split(".")[1], str(lib.Tensor(2).dtype).split(".")[1]]
        finally:
            lib.set_default_dtype(old)

    _agree(run, ["float64", "float64"])


_BAD_CALLS = [
    ((2.5,), {}), (("ab",), {}), ((2, 3.0), {}), ((2, "a"), {}), ((None,), {}), (({1: 2},), {}),
    ((True,), {}), ((True, 2), {}), ((-1,), {}), ((2, -3), {}), (([1.0],), {"requires_grad": True}),
    (([1.0],), {"dtype": "float64"}), ((np.float32(3),), {}), ((2,), {"size": (3,)}),
    ((2.0, 3), {}),
]


@pytest.mark.parametrize("args,kwargs", _BAD_CALLS)
def test_legacy_constructor_errors(args, kwargs):
    def run(lib):
        kw = {k: (getattr(lib, v) if k == "dtype" else v) for k, v in kwargs.items()}
        return _raised(lib, lambda: lib.Tensor(*args, **kw))

    got = run(ember)
    assert got[0] in ("TypeError", "RuntimeError") and got[1], got
    if torch is not None:
        assert got == run(torch)


def test_legacy_constructor_error_texts():
    assert _raised(ember, lambda: ember.Tensor(2.5)) == (
        "TypeError", "new(): data must be a sequence (got float)")
    assert _raised(ember, lambda: ember.Tensor(2, -3)) == (
        "RuntimeError", "Trying to create tensor with negative dimension -3: [2, -3]")
    assert _raised(ember, lambda: ember.Tensor(2, "a")) == (
        "TypeError", "new(): argument 'size' failed to unpack the object at pos 2 with error "
        "\"type must be tuple of ints,but got str\"")
    kind, text = _raised(ember, lambda: ember.Tensor([1.0], requires_grad=True))
    assert kind == "TypeError" and text.startswith(
        "new() received an invalid combination of arguments - got (list, requires_grad=bool), "
        "but expected one of:\n * (*, ember.device device = None)\n      didn't match because "
        "some of the keywords were incorrect: requires_grad\n * (ember.Storage storage)\n")


def test_legacy_constructor_with_device_of_a_tensor_is_refused():
    def run(lib):
        return _raised(lib, lambda: lib.Tensor(lib.ones(1), device="cpu"))

    _agree(run, ("RuntimeError", "Legacy tensor constructor of the form ember.Tensor(tensor, "
                 "device=device) is not supported.  Use ember.tensor(...) or ember.as_tensor(...) "
                 "instead."))


# ---- Tensor._make_subclass ------------------------------------------------------------------------
def test_make_subclass():
    def run(lib):
        Plain = _classes(lib).Plain  # noqa: N806
        src = lib.tensor([1.0, 2.0], requires_grad=True)
        a = lib.Tensor._make_subclass(Plain, src)
        b = lib.Tensor._make_subclass(Plain, src, True)
        c = lib.Tensor._make_subclass(Plain, src, require_grad=True)
        return [_name(a), a.requires_grad, a.is_leaf, a.grad_fn is None,
                a.data_ptr() == src.data_ptr(), b.requires_grad, b.is_leaf, c.requires_grad,
                _raised(lib, lambda: lib.Tensor._make_subclass(Plain, lib.tensor([1]), True)),
                _raised(lib, lambda: lib.Tensor._make_subclass(int, src)),
                _raised(lib, lambda: lib.Tensor._make_subclass(Plain, [1.0]))]

    _agree(run, ["Plain", False, True, True, True, True, True, True,
                 ("RuntimeError", "Only Tensors of floating point and complex dtype can require "
                  "gradients"),
                 ("TypeError", "Creating a Tensor subclass from a class that does not inherit "
                  "from Tensor is not possible. Make sure your class inherits from Tensor."),
                 ("TypeError", "_make_subclass(): argument 'data' (position 2) must be Tensor, "
                  "not list")])


def test_make_subclass_shares_the_version_counter():
    def run(lib):
        src = lib.zeros(2)
        a = lib.Tensor._make_subclass(_classes(lib).Plain, src)
        a.add_(1)
        return [src.tolist(), src._version == a._version]

    _agree(run, [[1.0, 1.0], True])


# ---- results of ops keep the subclass -------------------------------------------------------------
def test_ops_on_a_subclass_keep_it():
    def run(lib):
        Plain = _classes(lib).Plain  # noqa: N806
        b = Plain([1.0, 2.0])
        return [_name(x) for x in (b + 1, lib.ones(2) + b, lib.add(lib.ones(2), b), b.sum(), b[0],
                                   b.view(2), b.detach(), b.clone(), b.to(lib.float64),
                                   b == b, *b.split(1))] + [type(b.shape).__name__]

    _agree(run, ["Plain"] * 12 + ["Size"])


# ---- pickle, copy, deepcopy -----------------------------------------------------------------------
def test_pickle_of_a_subclass_keeps_its_type_and_state():
    def run(lib):
        ns = _classes(lib)
        b = ns.Plain([1.0, 2.0])
        b.foo = [1]
        got = pickle.loads(pickle.dumps(b))
        a = pickle.loads(pickle.dumps(ns.Tagged([3.0], 5)))
        q = ns.Quiet([1.0])
        q.k = "v"
        qq = pickle.loads(pickle.dumps(q))
        s = ns.Slotted([1.0])
        s.s = 4
        ss = pickle.loads(pickle.dumps(s))
        g = pickle.loads(pickle.dumps(ns.Plain([1.0]).requires_grad_()))
        reduced = b.__reduce_ex__(2)
        return [_name(got), got.__dict__, got.tolist(), _name(a), a.extra, a.tolist(),
                _name(qq), qq.k, _name(ss), ss.s, _name(g), g.requires_grad, g.is_leaf,
                reduced[0].__name__, _name(reduced[1][1]), reduced[1][3]]

    _agree(run, ["Plain", {"foo": [1]}, [1.0, 2.0], "Tagged", 5, [3.0], "Quiet", "v",
                 "Slotted", 4, "Plain", True, False, "_rebuild_from_type_v2", "Plain",
                 {"foo": [1]}])


def test_copy_of_a_subclass_keeps_its_state():
    def run(lib):
        b = _classes(lib).Plain([1.0, 2.0])
        b.foo = [1]
        c = copy.copy(b)
        return [_name(c), c.__dict__, c.tolist()]

    _agree(run, ["Plain", {"foo": [1]}, [1.0, 2.0]])


def test_deepcopy_of_a_subclass_follows_torch():
    def run(lib):
        ns = _classes(lib)
        c = ns.Copyable([1.0, 2.0]).requires_grad_()
        c.attrs = {"k": [1]}
        c.grad = lib.ones(2)
        d = copy.deepcopy(c)
        with lib.no_grad():
            d.add_(1)
        nonleaf = ns.Copyable([1.0]).requires_grad_() * 2
        return [_name(d), d.attrs, d.attrs["k"] is not c.attrs["k"], c.tolist(), d.tolist(),
                d.requires_grad, d.grad.tolist(),
                _raised(lib, lambda: copy.deepcopy(ns.Plain([1.0]))),
                _raised(lib, lambda: copy.deepcopy(ns.Quiet([1.0])))[0],
                _raised(lib, lambda: copy.deepcopy(nonleaf))[1][:34]]

    msg = ("The default implementation of __deepcopy__() for non-wrapper subclasses only works "
           "for subclass types that implement new_empty() and for which that function returns "
           "another instance of the same subclass. You should either properly implement "
           "new_empty() for your subclass or override __deepcopy__() if it is intended behavior "
           "for new_empty() to return an instance of a different type.")
    _agree(run, ["Copyable", {"k": [1]}, True, [1.0, 2.0], [2.0, 3.0], True, [1.0, 1.0],
                 ("RuntimeError", msg), "RuntimeError", "Only Tensors created explicitly by"])


def test_deepcopy_of_a_plain_tensor_is_unchanged():
    t = ember.tensor([1.0, 2.0])
    memo: dict = {}
    c = copy.deepcopy(t, memo)
    assert type(c) is ember.Tensor and c.tolist() == [1.0, 2.0] and c.data_ptr() != t.data_ptr()
    assert memo[id(t)] is c
    assert pickle.loads(pickle.dumps(t)).tolist() == [1.0, 2.0]


# ---- nn.Parameter subclasses ----------------------------------------------------------------------
def test_parameter_subclass_with_extra_attributes():
    def run(lib):
        ns = _classes(lib)
        p = ns.Meta(lib.ones(2), meta={"q": 1})
        p2 = ns.Init(lib.ones(2), meta=7)
        empty = ns.Init()
        return [_name(p), p.meta, p.requires_grad, p.is_leaf, isinstance(p, lib.nn.Parameter),
                isinstance(p, lib.Tensor), _name(p + 1), _name(p.clone()), _name(p.detach()),
                _text(lib, repr(p)).replace(type(p).__name__, "Meta"),
                _name(p2), p2.meta, p2.requires_grad, p2.is_leaf, _name(p2 * 2),
                tuple(empty.shape), empty.requires_grad,
                ns.Meta(lib.ones(1), requires_grad=False).requires_grad]

    _agree(run, ["Meta", {"q": 1}, True, True, True, True, "Tensor", "Tensor", "Tensor",
                 "Parameter containing:\nParameter(Meta([1., 1.], requires_grad=True))",
                 "Init", 7, True, True, "Tensor", (0,), True, False])


def test_parameter_subclass_deepcopy_and_pickle_follow_torch():
    def run(lib):
        ns = _classes(lib)
        p = ns.Meta(lib.ones(2), meta="m")
        d = copy.deepcopy(p)
        u = pickle.loads(pickle.dumps(p))
        plain = lib.nn.Parameter(lib.ones(1))
        plain.tag = "x"
        v = pickle.loads(pickle.dumps(plain))
        return [_name(d), d.meta, d.requires_grad, d.data_ptr() != p.data_ptr(),
                _name(u), u.__dict__, u.requires_grad, u.tolist(), _name(v), v.__dict__,
                _name(copy.deepcopy(ns.Init(lib.ones(1), meta=3))),
                copy.deepcopy(ns.Init(lib.ones(1), meta=3)).meta]

    # deepcopy calls type(p)(data, requires_grad): the extra argument takes its default;
    # pickling rebuilds a Parameter with the subclass's state, as PyTorch does
    _agree(run, ["Meta", None, True, True, "Parameter", {"meta": "m"}, True, [1.0, 1.0],
                 "Parameter", {"tag": "x"}, "Init", None])


def test_parameter_subclass_in_a_module():
    def run(lib):
        ns = _classes(lib)

        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = ns.Meta(lib.ones(2), meta="m")

        m = M()
        m2 = copy.deepcopy(m)
        return [[(n, _name(v)) for n, v in m.named_parameters()],
                [(n, _name(v)) for n, v in m.state_dict().items()],
                _name(m2.w), m2.w.meta, m2.w is not m.w]

    _agree(run, [[("w", "Meta")], [("w", "Tensor")], "Meta", None, True])


def test_parameter_of_a_custom_tensor_keeps_its_type():
    def run(lib):
        ns = _classes(lib)
        b = ns.Plain([1.0])
        p = lib.nn.Parameter(b)
        return [_name(p), p.requires_grad, p._is_param, isinstance(p, lib.nn.Parameter),
                isinstance(b, lib.nn.Parameter), isinstance(lib.ones(1), lib.nn.Parameter),
                p.data_ptr() == b.data_ptr(), _name(lib.nn.Parameter(lib.nn.Parameter(lib.ones(1))))]

    _agree(run, ["Plain", True, True, True, False, False, True, "Parameter"])


def test_parameter_from_a_non_leaf_is_a_leaf():
    def run(lib):
        x = lib.ones(1, requires_grad=True) * 2
        p = lib.nn.Parameter(x)
        return [p.is_leaf, p.requires_grad,
                _raised(lib, lambda: lib.nn.Parameter(lib.tensor([1])))[0],
                str(lib.nn.Parameter(lib.tensor([1]), requires_grad=False).dtype).split(".")[1]]

    _agree(run, [True, True, "RuntimeError", "int64"])


def test_parameter_of_a_list_is_refused():
    with pytest.raises(AttributeError):  # what PyTorch raises (data.detach)
        ember.nn.Parameter([1.0])
    with pytest.raises(TypeError, match="ember.Tensor"):
        ember.nn.Parameter([1.0])


# ---- plain tensors --------------------------------------------------------------------------------
def test_plain_tensor_creation_is_untouched():
    t = ember.empty(1)
    assert type(t) is ember.Tensor and type(t + 1) is ember.Tensor
    assert type(ember.Tensor(2)) is ember.Tensor and type(ember.Tensor(t)) is ember.Tensor
    assert ember.Tensor(t) is not t and ember.Tensor(t).data_ptr() == t.data_ptr()
    assert "ember.Tensor" in repr(sys.modules["ember"].Tensor)
