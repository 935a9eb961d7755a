"""ASGD: SGD that also keeps a running (Polyak) average of the iterates."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.optim.optimizer import Optimizer, _scalar_dtype

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """``ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, *, foreach=None,
    maximize=False)``.

    Plain SGD with a decaying step ``eta = lr / (1 + lambd * lr * t) ** alpha`` and a shrink
    ``1 - lambd * eta``; from step ``t0`` on, ``state["ax"]`` averages the iterates (before it,
    it follows the parameter).

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([1.0]))
    >>> opt = ember.optim.ASGD([w], lr=0.1, lambd=0.0)
    >>> w.grad = ember.ones(1)
    >>> opt.step()
    >>> round(w.item(), 4), round(opt.state[w]["ax"].item(), 4)
    (0.9, 0.9)
    """

    _name = "ASGD"
    _nonneg = ("weight_decay",)

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
            maximize=maximize, differentiable=differentiable, capturable=capturable,
        )
        super().__init__(params, defaults)

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            lr = float(group["lr"])
            params, grads, steps, st = self._gather(
                group, ("eta", "mu", "ax"),
                init={
                    # 0-d in the scalar dtype, as the step counter (what PyTorch keeps)
                    "eta": lambda p, lr=lr: ember.tensor(lr, dtype=_scalar_dtype()),
                    "mu": lambda p: ember.tensor(1.0, dtype=_scalar_dtype()),
                },
            )
            lambd, alpha, t0 = group["lambd"], group["alpha"], group["t0"]
            for p, g, step_t, eta_t, mu_t, ax in zip(params, grads, steps, st["eta"], st["mu"], st["ax"]):
                step_t.add_(1)
                step = step_t.item()
                g = g.neg() if group["maximize"] else g
                if group["weight_decay"] != 0:
                    g = g.add(p, alpha=group["weight_decay"])
                eta, mu = eta_t.item(), mu_t.item()
                p.mul_(1 - lambd * eta)
                p.add_(g, alpha=-eta)
                if mu != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                eta_t.fill_(lr / ((1 + lambd * lr * step) ** alpha))
                mu_t.fill_(1 / max(1, step - t0))
        return loss
