"""TFRecord framing, the container format of TensorBoard event files.

Each record is the payload's length as a little-endian u64, the masked CRC-32C of those 8 bytes
(u32 LE), the payload, and the masked CRC-32C of the payload (u32 LE). CRC-32C is the CRC with
the Castagnoli polynomial (reflected: 0x82F63B78; initial value and final xor 0xFFFFFFFF); the
mask rotates the CRC right by 15 bits and adds 0xA282EAD8 (mod 2**32), so that a CRC computed
over data that itself holds CRCs stays well distributed.

>>> from ember.utils.tensorboard._record import crc32c, encode_record, read_records
>>> hex(crc32c(b"123456789"))  # the standard CRC-32C check value
'0xe3069283'
>>> import io
>>> blob = encode_record(b"hello") + encode_record(b"")
>>> len(blob)
37
>>> list(read_records(io.BytesIO(blob)))
[b'hello', b'']
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO


def _make_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):  # one bit at a time, least significant first (a reflected CRC)
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``; pass a previous result as ``crc`` to continue it."""
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for byte in data:  # table-driven: one lookup per byte
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C TFRecord stores: ``rotr(crc, 15) + 0xA282EAD8`` mod 2**32."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def encode_record(payload: bytes) -> bytes:
    """One TFRecord holding ``payload``."""
    header = struct.pack("<Q", len(payload))
    return (header + struct.pack("<I", masked_crc32c(header)) + payload
            + struct.pack("<I", masked_crc32c(payload)))


def read_records(stream: BinaryIO) -> Iterator[bytes]:
    """The payloads of the records in ``stream``, each CRC checked (ValueError on a mismatch or
    a truncated record)."""
    offset = 0
    while True:
        head = stream.read(12)
        if not head:
            return
        if len(head) < 12:
            raise ValueError(f"truncated record header at offset {offset}")
        (length,), (length_crc,) = struct.unpack("<Q", head[:8]), struct.unpack("<I", head[8:])
        if masked_crc32c(head[:8]) != length_crc:
            raise ValueError(f"CRC mismatch in the length of the record at offset {offset}")
        body = stream.read(length + 4)
        if len(body) < length + 4:
            raise ValueError(f"truncated record at offset {offset}")
        payload = body[:length]
        if masked_crc32c(payload) != struct.unpack("<I", body[length:])[0]:
            raise ValueError(f"CRC mismatch in the payload of the record at offset {offset}")
        yield payload
        offset += 16 + length
