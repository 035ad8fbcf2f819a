"""Benchmark of workspace snapshots through a runtime: the incremental snapshot, the full
restore, and the client's memory while snapshotting a large workspace.

Run from the repository root::

    .venv/bin/python tests/benchmarks/bench_snapshots.py [--files N] [--runs N] [--large-mib N]
    .venv/bin/python tests/benchmarks/bench_snapshots.py --docker   # the Docker rows as well

Measured in one run on the local runtime (and, with ``--docker``, on the Docker runtime of the
engine ``DOCKER_HOST`` names), each figure against a baseline of the same run:

1. **incremental snapshot** after a one-file change in a ``--files``-file workspace (1 KiB
   files, 10 directories): the requests it makes to the sandbox (target ≤ 3: the listing
   command and one read) and its median seconds against writing that file through the runtime's
   file system (target ≤ 1.5).
2. **full restore** of the workspace into an empty one (fetch and verify every object from the
   local store, one listing, one command for the directories, the batch upload, one command
   for the modes) against a raw tar upload of the same files: the tar built in memory from the
   files and unpacked in the workspace (local: ``tar -x`` in a subprocess; Docker:
   ``put_archive`` through the runtime's own engine client). Target ≤ 1.5.
3. **client memory** (peak of Python allocations, ``tracemalloc``) while snapshotting a
   ``--large-mib`` MiB workspace (64 MiB files) into a local store, against the 64 MiB bound.

Quick mode: 100 files, 2 runs, a 16 MiB workspace, local runtime only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import Row, default_scratch

from skillruntime.core.durability import WorkspaceSnapshots
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.local import LocalSkillRuntime

MIB = 1024 * 1024


class Counting:
    """A runtime seen through its public SPI, counting the requests made to it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests = 0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def default_working_directory(self) -> str:
        return str(self.inner.default_working_directory)

    def execute(self, request: SkillExecutionRequest) -> Any:
        self.requests += 1
        return self.inner.execute(request)

    def get_file_system(self) -> Any:
        outer = self
        inner = self.inner.get_file_system()

        class FileSystem:
            def read_stream(self, path: str, *args: Any) -> Any:
                outer.requests += 1
                return inner.read_stream(path, *args)

            def upload_files(self, files: Any) -> int:
                outer.requests += 1
                return int(inner.upload_files(files))

        return FileSystem()


def _tree(root: Path, files: int) -> list[Path]:
    paths = []
    for index in range(files):
        directory = root / f"d{index % 10}"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"f{index:05d}.dat"
        path.write_bytes(os.urandom(1024))
        if index % 10 == 0:
            path.chmod(0o755)
        paths.append(path)
    return paths


def _tar(root: Path, owner: tuple[int, int]) -> bytes:
    """The tree as one tar, its members owned by ``owner`` (the sandbox user's uid and gid)."""

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid = owner
        info.uname = info.gname = ""
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(root.rglob("*")):
            archive.add(path, arcname=str(path.relative_to(root)), recursive=False, filter=owned)
    return buffer.getvalue()


WIPE = SkillExecutionRequest(command="find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +")


def _wipe(runtime: Any) -> None:
    result = runtime.execute(WIPE)
    assert result.ok, result.stderr


def measure_runtime(
    label: str,
    runtime: Any,
    conversation: str,
    scratch: Path,
    files: int,
    runs: int,
    raw_tar_upload: Callable[[bytes], None],
) -> list[Row]:
    """Rows 1 and 2 on one runtime (its workspace is filled through its own file system)."""
    source = scratch / f"source-{label}"
    _tree(source, files)
    fs = runtime.get_file_system()
    workspace = runtime.default_working_directory
    fs.upload_files(
        (path, f"{workspace}/{path.relative_to(source)}", bool(path.stat().st_mode & 0o100))
        for path in sorted(source.rglob("*"))
        if path.is_file()
    )
    store = LocalSnapshotStore(scratch / f"store-{label}")
    snapshots = WorkspaceSnapshots(store)
    snapshots.snapshot(runtime, conversation_id=conversation)
    target = f"{workspace}/d3/f00003.dat"
    snapshot_times, write_times, requests = [], [], []
    for run in range(runs):
        payload = os.urandom(1024)
        started = time.perf_counter()
        fs.write_bytes(target, payload)
        write_times.append(time.perf_counter() - started)
        counting = Counting(runtime)
        started = time.perf_counter()
        result = snapshots.snapshot(counting, conversation_id=conversation)  # type: ignore[arg-type]
        snapshot_times.append(time.perf_counter() - started)
        assert result.objects_uploaded == 1, (run, result)
        requests.append(counting.requests)
    ids = runtime.execute(SkillExecutionRequest(command="id -u; id -g")).stdout.split()
    owner = (int(ids[0]), int(ids[1]))
    restore_times, tar_times = [], []
    for _ in range(runs):
        _wipe(runtime)
        counting = Counting(runtime)
        started = time.perf_counter()
        snapshots.restore(counting, conversation_id=conversation)  # type: ignore[arg-type]
        restore_times.append(time.perf_counter() - started)
        _wipe(runtime)
        started = time.perf_counter()
        raw_tar_upload(_tar(source, owner))
        tar_times.append(time.perf_counter() - started)
    return [
        Row(
            f"{label}: incremental snapshot, 1 of {files} files changed (requests)",
            float(max(requests)),
            3.0,
            unit="requests",
            target=1.0,
            note="budget of 3 requests to the sandbox",
        ),
        Row(
            f"{label}: incremental snapshot, 1 of {files} files changed",
            statistics.median(snapshot_times),
            statistics.median(write_times),
            target=1.5,
            note="writing that file through the runtime",
        ),
        Row(
            f"{label}: full restore of {files} files",
            statistics.median(restore_times),
            statistics.median(tar_times),
            target=1.5,
            note="a raw tar upload of the same files (tar built in memory)",
        ),
    ]


