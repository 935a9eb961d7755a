"""The update rules, one function per optimizer, over lists of parameters and their state.

This is the plain per-parameter reference path: a loop of in-place tensor ops (callers hold
``no_grad``). The arithmetic follows PyTorch's single-tensor implementations op for op, so that
trajectories agree to rounding. A fused multi-tensor kernel takes the same lists and
hyper-parameters and must give the same results.
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor


def scalar_div(s: float, t: Tensor) -> Tensor:
    """s / t computed in t's dtype (``float / Tensor`` rounds the number to float32 in ember
    today, which costs float64 updates their precision)."""
    return ember.full_like(t, s).div_(t)


def _bump(step_t: Tensor) -> float:
    step_t.add_(1)
    return step_t.item()


def _grad_for_update(
    p: Tensor,
    grad: Tensor,
    *,
    maximize: bool,
    weight_decay: float,
    decoupled_weight_decay: bool = False,
    lr: float = 0.0,
) -> Tensor:
    """The gradient an update uses: negated for ``maximize``, plus the L2 term
    ``weight_decay * p``; with ``decoupled_weight_decay`` (AdamW-style) the parameter is shrunk
    in place by ``1 - lr * weight_decay`` instead and the gradient is left alone."""
    g = grad.neg() if maximize else grad
    if weight_decay != 0:
        if decoupled_weight_decay:
            p.mul_(1 - lr * weight_decay)
        else:
            g = g.add(p, alpha=weight_decay)
    return g


def sgd(
    params: list[Tensor],
    grads: list[Tensor],
    momentum_buffers: list[Tensor | None],
    *,
    lr: float,
    momentum: float,
    dampening: float,
    weight_decay: float,
    nesterov: bool,
    maximize: bool,
) -> None:
    """SGD with optional momentum/Nesterov; new momentum buffers are written back into
    ``momentum_buffers``."""
    for i, p in enumerate(params):
        g = _grad_for_update(p, grads[i], maximize=maximize, weight_decay=weight_decay)
        if momentum != 0:
            buf = momentum_buffers[i]
            if buf is None:
                buf = g.detach().clone()
                momentum_buffers[i] = buf
            else:
                buf.mul_(momentum).add_(g, alpha=1 - dampening)
            g = g.add(buf, alpha=momentum) if nesterov else buf
        p.add_(g, alpha=-lr)


def adam(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    max_exp_avg_sqs: list[Tensor],
    steps: list[Tensor],
    *,
    amsgrad: bool,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    decoupled_weight_decay: bool,
) -> None:
    """Adam (``decoupled_weight_decay``: AdamW)."""
    for i, p in enumerate(params):
        m, v = exp_avgs[i], exp_avg_sqs[i]
        step = _bump(steps[i])
        g = _grad_for_update(
            p, grads[i], maximize=maximize, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay, lr=lr,
        )
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        bc1 = 1 - beta1**step
        bc2_sqrt = (1 - beta2**step) ** 0.5
        if amsgrad:
            vmax = max_exp_avg_sqs[i]
            ember.maximum(vmax, v, out=vmax)
            denom = (vmax.sqrt() / bc2_sqrt).add_(eps)
        else:
            denom = (v.sqrt() / bc2_sqrt).add_(eps)
        p.addcdiv_(m, denom, value=-(lr / bc1))


def rmsprop(
    params: list[Tensor],
    grads: list[Tensor],
    square_avgs: list[Tensor],
    grad_avgs: list[Tensor],
    momentum_buffers: list[Tensor],
    steps: list[Tensor],
    *,
    lr: float,
    alpha: float,
    eps: float,
    weight_decay: float,
    momentum: float,
    centered: bool,
    maximize: bool,
) -> None:
    """RMSprop, optionally centered and with momentum."""
    for i, p in enumerate(params):
        _bump(steps[i])
        g = _grad_for_update(p, grads[i], maximize=maximize, weight_decay=weight_decay)
        sq = square_avgs[i]
        sq.mul_(alpha).addcmul_(g, g, value=1 - alpha)
        if centered:
            ga = grad_avgs[i]
            ga.lerp_(g, 1 - alpha)
            avg = sq.addcmul(ga, ga, value=-1).sqrt_()
        else:
            avg = sq.sqrt()
        avg = avg.add_(eps)
        if momentum > 0:
            buf = momentum_buffers[i]
            buf.mul_(momentum).addcdiv_(g, avg)
            p.add_(buf, alpha=-lr)
        else:
            p.addcdiv_(g, avg, value=-lr)


def adagrad(
    params: list[Tensor],
    grads: list[Tensor],
    state_sums: list[Tensor],
    steps: list[Tensor],
    *,
    lr: float,
    weight_decay: float,
    lr_decay: float,
    eps: float,
    maximize: bool,
) -> None:
    """Adagrad with learning-rate decay."""
    for i, p in enumerate(params):
        step = _bump(steps[i])
        g = _grad_for_update(p, grads[i], maximize=maximize, weight_decay=weight_decay)
        clr = lr / (1 + (step - 1) * lr_decay)
        s = state_sums[i]
        s.addcmul_(g, g, value=1)
        std = s.sqrt().add_(eps)
        p.addcdiv_(g, std, value=-clr)


def adadelta(
    params: list[Tensor],
    grads: list[Tensor],
    square_avgs: list[Tensor],
    acc_deltas: list[Tensor],
    steps: list[Tensor],
    *,
    lr: float,
    rho: float,
    eps: float,
    weight_decay: float,
    maximize: bool,
) -> None:
    """Adadelta."""
    for i, p in enumerate(params):
        _bump(steps[i])
        g = _grad_for_update(p, grads[i], maximize=maximize, weight_decay=weight_decay)
        sq, acc = square_avgs[i], acc_deltas[i]
        sq.mul_(rho).addcmul_(g, g, value=1 - rho)
        std = sq.add(eps).sqrt_()
        delta = acc.add(eps).sqrt_()
        delta.div_(std).mul_(g)
        acc.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-lr)


def adamax(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_infs: list[Tensor],
    steps: list[Tensor],
    *,
    eps: float,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    maximize: bool,
) -> None:
    """Adamax (Adam with the infinity norm)."""
    for i, p in enumerate(params):
        step = _bump(steps[i])
        g = _grad_for_update(p, grads[i], maximize=maximize, weight_decay=weight_decay)
        m, u = exp_avgs[i], exp_infs[i]
        m.lerp_(g, 1 - beta1)
        ember.maximum(u.mul_(beta2), g.abs().add_(eps), out=u)
        clr = lr / (1 - beta1**step)
        p.addcdiv_(m, u, value=-clr)


def nadam(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    mu_products: list[Tensor],
    steps: list[Tensor],
    *,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    momentum_decay: float,
    eps: float,
    decoupled_weight_decay: bool,
    maximize: bool,
) -> None:
    """NAdam (Nesterov momentum in Adam), with the momentum schedule of Dozat's paper."""
    for i, p in enumerate(params):
        m, v, mu_prod = exp_avgs[i], exp_avg_sqs[i], mu_products[i]
        step = _bump(steps[i])
        bc2 = 1 - beta2**step
        g = _grad_for_update(
            p, grads[i], maximize=maximize, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay, lr=lr,
        )
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_prod.mul_(mu)  # kept as a tensor of the scalar dtype, rounding like PyTorch's
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = v.div(bc2).sqrt()
        prod = mu_prod.item()
        prod_next = prod * mu_next
        denom.add_(eps)
        p.addcdiv_(g, denom, value=(-lr * (1.0 - mu) / (1.0 - prod)))
        p.addcdiv_(m, denom, value=(-lr * mu_next) / (1.0 - prod_next))


