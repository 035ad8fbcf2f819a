# Generated from async_durable.py by scripts/generate_sync.py: do not edit.
# Edit the async source, then run `python scripts/generate_sync.py`.
"""The sync face of automatic durability: :class:`DurableWorkspace`, what a sync runtime
handed a :class:`~.base.Durability` keeps and calls (the contract is in :mod:`.automatic`,
which re-exports it). Generated from :mod:`.async_durable`. See docs/durability.md.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager

from ..conversations.binding import ConversationBinding
from ..conversations.leases import LeaseKeeper
from ..conversations.spi import ConversationStore
from ..errors import SkillRuntimeError, WorkspaceRestoreError
from ..runtime.spi import SkillRuntime
from .base import ACTIVE, Durability, DurableBase, logger, names_request, restore_lease_key
from .common import SnapshotResult
from .workspace import WorkspaceSnapshots, _off_loop

__all__ = ["DurableWorkspace"]


class DurableWorkspace(DurableBase):
    """The automatic snapshots and restores of one sync runtime object (see the module docs).

    ``binding`` is the conversation record (``None`` for a runtime without a conversation
    store: the local runtime's workspace, checked when the runtime created it). ``owner`` is
    the lease owner id of the runtime. Thread-safe: operations of several threads wait for one
    check.
    """

    def __init__(
        self,
        durability: Durability,
        *,
        conversation_id: str,
        binding: ConversationBinding | None,
        owner: str | None = None,
        lease: tuple[ConversationStore, str] | None = None,
    ) -> None:
        super().__init__(
            durability, conversation_id=conversation_id, binding=binding, owner=owner, lease=lease
        )
        self.snapshots = WorkspaceSnapshots(durability.store, exclude=durability.exclude)
        self._lock = threading.RLock()

    def _serial(self) -> AbstractContextManager[object]:
        """The lock that makes the checks and snapshots of this object one at a time (the
        running loop's lock on the async face)."""
        return self._lock

    def before(self, runtime: SkillRuntime) -> None:
        """Called at the start of every operation of ``runtime`` (see the module docs)."""
        if self._nested():
            return
        if self._check or self._due():
            with self._serial():
                token = ACTIVE.set(self)
                try:
                    if self._check:
                        self._recover(runtime)
                        self._check = False
                    if self._due():
                        self._snapshot(runtime, reason="interval")
                finally:
                    ACTIVE.reset(token)
        self._used = True

    def snapshot(self, runtime: SkillRuntime, *, reason: str = "demand") -> SnapshotResult:
        """Snapshot ``runtime``'s workspace now, record it and apply ``keep_last``."""
        with self._serial():
            return self._snapshot(runtime, reason=reason)

    def _snapshot(self, runtime: SkillRuntime, *, reason: str) -> SnapshotResult:
        """The work of :meth:`snapshot` (under the lock)."""
        token = ACTIVE.set(self)
        try:
            result = self.snapshots.snapshot(
                runtime, conversation_id=self.conversation_id, keep_last=self.durability.keep_last
            )
            logger.debug(
                "snapshot of conversation %s (%s): %s", self.conversation_id, reason, result
            )
            if self.binding is not None and result.changed:
                _off_loop(self._noted, result)  # writes the record
            else:
                self._noted(result)
            return result
        finally:
            ACTIVE.reset(token)

    def closing(self, runtime: SkillRuntime) -> None:
        """Called when ``runtime`` closes: snapshot a used conversation (never raises)."""
        if not (self.durability.snapshot_on_close and self._used) or self._nested():
            return
        try:
            with self._serial():
                self._snapshot(runtime, reason="close")
        except Exception:
            logger.warning(
                "the snapshot of conversation %s at close failed; its previous snapshot stays "
                "the last good one",
                self.conversation_id,
                exc_info=True,
            )

    def forget(self) -> int:
        """Delete every snapshot of the conversation (its objects go at the store's next sweep);
        returns how many. For a conversation that is destroyed (nothing is snapshotted at close
        afterwards)."""
        return _off_loop(self._delete_snapshots)

    def _recover(self, runtime: SkillRuntime) -> None:
        binding = self.binding
        sandbox_id = self._sandbox_id
        if binding is None:
            target = _off_loop(self._restore_target, None)
            if target is None:
                return  # no snapshot of the conversation: nothing to restore
            if self.lease is None:
                self._restore_if_empty(runtime, target)
                return
            with self._keeper(*self.lease).hold():
                self._restore_if_empty(runtime, target)
            return
        record = _off_loop(binding.store.get, binding.storage_key)
        if record is None or not record.restore_pending or record.sandbox_id != sandbox_id:
            return
        assert sandbox_id is not None
        if _off_loop(self._restore_target, record.snapshot_id) is None:
            # no snapshot: nothing to restore
            _off_loop(binding.restore_checked, sandbox_id, None)
            return
        with self._keeper(binding.store, binding.storage_key).hold():
            record = _off_loop(binding.store.get, binding.storage_key)
            if record is None or not record.restore_pending or record.sandbox_id != sandbox_id:
                return
            target = _off_loop(self._restore_target, record.snapshot_id)
            restored = None if target is None else self._restore_if_empty(runtime, target)
            _off_loop(binding.restore_checked, sandbox_id, restored)

    def _keeper(self, store: ConversationStore, storage_key: str) -> LeaseKeeper:
        return LeaseKeeper(
            store,
            restore_lease_key(storage_key),
            owner=self.owner,
            ttl_seconds=self.durability.restore_lease_ttl_seconds,
            wait_seconds=self.durability.restore_wait_seconds,
            description=f"the restore of conversation {self.conversation_id}",
        )

    def _restore_if_empty(self, runtime: SkillRuntime, target: str) -> str | None:
        """Restore ``target`` when the workspace is empty; returns it, or ``None`` when kept."""
        if not self._needs_restore(runtime.execute(names_request())):
            return None
        try:
            result = self.snapshots.restore(
                runtime, conversation_id=self.conversation_id, snapshot_id=target
            )
        except WorkspaceRestoreError:
            raise
        except SkillRuntimeError as error:
            raise self._restore_failed(target, error) from error
        return self._restored(target, result)
