"""Numerical gradient checks: compare autograd's Jacobians with central finite differences.

``gradcheck`` checks first derivatives, ``gradgradcheck`` second derivatives (the first
derivative, recorded with ``create_graph=True``, is itself checked with gradcheck). Both work in
float64 and, on a mismatch, name the output, the input and the elements that disagree.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from ember._C import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical gradients disagree."""


def _inputs(inputs) -> tuple:
    return (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)


def _outputs(out) -> tuple:
    return (out,) if isinstance(out, Tensor) else tuple(o for o in out if isinstance(o, Tensor))


def _index(shape: tuple, j: int) -> tuple:
    """Multi-index of row-major element j of a tensor of ``shape``."""
    idx = []
    for n in reversed(shape):
        idx.append(j % n)
        j //= n
    return tuple(reversed(idx))


def _fmt(shape: tuple, j: int) -> str:
    return str(_index(shape, j)) if len(shape) != 1 else str(j)


class _Check:
    """One gradcheck run; ``labels[i]`` names input i in messages."""

    def __init__(self, func: Callable, inputs: tuple, labels: list[str], eps: float, atol: float,
                 rtol: float, nondet_tol: float, check_undefined_grad: bool, name: str, *,
                 check_backward_ad: bool = True, check_forward_ad: bool = False,
                 check_grad_dtypes: bool = False, check_batched_grad: bool = False,
                 check_batched_forward_grad: bool = False) -> None:
        self.func, self.inputs, self.labels = func, inputs, labels
        self.eps, self.atol, self.rtol, self.nondet_tol = eps, atol, rtol, nondet_tol
        self.check_undefined_grad = check_undefined_grad
        self.check_backward_ad, self.check_forward_ad = check_backward_ad, check_forward_ad
        self.check_grad_dtypes, self.check_batched_grad = check_grad_dtypes, check_batched_grad
        self.check_batched_forward_grad = check_batched_forward_grad
        self.name = name
        # finite differences run in the caller's grad mode, as PyTorch's: a function that
        # differentiates inside (a gradient penalty) needs it
        import ember

        self.grad_in_numerical = ember.is_grad_enabled()
        self.diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]

    # -- input validation ------------------------------------------------------------------------
    def validate(self) -> None:
        import ember

        if not self.diff:
            raise ValueError(f"{self.name}: expected at least one input tensor to require gradient, "
                             "but none of them have requires_grad=True")
        for i in self.diff:
            t = self.inputs[i]
            if t.dtype is not ember.float64:
                raise GradcheckError(
                    f"{self.name}: {self.labels[i]} requires grad but has dtype {t.dtype!r}; finite "
                    "differences are only reliable in float64, so use float64 inputs")
            for d, (size, stride) in enumerate(zip(t.shape, t.stride())):
                if stride == 0 and size > 1:
                    raise GradcheckError(
                        f"{self.name}: {self.labels[i]} has stride 0 in dimension {d} (shape "
                        f"{tuple(t.shape)}, strides {tuple(t.stride())}), so its elements overlap "
                        "in memory and cannot be perturbed one at a time; call .contiguous() on it")

    # -- the two Jacobians -------------------------------------------------------------------------
    def outputs(self) -> tuple:
        """The floating-point outputs (integer and bool outputs are not differentiable)."""
        return tuple(o for o in _outputs(self.func(*self.inputs)) if o.is_floating_point())

    def analytical(self, outs: tuple) -> list[list[list[list[float]]]]:
        """jac[k][i][e][j]: d outs[k][e] / d (diff input i, element j), by one vector-Jacobian
        product per output element."""
        import ember

        xs = [self.inputs[i] for i in self.diff]
        jac = []
        for o in outs:
            per_in = [[[0.0] * x.numel() for _ in range(o.numel())] for x in xs]
            if o.requires_grad:
                for e in range(o.numel()):
                    seed = ember.zeros(o.numel(), dtype=o.dtype)
                    seed[e] = 1.0
                    grads = ember.autograd.grad(o, xs, seed.reshape(o.shape), retain_graph=True,
                                                allow_unused=True)
                    for i, g in enumerate(grads):
                        if g is None:
                            continue
                        if tuple(g.shape) != tuple(xs[i].shape):
                            raise GradcheckError(
                                f"{self.name}: the gradient with respect to {self.labels[self.diff[i]]}"
                                f" has shape {tuple(g.shape)} but the input has shape "
                                f"{tuple(xs[i].shape)}")
                        if self.check_grad_dtypes and g.dtype != xs[i].dtype:
                            raise GradcheckError(
                                f"{self.name}: the gradient with respect to {self.labels[self.diff[i]]}"
                                f" has dtype {g.dtype!r} but the input has dtype {xs[i].dtype!r}")
                        per_in[i][e] = g.detach().reshape(-1).tolist()
            jac.append(per_in)
        return jac

    def forward(self, n_outs: list[int], batched: bool = False) -> list[list[list[list[float]]]]:
        """Same layout as analytical, by forward mode: one Jacobian-vector product per input
        element (a unit tangent on that element, zero tangents on the other inputs); with
        ``batched`` the products of one input run as one ember.func.vmap over its tangents."""
        import ember
        import ember.autograd.forward_ad as fwAD

        jac = [[[[0.0] * self.inputs[i].numel() for _ in range(n)] for i in self.diff]
               for n in n_outs]

        def tangents_out(tangents: list) -> list:
            with fwAD.dual_level():
                args = list(self.inputs)
                for i, t in zip(self.diff, tangents):
                    args[i] = fwAD.make_dual(self.inputs[i], t)
                outs = [o for o in _outputs(self.func(*args)) if o.is_floating_point()]
                res = []
                for o in outs:
                    t = fwAD.unpack_dual(o).tangent
                    if t is not None and self.check_grad_dtypes and t.dtype != o.dtype:
                        raise GradcheckError(
                            f"{self.name}: a forward-mode tangent has dtype {t.dtype!r} but its "
                            f"output has dtype {o.dtype!r}")
                    res.append(ember.zeros_like(fwAD.unpack_dual(o).primal) if t is None
                               else t.clone())
                return res

        for di, i in enumerate(self.diff):
            x = self.inputs[i]
            n = x.numel()
            basis = ember.eye(n, dtype=x.dtype).reshape((n, *x.shape))

            def column(u, di=di):
                return tuple(tangents_out([u if k == di else ember.zeros_like(self.inputs[m])
                                           for k, m in enumerate(self.diff)]))

            if batched:
                cols = ember.func.vmap(column)(basis)
                per_out = [c.reshape(n, -1).tolist() for c in cols]
            else:
                per_out = [[] for _ in n_outs]
                for j in range(n):
                    for k, t in enumerate(column(basis[j])):
                        per_out[k].append(t.reshape(-1).tolist())
            for k in range(len(n_outs)):
                for j in range(n):
                    for e in range(n_outs[k]):
                        jac[k][di][e][j] = per_out[k][j][e]
        return jac

    def batched_grads(self, outs: tuple, ana) -> str | None:
        """Backward with every output's basis of grad_outputs at once (is_grads_batched=True)
        must give the rows of the Jacobian that one-at-a-time backward gave."""
        import ember

        xs = [self.inputs[i] for i in self.diff]
        for k, o in enumerate(outs):
            if not o.requires_grad or o.numel() == 0:
                continue
            seeds = ember.eye(o.numel(), dtype=o.dtype).reshape((o.numel(), *o.shape))
            try:
                got = ember.autograd.grad(o, xs, seeds, retain_graph=True, allow_unused=True,
                                          is_grads_batched=True)
            except Exception as exc:  # noqa: BLE001  (reported as a gradcheck failure)
                return f"{self.name}: while computing batched gradients, got: {exc}"
            for di, g in enumerate(got):
                rows = g.detach().reshape(o.numel(), -1).tolist() if g is not None else None
                for e in range(o.numel()):
                    for j in range(xs[di].numel()):
                        a, b = ana[k][di][e][j], rows[e][j] if rows is not None else 0.0
                        if abs(a - b) > self.atol + self.rtol * abs(a):
                            return (f"{self.name}: batched gradient mismatch for output {k} "
                                    f"(element {_fmt(tuple(o.shape), e)}) with respect to "
                                    f"{self.labels[self.diff[di]]} (element "
                                    f"{_fmt(tuple(xs[di].shape), j)}): batched {b!r} vs "
                                    f"one at a time {a!r}")
        return None

    def numerical(self, n_outs: list[int]) -> list[list[list[list[float]]]]:
        """Same layout as analytical, by central differences (the inputs are perturbed in place,
        element by element, through their own strides, so non-contiguous inputs work)."""
        import ember

        jac = [[[[0.0] * self.inputs[i].numel() for _ in range(n)] for i in self.diff]
               for n in n_outs]
        for di, i in enumerate(self.diff):
            t = self.inputs[i].detach()
            shape = tuple(t.shape)
            for j in range(t.numel()):
                idx = _index(shape, j)
                orig = t[idx].item()
                with ember.set_grad_enabled(self.grad_in_numerical):
                    with ember.no_grad():
                        t[idx] = orig + self.eps
                    plus = [o.detach().reshape(-1).tolist() for o in self.outputs()]
                    with ember.no_grad():
                        t[idx] = orig - self.eps
                    minus = [o.detach().reshape(-1).tolist() for o in self.outputs()]
                    with ember.no_grad():
                        t[idx] = orig
                for k, (p, m) in enumerate(zip(plus, minus)):
                    for e, (a, b) in enumerate(zip(p, m)):
                        jac[k][di][e][j] = (a - b) / (2 * self.eps)
        return jac

    # -- reporting ---------------------------------------------------------------------------------
    def compare(self, outs: list[tuple[tuple, bool]], ana, num, mode: str = "") -> str | None:
        """outs: (shape, requires_grad) of each output; ``mode`` names how ``ana`` was computed
        ("" for backward mode)."""
        for k, (oshape, o_requires_grad) in enumerate(outs):
            for di, i in enumerate(self.diff):
                shape = tuple(self.inputs[i].shape)
                for e in range(math.prod(oshape)):
                    for j in range(self.inputs[i].numel()):
                        a, n = ana[k][di][e][j], num[k][di][e][j]
                        if not (abs(a - n) <= self.atol + self.rtol * abs(n)) or math.isnan(a):
                            if not o_requires_grad and not mode:
                                return (f"{self.name}: output {k} does not require grad, but its "
                                        f"numerical derivative with respect to {self.labels[i]}, "
                                        f"element {_fmt(shape, j)} is {n!r}, not 0")
                            return (f"{self.name}: Jacobian{mode} mismatch for output {k} (element "
                                    f"{_fmt(oshape, e)}) with respect to {self.labels[i]} "
                                    f"(element {_fmt(shape, j)}): analytical {a!r} vs numerical "
                                    f"{n!r} (atol={self.atol}, rtol={self.rtol}, eps={self.eps})")
        return None

    def reentrant(self, outs: tuple, ana) -> str | None:
        again = self.analytical(outs)
        for k in range(len(outs)):
            for di, i in enumerate(self.diff):
                for e, (r1, r2) in enumerate(zip(ana[k][di], again[k][di])):
                    for j, (a, b) in enumerate(zip(r1, r2)):
                        if abs(a - b) > self.nondet_tol:
                            return (f"{self.name}: backward is not reentrant: running it twice with "
                                    f"the same inputs and grad_output gave {a!r} and {b!r} for "
                                    f"output {k} with respect to {self.labels[i]} (element "
                                    f"{_fmt(tuple(self.inputs[i].shape), j)}); the tolerance for "
                                    f"nondeterminism was {self.nondet_tol}")
        return None

    def undefined_grads(self, outs: tuple, ana) -> str | None:
        """Backward with some output gradients left undefined must equal backward with zeros."""
        import ember

        diff_outs = [k for k, o in enumerate(outs) if o.requires_grad]
        if len(diff_outs) < 2:
            return None
        xs = [self.inputs[i] for i in self.diff]
        for skip in diff_outs:
            rest = [k for k in diff_outs if k != skip]
            seeds = [ember.ones(outs[k].shape, dtype=outs[k].dtype) for k in rest]
            try:
                got = ember.autograd.grad([outs[k] for k in rest], xs, seeds, retain_graph=True,
                                          allow_unused=True)
            except Exception as exc:  # noqa: BLE001  (reported as a gradcheck failure)
                return (f"{self.name}: backward failed when the gradient of output {skip} was "
                        f"undefined: {exc}")
            for di, g in enumerate(got):
                vals = g.detach().reshape(-1).tolist() if g is not None else None
                for j in range(xs[di].numel()):
                    want = sum(ana[k][di][e][j] for k in rest for e in range(outs[k].numel()))
                    have = vals[j] if vals is not None else 0.0
                    if abs(want - have) > self.atol + self.rtol * abs(want):
                        return (f"{self.name}: with the gradient of output {skip} undefined, the "
                                f"gradient with respect to {self.labels[self.diff[di]]} (element "
                                f"{_fmt(tuple(xs[di].shape), j)}) is {have!r}; expected {want!r} "
                                "as when that gradient is zero")
        return None

    def run(self) -> str | None:
        self.validate()
        outs = self.outputs()
        shapes = [(tuple(o.shape), o.requires_grad) for o in outs]
        msg = ana = None
        if self.check_backward_ad:
            ana = self.analytical(outs)
            if self.nondet_tol >= 0:
                msg = self.reentrant(outs, ana)
            if msg is None and self.check_undefined_grad:
                msg = self.undefined_grads(outs, ana)
            if msg is None and self.check_batched_grad:
                msg = self.batched_grads(outs, ana)
        if msg is not None:
            return msg
        del outs  # the finite differences below write into the inputs
        n_outs = [math.prod(s) for s, _ in shapes]
        fwd = self.forward(n_outs) if self.check_forward_ad else None
        num = self.numerical(n_outs)
        if ana is not None:
            msg = self.compare(shapes, ana, num)
        if msg is None and fwd is not None:
            msg = self.compare(shapes, fwd, num, " computed with forward mode")
        if msg is None and self.check_batched_forward_grad:
            msg = self.compare(shapes, self.forward(n_outs, batched=True), num,
                               " computed with batched forward mode")
        return msg


