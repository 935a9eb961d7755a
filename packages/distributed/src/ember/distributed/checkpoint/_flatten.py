"""torch's flattening of a nested state dict into checkpoint entries: dicts always open up
("a.b"), a list opens up ("a.0") when it holds tensors or dicts (at any depth), anything else
(numbers, strings, tuples, lists of those) is one entry."""

from __future__ import annotations

from typing import Any

import ember


def _terminal(value: Any) -> bool:
    if isinstance(value, dict):
        return False
    if not isinstance(value, list):
        return True
    return not any(isinstance(v, ember.Tensor) or not _terminal(v) for v in value)


def flatten(state_dict: dict) -> tuple[dict[str, Any], dict[str, tuple]]:
    """(flat key -> value, flat key -> path of keys and indices into the nested dict)."""
    flat: dict[str, Any] = {}
    paths: dict[str, tuple] = {}

    def visit(path: tuple, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                visit(path + (k,), v)
        elif not _terminal(value):
            for i, v in enumerate(value):
                visit(path + (i,), v)
        else:
            key = ".".join(str(p) for p in path)
            flat[key] = value
            paths[key] = path

    for k, v in state_dict.items():
        visit((k,), v)
    return flat, paths


def set_at(state_dict: dict, path: tuple, value: Any) -> None:
    """state_dict[path[0]][path[1]]... = value."""
    node: Any = state_dict
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


def is_dtensor(t: Any) -> bool:
    """A DTensor, told by its attributes: checking the class would import
    ember.distributed.tensor, which turns the dispatch hook on for the process."""
    return isinstance(t, ember.Tensor) and hasattr(t, "_local_tensor") and hasattr(t, "_spec")


def local_region(value: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Where this rank's piece of value lies in the whole tensor: (offsets, sizes). A DTensor
    shard starts after the pieces before it; anything else is the whole tensor."""
    if not is_dtensor(value):
        return (0,) * value.ndim, tuple(value.shape)
    from ember.distributed.tensor._dtensor import _local_region

    spec = value._spec
    offsets, _ = _local_region(spec.shape, spec.mesh, spec.placements)
    return tuple(offsets), tuple(value._local_tensor.shape)
