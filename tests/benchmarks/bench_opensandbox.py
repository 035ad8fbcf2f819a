"""Benchmark of the OpenSandbox runtime against the OpenSandbox double: preparing a large skill.

Run from the repository root::

    .venv/bin/python tests/benchmarks/bench_opensandbox.py [--files 1000] [--runs 3]

Measured in one run, through the real SDK against the protocol double, each figure also given as
a ratio against a baseline measured in the same run:

1. **first prepare** of a generated ``--files``-file skill into a fresh conversation whose sandbox
   already exists (batched multipart uploads) — median seconds and HTTP requests counted by the
   double — against the **per-file baseline**, the same prepare through the file system's
   inherited one-request-per-file ``upload_files``;
2. **resumed prepare**: a new runtime object (another process would behave the same) opening the
   same conversation and preparing the same skill, attach included — seconds, requests and files
   uploaded — against the first prepare;
3. **command latency against execd's grace**: median seconds of ``execute("true")`` while the
   double keeps each command stream open ``--grace`` seconds after its final event (execd's
   default: 1 s), against the same command with no grace at all;
4. **one long line**: a child process runs a command printing a single ``--line-mib`` MiB line
   (no newline) with the default 1 MiB output cap and reports the growth of its peak RSS
   (``ru_maxrss``) over the same child running ``true``;
5. **grep over ``--files`` files** in one command through the wrapper — median seconds and
   requests — against the same ``grep -rlF`` run by one raw SDK ``commands.run`` (no execd grace
   for either).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import Row, make_skill, request_count

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillPreparationRequest,
)
from skillruntime.core.skills.files import SkillFile
from skillruntime.opensandbox import OpenSandboxSkillRuntime


class PerFileRuntime(OpenSandboxSkillRuntime):
    """Baseline: one upload request per file (the file system's inherited ``upload_files``)."""

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        fs = self._raw_file_system()
        fs.make_directory(target)
        SkillRuntimeFileSystem.upload_files(
            fs,
            (
                (item.local_path, f"{target}/{item.relative_path}", item.executable)
                for item in files
            ),
        )


def _options(
    double: OpenSandboxDouble, store: InMemoryConversationStore, conversation: str
) -> dict[str, Any]:
    return {
        "domain": double.domain,
        "api_key": double.api_key,
        "conversation_id": conversation,
        "conversation_store": store,
    }


def bench_first(
    double: OpenSandboxDouble, skill: Skill, runs: int, runtime_class: type[OpenSandboxSkillRuntime]
) -> tuple[float, int]:
    """Median seconds and requests of a prepare into a fresh conversation."""
    times: list[float] = []
    counts: list[int] = []
    store = InMemoryConversationStore()
    for _ in range(runs):
        conversation = f"bench-{uuid.uuid4().hex[:10]}"
        runtime = runtime_class(**_options(double, store, conversation))
        try:
            runtime.execute(SkillExecutionRequest(command="true"))  # sandbox and workspace exist
            double.reset_stats()
            start = time.perf_counter()
            runtime.prepare(SkillPreparationRequest(skills=(skill,)))
            times.append(time.perf_counter() - start)
            counts.append(request_count(double))
        finally:
            runtime.destroy_conversation_sandbox()
            runtime.close()
    return statistics.median(times), int(statistics.median(counts))


def bench_resume(
    double: OpenSandboxDouble, skill: Skill, runs: int
) -> tuple[float, int, int, float]:
    """Median seconds, requests and files uploaded of a resumed prepare (attach included), and
    the median first prepare measured on the same conversations."""
    first_times: list[float] = []
    times: list[float] = []
    counts: list[int] = []
    uploaded: list[int] = []
    store = InMemoryConversationStore()
    for _ in range(runs):
        options = _options(double, store, f"bench-{uuid.uuid4().hex[:10]}")
        first = OpenSandboxSkillRuntime(**options)
        first.execute(SkillExecutionRequest(command="true"))
        start = time.perf_counter()
        first.prepare(SkillPreparationRequest(skills=(skill,)))
        first_times.append(time.perf_counter() - start)
        first.close()
        double.reset_stats()
        start = time.perf_counter()
        second = OpenSandboxSkillRuntime(**options)
        second.prepare(SkillPreparationRequest(skills=(skill,)))
        times.append(time.perf_counter() - start)
        stats = double.stats()
        counts.append(int(sum(stats["requests"].values())))
        uploaded.append(int(stats["uploaded_files"]))
        second.destroy_conversation_sandbox()
        second.close()
    return (
        statistics.median(times),
        int(statistics.median(counts)),
        int(statistics.median(uploaded)),
        statistics.median(first_times),
    )


def bench_latency(double: OpenSandboxDouble, runs: int, grace: float) -> tuple[float, float]:
    """Median seconds of ``execute("true")`` with ``grace`` seconds of linger, and without."""
    runtime = OpenSandboxSkillRuntime(domain=double.domain, api_key=double.api_key)
    try:
        runtime.execute(SkillExecutionRequest(command="true"))  # the sandbox exists
        figures = []
        for linger in (grace, 0.0):
            double.set_tail_delay(linger)
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                runtime.execute(SkillExecutionRequest(command="true"))
                times.append(time.perf_counter() - start)
            figures.append(statistics.median(times))
    finally:
        double.set_tail_delay(grace)
        runtime.close()
    return figures[0], figures[1]


_RSS_CHILD = """
import json, resource, sys
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import OpenSandboxSkillRuntime
runtime = OpenSandboxSkillRuntime(domain=sys.argv[1], api_key=sys.argv[2])
runtime.execute(SkillExecutionRequest(command="true"))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
runtime.execute(SkillExecutionRequest(command=sys.argv[3], timeout_seconds=600))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
runtime.close()
print(json.dumps({"growth_kib": after - before, "peak_kib": after}))
"""


def bench_long_line(double: OpenSandboxDouble, line_mib: int) -> tuple[int, int, int]:
    """Peak-RSS growth (KiB) of a child printing one ``line_mib`` MiB line, of one running
    ``true``, and the first child's peak RSS."""
    figures = []
    for command in (f"head -c {line_mib}M /dev/zero | tr '\\0' x", "true"):
        child = subprocess.run(
            [sys.executable, "-c", _RSS_CHILD, double.domain, double.api_key, command],
            capture_output=True,
            check=True,
            timeout=900,
        )
        figures.append(json.loads(child.stdout))
    return figures[0]["growth_kib"], figures[1]["growth_kib"], figures[0]["peak_kib"]


def bench_grep(
    double: OpenSandboxDouble, files: int, runs: int, grace: float
) -> tuple[float, float, int]:
    """``grep`` (literal, files_with_matches) over ``files`` files through the file system
    against the same ``grep -rlF`` run by one raw SDK ``commands.run`` on the same sandbox, in
    interleaved pairs, with no execd grace (the raw SDK call would wait it out); medians, and
    requests per grep counted by the double."""
    from skillruntime.core.files.search import GrepQuery

    store = InMemoryConversationStore()
    runtime = OpenSandboxSkillRuntime(**_options(double, store, f"bench-{uuid.uuid4().hex[:10]}"))
    double.set_tail_delay(0.0)
    try:
        fs = runtime.get_file_system()
        with tempfile.TemporaryDirectory(prefix="bench-grep-") as scratch:
            local = Path(scratch)
            for index in range(files):
                target = local / f"d{index % 20}" / f"f{index:04d}.txt"
                target.parent.mkdir(exist_ok=True)
                marker = "needle" if index % 7 == 0 else "hay"
                target.write_text(f"line one\n{marker} two\n" + "filler text\n" * 40)
            fs.upload_files(
                (path, f"tree/{path.relative_to(local).as_posix()}", False)
                for path in sorted(local.rglob("*.txt"))
            )
        root = fs.stat("tree")
        assert root is not None
        query = GrepQuery("needle", time_budget=3600.0)
        sandbox = runtime._handle()  # the live SDK handle, for the raw baseline
        command = f"grep -rlF needle {shlex.quote(root.path)}"
        fs.grep(root, query)
        sandbox.commands.run(command)
        ours: list[float] = []
        raw: list[float] = []
        counts: list[int] = []
        for _ in range(runs):
            double.reset_stats()
            start = time.perf_counter()
            found = fs.grep(root, query)
            ours.append(time.perf_counter() - start)
            counts.append(request_count(double))
            start = time.perf_counter()
            sandbox.commands.run(command)
            raw.append(time.perf_counter() - start)
        assert len(found.entries) == len(range(0, files, 7))
    finally:
        double.set_tail_delay(grace)
        runtime.destroy_conversation_sandbox()
        runtime.close()
    return statistics.median(ours), statistics.median(raw), max(counts)


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    files, runs, latency_runs, grace, line_mib = (
        (20, 1, 2, 0.2, 4) if quick else (1000, 3, 10, 1.0, 256)
    )
    grep_files, grep_runs = (20, 3) if quick else (1000, 15)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch, OpenSandboxDouble() as double:
        skill = make_skill(Path(scratch) / "bench-skill", files, 2048)
        batched_s, batched_n = bench_first(double, skill, runs, OpenSandboxSkillRuntime)
        per_file_s, per_file_n = bench_first(double, skill, 1, PerFileRuntime)
        rows.append(
            Row(
                f"first prepare, {files} files",
                batched_s,
                per_file_s,
                note="one upload request per file",
            )
        )
        rows.append(
            Row(
                f"first prepare, {files} files",
                batched_n,
                per_file_n,
                unit="requests",
                note="one upload request per file",
            )
        )
        resumed_s, _resumed_n, resumed_files, first_s = bench_resume(double, skill, runs)
        rows.append(
            Row("resumed prepare (attach included)", resumed_s, first_s, note="first prepare")
        )
        rows.append(
            Row(
                "resumed prepare, files uploaded",
                resumed_files,
                files,
                unit="files",
                target=0.0,
                note="files of the skill",
            )
        )
        with_grace, without = bench_latency(double, latency_runs, grace)
        rows.append(
            Row(
                f"execute('true') with {grace:g} s execd grace",
                with_grace,
                without,
                target=1.2,
                note="no grace",
            )
        )
        grep_s, raw_grep_s, grep_n = bench_grep(double, grep_files, grep_runs, grace)
        rows.append(
            Row(
                f"grep over {grep_files} files",
                grep_s,
                raw_grep_s,
                target=1.5,
                note="grep -rlF in the sandbox, one raw exec",
            )
        )
        rows.append(
            Row(
                f"grep over {grep_files} files",
                grep_n,
                3,
                unit="requests",
                target=1.0,
                note="3 requests",
            )
        )
        line_kib, _true_kib, _peak_kib = bench_long_line(double, line_mib)
        rows.append(
            Row(
                f"RSS growth, one {line_mib} MiB line",
                line_kib / 1024,
                64.0,
                unit="MiB",
                target=1.0,
                note="bound 64 MiB",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-runs", type=int, default=10)
    parser.add_argument("--grace", type=float, default=1.0)
    parser.add_argument("--line-mib", type=int, default=256)
    parser.add_argument("--grep-runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, OpenSandboxDouble() as double:
        skill = make_skill(Path(scratch) / "bench-skill", args.files, 2048)
        batched_s, batched_n = bench_first(double, skill, args.runs, OpenSandboxSkillRuntime)
        per_file_s, per_file_n = bench_first(double, skill, 1, PerFileRuntime)
        print(
            f"[1] first prepare of {args.files} files: batched {batched_s:.3f}s / {batched_n} "
            f"requests; per-file baseline {per_file_s:.3f}s / {per_file_n} requests; "
            f"time ratio {batched_s / per_file_s:.3f}, request ratio {batched_n / per_file_n:.4f}"
        )
        resumed_s, resumed_n, resumed_files, first_s = bench_resume(double, skill, args.runs)
        print(
            f"[2] resumed prepare (new runtime object, attach included): {resumed_s:.3f}s / "
            f"{resumed_n} requests / {resumed_files} files uploaded; first prepare on the same "
            f"conversations {first_s:.3f}s; time ratio resumed/first {resumed_s / first_s:.3f}, "
            f"request ratio resumed/first {resumed_n / batched_n:.3f}"
        )
        with_grace, without = bench_latency(double, args.latency_runs, args.grace)
        print(
            f"[3] execute('true') with {args.grace:g}s of execd grace: {with_grace:.3f}s median; "
            f"without grace {without:.3f}s; ratio {with_grace / without:.2f}"
        )
        grep_s, raw_grep_s, grep_n = bench_grep(double, args.files, args.grep_runs, args.grace)
        print(
            f"[5] grep over {args.files} files: {grep_s * 1000:.1f} ms / {grep_n} requests vs "
            f"grep -rlF by one raw exec {raw_grep_s * 1000:.1f} ms "
            f"(ratio {grep_s / raw_grep_s:.2f})"
        )
        line_kib, true_kib, peak_kib = bench_long_line(double, args.line_mib)
        print(
            f"[4] one {args.line_mib} MiB line: client peak RSS grew {line_kib / 1024:.1f} MiB "
            f"(peak {peak_kib / 1024:.1f} MiB); 'true' grew {true_kib / 1024:.1f} MiB"
        )


if __name__ == "__main__":
    main()
