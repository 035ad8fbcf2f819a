"""The sandbox file system from asyncio, on the SDK's async file API.

The twin of :mod:`.files`, with its rules through the same helpers: a read is preceded by a
``/files/info`` check (no FIFO, socket, device or directory), modes use the SDK's decimal-digit
convention, uploads go in batches (:func:`~.files.upload_batches`), idempotent calls retry
transient failures (:func:`~.retry.acall_idempotent`) and writes and deletes are sent once. A
call that failed on a sandbox that has vanished is sent once more to the replacement (never a
streaming write whose source was already partly consumed).

``write_stream`` of async chunks spools them into a temporary file that stays in memory up to
:data:`SPOOL_MEMORY_BYTES` and goes to disk beyond, since the SDK's multipart body reads a
synchronous binary file: memory stays bounded whatever the size.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

from opensandbox.models.filesystem import DirectoryListEntry, WriteEntry
from opensandbox.sandbox import Sandbox
from skillruntime.core.errors import (
    ExecutionTransportError,
    NotADirectoryFileError,
    RuntimeFileError,
    RuntimeFileNotFoundError,
)
from skillruntime.core.files.async_spi import (
    AsyncChunks,
    AsyncSkillRuntimeFileSystem,
    aiter_chunks,
)
from skillruntime.core.files.globbing import GlobMatcher
from skillruntime.core.files.search import (
    GlobQuery,
    GrepEngine,
    GrepQuery,
    GrepResult,
    SearchResult,
)
from skillruntime.core.files.search_command import async_grep_from_output
from skillruntime.core.files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT
from skillruntime.core.models import FileInfo, SkillExecutionRequest, SkillExecutionResult

from .errors import OpenSandboxFileError, file_error, is_not_found, is_transient
from .files import (
    EXECUTABLE_MODE,
    FILE_MODE,
    directory_read_error,
    found_info,
    listed_infos,
    needs_directory_check,
    open_local,
    require_readable,
    upload_batches,
)
from .retry import acall_idempotent
from .search import glob_answer, glob_request, grep_found, grep_request

__all__ = ["SPOOL_MEMORY_BYTES", "AsyncOpenSandboxFileSystem", "AsyncRecover"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

SPOOL_MEMORY_BYTES = 4 * 1024 * 1024
"""Bytes of a streamed write kept in memory before its spool file goes to disk."""

AsyncRecover = Callable[[Sandbox, BaseException], Awaitable[bool]]
"""Called with the sandbox and the SDK error of a failed call; ``True`` when the sandbox had
vanished and a new handle should be used for one more attempt."""


class AsyncOpenSandboxFileSystem(AsyncSkillRuntimeFileSystem):
    """File access inside one sandbox from asyncio; ``sandbox`` returns the live handle.

    Arguments as for :class:`~.files.OpenSandboxFileSystem`, with coroutine functions.
    """

    def __init__(
        self,
        sandbox: Callable[[], Awaitable[Sandbox]],
        *,
        retry_seconds: float,
        recover: AsyncRecover | None = None,
        owner: str | None = None,
        group: str | None = None,
        run_command: Callable[[SkillExecutionRequest], Awaitable[SkillExecutionResult]]
        | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._run_command = run_command
        self._retry_seconds = retry_seconds
        self._recover = recover
        self._owner = owner
        self._group = group
        self._requests = 0

    @property
    def requests(self) -> int:
        """Requests sent so far (diagnostics and benchmarks)."""
        return self._requests

    def _entry(self, path: str, data: object, mode: int) -> WriteEntry:
        return WriteEntry(path=path, data=data, mode=mode, owner=self._owner, group=self._group)

    async def _call(
        self,
        operation: Callable[[Sandbox], Awaitable[T]],
        *,
        idempotent: bool,
        resend: Callable[[], bool] = lambda: True,
    ) -> T:
        """Run ``operation`` on the live sandbox (retried when idempotent); once more on a new
        sandbox when the first one vanished and ``resend()`` allows it (one shared budget)."""
        deadline = time.monotonic() + self._retry_seconds
        sandbox = await self._sandbox()
        recover = self._recover
        vanished = False

        async def gone(exc: BaseException) -> bool:
            nonlocal vanished
            if recover is not None and resend():
                vanished = await recover(sandbox, exc)
            return vanished

        try:
            return await self._call_on(
                sandbox, operation, idempotent=idempotent, deadline=deadline, abandon=gone
            )
        except Exception as exc:
            if recover is None or not resend():
                raise
            if not vanished:
                already_asked = idempotent and is_transient(exc)
                if already_asked or not await recover(sandbox, exc):
                    raise
        return await self._call_on(
            await self._sandbox(), operation, idempotent=idempotent, deadline=deadline
        )

    async def _call_on(
        self,
        sandbox: Sandbox,
        operation: Callable[[Sandbox], Awaitable[T]],
        *,
        idempotent: bool,
        deadline: float | None = None,
        abandon: Callable[[BaseException], Awaitable[bool]] | None = None,
    ) -> T:
        async def once() -> T:
            self._requests += 1
            return await operation(sandbox)

        if idempotent:
            return await acall_idempotent(
                once, budget_seconds=self._retry_seconds, deadline=deadline, abandon=abandon
            )
        return await once()

    # ----------------------------------------------------------------- primitives

    async def read_stream(
        self, path: str, chunk_size: int = CHUNK_SIZE
    ) -> AsyncGenerator[bytes, None]:
        require_readable(path, await self.stat(path))
        try:
            stream = await self._call(
                lambda sandbox: sandbox.files.read_bytes_stream(path, chunk_size=chunk_size),
                idempotent=True,
            )
        except Exception as exc:
            raise await self._read_error(path, exc) from exc
        try:
            async for chunk in stream:
                yield chunk
        except Exception as exc:
            raise file_error("reading", path, exc) from exc
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    async def _read_error(self, path: str, exc: Exception) -> RuntimeFileError:
        error = file_error("reading", path, exc)
        if not needs_directory_check(error, exc):
            return error
        try:
            info = await self.stat(path)
        except RuntimeFileError:
            info = None
        if info is not None and info.is_directory:
            assert isinstance(error, OpenSandboxFileError)
            return directory_read_error(path, error)
        return error

    async def write_stream(
        self, path: str, chunks: AsyncChunks, *, executable: bool = False
    ) -> int:
        mode = EXECUTABLE_MODE if executable else FILE_MODE
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES) as spool:
            size = 0
            async for chunk in aiter_chunks(chunks):
                spool.write(chunk)
                size += len(chunk)
            spool.seek(0)

            async def send(sandbox: Sandbox) -> None:
                spool.seek(0)
                await sandbox.files.write_files([self._entry(path, spool, mode)])

            try:
                await self._call(send, idempotent=False)
            except Exception as exc:
                raise file_error("writing", path, exc) from exc
        return size

    async def stat(self, path: str) -> FileInfo | None:
        try:
            return await self._info(path)
        except NotADirectoryFileError:
            return None  # a component is a file: the path does not exist

    async def _info(self, path: str) -> FileInfo | None:
        try:
            found = await self._call(
                lambda sandbox: sandbox.files.get_file_info([path]), idempotent=True
            )
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise file_error("inspecting", path, exc) from exc
        return found_info(path, found)

    async def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        root = await self._info(path)
        if root is None:
            raise RuntimeFileNotFoundError(f"Path does not exist: {path}", path=path)
        if not root.is_directory:
            return [root]
        if limit <= 0:
            return []
        try:
            entries = await self._call(
                lambda sandbox: sandbox.files.list_directory(
                    DirectoryListEntry(path=path, depth=depth)
                ),
                idempotent=True,
            )
        except Exception as exc:
            raise file_error("listing", path, exc) from exc
        return listed_infos(path, entries, limit)

    async def _search(self, request: SkillExecutionRequest, path: str) -> SkillExecutionResult:
        assert self._run_command is not None
        try:
            return await self._run_command(request)
        except ExecutionTransportError as exc:
            raise RuntimeFileError(str(exc), path=path) from exc

    async def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """One command for the whole walk (see :mod:`.search`), as the sync file system."""
        if self._run_command is None or not root.is_directory or root.is_special:
            return await super().glob(root, query)
        GlobMatcher(query.pattern)  # a bad pattern fails before any request
        result = await self._search(glob_request(root, query), root.path)
        found = glob_answer(result, root, query)
        return await super().glob(root, query) if found is None else found

    async def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], Awaitable[str]] | None = None,
    ) -> GrepResult:
        """One command for the walk and the candidate files (see :mod:`.search`), as the sync
        file system; links are read with ``read_text``."""
        if self._run_command is None or not root.is_directory or root.is_special:
            return await super().grep(root, query, read_text=read_text)
        GrepEngine(query, root.path)  # a bad pattern or glob fails before any request
        found = grep_found(await self._search(grep_request(root, query), root.path))
        if found is None:
            return await super().grep(root, query, read_text=read_text)
        listing, contents = found
        return await async_grep_from_output(
            listing, contents, root, query, read_text or self.read_text
        )

    async def delete(self, path: str) -> None:
        info = await self.stat(path)
        if info is None:
            return
        try:
            if info.is_directory:
                await self._call(
                    lambda sandbox: sandbox.files.delete_directories([path]), idempotent=False
                )
            else:
                await self._call(
                    lambda sandbox: sandbox.files.delete_files([path]), idempotent=False
                )
        except Exception as exc:
            if is_not_found(exc):
                return
            raise file_error("deleting", path, exc) from exc

    async def make_directory(self, path: str) -> None:
        await self.make_directories([path])

    # ------------------------------------------------------------------ batches

    async def make_directories(
        self, paths: Iterable[str], *, sandbox: Sandbox | None = None
    ) -> None:
        """Create every directory in ``paths`` (and parents) in one request (retried); with
        ``sandbox`` on that handle, without recovery."""
        entries = [self._entry(p, None, EXECUTABLE_MODE) for p in paths]
        if not entries:
            return

        async def create(target: Sandbox) -> None:
            await target.files.create_directories(entries)

        try:
            if sandbox is None:
                await self._call(create, idempotent=True)
            else:
                await self._call_on(sandbox, create, idempotent=True)
        except Exception as exc:
            raise file_error("creating directory", entries[0].path, exc) from exc

    async def upload_files(
        self, files: Iterable[tuple[Path, str, bool]], *, sandbox: Sandbox | None = None
    ) -> int:
        """Upload host files in batched multipart requests, each file streamed from disk; with
        ``sandbox`` every batch goes to that handle and none moves to a replacement."""
        count = 0
        for batch in upload_batches(files):
            count += await self._upload_batch(batch, sandbox)
        return count

    async def _upload_batch(
        self, batch: list[tuple[Path, str, bool]], target: Sandbox | None
    ) -> int:
        async def send(sandbox: Sandbox) -> None:
            with contextlib.ExitStack() as stack:
                entries = [
                    self._entry(
                        remote_path,
                        stack.enter_context(open_local(local_path, remote_path)),
                        EXECUTABLE_MODE if executable else FILE_MODE,
                    )
                    for local_path, remote_path, executable in batch
                ]
                await sandbox.files.write_files(entries)

        try:
            if target is None:
                await self._call(send, idempotent=False)
            else:
                await self._call_on(target, send, idempotent=False)
        except RuntimeFileError:
            raise
        except Exception as exc:
            raise file_error("uploading", batch[0][1], exc) from exc
        return len(batch)
