"""Counting backend calls of an :class:`AsyncBaseSkillRuntime` (the async twin of :mod:`.spy`).

:func:`install_async_backend_spy` wraps a fresh runtime's ``_run`` and ``_raw_file_system`` hooks
on the instance; the raw file system is a lazy proxy that records each operation reaching it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterable
from pathlib import Path

from ..files.async_spi import AsyncChunks, AsyncSkillRuntimeFileSystem
from ..files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, DEFAULT_READ_LIMIT
from ..models import FileInfo, SkillExecutionRequest, SkillExecutionResult
from ..runtime.async_spi import AsyncBaseSkillRuntime
from .spy import BackendSpy

__all__ = ["install_async_backend_spy"]


class _CountingAsyncFileSystem(AsyncSkillRuntimeFileSystem):
    """Delegates to the backend's raw async file system, recording each call."""

    def __init__(self, factory: Callable[[], AsyncSkillRuntimeFileSystem], spy: BackendSpy) -> None:
        self._factory = factory
        self._spy = spy

    def _inner(self, what: str, path: str) -> AsyncSkillRuntimeFileSystem:
        self._spy.record(f"{what} {path}")
        return self._factory()

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> AsyncGenerator[bytes, None]:
        return self._inner("read_stream", path).read_stream(path, chunk_size)

    async def write_stream(
        self, path: str, chunks: AsyncChunks, *, executable: bool = False
    ) -> int:
        inner = self._inner("write_stream", path)
        return await inner.write_stream(path, chunks, executable=executable)

    async def stat(self, path: str) -> FileInfo | None:
        return await self._inner("stat", path).stat(path)

    async def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return await self._inner("list_directory", path).list_directory(path, depth, limit)

    async def delete(self, path: str) -> None:
        await self._inner("delete", path).delete(path)

    async def make_directory(self, path: str) -> None:
        await self._inner("make_directory", path).make_directory(path)

    async def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        return await self._inner("read_bytes", path).read_bytes(path, max_bytes)

    async def list_files(
        self, path: str, depth: int = 1_000_000, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return await self._inner("list_files", path).list_files(path, depth, limit)

    async def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        return await self._inner("upload_files", "*").upload_files(files)


def install_async_backend_spy(runtime: AsyncBaseSkillRuntime) -> BackendSpy:
    """Wrap ``runtime``'s backend hooks so every call reaching the backend is recorded.

    Call it on a fresh runtime, before :meth:`~AsyncBaseSkillRuntime.get_file_system`.
    """
    spy = BackendSpy()
    # The spy wraps the backend hooks themselves (protected, for backends and this instrument);
    # the runtime offers them under no public name.
    real_run = runtime._run  # noqa: SLF001
    real_raw = runtime._raw_file_system  # noqa: SLF001

    async def run(
        request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        spy.record(f"run in {working_directory}")
        return await real_run(request, working_directory, environment)

    counting = _CountingAsyncFileSystem(real_raw, spy)

    def raw_file_system() -> AsyncSkillRuntimeFileSystem:
        return counting

    object.__setattr__(runtime, "_run", run)
    object.__setattr__(runtime, "_raw_file_system", raw_file_system)
    return spy
