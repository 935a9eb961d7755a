"""RMSprop."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.optim import _functional as F
from ember.optim.optimizer import Optimizer

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

    _name = "RMSprop"
    _nonneg = ("eps", "momentum", "weight_decay", "alpha")

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
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        defaults = dict(  # PyTorch's key order: param_groups print the same
            lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
            weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            keys = ["square_avg"]
            keys += ["momentum_buffer"] if group["momentum"] > 0 else []
            keys += ["grad_avg"] if group["centered"] else []
            params, grads, steps, st = self._gather(group, keys)
            F.rmsprop(
                params, grads, st["square_avg"], st.get("grad_avg", []),
                st.get("momentum_buffer", []), steps, lr=group["lr"], alpha=group["alpha"],
                eps=group["eps"], weight_decay=group["weight_decay"], momentum=group["momentum"],
                centered=group["centered"], maximize=group["maximize"],
            )
        return loss
