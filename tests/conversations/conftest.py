"""Fixtures for the conversation store suites.

Each run creates its own PostgreSQL and MariaDB databases (dropped at the end) and every test
gets its own table in them; SQLite stores live in the test's temporary directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conversations.conversation_backends import Backend, SqlBackend, sqlite_url
from sql_databases import temporary_database

STORE_KINDS = ["memory", "sqlite", "postgresql", "mariadb"]
SQL_KINDS = ["sqlite", "postgresql", "mariadb"]


@pytest.fixture(scope="session")
def postgresql_url() -> Iterator[str]:
    with temporary_database("postgresql") as url:
        yield url


@pytest.fixture(scope="session")
def mariadb_url() -> Iterator[str]:
    with temporary_database("mariadb") as url:
        yield url


def _database_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "sqlite":
        return sqlite_url(tmp_path)
    return str(request.getfixturevalue(f"{kind}_url"))


@pytest.fixture(params=STORE_KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Every kind of store, each test on fresh records."""
    kind = request.param
    chosen = (
        Backend() if kind == "memory" else SqlBackend(kind, _database_url(kind, request, tmp_path))
    )
    try:
        yield chosen
    finally:
        chosen.close()


@pytest.fixture(params=SQL_KINDS)
def sql_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlBackend]:
    """Every SQL database, each test on its own table."""
    kind = request.param
    chosen = SqlBackend(kind, _database_url(kind, request, tmp_path))
    try:
        yield chosen
    finally:
        chosen.close()


@pytest.fixture(params=SQL_KINDS)
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a database of every SQL kind, with no table created in it."""
    return _database_url(request.param, request, tmp_path)
