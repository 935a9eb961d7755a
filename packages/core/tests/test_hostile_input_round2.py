"""Hostile input, round 2: the Python-level API (nn modules and their constructors,
nn.functional, optimizers and schedulers, distributions, data loading, checkpoints, the
keyword forms of the sized ops) fed wrong dtypes, meta tensors, negative / huge / non-finite
sizes, expanded (stride 0) outputs for in-place ops, bad keywords and corrupted files.

Every case must raise a clear Python exception naming the op and what it expected -- never a
crash, a hang, an internal AttributeError / IndexError, or a silently wrong number. The cases
run in one child interpreter (each under faulthandler), so a segfault fails the tests with the
child's traceback instead of killing pytest; a few cases also check that what ember accepts it
computes correctly (against PyTorch where it is installed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import ember
import pytest
from core_helpers import needs_torch, torch

# (name, code evaluated with `t` = ember, `nn`, `F` bound, expected exception type, fragments
# its message must contain)
CASES = [
    # nn module constructors
    ("linear_negative", "nn.Linear(-1, 3)", "ValueError", ["Linear", "in_features", "-1"]),
    ("linear_float", "nn.Linear(2.5, 3)", "ValueError", ["Linear", "2.5"]),
    ("conv_groups", "nn.Conv2d(4, 6, 3, groups=4)", "ValueError", ["out_channels (6)", "groups"]),
    ("conv_padding_str", 'nn.Conv2d(1, 1, 3, padding="sideways")', "ValueError",
     ["Conv2d", "sideways"]),
    ("conv_zero_kernel_forward", "nn.Conv2d(1, 1, 0)(t.zeros(1, 1, 4, 4))", "RuntimeError",
     ["kernel_size", "positive"]),
    ("conv_negative_stride", "F.conv2d(t.zeros(1, 1, 4, 4), t.zeros(1, 1, 3, 3), stride=-1)",
     "RuntimeError", ["stride=(-1, -1)"]),  # torch's class
    ("conv_transpose_output_padding",
     "F.conv_transpose2d(t.zeros(1, 1, 4, 4), t.zeros(1, 1, 3, 3), stride=2, output_padding=3)",
     "RuntimeError", ["output_padding", "stride"]),
    ("dropout_p", "nn.Dropout(p=1.5)", "ValueError", ["Dropout", "1.5"]),
    ("groupnorm_divisible", "nn.GroupNorm(3, 4)", "ValueError", ["num_channels (4)", "(3)"]),
    ("mha_divisible", "nn.MultiheadAttention(10, 3)", "ValueError", ["embed_dim (10)", "(3)"]),
    ("lstm_layers", "nn.LSTM(4, 8, num_layers=0)", "ValueError", ["LSTM", "num_layers"]),
    ("lstm_dropout", "nn.LSTM(4, 8, dropout=2.0)", "ValueError", ["LSTM", "dropout"]),
    ("embedding_padding_idx", "nn.Embedding(5, 3, padding_idx=7)", "ValueError",
     ["padding_idx", "7"]),
    ("encoder_activation", 'nn.TransformerEncoderLayer(8, 2, activation="swish")',
     "RuntimeError", ["swish"]),
    # module / functional forward with bad input
    ("batchnorm_channels", "nn.BatchNorm2d(3)(t.zeros(2, 4, 2, 2))", "RuntimeError",  # torch's
     ["3 channels", "(2, 4, 2, 2)"]),
    ("layernorm_shape", "nn.LayerNorm(5)(t.zeros(2, 4))", "RuntimeError", ["(*, 5)", "(2, 4)"]),
    ("gru_hidden", "nn.GRU(4, 8)(t.zeros(5, 2, 4), t.zeros(1, 3, 8))", "RuntimeError",
     ["h_0", "(1, 2, 8)", "(1, 3, 8)"]),
    ("embedding_out_of_range", "nn.Embedding(5, 3)(t.tensor([5]))", "IndexError", ["[0, 5)"]),
    ("embedding_float_index", "nn.Embedding(5, 3)(t.tensor([1.0]))", "RuntimeError",
     ["integer", "float32"]),
    ("cross_entropy_target", "F.cross_entropy(t.zeros(2, 3), t.tensor([0, 3]))", "IndexError",
     ["target 3", "3 classes"]),
    ("nll_weight", "F.nll_loss(t.zeros(2, 3), t.tensor([0, 1]), weight=t.ones(4))",
     "RuntimeError", ["weight", "(4,)"]),
    ("one_hot_too_small", "F.one_hot(t.tensor([3]), num_classes=2)", "RuntimeError",
     ["num_classes=2"]),
    ("ctc_blank", "F.ctc_loss(t.zeros(5, 2, 4).log_softmax(2), t.ones(2, 3, dtype=t.long), "
     "t.tensor([5, 5]), t.tensor([3, 3]), blank=7)", "RuntimeError", ["ctc_loss", "blank", "7"]),
    ("ctc_label", "F.ctc_loss(t.zeros(5, 1, 4).log_softmax(2), t.tensor([[1, 9]]), [5], [2])",
     "RuntimeError", ["ctc_loss", "[0, 4)", "9"]),
    ("sdpa_integer_mask", "F.scaled_dot_product_attention(t.zeros(1, 4, 8), t.zeros(1, 4, 8), "
     "t.zeros(1, 4, 8), attn_mask=t.zeros(4, 4, dtype=t.int64))", "RuntimeError",
     ["attn_mask", "int64"]),
    ("interpolate_nan_scale", 'F.interpolate(t.zeros(1, 1, 4, 4), scale_factor=float("nan"))',
     "RuntimeError", ["interpolate", "finite"]),
    ("interpolate_inf_scale", 'F.interpolate(t.zeros(1, 1, 4, 4), scale_factor=float("inf"))',
     "RuntimeError", ["interpolate", "finite"]),
    ("interpolate_huge", "F.interpolate(t.zeros(1, 1, 4, 4), size=(2**40, 2**40))",
     "RuntimeError", ["too many elements"]),
    ("pad_odd", "F.pad(t.zeros(1, 1, 4), (1,))", "RuntimeError", ["pad", "even"]),  # torch's
    ("pixel_shuffle", "F.pixel_shuffle(t.zeros(1, 3, 2, 2), 2)", "RuntimeError",
     ["3 channels", "4"]),
    ("glu_odd", "F.glu(t.zeros(2, 3))", "RuntimeError", ["glu", "even"]),
    ("linear_none_input", "nn.Linear(3, 2)(None)", "TypeError",
     ["linear()", "'input'", "NoneType"]),
    ("conv_none_weight", "F.conv2d(t.zeros(1, 1, 4, 4), None)", "TypeError",
     ["conv2d()", "'weight'", "NoneType"]),
    ("interpolate_none", "F.interpolate(None, size=2)", "TypeError", ["interpolate()", "input"]),
    ("interpolate_float_size", "F.interpolate(t.zeros(1, 1, 4, 4), size=2.5)", "TypeError",
     ["interpolate", "size", "2.5"]),
    ("one_hot_bool_classes", "F.one_hot(t.tensor([0]), num_classes=True)", "TypeError",
     ["one_hot()", "num_classes", "bool"]),
    ("one_hot_negative_classes", "F.one_hot(t.tensor([0]), num_classes=-3)", "RuntimeError",
     ["one_hot", "-3"]),
    ("dropout_none", "F.dropout(t.ones(3), p=None)", "TypeError", ["dropout", "NoneType"]),
    # spectral
    ("istft_negative_length",
     "t.istft(t.stft(t.zeros(64), 16, window=t.hann_window(16), return_complex=True), 16, "
     "window=t.hann_window(16), length=-3)", "RuntimeError", ["istft", "length", "-3"]),
    ("istft_float_length",
     "t.istft(t.stft(t.zeros(64), 16, window=t.hann_window(16), return_complex=True), 16, "
     "window=t.hann_window(16), length=3.5)", "TypeError", ["istft", "length"]),
    ("stft_window", "t.stft(t.zeros(100), 16, window=t.ones(8), return_complex=True)",
     "RuntimeError", ["win_length=16", "(8,)"]),
    # in-place ops through an expanded (stride 0) view: one memory location, many elements
    ("index_add_expanded", "t.zeros(1).expand(3).index_add_(0, t.tensor([0]), t.ones(1))",
     "RuntimeError", ["index_add", "single memory location", "stride (0,)"]),
    ("index_copy_expanded", "t.zeros(1).expand(3).index_copy_(0, t.tensor([0]), t.ones(1))",
     "RuntimeError", ["index_copy", "single memory location"]),
    ("scatter_expanded", "t.zeros(1).expand(3).scatter_(0, t.tensor([0]), t.ones(1))",
     "RuntimeError", ["scatter", "single memory location"]),
    ("scatter_add_expanded", "t.zeros(1).expand(3).scatter_add_(0, t.tensor([0]), t.ones(1))",
     "RuntimeError", ["scatter_add", "single memory location"]),
    ("scatter_reduce_expanded",
     't.zeros(1).expand(3).scatter_reduce_(0, t.tensor([0]), t.ones(1), "amax")',
     "RuntimeError", ["scatter_reduce", "single memory location"]),
    ("index_add_out_expanded",
     "t.index_add(t.zeros(3), 0, t.tensor([0]), t.ones(1), out=t.zeros(1).expand(3))",
     "RuntimeError", ["index_add", "single memory location"]),
    ("lerp_expanded", "t.zeros(1).expand(3).lerp_(t.ones(3), 0.5)", "RuntimeError",
     ["lerp", "single memory location"]),
    ("foreach_expanded", "t._foreach_add_([t.zeros(1).expand(3)], [t.ones(3)])", "RuntimeError",
     ["single memory location"]),
    # sizes: keyword forms, overflow, bad types
    ("empty_overflow", "t.empty(2**40, 2**40)", "RuntimeError", ["too many elements"]),
    ("zeros_keyword_bad", 't.zeros(size="abc")', "TypeError", ["zeros", "size", "str"]),
    ("flip_keyword_unknown", "t.flip(t.ones(3), dimz=[0])", "TypeError", ["flip", "dimz"]),
    ("flip_keyword_twice", "t.flip(t.ones(3), 0, dims=[0])", "TypeError",
     ["flip", "multiple values", "dims"]),
    ("permute_keyword_duplicate", "t.ones(2, 3).permute(dims=(0, 0))", "RuntimeError",
     ["permute", "duplicate"]),
    ("reshape_keyword_bad", "t.ones(6).reshape(shape=(4, -1))", "RuntimeError",
     ["[4, -1]", "6"]),
    ("to_int_dtype", "t.ones(2).to(dtype=5)", "TypeError", ["to()", "dtype", "int"]),
    ("to_list_device", "t.ones(2).to(device=[0])", "TypeError", ["to()", "device", "list"]),
    ("to_bad_device", 't.ones(2).to("gpu")', "RuntimeError", ["gpu"]),
    # optimizers, schedulers, utilities
    ("sgd_lr", "t.optim.SGD([nn.Parameter(t.ones(2))], lr=-1)", "ValueError",
     ["SGD", "learning rate", "-1"]),
    ("adam_beta", "t.optim.Adam([nn.Parameter(t.ones(2))], betas=(1.5, 0.9))", "ValueError",
     ["Adam", "beta", "1.5"]),
    ("optim_non_leaf", "t.optim.SGD([t.ones(2, requires_grad=True) * 2], lr=0.1)",
     "ValueError", ["non-leaf"]),
    ("onecycle_steps", "t.optim.lr_scheduler.OneCycleLR(t.optim.SGD([nn.Parameter(t.ones(2))], "
     "lr=0.1), max_lr=1.0)", "ValueError", ["total_steps"]),
    ("clip_norm_type_no_grads", 'nn.utils.clip_grad_norm_([nn.Parameter(t.ones(2))], 1.0, '
     'norm_type="fro")', "ValueError", ["clip_grad_norm_", "norm_type", "fro"]),
    ("clip_norm_type", '(lambda p: (p.sum().backward(), nn.utils.clip_grad_norm_([p], 1.0, '
     'norm_type="fro")))(nn.Parameter(t.ones(4)))', "ValueError", ["norm_type", "fro"]),
    ("normal_scale", "t.distributions.Normal(0.0, -1.0)", "ValueError", ["scale", "GreaterThan"]),
    ("mixture_shapes", "t.distributions.MixtureSameFamily(t.distributions.Categorical("
     "logits=t.zeros(3)), t.distributions.Normal(t.zeros(4), t.ones(4)))", "ValueError",
     ["(3)", "(4)"]),
    ("dataloader_batch_size", "t.utils.data.DataLoader([1, 2, 3], batch_size=0)", "ValueError",
     ["batch_size"]),
    ("load_state_dict_shape",
     'nn.Linear(2, 2).load_state_dict({"weight": t.zeros(3, 3), "bias": t.zeros(2)})',
     "RuntimeError", ["size mismatch for weight"]),
    ("register_buffer_dot", 'nn.Module().register_buffer("a.b", t.zeros(1))', "KeyError",
     ["a.b"]),
    # factories and conversions
    ("tensor_ragged", "t.tensor([[1, 2], [3]])", "ValueError", ["length 2", "dim 1"]),
    ("tensor_huge_int", "t.tensor([2**70])", "ValueError", ["overflow"]),
    ("randperm_negative", "t.randperm(-3)", "RuntimeError", ["randperm", "-3"]),
    ("multinomial_negative", "t.multinomial(t.tensor([0.5, -0.1]), 1)", "RuntimeError",
     ["multinomial", "< 0"]),
    ("arange_nan", 't.arange(0, float("nan"))', "RuntimeError", ["arange", "nan"]),
    ("index_with_float", "t.zeros(3)[t.tensor([1.5])]", "IndexError", ["float32"]),
    ("bincount_negative", "t.bincount(t.tensor([-1, 2]))", "RuntimeError",
     ["bincount", "non-negative"]),
    ("quantile_q", "t.quantile(t.ones(3), 1.5)", "RuntimeError", ["quantile", "[0, 1]"]),
]

# The checkpoint cases write their files in the child: (name, file bytes expression, exception
# type, fragments); each file is loaded with weights_only=True.
LOAD_CASES = [
    ("load_empty", 'b""', "CheckpointError", ["0 bytes"]),
    ("load_wrong_magic", 'b"NOTACKPT" + bytes(200)', "CheckpointError", ["magic"]),
    ("load_truncated_ember", "GOOD[: len(GOOD) // 2]", "CheckpointError", ["truncated"]),
    ("load_flipped_header", "GOOD[:150] + bytes([GOOD[150] ^ 0xFF]) + GOOD[151:]",
     "CheckpointError", ["checksum"]),
    ("load_truncated_zip", "ZIP[: len(ZIP) // 2]", "CheckpointError", ["zip", "truncated"]),
    ("load_zip_with_evil_global", "EVIL_ZIP", "UnpicklingError", ["posix.system"]),
    ("load_raw_evil_pickle", "EVIL_PICKLE", "CheckpointError", ["posix.system"]),
]


def test_load_of_none_is_a_type_error():
    with pytest.raises(TypeError, match="ember.load: f must be a path or a binary file-like"):
        ember.load(None)


def test_numpy_scalars_still_pass_as_numbers():
    np = pytest.importorskip("numpy")
    F = ember.nn.functional
    assert F.one_hot(ember.tensor([1]), num_classes=np.int64(3)).tolist() == [[0, 1, 0]]
    assert F.dropout(ember.ones(2), p=np.float32(0.0)).tolist() == [1.0, 1.0]

_CHILD = r"""
import faulthandler, io, json, os, pickle, sys, tempfile, zipfile
faulthandler.enable()
import ember as t
import ember.nn as nn
import ember.nn.functional as F
import ember.optim.lr_scheduler
import ember.distributions
import ember.utils.data

