"""What each ember operation does given MaskedTensors: ``MaskedTensor.__torch_function__`` sends
every call here (:func:`dispatch`), keyed by the op's name (``add`` is ``ember.add``,
``Tensor.add`` and ``a + b``). The ops run on the data and the mask, which are plain tensors,
so autograd records them on the data. An op not listed raises ``TypeError`` naming it, as
PyTorch does for the ops its MaskedTensor lacks.
"""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember._C import Tensor
from ember.masked import _functional as _F
from ember.masked.maskedtensor import MaskedTensor, _make, is_masked_tensor

Handler = Callable[[Any, str, tuple, dict], Any]
_HANDLERS: dict[str, Handler] = {}


def _register(names: str | list[str], handler: Handler) -> None:
    for name in ([names] if isinstance(names, str) else names):
        _HANDLERS[name] = handler


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", "") or ""
    if name == "__get__":  # a property getter: Tensor.<prop>.__get__
        parts = (getattr(func, "__qualname__", "") or "").split(".")
        return "prop:" + (parts[-2] if len(parts) >= 2 else "?")
    return name


def _full_name(func: Any, name: str) -> str:
    from ember.overrides import resolve_name

    try:
        return resolve_name(func) or name
    except Exception:  # a callable resolve_name cannot name
        return name


def dispatch(func: Any, args: tuple, kwargs: dict) -> Any:
    """Runs ``func(*args, **kwargs)`` where some argument is a MaskedTensor."""
    name = _op_name(func)
    handler = _HANDLERS.get(name)
    if handler is None:
        raise TypeError(
            f"{_full_name(func, name)}: not supported for MaskedTensor (it supports pointwise "
            "ops, reductions, softmax / log_softmax, where, and view / select ops); use "
            "get_data() / get_mask() or to_tensor(value) to compute on plain tensors")
    return handler(func, name, args, kwargs)


# ---- helpers -------------------------------------------------------------------------------------
def _unsupported(func: Any, name: str, why: str) -> TypeError:
    return TypeError(f"{_full_name(func, name)}: not supported for MaskedTensor: {why}")


def _masked_in(args: tuple, kwargs: dict) -> list[MaskedTensor]:
    found = []
    for a in list(args) + list(kwargs.values()):
        if is_masked_tensor(a):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found += [b for b in a if is_masked_tensor(b)]
    return found


def _masks_match(a: Tensor, b: Tensor) -> bool:
    return a is b or (a.shape == b.shape and bool(ember.equal(a, b)))


def _common_mask(mts: list[MaskedTensor]) -> Tensor:
    """The mask the MaskedTensor operands of a pointwise op share (PyTorch's rule: equal masks,
    same shape; no broadcasting between masks)."""
    mask = mts[0]._masked_mask
    for other in mts[1:]:
        if not _masks_match(mask, other._masked_mask):
            raise ValueError("Input masks must match. If you need support for this, please "
                             "open an issue on Github.")
    return mask


def _map(x: Any, fn: Callable[[MaskedTensor], Any]) -> Any:
    if is_masked_tensor(x):
        return fn(x)
    if isinstance(x, (list, tuple)) and any(is_masked_tensor(b) for b in x):
        return type(x)(fn(b) if is_masked_tensor(b) else b for b in x)
    return x


def _map_args(args: tuple, kwargs: dict,
              fn: Callable[[MaskedTensor], Any]) -> tuple[tuple, dict]:
    return tuple(_map(a, fn) for a in args), {k: _map(v, fn) for k, v in kwargs.items()}


def _data(mt: MaskedTensor) -> Tensor:
    return mt._masked_data


def _mask(mt: MaskedTensor) -> Tensor:
    return mt._masked_mask


