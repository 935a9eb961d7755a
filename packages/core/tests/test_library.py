"""ember.library (torch.library's Python API) and ember.ops: custom ops with kernels per device,
fake (meta) kernels, autograd, Library DEF/IMPL/FRAGMENT; compared with torch where it has the
same API."""

import itertools
from typing import Optional

import ember
import pytest
from ember import library

_ids = itertools.count()


@pytest.fixture
def ns():
    """A fresh operator namespace per test (the registry is global, as torch's)."""
    return f"emtest{next(_ids)}"


def _scale_op(fw, qualname):
    lib = fw.library

    @lib.custom_op(qualname, mutates_args=())
    def scale(x: fw.Tensor, factor: float, bias: Optional[fw.Tensor] = None) -> fw.Tensor:
        out = x * factor
        return out if bias is None else out + bias

    @scale.register_fake
    def _(x, factor, bias=None):
        return fw.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.factor = inputs[1]
        ctx.has_bias = inputs[2] is not None

    def backward(ctx, grad):
        return grad * ctx.factor, None, (grad if ctx.has_bias else None)

    scale.register_autograd(backward, setup_context=setup_context)
    return scale


def test_custom_op_call_schema_autograd_matches_torch(ns):
    op = _scale_op(ember, f"{ns}::scale")
    assert getattr(ember.ops, ns).scale is op
    assert op.default is op and op.schema == (
        f"{ns}::scale(Tensor x, float factor, Tensor? bias=None) -> Tensor")
    x = ember.tensor([1.0, -2.0, 3.0], requires_grad=True)
    b = ember.tensor([0.5, 0.5, 0.5], requires_grad=True)
    y = getattr(ember.ops, ns).scale(x, 2.0, bias=b)
    (y * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    got = (y.tolist(), x.grad.tolist(), b.grad.tolist())
    assert got == ([2.5, -3.5, 6.5], [2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    meta = op(ember.empty(4, 2, device="meta"), 3.0)
    assert meta.device.type == "meta" and tuple(meta.shape) == (4, 2)

    torch = pytest.importorskip("torch")
    top = _scale_op(torch, f"{ns}::scale")
    tx = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    tb = torch.tensor([0.5, 0.5, 0.5], requires_grad=True)
    ty = getattr(torch.ops, ns).scale(tx, 2.0, bias=tb)
    (ty * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert got == (ty.tolist(), tx.grad.tolist(), tb.grad.tolist())
    assert tuple(top(torch.empty(4, 2, device="meta"), 3.0).shape) == (4, 2)


@pytest.mark.parametrize("fn_src", [
    "def f(x: T, y: T, alpha: float = 1.0) -> T: ...",
    "def f(xs: list[T], dim: int) -> T: ...",
    "def f(x: T, flag: bool, n: Optional[int] = None) -> tuple[T, T]: ...",
    "def f(x: T, *, out_dtype: Optional[int] = None) -> T: ...",
])
def test_infer_schema_matches_torch(fn_src):
    torch = pytest.importorskip("torch")
    got = {}
    for fw in (ember, torch):
        scope = {"T": fw.Tensor, "Optional": Optional}
        exec(fn_src, scope)
        got[fw.__name__] = fw.library.infer_schema(scope["f"], mutates_args=())
    assert got["ember"] == got["torch"]


def test_kernels_per_device_and_errors(ns):
    @library.custom_op(f"{ns}::plus", mutates_args=(), device_types="cpu")
    def plus(x: ember.Tensor, y: ember.Tensor) -> ember.Tensor:
        return x + y

    assert plus(ember.ones(2), ember.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(NotImplementedError, match=f"{ns}::plus: no fake"):
        plus(ember.ones(2, device="meta"), ember.ones(2, device="meta"))
    plus.register_kernel("meta", lambda x, y: ember.empty_like(x))
    assert plus(ember.ones(3, device="meta"), ember.ones(3, device="meta")).device.type == "meta"

    @plus.register_kernel(["cpu"])
    def _(x, y):
        return x - y

    assert plus(ember.ones(2), ember.ones(2)).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        plus.register_kernel("tpu", lambda x, y: x)
    with pytest.raises(TypeError, match=f"{ns}::plus\\(\\): argument 'y' must be a Tensor"):
        plus(ember.ones(2), 1.0)
    with pytest.raises(TypeError, match=f"{ns}::plus\\(\\): missing a required argument"):
        plus(ember.ones(2))
    with pytest.raises(RuntimeError, match="same device"):
        plus(ember.ones(2), ember.ones(2, device="meta"))
    with pytest.raises(RuntimeError, match="already defined"):
        library.custom_op(f"{ns}::plus", lambda x: x, mutates_args=(), schema="(Tensor x) -> Tensor")
    with pytest.raises(ValueError, match="namespace::name"):
        library.custom_op("no_namespace", lambda x: x, mutates_args=(), schema="(Tensor x) -> Tensor")
    with pytest.raises(ValueError, match="has no type annotation"):
        library.custom_op(f"{ns}::bad", lambda x: x, mutates_args=())
    with pytest.raises(AttributeError, match="has no operator 'nothing'"):
        getattr(ember.ops, ns).nothing


def test_no_autograd_registered_and_wrong_gradient_count(ns):
    @library.custom_op(f"{ns}::sq", mutates_args=())
    def sq(x: ember.Tensor) -> ember.Tensor:
        return x * x

    x = ember.ones(2, requires_grad=True)
    y = sq(x)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match=f"Autograd has not been implemented for operator {ns}::sq"):
        y.sum().backward()
    sq.register_autograd(lambda ctx, g: (g, g))
    with pytest.raises(RuntimeError, match="returned 2 gradient\\(s\\), expected 1"):
        sq(x).sum().backward()

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, g):
        (saved,) = ctx.saved_tensors
        return 2 * saved * g

    sq.register_autograd(backward, setup_context=setup)
    x = ember.tensor([1.0, 3.0], requires_grad=True)
    sq(x).sum().backward()
    assert x.grad.tolist() == [2.0, 6.0]
    with ember.no_grad():
        assert not sq(x).requires_grad


def test_multiple_outputs_and_mutation(ns):
    @library.custom_op(f"{ns}::split2", mutates_args=())
    def split2(x: ember.Tensor) -> tuple[ember.Tensor, ember.Tensor]:
        return x[:1].clone(), x[1:].clone()

    a, b = split2(ember.arange(3.0))
    assert a.tolist() == [0.0] and b.tolist() == [1.0, 2.0]

    @library.custom_op(f"{ns}::bump", mutates_args=("x",))
    def bump(x: ember.Tensor, n: int) -> None:
        x.add_(n)

    assert "Tensor(a!) x" in bump.schema and bump.schema.endswith("-> ()")
    t = ember.zeros(2)
    assert bump(t, 3) is None and t.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="mutates its inputs"):
        bump.register_autograd(lambda ctx, g: g)
    with pytest.raises(ValueError, match="not arguments of the function"):
        library.custom_op(f"{ns}::bad", mutates_args=("y",))(bump._kernels[None])

    @library.custom_op(f"{ns}::bad_return", mutates_args=())
    def bad_return(x: ember.Tensor) -> ember.Tensor:
        return 3

    with pytest.raises(RuntimeError, match="returned int, the schema says Tensor"):
        bad_return(ember.ones(1))


def test_library_def_impl_fragment(ns):
    lib = library.Library(ns, "DEF")
    assert lib.define("mul3(Tensor x, *, float extra=0.0) -> Tensor") == "mul3"
    lib.impl("mul3", lambda x, extra=0.0: x * 3 + extra, "CPU")
    lib.impl("mul3", lambda x, extra=0.0: ember.empty_like(x), "Meta")
    op = getattr(ember.ops, ns).mul3
    assert op(ember.ones(2), extra=1.0).tolist() == [4.0, 4.0]
    assert op(ember.ones(2, device="meta")).device.type == "meta"
    assert op.schema == f"{ns}::mul3(Tensor x, *, float extra=0.0) -> Tensor"
    with pytest.raises(TypeError, match="too many positional"):
        op(ember.ones(2), 1.0)

    with pytest.raises(RuntimeError, match="already defined by another"):
        library.Library(ns, "DEF")
    frag = library.Library(ns, "FRAGMENT")
    frag.define("neg2(Tensor x) -> Tensor")
    impl = library.Library(ns, "IMPL")
    impl.impl(f"{ns}::neg2", lambda x: -2 * x, "CompositeImplicitAutograd")
    x = ember.ones(2, requires_grad=True)
    getattr(ember.ops, ns).neg2(x).sum().backward()  # composite: autograd of what it runs
    assert x.grad.tolist() == [-2.0, -2.0]
    with pytest.raises(RuntimeError, match="needs a 'DEF' or 'FRAGMENT'"):
        impl.define("other(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match=f"{ns}::missing is not defined"):
        impl.impl("missing", lambda x: x, "CPU")
    with pytest.raises(ValueError, match="unknown dispatch key 'TPU'"):
        impl.impl("neg2", lambda x: x, "TPU")
    with pytest.raises(ValueError, match="unsupported argument"):
        frag.define("weird(Blob x) -> Tensor")
    with pytest.raises(ValueError, match="kind must be"):
        library.Library(ns, "BOTH")

    impl._destroy()
    with pytest.raises(NotImplementedError, match="no kernel for device type 'cpu'"):
        getattr(ember.ops, ns).neg2(ember.ones(1))
    lib._destroy()
    with pytest.raises(AttributeError):
        getattr(ember.ops, ns).mul3
    library.Library(ns, "DEF")._destroy()  # the namespace is free again


def test_library_define_impl_matches_torch(ns):
    torch = pytest.importorskip("torch")
    results = []
    for fw in (ember, torch):
        lib = fw.library.Library(f"{ns}x", "DEF")
        lib.define("axpy(Tensor x, Tensor y, float a=2.0) -> Tensor")
        lib.impl("axpy", lambda x, y, a=2.0: a * x + y, "CPU")
        op = getattr(fw.ops, f"{ns}x").axpy
        results.append([op(fw.ones(2), fw.ones(2)).tolist(), op.default(fw.ones(1), fw.ones(1), 3.0)
                         .tolist()])
        if fw is ember:
            lib._destroy()
    assert results[0] == results[1]


def test_custom_op_takes_part_in_torch_function(ns):
    @library.custom_op(f"{ns}::twice", mutates_args=())
    def twice(x: ember.Tensor) -> ember.Tensor:
        return x * 2

    class Logged(ember.Tensor):
        log: list = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.log.append(getattr(func, "__name__", str(func)))
            return super().__torch_function__(func, types, args, kwargs)

    y = twice(ember.ones(2).as_subclass(Logged))
    assert type(y) is Logged and Logged.log[0] == "twice"


def test_aten_namespace():
    a, b = ember.ones(2), ember.full((2,), 3.0)
    assert ember.ops.aten.add(a, b).tolist() == [4.0, 4.0]
    assert ember.ops.aten.mul.Tensor(a, b).tolist() == [3.0, 3.0]
    assert ember.ops.aten.relu.default(ember.tensor([-1.0, 1.0])).tolist() == [0.0, 1.0]
    with pytest.raises(AttributeError, match="no operator 'not_an_op'"):
        ember.ops.aten.not_an_op
    torch = pytest.importorskip("torch")
    assert torch.ops.aten.mul.Tensor(torch.ones(2), torch.full((2,), 3.0)).tolist() == [3.0, 3.0]
