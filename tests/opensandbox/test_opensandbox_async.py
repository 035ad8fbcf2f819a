"""The native async OpenSandbox runtime: plugin wiring, conversation resume across sync and async
runtime objects, concurrency without a thread per command, cancellation, sandbox recovery."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.errors import RuntimeClosedError
from skillruntime.core.models import Skill, SkillExecutionRequest, SkillPreparationRequest
from skillruntime.core.plugins.registry import create_async_runtime
from skillruntime.opensandbox import (
    AsyncOpenSandboxSkillRuntime,
    OpenSandboxSkillRuntime,
    SandboxReplacedError,
)


def _skill(root: Path) -> Skill:
    directory = root / "shared-skill"
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text("---\nname: shared-skill\ndescription: d\n---\nbody\n")
    (directory / "data.txt").write_text("payload\n")
    return Skill(name="shared-skill", description="d", base_path=str(directory))


def _live(double: OpenSandboxDouble) -> set[str]:
    """The sandboxes alive on the double (other tests on this worker may have left some: a
    conversation's sandbox outlives its runtime objects)."""
    return set(double.stats()["live_sandbox_ids"])


def test_create_async_runtime_builds_the_native_runtime(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    before = _live(opensandbox_double)

    async def scenario() -> str:
        runtime = create_async_runtime(
            "opensandbox", domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
        )
        assert isinstance(runtime, AsyncOpenSandboxSkillRuntime)
        async with runtime:
            result = await runtime.execute(SkillExecutionRequest(command="echo native"))
            return result.stdout

    assert asyncio.run(scenario()) == "native\n"
    assert _live(opensandbox_double) <= before, "a sandbox of the runtime outlived its close"


class TestResumeAcrossSyncAndAsync:
    """One conversation, one store: whichever kind of runtime object comes second finds the
    sandbox, the prepared skill and the files of the first, and uploads nothing."""

    def _make_sync(
        self, double: OpenSandboxDouble, conversation: str, store: InMemoryConversationStore
    ) -> OpenSandboxSkillRuntime:
        return OpenSandboxSkillRuntime(
            domain=double.domain,
            api_key=double.api_key,
            conversation_id=conversation,
            conversation_store=store,
        )

    def _make_async(
        self, double: OpenSandboxDouble, conversation: str, store: InMemoryConversationStore
    ) -> AsyncOpenSandboxSkillRuntime:
        return AsyncOpenSandboxSkillRuntime(
            domain=double.domain,
            api_key=double.api_key,
            conversation_id=conversation,
            conversation_store=store,
        )

    def test_async_first_then_sync(
        self, opensandbox_double: OpenSandboxDouble, tmp_path: Path
    ) -> None:
        store = InMemoryConversationStore()
        conversation = f"os-async-{uuid.uuid4().hex[:12]}"
        request = SkillPreparationRequest(skills=(_skill(tmp_path),))

        async def prepare_async() -> tuple[str, str | None]:
            async with self._make_async(opensandbox_double, conversation, store) as runtime:
                (prepared,) = await runtime.prepare(request)
                files = await runtime.get_file_system()
                await files.write_text("from-async.txt", "async side")
                return prepared.base_path, runtime.sandbox_id

        base_path, sandbox_id = asyncio.run(prepare_async())
        assert sandbox_id in opensandbox_double.stats()["live_sandbox_ids"]
        opensandbox_double.reset_stats()
        sync_runtime = self._make_sync(opensandbox_double, conversation, store)
        try:
            (resumed,) = sync_runtime.prepare(request)
            assert resumed.base_path == base_path
            assert sync_runtime.sandbox_id == sandbox_id
            assert sync_runtime.get_file_system().read_text("from-async.txt") == "async side"
            stats = opensandbox_double.stats()
            assert stats["upload_requests"] == 0
            assert stats["creates"] == 0
        finally:
            sync_runtime.destroy_conversation_sandbox()
            sync_runtime.close()

    def test_sync_first_then_async(
        self, opensandbox_double: OpenSandboxDouble, tmp_path: Path
    ) -> None:
        store = InMemoryConversationStore()
        conversation = f"os-async-{uuid.uuid4().hex[:12]}"
        request = SkillPreparationRequest(skills=(_skill(tmp_path),))
        sync_runtime = self._make_sync(opensandbox_double, conversation, store)
        with sync_runtime:
            (prepared,) = sync_runtime.prepare(request)
            sync_runtime.get_file_system().write_text("from-sync.txt", "sync side")
            sandbox_id = sync_runtime.sandbox_id
        opensandbox_double.reset_stats()

        async def resume_async() -> None:
            runtime = self._make_async(opensandbox_double, conversation, store)
            async with runtime:
                (resumed,) = await runtime.prepare(request)
                assert resumed.base_path == prepared.base_path
                assert runtime.sandbox_id == sandbox_id
                files = await runtime.get_file_system()
                assert await files.read_text("from-sync.txt") == "sync side"
                result = await runtime.execute(
                    SkillExecutionRequest(command="cat skills/*/data.txt")
                )
                assert result.stdout == "payload\n"
                stats = opensandbox_double.stats()
                assert stats["upload_requests"] == 0
                assert stats["creates"] == 0
                await runtime.destroy_conversation_sandbox()

        asyncio.run(resume_async())
        assert sandbox_id not in opensandbox_double.stats()["live_sandbox_ids"]


def _attach_requests(double: OpenSandboxDouble) -> dict[str, int]:
    """Requests by route, the command itself left out."""
    return {
        route: count
        for route, count in double.stats()["requests"].items()
        if route != "execd POST /command"
    }


def test_an_async_resume_costs_the_lifecycle_requests_of_a_sync_one(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    """Resuming a conversation's sandbox: two endpoint lookups, health check, renew, orphan
    listing — five requests whether the runtime object is sync or async (the async handle
    reuses the endpoints the attach looked up)."""
    store = InMemoryConversationStore()
    options = {
        "domain": opensandbox_double.domain,
        "api_key": opensandbox_double.api_key,
        "conversation_id": f"os-requests-{uuid.uuid4().hex[:12]}",
        "conversation_store": store,
    }
    command = SkillExecutionRequest(command="true")
    with OpenSandboxSkillRuntime(**options) as first:
        assert first.execute(command).ok
    opensandbox_double.reset_stats()
    with OpenSandboxSkillRuntime(**options) as sync_runtime:
        assert sync_runtime.execute(command).ok
        sync_requests = _attach_requests(opensandbox_double)
    opensandbox_double.reset_stats()

    async def resume_async() -> dict[str, int]:
        async with AsyncOpenSandboxSkillRuntime(**options) as runtime:
            assert (await runtime.execute(command)).ok
            requests = _attach_requests(opensandbox_double)
            await runtime.destroy_conversation_sandbox()
            return requests

    async_requests = asyncio.run(resume_async())
    assert async_requests == sync_requests
    assert sum(sync_requests.values()) == 5, sync_requests


def test_concurrent_executes_share_a_few_threads(opensandbox_double: OpenSandboxDouble) -> None:
    """Sixty commands in flight at once: every one returns its own output, and the process
    never runs more than a handful of threads beyond those it had (no thread per command)."""
    baseline = threading.active_count()
    peak = baseline

    async def scenario() -> list[str]:
        nonlocal peak
        async with AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
        ) as runtime:
            await runtime.execute(SkillExecutionRequest(command="true"))  # attach once
            tasks = [
                asyncio.create_task(
                    runtime.execute(SkillExecutionRequest(command=f"sleep 0.5; echo {index}"))
                )
                for index in range(60)
            ]
            while not all(task.done() for task in tasks):
                peak = max(peak, threading.active_count())
                await asyncio.sleep(0.02)
            return [task.result().stdout for task in tasks]

    outputs = asyncio.run(scenario())
    assert outputs == [f"{index}\n" for index in range(60)]
    assert peak - baseline <= 4, f"{peak - baseline} extra threads for 60 concurrent commands"


def test_cancellation_right_after_the_request_went_out_stops_the_command(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    """A cancel right after the request went out (execd may not have named the command yet)
    still stops it: the marker the command would write never appears."""

    async def scenario() -> str:
        async with AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
        ) as runtime:
            await runtime.execute(SkillExecutionRequest(command="rm -f late.txt"))
            task = asyncio.create_task(
                runtime.execute(SkillExecutionRequest(command="sleep 2; echo late > late.txt"))
            )
            await asyncio.sleep(0)  # the request is being sent; nothing named yet
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(2.5)
            check = await runtime.execute(
                SkillExecutionRequest(command="test -e late.txt && echo ran || echo killed")
            )
            return check.stdout

    assert asyncio.run(scenario()) == "killed\n"


def test_a_vanished_sandbox_is_replaced_for_the_next_command(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    before = _live(opensandbox_double)

    async def scenario() -> None:
        async with AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key, retry_seconds=2
        ) as runtime:
            await runtime.execute(SkillExecutionRequest(command="true"))
            first = runtime.sandbox_id
            assert first is not None
            running = asyncio.create_task(
                runtime.execute(SkillExecutionRequest(command="sleep 30"))
            )
            await asyncio.sleep(0.5)
            assert opensandbox_double.kill_behind_back(first)
            with pytest.raises(SandboxReplacedError):
                await running
            result = await runtime.execute(SkillExecutionRequest(command="echo again"))
            assert result.stdout == "again\n"
            assert runtime.sandbox_id not in (None, first)

    asyncio.run(scenario())
    assert _live(opensandbox_double) <= before, "a sandbox of the runtime outlived its close"


def test_close_kills_the_private_sandbox_and_closes_the_runtime(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    async def scenario() -> None:
        runtime = AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
        )
        await runtime.execute(SkillExecutionRequest(command="true"))
        sandbox_id = runtime.sandbox_id
        assert sandbox_id in opensandbox_double.stats()["live_sandbox_ids"]
        await runtime.close()
        await runtime.close()
        assert sandbox_id not in opensandbox_double.stats()["live_sandbox_ids"]
        with pytest.raises(RuntimeClosedError):
            await runtime.execute(SkillExecutionRequest(command="true"))

    asyncio.run(scenario())
