"""FX graph mode post-training static quantization (``prepare_fx`` / ``convert_fx``), as
PyTorch's ``torch.ao.quantization.quantize_fx`` does it for models made of Linear / Conv layers,
ReLUs, additions and shape ops, on a graph from ``ember.fx.symbolic_trace``:

* ``prepare_fx`` fuses Linear/Conv (+ eval BatchNorm) + ReLU (module or ``F.relu``) and
  add + ReLU, then inserts observers (``activation_post_process_<n>`` modules): on the input
  of each quantized op whose producer is not quantized, and on each quantized op's output. Ops
  that keep their input's quantization (``nn.ReLU``, pooling, ``reshape`` / ``view``,
  ``torch.flatten``, ...) share their input's observer, as PyTorch's native backend config says.
* ``convert_fx`` turns the observers on float values into ``Quantize`` modules, swaps the
  observed layers for quantized ones (``ember.ao.nn.quantized``), replaces additions by
  quantized additions with their observed output parameters, and dequantizes where a float op
  (or the output) takes a quantized value. ``convert_to_reference_fx`` gives reference
  modules (float arithmetic with quantize-dequantized weights) instead.

Sigmoid / hardsigmoid / tanh on a quantized input run quantized with fixed output parameters;
``+ number`` / ``* number`` run as ``add_scalar`` / ``mul_scalar`` (sharing their input's
observer, as PyTorch). Other ops stay float between dequantize / quantize, as PyTorch leaves
ops its backend config does not list.

>>> import ember
>>> from ember.ao.quantization import get_default_qconfig_mapping
>>> from ember.ao.quantization.quantize_fx import convert_fx, prepare_fx
>>> m = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.ReLU()).eval()
>>> p = prepare_fx(m, get_default_qconfig_mapping("x86"), (ember.randn(2, 4),))
>>> _ = p(ember.randn(8, 4))
>>> q = convert_fx(p)
>>> type(q.get_submodule("0")).__name__, q(ember.randn(2, 4)).dtype
('LinearReLU', ember.float32)
"""

from __future__ import annotations

import copy
import operator
from typing import Any

import ember
import ember.nn.functional as F
from ember import nn
from ember.ao.nn import intrinsic as nni
from ember.ao.nn import quantized as nnq
from ember.ao.quantization.qconfig_mapping import QConfigMapping
from ember.ao.quantization.quantize import get_default_static_quant_module_mappings

__all__ = ["prepare_fx", "prepare_qat_fx", "convert_fx", "convert_to_reference_fx", "fuse_fx"]

_WEIGHTED = (nn.Linear, nn.Conv1d, nn.Conv2d)
_FUSED = {nn.Linear: nni.LinearReLU, nn.Conv1d: nni.ConvReLU1d, nn.Conv2d: nni.ConvReLU2d}
_QUANT_MODULES = (nn.Linear, nn.Conv1d, nn.Conv2d, nni.LinearReLU, nni.ConvReLU1d,
                  nni.ConvReLU2d)
_ADDS = (operator.add, ember.add)
# ops whose output keeps the input's quantization parameters (PyTorch's "share observer")
_SHARE_MODULES = (nn.ReLU, nn.ReLU6, nn.Hardtanh, nn.Identity, nn.MaxPool1d, nn.MaxPool2d,
                  nn.AdaptiveAvgPool2d, nn.AvgPool2d)
_SHARE_FUNCTIONS = (F.relu, F.relu6, F.hardtanh, F.max_pool1d, F.max_pool2d,
                    F.adaptive_avg_pool2d, F.avg_pool2d, ember.flatten, ember.transpose,
                    ember.squeeze, ember.unsqueeze)
_SHARE_METHODS = ("reshape", "view", "relu", "transpose", "permute", "squeeze", "unsqueeze",
                  "contiguous", "detach")
