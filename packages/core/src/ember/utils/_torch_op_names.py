"""What ``__torch_dispatch__`` handlers see of ember's ops: PyTorch's op and overload names.

Some of ember's kernels are one op where PyTorch's modes see another name or several ops
(``softmax`` is ``aten._softmax``, ``_index`` is ``aten.index.Tensor``, ``reshape`` is ``view`` or
``clone`` + ``_unsafe_view``, the fused cross entropy is ``_log_softmax`` + ``nll_loss_forward``,
the fused attention is ``_scaled_dot_product_flash_attention_for_cpu`` on the CPU ...). A
*presenter* here runs instead of handing the op to the handlers as it is: it hands them the ops
PyTorch shows, with PyTorch's arguments, and turns their results back into the ember op's result.
Autograd has recorded the ember op before this (the hook is below autograd), so values and
gradients do not change; bookkeeping PyTorch does not show (the log-sum-exp the fused cross
entropy keeps for its backward, nll_loss's total weight) runs with the modes left.

Presenters that run hidden bookkeeping apply to modes over plain tensors only; a tensor subclass
sees those ops as ember runs them. Renames (one op for one op) apply to both.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from ember import _C
from ember.utils import _python_dispatch as pd

AS_IS: Any = object()  # a presenter's answer when the op is shown as it is

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


# ---- op objects with PyTorch's names ------------------------------------------------------------
def _schema(*args: tuple[str, bool, str | None, str]) -> str:
    return repr(list(args))


def torch_op(name: str, overload: str, schema: str, fn: Callable) -> pd.OpOverload:
    """An op PyTorch has (and ember runs as ``fn``): the packet ``aten.<name>`` lists it under
    ``overload``, in place of an ember op of the same name and overload."""
    op = pd.OpOverload(-1000, name, overload, schema, True)
    op._fn = fn
    return op


_RENAMED: dict[tuple[str, str, str], pd.OpOverload] = {}


def renamed(func: pd.OpOverload, overload: str, name: str | None = None) -> pd.OpOverload:
    """``func`` (same arguments, same kernel) under PyTorch's overload name (and op name)."""
    name = name or func._opname
    key = (func._opname, name, overload)
    op = _RENAMED.get(key)
    if op is None:
        func._fn = func._fn or func._callable()
        op = copy.copy(func)
        op._opname, op._overloadname = name, overload
        op.__name__ = op.__qualname__ = f"{name}.{overload}"
        packet = pd._PACKETS.get(name)
        if packet is None:
            packet = pd._PACKETS[name] = pd.OpOverloadPacket(name)
        packet._overloads.setdefault(overload, op)
        op.overloadpacket = op._overloadpacket = packet
        _RENAMED[key] = op
    return op


def _inplace(func: pd.OpOverload, overload: str) -> pd.OpOverload:
    """``<op>_.<overload>``: ember's ``<op>(..., out=self)`` as PyTorch's in-place op."""
    key = (func._opname, func._opname + "_", overload)
    op = _RENAMED.get(key)
    if op is None:
        fn = func._fn or func._callable()
        args = [a for a in func._args if a[0] != "out"]
        schema = repr([(a, kw, None if d is pd._NO_DEFAULT else repr(d), t) for a, kw, d, t in args])
        op = _RENAMED[key] = torch_op(func._opname + "_", overload, schema,
                                      lambda *a, **k: fn(*a, **k, out=a[0]))
    return op


def _lazy(make: Callable[[], pd.OpOverload]) -> Callable[[], pd.OpOverload]:
    made: list[pd.OpOverload] = []

    def get() -> pd.OpOverload:
        if not made:
            made.append(make())
        return made[0]

    return get


def _softmax_fn(log: bool) -> Callable:
    def run(self: Any, dim: int, half_to_float: bool) -> Any:
        f = _C.log_softmax if log else _C.softmax
        import ember

        return f(self, dim, ember.float32 if half_to_float else None)

    return run


