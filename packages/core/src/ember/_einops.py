"""einops on ember tensors: ``einops.rearrange`` / ``reduce`` / ``repeat`` / ``einsum`` /
``pack`` / ``unpack`` take ember tensors, as they take torch's, in programs that changed only
their import.

einops finds a tensor's backend among the subclasses of its ``AbstractBackend`` whose framework
module is imported, so ember defines one, ``EmberBackend``, as soon as einops is imported (before
or after ember): ``install()`` defines it at once when einops is already there, else a finder on
``sys.meta_path`` runs once, defines it right after einops' backend module executes, and removes
itself. ``import ember`` never imports einops. (``einops.layers.torch`` builds on torch's own
``nn.Module``; ember's layers are not offered to it.)

>>> import ember
>>> import einops  # doctest: +SKIP
>>> einops.rearrange(ember.ones(2, 3, 4), "b h w -> b (h w)").shape  # doctest: +SKIP
ember.Size([2, 12])
"""

from __future__ import annotations

import sys
from typing import Any

_BACKENDS = "einops._backends"
_defined = False


def _define_backend() -> None:
    global _defined
    if _defined:
        return
    from einops._backends import AbstractBackend

    import ember

    _FLOATS = (ember.float16, ember.bfloat16, ember.float32, ember.float64)

    class EmberBackend(AbstractBackend):
        framework_name = "ember"

        def is_appropriate_type(self, tensor: Any) -> bool:
            return isinstance(tensor, ember.Tensor)

        def from_numpy(self, x: Any) -> Any:
            t = ember.from_numpy(x)
            return t.requires_grad_() if t.dtype in _FLOATS else t  # as einops' tests expect

        def to_numpy(self, x: Any) -> Any:
            return x.detach().cpu().numpy()

        def arange(self, start: int, stop: int) -> Any:
            return ember.arange(start, stop, dtype=ember.int64)

        def reduce(self, x: Any, operation: str, reduced_axes: Any) -> Any:
            axes = tuple(reduced_axes)
            if operation in ("min", "max"):
                return (x.amin if operation == "min" else x.amax)(dim=axes)
            if operation in ("sum", "mean"):
                return getattr(x, operation)(dim=axes)
            if operation in ("prod", "any", "all"):  # one dim at a time, last first
                for d in sorted(axes, reverse=True):
                    x = getattr(x, operation)(dim=d)
                return x
            raise NotImplementedError(f"einops reduction {operation!r} on ember tensors")

        def transpose(self, x: Any, axes: Any) -> Any:
            return x.permute(tuple(axes))

        def stack_on_zeroth_dimension(self, tensors: list) -> Any:
            return ember.stack(tensors)

        def add_axes(self, x: Any, n_axes: int, pos2len: dict) -> Any:
            sizes = [-1] * n_axes
            for pos, length in pos2len.items():
                x = x.unsqueeze(pos)
                sizes[pos] = length
            return x.expand(sizes)  # a view, no copy

        def tile(self, x: Any, repeats: Any) -> Any:
            return x.repeat(tuple(repeats))

        def concat(self, tensors: list, axis: int) -> Any:
            return ember.cat(tensors, dim=axis)

        def add_axis(self, x: Any, new_position: int) -> Any:
            return x.unsqueeze(new_position)

        def is_float_type(self, x: Any) -> bool:
            return x.dtype in _FLOATS

        def layers(self) -> Any:
            raise NotImplementedError("einops layers for ember: use einops' functions inside "
                                      "an ember.nn.Module (einops.layers.torch builds on torch)")

        def einsum(self, pattern: str, *x: Any) -> Any:
            return ember.einsum(pattern, *x)

    EmberBackend.__module__ = __name__
    globals()["EmberBackend"] = EmberBackend
    _defined = True


class _Loader:
    """Runs einops' own loader for its backend module, then defines ember's backend."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        sys.modules[module.__name__] = module  # the backend's import of it finds it
        _define_backend()


class _Finder:
    """First on sys.meta_path until einops' backend module is imported."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != _BACKENDS:
            return None
        import importlib.machinery

        sys.meta_path.remove(self)  # once
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Makes einops take ember tensors (now if einops is imported, else when it is)."""
    if _BACKENDS in sys.modules:
        _define_backend()
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
