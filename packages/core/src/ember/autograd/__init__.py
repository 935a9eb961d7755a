"""ember.autograd: reverse-mode automatic differentiation.

>>> import ember
>>> x = ember.tensor([1.0, 2.0], requires_grad=True)
>>> (x * x).sum().backward()
>>> x.grad.tolist()
[2.0, 4.0]
"""

from __future__ import annotations

import sys
import threading
import warnings
from typing import Any, Sequence

from ember import _C
from ember._C import Tensor
from ember.autograd import forward_ad, functional, graph  # noqa: F401
from ember.autograd.anomaly_mode import (  # noqa: F401
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from ember.autograd.function import Function, FunctionCtx, once_differentiable  # noqa: F401
from ember.autograd.grad_mode import (  # noqa: F401
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    is_multithreading_enabled,
    no_grad,
    set_grad_enabled,
    set_multithreading_enabled,
)
from ember.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, Tensor):
        return [x]
    return list(x)


def _tensors(x: Any, api: str, arg: str, none_ok: bool = False,
             exc: type[Exception] = TypeError, edges: bool = False) -> list:
    """``x`` (a Tensor or a sequence of them; None entries where ``none_ok``; GradientEdges,
    resolved to their tensors, where ``edges``) as a list, with an ``exc`` naming the call and
    the argument for anything else (the engine's binding would answer with its whole
    signature)."""
    if x is None or isinstance(x, Tensor):
        return _as_list(x)
    if edges and isinstance(x, graph.GradientEdge):
        return graph._resolve_inputs([x])
    what = "Tensors or None" if none_ok else "Tensors"
    try:
        items = list(x)
    except TypeError:
        raise TypeError(f"{api}: {arg} must be a Tensor or a sequence of {what}, got "
                        f"{type(x).__name__}") from None
    for i, v in enumerate(items):
        if not (isinstance(v, Tensor) or (none_ok and v is None)
                or (edges and isinstance(v, graph.GradientEdge))):
            raise exc(f"{api}: {arg}[{i}] must be a Tensor{' or None' if none_ok else ''}, got "
                      f"{type(v).__name__}")
    return graph._resolve_inputs(items) if edges else items


def _check_grad_devices(api: str, outs: list, grads: list) -> None:
    """A seed gradient on another device than its output is refused as PyTorch does (the
    engine would fail copying it, e.g. out of a meta tensor, naming neither); a 0-dim one may
    come from another device, as in PyTorch."""
    for i, (o, g) in enumerate(zip(outs, grads)):
        if isinstance(g, Tensor) and g.dim() > 0 and g.device != o.device:
            raise RuntimeError(f"{api}: invalid gradient at index {i} - expected device "
                               f"{o.device} but got {g.device}")


# ---- gradients that do not pass through the engine ------------------------------------------
# A sparse gradient (nn.Embedding(sparse=True), see ember.sparse) is produced inside a custom
# Function's backward but is not a dense tensor the C++ engine can carry. Each backward()/grad()
# call pushes a frame; the Function adds its sparse gradient to the frame (summed per tensor),
# and when the engine is done the frame is delivered once per tensor: tensor hooks, then
# accumulation into .grad (backward) or the returned gradient (grad), then post-accumulate hooks.
class _GradFrame:
    __slots__ = ("inputs", "capture", "pending")

    def __init__(self, inputs: list[Tensor] | None, capture: bool) -> None:
        self.inputs = inputs  # None: every leaf receives its gradient
        self.capture = capture  # grad(): gradients are returned, .grad is left alone
        self.pending: dict[int, list[Any]] = {}  # id(tensor) -> [tensor, sparse grad]


_frames = threading.local()
# Set once a Function that produces sparse gradients has run (ember.sparse): until then backward
# and grad call the engine directly, without a frame.
_sparse_seen = False


def _frame_stack() -> list[_GradFrame]:
    st = getattr(_frames, "stack", None)
    if st is None:
        st = _frames.stack = []
    return st


def _run_with_frame(frame: _GradFrame, *args: Any) -> Any:
    st = _frame_stack()
    st.append(frame)
    try:
        return _C._run_backward(*args)
    finally:
        st.pop()


def _deliver(frame: _GradFrame) -> dict[int, Any]:
    """Hands the frame's sparse gradients over (see ember.sparse); for a capturing frame, the
    gradients by input position."""
    from ember import sparse

    return sparse._deliver_frame(frame)


def _not_used(i: int) -> RuntimeError:
    return RuntimeError(f"One of the differentiated Tensors (input {i}) appears to not have been "
                        "used in the graph. Set allow_unused=True if this is the desired behavior.")


def _masked_loaded() -> bool:
    """Whether ember.masked's MaskedTensor exists yet (no MaskedTensor can exist before)."""
    return "ember.masked._mt_ops" in sys.modules


def _masked_ops() -> Any:
    return sys.modules["ember.masked._mt_ops"]


_create_graph_warned = False


