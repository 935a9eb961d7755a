"""C++ extensions written as for PyTorch (``#include <torch/extension.h>``) and built with
``ember.utils.cpp_extension``: load_inline with ``functions=``, the C++ frontend (generated op
functions and methods with the schemas' defaults, options, accessors, AT_DISPATCH, TORCH_CHECK,
from_blob), tensors crossing into Python with their identity, autograd through C++ ops and
C++-driven backward, errors mapped to ember's exceptions, and a setup.py build with
CppExtension/BuildExtension. The extension is tests/cpp_extension/frontend_ops.cpp, compiled
once per session (cached across sessions while sources and headers are unchanged)."""

from __future__ import annotations

import gc
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import ember
import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
HERE = Path(__file__).parent / "cpp_extension"
FUNCTIONS = ["lltm_forward", "softclip", "row_sums", "reductions", "shapes", "factories",
             "describe", "in_place", "numbers_first", "out_variant", "to_double", "item_of",
             "maybe_add", "undefined", "pair", "grad_of_cube", "blob", "freed",
             "check_positive", "bad_matmul", "size_of", "value_check", "indexed", "index_put",
             "scaled_square", "exp_and_argmax", "bad_backward"]


@pytest.fixture(scope="module")
def ext():
    from ember.utils import cpp_extension

    return cpp_extension.load_inline("ember_test_frontend", (HERE / "frontend_ops.cpp").read_text(),
                                     functions=FUNCTIONS)


def _np(t):
    return t.detach().numpy() if isinstance(t, ember.Tensor) else np.asarray(t)


def test_lltm_forward_and_backward_match_python(ext):
    g = ember.Generator().manual_seed(0)
    x, h, c = (ember.randn(4, n, generator=g, dtype=ember.float64) for n in (3, 5, 5))
    w = ember.randn(15, 8, generator=g, dtype=ember.float64, requires_grad=True)
    b = ember.randn(15, generator=g, dtype=ember.float64, requires_grad=True)
    new_h, new_c, gate = ext.lltm_forward(x, w, b, h, c)

    gates = ember.addmm(b, ember.cat([h, x], 1), w.t()).chunk(3, 1)
    ig, og = ember.sigmoid(gates[0]), ember.sigmoid(gates[1])
    ref_c = c + ember.nn.functional.elu(gates[2]) * ig
    ref_h = ember.tanh(ref_c) * og
    np.testing.assert_allclose(_np(new_h), _np(ref_h), rtol=1e-12)
    np.testing.assert_allclose(_np(new_c), _np(ref_c), rtol=1e-12)
    np.testing.assert_allclose(_np(gate), _np(ig), rtol=1e-12)
    # the C++ ops recorded autograd history: gradients flow back to w and b
    assert new_h.grad_fn is not None and new_h.requires_grad
    gw, gb = ember.autograd.grad((new_h * new_c).sum(), [w, b])
    rw, rb = ember.autograd.grad((ref_h * ref_c).sum(), [w, b])
    np.testing.assert_allclose(_np(gw), _np(rw), rtol=1e-10)
    np.testing.assert_allclose(_np(gb), _np(rb), rtol=1e-10)
    assert ember.autograd.gradcheck(lambda w_: ext.lltm_forward(x, w_, b.detach(), h, c)[0],
                                    (w.detach().requires_grad_(),))


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16])
def test_dispatch_macro_and_raw_loop(ext, dtype):
    x = ember.linspace(-4, 4, 9).to(dtype)[::2]  # strided: the extension makes it contiguous
    y = ext.softclip(x, 2.0)
    v = x.double().numpy()
    tol = 1e-3 if dtype == ember.float16 else 1e-6
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y.double().numpy(), v / (1 + np.abs(v) / 2.0), rtol=tol)
    with pytest.raises(NotImplementedError, match="softclip: not implemented for dtype int64"):
        ext.softclip(ember.arange(3), 1.0)
    with pytest.raises(RuntimeError, match="softclip: limit must be positive, got -1"):
        ext.softclip(x, -1.0)