# ops with a fixed output range: quantized with fixed parameters (quint8: sigmoid and
# hardsigmoid 1/256 and 0, tanh 2/256 and 128), as PyTorch's fixed-qparams ops
_FIXED_MODULES = {nn.Sigmoid: (1 / 256, 0), nn.Hardsigmoid: (1 / 256, 0),
                  nn.Tanh: (2 / 256, 128)}
_FIXED_FUNCTIONS = {ember.sigmoid: (1 / 256, 0), F.sigmoid: (1 / 256, 0),
                    F.hardsigmoid: (1 / 256, 0), ember.tanh: (2 / 256, 128),
                    F.tanh: (2 / 256, 128)}
_FIXED_METHODS = {"sigmoid": (1 / 256, 0), "tanh": (2 / 256, 128)}
_MULS = (operator.mul, ember.mul)
_STATE = "_ember_fx_quant"


def _fixed_qparams(gm: nn.Module, node: Any) -> tuple[float, int] | None:
    if node.op == "call_module":
        return _FIXED_MODULES.get(type(_module(gm, node)))
    if node.op == "call_function":
        return _FIXED_FUNCTIONS.get(node.target)
    if node.op == "call_method":
        return _FIXED_METHODS.get(node.target)
    return None


def _scalar_op(node: Any) -> str | None:
    """"add" / "mul" for ``tensor + number`` / ``tensor * number`` (either order): quantized
    by moving the zero point or scaling the scale, as PyTorch's add_scalar / mul_scalar."""
    if node.op != "call_function" or len(node.args) != 2 or node.kwargs:
        return None
    kinds = [isinstance(a, ember.fx.Node) for a in node.args]
    if sorted(kinds) != [False, True] or not isinstance(node.args[kinds.index(False)],
                                                         (int, float)):
        return None
    if node.target in _ADDS:
        return "add"
    return "mul" if node.target in _MULS else None


def _module(gm: nn.Module, node: Any) -> nn.Module | None:
    return gm.get_submodule(node.target) if node.op == "call_module" else None


def _is_relu(gm: nn.Module, node: Any) -> bool:
    if node.op == "call_module":
        return type(_module(gm, node)) is nn.ReLU
    return node.op == "call_function" and node.target is F.relu


def _only_user(node: Any) -> Any:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _is_add(node: Any) -> bool:
    return (node.op == "call_function" and node.target in _ADDS and len(node.args) == 2
            and all(isinstance(a, ember.fx.Node) for a in node.args) and not node.kwargs)


def _is_share(gm: nn.Module, node: Any) -> bool:
    if node.op == "call_module":
        return type(_module(gm, node)) in _SHARE_MODULES
    if node.op == "call_function":
        return node.target in _SHARE_FUNCTIONS
    return node.op == "call_method" and node.target in _SHARE_METHODS


def _qconfig(mapping: QConfigMapping, gm: nn.Module, node: Any) -> Any:
    if node.op == "call_module":
        mod = _module(gm, node)
        inner = mod[0] if isinstance(mod, nni._FusedModule) else mod
        qconfig = mapping._qconfig_for(type(inner), node.target)
        if hasattr(mod, "weight_fake_quant"):  # a QAT module carries its own
            qconfig = mod.qconfig
    else:
        qconfig = mapping._qconfig_for(node.target, None)
    if qconfig is None:
        return None
    act = qconfig.activation()
    # a dynamic or weight-only qconfig (float activations) leaves the op float here
    return qconfig if getattr(act, "dtype", None) in (ember.quint8, ember.qint8) else None


def _tensor_arg(node: Any) -> Any:
    return next((a for a in node.args if isinstance(a, ember.fx.Node)), None)


def fuse_fx(model: nn.Module, fuse_custom_config: Any = None, backend_config: Any = None
            ) -> Any:
    """The traced ``model`` (a copy, eval mode) with Linear / Conv + (BatchNorm) + ReLU
    fused into ``ember.ao.nn.intrinsic`` modules."""
    gm = ember.fx.symbolic_trace(copy.deepcopy(model))
    _fuse(gm)
    return gm


