"""The smaller torch.cuda functions of ember.cuda: capabilities (is_bf16_supported,
is_tf32_supported, get_arch_list, get_gencode_flags, can_device_access_peer), the generator state
(get/set_rng_state(_all)), the per-process memory fraction, memory_stats_as_nested_dict,
reset_accumulated_memory_stats, the deprecated *_cached names, the NVML queries,
list_gpu_processes, the sync debug mode, the legacy ember.cuda.<T>Tensor types and
ember.cuda.nvtx. Without a GPU they behave as PyTorch's do without one (checked here); the GPU
tests skip without a device."""

from __future__ import annotations

import importlib.util
import warnings

import ember
import ember.cuda.nvtx as nvtx
import pytest

gpu = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")
cpu_only = pytest.mark.skipif(ember.cuda.is_available(), reason="a CUDA device is present")
has_cuda_ext = importlib.util.find_spec("ember._C_cuda") is not None
has_pynvml = importlib.util.find_spec("pynvml") is not None
NO_DEVICE = "no CUDA device available"


# ---- without a GPU ------------------------------------------------------------------------------


@cpu_only
def test_queries_without_gpu_answer_like_torch():
    assert ember.cuda.is_bf16_supported() is False
    assert ember.cuda.is_bf16_supported(including_emulation=False) is False
    assert ember.cuda.is_tf32_supported() is False
    assert ember.cuda.get_arch_list() == []
    assert ember.cuda.get_gencode_flags() == ""
    assert ember.cuda.get_rng_state_all() == []
    assert ember.cuda.memory_stats_as_nested_dict() == {}
    with pytest.warns(FutureWarning, match="memory_reserved"):
        assert ember.cuda.memory_cached() == 0
    with pytest.warns(FutureWarning, match="max_memory_reserved"):
        assert ember.cuda.max_memory_cached() == 0
    # A state is checked, then kept for a device that never comes (PyTorch queues it).
    state = ember.zeros(16, dtype=ember.uint8)
    assert ember.cuda.set_rng_state(state) is None
    assert ember.cuda.set_rng_state_all([state, state]) is None


@cpu_only
def test_device_calls_without_gpu_raise_clearly():
    for call in (
        lambda: ember.cuda.get_rng_state(),
        lambda: ember.cuda.set_per_process_memory_fraction(0.5),
        lambda: ember.cuda.get_per_process_memory_fraction(),
        lambda: ember.cuda.reset_accumulated_memory_stats(),
        lambda: ember.cuda.can_device_access_peer(0, 1),
        lambda: ember.cuda.set_sync_debug_mode("warn"),
        lambda: ember.cuda.get_sync_debug_mode(),
    ):
        with pytest.raises(RuntimeError, match=NO_DEVICE):
            call()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(RuntimeError, match=NO_DEVICE):
            ember.cuda.reset_max_memory_cached()


@cpu_only
def test_legacy_types_without_gpu():
    for name in ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor",
                 "CharTensor", "ShortTensor", "IntTensor", "LongTensor", "BoolTensor"):
        cls = getattr(ember.cuda, name)
        assert repr(cls) == f"<class 'ember.cuda.{name}'>"
        assert not isinstance(ember.ones(2).to(cls.dtype), cls)  # a CPU tensor is not one
        with pytest.raises(TypeError, match=f"ember.cuda.{name} not available"):
            cls(2, 3)


def test_rng_state_argument_checks():
    with pytest.raises(TypeError, match="uint8 tensor of 16 elements"):
        ember.cuda.set_rng_state(ember.zeros(16))
    with pytest.raises(TypeError, match="uint8 tensor of 16 elements"):
        ember.cuda.set_rng_state(ember.zeros(3, dtype=ember.uint8))
    with pytest.raises(TypeError, match="got list"):
        ember.cuda.set_rng_state([0] * 16)


@pytest.mark.skipif(has_pynvml, reason="nvidia-ml-py is installed")
def test_nvml_without_pynvml():
    for fn in (ember.cuda.clock_rate, ember.cuda.utilization, ember.cuda.temperature,
               ember.cuda.power_draw, ember.cuda.memory_usage, ember.cuda.device_memory_used):
        with pytest.raises(ModuleNotFoundError, match="nvidia-ml-py"):
            fn()
    assert "nvidia-ml-py" in ember.cuda.list_gpu_processes()