_SOFTMAX = _lazy(lambda: torch_op("_softmax", "default", _schema(
    ("self", False, None, "Tensor"), ("dim", False, None, "int"),
    ("half_to_float", False, None, "bool")), _softmax_fn(False)))
_LOG_SOFTMAX = _lazy(lambda: torch_op("_log_softmax", "default", _schema(
    ("self", False, None, "Tensor"), ("dim", False, None, "int"),
    ("half_to_float", False, None, "bool")), _softmax_fn(True)))


def _softmax_backward_fn(name: str) -> Callable:
    def run(grad_output: Any, output: Any, dim: int, input_dtype: Any) -> Any:
        r = getattr(_C, name)(grad_output, output, dim)
        return r if r.dtype == input_dtype else r.to(input_dtype)

    return run


def _softmax_backward_op(name: str) -> Callable[[], pd.OpOverload]:
    return _lazy(lambda: torch_op(name, "default", _schema(
        ("grad_output", False, None, "Tensor"), ("output", False, None, "Tensor"),
        ("dim", False, None, "int"), ("input_dtype", False, None, "ScalarType")),
        _softmax_backward_fn(name)))


_SOFTMAX_BACKWARD = _softmax_backward_op("_softmax_backward_data")
_LOG_SOFTMAX_BACKWARD = _softmax_backward_op("_log_softmax_backward_data")


def _view_fn(self: Any, size: list) -> Any:
    return self.view(size)


_VIEW = _lazy(lambda: torch_op("view", "default", _schema(
    ("self", False, None, "Tensor"), ("size", False, None, "SymInt[]")), _view_fn))
_UNSAFE_VIEW = _lazy(lambda: torch_op("_unsafe_view", "default", _schema(
    ("self", False, None, "Tensor"), ("size", False, None, "SymInt[]")),
    lambda self, size: _C.reshape(self, size)))


def _contiguous_clone_fn(self: Any, memory_format: Any = None) -> Any:
    c = _C.Tensor.contiguous(self)  # (ember's own: a copy unless self is contiguous)
    return _C.clone(c) if c is self else c


def _contiguous_clone_op() -> pd.OpOverload:
    """PyTorch's ``clone(memory_format=torch.contiguous_format)`` (a reshape's copy), run as a
    contiguous copy; ``aten.clone.default`` stays ember's clone (which keeps the layout)."""
    packet = pd._PACKETS.get("clone")
    kept = packet._overloads.get("default") if packet is not None else None
    op = torch_op("clone", "default", _schema(
        ("self", False, None, "Tensor"), ("memory_format", True, "None", "MemoryFormat?")),
        _contiguous_clone_fn)
    if kept is not None:
        op.overloadpacket._overloads["default"] = kept
    return op


_CLONE_CONTIGUOUS = _lazy(_contiguous_clone_op)


def _slice_fn(self: Any, dim: int = 0, start: int | None = None, end: int | None = None,
              step: int = 1) -> Any:
    index = (slice(None),) * (dim % max(self.dim(), 1)) + (slice(start, end, step),)
    return self[index]


_SLICE = _lazy(lambda: torch_op("slice", "Tensor", _schema(
    ("self", False, None, "Tensor"), ("dim", False, "0", "int"),
    ("start", False, "None", "SymInt?"), ("end", False, "None", "SymInt?"),
    ("step", False, "1", "SymInt")), _slice_fn))


def _total_weight(target: Any, weight: Any, ignore_index: int, dtype: Any) -> Any:
    """nll_loss's total weight (the mean's divisor), as PyTorch's nll_loss_forward returns it."""
    import ember

    keep = target != ignore_index
    if weight is None:
        return keep.sum().to(dtype)
    w = weight[target.clamp(0, weight.shape[0] - 1)]
    return ember.where(keep, w, ember.zeros((), dtype=w.dtype)).sum().to(dtype)


def _nll_forward_fn(self: Any, target: Any, weight: Any, reduction: int,
                    ignore_index: int) -> tuple[Any, Any]:
    out = _C.nll_loss(self, target, weight, ["none", "mean", "sum"][reduction], ignore_index)
    with pd._disable_current_modes():
        total = _total_weight(target, weight, ignore_index, self.dtype)
    return out, total


