"""``torch.nested``: batches of tensors of different sizes (nested tensors).

>>> import ember
>>> nt = ember.nested.nested_tensor([ember.ones(2, 4), ember.ones(3, 4)], layout=ember.jagged)
>>> nt.shape
ember.Size([2, j1, 4])
>>> out = nt * 2 + 1          # one op on the packed values
>>> [t.shape[0] for t in out.softmax(-1).unbind()]
[2, 3]

Two layouts: ``ember.jagged`` (one ragged dimension, the components packed in one buffer:
``values()``, ``offsets()``, ``lengths()``) and ``ember.strided`` (the default of the
constructors, as in PyTorch: any dimensions may differ). A nested tensor is an
``ember.Tensor`` (``is_nested`` True); operations that do not make sense for it, or that are not
implemented, raise ``NotImplementedError`` naming the op. See ``ember.nested.ops`` for what runs
how, ``ember.nested.tensor`` for the representation (and pickling / saving), and
``ember.nested.modules`` for ``nn.MultiheadAttention`` on nested input.
"""

from __future__ import annotations

from ember.nested.creation import (
    as_nested_tensor,
    masked_select,
    narrow,
    nested_tensor,
    nested_tensor_from_jagged,
    to_padded_tensor,
)
from ember.nested.tensor import NestedTensor, RaggedDim

__all__ = ["to_padded_tensor", "as_nested_tensor", "nested_tensor", "nested_tensor_from_jagged",
           "narrow", "masked_select", "NestedTensor", "RaggedDim"]