def measure_memory(scratch: Path, large_mib: int) -> Row:
    root = scratch / "large-conversations"
    workspace = root / "large"
    workspace.mkdir(parents=True)
    chunk = os.urandom(MIB)
    remaining = large_mib
    index = 0
    while remaining > 0:
        size = min(64, remaining)
        with open(workspace / f"big-{index}.bin", "wb") as handle:
            for _ in range(size):
                handle.write(chunk)
        remaining -= size
        index += 1
    store_dir = Path(tempfile.mkdtemp(prefix="bench-snap-store-"))
    try:
        with LocalSkillRuntime(conversation_id="large", conversations_root=root) as runtime:
            snapshots = WorkspaceSnapshots(LocalSnapshotStore(store_dir))
            tracemalloc.start()
            try:
                snapshots.snapshot(runtime, conversation_id="large")
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
        shutil.rmtree(workspace, ignore_errors=True)
    return Row(
        f"local: client memory snapshotting {large_mib} MiB",
        peak / MIB,
        64.0,
        unit="MiB",
        target=1.0,
        note="the 64 MiB bound (peak Python allocations)",
    )


@contextlib.contextmanager
def _scratch(directory: str | None) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-snapshots-", dir=directory) as path:
        yield Path(path)


def measure_local(scratch: Path, files: int, runs: int) -> list[Row]:
    root = scratch / "conversations"
    conversation = f"bench-{uuid.uuid4().hex[:8]}"
    (root / conversation).mkdir(parents=True)
    with LocalSkillRuntime(conversation_id=conversation, conversations_root=root) as runtime:
        workspace = runtime.default_working_directory

        def raw_tar_upload(data: bytes) -> None:
            subprocess.run(["tar", "-xf", "-", "-C", workspace], input=data, check=True)

        return measure_runtime("local", runtime, conversation, scratch, files, runs, raw_tar_upload)


def measure_docker(scratch: Path, files: int, runs: int, image: str | None = None) -> list[Row]:
    import docker

    from docker_engine import TEST_LABEL, ensure_engine
    from skillruntime.docker import DockerSkillRuntime

    engine = ensure_engine()
    run_id = f"bench-snap-{uuid.uuid4().hex[:8]}"
    labels = {TEST_LABEL: run_id}
    conversation = f"{run_id}-c"
    client = engine.client(timeout=300)
    try:
        with DockerSkillRuntime(
            docker_host=engine.host,
            image=image or engine.image,
            conversation_id=conversation,
            labels=labels,
        ) as runtime:
            runtime.execute(SkillExecutionRequest(command="true"))
            workspace = runtime.default_working_directory
            api = runtime.engine.api

            def raw_tar_upload(data: bytes) -> None:
                container = runtime.container_id
                assert container is not None
                api.put_archive(container, workspace, data)

            rows = measure_runtime(
                "docker", runtime, conversation, scratch, files, runs, raw_tar_upload
            )
            runtime.destroy_conversation()
            return rows
    finally:
        selector = {"label": f"{TEST_LABEL}={run_id}"}
        for container in client.containers.list(all=True, filters=selector):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        for volume in client.volumes.list(filters=selector):
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)
        client.close()


def measure(
    files: int,
    runs: int,
    large_mib: int,
    *,
    docker: bool = False,
    docker_image: str | None = None,
    directory: str | None = None,
) -> list[Row]:
    with _scratch(directory or default_scratch()) as scratch:
        rows = measure_local(scratch, files, runs)
        if docker:
            rows += measure_docker(scratch, files, runs, docker_image)
    with _scratch(None) as scratch:
        rows.append(measure_memory(scratch, large_mib))
    return rows


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``). The Docker rows are measured
    when ``SKILLRUNTIME_BENCH_SNAPSHOTS_DOCKER=1`` (never in quick mode)."""
    if quick:
        return measure(files=100, runs=2, large_mib=16)
    docker = os.environ.get("SKILLRUNTIME_BENCH_SNAPSHOTS_DOCKER") == "1"
    image = os.environ.get("SKILLRUNTIME_BENCH_SNAPSHOTS_IMAGE") or None
    return measure(files=1000, runs=5, large_mib=1024, docker=docker, docker_image=image)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--large-mib", type=int, default=1024)
    parser.add_argument("--docker", action="store_true")
    parser.add_argument("--docker-image", default=None, help="default: the suite's test image")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    rows = measure(
        args.files,
        args.runs,
        args.large_mib,
        docker=args.docker,
        docker_image=args.docker_image,
        directory=args.dir,
    )
    for row in rows:
        print(
            f"{row.name}: {row.value:.4g} {row.unit} vs {row.baseline:.4g} {row.unit} "
            f"({row.note}); ratio {row.ratio:.3f}"
            + ("" if row.target is None else f", target <= {row.target:g}")
        )


if __name__ == "__main__":
    main()
