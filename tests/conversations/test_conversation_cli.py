"""``skillruntime conversations``: create the SQL table and print its DDL."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from conversations.conversation_backends import new_record
from skillruntime.core.cli import build_cli
from skillruntime.core.conversations.sql import SqlConversationStore


def test_create_schema_reads_the_url_from_the_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    result = CliRunner().invoke(
        build_cli(),
        ["conversations", "create-schema", "--table", "cli_conversations"],
        env={"SKILLRUNTIME_CONVERSATION_STORE": url},
    )
    assert result.exit_code == 0, result.output
    assert "cli_conversations ready" in result.output
    with SqlConversationStore(url, table_name="cli_conversations") as store:
        assert store.schema_exists()
        assert store.create(new_record())


def test_create_schema_on_a_server_database(postgresql_url: str) -> None:
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(
            build_cli(), ["conversations", "create-schema", "--url", postgresql_url]
        )
        assert result.exit_code == 0, result.output
    with SqlConversationStore(postgresql_url) as store:
        assert store.schema_exists()


def test_create_schema_failure_is_one_line_without_the_password() -> None:
    url = "postgresql://app:Sup3r-secret@127.0.0.1:1/conversations"
    result = CliRunner().invoke(build_cli(), ["conversations", "create-schema", "--url", url])
    assert result.exit_code == 1
    assert "cannot connect" in result.output
    assert "Sup3r-secret" not in result.output


def test_create_schema_refuses_a_non_sql_url() -> None:
    result = CliRunner().invoke(
        build_cli(), ["conversations", "create-schema", "--url", "memory://"]
    )
    assert result.exit_code == 2
    assert "sqlite" in result.output


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql", "mariadb"])
def test_ddl_prints_the_create_table_statement(dialect: str) -> None:
    result = CliRunner().invoke(build_cli(), ["conversations", "ddl", dialect, "--table", "t1"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("CREATE TABLE t1 (")
    assert "PRIMARY KEY (storage_key)" in result.output
    assert all(line == line.rstrip() for line in result.output.splitlines())
