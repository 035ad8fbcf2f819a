"""Leases, listing and conditional deletes of :class:`~skillruntime.core.sql.SqlConversationStore`.

Leases live in a second table next to the records, named ``<records table>_leases`` (one row
per lease key; see :func:`lease_table`). ``create_schema`` creates it with ``IF NOT EXISTS``
semantics, so a database created before leases existed gets it by running ``create_schema`` (or
``skillruntime conversations create-schema``) once more; nothing else changes.

Every statement is compare-and-set: a lease is taken over with
``UPDATE … WHERE lease_key = :k AND (owner IS NULL OR expires_at <= :now)``, renewed and released
with ``… WHERE owner = :owner AND token = :token``; a first lease is a plain ``INSERT`` whose
duplicate-key error means another node inserted first. PostgreSQL re-checks the ``WHERE`` of a
blocked ``UPDATE`` after the lock wait and InnoDB updates read the current row, so under
``READ COMMITTED`` and ``REPEATABLE READ`` alike exactly one of several racing takeovers wins.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    CHAR,
    Column,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError
from sqlalchemy.types import TypeEngine

from .lease_rules import check_lease_arguments, lease_expiry
from .spi import ConversationLease

__all__ = ["LEASE_TABLE_SUFFIX", "SqlLeases", "lease_table"]

LEASE_TABLE_SUFFIX = "_leases"

Transaction = Callable[[str, Callable[[Connection], Any]], Any]
_INSERT_ATTEMPTS = 3


def lease_table(records_table: str, metadata: MetaData, timestamp: TypeEngine[datetime]) -> Table:
    """The lease table of ``records_table``: ``lease_key`` (primary key), ``owner`` (``NULL``
    once released), ``token`` (fencing counter) and ``expires_at`` (UTC)."""
    return Table(
        records_table + LEASE_TABLE_SUFFIX,
        metadata,
        Column("lease_key", CHAR(64), primary_key=True),
        Column("owner", String(256), nullable=True),
        Column("token", Integer(), nullable=False),
        Column("expires_at", timestamp, nullable=False),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
        mariadb_engine="InnoDB",
        mariadb_charset="utf8mb4",
    )


def _lease(row: RowMapping) -> ConversationLease:
    return ConversationLease(
        lease_key=str(row["lease_key"]).strip(),
        owner=row["owner"],
        token=int(row["token"]),
        expires_at=row["expires_at"],
    )


def _executor(statement: Any) -> Callable[[Connection], Any]:
    return lambda connection: connection.execute(statement)


class SqlLeases:
    """The lease, listing and conditional-delete statements of one store.

    ``transaction(action, work)`` runs ``work`` in one transaction with the store's retries and
    deadline (integrity errors propagate unchanged, other failures become
    :class:`~skillruntime.core.conversations.ConversationStoreError`).
    """

    def __init__(self, records: Table, leases: Table, transaction: Transaction) -> None:
        self._records = records
        self._leases = leases
        self._transaction = transaction

    # -- records -----------------------------------------------------------------------------

    def list_rows(self, after: str | None, limit: int) -> list[RowMapping]:
        """Up to ``limit`` record rows with a storage key above ``after``, by key."""
        table = self._records
        query = select(table).order_by(table.c.storage_key).limit(max(0, limit))
        if after is not None:
            query = query.where(table.c.storage_key > after)
        rows: list[RowMapping] = self._transaction(
            "list records", lambda c: list(c.execute(query).mappings())
        )
        return rows

    def delete_version(self, storage_key: str, version: int) -> bool:
        """Delete the record if it is still at ``version``."""
        table = self._records
        statement = delete(table).where(
            table.c.storage_key == storage_key, table.c.version == version
        )
        count: int = self._transaction("delete a record", lambda c: c.execute(statement).rowcount)
        return count == 1

    # -- leases ------------------------------------------------------------------------------

    def get(self, lease_key: str) -> ConversationLease | None:
        table = self._leases
        query = select(table).where(table.c.lease_key == lease_key)
        row = self._transaction("read a lease", lambda c: c.execute(query).mappings().first())
        return None if row is None else _lease(row)

    def acquire(self, lease_key: str, owner: str, ttl_seconds: float) -> ConversationLease | None:
        check_lease_arguments(lease_key, owner, ttl_seconds)
        table = self._leases
        key_is = table.c.lease_key == lease_key

        def take(connection: Connection) -> RowMapping | bool | None:
            now = datetime.now(UTC)
            expires = lease_expiry(ttl_seconds, now)
            own = (
                update(table)
                .where(key_is, table.c.owner == owner, table.c.expires_at > now)
                .values(expires_at=expires)
            )
            if connection.execute(own).rowcount != 1:
                takeover = (
                    update(table)
                    .where(key_is, or_(table.c.owner.is_(None), table.c.expires_at <= now))
                    .values(owner=owner, token=table.c.token + 1, expires_at=expires)
                )
                if connection.execute(takeover).rowcount != 1:
                    exists = connection.execute(select(table.c.token).where(key_is)).first()
                    return exists is None  # True: no row yet, insert one
            return connection.execute(select(table).where(key_is)).mappings().first()

        for _ in range(_INSERT_ATTEMPTS):
            taken = self._transaction("take a lease", take)
            if taken is False:
                return None
            if taken is not True:
                assert taken is not None
                return _lease(taken)
            first = insert(table).values(
                lease_key=lease_key, owner=owner, token=1, expires_at=lease_expiry(ttl_seconds)
            )
            try:
                self._transaction("take a lease", _executor(first))
            except IntegrityError:
                continue  # another node inserted first: look again
            return ConversationLease(
                lease_key=lease_key, owner=owner, token=1, expires_at=lease_expiry(ttl_seconds)
            )
        return None

    def renew(self, lease: ConversationLease, ttl_seconds: float) -> ConversationLease | None:
        if lease.owner is None:
            return None
        check_lease_arguments(lease.lease_key, lease.owner, ttl_seconds)
        table = self._leases
        expires = lease_expiry(ttl_seconds)
        statement = (
            update(table)
            .where(
                table.c.lease_key == lease.lease_key,
                table.c.owner == lease.owner,
                table.c.token == lease.token,
            )
            .values(expires_at=expires)
        )
        count: int = self._transaction("renew a lease", lambda c: c.execute(statement).rowcount)
        if count != 1:
            return None
        return lease.model_copy(update={"expires_at": expires})

    def release(self, lease: ConversationLease) -> bool:
        if lease.owner is None:
            return False
        table = self._leases
        statement = (
            update(table)
            .where(
                table.c.lease_key == lease.lease_key,
                table.c.owner == lease.owner,
                table.c.token == lease.token,
            )
            .values(owner=None)
        )
        count: int = self._transaction("release a lease", lambda c: c.execute(statement).rowcount)
        return count == 1