def _fuse(gm: Any) -> None:
    from ember.nn.utils.fusion import fuse_conv_bn_eval

    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_module" or type(_module(gm, node)) not in _WEIGHTED:
            continue
        mod = _module(gm, node)
        nxt = _only_user(node)
        if (nxt is not None and nxt.op == "call_module" and isinstance(mod, nn.Conv2d)
                and type(_module(gm, nxt)) is nn.BatchNorm2d and not mod.training):
            gm.get_submodule(node.target)  # (exists)
            mod = fuse_conv_bn_eval(mod, _module(gm, nxt))
            _set_submodule(gm, node.target, mod)
            nxt.replace_all_uses_with(node)
            graph.erase_node(nxt)
            nxt = _only_user(node)
        if nxt is not None and _is_relu(gm, nxt) and nxt.args[0] is node:
            _set_submodule(gm, node.target, _FUSED[type(mod)](mod, nn.ReLU()))
            nxt.replace_all_uses_with(node)
            graph.erase_node(nxt)
    gm.recompile()


def _add_relu(gm: Any, node: Any) -> Any:
    """The ReLU that fuses with the addition ``node`` (its only user), or None: the pair is
    one quantized op, observed after the ReLU as PyTorch's add-relu pattern."""
    nxt = _only_user(node)
    if nxt is not None and _is_relu(gm, nxt) and nxt.args[0] is node:
        return nxt
    return None


def _set_submodule(gm: nn.Module, target: str, mod: nn.Module) -> None:
    *parents, last = target.split(".")
    owner = gm.get_submodule(".".join(parents)) if parents else gm
    setattr(owner, last, mod)


def prepare_fx(model: nn.Module, qconfig_mapping: Any, example_inputs: Any,
               prepare_custom_config: Any = None, _equalization_config: Any = None,
               backend_config: Any = None) -> Any:
    """A traced copy of the eval-mode ``model`` with fused modules and observers, ready to be
    calibrated (run on representative inputs) and given to :func:`convert_fx`.
    ``qconfig_mapping``: a :class:`QConfigMapping` (or its dict form); ``example_inputs``: a
    tuple of inputs (they describe the inputs; nothing runs before calibration)."""
    if model.training:
        raise AssertionError("prepare_fx: post-training static quantization needs the model in "
                             "eval mode (call model.eval()); use prepare_qat_fx for training")
    return _prepare("prepare_fx", model, qconfig_mapping, example_inputs, False)


def prepare_qat_fx(model: nn.Module, qconfig_mapping: Any, example_inputs: Any,
                   prepare_custom_config: Any = None, backend_config: Any = None) -> Any:
    """:func:`prepare_fx` for quantization-aware training: the training-mode ``model``
    traced, Linear / Conv (+ ReLU) swapped for their QAT modules (fake-quantized weights) and
    fake quantize modules (the QAT qconfig's activation) where the observers go; train it,
    then :func:`convert_fx` (after ``eval()``)."""
    if not model.training:
        raise AssertionError("prepare_qat_fx: quantization-aware training needs the model in "
                             "training mode (call model.train())")
    return _prepare("prepare_qat_fx", model, qconfig_mapping, example_inputs, True)


def _swap_to_qat(gm: Any, mapping: QConfigMapping) -> None:
    from ember.ao.quantization.quantize import get_default_qat_module_mappings

    qat = get_default_qat_module_mappings()
    for node in gm.graph.nodes:
        if node.op != "call_module" or type(_module(gm, node)) not in qat:
            continue
        mod = _module(gm, node)
        inner = mod[0] if isinstance(mod, nni._FusedModule) else mod
        qconfig = mapping._qconfig_for(type(inner), node.target)
        if qconfig is None:
            continue
        mod.qconfig = inner.qconfig = qconfig
        _set_submodule(gm, node.target, qat[type(mod)].from_float(mod))