def _nll_backward_fn(grad_output: Any, self: Any, target: Any, weight: Any, reduction: int,
                     ignore_index: int, total_weight: Any) -> Any:
    return _C.nll_loss_backward(grad_output, self, target, weight,
                                ["none", "mean", "sum"][reduction], ignore_index)


_NLL_FORWARD = _lazy(lambda: torch_op("nll_loss_forward", "default", _schema(
    ("self", False, None, "Tensor"), ("target", False, None, "Tensor"),
    ("weight", False, None, "Tensor?"), ("reduction", False, None, "int"),
    ("ignore_index", False, None, "SymInt")), _nll_forward_fn))
_NLL_BACKWARD = _lazy(lambda: torch_op("nll_loss_backward", "default", _schema(
    ("grad_output", False, None, "Tensor"), ("self", False, None, "Tensor"),
    ("target", False, None, "Tensor"), ("weight", False, None, "Tensor?"),
    ("reduction", False, None, "int"), ("ignore_index", False, None, "SymInt"),
    ("total_weight", False, None, "Tensor")), _nll_backward_fn))


def _sdpa_cpu_fn(query: Any, key: Any, value: Any, dropout_p: float = 0.0,
                 is_causal: bool = False, *, attn_mask: Any = None,
                 scale: float | None = None) -> tuple[Any, Any]:
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    return tuple(_C._scaled_dot_product_fused_attention([query, key, value], attn_mask,
                                                         is_causal, scale))


def _sdpa_cpu_backward_fn(grad_out: Any, query: Any, key: Any, value: Any, out: Any,
                          logsumexp: Any, dropout_p: float, is_causal: bool, *,
                          attn_mask: Any = None, scale: float | None = None) -> tuple:
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    return tuple(_C._scaled_dot_product_fused_attention_backward(
        grad_out, query, key, value, attn_mask, out, logsumexp, is_causal, scale))


_SDPA_CPU = _lazy(lambda: torch_op("_scaled_dot_product_flash_attention_for_cpu", "default", _schema(
    ("query", False, None, "Tensor"), ("key", False, None, "Tensor"),
    ("value", False, None, "Tensor"), ("dropout_p", False, "0.0", "float"),
    ("is_causal", False, "False", "bool"), ("attn_mask", True, "None", "Tensor?"),
    ("scale", True, "None", "float?")), _sdpa_cpu_fn))
_SDPA_CPU_BACKWARD = _lazy(lambda: torch_op(
    "_scaled_dot_product_flash_attention_for_cpu_backward", "default", _schema(
        ("grad_out", False, None, "Tensor"), ("query", False, None, "Tensor"),
        ("key", False, None, "Tensor"), ("value", False, None, "Tensor"),
        ("out", False, None, "Tensor"), ("logsumexp", False, None, "Tensor"),
        ("dropout_p", False, None, "float"), ("is_causal", False, None, "bool"),
        ("attn_mask", True, "None", "Tensor?"), ("scale", True, "None", "float?")),
    _sdpa_cpu_backward_fn))


# ---- presenters ---------------------------------------------------------------------------------
Presenter = Callable[[pd.OpOverload, tuple, dict, tuple], Any]
PRESENTERS: dict[str, Presenter] = {}


def presents(*names: str) -> Callable[[Presenter], Presenter]:
    def register(f: Presenter) -> Presenter:
        for n in names:
            PRESENTERS[n] = f
        return f

    return register


def _handle(func: pd.OpOverload, types: tuple, args: tuple, kwargs: dict) -> Any:
    return pd._handle(func, types, args, kwargs)


