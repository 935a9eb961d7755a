"""Files of TensorBoard's embedding projector: per embedding, a directory
``<log_dir>/<step, 5 digits>/<tag>`` with ``tensors.tsv`` (one row per point), optionally
``metadata.tsv`` (labels) and ``sprite.png`` (the points' thumbnails tiled in a square), and one
``projector_config.pbtxt`` in the log directory listing them all (protobuf text format of
``ProjectorConfig``: ``embeddings`` entries with tensor_name, metadata_path, sprite {image_path,
single_image_dim (width, height)}, tensor_path).

>>> import numpy as np
>>> from ember.utils.tensorboard._embedding import embedding_entry, encode_tag
>>> encode_tag("a/b")
'a%2fb'
>>> print(embedding_entry("emb:00003", "00003/emb", has_metadata=True, sprite_dim=None), end="")
embeddings {
  tensor_name: "emb:00003"
  metadata_path: "00003/emb/metadata.tsv"
  tensor_path: "00003/emb/tensors.tsv"
}
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ember.utils.tensorboard._png import encode_png

CONFIG_NAME = "projector_config.pbtxt"


def encode_tag(tag: str) -> str:
    """A tag as one path component: ``%``, ``/`` and ``\\`` percent-encoded."""
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def _quote(text: str) -> str:
    """A protobuf text-format string literal (UTF-8 kept, quotes and control bytes escaped)."""
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "'": "\\'"}
    return '"' + "".join(escapes.get(c, f"\\{ord(c):03o}" if ord(c) < 32 else c)
                         for c in text) + '"'


def embedding_entry(tensor_name: str, subdir: str, has_metadata: bool,
                    sprite_dim: Optional[tuple[int, int]]) -> str:
    """One ``embeddings { ... }`` block of the projector config (fields in number order, as
    protobuf's text format prints them)."""
    lines = ["embeddings {", f"  tensor_name: {_quote(tensor_name)}"]
    if has_metadata:
        lines.append(f"  metadata_path: {_quote(subdir + '/metadata.tsv')}")
    if sprite_dim is not None:
        lines += ["  sprite {", f"    image_path: {_quote(subdir + '/sprite.png')}",
                  *(f"    single_image_dim: {d}" for d in sprite_dim), "  }"]
    lines += [f"  tensor_path: {_quote(subdir + '/tensors.tsv')}", "}"]
    return "\n".join(lines) + "\n"


def metadata_tsv(metadata: Sequence[Any], header: Optional[Sequence[Any]] = None) -> bytes:
    """Labels, one line per point; with ``header``, rows of tab-separated columns."""
    if not header:
        lines = [str(x) for x in metadata]
    else:
        if len(header) != len(metadata[0]):
            raise AssertionError("len of header must be equal to the number of columns in metadata")
        lines = ["\t".join(str(e) for e in row) for row in [header, *metadata]]
    return ("\n".join(lines) + "\n").encode("utf-8")


def tensors_tsv(mat: np.ndarray) -> bytes:
    """The points, one tab-separated line each (Python's repr of each value)."""
    return "".join("\t".join(str(v.item()) for v in row) + "\n" for row in mat).encode()


def sprite_png(label_img: np.ndarray) -> bytes:
    """N square NCHW thumbnails (values in [0, 1], or uint8) tiled ceil(sqrt(N)) per row on a
    square RGB canvas."""
    from ember.utils.tensorboard._summary import _make_grid

    per_row = math.ceil(label_img.shape[0] ** 0.5)
    grid = _make_grid(label_img, ncols=per_row).transpose(1, 2, 0)
    side = grid.shape[1]
    canvas = np.zeros((side, side, grid.shape[2]), dtype=np.float64)
    canvas[:grid.shape[0]] = grid
    if label_img.dtype != np.uint8:
        canvas = canvas * 255
    return encode_png(canvas.clip(0, 255).astype(np.uint8))


def write_file(directory: str, name: str, data: bytes) -> None:
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)
