"""ember.onnx.export: models exported, checked with onnx.checker and run in onnxruntime, whose
outputs must match ember's (rtol 1e-4), also at another batch size through dynamic axes."""

from __future__ import annotations

import io

import ember
import numpy as np
import pytest
from ember import nn
from ember.nn import functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

TOL = {"rtol": 1e-4, "atol": 1e-5}


def _flat(v):
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in _flat(x)]
    return [v]


def _export(model, args, **kw):
    f = io.BytesIO()
    ember.onnx.export(model, args, f, **kw)
    proto = onnx.load_from_string(f.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    return proto, ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])


def _check(model, args, *others, input_names=None, dynamic_axes=None, **kw):
    """Export with `args`, then compare onnxruntime with ember on `args` and on each of `others`."""
    mode = model.training
    proto, sess = _export(model, args, input_names=input_names, dynamic_axes=dynamic_axes, **kw)
    assert model.training == mode, "export puts the model back in its mode"
    names = [i.name for i in sess.get_inputs()]
    model.eval()
    for a in (args, *others):
        a = a if isinstance(a, tuple) else (a,)
        with ember.no_grad():
            expected = _flat(model(*a))
        got = sess.run(None, {n: t.numpy() for n, t in zip(names, _flat(a))})
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == tuple(e.shape)
            np.testing.assert_allclose(g, e.numpy(), **TOL)
    return proto


def _ops(proto):
    return {n.op_type for n in proto.graph.node}


def test_mlp_dynamic_batch():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 16), nn.GELU(),
                          nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16), nn.SiLU(), nn.Linear(16, 4),
                          nn.LogSoftmax(-1))
    model.train()
    proto = _check(model, ember.randn(5, 6), ember.randn(9, 6), input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].name == "y"
    assert len(proto.graph.initializer) >= 10  # weights and biases
    assert {"MatMul", "Relu", "Tanh", "LogSoftmax", "Erf"} <= _ops(proto)


class _CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.c2 = nn.Conv2d(8, 8, 3, padding="same", groups=2)
        self.gn = nn.GroupNorm(2, 8)
        self.ap = nn.AvgPool2d(2)
        self.c3 = nn.Conv1d(8, 4, 3, stride=1, dilation=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.c1(x))))
        x = self.ap(F.leaky_relu(self.gn(self.c2(x)), 0.1))
        y = self.c3(x.flatten(2)).mean(-1)
        return self.fc(self.gap(x).flatten(1)) + y.sum(1, keepdim=True), F.softmax(y, 1)


def test_cnn_conv_norms_pools():
    ember.manual_seed(1)
    model = _CNN()
    model.train()
    for _ in range(3):  # non-trivial running statistics
        model(ember.randn(4, 3, 8, 8))
    proto = _check(model, ember.randn(2, 3, 8, 8), ember.randn(3, 3, 8, 8), input_names=["img"],
                   dynamic_axes={"img": [0], "output_0": [0], "output_1": [0]})
    assert {"Conv", "BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool",
            "InstanceNormalization"} <= _ops(proto)


class _LM(nn.Module):
    def __init__(self, kind, bidirectional=False):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = getattr(nn, kind)(8, 16, num_layers=2, batch_first=True, bidirectional=bidirectional,
                                     dropout=0.2)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(16 * (2 if bidirectional else 1), 20)

    def forward(self, x, h=None):
        o, h = self.rnn(self.drop(self.emb(x)), h)
        return self.out(self.drop(o).reshape(-1, o.shape[-1])), h


@pytest.mark.parametrize("kind,bidir", [("LSTM", False), ("GRU", False), ("GRU", True), ("LSTM", True),
                                        ("RNN", False)])
def test_rnn_language_models(kind, bidir):
    ember.manual_seed(2)
    model = _LM(kind, bidir)
    proto = _check(model, ember.randint(0, 20, (3, 7)), ember.randint(0, 20, (5, 7)), input_names=["tokens"],
                   dynamic_axes={"tokens": {0: "batch"}, "output_0": {0: "rows"}, "output_1": {1: "batch"}})
    assert {kind, "Gather"} <= _ops(proto)


def test_lstm_with_initial_state_seq_first():
    ember.manual_seed(3)
    lstm = nn.LSTM(4, 6, num_layers=2)
    x = ember.randn(5, 3, 4)
    h0, c0 = ember.randn(2, 3, 6), ember.randn(2, 3, 6)
    _check(lstm, (x, (h0, c0)), (ember.randn(5, 2, 4), (ember.randn(2, 2, 6), ember.randn(2, 2, 6))),
           input_names=["x", "h0", "c0"],
           dynamic_axes={"x": {1: "b"}, "h0": {1: "b"}, "c0": {1: "b"}, "output_0": {1: "b"},
                         "output_1": {1: "b"}, "output_2": {1: "b"}})


