"""Exclusive conversations: one writer per conversation, and the activity that sweeps read.

:class:`AsyncConversationGuard` is what a runtime in conversation mode keeps next to its store.
One source serves both faces: :mod:`skillruntime.core.conversations.exclusive` (sync runtimes)
is generated from :mod:`skillruntime.core.conversations.async_exclusive` (async runtimes), and
the rules both follow live once, in :mod:`skillruntime.core.conversations.guard_rules` and
:class:`~skillruntime.core.conversations.lease_rules.LeaseState`:

* with ``exclusive=True`` every ``prepare``, ``execute`` and file operation runs while the
  runtime holds the conversation's lease (:class:`AsyncLeaseKeeper`): it waits for it up to
  ``lease_wait_seconds`` (:class:`~skillruntime.core.conversations.leases.LeaseTimeoutError`),
  keeps it renewed in the background while the operation runs (from a thread in sync runtimes,
  from an asyncio task in async ones; a command longer than the TTL keeps it) and releases it
  afterwards, so the processes and nodes sharing a conversation take turns.
  :meth:`AsyncConversationGuard.session` (``runtime.exclusive_session()``, entered with ``with``
  in sync runtimes and ``async with`` in async ones) holds the lease across several operations,
  e.g. one tool call or one agent turn. When the lease is lost (taken over after the renewer
  could not reach the store in time) the operation that was running raises
  :class:`~skillruntime.core.conversations.leases.LeaseLostError` when it ends, and so does every
  further operation of the same session;
* in any case the record's ``updated_at`` is refreshed (a compare-and-set write) at most once
  per ``activity_interval_seconds`` while the conversation is used (by ``prepare`` and
  ``execute``, and by file operations of exclusive runtimes), which is what
  :func:`~skillruntime.core.conversations.sweeps.sweep_conversations` measures idleness by.

The store is the sync SPI: async runtimes run its calls in worker threads
(:func:`asyncio.to_thread`), so the event loop never blocks. Sync and async runtimes on one
conversation exclude each other: both are owners of the same lease in the store.

:class:`AsyncExclusiveRuntimeMixin` wires a guard into a runtime, and :func:`workspace_guard`
builds the guard of a runtime's conversation workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeAlias, TypeVar

from ..errors import LeaseFencingError
from ..files.async_spi import AsyncChunks, AsyncSkillRuntimeFileSystem
from ..files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, DEFAULT_READ_LIMIT
from ..models import (
    FileInfo,
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from ..runtime.workspace import ConversationWorkspace
from .async_leases import AsyncLeaseKeeper
from .fencing import FENCE_VARIABLE, check_fence_result, fence_request, fence_value
from .guard_rules import (
    DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    ConversationGuardBase,
    local_service_key,
)
from .lease_rules import DEFAULT_LEASE_TTL_SECONDS, DEFAULT_LEASE_WAIT_SECONDS
from .spi import (
    ConversationLease,
    ConversationRecord,
    ConversationStore,
    open_conversation_store,
    storage_key_for,
)

if TYPE_CHECKING:
    from ..files.search import GlobQuery, GrepQuery, GrepResult, SearchResult

__all__ = [
    "DEFAULT_ACTIVITY_INTERVAL_SECONDS",
    "AsyncConversationGuard",
    "AsyncExclusiveRuntimeMixin",
    "AsyncLeaseGuardedFileSystem",
    "ConversationGuardBase",
    "local_service_key",
    "workspace_guard",
]

if True:  # unasync: async
    _Chunks: TypeAlias = AsyncChunks
    _ReadText: TypeAlias = Callable[[str, int], Awaitable[str]]
    _Fence: TypeAlias = Callable[[SkillExecutionRequest], Awaitable[SkillExecutionResult]]
else:  # unasync: sync
    _Chunks: TypeAlias = Iterable[bytes]
    _ReadText: TypeAlias = Callable[[str, int], str]
    _Fence: TypeAlias = Callable[[SkillExecutionRequest], SkillExecutionResult]

logger = logging.getLogger(__name__)


class AsyncConversationGuard(ConversationGuardBase):
    """The lease and activity bookkeeping of one runtime's conversation (see the module docs);
    arguments as :class:`~skillruntime.core.conversations.guard_rules.ConversationGuardBase`."""

    keeper: AsyncLeaseKeeper | None
    fences_run: int = 0
    """How many fence commands this guard ran (one per lease taken over)."""

    def _new_keeper(self) -> AsyncLeaseKeeper:
        return AsyncLeaseKeeper(
            self.store,
            self.storage_key,
            owner=self.lease_owner,
            ttl_seconds=self.lease_ttl_seconds,
            wait_seconds=self.lease_wait_seconds,
            description=self.description,
        )

    @contextlib.asynccontextmanager
    async def operation(
        self, fence: _Fence | None = None
    ) -> AsyncIterator[ConversationLease | None]:
        """One runtime operation: under the lease when exclusive, with activity noted.

        ``fence`` runs a command in the runtime's sandbox without the guard (the runtime's
        inner ``execute``). When the lease held was taken over from a holder that did not
        release it and is not fenced yet, the operation first runs
        :func:`~skillruntime.core.conversations.fencing.fence_request` through it (once per
        lease); when that fails it raises
        :class:`~skillruntime.core.errors.LeaseFencingError` and the lease is abandoned, never
        used (docs/conversation-stores.md, "Nodes dying"). Without ``fence`` a pending fence
        waits for the next operation that has one.
        """
        if self.keeper is None:
            await self._note_activity()
            yield None
            return
        async with self.keeper.hold() as lease:
            if fence is not None and self.keeper.takeover is not None:
                await self._fence(lease, fence)
            await self._note_activity()
            yield lease

    async def _fence(self, lease: ConversationLease, fence: _Fence) -> None:
        """Stop the commands earlier holders of ``lease`` left running, or abandon it."""
        keeper = self.keeper
        assert keeper is not None
        self.fences_run += 1
        try:
            result = await fence(fence_request(lease))
            check_fence_result(result, self.description)
        except BaseException as error:
            keeper.abandon("stopping the commands of its previous holder failed")
            if isinstance(error, LeaseFencingError) or not isinstance(error, Exception):
                raise
            raise LeaseFencingError(
                f"the lease of {self.description} was taken over from a holder that did not "
                f"release it, and the fence command could not run ({type(error).__name__}); "
                "the lease is not used and expires for the next taker to try again"
            ) from error
        logger.info("fenced the lease of %s: %s", self.description, result.stdout.strip())
        keeper.fenced()

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[ConversationLease | None]:
        """Hold the lease across several operations (a no-op without ``exclusive``)."""
        if self.keeper is None:
            yield None
            return
        async with self.keeper.hold() as lease:
            yield lease

    async def _note_activity(self) -> None:
        register = self._activity_due()
        if register is not None:
            if True:  # unasync: async
                await asyncio.to_thread(self._write_activity, register)
            else:  # unasync: sync
                self._write_activity(register)


class AsyncLeaseGuardedFileSystem(AsyncSkillRuntimeFileSystem):
    """A file system whose every operation runs inside ``operation()`` (a guard's)."""

    def __init__(
        self,
        inner: AsyncSkillRuntimeFileSystem,
        operation: Callable[[], contextlib.AbstractAsyncContextManager[Any]],
    ) -> None:
        self._inner = inner
        self._operation = operation

    if True:  # unasync: async

        async def read_stream(
            self, path: str, chunk_size: int = CHUNK_SIZE
        ) -> AsyncGenerator[bytes, None]:
            # Held from the first ``__anext__`` to ``aclose()`` (or the end of the chunks).
            async with (
                self._operation(),
                contextlib.aclosing(self._inner.read_stream(path, chunk_size)) as chunks,
            ):
                async for chunk in chunks:
                    yield chunk

    else:  # unasync: sync

        def read_stream(
            self, path: str, chunk_size: int = CHUNK_SIZE
        ) -> Generator[bytes, None, None]:
            # The inner call runs now, so its up-front checks (paths leaving the workspace…) raise
            # at once; the chunks are read under the operation, from the first ``next`` on.
            return self._held_stream(self._inner.read_stream(path, chunk_size))

        def _held_stream(
            self, chunks: Generator[bytes, None, None]
        ) -> Generator[bytes, None, None]:
            with self._operation():
                yield from chunks

    async def write_stream(
        self,
        path: str,
        chunks: _Chunks,
        *,
        executable: bool = False,
    ) -> int:
        async with self._operation():
            return await self._inner.write_stream(path, chunks, executable=executable)

    async def stat(self, path: str) -> FileInfo | None:
        async with self._operation():
            return await self._inner.stat(path)

    async def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        async with self._operation():
            return await self._inner.list_directory(path, depth, limit)

    async def delete(self, path: str) -> None:
        async with self._operation():
            await self._inner.delete(path)

    async def make_directory(self, path: str) -> None:
        async with self._operation():
            await self._inner.make_directory(path)

    async def exists(self, path: str) -> bool:
        async with self._operation():
            return await self._inner.exists(path)

    async def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        async with self._operation():
            return await self._inner.read_bytes(path, max_bytes)

    async def read_text(
        self,
        path: str,
        max_bytes: int = DEFAULT_READ_LIMIT,
        *,
        encoding: str = "utf-8",
        errors: str = "strict",
    ) -> str:
        async with self._operation():
            return await self._inner.read_text(path, max_bytes, encoding=encoding, errors=errors)

    async def write_bytes(self, path: str, data: bytes, *, executable: bool = False) -> int:
        async with self._operation():
            return await self._inner.write_bytes(path, data, executable=executable)

    async def write_text(self, path: str, text: str, *, encoding: str = "utf-8") -> int:
        async with self._operation():
            return await self._inner.write_text(path, text, encoding=encoding)

    async def download(
        self, path: str, destination: str | os.PathLike[str] | BinaryIO
    ) -> Path | None:
        async with self._operation():
            return await self._inner.download(path, destination)

    async def upload(
        self, local_path: str | os.PathLike[str], path: str, *, executable: bool | None = None
    ) -> int:
        async with self._operation():
            return await self._inner.upload(local_path, path, executable=executable)

    async def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        async with self._operation():
            return await self._inner.upload_files(files)

    async def list_files(
        self, path: str, depth: int = 1_000_000, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        async with self._operation():
            return await self._inner.list_files(path, depth, limit)

    async def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        async with self._operation():
            return await self._inner.glob(root, query)

    async def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: _ReadText | None = None,
    ) -> GrepResult:
        async with self._operation():
            return await self._inner.grep(root, query, read_text=read_text)


class AsyncExclusiveRuntimeMixin:
    """Puts ``prepare``, ``execute`` and the file system of a runtime under its
    :class:`AsyncConversationGuard` (set ``self._guard``; ``None`` leaves the runtime as it is).

    Place it before the runtime's base class (``AsyncBaseSkillRuntime`` of
    :mod:`skillruntime.core.runtime.async_spi`) in the bases.
    """

    _guard: AsyncConversationGuard | None = None
    _guarded_files: AsyncLeaseGuardedFileSystem | None = None

    @property
    def exclusive(self) -> bool:
        """Whether operations run under the conversation's lease."""
        return self._guard is not None and self._guard.exclusive

    def exclusive_session(
        self,
    ) -> contextlib.AbstractAsyncContextManager[ConversationLease | None]:
        """``async with``: hold the conversation's lease across the block (a no-op unless
        exclusive)."""
        if False:  # unasync: sync docstring
            """Hold the conversation's lease across the block (a no-op unless exclusive)."""
        if self._guard is None:
            return contextlib.nullcontext()
        return self._guard.session()

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        guard = self._guard
        if guard is None:
            return await super().prepare(request)  # type: ignore[misc, no-any-return]
        async with guard.operation(self._run_fence):
            return await super().prepare(request)  # type: ignore[misc, no-any-return]

    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        """Run the command under the lease when exclusive; it then carries the lease's fence
        in its environment (``SKILLRUNTIME_FENCE=<lease_key>:<token>``,
        :mod:`~skillruntime.core.conversations.fencing`)."""
        guard = self._guard
        if guard is None:
            return await super().execute(request)  # type: ignore[misc, no-any-return]
        async with guard.operation(self._run_fence) as lease:
            if lease is not None:
                environment = {**request.environment, FENCE_VARIABLE: fence_value(lease)}
                request = request.model_copy(update={"environment": environment})
            return await super().execute(request)  # type: ignore[misc, no-any-return]

    async def _run_fence(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        """The runtime's own ``execute``, outside the guard (the fence command)."""
        return await super().execute(request)  # type: ignore[misc, no-any-return]

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        inner: AsyncSkillRuntimeFileSystem = await super().get_file_system()  # type: ignore[misc]
        guard = self._guard
        if guard is None or not guard.exclusive:
            return inner  # activity is noted by prepare and execute
        if self._guarded_files is None:
            self._guarded_files = AsyncLeaseGuardedFileSystem(
                inner, functools.partial(guard.operation, self._run_fence)
            )
        return self._guarded_files


G = TypeVar("G", bound=ConversationGuardBase)


def workspace_guard(
    runtime_name: str,
    workspace: ConversationWorkspace | None,
    store: ConversationStore | str | None,
    *,
    service_key: str,
    exclusive: bool,
    lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS,
    lease_wait_seconds: float = DEFAULT_LEASE_WAIT_SECONDS,
    activity_interval_seconds: float = DEFAULT_ACTIVITY_INTERVAL_SECONDS,
    register: bool = True,
    guard_type: type[G] = AsyncConversationGuard,  # type: ignore[assignment]
) -> tuple[G | None, ConversationStore | None]:
    """The guard of a runtime's conversation and the store it opened from a URL (the runtime
    closes that one), or ``(None, None)`` without a store.

    Raises :class:`ValueError` for ``exclusive`` without a conversation or without a store.
    ``register`` inserts a record for the conversation on first use (runtimes that keep no
    record of their own, so that sweeps find the workspace). ``guard_type`` is the guard class
    to build, by default this module's :class:`AsyncConversationGuard`; pass
    :class:`~skillruntime.core.conversations.exclusive.ConversationGuard` for sync runtimes and
    :class:`~skillruntime.core.conversations.async_exclusive.AsyncConversationGuard` for async
    ones.
    """
    if workspace is None:
        if exclusive or store is not None:
            raise ValueError("exclusive and conversation_store need a conversation_id")
        return None, None
    if store is None:
        if exclusive:
            raise ValueError(
                "exclusive=True needs a conversation_store shared by every process of the "
                "conversation (e.g. sqlite:///conversations.db or a PostgreSQL URL)"
            )
        return None, None
    opened = open_conversation_store(store) if isinstance(store, str) else None
    chosen = opened if opened is not None else store
    assert isinstance(chosen, ConversationStore)
    root = workspace.conversations_root
    conversation_id = workspace.conversation_id

    def record() -> ConversationRecord:
        return ConversationRecord.new(
            service_key=service_key,
            conversation_id=conversation_id,
            runtime=runtime_name,
            workspace_root=root,
        )

    try:
        guard = guard_type(
            chosen,
            storage_key_for(service_key, conversation_id),
            description=f"conversation {conversation_id}",
            exclusive=exclusive,
            lease_ttl_seconds=lease_ttl_seconds,
            lease_wait_seconds=lease_wait_seconds,
            activity_interval_seconds=activity_interval_seconds,
            record_factory=record if register else None,
        )
    except BaseException:
        if opened is not None:
            opened.close()
        raise
    return guard, opened
