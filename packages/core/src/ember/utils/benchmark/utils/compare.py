"""``Compare``: lays out many ``Measurement``s as tables of median times, one table per
label, a row per sub-label (or statement) within each thread count, and a column per
description, in the format of PyTorch's ``torch.utils.benchmark.Compare``.

>>> from ember.utils.benchmark import Compare, Measurement, TaskSpec
>>> ms = [Measurement(1, [t * 1e-6], TaskSpec("f(x)", "pass", label="f", sub_label=s,
...                                            description=d))
...       for s, d, t in [("n=1", "old", 2.0), ("n=1", "new", 1.5), ("n=8", "old", 9.0),
...                       ("n=8", "new", 7.25)]]
>>> print(Compare(ms))
[---------- f ----------]
           |  old  |  new
1 threads: --------------
      n=1  |  2.0  |  1.5
      n=8  |  9.0  |  7.2
<BLANKLINE>
Times are in microseconds (us).
<BLANKLINE>
"""

from __future__ import annotations

import enum
import math
from typing import Any, Iterable

from ember.utils.benchmark.utils import common

__all__ = ["Colorize", "Compare"]

_BEST = "\033[92m"
_GOOD = "\033[34m"
_BAD = "\033[2m\033[91m"
_VERY_BAD = "\033[31m"
_BOLD = "\033[1m"
_END = "\033[0m"


class Colorize(enum.Enum):
    """How ``Compare`` colours its cells: not at all, against the best of each column (within
    a thread count), or against the best of each row."""

    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


def _shade(text: str, value: float, best: float) -> str:
    if value <= best * 1.01 or value <= best + 100e-9:
        return f"{_BEST}{_BOLD}{text}{_END}{_END}"
    if value <= best * 1.1:
        return f"{_GOOD}{_BOLD}{text}{_END}{_END}"
    if value >= best * 5:
        return f"{_VERY_BAD}{_BOLD}{text}{_END}{_END}"
    if value >= best * 2:
        return f"{_BAD}{text}{_END}{_END}"
    return text


def _leading_digits(x: float) -> int:
    return math.ceil(math.log10(x)) if x > 0 else 1


class _CellFormat:
    """How one column prints its numbers: a common width and number of decimals (fewer when
    trimming to the significant figures), with room for a variance flag when needed."""

    def __init__(self, cells: list[common.Measurement | None], scale: float, trim: bool,
                 flag_warnings: bool) -> None:
        present = [m for m in cells if m is not None]
        self.trim = trim
        self.flag = flag_warnings and any(m.has_warnings for m in present)
        leading = [_leading_digits(m.median / scale) for m in present]
        int_digits = max(leading) if leading else 1
        if trim and present:
            decimals = min(max(m.significant_figures - d, 0) for m, d in zip(present, leading))
        else:
            decimals = 1
        self.width = int_digits + decimals + (1 if decimals else 0)
        self.decimals = decimals

    def render(self, m: common.Measurement | None, scale: float) -> str:
        if m is None:
            return " " * len(self._text(1.0, None))
        value = m.median / scale
        if self.trim:
            value = common.trim_sigfig(value, m.significant_figures)
        spread = m.iqr / m.median if (m.has_warnings and m.median > 0) else None
        return self._text(value, spread)

    def _text(self, value: float, spread: float | None) -> str:
        number = f"{value:>{self.width}.{self.decimals}f}"
        if not self.flag:
            return number
        note = f" (! {spread * 100:.0f}%)" if spread is not None else ""
        return number + f"{note:>7}"


