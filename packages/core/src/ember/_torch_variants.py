"""PyTorch's generated function variants of Tensor methods, built from two tables:

* the in-place functions ``ember.abs_(x)``, ``ember.clamp_(x, 0, 1)``, ``ember.sigmoid_(x)`` ...:
  ``ember.<name>_(input, *args)`` is ``input.<name>_(*args)`` (it returns ``input``);
* the copying views ``ember.transpose_copy``, ``view_copy``, ``diagonal_copy`` ... : the same
  values as the view op, in a new contiguous tensor that shares no memory with the input (and is
  differentiable like the view);

plus ``as_strided_scatter`` and ``slice_inverse``, the inverses PyTorch's functionalization uses.

>>> import ember
>>> x = ember.tensor([-1.0, 2.0])
>>> ember.abs_(x) is x, x.tolist()
(True, [1.0, 2.0])
>>> y = ember.arange(6.0).reshape(2, 3)
>>> t = ember.transpose_copy(y, 0, 1)
>>> t.stride(), t.tolist()
((2, 1), [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from ember import _C
from ember._C import Tensor
from ember._memory_format import contiguous_format

__all__ = ["as_strided_scatter", "slice_inverse", "slice_copy", "INPLACE_FUNCTIONS", "COPY_VIEWS"]

# Every torch.<name>_ whose Tensor method ember has (the NumPy-style aliases included).
INPLACE_FUNCTIONS: tuple[str, ...] = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_",
    "arcsinh_", "arctan_", "arctanh_", "as_strided_", "asin_", "asinh_", "atan_", "atanh_",
    "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_",
    "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_", "gcd_",
    "i0_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_",
    "neg_", "negative_", "rad2deg_", "reciprocal_", "resize_as_", "round_", "rsqrt_",
    "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_",
    "xlogy_", "conj_physical_",
)

# torch.<view>_copy -> the Tensor view method it copies
COPY_VIEWS: dict[str, str] = {
    "view_copy": "view", "permute_copy": "permute", "transpose_copy": "transpose",
    "expand_copy": "expand", "diagonal_copy": "diagonal", "select_copy": "select",
    "squeeze_copy": "squeeze", "unsqueeze_copy": "unsqueeze", "t_copy": "t",
    "unbind_copy": "unbind", "split_copy": "split", "split_with_sizes_copy": "split_with_sizes",
    "unfold_copy": "unfold", "alias_copy": "view_as", "detach_copy": "detach",
    "as_strided_copy": "as_strided", "view_as_real_copy": "view_as_real",
    "view_as_complex_copy": "view_as_complex",
}


def _need_tensor(name: str, obj: Any) -> None:
    if not isinstance(obj, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(obj).__name__}")


def _make_inplace(name: str) -> Callable[..., Tensor]:
    def inplace(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        _need_tensor(name, input)
        return getattr(input, name)(*args, **kwargs)

    inplace.__name__ = inplace.__qualname__ = name
    # (the examples are in the module docstring: doctest does not find generated functions)
    inplace.__doc__ = (
        f"``input.{name}(*args, **kwargs)``: {name[:-1]} of ``input`` written into ``input``, "
        "which is returned (see ``ember._torch_variants``)."
    )
    return inplace


def _fresh(t: Tensor) -> Tensor:
    """A contiguous copy of a view, never sharing its memory."""
    return t.clone(memory_format=contiguous_format)


def _view(method: str, input: Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if method == "view_as":  # alias_copy(input): the tensor itself, seen through a new view
        return input.view_as(input)
    if method == "expand":  # torch's expand_copy has a keyword `implicit` that changes nothing
        kwargs = {k: v for k, v in kwargs.items() if k != "implicit"}
    if method == "squeeze" and len(args) == 1 and isinstance(args[0], list):
        args = (tuple(args[0]),)
    if method in ("view_as_real", "view_as_complex"):
        return getattr(_C, method)(input)
    return getattr(input, method)(*args, **kwargs)


def _make_copy(name: str, method: str) -> Callable[..., Any]:
    def copy(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        _need_tensor(name, input)
        out = _view(method, input, args, kwargs)
        if isinstance(out, (tuple, list)):
            return tuple(_fresh(t) for t in out)
        return _fresh(out)

    copy.__name__ = copy.__qualname__ = name
    copy.__doc__ = (
        f"``input.{method}(...)`` as a new contiguous tensor that shares no memory with "
        "``input`` (a tuple of them where the view op returns several; see "
        "``ember._torch_variants``)."
    )
    return copy


def slice_copy(input: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
               step: int = 1) -> Tensor:
    """``input[..., start:end:step, ...]`` along ``dim``, copied into a new contiguous tensor.

    >>> import ember
    >>> ember.slice_copy(ember.arange(6), 0, 1, None, 2).tolist()
    [1, 3, 5]
    """
    _need_tensor("slice_copy", input)
    if input.ndim == 0:
        raise IndexError("slice_copy(): cannot slice a 0-d tensor")
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        raise ValueError(f"slice_copy(): step must be a positive int, got {step!r}")
    d = dim + input.ndim if dim < 0 else dim
    if not 0 <= d < input.ndim:
        raise IndexError(
            f"slice_copy(): dim {dim} is out of range for a tensor of {input.ndim} dimensions"
        )
    index = (slice(None),) * d + (slice(start, end, step),)
    return _fresh(input[index])


def as_strided_scatter(input: Tensor, src: Tensor, size: Sequence[int], stride: Sequence[int],
                       storage_offset: int | None = None) -> Tensor:
    """A copy of ``input`` in which the elements that ``input.as_strided(size, stride,
    storage_offset)`` would see hold ``src`` (``input`` is not changed). Differentiable.

    >>> import ember
    >>> ember.as_strided_scatter(ember.zeros(4), ember.ones(2), (2,), (2,)).tolist()
    [1.0, 0.0, 1.0, 0.0]
    """
    _need_tensor("as_strided_scatter", input)
    _need_tensor("as_strided_scatter", src)
    size, stride = tuple(size), tuple(stride)
    if tuple(src.shape) != size:
        raise RuntimeError(
            f"as_strided_scatter: expected src to have the size {list(size)} of the strided view, "
            f"got {list(src.shape)}"
        )
    out = input.clone()  # keeps input's strides, so the strided view addresses the same elements
    args = (size, stride) if storage_offset is None else (size, stride, storage_offset)
    out.as_strided(*args).copy_(src)
    return out


def slice_inverse(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> Tensor:
    """The inverse of slicing, as PyTorch's functionalization defines it: a view of ``input``'s
    memory with the size, strides and storage offset of ``src`` (the slice arguments only say
    which slice ``input`` came from).

    >>> import ember
    >>> base = ember.arange(6.0)
    >>> ember.slice_inverse(base[::2], base, 0, None, None, 2).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    """
    _need_tensor("slice_inverse", input)
    _need_tensor("slice_inverse", src)
    return input.as_strided(tuple(src.shape), src.stride(), src.storage_offset())


def _conj_physical_(self: Tensor) -> Tensor:
    """Conjugates a complex tensor in place (nothing to do for real dtypes)."""
    if self.dtype.is_complex:
        self.copy_(_C.conj_physical(self))
    return self


def _install() -> None:
    ember = sys.modules["ember"]
    if not hasattr(Tensor, "conj_physical_"):
        Tensor.conj_physical_ = _conj_physical_
    for name in INPLACE_FUNCTIONS:
        if not hasattr(ember, name) and hasattr(Tensor, name):
            setattr(ember, name, _make_inplace(name))
    for name, method in COPY_VIEWS.items():
        if not hasattr(ember, name):
            setattr(ember, name, _make_copy(name, method))
    for name in ("slice_copy", "as_strided_scatter", "slice_inverse"):
        if not hasattr(ember, name):
            setattr(ember, name, globals()[name])
    if not hasattr(Tensor, "as_strided_scatter"):
        Tensor.as_strided_scatter = as_strided_scatter
    if not hasattr(Tensor, "slice_inverse"):
        Tensor.slice_inverse = slice_inverse
