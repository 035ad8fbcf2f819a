"""The local file system raises the typed file errors, mapped from the system's errno.

Permission errors are produced by a real immutable directory (``FS_IMMUTABLE_FL`` set through the
``FS_IOC_SETFLAGS`` ioctl, which refuses changes even to root), not by a simulated ``OSError``.
"""

from __future__ import annotations

import array
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillruntime.core.errors import (
    NotADirectoryFileError,
    RuntimeIsADirectoryError,
    RuntimePermissionError,
    file_error_code,
)
from skillruntime.local import LocalFileSystem, LocalSkillRuntime

_FS_IOC_GETFLAGS = 0x80086601
_FS_IOC_SETFLAGS = 0x40086602
_FS_IMMUTABLE_FL = 0x00000010


def _set_immutable(path: Path, immutable: bool) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        if immutable:
            flags[0] |= _FS_IMMUTABLE_FL
        else:
            flags[0] &= ~_FS_IMMUTABLE_FL
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, flags)
    finally:
        os.close(fd)


@pytest.fixture
def frozen(tmp_path: Path) -> Iterator[Path]:
    """A directory holding ``kept.txt`` and ``sub/``, made immutable for the test."""
    directory = tmp_path / "frozen"
    (directory / "sub").mkdir(parents=True)
    (directory / "kept.txt").write_text("kept")
    _set_immutable(directory, True)
    try:
        yield directory
    finally:
        _set_immutable(directory, False)


def test_changes_in_an_immutable_directory_are_permission_errors(
    frozen: Path, tmp_path: Path
) -> None:
    fs = LocalFileSystem(str(tmp_path))
    source = tmp_path / "source.txt"
    source.write_text("x")
    for change in (
        lambda: fs.write_text("frozen/new.txt", "x"),
        lambda: fs.write_text("frozen/kept.txt", "replaced"),
        lambda: fs.upload(source, "frozen/uploaded.txt"),
        lambda: fs.delete("frozen/kept.txt"),
        lambda: fs.delete("frozen/sub"),
        lambda: fs.make_directory("frozen/made"),
        lambda: fs.write_text("frozen/deeper/new.txt", "x"),
    ):
        with pytest.raises(RuntimePermissionError, match="frozen") as caught:
            change()
        assert file_error_code(caught.value) == "permission_denied"
    assert sorted(os.listdir(frozen)) == ["kept.txt", "sub"]
    assert fs.read_text("frozen/kept.txt") == "kept"


def test_workspace_permission_errors_are_typed(tmp_path: Path) -> None:
    with LocalSkillRuntime(conversation_id="perm", conversations_root=tmp_path) as runtime:
        fs = runtime.get_file_system()
        fs.write_text("locked/file.txt", "x")
        locked = Path(runtime.default_working_directory) / "locked"
        _set_immutable(locked, True)
        try:
            with pytest.raises(RuntimePermissionError):
                fs.write_text("locked/other.txt", "y")
            with pytest.raises(RuntimePermissionError):
                fs.delete("locked/file.txt")
        finally:
            _set_immutable(locked, False)


def test_reading_a_directory_is_an_is_a_directory_error(tmp_path: Path) -> None:
    fs = LocalFileSystem(str(tmp_path))
    fs.make_directory("dir")
    for read in (
        lambda: fs.read_bytes("dir"),
        lambda: fs.read_text(str(tmp_path)),
        lambda: fs.download("dir", tmp_path / "copy"),
    ):
        with pytest.raises(RuntimeIsADirectoryError) as caught:
            read()
        assert file_error_code(caught.value) == "is_directory"
    assert not (tmp_path / "copy").exists()


def test_a_file_used_as_a_directory_is_a_not_a_directory_error(tmp_path: Path) -> None:
    fs = LocalFileSystem(str(tmp_path))
    fs.write_text("file.txt", "x")
    for misuse in (
        lambda: fs.list_directory("file.txt/sub"),
        lambda: fs.read_bytes("file.txt/sub"),
        lambda: fs.write_text("file.txt/sub/new.txt", "x"),
        lambda: fs.make_directory("file.txt/sub"),
    ):
        with pytest.raises(NotADirectoryFileError) as caught:
            misuse()
        assert file_error_code(caught.value) == "invalid_path"
    assert fs.stat("file.txt/sub") is None
    assert [info.name for info in fs.list_directory("file.txt")] == ["file.txt"]
