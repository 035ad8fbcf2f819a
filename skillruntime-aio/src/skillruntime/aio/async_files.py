"""``AsyncAioFileSystem``: the file-system primitives of :mod:`.files`, awaited.

The same requests and the same rules as :class:`~skillruntime.aio.files.AioFileSystem` (its
command scripts, answer parsing and error typing are shared): reads stream
``GET /v1/file/download`` as async byte streams; writes spool on this host (memory up to 1 MiB,
then a temporary file written in a worker thread), upload to a staging path and move into place
with one command; ``stat``, listings, ``delete`` and ``make_directory`` are one command each.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import IO

import httpx

from skillruntime.core.errors import (
    ExecutionTransportError,
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
from skillruntime.core.files.search_command import (
    async_grep_from_output,
    glob_from_listing,
    parse_glob_output,
    parse_grep_output,
    search_script,
)
from skillruntime.core.files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT
from skillruntime.core.models import FileInfo

from .async_client import AsyncAioClient
from .async_commands import AsyncCommandRunner
from .errors import AioNotFoundError, AioSandboxError
from .files import (
    LIST_OUTPUT_CAP,
    QUERY_OUTPUT_CAP,
    checked_outcome,
    command_failure,
    delete_script,
    file_command,
    list_result,
    list_script,
    make_directory_script,
    marker_script,
    move_into_place_script,
    refused_read,
    refused_read_after_stat,
    search_complete,
    stat_result,
    stat_script,
)
from .script import WrapperOutcome

__all__ = ["AsyncAioFileSystem"]

logger = logging.getLogger(__name__)

_SPOOL_MEMORY = 1024 * 1024


class AsyncAioFileSystem(AsyncSkillRuntimeFileSystem):
    """Unscoped async file access on the service; paths are absolute. Arguments as
    :class:`~skillruntime.aio.files.AioFileSystem`."""

    def __init__(
        self,
        client: AsyncAioClient,
        runner: AsyncCommandRunner,
        *,
        query_timeout: float = 60.0,
        transfer_timeout: float = 600.0,
    ) -> None:
        self._client = client
        self._runner = runner
        self._query_timeout = query_timeout
        self._transfer_timeout = transfer_timeout

    async def _command(
        self, script: str, path: str, *, retry_safe: bool, cap: int = QUERY_OUTPUT_CAP
    ) -> WrapperOutcome:
        spec = file_command(script, self._query_timeout, cap)
        try:
            outcome = await self._runner.run(spec, retry_safe=retry_safe)
        except ExecutionTransportError as exc:
            raise RuntimeFileError(str(exc), path=path) from exc
        return checked_outcome(outcome, path, self._query_timeout)

    async def _change(self, script: str, what: str, path: str) -> None:
        outcome = await self._command(script, path, retry_safe=False)
        if outcome.exit_code != 0:
            raise command_failure(outcome, what, path)

    # ------------------------------------------------------------------ reads

    async def read_stream(
        self, path: str, chunk_size: int = CHUNK_SIZE
    ) -> AsyncGenerator[bytes, None]:
        try:
            response = await self._client.open_stream("/v1/file/download", params={"path": path})
        except AioNotFoundError as exc:
            raise RuntimeFileNotFoundError(f"File not found: {path}", path=path) from exc
        except AioSandboxError as exc:
            raise await self._read_error(path, exc) from exc
        try:
            async for chunk in response.aiter_bytes(chunk_size):
                if chunk:
                    yield chunk
        except httpx.HTTPError as exc:
            raise RuntimeFileError(
                f"Reading {path} from the AIO Sandbox failed: {type(exc).__name__}", path=path
            ) from exc
        finally:
            await response.aclose()

    async def _read_error(self, path: str, exc: AioSandboxError) -> RuntimeFileError:
        error = refused_read(path, exc)
        if error is not None:
            return error
        try:
            info = await self.stat(path)
        except RuntimeFileError:
            info = None
        return refused_read_after_stat(path, info)

    # ----------------------------------------------------------------- writes

    async def write_stream(
        self, path: str, chunks: AsyncChunks, *, executable: bool = False
    ) -> int:
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY) as spool:
            size = 0
            async for chunk in aiter_chunks(chunks):
                if size + len(chunk) > _SPOOL_MEMORY:
                    await asyncio.to_thread(spool.write, chunk)
                else:
                    spool.write(chunk)
                size += len(chunk)
            spool.seek(0)
            await self.put_file(spool, size, path, mode=0o755 if executable else 0o644)
        return size

    async def put_file(self, source: IO[bytes], size: int, path: str, *, mode: int) -> None:
        """Upload ``size`` bytes of ``source`` to ``path`` (parents created, ``mode`` set)."""
        staging = await self._runner.staging_path()
        try:
            await self._client.upload(
                staging, source, size, idempotent=True, read_timeout=self._transfer_timeout
            )
        except AioSandboxError as exc:
            raise RuntimeFileError(f"Cannot upload {path}: {exc}", path=path) from exc
        await self._change(move_into_place_script(staging, path, mode), "write", path)

    # --------------------------------------------------------------- metadata

    async def stat(self, path: str) -> FileInfo | None:
        return stat_result(await self._command(stat_script(path), path, retry_safe=True), path)

    async def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        if limit <= 0:
            return []
        script = list_script(path, max(depth, 1), limit)
        outcome = await self._command(script, path, retry_safe=True, cap=LIST_OUTPUT_CAP)
        return list_result(outcome, path, limit)

    # ---------------------------------------------------------------- search

    async def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """One command for the whole walk: the command and parsing of
        :meth:`AioFileSystem.glob <skillruntime.aio.files.AioFileSystem.glob>`."""
        if not root.is_directory or root.is_special:
            return await super().glob(root, query)
        GlobMatcher(query.pattern)  # a bad pattern fails before any request
        outcome = await self._command(
            search_script(root.path, query.max_depth, content=None),
            root.path,
            retry_safe=True,
            cap=LIST_OUTPUT_CAP,
        )
        listing = parse_glob_output(outcome.stdout) if search_complete(outcome) else None
        if listing is None:
            return await super().glob(root, query)
        return glob_from_listing(listing, root, query)

    async def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], Awaitable[str]] | None = None,
    ) -> GrepResult:
        """One command for the walk and the candidate files: the command and parsing of
        :meth:`AioFileSystem.grep <skillruntime.aio.files.AioFileSystem.grep>`."""
        if not root.is_directory or root.is_special:
            return await super().grep(root, query, read_text=read_text)
        GrepEngine(query, root.path)  # a bad pattern or glob fails before any request
        outcome = await self._command(
            search_script(root.path, query.max_depth, content=query),
            root.path,
            retry_safe=True,
            cap=LIST_OUTPUT_CAP,
        )
        found = (
            parse_grep_output(outcome.stdout, outcome.stderr) if search_complete(outcome) else None
        )
        if found is None:
            return await super().grep(root, query, read_text=read_text)
        listing, contents = found
        return await async_grep_from_output(
            listing, contents, root, query, read_text or self.read_text
        )

    # ---------------------------------------------------------------- changes

    async def delete(self, path: str) -> None:
        await self._change(delete_script(path), "delete", path)

    async def make_directory(self, path: str) -> None:
        await self._change(make_directory_script(path), "create directory", path)

    async def write_marker(self, path: str, text: str) -> None:
        """Write a small text file with one command (parents created)."""
        await self._change(marker_script(path, text), "write", path)
