"""Warm pools of the OpenSandbox runtime on the protocol double (docs/opensandbox-runtime.md,
"Warm pools").

A conversation served from the pool behaves like a cold one (user, working directory,
environment, skills) and its sandbox becomes the conversation's (metadata retagged, renewed past
the pool's TTL); an unclaimed member ends on the server at the pool's TTL; two nodes on one
PostgreSQL database never claim one member; a pool whose runtime was given a store URL outlives
that runtime; the async face is served from the same pool.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.opensandbox import OpenSandboxDouble
from doubles.opensandbox.fixtures import opensandbox_double_fixture
from doubles.opensandbox.harness import SCALED_TAIL_DELAY
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.conversations.sandboxes import (
    TAG_CONVERSATION_ID,
    TAG_ROLE,
)
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.models import SkillExecutionRequest, SkillPreparationRequest
from skillruntime.core.skills import discover_skills
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime
from skillruntime.opensandbox.pool import close_pools
from sql_databases import temporary_database

# A double of its own: other modules move the shared one's clock by hours, and a renewal
# (now + timeout on the client's clock) would then lie in the server's past.
opensandbox_double = opensandbox_double_fixture(scope="module", tail_delay=SCALED_TAIL_DELAY)

PROBE = 'id -u; pwd; echo "$GREETING"; ls -A'


@pytest.fixture(autouse=True)
def _pools_closed() -> Iterator[None]:
    yield
    close_pools()


def _deployment() -> dict[str, str]:
    return {"skillruntime-test-pools": uuid.uuid4().hex[:12]}


def _runtime(
    double: OpenSandboxDouble, conversation: str, store: Any, metadata: dict[str, str], **extra: Any
) -> OpenSandboxSkillRuntime:
    return OpenSandboxSkillRuntime(
        domain=double.domain,
        api_key=double.api_key,
        conversation_id=conversation,
        conversation_store=store,
        base_environment={"GREETING": "hello"},
        metadata=metadata,
        **extra,
    )


def _run(runtime: OpenSandboxSkillRuntime, command: str) -> str:
    result = runtime.execute(SkillExecutionRequest(command=command, timeout_seconds=30))
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _live(double: OpenSandboxDouble, metadata: dict[str, str]) -> dict[str, dict[str, str]]:
    return {
        str(found["id"]): dict(found.get("metadata") or {})
        for found in double.sandboxes()
        if str(found.get("state", "")).lower() == "running"
        and all((found.get("metadata") or {}).get(k) == v for k, v in metadata.items())
    }


def test_a_pooled_conversation_is_indistinguishable_from_a_cold_one(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    store = InMemoryConversationStore()
    deployment = _deployment()
    with _runtime(opensandbox_double, "cold", store, deployment) as cold:
        expected = _run(cold, PROBE).replace("/cold", "/CONV")
        cold.destroy_conversation()
    conversation = f"warm-{uuid.uuid4().hex[:8]}"
    with _runtime(opensandbox_double, conversation, store, deployment, pool_size=1) as warm:
        pool = warm.pool
        assert pool is not None
        assert pool.wait_ready()
        (member_id,) = _live(opensandbox_double, deployment)
        assert _run(warm, PROBE).replace(f"/{conversation}", "/CONV") == expected
        assert (pool.hits, pool.misses) == (1, 0)
        assert warm.sandbox_id == member_id
        record = warm.conversation_record
        assert record is not None
        assert record.sandbox_id == member_id
        # The member is the conversation's now: tagged as such, as a cold sandbox is.
        tags = _live(opensandbox_double, deployment)[member_id]
        assert tags[TAG_ROLE] == "conversation"
        assert tags[TAG_CONVERSATION_ID] == conversation
        prepared = warm.prepare(SkillPreparationRequest(skills=discover_skills("examples/skills")))
        assert "SKILL.md" in _run(warm, f"ls {prepared[0].base_path}")
        # Renewed to the sandbox timeout at the claim: it outlives the pool's TTL.
        opensandbox_double.advance_clock(300)
        assert member_id in _live(opensandbox_double, deployment)
        assert _run(warm, "pwd").strip().endswith(conversation)
        assert warm.sandbox_id == member_id
        warm.destroy_conversation()
    assert member_id not in _live(opensandbox_double, deployment)


def test_an_unclaimed_member_ends_on_the_server_at_the_pool_ttl(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    store = InMemoryConversationStore()
    deployment = _deployment()
    runtime = _runtime(
        opensandbox_double, "ttl", store, deployment, pool_size=1, pool_ttl_seconds=120
    )
    pool = runtime.pool
    assert pool is not None
    assert pool.wait_ready()
    (member_id,) = _live(opensandbox_double, deployment)
    # Every node that could remove it is gone (no close): the server ends it at its TTL.
    opensandbox_double.advance_clock(121)
    assert member_id not in _live(opensandbox_double, deployment)
    runtime.close()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with temporary_database("postgresql") as url:
        yield url


def test_two_nodes_never_claim_one_member(
    opensandbox_double: OpenSandboxDouble, postgres_url: str
) -> None:
    deployment = _deployment()
    node_a = SqlConversationStore(postgres_url, create_schema=True)
    node_b = SqlConversationStore(postgres_url, create_schema=True)
    try:
        with (
            _runtime(opensandbox_double, "left", node_a, deployment, pool_size=1) as left,
            _runtime(opensandbox_double, "right", node_b, deployment, pool_size=1) as right,
        ):
            assert left.pool is not None
            assert right.pool is not None
            assert left.pool.wait_ready()
            assert right.pool.wait_ready()
            barrier = threading.Barrier(2)
            seen: dict[str, str | None] = {}

            def first_command(name: str, runtime: OpenSandboxSkillRuntime) -> None:
                barrier.wait()
                _run(runtime, "true")
                seen[name] = runtime.sandbox_id

            threads = [
                threading.Thread(target=first_command, args=("left", left)),
                threading.Thread(target=first_command, args=("right", right)),
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert seen["left"] is not None
            assert seen["right"] is not None
            assert seen["left"] != seen["right"]
            assert left.pool.hits + right.pool.hits == 2
            left.destroy_conversation()
            right.destroy_conversation()
        close_pools()
        assert _live(opensandbox_double, deployment) == {}
    finally:
        node_a.close()
        node_b.close()


def test_a_pool_outlives_the_runtime_that_opened_its_store_from_a_url(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'conversations.db'}"
    deployment = _deployment()
    first = _runtime(opensandbox_double, "first", url, deployment, pool_size=1)
    pool = first.pool
    assert pool is not None
    assert pool.wait_ready()
    _run(first, "true")
    first.close()  # closes the store it opened; the pool has its own
    second = _runtime(opensandbox_double, "second", url, deployment, pool_size=1)
    assert second.pool is pool
    assert pool.wait_ready()
    _run(second, "true")
    assert pool.hits == 2
    second.destroy_conversation()
    second.close()
    first = _runtime(opensandbox_double, "first", url, deployment)
    first.destroy_conversation()
    first.close()


def test_the_async_face_is_served_from_the_pool(opensandbox_double: OpenSandboxDouble) -> None:
    deployment = _deployment()
    store = InMemoryConversationStore()

    async def scenario() -> None:
        runtime = AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id="async-warm",
            conversation_store=store,
            metadata=deployment,
            pool_size=1,
        )
        try:
            pool = runtime.pool
            assert pool is not None
            assert await asyncio.to_thread(pool.wait_ready)
            (member_id,) = _live(opensandbox_double, deployment)
            result = await runtime.execute(SkillExecutionRequest(command="pwd"))
            assert result.ok, result.stderr
            assert result.stdout.strip().endswith("async-warm")
            assert runtime.sandbox_id == member_id
            assert pool.hits == 1
            await runtime.destroy_conversation()
        finally:
            await runtime.close()

    asyncio.run(scenario())
