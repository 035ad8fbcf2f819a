"""``SqlConversationStore``: conversation records in one SQL table (SQLAlchemy Core).

One table holds one row per conversation (see :func:`conversation_table` for its columns and
``docs/conversation-stores.md`` for the DDL). The store never overwrites blindly:

* :meth:`SqlConversationStore.create` is a plain ``INSERT``; a duplicate key raises an integrity
  error in every database, which becomes ``False``.
* :meth:`SqlConversationStore.update` is ``UPDATE … WHERE storage_key = :k AND version = :v``;
  a row count of one means the compare-and-set won.
* :meth:`SqlConversationStore.delete` reads the row (``SELECT … FOR UPDATE`` where the database
  supports it) and deletes that version of it in the same transaction.

Supported URLs: ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` (WAL journal and a busy
timeout so several processes of one host share the file), ``postgresql[+psycopg]://`` and
``mysql[+pymysql]://`` / ``mariadb[+pymysql]://``. A URL without a driver gets the driver of the
matching extra (``psycopg`` or ``pymysql``). Every driver gets a connect timeout and a bound on
how long one statement (or lock wait) may take. On PostgreSQL and MySQL/MariaDB every call also
has a client-side deadline of ``connect_timeout + statement_timeout`` (see
:mod:`skillruntime.core.conversations.sql_deadline`): a silent network cannot hold a call longer
than that.
Errors are :class:`ConversationStoreError` whose text shows the URL with its password hidden.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import (
    CHAR,
    Boolean,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    event,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import URL, Connection, Dialect, Engine, RowMapping, create_engine, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.schema import CreateTable
from sqlalchemy.types import TypeDecorator, TypeEngine

from ..errors import StoreConflictError
from .spi import ConversationLease, ConversationRecord, ConversationStore, ConversationStoreError
from .sql_deadline import CallDeadline, start_deadline
from .sql_leases import SqlLeases, lease_table

__all__ = [
    "DEFAULT_TABLE_NAME",
    "SqlConversationStore",
    "conversation_table",
    "schema_ddl",
]

logger = logging.getLogger(__name__)

DEFAULT_TABLE_NAME = "skillruntime_conversations"

_T = TypeVar("_T")

_DEFAULT_DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}
_EXTRAS = {"sqlite": "sql", "postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql"}
_POSTGRES_LIBPQ_DRIVERS = ("psycopg", "psycopg2")
_MYSQL_DRIVERS = ("pymysql", "mysqldb")
_TRANSIENT_ATTEMPTS = 4
_DELETE_ATTEMPTS = 16
_MAX_DETAIL = 300
_SOCKET = "skillruntime_socket"
_FRESH = "skillruntime_fresh"


class _UtcDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware.

    PostgreSQL keeps ``timestamptz``; MySQL/MariaDB get ``DATETIME(6)`` and SQLite text, both
    holding the UTC wall time (naive values given to the store count as UTC).
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        utc = aware.astimezone(UTC)
        return utc if dialect.name == "postgresql" else utc.replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def conversation_table(name: str = DEFAULT_TABLE_NAME, metadata: MetaData | None = None) -> Table:
    """The table definition the store uses (one row per conversation, keyed by storage key).

    ``prepared_skills`` holds a JSON object (content digest → remote base path) as text;
    ``version`` is the compare-and-set counter; ``updated_at`` is the UTC time of the last write;
    ``details`` holds the record's other fields (today its durability fields) as a JSON object
    (``NULL`` while they are at their defaults; added to older tables by
    :meth:`SqlConversationStore.create_schema`).
    """
    return Table(
        name,
        metadata if metadata is not None else MetaData(),
        Column("storage_key", CHAR(64), primary_key=True),
        Column("service_key", String(512), nullable=False),
        Column("conversation_id", String(128), nullable=False),
        Column("runtime", String(64), nullable=False),
        Column("workspace_root", String(1024), nullable=False),
        Column("sandbox_id", String(256), nullable=True),
        Column("workspace_ready", Boolean(), nullable=False),
        Column(
            "prepared_skills",
            Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb"),
            nullable=False,
        ),
        Column("version", Integer(), nullable=False),
        Column("updated_at", _UtcDateTime(), nullable=False),
        Column("details", Text(), nullable=True),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
        mariadb_engine="InnoDB",
        mariadb_charset="utf8mb4",
    )


def schema_ddl(dialect: str, table_name: str = DEFAULT_TABLE_NAME) -> str:
    """The ``CREATE TABLE`` statement for ``dialect`` (``sqlite``, ``postgresql``, ``mysql``,
    ``mariadb``), e.g. for a DBA who creates the table ahead of deployment."""
    dialect_class = make_url(f"{dialect}://").get_dialect()
    records = conversation_table(table_name)
    leases = lease_table(table_name, records.metadata, _UtcDateTime())
    parts = []
    for table in (records, leases):
        compiled = str(CreateTable(table).compile(dialect=dialect_class())).strip()
        parts.append("\n".join(line.rstrip() for line in compiled.splitlines()) + ";")
    return "\n\n".join(parts)


class SqlConversationStore(ConversationStore):
    """Conversation records in a SQL table shared by every process and node that opens it.

    ``url`` is a SQLAlchemy URL (see the module docs). The table is not created unless
    ``create_schema=True`` is passed or :meth:`create_schema` is called. ``connect_timeout``
    bounds opening a connection (TCP, handshake, authentication); ``statement_timeout`` bounds
    one statement including its lock waits (SQLite: the busy timeout). On PostgreSQL and
    MySQL/MariaDB each call (``get``, ``create``, ``update``, ``delete``, the schema calls)
    returns or raises within :attr:`call_timeout` = ``connect_timeout`` (as the driver applies
    it) + ``statement_timeout``, whatever the network does; waiting for a free pooled
    connection adds at most ``pool_timeout``. Pooled connections are checked with a ping, under
    the same deadline, before each use. Pool options go to SQLAlchemy's ``QueuePool``;
    ``engine_options`` are passed to :func:`sqlalchemy.create_engine` last.

    Safe to use from several threads. Create the store in the process that uses it (after any
    ``fork``); processes share records through the database, never through the object.
    """

    def __init__(
        self,
        url: str | URL,
        *,
        table_name: str = DEFAULT_TABLE_NAME,
        create_schema: bool = False,
        connect_timeout: float = 10.0,
        statement_timeout: float = 30.0,
        pool_size: int = 5,
        max_overflow: int = 10,
        pool_timeout: float = 30.0,
        pool_recycle: float = 1800.0,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        if connect_timeout <= 0 or statement_timeout <= 0:
            raise ValueError("connect_timeout and statement_timeout must be positive")
        self._url = _parse_url(url)
        self._password = self._url.password
        self._closed = False
        self._table = conversation_table(table_name)
        self._lease_table = lease_table(table_name, self._table.metadata, _UtcDateTime())
        self._extras = SqlLeases(self._table, self._lease_table, self._transaction)
        self._local = threading.local()
        self._connect_seconds = _effective_connect_timeout(self._url, connect_timeout)
        self._call_timeout = (
            None
            if self._url.get_backend_name() == "sqlite"
            else self._connect_seconds + statement_timeout
        )
        options: dict[str, Any] = {
            "pool_size": pool_size,
            "max_overflow": max_overflow,
            "pool_timeout": pool_timeout,
            "pool_recycle": pool_recycle,
            "connect_args": _connect_args(self._url, connect_timeout, statement_timeout),
        }
        options.update(engine_options or {})
        self._engine = self._create_engine(options, statement_timeout)
        logger.debug("conversation store opened on %s (table %s)", self.url, table_name)
        if create_schema:
            try:
                self.create_schema()
            except BaseException:
                self.close()
                raise

    @property
    def url(self) -> str:
        """The database URL with its password hidden (safe to log)."""
        return self._url.render_as_string(hide_password=True)

    @property
    def call_timeout(self) -> float | None:
        """Seconds within which every call returns or raises (``None`` for SQLite, whose calls
        are bounded by the busy timeout)."""
        return self._call_timeout

    @property
    def table_name(self) -> str:
        """The name of the table holding the records."""
        return self._table.name

    def __repr__(self) -> str:
        return f"SqlConversationStore({self.url!r}, table_name={self.table_name!r})"

    # -- schema ------------------------------------------------------------------------------

    def create_schema(self) -> None:
        """Create the table if it is absent (idempotent, safe when several nodes race on it)."""
        self._check_open()
        with self._bounded():
            self._create_schema()

    def _create_schema(self) -> None:
        for attempt in range(_TRANSIENT_ATTEMPTS):
            failure: SQLAlchemyError
            connection = self._connect()
            try:
                with connection, connection.begin():
                    self._table.create(connection, checkfirst=True)
                    self._lease_table.create(connection, checkfirst=True)
                self._add_missing_columns()
                return
            except SQLAlchemyError as error:
                failure = error
            # Another node may have created them between the check and the CREATE.
            if (
                self._table_surely_exists()
                and self._table_surely_exists(self._lease_table)
                and not self._missing_columns()
            ):
                return
            # SQLite commits each CREATE on its own: another node may be between the two tables,
            # so one existing table means "look again" (the next check creates only the other).
            if attempt + 1 < _TRANSIENT_ATTEMPTS and (
                self._retryable(failure) or self._table_surely_exists()
            ):
                continue
            raise ConversationStoreError(
                f"the conversation store {self.url} could not create its table "
                f"{self._table.name!r}: {self._detail(failure)}"
            ) from None

    def _lacks_details(self, error: SQLAlchemyError) -> bool:
        """Whether ``error`` came from a records table without the ``details`` column."""
        if not isinstance(error, DBAPIError) or "details" not in str(error.orig):
            return False
        try:
            return "details" in self._missing_columns()
        except SQLAlchemyError:
            return False

    def _missing_columns(self) -> list[str]:
        """The columns of the records table that an older table lacks (added by
        :meth:`_add_missing_columns`); raises when the table cannot be inspected."""
        connection = self._connect()
        with connection:
            present = {
                column["name"] for column in inspect(connection).get_columns(self._table.name)
            }
        return [column.name for column in self._table.columns if column.name not in present]

    def _add_missing_columns(self) -> None:
        """Add the nullable columns a table created by an earlier version lacks (today:
        ``details``). Two nodes racing may both try: a failed ``ALTER`` counts when the
        column is there afterwards."""
        for name in self._missing_columns():
            column = self._table.c[name]
            kind = column.type.compile(dialect=self._engine.dialect)
            table = self._engine.dialect.identifier_preparer.format_table(self._table)
            quoted = self._engine.dialect.identifier_preparer.quote(name)
            connection = self._connect()
            try:
                with connection, connection.begin():
                    connection.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {quoted} {kind}")
                logger.info("added column %s to table %s", name, self._table.name)
            except SQLAlchemyError:
                if name in self._missing_columns():
                    raise

    def schema_exists(self) -> bool:
        """Whether the table exists (raises :class:`ConversationStoreError` if unreachable)."""
        self._check_open()
        try:
            with self._bounded():
                connection = self._connect()
                with connection:
                    return inspect(connection).has_table(self._table.name)
        except SQLAlchemyError as error:
            raise ConversationStoreError(
                f"the conversation store {self.url} could not look up its table: "
                f"{self._detail(error)}"
            ) from None

    # -- records -----------------------------------------------------------------------------

    def get(self, storage_key: str) -> ConversationRecord | None:
        table = self._table
        query = select(table).where(table.c.storage_key == storage_key)
        row = self._transaction("read a record", lambda c: c.execute(query).mappings().first())
        return None if row is None else self._to_record(row)

    def create(self, record: ConversationRecord) -> bool:
        values = _to_row(record.with_changes(version=1))
        statement = insert(self._table).values(**values)
        try:
            self._transaction("create a record", lambda c: c.execute(statement))
        except IntegrityError:
            return False
        return True

    def update(self, record: ConversationRecord) -> bool:
        table = self._table
        values = _to_row(record.with_changes(version=record.version + 1))
        del values["storage_key"]
        statement = (
            update(table)
            .where(table.c.storage_key == record.storage_key, table.c.version == record.version)
            .values(**values)
        )
        try:
            count = self._transaction("update a record", lambda c: c.execute(statement).rowcount)
        except IntegrityError as error:
            raise self._error("update a record", error) from None
        return count == 1

    def delete(self, storage_key: str) -> ConversationRecord | None:
        table = self._table
        key_is = table.c.storage_key == storage_key

        def delete_current(connection: Connection) -> RowMapping | None:
            for _ in range(_DELETE_ATTEMPTS):
                query = select(table).where(key_is).with_for_update()
                row = connection.execute(query).mappings().first()
                if row is None:
                    return None
                removal = delete(table).where(key_is, table.c.version == row["version"])
                if connection.execute(removal).rowcount == 1:
                    return row
            raise StoreConflictError(
                f"conversation record {storage_key[:12]}… kept changing while deleting it"
            )

        try:
            row = self._transaction("delete a record", delete_current)
        except IntegrityError as error:
            raise self._error("delete a record", error) from None
        return None if row is None else self._to_record(row)

    def list_records(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ConversationRecord]:
        return [self._to_record(row) for row in self._extras.list_rows(after, limit)]

    def delete_version(self, storage_key: str, version: int) -> bool:
        return self._extras.delete_version(storage_key, version)

    def get_lease(self, lease_key: str) -> ConversationLease | None:
        return self._extras.get(lease_key)

    def acquire_lease(
        self, lease_key: str, owner: str, ttl_seconds: float
    ) -> ConversationLease | None:
        return self._extras.acquire(lease_key, owner, ttl_seconds)

    def renew_lease(self, lease: ConversationLease, ttl_seconds: float) -> ConversationLease | None:
        return self._extras.renew(lease, ttl_seconds)

    def release_lease(self, lease: ConversationLease) -> bool:
        return self._extras.release(lease)

    def close(self) -> None:
        """Close the pooled connections (idempotent); later calls raise an error."""
        if not self._closed:
            self._closed = True
            self._engine.dispose()

    # -- internals ---------------------------------------------------------------------------

    def _create_engine(self, options: dict[str, Any], statement_timeout: float) -> Engine:
        backend = self._url.get_backend_name()
        try:
            engine = create_engine(self._url, **options)
        except ImportError as error:
            raise ConversationStoreError(
                f"the database driver for {self.url} is not installed ({type(error).__name__}); "
                f"install it with: pip install 'skillruntime-core[{_EXTRAS[backend]}]'"
            ) from None
        except (ArgumentError, TypeError) as error:
            raise ConversationStoreError(
                f"cannot configure the conversation store for {self.url}: {self._scrub(str(error))}"
            ) from None
        if backend != "sqlite":
            self._add_deadline_events(engine, backend)
        if backend == "sqlite":
            busy_ms = max(1, int(statement_timeout * 1000))

            @event.listens_for(engine, "connect")
            def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                try:
                    cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
                    _enable_wal(cursor, statement_timeout)
                finally:
                    cursor.close()

        return engine

    def _add_deadline_events(self, engine: Engine, backend: str) -> None:
        """Hook the pool so that every connection's socket is known and checked at checkout."""

        @event.listens_for(engine, "connect")
        def _remember_socket(dbapi_connection: Any, record: Any) -> None:
            record.info[_FRESH] = True
            fileno = getattr(dbapi_connection, "fileno", None)
            if callable(fileno):  # psycopg; PyMySQL's socket is recorded by _connect_mysql
                record.info[_SOCKET] = fileno()

        @event.listens_for(engine, "checkout")
        def _checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
            self._watch_connection(dbapi_connection, record)

        if backend in ("mysql", "mariadb"):
            connect_seconds = self._connect_seconds

            @event.listens_for(engine, "do_connect")
            def _connect_mysql(
                dialect: Dialect, record: Any, cargs: Any, cparams: dict[str, Any]
            ) -> Any:
                return _connect_mysql_bounded(dialect, record, cargs, cparams, connect_seconds)

    def _check_open(self) -> None:
        if self._closed:
            raise ConversationStoreError(f"the conversation store on {self.url} is closed")

    def _transaction(self, action: str, work: Callable[[Connection], _T]) -> _T:
        """Run ``work`` in one transaction, retrying deadlocks and serialisation failures.

        Integrity errors propagate unchanged (callers decide what they mean); every other
        database error becomes :class:`ConversationStoreError`.
        """
        self._check_open()
        with self._bounded():
            return self._attempts(action, work)

    def _attempts(self, action: str, work: Callable[[Connection], _T]) -> _T:
        for attempt in range(_TRANSIENT_ATTEMPTS):
            connection = self._connect()
            failure: SQLAlchemyError
            try:
                with connection, connection.begin():
                    return work(connection)
            except IntegrityError:
                raise
            except SQLAlchemyError as error:
                failure = error
            if attempt + 1 < _TRANSIENT_ATTEMPTS and self._retryable(failure):
                logger.debug("conversation store %s: retrying after %s", self.url, action)
                continue
            raise self._error(action, failure) from None
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.contextmanager
    def _bounded(self) -> Iterator[CallDeadline | None]:
        """The deadline of the current call (a nested call joins the outer one's)."""
        current: CallDeadline | None = getattr(self._local, "deadline", None)
        if current is not None or self._call_timeout is None:
            yield current
            return
        deadline = start_deadline(self._call_timeout)
        self._local.deadline = deadline
        try:
            yield deadline
        finally:
            self._local.deadline = None
            deadline.finish()

    def _late(self) -> bool:
        """Whether the current call's deadline has passed."""
        deadline: CallDeadline | None = getattr(self._local, "deadline", None)
        return deadline is not None and deadline.expired

    def _retryable(self, failure: SQLAlchemyError) -> bool:
        return _is_transient(failure) and not self._late()

    def _connect(self) -> Connection:
        if self._late():
            raise self._timeout_error()
        try:
            return self._engine.connect()
        except SQLAlchemyError as error:
            if self._late():
                raise self._timeout_error() from None
            raise ConversationStoreError(
                f"cannot connect to the conversation store {self.url}: {self._detail(error)}"
            ) from None

    def _timeout_error(self) -> ConversationStoreError:
        return ConversationStoreError(
            f"the conversation store {self.url} did not answer within the call's deadline of "
            f"{self._call_timeout:g}s (connect_timeout + statement_timeout); the network or the "
            "database is not answering"
        )

    def _watch_connection(self, dbapi_connection: Any, record: Any) -> None:
        """Pool checkout: put the connection's socket under the call's deadline, then ping a
        connection that is not brand new (a failed ping makes the pool open a fresh one)."""
        deadline: CallDeadline | None = getattr(self._local, "deadline", None)
        descriptor = record.info.get(_SOCKET)
        if deadline is not None and descriptor is not None:
            deadline.watch(descriptor)
        if record.info.pop(_FRESH, False):
            return
        try:
            self._engine.dialect.do_ping(dbapi_connection)
        except Exception as error:
            if deadline is not None and deadline.expired:
                raise PoolTimeoutError("the pooled connection did not answer its ping") from error
            raise DisconnectionError("the pooled connection did not answer its ping") from error

    def _table_surely_exists(self, table: Table | None = None) -> bool:
        """Whether the table is known to exist (``False`` also when that cannot be looked up)."""
        try:
            return self._table_exists(table)
        except SQLAlchemyError:
            return False

    def _table_exists(self, table: Table | None = None) -> bool:
        with self._engine.connect() as connection:
            return inspect(connection).has_table((self._table if table is None else table).name)

    def _error(self, action: str, error: SQLAlchemyError) -> ConversationStoreError:
        """A :class:`ConversationStoreError` for a failed ``action`` (password hidden)."""
        if self._late():
            return self._timeout_error()
        lost = isinstance(error, DBAPIError) and error.connection_invalidated
        table = self._lease_table if "lease" in action else self._table
        try:
            missing = not lost and not self._table_exists(table)
        except SQLAlchemyError:
            missing = False  # unreachable now: report the original failure
        if missing:
            return ConversationStoreError(
                f"the conversation store {self.url} has no table {table.name!r}; call "
                "create_schema() once (or open the store with create_schema=True)"
            )
        if not lost and table is self._table and self._lacks_details(error):
            return ConversationStoreError(
                f"the table {table.name!r} of the conversation store {self.url} lacks the column "
                "'details' (added in this version); call create_schema() once to add it"
            )
        return ConversationStoreError(
            f"the conversation store {self.url} could not {action}: {self._detail(error)}"
        )

    def _detail(self, error: SQLAlchemyError) -> str:
        original = error.orig if isinstance(error, DBAPIError) else error
        text = str(original).strip().splitlines()
        first = text[0] if text else type(original).__name__
        detail = f"{type(original).__name__}: {first}"
        return self._scrub(detail)[:_MAX_DETAIL]

    def _scrub(self, text: str) -> str:
        password = self._password
        if password:
            text = text.replace(password, "***")
        return text

    def _to_record(self, row: RowMapping) -> ConversationRecord:
        key = str(row["storage_key"])
        try:
            skills = json.loads(row["prepared_skills"])
            return ConversationRecord(
                storage_key=key,
                service_key=row["service_key"],
                conversation_id=row["conversation_id"],
                runtime=row["runtime"],
                workspace_root=row["workspace_root"],
                sandbox_id=row["sandbox_id"],
                workspace_ready=bool(row["workspace_ready"]),
                prepared_skills=skills,
                version=row["version"],
                updated_at=row["updated_at"],
                **_details_fields(row["details"]),
            )
        except (ValueError, TypeError, ValidationError) as error:
            raise ConversationStoreError(
                f"the record {key[:12]}… in table {self._table.name!r} of {self.url} is not a "
                f"valid conversation record ({type(error).__name__}); delete or repair the row"
            ) from None


