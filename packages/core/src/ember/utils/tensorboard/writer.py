"""``SummaryWriter`` and ``FileWriter``: PyTorch's ``torch.utils.tensorboard`` writers, writing
TensorBoard event files themselves (TFRecord framing, hand-encoded protobuf ``Event``
messages, PNG images), so that the ``tensorboard`` package is needed only to view the logs.

>>> import os, tempfile
>>> import ember
>>> from ember.utils.tensorboard import SummaryWriter
>>> with tempfile.TemporaryDirectory() as d:
...     with SummaryWriter(log_dir=d) as writer:
...         for step in range(3):
...             writer.add_scalar("loss", 1.0 / (step + 1), step)
...         writer.add_histogram("weights", ember.randn(100), 2)
...     names = os.listdir(d)
>>> len(names), names[0].startswith("events.out.tfevents.")
(1, True)
"""

from __future__ import annotations

import atexit
import itertools
import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Optional, Union

import numpy as np

from ember.utils.tensorboard import _embedding, _summary
from ember.utils.tensorboard import _proto as pb
from ember.utils.tensorboard._record import encode_record

__all__ = ["FileWriter", "SummaryWriter"]

PathLike = Union[str, "os.PathLike[str]"]

_file_ids = itertools.count()  # the <n> of event file names, per process as TensorBoard's
_open_writers: set[FileWriter] = set()  # flushed and closed at interpreter exit
_open_writers_lock = threading.Lock()


def _close_open_writers() -> None:
    with _open_writers_lock:
        writers = list(_open_writers)
    for writer in writers:
        if writer._pid != os.getpid():  # inherited through fork: the parent owns that file
            continue
        try:
            writer.close()
        except OSError as e:  # the others still get written
            print(f"ember.utils.tensorboard: could not close {writer._path}: {e}", file=sys.stderr)


atexit.register(_close_open_writers)


