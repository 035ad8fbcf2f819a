"""Automatic durability on the AIO runtime (both faces, against the double): the snapshot taken
at close, and a conversation workspace lost in the service (a restarted service, a removed
directory) restored on the next runtime's first operation."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.core.durability import Durability
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore

ROOT = "/tmp/aio-durable"
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


def _runtime(
    double: AioDouble, conversation: str, durability: Durability
) -> AioSandboxSkillRuntime:
    return AioSandboxSkillRuntime(
        base_url=double.url,
        token=double.token,
        conversation_id=conversation,
        conversations_root=ROOT,
        durability=durability,
    )


def _lose(double: AioDouble, conversation: str) -> None:
    with AioSandboxSkillRuntime(base_url=double.url, token=double.token) as plain:
        gone = plain.execute(SkillExecutionRequest(command=f"rm -rf {ROOT}/{conversation}"))
        assert gone.ok, gone.stderr


def test_a_lost_workspace_comes_back(aio_bash: AioDouble, tmp_path: Path) -> None:
    conversation = f"c-{uuid.uuid4().hex[:10]}"
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))
    with _runtime(aio_bash, conversation, durability) as runtime:
        assert runtime.execute(SkillExecutionRequest(command=POPULATE)).ok
        expected = runtime.execute(SkillExecutionRequest(command=CHECK)).stdout
    assert len(durability.store.list_snapshots(conversation)) == 1
    _lose(aio_bash, conversation)
    with _runtime(aio_bash, conversation, durability) as runtime:
        found = runtime.execute(SkillExecutionRequest(command=CHECK))
        assert found.ok, found.stderr
        assert found.stdout == expected
        durable = runtime.durable_workspace
        assert durable is not None
        assert len(durable.restores) == 1


def test_the_async_face_restores_a_lost_workspace(aio_shell: AioDouble, tmp_path: Path) -> None:
    conversation = f"c-{uuid.uuid4().hex[:10]}"
    durability = Durability(LocalSnapshotStore(tmp_path / "snapshots"))

    def runtime() -> AsyncAioSkillRuntime:
        return AsyncAioSkillRuntime(
            base_url=aio_shell.url,
            token=aio_shell.token,
            conversation_id=conversation,
            conversations_root=ROOT,
            durability=durability,
        )

    async def scenario() -> str:
        async with runtime() as first:
            assert (await first.execute(SkillExecutionRequest(command=POPULATE))).ok
            return (await first.execute(SkillExecutionRequest(command=CHECK))).stdout

    async def resumed() -> tuple[str, int]:
        async with runtime() as second:
            found = await second.execute(SkillExecutionRequest(command=CHECK))
            durable = second.durable_workspace
            assert durable is not None
            return found.stdout, len(durable.restores)

    expected = asyncio.run(scenario())
    _lose(aio_shell, conversation)
    assert asyncio.run(resumed()) == (expected, 1)
