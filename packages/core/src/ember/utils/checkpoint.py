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

Selective activation checkpointing (``context_fn=functools.partial(
create_selective_checkpoint_contexts, policy)``, non-reentrant only) keeps the outputs of the
ops the policy names from the forward pass, so the recomputation does not run those ops again.

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
import enum
import threading
import warnings
from collections import defaultdict
from typing import Any, Callable, ContextManager, Iterable, Iterator

from ember import _C
from ember._C import Tensor
from ember.autograd.grad_mode import enable_grad, no_grad
from ember.random import get_rng_state, set_rng_state

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction",
           "check_backward_validity", "detach_variable", "get_device_states", "set_device_states",
           "noop_context_fn", "set_checkpoint_early_stop", "DefaultDeviceType",
           "set_checkpoint_debug_enabled", "CheckpointPolicy", "SelectiveCheckpointContext",
           "create_selective_checkpoint_contexts", "SAC_IGNORED_OPS", "GraphExecGroup"]


class CheckpointError(RuntimeError):
    """Raised when the recomputation of a checkpointed region does not match its forward."""


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


def _autocast_state() -> list[tuple[str, bool, Any, bool]]:
    """(device type, enabled, dtype, cache enabled) of autocast for each device type that has
    it: the forward's mixed-precision context, which the recomputation must run under too."""
    from ember.amp import autocast_mode as am

    cache = am.is_autocast_cache_enabled()
    return [(d, am.is_autocast_enabled(d), am.get_autocast_dtype(d), cache)
            for d in ("cpu", "cuda") if am.is_autocast_available(d)]


class _RngState:
    """The forward pass's context, restored for the recomputation: the default generator's
    state (when preserved; the caller's state is put back afterwards) and, as in PyTorch, the
    autocast state (a region checkpointed inside ``autocast`` is recomputed inside it too, even
    though backward runs outside)."""

    def __init__(self, enabled: bool) -> None:
        self.state = get_rng_state() if enabled else None
        self.autocast = _autocast_state()

    def run(self, fn: Callable, *args, **kwargs):
        from ember.amp import autocast

        with contextlib.ExitStack() as stack:
            for device_type, on, dtype, cache in self.autocast:
                stack.enter_context(autocast(device_type, dtype=dtype, enabled=on,
                                             cache_enabled=cache))
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

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, rng: _RngState,
                 check: bool = True) -> None:
        self.fn, self.args, self.kwargs, self.rng = fn, args, kwargs, rng
        self.count = 0
        self.recomputed: dict[int, Tensor] = {}
        # shape/dtype/device of each saved tensor (determinism_check="default"): a recomputation
        # that saves something else is named here, not as a shape error deep in backward
        self.meta: list[dict] | None = [] if check else None

    def pack(self, t: Tensor) -> _Handle:
        h = _Handle(self, self.count)
        self.count += 1
        if self.meta is not None:
            self.meta.append(_metadata(t))
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
            raise CheckpointError(
                f"checkpoint: recomputing {getattr(self.fn, '__name__', self.fn)!r} saved "
                f"{len(store)} tensors for backward but the original forward saved {self.count}; "
                "the checkpointed function must run the same ops each time it is called")
        if self.meta is not None:
            self._check_metadata(store)
        self.recomputed = store

    def _check_metadata(self, store: dict[int, Tensor]) -> None:
        diffs = []
        for i, saved in enumerate(self.meta):
            now = _metadata(store[i])
            if now != saved:
                diffs.append(f"tensor at position {i}:\nsaved metadata: {saved}\n"
                             f"recomputed metadata: {now}")
        if diffs:
            raise CheckpointError(
                f"checkpoint: recomputing {getattr(self.fn, '__name__', self.fn)!r} gave "
                "tensors with different metadata than during the forward pass (the "
                "checkpointed function must compute the same shapes, dtypes and devices each "
                "time it is called; determinism_check='none' skips this check).\n"
                + "\n".join(diffs))

    def unpack(self, h: _Handle) -> Tensor:
        if h.index not in self.recomputed:
            self.recompute()  # also after an earlier backward used them up (retain_graph)
        return self.recomputed.pop(h.index)


def _metadata(t: Tensor) -> dict:
    try:
        shape = tuple(t.shape)
    except RuntimeError:  # a strided nested tensor has no single shape
        shape = None
    return {"shape": shape, "dtype": t.dtype, "device": t.device}


