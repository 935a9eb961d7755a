"""ember._C._set_op_observer: the dispatcher reports the outermost op of each call with its
tensor arguments and results (what ember.onnx.export records through)."""

from __future__ import annotations

import threading

import ember
import pytest
from ember import _C


@pytest.fixture
def seen():
    calls = []

    def cb(op, inputs, outputs):
        calls.append((op, inputs, outputs))

    _C._set_op_observer(cb)
    try:
        yield calls
    finally:
        _C._set_op_observer(None)


def test_reports_outermost_ops_with_tensors(seen):
    x, y = ember.randn(2, 3), ember.randn(3, 4)
    seen.clear()
    z = ember.mm(x, y)
    w = (z + 1).relu()
    assert [c[0] for c in seen] == ["mm", "add", "relu"]
    op, ins, outs = seen[0]
    assert ins[0] is x and ins[1] is y and outs[0] is z  # the same Python objects
    assert seen[2][2][0] is w
    assert len(seen[1][1]) == 1  # the Python number 1 is no tensor


def test_composite_reports_only_itself(seen):
    # cross_entropy is a composite of log_softmax, gathers and a mean: one report
    x, target = ember.randn(4, 5), ember.tensor([0, 1, 2, 3])
    seen.clear()
    loss = ember.cross_entropy(x, target)
    assert [c[0] for c in seen] == ["cross_entropy"]
    assert seen[0][1][0] is x and seen[0][1][1] is target and seen[0][2][0] is loss


def test_tuple_and_list_results(seen):
    x = ember.randn(4, 6)
    seen.clear()
    parts = ember.split(x, [2, 4], 1)
    vals, idx = ember.max(x, 1)
    assert seen[0][0] == "split" and len(seen[0][2]) == 2 and seen[0][2][1] is parts[1]
    assert seen[1][0] == "max" and seen[1][2][0] is vals and seen[1][2][1] is idx
    seen.clear()
    ember.cat([x, x], 0)
    assert seen[0][0] == "cat" and seen[0][1][0] is x and seen[0][1][1] is x


def test_callback_error_propagates_and_removal():
    def boom(op, inputs, outputs):
        raise KeyError(op)

    x = ember.ones(2)
    _C._set_op_observer(boom)
    try:
        with pytest.raises(KeyError, match="neg"):
            ember.neg(x)
    finally:
        _C._set_op_observer(None)
    assert ember.neg(ember.ones(2)).tolist() == [-1.0, -1.0]
    with pytest.raises(TypeError, match="callable"):
        _C._set_op_observer(3)


def test_other_threads_are_reported_too(seen):
    seen.clear()
    t = threading.Thread(target=lambda: ember.exp(ember.zeros(2)))
    t.start()
    t.join()
    assert "exp" in [c[0] for c in seen]
