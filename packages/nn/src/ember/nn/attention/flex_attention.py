"""``torch.nn.attention.flex_attention``: attention whose scores a Python function rewrites.

``flex_attention(query, key, value, score_mod, block_mask)`` computes
``softmax(score_mod(scale * q @ k^T) masked by block_mask) @ v``. PyTorch compiles the two
functions into a fused kernel; ember runs them eagerly on its own ops, once per chunk of queries,
on *broadcast index tensors*: ``b`` of shape ``(B, 1, 1, 1)``, ``h`` ``(1, H, 1, 1)``, ``q_idx``
``(1, 1, Lc, 1)`` and ``kv_idx`` ``(1, 1, 1, S)`` (int32, on the query's device), with ``score``
the ``(B, H, Lc, S)`` score block in the working precision (float64 for float64 inputs, float32
otherwise). So any function written with tensor operations works unchanged: arithmetic on the
indices, ``torch.where``, ``&``/``|``, indexing tensors it closes over (an ALiBi slope table by
``h``, a relative-position bias table by ``q_idx - kv_idx``, document ids by ``[b, q_idx]``), and
gradients flow to such captured tensors. Python control flow on tensor values (``if q_idx > 0``,
``and``/``or``/``not`` on tensors, ``int(...)``/``.item()``, indexing a Python list by a tensor)
is not supported and raises a ``RuntimeError`` that says so: use ``torch.where``, ``&``, ``|``.
(A test on an index whose dimension has size 1, such as ``if b == 0`` with B = 1, cannot be told
from a scalar one: it runs once, for all positions.) The function may return any shape that
broadcasts to the score block; a mask_mod must return a bool tensor (or a Python bool).

A ``BlockMask`` (from ``create_block_mask``) is applied as the fused kernels apply it: a position
attends when its ``(Q_BLOCK_SIZE, KV_BLOCK_SIZE)`` block is a full block, or a partial block where
``mask_mod`` is True; blocks the mask does not list are masked. (PyTorch's eager CPU path
evaluates ``mask_mod`` alone; the two agree for every mask built by ``create_block_mask``.)
Rows with no attended key give output 0 and log-sum-exp ``-inf``.

Memory: the ``(B, H, Lc, S)`` score block is materialised (a few tensors of it: scores, mask,
weights); ``Lc`` is chosen so that a block holds about ``_CHUNK_ELEMENTS`` (2**24) scores, so
without autograd the working memory is that plus the size of the inputs and output, not
O(B * H * L * S). With autograd each chunk keeps its scores for the backward: O(B * H * L * S) in
all, as for any eager attention. ``kernel_options`` is accepted and ignored (there is no kernel
to tune). ``AuxRequest(max_scores=True)`` works on every device (PyTorch's CPU path lacks it).

>>> import ember
>>> from ember.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention
>>> def causal(b, h, q_idx, kv_idx):
...     return q_idx >= kv_idx
>>> block_mask = create_block_mask(causal, None, None, 4, 4, device="cpu", BLOCK_SIZE=2)
>>> block_mask.to_dense()[0, 0].tolist()
[[1, 0], [1, 1]]
>>> slopes = ember.tensor([0.5, 0.25])
>>> def alibi(score, b, h, q_idx, kv_idx):
...     return score - slopes[h] * (q_idx - kv_idx)
>>> q = ember.ones(1, 2, 4, 8)
>>> out, aux = flex_attention(q, q, q, score_mod=alibi, block_mask=block_mask,
...                           return_aux=AuxRequest(lse=True))
>>> out.shape, aux.lse.shape
(ember.Size([1, 2, 4, 8]), ember.Size([1, 2, 4]))
"""

from __future__ import annotations

import inspect
import itertools
import math
import warnings
from typing import Any, Callable, NamedTuple, TypedDict, Union

import ember
from ember import Tensor

__all__ = [
    "BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "FlexKernelOptions",
    "create_block_mask", "create_mask", "or_masks", "and_masks", "noop_mask",
]

_score_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]
_mask_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
# Scores (and masks) materialised at once: the query length is cut into chunks of this size.
_CHUNK_ELEMENTS = 1 << 24

DeviceLike = Union[str, int, "ember.device", None]


class FlexKernelOptions(TypedDict, total=False):
    """Tuning options of PyTorch's generated kernels; ember accepts and ignores them."""

    BACKEND: str
    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    num_stages: int
    PRESCALE_QK: bool
    ROWS_GUARANTEED_SAFE: bool
    BLOCKS_ARE_CONTIGUOUS: bool
    WRITE_DQ: bool
    FORCE_USE_FLEX_ATTENTION: bool


class AuxRequest(NamedTuple):
    """Which auxiliary outputs ``flex_attention(..., return_aux=AuxRequest(...))`` returns."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """Auxiliary outputs of flex_attention; a field not requested is None."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None


# ----------------------------------------------------------------------------------------------
# mask_mod / score_mod helpers


