"""Higher-level autograd over Python functions, with ``torch.autograd.functional``'s signatures:
``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``vhp`` and ``hvp``.

Inputs are a tensor or a tuple of tensors; the function returns a tensor or a tuple of tensors.
Results are detached unless ``create_graph=True`` (then they can be differentiated again).

Sparse tensors, as in PyTorch: ``vjp`` takes sparse inputs (their gradient is a sparse tensor of
their pattern, through their values), and a function whose backward gives a sparse gradient
(``embedding(..., sparse=True)``) gives it back as such; ``jacobian``/``hessian`` densify such
gradients into their dense blocks. The other functions refuse sparse inputs.

>>> import ember
>>> from ember.autograd.functional import jacobian
>>> jacobian(lambda x: x ** 2, ember.tensor([1.0, 2.0])).tolist()
[[2.0, 0.0], [0.0, 4.0]]
"""

from __future__ import annotations

from typing import Callable, Sequence

from ember import _C, autograd
from ember._C import Tensor
from ember.autograd import graph
from ember.autograd.grad_mode import enable_grad

TensorOrTensors = Tensor | Sequence[Tensor]

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


# ---- shared machinery (also used by ember.func) ------------------------------------------------


def _grad(
    outputs: Sequence[Tensor],
    inputs: Sequence[Tensor],
    grad_outputs: Sequence[Tensor | None],
    create_graph: bool,
    retain_graph: bool = True,
) -> tuple[Tensor | None, ...]:
    """autograd.grad that tolerates outputs which do not depend on anything (they contribute
    nothing) and returns None for inputs the outputs do not reach."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs or not inputs:
        return (None,) * len(inputs)
    outs = [o for o, _ in pairs]
    gouts = [g for _, g in pairs]
    keep = retain_graph or create_graph
    # A sparse input is differentiated through its values; its gradient gets its pattern back.
    engine_ins = [x._vals if _is_sparse(x) else x for x in inputs]
    # Through autograd's frame: sparse gradients (sparse embeddings) come back as such.
    res = autograd._grad_once(outs, gouts, keep, create_graph, engine_ins, True)
    return tuple(x._with_values(g) if _is_sparse(x) and g is not None else g
                 for x, g in zip(inputs, res))


def _is_sparse(x: object) -> bool:
    from ember.sparse import SparseTensor  # imported late: ember.sparse needs ember.autograd

    return type(x) is SparseTensor


def _dense_grad(g):
    """A gradient as a dense tensor (a Jacobian's entries are dense)."""
    return g.to_dense() if g is not None and _is_sparse(g) else g


def _forward_product(
    outputs: Sequence[Tensor],
    inputs: Sequence[Tensor],
    tangents: Sequence[Tensor],
    create_graph: bool,
) -> tuple[Tensor | None, ...]:
    """Jacobian-vector products J·t for each output (None where an output does not depend on
    the inputs).

    Uses the double-vjp trick (as torch.autograd.functional.jvp does): g(u) = Jᵀu is linear in
    the cotangent u, and the vjp of g with respect to u, seeded with t, is (Jᵀ)ᵀt = J·t. It needs
    the backward formulas to be differentiable (create_graph), which every op's are, whereas
    forward-mode AD (ember.autograd.forward_ad) covers only the ops with a `tangent:` formula.
    """
    diff = [i for i, o in enumerate(outputs) if o.requires_grad]
    results: list[Tensor | None] = [None] * len(outputs)
    if not diff or not inputs:
        return tuple(results)
    dummies = [_C.zeros_like(outputs[i], requires_grad=True) for i in diff]
    with enable_grad():
        gs = _grad([outputs[i] for i in diff], inputs, dummies, create_graph=True)
        gs = tuple(_dense_grad(g) for g in gs)
    pairs = [(g, t) for g, t in zip(gs, tangents) if g is not None and g.requires_grad]
    if not pairs:
        return tuple(results)
    with graph._graph_task([g for g, _ in pairs], dummies):
        jv = _C._run_backward([g for g, _ in pairs], [t for _, t in pairs], True, create_graph,
                              dummies, True, False)
    for i, r in zip(diff, jv):
        results[i] = r
    return tuple(results)


def _stack(ts: Sequence[Tensor]) -> Tensor:
    """stack, kept differentiable: while stack has no derivative formula, a stack of tensors that
    require grad is assembled from one-hot products (mul/add have derivatives)."""
    s = _C.stack(list(ts))
    if not (s.requires_grad and s.grad_fn is not None and s.grad_fn.name() == "NotImplemented"):
        return s
    n = len(ts)
    acc = None
    for k, t in enumerate(ts):
        onehot = _C.zeros((n, 1), dtype=t.dtype)
        onehot[k] = 1.0
        term = onehot * t.reshape(1, -1)
        acc = term if acc is None else acc + term
    return acc.reshape((n,) + tuple(ts[0].shape))


def _as_tuple(x, arg_name: str, fn_name: str, sparse_ok: bool = False) -> tuple[bool, tuple]:
    """(was_tuple, tuple of tensors); rejects anything else with a message naming ``fn_name``
    (sparse tensors unless ``sparse_ok``)."""
    if isinstance(x, Tensor) or (sparse_ok and _is_sparse(x)):
        return False, (x,)
    for el in (x if isinstance(x, (tuple, list)) else (x,)):
        if _is_sparse(el) and not sparse_ok:
            raise NotImplementedError(f"{fn_name}: sparse {arg_name} are not supported (vjp "
                                      "takes sparse inputs; convert with .to_dense() first)")
    if isinstance(x, (tuple, list)):
        for i, el in enumerate(x):
            if not (isinstance(el, Tensor) or (sparse_ok and _is_sparse(el))):
                raise TypeError(
                    f"{fn_name}: the {arg_name} given must be either a Tensor or a tuple of "
                    f"Tensors, but element {i} has type {type(el).__name__}")
        return True, tuple(x)
    raise TypeError(f"{fn_name}: the {arg_name} given must be either a Tensor or a tuple of "
                    f"Tensors, but it has type {type(x).__name__}")


def _prepare_inputs(inputs: tuple, create_graph: bool) -> tuple:
    """Inputs the function will be differentiated against: fresh leaves, or (create_graph with an
    input that already requires grad) an alias that keeps the outer graph connected."""
    prepared = []
    for t in inputs:
        if _is_sparse(t):  # a new sparse tensor over fresh (or aliased) values
            v = t._vals
            prepared.append(t._with_values(v.view_as(v) if create_graph and v.requires_grad
                                           else v.detach().requires_grad_(True)))
        elif create_graph and t.requires_grad:
            prepared.append(t.view_as(t))
        else:
            prepared.append(t.detach().requires_grad_(True))
    return tuple(prepared)


def _finish(ts, create_graph: bool):
    """Detaches results unless the caller wants to differentiate them again."""
    if isinstance(ts, tuple):
        return tuple(_finish(t, create_graph) for t in ts)
    if ts is None or create_graph:
        return ts
    return ts.detach()


def _unwrap(was_tuple: bool, ts: tuple):
    return ts if was_tuple else ts[0]


def _call(func: Callable, inputs: tuple, fn_name: str) -> tuple[bool, tuple]:
    with enable_grad():
        out = func(*inputs)
    return _as_tuple(out, "outputs of the user-provided function", fn_name)


def _check_vectors(v, refs: tuple, what: str, fn_name: str) -> tuple:
    """Validates the vector(s) ``v`` against ``refs`` (the function's outputs or inputs)."""
    if v is None:
        if len(refs) != 1 or refs[0].numel() != 1:
            raise RuntimeError(
                f"{fn_name}: the vector v can only be None if the {what} is a single Tensor with a "
                f"single element (got {len(refs)} tensor(s) of shapes "
                f"{[tuple(r.shape) for r in refs]})")
        return (_C.ones_like(refs[0]),)
    _, vs = _as_tuple(v, "v", fn_name)
    if len(vs) != len(refs):
        raise RuntimeError(f"{fn_name}: v has {len(vs)} tensor(s) but the {what} has {len(refs)}")
    for i, (a, b) in enumerate(zip(vs, refs)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"{fn_name}: entry {i} of v has shape {tuple(a.shape)} but the {what} "
                               f"has shape {tuple(b.shape)} there")
    return vs


def _strict_outputs(outs: tuple, fn_name: str) -> None:
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(f"{fn_name}: output {i} of the user-provided function does not "
                               "require gradients; this is not allowed in strict mode")


def _fill(grads: tuple, like: tuple, strict: bool, fn_name: str, what: str) -> tuple:
    """Replaces None (independent) gradients by zeros, or raises in strict mode."""
    res = []
    for i, (g, ref) in enumerate(zip(grads, like)):
        if g is None:
            if strict:
                raise RuntimeError(f"{fn_name}: the {what} {i} is independent of the inputs of the "
                                   "user-provided function; this is not allowed in strict mode")
            g = _C.zeros_like(ref)
        res.append(g)
    return tuple(res)


# ---- public API --------------------------------------------------------------------------------


def vjp(func: Callable, inputs: TensorOrTensors, v: TensorOrTensors | None = None,
        create_graph: bool = False, strict: bool = False):
    """Returns ``(func(*inputs), vᵀ·J)``: the vector-Jacobian product at ``inputs``.

    >>> import ember
    >>> from ember.autograd.functional import vjp
    >>> out, g = vjp(lambda x: x * x, ember.tensor([1.0, 3.0]), ember.tensor([1.0, 1.0]))
    >>> g.tolist()
    [2.0, 6.0]
    """
    name = "vjp"
    in_tuple, ins = _as_tuple(inputs, "inputs", name, sparse_ok=True)
    ins = _prepare_inputs(ins, create_graph)
    out_tuple, outs = _call(func, ins, name)
    if strict:
        _strict_outputs(outs, name)
    vs = _check_vectors(v, outs, "output of the user-provided function", name)
    grads = _grad(outs, ins, vs, create_graph=create_graph)
    grads = _fill(grads, ins, strict, name, "gradient with respect to input")
    return _finish(_unwrap(out_tuple, outs), create_graph), _finish(_unwrap(in_tuple, grads),
                                                                    create_graph)


def jvp(func: Callable, inputs: TensorOrTensors, v: TensorOrTensors | None = None,
        create_graph: bool = False, strict: bool = False):
    """Returns ``(func(*inputs), J·v)``: the Jacobian-vector product at ``inputs``.

    >>> import ember
    >>> from ember.autograd.functional import jvp
    >>> out, jv = jvp(lambda x: x * x, ember.tensor([1.0, 3.0]), ember.tensor([1.0, 0.0]))
    >>> jv.tolist()
    [2.0, 0.0]
    """
    name = "jvp"
    in_tuple, ins = _as_tuple(inputs, "inputs", name)
    vs = _check_vectors(v, ins, "input", name)
    ins = _prepare_inputs(ins, create_graph)
    out_tuple, outs = _call(func, ins, name)
    if strict:
        _strict_outputs(outs, name)
    jv = _forward_product(outs, ins, vs, create_graph)
    jv = _fill(jv, outs, strict, name, "jvp of output")
    return _finish(_unwrap(out_tuple, outs), create_graph), _finish(_unwrap(out_tuple, jv),
                                                                    create_graph)


def _jacobian_rows(outs: tuple, ins: tuple, create_graph: bool, strict: bool,
                   name: str) -> list[list[Tensor]]:
    """jac[i][j]: d outs[i] / d ins[j], shape outs[i].shape + ins[j].shape, one backward pass per
    output element."""
    jac: list[list[Tensor]] = []
    for i, o in enumerate(outs):
        rows: list[list[Tensor]] = [[] for _ in ins]
        used = [False] * len(ins)
        for e in range(o.numel()):
            if o.requires_grad:
                seed = _C.zeros(o.numel(), dtype=o.dtype)
                seed[e] = 1.0
                gs = _grad([o], ins, [seed.reshape(o.shape)], create_graph=create_graph)
                gs = tuple(_dense_grad(g) for g in gs)
            else:
                gs = (None,) * len(ins)
            for j, (g, x) in enumerate(zip(gs, ins)):
                if g is not None:
                    used[j] = True
                rows[j].append(g if g is not None else _C.zeros_like(x))
        for j, u in enumerate(used):
            if strict and not u:
                raise RuntimeError(f"{name}: output {i} of the user-provided function is "
                                   f"independent of input {j}; this is not allowed in strict mode")
        jac.append([_stack(r).reshape(tuple(o.shape) + tuple(x.shape)) if r else
                    _C.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype)
                    for r, x in zip(rows, ins)])
    return jac