@presents("softmax", "log_softmax")
def _present_softmax(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    x, dim = args[0], args[1]
    dtype = args[2] if len(args) > 2 else None
    if dtype is not None and dtype != x.dtype:
        x = x.to(dtype)  # PyTorch casts first (_to_copy), then runs _softmax
    op = _SOFTMAX() if func._opname == "softmax" else _LOG_SOFTMAX()
    return _handle(op, types, (x, dim, False), {})


@presents("_softmax_backward_data", "_log_softmax_backward_data")
def _present_softmax_backward(func: pd.OpOverload, args: tuple, kwargs: dict,
                              types: tuple) -> Any:
    op = _SOFTMAX_BACKWARD() if func._opname == "_softmax_backward_data" else _LOG_SOFTMAX_BACKWARD()
    return _handle(op, types, (*args[:3], args[1].dtype), {})


@presents("_index")
def _present_index(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    return _handle(renamed(func, "Tensor", "index"), types, args, kwargs)


@presents("narrow")
def _present_narrow(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    self, dim, start, length = args
    if not isinstance(start, int):  # a tensor start: PyTorch's narrow.Tensor
        return AS_IS
    size = self.shape[dim]
    if start < 0:
        start += size
    return _handle(_SLICE(), types, (self, dim, start, start + length), {})


def _viewable(sizes: tuple, strides: tuple, shape: list) -> bool:
    """Whether a tensor of these sizes and strides can be viewed with shape: the old dims fall
    into chunks that are contiguous with each other, and the new dims must tile each chunk."""
    if math.prod(sizes) == 0:
        return True
    chunks: list[int] = []
    prev = None
    for size, stride in zip(sizes, strides):
        if size == 1:
            continue
        if chunks and prev == size * stride:
            chunks[-1] *= size
        else:
            chunks.append(size)
        prev = stride
    new = [s for s in shape if s != 1]
    i = 0
    for chunk in chunks:
        prod = 1
        while prod < chunk and i < len(new):
            prod *= new[i]
            i += 1
        if prod != chunk:
            return False
    return i == len(new)


def _infer(shape: Any, numel: int) -> list:
    shape = [int(s) for s in shape]
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = numel // known if known else 0
    return shape


def _present_reshape_to(self: Any, shape: list, types: tuple) -> Any:
    if _viewable(tuple(self.shape), tuple(self.stride()), shape):
        return _handle(_VIEW(), types, (self, shape), {})
    import ember

    copy_ = _handle(_CLONE_CONTIGUOUS(), types, (self,),
                    {"memory_format": ember.contiguous_format})
    return _handle(_UNSAFE_VIEW(), types, (copy_, shape), {})


@presents("reshape")
def _present_reshape(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    self, shape = args[0], args[1]
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    return _present_reshape_to(self, _infer(shape, self.numel()), types)


@presents("flatten")
def _present_flatten(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    self = args[0]
    start = args[1] if len(args) > 1 else 0
    end = args[2] if len(args) > 2 else -1
    if not isinstance(start, int) or not isinstance(end, int):
        return AS_IS
    n = self.dim()
    if n == 0:
        return _present_reshape_to(self, [1], types)
    start, end = start % n, end % n
    if start == end:  # PyTorch returns self itself: no op to show
        if types:
            return AS_IS
        with pd._disable_current_modes():
            return func(*args, **kwargs)
    sizes = list(self.shape)
    shape = sizes[:start] + [math.prod(sizes[start:end + 1])] + sizes[end + 1:]
    return _present_reshape_to(self, shape, types)


# Ops whose PyTorch overload depends on the arguments: name -> (args, kwargs) -> overload.
def _scalar_or_tensor(i: int) -> Callable[[tuple, dict], str]:
    return lambda a, k: "Tensor" if len(a) > i and isinstance(a[i], _C.Tensor) else "Scalar"


def _dim_given(name: str, i: int = 1) -> Callable[[tuple, dict], str]:
    return lambda a, k: name if len(a) > i and a[i] is not None else "default"


_OVERLOADS: dict[str, Callable[[tuple, dict], str]] = {
    # Python scalars become tensors for PyTorch's arithmetic (add.Tensor, mul.Tensor ...)
    "add": lambda a, k: "Tensor", "sub": lambda a, k: "Tensor", "mul": lambda a, k: "Tensor",
    "div": lambda a, k: "Tensor_mode" if k.get("rounding_mode") is not None else "Tensor",
    "rsub": _scalar_or_tensor(1), "remainder": _scalar_or_tensor(1), "fmod": _scalar_or_tensor(1),
    "eq": _scalar_or_tensor(1), "ne": _scalar_or_tensor(1), "lt": _scalar_or_tensor(1),
    "le": _scalar_or_tensor(1), "gt": _scalar_or_tensor(1), "ge": _scalar_or_tensor(1),
    "pow": lambda a, k: "Tensor_Tensor" if isinstance(a[1], _C.Tensor) else "Tensor_Scalar",
    "rpow": lambda a, k: "Scalar",
    "masked_fill": _scalar_or_tensor(2), "masked_fill_": _scalar_or_tensor(2),
    "fill_": _scalar_or_tensor(1), "bernoulli_": lambda a, k: "Tensor" if len(a) > 1 and isinstance(
        a[1], _C.Tensor) else "float",
    "clamp": lambda a, k: "Tensor" if any(isinstance(v, _C.Tensor) for v in (*a[1:], *k.values()))
    else "default",
    "where": lambda a, k: "self", "transpose": lambda a, k: "int", "unbind": lambda a, k: "int",
    "squeeze": lambda a, k: "default" if len(a) < 2 or a[1] is None else (
        "dim" if isinstance(a[1], int) else "dims"),
    "sum": _dim_given("dim_IntList"), "mean": _dim_given("dim"),
    "prod": _dim_given("dim_int"), "all": _dim_given("dim"), "any": _dim_given("dim"),
    "var": lambda a, k: "correction", "std": lambda a, k: "correction",
    "var_mean": lambda a, k: "correction", "std_mean": lambda a, k: "correction",
    "empty": lambda a, k: "memory_format", "select": lambda a, k: "int",
}
# Ops whose PyTorch name differs from ember's (same arguments): ember name -> (name, overload).
_NAMES = {"rpow": ("pow", "Scalar"), "norm": ("linalg_vector_norm", "default"),
          "chunk": ("split", "Tensor")}
# Overloads ember declares that PyTorch's modes see under another name.
_BY_OVERLOAD: dict[tuple[str, str], Callable[[tuple, dict], tuple[str, str]]] = {
    ("split", "sizes"): lambda a, k: ("split_with_sizes", "default"),
    ("arange", "start_step"): lambda a, k: ("arange", "start" if len(a) < 3 else "start_step"),
}
_INPLACE_OVERLOADS = {"add": "Tensor", "sub": "Tensor", "mul": "Tensor", "div": "Tensor"}


def present_overload(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    """The op itself under PyTorch's overload name (in-place for ``out=self``); AS_IS when
    the name is already PyTorch's."""
    name = func._opname
    out = kwargs.get("out")
    if out is not None and args and out is args[0] and name in _INPLACE_OVERLOADS:
        rest = {k: v for k, v in kwargs.items() if k != "out"}
        return _handle(_inplace(func, _INPLACE_OVERLOADS[name]), types, args, rest)
    if name in _NAMES and func._overloadname == "default":
        new, overload = _NAMES[name]
        return _handle(renamed(func, overload, new), types, args, kwargs)
    if name == "squeeze" and len(args) > 1 and isinstance(args[1], list) and len(args[1]) == 1:
        return _handle(renamed(func, "dim"), types, (args[0], args[1][0]), kwargs)  # squeeze(0)
    by_overload = _BY_OVERLOAD.get((name, func._overloadname))
    if by_overload is not None:
        new, overload = by_overload(args, kwargs)
        return _handle(renamed(func, overload, new), types, args, kwargs)
    rule = _OVERLOADS.get(name)
    if rule is None or func._overloadname != "default" or func._index < 0:
        return AS_IS
    overload = rule(args, kwargs)
    if out is not None:
        overload = "out"
    if overload == "default":
        return AS_IS
    return _handle(renamed(func, overload), types, args, kwargs)


for _name in _OVERLOADS:
    PRESENTERS.setdefault(_name, present_overload)
for _name in (*_NAMES, *(n for n, _ in _BY_OVERLOAD)):
    PRESENTERS.setdefault(_name, present_overload)


@presents("nll_loss")
def _present_nll_loss(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    values = _values(func, args, kwargs)
    self, target, weight, reduction, ignore_index = values
    if types or self.dim() > 2:  # PyTorch's nll_loss2d_forward for images: shown as ember's
        return AS_IS
    out, _ = _handle(_NLL_FORWARD(), types, (self, target, weight, _REDUCTIONS[reduction],
                                            ignore_index), {})
    return out


@presents("nll_loss_backward")
def _present_nll_loss_backward(func: pd.OpOverload, args: tuple, kwargs: dict,
                               types: tuple) -> Any:
    grad, self, target, weight, reduction, ignore_index = _values(func, args, kwargs)
    if types or self.dim() > 2:
        return AS_IS
    with pd._disable_current_modes():
        total = _total_weight(target, weight, ignore_index, self.dtype)
    return _handle(_NLL_BACKWARD(), types, (grad, self, target, weight, _REDUCTIONS[reduction],
                                            ignore_index, total), {})


def _values(func: pd.OpOverload, args: tuple, kwargs: dict) -> list:
    """Every argument of func in schema order (defaults filled in)."""
    out = list(args)
    for name, _kwonly, default, _typ in func._args[len(args):]:
        out.append(kwargs.get(name, None if default is pd._NO_DEFAULT else default))
    return out


def _ce_fits(self: Any, target: Any, label_smoothing: float) -> bool:
    return (label_smoothing == 0.0 and self.dim() in (1, 2) and not target.is_floating_point()
            and target.dim() == self.dim() - 1)


@presents("_cross_entropy_loss")
def _present_cross_entropy(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    self, target, weight, reduction, ignore_index, smoothing = _values(func, args, kwargs)
    if types or not _ce_fits(self, target, smoothing):
        return AS_IS
    dim = 0 if self.dim() == 1 else 1
    logp = _handle(_LOG_SOFTMAX(), types, (self, dim, False), {})
    out, _ = _handle(_NLL_FORWARD(), types, (logp, target, weight, _REDUCTIONS[reduction],
                                            ignore_index), {})
    with pd._disable_current_modes():  # the log-sum-exp ember's backward reads
        _, lse = func(*args, **kwargs)
    return out, lse


@presents("_cross_entropy_loss_backward")
def _present_cross_entropy_backward(func: pd.OpOverload, args: tuple, kwargs: dict,
                                    types: tuple) -> Any:
    grad, self, target, weight, lse, reduction, ignore_index, smoothing = _values(
        func, args, kwargs)
    if types or not _ce_fits(self, target, smoothing):
        return AS_IS
    dim = 0 if self.dim() == 1 else 1
    with pd._disable_current_modes():  # the log-probabilities PyTorch saved in the forward
        logp = _C.log_softmax(self, dim, None)
        total = _total_weight(target, weight, ignore_index, self.dtype)
    g = _handle(_NLL_BACKWARD(), types, (grad, logp, target, weight, _REDUCTIONS[reduction],
                                         ignore_index, total), {})
    return _handle(_LOG_SOFTMAX_BACKWARD(), types, (g, logp, dim, self.dtype), {})


def _default_scale(q: Any, scale: float) -> bool:
    return math.isclose(scale, 1.0 / math.sqrt(q.shape[-1]), rel_tol=1e-12)


def _sdpa_scale(q: Any, scale: float | None) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale


def _empty(like: Any) -> Any:
    import ember

    return ember.empty(0, dtype=ember.int64, device=like.device)


def _flash_fn(query: Any, key: Any, value: Any, dropout_p: float = 0.0, is_causal: bool = False,
              return_debug_mask: bool = False, *, scale: float | None = None) -> tuple:
    out, lse = _C._scaled_dot_product_fused_attention([query, key, value], None, is_causal,
                                                      _sdpa_scale(query, scale))
    e = _empty(query)  # the sequence offsets, rng state and debug mask ember has none of
    return out, lse, e, e, query.shape[-2], key.shape[-2], e, e, e


def _flash_backward_fn(grad_out: Any, query: Any, key: Any, value: Any, out: Any, logsumexp: Any,
                       cum_seq_q: Any, cum_seq_k: Any, max_q: int, max_k: int, dropout_p: float,
                       is_causal: bool, philox_seed: Any, philox_offset: Any, *,
                       scale: float | None = None) -> tuple:
    return tuple(_C._scaled_dot_product_fused_attention_backward(
        grad_out, query, key, value, None, out, logsumexp, is_causal, _sdpa_scale(query, scale)))


def _efficient_fn(query: Any, key: Any, value: Any, attn_bias: Any, compute_log_sumexp: bool,
                  dropout_p: float = 0.0, is_causal: bool = False, *,
                  scale: float | None = None) -> tuple:
    out, lse = _C._scaled_dot_product_fused_attention([query, key, value], attn_bias, is_causal,
                                                      _sdpa_scale(query, scale))
    e = _empty(query)
    return out, lse, e, e


def _efficient_backward_fn(grad_out_: Any, query: Any, key: Any, value: Any, attn_bias: Any,
                           out: Any, logsumexp: Any, philox_seed: Any, philox_offset: Any,
                           dropout_p: float, grad_input_mask: list, is_causal: bool = False, *,
                           scale: float | None = None) -> tuple:
    gq, gk, gv = _C._scaled_dot_product_fused_attention_backward(
        grad_out_, query, key, value, attn_bias, out, logsumexp, is_causal,
        _sdpa_scale(query, scale))
    return gq, gk, gv, None


def _t(name: str) -> tuple[str, bool, str | None, str]:
    return (name, False, None, "Tensor")


_FLASH = _lazy(lambda: torch_op("_scaled_dot_product_flash_attention", "default", _schema(
    _t("query"), _t("key"), _t("value"), ("dropout_p", False, "0.0", "float"),
    ("is_causal", False, "False", "bool"), ("return_debug_mask", False, "False", "bool"),
    ("scale", True, "None", "float?")), _flash_fn))
_FLASH_BACKWARD = _lazy(lambda: torch_op("_scaled_dot_product_flash_attention_backward", "default",
                                         _schema(
    _t("grad_out"), _t("query"), _t("key"), _t("value"), _t("out"), _t("logsumexp"),
    _t("cum_seq_q"), _t("cum_seq_k"), ("max_q", False, None, "SymInt"),
    ("max_k", False, None, "SymInt"), ("dropout_p", False, None, "float"),
    ("is_causal", False, None, "bool"), _t("philox_seed"), _t("philox_offset"),
    ("scale", True, "None", "float?")), _flash_backward_fn))
_EFFICIENT = _lazy(lambda: torch_op("_scaled_dot_product_efficient_attention", "default", _schema(
    _t("query"), _t("key"), _t("value"), ("attn_bias", False, None, "Tensor?"),
    ("compute_log_sumexp", False, None, "bool"), ("dropout_p", False, "0.0", "float"),
    ("is_causal", False, "False", "bool"), ("scale", True, "None", "float?")), _efficient_fn))
_EFFICIENT_BACKWARD = _lazy(lambda: torch_op(
    "_scaled_dot_product_efficient_attention_backward", "default", _schema(
        _t("grad_out_"), _t("query"), _t("key"), _t("value"), _t("attn_bias"), _t("out"),
        _t("logsumexp"), _t("philox_seed"), _t("philox_offset"),
        ("dropout_p", False, None, "float"), ("grad_input_mask", False, None, "bool[4]"),
        ("is_causal", False, "False", "bool"), ("scale", True, "None", "float?")),
    _efficient_backward_fn))


def _sdpa_kernel(q: Any, mask: Any) -> str:
    """The kernel PyTorch's SDPA picks for these inputs: on the CPU its flash kernel for CPU; on
    CUDA flash attention for 16-bit inputs without a mask, else memory-efficient attention."""
    if q.device.type == "cpu":
        return "cpu"
    import ember

    return "flash" if mask is None and q.dtype in (ember.float16, ember.bfloat16) else "efficient"


def _sdpa_kwargs(q: Any, scale: float, **extra: Any) -> dict:
    kwargs = {k: v for k, v in extra.items() if v is not None}
    if not _default_scale(q, scale):
        kwargs["scale"] = scale
    return kwargs


@presents("_scaled_dot_product_fused_attention")
def _present_sdpa(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    (q, k, v), mask, causal, scale = _values(func, args, kwargs)
    kernel = _sdpa_kernel(q, mask)
    if kernel == "cpu":
        targs = (q, k, v, 0.0, True) if causal else (q, k, v)
        return tuple(_handle(_SDPA_CPU(), types, targs, _sdpa_kwargs(q, scale, attn_mask=mask)))
    if kernel == "flash":
        targs = (q, k, v, 0.0, True) if causal else (q, k, v)
        r = _handle(_FLASH(), types, targs, _sdpa_kwargs(q, scale))
    else:
        needs_lse = any(t.requires_grad for t in (q, k, v))
        targs = (q, k, v, mask, needs_lse, 0.0, True) if causal else (q, k, v, mask, needs_lse)
        r = _handle(_EFFICIENT(), types, targs, _sdpa_kwargs(q, scale))
    return r[0], r[1]


@presents("_scaled_dot_product_fused_attention_backward")
def _present_sdpa_backward(func: pd.OpOverload, args: tuple, kwargs: dict, types: tuple) -> Any:
    grad, q, k, v, mask, out, lse, causal, scale = _values(func, args, kwargs)
    kernel = _sdpa_kernel(q, mask)
    if kernel == "cpu":
        return tuple(_handle(_SDPA_CPU_BACKWARD(), types, (grad, q, k, v, out, lse, 0.0, causal),
                             _sdpa_kwargs(q, scale, attn_mask=mask)))
    e = _empty(q)
    if kernel == "flash":
        r = _handle(_FLASH_BACKWARD(), types, (grad, q, k, v, out, lse, e, e, q.shape[-2],
                                               k.shape[-2], 0.0, causal, e, e),
                    _sdpa_kwargs(q, scale))
    else:
        targs = (grad, q, k, v, mask, out, lse, e, e, 0.0, [True, True, True, False])
        r = _handle(_EFFICIENT_BACKWARD(), types, (*targs, True) if causal else targs,
                    _sdpa_kwargs(q, scale))
    return r[0], r[1], r[2]


def unsafe_view(t: Any, shape: Any) -> Any:
    """``t.view(shape)`` shown as PyTorch's ``_unsafe_view`` (a matrix product's result)."""
    return _handle(_UNSAFE_VIEW(), pd._types_of(t), (t, [int(s) for s in shape]), {})


# The PyTorch-only ops by name, for ``ember.ops.aten.<name>`` (registries, policies, ``func ==``).
_MAKERS: dict[str, Callable[[], Any]] = {
    "_softmax": _SOFTMAX, "_log_softmax": _LOG_SOFTMAX, "view": _VIEW, "_unsafe_view": _UNSAFE_VIEW,
    "slice": _SLICE, "nll_loss_forward": _NLL_FORWARD,
    "index": lambda: renamed(pd.OpOverload.by_name("_index"), "Tensor", "index"),
    "linalg_vector_norm": lambda: renamed(pd.OpOverload.by_name("norm"), "default",
                                          "linalg_vector_norm"),
}


def packet(name: str) -> pd.OpOverloadPacket | None:
    """``aten.<name>`` as handlers see it, for a PyTorch op name ember has no function of."""
    pd._load()
    make = _MAKERS.get(name)
    if make is not None:
        make()
    return pd._PACKETS.get(name)
