"""Adadelta."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.optim import _functional as F
from ember.optim.optimizer import Optimizer

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """``Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False)``.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([1.0]))
    >>> opt = ember.optim.Adadelta([w])
    >>> w.grad = ember.ones(1)
    >>> opt.step()
    >>> w.item() < 1.0
    True
    """

    _name = "Adadelta"

    def __init__(
        self,
        params: Any,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        defaults = dict(  # PyTorch's key order: param_groups print the same
            lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
            capturable=capturable, foreach=foreach, differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        self._check_lr(group)
        if not 0.0 <= group["rho"] <= 1.0:
            self._fail(f"invalid rho value {group['rho']} (expected 0 <= rho <= 1)")
        self._check_nonneg(group, "eps", "weight_decay")

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            params, grads, steps, st = self._gather(group, ("square_avg", "acc_delta"))
            F.adadelta(
                params, grads, st["square_avg"], st["acc_delta"], steps, lr=group["lr"],
                rho=group["rho"], eps=group["eps"], weight_decay=group["weight_decay"], maximize=group["maximize"],
            )
        return loss
