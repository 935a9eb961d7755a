"""``Module``: the base class of every layer and model.

>>> import ember
>>> from ember import nn
>>> class MLP(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc1 = nn.Linear(4, 8)
...         self.fc2 = nn.Linear(8, 2)
...     def forward(self, x):
...         return self.fc2(self.fc1(x).relu())
>>> model = MLP()
>>> [name for name, _ in model.named_parameters()]
['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias']
>>> model(ember.zeros(3, 4)).shape
ember.Size([3, 2])
"""

from __future__ import annotations

import copy
import itertools
import threading
import warnings
import weakref
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator, Mapping, TypeVar

import ember
from ember import Tensor
from ember.nn.parameter import Buffer, Parameter, is_lazy

__all__ = [
    "Module",
    "RemovableHandle",
    "register_module_forward_pre_hook",
    "register_module_forward_hook",
    "register_module_backward_hook",
    "register_module_full_backward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_buffer_registration_hook",
    "register_module_module_registration_hook",
    "register_module_parameter_registration_hook",
]


class RemovableHandle:
    """Returned by the ``register_*_hook`` methods; ``remove()`` unregisters the hook.

    Usable as a context manager: the hook is removed when the block exits.
    """

    _next_id = itertools.count()

    def __init__(self, hooks_dict: dict, *, extra_dicts: tuple[dict, ...] = ()) -> None:
        self.id = next(RemovableHandle._next_id)
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.extra_dict_refs = tuple(weakref.ref(d) for d in extra_dicts)

    def remove(self) -> None:
        for ref in (self.hooks_dict_ref, *self.extra_dict_refs):
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


# ---- global hooks (every Module's call runs them, before the module's own) -------------------
_global_forward_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_forward_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_forward_hooks_with_kwargs: OrderedDict[int, bool] = OrderedDict()
_global_forward_hooks_always_called: OrderedDict[int, bool] = OrderedDict()
_global_backward_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_backward_hooks: OrderedDict[int, Callable] = OrderedDict()
# None until a global backward hook is registered; then whether those are full ones (the two
# kinds cannot be mixed).
_global_is_full_backward_hook: bool | None = None
_global_buffer_registration_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_module_registration_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_parameter_registration_hooks: OrderedDict[int, Callable] = OrderedDict()


def _same_kind(t: Any, converted: Any) -> bool:
    """Whether ``t.data = converted`` can take the conversion in place (PyTorch's compatible
    shallow-copy types): two dense ember tensors (a sparse result needs a new object). A
    ``__torch_dispatch__`` wrapper (DTensor) keeps its state in Python attributes that ``.data``
    does not carry, so it only takes a conversion that keeps its dtype and device."""
    if not (isinstance(t, Tensor) and isinstance(converted, Tensor)):
        return False
    if _is_wrapper(t) or _is_wrapper(converted):
        return t.dtype == converted.dtype and t.device == converted.device
    return True


def _is_wrapper(t: Tensor) -> bool:
    return any("__torch_dispatch__" in k.__dict__ for k in type(t).__mro__ if k is not Tensor)


def _add_hook(hooks: OrderedDict, hook: Callable, extra: tuple[dict, ...] = ()) -> RemovableHandle:
    handle = RemovableHandle(hooks, extra_dicts=extra)
    hooks[handle.id] = hook
    return handle


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, args)`` to run before the ``forward`` of every module (before
    the module's own pre-hooks); a non-None result replaces the positional inputs.

    For debugging and profiling: it affects every module of the process.

    >>> import ember
    >>> from ember.nn.modules.module import register_module_forward_pre_hook
    >>> names = []
    >>> h = register_module_forward_pre_hook(lambda m, args: names.append(type(m).__name__))
    >>> _ = ember.nn.Sequential(ember.nn.Identity())(ember.ones(1))
    >>> h.remove()
    >>> names
    ['Sequential', 'Identity']
    """
    return _add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(
    hook: Callable, *, with_kwargs: bool = False, always_call: bool = False
) -> RemovableHandle:
    """Registers ``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with
    ``with_kwargs``) to run after the ``forward`` of every module, before the module's own
    forward hooks; a non-None result replaces the output. ``always_call``: run it also when
    ``forward`` raises.

    >>> import ember
    >>> from ember.nn.modules.module import register_module_forward_hook
    >>> with register_module_forward_hook(lambda m, args, out: out * 10):
    ...     ember.nn.Identity()(ember.ones(1)).item()
    10.0
    """
    handle = _add_hook(
        _global_forward_hooks,
        hook,
        (_global_forward_hooks_with_kwargs, _global_forward_hooks_always_called),
    )
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def _set_global_full(full: bool) -> None:
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is (not full):
        raise RuntimeError(
            "Cannot use both regular backward hooks and full backward hooks as global Module "
            "hooks: register only one kind (register_module_full_backward_hook is the one "
            "that reports every input's and output's gradient)"
        )
    _global_is_full_backward_hook = full


def register_module_backward_hook(hook: Callable) -> RemovableHandle:
    """The old, deprecated global backward hook (``hook(module, grad_input, grad_output)`` on
    the autograd node that produced each module's output); prefer
    ``register_module_full_backward_hook``."""
    _set_global_full(False)
    return _add_hook(_global_backward_hooks, hook)


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, grad_output)`` for every module: it runs when the gradients
    with respect to a module's outputs have been computed, and may return replacements (a
    tuple as long as ``grad_output``). Runs before the modules' own backward pre-hooks.

    >>> import ember
    >>> from ember.nn.modules.module import register_module_full_backward_pre_hook
    >>> seen = []
    >>> x = ember.ones(2, requires_grad=True)
    >>> with register_module_full_backward_pre_hook(lambda m, go: seen.append(go[0].tolist())):
    ...     ember.nn.Identity()(x).sum().backward()
    >>> seen
    [[1.0, 1.0]]
    """
    return _add_hook(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, grad_input, grad_output)`` for every module: it runs when the
    gradients with respect to a module's inputs have been computed and may return replacement
    ``grad_input``. Runs before the modules' own backward hooks (see
    ``Module.register_full_backward_hook``)."""
    _set_global_full(True)
    return _add_hook(_global_backward_hooks, hook)


def register_module_buffer_registration_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, name, buffer)``, called whenever any module registers a
    buffer; a non-None result is registered instead."""
    return _add_hook(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, name, submodule)``, called whenever any module registers a
    submodule; a non-None result is registered instead."""
    return _add_hook(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(module, name, param)``, called whenever any module registers a
    parameter; a non-None result is registered instead."""
    return _add_hook(_global_parameter_registration_hooks, hook)


