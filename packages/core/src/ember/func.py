"""Function transforms with ``torch.func``'s names and semantics: ``grad``, ``grad_and_value``,
``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, ``vmap`` (by a loop), ``linearize``,
``functionalize``, ``functional_call`` and ``stack_module_state``.

They take a Python function and return a new function (or, for vjp/jvp, evaluate at a point).
Arguments may be tensors or nested tuples/lists/dicts of tensors ("pytrees"); results have the
matching structure. Transforms compose (``grad(grad(f))``, ``jacrev(jacrev(f))``). Results keep
an autograd graph only when something outside asks for it: a differentiated input that already
requires grad (an outer transform, or the user) or a tensor captured by ``func`` that requires
grad.

>>> import ember
>>> from ember.func import grad
>>> grad(lambda x: (x ** 3).sum())(ember.tensor([1.0, 2.0])).tolist()
[3.0, 12.0]
>>> grad(grad(lambda x: x ** 3))(ember.tensor(2.0)).item()
12.0
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from ember import _C
from ember._C import Tensor
from ember.autograd.functional import _forward_product, _grad, _jacobian_cols, _jacobian_rows
from ember.autograd.grad_mode import enable_grad

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap",
           "functional_call", "stack_module_state", "linearize", "functionalize",
           "replace_all_batch_norm_modules_"]

# ---- pytrees: nested tuples / lists / dicts with tensor (or other) leaves ----------------------


def _flatten(tree: Any) -> tuple[list, Any]:
    """(leaves, spec); tensors and any non-container values are leaves."""
    if isinstance(tree, (tuple, list)):
        leaves: list = []
        specs = []
        for el in tree:
            sub, spec = _flatten(el)
            leaves.extend(sub)
            specs.append((len(sub), spec))
        return leaves, (type(tree), None, specs)
    if isinstance(tree, dict):
        leaves = []
        specs = []
        for k in tree:
            sub, spec = _flatten(tree[k])
            leaves.extend(sub)
            specs.append((len(sub), spec))
        return leaves, (dict, list(tree), specs)
    return [tree], None


def _unflatten(leaves: list, spec: Any) -> Any:
    if spec is None:
        return leaves[0]
    kind, keys, specs = spec
    parts = []
    pos = 0
    for n, sub in specs:
        parts.append(_unflatten(leaves[pos:pos + n], sub))
        pos += n
    if kind is dict:
        return dict(zip(keys, parts))
    if kind is tuple or kind is list:
        return kind(parts)
    return kind(*parts)  # namedtuple


def _map(fn: Callable, tree: Any) -> Any:
    leaves, spec = _flatten(tree)
    return _unflatten([fn(x) for x in leaves], spec)


def _tangent_of(x: Any) -> Tensor | None:
    """x's forward-mode tangent at the live dual level (None without one)."""
    level = _C._current_dual_level()
    if level < 0 or not isinstance(x, Tensor):
        return None
    return _C._unpack_dual(x, level)[1]


def _detach(x: Tensor) -> Tensor:
    """x.detach() that keeps x's tangent at the live dual level: as in torch.func, the reverse
    transforms called on dual tensors propagate tangents (forward-over-reverse)."""
    tangent = _tangent_of(x)
    if tangent is None:
        return x.detach()
    return _C._make_dual(x.detach(), tangent.detach(), _C._current_dual_level())


def _detach_tree(tree: Any) -> Any:
    return _map(lambda x: _detach(x) if isinstance(x, Tensor) else x, tree)


def _any_tangent(tensors: list[Tensor]) -> bool:
    return _C._current_dual_level() >= 0 and any(_tangent_of(t) is not None for t in tensors)


def _no_live_dual_level(name: str) -> None:
    """PyTorch's forward-mode transforms refuse to run inside a live dual level (their own
    forward AD would nest in it); ember's would silently drop the outer tangents."""
    if _C._current_dual_level() >= 0:
        raise RuntimeError(f"{name}: Nested forward mode AD is not supported at the moment (a "
                           "dual level of ember.autograd.forward_ad is live)")


# ---- shared helpers ----------------------------------------------------------------------------


