"""Muon: momentum whose update is orthogonalized by a Newton-Schulz iteration, for the 2-D
weight matrices of hidden layers (biases, embeddings and heads are left to e.g. AdamW)."""

from __future__ import annotations

import math
from typing import Any, Callable

import ember
from ember.optim.optimizer import Optimizer, _grad_of, _init_step

__all__ = ["Muon"]

_ADJUST_LR = ("original", "match_rms_adamw")


def _orthogonalize(g: ember.Tensor, coefficients: tuple[float, float, float], steps: int,
                   eps: float) -> ember.Tensor:
    """The Newton-Schulz iteration X <- aX + (b XX^T + c (XX^T)^2) X from X = G / max(|G|, eps),
    in bfloat16 (as PyTorch's and the reference implementation run it) on the wide orientation
    (no more rows than columns): it drives the singular values towards 1, an approximation of
    U V^T from G's SVD. Returns a bfloat16 tensor of G's shape."""
    if steps >= 100:
        raise ValueError("Muon: ns_steps must be less than 100")
    a, b, c = coefficients
    tall = g.shape[0] > g.shape[1]
    x = g.bfloat16()
    x = x.T if tall else x
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        poly = ember.addmm(gram, gram, gram, beta=b, alpha=c)  # b G + c G^2
        x = ember.addmm(x, poly, x, beta=a)  # a X + poly X
    return x.T if tall else x


class Muon(Optimizer):
    """``Muon(params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
    ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None)``.

    Each step: the momentum buffer B <- lerp(B, grad, 1 - momentum), the direction
    lerp(grad, B, momentum) (nesterov) or B, orthogonalized by ``ns_steps`` Newton-Schulz
    iterations in bfloat16; decoupled weight
    decay param *= 1 - lr weight_decay; then param -= lr' O with lr' = lr sqrt(max(1, rows /
    cols)) ("original", the default) or 0.2 lr sqrt(max(rows, cols)) ("match_rms_adamw").
    Only 2-D parameters.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.eye(2) * 3)
    >>> opt = ember.optim.Muon([w], lr=0.1, weight_decay=0.0)
    >>> w.grad = ember.eye(2)
    >>> opt.step()
    >>> [round(v, 3) for v in w.detach().diagonal().tolist()]  # 3 - 0.1 * (about 1)
    [2.888, 2.888]
    """

    _name = "Muon"

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = (3.4445, -4.775, 2.0315),
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: str | None = None,
    ) -> None:
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        self._check_lr(group)
        self._check_nonneg(group, "weight_decay", "momentum", "eps")
        if not isinstance(group["ns_steps"], int) or group["ns_steps"] < 0:
            self._fail(f"invalid ns_steps {group['ns_steps']!r} (expected an int >= 0)")
        if len(tuple(group["ns_coefficients"])) != 3:
            self._fail(f"ns_coefficients must be three numbers (a, b, c), got "
                       f"{group['ns_coefficients']!r}")
        if group["adjust_lr_fn"] not in (None, *_ADJUST_LR):
            self._fail(f"adjust_lr_fn must be one of {_ADJUST_LR} or None, got "
                       f"{group['adjust_lr_fn']!r}")
        for p in group["params"]:
            if p.ndim != 2:
                raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter "
                                 f"with size: {tuple(p.shape)}")

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            lr = float(group["lr"])
            mu = group["momentum"]
            for p in self._params_with_grad(group):
                grad = _grad_of(p, self._name)
                if grad.is_sparse:
                    raise RuntimeError("Muon does not support sparse gradients")
                st = self.state[p]
                if not st:
                    st["step"] = _init_step()
                    st["momentum_buffer"] = ember.zeros_like(p)
                st["step"] += 1
                buf = st["momentum_buffer"]
                buf.lerp_(grad, 1 - mu)  # an average: Muon's update is scale-free anyway
                direction = grad.lerp(buf, mu) if group["nesterov"] else buf
                update = _orthogonalize(direction, tuple(group["ns_coefficients"]),
                                        group["ns_steps"], group["eps"])
                if group["weight_decay"] != 0:
                    p.mul_(1 - lr * group["weight_decay"])
                rows, cols = p.shape
                if group["adjust_lr_fn"] == "match_rms_adamw":
                    step_lr = 0.2 * math.sqrt(max(rows, cols)) * lr
                else:
                    step_lr = math.sqrt(max(1.0, rows / cols)) * lr
                p.add_(update, alpha=-step_lr)
        return loss