cases = json.loads(sys.argv[1])
load_cases = json.loads(sys.argv[2])
env = {"t": t, "nn": nn, "F": F}


class Evil:
    def __reduce__(self):
        return (os.system, ("echo EXECUTED",))


d = tempfile.mkdtemp()
t.save({"w": t.arange(6.0)}, os.path.join(d, "good.pt"))
GOOD = open(os.path.join(d, "good.pt"), "rb").read()
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w") as z:  # a PyTorch-style archive: data.pkl, byteorder, version
    z.writestr("archive/data.pkl", pickle.dumps({"n": 3}, protocol=2))
    z.writestr("archive/byteorder", "little")
    z.writestr("archive/version", "3\n")
ZIP = buf.getvalue()
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w") as z:
    z.writestr("archive/data.pkl", pickle.dumps(Evil(), protocol=2))
    z.writestr("archive/version", "3\n")
EVIL_ZIP = buf.getvalue()
EVIL_PICKLE = pickle.dumps(Evil(), protocol=2)
files = {"GOOD": GOOD, "ZIP": ZIP, "EVIL_ZIP": EVIL_ZIP, "EVIL_PICKLE": EVIL_PICKLE}


def report(name, fn):
    try:
        r = fn()
    except BaseException as e:
        out = {"name": name, "exc": type(e).__name__, "msg": str(e)}
    else:
        out = {"name": name, "exc": None, "msg": repr(r)[:200]}
    print(json.dumps(out), flush=True)


