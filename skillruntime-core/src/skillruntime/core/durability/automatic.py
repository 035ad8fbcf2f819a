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
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..conversations.async_leases import AsyncLeaseKeeper
from ..conversations.binding import ConversationBinding
from ..conversations.leases import LeaseKeeper
from ..conversations.spi import ConversationRecord, ConversationStore
from ..errors import SkillRuntimeError, WorkspaceRestoreError
from ..models import SkillExecutionRequest, SkillExecutionResult
from ..runtime.async_spi import AsyncSkillRuntime
from ..runtime.loop_local import LoopLocal
from ..runtime.spi import SkillRuntime
from ..snapshots.spi import SnapshotStore
from .async_workspace import AsyncWorkspaceSnapshots
from .common import DEFAULT_EXCLUDE, RestoreResult, SnapshotResult
from .workspace import WorkspaceSnapshots

__all__ = [
    "AsyncDurableWorkspace",
    "Durability",
    "DurableWorkspace",
    "restore_lease_key",
    "snapshot_before_sweep",
]

logger = logging.getLogger(__name__)

_ACTIVE: contextvars.ContextVar[object | None] = contextvars.ContextVar(
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


def _listing_request() -> SkillExecutionRequest:
    """``ls -A`` of the workspace: one name per line (the check needs no more than that)."""
    return SkillExecutionRequest(command="ls -A", timeout_seconds=60, max_output_bytes=65536)


class _Base:
    """The state shared by both faces (no I/O)."""

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
        return _ACTIVE.get() is self

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


class DurableWorkspace(_Base):
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

    def before(self, runtime: SkillRuntime) -> None:
        """Called at the start of every operation of ``runtime`` (see the module docs)."""
        if self._nested():
            return
        if self._check or self._due():
            with self._lock:
                token = _ACTIVE.set(self)
                try:
                    if self._check:
                        self._recover(runtime)
                        self._check = False
                    if self._due():
                        self.snapshot(runtime, reason="interval")
                finally:
                    _ACTIVE.reset(token)
        self._used = True

    def snapshot(self, runtime: SkillRuntime, *, reason: str = "demand") -> SnapshotResult:
        """Snapshot ``runtime``'s workspace now, record it and apply ``keep_last``."""
        token = _ACTIVE.set(self)
        try:
            with self._lock:
                result = self.snapshots.snapshot(
                    runtime,
                    conversation_id=self.conversation_id,
                    keep_last=self.durability.keep_last,
                )
                logger.debug(
                    "snapshot of conversation %s (%s): %s", self.conversation_id, reason, result
                )
                self._noted(result)
                return result
        finally:
            _ACTIVE.reset(token)

    def closing(self, runtime: SkillRuntime) -> None:
        """Called when ``runtime`` closes: snapshot a used conversation (never raises)."""
        if not (self.durability.snapshot_on_close and self._used) or self._nested():
            return
        try:
            self.snapshot(runtime, reason="close")
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
        return self._delete_snapshots()

    def _recover(self, runtime: SkillRuntime) -> None:
        binding = self.binding
        sandbox_id = self._sandbox_id
        if binding is None:
            target = self._restore_target(None)
            if target is None:
                return  # no snapshot of the conversation: nothing to restore
            if self.lease is None:
                self._restore_if_empty(runtime, target)
                return
            with self._keeper(*self.lease).hold():
                self._restore_if_empty(runtime, target)
            return
        record = binding.store.get(binding.storage_key)
        if record is None or not record.restore_pending or record.sandbox_id != sandbox_id:
            return
        assert sandbox_id is not None
        if self._restore_target(record.snapshot_id) is None:
            binding.restore_checked(sandbox_id, None)  # no snapshot: nothing to restore
            return
        with self._keeper(binding.store, binding.storage_key).hold():
            record = binding.store.get(binding.storage_key)
            if record is None or not record.restore_pending or record.sandbox_id != sandbox_id:
                return
            target = self._restore_target(record.snapshot_id)
            restored = None if target is None else self._restore_if_empty(runtime, target)
            binding.restore_checked(sandbox_id, restored)

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
        if not self._needs_restore(runtime.execute(_listing_request())):
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


class AsyncDurableWorkspace(_Base):
    """The asyncio twin of :class:`DurableWorkspace` (same contract, awaited calls; the store
    calls run in worker threads)."""

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
        self._locks: LoopLocal[asyncio.Lock] = LoopLocal(asyncio.Lock)

    async def before(self, runtime: AsyncSkillRuntime) -> None:
        """Called at the start of every operation of ``runtime`` (see the module docs)."""
        if self._nested():
            return
        if self._check or self._due():
            async with self._locks.get():
                token = _ACTIVE.set(self)
                try:
                    if self._check:
                        await self._recover(runtime)
                        self._check = False
                    if self._due():
                        await self._snapshot(runtime, reason="interval")
                finally:
                    _ACTIVE.reset(token)
        self._used = True

    async def snapshot(self, runtime: AsyncSkillRuntime) -> SnapshotResult:
        """Snapshot ``runtime``'s workspace now, record it and apply ``keep_last``."""
        async with self._locks.get():
            return await self._snapshot(runtime, reason="demand")

    async def _snapshot(self, runtime: AsyncSkillRuntime, *, reason: str) -> SnapshotResult:
        token = _ACTIVE.set(self)
        try:
            result = await self.snapshots.snapshot(
                runtime, conversation_id=self.conversation_id, keep_last=self.durability.keep_last
            )
            logger.debug(
                "snapshot of conversation %s (%s): %s", self.conversation_id, reason, result
            )
            if self.binding is not None and result.changed:
                await asyncio.to_thread(self._noted, result)
            else:
                self._noted(result)
            return result
        finally:
            _ACTIVE.reset(token)

    async def closing(self, runtime: AsyncSkillRuntime) -> None:
        """Called when ``runtime`` closes: snapshot a used conversation (never raises)."""
        if not (self.durability.snapshot_on_close and self._used) or self._nested():
            return
        try:
            async with self._locks.get():
                await self._snapshot(runtime, reason="close")
        except Exception:
            logger.warning(
                "the snapshot of conversation %s at close failed; its previous snapshot stays "
                "the last good one",
                self.conversation_id,
                exc_info=True,
            )

    async def forget(self) -> int:
        """Delete every snapshot of the conversation; returns how many."""
        return await asyncio.to_thread(self._delete_snapshots)

    async def _recover(self, runtime: AsyncSkillRuntime) -> None:
        binding = self.binding
        sandbox_id = self._sandbox_id
        if binding is None:
            target = await asyncio.to_thread(self._restore_target, None)
            if target is None:
                return  # no snapshot of the conversation: nothing to restore
            if self.lease is None:
                await self._restore_if_empty(runtime, target)
                return
            async with self._keeper(*self.lease).hold():
                await self._restore_if_empty(runtime, target)
            return
        record = await asyncio.to_thread(binding.store.get, binding.storage_key)
        if record is None or not record.restore_pending or record.sandbox_id != sandbox_id:
            return
        assert sandbox_id is not None
        if await asyncio.to_thread(self._restore_target, record.snapshot_id) is None:
            await asyncio.to_thread(binding.restore_checked, sandbox_id, None)
            return
        async with self._keeper(binding.store, binding.storage_key).hold():
            record = await asyncio.to_thread(binding.store.get, binding.storage_key)
            if record is None or not record.restore_pending or record.sandbox_id != sandbox_id:
                return
            target = await asyncio.to_thread(self._restore_target, record.snapshot_id)
            restored = None if target is None else await self._restore_if_empty(runtime, target)
            await asyncio.to_thread(binding.restore_checked, sandbox_id, restored)

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
        if not self._needs_restore(await runtime.execute(_listing_request())):
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
