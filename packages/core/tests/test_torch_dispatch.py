"""__torch_dispatch__: TorchDispatchMode, wrapper subclasses (Tensor._make_wrapper_subclass),
the op objects handlers receive, and ember.utils._pytree; compared with PyTorch by op name."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import OrderedDict, namedtuple

import ember
import pytest
from ember.utils._python_dispatch import (
    TorchDispatchMode,
    _disable_current_modes,
    _get_current_dispatch_mode,
    _get_current_dispatch_mode_stack,
)
from ember.utils._pytree import (
    register_pytree_node,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_map_only,
    tree_unflatten,
)


def _log_mode(base: type) -> type:
    class Log(base):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls.append((func.overloadpacket.__name__, len(args), sorted(kwargs or {})))
            return func(*args, **(kwargs or {}))

    return Log


def _mlp_names(lib, mode_base: type) -> list[str]:
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
    x = lib.randn(5, 3)
    with _log_mode(mode_base)() as log:
        loss = m(x).sum()
        loss.backward()
    return [c[0] for c in log.calls]


# ---- modes --------------------------------------------------------------------------------------
def test_logging_mode_sees_forward_and_backward_ops_like_torch():
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

    ours = _mlp_names(ember, TorchDispatchMode)
    theirs = _mlp_names(torch, TorchMode)
    core = {"t", "addmm", "relu", "sum", "ones_like", "expand", "mm", "threshold_backward"}
    assert core <= set(theirs)
    assert core <= set(ours)
    # forward first, in the same order as torch (which also logs the detach that saves relu's
    # result); the backward ops come after the loss's sum
    assert "detach" in ours
    ours, theirs = ([n for n in names if n != "detach"] for names in (ours, theirs))
    assert ours[:6] == theirs[:6] == ["t", "addmm", "relu", "t", "addmm", "sum"]
    assert ours.index("threshold_backward") > ours.index("ones_like")
    assert ours.count("mm") == theirs.count("mm") == 3


def _names_seen(lib, base: type, fn) -> list[str]:
    with _log_mode(base)() as log:
        fn(lib)
    return [c[0] for c in log.calls]


# What a mode sees of factories, fills, copies, conversions, cat and matmul: the op PyTorch
# shows (not the _copy_from kernel under a composite, nor one opaque matmul).
_SEEN_LIKE_TORCH = {
    "factories": (lambda L: (L.ones(2), L.zeros(2), L.full((2,), 3.0), L.empty(2), L.arange(3),
                             L.randn(2), L.rand(2), L.eye(2), L.linspace(0, 1, 3)),
                  ["ones", "zeros", "full", "empty", "arange", "randn", "rand", "eye", "linspace"]),
    "fill_copy": (lambda L: (L.empty(2).fill_(1.0), L.empty(2).zero_(), L.empty(2).copy_(L.ones(2))),
                  ["empty", "fill_", "empty", "zero_", "empty", "ones", "copy_"]),
    "to_dtype": (lambda L: L.ones(2).to(L.float64), ["ones", "_to_copy"]),
    "cat": (lambda L: L.cat([L.ones(2), L.ones(2)]), ["ones", "ones", "cat"]),
    "mm": (lambda L: L.ones(2, 3) @ L.ones(3, 4), ["ones", "ones", "mm"]),
    "dot": (lambda L: L.ones(3) @ L.ones(3), ["ones", "ones", "dot"]),
    "bmm": (lambda L: L.ones(2, 2, 3) @ L.ones(2, 3, 4), None),
    "folded": (lambda L: L.ones(5, 2, 3) @ L.ones(3, 4), None),
    "folded_mv": (lambda L: L.ones(2, 6, 4) @ L.ones(4), None),
    "mv": (lambda L: L.ones(6, 4) @ L.ones(4), ["ones", "ones", "mv"]),
}


@pytest.mark.parametrize("case", sorted(_SEEN_LIKE_TORCH))
def test_mode_sees_composites_as_torch_does(case):
    fn, expected = _SEEN_LIKE_TORCH[case]
    ours = _names_seen(ember, TorchDispatchMode, fn)
    if expected is not None:
        assert ours == expected
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

    theirs = _names_seen(torch, TorchMode, fn)
    # the matrix products and the factories agree; views around them may be spelt differently
    # (reshape where PyTorch shows view / _unsafe_view)
    products = {"mm", "bmm", "dot", "mv", "ones", "cat", "_to_copy", "fill_", "zero_", "copy_"}
    assert [n for n in ours if n in products] == [n for n in theirs if n in products]
    if expected is not None:
        assert ours == theirs


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)),
                                    ((2, 3), (3, 4)), ((5, 2, 3), (3,)), ((5, 2, 3), (3, 4)),
                                    ((3,), (5, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)),
                                    ((5, 2, 3), (5, 3, 4))])
def test_matmul_under_a_mode_gives_matmuls_values_and_gradients(shapes):
    ember.manual_seed(0)
    a = ember.randn(*shapes[0], dtype=ember.float64, requires_grad=True)
    b = ember.randn(*shapes[1], dtype=ember.float64, requires_grad=True)
    want = ember.matmul(a, b)
    ga, gb = ember.autograd.grad(want.sum(), (a, b))
    with _log_mode(TorchDispatchMode)() as log:
        got = ember.matmul(a, b)
        ha, hb = ember.autograd.grad(got.sum(), (a, b))
    assert "matmul" not in [c[0] for c in log.calls]
    assert got.shape == want.shape and ember.allclose(got, want)
    assert ember.allclose(ha, ga) and ember.allclose(hb, gb)
    # shapes that do not fit still raise matmul's own error
    with _log_mode(TorchDispatchMode)(), pytest.raises(RuntimeError):
        ember.matmul(a, ember.ones(7, dtype=ember.float64))


def test_op_object_names_match_torch():
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

    def seen(lib, base):
        funcs = []

        class Grab(base):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                funcs.append(func)
                return func(*args, **(kwargs or {}))

        a = lib.ones(2, 2)
        with Grab():
            lib.mm(a, a)
        return funcs[0]

    ours, theirs = seen(ember, TorchDispatchMode), seen(torch, TorchMode)
    for get in (str, lambda f: f.__name__, lambda f: f.name(),
                lambda f: f.overloadpacket.__name__, lambda f: str(f.overloadpacket)):
        assert get(ours) == get(theirs)
    assert ours == ember.ops.aten.mm.default and ember.ops.aten.mm.default == ours
    assert {ember.ops.aten.mm.default: 1}.get(ours) == 1 and ours in {ember.ops.aten.mm}
    assert ours != ember.ops.aten.add.default
    assert ours._schema.startswith("aten::mm(Tensor self, Tensor mat2")
    assert ours(ember.ones(1, 2), ember.ones(2, 1)).tolist() == [[2.0]]


def test_args_and_kwargs_split_like_torch():
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode

    def calls(lib, base):
        x = lib.ones(2, 3)
        with _log_mode(base)() as log:
            lib.add(x, x)
            lib.add(x, x, alpha=2)
            x.sum(dim=0, keepdim=True)
        return log.calls

    ours, theirs = calls(ember, TorchDispatchMode), calls(torch, TorchMode)
    assert ours == theirs == [("add", 2, []), ("add", 2, ["alpha"]), ("sum", 3, [])]


def test_passthrough_mode_keeps_results_with_optional_and_list_arguments():
    torch = pytest.importorskip("torch")
    x = ember.tensor([[-1.0, 0.5], [2.0, 3.0]])
    cases = [
        lambda lib, t: lib.clamp(t, min=0.0),
        lambda lib, t: lib.clamp(t, max=1.0),
        lambda lib, t: lib.cat([t, t], 1),
        lambda lib, t: lib.max(t, 1).indices,
        lambda lib, t: t.sum(dim=(0, 1), keepdim=True),
        lambda lib, t: lib.where(t > 0, t, 0.0),
        lambda lib, t: lib.nn.functional.gelu(t, approximate="tanh"),
    ]
    log = _log_mode(TorchDispatchMode)()
    for case in cases:
        with log:
            got = case(ember, x)
        want = case(torch, torch.tensor(x.tolist()))
        assert ember.allclose(got.double(), ember.tensor(want.double().tolist(), dtype=ember.float64),
                              atol=1e-6)
    assert log.calls


def test_handler_result_replaces_the_op_and_autograd_still_records():
    class Double(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out * 2 if func.overloadpacket.__name__ == "relu" else out

    x = ember.tensor([-1.0, 3.0], requires_grad=True)
    with Double():
        y = x.relu()
    assert y.tolist() == [0.0, 6.0]
    assert y.grad_fn is not None and "Relu" in y.grad_fn.name()
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0]


def test_modes_nest_innermost_first_and_handler_runs_with_its_mode_popped():
    order: list = []
    inside: list = []

    class Tag(TorchDispatchMode):
        def __init__(self, tag: str) -> None:
            super().__init__()
            self.tag = tag

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            order.append((self.tag, func.overloadpacket.__name__))
            inside.append(_get_current_dispatch_mode())
            return func(*args, **(kwargs or {}))

    outer, inner = Tag("outer"), Tag("inner")
    x = ember.ones(3)
    with outer:
        with inner:
            assert _get_current_dispatch_mode() is inner
            assert _get_current_dispatch_mode_stack() == [outer, inner]
            r = ember.neg(x)
        assert _get_current_dispatch_mode() is outer
    assert _get_current_dispatch_mode() is None
    assert r.tolist() == [-1.0, -1.0, -1.0]
    assert order == [("inner", "neg"), ("outer", "neg")]
    assert inside == [outer, None]


def test_mode_exit_out_of_order_and_errors_propagate():
    a, b = _log_mode(TorchDispatchMode)(), _log_mode(TorchDispatchMode)()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="reverse order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    assert _get_current_dispatch_mode() is None

    class Boom(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            raise ValueError(f"no {func}")

    x = ember.ones(2)
    with pytest.raises(ValueError, match=r"no aten\.exp\.default"), Boom():
        ember.exp(x)
    assert ember.exp(ember.zeros(1)).tolist() == [1.0]  # the mode is gone

    class Missing(TorchDispatchMode):
        pass

    with pytest.raises(NotImplementedError, match="must define __torch_dispatch__"), Missing():
        x.neg()


def test_wrong_result_type_is_a_clear_error():
    class Bad(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return "nope"

    x = ember.ones(2)
    with pytest.raises(TypeError, match="__torch_dispatch__ returned str"), Bad():
        x.neg()


def test_disable_current_modes_and_threads():
    log = _log_mode(TorchDispatchMode)()
    x = ember.ones(2)
    with log:
        with _disable_current_modes() as popped:
            assert popped == [log]
            x.neg()
        x.exp()
        other: list = []
        t = threading.Thread(target=lambda: other.append(x.neg().tolist()))
        t.start()
        t.join(timeout=60)
    assert other == [[-1.0, -1.0]]
    assert [c[0] for c in log.calls] == ["exp"]  # not the disabled neg, not the other thread's


def test_plain_ops_do_not_reach_python():
    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    x = ember.ones(4, requires_grad=True)
    with Count():
        (x * 2).sum().backward()
    seen = Count.n
    assert seen >= 3
    (x * 2).sum().backward()
    assert Count.n == seen
    # In a fresh interpreter the hook is off: each op pays one branch, nothing else.
    code = ("import ember; assert not ember._C._python_dispatch_hook_on(); "
            "from ember.utils._python_dispatch import TorchDispatchMode\n"
            "with TorchDispatchMode(): assert ember._C._python_dispatch_hook_on()\n"
            "assert not ember._C._python_dispatch_hook_on()\n"
            "class S(ember.Tensor):\n"
            "    __torch_dispatch__ = ember._C._disabled_torch_dispatch_impl\n"
            "assert not ember._C._python_dispatch_hook_on()\n"
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


# ---- subclasses ---------------------------------------------------------------------------------
def _wrapper_class() -> type:
    """The classic wrapper: holds an inner tensor, unwraps the arguments, rewraps results. Made
    on first use: defining a __torch_dispatch__ subclass turns the hook on for the process."""
    if _WRAPPER:
        return _WRAPPER[0]

    class WrapperTensor(ember.Tensor):
        calls: list = []

        @staticmethod
        def __new__(cls, elem: ember.Tensor):
            r = ember.Tensor._make_wrapper_subclass(cls, elem.shape, strides=elem.stride(),
                                                    dtype=elem.dtype, device=elem.device,
                                                    requires_grad=elem.requires_grad)
            r.elem = elem
            return r

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            cls.calls.append(func.overloadpacket.__name__)

            def unwrap(e):
                return e.elem if isinstance(e, WrapperTensor) else e

            def wrap(e):
                return WrapperTensor(e) if isinstance(e, ember.Tensor) else e

            out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
            return tree_map(wrap, out)

    _WRAPPER.append(WrapperTensor)
    return WrapperTensor


_WRAPPER: list = []


def test_wrapper_subclass_metadata():
    WrapperTensor = _wrapper_class()  # noqa: N806
    inner = ember.randn(3, 4).t()
    w = WrapperTensor(inner)
    assert type(w) is WrapperTensor
    assert w.shape == (4, 3) and w.stride() == (1, 4)
    assert w.dtype == ember.float32 and w.device == ember.device("cpu")
    assert w.dim() == 2 and w.numel() == 12 and not w.requires_grad
    assert repr(w).startswith("WrapperTensor(elem=tensor(") and str(w) == repr(w)
    r = WrapperTensor(ember.ones(2, dtype=ember.float64)).requires_grad_()
    assert r.requires_grad and r.is_leaf and r.dtype == ember.float64
    with pytest.raises(TypeError, match="subclass of ember.Tensor"):
        ember.Tensor._make_wrapper_subclass(int, (2,))


def test_wrapper_subclass_ops_and_backward_match_plain_tensors():
    WrapperTensor = _wrapper_class()  # noqa: N806
    ember.manual_seed(1)
    a0, b0 = ember.randn(3, 4), ember.randn(4, 2)
    a = WrapperTensor(a0.clone()).requires_grad_()
    b = WrapperTensor(b0.clone())
    WrapperTensor.calls.clear()
    out = ((a @ b) + 1).relu().sum()
    assert type(out) is WrapperTensor and out.grad_fn is not None
    out.backward()
    assert type(a.grad) is WrapperTensor and a.grad.grad_fn is None
    ref_a = a0.clone().requires_grad_()
    ref = ((ref_a @ b0) + 1).relu().sum()
    ref.backward()
    assert abs(out.elem.item() - ref.item()) < 1e-5
    assert ember.allclose(a.grad.elem, ref_a.grad)
    assert {"matmul", "add", "relu", "sum", "threshold_backward", "mm"} <= set(WrapperTensor.calls)
    # gradients accumulate through the subclass too
    ((a * 2).sum()).backward()
    assert ember.allclose(a.grad.elem, ref_a.grad + 2)


def test_wrapper_subclass_mixed_with_plain_tensors_and_in_mode():
    WrapperTensor = _wrapper_class()  # noqa: N806
    w = WrapperTensor(ember.ones(2, 2))
    r = w + ember.full((2, 2), 3.0)
    assert type(r) is WrapperTensor and r.elem.tolist() == [[4.0, 4.0], [4.0, 4.0]]
    r2 = ember.cat([w, w])
    assert type(r2) is WrapperTensor and r2.shape == (4, 2)
    # composites that allocate their result, views and detach keep the subclass too
    for r3 in (ember.stack([w, w]), w.t().contiguous(), w.view(4), w.detach(), w.clone(),
               ember.nn.functional.mse_loss(w, w), ember.softmax(w, 1)):
        assert type(r3) is WrapperTensor and r3.shape == r3.elem.shape
    assert ember.stack([w, w]).elem.shape == (2, 2, 2)
    log = _log_mode(TorchDispatchMode)()
    with log:
        s = (w * w).sum()
    assert type(s) is WrapperTensor and s.elem.item() == 4.0
    # the mode sees the wrapper's ops, then its handler's call reaches the subclass
    assert [c[0] for c in log.calls][:2] == ["mul", "sum"]


def test_wrapper_subclass_indexing_item_and_view_gradients():
    WrapperTensor = _wrapper_class()  # noqa: N806
    x = ember.arange(24.0).reshape(2, 3, 4)
    w = WrapperTensor(x.clone())
    for idx in (0, -1, (0, 1), (slice(None), 1), (None, 0), (Ellipsis, 1),
                (0, Ellipsis, None, slice(1, 3)), (slice(None, None, 2),),
                (1, slice(0, 3, 2), Ellipsis), (Ellipsis,)):
        got = w[idx]
        assert type(got) is WrapperTensor and got.shape == x[idx].shape, idx
        assert got.elem.tolist() == x[idx].tolist(), idx
    with pytest.raises(IndexError, match="out of bounds"):
        w[5]
    assert w[1, 2, 3].item() == 23.0
    assert float(w[0, 0, 1]) == 1.0 and bool(w[0, 0, 1]) and int(w[1, 0, 0]) == 12
    s = WrapperTensor(ember.zeros(2, 3))
    s[0] = 5.0
    s[1, 1:] = ember.tensor([7.0, 8.0])
    s[..., 0, None] = WrapperTensor(ember.full((2, 1), 1.0))
    assert s.elem.tolist() == [[1.0, 5.0, 5.0], [1.0, 7.0, 8.0]]
    picked = w[ember.tensor([0, 1])]  # tensor indices alone: aten.index.Tensor on the subclass
    assert type(picked) is WrapperTensor
    assert picked.elem.tolist() == x[ember.tensor([0, 1])].tolist()
    cols = w[:, ember.tensor([2])]
    assert cols.elem.tolist() == x[:, ember.tensor([2])].tolist()
    for idx in [(slice(0, 1), ember.tensor([0])), (1, ember.tensor([2, 0])),  # basic then index
                (None, ember.tensor([1]), ..., 0), (ember.tensor([0, 1]), slice(1, 3), True),
                (x > 10,), (ember.tensor(1), ember.tensor([0]))]:
        got = w[idx]
        assert type(got) is WrapperTensor and got.elem.tolist() == x[idx].tolist(), idx
    t = WrapperTensor(ember.zeros(3, 4))
    t[ember.tensor([True, False, True])] = 2.0  # a mask and a number: masked_fill_
    t[1, ember.tensor([0, 3])] = WrapperTensor(ember.tensor([5.0, 6.0]))  # index_put_
    t[:, ember.tensor([1])] = ember.tensor([[7.0], [8.0], [9.0]])
    assert t.elem.tolist() == [[2.0, 7.0, 2.0, 2.0], [5.0, 8.0, 0.0, 6.0], [2.0, 9.0, 2.0, 2.0]]
    g = WrapperTensor(ember.ones(3, 4)).requires_grad_()
    g[1, 1:3].sum().backward()
    assert type(g.grad) is WrapperTensor
    assert g.grad.elem.tolist() == [[0.0] * 4, [0.0, 1.0, 1.0, 0.0], [0.0] * 4]


def test_wrapper_temporary_saved_for_backward_keeps_its_class():
    WrapperTensor = _wrapper_class()  # noqa: N806
    ember.manual_seed(2)
    lin = ember.nn.Linear(3, 2)
    x = ember.randn(4, 3)
    out = lin(WrapperTensor(x.clone()))  # the wrapper dies; autograd keeps its tensor
    assert type(out) is WrapperTensor
    out.sum().backward()
    assert type(lin.weight.grad) is WrapperTensor
    ref = ember.nn.Linear(3, 2)
    ref.load_state_dict(lin.state_dict())
    ref(x).sum().backward()
    assert ember.allclose(lin.weight.grad.elem, ref.weight.grad)
    assert ember.allclose(lin.bias.grad.elem if type(lin.bias.grad) is WrapperTensor
                          else lin.bias.grad, ref.bias.grad)


def test_mode_sees_indexing_as_view_ops_and_item():
    x = ember.arange(6.0).reshape(2, 3)
    with _log_mode(TorchDispatchMode)() as log:
        y = x[1, ::2]
        v = x.sum().item()
    assert y.tolist() == [3.0, 5.0] and v == 15.0
    names = [c[0] for c in log.calls]
    assert names[0] == "select" and "_local_scalar_dense" in names


def test_subclass_returning_notimplemented_errors_clearly():
    torch = pytest.importorskip("torch")

    def make(lib):
        class Refuse(lib.Tensor):
            @staticmethod
            def __new__(cls, elem):
                return lib.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype)

            @classmethod
            def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
                return NotImplemented

        return Refuse

    for lib in (torch, ember):
        refuse = make(lib)(lib.ones(2))
        with pytest.raises(TypeError, match=r"Multiple dispatch failed for '(torch\._ops\.)?aten\.add"):
            lib.add(refuse, refuse)


def test_torch_function_runs_before_torch_dispatch():
    seen: list = []

    class Both(ember.Tensor):
        @staticmethod
        def __new__(cls, elem):
            r = ember.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype)
            r.elem = elem
            return r

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append("function:" + func.__name__)
            return super().__torch_function__(func, types, args, kwargs or {})

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            seen.append("dispatch:" + func.overloadpacket.__name__)
            raw = [a.elem if isinstance(a, Both) else a for a in args]
            return Both(func(*raw, **(kwargs or {})))

    r = ember.neg(Both(ember.ones(2)))
    assert type(r) is Both and r.elem.tolist() == [-1.0, -1.0]
    assert seen[:2] == ["function:neg", "dispatch:neg"]


# ---- pytree -------------------------------------------------------------------------------------
def test_pytree_round_trip_and_maps():
    pytest.importorskip("torch")
    from torch.utils import _pytree as tp

    Point = namedtuple("Point", "x y")
    tree = {"a": [1, (2, 3)], "b": None, "c": OrderedDict(z=4, y=Point(5, 6))}
    leaves, spec = tree_flatten(tree)
    assert leaves == tp.tree_flatten(tree)[0] == [1, 2, 3, None, 4, 5, 6]
    scaled = [v and v * 10 for v in leaves]
    back = tree_unflatten(scaled, spec)
    assert back == tp.tree_unflatten(scaled, tp.tree_flatten(tree)[1])
    assert type(back["c"]["y"]) is Point
    assert tree_map(lambda v, w: v + w, [1, (2,)], [10, (20,)]) == [11, (22,)]
    assert tree_map_only(int, str, [1, 2.5, ("x", 3)]) == ["1", 2.5, ("x", "3")]
    assert tree_leaves([1, [2, [3]]], is_leaf=lambda v: v == [3]) == [1, 2, [3]]
    with pytest.raises(ValueError, match="same structure"):
        tree_map(lambda v, w: v, [1, 2], [1])
    with pytest.raises(ValueError, match="needs 7 leaves"):
        tree_unflatten([1], spec)

    class Box:
        def __init__(self, v):
            self.v = v

    register_pytree_node(Box, lambda b: ([b.v], None), lambda c, _: Box(*c))
    assert tree_map(lambda v: v + 1, [Box(1)])[0].v == 2
    with pytest.raises(ValueError, match="already registered"):
        register_pytree_node(Box, lambda b: ([b.v], None), lambda c, _: Box(*c))
