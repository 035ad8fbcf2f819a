"""``overwrite_text`` of the local file system (one resolution for the check and the write)
against the default (``stat``, then ``write_text``) on every kind of target entry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skillruntime.core.errors import RuntimeIsADirectoryError, WorkspaceEscapeError
from skillruntime.core.files.spi import SkillRuntimeFileSystem
from skillruntime.local import LocalSkillRuntime
from skillruntime.local.filesystem import LocalFileSystem

KINDS = ["missing", "file", "directory", "link-file", "link-dir", "dangling", "outside", "fifo"]


def _make(workspace: Path, outside: Path, kind: str) -> str:
    target = workspace / "sub" / "target"
    target.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        target.write_text("old")
    elif kind == "directory":
        target.mkdir()
    elif kind == "link-file":
        (workspace / "real.txt").write_text("real")
        target.symlink_to(workspace / "real.txt")
    elif kind == "link-dir":
        (workspace / "realdir").mkdir()
        target.symlink_to(workspace / "realdir")
    elif kind == "dangling":
        target.symlink_to(workspace / "nowhere")
    elif kind == "outside":
        target.symlink_to(outside / "secret.txt")
    elif kind == "fifo":
        os.mkfifo(target)
    return "sub/target"


def _outcome(fs: LocalFileSystem, path: str, default: bool) -> object:
    try:
        if default:
            return SkillRuntimeFileSystem.overwrite_text(fs, path, "new é")
        return fs.overwrite_text(path, "new é")
    except Exception as exc:  # the error type is part of the contract compared
        return type(exc)


def _state(workspace: Path, outside: Path) -> dict[str, object]:
    found: dict[str, object] = {}
    for root in (workspace, outside):
        for path in sorted(root.rglob("*")):
            if path.is_symlink():
                found[str(path)] = ("link", os.readlink(path))
            elif path.is_file():
                found[str(path)] = path.read_text()
            else:
                found[str(path)] = "dir" if path.is_dir() else "special"
    return found


@pytest.mark.parametrize("confined", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_overwrite_text_does_what_stat_then_write_does(
    tmp_path: Path, kind: str, confined: bool
) -> None:
    results = []
    for variant in ("local", "default"):
        workspace = tmp_path / variant / "ws"
        outside = tmp_path / variant / "outside"
        workspace.mkdir(parents=True)
        outside.mkdir()
        (outside / "secret.txt").write_text("SECRET")
        fs = LocalFileSystem(str(workspace), root=str(workspace) if confined else None)
        path = _make(workspace, outside, kind)
        outcome = _outcome(fs, path, default=variant == "default")
        state = {
            key.replace(f"/{variant}/", "/"): str(value).replace(f"/{variant}/", "/")
            for key, value in _state(workspace, outside).items()
        }
        results.append((outcome, state))
    assert results[0] == results[1]
    outcome, state = results[0]
    assert state[str(tmp_path / "outside" / "secret.txt")] == "SECRET"
    if kind == "directory" or kind == "link-dir":
        assert outcome is RuntimeIsADirectoryError
    elif kind == "outside" and confined:
        assert outcome is WorkspaceEscapeError
    elif kind in ("file", "link-file", "fifo") or (kind == "outside" and not confined):
        assert outcome == (len("new é".encode()), True)
    else:
        assert outcome == (len("new é".encode()), kind == "dangling")


def test_the_write_tool_answers_through_one_call(tmp_path: Path) -> None:
    from skillruntime.core.tools import SkillTools

    with LocalSkillRuntime(conversation_id="w", conversations_root=tmp_path) as runtime:
        tools = SkillTools(runtime)
        home = runtime.default_working_directory
        created = tools.dispatch("write", {"file_path": "a/b.txt", "content": "x"})
        assert created == f"Successfully created file in local runtime: {home}/a/b.txt (1 bytes)"
        again = tools.dispatch("write", {"file_path": "a/b.txt", "content": "yz"})
        assert again == f"Successfully overwrote file in local runtime: {home}/a/b.txt (2 bytes)"
        refused = tools.dispatch("write", {"file_path": "a", "content": "x"})
        assert refused == f"Error: Path is a directory, not a file: {home}/a"
        assert (Path(home) / "a" / "b.txt").read_text() == "yz"
