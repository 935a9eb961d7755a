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

import functools
import struct
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np


def _make_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):  # one bit at a time, least significant first (a reflected CRC)
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


def _update(register: int, data: bytes) -> int:
    """The CRC register after ``data`` (no initial or final xor): one table lookup per byte."""
    table = _TABLE
    for byte in data:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register


# Long inputs (images) run as many lanes at once in NumPy. The register update is linear over
# GF(2): after n bytes, register(data, r) = Z^n r ^ register(data, 0), with Z the update by one
# zero byte. So each lane of _LANE bytes starts from 0, and the lanes are chained with Z^_LANE.
_LANE = 512
_LANES_FROM = 32 * 1024  # shorter inputs take the plain loop


@functools.lru_cache(maxsize=1)
def _lane_tables() -> tuple[np.ndarray, tuple[tuple[int, ...], ...]]:
    """The table as a NumPy array, and Z^_LANE as four byte-indexed tables (one per byte of the
    register: the xor of the images of the bits set in that byte)."""
    table = np.array(_TABLE, dtype=np.uint32)
    columns = np.array([1 << bit for bit in range(32)], dtype=np.uint32)
    for _ in range(_LANE):  # the images of the 32 basis registers after _LANE zero bytes
        columns = table[columns & 0xFF] ^ (columns >> 8)
    images = [int(c) for c in columns]
    per_byte = []
    for k in range(4):
        entries = []
        for value in range(256):
            out = 0
            for bit in range(8):
                if value >> bit & 1:
                    out ^= images[8 * k + bit]
            entries.append(out)
        per_byte.append(tuple(entries))
    return table, tuple(per_byte)


def _update_lanes(register: int, data: bytes) -> int:
    table, (z0, z1, z2, z3) = _lane_tables()
    count = len(data) // _LANE
    rows = np.frombuffer(data, dtype=np.uint8, count=count * _LANE).reshape(count, _LANE)
    lanes = np.zeros(count, dtype=np.uint32)
    for column in np.ascontiguousarray(rows.T):  # byte i of every lane at once
        lanes = table[(lanes ^ column) & 0xFF] ^ (lanes >> 8)
    for lane in lanes.tolist():
        register = (z0[register & 0xFF] ^ z1[register >> 8 & 0xFF] ^ z2[register >> 16 & 0xFF]
                    ^ z3[register >> 24]) ^ lane
    return _update(register, data[count * _LANE:])


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``; pass a previous result as ``crc`` to continue it."""
    update = _update_lanes if len(data) >= _LANES_FROM else _update
    return update(crc ^ 0xFFFFFFFF, data) ^ 0xFFFFFFFF


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
