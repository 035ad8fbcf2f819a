"""``skillruntime conversations sweep``: destroy idle conversations, report orphan sandboxes.

Prints one summary line (``found N, kept N, destroyed N, failed N``), one line per orphan and,
with ``--verbose``, one line per conversation; ``--json`` prints the whole report instead.
Exit status 1 when a conversation or an orphan could not be destroyed, or orphans could not be
listed.

Without ``--runtime`` only the reapers of runtimes the store holds conversations of are built
and run: a reaper of an installed backend nobody uses (an OpenSandbox server that is not
configured) is never contacted. Naming a runtime with ``--runtime`` runs its reaper even when the
store has none of its conversations (to find its orphan sandboxes).

``--snapshot-store`` snapshots each idle conversation's workspace into a snapshot store before
the sweep destroys it, as :func:`~skillruntime.core.durability.automatic.snapshot_before_sweep`
does for an application (docs/durability.md, "Before a sweep"); a conversation whose snapshot
fails is kept and counted as failed. It needs the reaper of every swept runtime to snapshot a
record's workspace (:class:`~skillruntime.core.conversations.sweeps.SnapshottingReaper`: the
``local``, ``docker`` and ``opensandbox`` reapers, which open the runtime with the options its
commands read from the environment); with another runtime among them the command refuses to run.
"""

from __future__ import annotations

import json
from collections.abc import Container
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..snapshots.spi import SnapshotStore
    from .spi import ConversationRecord, ConversationStore
    from .sweeps import ConversationReaper

__all__ = ["sweep_command"]

_URL_ENV = "SKILLRUNTIME_CONVERSATION_STORE"


def _recorded_runtimes(store: ConversationStore, installed: Container[str]) -> list[str]:
    """The runtimes with an installed reaper that conversations in ``store`` ran in, sorted."""
    from .sweeps import _all_records

    return sorted(
        {record.runtime for record in _all_records(store, 200) if record.runtime in installed}
    )


def _open_snapshot_store(location: str) -> SnapshotStore:
    """The snapshot store at ``location``: an fsspec URL (``s3://bucket/prefix``,
    ``file:///srv/snapshots``) opens an object store, anything else is a local directory."""
    from ..snapshots import LocalSnapshotStore, ObjectSnapshotStore

    if "://" in location:
        return ObjectSnapshotStore(location)
    return LocalSnapshotStore(location)


def _snapshot_step(
    location: str, reapers: Sequence[ConversationReaper]
) -> Callable[[ConversationRecord], None]:
    """The ``before_destroy`` step snapshotting into the store at ``location``; a runtime whose
    reaper cannot snapshot a record's workspace is a usage error (nothing is swept)."""
    from ..errors import SnapshotError
    from .sweeps import SnapshottingReaper

    able = {r.runtime: r for r in reapers if isinstance(r, SnapshottingReaper)}
    unable = sorted(r.runtime for r in reapers if r.runtime not in able)
    if unable:
        raise click.BadParameter(
            f"the sweep cannot open a runtime on conversations of {', '.join(unable)} to "
            "snapshot them; sweep only runtimes that can (local, docker, opensandbox)",
            param_hint="--snapshot-store",
        )
    try:
        store = _open_snapshot_store(location)
    except (SnapshotError, OSError) as error:
        raise click.BadParameter(
            f"cannot open the snapshot store: {error}", param_hint="--snapshot-store"
        ) from None
    return lambda record: able[record.runtime].snapshot_workspace(record, store)


