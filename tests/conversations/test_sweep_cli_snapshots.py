"""``skillruntime conversations sweep --snapshot-store`` snapshots an idle conversation's
workspace before destroying it, and the next runtime restores it (docs/durability.md, "Before a
sweep"); a runtime the sweep cannot open refuses the command before anything is destroyed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import update

from conversations.conversation_backends import sqlite_url
from skillruntime.core.cli import build_cli
from skillruntime.core.conversations.guard_rules import local_service_key
from skillruntime.core.conversations.spi import ConversationRecord, storage_key_for
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.conversations.sweeps import OrphanSandbox, record_copy_store
from skillruntime.core.durability import Durability
from skillruntime.core.errors import ConversationStoreError
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.plugins.registry import (
    ConversationReaperProvider,
    available_conversation_reapers,
)
from skillruntime.core.snapshots import LocalSnapshotStore
from skillruntime.local import LocalSkillRuntime


def _idle_conversation(url: str, root: Path, conversation_id: str, text: str) -> None:
    """A local conversation recorded in the store at ``url`` whose workspace holds ``notes.txt``
    (``text``), its record backdated by two days."""
    store = SqlConversationStore(url, create_schema=True)
    try:
        with LocalSkillRuntime(
            conversation_id=conversation_id, conversations_root=root, conversation_store=store
        ) as runtime:
            runtime.execute(SkillExecutionRequest(command=f"printf '{text}' > notes.txt"))
        key = storage_key_for(local_service_key(str(root)), conversation_id)
        with store._engine.begin() as connection:
            connection.execute(
                update(store._table)
                .where(store._table.c.storage_key == key)
                .values(updated_at=datetime.now(UTC) - timedelta(days=2))
            )
    finally:
        store.close()


def _sweep(url: str, *args: str) -> Any:
    return CliRunner().invoke(
        build_cli(), ["conversations", "sweep", "--idle", "1d", "--url", url, *args]
    )


def test_the_sweep_snapshots_an_idle_workspace_the_next_runtime_restores(
    tmp_path: Path,
) -> None:
    url, root, snapshots = sqlite_url(tmp_path), tmp_path / "root", tmp_path / "snapshots"
    _idle_conversation(url, root, "idle-1", "draft")
    result = _sweep(url, "--runtime", "local", "--snapshot-store", str(snapshots), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["destroyed"], report["failed"]) == (1, 0)
    assert not (root / "idle-1").exists()
    store = LocalSnapshotStore(snapshots)
    assert len(store.list_snapshots("idle-1")) == 1
    with LocalSkillRuntime(
        conversation_id="idle-1", conversations_root=root, durability=Durability(store)
    ) as runtime:
        restored = runtime.execute(SkillExecutionRequest(command="cat notes.txt"))
    assert restored.stdout == "draft"


def test_without_the_option_nothing_is_snapshotted(tmp_path: Path) -> None:
    url, root = sqlite_url(tmp_path), tmp_path / "root"
    _idle_conversation(url, root, "idle-2", "draft")
    result = _sweep(url, "--runtime", "local", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["destroyed"] == 1
    assert not (tmp_path / "snapshots").exists()


class _PlainReaper:
    """A reaper that cannot open a runtime on a record."""

    runtime = "plain"

    def destroy(self, record: ConversationRecord) -> None:
        raise AssertionError("nothing may be destroyed")

    def orphans(self, records: object) -> list[OrphanSandbox]:
        return []

    def destroy_orphan(self, orphan: OrphanSandbox) -> None:
        raise AssertionError("nothing may be destroyed")


def test_a_runtime_the_sweep_cannot_open_refuses_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, root = sqlite_url(tmp_path), tmp_path / "root"
    _idle_conversation(url, root, "idle-3", "draft")
    providers = {
        **available_conversation_reapers(),
        "plain": ConversationReaperProvider(runtime="plain", description="", factory=_PlainReaper),
    }
    monkeypatch.setattr(
        "skillruntime.core.plugins.registry.available_conversation_reapers", lambda: providers
    )
    result = _sweep(
        url, "--runtime", "local", "--runtime", "plain", "--snapshot-store", str(tmp_path / "s")
    )
    assert result.exit_code == 2
    assert "--snapshot-store" in result.output
    assert "plain" in result.output
    assert (root / "idle-3" / "notes.txt").read_text() == "draft"


def test_a_snapshot_store_that_cannot_be_opened_refuses_the_command(tmp_path: Path) -> None:
    url, root = sqlite_url(tmp_path), tmp_path / "root"
    _idle_conversation(url, root, "idle-4", "draft")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = _sweep(url, "--runtime", "local", "--snapshot-store", str(blocker / "snapshots"))
    assert result.exit_code == 2
    assert "cannot open the snapshot store" in result.output
    assert (root / "idle-4" / "notes.txt").read_text() == "draft"


def test_the_record_copy_keeps_every_write_to_itself_and_refuses_a_new_sandbox() -> None:
    """The store a remote reaper's runtime gets: it reads the record, keeps what the runtime
    writes on the same sandbox (activity, a cleared ``restore_pending``) in the copy, and
    refuses a replacement sandbox, a new record or a deletion."""
    record = ConversationRecord.new(
        service_key="docker://engine",
        conversation_id="copied",
        runtime="docker",
        workspace_root="/workspace/conversations",
        sandbox_id="c-1",
    ).with_changes(version=7)
    copy = record_copy_store(record)
    assert copy.get(record.storage_key) == record
    assert copy.update(record.with_changes(restore_pending=False))
    assert copy.get(record.storage_key).version == 8  # type: ignore[union-attr]
    current = copy.get(record.storage_key)
    assert current is not None
    with pytest.raises(ConversationStoreError, match="replace the recorded sandbox"):
        copy.update(current.with_changes(sandbox_id="c-2"))
    with pytest.raises(ConversationStoreError, match="replace the recorded sandbox"):
        copy.update(current.with_changes(sandbox_storage="other-volume"))
    with pytest.raises(ConversationStoreError, match="record a new sandbox"):
        copy.create(record.with_changes(conversation_id="other"))
    with pytest.raises(ConversationStoreError, match="delete the record"):
        copy.delete(record.storage_key)
    with pytest.raises(ConversationStoreError, match="delete the record"):
        copy.delete_version(record.storage_key, 8)
    assert copy.get(record.storage_key) == current
