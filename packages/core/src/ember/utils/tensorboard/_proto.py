"""A small protobuf wire-format encoder and a schema-driven decoder (just what event files need).

A message is the concatenation of its fields; each field is a key, the varint
``(field_number << 3) | wire_type``, followed by its value: a varint (wire type 0: integers,
bools, enums), 8 little-endian bytes (1: doubles), a varint length and that many bytes (2:
strings, bytes, embedded messages, packed repeated numbers) or 4 little-endian bytes (5: floats).
The encoders here return the bytes of one field; a message is ``b"".join`` of its fields, written
in field-number order as protobuf's own serializers do, so that the output is byte-identical.

>>> from ember.utils.tensorboard import _proto
>>> _proto.varint(300).hex()
'ac02'
>>> msg = _proto.string_field(1, "loss") + _proto.float_field(2, 0.5)
>>> msg.hex()
'0a046c6f7373150000003f'
>>> _proto.decode(msg, {1: ("tag", "string"), 2: ("simple_value", "float")})
{'tag': 'loss', 'simple_value': 0.5}
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from typing import Any, Union

VARINT, I64, LEN, I32 = 0, 1, 2, 5

_MASK64 = (1 << 64) - 1


def varint(value: int) -> bytes:
    """The base-128 varint of ``value``; a negative value is written as its 64-bit two's
    complement (ten bytes), as protobuf writes negative int32/int64 fields."""
    value &= _MASK64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    """The key that starts a field: its number and its wire type."""
    return varint((field << 3) | wire_type)


def int_field(field: int, value: int) -> bytes:
    """An int32/int64/uint64/enum/bool field (wire type 0)."""
    return key(field, VARINT) + varint(int(value))


def double_field(field: int, value: float) -> bytes:
    """A double field (wire type 1: 8 little-endian bytes)."""
    return key(field, I64) + struct.pack("<d", value)


def _float32_bytes(value: float) -> bytes:
    try:
        return struct.pack("<f", value)
    except OverflowError:  # beyond float32's range: it rounds to an infinity, as a C cast does
        return struct.pack("<f", math.copysign(math.inf, value))


def float_field(field: int, value: float) -> bytes:
    """A float field (wire type 5: 4 little-endian bytes of the float32 nearest ``value``)."""
    return key(field, I32) + _float32_bytes(value)


def bytes_field(field: int, data: bytes) -> bytes:
    """A length-delimited field: bytes, or an embedded message already encoded."""
    return key(field, LEN) + varint(len(data)) + data


def string_field(field: int, text: str) -> bytes:
    """A string field (UTF-8, length-delimited)."""
    return bytes_field(field, text.encode("utf-8"))


def packed_doubles(field: int, values: Iterable[float]) -> bytes:
    """A packed repeated double field (proto3's default for repeated numbers)."""
    return bytes_field(field, b"".join(struct.pack("<d", v) for v in values))


def packed_floats(field: int, values: Iterable[float]) -> bytes:
    """A packed repeated float field."""
    return bytes_field(field, b"".join(_float32_bytes(v) for v in values))


def packed_varints(field: int, values: Iterable[int]) -> bytes:
    """A packed repeated integer/bool/enum field."""
    return bytes_field(field, b"".join(varint(int(v)) for v in values))


def is_default(value: Union[int, float, str, bytes]) -> bool:
    """Whether proto3 leaves a field without explicit presence out: 0, +0.0, "" or b"" (-0.0
    has its sign bit set, so it is written)."""
    if isinstance(value, float):
        return value == 0.0 and math.copysign(1.0, value) > 0
    return not value


# --------------------------------------------------------------------------------------------
# Decoding (the inverse, for reading event files back).

# A schema maps a field number to (name, kind) or (name, kind, "repeated"); kind is one of
# "double", "float", "int64", "int32", "uint64", "bool", "string", "bytes", or a nested schema.
Schema = dict


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than ten bytes")


def fields(data: bytes) -> list[tuple[int, int, Union[int, bytes]]]:
    """The raw fields of a message: (number, wire type, value); the value is an int for a varint
    and the raw bytes otherwise (8 or 4 bytes for fixed-width fields, the payload for LEN)."""
    out: list[tuple[int, int, Union[int, bytes]]] = []
    pos = 0
    while pos < len(data):
        k, pos = _read_varint(data, pos)
        number, wire = k >> 3, k & 7
        value: Union[int, bytes]
        if wire == VARINT:
            value, pos = _read_varint(data, pos)
        elif wire in (I64, I32):
            width = 8 if wire == I64 else 4
            value, pos = data[pos:pos + width], pos + width
        elif wire == LEN:
            length, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        else:
            raise ValueError(f"unsupported wire type {wire} (field {number})")
        if pos > len(data):
            raise ValueError(f"truncated field {number}")
        out.append((number, wire, value))
    return out


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


_FIXED = {"double": ("<d", 8), "float": ("<f", 4)}


def _scalars(kind: str, wire: int, value: Union[int, bytes]) -> list[Any]:
    """The values one field occurrence holds (several when a repeated number is packed)."""
    if kind in _FIXED:
        fmt, width = _FIXED[kind]
        assert isinstance(value, bytes)
        return [v for (v,) in struct.iter_unpack(fmt, value)] if len(value) % width == 0 else []
    if kind in ("int64", "int32", "uint64", "bool"):
        if wire == LEN:  # packed varints
            assert isinstance(value, bytes)
            ints, pos = [], 0
            while pos < len(value):
                v, pos = _read_varint(value, pos)
                ints.append(v)
        else:
            assert isinstance(value, int)
            ints = [value]
        if kind == "bool":
            return [bool(v) for v in ints]
        return [v if kind == "uint64" else _signed(v, 64) for v in ints]
    assert isinstance(value, bytes)
    return [value.decode("utf-8") if kind == "string" else value]


def decode(data: bytes, schema: Schema) -> dict[str, Any]:
    """Decodes a message by ``schema``; fields the schema does not name are skipped, fields
    absent from the data are absent from the dict (proto3 defaults are not filled in)."""
    out: dict[str, Any] = {}
    for number, wire, value in fields(data):
        if number not in schema:
            continue
        name, kind, *repeated = schema[number]
        if isinstance(kind, dict):
            assert isinstance(value, bytes)
            items = [decode(value, kind)]
        else:
            items = _scalars(kind, wire, value)
        if repeated:
            out.setdefault(name, []).extend(items)
        elif items:
            out[name] = items[-1]  # the last occurrence wins, as in protobuf
    return out
