"""The autograd graph from Python: ``Node`` (what ``tensor.grad_fn`` is) and saved-tensor hooks.

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
from typing import Any, Callable

from ember import _C
from ember._C import Tensor

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu"]


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