def _run_registration_hooks(hooks: OrderedDict, module: Module, name: str, value: Any) -> Any:
    for hook in list(hooks.values()):
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value


# ---- full backward hooks -----------------------------------------------------------------------
class _BackwardHookFunction(ember.autograd.Function):
    """Identity on its tensor arguments: the autograd node it records is where a module's
    backward hooks see (and may replace) the gradients of the module's inputs or outputs."""

    _node_name = "BackwardHookFunctionBackward"  # torch's (torch.utils.hooks)

    @staticmethod
    def forward(ctx: Any, *tensors: Tensor) -> tuple[Tensor, ...]:
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        return grads

    @staticmethod
    def jvp(ctx: Any, *tangents: Any) -> tuple[Any, ...]:
        return tangents


def _zeros(meta: tuple) -> Tensor:
    shape, dtype, device = meta
    return ember.zeros(shape, dtype=dtype, device=device)


class _BackwardHook:
    """The state of one call of a module with full backward (pre-)hooks.

    The inputs and the outputs each go through one ``_BackwardHookFunction``. When backward
    reaches the outputs' node, its pre-hook records ``grad_output`` (letting the backward
    pre-hooks replace it); when it has run the inputs' node, that node's hook calls the user
    hooks with ``grad_input`` and the recorded ``grad_output``. Both are tuples over the
    positional inputs / outputs, None where an entry is not a tensor that requires grad.
    """

    def __init__(self, module: Module, hooks: list[Callable], pre_hooks: list[Callable]) -> None:
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.grad_outputs: tuple | None = None
        self.n_inputs = 0
        self.input_index: list[int] | None = None
        self.n_outputs = 0
        self.output_index: list[int] | None = None
        self.zero_inputs: dict[int, tuple] = {}

    @staticmethod
    def _pack(index: list[int], values: tuple, size: int) -> tuple:
        out: list[Any] = [None] * size
        for i, v in zip(index, values):
            out[i] = v
        return tuple(out)

    def _wrap(self, args: tuple) -> tuple[tuple, list[int] | None, Any]:
        """Routes the tensors of ``args`` through one identity node (when one requires grad)."""
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not index or not ember.is_grad_enabled() or not any(args[i].requires_grad for i in index):
            return args, None, None
        new = _BackwardHookFunction.apply(*(args[i] for i in index))
        node = next(t.grad_fn for t in new if t.grad_fn is not None)
        out = list(args)
        for i, t in zip(index, new):
            out[i] = t
        return tuple(out), index, node

    def setup_input_hook(self, args: tuple) -> tuple:
        new_args, index, node = self._wrap(args)
        self.n_inputs = len(args)
        self.input_index = index
        if node is not None:
            node.register_hook(self._input_hook)
            # The engine gives no gradient for inputs that do not require grad; the hooks see
            # zeros there (the identity node's materialized gradient), as in PyTorch.
            self.zero_inputs = {
                k: (tuple(args[i].shape), args[i].dtype, args[i].device)
                for k, i in enumerate(index)
                if not args[i].requires_grad
            }
        return new_args

    def setup_output_hook(self, result: Any) -> Any:
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        new_outputs, index, node = self._wrap(outputs)
        self.n_outputs = len(outputs)
        self.output_index = index
        if node is not None:
            node.register_prehook(self._output_prehook)
        return new_outputs[0] if single else new_outputs

    def _chain(self, hooks: list, packed: tuple, extra: tuple, what: str, items: str) -> tuple:
        """Calls each hook(module, packed, *extra) in turn; one that returns a tuple (of
        len(packed) gradients) replaces packed for the next."""
        for hook in hooks:
            res = hook(self.module, packed, *extra)
            if res is None:
                continue
            if not isinstance(res, (tuple, list)) or len(res) != len(packed):
                raise RuntimeError(
                    f"{self.module._get_name()}: {what} must return None or a tuple of "
                    f"{len(packed)} {items}, but returned {res!r}"
                )
            res = tuple(res)
            # checked here, where the hook's own name is known (the engine would name the
            # wrapper it runs as)
            hname = getattr(hook, "__name__", type(hook).__name__)
            for i, (new, old) in enumerate(zip(res, packed)):
                if new is None or old is None:
                    if new is not None and not isinstance(new, Tensor):
                        raise TypeError(
                            f"{self.module._get_name()}: {what} '{hname}' returned an object of "
                            f"type {type(new).__name__} at position {i}; expected a Tensor or None")
                    continue
                if not isinstance(new, Tensor):
                    raise TypeError(
                        f"{self.module._get_name()}: {what} '{hname}' returned an object of "
                        f"type {type(new).__name__} at position {i}; expected a Tensor or None")
                if tuple(new.shape) != tuple(old.shape) or new.dtype != old.dtype:
                    raise RuntimeError(
                        f"{self.module._get_name()}: {what} '{hname}' returned a gradient of "
                        f"shape {tuple(new.shape)} and dtype {new.dtype} at position {i}, but "
                        f"that gradient has shape {tuple(old.shape)} and dtype {old.dtype}")
            packed = res
        return packed

    def _output_prehook(self, grad_outputs: tuple) -> tuple | None:
        assert self.output_index is not None
        packed = self._pack(self.output_index, grad_outputs, self.n_outputs)
        packed = self._chain(
            self.pre_hooks, packed, (), "a backward pre-hook", "grad_output(s) (one per output)"
        )
        self.grad_outputs = packed
        if self.input_index is None:
            # No input requires grad: nothing else will fire, so the hooks run now, with
            # grad_input all None.
            if self.hooks:
                warnings.warn(
                    f"{self.module._get_name()}: full backward hook called with the gradients of "
                    "the module's outputs only, as none of its inputs requires grad (grad_input "
                    "is all None)",
                    UserWarning,
                    stacklevel=2,
                )
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, grad_inputs, packed)
                if res is not None and not (
                    isinstance(res, (tuple, list)) and all(r is None for r in res)
                ):
                    raise RuntimeError(
                        f"{self.module._get_name()}: none of the module's inputs requires grad, "
                        "so its backward hook must return None (or all-None grad_input), but it "
                        f"returned {res!r}"
                    )
            self.grad_outputs = None
        return tuple(packed[i] for i in self.output_index)

    def _input_hook(self, grad_inputs: tuple, grad_outputs: tuple) -> tuple | None:
        if self.grad_outputs is None:
            # The gradient reached the inputs without passing through the outputs (e.g. a
            # double backward): there is no grad_output to report.
            return None
        assert self.input_index is not None
        grad_inputs = tuple(
            _zeros(self.zero_inputs[k]) if g is None and k in self.zero_inputs else g
            for k, g in enumerate(grad_inputs)
        )
        packed = self._pack(self.input_index, grad_inputs, self.n_inputs)
        packed = self._chain(
            self.hooks, packed, (self.grad_outputs,), "a full backward hook",
            "grad_input(s) (one per positional input)",
        )
        self.grad_outputs = None
        # inputs that do not require grad take no gradient (whatever the hooks returned)
        return tuple(
            None if k in self.zero_inputs else packed[i] for k, i in enumerate(self.input_index)
        )


