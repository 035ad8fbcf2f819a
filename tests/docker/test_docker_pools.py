"""Warm pools of the Docker runtime on a real engine (docs/docker-runtime.md, "Warm pools").

A conversation served from the pool behaves like a cold one (user, environment, skills, files
that outlive the container); its workspace is made inside its first command's exec (or before
any other first operation), once, and a failure to make it runs nothing and is retried; two
nodes on one PostgreSQL database never claim one member; a claimer that died holding a claim
leaves nothing behind; destroying the conversation and closing the pool remove everything (the
session's leak check fails on any labelled leftover).
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


# What a conversation can see of its first command: user and groups, environment (less the
# container's host name and the per-command cancel mark), working directory, the workspace and
# its parent (owners, modes, kinds; no times), the command's input and its exit code.
FULL_PROBE = (
    "id; env | grep -v -e '^HOSTNAME=' -e '^SKILLRUNTIME_CANCEL_MARK=' | sort; pwd; "
    "stat -c \"%n %u:%g %a %F\" . ..; ls -la . .. | awk 'NF > 2 {print $1, $3, $4, $NF}'; "
    "readlink /proc/self/fd/0; exit 3"
)


MINE = '[ "$(stat -c %u:%g .)" = "$(id -u):$(id -g)" ] && echo "mine $(stat -c %a .)"'
"""Prints ``mine <mode>`` when the working directory is the user's."""


def _probe(runtime: DockerSkillRuntime, conversation: str) -> tuple[int, str, str]:
    result = runtime.execute(SkillExecutionRequest(command=FULL_PROBE, timeout_seconds=30))
    return (
        result.exit_code,
        result.stdout.replace(conversation, "CONV"),
        result.stderr.replace(conversation, "CONV"),
    )


