"""What each ember operation does given nested tensors: ``NestedTensor.__torch_function__``
sends every call here (:func:`dispatch`), keyed by the op's name (``add`` is ``ember.add``,
``Tensor.add`` and ``a + b``; ``linear`` is ``nn.functional.linear``).

Jagged nested tensors run an op once on the packed values wherever that equals running it per
component: elementwise ops, ops over dimensions other than the batch and ragged ones (linear,
layer_norm, softmax / sum over the last dimension, transpose, ...). Otherwise, and for the
strided layout, the op runs per component and the results are packed again; ops over the ragged
dimension (``sum(1)``, softmax over the sequence, attention) give each component its own
computation. An op not listed raises ``NotImplementedError`` naming it.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import ember
from ember._C import Tensor
from ember.nested.tensor import (
    NestedTensor,
    RaggedDim,
    _batch,
    _components,
    _irregular,
    _is_nested,
    _jagged_from_components,
    _leaves,
    _like_from_components,
    _norm_dim,
    _shape,
    _size,
    _strided,
    _vdim,
    _with_values,
)

Handler = Callable[[Any, str, tuple, dict], Any]
_HANDLERS: dict[str, Handler] = {}


def _register(names: str | list[str], handler: Handler, inplace: bool = False) -> None:
    for name in ([names] if isinstance(names, str) else names):
        _HANDLERS[name] = handler
        if inplace:
            _HANDLERS[name + "_"] = handler


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", "") or ""
    if name == "__get__":  # a property getter: Tensor.<prop>.__get__
        parts = (getattr(func, "__qualname__", "") or "").split(".")
        return "prop:" + (parts[-2] if len(parts) >= 2 else "?")
    return name


def _first_nested(args: tuple, kwargs: dict) -> NestedTensor | None:
    for a in list(args) + list(kwargs.values()):
        if _is_nested(a):
            return a
        if isinstance(a, (list, tuple)):
            for b in a:
                if _is_nested(b):
                    return b
    return None


def _unsupported(func: Any, name: str, args: tuple, kwargs: dict, why: str = "") -> Exception:
    from ember.overrides import resolve_name

    nt = _first_nested(args, kwargs)
    layout = f"layout={nt._nt_layout}" if nt is not None else "nested"
    full = resolve_name(func) or name
    return NotImplementedError(
        f"{full}: not supported for nested tensors (NestedTensor, {layout})"
        + (f": {why}" if why else "; unbind() it and apply the op to each component"))


def dispatch(func: Any, args: tuple, kwargs: dict) -> Any:
    """Runs ``func(*args, **kwargs)`` where some argument is a nested tensor."""
    name = _op_name(func)
    handler = _HANDLERS.get(name)
    if handler is None:
        raise _unsupported(func, name, args, kwargs)
    return handler(func, name, args, kwargs)


# ---- helpers -------------------------------------------------------------------------------------
def _is_inplace(name: str, kwargs: dict) -> bool:
    return (name.endswith("_") and not name.endswith("__")) or kwargs.get("inplace") is True


def _same_buffer(a: NestedTensor, b: NestedTensor) -> bool:
    """Whether a's and b's values line up element for element (same jagged structure)."""
    return (a._nt_layout is ember.jagged and b._nt_layout is ember.jagged
            and a._nt_ragged == b._nt_ragged and a._nt_ndim == b._nt_ndim
            and (a._nt_offsets is b._nt_offsets
                 or (a._nt_starts == b._nt_starts and a._nt_lens == b._nt_lens)))


def _shape_text(nt: NestedTensor) -> str:
    if nt._nt_layout is ember.jagged:
        return "(" + ", ".join(str(s) for s in _shape(nt)) + ")"
    return f"nested(batch={_batch(nt)}, dims={nt._nt_ndim})"


def _check_batches(name: str, nts: list[NestedTensor]) -> None:
    ref = nts[0]
    for other in nts[1:]:
        ok = _batch(other) == _batch(ref) and other._nt_ndim == ref._nt_ndim
        if ok and ref._nt_layout is ember.jagged and other._nt_layout is ember.jagged:
            ok = other._nt_ragged == ref._nt_ragged and other._nt_lens == ref._nt_lens
        if not ok:
            raise RuntimeError(f"cannot call binary pointwise function {name} with inputs of "
                               f"shapes {_shape_text(ref)} and {_shape_text(other)}")


def _map_args(args: tuple, kwargs: dict, fn: Callable[[Any], Any]) -> tuple[tuple, dict]:
    return tuple(fn(a) for a in args), {k: fn(v) for k, v in kwargs.items()}


def _per_component(func: Any, ref: NestedTensor, args: tuple, kwargs: dict) -> list[Any]:
    """func run once per component: a nested argument gives its component i, a dense tensor
    spanning the batch dimension (as many dims as the nested one) its row i (or row 0 when it
    has one), anything else itself."""
    batch = _batch(ref)
    comps = {id(a): _components(a) for a in list(args) + list(kwargs.values()) if _is_nested(a)}

    def pick(a: Any, i: int) -> Any:
        if _is_nested(a):
            return comps[id(a)][i]
        if isinstance(a, Tensor) and a.dim() == ref._nt_ndim:
            if a.shape[0] not in (1, batch):
                raise RuntimeError(
                    f"a dense tensor of shape {tuple(a.shape)} does not broadcast over the "
                    f"batch dimension of a nested tensor of {batch} components")
            return a[0] if a.shape[0] == 1 else a[i]
        return a

    outs = []
    for i in range(batch):
        a2, k2 = _map_args(args, kwargs, lambda a: pick(a, i))  # noqa: B023 (used at once)
        outs.append(func(*a2, **k2))
    return outs


def _wrap_like(ref: NestedTensor, out: Any, wrap: Callable[[Tensor], Any]) -> Any:
    if isinstance(out, Tensor):
        return wrap(out)
    if isinstance(out, tuple):
        items = [wrap(o) if isinstance(o, Tensor) else o for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
    return out


def _rebuild(ref: NestedTensor, outs: list[Any], ragged: int | None = None) -> Any:
    """Per-component results (tensors or tuples of tensors) as nested tensors like ref."""
    if outs and isinstance(outs[0], tuple):
        parts = [_like_from_components(ref, [o[j] for o in outs], ragged)
                 for j in range(len(outs[0]))]
        return type(outs[0])(*parts) if hasattr(outs[0], "_fields") else tuple(parts)
    return _like_from_components(ref, outs, ragged)


def _stack(outs: list[Any]) -> Any:
    if outs and isinstance(outs[0], tuple):
        parts = [ember.stack([o[j] for o in outs]) for j in range(len(outs[0]))]
        return type(outs[0])(*parts) if hasattr(outs[0], "_fields") else tuple(parts)
    return ember.stack(outs)


def _trailing(nt: NestedTensor) -> int:
    """How many dims follow the ragged one (the trailing dims of the values, in order)."""
    return nt._nt_ndim - 1 - nt._nt_ragged


# ---- elementwise ---------------------------------------------------------------------------------
def _pointwise(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nested = [a for a in list(args) + list(kwargs.values()) if _is_nested(a)]
    ref = nested[0]
    inplace = _is_inplace(name, kwargs)
    if ref._nt_layout is ember.jagged and all(_same_buffer(ref, n) for n in nested[1:]):
        dense_ok = all(a.dim() == 0 or a.dim() <= _trailing(ref)
                       for a in list(args) + list(kwargs.values())
                       if isinstance(a, Tensor) and not _is_nested(a))
        if dense_ok:
            a2, k2 = _map_args(args, kwargs, lambda a: a._nt_values if _is_nested(a) else a)
            out = func(*a2, **k2)
            if inplace:
                return args[0]
            return _wrap_like(ref, out, lambda v: _with_values(ref, v))
    if len({n._nt_layout for n in nested}) > 1:
        raise RuntimeError(f"{name}: nested tensors of different layouts (jagged and strided) "
                           "do not mix")
    _check_batches(name, nested)
    outs = _per_component(func, ref, args, kwargs)
    if inplace:
        return args[0]
    return _rebuild(ref, outs)


_UNARY = """abs absolute neg negative exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan
arcsin arccos arctan sinh cosh tanh asinh acosh atanh arcsinh arccosh arctanh sigmoid logit relu
relu6 gelu silu mish elu selu celu leaky_relu hardtanh hardsigmoid hardswish softplus softsign
tanhshrink logsigmoid threshold hardshrink softshrink rrelu sqrt rsqrt reciprocal sign sgn floor
ceil round trunc fix frac square erf erfc erfinv lgamma digamma nan_to_num clamp clip clamp_min
clamp_max positive deg2rad rad2deg sinc i0 dropout alpha_dropout""".split()
_UNARY_NO_INPLACE = """isnan isinf isfinite isposinf isneginf signbit logical_not bitwise_not conj
angle""".split()
_NARY = """add sub subtract mul multiply div divide true_divide floor_divide remainder fmod pow
float_power atan2 arctan2 maximum minimum fmax fmin hypot copysign xlogy lerp addcmul addcdiv
masked_fill logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor rsub""".split()
_COMPARE = "eq ne lt le gt ge greater less greater_equal less_equal not_equal where isclose".split()
_DUNDER = """__rsub__ __rtruediv__ __rdiv__ __rpow__ __rfloordiv__ __rmod__ __and__ __or__ __xor__
__rand__ __ror__ __rxor__ __invert__ __lshift__ __rshift__ __iand__ __ior__ __ixor__
__floordiv__ __ifloordiv__ __imod__ __ipow__ __eq__""".split()
_register(_UNARY + _NARY, _pointwise, inplace=True)
_register(_UNARY_NO_INPLACE + _COMPARE + _DUNDER, _pointwise)


# ---- conversions, copies, *_like -------------------------------------------------------------------
def _on_values(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """Ops that act on each element independently and take no other tensor to broadcast:
    dtype / device conversion, copies, ``zeros_like``..."""
    nt = args[0]

    def sub(a: Any) -> Any:
        return a._nt_values if (_is_nested(a) and a._nt_layout is ember.jagged) else a

    if nt._nt_layout is ember.jagged:
        a2, k2 = _map_args(args, kwargs, sub)
        out = func(*a2, **k2)
        if not isinstance(out, Tensor):  # Tensor.type() without a dtype: the type's name
            return out
        return nt if (name.endswith("_") and not name.endswith("__")) else _with_values(nt, out)
    if not nt._nt_comps:
        raise _unsupported(func, name, args, kwargs, "the nested tensor has no components")
    outs = [func(c, *args[1:], **kwargs) for c in nt._nt_comps]
    if not isinstance(outs[0], Tensor):
        return outs[0]
    return nt if (name.endswith("_") and not name.endswith("__")) else _strided(outs, nt)


_register("""to type type_as float double half bfloat16 int long short bool byte char cpu cuda
detach clone zeros_like ones_like empty_like full_like rand_like randn_like
detach_ zero_ fill_ normal_ uniform_""".split(), _on_values)


def _requires_grad_(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
    for t in _leaves(nt):
        t.requires_grad_(flag)
    return nt


def _retain_grad(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    for t in _leaves(args[0]):
        t.retain_grad()
    return None


def _backward(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``t.backward(gradient, retain_graph, create_graph, inputs)`` where t, the gradient or
    an input is nested: ember.autograd.backward on their dense parts."""
    names = ("self", "gradient", "retain_graph", "create_graph", "inputs")
    p = dict(zip(names, args))
    p.update(kwargs)
    t, gradient = p["self"], p.get("gradient")
    if _is_nested(t) and gradient is None:
        raise RuntimeError("grad can be implicitly created only for scalar outputs (a nested "
                           "tensor needs an explicit nested gradient)")
    if _is_nested(t) and not _is_nested(gradient):
        raise TypeError("backward of a nested tensor needs a nested gradient")
    ember.autograd.backward(t, gradient, retain_graph=p.get("retain_graph"),
                            create_graph=bool(p.get("create_graph", False)),
                            inputs=p.get("inputs"))
    return None


