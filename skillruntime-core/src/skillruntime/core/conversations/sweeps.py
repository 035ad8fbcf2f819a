"""Expiry sweeps: destroy the sandboxes and workspaces of conversations idle past a limit.

:func:`sweep_conversations` walks every record of a conversation store. A conversation counts as
idle when it has not been used for the limit. Runtimes refresh a record's ``updated_at`` while the
conversation is used, but at most once per activity interval (``activity_interval_seconds``, see
:mod:`skillruntime.core.conversations.exclusive`), so a conversation used a moment ago may carry an
``updated_at`` up to one interval older; and between exclusive sessions no lease shows that it is
in use. The sweep therefore counts a record as idle only when its ``updated_at`` is older than the
limit **plus** the runtimes' activity interval: a limit shorter than the interval can no longer
destroy a conversation in use. For each idle conversation the sweep

1. takes the conversation's lease without waiting (a conversation whose lease is held is in use
   and kept);
2. re-reads the record and deletes it with a compare-and-set on the version it judged idle
   (:meth:`~skillruntime.core.conversations.ConversationStore.delete_version`): a conversation
   touched at any moment of the sweep has a new version and is kept, never destroyed;
3. only then asks the runtime's :class:`ConversationReaper` to destroy what the record named
   (kill the sandbox, remove the workspace directory) and releases the lease.

A reaper may also list *orphans*: sandboxes a runtime created and tagged but that no record
names (a process died between creating and recording it, or a destroy failed halfway). They are
reported, and destroyed when asked (``orphans="destroy"``).

Reapers come from the ``skillruntime_conversation_reapers`` plugin hook
(:func:`available_reapers`), each from the distribution of its runtime (the ``local`` one is
:class:`skillruntime.local.reaper.LocalWorkspaceReaper`); ``skillruntime conversations sweep`` is
the command-line face.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from .._moved import moved_names
from ..errors import ConversationStoreError
from .guard_rules import DEFAULT_ACTIVITY_INTERVAL_SECONDS
from .lease_rules import default_lease_owner
from .memory import InMemoryConversationStore
from .spi import ConversationRecord, ConversationStore

if TYPE_CHECKING:
    from ..snapshots.spi import SnapshotStore

__all__ = [
    "ConversationReaper",
    "OrphanSandbox",
    "SnapshottingReaper",
    "SweepOutcome",
    "SweepReport",
    "available_reapers",
    "close_reapers",
    "parse_duration",
    "record_copy_store",
    "sweep_conversations",
]

logger = logging.getLogger(__name__)

OrphanMode = Literal["ignore", "report", "destroy"]

_MAX_SECONDS = 100 * 365 * 86400.0
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d``, ``2w`` or combinations like ``1h30m``
    (positive, at most 100 years); anything else raises :class:`ValueError`."""
    value = text.strip().lower()
    if not value:
        raise ValueError("a duration must not be empty")
    if not value.isascii():
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 15m, 12h, 7d)")
    if value.isdigit():
        value += "s"
    total = 0.0
    number = ""
    for char in value:
        if char.isdigit() or char == ".":
            number += char
            continue
        if char not in _UNITS or not number:
            raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 15m, 12h, 7d)")
        try:
            total += float(number) * _UNITS[char]
        except ValueError:
            raise ValueError(f"not a duration: {text!r}") from None
        number = ""
    if number:
        raise ValueError(f"not a duration: {text!r} (a number needs a unit: s, m, h, d, w)")
    if not 0 < total <= _MAX_SECONDS:
        raise ValueError("a duration must be positive and at most 100 years")
    return timedelta(seconds=total)


@dataclass(frozen=True)
class OrphanSandbox:
    """A sandbox a runtime created that no record names."""

    runtime: str
    sandbox_id: str
    conversation_id: str | None
    created_at: datetime | None


@runtime_checkable
class ConversationReaper(Protocol):
    """Destroys what one runtime keeps for a conversation (a plugin contribution)."""

    @property
    def runtime(self) -> str:
        """The runtime name found in the records this reaper handles (``local``…)."""

    def destroy(self, record: ConversationRecord) -> None:
        """Destroy the sandbox or workspace ``record`` named (already deleted from the store).

        Something already gone counts as destroyed; other failures raise.
        """

    def orphans(self, records: Sequence[ConversationRecord]) -> list[OrphanSandbox]:
        """Resources of this runtime that none of ``records`` (every record of the store) names."""

    def destroy_orphan(self, orphan: OrphanSandbox) -> None:
        """Destroy one orphan returned by :meth:`orphans`."""