def _argnums(argnums: int | tuple[int, ...], nargs: int, name: str) -> tuple[int, ...]:
    if not isinstance(argnums, (int, tuple, list)):
        raise RuntimeError(f"{name}: argnums must be int or Tuple[int, ...], got "
                           f"{type(argnums).__name__}")
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{name}: argnums must be non-empty")
    out = []
    for a in nums:
        if not isinstance(a, int):
            raise RuntimeError(f"{name}: argnums must be int or tuple of int, got {type(a).__name__}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"{name}: got argnums={argnums!r} but only {nargs} positional "
                               "argument(s) were given")
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{name}: argnums must not contain duplicates, got {argnums!r}")
    return tuple(out)


def _leaf_for(x: Any, what: str, name: str, complex_ok: bool = False) -> Tensor:
    """A fresh differentiable stand-in for input leaf ``x``; stays attached to x's graph when x
    already requires grad so that an outer transform (or the caller) can differentiate again."""
    if not isinstance(x, Tensor):
        raise RuntimeError(f"{name}: expected {what} to be a Tensor (or a tuple/list/dict of "
                           f"Tensors), got {type(x).__name__}")
    if not (x.is_floating_point() or (complex_ok and x.is_complex())):
        raise RuntimeError(f"{name}: only floating point tensors can be differentiated, but "
                           f"{what} has dtype {x.dtype!r}")
    if x.requires_grad:
        return x.view_as(x)
    if _tangent_of(x) is not None:  # a fresh leaf that still carries x's tangent
        return x.view_as(x).requires_grad_(True)
    return x.detach().requires_grad_(True)


def _prepare(args: tuple, nums: tuple[int, ...], name: str, complex_ok: bool = False):
    """Replaces the differentiated arguments' tensors with fresh stand-ins.

    Returns (new_args, per-argnum (leaves, spec), flat list of stand-ins, whether an original
    differentiated tensor required grad)."""
    new_args = list(args)
    groups = []
    flat: list[Tensor] = []
    outer = False
    for a in nums:
        leaves, spec = _flatten(args[a])
        outer = outer or any(isinstance(x, Tensor) and x.requires_grad for x in leaves)
        fresh = [_leaf_for(x, f"argument {a}", name, complex_ok) for x in leaves]
        new_args[a] = _unflatten(fresh, spec)
        groups.append((fresh, spec))
        flat.extend(fresh)
    return tuple(new_args), groups, flat, outer


def _reaches_other_leaf(outputs: list[Tensor], own: list[Tensor]) -> bool:
    """Whether the graph of ``outputs`` reaches a tensor that requires grad other than ``own``
    (a tensor captured by the user's function): then results must keep their graph."""
    own_nodes = set()
    for t in own:
        if t.grad_fn is not None:
            own_nodes.add(t.grad_fn._sequence_nr)
        else:
            # The leaf's accumulator node is cached, so this finds the one in the graph.
            acc = t.view_as(t).grad_fn.next_functions[0][0]
            own_nodes.add(acc._sequence_nr)
    seen = set()
    stack = [o.grad_fn for o in outputs if o.grad_fn is not None]
    for o in outputs:
        if o.requires_grad and o.grad_fn is None and all(o is not t for t in own):
            return True
    while stack:
        node = stack.pop()
        nr = node._sequence_nr
        if nr in seen or nr in own_nodes:
            continue
        seen.add(nr)
        if node.name() == "AccumulateGrad":
            return True
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return False


def _keep_graph(outputs: list[Tensor], own: list[Tensor], outer: bool) -> bool:
    if not _C.is_grad_enabled():
        return False
    return outer or _reaches_other_leaf([o for o in outputs if o.requires_grad], own)


def _split_aux(out: Any, has_aux: bool, name: str):
    if not has_aux:
        return out, None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise RuntimeError(f"{name}(f, ...): output of function f should be a tuple: (output, aux) "
                           "if has_aux is True")
    return out[0], out[1]


def _tensor_leaves(tree: Any, what: str, name: str) -> tuple[list[Tensor], Any]:
    leaves, spec = _flatten(tree)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"{name}: expected {what} to be a Tensor or a tuple/list/dict of "
                               f"Tensors, got an element of type {type(x).__name__}")
    return leaves, spec


def _fill_zeros(gs: tuple, like: list[Tensor]) -> list[Tensor]:
    return [g if g is not None else _C.zeros_like(x) for g, x in zip(gs, like)]


# ---- grad / grad_and_value ---------------------------------------------------------------------


