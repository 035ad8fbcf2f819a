"""Benchmark of the ``skillruntime`` command's start-up, with every distribution installed.

Run from the repository root::

    .venv/bin/python tests/benchmarks/bench_cli.py [--runs 21]

Measures, in one run, interleaved, the median wall time of a fresh process for:

1. ``python -c pass`` — the floor;
2. ``skillruntime --version`` (target <= 0.15 s on a quiet machine, i.e. a few times the floor);
3. ``skillruntime runtimes`` (target <= 0.4 s). The backends declare static listings of their
   options, so the command imports neither pydantic nor the options models; its floor is
   importing click, pluggy and importlib.metadata (the entry points) — timed as line 4.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_common import Row


def _command() -> list[str]:
    found = shutil.which("skillruntime", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("the skillruntime command is not installed next to this interpreter")
    return [found]


def _timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


TARGETS = {"skillruntime --version": 0.15, "skillruntime runtimes": 0.4}


def measure(runs: int) -> dict[str, float]:
    """Median wall seconds of each case, interleaved, after one warming run of each."""
    command = _command()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "skillruntime --version": [*command, "--version"],
        "skillruntime runtimes": [*command, "runtimes"],
        "import floor": [sys.executable, "-c", "import click, pluggy, importlib.metadata"],
    }
    for argv in cases.values():  # warm the byte-code and file caches
        _timed(argv)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, argv in cases.items():
            samples[name].append(_timed(argv))
    return {name: statistics.median(values) for name, values in samples.items()}


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    medians = measure(2 if quick else 21)
    floor = medians["python -c pass"]
    return [
        Row(
            "skillruntime --version",
            medians["skillruntime --version"],
            floor,
            note="python -c pass (absolute target 0.15 s)",
        ),
        Row(
            "skillruntime runtimes",
            medians["skillruntime runtimes"],
            floor,
            note="python -c pass (absolute target 0.4 s)",
        ),
        Row(
            "skillruntime runtimes",
            medians["skillruntime runtimes"],
            medians["import floor"],
            note="import click, pluggy, importlib.metadata",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs of each command")
    args = parser.parse_args()
    medians = measure(args.runs)
    floor = medians["python -c pass"]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, median of {args.runs}")
    for index, (name, median) in enumerate(medians.items(), start=1):
        target = f"; target <= {TARGETS[name]} s" if name in TARGETS else ""
        print(f"[{index}] {name}: {median * 1000:.1f} ms, ratio {median / floor:.2f}{target}")
    deps = medians["import floor"]
    print(f"    runtimes vs its import floor: ratio {medians['skillruntime runtimes'] / deps:.2f}")


if __name__ == "__main__":
    main()
