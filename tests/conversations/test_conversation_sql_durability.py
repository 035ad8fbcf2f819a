"""The records table's ``durability`` column: the record's durability fields round-trip on every
database, and ``create_schema`` adds the column to a table made before it existed (keeping its
rows) while calls on such a table fail with a message that says what to do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from skillruntime.core.conversations import ConversationRecord
from skillruntime.core.conversations.sql import SqlConversationStore
from skillruntime.core.errors import ConversationStoreError
from sql_databases import temporary_database

OLD_TABLE = """
CREATE TABLE skillruntime_conversations (
    storage_key CHAR(64) NOT NULL PRIMARY KEY,
    service_key VARCHAR(512) NOT NULL,
    conversation_id VARCHAR(128) NOT NULL,
    runtime VARCHAR(64) NOT NULL,
    workspace_root VARCHAR(1024) NOT NULL,
    sandbox_id VARCHAR(256),
    workspace_ready BOOLEAN NOT NULL,
    prepared_skills TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at {timestamp} NOT NULL
)
"""


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('db') / 'records.db'}"
        return
    with temporary_database(request.param) as made:
        yield made


def _record(conversation: str) -> ConversationRecord:
    return ConversationRecord.new(
        service_key="docker://engine",
        conversation_id=conversation,
        runtime="docker",
        workspace_root="/conversations",
        sandbox_id="box-1",
    )


def test_the_durability_fields_round_trip(url: str) -> None:
    store = SqlConversationStore(url, create_schema=True)
    try:
        plain = _record("plain")
        assert store.create(plain)
        stored = store.get(plain.storage_key)
        assert stored is not None
        assert (stored.snapshot_id, stored.restore_pending) == (None, False)
        pending = _record("pending").with_changes(restore_pending=True)
        assert store.create(pending)
        got = store.get(pending.storage_key)
        assert got is not None
        assert got.restore_pending
        snapshot = "ab" * 32
        assert store.update(got.with_changes(snapshot_id=snapshot, restore_pending=False))
        again = store.get(pending.storage_key)
        assert again is not None
        assert (again.snapshot_id, again.restore_pending, again.version) == (snapshot, False, 2)
    finally:
        store.close()


def test_create_schema_adds_the_column_to_an_older_table(url: str) -> None:
    timestamp = "TIMESTAMP WITH TIME ZONE" if url.startswith("postgresql") else "DATETIME(6)"
    if url.startswith("sqlite"):
        timestamp = "DATETIME"
    engine = create_engine(url)
    old = _record("older")
    try:
        with engine.begin() as connection:
            connection.execute(text(OLD_TABLE.format(timestamp=timestamp)))
            connection.execute(
                text(
                    "INSERT INTO skillruntime_conversations VALUES (:k, 'docker://engine', "
                    "'older', 'docker', '/conversations', 'box-1', :ready, '{}', 3, :at)"
                ),
                {"k": old.storage_key, "ready": True, "at": old.updated_at.replace(tzinfo=None)},
            )
    finally:
        engine.dispose()
    store = SqlConversationStore(url)
    try:
        with pytest.raises(ConversationStoreError, match="lacks the column 'details'"):
            store.get(old.storage_key)
        store.create_schema()
        store.create_schema()  # idempotent
        kept = store.get(old.storage_key)
        assert kept is not None
        assert (kept.sandbox_id, kept.version, kept.snapshot_id) == ("box-1", 3, None)
        assert store.update(kept.with_changes(snapshot_id="cd" * 32))
        updated = store.get(old.storage_key)
        assert updated is not None
        assert updated.snapshot_id == "cd" * 32
    finally:
        store.close()
