"""A minimal PNG encoder (8-bit grayscale, RGB or RGBA), for image summaries.

A PNG file is the 8-byte signature and chunks, each its data length (u32 big-endian), a 4-letter
type, the data and the CRC-32 of type and data: IHDR (width, height, bit depth 8, color type,
compression 0, filter method 0, interlace 0), one IDAT holding the zlib stream of the scanlines
(each preceded by its filter type byte, 0: none) and an empty IEND.

>>> import numpy as np
>>> from ember.utils.tensorboard._png import encode_png
>>> png = encode_png(np.zeros((2, 3, 3), dtype=np.uint8))
>>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n", png[12:16]
(True, b'IHDR')
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> PNG color type (gray, gray+alpha, RGB, RGBA)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def encode_png(pixels: np.ndarray, compress_level: int = 6) -> bytes:
    """PNG bytes of a uint8 image, HxW (grayscale) or HxWxC with C in 1-4."""
    if pixels.dtype != np.uint8:
        raise TypeError(f"encode_png expects uint8 pixels, got {pixels.dtype}")
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if pixels.ndim != 3 or pixels.shape[2] not in _COLOR_TYPES:
        raise ValueError(f"encode_png expects an HxW or HxWxC image (C in 1-4), got shape "
                         f"{tuple(pixels.shape)}")
    height, width, channels = pixels.shape
    if height == 0 or width == 0:
        raise ValueError("encode_png: an image needs at least one pixel")
    ihdr = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPES[channels], 0, 0, 0)
    scanlines = np.zeros((height, 1 + width * channels), dtype=np.uint8)  # column 0: filter 0
    scanlines[:, 1:] = pixels.reshape(height, width * channels)
    idat = zlib.compress(scanlines.tobytes(), compress_level)
    return SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
