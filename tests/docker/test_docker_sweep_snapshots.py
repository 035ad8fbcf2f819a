"""``skillruntime conversations sweep --snapshot-store`` on Docker conversations: the sweep
snapshots an idle conversation's workspace through a runtime attached to its recorded container
(options from the ``SKILLRUNTIME_DOCKER_*`` environment, as a user sets them), then removes the
container and volume; a new runtime with durability restores the files byte for byte. A
conversation whose container is gone gets no new one: with its volume still there the sweep keeps
it (the files would be lost), with the volume gone too there is nothing to snapshot
(docs/durability.md, "Before a sweep")."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import update

import docker_fixtures
from docker_fixtures import IMAGE, engine_client, labelled, suite_labels
from skillruntime.core.cli import build_cli
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.conversations.sweeps import record_copy_store
from skillruntime.core.durability import Durability
from skillruntime.core.errors import ConversationStoreError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.docker import DockerSkillRuntime

docker_run = docker_fixtures.docker_run

pytestmark = pytest.mark.slow  # real containers

BLOB = bytes(range(256)) * 33 + b"\x00\xff tail"


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'conversations.db'}"


def _environment(monkeypatch: pytest.MonkeyPatch, run: str) -> None:
    """The runtime options as a user of the CLI sets them (``DOCKER_HOST`` is the suite's)."""
    monkeypatch.setenv("SKILLRUNTIME_DOCKER_IMAGE", IMAGE)
    monkeypatch.setenv("SKILLRUNTIME_DOCKER_LABELS", json.dumps(suite_labels(run)))


def _idle_conversation(url: str, run: str, conversation_id: str) -> dict[str, bytes]:
    """A Docker conversation recorded at ``url`` whose workspace holds a few files, its record
    backdated by two days; returns the files' contents by relative path."""
    store = SqlConversationStore(url, create_schema=True)
    try:
        with DockerSkillRuntime(
            image=IMAGE,
            labels=suite_labels(run),
            conversation_id=conversation_id,
            conversation_store=store,
        ) as runtime:
            made = runtime.execute(
                SkillExecutionRequest(
                    command="mkdir -p src/deep && printf 'print(1)\\n' > src/main.py "
                    "&& printf 'notes' > src/deep/notes.txt"
                )
            )
            assert made.ok, made.stderr
            files = runtime.get_file_system()
            files.write_bytes(f"{runtime.default_working_directory}/blob.bin", BLOB)
            record = store.list_records()[0]
        with store._engine.begin() as connection:
            connection.execute(
                update(store._table)
                .where(store._table.c.storage_key == record.storage_key)
                .values(updated_at=datetime.now(UTC) - timedelta(days=2))
            )
    finally:
        store.close()
    return {"src/main.py": b"print(1)\n", "src/deep/notes.txt": b"notes", "blob.bin": BLOB}


def _snapshots(directory: Path, conversation: str) -> list[Any]:
    """The snapshots of ``conversation`` in the snapshot store at ``directory`` (none when the
    sweep never opened it)."""
    if not directory.exists():
        return []
    return list(LocalSnapshotStore(directory).list_snapshots(conversation))


def _sweep(url: str, *args: str) -> Any:
    return CliRunner().invoke(
        build_cli(),
        ["conversations", "sweep", "--idle", "1d", "--url", url, "--runtime", "docker", *args],
        env=dict(os.environ),
    )


def _remove_containers(run: str) -> None:
    containers, _ = labelled(run)
    client = engine_client()
    try:
        for container in containers:
            client.containers.get(container).remove(force=True)
    finally:
        client.close()


def test_the_sweep_snapshots_a_docker_workspace_the_next_runtime_restores(
    docker_run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, snapshots = _url(tmp_path), tmp_path / "snapshots"
    expected = _idle_conversation(url, docker_run, "swept-docker-1")
    _environment(monkeypatch, docker_run)
    result = _sweep(url, "--snapshot-store", str(snapshots), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["destroyed"], report["failed"], report["kept"]) == (1, 0, 0)
    assert labelled(docker_run) == ([], []), "the sweep left a container or volume"
    store = LocalSnapshotStore(snapshots)
    assert len(store.list_snapshots("swept-docker-1")) == 1
    with DockerSkillRuntime(
        image=IMAGE,
        labels=suite_labels(docker_run),
        conversation_id="swept-docker-1",
        conversation_store=InMemoryConversationStore(),
        durability=Durability(store),
    ) as runtime:
        assert runtime.execute(SkillExecutionRequest(command="true")).ok
        files = runtime.get_file_system()
        for path, content in expected.items():
            assert files.read_bytes(f"{runtime.default_working_directory}/{path}") == content
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_a_gone_container_is_never_replaced_by_the_sweep(
    docker_run: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, snapshots = _url(tmp_path), tmp_path / "snapshots"
    _idle_conversation(url, docker_run, "swept-docker-2")
    _remove_containers(docker_run)  # the volume still holds the workspace
    _environment(monkeypatch, docker_run)
    result = _sweep(url, "--snapshot-store", str(snapshots), "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert (report["destroyed"], report["failed"]) == (0, 1)
    containers, volumes = labelled(docker_run)
    assert containers == [], "the sweep created a container"
    assert len(volumes) == 1, "the workspace's volume must survive a failed snapshot"
    with SqlConversationStore(url) as store:
        assert [record.conversation_id for record in store.list_records()] == ["swept-docker-2"]
    # Once the volume is gone too there is nothing left to snapshot: the sweep goes on.
    client = engine_client()
    try:
        client.volumes.get(volumes[0]).remove(force=True)
    finally:
        client.close()
    result = _sweep(url, "--snapshot-store", str(snapshots), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["destroyed"] == 1
    assert labelled(docker_run) == ([], [])
    assert _snapshots(snapshots, "swept-docker-2") == []


def test_a_runtime_on_the_record_copy_discards_the_container_it_would_put_in_place(
    docker_run: str, tmp_path: Path
) -> None:
    """The container vanishing between the sweep's check and the attach: the runtime the
    reaper opens on :func:`record_copy_store` cannot record a replacement, so it removes the
    candidate it created and fails (the sweep keeps the conversation)."""
    url = _url(tmp_path)
    _idle_conversation(url, docker_run, "swept-docker-3")
    with SqlConversationStore(url) as store:
        record = store.list_records()[0]
    _remove_containers(docker_run)
    copy = record_copy_store(record)
    with (
        DockerSkillRuntime(
            image=IMAGE,
            labels=suite_labels(docker_run),
            conversation_id="swept-docker-3",
            conversation_store=copy,
        ) as runtime,
        pytest.raises(ConversationStoreError, match="replace the recorded sandbox"),
    ):
        runtime.execute(SkillExecutionRequest(command="true"))
    assert labelled(docker_run)[0] == [], "the candidate container was left behind"
    assert copy.get(record.storage_key) == record
    with SqlConversationStore(url) as store:
        assert store.list_records() == [record]
