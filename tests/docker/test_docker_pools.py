"""Warm pools of the Docker runtime on a real engine (docs/docker-runtime.md, "Warm pools").

A conversation served from the pool behaves like a cold one (user, environment, skills, files
that outlive the container); two nodes on one PostgreSQL database never claim one member; a
claimer that died holding a claim leaves nothing behind; destroying the conversation and closing
the pool remove everything (the session's leak check fails on any labelled leftover).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import docker_fixtures
from docker_fixtures import IMAGE, ROOT, engine_client, labelled, suite_labels
from doubles._polling import wait_until
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.models import SkillExecutionRequest, SkillPreparationRequest
from skillruntime.core.skills import discover_skills
from skillruntime.docker import DockerSkillRuntime
from skillruntime.docker.pool import DockerPool, close_pools, pool_lease_key
from skillruntime.docker.security import ContainerSecurity
from sql_databases import temporary_database

docker_run = docker_fixtures.docker_run

pytestmark = pytest.mark.slow  # real containers, several seconds each


@pytest.fixture(autouse=True)
def _pools_closed() -> Iterator[None]:
    yield
    close_pools()


def _run(runtime: DockerSkillRuntime, command: str) -> Any:
    result = runtime.execute(SkillExecutionRequest(command=command, timeout_seconds=30))
    assert result.exit_code == 0, result.stderr
    return result


def _runtime(run: str, conversation: str, store: Any, **extra: Any) -> DockerSkillRuntime:
    return DockerSkillRuntime(
        image=IMAGE,
        labels=suite_labels(run),
        conversations_root=ROOT,
        conversation_id=conversation,
        conversation_store=store,
        base_environment={"GREETING": "hello"},
        **extra,
    )


PROBE = 'id -u; id -g; stat -c "%u:%g %a" .; echo "$GREETING"; pwd'


def test_a_pooled_conversation_is_indistinguishable_from_a_cold_one(docker_run: str) -> None:
    store = InMemoryConversationStore()
    with _runtime(docker_run, "cold", store) as cold:
        expected = _run(cold, PROBE).stdout.replace("/cold", "/CONV")
        cold.destroy_conversation()
    with _runtime(docker_run, "warm", store, pool_size=1) as warm:
        pool = warm.pool
        assert pool is not None
        assert pool.wait_ready()
        assert _run(warm, PROBE).stdout.replace("/warm", "/CONV") == expected
        assert (pool.hits, pool.misses) == (1, 0)
        record = warm.conversation_record
        assert record is not None
        assert record.sandbox_id == warm.container_id
        member_volume = record.sandbox_storage
        assert member_volume is not None
        assert member_volume.startswith("skillruntime-pool-")
        assert warm.volume == member_volume
        prepared = warm.prepare(SkillPreparationRequest(skills=discover_skills("examples/skills")))
        assert "SKILL.md" in _run(warm, f"ls {prepared[0].base_path}").stdout
        _run(warm, "echo kept > notes.txt")
        first = warm.container_id
        assert first is not None
    client = engine_client()
    try:
        client.containers.get(first).remove(force=True)
    finally:
        client.close()
    with _runtime(docker_run, "warm", store, pool_size=1) as again:
        assert _run(again, "cat notes.txt").stdout == "kept\n"
        assert again.container_id != first
        assert again.volume == member_volume
        assert _run(again, PROBE).stdout.replace("/warm", "/CONV") == expected
        replacement = again.container_id
        again.destroy_conversation()
    containers, volumes = labelled(docker_run)
    assert first not in containers
    assert replacement not in containers
    assert member_volume not in volumes
    assert pool.wait_ready()
    pool.close()
    assert labelled(docker_run) == ([], [])


def _bare_pool(run: str, store: Any, size: int) -> DockerPool:
    from skillruntime.docker.engine import DockerEngine

    return DockerPool(
        DockerEngine(),
        store,
        size=size,
        image=IMAGE,
        security=ContainerSecurity(),
        environment={},
        labels=suite_labels(run),
        conversations_root=ROOT,
    )


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with temporary_database("postgresql") as url:
        yield url


def test_two_nodes_never_claim_one_member(docker_run: str, postgres_url: str) -> None:
    node_a = SqlConversationStore(postgres_url, create_schema=True)
    node_b = SqlConversationStore(postgres_url, create_schema=True)
    pool_a = _bare_pool(docker_run, node_a, 1)
    pool_b = _bare_pool(docker_run, node_b, 0)  # makes none: claims what node A made
    try:
        pool_a.start()
        assert pool_a.wait_ready()
        barrier = threading.Barrier(2)
        claims: dict[str, Any] = {}

        def claim(name: str, pool: DockerPool) -> None:
            barrier.wait()
            claims[name] = pool.claim(f"owner-{name}")

        threads = [
            threading.Thread(target=claim, args=("a", pool_a)),
            threading.Thread(target=claim, args=("b", pool_b)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        won = [claimed for claimed in claims.values() if claimed is not None]
        assert len(won) == 1
        assert pool_a.hits + pool_b.hits == 1
        assert pool_a.misses + pool_b.misses == 1
        pool_a.give_back(won[0])
    finally:
        pool_a.close()
        pool_b.close()
    # Two runtimes on the two nodes starting conversations at once never share a container.
    with (
        _runtime(docker_run, "left", node_a, pool_size=1) as left,
        _runtime(docker_run, "right", node_b, pool_size=1) as right,
    ):
        assert left.pool is not None
        assert right.pool is not None
        assert left.pool.wait_ready()
        assert right.pool.wait_ready()
        barrier = threading.Barrier(2)
        seen: dict[str, str | None] = {}

        def first_command(name: str, runtime: DockerSkillRuntime) -> None:
            barrier.wait()
            _run(runtime, "true")
            seen[name] = runtime.container_id

        threads = [
            threading.Thread(target=first_command, args=("left", left)),
            threading.Thread(target=first_command, args=("right", right)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen["left"] is not None
        assert seen["left"] != seen["right"]
        left.destroy_conversation()
        right.destroy_conversation()
    close_pools()
    node_a.close()
    node_b.close()
    assert labelled(docker_run) == ([], [])


def test_a_dead_claimers_member_is_claimable_again_and_nothing_leaks(docker_run: str) -> None:
    store = InMemoryConversationStore()
    maker = _bare_pool(docker_run, store, 1)
    other = _bare_pool(docker_run, store, 0)
    try:
        maker.start()
        assert maker.wait_ready()
        (member_id,), _ = labelled(docker_run)
        key = pool_lease_key(member_id)
        # A claimer took the lease and died before writing any record.
        dead = store.acquire_lease(key, "dead-claimer", 0.5)
        assert dead is not None
        maker.close()  # its member is claimed by the dead one: left to it, not removed
        assert member_id in labelled(docker_run)[0]
        assert other.claim("late") is None  # held: nobody else gets it
        assert wait_until(dead.expired, timeout=10, interval=0.05)
        claimed = other.claim("late")
        assert claimed is not None
        assert claimed.sandbox_id == member_id
        other.give_back(claimed)
    finally:
        maker.close()
        other.close()  # removes the member given back to it, and its volume
    assert labelled(docker_run) == ([], [])
