"""``MaskedTensor``: data and a boolean mask of the same shape, carried together.

A MaskedTensor is an ``ember.Tensor`` subclass whose own storage is an empty ``meta`` tensor of
its shape; the data and the mask are ordinary ember tensors held as attributes, and every
operation reaches ``__torch_function__`` (as for ``ember.nested``), which computes it with
ordinary ember ops on them (:mod:`ember.masked._mt_ops`). Autograd therefore runs through the
data tensor: a MaskedTensor's ``grad`` is a MaskedTensor over the data's gradient with the
MaskedTensor's mask, and ``ember.autograd.grad`` / ``backward`` take MaskedTensors.

Rules (PyTorch's): pointwise ops keep the mask, and the MaskedTensor operands of a binary op
must have equal masks (plain tensors and numbers count as unmasked); reductions, ``softmax`` and
``log_softmax`` ignore the masked-out elements (a result is masked out where it saw none);
view and select ops apply to the data and the mask alike; ``where`` picks the mask along with
the data. Strided layout only: sparse data and masks are refused (NotImplementedError).

Where ember differs from PyTorch's prototype:

- ops it lacks or fails on work: ``log_softmax``, ``softmin``, ``norm``, ``var`` / ``std`` with
  ``unbiased`` / ``correction``, ``any``, elementwise ``max`` / ``min``, ``permute``,
  ``squeeze``, ``flip``, ``movedim``, ``unbind`` and iteration, ``split`` with sizes, ``kron``,
  ``cat`` with plain tensors (unmasked), ``zeros_like`` and friends, ``add(alpha=)``, ``1 - mt``,
  item assignment, ``where`` with a plain tensor first and ``Tensor.where``;
- a gradient always has the input's mask: where a view or select op did not read a specified
  element its gradient is 0 (PyTorch masks it out, and then fails to add two such gradients);
- ``as_masked_tensor(x, mask)`` gives ``x`` a plain gradient (0 where masked out), not a
  MaskedTensor; ``grad_fn`` names are those of the data's ops;
- a MaskedTensor condition in ``where`` raises TypeError (PyTorch recurses without end), an
  empty MaskedTensor prints as ``[]`` (PyTorch's repr fails), and the prototype warning comes
  from the public constructors only (PyTorch's from every result).

>>> import ember
>>> mt = ember.masked.masked_tensor(ember.tensor([1.0, 2.0, 3.0]),
...                                 ember.tensor([True, False, True]))
>>> mt
MaskedTensor(
  [  1.0000,       --,   3.0000]
)
>>> mt.sum().item(), (mt * 2).to_tensor(0).tolist()
(4.0, [2.0, 0.0, 6.0])
"""

from __future__ import annotations

import warnings
from typing import Any

import ember
from ember._C import Tensor

__all__ = ["MaskedTensor", "as_masked_tensor", "is_masked_tensor", "masked_tensor"]

# The data dtypes PyTorch's MaskedTensor takes.
_DTYPES = (ember.float16, ember.float32, ember.float64, ember.bool, ember.int8, ember.int16,
           ember.int32, ember.int64)


def _prototype_warning() -> None:
    warnings.warn("The PyTorch API of MaskedTensors is in prototype stage and will change in the "
                  "near future. Please open a Github issue for features requests and see our "
                  "documentation on the torch.masked module for further information about the "
                  "project.", UserWarning, stacklevel=3)


