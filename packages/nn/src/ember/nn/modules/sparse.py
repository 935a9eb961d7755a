"""Embedding and EmbeddingBag lookup tables.

>>> import ember
>>> emb = ember.nn.Embedding(10, 3)
>>> emb(ember.tensor([[1, 2], [3, 4]])).shape
ember.Size([2, 2, 3])
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = ["Embedding", "EmbeddingBag"]


def _norm_padding_idx(cls: str, padding_idx: int | None, num: int) -> int | None:
    if padding_idx is None:
        return None
    if not -num <= padding_idx < num:
        raise ValueError(f"{cls}: padding_idx must be within num_embeddings ({num}), got {padding_idx}")
    return padding_idx + num if padding_idx < 0 else padding_idx


class Embedding(Module):
    """A (num_embeddings, embedding_dim) table of rows, N(0, 1) initialized; the padding_idx
    row starts at zero and receives no gradient.

    >>> import ember
    >>> ember.nn.Embedding(10, 3, padding_idx=0)
    Embedding(10, 3, padding_idx=0)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _norm_padding_idx("Embedding", padding_idx, num_embeddings)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(ember.empty(num_embeddings, embedding_dim, dtype=dtype,
                                                device=device), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(
                    f"Embedding: _weight of shape {tuple(_weight.shape)} does not match "
                    f"({num_embeddings}, {embedding_dim})"
                )
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        """N(0, 1) rows; the padding row zero."""
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            with ember.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        if self.sparse:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding whose table is ``embeddings`` (frozen unless freeze=False).

        >>> import ember
        >>> Embedding.from_pretrained(ember.ones(2, 3)).weight.requires_grad
        False
        """
        if embeddings.ndim != 2:
            raise ValueError(
                f"Embedding.from_pretrained: embeddings must be 2-D, got shape "
                f"{tuple(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


class EmbeddingBag(Module):
    """Sums / means / maxes of bags of embedding rows, without materializing the rows.

    >>> import ember
    >>> ember.nn.EmbeddingBag(10, 3, mode="sum")
    EmbeddingBag(10, 3, mode='sum')
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Tensor | None = None,
                 include_last_offset: bool = False, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset
        self.padding_idx = _norm_padding_idx("EmbeddingBag", padding_idx, num_embeddings)
        if _weight is None:
            self.weight = Parameter(ember.empty(num_embeddings, embedding_dim, dtype=dtype,
                                                device=device))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(
                    f"EmbeddingBag: the shape of _weight {tuple(_weight.shape)} does not match "
                    f"num_embeddings and embedding_dim ({num_embeddings}, {embedding_dim})"
                )
            self.weight = Parameter(_weight)

    def reset_parameters(self) -> None:
        """N(0, 1) rows; the padding row zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with ember.no_grad():
                self.weight[self.padding_idx].fill_(0)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """An EmbeddingBag whose table is ``embeddings`` (frozen unless freeze=False).

        >>> import ember
        >>> bag = EmbeddingBag.from_pretrained(ember.ones(2, 3), mode="sum")
        >>> bag(ember.tensor([[0, 1]])).tolist(), bag.weight.requires_grad
        ([[2.0, 2.0, 2.0]], False)
        """
        if embeddings.ndim != 2:
            raise ValueError(
                f"EmbeddingBag.from_pretrained: embeddings must be 2-D, got shape "
                f"{tuple(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm=max_norm, norm_type=norm_type,
                  scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  _weight=embeddings, include_last_offset=include_last_offset,
                  padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
