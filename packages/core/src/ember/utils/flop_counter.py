"""``ember.utils.flop_counter``: FLOPs of the matrix products, convolutions and attention run
inside a context, per module (PyTorch's ``torch.utils.flop_counter``).

The counts are PyTorch's: ``2 * m * k * n`` for a product (bias additions and elementwise ops
are not counted), the convolution formula on the output (or, transposed, the input) positions,
both products of attention (whichever kernel runs it, as PyTorch on CUDA; PyTorch's CPU
attention kernel, ``_scaled_dot_product_flash_attention_for_cpu``, which handlers see on the CPU
here too, is not counted there), and their backward counterparts. ``matmul``, one op in
ember, counts the product PyTorch would split it into (a matrix-vector product counts nothing, as
there). Backward counts follow the ops ember's backward formulas run, which for ``einsum`` and
matrix-vector products can differ from PyTorch's.

>>> import ember
>>> from ember.utils.flop_counter import FlopCounterMode
>>> lin = ember.nn.Linear(4, 3)
>>> with FlopCounterMode(display=False) as counter:
...     _ = lin(ember.ones(2, 4))
>>> counter.get_total_flops()
48
>>> counter.get_flop_counts()["Linear"]
{aten.addmm: 48}
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Callable

from ember import ops
from ember._C import Tensor
from ember.utils._python_dispatch import TorchDispatchMode
from ember.utils.module_tracker import ModuleTracker

__all__ = ["FlopCounterMode", "register_flop_formula"]

aten = ops.aten
flop_registry: dict[Any, Callable[..., int]] = {}


def _shape(x: Any) -> Any:
    return tuple(x.shape) if isinstance(x, Tensor) else x


def register_flop_formula(targets: Any, get_raw: bool = False) -> Callable:
    """Registers ``formula(*arg_shapes, out_shape=..., **kwargs) -> int`` for the ops in
    ``targets`` (``ember.ops.aten.<op>`` packets); ``get_raw=True`` passes the arguments
    themselves instead of their shapes."""
    def register(formula: Callable[..., int]) -> Callable[..., int]:
        wrapped = formula if get_raw else _shape_wrapper(formula)
        for target in targets if isinstance(targets, (list, tuple)) else [targets]:
            flop_registry[target] = wrapped
        return formula
    return register


def _shape_wrapper(f: Callable[..., int]) -> Callable[..., int]:
    def nf(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        args = tuple(_shape(a) if not isinstance(a, (list, tuple)) else [_shape(x) for x in a]
                     for a in args)
        out = [_shape(o) for o in out_val] if isinstance(out_val, (list, tuple)) else _shape(out_val)
        return f(*args, out_shape=out, **kwargs)
    return nf


@register_flop_formula(aten.mm)
def mm_flop(a_shape: Any, b_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    m, k = a_shape
    return 2 * m * k * b_shape[1]


@register_flop_formula(aten.addmm)
def addmm_flop(self_shape: Any, a_shape: Any, b_shape: Any, out_shape: Any = None,
               **kwargs: Any) -> int:
    return mm_flop(a_shape, b_shape)


@register_flop_formula(aten.bmm)
def bmm_flop(a_shape: Any, b_shape: Any, out_shape: Any = None, **kwargs: Any) -> int:
    b, m, k = a_shape
    return 2 * b * m * k * b_shape[2]


@register_flop_formula(aten.baddbmm)
def baddbmm_flop(self_shape: Any, a_shape: Any, b_shape: Any, out_shape: Any = None,
                 **kwargs: Any) -> int:
    return bmm_flop(a_shape, b_shape)


@register_flop_formula(aten.matmul)
def matmul_flop(a_shape: Any, b_shape: Any, out_shape: Any = None, **kwargs: Any) -> int | None:
    # PyTorch's matmul runs dot / mv for a vector on the right (no formula: not counted, not
    # listed), else mm / bmm
    if len(b_shape) == 1:
        return None
    m, k = (1, a_shape[0]) if len(a_shape) == 1 else a_shape[-2:]
    batch = math.prod(out_shape[:-2]) if len(a_shape) > 1 or len(b_shape) > 2 else 1
    return 2 * batch * m * k * b_shape[-1]


def conv_flop_count(x_shape: Any, w_shape: Any, out_shape: Any, transposed: bool = False) -> int:
    """``2 * batch * c_out * c_in/groups * kernel positions`` per output position (per input
    position when transposed); the bias is not counted."""
    positions = (x_shape if transposed else out_shape)[2:]
    return 2 * x_shape[0] * math.prod(w_shape) * math.prod(positions)


@register_flop_formula(aten.convolution)
def conv_flop(x_shape: Any, w_shape: Any, _bias: Any, _stride: Any, _padding: Any,
              _dilation: Any, transposed: bool, *args: Any, out_shape: Any = None,
              **kwargs: Any) -> int:
    return conv_flop_count(x_shape, w_shape, out_shape, transposed)


@register_flop_formula(aten.convolution_backward)
def conv_backward_flop(grad_out_shape: Any, x_shape: Any, w_shape: Any, _stride: Any,
                       _padding: Any, _dilation: Any, transposed: bool, _output_padding: Any,
                       _groups: Any, input_grad: bool, weight_grad: bool, _bias_grad: bool,
                       out_shape: Any = None, **kwargs: Any) -> int:
    def t(shape: Any) -> list:  # swap the batch and channel dims
        return [shape[1], shape[0], *shape[2:]]

    flops = 0
    if input_grad:  # a transposed convolution of grad_out with the weight (and vice versa)
        flops += conv_flop_count(grad_out_shape, w_shape, x_shape, not transposed)
    if weight_grad:  # a convolution of the input with grad_out (grad_out with the input)
        if transposed:
            flops += conv_flop_count(t(grad_out_shape), t(x_shape), t(w_shape), False)
        else:
            flops += conv_flop_count(t(x_shape), t(grad_out_shape), t(w_shape), False)
    return flops


def sdpa_flop_count(q: Any, k: Any, v: Any) -> int:
    """The two batched products of attention (scores and weighted values); key / value may
    have fewer heads (grouped-query attention)."""
    b, h, s_q, d = q
    s_k, d_v = k[-2], v[-1]
    return bmm_flop((b * h, s_q, d), (b * h, d, s_k)) + bmm_flop((b * h, s_q, s_k), (b * h, s_k, d_v))


def sdpa_backward_flop_count(grad_out: Any, q: Any, k: Any, v: Any) -> int:
    """The recomputed scores and the four products of the backward."""
    b, h, s_q, d = q
    s_k, d_v = k[-2], v[-1]
    n = b * h
    return (bmm_flop((n, s_q, d), (n, d, s_k)) + bmm_flop((n, s_q, d_v), (n, d_v, s_k))
            + bmm_flop((n, s_k, s_q), (n, s_q, d_v)) + bmm_flop((n, s_q, s_k), (n, s_k, d))
            + bmm_flop((n, d, s_q), (n, s_q, s_k)))


# One formula for every name of the attention kernel (handlers see PyTorch's, which are equal to
# ember's fused op): the arguments start with query, key, value (ember's own op: their list).
@register_flop_formula(aten._scaled_dot_product_fused_attention)
def sdpa_flop(q: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    if isinstance(q, list):
        return sdpa_flop_count(*q)
    return sdpa_flop_count(q, args[0], args[1])


@register_flop_formula(aten._scaled_dot_product_fused_attention_backward)
def sdpa_backward_flop(grad_out_shape: Any, q: Any, k: Any, v: Any, *args: Any,
                       out_shape: Any = None, **kwargs: Any) -> int:
    return sdpa_backward_flop_count(grad_out_shape, q, k, v)


def _suffix(number: int) -> str:
    return ["", "K", "M", "B", "T"][max(0, min(4, (len(str(number)) - 2) // 3))]


def _with_suffix(number: int, suffix: str) -> str:
    return f"{number / 1000 ** ['', 'K', 'M', 'B', 'T'].index(suffix):.3f}{suffix}"


class _FlopCounterDispatch(TorchDispatchMode):
    def __init__(self, counter: FlopCounterMode) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.counter._count_flops(func._overloadpacket, out, args, kwargs)
        return out


class FlopCounterMode:
    """Counts the FLOPs of the ops run inside it, in total (``get_total_flops()``) and per
    module and op (``get_flop_counts()``: module name -> {op packet: count}, modules named as
    :class:`~ember.utils.module_tracker.ModuleTracker` names them, backward included). On exit
    it prints ``get_table(depth)`` unless ``display=False``. ``custom_mapping`` adds or
    replaces formulas: ``{op packet: formula(*arg_shapes, out_shape=...)}``."""

    def __init__(self, mods: Any = None, depth: int = 2, display: bool = True,
                 custom_mapping: dict[Any, Any] | None = None) -> None:
        if mods is not None:
            import warnings

            warnings.warn("mods argument is not needed anymore, you can stop passing it",
                          stacklevel=2)
        self.flop_counts: dict[str, dict[Any, int]] = defaultdict(lambda: defaultdict(int))
        self.depth, self.display = depth, display
        self.flop_registry = {**flop_registry, **{
            k: v if getattr(v, "_get_raw", False) else _shape_wrapper(v)
            for k, v in (custom_mapping or {}).items()}}
        self.mod_tracker = ModuleTracker()
        self.mode: _FlopCounterDispatch | None = None

    def get_total_flops(self) -> int:
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self) -> dict[str, dict[Any, int]]:
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth: int | None = None) -> str:
        """Per-module FLOPs (and each op's) down to ``depth`` levels, with the share of the
        total; a "Global" row when some FLOPs ran outside every module."""
        depth = self.depth if depth is None else depth
        depth = 999999 if depth is None else depth
        total = self.get_total_flops()
        suffix = _suffix(total)
        rows: list[list[str]] = []
        subsumed = False

        def pct(v: int) -> str:
            return "0%" if total == 0 else f"{v / total:.2%}"

        def module_rows(name: str, level: int) -> list[list[str]]:
            nonlocal subsumed
            flops = sum(self.flop_counts[name].values())
            subsumed |= flops >= total
            pad = " " * level
            out = [[pad + name, _with_suffix(flops, suffix), pct(flops)]]
            out += [[pad + " - " + str(k), _with_suffix(v, suffix), pct(v)]
                    for k, v in self.flop_counts[name].items()]
            return out

        for name in sorted(self.flop_counts):
            if name != "Global" and name.count(".") + 1 <= depth:
                rows.extend(module_rows(name, name.count(".")))
        if "Global" in self.flop_counts and not subsumed:
            rows = module_rows("Global", 0) + [[" " + r[0], *r[1:]] for r in rows]
        if not rows:
            rows = [["Global", "0", "0%"]]
        header = ["Module", "FLOP", "% Total"]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]

        def line(r: list[str]) -> str:
            return "  ".join([r[0].ljust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2])])

        return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])

    def __enter__(self) -> FlopCounterMode:
        self.flop_counts.clear()
        self.mod_tracker.__enter__()
        self.mode = _FlopCounterDispatch(self)
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        assert self.mode is not None
        r = self.mode.__exit__(*exc)
        self.mode = None
        self.mod_tracker.__exit__()
        if self.display:
            print(self.get_table(self.depth))
        return r

    def _count_flops(self, packet: Any, out: Any, args: Any, kwargs: Any) -> Any:
        formula = self.flop_registry.get(packet)
        if formula is not None:
            flops = formula(*args, **kwargs, out_val=out)
            if flops is None:  # an op PyTorch does not count in this form
                return out
            for parent in set(self.mod_tracker.parents):
                self.flop_counts[parent][packet] += flops
        return out
