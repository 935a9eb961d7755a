"""``ember.nn.functional``: the functional form of the layers (``F.linear``, ...).

>>> import ember
>>> import ember.nn.functional as F
>>> F.linear(ember.ones(2, 3), ember.ones(4, 3), ember.zeros(4)).tolist()
[[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]]
"""

from __future__ import annotations

from ember import Tensor

__all__ = ["linear", "bilinear"]


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``: weight (out_features, in_features), input (*, in_features).

    >>> import ember
    >>> linear(ember.ones(3), ember.ones(2, 3)).tolist()
    [3.0, 3.0]
    """
    if weight.ndim not in (1, 2):
        raise RuntimeError(
            f"linear: weight must be 1-D or 2-D (out_features, in_features), got shape {_shape(weight)}"
        )
    in_features = weight.shape[-1]
    if input.ndim == 0 or input.shape[-1] != in_features:
        raise RuntimeError(
            f"linear: expected input of shape (*, {in_features}) for weight of shape "
            f"{_shape(weight)}, got input of shape {_shape(input)}"
        )
    out = input.matmul(weight.t() if weight.ndim == 2 else weight)
    if bias is not None:
        expected = (weight.shape[0],) if weight.ndim == 2 else ()
        if _shape(bias) not in (expected, ()):
            raise RuntimeError(
                f"linear: expected bias of shape {expected} for weight of shape {_shape(weight)}, "
                f"got {_shape(bias)}"
            )
        out = out + bias
    return out


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``.

    >>> import ember
    >>> bilinear(ember.ones(1, 2), ember.ones(1, 3), ember.ones(4, 2, 3)).tolist()
    [[6.0, 6.0, 6.0, 6.0]]
    """
    if weight.ndim != 3:
        raise RuntimeError(
            f"bilinear: weight must be 3-D (out_features, in1_features, in2_features), got shape "
            f"{_shape(weight)}"
        )
    out_f, in1, in2 = weight.shape
    if input1.ndim == 0 or input1.shape[-1] != in1:
        raise RuntimeError(
            f"bilinear: expected input1 of shape (*, {in1}) for weight of shape {_shape(weight)}, "
            f"got {_shape(input1)}"
        )
    if input2.ndim == 0 or input2.shape[-1] != in2:
        raise RuntimeError(
            f"bilinear: expected input2 of shape (*, {in2}) for weight of shape {_shape(weight)}, "
            f"got {_shape(input2)}"
        )
    if _shape(input1)[:-1] != _shape(input2)[:-1]:
        raise RuntimeError(
            f"bilinear: input1 {_shape(input1)} and input2 {_shape(input2)} must have the same "
            "leading (batch) dimensions"
        )
    if bias is not None and _shape(bias) != (out_f,):
        raise RuntimeError(f"bilinear: expected bias of shape ({out_f},), got {_shape(bias)}")
    lead = _shape(input1)[:-1]
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    # x1 @ W as one matmul over (in1) -> (n, out, in2), then contract in2 against x2
    t = x1.matmul(weight.permute(1, 0, 2).reshape(in1, out_f * in2)).reshape(-1, out_f, in2)
    out = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        out = out + bias
    return out.reshape(*lead, out_f)
