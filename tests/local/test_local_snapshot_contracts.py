"""The conformance kit's workspace-snapshot contracts against the local runtime, sync and async
(docs/durability.md, docs/custom-runtime.md)."""

from __future__ import annotations

from skillruntime.core.runtime.async_spi import AsyncSkillRuntime
from skillruntime.core.runtime.spi import SkillRuntime
from skillruntime.core.testing import AsyncSnapshotConformance, SnapshotConformance
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime


class TestLocalSnapshots(SnapshotConformance):
    """Every snapshot contract on the host file system, every capability on."""

    def make_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> SkillRuntime:
        return LocalSkillRuntime(
            conversation_id=conversation_id, conversations_root=conversations_root
        )


class TestAsyncLocalSnapshots(AsyncSnapshotConformance):
    """Every snapshot contract through ``AsyncWorkspaceSnapshots`` on the async local runtime."""

    def make_async_snapshot_runtime(
        self, *, conversation_id: str, conversations_root: str
    ) -> AsyncSkillRuntime:
        return AsyncLocalSkillRuntime(
            conversation_id=conversation_id, conversations_root=conversations_root
        )
