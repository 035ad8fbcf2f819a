"""Benchmark of the local runtime: command overhead, skill preparation, memory bound.

Run from the repository root::

    .venv/bin/python tests/benchmarks/bench_local.py [--runs 500] [--prepare-runs 7] [--dir DIR]

Measures, in one run:

1. ``execute("true")`` of :class:`LocalSkillRuntime` against ``subprocess.run(["bash", "-c",
   "true"])`` — median of ``--runs`` interleaved runs each (target ratio <= 1.05) — and against
   the capture floor: the same command in its own session with both pipes read to the end;
2. preparing a generated 1 000-file / 50 MiB skill into a fresh conversation workspace (a new
   runtime each time, so nothing is cached) against ``cp -r`` of the same tree — median of
   ``--prepare-runs`` (target ratio <= 1.3), with the digest and copy phases timed apart and
   the two floors of a cold prepare measured in the same run: SHA-256 of every byte on one
   thread, and the copy alone (``copy_file_range``, no hashing);
3. the peak RSS of a Python process that runs ``yes | head -c 1G`` through the runtime
   (target < 100 MiB).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from bench_common import Row, default_scratch, make_skill

from skillruntime.core.models import Skill, SkillExecutionRequest, SkillPreparationRequest
from skillruntime.core.skills.files import (
    clear_hash_memo,
    copy_skill_files,
    iter_skill_files,
    skill_digest,
)
from skillruntime.local import LocalSkillRuntime

MIB = 1024 * 1024
FILES = 1000


def bench_execute(runs: int, work: Path) -> tuple[float, float]:
    """Median seconds of a raw ``bash -c true`` and of the runtime's ``execute``."""
    raw, ours, _captured = bench_execute_floors(runs, work)
    return raw, ours


