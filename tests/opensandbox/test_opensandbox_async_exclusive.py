"""Exclusive conversations through the native async OpenSandbox runtime, on the double: async
tasks and a sync runtime of one conversation take turns, a lost lease is typed, the plugin passes
the lease options."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import ConversationStore
from skillruntime.core.conversations.leases import (
    ConversationLease,
    LeaseLostError,
    LeaseTimeoutError,
)
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.plugins.registry import create_async_runtime
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime
from sql_databases import temporary_database

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


def _options(
    double: OpenSandboxDouble, store: ConversationStore, conversation_id: str
) -> dict[str, Any]:
    return {
        "domain": double.domain,
        "api_key": double.api_key,
        "conversation_id": conversation_id,
        "conversation_store": store,
        "exclusive": True,
        "lease_ttl_seconds": 3.0,
        "lease_wait_seconds": 120.0,
    }


def test_async_tasks_and_a_sync_runtime_of_one_conversation_take_turns(
    opensandbox_double: OpenSandboxDouble, store: SqlConversationStore
) -> None:
    conversation = f"async-turns-{uuid.uuid4().hex[:8]}"
    options = _options(opensandbox_double, store, conversation)
    errors: list[BaseException] = []

    def sync_hammer() -> None:
        try:
            with OpenSandboxSkillRuntime(**options) as runtime:
                for _ in range(3):
                    runtime.execute(SkillExecutionRequest(command=COMMAND))
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    async def hammer(runtime: AsyncOpenSandboxSkillRuntime) -> None:
        for _ in range(3):
            result = await runtime.execute(SkillExecutionRequest(command=COMMAND))
            assert result.exit_code == 0, result.stderr

    async def scenario() -> list[str]:
        runtimes = [AsyncOpenSandboxSkillRuntime(**options) for _ in range(4)]
        thread = threading.Thread(target=sync_hammer)
        try:
            thread.start()
            await asyncio.gather(*(hammer(runtime) for runtime in runtimes))
            await asyncio.to_thread(thread.join, 240)
            files = await runtimes[0].get_file_system()
            return (await files.read_text("log")).splitlines()
        finally:
            await runtimes[0].destroy_conversation_sandbox()
            for runtime in runtimes:
                await runtime.close()

    log = asyncio.run(scenario())
    assert errors == []
    assert log == ["run"] * 15


def test_async_runtime_loses_the_lease_with_the_typed_error(
    opensandbox_double: OpenSandboxDouble, store: SqlConversationStore
) -> None:
    conversation = f"async-lost-{uuid.uuid4().hex[:8]}"
    options = {**_options(opensandbox_double, store, conversation), "lease_wait_seconds": 0.5}

    async def scenario() -> None:
        runtime = AsyncOpenSandboxSkillRuntime(**options)
        try:
            assert runtime.exclusive
            await runtime.execute(SkillExecutionRequest(command="echo hi > note.txt"))
            key = runtime.conversation_record_key
            assert key is not None
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
                await files.read_text("note.txt")
            assert await asyncio.to_thread(store.release_lease, taken[0])
            assert (await files.read_text("note.txt")) == "hi\n"
        finally:
            await runtime.destroy_conversation_sandbox()
            await runtime.close()

    asyncio.run(scenario())


def test_the_async_plugin_builds_an_exclusive_runtime(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="needs a conversation_id"):
        AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key, exclusive=True
        )

    async def scenario() -> str:
        runtime = create_async_runtime(
            "opensandbox",
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=f"plugin-{uuid.uuid4().hex[:8]}",
            conversation_store=f"sqlite:///{tmp_path / 'c.db'}",
            exclusive=True,
            lease_ttl_seconds=4.0,
        )
        assert isinstance(runtime, AsyncOpenSandboxSkillRuntime)
        try:
            assert runtime.exclusive
            async with runtime.exclusive_session() as lease:
                assert lease is not None
                result = await runtime.execute(SkillExecutionRequest(command="echo in"))
            return result.stdout
        finally:
            await runtime.destroy_conversation_sandbox()
            await runtime.close()

    assert asyncio.run(scenario()) == "in\n"
