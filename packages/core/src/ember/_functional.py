"""Python front-ends for ops whose PyTorch call style the op schema cannot express
(variadic tensors, a dims argument that is an int or a pair of lists)."""

from __future__ import annotations

from typing import Sequence

from ember import _C
from ember._C import Tensor


def einsum(equation: str, *operands: Tensor | Sequence[Tensor]) -> Tensor:
    """Einstein summation, as ``torch.einsum``: operands as arguments or as one list.

    >>> import ember
    >>> ember.einsum("ij,jk->ik", ember.ones(2, 3), ember.ones(3, 4)).shape
    ember.Size([2, 4])
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _C.einsum(equation, list(operands))


def tensordot(a: Tensor, b: Tensor, dims: int | Sequence = 2, out: Tensor | None = None) -> Tensor:
    """Contracts ``dims`` trailing dims of ``a`` with leading dims of ``b`` (or the listed pairs).

    >>> import ember
    >>> ember.tensordot(ember.ones(2, 3, 4), ember.ones(3, 4, 5), dims=([1, 2], [0, 1])).shape
    ember.Size([2, 5])
    """
    if isinstance(dims, int):
        return _C.tensordot(a, b, dims, out=out)
    da, db = dims
    if isinstance(da, int):
        da, db = [da], [db]
    return _C.tensordot(a, b, list(da), list(db), out=out)


def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
):
    """The unique elements (or slices along ``dim``), optionally with inverse indices and counts.

    >>> import ember
    >>> ember.unique(ember.tensor([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    out, inverse, counts = _C._unique(input, sorted, return_inverse, return_counts, dim)
    if not (return_inverse or return_counts):
        return out
    extra = ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return (out, *extra)


Tensor.unique = unique