class _WrappedHook:
    """A module's old-style backward hook as an autograd-node hook."""

    def __init__(self, hook: Callable, module: Module) -> None:
        self.hook = hook
        self.module_ref = weakref.ref(module)

    def __call__(self, grad_inputs: tuple, grad_outputs: tuple) -> Any:
        module = self.module_ref()
        if module is None:
            raise RuntimeError(
                "backward hook of a Module that no longer exists: keep the module alive until "
                "backward has run"
            )
        return self.hook(module, grad_inputs, grad_outputs)


# the type of the dict state_dict fills (PyTorch's annotation name, also Module.T_destination)
T_destination = TypeVar("T_destination", bound=Mapping[str, Any])


class _ModulelessHook:
    """A load-state-dict pre-hook registered with ``with_module=False``: called without the
    module (the hooks are otherwise all called with it first). A plain object, so modules
    holding one still pickle and deep-copy."""

    def __init__(self, hook: Callable) -> None:
        self.hook = hook

    def __call__(self, module: Module, *args: Any) -> Any:
        return self.hook(*args)


class _PublicStateDictHook:
    """A state-dict post-hook registered through the public API that cannot take the
    ``_from_public_api`` mark itself (a bound method, a builtin)."""

    _from_public_api = True

    def __init__(self, hook: Callable) -> None:
        self.hook = hook

    def __call__(self, *args: Any) -> Any:
        return self.hook(*args)


