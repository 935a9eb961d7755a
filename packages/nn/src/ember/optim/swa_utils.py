"""Weight averaging, as ``torch.optim.swa_utils`` offers it: :class:`AveragedModel` keeps a
running average (equal-weight SWA by default, or an exponential moving average) of a model's
parameters, :func:`update_bn` recomputes BatchNorm statistics for averaged weights, and
:class:`SWALR` anneals each group's learning rate to a constant SWA rate.

>>> import ember
>>> from ember.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
>>> model = ember.nn.Linear(2, 1)
>>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
>>> ema.update_parameters(model)  # the first call copies the weights
>>> with ember.no_grad():
...     _ = model.weight.add_(1.0)
>>> ema.update_parameters(model)  # then 0.9 * average + 0.1 * current
>>> bool(ember.allclose(ema.module.weight, model.weight - 0.9))
True
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any, Callable, Iterable, Sequence

import ember
from ember import Tensor, nn
from ember.nn.modules.batchnorm import _BatchNorm
from ember.optim.lr_scheduler import LRScheduler, _per_group
from ember.optim.optimizer import Optimizer

__all__ = [
    "AveragedModel",
    "update_bn",
    "SWALR",
    "get_ema_multi_avg_fn",
    "get_swa_multi_avg_fn",
    "get_ema_avg_fn",
    "get_swa_avg_fn",
]

AvgFn = Callable[[Tensor, Tensor, "Tensor | int"], Tensor]
MultiAvgFn = Callable[[list[Tensor], list[Tensor], "Tensor | int"], None]


def _check_decay(name: str, decay: float) -> None:
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"{name}: decay must be in [0, 1], got {decay}")


def get_ema_multi_avg_fn(decay: float = 0.999) -> MultiAvgFn:
    """In-place exponential moving average over lists of tensors:
    ``avg = decay * avg + (1 - decay) * current``.

    >>> import ember
    >>> avg, cur = [ember.zeros(2)], [ember.ones(2)]
    >>> get_ema_multi_avg_fn(0.75)(avg, cur, 1)
    >>> avg[0].tolist()
    [0.25, 0.25]
    """
    _check_decay("get_ema_multi_avg_fn", decay)

    @ember.no_grad()
    def ema_update(ema_params: list[Tensor], current_params: list[Tensor], num_averaged: Any) -> None:
        for e, c in zip(ema_params, current_params):
            if e.is_floating_point() or e.is_complex():
                e.lerp_(c, 1.0 - decay)
            else:  # integer buffers (num_batches_tracked): the same formula, truncated
                e.copy_((e * decay + c * (1 - decay)).to(e.dtype))

    return ema_update


def get_swa_multi_avg_fn() -> MultiAvgFn:
    """In-place equal-weight running mean over lists of tensors:
    ``avg += (current - avg) / (num_averaged + 1)``.

    >>> import ember
    >>> avg, cur = [ember.zeros(2)], [ember.ones(2)]
    >>> get_swa_multi_avg_fn()(avg, cur, 3)
    >>> avg[0].tolist()
    [0.25, 0.25]
    """

    @ember.no_grad()
    def swa_update(averaged_params: list[Tensor], current_params: list[Tensor], num_averaged: Any) -> None:
        n = float(num_averaged) if isinstance(num_averaged, Tensor) else num_averaged
        for a, c in zip(averaged_params, current_params):
            if a.is_floating_point() or a.is_complex():
                a.add_((c - a) / (n + 1))
            else:
                a.copy_((a + (c - a) / (n + 1)).to(a.dtype))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> AvgFn:
    """Per-tensor exponential moving average: returns ``decay * avg + (1 - decay) * current``.

    >>> import ember
    >>> get_ema_avg_fn(0.5)(ember.zeros(1), ember.ones(1), 1).tolist()
    [0.5]
    """
    _check_decay("get_ema_avg_fn", decay)

    @ember.no_grad()
    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> AvgFn:
    """Per-tensor running mean: returns ``avg + (current - avg) / (num_averaged + 1)``.

    >>> import ember
    >>> get_swa_avg_fn()(ember.zeros(1), ember.ones(1), 1).tolist()
    [0.5]
    """

    @ember.no_grad()
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(nn.Module):
    """``AveragedModel(model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False)``:
    a deep copy of ``model`` whose parameters :meth:`update_parameters` averages with
    ``model``'s. The first update copies; later ones apply ``multi_avg_fn`` (to all tensors at
    once), else ``avg_fn`` (per tensor), else the equal-weight running mean (SWA). With
    ``use_buffers=True`` buffers are averaged too; otherwise they are copied from ``model``.
    Calling the averaged model runs the copy.

    >>> import ember
    >>> model = ember.nn.Linear(2, 1)
    >>> swa = AveragedModel(model)
    >>> for _ in range(3):
    ...     swa.update_parameters(model)
    >>> int(swa.n_averaged)
    3
    >>> tuple(swa(ember.ones(4, 2)).shape)
    (4, 1)
    """

    n_averaged: Tensor

    def __init__(
        self,
        model: nn.Module,
        device: Any = None,
        avg_fn: AvgFn | None = None,
        multi_avg_fn: MultiAvgFn | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"AveragedModel: expected an nn.Module, got {type(model).__name__}")
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("AveragedModel: pass avg_fn or multi_avg_fn, not both")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", ember.tensor(0, dtype=ember.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def _averaged_tensors(self, model: nn.Module) -> tuple[list[Tensor], list[Tensor]]:
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.module.parameters(), model.parameters()
        a, b = list(mine), list(theirs)
        if len(a) != len(b):
            kind = "parameters and buffers" if self.use_buffers else "parameters"
            raise ValueError(
                f"AveragedModel.update_parameters: the averaged model has {len(a)} {kind}, the "
                f"model passed has {len(b)}: pass the model that was averaged"
            )
        for x, y in zip(a, b):
            if tuple(x.shape) != tuple(y.shape):
                raise ValueError(
                    "AveragedModel.update_parameters: a tensor of shape "
                    f"{tuple(y.shape)} cannot be averaged into one of shape {tuple(x.shape)}"
                )
        return a, b

    @ember.no_grad()
    def update_parameters(self, model: nn.Module) -> None:
        """Folds ``model``'s current parameters (and buffers, with ``use_buffers``) into the
        average and counts one more model in ``n_averaged``."""
        mine, theirs = self._averaged_tensors(model)
        averaged = [p.detach() for p in mine]
        current = [p.detach().to(a.device) for p, a in zip(theirs, averaged)]
        if int(self.n_averaged) == 0:
            for a, c in zip(averaged, current):
                a.copy_(c)
        elif self.multi_avg_fn is not None or self.avg_fn is None:
            fn = self.multi_avg_fn if self.multi_avg_fn is not None else get_swa_multi_avg_fn()
            # grouped by device and dtype, as fused implementations expect
            groups: dict[tuple[str, Any], tuple[list[Tensor], list[Tensor]]] = {}
            for a, c in zip(averaged, current):
                ga, gc = groups.setdefault((str(a.device), a.dtype), ([], []))
                ga.append(a)
                gc.append(c.to(a.dtype))
            for (dev, _), (ga, gc) in groups.items():
                fn(ga, gc, self.n_averaged.to(dev))
        else:
            for a, c in zip(averaged, current):
                a.copy_(self.avg_fn(a, c, self.n_averaged.to(a.device)))
        if not self.use_buffers:
            # buffers are not averaged: keep the model's current ones
            for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                b_avg.detach().copy_(b_model.detach().to(b_avg.device))
        self.n_averaged += 1


@ember.no_grad()
def update_bn(loader: Iterable[Any], model: nn.Module, device: Any = None) -> None:
    """Recomputes the running statistics of every BatchNorm layer in ``model`` with one pass
    over ``loader`` (a batch may be a tensor, or a list/tuple whose first item is the input),
    as cumulative averages. The model's training mode is restored afterwards.

    >>> import ember
    >>> model = ember.nn.Sequential(ember.nn.Linear(2, 3), ember.nn.BatchNorm1d(3))
    >>> update_bn([ember.randn(8, 2) for _ in range(4)], model)
    >>> int(model[1].num_batches_tracked)
    4
    """
    momenta: dict[_BatchNorm, Any] = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None  # cumulative average over the pass
    try:
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    finally:
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


def _cos_anneal(t: float) -> float:
    return (1 - math.cos(math.pi * t)) / 2


def _linear_anneal(t: float) -> float:
    return t


class SWALR(LRScheduler):
    """``SWALR(optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1)``:
    moves each group's learning rate from its current value to ``swa_lr`` (one value, or one
    per group) over ``anneal_epochs`` steps along a cosine or a straight line, then holds it.

    >>> import ember
    >>> opt = ember.optim.SGD([ember.nn.Parameter(ember.zeros(1))], lr=1.0)
    >>> sched = SWALR(opt, swa_lr=0.5, anneal_epochs=2, anneal_strategy="linear")
    >>> lrs = []
    >>> for _ in range(4):
    ...     opt.step()
    ...     sched.step()
    ...     lrs.append(round(sched.get_last_lr()[0], 4))
    >>> lrs
    [0.75, 0.5, 0.5, 0.5]
    """

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: float | Sequence[float],
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        for lr, group in zip(_per_group("SWALR: swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"SWALR: anneal_strategy must be one of 'cos' or 'linear', got {anneal_strategy!r}"
            )
        if isinstance(anneal_epochs, bool) or not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"SWALR: anneal_epochs must be an int >= 0, got {anneal_epochs!r}")
        self._anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @property
    def anneal_func(self) -> Callable[[float], float]:
        """The annealing curve, from 0 at the start to 1 at ``anneal_epochs``."""
        return _cos_anneal if self._anneal_strategy == "cos" else _linear_anneal

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        # the lr the annealing started from, recovered from the current one
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list[Any]:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0.0, min(1.0, (step - 1) / span)))
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0.0, min(1.0, step / span)))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]
