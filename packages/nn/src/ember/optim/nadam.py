"""NAdam."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.optim import _functional as F
from ember.optim.optimizer import Optimizer, _scalar_dtype

__all__ = ["NAdam"]


def _mu_product0(p: ember.Tensor) -> ember.Tensor:
    return ember.ones((), dtype=_scalar_dtype())


class NAdam(Optimizer):
    """``NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    momentum_decay=4e-3, decoupled_weight_decay=False, *, maximize=False)``.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([1.0]))
    >>> opt = ember.optim.NAdam([w], lr=0.1)
    >>> w.grad = ember.ones(1)
    >>> opt.step()
    >>> w.item() < 1.0
    True
    """

    _name = "NAdam"
    _nonneg = ("eps", "weight_decay", "momentum_decay")
    _has_betas = True

    def __init__(
        self,
        params: Any,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        defaults = dict(  # PyTorch's key order: param_groups print the same
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
            capturable=capturable, differentiable=differentiable,
        )
        super().__init__(params, defaults)

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            params, grads, steps, st = self._gather(
                group, ("mu_product", "exp_avg", "exp_avg_sq"), init={"mu_product": _mu_product0}
            )
            beta1, beta2 = group["betas"]
            F.nadam(
                params, grads, st["exp_avg"], st["exp_avg_sq"], st["mu_product"], steps,
                beta1=beta1, beta2=beta2, lr=group["lr"],
                weight_decay=group["weight_decay"], momentum_decay=group["momentum_decay"],
                eps=group["eps"], decoupled_weight_decay=group["decoupled_weight_decay"],
                maximize=group["maximize"],
            )
        return loss
