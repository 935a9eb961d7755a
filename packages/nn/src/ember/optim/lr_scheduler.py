"""Learning-rate schedules: each ``step()`` sets the ``lr`` of every param group.

Schedulers are called once per epoch (or per batch for the cyclic ones) after
``optimizer.step()``. The chainable forms update the current ``lr`` multiplicatively, so that
several schedulers can act on one optimizer; ``step(epoch)`` uses the closed form where one
exists.

>>> import ember
>>> from ember.optim.lr_scheduler import StepLR
>>> opt = ember.optim.SGD([ember.nn.Parameter(ember.zeros(1))], lr=1.0)
>>> sched = StepLR(opt, step_size=2, gamma=0.5)
>>> lrs = []
>>> for _ in range(5):
...     lrs.append(sched.get_last_lr()[0])
...     opt.step()
...     sched.step()
>>> lrs
[1.0, 1.0, 0.5, 0.5, 0.25]
"""

from __future__ import annotations

import functools
import math
import numbers
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Sequence

from ember import Tensor
from ember.optim.optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "SequentialLR",
    "PolynomialLR",
    "CosineAnnealingLR",
    "ChainedScheduler",
    "ReduceLROnPlateau",
    "CyclicLR",
    "CosineAnnealingWarmRestarts",
    "OneCycleLR",
]


def _set_group_value(group: dict[str, Any], key: str, value: Any) -> None:
    if isinstance(group[key], Tensor):
        group[key].fill_(float(value))
    else:
        group[key] = value


def _group_values(optimizer: Optimizer, key: str) -> list[Any]:
    return [g[key].clone() if isinstance(g[key], Tensor) else g[key] for g in optimizer.param_groups]


def _per_group(name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """value repeated for each param group, or a list of one value per group."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have one value per param group: got {len(value)} values for "
                f"{len(optimizer.param_groups)} groups"
            )
        return list(value)
    return [value] * len(optimizer.param_groups)


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _track_step_calls(optimizer: Optimizer) -> None:
    """Wraps ``optimizer.step`` (on the instance, once) so that it records on the optimizer that
    it has been called: a scheduler stepped before its optimizer can then warn."""
    if getattr(optimizer.step, "_ember_tracks_step_calls", False):
        return
    opt_ref = weakref.ref(optimizer)
    unbound = type(optimizer).step

    @functools.wraps(unbound)
    def step(*args: Any, **kwargs: Any) -> Any:
        opt = opt_ref()
        opt._opt_called = True  # type: ignore[union-attr]
        return unbound(opt, *args, **kwargs)

    step._ember_tracks_step_calls = True  # type: ignore[attr-defined]
    optimizer.step = step  # type: ignore[method-assign]


class _enable_get_lr_call:
    """Marks ``get_lr()`` calls as made from within ``step()``: the flag
    ``_get_lr_called_within_step`` that schedulers written after PyTorch's read to warn when
    get_lr() is called from outside (use get_last_lr() there)."""

    def __init__(self, o: LRScheduler) -> None:
        self.o = o

    def __enter__(self) -> _enable_get_lr_call:
        self.o._get_lr_called_within_step = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.o._get_lr_called_within_step = False


def _warn_get_lr_called_within_step(lr_scheduler: LRScheduler, stacklevel: int = 2) -> None:
    if not lr_scheduler._get_lr_called_within_step:
        warnings.warn("To get the last learning rate computed by the scheduler, please use "
                      "`get_last_lr()`.", UserWarning, stacklevel=stacklevel + 1)


def _warns_outside_step(get_lr: Callable[[Any], list[Any]]) -> Callable[[Any], list[Any]]:
    """ember's own schedulers' get_lr(): warns, as PyTorch's do, when called outside step()."""

    @functools.wraps(get_lr)
    def wrapper(self: Any) -> list[Any]:
        _warn_get_lr_called_within_step(self, stacklevel=3)
        return get_lr(self)

    return wrapper


def _check_scheduler_state(sched: Any, state_dict: Any) -> None:
    """Refuses, before anything is loaded, a scheduler state that is not a dict or whose
    counters or per-group lists have the wrong type or length: loaded as is, they would fail
    at a later step() with an error naming neither the scheduler nor the entry, or schedule
    some param groups silently wrong."""
    name = f"{type(sched).__name__}.load_state_dict"
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"{name}: expected a dict from state_dict(), got "
                        f"{type(state_dict).__name__}")
    for key in ("last_epoch", "_step_count", "cooldown_counter", "num_bad_epochs"):
        v = state_dict.get(key)
        if key in state_dict and not isinstance(v, numbers.Integral):
            raise TypeError(f"{name}: {key} must be an int, got {v!r} ({type(v).__name__})")
    for key in ("base_lrs", "_last_lr", "min_lrs"):
        if key not in state_dict or key not in sched.__dict__:
            continue
        v, own = state_dict[key], sched.__dict__[key]
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"{name}: {key} must be a list with one entry per param group, got "
                            f"{type(v).__name__}")
        if isinstance(own, (list, tuple)) and len(v) != len(own):
            raise ValueError(f"{name}: {key} has {len(v)} entries in the state dict but the "
                             f"scheduler has {len(own)} (one per param group)")


