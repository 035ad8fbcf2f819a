"""The async runtime file system: the twin of ``SkillRuntimeFileSystem``.

Same method names, arguments and contracts, as coroutines; streams are async iterators. A backend
implements the six primitives and inherits the rest. The derived operations follow the rules of
the sync ABC through the same helpers (read limits, text decoding, upload checks, the
``list_files`` walk). Host-side file I/O of :meth:`AsyncSkillRuntimeFileSystem.download` and
:meth:`AsyncSkillRuntimeFileSystem.upload` runs in worker threads, one chunk at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from ..errors import RuntimeIsADirectoryError
from ..models import FileInfo
from .search import (
    GlobQuery,
    GrepQuery,
    GrepResult,
    SearchResult,
    async_default_glob,
    async_default_grep,
)
from .spi import (
    CHUNK_SIZE,
    DEFAULT_LIST_LIMIT,
    DEFAULT_READ_LIMIT,
    LIST_CHILDREN_LIMIT,
    StatPath,
    check_read_limit,
    decode_file_text,
    list_files_plan,
    open_part_file,
    read_limit_exceeded,
    upload_executable,
)

__all__ = ["AsyncChunks", "AsyncSkillRuntimeFileSystem", "aiter_chunks", "aiter_local_file"]

AsyncChunks = AsyncIterable[bytes] | Iterable[bytes]
"""Content given to :meth:`AsyncSkillRuntimeFileSystem.write_stream`: async or plain chunks."""


async def aiter_chunks(chunks: AsyncChunks) -> AsyncGenerator[bytes, None]:
    """Iterate ``chunks`` asynchronously whether they are an async or a plain iterable."""
    if isinstance(chunks, AsyncIterable):
        async for chunk in chunks:
            yield chunk
    else:
        for chunk in chunks:
            yield chunk


async def aiter_local_file(path: Path, chunk_size: int = CHUNK_SIZE) -> AsyncGenerator[bytes, None]:
    """Yield the content of a host file in chunks, each read in a worker thread."""
    handle = await asyncio.to_thread(path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, chunk_size):
            yield chunk
    finally:
        handle.close()


class AsyncSkillRuntimeFileSystem(ABC):
    """File access inside an async runtime (see the sync ABC for every contract).

    Primitives: :meth:`read_stream`, :meth:`write_stream`, :meth:`stat`, :meth:`list_directory`,
    :meth:`delete`, :meth:`make_directory`. A backend may override a derived operation where its
    service does it faster.
    """

    # ----------------------------------------------------------------- primitives

    @abstractmethod
    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> AsyncGenerator[bytes, None]:
        """Yield the bytes of the regular file ``path`` in chunks (an async generator).

        Raises :class:`~skillruntime.core.errors.RuntimeFileNotFoundError` when the path is
        missing or not a regular file, at the latest on the first ``__anext__``; ``aclose()``
        releases the handle or connection. Memory is bounded by ``chunk_size``.
        """

    @abstractmethod
    async def write_stream(
        self, path: str, chunks: AsyncChunks, *, executable: bool = False
    ) -> int:
        """Write ``chunks`` to ``path`` (parents created, content replaced); bytes written."""

    @abstractmethod
    async def stat(self, path: str) -> FileInfo | None:
        """The metadata of ``path``, or ``None`` when it does not exist."""

    @abstractmethod
    async def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        """Entries below ``path`` down to ``depth`` levels, at most ``limit``, sorted by path."""

    @abstractmethod
    async def delete(self, path: str) -> None:
        """Delete a file or a directory tree; deleting a missing path succeeds."""

    @abstractmethod
    async def make_directory(self, path: str) -> None:
        """Create ``path`` and its parents; an existing directory is fine."""

    # ------------------------------------------------------------------- derived

    async def exists(self, path: str) -> bool:
        """True when ``path`` exists."""
        return await self.stat(path) is not None

    async def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        """Read a whole file, failing with ``FileTooLargeError`` beyond ``max_bytes`` (enforced
        while streaming)."""
        check_read_limit(max_bytes)
        buffer = bytearray()
        async with contextlib.aclosing(self.read_stream(path)) as stream:
            async for chunk in stream:
                buffer.extend(chunk)
                if len(buffer) > max_bytes:
                    raise read_limit_exceeded(path, max_bytes)
        return bytes(buffer)

    async def read_text(
        self,
        path: str,
        max_bytes: int = DEFAULT_READ_LIMIT,
        *,
        encoding: str = "utf-8",
        errors: str = "strict",
    ) -> str:
        """Read a text file (UTF-8 by default) with the limit of :meth:`read_bytes`."""
        return decode_file_text(await self.read_bytes(path, max_bytes), path, encoding, errors)

    async def write_bytes(self, path: str, data: bytes, *, executable: bool = False) -> int:
        """Write ``data`` to ``path`` (parents created, content replaced)."""
        return await self.write_stream(path, [bytes(data)], executable=executable)

    async def write_text(self, path: str, text: str, *, encoding: str = "utf-8") -> int:
        """Write ``text`` to ``path`` (parents created, content replaced)."""
        return await self.write_bytes(path, text.encode(encoding))

    async def overwrite_text(
        self, path: str, text: str, *, encoding: str = "utf-8"
    ) -> tuple[int, bool]:
        """:meth:`write_text` that refuses a directory (what :meth:`stat` says is one, links
        followed) with :class:`RuntimeIsADirectoryError` and tells whether ``path`` existed:
        ``(bytes written, existed)``. The default asks :meth:`stat` first; a backend may do both
        in one resolution of the path."""
        info = await self.stat(path)
        if info is not None and info.is_directory:
            raise RuntimeIsADirectoryError(f"Cannot write {path}: it is a directory", path=path)
        return await self.write_text(path, text, encoding=encoding), info is not None

    async def download(
        self, path: str, destination: str | os.PathLike[str] | BinaryIO
    ) -> Path | None:
        """Copy the runtime file ``path`` to a host file (through a ``.part`` file renamed when
        complete, parents created, mode ``0o666`` less the umask; the resolved path is returned)
        or to a writable binary stream (``None``)."""
        if isinstance(destination, str | os.PathLike):
            return await self._download_to_path(path, Path(destination))
        async with contextlib.aclosing(self.read_stream(path)) as stream:
            async for chunk in stream:
                await asyncio.to_thread(destination.write, chunk)
        return None

    async def _download_to_path(self, path: str, destination: Path) -> Path:
        target = destination.expanduser().absolute()
        await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
        fd, part = await asyncio.to_thread(open_part_file, target)
        try:
            with os.fdopen(fd, "wb") as handle:
                async with contextlib.aclosing(self.read_stream(path)) as stream:
                    async for chunk in stream:
                        await asyncio.to_thread(handle.write, chunk)
            await asyncio.to_thread(os.replace, part, target)
        except BaseException:
            with contextlib.suppress(OSError):
                part.unlink()
            raise
        return target

    async def upload(
        self,
        local_path: str | os.PathLike[str],
        path: str,
        *,
        executable: bool | None = None,
    ) -> int:
        """Copy a host file to the runtime path ``path``, streaming; ``executable`` of ``None``
        keeps the host file's executable bit."""
        source = Path(local_path)
        flag = await asyncio.to_thread(upload_executable, source, path, executable)
        return await self.write_stream(path, aiter_local_file(source), executable=flag)

    async def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        """Upload many host files (``(local_path, runtime_path, executable)``); their count."""
        count = 0
        for local_path, remote_path, executable in files:
            await self.upload(local_path, remote_path, executable=executable)
            count += 1
        return count

    async def list_files(
        self, path: str, depth: int = 1_000_000, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        """Regular files below ``path`` down to ``depth`` levels, breadth-first, at most
        ``limit``; a regular file returns itself; a missing path raises."""
        plan = list_files_plan(path, depth, limit)
        try:
            step = next(plan)
            while True:
                if isinstance(step, StatPath):
                    step = plan.send(await self.stat(step.path))
                else:
                    listed = await self.list_directory(step.directory, 1, LIST_CHILDREN_LIMIT)
                    step = plan.send(listed)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """Regular files below ``root`` matching ``query``, in walk order; the async twin of
        ``SkillRuntimeFileSystem.glob``
        (an override must return what this default returns)."""

        return await async_default_glob(self, root, query)

    async def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], Awaitable[str]] | None = None,
    ) -> GrepResult:
        """Content search below ``root``; the async twin of
        ``SkillRuntimeFileSystem.grep`` (an override must return what this default returns).
        ``read_text(path, max_bytes)`` (default :meth:`read_text`) reads every file the search
        reads on the client, so a wrapper can keep its checks on them."""

        return await async_default_grep(self, root, query, read_text=read_text)

    @staticmethod
    def join(base: str, *parts: str) -> str:
        """Join runtime path components with POSIX rules."""
        return posixpath.join(base, *parts)
