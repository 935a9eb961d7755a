"""Automatic mixed precision: ``autocast`` runs matrix products and convolutions in a lower
precision (bfloat16 on the CPU by default) and precision-sensitive ops (losses) in float32.

The state is per thread and per device type, as in PyTorch, and so are the op lists (CPU and
CUDA differ: on CUDA softmax, log/exp, sums and the norms also run in float32, and a few ops
promote mixed inputs; see ``cast_policy``). While an autocast region of a device type is enabled
anywhere in the process, the ops on that device type's lists are wrapped (``ember.matmul``,
``ember.mm``, ``Tensor.matmul``, ``Tensor.__matmul__``, ``ember.nn.functional.linear``,
``conv*``, the losses, ...); a wrapper picks the list of its tensors' device type, consults the
calling thread's state and casts the floating-point (not float64) tensor arguments. When the
last region ends the original functions are put back, so programs that never use autocast pay
nothing. (A function bound to a local name before the first region, ``from ember import
matmul``, is not wrapped.)

Inside an enabled region, casts of leaf tensors that require grad (weights) are cached until the
outermost region ends (``cache_enabled``), so each weight is cast once per step.

>>> import ember
>>> a, b = ember.randn(2, 3), ember.randn(3, 4)
>>> with ember.autocast("cpu", dtype=ember.bfloat16):
...     (a @ b).dtype
ember.bfloat16
>>> (a @ b).dtype
ember.float32
"""

from __future__ import annotations

import functools
import threading
import warnings
from typing import Any, Callable

from ember import _C
from ember._C import Tensor

__all__ = [
    "autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
    "set_autocast_dtype", "is_autocast_available", "custom_fwd", "custom_bwd",
    "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
    "autocast_increment_nesting", "autocast_decrement_nesting",
]

# ---- the op lists, per device type ------------------------------------------------------------
# How autocast runs an op, by device type of its tensors (PyTorch's lists, as far as ember has the
# ops): LOWER in the autocast dtype, FP32 in float32, PROMOTE in the widest floating dtype among
# its tensor inputs, PLAIN with autocast off (ember builds the op from products PyTorch's kernel
# keeps in float32), BANNED raises (unsafe in float16). Ops not listed run in their inputs' dtypes.
# Floating-point tensor inputs other than float64 are cast (float64 is never touched, except by
# PROMOTE, which can only widen); an explicit dtype= argument turns the cast off, as in PyTorch.
LOWER, FP32, PROMOTE, PLAIN, BANNED = "lower", "fp32", "promote", "plain", "banned"

_LOSSES = (
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss", "kl_div",
    "binary_cross_entropy_with_logits", "cosine_embedding_loss", "poisson_nll_loss",
    "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "multilabel_margin_loss", "hinge_embedding_loss",
)
_CONVS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
          "conv_transpose3d")

