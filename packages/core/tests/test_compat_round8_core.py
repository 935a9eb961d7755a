"""Compatibility fixes found by the eighth set of compat programs (core side): a scripted or
traced module's ``save``, complex ``uniform_`` / ``normal_`` (real and imaginary parts filled
as PyTorch fills them), ``ember.__version__`` comparing as a version (``TorchVersion``),
``Generator.get_state`` as a uint8 tensor, graph recording switched off by inference mode even
under ``enable_grad``, and ``AccumulateGrad.variable``. Checked against PyTorch's behaviour
where torch is installed."""

from __future__ import annotations

import copy
import io
import pickle

import ember
import ember.nn as nn
import numpy as np
import pytest


# ---- ember.jit: ScriptModule.save on the (eager) scripted / traced module ----------------------
@pytest.mark.parametrize("how", ["script", "trace"])
def test_scripted_and_traced_modules_save(tmp_path, how):
    m = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    x = ember.randn(4, 3)
    s = ember.jit.script(m) if how == "script" else ember.jit.trace(m, (x,))
    assert s is m  # still the eager module, sharing its parameters
    path = str(tmp_path / "m.pt")
    s.save(path)
    loaded = ember.jit.load(path)
    assert ember.allclose(loaded(x), m(x))
    buf = io.BytesIO()
    s.save(buf)
    buf.seek(0)
    assert ember.allclose(ember.jit.load(buf)(x), m(x))
    # the module still pickles, deep-copies and lists the same state
    assert list(copy.deepcopy(s).state_dict()) == list(m.state_dict())
    assert ember.allclose(pickle.loads(pickle.dumps(s))(x), m(x))
    assert "save" not in dict(m.named_children())


def test_a_module_s_own_save_method_is_kept():
    class WithSave(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x)

        def save(self, path):
            return f"own save to {path}"

    m = ember.jit.script(WithSave())
    assert m.save("x") == "own save to x"
    f = ember.jit.script(lambda t: t + 1)  # functions are returned as they are
    assert not hasattr(f, "save") and f(ember.ones(1)).tolist() == [2.0]


# ---- complex random fills ----------------------------------------------------------------------
def test_complex_uniform_fills_both_parts():
    g = ember.Generator().manual_seed(1)
    z = ember.empty(20000, dtype=ember.cfloat).uniform_(-1.0, 3.0, generator=g)
    re, im = z.real.numpy(), z.imag.numpy()
    for part in (re, im):
        assert part.min() >= -1.0 and part.max() < 3.0
        assert abs(part.mean() - 1.0) < 0.05
    assert abs(np.corrcoef(re, im)[0, 1]) < 0.05
    # the same draws as the real view filled directly
    g.manual_seed(1)
    ref = ember.empty(20000, 2).uniform_(-1.0, 3.0, generator=g)
    np.testing.assert_array_equal(ember.view_as_real(z).numpy(), ref.numpy())


def test_complex_normal_splits_the_variance():
    z = ember.empty(40000, dtype=ember.cdouble).normal_(1.0, 2.0)
    assert z.dtype == ember.complex128
    for part in (z.real.numpy(), z.imag.numpy()):
        assert abs(part.mean() - 1.0) < 0.05  # the mean goes to both parts, as in torch
        assert abs(part.std() - 2.0 / np.sqrt(2)) < 0.05
    assert abs((z - (1 + 1j)).abs().pow(2).mean().item() - 4.0) < 0.15
    # real tensors and keyword calls are unchanged
    assert ember.zeros(3).normal_(std=0.0).tolist() == [0.0, 0.0, 0.0]
    assert ember.zeros(2).uniform_(to=0.0).tolist() == [0.0, 0.0]
    with pytest.raises(TypeError):
        ember.zeros(2, dtype=ember.int64).uniform_()


def test_complex_layers_initialize():
    lin = nn.Linear(4, 3, dtype=ember.cfloat)
    nn.init.xavier_uniform_(lin.weight)
    nn.init.normal_(lin.bias, std=0.5)
    assert lin.weight.dtype == ember.complex64 and bool((lin.weight.imag != 0).all())
    assert lin(ember.ones(2, 4, dtype=ember.cfloat)).shape == (2, 3)


def test_complex_fills_match_torch_statistics():
    torch = pytest.importorskip("torch")
    t = torch.empty(40000, dtype=torch.cfloat).normal_(0.5, 3.0)
    e = ember.empty(40000, dtype=ember.cfloat).normal_(0.5, 3.0)
    for a, b in ((t.real.std().item(), e.real.std().item()),
                 (t.imag.mean().item(), e.imag.mean().item())):
        assert abs(a - b) < 0.06


