"""Benchmark of the Docker runtime on the real Docker Engine: command overhead, the cold first
command, preparing a large skill, and the client's memory under a huge output.

Run from the repository root (the engine is ``DOCKER_HOST`` when a daemon answers there, else
the suite's private daemon, started by ``scripts/docker-engine.sh``)::

    .venv/bin/python tests/benchmarks/bench_docker.py [--runs 30] [--files 1000] [--output-mib 1024]

Measured in one run, each figure against a baseline measured in the same run on the same engine:

1. **execute("true")** on a conversation whose container runs — median seconds — against the
   same command as one raw exec through the runtime's own ``docker.APIClient``: ``exec_create``,
   ``exec_start`` (stdout and stderr demultiplexed, read to the end) and ``exec_inspect`` for
   the exit code, interleaved. Target ≤ 1.2.
2. **cold first command**: ``execute("true")`` of a new conversation (volume, container created
   and started, then the exec) against the same steps done raw with the same client (the volume,
   a container with the runtime's security settings and the volume mounted, start, one exec);
   interleaved, medians. Target ≤ 1.2.
3. **prepare of a ``--files``-file skill** into a conversation whose container runs: the engine
   requests it takes (HTTP requests of every ``docker.APIClient`` of the process, counted at
   ``send``; target ≤ 7: the marker's ``GET``, the staging path's check, once a container, the
   archive into the staging directory, the ``PUT`` handing it to the user and the exec moving
   it into place) and its median seconds against a raw ``put_archive`` of the same files
   as one tar, the tar built from the files in memory included (target ≤ 1.5); and, informative,
   against sending an already-built tar.
4. **client memory under ``--output-mib`` MiB of output**: a child process runs ``execute`` of a
   command writing that much to stdout and reports the growth of its peak RSS (``ru_maxrss``)
   over the same child running ``true``. Bound 64 MiB.
5. **write_text, read_text, stat** of a small file in a conversation — median seconds — each
   against one raw exec of ``sh -c true`` as the runtime's user (a file operation is one exec of
   a file script), interleaved. Target ≤ 1.3.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docker
from bench_common import Row, make_skill

from docker_engine import TEST_LABEL, Engine, ensure_engine
from skillruntime.core.models import Skill, SkillExecutionRequest, SkillPreparationRequest
from skillruntime.docker import DockerSkillRuntime
from skillruntime.docker.engine import KEEP_ALIVE_COMMAND
from skillruntime.docker.security import ContainerSecurity

TRUE = SkillExecutionRequest(command="true")


class RequestCounter:
    """HTTP requests sent by every ``docker.APIClient`` of this process while active."""

    def __init__(self) -> None:
        self.count = 0

    @contextlib.contextmanager
    def counting(self) -> Iterator[RequestCounter]:
        original = docker.APIClient.send

        def send(client: Any, request: Any, **options: Any) -> Any:
            self.count += 1
            return original(client, request, **options)

        docker.APIClient.send = send
        try:
            yield self
        finally:
            docker.APIClient.send = original


class Bench:
    """The engine, the image, and the runtimes of one benchmark run (every container and volume
    labelled ``skillruntime-test=<run>`` and removed at the end)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.run_id = f"bench-{uuid.uuid4().hex[:8]}"
        self.labels = {TEST_LABEL: self.run_id}
        self.client = engine.client(timeout=300)

    def runtime(self, conversation: str | None = None) -> DockerSkillRuntime:
        return DockerSkillRuntime(
            docker_host=self.engine.host,
            image=self.engine.image,
            conversation_id=conversation or f"{self.run_id}-{uuid.uuid4().hex[:6]}",
            labels=self.labels,
        )

    def close(self) -> None:
        selector = {"label": f"{TEST_LABEL}={self.run_id}"}
        for container in self.client.containers.list(all=True, filters=selector):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        for volume in self.client.volumes.list(filters=selector):
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)
        self.client.close()


def _api(runtime: DockerSkillRuntime) -> Any:
    """The runtime's own ``docker.APIClient`` (for the raw baselines through the same client)."""
    return runtime.engine.api


def _container(runtime: DockerSkillRuntime) -> str:
    container_id = runtime.container_id
    assert container_id is not None
    return container_id


def raw_exec(api: Any, container_id: str, argv: list[str], user: str = "") -> int:
    """One command as the engine runs it: create, start and read both streams, exit code."""
    exec_id = api.exec_create(container_id, argv, stdout=True, stderr=True, user=user)["Id"]
    for _chunk in api.exec_start(exec_id, stream=True, demux=True):
        pass
    return int(api.exec_inspect(exec_id)["ExitCode"])


