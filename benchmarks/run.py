"""Run the ember-vs-PyTorch benchmarks and print a Markdown table (see benchmarks/README.md).

    python benchmarks/run.py                  # every case, full repeats
    python benchmarks/run.py --quick          # smoke mode: few repeats, short batches
    python benchmarks/run.py --filter tiny    # cases whose name contains "tiny"
    python benchmarks/run.py --json out.json --threads 4

Cases live in benchmarks/cases_*.py (each registers cases with `harness.case`).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402

DEFAULT_JSON = HERE / "results.json"


def load_cases() -> list[harness.Case]:
    """Imports every benchmarks/cases_*.py; cases keep module then definition order."""
    for path in sorted(HERE.glob("cases_*.py")):
        importlib.import_module(path.stem)
    return list(harness.REGISTRY.values())


def import_frameworks(threads: int, want_torch: bool) -> dict[str, harness.Framework | None]:
    try:
        import ember
    except Exception as e:
        raise SystemExit(
            f"error: cannot import ember ({type(e).__name__}: {e}); install it (nox -s bench) "
            "or put a development build on PYTHONPATH (see benchmarks/README.md)"
        ) from e

    ember.set_num_threads(threads)
    cache: dict = {}  # one data cache, so both frameworks get the same random inputs cheaply
    fws: dict[str, harness.Framework | None] = {"ember": harness.Framework("ember", ember, cache)}
    fws["torch"] = None
    if want_torch:
        try:
            import torch
        except Exception as e:  # noqa: BLE001  (no torch, or a broken install: ember only)
            print(f"note: torch is not importable ({type(e).__name__}: {e}); ember only",
                  file=sys.stderr)  # fmt: skip
        else:
            torch.set_num_threads(threads)
            fws["torch"] = harness.Framework("torch", torch, cache)
    return fws


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--filter", action="append", default=[], metavar="SUBSTR",
                   help="run cases whose name contains SUBSTR (repeatable: any of them)")
    p.add_argument("--quick", action="store_true",
                   help="smoke mode: 5 repeats of short batches (numbers are rough)")
    p.add_argument("--threads", type=int, default=2,
                   help="intra-op threads for ember and torch (default: 2)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed batches per framework (default: 11, quick: 5)")
    p.add_argument("--json", default=str(DEFAULT_JSON), metavar="PATH",
                   help=f"where to write the results (default: {DEFAULT_JSON.relative_to(HERE.parent)};"
                        " '-' for none)")
    p.add_argument("--no-torch", action="store_true", help="time ember only")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--strict", action="store_true",
                   help="exit with status 1 when a target is missed or a result differs from torch")
    args = p.parse_args(argv)  # fmt: skip
    if args.threads < 1:
        p.error("--threads must be >= 1")
    if args.repeats is not None and args.repeats < 1:
        p.error("--repeats must be >= 1")
    return args


def select(cases: list[harness.Case], filters: list[str]) -> list[harness.Case]:
    if not filters:
        return cases
    return [c for c in cases if any(f.lower() in c.name.lower() for f in filters)]


def meta(args: argparse.Namespace, fws: dict[str, Any], repeats: int, batch_s: float) -> dict:
    def version(name: str) -> str | None:
        fw = fws.get(name)
        return None if fw is None else getattr(fw.mod, "__version__", "unknown")

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": args.threads,
        "quick": args.quick,
        "repeats": repeats,
        "batch_s": batch_s,
        "ember_version": version("ember"),
        "torch_version": version("torch"),
        "ratio": "ember time / torch time (< 1: ember is faster); medians of interleaved repeats",
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cases = select(load_cases(), args.filter)
    if args.list:
        for c in cases:
            print(f"{c.name:24s} {c.doc.strip()}")
        return 0
    if not cases:
        print(f"no case matches {args.filter}", file=sys.stderr)
        return 2

    repeats = args.repeats or (5 if args.quick else 11)
    batch_s = 0.01 if args.quick else 0.05
    start = time.perf_counter()
    fws = import_frameworks(args.threads, want_torch=not args.no_torch)

    results = []
    for i, c in enumerate(cases):
        print(f"[{i + 1}/{len(cases)}] {c.name} ...", end="", flush=True, file=sys.stderr)
        t0 = time.perf_counter()
        res = harness.run_case(c, fws, repeats=repeats, batch_s=batch_s, quick=args.quick)
        results.append(res)
        statuses = ", ".join(f"{n} {s.status}" for n, s in res.sides.items() if s.status != "ok")
        print(f" {time.perf_counter() - t0:.1f} s{' (' + statuses + ')' if statuses else ''}",
              file=sys.stderr)  # fmt: skip

    info = meta(args, fws, repeats, batch_s)
    print()
    print(f"ember {info['ember_version']} vs torch {info['torch_version'] or 'n/a'}, "
          f"{args.threads} thread(s), {os.cpu_count()} CPU(s), {repeats} repeats"
          f"{' (quick: rough numbers)' if args.quick else ''}; "
          "ratio = ember time / torch time, < 1 means ember is faster")  # fmt: skip
    forced = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    if forced:
        # OpenBLAS then runs the named core's kernels, not the best for this CPU (an AVX2
        # kernel on an AVX-512 machine): ember's matrix products slow down, torch's (MKL) don't.
        print(f"\nnote: {' '.join(f'{k}={v}' for k, v in forced.items())} is set: OpenBLAS's "
              "kernels are forced, so ember's matrix products (the training cases) run slower "
              "than this CPU allows; unset both for representative numbers")
    print()
    table = harness.markdown_table(results)
    print(table)
    notes = [
        f"- {r.case.name} [{n}]: {s.message}"
        for r in results
        for n, s in r.sides.items()
        if s.status in ("missing", "error")
    ]
    if any("~ |" in line for line in table.splitlines()):
        notes.insert(0, f"- `~`: the repeats of a side spread by more than "
                        f"{harness.NOISY_SPREAD:.0%} (interquartile range / median); the machine "
                        "was busy and that ratio is uncertain")  # fmt: skip
    if notes:
        print("\n" + "\n".join(notes))
    elapsed = time.perf_counter() - start
    print(f"\n({len(results)} cases in {elapsed:.1f} s)")

    if args.json != "-":
        info["elapsed_s"] = elapsed
        doc = {"meta": info, "cases": [harness.result_json(r) for r in results]}
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"results written to {path}", file=sys.stderr)

    if args.strict:
        bad = [r for r in results if r.met is False or r.check not in ("", "ok")]
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
