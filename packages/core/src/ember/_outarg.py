"""``out=`` for the hand-written Python functions whose PyTorch counterparts take it.

The ops of the op table get ``out=`` from the code generator; the functions written in Python
(``ember.special.erf``, ``ember.fft.fft``, ``ember.hypot``, ...) compute a new tensor. Their
PyTorch versions take ``out=``, so a call passing it raised a TypeError ("unexpected keyword
argument 'out'"). :func:`accept_out` gives such a function the keyword with the engine's rules:
``out`` must be a Tensor on the result's device, of a dtype the result casts to (or of exactly
the result's dtype where PyTorch asks for that), it takes the result's shape (a UserWarning when
it had elements), and out= is not differentiable (an error when an argument or ``out`` requires
grad while grad mode is on).

>>> import ember
>>> o = ember.zeros(2, dtype=ember.float64)
>>> ember.special.erf(ember.tensor([0.0, 10.0]), out=o) is o, o.tolist()
(True, [0.0, 1.0])
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from ember import _C
from ember._C import Tensor

__all__ = ["accept_out", "accept_out_names", "write_out"]


def _requires_grad(values: Any) -> bool:
    for v in values:
        if isinstance(v, Tensor) and v.requires_grad:
            return True
        if isinstance(v, (list, tuple)) and _requires_grad(v):
            return True
    return False


def _refuse_grad(op: str) -> None:
    raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic "
                       "differentiation, but one of the arguments requires grad.")


def write_out(op: str, out: Any, compute: Callable[[], Tensor], inputs: Any = (),
              exact: bool = False) -> Tensor:
    """compute()'s result written into ``out`` (returned), after the checks every op with out=
    makes: a Tensor, nothing requiring grad (``inputs``: the call's arguments), a dtype the
    result casts to (``exact``: the result's own dtype), the same device; resized as needed."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
    grad = _C.is_grad_enabled()
    if grad and out.requires_grad:
        _refuse_grad(op)
    if grad and _requires_grad(inputs):
        result = compute()
        # a bool result (signbit, isin, ...) has no gradient to lose: torch takes it
        if result.requires_grad or result.dtype != _C.bool:
            _refuse_grad(op)
    else:
        result = compute()
    _C._prepare_out(out, result, op, exact)
    return out.copy_(result)


def accept_out(fn: Callable[..., Any], name: str | None = None, *, exact: bool = False,
               factory: bool = False) -> Callable[..., Any]:
    """fn with a keyword-only ``out=`` (fn itself when it has one already). ``exact``: out must
    have the result's dtype (PyTorch's composites such as quantile or cross); ``factory``: fn
    takes ``dtype=`` / ``device=``, which default to out's (fftfreq(5, out=float64 tensor)
    computes in float64, as PyTorch)."""
    if getattr(fn, "__ember_out__", False):
        return fn
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    if "out" in sig.parameters:
        return fn
    label = name or fn.__name__

    @functools.wraps(fn)
    def wrapper(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None:
            return fn(*args, **kwargs)
        if factory and isinstance(out, Tensor):
            if kwargs.get("dtype") is None:
                kwargs["dtype"] = out.dtype
            if kwargs.get("device") is None:
                kwargs["device"] = out.device
        # (a factory's explicit dtype= must be out's: its result is made in that dtype)
        return write_out(label, out, lambda: fn(*args, **kwargs), (*args, *kwargs.values()),
                         exact or factory)

    params = list(sig.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind == p.VAR_KEYWORD), len(params))
    params.insert(at, inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation="Tensor | None"))
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__ember_out__ = True  # type: ignore[attr-defined]
    return wrapper


def accept_out_names(namespace: dict[str, Any], names: Any, *, exact: bool = False,
                     factory: bool = False) -> None:
    """Replaces each of ``names`` in ``namespace`` (a module's globals or a name table) by its
    :func:`accept_out` wrapper, labelled with that name."""
    for n in names:
        namespace[n] = accept_out(namespace[n], n, exact=exact, factory=factory)
