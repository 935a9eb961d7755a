"""Benchmark harness: a registry of cases and an interleaved ember-vs-torch timer.

A case is a setup function that receives a `Framework` (ember or torch) and returns what to
time: a `Stmt` (a statement string plus the names it uses, timed by `timeit` with no per-call
Python function overhead) or a plain callable. Register it with the `case` decorator:

    @case("tiny/add", unit="us", target=0.8, doc="a + b on 8 float32")
    def _(fw):
        a, b = fw.randn(8), fw.randn(8)
        return Stmt("a + b", a=a, b=b)

The same setup serves both frameworks (their APIs match); a case whose torch code differs adds
an override:

    @my_case.override("torch")
    def _(fw): ...

Setups and the first call may raise AttributeError / NotImplementedError for ops the framework
lacks: the case is then reported as "missing" for that framework instead of failing the run.
"""

from __future__ import annotations

import gc
import statistics
import time
import timeit
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

FRAMEWORKS = ("ember", "torch")

# Per-call time units: name -> seconds per unit.
UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
UNIT_LABELS = {"ns": "ns", "us": "µs", "ms": "ms", "s": "s"}


class Stmt:
    """A statement timed in a loop by `timeit`, with `names` as its globals."""

    def __init__(self, stmt: str, **names: Any) -> None:
        self.stmt = stmt
        self.names = names

    def __repr__(self) -> str:
        return f"Stmt({self.stmt!r})"


class SelfTimed:
    """A callable that runs one measurement itself and returns its duration in seconds.

    For things that cannot be timed in-process, e.g. `import` in a fresh interpreter.
    """

    def __init__(self, fn: Callable[[], float]) -> None:
        self.fn = fn


Setup = Callable[["Framework"], Any]


@dataclass
class Case:
    name: str
    setup: Setup
    unit: str = "us"
    doc: str = ""
    # The goal: ember time / torch time <= target (a ratio), or ember time <= target_abs (s).
    target: float | None = None
    target_abs: float | None = None
    # Work per call, for throughput columns (GB/s from bytes, GFLOP/s from flops).
    bytes: int | None = None
    flops: int | None = None
    # Compare ember's and torch's results of one call (relative tolerance).
    check: bool = True
    rtol: float = 1e-4
    atol: float = 1e-5
    # Override the run's repeat count (full, quick), e.g. for slow subprocess measurements.
    repeats: tuple[int, int] | None = None
    overrides: dict[str, Setup] = field(default_factory=dict)

    def setup_for(self, framework: str) -> Setup:
        return self.overrides.get(framework, self.setup)

    def override(self, framework: str) -> Callable[[Setup], Setup]:
        """Decorator: a different setup for one framework."""
        if framework not in FRAMEWORKS:
            raise ValueError(f"unknown framework {framework!r}; expected one of {FRAMEWORKS}")

        def deco(fn: Setup) -> Setup:
            self.overrides[framework] = fn
            return fn

        return deco


REGISTRY: dict[str, Case] = {}


def case(name: str, **kwargs: Any) -> Callable[[Setup], Case]:
    """Decorator registering `setup(fw)` as the benchmark case `name` (see `Case` fields)."""

    def deco(setup: Setup) -> Case:
        if name in REGISTRY:
            raise ValueError(f"benchmark case {name!r} is registered twice")
        if kwargs.get("unit", "us") not in UNITS:
            raise ValueError(f"case {name!r}: unit must be one of {sorted(UNITS)}")
        c = Case(name=name, setup=setup, doc=kwargs.pop("doc", setup.__doc__ or ""), **kwargs)
        REGISTRY[name] = c
        return c

    return deco


class Framework:
    """What a setup receives: the framework module plus helpers that make identical inputs."""

    def __init__(self, name: str, mod: Any, data_cache: dict | None = None) -> None:
        self.name = name
        self.mod = mod
        # Random inputs shared by the frameworks of one case (generated once; cleared per case).
        self.data_cache = {} if data_cache is None else data_cache

    def __getattr__(self, attr: str) -> Any:
        # fw.relu, fw.matmul, ...: the framework's own function (AttributeError when missing).
        return getattr(self.mod, attr)

    def from_numpy(self, arr: np.ndarray) -> Any:
        """A tensor in the framework's own memory (a copy) with arr's values."""
        return self.mod.tensor(np.ascontiguousarray(arr))

    def randn(self, *shape: int, seed: int = 0) -> Any:
        """float32 normal samples; the same values for both frameworks (same seed)."""
        key = ("randn", shape, seed)
        if key not in self.data_cache:
            rng = np.random.default_rng(seed)
            self.data_cache[key] = rng.standard_normal(shape, dtype=np.float32)
        return self.from_numpy(self.data_cache[key])

    def empty(self, *shape: int) -> Any:
        return self.mod.empty(*shape)

    def to_numpy(self, x: Any) -> np.ndarray:
        if hasattr(x, "detach"):  # torch
            x = x.detach()
        if hasattr(x, "numpy"):
            return np.asarray(x.numpy())
        return np.asarray(x)