def grad_and_value(func: Callable, argnums: int | tuple[int, ...] = 0,
                   has_aux: bool = False) -> Callable:
    """Like :func:`grad`, but the new function returns ``(gradient, value)`` (``(gradient,
    (value, aux))`` with ``has_aux``).

    >>> import ember
    >>> from ember.func import grad_and_value
    >>> g, v = grad_and_value(lambda x: (x * x).sum())(ember.tensor([1.0, 2.0]))
    >>> g.tolist(), v.item()
    ([2.0, 4.0], 5.0)
    """
    name = "grad_and_value"

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any):
        nums = _argnums(argnums, len(args), name)
        # complex inputs of a real-valued function are differentiated as torch does (the
        # conjugate Wirtinger gradient, what backward() gives a complex leaf)
        new_args, groups, flat, outer = _prepare(args, nums, name, complex_ok=True)
        with enable_grad():
            out = func(*new_args, **kwargs)
        value, aux = _split_aux(out, has_aux, name)
        if not isinstance(value, Tensor):
            raise RuntimeError(f"{name}(f)(*args): expected f(*args) to return a Tensor, got "
                               f"{type(value).__name__}")
        if value.is_complex():
            raise RuntimeError(f"{name}(f)(*args): grad can be implicitly created only for real "
                               f"scalar outputs but got {value.dtype}")
        if value.dim() != 0:
            raise RuntimeError(f"{name}(f)(*args): expected f(*args) to return a scalar Tensor, "
                               f"got a tensor of shape {tuple(value.shape)}; maybe you wanted to "
                               "use the vjp or jacrev APIs instead?")
        keep = _keep_graph([value], flat, outer)
        # tangents on the inputs flow through the backward pass only when it is recorded
        fwd = _any_tangent(flat)
        gs = _fill_zeros(_grad([value], flat, [None], create_graph=keep or fwd), flat)
        if not keep:
            gs = [_detach(g) for g in gs]
            value = _detach(value)
            aux = _detach_tree(aux)
        results = []
        pos = 0
        for fresh, spec in groups:
            results.append(_unflatten(gs[pos:pos + len(fresh)], spec))
            pos += len(fresh)
        g = results[0] if isinstance(argnums, int) else tuple(results)
        return (g, (value, aux)) if has_aux else (g, value)

    return wrapper


def grad(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """Returns a function computing the gradient of ``func`` (which must return a scalar tensor)
    with respect to the positional argument(s) ``argnums``; with ``has_aux``, ``func`` returns
    ``(output, aux)`` and the new function returns ``(gradient, aux)``.

    >>> import ember
    >>> from ember.func import grad
    >>> gx, gy = grad(lambda x, y: (x * y).sum(), argnums=(0, 1))(ember.ones(2), ember.tensor([3.0, 4.0]))
    >>> gx.tolist(), gy.tolist()
    ([3.0, 4.0], [1.0, 1.0])
    """
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any):
        g, value = inner(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


# ---- vjp / jvp ---------------------------------------------------------------------------------


def vjp(func: Callable, *primals: Any, has_aux: bool = False):
    """Evaluates ``func(*primals)`` and returns ``(output, vjp_fn)`` (plus ``aux`` with
    ``has_aux``); ``vjp_fn(cotangents)`` returns a tuple with one vector-Jacobian product per
    primal, and can be called several times.

    >>> import ember
    >>> from ember.func import vjp
    >>> out, vjp_fn = vjp(ember.sin, ember.tensor([0.0, 1.0]))
    >>> [round(v, 4) for v in vjp_fn(ember.ones(2))[0].tolist()]
    [1.0, 0.5403]
    """
    name = "vjp"
    new_args, groups, flat, outer = _prepare(primals, tuple(range(len(primals))), name)
    with enable_grad():
        out = func(*new_args)
    out, aux = _split_aux(out, has_aux, name)
    out_leaves, out_spec = _tensor_leaves(out, "the outputs of f", name)
    foreign = _C.is_grad_enabled() and (outer or _reaches_other_leaf(
        [o for o in out_leaves if o.requires_grad], flat))

    def vjp_fn(cotangents: Any, *, retain_graph: bool = True, create_graph: bool | None = None):
        cts, ct_spec = _tensor_leaves(cotangents, "cotangents", "vjp_fn")
        if len(cts) != len(out_leaves):
            raise RuntimeError(f"vjp_fn: expected cotangents with the structure of the outputs "
                               f"({len(out_leaves)} tensor(s)), got {len(cts)}")
        for i, (c, o) in enumerate(zip(cts, out_leaves)):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"vjp_fn: cotangent {i} has shape {tuple(c.shape)} but the "
                                   f"output it belongs to has shape {tuple(o.shape)}")
        keep = create_graph if create_graph is not None else (
            _C.is_grad_enabled() and (foreign or any(c.requires_grad for c in cts)))
        fwd = _any_tangent(flat) or _any_tangent(cts)
        gs = _fill_zeros(_grad(out_leaves, flat, cts, create_graph=keep or fwd,
                               retain_graph=retain_graph), flat)
        if not keep:
            gs = [_detach(g) for g in gs]
        results = []
        pos = 0
        for fresh, spec in groups:
            results.append(_unflatten(gs[pos:pos + len(fresh)], spec))
            pos += len(fresh)
        return tuple(results)

    shown = out if foreign else _detach_tree(out)
    if has_aux:
        return shown, vjp_fn, (aux if foreign else _detach_tree(aux))
    return shown, vjp_fn


