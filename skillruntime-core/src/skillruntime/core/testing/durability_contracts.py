"""``DurabilityConformance``: the automatic-durability contracts of ``docs/durability.md``
("Automatic snapshots and restores") against any runtime that takes a ``durability=`` argument.

.. code-block:: python

    from skillruntime.core.testing import DurabilityConformance

    class TestMyRuntimeDurability(DurabilityConformance):
        def make_durable_runtime(self, *, conversation_id, conversations_root, durability):
            return MyRuntime(
                conversation_id=conversation_id,
                conversations_root=conversations_root,
                durability=durability,
            )

        def lose_workspace(self, *, conversation_id, conversations_root, sandbox_id):
            ...  # what the platform does when the sandbox goes: expire it, remove it

The subclass provides a runtime handed a
:class:`~skillruntime.core.durability.Durability` (``make_durable_runtime``) and a way to lose
a conversation's workspace behind the runtime's back as the platform would
(``lose_workspace``: remove the container and its volume, expire the sandbox, remove the
directory); the kit provides a :class:`~skillruntime.core.snapshots.LocalSnapshotStore` in the
test's temporary directory. Every check runs commands in the sandbox, so the kit sees what the
sandbox holds. The contracts:

1. a runtime used and closed stores a snapshot; one opened and closed without an operation
   stores none;
2. after the workspace was lost, the first command of the next runtime on the conversation sees
   every file of the last snapshot (contents, modes, an empty directory, a link inside);
3. when the snapshot cannot be restored (its stored objects are corrupted), the command raises
   :class:`~skillruntime.core.errors.WorkspaceRestoreError` before it runs, and the next
   command raises it again (the restore stays due).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..durability import Durability
from ..errors import WorkspaceRestoreError
from ..models import SkillExecutionRequest
from ..runtime.spi import SkillRuntime
from ..snapshots import LocalSnapshotStore

__all__ = ["DurabilityConformance"]

POPULATE = r"""
set -e
mkdir -p src/deep empty
printf 'print(1)\n' > src/main.py
printf 'secret' > src/deep/private && chmod 600 src/deep/private
printf '#!/bin/sh\necho ran\n' > src/run.sh && chmod 755 src/run.sh
ln -s src/main.py latest
"""
"""The workspace every contract builds (in the sandbox)."""

CHECK = (
    "cat src/main.py src/deep/private; ./src/run.sh; "
    "stat -c '%a %n' src/deep/private src/run.sh; readlink latest; ls -A empty | wc -l"
)
"""A command whose output shows the workspace: contents, modes, the link and the empty dir."""


class DurabilityConformance:
    """The automatic-durability contracts (see the module docs); subclass and implement
    :meth:`make_durable_runtime` and :meth:`lose_workspace`."""

    # ------------------------------------------------------------------ hooks

    def make_durable_runtime(
        self, *, conversation_id: str, conversations_root: str, durability: Durability
    ) -> SkillRuntime:
        """A new runtime on ``conversation_id`` handed ``durability``."""
        raise NotImplementedError

    def lose_workspace(
        self, *, conversation_id: str, conversations_root: str, sandbox_id: str | None
    ) -> None:
        """Make the conversation's workspace vanish behind the runtime's back, as the platform
        does (``sandbox_id``: the runtime's ``sandbox_id`` attribute before it closed, if any)."""
        raise NotImplementedError

    def conversations_root(self, tmp_path: Path) -> str:
        """The runtime path under which conversations live (default: a host temp directory)."""
        return str(tmp_path / "conversations")

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        """Called after each test with the conversations it used (default: nothing)."""

    # --------------------------------------------------------------- fixtures

    @pytest.fixture
    def durable_world(self, tmp_path: Path) -> Iterator[_World]:
        """The store, the conversations root and the conversations a test used."""
        world = _World(self, tmp_path)
        try:
            yield world
        finally:
            self.discard_conversations(world.conversations)

    # -------------------------------------------------------------- contracts

    def test_a_used_runtime_stores_a_snapshot_at_close_an_unused_one_none(
        self, durable_world: _World
    ) -> None:
        conversation = durable_world.new_conversation()
        with contextlib.closing(durable_world.runtime(conversation)):
            pass
        assert durable_world.snapshots(conversation) == 0
        with contextlib.closing(durable_world.runtime(conversation)) as runtime:
            durable_world.run(runtime, POPULATE)
        assert durable_world.snapshots(conversation) == 1

    def test_a_lost_workspace_is_back_for_the_next_command(self, durable_world: _World) -> None:
        conversation = durable_world.new_conversation()
        with contextlib.closing(durable_world.runtime(conversation)) as runtime:
            durable_world.run(runtime, POPULATE)
            expected = durable_world.run(runtime, CHECK)
            sandbox_id = getattr(runtime, "sandbox_id", None)
        durable_world.lose(conversation, sandbox_id)
        with contextlib.closing(durable_world.runtime(conversation)) as runtime:
            assert durable_world.run(runtime, CHECK) == expected

    def test_a_restore_that_cannot_finish_fails_the_command(self, durable_world: _World) -> None:
        conversation = durable_world.new_conversation()
        with contextlib.closing(durable_world.runtime(conversation)) as runtime:
            durable_world.run(runtime, POPULATE)
            sandbox_id = getattr(runtime, "sandbox_id", None)
        durable_world.corrupt_objects()
        durable_world.lose(conversation, sandbox_id)
        with contextlib.closing(durable_world.runtime(conversation)) as runtime:
            with pytest.raises(WorkspaceRestoreError):
                runtime.execute(SkillExecutionRequest(command="echo ran > ran.txt"))
            with pytest.raises(WorkspaceRestoreError):
                runtime.execute(SkillExecutionRequest(command="true"))


class _World:
    """One test's snapshot store and conversations."""

    def __init__(self, suite: DurabilityConformance, tmp_path: Path) -> None:
        self.suite = suite
        self.root = suite.conversations_root(tmp_path)
        self.store_path = tmp_path / "durable-snapshots"
        self.durability = Durability(LocalSnapshotStore(self.store_path))
        self.conversations: list[str] = []

    def new_conversation(self) -> str:
        conversation = f"durable-{uuid.uuid4().hex[:12]}"
        self.conversations.append(conversation)
        return conversation

    def runtime(self, conversation: str) -> SkillRuntime:
        return self.suite.make_durable_runtime(
            conversation_id=conversation, conversations_root=self.root, durability=self.durability
        )

    def run(self, runtime: SkillRuntime, command: str) -> str:
        result = runtime.execute(SkillExecutionRequest(command=command))
        assert result.ok, f"{command[:60]!r} failed: {result.stderr[-500:]}"
        return result.stdout

    def snapshots(self, conversation: str) -> int:
        return len(self.durability.store.list_snapshots(conversation))

    def lose(self, conversation: str, sandbox_id: Any) -> None:
        self.suite.lose_workspace(
            conversation_id=conversation,
            conversations_root=self.root,
            sandbox_id=sandbox_id if isinstance(sandbox_id, str) else None,
        )

    def corrupt_objects(self) -> None:
        stored = [path for path in (self.store_path / "objects").rglob("*") if path.is_file()]
        assert stored, "the snapshot at close stored no object"
        for path in stored:
            path.write_bytes(b"corrupted")
