"""Hostile input, round 4, nn: modules and functionals fed inputs too small for their windows,
states of the wrong shape or dtype, indices out of range (negative ones included) and masks of
the wrong shape. Each refusal names the module or op and the shapes involved, with PyTorch's
exception class where PyTorch refuses too; nothing reads out of range or writes before the
check (the core cases are in packages/core/tests/test_hostile_input_round4.py)."""

from __future__ import annotations

import ember
import ember.nn as nn
import ember.nn.functional as F
import pytest

try:
    import torch
except ImportError:  # the comparisons with PyTorch are skipped
    torch = None

# (call with `L` = ember or torch, `nn`, `F` bound; fragments of ember's message)
CASES = [
    ("F.conv2d(L.zeros(1, 1, 2, 2), L.zeros(1, 1, 3, 3))",
     ["convolution", "kernel (3, 3)", "padded input (2 + 2 * 0 = 2)"]),
    ("F.conv2d(L.zeros(1, 1, 5, 5), L.zeros(1, 1, 3, 3), dilation=3)",
     ["dilation (3, 3) spans 7 elements"]),
    ("F.conv2d(L.zeros(1, 2, 5, 5), L.zeros(1, 3, 3, 3))", ["to have 3 channels", "but it has 2"]),
    ("F.conv_transpose2d(L.zeros(1, 1, 1, 1), L.zeros(1, 1, 3, 3), padding=3)",
     ["conv_transpose", "would be -3"]),
    ("F.max_pool2d(L.zeros(1, 1, 2, 2), 3)", ["max_pool", "(1, 1, 2, 2)", "too small"]),
    ("F.max_pool3d(L.zeros(1, 1, 2, 2, 2), 3)", ["max_pool", "(1, 1, 2, 2, 2)"]),
    ("F.avg_pool2d(L.zeros(1, 1, 5, 5), 3, padding=2)", ["avg_pool2d", "at most half"]),
    ("F.lp_pool2d(L.zeros(1, 1, 2, 2), 2, 3)", ["(1, 1, 2, 2)", "too small"]),
    ("F.unfold(L.zeros(1, 1, 2, 2), 3)", ["im2col", "kernel (3, 3)"]),
    ("F.pad(L.zeros(1, 1, 3), (3, 3), mode='reflect')", ["reflect padding (3, 3)", "size 3"]),
    ("F.pad(L.zeros(1, 1, 3), (4, 4), mode='circular')", ["circular padding (4, 4)"]),
    ("F.max_unpool2d(L.ones(1, 1, 2, 2), L.tensor([[[[0, 1], [2, -1]]]]), 2)",
     ["invalid max index -1", "4x4"]),
    ("F.max_unpool2d(L.ones(1, 1, 2, 2), L.tensor([[[[0, 1], [2, 16]]]]), 2)",
     ["invalid max index 16"]),
    ("nn.LSTM(4, 8)(L.zeros(5, 2, 4), (L.zeros(1, 2, 7), L.zeros(1, 2, 8)))",
     ["LSTM", "h_0 of shape (1, 2, 8), got (1, 2, 7)"]),
    ("nn.LSTM(4, 8)(L.zeros(5, 2, 4), (L.zeros(1, 2, 8), L.zeros(1, 3, 8)))",
     ["c_0 of shape (1, 2, 8), got (1, 3, 8)"]),
    ("nn.RNN(4, 8, bidirectional=True)(L.zeros(5, 2, 4), L.zeros(1, 2, 8))",
     ["h_0 of shape (2, 2, 8)"]),
    ("nn.GRUCell(4, 8)(L.zeros(2, 4), L.zeros(2, 7))", ["GRUCell", "(2, 8), got (2, 7)"]),
    # an empty sequence: "list index out of range" before
    ("nn.LSTM(4, 8)(L.zeros(0, 2, 4))", ["LSTM", "sequence length", "(0, 2, 4)"]),
    ("nn.GRU(4, 8, batch_first=True)(L.zeros(2, 0, 4))", ["GRU", "sequence length"]),
    ("nn.RNN(4, 8)(L.zeros(0, 4))", ["RNN", "sequence length", "(0, 4)"]),
    # input or state of another dtype: "addmm: expected m1 and m2 to have the same dtype" before
    ("nn.GRU(4, 8)(L.zeros(5, 2, 4, dtype=L.float64))",
     ["GRU", "input dtype", "float64", "weight dtype", "float32"]),
    ("nn.LSTMCell(4, 8)(L.zeros(2, 4, dtype=L.float64))", ["LSTMCell", "float64", "float32"]),
    ("F.embedding(L.tensor([-1]), L.zeros(5, 3))", ["embedding", "-1", "[0, 5)"]),
    ("F.embedding(L.tensor([2**62]), L.zeros(5, 3))", ["embedding", "4611686018427387904"]),
    # with max_norm the renorm read the rows first: index_select's message, not embedding's
    ("F.embedding(L.tensor([-1]), L.ones(5, 3), max_norm=1.0)", ["embedding", "[0, 5)"]),
    ("F.embedding_bag(L.tensor([1, 2, 3]), L.zeros(5, 3), L.tensor([0, 2, 1]))",
     ["embedding_bag", "offsets must be non-decreasing"]),
    ("nn.MultiheadAttention(8, 2)(*[L.zeros(4, 2, 8)] * 3, attn_mask=L.zeros(3, 4))",
     ["MultiheadAttention", "(4, 4), got (3, 4)"]),
    ("nn.MultiheadAttention(8, 2)(*[L.zeros(4, 2, 8)] * 3, attn_mask=L.zeros(3, 4, 4))",
     ["3-D attn_mask", "(4, 4, 4), got (3, 4, 4)"]),
    # the kernel's "add: shapes (1, 2, 4, 4) and (3, 4) cannot be broadcast" before
    ("F.scaled_dot_product_attention(*[L.zeros(1, 2, 4, 8)] * 3, attn_mask=L.zeros(3, 4))",
     ["scaled_dot_product_attention", "attn_mask of shape (3, 4)", "L=4, S=4"]),
    ("F.multi_margin_loss(L.zeros(2, 3), L.tensor([0, 3]))", ["multi_margin_loss", "target 3"]),
    ("F.multilabel_margin_loss(L.zeros(2, 3), L.tensor([[0, 5, -1], [0, 1, 2]]))",
     ["multilabel_margin_loss", "class 5"]),
    ("F.ctc_loss(L.zeros(5, 1, 4).log_softmax(2), L.tensor([[1, 2]]), [6], [2])",
     ["ctc_loss", "at most 5", "6"]),
    ("F.fold(L.zeros(1, 9, 5), (4, 4), 3)", ["col2im", "4 blocks", "has 5"]),
]


