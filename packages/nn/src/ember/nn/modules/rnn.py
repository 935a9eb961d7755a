"""Recurrent layers: RNN, LSTM, GRU and their single-step cells.

The input projection of every time step is one matrix product per layer and direction, so each
step only multiplies the hidden state. An LSTM or GRU layer then runs its whole recurrence as one
C++ op (``_lstm_layer`` / ``_gru_layer``, fused gate math and a fused backward; ``_lstm_layer``
makes the input projection too; float32/float64 on the CPU or a CUDA device); packed sequences
of varying lengths, projections, RNN and forward-mode AD run the time loop in Python over core
ops.

>>> import ember
>>> lstm = ember.nn.LSTM(4, 8, num_layers=2, batch_first=True)
>>> out, (h, c) = lstm(ember.randn(3, 5, 4))
>>> out.shape, h.shape
(ember.Size([3, 5, 8]), ember.Size([2, 3, 8]))
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import ember
from ember import Tensor
from ember.nn import init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.nn.utils.rnn import PackedSequence, _select

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _fused_rnn_ok(*tensors: Tensor) -> bool:
    """Whether ember._C._lstm_layer / _gru_layer cover these tensors: float32/float64, one dtype,
    all on the CPU or all on one CUDA device, and no forward-mode AD level live (the per-step ops
    define the tangents). Other dtypes (autocast's 16-bit floats) and devices run the per-step ops.

    >>> import ember
    >>> _fused_rnn_ok(ember.zeros(2, 3), ember.zeros(3, 3))
    True
    >>> _fused_rnn_ok(ember.zeros(2, 3, dtype=ember.float16))
    False
    """
    dt, dev = tensors[0].dtype, tensors[0].device
    return (
        dt in (ember.float32, ember.float64)
        and dev.type in ("cpu", "cuda")
        and all(t.dtype == dt and t.device == dev for t in tensors)
        and ember._C._current_dual_level() < 0
    )


def _lstm_step(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """One LSTM step over ops from its pre-activation gates (i, f, g, o): the new (h, c)."""
    i, f, g, o = gates.chunk(4, 1)
    c = ember.sigmoid(f) * c + ember.sigmoid(i) * ember.tanh(g)
    return ember.sigmoid(o) * ember.tanh(c), c


def _gru_step(gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    """One GRU step over ops from the input and hidden parts of the gates (r, z, n): the new h."""
    ir, iz, inn = gi.chunk(3, 1)
    hr, hz, hn = gh.chunk(3, 1)
    r = ember.sigmoid(ir + hr)
    z = ember.sigmoid(iz + hz)
    n = ember.tanh(inn + r * hn)
    return n + z * (h - n)


def _stack(tensors: list[Tensor], dim: int) -> Tensor:
    # cat of unsqueezed pieces: unlike stack it is differentiable in ember-core today
    return ember.cat([t.unsqueeze(dim) for t in tensors], dim)


def _check_dtypes(name: str, x: Tensor, weight: Any, states: Any,
                  exc: type[Exception] = ValueError) -> None:
    """The input in the weights' dtype and each given state in the input's (outside autocast,
    which casts them itself): else the products below fail naming matmul/addmm, not the module."""
    from ember.amp import autocast_mode

    if not isinstance(weight, Tensor) or autocast_mode.is_autocast_enabled(x.device.type):
        return
    if x.dtype != weight.dtype:  # PyTorch: ValueError from the modules, RuntimeError from cells
        raise exc(
            f"{name}: input dtype ({x.dtype}) does not match weight dtype ({weight.dtype}). "
            f"Convert input: input.to({weight.dtype}), or convert model: model.to({x.dtype})"
        )
    for what, h in states:
        if isinstance(h, Tensor) and h.dtype != x.dtype:
            raise RuntimeError(
                f"{name}: expected {what} of dtype {x.dtype} (the input's), got {h.dtype}"
            )


def _autocast_dtype(t: Tensor) -> Any:
    """The dtype autocast wants for ``t``'s device in this thread, or None (autocast off, or
    ``t`` not a float32/16-bit tensor)."""
    from ember.amp import autocast_mode

    if not t.is_floating_point() or t.dtype is ember.float64:
        return None
    dev = t.device.type
    if not autocast_mode.is_autocast_enabled(dev):
        return None
    return autocast_mode.get_autocast_dtype(dev)


def _autocast_lower(t: Tensor | None) -> Tensor | None:
    from ember.amp import autocast_mode

    return autocast_mode._cast(t, "lower") if t is not None else None


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _addmm_t(bias: Tensor | None, x: Tensor, weight_t: Tensor) -> Tensor:
    return x.matmul(weight_t) if bias is None else ember.addmm(bias, x, weight_t)


class RNNBase(Module):
    """Shared machinery of RNN, LSTM and GRU: parameters, shape checks and the time loop.

    Parameters follow PyTorch's names: ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``,
    ``bias_hh_l{k}`` (and ``weight_hr_l{k}`` for a projected LSTM), with ``_reverse`` for the
    backward direction; all are drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).

    >>> import ember
    >>> [n for n, _ in ember.nn.GRU(2, 3, bidirectional=True).named_parameters()][:5]
    ['weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0', 'weight_ih_l0_reverse']
    """

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if mode not in _GATES:
            raise ValueError(f"{name}: unknown mode {mode!r}, expected one of {sorted(_GATES)}")
        for arg, v, lo in (
            ("input_size", input_size, 0),
            ("hidden_size", hidden_size, 1),
            ("num_layers", num_layers, 1),
            ("proj_size", proj_size, 0),
        ):
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise ValueError(f"{name}: {arg} must be an int >= {lo}, got {v!r}")
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout must be a number in [0, 1], got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            # dropout only runs between stacked layers: with one layer it silently does nothing
            warnings.warn(
                f"{name}: dropout={dropout} has no effect with num_layers=1 (the dropout option "
                "applies to the outputs of every layer but the last); use num_layers > 1 or "
                "apply dropout to the output yourself",
                UserWarning,
                stacklevel=3,
            )
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size is only supported by LSTM")
        if proj_size >= hidden_size:
            raise ValueError(
                f"{name}: proj_size ({proj_size}) must be smaller than hidden_size ({hidden_size})"
            )
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        kw = {"dtype": dtype, "device": device}
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else real_hidden * num_directions
            for direction in range(num_directions):
                sfx = f"_l{layer}" + ("_reverse" if direction else "")
                params = [
                    ("weight_ih" + sfx, (gate_size, layer_in)),
                    ("weight_hh" + sfx, (gate_size, real_hidden)),
                ]
                if bias:
                    params += [("bias_ih" + sfx, (gate_size,)), ("bias_hh" + sfx, (gate_size,))]
                if proj_size > 0:
                    params.append(("weight_hr" + sfx, (proj_size, hidden_size)))
                for pname, shape in params:
                    setattr(self, pname, Parameter(ember.empty(*shape, **kw)))
                    self._flat_weights_names.append(pname)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraws every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """Parameters grouped per layer and direction, in PyTorch's order."""
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional else 1))
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i : i + per]] for i in range(0, len(names), per)]

    def flatten_parameters(self) -> None:
        """No-op kept for PyTorch compatibility (ember has no fused cuDNN weight buffer)."""

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ---- forward -------------------------------------------------------------------------

    def _layer_params(self, layer: int, direction: int) -> tuple[Tensor | None, ...]:
        sfx = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda n: getattr(self, n + sfx, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _check_hidden(self, h: Tensor, expected: tuple[int, ...], what: str) -> None:
        if _shape(h) != expected:
            raise RuntimeError(
                f"{type(self).__name__}: expected {what} of shape {expected}, got {_shape(h)}"
            )

    def forward(self, input: Tensor | PackedSequence, hx: Any = None) -> Any:
        name = type(self).__name__
        is_lstm = self.mode == "LSTM"
        num_directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        packed = isinstance(input, PackedSequence)
        unbatched = False
        if packed:
            data = input.data
            batch_sizes = [int(b) for b in input.batch_sizes.tolist()]
            batch = batch_sizes[0]
            sorted_indices, unsorted_indices = input.sorted_indices, input.unsorted_indices
            if data.ndim != 2 or data.shape[1] != self.input_size:
                raise RuntimeError(
                    f"{name}: expected packed data of shape (*, {self.input_size}), got "
                    f"{_shape(data)}"
                )
        else:
            if not isinstance(input, Tensor):
                raise TypeError(f"{name}: input must be a Tensor or PackedSequence, got {type(input)}")
            if input.ndim not in (2, 3):
                raise ValueError(
                    f"{name}: expected input of 2 (unbatched) or 3 dimensions, got shape "
                    f"{_shape(input)}"
                )
            if input.shape[-1] != self.input_size:
                raise RuntimeError(
                    f"{name}: input.size(-1) must be equal to input_size. Expected "
                    f"{self.input_size}, got {input.shape[-1]} (input shape {_shape(input)})"
                )
            unbatched = input.ndim == 2
            x = input.unsqueeze(1) if unbatched else input
            if self.batch_first and not unbatched:
                x = x.transpose(0, 1)
            steps, batch = x.shape[0], x.shape[1]
            if steps == 0:
                raise RuntimeError(
                    f"{name}: expected sequence length to be larger than 0, got input of shape "
                    f"{_shape(input)} (batch_first={self.batch_first})"
                )
            batch_sizes = [batch] * steps
            data = x.reshape(steps * batch, self.input_size)
            sorted_indices = unsorted_indices = None
        h_shape = (self.num_layers * num_directions, batch, real_hidden)
        c_shape = (self.num_layers * num_directions, batch, self.hidden_size)
        _check_dtypes(name, data, self._layer_params(0, 0)[0], ())
        if hx is None:
            h0 = ember.zeros(*h_shape, dtype=data.dtype, device=data.device)
            c0 = ember.zeros(*c_shape, dtype=data.dtype, device=data.device) if is_lstm else None
        else:
            if is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"{name}: hx must be a tuple (h_0, c_0)")
                h0, c0 = hx
            else:
                _need_tensor_hx(name, hx)
                h0, c0 = hx, None
            if unbatched:
                want = (h_shape[0], h_shape[2])
                self._check_hidden(h0, want, "unbatched hidden state h_0")
                h0 = h0.unsqueeze(1)
                if c0 is not None:
                    self._check_hidden(c0, (c_shape[0], c_shape[2]), "unbatched cell state c_0")
                    c0 = c0.unsqueeze(1)
            else:
                self._check_hidden(h0, h_shape, "hidden state h_0")
                if c0 is not None:
                    self._check_hidden(c0, c_shape, "cell state c_0")
            _check_dtypes(name, data, self._layer_params(0, 0)[0],
                          (("hidden state h_0", h0), ("cell state c_0", c0)))
            if sorted_indices is not None:
                h0 = _select(h0, 1, sorted_indices)
                c0 = _select(c0, 1, sorted_indices) if c0 is not None else None

        # PyTorch's autocast runs LSTM and the Elman RNN (on CUDA also GRU: cuDNN's RNN) wholly
        # in the lower precision: input, states and weights cast, outputs in that dtype
        from ember.amp.autocast_mode import cast_policy

        lower = (_autocast_dtype(data) is not None
                 and cast_policy(self.mode.lower(), data.device.type) == "lower")
        if lower:
            data, h0, c0 = _autocast_lower(data), _autocast_lower(h0), _autocast_lower(c0)
        offsets = [0]
        for b in batch_sizes:
            offsets.append(offsets[-1] + b)
        layer_input = data
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                layer_input = ember.dropout(layer_input, self.dropout, True)
            outs = []
            for direction in range(num_directions):
                idx = layer * num_directions + direction
                out, h_last, c_last = self._run_direction(
                    layer_input,
                    batch_sizes,
                    offsets,
                    tuple(map(_autocast_lower, self._layer_params(layer, direction)))
                    if lower else self._layer_params(layer, direction),
                    h0[idx],
                    c0[idx] if c0 is not None else None,
                    reverse=direction == 1,
                )
                outs.append(out)
                h_n.append(h_last)
                if c_last is not None:
                    c_n.append(c_last)
            layer_input = outs[0] if num_directions == 1 else ember.cat(outs, 1)

        h_out = _stack(h_n, 0)
        c_out = _stack(c_n, 0) if is_lstm else None
        if packed:
            if unsorted_indices is not None:
                h_out = _select(h_out, 1, unsorted_indices)
                c_out = _select(c_out, 1, unsorted_indices) if c_out is not None else None
            output: Any = PackedSequence(
                layer_input, input.batch_sizes, sorted_indices, unsorted_indices
            )
        else:
            output = layer_input.reshape(len(batch_sizes), batch, layer_input.shape[-1])
            if unbatched:
                output = output.squeeze(1)
                h_out = h_out.squeeze(1)
                c_out = c_out.squeeze(1) if c_out is not None else None
            elif self.batch_first:
                output = output.transpose(0, 1)
        return (output, (h_out, c_out)) if is_lstm else (output, h_out)

    def _run_direction(
        self,
        x: Tensor,
        batch_sizes: list[int],
        offsets: list[int],
        params: tuple[Tensor | None, ...],
        h0: Tensor,
        c0: Tensor | None,
        reverse: bool,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        w_ih, w_hh, b_ih, b_hh, w_hr = params
        mode = self.mode
        steps = len(batch_sizes)
        # the fused layers take one batch size for all steps (no varying-length packed input)
        uniform = steps > 0 and min(batch_sizes) == max(batch_sizes)
        hidden = w_hh.shape[1]
        biases = [] if b_ih is None else [b_ih, b_hh]
        if mode == "LSTM" and w_hr is None and uniform and _fused_rnn_ok(x, h0, c0, w_hh, w_ih, *biases):
            # the op makes the input projection of every step itself (one product)
            bias = [] if b_ih is None else [b_ih + b_hh]
            xs = x.reshape(steps, batch_sizes[0], x.shape[1])
            out, h, c, _ = ember._C._lstm_layer([xs, h0, c0, w_hh, w_ih, *bias], reverse)
            return out.view(steps * batch_sizes[0], hidden), h, c
        w_hh_t = w_hh.t()
        w_hr_t = w_hr.t() if w_hr is not None else None
        # One product for the input part of every step. For GRU b_hh stays in the step because
        # the reset gate multiplies the hidden part of the candidate, bias included.
        if mode == "GRU" or b_ih is None:
            gi_all = _addmm_t(b_ih, x, w_ih.t())
            step_bias = b_hh
        else:
            gi_all = ember.addmm(b_ih + b_hh, x, w_ih.t())
            step_bias = None
        gru_bias = [] if b_hh is None else [b_hh]
        if mode == "GRU" and uniform and _fused_rnn_ok(gi_all, h0, w_hh, *gru_bias):
            gates = gi_all.view(steps, batch_sizes[0], 3 * hidden)
            out, h, _ = ember._C._gru_layer([gates, h0, w_hh, *gru_bias], reverse)
            return out.view(steps * batch_sizes[0], hidden), h, None
        # one split node: slicing per step would make backward build a full-size gradient of
        # gi_all for every step
        gi_steps = gi_all.split(batch_sizes, 0) if steps > 1 else [gi_all]
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        outputs: list[Tensor | None] = [None] * steps
        finished_h: list[Tensor] = []
        finished_c: list[Tensor] = []
        if reverse:
            cur = batch_sizes[-1]
            h, c = h0[:cur], (c0[:cur] if c0 is not None else None)
        else:
            cur = batch_sizes[0]
            h, c = h0, c0
        for t in order:
            b = batch_sizes[t]
            if b != cur:
                if reverse:  # sequences start (in reverse time) as the batch grows
                    h = ember.cat([h, h0[cur:b]], 0)
                    if c is not None:
                        c = ember.cat([c, c0[cur:b]], 0)
                else:  # the shortest sequences have ended: keep their final state
                    finished_h.append(h[b:])
                    h = h[:b]
                    if c is not None:
                        finished_c.append(c[b:])
                        c = c[:b]
                cur = b
            gi = gi_steps[t]
            gh = _addmm_t(step_bias, h, w_hh_t)
            if mode == "LSTM":
                h, c = _lstm_step(gi + gh, c)
                if w_hr_t is not None:
                    h = h.matmul(w_hr_t)
            elif mode == "GRU":
                h = _gru_step(gi, gh, h)
            elif mode == "RNN_TANH":
                h = ember.tanh(gi + gh)
            else:
                h = ember.relu(gi + gh)
            outputs[t] = h
        if finished_h:
            h = ember.cat([h, *reversed(finished_h)], 0)
            if c is not None:
                c = ember.cat([c, *reversed(finished_c)], 0)
        out = ember.cat(outputs, 0) if len(outputs) > 1 else outputs[0]
        return out, h, c


class RNN(RNNBase):
    """Elman RNN: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` with act tanh or relu.

    Input (L, N, H_in) ((N, L, H_in) with batch_first, (L, H_in) unbatched) or a PackedSequence;
    returns (output, h_n).

    >>> import ember
    >>> rnn = ember.nn.RNN(3, 5, nonlinearity="relu")
    >>> out, h = rnn(ember.randn(7, 2, 3))
    >>> out.shape, h.shape
    (ember.Size([7, 2, 5]), ember.Size([1, 2, 5]))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("RNN: proj_size is only supported by LSTM")
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if len(args) > 3:  # (input_size, hidden_size, num_layers, nonlinearity, ...)
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}, expected 'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory with gates (i, f, g, o) and an optional output projection.

    Returns (output, (h_n, c_n)); with ``proj_size > 0`` the hidden state is projected by
    ``weight_hr_l{k}`` to proj_size features.

    >>> import ember
    >>> out, (h, c) = ember.nn.LSTM(3, 6, proj_size=2)(ember.randn(4, 3))
    >>> out.shape, h.shape, c.shape
    (ember.Size([4, 2]), ember.Size([1, 2]), ember.Size([1, 6]))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit with reset, update and candidate gates (r, z, n).

    >>> import ember
    >>> out, h = ember.nn.GRU(3, 4, num_layers=2, bidirectional=True)(ember.randn(5, 2, 3))
    >>> out.shape, h.shape
    (ember.Size([5, 2, 8]), ember.Size([4, 2, 4]))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("GRU: proj_size is only supported by LSTM")
        super().__init__("GRU", *args, **kwargs)


class _HiddenStateTypeError(TypeError, AttributeError):
    """A hidden state that is not a Tensor: a TypeError, and an AttributeError as PyTorch's
    (which fails reading ``hx.dim``)."""


def _need_tensor_hx(name: str, hx: Any) -> None:
    if not isinstance(hx, Tensor):
        raise _HiddenStateTypeError(
            f"{name}: hx must be a Tensor h_0 (only an LSTM takes the pair (h_0, c_0)), got "
            f"{type(hx).__name__}")


class RNNCellBase(Module):
    """Parameters and input checks shared by the single-step cells."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool,
        num_chunks: int,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        for arg, v in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name}: {arg} must be a positive int, got {v!r}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        kw = {"dtype": dtype, "device": device}
        self.weight_ih = Parameter(ember.empty(num_chunks * hidden_size, input_size, **kw))
        self.weight_hh = Parameter(ember.empty(num_chunks * hidden_size, hidden_size, **kw))
        if bias:
            self.bias_ih = Parameter(ember.empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(ember.empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraws every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _prepare(self, input: Tensor, hx: Tensor | None, what: str = "hx") -> tuple[Tensor, bool]:
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(
                f"{name}: expected input of 1 (unbatched) or 2 dimensions, got shape {_shape(input)}"
            )
        if input.shape[-1] != self.input_size:
            raise RuntimeError(
                f"{name}: input has inconsistent input_size: got {input.shape[-1]}, expected "
                f"{self.input_size} (input shape {_shape(input)})"
            )
        unbatched = input.ndim == 1
        if hx is not None:
            want = (self.hidden_size,) if unbatched else (input.shape[0], self.hidden_size)
            if _shape(hx) != want:
                raise RuntimeError(f"{name}: expected {what} of shape {want}, got {_shape(hx)}")
        _check_dtypes(name, input, getattr(self, "weight_ih", None), ((what, hx),), RuntimeError)
        return (input.unsqueeze(0) if unbatched else input), unbatched

    def _zeros(self, x: Tensor) -> Tensor:
        return ember.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)

    @staticmethod
    def _autocast_inputs(input: Tensor, hx: Any, op: str) -> tuple[Tensor, Any]:
        """input and hx in the autocast dtype where autocast runs the cell ``op`` wholly in it
        (PyTorch's CUDA list; the weights are cast by the products), else unchanged."""
        from ember.amp.autocast_mode import cast_policy

        if _autocast_dtype(input) is None or cast_policy(op, input.device.type) != "lower":
            return input, hx
        if isinstance(hx, (tuple, list)):
            hx = type(hx)(_autocast_lower(h) for h in hx)
        else:
            hx = _autocast_lower(hx)
        return _autocast_lower(input), hx

    def _gates(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        return _addmm_t(self.bias_ih, x, self.weight_ih.t()), _addmm_t(
            self.bias_hh, h, self.weight_hh.t()
        )


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``.

    >>> import ember
    >>> ember.nn.RNNCell(3, 4)(ember.randn(2, 3)).shape
    ember.Size([2, 4])
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"RNNCell: unknown nonlinearity {nonlinearity!r}, expected 'tanh' or 'relu'"
            )
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if hx is not None:
            _need_tensor_hx(type(self).__name__, hx)
        input, hx = self._autocast_inputs(input, hx, f"rnn_{self.nonlinearity}_cell")
        x, unbatched = self._prepare(input, hx)
        h = self._zeros(x) if hx is None else (hx.unsqueeze(0) if unbatched else hx)
        gi, gh = self._gates(x, h)
        out = ember.tanh(gi + gh) if self.nonlinearity == "tanh" else ember.relu(gi + gh)
        return out.squeeze(0) if unbatched else out


class LSTMCell(RNNCellBase):
    """One LSTM step; returns (h', c').

    >>> import ember
    >>> h, c = ember.nn.LSTMCell(3, 4)(ember.randn(2, 3))
    >>> h.shape, c.shape
    (ember.Size([2, 4]), ember.Size([2, 4]))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(
        self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor]:
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError("LSTMCell: hx must be a tuple (h_0, c_0)")
        input, hx = self._autocast_inputs(input, hx, "lstm_cell")
        x, unbatched = self._prepare(input, hx[0] if hx is not None else None, "h_0")
        if hx is None:
            h, c = self._zeros(x), self._zeros(x)
        else:
            self._prepare(input, hx[1], "c_0")
            h, c = (hx[0].unsqueeze(0), hx[1].unsqueeze(0)) if unbatched else hx
        b = self.bias_ih + self.bias_hh if self.bias else None
        gates = _addmm_t(b, x, self.weight_ih.t()).unsqueeze(0)
        # (under autocast the gates are in the lower precision: the step path then mixes
        # dtypes as PyTorch's cell does, and the cell state keeps its float32)
        if _fused_rnn_ok(gates, h, c, self.weight_hh):
            _, h, c, _ = ember._C._lstm_layer([gates, h, c, self.weight_hh])
        else:
            gi, gh = self._gates(x, h)
            h, c = _lstm_step(gi + gh, c)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One GRU step: ``h' = (1 - z) * n + z * h``.

    >>> import ember
    >>> ember.nn.GRUCell(3, 4)(ember.randn(3)).shape
    ember.Size([4])
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if hx is not None:
            _need_tensor_hx(type(self).__name__, hx)
        input, hx = self._autocast_inputs(input, hx, "gru_cell")
        x, unbatched = self._prepare(input, hx)
        h = self._zeros(x) if hx is None else (hx.unsqueeze(0) if unbatched else hx)
        bias_hh = [] if self.bias_hh is None else [self.bias_hh]
        gates = _addmm_t(self.bias_ih, x, self.weight_ih.t()).unsqueeze(0)
        if _fused_rnn_ok(gates, h, self.weight_hh, *bias_hh):
            _, out, _ = ember._C._gru_layer([gates, h, self.weight_hh, *bias_hh])
        else:
            gi, gh = self._gates(x, h)
            out = _gru_step(gi, gh, h)
        return out.squeeze(0) if unbatched else out