def _to_row(record: ConversationRecord) -> dict[str, Any]:
    return {
        "storage_key": record.storage_key,
        "service_key": record.service_key,
        "conversation_id": record.conversation_id,
        "runtime": record.runtime,
        "workspace_root": record.workspace_root,
        "sandbox_id": record.sandbox_id,
        "workspace_ready": record.workspace_ready,
        "prepared_skills": json.dumps(
            dict(record.prepared_skills), sort_keys=True, ensure_ascii=False, separators=(",", ":")
        ),
        "version": record.version,
        "updated_at": record.updated_at,
        "details": _details_text(record),
    }


def _details_text(record: ConversationRecord) -> str | None:
    """The ``details`` column of ``record``: ``NULL`` while its fields are at their defaults."""
    fields: dict[str, Any] = {}
    if record.snapshot_id is not None:
        fields["snapshot_id"] = record.snapshot_id
    if record.restore_pending:
        fields["restore_pending"] = True
    if record.sandbox_storage is not None:
        fields["sandbox_storage"] = record.sandbox_storage
    return json.dumps(fields, sort_keys=True, separators=(",", ":")) if fields else None


_DETAILS_KEYS = frozenset({"snapshot_id", "restore_pending", "sandbox_storage"})


def _details_fields(text: str | None) -> dict[str, Any]:
    """The record fields stored in a ``details`` column (a JSON object of known keys)."""
    if text is None:
        return {}
    fields = json.loads(text)
    if not isinstance(fields, dict) or set(fields) - _DETAILS_KEYS:
        raise ValueError("unknown fields in details")
    return fields


