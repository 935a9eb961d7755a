"""PairwiseDistance and CosineSimilarity.

>>> import ember
>>> ember.nn.CosineSimilarity()(ember.ones(2, 3), ember.ones(2, 3)).shape
ember.Size([2])
"""

from __future__ import annotations

from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = ["PairwiseDistance", "CosineSimilarity"]


class PairwiseDistance(Module):
    """``||x1 - x2 + eps||_p`` over the last dim.

    >>> import ember
    >>> ember.nn.PairwiseDistance(p=1.0).norm
    1.0
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    """Cosine similarity along dim.

    >>> import ember
    >>> ember.nn.CosineSimilarity(dim=0).dim
    0
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