class FileWriter:
    """Writes ``Event`` records to a new event file in ``log_dir``.

    Events are queued in memory and written when ``max_queue`` of them are pending, when
    ``flush_secs`` seconds have passed (a daemon thread flushes an idle writer), on
    ``flush()``/``close()``, and at interpreter exit for a writer still open. ``add_event`` and
    ``add_summary`` take encoded messages (bytes) or protobuf objects, as PyTorch's do.

    >>> import tempfile
    >>> from ember.utils.tensorboard import FileWriter
    >>> with tempfile.TemporaryDirectory() as d:
    ...     fw = FileWriter(d, filename_suffix=".demo")
    ...     fw.get_logdir() == d, fw.path.endswith(".demo")
    ...     fw.close()
    (True, True)
    """

    def __init__(self, log_dir: PathLike, max_queue: int = 10, flush_secs: float = 120,
                 filename_suffix: str = "") -> None:
        log_dir = os.fspath(log_dir)
        os.makedirs(log_dir, exist_ok=True)
        self._log_dir = log_dir
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_file_ids)}{filename_suffix}")
        self._path = os.path.join(log_dir, name)
        self._max_queue = int(max_queue)
        self._flush_secs = float(flush_secs)
        self._pending: list[bytes] = []
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        self._file = open(self._path, "wb")  # held until close()
        self._last_flush = time.monotonic()
        self._queue(_summary.event(time.time(), file_version=_summary.FILE_VERSION))
        self.flush()  # the file is a valid event file from the start
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if self._flush_secs > 0:
            self._thread = threading.Thread(target=self._flush_periodically, daemon=True,
                                            name="ember-tensorboard-flush")
            self._thread.start()
        with _open_writers_lock:
            _open_writers.add(self)

    @property
    def path(self) -> str:
        """The event file's path."""
        return self._path

    def get_logdir(self) -> str:
        """The directory the event file is in."""
        return self._log_dir

    def add_event(self, event: Union[bytes, Any], step: Optional[int] = None,
                  walltime: Optional[float] = None) -> None:
        """Queues an ``Event`` (encoded, or a protobuf object with ``SerializeToString``, as
        PyTorch's takes) at ``walltime`` (default: now) and ``step`` (default: as it is)."""
        if not isinstance(event, (bytes, bytearray)):
            event = event.SerializeToString()
        # A field given twice takes its last value: appending sets wall_time and step.
        event = bytes(event) + pb.double_field(1, time.time() if walltime is None else walltime)
        self._queue(event if step is None else event + pb.int_field(2, int(step)))

    def _queue(self, event: bytes) -> None:
        """Queues an encoded ``Event``; writes the queue out when it is full or ``flush_secs``
        have passed since the last flush."""
        record = encode_record(event)
        with self._lock:
            if self._closed:
                raise OSError(f"the event file {self._path} is closed")
            self._pending.append(record)
            due = time.monotonic() - self._last_flush >= self._flush_secs
            if len(self._pending) >= self._max_queue or due:
                self._write_pending()

    def add_summary(self, summary: Union[bytes, Any], global_step: Optional[int] = None,
                    walltime: Optional[float] = None) -> None:
        """Queues an ``Event`` holding a ``Summary`` (encoded, or a protobuf object), at
        ``walltime`` (default: now)."""
        if not isinstance(summary, (bytes, bytearray)):
            summary = summary.SerializeToString()
        wall_time = time.time() if walltime is None else float(walltime)
        step = None if global_step is None else int(global_step)
        self._queue(_summary.event(wall_time, step, summary=bytes(summary)))

    def _write_pending(self) -> None:  # holds self._lock
        if self._pending:
            self._file.write(b"".join(self._pending))
            self._pending.clear()
        self._file.flush()
        self._last_flush = time.monotonic()

    def flush(self) -> None:
        """Writes the queued events to disk."""
        with self._lock:
            if not self._closed:
                self._write_pending()

    def close(self) -> None:
        """Flushes and closes the file; the writer cannot be used afterwards."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._write_pending()
            finally:
                self._file.close()
                self._stop.set()
                with _open_writers_lock:
                    _open_writers.discard(self)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _flush_periodically(self) -> None:
        while not self._stop.wait(self._flush_secs):
            try:
                self.flush()
            except (OSError, ValueError):  # the file is gone: the caller's next flush reports it
                return


def _not_supported(method: str, why: str) -> NotImplementedError:
    return NotImplementedError(f"SummaryWriter.{method} is not implemented in ember: {why}")


class SummaryWriter:
    """Writes scalars, histograms, images, figures, videos, audio, text, tensors, PR curves,
    embeddings and hyperparameters to TensorBoard event files in ``log_dir`` (PyTorch's
    ``torch.utils.tensorboard.SummaryWriter``).

    ``log_dir`` defaults to ``runs/<Mon><DD>_<HH>-<MM>-<SS>_<hostname><comment>``. With
    ``purge_step``, TensorBoard hides the events at or after that step that earlier runs in the
    same directory wrote (to resume after a crash). Events are written when ``max_queue`` are
    pending, every ``flush_secs`` seconds, on ``flush()``/``close()`` and at interpreter exit.
    Values may be Python numbers, NumPy arrays or scalars, or ember tensors (on any device).

    >>> import tempfile
    >>> import ember
    >>> from ember.utils.tensorboard import SummaryWriter
    >>> from ember.utils.tensorboard._reader import _read_events
    >>> with tempfile.TemporaryDirectory() as d:
    ...     writer = SummaryWriter(d)
    ...     writer.add_scalar("train/loss", ember.tensor(0.5), global_step=1)
    ...     writer.add_image("sample", ember.rand(3, 8, 8), 1)
    ...     writer.add_text("note", "hello", 1)
    ...     writer.close()
    ...     tags = [v["tag"] for e in _read_events(d)[1:] for v in e["summary"]["value"]]
    >>> tags
    ['train/loss', 'sample', 'note/text_summary']
    """

    def __init__(self, log_dir: Optional[PathLike] = None, comment: str = "",
                 purge_step: Optional[int] = None, max_queue: int = 10,
                 flush_secs: float = 120, filename_suffix: str = "") -> None:
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.default_bins = _summary.default_bins()
        self._embeddings: list[str] = []  # projector config entries
        self.file_writer: Optional[FileWriter] = None
        self.all_writers: Optional[dict[str, FileWriter]] = None
        self._get_file_writer()

    def _get_file_writer(self) -> FileWriter:
        """The main event file's writer; opens a new file if the writer was closed."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                          self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                # A new file_version event at purge_step, then SessionLog START, make
                # TensorBoard drop what older files logged from that step on.
                now = time.time()
                self.file_writer._queue(_summary.event(
                    now, self.purge_step, file_version=_summary.FILE_VERSION))
                self.file_writer._queue(_summary.event(
                    now, self.purge_step, session_log_status=_summary.SESSION_START))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self) -> PathLike:
        """The directory the event files are written to."""
        return self.log_dir

    def add_scalar(self, tag: str, scalar_value: Any, global_step: Optional[int] = None,
                   walltime: Optional[float] = None, new_style: bool = False,
                   double_precision: bool = False) -> None:
        """Logs a scalar (a number, a NumPy scalar or a one-element tensor) under ``tag``.

        ``new_style`` writes it as a tensor for the scalars plugin (faster to load), in
        float64 with ``double_precision``; the default is the ``simple_value`` float.
        """
        value = _summary.scalar_value(tag, scalar_value, new_style, double_precision)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: Mapping[str, Any],
                    global_step: Optional[int] = None, walltime: Optional[float] = None) -> None:
        """Logs several scalars on one chart: each goes, tagged ``main_tag``, to its own event
        file in ``<log_dir>/<main_tag with / as _>_<key>`` (a run of its own in TensorBoard).
        """
        walltime = time.time() if walltime is None else walltime
        logdir = self._get_file_writer().get_logdir()
        assert self.all_writers is not None
        for key, value in tag_scalar_dict.items():
            sub_dir = logdir + "/" + main_tag.replace("/", "_") + "_" + key
            writer = self.all_writers.get(sub_dir)
            if writer is None:
                writer = FileWriter(sub_dir, self.max_queue, self.flush_secs,
                                    self.filename_suffix)
                self.all_writers[sub_dir] = writer
            summary = _summary.summary([_summary.scalar_value(main_tag, value)])
            writer.add_summary(summary, global_step, walltime)

    def add_tensor(self, tag: str, tensor: Any, global_step: Optional[int] = None,
                   walltime: Optional[float] = None) -> None:
        """Logs a whole tensor (any shape; float, integer, bool or complex dtype) as a
        TensorProto, for TensorBoard's data API and plugins that read tensors."""
        value = _summary.tensor_value(tag, tensor)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_histogram(self, tag: str, values: Any, global_step: Optional[int] = None,
                      bins: Union[str, int, Sequence[float]] = "tensorflow",
                      walltime: Optional[float] = None,
                      max_bins: Optional[int] = None) -> None:
        """Logs a histogram of ``values`` (any shape). ``bins`` is ``"tensorflow"`` (TensorFlow's
        exponential buckets, the default), or what ``numpy.histogram`` takes (a count, edges, or
        a method name such as ``"auto"``); ``max_bins`` merges neighbouring buckets down to at
        most that many."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        histo = _summary.make_histogram(_summary.make_np(values).astype(np.float64), bins,
                                        max_bins)
        value = _summary.histogram_value(tag, histo)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_histogram_raw(self, tag: str, min: float, max: float, num: float,  # noqa: A002
                          sum: float, sum_squares: float,  # noqa: A002
                          bucket_limits: Sequence[float], bucket_counts: Sequence[float],
                          global_step: Optional[int] = None,
                          walltime: Optional[float] = None) -> None:
        """Logs a histogram from its statistics; ``bucket_counts[i]`` counts the values in
        (``bucket_limits[i-1]``, ``bucket_limits[i]``]."""
        limits = [float(v) for v in _summary.make_np(bucket_limits).reshape(-1)]
        counts = [float(v) for v in _summary.make_np(bucket_counts).reshape(-1)]
        if len(limits) != len(counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        histo = _summary.histogram_proto(min, max, num, sum, sum_squares, limits, counts)
        value = _summary.histogram_value(tag, histo)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_image(self, tag: str, img_tensor: Any, global_step: Optional[int] = None,
                  walltime: Optional[float] = None, dataformats: str = "CHW") -> None:
        """Logs an image: uint8 pixels as they are, any other dtype as values in [0, 1]
        (scaled by 255). ``dataformats`` orders the dimensions: ``"CHW"`` (default), ``"HWC"``
        or ``"HW"``; C is 1 (grayscale), 3 (RGB) or 4 (RGBA)."""
        value = _summary.image_value(tag, img_tensor, dataformats)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_images(self, tag: str, img_tensor: Any, global_step: Optional[int] = None,
                   walltime: Optional[float] = None, dataformats: str = "NCHW") -> None:
        """Logs a batch of images (``"NCHW"`` by default, or ``"NHWC"``...) tiled into one
        image, eight per row."""
        value = _summary.image_value(tag, img_tensor, dataformats)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_image_with_boxes(self, tag: str, img_tensor: Any, box_tensor: Any,
                             global_step: Optional[int] = None,
                             walltime: Optional[float] = None, rescale: float = 1,
                             dataformats: str = "CHW",
                             labels: Optional[Sequence[str]] = None) -> None:
        """Logs an image with boxes (N x 4: xmin, ymin, xmax, ymax in pixels) outlined in red,
        scaled by ``rescale`` (nearest neighbour; PyTorch resamples with Lanczos). ``labels``
        are not drawn: ember has no font renderer (a warning says so)."""
        if labels is not None:
            warnings.warn("add_image_with_boxes: ember draws the boxes without their labels "
                          "(no font renderer)", stacklevel=2)
        value = _summary.image_with_boxes_value(tag, img_tensor, box_tensor, rescale,
                                                dataformats)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_figure(self, tag: str, figure: Any, global_step: Optional[int] = None,
                   close: bool = True, walltime: Optional[float] = None) -> None:
        """Logs a matplotlib figure (or a list of them, as a batch) rendered to an image;
        ``close`` closes the figure afterwards."""
        figures = figure if isinstance(figure, list) else [figure]
        images = np.stack([_render_figure(f, close) for f in figures])
        if isinstance(figure, list):
            self.add_images(tag, images, global_step, walltime, dataformats="NHWC")
        else:
            self.add_image(tag, images[0], global_step, walltime, dataformats="HWC")

    def add_audio(self, tag: str, snd_tensor: Any, global_step: Optional[int] = None,
                  sample_rate: int = 44100, walltime: Optional[float] = None) -> None:
        """Logs mono audio: a 1-D signal in [-1, 1] (clipped), stored as 16-bit WAV."""
        value = _summary.audio_value(tag, snd_tensor, sample_rate)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step: Optional[int] = None,
                 walltime: Optional[float] = None) -> None:
        """Logs text (rendered as Markdown by TensorBoard) under ``<tag>/text_summary``."""
        value = _summary.text_value(tag, text_string)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_pr_curve(self, tag: str, labels: Any, predictions: Any,
                     global_step: Optional[int] = None, num_thresholds: int = 127,
                     weights: Any = None, walltime: Optional[float] = None) -> None:
        """Logs a precision-recall curve of binary ``labels`` against ``predictions`` in
        [0, 1], over ``num_thresholds`` evenly spaced thresholds (at most 127)."""
        num_thresholds = min(num_thresholds, _summary.PR_CURVE_MAX_THRESHOLDS)
        data = _summary.pr_curve_data(
            _summary.make_np(labels), _summary.make_np(predictions), num_thresholds,
            None if weights is None else _summary.make_np(weights))
        value = _summary.pr_curve_value(tag, data, num_thresholds)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_pr_curve_raw(self, tag: str, true_positive_counts: Any,
                         false_positive_counts: Any, true_negative_counts: Any,
                         false_negative_counts: Any, precision: Any, recall: Any,
                         global_step: Optional[int] = None, num_thresholds: int = 127,
                         weights: Any = None, walltime: Optional[float] = None) -> None:
        """Logs a precision-recall curve from its per-threshold counts, precision and recall
        (``weights`` is unused, as in PyTorch)."""
        rows = [true_positive_counts, false_positive_counts, true_negative_counts,
                false_negative_counts, precision, recall]
        data = np.stack([_summary.make_np(r).astype(np.float64).reshape(-1) for r in rows])
        num_thresholds = min(num_thresholds, _summary.PR_CURVE_MAX_THRESHOLDS)
        value = _summary.pr_curve_value(tag, data, num_thresholds)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)

    def add_custom_scalars(self, layout: Mapping[str, Mapping[str, Sequence[Any]]]) -> None:
        """Lays out the custom-scalars dashboard: ``{category: {chart title: ["Multiline",
        [tags...]] or ["Margin", [value tag, lower tag, upper tag]]}}``."""
        value = _summary.custom_scalars_value(layout)
        self._get_file_writer().add_summary(_summary.summary([value]))

    def add_custom_scalars_multilinechart(self, tags: Sequence[str], category: str = "default",
                                          title: str = "untitled") -> None:
        """One custom-scalars chart plotting ``tags`` together."""
        self.add_custom_scalars({category: {title: ["Multiline", list(tags)]}})

    def add_custom_scalars_marginchart(self, tags: Sequence[str], category: str = "default",
                                       title: str = "untitled") -> None:
        """One custom-scalars chart of a value tag with a band between lower and upper tags."""
        if len(tags) != 3:
            raise AssertionError("len(tags) != 3")
        self.add_custom_scalars({category: {title: ["Margin", list(tags)]}})

    def add_hparams(self, hparam_dict: dict[str, Any], metric_dict: dict[str, Any],
                    hparam_domain_discrete: Optional[dict[str, list[Any]]] = None,
                    run_name: Optional[str] = None, global_step: Optional[int] = None) -> None:
        """Logs a run's hyperparameters (numbers, strings, bools, one-element tensors) and
        final metrics for TensorBoard's HPARAMS tab, in the sub-directory ``run_name``
        (default: the current time) of the log directory; ``hparam_domain_discrete`` lists the
        values a hyperparameter may take."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        values = _summary.hparams_values(hparam_dict, metric_dict, hparam_domain_discrete)
        run_name = run_name or str(time.time())
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name)
        with SummaryWriter(log_dir=logdir) as w_hp:
            hp_writer = w_hp._get_file_writer()
            for value in values:
                hp_writer.add_summary(_summary.summary([value]), global_step)
            for key, metric in metric_dict.items():
                w_hp.add_scalar(key, metric, global_step)

    def add_graph(self, model: Any, input_to_model: Any = None, verbose: bool = False,
                  use_strict_trace: bool = True) -> None:
        """Not supported: raises NotImplementedError (see the message)."""
        raise _not_supported(
            "add_graph", "TensorBoard's graph view reads a TensorFlow GraphDef protobuf, which "
            "PyTorch builds by converting a TorchScript trace of the model; ember records no "
            "TorchScript graph to convert, so no graph can be written. Scalars, histograms, "
            "images, figures, videos, audio, text, PR curves, custom-scalar layouts, embeddings "
            "and hparams are written.")

    def add_onnx_graph(self, prototxt: Any) -> None:
        """Not supported: raises NotImplementedError."""
        raise _not_supported("add_onnx_graph", "graphs are not written (see add_graph).")

    def add_embedding(self, mat: Any, metadata: Optional[Sequence[Any]] = None,
                      label_img: Any = None, global_step: Optional[int] = None,
                      tag: str = "default",
                      metadata_header: Optional[Sequence[Any]] = None) -> None:
        """Saves points for TensorBoard's embedding projector: ``mat`` (N x D), optional labels
        ``metadata`` (N values, or N rows with ``metadata_header``) and thumbnails
        ``label_img`` (N x C x H x W, square, values in [0, 1]), under
        ``<log_dir>/<global_step, 5 digits>/<tag>``, listed in ``projector_config.pbtxt``."""
        mat = _summary.make_np(mat)
        step = 0 if global_step is None else int(global_step)
        subdir = f"{step:05d}/{_embedding.encode_tag(tag)}"
        logdir = self._get_file_writer().get_logdir()
        save_path = os.path.join(logdir, subdir)
        if os.path.isdir(save_path):
            print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
        elif os.path.exists(save_path):
            raise NotADirectoryError(f"Path: `{save_path}` exists, but is a file. Cannot proceed.")
        else:
            os.makedirs(save_path)
        if metadata is not None:
            if mat.shape[0] != len(metadata):
                raise AssertionError("#labels should equal with #data points")
            _embedding.write_file(save_path, "metadata.tsv",
                                  _embedding.metadata_tsv(metadata, metadata_header))
        sprite_dim = None
        if label_img is not None:
            images = _summary.make_np(label_img)
            if mat.shape[0] != images.shape[0]:
                raise AssertionError("#images should equal with #data points")
            if images.ndim != 4 or images.shape[2] != images.shape[3]:
                raise AssertionError("Image should be square, see tensorflow/tensorboard#670")
            _embedding.write_file(save_path, "sprite.png", _embedding.sprite_png(images))
            sprite_dim = (images.shape[3], images.shape[2])
        if mat.ndim != 2:
            raise AssertionError("mat should be 2D, where mat.size(0) is the number of data points")
        _embedding.write_file(save_path, "tensors.tsv", _embedding.tensors_tsv(mat))
        # The config lists every embedding so far: rewritten whole (no append on every file system)
        self._embeddings.append(_embedding.embedding_entry(
            f"{tag}:{step:05d}", subdir, metadata is not None, sprite_dim))
        _embedding.write_file(logdir, _embedding.CONFIG_NAME, "".join(self._embeddings).encode())

    def add_video(self, tag: str, vid_tensor: Any, global_step: Optional[int] = None,
                  fps: float = 4, walltime: Optional[float] = None) -> None:
        """Logs videos (N x T x C x H x W, values in [0, 1] or uint8) as one animated GIF, the
        N videos tiled side by side, with a fixed 256-colour palette (PyTorch needs moviepy
        for this and quantizes per video)."""
        value = _summary.video_value(tag, vid_tensor, fps)
        self._get_file_writer().add_summary(_summary.summary([value]), global_step, walltime)


    def add_mesh(self, *args: Any, **kwargs: Any) -> None:
        """Not supported: raises NotImplementedError."""
        raise _not_supported("add_mesh", "the mesh plugin's tensors are not written.")


    def flush(self) -> None:
        """Writes every pending event to disk."""
        for writer in (self.all_writers or {}).values():
            writer.flush()

    def close(self) -> None:
        """Flushes and closes the event files; a later ``add_*`` call opens a new file."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _render_figure(figure: Any, close: bool) -> np.ndarray:
    """A matplotlib figure drawn by the Agg backend, as HxWx3 uint8 pixels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if close:  # first: a new canvas would detach the figure from pyplot's figure manager
        import matplotlib.pyplot as plt

        plt.close(figure)
    canvas = figure.canvas if hasattr(figure.canvas, "buffer_rgba") else FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba(), dtype=np.uint8)[:, :, :3].copy()