def _warn_create_graph_cycle() -> None:
    """PyTorch's once-per-process warning for backward(create_graph=True) without inputs."""
    global _create_graph_warned
    if _create_graph_warned:
        return
    _create_graph_warned = True
    warnings.warn("Using backward() with create_graph=True will create a reference cycle between "
                  "the parameter and its gradient which can cause a memory leak. We recommend "
                  "using autograd.grad when creating the graph to avoid this. If you have to use "
                  "this function, make sure to reset the .grad fields of your parameters to None "
                  "after use to break the cycle and avoid the leak.", UserWarning, stacklevel=3)


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    """Accumulates the gradients of ``tensors`` into the ``.grad`` of the leaves.

    With ``inputs``, only those tensors get gradients (a non-leaf among them starts retaining
    its gradient, as with ``retain_grad()``), and only the part of the graph leading to them
    runs.

    >>> import ember
    >>> a = ember.tensor([1.0, 2.0], requires_grad=True)
    >>> b = ember.tensor([3.0, 4.0], requires_grad=True)
    >>> ember.autograd.backward((a * b).sum(), inputs=[b])
    >>> b.grad.tolist(), a.grad
    ([1.0, 2.0], None)
    """
    from ember.nested import ops as _nested

    if _nested.has_nested(tensors, grad_tensors, inputs):  # their dense parts
        tensors, grad_tensors, inputs, _ = _nested.flatten_for_autograd(tensors, grad_tensors,
                                                                        inputs)
    if _masked_loaded() and _masked_ops().has_masked(tensors, grad_tensors, inputs):
        tensors, grad_tensors, inputs, _ = _masked_ops().unwrap_for_autograd(
            tensors, grad_tensors, inputs)  # MaskedTensors: their data
    outs = _tensors(tensors, "backward", "tensors", edges=True)
    grads = _tensors(grad_tensors, "backward", "grad_tensors", True) or [None] * len(outs)
    if len(grads) != len(outs):
        raise RuntimeError(f"backward: got {len(outs)} tensors but {len(grads)} gradients")
    _check_grad_devices("backward", outs, grads)
    if create_graph and inputs is None:
        _warn_create_graph_cycle()
    keep = create_graph if retain_graph is None else retain_graph
    ins = _tensors(inputs, "backward", "inputs", exc=RuntimeError,  # RuntimeError: PyTorch's
                   edges=True)
    if inputs is not None and not ins:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    with graph._graph_task(outs, ins):
        if not _sparse_seen:
            _C._run_backward(outs, grads, keep, create_graph, ins, True, True)
            return
        frame = _GradFrame(ins or None, False)
        _run_with_frame(frame, outs, grads, keep, create_graph, ins, True, True)
        if frame.pending:
            _deliver(frame)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Gradients of ``outputs`` with respect to ``inputs`` (``.grad`` is left untouched), with
    PyTorch's arguments in PyTorch's order. ``only_inputs`` is accepted and ignored (deprecated
    in PyTorch too); ``is_grads_batched=True`` takes the first dim of every grad_output as a
    batch of vectors and returns the stacked vector-Jacobian products.

    >>> import ember
    >>> x = ember.tensor(3.0, requires_grad=True)
    >>> ember.autograd.grad(x * x, x)[0].item()
    6.0
    >>> x = ember.tensor([1.0, 2.0], requires_grad=True)
    >>> ember.autograd.grad(x * x, x, ember.eye(2), is_grads_batched=True)[0].tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). "
                      "To accumulate gradient for other parts of the graph, please use "
                      "ember.autograd.backward.", FutureWarning, stacklevel=2)
    if materialize_grads and allow_unused is False:
        raise ValueError("grad: expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got allow_unused=False")
    from ember.nested import ops as _nested

    if _masked_loaded() and _masked_ops().has_masked(outputs, grad_outputs, inputs):
        # their data; the gradients of MaskedTensor inputs come back as MaskedTensors
        outputs, grad_outputs, flat_ins, rewrap = _masked_ops().unwrap_for_autograd(
            outputs, grad_outputs, inputs)
        return rewrap(grad(outputs, flat_ins, grad_outputs, retain_graph, create_graph,
                           only_inputs, allow_unused, is_grads_batched, materialize_grads))
    if _nested.has_nested(outputs, grad_outputs, inputs) and not is_grads_batched:
        # their dense parts; the gradients of nested inputs come back nested
        outputs, grad_outputs, flat_ins, unflatten = _nested.flatten_for_autograd(
            outputs, grad_outputs, inputs)
        return unflatten(grad(outputs, flat_ins, grad_outputs, retain_graph, create_graph,
                              only_inputs, allow_unused, False, materialize_grads))
    outs = _tensors(outputs, "grad", "outputs", edges=True)
    if inputs is None:
        raise TypeError("grad: inputs must be a Tensor or a sequence of Tensors, got NoneType")
    ins = _tensors(inputs, "grad", "inputs", exc=RuntimeError, edges=True)
    if not ins:  # nothing to differentiate for: an error in PyTorch, not an empty tuple
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    grads = _tensors(grad_outputs, "grad", "grad_outputs", True) or [None] * len(outs)
    if len(grads) != len(outs):
        raise RuntimeError(f"grad: got {len(outs)} outputs but {len(grads)} grad_outputs")
    _check_grad_devices("grad", outs, grads)
    keep = create_graph if retain_graph is None else retain_graph
    unused_ok = bool(allow_unused) or materialize_grads
    if is_grads_batched:
        if any(g is None for g in grads):
            raise RuntimeError("grad: is_grads_batched=True needs every grad_output given (a "
                               "batch of vectors along its first dim)")
        sizes = {int(g.shape[0]) if g.dim() > 0 else -1 for g in grads}
        if len(sizes) != 1 or -1 in sizes:
            raise RuntimeError("grad: with is_grads_batched=True every grad_output needs the "
                               f"same batch size along dim 0, got {sorted(sizes)}")
        # checked before any backward runs (PyTorch's words: the shape named is the one after
        # the batch dim)
        for i, (g, o) in enumerate(zip(grads, outs)):
            if tuple(g.shape[1:]) != tuple(o.shape):
                raise RuntimeError(
                    "If `is_grads_batched=True`, we interpret the first dimension of each "
                    "grad_output as the batch dimension. The sizes of the remaining dimensions "
                    "are expected to match the shape of corresponding output, but a mismatch "
                    f"was detected: grad_output[{i}] has a shape of {tuple(g.shape[1:])} and "
                    f"output[{i}] has a shape of {tuple(o.shape)}. If you only want some "
                    "tensors in `grad_output` to be considered batched, consider using vmap.")
        n = sizes.pop()
        rows = [_grad_once(outs, [g[i] for g in grads], keep or i < n - 1, create_graph, ins,
                           unused_ok) for i in range(n)]
        res = tuple(None if rows and rows[0][j] is None else
                    _C.stack([r[j] if r[j] is not None else _C.zeros_like(t) for r in rows])
                    for j, t in enumerate(ins))
    else:
        res = _grad_once(outs, grads, keep, create_graph, ins, unused_ok)
    if materialize_grads:
        res = tuple(g if g is not None else _C.zeros_like(t) for g, t in zip(res, ins))
    return tuple(res)


