"""Counting backend calls of a :class:`BaseSkillRuntime` to prove a path was refused up front.

:func:`install_backend_spy` wraps a fresh runtime's ``_run`` and ``_raw_file_system`` hooks (on the
instance, nothing global). The raw file system is handed out as a lazy proxy: the backend's own
``_raw_file_system`` is only called, and a call only counted, when an operation reaches it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterable
from pathlib import Path

from ..files.spi import CHUNK_SIZE, DEFAULT_LIST_LIMIT, DEFAULT_READ_LIMIT, SkillRuntimeFileSystem
from ..models import FileInfo, SkillExecutionRequest, SkillExecutionResult
from ..runtime.spi import BaseSkillRuntime

__all__ = ["BackendSpy", "install_backend_spy"]


class BackendSpy:
    """Counts commands run and file-system operations that reached the backend."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[str] = []

    def record(self, what: str) -> None:
        with self._lock:
            self.calls.append(what)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.calls)


class _CountingFileSystem(SkillRuntimeFileSystem):
    """Delegates to the backend's raw file system, obtained lazily, recording each call."""

    def __init__(self, factory: Callable[[], SkillRuntimeFileSystem], spy: BackendSpy) -> None:
        self._factory = factory
        self._spy = spy

    def _inner(self, what: str, path: str) -> SkillRuntimeFileSystem:
        self._spy.record(f"{what} {path}")
        return self._factory()

    def read_stream(self, path: str, chunk_size: int = CHUNK_SIZE) -> Generator[bytes, None, None]:
        return self._inner("read_stream", path).read_stream(path, chunk_size)

    def write_stream(self, path: str, chunks: Iterable[bytes], *, executable: bool = False) -> int:
        return self._inner("write_stream", path).write_stream(path, chunks, executable=executable)

    def stat(self, path: str) -> FileInfo | None:
        return self._inner("stat", path).stat(path)

    def list_directory(
        self, path: str, depth: int = 1, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return self._inner("list_directory", path).list_directory(path, depth, limit)

    def delete(self, path: str) -> None:
        self._inner("delete", path).delete(path)

    def make_directory(self, path: str) -> None:
        self._inner("make_directory", path).make_directory(path)

    def read_bytes(self, path: str, max_bytes: int = DEFAULT_READ_LIMIT) -> bytes:
        return self._inner("read_bytes", path).read_bytes(path, max_bytes)

    def list_files(
        self, path: str, depth: int = 1_000_000, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[FileInfo]:
        return self._inner("list_files", path).list_files(path, depth, limit)

    def upload_files(self, files: Iterable[tuple[Path, str, bool]]) -> int:
        return self._inner("upload_files", "*").upload_files(files)


def install_backend_spy(runtime: BaseSkillRuntime) -> BackendSpy:
    """Wrap ``runtime``'s backend hooks so every call reaching the backend is recorded.

    Call it on a fresh runtime, before :meth:`~BaseSkillRuntime.get_file_system`.
    """
    spy = BackendSpy()
    # The spy wraps the backend hooks themselves (protected, for backends and this instrument);
    # the runtime offers them under no public name.
    real_run = runtime._run  # noqa: SLF001
    real_raw = runtime._raw_file_system  # noqa: SLF001

    def run(
        request: SkillExecutionRequest, working_directory: str, environment: dict[str, str]
    ) -> SkillExecutionResult:
        spy.record(f"run in {working_directory}")
        return real_run(request, working_directory, environment)

    counting = _CountingFileSystem(real_raw, spy)

    def raw_file_system() -> SkillRuntimeFileSystem:
        return counting

    # Instance attributes shadow the class's hooks for this object only.
    object.__setattr__(runtime, "_run", run)
    object.__setattr__(runtime, "_raw_file_system", raw_file_system)
    return spy
