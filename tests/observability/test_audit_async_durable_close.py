"""The async OpenSandbox face snapshots a used conversation once when it closes: the sync core it
drives makes no second snapshot of its own (docs/durability.md, "Automatic snapshots and
restores")."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from audit_capture import AuditCapture

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.durability import Durability
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime


@pytest.fixture(scope="module")
def opensandbox_double() -> Iterator[OpenSandboxDouble]:
    with OpenSandboxDouble() as double:
        yield double


def test_the_async_face_snapshots_once_at_close(
    opensandbox_double: OpenSandboxDouble, capture: AuditCapture, tmp_path: Path
) -> None:
    async def scenario() -> None:
        runtime = AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=f"once-{uuid.uuid4().hex[:8]}",
            conversation_store=InMemoryConversationStore(),
            durability=Durability(LocalSnapshotStore(tmp_path / "snapshots")),
        )
        try:
            done = await runtime.execute(SkillExecutionRequest(command="echo one > one.txt"))
            assert done.ok, done.stderr
        finally:
            await runtime.close()
        await asyncio.sleep(0)

    asyncio.run(scenario())
    snapshots = capture.of("workspace.snapshot")
    assert len(snapshots) == 1, [event.snapshot_id for event in snapshots]
    assert snapshots[0].outcome == "ok"
