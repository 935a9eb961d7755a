"""Options of the chunked ``linear_cross_entropy`` (``torch.nn.LinearCrossEntropyOptions``).

Ember computes :func:`ember.nn.functional.linear_cross_entropy` by its reference definition
(``cross_entropy(linear(input, weight), target)``) whatever the options say: the result is the
same, only torch's memory-saving batch chunking is not reproduced. The options are validated
and kept, so programs written for the chunked path run unchanged.

>>> import ember
>>> ember.nn.LinearCrossEntropyOptions(batch_chunk_size=1024).batch_chunk_size
1024
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["LinearCrossEntropyOptions"]

_ACC_POLICIES = ("accurate", "balanced", "compact", "auto")


@dataclasses.dataclass
class LinearCrossEntropyOptions:
    """Chunking strategy of ``linear_cross_entropy`` (accepted and validated; see the module
    note)."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: Any = None

    def __post_init__(self) -> None:
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.batch_chunk_size is not None and (not isinstance(self.batch_chunk_size, int)
                                                  or self.batch_chunk_size <= 0):
            raise ValueError(f"batch_chunk_size must be a positive int or None, got {self.batch_chunk_size!r}")