def _interleaved(
    first: Callable[[], Any], second: Callable[[], Any], runs: int
) -> tuple[float, float]:
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        first()
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        second()
        theirs.append(time.perf_counter() - start)
    return statistics.median(ours), statistics.median(theirs)


def bench_execute(bench: Bench, runs: int) -> tuple[float, float]:
    """Median seconds of ``execute("true")`` and of one raw exec of ``sh -c true``."""
    runtime = bench.runtime()
    try:
        assert runtime.execute(TRUE).exit_code == 0  # the container runs
        api, container_id = _api(runtime), _container(runtime)
        user = api.inspect_container(container_id)["Config"]["User"]
        assert raw_exec(api, container_id, ["sh", "-c", "true"], user) == 0
        return _interleaved(
            lambda: runtime.execute(TRUE), lambda: raw_exec(api, container_id, ["true"], user), runs
        )
    finally:
        runtime.close()


def bench_files(bench: Bench, runs: int) -> dict[str, tuple[float, float]]:
    """Median seconds of a small ``write_text``, ``read_text`` and ``stat`` in a conversation,
    each against one raw exec of ``sh -c true`` as the same user (a file operation is one exec
    of a file script), interleaved."""
    runtime = bench.runtime()
    try:
        assert runtime.execute(TRUE).exit_code == 0
        api, container_id = _api(runtime), _container(runtime)
        user = api.inspect_container(container_id)["Config"]["User"]
        fs = runtime.get_file_system()
        fs.write_text("bench/x.txt", "x\n")
        counter = iter(range(10**9))
        operations: dict[str, Callable[[], Any]] = {
            "write_text": lambda: fs.write_text(f"bench/w{next(counter)}.txt", "hello\n"),
            "read_text": lambda: fs.read_text("bench/x.txt"),
            "stat": lambda: fs.stat("bench/x.txt"),
        }
        return {
            name: _interleaved(
                operation, lambda: raw_exec(api, container_id, ["sh", "-c", "true"], user), runs
            )
            for name, operation in operations.items()
        }
    finally:
        runtime.close()


def _raw_cold(bench: Bench, api: Any) -> None:
    """Volume, container (the runtime's security settings, the volume mounted), start, exec."""
    name = f"{bench.run_id}-raw-{uuid.uuid4().hex[:6]}"
    api.create_volume(name=name, driver="local", labels=bench.labels)
    host_config = api.create_host_config(
        binds=[f"{name}:/workspace/conversations:rw"], **ContainerSecurity().host_config()
    )
    created = api.create_container(
        bench.engine.image,
        command=list(KEEP_ALIVE_COMMAND),
        user="skill",
        labels=bench.labels,
        host_config=host_config,
        detach=True,
        name=name,
    )
    api.start(created["Id"])
    assert raw_exec(api, created["Id"], ["sh", "-c", "true"], "skill") == 0


def bench_cold(bench: Bench, runs: int) -> tuple[float, float]:
    """Median seconds of a new conversation's first ``execute("true")`` and of the same steps
    done raw (each conversation's container and volume removed between runs, untimed)."""
    anchor = bench.runtime()
    try:
        anchor.execute(TRUE)  # the image is loaded and the client's API version negotiated
        api = _api(anchor)
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(runs):
            runtime = bench.runtime()
            start = time.perf_counter()
            assert runtime.execute(TRUE).exit_code == 0
            ours.append(time.perf_counter() - start)
            runtime.close()
            start = time.perf_counter()
            _raw_cold(bench, api)
            theirs.append(time.perf_counter() - start)
        return statistics.median(ours), statistics.median(theirs)
    finally:
        anchor.close()


def _tar_of(skill: Skill) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(skill.base_path, arcname=Path(skill.base_path).name)
    return buffer.getvalue()


def bench_prepare(bench: Bench, skill: Skill, runs: int) -> tuple[float, int, float, float]:
    """Median seconds and most requests of a prepare into a fresh conversation; median seconds
    of the raw ``put_archive`` of the same files, with the tar built and with it built before."""
    counter = RequestCounter()
    ours: list[float] = []
    counts: list[int] = []
    raw_built: list[float] = []
    raw_sent: list[float] = []
    for index in range(runs):
        runtime = bench.runtime()
        try:
            assert runtime.execute(TRUE).exit_code == 0
            api, container_id = _api(runtime), _container(runtime)
            with counter.counting():
                counter.count = 0
                start = time.perf_counter()
                runtime.prepare(SkillPreparationRequest(skills=(skill,)))
                ours.append(time.perf_counter() - start)
                counts.append(counter.count)
            built, sent = f"/tmp/raw-built-{index}", f"/tmp/raw-sent-{index}"
            assert raw_exec(api, container_id, ["mkdir", "-p", built, sent]) == 0
            start = time.perf_counter()
            assert api.put_archive(container_id, built, _tar_of(skill))
            raw_built.append(time.perf_counter() - start)
            data = _tar_of(skill)
            start = time.perf_counter()
            assert api.put_archive(container_id, sent, data)
            raw_sent.append(time.perf_counter() - start)
        finally:
            runtime.close()
    return (
        statistics.median(ours),
        max(counts),
        statistics.median(raw_built),
        statistics.median(raw_sent),
    )


