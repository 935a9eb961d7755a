"""__torch_function__ (ember.overrides, csrc/python/torch_function_py.cpp): Tensor subclasses,
tensor-like classes, modes and the switches, compared with what torch does for the same code."""

from __future__ import annotations

import pickle
import threading

import ember
import ember.nn.functional as F
import pytest
from ember import overrides


def _logging_class(fw):
    """A subclass of fw.Tensor that logs func.__name__ of every call it takes part in."""

    class LoggingTensor(fw.Tensor):
        log: list = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.log.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs)

    return LoggingTensor


def _program(fw, cls):
    """The same code on ember or torch: returns what it saw (types, values)."""
    x = fw.ones(2, 3).as_subclass(cls)
    y = fw.add(x, 1).mul(2) + x
    z = y[0]
    shape = y.shape
    r = fw.nn.functional.relu(y - 4)
    m = fw.max(y, dim=0)
    c = fw.cat([fw.ones(1), x.reshape(-1)])
    return {
        "types": [type(t).__name__ for t in (y, z, r, m.values, m.indices, c)],
        "shape": tuple(shape),
        "values": [y.tolist(), r.tolist(), c.tolist()],
    }


def test_logging_subclass_matches_torch():
    L = _logging_class(ember)
    got = _program(ember, L)
    assert got["types"] == ["LoggingTensor"] * 6
    assert got["values"][0] == [[5.0] * 3] * 2
    assert L.log[:8] == ["add", "mul", "add", "__getitem__", "__get__", "sub", "relu", "max"]
    torch = pytest.importorskip("torch")
    TL = _logging_class(torch)
    want = _program(torch, TL)
    assert got == want
    assert L.log == TL.log


def test_operators_and_properties_give_torchs_funcs():
    torch = pytest.importorskip("torch")
    exprs = ["x + 1", "1 + x", "x - 1", "x * 2", "2 * x", "x / 2", "x % 2", "x ** 2", "x @ x",
             "-x", "abs(x)", "x == 1", "x != 1", "x < 1", "x >= 1", "len(x)", "x.T", "x.dtype",
             "x.requires_grad", "x.sum(dim=0)", "ember_or_torch.transpose(x, 0, 1)"]
    for fw in (ember, torch):
        cls = _logging_class(fw)
        x = fw.ones(2, 2).as_subclass(cls)
        logs = []
        for e in exprs:
            cls.log.clear()
            eval(e, {"x": x, "ember_or_torch": fw})
            logs.append(list(cls.log))
        if fw is ember:
            ember_logs = logs
    assert ember_logs == logs


def test_default_torch_function_wraps_results():
    class Sub(ember.Tensor):
        pass

    x = ember.arange(6.0).reshape(2, 3).as_subclass(Sub)
    assert type(x + 1) is Sub and type(ember.exp(x)) is Sub and type(x.t()) is Sub
    vals, idx = ember.sort(x, dim=1)
    assert type(vals) is Sub and type(idx) is Sub
    parts = ember.split(x, 1)
    assert isinstance(parts, tuple) and all(type(p) is Sub for p in parts)
    assert x.add_(1) is x  # in-place returns self
    assert x.sum().item() == 21.0 and isinstance(x.tolist(), list)
    # a plain tensor meets a subclass: the subclass wins
    assert type(ember.ones(3) * x[0]) is Sub


def test_as_subclass_skips_init_and_keeps_gradients():
    class Strict(ember.Tensor):
        def __init__(self, *args, **kwargs):  # as_subclass must not call this
            raise AssertionError("called")

    w = ember.ones(3, requires_grad=True)
    s = w.as_subclass(Strict)
    out = (s * ember.tensor([1.0, 2.0, 3.0])).sum()
    assert type(out) is Strict
    out.backward()
    assert w.grad.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match="subclass of ember.Tensor"):
        w.as_subclass(int)


def test_parameter_opts_out_like_torch():
    p = ember.nn.Parameter(ember.ones(2))
    assert type(p * 2) is ember.Tensor and type(F.linear(ember.ones(1, 2), p)) is ember.Tensor
    assert ember.nn.Parameter.__torch_function__ is ember._C._disabled_torch_function_impl
    torch = pytest.importorskip("torch")
    assert type(torch.nn.Parameter(torch.ones(2)) * 2) is torch.Tensor


