"""ember.amp.autocast on core ops, ember.backends, ember.cuda seeds, ember.compile and the
float32 matmul precision switch (issue 15 item 10), against torch where it is installed."""

from __future__ import annotations

import threading
import warnings

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch


def _np(t):
    return t.float().numpy() if isinstance(t, ember.Tensor) else t.float().detach().numpy()


# ---- autocast -----------------------------------------------------------------------------------

OPS = {
    "matmul": lambda m, a, b: m.matmul(a, b),
    "operator@": lambda m, a, b: a @ b,
    "method": lambda m, a, b: a.matmul(b),
    "mm": lambda m, a, b: m.mm(a, b),
    "addmm": lambda m, a, b: m.addmm(m.ones(a.shape[0], b.shape[1]), a, b),
    "bmm": lambda m, a, b: m.bmm(a[None], b[None])[0],
    "baddbmm": lambda m, a, b: m.baddbmm(m.zeros(1, a.shape[0], b.shape[1]), a[None], b[None])[0],
}


@needs_torch
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", list(OPS))
def test_autocast_cpu_products_match_torch(op, dtype):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
    with ember.autocast("cpu", dtype=getattr(ember, dtype)):
        e = OPS[op](ember, ember.tensor(a), ember.tensor(b))
    with torch.autocast("cpu", dtype=getattr(torch, dtype)):
        t = OPS[op](torch, torch.tensor(a), torch.tensor(b))
    assert repr(e.dtype) == f"ember.{dtype}" and t.dtype == getattr(torch, dtype)
    np.testing.assert_allclose(_np(e), _np(t), rtol=2e-2, atol=2e-2)
    # and outside the region, float32 again
    assert OPS[op](ember, ember.tensor(a), ember.tensor(b)).dtype is ember.float32


def test_autocast_really_computes_in_bfloat16():
    a = ember.tensor([[1.0 + 2**-10]])  # not representable in bfloat16 (8 bits of mantissa)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        assert (a @ ember.ones(1, 1)).item() == 1.0
    assert (a @ ember.ones(1, 1)).item() == 1.0 + 2**-10


def test_autocast_keeps_float64_and_gradients_reach_float32_leaves():
    d = ember.ones(2, 2, dtype=ember.float64)
    w = ember.randn(3, 2, requires_grad=True)
    x = ember.randn(4, 3)
    with ember.autocast("cpu"):
        assert (d @ d).dtype is ember.float64  # float64 is not eligible, as in torch
        y = x @ w
        assert y.dtype is ember.bfloat16 and ember.get_autocast_dtype("cpu") is ember.bfloat16
    y.float().sum().backward()
    assert w.grad.dtype is ember.float32 and w.grad.shape == (3, 2)
    np.testing.assert_allclose(w.grad.numpy(), np.repeat(x.sum(0).numpy()[:, None], 2, 1),
                               rtol=2e-2, atol=2e-2)


def test_autocast_nesting_state_and_decorator():
    assert not ember.is_autocast_enabled("cpu") and not ember.is_autocast_enabled()
    with ember.autocast("cpu"):
        assert ember.is_autocast_enabled("cpu") and not ember.is_autocast_enabled()
        with ember.autocast("cpu", enabled=False):
            assert not ember.is_autocast_enabled("cpu")
            assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype is ember.float32
        with ember.autocast("cpu", dtype=ember.float16):
            assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype is ember.float16
        assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype is ember.bfloat16
    assert not ember.is_autocast_enabled("cpu")
    # the wrappers are gone once no region is active
    assert not getattr(ember.matmul, "__wrapped_by_autocast__", False)

    @ember.autocast("cpu")
    def f(a):
        return a @ a

    assert f(ember.ones(2, 2)).dtype is ember.bfloat16
    assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype is ember.float32


def test_autocast_state_is_per_thread():
    seen = {}

    def other():
        seen["dtype"] = (ember.ones(2, 2) @ ember.ones(2, 2)).dtype
        seen["enabled"] = ember.is_autocast_enabled("cpu")

    with ember.autocast("cpu"):
        th = threading.Thread(target=other)
        th.start()
        th.join()
    assert seen == {"dtype": ember.float32, "enabled": False}