def noop_mask(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    """The mask_mod that masks nothing (a scalar True).

    >>> import ember
    >>> noop_mask(*(ember.tensor(0),) * 4).item()
    True
    """
    return batch.new_ones((), dtype=ember.bool)


def _sliced_mask_mod_error(batch: Tensor, head: Tensor, token_q: Tensor,
                           token_kv: Tensor) -> Tensor:
    """The mask_mod of a sliced BlockMask: the slice no longer knows its absolute indices."""
    raise RuntimeError(
        "Cannot use mask_mod from a sliced BlockMask. Slicing a BlockMask ([]) resets its "
        "mask_mod; set it from the original BlockMask's mask_mod (e.g. "
        "sliced.mask_mod = apply_offset(base_mask.mask_mod, offset)).")


def or_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """A mask_mod that attends where any of ``mask_mods`` does.

    >>> import ember
    >>> m = or_masks(lambda b, h, q, kv: q == kv, lambda b, h, q, kv: kv == 0)
    >>> create_mask(m, 1, 1, 3, 3, device="cpu")[0, 0].tolist()
    [[True, False, False], [True, True, False], [True, False, True]]
    """
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_zeros((), dtype=ember.bool)
        for mod in mask_mods:
            result = result | mod(b, h, q_idx, kv_idx)
        return result

    return or_mask


def and_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """A mask_mod that attends where all of ``mask_mods`` do.

    >>> import ember
    >>> m = and_masks(lambda b, h, q, kv: q >= kv, lambda b, h, q, kv: q - kv < 2)
    >>> create_mask(m, 1, 1, 3, 3, device="cpu")[0, 0].tolist()
    [[True, False, False], [True, True, False], [False, True, True]]
    """
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_ones((), dtype=ember.bool)
        for mod in mask_mods:
            result = result & mod(b, h, q_idx, kv_idx)
        return result

    return and_mask


def _positional_arity(fn: Callable[..., Any]) -> int:
    """The number of positional parameters without a default (4: mask_mod, 5: score_mod)."""
    code = getattr(fn, "__code__", None)
    if code is not None and inspect.isfunction(fn):
        return code.co_argcount - len(fn.__defaults__ or ())
    params = inspect.signature(fn).parameters.values()
    return sum(1 for p in params
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def _mod_kind(fn: Callable[..., Any]) -> str:
    n = _positional_arity(fn)
    if n == 5:
        return "score_mod"
    if n == 4:
        return "mask_mod"
    raise AssertionError(f"Expected 4 or 5 positional args, got {n}")


# The messages ember raises when a tensor of several elements meets Python control flow.
_CONTROL_FLOW_MESSAGES = (
    "Boolean value of Tensor", "only one element tensors", "item: a Tensor with",
    "only integer tensors of a single element",
)


def _call_mod(fn: Callable[..., Any], args: tuple, what: str) -> Any:
    """Calls a score_mod / mask_mod on broadcast index tensors, turning the errors of Python
    control flow on tensor values into one that says what is supported."""
    try:
        return fn(*args)
    except (RuntimeError, ValueError, TypeError) as e:
        if any(m in str(e) for m in _CONTROL_FLOW_MESSAGES):
            raise RuntimeError(
                f"flex_attention: the {what} uses Python control flow on a tensor value "
                f"({type(e).__name__}: {e}). ember calls {what} once with broadcast index "
                "tensors (b: (B,1,1,1), h: (1,H,1,1), q_idx: (1,1,L,1), kv_idx: (1,1,1,S)), so "
                "data-dependent `if`, `and`/`or`/`not`, int()/.item() or indexing a Python list "
                "by a tensor are not supported; write it with torch.where, &, | and tensor "
                "indexing instead.") from e
        raise


def _index_tensors(B: int, H: int, q_start: int, q_end: int, S: int,
                   device: Any) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The broadcast (b, h, q_idx, kv_idx) index tensors of a block of queries."""
    i32 = ember.int32
    return (ember.arange(B, dtype=i32, device=device).view(B, 1, 1, 1),
            ember.arange(H, dtype=i32, device=device).view(1, H, 1, 1),
            ember.arange(q_start, q_end, dtype=i32, device=device).view(1, 1, q_end - q_start, 1),
            ember.arange(S, dtype=i32, device=device).view(1, 1, 1, S))


def _as_mask(result: Any, device: Any, what: str) -> Tensor:
    """A mask_mod's result checked to be a bool tensor (a Python bool becomes one)."""
    if isinstance(result, bool):
        return ember.tensor(result, device=device)
    if not isinstance(result, Tensor):
        raise TypeError(f"flex_attention: the {what} must return a bool tensor, got "
                        f"{type(result).__name__}")
    if result.dtype != ember.bool:
        raise TypeError(f"flex_attention: the {what} must return a bool tensor, got dtype "
                        f"{result.dtype}")
    return result


def _default_device() -> Any:
    return "cuda" if ember.cuda.is_available() else "cpu"


def _eval_mask(mod_fn: Callable[..., Any], kind: str, B: int, H: int, q_start: int, q_end: int,
               S: int, device: Any) -> Tensor:
    """``mod_fn`` (mask_mod or score_mod) evaluated as a (B, H, q_end - q_start, S) bool mask."""
    idx = _index_tensors(B, H, q_start, q_end, S, device)
    shape = (B, H, q_end - q_start, S)
    if kind == "score_mod":
        out = _call_mod(mod_fn, (ember.zeros(shape, device=device), *idx), "score_mod")
        return ember.logical_not(ember.isneginf(out)).expand(shape)
    return _as_mask(_call_mod(mod_fn, idx, "mask_mod"), device, "mask_mod").expand(shape)


def create_mask(mod_fn: _score_mod_signature | _mask_mod_signature, B: int | None,
                H: int | None, Q_LEN: int, KV_LEN: int, device: DeviceLike = None) -> Tensor:
    """The dense (B, H, Q_LEN, KV_LEN) bool mask of a mask_mod (True: attend), or of a score_mod
    (True where it does not give -inf). ``B``/``H`` None mean 1. ``device`` defaults to CUDA if
    available, else the CPU.

    >>> create_mask(lambda b, h, q, kv: q >= kv, None, None, 2, 3, device="cpu").tolist()
    [[[[True, False, False], [True, True, False]]]]
    """
    device = _default_device() if device is None else device
    B = 1 if B is None else B
    H = 1 if H is None else H
    kind = _mod_kind(mod_fn)
    return _eval_mask(mod_fn, kind, B, H, 0, Q_LEN, KV_LEN, device).contiguous()


# ----------------------------------------------------------------------------------------------
# Block layouts: "ordered" (num_blocks (..., R), indices (..., R, C)) <-> dense (..., R, C)


def _ordered_to_dense(num_blocks: Tensor, indices: Tensor, num_cols: int) -> Tensor:
    """The int32 (..., R, num_cols) 0/1 block matrix listed by (num_blocks, indices): row r holds
    the columns ``indices[..., r, :num_blocks[..., r]]``."""
    entries = indices.shape[-1]
    valid = ember.arange(entries, device=indices.device) < num_blocks.unsqueeze(-1)
    # Entries past num_blocks go to one extra column, cut off below.
    cols = ember.where(valid, indices.long(), ember.tensor(num_cols, device=indices.device))
    dense = ember.zeros((*indices.shape[:-1], num_cols + 1), dtype=ember.int32,
                        device=indices.device)
    dense.scatter_(-1, cols, 1)
    return dense[..., :num_cols].contiguous()


def _dense_to_ordered(dense: Tensor) -> tuple[Tensor, Tensor]:
    """(num_blocks, indices) of a 0/1 block matrix: each row's set columns first, ascending, then
    the unset ones, ascending."""
    dense = dense.to(ember.int32)
    cols = dense.shape[-1]
    position = ember.arange(cols, device=dense.device)
    # Unique keys: set columns sort before unset ones, each group in column order.
    key = position + (1 - dense.long()) * cols
    indices = ember.argsort(key, dim=-1)
    return dense.sum(-1).to(ember.int32), indices.to(ember.int32)


def _transpose_ordered(num_blocks: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]:
    dense = _ordered_to_dense(num_blocks, indices, indices.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


class BlockMask:
    """A block-sparse attention mask: which ``(Q_BLOCK_SIZE, KV_BLOCK_SIZE)`` tiles of the score
    matrix are computed, as PyTorch stores it. ``kv_num_blocks[b, h, r]`` is how many key blocks
    query-block row ``r`` computes with ``mask_mod`` applied, listed first in
    ``kv_indices[b, h, r]``; ``full_kv_num_blocks``/``full_kv_indices`` list the blocks that are
    attended entirely (``mask_mod`` skipped). ``q_num_blocks``/``q_indices`` (and the ``full_``
    pair) are the same by key-block column. Build one with ``create_block_mask`` or
    ``BlockMask.from_kv_blocks``.

    >>> import ember
    >>> bm = BlockMask.from_kv_blocks(ember.tensor([[[1, 2]]], dtype=ember.int32),
    ...                               ember.tensor([[[[0, 1], [0, 1]]]], dtype=ember.int32),
    ...                               BLOCK_SIZE=2)
    >>> bm.shape, bm.sparsity()
    ((1, 1, 4, 4), 25.0)
    """

    seq_lengths: tuple[int, int]
    kv_num_blocks: Tensor
    kv_indices: Tensor
    full_kv_num_blocks: Tensor | None
    full_kv_indices: Tensor | None
    q_num_blocks: Tensor | None
    q_indices: Tensor | None
    full_q_num_blocks: Tensor | None
    full_q_indices: Tensor | None
    dq_write_order: Tensor | None
    dq_write_order_full: Tensor | None
    dq_kv_order: Tensor | None
    dq_kv_order_spt: bool | None
    BLOCK_SIZE: tuple[int, int]
    mask_mod: _mask_mod_signature

    _TENSOR_ATTRS = ["kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                     "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices",
                     "dq_write_order", "dq_write_order_full", "dq_kv_order"]
    _CONTEXT_ATTRS = ["seq_lengths", "BLOCK_SIZE", "mask_mod", "dq_kv_order_spt"]

    def __init__(self, seq_lengths: tuple[int, int], kv_num_blocks: Tensor, kv_indices: Tensor,
                 full_kv_num_blocks: Tensor | None, full_kv_indices: Tensor | None,
                 q_num_blocks: Tensor | None, q_indices: Tensor | None,
                 full_q_num_blocks: Tensor | None, full_q_indices: Tensor | None,
                 BLOCK_SIZE: tuple[int, int] = (_DEFAULT_SPARSE_BLOCK_SIZE,
                                                _DEFAULT_SPARSE_BLOCK_SIZE),
                 mask_mod: _mask_mod_signature = noop_mask, *,
                 dq_write_order: Tensor | None = None, dq_write_order_full: Tensor | None = None,
                 dq_kv_order: Tensor | None = None, dq_kv_order_spt: bool | None = None) -> None:
        if kv_num_blocks is None or kv_indices is None:
            raise AssertionError("kv_num_blocks and kv_indices must be provided")
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError(
                "full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError(
                "full_q_num_blocks and full_q_indices must be both provided or omitted")
        self.seq_lengths = (int(seq_lengths[0]), int(seq_lengths[1]))
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        self.dq_write_order, self.dq_write_order_full = dq_write_order, dq_write_order_full
        self.dq_kv_order, self.dq_kv_order_spt = dq_kv_order, dq_kv_order_spt
        self.BLOCK_SIZE = (int(BLOCK_SIZE[0]), int(BLOCK_SIZE[1]))
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks: Tensor, kv_indices: Tensor,
                       full_kv_num_blocks: Tensor | None = None,
                       full_kv_indices: Tensor | None = None,
                       BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                       mask_mod: _mask_mod_signature | None = None,
                       seq_lengths: tuple[int, int] | None = None,
                       compute_q_blocks: bool = True, *, dq_write_order: Tensor | None = None,
                       dq_write_order_full: Tensor | None = None,
                       dq_kv_order: Tensor | bool | None = None) -> BlockMask:
        """A BlockMask from its key-block lists; the query-block lists are derived (when
        ``compute_q_blocks``). ``seq_lengths`` defaults to the block counts times BLOCK_SIZE."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError(
                "full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_num = q_idx = full_q_num = full_q_idx = None
        if compute_q_blocks:
            q_num, q_idx = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q_num, full_q_idx = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0],
                           kv_indices.shape[-1] * BLOCK_SIZE[1])
        if dq_kv_order is not None and not isinstance(dq_kv_order, (bool, Tensor)):
            raise ValueError("dq_kv_order must be a bool, Tensor, or None")
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                   q_num, q_idx, full_q_num, full_q_idx, BLOCK_SIZE=BLOCK_SIZE,
                   mask_mod=noop_mask if mask_mod is None else mask_mod,
                   dq_write_order=dq_write_order, dq_write_order_full=dq_write_order_full,
                   dq_kv_order=dq_kv_order if isinstance(dq_kv_order, Tensor) else None,
                   dq_kv_order_spt=dq_kv_order if isinstance(dq_kv_order, bool) else None)

    def as_tuple(self, flatten: bool = True) -> tuple[Any, ...]:
        """The attributes in PyTorch's order: seq_lengths, the eight block tensors, the three
        dq-order entries, BLOCK_SIZE, mask_mod (the two pairs spread out when ``flatten``)."""
        lengths = self.seq_lengths if flatten else (self.seq_lengths,)
        block = self.BLOCK_SIZE if flatten else (self.BLOCK_SIZE,)
        return (*lengths, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks,
                self.full_kv_indices, self.q_num_blocks, self.q_indices, self.full_q_num_blocks,
                self.full_q_indices, self.dq_write_order, self.dq_write_order_full,
                self.dq_kv_order, self.dq_kv_order_spt, *block, self.mask_mod)

    @property
    def shape(self) -> tuple[int, ...]:
        """The batch dimensions of the block lists followed by (Q_LEN, KV_LEN)."""
        return tuple(self.kv_indices.shape[:-2]) + self.seq_lengths

    def numel(self) -> int:
        """The number of positions the mask covers (sparsity not counted)."""
        return math.prod(self.shape)

    def sparsity(self) -> float:
        """The percentage of the mask's positions in blocks that are not computed."""
        computed = int(self.kv_num_blocks.sum().item())
        if self.full_kv_num_blocks is not None:
            computed += int(self.full_kv_num_blocks.sum().item())
        dense_ratio = computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / self.numel()
        return 100 * (1 - dense_ratio)

    def to_dense(self) -> Tensor:
        """The int32 0/1 matrix of computed blocks, (..., Q blocks, KV blocks)."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            assert self.full_kv_indices is not None
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def _dense_pair(self) -> tuple[Tensor, Tensor | None]:
        """Bool (B, H, R, C) matrices of the partial blocks and of the full ones (or None)."""
        def four_d(t: Tensor) -> Tensor:
            while t.dim() < 4:
                t = t.unsqueeze(0)
            return t

        partial = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        full = None
        if self.full_kv_num_blocks is not None:
            assert self.full_kv_indices is not None
            full = four_d(_ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                            self.kv_indices.shape[-1]).bool())
        return four_d(partial.bool()), full

    def to_string(self, grid_size: int | tuple[int, int] = (20, 20), limit: int = 4) -> str:
        """A picture of the computed blocks of the first ``limit`` (batch, head) entries, at most
        ``grid_size`` cells a side (-1: one cell per block): "██" computed, "░░" partly, "  "
        skipped."""
        dense = self.to_dense()
        *batch_dims, rows, cols = dense.shape
        if grid_size == -1:
            max_rows, max_cols = rows, cols
        elif isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        else:
            max_rows, max_cols = grid_size
        row_step, col_step = max(1, _cdiv(rows, max_rows)), max(1, _cdiv(cols, max_cols))
        pictures = []
        for n, batch_idx in enumerate(itertools.product(*(range(d) for d in batch_dims))):
            if n == limit:
                pictures += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                             "You can also index (BlockMask[batch, head]) to choose a specific "
                             "batch or head"]
                break
            grid = dense[batch_idx] if batch_idx else dense
            lines = [f"{batch_idx}"]
            for r in range(0, rows, row_step):
                line = ""
                for c in range(0, cols, col_step):
                    fraction = grid[r:r + row_step, c:c + col_step].float().mean().item()
                    line += ("██" if fraction == 1 else "  " if fraction == 0 else "░░")
                lines.append(line)
            pictures.append("\n".join(lines) + "\n")
        return "\n".join(pictures)

    def __str__(self) -> str:
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                f"{self.to_string().strip()}\n)")

    def __repr__(self) -> str:
        def shape_of(t: Tensor | None) -> Any:
            return None if t is None else t.shape

        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return ("BlockMask(\n"
                f"    kv_num_blocks={self.kv_num_blocks.shape},\n"
                f"    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape_of(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape_of(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape_of(self.q_num_blocks)},\n"
                f"    q_indices={shape_of(self.q_indices)},\n"
                f"    full_q_num_blocks={shape_of(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape_of(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n"
                f"    mask_mod={name}\n"
                ")")

    def __getitem__(self, index: Any) -> BlockMask:
        """The block mask of some batches / heads / query-block rows (an int keeps its dimension).
        The result's mask_mod raises until set again: the slice no longer knows its offsets."""
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = self.kv_num_blocks.shape[:3]
        index = tuple(
            (slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1))
            if isinstance(i, int) else i for i, n in zip(padded, sizes))
        full_num = full_idx = None
        if self.full_kv_num_blocks is not None:
            assert self.full_kv_indices is not None
            full_num, full_idx = self.full_kv_num_blocks[index], self.full_kv_indices[index]
        return BlockMask.from_kv_blocks(
            self.kv_num_blocks[index], self.kv_indices[index], full_num, full_idx,
            BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
            seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len: int, new_kv_len: int) -> BlockMask:
        """The mask cropped to its top-left (new_q_len, new_kv_len) corner (same mask_mod)."""
        rows = _cdiv(new_q_len, self.BLOCK_SIZE[0])
        cols = _cdiv(new_kv_len, self.BLOCK_SIZE[1])

        def crop(num: Tensor, idx: Tensor) -> tuple[Tensor, Tensor]:
            dense = _ordered_to_dense(num, idx, idx.shape[-1])[..., :rows, :cols]
            return _dense_to_ordered(dense)

        num, idx = crop(self.kv_num_blocks, self.kv_indices)
        full_num = full_idx = None
        if self.full_kv_num_blocks is not None:
            assert self.full_kv_indices is not None
            full_num, full_idx = crop(self.full_kv_num_blocks, self.full_kv_indices)
        return self.from_kv_blocks(num, idx, full_num, full_idx, BLOCK_SIZE=self.BLOCK_SIZE,
                                   mask_mod=self.mask_mod, seq_lengths=(new_q_len, new_kv_len),
                                   compute_q_blocks=self.q_indices is not None)

    def to(self, device: Any) -> BlockMask:
        """A copy with every tensor moved to ``device``."""
        moved = {name: (None if getattr(self, name) is None else getattr(self, name).to(device))
                 for name in self._TENSOR_ATTRS}
        return BlockMask(self.seq_lengths, **moved, BLOCK_SIZE=self.BLOCK_SIZE,
                         mask_mod=self.mask_mod, dq_kv_order_spt=self.dq_kv_order_spt)


def create_block_mask(mask_mod: _mask_mod_signature, B: int | None, H: int | None, Q_LEN: int,
                      KV_LEN: int, device: DeviceLike = None,
                      BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile: bool = False, separate_full_blocks: bool = True,
                      compute_dq_write_order: bool = False,
                      dq_kv_order: bool = True) -> BlockMask:
    """The BlockMask of ``mask_mod(b, h, q_idx, kv_idx)`` over a (B, H, Q_LEN, KV_LEN) problem:
    blocks where it is True throughout are full blocks (partial ones with
    ``separate_full_blocks=False``), blocks where it is True somewhere are partial blocks, the
    others are skipped. ``B``/``H`` None mean 1 (the mask is shared across batches / heads).
    ``device`` defaults to CUDA if available, else the CPU. ``mask_mod`` is evaluated a few
    query blocks at a time, so no (Q_LEN, KV_LEN) mask is materialised whole. ``_compile`` is
    deprecated and ignored; ``compute_dq_write_order`` is accepted and ignored (ember has no
    block-sparse backward kernel to order).

    >>> bm = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 256, 256, device="cpu")
    >>> bm.to_dense()[0, 0].tolist(), bm.kv_num_blocks.tolist(), bm.full_kv_num_blocks.tolist()
    ([[1, 0], [1, 1]], [[[1, 1]]], [[[0, 1]]])
    """
    if _mod_kind(mask_mod) != "mask_mod":
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    if _compile:
        warnings.warn("create_block_mask: _compile is deprecated; ember builds block masks "
                      "eagerly, so it has no effect", DeprecationWarning, stacklevel=2)
    if not isinstance(dq_kv_order, bool):
        raise ValueError("dq_kv_order must be a bool when using create_block_mask")
    device = _default_device() if device is None else device
    B = 1 if B is None else B
    H = 1 if H is None else H
    QB, KB = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    for name, n in (("Q_LEN", Q_LEN), ("KV_LEN", KV_LEN), ("Q_BLOCK_SIZE", QB),
                    ("KV_BLOCK_SIZE", KB)):
        if isinstance(n, bool) or not isinstance(n, int) or n < (0 if "LEN" in name else 1):
            raise ValueError(f"create_block_mask: {name} must be a "
                             f"{'non-negative' if 'LEN' in name else 'positive'} int, got {n!r}")
    rows, cols = _cdiv(Q_LEN, QB), _cdiv(KV_LEN, KB)
    per_chunk = max(1, _CHUNK_ELEMENTS // max(1, B * H * QB * cols * KB))
    partial_rows, full_rows = [], []
    for r0 in range(0, rows, per_chunk):
        r1 = min(rows, r0 + per_chunk)
        q0, q1 = r0 * QB, min(Q_LEN, r1 * QB)
        mask = _eval_mask(mask_mod, "mask_mod", B, H, q0, q1, KV_LEN, device)
        # Padding (outside Q_LEN / KV_LEN) is masked: a last, ragged block is never full.
        padded = ember.zeros((B, H, (r1 - r0) * QB, cols * KB), dtype=ember.int32, device=device)
        padded[:, :, :q1 - q0, :KV_LEN] = mask.to(ember.int32)
        counts = padded.view(B, H, r1 - r0, QB, cols, KB).sum(dim=(3, 5))
        full = counts == QB * KB
        partial_rows.append((counts > 0) & ~full if separate_full_blocks else counts > 0)
        full_rows.append(full)
    if rows == 0:
        empty = ember.zeros((B, H, 0, cols), dtype=ember.bool, device=device)
        partial_rows, full_rows = [empty], [empty]
    num, idx = _dense_to_ordered(ember.cat(partial_rows, dim=2))
    full_num = full_idx = None
    if separate_full_blocks:
        full_num, full_idx = _dense_to_ordered(ember.cat(full_rows, dim=2))
    return BlockMask.from_kv_blocks(num, idx, full_num, full_idx, BLOCK_SIZE=(QB, KB),
                                    mask_mod=mask_mod, seq_lengths=(Q_LEN, KV_LEN))


# ----------------------------------------------------------------------------------------------
# flex_attention


def _validate(query: Any, key: Any, value: Any, block_mask: BlockMask | None,
              enable_gqa: bool) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"flex_attention: {name} must be a Tensor, got {type(t).__name__}")
    shapes = (f"query {tuple(query.shape)}, key {tuple(key.shape)}, "
              f"value {tuple(value.shape)}")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError(
            "flex_attention: query, key, and value must be 4D tensors (B, H, L, E), got "
            + shapes)
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not t.is_floating_point():
            raise ember.DtypeNotImplementedError(
                f"flex_attention: not implemented for dtype {t.dtype} ({name}); query, key and "
                "value must be floating point")
    if query.device != key.device or query.device != value.device:
        raise ValueError(
            "flex_attention: expected query, key, and value to have the same device, but got "
            f"query.device: {query.device}, key.device: {key.device}, and value.device: "
            f"{value.device} instead.")
    if query.size(-1) != key.size(-1):
        raise ValueError(
            "flex_attention: expect query and key/value to have the same embedding dimension "
            f"but got E={query.size(-1)} and E={key.size(-1)} ({shapes}).")
    if key.shape[:3] != value.shape[:3]:
        raise ValueError(
            "flex_attention: key and value must agree in batch, heads and length "
            f"(B, Hkv, S), got {shapes}.")
    Hq, Hkv = query.size(1), key.size(1)
    if not enable_gqa and Hq != Hkv:
        raise ValueError(
            "flex_attention: expect query and key/value to have the same number of heads but "
            f"got Hq={Hq} and Hkv={Hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and (Hkv == 0 or Hq % Hkv != 0):
        raise ValueError(
            "flex_attention: expect number of query heads to be a multiple of kv heads for GQA "
            f"but got Hq={Hq} and Hkv={Hkv}.")
    Bq, Bkv = query.size(0), key.size(0)
    if Bq != Bkv:
        if block_mask is None:
            raise ValueError(
                "flex_attention: expect query and key/value to have the same batch size, or "
                f"non-none block_mask, but got block_mask=None, Bq={Bq}, and Bkv={Bkv}.")
        if Bkv != 1:
            raise ValueError(
                f"flex_attention: key/value batch Bkv={Bkv} must be 1 or the query batch "
                f"Bq={Bq} ({shapes}).")
    if block_mask is None:
        return
    if not isinstance(block_mask, BlockMask):
        raise TypeError("flex_attention: block_mask must be a BlockMask, got "
                        f"{type(block_mask).__name__}")
    if block_mask.mask_mod is _sliced_mask_mod_error:
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    L, S = query.size(-2), key.size(-2)
    bq, bkv = block_mask.seq_lengths
    if L > bq or S > bkv:
        raise ValueError(
            f"flex_attention: block_mask was created for block_mask.shape={block_mask.shape} "
            f"but got q_len={L} and kv_len={S}. As the block mask was created for a smaller "
            "length than you're using it for, you likely need to create a new block mask.")
    if L != bq or S != bkv:
        raise ValueError(
            f"flex_attention: block_mask was created for block_mask.shape={block_mask.shape} "
            f"but got q_len={L} and kv_len={S}. As the block mask was created for a larger "
            "length than you're using it for, you can either 1. create a new block mask with "
            "the correct length, or 2. 'adjust' the existing block mask to the correct length "
            "by calling block_mask._adjust(q_len, kv_len). This essentially 'crops' the block "
            "mask to the upper left corner, which does not work for all mask_mods!")
    batch_dims = tuple(block_mask.kv_num_blocks.shape[:-1])
    batch_dims = (1,) * (2 - len(batch_dims)) + batch_dims
    if len(batch_dims) > 2 or batch_dims[0] not in (1, Bq) or batch_dims[1] not in (1, Hq):
        raise ValueError(
            f"flex_attention: block_mask of shape {block_mask.shape} does not broadcast to the "
            f"query's batch and heads (B={Bq}, Hq={Hq}).")
    rows, cols = block_mask.kv_indices.shape[-2:]
    QB, KB = block_mask.BLOCK_SIZE
    if rows * QB < L or cols * KB < S:
        raise ValueError(
            f"flex_attention: block_mask has {rows}x{cols} blocks of {block_mask.BLOCK_SIZE}, "
            f"too few for q_len={L} and kv_len={S}.")
    if query.device != block_mask.kv_num_blocks.device:
        raise RuntimeError(
            "flex_attention: expect q/k/v and block_mask to be on the same device but got "
            f"{query.device} and {block_mask.kv_num_blocks.device}.")


def flex_attention(query: Tensor, key: Tensor, value: Tensor,
                   score_mod: _score_mod_signature | None = None,
                   block_mask: BlockMask | None = None, scale: float | None = None,
                   enable_gqa: bool = False, return_lse: bool = False,
                   kernel_options: FlexKernelOptions | None = None, *,
                   return_aux: AuxRequest | None = None) -> Any:
    """Scaled dot-product attention with a score_mod and a block mask (PyTorch's FlexAttention).

    ``query`` (B, Hq, L, E), ``key`` (B, Hkv, S, E), ``value`` (B, Hkv, S, Ev) give the output
    (B, Hq, L, Ev) in query's dtype. The scores ``scale * q @ k^T`` (``scale`` defaults to
    1/sqrt(E)) are computed in float32 (float64 for float64 queries), rewritten by
    ``score_mod(score, b, h, q_idx, kv_idx)`` (see the module's docstring for how it is called),
    masked by ``block_mask`` and softmaxed; fully masked rows give 0. ``enable_gqa`` lets Hq be a
    multiple of Hkv (query head h reads key head h // (Hq // Hkv)); key/value may have batch 1
    when a block_mask is given. ``return_lse`` (deprecated in PyTorch) also returns the
    log-sum-exp of the scores (natural log, (B, Hq, L), -inf on fully masked rows);
    ``return_aux=AuxRequest(lse=True, max_scores=True)`` returns ``(out, AuxOutput(lse,
    max_scores))`` instead. Differentiable in query, key, value and any tensor score_mod uses.

    >>> import ember
    >>> q = ember.randn(1, 2, 3, 4)
    >>> out = flex_attention(q, q, q, score_mod=lambda s, b, h, qi, ki: s * 2)
    >>> ref = ember.nn.functional.scaled_dot_product_attention(q, q, q, scale=1.0)
    >>> bool(ember.allclose(out, ref, atol=1e-6))
    True
    """
    _validate(query, key, value, block_mask, enable_gqa)
    if return_lse and return_aux is not None:
        raise ValueError(
            "Cannot specify both return_lse and return_aux. return_lse is deprecated, please "
            "use return_aux=AuxRequest(lse=True) instead.")
    if return_lse:
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=2)
    if kernel_options is not None and not isinstance(kernel_options, dict):
        raise TypeError("flex_attention: kernel_options must be a dict or None, got "
                        f"{type(kernel_options).__name__}")
    if score_mod is not None and _mod_kind(score_mod) != "score_mod":
        raise ValueError("flex_attention: score_mod must take 5 positional arguments (score, "
                         "b, h, q_idx, kv_idx); a 4-argument mask_mod belongs in "
                         "create_block_mask")
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    want_max = return_aux is not None and return_aux.max_scores

    B, Hq, L, E = query.shape
    Bkv, Hkv, S, Ev = value.shape
    G = Hq // Hkv if Hkv else 1
    if scale is None:
        scale = 1.0 / math.sqrt(E) if E else 1.0
    work = ember.float64 if query.dtype == ember.float64 else ember.float32
    device = query.device

    if L == 0 or S == 0 or Hq == 0 or B == 0:
        # Nothing to attend (or nobody asking): zeros, lse/max -inf, still connected to the
        # inputs so that backward gives zero gradients.
        link = (query.sum() + key.sum() + value.sum()) * 0
        out = ember.zeros(B, Hq, L, Ev, dtype=query.dtype, device=device) + link.to(query.dtype)
        stats = ember.full((B, Hq, L), float("-inf"), dtype=work, device=device)
        return _finish(out, stats if want_lse else None, stats if want_max else None,
                       return_aux, return_lse)

    partial = full = None
    use_mask_mod = False
    if block_mask is not None:
        partial, full = block_mask._dense_pair()
        use_mask_mod = block_mask.mask_mod is not noop_mask
        QB, KB = block_mask.BLOCK_SIZE
        kv_block = ember.arange(S, device=device) // KB
        key_span = _key_block_spans(partial, full, KB, S)

    # (B, Hkv, G, L, E) @ (Bkv, Hkv, 1, E, S): query head h = hkv * G + g reads key head hkv.
    q5 = query.to(work).reshape(B, Hkv, G, L, E)
    kT = key.to(work).unsqueeze(2).transpose(-1, -2)
    v5 = value.to(query.dtype).unsqueeze(2)
    neg_inf = ember.tensor(float("-inf"), dtype=work, device=device)
    zero, one = ember.tensor(0.0, dtype=work, device=device), ember.tensor(1.0, dtype=work,
                                                                           device=device)

    chunk = max(1, _CHUNK_ELEMENTS // (B * Hq * S))
    outs, lses, maxes = [], [], []
    for q0 in range(0, L, chunk):
        q1 = min(L, q0 + chunk)
        n = q1 - q0
        # Keys outside the chunk's computed blocks are masked: leave them out (a causal or
        # sliding-window mask then costs about half / a window of the dense work).
        k0, k1 = (0, S) if block_mask is None else key_span(q0 // QB, (q1 - 1) // QB)
        m = k1 - k0
        scores = (q5[:, :, :, q0:q1] @ kT[..., k0:k1]).reshape(B, Hq, n, m) * scale
        idx = _index_tensors(B, Hq, q0, q1, S, device)
        if m != S:
            idx = (*idx[:3], idx[3][..., k0:k1])
        if score_mod is not None:
            modded = _call_mod(score_mod, (scores, *idx), "score_mod")
            if not isinstance(modded, Tensor):
                raise TypeError("flex_attention: score_mod must return a Tensor, got "
                                f"{type(modded).__name__}")
            if modded.dtype != work:
                modded = modded.to(work)
            try:
                scores = modded.expand(B, Hq, n, m)
            except RuntimeError as e:
                raise RuntimeError(
                    f"flex_attention: score_mod returned shape {tuple(modded.shape)}, which "
                    f"does not broadcast to the scores' {(B, Hq, n, m)}") from e
        if block_mask is not None:
            assert partial is not None
            rows = (ember.arange(q0, q1, device=device) // QB).unsqueeze(1)
            cols = kv_block[k0:k1].unsqueeze(0)
            allowed = partial[:, :, rows, cols]
            if use_mask_mod:
                mod_mask = _as_mask(_call_mod(block_mask.mask_mod, idx, "mask_mod"), device,
                                    "mask_mod")
                allowed = allowed & mod_mask
            if full is not None:
                allowed = allowed | full[:, :, rows, cols]
            scores = ember.where(allowed, scores, neg_inf)
        # Softmax that gives 0 (not NaN) on rows with no finite score, in value and gradient.
        row_max = scores.detach().amax(-1, keepdim=True)
        row_max = ember.where(ember.isneginf(row_max), zero, row_max)
        weights = ember.exp(scores - row_max)
        total = weights.sum(-1, keepdim=True)
        live = total > 0
        safe_total = ember.where(live, total, one)
        probs = weights / safe_total
        out = probs.to(query.dtype).reshape(B, Hkv, G, n, m) @ v5[..., k0:k1, :]
        outs.append(out.reshape(B, Hq, n, Ev))
        if want_lse:
            lses.append(ember.where(live, ember.log(safe_total) + row_max, neg_inf).squeeze(-1))
        if want_max:
            maxes.append(scores.amax(-1))
    return _finish(_cat_rows(outs), _cat_rows(lses) if want_lse else None,
                   _cat_rows(maxes) if want_max else None, return_aux, return_lse)


def _key_block_spans(partial: Tensor, full: Tensor | None, KB: int,
                     S: int) -> Callable[[int, int], tuple[int, int]]:
    """``span(r0, r1)``: the keys [k0, k1) that query-block rows r0..r1 compute in some batch and
    head (at least one key, so that a fully masked chunk still runs, giving zeros)."""
    used = partial if full is None else partial | full
    used = used.any(0).any(0).cpu().tolist()  # (rows, cols), on the host: one sync per call
    firsts = [row.index(True) if True in row else None for row in used]
    lasts = [len(row) - 1 - row[::-1].index(True) if True in row else None for row in used]

    def span(r0: int, r1: int) -> tuple[int, int]:
        lo = [c for c in firsts[r0:r1 + 1] if c is not None]
        hi = [c for c in lasts[r0:r1 + 1] if c is not None]
        if not lo:
            return 0, min(S, 1)
        return min(lo) * KB, min(S, (max(hi) + 1) * KB)

    return span


def _cat_rows(parts: list[Tensor]) -> Tensor:
    """The query chunks joined along the query dimension (dim 2)."""
    return parts[0] if len(parts) == 1 else ember.cat(parts, dim=2)


def _finish(out: Tensor, lse: Tensor | None, max_scores: Tensor | None,
            return_aux: AuxRequest | None, return_lse: bool) -> Any:
    if return_aux is not None:
        return out, AuxOutput(lse=lse, max_scores=max_scores)
    if return_lse:
        return out, lse
    return out