def _diagonal_class(fw):
    """A tensor-like class (not a Tensor) that implements a few functions: PyTorch's
    DiagonalTensor example, written for both frameworks."""
    handled = {}

    class Diagonal:
        def __init__(self, n, value):
            self.n, self.value = n, value

        def dense(self):
            return self.value * fw.eye(self.n)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func not in handled or not all(issubclass(t, (fw.Tensor, Diagonal)) for t in types):
                return NotImplemented
            return handled[func](*args, **kwargs)

    handled[fw.mean] = lambda d, *a, **k: float(d.value) / d.n
    handled[fw.add] = lambda a, b, **k: (a.dense() if isinstance(a, Diagonal) else a) + (
        b.dense() if isinstance(b, Diagonal) else b)
    handled[fw.Tensor.add] = handled[fw.add]
    handled[fw.nn.functional.relu] = lambda d, **k: Diagonal(d.n, max(d.value, 0))
    return Diagonal


def _diagonal_program(fw):
    D = _diagonal_class(fw)
    d = D(2, 3)
    out = {
        "mean": fw.mean(d),
        "add": fw.add(d, fw.ones(2, 2)).tolist(),
        "method": fw.ones(2, 2).add(d).tolist(),
        "operator": (fw.ones(2, 2) + d).tolist(),
        "relu": fw.nn.functional.relu(D(2, -1)).value,
    }
    for bad in (lambda: fw.mul(d, 2), lambda: fw.sum(d)):
        with pytest.raises(TypeError, match="all __torch_function__ handlers returned") as err:
            bad()
        assert "Diagonal" in str(err.value)
    return out


def test_tensor_like_class_matches_torch():
    got = _diagonal_program(ember)
    assert got["mean"] == 1.5 and got["add"] == [[4.0, 1.0], [1.0, 4.0]] and got["relu"] == 0
    torch = pytest.importorskip("torch")
    assert got == _diagonal_program(torch)


def test_tensor_like_inside_a_list_and_type_order():
    seen = []

    class A:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append((cls.__name__, [t.__name__ for t in types]))
            return NotImplemented

    class B(A):
        pass

    with pytest.raises(TypeError, match="Multiple dispatch failed for 'ember.cat'"):
        ember.cat([A(), ember.ones(1), B(), A()])
    # one entry per type, the subclass before its base
    assert seen == [("B", ["B", "A"]), ("A", ["B", "A"])]
    got = ember._C._get_overloaded_args([A(), ember.ones(1), B(), 1])
    assert [type(a).__name__ for a in got] == ["B", "A", "Tensor"]


def test_disable_switches():
    L = _logging_class(ember)
    x = ember.ones(2).as_subclass(L)
    L.log.clear()
    with ember._C.DisableTorchFunctionSubclass():
        assert not ember._C._is_torch_function_enabled()
        y = x + 1
        assert not overrides.has_torch_function((x,))
    assert ember._C._is_torch_function_enabled()
    assert type(y) is ember.Tensor and L.log == []
    with ember._C.DisableTorchFunction():
        with ember._C.DisableTorchFunctionSubclass():  # nested: stays fully off
            assert type(x * 2) is ember.Tensor
        assert ember._C._torch_function_disabled_level() == 2
    assert ember._C._torch_function_disabled_level() == 0
    r = ember._C._disabled_torch_function_impl(ember.Tensor.add, (L,), (x, 1), None)
    assert type(r) is ember.Tensor and ember._C._is_torch_function_enabled()


class _Recorder(overrides.TorchFunctionMode):
    def __init__(self, tag, log):
        self.tag, self.log = tag, log

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.log.append((self.tag, func.__name__))
        return func(*args, **(kwargs or {}))


