"""Variable-length sequence batches: PackedSequence and pack/pad helpers.

A packed batch stores the time steps of sequences sorted by decreasing length one after the
other: ``data[offset_t : offset_t + batch_sizes[t]]`` holds step ``t`` of the
``batch_sizes[t]`` sequences that are still running.

>>> import ember
>>> from ember.nn.utils.rnn import pack_sequence, pad_packed_sequence
>>> p = pack_sequence([ember.tensor([1.0, 2.0, 3.0]), ember.tensor([4.0])])
>>> p.batch_sizes.tolist()
[2, 1, 1]
>>> pad_packed_sequence(p, batch_first=True)[0].tolist()
[[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import ember
from ember import Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpad_sequence",
    "pack_sequence",
    "unpack_sequence",
]


class PackedSequence(NamedTuple):
    """A batch of variable-length sequences packed time step after time step.

    ``data`` is (sum(batch_sizes), *), ``batch_sizes`` an int64 CPU tensor with one count per
    time step, ``sorted_indices`` the permutation that sorted the batch by decreasing length and
    ``unsorted_indices`` its inverse (both None when the batch was given already sorted).

    >>> import ember
    >>> from ember.nn.utils.rnn import pack_sequence
    >>> pack_sequence([ember.ones(2, 3), ember.ones(1, 3)]).data.shape
    ember.Size([3, 3])
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """The same packing with ``data`` converted by ``Tensor.to``."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return self._replace(data=data)

    def float(self) -> PackedSequence:
        return self.to(dtype=ember.float32)

    def double(self) -> PackedSequence:
        return self.to(dtype=ember.float64)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def _stack(tensors: list[Tensor], dim: int) -> Tensor:
    # cat of unsqueezed pieces: unlike stack it is differentiable in ember-core today
    return ember.cat([t.unsqueeze(dim) for t in tensors], dim)


def _select(t: Tensor, dim: int, indices: Tensor) -> Tensor:
    """``t.index_select(dim, indices)`` as a cat of slices (differentiable in ember-core today)."""
    idx = [int(i) for i in indices.tolist()]
    lead = (slice(None),) * dim
    return ember.cat([t[(*lead, slice(i, i + 1))] for i in idx], dim)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation of ``range(n)`` (None stays None).

    >>> import ember
    >>> invert_permutation(ember.tensor([2, 0, 1])).tolist()
    [1, 2, 0]
    """
    if permutation is None:
        return None
    perm = [int(i) for i in permutation.tolist()]
    inv = [0] * len(perm)
    for pos, i in enumerate(perm):
        inv[i] = pos
    return ember.tensor(inv, dtype=ember.int64)


