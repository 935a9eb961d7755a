"""``Optimizer``: parameter groups, per-parameter state, state_dict and step hooks.

Each optimizer's ``step`` gathers the parameters of a group that have gradients together with
their state into lists and hands them to one update function in ``ember.optim._functional``
(one plain per-parameter implementation today; a fused multi-tensor kernel can take the same
lists).

>>> import ember
>>> w = ember.nn.Parameter(ember.ones(2))
>>> opt = ember.optim.SGD([w], lr=0.5)
>>> (w * w).sum().backward()
>>> opt.step()
>>> w.tolist()
[0.0, 0.0]
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import numbers
from collections import OrderedDict, defaultdict
from typing import Any, Callable, Sequence

import ember
from ember import Tensor
from ember.nn.modules.module import RemovableHandle

__all__ = [
    "Optimizer",
    "required",
    "register_optimizer_step_pre_hook",
    "register_optimizer_step_post_hook",
]

# Hooks around the step of every optimizer (global pre-hooks run before an optimizer's own,
# global post-hooks after).
_global_optimizer_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_optimizer_post_hooks: OrderedDict[int, Callable] = OrderedDict()


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(optimizer, args, kwargs)`` to run before the ``step`` of every
    optimizer; it may return ``(new_args, new_kwargs)``.

    >>> import ember
    >>> from ember.optim.optimizer import register_optimizer_step_pre_hook
    >>> names = []
    >>> w = ember.nn.Parameter(ember.ones(1))
    >>> with register_optimizer_step_pre_hook(lambda opt, a, kw: names.append(type(opt).__name__)):
    ...     ember.optim.SGD([w], lr=0.1).step()
    >>> names
    ['SGD']
    """
    handle = RemovableHandle(_global_optimizer_pre_hooks)
    _global_optimizer_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(optimizer, args, kwargs)`` to run after the ``step`` of every
    optimizer (after the optimizer's own post-hooks)."""
    handle = RemovableHandle(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[handle.id] = hook
    return handle


class _RequiredParameter:
    """Marks a hyper-parameter that every param group must give (no default)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


# the on/off options of the optimizers (None: the optimizer's choice)
_FLAGS = ("maximize", "nesterov", "amsgrad", "foreach", "fused", "capturable", "differentiable",
          "decoupled_weight_decay")


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _scalar_dtype() -> Any:
    """The dtype of scalar state such as ``step``: float64 when that is the default dtype."""
    return ember.float64 if ember.get_default_dtype() == ember.float64 else ember.float32


def _with_step_hooks(step: Callable) -> Callable:
    @functools.wraps(step)
    def wrapper(self: Optimizer, *args: Any, **kwargs: Any) -> Any:
        if ember._C._profiler_enabled():  # recorded as PyTorch names it, while profiling
            from ember.profiler import record_function

            with record_function(f"Optimizer.step#{type(self).__name__}.step"):
                return hooked(self, *args, **kwargs)
        return hooked(self, *args, **kwargs)

    def hooked(self: Optimizer, *args: Any, **kwargs: Any) -> Any:
        pre = (*_global_optimizer_pre_hooks.values(), *self._optimizer_step_pre_hooks.values())
        # the hooks see step's positional arguments with the optimizer first, as PyTorch's do
        # (a pre-hook's new args then carry it too)
        args = (self, *args)
        for hook in pre:
            res = hook(self, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError(
                        f"{type(self).__name__}: a step pre-hook must return None or "
                        f"(new_args, new_kwargs), but returned {res!r}"
                    )
                args, kwargs = res
        self._check_groups_before_step()
        out = step(*args, **kwargs)
        for hook in (*self._optimizer_step_post_hooks.values(), *_global_optimizer_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._ember_hooked = True  # type: ignore[attr-defined]
    return wrapper


class Optimizer:
    """Base class: ``Optimizer(params, defaults)``.

    ``params`` is an iterable of tensors, of (name, tensor) pairs, or of dicts (param groups)
    each holding ``"params"`` and optional per-group hyper-parameters that override
    ``defaults``.
    """

    # the optimizer named in the errors of its update (each built-in one sets its own)
    _name = "Optimizer"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_ember_hooked", False):
            cls.step = _with_step_hooks(step)  # type: ignore[method-assign]

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        if defaults.get("differentiable"):
            # PyTorch's differentiable=True records the update itself in autograd (for
            # meta-learning); ember's updates run under no_grad
            raise NotImplementedError(
                f"{type(self).__name__}: differentiable=True (autograd through the optimizer "
                "step) is not supported by ember's optimizers"
            )
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._init_state_dict_hooks()
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(
                f"{name}: params should be an iterable of Tensors or dicts, but got a single "
                "Tensor; wrap it in a list"
            )
        if isinstance(params, (set, frozenset)):
            raise TypeError(
                f"{name}: parameters must be given in an ordered collection (a set's order "
                "changes between runs); use a list instead"
            )
        if isinstance(params, dict):
            raise TypeError(
                f"{name}: params should be an iterable of Tensors or dicts, but got a dict; wrap "
                "a single param group in a list"
            )
        groups = list(params)
        if not groups:
            raise ValueError(f"{name}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self) -> str:
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"  # each group's lines end with a newline: groups
            for key in sorted(group):   # are separated by an empty line, as in PyTorch
                if key not in ("params", "param_names"):
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_optimizer_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_optimizer_step_post_hooks", OrderedDict())
        self._init_state_dict_hooks()

    def _init_state_dict_hooks(self) -> None:
        for name in (
            "_optimizer_state_dict_pre_hooks",
            "_optimizer_state_dict_post_hooks",
            "_optimizer_load_state_dict_pre_hooks",
            "_optimizer_load_state_dict_post_hooks",
        ):
            self.__dict__.setdefault(name, OrderedDict())

    # ---- hyper-parameter checks ------------------------------------------------------------
    # The common checks, declared per optimizer: ``lr >= 0`` and each of ``_nonneg`` >= 0, then
    # (``_has_betas``) a valid ``betas`` pair. None: no common checks (custom subclasses).
    _nonneg: tuple[str, ...] | None = None
    _has_betas = False
    # whether every floating state tensor has its parameter's shape (or is 0-d), which
    # load_state_dict then checks; LBFGS keeps flattened vectors of all parameters instead
    _state_shaped_like_params = True

    def _check_group(self, group: dict[str, Any]) -> None:
        """Raises ValueError for an invalid hyper-parameter of ``group`` (per optimizer)."""
        if group.get("fused") and group.get("foreach"):
            raise RuntimeError(f"{type(self).__name__}: `fused` and `foreach` cannot be `True` "
                               "together.")
        if self._nonneg is None:
            return
        self._check_lr(group)
        self._check_nonneg(group, *self._nonneg)
        if self._has_betas:
            self._check_betas(group)

    def _check_groups_before_step(self) -> None:
        """The constructor's checks of ``lr`` and the non-negative hyper-parameters, again at
        each step, for what was changed in ``param_groups`` since (by hand or by a scheduler):
        a str is a TypeError, a NaN (or an infinite lr) a ValueError, before any parameter is
        written -- a NaN lr would silently turn every parameter into NaN. Tensor values are
        not read (that would synchronize a device each step); negative numbers are left to the
        constructor (as PyTorch, a changed group may go negative on purpose)."""
        name = type(self).__name__
        for i, group in enumerate(self.param_groups):
            for k in _FLAGS:
                v = group.get(k)
                # a str flag would be truthy ("no" turning maximize on) or reach a kernel that
                # names only itself; ints (0/1) are taken as the bools they stand for
                if v is None or isinstance(v, bool):
                    continue
                if not isinstance(v, numbers.Integral):
                    raise TypeError(f"{name}.step: param group {i} has {k}={v!r} "
                                    f"({type(v).__name__}); expected a bool")
                group[k] = bool(v)
        if self._nonneg is None:
            return
        for i, group in enumerate(self.param_groups):
            for k in ("lr", *self._nonneg, *(("betas",) if self._has_betas else ())):
                values = group.get(k)
                pair = k == "betas" and isinstance(values, (tuple, list))
                for j, v in enumerate(values if pair else (values,)):
                    if v is None or isinstance(v, Tensor):
                        continue
                    what = f"{k}[{j}]" if pair else k
                    if not _is_number(v):
                        raise TypeError(f"{name}.step: param group {i} has {what}={v!r} "
                                        f"({type(v).__name__}); expected a number or a Tensor")
                    if v != v or (k == "lr" and abs(v) == float("inf")):
                        raise ValueError(f"{name}.step: param group {i} has {what}={v}, which "
                                         "would make every parameter of the group NaN")

    def _fail(self, what: str) -> None:
        raise ValueError(f"{type(self).__name__}: {what}")

    def _need_number(self, key: str, value: Any) -> None:
        # a str or None compared with 0.0 would raise a TypeError that names neither the
        # optimizer nor the hyper-parameter
        if not isinstance(value, (numbers.Real, Tensor)):
            raise TypeError(f"{type(self).__name__}: {key} must be a number or a Tensor, got "
                            f"{value!r} ({type(value).__name__})")

    def _check_lr(self, group: dict[str, Any]) -> None:
        lr = group["lr"]
        self._need_number("lr", lr)
        if isinstance(lr, Tensor):
            if lr.numel() != 1:
                self._fail(f"a Tensor lr must have one element, got shape {tuple(lr.shape)}")
            lr = lr.item()
        if not 0.0 <= lr:
            self._fail(f"invalid learning rate {lr} (expected lr >= 0)")

    def _check_nonneg(self, group: dict[str, Any], *keys: str) -> None:
        for k in keys:
            self._need_number(k, group[k])
            if not 0.0 <= group[k]:
                self._fail(f"invalid {k} value {group[k]} (expected {k} >= 0)")

    def _check_betas(self, group: dict[str, Any]) -> None:
        betas = group["betas"]
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            self._fail(f"betas must be a pair (beta1, beta2), got {betas!r}")
        for i, b in enumerate(betas):
            self._need_number(f"betas[{i}]", b)
            if not 0.0 <= b < 1.0:
                self._fail(f"invalid beta parameter at index {i}: {b} (expected 0 <= beta < 1)")

    # ---- groups ------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Adds a group of parameters with its own hyper-parameters (others from defaults).

        >>> import ember
        >>> a, b = ember.nn.Parameter(ember.ones(1)), ember.nn.Parameter(ember.ones(1))
        >>> opt = ember.optim.SGD([a], lr=0.1)
        >>> opt.add_param_group({"params": [b], "lr": 0.01})
        >>> [g["lr"] for g in opt.param_groups]
        [0.1, 0.01]
        """
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: a param group must be a dict, but got {type(param_group).__name__}")
        group = dict(param_group)
        params = group.get("params")
        if params is None:
            raise ValueError(f"{name}: a param group needs a 'params' entry")
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(
                f"{name}: parameters must be given in an ordered collection (a set's order "
                "changes between runs); use a list instead"
            )
        else:
            params = list(params)
        names = None
        if params and all(isinstance(p, tuple) and len(p) == 2 for p in params):
            names = [n for n, _ in params]
            params = [p for _, p in params]
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"{name}: can only optimize Tensors, but parameter {i} of the group is a "
                    f"{type(p).__name__}"
                )
            if not p.is_leaf:
                raise ValueError(
                    f"{name}: can't optimize a non-leaf Tensor (parameter {i} of the group, "
                    f"shape {tuple(p.shape)}, was computed by {p.grad_fn.name()}); optimize the "
                    "leaf tensors it was computed from, or detach it first"
                )
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            dup = next(i for i, x in enumerate(ids) if ids.index(x) != i)
            raise ValueError(
                f"{name}: a parameter group contains the same parameter more than once (entry "
                f"{dup}, shape {tuple(params[dup].shape)}); pass each parameter once"
            )
        group["params"] = params
        if names is not None:
            group["param_names"] = names
        if self.param_groups and ("param_names" in self.param_groups[0]) != ("param_names" in group):
            # state_dict() keys the state by name or by position: one optimizer cannot mix both
            had = "with" if "param_names" in self.param_groups[0] else "without"
            new = "with" if "param_names" in group else "without"
            raise ValueError(
                f"{name}: all optimizer param groups should be with/without names "
                f"(the existing groups are {had} names); cannot add a param group {new} names "
                "to the optimizer"
            )
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(
                    f"{name}: parameter group didn't specify a value of required optimization "
                    f"parameter {key}"
                )
            group.setdefault(key, default)
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing & set(ids):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        self._check_group(group)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Resets the gradients of all parameters (to None by default, else to zeros)."""
        for group in self.param_groups:
            for p in group["params"]:
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

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one optimization step (re-evaluating the loss with ``closure`` if given)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    @staticmethod
    def _eval_closure(closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with ember.enable_grad():
            return closure()

    # ---- hooks -------------------------------------------------------------------------------
    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before each ``step``; it may return new
        ``(args, kwargs)``."""
        handle = RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after each ``step``."""
        handle = RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    @staticmethod
    def _add_hook(hooks: OrderedDict, hook: Callable, prepend: bool) -> RemovableHandle:
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer)`` runs before ``state_dict`` builds the dict (``prepend``: before
        the hooks already registered)."""
        return self._add_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` runs after ``state_dict`` built the dict; a non-None
        result replaces it.

        >>> import ember
        >>> opt = ember.optim.SGD([ember.nn.Parameter(ember.ones(1))], lr=0.1)
        >>> def tag(opt, sd):
        ...     sd["tag"] = "v1"
        >>> h = opt.register_state_dict_post_hook(tag)
        >>> opt.state_dict()["tag"]
        'v1'
        """
        return self._add_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` runs before ``load_state_dict`` reads the dict (a
        shallow copy of the one given); a non-None result is loaded instead."""
        return self._add_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """``hook(optimizer)`` runs after ``load_state_dict`` restored the state."""
        return self._add_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # ---- state dict --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``.

        Parameters are replaced by their position across all groups. The state tensors are the
        optimizer's own (not copies). State-dict pre- and post-hooks run around it.
        """
        for hook in list(self._optimizer_state_dict_pre_hooks.values()):
            hook(self)
        sd = self._build_state_dict()
        for hook in list(self._optimizer_state_dict_post_hooks.values()):
            res = hook(self, sd)
            if res is not None:
                sd = res
        return sd

    def _build_state_dict(self) -> dict[str, Any]:
        index: dict[int, int] = {}
        counter = itertools.count()
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                if id(p) not in index:
                    index[id(p)] = next(counter)
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores hyper-parameters and state from ``state_dict`` (copying its tensors, cast
        to each parameter's dtype; ``step`` keeps its dtype). Resuming is bit-exact.
        Load-state-dict pre- and post-hooks run around it."""
        if isinstance(state_dict, dict):
            state_dict = dict(state_dict)  # pre-hooks may edit it; the caller's stays intact
        for hook in list(self._optimizer_load_state_dict_pre_hooks.values()):
            res = hook(self, state_dict)
            if res is not None:
                state_dict = res
        self._load_state_dict(state_dict)
        for hook in list(self._optimizer_load_state_dict_post_hooks.values()):
            hook(self)

    def _load_state_dict(self, state_dict: dict[str, Any]) -> None:
        name = type(self).__name__
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(
                f"{name}.load_state_dict: expected a dict with 'state' and 'param_groups' (from "
                "Optimizer.state_dict()), got "
                + (f"keys {sorted(state_dict)}" if isinstance(state_dict, dict) else type(state_dict).__name__)
            )
        saved_groups = state_dict["param_groups"]
        if not isinstance(state_dict["state"], dict) or not isinstance(saved_groups, (list, tuple)) \
                or not all(isinstance(sg, dict) and isinstance(sg.get("params"), (list, tuple))
                           for sg in saved_groups):
            raise ValueError(
                f"{name}.load_state_dict: expected 'state' to be a dict and 'param_groups' a list "
                "of dicts with a 'params' list (from Optimizer.state_dict()), got "
                f"{type(state_dict['state']).__name__} and {type(saved_groups).__name__}"
            )
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{name}.load_state_dict: the state dict has {len(saved_groups)} parameter groups, "
                f"the optimizer has {len(self.param_groups)}"
            )
        for i, (g, sg) in enumerate(zip(self.param_groups, saved_groups)):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError(
                    f"{name}.load_state_dict: parameter group {i} has {len(sg['params'])} "
                    f"parameters in the state dict but {len(g['params'])} in the optimizer"
                )
            # A hyperparameter (a number, pair or Tensor) the state dict lacks: the dict is from
            # another optimizer or was edited, and step() would fail on it with a bare KeyError
            # (PyTorch's way). Options (bools, None) absent from older checkpoints are filled
            # from the optimizer, as PyTorch's __setstate__ does.
            lacking = sorted(k for k, cur in g.items() if k not in sg and k in self.defaults
                             and not (cur is None or isinstance(cur, bool)))
            if lacking:
                extra = sorted(k for k in sg if k not in g and k not in ("params", "initial_lr"))
                hint = (f"; it holds {extra}, which {name} does not take: is it from another "
                        "optimizer?") if extra else ""
                raise ValueError(
                    f"{name}.load_state_dict: parameter group {i} of the state dict lacks the "
                    f"hyperparameter(s) {lacking} that {name} needs{hint}"
                )
            for k, cur in g.items():
                new = sg.get(k)
                # a number (lr, momentum, ...) must stay one: a string would fail only in step()
                if _is_number(cur) and k in sg and not (_is_number(new) or isinstance(new, Tensor)):
                    raise TypeError(
                        f"{name}.load_state_dict: parameter group {i} has {k}={new!r} "
                        f"({type(new).__name__}) in the state dict; expected a number like the "
                        f"optimizer's {k}={cur!r}"
                    )
        id_map = {
            saved: p
            for g, sg in zip(self.param_groups, saved_groups)
            for saved, p in zip(sg["params"], g["params"])
        }

        def cast(param: Tensor, value: Any, key: Any = None) -> Any:
            if isinstance(value, Tensor):
                if key != "step" and value.device != param.device:
                    # state follows its parameter (a checkpoint loaded with map_location="cpu"
                    # resumes on the GPU); step counters stay where they are, as in PyTorch
                    value = value.to(param.device)
                if key != "step" and param.is_floating_point():
                    # PyTorch's rule: state follows a floating parameter's dtype, whatever the
                    # saved dtype was (an int64 exp_avg from a hand-made state dict included)
                    value = value.to(param.dtype)
                    if self._state_shaped_like_params and \
                            tuple(value.shape) not in ((), tuple(param.shape)):
                        raise ValueError(
                            f"{name}.load_state_dict: state '{key}' has shape {tuple(value.shape)} "
                            f"but its parameter has shape {tuple(param.shape)}"
                        )
                return value.detach().clone()
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v, key) for v in value)
            return copy.deepcopy(value)

        state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = cast(p, v)
            else:
                state[k] = copy.deepcopy(v)
        new_groups = []
        for g, sg in zip(self.param_groups, saved_groups):
            ng = copy.deepcopy({k: v for k, v in sg.items() if k != "params"})
            for k, cur in g.items():  # options an older checkpoint lacks keep their value
                if k not in ng and k in self.defaults:
                    ng[k] = cur
            ng["params"] = g["params"]
            if "param_names" in g and "param_names" not in ng:
                ng["param_names"] = g["param_names"]
            new_groups.append(ng)
        self.state = state
        self.param_groups = new_groups

    # ---- helpers for subclasses --------------------------------------------------------------
    def _params_with_grad(self, group: dict[str, Any]) -> list[Tensor]:
        out = []
        for p in group["params"]:
            if p.grad is not None:
                out.append(p)
        return out

    def _gather(
        self,
        group: dict[str, Any],
        keys: Sequence[str],
        init: dict[str, Callable[[Tensor], Tensor]] | None = None,
    ) -> tuple[list[Tensor], list[Tensor], list[Tensor], dict[str, list[Tensor]]]:
        """The lists one update function takes for ``group``: ``(params, grads, steps,
        state)`` over the parameters that have a gradient, ``state[k]`` listing the per-parameter
        entry ``k`` for every ``k`` in ``keys``.

        A parameter without state gets it here (lazily, on its first step): ``step`` first,
        then each of ``keys`` in order, zeros like the parameter unless ``init`` maps the key to
        a function of the parameter.
        """
        params = self._params_with_grad(group)
        grads: list[Tensor] = []
        steps: list[Tensor] = []
        state: dict[str, list[Tensor]] = {k: [] for k in keys}
        for p in params:
            grads.append(_grad_of(p, self._name))
            st = self.state[p]
            if not st:
                st["step"] = _init_step()
                for k in keys:
                    st[k] = init[k](p) if init and k in init else ember.zeros_like(p)
            step = st.get("step")
            if _is_number(step):  # a plain count (an older or hand-made state dict)
                step = st["step"] = ember.tensor(float(step), dtype=_scalar_dtype())
            if not isinstance(step, Tensor):
                raise TypeError(f"{self._name}: the state of a parameter of shape "
                                f"{tuple(p.shape)} has step={step!r} ({type(step).__name__}); "
                                "expected a number or a Tensor")
            for k in keys:
                if not isinstance(st.get(k), Tensor):
                    raise TypeError(
                        f"{self._name}: the state of a parameter of shape {tuple(p.shape)} has "
                        f"{k}={st.get(k)!r:.60} ({type(st.get(k)).__name__}); expected a Tensor"
                    )
                state[k].append(st[k])
            steps.append(step)
        # A complex parameter updates as the pair of reals it holds (PyTorch's rule): the
        # element-wise squares, square roots and signs then act on real and imaginary parts
        # apart, and the in-place updates of the views land in the complex tensors.
        if any(p.is_complex() for p in params):
            params, grads = _real_views(params), _real_views(grads)
            state = {k: _real_views(v) for k, v in state.items()}
        return params, grads, steps, state


def _real_views(ts: list[Tensor]) -> list[Tensor]:
    """Each complex (dense) tensor of ``ts`` as its ``view_as_real``; others as they are."""
    return [ember.view_as_real(t) if t.is_complex() and t.layout == ember.strided else t
            for t in ts]


def _init_step() -> Tensor:
    return ember.zeros((), dtype=_scalar_dtype())


def _zeros_like(p: Tensor) -> Tensor:
    return ember.zeros_like(p)


# Optimizers whose update of a sparse gradient equals that of its dense form (rows without a
# gradient get a zero update and, for Adagrad, add zero to the sum), as PyTorch's sparse paths.
_SPARSE_AS_DENSE = ("SGD", "Adagrad")


def _grad_of(p: Tensor, optimizer: str, weight_decay: float = 0) -> Tensor:
    g = p.grad
    if g.dtype != p.dtype and isinstance(g, Tensor) and tuple(g.shape) == tuple(p.shape) \
            and p.is_leaf and p.grad_dtype in (None, g.dtype):
        g = g.to(p.dtype)  # a gradient kept in another dtype on purpose (Tensor.grad_dtype)
    if g.dtype != p.dtype or tuple(g.shape) != tuple(p.shape):
        raise RuntimeError(
            f"{optimizer}: gradient of dtype {g.dtype} and shape {tuple(g.shape)} does not match "
            f"its parameter ({p.dtype}, {tuple(p.shape)})"
        )
    if not isinstance(g, Tensor):  # a sparse gradient (nn.Embedding(sparse=True))
        if optimizer not in _SPARSE_AS_DENSE:
            hint = ", please consider SparseAdam instead" if optimizer.startswith("Adam") else ""
            raise RuntimeError(f"{optimizer} does not support sparse gradients{hint}")
        if weight_decay != 0:  # PyTorch raises too (a sparse grad plus a dense decay term)
            raise RuntimeError(f"{optimizer}: the weight_decay option is not compatible with "
                               "sparse gradients")
        return g.to_dense()
    return g


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer: Optimizer, swapin_parameters: dict[str, Tensor],
                                       swapin_optim_state: dict[str, Any]) -> Any:
    """For the block, ``optimizer`` steps (and its hooks see) the given parameters and state
    instead of its own: ``swapin_parameters`` in the optimizer's parameter order (usually
    ``model.named_parameters()``'s), ``swapin_optim_state`` shaped like ``state_dict()``
    (state by packed id, groups listing ids and their hyperparameters). In-place updates reach
    the given tensors; the optimizer's own groups and state come back on exit.

    >>> import ember
    >>> p = ember.nn.Parameter(ember.ones(2)); opt = ember.optim.SGD([p], lr=0.1)
    >>> q = ember.ones(2); q.grad = ember.ones(2)
    >>> with swap_in_optimizer_params_and_state(opt, {"p": q}, opt.state_dict()):
    ...     opt.step()
    >>> q.tolist(), p.tolist()
    ([0.8999999761581421, 0.8999999761581421], [1.0, 1.0])
    """
    tensors = list(swapin_parameters.values())
    groups = swapin_optim_state.get("param_groups")
    if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
        raise ValueError(f"swap_in_optimizer_params_and_state: swapin_optim_state must have "
                         f"{len(optimizer.param_groups)} param_groups like the optimizer's")
    count = sum(len(g["params"]) for g in optimizer.param_groups)
    if len(tensors) != count:
        raise ValueError(f"swap_in_optimizer_params_and_state: {len(tensors)} parameters given "
                         f"for an optimizer of {count}")
    saved_state = optimizer.state
    saved_groups = [dict(g) for g in optimizer.param_groups]  # keeps each params list's identity
    state: defaultdict = defaultdict(dict)
    by_id = swapin_optim_state.get("state", {})
    pos = 0
    try:
        for live, given in zip(optimizer.param_groups, groups):
            n = len(live["params"])
            if len(given["params"]) != n:
                raise ValueError(f"swap_in_optimizer_params_and_state: a group of {n} "
                                 f"parameters got {len(given['params'])} ids")
            params = tensors[pos:pos + n]
            live.update({k: v for k, v in given.items() if k != "params"})
            live["params"] = params
            for p, pid in zip(params, given["params"]):
                state[p] = dict(by_id.get(pid, {}))  # a copy: new keys stay local
            pos += n
        optimizer.state = state
        yield
    finally:
        for live, snapshot in zip(optimizer.param_groups, saved_groups):
            live.clear()
            live.update(snapshot)
        optimizer.state = saved_state
