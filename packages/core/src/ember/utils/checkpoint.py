"""Activation checkpointing: trade compute for memory by recomputing a segment's activations
during backward instead of keeping them from the forward pass.

Two strategies, as in PyTorch:

* ``use_reentrant=False`` (default): ``fn`` runs normally, but every tensor its ops would save
  for backward is replaced by a small handle (``ember.autograd.graph.saved_tensors_hooks``).
  The first time backward needs one of them, ``fn`` is re-run under the same RNG state and the
  tensors it saves are handed out instead. Works with ``autograd.grad``, keyword arguments and
  double backward.
* ``use_reentrant=True``: ``fn`` runs under ``no_grad`` inside an ``ember.autograd.Function``
  whose backward re-runs it with grad enabled and back-propagates through it (a backward inside
  the backward). Only positional arguments; gradients reach the leaves through ``.grad``.

>>> import ember
>>> from ember.utils.checkpoint import checkpoint
>>> x = ember.ones(3, requires_grad=True)
>>> y = checkpoint(lambda t: (t * 2).exp(), x)
>>> y.sum().backward()
>>> x.grad  # 2 * exp(2), as without checkpointing
tensor([14.7781, 14.7781, 14.7781])
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable

from ember import _C
from ember._C import Tensor
from ember.autograd.grad_mode import enable_grad, no_grad
from ember.random import get_rng_state, set_rng_state

__all__ = ["checkpoint", "checkpoint_sequential", "noop_context_fn"]


def _saved_tensors_hooks():
    try:
        from ember.autograd.graph import saved_tensors_hooks
    except ImportError:
        return None
    return saved_tensors_hooks


def _function_class():
    import ember.autograd

    return getattr(ember.autograd, "Function", None)


def _missing(what: str) -> RuntimeError:
    return RuntimeError(f"checkpoint: {what} is not available in this build of ember, so "
                        "activations cannot be recomputed in backward")


class _RngState:
    """The default generator's state at the forward pass, restored for the recomputation (and
    the caller's state put back afterwards)."""

    def __init__(self, enabled: bool) -> None:
        self.state = get_rng_state() if enabled else None

    def run(self, fn: Callable, *args, **kwargs):
        if self.state is None:
            return fn(*args, **kwargs)
        outer = get_rng_state()
        set_rng_state(self.state)
        try:
            return fn(*args, **kwargs)
        finally:
            set_rng_state(outer)


# ---- non-reentrant: saved-tensor hooks ---------------------------------------------------------


class _Handle:
    """What the graph keeps instead of a saved activation: its position in the save order."""

    __slots__ = ("frame", "index")

    def __init__(self, frame: "_Frame", index: int) -> None:
        self.frame = frame
        self.index = index


