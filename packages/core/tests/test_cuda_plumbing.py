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
    with pytest.raises(ValueError, match="device type"):
        ember.zeros(2, device="tpu")


def test_engine_is_a_shared_library_beside_C():
    # ember._C_cuda and other backends link this one engine and register into it.
    import os

    here = os.path.dirname(ember._C.__file__)
    assert os.path.exists(os.path.join(here, "libember_engine.so"))
