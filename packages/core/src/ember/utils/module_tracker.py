"""``ember.utils.module_tracker``: which modules are running (PyTorch's
``torch.utils.module_tracker``), the base of :mod:`ember.utils.flop_counter`'s per-module
counts.

>>> import ember
>>> from ember.utils.module_tracker import ModuleTracker
>>> seen = []
>>> net = ember.nn.Sequential(ember.nn.Linear(2, 2))
>>> with ModuleTracker() as tracker:
...     h = net[0].register_forward_pre_hook(lambda m, i: seen.append(sorted(tracker.parents)))
...     _ = net(ember.ones(1, 2))
>>> seen
[['Global', 'Sequential', 'Sequential.0']]
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

from ember._C import Tensor
from ember.autograd import graph
from ember.utils._pytree import tree_flatten

__all__ = ["ModuleTracker"]


class ModuleTracker:
    """A context manager whose ``parents`` is the set of fully qualified names of the modules
    whose forward (or backward) is running, always with ``"Global"``; a module first seen is
    named by its class, its children ``"<parent>.<attribute>"``. ``is_bw`` tells whether a
    backward pass is running. During backward a module is entered when the gradient of its
    output arrives and left when its inputs' gradients are computed."""

    parents: set[str]

    def __init__(self) -> None:
        self.parents = {"Global"}
        self._known: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._seen: weakref.WeakSet = weakref.WeakSet()
        self._hooks: list[Any] = []
        self._reset_queued = False

    @property
    def is_bw(self) -> bool:
        """Whether a backward pass is running in this thread."""
        return bool(getattr(graph._task_local, "stack", None))

    def _name(self, mod: Any) -> str:
        if mod not in self._known:
            self._known[mod] = type(mod).__name__
        name = self._known[mod]
        if mod not in self._seen:
            for child_name, child in mod.named_children():
                self._known[child] = f"{name}.{child_name}"
                self._name(child)
            self._seen.add(mod)
        return name

    def _queue_reset(self) -> None:
        # as PyTorch: the backward's module bookkeeping is dropped when that backward ends
        if self._reset_queued:
            return
        task = graph._current_graph_task()

        def reset() -> None:
            self.parents = {"Global"}
            self._reset_queued = False

        task.callbacks.append(reset)
        self._reset_queued = True

    def _enter_fn(self, name: str, is_bw: bool) -> Callable[..., None]:
        def fn(*args: Any) -> None:
            if is_bw:
                self._queue_reset()
            self.parents.add(name)
        return fn

    def _exit_fn(self, name: str) -> Callable[..., None]:
        def fn(*args: Any) -> None:
            self.parents.discard(name)
        return fn

    @staticmethod
    def _grad_tensors(values: Any) -> list[Tensor]:
        flat, _ = tree_flatten(values)
        return [a for a in flat if isinstance(a, Tensor) and a.requires_grad]

    def _pre_hook(self, mod: Any, args: Any) -> None:
        name = self._name(mod)
        self._enter_fn(name, False)()
        tensors = self._grad_tensors(args)
        if tensors:
            self._hooks.append(graph.register_multi_grad_hook(tensors, self._exit_fn(name)))

    def _post_hook(self, mod: Any, args: Any, output: Any) -> None:
        name = self._name(mod)
        self._exit_fn(name)()
        tensors = self._grad_tensors(output)
        if tensors:
            self._hooks.append(graph.register_multi_grad_hook(tensors,
                                                              self._enter_fn(name, True)))

    def __enter__(self) -> ModuleTracker:
        from ember.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        self._pre_handle = register_module_forward_pre_hook(self._pre_hook)
        self._post_handle = register_module_forward_hook(self._post_hook)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pre_handle.remove()
        self._post_handle.remove()
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