def _jacobian_cols(outs: tuple, ins: tuple, create_graph: bool, strict: bool,
                   name: str) -> list[list[Tensor]]:
    """Same as _jacobian_rows, one Jacobian-vector product per input element."""
    cols: list[list[list[Tensor]]] = [[[] for _ in ins] for _ in outs]
    used = [[False] * len(ins) for _ in outs]
    for j, x in enumerate(ins):
        for e in range(x.numel()):
            tangents = [_C.zeros_like(t) for t in ins]
            tangents[j].view(-1)[e] = 1.0
            jv = _forward_product(outs, ins, tangents, create_graph)
            for i, (r, o) in enumerate(zip(jv, outs)):
                if r is not None:
                    used[i][j] = True
                cols[i][j].append(r if r is not None else _C.zeros_like(o))
    jac = []
    for i, o in enumerate(outs):
        row = []
        for j, x in enumerate(ins):
            if strict and not used[i][j]:
                raise RuntimeError(f"{name}: output {i} of the user-provided function is "
                                   f"independent of input {j}; this is not allowed in strict mode")
            if x.numel() == 0:
                row.append(_C.zeros(tuple(o.shape) + tuple(x.shape), dtype=o.dtype))
                continue
            # cols are (in elements) x (out shape): move the input dims last.
            st = _stack(cols[i][j]).reshape(x.numel(), o.numel()).t()
            row.append(st.reshape(tuple(o.shape) + tuple(x.shape)))
        jac.append(row)
    return jac


