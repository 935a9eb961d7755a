"""Reads event files back: every record's CRCs are checked and its ``Event`` decoded into dicts
named after the protobuf fields (absent fields are absent keys, as proto3 leaves defaults out).

>>> import os, tempfile
>>> from ember.utils.tensorboard import SummaryWriter
>>> from ember.utils.tensorboard._reader import _read_events
>>> with tempfile.TemporaryDirectory() as d:
...     with SummaryWriter(d) as w:
...         w.add_scalar("loss", 0.25, global_step=3)
...     events = _read_events(d)
>>> events[0]["file_version"]
'brain.Event:2'
>>> events[1]["step"], events[1]["summary"]["value"][0]
(3, {'tag': 'loss', 'simple_value': 0.25})
"""

from __future__ import annotations

import os
from typing import Any, Union

from ember.utils.tensorboard import _proto
from ember.utils.tensorboard._record import read_records

_PLUGIN_DATA = {1: ("plugin_name", "string"), 2: ("content", "bytes")}
_METADATA = {1: ("plugin_data", _PLUGIN_DATA), 2: ("display_name", "string"),
             3: ("summary_description", "string"), 4: ("data_class", "int32")}
_SHAPE = {2: ("dim", {1: ("size", "int64"), 2: ("name", "string")}, "repeated")}
_TENSOR = {1: ("dtype", "int32"), 2: ("tensor_shape", _SHAPE), 4: ("tensor_content", "bytes"),
           5: ("float_val", "float", "repeated"), 6: ("double_val", "double", "repeated"),
           7: ("int_val", "int32", "repeated"), 8: ("string_val", "bytes", "repeated"),
           9: ("scomplex_val", "float", "repeated"), 10: ("int64_val", "int64", "repeated"),
           11: ("bool_val", "bool", "repeated"), 12: ("dcomplex_val", "double", "repeated"),
           13: ("half_val", "int32", "repeated")}
_HISTOGRAM = {1: ("min", "double"), 2: ("max", "double"), 3: ("num", "double"),
              4: ("sum", "double"), 5: ("sum_squares", "double"),
              6: ("bucket_limit", "double", "repeated"), 7: ("bucket", "double", "repeated")}
_IMAGE = {1: ("height", "int32"), 2: ("width", "int32"), 3: ("colorspace", "int32"),
          4: ("encoded_image_string", "bytes")}
_AUDIO = {1: ("sample_rate", "float"), 2: ("num_channels", "int64"),
          3: ("length_frames", "int64"), 4: ("encoded_audio_string", "bytes"),
          5: ("content_type", "string")}
_VALUE = {1: ("tag", "string"), 2: ("simple_value", "float"), 4: ("image", _IMAGE),
          5: ("histo", _HISTOGRAM), 6: ("audio", _AUDIO), 7: ("node_name", "string"),
          8: ("tensor", _TENSOR), 9: ("metadata", _METADATA)}
_SUMMARY = {1: ("value", _VALUE, "repeated")}
_SESSION_LOG = {1: ("status", "int32"), 2: ("checkpoint_path", "string"), 3: ("msg", "string")}
EVENT_SCHEMA = {1: ("wall_time", "double"), 2: ("step", "int64"), 3: ("file_version", "string"),
                5: ("summary", _SUMMARY), 7: ("session_log", _SESSION_LOG)}


def _event_files(path: Union[str, os.PathLike]) -> list[str]:
    path = os.fspath(path)
    if os.path.isfile(path):
        return [path]
    names = sorted(n for n in os.listdir(path) if "tfevents" in n)
    return [os.path.join(path, n) for n in names]


def _read_events(path: Union[str, os.PathLike]) -> list[dict[str, Any]]:
    """The events of one event file, or of every ``*tfevents*`` file directly in a directory
    (in file-name order), decoded; ValueError on a bad CRC or a truncated record."""
    events = []
    for name in _event_files(path):
        with open(name, "rb") as f:
            events.extend(_proto.decode(record, EVENT_SCHEMA) for record in read_records(f))
    return events