def _grad_once(outs: list[Tensor], grads: list[Any], keep: bool, create_graph: bool,
               ins: list[Tensor], unused_ok: bool) -> tuple[Any, ...]:
    """One engine run for grad(): the dense gradients, with sparse ones (see _GradFrame) in
    place of the inputs that received one (summed densely with a dense part, as PyTorch)."""
    with graph._graph_task(outs, ins):
        if not _sparse_seen:
            return tuple(_C._run_backward(outs, grads, keep, create_graph, ins, unused_ok, False))
        frame = _GradFrame(ins, True)
        res = list(_run_with_frame(frame, outs, grads, keep, create_graph, ins, True, False))
        if frame.pending:
            for i, g in _deliver(frame).items():
                res[i] = g if res[i] is None else res[i] + g.to_dense()
    if not unused_ok:
        for i, g in enumerate(res):
            if g is None:
                raise _not_used(i)
    return tuple(res)


def _tensor_backward(self: Tensor, gradient: Tensor | None = None, retain_graph: bool | None = None,
                     create_graph: bool = False, inputs=None) -> None:
    """Computes the gradient of this tensor w.r.t. the graph leaves (see ember.autograd.backward)."""
    backward(self, gradient, retain_graph, create_graph, inputs)


Tensor.backward = _tensor_backward


class _VariableMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, Tensor)  # every tensor is a Variable, as in PyTorch


class Variable(metaclass=_VariableMeta):
    """The legacy wrapper older PyTorch code still calls: ``Variable(t, requires_grad=True)``
    is ``t`` detached (the same storage) as a new leaf with that ``requires_grad``; every tensor
    passes ``isinstance(t, Variable)``.

    >>> import ember
    >>> from ember.autograd import Variable
    >>> v = Variable(ember.ones(2) * 3, requires_grad=True)
    >>> v.is_leaf, v.requires_grad, isinstance(v, Variable)
    (True, True, True)
    """

    def __new__(cls, data: Tensor, requires_grad: bool = False, volatile: bool = False) -> Tensor:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with ember.no_grad():` "
                          "instead.", UserWarning, stacklevel=2)
        return data.detach().requires_grad_(requires_grad)


def __getattr__(name: str):
    # ember.autograd.profiler (torch.autograd.profiler), imported on first use
    if name == "profiler":
        import importlib

        return importlib.import_module("ember.autograd.profiler")
    if name in ("handle_torch_function", "has_torch_function", "is_tensor_like"):
        # re-exported from ember.overrides as torch.autograd does (imported late: overrides
        # imports the tensor machinery this package is part of)
        from ember import overrides

        return getattr(overrides, name)
    raise AttributeError(f"module 'ember.autograd' has no attribute {name!r}")