def _prepare(op: str, model: nn.Module, qconfig_mapping: Any, example_inputs: Any,
             is_qat: bool) -> Any:
    if isinstance(qconfig_mapping, dict):
        qconfig_mapping = QConfigMapping.from_dict(qconfig_mapping)
    if not isinstance(qconfig_mapping, QConfigMapping):
        raise TypeError(f"{op}: qconfig_mapping must be a QConfigMapping, got "
                        f"{type(qconfig_mapping).__name__}")
    if not isinstance(example_inputs, tuple):
        raise TypeError(f"{op}: example_inputs must be a tuple of inputs, got "
                        f"{type(example_inputs).__name__}")
    gm = fuse_fx(model)
    if is_qat:
        _swap_to_qat(gm, qconfig_mapping)
    graph = gm.graph
    counter = [0]
    observers: set[str] = set()
    qconfigs: dict[str, Any] = {}

    def new_observer(after: Any, qconfig: Any, target: str | None = None) -> Any:
        if target is None:
            target = f"activation_post_process_{counter[0]}"
            counter[0] += 1
            gm.add_submodule(target, qconfig.activation())
            observers.add(target)
        with graph.inserting_after(after):
            obs = graph.call_module(target, (after,))
        after.replace_all_uses_with(obs)
        obs.args = (after,)
        return obs

    def observed(n: Any) -> bool:
        return isinstance(n, ember.fx.Node) and n.op == "call_module" and \
            n.target in observers

    fused_relus: set[Any] = set()
    for node in list(graph.nodes):
        if (node.op == "call_module" and node.target in observers) or node in fused_relus:
            continue
        quant = (node.op == "call_module" and isinstance(_module(gm, node), _QUANT_MODULES)) \
            or _is_add(node)
        qconfig = _qconfig(qconfig_mapping, gm, node) if quant else None
        if qconfig is not None:
            for arg in node.args:
                if isinstance(arg, ember.fx.Node) and not observed(arg):
                    new_observer(arg, qconfig)
            if node.op == "call_module":
                qconfigs[node.target] = qconfig
            relu = _add_relu(gm, node) if _is_add(node) else None
            new_observer(relu if relu is not None else node, qconfig)
            if relu is not None:
                fused_relus.add(relu)
        elif _is_share(gm, node) and node.args and isinstance(node.args[0], ember.fx.Node) \
                and observed(node.args[0]):
            new_observer(node, None, node.args[0].target)  # the same observer module
        elif (_fixed_qparams(gm, node) is not None or _scalar_op(node) is not None) and \
                node.args and observed(_tensor_arg(node)):
            fixed = _fixed_qparams(gm, node)
            if fixed is not None:  # its output's parameters are known
                from ember.ao.quantization.observer import FixedQParamsObserver

                target = f"activation_post_process_{counter[0]}"
                counter[0] += 1
                gm.add_submodule(target, FixedQParamsObserver(*fixed))
                observers.add(target)
            else:
                # a scalar op shares its input's observer, which so sees both ranges (as in
                # PyTorch); the quantized op derives its own parameters from the input's
                target = _tensor_arg(node).target
            new_observer(node, None, target)
    gm.recompile()
    # (example_inputs only describe the inputs: as in PyTorch, nothing runs before
    # calibration, so the observers see only the calibration data)
    setattr(gm, _STATE, {"observers": observers, "qconfigs": qconfigs})
    return gm


class _QuantizedAdd(nn.Module):
    """A quantized addition (optionally + ReLU) with its output's ``scale`` / ``zero_point``:
    what ``convert_fx`` puts in place of an observed ``+``."""

    def __init__(self, scale: float, zero_point: int, relu: bool) -> None:
        super().__init__()
        self.op = nnq.QFunctional()
        self.op.scale, self.op.zero_point = scale, zero_point
        self.relu = relu

    def forward(self, a: Any, b: Any) -> Any:
        return self.op.add_relu(a, b) if self.relu else self.op.add(a, b)

    def extra_repr(self) -> str:
        return f"scale={self.op.scale}, zero_point={self.op.zero_point}, relu={self.relu}"


