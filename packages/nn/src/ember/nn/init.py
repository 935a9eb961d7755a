"""Weight initialization: in-place fills of a tensor, run without recording gradients.

>>> import ember
>>> from ember.nn import init
>>> w = ember.empty(3, 5)
>>> _ = init.kaiming_uniform_(w, nonlinearity="relu")
>>> bound = init.calculate_gain("relu") * (3 / 5) ** 0.5
>>> bool((w.abs() <= bound).all())
True
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

import ember
from ember import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
]

_LINEAR_FNS = {
    "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "sigmoid",
}


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain (std multiplier) for a nonlinearity.

    linear/conv/sigmoid: 1; tanh: 5/3; relu: sqrt(2); leaky_relu: sqrt(2 / (1 + slope**2))
    (``param`` is the slope, 0.01 by default); selu: 3/4.

    >>> round(calculate_gain("leaky_relu", 0.2), 6)
    1.38675
    """
    if nonlinearity in _LINEAR_FNS:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(
        f"calculate_gain: unsupported nonlinearity {nonlinearity!r} (expected one of linear, "
        "conv1d/2d/3d, conv_transpose1d/2d/3d, sigmoid, tanh, relu, leaky_relu, selu)"
    )


def _check_tensor(fn: str, tensor: Any) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{fn}: expected an ember.Tensor, got {type(tensor).__name__}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out): dims 1 and 0 times the receptive field (the product of dims 2:)."""
    if tensor.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
            f"(got shape {tuple(tensor.shape)})"
        )
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _empty_noop(fn: str, tensor: Tensor) -> bool:
    if tensor.numel() == 0:
        warnings.warn(f"{fn}: initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """Fills ``tensor`` with values drawn uniformly from [a, b)."""
    _check_tensor("uniform_", tensor)
    with ember.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    """Fills ``tensor`` with values drawn from N(mean, std**2)."""
    _check_tensor("normal_", tensor)
    with ember.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Any = None,
) -> Tensor:
    """Fills ``tensor`` from N(mean, std**2) truncated to [a, b] (inverse-CDF sampling).

    >>> w = trunc_normal_(ember.empty(1000), std=0.5, a=-0.1, b=0.1)
    >>> bool((w.abs() <= 0.1).all())
    True
    """
    _check_tensor("trunc_normal_", tensor)
    if std <= 0:
        raise ValueError(f"trunc_normal_: std must be positive, got {std}")
    if a >= b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "trunc_normal_: mean is more than 2 std from [a, b]; the distribution of values may "
            "be incorrect",
            stacklevel=2,
        )

    def cdf(x: float) -> float:
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    with ember.no_grad():
        # uniform on [2 lo - 1, 2 hi - 1], through erfinv: a standard normal truncated to the range
        tensor.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        tensor.erfinv_()
        tensor.mul_(std * math.sqrt(2.0))
        tensor.add_(mean)
        tensor.clamp_(min=a, max=b)
    return tensor


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fills ``tensor`` with ``val``."""
    _check_tensor("constant_", tensor)
    with ember.no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """Fills ``tensor`` with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fills ``tensor`` with zeros."""
    _check_tensor("zeros_", tensor)
    with ember.no_grad():
        return tensor.zero_()


