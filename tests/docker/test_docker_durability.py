"""Automatic durability on the real engine: a snapshot when the runtime closes, and a container
and volume removed behind the runtime's back restored before the next command runs; two runtime
objects (two "nodes") racing the restore restore once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import docker_fixtures
from docker_fixtures import IMAGE, engine_client, labelled, suite_labels
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.durability import Durability
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.docker import DockerSkillRuntime

docker_run = docker_fixtures.docker_run

POPULATE = r"""
set -e
mkdir -p src/deep empty
printf 'print(1)\n' > src/main.py
printf 'secret' > src/deep/private && chmod 600 src/deep/private
ln -s src/main.py latest
"""
CHECK = (
    "cat src/main.py src/deep/private; stat -c %a src/deep/private; readlink latest; ls -d empty"
)


def _runtime(run: str, store: Any, conversation: str, durability: Durability) -> DockerSkillRuntime:
    return DockerSkillRuntime(
        image=IMAGE,
        labels=suite_labels(run),
        conversation_id=conversation,
        conversation_store=store,
        durability=durability,
    )


def _remove_everything(run: str) -> None:
    containers, volumes = labelled(run)
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


def test_a_conversation_survives_its_container_and_volume(docker_run: str, tmp_path: Path) -> None:
    store = InMemoryConversationStore()
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))
    with _runtime(docker_run, store, "durable-docker-1", durability) as runtime:
        assert runtime.execute(SkillExecutionRequest(command=POPULATE)).ok
        expected = runtime.execute(SkillExecutionRequest(command=CHECK)).stdout
    # closing took a snapshot and recorded it
    record = next(iter(store.list_records()))
    assert record.snapshot_id is not None
    assert durability.store.latest("durable-docker-1") is not None
    with _runtime(docker_run, store, "durable-docker-1", durability) as runtime:
        assert runtime.execute(SkillExecutionRequest(command="true")).ok
        _remove_everything(docker_run)  # behind the runtime's back, while it is open
        # the command that finds the container gone runs on a restored workspace
        found = runtime.execute(SkillExecutionRequest(command=CHECK))
        assert found.ok, found.stderr
        assert found.stdout == expected
        durable = runtime.durable_workspace
        assert durable is not None
        assert len(durable.restores) == 1
        record = next(iter(store.list_records()))
        assert not record.restore_pending
        assert record.sandbox_id == runtime.sandbox_id
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])
    assert durability.store.list_snapshots("durable-docker-1") == []


def test_a_replacement_that_kept_its_volume_is_not_restored(
    docker_run: str, tmp_path: Path
) -> None:
    store = InMemoryConversationStore()
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))
    with _runtime(docker_run, store, "durable-docker-2", durability) as runtime:
        assert runtime.execute(SkillExecutionRequest(command="echo old > a.txt")).ok
    with _runtime(docker_run, store, "durable-docker-2", durability) as runtime:
        # a change after the last snapshot, then only the container goes (its volume stays)
        assert runtime.execute(SkillExecutionRequest(command="echo newer > a.txt")).ok
        containers, _ = labelled(docker_run)
        client = engine_client()
        try:
            for container in containers:
                client.containers.get(container).remove(force=True)
        finally:
            client.close()
        found = runtime.execute(SkillExecutionRequest(command="cat a.txt"))
        assert found.stdout == "newer\n"  # the volume's files, not the older snapshot
        durable = runtime.durable_workspace
        assert durable is not None
        assert durable.restores == []
        runtime.destroy_conversation()
    assert labelled(docker_run) == ([], [])


def test_two_nodes_racing_the_restore_restore_once(docker_run: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'conversations.db'}"
    store = SqlConversationStore(url, create_schema=True)
    snapshots = LocalSnapshotStore(tmp_path / "snapshots")
    durability = Durability(snapshots)
    try:
        with _runtime(docker_run, store, "durable-docker-3", durability) as runtime:
            assert runtime.execute(SkillExecutionRequest(command=POPULATE)).ok
            expected = runtime.execute(SkillExecutionRequest(command=CHECK)).stdout
        _remove_everything(docker_run)
        stores = [SqlConversationStore(url) for _ in range(2)]
        nodes = [_runtime(docker_run, s, "durable-docker-3", durability) for s in stores]
        outputs: list[str] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(nodes))

        def work(node: DockerSkillRuntime) -> None:
            try:
                barrier.wait()
                outputs.append(node.execute(SkillExecutionRequest(command=CHECK)).stdout)
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=work, args=(node,)) for node in nodes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert errors == []
        assert outputs == [expected, expected]
        restores = sum(len(node.durable_workspace.restores) for node in nodes)  # type: ignore[union-attr]
        assert restores == 1
        assert nodes[0].sandbox_id == nodes[1].sandbox_id
        nodes[0].destroy_conversation()
        for node in nodes:
            node.close()
        for extra in stores:
            extra.close()
    finally:
        store.close()
    assert labelled(docker_run) == ([], [])
