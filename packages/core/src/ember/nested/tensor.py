"""The nested tensor class and its two representations.

A :class:`NestedTensor` is an ``ember.Tensor`` subclass (``isinstance(nt, ember.Tensor)`` holds)
whose own storage is an empty ``meta`` tensor: the data lives in ordinary ember tensors held as
attributes, and every operation reaches ``__torch_function__`` (``ember.nested.ops``), which
computes it with ordinary ember ops on those tensors. Autograd therefore runs through the inner
tensors: gradients reach the values buffer (jagged) or the component tensors (strided).

- ``layout=ember.jagged``: ``_nt_values`` holds the components packed along their ragged
  dimension, kept *first* (``(sum_i L_i, *other dims in order)``), ``_nt_offsets`` (int64,
  ``B + 1``) where each component starts, ``_nt_lengths`` (``B``) when the components do not
  fill the buffer (a "non-contiguous" nested tensor with holes, from ``narrow`` or
  ``nested_tensor_from_jagged(..., lengths=)``), and ``_nt_ragged``, the nested tensor's ragged
  dimension (>= 1). Component ``i`` is ``values.narrow(0, start_i, len_i).movedim(0, ragged - 1)``,
  a view. Keeping the ragged dimension first makes every transpose a relabelling of the same
  buffer, and elementwise ops / ops over trailing dimensions one op on the whole buffer.
- ``layout=ember.strided``: ``_nt_comps``, the list of component tensors (any dims may differ).
  Operations run per component.
"""

from __future__ import annotations

import itertools
from typing import Any

import ember
from ember._C import Tensor

_RAGGED_IDS = itertools.count(1)


class RaggedDim:
    """The size of a nested tensor's ragged dimension in its ``shape`` (printed ``j1``, ...):
    not an int, so code that needs a fixed size there fails instead of computing with one."""

    __slots__ = ("id",)

    def __init__(self, id: int) -> None:
        self.id = id

    def __repr__(self) -> str:
        return f"j{self.id}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RaggedDim) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("RaggedDim", self.id))


def _is_nested(x: Any) -> bool:
    return isinstance(x, NestedTensor)