def test_accessor_on_strided_and_integer_tensors(ext):
    a = np.arange(12).reshape(3, 4)
    x = ember.tensor(a).t()  # non-contiguous: the accessor walks strides
    np.testing.assert_array_equal(ext.row_sums(x).numpy(), a.T.sum(1))
    assert ext.row_sums(ember.ones(2, 3)).tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="row_sums: expected a 2-d tensor, got 1 dims"):
        ext.row_sums(ember.ones(3))


def test_generated_overloads_and_defaults(ext):
    a = np.random.default_rng(1).standard_normal((3, 4))
    x = ember.tensor(a)
    got = [_np(t) for t in ext.reductions(x)]
    want = [a.sum(), a.sum(1), a.sum((0, 1), keepdims=True), a.mean(-1, keepdims=True),
            a.max(1), a.argmax(1), np.exp(a) / np.exp(a).sum(-1, keepdims=True), a.argmax(0),
            np.linalg.norm(a), np.log(np.exp(a).sum(1))]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
        assert g.shape == np.shape(w)
    s = [_np(t) for t in ext.shapes(x)]
    want = [a.reshape(-1), a.reshape(4, 3), a.T, a, a.T, a[1], a[:, :2], np.stack([a, a]),
            a[:1], np.where(a > 0, a, 0), np.clip(a, -0.5, 0.5), a.reshape(-1)]
    for g, w in zip(s, want):
        np.testing.assert_array_equal(g, w)


def test_indexing(ext):
    a = np.random.default_rng(2).standard_normal((3, 4))
    x = ember.tensor(a, requires_grad=True)
    got = ext.indexed(x)
    want = [a[:, 0], a[..., 1::2], a[None, -1], a[:2, [0, 2]], a[a > 0], a[..., None]]
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(_np(g), w)
    # the views and gathers are differentiable: each element's gradient counts its uses
    sum(t.sum() for t in got).backward()
    uses = np.zeros_like(a)
    uses[:, 0] += 1
    uses[:, 1::2] += 1
    uses[-1] += 1
    uses[:2, [0, 2]] += 1
    uses[a > 0] += 1
    uses += 1
    np.testing.assert_array_equal(x.grad.numpy(), uses)
    y = ember.tensor(a)
    assert ext.index_put(y) is y
    want = a.copy()
    want[:, 0] = 0.5
    want[want < 0] = 0
    np.testing.assert_array_equal(y.numpy(), want)


def test_factories_and_options(ext):
    z, o, f, r, r2, e, eye, ls, g = ext.factories(ember.ones(2, dtype=ember.float16))
    assert z.dtype == ember.float64 and z.shape == (2, 3) and not z.any()
    assert o.dtype == ember.int32 and o.tolist() == [1, 1]
    assert f.dtype == ember.float32 and f.tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert r.dtype == ember.int64 and r.tolist() == [0, 1, 2, 3, 4]
    assert r2.dtype == ember.float32 and r2.tolist() == [1.0, 3.0, 5.0]
    assert e.dtype == ember.float16 and e.shape == (0,)  # like.options()
    assert eye.tolist() == np.eye(3).tolist()
    np.testing.assert_allclose(ls.numpy(), np.linspace(0, 1, 5), rtol=1e-6)
    assert g.requires_grad and g.is_leaf


def test_metadata(ext):
    x = ember.ones(2, 3, 4)[:, 1:, ::2]
    d = ext.describe(x)
    assert d == {"dim": 3, "numel": 8, "sizes": [2, 2, 2], "strides": [12, 4, 2], "last": 2,
                 "dtype": "Float", "element_size": 4, "device": "cpu", "contiguous": False,
                 "requires_grad": False, "is_float": True}
    assert ext.describe(ember.zeros(1, dtype=ember.int64, requires_grad=False))["dtype"] == "Long"
    with pytest.raises(IndexError, match=r"dimension out of range \(expected to be in range of "
                                         r"\[-3, 2\], but got 3\)"):
        ext.size_of(x, 3)
    assert ext.size_of(x, -3) == 2