# PyTorch's CPU lists. The recurrent entries (lstm, gru, rnn_tanh, rnn_relu: whole layers) are read
# by ember.nn's recurrent modules through cast_policy; GRU stays out, as on PyTorch's CPU. The
# products PyTorch composes from mm / bmm (einsum, tensordot, inner, multi_dot, chain_matmul)
# come out in the autocast dtype there, so they are listed here: ember's do not go through the
# wrapped mm / bmm.
_CPU_POLICY: dict[str, str] = {
    **dict.fromkeys(("matmul", "__matmul__", "mm", "bmm", "addmm", "baddbmm", "addbmm", "linear",
                     *_CONVS, "prelu", "scaled_dot_product_attention", "lstm", "rnn_tanh",
                     "rnn_relu", "vecdot", "einsum", "tensordot", "inner", "multi_dot",
                     "chain_matmul"), LOWER),
    **dict.fromkeys((*_LOSSES, "binary_cross_entropy", "multilabel_soft_margin_loss",
                     "gaussian_nll_loss", "ctc_loss", "prod", "cdist", "trace", "avg_pool3d",
                     "max_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "grid_sample"),
                    FP32),
    **dict.fromkeys(("cat", "stack", "index_copy"), PROMOTE),
    "bilinear": PLAIN,
}

# PyTorch's CUDA lists ("CUDA Ops that can autocast to float16 / float32 / promote"; float16
# stands for the autocast dtype, bfloat16 included). Whole recurrent layers (cuDNN's RNN) and the
# cells run in the autocast dtype.
_CUDA_POLICY: dict[str, str] = {
    **dict.fromkeys(("__matmul__", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm",
                     "chain_matmul", "multi_dot", "einsum", *_CONVS, "linear", "matmul", "mm", "mv",
                     "prelu", "scaled_dot_product_attention", "lstm_cell", "gru_cell",
                     "rnn_tanh_cell", "rnn_relu_cell", "lstm", "gru", "rnn_tanh", "rnn_relu"),
                    LOWER),
    **dict.fromkeys((*_LOSSES, "__pow__", "__rpow__", "__rtruediv__", "acos", "asin", "cosh",
                     "sinh", "tan", "erfinv", "exp", "expm1", "log", "log10", "log1p", "log2",
                     "pow", "reciprocal", "rsqrt", "cdist", "pdist", "dist", "cosine_similarity",
                     "cumprod", "cumsum", "prod", "sum", "norm", "normalize", "renorm",
                     "logsumexp", "vector_norm", "matrix_norm", "softmax", "log_softmax",
                     "softmin", "softplus", "layer_norm", "group_norm"), FP32),
    **dict.fromkeys(("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample",
                     "index_put", "scatter_add", "tensordot", "cat", "stack"), PROMOTE),
    "binary_cross_entropy": BANNED,
}

_POLICY = {"cpu": _CPU_POLICY, "cuda": _CUDA_POLICY}

# Where an op lives: as a function of these modules and as a Tensor method (whichever exist);
# dunder names only as Tensor methods. matmul's operator form goes with __matmul__.
_MODULES = ("ember", "ember.nn.functional", "ember.linalg")
_EXTRA_PLACES = {"__matmul__": [("Tensor", "__rmatmul__")]}

_BANNED_MESSAGE = (
    "{op}: binary_cross_entropy (and nn.BCELoss) is unsafe to autocast on CUDA: its float16 "
    "inputs lose too much precision near 0 and 1. Models usually apply a sigmoid right before "
    "it; combine the two with ember.nn.functional.binary_cross_entropy_with_logits (or "
    "nn.BCEWithLogitsLoss), which is safe to autocast, or run this op with autocast disabled "
    "on float32 inputs.")


def cast_policy(op: str, device_type: str) -> str | None:
    """How autocast runs ``op`` on tensors of ``device_type``: "lower" (the autocast dtype),
    "fp32", "promote" (widest floating input dtype), "plain" (autocast off inside), "banned"
    (raises), or None (untouched: runs in its inputs' dtypes).

    >>> from ember.amp.autocast_mode import cast_policy
    >>> cast_policy("softmax", "cuda"), cast_policy("softmax", "cpu"), cast_policy("mm", "cpu")
    ('fp32', None, 'lower')
    """
    return _POLICY.get(device_type, {}).get(op)


def _widest(dtypes: list[Any]) -> Any:
    if _C.float64 in dtypes:
        return _C.float64
    if _C.float32 in dtypes or len(set(dtypes)) > 1:  # float16 with bfloat16: float32
        return _C.float32
    return dtypes[0]


def cast_dtype(op: str, device_type: str, dtype: Any, input_dtypes: tuple = ()) -> Any:
    """The dtype autocast (enabled for ``device_type`` with autocast dtype ``dtype``) casts the
    floating-point inputs of ``op`` to, or None when it leaves them alone. ``input_dtypes``, the
    dtypes of the op's floating tensor inputs, decides "promote" ops. Raises RuntimeError for a
    banned op (binary_cross_entropy on CUDA).

    >>> import ember
    >>> from ember.amp.autocast_mode import cast_dtype
    >>> cast_dtype("linear", "cuda", ember.float16), cast_dtype("exp", "cuda", ember.float16)
    (ember.float16, ember.float32)
    >>> cast_dtype("addcmul", "cuda", ember.float16, (ember.float16, ember.float32))
    ember.float32
    """
    mode = cast_policy(op, device_type)
    if mode == LOWER:
        return dtype
    if mode == FP32:
        return _C.float32
    if mode == PROMOTE:
        floats = [d for d in input_dtypes if d in (_C.float16, _C.bfloat16, _C.float32,
                                                   _C.float64)]
        return _widest(floats) if floats and len(set(floats)) > 1 else None
    if mode == BANNED:
        raise RuntimeError(_BANNED_MESSAGE.format(op=op))
    return None


# Policy entries that no function carries: ember.nn's recurrent modules ask for them.
_NOT_WRAPPED = frozenset(("lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell",
                          "rnn_tanh_cell", "rnn_relu_cell"))


def _places(op: str) -> list[tuple[str, str]]:
    if op.startswith("__"):
        return [("Tensor", op)] + _EXTRA_PLACES.get(op, [])
    return [(m, op) for m in _MODULES] + [("Tensor", op)] + _EXTRA_PLACES.get(op, [])


_SUPPORTED = {"cpu": (_C.bfloat16, _C.float16), "cuda": (_C.float16, _C.bfloat16)}
_DEFAULT_DTYPE = {"cpu": _C.bfloat16, "cuda": _C.float16}


class _State(threading.local):
    def __init__(self) -> None:
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = dict(_DEFAULT_DTYPE)
        self.cache_enabled = True
        self.depth = 0  # nesting of autocast blocks in this thread
        self.cache: dict[int, tuple[Tensor, int, Any, Tensor]] = {}


_state = _State()
_lock = threading.Lock()
# enabled autocast regions in all threads, per device type; the wrappers of the ops on the lists
# of the device types with regions are installed (none while there are none)
_active = {"cpu": 0, "cuda": 0}
_installed: frozenset[str] = frozenset()  # the device types whose lists are installed
_originals: list[tuple[Any, str, Any]] = []


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast`` supports ``device_type`` ("cpu", or "cuda" when CUDA is present)."""
    if device_type == "cpu":
        return True
    if device_type == "cuda":
        import ember

        return ember.cuda.is_available()
    return False


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on in this thread for ``device_type`` (no argument: CUDA, as in
    PyTorch)."""
    return _state.enabled.get(device_type or "cuda", False)


def get_autocast_dtype(device_type: str) -> Any:
    """The dtype autocast computes in for ``device_type`` in this thread."""
    if device_type not in _state.dtype:
        raise ValueError(f"get_autocast_dtype: unsupported device type {device_type!r}")
    return _state.dtype[device_type]


def set_autocast_enabled(device_type: str, enabled: bool) -> None:
    """Turns autocast on or off for ``device_type`` in this thread (prefer ``autocast``)."""
    if device_type not in _state.enabled:
        raise ValueError(f"set_autocast_enabled: unsupported device type {device_type!r}")
    was = _state.enabled[device_type]
    _state.enabled[device_type] = bool(enabled)
    if bool(enabled) != was:
        _count(device_type, 1 if enabled else -1)


def set_autocast_dtype(device_type: str, dtype: Any) -> None:
    if device_type not in _state.dtype:
        raise ValueError(f"set_autocast_dtype: unsupported device type {device_type!r}")
    _state.dtype[device_type] = dtype


def is_autocast_cache_enabled() -> bool:
    """Whether autocast caches the casts of weights in this thread (``cache_enabled``).

    >>> import ember
    >>> ember.is_autocast_cache_enabled()
    True
    """
    return _state.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turns the cache of weight casts on or off in this thread (prefer ``autocast(...,
    cache_enabled=)``)."""
    _state.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Forgets the weight casts cached in this thread (``autocast`` does it when its outermost
    region ends)."""
    _state.cache.clear()


def autocast_increment_nesting() -> int:
    """Enters one level of autocast nesting in this thread; the new depth (PyTorch's low-level
    pair used by custom autocast context managers).

    >>> import ember
    >>> d = ember.autocast_increment_nesting()
    >>> ember.autocast_decrement_nesting() == d - 1
    True
    """
    _state.depth += 1
    return _state.depth


def autocast_decrement_nesting() -> int:
    """Leaves one level of autocast nesting; the new depth (at 0 the caller clears the cache with
    ``clear_autocast_cache``, as PyTorch's autocast does)."""
    if _state.depth > 0:
        _state.depth -= 1
    return _state.depth


# ---- the wrappers -------------------------------------------------------------------------------

def _device_type(t: Tensor) -> str:
    return "cpu" if t.is_cpu else t.device.type


def _eligible(t: Any) -> bool:
    return isinstance(t, Tensor) and t.is_floating_point() and t.dtype is not _C.float64


def _cast(t: Any, mode: str) -> Any:
    """t in the dtype the calling thread's autocast wants for its device (mode 'lower'/'fp32')."""
    if not _eligible(t):
        return t
    dev = _device_type(t)
    if not _state.enabled.get(dev, False):
        return t
    target = _state.dtype[dev] if mode == "lower" else _C.float32
    if t.dtype is target:
        return t
    cacheable = mode == "lower" and _state.cache_enabled and t.requires_grad and t.is_leaf
    if cacheable:
        hit = _state.cache.get(id(t))
        if hit is not None and hit[0] is t and hit[1] == t._version and hit[2] is target:
            return hit[3]
    out = t._to_dtype(target)
    if cacheable:
        _state.cache[id(t)] = (t, t._version, target, out)
    return out


def _cast_args(value: Any, mode: str) -> Any:
    if isinstance(value, Tensor):
        return _cast(value, mode)
    if isinstance(value, (list, tuple)) and value and any(isinstance(v, Tensor) for v in value):
        return type(value)(_cast(v, mode) if isinstance(v, Tensor) else v for v in value)
    return value


def _first_tensor(args: tuple, kwargs: dict) -> Tensor | None:
    """The op's first tensor argument (in a list too): its device type picks the list."""
    for v in args:
        if isinstance(v, Tensor):
            return v
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], Tensor):
            return v[0]
    for v in kwargs.values():
        if isinstance(v, Tensor):
            return v
    return None


