"""Exclusive conversations on the AIO runtimes (double): async tasks and a sync runtime of one
conversation take turns through the store's lease; a lost lease is typed; the plugin passes the
lease options; the store keeps no record for AIO."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.core.conversations import service_key_for_url, storage_key_for
from skillruntime.core.conversations.leases import (
    ConversationLease,
    LeaseLostError,
    LeaseTimeoutError,
)
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.plugins.registry import create_async_runtime
from sql_databases import temporary_database

ROOT = "/home/gem/workspace/conversations"
COMMAND = (
    "if ! mkdir busy 2>/dev/null; then echo OVERLAP >> log; fi; "
    "echo run >> log; sleep 0.02; rmdir busy"
)


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlConversationStore]:
    if request.param == "sqlite":
        opened = SqlConversationStore(f"sqlite:///{tmp_path / 'c.db'}", create_schema=True)
        with opened:
            yield opened
        return
    with temporary_database(request.param) as url:
        opened = SqlConversationStore(url, create_schema=True)
        with opened:
            yield opened


def _options(double: AioDouble, store: SqlConversationStore, conversation: str) -> dict[str, Any]:
    return {
        "base_url": double.url,
        "token": double.token,
        "conversation_id": conversation,
        "conversations_root": ROOT,
        "conversation_store": store,
        "exclusive": True,
        "lease_ttl_seconds": 3.0,
        "lease_wait_seconds": 120.0,
    }


def test_async_tasks_and_a_sync_runtime_take_turns(
    aio_bash: AioDouble, store: SqlConversationStore
) -> None:
    conversation = f"turns-{uuid.uuid4().hex[:8]}"
    options = _options(aio_bash, store, conversation)
    errors: list[BaseException] = []

    def sync_hammer() -> None:
        try:
            with AioSandboxSkillRuntime(**options) as runtime:
                assert runtime.exclusive
                for _ in range(3):
                    runtime.execute(SkillExecutionRequest(command=COMMAND))
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    async def hammer() -> None:
        async with AsyncAioSkillRuntime(**options) as runtime:
            for _ in range(3):
                result = await runtime.execute(SkillExecutionRequest(command=COMMAND))
                assert result.exit_code == 0, result.stderr

    async def scenario() -> list[str]:
        thread = threading.Thread(target=sync_hammer)
        thread.start()
        try:
            await asyncio.gather(*(hammer() for _ in range(3)))
        finally:
            await asyncio.to_thread(thread.join, 240)
        async with AsyncAioSkillRuntime(**options) as runtime:
            files = await runtime.get_file_system()
            return (await files.read_text("log")).splitlines()

    log = asyncio.run(scenario())
    assert errors == []
    assert log == ["run"] * 12
    # Only the lease is kept: AIO writes no conversation record.
    key = storage_key_for(service_key_for_url(aio_bash.url), conversation)
    assert store.get(key) is None
    lease = store.get_lease(key)
    assert lease is not None
    assert lease.expired()


def test_async_aio_loses_the_lease_with_the_typed_error(
    aio_bash: AioDouble, tmp_path: Path
) -> None:
    conversation = f"lost-{uuid.uuid4().hex[:8]}"
    store = SqlConversationStore(f"sqlite:///{tmp_path / 'c.db'}", create_schema=True)
    key = storage_key_for(service_key_for_url(aio_bash.url), conversation)
    options = {**_options(aio_bash, store, conversation), "lease_wait_seconds": 0.5}

    async def scenario() -> None:
        async with AsyncAioSkillRuntime(**options) as runtime:
            taken: list[ConversationLease] = []

            async def run_until_lost() -> None:
                for _ in range(100):
                    await runtime.execute(SkillExecutionRequest(command="true"))
                    await asyncio.sleep(0.1)

            async def session_with_takeover() -> None:
                async with runtime.exclusive_session() as lease:
                    assert lease is not None
                    assert await asyncio.to_thread(store.release_lease, lease)
                    other = await asyncio.to_thread(store.acquire_lease, key, "other-node", 30)
                    assert other is not None
                    taken.append(other)
                    with pytest.raises(LeaseLostError):
                        await run_until_lost()

            with pytest.raises(LeaseLostError, match="was lost"):
                await session_with_takeover()
            files = await runtime.get_file_system()
            with pytest.raises(LeaseTimeoutError):
                await files.write_text("late.txt", "x")
            assert await asyncio.to_thread(store.release_lease, taken[0])
            await files.write_text("late.txt", "x")
            assert await files.read_text("late.txt") == "x"

    with store:
        asyncio.run(scenario())


def test_the_plugin_passes_the_lease_options(aio_bash: AioDouble, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a conversation_store"):
        AioSandboxSkillRuntime(
            base_url=aio_bash.url, token=aio_bash.token, conversation_id="c", exclusive=True
        )

    async def scenario() -> str:
        runtime = create_async_runtime(
            "aio",
            base_url=aio_bash.url,
            token=aio_bash.token,
            conversation_id=f"plugin-{uuid.uuid4().hex[:8]}",
            conversation_store=f"sqlite:///{tmp_path / 'c.db'}",
            exclusive=True,
            lease_ttl_seconds=4.0,
        )
        assert isinstance(runtime, AsyncAioSkillRuntime)
        async with runtime:
            assert runtime.exclusive
            async with runtime.exclusive_session() as lease:
                assert lease is not None
                return (await runtime.execute(SkillExecutionRequest(command="echo in"))).stdout

    assert asyncio.run(scenario()) == "in\n"


def test_an_exclusive_async_runtime_serves_consecutive_event_loops(
    aio_bash: AioDouble, tmp_path: Path
) -> None:
    """The lease keeper's lock is per loop: concurrent calls contend for it on each new loop."""
    conversation = f"loops-{uuid.uuid4().hex[:8]}"
    store = SqlConversationStore(f"sqlite:///{tmp_path / 'c.db'}", create_schema=True)
    runtime = AsyncAioSkillRuntime(**_options(aio_bash, store, conversation))

    async def three(n: int) -> list[str]:
        results = await asyncio.gather(
            *(runtime.execute(SkillExecutionRequest(command=f"echo {n}{k}")) for k in range(3))
        )
        return [result.stdout for result in results]

    try:
        for n in range(3):
            assert asyncio.run(three(n)) == [f"{n}{k}\n" for k in range(3)]
    finally:
        asyncio.run(runtime.close())
        store.close()