def jvp(func: Callable, primals: tuple, tangents: tuple, *, strict: bool = False,
        has_aux: bool = False):
    """Evaluates ``func(*primals)`` and the Jacobian-vector product with ``tangents`` (same
    structure as ``primals``); returns ``(output, jvp_out)`` (plus ``aux`` with ``has_aux``).

    >>> import ember
    >>> from ember.func import jvp
    >>> out, t = jvp(lambda x: x * x, (ember.tensor([3.0]),), (ember.tensor([1.0]),))
    >>> t.tolist()
    [6.0]
    """
    name = "jvp"
    _no_live_dual_level(name)
    if not isinstance(primals, (tuple, list)):
        raise RuntimeError(f"{name}(f, primals, tangents): expected primals to be a tuple, e.g. "
                           f"primals=(x,), got {type(primals).__name__}")
    if not isinstance(tangents, (tuple, list)):
        raise RuntimeError(f"{name}(f, primals, tangents): expected tangents to be a tuple, e.g. "
                           f"tangents=(t,), got {type(tangents).__name__}")
    if len(primals) != len(tangents):
        raise RuntimeError(f"{name}(f, primals, tangents): expected primals and tangents to have "
                           f"the same length, got {len(primals)} and {len(tangents)}")
    new_args, groups, flat, outer = _prepare(tuple(primals), tuple(range(len(primals))), name,
                                             complex_ok=True)
    tans, _ = _tensor_leaves(tuple(tangents), "tangents", name)
    if len(tans) != len(flat):
        raise RuntimeError(f"{name}: expected tangents to have the structure of primals "
                           f"({len(flat)} tensors), got {len(tans)}")
    for i, (t, x) in enumerate(zip(tans, flat)):
        if tuple(t.shape) != tuple(x.shape) or t.dtype != x.dtype:
            raise RuntimeError(f"{name}: tangent {i} has shape {tuple(t.shape)} and dtype "
                               f"{t.dtype!r} but its primal has shape {tuple(x.shape)} and dtype "
                               f"{x.dtype!r}")
    if any(x.is_complex() for x in flat):
        return _complex_jvp(func, new_args, groups, flat, tans, has_aux, outer, name)
    with enable_grad():
        out = func(*new_args)
    out, aux = _split_aux(out, has_aux, name)
    out_leaves, out_spec = _tensor_leaves(out, "the outputs of f", name)
    keep = _C.is_grad_enabled() and (outer or any(t.requires_grad for t in tans) or
                                     _reaches_other_leaf([o for o in out_leaves if o.requires_grad],
                                                         flat))
    if strict:
        for i, o in enumerate(out_leaves):
            if not o.requires_grad:
                raise RuntimeError(f"{name}: output {i} of f is independent of the primals; "
                                   "this is not allowed with strict=True")
    jv = _fill_zeros(_forward_product(out_leaves, flat, tans, keep), out_leaves)
    if not keep:
        out_leaves = [o.detach() for o in out_leaves]
        jv = [t.detach() for t in jv]
        aux = _detach_tree(aux)
    result = (_unflatten(out_leaves, out_spec), _unflatten(jv, out_spec))
    return result + (aux,) if has_aux else result