def _lengths_list(lengths: Tensor | Sequence[int]) -> list[int]:
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1:
            raise ValueError(
                f"pack_padded_sequence: lengths must be a 1-D tensor, got shape {tuple(lengths.shape)}"
            )
        if lengths.device.type == "meta":  # no values to read
            raise RuntimeError("pack_padded_sequence: 'lengths' argument should be a 1D CPU "
                               "int64 tensor, but got a tensor on the meta device")
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(
    input: Tensor,
    lengths: Tensor | Sequence[int],
    batch_first: bool = False,
    enforce_sorted: bool = True,
) -> PackedSequence:
    """Packs a padded batch (T, B, *) (or (B, T, *) with ``batch_first``) of given lengths.

    With ``enforce_sorted=False`` the batch may come in any order; it is sorted by decreasing
    length and the permutation is remembered so that RNN outputs come back in the input order.

    >>> import ember
    >>> x = ember.tensor([[1.0, 2.0], [3.0, 0.0]])
    >>> pack_padded_sequence(x, [2, 1], batch_first=True).data.tolist()
    [1.0, 3.0, 2.0]
    """
    lens = _lengths_list(lengths)
    if input.ndim < 2:
        raise ValueError(
            f"pack_padded_sequence: expected input of at least 2 dimensions (T, B, *), got shape "
            f"{tuple(input.shape)}"
        )
    if batch_first:
        input = input.transpose(0, 1)
    total, batch = input.shape[0], input.shape[1]
    if len(lens) != batch:
        raise ValueError(
            f"pack_padded_sequence: got {len(lens)} lengths for a batch of {batch} sequences "
            f"(input shape {tuple(input.shape)}, batch_first={batch_first})"
        )
    if not lens:
        raise RuntimeError(f"pack_padded_sequence: cannot pack empty tensors (a batch of 0 "
                           f"sequences, input shape {tuple(input.shape)})")
    if any(n <= 0 for n in lens):
        raise RuntimeError(
            f"pack_padded_sequence: every length must be positive, got {lens}"
        )
    if max(lens) > total:
        raise RuntimeError(
            f"pack_padded_sequence: length {max(lens)} is longer than the {total} padded time "
            "steps of the input"
        )
    if enforce_sorted:
        if any(lens[i] < lens[i + 1] for i in range(len(lens) - 1)):
            raise RuntimeError(
                f"pack_padded_sequence: lengths {lens} are not sorted in decreasing order; sort "
                "the batch or pass enforce_sorted=False"
            )
        sorted_indices = None
        order = list(range(batch))
    else:
        order = sorted(range(batch), key=lambda i: -lens[i])
        sorted_indices = ember.tensor(order, dtype=ember.int64)
        input = _select(input, 1, sorted_indices)
    sorted_lens = [lens[i] for i in order]
    batch_sizes = [sum(1 for n in sorted_lens if n > t) for t in range(sorted_lens[0])]
    steps = [input[t, : batch_sizes[t]] for t in range(len(batch_sizes))]
    data = ember.cat(steps, 0)
    return PackedSequence(
        data,
        ember.tensor(batch_sizes, dtype=ember.int64),
        sorted_indices,
        invert_permutation(sorted_indices),
    )


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Inverse of :func:`pack_padded_sequence`: returns (padded batch, lengths).

    >>> import ember
    >>> p = pack_padded_sequence(ember.tensor([[1.0, 2.0], [3.0, 0.0]]), [2, 1], batch_first=True)
    >>> out, lens = pad_packed_sequence(p, batch_first=True)
    >>> out.tolist(), lens.tolist()
    ([[1.0, 2.0], [3.0, 0.0]], [2, 1])
    """
    data, batch_sizes_t = sequence.data, sequence.batch_sizes
    batch_sizes = [int(b) for b in batch_sizes_t.tolist()]
    steps = len(batch_sizes)
    batch = batch_sizes[0]
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                f"pad_packed_sequence: total_length={total_length} is shorter than the longest "
                f"sequence ({steps} steps)"
            )
        steps_out = total_length
    else:
        steps_out = steps
    feat = tuple(data.shape[1:])
    pieces = []
    offset = 0
    for b in batch_sizes:
        piece = data[offset : offset + b]
        if b < batch:
            pad = ember.full((batch - b, *feat), padding_value, dtype=data.dtype, device=data.device)
            piece = ember.cat([piece, pad], 0)
        pieces.append(piece)
        offset += b
    for _ in range(steps_out - steps):
        pieces.append(ember.full((batch, *feat), padding_value, dtype=data.dtype, device=data.device))
    out = _stack(pieces, 0)
    lengths = [sum(1 for b in batch_sizes if b > i) for i in range(batch)]
    lengths_t = ember.tensor(lengths, dtype=ember.int64)
    if sequence.unsorted_indices is not None:
        out = _select(out, 1, sequence.unsorted_indices)
        lengths_t = _select(lengths_t, 0, sequence.unsorted_indices)
    if batch_first:
        out = out.transpose(0, 1)
    return out, lengths_t


def pad_sequence(
    sequences: Tensor | Sequence[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stacks tensors (L_i, *) into one (max L, B, *) batch (B first with ``batch_first``).

    >>> import ember
    >>> pad_sequence([ember.ones(2), ember.ones(1)], batch_first=True).tolist()
    [[1.0, 1.0], [1.0, 0.0]]
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    seqs = list(sequences)
    if not seqs:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    for i, s in enumerate(seqs):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: expected a sequence of Tensors, got "
                            f"{type(s).__name__} at position {i}")
    trailing = tuple(seqs[0].shape[1:])
    for i, s in enumerate(seqs):
        if s.ndim == 0 or tuple(s.shape[1:]) != trailing:
            raise RuntimeError(
                f"pad_sequence: every sequence must have shape (L, *{trailing}); sequence {i} has "
                f"shape {tuple(s.shape)}"
            )
    max_len = max(s.shape[0] for s in seqs)
    dtype = seqs[0].dtype  # the batch takes the first sequence's dtype, as torch's
    rows = []
    for s in seqs:
        s = s.to(dtype)
        n = max_len - s.shape[0]
        if n:
            pad = ember.full((n, *trailing), padding_value, dtype=s.dtype, device=s.device)
            s = ember.cat([s, pad] if padding_side == "right" else [pad, s], 0)
        rows.append(s)
    return _stack(rows, 0 if batch_first else 1)


def unpad_sequence(
    padded_sequences: Tensor, lengths: Tensor | Sequence[int], batch_first: bool = False
) -> list[Tensor]:
    """Splits a padded batch back into a list of sequences of the given lengths.

    >>> import ember
    >>> [t.tolist() for t in unpad_sequence(ember.tensor([[1.0, 2.0], [3.0, 0.0]]), [2, 1], True)]
    [[1.0, 2.0], [3.0]]
    """
    if padded_sequences.ndim < 2:
        raise RuntimeError(f"unpad_sequence: expected a padded batch of at least 2 dims, got "
                           f"shape {tuple(padded_sequences.shape)}")
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    lens = _lengths_list(lengths)
    batch, longest = padded_sequences.shape[0], padded_sequences.shape[1]
    if len(lens) != batch or any(n < 0 or n > longest for n in lens):
        raise RuntimeError(
            f"unpad_sequence: expected {batch} lengths in [0, {longest}] for a padded batch of "
            f"shape {tuple(padded_sequences.shape)} (batch_first={batch_first}), got {lens}"
        )
    return [padded_sequences[i, :n] for i, n in enumerate(lens)]


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Packs a list of tensors (L_i, *) (sorted by decreasing length unless enforce_sorted=False).

    >>> import ember
    >>> pack_sequence([ember.ones(1), ember.ones(3)], enforce_sorted=False).batch_sizes.tolist()
    [2, 1, 1]
    """
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """Inverse of :func:`pack_sequence`: the list of sequences in their original order.

    >>> import ember
    >>> [t.tolist() for t in unpack_sequence(pack_sequence([ember.ones(2), ember.zeros(1)]))]
    [[1.0, 1.0], [0.0]]
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
