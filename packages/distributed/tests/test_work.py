"""The per-group executor and Work handles of ember.distributed (single process, no backend)."""

from __future__ import annotations

import random
import threading
import time

import pytest
from ember.distributed._work import Future, Work, _Executor


def test_operations_run_in_issue_order_whoever_runs_them():
    ex = _Executor("order")
    ran: list[int] = []
    threads: set[str] = set()
    rng = random.Random(0)
    works: list[Work] = []

    def op(i: int):
        def fn() -> int:
            threads.add(threading.current_thread().name)
            if i % 7 == 0:
                time.sleep(0.001)  # lets the queue grow behind it
            ran.append(i)
            return i
        return fn

    for i in range(300):
        kind = rng.random()
        if kind < 0.15:
            ex.run(f"sync{i}", op(i), [], async_op=False)  # waits for everything before it
            assert ran[-1] == i
        else:
            works.append(ex.run(f"op{i}", op(i), [i], async_op=True))
            if kind > 0.8:
                rng.choice(works).wait()  # may run queued operations in this thread
    for w in works:
        assert w.wait() is True
        assert w.is_completed() and w.is_success()
    assert ran == list(range(300))
    assert all(w.result() == [w.op_name[2:] and int(w.op_name[2:])] for w in works)
    assert ex.drain(5.0) and ex.pending == 0
    assert len(threads) >= 1
    ex.close()


def test_wait_on_an_unstarted_operation_runs_it_in_the_waiting_thread():
    ex = _Executor("inline")
    gate = threading.Event()
    where: list[str] = []
    first = ex.run("first", lambda: gate.wait(10), [], async_op=True)
    # `first` blocks the executor thread; `second` queues behind it.
    second = ex.run("second", lambda: where.append(threading.current_thread().name), [],
                    async_op=True)
    time.sleep(0.05)
    assert not second.is_completed()
    gate.set()
    second.wait()
    first.wait()
    assert where and second.is_completed()
    # Nothing running: a wait before the thread got to it runs it here, after earlier ones.
    ex2 = _Executor("inline2")
    order: list[str] = []
    with ex2.lock:  # the executor thread cannot start anything while this is held
        a = ex2.run("a", lambda: order.append("a"), [], async_op=True)
        b = ex2.run("b", lambda: order.append(threading.current_thread().name), [],
                    async_op=True)
    b.wait()
    assert a.is_completed()
    assert order[0] == "a" and len(order) == 2
    ex.close()
    ex2.close()


def test_errors_reach_wait_and_later_operations_still_run():
    ex = _Executor("errors")

    def boom() -> None:
        raise ValueError("bad collective")

    w1 = ex.run("boom", boom, [], async_op=True)
    w2 = ex.run("ok", lambda: 5, [], async_op=True, returns_value=True)
    with pytest.raises(ValueError, match="bad collective"):
        w1.wait()
    assert not w1.is_success() and isinstance(w1.exception(), ValueError)
    assert w2.wait() and w2._value == 5
    with pytest.raises(ValueError, match="bad collective"):
        ex.run("sync-boom", boom, [], async_op=False)
    ex.close()


def test_wait_timeout_and_drain_timeout_and_closed_executor():
    ex = _Executor("timeout")
    gate = threading.Event()
    w = ex.run("stuck", lambda: gate.wait(10), [], async_op=True)
    time.sleep(0.02)
    with pytest.raises(RuntimeError, match="stuck did not complete within 0.05 s"):
        w.wait(timeout=0.05)
    assert ex.drain(0.01) is False
    gate.set()
    assert w.wait() and ex.drain(5.0)
    ex.close()
    with pytest.raises(RuntimeError, match="process group was destroyed"):
        ex.run("late", lambda: None, [], async_op=True)


def test_future_wakes_every_waiter_and_runs_callbacks():
    f = Future()
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(f.wait(10))) for _ in range(4)]
    for t in threads:
        t.start()
    chained = f.then(lambda fut: fut.value() + 1)
    with pytest.raises(TimeoutError):
        f.wait(0.01)
    f.set_result(41)
    for t in threads:
        t.join(10)
    assert got == [41] * 4 and chained.wait(10) == 42
    with pytest.raises(RuntimeError, match="already set"):
        f.set_result(1)
    seen: list = []
    f.add_done_callback(lambda fut: seen.append(fut.value()))
    assert seen == [41]
    g = Future()
    with pytest.raises(RuntimeError, match="not completed yet"):
        g.value()
    g.set_exception(KeyError("k"))
    with pytest.raises(KeyError):
        g.wait()
