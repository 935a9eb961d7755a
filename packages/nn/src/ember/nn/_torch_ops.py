"""The nn operators PyTorch exposes at the top level (``torch.lstm_cell``, ``torch.ctc_loss``,
``torch.batch_norm_stats`` ...), with PyTorch's positional signatures: losses take ``reduction``
as an int (0 none, 1 mean, 2 sum; none by default, as PyTorch's top-level losses give, unlike
``F``'s "mean"), samplers take their modes as ints, ``torch.lstm`` takes a flat
parameter list. ``ember.<name>`` loads them from here on first use.

* losses: ``cosine_embedding_loss``, ``hinge_embedding_loss``, ``margin_ranking_loss``,
  ``triplet_margin_loss``, ``poisson_nll_loss``, ``ctc_loss``;
* recurrent: ``lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell`` and the
  multi-layer ``lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu`` (padded input or packed data with
  ``batch_sizes``);
* sampling: ``grid_sampler`` (``_2d``/``_3d``), ``affine_grid_generator``; ``conv_tbc``;
* norms: ``norm_except_dim``, ``frobenius_norm``, ``nuclear_norm``, ``native_norm``;
* SyncBatchNorm's building blocks: ``batch_norm_stats``, ``batch_norm_gather_stats``,
  ``batch_norm_gather_stats_with_counts``, ``batch_norm_elemt``, ``batch_norm_backward_reduce``,
  ``batch_norm_backward_elemt``, ``batch_norm_update_stats``;
* in-place dropouts ``dropout_``, ``feature_dropout_``, ``alpha_dropout_``,
  ``feature_alpha_dropout_`` and ``embedding_renorm_``.

>>> import ember
>>> x, h = ember.ones(1, 2), ember.zeros(1, 3)
>>> w_ih, w_hh = ember.full((3, 2), 0.5), ember.zeros(3, 3)
>>> [round(v, 4) for v in ember.rnn_tanh_cell(x, h, w_ih, w_hh)[0].tolist()]
[0.7616, 0.7616, 0.7616]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ember
from ember import Tensor
from ember.nn import functional as F

__all__ = [
    "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss",
    "triplet_margin_loss", "poisson_nll_loss", "ctc_loss",
    "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "lstm", "gru", "rnn_tanh",
    "rnn_relu", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator",
    "conv_tbc", "norm_except_dim", "frobenius_norm", "nuclear_norm", "native_norm",
    "batch_norm_stats", "batch_norm_elemt", "batch_norm_gather_stats",
    "batch_norm_gather_stats_with_counts", "batch_norm_backward_reduce",
    "batch_norm_backward_elemt", "batch_norm_update_stats",
    "dropout_", "feature_dropout_", "alpha_dropout_", "feature_alpha_dropout_",
    "embedding_renorm_",
]

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(op: str, reduction: Any) -> str:
    """PyTorch's int reduction (0 none, 1 mean, 2 sum) as F's string."""
    if isinstance(reduction, str) and reduction in _REDUCTIONS:
        return reduction
    if isinstance(reduction, bool) or not isinstance(reduction, int) or not 0 <= reduction <= 2:
        raise ValueError(
            f"{op}(): reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction!r}"
        )
    return _REDUCTIONS[reduction]


# ---- losses -------------------------------------------------------------------------------------
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: int = 0) -> Tensor:
    """``F.cosine_embedding_loss`` with ``reduction`` as an int.

    >>> import ember
    >>> a = ember.tensor([[1.0, 0.0]])
    >>> ember.cosine_embedding_loss(a, a, ember.tensor([1.0])).item()
    0.0
    """
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction("cosine_embedding_loss", reduction))


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         reduction: int = 0) -> Tensor:
    """``F.hinge_embedding_loss`` with ``reduction`` as an int.

    >>> import ember
    >>> ember.hinge_embedding_loss(ember.tensor([0.25]), ember.tensor([-1.0])).item()
    0.75
    """
    return F.hinge_embedding_loss(input, target, margin,
                                  reduction=_reduction("hinge_embedding_loss", reduction))


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 0) -> Tensor:
    """``F.margin_ranking_loss`` with ``reduction`` as an int.

    >>> import ember
    >>> ember.margin_ranking_loss(ember.tensor([1.0]), ember.tensor([2.0]), ember.tensor([1.0])).item()
    1.0
    """
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 reduction=_reduction("margin_ranking_loss", reduction))


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        reduction: int = 0) -> Tensor:
    """``F.triplet_margin_loss`` with ``reduction`` as an int.

    >>> import ember
    >>> a = ember.zeros(1, 2)
    >>> round(ember.triplet_margin_loss(a, a, a + 1).item(), 4)
    0.0
    """
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    """``F.poisson_nll_loss``; every argument is required, ``reduction`` an int.

    >>> import ember
    >>> ember.poisson_nll_loss(ember.tensor([0.0]), ember.tensor([1.0]), True, False, 1e-8, 1).item()
    1.0
    """
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction("poisson_nll_loss", reduction))


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: int = 0, zero_infinity: bool = False) -> Tensor:
    """``F.ctc_loss`` with ``reduction`` as an int (lengths as lists or tensors).

    >>> import ember
    >>> lp = ember.zeros(1, 1, 2).log_softmax(2)
    >>> round(ember.ctc_loss(lp, ember.tensor([[1]]), [1], [1]).item(), 4)
    0.6931
    """
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      reduction=_reduction("ctc_loss", reduction), zero_infinity=zero_infinity)


# ---- recurrent cells ----------------------------------------------------------------------------
def _cell_gates(op: str, input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                b_ih: Tensor | None, b_hh: Tensor | None, gates: int) -> tuple[Tensor, Tensor]:
    for name, t in (("input", input), ("hx", hx), ("w_ih", w_ih), ("w_hh", w_hh)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): {name} must be a Tensor, got {type(t).__name__}")
    if w_ih.ndim != 2 or w_hh.ndim != 2 or w_ih.shape[0] != w_hh.shape[0]:
        raise RuntimeError(
            f"{op}(): expected w_ih (gates*hidden, input) and w_hh (gates*hidden, hidden), got "
            f"{list(w_ih.shape)} and {list(w_hh.shape)}"
        )
    if w_ih.shape[0] % gates or input.shape[-1] != w_ih.shape[1]:
        raise RuntimeError(
            f"{op}(): input of {input.shape[-1]} features does not fit w_ih {list(w_ih.shape)} "
            f"({gates} gates)"
        )
    hidden = w_ih.shape[0] // gates
    if hx.shape[-1] != hidden or w_hh.shape[1] != hidden:
        raise RuntimeError(
            f"{op}(): hidden state of {hx.shape[-1]} features does not fit w_hh "
            f"{list(w_hh.shape)} (hidden size {hidden})"
        )
    return F.linear(input, w_ih, b_ih), F.linear(hx, w_hh, b_hh)


def lstm_cell(input: Tensor, hx: Sequence[Tensor], w_ih: Tensor, w_hh: Tensor,
              b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """One LSTM step: ``hx = (h, c)`` -> ``(h', c')`` with gates (i, f, g, o) from
    ``input @ w_ih.T + b_ih + h @ w_hh.T + b_hh``.

    >>> import ember
    >>> h, c = ember.lstm_cell(ember.ones(1, 2), (ember.zeros(1, 1), ember.zeros(1, 1)),
    ...                        ember.zeros(4, 2), ember.zeros(4, 1))
    >>> h.tolist(), c.tolist()
    ([[0.0]], [[0.0]])
    """
    if not isinstance(hx, (list, tuple)) or len(hx) != 2:
        raise RuntimeError("lstm_cell(): hx must be a list or tuple of two tensors (h, c)")
    h, c = hx
    gi, gh = _cell_gates("lstm_cell", input, h, w_ih, w_hh, b_ih, b_hh, 4)
    i, f, g, o = (gi + gh).chunk(4, -1)
    c_new = ember.sigmoid(f) * c + ember.sigmoid(i) * ember.tanh(g)
    return ember.sigmoid(o) * ember.tanh(c_new), c_new


def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None,
             b_hh: Tensor | None = None) -> Tensor:
    """One GRU step: gates (r, z, n), ``n = tanh(x_n + r * h_n)``, ``h' = (1 - z) * n + z * h``.

    >>> import ember
    >>> ember.gru_cell(ember.ones(1, 2), ember.ones(1, 1), ember.zeros(3, 2),
    ...                ember.zeros(3, 1)).tolist()
    [[0.5]]
    """
    gi, gh = _cell_gates("gru_cell", input, hx, w_ih, w_hh, b_ih, b_hh, 3)
    ir, iz, inn = gi.chunk(3, -1)
    hr, hz, hn = gh.chunk(3, -1)
    r = ember.sigmoid(ir + hr)
    z = ember.sigmoid(iz + hz)
    n = ember.tanh(inn + r * hn)
    return n + z * (hx - n)


def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """One Elman step ``tanh(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)``.

    >>> import ember
    >>> ember.rnn_tanh_cell(ember.zeros(1, 2), ember.zeros(1, 1), ember.ones(1, 2),
    ...                     ember.ones(1, 1)).tolist()
    [[0.0]]
    """
    gi, gh = _cell_gates("rnn_tanh_cell", input, hx, w_ih, w_hh, b_ih, b_hh, 1)
    return ember.tanh(gi + gh)


def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor,
                  b_ih: Tensor | None = None, b_hh: Tensor | None = None) -> Tensor:
    """One Elman step ``relu(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)``.

    >>> import ember
    >>> ember.rnn_relu_cell(-ember.ones(1, 2), ember.zeros(1, 1), ember.ones(1, 2),
    ...                     ember.ones(1, 1)).tolist()
    [[0.0]]
    """
    gi, gh = _cell_gates("rnn_relu_cell", input, hx, w_ih, w_hh, b_ih, b_hh, 1)
    return ember.relu(gi + gh)


# ---- multi-layer recurrences --------------------------------------------------------------------
_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _step(mode: str, gi: Tensor, state: Any, w: Sequence[Any]) -> Any:
    """One time step from the input's share of the gates ``gi`` (``x @ w_ih.T + b_ih``,
    computed for every step at once) and the state: the new state."""
    _, w_hh, _, b_hh, w_hr = w
    if mode == "lstm":
        h, c = state
        i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, -1)
        c_new = ember.sigmoid(f) * c + ember.sigmoid(i) * ember.tanh(g)
        h_new = ember.sigmoid(o) * ember.tanh(c_new)
        return (h_new if w_hr is None else F.linear(h_new, w_hr), c_new)
    gh = F.linear(state, w_hh, b_hh)
    if mode == "gru":
        ir, iz, inn = gi.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r = ember.sigmoid(ir + hr)
        z = ember.sigmoid(iz + hz)
        n = ember.tanh(inn + r * hn)
        return n + z * (state - n)
    return ember.tanh(gi + gh) if mode == "rnn_tanh" else ember.relu(gi + gh)


def _take_rows(state: Any, n: int) -> Any:
    return tuple(s[:n] for s in state) if isinstance(state, tuple) else state[:n]


def _put_rows(new: Any, old: Any, n: int) -> Any:
    """``new`` for the first n rows (the sequences still running), ``old`` for the rest."""
    if isinstance(new, tuple):
        return tuple(_put_rows(a, b, n) for a, b in zip(new, old))
    return new if n == old.shape[0] else ember.cat([new, old[n:]], 0)


def _fused_direction(mode: str, steps: Tensor | list[Tensor], state: Any, w: Sequence[Any],
                     reverse: bool, sizes: list[int]) -> tuple[Tensor, Any] | None:
    """One direction through nn.LSTM / nn.GRU's fused layer ops (``_lstm_layer`` /
    ``_gru_layer``) when they cover it (one batch size for every step, no projection, float32 /
    float64 on one device): the outputs as one (T, B, H) tensor and the final state; None
    otherwise. ``steps`` is the whole sequence (T, B, F) or its list of steps."""
    from ember.nn.modules.rnn import _fused_rnn_ok

    w_ih, w_hh, b_ih, b_hh, w_hr = w
    if mode not in ("lstm", "gru") or w_hr is not None or min(sizes) != max(sizes):
        return None
    states = list(state) if isinstance(state, tuple) else [state]
    biases = [b for b in (b_ih, b_hh) if b is not None]
    first = steps[0]
    if not _fused_rnn_ok(first, *states, w_ih, w_hh, *biases):
        return None
    xs = steps if isinstance(steps, Tensor) else ember.stack(steps, 0)
    if mode == "lstm":  # the op makes every step's input projection itself (one product)
        bias = [] if b_ih is None else [b_ih + b_hh]
        out, h, c, _ = ember._C._lstm_layer([xs, states[0], states[1], w_hh, w_ih, *bias],
                                             reverse)
        return out, (h, c)
    # GRU: b_hh stays in the step (the reset gate multiplies the hidden part, bias included)
    gates = F.linear(xs, w_ih, b_ih)
    out, h, _ = ember._C._gru_layer([gates, states[0], w_hh, *([] if b_hh is None else [b_hh])],
                                    reverse)
    return out, h


def _run_direction(mode: str, steps: Tensor | list[Tensor], state: Any, w: Sequence[Any],
                   reverse: bool) -> tuple[Tensor | list[Tensor], Any]:
    """Runs one layer's one direction over the time steps (a (T, B, F) tensor, or a list of
    steps, each step's batch the first rows of the state: packed sequences shrink over time);
    returns the outputs (a (T, B, H) tensor when the fused op ran, else a list) and the final
    state."""
    w_ih, b_ih = w[0], w[2]
    if steps[0].shape[-1] != w_ih.shape[1]:
        raise RuntimeError(
            f"{mode}(): input of {steps[0].shape[-1]} features does not fit w_ih "
            f"{list(w_ih.shape)}"
        )
    sizes = [steps.shape[1]] if isinstance(steps, Tensor) else [x.shape[0] for x in steps]
    fused = _fused_direction(mode, steps, state, w, reverse, sizes)
    if fused is not None:
        return fused
    if isinstance(steps, Tensor):
        steps = list(steps.unbind(0))
        sizes = sizes * len(steps)
    gis = F.linear(ember.cat(steps, 0), w_ih, b_ih).split(sizes, 0)  # one GEMM for all steps
    outs: list[Tensor] = [None] * len(steps)  # type: ignore[list-item]
    order = range(len(steps) - 1, -1, -1) if reverse else range(len(steps))
    for t in order:
        n = sizes[t]
        new = _step(mode, gis[t], _take_rows(state, n), w)
        outs[t] = new[0] if isinstance(new, tuple) else new
        state = _put_rows(new, state, n)
    return outs, state


def _join_directions(a: Tensor | list[Tensor], b: Tensor | list[Tensor]) -> Tensor | list[Tensor]:
    """The two directions' outputs side by side (features concatenated)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return ember.cat([a, b], -1)
    a = list(a.unbind(0)) if isinstance(a, Tensor) else a
    b = list(b.unbind(0)) if isinstance(b, Tensor) else b
    return [ember.cat([x, y], -1) for x, y in zip(a, b)]


