"""Run every benchmark of this folder and print one table of ratios (``make bench``).

    .venv/bin/python tests/benchmarks/run_benchmarks.py [--quick] [--only local,aio] [--json PATH]

Discovers the modules ``bench_*.py`` beside this file (``bench_common`` excepted), calls each
one's ``run(quick)`` (the interface is described in ``bench_common``), prints one table of all
rows — measurement, baseline, ratio, target — and writes them to ``--json`` (default
``.bench/results.json``). A benchmark that raises stops the run with its traceback: a broken
benchmark is an error, not a missing row.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

from bench_common import Row  # noqa: E402


def benchmark_names() -> list[str]:
    """The benchmark modules of this folder (``bench_local`` -> ``local``), sorted."""
    return sorted(
        path.stem.removeprefix("bench_")
        for path in HERE.glob("bench_*.py")
        if path.stem != "bench_common"
    )


def load(name: str) -> Callable[[bool], list[Row]]:
    """The ``run`` function of benchmark ``name``; ``TypeError`` when it has none."""
    module: ModuleType = importlib.import_module(f"bench_{name}")
    run = getattr(module, "run", None)
    if not callable(run):
        raise TypeError(f"bench_{name}.py defines no run(quick) -> list[Row]")
    return run  # type: ignore[no-any-return]


def _format(value: float, unit: str) -> str:
    if unit == "s":
        if value < 1e-3:
            return f"{value * 1e6:.1f} µs"
        if value < 1:
            return f"{value * 1e3:.2f} ms"
        return f"{value:.3f} s"
    return f"{value:.4g} {unit}"


def table(results: Sequence[tuple[str, Row]]) -> str:
    """The rows as one aligned text table."""
    header = ("benchmark", "measurement", "value", "baseline", "ratio", "target", "", "baseline is")
    lines = [header]
    for bench, row in results:
        met = {None: "", True: "ok", False: "MISSED"}[row.met]
        lines.append(
            (
                bench,
                row.name,
                _format(row.value, row.unit),
                _format(row.baseline, row.unit),
                f"{row.ratio:.3f}",
                "" if row.target is None else f"<= {row.target:g}",
                met,
                row.note,
            )
        )
    widths = [max(len(line[column]) for line in lines) for column in range(len(header) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False))
        + "  "
        + line[-1]
        for line in lines
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations, small sizes")
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--json", default=".bench/results.json", help="where to write the rows")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    names = [name for name in args.only.split(",") if name] or benchmark_names()
    results: list[tuple[str, Row]] = []
    timings: dict[str, float] = {}
    for name in names:
        started = time.perf_counter()
        print(f"running bench_{name} ...", file=sys.stderr, flush=True)
        results.extend((name, row) for row in load(name)(args.quick))
        timings[name] = time.perf_counter() - started
    print(table(results))
    target = Path(args.json)
    target.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "quick": args.quick,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "seconds": timings,
        "rows": [{"benchmark": bench, **row.as_dict()} for bench, row in results],
    }
    target.write_text(json.dumps(document, indent=2) + "\n")
    print(f"rows written to {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
