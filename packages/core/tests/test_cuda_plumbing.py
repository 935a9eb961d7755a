"""The CUDA extension is optional: a CPU-only build must say so clearly."""

import ember
import pytest


def test_cuda_reports_unavailable_without_extension_or_device():
    assert isinstance(ember.cuda.is_available(), bool)
    if ember.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert ember.cuda.device_count() == 0
    with pytest.raises(RuntimeError, match="no CUDA device available"):
        ember.cuda.synchronize()


def test_cuda_tensor_without_cuda_is_a_clear_error():
    if ember.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="no allocator for device 'cuda'"):
        ember.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="device type"):
        ember.zeros(2, device="tpu")


def test_engine_is_a_shared_library_beside_C():
    # ember._C_cuda and other backends link this one engine and register into it.
    import os

    here = os.path.dirname(ember._C.__file__)
    assert os.path.exists(os.path.join(here, "libember_engine.so"))


def test_cuda_tensor_loads_the_backend_on_first_use():
    # ember._C_cuda is imported by the engine's backend loader, not only by ember.cuda.
    import subprocess
    import sys

    code = ("import sys, ember\n"
            "try:\n"
            "    t = ember.ones(3, device='cuda')\n"
            "    print('tensor', t.device.type, float(t.sum()))\n"
            "except RuntimeError as e:\n"
            "    print('error', 'no allocator' in str(e))\n"
            "print('loaded', 'ember._C_cuda' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split("\n")
    try:
        from ember import _C_cuda  # noqa: F401
        built = True
    except ImportError:
        built = False
    assert out[1] == f"loaded {built}"
    if ember.cuda.is_available():
        assert out[0] == "tensor cuda 3.0"
    else:
        assert out[0] == "error True"
