"""``skillruntime viking``: pull, inspect and cache OpenViking remote skills from the shell.

Commands (added to the ``skillruntime`` command by the viking plugin through
:func:`register`)::

    skillruntime viking pull URI [--dest DIR]   # verified local copy; progress bar on stderr
    skillruntime viking show URI [--json]       # revision, files, sizes (no download)
    skillruntime viking ls [SCOPE] [--json]     # skills listed by the server
    skillruntime viking cache ls [--json]       # cache entries on this host
    skillruntime viking cache prune [--all]     # evict idle entries (or every unleased one)
    skillruntime viking session show ID [--json]    # a session's details and messages
    skillruntime viking session commit ID [--json]  # archive its messages, extract memories

Connection options go on the ``viking`` group (``--server-url``, ``--account``, ``--user``,
``--agent``, ``--cache-dir``), each also read from the store's environment variables. The API key
is never an option value: it comes from the environment or, with ``--ask-api-key``, from a hidden
prompt, and it is never printed. Store and session errors are printed as
``Error: [CODE] message`` with exit status 1.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from skillruntime.core.cli.errors import CliUsageError, as_cli_error

if TYPE_CHECKING:
    from .sessions import VikingSessionClient
    from .store import VikingSkillStore

__all__ = ["register", "viking_group"]


@dataclass
class _Settings:
    """What the group options collected; turned into a store by :func:`_open_store`."""

    server_url: str | None
    account: str | None
    user: str | None
    agent: str | None
    cache_dir: Path | None
    api_key: str | None

    def store_kwargs(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "server_url": self.server_url,
            "account": self.account,
            "user": self.user,
            "agent": self.agent,
            "cache_dir": self.cache_dir,
            "api_key": self.api_key,
        }
        return {key: value for key, value in values.items() if value is not None}


@contextmanager
def _open_store(ctx: click.Context) -> Iterator[VikingSkillStore]:
    """Build the store from the group's settings; translate its errors for the command line."""
    from pydantic import ValidationError

    from skillruntime.core.cli.errors import validation_message

    from .errors import VikingStoreError
    from .store import VikingSkillStore

    settings = ctx.find_object(_Settings)
    if settings is None:  # only when a command is invoked outside the ``viking`` group
        raise CliUsageError("the viking commands must run under the viking group")
    try:
        store = VikingSkillStore(**settings.store_kwargs())
    except ValidationError as error:
        raise CliUsageError(f"invalid viking store options: {validation_message(error)}") from None
    except VikingStoreError as error:
        raise as_cli_error(error) from None
    except (TypeError, ValueError) as error:
        raise CliUsageError(f"invalid viking store options: {error}") from None
    try:
        yield store
    except VikingStoreError as error:
        raise as_cli_error(error) from None
    finally:
        store.close()


