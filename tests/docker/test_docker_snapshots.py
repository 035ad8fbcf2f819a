"""Workspace snapshots on the real engine: a round trip through the Docker runtime, and a
conversation whose container and volume vanished behind the runtime's back, restored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker_fixtures
from docker_fixtures import IMAGE, engine_client, labelled, suite_labels
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.durability import WorkspaceSnapshots
from skillruntime.core.durability.common import decode_listing, listing_request
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import ListingEntry, LocalSnapshotStore
from skillruntime.docker import DockerSkillRuntime

docker_run = docker_fixtures.docker_run

POPULATE = r"""
set -e
mkdir -p src/deep empty/nested 'odd dir'
printf 'print(1)\n' > src/main.py
printf '#!/bin/sh\necho ran\n' > src/run.sh && chmod 755 src/run.sh
printf 'secret' > src/deep/private && chmod 600 src/deep/private
printf 'nl' > "$(printf 'line\nbreak')"
printf 'tab' > "$(printf 'tab\tname')"
printf 'q' > "odd dir/it's \$HOME"
printf 'dash' > ./-dash
: > zero.bin
ln -s src/main.py latest
ln -s ../empty src/up
i=0; while [ $i -lt 40 ]; do printf "n$i" > "src/f$i.txt"; i=$((i+1)); done
chmod 750 'odd dir'
"""


def _runtime(run: str, store: InMemoryConversationStore, conversation: str) -> DockerSkillRuntime:
    options: dict[str, Any] = {
        "image": IMAGE,
        "labels": suite_labels(run),
        "conversation_id": conversation,
        "conversation_store": store,
    }
    return DockerSkillRuntime(**options)


def _listing(runtime: DockerSkillRuntime) -> list[ListingEntry]:
    result = runtime.execute(listing_request(timeout_seconds=120, max_output_bytes=1 << 24))
    return [e for e in decode_listing(result, max_entries=100_000) if e.path != "skills"]


def _populate(runtime: DockerSkillRuntime) -> None:
    result = runtime.execute(SkillExecutionRequest(command=POPULATE))
    assert result.ok, result.stderr


def test_a_round_trip_through_the_docker_runtime(docker_run: str, tmp_path: Path) -> None:
    store = InMemoryConversationStore()
    snapshots = WorkspaceSnapshots(LocalSnapshotStore(tmp_path / "snapshots"))
    with _runtime(docker_run, store, "snap-docker-1") as runtime:
        _populate(runtime)
        before = _listing(runtime)
        result = snapshots.snapshot(runtime, conversation_id="snap-docker-1")
        assert result.changed
        assert result.commands == 2  # the listing, and one batch of small files
        assert result.requests == 2
        runtime.execute(
            SkillExecutionRequest(command="rm -rf -- ./* && printf x > stray && rm -f src/f1.txt")
        )
        restored = snapshots.restore(runtime, conversation_id="snap-docker-1")
        assert restored.files == len({e.path for e in before if e.kind == "file"})
        assert _listing(runtime) == before
        # one file changed: one object read out of the sandbox
        runtime.execute(SkillExecutionRequest(command="printf changed > src/f7.txt"))
        again = snapshots.snapshot(runtime, conversation_id="snap-docker-1")
        assert again.objects_uploaded == 1
        assert again.requests == 2
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_a_container_and_volume_removed_behind_the_runtimes_back_are_restored(
    docker_run: str, tmp_path: Path
) -> None:
    store = InMemoryConversationStore()
    snapshots = WorkspaceSnapshots(LocalSnapshotStore(tmp_path / "snapshots"))
    with _runtime(docker_run, store, "snap-docker-2") as runtime:
        _populate(runtime)
        before = _listing(runtime)
        snapshots.snapshot(runtime, conversation_id="snap-docker-2")
    containers, volumes = labelled(docker_run)
    assert containers
    assert volumes
    client = engine_client()
    try:
        for container in containers:
            client.containers.get(container).remove(force=True)
        for volume in volumes:
            client.volumes.get(volume).remove(force=True)
    finally:
        client.close()
    with _runtime(docker_run, store, "snap-docker-2") as runtime:
        assert _listing(runtime) == []  # a new container on a new, empty volume
        restored = snapshots.restore(runtime, conversation_id="snap-docker-2")
        assert restored.deleted == 0
        assert _listing(runtime) == before
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_a_restore_sends_its_files_in_one_archive_moved_by_directory(
    docker_run: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """200 files in 4 directories: one archive of the files (and the staging directory's
    hand-over), one placing exec with one group per directory, never one ``mv`` per file."""
    store = InMemoryConversationStore()
    snapshots = WorkspaceSnapshots(LocalSnapshotStore(tmp_path / "snapshots"))
    with _runtime(docker_run, store, "snap-docker-3") as runtime:
        made = runtime.execute(
            SkillExecutionRequest(
                command="for d in a b c 'd x'; do mkdir -p \"$d\"; i=0; "
                'while [ $i -lt 50 ]; do printf "$d$i" > "$d/f$i"; i=$((i+1)); done; done'
            )
        )
        assert made.ok, made.stderr
        before = _listing(runtime)
        snapshots.snapshot(runtime, conversation_id="snap-docker-3")
        assert runtime.execute(SkillExecutionRequest(command="rm -rf -- ./*")).ok
        archives: list[str] = []
        places: list[list[str]] = []
        engine = runtime.engine
        real_put = type(engine).put_archive

        def put_archive(self: Any, container_id: str, path: str, data: Any) -> None:
            archives.append(path)
            real_put(self, container_id, path, data)

        monkeypatch.setattr(type(engine), "put_archive", put_archive)
        from skillruntime.docker import file_scripts, script_exec

        real_run = script_exec.ScriptExec.run

        def run(self: Any, container_id: str, argv: Any, **kwargs: Any) -> Any:
            if file_scripts.PLACE_SCRIPT in argv:
                places.append(list(argv))
            return real_run(self, container_id, argv, **kwargs)

        monkeypatch.setattr(script_exec.ScriptExec, "run", run)
        restored = snapshots.restore(runtime, conversation_id="snap-docker-3")
        assert restored.files == 200
        assert len(archives) == 2  # the files, then the staging directory handed to the user
        assert len(places) == 1
        triples = places[0][7:]
        assert triples[0::3] == ["G"] * 4  # one group per directory, no file on its own
        monkeypatch.undo()
        assert _listing(runtime) == before
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])