def _layer_weights(op: str, params: Sequence[Tensor], has_biases: bool, num_layers: int,
                   dirs: int) -> list[list[Any]]:
    per = 4 if has_biases else 2
    n = num_layers * dirs
    if len(params) == n * (per + 1):
        per_all, proj = per + 1, True
    elif len(params) == n * per:
        per_all, proj = per, False
    else:
        raise RuntimeError(
            f"{op}(): expected {n * per} parameters ({num_layers} layers x {dirs} directions x "
            f"{per}{'' if op != 'lstm' else f' or {per + 1} with projections'}), got {len(params)}"
        )
    if proj and op != "lstm":
        raise RuntimeError(f"{op}(): projections (w_hr) exist only for lstm")
    out = []
    for k in range(n):
        p = list(params[k * per_all:(k + 1) * per_all])
        w_ih, w_hh = p[0], p[1]
        b_ih, b_hh = (p[2], p[3]) if has_biases else (None, None)
        out.append([w_ih, w_hh, b_ih, b_hh, p[-1] if proj else None])
    return out


def _recurrence(mode: str, steps: Tensor | list[Tensor], hx: Any, params: Sequence[Tensor],
                has_biases: bool, num_layers: int, dropout: float, train: bool,
                bidirectional: bool) -> tuple[Tensor | list[Tensor], Any]:
    """The layers over the sequence (a (T, B, F) tensor, or a list of steps for packed
    sequences): the last layer's outputs (a tensor or a list, see _run_direction) and the final
    state."""
    dirs = 2 if bidirectional else 1
    weights = _layer_weights(mode, params, has_biases, num_layers, dirs)
    if mode == "lstm":
        if not isinstance(hx, (list, tuple)) or len(hx) != 2:
            raise RuntimeError("lstm(): hx must be a list or tuple of two tensors (h0, c0)")
        h0, c0 = hx
    else:
        h0, c0 = hx, None
    if h0.ndim != 3 or h0.shape[0] != num_layers * dirs:
        raise RuntimeError(
            f"{mode}(): expected hx of shape (num_layers * num_directions = "
            f"{num_layers * dirs}, batch, hidden), got {list(h0.shape)}"
        )
    finals_h, finals_c = [], []
    for layer in range(num_layers):
        if layer and dropout and train:
            steps = F.dropout(steps, dropout, True) if isinstance(steps, Tensor) else \
                [F.dropout(s, dropout, True) for s in steps]
        dir_outs = []
        for d in range(dirs):
            k = layer * dirs + d
            state = (h0[k], c0[k]) if mode == "lstm" else h0[k]
            outs, state = _run_direction(mode, steps, state, weights[k], d == 1)
            dir_outs.append(outs)
            if mode == "lstm":
                finals_h.append(state[0])
                finals_c.append(state[1])
            else:
                finals_h.append(state)
        steps = dir_outs[0] if dirs == 1 else _join_directions(dir_outs[0], dir_outs[1])
    h_n = ember.stack(finals_h, 0)
    return steps, ((h_n, ember.stack(finals_c, 0)) if mode == "lstm" else h_n)


