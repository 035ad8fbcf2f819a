"""The async face of automatic durability: :class:`AsyncDurableWorkspace`, what an async runtime
handed a :class:`~.base.Durability` keeps and calls (the contract is in :mod:`.automatic`, which
re-exports it). Its sync face, :mod:`.durable`, is generated from this module by
``scripts/generate_sync.py``. See docs/durability.md.
"""

from __future__ import annotations

if False:  # unasync: sync docstring
    """The sync face of automatic durability: :class:`DurableWorkspace`, what a sync runtime
    handed a :class:`~.base.Durability` keeps and calls (the contract is in :mod:`.automatic`,
    which re-exports it). Generated from :mod:`.async_durable`. See docs/durability.md.
    """

import asyncio

if False:  # unasync: sync
    import threading
from contextlib import AbstractAsyncContextManager

from ..conversations.async_leases import AsyncLeaseKeeper
from ..conversations.binding import ConversationBinding
from ..conversations.spi import ConversationStore
from ..errors import SkillRuntimeError, WorkspaceRestoreError
from ..runtime.async_spi import AsyncSkillRuntime
from ..runtime.loop_local import LoopLocal
from .async_workspace import AsyncWorkspaceSnapshots, _off_loop
from .base import ACTIVE, Durability, DurableBase, logger, names_request, restore_lease_key
from .common import SnapshotResult

__all__ = ["AsyncDurableWorkspace"]


class AsyncDurableWorkspace(DurableBase):
    """The asyncio twin of :class:`~.durable.DurableWorkspace` (same contract, awaited calls;
    the store calls run in worker threads)."""

    if False:  # unasync: sync docstring
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
        self.snapshots = AsyncWorkspaceSnapshots(durability.store, exclude=durability.exclude)
        if True:  # unasync: async
            self._locks: LoopLocal[asyncio.Lock] = LoopLocal(asyncio.Lock)
        else:  # unasync: sync
            self._lock = threading.RLock()

    def _serial(self) -> AbstractAsyncContextManager[object]:
        """The lock that makes the checks and snapshots of this object one at a time (the
        running loop's lock on the async face)."""
        if True:  # unasync: async
            return self._locks.get()
        else:  # unasync: sync
            return self._lock

    async def before(self, runtime: AsyncSkillRuntime) -> None:
        """Called at the start of every operation of ``runtime`` (see the module docs)."""
        if self._nested():
            return
        if self._check or self._due():
            async with self._serial():
                token = ACTIVE.set(self)
                try:
                    if self._check:
                        await self._recover(runtime)
                        self._check = False
                    if self._due():
                        await self._snapshot(runtime, reason="interval")
                finally:
                    ACTIVE.reset(token)
        self._used = True

    if True:  # unasync: async

        async def snapshot(self, runtime: AsyncSkillRuntime) -> SnapshotResult:
            """Snapshot ``runtime``'s workspace now, record it and apply ``keep_last``."""
            async with self._serial():
                return await self._snapshot(runtime, reason="demand")

    else:  # unasync: sync

        def snapshot(self, runtime: AsyncSkillRuntime, *, reason: str = "demand") -> SnapshotResult:
            """Snapshot ``runtime``'s workspace now, record it and apply ``keep_last``."""
            with self._serial():
                return self._snapshot(runtime, reason=reason)

    async def _snapshot(self, runtime: AsyncSkillRuntime, *, reason: str) -> SnapshotResult:
        """The work of :meth:`snapshot` (under the lock)."""
        token = ACTIVE.set(self)
        try:
            result = await self.snapshots.snapshot(
                runtime, conversation_id=self.conversation_id, keep_last=self.durability.keep_last
            )
            logger.debug(
                "snapshot of conversation %s (%s): %s", self.conversation_id, reason, result
            )
            if self.binding is not None and result.changed:
                await _off_loop(self._noted, result)  # writes the record
            else:
                self._noted(result)
            return result
        finally:
            ACTIVE.reset(token)

    async def closing(self, runtime: AsyncSkillRuntime) -> None:
        """Called when ``runtime`` closes: snapshot a used conversation (never raises)."""
        if not (self.durability.snapshot_on_close and self._used) or self._nested():
            return
        try:
            async with self._serial():
                await self._snapshot(runtime, reason="close")
        except Exception:
            logger.warning(
                "the snapshot of conversation %s at close failed; its previous snapshot stays "
                "the last good one",
                self.conversation_id,
                exc_info=True,
            )

    async def forget(self) -> int:
        """Delete every snapshot of the conversation (its objects go at the store's next sweep);
        returns how many. For a conversation that is destroyed (nothing is snapshotted at close
        afterwards)."""
        return await _off_loop(self._delete_snapshots)

    async def _recover(self, runtime: AsyncSkillRuntime) -> None:
        binding = self.binding
        sandbox_id = self._sandbox_id
        if binding is None:
            target = await _off_loop(self._restore_target, None)
            if target is None:
                return  # no snapshot of the conversation: nothing to restore
            if self.lease is None:
                await self._restore_if_empty(runtime, target)
                return
            async with self._keeper(*self.lease).hold():
                await self._restore_if_empty(runtime, target)
            return
        record = await _off_loop(binding.store.get, binding.storage_key)
        if record is None or not record.restore_pending or record.sandbox_id != sandbox_id:
            return
        assert sandbox_id is not None
        if await _off_loop(self._restore_target, record.snapshot_id) is None:
            # no snapshot: nothing to restore
            await _off_loop(binding.restore_checked, sandbox_id, None)
            return
        async with self._keeper(binding.store, binding.storage_key).hold():
            record = await _off_loop(binding.store.get, binding.storage_key)
            if record is None or not record.restore_pending or record.sandbox_id != sandbox_id:
                return
            target = await _off_loop(self._restore_target, record.snapshot_id)
            restored = None if target is None else await self._restore_if_empty(runtime, target)
            await _off_loop(binding.restore_checked, sandbox_id, restored)

    def _keeper(self, store: ConversationStore, storage_key: str) -> AsyncLeaseKeeper:
        return AsyncLeaseKeeper(
            store,
            restore_lease_key(storage_key),
            owner=self.owner,
            ttl_seconds=self.durability.restore_lease_ttl_seconds,
            wait_seconds=self.durability.restore_wait_seconds,
            description=f"the restore of conversation {self.conversation_id}",
        )

    async def _restore_if_empty(self, runtime: AsyncSkillRuntime, target: str) -> str | None:
        """Restore ``target`` when the workspace is empty; returns it, or ``None`` when kept."""
        if not self._needs_restore(await runtime.execute(names_request())):
            return None
        try:
            result = await self.snapshots.restore(
                runtime, conversation_id=self.conversation_id, snapshot_id=target
            )
        except WorkspaceRestoreError:
            raise
        except SkillRuntimeError as error:
            raise self._restore_failed(target, error) from error
        return self._restored(target, result)
