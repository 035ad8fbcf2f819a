"""The conformance kit's workspace-snapshot contracts against the OpenSandbox runtime, sync and
async, through the real SDK and the protocol double (docs/durability.md,
docs/custom-runtime.md). A new conversation is a new sandbox, so restoring into one is the
"sandbox was replaced" case itself."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import ClassVar

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import AsyncSnapshotConformance, SnapshotConformance
from skillruntime.opensandbox import AsyncOpenSandboxSkillRuntime, OpenSandboxSkillRuntime

ROOT = "/workspace/conversations"


class _OpenSandboxSnapshotHooks:
    """The double, one conversation store per test, and every sandbox destroyed afterwards."""

    double: OpenSandboxDouble

    # Off: execd's file API carries a path as JSON text, and the SDK encodes its upload
    # metadata as strict UTF-8, so a file whose name is not UTF-8 cannot be written through
    # ``upload_files`` (OpenSandboxFileError, INVALID_ARGUMENT; the restore then raises
    # WorkspaceRestoreError after its first step). Such names can be made and snapshotted in
    # the sandbox, but not restored.
    snapshot_non_utf8_names: ClassVar[bool] = False

    @pytest.fixture(autouse=True)
    def _double(self, opensandbox_double: OpenSandboxDouble) -> None:
        self.double = opensandbox_double
        self.store = InMemoryConversationStore()

    def conversations_root(self, tmp_path: Path) -> str:
        return ROOT

    def discard_conversations(self, conversation_ids: list[str]) -> None:
        for conversation_id in conversation_ids:
            runtime = OpenSandboxSkillRuntime(
                domain=self.double.domain,
                api_key=self.double.api_key,
                conversation_id=conversation_id,
                conversations_root=ROOT,
                conversation_store=self.store,
            )
            with contextlib.closing(runtime):
                runtime.destroy_conversation_sandbox()


class TestOpenSandboxSnapshots(_OpenSandboxSnapshotHooks, SnapshotConformance):
    """Every snapshot contract through the sync OpenSandbox runtime."""

    def make_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> SkillRuntime:
        return OpenSandboxSkillRuntime(
            domain=self.double.domain,
            api_key=self.double.api_key,
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            conversation_store=self.store,
            deadline_grace_seconds=5.0,
        )


class TestOpenSandboxAsyncSnapshots(_OpenSandboxSnapshotHooks, AsyncSnapshotConformance):
    """Every snapshot contract through the native async OpenSandbox runtime."""

    def make_async_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> AsyncSkillRuntime:
        return AsyncOpenSandboxSkillRuntime(
            domain=self.double.domain,
            api_key=self.double.api_key,
            conversation_id=conversation_id,
            conversations_root=conversations_root,
            conversation_store=self.store,
            deadline_grace_seconds=5.0,
        )
