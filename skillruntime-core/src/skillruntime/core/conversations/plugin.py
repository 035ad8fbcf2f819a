"""The core plugin registering the built-in conversation stores (entry point
``builtin_conversation_stores``).

Schemes served:

* ``memory://`` — :class:`~skillruntime.core.conversations.InMemoryConversationStore`, one
  process only; takes no options.
* ``sqlite:///relative.db``, ``sqlite:////absolute.db`` — an embedded SQL store. The factory
  creates the table unless ``create_schema=False`` is passed: the file belongs to the nodes that
  open it, so there is no administrator to do it first.
* ``postgresql[+driver]://``, ``mysql[+driver]://``, ``mariadb[+driver]://`` — a shared SQL store
  for several nodes. The factory does **not** create the table unless ``create_schema=True`` is
  passed: on a server the schema is usually created once by a deployment step (see
  :meth:`~skillruntime.core.conversations.sql.SqlConversationStore.create_schema`).

The SQL stores need the ``sql`` extra (``postgresql``/``mysql`` extras add the drivers); this
module imports SQLAlchemy only when such a store is built, so ``memory://`` works without it.

The plugin also adds ``skillruntime conversations create-schema`` (create the table of a SQL
store, idempotent), ``skillruntime conversations ddl DIALECT`` (print its ``CREATE TABLE``) and
``skillruntime conversations sweep`` (see :mod:`skillruntime.core.conversations.sweep_cli`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..plugins.registry import ConversationStoreProvider, hookimpl

if TYPE_CHECKING:  # the stores (and pydantic) load when one is opened, not with the plugins
    from .memory import InMemoryConversationStore
    from .sql import SqlConversationStore

__all__ = [
    "SQL_SCHEMES",
    "conversations_group",
    "skillruntime_cli",
    "skillruntime_conversation_stores",
]

SQL_SCHEMES = ("sqlite", "postgresql", "mysql", "mariadb")
"""URL schemes (before any ``+driver``) served by the SQL store."""

_DISTRIBUTION = "skillruntime-core"

_EXTRA_FOR_SCHEME = {
    "sqlite": "sql",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}


def _memory_store(url: str, **options: Any) -> InMemoryConversationStore:
    if options:
        raise ValueError(
            f"the memory:// conversation store takes no options (got {', '.join(sorted(options))})"
        )
    from .memory import InMemoryConversationStore

    return InMemoryConversationStore()


def _base_scheme(url: str) -> str:
    """The URL scheme before any ``+driver``, lower-cased: ``postgresql+psycopg://`` gives
    ``postgresql``."""
    return url.partition("://")[0].partition("+")[0].lower()


def _sql_store(url: str, **options: Any) -> SqlConversationStore:
    scheme = _base_scheme(url)
    try:
        from .sql import SqlConversationStore
    except ImportError as error:
        from .spi import ConversationStoreError

        extra = _EXTRA_FOR_SCHEME.get(scheme, "sql")
        raise ConversationStoreError(
            f"the {scheme} conversation store needs SQLAlchemy; install it with: "
            f"pip install 'skillruntime-core[{extra}]'"
        ) from error
    options.setdefault("create_schema", scheme == "sqlite")
    return SqlConversationStore(url, **options)


@hookimpl
def skillruntime_conversation_stores() -> list[ConversationStoreProvider]:
    """The in-memory store for ``memory`` and the SQL store for the SQL schemes."""
    providers = [
        ConversationStoreProvider(
            scheme="memory",
            description="records in this process only (tests, single-process use)",
            factory=_memory_store,
            distribution=_DISTRIBUTION,
        )
    ]
    descriptions = {
        "sqlite": "SQLite file shared by the processes of one host (creates its table)",
        "postgresql": "PostgreSQL table shared by every node (create_schema() once)",
        "mysql": "MySQL table shared by every node (create_schema() once)",
        "mariadb": "MariaDB table shared by every node (create_schema() once)",
    }
    providers.extend(
        ConversationStoreProvider(
            scheme=scheme,
            description=descriptions[scheme],
            factory=_sql_store,
            distribution=_DISTRIBUTION,
        )
        for scheme in SQL_SCHEMES
    )
    return providers


_URL_ENV = "SKILLRUNTIME_CONVERSATION_STORE"


@click.group("conversations")
def conversations_group() -> None:
    """Manage the SQL table of the conversation store."""


@conversations_group.command("create-schema")
@click.option(
    "--url",
    envvar=_URL_ENV,
    required=True,
    help=f"Database URL (default: ${_URL_ENV}; prefer the variable when it holds a password).",
)
@click.option("--table", "table_name", default=None, help="Table name (default: the store's).")
def create_schema_command(url: str, table_name: str | None) -> None:
    """Create the conversation table if it is absent (safe to run on every deployment)."""
    from ..cli.errors import as_cli_error
    from .spi import ConversationStoreError

    scheme = _base_scheme(url)
    if scheme not in SQL_SCHEMES:
        raise click.BadParameter(
            f"expected a {', '.join(SQL_SCHEMES)} URL, got scheme {scheme!r}", param_hint="--url"
        )
    options: dict[str, Any] = {"create_schema": True}
    if table_name:
        options["table_name"] = table_name
    try:
        with _sql_store(url, **options) as store:
            click.echo(f"table {store.table_name} ready in {store.url}")
    except (ConversationStoreError, ValueError) as error:
        raise as_cli_error(error) from None


@conversations_group.command("ddl")
@click.argument("dialect", type=click.Choice(SQL_SCHEMES))
@click.option("--table", "table_name", default=None, help="Table name (default: the store's).")
def ddl_command(dialect: str, table_name: str | None) -> None:
    """Print the CREATE TABLE statement of the conversation table for DIALECT."""
    from ..cli.errors import CliError

    try:
        from .sql import DEFAULT_TABLE_NAME, schema_ddl
    except ImportError:
        raise CliError("install SQLAlchemy: pip install 'skillruntime-core[sql]'") from None
    click.echo(schema_ddl(dialect, table_name or DEFAULT_TABLE_NAME))


def _add_sweep() -> None:
    from .sweep_cli import sweep_command

    conversations_group.add_command(sweep_command)


_add_sweep()


@hookimpl
def skillruntime_cli(group: click.Group) -> None:
    """Add the ``conversations`` command group."""
    group.add_command(conversations_group, "conversations")
