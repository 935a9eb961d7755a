"""Building nested tensors (``nested_tensor``, ``as_nested_tensor``,
``nested_tensor_from_jagged``, ``narrow``, ``masked_select``) and padding them back into a dense
tensor (``to_padded_tensor``)."""

from __future__ import annotations

from typing import Any, Sequence

import ember
from ember._C import Tensor
from ember.nested.tensor import (
    NestedTensor,
    _components,
    _int64,
    _is_nested,
    _jagged,
    _jagged_from_components,
    _strided,
)


def _layout(layout: Any) -> Any:
    if layout is None or layout is ember.strided:
        return ember.strided
    if layout is ember.jagged:
        return ember.jagged
    raise RuntimeError(f"Specified layout {layout} is unsupported for nested tensors: use "
                       "ember.strided or ember.jagged")


def _same_dtype(ts: Sequence[Tensor]) -> None:
    if len({t.dtype for t in ts}) > 1:
        raise RuntimeError("When constructing a nested tensor, all tensors in list must have "
                           "the same dtype")


def nested_tensor(tensor_list: Sequence[Any], *, dtype: Any = None, layout: Any = None,
                  device: Any = None, requires_grad: bool = False,
                  pin_memory: bool = False) -> NestedTensor:
    """A nested tensor holding copies of ``tensor_list``'s tensors (or of tensors made from
    its nested lists of numbers): a leaf, with no autograd history.

    ``layout=ember.strided`` (the default) lets the components differ in any dimension;
    ``layout=ember.jagged`` in one dimension (the ragged one) and packs them into one buffer.

    >>> import ember
    >>> nt = ember.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=ember.jagged,
    ...                                 requires_grad=True)
    >>> nt.shape[0], nt.offsets().tolist(), nt.is_leaf
    (2, [0, 2, 3], True)
    """
    layout = _layout(layout)
    if isinstance(tensor_list, Tensor) or not isinstance(tensor_list, (list, tuple)):
        raise TypeError("nested_tensor(): expected a list or tuple of tensors, got "
                        f"{type(tensor_list).__name__}")
    ts = [t.detach() if isinstance(t, Tensor) else ember.tensor(t, dtype=dtype)
          for t in tensor_list]
    if dtype is None:
        _same_dtype(ts)
    copies = [t.to(device=device if device is not None else t.device,
                   dtype=dtype if dtype is not None else t.dtype, copy=True) for t in ts]
    if pin_memory:
        copies = [t.pin_memory() for t in copies]
    if layout is ember.jagged:
        nt = _jagged_from_components(copies)
        nt._nt_values.requires_grad_(requires_grad)
        return nt
    for t in copies:
        t.requires_grad_(requires_grad)
    return _strided(copies, dtype=dtype if dtype is not None else ember.get_default_dtype(),
                    device=ember.device(device) if device is not None else None)