def gradcheck(
    func: Callable,
    inputs: Tensor | Sequence[Tensor],
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """Checks the gradients of ``func`` at ``inputs`` (float64 tensors that require grad) against
    central finite differences with step ``eps``; an element passes when
    ``|analytical - numerical| <= atol + rtol * |numerical|``.

    Also checks that backward is reentrant (two runs agree within ``nondet_tol``) and, for
    functions with several outputs, that leaving an output's gradient undefined acts like a zero
    gradient (``check_undefined_grad``). On failure raises :class:`GradcheckError` naming the
    output, input and elements that disagree, or returns False with ``raise_exception=False``.

    As PyTorch's options: ``check_forward_ad`` also checks forward-mode Jacobian-vector products
    (``ember.autograd.forward_ad``) and ``check_backward_ad=False`` skips the backward checks;
    ``check_batched_grad`` checks backward with a batch of grad_outputs
    (``is_grads_batched=True``) and ``check_batched_forward_grad`` forward mode under
    ``ember.func.vmap``; ``check_grad_dtypes`` checks that gradients have their inputs' dtypes.
    ``fast_mode`` runs the full check (the same verdict, not the faster projection), and
    ``masked`` only concerns sparse inputs, which gradcheck does not take.

    >>> import ember
    >>> x = ember.randn(3, dtype=ember.float64, requires_grad=True)
    >>> ember.autograd.gradcheck(lambda t: (t * t).sum(), x)
    True
    >>> ember.autograd.gradcheck(lambda t: t.sin(), x, check_forward_ad=True)
    True
    """
    del fast_mode, masked  # see the docstring
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to "
                             "be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad "
                             "to be True")
    ins = _inputs(inputs)
    labels = [f"input {i}" for i in range(len(ins))]
    return _verdict(_Check(func, ins, labels, eps, atol, rtol, nondet_tol, check_undefined_grad,
                           "gradcheck", check_backward_ad=check_backward_ad,
                           check_forward_ad=check_forward_ad, check_grad_dtypes=check_grad_dtypes,
                           check_batched_grad=check_batched_grad,
                           check_batched_forward_grad=check_batched_forward_grad),
                    raise_exception)