def _complex_jvp(func: Callable, args: tuple, groups: list, flat: list[Tensor],
                 tans: list[Tensor], has_aux: bool, outer: bool, name: str) -> tuple:
    """jvp with complex primals, by forward-mode AD (ember.autograd.forward_ad): the reverse-mode
    double-vjp trick does not give the JVP of non-holomorphic ops under the conjugate
    convention. Results keep the graph of what required grad before."""
    import ember.autograd.forward_ad as fwad

    with fwad.dual_level():
        duals = [fwad.make_dual(x, t) for x, t in zip(flat, tans)]
        new_args = list(args)
        k = 0
        for (fresh, spec), a in zip(groups, range(len(args))):
            new_args[a] = _unflatten(duals[k:k + len(fresh)], spec)
            k += len(fresh)
        out = func(*new_args)
        out, aux = _split_aux(out, has_aux, name)
        out_leaves, out_spec = _tensor_leaves(out, "the outputs of f", name)
        parts = [fwad.unpack_dual(o) for o in out_leaves]
    prim = [p.primal for p in parts]
    jv = [p.tangent if p.tangent is not None else _C.zeros_like(o)
          for p, o in zip(parts, prim)]
    keep = _C.is_grad_enabled() and (outer or any(t.requires_grad for t in tans))
    if not keep:
        prim = [o.detach() for o in prim]
        jv = [t.detach() for t in jv]
        aux = _detach_tree(aux)
    result = (_unflatten(prim, out_spec), _unflatten(jv, out_spec))
    return result + (aux,) if has_aux else result


# ---- Jacobians ---------------------------------------------------------------------------------


def _jac_transform(func: Callable, argnums, has_aux: bool, name: str, cols: bool) -> Callable:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any):
        if cols:
            _no_live_dual_level(name)
        nums = _argnums(argnums, len(args), name)
        new_args, groups, flat, outer = _prepare(args, nums, name)
        with enable_grad():
            out = func(*new_args, **kwargs)
        out, aux = _split_aux(out, has_aux, name)
        out_leaves, out_spec = _tensor_leaves(out, "the outputs of f", name)
        keep = _keep_graph(out_leaves, flat, outer)
        build = _jacobian_cols if cols else _jacobian_rows
        jac = build(tuple(out_leaves), tuple(flat), keep or _any_tangent(flat), False, name)
        per_out = []
        for row in jac:
            if not keep:
                row = [_detach(j) for j in row]
            parts = []
            pos = 0
            for fresh, spec in groups:
                parts.append(_unflatten(row[pos:pos + len(fresh)], spec))
                pos += len(fresh)
            per_out.append(parts[0] if isinstance(argnums, int) else tuple(parts))
        result = _unflatten(per_out, out_spec)
        if has_aux:
            return result, (aux if keep else _detach_tree(aux))
        return result

    return wrapper


def jacrev(func: Callable, argnums: int | tuple[int, ...] = 0, *, has_aux: bool = False,
           chunk_size: int | None = None) -> Callable:
    """Returns a function computing the Jacobian of ``func`` with respect to ``argnums`` by
    reverse mode (one vector-Jacobian product per output element). For an output of shape O and
    an input of shape I the entry has shape O + I. ``chunk_size`` is accepted for compatibility.

    >>> import ember
    >>> from ember.func import jacrev
    >>> jacrev(lambda x: x * 2)(ember.ones(2)).tolist()
    [[2.0, 0.0], [0.0, 2.0]]
    """
    return _jac_transform(func, argnums, has_aux, "jacrev", cols=False)


