"""Viking store benchmark: cold pull vs warm hit, and snapshot verification vs plain hashlib.

Run: ``.venv/bin/python tests/benchmarks/bench_viking.py [--runs N] [--dir DIR]``.

A 100-file / 10 MiB skill is served by the endpoint double on 127.0.0.1. *Cold*: a lease on an
empty cache (manifest read, 100 streamed downloads verified, manifest re-read, publish). *Warm*:
the first lease that hits (manifest read; files written within the racy window re-hashed).
*Steady warm*: a later hit, files checked by their recorded stat fingerprints, against one bare
integrity (manifest) read. *Hashing*: ``verify_snapshot``
on the cached directory against reading and hashing the same files with plain ``hashlib``.
Medians of interleaved runs; figures are ratios against baselines measured in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import Row, default_scratch

from doubles.viking import VikingDouble
from skillruntime.viking import VikingSkillStore
from skillruntime.viking.cache import verify_snapshot

ROOT = "viking://user/default/skills/bench"
FILES = 100
TOTAL = 10 * 1024 * 1024


def _skill() -> dict[str, bytes]:
    size = TOTAL // (FILES - 1)
    files = {"SKILL.md": b"---\nname: bench\ndescription: Benchmark skill\n---\n\n# Bench\n"}
    for index in range(FILES - 1):
        files[f"dir{index % 10}/file{index:03d}.bin"] = os.urandom(size)
    return files


def _plain_hash(directory: Path) -> int:
    total = 0
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            hashlib.sha256(data).hexdigest()
            total += len(data)
    return total


def measure(runs: int, directory: str | None) -> dict[str, float]:
    """Medians (seconds) of a cold pull, a warm hit, a manifest read, ``verify_snapshot`` and a
    plain hash of the same files, with the skill's size (``mib``) and ``downloads``."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-viking-", dir=directory))
    cold: list[float] = []
    warm: list[float] = []
    steady: list[float] = []
    resolve: list[float] = []
    verify: list[float] = []
    plain: list[float] = []
    try:
        with VikingDouble() as viking:
            files = _skill()
            viking.add_skill(ROOT, files)
            nbytes = sum(len(data) for data in files.values())
            for index in range(runs):
                cache = scratch / f"cache-{index}"
                with VikingSkillStore(server_url=viking.url, cache_dir=cache) as store:
                    started = time.perf_counter()
                    with store.lease(ROOT):
                        pass
                    cold.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    with store.lease(ROOT) as directory:
                        pass
                    warm.append(time.perf_counter() - started)
                    with store.lease(ROOT):
                        pass  # records the fingerprints that were racy on the first hit
                    started = time.perf_counter()
                    with store.lease(ROOT):
                        pass
                    steady.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    manifest = store.resolve(ROOT)
                    resolve.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    verify_snapshot(directory, manifest)
                    verify.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    _plain_hash(directory)
                    plain.append(time.perf_counter() - started)
                shutil.rmtree(cache)
            downloads = sum(viking.downloads.values())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def med(values: list[float]) -> float:
        return statistics.median(values)

    return {
        "cold": med(cold),
        "warm": med(warm),
        "steady": med(steady),
        "resolve": med(resolve),
        "verify": med(verify),
        "plain": med(plain),
        "mib": nbytes / (1024 * 1024),
        "downloads": downloads,
    }


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    figures = measure(1 if quick else 7, default_scratch())
    return [
        Row("warm hit", figures["warm"], figures["resolve"], note="one integrity (manifest) read"),
        Row("warm hit", figures["warm"], figures["cold"], note="cold pull"),
        Row(
            "steady warm hit (fingerprints recorded)",
            figures["steady"],
            figures["resolve"],
            target=1.1,
            note="one integrity (manifest) read",
        ),
        Row(
            "verify_snapshot",
            figures["verify"],
            figures["plain"],
            target=1.2,
            note="plain hashlib of the same files",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--dir", default=default_scratch())
    args = parser.parse_args()
    figures = measure(args.runs, args.dir)
    mib = figures["mib"]
    cold, warm, resolve = figures["cold"], figures["warm"], figures["resolve"]
    verify, plain = figures["verify"], figures["plain"]
    print(
        f"skill: {FILES} files, {mib:.1f} MiB; runs: {args.runs}; "
        f"downloads: {figures['downloads']:.0f}"
    )
    print(f"[1] cold pull   {cold * 1000:8.1f} ms  ({mib / cold:6.1f} MiB/s)")
    print(f"    warm hit    {warm * 1000:8.1f} ms  -> cold/warm = {cold / warm:.1f}x")
    print(f"    manifest read alone {resolve * 1000:.1f} ms")
    steady = figures["steady"]
    print(
        f"    steady warm hit (fingerprints recorded) {steady * 1000:.1f} ms -> "
        f"{steady / resolve:.2f}x one integrity read"
    )
    print(
        f"[2] verify_snapshot {mib / verify:7.1f} MiB/s vs plain hashlib "
        f"{mib / plain:7.1f} MiB/s -> ratio {verify / plain:.2f}"
    )


if __name__ == "__main__":
    main()
