"""The records a benchmark produces: ``TaskSpec`` (what was timed) and ``Measurement`` (the
times of one ``Timer`` run, with their statistics), plus the unit helpers ``Compare`` uses.

>>> from ember.utils.benchmark.utils.common import Measurement, TaskSpec
>>> m = Measurement(10, [1e-3, 1.1e-3, 1e-3, 1.2e-3], TaskSpec("x + 1", "pass"))
>>> round(m.median * 1e6, 1), m.number_per_run, len(m.times)
(105.0, 10, 4)
"""

from __future__ import annotations

import contextlib
import math
import textwrap
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, TypeVar

__all__ = [
    "TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig",
    "ordered_unique", "set_torch_threads",
]

_T = TypeVar("_T")

# Spread (IQR / median) above which a measurement carries a warning, and above which the
# warning says the environment interfered.
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25
# Bounds of Measurement.significant_figures.
_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # 25 ns: finer than that, a timer is not trusted

_TASK_FIELDS = ("stmt", "setup", "global_setup", "label", "sub_label", "description", "env",
                "num_threads")


@dataclass(frozen=True)
class TaskSpec:
    """What a ``Timer`` times: the statement, its setup and the labels ``Compare`` groups by.

    >>> from ember.utils.benchmark.utils.common import TaskSpec
    >>> TaskSpec("f(x)", "pass", label="f", sub_label="n=8").title
    'f: n=8'
    """

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """The label (or the statement, when it fits on a line) with the sub-label."""
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        if "\n" not in self.stmt:
            return self.stmt + (f": {self.sub_label}" if self.sub_label else "")
        sub = f" ({self.sub_label})" if self.sub_label else ""
        return f"stmt:{sub}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self) -> str:
        """The setup as ``Measurement``'s repr shows it ("" when there is none)."""
        if not self.setup or self.setup == "pass":
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """The header of a measurement's repr: title, description and setup."""
        parts = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{p}\n" if "\n" in p else p for p in parts if p)


