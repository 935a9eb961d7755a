"""Export ember models to ONNX (``ember.onnx.export``), built on the ``onnx`` package.

The model runs once on the example inputs while a recorder watches the ops it calls; each op
that touches data derived from the inputs becomes one or a few ONNX nodes, parameters and
buffers become initializers, and ops on constants only are folded into initializers.

>>> import ember, ember.nn as nn  # doctest: +SKIP
>>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))  # doctest: +SKIP
>>> ember.onnx.export(model, (ember.randn(3, 4),), "mlp.onnx",
...                   input_names=["x"], output_names=["y"],
...                   dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})  # doctest: +SKIP

Install the optional dependencies with ``pip install ember-core[onnx]`` (``onnx`` and, to run
the exported graphs, ``onnxruntime``).
"""

from __future__ import annotations

from ember.onnx._export import UnsupportedOperatorError, export, is_in_onnx_export

__all__ = ["UnsupportedOperatorError", "export", "is_in_onnx_export"]