@dataclass
class Side:
    """One framework's outcome for one case."""

    status: str = "ok"  # ok | missing | error | n/a
    message: str = ""
    times: list[float] = field(default_factory=list)  # seconds per call, one per repeat
    number: int = 0  # calls per timed batch

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.status == "ok" and self.times else None


@dataclass
class Result:
    case: Case
    sides: dict[str, Side]
    check: str = ""  # "", "ok", or a mismatch description

    @property
    def ratio(self) -> float | None:
        e, t = self.sides["ember"].median, self.sides["torch"].median
        if e is None or t is None or t <= 0:
            return None
        return e / t

    @property
    def met(self) -> bool | None:
        c = self.case
        e = self.sides["ember"].median
        if c.target_abs is not None:
            return None if e is None else e <= c.target_abs
        if c.target is not None:
            r = self.ratio
            return None if r is None else r <= c.target
        return None

    def throughput(self, framework: str) -> tuple[float, str] | None:
        m = self.sides[framework].median
        if not m:
            return None
        if self.case.flops:
            return self.case.flops / m / 1e9, "GFLOP/s"
        if self.case.bytes:
            return self.case.bytes / m / 1e9, "GB/s"
        return None


class _Timed:
    """A prepared measurement for one framework: `run(number)` -> seconds for the batch."""

    def __init__(self, obj: Any) -> None:
        self.self_timed = isinstance(obj, SelfTimed)
        if self.self_timed:
            self._fn = obj.fn
            self.once = obj.fn
        elif isinstance(obj, Stmt):
            names = dict(obj.names)
            self._timer = timeit.Timer(obj.stmt, globals=names)
            try:  # an expression: its value is the result that gets checked
                code = compile(obj.stmt, "<bench>", "eval")
                self.once = lambda: eval(code, names)
            except SyntaxError:  # a statement (`c += b`): nothing to check
                code = compile(obj.stmt, "<bench>", "exec")
                self.once = lambda: exec(code, names)
        elif callable(obj):
            self._timer = timeit.Timer(obj)
            self.once = obj
        else:
            raise TypeError(f"a case setup must return a Stmt, SelfTimed or callable, got {obj!r}")

    def run(self, number: int) -> float:
        if self.self_timed:
            return sum(self._fn() for _ in range(number))
        return self._timer.timeit(number)  # gc is disabled while timing


MISSING_ERRORS = (AttributeError, NotImplementedError)


def _describe(exc: BaseException) -> str:
    msg = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {msg}"[:160]


def _calibrate(timed: _Timed, batch_s: float) -> int:
    """Calls per batch so one batch takes about batch_s (at least one call)."""
    if timed.self_timed:
        return 1
    number = 1
    while True:
        t = timed.run(number)
        if t >= batch_s or number >= 1 << 24:
            return number
        # Aim a little past the target from the measured rate; at most 10x per step.
        number = max(number + 1, min(number * 10, int(number * batch_s * 1.2 / max(t, 1e-9))))


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> str:
    if a.shape != b.shape:
        return f"shape {a.shape} vs torch {b.shape}"
    if a.dtype.kind in "biu" or b.dtype.kind in "biu":
        return "" if np.array_equal(a, b) else "values differ"
    if np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
        return ""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    err = np.max(np.abs(a64 - b64) / (np.abs(b64) + atol)) if a64.size else 0.0
    return f"values differ (max rel err {err:.2e})"


def run_case(
    c: Case,
    frameworks: dict[str, Framework | None],
    *,
    repeats: int,
    batch_s: float,
    quick: bool,
    pause_s: float = 0.015,
) -> Result:
    """Times c in every available framework, interleaving the repeats."""
    if c.repeats is not None:
        repeats = c.repeats[1 if quick else 0]
    sides: dict[str, Side] = {}
    timed: dict[str, _Timed] = {}
    outputs: dict[str, Any] = {}
    for name in FRAMEWORKS:
        fw = frameworks.get(name)
        if fw is None:
            sides[name] = Side(status="n/a", message=f"{name} is not importable")
            continue
        try:
            t = _Timed(c.setup_for(name)(fw))
            outputs[name] = t.once()  # warm-up; also the result that is checked
            sides[name] = Side()
            timed[name] = t
        except MISSING_ERRORS as e:
            sides[name] = Side(status="missing", message=_describe(e))
        except Exception as e:  # noqa: BLE001  (a broken case must not stop the run)
            sides[name] = Side(status="error", message=_describe(e))

    check = ""
    checkable = len(outputs) == 2 and all(o is not None for o in outputs.values())
    if c.check and checkable and not any(t.self_timed for t in timed.values()):
        try:
            check = _close(
                frameworks["ember"].to_numpy(outputs["ember"]),
                frameworks["torch"].to_numpy(outputs["torch"]),
                c.rtol,
                c.atol,
            ) or "ok"
        except Exception as e:  # noqa: BLE001
            check = f"could not compare: {_describe(e)}"
    outputs.clear()

    try:
        numbers = {}
        for name, t in timed.items():
            try:
                numbers[name] = _calibrate(t, batch_s)  # also warms caches further
            except Exception as e:  # noqa: BLE001
                sides[name] = Side(status="error", message=_describe(e))
        order = [n for n in FRAMEWORKS if n in numbers]
        for r in range(repeats):
            # Alternate who goes first so drift (thermal, other load) hits both alike.
            for name in order if r % 2 == 0 else order[::-1]:
                side = sides[name]
                if side.status != "ok":
                    continue
                side.number = numbers[name]
                try:
                    side.times.append(timed[name].run(numbers[name]) / numbers[name])
                except Exception as e:  # noqa: BLE001
                    sides[name] = Side(status="error", message=_describe(e))
                if len(order) > 1:
                    # Let the other framework's worker threads go idle first: torch's OpenMP/MKL
                    # workers keep spinning for ~8 ms after its last parallel op (measured on the
                    # 2-core machine), which would take a core from whoever runs next.
                    time.sleep(pause_s)
    finally:
        timed.clear()
        for fw in frameworks.values():
            if fw is not None:
                fw.data_cache.clear()
        gc.collect()
    return Result(case=c, sides=sides, check=check)