_RSS_CHILD = """
import json, resource, sys
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.docker import DockerSkillRuntime
runtime = DockerSkillRuntime(
    docker_host=sys.argv[1], image=sys.argv[2], conversation_id=sys.argv[3],
    labels={sys.argv[4]: sys.argv[5]},
)
runtime.execute(SkillExecutionRequest(command="true"))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = __import__("time").perf_counter()
result = runtime.execute(SkillExecutionRequest(command=sys.argv[6], timeout_seconds=900))
seconds = __import__("time").perf_counter() - started
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
runtime.close()
print(json.dumps({"growth_kib": after - before, "peak_kib": after, "seconds": seconds,
                  "exit_code": result.exit_code}))
"""


def bench_output(bench: Bench, output_mib: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a child reports running a ``output_mib`` MiB output, and running ``true``."""
    figures = []
    for command in (f"yes | head -c {output_mib * 1024 * 1024}", "true"):
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                _RSS_CHILD,
                bench.engine.host,
                bench.engine.image,
                f"{bench.run_id}-rss-{uuid.uuid4().hex[:6]}",
                TEST_LABEL,
                bench.run_id,
                command,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=1200,
        )
        figures.append(json.loads(child.stdout.splitlines()[-1]))
    assert figures[0]["exit_code"] == 0, figures
    return figures[0], figures[1]


def measure(runs: int, cold_runs: int, files: int, prepare_runs: int, output_mib: int) -> list[Row]:
    """The rows of one benchmark run with these sizes."""
    rows: list[Row] = []
    bench = Bench(ensure_engine())
    try:
        ours, raw = bench_execute(bench, runs)
        rows.append(Row('execute("true")', ours, raw, target=1.2, note="one raw exec, same client"))
        for name, (ours, raw) in bench_files(bench, runs).items():
            rows.append(Row(name, ours, raw, target=1.3, note="one raw exec of sh -c true"))
        ours, raw = bench_cold(bench, cold_runs)
        rows.append(
            Row(
                "cold first command",
                ours,
                raw,
                target=1.2,
                note="volume, create, start, exec done raw",
            )
        )
        with tempfile.TemporaryDirectory() as scratch:
            skill = make_skill(Path(scratch) / "bench-skill", files, 2048)
            seconds, requests, raw_built, raw_sent = bench_prepare(bench, skill, prepare_runs)
        rows.append(
            Row(
                f"prepare, {files} files",
                requests,
                7,
                unit="requests",
                target=1.0,
                note="7: marker GET, staging check (once a container), 2 PUTs, the move",
            )
        )
        rows.append(
            Row(
                f"prepare, {files} files",
                seconds,
                raw_built,
                target=1.5,
                note="tar built from the files + raw put_archive",
            )
        )
        rows.append(
            Row(f"prepare, {files} files", seconds, raw_sent, note="raw put_archive of a built tar")
        )
        big, small = bench_output(bench, output_mib)
        rows.append(
            Row(
                f"RSS growth, {output_mib} MiB of output",
                big["growth_kib"] / 1024,
                64.0,
                unit="MiB",
                target=1.0,
                note=f"bound 64 MiB (peak RSS {big['peak_kib'] / 1024:.0f} MiB, 'true' "
                f"{small['peak_kib'] / 1024:.0f} MiB; {big['seconds']:.1f} s)",
            )
        )
    finally:
        bench.close()
    return rows


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    if quick:
        return measure(runs=3, cold_runs=1, files=50, prepare_runs=1, output_mib=8)
    return measure(runs=30, cold_runs=5, files=1000, prepare_runs=3, output_mib=1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--prepare-runs", type=int, default=3)
    parser.add_argument("--output-mib", type=int, default=1024)
    args = parser.parse_args()
    rows = measure(args.runs, args.cold_runs, args.files, args.prepare_runs, args.output_mib)
    for row in rows:
        print(
            f"{row.name}: {row.value:.4g} {row.unit} vs {row.baseline:.4g} {row.unit} "
            f"({row.note}); ratio {row.ratio:.3f}"
            + ("" if row.target is None else f", target <= {row.target:g}")
        )


if __name__ == "__main__":
    main()
