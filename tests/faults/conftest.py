"""Fixtures of the fault-injection suite: one OpenSandbox double and one PostgreSQL and MariaDB
database per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from doubles.opensandbox.fixtures import opensandbox_double_fixture
from sql_databases import temporary_database

opensandbox_double = opensandbox_double_fixture()


@pytest.fixture(scope="session")
def postgresql_url() -> Iterator[str]:
    with temporary_database("postgresql") as url:
        yield url


@pytest.fixture(scope="session")
def mariadb_url() -> Iterator[str]:
    with temporary_database("mariadb") as url:
        yield url