def test_mode_sees_calls_inner_first():
    log = []
    one = ember.ones(1)
    with _Recorder("outer", log), _Recorder("inner", log) as inner:
        assert overrides._get_current_function_mode_stack()[-1] is inner
        assert overrides.has_torch_function((one,))  # True for plain tensors in a mode
        y = ember.ones(2).add(1)
        F.relu(y)
    assert y.tolist() == [2.0, 2.0]
    # every call goes through the inner mode first, whose own calls reach the outer one
    assert log == [("inner", "ones"), ("outer", "ones"), ("inner", "add"), ("outer", "add"),
                   ("inner", "relu"), ("outer", "relu")]
    assert ember._C._len_torch_function_stack() == 0
    log.clear()
    ember.ones(1) + 1
    assert log == []


def test_mode_can_replace_results_and_is_disabled_by_disable_torch_function():
    class Zeros(overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is ember.Tensor.add:
                return ember.zeros(2)
            return func(*args, **(kwargs or {}))

    with Zeros():
        assert (ember.ones(2) + 1).tolist() == [0.0, 0.0]  # a + b gives Tensor.add
        assert ember.add(ember.ones(2), 1).tolist() == [2.0, 2.0]
        with ember._C.DisableTorchFunction():
            assert (ember.ones(2) + 1).tolist() == [2.0, 2.0]
        with ember._C.DisableTorchFunctionSubclass():  # modes still apply
            assert (ember.ones(2) + 1).tolist() == [0.0, 0.0]


def test_mode_exit_order_and_threads():
    a, b = _Recorder("a", []), _Recorder("b", [])
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="reverse order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    with pytest.raises(RuntimeError, match="no TorchFunctionMode"):
        a.__exit__(None, None, None)
    with pytest.raises(NotImplementedError, match="must define __torch_function__"):
        with overrides.TorchFunctionMode():
            ember.ones(1)
    # modes are per thread: another thread's calls are not seen
    log = []
    other = []
    with _Recorder("main", log):
        t = threading.Thread(target=lambda: other.append(ember.ones(2).sum().item()))
        t.start()
        t.join(timeout=60)
    assert other == [2.0] and all(tag == "main" for tag, _ in log)
    assert ("main", "sum") not in log


def test_mode_matches_torch():
    torch = pytest.importorskip("torch")

    def run(fw):
        names = []

        class M(fw.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                names.append(func.__name__)
                return func(*args, **(kwargs or {}))

        x = fw.ones(2, 2)
        with M():
            y = (x * 2).sum(dim=0).exp()
            fw.nn.functional.softmax(y, dim=0)
            fw.cat([x, x])
        return names

    assert run(ember) == run(torch)


def test_overrides_helpers():
    x = ember.ones(2)
    assert not overrides.has_torch_function((x, 1, [x, 2.0], None))
    assert not overrides.has_torch_function_unary(x)
    assert not overrides.has_torch_function_variadic(x, x)
    assert not overrides.has_torch_function((ember.nn.Parameter(ember.ones(1)),))

    class T:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return ("handled", func.__name__, args)

    assert overrides.has_torch_function((x, T()))
    assert not overrides.has_torch_function((x, [T()]))  # as torch: no look into sequences
    assert overrides.has_torch_function_variadic(x, T())
    assert overrides.is_tensor_like(x) and overrides.is_tensor_like(T())
    assert not overrides.is_tensor_like([x])

    def my_func(a, b=0):
        if overrides.has_torch_function_variadic(a, b):
            return overrides.handle_torch_function(my_func, (a, b), a, b=b)
        return a + b

    assert my_func(x).tolist() == [1.0, 1.0]
    assert my_func(T(), b=3)[0] == "handled"

    funcs = overrides.get_overridable_functions()
    assert ember.add in funcs[ember] and ember.Tensor.add in funcs[ember.Tensor]
    assert F.relu in funcs[F]
    assert ember.is_tensor in overrides.get_ignored_functions()
    assert overrides.is_tensor_method_or_property(ember.Tensor.sum)
    assert not overrides.is_tensor_method_or_property(ember.sum)
    assert overrides.resolve_name(ember.Tensor.add) == "ember.Tensor.add"
    assert overrides.resolve_name(F.relu) == "ember.nn.functional.relu"


def test_handle_torch_function_matches_torch():
    torch = pytest.importorskip("torch")

    def run(fw):
        class T:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return [func.__name__, [t.__name__ for t in types], len(args), sorted(kwargs)]

        def f(a, b, c=None):
            if fw.overrides.has_torch_function((a, b)):
                return fw.overrides.handle_torch_function(f, (a, b), a, b, c=c)
            return None

        return [f(fw.ones(1), T(), c=2), f(T(), fw.ones(1)), f(fw.ones(1), fw.ones(1)),
                fw.overrides.has_torch_function((fw.ones(1), (T(),)))]

    assert run(ember) == run(torch)


def test_wrappers_keep_function_metadata():
    import inspect

    assert ember.add.__name__ == "add" and ember.add.__wrapped__ is ember._C.add
    assert ember.Tensor.add.__name__ == "add"
    assert F.linear.__doc__ and "linear" in F.linear.__name__
    assert list(inspect.signature(F.softmax).parameters)[:2] == ["input", "dim"]
    for fn in (ember.add, F.relu, ember.Tensor.sum, ember.einsum):
        assert pickle.loads(pickle.dumps(fn)) is fn
    # Tensor methods still bind like methods, stored elsewhere too
    bound = ember.ones(2).sum
    assert bound().item() == 2.0

    class Holder:
        act = ember.relu  # a wrapped builtin does not bind, as before

    assert Holder().act(ember.tensor([-1.0])).tolist() == [0.0]


def test_wrapped_functions_raise_as_before():
    with pytest.raises(TypeError):
        ember.add("a", "b")
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        ember.ones(2) + ember.ones(3)


def test_make_subclass_in_new_matches_torch():
    def run(fw):
        class Tagged(fw.Tensor):
            def __new__(cls, data, tag):
                t = fw.Tensor._make_subclass(cls, data, True)
                t.tag = tag
                return t

        t = Tagged(fw.ones(2), "w")
        y = (t * 3).sum()
        y.backward()
        return [type(t).__name__, t.tag, t.requires_grad, t.is_leaf, type(y).__name__,
                t.grad.tolist(), type(t.grad).__name__]

    got = run(ember)
    assert got == ["Tagged", "w", True, True, "Tagged", [3.0, 3.0], "Tensor"]
    torch = pytest.importorskip("torch")
    assert got == run(torch)
    with pytest.raises(TypeError, match="does not inherit from Tensor"):  # PyTorch's words
        ember.Tensor._make_subclass(int, ember.ones(1))


def test_torch_tensors_are_not_ember_tensor_likes():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"got \(Tensor, torch\.Tensor\)"):
        ember.add(ember.ones(2), torch.ones(2))  # refused as before, no endless recursion
    assert ember.tensor(torch.ones(2).numpy()).tolist() == [1.0, 1.0]


def test_operator_falls_back_to_the_reflected_one_like_torch():
    torch = pytest.importorskip("torch")

    def run(fw):
        class Other:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return NotImplemented

            def __radd__(self, other):
                return "radd"

        out = [fw.ones(1) + Other()]
        with pytest.raises(TypeError):
            fw.add(fw.ones(1), Other())
        return out

    assert run(ember) == run(torch) == ["radd"]


def test_fft_special_and_linalg_functions_take_part():
    # As torch.fft / torch.special / torch.linalg: a subclass sees the module's own function
    # objects, results come back as the subclass, and a mode sees them too.
    import ember.fft
    import ember.special

    seen = []

    class Sub(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    x = ember.randn(4, 4).as_subclass(Sub)
    assert type(ember.fft.rfft(x)) is Sub
    assert type(ember.special.erf(x)) is Sub
    assert type(ember.linalg.inv(x)) is Sub
    assert seen[:3] == [ember.fft.rfft, ember.special.erf, ember.linalg.inv]
    table = overrides.get_overridable_functions()
    assert ember.fft.rfft in table[ember.fft] and ember.linalg.norm in table[ember.linalg]
    log = []
    with _Recorder("m", log):
        ember.linalg.norm(ember.randn(3))
    assert ("m", "norm") in log
