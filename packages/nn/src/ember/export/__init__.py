"""``torch.export``: capture a module ahead of time as an :class:`ExportedProgram` that runs
again through :meth:`ExportedProgram.module`, and save / load it.

Ember captures with :func:`ember.fx.symbolic_trace` (module calls and tensor operations, not a
decomposition into primitive ops), runs the capture once on the example inputs, and guards the
input shapes as torch does: a dimension not marked dynamic in ``dynamic_shapes`` must keep its
example size. A module that ``torch.fx`` cannot trace (Python control flow on sizes, unpacking
``x.size()``), which torch's non-strict export specializes to the example, is exported as a
copy of the module that runs eagerly under the same shape guards (its ``graph`` is None).

>>> import ember
>>> import ember.nn as nn
>>> m = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
>>> ep = ember.export.export(m, (ember.ones(4, 3),),
...                          dynamic_shapes={"input": {0: ember.export.Dim("batch")}})
>>> tuple(ep.module()(ember.ones(7, 3)).shape)
(7, 2)
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import inspect
import os
from typing import IO, Any, Mapping

import ember
from ember.fx import GraphModule, symbolic_trace

__all__ = ["Dim", "ExportGraphSignature", "ExportedProgram", "dims", "export", "load", "save"]


class _DimHint(enum.Enum):
    AUTO = "AUTO"
    STATIC = "STATIC"
    DYNAMIC = "DYNAMIC"

    def __repr__(self) -> str:
        return f"DimHint({self.value})"

    __str__ = __repr__


class Dim:
    """A named dynamic dimension with an optional ``[min, max]`` range, for ``dynamic_shapes``.
    ``Dim.AUTO`` / ``Dim.DYNAMIC`` mark a dimension dynamic without a name, ``Dim.STATIC``
    keeps it at its example size."""

    AUTO = _DimHint.AUTO
    STATIC = _DimHint.STATIC
    DYNAMIC = _DimHint.DYNAMIC

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None) -> None:
        if min is not None and max is not None and max < min:
            raise ValueError(f"Cannot create Dim with inconsistent min={min}, max={max}")
        self.__name__ = name
        self.min = 0 if min is None else int(min)
        self.max = max

    def __repr__(self) -> str:
        bounds = f", min={self.min}" + ("" if self.max is None else f", max={self.max}")
        return f"Dim({self.__name__!r}{bounds})"


def dims(*names: str, min: int | None = None, max: int | None = None) -> tuple[Dim, ...]:
    """One :class:`Dim` per name, sharing the range."""
    return tuple(Dim(n, min=min, max=max) for n in names)


class InputKind(enum.Enum):
    USER_INPUT = enum.auto()
    PARAMETER = enum.auto()
    BUFFER = enum.auto()


@dataclasses.dataclass
class InputSpec:
    kind: InputKind
    target: str


@dataclasses.dataclass
class ExportGraphSignature:
    """Which graph inputs are the user's and which are the module's parameters / buffers."""

    input_specs: list[InputSpec]
    user_outputs: tuple[str, ...]

    @property
    def user_inputs(self) -> tuple[str, ...]:
        return tuple(s.target for s in self.input_specs if s.kind is InputKind.USER_INPUT)

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(s.target for s in self.input_specs if s.kind is InputKind.PARAMETER)

    @property
    def buffers(self) -> tuple[str, ...]:
        return tuple(s.target for s in self.input_specs if s.kind is InputKind.BUFFER)


def _unsupported(name: str, *args: Any, **kwargs: Any) -> None:
    raise NotImplementedError(f"Calling {name}() is not supported yet.")


class _ShapeGuard:
    """A forward pre-hook checking the inputs against the exported shapes (a module-level
    class, so that the module still pickles)."""

    def __init__(self, specs: list[tuple[str, tuple[int, ...], frozenset[int]]]) -> None:
        self.specs = specs

    def __call__(self, module: Any, args: tuple[Any, ...]) -> None:
        for (name, shape, dynamic), a in zip(self.specs, args):
            if not isinstance(a, ember.Tensor):
                continue
            if a.dim() != len(shape):
                raise AssertionError(f"Guard failed: {name}.dim() == {len(shape)}")
            for d, size in enumerate(shape):
                if d not in dynamic and a.shape[d] != size:
                    raise AssertionError(f"Guard failed: {name}.size()[{d}] == {size}")


class ExportedProgram:
    """A captured module: :meth:`module` gives a runnable module, :attr:`state_dict` its
    parameters and buffers, :attr:`graph_signature` the roles of the graph's inputs."""

    def __init__(self, graph_module: GraphModule, signature: ExportGraphSignature,
                 guards: list[tuple[str, tuple[int, ...], frozenset[int]]],
                 range_constraints: dict[str, tuple[int, int | None]],
                 example_inputs: tuple[tuple[Any, ...], dict[str, Any]]) -> None:
        self.graph_module = graph_module
        self.graph_signature = signature
        self._guards = guards
        self.range_constraints = range_constraints
        self.example_inputs = example_inputs

    @property
    def graph(self) -> Any:
        return getattr(self.graph_module, "graph", None)  # None for an eager (untraceable) capture

    @property
    def state_dict(self) -> dict[str, Any]:
        return dict(self.graph_module.state_dict(keep_vars=True))

    def parameters(self) -> Any:
        return self.graph_module.parameters()

    def named_parameters(self) -> Any:
        return self.graph_module.named_parameters()

    def buffers(self) -> Any:
        return self.graph_module.buffers()

    def named_buffers(self) -> Any:
        return self.graph_module.named_buffers()

    def module(self) -> GraphModule:
        """A module running the captured graph, sharing this program's parameters. Its mode
        is the one captured: ``train()`` / ``eval()`` raise, as in torch."""
        if isinstance(self.graph_module, GraphModule):
            gm = GraphModule(self.graph_module, self.graph_module.graph, type(self.graph_module).__name__)
        else:
            gm = _eager_copy(self.graph_module)
        gm.register_forward_pre_hook(_ShapeGuard(self._guards))
        gm.train = functools.partial(_unsupported, "train")
        gm.eval = functools.partial(_unsupported, "eval")
        return gm

    def run_decompositions(self, decomp_table: Mapping[Any, Any] | None = None, **kwargs: Any) -> ExportedProgram:
        """A new program over the same graph: ember's graphs hold no decomposable aten-level
        ops, so there is nothing to decompose."""
        return ExportedProgram(self.graph_module, self.graph_signature, self._guards,
                               dict(self.range_constraints), self.example_inputs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Unable to call ExportedProgram directly. You should use `exported_program.module()` instead.")

    def __str__(self) -> str:
        code = getattr(self.graph_module, "code", f"<eager {type(self.graph_module).__name__}>")
        code = code.strip().replace("\n", "\n    ")
        return f"ExportedProgram:\n    {code}\n\nGraph signature: {self.graph_signature}\n"


def _eager_copy(mod: ember.nn.Module) -> ember.nn.Module:
    """A shallow copy of ``mod`` sharing its parameters and submodules, with hook tables of its
    own (the shape guard added to the copy leaves ``mod`` alone)."""
    m = copy.copy(mod)
    state = vars(m)
    for k, v in list(state.items()):
        if k.startswith("_forward") and isinstance(v, dict):
            state[k] = type(v)(v)
    return m


def _dynamic_dims(spec: Any, name: str, ranges: dict[str, tuple[int, int | None]]) -> frozenset[int]:
    if spec is None:
        return frozenset()
    if isinstance(spec, Mapping):
        items = spec.items()
    elif isinstance(spec, (list, tuple)):
        items = enumerate(spec)
    else:
        raise ValueError(f"dynamic_shapes for {name!r} must be a dict or a list / tuple of dims, got {type(spec).__name__}")
    out = set()
    for d, dim in items:
        if dim is None or dim is Dim.STATIC:
            continue
        if isinstance(dim, Dim):
            ranges[dim.__name__] = (dim.min, dim.max)
        elif dim not in (Dim.AUTO, Dim.DYNAMIC):
            raise ValueError(f"dynamic_shapes for {name!r} dim {d}: expected a Dim, got {dim!r}")
        out.add(int(d))
    return frozenset(out)


def export(mod: ember.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None, *,
           dynamic_shapes: dict[str, Any] | tuple[Any, ...] | list[Any] | None = None, strict: bool = False,
           preserve_module_call_signature: tuple[str, ...] = (), **unused: Any) -> ExportedProgram:
    """Captures ``mod`` called on the example ``args`` / ``kwargs`` as an
    :class:`ExportedProgram`. ``dynamic_shapes`` maps each forward argument (by name, or by
    position as a tuple) to ``{dim: Dim(...)}``; every other dimension is fixed to its example
    size by a shape guard on :meth:`ExportedProgram.module`."""
    if not isinstance(mod, ember.nn.Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got {type(mod)}.")
    if not isinstance(args, tuple):
        raise ValueError(f"Expecting `args` to be a tuple of example positional inputs, got {type(args)}")
    kwargs = dict(kwargs or {})
    params = inspect.signature(mod.forward).parameters
    try:
        gm: Any = symbolic_trace(mod)
        names = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
    except Exception:  # noqa: BLE001 - untraceable Python: torch specializes it, ember runs it eagerly
        gm = _eager_copy(mod)
        names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    ranges: dict[str, tuple[int, int | None]] = {}
    if isinstance(dynamic_shapes, Mapping):
        unknown = set(dynamic_shapes) - set(params)
        if unknown:
            raise ValueError(f"dynamic_shapes names {sorted(unknown)} are not arguments of {type(mod).__name__}.forward "
                             f"(expected some of {list(params)})")
        by_name = dict(dynamic_shapes)
    elif dynamic_shapes is not None:
        by_name = dict(zip(names, dynamic_shapes))
    else:
        by_name = {}
    guards = []
    for name in names:
        a = bound.get(name)
        if isinstance(a, ember.Tensor):
            guards.append((name, tuple(a.shape), _dynamic_dims(by_name.get(name), name, ranges)))
    out = gm(*args, **kwargs)  # the capture must run on its own examples
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if isinstance(gm, GraphModule):
        output_node = next(n for n in gm.graph.nodes if n.op == "output")
        out_names = output_node.args[0] if isinstance(output_node.args[0], (tuple, list)) else (output_node.args[0],)
        user_outputs = tuple(getattr(n, "name", str(n)) for n in out_names)[:len(outs)]
    else:
        user_outputs = tuple(f"output_{i}" for i in range(len(outs))) if len(outs) > 1 else ("output",)
    specs = [InputSpec(InputKind.PARAMETER, n) for n, _ in gm.named_parameters()]
    specs += [InputSpec(InputKind.BUFFER, n) for n, _ in gm.named_buffers()]
    specs += [InputSpec(InputKind.USER_INPUT, n) for n in names]
    return ExportedProgram(gm, ExportGraphSignature(specs, user_outputs), guards, ranges, (tuple(args), kwargs))


def save(ep: ExportedProgram, f: str | os.PathLike[str] | IO[bytes], *, extra_files: dict[str, Any] | None = None,
         opset_version: dict[str, int] | None = None, pickle_protocol: int = 2) -> None:
    """Writes ``ep`` to a path or binary file (ember's own format, read by :func:`load`)."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"The 'ep' parameter must be an instance of 'ExportedProgram', got '{type(ep).__name__}' instead.")
    ember.save({"ember.export": ep, "extra_files": dict(extra_files or {})}, f, pickle_protocol=pickle_protocol)


def load(f: str | os.PathLike[str] | IO[bytes], *, extra_files: dict[str, Any] | None = None,
         expected_opset_version: dict[str, int] | None = None) -> ExportedProgram:
    """Reads a program written by :func:`save` (``extra_files`` is filled with the saved
    extra files of the same names)."""
    obj = ember.load(f, weights_only=False)
    if not isinstance(obj, dict) or "ember.export" not in obj:
        raise RuntimeError("ember.export.load: not a file written by ember.export.save")
    if extra_files is not None:
        for k in extra_files:
            extra_files[k] = obj["extra_files"].get(k, "")
    return obj["ember.export"]
