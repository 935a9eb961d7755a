"""Automatic mixed precision: ``autocast`` runs matrix products and convolutions in a lower
precision (bfloat16 on the CPU by default) and precision-sensitive ops (losses) in float32.

The state is per thread and per device type, as in PyTorch. While any autocast region is
enabled anywhere in the process, the ops on the lists below are wrapped (``ember.matmul``,
``ember.mm``, ``Tensor.matmul``, ``Tensor.__matmul__``, ``ember.nn.functional.linear``,
``conv*``, the losses, ...); the wrappers consult the calling thread's state and cast the
floating-point (not float64) tensor arguments. When the last region ends the original functions
are put back, so programs that never use autocast pay nothing. (A function bound to a local
name before the first region, ``from ember import matmul``, is not wrapped.)

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
]

# Ops computed in the autocast dtype (PyTorch's CPU "lower precision" list, as far as ember has
# them): (module path, attribute). "Tensor" means methods of ember.Tensor.
_LOWER = [
    ("ember", "matmul"), ("ember", "mm"), ("ember", "bmm"), ("ember", "addmm"),
    ("ember", "baddbmm"), ("ember", "addbmm"),
    ("Tensor", "matmul"), ("Tensor", "mm"), ("Tensor", "bmm"), ("Tensor", "addmm"),
    ("Tensor", "baddbmm"), ("Tensor", "addbmm"), ("Tensor", "__matmul__"),
    ("Tensor", "__rmatmul__"),
    ("ember.nn.functional", "linear"),
    ("ember.nn.functional", "conv1d"), ("ember.nn.functional", "conv2d"),
    ("ember.nn.functional", "conv3d"), ("ember.nn.functional", "conv_transpose1d"),
    ("ember.nn.functional", "conv_transpose2d"), ("ember.nn.functional", "conv_transpose3d"),
    ("ember.nn.functional", "scaled_dot_product_attention"),
]
# Ops computed in float32 (losses and reductions that lose accuracy in 16 bits).
_FP32 = [
    ("ember.nn.functional", n) for n in (
        "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
        "kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits",
        "cosine_embedding_loss", "poisson_nll_loss", "margin_ranking_loss", "soft_margin_loss",
        "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
        "multilabel_soft_margin_loss", "hinge_embedding_loss", "gaussian_nll_loss", "ctc_loss",
    )
] + [("ember", "prod"), ("ember", "cdist"), ("ember", "trace")]
# Ops PyTorch leaves alone on the CPU although ember builds them from products: they run with
# autocast off, in their inputs' dtype (torch's bilinear is one float32 kernel).
_PLAIN = [("ember.nn.functional", "bilinear")]

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
_active = 0  # enabled autocast regions in all threads; the wrappers are installed while > 0
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
        _count(1 if enabled else -1)


def set_autocast_dtype(device_type: str, dtype: Any) -> None:
    if device_type not in _state.dtype:
        raise ValueError(f"set_autocast_dtype: unsupported device type {device_type!r}")
    _state.dtype[device_type] = dtype


# ---- the wrappers -------------------------------------------------------------------------------

def _eligible(t: Any) -> bool:
    return isinstance(t, Tensor) and t.is_floating_point() and t.dtype is not _C.float64


def _cast(t: Any, mode: str) -> Any:
    """t in the dtype the calling thread's autocast wants for its device (mode 'lower'/'fp32')."""
    if not _eligible(t):
        return t
    dev = t.device.type
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


def _wrap(fn: Callable, mode: str) -> Callable:
    @functools.wraps(fn)
    def autocast_wrapper(*args: Any, **kwargs: Any) -> Any:
        en = _state.enabled
        if mode == "plain" and (en["cpu"] or en["cuda"]):
            saved = dict(en)
            en["cpu"] = en["cuda"] = False  # this thread only; the wrappers stay installed
            try:
                return fn(*args, **kwargs)
            finally:
                en.update(saved)
        if en["cpu"] or en["cuda"]:
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


def _install() -> None:
    for lst, mode in ((_LOWER, "lower"), (_FP32, "fp32"), (_PLAIN, "plain")):
        for path, name in lst:
            owner = _owner(path)
            fn = getattr(owner, name, None) if owner is not None else None
            if fn is None or getattr(fn, "__wrapped_by_autocast__", False):
                continue
            _originals.append((owner, name, fn))
            setattr(owner, name, _wrap(fn, mode))


def _uninstall() -> None:
    while _originals:
        owner, name, fn = _originals.pop()
        setattr(owner, name, fn)


def _count(delta: int) -> None:
    global _active
    with _lock:
        before = _active
        _active = max(0, _active + delta)
        if before == 0 and _active > 0:
            _install()
        elif before > 0 and _active == 0:
            _uninstall()


# ---- the context manager ------------------------------------------------------------------------

class autocast:  # noqa: N801  (PyTorch's name)
    """Mixed precision for the ops run inside the block (or the decorated function).

    ``device_type`` is "cpu" or "cuda"; ``dtype`` defaults to bfloat16 on the CPU and float16 on
    CUDA. Matrix products, ``linear``, convolutions and attention run in ``dtype``; losses in
    float32; other ops run in their inputs' dtype. ``enabled=False`` turns autocast off inside
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
            _count(1 if self._enabled else -1)
        return self

    def __exit__(self, *exc: Any) -> None:
        st = _state
        was_enabled = st.enabled[self.device]
        st.enabled[self.device], st.dtype[self.device], st.cache_enabled = self._prev
        st.depth -= 1
        if st.depth == 0:
            st.cache.clear()
        if was_enabled != self._prev[0]:
            _count(1 if self._prev[0] else -1)

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