def _float_dtypes(args: tuple, kwargs: dict) -> tuple:
    out = []
    for v in (*args, *kwargs.values()):
        for t in (v if isinstance(v, (list, tuple)) else (v,)):
            if isinstance(t, Tensor) and t.is_floating_point():
                out.append(t.dtype)
    return tuple(out)


def _to(value: Any, dtype: Any) -> Any:
    """value's floating tensors (one level of lists) in dtype."""
    def one(t: Any) -> Any:
        if isinstance(t, Tensor) and t.is_floating_point() and t.dtype is not dtype:
            return t._to_dtype(dtype)
        return t

    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        return type(value)(one(v) for v in value)
    return one(value)


def _wrap(fn: Callable, op: str) -> Callable:
    # the op's treatment per device type, fixed when the wrappers are installed
    policy = {d: p.get(op) for d, p in _POLICY.items()}

    @functools.wraps(fn)
    def autocast_wrapper(*args: Any, **kwargs: Any) -> Any:
        en = _state.enabled
        if not (en["cpu"] or en["cuda"]):
            return fn(*args, **kwargs)
        first = _first_tensor(args, kwargs)
        if first is None:
            return fn(*args, **kwargs)
        dev = _device_type(first)
        mode = policy.get(dev)
        if mode is None or not en.get(dev, False) or kwargs.get("dtype") is not None:
            return fn(*args, **kwargs)
        if mode == PLAIN:
            saved = dict(en)
            en["cpu"] = en["cuda"] = False  # this thread only; the wrappers stay installed
            try:
                return fn(*args, **kwargs)
            finally:
                en.update(saved)
        if mode == BANNED:
            raise RuntimeError(_BANNED_MESSAGE.format(op=getattr(fn, "__name__", op)))
        if mode == PROMOTE:
            floats = _float_dtypes(args, kwargs)
            target = _widest(list(floats)) if len(set(floats)) > 1 else None
            if target is None:
                return fn(*args, **kwargs)
            args = tuple(_to(a, target) for a in args)
            if kwargs:
                kwargs = {k: _to(v, target) for k, v in kwargs.items()}
            return fn(*args, **kwargs)
        args = tuple(_cast_args(a, mode) for a in args)
        if kwargs:
            kwargs = {k: _cast_args(v, mode) for k, v in kwargs.items()}
        return fn(*args, **kwargs)

    autocast_wrapper.__wrapped_by_autocast__ = True  # type: ignore[attr-defined]
    return autocast_wrapper


