"""``AsyncScopedFileSystem``: the async twin of :class:`~.workspace.ScopedFileSystem`.

Every path goes through the same :class:`~skillruntime.core.runtime.workspace.PathScope` rules
(closed check, workspace scoping, real-path check) before the wrapped file system is called.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files.async_spi import AsyncChunks, AsyncSkillRuntimeFileSystem
from ..files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, DEFAULT_READ_LIMIT
from ..models import FileInfo
from ..observability.audit import audit_async_stream, audited
from .workspace import ConversationWorkspace, PathScope, scoped_audit_fields

if TYPE_CHECKING:
    from ..files.search import GlobQuery, GrepQuery, GrepResult, SearchResult

__all__ = ["AsyncScopedFileSystem"]


class AsyncScopedFileSystem(AsyncSkillRuntimeFileSystem):
    """Wraps an async runtime file system; the arguments are those of :class:`PathScope`.

    Every operation emits one audit event, as :class:`~.workspace.ScopedFileSystem` does.
    """

    def __init__(
        self,
        inner: AsyncSkillRuntimeFileSystem,
        *,
        workspace: ConversationWorkspace | None = None,
        is_closed: Callable[[], bool] = lambda: False,
        check_real_path: Callable[[str], str] | None = None,
        runtime_name: str = "runtime",
        base_directory: str | None = None,
        audit: Mapping[str, Any] | None = None,
    ) -> None:
        self._inner = inner
        self._audit = scoped_audit_fields(audit, runtime_name, workspace)
        self._scope = PathScope(
            workspace=workspace,
            is_closed=is_closed,
            check_real_path=check_real_path,
            runtime_name=runtime_name,
            base_directory=base_directory,
        )

    @property
    def inner(self) -> AsyncSkillRuntimeFileSystem:
        """The wrapped file system."""
        return self._inner

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> AsyncGenerator[bytes, None]:
        return audit_async_stream(
            "file.read",
            lambda: self._inner.read_stream(self._scope.path(path), chunk_size),
            **self._audit,
        )

    async def write_stream(
        self, path: str, chunks: AsyncChunks, *, executable: bool = False
    ) -> int:
        with audited("file.write", **self._audit) as record:
            scoped = self._scope.path(path)
            record.bytes = await self._inner.write_stream(scoped, chunks, executable=executable)
            return record.bytes

    async def stat(self, path: str) -> FileInfo | None:
        with audited("file.stat", **self._audit):
            return await self._inner.stat(self._scope.path(path))

    async def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        with audited("file.list", **self._audit):
            return await self._inner.list_directory(self._scope.path(path), depth, limit)

    async def delete(self, path: str) -> None:
        with audited("file.delete", **self._audit):
            await self._inner.delete(self._scope.deletable(path))

    async def make_directory(self, path: str) -> None:
        with audited("file.mkdir", **self._audit):
            await self._inner.make_directory(self._scope.path(path))

    async def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        with audited("file.read", **self._audit) as record:
            data = await self._inner.read_bytes(self._scope.path(path), max_bytes)
            record.bytes = len(data)
            return data

    def _scoped_root(self, root: FileInfo) -> FileInfo:
        path = self._scope.path(root.path)
        return root if path == root.path else root.model_copy(update={"path": path})

    async def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        """The inner file system's own ``glob`` below the scoped ``root`` when it has one (it
        never follows links); otherwise the default walk through this wrapper's checks."""
        if type(self._inner).glob is AsyncSkillRuntimeFileSystem.glob:
            return await super().glob(root, query)
        return await self._inner.glob(self._scoped_root(root), query)

    async def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], Awaitable[str]] | None = None,
    ) -> GrepResult:
        """The inner file system's own ``grep`` below the scoped ``root`` when it has one (files
        it reads on the client, links, go through this wrapper's checks); otherwise the default
        walk and reads through this wrapper's checks."""
        if type(self._inner).grep is AsyncSkillRuntimeFileSystem.grep:
            return await super().grep(root, query, read_text=read_text)
        return await self._inner.grep(
            self._scoped_root(root), query, read_text=read_text or self.read_text
        )

    async def list_files(
        self, path: str, depth: int = 1_000_000, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        with audited("file.list", **self._audit):
            return await self._inner.list_files(self._scope.path(path), depth, limit)

    async def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        with audited("file.upload", **self._audit):
            scoped = [(local, self._scope.path(remote), flag) for local, remote, flag in files]
            return await self._inner.upload_files(scoped)
