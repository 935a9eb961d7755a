"""Parse operator schemas from ember-core's YAML declarations.

A schema reads like PyTorch's native_functions.yaml:

    add(Tensor self, Tensor|Scalar other, *, Scalar alpha=1, Tensor? out=None) -> Tensor

Each argument has a type (see ``TYPES``), a name and an optional Python default; ``*``
starts the keyword-only arguments. The return is ``Tensor``, ``bool``, ``int``, ``float``,
``Scalar``, ``Tensor[]``, ``()`` or a named tuple ``(Tensor values, Tensor indices)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# schema type -> (C++ parameter type of the kernel, C++ type pybind11 receives, Python type)
TYPES: dict[str, tuple[str, str, str]] = {
    "Tensor": ("const Tensor&", "const Tensor&", "Tensor"),
    "Tensor?": ("const Tensor&", "std::optional<Tensor>", "Tensor | None"),
    "Tensor|Scalar": ("const TensorOrScalar&", "const TensorOrScalar&", "Tensor | Number"),
    "Tensor|Scalar?": ("const TensorOrScalar&", "std::optional<TensorOrScalar>", "Tensor | Number | None"),
    "Tensor[]": ("const std::vector<Tensor>&", "const std::vector<Tensor>&", "Sequence[Tensor]"),
    "Tensor?[]": ("const std::vector<Tensor>&", "const std::vector<std::optional<Tensor>>&",
                  "Sequence[Tensor | None]"),
    "Scalar": ("const Scalar&", "const Scalar&", "Number"),
    "Scalar?": ("const std::optional<Scalar>&", "std::optional<Scalar>", "Number | None"),
    "int": ("int64_t", "int64_t", "int"),
    "int?": ("std::optional<int64_t>", "std::optional<int64_t>", "int | None"),
    "int[]": ("const DimVector&", "const DimVector&", "Sequence[int]"),
    "int[]?": ("const std::optional<DimVector>&", "std::optional<DimVector>", "Sequence[int] | None"),
    "int[]...": ("const DimVector&", "py::args", "int"),
    "float": ("double", "double", "float"),
    "float?": ("std::optional<double>", "std::optional<double>", "float | None"),
    "bool": ("bool", "bool", "bool"),
    "bool?": ("std::optional<bool>", "std::optional<bool>", "bool | None"),
    "str": ("const std::string&", "const std::string&", "str"),
    "str?": ("const std::optional<std::string>&", "std::optional<std::string>", "str | None"),
    "ScalarType": ("ScalarType", "ScalarType", "dtype"),
    "ScalarType?": ("std::optional<ScalarType>", "std::optional<ScalarType>", "dtype | None"),
    "Device?": ("std::optional<Device>", "std::optional<Device>", "device | str | None"),
    "Generator?": ("Generator*", "Generator*", "Generator | None"),
}

RETURNS: dict[str, tuple[str, str]] = {
    "Tensor": ("Tensor", "Tensor"),
    "Tensor[]": ("std::vector<Tensor>", "tuple[Tensor, ...]"),
    "bool": ("bool", "bool"),
    "int": ("int64_t", "int"),
    "float": ("double", "float"),
    "Scalar": ("Scalar", "Number"),
    "()": ("void", "None"),
}


@dataclass
class Arg:
    type: str
    name: str
    default: str | None
    kwonly: bool

    @property
    def cpp_type(self) -> str:
        return TYPES[self.type][0]

    @property
    def bind_type(self) -> str:
        return TYPES[self.type][1]

    @property
    def py_type(self) -> str:
        return TYPES[self.type][2]


@dataclass
class Op:
    name: str
    args: list[Arg]
    returns: list[tuple[str, str]]  # (type, name); a single unnamed Tensor is [("Tensor", "")]
    variants: list[str]
    dispatch: dict[str, str]
    inplace: bool = False
    out: bool = False
    # `out: exact` in the YAML: the out= tensor must have the result's dtype (as torch's matmul,
    # argmax, amax, ...); `out: true` takes any dtype the result can be cast to.
    out_exact: bool = False
    # `out: logical`: the out= tensor must be bool or uint8, whatever the result's dtype (torch's
    # all / any).
    out_logical: bool = False
    doc: str = ""
    source: str = ""
    tags: list[str] = field(default_factory=list)
    release_gil: bool = False
    schema: str = ""
    # Derivative formulas (C++ expressions, see csrc/autograd/formulas.h) per input name, and
    # how autograd treats an op without formulas: "error" (backward raises), "composite" (the
    # op is written with other ops, which record themselves), "none" (never differentiable).
    derivatives: dict = field(default_factory=dict)
    # Formulas that give several inputs' gradients at once (a YAML key "input, weight, bias", as
    # PyTorch writes them): (the inputs, the expression), which returns a std::tuple in that
    # order and may read `grad_input_mask` (which of them are needed). `derivatives` maps each
    # of those inputs to the shared expression too.
    derivative_groups: list = field(default_factory=list)
    # Outputs whose missing gradients backward fills with zeros (None: all of them); the
    # formulas see the others' as undefined tensors (a norm's statistics, rarely used, so a
    # plain backward launches no zero fill for them).
    materialize: list | None = None
    autograd: str = "error"
    # Whether the derivative formulas hold for complex tensors (conjugate Wirtinger calculus, as
    # PyTorch): other ops refuse to record history through a complex tensor, except linear ops
    # (tangent "linear": real-coefficient shape and reduction maps, whose formulas hold as is).
    complex_autograd: bool = False
    # autograd "manual": the autograd-layer function (same signature as the op, declared in a
    # csrc/autograd header) that ops::<name> calls instead of dispatch::<name>; it runs the op
    # through dispatch:: and records the history by hand, so the composite itself stays below
    # the autograd layer (as_strided, as_strided_, view(dtype)).
    autograd_fn: str = ""
    # Forward-mode AD (tangent of the first output): "elementwise" (each input's derivative
    # formula with its tangent in place of `grad`, summed), "linear" (the op applied to the
    # tangents), a C++ expression over `<input>_t`, the inputs and `result`, or None (an input
    # with a tangent raises NotImplementedError).
    tangent: str | None = None
    # Trailing outputs of a tuple return that get no history (a workspace the backward reads):
    # they never require grad, and backward sees no gradient slot for them.
    nondiff_outputs: list[str] = field(default_factory=list)
    # How the op runs on the meta device (tensors without data) when it has a CPU kernel:
    # "fallback" (default: the CPU kernel runs on zero-filled stand-ins that take no memory until
    # written, and the results' sizes, strides and dtype are carried back), "cpu" (the CPU kernel
    # itself is meta-safe: it touches data only through TensorIterator loops, which meta skips),
    # "inplace" (an in-place op that changes no metadata: meta returns self) or
    # "data_dependent" (the result depends on values: meta raises NotImplementedError), or
    # "meta::<fn>", a meta kernel of its own (csrc/kernels/meta/meta_kernels.cpp).
    meta: str = "fallback"
    # Ops that take tensors on different devices on purpose (copies between devices).
    mixed_devices: bool = False
    # The name the grad_fn node reports (`grad_fn.name()`, `type(grad_fn).__name__`): PyTorch's
    # for the same call, which names a node after the overload or the op the call lowers to
    # (max() is MaxBackward1, narrow SliceBackward0). Either a name, or a C++ expression over
    # the op's arguments (and `result`, its first output) giving one (a `const char*`), for an
    # overload whose PyTorch node depends on the call (sum(dim) is SumBackward1, sum()
    # SumBackward0; matmul is MmBackward0, MvBackward0, ... by the operands' dims). Empty:
    # <Op>Backward<n>, n counting the YAML entries of that name.
    node_name: str = ""
    # An `int[]?` argument whose Python form picks PyTorch's overload, and so the node's name:
    # given as a sequence or an explicit None, the binding marks the call (autograd::
    # dims_overload(), read by node_name) as the `dim_IntList`/`dims` overload.
    dims_overload: str = ""
    # Arguments whose binding also takes None for their default (PyTorch's `bool? stable` of
    # sort, where the kernel takes a plain bool).
    none_means_default: list[str] = field(default_factory=list)
    # Per reported node name, the saved values that node lists (PyTorch's overloads save
    # different things: SumBackward0 only the input's sizes, SumBackward1 dim and keepdim too).
    saved_by_name: dict = field(default_factory=dict)

    @property
    def node_name_is_expr(self) -> bool:
        return bool(self.node_name) and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", self.node_name) is None

    @property
    def native_out(self) -> bool:
        return any(a.name == "out" for a in self.args)

    @property
    def tuple_return(self) -> bool:
        return len(self.returns) > 1

    @property
    def cpp_return(self) -> str:
        if self.tuple_return:
            return "std::tuple<" + ", ".join(RETURNS[t][0] for t, _ in self.returns) + ">"
        return RETURNS[self.returns[0][0]][0]

    @property
    def py_return(self) -> str:
        if self.tuple_return:
            return "tuple[" + ", ".join(RETURNS[t][1] for t, _ in self.returns) + "]"
        return RETURNS[self.returns[0][0]][1]

    @property
    def overload_id(self) -> str:
        """A C++-identifier-safe name unique per overload."""
        return self.name + "__" + "_".join(re.sub(r"\W", "", a.type) for a in self.args)


_SCHEMA = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\((.*)\)\s*->\s*(.+?)\s*$")


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_schema(schema: str) -> tuple[str, list[Arg], list[tuple[str, str]]]:
    m = _SCHEMA.match(schema)
    if not m:
        raise ValueError(f"bad schema: {schema!r}")
    name, argstr, ret = m.groups()
    args: list[Arg] = []
    kwonly = False
    for part in _split_top(argstr):
        if part == "*":
            kwonly = True
            continue
        decl, _, default = part.partition("=")
        typ, _, aname = decl.strip().rpartition(" ")
        if typ not in TYPES:
            raise ValueError(f"{name}: unknown type {typ!r} in {schema!r}")
        args.append(Arg(typ, aname, default.strip() if default else None, kwonly))
    ret = ret.strip()
    if ret.startswith("(") and ret != "()":
        rets = []
        for part in _split_top(ret[1:-1]):
            t, _, n = part.rpartition(" ")
            rets.append((t, n))
    else:
        rets = [(ret, "")]
    for t, _ in rets:
        if t not in RETURNS:
            raise ValueError(f"{name}: unknown return type {t!r}")
    return name, args, rets


def _per_input(formulas: dict) -> dict:
    """The YAML derivatives keyed by input name: a key naming several inputs ("input, weight")
    gives each of them its shared formula."""
    out = {}
    for k, v in formulas.items():
        for n in k.split(","):
            out[n.strip()] = v
    return out


def load_ops(yaml_dir: Path) -> dict[str, list[Op]]:
    """All ops, grouped by the YAML file (stem) that declares them."""
    groups: dict[str, list[Op]] = {}
    for path in sorted(Path(yaml_dir).glob("*.yaml")):
        entries = yaml.safe_load(path.read_text()) or []
        ops = []
        for e in entries:
            name, args, rets = parse_schema(e["func"])
            variants = e.get("variants", ["function"])
            if isinstance(variants, str):
                variants = [v.strip() for v in variants.split(",")]
            ops.append(
                Op(
                    name=name,
                    args=args,
                    returns=rets,
                    variants=variants,
                    dispatch=e.get("dispatch", {}),
                    inplace=bool(e.get("inplace", False)),
                    out=bool(e.get("out", False)),
                    out_exact=e.get("out") == "exact",
                    out_logical=e.get("out") == "logical",
                    doc=(e.get("doc") or "").strip(),
                    source=path.name,
                    tags=list(e.get("tags", [])),
                    release_gil=bool(e.get("release_gil", False)),
                    schema=e["func"],
                    derivatives=_per_input(e.get("derivatives", {}) or {}),
                    derivative_groups=[([n.strip() for n in k.split(",")], v)
                                       for k, v in (e.get("derivatives", {}) or {}).items()
                                       if "," in k],
                    materialize=e.get("materialize"),
                    autograd=e.get("autograd", "error"),
                    complex_autograd=bool(e.get("complex_autograd", False)),
                    autograd_fn=e.get("autograd_fn", ""),
                    tangent=e.get("tangent"),
                    nondiff_outputs=list(e.get("nondiff_outputs", [])),
                    meta=e.get("meta", "fallback"),
                    mixed_devices=bool(e.get("mixed_devices", False)),
                    node_name=str(e.get("node_name", "")).strip(),
                    dims_overload=str(e.get("dims_overload", "")),
                    none_means_default=list(e.get("none_means_default", []) or []),
                    saved_by_name=dict(e.get("saved_by_name", {}) or {}),
                )
            )
            mat = ops[-1].materialize
            if mat is not None and not set(mat) <= {n for _, n in rets}:
                raise ValueError(f"{path.name}: {name}: materialize names unknown outputs {mat}")
            nd = ops[-1].nondiff_outputs
            if nd and [n for _, n in rets[-len(nd):]] != nd:
                raise ValueError(f"{path.name}: {name}: nondiff_outputs must name trailing outputs")
            if ops[-1].meta not in ("fallback", "cpu", "inplace", "data_dependent") and \
                    not ops[-1].meta.startswith("meta::"):
                raise ValueError(f"{path.name}: {name}: unknown meta mode {ops[-1].meta!r}")
            if ops[-1].autograd not in ("error", "composite", "none", "manual"):
                raise ValueError(f"{path.name}: {name}: unknown autograd mode {ops[-1].autograd!r}")
            if (ops[-1].autograd == "manual") != bool(ops[-1].autograd_fn):
                raise ValueError(f"{path.name}: {name}: `autograd: manual` goes with `autograd_fn`")
            if e.get("out") not in (None, True, False, "exact", "logical"):
                raise ValueError(f"{path.name}: {name}: out must be true, exact or logical")
            if ops[-1].dims_overload and not any(a.name == ops[-1].dims_overload and a.type == "int[]?"
                                                 for a in args):
                raise ValueError(f"{path.name}: {name}: dims_overload must name an int[]? argument")
            if not ops[-1].dispatch:
                raise ValueError(f"{path.name}: {name} has no dispatch entry")
        groups[path.stem] = ops
    return groups
