"""The autograd graph from Python: ``Node`` (what ``tensor.grad_fn`` is), saved-tensor hooks and
hooks on the gradients of several tensors (``register_multi_grad_hook``).

>>> import ember
>>> x = ember.ones(3, requires_grad=True)
>>> with ember.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t):
...     y = (x * x).sum()
>>> y.backward()
>>> x.grad.tolist()
[2.0, 2.0, 2.0]
"""

from __future__ import annotations

import abc
import contextlib
import itertools
import threading
import weakref
from typing import Any, Callable, Iterable, Iterator, Literal, NamedTuple, Sequence

from ember import _C
from ember._C import Tensor

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu", "register_multi_grad_hook",
           "disable_saved_tensors_hooks", "allow_mutation_on_saved_tensors", "GradientEdge",
           "get_gradient_edge", "increment_version"]


class Node(abc.ABC):
    """A node of the autograd graph: ``isinstance(t.grad_fn, Node)`` holds for every grad_fn,
    built-in (``ember._C.Node``) or of a custom ``ember.autograd.Function``."""

    @abc.abstractmethod
    def name(self) -> str:
        """The node's name, e.g. ``'MulBackward0'``."""

    @property
    @abc.abstractmethod
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        """(node, input_nr) for each input of the forward op (None where none is needed)."""

    @abc.abstractmethod
    def register_hook(self, fn: Callable) -> Any:
        """``fn(grad_inputs, grad_outputs)``, called after the node ran; may return new grad_inputs."""

    @abc.abstractmethod
    def register_prehook(self, fn: Callable) -> Any:
        """``fn(grad_outputs)``, called before the node runs; may return new grad_outputs."""


Node.register(_C.Node)
# The built-in nodes report PyTorch's names themselves (the YAML `node_name` of each op).


class _ShapeKeepingPack:
    """pack_hook, keeping the saved tensor's shape next to what the hook returned."""

    __slots__ = ("hook",)

    def __init__(self, hook: Callable[[Tensor], Any]) -> None:
        self.hook = hook

    def __call__(self, t: Tensor) -> tuple:
        return (tuple(t.shape), self.hook(t))


class _ShapeCheckingUnpack:
    """unpack_hook, refusing a tensor of another shape than the one saved: backward would use
    it as the saved value, and one that broadcasts would give a silently wrong gradient."""

    __slots__ = ("hook",)

    def __init__(self, hook: Callable[[Any], Tensor]) -> None:
        self.hook = hook

    def __call__(self, packed: tuple) -> Any:
        shape, inner = packed
        t = self.hook(inner)
        if isinstance(t, Tensor) and tuple(t.shape) != shape:
            name = getattr(self.hook, "__name__", type(self.hook).__name__)
            raise RuntimeError(f"saved tensor unpack_hook '{name}' returned a tensor of shape "
                               f"{tuple(t.shape)} for one saved with shape {shape}; it must give "
                               f"back the saved tensor's content")
        return t  # not a Tensor: the engine names the type


class saved_tensors_hooks:
    """Within this context, tensors that ops save for backward go through ``pack_hook`` when
    saved (only its result is kept) and ``unpack_hook`` when backward needs them again.

    ``pack_hook(tensor) -> Any`` and ``unpack_hook(packed) -> Tensor``; unpack must give back a
    tensor with the original's content. The stack of hooks is per thread; the innermost applies.

    >>> import ember
    >>> x = ember.ones(2, requires_grad=True)
    >>> seen = []
    >>> with ember.autograd.graph.saved_tensors_hooks(lambda t: seen.append(t) or len(seen) - 1,
    ...                                               lambda i: seen[i]):
    ...     y = (x * x).sum()
    >>> y.backward()
    >>> len(seen)
    2
    """

    def __init__(self, pack_hook: Callable[[Tensor], Any], unpack_hook: Callable[[Any], Tensor]) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> saved_tensors_hooks:
        disabled = _disabled_message()
        if disabled is not None:
            raise RuntimeError(disabled)
        pack, unpack = self.pack_hook, self.unpack_hook
        for what, h in (("pack_hook", pack), ("unpack_hook", unpack)):
            if not callable(h):
                raise TypeError(f"saved_tensors_hooks ({what}): the hook must be callable, got "
                                f"{type(h).__name__!r}")
        _C._push_saved_tensors_default_hooks(_ShapeKeepingPack(pack),
                                             _ShapeCheckingUnpack(unpack))
        _hooks_state.active = _hooks_active() + 1
        return self

    def __exit__(self, *exc: Any) -> None:
        _C._pop_saved_tensors_default_hooks()
        _hooks_state.active = _hooks_active() - 1