def _validate(data: Any, mask: Any) -> None:
    """PyTorch's checks, in its order and with its exception types."""
    if not ember.is_tensor(data):  # (ember's sparse tensors are tensors of another class)
        raise TypeError("data must be a Tensor")
    if not ember.is_tensor(mask):
        raise TypeError("mask must be a Tensor")
    if is_masked_tensor(data) or is_masked_tensor(mask):
        raise TypeError("data and mask must be plain tensors, not MaskedTensors")
    if data.layout != mask.layout:
        raise TypeError("data and mask must have the same layout.")
    if data.layout is not ember.strided:
        raise NotImplementedError(
            f"MaskedTensor: layout {data.layout} is not supported in ember (strided only); "
            "convert data and mask with .to_dense() first")
    if data.shape != mask.shape:
        raise ValueError("data.size() must equal mask.size()")
    if mask.dtype is not ember.bool:
        raise TypeError("mask must have dtype bool.")
    if data.dtype not in _DTYPES:
        raise TypeError(f"{data.dtype} is not supported in MaskedTensor.")
    if data.device != mask.device:
        raise RuntimeError(f"MaskedTensor: data and mask must be on the same device, got "
                           f"{data.device} and {mask.device}")


def is_masked_tensor(obj: Any) -> bool:
    """Whether obj is a :class:`MaskedTensor`.

    >>> import ember
    >>> ember.masked.is_masked_tensor(ember.ones(2))
    False
    """
    return isinstance(obj, MaskedTensor)


def _make(data: Tensor, mask: Tensor, cls: type | None = None) -> MaskedTensor:
    """A MaskedTensor over data and mask as they are (no checks, no copies, no warning): what
    the ops build their results with. data keeps its autograd history."""
    base = ember.empty(tuple(data.shape), dtype=data.dtype, device="meta")
    mt = Tensor._make_subclass(cls or MaskedTensor, base)
    mt._masked_data = data
    mt._masked_mask = mask
    return mt