def _outcome(lib, call):
    env = {"L": lib, "nn": lib.nn, "F": lib.nn.functional}
    try:
        eval(call, env)
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    return None, None


@pytest.mark.parametrize("call, fragments", CASES, ids=[c[0][:60] for c in CASES])
def test_bad_module_input_is_named(call, fragments):
    exc, msg = _outcome(ember, call)
    assert exc is not None, f"{call} did not raise"
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    if torch is not None:
        # PyTorch's class where PyTorch refuses too (its embedding_bag / max_unpool / ctc
        # refusals are RuntimeErrors like ember's; it reads a negative embedding row as an
        # IndexError, as ember does)
        texc, _ = _outcome(torch, call)
        if texc is not None:
            assert issubclass(exc, texc) or issubclass(texc, exc) or \
                (texc is RuntimeError and exc is ValueError), (call, exc, texc)


def test_embedding_max_norm_leaves_the_table_alone_on_a_bad_index():
    w = ember.ones(5, 3)
    with pytest.raises(IndexError):
        F.embedding(ember.tensor([0, 7]), w, max_norm=1.0)
    assert w.tolist() == [[1.0] * 3] * 5  # nothing renormed before the refusal
    out = F.embedding(ember.tensor([1]), w, max_norm=1.0)
    assert out.norm().item() == pytest.approx(1.0, abs=1e-6)


def test_rnn_still_runs_in_its_own_dtype():
    m = nn.LSTM(4, 8).double()
    out, (h, c) = m(ember.zeros(3, 2, 4, dtype=ember.float64))
    assert out.dtype == h.dtype == c.dtype == ember.float64
    cell = nn.GRUCell(4, 8)
    assert cell(ember.zeros(2, 4), ember.zeros(2, 8)).shape == (2, 8)
    with pytest.raises(RuntimeError, match="GRUCell: expected hx of dtype ember.float32"):
        cell(ember.zeros(2, 4), ember.zeros(2, 8, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="LSTM: expected hidden state h_0 of dtype"):
        nn.LSTM(4, 8)(ember.zeros(5, 2, 4), (ember.zeros(1, 2, 8, dtype=ember.float64),
                                             ember.zeros(1, 2, 8)))


def test_sdpa_masks_that_broadcast_still_work():
    q = ember.randn(1, 2, 4, 8)
    for mask in (ember.zeros(4), ember.zeros(1, 1), ember.zeros(2, 1, 4, 4), ember.tensor(0.0)):
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        assert out.shape[-2:] == (4, 8)
    ref = F.scaled_dot_product_attention(q, q, q)
    assert ember.allclose(F.scaled_dot_product_attention(q, q, q, attn_mask=ember.zeros(4, 4)),
                          ref, atol=1e-6)