class _Encoder(nn.Module):
    def __init__(self, activation="relu"):
        super().__init__()
        self.emb = nn.Embedding(30, 16)
        self.pos = nn.Parameter(ember.randn(1, 8, 16))
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True, activation=activation)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 30)

    def forward(self, x):
        t = x.shape[1]
        h = self.emb(x) + self.pos[:, :t]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        return self.head(self.norm(self.enc(h, mask=mask)))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder(activation):
    ember.manual_seed(4)
    model = _Encoder(activation)
    proto = _check(model, ember.randint(0, 30, (2, 6)), ember.randint(0, 30, (4, 6)), input_names=["tokens"],
                   dynamic_axes={"tokens": {0: "batch"}, "output": {0: "batch"}})
    assert {"Softmax", "MatMul", "LayerNormalization", "Gather"} <= _ops(proto)


def test_multihead_attention_with_weights_seq_first():
    ember.manual_seed(5)
    mha = nn.MultiheadAttention(16, 4)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, q, kv):
            return self.mha(q, kv, kv, need_weights=True)

    _check(M(), (ember.randn(5, 2, 16), ember.randn(7, 2, 16)), (ember.randn(5, 3, 16), ember.randn(7, 3, 16)),
           input_names=["q", "kv"], dynamic_axes={"q": {1: "b"}, "kv": {1: "b"}, "output_0": {1: "b"},
                                                  "output_1": {0: "b"}})


def test_scaled_dot_product_attention_causal_and_bool_mask():
    class M(nn.Module):
        def forward(self, q, k, v):
            keep = ember.ones(4, 6, dtype=ember.bool).tril(2)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            b = F.scaled_dot_product_attention(q, k[:, :, :4], v[:, :, :4], is_causal=True, scale=0.3)
            return a + b

    ember.manual_seed(6)
    args = (ember.randn(2, 3, 4, 8), ember.randn(2, 3, 6, 8), ember.randn(2, 3, 6, 8))
    _check(M(), args)