def _verdict(check: _Check, raise_exception: bool) -> bool:
    msg = check.run()
    if msg is None:
        return True
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradgradcheck(
    func: Callable,
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Tensor] | None = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """Checks second derivatives: the gradients of ``func`` with respect to ``inputs``, computed
    with ``create_graph=True`` for ``grad_outputs`` (random float64 tensors that require grad when
    None), are themselves checked against finite differences, with respect to both the inputs
    and the grad_outputs. Messages name ``input i`` or ``grad_outputs[k]``.

    ``check_rev_over_rev`` (the default) checks the first derivative by backward mode,
    ``check_fwd_over_rev`` by forward mode; the other options are gradcheck's.

    >>> import ember
    >>> x = ember.randn(3, dtype=ember.float64, requires_grad=True)
    >>> ember.autograd.gradgradcheck(lambda t: (t ** 3).sum(), x)
    True
    """
    import ember

    del fast_mode, masked  # as gradcheck
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev "
                             "to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to be "
                             "True")
    ins = _inputs(inputs)
    # in the caller's grad mode, as PyTorch: the function may differentiate inside
    outs = [o.detach() for o in _outputs(func(*ins))]
    diff_out = [k for k, o in enumerate(outs) if o.is_floating_point()]
    if grad_outputs is None:
        gen = ember.Generator().manual_seed(0)
        gos = []
        for k in diff_out:
            shape = tuple(outs[k].shape)
            if gen_non_contig_grad_outputs and outs[k].dim() > 0:
                # every other element of a wider buffer: a strided, non-contiguous view
                big = ember.randn(shape + (2,), dtype=ember.float64, generator=gen)
                g = big.select(-1, 0)
            else:
                g = ember.randn(shape, dtype=ember.float64, generator=gen)
            gos.append(g.requires_grad_())
        grad_outputs = tuple(gos)
    else:
        grad_outputs = _inputs(grad_outputs)
        if len(grad_outputs) != len(diff_out):
            raise ValueError(f"gradgradcheck: func has {len(diff_out)} differentiable output(s) but "
                             f"{len(grad_outputs)} grad_outputs were given")
        for k, (g, i) in enumerate(zip(grad_outputs, diff_out)):
            if tuple(g.shape) != tuple(outs[i].shape):
                raise ValueError(f"gradgradcheck: grad_outputs[{k}] has shape {tuple(g.shape)} but "
                                 f"output {i} has shape {tuple(outs[i].shape)}")
    n_in = len(ins)
    diff_in = [i for i, t in enumerate(ins) if isinstance(t, Tensor) and t.requires_grad]

    def first_derivative(*args):
        xs, gos = args[:n_in], args[n_in:]
        res = _outputs(func(*xs))
        pairs = [(res[i], g) for i, g in zip(diff_out, gos) if res[i].requires_grad]
        if not pairs:
            return tuple(ember.zeros_like(xs[i]) for i in diff_in)
        grads = ember.autograd.grad([o for o, _ in pairs], [xs[i] for i in diff_in],
                                    [g for _, g in pairs], create_graph=True, allow_unused=True)
        return tuple(g if g is not None else ember.zeros_like(xs[i])
                     for g, i in zip(grads, diff_in))

    labels = [f"input {i}" for i in range(n_in)] + [
        f"grad_outputs[{k}]" for k in range(len(grad_outputs))]
    check = _Check(first_derivative, ins + tuple(grad_outputs), labels, eps, atol, rtol,
                   nondet_tol, check_undefined_grad, "gradgradcheck",
                   check_backward_ad=check_rev_over_rev, check_forward_ad=check_fwd_over_rev,
                   check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad)
    check.grad_in_numerical = True
    return _verdict(check, raise_exception)
