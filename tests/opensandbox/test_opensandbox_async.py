"""The OpenSandbox runtime from asyncio: served through the thread bridge, resuming one
conversation across sync and async runtime objects."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.bridge import ThreadedAsyncRuntime, to_async
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.models import Skill, SkillExecutionRequest, SkillPreparationRequest
from skillruntime.core.plugins import create_async_runtime
from skillruntime.opensandbox import OpenSandboxSkillRuntime


def _skill(root: Path) -> Skill:
    directory = root / "shared-skill"
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text("---\nname: shared-skill\ndescription: d\n---\nbody\n")
    (directory / "data.txt").write_text("payload\n")
    return Skill(name="shared-skill", description="d", base_path=str(directory))


def test_create_async_runtime_serves_opensandbox_through_the_bridge(
    opensandbox_double: OpenSandboxDouble,
) -> None:
    async def scenario() -> str:
        runtime = create_async_runtime(
            "opensandbox", domain=opensandbox_double.domain, api_key=opensandbox_double.api_key
        )
        assert isinstance(runtime, ThreadedAsyncRuntime)
        async with runtime:
            result = await runtime.execute(SkillExecutionRequest(command="echo bridged"))
            return result.stdout

    assert asyncio.run(scenario()) == "bridged\n"


def test_sync_and_async_objects_resume_one_conversation(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    store = InMemoryConversationStore()
    conversation = f"os-async-{uuid.uuid4().hex[:12]}"
    request = SkillPreparationRequest(skills=(_skill(tmp_path),))

    def make() -> OpenSandboxSkillRuntime:
        return OpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=conversation,
            conversation_store=store,
        )

    async def prepare_async() -> str:
        async with to_async(make()) as runtime:
            (prepared,) = await runtime.prepare(request)
            files = await runtime.get_file_system()
            await files.write_text("from-async.txt", "async side")
            return prepared.base_path

    base_path = asyncio.run(prepare_async())
    opensandbox_double.reset_stats()
    sync_runtime = make()
    try:
        (resumed,) = sync_runtime.prepare(request)
        assert resumed.base_path == base_path
        assert sync_runtime.get_file_system().read_text("from-async.txt") == "async side"
        stats = opensandbox_double.stats()
        assert stats["upload_requests"] == 0
        assert stats["creates"] == 0
    finally:
        sync_runtime.destroy_conversation_sandbox()
        sync_runtime.close()