def _parse_url(url: str | URL) -> URL:
    """The URL with a default driver filled in; refuses what the store cannot serve."""
    if isinstance(url, URL):
        parsed = url
    else:
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError):
            scheme = url.partition("://")[0] if "://" in url else "(none)"
            raise ConversationStoreError(
                f"not a valid database URL (scheme {scheme!r}); expected e.g. "
                "sqlite:///conversations.db or postgresql+psycopg://user@host/db"
            ) from None
    if parsed.drivername in _DEFAULT_DRIVERS:
        parsed = parsed.set(drivername=_DEFAULT_DRIVERS[parsed.drivername])
    backend = parsed.get_backend_name()
    driver = parsed.get_driver_name()
    shown = parsed.render_as_string(hide_password=True)
    if backend not in _EXTRAS:
        raise ConversationStoreError(
            f"the SQL conversation store serves sqlite, postgresql, mysql and mariadb URLs, "
            f"not {shown}"
        )
    supported = {
        "sqlite": ("pysqlite",),
        "postgresql": _POSTGRES_LIBPQ_DRIVERS,
        "mysql": _MYSQL_DRIVERS,
        "mariadb": _MYSQL_DRIVERS,
    }[backend]
    if driver not in supported:
        raise ConversationStoreError(
            f"the driver {driver!r} is not supported for {backend} conversation stores "
            f"(use one of: {', '.join(supported)}); URL: {shown}"
        )
    if backend == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or parsed.query.get("mode") == "memory":
            raise ConversationStoreError(
                "an in-memory SQLite database is private to one connection; use memory:// for "
                "a one-process store or a file (sqlite:///conversations.db)"
            )
        directory = os.path.dirname(os.path.abspath(database))
        if not database.startswith("file:") and not os.path.isdir(directory):
            raise ConversationStoreError(
                f"the directory of the SQLite database does not exist: {directory}"
            )
    return parsed