class _Bag(nn.Module):
    """Embeddings with the reshapes and indexing language models use."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 12, padding_idx=0)
        self.proj = nn.Linear(12, 12, bias=False)

    def forward(self, x):
        e = self.emb(x)  # (B, T, 12)
        a, b = e.chunk(2, dim=-1)
        s1, s2, s3 = ember.split(e, [4, 4, 4], dim=2)
        y = ember.cat([b * ember.sigmoid(a), (s1 - s2) / 2.0 + s3.abs(), s3[..., :2]], -1)  # (B, T, 12)
        y = y.permute(0, 2, 1).transpose(1, 2).contiguous().unsqueeze(1).squeeze(1)
        first, last = y[:, 0], y[..., -1, :]
        mid = y[:, 1:-1:2].mean(1) + y.select(1, 2) - y.narrow(1, 0, 1).squeeze(1)
        z = ember.stack([first, last, mid], 1)  # (B, 3, 12)
        z = self.proj(z).view(z.shape[0], -1)  # (B, 36)
        z = ember.where(z > 0, z, 0.5 * z) ** 2 + 1 - ember.exp(-z.clamp(min=-3.0, max=3.0))
        return z.sum(-1), z[:, None, :4], e.sum((1, 2))


def test_embedding_reshapes_indexing():
    ember.manual_seed(7)
    model = _Bag()
    proto = _check(model, ember.randint(0, 50, (3, 7)), ember.randint(0, 50, (6, 7)), input_names=["ids"],
                   dynamic_axes={"ids": {0: "B"}, "output_0": {0: "B"}, "output_1": {0: "B"}, "output_2": {0: "B"}})
    assert {"Gather", "Split", "Concat", "Transpose", "Slice", "ReduceMean", "Where", "Clip"} <= _ops(proto)


def test_opset_18_and_file_path(tmp_path):
    ember.manual_seed(8)
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = model

        def forward(self, x):
            return self.body(x).mean(1, keepdim=True)

    path = tmp_path / "m.onnx"
    x = ember.randn(2, 3)
    ember.onnx.export(M(), (x,), str(path), opset_version=18)
    proto = onnx.load(str(path))
    assert proto.opset_import[0].version == 18
    assert [len(n.input) for n in proto.graph.node if n.op_type == "ReduceMean"] == [2]  # axes as input
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with ember.no_grad():
        ref = model(x).mean(1, keepdim=True)
    np.testing.assert_allclose(sess.run(None, {"input": x.numpy()})[0], ref.numpy(), **TOL)


def test_constants_are_folded():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.randn(4, 4))

        def forward(self, x):
            w = (self.w.t() @ self.w).exp() / 10  # parameters only: one initializer
            return x @ w

    proto = _check(M(), ember.randn(2, 4))
    assert [n.op_type for n in proto.graph.node] == ["MatMul", "Identity"]


def test_unsupported_op_names_it():
    class M(nn.Module):
        def forward(self, x):
            return ember.sort(x, 1).values

    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="'sort'"):
        ember.onnx.export(M(), ember.randn(2, 3), io.BytesIO())
    assert not ember.onnx.is_in_onnx_export()
    # restored: the __torch_function__ wrapper of the builtin again (ember.overrides)
    assert ember.sort.__name__ == "sort" and type(ember.sort).__name__ == "_TorchFunctionWrapper"
    assert ember.sort.__wrapped__ is ember._C.sort


def test_is_in_onnx_export_and_bad_arguments():
    seen = []

    class M(nn.Module):
        def forward(self, x):
            seen.append(ember.onnx.is_in_onnx_export())
            return x * 2

    ember.onnx.export(M(), ember.randn(2), io.BytesIO())
    assert seen == [True] and not ember.onnx.is_in_onnx_export()
    with pytest.raises(ValueError, match="opset_version"):
        ember.onnx.export(M(), ember.randn(2), io.BytesIO(), opset_version=9)
    with pytest.raises(ValueError, match="dynamic_axes"):
        ember.onnx.export(M(), ember.randn(2), io.BytesIO(), dynamic_axes={"nope": [0]})


_TANH = ember.tanh  # references kept before the export: only the dispatcher sees these calls
_CUMSUM = ember.cumsum


def test_kept_function_reference_goes_through_the_dispatcher():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x, act=_TANH):
            return act(self.fc(x))

    proto = _check(M(), ember.randn(2, 3), ember.randn(5, 3), input_names=["x"],
                   dynamic_axes={"x": [0], "output": [0]})
    assert "Tanh" in _ops(proto)

    class N(nn.Module):
        def forward(self, x, f=_CUMSUM):
            return f(x * 2, 1)

    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="'cumsum'"):
        ember.onnx.export(N(), ember.randn(2, 3), io.BytesIO())


@pytest.mark.parametrize("which", ["gru", "lstm", "encoder_layer", "conv_bn"])
def test_onnxruntime_matches_torch_with_the_same_weights(which):
    torch = pytest.importorskip("torch")
    from nn_helpers import copy_weights

    ember.manual_seed(9)
    if which == "gru":
        pair = [m.GRU(5, 7, num_layers=2, bidirectional=True, batch_first=True) for m in (nn, torch.nn)]
        x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    elif which == "lstm":
        pair = [m.LSTM(5, 7, num_layers=2) for m in (nn, torch.nn)]
        x = np.random.default_rng(1).standard_normal((4, 3, 5)).astype(np.float32)
    elif which == "encoder_layer":
        pair = [m.TransformerEncoderLayer(8, 2, 16, batch_first=True, activation="gelu") for m in (nn, torch.nn)]
        x = np.random.default_rng(2).standard_normal((2, 5, 8)).astype(np.float32)
    else:
        pair = [m.Sequential(m.Conv2d(2, 4, 3, padding=1), m.BatchNorm2d(4), m.ReLU(), m.MaxPool2d(2),
                             m.Flatten(), m.Linear(16, 3)) for m in (nn, torch.nn)]
        with torch.no_grad():
            pair[1][1].running_mean.uniform_(-0.5, 0.5)
            pair[1][1].running_var.uniform_(0.5, 2.0)
            pair[1][1].weight.uniform_(0.5, 1.5)
        x = np.random.default_rng(3).standard_normal((2, 2, 4, 4)).astype(np.float32)
    e, t = pair
    copy_weights(t, e)
    e.eval()
    t.eval()
    _, sess = _export(e, (ember.from_numpy(x),))
    got = sess.run(None, {sess.get_inputs()[0].name: x})
    with torch.no_grad():
        expected = [v.numpy() for v in _flat(t(torch.from_numpy(x)))]
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        np.testing.assert_allclose(g, w, **TOL)


def test_writes_that_onnx_cannot_express_are_refused():
    class SetItem(nn.Module):
        def forward(self, x):
            x = x * 1
            x[:, 0] = 0
            return x

    class ViewInPlace(nn.Module):
        def forward(self, x):
            x = x * 1
            x[:, :2].mul_(2)
            return x

    class ReluInPlaceOnView(nn.Module):
        def forward(self, x):
            x = x * 1
            F.relu(x[0], inplace=True)
            return x

    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="index assignment"):
        ember.onnx.export(SetItem(), ember.randn(2, 3), io.BytesIO())
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="'mul_' writes into a view"):
        ember.onnx.export(ViewInPlace(), ember.randn(2, 3), io.BytesIO())
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="'relu' writes into a view"):
        ember.onnx.export(ReluInPlaceOnView(), ember.randn(2, 3), io.BytesIO())


def test_in_place_ops_on_whole_tensors_and_comparisons():
    class M(nn.Module):
        def forward(self, x):
            y = x * 2
            y.add_(1).mul_(0.5)
            y = F.relu(y, inplace=True)
            y += x
            keep = (x != 0) & (x > -1)
            return ember.where(keep, y, -y), ~keep

    _check(M(), ember.randn(3, 4), ember.randn(6, 4), input_names=["x"],
           dynamic_axes={"x": [0], "output_0": [0], "output_1": [0]})


_LAYERS_2D = [nn.ReLU6(), nn.ELU(), nn.PReLU(), nn.Hardtanh(-0.5, 0.5), nn.Softplus(beta=2.0), nn.LeakyReLU(0.2),
              nn.Mish(), nn.Softmax(dim=1), nn.Identity(), nn.Hardswish(), nn.Hardsigmoid(), nn.SELU(), nn.CELU(0.7),
              nn.Softsign(), nn.LogSigmoid(), nn.Tanhshrink(), nn.BatchNorm1d(8), nn.GLU(),
              nn.LayerNorm(8, elementwise_affine=False), nn.Sequential(nn.Unflatten(1, (2, 4)), nn.Flatten())]
_LAYERS_3D = [nn.MaxPool1d(2), nn.AvgPool1d(3, stride=2, padding=1), nn.AdaptiveAvgPool1d(4), nn.AdaptiveMaxPool1d(1),
              nn.Conv1d(4, 6, 3, padding="same"), nn.ConvTranspose1d(4, 2, 3, stride=2, output_padding=1),
              nn.InstanceNorm1d(4, affine=True), nn.Upsample(scale_factor=2), nn.Upsample(size=20, mode="linear")]


@pytest.mark.parametrize("layer", _LAYERS_2D + _LAYERS_3D, ids=lambda m: type(m).__name__)
def test_more_layers(layer):
    ember.manual_seed(10)
    shape = (3, 8) if any(layer is m for m in _LAYERS_2D) else (2, 4, 12)
    other = (5,) + shape[1:]
    _check(layer, ember.randn(*shape), ember.randn(*other), input_names=["x"],
           dynamic_axes={"x": [0], "output": [0]})


def test_cells_and_reductions():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTMCell(8, 6)
            self.gru = nn.GRUCell(6, 5)
            self.rnn = nn.RNNCell(5, 4, nonlinearity="relu")

        def forward(self, x):
            h, c = self.lstm(x)
            h, c = self.lstm(x, (h, c))
            g = self.gru(h)
            r = self.rnn(g)
            vals, idx = x.max(1)
            return (r, c, x.std(1), x.var(1, keepdim=True, correction=0), vals, idx, x.argmax(1),
                    x.norm(dim=1), x.logsumexp(1), x.amin(1), ember.cumsum(x, 1), ember.tanh(x).pow(2).mean())

    outs = {f"output_{i}": [0] for i in range(11)}
    _check(M(), ember.randn(3, 8), ember.randn(6, 8), input_names=["x"], dynamic_axes={"x": [0], **outs})


def test_indexing_a_parameter_with_traced_ids_and_floor_division():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.Parameter(ember.randn(10, 4))

        def forward(self, ids, x):
            rows = self.table[ids]  # (B, T, 4)
            return rows.sum(1) + x // 0.5, ember.div(x, 3.0, rounding_mode="floor")

    ids, x = ember.randint(0, 10, (2, 3)), ember.randn(2, 4)
    _check(M(), (ids, x), (ember.randint(0, 10, (5, 3)), ember.randn(5, 4)), input_names=["ids", "x"],
           dynamic_axes={"ids": [0], "x": [0], "output_0": [0], "output_1": [0]})
