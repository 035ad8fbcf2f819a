"""Conversation id/root rules and path scoping."""

from __future__ import annotations

import pytest

from skillruntime.core.errors import WorkspaceEscapeError
from skillruntime.core.workspace import (
    ConversationWorkspace,
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