def _non_reentrant(fn: Callable, preserve_rng_state: bool, args: tuple, kwargs: dict,
                   first: Callable | None = None, check: bool = True):
    """``fn`` runs under saved-tensor hooks that recompute by calling ``fn`` again (``first``,
    when given, is what runs the first time)."""
    hooks = _saved_tensors_hooks()
    if hooks is None:
        fn_cls = _function_class()
        if fn_cls is None or kwargs:
            raise _missing("ember.autograd.graph.saved_tensors_hooks")
        return _reentrant(fn, preserve_rng_state, args)
    frame = _Frame(fn, args, kwargs, _RngState(preserve_rng_state), check)

    def unpack(h: _Handle) -> Tensor:
        return h.frame.unpack(h)

    # the handles hold the frame; the frame never holds the handles, so the recomputed tensors
    # are freed with the last node of this segment
    with hooks(frame.pack, unpack):
        return (first or fn)(*args, **kwargs)


# ---- reentrant: a custom Function ----------------------------------------------------------------


def detach_variable(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """A tuple like ``inputs`` whose tensors are detached (keeping their ``requires_grad``);
    other entries are passed through. Anything but a tuple raises RuntimeError.

    >>> import ember
    >>> from ember.utils.checkpoint import detach_variable
    >>> x = ember.ones(2, requires_grad=True) * 2
    >>> d, n = detach_variable((x, 3))
    >>> d.grad_fn is None, d.requires_grad, n
    (True, True, 3)
    """
    if not isinstance(inputs, tuple):
        raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    out = []
    for inp in inputs:
        if isinstance(inp, Tensor):
            d = inp.detach()
            d.requires_grad = inp.requires_grad
            out.append(d)
        else:
            out.append(inp)
    return tuple(out)


def check_backward_validity(inputs: Iterable[Any]) -> None:
    """Warns (UserWarning) when no tensor among ``inputs`` requires grad: the reentrant
    checkpoint then has no gradient to compute."""
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)


def _checkpoint_function_forward(ctx: Any, run_function: Callable, preserve_rng_state: bool,
                                 *args: Any) -> Any:
    check_backward_validity(args)
    ctx.run_function = run_function
    ctx.preserve_rng_state = preserve_rng_state
    ctx.rng = _RngState(preserve_rng_state)
    ctx.layout = [isinstance(a, Tensor) for a in args]
    ctx.others = [None if is_t else a for a, is_t in zip(args, ctx.layout)]
    ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
    with no_grad():
        return run_function(*args)


def _checkpoint_function_backward(ctx: Any, *grads: Any) -> tuple:
    import ember

    tensors = iter(ctx.saved_tensors)
    args = []
    for is_t, other in zip(ctx.layout, ctx.others):
        args.append(next(tensors) if is_t else other)
    args = list(detach_variable(tuple(args)))
    with enable_grad():
        out = ctx.rng.run(ctx.run_function, *args)
    outs = (out,) if isinstance(out, Tensor) else tuple(out)
    pairs = [(o, g) for o, g in zip(outs, grads)
             if isinstance(o, Tensor) and o.requires_grad and g is not None]
    if not pairs:
        raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not "
                           "necessary")
    ember.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
    return (None, None) + tuple(
        a.grad if isinstance(a, Tensor) and a.requires_grad else None for a in args)


def _make_checkpoint_function() -> type | None:
    Function = _function_class()
    if Function is None:
        return None
    return type("CheckpointFunction", (Function,), {
        "__module__": __name__,
        "__doc__": "The reentrant checkpoint as an ``ember.autograd.Function``: "
                   "``CheckpointFunction.apply(run_function, preserve_rng_state, *args)`` runs "
                   "``run_function(*args)`` under ``no_grad``; its backward re-runs it with grad "
                   "enabled (under the forward's RNG state when ``preserve_rng_state``) and "
                   "back-propagates through it. Gradients reach the inputs through ``.grad``.",
        "forward": staticmethod(_checkpoint_function_forward),
        "backward": staticmethod(_checkpoint_function_backward),
    })


CheckpointFunction: Any = _make_checkpoint_function()


def _reentrant(fn: Callable, preserve_rng_state: bool, args: tuple):
    if CheckpointFunction is None:
        raise _missing("ember.autograd.Function")
    return CheckpointFunction.apply(fn, preserve_rng_state, *args)


