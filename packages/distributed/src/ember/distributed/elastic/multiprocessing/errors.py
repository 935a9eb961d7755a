"""``@record`` for a launched worker's entry point (torch.distributed.elastic.multiprocessing.errors):
an exception escaping it is written, with its traceback, to the JSON file named by
TORCHELASTIC_ERROR_FILE (set by ``python -m ember.distributed.run``), whose agent then reports
the failing rank's own error; then it is raised again. Without the variable it only re-raises.

Example::

    from ember.distributed.elastic.multiprocessing.errors import record

    @record
    def main():
        ...

    if __name__ == "__main__":
        main()
"""

from __future__ import annotations

import functools
import json
import os
import signal
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

__all__ = ["ChildFailedError", "ErrorHandler", "ProcessFailure", "get_error_handler", "record"]

F = TypeVar("F", bound=Callable[..., Any])


class ErrorHandler:
    """Writes an exception to TORCHELASTIC_ERROR_FILE in torch's layout:
    {"message": {"message": "Type: text", "extraInfo": {"py_callstack": ..., "timestamp": ...}}}."""

    def _get_error_file_path(self) -> str | None:
        return os.environ.get("TORCHELASTIC_ERROR_FILE")

    def initialize(self) -> None:
        """Nothing to set up (torch enables faulthandler here)."""

    def record_exception(self, e: BaseException) -> None:
        path = self._get_error_file_path()
        if not path:
            return
        data = {"message": {
            "message": f"{type(e).__name__}: {e}",
            "extraInfo": {
                "py_callstack": "".join(traceback.format_exception(type(e), e,
                                                                   e.__traceback__)),
                "timestamp": str(int(time.time())),
            },
        }}
        try:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(data, f)
        except OSError:
            pass  # reporting must not hide the worker's own error


@dataclass
class ProcessFailure:
    """One failed worker process: its local rank, pid, exit code (negative: killed by that
    signal) and error file, with the message and traceback it recorded (empty when it wrote
    none) and when it failed.

    >>> ProcessFailure(local_rank=1, pid=42, exitcode=-9, error_file="").signal_name()
    'SIGKILL'
    """

    local_rank: int
    pid: int
    exitcode: int
    error_file: str
    message: str = ""
    traceback: str = ""
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.message or not self.error_file:
            return
        try:
            with open(self.error_file, encoding="utf-8") as f:
                data = json.load(f)
            msg = data["message"]
            self.message = str(msg.get("message", "")) if isinstance(msg, dict) else str(msg)
            extra = msg.get("extraInfo", {}) if isinstance(msg, dict) else {}
            self.traceback = str(extra.get("py_callstack", ""))
            self.timestamp = float(extra.get("timestamp", self.timestamp) or self.timestamp)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass

    def signal_name(self) -> str:
        """The name of the signal that killed the process ("<N/A>" when it exited)."""
        if self.exitcode >= 0:
            return "<N/A>"
        try:
            return signal.Signals(-self.exitcode).name
        except ValueError:
            return f"signal {-self.exitcode}"

    def timestamp_isoformat(self) -> str:
        """When it failed, as YYYY-MM-DD_HH:MM:SS (local time)."""
        return time.strftime("%Y-%m-%d_%H:%M:%S", time.localtime(self.timestamp))


class ChildFailedError(Exception):
    """Raised by the launcher (``ember.distributed.run.run``) when workers failed after the last
    allowed restart: ``name`` is the entry point, ``failures`` maps each failed global rank to
    its ``ProcessFailure``; the message is the report ``format_msg()`` makes.

    >>> e = ChildFailedError("train.py", {1: ProcessFailure(1, 42, 3, "")})
    >>> e.get_first_failure()[0], e.failures[1].exitcode
    (1, 3)
    """

    def __init__(self, name: str, failures: dict[int, ProcessFailure]) -> None:
        if not failures:
            raise ValueError("ChildFailedError: failures must name at least one failed rank")
        self.name = name
        self.failures = failures
        super().__init__(self.format_msg())

    def get_first_failure(self) -> tuple[int, ProcessFailure]:
        """(global rank, failure) of the earliest failure (the lowest rank on a tie)."""
        rank = min(self.failures, key=lambda r: (self.failures[r].timestamp, r))
        return rank, self.failures[rank]

    def format_msg(self, boarder_delim: str = "=", section_delim: str = "-") -> str:
        """The report: the root cause (first failure) and the other failures, each with its
        rank, exit code or signal and traceback."""
        width = 60
        root_rank, root = self.get_first_failure()
        parts = ["", boarder_delim * width, f"{self.name} FAILED", section_delim * width,
                 "Failures:"]
        others = [(r, f) for r, f in sorted(self.failures.items()) if r != root_rank]
        if not others:
            parts.append("  <NO_OTHER_FAILURES>")
        for i, (r, f) in enumerate(others, 1):
            parts += self._format_failure(i, r, f)
        parts += [section_delim * width, "Root Cause (first observed failure):"]
        parts += self._format_failure(0, root_rank, root)
        parts.append(boarder_delim * width)
        return "\n".join(parts)

    def _format_failure(self, idx: int, rank: int, failure: ProcessFailure) -> list[str]:
        sig = failure.signal_name()
        code = f"{failure.exitcode} (pid: {failure.pid})" + (f"  ({sig})" if sig != "<N/A>"
                                                              else "")
        tb = failure.traceback.rstrip("\n") or failure.message or \
            "(no error file: the worker did not raise a Python exception; see its output)"
        lines = [f"[{idx}]:", f"  time      : {failure.timestamp_isoformat()}",
                 f"  rank      : {rank} (local_rank: {failure.local_rank})",
                 f"  exitcode  : {code}",
                 f"  error_file: {failure.error_file or '<N/A>'}",
                 "  traceback : " + tb.replace("\n", "\n    ")]
        return lines


def get_error_handler() -> ErrorHandler:
    return ErrorHandler()


def record(fn: F | None = None, error_handler: ErrorHandler | None = None) -> Any:
    """Decorates a worker's entry point: an exception escaping it is recorded for the launcher
    and raised again; SystemExit(0) returns None. Usable as ``@record`` or ``@record()``."""
    handler = error_handler or get_error_handler()

    def wrap(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            handler.initialize()
            try:
                return f(*args, **kwargs)
            except SystemExit as se:
                if se.code == 0:
                    return None
                raise
            except Exception as e:
                handler.record_exception(e)
                raise

        return wrapper  # type: ignore[return-value]

    return wrap(fn) if fn is not None else wrap
