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
import time
import traceback
from typing import Any, Callable, TypeVar

__all__ = ["ErrorHandler", "get_error_handler", "record"]

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
