"""ember.accelerator, the device-generic ember.Stream / ember.Event, ember.GradScaler and
ember.to_dlpack, compared with torch's on this machine (CPU-only here: no accelerator; the CUDA
paths run where ember.cuda is available)."""

from __future__ import annotations

import time

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")

HAS_CUDA = ember.cuda.is_available()


def test_accelerator_queries_agree_with_cuda():
    a = ember.accelerator
    assert a.is_available() == ember.cuda.is_available()
    assert a.device_count() == ember.cuda.device_count()
    acc = a.current_accelerator(check_available=True)
    assert acc == (ember.device("cuda") if HAS_CUDA else None)
    if not HAS_CUDA and not torch.accelerator.is_available():
        assert a.current_accelerator(check_available=True) is torch.accelerator.current_accelerator(
            check_available=True) is None
        assert a.device_count() == torch.accelerator.device_count() == 0
        for fn in (a.current_device_index, a.synchronize, a.current_stream, a.memory_allocated):
            with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
                fn()
        with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
            torch.accelerator.current_device_index()
        a.set_device_index(-1)  # negative: nothing to do
        a.empty_cache()
        with a.device_index(None):
            pass
    assert a.current_device_idx is a.current_device_index
    assert a.set_device_idx is a.set_device_index
    with pytest.raises(ValueError, match="not an accelerator device"):
        a.set_device_index("cpu")
    with pytest.raises(TypeError, match="device index"):
        a.set_device_index(1.5)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_accelerator_on_cuda():
    a = ember.accelerator
    assert a.current_device_index() == ember.cuda.current_device()
    a.synchronize()
    s = a.current_stream()
    assert s.device_type == 1 and s.device.type == "cuda" and s.query()
    x = ember.ones(1024, device="cuda")
    assert a.memory_allocated() >= x.numel() * 4
    with a.device_index(0):
        assert a.current_device_index() == 0


def test_cpu_stream_matches_torch():
    s, ts = ember.Stream("cpu"), torch.Stream("cpu")
    assert s.device_type == ts.device_type == 0 and s.device == ember.device("cpu")
    assert s.device_index == ts.device_index == -1
    assert s.stream_id == ts.stream_id == 0
    assert s.query() is ts.query() is True
    s.synchronize()
    assert s == ember.Stream("cpu") and hash(s) == hash(ember.Stream("cpu"))
    assert repr(s) == repr(ts).replace("torch.", "ember.")
    with s:
        pass
    ev = s.record_event()
    assert isinstance(ev, ember.Event) and ev.query()
    s.wait_stream(ember.Stream("cpu"))
    if not HAS_CUDA:
        assert ember.Stream().device == ember.device("cpu")


def test_cpu_events_time_host_work():
    start = ember.Event("cpu", enable_timing=True)
    end = ember.Event("cpu", enable_timing=True)
    start.record()
    time.sleep(0.01)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 5.0  # milliseconds, generous for a loaded machine
    with pytest.raises(RuntimeError, match="enable_timing"):
        ember.Event("cpu").elapsed_time(end)
    unrecorded = ember.Event("cpu", enable_timing=True)
    with pytest.raises(RuntimeError, match="recorded"):
        start.elapsed_time(unrecorded)
    with pytest.raises(RuntimeError, match="interprocess"):
        ember.Event("cpu", interprocess=True)
    with pytest.raises(RuntimeError, match="no streams"):
        ember.Stream("meta")


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_cuda_stream_and_event():
    s = ember.Stream("cuda")
    start, end = ember.Event("cuda", enable_timing=True), ember.Event("cuda", enable_timing=True)
    with s:
        start.record(s)
        y = ember.ones(256, 256, device="cuda") @ ember.ones(256, 256, device="cuda")
        end.record(s)
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0 and y.sum().item() == 256 * 256 * 256
    assert s.stream_id != 0


def test_grad_scaler_and_to_dlpack_aliases():
    assert ember.GradScaler is ember.amp.GradScaler
    assert torch.GradScaler is torch.amp.GradScaler
    scaler = ember.GradScaler("cpu", init_scale=4.0)
    assert scaler.get_scale() == 4.0
    x = ember.arange(4.0)
    capsule = ember.to_dlpack(x)
    t = torch.from_dlpack(capsule)
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    back = ember.from_dlpack(torch.to_dlpack(torch.arange(3.0)))
    assert back.tolist() == [0.0, 1.0, 2.0]


def test_xpu_module_answers_like_torch_without_xpu():
    assert ember.xpu.is_available() is torch.xpu.is_available() is False
    assert ember.xpu.device_count() == torch.xpu.device_count() == 0
    assert ember.xpu.is_initialized() is torch.xpu.is_initialized() is False
    assert ember.xpu.is_bf16_supported() is torch.xpu.is_bf16_supported() is False
    assert ember.xpu.memory_allocated() == torch.xpu.memory_allocated() == 0
    ember.xpu.manual_seed(0)
    ember.xpu.empty_cache()
    with pytest.raises(RuntimeError, match="no XPU backend"):
        ember.xpu.current_device()
    with pytest.raises(RuntimeError, match="no XPU backend"):
        ember.xpu.synchronize()
    assert not hasattr(ember.xpu, "Stream")


def test_mps_module_answers_like_torch_without_mps():
    assert ember.mps.is_available() is torch.mps.is_available() is False
    assert ember.mps.device_count() == torch.mps.device_count() == 0
    assert ember.backends.mps.is_available() is False
    assert ember.mps.manual_seed(0) is torch.mps.manual_seed(0) is None
    for name in ("synchronize", "empty_cache", "current_allocated_memory", "seed"):
        with pytest.raises(RuntimeError):
            getattr(torch.mps, name)()
        with pytest.raises(RuntimeError, match=f"ember.mps.{name}: ember has no MPS backend"):
            getattr(ember.mps, name)()
    assert not hasattr(ember.mps, "compile_shader")
