"""Conversation id/root rules and path scoping."""

from __future__ import annotations

import posixpath
from collections.abc import Generator, Iterable

import pytest

from skillruntime.core.errors import WorkspaceEscapeError
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.core.models import FileInfo
from skillruntime.core.runtime.scoped import ScopedFileSystem
from skillruntime.core.runtime.workspace import (
    ConversationWorkspace,
    resolve_against,
    validate_conversation_id,
    validate_conversations_root,
)


@pytest.mark.parametrize("cid", ["a", "A1", "conv-1.2_3", "x" * 128])
def test_valid_conversation_ids(cid: str) -> None:
    assert validate_conversation_id(cid) == cid


@pytest.mark.parametrize("cid", ["", ".", "..", "-a", "_a", "a/b", "a b", "x" * 129, "é"])
def test_invalid_conversation_ids(cid: str) -> None:
    with pytest.raises(ValueError, match="conversation_id must be 1-128 characters"):
        validate_conversation_id(cid)


@pytest.mark.parametrize("root", ["relative", "", "/", "//", "/a/.."])
def test_invalid_roots(root: str) -> None:
    with pytest.raises(ValueError, match="conversations_root"):
        validate_conversations_root(root)


def test_root_is_normalised() -> None:
    assert validate_conversations_root("/srv//convs/./x/../") == "/srv/convs"


def test_workspace_layout() -> None:
    ws = ConversationWorkspace("/srv/convs", "c1")
    assert ws.directory == "/srv/convs/c1"
    assert ws.skills_directory == "/srv/convs/c1/skills"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("out.txt", "/srv/convs/c1/out.txt"),
        ("a/../b", "/srv/convs/c1/b"),
        (".", "/srv/convs/c1"),
        ("/srv/convs/c1/x", "/srv/convs/c1/x"),
        ("/srv/convs/c1", "/srv/convs/c1"),
    ],
)
def test_resolve_inside(path: str, expected: str) -> None:
    assert ConversationWorkspace("/srv/convs", "c1").resolve(path) == expected


@pytest.mark.parametrize(
    "path", ["..", "../c2/x", "/etc/passwd", "/srv/convs/c10/x", "/srv/convs", "a/../../x"]
)
def test_resolve_escapes(path: str) -> None:
    with pytest.raises(WorkspaceEscapeError, match="outside the conversation workspace"):
        ConversationWorkspace("/srv/convs", "c1").resolve(path)


def test_resolve_rejects_empty_and_nul() -> None:
    ws = ConversationWorkspace("/srv/convs", "c1")
    with pytest.raises(ValueError, match="path must not be empty"):
        ws.resolve("")
    with pytest.raises(WorkspaceEscapeError):
        ws.resolve("a\x00b")


# ------------------------------------------------- relative paths without a workspace


@pytest.mark.parametrize(
    "relative", ["a", "b c/é", "./x", "dir/./..x/x..", "a//b/", "a/b/../c", "."]
)
def test_relative_paths_without_a_workspace_resolve_against_the_base(relative: str) -> None:
    resolved = resolve_against("/srv/work", relative)
    assert resolved == posixpath.normpath("/srv/work/" + relative)
    assert resolved == "/srv/work" or resolved.startswith("/srv/work/")
    assert resolve_against("/srv/work", "/" + relative) == posixpath.normpath("/" + relative)


def test_resolve_against_refuses_empty_and_nul_paths() -> None:
    with pytest.raises(ValueError, match="empty"):
        resolve_against("/srv", "  ")
    with pytest.raises(WorkspaceEscapeError, match="NUL"):
        resolve_against("/srv", "a\x00b")


def test_scoped_file_system_without_workspace_hands_absolute_paths_on() -> None:
    seen: list[str] = []

    class Recording(SkillRuntimeFileSystem):
        def read_stream(self, path: str, chunk_size: int = 65536) -> Generator[bytes, None, None]:
            seen.append(path)
            yield b""

        def write_stream(
            self, path: str, chunks: Iterable[bytes], *, executable: bool = False
        ) -> int:
            seen.append(path)
            return 0

        def stat(self, path: str) -> FileInfo | None:
            seen.append(path)
            return None

        def list_directory(self, path: str, depth: int = 1, limit: int = 1000) -> list[FileInfo]:
            seen.append(path)
            return []

        def delete(self, path: str) -> None:
            seen.append(path)

        def make_directory(self, path: str) -> None:
            seen.append(path)

    fs = ScopedFileSystem(Recording(), base_directory="/srv/work")
    fs.write_text("notes/a.txt", "x")
    fs.stat("./notes/../b")
    fs.delete("/elsewhere/c")
    fs.make_directory("d")
    assert seen == ["/srv/work/notes/a.txt", "/srv/work/b", "/elsewhere/c", "/srv/work/d"]
    with pytest.raises(ValueError, match="absolute"):
        ScopedFileSystem(Recording(), base_directory="relative")
