"""How a module is split for tensor parallelism: its parameters become DTensors laid out on
the mesh, hooks turn its plain-tensor inputs into DTensors of the layout the rule wants and
its DTensor outputs into the requested layout (and back to plain tensors)."""

from __future__ import annotations

from typing import Any

import ember
from ember import nn

from .._dtensor import DTensor, distribute_tensor
from ..placement_types import Placement, Replicate, Shard

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleInputOutput",
           "PrepareModuleOutput", "RowwiseParallel", "SequenceParallel"]


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


def _as_tuple(v: Any) -> tuple:
    return v if isinstance(v, tuple) else (v,)


def _lay_out(values: Any, layouts: list[tuple[Any, Any]], mesh: Any, local: bool) -> Any:
    """values[i] (one value, or a tuple of them) laid out as layouts[i] = (how it is, what is
    wanted); a None layout leaves the value alone."""
    single = not isinstance(values, tuple)
    out = []
    for i, v in enumerate((values,) if single else values):
        if i < len(layouts) and layouts[i][0] is not None:
            if not isinstance(v, ember.Tensor):
                raise ValueError(f"expected a tensor at position {i} to lay out as "
                                 f"{layouts[i][0]}, got {type(v).__name__}")
            v = _to_dtensor(v, mesh, layouts[i][0], layouts[i][1] or layouts[i][0])
            if local:
                v = v.to_local()
        out.append(v)
    return out[0] if single else tuple(out)


class PrepareModuleInput(ParallelStyle):
    """Lays out a module's inputs: input_layouts[i] says how the plain tensor i is laid out,
    desired_input_layouts[i] what the module gets (None leaves an input alone); the
    *_kwarg_layouts dicts do the same for keyword inputs."""

    def __init__(self, *, input_layouts: Any = None, desired_input_layouts: Any = None,
                 input_kwarg_layouts: dict | None = None,
                 desired_input_kwarg_layouts: dict | None = None,
                 use_local_output: bool = False) -> None:
        self.input_layouts = _as_tuple(input_layouts)
        self.desired_input_layouts = _as_tuple(desired_input_layouts)
        if len(self.input_layouts) != len(self.desired_input_layouts):
            raise ValueError("PrepareModuleInput: input_layouts and desired_input_layouts need "
                             "the same length")
        self.input_kwarg_layouts = dict(input_kwarg_layouts or {})
        self.desired_input_kwarg_layouts = dict(desired_input_kwarg_layouts or {})
        if set(self.input_kwarg_layouts) != set(self.desired_input_kwarg_layouts):
            raise ValueError("PrepareModuleInput: input_kwarg_layouts and "
                             "desired_input_kwarg_layouts need the same keys")
        self.use_local_output = use_local_output

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        layouts = list(zip(self.input_layouts, self.desired_input_layouts))
        kw_layouts = {k: (v, self.desired_input_kwarg_layouts[k])
                      for k, v in self.input_kwarg_layouts.items()}
        local = self.use_local_output

        def pre(mod: nn.Module, args: tuple, kwargs: dict) -> tuple:
            args = _lay_out(tuple(args), layouts, device_mesh, local)
            for k, layout in kw_layouts.items():
                if kwargs.get(k) is not None:
                    kwargs[k] = _lay_out(kwargs[k], [layout], device_mesh, local)
            return args, kwargs

        module.register_forward_pre_hook(pre, with_kwargs=True)
        return module


class PrepareModuleOutput(ParallelStyle):
    """Lays out a module's outputs: output_layouts[i] says how output i is laid out (a plain
    tensor is this rank's piece), desired_output_layouts[i] what the caller gets."""

    def __init__(self, *, output_layouts: Any, desired_output_layouts: Any,
                 use_local_output: bool = True) -> None:
        self.output_layouts = _as_tuple(output_layouts)
        self.desired_output_layouts = _as_tuple(desired_output_layouts)
        if len(self.output_layouts) != len(self.desired_output_layouts):
            raise ValueError("PrepareModuleOutput: output_layouts and desired_output_layouts "
                             "need the same length")
        self.use_local_output = use_local_output

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        layouts = list(zip(self.output_layouts, self.desired_output_layouts))
        local = self.use_local_output
        module.register_forward_hook(
            lambda mod, args, out: _lay_out(out, layouts, device_mesh, local))
        return module


class PrepareModuleInputOutput(ParallelStyle):
    """PrepareModuleInput and PrepareModuleOutput on one module."""

    def __init__(self, *, input_layouts: Any = None, desired_input_layouts: Any = None,
                 input_kwarg_layouts: dict | None = None,
                 desired_input_kwarg_layouts: dict | None = None,
                 use_local_input: bool = False, output_layouts: Any,
                 desired_output_layouts: Any, use_local_output: bool = True) -> None:
        self.prepare_module_input = PrepareModuleInput(
            input_layouts=input_layouts, desired_input_layouts=desired_input_layouts,
            input_kwarg_layouts=input_kwarg_layouts,
            desired_input_kwarg_layouts=desired_input_kwarg_layouts,
            use_local_output=use_local_input)
        self.prepare_module_output = PrepareModuleOutput(
            output_layouts=output_layouts, desired_output_layouts=desired_output_layouts,
            use_local_output=use_local_output)

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        self.prepare_module_input._apply(module, device_mesh)
        return self.prepare_module_output._apply(module, device_mesh)


class SequenceParallel(ParallelStyle):
    """Norm / dropout layers on activations split along the sequence dim: the parameters
    replicated, the input taken as (or moved to) Shard(sequence_dim), the output a DTensor
    of that layout (its piece when use_local_output)."""

    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False) -> None:
        self.sequence_sharding = (Shard(sequence_dim),)
        self.use_local_output = use_local_output

    def _apply(self, module: nn.Module, device_mesh: Any) -> nn.Module:
        shard = self.sequence_sharding[0]
        _shard_params(module, device_mesh, {n: Replicate() for n, p in
                                            module._parameters.items() if p is not None},
                      self.src_data_rank)
        local = self.use_local_output

        def pre(mod: nn.Module, args: tuple) -> tuple:
            if not args or not isinstance(args[0], ember.Tensor):
                return args
            return (_to_dtensor(args[0], device_mesh, shard, shard), *args[1:])

        def post(mod: nn.Module, args: tuple, out: Any) -> Any:
            return out.to_local() if local and isinstance(out, DTensor) else out

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
        return module
