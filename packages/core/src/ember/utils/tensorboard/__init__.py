"""``ember.utils.tensorboard``: PyTorch's ``torch.utils.tensorboard``, so that training
scripts log to TensorBoard unchanged. The event files are written by ember itself (TFRecord
framing with CRC-32C, hand-encoded protobuf ``Event`` messages, PNG images), so the
``tensorboard`` package is needed only to view them (``tensorboard --logdir runs``).

``SummaryWriter`` writes scalars (``add_scalar``, ``add_scalars``), histograms, images (also
batches, matplotlib figures and images with boxes), videos (animated GIFs), audio, text, whole
tensors, PR curves, custom-scalar layouts, embeddings for the projector and hyperparameters.
``add_graph``, ``add_onnx_graph`` and ``add_mesh`` raise NotImplementedError.

>>> import tempfile
>>> from ember.utils.tensorboard import SummaryWriter
>>> with tempfile.TemporaryDirectory() as d, SummaryWriter(d) as writer:
...     writer.add_scalar("loss", 0.1, global_step=0)
...     writer.get_logdir() == d
True
"""

from __future__ import annotations

from ember.utils.tensorboard.writer import FileWriter, SummaryWriter

__all__ = ["FileWriter", "SummaryWriter"]