def test_autocast_weight_casts_are_cached_within_a_region():
    w = ember.randn(3, 3, requires_grad=True)
    from ember.amp import autocast_mode

    with ember.autocast("cpu"):
        a = autocast_mode._cast(w, "lower")
        b = autocast_mode._cast(w, "lower")
        assert a is b
    with ember.autocast("cpu"):
        assert autocast_mode._cast(w, "lower") is not a  # cleared when the region ended


def test_autocast_cache_and_nesting_functions_like_torch():
    from ember.amp import autocast_mode

    w = ember.randn(3, 3, requires_grad=True)
    assert ember.is_autocast_cache_enabled() is True
    with ember.autocast("cpu"):
        a = autocast_mode._cast(w, "lower")
        ember.clear_autocast_cache()  # forgotten: the next cast is a new tensor
        assert autocast_mode._cast(w, "lower") is not a
        ember.set_autocast_cache_enabled(False)
        try:
            assert not ember.is_autocast_cache_enabled()
            assert autocast_mode._cast(w, "lower") is not autocast_mode._cast(w, "lower")
        finally:
            ember.set_autocast_cache_enabled(True)
    # The low-level pair of custom autocast context managers: depths as torch counts them.
    base = ember.autocast_increment_nesting()
    assert ember.autocast_increment_nesting() == base + 1
    assert ember.autocast_decrement_nesting() == base
    assert ember.autocast_decrement_nesting() == base - 1
    if torch is not None:
        tb = torch.autocast_increment_nesting()
        assert (tb, torch.autocast_decrement_nesting()) == (base, base - 1)
        assert torch.is_autocast_cache_enabled() is ember.is_autocast_cache_enabled()


def test_autocast_bad_arguments():
    with pytest.raises(RuntimeError, match="device type 'tpu'"):
        ember.autocast("tpu")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with ember.autocast("cpu", dtype=ember.int32):
            assert not ember.is_autocast_enabled("cpu")
    assert any("autocast is disabled" in str(x.message) for x in w)


@needs_torch
def test_cuda_autocast_without_cuda_disables_itself_like_torch():
    if ember.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.warns(UserWarning):
        ctx = ember.cuda.amp.autocast()
    with ctx:
        assert not ember.is_autocast_enabled()
    with pytest.warns(UserWarning, match="not available"):
        s = ember.cuda.amp.GradScaler()
    assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}


def test_cuda_amp_names_are_deprecated_like_torch():
    # PyTorch's torch.cuda.amp spellings each give a FutureWarning naming the torch.amp one,
    # attributed to the caller's line.
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ember.cuda.amp.autocast()
        ember.cuda.amp.GradScaler(enabled=False)
        ember.cuda.amp.custom_fwd(lambda x: x)
        ember.cuda.amp.custom_bwd(lambda x: x)
    future = [x for x in w if x.category is FutureWarning]
    assert [str(x.message).split("(")[0] for x in future] == [
        "`ember.cuda.amp.autocast", "`ember.cuda.amp.GradScaler", "`ember.cuda.amp.custom_fwd",
        "`ember.cuda.amp.custom_bwd"]
    assert "ember.amp.autocast('cuda', args...)" in str(future[0].message)
    assert all(x.filename == __file__ for x in future)


# ---- backends, seeds, compile, precision --------------------------------------------------------

@needs_torch
def test_backend_flags_exist_with_torchs_defaults():
    import ember.backends.cudnn as cudnn

    tb = torch.backends
    for name in ("benchmark", "deterministic", "enabled", "allow_tf32"):
        assert getattr(cudnn, name) == getattr(tb.cudnn, name)
    assert ember.backends.cuda.matmul.allow_tf32 == tb.cuda.matmul.allow_tf32
    assert ember.backends.mps.is_available() is False
    assert ember.backends.mps.is_built() is False
    # True only where the CUDA extension finds NVIDIA's cuDNN wheel (test_cuda_cudnn_conv.py).
    assert ember.backends.cudnn.is_available() in (True, False)
    assert ember.backends.mkldnn.is_available() is False
    assert ember.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2", "AVX512")
    assert ember.get_float32_matmul_precision() == torch.get_float32_matmul_precision()


def test_backend_flags_are_settable_and_scoped():
    import ember.backends.cudnn as cudnn

    cudnn.benchmark = True
    cudnn.deterministic = True
    try:
        assert ember.backends.cudnn.benchmark and ember.backends.cudnn.deterministic
        with cudnn.flags(enabled=False, benchmark=False):
            assert not cudnn.enabled and not cudnn.benchmark
        assert cudnn.enabled and cudnn.benchmark
    finally:
        cudnn.benchmark = cudnn.deterministic = False


