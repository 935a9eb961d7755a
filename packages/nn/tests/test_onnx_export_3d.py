"""ember.onnx.export of the 3-d ops (max_pool3d, avg_pool3d, adaptive_avg_pool3d,
adaptive_max_pool3d, conv_transpose3d): checked with onnx.checker and run in onnxruntime, whose
outputs must match ember's, also at another batch size through dynamic axes."""

from __future__ import annotations

import io

import ember
import numpy as np
import pytest
from ember import nn
from ember.nn import functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

TOL = {"rtol": 1e-4, "atol": 1e-5}


def _check(model: nn.Module, *xs: ember.Tensor) -> set[str]:
    """Exports model at xs[0] (batch dim dynamic), runs onnxruntime on every x and compares with
    ember; returns the graph's op types."""
    model.eval()
    f = io.BytesIO()
    ember.onnx.export(model, (xs[0],), f, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
    proto = onnx.load_from_string(f.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    for x in xs:
        with ember.no_grad():
            expected = model(x).numpy()
        (got,) = sess.run(None, {"x": x.numpy()})
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, **TOL)
    return {n.op_type for n in proto.graph.node}


def test_conv3d_pools_transpose_global_pool():
    ember.manual_seed(0)
    model = nn.Sequential(
        nn.Conv3d(2, 4, 3, padding=1),
        nn.MaxPool3d(3, stride=2, padding=1),
        nn.ReLU(),
        nn.ConvTranspose3d(4, 3, (3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1),
                           output_padding=(1, 0, 0), dilation=(1, 2, 1)),
        nn.AvgPool3d(2, stride=(1, 2, 2), padding=1, ceil_mode=True, count_include_pad=False),
        nn.AdaptiveAvgPool3d(1),
        nn.Flatten(),
    )
    ops = _check(model, ember.randn(2, 2, 7, 6, 8), ember.randn(3, 2, 7, 6, 8))
    assert {"MaxPool", "ConvTranspose", "AveragePool", "GlobalAveragePool"} <= ops


class _Functional3d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(ember.randn(3, 4, 2, 3, 2) * 0.3)  # (C_in, C_out, k...)
        self.b = nn.Parameter(ember.randn(4))

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        y = F.conv_transpose3d(x, self.w, self.b, stride=2, padding=(0, 1, 0))
        a = F.max_pool3d(y, (2, 3, 2), stride=1, dilation=(1, 1, 2))
        b = F.avg_pool3d(a, 2, ceil_mode=True)
        c = F.adaptive_avg_pool3d(b, (1, 2, 1))
        return F.adaptive_max_pool3d(c, 1).flatten(1) + F.adaptive_avg_pool3d(b, (1, 1, 1)).flatten(1)


def test_functional_3d_ops():
    ember.manual_seed(1)
    x = ember.randn(2, 3, 4, 5, 4)
    ops = _check(_Functional3d(), x, ember.randn(1, 3, 4, 5, 4))
    assert {"ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"} <= ops


def test_adaptive_avg_pool3d_divisible_uses_average_pool():
    model = nn.Sequential(nn.AdaptiveAvgPool3d((2, 3, 1)))
    ops = _check(model, ember.randn(2, 3, 4, 6, 5))
    assert "AveragePool" in ops and "GlobalAveragePool" not in ops


def test_adaptive_avg_pool3d_not_divisible_is_refused():
    model = nn.Sequential(nn.AdaptiveAvgPool3d((2, 4, 1)))
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="divisible"):
        ember.onnx.export(model, (ember.randn(1, 2, 4, 6, 5),), io.BytesIO())


def test_max_pool3d_return_indices_is_refused():
    class M(nn.Module):
        def forward(self, x):
            return F.max_pool3d(x, 2, return_indices=True)[0]

    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="return_indices"):
        ember.onnx.export(M(), (ember.randn(1, 2, 4, 4, 4),), io.BytesIO())