class _Progress:
    """A ``progress(done, total)`` callback drawing a click progress bar on stderr.

    The bar appears when a download starts (a first call with ``done < total``); a cache hit,
    reported as one ``(total, total)`` call, draws nothing.
    """

    def __init__(self, label: str) -> None:
        self._label = label
        self._bar: Any = None
        self._done = 0

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if done >= total:
                return
            self._bar = click.progressbar(
                length=max(total, 1),
                label=self._label,
                file=sys.stderr,
                show_pos=True,
            )
            self._bar.__enter__()
        step = max(done - self._done, 0)
        self._done = max(done, self._done)
        if step:
            self._bar.update(step)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def _size(value: int | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{value} B"  # pragma: no cover - the loop always returns


def _timestamp(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, tz=UTC).isoformat(timespec="seconds")
    return str(value)


@click.group("viking")
@click.option(
    "--server-url",
    envvar="SKILLRUNTIME_VIKING_SERVER_URL",
    default=None,
    help="OpenViking server URL. [env SKILLRUNTIME_VIKING_SERVER_URL]",
)
@click.option(
    "--account",
    envvar="SKILLRUNTIME_VIKING_ACCOUNT",
    default=None,
    help="Account (dev or trusted auth). [env SKILLRUNTIME_VIKING_ACCOUNT]",
)
@click.option(
    "--user",
    envvar="SKILLRUNTIME_VIKING_USER",
    default=None,
    help="User (dev or trusted auth). [env SKILLRUNTIME_VIKING_USER]",
)
@click.option(
    "--agent",
    envvar="SKILLRUNTIME_VIKING_AGENT",
    default=None,
    help="Agent identity. [env SKILLRUNTIME_VIKING_AGENT]",
)
@click.option(
    "--cache-dir",
    envvar="SKILLRUNTIME_VIKING_CACHE_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Host cache directory. [env SKILLRUNTIME_VIKING_CACHE_DIR]",
)
@click.option(
    "--ask-api-key",
    is_flag=True,
    help="Prompt for the API key (hidden input) instead of reading SKILLRUNTIME_VIKING_API_KEY.",
)
@click.pass_context
def viking_group(  # noqa: PLR0917 - click passes options positionally
    ctx: click.Context,
    server_url: str | None,
    account: str | None,
    user: str | None,
    agent: str | None,
    cache_dir: Path | None,
    ask_api_key: bool,
) -> None:
    """Pull, inspect and cache OpenViking remote skills (verified local copies).

    URIs look like viking://user/<user>/skills/<name> or viking://agent/skills/<name>. The API
    key is read from the environment (never from an option) or prompted for with --ask-api-key.
    """
    api_key = None
    if ask_api_key:
        api_key = click.prompt("OpenViking API key", hide_input=True, err=True) or None
    ctx.obj = _Settings(server_url, account, user, agent, cache_dir, api_key)


_uri = click.argument("uri")
_as_json = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@viking_group.command("pull")
@_uri
@click.option(
    "--dest",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=(
        "Copy the verified skill to this new directory (default: print its directory in the "
        "host cache; required when the cache cannot be written)."
    ),
)
@click.pass_context
def pull_command(ctx: click.Context, uri: str, dest: Path | None) -> None:
    """Download (or reuse from the cache) the skill at URI, verify it and print its directory.

    Without ``--dest`` the printed directory is the cache entry, which outlives the command.
    When the cache cannot be written the store only has a private copy that is deleted when the
    command ends, so the command fails (exit status 2) and asks for ``--dest`` instead of
    printing a directory that no longer exists.
    """
    if dest is not None and dest.exists():
        raise CliUsageError(f"destination already exists: {dest}")
    progress = _Progress(f"Downloading {uri}")
    with _open_store(ctx) as store:
        cache_dir = store.options.resolved_cache_dir()
        if dest is None and not store.cache_available:
            raise _needs_dest(cache_dir)
        try:
            with store.lease(uri, progress=progress) as leased:
                progress.finish()
                if dest is None:
                    if not Path(leased).is_relative_to(cache_dir):
                        raise _needs_dest(cache_dir)
                    directory = Path(leased)
                else:
                    _copy_tree(Path(leased), dest)
                    directory = dest
        finally:
            progress.finish()
    click.echo(str(directory))


def _needs_dest(cache_dir: Path) -> CliUsageError:
    return CliUsageError(
        f"the skill cache {cache_dir} cannot be written, so no copy would outlive this "
        "command; pass --dest DIR to keep one"
    )


def _copy_tree(source: Path, dest: Path) -> None:
    """Copy ``source`` to the new directory ``dest`` through a staging directory beside it."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".viking-pull-", dir=dest.parent))
    try:
        copied = staging / "skill"
        shutil.copytree(source, copied, symlinks=True)
        for path in [copied, *copied.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        copied.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@viking_group.command("show")
@_uri
@_as_json
@click.pass_context
def show_command(ctx: click.Context, uri: str, as_json: bool) -> None:
    """Resolve the skill at URI and print its revision and files (nothing is downloaded)."""
    with _open_store(ctx) as store:
        manifest = store.resolve(uri)
    files = sorted(manifest.files, key=lambda f: f.path)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "uri": manifest.uri,
                    "root_uri": manifest.root_uri,
                    "name": manifest.name,
                    "description": manifest.description,
                    "revision": manifest.revision,
                    "signature": manifest.signature,
                    "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in files],
                },
                indent=2,
            )
        )
        return
    total = sum(f.size or 0 for f in files)
    click.echo(f"name:      {manifest.name}")
    click.echo(f"uri:       {manifest.root_uri}")
    click.echo(f"revision:  {manifest.revision}")
    if manifest.description:
        click.echo(f"about:     {' '.join(manifest.description.split())}")
    click.echo(f"files:     {len(files)} ({_size(total)})")
    width = max((len(_size(f.size)) for f in files), default=1)
    for file in files:
        click.echo(f"  {_size(file.size):>{width}}  {file.sha256[:12]}  {file.path}")


@viking_group.command("ls")
@click.argument("scope", required=False)
@_as_json
@click.pass_context
def ls_command(ctx: click.Context, scope: str | None, as_json: bool) -> None:
    """List the skills the server has in SCOPE (default: the caller's skills and the agent's)."""
    with _open_store(ctx) as store:
        summaries = store.list_skills(scope) if scope else store.list_skills()
    rows = [{"name": s.name, "uri": s.uri, "description": s.description} for s in summaries]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("No skills found")
        return
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        click.echo(f"{row['name']:<{width}}  {row['uri']}")


@viking_group.group("cache")
def cache_group() -> None:
    """Inspect and prune the host cache of verified skill copies."""


@cache_group.command("ls")
@_as_json
@click.pass_context
def cache_ls_command(ctx: click.Context, as_json: bool) -> None:
    """List the cache entries: root URI, revision, size, last use, lease state."""
    with _open_store(ctx) as store:
        entries = store.cache_entries()
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "key": e.key,
                        "root_uri": e.root_uri,
                        "revision": e.revision,
                        "path": str(e.path),
                        "size": e.size,
                        "last_used": _timestamp(e.last_used),
                        "leased": e.leased,
                    }
                    for e in entries
                ],
                indent=2,
            )
        )
        return
    if not entries:
        click.echo("The cache is empty")
        return
    for entry in entries:
        state = "  leased" if entry.leased else ""
        click.echo(
            f"{entry.root_uri}  {entry.revision[:12]}  {_size(entry.size)}  "
            f"{_timestamp(entry.last_used)}{state}"
        )


@cache_group.command("prune")
@click.option("--all", "everything", is_flag=True, help="Remove every entry not in use.")
@click.pass_context
def cache_prune_command(ctx: click.Context, everything: bool) -> None:
    """Evict expired entries and enforce the capacity limits (or, with --all, empty the cache
    except for entries in use); print how many entries were removed."""
    with _open_store(ctx) as store:
        removed = store.prune(everything=everything)
    click.echo(f"removed {removed} cache entr{'y' if removed == 1 else 'ies'}")


@contextmanager
def _open_sessions(ctx: click.Context) -> Iterator[VikingSessionClient]:
    """The session client of the group's settings; its errors as ``Error: [CODE] message``."""
    from pydantic import ValidationError

    from skillruntime.core.cli.errors import CliError, validation_message

    from .options import VikingStoreOptions
    from .sessions import VikingSessionClient, VikingSessionError

    settings = ctx.find_object(_Settings)
    if settings is None:  # only when a command is invoked outside the ``viking`` group
        raise CliUsageError("the viking commands must run under the viking group")
    try:
        client = VikingSessionClient(VikingStoreOptions(**settings.store_kwargs()))
    except ValidationError as error:
        raise CliUsageError(f"invalid viking store options: {validation_message(error)}") from None
    except (TypeError, ValueError) as error:
        raise CliUsageError(f"invalid viking store options: {error}") from None
    try:
        yield client
    except VikingSessionError as error:
        detail = str(error).removeprefix(f"{error.code}: ")
        raise CliError(f"[{error.code}] {detail}") from None


def _session_id(value: str) -> str:
    if not value or len(value) > 256:
        raise CliUsageError("a session id is 1 to 256 characters")
    return value


def _part_line(part: dict[str, Any]) -> str:
    kind = part.get("type")
    if kind == "tool":
        skill = f" {part['skill_uri']}" if part.get("skill_uri") else ""
        return f"    tool {part.get('tool_name')} [{part.get('tool_status')}]{skill}"
    if kind == "text":
        text = " ".join(str(part.get("text") or "").split())
        return f"    text {text[:117] + '...' if len(text) > 120 else text}"
    return f"    {kind}"


@viking_group.group("session")
def session_group() -> None:
    """Inspect and commit the OpenViking sessions agent turns are stored in."""


@session_group.command("show")
@click.argument("session_id", metavar="ID")
@_as_json
@click.pass_context
def session_show_command(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Print the session ID's details and the messages of its context (the live ones and those
    of archives still being extracted): role, turn id, and each part (a tool part's tool, status
    and skill URI; a text part's start). Exit status 1 with [SESSION_NOT_FOUND] when it does not
    exist."""
    session_id = _session_id(session_id)
    with _open_sessions(ctx) as client:
        details = client.get_session(session_id)
        messages = client.messages(session_id)
    if as_json:
        click.echo(json.dumps({"session": details, "messages": messages}, indent=2))
        return
    click.echo(f"session:   {details.get('session_id', session_id)}")
    for key in ("message_count", "pending_tokens", "commit_count", "created_at", "updated_at"):
        if key in details:
            click.echo(f"{key + ':':<10} {details[key]}")
    click.echo(f"messages:  {len(messages)}")
    for message in messages:
        turn = f"  turn {message['turn_id']}" if message.get("turn_id") else ""
        click.echo(f"  {message.get('role')}{turn}")
        parts = message.get("parts")
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict):
                click.echo(_part_line(part))


@session_group.command("commit")
@click.argument("session_id", metavar="ID")
@_as_json
@click.pass_context
def session_commit_command(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Commit the session ID: the server archives its messages and starts extracting memories
    in the background; print the archive and the extraction's task id (poll it at
    GET /api/v1/tasks/<task_id>). Not retried after an uncertain failure (a second commit could
    archive twice)."""
    from .session_sink import commit_session

    session_id = _session_id(session_id)
    with _open_sessions(ctx) as client:
        client.get_session(session_id)  # a missing session is SESSION_NOT_FOUND, not created
        answer = commit_session(client, session_id)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    click.echo(f"session:   {answer.get('session_id', session_id)}")
    click.echo(f"status:    {answer.get('status')}")
    if answer.get("archived"):
        click.echo(f"archive:   {answer.get('archive_uri')}")
    if answer.get("task_id"):
        click.echo(f"task:      {answer['task_id']}")
    if answer.get("reason"):
        click.echo(f"reason:    {answer['reason']}")


def register(group: click.Group) -> None:
    """Add the ``viking`` command group to ``group`` (the ``skillruntime_cli`` hook calls this)."""
    group.add_command(viking_group, "viking")
