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
from typing import Any, Callable, Iterator, Literal, Sequence

from ember import _C
from ember._C import Tensor

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu", "register_multi_grad_hook"]


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
        _C._push_saved_tensors_default_hooks(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc: Any) -> None:
        _C._pop_saved_tensors_default_hooks()


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