def jacfwd(func: Callable, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """Returns a function computing the Jacobian of ``func`` with respect to ``argnums`` by
    forward products (one Jacobian-vector product per input element); same layout as jacrev.

    >>> import ember
    >>> from ember.func import jacfwd
    >>> jacfwd(lambda x: x.sum(0))(ember.ones(2, 1)).tolist()
    [[[1.0], [1.0]]]
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"jacfwd: randomness must be 'error', 'different' or 'same', got "
                           f"{randomness!r}")
    return _jac_transform(func, argnums, has_aux, "jacfwd", cols=True)


def hessian(func: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """Returns a function computing the Hessian of ``func`` with respect to ``argnums`` (the
    Jacobian of its Jacobian; reverse over reverse, as ember's forward products are themselves
    built from reverse passes).

    >>> import ember
    >>> from ember.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(ember.tensor([1.0, 2.0])).tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """
    inner = jacrev(jacrev(func, argnums), argnums)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any):
        _no_live_dual_level("hessian")  # PyTorch's is forward over reverse: it refuses too
        return inner(*args, **kwargs)

    return wrapper


# ---- vmap: the batched function, by a loop over the mapped dim ---------------------------------
def _in_dims_tree(in_dims: Any, args: tuple) -> list:
    """One in_dim (int or None) per leaf of args."""
    if isinstance(in_dims, int) or in_dims is None:
        leaves, _ = _flatten(args)
        return [in_dims] * len(leaves)
    if not isinstance(in_dims, (tuple, list)) or len(in_dims) != len(args):
        raise ValueError(f"vmap(in_dims={in_dims!r}): in_dims must be an int, None, or a tuple "
                         f"with one entry per positional argument ({len(args)} given)")
    out: list = []
    for d, a in zip(in_dims, args):
        n = len(_flatten(a)[0])
        if isinstance(d, int) or d is None:
            out.extend([d] * n)
        else:  # a structure matching the argument's
            sub = _flatten(d)[0]
            if len(sub) != n:
                raise ValueError(f"vmap: in_dims {d!r} does not match the structure of its "
                                 f"argument")
            out.extend(sub)
    return out


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """``func`` mapped over a dim of its inputs, as ``torch.func.vmap``: each tensor argument
    is split along its ``in_dims`` entry (None: passed whole to every call), ``func`` runs on
    each slice, and the results are stacked along ``out_dims``. ember runs the calls one by one
    (no batching rules), so any function works, at a loop's speed, and autograd sees the
    stacking; random ops draw differently per slice (``randomness="different"``).

    >>> import ember
    >>> from ember.func import vmap
    >>> vmap(lambda x: x.dot(x))(ember.tensor([[1.0, 2.0], [3.0, 4.0]])).tolist()
    [5.0, 25.0]
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"vmap: randomness must be 'error', 'different' or 'same', got "
                           f"{randomness!r}")

    @functools.wraps(func)
    def batched(*args: Any, **kwargs: Any) -> Any:
        leaves, spec = _flatten(args)
        dims = _in_dims_tree(in_dims, args)
        sizes = set()
        for x, d in zip(leaves, dims):
            if d is None:
                continue
            if not isinstance(x, Tensor):
                raise ValueError(f"vmap: got in_dim={d} for an input that is not a Tensor "
                                 f"({type(x).__name__}); use None for it")
            if not -max(x.ndim, 1) <= d < max(x.ndim, 1) or x.ndim == 0:
                raise ValueError(f"vmap: in_dim={d} is out of range for an input of "
                                 f"{x.ndim} dims")
            sizes.add(x.shape[d])
        if not sizes:
            raise ValueError("vmap: at least one input must be mapped (in_dims all None)")
        if len(sizes) > 1:
            raise ValueError(f"vmap: expected all tensors to have the same size in the mapped "
                             f"dimension, got sizes {sorted(sizes)}")
        n = sizes.pop()
        results = []
        # ember's random ops all draw from the one default generator: "same" replays its state
        # for every sample, "error" refuses a call that drew from it (as torch's vmap does)
        gen = _C.default_generator
        start = gen.get_state() if randomness != "different" else None
        seen: list = []  # each call's result tensors with their versions when it returned
        for i in range(n):
            sl = [x.select(d, i) if d is not None else x for x, d in zip(leaves, dims)]
            if randomness == "same" and i:
                gen.set_state(start)
            results.append(func(*_unflatten(sl, spec), **kwargs))
            seen.append([(t, t._version) for t in _flatten(results[-1])[0]
                         if isinstance(t, Tensor)])
            if randomness == "error" and not _C.equal(gen.get_state(), start):
                gen.set_state(start)
                raise RuntimeError(
                    "vmap: called random operation while in randomness error mode. Please either "
                    "use the 'same' or 'different' randomness flags on vmap or perform the "
                    "randomness operation out of vmap")
        # The results are stacked after every call: memory that one call returned and a later
        # call returned again after writing it in place (state shared between the samples, e.g.
        # a captured tensor updated with add_) would be stacked with its final value for every
        # sample: refuse it. (Samples writing their own slices of a mapped input are fine.)
        later: set = set()
        for i in range(len(seen) - 1, -1, -1):
            keys = []
            for t, v in seen[i]:
                key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
                keys.append(key)
                if t._version != v and t.numel() and key in later:
                    raise RuntimeError(
                        f"vmap: the tensor of shape {tuple(t.shape)} returned for sample {i} was "
                        f"modified in place by a later sample (its version went from {v} to "
                        f"{t._version}); the function writes into state shared between the "
                        f"samples (a captured or unmapped tensor). Return a new tensor instead")
            later.update(keys)
        if n == 0:
            # as torch, a size-0 batch gives size-0 results: func runs once on zero samples to
            # learn the structure, shapes and dtypes of what it returns
            sl = [x if d is None else
                  _C.zeros([s for k, s in enumerate(x.shape) if k != d % x.ndim],
                           dtype=x.dtype, device=x.device) for x, d in zip(leaves, dims)]
            results.append(func(*_unflatten(sl, spec), **kwargs))
        outs = [_flatten(r)[0] for r in results]
        out_spec = _flatten(results[0])[1]
        k = len(outs[0])
        odims = [out_dims] * k if isinstance(out_dims, int) or out_dims is None else \
            _flatten(out_dims)[0]
        if len(odims) != k:
            raise ValueError(f"vmap: out_dims {out_dims!r} does not match the {k} outputs")
        stacked = []
        for j in range(k):
            col = [o[j] for o in outs]
            if odims[j] is None:
                stacked.append(col[0])
                continue
            if not isinstance(col[0], Tensor):
                raise ValueError(f"vmap: the function must return tensors, got "
                                 f"{type(col[0]).__name__}")
            if n == 0:
                stacked.append(col[0].unsqueeze(odims[j]).narrow(odims[j], 0, 0))
                continue
            stacked.append(_C.stack(col, odims[j]))
        return _unflatten(stacked, out_spec)

    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"vmap: chunk_size must be positive, got {chunk_size}")
    return batched


