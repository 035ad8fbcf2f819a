"""``AsyncScopedFileSystem``: the scoped file-system wrapper of async runtimes.

The source of :mod:`skillruntime.core.runtime.scoped` (``ScopedFileSystem``), which
``scripts/generate_sync.py`` writes from it. Every path goes through the rules of
:class:`~skillruntime.core.runtime.workspace.PathScope` (closed check, workspace scoping,
real-path check) before the wrapped file system is called, and every operation emits one audit
event with the same names and fields on both faces.
"""

from __future__ import annotations

if False:  # unasync: sync docstring
    """``ScopedFileSystem``: the scoped file-system wrapper every runtime hands its callers.

    Generated from :mod:`skillruntime.core.runtime.async_scoped` (``AsyncScopedFileSystem``). Every
    path goes through the rules of :class:`~skillruntime.core.runtime.workspace.PathScope` (closed
    check, workspace scoping, real-path check) before the wrapped file system is called, and every
    operation emits one audit event with the same names and fields on both faces.
    """

from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from ..files.async_spi import AsyncSkillRuntimeFileSystem
from ..files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, DEFAULT_READ_LIMIT
from ..models import FileInfo
from ..observability.audit import audit_async_stream, audited
from .workspace import ConversationWorkspace, PathScope, scoped_audit_fields

if TYPE_CHECKING:
    from ..files.search import GlobQuery, GrepQuery, GrepResult, SearchResult

__all__ = ["AsyncScopedFileSystem"]

if True:  # unasync: async
    _Chunks: TypeAlias = AsyncIterable[bytes] | Iterable[bytes]
    _ReadText: TypeAlias = Callable[[str, int], Awaitable[str]]
else:  # unasync: sync
    _Chunks: TypeAlias = Iterable[bytes]
    _ReadText: TypeAlias = Callable[[str, int], str]


class AsyncScopedFileSystem(AsyncSkillRuntimeFileSystem):
    """Wraps a runtime file system: maps every path through a workspace and checks closure.

    The arguments are those of :class:`~skillruntime.core.runtime.workspace.PathScope`, whose
    rules apply to every path. Every operation emits one audit event (``file.read``,
    ``file.write``…, see :mod:`skillruntime.core.observability.audit`) with the fields of
    ``audit`` (default: the runtime name and conversation id); a derived operation
    (``read_text``, ``exists``…) is audited as the primitive it runs, and a search the wrapped
    file system runs itself as one ``file.list`` (glob) or ``file.read`` (grep).
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

    def scoped_path(self, path: str) -> str:
        """The path the wrapped file system gets for ``path``; raises (closed runtime, path
        outside the workspace) without calling it."""
        return self._scope.path(path)

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> AsyncGenerator[bytes, None]:
        return audit_async_stream(
            "file.read",
            lambda: self._inner.read_stream(self._scope.path(path), chunk_size),
            **self._audit,
        )

    async def write_stream(self, path: str, chunks: _Chunks, *, executable: bool = False) -> int:
        with audited("file.write", **self._audit) as record:
            scoped = self._scope.path(path)
            record.bytes = await self._inner.write_stream(scoped, chunks, executable=executable)
            return record.bytes

    async def overwrite_text(
        self, path: str, text: str, *, encoding: str = "utf-8"
    ) -> tuple[int, bool]:
        """The inner file system's ``overwrite_text`` (one resolution where it has its own),
        audited as one ``file.write``."""
        with audited("file.write", **self._audit) as record:
            written, existed = await self._inner.overwrite_text(
                self._scope.path(path), text, encoding=encoding
            )
            record.bytes = written
            return written, existed

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
        never follows links), audited as one ``file.list``; otherwise the default walk through
        this wrapper's checks (and its events)."""
        if type(self._inner).glob is AsyncSkillRuntimeFileSystem.glob:
            return await super().glob(root, query)
        with audited("file.list", **self._audit):
            return await self._inner.glob(self._scoped_root(root), query)

    async def grep(
        self, root: FileInfo, query: GrepQuery, *, read_text: _ReadText | None = None
    ) -> GrepResult:
        """The inner file system's own ``grep`` below the scoped ``root`` when it has one (files
        it reads on the client, links, go through this wrapper's checks), audited as one
        ``file.read``; otherwise the default walk and reads through this wrapper's checks (and
        their events)."""
        if type(self._inner).grep is AsyncSkillRuntimeFileSystem.grep:
            return await super().grep(root, query, read_text=read_text)
        with audited("file.read", **self._audit):
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
