"""Custom autograd Functions (ember.autograd.Function): forward/backward and setup_context forms,
saved tensors with version checks, needs_input_grad, mark_dirty, mark_non_differentiable,
set_materialize_grads, once_differentiable, non-tensor arguments and outputs, several outputs,
higher-order gradients, and the errors for a backward that returns the wrong thing. Functions
are defined once against a module `L` (ember or torch) and compared with PyTorch where installed."""

import threading
import warnings

import ember
import numpy as np
import pytest
from core_helpers import compare, torch, val
from ember.autograd import Function, gradcheck
from ember.autograd.function import once_differentiable


def fns(L):
    """The custom Functions of these tests, built on library L."""

    class Cube(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x**2

    class ScaleShift(L.autograd.Function):  # setup_context form, non-tensor args, two outputs
        @staticmethod
        def forward(x, scale, y, shift):
            return x * scale + y, (x * y).sum() + shift

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, scale, y, _ = inputs
            ctx.scale = scale
            ctx.save_for_backward(x, y)

        @staticmethod
        def backward(ctx, g1, g2):
            x, y = ctx.saved_tensors
            gx = g1 * ctx.scale + g2 * y if ctx.needs_input_grad[0] else None
            gy = g1 + g2 * x if ctx.needs_input_grad[2] else None
            return gx, None, gy, None

    class ExpSavedOutput(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    return Cube, ScaleShift, ExpSavedOutput


def dbl(L, *vals):
    return L.tensor(list(vals), dtype=L.float64, requires_grad=True)


# ---- basics ---------------------------------------------------------------------------------


def test_forward_backward_and_grad_fn_match_torch():
    def scenario(L):
        Cube, _, _ = fns(L)
        x = dbl(L, 1.0, -2.0, 0.5)
        y = Cube.apply(x)
        y.sum().backward()
        fn = y.grad_fn
        return val(y), val(x.grad), fn.name(), type(fn).__name__, len(fn.next_functions), y.is_leaf

    y, g, name, cls, n_next, leaf = compare(scenario)
    assert name == cls == "CubeBackward" and n_next == 1 and not leaf
    np.testing.assert_allclose(g, 3 * np.array([1.0, -2.0, 0.5]) ** 2)


def test_gradcheck_of_custom_functions():
    Cube, ScaleShift, ExpSavedOutput = fns(ember)
    x = dbl(ember, 0.3, -1.2, 2.0)
    y = dbl(ember, 1.5, 0.25, -0.7)
    assert gradcheck(Cube.apply, (x,))
    assert gradcheck(ExpSavedOutput.apply, (x,))
    assert gradcheck(lambda a, b: ScaleShift.apply(a, 2.5, b, 1.0), (x, y))


def test_setup_context_form_non_tensor_args_and_two_outputs():
    def scenario(L):
        _, ScaleShift, _ = fns(L)
        x = dbl(L, 1.0, 2.0)
        y = dbl(L, 3.0, -1.0)
        a, s = ScaleShift.apply(x, 2.0, y, 5.0)
        (a.sum() * 2 + s * 3).backward()
        return val(a), val(s), val(x.grad), val(y.grad), a.grad_fn is s.grad_fn

    a, s, gx, gy, shared = compare(scenario)
    assert shared and float(s) == 1.0 * 3 + 2.0 * -1 + 5
    np.testing.assert_allclose(gx, 2 * 2.0 + 3 * np.array([3.0, -1.0]))


def test_keyword_arguments_with_setup_context():
    def scenario(L):
        _, ScaleShift, _ = fns(L)
        x = dbl(L, 1.0, 2.0)
        y = dbl(L, 3.0, -1.0)
        a, _ = ScaleShift.apply(x, 2.0, y=y, shift=0.0)
        a.sum().backward()
        return val(x.grad), val(y.grad)

    compare(scenario)


def test_needs_input_grad_and_no_graph_without_grad():
    def scenario(L):
        seen = []

        class Probe(L.autograd.Function):
            @staticmethod
            def forward(ctx, a, k, b):
                seen.append(ctx.needs_input_grad)
                return a * k + b

            @staticmethod
            def backward(ctx, g):
                seen.append(ctx.needs_input_grad)
                return g * 2, None, None

        a = dbl(L, 1.0)
        b = L.tensor([2.0], dtype=L.float64)
        out = Probe.apply(a, 2, b)
        out.sum().backward()
        with L.no_grad():
            plain = Probe.apply(a, 2, b)
        return seen, plain.requires_grad, plain.grad_fn is None, val(a.grad)

    seen, rg, no_fn, _ = compare(scenario)
    assert seen == [(True, False, False)] * 3  # under no_grad too
    assert not rg and no_fn


def test_non_tensor_outputs_pass_through_and_get_none_gradients():
    def scenario(L):
        got = []

        class WithInfo(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, "info", 7

            @staticmethod
            def backward(ctx, g, g_info, g_n):
                got.append((g_info, g_n))
                return g * 2

        x = dbl(L, 1.0, 2.0)
        y, info, n = WithInfo.apply(x)
        y.sum().backward()
        return info, n, got, val(x.grad)

    info, n, got, _ = compare(scenario)
    assert (info, n, got) == ("info", 7, [(None, None)])


def test_returning_an_input_gives_a_new_tensor_with_the_function_as_grad_fn():
    def scenario(L):
        class Identity(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 5

        x = dbl(L, 1.0, 2.0)
        y = Identity.apply(x)
        y.sum().backward()
        return y is x, x.is_leaf, y.grad_fn.name(), val(x.grad)

    same_obj, leaf, name, g = compare(scenario)
    assert not same_obj and leaf and name == "IdentityBackward" and g.tolist() == [5.0, 5.0]


def test_custom_node_is_a_graph_node_with_hooks():
    Cube, _, _ = fns(ember)
    x = dbl(ember, 2.0)
    y = Cube.apply(x)
    fn = y.grad_fn
    assert isinstance(fn, ember.autograd.graph.Node) and repr(fn) == "<CubeBackward object>"
    calls = []
    fn.register_prehook(lambda go: calls.append("pre"))
    fn.register_hook(lambda gi, go: calls.append("post") or (gi[0] * 0,))
    (fn.next_functions[0][0]).register_prehook(lambda go: calls.append("acc"))
    z = y * 2
    assert z.grad_fn.next_functions[0][0] is fn
    z.sum().backward()
    assert calls == ["pre", "post", "acc"] and x.grad.tolist() == [0.0]


# ---- saved tensors --------------------------------------------------------------------------


def test_saved_input_modified_in_place_is_caught():
    Cube, _, _ = fns(ember)
    x = dbl(ember, 1.0, 2.0)
    h = x * 1
    y = Cube.apply(h)
    with ember.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[ember.float64 \(2,\)\], which is saved by CubeBackward, is at version 1; expected version 0"):
        y.sum().backward()


def test_saved_output_modified_in_place_is_caught_and_no_cycle_leaks():
    _, _, ExpSavedOutput = fns(ember)
    before = ember.memory_allocated()
    x = dbl(ember, 0.0, 1.0)
    y = ExpSavedOutput.apply(x)
    y.sum().backward(retain_graph=True)
    np.testing.assert_allclose(val(x.grad), np.exp([0.0, 1.0]))
    with ember.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match="saved by ExpSavedOutputBackward"):
        y.sum().backward()
    del x, y
    # Saving an output does not make a reference cycle (output -> node -> ctx -> output).
    for _ in range(3):
        ExpSavedOutput.apply(dbl(ember, *range(100))).sum()
    assert ember.memory_allocated() == before


def test_saved_tensors_are_freed_after_backward_unless_retain_graph():
    Cube, _, _ = fns(ember)
    x = dbl(ember, 2.0)
    y = Cube.apply(x)
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [24.0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.grad_fn.saved_tensors


def test_save_for_backward_accepts_none_and_rejects_other_objects():
    class SavesNone(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(None, x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            none, x = ctx.saved_tensors
            assert none is None
            return g * 2

    x = dbl(ember, 1.0)
    SavesNone.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0]

    class SavesInt(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x

    with pytest.raises(TypeError, match="save_for_backward can only save Tensors .or None., but argument 1 is of type int"):
        SavesInt.apply(x)


# ---- mark_dirty / mark_non_differentiable / set_materialize_grads --------------------------


def test_mark_dirty_in_place_on_an_input():
    def scenario(L):
        class AddOne_(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        a = dbl(L, 1.0, 2.0)
        h = a * 3
        out = AddOne_.apply(h)
        (out * out).sum().backward()
        return out is h, out.grad_fn.name(), val(out), val(a.grad)

    same_obj, name, out, g = compare(scenario)
    assert same_obj and name == "AddOne_Backward"
    assert out.tolist() == [4.0, 7.0] and g.tolist() == [24.0, 42.0]


def test_mark_dirty_errors():
    class Dirty(Function):
        @staticmethod
        def forward(ctx, x, y):
            x.add_(1)
            ctx.mark_dirty(x)
            return y * 2

        @staticmethod
        def backward(ctx, g):
            return None, g * 2

    with pytest.raises(RuntimeError, match="Dirty: some Tensors marked as dirty .* were not returned"):
        Dirty.apply(ember.ones(2), dbl(ember, 1.0, 1.0))

    class InPlaceLeaf(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

    with pytest.raises(RuntimeError, match="InPlaceLeaf: a leaf Variable that requires grad has been used in an in-place operation"):
        InPlaceLeaf.apply(dbl(ember, 1.0))


def test_mark_non_differentiable():
    def scenario(L):
        got = []

        class SortLike(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                idx = (x > 0).to(x.dtype)
                ctx.mark_non_differentiable(idx)
                return x * 2, idx

            @staticmethod
            def backward(ctx, g, g_idx):
                got.append(val(g_idx))
                return g * 2

        x = dbl(L, 1.0, -1.0)
        y, idx = SortLike.apply(x)
        y.sum().backward()
        return idx.requires_grad, idx.grad_fn is None, got, val(x.grad)

    rg, no_fn, got, _ = compare(scenario)
    assert not rg and no_fn and got[0].tolist() == [0.0, 0.0]


def test_set_materialize_grads():
    def scenario(L):
        got = []

        class Two(L.autograd.Function):
            @staticmethod
            def forward(ctx, x, materialize):
                ctx.set_materialize_grads(materialize)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                got.append(None if gb is None else val(gb))
                return ga * 2 + (0 if gb is None else gb * 3), None

        for m in (True, False):
            x = dbl(L, 1.0, 1.0)
            a, _ = Two.apply(x, m)
            a.sum().backward()
        return got

    got = compare(scenario)
    assert got[0].tolist() == [0.0, 0.0] and got[1] is None


# ---- higher order ---------------------------------------------------------------------------


def test_create_graph_through_a_custom_function_matches_torch():
    def scenario(L):
        Cube, ScaleShift, _ = fns(L)
        x = dbl(L, 0.5, -1.5)
        y = dbl(L, 2.0, 3.0)
        a, s = ScaleShift.apply(Cube.apply(x), 3.0, y, 0.0)
        out = (a * a).sum() + s * s
        gx, gy = L.autograd.grad(out, [x, y], create_graph=True)
        ggx = L.autograd.grad((gx * gx).sum() + gy.sum(), [x, y])
        return val(gx), val(gy), [val(g) for g in ggx]

    compare(scenario)


def test_once_differentiable():
    def scenario(L, deco):
        class Sq(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @deco
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * g * x

        x = dbl(L, 3.0)
        y = Sq.apply(x)
        (g,) = L.autograd.grad(y, x, grad_outputs=L.ones(1, dtype=L.float64, requires_grad=True), create_graph=True)
        return g, x

    g, x = scenario(ember, once_differentiable)
    assert g.tolist() == [6.0] and g.requires_grad
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked with @once_differentiable"):
        g.sum().backward()
    if torch is not None:
        tg, _ = scenario(torch, torch.autograd.function.once_differentiable)
        assert tg.requires_grad
        with pytest.raises(RuntimeError, match="trying to differentiate twice"):
            tg.sum().backward()
    # Without create_graph it is an ordinary backward.
    x = dbl(ember, 3.0)

    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    Sq.apply(x).sum().backward()
    assert x.grad.tolist() == [6.0]


def test_custom_functions_backward_from_two_threads():
    Cube, _, _ = fns(ember)
    errors, grads = [], {}

    def work(i):
        try:
            x = ember.randn(16, dtype=ember.float64, requires_grad=True)
            for _ in range(40):
                Cube.apply(x.tanh()).sum().backward()
            grads[i] = x.grad.shape
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and len(grads) == 2


# ---- a backward that returns the wrong thing ------------------------------------------------


def make_bad(ret, nargs=1):
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, *rest):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return ret(g)

    return Bad


def test_wrong_number_of_gradients():
    x = dbl(ember, 1.0, 2.0)
    Bad = make_bad(lambda g: (g, g))
    with pytest.raises(RuntimeError, match=r"function BadBackward returned an incorrect number of gradients \(expected 1, got 2\)"):
        Bad.apply(x).sum().backward()
    Bad = make_bad(lambda g: (g, None, None))  # extra Nones are accepted
    Bad.apply(x).sum().backward()
    Bad = make_bad(lambda g: g)
    with pytest.raises(RuntimeError, match=r"expected 2, got 1"):
        Bad.apply(x, dbl(ember, 1.0)).sum().backward()


def test_wrong_shape_and_dtype_of_gradients():
    x = dbl(ember, 1.0, 2.0)
    Bad = make_bad(lambda g: ember.ones(3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match=r"Function BadBackward returned an invalid gradient at index 0 - got \(3,\) but expected shape compatible with \(2,\)"):
        Bad.apply(x).sum().backward()
    Bad = make_bad(lambda g: ember.ones(2, dtype=ember.int64))
    with pytest.raises(TypeError, match="Function BadBackward returned an invalid gradient at index 0 - expected a floating point gradient for an input of dtype ember.float64, got ember.int64"):
        Bad.apply(x).sum().backward()
    Bad = make_bad(lambda g: [1.0, 2.0])
    with pytest.raises(TypeError, match="function BadBackward returned a 'list' at position 1 where a gradient Tensor or None was expected"):
        Bad.apply(x).sum().backward()


def test_broadcastable_and_other_dtype_gradients_are_reduced_and_cast_like_torch():
    def scenario(L):
        class Loose(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return L.ones(4, 2, 3, dtype=L.float32)

        x = dbl(L, 1.0, 2.0, 3.0).reshape(1, 3)
        x.retain_grad()
        Loose.apply(x).sum().backward()
        return x.grad.dtype == L.float64, tuple(x.grad.shape), val(x.grad)

    is64, shape, g = compare(scenario)
    assert is64 and shape == (1, 3) and g.tolist() == [[8.0, 8.0, 8.0]]


def test_gradient_for_a_non_tensor_argument():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * 2, g

    with pytest.raises(RuntimeError, match="function BadBackward returned a gradient different than None at position 2, but the corresponding forward input was not a Tensor"):
        Bad.apply(dbl(ember, 1.0), 2).sum().backward()


def test_exceptions_from_forward_and_backward_propagate_unchanged():
    class Oops(Function):
        @staticmethod
        def forward(ctx, x, where):
            if where == "forward":
                raise ValueError("in forward")
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise KeyError("in backward")

    x = dbl(ember, 1.0)
    with pytest.raises(ValueError, match="in forward"):
        Oops.apply(x, "forward")
    assert ember.is_grad_enabled()  # restored after the failed forward
    with pytest.raises(KeyError, match="in backward"):
        Oops.apply(x, "").sum().backward()


def test_misuse():
    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    with pytest.raises(NotImplementedError, match="must implement either the backward or vjp"):
        NoBackward.apply(dbl(ember, 1.0)).sum().backward()

    class NoForward(Function):
        pass

    with pytest.raises(NotImplementedError, match="must implement the forward function"):
        NoForward.apply(dbl(ember, 1.0))
    with pytest.raises(RuntimeError, match=r"use the static forward/backward methods and call NoForward.apply"):
        NoForward()(dbl(ember, 1.0))
    with pytest.raises(TypeError, match="mark_non_differentiable only accepts Tensors"):

        class NonDiffInt(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_non_differentiable(3)
                return x

        NonDiffInt.apply(dbl(ember, 1.0))


def test_mark_dirty_on_a_tensor_that_is_not_an_input_warns():
    class DirtyOutput(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.mark_dirty(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = dbl(ember, 1.0)
    with pytest.warns(UserWarning, match="Only input Tensors should be given to ctx.mark_dirty"):
        y = DirtyOutput.apply(x)
    y.sum().backward()
    assert x.grad.tolist() == [2.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the warning becomes the exception (nothing left pending)
        with pytest.raises(UserWarning, match="Only input Tensors"):
            DirtyOutput.apply(x)


@pytest.mark.parametrize("libname", ["ember", "torch"])
@pytest.mark.parametrize("kind", ["input", "view"])
def test_inplace_on_output_aliasing_an_input_is_refused(libname, kind):
    """An output that is an input returned as is, or a view of one made in forward, can't be
    modified in place while grad is recorded (its history would bypass the custom backward);
    under no_grad, or after clone(), it can."""
    if libname == "torch" and torch is None:
        pytest.skip("torch not installed")
    L = ember if libname == "ember" else torch

    class Alias(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x if kind == "input" else x[:2]

        @staticmethod
        def backward(ctx, g):
            return 3 * g if kind == "input" else L.cat([3 * g, g.new_zeros(1)])

    x0 = L.ones(3, requires_grad=True)
    x = x0 * 1
    with pytest.raises(RuntimeError, match="view.*modified inplace"):
        Alias.apply(x).mul_(2)
    y = Alias.apply(x).clone()
    y.mul_(2)
    y.sum().backward()
    assert x0.grad.tolist()[:2] == [6.0, 6.0]
    with L.no_grad():
        Alias.apply(x).mul_(2)
    assert x.tolist()[:2] == [2.0, 2.0]
