"""Sparse COO, CSR and CSC tensors: ``ember.sparse_coo_tensor``, ``ember.sparse.mm`` and
friends.

Design. A sparse tensor is a :class:`SparseTensor`, a Python object that is *not* an
``ember.Tensor``: it holds dense ember tensors, and everything it computes is ember ops on them.

- COO (``layout=ember.sparse_coo``): ``_indices`` (int64, ``(sparse_dim, nnz)``) and ``_values``
  (``(nnz, *dense_shape)``), the size, and whether the entries are coalesced (sorted by their
  row-major position, no duplicates).
- CSR (``layout=ember.sparse_csr``, 2-D): ``crow_indices`` (``M + 1``), ``col_indices`` and
  ``values`` (``nnz``).
- CSC (``layout=ember.sparse_csc``, 2-D): ``ccol_indices`` (``N + 1``), ``row_indices`` and
  ``values``, held in the CSR slots: a CSC matrix is the transpose of the CSR matrix of the same
  arrays, so ``t()`` swaps the two layouts without copying, and CSC products run the CSR kernels
  transposed. Other operations go through COO (results in COO unless noted).
- BSR / BSC (``layout=ember.sparse_bsr`` / ``sparse_bsc``, 2-D): the same three arrays over
  blocks: ``values`` is ``(nnz, bh, bw)``, the compressed and plain indices count block rows and
  block columns. BSC is held like CSC, in the CSR slots, as the transpose of the BSR matrix of
  the same indices and the blocks transposed. Products with a dense operand are batched block
  products (``bmm`` of the blocks with the gathered dense rows, summed per block row by
  ``index_add``), differentiable with respect to both operands; the rest goes through COO, each
  block contributing all its ``bh * bw`` elements.

Why not a subclass of ``ember.Tensor``: the C++ ops take any ``ember.Tensor``; a subclass would
have to carry some dense stand-in that every op not written for sparse tensors would then
silently compute on. As a separate class, an op that has no sparse version refuses a sparse
argument (``TypeError`` from the binding, or ``NotImplementedError`` naming the op for the
methods, see ``_unsupported``), so it can never give a wrong number.

Autograd runs through the values: a sparse tensor built from values that require grad gives
``grad_fn``/``requires_grad`` of its values, and every operation here (``to_dense``,
``coalesce``, products, sums, ``*``, ``+``) is made of differentiable ember ops on them. The
products go to three CPU kernels over CSR rows (``ops/sparse.yaml``: ``S @ D``, ``S^T @ D`` and
the sampled products at the nonzeros) that are each other's derivatives, so ``sparse.mm`` gives
the dense operand ``S^T @ G`` and the values ``dot(G[row], D[col])`` at the nonzero pattern, as
PyTorch does. A leaf sparse tensor's ``.grad`` is a sparse tensor with the pattern of its values.

``isinstance(S, ember.Tensor)`` is False, by decision. Making it True would take an
``__instancecheck__`` on pybind11's metaclass, shared by every bound class: measured +70-90 ns
on each non-exact ``isinstance`` against any of them (a Parameter, a number), and every ember code
path that branches on ``isinstance(x, Tensor)`` (some 250) would start taking its dense branch
for sparse tensors. Instead ``ember.is_tensor(S)`` is True (as in PyTorch), and the paths that
meet sparse tensors handle them by name: module buffers and state_dict, ``ember.save/load``,
``testing.assert_close`` (indices exactly, values closely), ``default_collate`` (refuses, as
PyTorch), and the dense functions and Tensor methods below.

Dense functions given sparse operands: ``ember._C`` gives ``add``, ``sub``, ``mul``, ``sum``,
``cat``, ``stack``, ``index_select``, ``mv``, the zero-preserving ops and others (``_SPARSE_OPS``,
``_REFUSED``), and ``Tensor.add/add_/sub/sub_/mul/__iadd__/__isub__`` (``copy_`` refuses, as
PyTorch), a last pybind11 overload that is tried only after every dense overload has failed; a
call with a sparse operand then comes to ``_dispatch``, which runs the sparse version or raises
``NotImplementedError`` naming the op and the layout. Dense calls never reach it (no
measurable cost).

A sparse gradient (``nn.Embedding(sparse=True)``) does not pass through the C++ engine: the
embedding's backward hands it to the running ``backward()``/``autograd.grad()`` call (a frame in
``ember.autograd``), which delivers it once the engine is done: the leaf's tensor hooks see it
(and may replace it; when a dense gradient reaches the leaf in the same pass they see the dense
sum instead, once, as PyTorch sums the parts first), then it is accumulated beside the weight (``_SPARSE_GRADS``; sparse +
sparse stays sparse, with a dense grad it is summed densely) and the post-accumulate hooks run,
or ``autograd.grad`` returns it. A tensor holding a sparse grad moves into a same-named subclass
of its class whose ``grad`` reads and assigns it, so ``weight.grad`` is a sparse COO tensor and
the optimizers see it; ``Tensor.grad = S`` works on any tensor; every other read keeps the C++
getter.

>>> import ember
>>> i = ember.tensor([[0, 1, 1], [2, 0, 2]])
>>> s = ember.sparse_coo_tensor(i, ember.tensor([3.0, 4.0, 5.0]), (2, 3))
>>> (s @ ember.ones(3, 1)).tolist()
[[3.0], [9.0]]
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import ember
from ember import _C
from ember._C import Tensor
from ember._toplevel import layout

__all__ = [
    "SparseTensor", "sparse_coo", "sparse_csr", "sparse_coo_tensor", "sparse_csr_tensor", "mm",
    "addmm", "sampled_addmm", "smm", "hspmm", "sum", "softmax", "log_softmax", "check_sparse_tensor_invariants",
    "FloatTensor", "DoubleTensor", "LongTensor",
]

sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
_COMPRESSED = (sparse_csr, sparse_csc)
_BLOCKED = (sparse_bsr, sparse_bsc)
_ROW_MAJOR = (sparse_csr, sparse_bsr)  # compressed rows: crow_indices / col_indices
_COL_MAJOR = (sparse_csc, sparse_bsc)  # compressed columns: ccol_indices / row_indices


def _is_sparse(x: Any) -> bool:
    return type(x) is SparseTensor


def _as_index(t: Any, what: str, op: str) -> Tensor:
    if not isinstance(t, Tensor):
        t = ember.tensor(t, dtype=ember.int64)
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype is ember.bool:
        raise RuntimeError(f"{op}: {what} must be an integer tensor, got {t.dtype}")
    return t.to(ember.int64)


def _as_values(v: Any, dtype: Any, device: Any) -> Tensor:
    if not isinstance(v, Tensor):
        v = ember.tensor(v, dtype=dtype)
    if dtype is not None and v.dtype is not dtype:
        v = v.to(dtype)
    if device is not None:
        v = v.to(device)
    return v


class SparseTensor:
    """A sparse COO, CSR, CSC, BSR or BSC tensor (see the module docstring for the design).

    Build one with :func:`ember.sparse_coo_tensor`, :func:`ember.sparse_csr_tensor` (``_csc``,
    ``_bsr``, ``_bsc``) or ``Tensor.to_sparse()`` (``to_sparse_csr()``, ``to_sparse_bsr(blocksize)``
    ...).

    >>> import ember
    >>> s = ember.eye(2).to_sparse()
    >>> s.layout, s._nnz(), s.is_sparse
    (ember.sparse_coo, 2, True)
    """

    __slots__ = ("_layout", "_size", "_idx", "_vals", "_crow", "_col", "_coalesced", "__weakref__")
    __array_priority__ = 2000  # NumPy defers too

    def __init__(self, lay: layout, size: tuple[int, ...], values: Tensor, *,
                 indices: Tensor | None = None, crow: Tensor | None = None,
                 col: Tensor | None = None, coalesced: bool = False) -> None:
        self._layout = lay
        self._size = tuple(int(s) for s in size)
        self._vals = values
        self._idx = indices
        self._crow = crow
        self._col = col
        self._coalesced = coalesced

    # ---- attributes -------------------------------------------------------------------------
    @property
    def layout(self) -> layout:
        return self._layout

    @property
    def is_sparse(self) -> bool:
        return self._layout is sparse_coo

    @property
    def is_sparse_csr(self) -> bool:
        return self._layout is sparse_csr

    is_quantized = False
    is_mkldnn = False
    is_meta = False
    is_nested = False

    @property
    def shape(self) -> Any:
        return ember.Size(self._size)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return ember.Size(self._size)
        return self._size[_wrap(dim, len(self._size), "size")]

    @property
    def dtype(self) -> Any:
        return self._vals.dtype

    @property
    def device(self) -> Any:
        return self._vals.device

    @property
    def is_cuda(self) -> bool:
        return self._vals.is_cuda

    @property
    def is_cpu(self) -> bool:
        return self._vals.device.type == "cpu"

    @property
    def ndim(self) -> int:
        return len(self._size)

    def dim(self) -> int:
        return len(self._size)

    def numel(self) -> int:
        return math.prod(self._size)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def sparse_dim(self) -> int:
        return self._idx.shape[0] if self._layout is sparse_coo else 2

    def dense_dim(self) -> int:
        return self._vals.ndim - (3 if self._layout in _BLOCKED else 1)

    def _nnz(self) -> int:
        return self._vals.shape[0]

    def is_coalesced(self) -> bool:
        self._need(sparse_coo, "is_coalesced")
        return self._coalesced

    def _indices(self) -> Tensor:
        self._need(sparse_coo, "_indices")
        return self._idx

    def _values(self) -> Tensor:
        self._need(sparse_coo, "_values")
        return self._vals

    def indices(self) -> Tensor:
        self._need(sparse_coo, "indices")
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._idx

    def values(self) -> Tensor:
        if self._layout is sparse_coo and not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._vals

    def crow_indices(self) -> Tensor:
        self._need(_ROW_MAJOR, "crow_indices")
        return self._crow

    def col_indices(self) -> Tensor:
        self._need(_ROW_MAJOR, "col_indices")
        return self._col

    def ccol_indices(self) -> Tensor:
        self._need(_COL_MAJOR, "ccol_indices")
        return self._crow

    def row_indices(self) -> Tensor:
        self._need(_COL_MAJOR, "row_indices")
        return self._col

    def _need(self, lay: Any, op: str) -> None:
        lays = lay if isinstance(lay, tuple) else (lay,)
        if self._layout not in lays:
            want = " or ".join(str(x) for x in lays)
            raise RuntimeError(f"{op}: expected a tensor of layout {want}, got {self._layout}")

    # ---- autograd ---------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._vals.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> SparseTensor:
        self._vals.requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self) -> Any:
        return self._vals.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._vals.is_leaf

    @property
    def grad(self) -> SparseTensor | None:
        g = self._vals.grad
        return None if g is None else self._with_values(g)

    @grad.setter
    def grad(self, g: Any) -> None:
        if g is None:
            self._vals.grad = None
            return
        raise RuntimeError("sparse: assigning .grad of a sparse tensor is not supported")

    @property
    def data(self) -> SparseTensor:
        return self.detach()

    def detach(self) -> SparseTensor:
        return self._with_values(self._vals.detach())

    def detach_(self) -> SparseTensor:
        self._vals = self._vals.detach()
        return self

    def clone(self) -> SparseTensor:
        return SparseTensor(self._layout, self._size, self._vals.clone(),
                            indices=None if self._idx is None else self._idx.clone(),
                            crow=None if self._crow is None else self._crow.clone(),
                            col=None if self._col is None else self._col.clone(),
                            coalesced=self._coalesced)

    def _with_values(self, values: Tensor, coalesced: bool | None = None) -> SparseTensor:
        return SparseTensor(self._layout, self._size, values, indices=self._idx, crow=self._crow,
                            col=self._col,
                            coalesced=self._coalesced if coalesced is None else coalesced)

    def zero_(self) -> SparseTensor:
        """Removes every entry (nnz becomes 0), as PyTorch's ``zero_`` of a sparse tensor."""
        self._need(sparse_coo, "zero_")
        self._idx = self._idx[:, :0].clone()
        self._vals = self._vals[:0].detach().clone()
        self._coalesced = True
        return self

    # ---- conversions ------------------------------------------------------------------------
    def to_dense(self, dtype: Any = None, *, masked_grad: bool = True) -> Tensor:
        """The dense tensor (duplicates summed); differentiable with respect to the values."""
        del masked_grad
        v = self._vals if dtype is None else self._vals.to(dtype)
        if self._layout in _BLOCKED:
            return _blocked_to_dense(self, v)
        if self._layout is sparse_csc:
            c = self.to_sparse_coo()
            return _coo_to_dense(c._idx, c._vals if dtype is None else c._vals.to(dtype),
                                 self._size)
        if self._layout is sparse_csr:
            return _coo_to_dense(self.to_sparse_coo()._idx, v, self._size)
        return _coo_to_dense(self._idx, v, self._size)

    def coalesce(self) -> SparseTensor:
        """Duplicates summed and entries sorted by position (self when already coalesced)."""
        self._need(sparse_coo, "coalesce")
        if self._coalesced:
            return self
        idx, vals = _coalesce(self._idx, self._vals, self._size[: self._idx.shape[0]])
        return SparseTensor(sparse_coo, self._size, vals, indices=idx, coalesced=True)

    def to_sparse(self, *args: Any, layout: Any = None, **kwargs: Any) -> SparseTensor:
        if args and isinstance(args[0], int) and args[0] != self.sparse_dim():
            raise RuntimeError("to_sparse: changing sparse_dim of a sparse tensor is not supported")
        if layout is None or layout is sparse_coo:
            return self.to_sparse_coo()
        if layout is sparse_csr:
            return self.to_sparse_csr()
        if layout is sparse_csc:
            return self.to_sparse_csc()
        if layout in _BLOCKED:
            blocksize = kwargs.get("blocksize", args[1] if len(args) > 1 else None)
            if blocksize is None:
                raise RuntimeError(f"to_sparse: layout {layout} needs a blocksize")
            return self.to_sparse_bsr(blocksize) if layout is sparse_bsr else \
                self.to_sparse_bsc(blocksize)
        raise RuntimeError(f"to_sparse: unsupported layout {layout}")

    def to_sparse_bsr(self, blocksize: Any, dense_dim: int | None = None) -> SparseTensor:
        """The block compressed-row form with blocks of ``blocksize`` ``(bh, bw)``: every block
        holding a specified element is kept whole (see :func:`ember.sparse_bsr_tensor`)."""
        return _to_blocked(self, sparse_bsr, blocksize, dense_dim)

    def to_sparse_bsc(self, blocksize: Any, dense_dim: int | None = None) -> SparseTensor:
        """The block compressed-column form with blocks of ``blocksize`` ``(bh, bw)`` (see
        :func:`ember.sparse_bsc_tensor`)."""
        return _to_blocked(self, sparse_bsc, blocksize, dense_dim)

    def to_sparse_coo(self) -> SparseTensor:
        if self._layout is sparse_coo:
            return self
        if self._layout in _BLOCKED:
            return _blocked_to_coo(self)
        if self._layout is sparse_csc:  # the CSR arrays of the transpose, transposed back
            _compressed_counts(self, self._size[1], self._size[0])  # named as CSC arrays
            return self.t().to_sparse_coo().t().coalesce()
        counts = _compressed_counts(self, self._size[0], self._size[1])
        rows = ember.repeat_interleave(ember.arange(self._size[0], device=self.device), counts)
        return SparseTensor(sparse_coo, self._size, self._vals,
                            indices=ember.stack([rows, self._col]), coalesced=_sorted_csr(self))

    def to_sparse_csr(self, dense_dim: int | None = None) -> SparseTensor:
        if self._layout is sparse_csr:
            return self
        if self._layout in (sparse_csc, *_BLOCKED):
            return self.to_sparse_coo().to_sparse_csr(dense_dim)
        if self.ndim != 2 or self.dense_dim() != 0 or dense_dim:
            raise RuntimeError("to_sparse_csr: only 2-D COO tensors without dense dims are "
                               f"supported, got size {self._size} with dense_dim "
                               f"{self.dense_dim()}")
        c = self.coalesce()
        crow = _crow_from_rows(c._idx[0], self._size[0])
        return SparseTensor(sparse_csr, self._size, c._vals, crow=crow, col=c._idx[1].clone())

    def to_sparse_csc(self, dense_dim: int | None = None) -> SparseTensor:
        """The compressed-column form (2-D, no dense dims): ``ccol_indices`` (``N + 1``),
        ``row_indices`` and ``values``, sorted by column, then row.

        >>> import ember
        >>> c = ember.tensor([[0.0, 2.0], [3.0, 4.0]]).to_sparse_csc()
        >>> c.ccol_indices().tolist(), c.row_indices().tolist(), c.values().tolist()
        ([0, 1, 3], [1, 0, 1], [3.0, 2.0, 4.0])
        """
        if self._layout is sparse_csc:
            return self
        if self.ndim != 2 or self.dense_dim() != 0 or dense_dim:
            raise RuntimeError("to_sparse_csc: only 2-D tensors without dense dims are "
                               f"supported, got size {self._size} with dense_dim "
                               f"{self.dense_dim()}")
        return self.to_sparse_coo().t().to_sparse_csr().t()

    def to(self, *args: Any, **kwargs: Any) -> SparseTensor:
        """``to(dtype)``/``to(device)``: indices and values converted or moved together."""
        v = self._vals.to(*args, **kwargs)
        dev = v.device
        return SparseTensor(self._layout, self._size, v,
                            indices=None if self._idx is None else self._idx.to(dev),
                            crow=None if self._crow is None else self._crow.to(dev),
                            col=None if self._col is None else self._col.to(dev),
                            coalesced=self._coalesced)

    def cpu(self) -> SparseTensor:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> SparseTensor:
        return self.to("cuda" if device is None else device)

    def float(self) -> SparseTensor:
        return self.to(ember.float32)

    def double(self) -> SparseTensor:
        return self.to(ember.float64)

    def type_as(self, other: Any) -> SparseTensor:
        return self.to(other.dtype)

    # ---- arithmetic -------------------------------------------------------------------------
    def t(self) -> SparseTensor:
        if self.ndim != 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.ndim}D")
        return self.transpose(0, 1)

    def transpose(self, dim0: int, dim1: int) -> SparseTensor:
        d0, d1 = _wrap(dim0, self.ndim, "transpose"), _wrap(dim1, self.ndim, "transpose")
        if self._layout in _COMPRESSED:  # CSR <-> CSC over the same arrays
            if d0 == d1:
                return self
            other = sparse_csc if self._layout is sparse_csr else sparse_csr
            return SparseTensor(other, self._size[::-1], self._vals, crow=self._crow,
                                col=self._col)
        if self._layout in _BLOCKED:  # BSR <-> BSC over the same indices, blocks transposed
            if d0 == d1:
                return self
            other = sparse_bsc if self._layout is sparse_bsr else sparse_bsr
            return SparseTensor(other, self._size[::-1], self._vals.transpose(-2, -1),
                                crow=self._crow, col=self._col)
        self._need(sparse_coo, "transpose")
        sd = self.sparse_dim()
        if (d0 < sd) != (d1 < sd):
            raise RuntimeError("transpose: swapping a sparse dim with a dense dim is not supported")
        size = list(self._size)
        size[d0], size[d1] = size[d1], size[d0]
        if d0 < sd:
            perm = list(range(sd))
            perm[d0], perm[d1] = perm[d1], perm[d0]
            idx, vals = self._idx[perm], self._vals
        else:
            idx, vals = self._idx, self._vals.transpose(d0 - sd + 1, d1 - sd + 1)
        return SparseTensor(sparse_coo, tuple(size), vals, indices=idx,
                            coalesced=self._coalesced and d0 == d1)

    @property
    def T(self) -> SparseTensor:
        return self.t()

    def sparse_mask(self, mask: SparseTensor) -> SparseTensor:
        """Self's values at the entries of the sparse ``mask`` (zero where self has none), with
        the mask's indices as they are (an uncoalesced COO mask gives an uncoalesced result);
        duplicates of an uncoalesced self are summed first. A compressed self takes a compressed
        mask only, as torch.

        >>> import ember
        >>> w = ember.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
        >>> m = ember.sparse_coo_tensor([[0, 1], [1, 1]], [1.0, 1.0], (2, 2))
        >>> w.sparse_mask(m).to_dense().tolist()
        [[0.0, 2.0], [0.0, 0.0]]
        """
        if not _is_sparse(mask):  # torch finds no sparse_mask kernel for a strided mask
            raise NotImplementedError("sparse_mask: expected mask to be a sparse tensor")
        if self._size != mask._size:
            raise RuntimeError(f"sparse_mask: expected mask of size {self._size}, got {mask._size}")
        if self._layout is not sparse_coo and mask.layout is sparse_coo:
            raise RuntimeError("sparse_mask_sparse_compressed expects mask to have sparse "
                               f"compressed layout, got {mask.layout}")
        s = self.to_sparse_coo().coalesce()
        m = mask.to_sparse_coo()
        sd = s.sparse_dim()
        if m.sparse_dim() != sd:
            raise RuntimeError(f"sparse_mask: expected mask with {sd} sparse dims, got "
                               f"{m.sparse_dim()}")
        keys = _linear(s._idx, self._size[:sd])  # sorted: s is coalesced
        wanted = _linear(m._idx, self._size[:sd])
        dense_shape = tuple(s._vals.shape[1:])
        if keys.numel() == 0:
            vals = ember.zeros((wanted.numel(), *dense_shape), dtype=s.dtype, device=s.device)
        else:
            pos = ember.searchsorted(keys, wanted).clamp(max=keys.numel() - 1)
            hit = (keys[pos] == wanted).view(-1, *([1] * len(dense_shape)))
            vals = ember.where(hit, s._vals[pos], ember.zeros((), dtype=s.dtype, device=s.device))
        out = SparseTensor(sparse_coo, self._size, vals, indices=m._idx, coalesced=m._coalesced)
        if mask.layout in _BLOCKED:  # the mask's blocks, whole
            return _to_blocked(out.coalesce(), mask.layout, tuple(mask._vals.shape[-2:]), None)
        return out if mask.layout is sparse_coo else out.coalesce().to_sparse(layout=mask.layout)

    def index_select(self, dim: int, index: Tensor) -> SparseTensor:
        """The slices ``index`` (repeats allowed) along ``dim`` of a COO tensor, as a COO tensor
        (differentiable with respect to the values)."""
        self._need(sparse_coo, "index_select")
        d = _wrap(dim, self.ndim, "index_select")
        index = _as_index(index, "index", "index_select").reshape(-1)
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= self._size[d]):
            raise IndexError(f"index_select: index out of range for dim {d} of size "
                             f"{self._size[d]}")
        size = self._size[:d] + (index.shape[0],) + self._size[d + 1:]
        sd = self.sparse_dim()
        if d >= sd:
            return SparseTensor(sparse_coo, size, self._vals.index_select(d - sd + 1, index),
                                indices=self._idx, coalesced=self._coalesced)
        # Each selected slice j takes the entries whose index along d is index[j]: the entries
        # sorted by that index, a range per slice found by binary search.
        key = self._idx[d]
        order = ember.argsort(key, stable=True)
        sk = key[order]
        lo = ember.searchsorted(sk, index)
        cnt = ember.searchsorted(sk, index, right=True) - lo
        slot = ember.repeat_interleave(ember.arange(index.shape[0]), cnt)
        first = cnt.cumsum(0) - cnt
        src = order[lo[slot] + ember.arange(slot.shape[0]) - first[slot]]
        idx = self._idx[:, src].clone()
        idx[d] = slot
        return SparseTensor(sparse_coo, size, self._vals[src], indices=idx)

    def norm(self, p: Any = 2, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """The ``p``-norm of every element (a 0-d dense tensor): that of the coalesced values,
        the unspecified elements being zeros (``p >= 0`` or ``inf``; no ``dim``).

        >>> import ember
        >>> ember.sparse_coo_tensor([[0, 0, 2]], [1.0, 2.0, 4.0], (3,)).norm().item()
        5.0
        """
        if dim is not None or keepdim:
            raise NotImplementedError(f"{self._layout}: norm over a dim is not supported (only "
                                      "the norm of every element)")
        p = 2.0 if p is None or p == "fro" else float(p)
        if p < 0:
            raise NotImplementedError(f"{self._layout}: norm with p = {p} < 0 is not supported")
        s = self.coalesce() if self._layout is sparse_coo else self
        v = s._vals if dtype is None else s._vals.to(dtype)
        return ember.linalg.vector_norm(v, p)

    def _scale_(self, other: Any, op: str, div: bool) -> SparseTensor:
        if not (isinstance(other, (int, float, bool)) or (isinstance(other, Tensor) and
                                                          other.ndim == 0)):
            raise NotImplementedError(f"{self._layout}: {op} by {type(other).__name__} of shape "
                                      f"{tuple(getattr(other, 'shape', ()))} is not supported "
                                      "in place (only by a number or a 0-d tensor)")
        if div:
            self._vals.div_(other)
        else:
            self._vals.mul_(other)
        return self

    def mul_(self, other: Any) -> SparseTensor:
        """Multiplies the values by a number or a 0-d tensor in place.

        >>> import ember
        >>> ember.eye(2).to_sparse().mul_(3).values().tolist()
        [3.0, 3.0]
        """
        return self._scale_(other, "mul_", False)

    def div_(self, other: Any) -> SparseTensor:
        """Divides the values by a number or a 0-d tensor in place."""
        return self._scale_(other, "div_", True)

    def clamp(self, min: Any = None, max: Any = None) -> SparseTensor:  # noqa: A002
        """``clamp`` of the specified entries of the coalesced tensor, for bounds with
        ``min <= 0 <= max`` (which map the unspecified zeros to zero).

        >>> import ember
        >>> s = ember.sparse_coo_tensor([[0, 0, 2]], [1.0, 2.0, -4.0], (3,))
        >>> s.clamp(-1.5, 1.5).to_dense().tolist()
        [1.5, 0.0, -1.5]
        """
        lo = -math.inf if min is None else float(min)
        hi = math.inf if max is None else float(max)
        if not lo <= 0.0 <= hi:
            raise NotImplementedError(f"{self._layout}: clamp to [{lo}, {hi}] is not supported "
                                      "(it would not map 0 to 0, so the result would be dense)")
        s = self.coalesce() if self._layout is sparse_coo else self
        return s._with_values(s._vals.clamp(min=min, max=max))

    def clamp_(self, min: Any = None, max: Any = None) -> SparseTensor:  # noqa: A002
        """In-place :meth:`clamp` (the tensor is coalesced in place first)."""
        out = self.clamp(min, max)
        self._idx, self._vals, self._coalesced = out._idx, out._vals, out._coalesced
        return self

    def unsqueeze(self, dim: int) -> SparseTensor:
        """A new size-1 dim at ``dim``: a sparse dim (an index row of zeros) when it comes at or
        before the last sparse dim, else a dense dim of the values.

        >>> import ember
        >>> u = ember.eye(2).to_sparse().unsqueeze(0)
        >>> u.shape, u.sparse_dim()
        (ember.Size([1, 2, 2]), 3)
        """
        self._need(sparse_coo, "unsqueeze")
        d = _wrap(dim, self.ndim + 1, "unsqueeze")
        size = self._size[:d] + (1,) + self._size[d:]
        sd = self.sparse_dim()
        if d <= sd:
            zero = self._idx.new_zeros((1, self._idx.shape[1]))
            idx = ember.cat([self._idx[:d], zero, self._idx[d:]])
            return SparseTensor(sparse_coo, size, self._vals, indices=idx,
                                coalesced=self._coalesced)
        return SparseTensor(sparse_coo, size, self._vals.unsqueeze(d - sd + 1),
                            indices=self._idx, coalesced=self._coalesced)

    def neg(self) -> SparseTensor:
        return self._with_values(-self._vals)

    __neg__ = neg

    def mul(self, other: Any) -> SparseTensor:
        """Element-wise product with a number, a 0-d tensor, a dense tensor of the same shape
        (a sparse result) or a sparse tensor of the same shape."""
        if isinstance(other, (int, float, bool)) or (isinstance(other, Tensor) and other.ndim == 0):
            return self._with_values(self._vals * other)
        if isinstance(other, Tensor):
            self._need(sparse_coo, "mul with a dense tensor")
            if tuple(other.shape) != self._size:
                try:  # a dense operand broadcasts to the sparse size (the result stays sparse)
                    other = other.expand(self._size)
                except RuntimeError:
                    raise RuntimeError(f"mul: a sparse tensor of size {self._size} times a dense "
                                       f"tensor of size {tuple(other.shape)}: the dense operand "
                                       "must broadcast to the sparse size") from None
            picked = other[tuple(self._idx)]
            return self._with_values(self._vals * picked)
        if _is_sparse(other):
            if other._size != self._size:
                raise RuntimeError(f"mul: sparse sizes {self._size} and {other._size} differ")
            a, b = self.to_sparse_coo().coalesce(), other.to_sparse_coo().coalesce()
            dense_b = b.to_dense()
            return SparseTensor(sparse_coo, self._size, a._vals * dense_b[tuple(a._idx)],
                                indices=a._idx, coalesced=True)
        return NotImplemented

    __mul__ = mul
    __rmul__ = mul

    def div(self, other: Any) -> SparseTensor:
        if isinstance(other, (int, float)) or (isinstance(other, Tensor) and other.ndim == 0):
            return self._with_values(self._vals / other)
        raise NotImplementedError(f"{self._layout}: div by {type(other).__name__} is not "
                                  "supported (only by a number or a 0-d tensor)")

    __truediv__ = div

    def add(self, other: Any, *, alpha: Any = 1) -> Any:
        """``self + alpha * other``: sparse + sparse (same size) is sparse; sparse + dense is
        dense."""
        if _is_sparse(other):
            if other._size != self._size:
                raise RuntimeError(f"add: sparse sizes {self._size} and {other._size} differ")
            if other.dtype is not self.dtype:
                raise RuntimeError(f"add: sparse dtypes {self.dtype} and {other.dtype} differ")
            a, b = self.to_sparse_coo(), other.to_sparse_coo()
            if a.sparse_dim() != b.sparse_dim():
                raise RuntimeError("add: sparse tensors with different sparse_dim")
            vb = b._vals if alpha == 1 else b._vals * alpha
            idx = ember.cat([a._idx, b._idx], 1)
            out = SparseTensor(sparse_coo, self._size, ember.cat([a._vals, vb]), indices=idx)
            out = out.coalesce()
            if self._layout in _BLOCKED:
                return _to_blocked(out, self._layout, tuple(self._vals.shape[-2:]), None)
            return out.to_sparse(layout=self._layout)
        if isinstance(other, Tensor):
            dense = self.to_dense()
            return dense + other if alpha == 1 else dense + other * alpha
        if isinstance(other, (int, float)):
            raise NotImplementedError(f"{self._layout}: adding a number to a sparse tensor is "
                                      "not supported (it would not stay sparse)")
        return NotImplemented

    def add_(self, other: Any, *, alpha: Any = 1) -> SparseTensor:
        """In-place ``self += alpha * other`` for a sparse ``other`` of the same size (the result
        coalesced, in this tensor's layout); a dense ``other`` is refused, as in PyTorch.

        >>> import ember
        >>> s = ember.eye(2).to_sparse()
        >>> s.add_(ember.eye(2).to_sparse(), alpha=2).values().tolist()
        [3.0, 3.0]
        """
        if not _is_sparse(other):
            raise RuntimeError(f"add_: adding a {type(other).__name__} in place to a "
                               f"{self._layout} tensor is not supported (add(dense, sparse) "
                               "gives a dense result)")
        out = self.add(other, alpha=alpha)
        self._idx, self._crow, self._col = out._idx, out._crow, out._col
        self._vals, self._coalesced = out._vals, out._coalesced
        return self

    def sub_(self, other: Any, *, alpha: Any = 1) -> SparseTensor:
        """In-place ``self -= alpha * other`` (see :meth:`add_`)."""
        return self.add_(other, alpha=-alpha)

    __iadd__ = add_

    def __isub__(self, other: Any) -> SparseTensor:
        return self.add_(other, alpha=-1)

    def __add__(self, other: Any) -> Any:
        return self.add(other)

    def __radd__(self, other: Any) -> Any:
        return self.add(other)

    def sub(self, other: Any, *, alpha: Any = 1) -> Any:
        return self.add(other, alpha=-alpha)

    def __sub__(self, other: Any) -> Any:
        return self.add(other, alpha=-1)

    def __rsub__(self, other: Any) -> Any:
        return (-self).add(other)

    def sum(self, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
        """The sum of every element (a 0-d dense tensor), or over ``dim`` (see
        :func:`ember.sparse.sum`)."""
        if keepdim:
            raise NotImplementedError(f"{self._layout}: sum with keepdim=True is not supported")
        return sum(self, dim, dtype=dtype)

    # ---- products ---------------------------------------------------------------------------
    def mm(self, mat2: Any) -> Tensor:
        return mm(self, mat2)

    def matmul(self, other: Any) -> Any:
        return _matmul(self, other)

    __matmul__ = matmul

    def __rmatmul__(self, other: Any) -> Any:
        if isinstance(other, Tensor):
            return mm(other, self)
        return NotImplemented

    # ---- protocols --------------------------------------------------------------------------
    def __repr__(self) -> str:
        return _sparse_repr(self)

    __str__ = __repr__

    def __len__(self) -> int:
        if not self._size:
            raise TypeError("len() of a 0-d tensor")
        return self._size[0]

    def __bool__(self) -> bool:
        raise RuntimeError(f"{self._layout}: the truth value of a sparse tensor is not "
                           "supported")

    def __reduce_ex__(self, protocol: int) -> Any:
        if self._layout is sparse_coo:
            arrays = (self._idx, self._vals.detach())
        else:
            arrays = (self._crow, self._col, self._vals.detach())
        return (_rebuild_sparse, (str(self._layout), self._size, arrays, self._coalesced,
                                  self.requires_grad))

    def __deepcopy__(self, memo: dict) -> SparseTensor:
        out = self.detach().clone()
        if self.requires_grad:
            out.requires_grad_(True)
        return out

    def __getattr__(self, name: str) -> Any:
        # A dense tensor's method exists here too (hasattr() says so) but raises when called;
        # a dense tensor's property raises when read.
        # Private names (pybind11's own probes among them) are plain AttributeErrors.
        attr = getattr(Tensor, name, None) if not name.startswith("_") else None
        if attr is None:
            raise AttributeError(f"'SparseTensor' object has no attribute '{name}'")
        if callable(attr):
            return _unsupported(name).__get__(self)
        raise NotImplementedError(f"{self._layout}: op {name} not supported")


def _unsupported(name: str) -> Any:
    def op(self: SparseTensor, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{self._layout}: op {name} not supported")

    op.__name__ = name
    return op


# Operators Python would otherwise report as a bare TypeError.
for _name in ("__eq__", "__ne__", "__rpow__", "__floordiv__", "__mod__", "__getitem__", "__setitem__",
              "__lt__", "__le__", "__gt__", "__ge__", "__abs__", "__imul__",
              "__rtruediv__", "__and__", "__or__", "__xor__", "__invert__", "__iter__"):
    setattr(SparseTensor, _name, _unsupported(_name.strip("_")))
SparseTensor.__hash__ = object.__hash__  # by identity, as a tensor's (== raises above)


# Element-wise ops that map 0 to 0, so the result keeps the pattern: applied to the values of
# the coalesced tensor (f(a) + f(b) is not f(a + b) for duplicates).
_ZERO_PRESERVING = (
    "abs", "sqrt", "sin", "tan", "tanh", "asin", "atan", "atanh", "sinh", "asinh", "expm1",
    "log1p", "sign", "square", "relu", "floor", "ceil", "round", "trunc", "frac", "erf", "erfinv",
    "deg2rad", "rad2deg", "nan_to_num", "signbit", "isnan",
)


def _zero_preserving(name: str) -> Any:
    def op(self: SparseTensor, *args: Any, **kwargs: Any) -> SparseTensor:
        s = self.coalesce() if self._layout is sparse_coo else self
        return s._with_values(getattr(s._vals, name)(*args, **kwargs))

    op.__name__ = name
    op.__doc__ = f"``{name}`` of the specified entries (it maps 0 to 0): a tensor of this layout."
    return op


for _name in _ZERO_PRESERVING:
    setattr(SparseTensor, _name, _zero_preserving(_name))


def _pow(self: SparseTensor, exponent: Any) -> SparseTensor:
    """``self ** exponent`` for a positive number (which maps 0 to 0)."""
    if not isinstance(exponent, (int, float)) or exponent <= 0:
        raise NotImplementedError(f"{self._layout}: pow is supported for a positive number "
                                  f"exponent only, got {exponent!r}")
    s = self.coalesce() if self._layout is sparse_coo else self
    return s._with_values(s._vals.pow(exponent))


SparseTensor.pow = _pow
SparseTensor.__pow__ = _pow


def _rebuild_sparse(lay: str, size: tuple[int, ...], arrays: tuple[Tensor, ...], coalesced: bool,
                    requires_grad: bool) -> SparseTensor:
    """Unpickles a sparse tensor (allow-listed for ``ember.load(weights_only=True)``: it only
    checks and assembles the arrays, whose invariants are checked like a user's)."""
    if not isinstance(arrays, tuple) or not all(isinstance(a, Tensor) for a in arrays):
        raise RuntimeError("ember.load: a sparse tensor's arrays must be tensors")
    if lay == str(sparse_coo) and len(arrays) == 2:
        out = sparse_coo_tensor(arrays[0], arrays[1], size, is_coalesced=bool(coalesced))
    elif lay == str(sparse_csr) and len(arrays) == 3:
        out = sparse_csr_tensor(arrays[0], arrays[1], arrays[2], size)
    elif lay == str(sparse_csc) and len(arrays) == 3:
        out = sparse_csc_tensor(arrays[0], arrays[1], arrays[2], size)
    elif lay == str(sparse_bsr) and len(arrays) == 3:
        out = sparse_bsr_tensor(arrays[0], arrays[1], arrays[2], size)
    elif lay == str(sparse_bsc) and len(arrays) == 3:
        out = sparse_bsc_tensor(arrays[0], arrays[1], arrays[2], size)
    else:
        raise RuntimeError(f"ember.load: unknown sparse layout {lay!r}")
    return out.requires_grad_(True) if requires_grad else out


def _rebuild_torch_sparse(lay: Any, data: tuple[Any, ...]) -> SparseTensor:
    """A sparse tensor from PyTorch's pickle of one (``torch._utils._rebuild_sparse_tensor``)."""
    if lay is sparse_coo:
        return sparse_coo_tensor(data[0], data[1], tuple(data[2]),
                                 is_coalesced=bool(data[3]) if len(data) > 3 else None)
    if lay is sparse_csr:
        return sparse_csr_tensor(data[0], data[1], data[2], tuple(data[3]))
    if lay is sparse_csc:
        return sparse_csc_tensor(data[0], data[1], data[2], tuple(data[3]))
    if lay is sparse_bsr:
        return sparse_bsr_tensor(data[0], data[1], data[2], tuple(data[3]))
    if lay is sparse_bsc:
        return sparse_bsc_tensor(data[0], data[1], data[2], tuple(data[3]))
    raise RuntimeError(f"ember.load: PyTorch sparse layout {lay} is not supported")


def _wrap(dim: int, ndim: int, op: str) -> int:
    if not -ndim <= dim < max(ndim, 1):
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of "
                         f"[{-ndim}, {ndim - 1}], but got {dim})")
    return dim % ndim if ndim else 0


# ---- helpers over the arrays ----------------------------------------------------------------
def _linear(idx: Tensor, sizes: tuple[int, ...]) -> Tensor:
    """Row-major positions of the COO indices within the sparse dims' sizes (checked to lie
    within them: a tensor built with check_invariants=False must not alias positions)."""
    if idx.shape[1] and len(sizes):
        lo, hi = idx.amin(1).tolist(), idx.amax(1).tolist()
        for d, n in enumerate(sizes):
            if lo[d] < 0 or hi[d] >= n:
                raise RuntimeError(f"sparse_coo: indices of dim {d} must lie in [0, {n}), got "
                                   f"[{lo[d]}, {hi[d]}] (a tensor built with "
                                   "check_invariants=False)")
    lin = idx[0].clone() if idx.shape[0] else ember.zeros(idx.shape[1], dtype=ember.int64,
                                                            device=idx.device)
    for d in range(1, len(sizes)):
        lin = lin * sizes[d] + idx[d]
    return lin


def _unravel(lin: Tensor, sizes: tuple[int, ...]) -> Tensor:
    rows = []
    for s in reversed(sizes):
        rows.append(lin % s if s else lin)
        lin = ember.div(lin, s, rounding_mode="floor") if s else lin
    return ember.stack(rows[::-1]) if rows else lin.new_zeros((0, lin.shape[0]))


def _coalesce(idx: Tensor, vals: Tensor, sizes: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    if idx.shape[1] == 0:
        return idx, vals
    uniq, inv = ember.unique(_linear(idx, sizes), sorted=True, return_inverse=True)
    out = vals.new_zeros((uniq.shape[0], *vals.shape[1:])).index_add(0, inv, vals)
    return _unravel(uniq, sizes), out


def _coo_to_dense(idx: Tensor, vals: Tensor, size: tuple[int, ...]) -> Tensor:
    sd = idx.shape[0]
    sparse_sizes = size[:sd]
    flat = vals.new_zeros((math.prod(sparse_sizes), *size[sd:]))
    if idx.shape[1]:
        flat = flat.index_add(0, _linear(idx, sparse_sizes), vals)
    return flat.reshape(size)


def _crow_from_rows(rows: Tensor, m: int) -> Tensor:
    counts = ember.bincount(rows, minlength=m) if rows.numel() else rows.new_zeros(m)
    return ember.cat([rows.new_zeros(1), counts.cumsum(0)])


def _compressed_counts(s: SparseTensor, m: int, n: int) -> Tensor:
    """The entries of each of the m compressed rows (columns for CSC, block rows/columns for
    the blocked layouts) of s, after checking that its compressed indices count them and its
    plain indices lie in [0, n): a tensor built with check_invariants=False may not, and the
    expansion to COO would then fail with a message about its internal ops (or misplace
    entries)."""
    csc = s._layout in _COL_MAJOR
    cname, iname = ("ccol_indices", "row_indices") if csc else ("crow_indices", "col_indices")
    crow, col = s._crow, s._col
    nnz = col.numel()
    tag = f"{s._layout}: "
    note = " (a tensor built with check_invariants=False)"
    if crow.numel() != m + 1:
        raise RuntimeError(f"{tag}{cname} must have {m + 1} elements, got {crow.numel()}{note}")
    counts = crow[1:] - crow[:-1]
    first, last = int(crow[0]), int(crow[-1])
    if first != 0 or last != nnz or (m and not bool((counts >= 0).all())):
        raise RuntimeError(f"{tag}{cname} must be non-decreasing from 0 to nnz = {nnz}, got "
                           f"{crow.tolist() if m < 16 else f'{first} ... {last}'}{note}")
    if nnz and (int(col.min()) < 0 or int(col.max()) >= n):
        raise RuntimeError(f"{tag}{iname} must lie in [0, {n}), got [{int(col.min())}, "
                           f"{int(col.max())}]{note}")
    return counts


def _sorted_csr(s: SparseTensor) -> bool:
    """Whether a CSR tensor's columns are strictly increasing within each row."""
    if s._col.numel() < 2:
        return True
    counts = _compressed_counts(s, s._size[0], s._size[1])
    rows = ember.repeat_interleave(ember.arange(s._size[0], device=s.device), counts)
    lin = rows * s._size[1] + s._col
    return bool((lin[1:] > lin[:-1]).all())


def _check_invariants(s: SparseTensor) -> None:
    if s._layout is sparse_coo:
        idx, sd = s._idx, s._idx.shape[0]
        if idx.shape[1] and sd:
            lo = idx.amin(1).tolist()
            hi = idx.amax(1).tolist()
            for d in range(sd):
                if lo[d] < 0:
                    raise RuntimeError(f"sparse_coo_tensor: found negative index {lo[d]} for dim "
                                       f"{d}")
                if hi[d] >= s._size[d]:
                    raise RuntimeError(f"sparse_coo_tensor: size is inconsistent with indices: "
                                       f"for dim {d}, size is {s._size[d]} but found index "
                                       f"{hi[d]}")
        if s._coalesced and idx.shape[1] > 1:
            lin = _linear(idx, s._size[:sd])
            if not bool((lin[1:] > lin[:-1]).all()):
                raise RuntimeError("sparse_coo_tensor: is_coalesced=True but the indices are not "
                                   "sorted and unique")
        return
    csc = s._layout in _COL_MAJOR
    op = f"sparse_{str(s._layout).split('_')[-1]}_tensor"
    cname, iname = ("ccol_indices", "row_indices") if csc else ("crow_indices", "col_indices")
    crow, col = s._crow, s._col
    m, n = s._size[::-1] if csc else s._size
    what = "columns" if csc else "rows"
    if s._layout in _BLOCKED:  # counted in blocks
        bh, bw = s._vals.shape[-2:]
        if csc:
            bh, bw = bw, bh
        if bh == 0 or bw == 0 or m % bh or n % bw:
            raise RuntimeError(f"{op}: the size {s._size} must be divisible by the blocksize "
                               f"{tuple(s._vals.shape[-2:])} (the last two dims of values)")
        m, n, what = m // bh, n // bw, "block " + what
    if crow.numel() != m + 1:
        raise RuntimeError(f"{op}: {cname} must have {m + 1} elements ({what} + 1), got "
                           f"{crow.numel()}")
    c = crow.tolist()
    if c[0] != 0 or c[-1] != col.numel():
        raise RuntimeError(f"{op}: {cname} must start at 0 and end at nnz = {col.numel()}, got "
                           f"{c[0]} and {c[-1]}")
    if any(c[r] > c[r + 1] for r in range(m)):
        raise RuntimeError(f"{op}: {cname} must be non-decreasing")
    if col.numel() and (int(col.min()) < 0 or int(col.max()) >= n):
        raise RuntimeError(f"{op}: {iname} must be in [0, {n}), got "
                           f"[{int(col.min())}, {int(col.max())}]")


# ---- factories ------------------------------------------------------------------------------
def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None,
                      device: Any = None, pin_memory: bool = False, requires_grad: bool = False,
                      check_invariants: bool | None = None,
                      is_coalesced: bool | None = None) -> SparseTensor:
    """A sparse COO tensor with ``values[k]`` at position ``indices[:, k]``.

    ``indices`` is ``(sparse_dim, nnz)``; ``values`` is ``(nnz, *dense_dims)``. Without ``size``
    it is the smallest that holds the indices. Duplicate positions are kept (and summed by
    ``coalesce``/``to_dense``).

    >>> import ember
    >>> s = ember.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> s.to_dense().tolist()
    [[0.0, 2.0], [3.0, 0.0]]
    """
    del pin_memory
    op = "sparse_coo_tensor"
    idx = _as_index(indices, "indices", op)
    vals = _as_values(values, dtype, device)
    idx = idx.to(vals.device)
    if idx.ndim != 2:
        raise RuntimeError(f"{op}: indices must be sparse_dim x nnz, but got: {tuple(idx.shape)}")
    if vals.ndim < 1 or vals.shape[0] != idx.shape[1]:
        raise RuntimeError(f"{op}: number of dimensions must be sparse_dim ({idx.shape[0]}) + "
                           f"dense_dim ({max(vals.ndim - 1, 0)}), and values must have nnz = "
                           f"{idx.shape[1]} rows, got values of shape {tuple(vals.shape)}")
    sd = idx.shape[0]
    if size is None:
        if idx.shape[1] == 0:
            raise RuntimeError(f"{op}: size must be given when there are no indices")
        size = tuple(int(m) + 1 for m in idx.amax(1).tolist()) + tuple(vals.shape[1:])
    else:
        size = tuple(int(s) for s in size)
        if len(size) != sd + vals.ndim - 1:
            raise RuntimeError(f"{op}: number of dimensions must be sparse_dim ({sd}) + "
                               f"dense_dim ({vals.ndim - 1}), but got {len(size)}")
        if tuple(vals.shape[1:]) != size[sd:]:
            raise RuntimeError(f"{op}: values has incorrect size, expected {(idx.shape[1],) + size[sd:]}"
                               f", got {tuple(vals.shape)}")
    out = SparseTensor(sparse_coo, size, vals, indices=idx, coalesced=bool(is_coalesced))
    if check_invariants is not False:
        _check_invariants(out)
    if requires_grad:  # a new leaf over the same memory; the caller's values are left alone
        out._vals = out._vals.detach().requires_grad_(True)
    return out


def sparse_csr_tensor(crow_indices: Any, col_indices: Any, values: Any, size: Any = None, *,
                      dtype: Any = None, device: Any = None, pin_memory: bool = False,
                      requires_grad: bool = False,
                      check_invariants: bool | None = None) -> SparseTensor:
    """A 2-D sparse CSR tensor: row ``r``'s entries are ``col_indices[crow[r]:crow[r+1]]`` with
    ``values`` at the same positions.

    >>> import ember
    >>> s = ember.sparse_csr_tensor([0, 1, 2], [1, 0], [2.0, 3.0], (2, 2))
    >>> s.to_dense().tolist()
    [[0.0, 2.0], [3.0, 0.0]]
    """
    del pin_memory
    return _compressed_tensor(sparse_csr, crow_indices, col_indices, values, size, dtype, device,
                              requires_grad, check_invariants)


def sparse_csc_tensor(ccol_indices: Any, row_indices: Any, values: Any, size: Any = None, *,
                      dtype: Any = None, device: Any = None, pin_memory: bool = False,
                      requires_grad: bool = False,
                      check_invariants: bool | None = None) -> SparseTensor:
    """A 2-D sparse CSC tensor: column ``c``'s entries are
    ``row_indices[ccol[c]:ccol[c+1]]`` with ``values`` at the same positions (the transpose of
    the CSR tensor of the same arrays).

    >>> import ember
    >>> s = ember.sparse_csc_tensor([0, 1, 2], [1, 0], [3.0, 2.0], (2, 2))
    >>> s.to_dense().tolist()
    [[0.0, 2.0], [3.0, 0.0]]
    """
    del pin_memory
    return _compressed_tensor(sparse_csc, ccol_indices, row_indices, values, size, dtype, device,
                              requires_grad, check_invariants)


def sparse_bsr_tensor(crow_indices: Any, col_indices: Any, values: Any, size: Any = None, *,
                      dtype: Any = None, device: Any = None, pin_memory: bool = False,
                      requires_grad: bool = False,
                      check_invariants: bool | None = None) -> SparseTensor:
    """A 2-D block sparse row (BSR) tensor: block row ``r`` holds the blocks ``values[k]``
    (each ``(bh, bw)``) at block columns ``col_indices[k]`` for ``k`` in
    ``crow_indices[r]:crow_indices[r+1]``.

    >>> import ember
    >>> s = ember.sparse_bsr_tensor([0, 1, 1], [1], ember.ones(1, 2, 2), (4, 4))
    >>> s.to_dense()[0].tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    del pin_memory
    return _compressed_tensor(sparse_bsr, crow_indices, col_indices, values, size, dtype, device,
                              requires_grad, check_invariants)


def sparse_bsc_tensor(ccol_indices: Any, row_indices: Any, values: Any, size: Any = None, *,
                      dtype: Any = None, device: Any = None, pin_memory: bool = False,
                      requires_grad: bool = False,
                      check_invariants: bool | None = None) -> SparseTensor:
    """A 2-D block sparse column (BSC) tensor: block column ``c`` holds the blocks
    ``values[k]`` (each ``(bh, bw)``) at block rows ``row_indices[k]`` for ``k`` in
    ``ccol_indices[c]:ccol_indices[c+1]``.

    >>> import ember
    >>> s = ember.sparse_bsc_tensor([0, 1, 1], [1], ember.ones(1, 2, 2), (4, 4))
    >>> s.to_dense()[:, 0].tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    del pin_memory
    return _compressed_tensor(sparse_bsc, ccol_indices, row_indices, values, size, dtype, device,
                              requires_grad, check_invariants)


def sparse_compressed_tensor(compressed_indices: Any, plain_indices: Any, values: Any,
                             size: Any = None, *, dtype: Any = None, layout: Any = None,
                             device: Any = None, pin_memory: bool = False,
                             requires_grad: bool = False,
                             check_invariants: bool | None = None) -> SparseTensor:
    """A CSR, CSC, BSR or BSC tensor (``layout``, required) from its three arrays.

    >>> import ember
    >>> s = ember.sparse_compressed_tensor([0, 1, 1], [1], [2.0], (2, 2), layout=ember.sparse_csr)
    >>> s.to_dense().tolist()
    [[0.0, 2.0], [0.0, 0.0]]
    """
    del pin_memory
    if layout not in (*_COMPRESSED, *_BLOCKED):
        raise RuntimeError("sparse_compressed_tensor: expected layout to be one of "
                           f"sparse_csr, sparse_csc, sparse_bsr, sparse_bsc, got {layout}")
    return _compressed_tensor(layout, compressed_indices, plain_indices, values, size, dtype,
                              device, requires_grad, check_invariants)


def _compressed_tensor(layout: Any, compressed: Any, plain: Any, values: Any, size: Any,
                       dtype: Any, device: Any, requires_grad: bool,
                       check_invariants: bool | None) -> SparseTensor:
    """A 2-D CSR/BSR (compressed rows) or CSC/BSC (compressed columns) tensor from its three
    arrays."""
    csr = layout in _ROW_MAJOR
    blocked = layout in _BLOCKED
    op = f"sparse_{str(layout).split('_')[-1]}_tensor"
    cname, pname = ("crow_indices", "col_indices") if csr else ("ccol_indices", "row_indices")
    comp = _as_index(compressed, cname, op)
    other = _as_index(plain, pname, op)
    vals = _as_values(values, dtype, device)
    comp, other = comp.to(vals.device), other.to(vals.device)
    vdim = 3 if blocked else 1
    if comp.ndim != 1 or other.ndim != 1 or vals.ndim != vdim:
        kind = str(layout).split("_")[-1].upper()
        raise RuntimeError(f"{op}: only 2-D {kind} tensors (1-D {cname} and {pname}, "
                           f"{vdim}-D values) are supported, got shapes "
                           f"{tuple(comp.shape)}, {tuple(other.shape)} and {tuple(vals.shape)}")
    if other.shape[0] != vals.shape[0]:
        raise RuntimeError(f"{op}: {pname} and values must have the same length, got "
                           f"{other.shape[0]} and {vals.shape[0]}")
    if size is None:
        extent = (comp.shape[0] - 1, int(other.max()) + 1 if other.numel() else 0)
        if blocked:  # in blocks, the block's own orientation
            bh, bw = vals.shape[1:]
            extent = (extent[0] * bh, extent[1] * bw) if csr else (extent[0] * bw, extent[1] * bh)
        size = extent if csr else extent[::-1]
    size = tuple(int(s) for s in size)
    if len(size) != 2:
        raise RuntimeError(f"{op}: only 2-D sizes are supported, got {size}")
    out = SparseTensor(layout, size, vals, crow=comp, col=other)
    if check_invariants is not False:
        _check_invariants(out)
    if requires_grad:  # a new leaf over the same memory; the caller's values are left alone
        out._vals = out._vals.detach().requires_grad_(True)
    return out


def _dense_to_sparse(self: Tensor, *args: Any, layout: Any = None, blocksize: Any = None,
                     dense_dim: Any = None) -> SparseTensor:
    """``Tensor.to_sparse(sparse_dim=ndim)`` / ``to_sparse(layout=...)``: the nonzero entries
    (rows of the last ``ndim - sparse_dim`` dims that are not all zero) as a coalesced COO
    tensor, or CSR for ``layout=ember.sparse_csr``.

    >>> import ember
    >>> ember.tensor([[0.0, 2.0], [0.0, 0.0]]).to_sparse()._nnz()
    1
    """
    if layout in _BLOCKED:
        if blocksize is None:
            raise RuntimeError(f"to_sparse: layout {layout} needs a blocksize")
        return _to_blocked(self, layout, blocksize, dense_dim)
    if blocksize is not None:
        raise RuntimeError(f"to_sparse: blocksize is only for the sparse_bsr and sparse_bsc "
                           f"layouts, got layout {layout}")
    sd = int(args[0]) if args else self.ndim
    if layout is sparse_csr:
        return _dense_to_sparse(self).to_sparse_csr()
    if layout is sparse_csc:
        return _dense_to_sparse(self).to_sparse_csc()
    if layout not in (None, sparse_coo):
        raise RuntimeError(f"to_sparse: unsupported layout {layout}")
    if not 0 <= sd <= self.ndim:
        raise RuntimeError(f"to_sparse: sparse_dim must be in [0, {self.ndim}], got {sd}")
    flat = self.reshape(*self.shape[:sd], -1) if sd < self.ndim else self
    mask = flat != 0
    if sd < self.ndim:
        mask = mask.any(-1)
    idx = ember.stack(list(ember.nonzero(mask, as_tuple=True))) if sd else \
        ember.zeros((0, 1), dtype=ember.int64, device=self.device)
    vals = self[tuple(idx)] if sd else self.unsqueeze(0)
    return SparseTensor(sparse_coo, tuple(self.shape), vals, indices=idx, coalesced=True)


def _dense_to_sparse_csr(self: Tensor, dense_dim: int | None = None) -> SparseTensor:
    return _dense_to_sparse(self).to_sparse_csr(dense_dim)


def _dense_to_sparse_csc(self: Tensor, dense_dim: int | None = None) -> SparseTensor:
    return _dense_to_sparse(self).to_sparse_csc(dense_dim)


def _dense_to_sparse_bsr(self: Tensor, blocksize: Any, dense_dim: int | None = None) -> SparseTensor:
    """``Tensor.to_sparse_bsr(blocksize)``: the blocks of size ``blocksize`` that are not all
    zero, as a BSR tensor (2-D; sizes divisible by the blocksize).

    >>> import ember
    >>> b = ember.tensor([[1.0, 2.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]]).to_sparse_bsr((2, 2))
    >>> b.crow_indices().tolist(), b.col_indices().tolist(), tuple(b.values().shape)
    ([0, 1], [0], (1, 2, 2))
    """
    return _to_blocked(self, sparse_bsr, blocksize, dense_dim)


def _dense_to_sparse_bsc(self: Tensor, blocksize: Any, dense_dim: int | None = None) -> SparseTensor:
    """``Tensor.to_sparse_bsc(blocksize)``: the blocks that are not all zero, as a BSC tensor.

    >>> import ember
    >>> b = ember.tensor([[0.0, 0.0, 1.0, 2.0], [0.0, 0.0, 0.0, 3.0]]).to_sparse_bsc((2, 2))
    >>> b.ccol_indices().tolist(), b.row_indices().tolist()
    ([0, 0, 1], [0])
    """
    return _to_blocked(self, sparse_bsc, blocksize, dense_dim)


# ---- blocked layouts ------------------------------------------------------------------------
def _blocksize(op: str, blocksize: Any) -> tuple[int, int]:
    if isinstance(blocksize, int) and not isinstance(blocksize, bool):
        blocksize = (blocksize, blocksize)
    if not isinstance(blocksize, (tuple, list)) or not all(
            isinstance(b, int) and not isinstance(b, bool) for b in blocksize):
        raise TypeError(f"{op}: blocksize must be a tuple of 2 ints, got {blocksize!r}")
    if len(blocksize) != 2:
        raise RuntimeError(f"{op}: blocksize needs to be a tuple of size 2, but got "
                           f"{len(blocksize)}")
    if blocksize[0] <= 0 or blocksize[1] <= 0:
        raise RuntimeError(f"{op}: blocksize must be positive, got {tuple(blocksize)}")
    return int(blocksize[0]), int(blocksize[1])


def _block_coords(s: SparseTensor) -> tuple[Tensor, Tensor, Tensor, int, int]:
    """(block rows, block columns, blocks ``(nnz, bh, bw)``, bh, bw) of a BSR or BSC tensor,
    the blocks in the matrix's own orientation."""
    bh, bw = s._vals.shape[-2:]
    if s._layout is sparse_bsr:
        nb = s._size[0] // bh
        rows = ember.repeat_interleave(ember.arange(nb, device=s.device),
                                       _compressed_counts(s, nb, s._size[1] // bw))
        return rows, s._col, s._vals, bh, bw
    nb = s._size[1] // bw
    cols = ember.repeat_interleave(ember.arange(nb, device=s.device),
                                   _compressed_counts(s, nb, s._size[0] // bh))
    return s._col, cols, s._vals, bh, bw


def _blocked_to_dense(s: SparseTensor, vals: Tensor) -> Tensor:
    """The dense matrix of a BSR/BSC tensor: the blocks summed into a grid of blocks."""
    rows, cols, _, bh, bw = _block_coords(s)
    m, n = s._size
    grid = vals.new_zeros((m // bh, n // bw, bh, bw))
    if vals.shape[0]:
        grid = grid.index_put((rows, cols), vals, accumulate=True)
    return grid.permute(0, 2, 1, 3).reshape(m, n)


def _blocked_to_coo(s: SparseTensor) -> SparseTensor:
    """The COO tensor of every element of every block (block by block, row-major within one;
    explicit zeros kept, as PyTorch)."""
    rows, cols, vals, bh, bw = _block_coords(s)
    nnz = vals.shape[0]
    r = (rows.reshape(-1, 1, 1) * bh + ember.arange(bh, device=s.device).reshape(1, -1, 1))
    c = (cols.reshape(-1, 1, 1) * bw + ember.arange(bw, device=s.device).reshape(1, 1, -1))
    idx = ember.stack([r.expand(nnz, bh, bw).reshape(-1), c.expand(nnz, bh, bw).reshape(-1)])
    return SparseTensor(sparse_coo, s._size, vals.reshape(-1), indices=idx,
                        coalesced=nnz == 0 or (s._layout is sparse_bsr and bh == 1))


def _to_blocked(x: Any, lay: Any, blocksize: Any, dense_dim: int | None) -> SparseTensor:
    """A dense or sparse 2-D tensor as BSR/BSC with blocks ``blocksize``: the blocks holding a
    specified element (sparse input) or a nonzero (dense input), whole."""
    name = "bsr" if lay is sparse_bsr else "bsc"
    op = f"to_sparse_{name}"
    bh, bw = _blocksize(op, blocksize)
    if dense_dim:
        raise RuntimeError(f"{op}: dense dims are not supported, got dense_dim={dense_dim}")
    if _is_sparse(x):
        if x._layout is lay and tuple(x._vals.shape[-2:]) == (bh, bw):
            return x
        if x.ndim != 2 or x.dense_dim() != 0:
            raise RuntimeError(f"{op}: only 2-D tensors without dense dims are supported, got "
                               f"size {x._size} with dense_dim {x.dense_dim()}")
    elif x.ndim != 2:
        raise RuntimeError(f"{op}: only 2-D tensors are supported, got {x.ndim}-D")
    m, n = tuple(x.shape)
    if m % bh or n % bw:
        raise RuntimeError(f"dense_to_sparse_{name}: tensor sparse size ({m},{n}) must be "
                           f"divisible by given blocksize ({bh},{bw})")
    if _is_sparse(x):
        c = x.to_sparse_coo()
        dense = c.to_dense()
        mask = ember.zeros((m // bh, n // bw), dtype=ember.bool, device=dense.device)
        if c._nnz():
            mask[ember.div(c._idx[0], bh, rounding_mode="floor"),
                 ember.div(c._idx[1], bw, rounding_mode="floor")] = True
    else:
        dense, mask = x, None
    blocks = dense.reshape(m // bh, bh, n // bw, bw).permute(0, 2, 1, 3)
    if mask is None:
        mask = (blocks != 0).any(-1).any(-1)
    if lay is sparse_bsr:
        rows, cols = ember.nonzero(mask, as_tuple=True)  # row-major: by block row, then column
        comp, plain, ncomp = rows, cols, m // bh
    else:
        cols, rows = ember.nonzero(mask.t(), as_tuple=True)  # by block column, then row
        comp, plain, ncomp = cols, rows, n // bw
    return SparseTensor(lay, (m, n), blocks[rows, cols], crow=_crow_from_rows(comp, ncomp),
                        col=plain.clone())


def _blocked_mm(s: SparseTensor, dense: Tensor) -> Tensor:
    """BSR/BSC ``s @ dense``: each block times the rows of ``dense`` under it (one ``bmm``),
    summed into its block row."""
    rows, cols, vals, bh, bw = _block_coords(s)
    m, k = s._size
    f = dense.shape[1]
    out = dense.new_zeros((m // bh, bh, f))
    if vals.shape[0]:
        picked = dense.reshape(k // bw, bw, f)[cols]
        out = out.index_add(0, rows, ember.bmm(vals, picked))
    return out.reshape(m, f)


def _blocked_rmm(dense: Tensor, s: SparseTensor) -> Tensor:
    """``dense @ s`` for a BSR/BSC ``s``: the columns of ``dense`` over each block's rows times
    the block, summed into its block column."""
    rows, cols, vals, bh, bw = _block_coords(s)
    k, n = s._size
    f = dense.shape[0]
    out = dense.new_zeros((n // bw, f, bw))
    if vals.shape[0]:
        picked = dense.reshape(f, k // bh, bh).permute(1, 0, 2)[rows]
        out = out.index_add(0, cols, ember.bmm(picked, vals))
    return out.permute(1, 0, 2).reshape(f, n)


def _dense_to_sparse_coo(self: Tensor) -> SparseTensor:
    return _dense_to_sparse(self)


# ---- products -------------------------------------------------------------------------------
def _csr_arrays(s: SparseTensor, op: str) -> tuple[Tensor, Tensor, Tensor]:
    """(crow, col, values) of a 2-D sparse matrix; COO entries sorted by row (duplicates kept,
    so the values' gradient reaches every original entry)."""
    if s.ndim != 2 or s.dense_dim() != 0:
        raise RuntimeError(f"{op}: the sparse operand must be a 2-D matrix without dense dims, "
                           f"got size {s._size} with dense_dim {s.dense_dim()}")
    if s._layout is sparse_csr:
        _check_compressed_length(s, op)
        return s._crow, s._col, s._vals
    if s._layout in (sparse_csc, *_BLOCKED):
        s = s.to_sparse_coo()
    idx, vals = s._idx, s._vals
    rows = idx[0]
    # Sorted by row unless proven (not trusting a flag given with check_invariants=False).
    if idx.shape[1] > 1 and not bool((rows[1:] >= rows[:-1]).all()):
        order = ember.argsort(rows, stable=True)
        idx, vals = idx[:, order], vals[order]
    crow = _crow_from_rows(idx[0], s._size[0])
    if crow.shape[0] != s._size[0] + 1 or (idx.shape[1] and int(idx[0].min()) < 0):
        raise RuntimeError(f"{op}: row indices outside [0, {s._size[0]}) (a tensor built with "
                           "check_invariants=False)")
    return crow, idx[1], vals


def _check_compressed_length(s: SparseTensor, op: str) -> None:
    """The product kernels take the row count from the compressed indices (and check the
    rest of them): a CSR/CSC tensor built with check_invariants=False and a crow/ccol array of
    another length would give a product with the wrong number of rows."""
    csc = s._layout is sparse_csc
    m = s._size[1] if csc else s._size[0]
    if s._crow.numel() != m + 1:
        cname = "ccol_indices" if csc else "crow_indices"
        raise RuntimeError(f"{op}: {cname} of a {s._layout} tensor of size {s._size} must have "
                           f"{m + 1} elements, got {s._crow.numel()} (a tensor built with "
                           "check_invariants=False)")


def _check_mm_operand(op: str, dense: Any, what: str) -> None:
    if not isinstance(dense, Tensor):
        raise TypeError(f"{op}: expected {what} to be a dense ember.Tensor, got "
                        f"{type(dense).__name__}")


def mm(mat1: Any, mat2: Any) -> Any:
    """Matrix product where one or both operands are sparse (COO or CSR, 2-D).

    sparse @ dense is a dense ``(M, F)`` tensor computed over CSR rows in parallel;
    dense @ sparse is dense too, and sparse @ sparse is a sparse COO tensor. Gradients reach the
    dense operand and the sparse operand's values (at its nonzero pattern).

    >>> import ember
    >>> s = ember.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> ember.sparse.mm(s, ember.eye(2)).tolist()
    [[0.0, 2.0], [3.0, 0.0]]
    """
    op = "sparse.mm"
    if _is_sparse(mat1) and _is_sparse(mat2):
        if mat1.ndim != 2 or mat2.ndim != 2 or mat1._size[1] != mat2._size[0]:
            raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied "
                               f"({mat1._size} and {mat2._size})")
        return mm(mat1, mat2.to_dense()).to_sparse()
    if _is_sparse(mat1):
        _check_mm_operand(op, mat2, "mat2")
        if mat2.ndim != 2 or mat1.ndim != 2 or mat1._size[1] != mat2.shape[0]:
            raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied "
                               f"({mat1._size} and {tuple(mat2.shape)})")
        if mat2.dtype is not mat1.dtype:
            raise RuntimeError(f"{op}: expected mat1 and mat2 to have the same dtype, but got: "
                               f"{mat1.dtype} != {mat2.dtype}")
        if mat1.layout in _BLOCKED:
            return _blocked_mm(mat1, mat2)
        if mat1.layout is sparse_csc:  # S = T^T for the CSR matrix T of the same arrays
            _check_compressed_length(mat1, op)
            return _C._sparse_csr_mm_t(mat1._crow, mat1._col, mat1._vals, mat2, mat1._size[0])
        crow, col, vals = _csr_arrays(mat1, op)
        return _C._sparse_csr_mm(crow, col, vals, mat2)
    if _is_sparse(mat2):
        _check_mm_operand(op, mat1, "mat1")
        if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2._size[0]:
            raise RuntimeError(f"{op}: mat1 and mat2 shapes cannot be multiplied "
                               f"({tuple(mat1.shape)} and {mat2._size})")
        if mat2.dtype is not mat1.dtype:
            raise RuntimeError(f"{op}: expected mat1 and mat2 to have the same dtype, but got: "
                               f"{mat1.dtype} != {mat2.dtype}")
        # D @ S = (S^T @ D^T)^T, and S^T @ X is the transposed-product kernel.
        if mat2.layout in _BLOCKED:
            return _blocked_rmm(mat1, mat2)
        if mat2.layout is sparse_csc:  # D @ T^T = (T @ D^T)^T
            _check_compressed_length(mat2, op)
            return _C._sparse_csr_mm(mat2._crow, mat2._col, mat2._vals, mat1.t()).t()
        crow, col, vals = _csr_arrays(mat2, op)
        return _C._sparse_csr_mm_t(crow, col, vals, mat1.t(), mat2._size[1]).t()
    return _DENSE["mm"](mat1, mat2)


def addmm(input: Tensor, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1,
          **kwargs: Any) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` with mat1 sparse and input, mat2 dense.

    >>> import ember
    >>> s = ember.sparse_coo_tensor([[0], [1]], [2.0], (2, 2))
    >>> ember.sparse.addmm(ember.ones(2, 2), s, ember.eye(2)).tolist()
    [[1.0, 3.0], [1.0, 1.0]]
    """
    if not (_is_sparse(mat1) or _is_sparse(mat2)):
        return _DENSE["addmm"](input, mat1, mat2, beta=beta, alpha=alpha, **kwargs)
    if kwargs:
        raise NotImplementedError(f"addmm: {sorted(kwargs)} not supported with sparse operands")
    if _is_sparse(input):
        input = input.to_dense()
    prod = mm(mat1, mat2)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return _broadcast_like(prod, input)
    return (input if beta == 1 else input * beta) + prod


def sampled_addmm(input: SparseTensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1.0,
                  alpha: float = 1.0) -> SparseTensor:
    """``beta * input + alpha * (mat1 @ mat2)`` at the nonzeros of the sparse CSR ``input`` only
    (the products at the other positions are never computed), a CSR tensor of its pattern.

    >>> import ember
    >>> s = ember.sparse_csr_tensor([0, 1, 1], [1], [1.0], (2, 2))
    >>> ember.sparse.sampled_addmm(s, ember.ones(2, 3), ember.ones(3, 2)).values().tolist()
    [4.0]
    """
    op = "sparse.sampled_addmm"
    if not _is_sparse(input) or input.layout is not sparse_csr:
        raise RuntimeError(f"{op}: expected input to be a sparse CSR tensor")
    _check_mm_operand(op, mat1, "mat1")
    _check_mm_operand(op, mat2, "mat2")
    if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0] or \
            (mat1.shape[0], mat2.shape[1]) != input._size:
        raise RuntimeError(f"{op}: mat1 {tuple(mat1.shape)} @ mat2 {tuple(mat2.shape)} must give "
                           f"input's size {input._size}")
    sampled = _C._sparse_csr_sddmm(input._crow, input._col, mat1, mat2.t())
    vals = sampled if alpha == 1 else sampled * alpha
    if beta != 0:
        vals = vals + (input._vals if beta == 1 else input._vals * beta)
    return input._with_values(vals)


def _broadcast_like(prod: Tensor, input: Tensor) -> Tensor:
    """beta = 0: input is ignored (not even its NaNs), only its shape must broadcast."""
    return prod + prod.new_zeros(ember.broadcast_shapes(tuple(input.shape), tuple(prod.shape)))


def smm(input: SparseTensor, mat: Tensor) -> SparseTensor:
    """``input @ mat`` for a sparse ``input`` and dense ``mat``, as a sparse COO tensor of the
    result's nonzero entries.

    >>> import ember
    >>> s = ember.sparse_coo_tensor([[0], [1]], [2.0], (2, 2))
    >>> ember.smm(s, ember.eye(2))._nnz()
    1
    """
    return mm(input, mat).to_sparse()


def hspmm(mat1: SparseTensor, mat2: Tensor) -> SparseTensor:
    """``mat1 @ mat2`` as a hybrid COO tensor (sparse rows, dense columns): the rows of the
    product that are not all zero.

    >>> import ember
    >>> s = ember.sparse_coo_tensor([[0], [1]], [2.0], (2, 2))
    >>> r = ember.hspmm(s, ember.ones(2, 3))
    >>> r.sparse_dim(), r.dense_dim(), r._nnz()
    (1, 1, 1)
    """
    if not _is_sparse(mat1):
        raise RuntimeError("hspmm: expected mat1 to be a sparse tensor")
    return mm(mat1, mat2).to_sparse(1)


def _sparse_mask(self: Tensor, mask: SparseTensor) -> SparseTensor:
    """``Tensor.sparse_mask(mask)``: self's values at the entries of the sparse ``mask`` (its
    pattern, coalesced).

    >>> import ember
    >>> m = ember.sparse_coo_tensor([[1], [0]], [5.0], (2, 2))
    >>> ember.tensor([[1.0, 2.0], [3.0, 4.0]]).sparse_mask(m).values().tolist()
    [3.0]
    """
    if not _is_sparse(mask):  # torch finds no sparse_mask kernel for a strided mask
        raise NotImplementedError("sparse_mask: expected mask to be a sparse tensor")
    if tuple(self.shape) != mask._size:
        raise RuntimeError(f"sparse_mask: expected mask of size {tuple(self.shape)}, got "
                           f"{mask._size}")
    m = mask.to_sparse_coo().coalesce()
    out = SparseTensor(sparse_coo, m._size, self[tuple(m._idx)], indices=m._idx, coalesced=True)
    if mask.layout in _BLOCKED:  # the mask's blocks, whole
        return _to_blocked(out, mask.layout, tuple(mask._vals.shape[-2:]), None)
    return out.to_sparse(layout=mask.layout)


def _legacy(name: str, dtype: Any) -> Any:
    def make(*args: Any, size: Any = None) -> SparseTensor:
        if len(args) >= 2 and not isinstance(args[0], int):  # (indices, values[, size])
            shape = args[2] if len(args) > 2 else size
            return sparse_coo_tensor(args[0], args[1], shape, dtype=dtype)
        shape = tuple(args[0]) if len(args) == 1 and not isinstance(args[0], int) else args
        shape = tuple(size) if size is not None else tuple(int(n) for n in shape)
        return SparseTensor(sparse_coo, shape, ember.zeros(0, dtype=dtype),
                            indices=ember.zeros((len(shape), 0), dtype=ember.int64),
                            coalesced=True)

    make.__name__ = name
    make.__doc__ = (f"The legacy constructor ``torch.sparse.{name}(indices, values, size)`` (a "
                    f"{dtype} COO tensor) or ``{name}(*size)`` (an empty one).")
    return make


FloatTensor = _legacy("FloatTensor", ember.float32)
DoubleTensor = _legacy("DoubleTensor", ember.float64)
LongTensor = _legacy("LongTensor", ember.int64)


def _is_tensor(obj: Any) -> bool:
    return isinstance(obj, (Tensor, SparseTensor))


def _matmul(input: Any, other: Any) -> Any:
    if _is_sparse(input) or _is_sparse(other):
        a = input if _is_sparse(input) else None
        if a is not None and isinstance(other, Tensor) and other.ndim == 1:
            return mm(input, other.unsqueeze(1)).squeeze(1)
        return mm(input, other)
    return _DENSE["matmul"](input, other)


# ---- reductions and softmax -----------------------------------------------------------------
def sum(input: SparseTensor, dim: Any = None, dtype: Any = None) -> Any:  # noqa: A001
    """Sum of a sparse tensor: of every element (a 0-d dense tensor), or over ``dim`` (an int
    or a tuple): sparse unless every sparse dim is summed.

    >>> import ember
    >>> s = ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    >>> ember.sparse.sum(s).item(), ember.sparse.sum(s, 1).to_dense().tolist()
    (12.0, [3.0, 9.0])
    """
    if not _is_sparse(input):
        if dim is None:
            return input.sum(dtype=dtype)
        return input.sum(dim, dtype=dtype)
    s = input.to_sparse_coo()
    vals = s._vals if dtype is None else s._vals.to(dtype)
    if dim is None:
        return vals.sum()
    dims = sorted({_wrap(d, s.ndim, "sparse.sum") for d in ((dim,) if isinstance(dim, int)
                                                           else dim)})
    sd = s.sparse_dim()
    dense_dims = [d - sd + 1 for d in dims if d >= sd]
    if dense_dims:
        vals = vals.sum(dense_dims)
    keep = [d for d in range(sd) if d not in dims]
    new_size = tuple(n for d, n in enumerate(s._size) if d not in dims)
    if not keep:
        return vals.sum(0)
    idx, vals = _coalesce(s._idx[keep], vals, tuple(s._size[d] for d in keep))
    return SparseTensor(sparse_coo, new_size, vals, indices=idx, coalesced=True)


def _softmax_impl(input: SparseTensor, dim: int, dtype: Any, log: bool) -> SparseTensor:
    op = "sparse.log_softmax" if log else "sparse.softmax"
    if not _is_sparse(input) or input.layout is not sparse_coo:
        raise RuntimeError(f"{op}: expected a sparse COO tensor")
    s = input.coalesce()
    if dtype is not None:
        s = s.to(dtype)
    d = _wrap(dim, s.ndim, op)
    sd = s.sparse_dim()
    if d >= sd:
        vals = ember.log_softmax(s._vals, d - sd + 1) if log else ember.softmax(s._vals, d - sd + 1)
        return s._with_values(vals)
    # Entries that agree on every sparse dim but d form one softmax group; absent entries are -inf.
    others = [k for k in range(sd) if k != d]
    if others:
        group = _linear(s._idx[others], tuple(s._size[k] for k in others))
        _, gid = ember.unique(group, return_inverse=True)
    else:
        gid = ember.zeros(s._nnz(), dtype=ember.int64, device=s.device)
    ngroups = int(gid.max()) + 1 if s._nnz() else 0
    v = s._vals
    expand = gid.reshape(-1, *([1] * (v.ndim - 1))).expand_as(v)
    gmax = v.new_full((ngroups, *v.shape[1:]), -math.inf).scatter_reduce(
        0, expand, v.detach(), "amax", include_self=True)
    shifted = v - gmax[gid]
    e = shifted.exp()
    denom = e.new_zeros((ngroups, *v.shape[1:])).index_add(0, gid, e)
    vals = shifted - denom.log()[gid] if log else e / denom[gid]
    return s._with_values(vals, coalesced=True)


def softmax(input: SparseTensor, dim: int, *, dtype: Any = None) -> SparseTensor:
    """Softmax over ``dim`` of the specified entries of a COO tensor (unspecified entries count
    as -inf, so they stay unspecified), as in GAT attention over a sparse adjacency.

    >>> import ember
    >>> s = ember.sparse_coo_tensor([[0, 0], [0, 2]], [1.0, 1.0], (1, 3))
    >>> ember.sparse.softmax(s, 1).to_dense().tolist()
    [[0.5, 0.0, 0.5]]
    """
    return _softmax_impl(input, dim, dtype, log=False)


def log_softmax(input: SparseTensor, dim: int, *, dtype: Any = None) -> SparseTensor:
    """Log-softmax over ``dim`` of the specified entries of a COO tensor (see :func:`softmax`).

    >>> import ember
    >>> s = ember.sparse_coo_tensor([[0, 0], [0, 2]], [1.0, 1.0], (1, 3))
    >>> round(ember.sparse.log_softmax(s, 1).values()[0].item(), 4)
    -0.6931
    """
    return _softmax_impl(input, dim, dtype, log=True)


class check_sparse_tensor_invariants:  # noqa: N801  (PyTorch's name)
    """PyTorch's switch for checking the invariants of new sparse tensors. ember checks them
    whenever a sparse tensor is built with a size (an index outside the size would otherwise
    alias another position), unless the factory gets ``check_invariants=False``; the switch is
    recorded for :meth:`is_enabled` and changes nothing else.

    >>> import ember
    >>> with ember.sparse.check_sparse_tensor_invariants():
    ...     ember.sparse.check_sparse_tensor_invariants.is_enabled()
    True
    """

    _enabled = False

    def __init__(self, enable: bool = True) -> None:
        self.state = enable
        self.saved = False

    @staticmethod
    def is_enabled() -> bool:
        return check_sparse_tensor_invariants._enabled

    @staticmethod
    def enable() -> None:
        check_sparse_tensor_invariants._enabled = True

    @staticmethod
    def disable() -> None:
        check_sparse_tensor_invariants._enabled = False

    def __enter__(self) -> check_sparse_tensor_invariants:
        self.saved = check_sparse_tensor_invariants._enabled
        check_sparse_tensor_invariants._enabled = self.state
        return self

    def __exit__(self, *exc: Any) -> None:
        check_sparse_tensor_invariants._enabled = self.saved


# ---- printing -------------------------------------------------------------------------------
def _sparse_repr(s: SparseTensor) -> str:
    from ember._printing import _add_suffixes, _grad_fn_name, _tensor_str

    prefix = "tensor("
    pad = " " * len(prefix)

    def field(name: str, t: Tensor) -> str:
        # The parts print without their dtype (the sparse tensor's own suffix names it), and
        # an empty part with its size, as torch's.
        head = name + "=tensor("
        body = _tensor_str(t.detach().cpu(), len(prefix) + len(head))
        if t.numel() == 0:
            body += f", size={tuple(t.shape)}"
        return head + body + ")"

    default = _C.get_default_dtype()
    plain = (default, _C.complex128 if default is _C.float64 else _C.complex64, _C.int64, _C.bool)
    suffixes = [f"size={s._size}", f"nnz={s._nnz()}"]
    if s.dtype not in plain:
        suffixes.append(f"dtype={s.dtype!r}")
    suffixes.append(f"layout={s._layout}")
    if s.device.type != "cpu":
        suffixes.insert(0, f"device='{s.device}'")
    if s.grad_fn is not None:
        suffixes.append(f"grad_fn=<{_grad_fn_name(s.grad_fn)}>")
    elif s.requires_grad:
        suffixes.append("requires_grad=True")
    if s._layout is sparse_coo:
        body = (prefix + field("indices", s._idx) + ",\n" + pad + field("values", s._vals) +
                ",\n" + pad + ", ".join(suffixes[:1]))
        return _add_suffixes(body, suffixes[1:], len(prefix))
    names = ("ccol_indices", "row_indices") if s._layout in _COL_MAJOR else \
        ("crow_indices", "col_indices")
    body = (prefix + field(names[0], s._crow) + ",\n" + pad + field(names[1], s._col) +
            ",\n" + pad + field("values", s._vals))
    return _add_suffixes(body, suffixes, len(prefix))


# ---- sparse gradients beside dense tensors --------------------------------------------------
# id(tensor) -> (weakref to the tensor, its sparse grad). Only tensors given a sparse grad (the
# weights of sparse embeddings) are here; the dense path checks the dict's emptiness only.
_SPARSE_GRADS: dict[int, tuple[Any, SparseTensor]] = {}
_CPP_GRAD = Tensor.grad


def _sparse_grad_of(t: Tensor) -> SparseTensor | None:
    entry = _SPARSE_GRADS.get(id(t))
    if entry is None or entry[0]() is not t:
        return None
    return entry[1]


# Tensors holding a sparse grad are moved into a subclass of their class (same name, no new
# slots) whose ``grad`` property knows about it; Tensor.grad itself stays the C++ getter, so
# reading a dense grad costs nothing extra.
_GRAD_CLASSES: dict[type, type] = {}


def _sparse_grad_class(cls: type) -> type:
    sub = _GRAD_CLASSES.get(cls)
    if sub is None:
        sub = type(cls.__name__, (cls,), {
            "__slots__": (), "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "grad": property(_grad_get, _grad_set, doc=_CPP_GRAD.__doc__),
            "_ember_dense_class": cls,
        })
        _GRAD_CLASSES[cls] = sub
    return sub


def _set_sparse_grad(t: Tensor, g: SparseTensor | None) -> None:
    key = id(t)
    if g is None:
        _SPARSE_GRADS.pop(key, None)
        dense_cls = getattr(type(t), "_ember_dense_class", None)
        if dense_cls is not None:
            t.__class__ = dense_cls
        return
    _SPARSE_GRADS[key] = (weakref.ref(t, lambda _r, k=key: _SPARSE_GRADS.pop(k, None)), g)
    if "_ember_dense_class" not in type(t).__dict__:
        t.__class__ = _sparse_grad_class(type(t))


def _sparse_sum(a: SparseTensor, b: SparseTensor) -> SparseTensor:
    """a + b of two COO gradients, uncoalesced: the values added when the index lists are equal
    (the same batch of ids again, as PyTorch's accumulation of contiguous sparse grads), else the
    entries concatenated. (PyTorch's exact nnz in other cases depends on its values' memory
    layout; the dense sum is the same.)"""
    if a._idx.shape == b._idx.shape and bool((a._idx == b._idx).all()):
        return a._with_values(a._vals + b._vals, coalesced=a._coalesced)
    return SparseTensor(sparse_coo, a._size, ember.cat([a._vals, b._vals]),
                        indices=ember.cat([a._idx, b._idx], 1))


def accumulate_sparse_grad(t: Tensor, g: SparseTensor) -> None:
    """Adds the sparse gradient ``g`` to ``t.grad``: sparse + sparse stays sparse (the entries
    concatenated, see ``_sparse_sum``); onto a dense grad it is added densely."""
    dense = _CPP_GRAD.__get__(t)
    if dense is not None:
        with ember.no_grad():
            dense.add_(g.to_dense())
        return
    old = _sparse_grad_of(t)
    _set_sparse_grad(t, g if old is None else _sparse_sum(old, g))


def _hook_name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _user_hooks(t: Tensor) -> tuple[list[Any], list[Any]]:
    pre, post = t._leaf_hook_fns()
    return ([getattr(f, "_ember_user_hook", f) for f in pre],
            [getattr(f, "_ember_user_hook", f) for f in post])


def _skip_when_sparse(t: Tensor, fn: Any, post: bool) -> Any:
    """A leaf hook aware of sparse gradients held by the running backward()/grad() call: the
    engine's empty (None) gradient, left by the Function that produced the sparse one, is not
    passed on (the hook sees the sparse gradient instead, once, in ``_deliver_frame``); when a
    dense gradient arrives too, the hook sees their dense sum, once, as PyTorch sums the parts
    before running the hooks."""
    # the leaf by id, not by a weak reference: a weakref would make the tensor refuse
    # ember.utils.swap_tensors (module conversions under the swap switch) once hooked
    tid = id(t)
    autograd = ember.autograd

    def hook(arg: Any) -> Any:
        if not autograd._sparse_seen:  # no sparse gradient was ever produced
            return fn(arg)
        from ember.autograd import _frame_stack

        st = _frame_stack()
        entry = st[-1].pending.get(tid) if st else None
        if entry is None:
            return fn(arg)
        leaf = entry[0]
        if post:
            return None if arg is leaf else fn(arg)
        if arg is None:
            return None
        st[-1].pending.pop(tid)
        arg = arg + entry[1].to_dense()
        r = fn(arg)
        return arg if r is None else r

    hook.__name__ = getattr(fn, "__name__", type(fn).__name__)
    hook._ember_user_hook = fn  # type: ignore[attr-defined]
    return hook


_CPP_REGISTER_HOOK = Tensor.register_hook
_CPP_REGISTER_POST_HOOK = Tensor.register_post_accumulate_grad_hook


def _register_hook(self: Tensor, hook: Any) -> Any:
    if self.is_leaf and callable(hook):
        hook = _skip_when_sparse(self, hook, False)
    return _CPP_REGISTER_HOOK(self, hook)


def _register_post_accumulate_grad_hook(self: Tensor, hook: Any) -> Any:
    if callable(hook):
        hook = _skip_when_sparse(self, hook, True)
    return _CPP_REGISTER_POST_HOOK(self, hook)


_register_hook.__doc__ = _CPP_REGISTER_HOOK.__doc__
_register_post_accumulate_grad_hook.__doc__ = _CPP_REGISTER_POST_HOOK.__doc__


def _run_tensor_hooks(t: Tensor, g: SparseTensor) -> SparseTensor:
    """The tensor's hooks (``register_hook``) on its sparse gradient, in order; a hook's return
    value replaces it and must be a sparse tensor of the same size and dtype (PyTorch raises
    when a hook changes the layout too)."""
    for fn in _user_hooks(t)[0]:
        r = fn(g)
        if r is None:
            continue
        if not _is_sparse(r):
            raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the type of value (was "
                               f"{g.layout} got {getattr(r, 'layout', type(r).__name__)})")
        if r._size != g._size or r.dtype is not g.dtype:
            raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the size or dtype of "
                               f"value (was {g._size} {g.dtype}, got {r._size} {r.dtype})")
        g = r.to_sparse_coo()
    return g


def _deliver_one(t: Tensor, g: SparseTensor, capture: dict[int, Any] | None,
                 position: int | None) -> None:
    g = _run_tensor_hooks(t, g)
    if capture is not None:
        capture[position] = g
        return
    accumulate_sparse_grad(t, g)
    for fn in _user_hooks(t)[1]:
        if fn(t) is not None:
            raise RuntimeError(f"post accumulate grad hook '{_hook_name(fn)}' should return None "
                               "(it may update the tensor's .grad in place)")


def _add_sparse_grad(t: Tensor, g: SparseTensor) -> None:
    """A sparse gradient for the leaf ``t`` from a backward: kept in the running backward()/
    grad() call's frame (summed per tensor, delivered once the engine is done), or delivered at
    once outside one. A frame with ``inputs`` ignores other tensors, as the engine does."""
    from ember.autograd import _frame_stack

    st = _frame_stack()
    if not st:
        _deliver_one(t, g, None, None)
        return
    frame = st[-1]
    if frame.inputs is not None and not any(x is t for x in frame.inputs):
        return
    entry = frame.pending.get(id(t))
    if entry is None:
        frame.pending[id(t)] = [t, g]
    else:
        entry[1] = _sparse_sum(entry[1], g)


def _deliver_frame(frame: Any) -> dict[int, Any]:
    """Delivers a finished backward()/grad() call's sparse gradients (hooks, then .grad and
    post-accumulate hooks, or the returned gradients by input position for grad())."""
    captured: dict[int, Any] = {}
    for t, g in frame.pending.values():
        pos = None
        if frame.capture:
            pos = next(i for i, x in enumerate(frame.inputs) if x is t)
        _deliver_one(t, g, captured if frame.capture else None, pos)
    frame.pending.clear()
    return captured


def _grad_get(self: Tensor) -> Any:
    sg = _sparse_grad_of(self)
    if sg is not None:
        dense = _CPP_GRAD.__get__(self)
        if dense is None:
            return sg
        # A dense gradient arrived too (a weight shared with a dense op): one dense sum.
        with ember.no_grad():
            dense.add_(sg.to_dense())
        _set_sparse_grad(self, None)
        return dense
    return _CPP_GRAD.__get__(self)


def _grad_set(self: Tensor, g: Any) -> None:
    if _is_sparse(g):
        if tuple(g.shape) != tuple(self.shape):
            raise RuntimeError(f"assigned grad has data of a different size ({g._size} vs "
                               f"{tuple(self.shape)})")
        want = self.grad_dtype if self.is_leaf else self.dtype
        if want is not None and g.dtype is not want:
            raise RuntimeError(f"attempting to assign a gradient with dtype '{g.dtype}' to a "
                               f"tensor with grad_dtype '{want}'. The gradient must match the "
                               "tensor's grad_dtype (defaults to the tensor's dtype).")
        _CPP_GRAD.__set__(self, None)
        _set_sparse_grad(self, g)
        return
    _set_sparse_grad(self, None)
    _CPP_GRAD.__set__(self, g)


def _base_grad_set(self: Tensor, g: Any) -> None:
    """``Tensor.grad = g`` for a tensor that holds no sparse grad: a sparse ``g`` moves it into
    the sparse-grad subclass (see ``_set_sparse_grad``); anything else goes to the C++ setter."""
    if type(g) is SparseTensor:
        _grad_set(self, g)
    else:
        _CPP_GRAD_SET(self, g)


_CPP_GRAD_SET = _CPP_GRAD.fset
_DENSE: dict[str, Any] = {}


def _install() -> None:
    ember.sparse_coo = sparse_coo
    ember.sparse_csr = sparse_csr
    ember.sparse_csc = sparse_csc
    ember.sparse_bsr = sparse_bsr
    ember.sparse_bsc = sparse_bsc
    ember.sparse_csc_tensor = sparse_csc_tensor
    ember.sparse_bsr_tensor = sparse_bsr_tensor
    ember.sparse_bsc_tensor = sparse_bsc_tensor
    ember.sparse_compressed_tensor = sparse_compressed_tensor
    Tensor.to_sparse_csc = _dense_to_sparse_csc
    Tensor.to_sparse_bsr = _dense_to_sparse_bsr
    Tensor.to_sparse_bsc = _dense_to_sparse_bsc
    ember.sparse_coo_tensor = sparse_coo_tensor
    ember.sparse_csr_tensor = sparse_csr_tensor
    Tensor.to_sparse = _dense_to_sparse
    Tensor.to_sparse_coo = _dense_to_sparse_coo
    Tensor.to_sparse_csr = _dense_to_sparse_csr
    Tensor.is_sparse_csr = property(lambda self: False)
    # The C++ getter itself (reads cost nothing more); the setter also takes a sparse tensor.
    Tensor.grad = property(_CPP_GRAD.fget, _base_grad_set, _CPP_GRAD.fdel, _CPP_GRAD.__doc__)
    # Leaf hooks see a sparse gradient (once) instead of the engine's empty one.
    Tensor.register_hook = _register_hook
    Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
    # The products accept a sparse operand; a dense call goes straight to the C++ op.
    for name in ("mm", "matmul", "addmm"):
        _DENSE[name] = getattr(ember, name)
    ember.mm = _wrap_dense(mm, _DENSE["mm"], "mm", ("input", "mat2"))
    ember.matmul = _wrap_dense(_matmul, _DENSE["matmul"], "matmul", ("input", "other"))
    ember.addmm = addmm
    ember.spmm = mm
    ember.dsmm = mm
    ember.smm = smm
    ember.hspmm = hspmm
    Tensor.sparse_mask = _sparse_mask
    _is_tensor.__doc__ = ember.is_tensor.__doc__
    ember.is_tensor = _is_tensor  # a sparse tensor is a tensor, as in PyTorch
    from ember import _serialization_objects

    _serialization_objects._DEFAULT_SAFE["ember.sparse._rebuild_sparse"] = _rebuild_sparse


def _wrap_dense(sparse_fn: Any, dense_fn: Any, name: str, names: tuple[str, str]) -> Any:
    """``dense_fn`` unless an operand (positional or by its name in ``names``) is sparse."""

    def fn(*args: Any, **kwargs: Any) -> Any:
        try:  # the dense call first: its binding refuses a SparseTensor with a TypeError
            return dense_fn(*args, **kwargs)
        except TypeError:
            if not (any(type(a) is SparseTensor for a in args) or any(
                    type(v) is SparseTensor for v in kwargs.values())):
                raise
        operands = list(args) + [kwargs.pop(k) for k in names if k in kwargs]
        if len(operands) != 2 or kwargs:
            raise NotImplementedError(f"{name}: only ({names[0]}, {names[1]}) are supported "
                                      "with sparse operands (no out=)")
        return sparse_fn(*operands)

    fn.__name__ = name
    fn.__doc__ = dense_fn.__doc__
    return fn


_install()


# ---- dense functions and Tensor methods given sparse operands --------------------------------
# ember._C gives each function below a last pybind11 overload that is tried only after every
# dense overload has failed; a call with a sparse operand then comes to ``_dispatch``, which runs
# the sparse version or raises naming the op and the layout. Dense calls never get here.
def _layout_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    for a in (*args, *kwargs.values()):
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            if _is_sparse(x):
                return x.layout
    return None


def _dense_plus_sparse(op: str, dense: Tensor, s: SparseTensor, alpha: Any,
                       inplace: bool) -> Tensor:
    """``dense + alpha * s``, the sparse entries scattered into (a copy of) the dense tensor."""
    if tuple(dense.shape) != s._size:
        raise RuntimeError(f"{op}: the dense operand of size {tuple(dense.shape)} and the sparse "
                           f"operand of size {s._size} must have the same size")
    c = s.to_sparse_coo()
    vals = c._vals if alpha == 1 else c._vals * alpha
    if inplace:
        if vals.dtype is not dense.dtype and not ember.can_cast(vals.dtype, dense.dtype):
            raise RuntimeError(f"{op}: result type {vals.dtype} can't be cast to the desired "
                               f"output type {dense.dtype}")
        return dense.index_put_(tuple(c._idx), vals.to(dense.dtype), accumulate=True)
    if vals.dtype is not dense.dtype:
        return dense + _coo_to_dense(c._idx, vals, c._size)
    return dense.index_put(tuple(c._idx), vals, accumulate=True)


def _op_add(input: Any, other: Any, *, alpha: Any = 1, out: Any = None) -> Any:
    if out is not None:
        lay = _layout_of((input, other), {})
        raise NotImplementedError(f"add: out= is not supported with a {lay} operand")
    if _is_sparse(input):
        return input.add(other, alpha=alpha)
    if isinstance(input, Tensor):
        return _dense_plus_sparse("add", input, other, alpha, inplace=False)
    return other.mul(alpha).add(input) if alpha != 1 else other.add(input)


def _op_sub(input: Any, other: Any, *, alpha: Any = 1, out: Any = None) -> Any:
    return _op_add(input, other, alpha=-alpha, out=out)


def _op_add_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    return _dense_plus_sparse("add_", self, other, alpha, inplace=True)


def _op_sub_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    return _dense_plus_sparse("sub_", self, other, -alpha, inplace=True)


def _op_mul(input: Any, other: Any, *, out: Any = None) -> Any:
    if out is not None:
        raise NotImplementedError("mul: out= is not supported with sparse operands")
    return input.mul(other) if _is_sparse(input) else other.mul(input)


def _op_div(input: Any, other: Any, *, rounding_mode: Any = None) -> Any:
    if not _is_sparse(input) or rounding_mode is not None:
        raise NotImplementedError(f"div: only a sparse tensor divided by a number or a 0-d tensor"
                                  f" is supported with a {_layout_of((input, other), {})} operand")
    return input.div(other)


def _op_sum(input: SparseTensor, dim: Any = None, keepdim: bool = False, *,
            dtype: Any = None) -> Any:
    return input.sum(dim, keepdim, dtype)


def _op_cat(tensors: Any, dim: int = 0, *, out: Any = None) -> SparseTensor:
    """Concatenation of COO tensors along a sparse dim: the indices shifted by the sizes before."""
    ts = list(tensors)
    if out is not None:
        raise NotImplementedError("cat: out= is not supported with sparse tensors")
    for i, t in enumerate(ts):
        if not _is_sparse(t):
            raise RuntimeError(f"cat: concatenating sparse tensors, but a dense tensor was found "
                               f"at position {i}")
        if t.layout is not sparse_coo:
            raise NotImplementedError(f"cat: {t.layout} tensors are not supported (only "
                                      "sparse_coo)")
    first = ts[0]
    d = _wrap(dim, first.ndim, "cat")
    sd = first.sparse_dim()
    for i, t in enumerate(ts):
        if t.sparse_dim() != sd or t.ndim != first.ndim or t.dtype is not first.dtype:
            raise RuntimeError(f"cat: tensor {i} has sparse_dim {t.sparse_dim()}, ndim {t.ndim} "
                               f"and dtype {t.dtype}; tensor 0 has {sd}, {first.ndim} and "
                               f"{first.dtype}")
        if any(a != b for k, (a, b) in enumerate(zip(t._size, first._size)) if k != d):
            raise RuntimeError(f"cat: sizes of tensors must match except in dimension {d}, got "
                               f"{t._size} and {first._size}")
    if d >= sd:
        raise NotImplementedError(f"cat: concatenating sparse tensors along the dense dim {d} "
                                  "is not supported (only along a sparse dim)")
    idx, offset = [], 0
    for t in ts:
        shifted = t._idx.clone()
        shifted[d] += offset
        idx.append(shifted)
        offset += t._size[d]
    size = first._size[:d] + (offset,) + first._size[d + 1:]
    return SparseTensor(sparse_coo, size, ember.cat([t._vals for t in ts]),
                        indices=ember.cat(idx, 1))


def _op_stack(tensors: Any, dim: int = 0, *, out: Any = None) -> SparseTensor:
    ts = list(tensors)
    for i, t in enumerate(ts):
        if not _is_sparse(t):
            raise RuntimeError(f"stack: stacking sparse tensors, but a dense tensor was found at "
                               f"position {i}")
    if not ts:
        raise RuntimeError("stack expects a non-empty TensorList")
    d = _wrap(dim, ts[0].ndim + 1, "stack")
    if any(t._size != ts[0]._size for t in ts):
        raise RuntimeError(f"stack expects each tensor to be equal size, got "
                           f"{[t._size for t in ts]}")
    return _op_cat([t.to_sparse_coo().unsqueeze(d) for t in ts], d, out=out)


def _op_mv(input: SparseTensor, vec: Tensor) -> Tensor:
    if not _is_sparse(input):
        raise NotImplementedError("mv: only a sparse matrix times a dense vector is supported")
    return mm(input, vec.unsqueeze(1)).squeeze(1)


def _like(name: str) -> Any:
    """``zeros_like``/``empty_like``/``ones_like``/``full_like``/``randn_like`` of a sparse
    tensor, as PyTorch: ``zeros_like`` is an empty tensor (nnz 0) of the same layout and size,
    ``empty_like`` too for COO; the compressed and blocked layouts keep the pattern for the
    others, with new values (COO refuses them: they would not stay sparse)."""

    def op(input: Any, *args: Any, dtype: Any = None, layout: Any = None, device: Any = None,
           requires_grad: bool = False, memory_format: Any = None, pin_memory: bool = False,
           **kwargs: Any) -> Any:
        del memory_format, pin_memory
        if not _is_sparse(input):
            raise NotImplementedError(f"{name}: expected a sparse input, got "
                                      f"{type(input).__name__}")
        if kwargs:
            raise TypeError(f"{name}: unexpected keyword arguments {sorted(kwargs)}")
        if name == "full_like" and len(args) != 1:
            raise TypeError(f"full_like: expected (input, fill_value), got {len(args)} "
                            "positional arguments after input")
        if name != "full_like" and args:
            raise TypeError(f"{name}: expected only input positionally, got {len(args)} more")
        lay = input.layout if layout is None else layout
        dt = input.dtype if dtype is None else dtype
        dev = input.device if device is None else device
        if lay is ember.strided:
            dense = _DENSE_LIKE[name](input._vals.new_empty(input._size), *args, dtype=dt,
                                      device=dev)
            return dense.requires_grad_(True) if requires_grad else dense
        keep = name != "zeros_like" and not (name == "empty_like" and lay is sparse_coo)
        if keep and (lay is not input.layout or lay is sparse_coo):
            raise NotImplementedError(f"{name}: not supported for a {input.layout} input "
                                      f"giving a {lay} result (only zeros_like and empty_like "
                                      "are; the other values would not stay sparse)")
        if keep:
            v = input._vals.detach()
            if name == "full_like":
                vals = ember.full_like(v, args[0], dtype=dt, device=dev)
            else:
                vals = _DENSE_LIKE[name](v, dtype=dt, device=dev)
            out = SparseTensor(lay, input._size, vals, crow=input._crow.to(dev),
                               col=input._col.to(dev))
        else:
            out = _empty_sparse(name, input, lay, dt, dev)
        return out.requires_grad_(True) if requires_grad else out

    op.__name__ = name
    return op


def _empty_sparse(op: str, like: SparseTensor, lay: Any, dtype: Any, device: Any) -> SparseTensor:
    """A sparse tensor of ``like``'s size with no entries, in layout ``lay``."""
    size = like._size
    i64 = {"dtype": ember.int64, "device": device}
    if lay is sparse_coo:
        sd = like.sparse_dim() if like._layout is sparse_coo else 2
        return SparseTensor(sparse_coo, size, ember.zeros((0, *size[sd:]), dtype=dtype,
                                                          device=device),
                            indices=ember.zeros((sd, 0), **i64), coalesced=True)
    if lay not in (*_COMPRESSED, *_BLOCKED) or len(size) != 2:
        raise RuntimeError(f"{op}: cannot give a {lay} result for a {like.layout} input of size "
                           f"{size}")
    block: tuple[int, ...] = ()
    if lay in _BLOCKED:
        if like._layout not in _BLOCKED:
            raise RuntimeError(f"{op}: a {lay} result needs a blocksize; the {like.layout} "
                               "input has none")
        block = tuple(like._vals.shape[-2:])  # both hold blocks in the matrix's orientation
    if lay in _ROW_MAJOR:
        ncomp = size[0] // (block[0] if block else 1)
    else:
        ncomp = size[1] // (block[1] if block else 1)
    return SparseTensor(lay, size, ember.zeros((0, *block), dtype=dtype, device=device),
                        crow=ember.zeros(ncomp + 1, **i64), col=ember.zeros(0, **i64))


def _method(name: str) -> Any:
    def op(input: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_sparse(input):
            raise NotImplementedError(f"{name}: expected the sparse tensor as the first operand, "
                                      f"got {type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)

    return op


_SPARSE_OPS: dict[str, Any] = {
    "add": _op_add, "sub": _op_sub, "subtract": _op_sub, "mul": _op_mul, "multiply": _op_mul,
    "div": _op_div, "true_divide": _op_div, "sum": _op_sum, "cat": _op_cat, "concat": _op_cat,
    "concatenate": _op_cat, "stack": _op_stack, "mv": _op_mv,
    "add_": _op_add_, "sub_": _op_sub_, "__iadd__": _op_add_, "__isub__": _op_sub_,
}
_DENSE_LIKE = {name: getattr(_C, name) for name in ("zeros_like", "empty_like", "ones_like",
                                                     "full_like", "randn_like")}
for _name in _DENSE_LIKE:
    _SPARSE_OPS[_name] = _like(_name)
for _name in ("index_select", "transpose", "t", "clone", "neg", "negative", "unsqueeze", "pow",
              "clamp", "detach", "norm", *_ZERO_PRESERVING):
    _SPARSE_OPS.setdefault(_name, _method(_name if _name != "negative" else "neg"))
# Functions whose sparse calls get a clear refusal instead of pybind11's signature list.
_REFUSED = ("exp", "log", "mean", "narrow", "equal", "bmm", "softmax", "log_softmax", "sigmoid",
            "cos", "max", "min", "argmax", "amax", "amin", "reshape", "flatten", "squeeze",
            "permute", "dot", "allclose", "isclose", "cumsum", "prod", "std", "var", "gather",
            "masked_fill", "where", "topk", "sort", "any", "all", "view_as_real", "chunk",
            "split", "maximum", "minimum", "addcmul", "addcdiv", "lerp", "einsum", "baddbmm",
            "matrix_exp", "outer", "kron", "tensordot", "flip", "roll")
_METHODS = ("add", "add_", "sub", "sub_", "mul", "__iadd__", "__isub__", "copy_")


def _dispatch(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    impl = _SPARSE_OPS.get(name)
    if impl is None:
        raise NotImplementedError(f"{name}: not supported for {_layout_of(args, kwargs)} "
                                  "tensors (convert with .to_dense() first)")
    return impl(*args, **kwargs)


def _install_dispatch() -> None:
    _C._set_sparse_dispatch(SparseTensor, _dispatch)
    for name in (*_SPARSE_OPS, *_REFUSED):
        fn = getattr(_C, name, None)
        if fn is not None and type(fn).__name__ == "builtin_function_or_method" and \
                not name.endswith("_"):
            _C._add_sparse_fallback(_C, name, False)
    for name in _METHODS:
        _C._add_sparse_fallback(Tensor, name, True)


_install_dispatch()


# ---- sparse embedding gradients -------------------------------------------------------------
class _SparseEmbedding(ember.autograd.Function):
    """embedding(weight, indices) whose backward stores a sparse COO gradient on the weight
    (the rows at the looked-up indices, one entry per index, uncoalesced, as PyTorch) instead of
    returning a dense one."""

    _node_name = "EmbeddingBackward0"  # torch's node for embedding(sparse=True)

    @staticmethod
    def forward(ctx: Any, weight: Tensor, indices: Tensor, padding_idx: int) -> Tensor:
        ctx.weight = weight
        ctx.save_for_backward(indices)
        ctx.padding_idx = padding_idx
        return _C.embedding(weight, indices, padding_idx, False, False)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, None, None]:
        (indices,) = ctx.saved_tensors
        weight = ctx.weight
        idx = indices.reshape(-1).to(ember.int64)
        vals = grad.reshape(idx.shape[0], weight.shape[1])
        if ctx.padding_idx >= 0:
            keep = idx != ctx.padding_idx
            idx, vals = idx[keep], vals[keep]
        # With create_graph the values keep their history (a Hessian through the embedding).
        g = SparseTensor(sparse_coo, tuple(weight.shape), vals.clone(), indices=idx.unsqueeze(0))
        _add_sparse_grad(weight, g)
        return None, None, None


def embedding_sparse(weight: Tensor, indices: Tensor, padding_idx: int,
                     scale_grad_by_freq: bool) -> Tensor:
    """``F.embedding(..., sparse=True)``: weight.grad becomes a sparse COO tensor.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.ones(4, 2))
    >>> embedding_sparse(w, ember.tensor([1, 3]), -1, False).sum().backward()
    >>> w.grad.layout, w.grad._nnz()
    (ember.sparse_coo, 2)
    """
    if not (weight.requires_grad and ember.is_grad_enabled()):
        return _C.embedding(weight, indices, padding_idx, scale_grad_by_freq, False)
    if scale_grad_by_freq:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse "
                           "gradients")
    if not weight.is_leaf:
        raise NotImplementedError("embedding(sparse=True): a weight that is not a leaf tensor is "
                                  "not supported (its sparse gradient has nowhere to go)")
    ember.autograd._sparse_seen = True  # backward()/grad() now gather sparse gradients
    return _SparseEmbedding.apply(weight, indices, padding_idx)


class _SparseEmbeddingBag(ember.autograd.Function):
    """embedding_bag (mode 'sum' or 'mean') whose backward stores a sparse COO gradient on the
    weight (one entry per non-padding index: its bag's gradient, times its per-sample weight or
    divided by the bag's size) and returns the per-sample weights' gradient."""

    _node_name = "EmbeddingBagBackward0"  # torch's node for embedding_bag(sparse=True)

    @staticmethod
    def forward(ctx: Any, weight: Tensor, psw: Tensor | None, indices: Tensor,
                offsets: Tensor | None, mode: str, include_last_offset: bool,
                padding_idx: int) -> Tensor:
        ctx.weight, ctx.mode, ctx.padding_idx = weight, mode, padding_idx
        ctx.has_psw = psw is not None
        flat = indices.reshape(-1).to(ember.int64)
        n = flat.shape[0]
        if indices.ndim == 2:
            b, length = indices.shape
            bag = ember.arange(b).repeat_interleave(length) if n else flat
        else:
            starts = offsets.to(ember.int64)
            if include_last_offset:
                starts = starts[:-1]
            ends = ember.cat([starts[1:], ember.tensor([n])]) if starts.numel() else starts
            bag = ember.arange(starts.shape[0]).repeat_interleave((ends - starts).clamp(min=0))
            if bag.shape[0] != n:
                raise RuntimeError(f"embedding_bag: offsets {starts.tolist()} do not cover the "
                                   f"{n} indices in order")
        ctx.save_for_backward(flat, bag, psw if psw is not None else flat.new_zeros(0))
        return _C.embedding_bag(weight, indices, offsets, mode, psw, include_last_offset,
                                padding_idx)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Any, ...]:
        flat, bag, psw = ctx.saved_tensors
        weight = ctx.weight
        keep = flat != ctx.padding_idx if ctx.padding_idx >= 0 else None
        per_index = grad[bag]  # (n, D): each index's bag gradient
        scale = None
        if ctx.has_psw:
            scale = psw.reshape(-1)
        elif ctx.mode == "mean":
            valid = keep.to(grad.dtype) if keep is not None else grad.new_ones(flat.shape[0])
            counts = grad.new_zeros(grad.shape[0]).index_add(0, bag, valid)
            scale = 1.0 / counts.clamp(min=1)[bag]
        vals = per_index * scale.unsqueeze(1) if scale is not None else per_index
        idx = flat
        if keep is not None:
            idx, vals = idx[keep], vals[keep]
        _add_sparse_grad(weight, SparseTensor(sparse_coo, tuple(weight.shape),
                                              vals.detach().clone(), indices=idx.unsqueeze(0)))
        grad_psw = None
        if ctx.has_psw and ctx.needs_input_grad[1]:
            rows = weight.detach()[flat]
            grad_psw = (per_index * rows).sum(1)
            if keep is not None:
                grad_psw = grad_psw * keep.to(grad_psw.dtype)
            grad_psw = grad_psw.reshape(psw.shape)
        return None, grad_psw, None, None, None, None, None


def embedding_bag_sparse(weight: Tensor, indices: Tensor, offsets: Tensor | None, mode: str,
                         per_sample_weights: Tensor | None, include_last_offset: bool,
                         padding_idx: int) -> Tensor:
    """``F.embedding_bag(..., sparse=True)``: weight.grad becomes a sparse COO tensor.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.ones(4, 2))
    >>> embedding_bag_sparse(w, ember.tensor([[1, 3]]), None, "sum", None, False, -1).sum().backward()
    >>> w.grad._indices().tolist()
    [[1, 3]]
    """
    if not (weight.requires_grad and ember.is_grad_enabled()):
        return _C.embedding_bag(weight, indices, offsets, mode, per_sample_weights,
                                include_last_offset, padding_idx)
    if mode == "max":
        raise RuntimeError("embedding_bag: max mode does not support sparse weights")
    if not weight.is_leaf:
        raise NotImplementedError("embedding_bag(sparse=True): a weight that is not a leaf "
                                  "tensor is not supported (its sparse gradient has nowhere "
                                  "to go)")
    ember.autograd._sparse_seen = True  # backward()/grad() now gather sparse gradients
    return _SparseEmbeddingBag.apply(weight, per_sample_weights, indices, offsets, mode,
                                     include_last_offset, padding_idx)
