"""How a module is split for tensor parallelism: its parameters become DTensors laid out on
the mesh, hooks turn its plain-tensor inputs into DTensors of the layout the rule wants and
its DTensor outputs into the requested layout (and back to plain tensors)."""

from __future__ import annotations

from typing import Any

import ember
from ember import nn

from .._dtensor import DTensor, distribute_tensor
from ..placement_types import Placement, Replicate, Shard

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "RowwiseParallel"]


class ParallelStyle:
    """Base of the styles; ``_apply(module, mesh)`` parallelizes one module."""

    src_data_rank: int | None = 0

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        raise NotImplementedError


def _to_dtensor(x: Any, mesh: Any, given: Placement, wanted: Placement) -> Any:
    if isinstance(x, ember.Tensor) and not isinstance(x, DTensor):
        x = DTensor.from_local(x, mesh, [given], run_check=False)
    if isinstance(x, DTensor) and x.placements != (wanted,):
        x = x.redistribute(mesh, [wanted])
    return x


def _shard_params(module: nn.Module, mesh: Any, placements: dict[str, Placement],
                  src_data_rank: int | None) -> None:
    for name, placement in placements.items():
        p = module._parameters.get(name)
        if p is None or isinstance(p, DTensor):
            continue
        d = distribute_tensor(p.detach(), mesh, [placement], src_data_rank=src_data_rank)
        module._parameters[name] = nn.Parameter(d, requires_grad=p.requires_grad)


class _InOut(ParallelStyle):
    def __init__(self, input_layouts: Placement | None, output_layouts: Placement | None,
                 use_local_output: bool, default_in: Placement, default_out: Placement) -> None:
        self.input_layouts = (input_layouts or default_in,)
        self.output_layouts = (output_layouts or default_out,)
        self.use_local_output = use_local_output

    def _wanted_input(self, module: nn.Module) -> Placement:
        raise NotImplementedError

    def _params(self, module: nn.Module) -> dict[str, Placement]:
        raise NotImplementedError

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        if not isinstance(module, (nn.Linear, nn.Embedding)):
            raise NotImplementedError(f"{type(self).__name__} supports nn.Linear and "
                                      f"nn.Embedding, got {type(module).__name__}")
        _shard_params(module, device_mesh, self._params(module), self.src_data_rank)
        given, wanted = self.input_layouts[0], self._wanted_input(module)
        out_layout, local = self.output_layouts[0], self.use_local_output

        def pre(mod: nn.Module, args: tuple) -> tuple:
            return tuple(_to_dtensor(a, device_mesh, given, wanted) if i == 0 else a
                         for i, a in enumerate(args))

        def post(mod: nn.Module, args: tuple, out: Any) -> Any:
            if isinstance(out, DTensor):
                out = out.redistribute(device_mesh, [out_layout])
                return out.to_local() if local else out
            return out

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module


class ColwiseParallel(_InOut):
    """Linear: output features split over the ranks (weight and bias Shard(0)); Embedding:
    the embedding dimension split (Shard(1)). Input Replicate, output Shard(-1)."""

    def __init__(self, *, input_layouts: Placement | None = None,
                 output_layouts: Placement | None = None, use_local_output: bool = True) -> None:
        super().__init__(input_layouts, output_layouts, use_local_output, Replicate(), Shard(-1))

    def _wanted_input(self, module: nn.Module) -> Placement:
        return Replicate()

    def _params(self, module: nn.Module) -> dict[str, Placement]:
        if isinstance(module, nn.Embedding):
            return {"weight": Shard(1)}
        return {"weight": Shard(0), "bias": Shard(0)}


class RowwiseParallel(_InOut):
    """Linear: input features split (weight Shard(1), bias Replicate), the partial outputs
    summed; Embedding: the vocabulary split (Shard(0)). Input Shard(-1) (Replicate for an
    embedding), output Replicate."""

    def __init__(self, *, input_layouts: Placement | None = None,
                 output_layouts: Placement | None = None, use_local_output: bool = True) -> None:
        super().__init__(input_layouts, output_layouts, use_local_output, Shard(-1), Replicate())

    def _wanted_input(self, module: nn.Module) -> Placement:
        return Replicate() if isinstance(module, nn.Embedding) else Shard(-1)

    def _params(self, module: nn.Module) -> dict[str, Placement]:
        if isinstance(module, nn.Embedding):
            return {"weight": Shard(0)}
        return {"weight": Shard(1), "bias": Replicate()}


class PrepareModuleInput(ParallelStyle):
    """Lays out a module's positional inputs: input_layouts[i] says how the plain tensor i is
    laid out, desired_input_layouts[i] what the module gets (None leaves an input alone)."""

    def __init__(self, *, input_layouts: Any = None, desired_input_layouts: Any = None,
                 input_kwarg_layouts: dict | None = None,
                 desired_input_kwarg_layouts: dict | None = None,
                 use_local_output: bool = False) -> None:
        as_tuple = (lambda v: v if isinstance(v, tuple) else (v,))  # noqa: E731
        self.input_layouts = as_tuple(input_layouts)
        self.desired_input_layouts = as_tuple(desired_input_layouts)
        if len(self.input_layouts) != len(self.desired_input_layouts):
            raise ValueError("PrepareModuleInput: input_layouts and desired_input_layouts need "
                             "the same length")
        self.use_local_output = use_local_output

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        layouts = list(zip(self.input_layouts, self.desired_input_layouts))
        local = self.use_local_output

        def pre(mod: nn.Module, args: tuple) -> tuple:
            out = []
            for i, a in enumerate(args):
                if i < len(layouts) and layouts[i][0] is not None:
                    a = _to_dtensor(a, device_mesh, layouts[i][0], layouts[i][1])
                    if local:
                        a = a.to_local()
                out.append(a)
            return tuple(out)

        module.register_forward_pre_hook(pre)
        return module
