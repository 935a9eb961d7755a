"""Builds the protobuf messages of an event file: ``Event`` and its ``Summary.Value`` kinds.

Field numbers (TensorBoard's protos; proto3, fields written in number order)::

    Event:            1 wall_time (double), 2 step (int64), 3 file_version (string),
                      5 summary (Summary), 7 session_log (SessionLog)
    SessionLog:       1 status (enum: START = 1)
    Summary:          1 value (repeated Summary.Value)
    Summary.Value:    1 tag, 9 metadata (SummaryMetadata), and one of 2 simple_value (float),
                      4 image (Summary.Image), 5 histo (HistogramProto), 6 audio, 8 tensor
    Summary.Image:    1 height, 2 width, 3 colorspace (int32), 4 encoded_image_string (bytes)
    Summary.Audio:    1 sample_rate (float), 2 num_channels, 3 length_frames (int64),
                      4 encoded_audio_string (bytes), 5 content_type (string)
    HistogramProto:   1 min, 2 max, 3 num, 4 sum, 5 sum_squares (double),
                      6 bucket_limit, 7 bucket (packed repeated double)
    SummaryMetadata:  1 plugin_data (PluginData: 1 plugin_name, 2 content (bytes))
    TensorProto:      1 dtype (DataType: DT_FLOAT 1, DT_DOUBLE 2, DT_INT32 3, DT_UINT8 4,
                      DT_INT16 5, DT_INT8 6, DT_STRING 7, DT_COMPLEX64 8, DT_INT64 9, DT_BOOL 10,
                      DT_BFLOAT16 14, DT_COMPLEX128 18, DT_HALF 19), 2 tensor_shape
                      (TensorShapeProto: 2 dim (repeated Dim: 1 size)), and the values, packed:
                      5 float_val, 6 double_val, 7 int_val, 9 scomplex_val, 10 int64_val,
                      11 bool_val, 12 dcomplex_val, 13 half_val; or 8 string_val (bytes)

The plugins' own messages are described where they are built (``hparams_values``,
``pr_curve_value``, ``custom_scalars_value``).

>>> from ember.utils.tensorboard import _summary
>>> _summary.scalar_value("loss", 0.5).hex()
'0a046c6f7373150000003f'
"""

from __future__ import annotations

import io
import wave
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np

from ember.utils.tensorboard import _proto as pb
from ember.utils.tensorboard._gif import encode_gif
from ember.utils.tensorboard._png import encode_png

FILE_VERSION = "brain.Event:2"
SESSION_START = 1
DT_FLOAT, DT_DOUBLE, DT_STRING = 1, 2, 7