class _Table:
    """One label's measurements, laid out and rendered."""

    def __init__(self, results: list[common.Measurement], colorize: Colorize, trim: bool,
                 flag_warnings: bool) -> None:
        self.label = results[0].task_spec.label
        self.results = results
        self.colorize = colorize
        self.flag_warnings = flag_warnings
        self.unit, self.scale = common.select_unit(min(m.median for m in results))

        def row_key(m: common.Measurement) -> tuple[int, str, str]:
            return (m.task_spec.num_threads, m.env or "", m.as_row_name)

        rows = common.ordered_unique(row_key(m) for m in results)
        rows.sort(key=lambda k: k[:2])  # by thread count and env; otherwise as first seen
        cols = common.ordered_unique(m.task_spec.description for m in results)
        self.row_keys, self.col_keys = rows, cols
        r_at = {k: i for i, k in enumerate(rows)}
        c_at = {k: j for j, k in enumerate(cols)}
        self.grid: list[list[common.Measurement | None]] = [[None] * len(cols) for _ in rows]
        for m in results:
            self.grid[r_at[row_key(m)]][c_at[m.task_spec.description]] = m
        # consecutive rows with the same thread count form a group (headed "N threads:")
        self.group_of: list[int] = []
        for i, key in enumerate(rows):
            new = i == 0 or key[0] != rows[i - 1][0]
            self.group_of.append((self.group_of[-1] + 1 if i else 0) if new else
                                 self.group_of[-1])
        self.formats = [
            _CellFormat([row[j] for row in self.grid], self.scale, trim, flag_warnings)
            for j in range(len(cols))
        ]

    def _row_names(self) -> list[str]:
        envs = common.ordered_unique(k[1] for k in self.row_keys)
        show_env = len(envs) > 1
        env_width = max(len(e) for e in envs) if show_env else 0
        names = []
        for i, (threads, env, name) in enumerate(self.row_keys):
            new_group = i == 0 or self.group_of[i] != self.group_of[i - 1]
            env_changed = new_group or env != self.row_keys[i - 1][1]
            tag = f"({env})" if show_env and env_changed and env else ""
            names.append("  " + tag.ljust(env_width + 4) + name)
        return names

    def _best(self, i: int, j: int) -> float | None:
        if self.colorize == Colorize.ROWWISE:
            return min(m.median for m in self.grid[i] if m is not None)
        group = self.group_of[i]
        values = [row[j].median for r, row in enumerate(self.grid)
                  if self.group_of[r] == group and row[j] is not None]
        return min(values) if values else None

    def render(self) -> str:
        header = ["", *["" if c is None else str(c) for c in self.col_keys]]
        names = self._row_names()
        body = [[names[i], *(fmt.render(m, self.scale) for fmt, m in zip(self.formats, row))]
                for i, row in enumerate(self.grid)]
        widths = [max(len(r[c]) for r in [header, *body]) for c in range(len(header))]
        lines = ["  |  ".join(h.center(w) for h, w in zip(header, widths))]
        total = len(lines[0])
        for i, cells in enumerate(body):
            if i == 0 or self.group_of[i] != self.group_of[i - 1]:
                lines.append(f"{self.row_keys[i][0]} threads: ".ljust(total, "-"))
            out = [cells[0].ljust(widths[0])]
            for j, (text, width) in enumerate(zip(cells[1:], widths[1:])):
                text = text.center(width)
                m = self.grid[i][j]
                if self.colorize != Colorize.NONE and m is not None:
                    best = self._best(i, j)
                    if best is not None:
                        text = _shade(text, m.median, best)
                out.append(text)
            lines.append("  |  ".join(out))
        title = f" {self.label or ''} ".center(total - 2, "-")
        note = ""
        if self.flag_warnings and any(m.has_warnings for m in self.results):
            note = ("(! XX%) Measurement has high variance, where XX is the IQR / median * "
                    "100.\n")
        return (f"[{title}]\n" + "\n".join(lines) + "\n\n"
                f"Times are in {common.unit_to_english(self.unit)}s ({self.unit}).\n" + note)


class Compare:
    """A printable comparison of measurements (``print(compare)`` or ``compare.print()``).

    Measurements of the same task are merged first. ``trim_significant_figures()`` rounds
    each time to the digits its spread supports; ``colorize(rowwise=False)`` colours cells
    against the best one of their column (or row); ``highlight_warnings()`` flags
    high-variance cells with "(! XX%)". Each returns None and changes the next rendering.

    >>> from ember.utils.benchmark import Compare, Timer
    >>> ms = [Timer("x * 2", globals={"x": n}, label="mul", sub_label=str(n)).timeit(10)
    ...       for n in (1, 2)]
    >>> c = Compare(ms)
    >>> c.trim_significant_figures()
    >>> str(c).splitlines()[0].startswith("[")
    True
    """

    def __init__(self, results: Iterable[common.Measurement]) -> None:
        self._results: list[common.Measurement] = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def extend_results(self, results: Iterable[common.Measurement]) -> None:
        """Adds measurements to the comparison."""
        results = list(results)
        for r in results:
            if not isinstance(r, common.Measurement):
                raise ValueError(f"Compare: expected Measurement objects, got "
                                 f"{type(r).__name__}")
        self._results.extend(results)

    def trim_significant_figures(self) -> None:
        """Shows each time with only its significant figures."""
        self._trim_significant_figures = True

    def colorize(self, rowwise: bool = False) -> None:
        """Colours cells (ANSI) against the best of their column, or row with rowwise=True."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self) -> None:
        """Flags cells whose IQR is a large part of their median."""
        self._highlight_warnings = True

    def print(self) -> None:
        """Prints the tables."""
        print(str(self))

    def __str__(self) -> str:
        return "\n".join(self._render())

    def _render(self) -> list[str]:
        by_label: dict[Any, list[common.Measurement]] = {}
        for m in common.Measurement.merge(self._results):
            by_label.setdefault(m.task_spec.label, []).append(m)
        return [
            _Table(group, self._colorize, self._trim_significant_figures,
                   self._highlight_warnings).render()
            for group in by_label.values()
        ]