class MaskedTensor(Tensor):
    """A tensor with a boolean mask saying which of its elements are specified (True) and
    which are not (PyTorch's prototype ``torch.masked.MaskedTensor``). ``MaskedTensor(data,
    mask, requires_grad=False)`` copies data and mask; :func:`masked_tensor` is the same and
    :func:`as_masked_tensor` keeps data's autograd history.

    >>> import ember
    >>> mt = ember.masked.MaskedTensor(ember.tensor([[1.0, 5.0], [3.0, 4.0]]),
    ...                                ember.tensor([[True, False], [True, True]]))
    >>> mt.amax(1).to_tensor(0).tolist(), mt.softmax(1).get_data()[0].tolist()
    ([1.0, 4.0], [1.0, 0.0])
    """

    _masked_data: Tensor
    _masked_mask: Tensor

    @staticmethod
    def __new__(cls, data: Tensor, mask: Tensor, requires_grad: bool = False) -> MaskedTensor:
        _validate(data, mask)
        _prototype_warning()
        if data.requires_grad:
            warnings.warn("It is not recommended to create a MaskedTensor with a tensor that "
                          "requires_grad. To avoid this, you can use data.detach().clone()",
                          UserWarning, stacklevel=2)
        with ember.no_grad():  # PyTorch's MaskedTensor shares no memory with data or mask
            d, m = data.detach().clone(), mask.detach().clone()
        if requires_grad:
            if not (d.dtype.is_floating_point or d.dtype.is_complex):
                raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                                   "gradients")
            d.requires_grad_(True)
        return _make(d, m, cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # all done in __new__
        pass

    @classmethod
    def _from_values(cls, data: Tensor, mask: Tensor) -> MaskedTensor:
        """A MaskedTensor over data that autograd follows back to data (as
        :func:`as_masked_tensor`)."""
        return as_masked_tensor(data, mask)

    # ---- the data and the mask -----------------------------------------------------------
    def get_data(self) -> Tensor:
        """The data, masked-out elements included (autograd follows it)."""
        return self._masked_data

    def get_mask(self) -> Tensor:
        """The boolean mask (True: specified)."""
        return self._masked_mask

    def to_tensor(self, value: Any) -> Tensor:
        """A plain tensor: the data where the mask is True, ``value`` elsewhere (autograd
        follows the data)."""
        d = self._masked_data
        fill = ember.full((), value, dtype=d.dtype, device=d.device)
        return ember.where(self._masked_mask, d, fill)

    def is_sparse_coo(self) -> bool:
        return False

    def is_sparse_csr(self) -> bool:
        return False

    # ---- attributes read from the data ----------------------------------------------------
    @property
    def is_sparse(self) -> bool:
        return False

    @property
    def is_nested(self) -> bool:
        return False

    @property
    def layout(self) -> Any:
        return self._masked_data.layout

    @property
    def dtype(self) -> Any:
        return self._masked_data.dtype

    @property
    def device(self) -> Any:
        return self._masked_data.device

    @property
    def is_cuda(self) -> bool:
        return self._masked_data.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._masked_data.device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        return False

    @property
    def shape(self) -> ember.Size:
        return self._masked_data.shape

    @property
    def ndim(self) -> int:
        return self._masked_data.ndim

    @property
    def requires_grad(self) -> bool:
        return self._masked_data.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._masked_data.requires_grad_(value)

    @property
    def is_leaf(self) -> bool:
        return self._masked_data.is_leaf

    @property
    def grad_fn(self) -> Any:
        return self._masked_data.grad_fn

    @property
    def grad(self) -> MaskedTensor | None:
        """The gradient: a MaskedTensor with this one's mask (None before backward)."""
        g = self._masked_data.grad
        return None if g is None else _make(g, self._masked_mask)

    @grad.setter
    def grad(self, value: Any) -> None:
        if value is None:
            self._masked_data.grad = None
            return
        self._masked_data.grad = value._masked_data if is_masked_tensor(value) else value

    @property
    def data(self) -> MaskedTensor:
        return _make(self._masked_data.detach(), self._masked_mask)

    # ---- printing, copying ------------------------------------------------------------------
    def __repr__(self, *, tensor_contents: Any = None) -> str:
        from ember.masked import _mt_ops

        return _mt_ops.format_masked(self)

    __str__ = __repr__

    def __reduce_ex__(self, protocol: int) -> Any:
        """Pickles as its (detached) data, its mask and requires_grad."""
        return (_rebuild, (self._masked_data.detach(), self._masked_mask,
                           bool(self._masked_data.requires_grad)))

    def __deepcopy__(self, memo: dict) -> MaskedTensor:
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment")
        with ember.no_grad():
            d, m = self._masked_data.clone(), self._masked_mask.clone()
        d.requires_grad_(self._masked_data.requires_grad)
        out = memo[id(self)] = _make(d, m)
        return out

    @classmethod
    def __torch_function__(cls, func: Any, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        from ember.masked import _mt_ops

        return _mt_ops.dispatch(func, args, kwargs or {})


def _rebuild(data: Tensor, mask: Tensor, requires_grad: bool) -> MaskedTensor:
    _validate(data, mask)
    if requires_grad:
        data = data.detach().requires_grad_(True)
    return _make(data, mask)


def masked_tensor(data: Tensor, mask: Tensor, requires_grad: bool = False) -> MaskedTensor:
    """A MaskedTensor holding copies of data and mask (a leaf; ``requires_grad`` as given),
    like ``ember.tensor``.

    >>> import ember
    >>> mt = ember.masked.masked_tensor(ember.tensor([1.0, 2.0]), ember.tensor([True, False]),
    ...                                 requires_grad=True)
    >>> mt.sum().backward()
    >>> mt.grad.get_mask().tolist(), mt.grad.get_data()[0].item()
    ([True, False], 1.0)
    """
    return MaskedTensor(data, mask, requires_grad)


def as_masked_tensor(data: Tensor, mask: Tensor) -> MaskedTensor:
    """A MaskedTensor over data and mask that autograd follows back to data (``requires_grad``
    as data's), like ``ember.as_tensor``. As in PyTorch, it does not share data's memory.

    >>> import ember
    >>> x = ember.tensor([1.0, 2.0], requires_grad=True)
    >>> (ember.masked.as_masked_tensor(x, ember.tensor([True, False])) * 3).sum().backward()
    >>> x.grad.tolist()
    [3.0, 0.0]
    """
    _validate(data, mask)
    _prototype_warning()
    return _make(data.clone(), mask.detach().clone())