@click.command("sweep")
@click.option("--idle", "idle_text", required=True, help="Idle limit, e.g. 30m, 12h, 7d.")
@click.option(
    "--url",
    envvar=_URL_ENV,
    required=True,
    help=f"Store URL (default: ${_URL_ENV}; prefer the variable when it holds a password).",
)
@click.option("--table", "table_name", default=None, help="SQL table name (default: the store's).")
@click.option("--dry-run", is_flag=True, help="Report what would be destroyed; change nothing.")
@click.option(
    "--orphans",
    type=click.Choice(["ignore", "report", "destroy"]),
    default="report",
    show_default=True,
    help="Sandboxes a runtime tagged that no record names.",
)
@click.option(
    "--runtime",
    "runtimes",
    multiple=True,
    help="Sweep only conversations of this runtime and look for its orphans (repeatable; "
    "default: the runtimes the store has conversations of).",
)
@click.option(
    "--activity-interval",
    "activity_interval_text",
    default="60s",
    show_default=True,
    help=(
        "The runtimes' activity interval (activity_interval_seconds): records are refreshed at "
        "most this often while in use, so a conversation counts as idle only when its record is "
        "older than --idle plus this."
    ),
)
@click.option(
    "--snapshot-store",
    "snapshot_location",
    default=None,
    metavar="URL_OR_PATH",
    help=(
        "Snapshot each idle conversation's workspace into this snapshot store (a directory, or "
        "an fsspec URL such as s3://bucket/prefix) before destroying it; a conversation whose "
        "snapshot fails is kept. Needs runtimes the sweep can open (local, docker, "
        "opensandbox: their SKILLRUNTIME_<RUNTIME>_* options are read as by their commands)."
    ),
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--verbose", "-v", is_flag=True, help="One line per conversation.")
def sweep_command(  # noqa: PLR0917
    idle_text: str,
    url: str,
    table_name: str | None,
    dry_run: bool,
    orphans: str,
    runtimes: tuple[str, ...],
    activity_interval_text: str,
    snapshot_location: str | None,
    as_json: bool,
    verbose: bool,
) -> None:
    """Destroy the sandboxes and workspaces of conversations idle longer than --idle.

    Idleness is read from the store's activity timestamps, which runtimes refresh at most once
    per --activity-interval: a record counts as idle when older than --idle plus that interval.
    A conversation in use (leased) or touched while the sweep runs is kept. OpenSandbox servers
    are configured like the runtime (SKILLRUNTIME_OPENSANDBOX_DOMAIN / OPEN_SANDBOX_DOMAIN,
    ..._API_KEY).
    """
    from ..cli.errors import as_cli_error
    from ..plugins.registry import available_conversation_reapers
    from . import ConversationStoreError, open_conversation_store
    from .sweeps import available_reapers, close_reapers, parse_duration, sweep_conversations

    try:
        idle = parse_duration(idle_text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--idle") from None
    try:
        activity_interval = parse_duration(activity_interval_text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--activity-interval") from None
    options: dict[str, Any] = {}
    if table_name:
        options["table_name"] = table_name
    installed = available_conversation_reapers()
    unknown = sorted(set(runtimes) - set(installed))
    if unknown:
        raise click.BadParameter(
            f"no reaper for runtime(s) {', '.join(unknown)}; installed: "
            f"{', '.join(installed) or 'none'}",
            param_hint="--runtime",
        )
    reapers: list[ConversationReaper] = []
    try:
        with open_conversation_store(url, **options) as store:
            names = runtimes or _recorded_runtimes(store, installed)
            reapers = list(available_reapers(names).values())
            before_destroy = (
                None if snapshot_location is None else _snapshot_step(snapshot_location, reapers)
            )
            report = sweep_conversations(
                store,
                idle,
                reapers,
                dry_run=dry_run,
                orphans=orphans,  # type: ignore[arg-type]
                activity_interval_seconds=activity_interval.total_seconds(),
                before_destroy=before_destroy,
            )
    except (ConversationStoreError, ValueError) as error:
        raise as_cli_error(error) from None
    finally:
        close_reapers(reapers)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        suffix = " (dry run: nothing changed)" if dry_run else ""
        click.echo(
            f"found {report.found}, kept {report.kept}, destroyed {report.destroyed}, "
            f"failed {report.failed}{suffix}"
        )
        if verbose:
            for outcome in report.outcomes:
                click.echo(
                    f"  {outcome.action:9} {outcome.conversation_id} ({outcome.runtime}): "
                    f"{outcome.reason}"
                )
        if orphans != "ignore":
            click.echo(
                f"orphans: found {report.orphans_found}, destroyed {report.orphans_destroyed}"
                + (f", {report.orphan_errors} listing error(s)" if report.orphan_errors else "")
            )
            for orphan in report.orphans:
                click.echo(
                    f"  orphan {orphan.sandbox_id} ({orphan.runtime}, conversation "
                    f"{orphan.conversation_id or '?'})"
                )
    undone = report.failed + (
        report.orphans_found - report.orphans_destroyed
        if orphans == "destroy" and not dry_run
        else 0
    )
    if undone or report.orphan_errors:
        raise SystemExit(1)