def radam(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    steps: list[Tensor],
    *,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    eps: float,
    decoupled_weight_decay: bool,
    maximize: bool,
) -> None:
    """RAdam: Adam with the variance rectification term (plain momentum SGD early on)."""
    for i, p in enumerate(params):
        m, v = exp_avgs[i], exp_avg_sqs[i]
        step = _bump(steps[i])
        g = _grad_for_update(
            p, grads[i], maximize=maximize, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay, lr=lr,
        )
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        bc1 = 1 - beta1**step
        bc2 = 1 - beta2**step
        m_hat = m / bc1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bc2
        if rho_t > 5.0:
            rect = (
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            ) ** 0.5
            adaptive = scalar_div(bc2**0.5, v.sqrt().add_(eps))
            p.add_(m_hat * lr * adaptive * rect, alpha=-1.0)
        else:
            p.add_(m_hat * lr, alpha=-1.0)


# ---- fused multi-tensor path ------------------------------------------------------------------
_FUSED_DEVICES = ("cpu", "cuda")  # device types with fused SGD/Adam kernels


def _fusable(p: Tensor) -> bool:
    # a __torch_dispatch__ subclass (a DTensor) has no memory of its own for the kernels
    return (p.dtype in (ember.float32, ember.float64) and p.device.type in _FUSED_DEVICES
            and getattr(type(p), "__torch_dispatch__", None) is None)


