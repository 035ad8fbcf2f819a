"""Throwaway databases on the local PostgreSQL and MariaDB servers.

``temporary_database("postgresql")`` creates a uniquely named database (connecting to the
``test`` database as ``postgres``), yields its SQLAlchemy URL and drops it afterwards, closing
any connection still open to it; ``temporary_database("mariadb")`` does the same as ``root``.
Suites import it as ``from sql_databases import temporary_database``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

__all__ = ["DatabaseKind", "server_url", "temporary_database"]

DatabaseKind = Literal["postgresql", "mariadb"]

_SERVERS: dict[str, str] = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/{database}",
    "mariadb": "mariadb+pymysql://root@127.0.0.1:3306/{database}",
}
_ADMIN_DATABASE = {"postgresql": "test", "mariadb": ""}
_CONNECT_ARGS = {"connect_timeout": 5}


def server_url(kind: DatabaseKind, database: str) -> str:
    """The SQLAlchemy URL of ``database`` on the local ``kind`` server."""
    return _SERVERS[kind].format(database=database)


def _admin_engine(kind: DatabaseKind) -> Engine:
    return create_engine(
        server_url(kind, _ADMIN_DATABASE[kind]),
        isolation_level="AUTOCOMMIT",
        connect_args=_CONNECT_ARGS,
        pool_pre_ping=True,
    )


@contextmanager
def temporary_database(kind: DatabaseKind) -> Iterator[str]:
    """Create a fresh database on the local ``kind`` server, yield its URL, drop it afterwards."""
    name = f"srt_{uuid.uuid4().hex[:20]}"
    engine = _admin_engine(kind)
    try:
        with engine.connect() as connection:
            if kind == "postgresql":
                connection.execute(text(f'CREATE DATABASE "{name}"'))
            else:
                connection.execute(
                    text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
                )
        try:
            yield server_url(kind, name)
        finally:
            with engine.connect() as connection:
                if kind == "postgresql":
                    connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                else:
                    connection.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
    finally:
        engine.dispose()
