"""Parametrizations: express a parameter or buffer of a module as a function of others.

``register_parametrization(module, "weight", P)`` keeps the tensor as
``module.parametrizations.weight.original`` and makes ``module.weight`` a property computing
``P(original)`` on every access (``P`` is a Module; several can be chained). If ``P`` has
``right_inverse``, the original is initialized to ``P.right_inverse(weight)`` and assigning
``module.weight = value`` stores ``right_inverse(value)``. A ``right_inverse`` returning a
tuple makes several originals (``original0``, ``original1``, ...) that ``P.forward`` takes.

>>> import ember
>>> from ember import nn
>>> from ember.nn.utils import parametrize
>>> class Symmetric(nn.Module):
...     def forward(self, X):
...         return X.triu() + X.triu(1).transpose(-1, -2)
>>> m = nn.Linear(3, 3)
>>> _ = parametrize.register_parametrization(m, "weight", Symmetric())
>>> bool((m.weight == m.weight.T).all())
True
>>> parametrize.is_parametrized(m, "weight")
True
>>> with parametrize.cached():  # each parametrized tensor computed once in the block
...     out = m(ember.ones(2, 3)) + m(ember.ones(2, 3))
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Iterator, Sequence

import ember
from ember import Tensor
from ember.nn.modules.container import ModuleDict, ModuleList
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = [
    "cached",
    "ParametrizationList",
    "register_parametrization",
    "is_parametrized",
    "remove_parametrizations",
    "type_before_parametrizations",
    "transfer_parametrizations_and_params",
]

_cache_enabled = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Within this context each parametrized tensor is computed once, at its first access,
    and reused (e.g. a weight used at every step of a recurrent network). Nestable."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register_parameter_or_buffer(module: Module, name: str, x: Tensor) -> None:
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _set_in_place(dest: Tensor, value: Tensor) -> None:
    """Gives ``dest`` the value (and shape) of ``value`` while keeping the object, so optimizers
    holding it need no update."""
    with ember.no_grad():
        if tuple(dest.shape) == tuple(value.shape) and dest.dtype == value.dtype:
            dest.copy_(value)
        else:
            dest.data = value.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the original tensor(s) they
    start from (``original``, or ``original0``, ``original1``, ... when the first
    ``right_inverse`` returns a sequence). ``module.parametrizations[name]`` is one."""

    original: Tensor
    unsafe: bool

    def __init__(
        self, modules: Sequence[Module], original: Tensor, unsafe: bool = False
    ) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = tuple(original.shape), original.dtype
        # the parametrized tensor's shape, which assignments must keep (unless unsafe)
        self._parametrized_shape = original_shape
        with ember.no_grad():
            new: Any = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass  # no right inverse: taken as the identity
        if not isinstance(new, (Tensor, tuple, list)):
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}"
            )
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}"
                )
            # the same object stays the original: an optimizer holding it keeps working
            _set_in_place(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, item in enumerate(new):
                if not isinstance(item, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors "
                        f"(list, tuple...). Got element {i} of the sequence with type "
                        f"{type(item).__name__}."
                    )
                # originals of a parameter are new parameters: add them to the optimizer
                if isinstance(original, Parameter):
                    item = Parameter(item.detach(), original.requires_grad)
                else:
                    item = item.detach().requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", item)
        if not self.unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(
                    f"A parametrization must return a tensor. Got {type(z).__name__}."
                )
            if z.dtype != original_dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized dtype: {original_dtype}\nparametrized dtype: {z.dtype}"
                )
            if tuple(z.shape) != original_shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized shape: {original_shape}\nparametrized shape: "
                    f"{tuple(z.shape)}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Stores ``value`` by running the right inverses from the last parametrization back
        to the first (what ``module.<name> = value`` does)."""
        want = getattr(self, "_parametrized_shape", None)
        if not self.unsafe and want is not None and isinstance(value, Tensor) and \
                tuple(value.shape) != want:
            # the originals would silently take the new shape (a weight of shape (5,) in a
            # Linear(3, 2)), and the module would fail later, far from the assignment
            raise ValueError(
                f"Assigning a tensor of shape {tuple(value.shape)} to a parametrized tensor of "
                f"shape {want}: a parametrization registered without `unsafe=True` keeps its "
                f"shape")
        with ember.no_grad():
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    value = module.right_inverse(value)
                else:
                    raise RuntimeError(
                        f"parametrization {type(module).__name__} does not implement "
                        "right_inverse, so the parametrized tensor cannot be assigned"
                    )
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} while "
                        f"`original` has dtype {self.original.dtype}"
                    )
                _set_in_place(self.original, value)
            else:
                if not isinstance(value, (tuple, list)) or len(value) != self.ntensors:
                    raise ValueError(
                        f"'right_inverse' must return a sequence of {self.ntensors} tensors, got "
                        f"{type(value).__name__}"
                    )
                for i, item in enumerate(value):  # all checked before any is written
                    original_i = getattr(self, f"original{i}")
                    if not isinstance(item, Tensor):
                        raise ValueError(f"Tensor {i} returned by `right_inverse` is a "
                                         f"{type(item).__name__}, not a Tensor")
                    if item.dtype != original_i.dtype:
                        raise ValueError(
                            f"Tensor {i} returned by `right_inverse` has dtype {item.dtype} "
                            f"while `original{i}` has dtype {original_i.dtype}"
                        )
                for i, item in enumerate(value):
                    _set_in_place(getattr(self, f"original{i}"), item)

    def forward(self) -> Tensor:  # type: ignore[override]
        modules = list(self)
        if self.is_tensor:
            x = modules[0](self.original)
        else:
            x = modules[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in modules[1:]:
            x = module(x)
        return x


def _inject_new_class(module: Module) -> None:
    """Gives ``module`` its own subclass (named ``Parametrized<Class>``) to hold the
    properties of its parametrized tensors."""
    cls = module.__class__

    def getstate(self: Module) -> Any:
        raise RuntimeError(
            "Serialization of parametrized modules is only supported through state_dict(); "
            "save the state dict and register the parametrizations again when loading."
        )

    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"__getstate__": getstate})


def _inject_property(module: Module, tensor_name: str) -> None:
    def get_parametrized(self: Module) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if _cache_enabled:
            key = (id(self), tensor_name)
            tensor = _cache.get(key)
            if tensor is None:
                tensor = parametrization()
                _cache[key] = tensor
            return tensor
        return parametrization()

    def set_original(self: Module, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


class _NotAModuleError(TypeError, AttributeError):
    """A parametrization that is not a Module: a TypeError, and an AttributeError as the one
    PyTorch raises there."""


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Makes ``module.<tensor_name>`` the output of ``parametrization`` applied to the stored
    original (see the module docstring). Registering a second parametrization on the same
    tensor chains it after the first. ``unsafe=True`` skips the checks that the
    parametrization keeps the tensor's shape and dtype. Returns the module.

    The original parameter object is kept (optimizers holding it keep working) unless
    ``right_inverse`` returns several tensors, which become new parameters.
    """
    if not isinstance(parametrization, Module):
        # torch fails on parametrization.train with an AttributeError; say what is wrong
        raise _NotAModuleError(
            f"register_parametrization: the parametrization must be an nn.Module (with a forward "
            f"and optionally a right_inverse), got {type(parametrization).__name__}; wrap a "
            f"function in a Module whose forward calls it")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
            if x.dtype != y.dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, "
                    f"unless the `unsafe` flag is enabled.\nmodule.{tensor_name}.dtype: "
                    f"{y.dtype}\nparametrization(module.{tensor_name}).dtype: {x.dtype}"
                )
            if tuple(x.shape) != tuple(y.shape):
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, "
                    f"unless the `unsafe` flag is enabled.\nmodule.{tensor_name}.shape: "
                    f"{tuple(y.shape)}\nparametrization(module.{tensor_name}).shape: "
                    f"{tuple(x.shape)}"
                )
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(z, Tensor):
                        raise ValueError(
                            f"parametrization.right_inverse must return a tensor. Got: "
                            f"{type(z).__name__}"
                        )
                    if z.dtype != y.dtype or tuple(z.shape) != tuple(y.shape):
                        raise ValueError(
                            "The tensor returned by parametrization.right_inverse must have the "
                            f"same dtype and shape as module.{tensor_name}, unless the `unsafe` "
                            f"flag is enabled (got {z.dtype} {tuple(z.shape)}, expected "
                            f"{y.dtype} {tuple(y.shape)})"
                        )
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(
                f"Module '{module._get_name()}' has '{tensor_name}' registered as None; there is "
                "no tensor to parametrize"
            )
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
            f"with name '{tensor_name}'"
        )
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, if given)."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(
    module: Module, tensor_name: str, leave_parametrized: bool = True
) -> Module:
    """Removes the parametrizations of ``module.<tensor_name>``: it becomes a plain parameter
    (or buffer) again, holding the current parametrized value (``leave_parametrized``) or the
    original. With a single original, the original object is kept. Returns the module."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with ember.no_grad():
                t = getattr(module, tensor_name)
            _set_in_place(original, t)
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                "parametrized in terms of a sequence of tensors."
            )
        t = getattr(module, tensor_name)
        original = Parameter(t.detach(), t.requires_grad) if t.requires_grad else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before parametrizations were registered on it."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(
    from_module: Module, to_module: Module, tensor_name: str | None = None
) -> Module:
    """Copies the parametrizations of ``from_module`` (all, or those of ``tensor_name``) onto
    ``to_module``, with the same original values; returns ``to_module``."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not is_parametrized(from_module, name):
            raise ValueError(f"'{name}' is not parametrized in {from_module}")
        plist = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        for p in plist:
            register_parametrization(to_module, name, copy.deepcopy(p), unsafe=plist.unsafe)
        target = to_module.parametrizations[name]
        with ember.no_grad():
            if plist.is_tensor:
                _set_in_place(target.original, plist.original)
            else:
                for i in range(plist.ntensors):
                    _set_in_place(getattr(target, f"original{i}"), getattr(plist, f"original{i}"))
    return to_module
