"""The nccl backend of ember.distributed.

CPU-runnable: finding and loading libnccl (tests that need the library skip without it; point
EMBER_NCCL_LIBRARY at a libnccl.so.2, e.g. from `pip download nvidia-nccl-cu13`, to run them on
a machine without a GPU), its version and error strings, the dtype / reduction mapping, the
argument checks, the backend-string parsing. GPU tests (world size 1: NCCL refuses two ranks on
one GPU) compare every collective with the expected values, check the Work / stream semantics,
the watchdog's timeout and DDP on CUDA; they skip without a GPU or without NCCL.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import types
from datetime import timedelta

import ember
import ember.distributed as dist
import pytest
from ember.distributed import _nccl
from ember.distributed.distributed_c10d import _split_backend


def _nccl_loads() -> bool:
    try:
        _nccl.library()
    except RuntimeError:
        return False
    return True


needs_lib = pytest.mark.skipif(not _nccl_loads(), reason="no NCCL library (pip install "
                               "nvidia-nccl-cu13, or set EMBER_NCCL_LIBRARY)")
gpu = pytest.mark.skipif(not (ember.cuda.is_available() and _nccl_loads()),
                         reason="needs a CUDA device and NCCL")
two_gpus = pytest.mark.skipif(ember.cuda.device_count() < 2, reason="needs two CUDA devices")

ALL_DTYPES = [ember.float16, ember.bfloat16, ember.float32, ember.float64, ember.int8,
              ember.uint8, ember.int32, ember.int64, ember.bool]


@pytest.fixture
def fresh_library(monkeypatch: pytest.MonkeyPatch):
    """Forgets the loaded library before and after the test (which may change the search)."""
    _nccl._reset_library_for_tests()
    yield monkeypatch
    _nccl._reset_library_for_tests()


# ---- the library (no GPU needed) --------------------------------------------------------------
def test_candidates_env_override(fresh_library: pytest.MonkeyPatch) -> None:
    fresh_library.setenv("EMBER_NCCL_LIBRARY", "/opt/x/libnccl.so.2")
    assert _nccl.library_candidates() == ["/opt/x/libnccl.so.2"]


def test_candidates_from_the_nvidia_namespace(fresh_library: pytest.MonkeyPatch,
                                              tmp_path: os.PathLike) -> None:
    fresh_library.delenv("EMBER_NCCL_LIBRARY", raising=False)
    base = os.path.join(tmp_path, "nvidia")
    for sub, name in [("cu13/lib", "libnccl.so.2"), ("nccl/lib", "libnccl.so.2"),
                      ("cu13/lib", "libnccl.so"), ("cublas/lib", "libcublas.so.13")]:
        os.makedirs(os.path.join(base, sub), exist_ok=True)
        open(os.path.join(base, sub, name), "w").close()
    fake = types.ModuleType("nvidia")
    fake.__path__ = [base]  # type: ignore[attr-defined]
    fresh_library.setitem(sys.modules, "nvidia", fake)
    got = _nccl.library_candidates()
    assert got == [os.path.join(base, "cu13/lib/libnccl.so.2"),
                   os.path.join(base, "nccl/lib/libnccl.so.2"),
                   os.path.join(base, "cu13/lib/libnccl.so"), "libnccl.so.2"]


def test_missing_library_is_a_clear_error(fresh_library: pytest.MonkeyPatch,
                                          tmp_path: os.PathLike) -> None:
    missing = os.path.join(tmp_path, "libnccl.so.2")
    fresh_library.setenv("EMBER_NCCL_LIBRARY", missing)
    with pytest.raises(RuntimeError, match="pip install nvidia-nccl-cu13") as e:
        _nccl.library()
    assert missing in str(e.value)
    assert not dist.is_nccl_available() and not dist.is_backend_available("nccl")
    with pytest.raises(RuntimeError, match="nccl backend is not available"):
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    assert not dist.is_initialized()


def test_not_an_nccl_library(fresh_library: pytest.MonkeyPatch) -> None:
    import ctypes.util

    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm to load")
    with pytest.raises(RuntimeError, match="has no function ncclGetVersion"):
        _nccl.NcclLibrary(libm)


def test_decode_version() -> None:
    assert _nccl._decode_version(23203) == (2, 32, 3)
    assert _nccl._decode_version(21805) == (2, 18, 5)
    assert _nccl._decode_version(2708) == (2, 7, 8)  # before 2.9: X*1000 + Y*100 + Z


@needs_lib
def test_version() -> None:
    lib = _nccl.library()
    raw = ctypes.c_int()
    assert lib.ncclGetVersion(ctypes.byref(raw)) == 0
    assert _nccl.version() == _nccl._decode_version(raw.value) == lib.version()
    assert _nccl.version() >= (2, 10, 0)


@needs_lib
def test_error_strings() -> None:
    lib = _nccl.library()
    assert lib.error_string(0) == "no error"
    assert "invalid argument" in lib.error_string(4)
    assert "invalid usage" in lib.error_string(5)
    assert lib.error_string(6).startswith("remote process exited")
    lib.check(0, "anything")  # ncclSuccess: no error
    with pytest.raises(dist.DistBackendError, match=r"all_reduce failed: NCCL error 4 "
                       r"\(ncclInvalidArgument\): invalid argument"):
        lib.check(4, "all_reduce")
    with pytest.raises(RuntimeError, match="ncclUnhandledCudaError"):
        lib.check(1, "init")


@needs_lib
def test_unique_ids() -> None:
    lib = _nccl.library()
    a, b = lib.unique_id(), lib.unique_id()
    assert ctypes.sizeof(a) == _nccl.UNIQUE_ID_BYTES == 128
    assert bytes(bytearray(a.internal)) != bytes(bytearray(b.internal))


@needs_lib
def test_a_failing_call_reports_ncclGetErrorString() -> None:  # noqa: N802
    lib = _nccl.library()
    handle = ctypes.c_void_p()
    r = lib.ncclCommInitRank(ctypes.byref(handle), 0, lib.unique_id(), 0)  # 0 ranks: invalid
    assert r != 0
    with pytest.raises(dist.DistBackendError, match="ncclCommInitRank failed: NCCL error") as e:
        lib.check(r, "ncclCommInitRank")
    assert lib.error_string(r) in str(e.value)


# ---- argument checks and mappings (no GPU needed) ---------------------------------------------
def test_reduce_dtype_mapping() -> None:
    # ncclDataType_t values of nccl.h
    expect = {ember.int8: 0, ember.uint8: 1, ember.int32: 2, ember.int64: 4, ember.float16: 6,
              ember.float32: 7, ember.float64: 8, ember.bfloat16: 9, ember.bool: 1}
    for dt, code in expect.items():
        assert _nccl.reduce_dtype("all_reduce", dt) == code
    with pytest.raises(TypeError, match="all_reduce: the nccl backend cannot reduce ember.int16"):
        _nccl.reduce_dtype("all_reduce", ember.int16)


def test_reduce_op_mapping() -> None:
    R = dist.ReduceOp  # noqa: N806
    f = ember.float32
    assert [_nccl.reduce_op("x", op, f) for op in (R.SUM, R.PRODUCT, R.MAX, R.MIN, R.AVG)] == \
        [0, 1, 2, 3, 4]
    # bool travels as uint8: SUM is a logical or (max), PRODUCT a logical and (min)
    assert _nccl.reduce_op("x", R.SUM, ember.bool) == 2
    assert _nccl.reduce_op("x", R.PRODUCT, ember.bool) == 3
    with pytest.raises(TypeError, match="reduce: ReduceOp.AVG needs a floating-point tensor"):
        _nccl.reduce_op("reduce", R.AVG, ember.int32)
    with pytest.raises(ValueError, match="ReduceOp.BAND is not supported by the nccl backend"):
        _nccl.reduce_op("all_reduce", R.BAND, ember.int32)


def test_cpu_tensor_is_refused() -> None:
    with pytest.raises(ValueError, match=r"broadcast: tensor is on cpu; the nccl backend takes "
                       r"CUDA tensors"):
        _nccl.check_cuda_tensor("broadcast", ember.ones(3))
    with pytest.raises(ValueError, match="all_gather: tensor_list\\[0\\] is on cpu"):
        _nccl.check_cuda_list("all_gather", [ember.ones(2)], 1, "tensor_list", None, 0)
    with pytest.raises(ValueError, match="must be a list of 2 tensors"):
        _nccl.check_cuda_list("all_gather", [ember.ones(2)], 2, "tensor_list", None, 0)
    with pytest.raises(TypeError, match="send: tensor must be an ember.Tensor, got list"):
        _nccl.check_cuda_tensor("send", [1, 2])


def test_meta_tensor_is_refused() -> None:
    t = ember.empty(4, device="meta")
    with pytest.raises(ValueError, match="all_reduce: tensor is on meta; the nccl backend"):
        _nccl.check_cuda_tensor("all_reduce", t)


def test_backend_strings() -> None:
    assert _split_backend("nccl") == ("nccl", "nccl")
    assert _split_backend("NCCL") == ("nccl", "nccl")
    assert _split_backend("cpu:gloo,cuda:nccl") == ("gloo", "nccl")
    assert _split_backend("cuda:nccl,cpu:shm") == ("shm", "nccl")
    assert _split_backend("cuda:nccl") == ("undefined", "nccl")
    assert _split_backend(None) == ("undefined", "nccl")
    assert _split_backend("gloo") == ("gloo", "nccl")
    assert _split_backend("shm") == ("shm", None)
    assert _split_backend("cpu:mpi") == ("mpi", None)
    with pytest.raises(ValueError, match="CUDA tensors need 'nccl', got 'gloo'"):
        _split_backend("cpu:gloo,cuda:gloo")
    with pytest.raises(ValueError, match="nccl takes CUDA tensors"):
        _split_backend("cpu:nccl")
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        _split_backend("tpu:x")
    with pytest.raises(ValueError, match="expected 'device:backend' pairs"):
        _split_backend("cpu:gloo,nccl")


def test_per_device_group_runs_cpu_tensors_on_cpu_backend() -> None:
    dist.init_process_group("cpu:gloo,cuda:nccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "cpu:gloo,cuda:nccl"
        assert dist.group.WORLD.name() == "shm"
        t = ember.tensor([1.0, 2.0])
        dist.all_reduce(t)
        assert t.tolist() == [1.0, 2.0]
        objs = [None]
        dist.all_gather_object(objs, {"a": 1})
        assert objs == [{"a": 1}]
    finally:
        dist.destroy_process_group()


# ---- GPU: every collective (world size 1) -----------------------------------------------------
def _cuda(values: list, dtype: ember.dtype) -> ember.Tensor:
    return ember.tensor(values, dtype=dtype).to("cuda")


def _values(dtype: ember.dtype) -> list:
    if dtype == ember.bool:
        return [True, False, True, True, False, False]
    if dtype == ember.uint8:
        return [1, 2, 3, 250, 0, 7]
    if dtype.is_floating_point:
        return [1.5, -2.0, 3.25, 0.0, 8.0, -0.5]
    return [1, -2, 3, 100, 0, -7]


@pytest.fixture
def nccl_group():
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1,
                            timeout=timedelta(seconds=60))
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


@gpu
def test_is_available_on_gpu() -> None:
    assert dist.is_nccl_available() and dist.is_backend_available("nccl")
    assert dist.get_default_backend_for_device("cuda") == "nccl"


@gpu
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_all_reduce_every_op(nccl_group, dtype) -> None:
    vals = _values(dtype)
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    if dtype.is_floating_point:
        ops.append(dist.ReduceOp.AVG)
    for op in ops:
        t = _cuda(vals, dtype)
        assert dist.all_reduce(t, op=op) is None
        assert t.device.type == "cuda"
        assert t.cpu().tolist() == ember.tensor(vals, dtype=dtype).tolist(), op


@gpu
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_broadcast_and_reduce(nccl_group, dtype) -> None:
    vals = _values(dtype)
    t = _cuda(vals, dtype)
    dist.broadcast(t, src=0)
    assert t.cpu().tolist() == ember.tensor(vals, dtype=dtype).tolist()
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    assert t.cpu().tolist() == ember.tensor(vals, dtype=dtype).tolist()


@gpu
def test_non_contiguous_tensors(nccl_group) -> None:
    base = ember.arange(12, dtype=ember.float32).reshape(3, 4)
    t = base.to("cuda").t()  # (4, 3), not contiguous
    assert not t.is_contiguous()
    dist.all_reduce(t)
    assert t.cpu().tolist() == base.t().tolist()
    out = ember.zeros(3, 4, device="cuda").t()
    dist.all_gather_into_tensor(out, t)
    assert out.cpu().tolist() == base.t().tolist()


@gpu
def test_all_gather(nccl_group) -> None:
    x = ember.arange(6, dtype=ember.float32).reshape(2, 3)
    outs = [ember.zeros(2, 3, device="cuda")]
    dist.all_gather(outs, x.to("cuda"))
    assert outs[0].cpu().tolist() == x.tolist()
    out = ember.zeros(1, 2, 3, device="cuda")
    dist.all_gather_into_tensor(out, x.to("cuda"))
    assert out.cpu().tolist() == [x.tolist()]
    with pytest.raises(ValueError, match="all_gather_into_tensor: output_tensor \\(5,\\)"):
        dist.all_gather_into_tensor(ember.zeros(5, device="cuda"), x.to("cuda"))


@gpu
@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.int64], ids=str)
def test_reduce_scatter(nccl_group, dtype) -> None:
    vals = _values(dtype)
    out = ember.zeros(6, dtype=dtype, device="cuda")
    dist.reduce_scatter(out, [_cuda(vals, dtype)])
    assert out.cpu().tolist() == ember.tensor(vals, dtype=dtype).tolist()
    out2 = ember.zeros(6, dtype=dtype, device="cuda")
    dist.reduce_scatter_tensor(out2, _cuda(vals, dtype), op=dist.ReduceOp.MIN)
    assert out2.cpu().tolist() == ember.tensor(vals, dtype=dtype).tolist()


@gpu
def test_all_to_all(nccl_group) -> None:
    x = ember.arange(8, dtype=ember.int32).reshape(4, 2)
    out = ember.zeros(4, 2, dtype=ember.int32, device="cuda")
    dist.all_to_all_single(out, x.to("cuda"))
    assert out.cpu().tolist() == x.tolist()
    out = ember.zeros(4, 2, dtype=ember.int32, device="cuda")
    dist.all_to_all_single(out, x.to("cuda"), output_split_sizes=[4], input_split_sizes=[4])
    assert out.cpu().tolist() == x.tolist()
    outs = [ember.zeros(3, device="cuda")]
    dist.all_to_all(outs, [ember.tensor([1.0, 2.0, 3.0]).to("cuda")])
    assert outs[0].cpu().tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="all_to_all_single: input split sizes \\[3\\]"):
        dist.all_to_all_single(out, x.to("cuda"), input_split_sizes=[3])


@gpu
def test_gather_scatter(nccl_group) -> None:
    x = ember.tensor([4.0, 5.0]).to("cuda")
    outs = [ember.zeros(2, device="cuda")]
    dist.gather(x, outs, dst=0)
    assert outs[0].cpu().tolist() == [4.0, 5.0]
    y = ember.zeros(2, device="cuda")
    dist.scatter(y, [ember.tensor([7.0, 8.0]).to("cuda")], src=0)
    assert y.cpu().tolist() == [7.0, 8.0]


@gpu
def test_barrier_and_p2p(nccl_group) -> None:
    assert dist.barrier() is None
    w = dist.barrier(async_op=True)
    assert w.wait() and w.is_completed()
    t = ember.ones(3, device="cuda")
    with pytest.raises(ValueError, match="send: rank 0 cannot send to itself"):
        dist.send(t, dst=0)
    with pytest.raises(ValueError, match="recv: the nccl backend cannot receive from any source"):
        dist.recv(t)
    # a batch may exchange with this rank itself (NCCL runs a self send/recv)
    a, b = ember.tensor([1.0, 2.0, 3.0]).to("cuda"), ember.zeros(3, device="cuda")
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, a, 0), dist.P2POp(dist.irecv, b, 0)])
    assert len(works) == 1
    works[0].wait()
    assert b.cpu().tolist() == [1.0, 2.0, 3.0]


@gpu
def test_object_collectives(nccl_group) -> None:
    objs = [{"lr": 0.1}, "two", 3]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"lr": 0.1}, "two", 3]
    out = [None]
    dist.all_gather_object(out, ("x", [1, 2]))
    assert out == [("x", [1, 2])]
    got = [None]
    dist.gather_object({"r": 0}, got, dst=0)
    assert got == [{"r": 0}]
    res = [None]
    dist.scatter_object_list(res, [{"s": 1}], src=0)
    assert res == [{"s": 1}]


@gpu
def test_argument_errors(nccl_group) -> None:
    with pytest.raises(ValueError, match="all_reduce: tensor is on cpu; the nccl backend takes "
                       "CUDA tensors"):
        dist.all_reduce(ember.ones(2))
    with pytest.raises(ValueError, match="all_gather_into_tensor: output_tensor is on cpu"):
        dist.all_gather_into_tensor(ember.zeros(2), ember.ones(2, device="cuda"))
    with pytest.raises(TypeError, match="cannot reduce ember.int16"):
        dist.all_reduce(ember.ones(2, dtype=ember.int16).to("cuda"))
    with pytest.raises(ValueError, match="ReduceOp.BXOR is not supported by the nccl backend"):
        dist.all_reduce(ember.ones(2, dtype=ember.int32, device="cuda"), op=dist.ReduceOp.BXOR)
    # int16 is moved (not reduced) byte-wise
    t = ember.tensor([1, -2, 3], dtype=ember.int16).to("cuda")
    dist.broadcast(t, src=0)
    assert t.cpu().tolist() == [1, -2, 3]


@gpu
@two_gpus
def test_tensors_on_two_devices(nccl_group) -> None:
    with pytest.raises(ValueError, match="output_tensor is on cuda:1 but the call's other "
                       "tensors are on cuda:0"):
        dist.all_gather_into_tensor(ember.zeros(2, device="cuda:1"),
                                    ember.ones(2, device="cuda:0"))


# ---- GPU: streams and Work handles ------------------------------------------------------------
_SECOND = 2_000_000_000  # clock cycles: about a second on an H100 (1.98 GHz boost)


@gpu
def test_collective_waits_for_the_callers_stream(nccl_group) -> None:
    for side in (False, True):
        s = ember.cuda.Stream() if side else None
        with ember.cuda.stream(s):
            inp = ember.zeros(1 << 16, device="cuda")
            out = ember.zeros(1 << 16, device="cuda")
            ember.cuda._sleep(_SECOND // 4)  # the caller's stream is busy ...
            inp.fill_(7.0)  # ... and writes the input after that
            dist.all_gather_into_tensor(out, inp)  # out-of-place: NCCL reads inp
            assert out.cpu().min().item() == 7.0


@gpu
def test_async_work_semantics(nccl_group) -> None:
    comm = nccl_group.impl.comm(0)
    inp = ember.full((1 << 16,), 3.0, device="cuda")
    out = ember.zeros(1 << 16, device="cuda")
    with ember.cuda.stream(comm.stream):  # keep the internal stream busy for a while
        ember.cuda._sleep(_SECOND)
    work = dist.all_gather_into_tensor(out, inp, async_op=True)
    assert isinstance(work, dist.Work)
    assert not work.is_completed()  # still behind the sleep
    work.wait()  # the current stream waits (the host does not)
    copy = out.clone()  # queued on the current stream: after the all-gather
    assert copy.cpu().min().item() == 3.0
    work.synchronize()
    assert work.is_completed() and work.is_success() and work.exception() is None
    fut = work.get_future()
    assert fut.wait()[0] is out and fut.value()[0] is out
    assert work.result()[0] is out


@gpu
def test_blocking_wait_env(monkeypatch: pytest.MonkeyPatch, nccl_group) -> None:
    monkeypatch.setenv("EMBER_NCCL_BLOCKING_WAIT", "1")
    comm = nccl_group.impl.comm(0)
    with ember.cuda.stream(comm.stream):
        ember.cuda._sleep(_SECOND // 4)
    t = ember.ones(4, device="cuda")
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    assert work.is_completed()


@gpu
def test_debug_detail_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_DISTRIBUTED_DEBUG", "DETAIL")
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        for _ in range(4):
            t = ember.ones(3, device="cuda")
            dist.all_reduce(t)
            dist.broadcast(t, src=0)
        assert t.cpu().tolist() == [1.0, 1.0, 1.0]
    finally:
        dist.destroy_process_group()


@gpu
def test_default_and_per_device_groups_use_nccl_for_cuda() -> None:
    for backend in (None, "gloo", "cpu:gloo,cuda:nccl"):
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        try:
            c, g = ember.tensor([2.0, 3.0]), ember.tensor([2.0, 3.0]).to("cuda")
            dist.all_reduce(c)
            dist.all_reduce(g, op=dist.ReduceOp.AVG)
            assert c.tolist() == g.cpu().tolist() == [2.0, 3.0]
            assert dist.group.WORLD.cuda_backend("x").name == "nccl"
        finally:
            dist.destroy_process_group()


@gpu
def test_device_id_binds_at_init() -> None:
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1,
                            device_id=ember.device("cuda", 0))
    try:
        assert 0 in dist.group.WORLD.impl._comms
    finally:
        dist.destroy_process_group()
    with pytest.raises(ValueError, match="all_reduce: group WORLD uses the shm backend"):
        dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
        try:
            dist.all_reduce(ember.ones(2, device="cuda"))
        finally:
            dist.destroy_process_group()


@gpu
def test_destroyed_group_refuses_work() -> None:
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    pg = dist.group.WORLD
    dist.all_reduce(ember.ones(2, device="cuda"))
    dist.destroy_process_group()
    with pytest.raises(dist.DistBackendError, match="was destroyed"):
        pg.impl.all_reduce(ember.ones(2, device="cuda"), dist.ReduceOp.SUM, False)


_TIMEOUT_SCRIPT = textwrap.dedent("""
    import os, sys
    from datetime import timedelta
    import ember, ember.distributed as dist
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    comm = dist.group.WORLD.impl.comm(0)  # (NCCL's init may take more than a second)
    dist.group.WORLD.impl.timeout = 1.0  # as monitored_barrier does
    t = ember.ones(4, device="cuda")
    with ember.cuda.stream(comm.stream):
        ember.cuda._sleep(3 * 2_000_000_000)  # the collective cannot finish within 1 s
    work = dist.all_reduce(t, async_op=True)
    try:
        work.synchronize()
        print("NO ERROR", flush=True)
    except dist.DistBackendError as e:
        print("FIRST:", e, flush=True)
    try:
        dist.all_reduce(t)
        print("NO ERROR", flush=True)
    except dist.DistBackendError as e:
        print("NEXT:", e, flush=True)
    try:
        work.wait()
        print("NO ERROR", flush=True)
    except dist.DistBackendError as e:
        print("WAIT:", e, flush=True)
    os._exit(0)  # the aborted communicator's GPU state is not worth a clean teardown
