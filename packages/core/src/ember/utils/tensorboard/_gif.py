"""A minimal animated-GIF encoder (GIF89a), for video summaries.

Frames are mapped to a fixed 256-colour palette (3 bits of red, 3 of green, 2 of blue: no
dithering, no per-video quantization) and LZW-compressed: codes start at 9 bits after a clear
code (256; 257 ends the data), grow by one bit when the next free code no longer fits, up to 12
bits; a full table (4096 codes) is cleared. Codes are packed least significant bit first, in
sub-blocks of at most 255 bytes. A NETSCAPE2.0 extension makes the animation loop.

>>> import numpy as np
>>> from ember.utils.tensorboard._gif import encode_gif
>>> gif = encode_gif(np.zeros((2, 4, 4, 3), dtype=np.uint8), fps=4)
>>> gif[:6], gif[-1:]
(b'GIF89a', b';')
"""

from __future__ import annotations

import struct

import numpy as np


def palette() -> bytes:
    """The 256 RGB entries: index = r << 5 | g << 2 | b (3, 3 and 2 bits), spread over 0-255."""
    index = np.arange(256)
    red = (index >> 5) * 255 // 7
    green = ((index >> 2) & 7) * 255 // 7
    blue = (index & 3) * 255 // 3
    return np.stack([red, green, blue], axis=1).astype(np.uint8).tobytes()


def to_indices(rgb: np.ndarray) -> np.ndarray:
    """HxWx3 uint8 pixels as palette indices (each channel rounded to its nearest level)."""
    levels = rgb.astype(np.uint32)
    red = (levels[..., 0] * 7 + 127) // 255
    green = (levels[..., 1] * 7 + 127) // 255
    blue = (levels[..., 2] * 3 + 127) // 255
    return (red << 5 | green << 2 | blue).astype(np.uint8)


def lzw(indices: bytes) -> bytes:
    """GIF's LZW stream of 8-bit ``indices`` (minimum code size 8), packed LSB first."""
    clear, end = 256, 257
    out = bytearray()
    bits = nbits = 0

    def emit(code: int, size: int) -> None:
        nonlocal bits, nbits
        bits |= code << nbits
        nbits += size
        while nbits >= 8:
            out.append(bits & 0xFF)
            bits >>= 8
            nbits -= 8

    table: dict[int, int] = {}  # (prefix code << 8 | next index) -> code of that string
    next_code, size = 258, 9
    emit(clear, size)
    prefix = -1  # the code of the string matched so far (-1: none yet)
    for value in indices:
        if prefix < 0:
            prefix = value
            continue
        code = table.get(prefix << 8 | value)
        if code is not None:
            prefix = code
            continue
        emit(prefix, size)
        if next_code == 4096:  # the table is full: start again
            emit(clear, size)
            table.clear()
            next_code, size = 258, 9
        else:
            table[prefix << 8 | value] = next_code
            next_code += 1
            if next_code > 1 << size:  # the decoder widens once its next code needs a bit more
                size += 1
        prefix = value
    if prefix >= 0:
        emit(prefix, size)
    emit(end, size)
    if nbits:
        out.append(bits & 0xFF)
    return bytes(out)


def _sub_blocks(data: bytes) -> bytes:
    chunks = [data[i:i + 255] for i in range(0, len(data), 255)]
    return b"".join(bytes((len(c),)) + c for c in chunks) + b"\x00"


def encode_gif(frames: np.ndarray, fps: float = 4) -> bytes:
    """An animated GIF of T x H x W x 3 uint8 frames shown at ``fps`` frames a second,
    looping."""
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[3] != 3:
        raise ValueError(f"encode_gif expects T x H x W x 3 uint8 frames, got {frames.dtype} "
                         f"{tuple(frames.shape)}")
    _, height, width, _ = frames.shape
    delay = max(int(round(100 / fps)), 1)  # hundredths of a second
    out = [b"GIF89a", struct.pack("<HHBBB", width, height, 0xF7, 0, 0), palette(),
           b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"]  # loop forever
    for frame in frames:
        out.append(b"\x21\xf9\x04\x00" + struct.pack("<H", delay) + b"\x00\x00")
        out.append(b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0))
        out.append(b"\x08" + _sub_blocks(lzw(to_indices(frame).tobytes())))
    out.append(b"\x3b")
    return b"".join(out)
