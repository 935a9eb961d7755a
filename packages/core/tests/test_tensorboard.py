"""ember.utils.tensorboard: SummaryWriter writes TensorBoard event files by itself.

The files are read back here three ways: by hand (an independent bitwise CRC-32C, the record
framing and a few protobuf fields parsed from the bytes), with the package's ``_read_events``
(every record's CRCs checked, the Event messages decoded), and, when the ``tensorboard``
package happens to be installed, with TensorBoard's own EventAccumulator and against the
records PyTorch's SummaryWriter writes for the same calls (those tests skip otherwise).
"""

from __future__ import annotations

import io
import os
import re
import socket
import struct
import subprocess
import sys
import wave
import zlib

import ember
import numpy as np
import pytest
from ember.utils.tensorboard import SummaryWriter, _proto
from ember.utils.tensorboard._reader import _read_events
from ember.utils.tensorboard._record import crc32c, encode_record, masked_crc32c, read_records

T = 1234.5  # a fixed walltime


# ---------------------------------------------------------------------------------------------
# Independent readers (written from the format descriptions, not with the package's code)

def _crc32c_bitwise(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _split_records(blob: bytes) -> list[bytes]:
    """The payloads of a TFRecord file, every CRC checked with the bitwise CRC."""
    out, pos = [], 0
    while pos < len(blob):
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", blob[pos + 8:pos + 12])[0] == _mask(_crc32c_bitwise(header))
        payload = blob[pos + 12:pos + 12 + length]
        crc = blob[pos + 12 + length:pos + 16 + length]
        assert struct.unpack("<I", crc)[0] == _mask(_crc32c_bitwise(payload))
        out.append(payload)
        pos += 16 + length
    assert pos == len(blob)
    return out


def _decode_png(png: bytes) -> np.ndarray:
    """The pixels of an 8-bit, non-interlaced PNG whose scanlines use filter type 0 (none, as
    the writer's do), every chunk CRC checked."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + data)
        chunks.append((kind, data))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert depth == 8 and interlace == 0
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    raw = zlib.decompress(b"".join(d for k, d in chunks if k == b"IDAT"))
    stride = width * channels
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, stride + 1)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(height, width, channels)


def _decode_gif(gif: bytes) -> tuple[np.ndarray, list[np.ndarray], list[int]]:
    """(global palette, frames of palette indices, frame delays) of a GIF89a whose frames fill
    the screen, LZW-decoded here."""
    assert gif[:6] == b"GIF89a" and gif[-1:] == b";"
    width, height, packed = struct.unpack("<HHB", gif[6:11])
    assert packed & 0x80  # a global colour table
    entries = 2 << (packed & 7)
    pal = np.frombuffer(gif[13:13 + 3 * entries], dtype=np.uint8).reshape(entries, 3)
    pos, frames, delays = 13 + 3 * entries, [], []

    def blocks(pos):  # the data of the sub-blocks starting at pos, and the position after them
        data = bytearray()
        while gif[pos]:
            data += gif[pos + 1:pos + 1 + gif[pos]]
            pos += 1 + gif[pos]
        return bytes(data), pos + 1

    while gif[pos] != 0x3B:
        if gif[pos] == 0x21:  # an extension
            label = gif[pos + 1]
            data, pos = blocks(pos + 2)
            if label == 0xF9:
                delays.append(struct.unpack("<H", data[1:3])[0])
            continue
        assert gif[pos] == 0x2C
        assert struct.unpack("<HHHHB", gif[pos + 1:pos + 10]) == (0, 0, width, height, 0)
        min_size = gif[pos + 10]
        data, pos = blocks(pos + 11)
        stream = int.from_bytes(data, "little")
        clear = 1 << min_size
        out, at, table, size, previous = bytearray(), 0, [], min_size + 1, None
        while True:
            code = (stream >> at) & ((1 << size) - 1)
            at += size
            if code == clear:
                table = [bytes((i,)) for i in range(clear)] + [b"", b""]
                size, previous = min_size + 1, None
                continue
            if code == clear + 1:
                break
            if previous is None:
                entry = table[code]
            else:
                entry = table[code] if code < len(table) else previous + previous[:1]
                table.append(previous + entry[:1])
                if len(table) == 1 << size and size < 12:
                    size += 1
            out += entry
            previous = entry
        frames.append(np.frombuffer(bytes(out), dtype=np.uint8).reshape(height, width))
    return pal, frames, delays


def _event_file(log_dir) -> str:
    names = [n for n in os.listdir(log_dir) if n.startswith("events.out.tfevents.")]
    assert len(names) == 1, names
    return os.path.join(log_dir, names[0])


def _values(log_dir) -> list[tuple[int, dict]]:
    """(step, Summary.Value) of every summary event in log_dir."""
    return [(e.get("step", 0), v) for e in _read_events(log_dir) if "summary" in e
            for v in e["summary"]["value"]]


# ---------------------------------------------------------------------------------------------
# Formats

def test_crc32c_check_values():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    # RFC 3720 (iSCSI), appendix B.4
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    data = np.random.default_rng(0).integers(0, 256, 1000, dtype=np.uint8).tobytes()
    assert crc32c(data) == _crc32c_bitwise(data)
    assert crc32c(data[500:], crc32c(data[:500])) == crc32c(data)  # continued
    assert masked_crc32c(data) == _mask(_crc32c_bitwise(data))
    # From 32 KiB on, 512-byte lanes run side by side in NumPy and are chained (a whole number
    # of lanes, and a tail; continued from a previous CRC too).
    big = np.random.default_rng(1).integers(0, 256, 70_001, dtype=np.uint8).tobytes()
    for n in (32 * 1024 - 1, 32 * 1024, 65_536, 70_001):
        assert crc32c(big[:n]) == _crc32c_bitwise(big[:n]), n
    assert crc32c(big[40_000:], crc32c(big[:40_000])) == _crc32c_bitwise(big)


def test_record_framing_and_corruption():
    blob = encode_record(b"abc") + encode_record(b"") + encode_record(bytes(300))
    assert blob[:8] == struct.pack("<Q", 3) and blob[12:15] == b"abc"
    assert _split_records(blob) == [b"abc", b"", bytes(300)]
    assert list(read_records(io.BytesIO(blob))) == [b"abc", b"", bytes(300)]
    for pos, message in [(13, "payload"), (2, "length")]:
        bad = bytearray(blob)
        bad[pos] ^= 1
        with pytest.raises(ValueError, match=message):
            list(read_records(io.BytesIO(bytes(bad))))
    with pytest.raises(ValueError, match="truncated"):
        list(read_records(io.BytesIO(blob[:-1])))


def test_protobuf_wire_format():
    assert _proto.varint(0) == b"\x00"
    assert _proto.varint(1) == b"\x01"
    assert _proto.varint(300) == b"\xac\x02"
    assert _proto.varint(-1) == b"\xff" * 9 + b"\x01"  # 64-bit two's complement
    assert _proto.int_field(2, 150) == b"\x10\x96\x01"
    assert _proto.double_field(1, 1.0) == b"\x09" + struct.pack("<d", 1.0)
    assert _proto.float_field(2, 0.5) == b"\x15" + struct.pack("<f", 0.5)
    assert _proto.float_field(2, 1e300) == b"\x15" + struct.pack("<f", float("inf"))
    assert _proto.string_field(1, "é") == b"\x0a\x02\xc3\xa9"
    assert _proto.packed_doubles(6, [1.0, 2.0]) == b"\x32\x10" + struct.pack("<2d", 1.0, 2.0)
    assert _proto.is_default(0.0) and not _proto.is_default(-0.0) and _proto.is_default(0)
    schema = {2: ("step", "int64"), 6: ("limits", "double", "repeated"),
              9: ("sub", {1: ("name", "string")})}
    msg = (_proto.int_field(2, -5) + _proto.packed_doubles(6, [1.5, -2.0])
           + _proto.double_field(6, 3.0) + _proto.bytes_field(9, _proto.string_field(1, "x"))
           + _proto.string_field(15, "unknown field, skipped"))
    assert _proto.decode(msg, schema) == {"step": -5, "limits": [1.5, -2.0, 3.0],
                                          "sub": {"name": "x"}}


# ---------------------------------------------------------------------------------------------
# SummaryWriter

def test_file_name_and_first_record(tmp_path):
    with SummaryWriter(tmp_path, filename_suffix=".v1") as w:
        assert w.get_logdir() == tmp_path
        w.add_scalar("loss", 0.25, 7, walltime=T)
    path = _event_file(tmp_path)
    name = os.path.basename(path)
    m = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)\.v1", name)
    assert m and m.group(2) == socket.gethostname() and int(m.group(3)) == os.getpid()
    with open(path, "rb") as f:
        first, second = _split_records(f.read())
    # Event{wall_time (1, double), file_version (3) "brain.Event:2"}
    assert first[0] == 0x09 and first[9:] == b"\x1a\x0dbrain.Event:2"
    # Event{wall_time, step (2) 7, summary (5) {value (1) {tag "loss", simple_value 0.25}}}
    value = b"\x0a\x04loss\x15" + struct.pack("<f", 0.25)
    summary = b"\x0a" + bytes([len(value)]) + value
    assert second == (b"\x09" + struct.pack("<d", T) + b"\x10\x07"
                      + b"\x2a" + bytes([len(summary)]) + summary)


def test_default_log_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_lr0.1")
    w.close()
    (run,) = os.listdir(tmp_path / "runs")
    host = re.escape(socket.gethostname())
    assert re.fullmatch(r"[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_" + host + r"_lr0\.1", run)
    assert w.get_logdir() == os.path.join("runs", run)
    assert len(_read_events(tmp_path / "runs" / run)) == 1  # the file_version record


def test_add_scalar_accepts_numbers_arrays_and_tensors(tmp_path):
    inputs = [1, 2.5, np.float32(0.125), np.float64(-3.0), np.array(4.0), np.array([5.0]),
              ember.tensor(6.5), ember.tensor([7.25]), ember.tensor([[8.0]], requires_grad=True),
              ember.tensor(9.0, dtype=ember.bfloat16), ember.tensor(10, dtype=ember.int64),
              True]
    with SummaryWriter(tmp_path) as w:
        for step, value in enumerate(inputs):
            w.add_scalar("v", value, step)
        w.add_scalar("v", 11.0)  # no step: step 0, left out of the record
    got = _values(tmp_path)
    assert [s for s, _ in got] == list(range(len(inputs))) + [0]
    assert [v["simple_value"] for _, v in got] == [1, 2.5, 0.125, -3, 4, 5, 6.5, 7.25, 8, 9, 10,
                                                  1, 11]
    with SummaryWriter(tmp_path / "x") as w, pytest.raises(AssertionError, match="should be 0D"):
        w.add_scalar("v", ember.ones(2))


def test_add_scalar_new_style_and_double_precision(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("f", 0.1, 1, walltime=T, new_style=True)
        w.add_scalar("d", 0.1, 2, walltime=T, new_style=True, double_precision=True)
    (_, f), (_, d) = _values(tmp_path)
    assert f["metadata"]["plugin_data"]["plugin_name"] == "scalars"
    assert f["tensor"] == {"dtype": 1, "float_val": [float(np.float32(0.1))]}
    assert d["tensor"] == {"dtype": 2, "double_val": [0.1]}


def test_add_scalars_writes_one_run_per_key(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for step in range(3):
            w.add_scalars("loss/all", {"train": step * 1.0, "val": step * 2.0}, step)
    assert sorted(os.listdir(tmp_path))[1:] == ["loss_all_train", "loss_all_val"]
    for key, scale in [("train", 1.0), ("val", 2.0)]:
        got = _values(tmp_path / f"loss_all_{key}")
        assert got == [(s, {"tag": "loss/all", "simple_value": s * scale}) for s in range(3)]
    assert _values(tmp_path) == []  # the main file holds only its file_version record


def test_histogram_buckets(tmp_path):
    rng = np.random.default_rng(1)
    values = rng.standard_normal((20, 50)) * 2
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("default", ember.tensor(values, dtype=ember.float64), 3)
        w.add_histogram("edges", np.array([0.5, 0.5, 2.5, 0.0]), 4, bins=[0, 1, 2, 3, 4, 5])
        w.add_histogram("merged", np.arange(10.0), 5, bins=list(range(11)), max_bins=3)
        w.add_histogram_raw("raw", -1, 2, 3, 1.5, 5.0, [0, 1, 2], [1, 0, 2], 6)
        with pytest.raises(ValueError, match="empty"):
            w.add_histogram("none", np.zeros(0), 7)
    (_, h), (_, e), (_, m), (_, r) = _values(tmp_path)
    flat = values.reshape(-1)
    histo = h["histo"]
    assert histo["min"] == flat.min() and histo["max"] == flat.max() and histo["num"] == 1000
    assert histo["sum"] == pytest.approx(flat.sum()) and histo["sum_squares"] == pytest.approx(
        (flat ** 2).sum())
    limits, counts = np.array(histo["bucket_limit"]), np.array(histo["bucket"])
    assert counts[0] == 0 and counts[1] > 0 and counts[-1] > 0 and counts.sum() == 1000
    # Bucket i holds the values in [limit[i-1], limit[i]) (NumPy's half-open bins); the edges
    # are TensorFlow's: 1e-12 * 1.1**k on both sides of 0.
    inside = [((flat >= lo) & (flat < hi)).sum() for lo, hi in zip(limits[:-1], limits[1:])]
    assert inside == counts[1:].tolist()
    assert np.allclose(np.log(np.abs(limits[limits != 0]) / 1e-12) / np.log(1.1),
                       np.round(np.log(np.abs(limits[limits != 0]) / 1e-12) / np.log(1.1)))
    # Leading and trailing empty buckets dropped, an empty bucket kept on the left.
    assert e["histo"]["bucket_limit"] == [0.0, 1.0, 2.0, 3.0]
    assert e["histo"]["bucket"] == [0.0, 3.0, 0.0, 1.0]
    assert "min" not in e["histo"] and e["histo"]["max"] == 2.5  # proto3 leaves 0.0 out
    # Ten unit bins merged by threes: [0,3) [3,6) [6,9) [9,10].
    assert m["histo"]["bucket_limit"] == [0.0, 3.0, 6.0, 9.0, 10.0]
    assert m["histo"]["bucket"] == [0.0, 3.0, 3.0, 3.0, 1.0]
    assert r["histo"] == {"min": -1, "max": 2, "num": 3, "sum": 1.5, "sum_squares": 5,
                          "bucket_limit": [0, 1, 2], "bucket": [1, 0, 2]}


def test_images_are_png_with_the_expected_pixels(tmp_path):
    rng = np.random.default_rng(2)
    chw = rng.random((3, 5, 7)).astype(np.float32)
    hwc_u8 = rng.integers(0, 256, (4, 6, 4), dtype=np.uint8)
    gray = rng.random((3, 2))
    batch = rng.random((10, 1, 2, 3)).astype(np.float32)
    with SummaryWriter(tmp_path) as w:
        w.add_image("chw", ember.tensor(chw), 1)
        w.add_image("rgba", hwc_u8, 2, dataformats="HWC")
        w.add_image("gray", gray, 3, dataformats="HW")
        w.add_images("batch", ember.tensor(batch), 4)
        with pytest.raises(AssertionError, match="does not match"):
            w.add_image("bad", chw, 5, dataformats="HW")
    got = {v["tag"]: v["image"] for _, v in _values(tmp_path)}

    def check(tag, expected):
        image = got[tag]
        pixels = _decode_png(image["encoded_image_string"])
        assert (image["height"], image["width"], image["colorspace"]) == pixels.shape
        np.testing.assert_array_equal(pixels, expected)

    # floats are [0, 1] scaled by 255 and truncated; uint8 stays as it is
    check("chw", (chw.transpose(1, 2, 0) * np.float32(255)).astype(np.uint8))
    check("rgba", hwc_u8)
    check("gray", np.repeat((gray.astype(np.float32) * np.float32(255)).astype(np.uint8)
                            [:, :, None], 3, axis=2))
    # Ten 2x3 images tiled eight per row: a 2-row grid 4 high, 24 wide; the last six tiles empty.
    tiles = (batch[:, 0] * np.float32(255)).astype(np.uint8)
    grid = np.zeros((4, 24), dtype=np.uint8)
    for i, tile in enumerate(tiles):
        y, x = divmod(i, 8)
        grid[2 * y:2 * y + 2, 3 * x:3 * x + 3] = tile
    check("batch", np.repeat(grid[:, :, None], 3, axis=2))


def test_add_image_with_boxes(tmp_path):
    image = np.zeros((3, 10, 12), dtype=np.float32)
    image[1] = 0.5
    boxes = ember.tensor([[2.0, 3.0, 8.0, 7.0]])
    with SummaryWriter(tmp_path) as w:
        w.add_image_with_boxes("boxed", image, boxes, 1)
        w.add_image_with_boxes("big", ember.tensor(image), boxes, 2, rescale=2)
        with pytest.warns(UserWarning, match="without their labels"):
            w.add_image_with_boxes("labelled", image, boxes, 3, labels=["cat"])
    got = {v["tag"]: v["image"] for _, v in _values(tmp_path)}
    pixels = _decode_png(got["boxed"]["encoded_image_string"])
    red = (pixels == [255, 0, 0]).all(axis=2)
    # Two pixels wide: the top and bottom edges grow outwards, the sides inwards (where PIL's
    # polyline, which PyTorch draws with, puts them for this box).
    expected = np.zeros((10, 12), dtype=bool)
    expected[2:4, 2:9] = expected[7:9, 2:9] = True  # rows 2-3 and 7-8
    expected[2:9, 2:4] = expected[2:9, 7:9] = True  # columns 2-3 and 7-8
    np.testing.assert_array_equal(red, expected)
    untouched = ~red
    assert (pixels[untouched] == [0, 127, 0]).all()  # 0.5 * 255 truncated
    big = _decode_png(got["big"]["encoded_image_string"])
    assert (got["big"]["height"], got["big"]["width"]) == (20, 24)
    np.testing.assert_array_equal(big, pixels.repeat(2, axis=0).repeat(2, axis=1))
    np.testing.assert_array_equal(_decode_png(got["labelled"]["encoded_image_string"]), pixels)
    # With PyTorch, tensorboard and PIL installed: the same pixels as PyTorch's PIL drawing,
    # for boxes given backwards, with fractional corners or beyond the image too.
    try:
        import tensorboard  # noqa: F401
        from PIL import Image
        from torch.utils.tensorboard import SummaryWriter as TorchWriter
    except ImportError:
        return
    picture = np.random.default_rng(7).random((3, 40, 50)).astype(np.float32)
    many = np.array([[2, 3, 8, 7], [10, 30, 45, 12], [5.4, 6.6, 20.5, 25.2], [-3, -3, 60, 60]])
    for writer_class, name in [(TorchWriter, "torch"), (SummaryWriter, "ember")]:
        with writer_class(str(tmp_path / name)) as w:
            w.add_image_with_boxes("many", picture, many, 0)
    drawn = [Image.open(io.BytesIO(_values(tmp_path / name)[0][1]["image"]
                                   ["encoded_image_string"])) for name in ("torch", "ember")]
    np.testing.assert_array_equal(np.asarray(drawn[0]), np.asarray(drawn[1]))


def test_add_video_is_an_animated_gif(tmp_path):
    rng = np.random.default_rng(8)
    videos = rng.random((3, 2, 3, 4, 5)).astype(np.float32)  # N T C H W
    noise = rng.integers(0, 256, (1, 1, 3, 90, 90), dtype=np.uint8)  # fills the LZW table
    with SummaryWriter(tmp_path) as w:
        w.add_video("clips", ember.tensor(videos), 1, fps=5)
        w.add_video("noise", noise, 2)
    got = {v["tag"]: v["image"] for _, v in _values(tmp_path)}
    # Three videos padded with a black one to four, in one row (2**floor(log2(3) / 2) rows).
    pixels = (videos * np.float32(255)).astype(np.uint8).transpose(1, 3, 0, 4, 2)  # T H N W C
    grid = np.zeros((2, 4, 4, 5, 3), dtype=np.uint8)
    grid[:, :, :3] = pixels
    expected = grid.reshape(2, 4, 20, 3)
    clips = got["clips"]
    assert (clips["height"], clips["width"], clips["colorspace"]) == (4, 20, 3)
    pal, frames, delays = _decode_gif(clips["encoded_image_string"])
    assert delays == [20, 20] and len(frames) == 2  # 1/5 s per frame

    def nearest(values, levels):  # index of the nearest of `levels` evenly spaced levels
        steps = np.arange(levels) * 255 / (levels - 1)
        return np.abs(values[..., None].astype(np.float64) - steps).argmin(axis=-1)

    for frame, want in zip(frames, expected):
        index = nearest(want[..., 0], 8) << 5 | nearest(want[..., 1], 8) << 2 | nearest(
            want[..., 2], 4)
        np.testing.assert_array_equal(frame, index)
    assert pal[0b111_100_10].tolist() == [255, 145, 170]  # levels 7/7, 4/7, 2/3 of 255
    _, (frame,), _ = _decode_gif(got["noise"]["encoded_image_string"])
    want = noise[0, 0].transpose(1, 2, 0)
    np.testing.assert_array_equal(frame, nearest(want[..., 0], 8) << 5
                                  | nearest(want[..., 1], 8) << 2 | nearest(want[..., 2], 4))


def test_text_audio_and_purge_step(tmp_path):
    snd = np.sin(np.linspace(0, 20, 200)) * 1.5  # clipped to [-1, 1]
    with SummaryWriter(tmp_path, purge_step=40) as w:
        w.add_text("notes", "**bold** é", 41)
        w.add_audio("tone", ember.tensor(snd), 42, sample_rate=8000)
    events = _read_events(tmp_path)
    assert events[1]["step"] == 40 and events[1]["file_version"] == "brain.Event:2"
    assert events[2]["step"] == 40 and events[2]["session_log"] == {"status": 1}  # START
    text, tone = events[3]["summary"]["value"][0], events[4]["summary"]["value"][0]
    assert text["tag"] == "notes/text_summary"
    assert text["metadata"] == {"plugin_data": {"plugin_name": "text"}}
    assert text["tensor"] == {"dtype": 7, "tensor_shape": {"dim": [{"size": 1}]},
                              "string_val": ["**bold** é".encode()]}
    audio = tone["audio"]
    assert (audio["sample_rate"], audio["num_channels"], audio["length_frames"],
            audio["content_type"]) == (8000.0, 1, 200, "audio/wav")
    with wave.open(io.BytesIO(audio["encoded_audio_string"])) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 8000)
        pcm = np.frombuffer(wav.readframes(200), dtype="<i2")
    np.testing.assert_array_equal(pcm, (snd.clip(-1, 1) * 32767).astype(np.int16))


def test_add_hparams(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_hparams({"lr": 0.01, "optim": "adam", "bs": 32, "skip": None},
                      {"hparam/accuracy": 0.9}, hparam_domain_discrete={"optim": ["adam", "sgd"]},
                      run_name="trial0")
        with pytest.raises(TypeError):
            w.add_hparams({"lr": 0.1}, [("acc", 1.0)])
        with pytest.raises(ValueError, match="should be one of"):
            w.add_hparams({"lr": [0.1]}, {})
    values = _values(tmp_path / "trial0")
    assert [v["tag"] for _, v in values] == [
        "_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info",
        "hparam/accuracy"]
    assert values[3][1]["simple_value"] == pytest.approx(0.9)
    contents = [v["metadata"]["plugin_data"] for _, v in values[:3]]
    assert all(c["plugin_name"] == "hparams" for c in contents)
    struct_value = {2: ("number_value", "double"), 3: ("string_value", "string"),
                    4: ("bool_value", "bool")}
    schema = {
        2: ("experiment", {
            4: ("hparam_infos", {1: ("name", "string"), 4: ("type", "int32"),
                                 5: ("domain_discrete", {1: ("values", struct_value, "repeated")})},
                "repeated"),
            5: ("metric_infos", {1: ("name", {2: ("tag", "string")})}, "repeated")}),
        3: ("session_start_info", {
            1: ("hparams", {1: ("key", "string"), 2: ("value", struct_value)}, "repeated")}),
        4: ("session_end_info", {1: ("status", "int32")})}
    experiment, start, end = (_proto.decode(c["content"], schema) for c in contents)
    assert experiment["experiment"] == {
        "hparam_infos": [{"name": "lr", "type": 3},
                         {"name": "optim", "type": 1, "domain_discrete": {
                             "values": [{"string_value": "adam"}, {"string_value": "sgd"}]}},
                         {"name": "bs", "type": 3}],
        "metric_infos": [{"name": {"tag": "hparam/accuracy"}}]}
    assert start["session_start_info"]["hparams"] == [
        {"key": "lr", "value": {"number_value": 0.01}},
        {"key": "optim", "value": {"string_value": "adam"}},
        {"key": "bs", "value": {"number_value": 32.0}}]
    assert end == {"session_end_info": {"status": 1}}  # STATUS_SUCCESS


def test_add_tensor(tmp_path):
    cases = {
        "f32": (ember.tensor([[1.5, -2.0, 3.25]]), 1, "float_val"),
        "f64": (np.array([0.1, 1e300]), 2, "double_val"),
        "i32": (ember.tensor([[-1], [7]], dtype=ember.int32), 3, "int_val"),
        "u8": (np.array([0, 255], dtype=np.uint8), 4, "int_val"),
        "i64": (ember.tensor([-(2 ** 40), 5]), 9, "int64_val"),
        "bool": (ember.tensor([True, False, True]), 10, "bool_val"),
        "c64": (ember.tensor([1 + 2j, -3j], dtype=ember.complex64), 8, "scomplex_val"),
        "f16": (ember.tensor([1.0, -0.5, 65504.0], dtype=ember.float16), 19, "half_val"),
        "bf16": (ember.tensor([1.0, -0.5, 3.0e38], dtype=ember.bfloat16), 14, "half_val"),
        "scalar": (ember.tensor(4.0), 1, "float_val"),
        "empty": (np.zeros((2, 0), dtype=np.float32), 1, None),
    }
    with SummaryWriter(tmp_path) as w:
        for tag, (value, _, _) in cases.items():
            w.add_tensor(tag, value, 1)
        with pytest.raises(ValueError, match="unsupported tensor dtype"):
            w.add_tensor("str", np.array(["a"]))
    got = {v["tag"]: v for _, v in _values(tmp_path)}
    for tag, (value, dtype, field) in cases.items():
        tensor = got[tag]["tensor"]
        assert got[tag]["metadata"] == {"plugin_data": {"plugin_name": "tensor"}}
        assert tensor["dtype"] == dtype, tag
        array = value if isinstance(value, np.ndarray) else (
            value.float() if value.dtype == ember.bfloat16 else value).numpy()
        dims = [d.get("size", 0) for d in tensor["tensor_shape"].get("dim", [])]
        assert dims == list(array.shape), tag
        if field is None:
            assert set(tensor) == {"dtype", "tensor_shape"}
            continue
        assert set(tensor) == {"dtype", "tensor_shape", field}
        stored = np.array(tensor[field])
        if tag == "f16":
            stored = stored.astype(np.uint16).view(np.float16)
        elif tag == "bf16":
            stored = (stored.astype(np.uint32) << 16).view(np.float32)
        elif tag == "c64":
            stored = stored.astype(np.float32).view(np.complex64)
        np.testing.assert_array_equal(stored, array.reshape(-1), err_msg=tag)
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        from tensorboard.util.tensor_util import make_ndarray
    except ImportError:
        return
    acc = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    acc.Reload()
    for tag in ("f32", "f64", "i32", "u8", "i64", "bool", "f16", "scalar"):
        value = cases[tag][0]
        array = value if isinstance(value, np.ndarray) else value.numpy()
        np.testing.assert_array_equal(make_ndarray(acc.Tensors(tag)[0].tensor_proto), array)


def test_pr_curve_and_custom_scalars(tmp_path):
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 2, 200)
    # predictions away from the thresholds k / 10, so that floor() and >= agree exactly
    predictions = (rng.integers(0, 100, 200) + 0.5) / 100
    weights = rng.random(200)
    with SummaryWriter(tmp_path) as w:
        w.add_pr_curve("pr", ember.tensor(labels), ember.tensor(predictions), 1,
                       num_thresholds=11, weights=weights)
        w.add_pr_curve_raw("raw", [3, 2], [1, 0], [0, 1], [0, 1], [0.75, 1.0], [1.0, 0.5], 2,
                           num_thresholds=2)
        w.add_custom_scalars({"Losses": {"both": ["Multiline", ["loss/train", "loss/val"]],
                                         "band": ["Margin", ["acc", "acc_lo", "acc_hi"]]}})
        w.add_custom_scalars_marginchart(["a", "b", "c"], title="m")
        with pytest.raises(AssertionError):
            w.add_custom_scalars_marginchart(["a", "b"])
    (_, pr), (_, raw), (_, layout), (_, margin) = _values(tmp_path)
    assert pr["metadata"]["plugin_data"] == {"plugin_name": "pr_curves",
                                             "content": _proto.int_field(2, 11)}
    assert pr["tensor"]["tensor_shape"] == {"dim": [{"size": 6}, {"size": 11}]}
    table = np.array(pr["tensor"]["float_val"]).reshape(6, 11)
    for k in range(11):  # the positive side of threshold k / 10, counted by brute force
        above = predictions >= k / 10
        tp, fp = (weights * labels)[above].sum(), (weights * (1 - labels))[above].sum()
        tn, fn = (weights * (1 - labels))[~above].sum(), (weights * labels)[~above].sum()
        expected = [tp, fp, tn, fn, tp / max(tp + fp, 1e-7), tp / max(tp + fn, 1e-7)]
        np.testing.assert_allclose(table[:, k], expected, rtol=1e-5, atol=1e-6)
    assert raw["tensor"]["float_val"] == [3, 2, 1, 0, 0, 1, 0, 1, 0.75, 1.0, 1.0, 0.5]
    config = layout["tensor"]
    assert layout["tag"] == "custom_scalars__config__" and config["dtype"] == 7
    assert layout["metadata"]["plugin_data"] == {"plugin_name": "custom_scalars"}
    chart = {1: ("title", "string"), 2: ("multiline", {1: ("tag", "string", "repeated")}),
             3: ("margin", {1: ("series", {1: ("value", "string"), 2: ("lower", "string"),
                                           3: ("upper", "string")}, "repeated")})}
    schema = {2: ("category", {1: ("title", "string"), 2: ("chart", chart, "repeated")},
                  "repeated")}
    assert _proto.decode(config["string_val"][0], schema) == {"category": [{
        "title": "Losses",
        "chart": [{"title": "both", "multiline": {"tag": ["loss/train", "loss/val"]}},
                  {"title": "band", "margin": {"series": [
                      {"value": "acc", "lower": "acc_lo", "upper": "acc_hi"}]}}]}]}
    assert _proto.decode(margin["tensor"]["string_val"][0], schema)["category"][0]["title"] == \
        "default"


def _log_embeddings(writer_class, log_dir, to_tensor, mat, images):
    w = writer_class(str(log_dir))
    w.add_embedding(to_tensor(mat), metadata=[f"c{i % 3}" for i in range(10)],
                    label_img=to_tensor(images), global_step=3, tag="feat/x")
    w.add_embedding(to_tensor(mat[:, :2]), metadata=[[i, f"n{i}"] for i in range(10)],
                    metadata_header=["i", "name"])
    w.close()


def test_add_embedding(tmp_path):
    rng = np.random.default_rng(6)
    mat = rng.standard_normal((10, 4)).astype(np.float32)
    images = rng.random((10, 1, 5, 5)).astype(np.float32)
    _log_embeddings(SummaryWriter, tmp_path / "ember", ember.tensor, mat, images)
    root = tmp_path / "ember"
    first, second = root / "00003" / "feat%2fx", root / "00000" / "default"
    rows = [line.split("\t") for line in (first / "tensors.tsv").read_text().splitlines()]
    np.testing.assert_array_equal(np.array(rows, dtype=np.float64), mat)  # exact reprs
    assert (first / "metadata.tsv").read_text() == "".join(f"c{i % 3}\n" for i in range(10))
    assert (second / "metadata.tsv").read_text().splitlines()[:2] == ["i\tname", "0\tn0"]
    # Ten 5x5 thumbnails, four per row (ceil(sqrt(10))), on a square 20x20 RGB canvas.
    sprite = _decode_png((first / "sprite.png").read_bytes())
    assert sprite.shape == (20, 20, 3) and not sprite[15:].any()
    for i in range(10):
        y, x = divmod(i, 4)
        tile = (images[i, 0].astype(np.float64) * 255).astype(np.uint8)
        np.testing.assert_array_equal(sprite[5 * y:5 * y + 5, 5 * x:5 * x + 5, 1], tile)
    config = (root / "projector_config.pbtxt").read_text()
    assert config.count("embeddings {") == 2
    assert 'tensor_name: "feat/x:00003"' in config and "single_image_dim: 5" in config
    assert 'tensor_path: "00000/default/tensors.tsv"' in config
    try:
        import tensorboard  # noqa: F401
        import torch
        from torch.utils.tensorboard import SummaryWriter as TorchWriter
    except ImportError:
        return
    _log_embeddings(TorchWriter, tmp_path / "torch", torch.tensor, mat, images)
    for path in [("projector_config.pbtxt",), ("00003", "feat%2fx", "tensors.tsv"),
                 ("00003", "feat%2fx", "metadata.tsv"), ("00000", "default", "metadata.tsv")]:
        assert (tmp_path.joinpath("ember", *path).read_bytes()
                == tmp_path.joinpath("torch", *path).read_bytes()), path


def test_queue_flush_close_and_reopen(tmp_path):
    w = SummaryWriter(tmp_path, max_queue=3, flush_secs=10_000)
    path = _event_file(tmp_path)
    w.add_scalar("a", 1.0, 1)
    w.add_scalar("a", 2.0, 2)
    assert len(_read_events(path)) == 1  # queued in memory: the file holds the first record
    w.add_scalar("a", 3.0, 3)  # the third queued event writes the queue out
    assert len(_read_events(path)) == 4
    w.add_scalar("a", 4.0, 4)
    w.flush()
    assert [e["step"] for e in _read_events(path)[1:]] == [1, 2, 3, 4]
    w.close()
    w.close()  # closing twice is harmless
    w.add_scalar("a", 5.0, 5)  # after close, a new event file (as PyTorch does)
    w.close()
    assert len(os.listdir(tmp_path)) == 2
    assert [s for s, _ in _values(tmp_path)] == [1, 2, 3, 4, 5]


def test_flush_secs_zero_writes_every_event(tmp_path):
    w = SummaryWriter(tmp_path, max_queue=100, flush_secs=0)
    w.add_scalar("a", 1.0, 1)
    assert len(_read_events(tmp_path)) == 2
    w.close()


def test_idle_writer_is_flushed_by_its_thread(tmp_path):
    import time

    w = SummaryWriter(tmp_path, max_queue=100, flush_secs=0.2)
    w.add_scalar("a", 1.0, 1)  # queued; nothing else calls into the writer afterwards
    deadline = time.monotonic() + 60  # a bound for a stalled thread, not a timing check
    while len(_read_events(tmp_path)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_read_events(tmp_path)) == 2
    file_writer = w.file_writer
    w.close()
    assert w.file_writer is None and not file_writer._thread.is_alive()  # stopped and joined


def test_open_writer_is_flushed_at_exit(tmp_path):
    script = (
        "import ember\n"
        "from ember.utils.tensorboard import SummaryWriter\n"
        f"w = SummaryWriter({str(tmp_path)!r}, max_queue=1000, flush_secs=10_000)\n"
        "for step in range(50):\n"
        "    w.add_scalar('loss', step * 0.5, step)\n"
        "w.add_scalars('pair', {'a': 1.0}, 3)\n"
        "del w\n"  # never closed
    )
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ))
    assert [v["simple_value"] for _, v in _values(tmp_path)] == [s * 0.5 for s in range(50)]
    assert _values(tmp_path / "pair_a") == [(3, {"tag": "pair", "simple_value": 1.0})]


def test_add_figure(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def figure():
        fig = plt.figure(figsize=(2, 1), dpi=20)  # 40x20 pixels
        fig.patch.set_facecolor((1.0, 0.0, 0.0))
        return fig

    with SummaryWriter(tmp_path) as w:
        single = figure()
        w.add_figure("one", single, 1)
        w.add_figure("two", [figure(), figure()], 2, close=False)
    open_figures = [plt.figure(n) for n in plt.get_fignums()]  # numbers are reused
    assert len(open_figures) == 2 and single not in open_figures
    plt.close("all")
    got = {v["tag"]: _decode_png(v["image"]["encoded_image_string"]) for _, v in
           _values(tmp_path)}
    assert got["one"].shape == (20, 40, 3) and got["two"].shape == (20, 80, 3)
    assert (got["one"] == [255, 0, 0]).all() and (got["two"] == [255, 0, 0]).all()


def test_file_writer_takes_events_and_summaries(tmp_path):
    from ember.utils.tensorboard import FileWriter

    value = _proto.string_field(1, "x") + _proto.float_field(2, 2.0)
    summary = _proto.bytes_field(1, value)
    fw = FileWriter(tmp_path)
    fw.add_summary(summary, 4, walltime=T)
    # an Event with its own wall_time and step: add_event sets both, as PyTorch's does
    fw.add_event(_proto.double_field(1, 1.0) + _proto.int_field(2, 1)
                 + _proto.bytes_field(5, summary), step=9, walltime=T + 1)
    fw.add_event(_proto.bytes_field(5, summary), walltime=T + 2)
    try:  # protobuf objects too, when the tensorboard package provides them
        from tensorboard.compat.proto import event_pb2, summary_pb2
    except ImportError:
        event_pb2 = None
    if event_pb2 is not None:
        proto = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="x", simple_value=2.0)])
        fw.add_summary(proto, 5, walltime=T)
        fw.add_event(event_pb2.Event(summary=proto), step=6, walltime=T)
    fw.close()
    with pytest.raises(OSError, match="closed"):
        fw.add_summary(summary)
    events = _read_events(tmp_path)[1:]
    expected = [(T, 4), (T + 1, 9), (T + 2, None)] + ([(T, 5), (T, 6)] if event_pb2 else [])
    assert [(e["wall_time"], e.get("step")) for e in events] == expected
    assert all(e["summary"]["value"] == [{"tag": "x", "simple_value": 2.0}] for e in events)


def test_add_graph_is_not_supported(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(NotImplementedError, match="GraphDef"):
            w.add_graph(object(), ember.zeros(1))


def test_import_is_lazy_and_torch_like():
    code = ("import sys, ember; assert 'ember.utils.tensorboard' not in sys.modules; "
            "import ember.utils.tensorboard as tb; "
            "assert ember.utils.tensorboard is tb and tb.SummaryWriter.__module__ == "
            "'ember.utils.tensorboard.writer'")
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))


# A training script as PyTorch users write it, untouched.
_TRAIN_SCRIPT = """
import sys
import torch
import torch.nn as nn
from torch.utils.tensorboard import SummaryWriter

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
x = torch.randn(128, 4)
y = x.sum(dim=1, keepdim=True)
writer = SummaryWriter(sys.argv[1])
for epoch in range(15):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    writer.add_scalar("Loss/train", loss, epoch)
    writer.add_scalars("loss", {"full": loss.item(), "half": loss.item() / 2}, epoch)
    if epoch % 5 == 0:
        for name, param in model.named_parameters():
            writer.add_histogram(name, param, epoch)
            writer.add_histogram(name + ".grad", param.grad, epoch)
        writer.add_image("inputs", x[:16].reshape(1, 8, 8).sigmoid(), epoch)
writer.add_text("summary", "final loss %.4f" % loss.item(), 15)
writer.add_hparams({"lr": 0.05, "optimizer": "adam"}, {"hparam/loss": loss.item()},
                   run_name="hparams")
writer.close()
"""

# Runs a script with `import torch` and `import torch.x` giving ember and ember.x.
_TORCH_IS_EMBER = """
import importlib, importlib.abc, importlib.util, runpy, sys

class TorchIsEmber(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            return importlib.util.spec_from_loader(name, self)
    def create_module(self, spec):
        return importlib.import_module("ember" + spec.name[len("torch"):])
    def exec_module(self, module):
        pass

sys.meta_path.insert(0, TorchIsEmber())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _logged(log_dir) -> list[tuple[str, str, int]]:
    """(run directory, tag, step) of every summary value under log_dir, sorted."""
    out = []
    for root, _, names in os.walk(log_dir):
        if any("tfevents" in n for n in names):
            run = os.path.relpath(root, log_dir)
            run = "hparams" if run.endswith("hparams") else run
            out += [(run, v["tag"], s) for s, v in _values(root)]
    return sorted(out)


def test_torch_training_script_runs_unchanged(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_TRAIN_SCRIPT)
    prelude = ["-c", _TORCH_IS_EMBER, str(script)]
    subprocess.run([sys.executable, *prelude, str(tmp_path / "ember")], check=True)
    got = _logged(tmp_path / "ember")
    assert {run for run, _, _ in got} == {".", "loss_full", "loss_half", "hparams"}
    losses = [v["simple_value"] for _, v in _values(tmp_path / "ember")
              if v["tag"] == "Loss/train"]
    assert len(losses) == 15 and losses[-1] < losses[0] / 4
    assert [v["simple_value"] for _, v in _values(tmp_path / "ember" / "loss_half")] == \
        pytest.approx([v / 2 for v in losses], rel=1e-6)
    histos = [(s, v["histo"]["num"]) for s, v in _values(tmp_path / "ember")
              if v["tag"] == "0.weight"]
    assert histos == [(0, 32.0), (5, 32.0), (10, 32.0)]
    # With PyTorch and the tensorboard package installed, the script run on PyTorch logs the
    # same tags and steps to the same runs (its files read by the same reader).
    try:
        import tensorboard  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return
    subprocess.run([sys.executable, str(script), str(tmp_path / "torch")], check=True)
    assert _logged(tmp_path / "torch") == got


# ---------------------------------------------------------------------------------------------
# TensorBoard's own reader (when the tensorboard package is installed)

def test_tensorboard_event_accumulator_reads_the_files(tmp_path):
    ea_module = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    rng = np.random.default_rng(3)
    values = rng.standard_normal(500)
    with SummaryWriter(tmp_path) as w:
        for step in range(5):
            w.add_scalar("loss", 1.0 / (step + 1), step, walltime=T + step)
        w.add_histogram("h", values, 2)
        w.add_image("img", rng.random((3, 4, 6)), 3)
        w.add_text("t", "hello", 4)
        w.add_scalar("ns", 0.75, 5, new_style=True)
    acc = ea_module.EventAccumulator(str(tmp_path), size_guidance={"tensors": 0, "images": 0})
    acc.Reload()
    scalars = acc.Scalars("loss")
    assert [(s.step, s.wall_time) for s in scalars] == [(i, T + i) for i in range(5)]
    assert [s.value for s in scalars] == pytest.approx([1.0 / (i + 1) for i in range(5)])
    (histo,) = acc.Histograms("h")
    assert histo.step == 2 and histo.histogram_value.num == 500
    assert sum(histo.histogram_value.bucket) == 500
    (image,) = acc.Images("img")
    assert (image.step, image.width, image.height) == (3, 6, 4)
    (text,) = acc.Tensors("t/text_summary")
    assert text.tensor_proto.string_val == [b"hello"]
    (ns,) = acc.Tensors("ns")
    assert ns.tensor_proto.float_val == [0.75]
    assert acc.PluginTagToContent("text") == {"t/text_summary": b""}


def test_records_match_torch_summary_writer(tmp_path):
    pytest.importorskip("tensorboard")
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

    rng = np.random.default_rng(4)
    values, image = rng.standard_normal(300) * 5, rng.random((3, 4, 5)).astype(np.float32)
    labels, predictions = rng.integers(0, 2, 100), rng.random(100)

    def log(writer_class, log_dir):
        w = writer_class(str(log_dir))
        w.add_scalar("s", 1.25, 3, walltime=T)
        w.add_scalar("zero", 0.0, 0, walltime=T)
        w.add_scalar("big", -1e40, -2, walltime=T)
        w.add_scalar("ns", 2.5, 4, walltime=T, new_style=True)
        w.add_scalar("nsd", 2.1, 4, walltime=T, new_style=True, double_precision=True)
        w.add_scalars("m/x", {"a": 1, "b": 2.5}, 5, walltime=T)
        w.add_histogram("h", values, 6, walltime=T)
        w.add_histogram("h10", values, 6, bins=10, walltime=T, max_bins=4)
        w.add_histogram_raw("hr", -1, 2, 3, 0.5, 4.0, [0, 1, 2], [1, 0, 2], 7, walltime=T)
        w.add_text("t", "héllo", 9, walltime=T)
        w.add_pr_curve("pr", labels, predictions, 9, weights=values[:100] ** 2, walltime=T)
        w.add_pr_curve("pr200", labels, predictions, 9, num_thresholds=200, walltime=T)
        w.add_pr_curve_raw("prr", [3, 2], [1, 0], [0, 1], [0, 1], [0.75, 1.0], [1.0, 0.5], 9,
                           num_thresholds=300, walltime=T)
        w.add_image("img", image, 10, walltime=T)
        w.close()

    def log_tensors(writer_class, log_dir, to_tensor):  # dtypes both write the same way
        w = writer_class(str(log_dir))
        for i, array in enumerate([image, values, np.array(4.0, dtype=np.float32),
                                   np.array([[-1], [7]], dtype=np.int32), np.array([-2 ** 40, 5]),
                                   np.array([True, False]), np.array([1 + 2j, -3j])]):
            w.add_tensor(f"t{i}", to_tensor(array), i, walltime=T)
        w.close()

    def records(log_dir):
        out = {}
        for root, _, names in os.walk(log_dir):
            for name in names:
                key = os.path.relpath(root, log_dir)
                out[key] = list(RawEventFileLoader(os.path.join(root, name)).Load())[1:]
        return out

    import torch

    log(torch_tb.SummaryWriter, tmp_path / "torch")
    log(SummaryWriter, tmp_path / "ember")
    log_tensors(torch_tb.SummaryWriter, tmp_path / "torch" / "tensors", torch.tensor)
    log_tensors(SummaryWriter, tmp_path / "ember" / "tensors", ember.tensor)
    expected, got = records(tmp_path / "torch"), records(tmp_path / "ember")
    assert sorted(expected) == sorted(got) == [".", "m_x_a", "m_x_b", "tensors"]
    for key in expected:
        assert len(expected[key]) == len(got[key])
        # Byte-identical, except the PNG, which another encoder compresses differently.
        assert expected[key][:-1] == got[key][:-1] if key == "." else expected[key] == got[key]
    ours = _read_events(tmp_path / "ember")[-1]["summary"]["value"][0]["image"]
    np.testing.assert_array_equal(_decode_png(ours["encoded_image_string"]),
                                  (image.transpose(1, 2, 0) * np.float32(255)).astype(np.uint8))