@needs_torch
def test_matmul_precision_ties_to_tf32_like_torch():
    try:
        for prec in ("high", "medium", "highest"):
            ember.set_float32_matmul_precision(prec)
            torch.set_float32_matmul_precision(prec)
            assert ember.get_float32_matmul_precision() == prec
            assert ember.backends.cuda.matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32
        ember.backends.cuda.matmul.allow_tf32 = True
        assert ember.get_float32_matmul_precision() == "high"
        with pytest.raises(RuntimeError, match="expected one of highest"):
            ember.set_float32_matmul_precision("fast")
    finally:
        ember.set_float32_matmul_precision("highest")
        torch.set_float32_matmul_precision("highest")


def test_cuda_seeds_without_a_gpu():
    ember.cuda.manual_seed(1)
    ember.cuda.manual_seed_all(2)
    assert ember.cuda.seed() is None and ember.cuda.seed_all() is None
    if not ember.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            ember.cuda.initial_seed()
    # the CPU generator is untouched by CUDA seeding
    ember.manual_seed(5)
    a = ember.rand(3)
    ember.manual_seed(5)
    ember.cuda.manual_seed_all(7)
    assert ember.equal(ember.rand(3), a)


def test_cond_runs_the_chosen_branch_like_torch():
    x = ember.tensor([1.0, 2.0])
    assert ember.cond(x.sum() > 2, lambda t: t * 2, lambda t: t - 1, (x,)).tolist() == [2.0, 4.0]
    assert ember.cond(ember.tensor(0.0), lambda t: t * 2, lambda t: t - 1, [x]).tolist() == [0.0, 1.0]
    assert ember.cond(1, lambda: "yes", lambda: "no") == "yes"
    # gradients flow through the branch taken
    w = ember.tensor([3.0], requires_grad=True)
    ember.cond(True, lambda a: (a * a).sum(), lambda a: a.sum(), (w,)).backward()
    assert w.grad.tolist() == [6.0]
    with pytest.raises(RuntimeError, match="single-element tensor, but got a tensor of shape"):
        ember.cond(ember.tensor([True, False]), lambda: 1, lambda: 2)
    with pytest.raises(RuntimeError, match="expected pred to be a bool or a tensor"):
        ember.cond("a", lambda: 1, lambda: 2)
    with pytest.raises(TypeError, match="true_fn must be callable"):
        ember.cond(True, 1, lambda: 2)


def test_compile_returns_the_function_unchanged_with_one_note():
    import ember._compile as comp

    comp._noted = False

    def f(x):
        return x * 2

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert ember.compile(f) is f
        assert ember.compile(f, mode="reduce-overhead") is f
        assert ember.compile(backend="eager")(f) is f
    notes = [x for x in w if "ember.compile" in str(x.message)]
    assert len(notes) == 1
    with pytest.raises(RuntimeError, match="expected a callable"):
        ember.compile(3)


def test_dynamo_names_scripts_touch_run_eagerly():
    # `import torch._dynamo; torch._dynamo.config.suppress_errors = True; torch._dynamo.reset()`
    import importlib

    dynamo = importlib.import_module("ember._dynamo")
    config = dynamo.config
    saved = config.suppress_errors, config.cache_size_limit
    try:
        assert saved == (False, 8)  # PyTorch's defaults
        config.suppress_errors = True
        config.cache_size_limit = 64
        assert importlib.import_module("ember._dynamo.config").cache_size_limit == 64
        with pytest.raises(AttributeError, match="config.no_such_flag does not exist"):
            config.no_such_flag = 1
        with pytest.raises(AttributeError, match="does not exist"):
            config.no_such_flag
    finally:
        config.suppress_errors, config.cache_size_limit = saved
    assert dynamo.reset() is None and dynamo.is_compiling() is False
    x = ember.ones(2, 3)
    dynamo.mark_dynamic(x, [0, -1])
    dynamo.maybe_mark_dynamic(x, 1)
    with pytest.raises(IndexError, match="dim 2 out of range"):
        dynamo.mark_dynamic(x, 2)
    with pytest.raises(TypeError, match="expected a Tensor"):
        dynamo.mark_dynamic([1, 2], 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = dynamo.optimize("eager")(lambda t: t * 2)
    assert f(x).tolist() == [[2.0] * 3] * 2
    assert ember._dynamo is dynamo  # reachable as an attribute after `import ember`