def test_in_place_operators_out_and_conversions(ext):
    x = ember.tensor([1.0, 2.0, 3.0])
    y = ext.in_place(x)
    assert y is x and x.tolist() == [3.0, 5.0, 7.0]  # (x*2+1) +1 -1 *3 /3
    v = np.array([0.5, -1.5, 2.0])
    np.testing.assert_allclose(ext.numbers_first(ember.tensor(v)).numpy(),
                               1 - 2 * v + 3 / (v + 4), rtol=1e-6)
    out = ember.empty(0)
    r = ext.out_variant(ember.tensor([0.0, 1.0]), out)
    assert r is out and out.shape == (2,)
    np.testing.assert_allclose(out.numpy(), np.exp([0.0, 1.0]), rtol=1e-6)
    d = ext.to_double(ember.tensor([1.5]))
    assert d.dtype == ember.float64 and d.tolist() == [1.5]
    assert ext.item_of(ember.tensor([0.25, 0.5], dtype=ember.float64)) == 0.75


def test_identity_none_and_tuples(ext):
    x = ember.ones(3)
    assert ext.maybe_add(x, None) is x  # the same Python object comes back
    assert ext.maybe_add(x, x).tolist() == [2.0, 2.0, 2.0]
    assert ext.undefined() is None
    t, n = ext.pair(x)
    assert t is x and n == 3
    p = ember.nn.Parameter(ember.ones(2))
    assert ext.maybe_add(p, None) is p  # subclasses pass through as themselves
    with pytest.raises(TypeError, match="incompatible function arguments"):
        ext.maybe_add([1.0], None)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        ext.softclip(None, 1.0)


def test_backward_driven_from_cpp(ext):
    x = ember.tensor([1.0, -2.0, 0.5], dtype=ember.float64)
    np.testing.assert_allclose(ext.grad_of_cube(x).numpy(), 3 * x.numpy() ** 2)
    assert x.grad is None  # the extension differentiated a detached copy


def test_cpp_autograd_function(ext):
    x = ember.tensor([1.0, -2.0, 0.5], dtype=ember.float64, requires_grad=True)
    y = ext.scaled_square(x, 3.0)
    assert type(y.grad_fn).__name__ == "CppNode"
    np.testing.assert_allclose(y.detach().numpy(), 3 * x.detach().numpy() ** 2)
    (g,) = ember.autograd.grad(y.sum(), [x])
    np.testing.assert_allclose(g.numpy(), 6 * x.detach().numpy())
    assert ember.autograd.gradcheck(lambda t: ext.scaled_square(t, 0.5), (x,))
    assert ext.scaled_square(x.detach(), 2.0).grad_fn is None  # nothing to record
    # a saved input changed in place before backward is caught
    z = x.detach().clone().requires_grad_()
    w = z * 1
    out = ext.scaled_square(w, 1.0)
    w.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    # two outputs: the argmax gets no history; exp's saved output is re-linked on unpack
    e, idx = ext.exp_and_argmax(x)
    assert idx.grad_fn is None and not idx.requires_grad and idx.item() == 0
    (g,) = ember.autograd.grad(e.sum(), [x])
    np.testing.assert_allclose(g.numpy(), np.exp(x.detach().numpy()))
    with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients "
                                           r"\(expected 1, got 2\)"):
        ext.bad_backward(x).sum().backward()


def test_from_blob_shares_and_frees(ext):
    before = ext.freed()
    b = ext.blob(5)
    assert b.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and b.dtype == ember.float32
    v = b[1:3]
    del b
    gc.collect()
    assert ext.freed() == before  # the view keeps the memory alive
    assert v.tolist() == [1.0, 2.0]
    del v
    gc.collect()
    assert ext.freed() == before + 1


def test_errors_map_to_embers_exceptions(ext):
    with pytest.raises(RuntimeError, match="check_positive: expected positive values"):
        ext.check_positive(ember.tensor([1.0, -1.0]))
    # an ember op refusing its input inside the extension raises what the op raises in Python
    with pytest.raises(RuntimeError) as cpp_err:
        ext.bad_matmul(ember.ones(2, 3), ember.ones(2, 3))
    with pytest.raises(RuntimeError) as py_err:
        ember.mm(ember.ones(2, 3), ember.ones(2, 3))
    assert str(cpp_err.value) == str(py_err.value)
    with pytest.raises(ValueError, match="value_check: n must be >= 0, got -2"):
        ext.value_check(-2)
    assert ext.value_check(2).tolist() == [0.0, 0.0]


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_same_source_builds_against_torch_semantics(ext):
    """The LLTM source is PyTorch's extension idiom: its numbers agree with torch's ops."""
    a = [np.random.default_rng(i).standard_normal(s) for i, s in
         enumerate([(2, 3), (15, 8), (15,), (2, 5), (2, 5)])]
    got = ext.lltm_forward(*[ember.tensor(v) for v in a])
    x, w, b, h, c = (torch.tensor(v) for v in a)
    gates = torch.addmm(b, torch.cat([h, x], 1), w.t()).chunk(3, 1)
    new_c = c + torch.nn.functional.elu(gates[2]) * torch.sigmoid(gates[0])
    new_h = torch.tanh(new_c) * torch.sigmoid(gates[1])
    np.testing.assert_allclose(got[0].numpy(), new_h.numpy(), rtol=1e-12)
    np.testing.assert_allclose(got[1].numpy(), new_c.numpy(), rtol=1e-12)


def test_load_inline_caches_and_reports_build_errors(tmp_path):
    from ember.utils import cpp_extension

    src = "torch::Tensor twice(const torch::Tensor& x) { return x * 2; }"
    m1 = cpp_extension.load_inline("ember_test_twice", src, functions={"twice": "Doubles x."},
                                   build_directory=str(tmp_path))
    assert m1.twice(ember.ones(2)).tolist() == [2.0, 2.0]
    assert m1.twice.__doc__.strip().endswith("Doubles x.")
    built = sorted(p.name for p in tmp_path.iterdir())
    m2 = cpp_extension.load_inline("ember_test_twice", src, functions={"twice": "Doubles x."},
                                   build_directory=str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == built  # nothing rebuilt
    assert m2.__file__ == m1.__file__
    with pytest.raises(RuntimeError, match="building 'ember_test_broken' failed"):
        cpp_extension.load_inline("ember_test_broken", "torch::Tensor f() { return nope; }",
                                  functions=["f"], build_directory=str(tmp_path))


def test_setup_py_with_cpp_extension_and_build_extension(tmp_path):
    pytest.importorskip("setuptools")
    (tmp_path / "scaler.cpp").write_text(textwrap.dedent("""\
        #include <torch/extension.h>
        torch::Tensor scale(const torch::Tensor& x, double s) { return x * s; }
        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }
        """))
    (tmp_path / "setup.py").write_text(textwrap.dedent("""\
        from setuptools import setup
        from ember.utils.cpp_extension import BuildExtension, CppExtension
        setup(name="scaler", ext_modules=[CppExtension("scaler", ["scaler.cpp"],
              extra_compile_args={"cxx": ["-O1"]})],
              cmdclass={"build_ext": BuildExtension.with_options(no_python_abi_suffix=True)})
        """))
    env_path = ":".join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "scaler.so").exists()  # no_python_abi_suffix
    code = "import ember, scaler; print(scaler.scale(ember.ones(2), 3.0).tolist())"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[3.0, 3.0]"
