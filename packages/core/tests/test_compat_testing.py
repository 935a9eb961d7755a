"""ember.testing (issue 15: programs and their tests call torch.testing.assert_close and
make_tensor): the same verdicts and messages as torch's, case by case."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember.testing import assert_close, make_tensor


def _cases(lib):
    t = lib.tensor
    return [
        (t([1.0, 2.0, 3.0]), t([1.0, 2.5, 3.0]), {}),
        (t([1.0, 2.0]), t([1.0, 2.0], dtype=lib.float64), {}),
        (lib.ones(2), lib.ones(3), {}),
        (t([1, 2]), t([1, 3]), {}),
        (1.0, 1.5, {}),
        (1, 1.0, {}),
        (1.0, 1.0 + 1e-9, {}),
        ([lib.ones(2), 2.0], [lib.ones(2), 2.0], {}),
        ({"a": lib.ones(2)}, {"a": lib.zeros(2)}, {}),
        ({"a": 1}, {"b": 1}, {}),
        ([1, 2], [1, 2, 3], {}),
        (t([float("nan")]), t([float("nan")]), {}),
        (t([float("nan")]), t([float("nan")]), {"equal_nan": True}),
        (t([1.0, 2.0]), t([1.1, 2.0]), {"rtol": 0.2, "atol": 0.0}),
        (t([1.0, 2.0]), t([1.5, 2.0]), {"rtol": 0.2, "atol": 0.0}),
        (t([True, False]), t([True, True]), {}),
        (np.ones(2), np.ones(2) * 1.5, {}),
        (t([1.0, 2.0]), t([1.0, 3.0]), {"msg": "custom"}),
        (t([1.0, 2.0]), t([1.0, 3.0]), {"msg": lambda m: "wrapped: " + m.splitlines()[0]}),
        (t(float("inf")), t(float("inf")), {}),
        (t(float("inf")), t(-float("inf")), {}),
        (lib.ones(2, 2), lib.ones(2, 2).t(), {"check_stride": True}),
        (lib.ones(2), lib.ones(2, dtype=lib.float64), {"check_dtype": False}),
        (t([1.0, 2.0], dtype=lib.bfloat16), t([1.0, 2.01], dtype=lib.bfloat16), {}),
        (t([1.0, 2.0]), t([1.0, 2.0 + 1e-6]), {}),
        (t([[1.0, 2.0], [3.0, 4.0]]), t([[1.0, 2.0], [3.5, 4.0]]), {}),
        ([t([1.0]), {"x": [t([2.0])]}], [t([1.0]), {"x": [t([2.5])]}], {}),
    ]


def _outcome(lib, a, e, kw):
    try:
        lib.testing.assert_close(a, e, **kw)
        return "ok"
    except (AssertionError, TypeError, ValueError) as exc:
        return f"{type(exc).__name__}: {str(exc).replace('torch', 'ember')}"


def test_verdicts_and_messages_match_torch():
    torch = pytest.importorskip("torch")
    got = [_outcome(ember, *c) for c in _cases(ember)]
    want = [_outcome(torch, *c) for c in _cases(torch)]
    for g, w in zip(got, want):
        assert g == w


def test_errors():
    with pytest.raises(ValueError, match="but got no atol"):
        assert_close(ember.ones(1), ember.ones(1), rtol=0.1)
    with pytest.raises(TypeError, match="No comparison pair was able to handle inputs"):
        assert_close(ember.ones(2), np.ones(2))
    with pytest.raises(TypeError, match="no comparison for inputs of types str and str"):
        assert_close("a", "a")
    with pytest.raises(AssertionError, match=r"The failure occurred for item \[1\]\['x'\]"):
        assert_close([1, {"x": ember.ones(1)}], [1, {"x": ember.zeros(1)}])
    x = ember.ones(2, requires_grad=True)
    assert_close(x * 1, ember.ones(2))  # tensors that need grad compare by value


def test_make_tensor():
    ember.manual_seed(0)
    f = make_tensor(3, 4, dtype=ember.float64, low=-1, high=1)
    assert f.shape == (3, 4) and f.dtype == ember.float64 and bool(((f >= -1) & (f < 1)).all())
    i = make_tensor((50,), dtype=ember.int64, device="cpu", low=0, high=3)
    assert set(i.tolist()) <= {0, 1, 2}
    u = make_tensor(20, dtype=ember.uint8)
    assert bool((u >= 0).all()) and bool((u < 10).all())
    b = make_tensor(6, dtype=ember.bool)
    assert b.dtype == ember.bool
    n = make_tensor(2, 3, dtype=ember.float32, noncontiguous=True, requires_grad=True)
    assert not n.is_contiguous() and n.requires_grad and n.shape == (2, 3)
    z = make_tensor(100, dtype=ember.int32, low=-1, high=2, exclude_zero=True)
    assert not bool((z == 0).any())
    with pytest.raises(ValueError, match="low .* must not exceed high"):
        make_tensor(2, dtype=ember.float32, low=1, high=0)