# ---- device RNG states ---------------------------------------------------------------------------


class DefaultDeviceType:
    """The device type whose RNG states checkpoint saves when no argument is on an
    accelerator: the current accelerator's type (``"cuda"`` where there is one), else
    ``"cpu"``, until :meth:`set_device_type` changes it."""

    _default_device_type: str | None = None

    @staticmethod
    def set_device_type(device: str = "cuda") -> None:
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type() -> str:
        if not DefaultDeviceType._default_device_type:
            DefaultDeviceType._default_device_type = _accelerator_type()
        return DefaultDeviceType._default_device_type


def _accelerator_type() -> str:
    try:
        import ember.accelerator as acc

        dev = acc.current_accelerator(True)
    except (ImportError, AttributeError, RuntimeError):
        dev = None
    return dev.type if dev is not None else "cpu"


def _tensors_of(args: Any) -> Iterator[Tensor]:
    from ember.utils._pytree import tree_leaves

    return (a for a in tree_leaves(args) if isinstance(a, Tensor))


def _infer_device_type(*args: Any) -> str:
    types = [t.device.type for t in _tensors_of(args) if t.device.type != "cpu"]
    if len(set(types)) > 1:
        warnings.warn("Tensor arguments, excluding CPU tensors, are detected on at least two types "
                      "of devices. Device state will only be saved for devices of a single device "
                      "type, and the remaining devices will be ignored. Consequently, if any "
                      "checkpointed functions involve randomness, this may result in incorrect "
                      f"gradients.\nDevice types: {sorted(set(types))} first device type: "
                      f"{types[0]}", stacklevel=2)
    if not types:
        return DefaultDeviceType.get_device_type()
    return "cuda" if "cuda" in types else types[0]


def _device_module(device_type: str) -> Any:
    import importlib

    return importlib.import_module(f"ember.{device_type}")


def get_device_states(*args: Any) -> tuple[list[int], list[Tensor]]:
    """The device indices of the tensors among ``args`` (nested containers too) that are on an
    accelerator, and each one's RNG state (for :func:`set_device_states`). CPU and meta
    tensors add nothing.

    >>> import ember
    >>> from ember.utils.checkpoint import get_device_states
    >>> get_device_states(ember.ones(2), [3])
    ([], [])
    """
    ids = [t.get_device() for t in _tensors_of(args) if t.device.type not in ("cpu", "meta")]
    states = []
    if ids:
        module = _device_module(_infer_device_type(*args))
        for i in ids:
            with module.device(i):
                states.append(module.get_rng_state())
    return ids, states


def set_device_states(devices: Iterable[int], states: Iterable[Tensor], *,
                      device_type: str | None = None) -> None:
    """Puts back the RNG states :func:`get_device_states` returned, one per device index, on
    devices of ``device_type`` (default: :meth:`DefaultDeviceType.get_device_type`)."""
    if device_type is None:
        device_type = DefaultDeviceType.get_device_type()
    if device_type == "meta":
        return
    module = _device_module(device_type)
    for device, state in zip(devices, states):
        with module.device(device):
            module.set_rng_state(state)


# ---- global switches -----------------------------------------------------------------------------

_checkpoint_debug_enabled: bool | None = None
_enable_checkpoint_early_stop: bool | None = None


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: bool | None) -> Iterator[None]:
    """Within the block, overrides the ``debug`` argument of every :func:`checkpoint` (``None``
    defers to it). ember's checkpoint reports recomputation mismatches the same way either way."""
    global _checkpoint_debug_enabled
    prev = _checkpoint_debug_enabled
    _checkpoint_debug_enabled = enabled
    try:
        yield
    finally:
        _checkpoint_debug_enabled = prev


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool) -> Iterator[None]:
    """Within the block (around the forward), overrides the ``early_stop`` argument of every
    non-reentrant :func:`checkpoint`. ember always recomputes the whole region once per
    backward, so this only changes when the recomputation stops in PyTorch."""
    global _enable_checkpoint_early_stop
    prev = _enable_checkpoint_early_stop
    _enable_checkpoint_early_stop = enable
    try:
        yield
    finally:
        _enable_checkpoint_early_stop = prev


_group_state = threading.local()


