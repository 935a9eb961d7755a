"""``torch.nn.utils.prune``: pruning a module's parameters by masks, with PyTorch's mechanics.

Pruning parameter ``name`` of a module moves it to ``name + "_orig"`` (still the trainable
Parameter), adds a ``name + "_mask"`` buffer, and makes ``name`` a plain attribute holding
``orig * mask``, recomputed by a forward pre-hook before every forward. Pruning again combines
the new mask with the old one (a ``PruningContainer`` records the history); ``remove`` makes the
pruning permanent (``name`` a Parameter again, holding the pruned values).

>>> import ember
>>> from ember.nn.utils import prune
>>> lin = ember.nn.Linear(4, 2)
>>> _ = prune.l1_unstructured(lin, "weight", amount=0.5)
>>> int((lin.weight == 0).sum()), sorted(n for n, _ in lin.named_buffers())
(4, ['weight_mask'])
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from typing import Any, Iterable

import ember
from ember import Tensor

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


def _validate_amount(amount: Any) -> None:
    if not isinstance(amount, numbers.Real) or isinstance(amount, bool):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and not 0.0 <= amount <= 1.0):  # NaN too
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         "non-negative integer")


def _validate_against_size(amount: Any, size: int) -> None:
    if isinstance(amount, numbers.Integral) and amount > size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to "
                         f"prune={size}")


def _compute_nparams(amount: Any, size: int) -> int:
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(amount * size)


class BasePruningMethod(ABC):
    """A way to compute a pruning mask; its instances are the forward pre-hooks that apply it."""

    _tensor_name: str
    PRUNING_TYPE = "unstructured"

    def __call__(self, module: Any, inputs: Any) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask for tensor t, given the mask already applied (``default_mask``)."""

    def apply_mask(self, module: Any) -> Tensor:
        """The pruned tensor: ``orig * mask`` of the module's parameter."""
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return orig * mask.to(dtype=orig.dtype)

    @classmethod
    def apply(cls, module: Any, name: str, *args: Any, importance_scores: Tensor | None = None,
              **kwargs: Any) -> BasePruningMethod:
        """Prunes ``module.<name>`` with a new instance of this method (combined with earlier
        pruning of the same parameter) and returns the hook that keeps it pruned."""
        # Any failure below (a bad amount, importance scores or dim) leaves the module as it
        # was: the parameters in their order (it is the order of parameters() and of the
        # state dict) and the earlier pruning hook, without which the parameter would no
        # longer follow name_orig * name_mask.
        params_before = list(module._parameters.items())
        hooks_before = list(module._forward_pre_hooks.items())
        chains = [(h, h._pruning_methods) for _, h in hooks_before
                  if isinstance(h, PruningContainer)]
        try:
            method, orig, old = cls._start(module, name, importance_scores, *args, **kwargs)
            if old is None:
                module.register_parameter(name + "_orig", orig)
                del module._parameters[name]
                default_mask = ember.ones_like(orig)
            else:
                default_mask = getattr(module, name + "_mask").detach().clone()
            scores = importance_scores if importance_scores is not None else orig
            with ember.no_grad():
                mask = method.compute_mask(scores, default_mask=default_mask)
        except BaseException:
            module._parameters.clear()
            module._parameters.update(params_before)
            module._forward_pre_hooks.clear()
            module._forward_pre_hooks.update(hooks_before)
            for h, methods in chains:  # without the method that failed
                h._pruning_methods = methods
            raise
        if old is None:
            module.register_buffer(name + "_mask", mask)
        else:
            module._buffers[name + "_mask"] = mask
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    @classmethod
    def _start(cls, module: Any, name: str, importance_scores: Tensor | None, *args: Any,
               **kwargs: Any) -> tuple[BasePruningMethod, Tensor, Any]:
        """The new method (chained after an earlier pruning of ``name``, whose hook is taken
        off the module), the tensor it prunes and the earlier hook (or None)."""
        old = None
        hooks_to_remove = []
        for k, hook in module._forward_pre_hooks.items():
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                old = hook
                hooks_to_remove.append(k)
        if len(hooks_to_remove) > 1:
            raise RuntimeError(f"prune: more than one pruning hook on parameter {name!r}")
        for k in hooks_to_remove:
            del module._forward_pre_hooks[k]
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old is not None:
            container = old if isinstance(old, PruningContainer) else PruningContainer(old)
            container.add_pruning_method(method)
            method = container
        orig = getattr(module, name + "_orig") if old is not None else getattr(module, name)
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(orig.shape):
            raise ValueError(f"importance_scores should have the same shape as parameter {name} "
                             f"of {module}")
        return method, orig, old

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """t with this method's mask applied (without touching any module)."""
        scores = importance_scores if importance_scores is not None else t
        mask = default_mask if default_mask is not None else ember.ones_like(t)
        return t * self.compute_mask(scores, default_mask=mask)

    def remove(self, module: Any) -> None:
        """Makes the pruning permanent: the parameter holds ``orig * mask`` again, without
        the ``_orig`` / ``_mask`` pair."""
        name = self._tensor_name
        if not hasattr(module, name + "_orig"):
            raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before "
                             "pruning can be removed")
        weight = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        with ember.no_grad():
            orig.copy_(weight)
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        module.register_parameter(name, orig)