def _rnn_op(mode: str, args: tuple[Any, ...]) -> Any:
    """Both of PyTorch's overloads: (input, hx, params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first) and the packed (data, batch_sizes, hx, params, has_biases,
    num_layers, dropout, train, bidirectional)."""
    if len(args) != 9:
        raise TypeError(
            f"{mode}(): expected 9 arguments (input, hx, params, has_biases, num_layers, dropout, "
            f"train, bidirectional, batch_first) or (data, batch_sizes, hx, params, has_biases, "
            f"num_layers, dropout, train, bidirectional), got {len(args)}"
        )
    packed = isinstance(args[3], (list, tuple))  # the padded overload has has_biases there
    if packed:
        data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidir = args
        sizes = [int(v) for v in batch_sizes.tolist()]
        if any(b <= 0 for b in sizes) or any(a < b for a, b in zip(sizes, sizes[1:])) or \
                sum(sizes) != data.shape[0]:
            raise RuntimeError(
                f"{mode}(): batch_sizes {sizes} must be positive, non-increasing and sum to the "
                f"{data.shape[0]} rows of data"
            )
        steps, start = [], 0
        for b in sizes:
            steps.append(data[start:start + b])
            start += b
        outs, state = _recurrence(mode, steps, hx, params, has_biases, num_layers, dropout,
                                  train, bidir)
        output = outs.flatten(0, 1) if isinstance(outs, Tensor) else ember.cat(outs, 0)
    else:
        input, hx, params, has_biases, num_layers, dropout, train, bidir, batch_first = args
        if not isinstance(input, Tensor) or input.ndim != 3:
            raise RuntimeError(
                f"{mode}(): expected a 3-D input (seq, batch, feature) "
                f"(or (batch, seq, feature) with batch_first), got "
                f"{list(input.shape) if isinstance(input, Tensor) else type(input).__name__}"
            )
        x = input.transpose(0, 1) if batch_first else input
        outs, state = _recurrence(mode, x, hx, params, has_biases, num_layers, dropout, train,
                                  bidir)
        output = outs if isinstance(outs, Tensor) else ember.stack(outs, 0)
        if batch_first:
            output = output.transpose(0, 1)
    return (output, *state) if mode == "lstm" else (output, state)