def _captured_true(work: Path) -> None:
    """``bash -c true`` in ``work`` and a session of its own, both streams read through pipes to
    their end, then reaped: the least any runtime that returns the output and can kill the
    process tree must do (no timeout, no bound: reading one pipe after the other is safe only
    for a command that writes nothing)."""
    process = subprocess.Popen(
        ["bash", "-c", "true"],
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    with process.stdout, process.stderr:
        process.stdout.read()
        process.stderr.read()
    if process.wait() != 0:
        raise SystemExit("bash -c true failed")


def bench_execute_floors(runs: int, work: Path) -> tuple[float, float, float]:
    """Median seconds of a raw ``bash -c true``, of the runtime's ``execute`` and of
    :func:`_captured_true` (the capture floor)."""
    raw: list[float] = []
    ours: list[float] = []
    captured: list[float] = []
    request = SkillExecutionRequest(command="true")
    with LocalSkillRuntime(work_root=work) as runtime:
        for _ in range(20):  # warm up every path
            subprocess.run(["bash", "-c", "true"], check=True)
            runtime.execute(request)
            _captured_true(work)
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(["bash", "-c", "true"], check=True)
            raw.append(time.perf_counter() - start)
            start = time.perf_counter()
            result = runtime.execute(request)
            ours.append(time.perf_counter() - start)
            if result.exit_code != 0:
                raise SystemExit(f"execute failed: {result}")
            start = time.perf_counter()
            _captured_true(work)
            captured.append(time.perf_counter() - start)
    return statistics.median(raw), statistics.median(ours), statistics.median(captured)


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def bench_prepare(runs: int, base: Path, skill: Skill) -> dict[str, float]:
    """Median seconds of ``cp -r``, a full prepare and its digest/copy phases."""
    source = Path(skill.base_path)
    samples: dict[str, list[float]] = {
        "cp": [],
        "prepare": [],
        "prepare-warm": [],
        "walk+digest": [],
        "copy": [],
        "sha256": [],
    }
    request = SkillPreparationRequest(skills=(skill,))
    files = list(iter_skill_files(source))
    for run in range(runs):
        target = base / f"cp-{run}"
        samples["cp"].append(
            _timed(
                functools.partial(
                    subprocess.run, ["cp", "-r", str(source), str(target)], check=True
                )
            )
        )
        root = base / f"conversations-{run}"

        def prepare(root: Path = root) -> None:
            with LocalSkillRuntime(conversation_id="bench", conversations_root=root) as rt:
                rt.prepare(request)

        clear_hash_memo()
        samples["prepare"].append(_timed(prepare))
        warm_root = base / f"conversations-warm-{run}"
        samples["prepare-warm"].append(_timed(functools.partial(prepare, warm_root)))
        shutil.rmtree(warm_root)
        clear_hash_memo()
        samples["walk+digest"].append(_timed(lambda: skill_digest(list(iter_skill_files(source)))))
        samples["sha256"].append(
            _timed(lambda: [hashlib.sha256(item.local_path.read_bytes()) for item in files])
        )
        copy_target = base / f"copy-{run}"
        samples["copy"].append(_timed(functools.partial(copy_skill_files, files, copy_target)))
        for leftover in (target, root, copy_target):
            shutil.rmtree(leftover)
    return {name: statistics.median(values) for name, values in samples.items()}


_RSS_CHILD = textwrap.dedent(
    """
    import resource, sys, time
    from skillruntime.core.models import SkillExecutionRequest
    from skillruntime.local import LocalSkillRuntime
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with LocalSkillRuntime(work_root=sys.argv[1]) as runtime:
        start = time.perf_counter()
        result = runtime.execute(SkillExecutionRequest(
            command=f"yes | head -c {sys.argv[2]}", timeout_seconds=300))
        elapsed = time.perf_counter() - start
    assert result.exit_code == 0 and result.stdout_truncated, result
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(baseline, peak, elapsed, len(result.stdout))
    """
)


def bench_memory(work: Path, output: int = 1024 * MIB) -> tuple[float, float, float, int]:
    """(baseline MiB, peak MiB, seconds, kept chars) of a child printing ``output`` bytes
    through execute."""
    completed = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(work), str(output)],
        check=True,
        capture_output=True,
        text=True,
    )
    baseline, peak, elapsed, kept = completed.stdout.split()
    return int(baseline) / 1024, int(peak) / 1024, float(elapsed), int(kept)


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``): execute overhead, cold and
    memoised prepare on tmpfs and on the disk of the temporary directory, the memory bound."""
    runs, prepare_runs, files, total, output = (
        (20, 1, 50, 2 * MIB, 16 * MIB) if quick else (500, 7, FILES, 50 * MIB, 1024 * MIB)
    )
    rows: list[Row] = []
    scratches = {"tmpfs": default_scratch(), "disk": tempfile.gettempdir()}
    for label, directory in scratches.items():
        if directory is None:
            continue
        with tempfile.TemporaryDirectory(prefix="bench-local-", dir=directory) as scratch:
            base = Path(scratch)
            work = base / "work"
            work.mkdir()
            if label == "tmpfs":
                raw, ours, captured = bench_execute_floors(runs, work)
                rows.append(Row("execute('true')", ours, raw, target=1.05, note="bash -c true"))
                rows.append(
                    Row(
                        "execute('true')",
                        ours,
                        captured,
                        note="bash -c true, both pipes read to the end, own session (Popen)",
                    )
                )
                rows.append(
                    Row(
                        "captured bash -c true (the floor)",
                        captured,
                        raw,
                        note="bash -c true",
                    )
                )
            skill = make_skill(
                base / "skill-source" / "bench-skill",
                files,
                total // (files - 1),
                name="bench-skill",
                random=True,
            )
            # The hash memo trusts only files unchanged for two seconds; let the new tree age.
            time.sleep(0.0 if quick else 2.1)
            timings = bench_prepare(prepare_runs, base, skill)
            size = f"{files} files / {total // MIB} MiB"
            rows.append(
                Row(
                    f"cold prepare, {label}",
                    timings["prepare"],
                    timings["cp"],
                    target=1.3,
                    note=f"cp -r, {size}",
                )
            )
            rows.append(
                Row(
                    f"sha256 of every byte (read + hash), {label}",
                    timings["sha256"],
                    timings["cp"],
                    note=f"cp -r; the floor of a digest on one thread, {size}",
                )
            )
            rows.append(
                Row(
                    f"copy alone (kernel copy_file_range), {label}",
                    timings["copy"],
                    timings["cp"],
                    note=f"cp -r; the floor of the copy, {size}",
                )
            )
            rows.append(
                Row(
                    f"memoised prepare, {label}",
                    timings["prepare-warm"],
                    timings["cp"],
                    note=f"cp -r, {size}",
                )
            )
            if label == "tmpfs":
                _baseline, peak, _elapsed, _kept = bench_memory(work, output)
                rows.append(
                    Row(
                        f"peak RSS, {output // MIB} MiB of output",
                        peak,
                        100.0,
                        unit="MiB",
                        target=1.0,
                        note="bound 100 MiB",
                    )
                )
                grep_s, scan_s = bench_grep(base, 2 if quick else 9)
                rows.append(
                    Row(
                        "grep literal, 1000 files",
                        grep_s,
                        scan_s,
                        target=1.3,
                        note="plain-Python scan of the same files",
                    )
                )
    return rows


def bench_grep(base: Path, runs: int = 9) -> tuple[float, float]:
    """(runtime grep, plain-Python scan) medians: a literal ``files_with_matches`` grep over
    1 000 small files through the file system against ``os.walk`` + read + ``in`` per line."""
    from skillruntime.core.files.search import GrepQuery

    tree = base / "grep-tree"
    for index in range(1000):
        target = tree / f"d{index % 20}" / f"f{index:04d}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        marker = "needle" if index % 7 == 0 else "hay"
        target.write_text(f"line one\n{marker} two\n" + "filler text\n" * 40)

    def plain() -> list[str]:
        found = []
        for folder, dirs, names in os.walk(tree):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as handle:
                    if any("needle" in line for line in handle.read().splitlines()):
                        found.append(path)
        return found

    ours: list[float] = []
    raw: list[float] = []
    with LocalSkillRuntime(work_root=tree) as runtime:
        fs = runtime.get_file_system()
        root = fs.stat(str(tree))
        assert root is not None
        query = GrepQuery("needle")
        assert len(fs.grep(root, query).entries) == len(plain())
        for _ in range(runs):
            ours.append(_timed(functools.partial(fs.grep, root, query)))
            raw.append(_timed(plain))
    return statistics.median(ours), statistics.median(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500, help="execute runs (>= 200)")
    parser.add_argument("--prepare-runs", type=int, default=7, help="prepare runs")
    parser.add_argument(
        "--dir", default=default_scratch(), help="scratch directory (default: /dev/shm or temp)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-local-", dir=args.dir) as scratch:
        base = Path(scratch)
        work = base / "work"
        work.mkdir()
        print(f"scratch directory: {base} (python {sys.version.split()[0]}, {os.cpu_count()} cpus)")

        raw, ours, captured = bench_execute_floors(args.runs, work)
        print(
            f"[1] execute('true'): runtime {ours * 1000:.3f} ms, "
            f"subprocess.run bash -c true {raw * 1000:.3f} ms, ratio {ours / raw:.3f} "
            f"(target <= 1.05; median of {args.runs}); capture floor {captured * 1000:.3f} ms, "
            f"ratio {ours / captured:.3f}"
        )

        skill = make_skill(
            base / "skill-source" / "bench-skill",
            FILES,
            50 * MIB // (FILES - 1),
            name="bench-skill",
            random=True,
        )
        # The hash memo trusts only files unchanged for two seconds; let the new tree age.
        time.sleep(2.1)
        timings = bench_prepare(args.prepare_runs, base, skill)
        ratio = timings["prepare"] / timings["cp"]
        print(
            f"[2] prepare 1000 files / 50 MiB: prepare {timings['prepare'] * 1000:.1f} ms, "
            f"cp -r {timings['cp'] * 1000:.1f} ms, ratio {ratio:.2f} (target <= 1.3; median of "
            f"{args.prepare_runs}); phases: walk+digest {timings['walk+digest'] * 1000:.1f} ms, "
            f"copy_skill_files {timings['copy'] * 1000:.1f} ms; floor: sha256 of every byte on "
            f"one thread {timings['sha256'] * 1000:.1f} ms"
        )
        print(
            f"[2b] prepare again in a new runtime object of the same process (file hashes "
            f"memoised by stat fingerprint): {timings['prepare-warm'] * 1000:.1f} ms, ratio "
            f"{timings['prepare-warm'] / timings['cp']:.2f} vs cp -r"
        )

        baseline, peak, elapsed, kept = bench_memory(work)
        print(
            f"[3] 1 GiB of output through execute: peak RSS {peak:.1f} MiB (baseline after "
            f"imports {baseline:.1f} MiB; target < 100 MiB), {elapsed:.2f} s, "
            f"{kept} characters kept"
        )
        grep_s, scan_s = bench_grep(base)
        print(
            f"[4] grep literal over 1000 files: runtime {grep_s * 1000:.1f} ms, plain-Python "
            f"scan {scan_s * 1000:.1f} ms, ratio {grep_s / scan_s:.2f} (target <= 1.3)"
        )
    print(f"total benchmark time {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
