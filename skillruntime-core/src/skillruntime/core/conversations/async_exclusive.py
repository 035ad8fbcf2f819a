"""Exclusive conversations for async runtimes: the twin of
:mod:`skillruntime.core.conversations.exclusive`.

:class:`AsyncConversationGuard` applies the rules of
:class:`~skillruntime.core.conversations.exclusive.ConversationGuard` (they live once, in
:class:`~skillruntime.core.conversations.exclusive.ConversationGuardBase` and
:class:`~skillruntime.core.conversations.leases.LeaseState`) with an
:class:`~skillruntime.core.conversations.async_leases.AsyncLeaseKeeper`:

* with ``exclusive=True`` every ``prepare``, ``execute`` and file operation runs while the
  runtime holds the conversation's lease: it waits for it up to ``lease_wait_seconds`` with
  :func:`asyncio.sleep` backoff (:class:`~.conversations.leases.LeaseTimeoutError`), keeps it
  renewed from an asyncio task while the operation runs and releases it afterwards.
  ``async with runtime.exclusive_session():`` holds it across several operations. A lost lease
  raises the same :class:`~.conversations.leases.LeaseLostError` as the sync runtimes;
* activity (the record's ``updated_at``, read by sweeps) is noted at most once per
  ``activity_interval_seconds``.

The store is the sync SPI: its calls run in worker threads (:func:`asyncio.to_thread`), so the
event loop never blocks. Sync and async runtimes on one conversation exclude each other: both are
owners of the same lease in the store.

:class:`AsyncExclusiveRuntimeMixin` wires a guard into an
:class:`~skillruntime.core.runtime.async_spi.AsyncBaseSkillRuntime`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ..files.async_spi import AsyncChunks, AsyncSkillRuntimeFileSystem
from ..files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, DEFAULT_READ_LIMIT
from ..models import (
    FileInfo,
    Skill,
    SkillExecutionRequest,
    SkillExecutionResult,
    SkillPreparationRequest,
)
from .async_leases import AsyncLeaseKeeper
from .exclusive import ConversationGuardBase
from .spi import ConversationLease

if TYPE_CHECKING:
    from ..files.search import GlobQuery, GrepQuery, GrepResult, SearchResult

__all__ = [
    "AsyncConversationGuard",
    "AsyncExclusiveRuntimeMixin",
    "AsyncLeaseGuardedFileSystem",
]


class AsyncConversationGuard(ConversationGuardBase):
    """The lease and activity bookkeeping of one async runtime's conversation (see the module
    docs); arguments as
    :class:`~skillruntime.core.conversations.exclusive.ConversationGuardBase`."""

    keeper: AsyncLeaseKeeper | None

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
    async def operation(self) -> AsyncIterator[ConversationLease | None]:
        """One runtime operation: under the lease when exclusive, with activity noted."""
        if self.keeper is None:
            await self._note_activity()
            yield None
            return
        async with self.keeper.hold() as lease:
            await self._note_activity()
            yield lease

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
            await asyncio.to_thread(self._write_activity, register)


class AsyncLeaseGuardedFileSystem(AsyncSkillRuntimeFileSystem):
    """An async file system whose every operation runs inside ``operation()`` (a guard's)."""

    def __init__(
        self,
        inner: AsyncSkillRuntimeFileSystem,
        operation: Callable[[], contextlib.AbstractAsyncContextManager[Any]],
    ) -> None:
        self._inner = inner
        self._operation = operation

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

    async def write_stream(
        self, path: str, chunks: AsyncChunks, *, executable: bool = False
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
        self,
        local_path: str | os.PathLike[str],
        path: str,
        *,
        executable: bool | None = None,
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
        read_text: Callable[[str, int], Awaitable[str]] | None = None,
    ) -> GrepResult:
        async with self._operation():
            return await self._inner.grep(root, query, read_text=read_text)


class AsyncExclusiveRuntimeMixin:
    """Puts ``prepare``, ``execute`` and the file system of an async runtime under its
    :class:`AsyncConversationGuard` (set ``self._guard``; ``None`` leaves the runtime as it is).

    Place it before :class:`~.async_runtime.AsyncBaseSkillRuntime` in the bases.
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
        if self._guard is None:
            return contextlib.nullcontext()
        return self._guard.session()

    async def prepare(self, request: SkillPreparationRequest) -> list[Skill]:
        guard = self._guard
        if guard is None:
            return await super().prepare(request)  # type: ignore[misc, no-any-return]
        async with guard.operation():
            return await super().prepare(request)  # type: ignore[misc, no-any-return]

    async def execute(self, request: SkillExecutionRequest) -> SkillExecutionResult:
        guard = self._guard
        if guard is None:
            return await super().execute(request)  # type: ignore[misc, no-any-return]
        async with guard.operation():
            return await super().execute(request)  # type: ignore[misc, no-any-return]

    async def get_file_system(self) -> AsyncSkillRuntimeFileSystem:
        inner: AsyncSkillRuntimeFileSystem = await super().get_file_system()  # type: ignore[misc]
        guard = self._guard
        if guard is None or not guard.exclusive:
            return inner  # activity is noted by prepare and execute
        if self._guarded_files is None:
            self._guarded_files = AsyncLeaseGuardedFileSystem(inner, guard.operation)
        return self._guarded_files