def make_np(x: Any) -> np.ndarray:
    """``x`` as a NumPy array: ember (or torch) tensors are detached and copied to the host
    (dtypes NumPy lacks, such as bfloat16, go through float32); a Python or NumPy scalar
    becomes a one-element array."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (bool, int, float, np.generic)):
        return np.array([x])
    if hasattr(x, "detach") and hasattr(x, "numpy"):
        t = x.detach()
        if hasattr(t, "cpu"):
            t = t.cpu()
        try:
            return t.numpy()
        except TypeError:  # no NumPy dtype (bfloat16, float8): widen first
            return t.float().numpy()
    if isinstance(x, (list, tuple)):
        return np.asarray(x)
    raise NotImplementedError(
        f"Got {type(x).__name__}, but a NumPy array, a number or an ember tensor is expected.")


def _check(condition: bool, message: str) -> None:
    # PyTorch asserts these; an explicit AssertionError keeps its exception class under -O.
    if not condition:
        raise AssertionError(message)


# --------------------------------------------------------------------------------------------
# Event and Summary

def event(wall_time: float, step: Optional[int] = None, *, file_version: Optional[str] = None,
          summary: Optional[bytes] = None, session_log_status: Optional[int] = None) -> bytes:
    """An ``Event``: a wall time and step, with a file version, a summary or a session log."""
    parts = []
    if not pb.is_default(float(wall_time)):
        parts.append(pb.double_field(1, float(wall_time)))
    if step is not None and int(step) != 0:
        parts.append(pb.int_field(2, int(step)))
    if file_version is not None:
        parts.append(pb.string_field(3, file_version))
    if summary is not None:
        parts.append(pb.bytes_field(5, summary))
    if session_log_status is not None:
        parts.append(pb.bytes_field(7, pb.int_field(1, session_log_status)))
    return b"".join(parts)


def summary(values: Sequence[bytes]) -> bytes:
    """A ``Summary`` holding encoded ``Summary.Value`` messages."""
    return b"".join(pb.bytes_field(1, v) for v in values)


def _metadata(plugin_name: str, content: bytes = b"") -> bytes:
    plugin_data = pb.string_field(1, plugin_name) + (pb.bytes_field(2, content) if content else b"")
    return pb.bytes_field(1, plugin_data)


def _value(tag: str, field: int, payload: bytes, metadata: Optional[bytes] = None) -> bytes:
    """A ``Summary.Value``: the tag, one message-valued field and optional metadata."""
    out = pb.string_field(1, tag) + pb.bytes_field(field, payload)
    return out + pb.bytes_field(9, metadata) if metadata is not None else out


# --------------------------------------------------------------------------------------------
# Scalars

def to_scalar(value: Any) -> float:
    """A one-element number, array or tensor as a Python float."""
    arr = make_np(value)
    _check(arr.size == 1, f"scalar should be 0D, got shape {tuple(arr.shape)}")
    return float(arr.reshape(-1)[0])


def scalar_value(tag: str, value: Any, new_style: bool = False,
                 double_precision: bool = False) -> bytes:
    """A scalar: ``simple_value``, or with ``new_style`` a scalar tensor for the scalars
    plugin (float32, or float64 with ``double_precision``)."""
    scalar = to_scalar(value)
    if not new_style:
        return pb.string_field(1, tag) + pb.float_field(2, scalar)
    # A scalar's tensor_shape is empty, which proto3 leaves out.
    if double_precision:
        tensor = pb.int_field(1, DT_DOUBLE) + pb.packed_doubles(6, [scalar])
    else:
        tensor = pb.int_field(1, DT_FLOAT) + pb.packed_floats(5, [scalar])
    return _value(tag, 8, tensor, _metadata("scalars"))


# --------------------------------------------------------------------------------------------
# Tensors

# NumPy dtype -> (TensorProto dtype, value field, how the values are packed)
_TENSOR_FIELDS = {
    np.dtype(np.float32): (1, 5, "float"), np.dtype(np.float64): (2, 6, "double"),
    np.dtype(np.int32): (3, 7, "int"), np.dtype(np.uint8): (4, 7, "int"),
    np.dtype(np.int16): (5, 7, "int"), np.dtype(np.int8): (6, 7, "int"),
    np.dtype(np.complex64): (8, 9, "float"), np.dtype(np.int64): (9, 10, "int"),
    np.dtype(np.bool_): (10, 11, "int"), np.dtype(np.complex128): (18, 12, "double"),
    np.dtype(np.float16): (19, 13, "int"),
}
DT_BFLOAT16 = 14


def _shape(dims: Sequence[int]) -> bytes:
    return b"".join(pb.bytes_field(2, pb.int_field(1, d) if d else b"") for d in dims)


def tensor_value(tag: str, tensor: Any) -> bytes:
    """A ``Summary.Value`` holding a whole tensor (the "tensor" plugin): its dtype, shape and
    values in the field of that dtype. Where PyTorch's writer differs from what TensorBoard's
    ``make_ndarray`` reads back, this follows TensorBoard: half and bfloat16 values go to
    ``half_val`` as 16-bit patterns (PyTorch: float32 patterns), uint8 to ``int_val``
    (PyTorch: ``uint32_val``)."""
    bfloat16 = str(getattr(tensor, "dtype", "")).endswith("bfloat16")
    array = make_np(tensor)
    if bfloat16:  # make_np widened it to float32 exactly: its top 16 bits are the bfloat16
        dtype, field, kind = DT_BFLOAT16, 13, "int"
        values = (np.ascontiguousarray(array, dtype=np.float32).view(np.uint32) >> 16).ravel()
    elif array.dtype in _TENSOR_FIELDS:
        dtype, field, kind = _TENSOR_FIELDS[array.dtype]
        values = array.ravel()
        if array.dtype == np.float16:
            values = np.ascontiguousarray(values).view(np.uint16)
        elif array.dtype.kind == "c":  # real and imaginary parts interleaved
            values = np.ascontiguousarray(values).view(values.real.dtype)
    else:
        raise ValueError(f"{tag} has unsupported tensor dtype {array.dtype}")
    out = pb.int_field(1, dtype) + pb.bytes_field(2, _shape(array.shape))
    if values.size:
        encode = {"float": pb.packed_floats, "double": pb.packed_doubles,
                  "int": pb.packed_varints}[kind]
        out += encode(field, values.tolist())
    return _value(tag, 8, out, _metadata("tensor"))


# --------------------------------------------------------------------------------------------
# Histograms

def default_bins() -> list[float]:
    """TensorFlow's histogram bucket edges: +-1e-12 growing by 10% per bucket up to 1e20, and 0."""
    positive = []
    edge = 1e-12
    while edge < 1e20:
        positive.append(edge)
        edge *= 1.1
    return [-e for e in reversed(positive)] + [0.0] + positive