@runtime_checkable
class SnapshottingReaper(ConversationReaper, Protocol):
    """A reaper that can also snapshot a record's workspace, opening a runtime on the
    conversation from what the record holds and the environment the reaper is configured from;
    ``skillruntime conversations sweep --snapshot-store`` needs it to snapshot a conversation
    before destroying it (docs/durability.md, "Before a sweep"). The ``local``, ``docker`` and
    ``opensandbox`` reapers have it; a remote one opens its runtime on
    :func:`record_copy_store` and never on a sandbox that is gone.
    """

    def snapshot_workspace(self, record: ConversationRecord, store: SnapshotStore) -> None:
        """Snapshot ``record``'s workspace into ``store`` as
        :func:`~skillruntime.core.durability.automatic.snapshot_before_sweep` does (the sweep
        holds the conversation's lease; the runtime must not write the record). A failure
        raises, and the sweep keeps the conversation."""


class _RecordCopyStore(InMemoryConversationStore):
    """See :func:`record_copy_store`."""

    def __init__(self, record: ConversationRecord) -> None:
        super().__init__()
        self._original = record
        self._records[record.storage_key] = record

    def _refuse(self, what: str) -> ConversationStoreError:
        return ConversationStoreError(
            f"the sweep's snapshot of conversation {self._original.conversation_id} does not "
            f"{what}; its sandbox is gone or changed, so the conversation is kept"
        )

    def create(self, record: ConversationRecord) -> bool:
        raise self._refuse("record a new sandbox")

    def update(self, record: ConversationRecord) -> bool:
        if (record.sandbox_id, record.sandbox_storage) != (
            self._original.sandbox_id,
            self._original.sandbox_storage,
        ):
            raise self._refuse("replace the recorded sandbox")
        return super().update(record)

    def delete(self, storage_key: str) -> ConversationRecord | None:
        raise self._refuse("delete the record")

    def delete_version(self, storage_key: str, version: int) -> bool:
        raise self._refuse("delete the record")


def record_copy_store(record: ConversationRecord) -> ConversationStore:
    """An in-memory store holding a copy of ``record`` alone, for the runtime a
    :class:`SnapshottingReaper` opens on a remote conversation (docs/durability.md, "Before a
    sweep").

    The runtime reads the record from it and attaches to the sandbox the record names; what it
    writes (its activity, a cleared ``restore_pending``) stays in the copy, so the record the
    sweep holds is never changed. Writing another sandbox into the record, or creating or
    deleting the record, raises :class:`~skillruntime.core.errors.ConversationStoreError`: a
    runtime that found the recorded sandbox gone discards the candidate it made in its place
    (the sandbox lifecycle kills a candidate whose record write failed) and the snapshot fails,
    so nothing is left behind and the sweep keeps the conversation.
    """
    return _RecordCopyStore(record)


@dataclass(frozen=True)
class SweepOutcome:
    """What the sweep did with one conversation: ``kept``, ``destroyed`` or ``failed``."""

    conversation_id: str
    runtime: str
    action: Literal["kept", "destroyed", "failed"]
    reason: str
    sandbox_id: str | None = None


