"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.optim import _functional as F
from ember.optim.optimizer import Optimizer, _grad_of

__all__ = ["SGD"]


class SGD(Optimizer):
    """``SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
    maximize=False)``.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([1.0]))
    >>> opt = ember.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.zero_grad()
    ...     (w * w).sum().backward()
    ...     opt.step()
    >>> round(w.item(), 4)
    0.46
    """

    _name = "SGD"
    _nonneg = ("momentum", "weight_decay")

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        defaults = dict(  # PyTorch's key order: param_groups print the same
            lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
            nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        super()._check_group(group)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            self._fail(
                "Nesterov momentum requires a momentum > 0 and zero dampening (got momentum="
                f"{group['momentum']}, dampening={group['dampening']})"
            )

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for i, group in enumerate(self.param_groups):
            if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
                # changed since the constructor checked it (the fused kernel would refuse it
                # naming only itself)
                raise ValueError(
                    f"SGD.step: param group {i} has nesterov=True but momentum="
                    f"{group['momentum']} and dampening={group['dampening']}; Nesterov momentum "
                    "requires a momentum > 0 and zero dampening")
        for group in self.param_groups:
            params = self._params_with_grad(group)
            grads = [_grad_of(p, self._name, group["weight_decay"]) for p in params]
            has_momentum = group["momentum"] != 0
            bufs = [self.state[p].get("momentum_buffer") if has_momentum else None for p in params]
            for p, b in zip(params, bufs):
                if b is not None and not isinstance(b, ember.Tensor):
                    raise TypeError(
                        f"SGD: the state of a parameter of shape {tuple(p.shape)} has "
                        f"momentum_buffer={b!r:.60} ({type(b).__name__}); expected a Tensor or None"
                    )
            update = F.fused_sgd if F.use_fused(self._name, group, params) else F.sgd
            update(
                params, grads, bufs, lr=group["lr"], momentum=group["momentum"],
                dampening=group["dampening"], weight_decay=group["weight_decay"],
                nesterov=group["nesterov"], maximize=group["maximize"],
            )
            if has_momentum:
                for p, b in zip(params, bufs):
                    self.state[p]["momentum_buffer"] = b
        return loss
