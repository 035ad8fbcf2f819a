"""What only the SQL store does: processes racing, schema handling, failures, URLs, time zones."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sqlite3
import subprocess
import sys
import threading
import traceback
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import create_engine, insert, inspect, select
from sqlalchemy.engine import make_url

import preloaded_python
from conversations.conversation_backends import SqlBackend, new_record, unique_table
from skillruntime.core.conversations import (
    ConversationRecord,
    ConversationStoreError,
    InMemoryConversationStore,
    open_conversation_store,
)
from skillruntime.core.conversations.sql import SqlConversationStore, conversation_table, schema_ddl

HERE = Path(__file__).resolve().parent
PASSWORD = "s3cret-Pa55word"
COLUMNS = [
    "storage_key",
    "service_key",
    "conversation_id",
    "runtime",
    "workspace_root",
    "sandbox_id",
    "workspace_ready",
    "prepared_skills",
    "version",
    "updated_at",
    "details",
]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _insert_row(backend: SqlBackend, record: ConversationRecord, **columns: object) -> None:
    """Write a row for ``record`` straight into the backend's table, bypassing the store;
    ``columns`` gives the columns the record does not fix (and may override the others)."""
    values = {
        "storage_key": record.storage_key,
        "service_key": record.service_key,
        "conversation_id": record.conversation_id,
        "runtime": record.runtime,
        "workspace_root": record.workspace_root,
        **columns,
    }
    engine = create_engine(backend.url)
    try:
        with engine.begin() as connection:
            connection.execute(insert(conversation_table(backend.table_name)).values(**values))
    finally:
        engine.dispose()


def _assert_no_password(error: BaseException) -> None:
    text = "".join(traceback.format_exception(error))
    assert PASSWORD not in text
    assert PASSWORD not in repr(error)


# -- several processes -----------------------------------------------------------------------


def _race(url: str, table: str, mode: str, count: int) -> list[dict[str, object]]:
    """Run ``count`` workers released together; each one's JSON result, in worker order."""
    workers = [
        preloaded_python.Popen(
            [sys.executable, str(HERE / "conversation_race_worker.py"), url, table, str(i), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line.strip() == "ready", (line, worker.communicate(timeout=60))
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        outputs = [worker.communicate(timeout=120) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert [worker.returncode for worker in workers] == [0] * count, outputs
    return [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]


@pytest.mark.parametrize("mode", ["warm", "fresh"])
def test_processes_racing_on_one_conversation_agree(sql_url: str, mode: str) -> None:
    count = 6 if mode == "warm" else 4  # "fresh" workers also load every plugin: fewer of them
    table = unique_table()
    if mode == "warm":
        with SqlConversationStore(sql_url, table_name=table) as store:
            store.create_schema()

    results = _race(sql_url, table, mode, count)

    winners = [index for index, result in enumerate(results) if result["created"]]
    assert len(winners) == 1
    with SqlConversationStore(sql_url, table_name=table) as store:
        stored = store.get(new_record().storage_key)
    assert stored is not None
    assert stored.sandbox_id == f"sandbox-{winners[0]}"
    assert dict(stored.prepared_skills) == {f"digest-{i}": f"/skills/{i}" for i in range(count)}
    assert stored.version == 1 + count
    assert max(int(str(result["version"])) for result in results) == 1 + count


# -- schema ------------------------------------------------------------------------------------


def test_create_schema_builds_the_documented_table_once(sql_url: str) -> None:
    table = unique_table()
    with SqlConversationStore(sql_url, table_name=table) as store:
        assert store.schema_exists() is False
        store.create_schema()
        store.create_schema()
        assert store.schema_exists() is True
        assert store.create(new_record())
    engine = create_engine(sql_url)
    try:
        columns = [column["name"] for column in inspect(engine).get_columns(table)]
        primary = inspect(engine).get_pk_constraint(table)["constrained_columns"]
    finally:
        engine.dispose()
    assert columns == COLUMNS
    assert primary == ["storage_key"]


def test_nodes_creating_the_schema_together_all_succeed(sql_url: str) -> None:
    table = unique_table()
    count = 4
    stores = [SqlConversationStore(sql_url, table_name=table) for _ in range(count)]
    barrier = threading.Barrier(count, timeout=60)
    failures: list[BaseException] = []

    def create(store: SqlConversationStore) -> None:
        barrier.wait()
        try:
            store.create_schema()
        except BaseException as error:  # collected and asserted below
            failures.append(error)

    threads = [threading.Thread(target=create, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    try:
        assert not any(thread.is_alive() for thread in threads)
        assert failures == []
        assert all(store.schema_exists() for store in stores)
        assert stores[0].create(new_record())
    finally:
        for store in stores:
            store.close()


def test_a_missing_table_names_the_fix(sql_url: str) -> None:
    with SqlConversationStore(sql_url, table_name=unique_table()) as store:
        record = new_record()
        for call in (
            lambda: store.get(record.storage_key),
            lambda: store.create(record),
            lambda: store.update(record),
            lambda: store.delete(record.storage_key),
        ):
            with pytest.raises(ConversationStoreError, match=r"create_schema\(\)"):
                call()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql", "mariadb"])
def test_schema_ddl_lists_every_column(dialect: str) -> None:
    ddl = schema_ddl(dialect, "my_conversations")
    assert ddl.startswith("CREATE TABLE my_conversations")
    assert all(column in ddl for column in COLUMNS)
    assert "PRIMARY KEY (storage_key)" in ddl


# -- failures ----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://app:{password}@127.0.0.1:{port}/conversations",
        "mariadb+pymysql://app:{password}@127.0.0.1:{port}/conversations",
    ],
)
def test_an_unreachable_database_fails_clearly_without_the_password(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = SqlConversationStore(
        url.format(password=PASSWORD, port=_closed_port()), connect_timeout=1
    )
    record = new_record()
    with store:
        for call in (
            lambda: store.get(record.storage_key),
            lambda: store.create(record),
            lambda: store.update(record),
            lambda: store.delete(record.storage_key),
            store.schema_exists,
            store.create_schema,
        ):
            with pytest.raises(ConversationStoreError, match="cannot connect") as raised:
                call()
            assert "***" in str(raised.value)
            _assert_no_password(raised.value)
    assert PASSWORD not in caplog.text
    assert PASSWORD not in repr(store)


def test_an_unreachable_database_fails_when_creating_the_schema() -> None:
    url = f"postgresql://app:{PASSWORD}@127.0.0.1:{_closed_port()}/conversations"
    with pytest.raises(ConversationStoreError) as raised:
        open_conversation_store(url, create_schema=True, connect_timeout=1)
    _assert_no_password(raised.value)


def test_a_malformed_url_is_refused_without_the_password() -> None:
    with pytest.raises(ConversationStoreError, match="not a valid database URL") as raised:
        SqlConversationStore(f"postgresql://app:{PASSWORD}@host:not-a-port/db")
    _assert_no_password(raised.value)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
        ("oracle://app:{password}@host/db", "serves sqlite, postgresql, mysql and mariadb"),
        ("postgresql+asyncpg://app:{password}@host/db", "driver 'asyncpg' is not supported"),
        ("sqlite:////no/such/directory/conversations.db", "directory"),
    ],
)
def test_unsupported_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ConversationStoreError, match=message) as raised:
        SqlConversationStore(url.format(password=PASSWORD))
    _assert_no_password(raised.value)


def test_a_corrupt_row_is_reported(sql_backend: SqlBackend) -> None:
    record = new_record()
    _insert_row(
        sql_backend,
        record,
        sandbox_id=None,
        workspace_ready=False,
        prepared_skills="{not json",
        version=1,
        updated_at=datetime.now(UTC),
    )
    with pytest.raises(ConversationStoreError, match="not a valid conversation record"):
        sql_backend.open().get(record.storage_key)


@pytest.mark.timeout(120)
def test_a_held_lock_ends_in_an_error_after_the_statement_timeout(sql_backend: SqlBackend) -> None:
    store = sql_backend.open(statement_timeout=1)
    store.create(new_record())
    current = store.get(new_record().storage_key)
    assert current is not None
    table = conversation_table(sql_backend.table_name)
    with contextlib.ExitStack() as held:
        if sql_backend.kind == "sqlite":
            path = make_url(sql_backend.url).database
            assert path is not None
            raw = held.enter_context(
                contextlib.closing(sqlite3.connect(path, isolation_level=None))
            )
            raw.execute("BEGIN IMMEDIATE")
            held.callback(raw.execute, "ROLLBACK")
        else:
            engine = create_engine(sql_backend.url)
            held.callback(engine.dispose)
            blocker = held.enter_context(engine.connect())
            held.enter_context(blocker.begin())
            lock = select(table).where(table.c.storage_key == current.storage_key).with_for_update()
            assert blocker.execute(lock).first() is not None

        with pytest.raises(ConversationStoreError, match="could not update a record"):
            store.update(current.with_changes(workspace_ready=True))

    assert store.update(current.with_changes(workspace_ready=True))


def test_a_closed_store_refuses_calls(sql_backend: SqlBackend) -> None:
    store = sql_backend.open()
    store.close()
    store.close()
    with pytest.raises(ConversationStoreError, match="closed"):
        store.get(new_record().storage_key)


# -- time zones --------------------------------------------------------------------------------


def test_timestamps_keep_their_instant_and_come_back_in_utc(sql_backend: SqlBackend) -> None:
    record = new_record()
    written = datetime(2026, 3, 29, 1, 30, 15, 123456, tzinfo=timezone(timedelta(hours=5)))
    _insert_row(
        sql_backend,
        record,
        sandbox_id=record.sandbox_id,
        workspace_ready=True,
        prepared_skills='{"d":"/p"}',
        version=3,
        updated_at=written,
    )
    stored = sql_backend.open().get(record.storage_key)
    assert stored is not None
    assert stored.updated_at == written
    assert stored.updated_at.utcoffset() == timedelta(0)
    assert (stored.version, stored.workspace_ready, dict(stored.prepared_skills)) == (
        3,
        True,
        {"d": "/p"},
    )


# -- SQLite ------------------------------------------------------------------------------------


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    with SqlConversationStore(f"sqlite:///{path}", create_schema=True) as store:
        store.create(new_record())
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        connection.close()


def test_sqlite_relative_and_absolute_urls_name_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with open_conversation_store("sqlite:///relative.db") as store:
        assert store.create(new_record())
    absolute = tmp_path / "sub" / "absolute.db"
    absolute.parent.mkdir()
    absolute_url = f"sqlite:////{str(absolute).lstrip('/')}"
    with open_conversation_store(absolute_url) as store:
        assert store.create(new_record())
    assert (tmp_path / "relative.db").is_file()
    assert absolute.is_file()
    with open_conversation_store(f"sqlite:///{tmp_path / 'relative.db'}") as store:
        assert store.get(new_record().storage_key) is not None


# -- choosing a store by URL -------------------------------------------------------------------


def test_memory_urls_open_the_in_memory_store() -> None:
    store = open_conversation_store("memory://")
    assert isinstance(store, InMemoryConversationStore)
    with pytest.raises(ValueError, match="takes no options"):
        open_conversation_store("memory://", create_schema=True)


def test_sqlite_urls_create_their_table_unless_told_not_to(tmp_path: Path) -> None:
    with open_conversation_store(f"sqlite:///{tmp_path / 'a.db'}") as store:
        assert isinstance(store, SqlConversationStore)
        assert store.schema_exists()
    with open_conversation_store(f"sqlite:///{tmp_path / 'b.db'}", create_schema=False) as store:
        assert isinstance(store, SqlConversationStore)
        assert not store.schema_exists()


def test_server_urls_need_an_explicit_schema(postgresql_url: str, mariadb_url: str) -> None:
    table = unique_table()
    bare_postgres = postgresql_url.replace("postgresql+psycopg://", "postgresql://")
    with open_conversation_store(bare_postgres, table_name=table) as store:
        assert isinstance(store, SqlConversationStore)
        with pytest.raises(ConversationStoreError, match=r"create_schema\(\)"):
            store.get(new_record().storage_key)
    with open_conversation_store(bare_postgres, table_name=table, create_schema=True) as store:
        assert store.create(new_record())
    for url in (
        mariadb_url,
        mariadb_url.replace("mariadb+pymysql://", "mariadb://"),
        mariadb_url.replace("mariadb+pymysql://", "mysql+pymysql://"),
        mariadb_url.replace("mariadb+pymysql://", "mysql://"),
    ):
        with open_conversation_store(url, table_name=table, create_schema=True) as store:
            assert isinstance(store, SqlConversationStore)
            store.create(new_record())
            assert store.get(new_record().storage_key) is not None


def test_an_unknown_scheme_lists_the_installed_ones() -> None:
    with pytest.raises(ValueError, match="installed schemes") as raised:
        open_conversation_store("redis://localhost/0")
    assert all(
        scheme in str(raised.value)
        for scheme in ("memory", "sqlite", "postgresql", "mysql", "mariadb")
    )
