"""``glob`` and ``grep`` reach a backend's own override through the async scope and both thread
bridges, and the files the search reads on the client go through the caller's ``read_text``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from skillruntime.core.files.async_spi import AsyncSkillRuntimeFileSystem
from skillruntime.core.files.search import (
    GlobQuery,
    GrepQuery,
    GrepResult,
    SearchResult,
    default_grep,
)
from skillruntime.core.models import FileInfo
from skillruntime.core.runtime.async_scoped import AsyncScopedFileSystem
from skillruntime.core.runtime.bridge import ThreadedAsyncFileSystem, _LoopFileSystem, _LoopThread
from skillruntime.local import LocalFileSystem


class _RecordingFileSystem(LocalFileSystem):
    """A backend with its own search: records each call; reads through ``read_text``."""

    calls: list[str]

    def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        self.calls.append("glob")
        return super().glob(root, query)

    def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], str] | None = None,
    ) -> GrepResult:
        self.calls.append("grep")
        return default_grep(self, root, query, read_text=read_text)


class _AsyncRecording(ThreadedAsyncFileSystem):
    """An async backend with its own search (the threaded view of the recording one)."""

    calls: list[str]

    async def grep(
        self,
        root: FileInfo,
        query: GrepQuery,
        *,
        read_text: Callable[[str, int], Awaitable[str]] | None = None,
    ) -> GrepResult:
        self.calls.append("async grep")
        return await super().grep(root, query, read_text=read_text)


def _tree(base: Path) -> _RecordingFileSystem:
    (base / "a").mkdir()
    (base / "a" / "x.txt").write_text("needle\n")
    (base / "b.txt").write_text("hay\nneedle\n")
    fs = _RecordingFileSystem(str(base))
    fs.calls = []
    return fs


def test_threaded_bridge_forwards_with_an_async_reader(tmp_path: Path) -> None:
    inner = _tree(tmp_path)
    read: list[str] = []

    async def reader(path: str, max_bytes: int) -> str:
        read.append(path)
        return (await bridged.read_text(path, max_bytes)).upper()

    bridged = ThreadedAsyncFileSystem(inner, ThreadPoolExecutor(2))

    async def scenario() -> tuple[GrepResult, SearchResult]:
        root = await bridged.stat(str(tmp_path))
        assert root is not None
        found = await bridged.grep(root, GrepQuery("NEEDLE"), read_text=reader)
        return found, await bridged.glob(root, GlobQuery("**/*.txt"))

    found, globbed = asyncio.run(scenario())
    assert inner.calls == ["grep", "glob"]
    assert (
        sorted(read)
        == sorted(found.entries)
        == [str(tmp_path / "a/x.txt"), str(tmp_path / "b.txt")]
    )
    assert len(globbed.entries) == 2


def test_async_scope_and_loop_bridge_forward_to_the_override(tmp_path: Path) -> None:
    inner = _tree(tmp_path)
    backend = _AsyncRecording(inner)
    backend.calls = []
    scoped = AsyncScopedFileSystem(backend)
    loop = _LoopThread("search-forwarding")
    try:
        sync_view = _LoopFileSystem(scoped, loop)
        root = sync_view.stat(str(tmp_path))
        assert root is not None
        assert sync_view.grep(root, GrepQuery("needle")).entries == [
            str(tmp_path / "b.txt"),
            str(tmp_path / "a/x.txt"),
        ]
        read: list[str] = []

        def reader(path: str, max_bytes: int) -> str:
            read.append(path)
            return "nothing here"

        assert sync_view.grep(root, GrepQuery("needle"), read_text=reader).entries == []
        assert len(read) == 2
        assert backend.calls == ["async grep", "async grep"]
        assert inner.calls == ["grep", "grep"]
    finally:
        loop.stop()


def test_a_default_backend_keeps_the_default_walk(tmp_path: Path) -> None:
    plain = LocalFileSystem(str(tmp_path))
    (tmp_path / "c.txt").write_text("needle\n")
    scoped = AsyncScopedFileSystem(ThreadedAsyncFileSystem(plain))
    assert type(scoped.inner).grep is not AsyncSkillRuntimeFileSystem.grep

    async def scenario() -> GrepResult:
        root = await scoped.stat(str(tmp_path))
        assert root is not None
        return await scoped.grep(root, GrepQuery("needle"))

    assert asyncio.run(scenario()).entries == [str(tmp_path / "c.txt")]
