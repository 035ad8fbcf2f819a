"""A search that the wrapped file system runs itself is audited alike on both scoped faces.

``ScopedFileSystem`` is generated from ``AsyncScopedFileSystem``: a ``glob`` or ``grep`` forwarded
to the backend's own implementation is one ``file.list`` or ``file.read`` event on either face
(the async face emitted none before the two became one source), and the default walk is audited
per primitive it runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from audit_capture import AuditCapture

from skillruntime.core.files.search import GlobQuery, GrepQuery, SearchResult
from skillruntime.core.models import FileInfo
from skillruntime.core.runtime.async_scoped import AsyncScopedFileSystem
from skillruntime.core.runtime.bridge import ThreadedAsyncFileSystem
from skillruntime.core.runtime.scoped import ScopedFileSystem
from skillruntime.local import LocalFileSystem


class _OwnSearch(LocalFileSystem):
    """A backend with its own ``glob`` and ``grep`` (the local one has its own ``grep``)."""

    calls: list[str]

    def glob(self, root: FileInfo, query: GlobQuery) -> SearchResult:
        self.calls.append("glob")
        return super().glob(root, query)


def _tree(base: Path) -> _OwnSearch:
    (base / "a").mkdir()
    (base / "a" / "x.txt").write_text("needle\n")
    (base / "b.txt").write_text("hay\nneedle\n")
    fs = _OwnSearch(str(base))
    fs.calls = []
    return fs


def _sync_kinds(base: Path, capture: AuditCapture) -> tuple[list[str], list[str]]:
    inner = _tree(base)
    scoped = ScopedFileSystem(inner, runtime_name="local")
    root = scoped.stat(str(base))
    assert root is not None
    capture.collector.events.clear()
    assert len(scoped.glob(root, GlobQuery("**/*.txt")).entries) == 2
    assert inner.calls == ["glob"]
    globbed = [event.kind for event in capture.events]
    capture.collector.events.clear()
    assert len(scoped.grep(root, GrepQuery("needle")).entries) == 2
    grepped = [event.kind for event in capture.events]
    capture.collector.events.clear()
    return globbed, grepped


def _async_kinds(base: Path, capture: AuditCapture) -> tuple[list[str], list[str]]:
    inner = _tree(base)
    scoped = AsyncScopedFileSystem(ThreadedAsyncFileSystem(inner), runtime_name="local")

    async def scenario() -> tuple[list[str], list[str]]:
        root = await scoped.stat(str(base))
        assert root is not None
        capture.collector.events.clear()
        assert len((await scoped.glob(root, GlobQuery("**/*.txt"))).entries) == 2
        assert inner.calls == ["glob"]
        globbed = [event.kind for event in capture.events]
        capture.collector.events.clear()
        assert len((await scoped.grep(root, GrepQuery("needle"))).entries) == 2
        grepped = [event.kind for event in capture.events]
        capture.collector.events.clear()
        return globbed, grepped

    return asyncio.run(scenario())


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_forwarded_search_is_one_event_on_either_face(
    face: str, tmp_path: Path, capture: AuditCapture
) -> None:
    kinds = _sync_kinds if face == "sync" else _async_kinds
    globbed, grepped = kinds(tmp_path, capture)
    assert globbed == ["file.list"]
    assert grepped[0] == "file.read"
    assert set(grepped) == {"file.read"}


def test_both_faces_emit_the_same_events(tmp_path: Path, capture: AuditCapture) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "t").mkdir()
    assert _sync_kinds(tmp_path / "s", capture) == _async_kinds(tmp_path / "t", capture)