def _wrap(out: Any, mask: Tensor) -> Any:
    """Results (a tensor, or a tuple of them) as MaskedTensors with mask (broadcast to a
    result that a plain operand made larger)."""
    if isinstance(out, Tensor):
        m = mask if out.shape == mask.shape else ember.broadcast_to(mask, out.shape)
        return _make(out, m)
    if isinstance(out, tuple):
        items = [_wrap(o, mask) if isinstance(o, Tensor) else o for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
    return out


_INPLACE_DUNDERS = frozenset("""__iadd__ __isub__ __imul__ __itruediv__ __ifloordiv__ __imod__
__ipow__ __iand__ __ior__ __ixor__ __ilshift__ __irshift__""".split())


def _is_inplace(name: str) -> bool:
    return (name.endswith("_") and not name.endswith("__")) or name in _INPLACE_DUNDERS


# ---- pointwise ops -------------------------------------------------------------------------------
def _pointwise(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """The op on the data; the result keeps the operands' common mask."""
    mask = _common_mask(_masked_in(args, kwargs))
    a2, k2 = _map_args(args, kwargs, _data)
    out = func(*a2, **k2)
    if _is_inplace(name):
        if not (args and is_masked_tensor(args[0])):
            raise _unsupported(func, name, "an in-place op on a plain tensor cannot take a "
                                           "MaskedTensor operand")
        return args[0]
    return _wrap(out, mask)


# PyTorch's unary and binary MaskedTensor ops (with their in-place forms), and a few more
# elementwise ops that keep the mask just as well.
_UNARY = """abs absolute acos arccos acosh arccosh angle asin arcsin asinh arcsinh atan arctan atanh
arctanh bitwise_not ceil clamp clip conj_physical cos cosh deg2rad digamma erf erfc erfinv exp exp2
expm1 fix floor frac lgamma log log10 log1p log2 logit i0 isnan nan_to_num neg negative positive
pow rad2deg reciprocal round rsqrt sigmoid sign sgn signbit sin sinc sinh sqrt square tan tanh trunc
float_power isinf isfinite isposinf isneginf logical_not clamp_min clamp_max relu""".split()
_BINARY = """add atan2 arctan2 bitwise_and bitwise_or bitwise_xor bitwise_left_shift
bitwise_right_shift div divide floor_divide fmod logaddexp logaddexp2 mul multiply nextafter
remainder sub subtract true_divide eq ne le ge greater greater_equal gt less_equal lt less maximum
minimum fmax fmin not_equal rsub hypot copysign xlogy logical_and logical_or logical_xor
lerp addcmul addcdiv""".split()
_NO_INPLACE = {"isnan", "signbit", "angle", "isinf", "isfinite", "isposinf", "isneginf",
               "maximum", "minimum", "fmax", "fmin", "logaddexp", "logaddexp2", "rsub"}
_DUNDER = """__rsub__ __rtruediv__ __rdiv__ __rpow__ __rfloordiv__ __rmod__ __and__ __or__ __xor__
__rand__ __ror__ __rxor__ __invert__ __lshift__ __rshift__ __rlshift__ __rrshift__ __floordiv__
__eq__""".split()
_register(_UNARY + _BINARY + _DUNDER + sorted(_INPLACE_DUNDERS), _pointwise)
_register([n + "_" for n in _UNARY + _BINARY if n not in _NO_INPLACE], _pointwise)
_register(["fill_", "zero_", "copy_"], _pointwise)


# ---- where ---------------------------------------------------------------------------------------
def _where(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``where(condition, input, other)`` (``input.where(condition, other)``): the data and the
    mask picked alike; a plain tensor or number counts as unmasked."""
    method = (getattr(func, "__qualname__", "") or "").startswith("Tensor.")
    names = ("input", "condition", "other") if method else ("condition", "input", "other")
    p = _bind(func, name, args, kwargs, names, names)
    cond, x, y = p.get("condition"), p.get("input"), p.get("other")
    if x is None or y is None:
        raise _unsupported(func, name, "where(condition) with one argument")
    if is_masked_tensor(cond):
        raise _unsupported(func, name, "the condition must be a plain bool tensor")
    ref = x if is_masked_tensor(x) else y
    true = ember.ones((), dtype=ember.bool, device=ref.device)

    def part(v: Any) -> tuple[Any, Tensor]:
        return (v._masked_data, v._masked_mask) if is_masked_tensor(v) else (v, true)

    (dx, mx), (dy, my) = part(x), part(y)
    data = ember.where(cond, dx, dy)
    mask = ember.where(cond, mx, my)
    return _make(data, ember.broadcast_to(mask, data.shape).contiguous())


_register("where", _where)


# ---- argument binding ----------------------------------------------------------------------------
def _bind(func: Any, name: str, args: tuple, kwargs: dict, names: tuple,
          keywords: tuple = ()) -> dict:
    """args / kwargs by parameter name: names are the positional parameters (the tensor
    first), keywords the keyword-only ones."""
    if len(args) > len(names):
        raise TypeError(f"{_full_name(func, name)}() takes at most {len(names)} positional "
                        f"arguments but {len(args)} were given")
    p = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in p:
            raise TypeError(f"{_full_name(func, name)}() got multiple values for argument "
                            f"'{k}'")
        if k not in names and k not in keywords:
            raise TypeError(f"{_full_name(func, name)}() got an unexpected keyword argument "
                            f"'{k}'")
        p[k] = v
    return p


def _dims(mt: MaskedTensor, dim: Any) -> tuple[int, ...]:
    """dim as a tuple of dims in range (all of them for None or an empty list)."""
    n = mt._masked_data.ndim
    if dim is None:
        return tuple(range(n))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return tuple(range(n))
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"dim must be an int or a sequence of ints, got {dim!r}")
        lo, hi = (-1, 0) if n == 0 else (-n, n - 1)
        if not lo <= d <= hi:
            raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], "
                             f"but got {d})")
        out.append(d % n if n else 0)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {dim!r} appears multiple times in the list of dims")
    return tuple(out) if n else ()


def _any(mask: Tensor, dims: tuple[int, ...], keepdim: bool) -> Tensor:
    """Where a reduction over dims saw at least one specified element."""
    if not dims:
        return mask.clone()
    return mask.any(dim=dims, keepdim=keepdim)


# ---- reductions ----------------------------------------------------------------------------------
_RED_NAMES = {
    "sum": (("input", "dim", "keepdim"), ("dtype",)),
    "mean": (("input", "dim", "keepdim"), ("dtype",)),
    "prod": (("input", "dim", "keepdim"), ("dtype",)),
    "amax": (("input", "dim", "keepdim"), ()),
    "amin": (("input", "dim", "keepdim"), ()),
    "all": (("input", "dim", "keepdim"), ()),
    "any": (("input", "dim", "keepdim"), ()),
    "argmax": (("input", "dim", "keepdim"), ()),
    "argmin": (("input", "dim", "keepdim"), ()),
    "var": (("input", "dim", "unbiased", "keepdim"), ("correction",)),
    "std": (("input", "dim", "unbiased", "keepdim"), ("correction",)),
    "norm": (("input", "p", "dim", "keepdim", "dtype"), ()),
    "vector_norm": (("x", "ord", "dim", "keepdim"), ("dtype",)),
}


def _reduction(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """A reduction over the specified elements; the result is specified where it saw one."""
    names, keywords = _RED_NAMES[name]
    kwargs = {("input" if k == "self" else k): v for k, v in kwargs.items()}
    p = _bind(func, name, args, kwargs, names, keywords)
    mt = p.get(names[0])
    if not is_masked_tensor(mt):
        raise _unsupported(func, name, "only the reduced tensor may be a MaskedTensor")
    d, m = mt._masked_data, mt._masked_mask
    dim = p.get("dim")
    dtype = p.get("dtype")
    if isinstance(dim, ember.dtype):  # sum(x, dtype) written positionally
        dim, dtype = None, dim
    unbiased = p.get("unbiased")
    if isinstance(dim, bool) and name in ("var", "std"):  # var(x, unbiased)
        dim, unbiased = None, dim
    keepdim = bool(p.get("keepdim") or False)
    if name in ("argmax", "argmin"):
        if dim is not None and not isinstance(dim, int):
            raise TypeError(f"{name}(): dim must be an int or None, got {dim!r}")
        if dim is None:  # over the flattened tensor
            fn = _F.argmax if name == "argmax" else _F.argmin
            flat = fn(d.reshape(-1), 0, mask=m.reshape(-1))
            mask = m.any()
            if keepdim:
                shape = [1] * d.ndim
                flat, mask = flat.reshape(shape), mask.reshape(shape)
            return _make(flat, mask)
        dims = _dims(mt, dim)
        fn = _F.argmax if name == "argmax" else _F.argmin
        value = fn(d, dims[0] if dims else None, keepdim=keepdim, mask=m)
        return _make(value, _any(m, dims, keepdim))
    dims = _dims(mt, dim)
    if name in ("sum", "mean", "prod"):
        fn = {"sum": _F.sum, "mean": _F.mean, "prod": _F.prod}[name]
        value = fn(d, dims, keepdim=keepdim, dtype=dtype, mask=m)
    elif name in ("amax", "amin"):
        value = (_F.amax if name == "amax" else _F.amin)(d, dims, keepdim=keepdim, mask=m)
    elif name in ("all", "any"):
        truth = d if d.dtype is ember.bool else d != 0
        fill = ember.full((), name == "all", dtype=ember.bool, device=d.device)
        picked = ember.where(m, truth, fill)
        value = (picked.all if name == "all" else picked.any)(dim=dims, keepdim=keepdim) \
            if dims else picked.clone()
    elif name in ("var", "std"):
        fn = _F.var if name == "var" else _F.std
        value = fn(d, dims, unbiased, correction=p.get("correction"), keepdim=keepdim,
                   mask=m)
    else:  # norm, vector_norm
        ord = p.get("p", 2) if name == "norm" else p.get("ord", 2)
        if ord == "fro":
            ord = 2
        if isinstance(ord, str):
            raise _unsupported(func, name, f"the {ord!r} norm (vector norms only)")
        value = _F.norm(d, ord, dims, keepdim=keepdim, dtype=dtype, mask=m)
    return _make(value, _any(m, dims, keepdim))


_register(list(_RED_NAMES), _reduction)


def _max_min(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``max(a, b)`` / ``min(a, b)`` elementwise; the reductions are PyTorch's gaps too."""
    if len(args) > 1 and isinstance(args[1], Tensor) or isinstance(kwargs.get("other"), Tensor):
        return _pointwise(func, name, args, kwargs)
    raise _unsupported(func, name, "use amax / amin (and argmax / argmin) instead")


_register(["max", "min"], _max_min)


# ---- softmax -------------------------------------------------------------------------------------
def _softmax(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """Softmax / log-softmax over the specified elements along dim; the mask is kept."""
    mt = args[0] if args else kwargs.get("input")
    if not is_masked_tensor(mt):
        raise _unsupported(func, name, "only the input may be a MaskedTensor")
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    dtype = kwargs.get("dtype")
    for extra in args[2:]:  # Tensor.softmax(dim, dtype) / F.softmax(x, dim, _stacklevel, dtype)
        if isinstance(extra, ember.dtype):
            dtype = extra
    d, m = mt._masked_data, mt._masked_mask
    if dim is None:  # F.softmax's implicit choice (deprecated there too)
        dim = 0 if d.ndim in (0, 1, 3) else 1
    fn = {"softmax": _F.softmax, "log_softmax": _F.log_softmax, "softmin": _F.softmin}[name]
    return _make(fn(d, dim, dtype=dtype, mask=m), m)


_register(["softmax", "log_softmax", "softmin"], _softmax)


# ---- view, select and join ops -------------------------------------------------------------------
_JOIN = frozenset("""cat concat concatenate stack hstack vstack dstack column_stack row_stack
broadcast_tensors meshgrid atleast_1d atleast_2d atleast_3d""".split())


def _structural(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """The op on the data and on the mask alike (indices and shapes are shared)."""
    if name in ("view", "view_as") and any(isinstance(a, ember.dtype) for a in args[1:]):
        raise _unsupported(func, name, "a view as another dtype")
    if name in ("__getitem__", "index_select", "gather", "take_along_dim", "masked_select") \
            and any(is_masked_tensor(a) for a in args[1:]):
        raise _unsupported(func, name, "a MaskedTensor index")
    a_d, k_d = _map_args(args, kwargs, _data)
    if name in _JOIN:
        def mask_of(x: Any) -> Any:  # a plain tensor joined with MaskedTensors: unmasked
            if is_masked_tensor(x):
                return x._masked_mask
            if isinstance(x, Tensor):
                return ember.ones(x.shape, dtype=ember.bool, device=x.device)
            if isinstance(x, (list, tuple)):
                return type(x)(mask_of(b) for b in x)
            return x

        a_m = tuple(mask_of(a) for a in args)
        k_m = {k: mask_of(v) for k, v in kwargs.items()}
    else:
        a_m, k_m = _map_args(args, kwargs, _mask)
    out_d = func(*a_d, **k_d)
    try:
        out_m = func(*a_m, **k_m)
    except (TypeError, RuntimeError, NotImplementedError):
        # ops without a bool kernel (F.unfold's im2col, kron): the mask as 0 / 1 in the data's
        # floating dtype, and back
        as_num = (out_d.dtype if isinstance(out_d, Tensor) and out_d.is_floating_point()
                  else ember.float32)

        def num(x: Any) -> Any:
            if isinstance(x, Tensor) and x.dtype is ember.bool:
                return x.to(as_num)
            if isinstance(x, (list, tuple)):
                return type(x)(num(b) for b in x)
            return x

        out_m = func(*(num(a) for a in a_m), **{k: num(v) for k, v in k_m.items()})
        out_m = (out_m != 0 if isinstance(out_m, Tensor)
                 else type(out_m)(o != 0 for o in out_m))
    if isinstance(out_d, Tensor):
        return _make(out_d, out_m)
    if isinstance(out_d, (list, tuple)):
        return type(out_d)(_make(a, b) for a, b in zip(out_d, out_m))
    return out_d


_register("""transpose t swapaxes swapdims permute movedim moveaxis reshape view view_as
reshape_as flatten unflatten ravel squeeze unsqueeze expand expand_as broadcast_to select narrow
__getitem__ split chunk tensor_split unbind unfold hsplit vsplit dsplit flip fliplr flipud roll
rot90 diagonal repeat tile index_select gather take_along_dim masked_select kron prop:T prop:mT
""".split() + sorted(_JOIN), _structural)


def _setitem(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``mt[index] = value``: writes the data; the mask stays. A MaskedTensor value must have
    the mask of the part it replaces. (PyTorch's prototype fails or silently writes nothing.)"""
    mt, index, value = args
    if not is_masked_tensor(mt) or any(is_masked_tensor(i) for i in
                                       (index if isinstance(index, tuple) else (index,))):
        raise _unsupported(func, name, "only the written tensor may be a MaskedTensor")
    if is_masked_tensor(value):
        part = mt._masked_mask[index]
        if not _masks_match(part, ember.broadcast_to(value._masked_mask, part.shape)):
            raise ValueError("Input masks must match. If you need support for this, please "
                             "open an issue on Github.")
        value = value._masked_data
    mt._masked_data[index] = value
    return None


_register("__setitem__", _setitem)


def _iter(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    mt = args[0]
    if mt.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(_structural(ember.unbind, "unbind", (mt,), {}))


_register("__iter__", _iter)


# ---- conversions and copies ----------------------------------------------------------------------
def _convert(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """dtype / device conversions and ``*_like`` factories: the op on the data; the mask kept
    (moved along to another device)."""
    mt = args[0]
    if not is_masked_tensor(mt):
        raise _unsupported(func, name, "only the converted tensor may be a MaskedTensor")
    a2, k2 = _map_args(args, kwargs, _data)
    out = func(*a2, **k2)
    if not isinstance(out, Tensor):  # type() without a dtype: the type's name
        return out
    if out is mt._masked_data:
        return mt
    m = mt._masked_mask
    return _make(out, m if out.device == m.device else m.to(out.device))


_register("""to type type_as float double half bfloat16 int long short bool byte char cpu cuda
zeros_like ones_like empty_like full_like rand_like randn_like""".split(), _convert)


def _copy(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    mt = args[0]
    d, m = mt._masked_data, mt._masked_mask
    if name == "clone":
        return _make(d.clone(**kwargs), m.clone(**kwargs))
    if name == "detach":
        return _make(d.detach(), m)
    if name == "detach_":
        d.detach_()
        return mt
    # contiguous
    if d.is_contiguous(*args[1:], **kwargs) and m.is_contiguous(*args[1:], **kwargs):
        return mt
    return _make(d.contiguous(*args[1:], **kwargs), m.contiguous(*args[1:], **kwargs))


_register(["clone", "detach", "detach_", "contiguous"], _copy)


def _new_plain(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``new_zeros`` / ``new_ones`` / ... : a plain tensor of the data's dtype and device."""
    a2, k2 = _map_args(args, kwargs, _data)
    return func(*a2, **k2)


_register(["new_ones", "new_zeros", "new_empty", "new_full", "new_tensor"], _new_plain)


# ---- autograd ------------------------------------------------------------------------------------
def _backward(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``t.backward(gradient, retain_graph, create_graph, inputs)``: on the data."""
    names = ("self", "gradient", "retain_graph", "create_graph", "inputs")
    p = _bind(func, name, args, kwargs, names)
    ember.autograd.backward(p["self"], p.get("gradient"), retain_graph=p.get("retain_graph"),
                            create_graph=bool(p.get("create_graph", False)),
                            inputs=p.get("inputs"))
    return None


def _requires_grad_(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    mt = args[0]
    flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
    mt._masked_data.requires_grad_(flag)
    return mt


def _retain_grad(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    args[0]._masked_data.retain_grad()
    return None


def _register_hook(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """The hook sees (and may replace) the gradient as a MaskedTensor."""
    mt, hook = args[0], (args[1] if len(args) > 1 else kwargs["hook"])
    mask = mt._masked_mask

    def on_data(g: Tensor) -> Any:
        out = hook(_make(g, mask))
        return out._masked_data if is_masked_tensor(out) else out

    return mt._masked_data.register_hook(on_data)


_register("backward", _backward)
_register("requires_grad_", _requires_grad_)
_register("retain_grad", _retain_grad)
_register("register_hook", _register_hook)


def unwrap_for_autograd(outputs: Any, grad_outputs: Any,
                        inputs: Any) -> tuple[Any, Any, Any, Callable[[tuple], tuple]]:
    """``ember.autograd.grad`` / ``backward`` arguments with every MaskedTensor replaced by its
    data, and the function that turns the gradients of MaskedTensor inputs back into
    MaskedTensors (with the inputs' masks)."""
    def flat(x: Any) -> Any:
        if is_masked_tensor(x):
            return x._masked_data
        if isinstance(x, (list, tuple)):
            return type(x)(flat(b) for b in x)
        return x

    ins = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    masks = [x._masked_mask if is_masked_tensor(x) else None for x in ins]

    def rewrap(grads: tuple) -> tuple:
        return tuple(_make(g, mk) if (g is not None and mk is not None) else g
                     for g, mk in zip(grads, masks))

    return flat(outputs), flat(grad_outputs), flat(inputs), rewrap


def has_masked(*objs: Any) -> bool:
    """Whether any of objs (tensors, sequences of tensors, None) is or holds a MaskedTensor."""
    from ember._utils import _holds

    return _holds(is_masked_tensor, *objs)


# ---- metadata and Python protocols ---------------------------------------------------------------
def _scalar(mt: MaskedTensor, what: str) -> Tensor:
    d = mt._masked_data
    if d.numel() != 1:
        raise RuntimeError(f"a Tensor with {d.numel()} elements cannot be converted to Scalar")
    if not bool(mt._masked_mask.reshape(())):
        raise ValueError(f"{what}: the MaskedTensor's only element is masked out")
    return d


def _no_list(what: str) -> Callable[..., Any]:
    def refuse(mt: MaskedTensor, *a: Any, **k: Any) -> Any:
        raise RuntimeError(f".{what}() is not supported for tensor subclasses, got MaskedTensor "
                           "(use .get_data(), .get_mask() or .to_tensor(value) first)")

    return refuse


_META: dict[str, Callable[..., Any]] = {
    "size": lambda mt, dim=None: (mt._masked_data.size() if dim is None
                                  else mt._masked_data.size(dim)),
    "dim": lambda mt: mt._masked_data.dim(),
    "ndimension": lambda mt: mt._masked_data.dim(),
    "numel": lambda mt: mt._masked_data.numel(),
    "nelement": lambda mt: mt._masked_data.numel(),
    "__len__": lambda mt: len(mt._masked_data),
    "stride": lambda mt, dim=None: (mt._masked_data.stride() if dim is None
                                    else mt._masked_data.stride(dim)),
    "storage_offset": lambda mt: mt._masked_data.storage_offset(),
    "element_size": lambda mt: mt._masked_data.element_size(),
    "is_floating_point": lambda mt: mt._masked_data.is_floating_point(),
    "is_complex": lambda mt: mt._masked_data.is_complex(),
    "get_device": lambda mt: mt._masked_data.get_device(),
    "is_contiguous": lambda mt, *a, **k: mt._masked_data.is_contiguous(*a, **k),
    "__format__": lambda mt, spec="": (format(_scalar(mt, "format").item(), spec) if spec
                                       else repr(mt)),
    "item": lambda mt: _scalar(mt, "item()").item(),
    "__float__": lambda mt: float(_scalar(mt, "float()")),
    "__int__": lambda mt: int(_scalar(mt, "int()")),
    "__index__": lambda mt: _scalar(mt, "index").__index__(),
    "__bool__": lambda mt: bool(_scalar(mt, "bool()")),
    "tolist": _no_list("tolist"),
    "numpy": _no_list("numpy"),
    "prop:itemsize": lambda mt: mt._masked_data.itemsize,
    "prop:nbytes": lambda mt: mt._masked_data.nbytes,
    "prop:is_quantized": lambda mt: False,
    "prop:_base": lambda mt: None,
}


def _meta(func: Any, name: str, args: tuple, kwargs: dict) -> Any:
    return _META[name](*args, **kwargs)


_register(list(_META), _meta)


# ---- printing ------------------------------------------------------------------------------------
def _row(values: list[Any], mask: list[bool], floating: bool) -> str:
    texts = [f"{v:8.4f}" if floating else str(v) for v in values]
    if not texts:
        return "[]"
    width = max(len(t) if m else 8 for t, m in zip(texts, mask))
    return "[" + ", ".join(t if m else "--".rjust(width) for t, m in zip(texts, mask)) + "]"


def _block(values: list[Any], mask: list[Any], floating: bool, depth: int) -> str:
    if not values or not isinstance(values[0], list):
        return _row(values, mask, floating)
    pad = "  " * (depth + 1)
    inner = ",\n".join(pad + _block(v, m, floating, depth + 1) for v, m in zip(values, mask))
    return "[\n" + inner + "\n" + "  " * depth + "]"


def format_masked(mt: MaskedTensor) -> str:
    """PyTorch's MaskedTensor repr: values to 4 decimals (floating types), ``--`` where masked
    out, one row per line."""
    d, m = mt._masked_data.detach(), mt._masked_mask
    floating = d.dtype.is_floating_point
    values, mask = d.cpu().tolist(), m.cpu().tolist()
    if d.ndim == 0:
        text = (f"{values:8.4f}" if floating else str(values)) if mask else "--"
        return f"MaskedTensor({text}, {mask})"
    return "MaskedTensor(\n  " + _block(values, mask, floating, 1) + "\n)"