# ---- functional_call: a module run with other parameters and buffers --------------------------
def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = None,
                    kwargs: dict | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """``module(*args, **kwargs)`` with the named parameters and buffers replaced by the given
    tensors for the call (the module is left as it was), as ``torch.func.functional_call``.
    Gradients flow to the given tensors.

    >>> import ember
    >>> lin = ember.nn.Linear(2, 1, bias=False)
    >>> functional_call(lin, {"weight": ember.ones(1, 2)}, (ember.tensor([[1.0, 2.0]]),)).tolist()
    [[3.0]]
    """
    if isinstance(parameter_and_buffer_dicts, (list, tuple)):
        merged: dict = {}
        for d in parameter_and_buffer_dicts:
            for k, v in d.items():
                if k in merged:
                    raise ValueError(f"functional_call: {k!r} appeared in multiple dictionaries")
                merged[k] = v
    else:
        merged = dict(parameter_and_buffer_dicts)
    if strict:
        names = {n for n, _ in module.named_parameters(remove_duplicate=False)} | \
            {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing = sorted(names - set(merged))
        unexpected = sorted(set(merged) - names)
        if missing or unexpected:
            raise RuntimeError(f"functional_call got missing keys {missing} and unexpected keys "
                               f"{unexpected}")
    if tie_weights:  # a tensor given for one name stands for every name that shares it
        seen: dict = {}
        for name, t in list(module.named_parameters(remove_duplicate=False)) + \
                list(module.named_buffers(remove_duplicate=False)):
            seen.setdefault(id(t), []).append(name)
        for names in seen.values():
            given = [n for n in names if n in merged]
            if len({id(merged[n]) for n in given}) > 1:
                # tied names stand for one tensor: two values for it would be a silent pick
                raise ValueError(f"functional_call got multiple values for keys {sorted(given)}, "
                                 f"which are tied. Consider using tie_weights=False")
            if given:
                for n in names:
                    merged.setdefault(n, merged[given[0]])
    saved = []
    try:
        for name, value in merged.items():
            *path, leaf = name.split(".")
            owner = module
            for p in path:
                owner = getattr(owner, p)
            if leaf in owner._parameters:
                saved.append((owner._parameters, leaf, owner._parameters[leaf]))
                owner._parameters[leaf] = value
            elif leaf in owner._buffers:
                saved.append((owner._buffers, leaf, owner._buffers[leaf]))
                owner._buffers[leaf] = value
            else:
                # not a parameter or buffer: a plain attribute for the call, as torch does
                # (strict=True has refused such names above)
                saved.append((owner, leaf, getattr(owner, leaf, _MISSING)))
                setattr(owner, leaf, value)
        if args is None:
            args = ()
        elif not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for store, leaf, old in reversed(saved):
            if isinstance(store, dict):
                store[leaf] = old
            elif old is _MISSING:
                delattr(store, leaf)
            else:
                setattr(store, leaf, old)


_MISSING = object()


def replace_all_batch_norm_modules_(root: Any) -> Any:
    """Makes every batch norm module in ``root`` (itself included) use the batch's statistics
    always: ``running_mean``, ``running_var`` and ``num_batches_tracked`` become None and
    ``track_running_stats`` False, so ``vmap`` over a model with batch norm does not write
    per-sample statistics into shared buffers. In place; returns ``root``.

    >>> import ember
    >>> net = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
    >>> bn = replace_all_batch_norm_modules_(net)[1]
    >>> bn.running_mean is None, bn.track_running_stats
    (True, False)
    """
    from ember.nn.modules.batchnorm import _BatchNorm

    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root


def stack_module_state(models: Any) -> tuple[dict, dict]:
    """The parameters and buffers of several modules of the same structure, stacked along a new
    leading dim: ``(params, buffers)`` dicts keyed by name, as ``torch.func.stack_module_state``.
    The stacked parameters are new leaves (they require grad where the originals do); with
    ``vmap(functional_call)`` they run an ensemble in one call.

    >>> import ember
    >>> ms = [ember.nn.Linear(3, 2) for _ in range(4)]
    >>> params, buffers = stack_module_state(ms)
    >>> tuple(params["weight"].shape), params["weight"].requires_grad, buffers
    ((4, 2, 3), True, {})
    """
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    first = models[0]
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval "
                           "mode.")
    kinds = {type(m) for m in models}
    if len(kinds) != 1:
        raise RuntimeError("stack_module_state: Expected all models to be of the same class, got "
                           f"{sorted(k.__name__ for k in kinds)}")

    def stacked(named: Any, as_leaf: bool) -> dict:
        names = [n for n, _ in named(first)]
        out = {}
        for name in names:
            tensors = [dict(named(m))[name] for m in models]
            t = _C.stack([x.detach() for x in tensors])
            if as_leaf and tensors[0].requires_grad:
                t.requires_grad_(True)
            out[name] = t
        return out

    params = stacked(lambda m: m.named_parameters(), True)
    buffers = stacked(lambda m: m.named_buffers(), False)
    return params, buffers


