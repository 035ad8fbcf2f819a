"""What both faces of automatic durability share: the options (:class:`Durability`), the restore
lease's key, and the state and checks of a durable workspace that make no runtime call
(:class:`DurableBase`).

The faces, :class:`~.async_durable.AsyncDurableWorkspace` and :class:`~.durable.DurableWorkspace`
(generated from it by ``scripts/generate_sync.py``), add the calls into a runtime; :mod:`.automatic`
documents the contract and re-exports them. See docs/durability.md.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..conversations.binding import ConversationBinding
from ..conversations.spi import ConversationStore
from ..errors import SkillRuntimeError, WorkspaceRestoreError
from ..models import SkillExecutionRequest, SkillExecutionResult
from ..snapshots.spi import SnapshotStore
from .common import DEFAULT_EXCLUDE, RestoreResult, SnapshotResult

__all__ = ["ACTIVE", "Durability", "DurableBase", "logger", "names_request", "restore_lease_key"]

logger = logging.getLogger("skillruntime.core.durability.automatic")
"""The logger of automatic durability, both faces (named after :mod:`.automatic`, the module
that documents it)."""

ACTIVE: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "skillruntime_durability_active", default=None
)
"""The durable workspace whose snapshot or restore the current call is part of."""


def restore_lease_key(storage_key: str) -> str:
    """The lease key under which one node at a time checks and restores a conversation's
    workspace (distinct from the conversation's own lease, which commands may hold)."""
    return hashlib.sha256(f"restore\n{storage_key}".encode()).hexdigest()


@dataclass(frozen=True)
class Durability:
    """What a runtime does to keep a conversation's workspace (docs/durability.md).

    ``store`` holds the snapshots. ``snapshot_on_close``: a conversation used since its last
    snapshot is snapshotted when the runtime closes. ``snapshot_every_seconds``: while the
    conversation is used, a snapshot at most this often (``None``: never on a timer).
    ``keep_last``: snapshots kept per conversation after each automatic one (``None``: all).
    ``restore_on_replace``: restore the last snapshot into a new sandbox's empty workspace.
    ``restore_wait_seconds`` bounds the wait for another node's restore;
    ``restore_lease_ttl_seconds`` is the TTL of the restore lease (renewed while restoring).
    ``exclude`` names the workspace's top-level entries that are the runtime's.
    """

    store: SnapshotStore
    snapshot_on_close: bool = True
    snapshot_every_seconds: float | None = None
    keep_last: int | None = 10
    restore_on_replace: bool = True
    restore_wait_seconds: float = 300.0
    restore_lease_ttl_seconds: float = 30.0
    exclude: Sequence[str] = field(default=DEFAULT_EXCLUDE)

    def __post_init__(self) -> None:
        if self.snapshot_every_seconds is not None and self.snapshot_every_seconds <= 0:
            raise ValueError("snapshot_every_seconds must be positive (or None)")
        if self.keep_last is not None and self.keep_last < 1:
            raise ValueError("keep_last must be at least 1 (or None)")
        if self.restore_wait_seconds <= 0 or self.restore_lease_ttl_seconds <= 0:
            raise ValueError("restore_wait_seconds and restore_lease_ttl_seconds must be positive")


def names_request() -> SkillExecutionRequest:
    """``ls -A`` of the workspace: one name per line (the check needs no more than that)."""
    return SkillExecutionRequest(command="ls -A", timeout_seconds=60, max_output_bytes=65536)


class DurableBase:
    """The state shared by both faces (no I/O but the blocking store calls that the faces make
    directly, or in worker threads on the async face)."""

    def __init__(
        self,
        durability: Durability,
        *,
        conversation_id: str,
        binding: ConversationBinding | None,
        owner: str | None,
        lease: tuple[ConversationStore, str] | None = None,
    ) -> None:
        self.durability = durability
        self.conversation_id = conversation_id
        self.binding = binding
        self.owner = owner
        self.lease = lease if binding is None else (binding.store, binding.storage_key)
        self._sandbox_id: str | None = None
        self._check = False
        self._used = False
        self._last_snapshot = time.monotonic()
        self.restores: list[RestoreResult] = []
        """The restores this object made (the newest last; for tests and metrics)."""

    def attached(self, sandbox_id: str | None) -> None:
        """The runtime took a handle on ``sandbox_id`` (``None``: a runtime without sandbox
        records): the next operation checks the workspace (the record, when there is one)."""
        self._check = self.durability.restore_on_replace
        self._sandbox_id = sandbox_id

    def _due(self) -> bool:
        every = self.durability.snapshot_every_seconds
        return every is not None and self._used and time.monotonic() - self._last_snapshot >= every

    def _nested(self) -> bool:
        return ACTIVE.get() is self

    def _restore_target(self, record_snapshot: str | None) -> str | None:
        """The snapshot to restore: the record's, else the store's newest (its id from the
        listing: the restore reads and verifies the manifest itself)."""
        if record_snapshot is not None:
            return record_snapshot
        refs = self.durability.store.list_snapshots(self.conversation_id)
        return refs[-1].snapshot_id if refs else None

    def _needs_restore(self, listing: SkillExecutionResult) -> bool:
        """Whether the workspace ``listing`` (``ls -A``) shows is empty, so a restore is due;
        raises when the listing failed."""
        if listing.exit_code != 0 or listing.timed_out:
            raise WorkspaceRestoreError(
                f"the workspace of conversation {self.conversation_id} could not be listed "
                f"before restoring it (exit code {listing.exit_code})"
            )
        names = [name for name in listing.stdout.splitlines() if name]
        if all(name in self.durability.exclude for name in names):
            return True
        logger.info(
            "conversation %s: the new sandbox's workspace is not empty; kept as it is",
            self.conversation_id,
        )
        return False

    def _restore_failed(self, target: str, error: SkillRuntimeError) -> WorkspaceRestoreError:
        """A restore's other failure (the store's, the runtime's) as a typed error."""
        return WorkspaceRestoreError(
            f"restoring snapshot {target[:12]}… of conversation {self.conversation_id} "
            f"failed: {type(error).__name__}: {str(error)[:300]}"
        )

    def _restored(self, target: str, result: RestoreResult) -> str:
        logger.info(
            "conversation %s: workspace restored from snapshot %s… (%d files)",
            self.conversation_id,
            target[:12],
            result.files,
        )
        self.restores.append(result)
        return target

    def _delete_snapshots(self) -> int:
        """Delete every snapshot of the conversation (store calls; blocking)."""
        self._used = False
        store = self.durability.store
        refs = store.list_snapshots(self.conversation_id)
        for ref in refs:
            store.delete_snapshot(self.conversation_id, ref.snapshot_id)
        return len(refs)

    def _noted(self, result: SnapshotResult) -> None:
        self._last_snapshot = time.monotonic()
        self._used = False
        if self.binding is not None and result.changed:
            self.binding.snapshot_taken(result.snapshot_id)
