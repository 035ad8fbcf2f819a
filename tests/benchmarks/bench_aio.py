"""Benchmark of the AIO runtime against the AIO Sandbox double: prepare and execute, with requests.

Run from the repository root::

    .venv/bin/python tests/benchmarks/bench_aio.py [--files 1000] [--runs 50] [--prepare-runs 3]

For each command API of the double (``/v1/bash`` and the ``/v1/shell`` fallback) it measures,
against baselines measured in the same run:

1. preparing a generated skill of ``--files`` files into a fresh conversation with one archive,
   against the same prepare done one file at a time (the inherited ``upload_files`` path, the
   Java original's approach) — median seconds and HTTP requests counted by the double;
2. a second runtime object on the same conversation preparing the same skill (resume): requests
   and bytes uploaded;
3. ``execute("true")`` against one raw ``POST /v1/bash/exec`` (or ``/v1/shell/exec`` on a
   pre-created session) of ``true`` and of ``(setsid bash -c true)`` (the least a command in its
   own session costs) with ``requests`` — medians of ``--runs`` interleaved runs, and requests per
   command.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import Row, make_skill, request_count

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime
from skillruntime.core.models import (
    Skill,
    SkillExecutionRequest,
    SkillPreparationRequest,
)
from skillruntime.core.runtime.spi import BaseSkillRuntime
from skillruntime.core.skills.files import SkillFile

ROOT = "/home/gem/workspace/conversations"


class PerFileAioRuntime(AioSandboxSkillRuntime):
    """Baseline: the inherited per-file placement (one upload and one command per file)."""

    def _place_skill(self, skill: Skill, files: Sequence[SkillFile], target: str) -> None:
        BaseSkillRuntime._place_skill(self, skill, files, target)


def bench_prepare(
    double: AioDouble, skill: Skill, runs: int, runtime_class: type[AioSandboxSkillRuntime]
) -> tuple[float, int]:
    """Median seconds and requests of a prepare into a fresh conversation."""
    times: list[float] = []
    counts: list[int] = []
    for _ in range(runs):
        with runtime_class(
            base_url=double.url,
            token=double.token,
            conversation_id=f"bench-{uuid.uuid4().hex[:10]}",
            conversations_root=ROOT,
        ) as runtime:
            runtime.execute(SkillExecutionRequest(command="true"))  # detection, workspace
            double.reset_stats()
            start = time.perf_counter()
            runtime.prepare(SkillPreparationRequest(skills=(skill,)))
            times.append(time.perf_counter() - start)
            counts.append(request_count(double))
    return statistics.median(times), int(statistics.median(counts))


def bench_resume(double: AioDouble, skill: Skill) -> tuple[int, int]:
    """Requests and uploaded bytes of a second runtime object preparing the same skill."""
    conversation = f"bench-{uuid.uuid4().hex[:10]}"
    arguments = {
        "base_url": double.url,
        "token": double.token,
        "conversation_id": conversation,
        "conversations_root": ROOT,
    }
    with AioSandboxSkillRuntime(**arguments) as first:  # type: ignore[arg-type]
        first.prepare(SkillPreparationRequest(skills=(skill,)))
    double.reset_stats()
    with AioSandboxSkillRuntime(**arguments) as second:  # type: ignore[arg-type]
        second.prepare(SkillPreparationRequest(skills=(skill,)))
    stats = double.stats()
    return sum(stats["requests"].values()), int(stats["bytes_uploaded"])


def bench_execute(double: AioDouble, runs: int) -> tuple[float, float, float, float]:
    """Median seconds of a raw exec call of ``true``, of ``execute``, and of a raw exec call of
    ``setsid bash -c true`` (the floor for a command in its own session); requests per
    ``execute``."""
    session = requests.Session()
    session.headers.update(double.headers)
    raw: list[float] = []
    ours: list[float] = []
    floor: list[float] = []
    request = SkillExecutionRequest(command="true")
    with AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=f"bench-{uuid.uuid4().hex[:10]}",
        conversations_root=ROOT,
    ) as runtime:
        bash = runtime.command_api == "bash"
        if bash:
            url, body = double.url + "/v1/bash/exec", {"command": "true", "session_id": "raw"}
        else:
            sid = f"raw-{uuid.uuid4().hex[:8]}"
            session.post(
                double.url + "/v1/shell/sessions/create", json={"id": sid}, timeout=30
            ).raise_for_status()
            url, body = double.url + "/v1/shell/exec", {"command": "true", "id": sid}
        floor_body = {**body, "command": "(setsid bash -c true)"}
        for _ in range(5):
            session.post(url, json=body, timeout=30).raise_for_status()
            session.post(url, json=floor_body, timeout=30).raise_for_status()
            runtime.execute(request)
        double.reset_stats()
        before = runtime.client.request_count
        for _ in range(runs):
            start = time.perf_counter()
            runtime.execute(request)
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            session.post(url, json=body, timeout=30).raise_for_status()
            raw.append(time.perf_counter() - start)
            start = time.perf_counter()
            session.post(url, json=floor_body, timeout=30).raise_for_status()
            floor.append(time.perf_counter() - start)
        per_command = (runtime.client.request_count - before) / runs
    session.close()
    return statistics.median(raw), statistics.median(ours), statistics.median(floor), per_command


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    files, runs, prepare_runs = (20, 3, 1) if quick else (1000, 50, 3)
    grep_files, grep_runs = (20, 3) if quick else (1000, 15)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch:
        skill = make_skill(Path(scratch) / "bench-skill", files, 2048)
        for bash_api in (True, False):
            api = "/v1/bash" if bash_api else "/v1/shell"
            with AioDouble(bash_api=bash_api) as double:
                archive_s, archive_n = bench_prepare(
                    double, skill, prepare_runs, AioSandboxSkillRuntime
                )
                per_file_s, per_file_n = bench_prepare(double, skill, 1, PerFileAioRuntime)
                rows.append(
                    Row(
                        f"{api} prepare, {files} files",
                        archive_s,
                        per_file_s,
                        note="one upload per file",
                    )
                )
                rows.append(
                    Row(
                        f"{api} prepare, {files} files",
                        archive_n,
                        per_file_n,
                        unit="requests",
                        note="one upload per file",
                    )
                )
                _resumed_n, resumed_bytes = bench_resume(double, skill)
                rows.append(
                    Row(
                        f"{api} resume, bytes uploaded",
                        resumed_bytes,
                        files * 2048,
                        unit="B",
                        target=0.0,
                        note="bytes of the skill",
                    )
                )
                raw_s, ours_s, floor_s, _per_command = bench_execute(double, runs)
                rows.append(
                    Row(
                        f"{api} execute('true')",
                        ours_s,
                        raw_s,
                        target=1.5 if bash_api else 2.5,
                        note="raw exec request",
                    )
                )
                rows.append(
                    Row(
                        f"{api} execute('true')",
                        ours_s,
                        floor_s,
                        note="raw exec of setsid bash -c true",
                    )
                )
                grep_s, raw_grep_s, per_grep = bench_grep(double, grep_files, grep_runs)
                rows.append(
                    Row(
                        f"{api} grep over {grep_files} files",
                        grep_s,
                        raw_grep_s,
                        target=1.5,
                        note="grep -rlF in the sandbox, one raw exec",
                    )
                )
                rows.append(
                    Row(
                        f"{api} grep over {grep_files} files",
                        per_grep,
                        3,
                        unit="requests",
                        target=1.0,
                        note="3 requests",
                    )
                )
    return rows


def bench_grep(double: AioDouble, files: int, runs: int) -> tuple[float, float, int]:
    """``grep`` (literal, files_with_matches) over ``files`` files through the file system
    against the same ``grep -rlF`` run directly in the sandbox by one raw exec request, in
    interleaved pairs; medians, and requests per grep."""
    from skillruntime.core.files.search import GrepQuery

    session = requests.Session()
    session.headers.update(double.headers)
    with AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=f"bench-{uuid.uuid4().hex[:10]}",
        conversations_root=ROOT,
    ) as runtime:
        fs = runtime.get_file_system()
        archive_dir = Path(tempfile.mkdtemp(prefix="bench-grep-"))
        for index in range(files):
            target = archive_dir / f"d{index % 20}" / f"f{index:04d}.txt"
            target.parent.mkdir(exist_ok=True)
            marker = "needle" if index % 7 == 0 else "hay"
            target.write_text(f"line one\n{marker} two\n" + "filler text\n" * 40)
        fs.upload_files(
            (path, f"tree/{path.relative_to(archive_dir).as_posix()}", False)
            for path in sorted(archive_dir.rglob("*.txt"))
        )
        root = fs.stat("tree")
        assert root is not None
        query = GrepQuery("needle", time_budget=3600.0)
        bash = runtime.command_api == "bash"
        command = f"grep -rlF needle {root.path}"
        if bash:
            url, body = double.url + "/v1/bash/exec", {"command": command, "session_id": "raw"}
        else:
            sid = f"raw-{uuid.uuid4().hex[:8]}"
            session.post(
                double.url + "/v1/shell/sessions/create", json={"id": sid}, timeout=30
            ).raise_for_status()
            url, body = double.url + "/v1/shell/exec", {"command": command, "id": sid}
        ours: list[float] = []
        raw: list[float] = []
        fs.grep(root, query)
        session.post(url, json=body, timeout=60).raise_for_status()
        before = runtime.client.request_count
        for _ in range(runs):
            start = time.perf_counter()
            found = fs.grep(root, query)
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            session.post(url, json=body, timeout=60).raise_for_status()
            raw.append(time.perf_counter() - start)
        per_grep = (runtime.client.request_count - before) // runs
        assert len(found.entries) == len(range(0, files, 7))
    session.close()
    return statistics.median(ours), statistics.median(raw), per_grep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--prepare-runs", type=int, default=3)
    parser.add_argument("--grep-runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        skill = make_skill(Path(scratch) / "bench-skill", args.files, 2048)
        for bash_api in (True, False):
            label = "bash " if bash_api else "shell"
            with AioDouble(bash_api=bash_api) as double:
                archive_s, archive_n = bench_prepare(
                    double, skill, args.prepare_runs, AioSandboxSkillRuntime
                )
                per_file_s, per_file_n = bench_prepare(double, skill, 1, PerFileAioRuntime)
                print(
                    f"[{label}] prepare {args.files} files: archive {archive_s:.2f}s "
                    f"/ {archive_n} requests; per-file baseline {per_file_s:.2f}s / {per_file_n} "
                    f"requests; time ratio {archive_s / per_file_s:.3f}, request ratio "
                    f"{archive_n / per_file_n:.4f}"
                )
                resumed_n, resumed_bytes = bench_resume(double, skill)
                print(
                    f"[{label}] resume on a second runtime object: {resumed_n} requests, "
                    f"{resumed_bytes} bytes uploaded"
                )
                raw_s, ours_s, floor_s, per_command = bench_execute(double, args.runs)
                print(
                    f"[{label}] execute('true'): {ours_s * 1000:.1f} ms vs raw exec call "
                    f"{raw_s * 1000:.1f} ms (ratio {ours_s / raw_s:.2f}); raw exec of "
                    f"'setsid bash -c true' {floor_s * 1000:.1f} ms (ratio "
                    f"{ours_s / floor_s:.2f}); {per_command:.1f} requests per command"
                )
                grep_s, raw_grep_s, per_grep = bench_grep(double, args.files, args.grep_runs)
                print(
                    f"[{label}] grep over {args.files} files: {grep_s * 1000:.1f} ms / "
                    f"{per_grep} requests vs grep -rlF in the sandbox {raw_grep_s * 1000:.1f} ms "
                    f"(ratio {grep_s / raw_grep_s:.2f})"
                )


if __name__ == "__main__":
    main()
