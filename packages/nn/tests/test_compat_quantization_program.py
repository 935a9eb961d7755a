"""A PyTorch eager-mode quantization program (compat_programs/quant_eager_workflow.py: quantized
tensors, QAT of a fused conv net with a FloatFunctional residual, post-training static
quantization, dynamic quantization, a quantized state_dict round trip) run unchanged on torch
and on ember through the `torch` -> `ember` import shim; ember's output must print the same
lines with numbers equal to a tolerance, and its self-checks hold without torch."""

from __future__ import annotations

import pytest
from test_compat_programs import _check_program as _check
from test_compat_programs import _results

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def test_quant_eager_workflow(capsys):
    got = _check("quant_eager_workflow.py", capsys, rtol=2e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.95
    assert "int_repr [0, 2, 4, 4, 202] qscheme torch.per_tensor_affine scale 0.5" in got
    assert "per channel [[9, -10, -6], [-5, 5, 8]] 0" in got
    assert "fused ConvBnReLU2d LinearReLU Identity" in got
    assert "qat ConvBnReLU2d Linear FusedMovingAvgObsFakeQuantize" in got
    assert "converted Quantize ConvReLU2d QFunctional Linear" in got
    assert "state_dict round trip equal True" in got
    assert "observer HistogramObserver" in got and "ptq max error in steps True" in got
    assert "dynamic max abs error small True" in got
