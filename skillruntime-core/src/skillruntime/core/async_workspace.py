"""``AsyncScopedFileSystem``: the async twin of :class:`~.workspace.ScopedFileSystem`.

Every path goes through the same :class:`~skillruntime.core.workspace.PathScope` rules (closed
check, workspace scoping, real-path check) before the wrapped file system is called.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterable
from pathlib import Path

from .async_filesystem import AsyncChunks, AsyncSkillRuntimeFileSystem
from .filesystem import CHUNK_SIZE, DEFAULT_LIST_LIMIT, DEFAULT_READ_LIMIT
from .models import FileInfo
from .workspace import ConversationWorkspace, PathScope

__all__ = ["AsyncScopedFileSystem"]


class AsyncScopedFileSystem(AsyncSkillRuntimeFileSystem):
    """Wraps an async runtime file system; the arguments are those of :class:`PathScope`."""

    def __init__(
        self,
        inner: AsyncSkillRuntimeFileSystem,
        *,
        workspace: ConversationWorkspace | None = None,
        is_closed: Callable[[], bool] = lambda: False,
        check_real_path: Callable[[str], str] | None = None,
        runtime_name: str = "runtime",
        base_directory: str | None = None,
    ) -> None:
        self._inner = inner
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
        return self._inner.read_stream(self._scope.path(path), chunk_size)

    async def write_stream(
        self, path: str, chunks: AsyncChunks, *, executable: bool = False
    ) -> int:
        return await self._inner.write_stream(self._scope.path(path), chunks, executable=executable)

    async def stat(self, path: str) -> FileInfo | None:
        return await self._inner.stat(self._scope.path(path))

    async def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return await self._inner.list_directory(self._scope.path(path), depth, limit)

    async def delete(self, path: str) -> None:
        await self._inner.delete(self._scope.deletable(path))

    async def make_directory(self, path: str) -> None:
        await self._inner.make_directory(self._scope.path(path))

    async def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        return await self._inner.read_bytes(self._scope.path(path), max_bytes)

    async def list_files(
        self, path: str, depth: int = 1_000_000, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return await self._inner.list_files(self._scope.path(path), depth, limit)

    async def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        scoped = [(local, self._scope.path(remote), flag) for local, remote, flag in files]
        return await self._inner.upload_files(scoped)