def _effective_connect_timeout(url: URL, connect_timeout: float) -> float:
    """The connect timeout as the driver applies it (libpq: whole seconds, at least 2)."""
    backend = url.get_backend_name()
    raw = url.query.get("connect_timeout")
    if isinstance(raw, str):
        with contextlib.suppress(ValueError):
            connect_timeout = float(raw)
    if backend == "postgresql":
        return float(max(2, math.ceil(connect_timeout)))
    if backend in ("mysql", "mariadb"):
        return float(max(1, math.ceil(connect_timeout)))
    return connect_timeout


def _connect_mysql_bounded(
    dialect: Dialect, record: Any, cargs: Any, cparams: dict[str, Any], seconds: float
) -> Any:
    """Open a PyMySQL connection whose whole handshake is bounded by ``seconds``.

    PyMySQL applies its connect timeout to the TCP connect only and reads the server's greeting
    with the read timeout; here the socket is opened by the store and the handshake runs under
    a deadline of ``seconds``, so a server that accepts and never answers fails in time. Unix
    sockets and explicit bind addresses keep PyMySQL's own connect.
    """
    if "unix_socket" in cparams or "bind_address" in cparams:
        record.info.pop(_SOCKET, None)
        return None
    dbapi = dialect.loaded_dbapi
    host = str(cparams.get("host") or "localhost")
    port = int(cparams.get("port") or 3306)
    connection = dbapi.connect(*cargs, **{**cparams, "defer_connect": True})
    deadline = start_deadline(seconds)
    try:
        try:
            sock = socket.create_connection((host, port), timeout=seconds)
        except OSError as error:
            raise dbapi.OperationalError(
                2003, f"Can't connect to MySQL server on {host!r} ({error})"
            ) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        deadline.watch(sock.fileno())
        try:
            connection.connect(sock)
        except BaseException:
            sock.close()
            raise
    finally:
        deadline.finish()
    record.info[_SOCKET] = sock.fileno()
    return connection


