"""``workspace.snapshot`` and ``workspace.restore`` audit events, both faces
(docs/observability.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from audit_capture import AuditCapture

from skillruntime.core.durability import AsyncWorkspaceSnapshots, WorkspaceSnapshots
from skillruntime.core.errors import SnapshotNotFoundError, WorkspaceRestoreError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.local import AsyncLocalSkillRuntime, LocalSkillRuntime

NAME = "secret-looking-name.txt"


def _fill(workspace: Path) -> None:
    (workspace / "dir").mkdir(parents=True)
    (workspace / "dir" / NAME).write_text("content one\n")
    (workspace / "other.txt").write_text("two\n")


def _check(capture: AuditCapture, conversation: str, snapshot_id: str) -> None:
    (snapshot,) = capture.of("workspace.snapshot")
    assert snapshot.outcome == "ok"
    assert snapshot.runtime == "local"
    assert snapshot.conversation_id == conversation
    assert snapshot.snapshot_id == snapshot_id
    assert (snapshot.entries, snapshot.objects, snapshot.bytes) == (3, 2, 16)
    assert snapshot.requests == 2  # the listing, one batch read
    assert snapshot.duration_seconds > 0
    (restore,) = capture.of("workspace.restore")
    assert restore.outcome == "ok"
    assert restore.snapshot_id == snapshot_id
    assert (restore.entries, restore.objects, restore.bytes) == (3, 1, 12)
    assert restore.requests is not None
    assert restore.requests >= 2
    for event in (snapshot, restore):
        assert NAME not in event.to_json()
    spans = {span.name for span in capture.spans()}
    assert {"skillruntime.workspace.snapshot", "skillruntime.workspace.restore"} <= spans
    attributes = next(
        span.attributes for span in capture.spans() if span.name.endswith("workspace.snapshot")
    )
    assert attributes is not None
    assert attributes["skillruntime.snapshot.id"] == snapshot_id
    assert attributes["skillruntime.requests"] == 2


def test_snapshot_and_restore_are_audited(tmp_path: Path, capture: AuditCapture) -> None:
    root = tmp_path / "conversations"
    _fill(root / "audit-sync")
    snapshots = WorkspaceSnapshots(LocalSnapshotStore(tmp_path / "snapshots"))
    with LocalSkillRuntime(conversation_id="audit-sync", conversations_root=root) as runtime:
        taken = snapshots.snapshot(runtime, conversation_id="audit-sync")
        (root / "audit-sync" / "dir" / NAME).unlink()
        snapshots.restore(runtime, conversation_id="audit-sync")
    _check(capture, "audit-sync", taken.snapshot_id)


def test_async_snapshot_and_restore_are_audited(tmp_path: Path, capture: AuditCapture) -> None:
    root = tmp_path / "conversations"
    _fill(root / "audit-async")
    snapshots = AsyncWorkspaceSnapshots(LocalSnapshotStore(tmp_path / "snapshots"))

    async def scenario() -> str:
        async with AsyncLocalSkillRuntime(
            conversation_id="audit-async", conversations_root=root
        ) as runtime:
            taken = await snapshots.snapshot(runtime, conversation_id="audit-async")
            await runtime.execute(SkillExecutionRequest(command=f"rm dir/{NAME}"))
            await snapshots.restore(runtime, conversation_id="audit-async")
            return taken.snapshot_id

    _check(capture, "audit-async", asyncio.run(scenario()))


def test_a_failed_restore_is_an_error_event(tmp_path: Path, capture: AuditCapture) -> None:
    root = tmp_path / "conversations"
    (root / "audit-none").mkdir(parents=True)
    snapshots = WorkspaceSnapshots(LocalSnapshotStore(tmp_path / "snapshots"))
    with (
        LocalSkillRuntime(conversation_id="audit-none", conversations_root=root) as runtime,
        pytest.raises((SnapshotNotFoundError, WorkspaceRestoreError)),
    ):
        snapshots.restore(runtime, conversation_id="audit-none")
    (event,) = capture.of("workspace.restore")
    assert event.outcome == "error"
    assert event.error_type in {"SnapshotNotFoundError", "WorkspaceRestoreError"}
    assert event.snapshot_id is None