def _double_fields(*numbered: tuple[int, float]) -> bytes:
    return b"".join(pb.double_field(n, float(v)) for n, v in numbered
                    if not pb.is_default(float(v)))


def histogram_proto(min: float, max: float, num: float,  # noqa: A002 (the proto's names)
                    sum: float, sum_squares: float,  # noqa: A002
                    bucket_limit: Sequence[float], bucket: Sequence[float]) -> bytes:
    """A ``HistogramProto``; bucket ``i`` counts the values in (bucket_limit[i-1],
    bucket_limit[i]]."""
    out = _double_fields((1, min), (2, max), (3, num), (4, sum), (5, sum_squares))
    if len(bucket_limit):
        out += pb.packed_doubles(6, [float(v) for v in bucket_limit])
    if len(bucket):
        out += pb.packed_doubles(7, [float(v) for v in bucket])
    return out


def make_histogram(values: np.ndarray, bins: Union[str, int, Sequence[float], np.ndarray],
                   max_bins: Optional[int] = None) -> bytes:
    """The ``HistogramProto`` of ``values`` (float64, any shape) with NumPy's ``bins``; runs of
    empty buckets at both ends are dropped, except one empty bucket that closes the left end."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size == 0:
        raise ValueError("add_histogram: values is empty")
    counts, limits = np.histogram(values, bins=bins)
    if max_bins is not None and counts.size > max_bins:
        group = counts.size // max_bins  # merge runs of `group` buckets (the last may be short)
        counts = np.pad(counts, (0, (-counts.size) % group)).reshape(-1, group).sum(axis=1)
        limits = np.concatenate([limits[:-1:group], limits[-1:]])
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        raise ValueError("add_histogram: no value falls inside the bins")
    first, last = int(nonzero[0]), int(nonzero[-1])
    # bucket_limit holds right edges: the empty bucket ends at the first non-empty one's left edge
    bucket = np.concatenate([[0], counts[first:last + 1]])
    bucket_limit = limits[first:last + 2]
    return histogram_proto(values.min(), values.max(), values.size, values.sum(),
                           values.dot(values), bucket_limit.tolist(), bucket.tolist())


def histogram_value(tag: str, histo: bytes) -> bytes:
    """A ``Summary.Value`` holding an encoded ``HistogramProto``."""
    return _value(tag, 5, histo)


# --------------------------------------------------------------------------------------------
# Images

def _make_grid(nchw: np.ndarray, ncols: int = 8) -> np.ndarray:
    """A CHW canvas tiling the N images of an NCHW batch, ``ncols`` per row."""
    if nchw.shape[1] == 1:
        nchw = np.concatenate([nchw] * 3, axis=1)
    _check(nchw.shape[1] in (3, 4), f"images should have 1, 3 or 4 channels, got {nchw.shape[1]}")
    n, c, h, w = nchw.shape
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    canvas = np.zeros((c, h * nrows, w * ncols), dtype=nchw.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = nchw[i]
    return canvas


def to_hwc(array: np.ndarray, dataformats: str) -> np.ndarray:
    """An image (or a batch, tiled into a grid) in ``dataformats`` (a permutation of CHW, HWC,
    HW, NCHW...) as an HxWx3 or HxWx4 array; one channel is repeated to three."""
    fmt = dataformats.upper()
    _check(len(set(fmt)) == len(fmt), f"dataformats {dataformats!r} repeats a dimension")
    _check(array.ndim == len(fmt),
           f"an image of shape {tuple(array.shape)} does not match dataformats {dataformats!r}")
    if len(fmt) == 4:
        _check(set(fmt) == set("NCHW"), f"unknown dataformats {dataformats!r}")
        grid = _make_grid(array.transpose([fmt.index(c) for c in "NCHW"]))
        return grid.transpose(1, 2, 0)
    if len(fmt) == 3:
        _check(set(fmt) == set("HWC"), f"unknown dataformats {dataformats!r}")
        hwc = array.transpose([fmt.index(c) for c in "HWC"])
        return np.concatenate([hwc] * 3, axis=2) if hwc.shape[2] == 1 else hwc
    _check(set(fmt) == set("HW"), f"unknown dataformats {dataformats!r}")
    hw = array.transpose([fmt.index(c) for c in "HW"])
    return np.stack([hw] * 3, axis=2)


def to_uint8(hwc: np.ndarray) -> np.ndarray:
    """Pixels as uint8: uint8 stays, anything else is taken as [0, 1] and scaled by 255
    (clipped, then truncated, as PyTorch's writer does)."""
    scale = 1.0 if hwc.dtype == np.uint8 else 255.0
    return (hwc.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)


def image_value(tag: str, img: Any, dataformats: str) -> bytes:
    """A ``Summary.Value`` holding a PNG-encoded ``Summary.Image``."""
    pixels = to_uint8(to_hwc(make_np(img), dataformats))
    height, width, channels = pixels.shape
    image = (pb.int_field(1, height) + pb.int_field(2, width) + pb.int_field(3, channels)
             + pb.bytes_field(4, encode_png(pixels)))
    return _value(tag, 4, image)


def draw_boxes(pixels: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """A copy of HxWxC uint8 ``pixels`` with each (xmin, ymin, xmax, ymax) box outlined in red,
    two pixels wide, drawn as PyTorch's PIL polyline is: (xmin, ymin) -> (xmin, ymax) ->
    (xmax, ymax) -> (xmax, ymin) -> back, coordinates truncated to integers, each segment
    covering its own row or column and the next one on a side set by its direction."""
    out = pixels.copy()
    red = np.array([255, 0, 0, 255][:out.shape[2]], dtype=np.uint8)
    for box in np.asarray(boxes, dtype=np.float64).reshape(-1, 4):
        left, top, right, bottom = (int(v) for v in box)
        corners = [(left, top), (left, bottom), (right, bottom), (right, top), (left, top)]
        for (x0, y0), (x1, y1) in zip(corners, corners[1:]):
            if x0 == x1:  # vertical: down covers x and x + 1, up x - 1 and x
                xs, ys = sorted((x0, x0 + (1 if y1 > y0 else -1))), sorted((y0, y1))
            else:  # horizontal: right covers y and y + 1, left y - 1 and y
                ys, xs = sorted((y0, y0 + (1 if x1 > x0 else -1))), sorted((x0, x1))
            out[max(ys[0], 0):max(ys[1] + 1, 0), max(xs[0], 0):max(xs[1] + 1, 0)] = red
    return out


def image_with_boxes_value(tag: str, img: Any, boxes: Any, rescale: float,
                           dataformats: str) -> bytes:
    """An image with boxes drawn on it, then scaled by ``rescale`` (nearest neighbour)."""
    pixels = draw_boxes(to_uint8(to_hwc(make_np(img), dataformats)), make_np(boxes))
    if rescale != 1:
        height, width = pixels.shape[:2]
        rows = (np.arange(max(int(height * rescale), 1)) / rescale).astype(np.int64)
        cols = (np.arange(max(int(width * rescale), 1)) / rescale).astype(np.int64)
        pixels = pixels[np.minimum(rows, height - 1)][:, np.minimum(cols, width - 1)]
    height, width, channels = pixels.shape
    image = (pb.int_field(1, height) + pb.int_field(2, width) + pb.int_field(3, channels)
             + pb.bytes_field(4, encode_png(np.ascontiguousarray(pixels))))
    return _value(tag, 4, image)


def video_frames(video: np.ndarray) -> np.ndarray:
    """N x T x C x H x W videos as T x H' x W' x C frames: the batch, padded with black videos
    to a power of two, tiled 2**floor(log2(N) / 2) rows high (PyTorch's layout)."""
    _check(video.ndim == 5, f"video should be N x T x C x H x W, got shape {video.shape}")
    n, t, c, h, w = video.shape
    padded = 1 << (n - 1).bit_length()  # the next power of two
    if padded != n:
        pad = np.zeros((padded - n, t, c, h, w), dtype=video.dtype)
        video = np.concatenate([video, pad])
    rows = 1 << ((n.bit_length() - 1) // 2)
    cols = padded // rows
    grid = video.reshape(rows, cols, t, c, h, w).transpose(2, 0, 4, 1, 5, 3)
    return grid.reshape(t, rows * h, cols * w, c)


def video_value(tag: str, video: Any, fps: float) -> bytes:
    """A ``Summary.Value`` holding an animated GIF as a ``Summary.Image``."""
    frames = to_uint8(video_frames(make_np(video)))
    channels = frames.shape[3]
    _check(channels in (1, 3, 4), f"video frames should have 1, 3 or 4 channels, got {channels}")
    rgb = np.repeat(frames, 3, axis=3) if channels == 1 else frames[..., :3]  # GIF has no alpha
    _, height, width, _ = rgb.shape
    image = (pb.int_field(1, height) + pb.int_field(2, width) + pb.int_field(3, channels)
             + pb.bytes_field(4, encode_gif(np.ascontiguousarray(rgb), fps)))
    return _value(tag, 4, image)


# --------------------------------------------------------------------------------------------
# Audio and text

def audio_value(tag: str, snd: Any, sample_rate: int = 44100) -> bytes:
    """A ``Summary.Value`` holding mono 16-bit WAV audio; samples are clipped to [-1, 1]."""
    samples = make_np(snd).squeeze()
    _check(samples.ndim == 1, "input tensor should be 1 dimensional.")
    pcm = (samples.astype(np.float64).clip(-1, 1) * np.iinfo(np.int16).max).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm.tobytes())
    audio = (pb.float_field(1, float(sample_rate)) + pb.int_field(2, 1)
             + (pb.int_field(3, pcm.shape[-1]) if pcm.shape[-1] else b"")
             + pb.bytes_field(4, buf.getvalue()) + pb.string_field(5, "audio/wav"))
    return _value(tag, 6, audio)


def text_value(tag: str, text: str) -> bytes:
    """A ``Summary.Value`` for the text plugin: a one-element DT_STRING tensor under
    ``<tag>/text_summary`` (the plugin's content, TextPluginData version 0, encodes empty)."""
    shape = pb.bytes_field(2, pb.int_field(1, 1))  # one Dim of size 1
    tensor = (pb.int_field(1, DT_STRING) + pb.bytes_field(2, shape)
              + pb.bytes_field(8, text.encode("utf-8")))
    return _value(tag + "/text_summary", 8, tensor, _metadata("text"))


# --------------------------------------------------------------------------------------------
# PR curves and custom-scalar layouts

PR_CURVE_MAX_THRESHOLDS = 127  # as PyTorch caps it


def pr_curve_data(labels: np.ndarray, predictions: np.ndarray, num_thresholds: int,
                  weights: Optional[np.ndarray] = None) -> np.ndarray:
    """The pr_curves plugin's 6 x num_thresholds table: true/false positive, true/false negative
    counts, precision and recall when ``prediction >= k / (num_thresholds - 1)`` counts as
    positive (predictions outside [0, 1] are left out)."""
    top = num_thresholds - 1
    bucket = np.floor(np.asarray(predictions, dtype=np.float64).reshape(-1) * top)
    positive = np.asarray(labels, dtype=np.float64).reshape(-1)
    weight = np.broadcast_to(np.float64(1.0) if weights is None else
                             np.asarray(weights, dtype=np.float64).reshape(-1), positive.shape)
    keep = (bucket >= 0) & (bucket <= top)
    index = bucket[keep].astype(np.int64)
    tp_at = np.bincount(index, (positive * weight)[keep], minlength=num_thresholds)
    fp_at = np.bincount(index, ((1.0 - positive) * weight)[keep], minlength=num_thresholds)
    tp = np.cumsum(tp_at[::-1])[::-1]  # at threshold k: everything in buckets k and above
    fp = np.cumsum(fp_at[::-1])[::-1]
    tn, fn = fp[0] - fp, tp[0] - tp
    precision = tp / np.maximum(1e-7, tp + fp)
    recall = tp / np.maximum(1e-7, tp + fn)
    return np.stack([tp, fp, tn, fn, precision, recall])


def pr_curve_value(tag: str, data: np.ndarray, num_thresholds: int) -> bytes:
    """A ``Summary.Value`` holding a 6 x N float tensor for the pr_curves plugin (content:
    ``PrCurvePluginData``: 1 version (0, left out), 2 num_thresholds)."""
    tensor = (pb.int_field(1, DT_FLOAT) + pb.bytes_field(2, _shape(data.shape))
              + pb.packed_floats(5, data.reshape(-1).tolist()))
    content = pb.int_field(2, num_thresholds) if num_thresholds else b""
    return _value(tag, 8, tensor, _metadata("pr_curves", content))


def custom_scalars_value(layout: Mapping[str, Mapping[str, Sequence[Any]]]) -> bytes:
    """The custom_scalars plugin's layout: ``{category: {chart title: ["Multiline", tags] or
    ["Margin", [value, lower, upper]]}}`` as a ``Layout`` (2 category: ``Category``, 1 title,
    2 chart: ``Chart``, 1 title, 2 multiline (1 tag, repeated) or 3 margin (1 series: 1 value,
    2 lower, 3 upper)) in a scalar DT_STRING tensor tagged ``custom_scalars__config__``."""
    categories = []
    for category, charts in layout.items():
        encoded = []
        for title, (kind, tags) in charts.items():
            if kind == "Margin":
                _check(len(tags) == 3, "len(tags) != 3")
                series = b"".join(pb.string_field(n, t) for n, t in zip((1, 2, 3), tags))
                content = pb.bytes_field(3, pb.bytes_field(1, series))
            else:
                content = pb.bytes_field(2, b"".join(pb.string_field(1, t) for t in tags))
            encoded.append(pb.bytes_field(2, pb.string_field(1, title) + content))
        categories.append(pb.bytes_field(2, pb.string_field(1, category) + b"".join(encoded)))
    tensor = pb.int_field(1, DT_STRING) + pb.bytes_field(8, b"".join(categories))
    return _value("custom_scalars__config__", 8, tensor, _metadata("custom_scalars"))


# --------------------------------------------------------------------------------------------
# Hyperparameters

def _struct_value(value: Union[float, str, bool], kind: int) -> bytes:
    """A ``google.protobuf.Value`` for an hparam of ``kind``: 2 number_value (double),
    3 string_value, 4 bool_value."""
    if kind == 1:
        return pb.string_field(3, str(value))
    if kind == 2:
        return pb.int_field(4, bool(value))
    return pb.double_field(2, float(value))


def hparams_values(hparam_dict: Mapping[str, Any], metric_dict: Mapping[str, Any],
                   hparam_domain_discrete: Optional[Mapping[str, Sequence[Any]]] = None
                   ) -> tuple[bytes, bytes, bytes]:
    """The hparams plugin's three summaries (experiment, session start, session end).

    Each is a ``Summary.Value`` with only a tag (``_hparams_/experiment`` ...) and metadata
    whose plugin content is an ``HParamsPluginData`` (1 version, 2 experiment, 3
    session_start_info, 4 session_end_info). ``Experiment``: 4 hparam_infos (``HParamInfo``:
    1 name, 4 type (STRING 1, BOOL 2, FLOAT64 3), 5 domain_discrete (ListValue: 1 values)),
    5 metric_infos (``MetricInfo``: 1 name (``MetricName``: 2 tag)). ``SessionStartInfo``:
    1 hparams (map<string, Value>: entries with 1 key, 2 value). ``SessionEndInfo``: 1 status
    (SUCCESS 1).
    """
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, Mapping):
        raise TypeError("hparam_domain_discrete should be a dictionary")
    for name, domain in domains.items():
        if (name not in hparam_dict or not isinstance(domain, list)
                or not all(isinstance(d, type(hparam_dict[name])) for d in domain)):
            raise TypeError(f"hparam_domain_discrete[{name!r}] should be a list of values of the "
                            f"type of hparam_dict[{name!r}]")
    infos, entries = [], []
    for name, value in hparam_dict.items():
        if value is None:
            continue
        if isinstance(value, (int, float)):  # bool too (an int), as PyTorch does
            kind = 3
            value = float(value)
        elif isinstance(value, str):
            kind = 1
        elif hasattr(value, "detach") or isinstance(value, (np.ndarray, np.generic)):
            kind = 3
            value = float(make_np(value).reshape(-1)[0])
        else:
            raise ValueError(f"hparam {name!r}: value should be one of int, float, str, bool, "
                             f"or a tensor, got {type(value).__name__}")
        entries.append(pb.bytes_field(1, pb.string_field(1, name)
                                      + pb.bytes_field(2, _struct_value(value, kind))))
        info = pb.string_field(1, name) + pb.int_field(4, kind)
        if name in domains:
            listed = b"".join(pb.bytes_field(1, _struct_value(v, kind)) for v in domains[name])
            info += pb.bytes_field(5, listed)
        infos.append(pb.bytes_field(4, info))
    metrics = [pb.bytes_field(5, pb.bytes_field(1, pb.string_field(2, name)))
               for name in metric_dict]
    experiment = b"".join(infos + metrics)
    start = b"".join(entries)
    end = pb.int_field(1, 1)

    def plugin_value(tag: str, field: int, message: bytes) -> bytes:
        content = pb.bytes_field(field, message)  # version 0: left out
        return pb.string_field(1, tag) + pb.bytes_field(9, _metadata("hparams", content))

    return (plugin_value("_hparams_/experiment", 2, experiment),
            plugin_value("_hparams_/session_start_info", 3, start),
            plugin_value("_hparams_/session_end_info", 4, end))