class save_on_cpu(saved_tensors_hooks):
    """Keeps the tensors saved for backward in CPU memory and moves them back to their device
    when backward needs them (offloading activations of a GPU model).

    CPU tensors are kept as they are (there is nothing to offload), still through the hooks, so
    in-place changes to them after saving are still caught by backward.

    >>> import ember
    >>> x = ember.ones(2, requires_grad=True)
    >>> with ember.autograd.graph.save_on_cpu():
    ...     y = (x.exp() * x).sum()
    >>> y.backward()
    >>> [round(v, 3) for v in x.grad.tolist()]
    [5.437, 5.437]
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        self.pin_memory = pin_memory
        self.device_type = device_type

        def pack_to_cpu(tensor: Tensor) -> tuple[Any, Tensor]:
            if tensor.device.type == "cpu":
                return (tensor.device, tensor)
            return (tensor.device, tensor.to("cpu"))

        def unpack_from_cpu(packed: tuple[Any, Tensor]) -> Tensor:
            device, tensor = packed
            return tensor if tensor.device == device else tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


# ---- turning saved-tensor hooks off -------------------------------------------------------------
_hooks_state = threading.local()


def _disabled_message() -> str | None:
    return getattr(_hooks_state, "disabled", None)


def _hooks_active() -> int:
    return getattr(_hooks_state, "active", 0)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str) -> Iterator[None]:
    """Within the block, entering :class:`saved_tensors_hooks` (or :class:`save_on_cpu`, or a
    non-reentrant checkpoint) raises RuntimeError with ``error_message``; entering it while such
    hooks are active raises too. Per thread; the innermost message applies.

    >>> import ember
    >>> from ember.autograd.graph import disable_saved_tensors_hooks, save_on_cpu
    >>> with disable_saved_tensors_hooks("no offloading here"):
    ...     try:
    ...         with save_on_cpu():
    ...             pass
    ...     except RuntimeError as e:
    ...         print(e)
    no offloading here
    """
    if _hooks_active():
        raise RuntimeError(error_message)
    prev = _disabled_message()
    _hooks_state.disabled = error_message
    try:
        yield
    finally:
        _hooks_state.disabled = prev


# ---- version counters and gradient edges --------------------------------------------------------
def increment_version(tensor: Tensor | Iterable[Tensor]) -> None:
    """Bumps the version counter of ``tensor`` (or of each tensor of an iterable) by one
    without touching its data: for code that changes a tensor's memory behind autograd's back,
    so that backward still notices. Views share the counter of their base.

    >>> import ember
    >>> x = ember.ones(2)
    >>> ember.autograd.graph.increment_version(x)
    >>> x._version
    1
    """
    from ember.autograd.grad_mode import no_grad

    tensors = [tensor] if isinstance(tensor, Tensor) else list(tensor)
    with no_grad():
        for t in tensors:
            # resizing a tensor to its own shape is an in-place op that writes no data; the
            # detached alias shares the version counter but may always be resized
            alias = t.detach()
            alias.resize_(alias.shape)


class GradientEdge(NamedTuple):
    """Where the gradient of a tensor enters the autograd graph: ``node`` (its ``grad_fn``, or
    the AccumulateGrad node of a leaf) and ``output_nr`` (which output of the node it is).
    ``get_gradient_edge(t)`` makes one; it can be passed among the ``inputs`` and the outputs
    (``outputs`` / ``tensors``, with their gradients given) of ``ember.autograd.grad`` and
    ``backward`` while ``t`` is alive and its grad_fn unchanged."""

    node: Any
    output_nr: int
    ownership_token: Any = None


# node -> {output_nr: weak reference to the tensor the edge came from}: ember's engine takes
# tensors as inputs, so an edge used as an input is resolved back to its tensor.
_edge_tensors: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """The :class:`GradientEdge` of ``tensor`` (which must require grad).

    >>> import ember
    >>> x = ember.ones(2, requires_grad=True)
    >>> y = x * 2
    >>> e = ember.autograd.graph.get_gradient_edge(y)
    >>> e.node is y.grad_fn, e.output_nr
    (True, 0)
    >>> ember.autograd.grad((y * y).sum(), inputs=[e])[0].tolist()
    [4.0, 4.0]
    """
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does "
                           "not require gradients")
    node = _grad_node(tensor)
    nr = tensor.output_nr if tensor.grad_fn is not None else 0
    try:
        _edge_tensors.setdefault(node, {})[nr] = weakref.ref(tensor)
    except TypeError:  # a node type without weak references: the edge is data only
        pass
    return GradientEdge(node, nr)


def _resolve_edge(edge: GradientEdge) -> Tensor:
    """The tensor an edge passed as an input or output stands for."""
    ref = _edge_tensors.get(edge.node, {}).get(edge.output_nr) if edge.node is not None else None
    t = ref() if ref is not None else None
    if t is not None and _grad_node(t) is edge.node and (
            t.grad_fn is None or t.output_nr == edge.output_nr):
        return t
    raise RuntimeError(
        "ember.autograd: a GradientEdge can be used as an input or output only while the tensor "
        "it was taken from with get_gradient_edge() is alive and has the same grad_fn (ember's "
        "engine takes tensors; edges built by hand or of a tensor changed in place since are "
        "not supported)")


def _resolve_inputs(inputs: list) -> list:
    return [_resolve_edge(i) if isinstance(i, GradientEdge) else i for i in inputs]


# ---- in-place changes to saved tensors ------------------------------------------------------------
class _AllowMutationOnSavedContext:
    """The state of one ``allow_mutation_on_saved_tensors`` block: the tensors saved inside it
    and the copies taken before an in-place op changed them."""

    def __init__(self) -> None:
        self.original: dict[int, Tensor] = {}  # saved id -> the tensor autograd saved
        self.version: dict[int, int] = {}  # saved id -> its version when saved
        self.by_storage: dict[int, list[int]] = {}  # storage address -> saved ids
        self.cloned: dict[int, Tensor] = {}  # saved id -> its value before the first change
        self.closed = False
        self._ids = itertools.count()

    def clear(self) -> None:
        self.original.clear()
        self.version.clear()
        self.by_storage.clear()
        self.cloned.clear()


def _storage_key(t: Tensor) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, AttributeError, TypeError):
        return None


def _mutated_args(func: Any, args: tuple, kwargs: dict) -> list[Tensor]:
    """The tensors an op writes: its ``out=``, ``_copy_from``'s destination, the first argument
    of an in-place op (a name ending in ``_``)."""
    out: list[Tensor] = []
    o = kwargs.get("out")
    if isinstance(o, Tensor):
        out.append(o)
    elif isinstance(o, (list, tuple)):
        out.extend(x for x in o if isinstance(x, Tensor))
    name = func.overloadpacket.__name__
    if name == "_copy_from" and len(args) > 1 and isinstance(args[1], Tensor):
        out.append(args[1])
    elif name.endswith("_") and not name.endswith("__") and args and isinstance(args[0], Tensor):
        out.append(args[0])
    return out


def _clone_before_mutate_mode(ctx: _AllowMutationOnSavedContext) -> Any:
    from ember.utils._python_dispatch import TorchDispatchMode

    class _CloneArgBeforeMutateMode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: tuple, args: tuple = (),
                               kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            for t in _mutated_args(func, args, kwargs):
                for sid in ctx.by_storage.get(_storage_key(t), ()):
                    if sid not in ctx.cloned:
                        ctx.cloned[sid] = ctx.original[sid].clone()
            return func(*args, **kwargs)

    return _CloneArgBeforeMutateMode()


@contextlib.contextmanager
def allow_mutation_on_saved_tensors() -> Iterator[_AllowMutationOnSavedContext]:
    """Within the block, an in-place op on a tensor that autograd saved for backward (or on a
    view of its memory) first copies the saved value, so backward uses the value from before the
    change instead of raising. Backward must run inside the same block.

    >>> import ember
    >>> with ember.autograd.graph.allow_mutation_on_saved_tensors():
    ...     x = ember.ones(2, requires_grad=True)
    ...     y = x.clone()
    ...     z = y * y
    ...     _ = y.mul_(3)
    ...     z.sum().backward()
    >>> x.grad.tolist()
    [2.0, 2.0]
    """
    ctx = _AllowMutationOnSavedContext()

    def pack(t: Tensor) -> int:
        sid = next(ctx._ids)
        ctx.original[sid] = t
        ctx.version[sid] = t._version
        ctx.by_storage.setdefault(_storage_key(t), []).append(sid)
        return sid

    def unpack(sid: int) -> Tensor:
        if ctx.closed:
            # (AssertionError, as PyTorch raises)
            raise AssertionError("Trying to backward outside of the "
                                 "'allow_mutation_on_saved_tensors' context in which the graph "
                                 "was originally recorded.")
        copy = ctx.cloned.get(sid)
        if copy is None:
            return ctx.original[sid]
        # the copy stands for the tensor as it was saved, version included (backward checks it)
        for _ in range(ctx.version[sid] - copy._version):
            increment_version(copy)
        return copy

    with saved_tensors_hooks(pack, unpack), _clone_before_mutate_mode(ctx):
        try:
            yield ctx
        finally:
            ctx.closed = True
            ctx.clear()


# ---- the running backward pass ----------------------------------------------------------------
# ember.autograd's backward() and grad() run the engine inside _graph_task: hooks that need to
# know which backward call they are part of (register_multi_grad_hook) find it here.
class _GraphTask:
    __slots__ = ("id", "outputs", "inputs", "state", "callbacks", "_runs")

    _ids = itertools.count()

    def __init__(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        self.id = next(self._ids)
        self.outputs = list(outputs)
        self.inputs = list(inputs)
        self.state: dict[object, Any] = {}  # per multi-grad hook, freed with the task
        self.callbacks: list[Callable[[], None]] = []  # run when the backward call ends
        self._runs: set | None = None

    def will_run(self, node: Any) -> bool:
        """Whether this backward call reaches the node (with ``inputs``, on a path to one)."""
        if self._runs is None:
            self._runs = self._nodes_run()
        return node is not None and node in self._runs

    def _nodes_run(self) -> set:
        seen: set = set()
        stack = [t.grad_fn for t in self.outputs if t.grad_fn is not None]
        stack += [_grad_node(t) for t in self.outputs if t.grad_fn is None and t.requires_grad]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            stack.extend(n for n, _ in node.next_functions if n is not None)
        if not self.inputs:
            return seen
        targets = {_grad_node(t) for t in self.inputs}
        leads: dict[Any, bool] = {}  # node -> a target is at or below it

        def leads_to_target(root: Any) -> bool:
            # iterative post-order walk: graphs can be deeper than Python's recursion limit
            work = [(root, False)]
            while work:
                node, expanded = work.pop()
                if node in leads:
                    continue
                children = [n for n, _ in node.next_functions if n is not None]
                if expanded:
                    leads[node] = node in targets or any(leads[c] for c in children)
                else:
                    work.append((node, True))
                    work.extend((c, False) for c in children if c not in leads)
            return leads[root]

        return {n for n in seen if leads_to_target(n)}


_task_local = threading.local()


@contextlib.contextmanager
def _graph_task(outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> Iterator[_GraphTask]:
    stack = getattr(_task_local, "stack", None)
    if stack is None:
        stack = _task_local.stack = []
    task = _GraphTask(outputs, inputs)
    stack.append(task)
    try:
        yield task
    finally:
        stack.pop()
        for callback in task.callbacks:
            callback()


def _current_graph_task() -> _GraphTask:
    stack = getattr(_task_local, "stack", None)
    if not stack:
        raise RuntimeError("expected this hook to be called inside a backward call")
    return stack[-1]


def _grad_node(t: Tensor) -> Any:
    """The node a tensor's gradient arrives at: its grad_fn, or a leaf's AccumulateGrad."""
    if t.grad_fn is not None:
        return t.grad_fn
    if not t.requires_grad:
        return None
    from ember.autograd.grad_mode import enable_grad

    with enable_grad():
        return t.view_as(t).grad_fn.next_functions[0][0]


class _MultiHandle:
    """Removes the per-tensor hooks of one register_multi_grad_hook call."""

    def __init__(self, handles: Sequence[Any]) -> None:
        self.handles = tuple(handles)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def __enter__(self) -> _MultiHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def register_multi_grad_hook(tensors: Sequence[Tensor], fn: Callable[..., None], *,
                             mode: Literal["all", "any"] = "all") -> _MultiHandle:
    """A hook on the gradients of several tensors, as PyTorch's.

    ``mode="all"``: ``fn(grads)`` runs once per backward call, after the gradient of every
    tensor that this call computes has arrived; ``grads`` has one entry per tensor, None for
    those the call does not reach (not in the graph, or not on a path to ``inputs``).
    ``mode="any"``: ``fn(grad)`` runs once per backward call, with the first gradient of any of
    the tensors. ``fn`` must not modify the gradients. Returns a handle whose ``remove()`` takes
    the hook off.

    >>> import ember
    >>> a = ember.ones(2, requires_grad=True)
    >>> b = ember.ones(2, requires_grad=True)
    >>> c, d = a * b, a * b
    >>> h = ember.autograd.graph.register_multi_grad_hook(
    ...     (a, b, c, d), lambda grads: print([g is not None for g in grads]))
    >>> c.sum().backward(retain_graph=True)
    [True, True, True, False]
    >>> c.sum().backward(inputs=(a,))
    [True, False, True, False]
    >>> h.remove()
    """
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    lock = threading.Lock()
    key = object()  # this hook's slot in each task's state

    if mode == "all":
        nodes = [_grad_node(t) for t in tensors]

        def make_hook(i: int) -> Callable[[Tensor], None]:
            def hook(grad: Tensor) -> None:
                task = _current_graph_task()
                with lock:
                    entry = task.state.get(key)
                    if entry is None:
                        expected = sum(task.will_run(n) for n in nodes)
                        entry = task.state[key] = [0, expected, [None] * len(tensors)]
                    entry[2][i] = grad
                    entry[0] += 1
                    done = entry[0] == entry[1]
                    if done:
                        del task.state[key]
                if done:
                    fn(entry[2])

            return hook

        return _MultiHandle([t.register_hook(make_hook(i)) for i, t in enumerate(tensors)])

    def any_hook(grad: Tensor) -> None:
        task = _current_graph_task()
        with lock:
            first = key not in task.state
            task.state[key] = True
        if first:
            fn(grad)

    return _MultiHandle([t.register_hook(any_hook) for t in tensors if t.requires_grad])