# ---- ember.__version__ compares as a version ---------------------------------------------------
def test_version_compares_as_a_version():
    from ember.torch_version import TorchVersion

    v = TorchVersion("1.10.2")
    assert isinstance(v, str) and v == "1.10.2" and hash(v) == hash("1.10.2")
    assert v > "1.9" and not str(v) > "1.9"  # as text, "1.9" sorts after "1.10.2"
    assert v >= (1, 10) and v < (1, 10, 3) and v <= "1.10.2" and not v > (2,)
    assert TorchVersion("2.1.0a0+git1") < (2, 1)  # a pre-release comes before the release
    assert TorchVersion("parrot") < "zebra"  # not a version: compared as text
    assert isinstance(ember.__version__, TorchVersion)
    assert ember.version.__version__ == ember.__version__
    assert ember.__version__ >= (0,) and ember.__version__.split(".")[0].isdigit()
    assert pickle.loads(pickle.dumps(ember.__version__)) == ember.__version__


def test_version_comparisons_match_torch():
    torch = pytest.importorskip("torch")
    from ember.torch_version import TorchVersion as EV
    from torch.torch_version import TorchVersion as TV

    cases = [("1.10.2", "1.9"), ("1.10.2", (1, 10)), ("2.1.0a0+git1", (2, 1)),
             ("2.1.0+cpu", "2.1.0"), ("0.0.0", "2.0"), ("parrot", "zebra"), ("2.0", (2, 0, 0))]
    for a, b in cases:
        for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
            assert getattr(EV(a), op)(b) == getattr(TV(a), op)(b), (a, b, op)
    assert type(torch.__version__).__name__ == type(ember.__version__).__name__


# ---- Generator state as a uint8 tensor ---------------------------------------------------------
def test_generator_state_is_a_byte_tensor():
    g = ember.Generator().manual_seed(7)
    ember.rand(5, generator=g)
    state = g.get_state()
    assert isinstance(state, ember.Tensor) and state.dtype == ember.uint8 and state.dim() == 1
    a = ember.randn(6, generator=g)
    g.set_state(state)
    assert ember.equal(ember.randn(6, generator=g), a)
    # through torch.save / a weights_only load, as checkpoints carry it
    buf = io.BytesIO()
    ember.save({"rng": state}, buf)
    buf.seek(0)
    g2 = ember.Generator()
    g2.set_state(ember.load(buf, weights_only=True)["rng"])
    assert ember.equal(ember.randn(6, generator=g2), a)
    # the default generator's state is the same kind of tensor
    s = ember.get_rng_state()
    assert ember.equal(s, ember.default_generator.get_state())
    x = ember.rand(3)
    ember.default_generator.set_state(s)
    assert ember.equal(ember.rand(3), x)


def test_generator_set_state_checks_its_argument():
    g = ember.Generator()
    with pytest.raises(TypeError, match="uint8"):
        g.set_state(ember.zeros(16))
    with pytest.raises(RuntimeError, match="uint8"):  # a wrong size: torch's RuntimeError
        g.set_state(ember.zeros(3, dtype=ember.uint8))
    g.set_state((5, 0))  # the (seed, offset) pair is still understood
    assert g.initial_seed() == 5


def test_generator_state_type_matches_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, ember):
        s = lib.Generator().get_state()
        assert s.dtype == lib.uint8 and s.dim() == 1


# ---- inference mode records nothing, even under enable_grad ------------------------------------
@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_enable_grad_inside_inference_mode_records_nothing(lib_name):
    lib = ember if lib_name == "ember" else pytest.importorskip("torch")
    a = lib.ones(2, requires_grad=True)
    with lib.inference_mode():
        with lib.enable_grad():
            assert lib.is_grad_enabled()
            b = a * 3
            c = lib.nn.functional.linear(a, lib.ones(2, 2))
        assert not lib.is_grad_enabled()
        with lib.inference_mode(False):
            d = a * 3
    assert not b.requires_grad and b.grad_fn is None and b.is_inference()
    assert not c.requires_grad
    assert d.requires_grad and d.grad_fn is not None and not d.is_inference()
    assert lib.is_grad_enabled()
    # outside inference mode recording is back
    e = a * 2
    e.sum().backward()
    assert a.grad.tolist() == [2.0, 2.0]


def test_set_grad_enabled_inside_inference_mode_restores_the_flag():
    a = ember.ones(2, requires_grad=True)
    with ember.inference_mode():
        ember.set_grad_enabled(True)
        assert ember.is_grad_enabled() and not (a * 2).requires_grad
        with ember.no_grad():
            assert not ember.is_grad_enabled()
        assert ember.is_grad_enabled()  # the guard restored the flag, not the effective mode
        ember.set_grad_enabled(False)
    assert ember.is_grad_enabled()


# ---- AccumulateGrad.variable -------------------------------------------------------------------
def test_accumulate_grad_names_its_leaf():
    x = ember.ones(3, requires_grad=True)
    w = ember.ones(3, requires_grad=True)
    y = (x * w).sum()
    mul = y.grad_fn.next_functions[0][0]
    leaves = [fn for fn, _ in mul.next_functions]
    assert [fn.name() for fn in leaves] == ["AccumulateGrad", "AccumulateGrad"]
    assert leaves[0].variable is x and leaves[1].variable is w
    with pytest.raises(AttributeError, match="variable"):
        mul.variable  # noqa: B018
    assert not hasattr(y.grad_fn, "variable")
