"""One flat vector from many parameters, and back.

>>> import ember
>>> from ember.nn.utils import parameters_to_vector, vector_to_parameters
>>> ps = [ember.zeros(2, 2), ember.zeros(3)]
>>> v = parameters_to_vector(ps)
>>> v.shape
ember.Size([7])
>>> vector_to_parameters(ember.arange(7.0), ps)
>>> ps[1].tolist()
[4.0, 5.0, 6.0]
"""

from __future__ import annotations

from typing import Iterable

import ember
from ember import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one 1-D tensor (differentiable)."""
    params = list(parameters)
    if not params:
        raise ValueError("parameters_to_vector: got no parameters")
    device = params[0].device
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"parameters_to_vector: element {i} is a {type(p).__name__}, not a Tensor")
        if p.device != device:
            raise TypeError(
                f"parameters_to_vector: parameters are on different devices ({device} and {p.device})"
            )
    return ember.cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copies consecutive slices of the 1-D ``vec`` into the parameters (their data)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected vec to be a Tensor, got {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters: expected a 1-D vec, got shape {tuple(vec.shape)}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if total != vec.numel():
        raise ValueError(
            f"vector_to_parameters: vec has {vec.numel()} elements but the parameters hold {total}"
        )
    offset = 0
    with ember.no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[offset:offset + n].reshape(p.shape))
            offset += n
