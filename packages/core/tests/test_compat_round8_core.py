"""Compatibility fixes found by the eighth set of compat programs (core side): a scripted or
traced module's ``save``, complex ``uniform_`` / ``normal_`` (real and imaginary parts filled
as PyTorch fills them), and ``ember.__version__`` comparing as a version (``TorchVersion``).
Checked against PyTorch's behaviour where torch is installed."""

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