for name, code in cases:
    report(name, lambda: eval(code, env))
for name, expr in load_cases:
    path = os.path.join(d, name + ".pt")
    with open(path, "wb") as f:
        f.write(eval(expr, files))
    report(name, lambda: t.load(path, weights_only=True))
"""


@pytest.fixture(scope="module")
def outcomes() -> dict:
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD),
         json.dumps([(n, c) for n, c, *_ in CASES]),
         json.dumps([(n, c) for n, c, *_ in LOAD_CASES])],
        capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"the child died (status {r.returncode}): {r.stderr[-3000:]}"
    assert "EXECUTED" not in r.stdout, "a checkpoint ran code while loading"
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    return {row["name"]: row for row in rows}


@pytest.mark.parametrize("name,code,exc,fragments", CASES + LOAD_CASES,
                         ids=[c[0] for c in CASES + LOAD_CASES])
def test_hostile_call_raises_a_clear_error(outcomes, name, code, exc, fragments):
    got = outcomes[name]
    assert got["exc"] == exc, f"{code}: expected {exc}, got {got}"
    for f in fragments:
        assert f in got["msg"], f"{code}: {f!r} not in {got['msg']!r}"


# ---- what the fixes accept, they compute correctly ------------------------------------------


def test_sized_ops_take_their_sizes_as_keywords():
    x = ember.arange(6.0).reshape(2, 3)
    assert ember.flip(x, dims=[0]).tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]
    assert x.flip(dims=(0, 1)).tolist() == [[5.0, 4.0, 3.0], [2.0, 1.0, 0.0]]
    assert ember.tile(x, dims=(1, 2)).shape == (2, 6)
    assert x.repeat(repeats=(2, 1)).shape == (4, 3)
    assert x.view(size=(3, 2)).shape == (3, 2)
    assert x.reshape(shape=(-1,)).shape == (6,)
    assert ember.reshape(x, shape=(3, 2)).shape == (3, 2)
    assert x.permute(dims=(1, 0)).shape == (3, 2)
    assert ember.permute(x, dims=(1, 0)).tolist() == x.t().tolist()
    assert x[:1].expand(size=(4, 3)).shape == (4, 3)
    assert ember.zeros(size=(2, 3), dtype=ember.int64).dtype == ember.int64
    assert ember.ones(size=3).tolist() == [1.0, 1.0, 1.0]
    assert ember.empty(size=(0,)).shape == (0,)
    assert ember.rand(size=(2,)).shape == (2,) and ember.randn(size=[2, 2]).shape == (2, 2)
    assert x.new_zeros(size=(2,)).tolist() == [0.0, 0.0]
    assert x.new_ones(size=(1,)).tolist() == [1.0] and x.new_empty(size=(3,)).shape == (3,)
    # the positional forms are unchanged
    assert ember.zeros(2, 3).shape == (2, 3) and ember.zeros((2, 3)).shape == (2, 3)
    assert x.permute(1, 0).shape == (3, 2) and x.flip(0).shape == (2, 3)


def test_index_ops_still_write_into_ordinary_views():
    base = ember.zeros(3, 4)
    col = base[:, 1]  # strided, not overlapping
    col.index_add_(0, ember.tensor([0, 2]), ember.ones(2))
    col.scatter_(0, ember.tensor([1]), ember.full((1,), 5.0))
    assert base[:, 1].tolist() == [1.0, 5.0, 1.0]
    out = ember.empty(3)
    ember.index_add(ember.zeros(3), 0, ember.tensor([1]), ember.ones(1), out=out)
    assert out.tolist() == [0.0, 1.0, 0.0]


def test_ctc_loss_ignores_padding_past_the_target_length():
    lp = ember.zeros(5, 1, 4).log_softmax(2)
    a = ember.nn.functional.ctc_loss(lp, ember.tensor([[1, 2, -1, 99]]), [5], [2])
    b = ember.nn.functional.ctc_loss(lp, ember.tensor([[1, 2]]), [5], [2])
    assert a.item() == pytest.approx(b.item())


def test_sdpa_float_and_bool_masks_still_work():
    q = ember.randn(1, 3, 4)
    F = ember.nn.functional
    keep = ember.tensor([[True, False, True]] * 3)
    additive = ember.zeros(3, 3).masked_fill(~keep, float("-inf"))
    a = F.scaled_dot_product_attention(q, q, q, attn_mask=keep)
    b = F.scaled_dot_product_attention(q, q, q, attn_mask=additive)
    assert ember.allclose(a, b, atol=1e-6)


def test_clip_grad_norm_accepts_number_strings_and_inf():
    p = ember.nn.Parameter(ember.ones(4))
    p.grad = ember.full((4,), 3.0)
    assert ember.nn.utils.clip_grad_norm_([p], 100.0, norm_type="inf").item() == 3.0
    assert ember.nn.utils.clip_grad_norm_([p], 100.0, norm_type=1).item() == 12.0


@needs_torch
def test_polar_gradients_match_torch():
    rng = __import__("numpy").random.default_rng(0)
    mag_np, ang_np = rng.uniform(0.5, 2, (3, 4)), rng.uniform(-3, 3, (3, 4))
    w_np = rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))
    grads = []
    for lib in (ember, torch):
        mag = lib.tensor(mag_np, requires_grad=True)
        ang = lib.tensor(ang_np[:1], requires_grad=True)  # broadcast along dim 0
        z = lib.polar(mag, ang)
        loss = (z * lib.tensor(w_np)).real.sum() + z.abs().pow(2).sum()
        loss.backward()
        grads.append((mag.grad.numpy(), ang.grad.numpy()))
    for a, b in zip(grads[0], grads[1]):
        assert a.shape == b.shape
        assert abs(a - b).max() < 1e-10


def test_istft_length_zero_is_empty():
    w = ember.hann_window(16)
    spec = ember.stft(ember.randn(64), 16, window=w, return_complex=True)
    assert ember.istft(spec, 16, window=w, length=0).shape == (0,)
    assert ember.istft(spec, 16, window=w, length=ember.tensor(8)).shape == (8,)



@pytest.mark.parametrize("call", [
    lambda a, out: ember.mm(a, a, out=out),
    lambda a, out: ember.addmm(a, a, a, out=out),
    lambda a, out: ember.matmul(a.t(), a, out=out),
    lambda a, out: ember.cumsum(a, 0, out=out),
    lambda a, out: ember.cumprod(a, 1, out=out),
    lambda a, out: ember.mul(a, a, out=out),
], ids=["mm", "addmm", "matmul", "cumsum", "cumprod", "mul"])
def test_out_aliasing_an_input_gives_the_true_result(call):
    # out= that is also an input: the answer is the one computed from the inputs' old values
    # (PyTorch's mm / addmm overwrite the input while still reading it and return garbage)
    a = ember.arange(1.0, 5.0).reshape(2, 2)
    want = call(a, None)
    got = call(a, a)
    assert got.data_ptr() == a.data_ptr()
    assert a.tolist() == want.tolist()


@pytest.mark.parametrize("call", [
    lambda x: x[1:].copy_(x[:-1]),
    lambda x: x[:-1].copy_(x[1:]),
    lambda x: x.view(2, 5).copy_(x.view(5, 2).t()),
], ids=["shift_right", "shift_left", "transpose"])
def test_copy_between_partly_overlapping_views_is_refused(call):
    # the copy would read elements it already overwrote (silently wrong before; an overlapping
    # memcpy on a GPU): refused with torch's message
    x = ember.arange(10.0)
    with pytest.raises(RuntimeError, match="copy_: unsupported operation: some elements"):
        call(x)
    assert x.tolist() == list(map(float, range(10)))


def test_copy_that_may_alias_still_works():
    x = ember.arange(10.0)
    x.copy_(x)  # the very same elements
    x[5:].copy_(x[:5])  # disjoint halves of one storage
    x[1:3].copy_(x[0])  # a one-element source
    assert x.tolist() == [0.0, 0.0, 0.0, 3.0, 4.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    y = ember.arange(10.0)
    y[1:] = y[:-1]  # setitem reads its source before writing: the true shift
    assert y.tolist() == [0.0] + list(map(float, range(9)))