def lstm(*args: Any) -> tuple[Tensor, Tensor, Tensor]:
    """A multi-layer LSTM over flat parameters: ``lstm(input, (h0, c0), params, has_biases,
    num_layers, dropout, train, bidirectional, batch_first)`` or, for packed sequences,
    ``lstm(data, batch_sizes, (h0, c0), params, has_biases, num_layers, dropout, train,
    bidirectional)``; returns ``(output, h_n, c_n)``. ``params`` holds, per layer and direction,
    ``w_ih, w_hh[, b_ih, b_hh][, w_hr]`` (as ``nn.LSTM._flat_weights``).

    >>> import ember
    >>> out, h, c = ember.lstm(ember.ones(5, 2, 3), (ember.zeros(1, 2, 4), ember.zeros(1, 2, 4)),
    ...                        [ember.zeros(16, 3), ember.zeros(16, 4)], False, 1, 0.0, False,
    ...                        False, False)
    >>> out.shape, h.shape
    (ember.Size([5, 2, 4]), ember.Size([1, 2, 4]))
    """
    return _rnn_op("lstm", args)


def gru(*args: Any) -> tuple[Tensor, Tensor]:
    """A multi-layer GRU over flat parameters (``torch.gru``'s two overloads, see :func:`lstm`;
    ``hx`` is one tensor); returns ``(output, h_n)``.

    >>> import ember
    >>> out, h = ember.gru(ember.ones(5, 2, 3), ember.zeros(1, 2, 4),
    ...                    [ember.zeros(12, 3), ember.zeros(12, 4)], False, 1, 0.0, False,
    ...                    False, False)
    >>> out.shape
    ember.Size([5, 2, 4])
    """
    return _rnn_op("gru", args)


