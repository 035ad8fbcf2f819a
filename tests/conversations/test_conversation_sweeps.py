"""Expiry sweeps of local conversations on every store, and the ``sweep`` command."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import update

from conversations.conversation_backends import Backend, SqlBackend
from skillruntime.core.cli import build_cli
from skillruntime.core.conversations import (
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
    modify_record,
    storage_key_for,
)
from skillruntime.core.conversations.exclusive import local_service_key
from skillruntime.core.conversations.leases import ConversationLease
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.conversations.sweeps import (
    available_reapers,
    parse_duration,
    sweep_conversations,
)
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime.workspace import validate_conversations_root
from skillruntime.local import LocalSkillRuntime, LocalWorkspaceReaper

OLD = datetime(2020, 1, 1, tzinfo=UTC)


def _use(store: ConversationStore, root: Path, conversation_id: str) -> str:
    """Run one command in a local conversation recorded in ``store``; its storage key."""
    with LocalSkillRuntime(
        conversation_id=conversation_id, conversations_root=root, conversation_store=store
    ) as runtime:
        runtime.execute(SkillExecutionRequest(command="echo data > file.txt"))
    assert (root / conversation_id / "file.txt").exists()
    return storage_key_for(local_service_key(str(root)), conversation_id)


def backdate(store: ConversationStore, key: str, when: datetime = OLD) -> None:
    """Make a record look idle since ``when`` (test setup only: stores always stamp now)."""
    if isinstance(store, SqlConversationStore):
        table = store._table
        with store._engine.begin() as connection:
            connection.execute(
                update(table).where(table.c.storage_key == key).values(updated_at=when)
            )
        return
    assert isinstance(store, InMemoryConversationStore)
    record = store._records[key]
    store._records[key] = record.model_copy(update={"updated_at": when})


def test_idle_workspaces_are_destroyed_and_active_ones_kept(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    idle_key = _use(store, tmp_path, "idle-one")
    _use(store, tmp_path, "active-one")
    backdate(store, idle_key)
    report = sweep_conversations(store, timedelta(hours=1), [LocalWorkspaceReaper()])
    assert (report.found, report.kept, report.destroyed, report.failed) == (2, 1, 1, 0)
    assert not (tmp_path / "idle-one").exists()
    assert (tmp_path / "active-one" / "file.txt").exists()
    assert store.get(idle_key) is None
    # The destroyed conversation starts afresh when used again.
    _use(store, tmp_path, "idle-one")


def test_dry_run_changes_nothing(backend: Backend, tmp_path: Path) -> None:
    store = backend.open()
    key = _use(store, tmp_path, "idle-one")
    backdate(store, key)
    report = sweep_conversations(store, 60, [LocalWorkspaceReaper()], dry_run=True)
    assert (report.found, report.destroyed) == (1, 1)
    assert report.outcomes[0].reason == "idle (dry run)"
    assert (tmp_path / "idle-one" / "file.txt").exists()
    assert store.get(key) is not None


def test_a_leased_conversation_is_kept(backend: Backend, tmp_path: Path) -> None:
    store = backend.open()
    key = _use(store, tmp_path, "busy-one")
    backdate(store, key)
    assert backend.open().acquire_lease(key, "a-node-running-a-command", 60) is not None
    report = sweep_conversations(store, 60, [LocalWorkspaceReaper()])
    assert (report.kept, report.destroyed) == (1, 0)
    assert report.outcomes[0].reason == "leased"
    assert (tmp_path / "busy-one").exists()


class _TouchBeforeLease(ConversationStore):
    """A store through which another node touches each record just before the sweep takes its
    lease (the moment between judging a record idle and deleting it)."""

    def __init__(self, inner: ConversationStore) -> None:
        self.inner = inner

    def get(self, storage_key: str) -> ConversationRecord | None:
        return self.inner.get(storage_key)

    def create(self, record: ConversationRecord) -> bool:
        return self.inner.create(record)

    def update(self, record: ConversationRecord) -> bool:
        return self.inner.update(record)

    def delete(self, storage_key: str) -> ConversationRecord | None:
        return self.inner.delete(storage_key)

    def list_records(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ConversationRecord]:
        return self.inner.list_records(after=after, limit=limit)

    def delete_version(self, storage_key: str, version: int) -> bool:
        return self.inner.delete_version(storage_key, version)

    def get_lease(self, lease_key: str) -> ConversationLease | None:
        return self.inner.get_lease(lease_key)

    def acquire_lease(
        self, lease_key: str, owner: str, ttl_seconds: float
    ) -> ConversationLease | None:
        modify_record(self.inner, lease_key, lambda record: record.with_changes())
        return self.inner.acquire_lease(lease_key, owner, ttl_seconds)

    def renew_lease(self, lease: ConversationLease, ttl_seconds: float) -> ConversationLease | None:
        return self.inner.renew_lease(lease, ttl_seconds)

    def release_lease(self, lease: ConversationLease) -> bool:
        return self.inner.release_lease(lease)


def test_a_conversation_touched_during_the_sweep_is_never_destroyed(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    key = _use(store, tmp_path, "touched")
    backdate(store, key)
    report = sweep_conversations(_TouchBeforeLease(store), 60, [LocalWorkspaceReaper()])
    assert (report.kept, report.destroyed) == (1, 0)
    assert report.outcomes[0].reason == "touched during the sweep"
    assert (tmp_path / "touched" / "file.txt").exists()
    assert store.get(key) is not None
    lease = store.get_lease(key)
    assert lease is not None
    assert lease.expired()  # the sweep released it


def test_activity_is_refreshed_while_a_conversation_is_used(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    with LocalSkillRuntime(
        conversation_id="used",
        conversations_root=tmp_path,
        conversation_store=store,
        activity_interval_seconds=0.05,
    ) as runtime:
        runtime.execute(SkillExecutionRequest(command="true"))
        key = storage_key_for(local_service_key(str(tmp_path)), "used")
        backdate(store, key)
        runtime.execute(SkillExecutionRequest(command="sleep 0.1"))
        runtime.execute(SkillExecutionRequest(command="true"))
    record = store.get(key)
    assert record is not None
    assert record.updated_at > OLD + timedelta(days=1)


def test_the_local_reaper_refuses_foreign_records_and_never_follows_links(tmp_path: Path) -> None:
    reaper = LocalWorkspaceReaper()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("x")
    root = tmp_path / "root"
    root.mkdir()
    (root / "linked").symlink_to(outside)
    record = ConversationRecord.new(
        service_key=local_service_key(str(root)),
        conversation_id="linked",
        runtime="local",
        workspace_root=str(root),
    )
    reaper.destroy(record)
    assert not (root / "linked").exists()
    assert (outside / "keep.txt").exists()
    foreign = record.with_changes(service_key="http://sandbox.example")
    with pytest.raises(ValueError, match="another host"):
        reaper.destroy(foreign)


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("1h30m", 5400), ("2d", 172800)]
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "h", "5x", "1.2.3m", "0s", "5m3"])
def test_parse_duration_refuses_nonsense(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_installed_reapers_cover_local_and_opensandbox() -> None:
    reapers = available_reapers()
    assert {"local", "opensandbox"} <= set(reapers)
    with pytest.raises(ValueError, match="no reaper"):
        available_reapers(["nope"])


def test_the_local_reaper_lives_in_the_local_distribution_and_its_old_name_warns() -> None:
    from skillruntime.core.conversations import sweeps

    assert isinstance(available_reapers(["local"])["local"], LocalWorkspaceReaper)
    assert "LocalWorkspaceReaper" not in sweeps.__all__
    with pytest.warns(DeprecationWarning, match=r"skillruntime\.local\.reaper"):
        assert sweeps.LocalWorkspaceReaper is LocalWorkspaceReaper


def _cli(args: list[str], url: str) -> Any:
    return CliRunner().invoke(
        build_cli(),
        ["conversations", "sweep", *args],
        env={"SKILLRUNTIME_CONVERSATION_STORE": url},
    )


def test_sweep_command_counts_and_destroys(sql_backend: SqlBackend, tmp_path: Path) -> None:
    store = sql_backend.open()
    old_key = _use(store, tmp_path, "old")
    _use(store, tmp_path, "new")
    backdate(store, old_key)
    table = ["--table", sql_backend.table_name, "--runtime", "local"]
    dry = _cli(["--idle", "1h", "--dry-run", "-v", *table], sql_backend.url)
    assert dry.exit_code == 0, dry.output
    assert "found 2, kept 1, destroyed 1, failed 0 (dry run" in dry.output
    assert (tmp_path / "old").exists()
    real = _cli(["--idle", "1h", "--json", *table], sql_backend.url)
    assert real.exit_code == 0, real.output
    data = json.loads(real.output)
    assert (data["found"], data["kept"], data["destroyed"]) == (2, 1, 1)
    assert not (tmp_path / "old").exists()
    assert (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--idle", "soon"], "not a duration"),
        (["--idle", "1h", "--runtime", "nope"], "no reaper"),
    ],
)
def test_sweep_command_usage_errors(args: list[str], message: str, tmp_path: Path) -> None:
    result = _cli(args, f"sqlite:///{tmp_path / 'c.db'}")
    assert result.exit_code == 2
    assert message in result.output


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_parse_duration_accepts_only_positive_durations(text: str) -> None:
    try:
        parsed = parse_duration(text)
    except ValueError:
        return
    assert parsed.total_seconds() > 0


@given(
    root=st.text(max_size=30),
    conversation_id=st.text(max_size=30),
)
@settings(max_examples=200, deadline=None)
def test_the_local_reaper_only_touches_valid_workspaces(root: str, conversation_id: str) -> None:
    """Hostile record fields never reach the file system: the record model or the reaper's
    own checks refuse them first."""
    try:
        record = ConversationRecord.new(
            service_key=local_service_key(root),
            conversation_id=conversation_id,
            runtime="local",
            workspace_root=root or "x",
        )
    except ValueError:
        return
    try:
        validate_conversations_root(record.workspace_root)
    except ValueError:
        with pytest.raises(ValueError, match="conversations_root"):
            LocalWorkspaceReaper().destroy(record)