class GraphExecGroup:
    """Backward calls under one instance of this context manager recompute each checkpointed
    (non-reentrant) region at most once, even across several backward calls; the calls must
    use disjoint saved activations. Groups do not nest.

    ember keeps the recomputed tensors a backward call did not use until a later call needs
    them, so it recomputes a region once for such disjoint calls with or without a group.
    """

    def __enter__(self) -> GraphExecGroup:
        current = getattr(_group_state, "group", None)
        if current is not None:
            raise RuntimeError(f"GraphExecGroup contexts cannot be nested. Already inside group "
                               f"{current}")
        _group_state.group = self
        return self

    def __exit__(self, *args: object) -> None:
        _group_state.group = None

    @classmethod
    def _get_current_group(cls) -> GraphExecGroup | None:
        return getattr(_group_state, "group", None)


# ---- selective activation checkpointing ----------------------------------------------------------


class CheckpointPolicy(enum.Enum):
    """What selective checkpointing does with one op's output: ``*_SAVE`` keeps it from the
    forward pass (the recomputation reuses it instead of running the op again), ``*_RECOMPUTE``
    lets the recomputation run the op again. ``MUST_*`` and ``PREFER_*`` act alike in eager
    mode (the difference is for compilers). ``*_CPU_OFFLOAD`` is recomputed in eager mode,
    as in PyTorch."""

    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


class SelectiveCheckpointContext:
    """The first argument of a selective checkpoint policy. The policy only runs during the
    forward pass, so ``is_recompute`` is False; ``op_output`` is what the op returned."""

    def __init__(self, *, is_recompute: bool, op_output: Any = None) -> None:
        self.is_recompute = is_recompute
        self.op_output = op_output


def _policy_from_bool(b: bool) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if b else CheckpointPolicy.PREFER_RECOMPUTE


def _ignored_ops() -> set:
    # autograd's detach runs a different number of times in the forward and the recomputation
    from ember.utils._python_dispatch import _op

    return {_op(-1)}


SAC_IGNORED_OPS: set = _ignored_ops()

_RECOMPUTE = object()
_CONSUMED = object()
_MISMATCH = ("This can happen if the operations in the checkpointed region are nondeterministic "
             "or depend on global state that changed between forward and backward.")


class _VersionedValue:
    """A cached op output (detached) and its version when cached, to catch later in-place
    changes."""

    __slots__ = ("val", "version")

    def __init__(self, val: Any) -> None:
        if isinstance(val, Tensor):
            val = val.detach()  # no autograd history kept (and no reference cycle through it)
            self.version: int | None = val._version
        else:
            self.version = None
        self.val = val

    def get(self, allow_mutation: bool) -> Any:
        if self.version is None or self.val._version == self.version:
            return self.val
        if not allow_mutation:
            raise RuntimeError("Tensor cached during selective activation checkpoint has been "
                               "mutated")
        # the changed value is used, as in PyTorch; a copy at the cached version, since
        # backward checks the recomputed tensors against the versions the forward saved
        from ember.autograd.graph import increment_version

        copy = self.val.clone()
        for _ in range(self.version - copy._version):
            increment_version(copy)
        return copy


def _tree_map(fn: Callable, tree: Any) -> Any:
    from ember.utils._pytree import tree_map

    return tree_map(fn, tree)


def _dispatch_mode_base() -> type:
    from ember.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


_TorchDispatchMode = _dispatch_mode_base()


class _CachingTorchDispatchMode(_TorchDispatchMode):
    """The forward-pass context: runs every op, asks the policy about it and caches the output
    of those to save (the n-th call of each op in slot n)."""

    def __init__(self, policy_fn: Callable, storage: dict) -> None:
        super().__init__()
        self.policy_fn = policy_fn
        self.storage = storage
        self.func_counter: dict[Any, int] = defaultdict(int)

    def __torch_dispatch__(self, func: Any, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in SAC_IGNORED_OPS:
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        idx = self.func_counter[func]
        self.func_counter[func] += 1
        policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=False, op_output=out),
                                func, *args, **kwargs)
        if isinstance(policy, bool):
            policy = _policy_from_bool(policy)
        if policy in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
            self.storage[func][idx] = _tree_map(_VersionedValue, out)
        else:
            self.storage[func][idx] = _RECOMPUTE
        return out