def rnn_tanh(*args: Any) -> tuple[Tensor, Tensor]:
    """A multi-layer tanh Elman RNN over flat parameters (``torch.rnn_tanh``, see :func:`gru`).

    >>> import ember
    >>> out, h = ember.rnn_tanh(ember.ones(5, 2, 3), ember.zeros(1, 2, 4),
    ...                         [ember.zeros(4, 3), ember.zeros(4, 4)], False, 1, 0.0, False,
    ...                         False, False)
    >>> h.shape
    ember.Size([1, 2, 4])
    """
    return _rnn_op("rnn_tanh", args)


def rnn_relu(*args: Any) -> tuple[Tensor, Tensor]:
    """A multi-layer ReLU Elman RNN over flat parameters (``torch.rnn_relu``, see :func:`gru`).

    >>> import ember
    >>> out, h = ember.rnn_relu(ember.ones(5, 2, 3), ember.zeros(1, 2, 4),
    ...                         [ember.zeros(4, 3), ember.zeros(4, 4)], False, 1, 0.0, False,
    ...                         False, False)
    >>> float(out.sum())
    0.0
    """
    return _rnn_op("rnn_relu", args)


# ---- sampling and convolution -------------------------------------------------------------------
_INTERP = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def _modes(interpolation_mode: Any, padding_mode: Any) -> tuple[str, str]:
    for name, v, table in (("interpolation_mode", interpolation_mode, _INTERP),
                           ("padding_mode", padding_mode, _PADDING)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < len(table):
            choices = ", ".join(f"{i} ({m})" for i, m in enumerate(table))
            raise ValueError(f"grid_sampler(): {name} must be one of {choices}, got {v!r}")
    return _INTERP[interpolation_mode], _PADDING[padding_mode]


def grid_sampler(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> Tensor:
    """``F.grid_sample`` with the modes as ints: interpolation 0 bilinear, 1 nearest,
    2 bicubic (4-D input only); padding 0 zeros, 1 border, 2 reflection. 5-D input
    (N, C, D, H, W) with a grid (N, D_out, H_out, W_out, 3) is sampled trilinearly (or nearest).

    >>> import ember
    >>> img = ember.arange(4.0).reshape(1, 1, 2, 2)
    >>> ember.grid_sampler(img, ember.zeros(1, 1, 1, 2), 0, 0, True).item()
    1.5
    """
    mode, padding = _modes(interpolation_mode, padding_mode)
    if isinstance(input, Tensor) and input.ndim == 5:
        if mode == "bicubic":
            raise ValueError("grid_sampler(): bicubic interpolation needs 4-D input")
        if not isinstance(grid, Tensor) or grid.ndim != 5 or grid.shape[-1] != 3 or \
                grid.shape[0] != input.shape[0]:
            raise RuntimeError(
                f"grid_sampler(): 5-D input {list(input.shape)} needs a grid (N, D_out, H_out, "
                f"W_out, 3) with the same N, got "
                f"{list(grid.shape) if isinstance(grid, Tensor) else type(grid).__name__}"
            )
    elif mode == "bicubic" and (not isinstance(input, Tensor) or input.ndim != 4 or
                                not isinstance(grid, Tensor) or grid.ndim != 4 or
                                grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]):
        raise RuntimeError(
            "grid_sampler(): bicubic needs 4-D input (N, C, H, W) and a grid (N, H_out, W_out, 2) "
            "with the same N"
        )
    # one implementation (ember.nn._sampling) for the int-mode ops and F.grid_sample
    return F.grid_sample(input, grid, mode, padding, align_corners)


def grid_sampler_2d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """:func:`grid_sampler` for 4-D input (N, C, H, W).

    >>> import ember
    >>> ember.grid_sampler_2d(ember.ones(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), 1, 0, False).item()
    1.0
    """
    if not isinstance(input, Tensor) or input.ndim != 4:
        raise RuntimeError("grid_sampler_2d(): expected 4-D input (N, C, H, W)")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """:func:`grid_sampler` for 5-D input (N, C, D, H, W).

    >>> import ember
    >>> ember.grid_sampler_3d(ember.ones(1, 1, 2, 2, 2), ember.zeros(1, 1, 1, 1, 3), 0, 0,
    ...                       False).item()
    1.0
    """
    if not isinstance(input, Tensor) or input.ndim != 5:
        raise RuntimeError("grid_sampler_3d(): expected 5-D input (N, C, D, H, W)")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def affine_grid_generator(theta: Tensor, size: Sequence[int], align_corners: bool) -> Tensor:
    """``F.affine_grid(theta, size, align_corners)`` (``align_corners`` required); a 5-D
    ``size`` (N, C, D, H, W) with ``theta`` (N, 3, 4) gives the (N, D, H, W, 3) grid.

    >>> import ember
    >>> theta = ember.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    >>> ember.affine_grid_generator(theta, [1, 1, 2, 2], True)[0, 0].tolist()
    [[-1.0, -1.0], [1.0, -1.0]]
    """
    size = list(size)
    if len(size) != 5:
        return F.affine_grid(theta, size, align_corners)
    from ember.nn._sampling import _linspace_coords

    n, _, d, h, w = size
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (3, 4) or theta.shape[0] != n:
        raise ValueError(
            f"affine_grid_generator(): expected a batch of 3-D affine matrices of shape Nx3x4 for "
            f"size {size}, got {list(theta.shape)}"
        )
    if min(size) <= 0:
        raise ValueError(f"affine_grid_generator(): expected a positive output size, got {size}")
    xs = _linspace_coords(w, align_corners, theta).view(1, 1, w).expand(d, h, w)
    ys = _linspace_coords(h, align_corners, theta).view(1, h, 1).expand(d, h, w)
    zs = _linspace_coords(d, align_corners, theta).view(d, 1, 1).expand(d, h, w)
    base = ember.stack([xs, ys, zs, ember.ones(d, h, w, dtype=theta.dtype)], -1)
    return (base.reshape(1, d * h * w, 4) @ theta.transpose(1, 2)).reshape(n, d, h, w, 3)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """A 1-D convolution over time-batch-channel input: ``input`` (T, B, C_in), ``weight``
    (K, C_in, C_out), ``bias`` (C_out); zero padding ``pad`` at both ends of time; returns
    (T + 2 * pad - K + 1, B, C_out).

    >>> import ember
    >>> ember.conv_tbc(ember.ones(4, 1, 1), ember.ones(2, 1, 1), ember.zeros(1)).flatten().tolist()
    [2.0, 2.0, 2.0]
    """
    for name, t in (("input", input), ("weight", weight), ("bias", bias)):
        if not isinstance(t, Tensor):
            raise TypeError(f"conv_tbc(): {name} must be a Tensor, got {type(t).__name__}")
    if input.ndim != 3 or weight.ndim != 3 or bias.ndim != 1:
        raise RuntimeError(
            f"conv_tbc(): expected 3-D input (T, B, C_in), 3-D weight (K, C_in, C_out) and 1-D "
            f"bias, got {list(input.shape)}, {list(weight.shape)}, {list(bias.shape)}"
        )
    if input.shape[2] != weight.shape[1] or bias.shape[0] != weight.shape[2]:
        raise RuntimeError(
            f"conv_tbc(): input channels {input.shape[2]} / bias {bias.shape[0]} do not match "
            f"weight (K, C_in, C_out) = {list(weight.shape)}"
        )
    out = F.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


# ---- norms --------------------------------------------------------------------------------------
def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The ``pow``-norm over every dim but ``dim``, shaped to broadcast against ``v`` (size 1
    except at ``dim``); ``dim=-1`` is the norm of the whole tensor (weight norm's helper).

    >>> import ember
    >>> ember.norm_except_dim(ember.ones(2, 4), 2, 0).tolist()
    [[2.0], [2.0]]
    """
    if dim == -1:
        return v.norm(pow)
    d = dim + v.ndim if dim < 0 else dim
    if not 0 <= d < v.ndim:
        raise IndexError(f"norm_except_dim(): dim {dim} out of range for {v.ndim}-D input")
    others = [i for i in range(v.ndim) if i != d]
    if not others:
        return v.abs()
    return v.norm(pow, others, True)


def frobenius_norm(input: Tensor, dim: Sequence[int] | int, keepdim: bool = False) -> Tensor:
    """``sqrt(sum(|x|^2))`` over ``dim`` (one or two dims).

    >>> import ember
    >>> ember.frobenius_norm(ember.full((2, 2), 2.0), (0, 1)).item()
    4.0
    """
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not 1 <= len(dims) <= 2:
        raise RuntimeError(f"frobenius_norm(): expected one or two dims, got {dims}")
    return input.abs().square().sum(dims, keepdim).sqrt()


def nuclear_norm(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """The sum of singular values of the matrices in ``dim`` (the last two of a 2-D input when
    not given): ``nuclear_norm(x, keepdim=False)`` or ``nuclear_norm(x, dim, keepdim=False)``.

    >>> import ember
    >>> ember.nuclear_norm(ember.eye(3)).item()
    3.0
    """
    if isinstance(dim, bool):  # nuclear_norm(x, True): the overload without dim
        dim, keepdim = None, dim
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError(
                f"nuclear_norm(): expected a 2-D tensor without dim, got {input.ndim}-D"
            )
        dim = (0, 1)
    dims = tuple(dim)
    if len(dims) != 2:
        raise RuntimeError(f"nuclear_norm(): dim must name two dims, got {list(dims)}")
    from ember import linalg

    return linalg.matrix_norm(input, "nuc", dims, keepdim)


def native_norm(input: Tensor, p: Any = 2, dim: Sequence[int] | int | None = None,
                keepdim: bool = False, dtype: Any = None) -> Tensor:
    """The ``p``-norm of ``input`` (of the whole tensor, or over ``dim``), in ``dtype`` if given.

    >>> import ember
    >>> ember.native_norm(ember.tensor([3.0, 4.0])).item()
    5.0
    """
    x = input if dtype is None else input.to(dtype)
    p = 2 if p is None else p
    if dim is None:
        return x.norm(p)
    dims = [dim] if isinstance(dim, int) else list(dim)
    return x.norm(p, dims, keepdim)


# ---- SyncBatchNorm's building blocks ------------------------------------------------------------
def _channel_dims(op: str, input: Tensor) -> list[int]:
    if not isinstance(input, Tensor) or input.ndim < 2:
        raise RuntimeError(f"{op}(): expected input of at least 2 dims (N, C, ...)")
    return [0] + list(range(2, input.ndim))


def _acc(t: Tensor) -> Tensor:
    """Half and bfloat16 input is reduced in float32 (as PyTorch's kernels accumulate)."""
    return t.float() if t.dtype in (ember.float16, ember.bfloat16) else t


def _per_channel(t: Tensor, ndim: int) -> Tensor:
    return t.reshape(1, -1, *([1] * (ndim - 2)))


def batch_norm_stats(input: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """Per-channel ``(mean, invstd)`` of ``input`` (N, C, ...), ``invstd = 1 / sqrt(var + eps)``
    with the biased variance (float32 for half / bfloat16 input).

    >>> import ember
    >>> m, s = ember.batch_norm_stats(ember.tensor([[1.0], [3.0]]), 0.0)
    >>> m.tolist(), s.tolist()
    ([2.0], [1.0])
    """
    dims = _channel_dims("batch_norm_stats", input)
    input = _acc(input)
    mean = input.mean(dims)
    var = (input - _per_channel(mean, input.ndim)).square().mean(dims)
    return mean, (var + eps).rsqrt()


def batch_norm_elemt(input: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor,
                     invstd: Tensor, eps: float) -> Tensor:
    """``(input - mean) * invstd * weight + bias`` per channel (``eps`` is already in
    ``invstd``).

    >>> import ember
    >>> ember.batch_norm_elemt(ember.tensor([[1.0], [3.0]]), None, None, ember.tensor([2.0]),
    ...                        ember.tensor([1.0]), 0.0).tolist()
    [[-1.0], [1.0]]
    """
    _channel_dims("batch_norm_elemt", input)
    n = input.ndim
    out = (_acc(input) - _per_channel(mean, n)) * _per_channel(invstd, n)
    if weight is not None:
        out = out * _per_channel(weight, n)
    if bias is not None:
        out = out + _per_channel(bias, n)
    return out.to(input.dtype)


def batch_norm_gather_stats_with_counts(input: Tensor, mean: Tensor, invstd: Tensor,
                                        running_mean: Tensor | None,
                                        running_var: Tensor | None, momentum: float, eps: float,
                                        counts: Tensor) -> tuple[Tensor, Tensor]:
    """Combines the per-worker ``mean`` and ``invstd`` (each (W, C), from
    :func:`batch_norm_stats` over ``counts[w]`` elements per channel) into the global
    ``(mean, invstd)``, and updates ``running_mean`` / ``running_var`` in place (with the
    unbiased variance) when given. ``input`` only supplies the dtype.

    >>> import ember
    >>> m, s = ember.batch_norm_gather_stats_with_counts(
    ...     ember.zeros(1, 1), ember.tensor([[0.0], [2.0]]), ember.tensor([[1.0], [1.0]]),
    ...     None, None, 0.1, 0.0, ember.tensor([1.0, 1.0]))
    >>> m.tolist(), s.tolist()
    ([1.0], [0.7071067690849304])
    """
    if mean.ndim != 2 or invstd.shape != mean.shape:
        raise RuntimeError(
            "batch_norm_gather_stats_with_counts(): expected mean and invstd of shape "
            f"(workers, channels), got {list(mean.shape)} and {list(invstd.shape)}"
        )
    n = counts.to(mean.dtype).reshape(-1, 1)
    if n.shape[0] != mean.shape[0]:
        raise RuntimeError(
            f"batch_norm_gather_stats_with_counts(): {n.shape[0]} counts for {mean.shape[0]} "
            "workers"
        )
    total = n.sum(0)
    g_mean = (n * mean).sum(0) / total
    var_w = invstd.reciprocal().square() - eps
    g_var = (n * (var_w + (mean - g_mean).square())).sum(0) / total
    with ember.no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(g_mean.to(running_mean.dtype) * momentum)
        if running_var is not None:
            unbiased = g_var * total / (total - 1)
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
    out_dtype = input.dtype if input.dtype.is_floating_point else mean.dtype
    return g_mean.to(out_dtype), (g_var + eps).rsqrt().to(out_dtype)


def batch_norm_gather_stats(input: Tensor, mean: Tensor, invstd: Tensor,
                            running_mean: Tensor | None, running_var: Tensor | None,
                            momentum: float, eps: float, count: int) -> tuple[Tensor, Tensor]:
    """:func:`batch_norm_gather_stats_with_counts` with the same ``count`` for every worker.

    >>> import ember
    >>> m, _ = ember.batch_norm_gather_stats(ember.zeros(1, 1), ember.tensor([[0.0], [2.0]]),
    ...                                      ember.ones(2, 1), None, None, 0.1, 0.0, 3)
    >>> m.tolist()
    [1.0]
    """
    counts = ember.full((mean.shape[0],), float(count), dtype=mean.dtype)
    return batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,
                                               momentum, eps, counts)


def batch_norm_update_stats(input: Tensor, running_mean: Tensor | None,
                            running_var: Tensor | None,
                            momentum: float) -> tuple[Tensor, Tensor]:
    """Per-channel ``(mean, biased var)`` of ``input``; updates ``running_mean`` and
    ``running_var`` (with the unbiased variance) in place when given.

    >>> import ember
    >>> rm, rv = ember.zeros(1), ember.ones(1)
    >>> m, v = ember.batch_norm_update_stats(ember.tensor([[1.0], [3.0]]), rm, rv, 0.5)
    >>> m.tolist(), v.tolist(), rm.tolist(), rv.tolist()
    ([2.0], [1.0], [1.0], [1.5])
    """
    dims = _channel_dims("batch_norm_update_stats", input)
    input = _acc(input)
    mean = input.mean(dims)
    var = (input - _per_channel(mean, input.ndim)).square().mean(dims)
    n = input.numel() // input.shape[1]
    with ember.no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_((mean * momentum).to(running_mean.dtype))
        if running_var is not None:
            unbiased = var * (n / max(n - 1, 1)) * momentum
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype))
    return mean, var


def batch_norm_backward_reduce(grad_out: Tensor, input: Tensor, mean: Tensor, invstd: Tensor,
                               weight: Tensor | None, input_g: bool, weight_g: bool,
                               bias_g: bool) -> tuple[Tensor | None, ...]:
    """Per-channel sums for batch norm's backward: ``(sum_dy, sum_dy_xmu, grad_weight,
    grad_bias)`` with ``sum_dy = sum(grad_out)``, ``sum_dy_xmu = sum(grad_out * (input -
    mean))``, ``grad_weight = sum_dy_xmu * invstd``, ``grad_bias = sum_dy``; each is None when
    its flag (``input_g`` for the first two) is False.

    >>> import ember
    >>> r = ember.batch_norm_backward_reduce(ember.ones(2, 1), ember.tensor([[1.0], [3.0]]),
    ...                                      ember.tensor([2.0]), ember.tensor([1.0]), None,
    ...                                      True, True, True)
    >>> [t.tolist() for t in r]
    [[2.0], [0.0], [0.0], [2.0]]
    """
    dims = _channel_dims("batch_norm_backward_reduce", input)
    grad_out, input = _acc(grad_out), _acc(input)
    sum_dy = grad_out.sum(dims)
    sum_dy_xmu = (grad_out * (input - _per_channel(mean, input.ndim))).sum(dims)
    return (sum_dy if input_g else None, sum_dy_xmu if input_g else None,
            sum_dy_xmu * invstd if weight_g else None, sum_dy if bias_g else None)


def batch_norm_backward_elemt(grad_out: Tensor, input: Tensor, mean: Tensor, invstd: Tensor,
                              weight: Tensor | None, sum_dy: Tensor, sum_dy_xmu: Tensor,
                              count: Tensor) -> Tensor:
    """The input gradient of batch norm from the all-reduced ``sum_dy`` and ``sum_dy_xmu``;
    ``count`` holds each worker's element count per channel (their sum is the batch size N):
    ``(grad_out - sum_dy / N - (input - mean) * invstd^2 * sum_dy_xmu / N) * invstd * weight``.

    >>> import ember
    >>> ember.batch_norm_backward_elemt(ember.ones(2, 1), ember.tensor([[1.0], [3.0]]),
    ...                                 ember.tensor([2.0]), ember.tensor([1.0]), None,
    ...                                 ember.tensor([2.0]), ember.tensor([0.0]),
    ...                                 ember.tensor([2], dtype=ember.int32)).tolist()
    [[0.0], [0.0]]
    """
    n_dim = input.ndim
    total = float(count.sum().item())
    if total <= 0:
        raise RuntimeError("batch_norm_backward_elemt(): count must sum to a positive number")
    s = _per_channel(invstd, n_dim)
    xmu = _acc(input) - _per_channel(mean, n_dim)
    g = _acc(grad_out) - _per_channel(sum_dy, n_dim) / total \
        - xmu * s * s * _per_channel(sum_dy_xmu, n_dim) / total
    g = g * s
    g = g * _per_channel(weight, n_dim) if weight is not None else g
    return g.to(grad_out.dtype)


# ---- in-place dropouts and embedding renorm -----------------------------------------------------
def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``F.dropout(input, p, train, inplace=True)``.

    >>> import ember
    >>> x = ember.ones(3)
    >>> ember.dropout_(x, 0.5, False) is x
    True
    """
    return F.dropout(input, p, train, inplace=True) if train else input


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``ember.feature_dropout`` written into ``input`` (whole channels zeroed when training).

    >>> import ember
    >>> x = ember.ones(2, 3, 4)
    >>> ember.feature_dropout_(x, 0.5, False) is x
    True
    """
    if not train:
        return input
    input.copy_(ember.feature_dropout(input, p, train))
    return input


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``F.alpha_dropout(input, p, train, inplace=True)``.

    >>> import ember
    >>> x = ember.ones(3)
    >>> ember.alpha_dropout_(x, 0.5, False) is x
    True
    """
    return F.alpha_dropout(input, p, train, inplace=True) if train else input


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``F.feature_alpha_dropout(input, p, train, inplace=True)``.

    >>> import ember
    >>> x = ember.ones(2, 3, 4)
    >>> ember.feature_alpha_dropout_(x, 0.5, False) is x
    True
    """
    return F.feature_alpha_dropout(input, p, train, inplace=True) if train else input


def embedding_renorm_(input: Tensor, indices: Tensor, max_norm: float,
                      norm_type: float) -> Tensor:
    """Rescales in place the rows of the embedding table ``input`` named by ``indices`` whose
    ``norm_type``-norm exceeds ``max_norm`` to that norm (outside autograd); returns ``input``.

    >>> import ember
    >>> w = ember.full((2, 2), 3.0)
    >>> [round(v, 3) for v in ember.embedding_renorm_(w, ember.tensor([0]), 1.0, 2.0)[0].tolist()]
    [0.707, 0.707]
    """
    F._embedding_renorm_(input, indices, max_norm, norm_type)
    return input