def _contiguous(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """A jagged nested tensor without holes whose values, in the nested tensor's own dimension
    order (``values()``), are contiguous (as PyTorch's ``contiguous()``)."""
    nt = args[0]
    if nt._nt_layout is not ember.jagged:
        return nt
    if nt._nt_lengths is not None:
        nt = _jagged_from_components(_components(nt), nt._nt_ragged)
    if _is_contiguous(func, name, (nt,), {}):
        return nt
    r = nt._nt_ragged
    return _with_values(nt, nt._nt_values.movedim(0, r - 1).contiguous().movedim(r - 1, 0))


def _is_contiguous(func: Any, name: str, args: tuple, kwargs: dict) -> bool:
    """PyTorch's answer: no holes, and values() (the buffer in the nested tensor's dimension
    order) contiguous, so a transposed nested tensor is not."""
    nt = args[0]
    if nt._nt_layout is ember.jagged:
        r = nt._nt_ragged
        return nt._nt_lengths is None and nt._nt_values.movedim(0, r - 1).is_contiguous()
    return True


def _new_dense(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``new_ones`` / ``new_zeros`` / ``new_empty`` / ``new_full`` / ``new_tensor``: a dense
    tensor of the nested tensor's dtype and device (PyTorch gives one for ``size=()``)."""
    nt = args[0]
    return func(ember.empty(0, dtype=nt._nt_dtype, device=nt._nt_device), *args[1:], **kwargs)


_register(["new_ones", "new_zeros", "new_empty", "new_full", "new_tensor"], _new_dense)


_register("requires_grad_", _requires_grad_)
_register("retain_grad", _retain_grad)
_register("backward", _backward)
_register("contiguous", _contiguous)
_register("is_contiguous", _is_contiguous)


# ---- metadata ------------------------------------------------------------------------------------
def _numel(nt: NestedTensor) -> int:
    if nt._nt_layout is ember.jagged:
        inner = math.prod(int(s) for s in nt._nt_values.shape[1:])
        return inner * sum(nt._nt_lens)
    return sum(c.numel() for c in nt._nt_comps)


_META: dict[str, Callable[..., Any]] = {
    "size": lambda nt, dim=None: _shape(nt) if dim is None else _size(nt, dim),
    "dim": lambda nt: nt._nt_ndim,
    "ndimension": lambda nt: nt._nt_ndim,
    "numel": _numel,
    "nelement": _numel,
    "__len__": _batch,
    "element_size": lambda nt: ember.empty(0, dtype=nt._nt_dtype).element_size(),
    "is_floating_point": lambda nt: nt._nt_dtype.is_floating_point,
    "is_complex": lambda nt: nt._nt_dtype.is_complex,
    "get_device": lambda nt: nt._nt_device.index if nt._nt_device.type == "cuda" else -1,
    "tolist": lambda nt: [c.tolist() for c in _components(nt)],
    "__iter__": lambda nt: iter(_components(nt)),
    "__format__": lambda nt, spec="": format(repr(nt), spec),
    "prop:is_nested": lambda nt: True,
    "prop:data": lambda nt: _detached(nt),
}


def _detached(nt: NestedTensor) -> NestedTensor:
    if nt._nt_layout is ember.jagged:
        return _with_values(nt, nt._nt_values.detach())
    return _strided([c.detach() for c in nt._nt_comps], nt)


def _meta(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    return _META[name](*args, **kwargs)


_register(list(_META), _meta)


def _bool(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    raise RuntimeError("Boolean value of a nested tensor is ambiguous")


_register("__bool__", _bool)


# ---- reductions ----------------------------------------------------------------------------------
def _dim_arg(args: tuple, kwargs: dict, pos: int = 1) -> tuple[Any, bool]:
    """(dim, given positionally)."""
    if len(args) > pos and not isinstance(args[pos], ember.dtype):
        return args[pos], True
    return kwargs.get("dim"), False


def _with_dim(args: tuple, kwargs: dict, positional: bool, dim: Any,
              pos: int = 1) -> tuple[tuple, dict]:
    if positional:
        return args[:pos] + (dim,) + args[pos + 1:], kwargs
    return args, {**kwargs, "dim": dim}


def _packed(nt: NestedTensor) -> Tensor:
    """All elements, ragged dimension first (one tensor, no holes), for whole reductions."""
    if nt._nt_layout is ember.jagged:
        if nt._nt_lengths is None:
            return nt._nt_values
        return ember.cat([c.movedim(nt._nt_ragged - 1, 0) for c in _components(nt)])
    if not nt._nt_comps:
        return ember.empty(0, dtype=nt._nt_dtype, device=nt._nt_device)
    return ember.cat([c.reshape(-1) for c in nt._nt_comps])


def _reduction(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    if name in ("max", "min") and len(args) > 1 and isinstance(args[1], Tensor):
        return _pointwise(func, name, args, kwargs)  # max(a, b): elementwise
    dim, positional = _dim_arg(args, kwargs)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        flat = _packed(nt)
        if nt._nt_layout is ember.strided:
            flat = flat.reshape(-1)
        return func(flat, *args[1:], **kwargs)
    dims = [_norm_dim(nt, d) for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
    jag = nt._nt_layout is ember.jagged
    irregular = [d for d in dims if _irregular(nt, d)]
    if 0 in dims:
        if jag and nt._nt_ragged in dims:
            vd = [0] + [_vdim(nt, d) for d in dims if d not in (0, nt._nt_ragged)]
            vals = _packed(nt)
            a2, k2 = _with_dim(args[1:], kwargs, positional, tuple(vd), 0)
            out = func(vals, *a2, **k2)
            keep = lambda t: t.movedim(0, nt._nt_ragged - 1).unsqueeze(0)  # noqa: E731
            return _wrap_like(nt, out, lambda t: keep(t) if t.dim() == vals.dim() else t)
        if not jag and sorted(dims) == list(range(nt._nt_ndim)):
            flat = _packed(nt).reshape(-1)
            a2, k2 = _with_dim(args[1:], kwargs, positional, 0, 0)
            return func(flat, *a2, **k2)
        raise RuntimeError(f"{name}(): reducing along the batch dimension but not the ragged "
                           "dimension is not supported for nested tensors")
    if jag and not irregular:
        vd = [_vdim(nt, d) for d in dims]
        a2, k2 = _with_dim(args, kwargs, positional,
                           vd[0] if not isinstance(dim, (tuple, list)) else tuple(vd))
        a2 = (nt._nt_values,) + a2[1:]
        out = func(*a2, **k2)

        def wrap(t: Tensor) -> Any:
            if t.dim() == nt._nt_values.dim():  # keepdim
                return _with_values(nt, t)
            return _with_values(nt, t, nt._nt_ragged - sum(1 for d in dims if d < nt._nt_ragged))

        return _wrap_like(nt, out, wrap)
    cd = [d - 1 for d in dims]
    a2, k2 = _with_dim(args, kwargs, positional,
                       cd[0] if not isinstance(dim, (tuple, list)) else tuple(cd))
    outs = [func(c, *a2[1:], **k2) for c in _components(nt)]
    if irregular:
        return _stack(outs)
    return _rebuild(nt, outs)


_register("""sum mean nansum nanmean amax amin max min prod logsumexp any all argmax argmin std
var""".split(), _reduction)


def _softmax_like(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """Ops along one dimension that keep the shape: softmax, cumsum, ..."""
    nt = args[0]
    pos = 2 if name == "normalize" else 1
    dim, positional = _dim_arg(args, kwargs, pos)
    if dim is None:
        if name == "normalize":
            dim = 1
        else:
            raise RuntimeError(f"{name}(): a nested tensor needs an explicit dim")
    d = _norm_dim(nt, dim)
    if d == 0:
        raise RuntimeError(f"{name}(): not supported when reducing across the batch dimension "
                           "for NestedTensor")
    if nt._nt_layout is ember.jagged and d != nt._nt_ragged:
        a2, k2 = _with_dim(args, kwargs, positional, _vdim(nt, d), pos)
        out = func(nt._nt_values, *a2[1:], **k2)
        return _wrap_like(nt, out, lambda v: _with_values(nt, v))
    a2, k2 = _with_dim(args, kwargs, positional, d - 1, pos)
    return _rebuild(nt, [func(c, *a2[1:], **k2) for c in _components(nt)])


_register("""softmax log_softmax softmin cumsum cumprod logcumsumexp cummax cummin normalize
glu""".split(), _softmax_like)


# ---- linear algebra, layers ----------------------------------------------------------------------
def _linear(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    if not _is_nested(nt) or any(_is_nested(a) for a in list(args[1:]) + list(kwargs.values())):
        raise _unsupported(func, name, args, kwargs, "only the input may be nested")
    if nt._nt_layout is ember.jagged and _trailing(nt) >= 1:
        return _with_values(nt, func(nt._nt_values, *args[1:], **kwargs))
    return _rebuild(nt, [func(c, *args[1:], **kwargs) for c in _components(nt)])


_register("linear", _linear)


def _embedding(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    if not _is_nested(nt) or any(_is_nested(a) for a in list(args[1:]) + list(kwargs.values())):
        raise _unsupported(func, name, args, kwargs, "only the indices may be nested")
    if nt._nt_layout is ember.jagged:
        return _with_values(nt, func(nt._nt_values, *args[1:], **kwargs))
    return _strided([func(c, *args[1:], **kwargs) for c in nt._nt_comps], nt)


_register("embedding", _embedding)


def _norm_layer(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    shape = args[1] if len(args) > 1 else kwargs.get("normalized_shape")
    k = 1 if isinstance(shape, int) else len(shape)
    if nt._nt_layout is ember.jagged and _trailing(nt) >= k:
        return _with_values(nt, func(nt._nt_values, *args[1:], **kwargs))
    return _rebuild(nt, [func(c, *args[1:], **kwargs) for c in _components(nt)])


_register(["layer_norm", "rms_norm"], _norm_layer)


def _matmul(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    if name == "__rmatmul__":
        a, b = args[1], args[0]
        func = ember.matmul
    else:
        a = args[0] if args else kwargs.get("input")
        b = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("mat2"))
    if (_is_nested(a) and not _is_nested(b) and a._nt_layout is ember.jagged
            and isinstance(b, Tensor) and b.dim() <= 2 and _trailing(a) >= 1 and name != "bmm"):
        return _with_values(a, func(a._nt_values, b))
    if name in ("bmm", "mm"):
        func = ember.matmul  # per component: one matrix product each
    ref = a if _is_nested(a) else b
    nested = [x for x in (a, b) if _is_nested(x)]
    if len(nested) == 2:
        if a._nt_layout is not b._nt_layout:
            raise RuntimeError(f"{name}: nested tensors of different layouts do not mix")
        if _batch(a) != _batch(b):
            raise RuntimeError(f"{name}(): the nested tensors have {_batch(a)} and {_batch(b)} "
                               "components")
    outs = _per_component(func, ref, (a, b), {})
    return _rebuild(ref, outs, ref._nt_ragged if ref._nt_layout is ember.jagged else None)


_register(["matmul", "bmm", "mm", "__rmatmul__"], _matmul)


def _sdpa_check(q: Any, k: Any, v: Any, attn_mask: Any) -> None:
    """PyTorch's checks of nested (jagged) attention inputs, in its order and words: all three
    jagged, one dtype, one device, at least 3 dims, one ragged dimension, and no attn_mask
    (PyTorch refuses every mask with jagged inputs: each sequence already attends within its own
    length, and is_causal gives causal masking)."""
    jag = [_is_nested(t) and t._nt_layout is ember.jagged for t in (q, k, v)]
    if any(_is_nested(t) and t._nt_layout is ember.strided for t in (q, k, v)) and not any(jag):
        if attn_mask is not None:
            raise RuntimeError("Scaled_dot_product_attention: Nested tensors for query / key are "
                               "not supported when an explicit attn_mask is set")
        if not all(_is_nested(t) for t in (q, k, v)):
            raise RuntimeError("scaled_dot_product_attention(): query, key and value must all be "
                               "nested tensors")
        return
    if not all(jag):
        def nested(t: Any) -> bool:
            return _is_nested(t) or bool(getattr(t, "is_nested", False))

        raise ValueError(
            "Expected query, key, and value to be nested tensors, but got query.is_nested: "
            f"{nested(q)}, key.is_nested: {nested(k)}, and value.is_nested: {nested(v)} instead.")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{q.dtype}, key.dtype: {k.dtype}, and value.dtype: {v.dtype} instead.")
    if not q.device == k.device == v.device:
        raise ValueError(
            "Expected query, key, and value to have the same device type, but got query.device: "
            f"{q.device}, key.device: {k.device}, and value.device: {v.device} instead.")
    if min(q.dim(), k.dim(), v.dim()) < 3:
        raise ValueError(
            "Expected query, key, and value to all be at least 3 dimensional, but got query.dim: "
            f"{q.dim()}, key.dim: {k.dim()} and value.dim: {v.dim()} instead.")
    if not q._nt_ragged == k._nt_ragged == v._nt_ragged:
        raise ValueError(
            "Expected query, key, and value to all be ragged on the same dimension, but got "
            f"ragged dims {q._nt_ragged}, {k._nt_ragged}, and {v._nt_ragged}, respectively.")
    if attn_mask is not None:
        raise ValueError("Masks are not yet supported!")


def _sdpa(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
             "enable_gqa")
    p = dict(zip(names, args))
    p.update(kwargs)
    q, k, v = p["query"], p["key"], p["value"]
    _sdpa_check(q, k, v, p.get("attn_mask"))
    if not (_batch(q) == _batch(k) == _batch(v)):
        raise RuntimeError("scaled_dot_product_attention(): query, key and value must be nested "
                           f"tensors of the same batch size, got {_batch(q)}, {_batch(k)} and "
                           f"{_batch(v)}")
    extra = {n: p[n] for n in ("dropout_p", "is_causal", "scale") if n in p}
    if p.get("enable_gqa"):
        extra["enable_gqa"] = True
    outs = [func(qi, ki, vi, **extra)
            for qi, ki, vi in zip(_components(q), _components(k), _components(v))]
    return _rebuild(q, outs, q._nt_ragged if q._nt_layout is ember.jagged else None)


_register("scaled_dot_product_attention", _sdpa)


# ---- shape ops -----------------------------------------------------------------------------------
def _permuted(nt: NestedTensor, perm: list[int]) -> NestedTensor:
    """nt with its non-batch dims permuted (perm over nested dims 1..n-1, as nested dims)."""
    if nt._nt_layout is ember.strided:
        return _strided([c.permute([d - 1 for d in perm]) for c in nt._nt_comps], nt)
    r = nt._nt_ragged
    new_r = perm.index(r) + 1
    full = nt._nt_values.movedim(0, r - 1).permute([d - 1 for d in perm])
    return _with_values(nt, full.movedim(new_r - 1, 0), new_r)


def _transpose(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    d0 = args[1] if len(args) > 1 else kwargs.get("dim0")
    d1 = args[2] if len(args) > 2 else kwargs.get("dim1")
    d0, d1 = _norm_dim(nt, d0), _norm_dim(nt, d1)
    if d0 == d1:
        return nt
    if 0 in (d0, d1):
        raise RuntimeError(f"{name}(): transposing the batch dimension is not supported for "
                           "nested tensors")
    perm = list(range(1, nt._nt_ndim))
    perm[d0 - 1], perm[d1 - 1] = perm[d1 - 1], perm[d0 - 1]
    return _permuted(nt, perm)


def _permute(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    dims = args[1:] if len(args) > 1 else tuple(kwargs.get("dims", ()))
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    dims = [_norm_dim(nt, d) for d in dims]
    if sorted(dims) != list(range(nt._nt_ndim)):
        raise RuntimeError(f"permute(): dims {dims} are not a permutation of the "
                           f"{nt._nt_ndim} dimensions")
    if dims[0] != 0:
        raise RuntimeError("permute(): moving the batch dimension is not supported for nested "
                           "tensors")
    return _permuted(nt, dims[1:])


_register(["transpose", "swapaxes", "swapdims"], _transpose)
_register("permute", _permute)


def _unsqueeze(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    d = _norm_dim(nt, args[1] if len(args) > 1 else kwargs["dim"], nt._nt_ndim + 1)
    if d == 0:
        raise RuntimeError("unsqueeze(): adding a dimension before the batch dimension is not "
                           "supported for nested tensors")
    if nt._nt_layout is ember.strided:
        return _strided([c.unsqueeze(d - 1) for c in nt._nt_comps], nt)
    r = nt._nt_ragged
    if d <= r:
        return _with_values(nt, nt._nt_values.unsqueeze(d), r + 1)
    return _with_values(nt, nt._nt_values.unsqueeze(d - 1), r)


def _squeeze(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    if dim is None:
        raise RuntimeError("squeeze(): a nested tensor needs an explicit dim")
    d = _norm_dim(nt, dim)
    if d == 0 or _irregular(nt, d):
        raise RuntimeError(f"squeeze(): dimension {d} of a nested tensor cannot be squeezed")
    if nt._nt_layout is ember.strided:
        return _strided([c.squeeze(d - 1) for c in nt._nt_comps], nt)
    if nt._nt_values.shape[_vdim(nt, d)] != 1:
        return nt
    r = nt._nt_ragged
    return _with_values(nt, nt._nt_values.squeeze(_vdim(nt, d)), r - 1 if d < r else r)


_register("unsqueeze", _unsqueeze)
_register("squeeze", _squeeze)


def _reshape(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    shape = args[1:] if len(args) > 1 else tuple(kwargs.get("shape", kwargs.get("size", ())))
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if not shape or shape[0] not in (-1, _batch(nt)):
        raise RuntimeError(f"{name}(): the batch dimension of a nested tensor must stay "
                           f"{_batch(nt)} (or -1), got shape {list(shape)}")
    inner = list(shape[1:])
    if nt._nt_layout is ember.strided:
        return _strided([c.reshape(inner) for c in nt._nt_comps], nt)
    if inner.count(-1) != 1:
        raise RuntimeError(f"{name}(): give -1 for the ragged dimension of a jagged nested "
                           f"tensor (exactly once), got shape {list(shape)}")
    new_r = inner.index(-1) + 1
    rest = [s for s in inner if s != -1]
    same_rows = math.prod(rest) == math.prod(int(s) for s in nt._nt_values.shape[1:])
    if nt._nt_ragged == 1 and new_r == 1 and same_rows:
        # each ragged row keeps its elements: a view (or reshape) of the values
        vals = getattr(nt._nt_values, "view" if name == "view" else "reshape")([-1] + rest)
        return _with_values(nt, vals, 1)
    if name == "view":
        raise RuntimeError("view(): this reshape of a jagged nested tensor moves elements "
                           "across its ragged dimension; use reshape()")
    return _rebuild(nt, [c.reshape(inner) for c in _components(nt)], new_r)


def _unflatten(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    d = _norm_dim(nt, args[1] if len(args) > 1 else kwargs["dim"])
    sizes = tuple(args[2] if len(args) > 2 else kwargs["sizes"])
    if d == 0 or _irregular(nt, d):
        raise RuntimeError(f"unflatten(): dimension {d} of a nested tensor cannot be unflattened")
    if nt._nt_layout is ember.strided:
        return _strided([c.unflatten(d - 1, sizes) for c in nt._nt_comps], nt)
    r = nt._nt_ragged
    vals = nt._nt_values.unflatten(_vdim(nt, d), sizes)
    return _with_values(nt, vals, r + len(sizes) - 1 if d < r else r)


def _flatten(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    s = _norm_dim(nt, args[1] if len(args) > 1 else kwargs.get("start_dim", 0))
    e = _norm_dim(nt, args[2] if len(args) > 2 else kwargs.get("end_dim", -1))
    if s == e:
        return nt
    if s == 0 or any(_irregular(nt, d) for d in range(s, e + 1)):
        raise RuntimeError(f"flatten(): dimensions {s}..{e} of a nested tensor include its batch "
                           "or ragged dimension; only regular dimensions can be flattened")
    if nt._nt_layout is ember.strided:
        return _strided([c.flatten(s - 1, e - 1) for c in nt._nt_comps], nt)
    r = nt._nt_ragged
    vals = nt._nt_values.flatten(_vdim(nt, s), _vdim(nt, e))
    return _with_values(nt, vals, r - (e - s) if e < r else r)


_register(["view", "reshape"], _reshape)
_register("flatten", _flatten)
_register("unflatten", _unflatten)


def _split(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    how = args[1] if len(args) > 1 else kwargs.get("chunks", kwargs.get("split_size_or_sections",
                                                                        kwargs.get("split_size")))
    d = _norm_dim(nt, args[2] if len(args) > 2 else kwargs.get("dim", 0))
    if d == 0:
        comps = _components(nt)
        groups = ember.arange(len(comps)).chunk(how) if name == "chunk" else \
            ember.arange(len(comps)).split(how)
        return tuple(_like_from_components(nt, [comps[int(i)] for i in g.tolist()])
                     for g in groups)
    if _irregular(nt, d):
        raise RuntimeError(f"{name}(): splitting a nested tensor along its ragged dimension "
                           f"{d} is not supported")
    if nt._nt_layout is ember.jagged:
        parts = getattr(nt._nt_values, name)(how, _vdim(nt, d))
        return tuple(_with_values(nt, p) for p in parts)
    per = [getattr(c, name)(how, d - 1) for c in nt._nt_comps]
    return tuple(_strided([p[j] for p in per], nt) for j in range(len(per[0])))


_register(["chunk", "split"], _split)


def _cat(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    tensors = list(args[0] if args else kwargs["tensors"])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not all(_is_nested(t) for t in tensors):
        raise RuntimeError(f"{name}(): nested and dense tensors cannot be concatenated")
    ref = tensors[0]
    if len({t._nt_layout for t in tensors}) > 1:
        raise RuntimeError(f"{name}(): nested tensors of different layouts do not mix")
    d = _norm_dim(ref, dim)
    if d == 0:
        comps = [c for t in tensors for c in _components(t)]
        if ref._nt_layout is ember.strided:
            return _strided(comps, ref)
        return _jagged_from_components(comps, ref._nt_ragged)
    if _irregular(ref, d):
        raise RuntimeError(f"{name}(): concatenating nested tensors along their ragged "
                           f"dimension {d} is not supported")
    if all(_same_buffer(ref, t) for t in tensors[1:]):
        return _with_values(ref, ember.cat([t._nt_values for t in tensors], _vdim(ref, d)))
    _check_batches(name, tensors)
    per = [_components(t) for t in tensors]
    return _rebuild(ref, [ember.cat([p[i] for p in per], d - 1) for i in range(_batch(ref))])


_register(["cat", "concat", "concatenate"], _cat)


def _stack_nested(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``stack`` of jagged nested tensors of one structure, along a new dimension after the
    ragged one or between regular ones (PyTorch refuses dim 0 and the ragged dimension)."""
    tensors = list(args[0] if args else kwargs["tensors"])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    if not all(_is_nested(t) for t in tensors):
        raise RuntimeError("stack(): expected all nested tensors inputs")
    ref = tensors[0]
    if any(t._nt_layout is ember.strided for t in tensors):
        raise _unsupported(func, name, args, kwargs, "stacking strided layout nested tensors "
                           "is not supported (nor in PyTorch); use layout=ember.jagged")
    d = _norm_dim(ref, dim, ref._nt_ndim + 1)
    if d == 0:
        raise RuntimeError("stack(): not supported for NestedTensor on dim=0")
    if d == ref._nt_ragged:
        raise RuntimeError("stack(): not supported for NestedTensor on ragged dim")
    if not all(_same_buffer(ref, t) for t in tensors[1:]):
        raise RuntimeError("stack(): expected all nested tensors to have the same nested "
                           "structure")
    r = ref._nt_ragged
    vals = ember.stack([t._nt_values for t in tensors], d if d < r else d - 1)
    return _with_values(ref, vals, r + 1 if d < r else r)


def _narrow(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    names = ("self", "dim", "start", "length")
    p = dict(zip(names, args))
    p.update(kwargs)
    nt = p["self"]
    d = _norm_dim(nt, p["dim"])
    if d == 0:
        raise RuntimeError("narrow(): not supported for NestedTensor on dim=0")
    if _irregular(nt, d):
        raise RuntimeError("narrow(): not supported for NestedTensor on ragged dim")
    if nt._nt_layout is ember.strided:
        return _strided([c.narrow(d - 1, p["start"], p["length"]) for c in nt._nt_comps], nt)
    return _with_values(nt, nt._nt_values.narrow(_vdim(nt, d), p["start"], p["length"]))


def _expand(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``expand`` / ``expand_as`` of a jagged nested tensor: the batch and ragged dimensions
    stay (-1, or the same batch size), regular ones of size 1 broadcast."""
    nt = args[0]
    if name == "expand_as":
        other = args[1] if len(args) > 1 else kwargs["other"]
        if _is_nested(other):
            if not (_is_nested(nt) and _same_buffer(nt, other)):
                raise RuntimeError("expand_as(): the nested tensors differ in structure")
            sizes = [-1 if d in (0, other._nt_ragged) else int(other.shape[d])
                     for d in range(other._nt_ndim)]
        else:
            sizes = list(other.shape)
    else:
        sizes = list(args[1:]) if len(args) > 1 else list(kwargs.get("size", ()))
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = list(sizes[0])
    if not _is_nested(nt) or nt._nt_layout is not ember.jagged:
        raise _unsupported(func, name, args, kwargs, "only a jagged nested tensor expands")
    text = "(" + ", ".join(str(x) for x in _shape(nt)) + ")"

    def bad() -> RuntimeError:
        return RuntimeError(f"expand(): cannot expand shape {text} -> {list(sizes)}")

    if len(sizes) != nt._nt_ndim:
        raise bad()
    new = [-1]
    for d, n in enumerate(sizes):
        n = int(n) if not isinstance(n, RaggedDim) else n
        if d == 0:
            if n not in (-1, _batch(nt)):
                raise bad()
        elif d == nt._nt_ragged:
            if n != -1 and n != RaggedDim(nt._nt_rid):
                raise bad()
        else:
            new.append(n)
    return _with_values(nt, nt._nt_values.expand(new))


def _select(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    names = ("self", "dim", "index")
    p = dict(zip(names, args))
    p.update(kwargs)
    nt = p["self"]
    d, i = _norm_dim(nt, p["dim"]), p["index"]
    if d == 0:
        return _getitem(func, "__getitem__", (nt, i), {})
    if _irregular(nt, d):
        raise RuntimeError("select(): not supported for NestedTensor on ragged dim")
    if nt._nt_layout is ember.strided:
        return _strided([c.select(d - 1, i) for c in nt._nt_comps], nt)
    r = nt._nt_ragged
    return _with_values(nt, nt._nt_values.select(_vdim(nt, d), i), r - 1 if d < r else r)


_register("select", _select)
_register("stack", _stack_nested)
_register("narrow", _narrow)
_register(["expand", "expand_as"], _expand)


def _unbind(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if _norm_dim(nt, dim) != 0:
        raise RuntimeError("unbind(): only supported for NestedTensor on dim=0")
    return tuple(_components(nt))


_register("unbind", _unbind)


def _getitem(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    nt, idx = args[0], args[1]
    if isinstance(idx, int) and not isinstance(idx, bool):
        b = _batch(nt)
        if not -b <= idx < b:
            raise IndexError(f"index {idx} is out of bounds for a nested tensor of {b} "
                             "components")
        return _components(nt)[idx]
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if any(i is None or isinstance(i, Tensor) for i in items) or items.count(Ellipsis) > 1:
        raise _unsupported(func, name, args, kwargs, "only int, slice and ... indices are "
                           "supported")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        fill = nt._nt_ndim - (len(items) - 1)
        items = items[:at] + [slice(None)] * fill + items[at + 1:]
    if len(items) > nt._nt_ndim:
        raise IndexError(f"too many indices for a nested tensor of dimension {nt._nt_ndim}")
    if isinstance(items[0], int) and not isinstance(items[0], bool):
        return _components(nt)[items[0]][tuple(items[1:])]
    if items[0] != slice(None):
        raise _unsupported(func, name, args, kwargs, "slicing the batch dimension is not "
                           "supported (index it with an int, or use chunk/split on dim 0)")
    for d, i in enumerate(items[1:], start=1):
        if _irregular(nt, d) and i != slice(None):
            raise RuntimeError(f"__getitem__(): indexing the ragged dimension {d} of a nested "
                               "tensor is not supported")
    rest = tuple(items[1:])
    if nt._nt_layout is ember.strided:
        return _strided([c[rest] for c in nt._nt_comps], nt)
    # drop the dims taken by ints (before the ragged one: it moves left)
    r = nt._nt_ragged
    new_r = r - sum(1 for d, i in enumerate(items[1:], start=1) if d < r and isinstance(i, int))
    return _rebuild(nt, [c[rest] for c in _components(nt)], new_r)


_register("__getitem__", _getitem)


# ---- autograd.grad / autograd.backward with nested tensors -----------------------------------
def has_nested(*objs: Any) -> bool:
    """Whether any of objs (tensors, sequences of tensors, None) is or holds a nested tensor."""
    from ember._utils import _holds

    return _holds(_is_nested, *objs)


def _seq(x: Any) -> list[Any]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def flatten_for_autograd(outputs: Any, grad_outputs: Any,
                         inputs: Any) -> tuple[list, list | None, list | None, Callable]:
    """``ember.autograd.grad`` / ``backward`` arguments with every nested tensor replaced by the
    dense tensors holding its data (a jagged one's values, a strided one's components), and the
    function that turns the dense gradients of those inputs back into nested ones (PyTorch's
    ``autograd.grad(out, nt)`` gives a nested gradient of nt's structure)."""
    outs, gos = _seq(outputs), _seq(grad_outputs)
    if grad_outputs is not None and len(gos) != len(outs):
        raise RuntimeError(f"grad: got {len(outs)} outputs but {len(gos)} grad_outputs")
    if not gos:
        gos = [None] * len(outs)
    flat_outs: list[Any] = []
    flat_gos: list[Any] = []
    for o, g in zip(outs, gos):
        if not _is_nested(o):
            if _is_nested(g):
                raise RuntimeError("grad: a nested grad_output was given for a dense output")
            flat_outs.append(o)
            flat_gos.append(g)
            continue
        if g is None:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if not _is_nested(g):
            raise RuntimeError("grad: the grad_output of a nested output must be a nested tensor "
                               "of the same structure")
        if _same_buffer(o, g):
            flat_outs.append(o._nt_values)
            flat_gos.append(g._nt_values)
        else:
            _check_batches("grad", [o, g])
            flat_outs += _components(o)
            flat_gos += _components(g)
    ins = _seq(inputs)
    spans: list[tuple[Any, int, int]] = []
    flat_ins: list[Any] = []
    for t in ins:
        leaves = _leaves(t) if _is_nested(t) else [t]
        spans.append((t, len(flat_ins), len(leaves)))
        flat_ins += leaves

    def unflatten(grads: tuple) -> tuple:
        res = []
        for t, at, n in spans:
            part = grads[at:at + n]
            if not _is_nested(t):
                res.append(part[0])
            elif all(g is None for g in part):
                res.append(None)
            elif t._nt_layout is ember.jagged:
                res.append(_with_values(t, part[0]))
            else:
                res.append(_strided([g if g is not None else ember.zeros_like(c)
                                     for g, c in zip(part, t._nt_comps)], t))
        return tuple(res)

    go = None if grad_outputs is None and all(g is None for g in flat_gos) else flat_gos
    return flat_outs, go, (flat_ins if inputs is not None else None), unflatten
