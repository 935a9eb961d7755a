"""``Timer``: times a Python statement (as ``timeit`` does) and returns a ``Measurement``,
with the thread count fixed for the run and CUDA work synchronized before each clock read.

>>> import ember
>>> from ember.utils.benchmark import Timer
>>> t = Timer("x + 1", globals={"x": ember.ones(8)}, label="add", sub_label="n=8")
>>> m = t.timeit(100)
>>> m.number_per_run, m.median > 0
(100, True)
"""

from __future__ import annotations

import enum
import math
import time
import timeit as _timeit
from typing import Any, Callable

from ember.utils.benchmark.utils import common

__all__ = ["Timer", "Language", "timer"]


class Language(enum.Enum):
    """The language of a ``Timer``'s statement; ember times Python statements."""

    PYTHON = 0
    CPP = 1


def timer() -> float:
    """``time.perf_counter()``: Timer's default clock (``timer_synchronized`` is used instead
    when CUDA is available, so that the GPU's queued work is counted)."""
    return time.perf_counter()


def _timer_synchronized() -> float:
    import ember

    ember.cuda.synchronize()
    return time.perf_counter()


# a block this long (seconds) or more is timed with negligible loop overhead
_MAX_BLOCK_SIZE = 10**9


class Timer:
    """Times ``stmt`` after running ``setup`` once per block, like ``timeit.Timer``, and
    reports the times as a ``Measurement`` that ``Compare`` can tabulate.

    ``globals`` is the namespace the statements run in (``torch`` and ``ember`` name ember
    unless given). ``label``, ``sub_label``, ``description`` and ``env`` label the result:
    ``Compare`` makes a table per label, a row per sub-label (or statement), and a column per
    description. While timing, ``ember.set_num_threads(num_threads)`` is in force (the prior
    count is restored afterwards). With CUDA available, the default ``timer`` synchronizes the
    device before reading the clock.

    >>> from ember.utils.benchmark import Timer
    >>> m = Timer("sum(range(10))").blocked_autorange(min_run_time=0.01)
    >>> len(m.times) >= 1 and m.number_per_run >= 1
    True
    """

    _timer_cls = _timeit.Timer

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer: Callable[[], float] = timer, globals: dict[str, Any] | None = None,
                 label: str | None = None, sub_label: str | None = None,
                 description: str | None = None, env: str | None = None,
                 num_threads: int = 1, language: Language | str = Language.PYTHON) -> None:
        import ember

        if not isinstance(stmt, str):
            raise ValueError(f"Timer: stmt must be a str (Python source), got "
                             f"{type(stmt).__name__}; wrap a callable as "
                             "Timer('f()', globals={'f': f})")
        if not isinstance(setup, str):
            raise ValueError(f"Timer: setup must be a str, got {type(setup).__name__}")
        if language in (Language.CPP, "cpp", "c++"):
            raise ValueError("Timer: language='cpp' is not supported by ember; time a Python "
                             "statement (Language.PYTHON)")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Timer: invalid language {language!r}; expected "
                             "Language.PYTHON, 'py' or 'python'")
        if global_setup:
            raise ValueError(f"Timer: global_setup is C++ only, got {global_setup!r}; move "
                             "this code to `setup`")
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"Timer: num_threads must be an int >= 1, got {num_threads!r}")
        if globals is not None and not isinstance(globals, dict):
            raise TypeError(f"Timer: globals must be a dict, got {type(globals).__name__}")

        self._globals = dict(globals or {})
        self._globals.setdefault("torch", ember)
        self._globals.setdefault("ember", ember)
        stmt_src = _dedent(stmt) or "pass"
        setup_src = _dedent(setup) or "pass"
        clock = timer
        if clock is _default_timer() and ember.cuda.is_available():
            clock = _timer_synchronized
        self._clock = clock
        self._timer = self._timer_cls(stmt=stmt_src, setup=setup_src, timer=clock,
                                      globals=self._globals)
        self._task_spec = common.TaskSpec(
            stmt=stmt_src, setup=setup_src, global_setup="", label=label,
            sub_label=sub_label, description=description, env=env, num_threads=num_threads)
        self._language = Language.PYTHON

    # ------------------------------------------------------------------ helpers
    def _timeit(self, number: int) -> float:
        return float(self._timer.timeit(number))

    def _threads(self) -> Any:
        return common.set_torch_threads(self._task_spec.num_threads)

    def _measurement(self, number: int, times: list[float]) -> common.Measurement:
        return common.Measurement(number_per_run=number, raw_times=times,
                                  task_spec=self._task_spec)

    def _estimate_block_size(self, min_run_time: float) -> int:
        """Executions per block: enough that the loop's own overhead is small and a block
        takes at least ``min_run_time / 1000``."""
        overheads = sorted(self._timer.timeit(0) for _ in range(5))
        overhead = overheads[2]
        number = 1
        while True:
            t = self._timeit(number)
            if t >= min_run_time / 1000 and overhead <= 1e-4 * t:
                return number
            if t > min_run_time or number * 10 > _MAX_BLOCK_SIZE:
                return number
            number *= 10

    def _loop(self, number: int, min_run_time: float, max_run_time: float | None,
              stop: Callable[[list[float]], bool],
              callback: Callable[[int, float], Any] | None) -> list[float]:
        times: list[float] = []
        total = 0.0
        while True:
            t = self._timeit(number)
            times.append(t)
            total += t
            if callback is not None:
                callback(number, t)
            if total >= min_run_time and stop(times):
                return times
            if max_run_time is not None and total >= max_run_time:
                return times

    # ------------------------------------------------------------------ public API
    def timeit(self, number: int = 1000000) -> common.Measurement:
        """Runs ``stmt`` ``number`` times (after a short warm-up) as one block.

        >>> from ember.utils.benchmark import Timer
        >>> Timer("1 + 1").timeit(1000).number_per_run
        1000
        """
        number = _check_count(number, "timeit", "number")
        with self._threads():
            self._timeit(max(number // 100, 2))  # warm-up
            return self._measurement(number, [self._timeit(number)])

    def autorange(self, callback: Callable[[int, float], Any] | None = None
                  ) -> common.Measurement:
        """One block whose size is the first of 1, 2, 5, 10, 20, 50, ... executions that
        takes at least 0.2 s, as ``timeit.Timer.autorange`` (``callback(number, seconds)``
        is called after each trial). PyTorch leaves this unimplemented; ember returns the
        final block as a Measurement."""
        with self._threads():
            i = 1
            while True:
                for scale in (1, 2, 5):
                    number = scale * i
                    t = self._timeit(number)
                    if callback is not None:
                        callback(number, t)
                    if t >= 0.2 or number >= _MAX_BLOCK_SIZE:
                        return self._measurement(number, [t])
                i *= 10

    def repeat(self, repeat: int = -1, number: int = -1) -> common.Measurement:
        """``repeat`` blocks (default 5) of ``number`` executions each (default: the block
        size ``autorange`` picks), as ``timeit.Timer.repeat``, returned as one Measurement.
        PyTorch leaves this unimplemented (use ``blocked_autorange``)."""
        repeat = 5 if repeat == -1 else _check_count(repeat, "repeat", "repeat")
        if number == -1:
            number = self.autorange().number_per_run
        number = _check_count(number, "repeat", "number")
        with self._threads():
            return self._measurement(number, [self._timeit(number) for _ in range(repeat)])

    def blocked_autorange(self, callback: Callable[[int, float], Any] | None = None,
                          min_run_time: float = 0.2) -> common.Measurement:
        """Blocks of a fixed size (chosen so the loop overhead is negligible) until at least
        ``min_run_time`` seconds have been spent; one time per block. ``callback(number,
        seconds)`` is called after each block.

        >>> from ember.utils.benchmark import Timer
        >>> m = Timer("[i for i in range(8)]").blocked_autorange(min_run_time=0.01)
        >>> m.median > 0
        True
        """
        min_run_time = _check_time(min_run_time, "blocked_autorange", "min_run_time")
        with self._threads():
            number = self._estimate_block_size(min_run_time)
            times = self._loop(number, min_run_time, None, lambda _: True, callback)
        return self._measurement(number, times)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01,
                           max_run_time: float = 10.0,
                           callback: Callable[[int, float], Any] | None = None
                           ) -> common.Measurement:
        """Blocks until the times are stable (more than 3 blocks with IQR / median below
        ``threshold``) after at least ``min_run_time`` seconds, or ``max_run_time`` seconds
        have been spent.

        >>> from ember.utils.benchmark import Timer
        >>> m = Timer("1 + 1").adaptive_autorange(max_run_time=0.5)
        >>> len(m.times) >= 1
        True
        """
        if not isinstance(threshold, (int, float)) or not threshold > 0:
            raise ValueError(f"Timer.adaptive_autorange: threshold must be > 0, got "
                             f"{threshold!r}")
        min_run_time = _check_time(min_run_time, "adaptive_autorange", "min_run_time")
        max_run_time = _check_time(max_run_time, "adaptive_autorange", "max_run_time")
        if max_run_time < min_run_time:
            raise ValueError(f"Timer.adaptive_autorange: max_run_time ({max_run_time}) must be "
                             f">= min_run_time ({min_run_time})")

        def stable(times: list[float]) -> bool:
            return len(times) > 3 and self._measurement(number, times).meets_confidence(
                threshold)

        with self._threads():
            number = self._estimate_block_size(min_run_time=0.05)
            times = self._loop(number, min_run_time, max_run_time, stable, callback)
        return self._measurement(number, times)


def _default_timer() -> Callable[[], float]:
    # the module's clock (Timer's `timer` parameter shadows the name inside __init__)
    return timer


def _dedent(src: str) -> str:
    import textwrap

    return textwrap.dedent(src).strip("\n")


def _check_count(value: Any, op: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Timer.{op}: {name} must be an int >= 1, got {value!r}")
    return value


def _check_time(value: Any, op: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise ValueError(f"Timer.{op}: {name} must be a positive number of seconds, got "
                         f"{value!r}")
    return float(value)
