"""Errors CUDA kernels find in their inputs (embedding indices, loss targets): raised at the op
(the default: the op waits for its kernels) or, with ember._C_cuda._set_deferred_errors(True), at
the next wait for the device (cuda/device_checks.h), so that a training step never waits on its
embedding or its loss.

CPU-runnable: the switch exists, is off by default, and nothing is pending. On a GPU (skipped
without): immediate errors and their sync point; deferred errors raised by
ember.cuda.synchronize, by .item() (a blocking copy) and by Stream.synchronize, once, with the
op's own kind and message; no wait at all for valid inputs (sync debug mode "error"); a long run
of checks without any wait (the ring of slots wraps).
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import ember
import ember.nn.functional as F
import pytest

needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")


def _ext():
    try:
        from ember import _C_cuda
    except ImportError:
        pytest.skip("ember was built without its CUDA extension")
    return _C_cuda


@pytest.fixture
def deferred():
    ext = _ext()
    was = ext._deferred_errors()
    ext._set_deferred_errors(True)
    yield ext
    if ember.cuda.is_available():
        try:
            ember.cuda.synchronize()  # leave nothing pending for the next test
        except IndexError:
            pass
    ext._set_deferred_errors(was)
    ember.cuda.set_sync_debug_mode(0)


def test_switch_exists_and_defaults_to_off():
    _ext()
    code = ("import ember._C_cuda as c; print(c._deferred_errors()); "
            "c._set_deferred_errors(True); print(c._deferred_errors()); "
            "print(c._deferred_errors_pending(0))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out == ["False", "True", "0"]


def _table(n=10, d=4):
    return ember.randn(n, d).cuda()


@needs_cuda
def test_immediate_errors_are_raised_at_the_op_and_wait_for_it():
    ext = _ext()
    ext._set_deferred_errors(False)
    w = _table()
    with pytest.raises(IndexError, match="embedding: index 12 is out of range for 10 embeddings"):
        F.embedding(ember.tensor([1, 12]).cuda(), w)
    ember.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            F.embedding(ember.tensor([1, 2]).cuda(), w)
    finally:
        ember.cuda.set_sync_debug_mode(0)
    assert any("error check" in str(c.message) for c in caught), [str(c.message) for c in caught]


@needs_cuda
def test_deferred_embedding_error_raised_at_synchronize_once(deferred):
    w = _table()
    out = F.embedding(ember.tensor([1, 12]).cuda(), w)  # no wait, no error yet
    assert tuple(out.shape) == (2, 4)
    assert deferred._deferred_errors_pending(ember.cuda.current_device()) == 1
    with pytest.raises(IndexError, match=r"embedding: index 12 is out of range for 10 embeddings"
                                         r".*asynchronously"):
        ember.cuda.synchronize()
    ember.cuda.synchronize()  # raised once
    assert deferred._deferred_errors_pending(ember.cuda.current_device()) == 0
    good = F.embedding(ember.tensor([3]).cuda(), w)  # the device is fine
    assert good.cpu().tolist() == w.cpu()[3:4].tolist()


@needs_cuda
def test_deferred_loss_error_raised_by_item(deferred):
    x = ember.randn(4, 5).cuda().requires_grad_()
    loss = F.cross_entropy(x, ember.tensor([0, 1, 7, 2]).cuda())
    with pytest.raises(IndexError, match="target 7 is out of bounds"):
        loss.item()
    # A valid loss afterwards, forward and backward, with its value.
    y = ember.tensor([0, 1, 4, 2]).cuda()
    loss = F.cross_entropy(x, y)
    loss.backward()
    ref = F.cross_entropy(x.detach().cpu(), y.cpu())
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5)


@needs_cuda
def test_deferred_error_raised_by_its_streams_synchronize(deferred):
    w = _table()
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        F.embedding(ember.tensor([10]).cuda(), w)
    with pytest.raises(IndexError, match="index 10 is out of range"):
        s.synchronize()


@needs_cuda
def test_deferred_valid_step_never_waits(deferred):
    emb = ember.nn.Embedding(50, 8).cuda()
    head = ember.nn.Linear(8, 50).cuda()
    idx = ember.randint(0, 50, (4, 16)).cuda()
    target = ember.randint(0, 50, (64,)).cuda()
    ember.cuda.synchronize()
    ember.cuda.set_sync_debug_mode("error")
    try:
        loss = F.cross_entropy(head(emb(idx)).view(-1, 50), target)
        loss.backward()
    finally:
        ember.cuda.set_sync_debug_mode(0)
    assert loss.item() > 0 and emb.weight.grad is not None


@needs_cuda
def test_deferred_checks_past_the_ring_of_slots(deferred):
    w = _table()
    idx = ember.tensor([1, 2, 3]).cuda()
    for _ in range(2500):  # more checks than slots, no wait: the oldest are resolved on the way
        F.embedding(idx, w)
    dev = ember.cuda.current_device()
    assert 0 < deferred._deferred_errors_pending(dev) <= 1024
    F.embedding(ember.tensor([11]).cuda(), w)
    with pytest.raises(IndexError, match="index 11"):
        ember.cuda.synchronize()
    assert deferred._deferred_errors_pending(dev) == 0