@dataclass
class SweepReport:
    """Counts and per-conversation outcomes of one sweep (``dry_run``: nothing was changed and
    ``destroyed`` counts what would have been)."""

    dry_run: bool
    idle: timedelta
    activity_interval: timedelta = timedelta(seconds=DEFAULT_ACTIVITY_INTERVAL_SECONDS)
    found: int = 0
    kept: int = 0
    destroyed: int = 0
    failed: int = 0
    orphans_found: int = 0
    orphans_destroyed: int = 0
    orphan_errors: int = 0
    outcomes: list[SweepOutcome] = field(default_factory=list)
    orphans: list[OrphanSandbox] = field(default_factory=list)

    def add(self, outcome: SweepOutcome) -> None:
        """Count ``outcome`` (kept, destroyed or failed) and keep it."""
        self.outcomes.append(outcome)
        if outcome.action == "kept":
            self.kept += 1
        elif outcome.action == "destroyed":
            self.destroyed += 1
        else:
            self.failed += 1

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "dry_run": self.dry_run,
            "idle_seconds": self.idle.total_seconds(),
            "activity_interval_seconds": self.activity_interval.total_seconds(),
            "found": self.found,
            "kept": self.kept,
            "destroyed": self.destroyed,
            "failed": self.failed,
            "orphans_found": self.orphans_found,
            "orphans_destroyed": self.orphans_destroyed,
            "orphan_errors": self.orphan_errors,
            "conversations": [outcome.__dict__ for outcome in self.outcomes],
            "orphans": [
                {
                    "runtime": orphan.runtime,
                    "sandbox_id": orphan.sandbox_id,
                    "conversation_id": orphan.conversation_id,
                    "created_at": orphan.created_at.isoformat() if orphan.created_at else None,
                }
                for orphan in self.orphans
            ],
        }


def _all_records(store: ConversationStore, page: int) -> list[ConversationRecord]:
    records: list[ConversationRecord] = []
    after: str | None = None
    while True:
        batch = store.list_records(after=after, limit=page)
        records.extend(batch)
        if len(batch) < page:
            return records
        after = batch[-1].storage_key


def sweep_conversations(
    store: ConversationStore,
    idle: timedelta | float,
    reapers: Iterable[ConversationReaper] | None = None,
    *,
    dry_run: bool = False,
    orphans: OrphanMode = "report",
    lease_ttl_seconds: float = 300.0,
    page_size: int = 200,
    now: datetime | None = None,
    activity_interval_seconds: float = DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    before_destroy: Callable[[ConversationRecord], None] | None = None,
) -> SweepReport:
    """Destroy conversations idle for longer than ``idle`` (see the module docs).

    ``activity_interval_seconds`` is the longest ``activity_interval_seconds`` of the runtimes
    that use the store (their default unless configured otherwise); a record is idle when its
    ``updated_at`` is older than ``idle`` plus this interval, so a conversation used within
    ``idle`` is kept whatever the two values. ``reapers`` default to the installed ones
    (:func:`available_reapers`); a record of a runtime without a reaper is kept.
    ``lease_ttl_seconds`` bounds how long a sweeper that dies holds a conversation's lease.
    ``before_destroy`` runs on an idle record while the sweep holds its lease, before the
    record is deleted (e.g. :func:`skillruntime.core.durability.snapshot_before_sweep`: a
    workspace snapshot); when it raises, the conversation is kept and counted as failed.
    Returns the :class:`SweepReport`; failures to destroy one conversation are counted and
    logged, store failures raise.
    """
    limit = idle if isinstance(idle, timedelta) else timedelta(seconds=idle)
    if limit <= timedelta(0):
        raise ValueError("the idle limit must be positive")
    if not activity_interval_seconds > 0:
        raise ValueError("the activity interval must be positive")
    interval = timedelta(seconds=activity_interval_seconds)
    if orphans not in ("ignore", "report", "destroy"):
        raise ValueError("orphans must be 'ignore', 'report' or 'destroy'")
    built = list(available_reapers().values()) if reapers is None else []
    chosen = {reaper.runtime: reaper for reaper in (built if reapers is None else reapers)}
    try:
        return _sweep(
            store,
            limit,
            interval,
            chosen,
            dry_run,
            orphans,
            lease_ttl_seconds,
            page_size,
            now,
            before_destroy,
        )
    finally:
        close_reapers(built)


