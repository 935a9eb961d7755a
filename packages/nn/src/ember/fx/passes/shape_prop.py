"""``torch.fx.passes.shape_prop``: run a GraphModule on example inputs and record each node's
tensor shape, dtype and strides in ``node.meta["tensor_meta"]``.

>>> import ember
>>> from ember.fx import symbolic_trace
>>> from ember.fx.passes.shape_prop import ShapeProp
>>> gm = symbolic_trace(lambda x: x.sum(dim=1))
>>> _ = ShapeProp(gm).propagate(ember.ones(2, 3))
>>> [tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes]
[(2, 3), (2,), (2,)]
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ember
from ember.fx.interpreter import Interpreter
from ember.fx.node import Node, map_aggregate
from ember.nn import Module

__all__ = ["ShapeProp", "TensorMetadata"]


class TensorMetadata(NamedTuple):
    """What ShapeProp records about a tensor value."""

    shape: Any
    dtype: Any
    requires_grad: bool
    stride: tuple
    memory_format: Any
    is_quantized: bool
    qparams: dict


def _memory_format(t: ember.Tensor) -> Any:
    for name in ("contiguous_format", "channels_last", "channels_last_3d"):
        fmt = getattr(ember, name, None)
        if fmt is None:
            continue
        try:
            if t.is_contiguous(memory_format=fmt):
                return fmt
        except (TypeError, RuntimeError, ValueError):
            continue
    return None


def _extract_tensor_metadata(t: ember.Tensor) -> TensorMetadata:
    return TensorMetadata(t.shape, t.dtype, t.requires_grad, tuple(t.stride()),
                          _memory_format(t), False, {})


class ShapeProp(Interpreter):
    """An Interpreter that stores, for every node whose value holds tensors,
    ``node.meta["tensor_meta"]`` (a :class:`TensorMetadata`, or the value's structure of
    them) and ``node.meta["type"]``."""

    def __init__(self, gm: Module, fake_mode: Any = None) -> None:
        super().__init__(gm)
        self.fake_mode = fake_mode

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        found = False

        def extract(obj: Any) -> Any:
            nonlocal found
            if isinstance(obj, ember.Tensor):
                found = True
                return _extract_tensor_metadata(obj)
            return obj

        meta = map_aggregate(result, extract)
        if found:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args: Any) -> Any:
        """Runs the module on ``args``, recording the metadata; returns its result."""
        return super().run(*args)