def linearize(func: Callable, *primals: Any) -> tuple[Any, Callable]:
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is the Jacobian-vector product of
    ``func`` at ``primals`` (each call evaluates it forward-mode at that point again).

    >>> import ember
    >>> from ember.func import linearize
    >>> out, jvp_fn = linearize(lambda x: x.sin(), ember.tensor([0.0, 1.0]))
    >>> [round(v, 4) for v in jvp_fn(ember.ones(2)).tolist()]
    [1.0, 0.5403]
    """
    output = func(*primals)

    def jvp_fn(*tangents: Any) -> Any:
        if len(tangents) != len(primals):
            raise RuntimeError(f"linearize: jvp_fn expected {len(primals)} tangents (one per "
                               f"primal), got {len(tangents)}")
        return jvp(func, tuple(primals), tuple(tangents))[1]

    return output, jvp_fn


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    """``func`` as a function without visible mutations of its inputs' aliases: ember runs
    eagerly and tracks in-place ops itself, so the functionalized function computes exactly what
    ``func`` does (what PyTorch's transform guarantees); ``remove`` is ``"mutations"`` or
    ``"mutations_and_views"``.

    >>> import ember
    >>> from ember.func import functionalize
    >>> functionalize(lambda x: x.add_(1))(ember.zeros(2)).tolist()
    [1.0, 1.0]
    """
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize: remove must be 'mutations' or "
                           f"'mutations_and_views', got {remove!r}")

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapped
