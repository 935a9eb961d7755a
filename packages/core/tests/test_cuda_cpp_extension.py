"""A C++ extension with CUDA sources, as PyTorch users write one (load_inline with
``cuda_sources``; the kernel includes <ATen/cuda/CUDAContext.h> and launches on
``at::cuda::getCurrentCUDAStream()``). Without a GPU the extension is still built (nvcc compiles
the kernel and ember's headers) and its CPU-tensor refusal is checked; with one, the kernel's
results, its dtypes, and its stream (ember's current stream, also inside
``ember.cuda.stream(s)``) are checked."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import ember
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("nvcc") is None,
                                reason="needs a C++ compiler and nvcc")
HERE = Path(__file__).parent / "cpp_extension"
needs_gpu = pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA GPU")


@pytest.fixture(scope="module")
def ext():
    from ember.utils import cpp_extension

    old = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if old is None and not ember.cuda.is_available():
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"  # compile-only here: one target is enough
    try:
        return cpp_extension.load_inline(
            "ember_test_cuda_square",
            "torch::Tensor square(torch::Tensor x);\nint64_t current_stream_handle();",
            cuda_sources=(HERE / "square_kernel.cu").read_text(),
            functions=["square", "current_stream_handle"])
    finally:
        if old is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)


def test_builds_and_refuses_cpu_tensors(ext):
    with pytest.raises(RuntimeError, match="square: expected a CUDA tensor, got one on cpu"):
        ext.square(ember.ones(3))


@needs_gpu
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_kernel_results(ext, dtype):
    x = ember.linspace(-3, 3, 1001, dtype=dtype, device="cuda")[::2]
    y = ext.square(x)
    assert y.device.type == "cuda" and y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y.cpu().numpy(), x.cpu().numpy() ** 2, rtol=1e-6)
    assert ext.square(ember.empty(0, device="cuda")).shape == (0,)
    with pytest.raises(NotImplementedError, match="square: not implemented for dtype int64"):
        ext.square(ember.arange(3, device="cuda"))


@needs_gpu
def test_runs_on_embers_current_stream(ext):
    s = ember.cuda.Stream()
    assert ext.current_stream_handle() == ember.cuda.current_stream().cuda_stream
    with ember.cuda.stream(s):
        assert ext.current_stream_handle() == s.cuda_stream
        x = ember.full((1 << 20,), 3.0, device="cuda")
        y = ext.square(x)  # ordered after the fill on s, read after it on s
        total = y.sum()
    s.synchronize()
    assert total.item() == 9.0 * (1 << 20)


def test_setup_py_with_cuda_extension(tmp_path):
    """The same kernel shipped the setup.py way: CUDAExtension + BuildExtension, nvcc for the
    .cu file, the C++ compiler for the bindings."""
    import subprocess
    import sys
    import textwrap

    pytest.importorskip("setuptools")
    shutil.copy(HERE / "square_kernel.cu", tmp_path / "square_kernel.cu")
    (tmp_path / "bindings.cpp").write_text(textwrap.dedent("""\
        #include <torch/extension.h>
        torch::Tensor square(torch::Tensor x);
        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("square", &square); }
        """))
    (tmp_path / "setup.py").write_text(textwrap.dedent("""\
        from setuptools import setup
        from ember.utils.cpp_extension import BuildExtension, CUDAExtension
        setup(name="cuda_square", ext_modules=[CUDAExtension(
                  "cuda_square", ["bindings.cpp", "square_kernel.cu"],
                  extra_compile_args={"cxx": ["-O1"], "nvcc": ["-O2"]})],
              cmdclass={"build_ext": BuildExtension})
        """))
    env = {"PYTHONPATH": ":".join(p for p in sys.path if p), "PATH": os.environ["PATH"]}
    if not ember.cuda.is_available():
        env["TORCH_CUDA_ARCH_LIST"] = "9.0"
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                          cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    code = textwrap.dedent("""\
        import ember, cuda_square
        try:
            cuda_square.square(ember.ones(2))
        except RuntimeError as e:
            print("refused:", e)
        if ember.cuda.is_available():
            print(cuda_square.square(ember.full((3,), 3.0, device="cuda")).cpu().tolist())
        """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "refused: square: expected a CUDA tensor, got one on cpu"
    if ember.cuda.is_available():
        assert lines[1] == "[9.0, 9.0, 9.0]"