@pytest.mark.skipif(not has_cuda_ext, reason="ember built without CUDA")
def test_nvtx_needs_no_gpu():
    # NVTX v3 is header-only: without a profiler attached the calls do nothing and return the
    # library's "not recorded" values; they must not need a GPU.
    assert isinstance(nvtx.range_push("outer"), int)
    assert isinstance(nvtx.range_pop(), int)
    rid = nvtx.range_start("span")
    assert isinstance(rid, int)
    nvtx.range_end(rid)
    nvtx.mark("here")
    with nvtx.range("step {} of {n}", 1, n=3):
        pass
    assert ember.cuda.nvtx is nvtx


def test_sync_debug_mode_argument_checks():
    if not ember.cuda.is_available():
        pytest.skip("the mode is kept by the CUDA extension")
    with pytest.raises(RuntimeError, match="invalid mode"):
        ember.cuda.set_sync_debug_mode("loud")
    with pytest.raises(TypeError):
        ember.cuda.set_sync_debug_mode(1.5)


# ---- on a GPU ------------------------------------------------------------------------------------


@gpu
def test_capabilities():
    cap = ember.cuda.get_device_capability()
    assert ember.cuda.is_tf32_supported() is (cap >= (8, 0))
    assert ember.cuda.is_bf16_supported() is True
    assert ember.cuda.is_bf16_supported(including_emulation=False) is (cap >= (8, 0))
    archs = ember.cuda.get_arch_list()
    assert archs and all(a.startswith("sm_") and a[3:].isdigit() for a in archs)
    # the device runs ember's kernels: its own architecture (or an older one of the same major,
    # or PTX of one) is in the list
    assert any(int(a[3:]) // 10 <= cap[0] for a in archs), (archs, cap)
    flags = ember.cuda.get_gencode_flags()
    assert flags.count("-gencode") == len(archs)
    assert f"code=sm_{archs[-1][3:]}" in flags
    n = ember.cuda.device_count()
    for d in range(n):
        for p in range(n):
            assert isinstance(ember.cuda.can_device_access_peer(d, p), bool)
        assert ember.cuda.can_device_access_peer(d, d) is False  # not its own peer
    with pytest.raises(ValueError, match="invalid device index"):
        ember.cuda.can_device_access_peer(0, n)


@gpu
def test_rng_state_round_trip():
    ember.cuda.manual_seed(1234)
    state = ember.cuda.get_rng_state()
    assert state.dtype == ember.uint8 and state.shape == (16,) and state.device.type == "cpu"
    a = ember.rand(1000, device="cuda").cpu()
    b = ember.rand(1000, device="cuda").cpu()
    assert not ember.equal(a, b)
    ember.cuda.set_rng_state(state)
    assert ember.equal(ember.rand(1000, device="cuda").cpu(), a)
    # the state moved on by exactly the draws since
    ember.cuda.set_rng_state(state)
    ember.rand(1000, device="cuda")
    assert ember.equal(ember.rand(1000, device="cuda").cpu(), b)
    states = ember.cuda.get_rng_state_all()
    assert len(states) == ember.cuda.device_count()
    ember.cuda.set_rng_state_all(states)
    assert ember.equal(ember.cuda.get_rng_state(0), states[0])
    assert ember.equal(ember.cuda.get_rng_state("cuda:0"), states[0])


@gpu
def test_memory_fraction():
    free, total = ember.cuda.mem_get_info()
    assert ember.cuda.get_per_process_memory_fraction() == 1.0
    try:
        ember.cuda.empty_cache()
        reserved = ember.cuda.memory_reserved()
        ember.cuda.set_per_process_memory_fraction(0.05)
        assert ember.cuda.get_per_process_memory_fraction() == 0.05
        small = ember.empty(1 << 20, dtype=ember.uint8, device="cuda")  # fits
        too_big = int(total * 0.06) + reserved
        with pytest.raises(ember.cuda.OutOfMemoryError):
            ember.empty(too_big, dtype=ember.uint8, device="cuda")
        del small
        with pytest.raises(ValueError, match="fraction"):
            ember.cuda.set_per_process_memory_fraction(1.5)
    finally:
        ember.cuda.set_per_process_memory_fraction(1.0)
    x = ember.empty(int(total * 0.06), dtype=ember.uint8, device="cuda")  # the cap is gone
    del x


@gpu
def test_nested_stats_and_accumulated_reset():
    x = ember.ones(1000, device="cuda")
    nested = ember.cuda.memory_stats_as_nested_dict()
    flat = ember.cuda.memory_stats()
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"]
    assert nested["num_alloc"] == flat["num_alloc"]
    ember.cuda.reset_accumulated_memory_stats()
    s = ember.cuda.memory_stats()
    assert s["num_alloc"] == 0 and s["num_free"] == 0 and s["num_ooms"] == 0
    assert s["allocated_bytes.all.current"] == flat["allocated_bytes.all.current"]  # untouched
    y = ember.ones(10, device="cuda")
    assert ember.cuda.memory_stats()["num_alloc"] >= 1
    del x, y
    with pytest.warns(FutureWarning):
        assert ember.cuda.memory_cached() == ember.cuda.memory_reserved()
    with pytest.warns(FutureWarning):
        assert ember.cuda.max_memory_cached() == ember.cuda.max_memory_reserved()
    with pytest.warns(FutureWarning):
        ember.cuda.reset_max_memory_cached()


@gpu
def test_sync_debug_mode():
    t = ember.arange(10, device="cuda")
    assert ember.cuda.get_sync_debug_mode() == 0
    try:
        ember.cuda.set_sync_debug_mode("warn")
        assert ember.cuda.get_sync_debug_mode() == 1
        with pytest.warns(UserWarning, match="synchronizing CUDA operation"):
            assert t.sum().item() == 45
        with pytest.warns(UserWarning, match="synchronizing CUDA operation"):
            t.cpu()
        # the kernels that read a count or a flag back: nonzero / masked_select, unique, equal
        for op in (lambda: ember.nonzero(t > 4), lambda: t[t > 4], lambda: ember.unique(t),
                   lambda: ember.equal(t, t)):
            with pytest.warns(UserWarning, match="synchronizing CUDA operation"):
                op()
        ember.cuda.set_sync_debug_mode(2)
        with pytest.raises(RuntimeError, match="synchronizing CUDA operation"):
            t.tolist()
        with pytest.raises(RuntimeError, match="synchronizing CUDA operation"):
            ember.nonzero(t)
        u = t * 2  # no host wait: no report
        # Factories computed on the host are staged through pinned memory: no wait either, and
        # the values arrive in stream order (a large one takes the blocking copy).
        made = [ember.arange(5, device="cuda"), ember.arange(0.5, 3, 0.5, device="cuda"),
                ember.linspace(0, 1, 5, device="cuda"), ember.randperm(7, device="cuda")]
        ember.cuda.set_sync_debug_mode(0)
        assert made[0].cpu().tolist() == [0, 1, 2, 3, 4]
        assert made[1].cpu().tolist() == [0.5, 1.0, 1.5, 2.0, 2.5]
        assert made[2].cpu().tolist() == pytest.approx([0, 0.25, 0.5, 0.75, 1])
        assert sorted(made[3].cpu().tolist()) == list(range(7))
        big = ember.arange(1 << 19, device="cuda")  # 4 MiB: past the staging limit
        assert int(big[-1].item()) == (1 << 19) - 1
        for _ in range(200):  # staging blocks reused after their copies only
            a = ember.arange(1000, device="cuda")
        assert a.cpu().tolist() == list(range(1000))
        ember.cuda.set_sync_debug_mode("default")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert u.cpu().tolist() == list(range(0, 20, 2))
    finally:
        ember.cuda.set_sync_debug_mode(0)


@gpu
def test_legacy_types_on_gpu():
    f = ember.cuda.FloatTensor(2, 3)
    assert f.shape == (2, 3) and f.dtype == ember.float32 and f.is_cuda
    assert isinstance(f, ember.cuda.FloatTensor) and not isinstance(f, ember.cuda.LongTensor)
    assert not isinstance(f.cpu(), ember.cuda.FloatTensor)
    g = ember.cuda.LongTensor([1.7, 2.0])
    assert g.is_cuda and g.cpu().tolist() == [1, 2]
    assert ember.cuda.BoolTensor([0, 1]).cpu().tolist() == [False, True]


@gpu
@pytest.mark.skipif(not has_pynvml, reason="needs nvidia-ml-py")
def test_nvml_queries():
    assert ember.cuda.clock_rate() > 0
    assert 0 <= ember.cuda.utilization() <= 100
    assert 0 <= ember.cuda.memory_usage() <= 100
    assert 0 < ember.cuda.temperature() < 150
    assert ember.cuda.power_draw() > 0
    assert ember.cuda.device_memory_used() > 0
    assert ember.cuda.list_gpu_processes().startswith("GPU:0")