def close_reapers(reapers: Iterable[ConversationReaper]) -> None:
    """Close the reapers that hold resources (those with a ``close`` method)."""
    for reaper in reapers:
        close = getattr(reaper, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                logger.warning("closing the %s reaper failed", reaper.runtime, exc_info=True)


def _sweep(  # noqa: PLR0917
    store: ConversationStore,
    limit: timedelta,
    interval: timedelta,
    chosen: Mapping[str, ConversationReaper],
    dry_run: bool,
    orphans: OrphanMode,
    lease_ttl_seconds: float,
    page_size: int,
    now: datetime | None,
    before_destroy: Callable[[ConversationRecord], None] | None = None,
) -> SweepReport:
    moment = now or datetime.now(UTC)
    owner = default_lease_owner() + ":sweep"
    report = SweepReport(dry_run=dry_run, idle=limit, activity_interval=interval)
    records = _all_records(store, page_size)
    for record in records:
        report.found += 1
        report.add(
            _sweep_one(
                store,
                record,
                chosen,
                cutoff=moment - limit - interval,
                owner=owner,
                dry_run=dry_run,
                lease_ttl_seconds=lease_ttl_seconds,
                before_destroy=before_destroy,
            )
        )
    if orphans != "ignore":
        remaining = records if dry_run else _all_records(store, page_size)
        for reaper in chosen.values():
            try:
                found = reaper.orphans(remaining)
            except Exception:
                logger.warning("listing orphans of %s failed", reaper.runtime, exc_info=True)
                report.orphan_errors += 1
                continue
            for orphan in found:
                report.orphans_found += 1
                report.orphans.append(orphan)
                if orphans == "destroy" and not dry_run:
                    try:
                        reaper.destroy_orphan(orphan)
                    except Exception:
                        logger.warning(
                            "destroying orphan sandbox %s failed", orphan.sandbox_id, exc_info=True
                        )
                        continue
                    report.orphans_destroyed += 1
    logger.info(
        "sweep (idle > %s, activity interval %s%s): "
        "found %d, kept %d, destroyed %d, failed %d, orphans %d",
        limit,
        interval,
        ", dry run" if dry_run else "",
        report.found,
        report.kept,
        report.destroyed,
        report.failed,
        report.orphans_found,
    )
    return report


def _sweep_one(
    store: ConversationStore,
    record: ConversationRecord,
    reapers: Mapping[str, ConversationReaper],
    *,
    cutoff: datetime,
    owner: str,
    dry_run: bool,
    lease_ttl_seconds: float,
    before_destroy: Callable[[ConversationRecord], None] | None = None,
) -> SweepOutcome:
    def outcome(action: Literal["kept", "destroyed", "failed"], reason: str) -> SweepOutcome:
        return SweepOutcome(
            record.conversation_id, record.runtime, action, reason, record.sandbox_id
        )

    if record.updated_at > cutoff:
        return outcome("kept", "active")
    reaper = reapers.get(record.runtime)
    if reaper is None:
        return outcome("kept", f"no reaper for runtime {record.runtime!r}")
    key = record.storage_key
    current = store.get_lease(key)
    if current is not None and not current.expired():
        return outcome("kept", "leased")
    if dry_run:
        return outcome("destroyed", "idle (dry run)")
    lease = store.acquire_lease(key, owner, lease_ttl_seconds)
    if lease is None:
        return outcome("kept", "leased")
    try:
        if before_destroy is not None:
            try:
                before_destroy(record)
            except Exception as error:
                logger.warning(
                    "the step before destroying conversation %s (%s) failed; it is kept",
                    record.conversation_id,
                    record.runtime,
                    exc_info=True,
                )
                return outcome("failed", f"before destroy failed: {type(error).__name__}")
        if not store.delete_version(key, record.version):
            return outcome("kept", "touched during the sweep")
        try:
            reaper.destroy(record)
        except Exception as error:
            logger.warning(
                "destroying conversation %s (%s) failed",
                record.conversation_id,
                record.runtime,
                exc_info=True,
            )
            return outcome("failed", f"destroy failed: {type(error).__name__}")
        return outcome("destroyed", "idle")
    finally:
        try:
            store.release_lease(lease)
        except Exception:
            logger.warning("releasing the sweep's lease failed", exc_info=True)


def available_reapers(runtimes: Iterable[str] | None = None) -> dict[str, ConversationReaper]:
    """The installed reapers by runtime name (``skillruntime_conversation_reapers`` hook),
    only those of ``runtimes`` when given (an unknown name raises :class:`ValueError`)."""
    from ..plugins.registry import available_conversation_reapers

    providers = available_conversation_reapers()
    names = list(providers) if runtimes is None else list(runtimes)
    unknown = sorted(name for name in names if name not in providers)
    if unknown:
        raise ValueError(
            f"no reaper for runtime(s) {', '.join(unknown)}; installed: "
            f"{', '.join(providers) or 'none'}"
        )
    return {name: providers[name].factory() for name in names}


__getattr__ = moved_names(__name__, {"LocalWorkspaceReaper": "skillruntime.local.reaper"})