def _owner(path: str) -> Any:
    import importlib
    import sys

    if path == "Tensor":
        return Tensor
    if path not in sys.modules:
        try:
            importlib.import_module(path)
        except ImportError:  # ember-nn not installed: nothing of it to wrap
            return None
    return sys.modules[path]


def _install(device_types: frozenset[str]) -> None:
    ops = sorted({op for d in device_types for op in _POLICY[d] if op not in _NOT_WRAPPED})
    for op in ops:
        for path, name in _places(op):
            owner = _owner(path)
            fn = getattr(owner, name, None) if owner is not None else None
            if fn is None or not callable(fn) or getattr(fn, "__wrapped_by_autocast__", False):
                continue
            _originals.append((owner, name, fn))
            setattr(owner, name, _wrap(fn, op))


def _uninstall() -> None:
    while _originals:
        owner, name, fn = _originals.pop()
        setattr(owner, name, fn)


def _count(device_type: str, delta: int) -> None:
    global _installed
    with _lock:
        _active[device_type] = max(0, _active[device_type] + delta)
        want = frozenset(d for d, n in _active.items() if n > 0)
        if want != _installed:
            _uninstall()
            if want:
                _install(want)
            _installed = want


# ---- the context manager ------------------------------------------------------------------------

class autocast:  # noqa: N801  (PyTorch's name)
    """Mixed precision for the ops run inside the block (or the decorated function).

    ``device_type`` is "cpu" or "cuda"; ``dtype`` defaults to bfloat16 on the CPU and float16 on
    CUDA. Matrix products, ``linear``, convolutions and attention run in ``dtype``; losses in
    float32 (on CUDA also softmax, exp/log/pow, sums and products, layer/group norm); other ops
    run in their inputs' dtype (``cast_policy`` gives an op's treatment per device type). ``enabled=False`` turns autocast off inside
    an enabled region. Gradients flow back to the original (float32) tensors.

    >>> import ember
    >>> lin = ember.nn.Linear(4, 2)
    >>> with ember.autocast("cpu", dtype=ember.bfloat16):
    ...     y = lin(ember.randn(3, 4))
    >>> y.dtype, lin.weight.dtype
    (ember.bfloat16, ember.float32)
    """

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: expected device_type to be a str such as 'cpu' or "
                             f"'cuda', got {type(device_type).__name__}")
        self.device = device_type
        if device_type not in _SUPPORTED:
            raise RuntimeError(f"autocast: device type {device_type!r} is not supported; "
                               "expected 'cpu' or 'cuda'")
        self.fast_dtype = dtype if dtype is not None else _DEFAULT_DTYPE[device_type]
        self._enabled = bool(enabled)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        if self._enabled and device_type == "cuda" and not is_autocast_available("cuda"):
            warnings.warn("ember.autocast: CUDA is not available; autocast('cuda') is disabled",
                          UserWarning, stacklevel=2)
            self._enabled = False
        if self._enabled and self.fast_dtype not in _SUPPORTED[device_type]:
            names = ", ".join(repr(d) for d in _SUPPORTED[device_type])
            warnings.warn(f"ember.autocast: {device_type} autocast supports {names}, not "
                          f"{self.fast_dtype!r}; autocast is disabled", UserWarning, stacklevel=2)
            self._enabled = False

    def __enter__(self) -> autocast:
        st = _state
        self._prev = (st.enabled[self.device], st.dtype[self.device], st.cache_enabled)
        st.depth += 1
        st.enabled[self.device] = self._enabled
        st.dtype[self.device] = self.fast_dtype
        st.cache_enabled = self._cache_enabled
        if self._enabled != self._prev[0]:
            _count(self.device, 1 if self._enabled else -1)
        return self

    def __exit__(self, *exc: Any) -> None:
        st = _state
        was_enabled = st.enabled[self.device]
        st.enabled[self.device], st.dtype[self.device], st.cache_enabled = self._prev
        st.depth -= 1
        if st.depth == 0:
            st.cache.clear()
        if was_enabled != self._prev[0]:
            _count(self.device, 1 if self._prev[0] else -1)

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)

        return decorated


def custom_fwd(fwd: Callable | None = None, *, device_type: str = "cpu",
               cast_inputs: Any = None) -> Callable:
    """Decorator for the ``forward`` of an ``ember.autograd.Function``: with ``cast_inputs``, the
    forward runs with autocast off and its floating-point tensor inputs cast to that dtype (when
    autocast is on for ``device_type``); otherwise it runs in the caller's autocast state."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
        if cast_inputs is None or not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)

        def cast(v: Any) -> Any:
            return v._to_dtype(cast_inputs) if _eligible(v) else v

        with autocast(device_type, enabled=False):
            return fwd(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})

    return decorate_fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str = "cpu") -> Callable:
    """Decorator for the ``backward`` of an ``ember.autograd.Function`` (runs it with the autocast
    state of the forward; ember runs backward with autocast off, which is that state for
    functions whose forward used ``custom_fwd(cast_inputs=...)``)."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd
