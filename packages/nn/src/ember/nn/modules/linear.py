"""Identity, Linear and Bilinear layers.

>>> import ember
>>> fc = ember.nn.Linear(3, 2)
>>> fc(ember.zeros(5, 3)).shape
ember.Size([5, 2])
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Tensor
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.lazy import LazyModuleMixin
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter, UninitializedParameter

__all__ = ["Identity", "Linear", "LazyLinear", "Bilinear", "NonDynamicallyQuantizableLinear"]


class Identity(Module):
    """Returns its input unchanged (constructor arguments are accepted and ignored).

    >>> import ember
    >>> ember.nn.Identity(54, unused="x")(ember.ones(2)).tolist()
    [1.0, 1.0]
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out_features, in_features).

    Both are initialized from U(-1/sqrt(in_features), 1/sqrt(in_features)) like PyTorch's.

    >>> import ember
    >>> ember.nn.Linear(20, 30, bias=False)
    Linear(in_features=20, out_features=30, bias=False)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"Linear: {name} must be a non-negative int, got {v!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(ember.empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(ember.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraws weight and bias from their default distributions."""
        # kaiming_uniform_ with a=sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )



class NonDynamicallyQuantizableLinear(Linear):
    """A :class:`Linear` under another name: PyTorch uses it for the output projection of
    ``MultiheadAttention`` (where it matters to quantization), and programs refer to it by this
    path. It behaves exactly like ``Linear``.

    >>> from ember.nn.modules.linear import NonDynamicallyQuantizableLinear
    >>> NonDynamicallyQuantizableLinear(4, 2)
    NonDynamicallyQuantizableLinear(in_features=4, out_features=2, bias=True)
    """


class LazyLinear(LazyModuleMixin, Linear):
    """A ``Linear`` whose ``in_features`` is taken from the last dimension of its first input
    (then it becomes a ``Linear``, initialized as one).

    >>> import ember
    >>> fc = ember.nn.LazyLinear(4)
    >>> fc
    LazyLinear(in_features=0, out_features=4, bias=True)
    >>> fc(ember.ones(2, 7)).shape
    ember.Size([2, 4])
    >>> fc
    Linear(in_features=7, out_features=4, bias=True)
    """

    cls_to_become = Linear
    weight: UninitializedParameter
    bias: UninitializedParameter  # type: ignore[assignment]

    def __init__(self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        # a 0x0 Linear without bias: no real tensors are created, the shapes come later
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:
        """Materializes weight (out_features, input.shape[-1]) and bias, initialized like
        ``Linear``'s."""
        if not self.has_uninitialized_params():
            if self.in_features == 0:  # materialized by load_state_dict
                self.in_features = int(self.weight.shape[1])
            return
        if input.ndim == 0:
            raise ValueError(
                f"{self._get_name()}: expected an input with at least 1 dimension (the last one "
                "gives in_features), got a 0-d tensor"
            )
        with ember.no_grad():
            self.in_features = int(input.shape[-1])
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()


class Bilinear(Module):
    """``y = x1^T A x2 + b`` per output feature; weight (out, in1, in2).

    >>> import ember
    >>> m = ember.nn.Bilinear(2, 3, 4)
    >>> m(ember.ones(5, 2), ember.ones(5, 3)).shape
    ember.Size([5, 4])
    """

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(
            ember.empty(out_features, in1_features, in2_features, dtype=dtype, device=device)
        )
        if bias:
            self.bias = Parameter(ember.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraws weight and bias from U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
