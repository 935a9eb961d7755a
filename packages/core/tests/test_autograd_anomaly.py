"""Anomaly mode: detect_anomaly / set_detect_anomaly / is_anomaly_enabled, the NaN check on what
each node's backward returns (same message as PyTorch), and the forward stack shown for the
failing node (and for the nodes whose backward created it, under create_graph=True)."""

import warnings

import ember
import pytest
from core_helpers import torch
from ember.autograd import Function, detect_anomaly, set_detect_anomaly


@pytest.fixture(autouse=True)
def anomaly_off_afterwards():
    yield
    ember.set_anomaly_enabled(False)


def quiet_detect_anomaly(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return detect_anomaly(**kw)


def nan_backward(L):
    x = L.tensor([0.0, 1.0], requires_grad=True)
    y = L.sqrt(x) * 0.0  # sqrt'(0) = inf, times 0 -> nan
    y.sum().backward()


def test_nan_in_backward_raises_naming_the_node_like_torch():
    with quiet_detect_anomaly():
        with pytest.warns(UserWarning, match="Error detected in SqrtBackward0") as rec:
            with pytest.raises(RuntimeError) as ours:
                nan_backward(ember)
    assert str(ours.value) == "Function 'SqrtBackward0' returned nan values in its 0th output."
    if torch is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly():
                with pytest.raises(RuntimeError) as theirs:
                    nan_backward(torch)
        assert str(theirs.value) == str(ours.value)
    # The warning carries the stack where the forward op ran: this file, in nan_backward.
    text = str(rec[0].message)
    assert "Traceback of forward call that caused the error" in text
    assert "test_autograd_anomaly.py" in text and "in nan_backward" in text
    assert "y = L.sqrt(x) * 0.0" in text


def test_without_anomaly_mode_nan_passes_silently():
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    (ember.sqrt(x) * 0.0).sum().backward()
    assert x.grad.isnan().tolist() == [True, False]


def test_check_nan_false_only_reports_errors():
    with quiet_detect_anomaly(check_nan=False):
        assert ember.autograd.is_anomaly_enabled() and not ember.autograd.is_anomaly_check_nan_enabled()
        nan_backward(ember)


def test_error_in_backward_is_reported_with_the_forward_stack():
    class Fails(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("bad backward")

    with quiet_detect_anomaly():
        x = ember.ones(2, requires_grad=True)
        y = Fails.apply(x)  # the line the warning must point at
        with pytest.warns(UserWarning, match="Error detected in FailsBackward") as rec:
            with pytest.raises(ValueError, match="bad backward"):
                y.sum().backward()
    assert "y = Fails.apply(x)" in str(rec[0].message)


def test_node_made_before_anomaly_mode_has_no_stack():
    x = ember.tensor([0.0], requires_grad=True)
    y = ember.sqrt(x) * 0.0
    with quiet_detect_anomaly():
        with pytest.warns(UserWarning, match="No forward pass information available"):
            with pytest.raises(RuntimeError, match="SqrtBackward0"):
                y.sum().backward()


def test_create_graph_reports_the_node_that_induced_the_failing_one():
    class Scaled(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ember.sqrt(x) * 0.0  # fine at 0; its own gradient there is nan

    with quiet_detect_anomaly():
        x = ember.tensor([0.0], requires_grad=True)
        y = Scaled.apply(x)
        (g,) = ember.autograd.grad(y, x, create_graph=True)
        with pytest.warns(UserWarning, match="Error detected in SqrtBackward0") as rec:
            with pytest.raises(RuntimeError, match="returned nan values"):
                g.sum().backward()
    text = str(rec[0].message)
    assert "return g * ember.sqrt(x) * 0.0" in text  # where the failing node was made
    assert "Previous calculation was induced by ScaledBackward" in text
    assert "y = Scaled.apply(x)" in text


def test_modes_and_decorator():
    assert not ember.autograd.is_anomaly_enabled() and not ember.is_anomaly_enabled()
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        ctx = detect_anomaly()
    with ctx:
        assert ember.autograd.is_anomaly_enabled()
        with set_detect_anomaly(False):
            assert not ember.autograd.is_anomaly_enabled()
        assert ember.autograd.is_anomaly_enabled()
    assert not ember.autograd.is_anomaly_enabled()

    @quiet_detect_anomaly()
    def inside():
        return ember.autograd.is_anomaly_enabled()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert inside() and not ember.autograd.is_anomaly_enabled()
    set_detect_anomaly(True)  # as a plain call it stays on
    assert ember.autograd.is_anomaly_enabled()
    set_detect_anomaly(False)
    assert not ember.autograd.is_anomaly_enabled()