class _CachedTorchDispatchMode(_TorchDispatchMode):
    """The recomputation's context: ops whose output was cached return it (once) instead of
    running; the others run."""

    def __init__(self, policy_fn: Callable | None, storage: dict,
                 allow_cache_entry_mutation: bool = False) -> None:
        super().__init__()
        self.storage = storage
        self.allow_cache_entry_mutation = allow_cache_entry_mutation
        self.func_counter: dict[Any, int] = defaultdict(int)

    def __enter__(self) -> _CachedTorchDispatchMode:
        self.func_counter.clear()  # each recomputation counts from the start
        super().__enter__()
        return self

    def __torch_dispatch__(self, func: Any, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in SAC_IGNORED_OPS:
            return func(*args, **kwargs)
        idx = self.func_counter[func]
        self.func_counter[func] += 1
        slots = self.storage.get(func)
        if slots is None:
            raise RuntimeError(f"{func} encountered during backward but not found in storage. "
                               f"{_MISMATCH}")
        entry = slots.get(idx, None)
        if entry is None:
            raise RuntimeError(f"{func} invocation index {idx} encountered during backward but "
                               f"not found in storage. {_MISMATCH}")
        if entry is _CONSUMED:
            raise RuntimeError("Trying to backward an extra time. You are only allowed to "
                               "backward once on any region computed under selective activation "
                               "checkpoint.")
        if entry is _RECOMPUTE:
            return func(*args, **kwargs)
        slots[idx] = _CONSUMED
        allow = self.allow_cache_entry_mutation
        return _tree_map(lambda v: v.get(allow) if isinstance(v, _VersionedValue) else v, entry)


def _is_op_overload(op: Any) -> bool:
    from ember.library import _BuiltinOp
    from ember.utils._python_dispatch import OpOverload

    return isinstance(op, (OpOverload, _BuiltinOp))


def create_selective_checkpoint_contexts(
        policy_fn_or_list: Callable[..., Any] | list,
        allow_cache_entry_mutation: bool = False) -> tuple[ContextManager, ContextManager]:
    """The ``context_fn`` of a selectively checkpointed region (bind the policy with
    ``functools.partial``): ops the policy saves keep their output from the forward pass and
    are not run again by the recomputation in backward.

    ``policy_fn_or_list`` is either ``policy(ctx, op, *args, **kwargs)`` returning a
    :class:`CheckpointPolicy` (or a bool: True saves) for each op the region runs below
    autograd (``op`` is the op as ``__torch_dispatch__`` sees it, equal to
    ``ember.ops.aten.<name>.default``), or a list of such ops to save (all others are
    recomputed). With ``allow_cache_entry_mutation=False`` an in-place change to a cached
    output between forward and backward raises RuntimeError. A region may be backpropagated
    through only once.

    >>> import functools, ember
    >>> from ember.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
    >>> x = ember.ones(2, 2, requires_grad=True)
    >>> ctx_fn = functools.partial(create_selective_checkpoint_contexts, [ember.ops.aten.mm.default])
    >>> y = checkpoint(lambda t: ember.mm(t, t).sin(), x, use_reentrant=False, context_fn=ctx_fn)
    >>> y.sum().backward()
    >>> [round(v, 4) for v in x.grad[0].tolist()]
    [-1.6646, -1.6646]
    """
    if isinstance(policy_fn_or_list, list):
        from ember.utils._python_dispatch import OpOverloadPacket

        for op in policy_fn_or_list:
            if not _is_op_overload(op):
                extra = ("Please update the OpOverloadPacket to a specific OpOverload. For "
                         "example, if you have `ember.ops.aten.mm`, change it to "
                         "`ember.ops.aten.mm.default`."
                         if isinstance(op, OpOverloadPacket) else "")
                raise ValueError(f"Expected op in `op_list` to be an OpOverload but got: {op} "
                                 f"of type {type(op)}. {extra}")
        ops = list(policy_fn_or_list)

        def policy_fn(ctx: SelectiveCheckpointContext, op: Any, *args: Any,
                      **kwargs: Any) -> CheckpointPolicy:
            if op in ops:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    storage: dict[Any, dict[int, Any]] = defaultdict(dict)
    return (_CachingTorchDispatchMode(policy_fn, storage),
            _CachedTorchDispatchMode(None, storage, allow_cache_entry_mutation))


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
            return _non_reentrant(recompute, preserve_rng_state, args, kwargs, first=fn,
                                  check=determinism_check == "default")
    return _non_reentrant(fn, preserve_rng_state, args, kwargs,
                          check=determinism_check == "default")


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
