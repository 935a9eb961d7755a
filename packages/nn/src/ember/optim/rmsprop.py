"""RMSprop."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.optim import _functional as F
from ember.optim.optimizer import Optimizer, _grad_of, _init_step

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, *, maximize=False)``.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([1.0]))
    >>> opt = ember.optim.RMSprop([w], lr=0.01)
    >>> w.grad = ember.ones(1)
    >>> opt.step()
    >>> round(w.item(), 4)
    0.9
    """

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
            centered=centered, foreach=foreach, maximize=maximize,
        )
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        self._check_lr(group)
        self._check_nonneg(group, "eps", "momentum", "weight_decay", "alpha")

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            params = self._params_with_grad(group)
            grads, sq, ga, bufs, steps = [], [], [], [], []
            for p in params:
                grads.append(_grad_of(p, "RMSprop"))
                st = self.state[p]
                if not st:
                    st["step"] = _init_step()
                    st["square_avg"] = ember.zeros_like(p)
                    if group["momentum"] > 0:
                        st["momentum_buffer"] = ember.zeros_like(p)
                    if group["centered"]:
                        st["grad_avg"] = ember.zeros_like(p)
                sq.append(st["square_avg"])
                steps.append(st["step"])
                if group["momentum"] > 0:
                    bufs.append(st["momentum_buffer"])
                if group["centered"]:
                    ga.append(st["grad_avg"])
            F.rmsprop(
                params, grads, sq, ga, bufs, steps, lr=group["lr"], alpha=group["alpha"],
                eps=group["eps"], weight_decay=group["weight_decay"], momentum=group["momentum"],
                centered=group["centered"], maximize=group["maximize"],
            )
        return loss