class _QuantizedScalarOp(nn.Module):
    """``quantized + number`` / ``quantized * number`` (``QFunctional.add_scalar`` /
    ``mul_scalar``: the output's parameters follow from the input's)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.op = nnq.QFunctional()

    def forward(self, x: Any, scalar: float) -> Any:
        return self.op.add_scalar(x, scalar) if self.kind == "add" else \
            self.op.mul_scalar(x, scalar)

    def extra_repr(self) -> str:
        return self.kind


def _reference_module(mod: nn.Module, qconfig: Any) -> nn.Module:
    from ember.ao.nn.quantized import reference as nnqr

    inner = mod[0] if isinstance(mod, nni._FusedModule) else mod
    observer = qconfig.weight()
    observer(inner.weight)
    ref_cls = {nn.Linear: nnqr.Linear, nn.Conv1d: nnqr.Conv1d, nn.Conv2d: nnqr.Conv2d}
    ref = ref_cls[type(inner)].from_float(inner, nnqr.get_qparam_dict(observer))
    if isinstance(mod, nni._FusedModule):
        return nn.Sequential(ref, nn.ReLU())
    return ref


def convert_fx(graph_module: Any, convert_custom_config: Any = None,
               _remove_qconfig: bool = True, qconfig_mapping: Any = None,
               backend_config: Any = None, is_reference: bool = False) -> Any:
    """The quantized model for a calibrated :func:`prepare_fx` result (see the module
    docstring); float in, float out."""
    state = getattr(graph_module, _STATE, None)
    if state is None:
        raise RuntimeError("convert_fx: expected a model returned by prepare_fx (and "
                           "calibrated), got one without its observers' bookkeeping")
    gm = copy.deepcopy(graph_module)
    graph = gm.graph
    observers, qconfigs = state["observers"], state["qconfigs"]
    mapping = get_default_static_quant_module_mappings()
    quantized: set[Any] = set()
    dequantized: dict[Any, Any] = {}
    counter = [0]

    def is_observer(n: Any) -> bool:
        return n.op == "call_module" and n.target in observers

    def output_observer(n: Any) -> Any:
        return next((u for u in n.users if is_observer(u)), None)

    def float_of(arg: Any, before: Any) -> Any:
        if arg not in quantized:
            return arg
        if arg not in dequantized:
            with graph.inserting_before(before):
                dequantized[arg] = graph.call_method("dequantize", (arg,))
        return dequantized[arg]

    erased: set[Any] = set()
    for node in list(graph.nodes):
        if node in erased:
            continue
        if is_observer(node):
            src = node.args[0]
            if src in quantized:  # an output observer, or a shared one: the op quantizes
                node.replace_all_uses_with(src)
                graph.erase_node(node)
                continue
            scale, zero_point = gm.get_submodule(node.target).calculate_qparams()
            name = f"{node.target}_quantize_{counter[0]}"
            counter[0] += 1
            gm.add_submodule(name, nnq.Quantize(float(scale.reshape(-1)[0]),
                                                int(zero_point.reshape(-1)[0]),
                                                gm.get_submodule(node.target).dtype))
            with graph.inserting_before(node):
                q = graph.call_module(name, (src,))
            node.replace_all_uses_with(q)
            graph.erase_node(node)
            quantized.add(q)
            continue
        if node.op == "call_module" and node.target in qconfigs:
            mod, qconfig = gm.get_submodule(node.target), qconfigs[node.target]
            obs = output_observer(node)
            if is_reference:
                new = _reference_module(mod, qconfig)
                node.args = tuple(float_of(a, node) for a in node.args)
                _set_submodule(gm, node.target, new)
                # a reference graph quantizes and dequantizes around each op
                quantized.discard(node)
                _requantize_after(gm, graph, node, obs, quantized, counter, erased)
                continue
            mod.qconfig = qconfig
            if isinstance(mod, nni._FusedModule):
                mod[0].qconfig = qconfig
            mod.activation_post_process = gm.get_submodule(obs.target)
            _set_submodule(gm, node.target, mapping[type(mod)].from_float(mod))
            quantized.add(node)
            continue
        relu = _add_relu(gm, node) if _is_add(node) else None
        last = relu if relu is not None else node
        obs = output_observer(last) if _is_add(node) else None
        if obs is not None and all(a in quantized for a in node.args):
            scale, zero_point = gm.get_submodule(obs.target).calculate_qparams()
            if is_reference:
                node.args = tuple(float_of(a, node) for a in node.args)
                _requantize_after(gm, graph, last, obs, quantized, counter, erased)
                if relu is not None:
                    erased.add(relu)  # (stays: float relu of the float sum)
                continue
            name = f"{node.name}_quantized_add"
            gm.add_submodule(name, _QuantizedAdd(float(scale.reshape(-1)[0]),
                                                 int(zero_point.reshape(-1)[0]),
                                                 relu is not None))
            with graph.inserting_before(node):
                new = graph.call_module(name, node.args)
            last.replace_all_uses_with(new)
            if relu is not None:
                graph.erase_node(relu)
                erased.add(relu)
            graph.erase_node(node)
            quantized.add(new)
            continue
        if _is_share(gm, node) and node.args and node.args[0] in quantized:
            quantized.add(node)  # runs on the quantized tensor, keeping its parameters
            continue
        if _fixed_qparams(gm, node) is not None and _tensor_arg(node) in quantized \
                and not is_reference:
            quantized.add(node)  # the quantized op's own fixed output parameters
            continue
        kind = _scalar_op(node)
        if kind is not None and _tensor_arg(node) in quantized and not is_reference:
            name = f"{node.name}_quantized_{kind}_scalar"
            gm.add_submodule(name, _QuantizedScalarOp(kind))
            scalar = next(a for a in node.args if not isinstance(a, ember.fx.Node))
            with graph.inserting_before(node):
                new = graph.call_module(name, (_tensor_arg(node), scalar))
            node.replace_all_uses_with(new)
            graph.erase_node(node)
            quantized.add(new)
            continue
        if node.op in ("call_module", "call_function", "call_method", "output"):
            node.args = ember.fx.node.map_arg(node.args, lambda a, n=node: float_of(a, n))
            node.kwargs = ember.fx.node.map_arg(node.kwargs, lambda a, n=node: float_of(a, n))
    for target in observers:
        if hasattr(gm, target):
            delattr(gm, target)
    graph.eliminate_dead_code()
    gm.recompile()
    if hasattr(gm, _STATE):
        delattr(gm, _STATE)
    return gm


def _requantize_after(gm: Any, graph: Any, node: Any, obs: Any, quantized: set,
                      counter: list, erased: set) -> None:
    """Reference graphs: the op's float output quantized with its observer's parameters (and
    dequantized again by the consumers)."""
    scale, zero_point = gm.get_submodule(obs.target).calculate_qparams()
    name = f"{obs.target}_quantize_{counter[0]}"
    counter[0] += 1
    gm.add_submodule(name, nnq.Quantize(float(scale.reshape(-1)[0]),
                                        int(zero_point.reshape(-1)[0]),
                                        gm.get_submodule(obs.target).dtype))
    with graph.inserting_after(node):
        q = graph.call_module(name, (node,))
    obs.replace_all_uses_with(q)
    graph.erase_node(obs)
    erased.add(obs)
    quantized.add(q)


def convert_to_reference_fx(graph_module: Any, convert_custom_config: Any = None,
                            _remove_qconfig: bool = True, qconfig_mapping: Any = None,
                            backend_config: Any = None) -> Any:
    """:func:`convert_fx` with reference quantized modules: float ops on quantize-dequantized
    weights, with quantize / dequantize around each quantized op."""
    return convert_fx(graph_module, convert_custom_config, _remove_qconfig, qconfig_mapping,
                      backend_config, is_reference=True)