class NestedTensor(Tensor):
    """A batch of tensors of different sizes in one dimension (jagged layout) or several
    (strided layout). Build one with ``ember.nested.nested_tensor`` and friends.

    >>> import ember
    >>> nt = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(4, 3)], layout=ember.jagged)
    >>> nt.is_nested, nt.dim(), nt.size(2), [t.shape[0] for t in nt.unbind()]
    (True, 3, 3, [2, 4])
    """

    # ---- Python-level attributes that differ from a dense tensor's --------------------------
    @property
    def is_nested(self) -> bool:
        return True

    @property
    def layout(self) -> Any:
        return self._nt_layout

    @property
    def is_sparse(self) -> bool:
        return False

    @property
    def dtype(self) -> Any:
        return self._nt_dtype

    @property
    def device(self) -> Any:
        return self._nt_device

    @property
    def is_cuda(self) -> bool:
        return self._nt_device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._nt_device.type == "cpu"

    @property
    def ndim(self) -> int:
        return self._nt_ndim

    @property
    def shape(self) -> ember.Size:
        return _shape(self)

    @property
    def requires_grad(self) -> bool:
        return any(t.requires_grad for t in _leaves(self))

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    @property
    def is_leaf(self) -> bool:
        return all(t.is_leaf for t in _leaves(self))

    @property
    def grad_fn(self) -> Any:
        if self._nt_layout is ember.jagged:
            return self._nt_values.grad_fn
        fns = [t.grad_fn for t in self._nt_comps if t.grad_fn is not None]
        return fns[0] if fns else None

    @property
    def grad(self) -> Any:
        """The gradient as a nested tensor of this one's structure (None before backward)."""
        if self._nt_layout is ember.jagged:
            g = self._nt_values.grad
            return None if g is None else _with_values(self, g)
        grads = [t.grad for t in self._nt_comps]
        if all(g is None for g in grads):
            return None
        return _strided([g if g is not None else ember.zeros_like(t)
                         for g, t in zip(grads, self._nt_comps)], self)

    @grad.setter
    def grad(self, value: Any) -> None:
        if value is None:
            for t in _leaves(self):
                t.grad = None
            return
        if not _is_nested(value):
            raise TypeError("assigned grad of a nested tensor must be a nested tensor")
        if self._nt_layout is ember.jagged and value._nt_layout is ember.jagged:
            self._nt_values.grad = value._nt_values
        else:
            for t, g in zip(_components(self), _components(value)):
                t.grad = g

    # ---- nested-only methods -----------------------------------------------------------------
    def values(self) -> Tensor:
        """The jagged layout's packed buffer, the ragged dimension at ``ragged_idx - 1``
        (for ``(B, j, D)``: ``(sum_i L_i, D)``), a view that autograd follows.

        >>> import ember
        >>> nt = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(4, 3)],
        ...                                 layout=ember.jagged)
        >>> nt.values().shape
        ember.Size([6, 3])
        """
        if self._nt_layout is ember.jagged:
            return self._nt_values.movedim(0, self._nt_ragged - 1)
        # a strided nested tensor's buffer: every component flattened, one after the other
        if not self._nt_comps:
            return ember.empty(0, dtype=self._nt_dtype, device=self._nt_device)
        return ember.cat([t.reshape(-1) for t in self._nt_comps])

    def offsets(self) -> Tensor:
        """Where each component starts in ``values()``'s ragged dimension, and where the last
        one ends (int64, ``B + 1``); jagged layout only."""
        _need_jagged(self, "offsets")
        return self._nt_offsets

    def lengths(self) -> Tensor | None:
        """Each component's length when the components do not fill ``values()`` (a nested
        tensor with holes), else None; jagged layout only."""
        _need_jagged(self, "lengths")
        return self._nt_lengths

    @property
    def _ragged_idx(self) -> int:
        _need_jagged(self, "_ragged_idx")
        return self._nt_ragged

    def to_padded_tensor(self, padding: float, output_size: Any = None) -> Tensor:
        """Same as ``ember.nested.to_padded_tensor(self, padding, output_size)``."""
        from ember.nested.creation import to_padded_tensor

        return to_padded_tensor(self, padding, output_size)

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        if self._nt_layout is ember.jagged:
            size = "(" + ", ".join(str(s) for s in _shape(self)) + ")"
            grad = ""
            if self.grad_fn is not None:
                grad = f", grad_fn=<{type(self.grad_fn).__name__}>"
            elif self.requires_grad:
                grad = ", requires_grad=True"
            return (f"NestedTensor(size={size}, offsets={self._nt_offsets!r}, "
                    f"contiguous={self._nt_lengths is None}{grad})")
        if not self._nt_comps:
            return "nested_tensor([\n\n])"
        parts = ",\n".join("  " + repr(t).replace("\n", "\n  ") for t in self._nt_comps)
        return f"nested_tensor([\n{parts}\n])"

    __str__ = __repr__

    # ---- pickling and copying -----------------------------------------------------------------
    def __reduce_ex__(self, protocol: int) -> Any:
        """``pickle`` / ``copy.copy``: a jagged nested tensor is rebuilt from its values (by
        value, as a leaf keeping ``requires_grad``, as in PyTorch), offsets and lengths; a
        strided one from its components."""
        if self._nt_layout is ember.strided:
            return (_rebuild_strided, _saved_strided(self, "pickle"))
        return (_rebuild_jagged, _saved_fields(self, "pickle"))

    def __deepcopy__(self, memo: dict) -> NestedTensor:
        """``copy.deepcopy``: graph leaves only; values, offsets, lengths and ``grad`` copied."""
        return _deepcopy(self, memo)

    @classmethod
    def __torch_function__(cls, func: Any, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        from ember.nested import ops

        return ops.dispatch(func, args, kwargs or {})


# ---- making nested tensors ---------------------------------------------------------------------
def _new(layout: Any, dtype: Any, device: Any, ndim: int) -> NestedTensor:
    base = ember.empty(0, dtype=dtype, device="meta")
    nt = Tensor._make_subclass(NestedTensor, base)
    nt._nt_layout = layout
    nt._nt_dtype = dtype
    nt._nt_device = device
    nt._nt_ndim = ndim
    return nt


def _int64(values: list[int], device: Any) -> Tensor:
    return ember.tensor(values, dtype=ember.int64, device=device)


def _jagged(values: Tensor, offsets: Tensor, lengths: Tensor | None, ragged: int,
            rid: int | None = None, starts: list[int] | None = None,
            lens: list[int] | None = None) -> NestedTensor:
    """A jagged nested tensor over ``values`` (ragged dimension first)."""
    if offsets.device != values.device:
        offsets = offsets.to(values.device)
    if lengths is not None and lengths.device != values.device:
        lengths = lengths.to(values.device)
    nt = _new(ember.jagged, values.dtype, values.device, values.dim() + 1)
    nt._nt_values = values
    nt._nt_offsets = offsets
    nt._nt_lengths = lengths
    nt._nt_ragged = ragged
    nt._nt_rid = rid if rid is not None else next(_RAGGED_IDS)
    if starts is None:
        off = [int(v) for v in offsets.tolist()]
        starts = off[:-1]
        lens = ([int(v) for v in lengths.tolist()] if lengths is not None
                else [b - a for a, b in zip(off[:-1], off[1:])])
    nt._nt_starts = starts
    nt._nt_lens = lens
    return nt


def _with_values(nt: NestedTensor, values: Tensor, ragged: int | None = None) -> NestedTensor:
    """A jagged nested tensor of nt's structure (offsets, lengths, ragged id) over new values."""
    return _jagged(values, nt._nt_offsets, nt._nt_lengths,
                   nt._nt_ragged if ragged is None else ragged, nt._nt_rid, nt._nt_starts,
                   nt._nt_lens)


def _strided(comps: list[Tensor], like: NestedTensor | None = None, dtype: Any = None,
             device: Any = None) -> NestedTensor:
    if comps:
        dtype, device = comps[0].dtype, comps[0].device
        ndim = comps[0].dim() + 1
        for i, t in enumerate(comps):
            if t.dim() != ndim - 1:
                raise RuntimeError(
                    "All Tensors given to nested_tensor must have the same dimension. Found "
                    f"dimension {t.dim()} for Tensor at index {i} and dimension {ndim - 1} for "
                    "Tensor at index 0.")
    else:
        dtype = dtype if dtype is not None else (like._nt_dtype if like is not None
                                                 else ember.get_default_dtype())
        device = device if device is not None else (like._nt_device if like is not None
                                                    else ember.device("cpu"))
        ndim = like._nt_ndim if like is not None else 1
    nt = _new(ember.strided, dtype, device, ndim)
    nt._nt_comps = list(comps)
    return nt


def _ragged_dim_of(shapes: list[tuple[int, ...]], default: int = 1) -> int:
    """The nested dimension (>= 1) in which component shapes differ."""
    differ = [d for d in range(len(shapes[0])) if len({s[d] for s in shapes}) > 1]
    if len(differ) > 1:
        raise RuntimeError(
            "jagged layout nested tensors support one ragged dimension only, but the "
            f"components differ in dimensions {[d + 1 for d in differ]} (shapes "
            f"{[list(s) for s in shapes]}); use layout=ember.strided")
    return differ[0] + 1 if differ else default


def _jagged_from_components(comps: list[Tensor], ragged: int | None = None,
                            rid: int | None = None) -> NestedTensor:
    """A contiguous jagged nested tensor holding copies of comps (autograd reaches them)."""
    if not comps:
        raise RuntimeError("Cannot construct a nested tensor from an empty tensor list")
    ndim = comps[0].dim()
    if ndim == 0:
        raise RuntimeError("Cannot construct a nested tensor from a list of zero-dim tensors")
    for t in comps:
        if t.dim() != ndim:
            raise RuntimeError("When constructing a nested tensor, all tensors in list must "
                               "have the same dim")
    shapes = [tuple(t.shape) for t in comps]
    if ragged is None or len({s for s in shapes}) > 1:
        ragged = _ragged_dim_of(shapes, ragged if ragged is not None else 1)
    packed = [t.movedim(ragged - 1, 0) for t in comps]
    lens = [s[ragged - 1] for s in shapes]
    off = [0]
    for n in lens:
        off.append(off[-1] + n)
    values = ember.cat(packed, 0)
    return _jagged(values, _int64(off, values.device), None, ragged, rid, off[:-1], lens)


def _like_from_components(nt: NestedTensor, comps: list[Tensor],
                          ragged: int | None = None) -> NestedTensor:
    """A nested tensor of nt's layout from new components (the results of a per-component
    op): jagged keeps nt's ragged id when the ragged lengths did not change."""
    if nt._nt_layout is ember.strided:
        return _strided(comps, nt)
    r = nt._nt_ragged if ragged is None else ragged
    out = _jagged_from_components(comps, r)
    if out._nt_lens == nt._nt_lens:
        out._nt_rid = nt._nt_rid
    return out


# ---- reading the structure ---------------------------------------------------------------------
def _components(nt: NestedTensor) -> list[Tensor]:
    """The components (views of the values for jagged)."""
    if nt._nt_layout is ember.strided:
        return list(nt._nt_comps)
    v, r = nt._nt_values, nt._nt_ragged
    return [v.narrow(0, s, n).movedim(0, r - 1) for s, n in zip(nt._nt_starts, nt._nt_lens)]


def _leaves(nt: NestedTensor) -> list[Tensor]:
    return [nt._nt_values] if nt._nt_layout is ember.jagged else list(nt._nt_comps)


def _batch(nt: NestedTensor) -> int:
    return len(nt._nt_lens) if nt._nt_layout is ember.jagged else len(nt._nt_comps)


def _need_jagged(nt: NestedTensor, what: str) -> None:
    if nt._nt_layout is not ember.jagged:
        raise RuntimeError(f"NestedTensor.{what}() is supported for the jagged layout only "
                           f"(this nested tensor has layout={nt._nt_layout})")


def _norm_dim(nt: NestedTensor, dim: int, ndim: int | None = None) -> int:
    n = nt._nt_ndim if ndim is None else ndim
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim + n if dim < 0 else dim


def _vdim(nt: NestedTensor, d: int) -> int:
    """The values dimension of nested dimension d (jagged, d neither batch nor ragged)."""
    return d if d < nt._nt_ragged else d - 1


def _irregular(nt: NestedTensor, d: int) -> bool:
    if d == 0:
        return False
    if nt._nt_layout is ember.jagged:
        return d == nt._nt_ragged
    return len({t.shape[d - 1] for t in nt._nt_comps}) > 1


def _size(nt: NestedTensor, d: int) -> Any:
    d = _norm_dim(nt, d)
    if d == 0:
        return _batch(nt)
    if _irregular(nt, d):
        if nt._nt_layout is ember.jagged:  # as in shape: the ragged size j<n>
            return RaggedDim(nt._nt_rid)
        raise RuntimeError(f"Given dimension {d} is irregular and does not have a size.")
    if nt._nt_layout is ember.jagged:
        return int(nt._nt_values.shape[_vdim(nt, d)])
    if not nt._nt_comps:
        raise RuntimeError(f"Given dimension {d} of an empty nested tensor has no size.")
    return int(nt._nt_comps[0].shape[d - 1])


def _shape(nt: NestedTensor) -> ember.Size:
    if nt._nt_layout is ember.strided:
        raise RuntimeError(
            "NestedTensor.shape / size(): a strided layout nested tensor has no single shape "
            "(use size(dim) for a regular dimension, or layout=ember.jagged, whose shape shows "
            "the ragged dimension as j<n>)")
    dims: list[Any] = [_batch(nt)]
    for d in range(1, nt._nt_ndim):
        dims.append(RaggedDim(nt._nt_rid) if d == nt._nt_ragged
                    else int(nt._nt_values.shape[_vdim(nt, d)]))
    # built directly: Size() itself takes ints only, and the ragged entry is a RaggedDim
    return tuple.__new__(ember.Size, dims)


# ---- saving, pickling, copying -----------------------------------------------------------------
def _saved_fields(nt: NestedTensor, what: str) -> tuple[Tensor, Tensor, Tensor | None, int, bool]:
    """What a saved / pickled jagged nested tensor holds: (values, offsets, lengths, ragged
    dimension, requires_grad); ember.save stores the values themselves (so that two nested
    tensors over one buffer load as views of one buffer), pickle a detached copy."""
    values = nt._nt_values if what == "ember.save" else nt._nt_values.detach()
    return (values, nt._nt_offsets, nt._nt_lengths, nt._nt_ragged, nt.requires_grad)


def _saved_strided(nt: NestedTensor, what: str) -> tuple[list[Tensor], Any, int]:
    """What a saved / pickled strided nested tensor holds: (components, dtype, dims)."""
    comps = [c if what == "ember.save" else c.detach().requires_grad_(c.requires_grad)
             for c in nt._nt_comps]
    return (comps, nt._nt_dtype, nt._nt_ndim)


def _rebuild_strided(comps: list[Tensor], dtype: Any, ndim: int) -> NestedTensor:
    """The strided nested tensor _saved_strided described."""
    if (not isinstance(comps, list) or not all(isinstance(c, Tensor) for c in comps)
            or not isinstance(dtype, ember.dtype) or isinstance(ndim, bool)
            or not isinstance(ndim, int) or ndim < 1
            or any(c.dim() != ndim - 1 or c.dtype != dtype for c in comps)):
        raise RuntimeError("corrupt nested tensor: expected a list of components of one dtype "
                           "and one number of dims")
    nt = _strided(comps, dtype=dtype)
    nt._nt_ndim = ndim
    return nt


def _rebuild_jagged(values: Tensor, offsets: Tensor, lengths: Tensor | None, ragged: int,
                    requires_grad: bool) -> NestedTensor:
    """The jagged nested tensor _saved_fields described (a leaf)."""
    if (not isinstance(values, Tensor) or not isinstance(offsets, Tensor)
            or (lengths is not None and not isinstance(lengths, Tensor))
            or isinstance(ragged, bool) or not isinstance(ragged, int)
            or not 1 <= ragged <= values.dim() or offsets.dim() != 1):
        raise RuntimeError("corrupt nested tensor: expected values, 1-D offsets, lengths or "
                           "None, and a ragged dimension within the values' dims")
    off = [int(v) for v in offsets.tolist()]
    lens = ([int(v) for v in lengths.tolist()] if lengths is not None
            else [b - a for a, b in zip(off[:-1], off[1:])])
    n = int(values.shape[0])
    if len(lens) != len(off) - 1 or any(a < 0 or k < 0 or a + k > n
                                        for a, k in zip(off[:-1], lens)):
        raise RuntimeError(f"corrupt nested tensor: offsets {off} / lengths {lens} reach outside "
                           f"the {n} entries of the values' ragged dimension")
    if values.requires_grad != bool(requires_grad):
        values = values.detach().requires_grad_(bool(requires_grad))
    return _jagged(values, offsets, lengths, ragged, starts=off[:-1], lens=lens)


def _deepcopy(nt: NestedTensor, memo: dict) -> NestedTensor:
    if id(nt) in memo:
        return memo[id(nt)]
    if not nt.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support "
                           "the deepcopy protocol at the moment")
    if nt._nt_layout is ember.strided:  # (PyTorch cannot deepcopy these; ember can)
        comps = []
        for c in nt._nt_comps:
            with ember.no_grad():
                copy = c.clone()
            copy.requires_grad_(c.requires_grad)
            if c.grad is not None:
                copy.grad = c.grad.clone()
            comps.append(copy)
        memo[id(nt)] = out = _strided(comps, nt)
        return out
    v = nt._nt_values
    with ember.no_grad():
        values = v.clone()
    values.requires_grad_(v.requires_grad)
    lengths = None if nt._nt_lengths is None else nt._nt_lengths.clone()
    # as in PyTorch, the copy keeps the ragged size (j<n>) of the original
    out = _jagged(values, nt._nt_offsets.clone(), lengths, nt._nt_ragged, nt._nt_rid,
                  starts=list(nt._nt_starts), lens=list(nt._nt_lens))
    if v.grad is not None:
        values.grad = v.grad.clone()
    memo[id(nt)] = out
    return out
