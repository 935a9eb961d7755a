"""The recorder and the op-to-ONNX mapping behind ``ember.onnx.export``.

How it works: while the model runs once, the public functions of ``ember``, ``ember._C`` and
``ember.nn.functional``, the methods and operators of ``Tensor``, and the ``forward`` of the
recurrent modules (exported whole as ONNX ``LSTM`` / ``GRU``) are replaced by recording
wrappers. Only the outermost call is recorded (an ``F.linear`` is one op, not the matmul inside
it). A call whose tensor arguments are all constants (parameters, buffers, tensors made inside
``forward``) is not recorded: its result is a constant, stored as an initializer when a recorded
op uses it (constant folding). A recorded op without a mapping raises
:class:`UnsupportedOperatorError` naming it.

Underneath, the dispatcher's op observer (``ember._C._set_op_observer``, generated into every
``ops::`` wrapper) reports each outermost op with its tensors: an op on traced data that no
wrapper saw (a function reference kept before the export) is mapped when its tensors alone
define it and refused otherwise, so traced values are never baked in as constants.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import threading
from typing import Any, Callable, Iterator, Mapping, Sequence

import ember
from ember import Tensor

__all__ = ["UnsupportedOperatorError", "export", "is_in_onnx_export"]

_INT64_MAX = 2**63 - 1
_STATE = threading.local()


class UnsupportedOperatorError(RuntimeError):
    """An op the model ran on traced data has no ONNX mapping in ``ember.onnx.export``."""


def is_in_onnx_export() -> bool:
    """Whether ``ember.onnx.export`` is recording on this thread.

    >>> ember.onnx.is_in_onnx_export()
    False
    """
    return getattr(_STATE, "tracer", None) is not None


def _np() -> Any:
    import numpy as np

    return np


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "ember.onnx.export needs the 'onnx' package: pip install onnx (or ember-core[onnx])"
        ) from e
    return onnx


def _np_dtype(t: Tensor) -> Any:
    np = _np()
    table = {
        ember.float32: np.float32, ember.float64: np.float64, ember.float16: np.float16,
        ember.int64: np.int64, ember.int32: np.int32, ember.int16: np.int16, ember.int8: np.int8,
        ember.uint8: np.uint8, ember.bool: np.bool_,
    }
    try:
        return np.dtype(table[t.dtype])
    except KeyError:
        raise UnsupportedOperatorError(f"ember.onnx.export: dtype {t.dtype} is not supported") from None


def _flat_tensors(v: Any) -> list[Tensor]:
    if isinstance(v, Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flat_tensors(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _flat_tensors(x)]
    return []


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def _arg(args: Sequence[Any], kwargs: Mapping[str, Any], i: int, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[i] if i < len(args) else default


def _ints(v: Any, n: int) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    vs = [int(x) for x in v]
    return vs * n if len(vs) == 1 and n > 1 else vs


def _dims(v: Any) -> list[int]:
    """Sizes given as varargs or one sequence (``view(2, 3)`` / ``view((2, 3))``)."""
    if len(v) == 1 and isinstance(v[0], (list, tuple)) or len(v) == 1 and hasattr(v[0], "__iter__"):
        return [int(x) for x in v[0]]
    return [int(x) for x in v]


class _Graph:
    """ONNX nodes and initializers being built, and which tensors they stand for."""

    def __init__(self, opset: int, param_names: dict[int, str]) -> None:
        self.opset = opset
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.used: set[str] = set()
        self.values: dict[int, str] = {}  # id(tensor) -> value name (traced data)
        self.consts: dict[int, str] = {}  # id(tensor) -> initializer name
        self.poisoned: dict[int, str] = {}
        self.dtypes: dict[str, Any] = {}
        self.keep: list[Any] = []  # keeps every seen tensor alive, so ids stay unique
        self.param_names = param_names
        self.count = 0

    def fresh(self, base: str) -> str:
        base = base.replace(" ", "_")
        name = base
        while name in self.used:
            self.count += 1
            name = f"{base}_{self.count}"
        self.used.add(name)
        return name

    def node(self, op: str, inputs: Sequence[str], n_out: int = 1, dtype: Any = None, **attrs: Any) -> Any:
        onnx = _onnx()
        outs = [self.fresh(f"/{op}_out") for _ in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(onnx.helper.make_node(op, list(inputs), outs, name=self.fresh(f"/{op}"), **attrs))
        if dtype is not None:
            for o in outs:
                self.dtypes[o] = dtype
        elif inputs and inputs[0] in self.dtypes:
            for o in outs:
                self.dtypes[o] = self.dtypes[inputs[0]]
        return outs if n_out != 1 else outs[0]

    def const(self, array: Any, base: str = "const") -> str:
        onnx, np = _onnx(), _np()
        array = np.asarray(array)
        name = self.fresh(base)
        self.inits.append(onnx.numpy_helper.from_array(array, name))
        self.dtypes[name] = array.dtype
        return name

    def ints(self, values: Sequence[int], base: str = "shape") -> str:
        return self.const(_np().array(list(values), dtype=_np().int64), base)

    def is_dyn(self, t: Any) -> bool:
        return isinstance(t, Tensor) and (id(t) in self.values or id(t) in self.poisoned)

    def tensor_in(self, t: Tensor) -> str:
        key = id(t)
        if key in self.poisoned:
            raise UnsupportedOperatorError(self.poisoned[key])
        if key in self.values:
            return self.values[key]
        if key not in self.consts:
            arr = t.detach().cpu().numpy().copy()
            self.keep.append(t)
            self.consts[key] = self.const(arr, self.param_names.get(key, "const"))
        return self.consts[key]

    def bind(self, t: Tensor, name: str) -> None:
        self.keep.append(t)
        self.poisoned.pop(id(t), None)
        self.values[id(t)] = name
        self.dtypes.setdefault(name, _np_dtype(t))

    def poison(self, t: Tensor, why: str) -> None:
        self.keep.append(t)
        self.values.pop(id(t), None)
        self.poisoned[id(t)] = why

    def cast(self, name: str, dtype: Any) -> str:
        if self.dtypes.get(name) == dtype:
            return name
        onnx = _onnx()
        return self.node("Cast", [name], dtype=dtype, to=onnx.helper.np_dtype_to_tensor_dtype(dtype))

    def operand(self, v: Any, dtype: Any) -> str:
        """A tensor or Python number as a value of `dtype`."""
        if isinstance(v, Tensor):
            return self.cast(self.tensor_in(v), dtype)
        return self.const(_np().array(v, dtype=dtype), "scalar")

    def reduce(self, op: str, x: str, axes: Sequence[int] | None, keepdims: bool) -> str:
        if axes is None:
            return self.node(op, [x], keepdims=int(keepdims))
        if op == "ReduceSum" or self.opset >= 18:
            return self.node(op, [x, self.ints(axes, "axes")], keepdims=int(keepdims))
        return self.node(op, [x], axes=list(axes), keepdims=int(keepdims))


# ---- the mapping ----------------------------------------------------------------------------

Handler = Callable[[_Graph, tuple, dict, Any], Any]
_HANDLERS: dict[str, Handler] = {}


def _handles(*names: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for n in names:
            _HANDLERS[n] = fn
        return fn

    return deco


def _binary(op: str, reverse: bool = False) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
        a, b = args[0], _arg(args, kwargs, 1, "other")
        rounding = kwargs.get("rounding_mode")
        if rounding is not None:
            if op != "Div" or rounding != "floor" or not out.is_floating_point():
                raise UnsupportedOperatorError(
                    f"ember.onnx.export: div with rounding_mode={rounding!r} on {out.dtype} is not supported"
                )
            return g.node("Floor", [_binary("Div")(g, (a, b), {}, out)])
        if reverse:
            a, b = b, a
        dt = _np_dtype(out)
        if op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
            dt = _np_dtype(a if isinstance(a, Tensor) else b)
        alpha = kwargs.get("alpha", 1)
        xa = g.operand(a, dt)
        xb = g.operand(b, dt)
        if alpha != 1:
            xb = g.node("Mul", [xb, g.operand(alpha, dt)])
        return g.node(op, [xa, xb], dtype=_np_dtype(out))

    return h


for _names, _op in (
    (("add", "__add__", "__iadd__"), "Add"), (("sub", "subtract", "__sub__", "__isub__"), "Sub"),
    (("mul", "multiply", "__mul__", "__imul__"), "Mul"),
    (("div", "divide", "true_divide", "__truediv__", "__itruediv__"), "Div"),
    (("pow", "__pow__"), "Pow"), (("maximum",), "Max"), (("minimum",), "Min"),
    (("eq", "__eq__"), "Equal"), (("lt", "__lt__"), "Less"), (("gt", "__gt__"), "Greater"),
    (("le", "__le__"), "LessOrEqual"), (("ge", "__ge__"), "GreaterOrEqual"),
    (("matmul", "mm", "bmm", "__matmul__"), "MatMul"),
):
    _handles(*_names)(_binary(_op))
for _names, _op in ((("__radd__",), "Add"), (("rsub", "__rsub__"), "Sub"), (("__rmul__",), "Mul"),
                    (("__rtruediv__",), "Div"), (("__rpow__",), "Pow"), (("__rmatmul__",), "MatMul")):
    _handles(*_names)(_binary(_op, reverse=True))


@_handles("floor_divide", "__floordiv__")
def _floordiv(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return _binary("Div")(g, args, {"rounding_mode": "floor"}, out)


def _unary(op: str, **attrs: Any) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
        return g.node(op, [g.tensor_in(args[0])], **attrs)

    return h


for _names, _op in (
    (("neg", "negative", "__neg__"), "Neg"), (("exp",), "Exp"), (("log",), "Log"), (("sqrt",), "Sqrt"),
    (("abs", "__abs__"), "Abs"), (("tanh", "F.tanh"), "Tanh"), (("sigmoid", "F.sigmoid"), "Sigmoid"),
    (("relu", "F.relu"), "Relu"), (("erf",), "Erf"), (("sin",), "Sin"), (("cos",), "Cos"),
    (("floor",), "Floor"), (("ceil",), "Ceil"), (("sign",), "Sign"), (("reciprocal",), "Reciprocal"),
    (("softsign", "F.softsign"), "Softsign"), (("selu", "F.selu"), "Selu"),
    (("hardswish", "F.hardswish"), "HardSwish"),
):
    _handles(*_names)(_unary(_op))
_handles("hardsigmoid", "F.hardsigmoid")(_unary("HardSigmoid", alpha=1.0 / 6, beta=0.5))

_IDENTITY = ("contiguous", "clone", "detach", "dropout", "F.dropout", "feature_dropout", "F.dropout1d",
             "F.dropout2d", "F.dropout3d", "alpha_dropout", "F.alpha_dropout", "F.feature_alpha_dropout",
             "to", "type", "type_as", "float", "double", "half", "long", "int", "bool", "cpu", "data",
             "requires_grad_", "positive", "__pos__")


@_handles(*_IDENTITY)
def _identity(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = g.tensor_in(args[0])
    dt = _np_dtype(out)
    return g.cast(x, dt) if g.dtypes.get(x) != dt else g.node("Identity", [x])


@_handles("rsqrt")
def _rsqrt(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return g.node("Reciprocal", [g.node("Sqrt", [g.tensor_in(args[0])])])


@_handles("square")
def _square(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = g.tensor_in(args[0])
    return g.node("Mul", [x, x])


@_handles("relu6", "F.relu6", "clamp", "clip", "hardtanh", "F.hardtanh")
def _clip(g: _Graph, args: tuple, kwargs: dict, out: Tensor, name: str = "") -> str:
    dt = _np_dtype(out)
    lo = _arg(args, kwargs, 1, "min", None)
    hi = _arg(args, kwargs, 2, "max", None)
    lo = _arg(args, kwargs, 1, "min_val", lo)
    hi = _arg(args, kwargs, 2, "max_val", hi)
    if name in ("relu6", "F.relu6"):
        lo, hi = 0.0, 6.0
    elif name in ("hardtanh", "F.hardtanh"):
        lo = -1.0 if lo is None else lo
        hi = 1.0 if hi is None else hi
    inputs = [g.tensor_in(args[0]), g.operand(lo, dt) if lo is not None else "",
              g.operand(hi, dt) if hi is not None else ""]
    while inputs[-1] == "":
        inputs.pop()
    return g.node("Clip", inputs)


@_handles("leaky_relu", "F.leaky_relu")
def _leaky(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return g.node("LeakyRelu", [g.tensor_in(args[0])], alpha=float(_arg(args, kwargs, 1, "negative_slope", 0.01)))


@_handles("elu", "F.elu")
def _elu(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return g.node("Elu", [g.tensor_in(args[0])], alpha=float(_arg(args, kwargs, 1, "alpha", 1.0)))


@_handles("gelu", "F.gelu")
def _gelu(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = g.tensor_in(args[0])
    dt = _np_dtype(out)
    approx = _arg(args, kwargs, 1, "approximate", "none")
    half = g.operand(0.5, dt)
    one = g.operand(1.0, dt)
    if approx == "tanh":
        cube = g.node("Mul", [g.node("Mul", [x, x]), x])
        inner = g.node("Add", [x, g.node("Mul", [cube, g.operand(0.044715, dt)])])
        t = g.node("Tanh", [g.node("Mul", [inner, g.operand(math.sqrt(2.0 / math.pi), dt)])])
    else:
        t = g.node("Erf", [g.node("Div", [x, g.operand(math.sqrt(2.0), dt)])])
    return g.node("Mul", [g.node("Mul", [x, half]), g.node("Add", [t, one])])


@_handles("silu", "F.silu")
def _silu(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = g.tensor_in(args[0])
    return g.node("Mul", [x, g.node("Sigmoid", [x])])


@_handles("mish", "F.mish")
def _mish(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = g.tensor_in(args[0])
    return g.node("Mul", [x, g.node("Tanh", [g.node("Softplus", [x])])])


@_handles("softplus", "F.softplus")
def _softplus(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = g.tensor_in(args[0])
    beta = float(_arg(args, kwargs, 1, "beta", 1.0))
    if beta == 1.0:
        return g.node("Softplus", [x])
    b = g.operand(beta, _np_dtype(out))
    return g.node("Div", [g.node("Softplus", [g.node("Mul", [x, b])]), b])


@_handles("logsigmoid", "F.logsigmoid")
def _logsigmoid(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return g.node("Neg", [g.node("Softplus", [g.node("Neg", [g.tensor_in(args[0])])])])


def _softmax_like(op: str) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
        x = args[0]
        dim = _arg(args, kwargs, 1, "dim", None)
        if dim is None:
            dim = 0 if x.ndim in (0, 1, 3) else 1
        name = g.cast(g.tensor_in(x), _np_dtype(out))
        return g.node(op, [name], axis=int(dim))

    return h


_handles("softmax", "F.softmax", "_softmax")(_softmax_like("Softmax"))
_handles("log_softmax", "F.log_softmax", "_log_softmax")(_softmax_like("LogSoftmax"))


@_handles("ne", "not_equal", "__ne__")
def _ne(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return g.node("Not", [_binary("Equal")(g, args, kwargs, out)])


def _logical(op: str) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
        if out.dtype != ember.bool:
            raise UnsupportedOperatorError(f"ember.onnx.export: {op} of {out.dtype} tensors (only bool) is not supported")
        b = _np().dtype(bool)
        return g.node(op, [g.operand(args[0], b), g.operand(_arg(args, kwargs, 1, "other"), b)])

    return h


_handles("logical_and", "bitwise_and", "__and__", "__rand__", "__iand__")(_logical("And"))
_handles("logical_or", "bitwise_or", "__or__", "__ror__", "__ior__")(_logical("Or"))
_handles("logical_xor", "bitwise_xor", "__xor__", "__rxor__", "__ixor__")(_logical("Xor"))


@_handles("logical_not", "__invert__")
def _not(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return g.node("Not", [g.cast(g.tensor_in(args[0]), _np().dtype(bool))])


@_handles("where")
def _where(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    dt = _np_dtype(out)
    cond = g.cast(g.tensor_in(args[0]), _np().dtype(bool))
    return g.node("Where", [cond, g.operand(args[1], dt), g.operand(args[2], dt)])


@_handles("masked_fill")
def _masked_fill(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    dt = _np_dtype(out)
    mask = g.cast(g.tensor_in(_arg(args, kwargs, 1, "mask")), _np().dtype(bool))
    value = _arg(args, kwargs, 2, "value")
    return g.node("Where", [mask, g.operand(value, dt), g.operand(args[0], dt)])


@_handles("addmm")
def _addmm(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    dt = _np_dtype(out)
    bias, m1, m2 = (g.operand(a, dt) for a in args[:3])
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    prod = g.node("MatMul", [m1, m2])
    if alpha != 1:
        prod = g.node("Mul", [prod, g.operand(alpha, dt)])
    if beta != 1:
        bias = g.node("Mul", [bias, g.operand(beta, dt)])
    return g.node("Add", [prod, bias])


@_handles("F.linear", "linear")
def _linear(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x, w = args[0], _arg(args, kwargs, 1, "weight")
    b = _arg(args, kwargs, 2, "bias")
    if g.is_dyn(w):
        wt = g.node("Transpose", [g.tensor_in(w)], perm=[1, 0])
    else:
        wt = g.const(w.detach().cpu().numpy().T.copy(), g.param_names.get(id(w), "weight") + "_t")
    y = g.node("MatMul", [g.tensor_in(x), wt])
    return g.node("Add", [y, g.tensor_in(b)]) if b is not None else y


def _conv(nd: int) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
        x, w = args[0], _arg(args, kwargs, 1, "weight")
        b = _arg(args, kwargs, 2, "bias")
        stride = _ints(_arg(args, kwargs, 3, "stride", 1), nd)
        padding = _arg(args, kwargs, 4, "padding", 0)
        dilation = _ints(_arg(args, kwargs, 5, "dilation", 1), nd)
        groups = int(_arg(args, kwargs, 6, "groups", 1))
        k = _shape(w)[2:]
        if padding == "valid":
            pads = [0] * (2 * nd)
        elif padding == "same":
            total = [d * (kk - 1) for d, kk in zip(dilation, k)]
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:
            p = _ints(padding, nd)
            pads = p + p
        inputs = [g.tensor_in(x), g.tensor_in(w)] + ([g.tensor_in(b)] if b is not None else [])
        return g.node("Conv", inputs, kernel_shape=list(k), strides=stride, pads=pads,
                      dilations=dilation, group=groups)

    return h


_handles("F.conv1d", "conv1d")(_conv(1))
_handles("F.conv2d", "conv2d")(_conv(2))
_handles("F.conv3d", "conv3d")(_conv(3))


def _norm_param(g: _Graph, t: Any, n: int, fill: float, dt: Any) -> str:
    if t is None:
        return g.const(_np().full(n, fill, dtype=dt), "ones" if fill else "zeros")
    return g.cast(g.tensor_in(t), dt)


def _batch_norm(g: _Graph, x: Tensor, mean: Any, var: Any, w: Any, b: Any, training: bool,
                eps: float, out: Tensor) -> str:
    if mean is None or var is None:
        raise UnsupportedOperatorError(
            "ember.onnx.export: batch_norm without running statistics (track_running_stats=False) "
            "has no inference form in ONNX"
        )
    dt = _np_dtype(out)
    c = _shape(x)[1]
    inputs = [g.tensor_in(x), _norm_param(g, w, c, 1.0, dt), _norm_param(g, b, c, 0.0, dt),
              g.cast(g.tensor_in(mean), dt), g.cast(g.tensor_in(var), dt)]
    return g.node("BatchNormalization", inputs, epsilon=float(eps))


@_handles("F.batch_norm")
def _f_batch_norm(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return _batch_norm(g, args[0], _arg(args, kwargs, 1, "running_mean"), _arg(args, kwargs, 2, "running_var"),
                       _arg(args, kwargs, 3, "weight"), _arg(args, kwargs, 4, "bias"),
                       bool(_arg(args, kwargs, 5, "training", False)), _arg(args, kwargs, 7, "eps", 1e-5), out)


@_handles("batch_norm")
def _c_batch_norm(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    a = list(args) + [None] * 8
    return _batch_norm(g, a[0], a[3], a[4], a[1], a[2], bool(a[5]), a[7] if a[7] is not None else 1e-5, out)


@_handles("F.layer_norm", "layer_norm")
def _layer_norm(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = args[0]
    ns = _arg(args, kwargs, 1, "normalized_shape")
    ns = [int(ns)] if isinstance(ns, int) else [int(s) for s in ns]
    dt = _np_dtype(out)
    w, b = _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")
    scale = (g.const(_np().ones(ns, dtype=dt), "ones") if w is None else g.cast(g.tensor_in(w), dt))
    inputs = [g.tensor_in(x), scale] + ([g.cast(g.tensor_in(b), dt)] if b is not None else [])
    return g.node("LayerNormalization", inputs, axis=-len(ns),
                  epsilon=float(_arg(args, kwargs, 4, "eps", 1e-5)))


@_handles("F.group_norm", "group_norm")
def _group_norm(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    np = _np()
    x = args[0]
    groups = int(_arg(args, kwargs, 1, "num_groups"))
    w, b = _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")
    eps = float(_arg(args, kwargs, 4, "eps", 1e-5))
    dt = _np_dtype(out)
    shape = _shape(x)
    xn = g.tensor_in(x)
    grouped = g.node("Reshape", [xn, g.ints([0, groups, -1])])
    normed = g.node("InstanceNormalization", [grouped, g.const(np.ones(groups, dt), "ones"),
                                               g.const(np.zeros(groups, dt), "zeros")], epsilon=eps)
    y = g.node("Reshape", [normed, g.node("Shape", [xn], dtype=np.dtype(np.int64))])
    bshape = [shape[1]] + [1] * (len(shape) - 2)
    if w is not None:
        y = g.node("Mul", [y, g.node("Reshape", [g.tensor_in(w), g.ints(bshape)])])
    if b is not None:
        y = g.node("Add", [y, g.node("Reshape", [g.tensor_in(b), g.ints(bshape)])])
    return y


def _pool_params(args: tuple, kwargs: dict, nd: int) -> tuple[list[int], list[int], list[int]]:
    k = _ints(_arg(args, kwargs, 1, "kernel_size"), nd)
    s = _arg(args, kwargs, 2, "stride", None)
    s = k if s is None or (not isinstance(s, int) and len(s) == 0) else _ints(s, nd)
    p = _ints(_arg(args, kwargs, 3, "padding", 0), nd)
    return k, s, p


def _max_pool(nd: int) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Any) -> str:
        if _arg(args, kwargs, 6, "return_indices", False):
            raise UnsupportedOperatorError("ember.onnx.export: max_pool with return_indices=True is not supported")
        k, s, p = _pool_params(args, kwargs, nd)
        d = _ints(_arg(args, kwargs, 4, "dilation", 1), nd)
        ceil = int(bool(_arg(args, kwargs, 5, "ceil_mode", False)))
        return g.node("MaxPool", [g.tensor_in(args[0])], kernel_shape=k, strides=s, pads=p + p,
                      dilations=d, ceil_mode=ceil)

    return h


def _avg_pool(nd: int) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Any) -> str:
        if _arg(args, kwargs, 6, "divisor_override", None) is not None:
            raise UnsupportedOperatorError("ember.onnx.export: avg_pool with divisor_override is not supported")
        k, s, p = _pool_params(args, kwargs, nd)
        ceil = int(bool(_arg(args, kwargs, 4, "ceil_mode", False)))
        cip = int(bool(_arg(args, kwargs, 5, "count_include_pad", True)))
        return g.node("AveragePool", [g.tensor_in(args[0])], kernel_shape=k, strides=s, pads=p + p,
                      ceil_mode=ceil, count_include_pad=cip)

    return h


_handles("F.max_pool1d", "max_pool1d")(_max_pool(1))
_handles("F.max_pool2d", "max_pool2d")(_max_pool(2))
_handles("F.max_pool3d", "max_pool3d")(_max_pool(3))
_handles("F.avg_pool1d", "avg_pool1d")(_avg_pool(1))
_handles("F.avg_pool2d", "avg_pool2d")(_avg_pool(2))
_handles("F.avg_pool3d", "avg_pool3d")(_avg_pool(3))


def _adaptive(op: str, global_op: str) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Any) -> str:
        x = args[0]
        o = out[0] if isinstance(out, (tuple, list)) else out
        nd = o.ndim - 2 if x.ndim == o.ndim else 0
        if x.ndim < 3:
            raise UnsupportedOperatorError(f"ember.onnx.export: adaptive pooling needs batched input, got {_shape(x)}")
        ins, outs = _shape(x)[-nd:], _shape(o)[-nd:]
        if all(v == 1 for v in outs):
            return g.node(global_op, [g.tensor_in(x)])
        if any(i % v for i, v in zip(ins, outs)):
            raise UnsupportedOperatorError(
                f"ember.onnx.export: adaptive pooling from {ins} to {outs}: ONNX needs input sizes "
                f"divisible by the output sizes"
            )
        k = [i // v for i, v in zip(ins, outs)]
        return g.node(op, [g.tensor_in(x)], kernel_shape=k, strides=k)

    return h


_handles("F.adaptive_avg_pool1d", "F.adaptive_avg_pool2d", "F.adaptive_avg_pool3d", "adaptive_avg_pool1d",
         "adaptive_avg_pool2d", "adaptive_avg_pool3d")(_adaptive("AveragePool", "GlobalAveragePool"))


@_handles("F.embedding")
def _f_embedding(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    if _arg(args, kwargs, 3, "max_norm") is not None:
        raise UnsupportedOperatorError("ember.onnx.export: embedding with max_norm is not supported")
    idx, w = args[0], _arg(args, kwargs, 1, "weight")
    return g.node("Gather", [g.tensor_in(w), g.tensor_in(idx)], axis=0)


@_handles("embedding")
def _c_embedding(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return g.node("Gather", [g.tensor_in(args[0]), g.tensor_in(args[1])], axis=0)


@_handles("index_select")
def _index_select(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    dim = int(_arg(args, kwargs, 1, "dim"))
    return g.node("Gather", [g.tensor_in(args[0]), g.tensor_in(_arg(args, kwargs, 2, "index"))], axis=dim)


@_handles("F.prelu", "prelu")
def _prelu(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x, w = args[0], _arg(args, kwargs, 1, "weight")
    slope = g.tensor_in(w)
    if w.numel() > 1 and x.ndim > 2:
        slope = g.node("Reshape", [slope, g.ints([w.numel()] + [1] * (x.ndim - 2))])
    return g.node("PRelu", [g.tensor_in(x), slope])


@_handles("F.celu", "celu")
def _celu(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return g.node("Celu", [g.tensor_in(args[0])], alpha=float(_arg(args, kwargs, 1, "alpha", 1.0)))


@_handles("F.tanhshrink", "tanhshrink")
def _tanhshrink(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = g.tensor_in(args[0])
    return g.node("Sub", [x, g.node("Tanh", [x])])


@_handles("F.glu", "glu")
def _glu(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = args[0]
    dim = int(_arg(args, kwargs, 1, "dim", -1)) % x.ndim
    half = _shape(x)[dim] // 2
    a, b = g.node("Split", [g.tensor_in(x), g.ints([half, half], "split")], n_out=2, axis=dim)
    return g.node("Mul", [a, g.node("Sigmoid", [b])])


@_handles("F.instance_norm", "instance_norm")
def _instance_norm(g: _Graph, args: tuple, kwargs: dict, out: Tensor, name: str = "") -> str:
    x = args[0]
    if name == "F.instance_norm":
        mean, var, w, b = (_arg(args, kwargs, i, n) for i, n in
                           ((1, "running_mean"), (2, "running_var"), (3, "weight"), (4, "bias")))
        use_input_stats = _arg(args, kwargs, 5, "use_input_stats", True)
        eps = _arg(args, kwargs, 7, "eps", 1e-5)
    else:
        a = list(args) + [None] * 8
        w, b, mean, var, use_input_stats, eps = a[1], a[2], a[3], a[4], a[5], a[7]
    if not use_input_stats:
        return _batch_norm(g, x, mean, var, w, b, False, eps, out)
    dt = _np_dtype(out)
    c = _shape(x)[1]
    return g.node("InstanceNormalization", [g.tensor_in(x), _norm_param(g, w, c, 1.0, dt),
                                            _norm_param(g, b, c, 0.0, dt)], epsilon=float(eps))


def _conv_transpose(nd: int) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
        x, w = args[0], _arg(args, kwargs, 1, "weight")
        b = _arg(args, kwargs, 2, "bias")
        stride = _ints(_arg(args, kwargs, 3, "stride", 1), nd)
        p = _ints(_arg(args, kwargs, 4, "padding", 0), nd)
        op = _ints(_arg(args, kwargs, 5, "output_padding", 0), nd)
        groups = int(_arg(args, kwargs, 6, "groups", 1))
        dilation = _ints(_arg(args, kwargs, 7, "dilation", 1), nd)
        inputs = [g.tensor_in(x), g.tensor_in(w)] + ([g.tensor_in(b)] if b is not None else [])
        return g.node("ConvTranspose", inputs, kernel_shape=list(_shape(w)[2:]), strides=stride, pads=p + p,
                      output_padding=op, dilations=dilation, group=groups)

    return h


_handles("F.conv_transpose1d", "conv_transpose1d")(_conv_transpose(1))
_handles("F.conv_transpose2d", "conv_transpose2d")(_conv_transpose(2))
_handles("F.conv_transpose3d", "conv_transpose3d")(_conv_transpose(3))


def _adaptive_max(g: _Graph, args: tuple, kwargs: dict, out: Any) -> str:
    if _arg(args, kwargs, 2, "return_indices", False) or isinstance(out, (tuple, list)):
        raise UnsupportedOperatorError("ember.onnx.export: adaptive max pooling with indices is not supported")
    return _adaptive("MaxPool", "GlobalMaxPool")(g, args, kwargs, out)


_handles("F.adaptive_max_pool1d", "F.adaptive_max_pool2d", "F.adaptive_max_pool3d")(_adaptive_max)


def _reduce_args(x: Tensor, args: tuple, kwargs: dict, dim_pos: int, keep_pos: int) -> tuple[Any, bool]:
    dim = _arg(args, kwargs, dim_pos, "dim", None)
    keep = bool(_arg(args, kwargs, keep_pos, "keepdim", False))
    if dim is None:
        return None, keep
    dims = [int(dim)] if isinstance(dim, int) else [int(d) for d in dim]
    return [d % max(x.ndim, 1) for d in dims], keep


@_handles("var", "std")
def _var(g: _Graph, args: tuple, kwargs: dict, out: Tensor, name: str = "") -> str:
    x = args[0]
    if len(args) > 1 and isinstance(args[1], bool):  # var(unbiased)
        axes, keep, unbiased = None, False, args[1]
        correction = None
    else:
        axes, keep = _reduce_args(x, args, kwargs, 1, 3)
        unbiased = _arg(args, kwargs, 2, "unbiased", None)
        correction = kwargs.get("correction")
    corr = float(correction) if correction is not None else (0.0 if unbiased is False else 1.0)
    shape = _shape(x)
    n = math.prod(shape[a] for a in (axes if axes is not None else range(len(shape))))
    xn = g.tensor_in(x)
    mean = g.reduce("ReduceMean", xn, axes, True)
    diff = g.node("Sub", [xn, mean])
    sq = g.reduce("ReduceSum", g.node("Mul", [diff, diff]), axes, keep)
    v = g.node("Div", [sq, g.operand(max(n - corr, 0.0), _np_dtype(out))])
    return g.node("Sqrt", [v]) if name == "std" else v


@_handles("max", "min")
def _max(g: _Graph, args: tuple, kwargs: dict, out: Any, name: str = "") -> Any:
    x = args[0]
    other = _arg(args, kwargs, 1, "dim", None)
    if isinstance(other, Tensor) or "other" in kwargs:
        return _binary("Max" if name == "max" else "Min")(g, args, kwargs, out)
    red = "ReduceMax" if name == "max" else "ReduceMin"
    if other is None:
        return g.reduce(red, g.tensor_in(x), None, False)
    dim = int(other) % x.ndim
    keep = bool(_arg(args, kwargs, 2, "keepdim", False))
    xn = g.tensor_in(x)
    values = g.reduce(red, xn, [dim], keep)
    idx = g.node("ArgMax" if name == "max" else "ArgMin", [xn], axis=dim, keepdims=int(keep),
                 select_last_index=0, dtype=_np().dtype(_np().int64))
    return [values, idx]


@_handles("argmax", "argmin")
def _argmax(g: _Graph, args: tuple, kwargs: dict, out: Tensor, name: str = "") -> str:
    x = args[0]
    dim = _arg(args, kwargs, 1, "dim", None)
    keep = bool(_arg(args, kwargs, 2, "keepdim", False))
    xn = g.tensor_in(x)
    op = "ArgMax" if name == "argmax" else "ArgMin"
    i64 = _np().dtype(_np().int64)
    if dim is None:
        flat = g.node("Reshape", [xn, g.ints([-1])])
        return g.node(op, [flat], axis=0, keepdims=0, dtype=i64)
    return g.node(op, [xn], axis=int(dim) % x.ndim, keepdims=int(keep), dtype=i64)


@_handles("norm")
def _norm(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = args[0]
    p = _arg(args, kwargs, 1, "p", 2)
    axes, keep = _reduce_args(x, args, kwargs, 2, 3)
    if p in (2, 2.0, "fro", None):
        return g.reduce("ReduceL2", g.tensor_in(x), axes, keep)
    if p in (1, 1.0):
        return g.reduce("ReduceL1", g.tensor_in(x), axes, keep)
    raise UnsupportedOperatorError(f"ember.onnx.export: norm with p={p!r} (only 1, 2 and 'fro') is not supported")


@_handles("logsumexp")
def _logsumexp(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    axes, keep = _reduce_args(args[0], args, kwargs, 1, 2)
    return g.reduce("ReduceLogSumExp", g.tensor_in(args[0]), axes, keep)


@_handles("prod")
def _prod(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    axes, keep = _reduce_args(args[0], args, kwargs, 1, 2)
    return g.reduce("ReduceProd", g.cast(g.tensor_in(args[0]), _np_dtype(out)), axes, keep)


@_handles("cumsum")
def _cumsum(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    dim = int(_arg(args, kwargs, 1, "dim")) % max(args[0].ndim, 1)
    return g.node("CumSum", [g.cast(g.tensor_in(args[0]), _np_dtype(out)), g.ints([dim], "axis")])


@_handles("nn.RNNCellBase")
def _rnn_cell(g: _Graph, args: tuple, kwargs: dict, out: Any) -> list[str]:
    """LSTMCell / GRUCell / RNNCell: one step of an ONNX LSTM / GRU / RNN."""
    np = _np()
    mod, x = args[0], _arg(args, kwargs, 1, "input")
    hx = _arg(args, kwargs, 2, "hx")
    from ember.nn import GRUCell, LSTMCell

    kind = "LSTM" if isinstance(mod, LSTMCell) else "GRU" if isinstance(mod, GRUCell) else "RNN"
    H = mod.hidden_size
    dt = _np_dtype(x)
    axes = g.ints([0, 1] if x.ndim == 1 else [0], "axes")
    xs = g.node("Unsqueeze", [g.tensor_in(x), axes])
    order = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}[kind]

    def reorder(a: Any) -> Any:
        parts = np.split(a, len(order), axis=0)
        return np.concatenate([parts[i] for i in order], axis=0)

    w_ih = mod.weight_ih.detach().cpu().numpy()
    w_hh = mod.weight_hh.detach().cpu().numpy()
    if mod.bias:
        bias = np.concatenate([reorder(mod.bias_ih.detach().cpu().numpy()),
                               reorder(mod.bias_hh.detach().cpu().numpy())])
    else:
        bias = np.zeros(2 * len(order) * H, dtype=dt)
    inputs = [xs, g.const(reorder(w_ih)[None].astype(dt), "cell_W"), g.const(reorder(w_hh)[None].astype(dt), "cell_R"),
              g.const(bias[None].astype(dt), "cell_B"), ""]
    h0 = c0 = None
    if hx is not None:
        h0, c0 = hx if kind == "LSTM" else (hx, None)
    hax = g.ints([0, 1] if x.ndim == 1 else [0], "axes")
    inputs.append(g.node("Unsqueeze", [g.cast(g.tensor_in(h0), dt), hax]) if h0 is not None else "")
    if kind == "LSTM" and c0 is not None:
        inputs.append(g.node("Unsqueeze", [g.cast(g.tensor_in(c0), dt), hax]))
    while inputs[-1] == "":
        inputs.pop()
    attrs: dict[str, Any] = {"hidden_size": H}
    if kind == "GRU":
        attrs["linear_before_reset"] = 1
    if kind == "RNN":
        attrs["activations"] = ["Relu" if mod.nonlinearity == "relu" else "Tanh"]
    outs = g.node(kind, inputs, n_out=3 if kind == "LSTM" else 2, **attrs)
    res = [g.node("Squeeze", [o, hax]) for o in outs[1:]]
    return res if kind == "LSTM" else res[:1]


@_handles("F.interpolate", "F.upsample")
def _interpolate(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = args[0]
    np = _np()
    mode = _arg(args, kwargs, 3, "mode", "nearest")
    align = bool(_arg(args, kwargs, 4, "align_corners", None))
    nd = x.ndim - 2
    sf = _arg(args, kwargs, 2, "scale_factor", None)
    xn = g.tensor_in(x)
    if sf is not None and not kwargs.get("recompute_scale_factor"):
        scales = [float(v) for v in ([sf] * nd if isinstance(sf, (int, float)) else sf)]
        resize_in = [xn, "", g.const(np.array([1.0, 1.0] + scales, dtype=np.float32), "scales")]
    else:  # sizes: the input's batch and channels, then the traced spatial sizes
        i64 = np.dtype(np.int64)
        lead = g.node("Slice", [g.node("Shape", [xn], dtype=i64), g.ints([0]), g.ints([2])])
        sizes = g.node("Concat", [lead, g.ints(_shape(out)[2:], "sizes")], axis=0)
        resize_in = [xn, "", "", sizes]
    if mode == "nearest":
        attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    elif mode in ("linear", "bilinear", "trilinear"):
        attrs = {"mode": "linear",
                 "coordinate_transformation_mode": "align_corners" if align else "pytorch_half_pixel"}
    else:
        raise UnsupportedOperatorError(f"ember.onnx.export: interpolate mode {mode!r} is not supported")
    return g.node("Resize", resize_in, **attrs)


# -- shapes

def _reshape_to(g: _Graph, x: str, in_shape: Sequence[int], out_shape: Sequence[int]) -> str:
    """Reshape to `out_shape`, written so a dynamic leading dim (the batch) still works: dims
    equal to the input's at the same position are copied (0) and the first other dim is
    inferred (-1)."""
    target = list(out_shape)
    i = 0
    while i < min(len(in_shape), len(target)) and target[i] == in_shape[i] and target[i] != 0:
        target[i] = 0
        i += 1
    if i < len(target):
        target[i] = -1
    return g.node("Reshape", [x, g.ints(target)])


@_handles("view", "reshape", "flatten", "F.flatten", "unflatten", "view_as", "reshape_as")
def _reshape(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = args[0]
    return _reshape_to(g, g.tensor_in(x), _shape(x), _shape(out))


@_handles("permute")
def _permute(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = args[0]
    perm = [d % max(x.ndim, 1) for d in _dims(args[1:] or [kwargs["dims"]])]
    return g.node("Transpose", [g.tensor_in(x)], perm=perm)


@_handles("transpose", "swapaxes", "swapdims", "t", "T", "mT")
def _transpose(g: _Graph, args: tuple, kwargs: dict, out: Tensor, name: str = "") -> str:
    x = args[0]
    n = x.ndim
    if n < 2:
        return g.node("Identity", [g.tensor_in(x)])
    if name == "T":
        perm = list(range(n))[::-1]
    else:
        if name in ("t", "mT"):
            d0, d1 = n - 2, n - 1
        else:
            d0, d1 = int(_arg(args, kwargs, 1, "dim0")) % n, int(_arg(args, kwargs, 2, "dim1")) % n
        perm = list(range(n))
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return g.node("Transpose", [g.tensor_in(x)], perm=perm)


@_handles("unsqueeze")
def _unsqueeze(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    dim = int(_arg(args, kwargs, 1, "dim")) % out.ndim
    return g.node("Unsqueeze", [g.tensor_in(args[0]), g.ints([dim], "axes")])


@_handles("squeeze")
def _squeeze(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = args[0]
    dim = _arg(args, kwargs, 1, "dim")
    shape = _shape(x)
    if dim is None:
        axes = [i for i, s in enumerate(shape) if s == 1]
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        axes = [int(d) % max(len(shape), 1) for d in dims if shape[int(d)] == 1]
    if not axes:
        return g.node("Identity", [g.tensor_in(x)])
    return g.node("Squeeze", [g.tensor_in(x), g.ints(axes, "axes")])


@_handles("expand", "expand_as", "broadcast_to")
def _expand(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    x = args[0]
    ins, outs = _shape(x), _shape(out)
    lead = len(outs) - len(ins)
    target = [1 if i >= lead and ins[i - lead] == s else s for i, s in enumerate(outs)]
    return g.node("Expand", [g.tensor_in(x), g.ints(target)])


@_handles("cat", "concat", "concatenate")
def _cat(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    ts = [t for t in args[0] if not (t.ndim == 1 and t.shape[0] == 0 and out.ndim != 1)]
    dim = int(_arg(args, kwargs, 1, "dim", 0)) % out.ndim
    dt = _np_dtype(out)
    return g.node("Concat", [g.cast(g.tensor_in(t), dt) for t in ts], axis=dim)


@_handles("stack")
def _stack(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    dim = int(_arg(args, kwargs, 1, "dim", 0)) % out.ndim
    axes = g.ints([dim], "axes")
    return g.node("Concat", [g.node("Unsqueeze", [g.tensor_in(t), axes]) for t in args[0]], axis=dim)


@_handles("split", "chunk", "unbind", "tensor_split")
def _split(g: _Graph, args: tuple, kwargs: dict, out: Sequence[Tensor], name: str = "") -> list[str]:
    x = args[0]
    default_dim = 0
    dim = int(_arg(args, kwargs, 2 if name != "unbind" else 1, "dim", default_dim)) % x.ndim
    if name == "unbind":
        sizes = [1] * len(out)
    else:
        sizes = [_shape(t)[dim] for t in out]
    parts = g.node("Split", [g.tensor_in(x), g.ints(sizes, "split")], n_out=len(sizes), axis=dim)
    parts = [parts] if isinstance(parts, str) else parts
    if name == "unbind":
        axes = g.ints([dim], "axes")
        parts = [g.node("Squeeze", [p, axes]) for p in parts]
    return parts


# -- indexing

def _index(g: _Graph, x: Tensor, idx: Any, out: Tensor) -> str:
    np = _np()
    if not isinstance(idx, tuple):
        idx = (idx,)
    name = g.tensor_in(x)
    shape = list(_shape(x))
    used = sum(1 for i in idx if i is not None and i is not Ellipsis and not isinstance(i, bool))
    n_tensors = sum(1 for i in idx if isinstance(i, (Tensor, list, range)))
    d = 0  # position in the current value
    src = 0  # position in the original's dims
    for item in idx:
        if item is Ellipsis:
            skip = len(shape) - used
            d += skip
            src += skip
        elif item is None:
            name = g.node("Unsqueeze", [name, g.ints([d], "axes")])
            d += 1
        elif isinstance(item, int) and not isinstance(item, bool):
            name = g.node("Gather", [name, g.const(np.array(item, dtype=np.int64), "index")], axis=d)
            src += 1
        elif isinstance(item, slice):
            start, stop, step = item.start, item.stop, item.step
            step = 1 if step is None else int(step)
            if step <= 0:
                raise UnsupportedOperatorError("ember.onnx.export: indexing with a non-positive step")
            if not (start in (None, 0) and stop is None and step == 1):
                start = 0 if start is None else int(start)
                stop = _INT64_MAX if stop is None or int(stop) >= shape[src] else int(stop)
                name = g.node("Slice", [name, g.ints([start], "starts"), g.ints([stop], "ends"),
                                        g.ints([d], "axes"), g.ints([step], "steps")])
            d += 1
            src += 1
        elif isinstance(item, Tensor) and item.dtype in (ember.int64, ember.int32) and n_tensors == 1:
            name = g.node("Gather", [name, g.tensor_in(item)], axis=d)
            d += item.ndim
            src += 1
        elif isinstance(item, (list, range)) and all(isinstance(v, int) for v in item) and n_tensors == 1:
            name = g.node("Gather", [name, g.ints(list(item), "index")], axis=d)
            d += 1
            src += 1
        else:
            raise UnsupportedOperatorError(
                f"ember.onnx.export: indexing with {type(item).__name__} (supported: ints, slices, "
                f"None, ... and one integer index tensor or list)"
            )
    return name


@_handles("__getitem__")
def _getitem(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    return _index(g, args[0], args[1], out)


@_handles("select")
def _select(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    dim = int(_arg(args, kwargs, 1, "dim")) % args[0].ndim
    index = int(_arg(args, kwargs, 2, "index"))
    return _index(g, args[0], (slice(None),) * dim + (index,), out)


@_handles("narrow")
def _narrow(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    dim = int(_arg(args, kwargs, 1, "dim")) % args[0].ndim
    start = int(_arg(args, kwargs, 2, "start"))
    length = int(_arg(args, kwargs, 3, "length"))
    return _index(g, args[0], (slice(None),) * dim + (slice(start, start + length),), out)


# -- reductions

def _reduction(op: str) -> Handler:
    def h(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
        x = args[0]
        dim = _arg(args, kwargs, 1, "dim", None)
        keep = bool(_arg(args, kwargs, 2, "keepdim", False))
        axes = None if dim is None else ([int(dim)] if isinstance(dim, int) else [int(d) for d in dim])
        if axes is not None:
            axes = [a % max(x.ndim, 1) for a in axes]
        return g.reduce(op, g.cast(g.tensor_in(x), _np_dtype(out)), axes, keep)

    return h


_handles("sum")(_reduction("ReduceSum"))
_handles("mean")(_reduction("ReduceMean"))
_handles("amax")(_reduction("ReduceMax"))
_handles("amin")(_reduction("ReduceMin"))


# -- attention

@_handles("scaled_dot_product_attention", "F.scaled_dot_product_attention")
def _sdpa(g: _Graph, args: tuple, kwargs: dict, out: Tensor) -> str:
    np = _np()
    q, k, v = args[:3]
    mask = _arg(args, kwargs, 3, "attn_mask")
    causal = bool(_arg(args, kwargs, 5, "is_causal", False))
    scale = _arg(args, kwargs, 6, "scale")
    dt = _np_dtype(out)
    n = q.ndim
    scale = 1.0 / math.sqrt(_shape(q)[-1]) if scale is None else float(scale)
    perm = list(range(n))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    kt = g.node("Transpose", [g.tensor_in(k)], perm=perm)
    scores = g.node("Mul", [g.node("MatMul", [g.tensor_in(q), kt]), g.operand(scale, dt)])
    L, S = _shape(q)[-2], _shape(k)[-2]
    if causal:
        m = np.triu(np.full((L, S), -np.inf, dtype=dt), 1)
        scores = g.node("Add", [scores, g.const(m, "causal_mask")])
    if mask is not None:
        if mask.dtype == ember.bool:
            scores = g.node("Where", [g.tensor_in(mask), scores, g.operand(-np.inf, dt)])
        else:
            scores = g.node("Add", [scores, g.operand(mask, dt)])
    weights = g.node("Softmax", [scores], axis=-1)
    return g.node("MatMul", [weights, g.tensor_in(v)])


# -- recurrent modules

@_handles("nn.RNNBase")
def _rnn_module(g: _Graph, args: tuple, kwargs: dict, out: Any) -> list[str]:
    np = _np()
    mod, x = args[0], _arg(args, kwargs, 1, "input")
    kind = "RNN" if mod.mode.startswith("RNN_") else mod.mode
    hx = _arg(args, kwargs, 2, "hx")
    if not isinstance(x, Tensor):
        raise UnsupportedOperatorError(f"ember.onnx.export: nn.{kind} on a PackedSequence is not supported")
    if getattr(mod, "proj_size", 0):
        raise UnsupportedOperatorError(f"ember.onnx.export: nn.{kind} with proj_size is not supported")
    H, layers = mod.hidden_size, mod.num_layers
    dirs = 2 if mod.bidirectional else 1
    dt = _np_dtype(x)
    name = g.tensor_in(x)
    unbatched = x.ndim == 2
    if unbatched:
        name = g.node("Unsqueeze", [name, g.ints([1], "axes")])
    elif mod.batch_first:
        name = g.node("Transpose", [name], perm=[1, 0, 2])
    h0 = c0 = None
    if hx is not None:
        h0, c0 = (hx if kind == "LSTM" else (hx, None))
        h0 = g.cast(g.tensor_in(h0), dt)
        c0 = g.cast(g.tensor_in(c0), dt) if c0 is not None else None
        if unbatched:
            h0 = g.node("Unsqueeze", [h0, g.ints([1], "axes")])
            c0 = g.node("Unsqueeze", [c0, g.ints([1], "axes")]) if c0 is not None else None
    # ONNX gate orders: LSTM i, o, f, c (ember/torch: i, f, g, o); GRU z, r, h (torch: r, z, n).
    order = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}[kind]
    ng = len(order)

    def reorder(a: Any) -> Any:
        parts = np.split(a, ng, axis=0)
        return np.concatenate([parts[i] for i in order], axis=0)

    hs, cs = [], []
    for layer in range(layers):
        Ws, Rs, Bs = [], [], []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w_ih = getattr(mod, "weight_ih" + sfx).detach().cpu().numpy()
            w_hh = getattr(mod, "weight_hh" + sfx).detach().cpu().numpy()
            if mod.bias:
                b_ih = getattr(mod, "bias_ih" + sfx).detach().cpu().numpy()
                b_hh = getattr(mod, "bias_hh" + sfx).detach().cpu().numpy()
            else:
                b_ih = b_hh = np.zeros(ng * H, dtype=dt)
            Ws.append(reorder(w_ih))
            Rs.append(reorder(w_hh))
            Bs.append(np.concatenate([reorder(b_ih), reorder(b_hh)]))
        inputs = [name, g.const(np.stack(Ws).astype(dt), f"{kind.lower()}_W{layer}"),
                  g.const(np.stack(Rs).astype(dt), f"{kind.lower()}_R{layer}"),
                  g.const(np.stack(Bs).astype(dt), f"{kind.lower()}_B{layer}"), ""]
        sl = [layer * dirs, (layer + 1) * dirs]
        if h0 is not None:
            inputs.append(g.node("Slice", [h0, g.ints(sl[:1]), g.ints(sl[1:]), g.ints([0])]))
        if kind == "LSTM" and c0 is not None:
            inputs += [""] if h0 is None else []
            inputs.append(g.node("Slice", [c0, g.ints(sl[:1]), g.ints(sl[1:]), g.ints([0])]))
        while inputs[-1] == "":
            inputs.pop()
        attrs: dict[str, Any] = {"hidden_size": H, "direction": "bidirectional" if dirs == 2 else "forward"}
        if kind == "GRU":
            attrs["linear_before_reset"] = 1
        if kind == "RNN":
            act = "Tanh" if mod.mode == "RNN_TANH" else "Relu"
            attrs["activations"] = [act] * dirs
        outs = g.node(kind, inputs, n_out=3 if kind == "LSTM" else 2, **attrs)
        y = outs[0]  # (seq, dirs, batch, H)
        hs.append(outs[1])
        if kind == "LSTM":
            cs.append(outs[2])
        y = g.node("Transpose", [y], perm=[0, 2, 1, 3])
        name = g.node("Reshape", [y, g.ints([0, 0, -1])])
    seq_out = name
    if unbatched:
        seq_out = g.node("Squeeze", [seq_out, g.ints([1], "axes")])
    elif mod.batch_first:
        seq_out = g.node("Transpose", [seq_out], perm=[1, 0, 2])
    h_n = hs[0] if len(hs) == 1 else g.node("Concat", hs, axis=0)
    if unbatched:
        h_n = g.node("Squeeze", [h_n, g.ints([1], "axes")])
    if kind == "LSTM":
        c_n = cs[0] if len(cs) == 1 else g.node("Concat", cs, axis=0)
        if unbatched:
            c_n = g.node("Squeeze", [c_n, g.ints([1], "axes")])
        return [seq_out, h_n, c_n]
    return [seq_out, h_n]

# Ops the dispatcher may report that its tensors alone define (no scalar or size arguments).
_TENSOR_ONLY = {
    "relu", "tanh", "sigmoid", "exp", "log", "neg", "abs", "sqrt", "rsqrt", "erf", "sin", "cos",
    "silu", "mish", "softsign", "selu", "hardswish", "hardsigmoid", "matmul", "mm", "bmm",
    "clone", "contiguous", "detach", "reciprocal", "floor", "ceil", "sign", "square",
}

# Calls that neither compute on data nor need a node (introspection, autograd bookkeeping).
_SKIP_METHODS = {
    "size", "dim", "ndimension", "numel", "nelement", "item", "tolist", "numpy", "stride",
    "storage_offset", "data_ptr", "is_contiguous", "is_floating_point", "is_complex", "element_size",
    "register_hook", "retain_grad", "backward", "get_device", "untyped_storage", "storage",
    "__len__", "__iter__", "__bool__", "__float__", "__int__", "__index__", "__hash__", "__repr__",
    "__str__", "__format__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__",
    "__init__", "__new__", "__del__", "__dir__", "__sizeof__", "__class__", "__subclasshook__",
    "__init_subclass__", "__getattribute__", "__setattr__", "__delattr__", "__array__",
    "__dlpack__", "__dlpack_device__", "__contains__", "__deepcopy__", "__copy__",
    "__array_priority__", "_version", "__torch_function__", "new_empty", "new_zeros",
    "new_ones", "new_full", "new_tensor", "share_memory_", "pin_memory", "is_pinned",
}
_SKIP_FUNCTIONS = {
    "is_tensor", "is_storage", "is_floating_point", "numel", "no_grad", "enable_grad",
    "set_grad_enabled", "is_grad_enabled", "inference_mode", "manual_seed", "seed", "get_default_dtype",
    "set_default_dtype", "set_printoptions", "get_num_threads", "set_num_threads", "device",
    "get_default_device", "set_default_device", "save", "load", "from_numpy", "tensor", "as_tensor",
    "is_in_onnx_export", "compile", "finfo", "iinfo", "promote_types", "result_type", "can_cast",
    "is_grad_enabled", "is_inference_mode_enabled", "typename", "broadcast_shapes",
}


class _Tracer:
    def __init__(self, graph: _Graph) -> None:
        self.g = graph
        self.depth = 0
        self.thread = threading.get_ident()
        self.patches: list[tuple[Any, str, Any]] = []
        self.wrapped: dict[int, Any] = {}

    def wrap(self, fn: Callable, name: str) -> Callable:
        tracer = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if tracer.depth or threading.get_ident() != tracer.thread:
                return fn(*args, **kwargs)
            tracer.depth += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                tracer.depth -= 1
            ins = [t for t in _flat_tensors(args) + _flat_tensors(kwargs) if tracer.g.is_dyn(t)]
            outs = _flat_tensors(out)
            if name == "__setitem__" and ins:
                raise UnsupportedOperatorError(
                    "ember.onnx.export: index assignment (x[idx] = v) on data derived from the "
                    "model's inputs is not supported; build the value with ember.where or ember.cat"
                )
            if ins and outs:
                tracer.depth += 1
                try:
                    tracer.emit(name, args, kwargs, out, outs)
                finally:
                    tracer.depth -= 1
            return out

        try:
            functools.update_wrapper(wrapper, fn)
        except (AttributeError, TypeError):
            pass
        return wrapper

    def emit(self, name: str, args: tuple, kwargs: dict, out: Any, outs: list[Tensor]) -> None:
        short = name.removeprefix("F.")
        inplace = (short.endswith("_") and not short.endswith("__")) or short.startswith("__i") or (
            kwargs.get("inplace") is True
        )
        target = args[0] if args else None
        if inplace and isinstance(target, Tensor) and target._is_view():
            raise UnsupportedOperatorError(
                f"ember.onnx.export: the in-place op '{short}' writes into a view of another "
                f"tensor; ONNX values are immutable, so the write would not reach the base "
                f"(use the out-of-place form)"
            )
        key = name
        if key not in _HANDLERS and key.endswith("_") and not key.endswith("__"):
            key = key[:-1]  # in-place variants
        if key not in _HANDLERS and key.startswith("F."):
            key = key[2:]
        handler = _HANDLERS.get(key)
        if handler is None:
            raise UnsupportedOperatorError(
                f"ember.onnx.export: the op '{name.removeprefix('F.')}' has no ONNX mapping "
                f"(called on tensors derived from the model's inputs)"
            )
        code = handler.__code__
        if "name" in code.co_varnames[: code.co_argcount]:
            names = handler(self.g, args, kwargs, out, name=key)  # type: ignore[call-arg]
        else:
            names = handler(self.g, args, kwargs, out)
        names = [names] if isinstance(names, str) else list(names)
        if len(names) < len(outs):
            for t in outs[len(names):]:
                self.g.poison(t, f"ember.onnx.export: an extra output of '{name}' is not supported in ONNX")
        for t, n in zip(outs, names):
            self.g.bind(t, n)

    def observe(self, op: str, inputs: tuple, outputs: tuple) -> None:
        """The dispatcher's report of an outermost op (ember._C._set_op_observer). Ops the
        Python-level recorder saw run inside its wrappers (depth > 0) and are skipped; one that
        reaches the dispatcher directly on traced data (a function reference a module kept, a
        path with no Python wrapper) is mapped when its tensors alone define it, else refused."""
        if self.depth or threading.get_ident() != self.thread:
            return
        if not any(self.g.is_dyn(t) for t in inputs) or not outputs:
            return
        self.depth += 1
        try:
            key = op[:-1] if op.endswith("_") and op[:-1] in _TENSOR_ONLY else op
            if key not in _TENSOR_ONLY:
                raise UnsupportedOperatorError(
                    f"ember.onnx.export: the op '{op}' has no ONNX mapping here: it ran on data "
                    f"derived from the model's inputs outside ember's recorded functions, Tensor "
                    f"methods and ember.nn.functional (through a function reference kept before "
                    f"the export, or a path without a Python wrapper), where only its tensors "
                    f"are known"
                )
            names = _HANDLERS[key](self.g, tuple(inputs), {}, outputs[0] if len(outputs) == 1 else outputs)
            names = [names] if isinstance(names, str) else list(names)
            for t, n in zip(outputs, names):
                self.g.bind(t, n)
        finally:
            self.depth -= 1

    def patch(self, owner: Any, attr: str, name: str) -> None:
        fn = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        if isinstance(fn, (staticmethod, classmethod)):
            return
        if isinstance(fn, property):
            if fn.fget is None:
                return
            new: Any = property(self.wrap(fn.fget, name), fn.fset, fn.fdel, fn.__doc__)
        elif callable(fn):
            new = self.wrap(fn, name)
        else:
            return
        try:
            setattr(owner, attr, new)
        except (AttributeError, TypeError):
            return
        self.patches.append((owner, attr, fn))
        if not isinstance(owner, type):
            self.wrapped[id(fn)] = new

    def patch_captured(self, model: Any) -> None:
        """Functions a module kept a reference to (``self.activation = ember.relu``)."""
        modules = getattr(model, "modules", None)
        for sub in modules() if modules is not None else []:
            for attr, v in list(vars(sub).items()):
                new = self.wrapped.get(id(v))
                if new is not None:
                    object.__setattr__(sub, attr, new)
                    self.patches.append((sub, attr, v))

    def install(self) -> None:
        import ember._C as C

        C._set_op_observer(self.observe)

        modules: list[tuple[Any, str]] = [(ember, ""), (C, "")]
        try:
            import ember.nn.functional as F

            modules.append((F, "F."))
        except ImportError:
            F = None
        for mod, prefix in modules:
            for attr in list(vars(mod)):
                if attr.startswith("__") or attr in _SKIP_FUNCTIONS:
                    continue
                obj = vars(mod)[attr]
                if isinstance(obj, type) or type(obj).__name__ == "module":
                    continue
                if not (callable(obj) and type(obj).__name__ in (
                        "function", "builtin_function_or_method", "_TorchFunctionWrapper",
                        "_TorchFunctionMethod")):
                    continue
                if attr.startswith("_") and not prefix and attr not in _HANDLERS:
                    continue
                self.patch(mod, attr, prefix + attr)
        for attr in list(vars(Tensor)):
            if attr in _SKIP_METHODS or (attr.startswith("__") and attr not in _HANDLERS and attr != "__setitem__"):
                continue
            obj = vars(Tensor)[attr]
            if isinstance(obj, property) and attr not in ("T", "mT", "data"):
                continue
            self.patch(Tensor, attr, attr)
        try:
            from ember.nn import GRUCell, LSTMCell, RNNBase, RNNCell

            self.patch(RNNBase, "forward", "nn.RNNBase")
            self.patch(LSTMCell, "forward", "nn.RNNCellBase")
            self.patch(GRUCell, "forward", "nn.RNNCellBase")
            self.patch(RNNCell, "forward", "nn.RNNCellBase")
        except ImportError:
            pass

    def uninstall(self) -> None:
        import ember._C as C

        C._set_op_observer(None)
        for owner, attr, fn in reversed(self.patches):
            if isinstance(owner, type) or type(owner).__name__ == "module":
                setattr(owner, attr, fn)
            else:
                object.__setattr__(owner, attr, fn)
        self.patches.clear()


@contextlib.contextmanager
def _recording(tracer: _Tracer, model: Any) -> Iterator[None]:
    if getattr(_STATE, "tracer", None) is not None:
        raise RuntimeError("ember.onnx.export: an export is already running on this thread")
    _STATE.tracer = tracer
    try:
        tracer.install()
        tracer.patch_captured(model)
        yield
    finally:
        tracer.uninstall()
        _STATE.tracer = None


def _value_info(name: str, t: Tensor, dyn: Mapping[int, str]) -> Any:
    onnx = _onnx()
    elem = onnx.helper.np_dtype_to_tensor_dtype(_np_dtype(t))
    shape = [dyn.get(i, s) for i, s in enumerate(_shape(t))]
    return onnx.helper.make_tensor_value_info(name, elem, shape)


def _dynamic(spec: Any, name: str) -> dict[int, str]:
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {int(k): str(v) for k, v in spec.items()}
    return {int(k): f"{name}_dynamic_axes_{int(k) + 1}" for k in spec}


def export(
    model: Any,
    args: Any,
    f: str | os.PathLike | io.IOBase,
    export_params: bool = True,
    verbose: bool = False,
    training: Any = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    operator_export_type: Any = None,
    opset_version: int | None = 17,
    do_constant_folding: bool = True,
    dynamic_axes: Mapping[str, Any] | None = None,
    keep_initializers_as_inputs: bool | None = None,
    **kwargs: Any,
) -> None:
    """Export `model` to ONNX by running it once on `args` and recording its ops.

    `args` is a tensor, a tuple of positional arguments (a trailing dict gives keyword
    arguments), as in ``torch.onnx.export``. `f` is a path or a binary file object. Inputs and
    outputs get `input_names` / `output_names` (default ``input``/``output`` or
    ``input_0``, ...); `dynamic_axes` maps a name to ``{axis: "symbol"}`` or a list of axes
    that are symbolic in the graph, so it runs on other sizes (e.g. other batch sizes). The
    model runs in eval mode (dropout off, batch norm on running statistics) and is put back in
    the mode it had. Constants (including ops on parameters only) are folded into initializers.
    Supported: linear/matmul/addmm, conv1d/2d/3d, batch/layer/group norm, activations, max/avg
    and adaptive average pooling, embedding, reshapes/views/permutes, cat/stack/split/chunk,
    pointwise arithmetic and comparisons, sum/mean, indexing by ints/slices/None, dropout,
    nn.LSTM / nn.GRU (as ONNX LSTM/GRU) and scaled_dot_product_attention /
    nn.MultiheadAttention (decomposed). Any other op on traced data raises
    :class:`UnsupportedOperatorError` naming it. ``do_constant_folding`` and
    ``keep_initializers_as_inputs`` are accepted for compatibility: constants are always
    folded and initializers are not graph inputs. Values are traced at the example's sizes, so
    sizes other than those named in `dynamic_axes` (and a leading batch dim) stay fixed.

    >>> import ember.nn as nn  # doctest: +SKIP
    >>> ember.onnx.export(nn.Linear(3, 2), ember.randn(4, 3), "lin.onnx")  # doctest: +SKIP
    """
    onnx = _onnx()
    if opset_version is None:
        opset_version = 17
    if not 17 <= int(opset_version) <= 21:
        raise ValueError(f"ember.onnx.export: opset_version must be between 17 and 21, got {opset_version}")
    if not export_params:
        raise NotImplementedError("ember.onnx.export: export_params=False is not supported")
    unknown = set(kwargs) - {"custom_opsets", "export_modules_as_functions", "autograd_inlining", "dynamo",
                             "external_data", "report", "verify", "optimize", "fallback"}
    if unknown:
        raise TypeError(f"ember.onnx.export: unexpected keyword arguments {sorted(unknown)}")
    if isinstance(args, Tensor):
        args = (args,)
    elif not isinstance(args, tuple):
        args = (args,) if not isinstance(args, list) else tuple(args)
    call_kwargs: dict[str, Any] = {}
    if args and isinstance(args[-1], dict):
        call_kwargs = dict(args[-1])
        args = args[:-1]
    inputs = _flat_tensors(args) + _flat_tensors(call_kwargs)
    if input_names is None:
        input_names = ["input"] if len(inputs) == 1 else [f"input_{i}" for i in range(len(inputs))]
    input_names = list(input_names) + [f"input_{i}" for i in range(len(input_names), len(inputs))]
    dynamic_axes = dict(dynamic_axes or {})

    param_names: dict[int, str] = {}
    named = getattr(model, "named_parameters", None)
    if named is not None:
        for n, p in model.named_parameters():
            param_names[id(p)] = n
        for n, b in model.named_buffers():
            param_names[id(b)] = n
    g = _Graph(int(opset_version), param_names)
    g.used.update(output_names or [])
    for t, n in zip(inputs, input_names):
        g.used.add(n)
        g.bind(t, n)
    was_training = getattr(model, "training", None)
    if was_training is not None and training is not True:
        model.train(False)
    try:
        with ember.no_grad(), _recording(_Tracer(g), model):
            result = model(*args, **call_kwargs)
    finally:
        if was_training is not None:
            model.train(was_training)

    outputs = _flat_tensors(result)
    if not outputs:
        raise ValueError("ember.onnx.export: the model returned no tensors")
    if output_names is None:
        output_names = ["output"] if len(outputs) == 1 else [f"output_{i}" for i in range(len(outputs))]
    output_names = list(output_names) + [f"output_{i}" for i in range(len(output_names), len(outputs))]
    graph_outputs = []
    for t, n in zip(outputs, output_names):
        src = g.tensor_in(t)
        g.nodes.append(onnx.helper.make_node("Identity", [src], [n], name=g.fresh(f"/output/{n}")))
        graph_outputs.append(_value_info(n, t, _dynamic(dynamic_axes.get(n), n)))
    graph_inputs = [_value_info(n, t, _dynamic(dynamic_axes.get(n), n)) for t, n in zip(inputs, input_names)]
    unknown_names = set(dynamic_axes) - set(input_names) - set(output_names)
    if unknown_names:
        raise ValueError(f"ember.onnx.export: dynamic_axes names {sorted(unknown_names)} are not inputs or outputs")
    graph = onnx.helper.make_graph(g.nodes, type(model).__name__, graph_inputs, graph_outputs, g.inits)
    proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", int(opset_version))],
                                   producer_name="ember")
    proto.ir_version = min(proto.ir_version, 8 if opset_version <= 18 else 9)
    onnx.checker.check_model(proto)
    if verbose:
        print(onnx.helper.printable_graph(proto.graph))
    data = proto.SerializeToString()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)