class PruningContainer(BasePruningMethod):
    """The sequence of pruning methods applied to one parameter; each new mask only prunes
    what the earlier ones kept."""

    def __init__(self, *args: BasePruningMethod) -> None:
        self._pruning_methods: tuple = ()
        if len(args) == 1 and not isinstance(args[0], BasePruningMethod):
            args = tuple(args[0])
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._pruning_methods and \
                self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. Found "
                             f"'{method._tensor_name}'")
        if method is not None:
            self._pruning_methods += (method,)
            self._tensor_name = method._tensor_name

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self) -> Any:
        return iter(self._pruning_methods)

    def __getitem__(self, idx: int) -> BasePruningMethod:
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        method = self._pruning_methods[-1]
        kind = method.PRUNING_TYPE
        new_mask = default_mask.clone()
        if kind == "unstructured":
            keep = default_mask == 1
            partial = method.compute_mask(t[keep], default_mask=default_mask[keep])
            new_mask[keep] = partial.to(new_mask.dtype)
        elif kind == "structured":
            dim = _check_dim(type(method).__name__, method.dim, t)
            others = [d for d in range(t.ndim) if d != dim]
            alive = (default_mask.sum(others) != 0) if others else default_mask != 0
            idx = alive.nonzero().reshape(-1)
            sub_t = t.index_select(dim, idx)
            sub_mask = default_mask.index_select(dim, idx)
            partial = method.compute_mask(sub_t, default_mask=sub_mask)
            new_mask = new_mask.index_copy(dim, idx, partial.to(new_mask.dtype))
        elif kind == "global":
            new_mask = method.compute_mask(t, default_mask=default_mask)
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        return new_mask


def _unstructured_mask(amount: Any, t: Tensor, default_mask: Tensor, scores: Any,
                       largest: bool) -> Tensor:
    """default_mask with the ``amount`` entries of t whose ``scores()`` are largest (or
    smallest) set to 0; scores is called only when something is pruned."""
    size = t.numel()
    _validate_against_size(amount, size)
    k = _compute_nparams(amount, size)
    mask = default_mask.clone()
    if k != 0:
        idx = scores().reshape(-1).topk(k, largest=largest).indices
        mask.view(-1)[idx] = 0
    return mask


class Identity(BasePruningMethod):
    """Prunes nothing (a mask of ones)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Any, name: str) -> BasePruningMethod:  # type: ignore[override]
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes ``amount`` (a fraction or a count) of the entries, chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: Any) -> None:
        _validate_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return _unstructured_mask(
            self.amount, t, default_mask,
            lambda: ember.rand_like(t if t.is_floating_point() else t.to(ember.float32)), True)

    @classmethod
    def apply(cls, module: Any, name: str, amount: Any) -> BasePruningMethod:  # type: ignore[override]
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the ``amount`` (a fraction or a count) entries of smallest absolute value."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: Any) -> None:
        _validate_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return _unstructured_mask(self.amount, t, default_mask, t.abs, False)

    @classmethod
    def apply(cls, module: Any, name: str, amount: Any,  # type: ignore[override]
              importance_scores: Tensor | None = None) -> BasePruningMethod:
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes ``amount`` whole channels along ``dim``, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: Any, dim: int = -1) -> None:
        _validate_amount(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if t.ndim <= 1:
            raise ValueError(f"Structured pruning can only be applied to multidimensional "
                             f"tensors. Found tensor of shape {tuple(t.shape)} with {t.ndim} "
                             "dims")
        n = t.shape[_check_dim("RandomStructured", self.dim, t)]
        _validate_against_size(self.amount, n)
        k = _compute_nparams(self.amount, n)
        keep = ember.zeros(n, dtype=default_mask.dtype)
        if n - k > 0:
            keep[ember.rand(n).topk(n - k).indices] = 1
        return default_mask * _along(keep, t.ndim, self.dim)

    @classmethod
    def apply(cls, module: Any, name: str, amount: Any, dim: int = -1  # type: ignore[override]
              ) -> BasePruningMethod:
        return super().apply(module, name, amount=amount, dim=dim)


def _check_dim(name: str, dim: Any, t: Tensor) -> int:
    """``dim`` of ``t`` made non-negative; out of range is an IndexError naming the method
    (a dim below -ndim would otherwise wrap around to another dim)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name}: dim must be an int, got {type(dim).__name__}")
    if not -t.ndim <= dim < t.ndim:
        raise IndexError(f"{name}: dim {dim} is out of range for a tensor of shape "
                         f"{tuple(t.shape)} (expected to be in range of [{-t.ndim}, "
                         f"{t.ndim - 1}])")
    return dim % t.ndim