def _connect_args(url: URL, connect_timeout: float, statement_timeout: float) -> dict[str, Any]:
    """Driver arguments bounding connection setup and statement/lock waits."""
    backend = url.get_backend_name()
    query = url.query
    if backend == "sqlite":
        # sqlite3's timeout is its busy timeout; pooled connections move between threads.
        return {"timeout": statement_timeout, "check_same_thread": False}
    if backend == "postgresql":
        args: dict[str, Any] = {}
        if "connect_timeout" not in query:
            # libpq takes whole seconds and treats anything below 2 as 2.
            args["connect_timeout"] = max(2, math.ceil(connect_timeout))
        if "options" not in query:
            args["options"] = f"-c statement_timeout={max(1, int(statement_timeout * 1000))}"
        return args
    args = {}
    if "connect_timeout" not in query:
        args["connect_timeout"] = max(1, math.ceil(connect_timeout))
    if "read_timeout" not in query:
        args["read_timeout"] = max(1, math.ceil(statement_timeout)) + 5
    if "write_timeout" not in query:
        args["write_timeout"] = max(1, math.ceil(statement_timeout)) + 5
    if "charset" not in query:
        args["charset"] = "utf8mb4"
    if "init_command" not in query:
        lock_wait = max(1, math.ceil(statement_timeout))
        args["init_command"] = f"SET SESSION innodb_lock_wait_timeout = {lock_wait}"
    return args


def _enable_wal(cursor: Any, budget_seconds: float) -> None:
    """Switch a SQLite file to WAL, waiting up to ``budget_seconds`` for other connections.

    Changing the journal mode needs a moment of exclusive access and SQLite answers "database is
    locked" at once instead of calling its busy handler, so connections opening one new file
    together would fail; the switch is retried with backoff instead. A file already in WAL mode
    is left as it is.
    """
    deadline = time.monotonic() + budget_seconds
    pause = 0.001
    while True:
        try:
            row = cursor.execute("PRAGMA journal_mode").fetchone()
            if row is not None and str(row[0]).lower() == "wal":
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            text = str(error).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() >= deadline:
                raise
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.05)


def _is_transient(error: SQLAlchemyError) -> bool:
    """Deadlocks and serialisation failures, which a fresh transaction may get past."""
    if not isinstance(error, DBAPIError) or error.orig is None:
        return False
    original = error.orig
    state = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    if state in ("40001", "40P01"):
        return True
    args: tuple[Any, ...] = tuple(getattr(original, "args", ()))
    return len(args) > 0 and args[0] == 1213  # MySQL/MariaDB: deadlock found
