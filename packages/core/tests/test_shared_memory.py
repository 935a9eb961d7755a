"""Tensors in POSIX shared memory: share_memory_(), pickling by name across processes, the three
segment policies, no leftovers in /dev/shm, and a clear error when /dev/shm is full."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import textwrap

import ember
import pytest
from ember import _C
from ember.multiprocessing_reductions import HANDOFF, OWNER, POOLED, init_reductions

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


def segments() -> set[str]:
    # Only this process's: other processes on the machine (a parallel test worker, another
    # user) make and remove segments meanwhile.
    prefix = _C._shm_prefix(os.getpid())
    return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)}


@pytest.fixture(autouse=True)
def _no_leftovers():
    before = segments()
    yield
    import gc

    gc.collect()
    _C._shm_pool_clear()  # pooled segments outlive their tensors: they are recycled
    _C._shm_trim_cache()
    assert segments() <= before


def mp_dumps(obj):
    from multiprocessing.reduction import ForkingPickler

    init_reductions()
    return bytes(ForkingPickler.dumps(obj))


def test_share_memory_in_place_keeps_data_and_views():
    before = segments()
    x = ember.arange(12.0).reshape(3, 4)
    v = x[1]
    assert not x.is_shared()
    assert x.share_memory_() is x
    assert x.is_shared() and v.is_shared()
    assert x.tolist() == ember.arange(12.0).reshape(3, 4).tolist()
    v[0] = 100.0  # the view still aliases the (moved) storage
    assert x[1, 0].item() == 100.0
    x.share_memory_()  # idempotent
    assert len(segments() - before) == 1
    del x, v
    assert segments() == before  # the owner unlinks at free


@pytest.mark.parametrize("dtype", DTYPES)
def test_pickle_by_value_every_dtype(dtype):
    dt = getattr(ember, dtype)
    x = (ember.arange(24) % 3).reshape(2, 3, 4).to(dt)
    for t in (x, x.transpose(0, 2), x[:, ::2], x[0, 0, 0], x[:0]):
        y = pickle.loads(pickle.dumps(t))
        assert y.dtype is dt and y.shape == t.shape
        assert y.tolist() == t.tolist()
        assert not y.is_shared()


def test_plain_pickle_of_shared_tensor_is_by_value():
    x = ember.ones(4).share_memory_()
    y = pickle.loads(pickle.dumps(x))
    assert not y.is_shared() and y.tolist() == [1.0] * 4


def test_forking_pickler_maps_the_same_pages():
    x = ember.zeros(3, 5).share_memory_()
    view = x.t()[1:]
    y = pickle.loads(mp_dumps(view))
    assert y.is_shared() and y.shape == view.shape and y.stride() == view.stride()
    y[0, 0] = 7.0
    assert x[0, 1].item() == 7.0  # no copy: same memory


def test_small_tensor_travels_by_value_large_one_by_handoff(monkeypatch):
    # Copies of up to MP_POOL_MAX_BYTES go into the sender's recycled segments instead.
    monkeypatch.setattr(ember.multiprocessing_reductions, "MP_POOL_MAX_BYTES", 0)
    before = segments()
    small = ember.ones(8)
    assert not pickle.loads(mp_dumps(small)).is_shared()
    big = ember.arange(100_000, dtype=ember.float32)
    blob = mp_dumps(big)  # copied once into a handoff segment
    assert len(segments() - before) == 1
    y = pickle.loads(blob)
    assert segments() == before  # the receiver unlinked it when it mapped it
    assert y.is_shared() and y[99_999].item() == 99_999.0
    with pytest.raises(RuntimeError, match="cannot open segment"):
        pickle.loads(blob)  # a handoff tensor is received once


def test_policies_and_handles():
    before = segments()
    for policy in (OWNER, HANDOFF, POOLED):
        t = _C._empty_shared([4, 4], ember.float32, policy)
        name, nbytes, pol = _C._shm_handle(t)
        assert pol == policy and nbytes == 64 and name.startswith("/" + _C._shm_prefix(os.getpid()))
    assert _C._shm_handle(ember.ones(2)) is None
    # Owner and unsent handoff segments are unlinked at free; pooled ones stay for reuse.
    left = segments() - before
    assert all(n.startswith(_C._shm_prefix(os.getpid())) for n in left)


def test_pooled_segments_are_recycled_once_the_receiver_frees_them():
    a = _C._empty_shared([1000], ember.float32, POOLED)
    a.fill_(3.0)
    blob = mp_dumps(a)
    name_a = _C._shm_handle(a)[0]
    del a  # the sender's reference goes; the receiver's (taken at send) stays
    b = _C._empty_shared([1000], ember.float32, POOLED)
    name_b = _C._shm_handle(b)[0]
    assert name_b != name_a  # still in use by the (future) receiver
    r = pickle.loads(blob)
    assert r.tolist() == [3.0] * 1000
    del r, b
    c = _C._empty_shared([1000], ember.float32, POOLED)
    assert _C._shm_handle(c)[0] in (name_a, name_b)  # recycled, not a new segment
    del c
    _C._shm_trim_cache()


def test_unknown_policy_and_bad_metadata():
    with pytest.raises(ValueError, match="policy"):
        _C._empty_shared([2], ember.float32, 7)
    t = _C._empty_shared([4], ember.float32, OWNER)
    name, nbytes, _ = _C._shm_handle(t)
    with pytest.raises(RuntimeError, match="past the end"):
        _C._from_shm(name, nbytes, ember.float32, [8], [1], 0, OWNER)
    with pytest.raises(RuntimeError, match="cannot open segment"):
        _C._from_shm("/ember_does_not_exist", 16, ember.float32, [4], [1], 0, OWNER)


def _child_adds_one(q_in, q_out):
    ember.set_num_threads(1)  # a forked child must not use the parent's thread pool
    t = q_in.get(timeout=20)
    t.add_(1.0)
    q_out.put(t.is_shared())


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_cross_process_queue_no_copy(method):
    init_reductions()
    ctx = mp.get_context(method)
    x = ember.zeros(256, 256).share_memory_()
    q_in, q_out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_child_adds_one, args=(q_in, q_out), daemon=True)
    p.start()
    try:
        q_in.put(x)
        assert q_out.get(timeout=30) is True
        p.join(timeout=30)
        assert p.exitcode == 0
    finally:
        if p.is_alive():
            p.kill()
            p.join()
    assert x.sum().item() == 256 * 256  # the child wrote into our memory


def test_out_of_shared_memory_is_a_clear_error_not_a_bus_error():
    # A file-size limit makes posix_fallocate fail the way a full /dev/shm does (without
    # filling the machine's /dev/shm).
    code = textwrap.dedent(
        """
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        import ember
        from ember import _C
        try:
            _C._empty_shared([8 << 20], ember.uint8, 0)
        except RuntimeError as e:
            print("ERR", e)
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout
    assert "/dev/shm" in r.stdout and "--shm-size" in r.stdout


def test_pin_memory_is_a_noop_on_cpu_build():
    x = ember.ones(3)
    assert x.pin_memory() is x
    assert x.is_pinned() is False