def eye_(tensor: Tensor) -> Tensor:
    """Fills a 2-D ``tensor`` with the identity matrix (ones on the main diagonal)."""
    _check_tensor("eye_", tensor)
    if tensor.ndim != 2:
        raise ValueError(
            f"eye_: only tensors with 2 dimensions are supported, got shape {tuple(tensor.shape)}"
        )
    with ember.no_grad():
        tensor.copy_(ember.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))
    return tensor


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fills a 3-, 4- or 5-D convolution weight with the Dirac delta (an identity convolution
    per group, keeping as many input channels as possible).

    >>> w = dirac_(ember.empty(2, 2, 3))
    >>> w[0, 0].tolist(), w[0, 1].tolist()
    ([0.0, 1.0, 0.0], [0.0, 0.0, 0.0])
    """
    _check_tensor("dirac_", tensor)
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(
            "dirac_: only tensors with 3, 4, or 5 dimensions are supported, got shape "
            f"{tuple(tensor.shape)}"
        )
    sizes = tensor.shape
    if groups <= 0 or sizes[0] % groups != 0:
        raise ValueError(f"dirac_: dim 0 ({sizes[0]}) must be divisible by groups ({groups})")
    per_group = sizes[0] // groups
    keep = min(per_group, sizes[1])
    centre = tuple(s // 2 for s in sizes[2:])
    with ember.no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(keep):
                tensor[(g * per_group + d, d) + centre] = 1
    return tensor


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    _check_tensor("xavier_uniform_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Glorot normal: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check_tensor("xavier_normal_", tensor)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan) (fan from ``mode``;
    ``a`` is the leaky_relu slope used in the gain)."""
    _check_tensor("kaiming_uniform_", tensor)
    if _empty_noop("kaiming_uniform_", tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """He normal: N(0, std**2) with std = gain / sqrt(fan)."""
    _check_tensor("kaiming_normal_", tensor)
    if _empty_noop("kaiming_normal_", tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def _orthonormal_columns(a: Tensor) -> Tensor:
    """Q of the QR decomposition of a (rows >= cols) with R's diagonal positive.

    Classical Gram-Schmidt applied twice per column: orthogonal to working precision.
    """
    rows, cols = a.shape
    q = ember.zeros(rows, cols, dtype=a.dtype)
    for j in range(cols):
        v = a[:, j].clone()
        if j > 0:
            basis = q[:, :j]
            for _ in range(2):
                v = v - basis.matmul(basis.t().matmul(v))
        v = v / v.norm()
        q[:, j] = v
    return q


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Any = None) -> Tensor:
    """Fills ``tensor`` (viewed as rows x cols, rows = dim 0) with a (semi-)orthogonal matrix
    drawn uniformly (the Q factor of a Gaussian matrix), times ``gain``.

    >>> w = orthogonal_(ember.empty(4, 3))
    >>> bool(ember.allclose(w.t().matmul(w), ember.eye(3), atol=1e-5))
    True
    """
    _check_tensor("orthogonal_", tensor)
    if tensor.ndim < 2:
        raise ValueError(
            "orthogonal_: only tensors with 2 or more dimensions are supported, got shape "
            f"{tuple(tensor.shape)}"
        )
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with ember.no_grad():
        flat = ember.empty(rows, cols, dtype=ember.float64).normal_(0, 1, generator=generator)
        if rows < cols:
            flat = flat.t()
        q = _orthonormal_columns(flat)
        if rows < cols:
            q = q.t()
        tensor.copy_(q.reshape(tensor.shape))
        tensor.mul_(gain)
    return tensor


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """Fills a 2-D ``tensor`` from N(0, std**2), then zeroes ``ceil(sparsity * rows)`` random
    entries in every column.

    >>> w = sparse_(ember.empty(10, 4), sparsity=0.3)
    >>> (w == 0).sum(0).tolist()
    [3, 3, 3, 3]
    """
    _check_tensor("sparse_", tensor)
    if tensor.ndim != 2:
        raise ValueError(
            f"sparse_: only tensors with 2 dimensions are supported, got shape {tuple(tensor.shape)}"
        )
    if not 0 <= sparsity <= 1:
        raise ValueError(f"sparse_: sparsity must be in [0, 1], got {sparsity}")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with ember.no_grad():
        tensor.normal_(0, std, generator=generator)
        for c in range(cols):
            zero_rows = ember.randperm(rows, generator=generator)[:num_zeros]
            tensor[zero_rows, c] = 0
    return tensor


# ---- the deprecated names without the trailing underscore (old scripts still call them) ------
def _deprecated(new: Callable[..., Tensor]) -> Callable[..., Tensor]:
    old = new.__name__[:-1]

    @functools.wraps(new)
    def fn(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.",
                      FutureWarning, stacklevel=2)
        return new(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = old
    fn.__doc__ = f"{old}(...): deprecated, calls :func:`{new.__name__}` (with a FutureWarning)."
    return fn


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