def _along(v: Tensor, ndim: int, dim: int) -> Tensor:
    shape = [1] * ndim
    shape[dim] = v.numel()
    return v.reshape(shape)


class LnStructured(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of smallest L``n`` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: Any, n: Any, dim: int = -1) -> None:
        _validate_amount(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if t.ndim <= 1:
            raise ValueError(f"Structured pruning can only be applied to multidimensional "
                             f"tensors. Found tensor of shape {tuple(t.shape)} with {t.ndim} "
                             "dims")
        dim = _check_dim("LnStructured", self.dim, t)
        n_ch = t.shape[dim]
        _validate_against_size(self.amount, n_ch)
        k = _compute_nparams(self.amount, n_ch)
        keep_n = n_ch - k
        others = [d for d in range(t.ndim) if d != dim]
        p = float("inf") if self.n in ("inf", float("inf")) else (
            "fro" if self.n == "fro" else float(self.n))
        norm = t.norm(2.0 if p == "fro" else p, others, False)
        keep = ember.zeros(n_ch, dtype=default_mask.dtype)
        if keep_n > 0:
            keep[norm.topk(keep_n).indices] = 1
        return default_mask * _along(keep, t.ndim, dim)

    @classmethod
    def apply(cls, module: Any, name: str, amount: Any, n: Any,  # type: ignore[override]
              dim: int, importance_scores: Tensor | None = None) -> BasePruningMethod:
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes with a given mask."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ValueError(f"custom_from_mask: mask of shape {tuple(self.mask.shape)} for a "
                             f"tensor of shape {tuple(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module: Any, name: str, mask: Tensor) -> BasePruningMethod:  # type: ignore[override]
        return super().apply(module, name, mask=mask)


def identity(module: Any, name: str) -> Any:
    """Prunes nothing, but sets up the ``_orig`` / ``_mask`` pair; returns the module."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: Any, name: str, amount: Any) -> Any:
    """Prunes ``amount`` random entries of ``module.<name>``; returns the module."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Any, name: str, amount: Any,
                    importance_scores: Tensor | None = None) -> Any:
    """Prunes the ``amount`` smallest-magnitude entries of ``module.<name>``; returns the
    module."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Any, name: str, amount: Any, dim: int) -> Any:
    """Prunes ``amount`` random channels along ``dim``; returns the module."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Any, name: str, amount: Any, n: Any, dim: int,
                  importance_scores: Tensor | None = None) -> Any:
    """Prunes the ``amount`` channels along ``dim`` of smallest L``n`` norm; returns the
    module."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module: Any, name: str, mask: Tensor) -> Any:
    """Prunes ``module.<name>`` with ``mask``; returns the module."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters: Iterable, pruning_method: type, importance_scores:
                        dict | None = None, **kwargs: Any) -> None:
    """Prunes the ``(module, name)`` pairs together: the unstructured ``pruning_method``
    (L1Unstructured, RandomUnstructured) ranks all their entries at once.

    >>> import ember
    >>> from ember.nn.utils import prune
    >>> a, b = ember.nn.Linear(2, 2), ember.nn.Linear(2, 2)
    >>> prune.global_unstructured([(a, "weight"), (b, "weight")], prune.L1Unstructured,
    ...                           amount=4)
    >>> int((a.weight == 0).sum() + (b.weight == 0).sum())
    4
    """
    params = list(parameters)
    if not params:
        raise TypeError("global_unstructured(): parameters should be a non-empty iterable")
    importance_scores = importance_scores or {}
    scores = [importance_scores.get((m, n), getattr(m, n)) for m, n in params]
    masks = [getattr(m, n + "_mask", ember.ones_like(getattr(m, n))) for m, n in params]
    flat_scores = ember.cat([s.detach().reshape(-1) for s in scores])
    flat_mask = ember.cat([mk.reshape(-1) for mk in masks])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final = container.compute_mask(flat_scores, flat_mask)
    pos = 0
    for (module, name), s in zip(params, scores):
        n = s.numel()
        custom_from_mask(module, name, final[pos:pos + n].reshape(tuple(s.shape)))
        pos += n


def remove(module: Any, name: str) -> Any:
    """Makes the pruning of ``module.<name>`` permanent; returns the module."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     "can be removed")


def is_pruned(module: Any) -> bool:
    """Whether any submodule of ``module`` carries a pruning hook."""
    for _, submodule in module.named_modules():
        for hook in submodule._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False