""")


@gpu
def test_watchdog_timeout_aborts_and_names_the_collective() -> None:
    # In a child process: aborting a communicator may leave its CUDA context unusable.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", _TIMEOUT_SCRIPT], capture_output=True, text=True,
                       timeout=50, env=env)  # under the GPU check's 60 s per test
    out = r.stdout
    assert "NO ERROR" not in out, out + r.stderr
    first = [ln for ln in out.splitlines() if ln.startswith("FIRST:")]
    assert first, out + r.stderr
    assert "all_reduce (collective #1 of group WORLD) on rank 0" in first[0]
    assert "timed out after 1 s" in first[0]
    assert any(ln.startswith("NEXT:") and "unusable" in ln for ln in out.splitlines()), out
    assert any(ln.startswith("WAIT:") and "timed out after 1 s" in ln
               for ln in out.splitlines()), out


# ---- GPU: DistributedDataParallel -------------------------------------------------------------
def _model() -> ember.nn.Module:
    ember.manual_seed(0)
    return ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.ReLU(), ember.nn.Linear(16, 2))


@gpu
@pytest.mark.parametrize("as_view", [False, True])
def test_ddp_on_cuda_matches_plain_training(nccl_group, as_view) -> None:
    from ember.nn.parallel import DistributedDataParallel as DDP

    plain = _model().to("cuda")
    wrapped = _model().to("cuda")
    ddp = DDP(wrapped, device_ids=[0], bucket_cap_mb=0.0001, gradient_as_bucket_view=as_view)
    assert len(ddp.reducer.buckets) > 1
    opt_a = ember.optim.SGD(plain.parameters(), lr=0.1)
    opt_b = ember.optim.SGD(ddp.parameters(), lr=0.1)
    ember.manual_seed(1)
    for _ in range(3):
        x, y = ember.randn(5, 8), ember.randn(5, 2)
        for model, opt, inp in ((plain, opt_a, x.to("cuda")), (ddp, opt_b, x)):
            opt.zero_grad()
            loss = ((model(inp) - y.to("cuda")) ** 2).mean()
            loss.backward()
            opt.step()
    for p, q in zip(plain.parameters(), wrapped.parameters()):
        assert q.device.type == "cuda"
        assert ember.allclose(p.cpu(), q.cpu(), atol=1e-6), (p, q)


@gpu
def test_ddp_comm_hook_on_cuda(nccl_group) -> None:
    from ember.distributed.algorithms.ddp_comm_hooks import default_hooks
    from ember.nn.parallel import DistributedDataParallel as DDP

    plain = _model().to("cuda")
    ddp = DDP(_model().to("cuda"), device_ids=[0])
    ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    x = ember.randn(4, 8, device="cuda")
    plain(x).sum().backward()
    ddp(x).sum().backward()
    for p, q in zip(plain.parameters(), ddp.module.parameters()):
        assert ember.allclose(p.grad.cpu(), q.grad.cpu(), atol=1e-2, rtol=1e-2)