def jacobian(func: Callable, inputs: TensorOrTensors, create_graph: bool = False,
             strict: bool = False, vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for an output of shape O and an input of shape I an
    entry of shape O + I; nested as tuple[output][input] when either side is a tuple.

    ``strategy="reverse-mode"`` runs one backward pass per output element, ``"forward-mode"`` one
    Jacobian-vector product per input element (cheaper when inputs are fewer). ``vectorize`` is
    accepted for compatibility; ember always loops.

    >>> import ember
    >>> from ember.autograd.functional import jacobian
    >>> jacobian(lambda a, b: a * b, (ember.tensor([2.0]), ember.tensor([3.0])))
    (tensor([[3.]]), tensor([[2.]]))
    """
    name = "jacobian"
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"{name}: expected strategy to be either \"forward-mode\" or "
                         f"\"reverse-mode\", got {strategy!r}")
    in_tuple, ins = _as_tuple(inputs, "inputs", name)
    ins = _prepare_inputs(ins, create_graph)
    out_tuple, outs = _call(func, ins, name)
    if strict:
        _strict_outputs(outs, name)
    if strategy == "reverse-mode":
        jac = _jacobian_rows(outs, ins, create_graph, strict, name)
    else:
        jac = _jacobian_cols(outs, ins, create_graph, strict, name)
    per_out = tuple(_unwrap(in_tuple, tuple(row)) for row in jac)
    return _finish(_unwrap(out_tuple, per_out), create_graph)


def hessian(func: Callable, inputs: TensorOrTensors, create_graph: bool = False,
            strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar-valued ``func`` at ``inputs``: shape I + I for one input, and
    tuple[i][j] of shape I_i + I_j for a tuple of inputs.

    >>> import ember
    >>> from ember.autograd.functional import hessian
    >>> hessian(lambda x: (x ** 3).sum(), ember.tensor([1.0, 2.0])).tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """
    name = "hessian"
    in_tuple, ins = _as_tuple(inputs, "inputs", name)

    def scalar_check(*xs):
        out = func(*xs)
        was_tuple, outs = _as_tuple(out, "outputs of the user-provided function", name)
        if was_tuple and len(outs) != 1:
            raise RuntimeError(f"{name}: the function given to hessian should return a single "
                               f"Tensor, got a tuple of {len(outs)}")
        if outs[0].numel() != 1:
            raise RuntimeError(f"{name}: the Tensor returned by the function given to hessian "
                               f"should contain a single element, got shape {tuple(outs[0].shape)}")
        return outs[0].reshape(())

    def gradient(*xs):
        out = scalar_check(*xs)
        if strict and not out.requires_grad:
            raise RuntimeError(f"{name}: the output of the user-provided function does not "
                               "require gradients; this is not allowed in strict mode")
        gs = tuple(_dense_grad(g) for g in _grad([out], xs, [None], create_graph=True))
        return _fill(gs, xs, strict, name, "gradient with respect to input")

    res = jacobian(gradient, ins, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    if not in_tuple:
        return res[0][0]
    return res


def vhp(func: Callable, inputs: TensorOrTensors, v: TensorOrTensors | None = None,
        create_graph: bool = False, strict: bool = False):
    """Returns ``(func(*inputs), vᵀ·H)`` for a scalar-valued ``func``.

    >>> import ember
    >>> from ember.autograd.functional import vhp
    >>> _, r = vhp(lambda x: (x ** 3).sum(), ember.tensor([1.0, 2.0]), ember.tensor([1.0, 1.0]))
    >>> r.tolist()
    [6.0, 12.0]
    """
    return _hessian_product("vhp", func, inputs, v, create_graph, strict)


def hvp(func: Callable, inputs: TensorOrTensors, v: TensorOrTensors | None = None,
        create_graph: bool = False, strict: bool = False):
    """Returns ``(func(*inputs), H·v)`` for a scalar-valued ``func`` (H is symmetric for twice
    continuously differentiable functions, so this equals vhp).

    >>> import ember
    >>> from ember.autograd.functional import hvp
    >>> _, r = hvp(lambda x: (x ** 3).sum(), ember.tensor([1.0, 2.0]), ember.tensor([0.0, 1.0]))
    >>> r.tolist()
    [0.0, 12.0]
    """
    return _hessian_product("hvp", func, inputs, v, create_graph, strict)


def _hessian_product(name: str, func: Callable, inputs, v, create_graph: bool, strict: bool):
    in_tuple, ins = _as_tuple(inputs, "inputs", name)
    vs = _check_vectors(v, ins, "input", name)
    ins = _prepare_inputs(ins, create_graph)
    out_tuple, outs = _call(func, ins, name)
    if len(outs) != 1 or outs[0].numel() != 1:
        raise RuntimeError(f"{name}: the function given to {name} should return a single Tensor "
                           f"with a single element, got shapes {[tuple(o.shape) for o in outs]}")
    out = outs[0]
    if strict and not out.requires_grad:
        raise RuntimeError(f"{name}: the output of the user-provided function does not require "
                           "gradients; this is not allowed in strict mode")
    with enable_grad():
        gs = tuple(_dense_grad(g) for g in _grad([out], ins, [None], create_graph=True))
    gs = _fill(gs, ins, strict, name, "gradient with respect to input")
    res = _grad(list(gs), ins, list(vs), create_graph=create_graph)
    res = _fill(res, ins, strict, name, "Hessian-vector product with respect to input")
    return _finish(_unwrap(out_tuple, outs), create_graph), _finish(_unwrap(in_tuple, res),
                                                                    create_graph)
