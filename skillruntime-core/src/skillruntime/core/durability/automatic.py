"""Automatic workspace durability: snapshots taken by the runtime, restores when a sandbox is new.

A runtime handed a :class:`Durability` keeps one :class:`DurableWorkspace` (sync faces) or
:class:`AsyncDurableWorkspace` (async faces) per runtime object and calls it at three points:

* :meth:`DurableWorkspace.attached` each time it takes a sandbox handle (created, attached or
  replaced): the next operation checks the workspace once;
* :meth:`DurableWorkspace.before` at the start of every operation (``prepare``, ``execute``, a
  file call), before the operation touches the sandbox. When a check is due it runs first,
  **before the operation**: when the conversation record says ``restore_pending`` for the
  sandbox it names (the runtime created or replaced that sandbox), the node takes the
  conversation's *restore lease*, reads the record again, and — when the workspace holds
  nothing but excluded entries (``skills/``) — restores the record's ``snapshot_id`` (or the
  store's latest snapshot of the conversation when the record has none: a record swept away and
  made again), then clears ``restore_pending`` with a compare-and-set. Nodes attaching meanwhile
  wait for the lease and find the flag cleared: one restore, never two interleaved. A workspace
  that is not empty (a Docker volume survived its container) is kept as it is. A restore that
  cannot finish raises :class:`~skillruntime.core.errors.WorkspaceRestoreError` from the
  operation, leaves ``restore_pending`` set and the record's ``snapshot_id`` unchanged, and the
  next operation tries again. When a periodic snapshot is due
  (``snapshot_every_seconds`` since the last one, and the conversation was used since), it is
  taken here too, capturing the operations before this one;
* :meth:`DurableWorkspace.closing` when the runtime closes: a conversation used since its last
  snapshot is snapshotted (``snapshot_on_close``). A failure there is logged, never raised (the
  runtime still closes; the previous snapshot stays the last good one).

A runtime that keeps no record of its sandbox (``binding`` ``None``: the local and AIO
runtimes, whose workspace is a directory of the host or of the service) checks once per runtime
object, on its first operation: when the snapshot store holds a snapshot of the conversation
and the workspace is empty, the latest snapshot is restored. With a conversation store
(``lease``: the store and the record key of the runtime's guard) the check runs under the same
restore lease, so two runtime objects restore once; without one, nothing coordinates two runtime
objects of one conversation that start at the same moment.

Every snapshot stores its id in the record (``snapshot_id``) and applies ``keep_last``. The
calls made for a restore or a snapshot go through the runtime's own public SPI; a context
variable tells the runtime's nested calls apart so they do not check again. See
docs/durability.md, "Automatic snapshots and restores".

This module is the public face of automatic durability: :class:`Durability` and what both faces
share live in :mod:`.base`, :class:`AsyncDurableWorkspace` in :mod:`.async_durable` and
:class:`DurableWorkspace` in :mod:`.durable` (generated from it by ``scripts/generate_sync.py``);
all are importable from here.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from ..conversations.spi import ConversationRecord
from ..conversations.sweeps import record_copy_store
from ..models import SkillExecutionRequest
from ..runtime.spi import SkillRuntime
from ..snapshots.spi import SnapshotStore
from .async_durable import AsyncDurableWorkspace
from .base import Durability, logger, restore_lease_key
from .durable import DurableWorkspace
from .workspace import WorkspaceSnapshots

__all__ = [
    "AsyncDurableWorkspace",
    "Durability",
    "DurableWorkspace",
    "restore_lease_key",
    "snapshot_before_sweep",
]


def snapshot_before_sweep(
    durability: Durability,
    open_runtime: Callable[[ConversationRecord, Durability], SkillRuntime],
) -> Callable[[ConversationRecord], None]:
    """A ``before_destroy`` step for
    :func:`~skillruntime.core.conversations.sweeps.sweep_conversations` that snapshots an idle
    conversation's workspace before the sweep destroys it (docs/durability.md, "Before a
    sweep").

    ``open_runtime(record, durability)`` builds a runtime on the record's conversation (the
    same runtime settings the application uses) handed the ``durability`` it is given: a copy
    of this one without the snapshot at close or on a timer. Its first operation makes the
    usual check, so a sandbox that went away meanwhile is replaced and restored before the
    snapshot (which then stores nothing new; the replacement changed the record, so the sweep
    keeps the conversation until its next run). A snapshot that fails raises: the sweep keeps
    the conversation. The runtime must not write the record while it snapshots (a record
    changed meanwhile counts as a conversation in use): open a local or AIO runtime without a
    conversation store (they need none to reach the workspace); a Docker or OpenSandbox runtime
    writes nothing in so short a use unless it replaces the sandbox.
    """
    quiet = dataclasses.replace(durability, snapshot_on_close=False, snapshot_every_seconds=None)
    snapshots = WorkspaceSnapshots(durability.store, exclude=durability.exclude)

    def before_destroy(record: ConversationRecord) -> None:
        runtime = open_runtime(record, quiet)
        with contextlib.closing(runtime):
            runtime.execute(SkillExecutionRequest(command="true", timeout_seconds=60))
            result = snapshots.snapshot(
                runtime, conversation_id=record.conversation_id, keep_last=durability.keep_last
            )
        logger.info(
            "conversation %s snapshotted before the sweep (%s, changed: %s)",
            record.conversation_id,
            result.snapshot_id[:12],
            result.changed,
        )

    return before_destroy


QUIET_SECONDS = 10 * 365 * 86400.0
"""An interval no snapshot of a swept conversation outlasts (orphan grace, activity writes)."""


def snapshot_swept_record(
    record: ConversationRecord,
    store: SnapshotStore,
    open_runtime: Callable[[dict[str, Any]], SkillRuntime],
) -> None:
    """Snapshot a swept container conversation's workspace into ``store`` (the step a reaper's
    ``snapshot_workspace`` takes for ``skillruntime conversations sweep --snapshot-store``;
    docs/cli.md).

    ``open_runtime(arguments)`` builds the platform's runtime from its own settings updated
    with ``arguments``: the record's conversation id and root, a copy of the record as the
    conversation store (:func:`~skillruntime.core.conversations.sweeps.record_copy_store`: the
    record the sweep holds is never written), the durability, and none of what a runtime does
    on its own within a snapshot's time (no lease, no pool, no orphan kills, no activity
    writes). The snapshot is :func:`snapshot_before_sweep`'s."""
    copy = record_copy_store(record)

    def opened(_: ConversationRecord, durability: Durability) -> SkillRuntime:
        return open_runtime(
            {
                "conversation_id": record.conversation_id,
                "conversations_root": record.workspace_root,
                "conversation_store": copy,
                "durability": durability,
                "exclusive": False,
                "pool_size": 0,
                "orphan_grace_seconds": QUIET_SECONDS,
                "activity_interval_seconds": QUIET_SECONDS,
            }
        )

    snapshot_before_sweep(Durability(store), opened)(record)
