"""``ember.batch_norm``, ``instance_norm``, ``layer_norm`` and ``group_norm`` with PyTorch's full
top-level signatures: each takes PyTorch's trailing backend switch (``cudnn_enabled``, or
``cudnn_enable`` for ``layer_norm``), which PyTorch programs pass positionally
(``torch.batch_norm(x, w, b, rm, rv, training, momentum, eps, True)``). ember picks its
kernels itself, so the switch is checked to be a bool and otherwise ignored; it defaults to
True, so ember's own shorter calls keep working.

>>> import ember
>>> x = ember.tensor([[1.0, 3.0], [3.0, 5.0]])
>>> ember.batch_norm(x, None, None, None, None, True, 0.1, 0.0, False).tolist()
[[-1.0, -1.0], [1.0, 1.0]]
>>> ember.layer_norm(x, [2], None, None, 0.0, True).tolist()
[[-1.0, 1.0], [-1.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Sequence

from ember import _C
from ember._C import Tensor

__all__ = ["batch_norm", "instance_norm", "layer_norm", "group_norm"]


def _check_switch(op: str, name: str, position: int, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be bool, not "
                        f"{type(value).__name__}")


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
               running_mean: Tensor | None, running_var: Tensor | None, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:
    """Batch normalization in ``torch.batch_norm``'s argument order (see
    ``ember.nn.functional.batch_norm``); ``cudnn_enabled`` is accepted and ignored.

    >>> import ember
    >>> ember.batch_norm(ember.tensor([[0.0], [2.0]]), None, None, None, None, True, 0.1,
    ...                  0.0, True).tolist()
    [[-1.0], [1.0]]
    """
    _check_switch("batch_norm", "cudnn_enabled", 9, cudnn_enabled)
    return _C.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                  running_mean: Tensor | None, running_var: Tensor | None,
                  use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool = True) -> Tensor:
    """Instance normalization in ``torch.instance_norm``'s argument order;
    ``cudnn_enabled`` is accepted and ignored.

    >>> import ember
    >>> ember.instance_norm(ember.tensor([[[0.0, 2.0]]]), None, None, None, None, True, 0.1,
    ...                     0.0, True).tolist()
    [[[-1.0, 1.0]]]
    """
    _check_switch("instance_norm", "cudnn_enabled", 9, cudnn_enabled)
    return _C.instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                            momentum, eps)


def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-05,
               cudnn_enable: bool = True) -> Tensor:
    """Layer normalization over the trailing ``normalized_shape`` dims, in
    ``torch.layer_norm``'s argument order; ``cudnn_enable`` is accepted and ignored.

    >>> import ember
    >>> ember.layer_norm(ember.tensor([[0.0, 2.0]]), [2], None, None, 0.0, False).tolist()
    [[-1.0, 1.0]]
    """
    _check_switch("layer_norm", "cudnn_enable", 6, cudnn_enable)
    return _C.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-05,
               cudnn_enabled: bool = True) -> Tensor:
    """Group normalization in ``torch.group_norm``'s argument order; ``cudnn_enabled`` is
    accepted and ignored.

    >>> import ember
    >>> ember.group_norm(ember.tensor([[[0.0], [2.0]]]), 1, None, None, 0.0, True).tolist()
    [[[-1.0], [1.0]]]
    """
    _check_switch("group_norm", "cudnn_enabled", 6, cudnn_enabled)
    return _C.group_norm(input, num_groups, weight, bias, eps)


def install(namespace: dict) -> None:
    """Puts these in place of the generated bindings in the ember namespace."""
    for name in __all__:
        namespace[name] = globals()[name]
