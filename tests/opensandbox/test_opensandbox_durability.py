"""Automatic durability through the OpenSandbox runtime on the protocol double: a sandbox that
expires (the double's clock) or is killed behind the runtime's back is replaced and its workspace
restored from the snapshot taken at close, before the next command runs; a restore that cannot
finish fails the call with a typed error and leaves the record pending on the last good snapshot;
the async face does the same."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.durability import Durability
from skillruntime.core.errors import WorkspaceRestoreError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

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


@pytest.fixture
def made(opensandbox_double: OpenSandboxDouble, tmp_path: Path) -> Iterator[Any]:
    store = InMemoryConversationStore()
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))
    runtimes: list[OpenSandboxSkillRuntime] = []

    def factory(conversation: str) -> OpenSandboxSkillRuntime:
        runtime = OpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=conversation,
            conversation_store=store,
            durability=durability,
        )
        runtimes.append(runtime)
        return runtime

    factory.store = store  # type: ignore[attr-defined]
    factory.durability = durability  # type: ignore[attr-defined]
    yield factory
    for runtime in runtimes:
        with contextlib.suppress(Exception):
            runtime.close()


def test_an_expired_sandbox_comes_back_with_its_files(
    made: Any, opensandbox_double: OpenSandboxDouble
) -> None:
    conversation = f"os-{uuid.uuid4().hex[:12]}"
    first = made(conversation)
    assert first.execute(SkillExecutionRequest(command=POPULATE)).ok
    expected = first.execute(SkillExecutionRequest(command=CHECK)).stdout
    old = first.sandbox_id
    first.close()  # the snapshot at close
    record = next(iter(made.store.list_records()))
    assert record.snapshot_id is not None
    opensandbox_double.advance_clock(3600)  # the sandbox expires behind the runtime's back
    second = made(conversation)
    found = second.execute(SkillExecutionRequest(command=CHECK))
    assert found.ok, found.stderr
    assert found.stdout == expected
    assert second.sandbox_id != old
    durable = second.durable_workspace
    assert durable is not None
    assert len(durable.restores) == 1
    stored = next(iter(made.store.list_records()))
    assert not stored.restore_pending
    assert stored.snapshot_id == record.snapshot_id
    second.destroy_conversation()
    assert made.durability.store.list_snapshots(conversation) == []


def test_a_restore_that_cannot_finish_fails_the_call_and_stays_pending(
    made: Any, opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    conversation = f"os-{uuid.uuid4().hex[:12]}"
    first = made(conversation)
    assert first.execute(SkillExecutionRequest(command=POPULATE)).ok
    old = first.sandbox_id
    first.close()
    good = next(iter(made.store.list_records())).snapshot_id
    assert old is not None
    assert opensandbox_double.kill_behind_back(old)
    objects = sorted((tmp_path / "snapshots" / "objects").rglob("*"))
    stored = [path for path in objects if path.is_file()]
    assert stored
    for path in stored:  # every stored object corrupted
        path.write_bytes(b"corrupted")
    second = made(conversation)
    with pytest.raises(WorkspaceRestoreError):
        second.execute(SkillExecutionRequest(command="echo never runs > marker"))
    record = next(iter(made.store.list_records()))
    assert record.restore_pending
    assert record.snapshot_id == good
    with pytest.raises(WorkspaceRestoreError):  # the next call tries again
        second.execute(SkillExecutionRequest(command="ls -A"))


def test_the_async_face_restores_a_killed_sandbox(
    opensandbox_double: OpenSandboxDouble, tmp_path: Path
) -> None:
    conversation = f"os-{uuid.uuid4().hex[:12]}"
    store = InMemoryConversationStore()
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))

    def runtime() -> AsyncOpenSandboxSkillRuntime:
        return AsyncOpenSandboxSkillRuntime(
            domain=opensandbox_double.domain,
            api_key=opensandbox_double.api_key,
            conversation_id=conversation,
            conversation_store=store,
            durability=durability,
        )

    async def scenario() -> None:
        async with runtime() as first:
            assert (await first.execute(SkillExecutionRequest(command=POPULATE))).ok
            expected = (await first.execute(SkillExecutionRequest(command=CHECK))).stdout
            old = first.sandbox_id
        assert old is not None
        assert opensandbox_double.kill_behind_back(old)
        async with runtime() as second:
            found = await second.execute(SkillExecutionRequest(command=CHECK))
            assert found.stdout == expected
            durable = second.durable_workspace
            assert durable is not None
            assert len(durable.restores) == 1
            await second.destroy_conversation_sandbox()

    asyncio.run(scenario())
