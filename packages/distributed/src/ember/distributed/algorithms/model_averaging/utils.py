"""Averaging parameters over the ranks of a group, through one flat buffer."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import ember

__all__ = ["average_parameters", "average_parameters_or_parameter_groups",
           "get_params_to_average"]


def average_parameters(params: Iterator[Any], process_group: Any) -> None:
    """Replaces each parameter's data by its mean over process_group (None: the world); one
    all-reduce of all of them flattened together. Ranks outside the group do nothing."""
    import ember.distributed as dist

    params = list(params)
    if not params or (process_group is not None and dist.get_rank(process_group) < 0):
        return
    with ember.no_grad():
        flat = ember.cat([p.data.reshape(-1) for p in params])
        flat /= dist.get_world_size(process_group)
        dist.all_reduce(flat, group=process_group)
        at = 0
        for p in params:
            p.data = flat[at:at + p.numel()].view_as(p).type_as(p)
            at += p.numel()


def get_params_to_average(params: Iterable[Any]) -> list[Any]:
    """The parameters (of a model, or of an optimizer's param groups) that have gradients."""
    from ember import nn

    found = []
    for item in params:
        if isinstance(item, nn.Parameter):
            if item.grad is not None:
                found.append(item)
        elif isinstance(item, dict):
            found.extend(p for p in item["params"] if p.grad is not None)
        else:
            raise NotImplementedError(f"Parameter input of type {type(item)} is not supported")
    return found


def average_parameters_or_parameter_groups(params: Iterable[Any], process_group: Any) -> None:
    """average_parameters of a model's parameters or an optimizer's param groups."""
    average_parameters(iter(get_params_to_average(params)), process_group)
