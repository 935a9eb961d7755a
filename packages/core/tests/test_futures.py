"""ember.futures: Future, collect_all, wait_all (side by side with torch.futures)."""

from __future__ import annotations

import threading
import time

import ember
import pytest
from ember.futures import Future, collect_all, wait_all


def _impls():
    impls = [("ember", Future, collect_all, wait_all)]
    try:
        import torch.futures as tf
    except ImportError:
        return impls
    return impls + [("torch", tf.Future, tf.collect_all, tf.wait_all)]


IMPLS = _impls()
ids = [i[0] for i in IMPLS]


def test_module_attribute():
    assert ember.futures.Future is Future
    assert ember.futures.__all__ == ["Future", "collect_all", "wait_all"]


@pytest.mark.parametrize("name, F, collect, wait_all_", IMPLS, ids=ids)
def test_result_and_double_completion(name, F, collect, wait_all_):
    f = F()
    assert not f.done()
    f.set_result(3)
    assert f.done() and f.wait() == 3 and f.value() == 3
    with pytest.raises(RuntimeError, match="completed"):
        f.set_result(4)


@pytest.mark.parametrize("name, F, collect, wait_all_", IMPLS, ids=ids)
def test_exception_through_wait_value_then(name, F, collect, wait_all_):
    g = F()
    g.set_exception(ValueError("bad"))
    assert g.done()
    with pytest.raises(ValueError, match="bad"):
        g.wait()
    with pytest.raises(ValueError, match="bad"):
        g.value()
    # a callback that reads the failed value fails; the error names the original
    h = g.then(lambda fut: fut.value() + 1)
    with pytest.raises(RuntimeError, match="ValueError: bad"):
        h.wait()
    # a callback that ignores the error completes normally
    assert g.then(lambda fut: 5).wait() == 5


@pytest.mark.parametrize("name, F, collect, wait_all_", IMPLS, ids=ids)
def test_then_chains_and_callback_errors(name, F, collect, wait_all_):
    f = F()
    g = f.then(lambda fut: fut.value() * 2).then(lambda fut: fut.value() + 1)
    assert not g.done()
    f.set_result(ember.ones(2) if name == "ember" else 1.0)
    out = g.wait()
    assert (out.tolist() if name == "ember" else [out, out]) == [3.0, 3.0]
    k = F()
    k2 = k.then(lambda fut: 1 / 0)
    k.set_result(1)
    assert k2.done()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        k2.wait()
    # already completed: then runs the callback at once
    done = F()
    done.set_result(2)
    assert done.then(lambda fut: fut.value() ** 3).value() == 8


@pytest.mark.parametrize("name, F, collect, wait_all_", IMPLS, ids=ids)
def test_add_done_callback(name, F, collect, wait_all_, capfd):
    a = F()
    seen = []
    assert a.add_done_callback(lambda fut: seen.append(fut.value())) is None
    assert seen == []
    a.set_result(7)
    assert seen == [7]
    a.add_done_callback(lambda fut: seen.append(8))
    assert seen == [7, 8]
    b = F()
    b.add_done_callback(lambda fut: 1 / 0)  # reported, not raised
    b.set_result(1)
    assert b.value() == 1
    assert "ZeroDivisionError" in capfd.readouterr().err


@pytest.mark.parametrize("name, F, collect, wait_all_", IMPLS, ids=ids)
def test_collect_all_and_wait_all(name, F, collect, wait_all_):
    fs = [F() for _ in range(3)]
    c = collect(fs)
    assert not c.done()
    for i, f in enumerate(fs):
        f.set_result(i)
    assert c.done()
    got = c.wait()
    assert isinstance(got, list) and [f.value() for f in got] == [0, 1, 2]
    assert wait_all_(fs) == [0, 1, 2]
    bad = [F(), F()]
    c = collect(bad)
    bad[0].set_exception(ValueError("e0"))
    assert not c.done()
    bad[1].set_result(1)
    assert c.done()
    with pytest.raises(ValueError, match="e0"):
        c.wait()
    bad2 = [F(), F()]
    bad2[0].set_result(1)
    bad2[1].set_exception(KeyError("k"))
    with pytest.raises(KeyError):
        wait_all_(bad2)


@pytest.mark.parametrize("name, F, collect, wait_all_", IMPLS, ids=ids)
def test_wait_across_threads(name, F, collect, wait_all_):
    t = F()
    seen = []
    t.add_done_callback(lambda fut: seen.append(threading.current_thread().name))

    def later():
        time.sleep(0.05)
        t.set_result(9)

    th = threading.Thread(target=later, name="completer")
    th.start()
    assert t.wait() == 9
    th.join(timeout=30)
    assert seen == ["completer"]  # callbacks run in the completing thread


def test_bad_arguments():
    with pytest.raises(TypeError, match="set_exception: expected an exception"):
        Future().set_exception("not an exception")
    with pytest.raises(TypeError, match="callback must be a callable"):
        Future().then(5)
    with pytest.raises(TypeError, match="callback must be a callable"):
        Future().add_done_callback(None)
    with pytest.raises(TypeError, match="collect_all: expected a list of ember.futures.Future"):
        collect_all([1])
    with pytest.raises(TypeError, match="wait_all: expected a list"):
        wait_all(3)
    with pytest.raises(RuntimeError, match="not completed yet"):
        Future().value()
    assert collect_all([]).wait() == []


def test_generic_and_devices():
    assert Future[int] is not None
    f = Future(devices=["cpu"])
    f.set_result(1)
    assert f.then(lambda x: x.value()).wait() == 1
    assert "done" in repr(f)


def test_lazy_waiter():
    # a future completed by its waiter when first waited for (DDP's comm-hook futures)
    calls = []
    f = Future()
    f._set_waiter(lambda: calls.append(1) or "ready")
    g = f.then(lambda fut: fut.value().upper())
    assert not f.done() and calls == []
    assert g.wait() == "READY" and calls == [1]
    assert f.wait() == "ready" and calls == [1]
    err = Future()
    err._set_waiter(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        err.wait()
    with pytest.raises(ZeroDivisionError):
        wait_all([err])


def test_comm_types_future_is_public_type():
    pytest.importorskip("ember.distributed")
    from ember.distributed.algorithms._comm_types import Future as CommFuture

    f = CommFuture(lambda: ember.ones(2))
    assert isinstance(f, Future)
    g = f.then(lambda fut: fut.value() * 2)
    assert isinstance(g, Future) and g.wait().tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="waiter must be callable"):
        CommFuture(3)


def test_wait_on_a_future_nothing_can_complete_raises():
    if threading.active_count() != 1:
        pytest.skip("another Python thread is running: it could complete the future")
    with pytest.raises(RuntimeError, match="can never complete"):
        Future().wait()
    with pytest.raises(RuntimeError, match="can never complete"):
        Future().then(lambda f: 1).wait()
    with pytest.raises(RuntimeError, match="wait_all: the future can never complete"):
        wait_all([Future()])