class LRScheduler:
    """Base class. Subclasses define ``get_lr()`` (the chainable form) and may define
    ``_get_closed_form_lr()``."""

    _is_initial: bool = False
    _get_lr_called_within_step: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # only ember's schedulers: a user's get_lr() warns if it calls the helper itself
        fn = cls.__dict__.get("get_lr")
        if fn is not None and cls.__module__.startswith("ember.optim."):
            cls.get_lr = _warns_outside_step(fn)  # type: ignore[method-assign]

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                lr = g["lr"]
                g.setdefault("initial_lr", lr.clone() if isinstance(lr, Tensor) else lr)
        else:
            for i, g in enumerate(optimizer.param_groups):
                if "initial_lr" not in g:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                        f"a scheduler with last_epoch={last_epoch}: load the optimizer's state "
                        "dict first (or start from last_epoch=-1)"
                    )
        self.base_lrs: list[Any] = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_step_calls(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _check_scheduler_state(self, state_dict)
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[Any]:
        """The learning rates the last ``step`` set, one per param group."""
        return self._last_lr

    def get_lr(self) -> list[Any]:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_lr()")

    def step(self, epoch: int | None = None) -> None:
        """Advances the schedule by one (or jumps to ``epoch``, deprecated) and sets the lrs.

        Call it after ``optimizer.step()``: the first call warns if the optimizer has not
        stepped yet (the schedule's first value would be skipped).
        """
        if self._step_count == 1:  # the first step after the one the constructor took
            self._warn_if_stepped_before_optimizer()
        self._step_count += 1
        if epoch is not None:
            warnings.warn(
                "passing an epoch to scheduler.step() is deprecated; the closed form is used "
                "where the scheduler has one",
                UserWarning,
                stacklevel=2,
            )
        self._update_lr(epoch)

    def _warn_if_stepped_before_optimizer(self) -> None:
        if not getattr(self.optimizer.step, "_ember_tracks_step_calls", False):
            warnings.warn(
                f"{type(self).__name__}: `optimizer.step()` seems to have been replaced after the "
                "learning rate scheduler was created, so the scheduler cannot tell whether it "
                "ran; make sure to call `optimizer.step()` before `lr_scheduler.step()`.",
                UserWarning,
                stacklevel=3,
            )
        elif not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`. The optimizer "
                "must step first (`optimizer.step()` then `lr_scheduler.step()`, as in PyTorch "
                "1.1.0 and later); in the other order the first value of the learning rate "
                f"schedule of {type(self).__name__} is skipped.",
                UserWarning,
                stacklevel=3,
            )

    def _update_lr(self, epoch: int | None = None) -> None:
        with _enable_get_lr_call(self):
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        for g, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(g, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")

    def _current(self) -> list[Any]:
        return _group_values(self.optimizer, "lr")

    def _scaled(self, factor: float) -> list[Any]:
        return [g["lr"] * factor for g in self.optimizer.param_groups]


_LRScheduler = LRScheduler


def _lambdas(name: str, optimizer: Optimizer, fn: Any) -> list[Callable[[int], float]]:
    if isinstance(fn, (list, tuple)):
        if len(fn) != len(optimizer.param_groups):
            raise ValueError(
                f"{name}: expected {len(optimizer.param_groups)} lr_lambdas (one per param "
                f"group), but got {len(fn)}"
            )
        fns = list(fn)
    else:
        fns = [fn] * len(optimizer.param_groups)
    for f in fns:
        if not callable(f):
            raise TypeError(f"{name}: lr_lambda should be a function, but got {type(f).__name__}")
    return fns


def _factor(sched: Any, group: int, fn: Callable[[int], Any]) -> Any:
    """fn(last_epoch), which must be a number (or a Tensor) to scale a learning rate by."""
    f = fn(sched.last_epoch)
    if not isinstance(f, (numbers.Real, Tensor)):
        raise TypeError(f"{type(sched).__name__}: lr_lambda of param group {group} returned "
                        f"{f!r} ({type(f).__name__}) for epoch {sched.last_epoch}; expected a "
                        f"number to multiply the learning rate by")
    return f


class _LambdaStateMixin:
    """state_dict keeps the __dict__ of callable objects (not of plain functions/lambdas)."""

    lr_lambdas: list[Callable[[int], float]]

    def state_dict(self) -> dict[str, Any]:
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [
            None if isinstance(f, types.FunctionType) else dict(f.__dict__) for f in self.lr_lambdas
        ]
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _check_scheduler_state(self, state_dict)
        sd = dict(state_dict)
        fns = sd.pop("lr_lambdas")
        if not isinstance(fns, (list, tuple)) or len(fns) != len(self.lr_lambdas):
            got = len(fns) if isinstance(fns, (list, tuple)) else type(fns).__name__
            raise ValueError(f"{type(self).__name__}.load_state_dict: the state dict holds "
                             f"{got} lr_lambdas but the scheduler has {len(self.lr_lambdas)}")
        self.__dict__.update(sd)
        for f, saved in zip(self.lr_lambdas, fns):
            if saved is not None:
                f.__dict__.update(saved)


class LambdaLR(_LambdaStateMixin, LRScheduler):
    """lr = initial_lr * lr_lambda(epoch).

    >>> import ember
    >>> opt = ember.optim.SGD([ember.nn.Parameter(ember.zeros(1))], lr=1.0)
    >>> s = LambdaLR(opt, lambda e: 0.5 ** e)
    >>> opt.step(); s.step(); s.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Any, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas("LambdaLR", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        return [base * _factor(self, i, f) for i, (f, base) in
                enumerate(zip(self.lr_lambdas, self.base_lrs))]


class MultiplicativeLR(_LambdaStateMixin, LRScheduler):
    """lr *= lr_lambda(epoch) at every step."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Any, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas("MultiplicativeLR", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        if self._is_initial:
            return self._current()
        return [
            g["lr"] * _factor(self, i, f)
            for i, (f, g) in enumerate(zip(self.lr_lambdas, self.optimizer.param_groups))
        ]


class StepLR(LRScheduler):
    """lr *= gamma every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        # a positive number: PyTorch's tutorials pass 1.0, which works as the period
        if isinstance(step_size, bool) or not isinstance(step_size, (int, float)) \
                or not step_size > 0:
            raise ValueError(f"StepLR: step_size must be a positive number, got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return self._scaled(self.gamma)

    def _get_closed_form_lr(self) -> list[Any]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr *= gamma at each milestone epoch (repeated milestones apply gamma repeatedly)."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        if self.last_epoch not in self.milestones:
            return self._current()
        return self._scaled(self.gamma ** self.milestones[self.last_epoch])

    def _get_closed_form_lr(self) -> list[Any]:
        ms = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(ms, self.last_epoch) for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = initial_lr * factor until ``total_iters``, then initial_lr."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        if self.last_epoch == 0:
            return self._scaled(self.factor)
        if self.last_epoch != self.total_iters:
            return self._current()
        return self._scaled(1.0 / self.factor)

    def _get_closed_form_lr(self) -> list[Any]:
        f = self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor)
        return [base * f for base in self.base_lrs]


class LinearLR(LRScheduler):
    """lr goes linearly from initial_lr * start_factor to initial_lr * end_factor over
    ``total_iters`` steps."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        if self.last_epoch == 0:
            return self._scaled(self.start_factor)
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        delta = self.end_factor - self.start_factor
        # ratio of the factor at this step to the factor at the previous one
        ratio = 1.0 + delta / (self.total_iters * self.start_factor + (self.last_epoch - 1) * delta)
        return self._scaled(ratio)

    def _get_closed_form_lr(self) -> list[Any]:
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        f = self.start_factor + (self.end_factor - self.start_factor) * frac
        return [base * f for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr *= gamma every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        if self._is_initial:
            return self._current()
        return self._scaled(self.gamma)

    def _get_closed_form_lr(self) -> list[Any]:
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - epoch / total_iters) ** power, then 0."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        e, n = self.last_epoch, self.total_iters
        decay = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return self._scaled(decay)

    def _get_closed_form_lr(self) -> list[Any]:
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (1.0 - frac) ** self.power for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr follows a half cosine from initial_lr down to ``eta_min`` over ``T_max`` epochs
    (and back up over the next T_max, like SGDR without restarts)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        # PyTorch takes T_max=0 and fails at the first step with "integer modulo by zero"
        if isinstance(T_max, bool) or not isinstance(T_max, (int, float)) or not T_max > 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be a positive number, got {T_max!r}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        groups = self.optimizer.param_groups
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and e > 0:
            return [lo + (base - lo) * (1 + math.cos(e * math.pi / T)) / 2 for base in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [
                g["lr"] + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                for base, g in zip(self.base_lrs, groups)
            ]
        ratio = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
        return [ratio * (g["lr"] - lo) + lo for g in groups]

    def _get_closed_form_lr(self) -> list[Any]:
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        return [lo + (base - lo) * (1 + math.cos(math.pi * e / T)) / 2 for base in self.base_lrs]


def _check_sub_schedulers(owner: str, optimizer: Optimizer, schedulers: Sequence[Any]) -> None:
    if len(schedulers) < 1:
        raise ValueError(f"{owner} expects at least one scheduler, but got none")
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{owner}: the scheduler at index {i} has no `optimizer` attribute")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(
                f"{owner} does not support ReduceLROnPlateau (its step() needs a metric); got one "
                f"at index {i}"
            )
        if s.optimizer is not optimizer:
            raise ValueError(
                f"{owner} expects all schedulers to belong to the same optimizer, but the "
                f"{type(s).__name__} at index {i} has a different one"
            )


class _CompositeStateMixin:
    _schedulers: Sequence[Any]

    def state_dict(self) -> dict[str, Any]:
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _check_scheduler_state(self, state_dict)
        sd = dict(state_dict)
        subs = sd.pop("_schedulers")
        if not isinstance(subs, (list, tuple)) or len(subs) != len(self._schedulers):
            got = len(subs) if isinstance(subs, (list, tuple)) else type(subs).__name__
            raise ValueError(f"{type(self).__name__}.load_state_dict: the state dict holds "
                             f"{got} schedulers but this one chains {len(self._schedulers)}")
        self.__dict__.update(sd)
        for s, saved in zip(self._schedulers, subs):
            s.load_state_dict(saved)


class SequentialLR(_CompositeStateMixin, LRScheduler):
    """Runs ``schedulers[i]`` between ``milestones[i-1]`` and ``milestones[i]``."""

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: list[LRScheduler],
        milestones: list[int],
        last_epoch: int = -1,
    ) -> None:
        _check_sub_schedulers("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "SequentialLR expects one milestone fewer than schedulers, but got "
                f"{len(schedulers)} schedulers and {len(milestones)} milestones"
            )
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # undo the initial steps the sub-schedulers took when constructed, then start the first
        for g in optimizer.param_groups:
            _set_group_value(g, "lr", g["initial_lr"])
        self._undo_initial_steps(self)
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def _undo_initial_steps(self, sched: Any) -> None:
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                self._undo_initial_steps(s)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    recursive_undo = _undo_initial_steps

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()


class ChainedScheduler(_CompositeStateMixin, LRScheduler):
    """Steps every scheduler in the list at each ``step`` (their effects compose)."""

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None) -> None:
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained")
        optimizer = optimizer or schedulers[0].optimizer
        _check_sub_schedulers("ChainedScheduler", optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")

    def step(self) -> None:  # type: ignore[override]
        for s in self._schedulers:
            s.step()
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")


class ReduceLROnPlateau(LRScheduler):
    """lr *= factor when ``step(metric)`` saw no improvement for ``patience`` epochs.

    >>> import ember
    >>> opt = ember.optim.SGD([ember.nn.Parameter(ember.zeros(1))], lr=1.0)
    >>> s = ReduceLROnPlateau(opt, patience=1, factor=0.5)
    >>> for loss in [1.0, 1.0, 1.0]:
    ...     s.step(loss)
    >>> s.get_last_lr()
    [0.5]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: list[float] | float = 0,
        eps: float = 1e-8,
    ) -> None:
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor}")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(
                    f"ReduceLROnPlateau: expected {len(optimizer.param_groups)} min_lrs, got "
                    f"{len(min_lr)}"
                )
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _group_values(optimizer, "lr")
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def step(self, metrics: Any, epoch: int | None = None) -> None:  # type: ignore[override]
        """Records ``metrics`` (e.g. the validation loss) and reduces the lr on a plateau."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn("passing an epoch to scheduler.step() is deprecated", UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown don't count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _group_values(self.optimizer, "lr")

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"ReduceLROnPlateau: the optimizer now has {len(groups)} param groups but "
                    f"min_lr was given for {len(self.min_lrs)}; update `min_lrs`"
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, g in enumerate(groups):
            old = float(g["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                _set_group_value(g, "lr", new)

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown (expected 'min' or 'max')")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is unknown (expected 'rel' "
                "or 'abs')"
            )
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _check_scheduler_state(self, state_dict)
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


def _set_momentum(group: dict[str, Any], use_beta1: bool, value: float) -> None:
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


class CyclicLR(LRScheduler):
    """Cycles the lr between ``base_lr`` and ``max_lr`` (triangular, triangular2, exp_range or
    a custom ``scale_fn``), stepping once per batch; cycles momentum inversely."""

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float = 0.8,
        max_momentum: float = 0.9,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, g in zip(base_lrs, optimizer.param_groups):
                _set_group_value(g, "lr", lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        # PyTorch divides by zero here (step_size_up=0), or cycles backwards (a negative size)
        if not (up > 0 and down >= 0):
            raise ValueError(
                f"CyclicLR: step_size_up must be positive and step_size_down non-negative, got "
                f"{step_size_up!r} and {step_size_down!r}")
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode {mode!r} is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "CyclicLR: optimizer must support momentum or beta1 with `cycle_momentum` on"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for mx, bs, g in zip(self.max_momentums, self.base_momentums, optimizer.param_groups):
                    _set_momentum(g, self.use_beta1, mx)
                    g["max_momentum"] = mx
                    g["base_momentum"] = bs
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self.scale_mode = "iterations"

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def get_lr(self) -> list[Any]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale = x / self.step_ratio
        else:
            scale = (x - 1) / (self.step_ratio - 1)
        arg = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [
            base + (mx - base) * scale * self.scale_fn(arg)
            for base, mx in zip(self.base_lrs, self.max_lrs)
        ]
        if self.cycle_momentum:
            for bs, mx, g in zip(self.base_momentums, self.max_momentums, self.optimizer.param_groups):
                _set_momentum(g, self.use_beta1, mx - (mx - bs) * scale * self.scale_fn(arg))
        return lrs

    def state_dict(self) -> dict[str, Any]:
        sd = super().state_dict()
        fn = sd.pop("_scale_fn_custom")
        sd["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            sd["_scale_fn_custom"] = dict(fn.__dict__)
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        sd = dict(state_dict)
        fn = sd.pop("_scale_fn_custom")
        super().load_state_dict(sd)
        if fn is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from initial_lr to ``eta_min`` that restarts after ``T_0`` epochs, each
    period ``T_mult`` times longer than the last (SGDR). ``step`` accepts fractional epochs."""

    def __init__(
        self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: expected positive integer T_0, got {T_0!r}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(
                f"CosineAnnealingWarmRestarts: expected integer T_mult >= 1, got {T_mult!r}"
            )
        if not isinstance(eta_min, (float, int)):
            raise ValueError(
                f"CosineAnnealingWarmRestarts: expected a float eta_min, got {type(eta_min).__name__}"
            )
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        c = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts: expected non-negative epoch, got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        with _enable_get_lr_call(self):
            values = self.get_lr()
        for g, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(g, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr rises from max_lr / div_factor to max_lr over ``pct_start`` of the
    steps, then anneals to initial_lr / final_div_factor (momentum moves the other way).
    Steps once per batch, ``total_steps`` times in all."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"OneCycleLR: expected positive integer total_steps, got {total_steps!r}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"OneCycleLR: expected positive integer epochs, got {epochs!r}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"OneCycleLR: expected positive integer steps_per_epoch, got {steps_per_epoch!r}"
                )
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: give either total_steps or (epochs and steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: expected a float pct_start in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}"
            )
        up_end = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                dict(end_step=up_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * self.total_steps) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=self.total_steps - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum"),
            ]
        else:
            self._schedule_phases = [
                dict(end_step=up_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=self.total_steps - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
            ]
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for mx, g in zip(max_lrs, optimizer.param_groups):
                g["initial_lr"] = mx / div_factor
                g["max_lr"] = mx
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "OneCycleLR: optimizer must support momentum or beta1 with `cycle_momentum` on"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            max_ms = _per_group("max_momentum", optimizer, max_momentum)
            base_ms = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for mx, bs, g in zip(max_ms, base_ms, optimizer.param_groups):
                    _set_momentum(g, self.use_beta1, mx)
                    g["max_momentum"] = mx
                    g["base_momentum"] = bs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[Any]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"OneCycleLR: tried to step {step} times; the specified number of total steps is "
                f"{self.total_steps}"
            )
        lrs = []
        last = len(self._schedule_phases) - 1
        for g in self.optimizer.param_groups:
            start = 0.0
            for i, ph in enumerate(self._schedule_phases):
                end = ph["end_step"]
                if step <= end or i == last:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(g[ph["start_lr"]], g[ph["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(g[ph["start_momentum"]], g[ph["end_momentum"]], pct)
                    break
                start = end
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(g, self.use_beta1, mom)
        return lrs