def _mark_public_state_dict_hook(hook: Callable) -> Callable:
    """Marks ``hook`` as registered by ``register_state_dict_post_hook`` (whose hooks must
    return None), as PyTorch marks it: on the hook itself where it takes attributes."""
    try:
        hook._from_public_api = True  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        return _PublicStateDictHook(hook)
    return hook


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it did not find and those it did not use."""

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


_MODULE_TO_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")


def _parse_module_to(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """(dtype, device) of a ``Module.to`` call, parsed as PyTorch's ``to`` overloads:
    ``(device=None, dtype=None, non_blocking=False, copy=False)``, ``(dtype, non_blocking,
    copy)`` and ``(tensor, non_blocking, copy)``, with ``memory_format`` by keyword."""
    kw = dict(kwargs)
    dtype = kw.pop("dtype", None)
    device = kw.pop("device", None)
    kw.pop("non_blocking", None)  # copies are synchronous here
    kw.pop("copy", None)
    fmt = kw.pop("memory_format", None)
    if fmt is not None and not isinstance(fmt, ember.memory_format):
        raise TypeError(f"Module.to(): memory_format must be an ember.memory_format, got "
                        f"{type(fmt).__name__}")
    if kw:
        raise TypeError(f"Module.to() got unexpected keyword arguments {sorted(kw)}")

    def bad() -> TypeError:
        got = ", ".join(type(a).__name__ for a in args)
        return TypeError(
            f"Module.to() received an invalid combination of arguments - got ({got}), but "
            f"expected one of: (device=None, dtype=None, non_blocking=False, copy=False), "
            f"(dtype, non_blocking=False, copy=False), (tensor, non_blocking=False, copy=False)")

    rest = list(args)
    if rest and not isinstance(rest[0], bool):
        a = rest.pop(0)
        if isinstance(a, ember.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif a is None or isinstance(a, (str, ember.device, int)):
            device = a
            if rest:  # (device, dtype, ...): a bool here would be taken for the dtype
                if not (rest[0] is None or isinstance(rest[0], ember.dtype)):
                    raise bad()
                dtype = rest.pop(0)
        else:
            raise bad()
    # what is left is non_blocking and copy, given positionally as bools
    if len(rest) > 2 or not all(isinstance(a, bool) for a in rest) or \
            (rest and len(args) == len(rest)):
        raise bad()
    if dtype is not None and (not isinstance(dtype, ember.dtype) or
                              str(dtype).split(".")[-1] not in _MODULE_TO_DTYPES):
        raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got "
                        f"desired dtype={dtype}")
    return dtype, device


def _addindent(s: str, spaces: int) -> str:
    """Indents every line of s but the first (child reprs nested in their parent's)."""
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


# Depth of nested Module.__call__ per thread: the outermost call adds a note naming the failing
# layer's path in the model to the error (the message itself stays the one torch gives).
_call_state = threading.local()
_ANNOTATED_ERRORS = (RuntimeError, ValueError, TypeError, IndexError)


def _short_repr(module: Module) -> str:
    r = repr(module)
    return r if "\n" not in r else f"{module._get_name()}(...)"


def _annotate_error(err: BaseException, module: Module, outermost: bool) -> None:
    """Remembers the innermost failing module; the outermost call names it in a note, which
    tracebacks print under the message (``str(err)`` is unchanged, as in PyTorch)."""
    if not isinstance(err, _ANNOTATED_ERRORS):
        return
    d = err.__dict__
    if "_ember_failed_module" not in d:
        d["_ember_failed_module"] = module
    if not outermost or d.get("_ember_annotated"):
        return
    failed = d["_ember_failed_module"]
    path = None
    for name, m in module.named_modules(prefix="model"):
        if m is failed:
            path = name
            break
    if path is None:  # the failing module is not a registered submodule (a plain attribute)
        path = f"model.<{failed._get_name()}>"
    note = f"in {path} ({_short_repr(failed)})"
    if hasattr(err, "add_note"):
        err.add_note(note)
    else:  # Python 3.10: kept where 3.11's traceback would print it
        d.setdefault("__notes__", []).append(note)
    d["_ember_annotated"] = True


class Module:
    """Base class for all neural-network modules.

    Subclasses call ``super().__init__()`` first, assign parameters, buffers and submodules as
    attributes, and define ``forward``. Calling the module runs its hooks around ``forward``.
    """

    dump_patches: bool = False
    _version: int = 1
    T_destination = T_destination
    training: bool
    call_super_init: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if (args or kwargs) and not self.call_super_init:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments: Module.__init__ takes "
                f"none (positional {args!r}, keyword {sorted(kwargs)!r})"
            )
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = OrderedDict()
        d["_forward_hooks_always_called"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()
        d["_is_full_backward_hook"] = None
        d["_state_dict_hooks"] = OrderedDict()
        d["_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation of the module; every subclass defines it."""
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    # ---- registration ------------------------------------------------------------------------
    def _check_new_name(self, kind: str, name: Any, container: dict) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name must not contain ".", got "{name}"')
        if name == "":
            raise KeyError(f"{kind} name must not be an empty string")
        if hasattr(self, name) and name not in container:
            raise KeyError(f"attribute '{name}' already exists")

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Adds a tensor that is state but not a parameter (e.g. running statistics).

        Persistent buffers are part of ``state_dict``; non-persistent ones are not.

        >>> import ember
        >>> m = ember.nn.Module()
        >>> m.register_buffer("steps", ember.zeros(()), persistent=False)
        >>> list(m.state_dict())
        []
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_new_name("buffer", name, self._buffers)
        if tensor is not None and not ember.is_tensor(tensor):  # dense or sparse
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(ember.Tensor or None required)"
            )
        tensor = _run_registration_hooks(_global_buffer_registration_hooks, self, name, tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Adds a parameter (or a ``None`` placeholder) under ``name``.

        >>> import ember
        >>> m = ember.nn.Module()
        >>> m.register_parameter("w", ember.nn.Parameter(ember.zeros(2)))
        >>> [n for n, _ in m.named_parameters()]
        ['w']
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_new_name("parameter", name, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(ember.nn.Parameter or None required)"
            )
        if param is not None and param.grad_fn is not None:
            raise ValueError(
                f"cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                "created explicitly; to express '{name}' as a function of another Tensor, compute "
                "the value in the forward() method"
            )
        param = _run_registration_hooks(_global_parameter_registration_hooks, self, name, param)
        self._parameters[name] = param

    def add_module(self, name: str, module: Module | None) -> None:
        """Adds a child module under ``name`` (also reachable as an attribute)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_new_name("module", name, self._modules)
        module = _run_registration_hooks(_global_module_registration_hooks, self, name, module)
        self._modules[name] = module

    def register_module(self, name: str, module: Module | None) -> None:
        """Alias of ``add_module``."""
        self.add_module(name, module)

    def get_submodule(self, target: str) -> Module:
        """The submodule at a dotted path such as ``"encoder.layers.0"`` ("" is self).

        >>> import ember
        >>> seq = ember.nn.Sequential(ember.nn.Linear(2, 2))
        >>> seq.get_submodule("0")
        Linear(in_features=2, out_features=2, bias=True)
        """
        if target == "":
            return self
        mod: Module = self
        for item in target.split("."):
            # any attribute that is a module (not only registered ones), with torch's messages
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Puts ``module`` at a dotted path such as ``"encoder.layers.0"``: replaces the
        submodule there, or (unless ``strict``) adds it to an existing parent.

        >>> import ember
        >>> seq = ember.nn.Sequential(ember.nn.Linear(2, 2))
        >>> seq.set_submodule("0", ember.nn.ReLU())
        >>> seq
        Sequential(
          (0): ReLU()
        )
        """
        if target == "":
            raise ValueError("set_submodule: cannot set the submodule without a target name")
        if not isinstance(module, Module):
            raise ValueError(f"set_submodule: `module` is not an nn.Module, found "
                             f"{type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at a dotted path such as ``"fc1.weight"``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at a dotted path such as ``"bn.running_mean"``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    def get_extra_state(self) -> Any:
        """Extra state to store in ``state_dict`` (override together with ``set_extra_state``)."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called."
        )

    def set_extra_state(self, state: Any) -> None:
        """Restores what ``get_extra_state`` returned."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called."
        )

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    # ---- attribute protocol ------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")

        def drop(*stores: dict | set) -> None:
            for s in stores:
                s.discard(name) if isinstance(s, set) else s.pop(name, None)

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            d.pop(name, None)
            drop(self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(ember.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
        elif isinstance(value, Buffer):
            if d.get("_buffers") is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            d.pop(name, None)
            drop(self._parameters, self._modules)
            self.register_buffer(name, value, persistent=value.persistent)
        elif isinstance(value, Module):
            modules = d.get("_modules")
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            d.pop(name, None)
            drop(self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = _run_registration_hooks(
                _global_module_registration_hooks, self, name, value
            )
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(ember.nn.Module or None expected)"
                )
            d["_modules"][name] = _run_registration_hooks(
                _global_module_registration_hooks, self, name, value
            )
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not ember.is_tensor(value):  # dense or sparse
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(ember.Tensor or None expected)"
                )
            d["_buffers"][name] = _run_registration_hooks(
                _global_buffer_registration_hooks, self, name, value
            )
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        if name in d.get("_parameters", ()):
            del d["_parameters"][name]
        elif name in d.get("_buffers", ()):
            del d["_buffers"][name]
            d["_non_persistent_buffers_set"].discard(name)
        elif name in d.get("_modules", ()):
            del d["_modules"][name]
        else:
            object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        attrs = set(dir(type(self))) | set(self.__dict__)
        attrs |= set(self._parameters) | set(self._buffers) | set(self._modules)
        return sorted(a for a in attrs if not a[:1].isdigit())

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        # modules pickled before these attributes existed
        for name in ("_backward_pre_hooks", "_backward_hooks", "_forward_hooks_always_called"):
            self.__dict__.setdefault(name, OrderedDict())
        self.__dict__.setdefault("_is_full_backward_hook", None)

    def __deepcopy__(self, memo: dict) -> Module:
        # Tensors deep-copy by value into plain tensors; parameters must stay Parameters (and
        # shared ones stay shared), so they are copied first into the memo.
        for p in self.parameters():
            if id(p) not in memo:
                memo[id(p)] = copy.deepcopy(p, memo)  # keeps a subclass's type
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            new.__dict__[k] = copy.deepcopy(v, memo)
        return new

    # ---- iteration ---------------------------------------------------------------------------
    def _named_members(
        self, get_members: Callable, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or id(v) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of this module (and of its submodules when ``recurse``), once each."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs in registration order; shared ones appear once."""
        return self._named_members(
            lambda m: m._parameters.items(), prefix, recurse, remove_duplicate
        )

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers of this module (and of its submodules when ``recurse``)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs in registration order."""
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self) -> Iterator[Module]:
        """The direct submodules, once each."""
        for _, m in self.named_children():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) for the direct submodules, once each."""
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def modules(self) -> Iterator[Module]:
        """This module and all its submodules, depth first, once each."""
        for _, m in self.named_modules():
            yield m

    def named_modules(
        self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """(dotted path, module) for this module ("" or ``prefix``) and all submodules."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    # ---- modes and conversions ---------------------------------------------------------------
    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Compiles this module's ``__call__`` with :func:`ember.compile`, which takes the same
        arguments (checked there): ember runs modules eagerly, so the module goes on running as
        it is (hooks, train/eval and all). Returns None, like ``torch.nn.Module.compile``.

        >>> import warnings, ember
        >>> m = ember.nn.Linear(2, 1)
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     m.compile(mode="reduce-overhead")
        >>> m(ember.ones(1, 2)).shape
        ember.Size([1, 1])
        """
        import ember

        ember.compile(self.__call__, *args, **kwargs)

    def train(self, mode: bool = True) -> Module:
        """Sets training mode on this module and its submodules; returns self."""
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be boolean, got {type(mode).__name__}")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        """``train(False)``: e.g. dropout off, batch norm uses running statistics."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Sets ``requires_grad`` on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Resets the gradients of all parameters (to ``None`` by default, else to zeros)."""
        for p in self.parameters():
            g = p.grad
            if g is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g.zero_()

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Calls ``fn`` on every submodule (children first) and then on self; returns self.

        >>> import ember
        >>> def init(m):
        ...     if isinstance(m, ember.nn.Linear):
        ...         ember.nn.init.zeros_(m.weight)
        >>> net = ember.nn.Sequential(ember.nn.Linear(2, 2)).apply(init)
        >>> net[0].weight.sum().item()
        0.0
        """
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor], memo: dict | None = None) -> Module:
        """Replaces every parameter, gradient and buffer t by fn(t) (shared ones stay shared).

        As in PyTorch, a parameter keeps its object (``param.data = fn(param)``, also when the
        dtype or device changes), so optimizers made before ``.to()`` / ``.double()`` still hold
        it; ``ember.__future__`` switches to new objects (overwrite) or ``swap_tensors``."""
        from ember import __future__ as future

        if memo is None:
            memo = {}
        for m in self.children():
            m._apply(fn, memo)
        overwrite = future.get_overwrite_module_params_on_conversion()
        swap = future.get_swap_module_params_on_conversion()
        for key, p in self._parameters.items():
            if p is None:
                continue
            if id(p) in memo:
                self._parameters[key] = memo[id(p)]
                continue
            with ember.no_grad():
                new = fn(p)
            if is_lazy(p):  # only its dtype/device can change: it stays uninitialized
                p.data = new
                memo[id(p)] = p
                continue
            if new is p:
                memo[id(p)] = p
                continue
            g = p.grad
            if swap:
                if g is not None:
                    p.grad = None  # the old gradient is converted and swapped on its own below
                try:
                    ember.utils.swap_tensors(p, Parameter(new, p.requires_grad))
                except Exception as e:
                    if g is not None:
                        p.grad = g
                    raise RuntimeError(
                        f"_apply(): Couldn't swap {self._get_name()}.{key}") from e
                result = p
            elif not overwrite and _same_kind(p, new):
                p.data = new  # keep the Parameter object: optimizers holding it still work
                result = p
            else:
                result = Parameter(new, p.requires_grad)
                self._parameters[key] = result
            if g is not None:
                with ember.no_grad():
                    g2 = fn(g)
                if swap:
                    g2.requires_grad_(g.requires_grad)
                    try:
                        ember.utils.swap_tensors(g, g2)
                    except Exception as e:
                        raise RuntimeError(
                            f"_apply(): Couldn't swap {self._get_name()}.{key}.grad") from e
                    result.grad = g
                elif result is p and not overwrite and _same_kind(g, g2):
                    if g2 is not g:
                        g.data = g2  # the .grad object stays too
                else:
                    result.grad = g2.detach().requires_grad_(g.requires_grad)
            memo[id(p)] = result
        for key, b in self._buffers.items():
            if b is not None:
                if is_lazy(b):
                    b.data = fn(b)
                else:
                    self._buffers[key] = fn(b)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Converts parameters and buffers: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``,
        ``to(tensor)``. Only floating-point tensors change dtype.

        >>> import ember
        >>> ember.nn.Linear(2, 2).to(ember.float64).weight.dtype
        ember.float64
        """
        dtype, device = _parse_module_to(args, kwargs)
        fmt = kwargs.get("memory_format")
        if dtype is not None and dtype.is_complex:
            warnings.warn(
                "Complex modules are a new feature under active development whose design may "
                "change, and some modules might not work as expected when using complex tensors "
                "as parameters or buffers.", UserWarning, stacklevel=2)

        def convert(t: Tensor) -> Tensor:
            if device is not None:
                t = t.to(device)
            if dtype is not None and (t.is_floating_point() or t.is_complex()) and \
                    t.dtype != dtype:
                t = t.to(dtype)
            # channels_last lays out the 4-d (channels_last_3d the 5-d) tensors; others stay
            if fmt is ember.channels_last and t.dim() == 4 or \
                    fmt is ember.channels_last_3d and t.dim() == 5 or \
                    fmt is ember.contiguous_format:
                t = t.contiguous(memory_format=fmt)
            return t

        return self._apply(convert)

    def _cast_floating(self, dtype: Any) -> Module:
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() and t.dtype != dtype else t)

    def float(self) -> Module:
        """Floating-point parameters and buffers to float32."""
        return self._cast_floating(ember.float32)

    def double(self) -> Module:
        """Floating-point parameters and buffers to float64."""
        return self._cast_floating(ember.float64)

    def half(self) -> Module:
        """Floating-point parameters and buffers to float16."""
        return self._cast_floating(ember.float16)

    def bfloat16(self) -> Module:
        """Floating-point parameters and buffers to bfloat16."""
        return self._cast_floating(ember.bfloat16)

    def type(self, dst_type: Any) -> Module:
        """All parameters and buffers (not only floating ones) to ``dst_type``: a dtype or a
        tensor type name such as ``"torch.DoubleTensor"``, as ``Tensor.type`` takes."""
        if isinstance(dst_type, str):
            return self._apply(lambda t: t.type(dst_type))
        if not isinstance(dst_type, ember.dtype):
            raise TypeError(f"Module.type(): dst_type must be an ember.dtype or a tensor type "
                            f"name such as 'torch.DoubleTensor', got {type(dst_type).__name__}")
        return self._apply(lambda t: t.to(dst_type) if t.dtype != dst_type else t)

    def cpu(self) -> Module:
        """Moves parameters and buffers to the CPU."""
        return self.to("cpu")

    def to_empty(self, *, device: Any, recurse: bool = True) -> Module:
        """Moves parameters and buffers to ``device`` without copying their values: new,
        uninitialized storage of the same shapes and dtypes. The way from a model built on the
        ``meta`` device (no memory) to a real one, filled by ``load_state_dict`` or init.

        >>> import ember
        >>> with ember.device("meta"):
        ...     m = ember.nn.Linear(4, 4)
        >>> m.to_empty(device="cpu").weight.device
        device(type='cpu')
        """

        def empty(t: Tensor) -> Tensor:
            return ember.empty_like(t, device=device)

        if recurse:
            return self._apply(empty)
        saved = self._modules
        object.__setattr__(self, "_modules", {})  # only this module's own tensors
        try:
            return self._apply(empty)
        finally:
            object.__setattr__(self, "_modules", saved)

    def cuda(self, device: Any = None) -> Module:
        """Moves parameters and buffers to a CUDA device."""
        return self.to("cuda" if device is None else ember.device("cuda", device) if isinstance(device, int) else device)

    def xpu(self, device: Any = None) -> Module:
        """Moves parameters and buffers to an XPU device (as :meth:`cuda`)."""
        return self._apply(lambda t: t.xpu(device))

    def mtia(self, device: Any = None) -> Module:
        """Moves parameters and buffers to an MTIA device (as :meth:`cuda`)."""
        return self._apply(lambda t: t.mtia(device))

    def ipu(self, device: Any = None) -> Module:
        """Moves parameters and buffers to an IPU device (as :meth:`cuda`)."""
        return self._apply(lambda t: t.ipu(device))

    def share_memory(self) -> Module:
        """Moves parameters and buffers to shared memory (for multiprocessing)."""
        return self._apply(lambda t: t.share_memory_())

    # ---- calling -----------------------------------------------------------------------------
    def _run_forward_hook(self, hid: int, hook: Callable, args: tuple, kwargs: dict,
                          result: Any) -> Any:
        """One forward hook (with kwargs if it was registered so); its non-None return value
        replaces the result."""
        if hid in self._forward_hooks_with_kwargs or hid in _global_forward_hooks_with_kwargs:
            res = hook(self, args, kwargs, result)
        else:
            res = hook(self, args, result)
        return result if res is None else res

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        depth = getattr(_call_state, "depth", 0)
        _call_state.depth = depth + 1
        d = self.__dict__  # subscripting it is cheaper than four attribute lookups
        try:
            if not (
                d["_forward_pre_hooks"]
                or d["_forward_hooks"]
                or d["_backward_hooks"]
                or d["_backward_pre_hooks"]
                or _global_forward_pre_hooks
                or _global_forward_hooks
                or _global_backward_hooks
                or _global_backward_pre_hooks
            ):
                return self.forward(*args, **kwargs)
            return self._call_with_hooks(args, kwargs)
        except Exception as err:
            _annotate_error(err, self, depth == 0)
            raise
        finally:
            _call_state.depth = depth

    # PyTorch's names for the call path, which some programs call or wrap directly: the full
    # call (hooks included), and forward alone (what tracing runs)
    _compiled_call_impl: Callable | None = None

    def _call_impl(self, *args: Any, **kwargs: Any) -> Any:
        return Module.__call__(self, *args, **kwargs)

    def _wrapped_call_impl(self, *args: Any, **kwargs: Any) -> Any:
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)
        return Module.__call__(self, *args, **kwargs)

    def _slow_forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, args: tuple, kwargs: dict) -> Any:
        full_hooks: list[Callable] = []
        old_hooks: list[Callable] = []
        pre_hooks: list[Callable] = []
        if self._backward_pre_hooks or _global_backward_pre_hooks:
            pre_hooks = self._get_backward_pre_hooks()
        if self._backward_hooks or _global_backward_hooks:
            full_hooks, old_hooks = self._get_backward_hooks()
        called: set[int] = set()
        result = None
        # (the always_call forward hooks run also when a forward pre-hook raises, as in PyTorch:
        # they are what programs clean up in)
        try:
            for hid, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
                if hid in self._forward_pre_hooks_with_kwargs:
                    res = hook(self, args, kwargs)
                    if res is not None:
                        if not (isinstance(res, tuple) and len(res) == 2):
                            raise RuntimeError(
                                "forward pre-hook registered with with_kwargs=True must return "
                                f"None or a tuple of (new_args, new_kwargs), but got {res!r}"
                            )
                        args, kwargs = res
                else:
                    res = hook(self, args)
                    if res is not None:
                        args = res if isinstance(res, tuple) else (res,)
            bw_hook = None
            if full_hooks or pre_hooks:
                bw_hook = _BackwardHook(self, full_hooks, pre_hooks)
                args = bw_hook.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hid, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                called.add(hid)
                result = self._run_forward_hook(hid, hook, args, kwargs, result)
        except Exception:
            for hid, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                if hid in called or not (
                    hid in self._forward_hooks_always_called
                    or hid in _global_forward_hooks_always_called
                ):
                    continue
                try:
                    result = self._run_forward_hook(hid, hook, args, kwargs, result)
                except Exception as hook_err:  # the forward's error is the one to report
                    warnings.warn(
                        "a forward hook registered with always_call=True raised an exception "
                        f"that was silenced as another error was raised in forward: {hook_err}",
                        UserWarning,
                        stacklevel=3,
                    )
            raise
        if bw_hook is not None:
            if not isinstance(result, (Tensor, tuple)):
                warnings.warn(
                    f"{self._get_name()}: for backward hooks to be called, the module's output "
                    f"should be a Tensor or a tuple of Tensors, but it is a {type(result).__name__}",
                    UserWarning,
                    stacklevel=3,
                )
            result = bw_hook.setup_output_hook(result)
        if old_hooks:
            self._attach_old_backward_hooks(old_hooks, args, result)
        return result

    def _get_backward_hooks(self) -> tuple[list[Callable], list[Callable]]:
        """(full, old-style) backward hooks that apply to this module, the global ones first."""
        full: list[Callable] = []
        old: list[Callable] = []
        (full if _global_is_full_backward_hook else old).extend(_global_backward_hooks.values())
        (full if self._is_full_backward_hook else old).extend(self._backward_hooks.values())
        return full, old

    def _get_backward_pre_hooks(self) -> list[Callable]:
        return [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]

    def _attach_old_backward_hooks(self, hooks: list[Callable], args: tuple, result: Any) -> None:
        var = result
        while not isinstance(var, Tensor):
            if isinstance(var, dict):
                var = next((v for v in var.values() if isinstance(v, Tensor)), None)
            elif isinstance(var, (list, tuple)) and var:
                var = var[0]
            else:
                var = None
            if var is None:
                return
        grad_fn = var.grad_fn
        if grad_fn is None:
            return
        for hook in hooks:
            grad_fn.register_hook(_WrappedHook(hook, self))
        self._maybe_warn_old_backward_hook(args, result, grad_fn)

    def _maybe_warn_old_backward_hook(self, inputs: Any, result: Any, grad_fn: Any) -> None:
        """The old hooks see one autograd node's gradients; warn where that is not the
        module's (several output nodes, nested outputs, several nodes in forward)."""

        def warn(what: str) -> None:
            warnings.warn(
                f"{self._get_name()}: using a non-full backward hook {what} is deprecated; the "
                "hook will miss some gradients. Use register_full_backward_hook to get the "
                "gradients of every input and output.",
                FutureWarning,
                stacklevel=4,
            )

        outputs = (result,) if isinstance(result, Tensor) else result
        if not (isinstance(outputs, tuple) and all(isinstance(r, Tensor) for r in outputs)):
            warn("on a module that does not return a Tensor or a tuple of Tensors")
            return
        inputs = (inputs,) if isinstance(inputs, Tensor) else inputs
        if not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
            warn("on a module whose inputs are not all Tensors")
            return
        out_nodes = {id(r.grad_fn): r.grad_fn for r in outputs if r.grad_fn is not None}
        if not out_nodes or (len(out_nodes) == 1 and id(grad_fn) not in out_nodes):
            # grad_fn is compared by identity: ember returns one Python object per node
            warn("when outputs are nested in Python data structures")
        elif len(out_nodes) > 1:
            warn("when outputs are produced by different autograd nodes")
        else:
            in_nodes = {id(i.grad_fn) for i in inputs if i.grad_fn is not None}
            next_nodes = {id(n) for n, _ in grad_fn.next_functions}
            if in_nodes != next_nodes:
                warn("when the forward contains several autograd nodes")

    def register_forward_pre_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """``hook(module, args)`` (or ``hook(module, args, kwargs)`` with ``with_kwargs``) runs
        before ``forward``; a non-None result replaces the inputs.

        >>> import ember
        >>> lin = ember.nn.Identity()
        >>> h = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        >>> lin(ember.ones(1)).item()
        2.0
        >>> h.remove()
        """
        handle = RemovableHandle(
            self._forward_pre_hooks, extra_dicts=(self._forward_pre_hooks_with_kwargs,)
        )
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(
        self,
        hook: Callable,
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> RemovableHandle:
        """``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``) runs after
        ``forward``; a non-None result replaces the output. ``always_call`` runs it also when
        ``forward`` raises."""
        handle = RemovableHandle(
            self._forward_hooks,
            extra_dicts=(self._forward_hooks_with_kwargs, self._forward_hooks_always_called),
        )
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """``hook(module, grad_output)`` runs when the gradients with respect to the module's
        outputs have been computed; it may return a tuple of replacements (as long as
        ``grad_output``) that backward continues with.

        ``grad_output`` has one entry per output (a tuple output gives several), None where an
        output is not a tensor that requires grad. Hooks must not modify their arguments in
        place.

        >>> import ember
        >>> m = ember.nn.Identity()
        >>> h = m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 3,))
        >>> x = ember.ones(2, requires_grad=True)
        >>> m(x).sum().backward()
        >>> x.grad.tolist()
        [3.0, 3.0]
        """
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs when the gradients with respect to
        the module's inputs have been computed; it may return a replacement ``grad_input``.

        ``grad_input`` has one entry per positional argument of the call (None for a
        non-tensor, or a tensor that does not require grad) and ``grad_output`` one per output.
        Keyword arguments are not tracked. While such hooks are registered, the module's
        forward must not modify its inputs in place, nor may its outputs be modified in place
        before backward (a RuntimeError says so).

        >>> import ember
        >>> lin = ember.nn.Linear(3, 2)
        >>> seen = []
        >>> h = lin.register_full_backward_hook(
        ...     lambda mod, gi, go: seen.append((tuple(gi[0].shape), tuple(go[0].shape))))
        >>> lin(ember.ones(4, 3, requires_grad=True)).sum().backward()
        >>> seen
        [((4, 3), (4, 2))]
        """
        if self._is_full_backward_hook is False:
            raise RuntimeError(
                f"{self._get_name()}: cannot use both regular backward hooks "
                "(register_backward_hook) and full backward hooks on a single Module; use only "
                "register_full_backward_hook"
            )
        self._is_full_backward_hook = True
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """Deprecated: ``hook(module, grad_input, grad_output)`` on the autograd node that
        produced the module's output, so it sees that node's gradients only (it warns when
        they are not the module's). Use ``register_full_backward_hook``."""
        if self._is_full_backward_hook is True:
            raise RuntimeError(
                f"{self._get_name()}: cannot use both regular backward hooks and full backward "
                "hooks (register_full_backward_hook) on a single Module; use only one kind"
            )
        self._is_full_backward_hook = False
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        return handle

    # ---- state dict --------------------------------------------------------------------------
    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, prefix, keep_vars)`` runs before this module writes its state."""
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` runs after this module wrote its
        state and may edit ``state_dict`` in place; it must return None."""
        hook = _mark_public_state_dict_hook(hook)
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """The older post-hook: as :meth:`register_state_dict_post_hook`, but a non-None return
        value replaces the state dict (which only the root module's ``state_dict`` returns)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError(
                "Cannot register the same function as the state dict post hook that was "
                "previously registered via register_state_dict_post_hook"
            )
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def _register_load_state_dict_pre_hook(self, hook: Callable,
                                           with_module: bool = False) -> RemovableHandle:
        """``hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` runs before this module loads its entries; ``with_module=True`` passes
        the module first (as :meth:`register_load_state_dict_pre_hook` does). Its return value
        is ignored; it may edit ``state_dict`` and the key / error lists in place."""
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[handle.id] = hook if with_module else _ModulelessHook(hook)
        return handle

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` runs before this module loads its entries."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, incompatible_keys)`` runs after ``load_state_dict`` loaded this
        module; it may edit the missing/unexpected key lists in place."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if self._has_extra_state():
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(
        self, *args: Any, destination: dict | None = None, prefix: str = "", keep_vars: bool = False
    ) -> dict[str, Any]:
        """An ordered dict of every parameter and persistent buffer by dotted name.

        Tensors are detached aliases of the module's (``keep_vars=True``: the objects
        themselves); copy them if the module keeps training.

        >>> import ember
        >>> list(ember.nn.Linear(2, 3).state_dict())
        ['weight', 'bias']
        """
        if args:  # the positional (destination, prefix, keep_vars) form
            names = ("destination", "prefix", "keep_vars")
            if len(args) > 3:
                raise TypeError(f"state_dict() takes at most 3 positional arguments, got {len(args)}")
            warnings.warn("Positional args are being deprecated, use kwargs instead. Refer to "
                          "https://pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.state_dict for details.", FutureWarning, stacklevel=2)
            values = dict(zip(names, args))
            destination = values.get("destination", destination)
            prefix = values.get("prefix", prefix)
            keep_vars = values.get("keep_vars", keep_vars)
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()  # type: ignore[attr-defined]
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, local_metadata)
            if res is None:
                continue
            if getattr(hook, "_from_public_api", False):
                raise RuntimeError("state_dict post-hook must return None")
            destination = res  # a _register_state_dict_hook hook's new state dict
        return destination

    def _load_sparse_buffer(self, name: str, key: str, value: Any, current: Any,
                            error_msgs: list[str]) -> None:
        """A sparse buffer, or a sparse value for one, is replaced (as PyTorch's sparse copy_
        replaces indices and values) in the buffer's layout, dtype and device."""
        if tuple(value.shape) != tuple(current.shape):
            error_msgs.append(
                f"size mismatch for {key}: copying a param with shape {value.shape} from "
                f"checkpoint, the shape in current model is {current.shape}."
            )
            return
        new = value.detach().to(device=current.device, dtype=current.dtype)
        if isinstance(current, Tensor):
            new = new.to_dense()
        elif isinstance(new, Tensor) or new.layout is not current.layout:
            new = new.to_sparse(layout=current.layout)
        self._buffers[name] = new

    def _load_from_state_dict(
        self,
        state_dict: Mapping[str, Any],
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        for hook in self._load_state_dict_pre_hooks.values():
            hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        assign = local_metadata.get("assign_to_params_buffers", False)
        persistent_buffers = {
            k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set
        }
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items()) if v is not None}
        for name, current in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if name in persistent_buffers and ember.is_tensor(value) and (
                    not isinstance(value, Tensor) or not isinstance(current, Tensor)):
                self._load_sparse_buffer(name, key, value, current, error_msgs)
                continue
            if not isinstance(value, Tensor):
                error_msgs.append(
                    f"'{key}': expected an ember.Tensor in the state dict, got {type(value).__name__}"
                )
                continue
            if is_lazy(value) or is_lazy(current):
                if is_lazy(value) and not is_lazy(current):
                    error_msgs.append(
                        f"'{key}': the state dict holds an uninitialized parameter or buffer (from "
                        "a lazy module that has not run forward), the model an initialized one of "
                        f"shape {tuple(current.shape)}; run the lazy module's forward before saving"
                    )
                elif is_lazy(current) and not is_lazy(value):
                    error_msgs.append(
                        f"'{key}': the model's parameter is uninitialized (a lazy module without "
                        "the load hook that materializes it)"
                    )
                continue  # both uninitialized: nothing to copy
            if tuple(value.shape) != tuple(current.shape):
                error_msgs.append(  # PyTorch's wording
                    f"size mismatch for {key}: copying a param with shape {value.shape} from "
                    f"checkpoint, the shape in current model is {current.shape}."
                )
                continue
            try:
                if ember.__future__.get_swap_module_params_on_conversion():
                    # PyTorch's swap path: module_load maps the value, then it is swapped into
                    # the existing object (which keeps its identity and requires_grad)
                    with ember.no_grad():
                        new = current.module_load(value, assign=assign)
                    if new is value or new is current:
                        raise RuntimeError(
                            "module_load returned one of self or other, please .detach() the "
                            "result if returning one of the inputs in module_load")
                    if isinstance(current, Parameter):
                        if not isinstance(new, Parameter):
                            new = Parameter(new, requires_grad=current.requires_grad)
                        else:
                            new.requires_grad_(current.requires_grad)
                    ember.utils.swap_tensors(current, new)
                    del new
                elif assign:
                    if isinstance(current, Parameter):
                        new = value if isinstance(value, Parameter) else Parameter(value, current.requires_grad)
                        new.requires_grad_(current.requires_grad)  # the model's flag stays
                        setattr(self, name, new)
                    else:
                        setattr(self, name, value)
                else:
                    if current.device.type == "meta" and value.device.type != "meta":
                        # a copy into a meta tensor keeps nothing: say so, or the checkpoint's
                        # values are dropped without a word (PyTorch's warning)
                        warnings.warn(
                            f"for {key}: copying from a non-meta parameter in the checkpoint to a "
                            "meta parameter in the current model, which is a no-op. (Did you mean "
                            "to pass `assign=True` to assign items in the state dictionary to "
                            "their corresponding key in the module instead of copying them in "
                            "place?)", UserWarning, stacklevel=2)
                    if value.is_complex() and not current.is_complex():
                        # (PyTorch's copy_ warns once per process; a checkpoint's imaginary
                        # parts dropped without a word is data lost, so each key says so)
                        warnings.warn(
                            f"for {key}: copying the complex {value.dtype} values of the state "
                            f"dict into a parameter of dtype {current.dtype} discards their "
                            "imaginary parts", UserWarning, stacklevel=2)
                    with ember.no_grad():
                        current.copy_(value)
            except Exception as ex:  # report every failing key, not just the first
                error_msgs.append(
                    f"while copying '{key}' (state dict: {tuple(value.shape)} {value.dtype}, model: "
                    f"{tuple(current.shape)} {current.dtype}): {ex}"
                )
        extra_key = prefix + "_extra_state"
        if self._has_extra_state():
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    first = key[len(prefix):].split(".", 1)[0]
                    if first not in self._modules and first not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> _IncompatibleKeys:
        """Copies parameters and buffers from ``state_dict`` into this module.

        With ``strict`` (default) every key must match; any mismatch (missing, unexpected, wrong
        shape) raises a RuntimeError listing each offending key. ``assign=True`` makes the
        module's tensors the state dict's tensors instead of copying into them. Returns the
        missing and unexpected keys.

        >>> import ember
        >>> a, b = ember.nn.Linear(2, 2), ember.nn.Linear(2, 2)
        >>> b.load_state_dict(a.state_dict())
        <All keys matched successfully>
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"Expected state_dict to be dict-like, got {type(state_dict).__name__}."
            )
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata  # type: ignore[attr-defined]

        def load(module: Module, local: dict, prefix: str) -> None:
            meta = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                meta["assign_to_params_buffers"] = True
            module._load_from_state_dict(local, prefix, meta, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state = {k: v for k, v in local.items() if k.startswith(child_prefix)}
                    load(child, child_state, child_prefix)
            keys = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, keys) is not None:
                    raise AssertionError(  # PyTorch's class and wording
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be "
                        "modified, it should be done inplace."
                    )

        load(self, state_dict, "")
        if strict:  # PyTorch's wording, which programs and people look for
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing ----------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text between this module's parentheses in its repr (override in layers)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            f"({name}): " + _addindent(repr(m), 2) for name, m in self._modules.items()
        ]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"
