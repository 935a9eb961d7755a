"""Activation layers: thin modules over :mod:`ember.nn.functional`.

>>> import ember
>>> ember.nn.ReLU()(ember.tensor([-1.0, 1.0])).tolist()
[0.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = [
    "ReLU", "ReLU6", "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Tanh",
    "Sigmoid", "Hardtanh", "Hardsigmoid", "Hardswish", "Softplus", "Softsign", "LogSigmoid",
    "Softmax", "LogSoftmax", "Softmin", "Softmax2d", "GLU", "Threshold", "Tanhshrink",
    "Softshrink", "Hardshrink", "RReLU",
]


class _Inplace(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """``max(0, x)``.

    >>> import ember
    >>> ember.nn.ReLU(inplace=True)
    ReLU(inplace=True)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)


class ReLU6(_Inplace):
    """``min(max(0, x), 6)``.

    >>> import ember
    >>> ember.nn.ReLU6()(ember.tensor([7.0])).tolist()
    [6.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.relu6(input, self.inplace)


class SELU(_Inplace):
    """Scaled ELU with PyTorch's self-normalizing constants.

    >>> import ember
    >>> ember.nn.SELU()(ember.tensor([0.0])).tolist()
    [0.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.selu(input, self.inplace)


class SiLU(_Inplace):
    """``x * sigmoid(x)``.

    >>> import ember
    >>> ember.nn.SiLU()(ember.tensor([0.0])).tolist()
    [0.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, self.inplace)


class Mish(_Inplace):
    """``x * tanh(softplus(x))``.

    >>> import ember
    >>> ember.nn.Mish()(ember.tensor([0.0])).tolist()
    [0.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.mish(input, self.inplace)


class Hardsigmoid(_Inplace):
    """``clamp(x / 6 + 1/2, 0, 1)``.

    >>> import ember
    >>> ember.nn.Hardsigmoid()(ember.tensor([0.0])).tolist()
    [0.5]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.hardsigmoid(input, self.inplace)


class Hardswish(_Inplace):
    """``x * hardsigmoid(x)``.

    >>> import ember
    >>> ember.nn.Hardswish()(ember.tensor([3.0])).tolist()
    [3.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.hardswish(input, self.inplace)


class LeakyReLU(Module):
    """``x`` for x > 0, else ``negative_slope * x``.

    >>> import ember
    >>> ember.nn.LeakyReLU(0.1)
    LeakyReLU(negative_slope=0.1)
    """

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """LeakyReLU with a learned slope: one (num_parameters=1) or one per channel.

    >>> import ember
    >>> ember.nn.PReLU(3)
    PReLU(num_parameters=3)
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(ember.empty(num_parameters, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Sets every slope to ``init``."""
        with ember.no_grad():
            self.weight.fill_(self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class ELU(Module):
    """``x`` for x > 0, else ``alpha * (exp(x) - 1)``.

    >>> import ember
    >>> ember.nn.ELU()
    ELU(alpha=1.0)
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    >>> import ember
    >>> ember.nn.CELU(0.5)
    CELU(alpha=0.5)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)


class GELU(Module):
    """``x * Phi(x)``, exact or with the tanh approximation.

    >>> import ember
    >>> ember.nn.GELU(approximate="tanh")
    GELU(approximate='tanh')
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    """Hyperbolic tangent.

    >>> import ember
    >>> ember.nn.Tanh()(ember.tensor([0.0])).tolist()
    [0.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return input.tanh()


class Sigmoid(Module):
    """Logistic sigmoid.

    >>> import ember
    >>> ember.nn.Sigmoid()(ember.tensor([0.0])).tolist()
    [0.5]
    """

    def forward(self, input: Tensor) -> Tensor:
        return input.sigmoid()


class Hardtanh(Module):
    """``clamp(x, min_val, max_val)``.

    >>> import ember
    >>> ember.nn.Hardtanh(-2.0, 2.0)
    Hardtanh(min_val=-2.0, max_val=2.0)
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) must not exceed max_val ({max_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``.

    >>> import ember
    >>> ember.nn.Softplus()
    Softplus(beta=1.0, threshold=20.0)
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softsign(Module):
    """``x / (1 + |x|)``.

    >>> import ember
    >>> ember.nn.Softsign()(ember.tensor([1.0])).tolist()
    [0.5]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.softsign(input)


class LogSigmoid(Module):
    """``log(sigmoid(x))``.

    >>> import ember
    >>> ember.nn.LogSigmoid()(ember.tensor([0.0])).tolist()
    [-0.6931471824645996]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.logsigmoid(input)


class _SoftmaxBase(Module):
    _fn: Any = None

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    """Softmax along dim.

    >>> import ember
    >>> ember.nn.Softmax(dim=1)
    Softmax(dim=1)
    """

    _fn = staticmethod(F.softmax)


class LogSoftmax(_SoftmaxBase):
    """Log-softmax along dim.

    >>> import ember
    >>> ember.nn.LogSoftmax(dim=-1)
    LogSoftmax(dim=-1)
    """

    _fn = staticmethod(F.log_softmax)


class Softmin(_SoftmaxBase):
    """Softmax of -x along dim.

    >>> import ember
    >>> ember.nn.Softmin(dim=0)
    Softmin(dim=0)
    """

    _fn = staticmethod(F.softmin)


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W) input.

    >>> import ember
    >>> ember.nn.Softmax2d()(ember.zeros(2, 1, 1)).tolist()
    [[[0.5]], [[0.5]]]
    """

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(
                f"Softmax2d: expected 3-D or 4-D input (C, H, W) or (N, C, H, W), got shape "
                f"{tuple(input.shape)}"
            )
        return F.softmax(input, -3)


class GLU(Module):
    """Gated linear unit over dim.

    >>> import ember
    >>> ember.nn.GLU()
    GLU(dim=-1)
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Threshold(Module):
    """``x`` where x > threshold, else ``value``.

    >>> import ember
    >>> ember.nn.Threshold(0.1, 20.0)
    Threshold(threshold=0.1, value=20.0)
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else "")


class Tanhshrink(Module):
    """``x - tanh(x)``.

    >>> import ember
    >>> ember.nn.Tanhshrink()(ember.tensor([0.0])).tolist()
    [0.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.tanhshrink(input)


class Softshrink(Module):
    """Soft thresholding by lambd.

    >>> import ember
    >>> ember.nn.Softshrink()
    Softshrink(0.5)
    """

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """Hard thresholding by lambd.

    >>> import ember
    >>> ember.nn.Hardshrink()
    Hardshrink(0.5)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)


class RReLU(Module):
    """Randomized leaky ReLU (random negative slopes in training, their mean in eval).

    >>> import ember
    >>> ember.nn.RReLU(0.1, 0.3)
    RReLU(lower=0.1, upper=0.3)
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


# PyTorch defines MultiheadAttention in torch.nn.modules.activation; programs import it from there.
from ember.nn.modules.attention import MultiheadAttention  # noqa: E402,F401
