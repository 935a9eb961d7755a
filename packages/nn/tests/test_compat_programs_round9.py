"""The ninth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
Tensor subclasses and duck types with __torch_function__ and the torch.overrides helpers, custom
operators through torch.library, second-order optimization with torch.autograd.functional and
torch.func, how tensors print, the default dtype and device, the nn.Module state_dict machinery,
checkpoint formats and weights-only allowlists, resampling and patch operators, torch.testing's
assert_close messages, the torch.nn.utils toolbox, and attention masks through nn.Transformer.

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance."""

from __future__ import annotations

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_tensor_subclass_overrides(capsys):
    # a HANDLED_FUNCTIONS duck type, handle_torch_function / wrap_torch_function, a unit-carrying
    # subclass built with as_subclass in __new__, a LoggingTensor through training, a
    # TorchFunctionMode, DisableTorchFunctionSubclass, the overridable / ignored tables
    got = _check("tensor_subclass_overrides.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, linear_calls = _results(got)
    assert last < 0.1 * first and linear_calls == 120
    assert ": False" not in got
    assert "unit tensor: UnitTensor [0.5, 1.0, 2.0] 'm'" in got
    assert "sum keeps the subclass: UnitTensor m 7.0" in got
    assert "unit mismatch: unit mismatch ['m', 's']" in got
    assert "output type LoggingTensor loss type LoggingTensor" in got
    assert "model forward under the mode: 2 linear 1 relu" in got
    assert "resolve_name torch.add torch.Tensor.add torch.nn.functional.relu" in got


def test_custom_ops_library(capsys):
    # custom_op + register_fake + register_autograd (NumPy body), a mutating op,
    # register_kernel("cpu"), Library("...", "DEF") define / impl for CPU, Meta and
    # CompositeImplicitAutograd, infer_schema, a model trained through the custom ops
    got = _check("custom_ops_library.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, worst = _results(got)
    assert last < 0.05 * first and worst < 1e-4
    assert ": False" not in got
    assert "on meta: meta (3, 5) torch.float32" in got
    assert "mutated in place: True [0.0, 0.47943, 0.84147, 0.99749]" in got
    assert "schema (Tensor x, SymInt n, float alpha=1.0) -> Tensor" in got
    assert "cpu kernel calls 41" in got


def test_newton_functional(capsys):
    # Newton's method from autograd.functional.hessian, Levenberg-Marquardt with forward-mode
    # jacobians, CG on hvp, vjp / jvp / vhp, create_graph, strict; torch.func hessian /
    # jacfwd(jacrev) / grad_and_value / vmap / linearize on a module
    got = _check("newton_functional.py", capsys, rtol=1e-5, atol=1e-6)
    first, last, lm = _results(got)
    assert last < 0.2 * first and lm < 1e-8
    assert ": False" not in got
    assert "truncated newton: f 1.291e-04" in got
    assert "func.jvp 8.0 12.0 func.vjp [1.0, 2.71828]" in got


def test_tensor_printing(capsys):
    # every set_printoptions knob, int / bool / complex / half / empty / 0-d / summarized
    # tensors, requires_grad and grad_fn (PyTorch's node names), the default dtype's suffix
    got = _check("tensor_printing.py", capsys, rtol=0, atol=0)
    lines, numel, precision = _results(got)
    assert numel == 2000 and precision == 4
    assert "tensor([ 0.5000, -1.0000], requires_grad=True)" in got
    assert "tensor(1.2500, grad_fn=<SumBackward0>)" in got
    assert "tensor(0.3377, grad_fn=<NllLossBackward0>)" in got
    assert "tensor(1.6250, grad_fn=<MaxBackward1>) tensor([1.6250], grad_fn=<MaxBackward0>)" in got
    assert "grad_fn=<ToCopyBackward0>" in got and "grad_fn=<SliceBackward0>" in got
    assert "['ToCopyBackward0', 'ExpandBackward0', 'PermuteBackward0', 'Log1PBackward0']" in got
    assert "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03," in got


def test_default_dtype_device(capsys):
    # set_default_dtype and its effect on factories, layers and promotion, set_default_tensor_type,
    # set_default_device("meta"), the torch.device context, to_empty + initialization
    got = _check("default_dtype_device.py", capsys, rtol=1e-4, atol=1e-9)
    err, n_meta, n_cpu = _results(got)
    assert err < 1e-6 and n_meta == n_cpu == 535562
    assert ": False" not in got.replace("is_meta False", "")
    assert "layers torch.float64 torch.float64 torch.float64 torch.int64 torch.float64" in got
    assert "default device meta: meta meta meta meta cpu" in got
    assert "torch.device context: meta meta after cpu" in got


def test_state_dict_hooks(capsys):
    # persistent=False buffers, extra state, a versioned migration in _load_from_state_dict,
    # state_dict / load_state_dict hooks, strict errors, assign=True, traversal helpers
    got = _check("state_dict_hooks.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, n_keys = _results(got)
    assert last < 0.2 * first and n_keys == 7
    assert "migrated v1 checkpoint: [] [] [1.5, 1.5, 1.5, 1.5] calls 0" in got
    assert "load hooks: [('pre', ''), ('post', 1)] result [] []" in got
    assert "get_submodule error: Sequential has no attribute `7`" in got
    assert "get_submodule error: `weight` is not an nn.Module" in got
    assert "set_submodule strict error: Sequential has no attribute `5`" in got
    assert "module duplicates 7 10" in got


def test_checkpoint_formats(capsys):
    # nested containers, namedtuples under weights_only, shared storage and views, allowlists,
    # get_unsafe_globals_in_checkpoint, map_location forms, mmap, the legacy flag, BytesIO
    got = _check("checkpoint_formats.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, files = _results(got)
    assert last < 0.5 * first and files == 5
    assert ": False" not in got.replace("cleared: False", "")
    assert "unsafe globals in it: ['Stats']" in got
    assert "namedtuple kept: Stats [2.0, 3.0]" in got
    assert "view shares storage after load: True offset 2 stride (3, 1)" in got


def test_resampling_ops(capsys):
    # affine_grid + grid_sample in every mode / padding / align_corners, gradients through a
    # flow warp (none on the borders), interpolate modes and antialias, pixel (un)shuffle,
    # unfold / fold, an ESPCN upsampler
    got = _check("resampling_ops.py", capsys, rtol=2e-4, atol=5e-5)
    first, last, fold_err = _results(got)
    assert last < 0.5 * first and fold_err == 0.0
    assert "unshuffle round trip True" in got and "non-overlapping fold == identity: True" in got
    assert "warp grads 33.75000 2.09401 -2.74642 -5.39899 1.76255 -7.01417" in got


def test_testing_assert_close(capsys):
    # assert_close's default tolerances and full messages, containers, msg, make_tensor
    got = _check("testing_assert_close.py", capsys, rtol=0, atol=1e-9)
    passed, caught, err = _results(got)
    assert passed == 12 and caught == 23 and err < 1e-6
    assert "UNEXPECTED" not in got and ": False" not in got
    assert "   | Greatest absolute difference: 0.0009999275207519531 at index (1,) (up to " \
           "1e-05 allowed)" in got
    assert "No comparison pair was able to handle inputs of type <class 'torch.Tensor'> and " \
           "<class 'float'>." in got
    assert "   | The values for attribute 'stride()' do not match: (3, 1) != (1, 2)." in got


def test_nn_utils_toolbox(capsys):
    # clip_grad_norm_ variants, get_total_norm / clip_grads_with_norm_, flat parameters,
    # weight_norm / spectral_norm parametrizations, Conv/Linear + BN fusion, pad_sequence left
    got = _check("nn_utils_toolbox.py", capsys, rtol=2e-3, atol=2e-4)
    first, last, fusion = _results(got)
    assert last < 0.01 * first and fusion < 1e-4
    assert ": False" not in got.replace("removed: False", "")
    assert "pad left [[1, 2, 3], [-1, -1, 4], [-1, 5, 6]]" in got
    assert "removed: False Parameter ['bias', 'weight']" in got


def test_transformer_masks(capsys):
    # float / bool / causal masks, key padding masks, per-head 3-D masks, MHA options, sdpa,
    # a full nn.Transformer, the encoder's nested-tensor fast path zeroing padded positions,
    # torch.masked pooling and softmax
    got = _check("transformer_masks.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.5 * first and acc > 0.4
    assert ": False" not in got
    assert "nested fast path: real tokens agree True padded rows [0.25, 0.25, 0.25, 0.25, " \
           "0.25, 0.25]" in got
    assert "need_weights=False -> None (2, 5, 8)" in got
    assert "masked softmax: padded weight 0.0 rows sum to 1: True" in got
    assert "warning for batch_first=False: ['enable_nested_tensor is True, but " \
           "self.use_nested_tensor is False because encoder_layer.self_attn.batch_first was " \
           "not True(use batch_first for better inference performance)']" in got


def test_numpy_pytree_interop(capsys):
    # memory sharing both ways, dtype mappings, NumPy scalars in arithmetic, read-only and
    # negative-stride arrays, numpy(force=True), DLPack, torch.utils._pytree with a registered
    # dataclass, lstsq against NumPy
    got = _check("numpy_pytree_interop.py", capsys, rtol=1e-6, atol=1e-9)
    diff, leaves, shared = _results(got)
    assert diff < 1e-10 and leaves == 7 and shared == 4
    assert ": False" not in got.replace("with dtype copies: False", "").replace(
        "torch.tensor copies: False", "")
    assert "np.float64 * tensor: Tensor torch.float32 [2.0, 4.0]" in got
    assert "non-writable array: [0.0, 1.0, 2.0] shared: True" in got
    assert "tree_map keeps structure: Batch [0, 2] Extras w [1.0, 3.0] None 5" in got


def test_fx_graph_passes(capsys):
    # symbolic_trace, node walks (F.relu's recorded inplace keyword), relu -> gelu, Conv+BN
    # fusion by graph surgery, ShapeProp, an Interpreter, replace_pattern, leaf modules,
    # concrete_args, fine-tuning the rewritten module
    got = _check("fx_graph_passes.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, nodes = _results(got)
    assert last < 0.1 * first and nodes == 14
    assert ": False" not in got
    assert "  call_function  relu             relu         users=2 args=1 kwargs=['inplace']" \
        in got
    assert "fused conv+bn pairs: 2 fused == eager: True batchnorms left: 0" in got
    assert "  shape flatten          (2, 64) torch.float32" in got
    assert "replace_pattern matches: 1 same output: True silu in code: True" in got