# ---- formatting -------------------------------------------------------------------------------


def fmt_time(seconds: float | None, unit: str) -> str:
    if seconds is None:
        return "-"
    v = seconds / UNITS[unit]
    digits = 3 if v < 10 else (1 if v < 1000 else 0)
    return f"{v:.{digits}f} {UNIT_LABELS[unit]}"


def fmt_side(res: Result, framework: str) -> str:
    side = res.sides[framework]
    if side.status != "ok":
        return side.status
    text = fmt_time(side.median, res.case.unit)
    tp = res.throughput(framework)
    if tp is not None:
        text += f" ({tp[0]:.1f} {tp[1]})"
    return text


def fmt_target(c: Case) -> str:
    if c.target_abs is not None:
        # target_abs is in seconds, i.e. in the base quantity of the case's unit
        return f"ember ≤ {c.target_abs / UNITS[c.unit]:g} {UNIT_LABELS.get(c.unit, c.unit)}"
    if c.target is not None:
        return f"≤ {c.target:.2f}"
    return "-"


def fmt_met(res: Result) -> str:
    if res.sides["ember"].status != "ok":
        return res.sides["ember"].status
    met = res.met
    if met is None:
        return "n/a" if (res.case.target is not None or res.case.target_abs is not None) else "-"
    return "yes" if met else "**NO**"


NOISY_SPREAD = 0.2  # interquartile range / median above which a side counts as noisy


def spread(side: Side) -> float | None:
    """Interquartile range of the repeats relative to their median (None: too few repeats)."""
    med = side.median
    if med is None or len(side.times) < 4:
        return None
    q = statistics.quantiles(side.times, n=4)
    return (q[2] - q[0]) / med


def markdown_table(results: list[Result]) -> str:
    rows = [
        "| case | ember | torch | ember/torch | target | met? |",
        "| --- | ---: | ---: | ---: | --- | --- |",
    ]
    for res in results:
        ratio = res.ratio
        ratio_s = "n/a" if ratio is None else f"{ratio:.2f}"
        if ratio is not None and any((spread(s) or 0) > NOISY_SPREAD for s in res.sides.values()):
            ratio_s += " ~"  # the repeats of one side spread widely: a busy machine
        name = res.case.name
        if res.check not in ("", "ok"):
            name += f" ⚠ {res.check}"
        rows.append(
            f"| {name} | {fmt_side(res, 'ember')} | {fmt_side(res, 'torch')} | {ratio_s} "
            f"| {fmt_target(res.case)} | {fmt_met(res)} |"
        )
    return "\n".join(rows)


def result_json(res: Result) -> dict[str, Any]:
    c = res.case
    out: dict[str, Any] = {
        "name": c.name,
        "doc": c.doc.strip(),
        "unit": c.unit,
        "target_ratio": c.target,
        "target_abs_s": c.target_abs,
        "ratio": res.ratio,
        "met": res.met,
        "check": res.check or None,
    }
    for name, side in res.sides.items():
        tp = res.throughput(name)
        med = side.median
        out[name] = {
            "status": side.status,
            "message": side.message or None,
            "median_s": med,
            "median": None if med is None else med / UNITS[c.unit],
            "min_s": min(side.times) if side.times and side.status == "ok" else None,
            "times_s": side.times if side.status == "ok" else [],
            "number": side.number,
            "throughput": None if tp is None else tp[0],
            "throughput_unit": None if tp is None else tp[1],
        }
        # Spread of the repeats, to tell a real difference from noise.
        out[name]["iqr_rel"] = spread(side)
    return out