def _calls(monkeypatch: pytest.MonkeyPatch, runtime: DockerSkillRuntime) -> list[str]:
    """The engine calls on ``runtime``'s container, in order (the pool's own calls left out)."""
    engine = runtime.engine
    calls: list[str] = []
    exec_ids: set[str] = set()

    def traced(name: str) -> None:
        original = getattr(engine, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            first = str(args[0]) if args else ""
            result = original(*args, **kwargs)
            mine = first == runtime.container_id or first in exec_ids
            if name == "exec_create" and mine:
                exec_ids.add(str(result))
            if mine:
                calls.append(name)
            return result

        monkeypatch.setattr(engine, name, call)

    for name in ("put_archive", "exec_create", "exec_stream", "exec_inspect"):
        traced(name)
    return calls


def test_a_pooled_first_command_makes_the_workspace_in_its_exec(
    docker_run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = InMemoryConversationStore()
    with _runtime(docker_run, "cold-probe", store) as cold:
        expected = _probe(cold, "cold-probe")
        cold.destroy_conversation()
    assert expected[0] == 3
    assert "0:0 755 directory" in expected[1]  # the workspace's parent, root's
    with _runtime(docker_run, "warm-probe", store, pool_size=1) as warm:
        pool = warm.pool
        assert pool is not None
        assert pool.wait_ready()
        calls = _calls(monkeypatch, warm)
        assert _probe(warm, "warm-probe") == expected
        assert pool.hits == 1
        # The tree is made while the command's exec waits, not before the exec started.
        assert calls == ["exec_create", "exec_stream", "put_archive", "exec_inspect"]
        calls.clear()
        assert _probe(warm, "warm-probe") == expected
        assert calls == ["exec_create", "exec_stream", "exec_inspect"]  # made once
        warm.destroy_conversation()


def test_a_pooled_conversation_whose_first_call_is_a_file_operation(docker_run: str) -> None:
    store = InMemoryConversationStore()
    with _runtime(docker_run, "cold-file", store) as cold:
        cold.get_file_system().write_text("notes.txt", "kept\n")
        expected = _probe(cold, "cold-file")
        cold.destroy_conversation()
    with _runtime(docker_run, "warm-file", store, pool_size=1) as warm:
        assert warm.pool is not None
        assert warm.pool.wait_ready()
        warm.get_file_system().write_text("notes.txt", "kept\n")
        assert warm.pool.hits == 1
        assert _probe(warm, "warm-file") == expected
        assert warm.get_file_system().read_text("notes.txt") == "kept\n"
        warm.destroy_conversation()


def test_a_link_planted_at_the_workspace_of_a_member_is_replaced_not_followed(
    docker_run: str,
) -> None:
    store = InMemoryConversationStore()
    with _runtime(docker_run, "cold-link", store) as cold:
        expected = _probe(cold, "cold-link")
        cold.destroy_conversation()
    with _runtime(docker_run, "warm-link", store, pool_size=1) as warm:
        assert warm.pool is not None
        assert warm.pool.wait_ready()
        (member,), _ = labelled(docker_run)
        client = engine_client()
        try:  # a fault of the member before its claim, made through the engine as root
            planted = client.containers.get(member).exec_run(
                ["ln", "-s", "/tmp", f"{ROOT}/warm-link"], user="0"
            )
        finally:
            client.close()
        assert planted.exit_code == 0, planted.output
        assert _probe(warm, "warm-link") == expected
        assert warm.container_id == member
        assert _run(warm, "stat -c '%u:%g %a' /tmp; ls -A").stdout == "0:0 1777\n"
        warm.destroy_conversation()


def test_a_failed_workspace_fails_the_first_command_unrun_and_the_next_call_retries(
    docker_run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillruntime.core.errors import SkillRuntimeError
    from skillruntime.docker.errors import CommandNotStartedError, DockerEngineError

    store = InMemoryConversationStore()
    with _runtime(docker_run, "warm-fail", store, pool_size=1) as warm:
        assert warm.pool is not None
        assert warm.pool.wait_ready()
        engine = warm.engine
        original = engine.put_archive
        failures = {"left": 2}

        def put_archive(container_id: str, path: str, data: Any) -> None:
            if container_id == warm.container_id and failures["left"] > 0:
                failures["left"] -= 1
                raise DockerEngineError("writing into the volume failed: injected", status_code=500)
            original(container_id, path, data)

        monkeypatch.setattr(engine, "put_archive", put_archive)
        marker = "/tmp/the-command-ran"
        with pytest.raises(CommandNotStartedError, match="warm-fail could not be made") as caught:
            warm.execute(SkillExecutionRequest(command=f"touch {marker}", timeout_seconds=30))
        assert "was not run" in str(caught.value)
        assert "injected" in str(caught.value)
        # A file operation first makes the tree the old way: it fails the same way, then works.
        with pytest.raises(SkillRuntimeError, match="injected"):
            warm.get_file_system().write_text("notes.txt", "x")
        assert failures["left"] == 0
        result = _run(warm, f"test -e {marker} || echo unrun; {MINE}; ls -A")
        assert result.stdout == "unrun\nmine 755\n"
        warm.get_file_system().write_text("notes.txt", "x")
        assert _run(warm, "ls -A").stdout == "notes.txt\n"
        assert warm.pool.hits == 1
        warm.destroy_conversation()


def test_two_threads_first_commands_make_the_workspace_once(
    docker_run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = InMemoryConversationStore()
    with _runtime(docker_run, "warm-race", store, pool_size=1) as warm:
        assert warm.pool is not None
        assert warm.pool.wait_ready()
        calls = _calls(monkeypatch, warm)
        warm.get_file_system()  # built before the threads: only the commands race
        barrier = threading.Barrier(2)
        outputs: dict[int, str] = {}

        def first(index: int) -> None:
            barrier.wait()
            outputs[index] = _run(warm, f"{MINE}; touch mine-$$").stdout

        threads = [threading.Thread(target=first, args=(index,)) for index in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert outputs == {0: "mine 755\n", 1: "mine 755\n"}
        assert calls.count("put_archive") == 1
        assert len(_run(warm, "ls -A").stdout.split()) == 2
        warm.destroy_conversation()