class _Frame:
    """One checkpointed call: everything needed to recompute it, and the recomputed tensors."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, rng: _RngState) -> None:
        self.fn, self.args, self.kwargs, self.rng = fn, args, kwargs, rng
        self.count = 0
        self.recomputed: dict[int, Tensor] = {}

    def pack(self, t: Tensor) -> _Handle:
        h = _Handle(self, self.count)
        self.count += 1
        return h

    def recompute(self) -> None:
        # Under create_graph the recomputed tensors keep their graph (double backward then
        # flows through the recomputation into the inputs); otherwise they are detached.
        keep_graph = _C.is_grad_enabled()
        store: dict[int, Tensor] = {}

        def pack(t: Tensor) -> int:
            store[len(store)] = t if keep_graph else t.detach()
            return len(store) - 1

        def unpack(i: int) -> Tensor:
            return store[i]

        hooks = _saved_tensors_hooks()
        with enable_grad(), hooks(pack, unpack):
            self.rng.run(self.fn, *self.args, **self.kwargs)
        if len(store) != self.count:
            raise RuntimeError(
                f"checkpoint: recomputing {getattr(self.fn, '__name__', self.fn)!r} saved "
                f"{len(store)} tensors for backward but the original forward saved {self.count}; "
                "the checkpointed function must run the same ops each time it is called")
        self.recomputed = store

    def unpack(self, h: _Handle) -> Tensor:
        if h.index not in self.recomputed:
            self.recompute()  # also after an earlier backward used them up (retain_graph)
        return self.recomputed.pop(h.index)


def _non_reentrant(fn: Callable, preserve_rng_state: bool, args: tuple, kwargs: dict,
                   first: Callable | None = None):
    """``fn`` runs under saved-tensor hooks that recompute by calling ``fn`` again (``first``,
    when given, is what runs the first time)."""
    hooks = _saved_tensors_hooks()
    if hooks is None:
        fn_cls = _function_class()
        if fn_cls is None or kwargs:
            raise _missing("ember.autograd.graph.saved_tensors_hooks")
        return _reentrant(fn, preserve_rng_state, args)
    frame = _Frame(fn, args, kwargs, _RngState(preserve_rng_state))

    def unpack(h: _Handle) -> Tensor:
        return h.frame.unpack(h)

    # the handles hold the frame; the frame never holds the handles, so the recomputed tensors
    # are freed with the last node of this segment
    with hooks(frame.pack, unpack):
        return (first or fn)(*args, **kwargs)


# ---- reentrant: a custom Function ----------------------------------------------------------------

_REENTRANT_CLS = None


def _reentrant_cls():
    global _REENTRANT_CLS
    if _REENTRANT_CLS is not None:
        return _REENTRANT_CLS
    Function = _function_class()
    if Function is None:
        raise _missing("ember.autograd.Function")

    class CheckpointFunction(Function):
        @staticmethod
        def forward(ctx, fn, rng, *args):
            ctx.fn, ctx.rng = fn, rng
            ctx.layout = [isinstance(a, Tensor) for a in args]
            ctx.others = [None if is_t else a for a, is_t in zip(args, ctx.layout)]
            ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
            with no_grad():
                return fn(*args)

        @staticmethod
        def backward(ctx, *grads):
            import ember

            tensors = iter(ctx.saved_tensors)
            args = []
            for is_t, other in zip(ctx.layout, ctx.others):
                if is_t:
                    t = next(tensors)
                    args.append(t.detach().requires_grad_(t.requires_grad))
                else:
                    args.append(other)
            with enable_grad():
                out = ctx.rng.run(ctx.fn, *args)
            outs = (out,) if isinstance(out, Tensor) else tuple(out)
            pairs = [(o, g) for o, g in zip(outs, grads)
                     if isinstance(o, Tensor) and o.requires_grad and g is not None]
            if not pairs:
                raise RuntimeError("checkpoint: none of the outputs of the checkpointed function "
                                   "requires grad, so there is nothing to back-propagate")
            ember.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
            return (None, None) + tuple(
                a.grad if isinstance(a, Tensor) and a.requires_grad else None for a in args)

    _REENTRANT_CLS = CheckpointFunction
    return CheckpointFunction


def _reentrant(fn: Callable, preserve_rng_state: bool, args: tuple):
    return _reentrant_cls().apply(fn, _RngState(preserve_rng_state), *args)


# ---- public API ----------------------------------------------------------------------------------


def noop_context_fn() -> tuple[Any, Any]:
    """The default ``context_fn`` of :func:`checkpoint`: no context around either pass."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(fn: Callable, *args: Any, use_reentrant: bool = False,
               context_fn: Callable[[], tuple[Any, Any]] = noop_context_fn,
               determinism_check: str = "default", debug: bool = False, early_stop: bool = True,
               preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """Runs ``fn(*args, **kwargs)`` without keeping its intermediate activations; backward
    recomputes them. With ``preserve_rng_state`` the recomputation sees the same random numbers
    (dropout masks match). Gradients equal those of calling ``fn`` directly.

    >>> import ember
    >>> from ember.utils.checkpoint import checkpoint
    >>> w = ember.ones(4, requires_grad=True)
    >>> y = checkpoint(lambda x: (x * w).tanh().sum(), ember.ones(4))
    >>> y.backward()
    >>> w.grad  # 1 - tanh(1) ** 2
    tensor([0.4200, 0.4200, 0.4200, 0.4200])
    """
    if not callable(fn):
        raise TypeError(f"checkpoint: expected a callable, got {type(fn).__name__}")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check should be one of ['default', 'none'], "
                         f"but got {determinism_check!r}")
    if use_reentrant and (context_fn is not noop_context_fn or debug):
        raise ValueError("checkpoint: passing `context_fn` or `debug` is only supported when "
                         "use_reentrant=False")
    # (debug and early_stop only change PyTorch's diagnostics and memory timing)
    if not _C.is_grad_enabled():
        return fn(*args, **kwargs)  # nothing will be saved anyway
    if use_reentrant:
        if kwargs:
            raise ValueError("checkpoint: keyword arguments are only supported with "
                             f"use_reentrant=False (got {sorted(kwargs)})")
        return _reentrant(fn, preserve_rng_state, args)
    if context_fn is not noop_context_fn:
        # the forward runs inside the first context, each recomputation inside the second
        forward_ctx, recompute_ctx = context_fn()

        def recompute(*a: Any, **k: Any) -> Any:
            with recompute_ctx:
                return fn(*a, **k)

        with forward_ctx:
            return _non_reentrant(recompute, preserve_rng_state, args, kwargs, first=fn)
    return _non_reentrant(fn, preserve_rng_state, args, kwargs)


def checkpoint_sequential(functions: Iterable[Callable] | Any, segments: int, input: Any,
                          use_reentrant: bool = False, **kwargs: Any) -> Any:
    """Runs a sequence of functions (a list, or a module whose ``children()`` run in order, like
    ``nn.Sequential``) in ``segments`` checkpointed chunks; the last chunk runs normally since its
    activations are needed right away.

    >>> import ember
    >>> from ember.utils.checkpoint import checkpoint_sequential
    >>> layers = [ember.tanh, ember.sin, ember.exp, ember.cos]
    >>> x = ember.ones(2, requires_grad=True)
    >>> checkpoint_sequential(layers, 2, x).sum().backward()
    >>> y = ember.ones(2, requires_grad=True)
    >>> ember.cos(ember.exp(ember.sin(ember.tanh(y)))).sum().backward()
    >>> ember.allclose(x.grad, y.grad)
    True
    """
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}")
    if not functions:
        return input
    segments = min(segments, len(functions))
    size = len(functions) // segments

    def run(start: int, end: int) -> Callable:
        def forward(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return forward

    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end, len(functions))(input)