def as_nested_tensor(ts: Any, dtype: Any = None, device: Any = None,
                     layout: Any = None) -> NestedTensor:
    """A nested tensor that keeps autograd history: gradients reach the tensors of ``ts``.

    ``ts`` is a list / tuple of tensors (copied), a dense tensor (its first dimension is the
    batch: for the jagged layout its memory is used directly when no conversion is asked), or
    a nested tensor (returned as it is unless dtype / device differ).

    >>> import ember
    >>> a = ember.ones(2, 3, requires_grad=True)
    >>> nt = ember.nested.as_nested_tensor([a, ember.ones(1, 3)], layout=ember.jagged)
    >>> nt.sum().backward()
    >>> a.grad.tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    if _is_nested(ts):
        if layout is not None and _layout(layout) is not ts.layout:
            raise RuntimeError("as_nested_tensor(): converting the layout of a nested tensor "
                               "is not supported")
        if (dtype is None or dtype == ts.dtype) and (device is None
                                                     or ember.device(device) == ts.device):
            return ts
        return ts.to(device=device if device is not None else ts.device,
                     dtype=dtype if dtype is not None else ts.dtype)
    layout = _layout(layout)
    if isinstance(ts, Tensor):
        if ts.dim() < 1:
            raise RuntimeError("as_nested_tensor(): a dense tensor needs a batch dimension")
        t = ts.to(device=device if device is not None else ts.device,
                  dtype=dtype if dtype is not None else ts.dtype)
        if layout is ember.strided:
            return _strided(list(t.unbind(0)), dtype=t.dtype, device=t.device)
        if t.dim() < 2:
            raise RuntimeError("as_nested_tensor(): a jagged nested tensor needs a dense "
                               "tensor of at least 2 dims (batch, sequence, ...)")
        b, n = int(t.shape[0]), int(t.shape[1])
        off = [i * n for i in range(b + 1)]
        return _jagged(t.reshape([b * n] + list(t.shape[2:])), _int64(off, t.device), None, 1)
    if not isinstance(ts, (list, tuple)) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError("as_nested_tensor(): expected a tensor, or a list or tuple of tensors")
    if dtype is None:
        _same_dtype(ts)
    comps = []
    for t in ts:
        c = t.to(device=device if device is not None else t.device,
                 dtype=dtype if dtype is not None else t.dtype)
        comps.append(c.clone() if c is t else c)
    if layout is ember.jagged:
        return _jagged_from_components(comps)
    return _strided(comps, dtype=dtype, device=ember.device(device) if device is not None
                    else None)


def nested_tensor_from_jagged(values: Tensor, offsets: Tensor | None = None,
                              lengths: Tensor | None = None, jagged_dim: int | None = None,
                              min_seqlen: int | None = None,
                              max_seqlen: int | None = None) -> NestedTensor:
    """A jagged nested tensor that is a view of ``values``, split along dimension
    ``jagged_dim - 1`` of ``values`` (default 0) by ``offsets`` (``B + 1`` positions) or
    ``lengths`` (``B``); with both, component ``i`` is ``lengths[i]`` elements from
    ``offsets[i]`` (a nested tensor with holes). Gradients reach ``values``.

    >>> import ember
    >>> nt = ember.nested.nested_tensor_from_jagged(ember.arange(5.0),
    ...                                             ember.tensor([0, 2, 5]))
    >>> [t.tolist() for t in nt.unbind()]
    [[0.0, 1.0], [2.0, 3.0, 4.0]]
    """
    if not isinstance(values, Tensor) or _is_nested(values):
        raise TypeError("nested_tensor_from_jagged(): values must be a dense tensor")
    jagged_dim = 1 if jagged_dim is None else int(jagged_dim)
    if not 1 <= jagged_dim <= values.dim():
        raise RuntimeError(f"nested_tensor_from_jagged(): jagged_dim must be in [1, "
                           f"{values.dim()}] for values of {values.dim()} dims, got {jagged_dim}")
    if offsets is None:
        if lengths is None:
            raise RuntimeError("nested_tensor_from_jagged(): offsets or lengths is required")
        lens = [int(v) for v in lengths.tolist()]
        off = [0]
        for n in lens:
            off.append(off[-1] + n)
        offsets, lengths = _int64(off, values.device), None
    for name, t in (("offsets", offsets), ("lengths", lengths)):
        if t is not None and (t.dim() != 1 or t.dtype.is_floating_point):
            raise RuntimeError(f"nested_tensor_from_jagged(): {name} must be a 1-D integer "
                               "tensor")
    offsets = offsets.to(ember.int64)
    lengths = None if lengths is None else lengths.to(ember.int64)
    if lengths is not None and lengths.shape[0] != offsets.shape[0] - 1:
        raise RuntimeError("nested_tensor_from_jagged(): lengths must have one entry fewer "
                           "than offsets")
    packed = values.movedim(jagged_dim - 1, 0)
    off = offsets.tolist()
    ends = ([a + n for a, n in zip(off[:-1], lengths.tolist())] if lengths is not None
            else off[1:])
    if any(a < 0 or b < a or b > packed.shape[0] for a, b in zip(off[:-1], ends)):
        raise RuntimeError("nested_tensor_from_jagged(): offsets / lengths reach outside the "
                           f"{packed.shape[0]} entries of the jagged dimension")
    return _jagged(packed, offsets, lengths, jagged_dim)


def _per_row(x: Any, b: int, what: str) -> list[int]:
    if isinstance(x, Tensor):
        vals = [int(v) for v in x.reshape(-1).tolist()]
        if len(vals) != b:
            raise RuntimeError(f"narrow(): {what} must have one entry per batch row ({b}), got "
                               f"{len(vals)}")
        return vals
    return [int(x)] * b


def narrow(tensor: Tensor, dim: int, start: int | Tensor, length: int | Tensor,
           layout: Any = ember.strided) -> NestedTensor:
    """A nested tensor showing ``tensor[i]``'s elements ``[start_i, start_i + length_i)`` in
    dimension ``dim`` (``start`` / ``length``: ints or one per batch row). Jagged layout
    (``dim=1`` only): a view of ``tensor`` with holes (``is_contiguous()`` False); strided
    layout: copies.

    >>> import ember
    >>> x = ember.arange(12.0).reshape(3, 4)
    >>> nt = ember.nested.narrow(x, 1, ember.tensor([0, 1, 2]), ember.tensor([2, 3, 1]),
    ...                          layout=ember.jagged)
    >>> [t.tolist() for t in nt.unbind()]
    [[0.0, 1.0], [5.0, 6.0, 7.0], [10.0]]
    """
    layout = _layout(layout)
    if not isinstance(tensor, Tensor) or _is_nested(tensor):
        raise TypeError("narrow(): expected a dense tensor")
    if tensor.dim() < 2:
        raise RuntimeError("narrow(): expected a tensor of at least 2 dims (batch, ...)")
    dim = dim + tensor.dim() if dim < 0 else dim
    b = int(tensor.shape[0])
    starts, lens = _per_row(start, b, "start"), _per_row(length, b, "length")
    if layout is ember.jagged and dim != 1:
        raise RuntimeError("narrow(): only dim=1 is supported for the jagged layout")
    if not 1 <= dim < tensor.dim():
        raise RuntimeError(f"narrow(): dim must be in [1, {tensor.dim() - 1}], got {dim}")
    n = int(tensor.shape[dim])
    for s, k in zip(starts, lens):
        if s < 0 or k < 0 or s + k > n:
            raise RuntimeError(f"narrow(): start {s} + length {k} exceeds dimension size {n}")
    if layout is ember.strided:
        return _strided([tensor[i].narrow(dim - 1, s, k).clone()
                         for i, (s, k) in enumerate(zip(starts, lens))],
                        dtype=tensor.dtype, device=tensor.device)
    off = [i * n + s for i, s in enumerate(starts)]
    off.append(off[-1] + lens[-1] if b else 0)
    values = tensor.reshape([b * n] + list(tensor.shape[2:]))
    return _jagged(values, _int64(off, tensor.device), _int64(lens, tensor.device), 1,
                   starts=off[:-1], lens=lens)


def masked_select(tensor: Tensor, mask: Tensor) -> NestedTensor:
    """A jagged nested tensor of ``tensor``'s elements where ``mask`` (broadcast to it) is
    True, one component per row of the last dimension (``B = numel / size(-1)``); unlike
    ``ember.masked_select``, which gives one flat tensor.

    >>> import ember
    >>> x = ember.arange(6.0).reshape(2, 3)
    >>> m = ember.tensor([[True, False, True], [False, False, True]])
    >>> [t.tolist() for t in ember.nested.masked_select(x, m).unbind()]
    [[0.0, 2.0], [5.0]]
    """
    if not isinstance(tensor, Tensor) or _is_nested(tensor) or not isinstance(mask, Tensor):
        raise TypeError("masked_select(): expected dense tensor and mask")
    if mask.dtype is not ember.bool:
        raise RuntimeError(f"masked_select(): expected a bool mask, got {mask.dtype}")
    if tensor.dim() < 1:
        raise RuntimeError("masked_select(): expected a tensor of at least 1 dim")
    full = ember.broadcast_to(mask, tensor.shape)
    values = ember.masked_select(tensor, full)
    rows = full.reshape(-1, int(tensor.shape[-1])) if tensor.numel() else full.reshape(0, 1)
    lens = [int(v) for v in rows.sum(-1).tolist()]
    off = [0]
    for k in lens:
        off.append(off[-1] + k)
    return _jagged(values, _int64(off, values.device), None, 1, starts=off[:-1], lens=lens)


def to_padded_tensor(input: NestedTensor, padding: float,
                     output_size: Sequence[int] | None = None) -> Tensor:
    """A dense tensor of the components stacked, each padded at the end of every dimension
    with ``padding`` up to the largest size (or to ``output_size``). Differentiable.

    >>> import ember
    >>> nt = ember.nested.nested_tensor([[1.0, 2.0], [3.0]], layout=ember.jagged)
    >>> ember.nested.to_padded_tensor(nt, 0.0).tolist()
    [[1.0, 2.0], [3.0, 0.0]]
    """
    if not _is_nested(input):
        raise TypeError("to_padded_tensor(): expected a nested tensor")
    comps = _components(input)
    if not comps:
        raise RuntimeError("to_padded_tensor(): the nested tensor has no components")
    inner = [max(int(c.shape[d]) for c in comps) for d in range(comps[0].dim())]
    if output_size is not None:
        size = [int(s) for s in output_size]
        if len(size) != len(inner) + 1:
            raise RuntimeError(f"to_padded_tensor(): output_size must have {len(inner) + 1} "
                               f"entries, got {len(size)}")
        if size[0] < len(comps) or any(s < m for s, m in zip(size[1:], inner)):
            raise RuntimeError("Value in output_size is less than NestedTensor padded size. "
                               "Truncation is not supported.")
        inner, extra = size[1:], size[0] - len(comps)
    else:
        extra = 0
    padded = []
    for c in comps:
        pad: list[int] = []
        for d in reversed(range(c.dim())):
            pad += [0, inner[d] - int(c.shape[d])]
        padded.append(ember.constant_pad_nd(c, pad, padding) if any(pad) else c)
    out = ember.stack(padded)
    if extra:
        fill = ember.full([extra] + inner, padding, dtype=out.dtype, device=out.device)
        out = ember.cat([out, fill])
    return out