def use_fused(optimizer: str, group: dict, params: list[Tensor]) -> bool:
    """Whether a param group's step runs as fused C++/CUDA calls (one per device and dtype).

    ``fused=True`` demands it (and raises when a parameter cannot take it: the fused kernels
    take float32/float64 parameters on the CPU or a CUDA device); ``fused=None`` picks it
    whenever every parameter can take it, unless ``foreach=False`` asks for the per-parameter
    reference loop (``foreach=True`` is served by the fused kernels too: they are the
    multi-tensor path).
    """
    fused, foreach = group.get("fused"), group.get("foreach")
    if fused and foreach:
        raise RuntimeError(f"{optimizer}: `fused` and `foreach` cannot be `True` together.")
    ok = all(_fusable(p) for p in params)
    if fused:
        if not ok:
            bad = next(p for p in params if not _fusable(p))
            raise RuntimeError(
                f"{optimizer}: fused=True requires float32/float64 parameters on the CPU or a "
                f"CUDA device, got one of dtype {bad.dtype} on {bad.device}"
            )
        return True
    if fused is None and foreach is not False:
        return ok
    return False


def fused_sgd(
    params: list[Tensor],
    grads: list[Tensor],
    momentum_buffers: list[Tensor | None],
    *,
    lr: float,
    momentum: float,
    dampening: float,
    weight_decay: float,
    nesterov: bool,
    maximize: bool,
) -> None:
    """:func:`sgd` as one fused call per dtype and buffer state; missing momentum buffers are
    created and seeded with the gradient by the kernel (``is_first_step``)."""
    kw = dict(weight_decay=weight_decay, momentum=momentum, lr=lr, dampening=dampening,
              nesterov=nesterov, maximize=maximize)
    # the kernel runs a whole list on one device in one dtype: split by device, dtype and by
    # first step or not
    batches: dict[Any, list[int]] = {}
    for i, p in enumerate(params):
        first = momentum != 0 and momentum_buffers[i] is None
        batches.setdefault((str(p.device), p.dtype, first), []).append(i)
    for (_, _, first), idx in batches.items():
        if first:
            for i in idx:
                momentum_buffers[i] = ember.zeros_like(params[i])
        bufs = [momentum_buffers[i] for i in idx] if momentum != 0 else []
        ember._C._fused_sgd_([params[i] for i in idx], [grads[i] for i in idx], bufs,
                             is_first_step=first, **kw)


def fused_adam(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    max_exp_avg_sqs: list[Tensor],
    steps: list[Tensor],
    *,
    amsgrad: bool,
    beta1: float,
    beta2: float,
    lr: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    decoupled_weight_decay: bool,
) -> None:
    """:func:`adam` as one fused call per device and dtype (the kernel runs a whole list on one
    device in one dtype and increments ``steps`` itself, on the host for CPU step counters)."""
    by_dtype: dict[Any, list[int]] = {}
    for i, p in enumerate(params):
        by_dtype.setdefault((str(p.device), p.dtype), []).append(i)
    for idx in by_dtype.values():
        pick = lambda xs: [xs[i] for i in idx] if xs else []  # noqa: E731
        ember._C._fused_adam_(
            pick(params), pick(grads), pick(exp_avgs), pick(exp_avg_sqs),
            pick(max_exp_avg_sqs) if amsgrad else [], pick(steps), lr=lr, beta1=beta1,
            beta2=beta2, weight_decay=weight_decay, eps=eps, amsgrad=amsgrad, maximize=maximize,
            decoupled=decoupled_weight_decay,
        )