@dataclass
class Measurement:
    """The times of one ``Timer`` run: ``raw_times[i]`` is the time of a block of
    ``number_per_run`` executions of the statement. Statistics are per execution.

    >>> from ember.utils.benchmark.utils.common import Measurement, TaskSpec
    >>> m = Measurement(2, [2.0, 4.0, 6.0, 8.0], TaskSpec("x", "pass"))
    >>> m.times, m.median, m.mean, m.iqr
    ([1.0, 2.0, 3.0, 4.0], 2.5, 2.5, 1.5)
    """

    number_per_run: int
    raw_times: list[float]
    task_spec: TaskSpec
    metadata: dict[Any, Any] | None = None
    _stats: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.task_spec, TaskSpec):
            raise TypeError(f"Measurement: task_spec must be a TaskSpec, got "
                            f"{type(self.task_spec).__name__}")
        if int(self.number_per_run) < 1:
            raise ValueError(f"Measurement: number_per_run must be >= 1, got "
                             f"{self.number_per_run}")
        self.raw_times = [float(t) for t in self.raw_times]
        if not self.raw_times:
            raise ValueError("Measurement: raw_times is empty (nothing was measured)")

    # The task's fields read through the measurement, as in PyTorch (m.label, m.stmt, ...).
    def __getattr__(self, name: str) -> Any:
        if name in _TASK_FIELDS or name in ("title", "setup_str", "summarize"):
            spec = self.__dict__.get("task_spec")
            if spec is not None:
                return getattr(spec, name)
        raise AttributeError(f"'Measurement' object has no attribute {name!r}")

    # ------------------------------------------------------------------ statistics
    def _lazy(self) -> dict[str, Any]:
        if self._stats is None:
            times = sorted(self.times)
            median = _quantile(times, 0.5)
            p25, p75 = _quantile(times, 0.25), _quantile(times, 0.75)
            stats: dict[str, Any] = {
                "sorted": times, "median": median, "mean": sum(times) / len(times),
                "p25": p25, "p75": p75, "warnings": [],
            }
            rel = (p75 - p25) / median if median > 0 else 0.0
            if rel >= _IQR_WARN_THRESHOLD:
                why = ("This suggests significant environmental influence."
                       if rel >= _IQR_GROSS_WARN_THRESHOLD
                       else "This could indicate system fluctuation.")
                stats["warnings"].append(
                    f"  WARNING: Interquartile range is {rel * 100:.1f}% of the median "
                    f"measurement.\n           {why}")
            self._stats = stats
        return self._stats

    @property
    def times(self) -> list[float]:
        """Seconds per execution of the statement, one per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        return float(self._lazy()["median"])

    @property
    def mean(self) -> float:
        return float(self._lazy()["mean"])

    @property
    def iqr(self) -> float:
        """Interquartile range (75th minus 25th percentile, linear interpolation)."""
        s = self._lazy()
        return float(s["p75"] - s["p25"])

    @property
    def significant_figures(self) -> int:
        """A rough count (1 to 4) of the median's digits that the spread of the middle half
        of the times supports: ``floor(log10(median / ci))``, where ``ci`` is a 90% confidence
        half-width of the mean of the interquartile times (at least 25 ns). ``Compare`` uses
        it to trim digits."""
        s = self._lazy()
        times = s["sorted"]
        n = len(times)
        middle = times[n // 4: math.ceil(3 * n / 4)] or times
        mu = sum(middle) / len(middle)
        std = math.sqrt(sum((t - mu) ** 2 for t in middle) / len(middle))
        ci = max(1.645 * std / math.sqrt(len(middle)), _MIN_CONFIDENCE_INTERVAL)
        if s["median"] <= 0:
            return 1
        digits = math.floor(math.log10(s["median"] / ci))
        return min(max(digits, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self) -> bool:
        """Whether the spread is high enough (IQR >= 10% of the median) to warn about."""
        return bool(self._lazy()["warnings"])

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        """Whether IQR / median is below ``threshold``."""
        median = self.median
        return median > 0 and self.iqr / median < threshold

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def env(self) -> str | None:
        """The environment label given to the Timer (None when none was)."""
        return self.task_spec.env

    @property
    def as_row_name(self) -> str:
        """The row's name in ``Compare``: the sub-label, else the statement."""
        return self.task_spec.sub_label or self.task_spec.stmt or "[Unknown]"

    def __repr__(self) -> str:
        s = self._lazy()
        n = len(s["sorted"])
        unit, scale = select_unit(s["median"])
        lines = [f"<{type(self).__module__}.{type(self).__name__} object at {id(self):#x}>",
                 self.task_spec.summarize()]
        if n == 1:
            lines.append(f"  {s['median'] / scale:.2f} {unit}")
            count = f"1 measurement, {self.number_per_run} runs "
        else:
            lines.append(f"  Median: {s['median'] / scale:.2f} {unit}")
            if n >= 4:
                lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} "
                             f"({s['p25'] / scale:.2f} to {s['p75'] / scale:.2f})")
            count = f"{n} measurements, {self.number_per_run} runs per measurement"
        threads = self.task_spec.num_threads
        lines.append(f"  {count}, {threads} thread{'s' if threads != 1 else ''}")
        lines.extend(s["warnings"])
        return "\n".join(lines)

    @staticmethod
    def merge(measurements: Iterable[Measurement]) -> list[Measurement]:
        """Pools the times of measurements of the same task into one measurement per task
        (``number_per_run`` 1, times in order; metadata dropped), in first-seen order.

        >>> from ember.utils.benchmark.utils.common import Measurement, TaskSpec
        >>> t = TaskSpec("x", "pass")
        >>> [m.times for m in Measurement.merge([Measurement(2, [2.0], t),
        ...                                      Measurement(1, [3.0], t)])]
        [[1.0, 3.0]]
        """
        groups: dict[TaskSpec, list[float]] = {}
        for m in measurements:
            if not isinstance(m, Measurement):
                raise TypeError(f"Measurement.merge: expected Measurements, got "
                                f"{type(m).__name__}")
            groups.setdefault(m.task_spec, []).extend(m.times)
        return [Measurement(1, times, spec) for spec, times in groups.items()]


def _quantile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolating linearly between neighbours."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def select_unit(t: float) -> tuple[str, float]:
    """The unit (``"ns"``, ``"us"``, ``"ms"`` or ``"s"``) and its size in seconds for showing
    ``t`` seconds: the one in which ``t`` reads as 1 to 999 (as in PyTorch, seconds outside
    1 ns .. 1000 s; ns for a zero or negative time).

    >>> from ember.utils.benchmark.utils.common import select_unit
    >>> select_unit(5e-5), select_unit(3.0)
    (('us', 1e-06), ('s', 1))
    """
    if t <= 0:
        return "ns", 1e-9
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(math.log10(t) // 3), "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]


def unit_to_english(u: str) -> str:
    """``"us"`` -> ``"microsecond"`` (and the others)."""
    names = {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}
    if u not in names:
        raise ValueError(f"unit_to_english: unknown unit {u!r}; expected one of {list(names)}")
    return names[u]


def trim_sigfig(x: float, n: int) -> float:
    """``x`` rounded to ``n`` significant figures.

    >>> from ember.utils.benchmark.utils.common import trim_sigfig
    >>> trim_sigfig(123.456, 2), trim_sigfig(0.012345, 3)
    (120.0, 0.0123)
    """
    if n < 1:
        raise ValueError(f"trim_sigfig: n must be >= 1, got {n}")
    if x == 0 or not math.isfinite(x):
        return float(x)
    magnitude = math.floor(math.log10(abs(x)))
    return float(round(x, n - 1 - magnitude))


def ordered_unique(elements: Iterable[_T]) -> list[_T]:
    """The distinct elements in first-seen order."""
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n: int) -> Iterator[None]:
    """Runs the block with ``ember.set_num_threads(n)``, restoring the previous count."""
    import ember

    prior = ember.get_num_threads()
    ember.set_num_threads(n)
    try:
        yield
    finally:
        ember.set_num_threads(prior)
