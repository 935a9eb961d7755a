"""Rprop: resilient backpropagation, sign-based steps with per-element step sizes."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.optim.optimizer import Optimizer

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """``Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, foreach=None,
    maximize=False)``.

    Each element keeps its own step size, starting at ``lr``: it grows by ``etas[1]`` while the
    gradient keeps its sign and shrinks by ``etas[0]`` when the sign flips (that step is then
    skipped), clamped to ``step_sizes``; the parameter moves by the step size against the
    gradient's sign. Suited to full-batch training.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([1.0]))
    >>> opt = ember.optim.Rprop([w], lr=0.1)
    >>> w.grad = ember.ones(1)
    >>> opt.step()
    >>> round(w.item(), 4)
    0.9
    """

    _name = "Rprop"
    _nonneg: tuple[str, ...] = ()

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = dict(
            lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
            differentiable=differentiable, capturable=capturable,
        )
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        self._check_lr(group)
        etas = group["etas"]
        if not (isinstance(etas, (tuple, list)) and len(etas) == 2):
            self._fail(f"etas must be a pair (etaminus, etaplus), got {etas!r}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            self._fail(f"invalid eta values {etas[0]}, {etas[1]} (expected 0 < etaminus < 1 < etaplus)")
        sizes = group["step_sizes"]
        if not (isinstance(sizes, (tuple, list)) and len(sizes) == 2) or not 0.0 <= sizes[0] <= sizes[1]:
            self._fail(f"step_sizes must be a pair 0 <= min <= max, got {sizes!r}")

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            lr = group["lr"]
            params, grads, steps, st = self._gather(
                group, ("prev", "step_size"),
                # both parts of a complex parameter start at lr (PyTorch's)
                init={"step_size": lambda p, lr=lr: ember.full_like(
                    p, complex(lr, lr) if p.is_complex() else float(lr))},
            )
            etaminus, etaplus = group["etas"]
            size_min, size_max = group["step_sizes"]
            for p, g, step, prev, size in zip(params, grads, steps, st["prev"], st["step_size"]):
                step.add_(1)
                g = g.neg() if group["maximize"] else g.clone()
                agree = (g * prev).sign()
                factor = ember.ones_like(size).masked_fill_(agree > 0, etaplus)
                factor.masked_fill_(agree < 0, etaminus)
                size.mul_(factor).clamp_(size_min, size_max)
                # a sign flip: no step this time, and no memory of the gradient for the next
                g.masked_fill_(agree < 0, 0)
                p.addcmul_(g.sign(), size, value=-1)
                prev.copy_(g)
        return loss
