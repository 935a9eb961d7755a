"""parallelize_module: applies a ParallelStyle to a module, or a plan of styles to the
submodules its keys name ("." separated paths; "*" matches any one name)."""

from __future__ import annotations

import fnmatch
from typing import Any

from ember import nn

from .style import ParallelStyle

__all__ = ["parallelize_module"]


def _matches(module: nn.Module, parts: list[str]) -> list[nn.Module]:
    if not parts:
        return [module]
    found: list[nn.Module] = []
    for name, child in module.named_children():
        if fnmatch.fnmatchcase(name, parts[0]):
            found.extend(_matches(child, parts[1:]))
    return found


def parallelize_module(module: nn.Module, device_mesh: Any = None,
                       parallelize_plan: ParallelStyle | dict[str, ParallelStyle] | None = None,
                       *, src_data_rank: int | None = 0) -> nn.Module:
    """Parallelizes module (in place) as parallelize_plan says; returns it.

    Example::

        >>> parallelize_module(model, mesh, {"layers.*.fc1": ColwiseParallel()})  # doctest: +SKIP
    """
    import ember.distributed as dist
    from ember.distributed.device_mesh import init_device_mesh

    if device_mesh is None:
        device_mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    if device_mesh.ndim != 1:
        raise NotImplementedError("parallelize_module: ember takes a 1-D device mesh")
    if parallelize_plan is None:
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan.src_data_rank = src_data_rank
        return parallelize_plan._apply(module, device_mesh)
    if not isinstance(parallelize_plan, dict):
        raise TypeError(f"parallelize_module: parallelize_plan must be a ParallelStyle or a "
                        f"dict of them, got {type(parallelize_plan).__name__}")
    for path, style in parallelize_plan.items():
        targets = _matches(module, path.split("."))
        if not targets:
            raise ValueError(f"parallelize_module: no submodule matches {path!r}")
        for target in targets:
            parallelize_module(target, device_mesh, style, src_data_rank=src_data_rank)
    return module
